"""Group layout rule: some groups of one kind straddle nodes while their siblings fit in one.

Groups of one kind (``comm_groups`` ``group_name``: ``ep``, ``tp``, ``cp`` ...) run the same
collectives on the same sizes, so their collectives should take alike. When a group size does not
divide a node's cards (expert parallelism of 6 on 8-card nodes), consecutive blocks of ranks put
some groups across two nodes: part of their traffic goes over RDMA instead of HCCS, their
collectives take longer, and their ranks reach the next collective of the job late, where the other
ranks wait for them. The culprit is those groups' ranks together; the fix is the layout.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor_chat.analyzers._common import format_ranks
from advisor_chat.analyzers.base import Category
from advisor_chat.diagnosis.context import Context
from advisor_chat.diagnosis.rules.common import _severity, waiting_for
from advisor_chat.diagnosis.text import ms, pct, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Mechanism,
    Remedy,
    RootCause,
)

#: The straddling groups' collective takes at least this many times the others' (median Elapse).
STRADDLE_MIN_RATIO = 1.2
#: ... and the others wait for their ranks at least this share of the step (mean over victims).
STRADDLE_MIN_WAIT_SHARE = 0.05
#: Arguments of the framework that size a group kind (``distributed_args``), by kind.
_SIZE_ARGS = {
    "ep": "expert_model_parallel_size",
    "tp": "tensor_model_parallel_size",
    "cp": "context_parallel_size",
}


#: Point-to-point hand-offs are many small operations when each rank runs at least this many per
#: step in the groups that cross nodes.
P2P_MANY = 16


def _p2p_handoffs(
    ops: pd.DataFrame, straddling: list[tuple[int, ...]], across: list[str]
) -> tuple[float, float, float] | None:
    """Point-to-point hand-offs of the node-crossing groups, or ``None`` below :data:`P2P_MANY`.

    Returns (send / receive operations per (rank, step) in the node-crossing groups, median µs of
    one, µs per step the median of those ranks spends in all its sends / receives, inside a node
    too, less their Wait Time). Source: ``comm_ops`` (communication.json p2p).
    """
    ranks = {r for g in straddling for r in g}
    kind = ops["op_type"].astype(str).str.lower()
    p = ops[kind.isin(("send", "receive")) & ops["rank"].isin(ranks)]
    if p.empty or "step" not in p.columns:
        return None
    cross = p[p["group"].astype(str).isin(across)]
    if cross.empty:
        return None
    n = float(cross.groupby(["rank", "step"]).size().median())
    if n < P2P_MANY:
        return None
    one = 1000.0 * float(pd.to_numeric(cross["elapse_ms"], errors="coerce").median())
    # own time of an operation: its Elapse less the Wait Time for its peer (Transit + Idle)
    el = pd.to_numeric(p["elapse_ms"], errors="coerce").fillna(0.0)
    if "wait_ms" in p.columns:
        el = el - pd.to_numeric(p["wait_ms"], errors="coerce").fillna(0.0)
    own = 1000.0 * el.clip(lower=0.0)
    per_rank = own.groupby([p["rank"], p["step"]]).sum().groupby(level=0).mean()
    return n, one, float(per_rank.median())


def rule_groups_straddling_nodes(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Groups of one kind that span two nodes while the others fit in one: their ranks are late.

    Rule: a kind of ``comm_groups`` with ≥ 2 groups of at most a node's ranks each (nodes from
    :attr:`Context.nodes`), some spanning ≥ 2 nodes and some one; the straddling groups' most
    frequent collective takes ≥ ``STRADDLE_MIN_RATIO`` times as long as in the others (median
    ``comm_ops`` Elapse), with RDMA traffic in them (``comm_bandwidth`` Transit Size) and none in
    the others; the wait attribution finds the other ranks waiting for the straddling groups' ranks
    ≥ ``STRADDLE_MIN_WAIT_SHARE`` of the step. Culprit: those ranks (kind ``group``), mechanism
    ``slow_group``, category communication. Victims: the ranks the attribution finds waiting for
    them, lost = that wait. Gain (estimate): the largest such wait; for point-to-point hand-offs
    (send / receive, ≥ ``P2P_MANY`` per rank and step across nodes) an upper bound: at most the
    time per step those ranks spend in their sends / receives (median rank). The causes the attribution
    made of parts of them (a node, single ranks) are replaced by this one. Returns ``causes``
    with it, or unchanged.
    """
    nodes = ctx.nodes
    groups = ctx.profile.get("comm_groups")
    ops = ctx.profile.get("comm_ops")
    bw = ctx.profile.get("comm_bandwidth")
    att = ctx.attribution
    if (
        len(nodes) < 2
        or att is None
        or groups.empty
        or ops.empty
        or bw.empty
        or not {"group", "group_name", "ranks"} <= set(groups.columns)
        or not {"group", "transport", "transit_size_mb"} <= set(bw.columns)
    ):
        return causes
    node_of = {r: i for i, n in enumerate(nodes) for r in n}
    per_node = min(len(n) for n in nodes)
    g = groups.assign(group=groups["group"].astype(str)).drop_duplicates("group")
    found: (
        tuple[str, list[tuple[int, ...]], list[int], str, float, float, float, float, list[str]]
        | None
    )
    found = None
    for kind, rows in g.groupby(g["group_name"].astype(str)):
        members = {
            gid: tuple(sorted(int(r) for r in rs))
            for gid, rs in zip(rows["group"], rows["ranks"], strict=True)
            if rs is not None and 1 < len(rs) <= per_node
        }
        if len(members) < 2:
            continue
        across = {gid for gid, rs in members.items() if len({node_of.get(r, -1) for r in rs}) > 1}
        inside = set(members) - across
        if not across or not inside:
            continue
        mine = ops[ops["group"].astype(str).isin(members)]
        if mine.empty:
            continue
        op_type = str(mine["op_type"].astype(str).mode().iloc[0])
        el = pd.to_numeric(mine["elapse_ms"], errors="coerce") * 1000.0
        same = mine["op_type"].astype(str) == op_type
        slow = float(el[same & mine["group"].astype(str).isin(across)].median())
        fast = float(el[same & mine["group"].astype(str).isin(inside)].median())
        if not (np.isfinite(slow) and np.isfinite(fast)) or slow < STRADDLE_MIN_RATIO * fast:
            continue
        t = bw["transport"].astype(str).str.upper()
        size = pd.to_numeric(bw["transit_size_mb"], errors="coerce").fillna(0.0)
        in_g = bw["group"].astype(str)
        rdma_across = float(size[(t == "RDMA") & in_g.isin(across)].sum())
        rdma_inside = float(size[(t == "RDMA") & in_g.isin(inside)].sum())
        if rdma_across <= 0 or rdma_inside > 0:
            continue
        found = (
            str(kind),
            [members[x] for x in sorted(across, key=lambda x: members[x])],
            sorted({r for gid in across for r in members[gid]}),
            op_type,
            slow,
            fast,
            rdma_across,
            float(size[in_g.isin(across)].sum()),
            sorted(across),
        )
        break
    if found is None:
        return causes
    kind, straddling, ranks, op_type, slow, fast, rdma_mb, all_mb, across_ids = found
    n_ranks = len(straddling[0])
    late = set(ranks)
    victims = tuple(waiting_for(ctx, late))
    if (
        not victims
        or share_of(float(np.mean([v.lost_us for v in victims])), ctx.step_us)
        < STRADDLE_MIN_WAIT_SHARE
    ):
        return causes
    gain = max(v.lost_us for v in victims)
    wait_mean = float(np.mean([v.lost_us for v in victims]))
    coll = op_type.capitalize() if op_type.islower() else op_type
    coll = {"Alltoallv": "AlltoAllV", "Alltoall": "AlltoAll", "Allgather": "AllGather"}.get(
        coll, coll
    )
    which = ", ".join(f"{rs[0]}-{rs[-1]}" for rs in straddling)
    which_zh = "、".join(f"{rs[0]}-{rs[-1]}" for rs in straddling)
    arg = _SIZE_ARGS.get(kind.lower())
    recorded = ctx.distributed_args.get(arg) if arg else None
    setting = f" ({arg} {recorded})" if recorded else ""
    setting_zh = f"（{arg} 为 {recorded}）" if recorded else ""
    vr = format_ranks(sorted(v.rank for v in victims))
    rdma_share = share_of(rdma_mb, all_mb)
    label = f"the {kind} groups across nodes (ranks {format_ranks(ranks)})"
    label_zh = f"跨机的 {kind} 通信组（{format_ranks(ranks, sep='、')}号卡）"
    summary = (
        f"Slower {kind} groups (ranks {which}): each spans two nodes while the other {kind} groups "
        f"fit in one, because {n_ranks} ranks per group does not divide the {per_node} of a node"
        f"{setting}; {pct(rdma_share)} of their traffic goes over RDMA instead of HCCS, so their "
        f"{coll} takes {ms(slow)} against {ms(fast)} in the groups inside a node "
        f"({slow / fast:.2f}x); their ranks reach the job's next collective late and ranks {vr} "
        f"wait {ms(wait_mean)} per step for them (links and devices are normal: it is the layout)."
    )
    summary_zh = (
        f"{which_zh}号卡这几个 {kind} 通信组更慢：它们各自横跨两台机器，而其他 {kind} 通信组都在一台机器内，"
        f"因为每组 {n_ranks} 张卡不能整除每台机器的 {per_node} 张卡{setting_zh}；其 {pct(rdma_share)} 的流量"
        f"走 RDMA 而不是 HCCS，所以它们的 {coll} 每次 {ms(slow)}，机内的通信组为 {ms(fast)}"
        f"（{slow / fast:.2f} 倍）；这些卡晚到作业的下一次集合通信，{format_ranks(sorted(v.rank for v in victims), sep='、')}"
        f"号卡每步平均为它们等待 {ms(wait_mean)}（链路和设备都正常：问题在分组布局）。"
    )
    bound = BoundKind.ESTIMATE
    p2p = (
        _p2p_handoffs(ops, straddling, across_ids)
        if op_type.lower() in ("send", "receive")
        else None
    )
    if p2p is not None:
        # point-to-point hand-offs across nodes: many small operations, each paying RDMA latency
        n_ops, one, p2p_us = p2p
        # batching the hand-offs wins back at most the time these ranks spend in them, never more
        # than the others wait for them
        gain = min(gain, p2p_us)
        bound = BoundKind.UPPER_BOUND
        summary = (
            f"Slower pipeline hand-offs across nodes (ranks {which}): their sends / receives take "
            f"{ms(slow)} against {ms(fast)} between stages inside a node ({slow / fast:.2f}x, "
            f"{pct(rdma_share)} of their traffic over RDMA), and each of these ranks runs "
            f"{n_ops:.0f} of them per step ({ms(one)} each, median; communication.json p2p): the "
            "hand-offs go as many small operations, tensor by tensor, each paying the link's "
            f"latency; ranks {vr} wait {ms(wait_mean)} per step for them (the links' bandwidth is "
            "normal: it is the number of operations over the slower link)."
        )
        summary_zh = (
            f"跨机器的流水线交接（{which_zh}号卡）更慢：它们的 send / receive 每次 {ms(slow)}，同一台机器内的阶段之间为 "
            f"{ms(fast)}（{slow / fast:.2f} 倍，{pct(rdma_share)} 的流量走 RDMA），而且这些卡每步各有 "
            f"{n_ops:.0f} 次这样的操作（每次 {ms(one)}，中位数；communication.json 的 p2p）：交接被拆成许多"
            f"小操作逐个张量发送，每次都要付出链路时延；{format_ranks(sorted(v.rank for v in victims), sep='、')}"
            f"号卡每步平均为它们等待 {ms(wait_mean)}（链路带宽正常：问题在于跨慢链路的操作次数）。"
        )
        label = f"the pipeline hand-offs across nodes (ranks {format_ranks(ranks)})"
        label_zh = f"跨机器的流水线交接（{format_ranks(ranks, sep='、')}号卡）"
    remedy = (
        Remedy(
            "action",
            "Batch each pipeline hand-off into one exchange (batch_isend_irecv; Megatron / "
            "MindSpeed --batch-p2p-comm or --overlap-p2p-comm), send fixed shapes (no shape "
            "messages: --variable-seq-lengths off) and only the hidden states; or place the "
            "stage boundary so fewer hand-offs cross nodes.",
            "把每次流水线交接合并成一次交换（batch_isend_irecv；Megatron / MindSpeed 的 --batch-p2p-comm "
            "或 --overlap-p2p-comm），使用固定 shape（不再发送 shape 消息：关闭 --variable-seq-lengths），"
            "只发送 hidden states；或调整阶段划分，让更少的交接跨机。",
            gain,
            bound,
        )
        if p2p is not None
        else None
    ) or Remedy(
        "action",
        f"Lay every {kind} group inside one node: choose a size for the {kind} groups that "
        f"divides the {per_node} cards of a node{f' (now {arg} {recorded})' if recorded else ''}, or order the ranks so "
        f"each group of {n_ranks} sits in one node; then the {coll} runs over HCCS only.",
        f"让每个 {kind} 通信组都落在一台机器内：选一个能整除每台机器 {per_node} 张卡的 {kind} 大小"
        f"{setting_zh}，或调整卡的排列使每组 {n_ranks} 张卡在同一台机器上；这样 {coll} 只走 HCCS。",
        gain,
        BoundKind.ESTIMATE,
    )
    cause = RootCause(
        id=f"cause.group_layout.{kind}",
        mechanism=Mechanism.SLOW_GROUP,
        category=Category.COMMUNICATION,
        culprit=Culprit(
            kind="group", ranks=tuple(ranks), transport="RDMA", label=label, label_zh=label_zh
        ),
        victims=victims,
        summary=summary,
        summary_zh=summary_zh,
        metrics={
            "collective_us_straddling": slow,
            "collective_us_inside": fast,
            "collective_ratio": slow / fast,
            "rdma_share": rdma_share,
            "victim_wait_us_mean": wait_mean,
            "group_size": float(n_ranks),
            "node_ranks": float(per_node),
        },
        findings=(),
        gain_us=gain,
        bound=bound,
        remedies=(remedy,),
        symptom_tags=("group_across_nodes", "rdma_low_bandwidth"),
        severity=_severity(gain, ctx.step_us),
    )
    # the parts of these ranks other rules blamed on their own (a node, single late ranks)
    kept = [
        c
        for c in causes
        if not (
            c.culprit.kind in ("rank", "ranks", "group", "node", "stage")
            and set(c.culprit.ranks) <= late
        )
    ]
    return [*kept, cause]
