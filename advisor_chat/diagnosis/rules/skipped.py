"""Skipped-update rule: in some steps every rank skips the optimizer update (a job-level cost).

A step whose gradients are thrown away costs its whole time and produces no update. It shows in
the per-step operator counts: the optimizer's operators (``ForeachAddcdivScalar``, ``ApplyAdamW``
...) run once per step and are absent from those steps on every rank, which are a little shorter.
In fp16 training a dynamic loss scaler does this when the gradients overflow (inf / NaN): it skips
the update and lowers the scale. What it costs is the time per *applied* update.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from advisor_chat.analyzers.base import Category
from advisor_chat.diagnosis.context import Context
from advisor_chat.diagnosis.decompose import _compute_kernels, _sample
from advisor_chat.diagnosis.rules.common import _severity, every_rank_loses
from advisor_chat.diagnosis.text import ms, pct, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Mechanism,
    Remedy,
    RootCause,
)

#: Optimizer operators (PyTorch foreach / fused optimizers, Ascend ApplyAdam* kernels).
OPTIMIZER_OP = re.compile(
    r"foreach|adam|lamb|\bsgd|applymomentum|applyadagrad|applyrms|lion|optimizer", re.I
)
#: An operator type is absent from a step when at least this share of the ranks read lacks it.
ABSENT_SHARE = 0.9
_FP16 = re.compile(r"^(?:DT_)?(?:FLOAT16|HALF)$", re.I)


@dataclass(frozen=True)
class SkippedSteps:
    """Steps in which every rank runs none of the optimizer's operators.

    Attributes:
        steps: The steps without an update.
        all_steps: Every step read.
        ops: The optimizer operator types missing from them.
        optimizer_us: Those operators' device time per step in the other steps (median rank, µs).
        fp16: Whether the main work (MatMul) computes in fp16 (dynamic loss scaling).
        ranks: Ranks read (a sample).
    """

    steps: tuple[int, ...]
    all_steps: tuple[int, ...]
    ops: tuple[str, ...]
    optimizer_us: float
    fp16: bool
    ranks: tuple[int, ...]


def skipped_steps(ctx: Context) -> SkippedSteps | None:
    """Steps of the capture with no optimizer update on (nearly) every rank, or ``None``.

    Per step, the optimizer operator types (:data:`OPTIMIZER_OP`) that run in most of the other
    steps and that at least ``ABSENT_SHARE`` of the sampled ranks do not run in it. A minority of
    the steps (fewer than half) must lack them: in most steps the update runs. Source: ``kernels``
    (kernel_details.csv ``Step Id``, ``OP Type``, ``Input Data Types``).
    """
    sample = _sample(ctx.ranks)
    k = _compute_kernels(ctx.profile, sample)
    if k.empty or "step" not in k:
        return None
    k = k[k["step"].notna()]
    opt = k[k["op_type"].str.contains(OPTIMIZER_OP)]
    steps = sorted(int(s) for s in k["step"].unique())
    if opt.empty or len(steps) < 3:
        return None
    ranks = sorted(int(r) for r in k["rank"].unique())
    ran = opt.groupby(["op_type", "step"])["rank"].nunique()
    hit: dict[int, set[str]] = {}
    usual = []
    for op, by_step in ran.groupby(level="op_type"):
        counts = by_step.droplevel("op_type").reindex(steps, fill_value=0)
        absent = [s for s in steps if counts[s] <= (1 - ABSENT_SHARE) * len(ranks)]
        if 0 < len(absent) < len(steps) / 2:
            usual.append(str(op))
            for s in absent:
                hit.setdefault(s, set()).add(str(op))
    if not hit:
        return None
    # the steps that lack the optimizer: those missing most of its operator types
    n_ops = max(len(v) for v in hit.values())
    missing = sorted(s for s, v in hit.items() if len(v) >= 0.5 * n_ops)
    ops = sorted({o for s in missing for o in hit[s]})
    others = [s for s in steps if s not in missing]
    o = opt[opt["step"].isin(others) & opt["op_type"].isin(ops)]
    per = o.groupby(["rank", "step"])["duration_us"].sum().groupby(level="rank").mean()
    mm = k[k["op_type"].str.contains(r"matmul", case=False)]
    fp16 = False
    if not mm.empty and "input_dtypes" in mm:
        first = mm["input_dtypes"].astype(str).str.split(";").str[0]
        fp16 = bool(first.map(lambda d: bool(_FP16.match(d))).mean() >= 0.5)
    return SkippedSteps(
        steps=tuple(missing),
        all_steps=tuple(steps),
        ops=tuple(ops),
        optimizer_us=float(per.median()) if not per.empty else math.nan,
        fp16=fp16,
        ranks=tuple(ranks),
    )


def rule_skipped_updates(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Skipped-update rule: some steps apply no update on any rank; their time is wasted.

    From :func:`skipped_steps`. Cost: the skipped steps' time (median over ranks per step, from
    ``step_trace``) over the captured time; the time per applied update is the captured time over
    the steps that update. Gain (estimate, per captured step): the skipped steps' time averaged
    over the captured steps, what the same run spends without producing an update. Source:
    ``kernels``, ``step_trace``.
    """
    f = ctx.frame
    if f.empty or not math.isfinite(ctx.step_us):
        return []
    sk = skipped_steps(ctx)
    if sk is None:
        return []
    by_step = f.groupby("step")["step_us"].median()
    by_step = by_step[by_step.index.isin(sk.all_steps)]
    if not set(sk.steps) <= set(by_step.index):
        return []
    total = float(by_step.sum())
    wasted = float(by_step.reindex(sk.steps).sum())
    applied = len(by_step) - len(sk.steps)
    if applied <= 0 or total <= 0:
        return []
    per_update = total / applied
    normal = float(by_step.drop(list(sk.steps)).mean())
    skip_step = float(by_step.reindex(sk.steps).median())
    gain = wasted / len(by_step)
    sp = ", ".join(str(s) for s in sk.steps)
    ops = ", ".join(sk.ops[:5]) + (" ..." if len(sk.ops) > 5 else "")
    ops_zh = "、".join(sk.ops[:5]) + ("等" if len(sk.ops) > 5 else "")
    opt_txt = (
        f", {ms(sk.optimizer_us)} per step in the other steps"
        if math.isfinite(sk.optimizer_us)
        else ""
    )
    opt_zh = f"，其他步每步 {ms(sk.optimizer_us)}" if math.isfinite(sk.optimizer_us) else ""
    why = (
        "The model computes in fp16 (MatMul inputs DT_FLOAT16): a dynamic loss scaler skips the "
        "update when the gradients overflow (inf / NaN) and lowers the scale"
        if sk.fp16
        else "Something in the training loop skips the update in those steps (a check for inf / "
        "NaN gradients, a skip condition)"
    )
    why_zh = (
        "模型以 fp16 计算（MatMul 输入为 DT_FLOAT16）：动态 loss scale 在梯度溢出（inf / NaN）时会跳过这次更新并"
        "降低缩放系数"
        if sk.fp16
        else "训练循环在这些步里跳过了参数更新（检测到 inf / NaN 梯度，或某个跳过条件）"
    )
    en = (
        f"In steps {sp} ({len(sk.steps)} of the {len(by_step)} captured) every rank skips the "
        f"optimizer update: its operators ({ops}{opt_txt}) do not run, and those steps are "
        f"shorter ({ms(skip_step)} against {ms(normal)}; kernel_details.csv per Step Id). {why}. "
        f"{pct(share_of(wasted, total))} of the captured time produced no update: each applied "
        f"update costs {ms(per_update)} against {ms(normal)} per step when every step updates "
        f"({ms(per_update - normal)} more); the same on every rank, no rank is to blame."
    )
    zh = (
        f"第 {sp} 步（采集的 {len(by_step)} 步中有 {len(sk.steps)} 步）每张卡都跳过了优化器更新：优化器算子"
        f"（{ops_zh}{opt_zh}）没有执行，这些步也更短（{ms(skip_step)}，其他步 {ms(normal)}；kernel_details.csv "
        f"按 `Step Id` 统计）。{why_zh}。采集时间中有 {pct(share_of(wasted, total))} 没有产生参数更新："
        f"每次有效更新耗时 {ms(per_update)}，而每步都更新时为 {ms(normal)}（多 {ms(per_update - normal)}）；"
        "每张卡都一样，不是某张卡的问题。"
    )
    rem = (
        Remedy(
            "action",
            "Stop the fp16 overflows: train in bf16 (same range as fp32, no loss scaling: "
            "Megatron / MindSpeed --bf16), or start the dynamic loss scale lower (e.g. "
            "--initial-loss-scale 4096) with a longer --loss-scale-window / hysteresis so it "
            "stops overshooting; if overflows persist, find the layer whose activations or "
            "gradients reach inf (a learning rate too high, an unnormalized input).",
            "消除 fp16 溢出：改用 bf16 训练（数值范围与 fp32 相同，不需要 loss scaling：Megatron / MindSpeed "
            "--bf16），或降低动态 loss scale 的初始值（例如 --initial-loss-scale 4096）并加大 --loss-scale-window"
            " / hysteresis，避免缩放系数反复过冲；若仍溢出，找出激活或梯度变成 inf 的层（学习率过大、输入未归一化）。",
            gain,
            BoundKind.ESTIMATE,
        )
        if sk.fp16
        else Remedy(
            "action",
            f"Find why steps {sp} skip the update (the check that skips it: inf / NaN gradients, "
            "a loss spike filter) and fix its source; every skipped step is a wasted step.",
            f"查明第 {sp} 步为何跳过更新（是哪个检查跳过的：inf / NaN 梯度、loss 尖峰过滤等）并修复其根源；"
            "每个被跳过的步都是白跑的。",
            gain,
            BoundKind.ESTIMATE,
        )
    )
    return [
        RootCause(
            id="cause.skipped_update",
            mechanism=Mechanism.SKIPPED_UPDATE,
            category=Category.COMPUTE,
            culprit=Culprit(
                kind="job",
                label=f"the skipped updates of steps {sp} (every rank)",
                label_zh=f"第 {sp} 步被跳过的参数更新（每张卡）",
            ),
            victims=every_rank_loses(ctx, gain),
            summary=en,
            summary_zh=zh,
            metrics={
                "skipped_steps_count": float(len(sk.steps)),
                "captured_steps_count": float(len(by_step)),
                "skipped_time_share": share_of(wasted, total),
                "time_per_update_us": per_update,
                "step_us_updating": normal,
                "step_us_skipped": skip_step,
                "saving_us_per_update": per_update - normal,
                **(
                    {"optimizer_us_per_step": sk.optimizer_us}
                    if math.isfinite(sk.optimizer_us)
                    else {}
                ),
                "wasted_us_per_step": gain,
            },
            findings=(),
            steps=sk.steps,
            gain_us=gain,
            bound=BoundKind.ESTIMATE,
            remedies=(rem,),
            symptom_tags=("skipped_update",),
            severity=_severity(gain, ctx.step_us),
        )
    ]
