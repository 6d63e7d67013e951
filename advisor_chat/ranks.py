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


def parse_ranks(text: str) -> list[int]:
    """The ranks of a :func:`format_ranks` text (``'0-2, 5'`` -> ``[0, 1, 2, 5]``; ``'none'`` -> ``[]``)."""
    out: list[int] = []
    for part in text.replace("、", ",").split(","):
        a, sep, b = part.strip().partition("-")
        if not a.strip().isdigit() or (sep and not b.strip().isdigit()):
            continue
        out += list(range(int(a), int(b) + 1)) if sep else [int(a)]
    return out


def spread_sample(ranks: Iterable[int], n: int) -> list[int]:
    """``n`` ranks spread evenly over the span of ``ranks`` (all of them when there are ≤ ``n``).

    For each of ``n`` evenly spaced values between the smallest and the largest rank, the rank
    nearest to it (the lower one on a tie), so the choice depends on the ranks' values, not their
    positions in the list: the peers of rank 12 and the peers of rank 13 among 1024 ranks are
    the same sample, and every analysis that samples the same pool reads the same ranks' files.
    Deterministic; sorted; duplicates dropped (so a list with gaps may give fewer than ``n``).
    """
    rs = sorted({int(r) for r in ranks})
    if len(rs) <= n:
        return rs
    lo, hi = rs[0], rs[-1]
    out: set[int] = set()
    j = 0
    for i in range(n):
        target = lo + (hi - lo) * i / (n - 1)
        while j + 1 < len(rs) and rs[j + 1] <= target:
            j += 1
        below = rs[j]
        above = rs[j + 1] if j + 1 < len(rs) else below
        out.add(below if target - below <= above - target else above)
    return sorted(out)
