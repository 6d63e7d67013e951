"""Precision rule: every rank computes part of a bf16 / fp16 model in fp32 (a job-level cost).

Mixed-precision training runs the matrix and attention work in bf16 or fp16; an operator whose
inputs are all fp32 (``DT_FLOAT``) in such a model moves twice the bytes of the same operator in
bf16, and the Casts to and from fp32 around it are extra work. The optimizer (fp32 master weights)
is fp32 by design and left out. The input shape ties the Casts to the fp32 operators they feed:
a loss computed over an fp32 copy of the logits shows as LogSoftmax / NLLLoss with fp32 inputs
of the vocabulary-sized shape, and Casts of that shape.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from advisor_chat.analyzers._common import missing_ranks
from advisor_chat.analyzers.base import Category
from advisor_chat.diagnosis.context import Context
from advisor_chat.diagnosis.decompose import _compute_kernels, _sample
from advisor_chat.diagnosis.rules.common import _severity, every_rank_loses, presence_scope
from advisor_chat.diagnosis.text import ms, pct, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Mechanism,
    Remedy,
    RootCause,
)

#: The fp32 path is a cause when it takes at least this share of the median step.
FP32_CAUSE_SHARE = 0.05
#: The model's main work: its dtype says the model is trained in mixed precision.
_MAIN = re.compile(r"matmul|flashattention|conv|gemm", re.I)
#: Operators that run in fp32 by design in mixed precision (the optimizer on master weights).
_OPTIMIZER = re.compile(r"foreach|adam|lamb|sgd|apply|lerp|optimizer|amp_update|unscale", re.I)
_FP32 = re.compile(r"^(?:DT_)?FLOAT(?:32)?$", re.I)
_HALF = re.compile(r"^(?:DT_)?(?:BF16|FLOAT16|HALF)$", re.I)
#: Loss operators: an fp32 path of these is a loss computed over an fp32 copy of its input.
_LOSS = re.compile(r"softmax|nll|crossentropy|cross_entropy|loss", re.I)


@dataclass(frozen=True)
class Fp32Path:
    """Operators computing in fp32 in a half-precision model, per (step, rank).

    Attributes:
        ops: The fp32 operator types, most time first.
        casts_us: Casts of the same input shapes (to and from fp32), µs per step (median rank).
        fp32_us: The fp32 operators' time, µs per step (median rank).
        shape: The largest input shape among them (``4096,152064``).
        half: The main work's dtype (``DT_BF16``).
        ranks: Ranks read (a sample).
    """

    ops: tuple[str, ...]
    casts_us: float
    fp32_us: float
    shape: str
    half: str
    ranks: tuple[int, ...]

    @property
    def us(self) -> float:
        """The whole fp32 path per step (µs): the fp32 operators and their Casts."""
        return self.fp32_us + self.casts_us

    @property
    def saving_us(self) -> float:
        """Estimate of what the half-precision path saves per step (µs).

        The Casts go away and the operators read and write half the bytes (memory-bound
        element-wise and reduction work: about half the time).
        """
        return self.casts_us + 0.5 * self.fp32_us


def _all(dtypes: str, pat: re.Pattern[str]) -> bool:
    parts = [p.strip() for p in str(dtypes).split(";") if p.strip()]
    return bool(parts) and all(pat.match(p) for p in parts)


def _elements(shapes: str) -> int:
    """Largest element count among ``shapes`` (``'4096,152064;4096'`` → 622854144)."""
    best = 0
    for s in str(shapes).split(";"):
        dims = [int(x) for x in re.findall(r"\d+", s)]
        if dims:
            best = max(best, math.prod(dims))
    return best


def fp32_path(ctx: Context) -> Fp32Path | None:
    """The fp32 operators of a bf16 / fp16 model on a sample of the ranks, or ``None``.

    The main work (MatMul / FlashAttention / Conv) must run in half precision on most of its time;
    fp32 operators (every input ``DT_FLOAT``) other than the optimizer's, and the Casts with the
    same input shapes, are summed per (step, rank). Source: ``kernels`` (kernel_details.csv
    ``Input Data Types``, ``Input Shapes``).
    """
    sample = _sample(ctx.ranks)
    k = _compute_kernels(ctx.profile, sample)
    if k.empty or "input_dtypes" not in k or "step" not in k:
        return None
    k = k[k["step"].notna()]
    dt = k["input_dtypes"].astype(str)
    main = k[k["op_type"].str.contains(_MAIN)]
    if main.empty:
        return None
    half = main[main["input_dtypes"].astype(str).map(lambda d: _all(d, _HALF))]
    if half["duration_us"].sum() < 0.5 * main["duration_us"].sum():
        return None  # not a half-precision model
    is_cast = k["op_type"].str.fullmatch(r"Cast", case=False)
    fp32 = k[
        dt.map(lambda d: _all(d, _FP32))
        & ~is_cast
        & ~k["op_type"].str.contains(_OPTIMIZER)
        & ~k["op_type"].str.contains(_MAIN)
    ]
    if fp32.empty:
        return None
    shapes = set(fp32["input_shapes"].astype(str).str.split(";").str[0])
    casts = k[is_cast & k["input_shapes"].astype(str).isin(shapes)]
    units = k.groupby(["rank", "step"]).size().index

    def per_step(df: pd.DataFrame) -> float:
        s = df.groupby(["rank", "step"])["duration_us"].sum().reindex(units, fill_value=0.0)
        return float(s.groupby(level="rank").mean().median())

    by_op = fp32.groupby("op_type")["duration_us"].sum().sort_values(ascending=False)
    top_shape = max(fp32["input_shapes"].astype(str), key=_elements)
    return Fp32Path(
        ops=tuple(str(o) for o in by_op.index),
        casts_us=per_step(casts),
        fp32_us=per_step(fp32),
        shape=top_shape.split(";")[0],
        half=str(half["input_dtypes"].astype(str).str.split(";").str[0].mode().iloc[0]),
        ranks=tuple(int(r) for r in sample),
    )


def rule_fp32_compute(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Precision rule: fp32 operators in a half-precision model cost every rank a share of its step.

    From :func:`fp32_path` on a sample of the ranks: when the fp32 operators and their Casts take
    at least ``FP32_CAUSE_SHARE`` (5%) of the median step, a job-level cause. Gain (estimate):
    :attr:`Fp32Path.saving_us` (the Casts, and half of the fp32 operators' time). Source:
    ``kernels``, ``step_trace``.
    """
    per = ctx.per_rank
    if per.empty or len(per) < 2 or not math.isfinite(ctx.step_us):
        return []
    fp = fp32_path(ctx)
    if fp is None or fp.us < FP32_CAUSE_SHARE * ctx.step_us:
        return []
    # operators a job hotspot already accounts for (an unfused RMSNorm computing in fp32): one
    # cost, one cause
    taken = {
        o.strip()
        for c in causes
        if c.mechanism is Mechanism.JOB_HOTSPOT
        for o in c.culprit.operator.split(",")
    }
    if taken & set(fp.ops[:3]):
        return []
    sc = presence_scope(ctx, missing_ranks(ctx.profile))
    ops = ", ".join(fp.ops[:5])
    ops_zh = "、".join(fp.ops[:5])
    half = fp.half.removeprefix("DT_").lower().replace("float16", "fp16")
    loss = all(_LOSS.search(o) for o in fp.ops[:3])
    what = (
        f"the loss is computed over an fp32 copy of its input (last dimension {fp.shape.split(',')[-1]}: "
        "the vocabulary when it is the logits)"
        if loss
        else "these operators compute in fp32"
    )
    what_zh = (
        f"损失函数是在输入的 fp32 副本上计算的（最后一维 {fp.shape.split(',')[-1]}：若是 logits 即词表大小）"
        if loss
        else "这些算子以 fp32 计算"
    )
    gain = fp.saving_us
    en = (
        f"Every rank computes part of a {half} model in fp32: on {sc.every} {ops} run with fp32 "
        f"inputs (DT_FLOAT, shape [{fp.shape}]) and Casts convert that tensor to and from fp32, "
        f"{ms(fp.us)} per step ({pct(share_of(fp.us, ctx.step_us))} of the step: {ms(fp.fp32_us)} "
        f"in the fp32 operators, {ms(fp.casts_us)} in Casts) while the MatMuls run in {half} "
        f"(kernel_details.csv Input Data Types); {what}; the same on every rank, no rank is late"
    )
    zh = (
        f"每张卡都在用 fp32 计算 {half} 模型的一部分：{sc.every_zh}上 {ops_zh} 的输入为 fp32（DT_FLOAT，shape "
        f"[{fp.shape}]），并有 Cast 把该张量转成 fp32 再转回，每步 {ms(fp.us)}（占步长 "
        f"{pct(share_of(fp.us, ctx.step_us))}：fp32 算子 {ms(fp.fp32_us)}，Cast {ms(fp.casts_us)}），而 MatMul "
        f"以 {half} 运行（kernel_details.csv 的输入数据类型）；{what_zh}；每张卡都一样，没有慢卡"
    )
    rem = (
        Remedy(
            "action",
            f"Compute the loss in {half} without an fp32 copy of the logits: a fused cross-entropy "
            "on the half-precision logits (MindSpeed / Megatron fused or vocab-parallel cross "
            "entropy, e.g. --cross-entropy-loss-fusion), or split the loss over chunks of the "
            "sequence; keep fp32 only inside the fused kernel's reduction.",
            f"在 {half} 下计算损失，不再生成 logits 的 fp32 副本：对半精度 logits 使用融合交叉熵（MindSpeed / "
            "Megatron 的融合或词表并行交叉熵，例如 --cross-entropy-loss-fusion），或按序列分块计算损失；"
            "只在融合算子内部的归约中保留 fp32。",
            gain,
            BoundKind.ESTIMATE,
        )
        if loss
        else Remedy(
            "action",
            f"Run {ops} in {half}: drop the explicit .float() / fp32 autocast region around them, "
            "and keep fp32 only for the reductions that need it.",
            f"让 {ops_zh} 以 {half} 运行：去掉它们周围显式的 .float() / fp32 autocast 区域，只在需要的归约中保留 fp32。",
            gain,
            BoundKind.ESTIMATE,
        )
    )
    return [
        RootCause(
            id="cause.job_hotspot.fp32",
            mechanism=Mechanism.JOB_HOTSPOT,
            category=Category.COMPUTE,
            culprit=Culprit(
                kind="job",
                # the forward operator names the path (its gradient is the same path's backward)
                operator=next((o for o in fp.ops if not o.endswith("Grad")), fp.ops[0]),
                shape=fp.shape,
                label=f"fp32 {'loss' if loss else 'operators'} ({ops})",
                label_zh=f"fp32 {'损失计算' if loss else '算子'}（{ops_zh}）",
            ),
            victims=every_rank_loses(ctx, gain),
            summary=f"{en}.",
            summary_zh=f"{zh}。",
            metrics={
                "fp32_path_us_per_step": fp.us,
                "fp32_ops_us_per_step": fp.fp32_us,
                "fp32_casts_us_per_step": fp.casts_us,
                "fp32_path_share": share_of(fp.us, ctx.step_us),
                "gain_estimate_us": gain,
            },
            findings=(),
            gain_us=gain,
            bound=BoundKind.ESTIMATE,
            remedies=(rem,),
            symptom_tags=("op_hotspot", "dtype_mismatch"),
            severity=_severity(gain, ctx.step_us),
        )
    ]
