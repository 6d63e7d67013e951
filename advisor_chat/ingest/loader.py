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

import atexit
import concurrent.futures as cf
import gc
import multiprocessing
import os
import re
import stat
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import orjson
import pandas as pd

from advisor_chat.config import Settings, load_settings
from advisor_chat.errors import InputError
from advisor_chat.ingest import cache as cache_mod
from advisor_chat.ingest.cluster import read_cluster_dir
from advisor_chat.ingest.common import (
    MAX_RANK_ID,
    RankData,
    double_hash,
    gc_paused,
    plausible_world,
    unreadable,
)
from advisor_chat.ingest.detect import Layout, detect, unit_files
from advisor_chat.ingest.guard import check_units, repeat_warnings, show_path
from advisor_chat.ingest.msprof import device_info, read_msprof_dir
from advisor_chat.ingest.profile import DataWarning, Profile, TableSource
from advisor_chat.ingest.rankdir import (
    IMPLAUSIBLE,
    LEFT_OUT,
    OUTPUT,
    TableSink,
    read_rank_dir,
    trace_warning,
)
from advisor_chat.ingest.schema import (
    TABLE_SPECS,
    check_repeated_kernels,
    empty_table,
    validate_table,
)
from advisor_chat.ranks import format_ranks

__all__ = [
    "PARSE_STATS",
    "HeavyReader",
    "IngestPlan",
    "LightBatch",
    "ProgressCallback",
    "assemble_profile",
    "batch_paths",
    "check_root",
    "load_cached",
    "load_profile",
    "no_data_error",
    "plan_ingest",
    "read_light_batch",
    "read_rank_batch",
    "read_rank_dir",
    "revalidated_plan",
    "save_cached",
    "wait_cache_writes",
]

#: Process-wide counters a test can assert on (e.g. that a cached reload parsed nothing):
#: ``walks`` counts folder walks (:func:`plan_ingest`), ``revalidated`` reloads planned from the
#: snapshot stored with the cache (:func:`revalidated_plan`) instead.
PARSE_STATS: dict[str, int] = {
    "loads": 0,
    "parses": 0,
    "cache_hits": 0,
    "units_read": 0,
    "walks": 0,
    "revalidated": 0,
}

#: Below this many rank folders the light tables are read in this process (a pool does not pay).
_POOL_FROM = 192

#: ``progress(stage, done, total)``: ``stage`` is ``"ranks"`` (light tables of every rank),
#: ``"kernels"`` or ``"host_dispatch"`` (heavy files of the ranks an analysis examines).
ProgressCallback = Callable[[str, int, int], None]


@dataclass
class LightBatch:
    """The light tables of a batch of rank folders: one DataFrame per table for the whole batch.

    Attributes:
        units: One :class:`RankData` per folder, in order: rank, meta, groups, sources, warnings and
            ``meta["heavy_files"]``; ``tables`` is empty unless the folder does not say its rank.
        tables: ``step_trace``, ``comm_ops``, ``comm_bandwidth``, ``comm_matrix``, ``op_statistic``,
            ``memory`` rows of every unit with a known rank (canonical columns, unvalidated).
    """

    units: list[RankData]
    tables: dict[str, pd.DataFrame]


def read_light_batch(paths: list[str]) -> LightBatch:
    """Read the light tables of a batch of rank folders (the task of the pool and of Dask workers).

    ``kernel_details.csv`` and ``trace_view.json`` (text export) and the kernels and host dispatch
    of ``ascend_pytorch_profiler_{rank}.db`` (DB export) are not parsed, only listed in
    ``meta["heavy_files"]``; ``analysis.db`` and the DB's memory records are read as light tables.
    Rows are collected as columns and turned into one DataFrame per table for the batch (no
    per-rank DataFrames).

    Raises:
        InputError: A rank folder is unreadable or corrupt.
    """
    sink = TableSink()
    with gc_paused():
        units = [read_rank_dir(p, heavy=False, sink=sink) for p in paths]
        return LightBatch(units, sink.frames())


