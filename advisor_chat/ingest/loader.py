"""``load_profile``: detect the layout of a folder, read every unit (ranks in parallel), merge, validate.

Mixed folders (per-rank ``*_ascend_pt`` data **and** a ``cluster_analysis_output/`` side by side)
are common: msprof-analyze writes its output next to the rank folders. The per-rank data is
preferred because it is the primary record (op-level kernels, host dispatch, memory, exact per-rank
communication) and the cluster output is derived from it, possibly by an older tool version or
from another subset of ranks. The cluster output is still read and recorded in
``Profile.extra_sources``; it contributes only what the rank folders cannot give (``stage_trace``,
and communication groups whose hash the rank data does not describe) and any table that no rank
folder provided.

Nothing is written inside the input folder: the Parquet cache lives under ``settings.cache_dir``
and SQLite files are opened read-only/immutable.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from advisor_chat.config import Settings, load_settings
from advisor_chat.errors import InputError
from advisor_chat.ingest import cache as cache_mod
from advisor_chat.ingest.cluster import read_cluster_dir
from advisor_chat.ingest.common import RankData, double_hash, unreadable
from advisor_chat.ingest.detect import Layout, detect, unit_files
from advisor_chat.ingest.guard import check_units
from advisor_chat.ingest.msprof import read_msprof_dir
from advisor_chat.ingest.profile import DataWarning, Profile, TableSource
from advisor_chat.ingest.rankdir import OUTPUT, read_rank_dir
from advisor_chat.ingest.schema import TABLE_SPECS, validate_table

__all__ = [
    "PARSE_STATS",
    "IngestPlan",
    "assemble_profile",
    "batch_paths",
    "check_root",
    "load_cached",
    "load_profile",
    "no_data_error",
    "plan_ingest",
    "read_rank_batch",
    "read_rank_dir",
    "save_cached",
]

#: Process-wide counters a test can assert on (e.g. that a cached reload parsed nothing).
PARSE_STATS: dict[str, int] = {"loads": 0, "parses": 0, "cache_hits": 0, "units_read": 0}

_SERIAL_BELOW = 6


def read_rank_batch(paths: list[str]) -> list[RankData]:
    """Parse a batch of rank folders (the task body of the process pool and of distributed ingest).

    Args:
        paths: Absolute paths of ``*_ascend_pt`` / ``*_ascend_ms`` rank folders.

    Returns:
        One :class:`RankData` per path, in order (canonical tables only, no file handles).

    Raises:
        InputError: A rank folder is unreadable or corrupt.
    """
    return [read_rank_dir(p) for p in paths]


def batch_paths(paths: list[str], n_workers: int, batch_size: int | None = None) -> list[list[str]]:
    """Split ``paths`` into tasks of consecutive folders, about four tasks per worker.

    Four per worker lets stragglers balance out while each task carries enough ranks that the
    per-task overhead (pickling, scheduling) stays small.

    Args:
        paths: Unit folders, in order.
        n_workers: Workers that will run the tasks.
        batch_size: Force this many paths per task.

    Returns:
        Consecutive slices of ``paths`` (concatenated they give ``paths`` back).
    """
    if not paths:
        return []
    if batch_size is None:
        batch_size = max(1, -(-len(paths) // max(1, n_workers * 4)))
    return [paths[i : i + batch_size] for i in range(0, len(paths), batch_size)]


def _progress_enabled(progress: bool | None, n: int) -> bool:
    if progress is not None:
        return bool(progress)
    return n >= 32 and sys.stderr.isatty()


def _read_ranks(dirs: list[Path], workers: int, progress: bool) -> list[RankData]:
    if not dirs:
        return []
    bar = None
    task = None
    if progress:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        bar = Progress(
            TextColumn("reading ranks"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=sys.stderr.isatty(),
        )
        bar.start()
        task = bar.add_task("ranks", total=len(dirs))
    try:
        if workers <= 1 or len(dirs) < _SERIAL_BELOW:
            out = []
            for d in dirs:
                out.append(read_rank_dir(d))
                if bar is not None and task is not None:
                    bar.advance(task)
            return out
        batches = batch_paths([str(d) for d in dirs], workers)
        results: dict[int, list[RankData]] = {}
        ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futs = {pool.submit(read_rank_batch, b): i for i, b in enumerate(batches)}
            for fut in cf.as_completed(futs):
                results[futs[fut]] = fut.result()
                if bar is not None and task is not None:
                    bar.advance(task, len(batches[futs[fut]]))
        return [rd for i in range(len(batches)) for rd in results[i]]
    finally:
        if bar is not None:
            bar.stop()


def check_root(path: str | Path) -> Path:
    """Resolve and check the folder given by the user before anything is read.

    Args:
        path: The profiling folder as typed (``~`` is expanded).

    Returns:
        The absolute, resolved folder.

    Raises:
        InputError: The path does not exist, is a file, is unreadable or is empty.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise InputError(
            f"the path {root} does not exist",
            path=root,
            remedy="Check the spelling, or copy the profiling folder (the one holding the "
            "*_ascend_pt rank folders) to this machine and pass its path",
        )
    root = root.resolve()
    if root.is_file():
        raise InputError(
            f"{root} is a file, not a profiling folder",
            path=root,
            remedy="Pass the folder that holds the *_ascend_pt / *_ascend_ms rank folders, a PROF_* "
            "folder or a cluster_analysis_output/ folder (unzip archives first)",
        )
    if not os.access(root, os.R_OK | os.X_OK):
        raise unreadable(root / ".")
    try:
        entries = os.listdir(root)
    except PermissionError as exc:
        raise unreadable(root / ".") from exc
    if not entries:
        raise InputError(
            f"the folder {root} is empty",
            path=root,
            remedy="Copy the profiler output into it (the *_ascend_pt rank folders with "
            "ASCEND_PROFILER_OUTPUT/), or point at the folder that holds it",
        )
    return root


