"""Attribution rule: culprits the collectives' wait attribution finds that no other rule named."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from advisor_chat.analyzers.base import Category, Severity
from advisor_chat.diagnosis.attribution import ranks_unit
from advisor_chat.diagnosis.context import Context, ranks_label
from advisor_chat.diagnosis.decompose import device_account, idle_before, slow_launch_calls
from advisor_chat.diagnosis.evidence import explain_device
from advisor_chat.diagnosis.rules.common import (
    EVENT_MIN_STEPS,
    MIN_RANKS,
    PERSISTENT_STEP_SHARE,
    STEADY_MIN_RATIO,
    STEADY_MIN_SHARE,
    STRAGGLER_MIN_SHARE,
    VICTIM_MIN_SHARE,
    host_evidence,
)
from advisor_chat.diagnosis.rules.pipeline import stage_cause
from advisor_chat.diagnosis.rules.stragglers import (
    _all_step_events,
    _events_cause,
    _group_cause,
    _rank_cause,
    _slow_groups,
    links_as_fast,
    node_cause,
    node_sizes_differ,
)
from advisor_chat.diagnosis.text import ms, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Impact,
    Mechanism,
    Remedy,
    RootCause,
)


def covered_ranks(ctx: Context, causes: list[RootCause]) -> set[int]:
    """Ranks a cause already names as its culprit (ranks, events, link ends, stage members)."""
    out: set[int] = set()
    for c in causes:
        out |= set(c.culprit.ranks) | {r for _, r in c.culprit.events}
        if c.culprit.link is not None:
            out |= set(c.culprit.link)
        if c.culprit.stage is not None and 0 <= c.culprit.stage < len(ctx.stages):
            out |= set(ctx.stages[c.culprit.stage])
    return out


def rule_attributed(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Attribution rule: culprits the wait attribution finds that no other rule named.

    Returns the causes to keep: ``causes`` without the rank causes a blamed unit contains
    (:func:`_units_over_ranks`), then the new ones.

    The collectives' wait attribution (:mod:`advisor_chat.diagnosis.attribution`) names the units
    (ranks, nodes, communication groups, stages) the others wait for, each with what it costs the
    job. A culprit costing ≥ ``STRAGGLER_MIN_SHARE`` of the median step per step whose ranks no
    cause names yet becomes a cause: a node / group / stage through the group decomposition, a
    rank late in ≥ ``PERSISTENT_STEP_SHARE`` of the steps through the rank decomposition, else its
    late steps as events. Source: ``comm_ops`` Wait Time; ``step_trace`` and ``kernels`` for the
    decomposition.
    """
    if len(ctx.ranks) < MIN_RANKS:  # no peer median to tell a late rank from a fast one
        return causes
    attr = ctx.attribution
    if attr is None or ctx.frame.empty or not math.isfinite(ctx.step_us):
        return causes
    n_steps = int(ctx.frame["step"].nunique())
    causes = _units_over_ranks(ctx, attr, causes)
    covered = covered_ranks(ctx, causes)
    out: list[RootCause] = []
    steps = sorted(int(s) for s in ctx.frame["step"].unique())
    rank_costs = [c.cost_us_per_step for c in attr.culprits if c.unit.kind == "rank"]
    # ranks late together (the same own-time excess): the arrival order splits the blame among
    # them, so they are judged on what they cost together
    late = {c.unit.ranks[0]: c.cost_us_per_step for c in attr.culprits if c.unit.kind == "rank"}
    clusters = [g for g in _slow_groups(ctx, set(late)) if len(set(g) & set(late)) >= 1]
    for cc in attr.culprits:
        alike = (
            next((g for g in clusters if cc.unit.ranks[0] in g), None)
            if cc.unit.kind == "rank"
            else None
        )
        cost = sum(late.get(r, 0.0) for r in alike) if alike else cc.cost_us_per_step
        if cost < _min_share(cc, steps) * ctx.step_us:
            continue
        if _jitter(cc, rank_costs, ctx.step_us):
            continue
        if set(cc.unit.ranks) & covered:
            continue
        if not set(cc.unit.ranks) <= set(ctx.ranks):
            # late at the collectives, but its own time is not in the step trace
            out.append(_late_arrival_cause(ctx, cc))
            covered |= set(cc.unit.ranks)
            continue
        if _inherited(ctx, cc):
            continue
        if alike is not None and not set(alike) & covered:
            # ranks whose own time exceeds their peers' by the same amount are late together:
            # the arrival order only decides which of them the others saw last
            unit = ranks_unit(alike, ctx.nodes)
            cause = _group_cause(
                ctx, alike, n_steps, (unit.kind, unit.name, unit.name_zh), cost_us=cost
            )
            cause = dataclasses.replace(
                cause,
                id=f"cause.slow_ranks.r{alike[0]}_{alike[-1]}",
                metrics={**cause.metrics, "job_cost_us": cost},
            )
            out.append(cause)
            covered |= set(alike)
            continue
        if cc.unit.kind == "rank":
            r = cc.unit.ranks[0]
            evs = _all_step_events(ctx, r)
            if n_steps < EVENT_MIN_STEPS or len(cc.steps_hit) >= PERSISTENT_STEP_SHARE * (
                ctx.rank_steps(r) or n_steps
            ):
                cause = _rank_cause(
                    ctx,
                    r,
                    evs,
                    ctx.rank_steps(r) or n_steps,
                    scoped=False,
                    late_cost_us=cc.cost_us_per_step,
                )
            else:
                hit = [e for e in evs if e.step in cc.steps_hit and e.excess_us > 0]
                if not hit:
                    continue
                cause = dataclasses.replace(
                    _events_cause(ctx, hit, n_steps), id=f"cause.step_events.r{r}"
                )
        elif (
            tuple(cc.unit.ranks) in {tuple(sorted(st)) for st in ctx.stages} and len(ctx.stages) > 1
        ):
            # a whole pipeline stage the other stages wait for: a pipeline imbalance, unless the
            # stages compute alike and all wait (the schedule's bubble): then the order in which
            # they reach their sends and receives is the schedule's, not a late stage
            if any(c.id == "cause.pipeline_schedule" for c in causes):
                continue
            idx = [tuple(sorted(st)) for st in ctx.stages].index(tuple(cc.unit.ranks))
            cause = stage_cause(ctx, idx, cc.cost_us_per_step, dict(cc.victims))
        else:
            if cc.unit.kind == "node" and _late_by_topology(ctx, list(cc.unit.ranks), cc):
                out.append(_topology_cause(ctx, cc))
                covered |= set(cc.unit.ranks)
                continue
            label, label_zh = cc.unit.name, cc.unit.name_zh or cc.unit.name
            cause = _group_cause(
                ctx,
                list(cc.unit.ranks),
                n_steps,
                (cc.unit.kind, label, label_zh),
                cost_us=cc.cost_us_per_step,
            )
            cause = dataclasses.replace(
                cause, id=f"cause.slow_{cc.unit.kind}.r{cc.unit.ranks[0]}_{cc.unit.ranks[-1]}"
            )
        cause = dataclasses.replace(
            cause, metrics={**cause.metrics, "job_cost_us": cc.cost_us_per_step}
        )
        out.append(cause)
        covered |= set(cc.unit.ranks)
    out += _rotating(ctx, attr, covered, n_steps, causes)
    return causes + out