def read_rank_batch(paths: list[str]) -> list[RankData]:
    """Parse a batch of rank folders fully, per rank (heavy files included).

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


PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None = None) -> None:
    """Pool initializer: on Linux, ask the kernel to SIGTERM this worker when its parent dies.

    ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` through ctypes; if the parent is already gone (its pid
    changed before the call) the worker exits at once. No-op elsewhere.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no libc / prctl
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(0)


def make_pool(workers: int) -> cf.ProcessPoolExecutor:
    """A process pool whose workers die with this process (see :func:`die_with_parent`)."""
    ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    return cf.ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=die_with_parent, initargs=(os.getpid(),)
    )


def _progress_enabled(progress: bool | None, n: int) -> bool:
    if progress is not None:
        return bool(progress)
    return n >= _PROGRESS_FROM


#: Loads of this many rank folders or more show their progress unless told not to.
_PROGRESS_FROM = 32


def rich_progress() -> tuple[ProgressCallback, Callable[[], None]]:
    """A ``progress`` callback for stderr, and its ``stop`` function.

    On a terminal: a rich bar per stage (removed when done). Otherwise (a log file, CI, a pipe):
    plain lines, ``reading ranks: 512/1024 (50%) 1.2 s``, at most one per quarter of a stage, so
    that a long read is visible in a log without flooding it.
    """
    if not sys.stderr.isatty():
        return _line_progress()
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    tasks: dict[str, Any] = {}
    started = False

    def cb(stage: str, done: int, total: int) -> None:
        nonlocal started
        if not started:
            bar.start()
            started = True
        if stage not in tasks:
            tasks[stage] = bar.add_task(_STAGE_LABELS.get(stage, stage), total=total)
        bar.update(tasks[stage], completed=done, total=total)

    def stop() -> None:
        if started:
            bar.stop()

    return cb, stop


_STAGE_LABELS = {
    "ranks": "reading ranks",
    "kernels": "reading kernels",
    "host_dispatch": "reading host dispatch",
}


def _line_progress() -> tuple[ProgressCallback, Callable[[], None]]:
    t0 = time.perf_counter()
    shown: dict[str, int] = {}

    def cb(stage: str, done: int, total: int) -> None:
        quarter = 4 * done // max(1, total)
        if shown.get(stage, -1) >= quarter:
            return
        shown[stage] = quarter
        print(
            f"{_STAGE_LABELS.get(stage, stage)}: {done}/{total} ({100 * done // max(1, total)}%) "
            f"{time.perf_counter() - t0:.1f} s",
            file=sys.stderr,
            flush=True,
        )

    return cb, lambda: None


def _read_light(
    dirs: list[Path], workers: int, progress: ProgressCallback | None
) -> tuple[list[RankData], list[dict[str, pd.DataFrame]]]:
    if not dirs:
        return [], []
    paths = [str(d) for d in dirs]
    if workers <= 1 or len(dirs) < _POOL_FROM:
        units: list[RankData] = []
        tables: list[dict[str, pd.DataFrame]] = []
        step = max(1, len(paths) // 50)
        for i in range(0, len(paths), step):
            b = read_light_batch(paths[i : i + step])
            units += b.units
            tables.append(b.tables)
            if progress is not None:
                progress("ranks", min(len(paths), i + step), len(paths))
        return units, tables
    batches = batch_paths(paths, workers)
    results: dict[int, LightBatch] = {}
    done = 0
    with make_pool(workers) as pool:
        futs = {pool.submit(read_light_batch, b): i for i, b in enumerate(batches)}
        for fut in cf.as_completed(futs):
            results[futs[fut]] = fut.result()
            done += len(batches[futs[fut]])
            if progress is not None:
                progress("ranks", done, len(paths))
    ordered = [results[i] for i in range(len(batches))]
    return [u for b in ordered for u in b.units], [b.tables for b in ordered]


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
    try:
        exists = root.exists()
    except OSError as exc:  # a name too long for the file system, an I/O error, ...
        raise InputError(
            f"the path {root} cannot be read: {exc.strerror or exc}",
            path=root,
            remedy="Check the path: each folder name must stay under 255 bytes (a Chinese "
            "character takes 3); rename or move the folder and pass the new path",
        ) from exc
    if not exists:
        raise InputError(
            f"the path {root} does not exist",
            path=root,
            remedy="Check the spelling, or copy the profiling folder (the one holding the "
            "*_ascend_pt rank folders) to this machine and pass its path",
            zh=f"路径 {root} 不存在。请检查拼写，或把性能数据目录（包含各卡 *_ascend_pt 目录的那一层）"
            "拷到本机后传入它的路径。",
        )
    root = root.resolve()
    if root.is_file():
        raise InputError(
            f"{root} is a file, not a profiling folder",
            path=root,
            remedy="Pass the folder that holds the *_ascend_pt / *_ascend_ms rank folders, a PROF_* "
            "folder or a cluster_analysis_output/ folder (unzip archives first)",
            zh=f"{root} 是一个文件，不是性能数据目录。请传入包含各卡 *_ascend_pt / *_ascend_ms 目录的目录、"
            "PROF_* 目录或 cluster_analysis_output/ 目录（压缩包请先解压）。",
        )
    if not root.is_dir():  # a FIFO, a device, a socket: not something to read profiles from
        mode = root.stat().st_mode
        kind = (
            "a named pipe (FIFO)"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "not a regular folder"
        )
        raise InputError(
            f"{root} is {kind}, not a profiling folder",
            path=root,
            remedy="Pass the folder that holds the *_ascend_pt / *_ascend_ms rank folders, a PROF_* "
            "folder or a cluster_analysis_output/ folder",
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
            zh=f"目录 {root} 是空的。请把采集结果（带 ASCEND_PROFILER_OUTPUT/ 的各卡 *_ascend_pt 目录）拷进来，"
            "或传入存放它们的目录。",
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
        zh=f"{root} 下没有可识别的昇腾性能数据：没有找到 *_ascend_pt / *_ascend_ms 卡目录、"
        "ASCEND_PROFILER_OUTPUT/、PROF_*/mindstudio_profiler_output/ 或 cluster_analysis_output/"
        "（向下查找了 10 层）。请传入 torch_npu.profiler（tensorboard_trace_handler 目录）、"
        "msprof --output 或 msprof-analyze cluster 写出的目录。",
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
        cache_key: Cache key of the identity ``(path, size, mtime_ns, ctime_ns)`` of every file a
            reader may open.
        started: ``time.perf_counter()`` when planning began (for ``Profile.stats["seconds"]``).
        files: ``(file, size, mtime_ns, ctime_ns)`` of every file in the key, as planned (a
            heavy file read later is checked against it).
        dirs: Every folder listed while planning, with its ``os.stat`` taken before the listing
            (stored with the cache as :class:`~advisor_chat.ingest.cache.PlanSnapshot`).
        listed_at: ``time.time()`` before the first folder was stat'ed.
        units: Number of folders to parse (rank, cluster and msprof folders).
        revalidated: The plan was rebuilt from the snapshot stored with the last cache of the
            folder (no walk); ``layout`` and ``rank_dirs`` are then empty, and a cache miss
            means planning again with :func:`plan_ingest`.
    """

    root: Path
    layout: Layout
    rank_dirs: list[Path]
    warnings: list[DataWarning] = field(default_factory=list)
    cache_key: str = ""
    started: float = 0.0
    files: list[tuple[str, int, int, int]] = field(default_factory=list, repr=False)
    dirs: list[tuple[str, os.stat_result]] = field(default_factory=list, repr=False)
    listed_at: float = 0.0
    units: int = 0
    revalidated: bool = False

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
    listed_at = time.time()
    PARSE_STATS["walks"] += 1
    layout = detect(root)
    if layout.empty:
        raise no_data_error(root)
    warnings: list[DataWarning] = repeat_warnings(layout.repeats)
    listing = layout.listing
    has_output = [
        listing[str(d)][1] if str(d) in listing else (d / OUTPUT).is_dir() for d in layout.rank_dirs
    ]
    good = [d for d, ok in zip(layout.rank_dirs, has_output, strict=True) if ok]
    bad = [d for d, ok in zip(layout.rank_dirs, has_output, strict=True) if not ok]
    good += layout.loose_dirs
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
    files: list[tuple[str, int, int, int]] = []
    dirs = list(layout.dirs)
    for d in good:
        kind = "loose" if loose and d in loose else "rank"
        files += unit_files(d, kind, listing.get(str(d)), dirs)
    for d in layout.cluster_dirs:
        files += unit_files(d, "cluster", dirs=dirs)
    for d in layout.msprof_dirs:
        files += unit_files(d, "msprof", dirs=dirs)
    return IngestPlan(
        root=root,
        layout=layout,
        rank_dirs=good,
        warnings=warnings,
        cache_key=cache_mod.cache_key(root, files),
        started=started,
        files=files,
        dirs=dirs,
        listed_at=listed_at,
        units=len(good) + len(layout.cluster_dirs) + len(layout.msprof_dirs),
    )


def _changed_warning(stale: list[str], files: dict[int, str]) -> DataWarning:
    by_path = {f: r for r, f in files.items()}
    ranks = tuple(sorted(by_path[p] for p in stale if p in by_path))
    more = f" (and {len(stale) - 1} more)" if len(stale) > 1 else ""
    return DataWarning(
        code="file_changed",
        message=f"{stale[0]}{more} changed after the profile was loaded: its rows are read as they "
        "are now, the other tables are from before the change, and nothing of it is cached. Load "
        "the folder again for a consistent view",
        path=stale[0],
        ranks=ranks,
    )


class HeavyReader:
    """Reads the heavy tables of the text export per rank, on demand, and caches what it read.

    ``kernels`` come from ``kernel_details.csv`` (Arrow, several files in one parse),
    ``host_dispatch`` from ``trace_view.json`` (streamed; a pool of worker processes when many
    ranks are asked at once). Each read is validated, merged into ``profile.tables`` in the order
    of the rank folders, its sources replace the unread placeholders, and its rows are written
    to the cache (``{cache_dir}/profiles/{key}.heavy/{table}/part-*.parquet``) for later loads.

    Attributes:
        files: ``{table: {rank: path}}`` of the files not parsed at load time.
        order: Rank → position of its folder (row order of the merged tables).
    """

    def __init__(
        self,
        files: dict[str, dict[int, str]],
        order: dict[int, int],
        *,
        cache_dir: Path | None = None,
        workers: int = 1,
        progress: ProgressCallback | None = None,
        identity: list[tuple[str, int, int, int]] | None = None,
    ) -> None:
        self.files = {t: dict(sorted(f.items())) for t, f in files.items() if f}
        #: ``(file, size, mtime_ns, ctime_ns)`` when the profile was loaded (its cache key).
        self._identity_list = identity or []
        self._identity: dict[str, tuple[int, int, int]] | None = None
        #: Files found changed since the load when read on demand (their rows are not cached).
        self.changed: list[str] = []
        self.order = order
        self.cache_dir = cache_dir
        self.workers = workers
        self.progress = progress
        self.loaded: dict[str, set[int]] = {t: set() for t in self.files}
        #: Draw rich progress bars on stderr for reads of 8 ranks or more (when no callback).
        self.rich = False
        self.profile: Profile | None = None
        self._lock = threading.RLock()
        self._parts: dict[str, dict[int, Path]] | None = None
        #: Parse warnings stored with each cached part (``part-*.json`` "warnings"), by parquet path.
        self._part_warnings: dict[Path, list[DataWarning]] = {}

    # -- LazyTables protocol
    def tables(self) -> list[str]:
        """Names of the heavy tables this reader knows files for."""
        return list(self.files)

    def available(self, name: str) -> list[int]:
        """Ranks with a heavy file for ``name``."""
        return list(self.files.get(name, {}))

    def pending(self, name: str) -> bool:
        """Whether a rank of ``name`` has not been read yet."""
        f = self.files.get(name)
        return f is not None and len(self.loaded[name]) < len(f)

    def ensure(self, name: str, ranks: Iterable[int] | None) -> None:
        """Read ``ranks`` of table ``name`` (``None``: every rank) unless read already.

        Raises:
            InputError: A ``kernel_details.csv`` lacks required columns or is unreadable.
        """
        files = self.files.get(name)
        if not files or self.profile is None:
            return
        with self._lock:
            want = list(files) if ranks is None else [int(r) for r in ranks if int(r) in files]
            todo = [r for r in want if r not in self.loaded[name]]
            if not todo:
                return
            t0 = time.perf_counter()
            stop = None
            if self.progress is None and self.rich and len(todo) >= 8:
                self.progress, stop = rich_progress()
            try:
                with gc_paused():
                    df, sources, warnings = self._read(name, todo)
            finally:
                if stop is not None:
                    stop()
                    self.progress = None
            self._merge(name, todo, df, sources, warnings)
            stats = self.profile.stats
            stats[f"{name}_ranks_read"] = float(len(self.loaded[name]))
            stats[f"{name}_seconds"] = stats.get(f"{name}_seconds", 0.0) + time.perf_counter() - t0

    # -- reading
    def _cached_parts(self, name: str) -> dict[int, Path]:
        if self._parts is None:
            self._parts = {}
            base = self.cache_dir
            if base is not None and base.is_dir():
                for t in self.files:
                    found: dict[int, Path] = {}
                    for manifest in sorted((base / t).glob("part-*.json")):
                        try:
                            doc = orjson.loads(manifest.read_bytes())
                            ranks = doc["ranks"]
                            warns = [
                                DataWarning(**{**w, "ranks": tuple(w.get("ranks", ()))})
                                for w in doc.get("warnings", [])
                            ]
                        except (OSError, ValueError, KeyError, TypeError, AttributeError):
                            continue
                        pq = manifest.with_suffix(".parquet")
                        if pq.is_file():
                            found.update({int(r): pq for r in ranks})
                            self._part_warnings[pq] = warns
                    self._parts[t] = found
        return self._parts.get(name, {})

    def _read(
        self, name: str, ranks: list[int]
    ) -> tuple[pd.DataFrame, list[TableSource], list[DataWarning]]:
        parts = self._cached_parts(name)
        from_cache = [r for r in ranks if r in parts]
        frames: list[pd.DataFrame] = []
        for pq in dict.fromkeys(parts[r] for r in from_cache):
            try:
                df = pd.read_parquet(pq, filters=[("rank", "in", from_cache)])
            except (OSError, ValueError):
                from_cache = [r for r in from_cache if parts[r] != pq]
                continue
            frames.append(df)
        cached_frames = list(frames)
        to_parse = [r for r in ranks if r not in set(from_cache)]
        sources: list[TableSource] = []
        warnings: list[DataWarning] = []
        if to_parse:
            paths = [self.files[name][r] for r in to_parse]
            stale = self._stale(paths)
            parsed, sources, warnings = self._parse(name, to_parse)
            if name == "kernels":
                parsed, repeated = check_repeated_kernels(parsed, sources)
                warnings += repeated
            if not parsed.empty:
                frames.append(parsed)
            stale = stale or self._stale(paths)  # also a change while it was read
            if stale:
                self.changed += stale
                warnings.append(_changed_warning(stale, self.files[name]))
            else:
                self._write_part(name, to_parse, parsed, warnings)
        cached = set(from_cache)
        for pq in dict.fromkeys(parts[r] for r in from_cache):
            warnings += [
                w
                for w in self._part_warnings.get(pq, [])
                if not w.ranks or cached.intersection(w.ranks)
            ]
        # the rows each cached rank contributed (a source with no rows is not cited)
        counts = (
            pd.concat([f["rank"] for f in cached_frames]).value_counts().to_dict()
            if cached_frames
            else {}
        )
        for r in from_cache:
            sources.append(
                TableSource(
                    name,
                    self.files[name][r],
                    _export_of(self.files[name][r]),
                    r,
                    rows=int(counts.get(r, 0)),
                )
            )
        PARSE_STATS["heavy_ranks_parsed"] = PARSE_STATS.get("heavy_ranks_parsed", 0) + len(to_parse)
        df = _concat(frames)
        return df, sources, warnings

    def _stale(self, paths: list[str]) -> list[str]:
        """Files of ``paths`` whose identity is not the one the profile was loaded with."""
        if self._identity is None:
            self._identity = {f: (n, m, c) for f, n, m, c in self._identity_list}
        out = []
        for p in paths:
            known = self._identity.get(p)
            if known is None:
                continue
            try:
                st = os.stat(p)
            except OSError:
                out.append(p)
                continue
            if (st.st_size, st.st_mtime_ns, st.st_ctime_ns) != known:
                out.append(p)
        return out

    def _parse(
        self, name: str, ranks: list[int]
    ) -> tuple[pd.DataFrame, list[TableSource], list[DataWarning]]:
        files = self.files[name]
        in_db = [r for r in ranks if _export_of(files[r]) == "db"]
        if in_db:
            # DB export: one SQLite read per rank, of this table only
            df, sources, warnings = self._parse_db(name, in_db)
            rest = [r for r in ranks if _export_of(files[r]) != "db"]
            if rest:
                df2, sources2, warnings2 = self._parse(name, rest)
                df, sources, warnings = _concat([df, df2]), sources + sources2, warnings + warnings2
            return df, sources, warnings
        cb = self.progress
        if name == "kernels":
            from advisor_chat.ingest.text import read_kernels_arrow

            out: list[pd.DataFrame] = []
            versions: dict[int, str] = {}
            skipped: list[DataWarning] = []
            step = max(64, len(ranks) // 20)
            for i in range(0, len(ranks), step):
                chunk = ranks[i : i + step]
                try:
                    df, vs = read_kernels_arrow([(Path(files[r]), r) for r in chunk])
                    out.append(df)
                    versions.update(zip(chunk, vs, strict=True))
                except InputError:
                    # one bad file fails the joined parse: read them one by one, leave out the bad
                    for r in chunk:
                        try:
                            df, vs = read_kernels_arrow([(Path(files[r]), r)])
                        except InputError as exc:
                            skipped.append(lazy_skip_warning(files[r], r, "kernels", exc))
                            continue
                        out.append(df)
                        versions[r] = vs[0]
                if cb is not None and len(ranks) > step:
                    cb("kernels", min(len(ranks), i + step), len(ranks))
            df = _concat(out)
            counts = df["rank"].value_counts().to_dict() if not df.empty else {}
            sources = [
                TableSource("kernels", files[r], "text", r, int(counts.get(r, 0)), v)
                for r, v in versions.items()
            ]
            return df, sources, skipped
        if name in TRACE_TRACKS:  # a byte search per file: no pool
            got = [_trace_track_job((files[r], r, name)) for r in ranks]
            sources = [
                TableSource(name, files[r], "text", r, len(d))
                for (d, w), r in zip(got, ranks, strict=True)
                if w is None
            ]
            return (
                _concat(d for d, _ in got if not d.empty),
                sources,
                [w for _, w in got if w is not None],
            )
        # host_dispatch
        jobs = [(files[r], r) for r in ranks]
        results: list[tuple[pd.DataFrame, DataWarning | None]] = []
        if (
            self.workers > 1
            and len(jobs) >= 2
            and _total_bytes(f for f, _ in jobs) >= _POOL_TRACE_BYTES
        ):
            with make_pool(min(self.workers, len(jobs))) as pool:
                for i, res in enumerate(pool.map(_trace_job, jobs, chunksize=4)):
                    results.append(res)
                    if cb is not None:
                        cb("host_dispatch", i + 1, len(jobs))
        else:
            for i, job in enumerate(jobs):
                results.append(_trace_job(job))
                if cb is not None and len(jobs) > 1:
                    cb("host_dispatch", i + 1, len(jobs))
        frames = [d for d, _ in results if not d.empty]
        sources = [
            TableSource("host_dispatch", files[r], "text", r, len(d))
            for (d, w), r in zip(results, ranks, strict=True)
            if w is None
        ]
        return _concat(frames), sources, [w for _, w in results if w is not None]

    def _parse_db(
        self, name: str, ranks: list[int]
    ) -> tuple[pd.DataFrame, list[TableSource], list[DataWarning]]:
        """Read table ``name`` of the profiler DBs of ``ranks`` (a pool for 8 ranks or more)."""
        files = self.files[name]
        cb = self.progress
        jobs = [(files[r], r, name) for r in ranks]
        results: list[tuple[pd.DataFrame, str | None, DataWarning | None]] = []
        if self.workers > 1 and len(jobs) >= 8:
            with make_pool(min(self.workers, len(jobs))) as pool:
                for i, res in enumerate(pool.map(_db_job, jobs, chunksize=4)):
                    results.append(res)
                    if cb is not None:
                        cb(name, i + 1, len(jobs))
        else:
            for i, job in enumerate(jobs):
                results.append(_db_job(job))
                if cb is not None and len(jobs) > 1:
                    cb(name, i + 1, len(jobs))
        sources = [
            TableSource(name, files[r], "db", r, len(d), v)
            for (d, v, w), r in zip(results, ranks, strict=True)
            if w is None
        ]
        warnings = [w for _, _, w in results if w is not None]
        return _concat(d for d, _, _ in results), sources, warnings

    def _write_part(
        self, name: str, ranks: list[int], df: pd.DataFrame, warnings: list[DataWarning]
    ) -> None:
        if self.cache_dir is None:
            return
        try:
            folder = self.cache_dir / name
            folder.mkdir(parents=True, exist_ok=True)
            stem = folder / f"part-{uuid.uuid4().hex[:12]}"
            if not df.empty:
                cache_mod.write_parquet(df, stem.with_suffix(".parquet"))
            else:
                cache_mod.write_parquet(
                    pd.DataFrame({"rank": pd.Series([], dtype="int64")}),
                    stem.with_suffix(".parquet"),
                )
            warns = [
                {"code": w.code, "message": w.message, "path": w.path, "ranks": list(w.ranks)}
                for w in warnings
            ]
            stem.with_suffix(".json").write_bytes(orjson.dumps({"ranks": ranks, "warnings": warns}))
            if self._parts is not None:
                self._parts.setdefault(name, {}).update(
                    {r: stem.with_suffix(".parquet") for r in ranks}
                )
                self._part_warnings[stem.with_suffix(".parquet")] = list(warnings)
        except (OSError, ValueError):
            return

    def _merge(
        self,
        name: str,
        ranks: list[int],
        df: pd.DataFrame,
        sources: list[TableSource],
        warnings: list[DataWarning],
    ) -> None:
        prof = self.profile
        assert prof is not None
        tables = prof.tables
        old = tables.loaded(name) if hasattr(tables, "loaded") else tables.get(name)
        if not df.empty:
            src = sources[0].path if sources else str(prof.root)
            df = validate_table(name, df, source=src, sources=sources, warnings=warnings)
            merged = _concat([old, df]) if old is not None else df
            pos = merged["rank"].map(self.order).fillna(len(self.order)).to_numpy()
            order = np.argsort(pos, kind="stable")
            merged = merged.iloc[order].reset_index(drop=True)
            dict.__setitem__(tables, name, merged)
        elif old is None:
            # read, with no rows (a trace without with_stack frames): the table exists, empty, as
            # `name in tables` said
            dict.__setitem__(tables, name, empty_table(name))
        self.loaded[name].update(ranks)
        done = set(ranks)
        kept = [
            s
            for s in prof.sources.get(name, [])
            if not (s.rank in done and s.rows == 0 and s.export in ("text", "db"))
        ]
        prof.sources[name] = kept + [s for s in sources if s.rows or name == "kernels"]
        prof.warnings.extend(warnings)


#: A pool reads ``trace_view.json`` files only when they hold at least this many bytes together:
#: below, forking and sending the rows back cost more than the parse (24 small files: 0.2 s in
#: this process, 0.4-0.6 s through a 2-process pool on the 2-core bench machine).
_POOL_TRACE_BYTES = 64 * 1024 * 1024


def _total_bytes(paths: Iterable[str]) -> int:
    total = 0
    for p in paths:
        try:
            total += os.path.getsize(p)
        except OSError:
            continue  # the reader reports it
    return total


def _export_of(path: str) -> Literal["db", "text"]:
    """``"db"`` for a heavy table read from a profiler DB, else ``"text"``."""
    return "db" if path.endswith(".db") else "text"


def lazy_skip_warning(path: str, rank: int, table: str, exc: InputError) -> DataWarning:
    """The ``file_skipped`` warning for a heavy file that failed when read on demand.

    The rank's ``table`` rows are left out; the other ranks and tables are analysed. The message
    is the reader's (file, what is wrong, what to do).
    """
    return DataWarning(
        code="file_skipped",
        message=f"{exc}{LEFT_OUT} the {table.replace('_', ' ')} of rank {rank}; the rest is analysed",
        path=str(path),
        ranks=(rank,),
    )


def _db_job(job: tuple[str, int, str]) -> tuple[pd.DataFrame, str | None, DataWarning | None]:
    """Read one table of one ``ascend_pytorch_profiler_{rank}.db`` (pool task).

    Returns:
        (rows, schema version, None), or (empty, None, ``file_skipped`` warning) when the DB is
        unreadable, truncated or damaged (the warning names the file).
    """
    from advisor_chat.ingest import db as dbr

    path, rank, name = job
    try:
        d = dbr.read_profiler_db(Path(path), rank, tables=(name,))
    except InputError as exc:
        return pd.DataFrame(), None, lazy_skip_warning(path, rank, name, exc)
    df = d.get(name)
    return (df if df is not None else pd.DataFrame()), d.get("schema_version"), None


def _trace_job(job: tuple[str, int]) -> tuple[pd.DataFrame, DataWarning | None]:
    """Stream one ``trace_view.json`` (pool task): (host_dispatch rows, warning or None)."""
    from advisor_chat.ingest.common import unreadable
    from advisor_chat.ingest.trace import TraceInvalid, read_host_dispatch

    path, rank = job
    try:
        return read_host_dispatch(Path(path), rank), None
    except TraceInvalid as exc:
        return pd.DataFrame(), trace_warning(Path(path), str(exc), rank)
    except PermissionError:
        return pd.DataFrame(), lazy_skip_warning(
            path, rank, "host_dispatch", unreadable(Path(path))
        )
    except InputError as exc:
        return pd.DataFrame(), lazy_skip_warning(path, rank, "host_dispatch", exc)


#: Heavy tables read from ``trace_view.json`` by a byte search of their events (one reader each).
TRACE_TRACKS = ("aicore_freq", "python_frames", "hccl_ops")


def _trace_track_job(job: tuple[str, int, str]) -> tuple[pd.DataFrame, DataWarning | None]:
    """Read one ``trace_view.json``'s rows of a :data:`TRACE_TRACKS` table: (rows, warning)."""
    from advisor_chat.ingest.common import unreadable
    from advisor_chat.ingest.trace import (
        TraceInvalid,
        read_aicore_freq,
        read_hccl_ops,
        read_python_frames,
    )

    path, rank, name = job
    reader = {
        "aicore_freq": read_aicore_freq,
        "python_frames": read_python_frames,
        "hccl_ops": read_hccl_ops,
    }[name]
    try:
        return reader(Path(path), rank), None
    except TraceInvalid as exc:
        return pd.DataFrame(), lazy_skip_warning(
            path, rank, name, InputError(f"{path} is truncated or invalid JSON ({exc})")
        )
    except PermissionError:
        return pd.DataFrame(), lazy_skip_warning(path, rank, name, unreadable(Path(path)))
    except OSError as exc:
        return pd.DataFrame(), lazy_skip_warning(path, rank, name, InputError(str(exc)))


def heavy_cache_dir(settings: Settings, key: str, use_cache: bool = True) -> Path | None:
    """Folder of the heavy-table parts cached for profile ``key`` (``None`` when caching is off)."""
    if not (use_cache and settings.cache):
        return None
    return settings.cache_dir / "profiles" / f"{key}.heavy"


class _EarlyRead:
    """The cache last written for a folder, read in a thread while the folder's key is computed.

    Checking the key means one ``stat`` per file (36,864 files at 4096 ranks: ~0.4 s); reading the
    cache is mostly Parquet decoding, which releases the GIL. The two overlap; what was read is
    used only when its key equals the key just computed (else it is dropped).
    """

    def __init__(self, cache_dir: Path, key: str) -> None:
        self.key = key
        self.cache_dir = cache_dir
        self.result: tuple[Profile, cache_mod.HeavyIndex | None] | None = None
        self._thread = threading.Thread(
            target=self._run, args=(cache_dir,), name="advisor-cache-read", daemon=True
        )
        self._thread.start()

    def _run(self, cache_dir: Path) -> None:
        try:
            self.result = cache_mod.load(cache_dir, self.key)
        except Exception:  # a damaged cache is read again (and rejected) on the main thread
            self.result = None

    def get(self) -> tuple[Profile, cache_mod.HeavyIndex | None] | None:
        self._thread.join()
        return self.result


def _read_cache_early(path: str | Path, settings: Settings, use_cache: bool) -> _EarlyRead | None:
    if not (use_cache and settings.cache):
        return None
    try:
        root = str(Path(path).expanduser().resolve())
    except (OSError, RuntimeError, ValueError):
        return None
    key = cache_mod.last_key(settings.cache_dir, root)
    if key is None or key in _PENDING_WRITES:
        return None
    cache_mod.prefetch(settings.cache_dir, key)
    return _EarlyRead(settings.cache_dir, key)


def _plan_snapshot(plan: IngestPlan) -> dict[str, Any] | None:
    if plan.revalidated or not plan.dirs:
        return None
    return cache_mod.plan_snapshot(plan.root, plan.files, plan.dirs, plan.listed_at, plan.units)


def _settled_snapshot(plan: IngestPlan) -> dict[str, Any] | None:
    """The walk of a folder too fresh to trust when it was planned, walked again if it has settled.

    A folder copied just before the load (a benchmark, a download) is listed within a second of
    its last change, so its walk is not stored. When the cache is written later (after the report)
    and the newest folder stamp is older than ``RACY_S`` by then, walking again sees every entry
    that could have been added in that tick; its snapshot is stored when it finds the same files.
    """
    if plan.revalidated or not plan.dirs:
        return None
    newest = max(max(st.st_mtime_ns, st.st_ctime_ns) for _, st in plan.dirs) / 1e9
    if time.time() - newest <= cache_mod.RACY_S:
        return None
    try:
        again = plan_ingest(plan.root)
    except InputError:
        return None
    return _plan_snapshot(again) if again.cache_key == plan.cache_key else None


def revalidated_plan(path: str | Path, early: _EarlyRead | None) -> IngestPlan | None:
    """The plan of the folder's last cache, when nothing in the folder changed since; else ``None``.

    A reload at 4096 ranks spent ~0.4 s walking the folder (8,193 listings, 36,865 stats) to find
    the files whose identity makes the cache key. The snapshot stored with the cache entry
    (:func:`advisor_chat.ingest.cache.revalidate`) replaces the walk by one ``stat`` per folder
    and per file (~0.15 s). The plan returned is only good for finding the cached profile: on a
    miss, plan again with :func:`plan_ingest`.

    Raises:
        InputError: See :func:`check_root`.
    """
    if early is None:
        return None
    started = time.perf_counter()
    root = check_root(path)
    got = cache_mod.revalidate(early.cache_dir, early.key, str(root))
    if got is None:
        return None
    files, units = got
    key = cache_mod.cache_key(root, files)
    if key != early.key:
        return None
    PARSE_STATS["revalidated"] += 1
    return IngestPlan(
        root=root,
        layout=Layout(root=root),
        rank_dirs=[],
        cache_key=key,
        started=started,
        files=files,
        units=units,
        revalidated=True,
    )


def load_cached(
    plan: IngestPlan,
    settings: Settings,
    *,
    use_cache: bool = True,
    early: _EarlyRead | None = None,
) -> Profile | None:
    """The cached profile for ``plan`` (``cache_hit`` set, ``stats`` filled), or ``None``.

    ``None`` also when caching is off (``use_cache`` false or ``settings.cache`` false). Heavy
    tables come back unread: they are read from their cached parts (or files) on first use.
    ``early``: the folder's last cache, being read since before ``plan`` was made; used when its
    key is ``plan.cache_key``.
    """
    if not (use_cache and settings.cache):
        return None
    pending = _PENDING_WRITES.get(plan.cache_key)
    if pending is not None:
        pending.join()  # a write of this profile started by this process
    hit = None
    if early is not None and early.key == plan.cache_key:
        hit = early.get()
    if hit is None:
        hit = cache_mod.load(settings.cache_dir, plan.cache_key)
    if hit is None:
        return None
    cached, heavy = hit
    PARSE_STATS["cache_hits"] += 1
    cached.stats = {"files_parsed": 0, "seconds": time.perf_counter() - plan.started}
    if heavy is not None:
        files, order = heavy
        reader = HeavyReader(
            files,
            order,
            cache_dir=heavy_cache_dir(settings, plan.cache_key),
            workers=_workers(settings, None),
            identity=plan.files,
        )
        reader.profile = cached
        cached.attach_heavy(reader)
    cached.cache_dir = settings.cache_dir
    return cached


def save_cached(
    plan: IngestPlan,
    settings: Settings,
    profile: Profile,
    *,
    use_cache: bool = True,
    background: bool = False,
) -> threading.Thread | None:
    """Write ``profile`` to the cache under ``plan.cache_key`` (no-op when caching is off).

    Heavy tables are not part of it (their parts are cached as they are read). With
    ``background`` the write runs in a (non-daemon) thread, returned, so that the caller can
    print its answer first; the process waits for it at exit.
    """
    if not (use_cache and settings.cache):
        return None
    snapshot = Profile(
        root=profile.root,
        layout=profile.layout,
        tables={
            n: df
            for n, df in profile.tables.items()
            if profile.heavy is None or n not in profile.heavy.tables()
        },
        sources=dict(profile.sources),
        warnings=list(profile.warnings),
        profile_id=profile.profile_id,
        extra_sources=list(profile.extra_sources),
    )
    heavy = profile.heavy
    index = (heavy.files, heavy.order) if isinstance(heavy, HeavyReader) else None
    walk = _plan_snapshot(plan)

    def write() -> None:
        if cache_mod.save(
            settings.cache_dir,
            plan.cache_key,
            snapshot,
            heavy_index=index,
            plan=walk if walk is not None else _settled_snapshot(plan),
        ):
            cache_mod.prune(settings.cache_dir, settings.cache_max_mb * 1e6, keep=plan.cache_key)

    if not background:
        write()
        return None
    th = threading.Thread(target=write, name="advisor-cache-write", daemon=False)
    _PENDING_WRITES[plan.cache_key] = th
    th.start()
    return th


#: Background cache writes of this process by cache key (a reload of the key waits for its write).
_PENDING_WRITES: dict[str, threading.Thread] = {}


#: Tables that hold measurements (not only metadata).
_DATA_TABLES = (
    "step_trace",
    "comm_ops",
    "comm_bandwidth",
    "comm_matrix",
    "op_statistic",
    "memory",
    "kernels",
    "host_dispatch",
    "stage_trace",
)


def _refuse_if_nothing_readable(profile: Profile) -> None:
    """Files left out one by one are warnings; when nothing with data was left, it is bad input.

    Raises:
        InputError: Every file that could hold measurements was unreadable; names the first one,
            its problem and fix, and how many files were left out.
    """
    skipped = [w for w in profile.warnings if w.code == "file_skipped" and LEFT_OUT in w.message]
    if not skipped or any(profile.has(t) for t in _DATA_TABLES):
        return
    first = skipped[0].message.split(LEFT_OUT)[0]
    more = f" ({len(skipped)} files could not be read)" if len(skipped) > 1 else ""
    raise InputError(
        f"nothing in {profile.root} could be read{more}: {first}",
        path=skipped[0].path,
    )


def _freeze_at_exit() -> None:
    """Skip the collector's final pass over every object when the interpreter exits.

    A loaded 1024-rank profile is ~10^6 Python objects; the last collection at shutdown walked
    them all (0.15-0.2 s of every CLI run). Frozen objects are still freed by reference
    counting; only cycles are left to the OS, which reclaims the whole process anyway.
    """
    gc.freeze()


atexit.register(_freeze_at_exit)


def wait_cache_writes() -> None:
    """Wait until every background cache write of this process has finished."""
    for th in list(_PENDING_WRITES.values()):
        th.join()


def _workers(settings: Settings, workers: int | None) -> int:
    n = settings.workers if workers is None else workers
    return n if n > 0 else (os.cpu_count() or 1)


def load_profile(
    path: str | Path,
    *,
    settings: Settings | None = None,
    use_cache: bool = True,
    progress: bool | ProgressCallback | None = None,
    workers: int | None = None,
    cache_write: Literal["background", "now"] = "background",
) -> Profile:
    """Load a profiling folder into a validated :class:`Profile`.

    Light tables (step trace, communication, matrix, operator statistics, memory, metadata) are
    read for every rank; the heavy tables (kernels and host dispatch: ``kernel_details.csv`` and
    ``trace_view.json`` of the text export, the profiler DB of the DB export) are read per rank
    when first used (``profile.get('kernels')`` reads every rank, ``profile.kernels_for(ranks)``
    only those) and cached as they are read.

    Args:
        path: A folder holding per-rank ``*_ascend_pt``/``*_ascend_ms`` folders (text or DB export),
            a ``cluster_analysis_output/``, ``PROF_*`` folders, or a mix; or one of those itself.
        settings: Settings (cache folder, default workers); loaded from env/config when ``None``.
        use_cache: Read/write the cache (also needs ``settings.cache``).
        progress: ``True`` shows progress on stderr (rich bars on a terminal, a plain line per
            quarter otherwise; default: for ≥ 32 rank folders); a callable
            ``progress(stage, done, total)`` is called instead (stages
            ``"ranks"``, ``"kernels"``, ``"host_dispatch"``; also for later lazy reads).
        workers: Processes for per-rank parsing (default ``settings.workers``; 0 = CPU count).
            A pool is used from 192 rank folders on (below, one process is faster).
        cache_write: ``"background"`` writes the cache in a thread after returning
            (``profile.stats`` is filled first; the process waits for it at exit), ``"now"``
            before returning.

    Returns:
        The profile; ``profile.cache_hit`` tells whether it came from the cache.

    Raises:
        InputError: Missing/empty/unreadable path, nothing recognizable, a rank folder without
            ``ASCEND_PROFILER_OUTPUT/`` (and nothing else usable), duplicate rank ids, a CSV without
            required columns, an unreadable or corrupt file.
    """
    settings = settings or load_settings()
    early = _read_cache_early(path, settings, use_cache)
    plan = revalidated_plan(path, early) or plan_ingest(path)
    PARSE_STATS["loads"] += 1
    cb: ProgressCallback | None
    stop: Callable[[], None] | None = None
    if callable(progress):
        cb = progress
    elif _progress_enabled(progress, plan.units):
        cb, stop = rich_progress()
    else:
        cb = None
    try:
        cached = load_cached(plan, settings, use_cache=use_cache, early=early)
        if cached is not None:
            cache_mod.touch(settings.cache_dir, plan.cache_key)  # recently used: pruned last
            if early is None or early.key != plan.cache_key:
                cache_mod.remember(settings.cache_dir, str(plan.root), plan.cache_key)
            walk = _plan_snapshot(plan)
            if walk is not None:
                # this load walked the folder: the stored walk is missing (first written while
                # the folder was too fresh to trust), damaged or from an older version
                cache_mod.store_plan(settings.cache_dir, plan.cache_key, walk)
            if isinstance(cached.heavy, HeavyReader):
                cached.heavy.progress = progress if callable(progress) else None
                cached.heavy.rich = stop is not None
            return cached
        if plan.revalidated:  # the stored plan named a cache that could not be read
            plan = plan_ingest(path)

        n_workers = _workers(settings, workers)
        with gc_paused():
            units, batch_tables = _read_light(plan.rank_dirs, n_workers, cb)
            cluster_data = [read_cluster_dir(d) for d in plan.cluster_dirs]
            msprof_data = [read_msprof_dir(d) for d in plan.msprof_dirs]
            PARSE_STATS["parses"] += 1
            PARSE_STATS["units_read"] += len(units) + len(cluster_data) + len(msprof_data)

            profile = assemble_profile(
                plan,
                units,
                cluster_data,
                msprof_data,
                batch_tables=batch_tables,
                heavy_cache=heavy_cache_dir(settings, plan.cache_key, use_cache),
                workers=n_workers,
                progress=progress if callable(progress) else None,
            )
    finally:
        if stop is not None:
            stop()
    _refuse_if_nothing_readable(profile)
    if stop is not None and isinstance(profile.heavy, HeavyReader):
        profile.heavy.rich = True  # the lazy reads later show their progress the same way
    save_cached(plan, settings, profile, use_cache=use_cache, background=cache_write != "now")
    if use_cache and settings.cache:
        profile.cache_dir = settings.cache_dir
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
        u.sources = [s._replace(rank=nxt) for s in u.sources]
        origin = str(u.meta.get("rank_origin") or "")
        if origin.startswith(IMPLAUSIBLE):
            warnings.append(
                DataWarning(
                    code="invalid_rank_id",
                    message=f"{u.source_dir} gives rank {origin[len(IMPLAUSIBLE) :]}, beyond any "
                    f"cluster (at most {MAX_RANK_ID}); assumed rank {nxt} by folder order: check "
                    "its profiler_info file name",
                    path=u.source_dir,
                    ranks=(nxt,),
                )
            )
            continue
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
            a, b = Path(seen[u.rank]), Path(u.source_dir)
            remedy = (
                "Keep one folder per rank (usually the newest run; the folder name ends in its "
                "timestamp) and move the other one out of the profiling folder"
            )
            if a.parent != b.parent:
                # two runs side by side (before/ and after/): compare them instead
                common = Path(os.path.commonpath([a, b]))
                ra, rb = a.relative_to(common).parts[0], b.relative_to(common).parts[0]
                if re.search(r"before|old|base|prev|orig", rb, re.I):  # the earlier run: baseline
                    ra, rb = rb, ra
                remedy = (
                    f"{common} holds two runs ({ra}/ and {rb}/): analyze one of them, and to "
                    f"compare them pass the other as the baseline (e.g. `advisor-chat ask "
                    f'{common / rb} "what changed?" --baseline {common / ra}`)'
                )
            raise InputError(
                f"rank {u.rank} appears twice: in {seen[u.rank]} and in {u.source_dir}",
                path=u.source_dir,
                remedy=remedy,
            )
        seen[u.rank] = u.source_dir


