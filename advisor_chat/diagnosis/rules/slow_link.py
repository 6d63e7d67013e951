"""Slow-link rule: transit excess on a degraded link is blamed on the link (one cause per physical link)."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd

from advisor_chat.analyzers._common import format_ranks
from advisor_chat.analyzers.base import Category, Finding, FindingKind
from advisor_chat.diagnosis.context import Context, ranks_label
from advisor_chat.diagnosis.decompose import transport_split
from advisor_chat.diagnosis.rules.common import VICTIM_MIN_SHARE, _claim, _severity, waiting_for
from advisor_chat.diagnosis.rules.network_steps import link_steps
from advisor_chat.diagnosis.text import ms, network_part, pct, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Impact,
    Mechanism,
    Remedy,
    RootCause,
)


def _wait_victims(ctx: Context, ranks: set[int], cost_us: float) -> list[Impact]:
    """The ranks that wait for a slow path in their collectives, in rank order.

    Each loses ``min(cost_us, its exposed communication)`` per step (Communication Not
    Overlapped, receive excluded: it cannot wait longer than it is exposed), kept when that is at
    least ``VICTIM_MIN_SHARE`` of its step. Ranks without a step-trace row are left out.
    """
    out = []
    for v in sorted(ranks):
        if v not in ctx.per_rank.index:
            continue
        lost = min(cost_us, ctx.val(v, "communication_not_overlapped_exclude_receive_us"))
        share = share_of(lost, ctx.val(v, "step_us"))
        if share >= VICTIM_MIN_SHARE:
            out.append(Impact(v, lost, share, "collective_wait"))
    return out


def _p2p_clause(ctx: Context, src: int, dst: int) -> tuple[str, str]:
    """A sentence (en, zh) on the point-to-point transfers a link of two ranks carries.

    From ``comm_ops`` (communication.json): the send and receive operators of ``src`` in a group
    both ends belong to, per step (median over steps) and their median duration. Empty when there
    are none.
    """
    ops = ctx.profile.get("comm_ops")
    if ops.empty or not {"comm_kind", "op_type", "group", "elapse_ms"} <= set(ops.columns):
        return "", ""
    p2p = ops[ops["comm_kind"].astype(str).eq("p2p")]
    shared = set(p2p.loc[p2p["rank"] == src, "group"]) & set(p2p.loc[p2p["rank"] == dst, "group"])
    mine = p2p[(p2p["rank"] == src) & p2p["group"].isin(shared)]
    if mine.empty:
        return "", ""
    kinds = mine["op_type"].astype(str).str.lower()
    per_step = mine.groupby([kinds, mine["step"]]).size().groupby(level=0).median()
    n_send, n_recv = float(per_step.get("send", 0)), float(per_step.get("receive", 0))
    each = float(pd.to_numeric(mine["elapse_ms"], errors="coerce").median()) * 1000.0
    en = (
        f"The link carries the pipeline's point-to-point transfers between them ({n_send:g} "
        f"hcom_send and {n_recv:g} hcom_receive per step on rank {src}, {ms(each)} each): ranks "
        f"{src} and {dst} wait in them (Bubble), reach their next collective late, and the others "
        "wait for them there."
    )
    zh = (
        f"这条链路承载两者之间流水线的点对点传输（{src}号卡每步 {n_send:g} 次 hcom_send、"
        f"{n_recv:g} 次 hcom_receive，每次 {ms(each)}）：{src}号卡和{dst}号卡在其中等待（Bubble），"
        "晚到下一次集合通信，其他卡在那里等它们。"
    )
    return en, zh


def rule_slow_link(ctx: Context) -> list[RootCause]:
    """Slow-link rule: transit excess on a degraded link is blamed on the link.

    Rule: every ``slow_link`` finding of kind ``slow_link`` (a link below 0.6× the median
    bandwidth of its transport, the slow_link analyzer's threshold). Culprit: the link
    (src, dst, transport); its endpoint ranks are "on the slow link" (``own`` = the transit excess,
    ``how="slow_link_transit"``). Victims: the other ranks of the communication group(s) the link
    belongs to, lost = min(transit excess per step, their exposed communication). Transit excess =
    link transit time − transit size / median bandwidth, per step (the finding's ``extra_us``).
    Source: ``comm_matrix`` (communication_matrix.json) and ``step_trace``.
    """
    out = []
    flaps: dict[str, tuple[str, str]] = {}
    # one collective type slow on a transport where another fills the same links at full speed:
    # its links are not slow (the slow-transport rule names the type's traffic pattern)
    split = transport_split(ctx.profile)
    for f in ctx.finding("slow_link.slow_link."):
        if f.kind is not FindingKind.SLOW_LINK:
            continue
        if split is not None and f.id.rsplit("_", 1)[-1].upper() == split.transport:
            continue
        if "src_rank" not in f.metrics and f.ranks:
            # a rank's bandwidth is low but no link table names the link (its own
            # communication_matrix.json is missing): the rank's links are the culprit
            out.append(_rank_links_cause(ctx, f))
            continue
        src, dst = (
            int(f.metrics.get("src_rank", f.ranks[0])),
            int(f.metrics.get("dst_rank", f.ranks[-1])),
        )
        transport = f.id.rsplit("_", 1)[-1].upper() if "_" in f.id else ""
        res = ctx.result("slow_link")
        group_ranks: set[int] = set()
        if res is not None and not res.table.empty:
            t = res.table
            row = t[(t["src_rank"] == src) & (t["dst_rank"] == dst) & t["slow"].astype(bool)]
            if not row.empty:
                transport = str(row["transport"].iloc[0])
                grp = str(row["group"].iloc[0])
                g = ctx.profile.get("comm_groups")
                if not g.empty:
                    hit = g[g["group"].astype(str) == grp]
                    for rs in hit["ranks"]:
                        if isinstance(rs, (list, tuple, np.ndarray)):
                            group_ranks.update(int(x) for x in rs)
        extra = float(f.metrics.get("extra_us", f.estimated_gain_us or 0.0))
        if group_ranks - {src, dst}:
            victims = _wait_victims(ctx, group_ranks - {src, dst}, extra)
        else:
            # a point-to-point pair (pipeline send/receive): nobody else is in its group; the
            # ranks that wait are those the collectives find waiting for its two ends
            victims = waiting_for(ctx, {src, dst}) or _wait_victims(
                ctx, (set(ctx.peers(src)) | set(ctx.peers(dst))) - {src, dst}, extra
            )
        own = tuple(
            Impact(r, extra, share_of(extra, ctx.val(r, "step_us")), "slow_link_transit")
            for r in (src, dst)
        )
        bw, med = (
            f.metrics.get("bandwidth_gbps", float("nan")),
            f.metrics.get("median_gbps", float("nan")),
        )
        label = f"link {src}→{dst} ({transport})"
        label_zh = f"链路 {src}→{dst}（{transport}）"
        claimed = _claim(
            ctx,
            lambda x, fid=f.id: (
                x.id == fid
                or x.id.startswith("slow_link.communication.wait_ratio")
                or x.id.startswith("communication.communication.wait_")
                or x.id.startswith("cluster_breakdown.communication.wait_spread")
            ),
        )
        flap = _intermittent(ctx, src, dst, transport)
        # what the link carries when it is a point-to-point pair (pipeline send/receive)
        p2p = ("", "") if group_ranks - {src, dst} else _p2p_clause(ctx, src, dst)
        tail = (
            " ".join(x for x in ((flap[0] if flap else ""), p2p[0]) if x),
            (flap[1] if flap else "") + p2p[1],
        )
        if any(tail):
            flaps[f"cause.slow_link.{src}_{dst}_{transport.lower()}"] = tail
        out.append(
            RootCause(
                id=f"cause.slow_link.{src}_{dst}_{transport.lower()}",
                mechanism=Mechanism.SLOW_LINK,
                category=Category.COMMUNICATION,
                culprit=Culprit(
                    kind="link",
                    ranks=tuple(sorted({src, dst})),
                    link=(src, dst),
                    transport=transport,
                    label=label,
                    label_zh=label_zh,
                ),
                victims=tuple(victims),
                summary=(
                    f"Slow link: {transport} link {src}→{dst} runs at {bw:.1f} GB/s against a "
                    f"median of {med:.1f} GB/s for {transport}; the extra transit time costs "
                    f"{ms(extra)} per step, and every rank of its collectives waits for it "
                    f"(ranks {src} and {dst} sit on the slow link; their own Computing and Free are normal)."
                    + (" " + tail[0] if tail[0] else "")
                ),
                summary_zh=(
                    f"慢链路：{transport} 链路 {src}→{dst} 带宽只有 {bw:.1f} GB/s，同类链路中位数为 "
                    f"{med:.1f} GB/s；多出的传输时间每步 {ms(extra)}，同一集合通信中的所有卡都在等它"
                    f"（{src}号卡和{dst}号卡位于这条慢链路上，其自身计算与空闲时间正常）。"
                    + tail[1]
                ),
                metrics={
                    "bandwidth_gbps": float(bw),
                    "median_gbps": float(med),
                    "transit_excess_us": extra,
                    **(flap[2] if flap else {}),
                },
                steps=tuple(flap[3]) if flap else (),
                findings=claimed,
                gain_us=extra,
                bound=BoundKind.ESTIMATE,
                remedies=(
                    Remedy(
                        "action",
                        f"Repair the {transport} path between ranks {src} and {dst} "
                        f"({_PARTS[network_part(transport)][0]}) so it runs at its peers' bandwidth.",
                        f"修复{src}号卡与{dst}号卡之间的 {transport} 通路（{_PARTS[network_part(transport)][1]}），"
                        "使其达到同类链路的带宽。",
                        extra,
                        BoundKind.ESTIMATE,
                    ),
                    Remedy(
                        "check",
                        (
                            "Run hccn_tool link, optical"
                            if network_part(transport) == "network"
                            else "Run npu-smi HCCS link (npu-smi info -t hccs)"
                        )
                        + f" and statistics checks on the devices of ranks {src} and {dst}"
                        + (
                            " (link up/down history and error counters: it is slow only in some "
                            "steps)"
                            if flap
                            else ""
                        )
                        + ", and an HCCL test between them.",
                        f"在{src}号卡和{dst}号卡所在设备上"
                        + (
                            "用 hccn_tool 检查链路、光模块"
                            if network_part(transport) == "network"
                            else "用 npu-smi 检查 HCCS 链路（npu-smi info -t hccs）"
                        )
                        + "和统计信息"
                        + ("（链路 up/down 历史与错误计数：它只在部分步变慢）" if flap else "")
                        + "，并在两者之间跑一次 HCCL 测试。",
                    ),
                ),
                symptom_tags=(
                    "slow_link",
                    "rdma_low_bandwidth" if transport.upper() == "RDMA" else "hccs_low_bandwidth",
                ),
                severity=_severity(extra, ctx.step_us),
                own=own,
            )
        )
    merged = _one_cause_per_link(out, flaps)
    return _one_cause_per_link_set(ctx, _one_cause_per_rank_links(ctx, merged))


#: Slow links that share one rank are that rank's fault (its NPU's port, NIC or board slot) when
#: they are at least this many pairs ...
RANK_LINKS_MIN = 3
#: ... and at least this share of that rank's links of the transport (the link table's pairs).
RANK_LINKS_SHARE = 0.8


def _one_cause_per_rank_links(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Slow links that all touch one rank are one cause: that rank's side of its links.

    A degraded HCCS port or NIC slows every link of one NPU, to every peer, in both directions:
    each link alone is a slow-link cause, but the fault is one, on the rank they share. Rule: per
    transport, a rank in at least ``RANK_LINKS_MIN`` slow pairs that are at least
    ``RANK_LINKS_SHARE`` of its pairs in the link table (``slow_link`` table) becomes one cause
    (culprit kind ``link`` on that rank, no single link), replacing those pairs' causes. Cost: the
    rank's transit time in its collectives against its peers' median (``comm_ops`` Transit Time
    per step), when it is larger than the costliest link's transit excess (links of one
    collective transfer at the same time: never their sum).
    """
    links = [c for c in causes if c.culprit.link is not None and c.mechanism is Mechanism.SLOW_LINK]
    res = ctx.result("slow_link")
    if len(links) < RANK_LINKS_MIN or res is None or res.table.empty:
        return causes
    t = res.table
    pairs_of: dict[tuple[str, int], set[tuple[int, int]]] = defaultdict(set)
    for a, b, tr in zip(t["src_rank"], t["dst_rank"], t["transport"].astype(str), strict=True):
        if int(a) != int(b):
            pr = (min(int(a), int(b)), max(int(a), int(b)))
            pairs_of[(tr, int(a))].add(pr)
            pairs_of[(tr, int(b))].add(pr)
    slow_of: dict[tuple[str, int], list[RootCause]] = defaultdict(list)
    for c in links:
        for r in c.culprit.link:  # type: ignore[union-attr]
            slow_of[(c.culprit.transport, r)].append(c)
    drop: set[int] = set()
    merged: dict[int, RootCause] = {}
    # the rank with the most slow links first (its peers' own slow pair is the same link)
    for (tr, r), members in sorted(slow_of.items(), key=lambda kv: -len(kv[1])):
        members = [c for c in members if id(c) not in drop and id(c) not in merged]
        n_all = len(pairs_of.get((tr, r), ()))
        if len(members) < RANK_LINKS_MIN or len(members) < RANK_LINKS_SHARE * n_all:
            continue
        members.sort(key=lambda c: -(c.gain_us or 0.0))
        merged[id(members[0])] = _rank_side_cause(ctx, r, tr, members, n_all)
        drop.update(id(c) for c in members[1:])
    if not merged:
        return causes
    return [merged.get(id(c), c) for c in causes if id(c) not in drop]


def _bandwidths(members: list[RootCause]) -> list[float]:
    """Every direction's bandwidth (GB/s) of the link causes ``members`` (both directions merged)."""
    return [float(c.metrics["bandwidth_gbps"]) for c in members] + [
        float(c.metrics["bandwidth_gbps_reverse"])
        for c in members
        if "bandwidth_gbps_reverse" in c.metrics
    ]


def _rank_transit_excess(ctx: Context, rank: int) -> tuple[float, float, float] | None:
    """``rank``'s transit time in its collectives against its peers' median, per step.

    ``comm_ops`` Transit Time summed per (rank, step), averaged over steps; peers are the ranks of
    its node when the data shows nodes, else its pipeline stage or the job. Returns (excess µs per
    step, the rank's ms per step, the peers' median ms per step), or ``None`` without the data.
    """
    c = ctx.profile.get("comm_ops")
    if c.empty or "transit_ms" not in c.columns:
        return None
    per = c.groupby(["rank", "step"])["transit_ms"].sum().groupby(level=0).mean()
    # the peers on its node when the data shows nodes (the same mix of on- and off-node links)
    node = next((n for n in ctx.nodes if rank in n and len(n) > 2), None)
    pool = list(node) if node is not None else ctx.peers(rank)
    peers = [p for p in pool if p != rank and p in per.index]
    if rank not in per.index or not peers:
        return None
    own, med = float(per[rank]), float(per[peers].median())
    return (own - med) * 1000.0, own * 1000.0, med * 1000.0


def _rank_side_cause(
    ctx: Context, rank: int, transport: str, members: list[RootCause], n_all: int
) -> RootCause:
    """The one cause of ``rank``'s slow ``transport`` links (``members``, costliest first)."""
    top = members[0]
    bws = _bandwidths(members)
    med = float(top.metrics["median_gbps"])
    extra = float(top.gain_us or 0.0)
    cmp = _rank_transit_excess(ctx, rank)
    measured = cmp is not None and cmp[0] > extra
    if measured:
        extra = cmp[0]  # type: ignore[index]
    n = len(members)
    both = all("bandwidth_gbps_reverse" in c.metrics for c in members)
    dirs = " in both directions" if both else ""
    dirs_zh = "（两个方向都慢）" if both else ""
    part = _PARTS_RANK[network_part(transport)]
    victims = _wait_victims(ctx, set(ctx.peers(rank)) - {rank}, extra)
    cost = (
        f"its transfers take {ms(cmp[1])} per step in its collectives against {ms(cmp[2])} on "  # type: ignore[index]
        f"its peers, {ms(extra)} more"
        if measured
        else f"the extra transit time costs {ms(extra)} per step (its links transfer at the same "
        "time: counted once)"
    )
    cost_zh = (
        f"它在集合通信中的传输时间每步 {ms(cmp[1])}，其他卡中位数为 {ms(cmp[2])}，多 {ms(extra)}"  # type: ignore[index]
        if measured
        else f"多出的传输时间每步 {ms(extra)}（它的各条链路同时传输，只计一次）"
    )
    return dataclasses.replace(
        top,
        id=f"cause.slow_link.rank{rank}_{transport.lower()}",
        culprit=Culprit(
            kind="link",
            ranks=(rank,),
            link=None,
            transport=transport,
            label=f"rank {rank}'s {transport} links",
            label_zh=f"{rank}号卡的 {transport} 链路",
        ),
        victims=tuple(sorted(victims, key=lambda i: (-i.lost_us, i.rank))),
        summary=(
            f"Slow {transport} links at rank {rank}: {n} of its {n_all} {transport} links are slow"
            f"{dirs} ({min(bws):.1f}-{max(bws):.1f} GB/s against a median of {med:.1f} GB/s for "
            f"{transport}) while the links among its peers are not, so the fault is on rank "
            f"{rank}'s side ({part[0]}); {cost}, and every rank of its collectives waits for it "
            f"(rank {rank}'s own Computing and Free are normal)."
        ),
        summary_zh=(
            f"{rank}号卡的 {transport} 链路慢：它的 {n_all} 条 {transport} 链路中有 {n} 条慢{dirs_zh}"
            f"（{min(bws):.1f}-{max(bws):.1f} GB/s，同类链路中位数为 {med:.1f} GB/s），而其他卡之间的"
            f"链路正常，故障在{rank}号卡这一侧（{part[1]}）；{cost_zh}，同一集合通信中的所有卡都在等它"
            f"（{rank}号卡自身的计算与空闲时间正常）。"
        ),
        metrics={
            "bandwidth_gbps": min(bws),
            "bandwidth_gbps_max": max(bws),
            "median_gbps": med,
            "transit_excess_us": extra,
            "links_count": float(n),
            "rank_links_count": float(n_all),
        },
        findings=tuple({f.id: f for c in members for f in c.findings}.values()),
        gain_us=extra,
        bound=BoundKind.ESTIMATE,
        remedies=(
            Remedy(
                "action",
                f"Repair rank {rank}'s side of its {transport} links ({part[0]}): every one of "
                "its links is slow while its peers' links to each other are not"
                + (
                    "; check it with npu-smi / hccn_tool and the server's hardware log, then "
                    "reseat or replace that NPU module."
                    if network_part(transport) == "board"
                    else "; check its port's error counters and optics, then replace the part."
                ),
                f"修复{rank}号卡一侧的 {transport} 链路（{part[1]}）：它的每条链路都慢，而其他卡之间的链路正常"
                + (
                    "；用 npu-smi / hccn_tool 和服务器硬件日志检查，必要时重新插拔或更换该 NPU 模组。"
                    if network_part(transport) == "board"
                    else "；检查其端口错误计数和光模块，再更换故障部件。"
                ),
                extra,
                BoundKind.ESTIMATE,
            ),
            Remedy(
                "check",
                f"Run hccn_tool link and statistics checks on rank {rank}'s device and an HCCL "
                f"test between it and one peer, then between two other peers, and compare.",
                f"在{rank}号卡的设备上用 hccn_tool 检查链路和统计信息，并分别在它与一张其他卡之间、"
                "另两张卡之间各跑一次 HCCL 测试，比较带宽。",
            ),
        ),
        severity=_severity(extra, ctx.step_us),
        own=(Impact(rank, extra, share_of(extra, ctx.val(rank, "step_us")), "slow_link_transit"),),
    )


#: Slow links among k ranks are one fault of those ranks' interconnect when at least this share of
#: the k (k - 1) / 2 pairs among them is slow (a mesh segment, not a chain of separate links).
LINK_SET_SHARE = 0.8
#: ... and they are at least this many ranks (two ranks are one link).
LINK_SET_MIN_RANKS = 3


def _one_cause_per_link_set(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Slow links that connect most pairs of a set of ranks are one cause: that set's interconnect.

    One degraded HCCS mesh (a board, the NPUs of one tensor-parallel group) slows every link among
    its NPUs: each link alone is a slow-link cause, but the fault is one. Rule: per transport, the
    connected components of the slow links (both directions already merged); a component of at
    least ``LINK_SET_MIN_RANKS`` ranks whose slow pairs are at least ``LINK_SET_SHARE`` of its
    pairs that carry traffic (``comm_matrix``; all k (k - 1) / 2 pairs of a mesh, the hops of a
    ring) becomes one cause whose culprit is those ranks (named as the communication group whose
    ranks they are, when one is). Its cost is the largest of its links' transit excess (the links
    of one collective transfer at the same time), never their sum. Other links stay as they are.
    """
    links = [c for c in causes if c.culprit.link is not None and c.mechanism is Mechanism.SLOW_LINK]
    if len(links) < LINK_SET_MIN_RANKS:
        return causes
    parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(x: tuple[str, int]) -> tuple[str, int]:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for c in links:
        a, b = c.culprit.link  # type: ignore[misc]
        t = c.culprit.transport
        parent[find((t, a))] = find((t, b))
    comps: dict[tuple[str, int], list[RootCause]] = defaultdict(list)
    for c in links:
        comps[find((c.culprit.transport, c.culprit.link[0]))].append(c)  # type: ignore[index]
    merged: dict[int, RootCause] = {}
    drop: set[int] = set()
    used = _used_pairs(ctx)
    for members in comps.values():
        ranks = sorted({r for c in members for r in c.culprit.ranks})
        k = len(ranks)
        pairs = {tuple(sorted(c.culprit.link)) for c in members}  # type: ignore[arg-type]
        # the pairs among them that carry traffic of this transport at all (a ring's neighbours,
        # not every pair of a mesh): a ring whose every hop is slow is one fault too
        t = members[0].culprit.transport
        carried = {p for p in used.get(t, set()) if p[0] in ranks and p[1] in ranks} or pairs
        if k < LINK_SET_MIN_RANKS or len(pairs) < LINK_SET_SHARE * min(
            k * (k - 1) / 2, len(carried | pairs)
        ):
            continue
        members.sort(key=lambda c: -(c.gain_us or 0.0))
        merged[id(members[0])] = _link_set_cause(ctx, members, ranks, len(carried | pairs))
        drop.update(id(c) for c in members[1:])
    return [merged.get(id(c), c) for c in causes if id(c) not in drop]


def _used_pairs(ctx: Context) -> dict[str, set[tuple[int, int]]]:
    """Per transport, the rank pairs (sorted) with any transfer in ``comm_matrix``."""
    m = ctx.profile.get("comm_matrix")
    if m.empty or not {"src_rank", "dst_rank", "transport"} <= set(m.columns):
        return {}
    sub = m[["src_rank", "dst_rank", "transport"]].dropna()
    a = sub["src_rank"].astype(int).to_numpy()
    b = sub["dst_rank"].astype(int).to_numpy()
    keep = a != b
    lo, hi = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
    tr = sub["transport"].astype(str).to_numpy()[keep]
    out: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for t, x, y in set(zip(tr, lo.tolist(), hi.tolist(), strict=True)):
        out[t].add((x, y))
    return out


def _group_excess(ctx: Context, group: str, name: str) -> tuple[float, float, float] | None:
    """A group's time in its own collectives against the other groups of its kind.

    ``comm_ops`` Elapse Time summed per (rank, step) in each group, averaged per group; the
    groups of the same ``group_name`` (e.g. every ``tp`` group) are its peers. Returns (excess µs
    per step, the group's ms per step, the peers' median ms per step), or ``None`` without peers.
    """
    if not name:
        return None
    c = ctx.profile.get("comm_ops")
    g = ctx.profile.get("comm_groups")
    if c.empty or g.empty or "group_name" not in g.columns or "elapse_ms" not in c.columns:
        return None
    kin = set(g.loc[g["group_name"].astype(str) == name, "group"].astype(str))
    if group not in kin or len(kin) < 2:
        return None
    cc = c[c["group"].astype(str).isin(kin)]
    per = cc.groupby([cc["group"].astype(str), "rank", "step"])["elapse_ms"].sum()
    by_group = per.groupby(level=0).mean()
    if group not in by_group.index or len(by_group) < 2:
        return None
    own = float(by_group[group])
    peer = float(by_group.drop(group).median())
    return (own - peer) * 1000.0, own * 1000.0, peer * 1000.0


def _rail(ctx: Context, ranks: list[int]) -> int | None:
    """The position every one of ``ranks`` holds in its node, when they are one per node.

    Ranks on different nodes (``ctx.nodes``, from the on-node links) that are each the same
    device of their node (its index among the node's ranks) share one rail of the network: the
    NICs of that device and the switch port they share. ``None`` otherwise.
    """
    where = {r: (i, sorted(n).index(r)) for i, n in enumerate(ctx.nodes) for r in n}
    if len(ranks) < 2 or not all(r in where for r in ranks):
        return None
    nodes = {where[r][0] for r in ranks}
    pos = {where[r][1] for r in ranks}
    return next(iter(pos)) if len(nodes) == len(ranks) and len(pos) == 1 else None


def _link_set_cause(
    ctx: Context, members: list[RootCause], ranks: list[int], n_links: int = 0
) -> RootCause:
    """The one cause of the slow links among ``ranks`` (``members``: their causes, costliest first).

    ``n_links``: the pairs among them that carry traffic (0: every pair).
    """
    top = members[0]
    t = top.culprit.transport
    k = len(ranks)
    bws = _bandwidths(members)
    med = float(top.metrics["median_gbps"])
    extra = float(top.gain_us or 0.0)
    rl = format_ranks(ranks)
    # the communication group these ranks make up, when one does (a tensor-parallel group)
    grp, grp_zh, gid, gname = "", "", "", ""
    g = ctx.profile.get("comm_groups")
    if not g.empty and {"group", "ranks"} <= set(g.columns):
        for _, row in g.iterrows():
            rs = row["ranks"]
            if isinstance(rs, (list, tuple, np.ndarray)) and sorted(int(x) for x in rs) == ranks:
                name = str(row.get("group_name") or "").strip()
                gid, gname = str(row["group"]), name
                grp = f"{name} group {row['group']}" if name else f"group {row['group']}"
                grp_zh = f"{name} 通信域 {row['group']}" if name else f"通信域 {row['group']}"
                break
    # measured on the collectives: the group's time in its own collectives against the groups of
    # the same kind (the other tensor-parallel groups), per rank and step
    cmp = _group_excess(ctx, gid, gname) if gid else None
    if cmp is not None and cmp[0] > extra:
        extra = cmp[0]
    who = f"ranks {rl}" + (f" ({grp})" if grp else "")
    who_zh = f"{rl}号卡" + (f"（{grp_zh}）" if grp_zh else "")
    short = f" ({gname} group)" if gname else ""
    short_zh = f"（{gname} 通信域）" if gname else ""
    # the other ranks wait for the set's collectives, up to their own exposed communication
    victims = _wait_victims(ctx, set(ctx.ranks) - set(ranks), extra)
    n_pairs = len({tuple(sorted(c.culprit.link)) for c in members})  # type: ignore[arg-type]
    n_all = n_links or k * (k - 1) // 2
    part = _PARTS[network_part(t)]
    rail = _rail(ctx, ranks) if network_part(t) == "network" else None
    rail_en = rail_zh = ""
    if rail is not None:
        rail_en = (
            f"; they are device {rail} of every node they span, so they share one rail of the "
            "network (the NICs of that device and their switch port)"
        )
        rail_zh = f"；它们都是各自节点上的第 {rail} 号设备，共用网络中的同一条轨道（该设备的网卡及其交换机端口）"
    return dataclasses.replace(
        top,
        id=f"cause.slow_link.set_{ranks[0]}_{ranks[-1]}_{t.lower()}",
        culprit=Culprit(
            kind="group",
            ranks=tuple(ranks),
            transport=t,
            label=f"the {t} links among ranks {rl}{short}",
            label_zh=f"{rl}号卡之间的 {t} 链路{short_zh}",
        ),
        victims=tuple(sorted(victims, key=lambda i: (-i.lost_us, i.rank))),
        summary=(
            f"Slow {t} links among {who}: {n_pairs} of the {n_all} links these {k} ranks use "
            f"between them are slow ({min(bws):.1f}-{max(bws):.1f} GB/s against a median of "
            f"{med:.1f} GB/s for {t}), so the interconnect of the group as a whole is degraded"
            f"{rail_en}; "
            + (
                f"its collectives take {ms(cmp[1])} per step against {ms(cmp[2])} in the other "
                f"{gname} groups, {ms(extra)} more per step"
                if cmp is not None and extra == cmp[0]
                else f"their collectives take the extra transit time, {ms(extra)} per step (the "
                "links transfer at the same time: counted once)"
            )
            + ", and the other ranks wait for it at their next collective with these ranks; "
            "their own Computing and Free are normal."
        ),
        summary_zh=(
            f"{who_zh}之间的 {t} 链路慢：这 {k} 张卡之间使用的 {n_all} 条链路中有 {n_pairs} 条慢"
            f"（{min(bws):.1f}-{max(bws):.1f} GB/s，同类链路中位数为 {med:.1f} GB/s），是这一组卡的互联"
            f"整体变慢{rail_zh}；"
            + (
                f"它的集合通信每步耗时 {ms(cmp[1])}，其他 {gname} 通信域为 {ms(cmp[2])}，每步多 {ms(extra)}"
                if cmp is not None and extra == cmp[0]
                else f"它们的集合通信因此多出传输时间，每步 {ms(extra)}（这些链路同时传输，只计一次）"
            )
            + "，其他卡在下一个与这些卡一起的集合通信中等待；它们自身的计算与空闲时间正常。"
        ),
        metrics={
            "bandwidth_gbps": min(bws),
            "bandwidth_gbps_max": max(bws),
            "median_gbps": med,
            "transit_excess_us": extra,
            "links_count": float(n_pairs),
            "ranks_count": float(k),
        },
        findings=tuple({f.id: f for c in members for f in c.findings}.values()),
        gain_us=extra,
        remedies=(
            Remedy(
                "action",
                f"Check the rail of device {rail} (ranks {rl}): the switch or switch ports those "
                "NICs connect to and the NICs themselves (hccn_tool link status, speed and error "
                "counters on each node, the switch's port counters); the other rails and the "
                "links inside the servers are at speed.",
                f"检查第 {rail} 号设备所在的网络轨道（{rl}号卡）：这些网卡所连的交换机或交换机端口以及网卡本身"
                "（各节点上用 hccn_tool 查看链路状态、速率和错误计数，以及交换机端口计数）；其他轨道和机内链路都正常。",
                extra,
                BoundKind.ESTIMATE,
            )
            if rail is not None
            else Remedy(
                "action",
                f"Repair the {t} interconnect shared by ranks {rl} ({part[0]}): every link among "
                "them is slow while the other ranks' links are not, so check what these NPUs have "
                "in common (the same board or module, their HCCS ports, a link set to a lower "
                "speed) with npu-smi / hccn_tool and the server's hardware log.",
                f"修复{rl}号卡共用的 {t} 互联（{part[1]}）：它们之间的所有链路都慢而其他卡正常，"
                "请用 npu-smi / hccn_tool 和服务器硬件日志检查这些 NPU 的共同点（同一块板卡或模组、"
                "其 HCCS 端口、被降速的链路）。",
                extra,
                BoundKind.ESTIMATE,
            ),
            Remedy(
                "check",
                f"Run an HCCL test among ranks {rl} and one among another group's ranks, and "
                "compare their bandwidth.",
                f"在{rl}号卡之间和另一组卡之间各跑一次 HCCL 测试，比较带宽。",
            ),
        ),
        own=tuple(
            Impact(r, extra, share_of(extra, ctx.val(r, "step_us")), "slow_link_transit")
            for r in ranks
        ),
    )


def _intermittent(
    ctx: Context, src: int, dst: int, transport: str
) -> tuple[str, str, dict[str, float], list[int]] | None:
    """The clause for a link slow in some steps only (``None`` when it is slow throughout)."""
    got = link_steps(ctx, src, dst, transport)
    if got is None:
        return None
    steps, bw_slow, bw_fine = got
    st = ", ".join(str(x) for x in steps)
    en = (
        f"It is slow in step{'s' if len(steps) > 1 else ''} {st} only ({bw_slow:.1f} GB/s there, "
        f"{bw_fine:.1f} GB/s in the other steps): an intermittent fault (a flapping port or optical "
        "module, retransmissions), not a link that is slow by construction."
    )
    zh = (
        f"它只在第 {st} 步变慢（这些步 {bw_slow:.1f} GB/s，其他步 {bw_fine:.1f} GB/s）：是间歇性故障"
        "（端口或光模块时断时续、重传），而不是一条一直慢的链路。"
    )
    return (
        en,
        zh,
        {"bandwidth_gbps_slow_steps": bw_slow, "bandwidth_gbps_other_steps": bw_fine},
        steps,
    )


#: What a path of each kind is made of, to repair (English, Chinese): RDMA crosses nodes over
#: NICs, optics and switches; HCCS / SIO / PCIe stay on the server board between NPUs.
_PARTS = {
    "network": ("NIC, optical module, cable or switch port", "网卡、光模块、线缆或交换机端口"),
    "board": (
        "the on-board link between the two NPUs: check it with npu-smi / hccn_tool and the "
        "server's hardware log, then reseat or replace the NPU module or board",
        "两张 NPU 之间的板内链路：用 npu-smi / hccn_tool 和服务器硬件日志检查，必要时重新插拔或更换 NPU 模组或主板",
    ),
}


#: What sits on one rank's side of all its links (English, Chinese).
_PARTS_RANK = {
    "network": (
        "its NIC, optical module, cable or switch port",
        "其网卡、光模块、线缆或交换机端口",
    ),
    "board": ("its NPU's HCCS port or its seat on the board", "其 NPU 的 HCCS 端口或在板上的插槽"),
}


def _rank_links_cause(ctx: Context, f: Finding) -> RootCause:
    """A rank whose bandwidth on one transport is low while no link table names the slow link.

    From the slow_link analyzer's per-rank finding (``comm_bandwidth``: Σ size / Σ time per rank
    and transport, below 0.6× the other ranks' median). Culprit: that rank's links of the
    transport (kind ``link`` without ``link``: which one is not in the data). Victims: the other
    ranks of its collectives, lost = min(transit excess per step, their exposed communication).
    """
    rk = int(f.ranks[0])
    transport = f.id.rsplit("_", 1)[-1].upper() if "_" in f.id else ""
    extra = float(f.metrics.get("extra_us", f.estimated_gain_us or 0.0))
    bw = float(f.metrics.get("bandwidth_gbps", float("nan")))
    med = float(f.metrics.get("median_gbps", float("nan")))
    victims = _wait_victims(ctx, set(ctx.peers(rk)) - {rk}, extra)
    has_matrix = ctx.profile.has("comm_matrix")
    why = (
        f"the link table (communication_matrix.json) has no links of rank {rk}"
        if has_matrix
        else "the profile has no link table (communication_matrix.json)"
    )
    why_zh = (
        f"链路表（communication_matrix.json）中没有{rk}号卡的链路"
        if has_matrix
        else "这份数据没有链路表（communication_matrix.json）"
    )
    claimed = _claim(
        ctx,
        lambda x: (
            x.id == f.id
            or x.id.startswith("slow_link.communication.wait_ratio")
            or x.id.startswith("communication.communication.wait_")
            or x.id.startswith("cluster_breakdown.communication.wait_spread")
        ),
    )
    return RootCause(
        id=f"cause.slow_link.rank{rk}_{transport.lower()}",
        mechanism=Mechanism.SLOW_LINK,
        category=Category.COMMUNICATION,
        culprit=Culprit(
            kind="link",
            ranks=(rk,),
            link=None,
            transport=transport,
            label=f"one of rank {rk}'s {transport} links",
            label_zh=f"{rk}号卡的某条 {transport} 链路",
        ),
        victims=tuple(victims),
        summary=(
            f"Slow link at rank {rk}: its {transport} transfers run at {bw:.1f} GB/s against a "
            f"median of {med:.1f} GB/s for the other ranks; the extra transit time costs "
            f"{ms(extra)} per step, and every rank of its collectives waits for it. Which of its "
            f"{transport} links is slow cannot be told: {why}."
        ),
        summary_zh=(
            f"{rk}号卡上有慢链路：它的 {transport} 传输带宽只有 {bw:.1f} GB/s，其他卡中位数为 "
            f"{med:.1f} GB/s；多出的传输时间每步 {ms(extra)}，同一集合通信中的所有卡都在等它。"
            f"无法判断是它的哪条 {transport} 链路：{why_zh}。"
        ),
        metrics={"bandwidth_gbps": bw, "median_gbps": med, "transit_excess_us": extra},
        findings=claimed,
        gain_us=extra,
        bound=BoundKind.ESTIMATE,
        remedies=(
            Remedy(
                "check",
                f"Find the slow {transport} link of rank {rk}: hccn_tool link, optical and "
                f"statistics checks on its device, and an HCCL test between it and each peer; "
                f"or profile again with its communication_matrix.json, which names the link.",
                f"找出{rk}号卡那条慢的 {transport} 链路：在其设备上用 hccn_tool 检查链路、光模块和"
                f"统计信息，并与各对端分别跑 HCCL 测试；或重新采集并保留它的 communication_matrix.json"
                "（其中有每条链路）。",
            ),
        ),
        symptom_tags=(
            "slow_link",
            "rdma_low_bandwidth" if transport == "RDMA" else "hccs_low_bandwidth",
        ),
        severity=_severity(extra, ctx.step_us),
        own=(Impact(rk, extra, share_of(extra, ctx.val(rk, "step_us")), "slow_link_transit"),),
    )


def _one_cause_per_link(
    causes: list[RootCause], flaps: dict[str, tuple[str, str]] | None = None
) -> list[RootCause]:
    """Both directions of one physical link are one cause, its cost counted once.

    The two directions of a link carry their transfers at the same time within a collective, so
    the job loses the larger of the two directions' transit excess, not their sum. The merged
    cause keeps the slower direction's numbers and names both bandwidths (and, from ``flaps``,
    ``{cause id: (en, zh)}``, the slower direction's intermittent-fault clause).
    """
    flaps = flaps or {}
    by_link: dict[tuple[int, int, str], list[RootCause]] = defaultdict(list)
    for c in causes:
        if c.culprit.link is None:  # a rank's links (no link named): never merged
            by_link[(c.culprit.ranks[0], -1 - len(by_link), c.culprit.transport)].append(c)
            continue
        a, b = c.culprit.link
        by_link[(min(a, b), max(a, b), c.culprit.transport)].append(c)
    out = []
    for (a, b, t), cs in by_link.items():
        if len(cs) == 1:
            out.append(cs[0])
            continue
        cs.sort(key=lambda c: -(c.gain_us or 0.0))
        top, other = cs[0], cs[1]
        bw1, bw2 = top.metrics["bandwidth_gbps"], other.metrics["bandwidth_gbps"]
        med = top.metrics["median_gbps"]
        extra = top.gain_us or 0.0
        victims = {v.rank: v for c in cs for v in c.victims}
        summary = (
            f"Slow link: {t} link {a}↔{b} is slow in both directions ({bw1:.1f} and {bw2:.1f} GB/s "
            f"against a median of {med:.1f} GB/s for {t}); the extra transit time costs "
            f"{ms(extra)} per step, counted once because both directions transfer at the same "
            f"time, and every rank of its collectives waits for it (ranks {a} and {b} sit on the "
            "slow link; their own Computing and Free are normal)."
        ) + (" " + flaps[top.id][0] if top.id in flaps else "")
        summary_zh = (
            f"慢链路：{t} 链路 {a}↔{b} 两个方向都慢（{bw1:.1f} 和 {bw2:.1f} GB/s，同类链路中位数为 "
            f"{med:.1f} GB/s）；多出的传输时间每步 {ms(extra)}（两个方向同时传输，只计一次），"
            f"同一集合通信中的所有卡都在等它（{a}号卡和{b}号卡位于这条慢链路上，其自身计算与空闲时间正常）。"
        ) + (flaps[top.id][1] if top.id in flaps else "")
        out.append(
            dataclasses.replace(
                top,
                id=f"cause.slow_link.{a}_{b}_{t.lower()}",
                culprit=dataclasses.replace(
                    top.culprit, label=f"link {a}↔{b} ({t})", label_zh=f"链路 {a}↔{b}（{t}）"
                ),
                victims=tuple(sorted(victims.values(), key=lambda i: (-i.lost_us, i.rank))),
                summary=summary,
                summary_zh=summary_zh,
                metrics={**top.metrics, "bandwidth_gbps_reverse": float(bw2), "directions": 2.0},
                findings=(*top.findings, *other.findings),
            )
        )
    return out


#: A node's links of one transport are degraded when their median bandwidth is below this
#: fraction of the median of the links that do not touch it ...
NODE_LINK_RATIO = 0.6
#: ... and at least this share of them is below that line (its NIC / ports, not one cable).
NODE_LINK_SHARE = 0.8


def rule_slow_node_links(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Slow node links: every link of one transport into and out of one node is degraded.

    The slow_link analyzer compares each link with the median of its transport, which fails
    when most links of a transport touch the degraded node (with 3 nodes in a ring, 2 of 3 RDMA
    links do). Rule: nodes from on-node links (:func:`~advisor_chat.diagnosis.attribution.nodes`);
    for each node and transport, the median bandwidth of its links (either end on the node) is
    below ``NODE_LINK_RATIO`` of the median of the links that do not touch it, and at least
    ``NODE_LINK_SHARE`` of its links are below that line. One cause per node and transport
    (culprit: the node's ranks); the link, rank-side and link-set causes of that transport whose
    links all lie on the node fold into it (one physical fault, one cause). Cost: the largest
    per-step transit excess of its links at the other links' median bandwidth (the links of one
    collective transfer at the same time); for the on-board transports (HCCS, PCIE, SIO) at least
    the node's ranks' transit time per step over the other ranks' (their collectives wait for
    every link of the node). Victims: every other rank, up to its exposed communication. Source:
    ``comm_matrix`` via the slow_link analyzer's link table, ``comm_ops`` transit times.
    Returns ``causes`` with the folded causes replaced by the node's.
    """
    res = ctx.result("slow_link")
    if res is None or res.table.empty or "transport" not in res.table.columns:
        return causes
    groups = ctx.nodes
    if len(groups) < 3:  # with two nodes every inter-node link touches both
        return causes
    from advisor_chat.diagnosis.rules.stragglers import transit_per_step

    causes = list(causes)
    blamed = {c.culprit.link for c in causes if c.culprit.link is not None}
    t = res.table
    node_of = {r: i for i, members in enumerate(groups) for r in members}
    n_steps = max(int(ctx.frame["step"].nunique()) if not ctx.frame.empty else 1, 1)
    out: list[RootCause] = []
    for transport, lk in t.groupby("transport"):
        ns = lk["src_rank"].map(node_of).fillna(-1).to_numpy(dtype=np.int64)
        nd = lk["dst_rank"].map(node_of).fillna(-1).to_numpy(dtype=np.int64)
        bw_all = lk["bandwidth_gbps"].to_numpy(dtype=float)
        for i, members in enumerate(groups):
            touch = (ns == i) | (nd == i)
            if touch.sum() < 2 or (~touch).sum() < 1:
                continue
            ref = float(np.median(bw_all[~touch]))
            bw = float(np.median(bw_all[touch]))
            if not bw < NODE_LINK_RATIO * ref:
                continue
            mine = lk[touch]
            low = mine["bandwidth_gbps"] < NODE_LINK_RATIO * ref
            if low.mean() < NODE_LINK_SHARE:
                continue
            mem = set(members)
            if {
                (int(a), int(b)) for a, b in zip(mine["src_rank"], mine["dst_rank"], strict=True)
            } <= blamed:
                continue
            excess = (mine["transit_time_ms"] - mine["transit_size_mb"] / ref).clip(lower=0.0)
            cost = float(excess.max()) * 1000.0 / n_steps
            label = f"node {i} (ranks {members[0]}-{members[-1]})"
            label_zh = f"节点 {i}（{members[0]}-{members[-1]}号卡）"
            tr = str(transport)
            onboard = tr.upper() in ON_BOARD
            tps = transit_per_step(ctx)
            if onboard and not tps.empty and mem <= set(tps.index):
                others = [r for r in tps.index if r not in mem]
                if others:
                    cost = max(cost, float(tps.reindex(members).mean() - tps[others].median()))
            # the same links blamed one by one (a link, a rank's side, a set of its ranks)
            folded = [
                c
                for c in causes
                if c.mechanism is Mechanism.SLOW_LINK
                and c.culprit.transport.upper() == tr.upper()
                and (set(c.culprit.ranks) | set(c.culprit.link or ())) <= mem
            ]
            causes = [c for c in causes if c not in folded]
            victims = _wait_victims(ctx, set(ctx.ranks) - mem, cost)
            where_en, where_zh, fix_en, fix_zh = (
                (
                    "the fault is inside the node, on the links among its NPUs (the width or "
                    "speed they trained at: firmware, the board)",
                    "故障在该节点内部、其 NPU 之间的链路上（链路协商的宽度或速率：固件、主板）",
                    f"Check {label}'s {tr} links: `npu-smi info -t hccs` on each of its devices "
                    "(link width and speed) and its firmware against the other nodes'; roll the "
                    "firmware back or re-seat / replace the board, and keep jobs off the node "
                    "until its links run at the others' bandwidth.",
                    f"检查{label_zh}的 {tr} 链路：在其每个设备上执行 `npu-smi info -t hccs`（链路宽度与速率），"
                    "并与其他节点对比固件版本；回退固件或重新插拔 / 更换主板，在其链路带宽恢复到与其他节点一致前"
                    "不要把作业调度到该节点。",
                )
                if onboard
                else (
                    "the fault is on the node's network side (NIC, ports, optics) that all of them "
                    "share",
                    "故障在这些链路共用的该节点网络侧（网卡、端口、光模块）",
                    f"Repair the {tr} side of {label}: every one of its {tr} links is slow "
                    "while the other nodes' are not, so check that host's NICs, their "
                    "ports, optical modules and switch ports (hccn_tool -i <dev> -link / "
                    "-optical / -stat on each of its devices) and its RoCE settings.",
                    f"修复{label_zh}的 {tr} 侧：其所有 {tr} 链路都慢而其他节点正常，请检查该主机的网卡、"
                    "端口、光模块和交换机端口（在其每个设备上执行 hccn_tool -i <dev> -link / -optical / "
                    "-stat）以及 RoCE 配置。",
                )
            )
            other_links = "inside the other nodes" if onboard else "between the other nodes"
            other_links_zh = "其他节点内部" if onboard else "其他节点之间"
            out.append(
                RootCause(
                    id=f"cause.slow_link.node{i}_{tr.lower()}",
                    mechanism=Mechanism.SLOW_LINK,
                    category=Category.COMMUNICATION,
                    culprit=Culprit(
                        kind="group" if onboard else "ranks",
                        ranks=tuple(members),
                        transport=tr,
                        label=f"{tr} links of {label}",
                        label_zh=f"{label_zh}的 {tr} 链路",
                    ),
                    victims=tuple(victims),
                    summary=(
                        f"Slow {tr} links of {label}: its {len(mine)} {tr} links (in and out) run "
                        f"at a median {bw:.1f} GB/s against {ref:.1f} GB/s for the {tr} links "
                        f"{other_links} ({int(low.sum())} of {len(mine)} below "
                        f"{NODE_LINK_RATIO:g}x): {where_en}; the extra transit time costs "
                        f"{ms(cost)} per step and "
                        "every rank of its collectives waits for it."
                    ),
                    summary_zh=(
                        f"{label_zh}的 {tr} 链路慢：其 {len(mine)} 条 {tr} 链路（进出）带宽中位数 "
                        f"{bw:.1f} GB/s，{other_links_zh}的 {tr} 链路为 {ref:.1f} GB/s（{int(low.sum())}/"
                        f"{len(mine)} 条低于 {NODE_LINK_RATIO:g} 倍）：{where_zh}"
                        f"；多出的传输时间每步 {ms(cost)}，同一集合通信中的所有卡都在等它。"
                    ),
                    metrics={
                        "bandwidth_gbps": bw,
                        "median_gbps": ref,
                        "links_count": float(len(mine)),
                        "slow_links_count": float(low.sum()),
                        "transit_excess_us": cost,
                    },
                    findings=_claim(
                        ctx,
                        lambda x: (
                            x.id.startswith("slow_link.communication.wait_ratio")
                            or x.id.startswith("communication.communication.wait_")
                        ),
                    ),
                    gain_us=cost,
                    bound=BoundKind.ESTIMATE,
                    remedies=(Remedy("action", fix_en, fix_zh, cost, BoundKind.ESTIMATE),),
                    symptom_tags=(
                        "slow_link",
                        "rdma_low_bandwidth" if tr.upper() == "RDMA" else "hccs_low_bandwidth",
                    ),
                    severity=_severity(cost, ctx.step_us),
                )
            )
    return causes + out


def rule_cross_host_group_links(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Slow links between two groups of hosts (racks, leaf switches): one cause for them all.

    Groups of nodes come from the hostnames in the rank folders' names
    (:func:`~advisor_chat.diagnosis.attribution.host_groups`: ``gz-r07-*`` / ``gz-r08-*``). For
    each off-board transport, the links between nodes of different groups are compared with the
    links between nodes of one group: when the crossing links' median bandwidth is below
    ``NODE_LINK_RATIO`` of the others' and ``NODE_LINK_SHARE`` of them are below that line, what
    the nodes share is what is slow, the path between the groups (a switch uplink), and the
    per-link and per-node send causes on those links fold into one cause. Culprit: the crossing
    links' senders. Cost: what the collectives lose to those senders arriving last, per rank,
    the largest rank's (:meth:`~advisor_chat.diagnosis.attribution.WaitAttribution.loss_by_rank`;
    without wait data the largest transit excess at the in-group bandwidth). Victims: the other
    ranks, each what its collectives lose to them. Source: ``comm_matrix`` via the slow_link
    analyzer's link table, ``comm_ops`` Wait Time, ``meta.source_dir`` (folder names).
    Returns ``causes`` with the folded causes replaced.
    """
    res = ctx.result("slow_link")
    groups = ctx.host_groups
    if res is None or res.table.empty or len(groups) < 2:
        return causes
    t = res.table
    if not {"src_rank", "dst_rank", "transport", "bandwidth_gbps"} <= set(t.columns):
        return causes
    group_of = {r: i for i, g in enumerate(groups) for r in g.ranks}
    node_of = {r: i for i, members in enumerate(ctx.nodes) for r in members}
    n_steps = max(int(ctx.frame["step"].nunique()) if not ctx.frame.empty else 1, 1)
    out = list(causes)
    for transport, lk in t.groupby("transport"):
        tr = str(transport)
        if tr.upper() in ON_BOARD:
            continue
        gs = lk["src_rank"].map(group_of).fillna(-1).to_numpy(dtype=np.int64)
        gd = lk["dst_rank"].map(group_of).fillna(-1).to_numpy(dtype=np.int64)
        ns = lk["src_rank"].map(node_of).fillna(-1).to_numpy(dtype=np.int64)
        nd = lk["dst_rank"].map(node_of).fillna(-1).to_numpy(dtype=np.int64)
        known = (gs >= 0) & (gd >= 0) & (ns >= 0) & (nd >= 0) & (ns != nd)
        cross, inside = known & (gs != gd), known & (gs == gd)
        if cross.sum() < 2 or inside.sum() < 2:
            continue
        bw_all = lk["bandwidth_gbps"].to_numpy(dtype=float)
        ref, bw = float(np.median(bw_all[inside])), float(np.median(bw_all[cross]))
        low = bw_all[cross] < NODE_LINK_RATIO * ref
        if not (bw < NODE_LINK_RATIO * ref and low.mean() >= NODE_LINK_SHARE):
            continue
        src = lk["src_rank"].to_numpy()[cross].astype(int)
        dst = lk["dst_rank"].to_numpy()[cross].astype(int)
        links = set(zip(src.tolist(), dst.tolist(), strict=True))
        # a link may have a row per communication group: count links, not rows
        n = len(links)
        n_low = len(links - set(zip(src[~low].tolist(), dst[~low].tolist(), strict=True)))
        senders = sorted(set(src.tolist()))
        ends = set(senders) | set(dst.tolist())
        hg = [groups[i] for i in sorted(set(gs[cross].tolist()) | set(gd[cross].tolist()))]
        pair = " and ".join(g.name for g in hg)
        pair_zh = " 与 ".join(g.name for g in hg)
        hosts = "; ".join(f"{g.name}: {', '.join(g.hosts)}" for g in hg)
        folded = [
            c
            for c in out
            if c.mechanism is Mechanism.SLOW_LINK
            and c.culprit.transport.upper() == tr.upper()
            and (
                c.culprit.link in links
                if c.culprit.link is not None
                else bool(c.culprit.ranks) and set(c.culprit.ranks) <= ends
            )
        ]
        att = ctx.attribution
        lost = att.loss_by_rank(set(senders)) if att is not None else {}
        if lost:
            cost = max(lost.values())
        else:
            sub = lk[cross]
            excess = (sub["transit_time_ms"] - sub["transit_size_mb"] / ref).clip(lower=0.0)
            cost = float(excess.max()) * 1000.0 / n_steps if len(sub) else 0.0
        if cost <= 0:
            continue
        if lost:
            victims = []
            for v in sorted(set(ctx.ranks) - set(senders)):
                x = min(
                    lost.get(v, 0.0), ctx.val(v, "communication_not_overlapped_exclude_receive_us")
                )
                sh = share_of(x, ctx.val(v, "step_us"))
                if v in ctx.per_rank.index and sh >= VICTIM_MIN_SHARE:
                    victims.append(Impact(v, x, sh, "collective_wait"))
            victims.sort(key=lambda v: (-v.lost_us, v.rank))
        else:
            victims = _wait_victims(ctx, set(ctx.ranks) - set(senders), cost)
        who, who_zh = ranks_label(senders)
        out = [c for c in out if c not in folded]
        out.append(
            RootCause(
                id=f"cause.slow_link.host_groups_{tr.lower()}",
                mechanism=Mechanism.SLOW_LINK,
                category=Category.COMMUNICATION,
                culprit=Culprit(
                    kind="group",
                    ranks=tuple(senders),
                    transport=tr,
                    label=f"the {tr} links between the host groups {pair} (sent by {who})",
                    label_zh=f"主机组 {pair_zh} 之间的 {tr} 链路（发送方为{who_zh}）",
                ),
                victims=tuple(victims),
                summary=(
                    f"Slow {tr} links between two groups of hosts ({hosts}; by their hostnames, "
                    f"racks or leaf switches): the {n} {tr} links that cross between them run at a "
                    f"median {bw:.1f} GB/s against {ref:.1f} GB/s for the {tr} links between hosts "
                    f"of one group ({n_low} of {n} below {NODE_LINK_RATIO:g}x), while "
                    f"the same NICs reach hosts of their own group at full speed: the path "
                    f"between the groups (the switches' uplinks) is slow. Their senders ({who}) "
                    f"finish the collectives last and the other ranks wait for them, up to "
                    f"{ms(cost)} per step."
                ),
                summary_zh=(
                    f"两组主机（{hosts}；按主机名应为机柜或接入交换机）之间的 {tr} 链路慢：跨组的 {n} 条 "
                    f"{tr} 链路带宽中位数 {bw:.1f} GB/s，组内主机之间的 {tr} 链路为 {ref:.1f} GB/s"
                    f"（{n_low}/{n} 条低于 {NODE_LINK_RATIO:g} 倍），而同样的网卡连本组主机时速度"
                    f"正常：慢的是两组之间的路径（交换机上联）。这些链路的发送方（{who_zh}）最后完成集合通信，"
                    f"其他卡等待它们，每步最多 {ms(cost)}。"
                ),
                metrics={
                    "bandwidth_gbps": bw,
                    "median_gbps": ref,
                    "links_count": float(n),
                    "slow_links_count": float(n_low),
                    "transit_excess_us": cost,
                },
                findings=tuple(f for c in folded for f in c.findings)
                + tuple(
                    _claim(
                        ctx,
                        lambda x: (
                            x.id.startswith("slow_link.communication.wait_ratio")
                            or x.id.startswith("communication.communication.wait_")
                        ),
                    )
                ),
                gain_us=cost,
                bound=BoundKind.ESTIMATE,
                remedies=(
                    Remedy(
                        "action",
                        f"Have the network team check the uplinks between the switches of {pair} "
                        "(leaf to spine): their oversubscription ratio, ECMP hashing, congested or "
                        "down ports and PFC pauses; only the traffic between the two groups is "
                        "slow. Meanwhile ask the scheduler for hosts of one group (under one leaf "
                        "switch, or a rail-optimised placement) so the collectives do not cross "
                        "between them.",
                        f"请网络团队检查 {pair_zh} 的交换机之间的上联链路（leaf 到 spine）：收敛比（超分）、ECMP "
                        "哈希、拥塞或断开的端口以及 PFC 暂停；只有两组之间的流量慢。在此之前，让调度器把作业放在同一组"
                        "主机上（同一台 leaf 交换机下，或按轨道优化的放置），使集合通信不跨组。",
                        cost,
                        BoundKind.ESTIMATE,
                    ),
                ),
                symptom_tags=(
                    "slow_link",
                    "rdma_low_bandwidth" if tr.upper() == "RDMA" else "hccs_low_bandwidth",
                ),
                severity=_severity(cost, ctx.step_us),
            )
        )
    return out


#: Transports on the server board: a node's links of these are its own, not its network side's.
ON_BOARD = ("HCCS", "PCIE", "SIO", "SDMA")


def rule_node_send_links(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Slow links that all leave one node: that node's send side, one cause instead of many.

    With two nodes every inter-node link touches both, so a node is told by direction: for each
    node and transport, the links it sends on (source on the node, destination off it) against
    the links the other nodes send on. When the node's median is below ``NODE_LINK_RATIO`` of
    theirs and ``NODE_LINK_SHARE`` of its links are below that line, the per-link causes among
    them fold into one cause for the node's sending side (culprit: its ranks). Cost: the largest
    of the folded causes' costs (the links of one collective transfer at the same time), their
    victims merged (each rank's largest loss). Environment variables set differently on the
    node's ranks than on the others' (``env_check`` ``differs_across_ranks``, HCCL settings such
    as the RDMA traffic class) are its first suspect. Source: ``comm_matrix`` via the slow_link
    analyzer's link table; ``profiler_metadata.json`` ENV_VARIABLES.
    Returns ``causes`` with the folded link causes replaced.
    """
    res = ctx.result("slow_link")
    groups = ctx.nodes
    if res is None or res.table.empty or len(groups) < 2:
        return causes
    t = res.table
    if not {"src_rank", "dst_rank", "transport", "bandwidth_gbps"} <= set(t.columns):
        return causes
    node_of = {r: i for i, members in enumerate(groups) for r in members}
    out = list(causes)
    for transport, lk in t.groupby("transport"):
        ns = lk["src_rank"].map(node_of).fillna(-1).to_numpy(dtype=np.int64)
        nd = lk["dst_rank"].map(node_of).fillna(-1).to_numpy(dtype=np.int64)
        cross = (ns != nd) & (ns >= 0) & (nd >= 0)
        bw_all = lk["bandwidth_gbps"].to_numpy(dtype=float)
        for i, members in enumerate(groups):
            sent = cross & (ns == i)
            other = cross & (ns != i)
            if sent.sum() < 2 or other.sum() < 2:
                continue
            ref, bw = float(np.median(bw_all[other])), float(np.median(bw_all[sent]))
            low = bw_all[sent] < NODE_LINK_RATIO * ref
            if not (bw < NODE_LINK_RATIO * ref and low.mean() >= NODE_LINK_SHARE):
                continue
            links = {
                (int(a), int(b))
                for a, b in zip(lk["src_rank"][sent], lk["dst_rank"][sent], strict=True)
            }
            folded = [c for c in out if c.culprit.link is not None and c.culprit.link in links]
            if not folded:
                continue
            cost = max(float(c.gain_us or 0.0) for c in folded)
            lost: dict[int, float] = {}
            for c in folded:
                for v in c.victims:
                    lost[v.rank] = max(lost.get(v.rank, 0.0), v.lost_us)
            victims = tuple(
                sorted(
                    (
                        Impact(r, x, share_of(x, ctx.val(r, "step_us")), "collective_wait")
                        for r, x in lost.items()
                    ),
                    key=lambda v: (-v.lost_us, v.rank),
                )
            )
            tr = str(transport)
            label = f"node {i} (ranks {members[0]}-{members[-1]})"
            label_zh = f"节点 {i}（{members[0]}-{members[-1]}号卡）"
            env = _env_only_elsewhere(ctx, set(members))
            env_en = env_zh = ""
            first: tuple[Remedy, ...] = ()
            if env:
                names = ", ".join(f"{k}={v}" for k, v in env)
                env_en = (
                    f"; the other nodes' ranks set {names} and its ranks do not (the RDMA traffic "
                    "class the network keeps lossless), so its traffic goes out in another class"
                    if any(k.startswith("HCCL_RDMA_") for k, _ in env)
                    else f"; the other nodes' ranks set {names} and its ranks do not"
                )
                env_zh = f"；其他节点的卡设置了 {names}，它的卡没有" + (
                    "（网络保持无损的 RDMA 流量等级），它发出的流量走了别的等级"
                    if any(k.startswith("HCCL_RDMA_") for k, _ in env)
                    else ""
                )
                first = (
                    Remedy(
                        "action",
                        f"Set {names} on {label}'s ranks as on the others (its launcher "
                        "environment), so every node sends with the same settings.",
                        f"在{label_zh}的卡上同样设置 {names}（其启动环境），让所有节点用相同的设置发送。",
                        cost,
                        BoundKind.ESTIMATE,
                    ),
                )
            n_sent = int(sent.sum())
            out = [c for c in out if c not in folded]
            out.append(
                RootCause(
                    id=f"cause.slow_link.node{i}_send_{tr.lower()}",
                    mechanism=Mechanism.SLOW_LINK,
                    category=Category.COMMUNICATION,
                    culprit=Culprit(
                        kind="group",
                        ranks=tuple(members),
                        transport=tr,
                        label=f"the {tr} links {label} sends on",
                        label_zh=f"{label_zh}发出的 {tr} 链路",
                    ),
                    victims=victims,
                    summary=(
                        f"Slow {tr} sends from {label}: the {n_sent} {tr} links it sends on run at "
                        f"a median {bw:.1f} GB/s against {ref:.1f} GB/s for the links the other "
                        f"nodes send on ({int(low.sum())} of {n_sent} below {NODE_LINK_RATIO:g}x; "
                        f"the same links the other way are normal){env_en}; the extra transit "
                        f"time costs {ms(cost)} per step and every rank of its collectives waits "
                        "for it."
                    ),
                    summary_zh=(
                        f"{label_zh}发出的 {tr} 流量慢：它发送所用的 {n_sent} 条 {tr} 链路带宽中位数 "
                        f"{bw:.1f} GB/s，其他节点发送的链路为 {ref:.1f} GB/s（{int(low.sum())}/{n_sent} "
                        f"条低于 {NODE_LINK_RATIO:g} 倍；反方向正常）{env_zh}；多出的传输时间每步 "
                        f"{ms(cost)}，同一集合通信中的所有卡都在等它。"
                    ),
                    metrics={
                        "bandwidth_gbps": bw,
                        "median_gbps": ref,
                        "links_count": float(n_sent),
                        "slow_links_count": float(low.sum()),
                        "transit_excess_us": cost,
                    },
                    findings=tuple(f for c in folded for f in c.findings)
                    + tuple(ctx.finding("env_check.env.differs_across_ranks")),
                    gain_us=cost,
                    bound=BoundKind.ESTIMATE,
                    remedies=(
                        *first,
                        Remedy(
                            "check" if first else "action",
                            f"Check the {tr} send side of {label}: its NICs' traffic class and "
                            "priority settings against the switches' lossless (PFC) class, its "
                            "ports and optics (hccn_tool -i <dev> -stat / -optical on each of "
                            "its devices): only what it sends is slow.",
                            f"检查{label_zh}的 {tr} 发送侧：其网卡的流量等级与优先级设置是否与交换机的无损（PFC）"
                            "等级一致，以及端口和光模块（在其每个设备上执行 hccn_tool -i <dev> -stat / "
                            "-optical）：只有它发出的流量慢。",
                            None if first else cost,
                            BoundKind.NONE if first else BoundKind.ESTIMATE,
                        ),
                    ),
                    symptom_tags=(
                        "slow_link",
                        "rdma_low_bandwidth" if tr.upper() == "RDMA" else "hccs_low_bandwidth",
                        # its first fix is a setting the other nodes have (not a part to replace)
                        *(("env_differs",) if first else ()),
                    ),
                    severity=_severity(cost, ctx.step_us),
                )
            )
    return out


def _env_only_elsewhere(ctx: Context, ranks: set[int]) -> list[tuple[str, str]]:
    """HCCL variables every other rank sets to one value that none of ``ranks`` sets alike."""
    from advisor_chat.analyzers.env_check import env_differences

    meta = ctx.profile.get("meta")
    if meta.empty or "env" not in meta.columns:
        return []
    envs = {
        int(r): dict(e)
        for r, e in zip(meta["rank"], meta["env"], strict=True)
        if isinstance(e, dict) and e
    }
    out = []
    for k, by in env_differences(envs).items():
        if not k.startswith("HCCL_"):
            continue
        theirs = {v for v, rs in by.items() if not set(rs) & ranks}
        mine = {v for v, rs in by.items() if set(rs) & ranks}
        if len(theirs) == 1 and not theirs & mine and next(iter(theirs)):
            out.append((k, next(iter(theirs))))
    return out


def rule_intra_node_off_hccs(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Traffic inside every server sent over RoCE or PCIe instead of HCCS (a job-wide setting).

    Rule: the environment check flags ``HCCL_INTRA_ROCE_ENABLE=1`` or ``HCCL_INTRA_PCIE_ENABLE=1``
    on most ranks (env_check; ``meta.env`` from profiler_metadata.json), and the job's exposed
    communication is material (the rank that waits least has ≥ ``OFF_HCCS_MIN_SHARE`` of its
    step as Communication Not Overlapped). One cause of the whole job (a setting, not a link or a
    node), transport RDMA (or PCIE). Victims: every rank, lost = its exposed communication.
    Gain (upper bound): the least exposed communication over ranks; the HCCS bandwidth it would
    get is not in the data. Evidence: the RDMA links' median bandwidth and the HCCS transit size
    (0 MB when nothing went over HCCS), from ``comm_matrix``.
    """
    if not ctx.per_rank.size or any(
        c.mechanism is Mechanism.SLOW_LINK and c.culprit.kind == "job" for c in causes
    ):
        return []
    flags = [
        f
        for name in ("hccl_intra_roce_enable", "hccl_intra_pcie_enable")
        for f in ctx.finding(f"env_check.env.{name}")
    ]
    flags = [f for f in flags if len(f.ranks) >= 0.5 * len(ctx.ranks)]
    if not flags:
        return []
    f = flags[0]
    roce = "roce" in f.id
    tr = "RDMA" if roce else "PCIE"
    job = _job_exposed(ctx)
    if job is None:
        return []
    exposed, gain = job
    m = ctx.profile.get("comm_matrix")
    bw_txt = bw_zh = ""
    if not m.empty and {"transport", "bandwidth_gbps"} <= set(m.columns):
        t = m["transport"].astype(str).str.upper()
        bw = m.loc[t == tr, "bandwidth_gbps"]
        hccs_mb = (
            float(m.loc[t == "HCCS", "transit_size_mb"].sum()) if "transit_size_mb" in m else 0.0
        )
        if len(bw):
            bw_txt = f"; its {tr} links run at a median {float(bw.median()):.1f} GB/s"
            bw_zh = f"；其 {tr} 链路带宽中位数 {float(bw.median()):.1f} GB/s"
        if hccs_mb == 0:
            bw_txt += " and no transfer went over HCCS"
            bw_zh += "，且没有任何传输走 HCCS"
    var = "HCCL_INTRA_ROCE_ENABLE" if roce else "HCCL_INTRA_PCIE_ENABLE"
    path, path_zh = ("RoCE (the RDMA NICs)", "RoCE（RDMA 网卡）") if roce else ("PCIe", "PCIe")
    victims = _exposed_victims(ctx, exposed)
    label = f"every server's intra-node links ({tr} instead of HCCS)"
    label_zh = f"所有服务器的机内链路（走 {tr} 而不是 HCCS）"
    return [
        RootCause(
            id=f"cause.intra_node_{tr.lower()}",
            mechanism=Mechanism.SLOW_LINK,
            category=Category.COMMUNICATION,
            culprit=Culprit(kind="job", ranks=(), transport=tr, label=label, label_zh=label_zh),
            victims=victims,
            summary=(
                f"Every rank sends its traffic inside its server over {path} instead of HCCS, "
                f"because {var}=1 is set on {len(f.ranks)} of {len(ctx.ranks)} ranks{bw_txt}: the "
                "network setting of the whole job is to blame, not a rank, node or link; even "
                f"the rank that waits least has {ms(gain)} per step of communication not overlapped"
            ),
            summary_zh=(
                f"所有卡在服务器内部的通信都走 {path_zh}，而不是 HCCS，因为 {len(ctx.ranks)} 张卡中有 "
                f"{len(f.ranks)} 张设置了 {var}=1{bw_zh}：问题在整个作业的网络设置，不在某张卡、节点或链路；"
                f"即使等待最少的卡，每步也有 {ms(gain)} 未被掩盖的通信"
            ),
            metrics={"gain_upper_bound_us": gain},
            findings=(f, *_claim(ctx, lambda x: x.kind is FindingKind.SLOW_LINK)),
            gain_us=gain,
            bound=BoundKind.UPPER_BOUND,
            remedies=(
                Remedy(
                    "action",
                    f"Unset {var} (set to 1 on {len(f.ranks)} ranks): HCCL then sends the traffic "
                    "between the NPUs of one server over HCCS again.",
                    f"取消环境变量 {var}（{len(f.ranks)} 张卡上为 1）：HCCL 会重新让服务器内 NPU 之间的通信走 HCCS。",
                    gain,
                    BoundKind.UPPER_BOUND,
                ),
                Remedy(
                    "check",
                    "If it was set to work around a faulty HCCS link, check HCCS with "
                    "`npu-smi info -t topo` and the device hardware log before unsetting it.",
                    "如果当初是为了绕开有故障的 HCCS 链路而设置的，取消前先用 `npu-smi info -t topo` "
                    "和设备硬件日志检查 HCCS。",
                ),
            ),
            symptom_tags=("intra_node_off_hccs", "slow_link"),
            severity=_severity(gain, ctx.step_us),
        )
    ]


def _job_exposed(ctx: Context) -> tuple[pd.Series, float] | None:
    """Each rank's exposed communication (µs per step) and its least value, when that is material.

    From ``per_rank`` Communication (Not Overlapped), receive excluded when the column exists.
    ``None`` unless the rank that waits least still has ≥ ``OFF_HCCS_MIN_SHARE`` of the median
    step exposed: a job-wide setting or placement costs every rank, so that least value is what
    fixing it can give at most (the upper-bound gain of the job-level link causes).
    """
    per = ctx.per_rank
    col = "communication_not_overlapped_exclude_receive_us"
    exposed = per[col] if col in per.columns else per["communication_not_overlapped_us"]
    gain = float(exposed.min())
    if not np.isfinite(gain) or gain < OFF_HCCS_MIN_SHARE * ctx.step_us:
        return None
    return exposed, gain


def _exposed_victims(ctx: Context, exposed: Any) -> tuple[Impact, ...]:
    """Every rank with exposed communication, lost = it (µs per step), largest first."""
    return tuple(
        sorted(
            (
                Impact(r, v, share_of(v, ctx.val(r, "step_us")), "collective_wait")
                for r, v in zip(
                    exposed.index.astype(int).tolist(), exposed.astype(float).tolist(), strict=True
                )
                if v > 0
            ),
            key=lambda i: (-i.lost_us, i.rank),
        )
    )


#: Off-HCCS traffic is a cause when the least exposed communication over ranks is at least this
#: share of the median step.
OFF_HCCS_MIN_SHARE = 0.05

#: A group kind whose groups span nodes is a placement cause when its collectives hold at least
#: this share of the communication time (comm_ops Elapse).
ACROSS_NODES_MIN_SHARE = 0.5
#: Tensor-parallel group names (Megatron / MindSpeed parallel-group names in the metadata): the
#: per-layer, blocking collectives that placement keeps inside a node; data, pipeline and expert
#: parallel groups are the ones laid across nodes.
_TP_GROUP = re.compile(r"^(tp|tensor([_ -]?model)?([_ -]?parallel)?)$", re.I)


def rule_group_across_nodes(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Tensor-parallel groups laid across nodes: their collectives cross RDMA though each fits in one.

    Rule: the tensor-parallel groups (``comm_groups`` ``group_name`` ``tp``; data, pipeline and
    expert parallel groups are meant to cross nodes) each
    span two or more nodes (nodes from on-node links, :attr:`Context.nodes`) although each has no
    more ranks than a node holds; their collectives hold ≥ ``ACROSS_NODES_MIN_SHARE`` of the
    communication time (``comm_ops`` Elapse by group); part of their traffic goes over RDMA
    (``comm_matrix`` Transit Size by transport); and the job's exposed communication is material
    (≥ ``OFF_HCCS_MIN_SHARE`` of the step on the rank that waits least). One cause of the whole job
    (the rank placement), transport RDMA. Victims: every rank, lost = its exposed communication.
    Gain (upper bound): the least exposed communication over ranks (what HCCS would give instead
    is not in the data). Evidence: the RDMA and HCCS median bandwidths of those groups' links.
    """
    if not ctx.per_rank.size or any(
        c.mechanism is Mechanism.SLOW_LINK and c.culprit.kind == "job" for c in causes
    ):
        return []
    nodes = ctx.nodes
    groups = ctx.profile.get("comm_groups")
    ops = ctx.profile.get("comm_ops")
    m = ctx.profile.get("comm_matrix")
    if (
        len(nodes) < 2
        or groups.empty
        or ops.empty
        or m.empty
        or not {"group", "group_name", "ranks"} <= set(groups.columns)
        or not {"group", "transport", "transit_size_mb"} <= set(m.columns)
    ):
        return []
    node_of = {r: i for i, n in enumerate(nodes) for r in n}
    per_node = min(len(n) for n in nodes)
    # the tp groups laid across nodes, from the small groups table first (the big tables are
    # read only when there are some)
    g = groups.assign(group=groups["group"].astype(str)).drop_duplicates("group")
    crossing = []
    for kind, rows in g.groupby(g["group_name"].astype(str)):
        if not _TP_GROUP.match(kind.strip()):
            continue
        members = [[int(r) for r in rs] for rs in rows["ranks"] if rs is not None and len(rs)]
        if not members or max(len(rs) for rs in members) > per_node:
            continue
        spans = [len({node_of.get(r, -1) for r in rs}) for rs in members]
        if min(spans) >= 2:  # every group of the kind crosses nodes (a layout, not one group)
            crossing.append((kind, members, spans, set(rows["group"])))
    if not crossing:
        return []
    el = ops.groupby("group", observed=True)["elapse_ms"].sum()
    el.index = el.index.astype(str)
    total = float(el.sum())
    if total <= 0:
        return []
    best = None
    for kind, members, spans, ids in crossing:
        share = float(el[el.index.isin(ids)].sum()) / total
        if share >= ACROSS_NODES_MIN_SHARE and (best is None or share > best[1]):
            best = (kind, share, members, spans, ids)
    if best is None:
        return []
    kind, share, members, spans, ids = best
    mk = m[m["group"].astype(str).isin(ids)]
    t = mk["transport"].astype(str).str.upper()
    size = mk["transit_size_mb"].astype(float)
    rdma_share = share_of(
        float(size[t == "RDMA"].sum()), float(size[t.isin(["RDMA", "HCCS"])].sum())
    )
    if not rdma_share > 0:
        return []
    job = _job_exposed(ctx)
    if job is None:
        return []
    exposed, gain = job
    bw_txt = bw_zh = ""
    if "bandwidth_gbps" in mk.columns:
        bw = mk["bandwidth_gbps"].astype(float)
        b_r, b_h = float(bw[t == "RDMA"].median()), float(bw[t == "HCCS"].median())
        if np.isfinite(b_r) and np.isfinite(b_h):
            bw_txt = f" at a median {b_r:.1f} GB/s against {b_h:.1f} GB/s over HCCS inside a node"
            bw_zh = f"，带宽中位数 {b_r:.1f} GB/s，而机内 HCCS 为 {b_h:.1f} GB/s"
    n_span = max(spans)
    first = members[0]
    victims = _exposed_victims(ctx, exposed)
    from advisor_chat.analyzers._common import format_ranks

    eg = format_ranks(first)
    label = f"every {kind} group's links across nodes (RDMA instead of HCCS)"
    label_zh = f"每个 {kind} 通信组的跨机链路（走 RDMA 而不是 HCCS）"
    return [
        RootCause(
            id=f"cause.group_across_nodes.{kind}",
            mechanism=Mechanism.SLOW_LINK,
            category=Category.COMMUNICATION,
            culprit=Culprit(kind="job", ranks=(), transport="RDMA", label=label, label_zh=label_zh),
            victims=victims,
            summary=(
                f"The whole job's tensor-parallel traffic crosses nodes: every {kind} group "
                f"({len(first)} ranks; ranks {eg} for one) spans {n_span} nodes although it fits "
                f"in one, so {pct(rdma_share)} of its traffic crosses nodes over "
                f"RDMA{bw_txt}; the {kind} collectives hold {pct(share)} of the communication "
                "time: the rank placement of the whole job is to blame, not a rank, node or "
                f"link; even the rank that waits least has {ms(gain)} per step of communication "
                "not overlapped"
            ),
            summary_zh=(
                f"整个作业的张量并行通信都在跨机：每个 {kind} 通信组（{len(first)} 张卡，如 {eg}号卡）都跨了 "
                f"{n_span} 台机器，而它本可以"
                f"放在一台机器内，因此其 {pct(rdma_share)} 的流量要跨机走 RDMA{bw_zh}；{kind} 的集合通信"
                f"占通信时间的 {pct(share)}：问题在整个作业的卡位分配（rank 放置），不在某张卡、节点或"
                f"链路；即使等待最少的卡，每步也有 {ms(gain)} 未被掩盖的通信"
            ),
            metrics={
                "gain_upper_bound_us": gain,
                "rdma_share": rdma_share,
                "group_time_share": share,
                "nodes_spanned": float(n_span),
            },
            findings=_claim(ctx, lambda x: x.kind is FindingKind.SLOW_LINK),
            gain_us=gain,
            bound=BoundKind.UPPER_BOUND,
            remedies=(
                Remedy(
                    "action",
                    f"Place each {kind} group within one node: make {kind} the innermost "
                    "(consecutive-rank) dimension of the rank order and check the launcher's "
                    "rank-to-node mapping (rank table, node_rank, device order), so its "
                    "collectives run over HCCS; the groups that must cross nodes should be "
                    "the ones with the least traffic (data parallel, pipeline).",
                    f"把每个 {kind} 通信组放在一台机器内：让 {kind} 成为卡号排列中最内层（卡号连续）"
                    "的维度，并检查启动器的卡到机器的映射（rank table、node_rank、设备顺序），"
                    "让它的集合通信走 HCCS；需要跨机的应是通信量最小的组（数据并行、流水线并行）。",
                    gain,
                    BoundKind.UPPER_BOUND,
                ),
                Remedy(
                    "check",
                    f"List the ranks of each {kind} group (profiler_metadata.json parallel groups) "
                    "against the host each rank runs on.",
                    f"对照每张卡所在的机器，列出每个 {kind} 通信组包含的卡（profiler_metadata.json "
                    "中的并行组信息）。",
                ),
            ),
            symptom_tags=("group_across_nodes", "rdma_low_bandwidth", "slow_link"),
            severity=_severity(gain, ctx.step_us),
        )
    ]