def _late_by_topology(ctx: Context, node: list[int], cc: Any) -> bool:
    """Whether a node is late only because nodes differ in size (not a slower node).

    Nodes of different sizes move different amounts over their links in hierarchical collectives,
    so one node's transfers take longer at the same bandwidth. True when the job's nodes differ in
    size, every link touching the node runs at the others' bandwidth (``comm_matrix``), and the
    node's own Computing + Free exceed the other ranks' by less than half the cost the attribution
    gives it.
    """
    from advisor_chat.analyzers.slow_link import link_records

    if not node_sizes_differ(ctx, node):
        return False
    mx, _ = link_records(ctx.profile.get("comm_matrix"))
    if not links_as_fast(mx, node):
        return False
    per = ctx.per_rank
    others = [r for r in per.index if r not in node]
    if not others:
        return False
    own = per.loc[node, "computing_us"] + per.loc[node, "free_us"]
    rest = per.loc[others, "computing_us"] + per.loc[others, "free_us"]
    return float(own.mean() - rest.median()) < OWN_SHARE_OF_COST * float(cc.cost_us_per_step)


def _topology_cause(ctx: Context, cc: Any) -> RootCause:
    """A node late because the nodes differ in size: placement, not a slower node.

    Its cost and victims are the wait attribution's; its transit per step against the other
    ranks' (``comm_ops`` Transit Time) says why. The fix is the placement (nodes of one size).
    """
    from advisor_chat.diagnosis.rules.stragglers import transit_per_step

    node = list(cc.unit.ranks)
    label, label_zh = cc.unit.name, cc.unit.name_zh or cc.unit.name
    sizes = sorted({len(n) for n in ctx.nodes}, reverse=True)
    sizes_txt = " and ".join(str(x) for x in sizes)
    sizes_zh = "、".join(str(x) for x in sizes)
    tr = transit_per_step(ctx)
    others = [r for r in tr.index if r not in node]
    a = float(tr.reindex(node).mean()) if not tr.empty else float("nan")
    b = float(tr.reindex(others).median()) if others else float("nan")
    cost = float(cc.cost_us_per_step)
    victims = tuple(
        sorted(
            (
                Impact(
                    int(v),
                    float(x),
                    share_of(float(x), ctx.val(int(v), "step_us")),
                    "collective_wait",
                )
                for v, x in cc.victims.items()
                if x > 0 and share_of(float(x), ctx.val(int(v), "step_us")) >= VICTIM_MIN_SHARE
            ),
            key=lambda i: (-i.lost_us, i.rank),
        )
    )
    transit_en = (
        f" (transit {ms(a)} per step against {ms(b)} on the other ranks)"
        if math.isfinite(a) and math.isfinite(b)
        else ""
    )
    transit_zh = (
        f"（每步传输 {ms(a)}，其他卡为 {ms(b)}）" if math.isfinite(a) and math.isfinite(b) else ""
    )
    return RootCause(
        id=f"cause.node_placement.r{node[0]}_{node[-1]}",
        mechanism=Mechanism.SLOW_GROUP,
        category=Category.COMMUNICATION,
        culprit=Culprit(kind="group", ranks=tuple(node), label=label, label_zh=label_zh),
        victims=victims,
        summary=(
            f"{label[:1].upper() + label[1:]} is late by placement, not by a fault: the job's nodes "
            f"hold {sizes_txt} ranks, so its ranks move more data per collective{transit_en} over "
            f"links as fast as everyone's, and the other ranks wait {ms(cost)} per step for it."
        ),
        summary_zh=(
            f"{label_zh}晚到是放置方式造成的，不是故障：作业的各节点分别有 {sizes_zh} 张卡，"
            f"它的卡在每次集合通信中传输更多数据{transit_zh}，而链路带宽与其他卡一致；"
            f"其他卡每步为它等待 {ms(cost)}。"
        ),
        metrics={"transit_us_per_step": a, "transit_us_per_step_peer": b},
        findings=(),
        gain_us=cost,
        bound=BoundKind.ESTIMATE,
        remedies=(
            Remedy(
                "action",
                "Run on nodes of one size (a rank count that fills whole nodes), so that every "
                "node carries the same share of the cross-node traffic.",
                "使用相同卡数的节点（让卡数正好占满整数个节点），使每个节点承担相同份额的跨节点通信。",
                cost,
                BoundKind.ESTIMATE,
            ),
        ),
        symptom_tags=("comm_wait_high",),
        severity=Severity.LOW if cost < 0.05 * ctx.step_us else Severity.MEDIUM,
    )


