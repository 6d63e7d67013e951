"""Low-rank adapter rule: every rank runs LoRA branches as separate small kernels (job-level).

A LoRA adapter adds ``scale * B(A x)`` to a layer's output: two MatMuls through a rank-``r``
bottleneck (an input shape with one dimension ``r`` ≤ 64 beside dimensions ≥ 1024), then a Muls
for the scale and an Add into the base output, and their gradients. Unfused, each is a kernel of
its own: many short kernels per layer whose launches cost more than they run, and element-wise
passes over the full-size output. Fused (the scale folded into B, the add into the MatMul:
``addmm``, a fused LoRA kernel) the element-wise passes and their launch gaps go away.
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

#: A rank-``r`` bottleneck: one dimension at most this, beside one at least ``WIDE_DIM``.
LOW_RANK_MAX = 64
WIDE_DIM = 1024
#: The adapters are a cause when their kernels and the idle before them take this share.
LOW_RANK_CAUSE_SHARE = 0.1
#: ... and there are at least this many low-rank MatMuls per step.
LOW_RANK_MIN_PER_STEP = 8
_MATMUL = re.compile(r"matmul|gemm", re.I)
#: Element-wise kernels of an adapter's branch (scale, add into the output, casts).
_ELEMENTWISE = re.compile(r"^(?:Muls?|Adds?|Axpy\w*|Cast|AddV\d|Add\w*Scalar)$", re.I)


def _dims(shape: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", shape)]


def low_rank_dim(shapes: str) -> int | None:
    """The bottleneck dimension of a MatMul's inputs (``'4096,4096;16,4096'`` → 16), or None."""
    for s in str(shapes).split(";"):
        d = _dims(s)
        if len(d) == 2 and min(d) <= LOW_RANK_MAX and max(d) >= WIDE_DIM:
            return min(d)
    return None


@dataclass(frozen=True)
class LowRank:
    """The low-rank adapter branches of a step, per (step, rank) (median rank).

    Attributes:
        rank: The bottleneck dimension (most frequent).
        matmuls: Low-rank MatMuls per step.
        elementwise: Element-wise kernels right before or after them per step (scale, add).
        matmul_us: The low-rank MatMuls' device time per step (µs).
        elementwise_us: The element-wise kernels' device time per step (µs).
        idle_us: Device idle right before all of these kernels per step (µs, kernel Wait Time).
        elementwise_idle_us: Of that idle, before the element-wise kernels (µs).
        example: One low-rank MatMul's input shapes.
        ranks: Ranks read (a sample).
    """

    rank: int
    matmuls: float
    elementwise: float
    matmul_us: float
    elementwise_us: float
    idle_us: float
    elementwise_idle_us: float
    example: str
    ranks: tuple[int, ...]

    @property
    def us(self) -> float:
        """Kernels and idle per step (µs)."""
        return self.matmul_us + self.elementwise_us + self.idle_us

    @property
    def saving_us(self) -> float:
        """Estimate of the fused branches' saving per step (µs).

        The scale and the add folded into the MatMuls: the element-wise kernels and the idle
        before them go away; the low-rank MatMuls stay.
        """
        return self.elementwise_us + self.elementwise_idle_us


def low_rank(ctx: Context) -> LowRank | None:
    """The low-rank adapter branches on a sample of the ranks, or ``None``.

    Per (step, rank), in start order: MatMuls with a rank-``r`` input (:func:`low_rank_dim`) and the
    element-wise kernels beside them: up to two right after one (the scale, the add into the
    output) and one right before one (the gradient's scale in the backward). Device time from
    ``duration_us``, the idle before each from ``wait_us`` (kernel_details.csv Wait Time). Source:
    ``kernels``.
    """
    sample = _sample(ctx.ranks)
    k = _compute_kernels(ctx.profile, sample)
    if k.empty or not {"step", "input_shapes", "start_us", "duration_us"} <= set(k.columns):
        return None
    k = k[k["step"].notna()].sort_values(["rank", "step", "start_us"], kind="stable")
    is_mm = k["op_type"].str.contains(_MATMUL).to_numpy()
    rk = [
        low_rank_dim(s) if m else None
        for s, m in zip(k["input_shapes"].astype(str), is_mm, strict=True)
    ]
    if sum(r is not None for r in rk) == 0:
        return None
    ew = k["op_type"].astype(str).str.match(_ELEMENTWISE).to_numpy()
    wait = k["wait_us"].fillna(0.0).to_numpy("float64") if "wait_us" in k else [0.0] * len(k)
    unit = list(zip(k["rank"], k["step"], strict=True))
    role = []
    after = 0  # element-wise kernels still taken after a low-rank MatMul: its scale and add
    prev_unit = None
    for i, u in enumerate(unit):
        if u != prev_unit:
            after, prev_unit = 0, u
        if rk[i] is not None:
            role.append("mm")
            after = 2
        elif after and ew[i]:
            role.append("ew")
            after -= 1
        else:
            role.append("")
            after = 0
    # and the element-wise kernel right before one (the gradient's scale in the backward)
    for i in range(1, len(unit)):
        if role[i] == "mm" and not role[i - 1] and ew[i - 1] and unit[i - 1] == unit[i]:
            role[i - 1] = "ew"
    t = k.assign(_role=role, _wait=wait)
    units = t.groupby(["rank", "step"]).size().index

    def per_step(mask: pd.Series, col: str) -> float:
        s = t[mask].groupby(["rank", "step"])[col].sum().reindex(units, fill_value=0.0)
        return float(s.groupby(level="rank").mean().median())

    def count(mask: pd.Series) -> float:
        s = t[mask].groupby(["rank", "step"]).size().reindex(units, fill_value=0)
        return float(s.groupby(level="rank").mean().median())

    mm, e = t["_role"] == "mm", t["_role"] == "ew"
    ranks_seen = pd.Series([r for r in rk if r is not None])
    first = t[mm].iloc[0]
    return LowRank(
        rank=int(ranks_seen.mode().iloc[0]),
        matmuls=count(mm),
        elementwise=count(e),
        matmul_us=per_step(mm, "duration_us"),
        elementwise_us=per_step(e, "duration_us"),
        idle_us=per_step(mm | e, "_wait"),
        elementwise_idle_us=per_step(e, "_wait"),
        example=str(first["input_shapes"]),
        ranks=tuple(int(r) for r in sample),
    )


