"""Device memory per step: what the allocator holds at each step's end and how it grows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field

from advisor_chat.analyzers._common import check_rank
from advisor_chat.analyzers.base import (
    AnalyzerResult,
    Evidence,
    Finding,
    FindingKind,
    Params,
    Severity,
    register,
)
from advisor_chat.errors import NotAnswerableError
from advisor_chat.ingest.profile import Profile
from advisor_chat.ranks import format_ranks, spread_sample

#: Ranks whose memory and kernels are read (spread over the job).
MEMORY_SAMPLE = 8
#: Allocated memory at the step's end growing at least this much per step (MB, median over the
#: ranks read) ...
GROWTH_MIN_MB = 100.0
#: ... in at least this share of the step-to-step transitions, on at least half of the ranks read,
#: is memory that grows every step.
GROWTH_RISES = 0.75
#: The allocator the table follows: the PyTorch caching allocator when recorded.
PREFERRED_COMPONENT = "PTA"


class MemoryParams(Params):
    """Parameters of :func:`memory`."""

    rank: int | None = Field(default=None, description="Global rank to read (default: a sample).")


def _component(m: pd.DataFrame) -> pd.DataFrame:
    """The rows of one allocator: ``PTA`` when recorded, else the component with most rows."""
    if "component" not in m.columns or m["component"].isna().all():
        return m
    comp = m["component"].astype(str).str.strip()
    pick = PREFERRED_COMPONENT if (comp == PREFERRED_COMPONENT).any() else comp.mode().iloc[0]
    return m[comp == pick]


def _peak(v: np.ndarray) -> float:
    """Largest sample, NaN when none was recorded (a column the component leaves empty)."""
    v = v[~np.isnan(v)]
    return float(v.max()) if len(v) else float("nan")


def _last(v: np.ndarray) -> float:
    """Last recorded sample, NaN when none was."""
    v = v[~np.isnan(v)]
    return float(v[-1]) if len(v) else float("nan")


def _per_step(m: pd.DataFrame, k: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, step): the samples from the step's first kernel to the next step's first."""
    rows: list[dict[str, Any]] = []
    for rank in sorted({int(r) for r in m["rank"].dropna()}):
        mr = m[m["rank"] == rank]
        kr = k[k["rank"] == rank] if not k.empty else k
        ts = mr["timestamp_us"].to_numpy("float64")
        order = np.argsort(ts, kind="stable")
        ts = ts[order]
        alloc = mr["allocated_mb"].to_numpy("float64")[order]
        resv = mr["reserved_mb"].to_numpy("float64")[order]
        if kr.empty:
            steps, starts = np.array([-1]), np.array([-np.inf])
        else:
            w = kr[kr["step"] >= 0].groupby("step")["start_us"].min().sort_index()
            if w.empty:
                steps, starts = np.array([-1]), np.array([-np.inf])
            else:
                steps = w.index.to_numpy()
                starts = w.to_numpy("float64").copy()
                starts[0] = -np.inf  # samples before the first step's kernels belong to it
        idx = np.searchsorted(starts, ts, side="right") - 1
        for i, step in enumerate(steps):
            sel = idx == i
            if not sel.any():
                continue
            rows.append(
                {
                    "rank": int(rank),
                    "step": int(step),
                    "samples": int(sel.sum()),
                    "allocated_mb_peak": _peak(alloc[sel]),
                    "allocated_mb_end": _last(alloc[sel]),
                    "reserved_mb_peak": _peak(resv[sel]),
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "rank", "step", "samples", "allocated_mb_peak", "allocated_mb_end", "reserved_mb_peak",
        ],
    )  # fmt: skip


