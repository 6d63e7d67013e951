"""Explain why one rank is slow (or say that it is not), component by component."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pandas as pd
from pydantic import Field

from advisor_chat.analyzers._common import (
    SPREAD_RATIO,
    check_rank,
    format_ranks,
    is_comm_kernel,
    is_p2p,
    ms,
    pct,
    per_rank_mean,
    pipeline_stages,
    severity,
    step_frame,
)
from advisor_chat.analyzers.base import (
    AnalyzerResult,
    Category,
    Evidence,
    Finding,
    FindingKind,
    Params,
    Severity,
    register,
)
from advisor_chat.errors import NotAnswerableError, ToolArgumentError
from advisor_chat.ingest.profile import PEER_SAMPLE, Profile
from advisor_chat.ranks import spread_sample

#: A rank that is not slow but spends at least this share of its step in pipeline Bubble is
#: waiting for another stage (said instead of "not slow").
BUBBLE_VICTIM_SHARE = 0.10

_COMPONENTS = (
    ("computing_us", "Computing", "计算"),
    ("free_us", "Free", "空闲(Free)"),
    ("communication_not_overlapped_us", "Communication (Not Overlapped)", "未掩盖通信"),
    ("overlapped_us", "Overlapped", "被掩盖通信"),
    ("bubble_us", "Bubble", "气泡(Bubble)"),
    ("step_us", "Step", "step"),
    ("comm_wait_us", "Collective wait", "集合通信等待"),
    ("comm_transit_us", "Collective transit", "集合通信传输"),
    ("comm_synchronization_us", "Collective synchronization", "集合通信同步"),
)


class ExplainRankParams(Params):
    """Parameters of :func:`explain_rank`."""

    rank: int = Field(description="Global rank to explain (required), e.g. 12.")
    step: int | None = Field(
        default=None, description="Step id to analyse; default: all steps (mean per step)."
    )


@register("explain_rank", ExplainRankParams, order=25)
def explain_rank(profile: Profile, params: ExplainRankParams) -> AnalyzerResult:
    """Explain why rank N is slow: compare it with the median of its peers and with the fastest peer, component by component (Computing, Free, communication wait vs transit), and show the evidence behind the largest gap (operator deltas, launch delays, step trend).

    Peers are the ranks of its pipeline stage when stages are known, else all ranks. The
    fastest peer is the one with the least own work (Computing + Free). Evidence: for Computing,
    kernel time per op type (kernels, per step) minus the peer median; for Free, launch-delay
    percentiles (host_dispatch) vs the peers' medians; always, the per-step trend of the gap.
    Collective wait is per step from communication.json (ms → µs): a slow rank waits least
    because it arrives last and the others wait for it.

    Args:
        profile: Canonical profile; uses ``step_trace``, ``comm_ops``, ``kernels``,
            ``host_dispatch``.
        params: ``rank`` (required), ``step`` (default all steps).

    Returns:
        AnalyzerResult whose ``table`` has one row per component with ``component`` (column
        name), ``label``, ``rank_us`` (the rank, µs per step), ``median_us`` (peer median),
        ``fastest_us`` (fastest peer), ``delta_us`` (rank − median), ``delta_fastest_us``
        (rank − fastest), ``delta_share`` (delta / median step). Extra tables: ``op_deltas``
        (``op_type``, ``rank_us``, ``median_us``, ``delta_us``, ``rank_count``,
        ``median_count`` per step), ``launch_delay`` (per rank ``p50_us``, ``p90_us``,
        ``max_us``), ``trend`` (per step ``computing_delta_us``, ``free_delta_us``).

    Raises:
        ToolArgumentError: The rank is not in the profile (the message names the valid ranks),
            or the step is not in the step trace.
        NotAnswerableError: The profile has no step trace and no kernels for the rank.
    """
    rank = int(params.rank)
    check_rank(profile, rank)
    st = step_frame(profile, params.step)
    if st.empty or rank not in set(st["rank"]):
        raise NotAnswerableError(
            f"no step trace for rank {rank}: step_trace_time.csv (or the DB's StepTraceTime) is "
            "needed to compare Computing/Free/Communication across ranks"
        )
    stages = pipeline_stages(profile)
    peers_all = next((list(s) for s in stages if rank in s), sorted(set(st["rank"])))
    pr = per_rank_mean(st)
    pr = pr[pr.index.isin(peers_all)].copy()
    comm = _comm_per_rank(profile, params.step)
    pr = pr.join(comm)
    peers = pr.drop(index=rank)
    if peers.empty:
        return AnalyzerResult(
            "explain_rank",
            pd.DataFrame(),
            notes=(f"rank {rank} has no peers to compare with (single rank)",),
        )
    work = peers["computing_us"] + peers["free_us"]
    fastest = int(work.index[int(np.argmin(work.to_numpy(dtype=float)))])
    med_step = float(pr["step_us"].median())
    rows: list[dict[str, Any]] = []
    for col, label, _zh in _COMPONENTS:
        if col not in pr.columns or pr[col].isna().all():
            continue
        r_val = float(cast(float, pr.at[rank, col]))
        med = float(peers[col].median())
        fast = float(cast(float, pr.at[fastest, col]))
        rows.append(
            {
                "component": col,
                "label": label,
                "rank_us": r_val,
                "median_us": med,
                "fastest_us": fast,
                "delta_us": r_val - med,
                "delta_fastest_us": r_val - fast,
                "delta_share": (r_val - med) / med_step if med_step > 0 else np.nan,
            }
        )
    table = pd.DataFrame(rows)
    vals: dict[tuple[str, str], float] = {
        (str(r["component"]), k): float(r[k])
        for r in rows
        for k in ("rank_us", "median_us", "fastest_us", "delta_us")
    }

    def cv(component: str, key: str) -> float:
        return vals.get((component, key), float("nan"))

    cd = float(cv("computing_us", "delta_us"))
    fd = float(cv("free_us", "delta_us"))
    wait_d = cv("comm_wait_us", "delta_us")
    thr = SPREAD_RATIO * med_step
    tables: dict[str, pd.DataFrame] = {"trend": _trend(st, rank, peers_all)}
    evidence = [
        Evidence(
            "step_trace",
            profile.cite("step_trace", rank),
            {
                "rank": rank,
                "peers": format_ranks(peers.index),
                "step": params.step if params.step is not None else "all",
            },
            "delta = rank − median of peers (mean per step); fastest = peer with least Computing + Free",
        )
    ]
    waits_less = bool(
        np.isfinite(wait_d)
        and pr["comm_wait_us"].idxmin() == rank
        and cv("comm_wait_us", "rank_us") < 0.5 * cv("comm_wait_us", "median_us")
    )
    wait_txt, wait_zh = "", ""
    if np.isfinite(wait_d):
        wait_txt = (
            f"; in collectives it waits {ms(cv('comm_wait_us', 'rank_us'))} per step vs the "
            f"peers' median (excluding rank {rank}) {ms(cv('comm_wait_us', 'median_us'))}"
            + (
                " — the least of all: it arrives last and the other ranks wait for it"
                if waits_less
                else ""
            )
        )
        wait_zh = (
            f"；集合通信中它每步等待 {ms(cv('comm_wait_us', 'rank_us'))}，同组中位数 "
            f"{ms(cv('comm_wait_us', 'median_us'))}"
            + ("——最少，说明它最后到达，其他卡在等它" if waits_less else "")
        )
        evidence.append(
            Evidence(
                "comm_ops",
                profile.cite("comm_ops", rank),
                {"rank": rank},
                "wait_ms summed per step, ms → µs",
            )
        )
    trend = tables["trend"]
    consistent = (
        float((trend["free_delta_us" if fd >= cd else "computing_delta_us"] > 0).mean())
        if not trend.empty
        else np.nan
    )
    trend_txt = (
        f"; the gap is present in {pct(consistent)} of {len(trend)} steps" if len(trend) > 1 else ""
    )
    trend_zh = f"；{len(trend)} 步中 {pct(consistent)} 存在该差距" if len(trend) > 1 else ""

    # Both evidence tables are computed whatever the cause, so a follow-up can page them.
    heavy_peers, n_sample = _heavy_peers(profile, rank, peers_all)
    launch = _launch_evidence(profile, rank, heavy_peers, params.step, n_sample)
    ops_ev = _op_evidence(profile, rank, heavy_peers, params.step, n_sample)
    if launch[3] is not None:
        tables["launch_delay"] = launch[3]
    if ops_ev[3] is not None:
        tables["op_deltas"] = ops_ev[3]

    findings: list[Finding] = []
    metrics = {
        "computing_delta_us": cd,
        "free_delta_us": fd,
        "comm_wait_delta_us": wait_d,
        "median_step_us": med_step,
        "fastest_rank": float(fastest),
        "peers_count": float(len(peers)),
    }
    if n_sample:
        metrics["peer_sample_ranks"] = float(n_sample)
    tail, tail_zh = "", ""
    if max(cd, fd) > thr:
        if fd >= cd:
            cat = Category.SCHEDULING
            detail, detail_zh, ev, _lt, _hb = launch
            if ev is not None:
                evidence.append(ev)
            gap = fd
            free_txt = (
                f"rank {rank}'s Free is {ms(fd)} per step above the peers' median "
                f"(excluding rank {rank}: {ms(cv('free_us', 'median_us'))}; fastest rank "
                f"{fastest}: {ms(cv('free_us', 'fastest_us'))})"
            )
            free_zh = (
                f"{rank}号卡 的 Free 每步比其他卡中位数多 {ms(fd)}"
                f"（不含 {rank}号卡 的中位数 {ms(cv('free_us', 'median_us'))}，最快 {fastest}号卡 为 "
                f"{ms(cv('free_us', 'fastest_us'))}）"
            )
            tags: tuple[str, ...]
            if launch[4]:
                # launch delays measured and short: the device waits for the host
                cause = f"scheduling (host dispatch): {free_txt}"
                cause_zh = f"调度（主机下发）问题：{free_zh}"
                tags = ("slow_rank", "free_spread", "host_bound", "launch_delay")
            else:
                # Free alone does not say why the device idles: name the candidates and the data
                # that would decide, without claiming host dispatch.
                cause = f"device idle time (Free): {free_txt}"
                cause_zh = f"设备空闲（Free）：{free_zh}"
                tail = (
                    f" Free alone does not say why rank {rank}'s device idles — possible causes on "
                    "this rank: host dispatch, data loading, synchronization (e.g. .item() or "
                    "stream sync), checkpoint or logging; the data that would decide: "
                    "trace_view.json with HostToDevice flows (profiler Level1 with CPU activity) "
                    "to compare its launch delays and step-start idle with the peers."
                )
                tail_zh = (
                    f"仅凭 Free 无法判断 {rank}号卡 设备空闲的原因——可能是该卡的 主机下发、数据加载、"
                    "同步（如 .item() 或流同步）、checkpoint 或日志；可判定的数据：含 HostToDevice 连线的 "
                    "trace_view.json（Level1 + CPU 活动），用于对比其下发时延和每步起始空闲。"
                )
                tags = ("slow_rank", "free_spread", "high_free")
        else:
            cat = Category.COMPUTE
            detail, detail_zh, ev, _od = ops_ev
            if ev is not None:
                evidence.append(ev)
            gap = cd
            cause = (
                f"compute: rank {rank}'s Computing is {ms(cd)} per step above the peers' median "
                f"(excluding rank {rank}: {ms(cv('computing_us', 'median_us'))}; fastest rank {fastest}: "
                f"{ms(cv('computing_us', 'fastest_us'))})"
            )
            cause_zh = (
                f"计算问题：{rank}号卡 的计算时间每步比同组中位数多 {ms(cd)}"
                f"（中位数 {ms(cv('computing_us', 'median_us'))}）"
            )
            tags = ("slow_rank", "compute_straggler", "compute_spread")
        share = gap / med_step
        metrics["gap_us"] = gap
        metrics["gap_share"] = share
        findings.append(
            Finding(
                id=f"explain_rank.slow_rank.r{rank}",
                kind=FindingKind.SLOW_RANK,
                severity=severity(share),
                summary=(
                    f"Rank {rank} is slow because of {cause}, {pct(share)} of the step"
                    f"{detail}{wait_txt}{trend_txt}. Fixing it would save about {ms(gap)} per step "
                    f"on every rank that waits for it.{tail}"
                ),
                summary_zh=(
                    f"{rank}号卡 慢的原因是{cause_zh}，占步长的 {pct(share)}{detail_zh}{wait_zh}{trend_zh}。"
                    f"修复后每步约可节省 {ms(gap)}。{tail_zh}"
                ),
                ranks=(rank,),
                metrics=metrics,
                evidence=tuple(evidence),
                symptom_tags=tags,
                estimated_gain_us=gap,
                category=cat,
            )
        )
    else:
        big = max(cd, fd)
        own = (
            f"its Computing is {ms(cd)} and its Free {ms(fd)} away from the peers' median "
            f"({pct(big / med_step)} of the {ms(med_step)} step at most; threshold 5%)"
        )
        own_zh = (
            f"计算与同组中位数相差 {ms(cd)}，Free 相差 {ms(fd)}"
            f"（最多占步长 {ms(med_step)} 的 {pct(big / med_step)}，阈值 5%）"
        )
        bubble = cv("bubble_us", "rank_us")
        rank_step = cv("step_us", "rank_us")
        bubble_share = bubble / rank_step if rank_step and rank_step > 0 else float("nan")
        link = _slow_link_of(profile, rank)
        tags = ()
        cat = Category.NONE
        if np.isfinite(bubble_share) and bubble_share >= BUBBLE_VICTIM_SHARE:
            # a downstream pipeline stage: its step is long because it waits for another stage
            summary = (
                f"Rank {rank} waits {ms(bubble)} per step ({pct(bubble_share)} of its step) in "
                f"pipeline Bubble for another stage; its own work is normal: {own}{wait_txt}"
            )
            summary_zh = (
                f"{rank}号卡每步在流水线气泡中等待其他阶段 {ms(bubble)}（占其步长的 "
                f"{pct(bubble_share)}），自身工作正常：{own_zh}{wait_zh}"
            )
            tags, cat = ("pipeline_bubble",), Category.COMMUNICATION
        elif link is not None:
            src, dst, tr, bw, med_bw = link
            summary = (
                f"Rank {rank} is on the slow {tr} link {src}→{dst} ({bw:.1f} GB/s vs a median of "
                f"{med_bw:.1f} GB/s): the collectives it takes part in wait for that link; its "
                f"own work is normal: {own}{wait_txt}"
            )
            summary_zh = (
                f"{rank}号卡位于慢链路 {src}→{dst}（{tr}，{bw:.1f} GB/s，同类中位数 {med_bw:.1f} GB/s）上："
                f"它参与的集合通信都在等这条链路；自身工作正常：{own_zh}{wait_zh}"
            )
            tags, cat = ("slow_link",), Category.COMMUNICATION
            # the late arrival is the link's transfer, not this rank's work
            summary = summary.replace(
                "it arrives last and the other ranks wait for it",
                "its transfers on the slow link finish last",
            )
            summary_zh = summary_zh.replace(
                "说明它最后到达，其他卡在等它", "它在慢链路上的传输最后完成"
            )
        elif waits_less:
            # arrives last although its own work is at the median: the delay is not its compute
            summary = (
                f"Rank {rank} arrives last at collectives although its own work is normal "
                f"({own}): the delay is in its communication, not its computation (see "
                f"slow_link){wait_txt}"
            )
            summary_zh = (
                f"{rank}号卡最后到达集合通信，但自身工作正常（{own_zh}）：延迟在通信而不在计算"
                f"（见 slow_link）{wait_zh}"
            )
            cat = Category.COMMUNICATION
        else:
            summary = f"Rank {rank} is not slow: {own}{wait_txt}"
            summary_zh = f"{rank}号卡 并不慢：{own_zh}{wait_zh}"
        findings.append(
            Finding(
                id=f"explain_rank.slow_rank.r{rank}",
                kind=FindingKind.SLOW_RANK,
                severity=Severity.INFO,
                summary=summary,
                summary_zh=summary_zh,
                ranks=(rank,),
                metrics=metrics,
                evidence=tuple(evidence),
                symptom_tags=tags,
                category=cat,
            )
        )
    return AnalyzerResult(
        "explain_rank", table, metrics=metrics, findings=tuple(findings), tables=tables
    )


def _slow_link_of(profile: Profile, rank: int) -> tuple[int, int, str, float, float] | None:
    """The slow link (src, dst, transport, GB/s, median GB/s) ``rank`` is an endpoint of, if any.

    Source: the ``slow_link`` analyzer (communication_matrix.json); ``None`` without matrix data.
    """
    from advisor_chat.analyzers.slow_link import SlowLinkParams, slow_link

    try:
        res = slow_link(profile, SlowLinkParams())
    except (NotAnswerableError, ToolArgumentError):
        return None
    for f in res.findings:
        if f.kind is FindingKind.SLOW_LINK and rank in f.ranks:
            m = f.metrics
            src, dst = int(m.get("src_rank", f.ranks[0])), int(m.get("dst_rank", f.ranks[-1]))
            t = res.table
            row = t[(t["src_rank"] == src) & (t["dst_rank"] == dst)]
            tr = str(row["transport"].iloc[0]) if not row.empty else ""
            return (
                src,
                dst,
                tr,
                float(m.get("bandwidth_gbps", np.nan)),
                float(m.get("median_gbps", np.nan)),
            )
    return None


def _comm_per_rank(profile: Profile, step: int | None) -> pd.DataFrame:
    ops = profile.get("comm_ops")
    cols = ["comm_wait_us", "comm_transit_us", "comm_synchronization_us"]
    if ops.empty:
        return pd.DataFrame(columns=cols, dtype="float64")
    if step is not None:
        ops = ops[ops["step"] == step]
    ops = ops[~is_p2p(ops["op_type"])]
    per_step = ops.groupby(["rank", "step"])[["wait_ms", "transit_ms", "synchronization_ms"]].sum(
        min_count=1
    )
    out = per_step.groupby("rank").mean() * 1000.0
    out.columns = cols
    out.index = out.index.astype(int)
    return out


def _trend(st: pd.DataFrame, rank: int, peers: list[int]) -> pd.DataFrame:
    sub = st[st["rank"].isin(peers)]
    med = sub[sub["rank"] != rank].groupby("step")[["computing_us", "free_us"]].median()
    mine = sub[sub["rank"] == rank].set_index("step")[["computing_us", "free_us"]]
    d = (mine - med).dropna()
    d.columns = ["computing_delta_us", "free_delta_us"]
    return d.reset_index()


def _heavy_peers(profile: Profile, rank: int, peers_all: list[int]) -> tuple[list[int], int]:
    """Ranks whose heavy tables (kernels, host_dispatch) are read: (ranks, peer sample size).

    Every peer up to ``2 * PEER_SAMPLE`` peers (sample size 0); else the rank plus
    ``PEER_SAMPLE`` evenly spaced peers (deterministic), whose medians the text then states.
    """
    others = sorted(int(r) for r in peers_all if int(r) != rank)
    if len(others) <= 2 * PEER_SAMPLE:
        return sorted({rank, *others}), 0
    picked = spread_sample(others, PEER_SAMPLE)
    return sorted({rank, *picked}), len(picked)


def _sample_txt(n_sample: int) -> tuple[str, str]:
    if not n_sample:
        return "", ""
    return (
        f" (over a peer sample of {n_sample} ranks)",
        f"（基于 {n_sample} 张抽样对照卡）",
    )


def _launch_evidence(
    profile: Profile, rank: int, peers: list[int], step: int | None, n_sample: int = 0
) -> tuple[str, str, Evidence | None, pd.DataFrame | None, bool]:
    """Launch-delay text (en, zh), evidence, per-rank table and whether they show host-bound.

    The last item is True only when host_dispatch data exists for the rank and its p90 launch
    delay is below half of the peers' median p90 (the device starts tasks as soon as issued).
    """
    hd = profile.host_dispatch_for(peers)[["rank", "step", "launch_delay_us"]]
    if step is not None and not hd.empty:
        hd = hd[hd["step"] == step]
    hd = hd[hd["rank"].isin(peers)]
    if hd.empty or not bool((hd["rank"] == rank).any()):
        return (
            " (no host_dispatch data to show launch delays: collect with the CPU activity / "
            "Level1 trace_view.json)",
            "（缺少 host_dispatch 数据，无法给出下发时延）",
            None,
            None,
            False,
        )
    g = hd.groupby("rank")["launch_delay_us"]
    lt = pd.DataFrame(
        {
            "p50_us": g.quantile(0.5),
            "p90_us": g.quantile(0.9),
            "max_us": g.max(),
            "launches": g.size(),
        }
    )
    lt.index = lt.index.astype(int)
    others = lt.drop(index=rank, errors="ignore")
    p90, p50, mx = (float(cast(float, lt.at[rank, c])) for c in ("p90_us", "p50_us", "max_us"))
    peer_p90 = float(others["p90_us"].median()) if not others.empty else np.nan
    ev = Evidence(
        "host_dispatch",
        profile.cite("host_dispatch", rank),
        {"rank": rank},
        "launch_delay_us = device start − host API start; percentiles per rank",
    )
    host_bound = bool(np.isfinite(peer_p90) and p90 < 0.5 * peer_p90)
    if host_bound:
        why = (
            " — short: the device starts each task as soon as the host issues it, so the device "
            "waits for the host (host-bound)"
        )
        why_zh = "——时延短：主机一下发设备就执行，说明设备在等主机（下发瓶颈）"
    elif np.isfinite(peer_p90) and p90 > 2 * peer_p90:
        why = " — long: tasks wait in the launch queue longer than on the peers"
        why_zh = "——时延长：任务在下发队列中等待比同组更久"
    else:
        why, why_zh = "", ""
    smp, smp_zh = _sample_txt(n_sample)
    return (
        f"; its launch delays are p50 {p50:.0f} us, p90 {p90:.0f} us, max {mx:.0f} us vs the "
        f"peers' median p90 {peer_p90:.0f} us{smp}{why}",
        f"；下发时延 p50 {p50:.0f} us、p90 {p90:.0f} us、最大 {mx:.0f} us，同组 p90 中位数 {peer_p90:.0f} us{smp_zh}{why_zh}",
        ev,
        lt.reset_index(),
        host_bound,
    )


def _op_evidence(
    profile: Profile, rank: int, peers: list[int], step: int | None, n_sample: int = 0
) -> tuple[str, str, Evidence | None, pd.DataFrame | None]:
    k = profile.kernels_for(peers)[
        ["rank", "step", "name", "op_type", "accelerator_core", "duration_us"]
    ]
    if step is not None and not k.empty:
        k = k[k["step"] == step]
    k = k[k["rank"].isin(peers)]
    if k.empty or not bool((k["rank"] == rank).any()):
        return (
            " (no kernel data to name the operators: kernel_details.csv is needed)",
            "（缺少 kernel 数据，无法定位算子）",
            None,
            None,
        )
    k = k[~is_comm_kernel(k)]
    nsteps = k.groupby("rank")["step"].nunique().clip(lower=1)
    agg = k.groupby(["rank", "op_type"])["duration_us"].agg(["sum", "size"]).reset_index()
    agg["per_step_us"] = agg["sum"] / agg["rank"].map(nsteps)
    agg["per_step_count"] = agg["size"] / agg["rank"].map(nsteps)
    mine = agg[agg["rank"] == rank].set_index("op_type")
    peer = agg[agg["rank"] != rank]
    all_types = agg["op_type"].unique()
    n_peers = max(peer["rank"].nunique(), 1)
    keyed = peer.set_index(["op_type", "rank"])
    piv = keyed["per_step_us"].unstack(fill_value=0.0)  # type: ignore[arg-type]
    pivc = keyed["per_step_count"].unstack(fill_value=0.0)  # type: ignore[arg-type]
    med = (
        piv.reindex(all_types, fill_value=0.0).median(axis=1)
        if n_peers
        else pd.Series(0.0, index=all_types)
    )
    medc = pivc.reindex(all_types, fill_value=0.0).median(axis=1)
    od = pd.DataFrame(
        {
            "rank_us": mine["per_step_us"].reindex(all_types, fill_value=0.0),
            "median_us": med,
            "rank_count": mine["per_step_count"].reindex(all_types, fill_value=0.0),
            "median_count": medc,
        }
    )
    od["delta_us"] = od["rank_us"] - od["median_us"]
    od = od.sort_values("delta_us", ascending=False)
    od.index.name = "op_type"
    od = od.reset_index()[
        ["op_type", "rank_us", "median_us", "delta_us", "rank_count", "median_count"]
    ]
    top = od.head(3)
    parts = ", ".join(
        f"{t} +{ms(d)} ({c:.0f} vs {mc:.0f} calls)"
        for t, d, c, mc in zip(
            top["op_type"], top["delta_us"], top["rank_count"], top["median_count"], strict=False
        )
        if d > 0
    )
    ev = Evidence(
        "kernels",
        profile.cite("kernels", rank),
        {"rank": rank, "op_types": top["op_type"].tolist()},
        "per op type: kernel time per step on the rank − median over peers",
    )
    smp, smp_zh = _sample_txt(n_sample)
    return (
        f"; largest operator deltas{smp}: {parts}" if parts else "",
        f"；算子差异最大{smp_zh}：{parts}" if parts else "",
        ev,
        od,
    )
