"""Small helpers shared by analyzers (pure; no I/O, no rounding)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from advisor_chat.errors import ToolArgumentError
from advisor_chat.ingest.profile import Profile

#: ``kernels.accelerator_core`` values of communication (HCCL) tasks: ``HCCL`` up to 2025-01,
#: ``COMMUNICATION`` since (ascend-formats.md §1.6).
COMM_CORES: frozenset[str] = frozenset({"COMMUNICATION", "HCCL"})


def format_ranks(ranks: Iterable[int]) -> str:
    """Compact text of a rank set, e.g. ``[0, 1, 2, 5]`` -> ``'0-2, 5'``."""
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
    return ", ".join(parts)


def check_rank(profile: Profile, rank: int) -> int:
    """Return ``rank`` if the profile has it.

    Raises:
        ToolArgumentError: The rank is not in the profile; the message names the valid ranks.
    """
    ranks = profile.ranks
    if int(rank) not in ranks:
        raise ToolArgumentError(
            f"rank {rank} does not exist in this profile; ranks are {format_ranks(ranks)}"
        )
    return int(rank)


def is_comm_kernel(kernels: pd.DataFrame) -> pd.Series:
    """Boolean mask of communication (HCCL) tasks in a ``kernels`` table.

    A task is communication when ``accelerator_core`` is ``COMMUNICATION``/``HCCL`` or its name
    starts with ``hcom_`` (Level0 exports write ``N/A`` as the core).
    """
    core = kernels["accelerator_core"].astype("string").str.upper()
    name = kernels["name"].astype("string").str.lower()
    return (core.isin(COMM_CORES) | name.str.startswith("hcom_")).fillna(False).astype(bool)


def step_us_by_rank(profile: Profile) -> pd.Series:
    """Median ``step_trace.step_us`` per rank (index ``rank``, µs); empty without a step trace.

    Steps with ``step == -1`` are kept only when a rank has no numbered step.
    """
    st = profile.get("step_trace")
    if st.empty:
        return pd.Series(dtype="float64")
    st = st[["rank", "step", "step_us"]].dropna(subset=["rank", "step_us"])
    numbered = st[st["step"] != -1]
    if not numbered.empty:
        st = numbered
    return st.groupby("rank")["step_us"].median().astype("float64")


def median_step_us(profile: Profile) -> float | None:
    """Median over ranks of each rank's median step time (µs), or ``None`` without step data.

    Falls back to the median span (first task start to last task end) of a (rank, step) in
    ``kernels`` when there is no step trace.
    """
    per_rank = step_us_by_rank(profile)
    if not per_rank.empty and np.isfinite(per_rank.median()) and per_rank.median() > 0:
        return float(per_rank.median())
    k = profile.get("kernels")
    if k.empty:
        return None
    end = k["start_us"] + k["duration_us"]
    span = (
        pd.DataFrame({"rank": k["rank"], "step": k["step"], "s": k["start_us"], "e": end})
        .groupby(["rank", "step"])
        .agg(s=("s", "min"), e=("e", "max"))
    )
    val = float((span["e"] - span["s"]).median())
    return val if np.isfinite(val) and val > 0 else None
