"""Degradation rule: one rank's step time grows over the run."""

from __future__ import annotations

import dataclasses
import re

from advisor_chat.analyzers.base import Category, Finding
from advisor_chat.diagnosis.context import Context, ranks_label
from advisor_chat.diagnosis.rules.common import _severity, every_rank_loses
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Mechanism,
    Remedy,
    RootCause,
)


def rule_degradation(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Degradation rule: steps get slower over the run (step_trend analyzer).

    Rule: a ``step_trend.degradation`` finding (robust slope × steps ≥ the analyzer's threshold).
    When its ranks are exactly one existing rank cause's culprit, that cause becomes a DEGRADATION
    cause of the rank (same victims); when they are the one rank of a step-events cause or of a
    rank slow from some step on (``onset_step``), the finding joins that cause as its symptom
    (one fault, one cause);
    otherwise one job-level DEGRADATION cause with the finding's
    gain (estimate: the mean step back to the first fitted step, never below the fastest measured one). Returns the updated cause list.
    """
    out = list(causes)
    for f in ctx.finding("step_trend.degradation."):
        if f.id in ctx.claimed:
            continue
        ctx.claimed.add(f.id)
        growth = float(f.metrics.get("growth_ratio", f.metrics.get("median_growth_ratio", 0.0)))
        for i, c in enumerate(out):
            if (c.culprit.kind == "steps" or "onset_step" in c.metrics) and set(
                c.culprit.ranks
            ) == set(f.ranks):
                # the same rank late in the last steps: an onset the events cause already
                # states (one fault, one cause); the trend is its symptom
                out[i] = dataclasses.replace(
                    c,
                    findings=(*c.findings, f),
                    symptom_tags=(*c.symptom_tags, "step_degradation"),
                )
                break
            if c.culprit.kind == "rank" and set(c.culprit.ranks) == set(f.ranks):
                rl, rl_zh = c.culprit.label, c.culprit.label_zh
                out[i] = RootCause(
                    **{
                        **c.__dict__,
                        "id": f"cause.degradation.r{c.culprit.ranks[0]}",
                        "mechanism": Mechanism.DEGRADATION,
                        "summary": f"Degradation on {rl}: it gets slower step after step. "
                        + c.summary,
                        "summary_zh": f"{rl_zh}逐步变慢。" + c.summary_zh,
                        "findings": (*c.findings, f),
                        "remedies": (
                            *(r for r in c.remedies if r.kind == "action"),
                            Remedy(
                                "check",
                                f"Find what grows every step on {rl} (host memory, lists or tensors kept "
                                "per step, log buffers).",
                                f"找出{rl_zh}上每步都在增长的东西（主机内存、每步保留的列表或张量、日志缓冲）。",
                            ),
                            *(r for r in c.remedies if r.kind == "check"),
                        ),
                        "symptom_tags": (*c.symptom_tags, "step_degradation"),
                    }
                )
                break
        else:
            gain = f.estimated_gain_us or 0.0
            every = not f.ranks or set(f.ranks) >= set(ctx.ranks)
            rl, rl_zh = ("every rank", "所有卡") if every else ranks_label(f.ranks or ctx.ranks)
            mem = _memory_growth(ctx)
            check = Remedy(
                "check",
                "Find what grows every step (host memory, cached tensors, log buffers).",
                "找出每步都在增长的东西（主机内存、缓存的张量、日志缓冲）。",
            )
            out.append(
                RootCause(
                    id="cause.degradation.job",
                    mechanism=Mechanism.DEGRADATION,
                    category=f.category or _growing_component(ctx),
                    culprit=Culprit(
                        kind="job", ranks=tuple(f.ranks), label="the whole job", label_zh="整个作业"
                    ),
                    victims=every_rank_loses(ctx, gain) if every else (),
                    summary=f"Steps get slower over the run on {rl}: {_unscoped(f.summary)}"
                    + (mem[0] if mem else ""),
                    summary_zh=f"{rl_zh}的步长随训练逐步变长"
                    + (f"：{_unscoped(f.summary_zh)}" if f.summary_zh else "")
                    + (mem[1] if mem else "")
                    + "。",
                    metrics={"gain_us": gain, "growth_ratio": growth, **(mem[3] if mem else {})},
                    findings=(f, *((mem[4],) if mem else ())),
                    gain_us=gain,
                    bound=BoundKind.ESTIMATE,
                    remedies=(
                        dataclasses.replace(mem[2], gain_us=gain, bound=BoundKind.ESTIMATE),
                        check,
                    )
                    if mem
                    else (check,),
                    symptom_tags=("step_degradation", *(("memory_growth",) if mem else ())),
                    severity=_severity(gain, ctx.step_us),
                )
            )
    return out


#: The step-trend finding's opening "12 of 16 ranks (0-11): " / "16 张卡中的 12 个（0-11）：".
_WHO = re.compile(r"^\d+ of \d+ ranks \([^)]*\):\s*|^\d+ 张卡中的 \d+ 个（[^）]*）：")


def _unscoped(text: str) -> str:
    """A finding's summary without its rank count (the cause names the ranks) or final stop."""
    return _WHO.sub("", text).rstrip("。.")


def _memory_growth(
    ctx: Context,
) -> tuple[str, str, Remedy, dict[str, float], Finding] | None:
    """Device memory that grows every step beside the slowdown (the ``memory`` analyzer's finding).

    Returns (clause, clause_zh, action, metrics, finding), or ``None`` without a
    ``memory.growth`` finding. The clause adds the caching allocator's frees per step
    (``aclrtFree`` host calls, trace_view.json) on the finding's first rank when recorded: near
    the device's capacity it frees cached blocks and allocates them again, more every step.
    """
    found = ctx.finding("memory.growth")
    if not found:
        return None
    f = found[0]
    ctx.claimed.add(f.id)  # its evidence, attached here once
    g = f.metrics["growth_mb_per_step"]
    lo, hi = f.metrics["growth_first_mb"], f.metrics["growth_last_mb"]
    en = (
        f". Allocated device memory grows {g:.0f} MB per step ({lo:.0f} MB at the end of the first "
        f"step read, {hi:.0f} MB at the end of the last; memory_record.csv): tensors kept from "
        "step to step fill the device"
    )
    zh = (
        f"。已分配的设备内存每步增长 {g:.0f} MB（所读第一步结束时 {lo:.0f} MB，最后一步结束时 "
        f"{hi:.0f} MB；memory_record.csv）：跨步保留的张量正在占满设备内存"
    )
    metrics = {"memory_growth_mb_per_step": g, "memory_first_mb": lo, "memory_last_mb": hi}
    rank = f.ranks[0] if f.ranks else None
    if rank is not None and ctx.profile.has("host_dispatch"):
        hd = ctx.profile.host_dispatch_for([rank])
        if not hd.empty and "step" in hd.columns:
            api = hd["api_name"].astype(str)
            steps = sorted(int(s) for s in hd["step"].dropna().unique() if int(s) >= 0)
            frees = hd[api.str.contains("aclrtFree", regex=False)].groupby("step").size()
            frees = frees.reindex(steps, fill_value=0)
            # a cache release synchronizes the device, then frees its blocks
            syncs = hd[api.str.contains("aclrtSynchronizeDevice", regex=False)].groupby("step")
            releases = syncs.size().reindex(steps, fill_value=0).where(frees > 0, 0)
            per, what = (
                (releases, "cache releases (aclrtSynchronizeDevice then aclrtFree)")
                if releases.sum() > 0
                else (frees, "aclrtFree calls")
            )
            what_zh = (
                "缓存释放次数（aclrtSynchronizeDevice 后接 aclrtFree）"
                if releases.sum() > 0
                else "aclrtFree 调用次数"
            )
            if len(per) >= 3 and per.iloc[-1] > per.iloc[0]:
                counts = ", ".join(str(int(n)) for n in per.tolist())
                first_free = next(s for s, n in zip(steps, per.tolist(), strict=True) if n > 0)
                en += (
                    f". The caching allocator gives memory back to the device from step "
                    f"{first_free} on ({what} per step on rank {rank}: {counts}), more in every "
                    "step: it is at the device's capacity, so each step now frees and allocates "
                    "again, and the next steps will run out of memory"
                )
                zh += (
                    f"。从第 {first_free} 步起缓存分配器开始把内存还给设备（{rank}号卡每步的"
                    f"{what_zh}：{counts}），而且一步比一步多：它已到设备容量上限，每步都要"
                    "先释放再重新分配，接下来的几步会内存不足（OOM）"
                )
                metrics["allocator_frees_first_step"] = float(first_free)
    action = Remedy(
        "action",
        "Stop keeping tensors from one step to the next: find what the training loop stores per "
        "step (outputs, logits or losses appended to a list or kept for logging or metrics; keep "
        "loss.item() or .detach().cpu() copies instead) and release it every step; the "
        "allocation then stays flat and the allocator stops freeing and allocating again.",
        "不要把张量从一步保留到下一步：找出训练循环每步保存下来的东西（追加到列表、或为日志和指标保留的"
        "输出、logits 或 loss；改为只保留 loss.item() 或 .detach().cpu() 的副本），并在每步释放；"
        "这样已分配内存保持平稳，分配器也不再反复释放和重新分配。",
        case_id="memory-growth-across-steps",
    )
    return en, zh, action, metrics, f


#: The step-trace component a job-wide slowdown grows in, and its bottleneck category.
_COMPONENTS = (
    ("computing_us", Category.COMPUTE),
    ("free_us", Category.SCHEDULING),
    ("communication_not_overlapped_us", Category.COMMUNICATION),
)


def _growing_component(ctx: Context) -> Category:
    """The category of the step-trace component that grows most over the run.

    From the first to the last half of the steps, per step the median over ranks; ``UNKNOWN``
    when none grows or the data lacks them. Source: ``step_trace``.
    """
    fr = ctx.frame
    cols = [c for c, _ in _COMPONENTS if c in fr.columns]
    if fr.empty or "step" not in fr.columns or not cols:
        return Category.UNKNOWN
    per = fr.groupby("step")[cols].median().sort_index()
    if len(per) < 2:
        return Category.UNKNOWN
    half = len(per) // 2
    growth = per.iloc[-half:].mean() - per.iloc[:half].mean()
    top = str(growth.idxmax())
    if not float(growth.max()) > 0:
        return Category.UNKNOWN
    return dict(_COMPONENTS)[top]
