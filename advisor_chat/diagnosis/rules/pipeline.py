"""Pipeline rule: receive waits (Bubble) are blamed on the upstream stage."""

from __future__ import annotations

import dataclasses

import numpy as np

from advisor_chat.analyzers.base import Category
from advisor_chat.diagnosis.context import Context, ranks_label
from advisor_chat.diagnosis.rules.common import (
    BUBBLE_MIN_MARGIN,
    BUBBLE_MIN_SHARE,
    BUBBLE_TARGET_SHARE,
    _claim,
    _dominant,
    _severity,
)
from advisor_chat.diagnosis.text import ms, pct, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Impact,
    Mechanism,
    Remedy,
    RootCause,
)


# --------------------------------------------------------------------------------------- rules
def rule_pipeline(ctx: Context) -> list[RootCause]:
    """Pipeline rule: a stage's receive wait (Bubble) is blamed on the stage it waits for.

    Rule: with ≥ 2 pipeline stages, a stage whose mean Bubble is ≥ ``BUBBLE_MIN_SHARE`` (10%)
    of its step and ≥ ``BUBBLE_MIN_MARGIN`` (5 points) above the stage with the least Bubble is
    waiting; the culprit is the stage with the least Bubble (the busiest stage), and the cause says
    what dominates it (Computing, Communication Not Overlapped and Exclude Receive, or Free).
    Victims: every rank of the waiting stages, lost = its Bubble per step (``how="bubble"``).
    Gain (upper bound): mean Bubble of the waiting ranks minus ``BUBBLE_TARGET_SHARE`` (5%) of
    their step, at most the culprit's dominant component on its rank that spends least on it; for
    a compute-bound culprit, at most its
    Computing above the stages' mean Computing (rebalancing moves work, it does not remove it);
    no cause when that excess is under ``STAGE_EXCESS_MIN_SHARE`` (10%) of the waiting stages'
    Bubble (the busiest stage computes what the others do: its work is not what they wait for).
    Source: ``step_trace`` Bubble / Stage columns (cluster_step_trace_time.csv).
    """
    if len(ctx.stages) < 2 or ctx.per_rank.empty:
        return []
    per = ctx.per_rank
    stats = []
    for i, members in enumerate(ctx.stages):
        m = [r for r in members if r in per.index]
        if not m:
            continue
        sub = per.loc[m]
        stats.append(
            (
                i,
                m,
                float(sub["bubble_us"].mean()),
                share_of(float(sub["bubble_us"].mean()), float(sub["step_us"].mean())),
            )
        )
    if len(stats) < 2:
        return []
    sched = _schedule_bubble(ctx, [t[1] for t in stats])
    if sched is not None:
        return [sched]
    culprit = min(stats, key=lambda t: t[3])
    waiting = [
        t
        for t in stats
        if t[0] != culprit[0]
        and t[3] >= BUBBLE_MIN_SHARE
        and t[3] - culprit[3] >= BUBBLE_MIN_MARGIN
    ]
    if not waiting:
        return []
    c_idx, c_ranks = culprit[0], culprit[1]
    dom, dom_zh, comp, dom_us, dom_share = _dominant(ctx, c_ranks)
    victims = []
    for _, ranks, _, _ in waiting:
        for r in ranks:
            b = ctx.val(r, "bubble_us")
            victims.append(Impact(r, b, share_of(b, ctx.val(r, "step_us")), "bubble"))
    victims.sort(key=lambda i: (-i.lost_us, i.rank))
    w_ranks = sorted(r for _, rs, _, _ in waiting for r in rs)
    bubble_mean = float(np.mean([v.lost_us for v in victims]))
    w_step = float(per.loc[w_ranks, "step_us"].mean())
    bubble_share = share_of(bubble_mean, w_step)
    gain = max(bubble_mean - BUBBLE_TARGET_SHARE * w_step, 0.0)
    own_col = {
        "computing": "computing_us",
        "communication": "communication_not_overlapped_exclude_receive_us",
        "free": "free_us",
    }[comp]
    # cutting the stage's dominant component saves at most that component's time on the rank that
    # spends least on it: a stage's ranks end their steps together, so the stage ends sooner only
    # by what all of them save (the figure the stage's bottleneck finding states)
    gain = min(gain, float(min(ctx.val(r, own_col) for r in c_ranks)))
    if comp == "computing":
        # moving work between stages keeps the total: at best every stage computes the stages'
        # mean, so the culprit stage saves its Computing above that mean
        stage_comp = [
            float(np.mean([ctx.val(r, "computing_us") for r in rs])) for _, rs, _, _ in stats
        ]
        culprit_comp = float(np.mean([ctx.val(r, "computing_us") for r in c_ranks]))
        gain = min(gain, max(culprit_comp - float(np.mean(stage_comp)), 0.0))
        if gain < STAGE_EXCESS_MIN_SHARE * bubble_mean:
            # the busiest stage computes what the others do: its extra work cannot be what they
            # wait for (a slow hand-off between stages, the schedule or a late rank is; other
            # rules say which)
            return []
    own = tuple(
        Impact(
            r,
            ctx.val(r, own_col),
            share_of(ctx.val(r, own_col), ctx.val(r, "step_us")),
            f"stage_{comp}",
        )
        for r in c_ranks
    )
    cl, cl_zh = ranks_label(c_ranks)
    wl, wl_zh = ranks_label(w_ranks)
    w_stage_txt = ", ".join(str(t[0]) for t in waiting)
    label = f"stage {c_idx} ({cl})"
    label_zh = f"流水线阶段{c_idx}（{cl_zh}）"
    ex = None
    if comp == "computing":
        # what the busy stage computes beyond the waiting one (extra operators, more launches of
        # the same ones, slower kernels): the evidence for where to rebalance
        from advisor_chat.diagnosis.decompose import device_account
        from advisor_chat.diagnosis.evidence import explain_device

        ex = explain_device(
            device_account(ctx.profile, [(-1, r) for r in c_ranks], w_ranks), label, label_zh, gain
        )
    why = f"; it computes more because {ex.clause}" if ex is not None else ""
    why_zh = f"；其计算更多的原因是{ex.clause_zh}" if ex is not None else ""
    comm_claim = comp == "communication"
    # limited evidence (trial item 4): a communication-bound claim resting on few steps or on
    # communication detail (comm_ops) for only some ranks is said so, with the counts
    lim = lim_zh = ""
    if comm_claim:
        ops = ctx.profile.get("comm_ops")
        n_comm = int(ops["rank"].nunique()) if not ops.empty and "rank" in ops else 0
        n_all = len(ctx.ranks)
        n_st = int(ctx.frame["step"].nunique()) if "step" in ctx.frame else 0
        parts, parts_zh = [], []
        if n_comm < n_all:
            parts.append(f"communication detail (comm_ops) for {n_comm} of {n_all} ranks")
            parts_zh.append(f"通信明细（comm_ops）只覆盖 {n_all} 张卡中的 {n_comm} 张")
        if n_st <= 1:
            parts.append(f"{n_st} step captured")
            parts_zh.append(f"只采集了 {n_st} 步")
        if parts:
            lim = (
                " Limited evidence: " + ", ".join(parts) + "; the split of that communication "
                "into transfer and waiting is not known for every rank, so the gain is a loose "
                "upper bound."
            )
            lim_zh = (
                "证据有限：" + "，".join(parts_zh) + "；无法确定每张卡的通信中传输与等待各占多少，"
                "收益只是宽松的上限。"
            )
    findings = _claim(
        ctx,
        lambda f: (
            f.id.startswith("cluster_breakdown.bottleneck.pipeline_bubble")
            or (f.id.startswith("cluster_breakdown.bottleneck.") and f"stage_{c_idx}" in f.id)
            or (f.id.startswith("cluster_breakdown.communication.wait_spread_stage"))
            or (
                comm_claim
                and f.id in ("communication.communication.not_overlapped",)
                and bool(set(f.ranks) & set(c_ranks))
            )
        ),
    )
    remedies: list[Remedy] = []
    upper = BoundKind.UPPER_BOUND
    if comp == "communication":
        remedies.append(
            Remedy(
                "action",
                f"Cut stage {c_idx}'s non-overlapped communication ({ms(dom_us)} per step, mean of its "
                "ranks): overlap "
                "its collectives with computation, use fewer and larger collectives (bucket sizes), "
                f"or move its communication-heavy parallel dimension; stage {w_stage_txt} then "
                "waits less.",
                f"减少阶段{c_idx}未被掩盖的通信（各卡平均每步 {ms(dom_us)}）：让其集合通信与计算重叠、"
                f"合并为更少更大的集合通信（调整分桶大小），或调整通信量大的并行维度；"
                f"这样阶段{w_stage_txt}的等待会减少。",
                gain,
                upper,
            )
        )
    elif comp == "computing":
        remedies.append(
            Remedy(
                "action",
                f"Rebalance the pipeline partition: move layers from stage {c_idx} to stage "
                f"{w_stage_txt}.",
                f"重新划分流水线：把部分层从阶段{c_idx}移到阶段{w_stage_txt}。",
                gain,
                upper,
            )
        )
    else:
        remedies.append(
            Remedy(
                "action",
                f"Remove the host-side idle of stage {c_idx} (dispatch, synchronization, data "
                "loading), which the other stage waits for.",
                f"消除阶段{c_idx}的主机侧空闲（下发、同步、数据加载），其他阶段正在等它。",
                gain,
                upper,
            )
        )
    remedies.append(
        Remedy(
            "action",
            "Use more micro-batches per step (or an interleaved 1F1B schedule) so the Bubble "
            "is a smaller share of the step.",
            "每步使用更多的微批次（或交错式 1F1B 调度），降低流水线气泡在每步中的占比。",
            # what it saves depends on the micro-batch count, which the profile does not record:
            # the imbalance's gain is the first remedy's, not this one's
            None,
            BoundKind.NONE,
        )
    )
    remedies.append(
        Remedy(
            "check",
            f"Open stage {c_idx}'s ranks ({cl}) in the timeline (MindStudio Insight) and see which "
            "part of its step has no computation under its communication.",
            f"在时间线（MindStudio Insight）中打开阶段{c_idx}（{cl_zh}）的卡，"
            "确认其每步中哪一部分通信下面没有计算可以掩盖。",
        )
    )
    return [
        RootCause(
            id=f"cause.pipeline_imbalance.stage_{c_idx}",
            mechanism=Mechanism.PIPELINE_IMBALANCE,
            category=Category.COMMUNICATION
            if comp == "communication"
            else Category.COMPUTE
            if comp == "computing"
            else Category.SCHEDULING,
            culprit=Culprit(
                kind="stage", ranks=tuple(c_ranks), stage=c_idx, label=label, label_zh=label_zh
            ),
            victims=tuple(victims),
            summary=(
                f"Pipeline imbalance: stage {w_stage_txt} ({wl}) waits {ms(bubble_mean)} per step "
                f"in Bubble ({pct(bubble_share)} of its step) for stage {c_idx} ({cl}), which is "
                f"{dom}{why}." + lim
            ),
            summary_zh=(
                f"流水线负载不均衡：阶段{w_stage_txt}（{wl_zh}）每步在气泡中等待 {ms(bubble_mean)}"
                f"（占其步长 {pct(bubble_share)}），等的是阶段{c_idx}（{cl_zh}），"
                f"后者{dom_zh}{why_zh}。" + lim_zh
            ),
            metrics={
                **(ex.metrics if ex is not None else {}),
                "bubble_us_mean": bubble_mean,
                "bubble_share": bubble_share,
                "culprit_dominant_us": dom_us,
                "culprit_dominant_share": dom_share,
                "gain_upper_bound_us": gain,
            },
            findings=findings,
            gain_us=gain,
            bound=upper,
            remedies=tuple(remedies),
            symptom_tags=("pipeline_bubble", "comm_not_overlapped")
            if comp == "communication"
            else ("pipeline_bubble",),
            dominant=dom,
            dominant_zh=dom_zh,
            severity=_severity(bubble_mean, w_step),
            own=own,
        )
    ]