def no_data_error(root: Path) -> InputError:
    """The :class:`InputError` for a folder holding no recognizable Ascend profiling data."""
    return InputError(
        f"no recognizable Ascend profiling data under {root}: no *_ascend_pt / *_ascend_ms rank folder, "
        "no ASCEND_PROFILER_OUTPUT/, no PROF_*/mindstudio_profiler_output/ and no "
        "cluster_analysis_output/ was found (searched 10 levels deep)",
        path=root,
        remedy="Point at the folder written by torch_npu.profiler (tensorboard_trace_handler dir), "
        "msprof --output, or msprof-analyze cluster",
    )


@dataclass
class IngestPlan:
    """What :func:`plan_ingest` found in a folder, before any file is parsed.

    Attributes:
        root: The resolved profiling folder.
        layout: Detected rank / cluster / msprof folders.
        rank_dirs: Rank folders to parse (``*_ascend_pt``/``*_ascend_ms`` with
            ``ASCEND_PROFILER_OUTPUT/``, and folders of loose files), in detection order.
        warnings: Warnings found while planning (rank folders skipped for lack of parsed output).
        cache_key: Cache key of the identity ``(path, size, mtime_ns)`` of every file a reader may open.
        started: ``time.perf_counter()`` when planning began (for ``Profile.stats["seconds"]``).
    """

    root: Path
    layout: Layout
    rank_dirs: list[Path]
    warnings: list[DataWarning] = field(default_factory=list)
    cache_key: str = ""
    started: float = 0.0

    @property
    def msprof_dirs(self) -> list[Path]:
        """Msprof ``PROF_*`` folders (parsed like ranks)."""
        return list(self.layout.msprof_dirs)

    @property
    def cluster_dirs(self) -> list[Path]:
        """``cluster_analysis_output/`` folders (small; read where the profile is assembled)."""
        return list(self.layout.cluster_dirs)


