"""Per-rank ingest as Dask tasks, for folders of thousands of ranks on shared storage.

Per-rank parsing is embarrassingly parallel: :func:`~advisor_chat.ingest.rankdir.read_rank_dir` takes a
path, reads only files inside it and returns a picklable
:class:`~advisor_chat.ingest.common.RankData` (the rank's canonical tables, their sources, warnings and
metadata). :func:`load_profile_distributed` runs that function on the workers of an existing Dask
cluster (one task per batch of rank folders), so only the compact canonical tables travel back; the
client then assembles, validates and caches the :class:`~advisor_chat.ingest.profile.Profile` exactly
as :func:`~advisor_chat.ingest.loader.load_profile` does, and the result is the same tables.

Requirements: the optional extra ``pip install 'advisor-chat[distributed]'`` (``dask[distributed]``), and
every worker must see the profiling folder at the same path (NFS, Lustre, a mounted bucket...).
Cluster-level inputs (``cluster_analysis_output/``, small) are read on the client.

Example::

    from dask.distributed import Client
    from advisor_chat.ingest.distributed import load_profile_distributed

    profile = load_profile_distributed("/shared/job42/prof", "tcp://scheduler:8786")
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from advisor_chat.config import Settings, load_settings
from advisor_chat.errors import ConfigError
from advisor_chat.ingest import cache as cache_mod
from advisor_chat.ingest import loader as _loader
from advisor_chat.ingest.cluster import read_cluster_dir
from advisor_chat.ingest.common import RankData
from advisor_chat.ingest.detect import detect, unit_files
from advisor_chat.ingest.msprof import read_msprof_dir
from advisor_chat.ingest.profile import DataWarning, Profile
from advisor_chat.ingest.rankdir import OUTPUT, read_rank_dir

__all__ = ["load_profile_distributed", "read_rank_batch"]


def read_rank_batch(paths: list[str]) -> list[RankData]:
    """Parse a batch of rank folders on a worker (the task body).

    Args:
        paths: Absolute paths of ``*_ascend_pt`` / ``*_ascend_ms`` rank folders, visible to the worker.

    Returns:
        One :class:`RankData` per path, in order (canonical tables only, no file handles).

    Raises:
        InputError: A rank folder is unreadable or corrupt (re-raised on the client by Dask).
    """
    return [read_rank_dir(p) for p in paths]


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


def _batches(paths: list[str], n_workers: int, batch_size: int | None) -> list[list[str]]:
    if not paths:
        return []
    if batch_size is None:
        # a few tasks per worker so stragglers balance out, but not one task per tiny rank
        batch_size = max(1, -(-len(paths) // max(1, n_workers * 4)))
    return [paths[i : i + batch_size] for i in range(0, len(paths), batch_size)]


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
        use_cache: Read/write the same Parquet cache as ``load_profile`` (on the client's file system).
        batch_size: Rank folders per task (default: about four tasks per worker).

    Returns:
        The assembled, validated profile.

    Raises:
        InputError: Missing/empty path, nothing recognizable, or a rank folder that cannot be read.
        ConfigError: Dask is not installed or ``client_or_address`` is not usable.
    """
    t0 = time.perf_counter()
    settings = settings or load_settings()
    root = _loader._check_root(path)
    layout = detect(root)
    if layout.empty:
        raise _loader._no_data(root)

    warnings: list[DataWarning] = []
    good = [d for d in layout.rank_dirs if (d / OUTPUT).is_dir()] + layout.loose_dirs
    bad = [d for d in layout.rank_dirs if not (d / OUTPUT).is_dir()]
    if bad and not good and not layout.cluster_dirs and not layout.msprof_dirs:
        read_rank_dir(bad[0])  # raises the InputError with the offline-parse remedy
    for d in bad:
        warnings.append(
            DataWarning(
                code="no_profiler_output",
                message=f"skipped {d}: it has no {OUTPUT}/ (raw data only); run the offline parse "
                f"`torch_npu.profiler.profiler.analyse('{d}')` to include it",
                path=str(d),
            )
        )
    files: list[tuple[str, int, int]] = []
    for d in good:
        files += unit_files(d, "rank" if d not in layout.loose_dirs else "loose")
    for d in layout.cluster_dirs:
        files += unit_files(d, "cluster")
    for d in layout.msprof_dirs:
        files += unit_files(d, "msprof")
    key = cache_mod.cache_key(root, files)
    caching = use_cache and settings.cache
    if caching:
        cached = cache_mod.load(settings.cache_dir, key)
        if cached is not None:
            cached.stats = {"files_parsed": 0, "seconds": time.perf_counter() - t0}
            return cached

    client, own = _client(client_or_address)
    try:
        n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        rank_batches = _batches([str(d) for d in good], n_workers, batch_size)
        msprof_batches = _batches([str(d) for d in layout.msprof_dirs], n_workers, batch_size)
        rank_futs = client.map(read_rank_batch, rank_batches, pure=False)
        msprof_futs = client.map(read_msprof_batch, msprof_batches, pure=False)
        cluster_data = [read_cluster_dir(d) for d in layout.cluster_dirs]
        rank_data = [rd for batch in client.gather(rank_futs) for rd in batch]
        msprof_data = [rd for batch in client.gather(msprof_futs) for rd in batch]
    finally:
        if own:
            client.close()

    profile = _loader._assemble(root, layout, rank_data, cluster_data, msprof_data, warnings)
    profile.profile_id = key
    profile.stats = {
        "files_parsed": float(sum(r.parsed_files for r in rank_data + cluster_data + msprof_data)),
        "ranks_read": float(len(rank_data) + len(msprof_data)),
        "seconds": time.perf_counter() - t0,
        "tasks": float(len(rank_batches) + len(msprof_batches)),
    }
    if caching:
        cache_mod.save(settings.cache_dir, key, profile)
    return profile
