"""Columnar Parquet cache of loaded profiles, under ``settings.cache_dir`` (never the input folder).

Key: SHA-256 of the cache format version, the absolute input path and the identity
``(relative path, size, mtime_ns, ctime_ns)`` of every file a reader may open. Touching, replacing or adding
one of those files changes the key, so stale data is never served. One folder per key holds one
``{table}.parquet`` per canonical table and ``profile.json.zst`` (layout, sources, warnings, the
heavy-table index). Columns holding Python objects (dicts, lists) are stored as JSON strings and
decoded on load, each distinct string once (the ranks of a job mostly share one environment).
Sources and the heavy-table index are stored as columns with paths relative to the input folder
(at 4096 ranks: 40,960 sources; 8.5 MB of records became 2.6 MB). (Arrow IPC/Feather was
measured as an alternative: no faster to write, slower to read back into pandas 3.)

``plan.json.zst`` beside them is the walk that found the files (every folder listed, with its stamps,
and the files in key order): a reload stats those instead of walking the folder again, and walks
when a folder changed (:func:`revalidate`; 0.4 -> 0.15 s at 4096 ranks).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from advisor_chat.ingest.common import gc_paused
from advisor_chat.ingest.profile import DataWarning, Profile, TableSource

#: The entry's JSON documents (layout, sources, warnings, heavy index; the stored walk), each
#: compressed with zstd: at 4096 ranks 10 MB of JSON became 0.6 MB (4 ms to compress or expand),
#: a third of the entry's bytes, which a reload whose entry the OS paged out reads back from disk.
PROFILE_DOC = "profile.json.zst"
PLAN_DOC = "plan.json.zst"
#: Largest expanded document accepted (a damaged size field must not allocate gigabytes).
_MAX_DOC_BYTES = 1 << 30


def dump_doc(obj: Any) -> bytes:
    """``obj`` as JSON (orjson; numpy values, non-string keys) in zstd, its size in front.

    Layout: the expanded size as 8 bytes little-endian, then one zstd frame.
    """
    raw = orjson.dumps(
        obj, default=str, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    )
    return len(raw).to_bytes(8, "little") + pa.Codec("zstd").compress(raw, asbytes=True)


def load_doc(path: Path) -> Any:
    """The document :func:`dump_doc` wrote to ``path``.

    Raises:
        OSError: The file cannot be read.
        ValueError: It is not such a document (short, damaged frame, wrong size, not JSON).
    """
    data = path.read_bytes()
    size = int.from_bytes(data[:8], "little")
    if len(data) < 8 or size > _MAX_DOC_BYTES:
        raise ValueError(f"{path} is not a cache document")
    try:
        raw = pa.Codec("zstd").decompress(data[8:], decompressed_size=size, asbytes=True)
    except pa.ArrowException as exc:
        raise ValueError(f"{path}: {exc}") from exc
    return orjson.loads(raw)


CACHE_VERSION = (
    "ingest-v24"  # v24: hccl_ops, the HCCL operators' data type and count (trace_view.json)
    # v23: kernels carry Model ID (model_id) and HF32 Eligible (hf32_eligible)
    # v22: host_dispatch holds the host's memory allocation calls (aclrtMalloc*)
    # v21: python_frames sums the short frames per thread, frame and step (calls)
    # v20: meta carries the device's core counts and clock (info.json DeviceInfo)
    # v19: python_frames holds the host's framework operators (cpu_op) too
    # v18: the host's Python frames (python_frames, a heavy table), meta's distributed_args
    # v17: recorded Python GC pauses are host_dispatch rows (api_name "GC")
    # v15: kernels carry input_formats and the PipeUtilization PMU ratios
    # v14: a per-rank file with no rows is warned about as such (missing_table)
    # v13: the AI Core Freq counter track (aicore_freq, a heavy table)
    # v12: host_dispatch carries the host's synchronize calls and api_duration_us
    # v11: a kernel_details.csv read later that ends inside a row is warned about
    # at load; v10: a rank folder with both the text and the DB export is warned
    # about; v9: a CSV cut inside its last row, repeated kernel tasks, per-rank files
    # missing on a few ranks are warned about; v8: numbers with thousands separators / a
    # decimal comma are read; v7: env vars a
    # job records in its own metadata join meta.env; v6: JSON documents
    # zstd-compressed; v5: ctime in the key, shapes, categoricals
)

#: ``({table: {rank: file}}, {rank: folder position})`` of the heavy tables read on demand.
HeavyIndex = tuple[dict[str, dict[int, str]], dict[int, int]]


#: Text columns of the big communication tables kept as categoricals in the cache: a handful of
#: values over up to 10^6 rows (1.1 M matrix rows at 4096 ranks). Read back, they decode from
#: Parquet's dictionary without making a string per row (0.3-0.5 s -> 0.1-0.2 s, 164 -> 70 MB).
CATEGORICAL = {
    "comm_matrix": ("group", "op_name", "transport", "link_op_name"),
    "comm_bandwidth": ("group", "op_name", "transport"),
}


def cache_key(root: Path, files: list[tuple[str, int, int, int]]) -> str:
    """Key from the identity of ``files``: ``(path, size, mtime_ns, ctime_ns)`` tuples (path made relative to ``root``)."""
    h = hashlib.sha256()
    h.update(CACHE_VERSION.encode())
    h.update(str(root).encode("utf-8", "surrogateescape"))  # non-UTF-8 folder names
    base = len(str(root))
    text = "".join(
        f"{path[base:]}\0{size}\0{mtime}\0{ctime}\n" for path, size, mtime, ctime in files
    )
    h.update(text.encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:32]


def _pointer(cache_dir: Path, root: str) -> Path:
    digest = hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return cache_dir / "profiles" / "roots" / digest


def last_key(cache_dir: Path, root: str) -> str | None:
    """The key last cached for the folder ``root`` (absolute, resolved), or ``None``.

    Only a hint: a loader may start reading that cache while it computes the current key, and
    uses what it read only when the two keys are equal.
    """
    try:
        key = _pointer(cache_dir, root).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return key if len(key) == 32 and all(c in "0123456789abcdef" for c in key) else None


def remember(cache_dir: Path, root: str, key: str) -> None:
    """Record ``key`` as the latest cache of ``root`` (atomic; failures only cost the hint)."""
    target = _pointer(cache_dir, root)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(key)
        os.replace(tmp, target)
    except OSError:
        return


def prefetch(cache_dir: Path, key: str) -> None:
    """Ask the OS to start reading the files of entry ``key`` now (``posix_fadvise`` WILLNEED).

    A reload reads the entry's Parquet tables one after another while it stats the input
    files; when the entry has been paged out (an idle minute on a VM that reclaims memory), the
    kernel then fetches all of its files at once, beside the stats, instead of one table at a
    time as they are decoded. Never raises; a no-op where the call does not exist.
    """
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return
    try:
        names = os.listdir(cache_dir / "profiles" / key)
    except OSError:
        return
    for name in names:
        try:
            fd = os.open(cache_dir / "profiles" / key / name, os.O_RDONLY)
        except OSError:
            continue
        try:
            advise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(fd)


def touch(cache_dir: Path, key: str) -> None:
    """Mark the entry ``key`` as used now (its :data:`PROFILE_DOC` mtime orders :func:`prune`)."""
    try:
        os.utime(cache_dir / "profiles" / key / PROFILE_DOC)
    except OSError:
        return


#: A folder whose mtime or ctime is less than this before the moment it was listed is not
#: trusted by a reload: a change within the same tick of the file system's clock would leave its
#: stamps as they were (git's "racy" index entries have the same cause).
RACY_S = 1.0


def plan_snapshot(
    root: Path,
    files: list[tuple[str, int, int, int]],
    dirs: list[tuple[str, os.stat_result]],
    listed_at: float,
    units: int,
) -> dict[str, Any] | None:
    """What a reload needs to skip walking ``root``: its folders' stamps and its files, in order.

    Args:
        root: The profiling folder (resolved).
        files: The plan's ``(file, size, mtime_ns, ctime_ns)`` list, in key order.
        dirs: Every folder the plan listed, with its ``os.stat`` taken before the listing.
        listed_at: ``time.time()`` before the first of those stats.
        units: Number of folders the plan parses.

    Returns:
        ``{"dirs", "stamps", "files", "units"}`` (paths relative to ``root``; ``stamps``: device,
        inode, mtime_ns, ctime_ns of each folder, flat), or ``None`` when a folder changed less
        than :data:`RACY_S` before it was listed (its stamps cannot prove it unchanged later).
    """
    limit = int((listed_at - RACY_S) * 1e9)
    stamps: list[int] = []
    for _, st in dirs:
        if st.st_mtime_ns >= limit or st.st_ctime_ns >= limit:
            return None
        stamps += (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    base = str(root)
    return {
        "dirs": [_relative(d, base) for d, _ in dirs],
        "stamps": stamps,
        "files": [_relative(f[0], base) for f in files],
        "units": units,
    }


def store_plan(cache_dir: Path, key: str, snapshot: dict[str, Any]) -> None:
    """Add ``snapshot`` (:func:`plan_snapshot`) to the entry ``key`` (atomic; failures only cost speed)."""
    folder = cache_dir / "profiles" / key
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".plan.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(dump_doc(snapshot))
        os.replace(tmp, folder / PLAN_DOC)
    except OSError:
        return


def has_plan(cache_dir: Path, key: str) -> bool:
    """Whether the entry ``key`` holds a plan snapshot."""
    return (cache_dir / "profiles" / key / PLAN_DOC).is_file()


def revalidate(
    cache_dir: Path, key: str, root: str
) -> tuple[list[tuple[str, int, int, int]], int] | None:
    """The files of the plan stored with entry ``key``, stat'ed now, when no folder changed.

    A folder's device, inode, mtime and ctime change when an entry is added to it, removed or
    renamed; when every folder the plan listed has the stamps it had then, the same walk would
    find the same files. Their identities are taken again here (a file rewritten in place changes
    them, hence the key); the caller compares the key they give with ``key``.

    Returns:
        ``(files, units)`` — ``(file, size, mtime_ns, ctime_ns)`` in the stored order and the
        number of folders the plan parses — or ``None``: no snapshot, a folder changed or
        vanished, a file vanished.
    """
    try:
        doc = load_doc(cache_dir / "profiles" / key / PLAN_DOC)
        dirs, stamps, names, units = doc["dirs"], doc["stamps"], doc["files"], int(doc["units"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    prefix = root.rstrip("/") + "/"
    stat = os.stat
    try:
        for i, d in enumerate(_absolute(dirs, prefix)):
            st = stat(d)
            j = 4 * i
            if (
                st.st_mtime_ns != stamps[j + 2]
                or st.st_ctime_ns != stamps[j + 3]
                or st.st_ino != stamps[j + 1]
                or st.st_dev != stamps[j]
            ):
                return None
        files = []
        for f in _absolute(names, prefix):
            st = stat(f)
            files.append((f, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    except (OSError, IndexError):
        return None
    return files, units


def _size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:
                continue
    return total


def prune(cache_dir: Path, max_bytes: float, *, keep: str) -> list[str]:
    """Delete the least recently used cached profiles until the cache fits in ``max_bytes``.

    An entry is ``profiles/{key}/`` with its ``{key}.heavy/`` parts and ``{key}.diagnosis/``;
    "used" is the mtime of its :data:`PROFILE_DOC` (written when cached, touched on each cached
    load). ``keep`` (the entry just written) is never deleted. Failures only leave files behind.

    Returns:
        The keys deleted, oldest first.
    """
    base = cache_dir / "profiles"
    try:
        keys = [p.name for p in base.iterdir() if p.is_dir() and len(p.name) == 32]
    except OSError:
        return []
    entries = []
    total = 0
    for key in keys:
        parts = [base / key, base / f"{key}.heavy", base / f"{key}.diagnosis"]
        size = sum(_size(p) for p in parts)
        try:
            used = (base / key / PROFILE_DOC).stat().st_mtime
        except OSError:
            used = 0.0
        entries.append((used, key, size, parts))
        total += size
    deleted = []
    for _used, key, size, parts in sorted(entries):
        if total <= max_bytes:
            break
        if key == keep:
            continue
        for p in parts:
            shutil.rmtree(p, ignore_errors=True)
        total -= size
        deleted.append(key)
    return deleted


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    """Write ``df`` (without its index) to ``path`` as Parquet, converting on this thread only.

    ``DataFrame.to_parquet`` lets pyarrow convert columns on a ``concurrent.futures`` pool; in the
    background cache writer that pool is closed once the interpreter starts to exit, and the write
    failed with "cannot schedule new futures after interpreter shutdown" (a traceback on stderr
    and no cache). One conversion thread avoids the pool altogether.
    """
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False, nthreads=1), path)


def _is_object(s: pd.Series) -> bool:
    if s.dtype != object:
        return False
    for v in s:
        if v is None or (isinstance(v, float) and v != v):
            continue
        return isinstance(v, (dict, list, tuple))
    return False


def _as_dict(obj: Any) -> dict[str, Any]:
    """Shallow ``dataclasses.asdict`` (the fields here are plain values; asdict deep-copies)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def save(
    cache_dir: Path,
    key: str,
    profile: Profile,
    *,
    heavy_index: HeavyIndex | None = None,
    plan: dict[str, Any] | None = None,
) -> Path | None:
    """Write ``profile`` under ``cache_dir/profiles/key`` atomically; returns the folder (or None on error).

    ``heavy_index`` — ``({table: {rank: file}}, {rank: folder position})`` of the heavy tables
    not in ``profile.tables`` — is stored so that a cached load can read them later (their rows
    are cached separately, in ``profiles/{key}.heavy/``, as they are read). ``plan``: the
    :func:`plan_snapshot` of the load, stored as :data:`PLAN_DOC` (see :func:`revalidate`).
    """
    base = cache_dir / "profiles"
    target = base / key
    try:
        base.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=base))
        encoded: dict[str, list[str]] = {}
        tables = list(profile.tables.items())
        for name, df in tables:
            cols = [c for c in df.columns if _is_object(df[c])]
            cats = [c for c in CATEGORICAL.get(name, ()) if c in df.columns and c not in cols]
            out = df.copy(deep=False) if cols or cats else df
            for c in cols:
                out[c] = [json.dumps(v, default=str) if v is not None else None for v in out[c]]
            for c in cats:
                out[c] = out[c].astype("category")
            encoded[name] = cols
            write_parquet(out, tmp / f"{name}.parquet")
        root = str(profile.root)
        doc = {
            "root": root,
            "layout": profile.layout,
            "profile_id": profile.profile_id,
            "sources": {t: _source_columns(ss, root) for t, ss in profile.sources.items()},
            "warnings": [_as_dict(w) for w in profile.warnings],
            "extra_sources": profile.extra_sources,
            "encoded": encoded,
            "shapes": {name: [len(df), [str(c) for c in df.columns]] for name, df in tables},
            "heavy": None if heavy_index is None else _heavy_columns(heavy_index, root),
        }
        if plan is not None:
            (tmp / PLAN_DOC).write_bytes(dump_doc(plan))
        (tmp / PROFILE_DOC).write_bytes(dump_doc(doc))
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    except OSError:
        return None
    remember(cache_dir, root, key)
    return target


