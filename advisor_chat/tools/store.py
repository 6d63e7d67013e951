"""Per-session store of the tables behind tool results (the ``table_ref`` the UI expands)."""

from __future__ import annotations

import threading

import pandas as pd

from advisor_chat.errors import ToolArgumentError


class TableStore:
    """Holds the full tables that tool results refer to, by short reference (``t1``, ``t2``, ...).

    Tool results show at most a few rows to the model; the UI (or the paging tool
    ``show_table``) reads the rest from here. One store per session; references are stable for
    the store's lifetime. The same table object stored twice gets the same reference.
    """

    def __init__(self) -> None:
        self._tables: dict[str, pd.DataFrame] = {}
        self._titles: dict[str, str] = {}
        self._by_id: dict[int, str] = {}
        self._lock = threading.Lock()

    def put(self, df: pd.DataFrame, title: str = "") -> str:
        """Store ``df`` and return its reference (``t<N>``)."""
        with self._lock:
            ref = self._by_id.get(id(df))
            if ref is not None and self._tables.get(ref) is df:
                return ref
            ref = f"t{len(self._tables) + 1}"
            self._tables[ref] = df
            self._titles[ref] = title
            self._by_id[id(df)] = ref
            return ref

    def get(self, ref: str) -> pd.DataFrame:
        """Return the table stored under ``ref``.

        Raises:
            ToolArgumentError: Unknown reference; the message lists the known ones.
        """
        try:
            return self._tables[ref]
        except KeyError:
            known = ", ".join(self._tables) or "none yet"
            raise ToolArgumentError(
                f"table reference {ref!r} does not exist; known references: {known}"
            ) from None

    def title(self, ref: str) -> str:
        """Title given when the table was stored (e.g. ``'explain_rank(rank=12)'``)."""
        return self._titles.get(ref, "")

    def refs(self) -> list[str]:
        """All references, oldest first."""
        return list(self._tables)

    def __contains__(self, ref: object) -> bool:
        return ref in self._tables

    def __len__(self) -> int:
        return len(self._tables)
