"""Slow-link rule: transit excess on a degraded link is blamed on the link (one cause per physical link)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np

from advisor_chat.analyzers.base import Category, FindingKind
from advisor_chat.diagnosis.context import Context
from advisor_chat.diagnosis.rules.common import VICTIM_MIN_SHARE, _claim, _severity
from advisor_chat.diagnosis.text import ms, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Impact,
    Mechanism,
    Remedy,
    RootCause,
)


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
    for f in ctx.finding("slow_link.slow_link."):
        if f.kind is not FindingKind.SLOW_LINK:
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
        if not group_ranks:
            group_ranks = set(ctx.peers(src))
        extra = float(f.metrics.get("extra_us", f.estimated_gain_us or 0.0))
        victims = []
        for v in sorted(group_ranks - {src, dst}):
            if v not in ctx.per_rank.index:
                continue
            lost = min(extra, ctx.val(v, "communication_not_overlapped_exclude_receive_us"))
            share = share_of(lost, ctx.val(v, "step_us"))
            if share >= VICTIM_MIN_SHARE:
                victims.append(Impact(v, lost, share, "collective_wait"))
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
                ),
                summary_zh=(
                    f"慢链路：{transport} 链路 {src}→{dst} 带宽只有 {bw:.1f} GB/s，同类链路中位数为 "
                    f"{med:.1f} GB/s；多出的传输时间每步 {ms(extra)}，同一集合通信中的所有卡都在等它"
                    f"（{src}号卡和{dst}号卡位于这条慢链路上，其自身计算与空闲时间正常）。"
                ),
                metrics={
                    "bandwidth_gbps": float(bw),
                    "median_gbps": float(med),
                    "transit_excess_us": extra,
                },
                findings=claimed,
                gain_us=extra,
                bound=BoundKind.ESTIMATE,
                remedies=(
                    Remedy(
                        "action",
                        f"Repair the {transport} path between ranks {src} and {dst} (NIC, optical "
                        "module, cable or switch port) so it runs at its peers' bandwidth.",
                        f"修复{src}号卡与{dst}号卡之间的 {transport} 通路（网卡、光模块、线缆或交换机端口），"
                        "使其达到同类链路的带宽。",
                        extra,
                        BoundKind.ESTIMATE,
                    ),
                    Remedy(
                        "check",
                        f"Run hccn_tool link, optical and statistics checks on the devices of ranks "
                        f"{src} and {dst}, and an HCCL test between them.",
                        f"在{src}号卡和{dst}号卡所在设备上用 hccn_tool 检查链路、光模块和统计信息，"
                        "并在两者之间跑一次 HCCL 测试。",
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
    return _one_cause_per_link(out)


def _one_cause_per_link(causes: list[RootCause]) -> list[RootCause]:
    """Both directions of one physical link are one cause, its cost counted once.

    The two directions of a link carry their transfers at the same time within a collective, so
    the job loses the larger of the two directions' transit excess, not their sum. The merged
    cause keeps the slower direction's numbers and names both bandwidths.
    """
    by_link: dict[tuple[int, int, str], list[RootCause]] = defaultdict(list)
    for c in causes:
        a, b = c.culprit.link or (0, 0)
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
        )
        summary_zh = (
            f"慢链路：{t} 链路 {a}↔{b} 两个方向都慢（{bw1:.1f} 和 {bw2:.1f} GB/s，同类链路中位数为 "
            f"{med:.1f} GB/s）；多出的传输时间每步 {ms(extra)}（两个方向同时传输，只计一次），"
            f"同一集合通信中的所有卡都在等它（{a}号卡和{b}号卡位于这条慢链路上，其自身计算与空闲时间正常）。"
        )
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