def plan_ingest(path: str | Path) -> IngestPlan:
    """Check ``path``, detect its layout, list the units to parse and compute the cache key.

    Shared by :func:`load_profile` and
    :func:`advisor_chat.ingest.distributed.load_profile_distributed`.

    Raises:
        InputError: See :func:`check_root`; nothing recognizable under the folder; only rank
            folders without ``ASCEND_PROFILER_OUTPUT/`` (the offline-parse remedy).
    """
    started = time.perf_counter()
    root = check_root(path)
    layout = detect(root)
    if layout.empty:
        raise no_data_error(root)
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
    loose = set(layout.loose_dirs)
    files: list[tuple[str, int, int]] = []
    for d in good:
        files += unit_files(d, "loose" if d in loose else "rank")
    for d in layout.cluster_dirs:
        files += unit_files(d, "cluster")
    for d in layout.msprof_dirs:
        files += unit_files(d, "msprof")
    return IngestPlan(
        root=root,
        layout=layout,
        rank_dirs=good,
        warnings=warnings,
        cache_key=cache_mod.cache_key(root, files),
        started=started,
    )


def load_cached(plan: IngestPlan, settings: Settings, *, use_cache: bool = True) -> Profile | None:
    """The cached profile for ``plan`` (``cache_hit`` set, ``stats`` filled), or ``None``.

    ``None`` also when caching is off (``use_cache`` false or ``settings.cache`` false).
    """
    if not (use_cache and settings.cache):
        return None
    cached = cache_mod.load(settings.cache_dir, plan.cache_key)
    if cached is not None:
        PARSE_STATS["cache_hits"] += 1
        cached.stats = {"files_parsed": 0, "seconds": time.perf_counter() - plan.started}
    return cached


def save_cached(
    plan: IngestPlan, settings: Settings, profile: Profile, *, use_cache: bool = True
) -> None:
    """Write ``profile`` to the cache under ``plan.cache_key`` (no-op when caching is off)."""
    if use_cache and settings.cache:
        cache_mod.save(settings.cache_dir, plan.cache_key, profile)


def load_profile(
    path: str | Path,
    *,
    settings: Settings | None = None,
    use_cache: bool = True,
    progress: bool | None = None,
    workers: int | None = None,
) -> Profile:
    """Load a profiling folder into a validated :class:`Profile`.

    Args:
        path: A folder holding per-rank ``*_ascend_pt``/``*_ascend_ms`` folders (text or DB export),
            a ``cluster_analysis_output/``, ``PROF_*`` folders, or a mix; or one of those itself.
        settings: Settings (cache folder, default workers); loaded from env/config when ``None``.
        use_cache: Read/write the cache (also needs ``settings.cache``).
        progress: Show a progress bar on stderr (default: only for ≥ 32 ranks on a TTY).
        workers: Processes for per-rank parsing (default ``settings.workers``; 0 = CPU count).

    Returns:
        The profile; ``profile.cache_hit`` tells whether it came from the cache.

    Raises:
        InputError: Missing/empty/unreadable path, nothing recognizable, a rank folder without
            ``ASCEND_PROFILER_OUTPUT/`` (and nothing else usable), duplicate rank ids, a CSV without
            required columns, an unreadable or corrupt file.
    """
    settings = settings or load_settings()
    plan = plan_ingest(path)
    PARSE_STATS["loads"] += 1
    cached = load_cached(plan, settings, use_cache=use_cache)
    if cached is not None:
        return cached

    n_workers = settings.workers if workers is None else workers
    if n_workers <= 0:
        n_workers = os.cpu_count() or 1
    show = _progress_enabled(progress, len(plan.rank_dirs))
    rank_data = _read_ranks(plan.rank_dirs, n_workers, show)
    cluster_data = [read_cluster_dir(d) for d in plan.cluster_dirs]
    msprof_data = [read_msprof_dir(d) for d in plan.msprof_dirs]
    PARSE_STATS["parses"] += 1
    PARSE_STATS["units_read"] += len(rank_data) + len(cluster_data) + len(msprof_data)

    profile = assemble_profile(plan, rank_data, cluster_data, msprof_data)
    save_cached(plan, settings, profile, use_cache=use_cache)
    return profile


# ----------------------------------------------------------------------------- assembly


