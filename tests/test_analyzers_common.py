"""Helpers shared by the analyzers (``analyzers._common``)."""

from __future__ import annotations

import pandas as pd

from advisor_chat.analyzers._common import str_map


def test_str_map_transforms_each_distinct_value_once() -> None:
    s = pd.Series(["AllReduce", None, "allgather-total", "AllReduce"], dtype="string", name="op")
    seen: list[int] = []

    def lower(u: pd.Series) -> pd.Series:
        seen.append(len(u))
        return u.astype(str).str.lower()

    out = str_map(s, lower)
    assert seen == [2]  # two distinct values; the missing one is not transformed
    expected = s.astype(str).str.lower()  # what the per-row transform gives
    assert out.name == "op" and out.index.equals(s.index) and out.dtype == expected.dtype
    assert out.isna().tolist() == [False, True, False, False]
    assert out.dropna().tolist() == expected.dropna().tolist()