#: A compute-bound busiest stage is the stages' bottleneck only when its Computing above the
#: stages' mean is at least this share of the Bubble the others wait (else it computes what they do).
STAGE_EXCESS_MIN_SHARE = 0.1
#: Stages compute alike when their Computing differs by at most this share of the mean (with
#: Bubble on every stage, no stage holds the others back: the bubble is the schedule's).
BALANCED_STAGE_SPREAD = 0.05
#: Micro-batches per step a pipeline of p stages needs for a small bubble: at least this times p.
MICRO_BATCHES_PER_STAGE = 4


def _schedule_args(ctx: Context) -> tuple[int, int, int, int, int]:
    """(micro-batches per step, virtual stages, global batch, micro-batch size, data-parallel size).

    From ``meta.distributed_args`` (Megatron / MindSpeed arguments recorded in
    profiler_metadata.json): micro-batches = global_batch_size / (micro_batch_size x
    data_parallel_size); 0 for what is not recorded (virtual stages: 1).
    """
    args = ctx.distributed_args
    if not args:
        return 0, 1, 0, 0, 0

    def get(*names: str) -> int:
        for n in names:
            v = args.get(n)
            if isinstance(v, (int, float)) and v > 0:
                return int(v)
        return 0

    gbs, mbs = get("global_batch_size"), get("micro_batch_size")
    dp = get("data_parallel_size", "dp_size")
    vpp = get("virtual_pipeline_model_parallel_size") or 1
    m = get("num_micro_batches") or (gbs // (mbs * dp) if gbs and mbs and dp else 0)
    return m, vpp, gbs, mbs, dp


def _schedule_bubble(ctx: Context, stages: list[list[int]]) -> RootCause | None:
    """A balanced pipeline's bubble: the schedule's fill and drain, not a slow stage.

    When every stage computes about the same (within ``BALANCED_STAGE_SPREAD`` of the mean) and
    even the stage with the least Bubble waits at least ``BUBBLE_MIN_SHARE`` of its step in it (a
    bottleneck stage barely waits; sends and receives may sit in different columns per stage),
    no stage is waited for: the idle is the pipeline's fill and drain, which
    only more micro-batches per step (or more virtual stages) shrink. With the schedule's
    arguments recorded (``meta.distributed_args``), the idle of a chunk schedule is
    (p - 1) / (v*m + p - 1) of the step (p stages, v virtual stages, m micro-batches), and the time
    per micro-batch at ``MICRO_BATCHES_PER_STAGE`` x p micro-batches follows from the same
    chunk time. Gain (estimate): the time the current step's micro-batches would save at that
    count; without the arguments, the mean Bubble (upper bound). ``None`` when the stages are
    not balanced or the Bubble is below ``BUBBLE_MIN_SHARE``.
    """
    per = ctx.per_rank
    comp = [float(per.loc[m, "computing_us"].mean()) for m in stages]
    step = [float(per.loc[m, "step_us"].mean()) for m in stages]
    bub = [float(per.loc[m, "bubble_us"].mean()) for m in stages]
    idle = [s - c for s, c in zip(step, comp, strict=True)]
    mean_c, mean_step = float(np.mean(comp)), float(np.mean(step))
    if mean_c <= 0 or mean_step <= 0:
        return None
    # the stages compute alike, and even the one that waits least waits a material share of
    # its step in Bubble: no stage is the bottleneck (a bottleneck stage barely waits)
    if (max(comp) - min(comp)) > BALANCED_STAGE_SPREAD * mean_c or min(
        share_of(b, s) for b, s in zip(bub, step, strict=True)
    ) < BUBBLE_MIN_SHARE:
        return None
    ranks = [r for m in stages for r in m]
    bubble = float(per.loc[ranks, "bubble_us"].mean())
    if share_of(bubble, mean_step) < BUBBLE_MIN_SHARE:
        return None
    p = len(stages)
    m, v, gbs, mbs, dp = _schedule_args(ctx)
    not_comp = share_of(float(np.mean(idle)), mean_step)
    head = (
        f"Every pipeline stage computes about the same ({ms(mean_c)} per step, within "
        f"{pct(share_of(max(comp) - min(comp), mean_c))}) and is not computing "
        f"{pct(not_comp)} of its step ({ms(bubble)} of it in Bubble): no stage holds the others "
        "back, on every rank the idle is the pipeline's fill and drain"
    )
    head_zh = (
        f"各流水线阶段的计算量几乎相同（每步 {ms(mean_c)}，相差不超过 "
        f"{pct(share_of(max(comp) - min(comp), mean_c))}），每个阶段都有 {pct(not_comp)} 的时间不在计算"
        f"（其中气泡 {ms(bubble)}）：没有哪个阶段拖慢其他阶段，每张卡的空闲都来自流水线的填充与排空"
    )
    metrics = {
        "bubble_us_mean": bubble,
        "bubble_share": share_of(bubble, mean_step),
        "not_computing_share": not_comp,
        "stage_computing_spread_share": share_of(max(comp) - min(comp), mean_c),
    }
    m2 = MICRO_BATCHES_PER_STAGE * p
    if m and m < m2:
        ideal = (p - 1) / (v * m + p - 1)
        chunk = mean_step / (v * m + p - 1)
        per_mb, per_mb2 = mean_step / m, chunk * (v * m2 + p - 1) / m2
        gain = (per_mb - per_mb2) * m
        cfg = (
            f" (global batch {gbs} / (micro-batch {mbs} x data-parallel {dp}))"
            if gbs and mbs and dp
            else ""
        )
        cfg_zh = (
            f"（全局批 {gbs} /（微批大小 {mbs} x 数据并行 {dp})）" if gbs and mbs and dp else ""
        )
        virt = f" and {v} virtual stages" if v > 1 else ""
        virt_zh = f"、{v} 个虚拟阶段" if v > 1 else ""
        en = (
            f"{head} — only {m} micro-batches per step{cfg} run through {p} stages{virt}, and the "
            f"schedule leaves every stage idle (p - 1) / (v*m + p - 1) = {pct(ideal)} of the "
            f"step (profiler_metadata.json distributed_args). With {m2} micro-batches per step "
            f"({MICRO_BATCHES_PER_STAGE} x the stages) a micro-batch would take about "
            f"{ms(per_mb2)} instead of {ms(per_mb)} ({pct(share_of(per_mb - per_mb2, per_mb))} "
            "less); faster send / receive or HCCL settings do not shrink this bubble."
        )
        zh = (
            f"{head_zh}——每步只有 {m} 个微批（micro-batch）{cfg_zh}，太少，要流过 {p} 个阶段{virt_zh}，调度使每个阶段"
            f"空闲 (p - 1) / (v*m + p - 1) = {pct(ideal)} 的步长（profiler_metadata.json 的 "
            f"distributed_args）。每步 {m2} 个微批（阶段数的 {MICRO_BATCHES_PER_STAGE} 倍）时，每个微批约需 "
            f"{ms(per_mb2)}，而不是 {ms(per_mb)}（少 {pct(share_of(per_mb - per_mb2, per_mb))}）；"
            "更快的收发或 HCCL 设置都缩小不了这种气泡。"
        )
        metrics |= {
            "micro_batches_per_step": float(m),
            "virtual_stages": float(v),
            "ideal_bubble_fraction": ideal,
            "time_per_micro_batch_us": per_mb,
            "time_per_micro_batch_us_more": per_mb2,
            "micro_batches_per_step_more": float(m2),
            "saving_share_per_micro_batch": share_of(per_mb - per_mb2, per_mb),
        }
        bound = BoundKind.ESTIMATE
        rem_en = (
            f"Run more micro-batches per step: at least {m2} ({MICRO_BATCHES_PER_STAGE} x the "
            f"{p} stages) by raising the global batch size or the gradient accumulation "
            "(Megatron / MindSpeed --global-batch-size), or more virtual stages "
            "(--num-layers-per-virtual-pipeline-stage), or fewer pipeline stages."
        )
        rem_zh = (
            f"每步使用更多的微批：至少 {m2} 个（{p} 个阶段的 {MICRO_BATCHES_PER_STAGE} 倍），即增大全局批或梯度"
            "累积（Megatron / MindSpeed 的 `--global-batch-size`），或增加虚拟阶段"
            "（`--num-layers-per-virtual-pipeline-stage`），或减少流水线阶段数。"
        )
    else:
        gain, bound = bubble, BoundKind.UPPER_BOUND
        en = (
            f"{head} — more micro-batches per step (a larger global batch or gradient "
            "accumulation) or more virtual stages shrink it; faster send / receive or HCCL "
            "settings do not."
        )
        zh = (
            f"{head_zh}——每步更多的微批（更大的全局批或梯度累积）或更多的虚拟阶段才能缩小它；"
            "更快的收发或 HCCL 设置都不能。"
        )
        rem_en = (
            "Run more micro-batches per step (a larger global batch or gradient accumulation), "
            "or more virtual stages (an interleaved schedule), or fewer pipeline stages."
        )
        rem_zh = "每步使用更多的微批（更大的全局批或梯度累积），或更多的虚拟阶段（交错式调度），或减少流水线阶段数。"
    findings = _claim(
        ctx, lambda f: f.id.startswith("cluster_breakdown.bottleneck.pipeline_bubble")
    )
    return RootCause(
        id="cause.pipeline_schedule",
        mechanism=Mechanism.PIPELINE_IMBALANCE,
        category=Category.COMMUNICATION,
        culprit=Culprit(
            kind="job",
            label="the pipeline schedule (every rank)",
            label_zh="流水线调度（每张卡）",
        ),
        victims=tuple(
            sorted(
                (
                    Impact(
                        r,
                        ctx.val(r, "bubble_us"),
                        share_of(ctx.val(r, "bubble_us"), ctx.val(r, "step_us")),
                        "bubble",
                    )
                    for r in ranks
                ),
                key=lambda i: (-i.lost_us, i.rank),
            )
        ),
        summary=en,
        summary_zh=zh,
        metrics=metrics | {"gain_us": gain},
        findings=findings,
        gain_us=gain,
        bound=bound,
        remedies=(Remedy("action", rem_en, rem_zh, gain, bound),),
        symptom_tags=("pipeline_bubble",),
        severity=_severity(bubble, mean_step),
    )


def stage_cause(ctx: Context, idx: int, cost_us: float, waits: dict[int, float]) -> RootCause:
    """PIPELINE_IMBALANCE from the wait attribution: a stage the other stages wait for.

    The collectives' (and send/receive pairs') wait attribution found stage ``idx`` late, costing
    the job ``cost_us`` per step; unlike :func:`rule_pipeline` this needs no Bubble column (the
    waiting shows in the other stages' sends, receives and collectives). Its own time (Computing
    + Free) is compared with the other stages' median, and its extra device time is decomposed
    against theirs (:func:`~advisor_chat.diagnosis.decompose.device_account`: extra operators,
    more launches, slower kernels) to pick the remedy.

    Args:
        ctx: Rule inputs.
        idx: Index of the late stage in ``ctx.stages``.
        cost_us: What it costs the job per step (µs, from the attribution).
        waits: ``{rank: µs per step}`` each other rank waits for it (attribution victims).

    Returns:
        The cause (estimate bound; gain = ``cost_us``).
    """
    from advisor_chat.diagnosis.decompose import device_account
    from advisor_chat.diagnosis.evidence import explain_device

    per = ctx.per_rank
    c_ranks = [r for r in ctx.stages[idx] if r in per.index]
    others = [r for r in per.index if r not in set(c_ranks)]
    comp_ex = float(
        per.loc[c_ranks, "computing_us"].mean() - per.loc[others, "computing_us"].median()
    )
    free_ex = float(per.loc[c_ranks, "free_us"].mean() - per.loc[others, "free_us"].median())
    cl, cl_zh = ranks_label(c_ranks)
    ol, ol_zh = ranks_label(others)
    label, label_zh = f"stage {idx} ({cl})", f"流水线阶段{idx}（{cl_zh}）"
    o_idx = [i for i in range(len(ctx.stages)) if i != idx]
    o_txt = ", ".join(str(i) for i in o_idx)
    host = free_ex > comp_ex
    ex = (
        None
        if host
        else explain_device(
            device_account(ctx.profile, [(-1, r) for r in c_ranks], others),
            label,
            label_zh,
            cost_us,
        )
    )
    victims = sorted(
        (
            Impact(r, v, share_of(v, ctx.val(r, "step_us")), "collective_wait")
            for r, v in waits.items()
            if r in per.index and v > 0
        ),
        key=lambda i: (-i.lost_us, i.rank),
    )
    wait_mean = float(np.mean([v.lost_us for v in victims])) if victims else 0.0
    what, what_zh = (
        (f"idles (Free) {ms(free_ex)} more per step", f"每步空闲（Free）多 {ms(free_ex)}")
        if host
        else (f"computes {ms(comp_ex)} more per step", f"每步计算多 {ms(comp_ex)}")
    )
    why = f", because {ex.clause}" if ex is not None else ""
    why_zh = f"，原因是{ex.clause_zh}" if ex is not None else ""
    remedies: list[Remedy] = []
    if host:
        remedies.append(
            Remedy(
                "action",
                f"Remove the host-side idle of stage {idx} (dispatch, synchronization, data "
                f"loading): stage {o_txt} waits for it.",
                f"消除阶段{idx}的主机侧空闲（下发、同步、数据加载）：阶段{o_txt}正在等它。",
                cost_us,
                BoundKind.ESTIMATE,
            )
        )
    else:
        remedies.append(
            Remedy(
                "action",
                f"Rebalance the pipeline partition: give stage {idx} less work (fewer layers, or "
                f"move the work it has beyond the others, e.g. the output layer and loss, to "
                f"stage {o_txt}) until its Computing matches theirs.",
                f"重新划分流水线：减少阶段{idx}的工作量（少分几层，或把它比其他阶段多出的计算，"
                f"例如输出层和 loss，移到阶段{o_txt}），直到各阶段的计算时间相当。",
                cost_us,
                BoundKind.ESTIMATE,
            )
        )
        if ex is not None and ex.kind != "extra_work":
            remedies.append(dataclasses.replace(ex.remedy, gain_us=cost_us))
    remedies.append(
        Remedy(
            "check",
            f"Compare stage {idx}'s operators with stage {o_txt}'s (operator types, counts and "
            "shapes per step) in kernel_details.csv to see which layers it holds beyond theirs.",
            f"在 kernel_details.csv 中比较阶段{idx}与阶段{o_txt}的算子（类型、每步次数、shape），"
            "找出它比其他阶段多承担的层。",
        )
    )
    findings = _claim(
        ctx,
        lambda f: (
            bool(f.ranks)
            and set(f.ranks) <= set(c_ranks)
            and f.kind.value in ("slow_rank", "load_imbalance", "bottleneck", "op_regression")
        ),
    )
    return RootCause(
        id=f"cause.pipeline_imbalance.stage_{idx}",
        mechanism=Mechanism.PIPELINE_IMBALANCE,
        category=Category.SCHEDULING if host else Category.COMPUTE,
        culprit=Culprit(
            kind="stage",
            ranks=tuple(c_ranks),
            stage=idx,
            label=label,
            label_zh=label_zh,
            operator=ex.operator if ex is not None else "",
            shape=ex.shape if ex is not None else "",
        ),
        victims=tuple(victims),
        summary=(
            f"Pipeline imbalance: stage {idx} ({cl}) {what} than stage {o_txt} ({ol}){why}; "
            f"{len(victims)} rank{'' if len(victims) == 1 else 's'} of stage {o_txt} wait {ms(wait_mean)} per step for it in "
            "their sends, receives and collectives"
        ),
        summary_zh=(
            f"流水线负载不均衡：阶段{idx}（{cl_zh}）{what_zh}（相对阶段{o_txt}，{ol_zh}）{why_zh}；"
            f"阶段{o_txt}的 {len(victims)} 张卡每步在发送、接收和集合通信中平均为它等待 {ms(wait_mean)}"
        ),
        metrics={
            "job_cost_us": cost_us,
            "computing_excess_us": comp_ex,
            "free_excess_us": free_ex,
            "victim_wait_us_mean": wait_mean,
            **(ex.metrics if ex is not None else {}),
        },
        findings=findings,
        gain_us=cost_us,
        bound=BoundKind.ESTIMATE,
        remedies=tuple(remedies),
        symptom_tags=("pipeline_bubble", *(ex.tags if ex is not None else ())),
        dominant="idle (Free)" if host else "compute-bound",
        dominant_zh="空闲（Free）" if host else "计算受限",
        severity=_severity(cost_us, ctx.step_us),
        own=tuple(
            Impact(
                r,
                max(ctx.val(r, "free_us" if host else "computing_us"), 0.0),
                share_of(ctx.val(r, "free_us" if host else "computing_us"), ctx.val(r, "step_us")),
                "stage_free" if host else "stage_computing",
            )
            for r in c_ranks
        ),
    )