def _relative(path: str, root: str) -> str:
    """``path`` relative to ``root`` when inside it (``./`` marks it), else unchanged."""
    prefix = root.rstrip("/") + "/"
    return "./" + path[len(prefix) :] if path.startswith(prefix) else path


def _absolute(paths: list[str], prefix: str) -> list[str]:
    """Paths stored by :func:`_relative` made absolute again (``prefix``: the root and ``/``)."""
    return [prefix + p[2:] if p[:2] == "./" else p for p in paths]


def _source_columns(sources: list[TableSource], root: str) -> dict[str, list[Any]]:
    return {
        "table": [s.table for s in sources],
        "path": [_relative(s.path, root) for s in sources],
        "export": [s.export for s in sources],
        "rank": [s.rank for s in sources],
        "rows": [s.rows for s in sources],
        "version": [s.version for s in sources],
    }


def _heavy_columns(index: HeavyIndex, root: str) -> dict[str, Any]:
    files, order = index
    return {
        "files": {
            t: {"rank": list(fs), "path": [_relative(f, root) for f in fs.values()]}
            for t, fs in files.items()
        },
        "order": {"rank": list(order), "position": list(order.values())},
    }


def load(cache_dir: Path, key: str) -> tuple[Profile, HeavyIndex | None] | None:
    """The cached profile for ``key`` and its heavy-table index, or ``None`` (missing or unreadable)."""
    with gc_paused():
        return _load(cache_dir, key)


