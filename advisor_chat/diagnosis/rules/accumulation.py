"""Gradient accumulation rule: every weight's gradient added into its accumulator by a kernel of its own.

With several micro-batches per step, each weight-gradient MatMul's result is added into the
gradient accumulated so far (Megatron / MindSpeed: the fp32 ``main_grad``). Unfused, that is a
separate element-wise Add over the whole weight after every weight-gradient MatMul, in every
micro-batch: a memory-bound pass per weight, on every rank alike. Fused
(``--gradient-accumulation-fusion``), the MatMul accumulates into the fp32 buffer itself.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from advisor_chat.analyzers._common import missing_ranks
from advisor_chat.analyzers.base import Category
from advisor_chat.diagnosis.context import Context
from advisor_chat.diagnosis.decompose import _compute_kernels, _sample
from advisor_chat.diagnosis.rules.common import _severity, every_rank_loses, presence_scope
from advisor_chat.diagnosis.text import ms, pct, share_of
from advisor_chat.diagnosis.types import BoundKind, Culprit, Mechanism, Remedy, RootCause

#: The accumulating adds are a cause when they take this share of the step.
ACCUMULATE_MIN_SHARE = 0.05
#: ... and run at least this many times per step.
ACCUMULATE_MIN_PER_STEP = 8
_ADD = re.compile(r"^(?:Add|Adds|AddV2|Axpy|AxpyV2|InplaceAdd)$", re.I)
_MATMUL = re.compile(r"matmul|gemm", re.I)


@dataclass(frozen=True)
class Accumulation:
    """The adds of weight gradients into their accumulators, per (step, rank) (median rank).

    Attributes:
        per_step: Such adds per step.
        us: Their device time per step (µs).
        dtypes: Their input data types (most frequent, e.g. ``DT_FLOAT;DT_BF16``).
        largest: The input shape of the longest one (a weight's shape).
        largest_us: Its median duration (µs).
        weights: Distinct weight shapes they add over.
    """

    per_step: float
    us: float
    dtypes: str
    largest: str
    largest_us: float
    weights: int

    @property
    def into_fp32(self) -> bool:
        """A half-precision gradient added into an fp32 buffer (``main_grad``)."""
        d = self.dtypes.upper()
        return "FLOAT" in d.replace("FLOAT16", "") and ("BF16" in d or "FLOAT16" in d)


def accumulation(ctx: Context) -> Accumulation | None:
    """The element-wise adds over weight shapes in the backward, on a sample of the ranks.

    An add (``_ADD`` op types) counts when its first input shape is the weight input of a MatMul
    of the same rank (a 2-D input shape the MatMuls read: ``kernels`` Input Shapes) or, when the
    data types are recorded, when its inputs are an fp32 buffer and a half-precision tensor
    (Input Data Types); by shape, only after the step's first backward operator (``Grad`` in
    its type). Source: ``kernels`` (kernel_details.csv). ``None`` without any.
    """
    sample = _sample(ctx.ranks)
    k = _compute_kernels(ctx.profile, sample)
    if k.empty or not {"step", "input_shapes", "start_us", "duration_us"} <= set(k.columns):
        return None
    k = k[k["step"].notna()].sort_values(["rank", "step", "start_us"], kind="stable")
    ops = k["op_type"].astype(str)
    shapes = k["input_shapes"].astype(str)
    mm = ops.str.contains(_MATMUL)
    weights = {
        s.strip() for x in shapes[mm] for s in x.split(";")[1:2] if len(re.findall(r"\d+", s)) == 2
    }
    if not weights:
        return None
    first_in = shapes.str.split(";").str[0].str.strip()
    bwd = ops.str.contains("Grad", regex=False)
    first_bwd = k["start_us"].where(bwd).groupby([k["rank"], k["step"]]).transform("min")
    # a half-precision gradient added into an fp32 buffer (a norm's 1-D weight too), else a
    # weight's shape
    dt = k["input_dtypes"].astype(str).str.upper() if "input_dtypes" in k.columns else None
    mixed = (
        dt.str.contains(r"DT_FLOAT(?:;|$)") & dt.str.contains("BF16|FLOAT16")
        if dt is not None
        else False
    )
    # (with the data types recorded they decide: a residual add can have a weight's shape too)
    target = mixed if dt is not None else first_in.isin(weights) & (k["start_us"] > first_bwd)
    adds = ops.str.match(_ADD) & target
    if not adds.any():
        return None
    t = k[adds]
    units = k.groupby(["rank", "step"]).size().index
    n = t.groupby(["rank", "step"]).size().reindex(units, fill_value=0)
    us = t.groupby(["rank", "step"])["duration_us"].sum().reindex(units, fill_value=0.0)
    dtypes = (
        str(t["input_dtypes"].astype(str).mode().iloc[0]) if "input_dtypes" in t.columns else ""
    )
    by_shape = t.groupby(first_in[adds])["duration_us"].median()
    return Accumulation(
        per_step=float(n.groupby(level="rank").mean().median()),
        us=float(us.groupby(level="rank").mean().median()),
        dtypes=dtypes,
        largest=str(by_shape.idxmax()),
        largest_us=float(by_shape.max()),
        weights=int(first_in[adds].nunique()),
    )


def rule_unfused_accumulation(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Unfused gradient accumulation: an add over each weight after its gradient, every micro-batch.

    From :func:`accumulation`: at least ``ACCUMULATE_MIN_PER_STEP`` adds per step over weight
    shapes in the backward taking at least ``ACCUMULATE_MIN_SHARE`` of the median step. A job-level
    cause (mechanism ``job_hotspot``, compute). ``distributed_args`` with
    ``gradient_accumulation_fusion`` false is stated. Gain (estimate): the adds' time (the fused
    MatMul writes into the accumulator in the same pass). Source: ``kernels``, ``step_trace``.
    """
    if ctx.per_rank.empty or len(ctx.per_rank) < 2 or not math.isfinite(ctx.step_us):
        return []
    acc = accumulation(ctx)
    if acc is None or acc.per_step < ACCUMULATE_MIN_PER_STEP:
        return []
    if acc.us < ACCUMULATE_MIN_SHARE * ctx.step_us:
        return []
    sc = presence_scope(ctx, missing_ranks(ctx.profile))
    args = ctx.distributed_args
    off = "gradient_accumulation_fusion" in args and not args["gradient_accumulation_fusion"]
    gain = acc.us
    into, into_zh = (
        ("the fp32 main_grad", "fp32 的 main_grad") if acc.into_fp32 else ("the gradient", "梯度")
    )
    setting = " (distributed_args: gradient_accumulation_fusion false)" if off else ""
    setting_zh = "（distributed_args：gradient_accumulation_fusion 为 false）" if off else ""
    share = share_of(acc.us, ctx.step_us)
    en = (
        f"Gradient accumulation is not fused: on {sc.every} {acc.per_step:.0f} Add kernels per step "
        f"add each weight's gradient into {into} after its weight-gradient MatMul ({acc.weights} "
        f"weight shapes, inputs {acc.dtypes}; the largest [{acc.largest}] {ms(acc.largest_us)} "
        f"each), {ms(acc.us)} per step, {pct(share)} of the step (kernel_details.csv){setting}; "
        "each is a memory-bound pass over a whole weight, in every micro-batch; the same on every "
        "rank, no rank is late"
    )
    zh = (
        f"梯度累加没有融合：{sc.every_zh}每步有 {acc.per_step:.0f} 个 Add 算子在每个权重梯度的 MatMul 之后"
        f"把梯度加到{into_zh}上（{acc.weights} 种权重形状，输入 {acc.dtypes}；最大的 [{acc.largest}] "
        f"每次 {ms(acc.largest_us)}），每步共 {ms(acc.us)}，占步长 {pct(share)}（kernel_details.csv）"
        f"{setting_zh}；每个都是对整个权重的一次访存密集型遍历，每个微批次都做一遍；每张卡都一样，"
        "没有慢卡"
    )
    rem = Remedy(
        "action",
        "Turn on --gradient-accumulation-fusion (Megatron / MindSpeed: the weight-gradient MatMul "
        "accumulates straight into the fp32 main_grad, npu_matmul_add_fp32), so these separate "
        "adds disappear; fewer, larger micro-batches also cut their number.",
        "打开 --gradient-accumulation-fusion（Megatron / MindSpeed：权重梯度 MatMul 直接累加到 fp32 的 "
        "main_grad，npu_matmul_add_fp32），这些单独的 Add 就不再需要；减少微批次数、增大微批次也能减少它们。",
        gain,
        BoundKind.ESTIMATE,
    )
    return [
        RootCause(
            id="cause.job_hotspot.grad_accumulation",
            mechanism=Mechanism.JOB_HOTSPOT,
            category=Category.COMPUTE,
            culprit=Culprit(
                kind="job",
                operator="Add",
                shape=acc.largest,
                label="unfused gradient accumulation",
                label_zh="未融合的梯度累加",
            ),
            victims=every_rank_loses(ctx, gain),
            summary=f"{en}.",
            summary_zh=f"{zh}。",
            metrics={
                "operator_launches_per_step": acc.per_step,
                "operator_us_per_step": acc.us,
                "accumulate_share_of_step": share,
                "largest_add_us": acc.largest_us,
                "gain_estimate_us": gain,
            },
            findings=(),
            gain_us=gain,
            bound=BoundKind.ESTIMATE,
            remedies=(rem,),
            symptom_tags=("op_hotspot", "unfused_ops"),
            severity=_severity(gain, ctx.step_us),
        )
    ]
