"""The canonical :class:`Profile`: what every analyzer takes (STYLE.md §1)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

import pandas as pd

from advisor_chat.ingest.schema import TABLE_SPECS, empty_table
from advisor_chat.ranks import spread_sample

ExportType = Literal["text", "db", "cluster", "msprof", "mindspore", "synthetic"]


class TableSource(NamedTuple):
    """Where (part of) a canonical table came from, so findings can cite it.

    A named tuple (immutable, and built in bulk from the cache: 40,000 at 4096 ranks).

    Attributes:
        table: Canonical table name.
        path: File the rows were read from (absolute).
        export: Export type of that file.
        rank: Rank the file belongs to, or ``None`` for cluster-wide files.
        rows: Number of rows this file contributed.
        version: Format/header version tag when known (e.g. ``'2025-pipe-util'``, ``'cann 8.0.RC2'``).
    """

    table: str
    path: str
    export: ExportType
    rank: int | None = None
    rows: int = 0
    version: str | None = None


@dataclass(frozen=True)
class DataWarning:
    """A data-quality observation made at load time (not an error).

    Attributes:
        code: Stable id, e.g. ``missing_ranks``, ``mixed_versions``, ``trace_view_invalid``,
            ``profiler_level2``, ``no_communication_level0``, ``file_skipped``, ``file_changed``, ``missing_steps``.
        message: One sentence for the user, naming the file and what to do.
        path: File or folder concerned, if any.
        ranks: Ranks concerned, if any.
    """

    code: str
    message: str
    path: str | None = None
    ranks: tuple[int, ...] = ()


#: Tables read lazily (per rank, on first use) from the text export's big files.
HEAVY_TABLES = ("kernels", "host_dispatch", "aicore_freq", "python_frames", "hccl_ops")

#: Peer sample size: analyses that examine a few ranks compare them with this many other ranks.
PEER_SAMPLE = 16


class LazyTables(Protocol):
    """What :class:`TableDict` needs from the reader of heavy tables (see ``ingest.loader``)."""

    def pending(self, name: str) -> bool:
        """Whether some rank's rows of ``name`` are not read yet."""

    def available(self, name: str) -> list[int]:
        """Ranks that have (or will have, once read) rows of ``name``."""

    def ensure(self, name: str, ranks: Iterable[int] | None) -> None:
        """Read ``ranks`` (``None``: all) of ``name`` into the table dict if not read yet."""

    def tables(self) -> list[str]:
        """Names of the lazily read tables."""


class TableDict(dict):  # type: ignore[type-arg]
    """``Profile.tables``: a dict whose heavy tables are read on first access.

    ``d[name]`` and ``d.get(name)`` give the whole table (reading every rank not read yet); ``name in
    d``, iterating and ``keys()`` name every table (heavy ones too, without reading); ``items()`` and
    ``values()`` give the tables as read so far (a heavy table holds the ranks already read, and is
    absent before any), so that summaries and the cache do not force a full read.
    """

    lazy: LazyTables | None = None

    def __getitem__(self, key: str) -> pd.DataFrame:
        if self.lazy is not None and self.lazy.pending(key):
            self.lazy.ensure(key, None)
        return dict.__getitem__(self, key)  # type: ignore[no-any-return]

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        """The whole table ``key`` (heavy tables read first), or ``default``."""
        if self.lazy is not None and self.lazy.pending(key):
            self.lazy.ensure(key, None)
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        return self.lazy is not None and isinstance(key, str) and bool(self.lazy.available(key))

    def _names(self) -> list[str]:
        names = list(dict.keys(self))
        if self.lazy is not None:
            names += [n for n in self.lazy.tables() if n not in names and self.lazy.available(n)]
        return names

    def __iter__(self) -> Any:
        return iter(self._names())

    def keys(self) -> list[str]:  # type: ignore[override]
        """Names of every table, heavy ones included even when not read yet."""
        return self._names()

    def loaded(self, key: str) -> pd.DataFrame | None:
        """The table as read so far (no read triggered)."""
        return dict.get(self, key)

    def items(self) -> list[tuple[str, pd.DataFrame]]:  # type: ignore[override]
        """(name, table) of the tables read so far (no read triggered)."""
        return list(dict.items(self))

    def values(self) -> list[pd.DataFrame]:  # type: ignore[override]
        """The tables read so far (no read triggered)."""
        return list(dict.values(self))