def _assign_ranks(units: list[RankData], warnings: list[DataWarning]) -> None:
    missing = [u for u in units if u.rank is None]
    if not missing:
        return
    used = {u.rank for u in units if u.rank is not None}
    nxt = 0
    for u in missing:
        while nxt in used:
            nxt += 1
        u.rank = nxt
        used.add(nxt)
        for df in u.tables.values():
            if "rank" in df.columns:
                df["rank"] = nxt
        u.sources = [TableSource(**{**s.__dict__, "rank": nxt}) for s in u.sources]
        warnings.append(
            DataWarning(
                code="rank_unknown",
                message=f"{u.source_dir} does not say its rank (no profiler_info_{{rank}}.json, "
                f"no rank in the DB name or info.json); assumed rank {nxt} by folder order",
                path=u.source_dir,
                ranks=(nxt,),
            )
        )


def _check_duplicates(units: list[RankData]) -> None:
    seen: dict[int, str] = {}
    for u in units:
        assert u.rank is not None
        if u.rank in seen:
            raise InputError(
                f"rank {u.rank} appears twice: in {seen[u.rank]} and in {u.source_dir}",
                path=u.source_dir,
                remedy="Keep one folder per rank (usually the newest run; the folder name ends in its "
                "timestamp) and move the other one out of the profiling folder",
            )
        seen[u.rank] = u.source_dir


def _concat(frames: Iterable[pd.DataFrame | None]) -> pd.DataFrame:
    fs = [f for f in frames if f is not None and not f.empty]
    if not fs:
        return pd.DataFrame()
    return pd.concat(fs, ignore_index=True) if len(fs) > 1 else fs[0].reset_index(drop=True)


def _map_matrix(
    rank_data: list[RankData], group_ranks: dict[str, list[int]], warnings: list[DataWarning]
) -> pd.DataFrame:
    frames = [u.tables["comm_matrix"] for u in rank_data if "comm_matrix" in u.tables]
    df = _concat(frames)
    if df.empty:
        return df
    learned: dict[str, dict[int, int]] = {}
    selfs = df.loc[df["src_local"] == df["dst_local"], ["group", "src_local", "rank"]]
    selfs = selfs[selfs["rank"].notna()]
    # the last row wins for a repeated (group, local rank), as in a row-by-row dict update
    selfs = selfs.assign(group=selfs["group"].astype(str)).drop_duplicates(
        ["group", "src_local"], keep="last"
    )
    for g, loc, r in zip(
        selfs["group"].tolist(), selfs["src_local"].tolist(), selfs["rank"].tolist(), strict=True
    ):
        learned.setdefault(g, {})[int(loc)] = int(r)
    groups = df["group"].astype(str).to_numpy()
    a_all = pd.to_numeric(df["src_local"], errors="coerce").to_numpy(dtype="float64")
    b_all = pd.to_numeric(df["dst_local"], errors="coerce").to_numpy(dtype="float64")
    src = np.full(len(df), np.nan)
    dst = np.full(len(df), np.nan)
    for g in np.unique(groups):
        sel = groups == g
        a, b = a_all[sel], b_all[sel]
        ranks = group_ranks.get(g)
        if ranks:
            table = np.asarray(ranks, dtype="float64")
            ok_a = (a >= 0) & (a < len(table))
            ok_b = (b >= 0) & (b < len(table))
            src[sel] = np.where(ok_a, table[np.clip(a, 0, len(table) - 1).astype(int)], np.nan)
            dst[sel] = np.where(ok_b, table[np.clip(b, 0, len(table) - 1).astype(int)], np.nan)
            continue
        lm = learned.get(g, {})
        identity = all(k == v for k, v in lm.items())
        src[sel] = [lm.get(int(x), float(x) if identity else np.nan) for x in a]
        dst[sel] = [lm.get(int(x), float(x) if identity else np.nan) for x in b]
    df = df.copy()
    df["src_rank"] = pd.array(src, dtype="Float64").round().astype("Int64")  # type: ignore[attr-defined]
    df["dst_rank"] = pd.array(dst, dtype="Float64").round().astype("Int64")  # type: ignore[attr-defined]
    bad = df["src_rank"].isna() | df["dst_rank"].isna()
    dropped = int(bad.sum())
    if dropped:
        warnings.append(
            DataWarning(
                code="matrix_unmapped",
                message=f"dropped {dropped} communication-matrix links whose local ranks could not be "
                "mapped to global ranks (no parallel_group_info in profiler_metadata.json)",
            )
        )
        df = df[~bad]
    unknown = [
        g for g in df["group"].astype(str).unique() if g not in group_ranks and not learned.get(g)
    ]
    if unknown:
        warnings.append(
            DataWarning(
                code="matrix_ranks_assumed",
                message="communication_matrix.json link ranks are local to each group; without "
                "parallel_group_info they were taken as global ranks for group(s) "
                + ", ".join(unknown[:3]),
            )
        )
    return df.drop(columns=["src_local", "dst_local"]).reset_index(drop=True)