def _growth(t: pd.DataFrame) -> pd.DataFrame:
    """Per rank: slope of the step-end allocation (MB per step) and the share of steps it rises."""
    out = []
    t = t[t["step"] >= 0]
    for rank in sorted({int(r) for r in t["rank"]}):
        g = t[t["rank"] == rank].dropna(subset=["allocated_mb_end"]).sort_values("step")
        if len(g) < 3:
            continue
        x = g["step"].to_numpy("float64")
        y = g["allocated_mb_end"].to_numpy("float64")
        slope = float(np.polyfit(x, y, 1)[0])
        d = np.diff(y)
        out.append(
            {
                "rank": int(rank),
                "growth_mb_per_step": slope,
                "rises_share": float((d > 0).mean()),
                "first_step": int(x[0]),
                "last_step": int(x[-1]),
                "first_mb": float(y[0]),
                "last_mb": float(y[-1]),
            }
        )
    return pd.DataFrame(
        out,
        columns=[
            "rank", "growth_mb_per_step", "rises_share", "first_step", "last_step", "first_mb",
            "last_mb",
        ],
    )  # fmt: skip


@register("memory", MemoryParams, order=70)
def memory(profile: Profile, params: MemoryParams, **_: Any) -> AnalyzerResult:
    """Device memory per step (allocated and reserved peaks, step-end allocation) and whether it grows every step.

    From the memory samples (memory_record.csv / the DB's MEMORY_RECORD) of the PyTorch caching
    allocator (component ``PTA``; else the most sampled component) of up to 8 ranks spread over
    the job (or ``rank``), cut into steps at each step's first kernel (kernel_details.csv Step Id
    and Start Time, of the first rank read: the ranks run their steps together). Growth: the least-squares slope of the step-end allocation over the step ids
    (MB per step); a ``memory.growth`` finding when its median over the ranks read is at least
    100 MB per step and it rises in at least 75% of the step transitions on at least half of them
    (memory that something keeps across steps: the run moves toward the device's capacity).

    Args:
        profile: Canonical profile; uses ``memory`` (MB), ``kernels`` (µs).
        params: ``rank`` restricts the read to one rank.

    Returns:
        AnalyzerResult whose ``table`` has one row per (rank, step): ``rank``, ``step``,
        ``samples`` (count), ``allocated_mb_peak``, ``allocated_mb_end`` (the last sample of the
        step), ``reserved_mb_peak`` (MB; NaN where the component leaves the column empty: the
        ``APP`` component records reserved memory only, with a note). ``tables['growth']``: per rank ``growth_mb_per_step``
        (MB per step), ``rises_share``, ``first_step`` / ``last_step`` and their step-end
        ``first_mb`` / ``last_mb``. Metrics: ``growth_mb_per_step`` (median over ranks),
        ``allocated_mb_peak`` and ``reserved_mb_peak`` (largest over ranks and steps; each only when
        recorded).

    Raises:
        ToolArgumentError: ``rank`` is not in the profile.
        NotAnswerableError: No memory samples (the profiler ran without profile_memory=True).
    """
    if params.rank is not None:
        check_rank(profile, params.rank)
    m = profile.get("memory") if profile.has("memory") else pd.DataFrame()
    if m.empty or not {"rank", "timestamp_us", "allocated_mb", "reserved_mb"} <= set(m.columns):
        raise NotAnswerableError(
            "no memory samples (memory_record.csv, or MEMORY_RECORD in the DB export): profile "
            "with profile_memory=True to read device memory per step",
            zh="没有内存采样（memory_record.csv，或 DB 导出中的 MEMORY_RECORD）：用 "
            "profile_memory=True 采集才能按步读取设备内存",
        )
    have = sorted({int(r) for r in m["rank"].dropna()})
    ranks = [params.rank] if params.rank is not None else spread_sample(have, MEMORY_SAMPLE)
    m = m[m["rank"].isin(ranks)].dropna(subset=["timestamp_us"])
    m = _component(m[m["allocated_mb"].notna() | m["reserved_mb"].notna()])
    if m.empty:
        which = f" (rank {params.rank})" if params.rank is not None else ""
        raise NotAnswerableError(
            f"no memory samples of the ranks read{which} (memory_record.csv Total Allocated and "
            "Total Reserved are empty): profile with profile_memory=True",
            zh=f"所读各卡{which}没有内存采样（memory_record.csv 的 Total Allocated 与 Total Reserved "
            "均为空）：请用 profile_memory=True 采集",
        )
    # the steps' windows of one rank (the first read) for every rank: the ranks run their steps
    # together, and one rank's kernels are read instead of eight
    k = profile.kernels_for(ranks[:1]) if profile.has("kernels") else pd.DataFrame()
    if not k.empty:
        k = pd.concat([k.assign(rank=r) for r in ranks], ignore_index=True)
    table = _per_step(m, k)
    growth = _growth(table)
    metrics: dict[str, float] = {"ranks_read": float(table["rank"].nunique())}
    for col in ("allocated_mb_peak", "reserved_mb_peak"):
        if table[col].notna().any():  # an allocator that records only reserved memory (APP)
            metrics[col] = float(table[col].max())
    findings: list[Finding] = []
    notes: list[str] = []
    notes_zh: list[str] = []
    if k.empty:
        notes.append("no kernels: memory is summarized over the whole capture, not per step")
        notes_zh.append("没有算子数据：内存按整个采集统计，而不是按步")
    if "allocated_mb_peak" not in metrics:
        comp = str(m["component"].iloc[0]) if "component" in m.columns else "?"
        notes.append(
            f"the samples (component {comp}) record reserved memory only: no allocated memory, "
            "no growth per step"
        )
        notes_zh.append(f"采样（组件 {comp}）只记录保留内存：没有已分配内存，也就算不出每步增长")
    if not growth.empty:
        med = float(growth["growth_mb_per_step"].median())
        metrics["growth_mb_per_step"] = med
        rising = growth[
            (growth["growth_mb_per_step"] >= GROWTH_MIN_MB)
            & (growth["rises_share"] >= GROWTH_RISES)
        ]
        if med >= GROWTH_MIN_MB and 2 * len(rising) >= len(growth):
            first, last = int(growth["first_step"].min()), int(growth["last_step"].max())
            lo, hi = float(growth["first_mb"].median()), float(growth["last_mb"].median())
            rl = format_ranks(sorted(int(r) for r in rising["rank"]))
            metrics |= {
                "growth_first_mb": lo,
                "growth_last_mb": hi,
                "growth_first_step": float(first),
                "growth_last_step": float(last),
            }
            findings.append(
                Finding(
                    id="memory.growth.job",
                    kind=FindingKind.DEGRADATION,
                    severity=Severity.MEDIUM,
                    summary=(
                        f"Allocated device memory grows {med:.0f} MB per step (median slope over "
                        f"the ranks read; ranks {rl}): from {lo:.0f} MB at the end of step "
                        f"{first} to {hi:.0f} MB at the end of step {last}: something keeps "
                        "tensors across steps"
                    ),
                    summary_zh=(
                        f"已分配的设备内存每步增长 {med:.0f} MB（所读各卡的斜率中位数；{rl}号卡）："
                        f"从第 {first} 步结束时的 {lo:.0f} MB 增长到第 {last} 步结束时的 {hi:.0f} MB："
                        "有东西把张量跨步保留了下来"
                    ),
                    ranks=tuple(sorted(int(r) for r in rising["rank"])),
                    metrics={
                        "growth_mb_per_step": med,
                        "growth_first_mb": lo,
                        "growth_last_mb": hi,
                    },
                    evidence=(
                        Evidence(
                            "memory",
                            profile.cite("memory"),
                            {"ranks": [int(r) for r in rising["rank"]]},
                            "least-squares slope of the step-end allocated MB over the step ids",
                        ),
                    ),
                    symptom_tags=("memory_growth", "step_degradation"),
                )
            )
    if params.rank is not None:
        growth = growth[growth["rank"] == params.rank]
    return AnalyzerResult(
        "memory",
        table,
        metrics=metrics,
        findings=tuple(findings),
        notes=tuple(notes),
        tables={"growth": growth},
        notes_zh=tuple(notes_zh),
    )
