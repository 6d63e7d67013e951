"""Number formatting for diagnosis sentences (ms in prose, percentages with one decimal)."""

from __future__ import annotations

import math
from typing import Any


def ms(us: float) -> str:
    """µs → ``'12.3 ms'``; ``'n/a'`` for NaN.

    Under 1 ms with two decimals (``'0.12 ms'``: one decimal would round 120 µs by 17%); under
    0.1 ms in µs (``'32 µs'``, never ``'0.0 ms'`` for a measured time).
    """
    if us is None or not math.isfinite(us):
        return "n/a"
    if 0 < abs(us) < 100:
        return f"{us:.0f} µs" if abs(us) >= 1 else f"{us:.2f} µs"
    v = us / 1000.0
    if abs(v) >= 100:
        return f"{v:.0f} ms"
    if 0 < abs(v) < 1:
        return f"{v:.2f} ms"
    return f"{v:.1f} ms"


def pct(share: float) -> str:
    """0..1 → ``'12.3%'``."""
    if share is None or not math.isfinite(share):
        return "n/a"
    return f"{share * 100:.1f}%"


def share_of(part: float, whole: float) -> float:
    """``part / whole`` or 0.0 when ``whole`` is not positive."""
    return part / whole if whole and whole > 0 and math.isfinite(whole) else 0.0


def num(x: Any) -> float:
    """``float(x)`` for pandas/numpy scalars (typed as Any for mypy); NaN when not numeric."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def integer(x: Any) -> int:
    """``int(x)`` for pandas/numpy scalars (typed as Any for mypy)."""
    return int(x)


def upper_first(text: str) -> str:
    """``text`` with its first letter in upper case (a sentence's start)."""
    return text[:1].upper() + text[1:]


def lower_first(text: str) -> str:
    """``'Rank 3 waits'`` -> ``'rank 3 waits'``, for a clause that continues a sentence.

    Identifiers are kept as written: an all-capitals start (``'RDMA …'``), a first word with a
    capital or a digit after its first letter (``'MatMul …'``, ``'GroupedMatmul …'``,
    ``'StatelessRandomUniformV2 …'``).
    """
    if len(text) < 2 or not text[0].isupper():
        return text
    word = text.split(" ", 1)[0]
    if any(ch.isupper() or ch.isdigit() for ch in word[1:]) or not (
        text[1].islower() or text[:2] == "A "
    ):
        return text
    return text[0].lower() + text[1:]


#: Display names of the collective types (``comm_ops`` ``op_type``, lower case).
COLLECTIVE_NAMES = {"allgather": "AllGather", "reducescatter": "ReduceScatter",
                    "allreduce": "AllReduce", "alltoall": "AlltoAll", "alltoallv": "AlltoAllV",
                    "broadcast": "Broadcast", "reduce": "Reduce", "send": "Send",
                    "receive": "Receive", "batchsendrecv": "BatchSendRecv"}  # fmt: skip


def network_part(transport: str) -> str:
    """``network`` for links between nodes (RDMA), ``board`` for links inside one server."""
    return "network" if transport.upper() in ("RDMA", "ROCE", "") else "board"