def _concat(frames: Iterable[pd.DataFrame | None]) -> pd.DataFrame:
    fs = [f for f in frames if f is not None and not f.empty]
    if not fs:
        return pd.DataFrame()
    return pd.concat(fs, ignore_index=True) if len(fs) > 1 else fs[0].reset_index(drop=True)


def _map_matrix(
    frames: list[pd.DataFrame], group_ranks: dict[str, list[int]], warnings: list[DataWarning]
) -> pd.DataFrame:
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
    # hash-factorize the group column (a sort of ~10^5 strings cost 0.3 s at 1024 ranks)
    codes, uniques = pd.factorize(df["group"].astype("str"))
    a_all = pd.to_numeric(df["src_local"], errors="coerce").to_numpy(dtype="float64")
    b_all = pd.to_numeric(df["dst_local"], errors="coerce").to_numpy(dtype="float64")
    src = np.full(len(df), np.nan)
    dst = np.full(len(df), np.nan)
    for i in np.argsort(np.asarray(uniques, dtype=object)):
        g = str(uniques[i])
        sel = codes == i
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
        # first comm_kind per group, and the ranks seen per group (one row per (group, rank))
        first = comm_ops.drop_duplicates("group", keep="first")
        for g, k in zip(first["group"].tolist(), first["comm_kind"].tolist(), strict=True):
            kinds.setdefault(str(g), str(k))
        pairs = comm_ops.loc[comm_ops["rank"].notna(), ["group", "rank"]].drop_duplicates()
        for g, r in zip(pairs["group"].tolist(), pairs["rank"].tolist(), strict=True):
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
                "distributed_args": m.get("distributed_args"),
                "rank_origin": m.get("rank_origin"),
                **device_info(Path(u.source_dir)),
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