#: A rank the collectives name is its own cause only when its own work (Computing + Free + its
#: transfers) exceeds its peers' by at least this share of what its lateness costs the job (a true
#: straggler's excess is about its cost; a group or stage is judged by its own decomposition).
OWN_SHARE_OF_COST = 0.5


def _inherited(ctx: Context, cc: Any) -> bool:
    """Whether a unit's late arrival is inherited, not caused by anything its ranks do.

    A rank's own work is its Computing + Free (``step_trace``) and its transfers (``comm_ops``
    Transit Time). A rank (or a node / group: the mean of its ranks) late at the collectives whose
    own work is not longer than its peers' by ``OWN_SHARE_OF_COST`` of the cost the attribution
    gives it arrives late because collectives it shares with everyone ended late on its side
    (e.g. every group's traffic crossing nodes alike, or a node with fewer ranks finishing its
    part of a collective later): blaming it would name a victim as a culprit. Means per step.
    """
    per = ctx.per_rank
    if cc.unit.kind == "stage" or per.empty or "own_us" not in per.columns:
        return False  # (a pipeline stage is judged by the stage decomposition)
    if cc.cost_us_per_step <= 0:
        return False
    own = per["own_us"].astype(float)
    ops = ctx.profile.get("comm_ops")
    n_steps = max(int(ctx.frame["step"].nunique()), 1)
    if not ops.empty and {"rank", "transit_ms"} <= set(ops.columns):
        transit = ops.groupby("rank")["transit_ms"].sum() * 1000.0 / n_steps
        own = own.add(transit.reindex(own.index).fillna(0.0))
    ranks = [r for r in cc.unit.ranks if r in own.index]
    peers = own.index.difference(ranks)
    if not ranks or len(peers) == 0:
        return False
    excess = float(own.loc[ranks].mean() - own.loc[peers].median())
    if excess >= OWN_SHARE_OF_COST * cc.cost_us_per_step:
        return False
    # its device idling before its own launches while a collective runs on its other stream is
    # Communication in the step trace, not Free: the compute stream's Wait Time before one
    # operator, against the peers' before the same operator, shows that idle (a host stall hidden
    # under communication)
    spot = idle_before(ctx.profile, ranks, list(peers), cc.cost_us_per_step)
    if spot is not None and spot.delta_us >= OWN_SHARE_OF_COST * cc.cost_us_per_step:
        return False
    # its host stuck inside launch calls its peers make in microseconds (the process losing its
    # CPU): its own time, though the stalls fall while its collectives run
    calls = slow_launch_calls(ctx.profile, ranks, list(peers))
    if calls is None:
        return True
    lost = calls.per_step * max(calls.median_us - calls.usual_us, 0.0)
    return lost < OWN_SHARE_OF_COST * cc.cost_us_per_step