def _groups_table(
    rank_data: list[RankData], comm_ops: pd.DataFrame, cluster_groups: pd.DataFrame
) -> tuple[pd.DataFrame, dict[str, list[int]]]:
    rows: dict[str, dict[str, Any]] = {}
    kinds: dict[str, str] = {}
    seen_ranks: dict[str, set[int]] = {}
    if not comm_ops.empty:
        for g, k, r in zip(
            comm_ops["group"], comm_ops["comm_kind"], comm_ops["rank"], strict=False
        ):
            kinds.setdefault(str(g), str(k))
            if pd.notna(r):
                seen_ranks.setdefault(str(g), set()).add(int(r))
    for u in rank_data:
        for g in u.groups:
            h = double_hash(g["comm_name"])
            if h in rows:
                continue
            rows[h] = {
                "group": h,
                "group_name": g["group_name"],
                "comm_kind": kinds.get(h, ""),
                "ranks": list(g["global_ranks"]),
                "size": len(g["global_ranks"]),
                "comm_name": g["comm_name"],
            }
    mapping = {h: r["ranks"] for h, r in rows.items()}
    leftovers = []
    if not cluster_groups.empty:
        for rec in cluster_groups.to_dict("records"):
            g = str(rec.get("group") or "")
            rec.setdefault("comm_name", "")
            if g and g in rows:
                if not rows[g]["group_name"] and rec.get("group_name"):
                    rows[g]["group_name"] = rec["group_name"]
                continue
            if g:
                if not rec.get("comm_kind"):
                    rec["comm_kind"] = kinds.get(g, "")
                rows[g] = {str(k): v for k, v in rec.items()}
            else:
                leftovers.append(rec)
    for g, rs in seen_ranks.items():
        if g not in rows:
            ranks = sorted(rs)
            rows[g] = {
                "group": g,
                "group_name": "",
                "comm_kind": kinds.get(g, ""),
                "ranks": ranks,
                "size": len(ranks),
                "comm_name": "",
            }
    out = list(rows.values()) + leftovers
    return pd.DataFrame(out), mapping


def _meta_table(rank_data: list[RankData]) -> pd.DataFrame:
    rows = []
    for u in rank_data:
        m = u.meta
        rows.append(
            {
                "rank": u.rank,
                "source_dir": u.source_dir,
                "export_type": u.export,
                "cann_version": m.get("cann_version"),
                "torch_npu_version": m.get("torch_npu_version"),
                "profiler_level": m.get("profiler_level"),
                "device_id": m.get("device_id"),
                "device_type": m.get("device_type"),
                "world_size": m.get("world_size"),
                "tp_size": m.get("tp_size"),
                "pp_size": m.get("pp_size"),
                "dp_size": m.get("dp_size"),
                "env": m.get("env"),
                "config": m.get("config"),
                "rank_origin": m.get("rank_origin"),
            }
        )
    return pd.DataFrame(rows)


