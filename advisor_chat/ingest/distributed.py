"""Per-rank ingest as Dask tasks, for folders of thousands of ranks on shared storage.

Per-rank parsing is embarrassingly parallel. :func:`load_profile_distributed` runs the same batch reader
as the local pool, :func:`~advisor_chat.ingest.loader.read_light_batch` (light tables of a batch of rank
folders as one DataFrame per table, plus per-rank metadata), on the workers of an existing Dask cluster
(one task per batch of rank folders), so only compact batch tables travel back; the heavy files
(``kernel_details.csv``, ``trace_view.json``) are read later, on the client, for the ranks an analysis
examines (:class:`~advisor_chat.ingest.loader.HeavyReader`). The
client then assembles, validates and caches the :class:`~advisor_chat.ingest.profile.Profile` with the
same public steps as :func:`~advisor_chat.ingest.loader.load_profile` (``plan_ingest`` →
``load_cached`` → parse → ``assemble_profile`` → ``save_cached``), so the result is the same tables.
Another engine (Ray, a batch scheduler) can follow the same recipe.

Requirements: the optional extra ``pip install 'advisor-chat[distributed]'`` (``dask[distributed]``), and
every worker must see the profiling folder at the same path (NFS, Lustre, a mounted bucket...).
Cluster-level inputs (``cluster_analysis_output/``, small) are read on the client.

Example::

    from dask.distributed import Client
    from advisor_chat.ingest.distributed import load_profile_distributed

    profile = load_profile_distributed("/shared/job42/prof", "tcp://scheduler:8786")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor_chat.config import Settings, load_settings
from advisor_chat.errors import ConfigError
from advisor_chat.ingest.cluster import read_cluster_dir
from advisor_chat.ingest.common import RankData
from advisor_chat.ingest.loader import (
    assemble_profile,
    batch_paths,
    heavy_cache_dir,
    load_cached,
    plan_ingest,
    read_light_batch,
    read_rank_batch,
    save_cached,
)
from advisor_chat.ingest.msprof import read_msprof_dir
from advisor_chat.ingest.profile import Profile

__all__ = ["load_profile_distributed", "read_rank_batch"]


def read_msprof_batch(paths: list[str]) -> list[RankData]:
    """Parse a batch of msprof ``PROF_*`` folders on a worker."""
    return [read_msprof_dir(Path(p)) for p in paths]


def _client(client_or_address: Any) -> tuple[Any, bool]:
    try:
        from dask.distributed import Client
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ConfigError(
            "distributed ingest needs Dask: pip install 'advisor-chat[distributed]'"
        ) from exc
    if isinstance(client_or_address, Client):
        return client_or_address, False
    if isinstance(client_or_address, str):
        return Client(client_or_address), True
    if hasattr(client_or_address, "scheduler_address"):  # a LocalCluster / deployed cluster object
        return Client(client_or_address), True
    raise ConfigError(
        f"expected a dask.distributed.Client, a cluster or a scheduler address, got {client_or_address!r}"
    )


def load_profile_distributed(
    path: str | Path,
    client_or_address: Any,
    *,
    settings: Settings | None = None,
    use_cache: bool = True,
    batch_size: int | None = None,
) -> Profile:
    """Load a profiling folder with per-rank parsing on a Dask cluster.

    Same result as :func:`~advisor_chat.ingest.loader.load_profile` (same canonical tables, sources,
    warnings, cache key): only where ranks are parsed differs.

    Args:
        path: The profiling folder (see ``load_profile``); it must be visible at the same path on every
            worker.
        client_or_address: A ``dask.distributed.Client``, a cluster object (e.g. ``LocalCluster``) or a
            scheduler address (``"tcp://host:8786"``). A client made here is closed before returning.
        settings: Settings (cache folder); loaded from env/config when ``None``.
        use_cache: Read/write the same cache as ``load_profile`` (on the client's file system).
        batch_size: Rank folders per task (default: about four tasks per worker).

    Returns:
        The assembled, validated profile.

    Raises:
        InputError: Missing/empty path, nothing recognizable, or a rank folder that cannot be read.
        ConfigError: Dask is not installed or ``client_or_address`` is not usable.
    """
    settings = settings or load_settings()
    plan = plan_ingest(path)
    cached = load_cached(plan, settings, use_cache=use_cache)
    if cached is not None:
        return cached

    client, own = _client(client_or_address)
    try:
        n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        rank_batches = batch_paths([str(d) for d in plan.rank_dirs], n_workers, batch_size)
        msprof_batches = batch_paths([str(d) for d in plan.msprof_dirs], n_workers, batch_size)
        rank_futs = client.map(read_light_batch, rank_batches, pure=False)
        msprof_futs = client.map(read_msprof_batch, msprof_batches, pure=False)
        cluster_data = [read_cluster_dir(d) for d in plan.cluster_dirs]
        light = client.gather(rank_futs)
        rank_data = [rd for batch in light for rd in batch.units]
        msprof_data = [rd for batch in client.gather(msprof_futs) for rd in batch]
    finally:
        if own:
            client.close()

    profile = assemble_profile(
        plan,
        rank_data,
        cluster_data,
        msprof_data,
        extra_stats={"tasks": float(len(rank_batches) + len(msprof_batches))},
        batch_tables=[b.tables for b in light],
        heavy_cache=heavy_cache_dir(settings, plan.cache_key, use_cache),
    )
    save_cached(plan, settings, profile, use_cache=use_cache)
    return profile
