"""Network-by-step rule: a transport slower on (nearly) every link in some steps only.

The slow_link analyzer compares links with each other over the whole capture, so a slowdown
that hits every link of a transport at once (congestion in the fabric, another job's traffic on
the same switches, storage traffic over the same NICs) in some steps leaves no slow link: each
link is as slow as its peers. Read per step, it is plain: the transport's median bandwidth
drops in those steps and nearly every link drops with it. The same per-step reading tells a link
that is slow in some steps only (a flapping port) from one that is always slow
(:func:`link_steps`).

Source: ``comm_matrix`` (``communication_matrix.json`` / ``analysis.db`` CommAnalyzerMatrix),
one row per (step, collective, link); ``step_trace`` for the step times.
"""

from __future__ import annotations

import dataclasses
import math
import re

import pandas as pd

from advisor_chat.analyzers.base import Category, Finding
from advisor_chat.analyzers.slow_link import link_records
from advisor_chat.diagnosis.context import Context
from advisor_chat.diagnosis.decompose import TransportSplit, transport_split
from advisor_chat.diagnosis.rules.common import (
    EVENT_MIN_STEPS,
    _claim,
    _severity,
    slow_collective_types,
)
from advisor_chat.diagnosis.text import COLLECTIVE_NAMES, ms, pct, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Impact,
    Mechanism,
    Remedy,
    RootCause,
)

#: A step is slow for a transport when its median link bandwidth is below this share of the
#: transport's median over the steps (the slow_link analyzer's 0.6x rule, read per step).
STEP_BW_RATIO = 0.6
#: ... and at least this share of the transport's links are below that line in the step
#: (job-wide: not one link, not one node).
STEP_LINKS_SHARE = 0.8
#: Transports between devices (LOCAL is a rank's copy to itself).
TRANSPORTS = ("RDMA", "HCCS", "SIO", "PCIE")


def _per_link_step(ctx: Context) -> pd.DataFrame:
    """Bandwidth per (transport, step, src, dst): Σ size / Σ time over the step's collectives."""
    if not ctx.profile.has("comm_matrix"):
        return pd.DataFrame()
    m = ctx.profile.get("comm_matrix")
    need = {"step", "src_rank", "dst_rank", "transport", "transit_size_mb", "transit_time_ms"}
    if m.empty or not need <= set(m.columns):
        return pd.DataFrame()
    m, _ = link_records(m)
    m = m[
        m["transport"].astype(str).str.upper().isin(TRANSPORTS) & (m["src_rank"] != m["dst_rank"])
    ]
    m = m[(m["transit_time_ms"] > 0) & (m["transit_size_mb"] > 0)]
    if m.empty:
        return pd.DataFrame()
    g = (
        m.assign(transport=m["transport"].astype(str).str.upper())
        .groupby(["transport", "step", "src_rank", "dst_rank"])[
            ["transit_size_mb", "transit_time_ms"]
        ]
        .sum()
    )
    # MB / ms = GB/s (decimal, as the exports use)
    g["bandwidth_gbps"] = g["transit_size_mb"] / g["transit_time_ms"]
    return g.reset_index()


def link_steps(
    ctx: Context, src: int, dst: int, transport: str
) -> tuple[list[int], float, float] | None:
    """Steps in which one link is slow, when it is slow in some steps only.

    Returns ``(slow steps, its bandwidth in them, its bandwidth in the others)`` (GB/s) when the
    link runs below ``STEP_BW_RATIO`` of its transport's per-step median in some steps and at
    ≥ 0.8× it in at least one other; ``None`` when it is slow throughout (or without per-step data).
    """
    t = _per_link_step(ctx)
    if t.empty:
        return None
    t = t[t["transport"] == transport.upper()]
    med = t.groupby("step")["bandwidth_gbps"].median()
    mine = t[(t["src_rank"] == src) & (t["dst_rank"] == dst)].set_index("step")
    if len(mine) < EVENT_MIN_STEPS:
        return None
    ratio = mine["bandwidth_gbps"] / med.reindex(mine.index)
    slow = ratio < STEP_BW_RATIO
    fine = ratio >= 0.8
    if not slow.any() or not fine.any():
        return None
    size = mine["transit_size_mb"]
    time = mine["transit_time_ms"]
    return (
        [int(s) for s in mine.index[slow.to_numpy()]],
        float(size[slow].sum() / time[slow].sum()),
        float(size[~slow].sum() / time[~slow].sum()),
    )