def _layout_name(layout: Layout, rank_data: list[RankData]) -> str:
    kinds = set()
    for u in rank_data:
        kinds.add(
            "loose_files"
            if u.meta.get("rank_origin") == "loose files"
            else {"text": "ascend_pt_text", "db": "ascend_pt_db", "mindspore": "ascend_ms"}.get(
                u.export, u.export
            )
        )
    if layout.msprof_dirs:
        kinds.add("msprof")
    if layout.cluster_dirs and not rank_data and not layout.msprof_dirs:
        kinds.add("cluster_output")
    if len(kinds) == 1:
        name = kinds.pop()
        return name if not layout.cluster_dirs or name == "cluster_output" else "mixed"
    return "mixed"


def _quality(
    profile: Profile, meta: pd.DataFrame, group_ranks: dict[str, list[int]]
) -> list[DataWarning]:
    out: list[DataWarning] = []
    ranks = profile.ranks
    if not ranks:
        return out
    expected: set[int] = set(range(0, max(ranks) + 1))
    why = "gaps in the rank ids"
    if not meta.empty and "world_size" in meta and meta["world_size"].notna().any():
        ws = int(pd.to_numeric(meta["world_size"], errors="coerce").max())
        if ws > max(ranks) + 1:
            why = f"world_size {ws} in distributed_args"
        expected |= set(range(ws))
    for rs in group_ranks.values():
        if set(rs) - set(ranks):
            why = "ranks of the communication groups in profiler_metadata.json"
        expected |= set(rs)
    cm = profile.tables.get("comm_matrix")
    if cm is not None and not cm.empty and len(ranks) > 1:
        linked = set(pd.to_numeric(cm["src_rank"], errors="coerce").dropna().astype(int)) | set(
            pd.to_numeric(cm["dst_rank"], errors="coerce").dropna().astype(int)
        )
        if linked - set(ranks) - expected:
            why = "ranks that appear as communication-matrix link ends"
        expected |= linked
    missing = sorted(expected - set(ranks))
    if missing:
        shown = ", ".join(str(r) for r in missing[:20]) + (" ..." if len(missing) > 20 else "")
        out.append(
            DataWarning(
                code="missing_ranks",
                message=f"{len(missing)} rank(s) have no profiling data: {shown} (found {len(ranks)} "
                f"rank(s); expected from {why}). Cluster-wide conclusions (slow rank, slow link) only "
                "cover the ranks present; collect all ranks to compare them",
                ranks=tuple(missing),
            )
        )
    st = profile.tables.get("step_trace")
    if st is not None and not st.empty and st["rank"].nunique() > 1:
        pairs = st[["rank", "step"]].dropna().drop_duplicates()
        allsteps = set(int(x) for x in pairs["step"].unique())
        counts = pairs.groupby("rank").size()
        short = [int(r) for r, n in counts.items() if n < len(allsteps)]  # type: ignore[call-overload]
        lacking = {
            r: sorted(allsteps - set(int(x) for x in pairs.loc[pairs["rank"] == r, "step"]))
            for r in short[:1]
        }
        if short:
            rk = sorted(short)
            out.append(
                DataWarning(
                    code="missing_steps",
                    message=f"ranks {rk[:10]} lack step(s) that other ranks have (e.g. rank {rk[0]} lacks "
                    f"{lacking[rk[0]][:5]}); steps were profiled with different schedules, compare "
                    "ranks on the common steps only",
                    ranks=tuple(rk),
                )
            )
    if not meta.empty:
        for col, label in (("cann_version", "CANN"), ("torch_npu_version", "torch_npu")):
            vals = meta[col].dropna().astype(str)
            vals = vals[vals != ""]
            if vals.nunique() > 1:
                groups = meta.dropna(subset=[col]).groupby(col)["rank"].apply(list)
                desc = "; ".join(
                    f"{v}: ranks {sorted(int(x) for x in rs)[:8]}" for v, rs in groups.items()
                )
                out.append(
                    DataWarning(
                        code="mixed_versions",
                        message=f"ranks run different {label} versions ({desc}); performance differences "
                        "between them may come from the software, align the versions",
                        ranks=tuple(int(r) for r in meta["rank"].dropna()),
                    )
                )
        lv = meta["profiler_level"].astype("string")
        l2 = meta.loc[lv == "Level2", "rank"].dropna().astype(int).tolist()
        if l2:
            out.append(
                DataWarning(
                    code="profiler_level2",
                    message=f"profiler Level2 was used on {len(l2)} rank(s); it adds noticeable host and "
                    "device overhead, so absolute times are inflated. Use Level1 for timing questions",
                    ranks=tuple(l2),
                )
            )
        l0 = meta.loc[lv == "Level0", "rank"].dropna().astype(int).tolist()
        if l0 and len(ranks) > 1 and not profile.has("comm_ops"):
            out.append(
                DataWarning(
                    code="no_communication_level0",
                    message="profiler Level0 collects no communication analysis (no communication.json), "
                    "so wait/transit times and bandwidth are unknown; profile with Level1 to analyse "
                    "communication",
                    ranks=tuple(l0),
                )
            )
    return out