def _decode(values: Any) -> list[Any]:
    """JSON strings → objects, each distinct string parsed once (rows share the result; read-only)."""
    memo: dict[str, Any] = {}
    out: list[Any] = []
    for v in values:
        if not isinstance(v, str):
            out.append(None)
            continue
        obj = memo.get(v)
        if obj is None:
            obj = memo[v] = orjson.loads(v)
        out.append(obj)
    return out


def _load(cache_dir: Path, key: str) -> tuple[Profile, HeavyIndex | None] | None:
    folder = cache_dir / "profiles" / key
    meta_path = folder / PROFILE_DOC
    if not meta_path.is_file():
        return None
    try:
        doc: dict[str, Any] = load_doc(meta_path)
        tables = {}
        shapes = doc["shapes"]
        for name, cols in doc["encoded"].items():
            df = pd.read_parquet(folder / f"{name}.parquet")
            n_rows, columns = shapes[name]
            if len(df) != n_rows or [str(c) for c in df.columns] != columns:
                return None  # not the table that was written: parse the folder again
            for c in cols:
                df[c] = _decode(df[c])
            tables[name] = df
        prefix = str(doc["root"]).rstrip("/") + "/"
        sources = {
            t: list(
                map(
                    TableSource._make,
                    zip(
                        c["table"],
                        _absolute(c["path"], prefix),
                        c["export"],
                        c["rank"],
                        c["rows"],
                        c["version"],
                        strict=True,
                    ),
                )
            )
            for t, c in doc["sources"].items()
        }
        heavy: HeavyIndex | None = None
        if doc.get("heavy"):
            h = doc["heavy"]
            heavy = (
                {
                    t: dict(zip(c["rank"], _absolute(c["path"], prefix), strict=True))
                    for t, c in h["files"].items()
                },
                dict(zip(h["order"]["rank"], h["order"]["position"], strict=True)),
            )
    except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        return None
    warnings = [DataWarning(**{**w, "ranks": tuple(w.get("ranks", ()))}) for w in doc["warnings"]]
    profile = Profile(
        root=Path(doc["root"]),
        layout=doc["layout"],
        tables=tables,
        sources=sources,
        warnings=warnings,
        profile_id=doc.get("profile_id", key),
        cache_hit=True,
        extra_sources=list(doc.get("extra_sources", [])),
    )
    return profile, heavy