def rule_transport_steps(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """A transport slower on nearly every link in some steps: one job-level network cause.

    Rule: per transport, the median link bandwidth of each step; steps whose median is below
    ``STEP_BW_RATIO`` × the transport's median over the steps, with ≥ ``STEP_LINKS_SHARE`` of the
    transport's links below that line, while at least one step is not; ≥ ``EVENT_MIN_STEPS``
    steps. Culprit: the transport in those steps (job level; no rank, node or link is to blame,
    since every link slows at once). Victims: every rank. Cost: the hit steps' median step time
    minus the other steps', summed over the hit steps, per captured step (estimate). Not raised
    for a transport whose slow links another cause already blames.
    """
    t = _per_link_step(ctx)
    if t.empty or ctx.frame.empty:
        return []
    blamed = {c.culprit.transport for c in causes if c.mechanism == Mechanism.SLOW_LINK}
    step_time = ctx.frame.groupby("step")["step_us"].median()
    n_steps = max(int(ctx.frame["step"].nunique()), 1)
    out: list[RootCause] = []
    for tr, lk in t.groupby("transport"):
        tr = str(tr)
        by_step = lk.groupby("step")["bandwidth_gbps"].median()
        if len(by_step) < EVENT_MIN_STEPS or tr in blamed:
            continue
        ref = float(by_step.median())
        low = by_step[by_step < STEP_BW_RATIO * ref]
        if low.empty or len(low) == len(by_step):
            continue
        hit = [
            int(s)
            for s in low.index
            if (lk[lk["step"] == s]["bandwidth_gbps"] < STEP_BW_RATIO * ref).mean()
            >= STEP_LINKS_SHARE
        ]
        if not hit:
            continue
        clean = [s for s in by_step.index if int(s) not in hit]
        in_hit = lk[lk["step"].isin(hit)]
        in_clean = lk[lk["step"].isin(clean)]
        bw_hit = float(in_hit["transit_size_mb"].sum() / in_hit["transit_time_ms"].sum())
        bw_clean = float(in_clean["transit_size_mb"].sum() / in_clean["transit_time_ms"].sum())
        share_links = float((in_hit["bandwidth_gbps"] < STEP_BW_RATIO * ref).mean())
        st_hit = step_time.reindex(hit).dropna()
        st_clean = step_time.reindex(clean).dropna()
        if st_hit.empty or st_clean.empty:
            continue
        lost = float((st_hit - st_clean.median()).clip(lower=0.0).sum())
        cost = lost / n_steps
        if not math.isfinite(cost) or cost <= 0:
            continue
        steps_txt = ", ".join(str(s) for s in hit)
        # every rank waits for the slower transfers in those steps: its share of the lost time
        victims = tuple(
            Impact(int(r), cost, share_of(cost, ctx.val(int(r), "step_us")), "collective_wait")
            for r in ctx.ranks
        )
        label = f"every {tr} link in step{'s' if len(hit) > 1 else ''} {steps_txt}"
        label_zh = f"第 {steps_txt} 步的所有 {tr} 链路"
        out.append(
            RootCause(
                id=f"cause.slow_transport.{tr.lower()}",
                mechanism=Mechanism.SLOW_LINK,
                category=Category.COMMUNICATION,
                culprit=Culprit(kind="job", ranks=(), transport=tr, label=label, label_zh=label_zh),
                victims=victims,
                summary=(
                    f"Every rank slows down in step{'s' if len(hit) > 1 else ''} {steps_txt} "
                    f"because the {tr} network does, on every link at once: its links run at "
                    f"{bw_hit:.1f} GB/s there "
                    f"against {bw_clean:.1f} GB/s in the other steps ({pct(share_links)} of the "
                    f"{tr} links of those steps below {STEP_BW_RATIO:g}x); no rank, node or link "
                    "is to blame, the fabric they share is (congestion, other traffic on the same "
                    f"switches or NICs). Those steps take {ms(float(st_hit.median()))} against "
                    f"{ms(float(st_clean.median()))}, {ms(cost)} per step on average."
                ),
                summary_zh=(
                    f"所有卡都在第 {steps_txt} 步变慢，因为 {tr} 网络在这些步所有链路同时变慢：链路带宽为 "
                    f"{bw_hit:.1f} GB/s，其他步为 {bw_clean:.1f} GB/s（这些步中 {pct(share_links)} 的 {tr} 链路低于 "
                    f"{STEP_BW_RATIO:g} 倍）；不是某张卡、某个节点或某条链路的问题，而是它们共用的网络"
                    f"（拥塞、同一交换机或网卡上的其他流量）。这些步耗时 {ms(float(st_hit.median()))}，其他步为 "
                    f"{ms(float(st_clean.median()))}，平均每步多 {ms(cost)}。"
                ),
                metrics={
                    "bandwidth_gbps": bw_hit,
                    "median_gbps": bw_clean,
                    "slow_links_share": share_links,
                    "hit_step_us": float(st_hit.median()),
                    "clean_step_us": float(st_clean.median()),
                    "steps_hit_count": float(len(hit)),
                    "explained_us_per_step": cost,
                },
                findings=(),
                steps=tuple(hit),
                gain_us=cost,
                bound=BoundKind.ESTIMATE,
                remedies=(
                    Remedy(
                        "action",
                        f"Find what else loads the {tr} fabric in those steps and separate it from "
                        "the training traffic: other jobs on the same switches, checkpoint or "
                        "storage traffic over the same NICs; check the switches' congestion "
                        "counters (PFC pause frames, ECN marks, drops) for those times and the "
                        "traffic class / QoS of the HCCL traffic.",
                        f"找出这些步里还有什么在占用 {tr} 网络，并与训练流量隔离：同一交换机上的其他作业、"
                        "经同一网卡的检查点或存储流量；查看这些时刻交换机的拥塞计数（PFC 暂停帧、ECN 标记、丢包），"
                        "以及 HCCL 流量的优先级 / QoS 配置。",
                        cost,
                        BoundKind.ESTIMATE,
                    ),
                    Remedy(
                        "check",
                        "Match the slow steps' timestamps with the cluster's network monitoring "
                        "and the other jobs' schedules.",
                        "把慢步的时间戳与集群网络监控、其他作业的调度时间对照。",
                    ),
                ),
                symptom_tags=(
                    "slow_link",
                    "step_jitter",
                    "rdma_low_bandwidth" if tr == "RDMA" else "hccs_low_bandwidth",
                ),
                severity=_severity(cost, ctx.step_us),
            )
        )
    return out


#: A transport's fastest link at this share of its standard shows the fabric can run at full
#: speed: when other causes name its slow links, it is not slow as a whole.
FULL_SPEED_SHARE = 0.8


def rule_slow_transport(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Slow-transport rule: every link of one transport runs below its standard bandwidth.

    From the ``slow_link`` analyzer's ``slow_link.transport.*_below_standard`` finding
    (communication_matrix.json: the transport's median link bandwidth below 80% of the Atlas A2
    standard with large transfers, the CANN msprof slow-link rule). No rank, node or link stands
    out: the fabric or its configuration slows every transfer. Not raised when a step-level cause
    of the same transport (congestion in some steps) already explains it, nor when another kind of
    collective runs at full speed on the same transport (``decompose.collective_types``), nor when
    the environment
    check flags a setting that slows every collective (``comm_setting``: HCCL_BUFFSIZE), nor when
    other causes name slow links of that transport and its fastest link runs at
    ``FULL_SPEED_SHARE`` of the standard or more (the median is theirs). Victims: every rank
    (its transfers over that transport). Gain (estimate): per link and step, the transit time
    beyond what the standard bandwidth needs (part of it may be hidden behind computation).
    """
    out: list[RootCause] = []
    # a setting that slows every collective (HCCL_BUFFSIZE below its default) explains low
    # bandwidth on every link: the exposed-communication cause says it, the fabric is not blamed
    if any("comm_setting" in f.symptom_tags for f in ctx.finding("env_check.env.")):
        return out
    # the same links carry another kind of collective at full speed: not the fabric (the
    # exposed-communication cause names the slow kind)
    ct = slow_collective_types(ctx)
    for f in ctx.finding("slow_link.transport."):
        tr = f.id.split(".")[-1].split("_")[0].upper()
        if ct is not None and tr in ct.by_transport:
            continue
        if any(c.id.startswith(f"cause.slow_transport.{tr.lower()}") for c in causes):
            continue
        m = f.metrics
        gain = float(f.estimated_gain_us or 0.0)
        if gain <= 0:
            continue
        named = [
            c
            for c in causes
            if c.mechanism is Mechanism.SLOW_LINK
            and c.culprit.kind != "job"
            and (c.culprit.transport or "").upper() == tr
        ]
        if named and float(m.get("max_gbps", 0.0)) >= FULL_SPEED_SHARE * float(
            m.get("standard_gbps", float("inf"))
        ):
            # some links of this transport run at full speed and the slow ones are named by
            # their own causes: the median is theirs, not the fabric's (counted once); the
            # finding is a symptom of the first of them
            i = causes.index(named[0])
            causes[i] = dataclasses.replace(named[0], findings=(*named[0].findings, f))
            ctx.claimed.add(f.id)
            continue
        victims = tuple(
            Impact(int(r), gain, share_of(gain, ctx.val(int(r), "step_us")), "own_time")
            for r in ctx.ranks
        )
        # the other transports against their standards: what is normal beside it
        res = ctx.result("slow_link")
        std = res.tables.get("transport_standard") if res is not None else None
        others = (
            [r for _, r in std.iterrows() if str(r["transport"]) != tr]
            if std is not None and not std.empty
            else []
        )
        beside = "".join(
            f"; {r['transport']} links run at {r['median_gbps']:.1f} GB/s (median, "
            f"{pct(r['utilisation'])} of its {r['standard_gbps']:.1f} GB/s standard)"
            for r in others
        )
        beside_zh = "".join(
            f"；{r['transport']} 链路带宽中位数 {r['median_gbps']:.1f} GB/s（为其标准带宽 "
            f"{r['standard_gbps']:.1f} GB/s 的 {pct(r['utilisation'])}）"
            for r in others
        )
        rdma = tr == "RDMA"
        split = transport_split(ctx.profile)
        if split is not None and split.transport == tr:
            # one collective type is slow on this transport only, another fills the same links:
            # the way that type loads the network, not the links
            if math.isfinite(split.gain_us) and split.gain_us > 0:
                # the slow type's transfers at the fast type's rate over the same links
                gain = split.gain_us
                victims = tuple(
                    Impact(int(r), gain, share_of(gain, ctx.val(int(r), "step_us")), "own_time")
                    for r in ctx.ranks
                )
            out.append(_split_cause(ctx, f, split, victims, gain))
            continue
        fix_en = (
            "the RoCE fabric's configuration (PFC / ECN lossless settings on the NICs and "
            "switches, MTU end to end, the traffic class HCCL uses: HCCL_RDMA_TC / HCCL_RDMA_SL) "
            "and the NIC ports (hccn_tool -i N -speed -g, -link -g, -stat -g for drops and "
            "retransmissions)"
            if rdma
            else f"the {tr} links' state and the server's {tr} configuration and firmware "
            "(npu-smi info)"
        )
        fix_zh = (
            "RoCE 网络配置（网卡和交换机的 PFC / ECN 无损配置、端到端 MTU、HCCL 使用的流量优先级 "
            "HCCL_RDMA_TC / HCCL_RDMA_SL）以及网卡端口（hccn_tool -i N -speed -g、-link -g、-stat -g "
            "查看丢包和重传）"
            if rdma
            else f"{tr} 链路状态以及服务器的 {tr} 配置和固件（npu-smi info）"
        )
        out.append(
            RootCause(
                id=f"cause.slow_transport.{tr.lower()}_standard",
                mechanism=Mechanism.SLOW_LINK,
                category=Category.COMMUNICATION,
                culprit=Culprit(
                    kind="job",
                    ranks=(),
                    transport=tr,
                    label=f"every {tr} link",
                    label_zh=f"所有 {tr} 链路",
                ),
                victims=victims,
                summary=(
                    f"Every rank's {tr} transfers are slow in every step: all "
                    f"{m['links_count']:.0f} {tr} links run at "
                    f"{m['min_gbps']:.1f}-{m['max_gbps']:.1f} GB/s (median {m['median_gbps']:.1f} "
                    f"GB/s, {pct(m['utilisation'])} of the {m['standard_gbps']:.1f} GB/s standard "
                    f"of an {tr} link) with large transfers{beside}; no rank, node or link stands "
                    "out, so "
                    f"the {tr} network or its configuration slows every transfer. At the standard "
                    f"bandwidth each link's transfers would take {ms(gain)} less per step."
                ),
                summary_zh=(
                    f"所有卡的 {tr} 传输在每一步都慢：全部 {m['links_count']:.0f} 条 {tr} 链路带宽 "
                    f"{m['min_gbps']:.1f}-{m['max_gbps']:.1f} GB/s（中位数 {m['median_gbps']:.1f} "
                    f"GB/s，只有 {tr} 链路标准带宽 {m['standard_gbps']:.1f} GB/s 的 "
                    f"{pct(m['utilisation'])}），且都是大包传输{beside_zh}；没有哪张卡、哪个节点或哪条链路突出，"
                    f"是 {tr} 网络或其配置让每次传输都变慢。按标准带宽，每条链路每步的传输可少 {ms(gain)}。"
                ),
                metrics={
                    "median_gbps": m["median_gbps"],
                    "standard_gbps": m["standard_gbps"],
                    "utilisation": m["utilisation"],
                    "links_count": m["links_count"],
                    # the transfers' time at the standard bandwidth: an estimate, since the
                    # step also changes by how the faster transfers overlap with computation
                    "gain_estimate_us": gain,
                },
                findings=_claim(ctx, lambda x, fid=f.id: x.id == fid),
                gain_us=gain,
                bound=BoundKind.ESTIMATE,
                remedies=(
                    Remedy(
                        "action",
                        f"Have the network checked, not one card or cable: {fix_en}.",
                        f"请检查网络，而不是某一张卡或某根线缆：{fix_zh}。",
                        gain,
                        BoundKind.ESTIMATE,
                    ),
                ),
                symptom_tags=("slow_link", f"{tr.lower()}_low_bandwidth"),
                severity=_severity(gain, ctx.step_us),
            )
        )
    return out


def _split_cause(
    ctx: Context, f: Finding, sp: TransportSplit, victims: tuple[Impact, ...], gain: float
) -> RootCause:
    """The transport's slow links as one collective type's traffic pattern (see ``transport_split``).

    Many senders to one port (an all-to-all crossing servers) fill the switch buffers; without
    working congestion control (ECN / DCQCN on RoCE) the fabric pauses them (PFC), while ring
    collectives (one sender per port) reach the full rate over the same links.
    """
    tr = sp.transport
    slow, fast = (
        COLLECTIVE_NAMES.get(sp.slow.lower(), sp.slow),
        COLLECTIVE_NAMES.get(sp.fast.lower(), sp.fast),
    )
    many = re.search(r"alltoall", sp.slow, re.I) is not None
    pattern = (
        "every card sends to the other servers' ports at once (many-to-one incast)"
        if many
        else "its traffic pattern loads the ports unevenly"
    )
    pattern_zh = (
        "所有卡同时向其他服务器的端口发送（多打一的 incast）"
        if many
        else "它的流量模式让端口负载不均"
    )
    summary = (
        f"{slow} is slow on {tr} only: its {tr} transfers get {sp.slow_gbps:.1f} GB/s while {fast} "
        f"gets {sp.fast_gbps:.1f} GB/s over the same {tr} links, and on {sp.other} {slow} runs at "
        f"{pct(sp.other_ratio)} of {fast}'s rate (communication.json Communication Bandwidth "
        f"Info): not a slow link or card, and not {slow}'s algorithm, but how {slow} loads the "
        f"{tr} network: {pattern}, which a fabric without working congestion control (ECN / "
        f"DCQCN off, PFC pauses only) turns into pause storms. Every rank waits for it; at "
        f"{fast}'s rate its {tr} transfers would take {ms(gain)} less per step."
    )
    summary_zh = (
        f"{slow} 只在 {tr} 上慢：它的 {tr} 传输带宽只有 {sp.slow_gbps:.1f} GB/s，而 {fast} 在同样的 "
        f"{tr} 链路上有 {sp.fast_gbps:.1f} GB/s；在 {sp.other} 上 {slow} 的带宽是 {fast} 的 "
        f"{pct(sp.other_ratio)}（communication.json 的通信带宽信息）：不是某条链路或"
        f"某张卡慢，也不是 {slow} 的算法，而是 {slow} 给 {tr} 网络施加负载的方式：{pattern_zh}，在没有"
        f"有效拥塞控制（ECN / DCQCN 关闭，只有 PFC 暂停）的网络里会变成暂停风暴。所有卡都在等它；"
        f"若达到 {fast} 的带宽，它的 {tr} 传输每步可少 {ms(gain)}。"
    )
    return RootCause(
        id=f"cause.slow_transport.{tr.lower()}_{sp.slow.lower()}",
        mechanism=Mechanism.SLOW_LINK,
        category=Category.COMMUNICATION,
        culprit=Culprit(
            kind="job",
            transport=tr,
            operator=slow,
            label=f"{slow} over {tr}",
            label_zh=f"{tr} 上的 {slow}",
        ),
        victims=victims,
        summary=summary,
        summary_zh=summary_zh,
        metrics={
            "slow_type_gbps": sp.slow_gbps,
            "fast_type_gbps": sp.fast_gbps,
            "other_transport_ratio": sp.other_ratio,
            "gain_estimate_us": gain,
        },
        findings=_claim(ctx, lambda x: x.id == f.id or x.id.startswith("slow_link.slow_link.")),
        gain_us=gain,
        bound=BoundKind.ESTIMATE,
        remedies=(
            Remedy(
                "action",
                f"Enable and tune congestion control for the traffic class HCCL uses on {tr} "
                "(ECN marking / WRED on the switches, DCQCN on the NICs; with the network team) "
                f"instead of replacing cards or cables; meanwhile keep {slow} inside a server "
                "(expert parallelism within a node, the experts replicated across servers) or "
                "use a hierarchical all-to-all so fewer senders hit each remote port.",
                f"为 HCCL 在 {tr} 上使用的流量优先级开启并调好拥塞控制（交换机上的 ECN 标记 / WRED、"
                f"网卡上的 DCQCN；与网络团队一起），而不是更换卡或线缆；在此之前让 {slow} 留在服务器内"
                "（专家并行限制在一台机器内，专家在服务器之间复制）或使用分层的 AlltoAll 算法，减少同时打到"
                "每个远端端口的发送方。",
                gain,
                BoundKind.ESTIMATE,
            ),
        ),
        symptom_tags=("slow_link", f"{tr.lower()}_low_bandwidth"),
        severity=_severity(gain, ctx.step_us),
    )


__all__ = [
    "STEP_BW_RATIO",
    "STEP_LINKS_SHARE",
    "link_steps",
    "rule_slow_transport",
    "rule_transport_steps",
]