def _foreign_cluster(c: RankData, tables: dict[str, pd.DataFrame]) -> str | None:
    """Why cluster output ``c`` is not derived from the rank folders' step traces, or ``None``.

    msprof-analyze writes ``cluster_step_trace_time.csv`` from the ranks' own
    ``step_trace_time.csv``: the same run has the same steps and, per (rank, step), the same
    Computing. Steps that never meet, or Computing that differs by more than 5 % (median over
    the common rank rows), mean another run.
    """
    mine, theirs = tables.get("step_trace"), c.tables.get("step_trace")
    if mine is None or theirs is None or mine.empty or theirs.empty:
        return None
    cols = ["rank", "step", "computing_us"]
    if not all(x in mine.columns and x in theirs.columns for x in cols):
        return None
    a = mine[cols].apply(pd.to_numeric, errors="coerce")
    b = theirs[cols].apply(pd.to_numeric, errors="coerce")
    sa = set(a["step"].dropna()[a["step"].dropna() >= 0].astype(int).tolist())
    sb = set(b["step"].dropna()[b["step"].dropna() >= 0].astype(int).tolist())
    if sa and sb and not sa & sb:
        return f"its steps {sorted(sb)[:5]} are not the rank folders' steps {sorted(sa)[:5]}"
    on = ["rank", "step"] if sa & sb else ["rank"]
    ja = a.groupby(on)["computing_us"].mean()
    jb = b.groupby(on)["computing_us"].mean()
    both = pd.concat([ja.rename("a"), jb.rename("b")], axis=1, join="inner").dropna()
    both = both[(both["a"] > 0) & (both["b"] > 0)]
    if both.empty:
        return None
    rel = float(((both["a"] - both["b"]).abs() / both[["a", "b"]].max(axis=1)).median())
    if rel > 0.05:
        return f"per rank, its Computing differs from the rank folders' by a median {rel:.0%}"
    return None


