"""Clock rule: every rank's AI Core runs below its rated clock (power cap or thermal throttling).

A device slower than its peers is found by the peer comparison (``stragglers``, with the clock as
its evidence, :mod:`advisor_chat.diagnosis.evidence`). When every device is down-clocked alike no
peer is faster, so the comparison is against the chip's rated clock instead: msprof-analyze's
cluster ``freq_analysis`` treats 1800 MHz (Ascend 910B) as normal and 800 MHz as the idle state,
and its advisor flags a mean frequency 5% below the maximum.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from advisor_chat.analyzers._common import missing_ranks
from advisor_chat.analyzers.base import Category
from advisor_chat.diagnosis.context import Context
from advisor_chat.diagnosis.evidence import CLOCK_DROP
from advisor_chat.diagnosis.rules.common import _severity, presence_scope
from advisor_chat.diagnosis.text import integer, ms, num, pct, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Impact,
    Mechanism,
    Remedy,
    RootCause,
)

#: Rated AI Core clock of Ascend 910B, MHz (msprof-analyze ``freq_analysis``: normal).
RATED_AICORE_MHZ = 1800.0
#: The AI Core's idle clock, MHz (``freq_analysis``: a device idling down-clocks to it; normal).
IDLE_AICORE_MHZ = 800.0
#: Share of the ranks with the counter track that must run below the rated clock: the whole job.
JOB_SHARE = 0.8
#: The clock's cost is a cause when it is at least this share of the median step.
MIN_COST_SHARE = 0.03


def busy_clock_mhz(freq: pd.DataFrame) -> dict[int, float]:
    """Per rank, the mean AI Core clock while not idle (MHz).

    Args:
        freq: ``aicore_freq`` rows (``rank``, ``start_us``, ``freq_mhz``): each sample holds until
            the next one (the last sample holds for no time unless it is the only one).

    Returns:
        ``{rank: MHz}``: ∫ f dt / ∫ dt over the intervals whose clock is not the idle
        ``IDLE_AICORE_MHZ``; a rank with a single sample gets that sample; a rank idle throughout
        is left out.
    """
    out: dict[int, float] = {}
    for r, g in freq.sort_values(["rank", "start_us"], kind="stable").groupby("rank"):
        t = g["start_us"].to_numpy(dtype="float64")
        v = g["freq_mhz"].to_numpy(dtype="float64")
        ok = np.isfinite(t) & np.isfinite(v)
        t, v = t[ok], v[ok]
        if len(v) == 1 and v[0] != IDLE_AICORE_MHZ:
            out[integer(r)] = float(v[0])
            continue
        dt, held = np.diff(t), v[:-1]
        busy = (held != IDLE_AICORE_MHZ) & (dt > 0)
        if busy.any():
            out[integer(r)] = float(np.sum(held[busy] * dt[busy]) / np.sum(dt[busy]))
    return out


def _rated_mhz(ctx: Context) -> float:
    """The rated clock of the job's chip (MHz), NaN for a chip whose rated clock is not known."""
    meta = ctx.profile.get("meta")
    types: set[str] = set()
    if meta is not None and "device_type" in meta.columns:
        types = {str(t) for t in meta["device_type"].dropna().unique() if str(t).strip()}
    if not types or all("910B" in t.upper() for t in types):
        return RATED_AICORE_MHZ
    return float("nan")