@dataclass
class Profile:
    """Canonical tables of one profiling run (one or many ranks).

    Attributes:
        root: The folder the user pointed at.
        layout: Detected layout: ``ascend_pt_text``, ``ascend_pt_db``, ``cluster_output``,
            ``msprof``, ``ascend_ms``, or ``mixed`` (several of these), ``synthetic``.
        tables: Canonical tables by name (see :mod:`advisor_chat.ingest.schema`). A table that
            the data does not contain is absent (``get`` returns an empty one).
        sources: For each table, the files it was read from.
        warnings: Data-quality warnings found while loading.
        profile_id: Stable id derived from the input files' identities (path, size, mtime).
        cache_hit: True when the tables came from the Parquet cache (nothing was parsed).
        extra_sources: Inputs found but not used for the tables (e.g. a cluster_analysis_output/
            next to per-rank folders), with the reason.
        stats: Load statistics: ``files_parsed``, ``ranks_read``, ``seconds``.
        cache_dir: ``settings.cache_dir`` when the profile is cached there (the diagnosis is
            persisted next to it, under ``profiles/{profile_id}.diagnosis``), else ``None``.
        heavy: Reader of the heavy tables (``kernels`` from ``kernel_details.csv``,
            ``host_dispatch`` from ``trace_view.json``) of the text export, which are read per
            rank on first use (``None`` when every table is in memory).

    Heavy tables: ``get('kernels')`` reads every rank not read yet (then keeps it);
    :meth:`table_for` / :meth:`kernels_for` / :meth:`host_dispatch_for` read only the ranks asked
    for. :meth:`has` and :meth:`available_ranks` answer without reading.
    """

    root: Path
    layout: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    sources: dict[str, list[TableSource]] = field(default_factory=dict)
    warnings: list[DataWarning] = field(default_factory=list)
    profile_id: str = ""
    cache_hit: bool = False
    extra_sources: list[str] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    heavy: Any = field(default=None, repr=False, compare=False)
    cache_dir: Path | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.tables, TableDict):
            self.tables = TableDict(self.tables)
        if self.heavy is not None:
            self.tables.lazy = self.heavy

    def attach_heavy(self, heavy: LazyTables | None) -> None:
        """Set the reader of the heavy tables (the loader does this)."""
        self.heavy = heavy
        if not isinstance(self.tables, TableDict):
            self.tables = TableDict(self.tables)
        self.tables.lazy = heavy

    def _loaded(self, name: str) -> pd.DataFrame | None:
        t = self.tables
        return t.loaded(name) if isinstance(t, TableDict) else t.get(name)

    def table_for(self, name: str, ranks: Iterable[int]) -> pd.DataFrame:
        """Rows of table ``name`` for ``ranks`` only, reading just those ranks' heavy files.

        Returns an empty table with the canonical columns when none of ``ranks`` has rows.

        Raises:
            KeyError: ``name`` is not a canonical table.
        """
        if name not in TABLE_SPECS:
            raise KeyError(f"unknown table {name!r}; known: {sorted(TABLE_SPECS)}")
        want = sorted({int(r) for r in ranks})
        if self.heavy is not None and self.heavy.pending(name):
            self.heavy.ensure(name, want)
            df = self._loaded(name)
        else:
            df = self.tables.get(name)
        if df is None or df.empty:
            return empty_table(name)
        return df[df["rank"].isin(want)].reset_index(drop=True)

    def kernels_for(self, ranks: Iterable[int]) -> pd.DataFrame:
        """``kernels`` rows of ``ranks`` (reads only their ``kernel_details.csv``)."""
        return self.table_for("kernels", ranks)

    def host_dispatch_for(self, ranks: Iterable[int]) -> pd.DataFrame:
        """``host_dispatch`` rows of ``ranks`` (streams only their ``trace_view.json``)."""
        return self.table_for("host_dispatch", ranks)

    def aicore_freq_for(self, ranks: Iterable[int]) -> pd.DataFrame:
        """``aicore_freq`` rows of ``ranks`` (the AI Core Freq track of their trace / DB only)."""
        return self.table_for("aicore_freq", ranks)

    def python_frames_for(self, ranks: Iterable[int]) -> pd.DataFrame:
        """``python_frames`` rows of ``ranks`` (the with_stack frames of their trace only)."""
        return self.table_for("python_frames", ranks)

    def hccl_ops_for(self, ranks: Iterable[int]) -> pd.DataFrame:
        """``hccl_ops`` rows of ``ranks`` (the HCCL operator events of their trace only)."""
        return self.table_for("hccl_ops", ranks)

    def available_ranks(self, name: str) -> list[int]:
        """Ranks that have rows of table ``name``, read or not yet read (no file is read)."""
        found: set[int] = set()
        df = self._loaded(name)
        if df is not None and not df.empty and "rank" in df.columns:
            found.update(int(r) for r in df["rank"].dropna().unique())
        if self.heavy is not None:
            found.update(self.heavy.available(name))
        return sorted(found)

    def peer_sample(
        self, name: str, focus: Iterable[int] = (), n: int = PEER_SAMPLE
    ) -> tuple[list[int], bool]:
        """Ranks to examine in table ``name``: ``focus`` plus up to ``n`` evenly spaced peers.

        Returns (ranks, sampled): every available rank and ``False`` when they are at most
        ``len(focus) + n``; else ``focus`` plus ``n`` peers spread evenly over the sorted ranks
        (deterministic) and ``True``.
        """
        avail = self.available_ranks(name)
        keep = [int(r) for r in dict.fromkeys(focus) if int(r) in set(avail)]
        if len(avail) <= len(keep) + n:
            return avail, False
        rest = [r for r in avail if r not in set(keep)]
        return sorted(set(keep) | set(spread_sample(rest, n))), True

    def __repr__(self) -> str:
        """One line: folder, layout, ranks, steps, tables read, warnings (not the tables)."""
        from advisor_chat.ranks import format_ranks as fmt_ranks

        ranks, steps = self.ranks, self.steps
        tables = sorted(n for n, df in self.tables.items() if df is not None and not df.empty)
        return (
            f"{type(self).__name__}(root={str(self.root)!r}, layout={self.layout!r}, "
            f"ranks={len(ranks)} [{fmt_ranks(ranks)}], steps={len(steps)} [{fmt_ranks(steps)}], "
            f"tables={tables}, warnings={len(self.warnings)})"
        )

    def get(self, name: str) -> pd.DataFrame:
        """Return table ``name``, or an empty table with its columns if the data lacks it.

        Raises:
            KeyError: ``name`` is not a canonical table.
        """
        if name not in TABLE_SPECS:
            raise KeyError(f"unknown table {name!r}; known: {sorted(TABLE_SPECS)}")
        df = self.tables.get(name)
        return df if df is not None else empty_table(name)

    def has(self, name: str) -> bool:
        """Whether table ``name`` is present and non-empty (a heavy table not read yet counts)."""
        df = self._loaded(name)
        if df is not None and not df.empty:
            return True
        return self.heavy is not None and self.heavy.pending(name)

    @property
    def ranks(self) -> list[int]:
        """Sorted global ranks present in any table (meta first, then step_trace, kernels...)."""
        found: set[int] = set()
        for name in ("meta", "step_trace", "kernels", "comm_ops"):
            df = self._loaded(name)
            if df is not None and "rank" in df.columns and not df.empty:
                found.update(int(r) for r in df["rank"].dropna().unique())
            if self.heavy is not None:
                found.update(self.heavy.available(name))
        return sorted(found)

    @property
    def steps(self) -> list[int]:
        """Sorted step ids of ``step_trace`` (or ``kernels`` when there is no step trace)."""
        for name in ("step_trace", "kernels", "comm_ops"):
            df = self.tables.get(name)
            if df is not None and not df.empty:
                return sorted(int(s) for s in df["step"].dropna().unique())
        return []

    def source_files(self, table: str, rank: int | None = None) -> list[str]:
        """Files that contributed to ``table`` (for ``rank`` only, plus cluster-wide files)."""
        out = []
        for src in self.sources.get(table, []):
            if rank is None or src.rank is None or src.rank == rank:
                out.append(src.path)
        return out

    def cite(self, table: str, rank: int | None = None) -> str:
        """Short citation of where ``table`` came from, e.g. ``'step_trace_time.csv (16 files)'``.

        A table read on demand (kernels, host dispatch) cites only the files read so far and
        says so: ``'kernel_details.csv (24 files; read for 24 of 1024 ranks)'``, or, before any
        read, ``'kernel_details.csv (1024 files; read on demand)'``.
        """
        files = self.source_files(table, rank)
        heavy = self.heavy
        lazy = getattr(heavy, "files", {}).get(table) if heavy is not None else None
        note = ""
        if lazy and rank is None:
            loaded = getattr(heavy, "loaded", {}).get(table, set())
            if not loaded:
                note = "; read on demand"
            elif len(loaded) < len(lazy):
                files = [
                    s.path
                    for s in self.sources.get(table, [])
                    if s.rank is None or s.rank in loaded
                ]
                note = f"; read for {len(loaded)} of {len(lazy)} ranks"
        if not files:
            return f"{table} (no source file{note})"
        files = list(dict.fromkeys(files))  # a file two of the table's parts came from, once
        names = sorted({os.path.basename(f) for f in files})
        if len(files) == 1:
            return files[0] + (f" ({note[2:]})" if note else "")
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        return f"{shown} ({len(files)} files{note})"