def assemble_profile(
    plan: IngestPlan,
    rank_data: list[RankData],
    cluster_data: list[RankData] | None = None,
    msprof_data: list[RankData] | None = None,
    *,
    extra_stats: dict[str, float] | None = None,
) -> Profile:
    """Merge parsed units into one validated :class:`Profile` (the client side of any ingest).

    Concatenates the per-rank tables, maps communication-matrix local ranks to global ranks, builds
    ``comm_groups`` and ``meta``, validates every canonical table once (after the concat), adds the
    data-quality warnings and fills ``profile_id`` and ``stats`` (``files_parsed``, ``ranks_read``,
    ``seconds`` since planning, plus ``extra_stats``).

    Args:
        plan: From :func:`plan_ingest` (root, layout, planning warnings, cache key).
        rank_data: One :class:`RankData` per entry of ``plan.rank_dirs`` (any order), e.g. from
            :func:`~advisor_chat.ingest.rankdir.read_rank_dir` in this process, a process pool or a
            Dask/Ray worker.
        cluster_data: From :func:`~advisor_chat.ingest.cluster.read_cluster_dir` per cluster folder.
        msprof_data: From :func:`~advisor_chat.ingest.msprof.read_msprof_dir` per ``PROF_*`` folder.
        extra_stats: More numbers for ``profile.stats`` (e.g. the number of distributed tasks).

    Raises:
        InputError: Two units claim the same rank; a table misses required columns.
    """
    cluster_data = cluster_data or []
    msprof_data = msprof_data or []
    profile = _assemble(
        plan.root, plan.layout, rank_data, cluster_data, msprof_data, list(plan.warnings)
    )
    profile.profile_id = plan.cache_key
    profile.stats = {
        "files_parsed": float(sum(r.parsed_files for r in rank_data + cluster_data + msprof_data)),
        "ranks_read": float(len(rank_data) + len(msprof_data)),
        "seconds": time.perf_counter() - plan.started,
        **(extra_stats or {}),
    }
    return profile