#: A small rank culprit (below ``STRAGGLER_MIN_SHARE``) is jitter when another rank is blamed for
#: at least this share of its cost: the last arrivals are spread over the ranks, not one's.
JITTER_PEER_RATIO = 0.5


def _jitter(cc: Any, rank_costs: list[float], step_us: float) -> bool:
    """Whether a rank's small blame is arrival jitter shared with other ranks.

    A steady straggler costs the job what the others lose waiting for it and nobody else is
    blamed for much; when the blame is spread (another rank costs ≥ ``JITTER_PEER_RATIO`` of
    it) and the rank costs less than ``STRAGGLER_MIN_SHARE`` of the step, whoever arrives last
    changes with noise (transfer-time jitter in a communication-bound job).
    """
    if cc.unit.kind != "rank" or cc.cost_us_per_step >= STRAGGLER_MIN_SHARE * step_us:
        return False
    others = sorted(rank_costs, reverse=True)
    others.remove(cc.cost_us_per_step)
    return bool(others) and others[0] >= JITTER_PEER_RATIO * cc.cost_us_per_step


def _min_share(cc: Any, steps: list[int]) -> float:
    """The share of the median step a culprit must cost per step to become a cause.

    ``STRAGGLER_MIN_SHARE`` (5%, the analyzers' threshold), or ``STEADY_MIN_SHARE`` (2%) for a
    culprit late by a steady margin in every kept step (≥ ``EVENT_MIN_STEPS`` steps, each step's
    cost ≥ ``STEADY_MIN_RATIO`` of the largest): a small straggler that costs the job the same
    time in every step is real, and jitter does not do that.
    """
    costs = [cc.cost_us_by_step.get(s, 0.0) for s in steps]
    if (
        len(costs) >= EVENT_MIN_STEPS
        and max(costs) > 0
        and min(costs) >= STEADY_MIN_RATIO * max(costs)
    ):
        return STEADY_MIN_SHARE
    return STRAGGLER_MIN_SHARE