#: Per-rank files whose absence on some ranks changes what can be concluded about them.
_PER_RANK_FILES = {
    "comm_matrix": (
        "communication_matrix.json",
        "the links of those ranks are seen only from "
        "their peers' ends; a slow link there may not be named",
    ),
    "comm_ops": (
        "communication.json",
        "who waits for whom at the collectives is not measured on those ranks",
    ),
}


def _partial_files(profile: Profile, ranks: list[int]) -> list[DataWarning]:
    """``partial_files`` warnings: a per-rank file most ranks have is missing on a few.

    Not raised when a cluster file stands in for it. Source: the tables' sources
    (:class:`TableSource` per rank).
    """
    out: list[DataWarning] = []
    if len(ranks) < 3:
        return out
    for table, (file, lost) in _PER_RANK_FILES.items():
        srcs = profile.sources.get(table, [])
        if not srcs or any(s.rank is None for s in srcs):
            continue
        have = {int(s.rank) for s in srcs if s.rank is not None}
        missing = sorted(set(ranks) - have)
        if not missing or len(missing) > len(ranks) // 2:
            continue
        shown = format_ranks(missing)
        out.append(
            DataWarning(
                code="partial_files",
                message=f"{file} is missing for {len(missing)} rank(s) ({shown}) while "
                f"{len(have)} other ranks have it: {lost}. Copy the whole "
                "ASCEND_PROFILER_OUTPUT folder of those ranks",
                ranks=tuple(missing),
            )
        )
    return out


