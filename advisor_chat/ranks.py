"""Rank sets as text: one formatter for every layer (ingest messages, findings, answers)."""

from __future__ import annotations

from collections.abc import Iterable


def format_ranks(ranks: Iterable[int], sep: str = ", ") -> str:
    """Compact text of a rank set, e.g. ``[0, 1, 2, 5]`` -> ``'0-2, 5'``.

    ``sep`` joins the runs: ``"、"`` in Chinese text (``0-2、5号卡``).
    """
    vals = sorted({int(r) for r in ranks})
    if not vals:
        return "none"
    parts: list[str] = []
    start = prev = vals[0]
    for r in vals[1:]:
        if r == prev + 1:
            prev = r
            continue
        parts.append(f"{start}-{prev}" if prev > start else f"{start}")
        start = prev = r
    parts.append(f"{start}-{prev}" if prev > start else f"{start}")
    return sep.join(parts)