def _late_arrival_cause(ctx: Context, cc: Any) -> RootCause:
    """A culprit the collectives name whose own time the step trace does not hold.

    The others' Wait Time says they wait for it (so it is the one to look at). Without its
    Computing / Free, its kernels (``kernel_details.csv`` / DB TASK) are the evidence left: when
    they show it spends more device time than its peers in the same steps, by at least
    ``OWN_SHARE_OF_COST`` of what its lateness costs, and the decomposition
    (:func:`~advisor_chat.diagnosis.decompose.device_account`) says why, it is a compute straggler
    with that evidence; when its device time is about its peers', the lateness is not in its
    operators and the cause says so. Otherwise nothing tells a host stall from slower kernels: the
    cause says so and asks for the missing file instead of guessing a mechanism. Source:
    ``comm_ops`` Wait Time; ``kernels``; the ``missing_table`` load warning for the file.
    """
    ranks = list(cc.unit.ranks)
    who, who_zh = ranks_label(ranks)
    lost = sorted(cc.victims.items(), key=lambda kv: -kv[1])
    victims = tuple(
        Impact(int(r), float(v), share_of(float(v), ctx.step_us), "collective_wait")
        for r, v in lost
        if v > 0
    )
    vic, vic_zh = ranks_label([v.rank for v in victims]) if victims else ("", "")
    top = max((v.lost_us for v in victims), default=cc.cost_us_per_step)
    missing = [w for w in ctx.profile.warnings if set(w.ranks) & set(ranks) and w.path]
    where = missing[0].path if missing else "its step trace"
    copy = Remedy(
        "check",
        f"Copy {who}'s step trace ({where}) from the training machine and ask again: its "
        "Computing and Free tell a host stall from slower kernels.",
        f"从训练机器拷回{who_zh}的步骤耗时文件（{where}）后再问：其计算与空闲时间能区分"
        "主机下发慢与算子变慢。",
    )
    lead = (
        f"{who.capitalize()} arrives last at the collectives: {vic or 'the others'} wait up to "
        f"{ms(top)} per step for it (Wait Time in the collectives)"
    )
    lead_zh = f"{who_zh}在集合通信中最晚到达：{vic_zh or '其他卡'}每步最多等它 {ms(top)}（集合通信的等待时间）"
    no_trace = f"the profile has no step trace (Computing / Free) for {who}"
    no_trace_zh = f"数据中没有{who_zh}的步骤耗时（计算 / 空闲）"
    mech, cat = Mechanism.LATE_ARRIVAL, Category.UNKNOWN
    summary = f"{lead}; why it is late cannot be told, because {no_trace}"
    summary_zh = f"{lead_zh}；它为什么晚无法判断，因为{no_trace_zh}"
    remedies: tuple[Remedy, ...] = (copy,)
    metrics = {"job_cost_us": cc.cost_us_per_step, "victim_wait_us_per_step": top}
    tags: tuple[str, ...] = ()
    peers = [r for r in ctx.profile.ranks if r not in set(ranks)]
    acc = device_account(ctx.profile, [(-1, r) for r in ranks], peers)
    ex = explain_device(acc, who, who_zh, cc.cost_us_per_step)
    if (
        acc is not None
        and ex is not None
        and acc.delta_us >= OWN_SHARE_OF_COST * cc.cost_us_per_step
    ):
        mech, cat = Mechanism.COMPUTE_STRAGGLER, Category.COMPUTE
        extra = ms(acc.delta_us)
        if extra in ex.clause:  # the clause states the extra device time itself: said once
            summary = f"{lead}; {no_trace}, but its kernels show why: {ex.clause}"
            summary_zh = f"{lead_zh}；{no_trace_zh}，但它的算子数据说明了原因：{ex.clause_zh}"
        else:
            summary = (
                f"{lead}; {no_trace}, but its kernels show why: it spends {extra} more "
                f"device time per step than its peers, because {ex.clause}"
            )
            summary_zh = (
                f"{lead_zh}；{no_trace_zh}，但它的算子数据说明了原因：它每步的设备时间比其他卡多 "
                f"{extra}，因为{ex.clause_zh}"
            )
        remedies = (dataclasses.replace(ex.remedy, gain_us=cc.cost_us_per_step), copy)
        metrics = {**metrics, **ex.metrics}
        tags = ex.tags
    elif (
        acc is not None
        and abs(acc.delta_us) < OWN_SHARE_OF_COST * cc.cost_us_per_step
        and (host := host_evidence(ctx, ranks, peers))
    ):
        # its operators take its peers' time, and its host barely keeps ahead: a host stall
        mech, cat = Mechanism.HOST_STALL, Category.SCHEDULING
        summary = (
            f"{lead}; {no_trace}, but its kernels take {ms(acc.busy_us_culprit)} of device time "
            f"per step, about its peers' {ms(acc.busy_us_peer)}, and {host[0]}: the host is late"
        )
        summary_zh = (
            f"{lead_zh}；{no_trace_zh}，但它每步算子的设备时间为 {ms(acc.busy_us_culprit)}，与其他卡的 "
            f"{ms(acc.busy_us_peer)} 相当，且{host[1]}：是主机下发晚了"
        )
        metrics = {
            **metrics,
            **host[2],
            "device_us_culprit": acc.busy_us_culprit,
            "device_us_peer": acc.busy_us_peer,
        }
        remedies = (
            Remedy(
                "action",
                f"Find what {who}'s host does besides launching (a per-step synchronization, "
                "logging, data loading or CPU work in its training loop) and take it off the "
                "launch path; its host, not its device, is behind.",
                f"找出{who_zh}的主机在下发之外做了什么（每步同步、日志、数据加载或训练循环里的 CPU 计算），"
                "把它移出下发路径：落后的是它的主机，不是设备。",
                cc.cost_us_per_step,
                BoundKind.ESTIMATE,
            ),
            copy,
        )
        tags = ("host_bound", "slow_rank")
    elif acc is not None and abs(acc.delta_us) < OWN_SHARE_OF_COST * cc.cost_us_per_step:
        # its operators take about as long as its peers': the time it is late is not device work
        summary = (
            f"{lead}; its kernels take {ms(acc.busy_us_culprit)} of device time per step, about "
            f"its peers' {ms(acc.busy_us_peer)}: the lateness is not in its operators (a host "
            f"stall, input or a link is left), and {no_trace} to tell which"
        )
        summary_zh = (
            f"{lead_zh}；它每步算子的设备时间为 {ms(acc.busy_us_culprit)}，与其他卡的 "
            f"{ms(acc.busy_us_peer)} 相当：晚到不是算子造成的（剩下主机停顿、输入或链路），"
            f"而{no_trace_zh}，无法进一步区分"
        )
        metrics = {
            **metrics,
            "device_us_culprit": acc.busy_us_culprit,
            "device_us_peer": acc.busy_us_peer,
        }
    return RootCause(
        id=f"cause.late_arrival.r{ranks[0]}" + (f"_{ranks[-1]}" if len(ranks) > 1 else ""),
        mechanism=mech,
        category=cat,
        culprit=Culprit(
            kind="rank" if len(ranks) == 1 else "ranks",
            ranks=tuple(ranks),
            label=who,
            label_zh=who_zh,
        ),
        victims=victims,
        summary=summary,
        summary_zh=summary_zh,
        metrics=metrics,
        findings=(),
        gain_us=cc.cost_us_per_step,
        bound=BoundKind.ESTIMATE,
        remedies=remedies,
        symptom_tags=tags,
        severity=Severity.HIGH if share_of(top, ctx.step_us) >= 0.1 else Severity.MEDIUM,
    )


