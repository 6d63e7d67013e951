"""Columnar Parquet cache of loaded profiles, under ``settings.cache_dir`` (never the input folder).

Key: SHA-256 of the cache format version, the absolute input path and the identity
``(relative path, size, mtime_ns)`` of every file a reader may open. Touching, replacing or adding
one of those files changes the key, so stale data is never served. One folder per key holds one
``{table}.parquet`` per canonical table and ``profile.json`` (layout, sources, warnings). Columns
holding Python objects (dicts, lists) are stored as JSON strings and decoded on load. (Arrow
IPC/Feather was measured as an alternative: no faster to write, slower to read back into pandas 3.)
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

CACHE_VERSION = "ingest-v2"


def cache_key(root: Path, files: list[tuple[str, int, int]]) -> str:
    """Key from the identity of ``files``: ``(path, size, mtime_ns)`` tuples (path made relative to ``root``)."""
    h = hashlib.sha256()
    h.update(CACHE_VERSION.encode())
    h.update(str(root).encode("utf-8", "surrogateescape"))  # non-UTF-8 folder names
    base = len(str(root))
    for path, size, mtime in files:
        h.update(f"{path[base:]}\0{size}\0{mtime}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:32]


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
    heavy_index: tuple[dict[str, dict[int, str]], dict[int, int]] | None = None,
) -> Path | None:
    """Write ``profile`` under ``cache_dir/profiles/key`` atomically; returns the folder (or None on error).

    ``heavy_index`` — ``({table: {rank: file}}, {rank: folder position})`` of the heavy tables
    not in ``profile.tables`` — is stored so that a cached load can read them later (their rows
    are cached separately, in ``profiles/{key}.heavy/``, as they are read).
    """
    base = cache_dir / "profiles"
    target = base / key
    try:
        base.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=base))
        encoded: dict[str, list[str]] = {}
        for name, df in profile.tables.items():
            cols = [c for c in df.columns if _is_object(df[c])]
            out = df.copy() if cols else df
            for c in cols:
                out[c] = [json.dumps(v, default=str) if v is not None else None for v in out[c]]
            encoded[name] = cols
            write_parquet(out, tmp / f"{name}.parquet")
        doc = {
            "root": str(profile.root),
            "layout": profile.layout,
            "profile_id": profile.profile_id,
            "sources": {t: [_as_dict(s) for s in ss] for t, ss in profile.sources.items()},
            "warnings": [_as_dict(w) for w in profile.warnings],
            "extra_sources": profile.extra_sources,
            "encoded": encoded,
            "heavy": None
            if heavy_index is None
            else {
                "files": {
                    t: {str(r): f for r, f in fs.items()} for t, fs in heavy_index[0].items()
                },
                "order": {str(r): i for r, i in heavy_index[1].items()},
            },
        }
        (tmp / "profile.json").write_bytes(
            orjson.dumps(
                doc, default=str, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
            )
        )
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
        return target
    except OSError:
        return None


def load_heavy_index(
    cache_dir: Path, key: str
) -> tuple[dict[str, dict[int, str]], dict[int, int]] | None:
    """The heavy-table index stored by :func:`save` for ``key`` (``None`` when there is none)."""
    try:
        doc = orjson.loads((cache_dir / "profiles" / key / "profile.json").read_bytes())
        h = doc.get("heavy")
        if not h:
            return None
        files = {t: {int(r): f for r, f in fs.items()} for t, fs in h["files"].items()}
        return files, {int(r): int(i) for r, i in h["order"].items()}
    except (OSError, ValueError, KeyError, AttributeError, orjson.JSONDecodeError):
        return None


def load(cache_dir: Path, key: str) -> Profile | None:
    """Return the cached profile for ``key`` or ``None`` (missing or unreadable cache)."""
    with gc_paused():
        return _load(cache_dir, key)


def _load(cache_dir: Path, key: str) -> Profile | None:
    folder = cache_dir / "profiles" / key
    meta_path = folder / "profile.json"
    if not meta_path.is_file():
        return None
    try:
        doc: dict[str, Any] = orjson.loads(meta_path.read_bytes())
        tables = {}
        for name, cols in doc["encoded"].items():
            df = pd.read_parquet(folder / f"{name}.parquet")
            for c in cols:
                df[c] = [orjson.loads(v) if isinstance(v, str) else None for v in df[c]]
            tables[name] = df
    except (OSError, ValueError, KeyError, orjson.JSONDecodeError):
        return None
    sources = {
        t: [TableSource(**{**s, "export": s["export"]}) for s in ss]
        for t, ss in doc["sources"].items()
    }
    warnings = [DataWarning(**{**w, "ranks": tuple(w.get("ranks", ()))}) for w in doc["warnings"]]
    return Profile(
        root=Path(doc["root"]),
        layout=doc["layout"],
        tables=tables,
        sources=sources,
        warnings=warnings,
        profile_id=doc.get("profile_id", key),
        cache_hit=True,
        extra_sources=list(doc.get("extra_sources", [])),
    )