def _quality(
    profile: Profile, meta: pd.DataFrame, group_ranks: dict[str, list[int]]
) -> list[DataWarning]:
    out: list[DataWarning] = []
    ranks = profile.ranks
    if not ranks:
        return out
    expected: set[int] = set(range(0, max(ranks) + 1)) if max(ranks) < MAX_RANK_ID else set()
    why = "gaps in the rank ids"
    if not meta.empty and "world_size" in meta and meta["world_size"].notna().any():
        wsf = float(pd.to_numeric(meta["world_size"], errors="coerce").max())
        if not plausible_world(wsf):  # never sized from: 10^12 ranks would allocate gigabytes
            out.append(
                DataWarning(
                    code="world_size_invalid",
                    message=f"profiler_metadata.json gives world_size {wsf:.0f}, which no cluster "
                    f"has (at most {MAX_RANK_ID}); it is ignored",
                )
            )
        else:
            ws = int(wsf)
            if ws > max(ranks) + 1:
                why = f"world_size {ws} in distributed_args"
            expected |= set(range(ws))
    for rs in group_ranks.values():
        if set(rs) - set(ranks):
            why = "ranks of the communication groups in profiler_metadata.json"
        expected |= set(rs)
    # the cluster output's communication_group.json lists every rank of every group too (a
    # truncated cluster_step_trace_time.csv then still shows which ranks are lost)
    cg = profile.tables.get("comm_groups")
    if cg is not None and not cg.empty and "ranks" in cg:
        listed = {
            int(r)
            for rs in cg["ranks"]
            if isinstance(rs, (list, tuple, np.ndarray))
            for r in rs
            if 0 <= int(r) < MAX_RANK_ID
        }
        if listed - set(ranks) - expected:
            why = (
                "ranks of the communication groups (communication_group.json)"
                if profile.layout.startswith("cluster")
                else "ranks of the communication groups"
            )
        expected |= listed
    cm = profile.tables.get("comm_matrix")
    if cm is not None and not cm.empty and len(ranks) > 1:
        ends = np.concatenate(
            [
                pd.to_numeric(cm[c], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
                for c in ("src_rank", "dst_rank")
            ]
        )
        linked = set(pd.unique(ends[np.isfinite(ends)]).astype(int).tolist())  # hash, no sort
        if linked - set(ranks) - expected:
            why = "ranks that appear as communication-matrix link ends"
        expected |= linked
    missing = sorted(expected - set(ranks))
    if missing:
        shown = format_ranks(missing)
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
    out += _partial_files(profile, ranks)
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
    batch_tables: list[dict[str, pd.DataFrame]] | None = None,
    heavy_cache: Path | None = None,
    workers: int = 1,
    progress: ProgressCallback | None = None,
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
        batch_tables: Light tables of :func:`read_light_batch` batches (rows of the units whose
            rank is known); the units' own ``tables`` are added to them.
        heavy_cache: Where the heavy reader caches the per-rank tables it reads (``None``: nowhere).
        workers: Processes the heavy reader may use for many ``trace_view.json`` at once.
        progress: Callback for the heavy reads (see :func:`load_profile`).

    Raises:
        InputError: Two units claim the same rank; a table misses required columns.
    """
    cluster_data = cluster_data or []
    msprof_data = msprof_data or []
    profile = _assemble(
        plan.root,
        plan.layout,
        rank_data,
        cluster_data,
        msprof_data,
        list(plan.warnings),
        batch_tables or [],
    )
    units = rank_data + msprof_data
    heavy: dict[str, dict[int, str]] = {}
    for u in units:
        for table, fpath in (u.meta.get("heavy_files") or {}).items():
            if u.rank is not None:
                heavy.setdefault(table, {})[int(u.rank)] = fpath
    if heavy:
        order = {int(u.rank): i for i, u in enumerate(units) if u.rank is not None}
        reader = HeavyReader(
            heavy,
            order,
            cache_dir=heavy_cache,
            workers=workers,
            progress=progress,
            identity=plan.files,
        )
        reader.profile = profile
        for table, files in reader.files.items():
            profile.sources.setdefault(table, []).extend(
                TableSource(table, f, _export_of(f), r) for r, f in files.items()
            )
        profile.attach_heavy(reader)
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
    batch_tables: list[dict[str, pd.DataFrame]],
) -> Profile:
    units = rank_data + msprof_data
    _assign_ranks(units, warnings)
    _check_duplicates(units)
    for u in units + cluster_data:
        warnings.extend(u.warnings)
    # rank-id disagreements, missing tables, mixed runs; a table missing because its file was
    # skipped (truncated, invalid) is said once, by the file_skipped warning that names the fix
    skipped = {w.path for w in warnings if w.code == "file_skipped" and w.path}
    warnings.extend(
        w for w in check_units(units) if not (w.code == "missing_table" and w.path in skipped)
    )
    position = {int(u.rank): i for i, u in enumerate(units) if u.rank is not None}

    def combined(name: str) -> pd.DataFrame:
        """Batch rows and per-unit rows of ``name``, in the order of the units."""
        parts = [b.get(name) for b in batch_tables] + [u.tables.get(name) for u in units]
        df = _concat(parts)
        if df.empty or sum(p is not None and not p.empty for p in parts) < 2:
            return df
        pos = df["rank"].map(position).fillna(len(position)).to_numpy()
        if (pos[1:] >= pos[:-1]).all():
            return df
        return df.iloc[np.argsort(pos, kind="stable")].reset_index(drop=True)

    tables: dict[str, pd.DataFrame] = {}
    sources: dict[str, list[TableSource]] = {}
    for name in (
        "step_trace",
        "kernels",
        "comm_ops",
        "comm_bandwidth",
        "host_dispatch",
        "aicore_freq",
        "python_frames",
        "hccl_ops",
        "memory",
        "op_statistic",
    ):
        df = combined(name)
        # a trace read without AI Core Freq samples still has the (empty) table, as the lazy
        # reader lists it
        if not df.empty or (name in TRACE_TRACKS and any(name in u.tables for u in units)):
            tables[name] = df if not df.empty else empty_table(name)
            sources[name] = [s for u in units for s in u.sources if s.table == name]

    extra: list[str] = []
    if units:
        # a cluster output of another run beside the rank folders would lend them its stages,
        # groups and links: left out, said
        kept = []
        for c in cluster_data:
            why = _foreign_cluster(c, tables)
            if why is None:
                kept.append(c)
                continue
            warnings.append(
                DataWarning(
                    code="cluster_output_foreign",
                    message=f"{show_path(c.source_dir)} is not an analysis of the rank folders "
                    f"beside it ({why}): it was left out. Re-run msprof-analyze cluster on these "
                    "rank folders, or move the old output away",
                    path=str(c.source_dir),
                )
            )
            extra.append(f"{c.source_dir}: msprof-analyze cluster output of another run; not used")
        cluster_data = kept
    cluster_groups = _concat(c.tables.get("comm_groups") for c in cluster_data)
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
        mat = _map_matrix([combined("comm_matrix")], group_ranks, warnings)
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
