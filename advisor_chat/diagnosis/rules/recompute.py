"""Recomputation rule: every rank runs its forward operators again inside the backward pass."""

from __future__ import annotations

import math

from advisor_chat.analyzers._common import missing_ranks
from advisor_chat.analyzers.base import Category
from advisor_chat.diagnosis.context import Context
from advisor_chat.diagnosis.decompose import recompute
from advisor_chat.diagnosis.rules.common import _severity, every_rank_loses, presence_scope
from advisor_chat.diagnosis.text import ms, pct, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Mechanism,
    Remedy,
    RootCause,
)

#: The re-run forward is a cause when its device time is at least this share of the step.
RECOMPUTE_CAUSE_SHARE = 0.1
#: Forward operators re-run per step at least this share of one forward: every layer recomputed.
FULL_SHARE = 0.9


def rule_recompute(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Recompute rule: the forward re-run (activation recomputation) costs every rank its time.

    From :func:`~advisor_chat.diagnosis.decompose.recompute` on a sample of the ranks present:
    forward operators (those with a gradient operator, e.g. FlashAttentionScore) launched more
    often than their gradients; the extra launches × the device time per forward-operator launch
    is the re-run's device time per step. A job-level cause when it is ≥ ``RECOMPUTE_CAUSE_SHARE``
    of the median step. Gain (estimate): that device time per step (selective recomputation
    keeps part of it). Source: ``kernels`` (kernel_details.csv), ``step_trace``.
    """
    per = ctx.per_rank
    if per.empty or len(per) < 2 or not math.isfinite(ctx.step_us):
        return []
    rc = recompute(ctx.profile, ctx.ranks)
    if rc is None or not math.isfinite(rc.recompute_us):
        return []
    gain = rc.recompute_us
    if gain < RECOMPUTE_CAUSE_SHARE * ctx.step_us:
        return []
    sc = presence_scope(ctx, missing_ranks(ctx.profile))
    full = rc.forward_share >= FULL_SHARE
    ratio = rc.op_per_step / rc.grad_per_step if rc.grad_per_step > 0 else math.nan
    times = f"{ratio:.1f}x" if math.isfinite(ratio) else "more often than"
    whole = (
        "the whole forward runs twice"
        if full
        else f"{pct(rc.forward_share)} of the forward runs twice"
    )
    whole_zh = "整个前向执行了两次" if full else f"{pct(rc.forward_share)} 的前向执行了两次"
    en = (
        f"Every rank spends compute time recomputing activations: on {sc.every} the forward "
        f"operators run again inside the backward pass ({rc.op} runs {rc.op_per_step:.0f} times per step against "
        f"{rc.grad_per_step:.0f} of {rc.op}Grad, {times}: {whole}), about {ms(gain)} of device "
        f"time per step ({pct(share_of(gain, ctx.step_us))} of the step) of computation spent "
        "recomputing; the same on every rank, no rank is late"
    )
    zh = (
        f"{sc.every_zh}都把计算时间花在激活重计算上：反向过程中前向算子被再次执行（每步 {rc.op} 执行 "
        f"{rc.op_per_step:.0f} 次，而 {rc.op}Grad 只有 {rc.grad_per_step:.0f} 次：{whole_zh}），"
        f"每步约 {ms(gain)} 设备时间（占步长 {pct(share_of(gain, ctx.step_us))}）花在重计算上；"
        "每张卡都一样，没有慢卡"
    )
    rem = Remedy(
        "action",
        "Recompute less where HBM allows: selective recomputation (Megatron / MindSpeed "
        "--recompute-granularity selective, or --recompute-num-layers for a few layers only), or "
        "none; keep it only for the layers that need the memory.",
        "在显存（HBM）允许的范围内减少重计算：改用选择性重计算（Megatron / MindSpeed 的 "
        "--recompute-granularity selective，或用 --recompute-num-layers 只重算部分层），或者关闭；"
        "只在显存不够的层保留。",
        gain,
        # the re-run's device time, not a bound: the step may shrink more (or less) once the
        # backward no longer waits on it and its communication overlaps differently
        BoundKind.ESTIMATE,
    )
    return [
        RootCause(
            id="cause.job_hotspot.recompute",
            mechanism=Mechanism.JOB_HOTSPOT,
            category=Category.COMPUTE,
            culprit=Culprit(
                kind="job",
                operator=rc.op,
                label="activation recomputation",
                label_zh="激活重计算",
            ),
            victims=every_rank_loses(ctx, gain),
            summary=f"{en}.",
            summary_zh=f"{zh}。",
            metrics={
                "recompute_us_per_step": gain,
                "recompute_forward_share": rc.forward_share,
                "forward_op_per_step": rc.op_per_step,
                "gradient_op_per_step": rc.grad_per_step,
                "gain_estimate_us": gain,
            },
            findings=(),
            gain_us=gain,
            bound=BoundKind.ESTIMATE,
            remedies=(rem,),
            symptom_tags=("op_hotspot", "recompute"),
            severity=_severity(gain, ctx.step_us),
        )
    ]