# the notes :meth:`Profile.cite` appends to a file name
_CITE_COUNT = re.compile(r" \((\d+) files(?:; (read on demand)|; read for (\d+) of (\d+) ranks)?\)")
_NO_SOURCE = re.compile(r" \(no source file(?:; read on demand)?\)")
_ONE_FILE_NOTE = re.compile(r" \((?:read for (\d+) of (\d+) ranks|read on demand)\)$")


def cite_zh(citation: str) -> tuple[str, str]:
    """A :meth:`Profile.cite` citation split into its file name and its note said in Chinese.

    ``'step_trace_time.csv (16 files)'`` -> ``('step_trace_time.csv', '（共 16 个文件）')``;
    ``'kernel_details.csv (1024 files; read on demand)'`` -> ``(…, '（共 1024 个文件，按需读取）')``;
    ``'host_dispatch (no source file)'`` -> ``('host_dispatch', '（无源文件）')``; a citation
    without a note -> ``(citation, '')``. File names stay as they are.
    """
    if (m := _CITE_COUNT.search(citation)) is not None:
        if m.group(2):
            note = f"（共 {m.group(1)} 个文件，按需读取）"
        elif m.group(3):
            note = f"（共 {m.group(1)} 个文件，已读 {m.group(3)}/{m.group(4)} 张卡）"
        else:
            note = f"（共 {m.group(1)} 个文件）"
        return citation[: m.start()], note
    if (m := _NO_SOURCE.search(citation)) is not None:
        return citation[: m.start()], "（无源文件）"
    if (m := _ONE_FILE_NOTE.search(citation)) is not None:  # one file read of a lazy table
        if m.group(1):
            return citation[: m.start()], f"（已读 {m.group(1)}/{m.group(2)} 张卡）"
        return citation[: m.start()], "（按需读取）"
    return citation, ""