def rule_job_clock(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Job clock rule: the AI Core of (almost) every rank runs below the chip's rated clock.

    From the ``aicore_freq`` table (the AI Core Freq counter track of trace_view.json or the DB's
    AICORE_FREQ) of a sample of the ranks present: each rank's mean clock while not idle
    (:func:`busy_clock_mhz`). When ≥ ``JOB_SHARE`` of the ranks with the track (at least two) run
    ≥ ``CLOCK_DROP`` below ``RATED_AICORE_MHZ`` (Ascend 910B, or a chip type the metadata does not
    give), a job-level compute cause. Cost (upper bound, the figure the gain states): Computing ×
    (1 − f / rated) per rank, the time the compute would lose at the rated clock if it scaled with
    the clock (memory-bound operators scale less). Source: ``aicore_freq``, ``step_trace``.
    """
    per = ctx.per_rank
    if per.empty or len(per) < 2 or not math.isfinite(ctx.step_us):
        return []
    if any("aicore_clock_mhz" in c.metrics for c in causes):
        return []  # a peer comparison already measured the clock of its culprit
    rated = _rated_mhz(ctx)
    if not math.isfinite(rated):
        return []
    clocks = ctx.clocks
    if len(clocks) < 2:
        return []
    low = {r: f for r, f in clocks.items() if f < (1.0 - CLOCK_DROP) * rated}
    if len(low) < JOB_SHARE * len(clocks):
        return []
    mhz = float(np.median(list(clocks.values())))
    lost = {
        int(r): num(per.at[r, "computing_us"]) * (1.0 - clocks[r] / rated)
        for r in per.index
        if int(r) in clocks
    }
    gain = float(np.median(list(lost.values())))
    if not gain >= MIN_COST_SHARE * ctx.step_us:
        return []
    sc = presence_scope(ctx, missing_ranks(ctx.profile))
    lo, hi = min(clocks.values()), max(clocks.values())
    spread = f" ({lo:.0f}-{hi:.0f} MHz across ranks)" if hi - lo >= 1 else ""
    spread_zh = f"（各卡 {lo:.0f}-{hi:.0f} MHz）" if hi - lo >= 1 else ""
    sample = f" (a sample of {len(clocks)} ranks)" if len(clocks) < len(per) else ""
    comp = float(per["computing_us"].median())
    en = (
        f"The AI Core of {sc.every} runs at {mhz:.0f} MHz{spread}{sample}, "
        f"{pct(1.0 - mhz / rated)} below the rated {rated:.0f} MHz (AI Core Freq counter, idle "
        f"{IDLE_AICORE_MHZ:.0f} MHz excluded): the whole job is down-clocked (power cap or "
        f"thermal throttling), so its {ms(comp)} of Computing per step would take up to "
        f"{ms(gain)} less at the rated clock; no rank is late because every rank is slowed alike."
    )
    zh = (
        f"{sc.every_zh}的 AI Core 频率为 {mhz:.0f} MHz{spread_zh}，比额定的 {rated:.0f} MHz 低 "
        f"{pct(1.0 - mhz / rated)}（AI Core 频率计数器，不含 {IDLE_AICORE_MHZ:.0f} MHz 空闲降频）："
        f"整个作业被降频（功耗上限或过热），每步 {ms(comp)} 的计算在额定频率下最多可少用 {ms(gain)}；"
        "所有卡同样变慢，所以没有哪张卡晚到。"
    )
    rem = Remedy(
        kind="action",
        text=(
            f"Find why every NPU runs at {mhz:.0f} MHz instead of {rated:.0f} MHz (AI Core Freq "
            f"counter: {len(low)} of {len(clocks)} ranks below the rated clock while busy): "
            "`npu-smi info` on each node (power draw and its cap, temperature, AI Core "
            "frequency), the nodes' power mode and cooling (BIOS/BMC power-capping policy, fan "
            "speed, inlet temperature); lift the cap or fix the cooling, then re-capture to "
            "confirm the clock is back."
        ),
        text_zh=(
            f"查明为何所有 NPU 都运行在 {mhz:.0f} MHz 而不是 {rated:.0f} MHz（AI Core 频率计数器："
            f"{len(clocks)} 张卡中有 {len(low)} 张忙时低于额定频率）：在各节点执行 `npu-smi info`"
            "（功耗及其上限、温度、AI Core 频率），检查节点的功耗模式与散热（BIOS/BMC 功耗封顶策略、"
            "风扇转速、进风温度）；解除功耗上限或修复散热后重新采集，确认频率恢复。"
        ),
        gain_us=gain,
        bound=BoundKind.UPPER_BOUND,
    )
    return [
        RootCause(
            id="cause.job_hotspot.clock",
            mechanism=Mechanism.JOB_HOTSPOT,
            category=Category.COMPUTE,
            culprit=Culprit(
                kind="job", label="every rank's AI Core clock", label_zh="所有卡的 AI Core 频率"
            ),
            victims=tuple(
                Impact(integer(r), v, share_of(v, num(per.at[r, "step_us"])), "own_time")
                for r, v in lost.items()
            ),
            summary=en,
            summary_zh=zh,
            metrics={
                "aicore_clock_mhz_median": mhz,
                "rated_aicore_clock_mhz": rated,
                "aicore_clock_ratio": mhz / rated,
                "clock_low_ranks": float(len(low)),
                "clock_ranks_measured": float(len(clocks)),
                "computing_us_median": comp,
                "gain_upper_bound_us": gain,
            },
            findings=(),
            gain_us=gain,
            bound=BoundKind.UPPER_BOUND,
            remedies=(rem,),
            symptom_tags=("aicore_clock_low",),
            severity=_severity(gain, ctx.step_us),
        )
    ]