#: Rank-level mechanisms a unit culprit (node, group, stage) takes over.
_RANK_LEVEL = (Mechanism.HOST_STALL, Mechanism.COMPUTE_STRAGGLER, Mechanism.STEP_EVENTS)


def _units_over_ranks(ctx: Context, attr: Any, causes: list[RootCause]) -> list[RootCause]:
    """Rank causes inside a unit the attribution blames as a whole are dropped for the unit.

    The attribution names a node / group / stage only when its members arrive late together
    (no single member explains most of its cost), so a rule that named one member saw part of
    one fault: the unit's cause (added by :func:`rule_attributed`) replaces it.
    """
    units = [
        cc
        for cc in attr.culprits
        if cc.unit.kind != "rank"
        and cc.cost_us_per_step >= STRAGGLER_MIN_SHARE * ctx.step_us
        and set(cc.unit.ranks) <= set(ctx.ranks)
    ]
    if not units:
        return causes
    keep = []
    for c in causes:
        ranks = set(c.culprit.ranks) | {r for _, r in c.culprit.events}
        inside = any(ranks and ranks < set(u.unit.ranks) for u in units)
        # (ranks found late together already name the precise set inside the unit)
        if inside and c.mechanism in _RANK_LEVEL and c.culprit.kind != "ranks":
            ctx.claimed.difference_update(f.id for f in c.findings)  # the unit claims them
            continue
        keep.append(c)
    return keep


