"""The canonical :class:`Profile`: what every analyzer takes (STYLE.md §1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd

from advisor_chat.ingest.schema import TABLE_SPECS, empty_table

ExportType = Literal["text", "db", "cluster", "msprof", "mindspore", "synthetic"]


@dataclass(frozen=True)
class TableSource:
    """Where (part of) a canonical table came from, so findings can cite it.

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
            ``profiler_level2``, ``no_communication_level0``, ``file_skipped``, ``missing_steps``.
        message: One sentence for the user, naming the file and what to do.
        path: File or folder concerned, if any.
        ranks: Ranks concerned, if any.
    """

    code: str
    message: str
    path: str | None = None
    ranks: tuple[int, ...] = ()


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
        """Whether table ``name`` is present and non-empty."""
        df = self.tables.get(name)
        return df is not None and not df.empty

    @property
    def ranks(self) -> list[int]:
        """Sorted global ranks present in any table (meta first, then step_trace, kernels...)."""
        found: set[int] = set()
        for name in ("meta", "step_trace", "kernels", "comm_ops"):
            df = self.tables.get(name)
            if df is not None and "rank" in df.columns and not df.empty:
                found.update(int(r) for r in df["rank"].dropna().unique())
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
        """Short citation of where ``table`` came from, e.g. ``'step_trace_time.csv (16 files)'``."""
        files = self.source_files(table, rank)
        if not files:
            return f"{table} (no source file)"
        names = sorted({Path(f).name for f in files})
        if len(files) == 1:
            return files[0]
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        return f"{shown} ({len(files)} files)"