def _assemble(
    root: Path,
    layout: Layout,
    rank_data: list[RankData],
    cluster_data: list[RankData],
    msprof_data: list[RankData],
    warnings: list[DataWarning],
) -> Profile:
    units = rank_data + msprof_data
    _assign_ranks(units, warnings)
    _check_duplicates(units)
    for u in units + cluster_data:
        warnings.extend(u.warnings)
    warnings.extend(check_units(units))  # rank-id disagreements, missing tables, mixed runs

    tables: dict[str, pd.DataFrame] = {}
    sources: dict[str, list[TableSource]] = {}
    for name in (
        "step_trace",
        "kernels",
        "comm_ops",
        "comm_bandwidth",
        "host_dispatch",
        "memory",
        "op_statistic",
    ):
        df = _concat(u.tables.get(name) for u in units)
        if not df.empty:
            tables[name] = df
            sources[name] = [s for u in units for s in u.sources if s.table == name]

    cluster_groups = _concat(c.tables.get("comm_groups") for c in cluster_data)
    extra: list[str] = []
    for c in cluster_data:
        used = []
        for name, df in c.tables.items():
            if name == "comm_groups":
                continue
            if name not in tables or (name == "stage_trace"):
                if name in tables:
                    continue
                tables[name] = df
                sources[name] = [s for s in c.sources if s.table == name]
                used.append(name)
        if units:
            extra.append(
                f"{c.source_dir}: msprof-analyze cluster output; per-rank folders preferred, used only for "
                f"{', '.join([*used, 'comm_groups']) if used else 'comm_groups'}"
            )
        if "comm_groups" in c.tables:
            sources.setdefault("comm_groups", []).extend(
                s for s in c.sources if s.table == "comm_groups"
            )

    group_ranks: dict[str, list[int]] = {}
    groups, group_ranks = _groups_table(
        units, tables.get("comm_ops", pd.DataFrame()), cluster_groups
    )
    if not groups.empty:
        tables["comm_groups"] = groups
        if any(u.groups for u in units):
            sources.setdefault("comm_groups", []).extend(
                TableSource(
                    "comm_groups",
                    str(Path(u.source_dir) / "profiler_metadata.json"),
                    u.export,  # type: ignore[arg-type]
                    u.rank,
                )
                for u in units
                if u.groups
            )
    if units:
        mat = _map_matrix(units, group_ranks, warnings)
        if not mat.empty:
            tables["comm_matrix"] = mat
            sources["comm_matrix"] = [
                s for u in units for s in u.sources if s.table == "comm_matrix"
            ]
            # groups known only from communication files: their members also include the far ends
            # of the matrix links (the 2-rank sample of an 8-rank job reports links to ranks 2-7)
            if "comm_groups" in tables:
                g = tables["comm_groups"]
                m_groups = mat["group"].astype(str).to_numpy()
                m_ends = np.stack(
                    [
                        mat["src_rank"].to_numpy(dtype="int64"),
                        mat["dst_rank"].to_numpy(dtype="int64"),
                    ]
                )
                need = {str(x) for x in g["group"]} - set(group_ranks)
                ends: dict[str, set[int]] = {
                    grp: set(np.unique(m_ends[:, m_groups == grp]).tolist())
                    for grp in need
                    if (m_groups == grp).any()
                }
                new_ranks = []
                for grp, ranks in zip(g["group"], g["ranks"], strict=False):
                    if str(grp) in group_ranks or str(grp) not in ends:
                        new_ranks.append(ranks)
                    else:
                        new_ranks.append(sorted(set(ranks) | ends[str(grp)]))
                g = g.copy()
                g["ranks"] = new_ranks
                g["size"] = [len(r) for r in new_ranks]
                tables["comm_groups"] = g
    if "comm_groups" in tables and not sources.get("comm_groups"):
        sources["comm_groups"] = [
            s for u in units for s in u.sources if s.table in ("comm_ops", "comm_matrix")
        ]

    meta = _meta_table(units)
    if meta.empty and "step_trace" in tables:
        st_ranks = sorted(int(r) for r in tables["step_trace"]["rank"].dropna().unique())
        meta = pd.DataFrame(
            {
                "rank": st_ranks,
                "source_dir": cluster_data[0].source_dir if cluster_data else str(root),
                "export_type": "cluster",
            }
        )
    if not meta.empty:
        tables["meta"] = meta
        sources["meta"] = [
            TableSource("meta", u.source_dir, u.export, u.rank)  # type: ignore[arg-type]
            for u in units
        ] or [TableSource("meta", c.source_dir, "cluster") for c in cluster_data]

    validated = {}
    for name, df in tables.items():
        if name not in TABLE_SPECS:
            continue
        src = sources.get(name, [])
        validated[name] = validate_table(
            name, df, source=src[0].path if src else str(root), sources=src, warnings=warnings
        )
    profile = Profile(
        root=root,
        layout=_layout_name(layout, rank_data),
        tables=validated,
        sources=sources,
        warnings=warnings,
        extra_sources=extra,
    )
    profile.warnings.extend(_quality(profile, validated.get("meta", pd.DataFrame()), group_ranks))
    return profile