#: A rotating late rank costs at least this share of the median step in each step it is late.
ROTATING_MIN_STEP_SHARE = 0.02


def _rotating(
    ctx: Context, attr: Any, covered: set[int], n_steps: int, causes: list[RootCause]
) -> list[RootCause]:
    """Late ranks that change from step to step, each too small alone: one step-varying cause.

    Rank culprits of the attribution that no cause names, each late in fewer than
    ``PERSISTENT_STEP_SHARE`` of the steps, whose costs together reach ``STRAGGLER_MIN_SHARE`` of
    the median step per step: their (step, rank) pairs are decomposed together against the other
    ranks of the same steps (``_events_cause``), so the answer says what differs in those pairs
    (e.g. larger inputs: the work follows the data) instead of calling them stalls.
    """
    if n_steps < EVENT_MIN_STEPS or any(c.id.startswith("cause.step_events") for c in causes):
        return []
    # steps a job-wide cause already explains (every rank slow there): a late rank in them is
    # that cause, not an independent one
    job_steps = {s for c in causes if c.culprit.kind == "job" and c.steps for s in c.steps}
    small = [
        cc
        for cc in attr.culprits
        if cc.unit.kind == "rank"
        and not set(cc.unit.ranks) & covered
        and set(cc.unit.ranks) <= set(ctx.ranks)
        and len(cc.steps_hit) < PERSISTENT_STEP_SHARE * n_steps
        # late by a material amount in the steps it hits (not arrival jitter)
        and sum(cc.cost_us_by_step.values()) / max(len(cc.steps_hit), 1)
        >= ROTATING_MIN_STEP_SHARE * ctx.step_us
    ]
    total = sum(cc.cost_us_per_step for cc in small)
    if len({cc.unit.ranks[0] for cc in small}) < 2 or total < STRAGGLER_MIN_SHARE * ctx.step_us:
        return []
    events = []
    for cc in small:
        r = cc.unit.ranks[0]
        events += [
            e
            for e in _all_step_events(ctx, r)
            if e.step in cc.steps_hit and e.excess_us > 0 and e.step not in job_steps
        ]
    if not events:
        return []
    taken = {r for c in causes for r in c.culprit.ranks}
    node = node_cause(ctx, events, n_steps, taken)
    if node is not None:  # late ranks that take turns inside one node: the node
        return [dataclasses.replace(node, metrics={**node.metrics, "job_cost_us": total})]
    cause = _events_cause(ctx, events, n_steps)
    return [dataclasses.replace(cause, metrics={**cause.metrics, "job_cost_us": total})]