def rule_low_rank_adapters(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Low-rank adapter rule: unfused LoRA branches cost every rank a share of its step.

    From :func:`low_rank` on a sample of the ranks: at least ``LOW_RANK_MIN_PER_STEP`` low-rank
    MatMuls per step whose kernels, element-wise followers and the idle before them take at least
    ``LOW_RANK_CAUSE_SHARE`` of the median step. A job-level cause. Gain (estimate):
    :attr:`LowRank.saving_us`. Source: ``kernels``, ``step_trace``.
    """
    per = ctx.per_rank
    if per.empty or len(per) < 2 or not math.isfinite(ctx.step_us):
        return []
    lr = low_rank(ctx)
    if lr is None or lr.matmuls < LOW_RANK_MIN_PER_STEP:
        return []
    if lr.us < LOW_RANK_CAUSE_SHARE * ctx.step_us:
        return []
    sc = presence_scope(ctx, missing_ranks(ctx.profile))
    n = lr.matmuls + lr.elementwise
    gain = lr.saving_us
    en = (
        f"Every rank runs low-rank adapter (LoRA) branches as separate small kernels: on "
        f"{sc.every} {n:.0f} kernels per step belong to them, {lr.matmuls:.0f} MatMuls through a "
        f"rank-{lr.rank} bottleneck (e.g. [{lr.example.replace(';', '] x [')}]) and "
        f"{lr.elementwise:.0f} element-wise kernels beside them (the scale and the add into "
        f"the layer's output), {ms(lr.matmul_us + lr.elementwise_us)} of device time and "
        f"{ms(lr.idle_us)} of device idle before them (their launches take longer than they run): "
        f"{ms(lr.us)} per step, {pct(share_of(lr.us, ctx.step_us))} of the step (kernel_details.csv "
        "shapes and Wait Time); unfused, not merged into the base MatMuls; the same on every rank, "
        "no rank is late"
    )
    zh = (
        f"每张卡都把低秩适配器（LoRA）分支作为单独的小算子执行：{sc.every_zh}每步有 {n:.0f} 个算子属于它们，"
        f"其中 {lr.matmuls:.0f} 个是经过秩为 {lr.rank} 的瓶颈的 MatMul（例如 "
        f"[{lr.example.replace(';', '] x [')}]），{lr.elementwise:.0f} 个是紧挨着它们的逐元素算子（缩放以及加到该层"
        f"输出上），设备耗时 {ms(lr.matmul_us + lr.elementwise_us)}，其前的设备空闲 {ms(lr.idle_us)}（下发比"
        f"执行还慢）：每步共 {ms(lr.us)}，占步长 {pct(share_of(lr.us, ctx.step_us))}（kernel_details.csv 的 "
        "shape 与等待时间）；这些分支没有融合，也没有合并进底座的 MatMul；每张卡都一样，没有慢卡"
    )
    rem = Remedy(
        "action",
        "Fuse the LoRA branches: a fused LoRA implementation (e.g. MindSpeed --lora-fusion / "
        "CCLoRA) or the scale folded into B and the add done by the MatMul (addmm), so each "
        "adapter is one or two kernels instead of four; batch the adapters of one layer into one "
        "MatMul where they share an input; for evaluation or serving, merge them into the base "
        "weights (peft merge_and_unload).",
        "融合 LoRA 分支：使用融合的 LoRA 实现（例如 MindSpeed 的 --lora-fusion / CCLoRA），或把缩放并入 "
        "B、由 MatMul 完成加法（addmm），让每个适配器从四个算子变成一到两个；同一层共享输入的多个适配器合并成一次 "
        "MatMul；评估或推理时把它们合并进底座权重（peft 的 merge_and_unload）。",
        gain,
        BoundKind.ESTIMATE,
    )
    return [
        RootCause(
            id="cause.job_hotspot.low_rank_adapters",
            mechanism=Mechanism.JOB_HOTSPOT,
            category=Category.COMPUTE,
            culprit=Culprit(
                kind="job",
                operator="MatMulV2",
                shape=lr.example,
                label=f"unfused LoRA adapters (rank {lr.rank})",
                label_zh=f"未融合的 LoRA 适配器（秩 {lr.rank}）",
            ),
            victims=every_rank_loses(ctx, gain),
            summary=f"{en}.",
            summary_zh=f"{zh}。",
            metrics={
                "lora_kernels_per_step": n,
                "lora_matmuls_per_step": lr.matmuls,
                "lora_elementwise_per_step": lr.elementwise,
                "lora_device_us_per_step": lr.matmul_us + lr.elementwise_us,
                "lora_idle_us_per_step": lr.idle_us,
                "lora_us_per_step": lr.us,
                "lora_share_of_step": share_of(lr.us, ctx.step_us),
                "gain_estimate_us": gain,
            },
            findings=(),
            gain_us=gain,
            bound=BoundKind.ESTIMATE,
            remedies=(rem,),
            symptom_tags=("op_hotspot", "tiny_kernels", "unfused_ops"),
            severity=_severity(gain, ctx.step_us),
        )
    ]
