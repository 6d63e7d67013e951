"""Slow links: links and ranks whose bandwidth is far below peers of the same transport."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from pydantic import Field

from advisor_chat.analyzers._common import (
    WAIT_RATIO_THRESHOLD,
    comm_ops_missing_why,
    format_ranks,
    is_p2p,
    median_step_us,
    ms,
    pct,
    severity,
    str_map,
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
from advisor_chat.errors import ToolArgumentError
from advisor_chat.ingest.profile import Profile

#: A link (or rank) whose bandwidth is below this fraction of the median of its peers of the
#: same transport is slow. Peers must be comparable: the link's transfer per op must be at least
#: half of the peers' median (small transfers are latency-bound, not bandwidth-bound).
SLOW_RATIO = 0.6
#: Small-packet rule of msprof-analyze advisor (rules/en/packet.yaml, public-cases.md App. A):
#: > 20 % of SDMA transfers under 16 MB or of RDMA transfers under 1 MB.
SMALL_SHARE = 0.2
SMALL_MB = {"SDMA": 16.0, "RDMA": 1.0}
#: Small transfers that take less than this share of the step are not worth a finding.
MIN_SMALL_TIME_SHARE = 0.005
_SDMA_FAMILY = ("HCCS", "PCIE", "SIO", "SDMA")
_AGG = r"(?i)total|-top\d*@?|-middle|-bottom"
_TOTAL = r"(?i)-total(?:@|$)"

Transport = Literal["HCCS", "PCIE", "RDMA", "SDMA", "SIO"]


class SlowLinkParams(Params):
    """Parameters of :func:`slow_link`."""

    group: str | None = Field(
        default=None, description="Communication group hash to check; default: all groups."
    )
    transport: Transport | None = Field(
        default=None,
        description="Transport to check: HCCS, PCIE, RDMA, SDMA or SIO; default: all.",
    )


@register("slow_link", SlowLinkParams, order=30)
def slow_link(profile: Profile, params: SlowLinkParams) -> AnalyzerResult:
    """Find slow links: src → dst links (communication matrix) and ranks (per-transport bandwidth) far below the median of their peers of the same transport (HCCS, PCIE, RDMA, SDMA, SIO), small-packet transfers, and the wait-ratio > 0.2 rule.

    Link bandwidth = Σ transit size / Σ transit time over the link's ops (MB/ms = GB/s), LOCAL
    and self links excluded, op-type aggregate rows ('total', 'top') skipped when per-op rows
    exist. A link is slow when its bandwidth < 0.6 × the median of links of the same transport
    with comparable transfer sizes. Small packets: share of transfers under 16 MB (SDMA family)
    or 1 MB (RDMA), from packet counts when the ingest provides them, else per op transit size;
    > 20 % is a finding when those transfers take ≥ 0.5 % of the step. Wait-ratio rule (CANN msprof cluster analysis): the rank with the
    largest Σ wait / Σ elapse > 0.2 either also has synchronization ratio > 0.2 (ranks arrive
    at different times: a slow rank, not a link) or not (probable slow link).

    Args:
        profile: Canonical profile; uses ``comm_matrix``, ``comm_bandwidth``, ``comm_ops`` (ms,
            MB, GB/s) and the step time (µs) for severity.
        params: ``group`` and ``transport`` filters.

    Returns:
        AnalyzerResult whose ``table`` has one row per link: ``group``, ``src_rank``,
        ``dst_rank``, ``transport``, ``ops`` (count), ``transit_size_mb`` (MB, sum),
        ``transit_time_ms`` (ms, sum), ``bandwidth_gbps`` (GB/s), ``median_gbps`` (GB/s, peers of
        the same transport), ``ratio`` (bandwidth / median), ``slow`` (bool). Extra tables:
        ``rank_bandwidth`` (per rank × transport: ``rank``, ``transport``, ``transit_size_mb``,
        ``transit_time_ms``, ``bandwidth_gbps``, ``median_gbps``, ``ratio``, ``slow``),
        ``small_packets`` (per transport family: ``transport``, ``threshold_mb``,
        ``small_share``, ``small_volume_share``, ``basis``), ``wait_ratio`` (per rank:
        ``wait_ratio``, ``synchronization_ratio``, ``wait_ms``), ``transport_standard`` (per
        transport with a standard bandwidth: ``transport``, ``links``, ``median_gbps``,
        ``min_gbps``, ``max_gbps``, ``standard_gbps``, ``utilisation``, ``large_packet_ratio``,
        ``transit_size_mb`` and ``transit_time_ms`` per link, sums). A transport whose links run
        below ``STANDARD_UTILISATION`` of its standard bandwidth with large transfers
        (``large_packet_ratio`` ≥ 0.8, or unknown) is a finding: every link of it is slow
        (configuration or fabric), the CANN msprof slow-link rule.

    Raises:
        ToolArgumentError: ``group`` is not in the communication data.
    """
    mx = profile.get("comm_matrix")
    bw = profile.get("comm_bandwidth")
    ops = profile.get("comm_ops")
    if params.group is not None:
        groups = sorted(
            {str(g) for df in (mx, bw, ops) if not df.empty for g in df["group"].dropna().unique()}
        )
        if params.group not in groups:
            raise ToolArgumentError(
                f"group {params.group!r} is not in the communication data; groups are {groups}"
            )
        mx, bw, ops = (
            df[df["group"] == params.group] if not df.empty else df for df in (mx, bw, ops)
        )
    if params.transport is not None:
        mx = mx[mx["transport"].str.upper() == params.transport] if not mx.empty else mx
        bw = bw[bw["transport"].str.upper() == params.transport] if not bw.empty else bw
    step_us = median_step_us(profile) or float("nan")
    n_steps = max(len(profile.steps), 1)
    notes: list[str] = []
    findings: list[Finding] = []

    links = _links(mx, ops)
    findings += _link_findings(profile, links, step_us, _nsteps(mx, n_steps))
    rank_bw = _rank_bandwidth(bw)
    findings += _rank_findings(
        profile,
        rank_bw,
        step_us,
        _nsteps(bw, n_steps),
        have_links=bool(links["slow"].any()) if not links.empty else False,
    )
    small = _small_packets(bw)
    findings += _small_findings(profile, bw, small, step_us, _nsteps(bw, n_steps))
    wr = _wait_ratio(ops)
    standard = _transport_standard(links, small)
    std_findings = _standard_findings(profile, standard, step_us, _nsteps(mx, n_steps))
    # every comparable link at its peers' bandwidth and no transport below its standard: the
    # links themselves were measured healthy
    links_ok = (
        not links.empty
        and bool(_comparable(links, "transport").any())
        and not bool(links["slow"].any())
        and not std_findings
    )
    findings += _wait_findings(profile, wr, ops, step_us, _nsteps(ops, n_steps), links_ok)
    findings += std_findings
    notes_zh: list[str] = []
    if mx.empty:
        notes.append(
            "no communication matrix (communication_matrix.json): link-level check unavailable"
        )
        notes_zh.append("没有通信矩阵（communication_matrix.json）：无法做链路级检查")
    if bw.empty:
        notes.append("no per-transport bandwidth (communication.json bandwidth info)")
        notes_zh.append("没有按传输类型的带宽（communication.json 的带宽信息）")
    if ops.empty:
        why = comm_ops_missing_why(profile)
        notes.append(f"no comm_ops: wait-ratio rule unavailable ({why})")
        notes_zh.append(
            f"没有集合通信明细（comm_ops）：无法使用等待比例规则（{comm_ops_missing_why(profile, True)}）"
        )
    findings.sort(key=lambda f: (f.severity.rank, -f.metrics.get("extra_us", 0.0)))
    metrics = {
        "links_count": float(len(links)),
        "slow_links_count": float(links["slow"].sum()) if not links.empty else 0.0,
        "median_step_us": step_us,
    }
    healthy_metrics, healthy_note, healthy_zh = _healthy(links, rank_bw, findings)
    metrics |= healthy_metrics
    if healthy_note:
        notes.insert(0, healthy_note)
        notes_zh.insert(0, healthy_zh)
    return AnalyzerResult(
        "slow_link",
        links,
        metrics=metrics,
        findings=tuple(findings),
        notes=tuple(notes),
        notes_zh=tuple(notes_zh) if len(notes_zh) == len(notes) else (),
        tables={
            "rank_bandwidth": rank_bw,
            "small_packets": small,
            "wait_ratio": wr,
            "transport_standard": standard,
        },
    )


def _healthy(
    links: pd.DataFrame, rank_bw: pd.DataFrame, findings: list[Finding]
) -> tuple[dict[str, float], str, str]:
    """Explicit "no slow link" result: bandwidth range per transport when nothing is slow.

    Uses the link table (communication_matrix.json) when it has rows, else the per-rank
    bandwidth (communication.json). Returns metrics (``healthy_links_count``,
    ``link_min_gbps``, ``link_median_gbps``, ``link_max_gbps``, ``link_min_ratio``; of the
    transport with most rows) and a note naming every transport, in English and Chinese; empty
    when a link or rank is slow or there is no bandwidth data.
    """
    src, what = (links, "links") if not links.empty else (rank_bw, "rank transfers")
    # Chinese: a count word and its noun ("128 条链路", "2 张卡的传输")
    what_zh = "条链路" if not links.empty else "张卡的传输"
    noun_zh = "链路" if not links.empty else "传输"
    if (
        src.empty
        or bool(src["slow"].any())
        or any(f.kind in (FindingKind.SLOW_LINK,) for f in findings)
    ):
        return {}, "", ""
    parts, parts_zh = [], []
    for tr, sub in src.groupby("transport"):
        bw = sub["bandwidth_gbps"].astype(float)
        one = what.removesuffix("s")  # "1 RDMA link", "1 RDMA rank transfer"
        parts.append(
            f"1 {tr} {one}, {bw.iloc[0]:.1f} GB/s"
            if len(sub) == 1
            else f"{len(sub)} {tr} {what}, {bw.min():.1f}-{bw.max():.1f} GB/s "
            f"(median {bw.median():.1f} GB/s)"
        )
        parts_zh.append(
            (f"{tr} 链路 {len(sub)} 条" if not links.empty else f"{len(sub)} 张卡的 {tr} 传输")
            + f"，{bw.min():.1f}-{bw.max():.1f} GB/s"
            f"（中位数 {bw.median():.1f} GB/s）"
        )
    main = src[src["transport"] == src["transport"].value_counts().idxmax()]
    bw = main["bandwidth_gbps"].astype(float)
    comp = _comparable(src, "transport")
    metrics = {
        "healthy_links_count": float(len(src)),
        "link_min_gbps": float(bw.min()),
        "link_median_gbps": float(bw.median()),
        "link_max_gbps": float(bw.max()),
        "link_min_ratio": float(main["ratio"].min()),
        "compared_links_count": float(comp.sum()),
    }
    # the 0.6x rule only judges comparable rows (>= 3 per transport, transfers >= half the
    # median size): the note states the lowest ratio among those, and says what was not compared
    skipped = int((~comp).sum())
    if comp.any():
        low = float(src.loc[comp, "ratio"].min())
        metrics["compared_min_ratio"] = low
        judged = (
            f"none of the {int(comp.sum())} {what} with comparable transfer sizes is below "
            f"{SLOW_RATIO}x the median of its transport (lowest {low:.2f}x)"
        )
        judged_zh = (
            f"传输量可比的 {int(comp.sum())} {what_zh}中，没有低于同类中位数 {SLOW_RATIO} 倍的"
            f"（最低 {low:.2f} 倍）"
        )
        if skipped:
            judged += (
                f"; {skipped} not compared (fewer than 3 of their transport, or transfers "
                "under half the median size, which measure latency rather than bandwidth)"
            )
            judged_zh += f"；{skipped} 条未比较（同类不足 3 条，或传输量不到中位数的一半，测的是时延而不是带宽）"
    else:
        judged = (
            f"too few comparable {what} to judge: the {SLOW_RATIO}x rule needs at least 3 of "
            "a transport with comparable transfer sizes"
        )
        judged_zh = f"可比较的{noun_zh}太少：{SLOW_RATIO} 倍规则需要同类中至少 3 条传输量可比的链路"
    # a link with (almost) no bandwidth is never passed over in silence, judged or not
    dead = src[src["bandwidth_gbps"].astype(float) < ZERO_GBPS]
    if not dead.empty:
        metrics["zero_bandwidth_links_count"] = float(len(dead))
        if "src_rank" in dead and "dst_rank" in dead:
            names = [
                f"{int(r['src_rank'])}→{int(r['dst_rank'])} ({r['transport']})"
                for _, r in dead.head(4).iterrows()
            ]
        else:
            names = [
                f"rank {int(r['rank'])} ({r['transport']})" for _, r in dead.head(4).iterrows()
            ]
        one = "one link" if len(dead) == 1 else f"{len(dead)} {what}"
        judged += (
            f"; {one} at 0.0 GB/s ({', '.join(names)}): not judged, it may carry almost no "
            "traffic or be broken"
        )
        judged_zh += f"；{len(dead)} {what_zh}为 0.0 GB/s（{', '.join(names)}）：未判断，可能几乎没有流量或已损坏"
    lead = "no slow link: " if comp.any() else "no slow link found (not enough links to judge): "
    lead_zh = "没有慢链路：" if comp.any() else "未发现慢链路（可比较的链路太少，无法判断）："
    note = lead + "; ".join(parts) + "; " + judged
    note_zh = lead_zh + "；".join(parts_zh) + "；" + judged_zh
    return metrics, note, note_zh


#: Below this bandwidth (GB/s) a link is shown as 0.0 GB/s and named in the note.
ZERO_GBPS = 0.05
#: Standard bandwidth of one link per transport, GB/s (Atlas A2, as CANN msprof's slow-link rule
#: uses: RDMA 12.5, HCCS 18, PCIE 20; A3-class cards are faster, so this under-flags them).
STANDARD_GBPS = {"RDMA": 12.5, "HCCS": 18.0, "PCIE": 20.0}
#: A transport's median link below this share of its standard, with large transfers, is slow.
STANDARD_UTILISATION = 0.8
#: Large transfers: at least this share of a transport's transfers are large (msprof: 0.8).
LARGE_PACKET_RATIO = 0.8
#: Large-packet size per transport (MB), as the small-packet rule uses (RDMA 1 MB, SDMA family 16).
LARGE_PACKET_MB = {"RDMA": 1.0, "HCCS": 16.0, "PCIE": 16.0}
#: A transport below standard is a finding when its transit excess is at least this share of the step.
STANDARD_MIN_SHARE = 0.005


def _comparable(df: pd.DataFrame, key: str) -> pd.Series:
    """Rows the 0.6x rule can judge: >= 3 rows of their ``key`` and >= half the median size/op."""
    size_per_op = df["transit_size_mb"] / df["ops"].clip(lower=1)
    med_size = size_per_op.groupby(df[key]).transform("median")
    count = df.groupby(key)["bandwidth_gbps"].transform("size")
    return ((count >= 3) & (size_per_op >= 0.5 * med_size)).fillna(False).astype(bool)


def _nsteps(df: pd.DataFrame, default: int) -> int:
    """Number of steps a communication table covers (``default`` when empty)."""
    n = int(df["step"].nunique()) if not df.empty else 0
    return n if n > 0 else default


def _peer_ratio(df: pd.DataFrame, key: str) -> pd.DataFrame:
    """Add ``median_gbps``, ``ratio`` and ``slow`` comparing rows within each ``key`` group."""
    df = df.copy()
    med_bw = df.groupby(key)["bandwidth_gbps"].transform("median")
    df["median_gbps"] = med_bw
    df["ratio"] = df["bandwidth_gbps"] / med_bw.where(med_bw > 0)
    df["slow"] = (df["ratio"] < SLOW_RATIO) & _comparable(df, key)
    df["slow"] = df["slow"].fillna(False).astype(bool)
    return df


def _links(mx: pd.DataFrame, ops: pd.DataFrame | None = None) -> pd.DataFrame:
    """Link table: Σ transit size and time per (group, src, dst, transport) over the matrix rows.

    ``communication_matrix.json`` holds, per (op type, group, step) and link, five records of
    single operators (``top1``, ``middle``, ``bottom1..3``: the fastest, median and slowest
    operator) and one sum (``total``); the cluster output and the DB export hold one record per
    operator instead. Per-operator records are summed when there are any; otherwise only the
    ``total`` records are (summing the others too counted some operators twice).

    Args:
        mx: ``comm_matrix`` rows (MB, ms).
        ops: ``comm_ops`` rows; with aggregate-only matrices, ``ops`` of a link is the number of
            operators of that type the link's source rank ran in that group and step (from these
            rows; 1 per ``total`` record when they are missing).
    """
    cols = [
        "group",
        "src_rank",
        "dst_rank",
        "transport",
        "ops",
        "transit_size_mb",
        "transit_time_ms",
        "bandwidth_gbps",
        "median_gbps",
        "ratio",
        "slow",
    ]
    if mx.empty:
        return pd.DataFrame(columns=cols)
    # ~10^5-10^6 rows: filter only the columns the link table needs
    keep = ["group", "step", "src_rank", "dst_rank", "transport", "op_name"]
    keep += ["transit_size_mb", "transit_time_ms"]
    m = mx[[c for c in keep if c in mx.columns]]
    m = m[(m["transport"].str.upper() != "LOCAL") & (m["src_rank"] != m["dst_rank"])]
    m, per_op = link_records(m)
    m = m[m["transit_time_ms"] > 0]
    if m.empty:
        return pd.DataFrame(columns=cols)
    m = m.assign(ops=1) if per_op else m.assign(ops=_ops_per_total(m, ops))
    g = m.groupby(["group", "src_rank", "dst_rank", "transport"], dropna=False)
    links = g.agg(
        ops=("ops", "sum"),
        transit_size_mb=("transit_size_mb", "sum"),
        transit_time_ms=("transit_time_ms", "sum"),
    ).reset_index()
    links["bandwidth_gbps"] = links["transit_size_mb"] / links["transit_time_ms"]
    links["transport"] = links["transport"].astype(str).str.upper()
    return _peer_ratio(links, "transport")[cols].sort_values("ratio").reset_index(drop=True)


def link_records(mx: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """The ``comm_matrix`` rows that count each transfer once, and whether they are per operator.

    Per-operator rows when there are any (cluster output, DB export); otherwise the
    ``{type}-total`` rows of ``communication_matrix.json`` (its ``top1``/``middle``/``bottom*``
    records repeat single operators the ``total`` already sums); otherwise the rows as they are.
    """
    if mx.empty or "op_name" not in mx.columns:
        return mx, True
    # the aggregate-row pattern is matched once per distinct operator name, not per row
    codes, names = pd.factorize(mx["op_name"].astype(str))
    kinds = pd.Series(names)
    agg_mask = kinds.str.contains(_AGG, regex=True).to_numpy(dtype=bool)[codes]
    if (~agg_mask).any():
        return mx[~agg_mask], True
    total_mask = kinds.str.contains(_TOTAL, regex=True).to_numpy(dtype=bool)[codes]
    return (mx[total_mask] if total_mask.any() else mx), False


def _ops_per_total(m: pd.DataFrame, ops: pd.DataFrame | None) -> np.ndarray:
    """Operators behind each ``{type}-total`` matrix row.

    The ``comm_ops`` rows of the source rank with that group, step and type (1 where
    ``comm_ops`` has none).
    """
    one = np.ones(len(m), dtype="int64")
    if ops is None or ops.empty or "step" not in m.columns or "op_type" not in ops.columns:
        return one
    op_type = str_map(ops["op_type"], lambda s: s.astype(str).str.lower())
    counts = ops.groupby(["rank", "group", "step", op_type]).size()
    typ = str_map(
        m["op_name"],
        lambda s: s.astype(str).str.lower().str.extract(r"^([a-z0-9_]+?)-", expand=False),
    )
    key = pd.MultiIndex.from_arrays(
        [m["src_rank"].to_numpy(), m["group"].to_numpy(), m["step"].to_numpy(), typ.to_numpy()]
    )
    found = counts.reindex(key).to_numpy(dtype="float64")
    return np.where(np.isnan(found) | (found < 1), one, found).astype("int64")


def _rank_bandwidth(bw: pd.DataFrame) -> pd.DataFrame:
    cols = [
        "rank",
        "transport",
        "ops",
        "transit_size_mb",
        "transit_time_ms",
        "bandwidth_gbps",
        "median_gbps",
        "ratio",
        "slow",
    ]
    if bw.empty:
        return pd.DataFrame(columns=cols)
    b = bw[bw["transit_time_ms"] > 0]
    if b.empty:
        return pd.DataFrame(columns=cols)
    g = b.groupby(["rank", b["transport"].astype(str).str.upper()])
    out = g.agg(
        ops=("op_name", "size"),
        transit_size_mb=("transit_size_mb", "sum"),
        transit_time_ms=("transit_time_ms", "sum"),
    ).reset_index()
    out["bandwidth_gbps"] = out["transit_size_mb"] / out["transit_time_ms"]
    return (
        _peer_ratio(out, "transport")[cols]
        .sort_values(["transport", "ratio"])
        .reset_index(drop=True)
    )


def _extra_us(time_ms: float, size_mb: float, median_gbps: float, n_steps: int) -> float:
    """Per-step µs the transfer would save at the peers' median bandwidth."""
    if not (median_gbps > 0):
        return 0.0
    return max(time_ms - size_mb / median_gbps, 0.0) * 1000.0 / n_steps


def _link_findings(
    profile: Profile, links: pd.DataFrame, step_us: float, n_steps: int
) -> list[Finding]:
    out = []
    for _, lk in links[links["slow"]].iterrows() if not links.empty else []:
        extra = _extra_us(lk["transit_time_ms"], lk["transit_size_mb"], lk["median_gbps"], n_steps)
        share = extra / step_us if step_us > 0 else float("nan")
        src, dst, tr = int(lk["src_rank"]), int(lk["dst_rank"]), str(lk["transport"])
        tag = {"RDMA": "rdma_low_bandwidth", "HCCS": "hccs_low_bandwidth"}.get(tr)
        out.append(
            Finding(
                id=f"slow_link.slow_link.{src}_{dst}_{tr.lower()}",
                kind=FindingKind.SLOW_LINK,
                severity=severity(share),
                summary=(
                    f"Slow link {src} -> {dst} ({tr}, group {lk['group']}): {lk['bandwidth_gbps']:.2f} GB/s vs the "
                    f"median {lk['median_gbps']:.2f} GB/s of {tr} links (ratio {lk['ratio']:.2f}); at the median "
                    f"bandwidth its transfers would take {ms(extra)} less per step"
                ),
                summary_zh=(
                    f"慢链路 {src} -> {dst}（{tr}）：带宽 {lk['bandwidth_gbps']:.2f} GB/s，同类链路中位数 "
                    f"{lk['median_gbps']:.2f} GB/s（比值 {lk['ratio']:.2f}）；按中位数带宽每步可少 {ms(extra)}"
                ),
                ranks=tuple(sorted({src, dst})),
                metrics={
                    "bandwidth_gbps": float(lk["bandwidth_gbps"]),
                    "median_gbps": float(lk["median_gbps"]),
                    "ratio": float(lk["ratio"]),
                    "transit_size_mb": float(lk["transit_size_mb"]),
                    "transit_time_ms": float(lk["transit_time_ms"]),
                    "extra_us": extra,
                    "src_rank": float(src),
                    "dst_rank": float(dst),
                },
                evidence=(
                    Evidence(
                        "comm_matrix",
                        profile.cite("comm_matrix"),
                        {
                            "group": str(lk["group"]),
                            "src_rank": src,
                            "dst_rank": dst,
                            "transport": tr,
                        },
                        "bandwidth = Σ Transit Size(MB) / Σ Transit Time(ms); median over links of the same transport",
                    ),
                ),
                symptom_tags=("slow_link", tag) if tag else ("slow_link",),
                estimated_gain_us=extra,
                category=Category.COMMUNICATION,
            )
        )
    return out


def _rank_findings(
    profile: Profile, rb: pd.DataFrame, step_us: float, n_steps: int, *, have_links: bool
) -> list[Finding]:
    out: list[Finding] = []
    if rb.empty:
        return out
    for _, r in rb[rb["slow"]].iterrows():
        if have_links:
            continue  # the link-level finding names the link; the rank view would repeat it
        extra = _extra_us(r["transit_time_ms"], r["transit_size_mb"], r["median_gbps"], n_steps)
        share = extra / step_us if step_us > 0 else float("nan")
        rk, tr = int(r["rank"]), str(r["transport"])
        tag = {"RDMA": "rdma_low_bandwidth", "HCCS": "hccs_low_bandwidth"}.get(tr)
        out.append(
            Finding(
                id=f"slow_link.slow_link.rank{rk}_{tr.lower()}",
                kind=FindingKind.SLOW_LINK,
                severity=severity(share),
                summary=(
                    f"Rank {rk}'s {tr} bandwidth is {r['bandwidth_gbps']:.2f} GB/s vs the median "
                    f"{r['median_gbps']:.2f} GB/s of the other ranks (ratio {r['ratio']:.2f}); one of its {tr} "
                    f"links is probably degraded ({ms(extra)} per step at stake)"
                ),
                summary_zh=f"{rk}号卡 的 {tr} 带宽 {r['bandwidth_gbps']:.2f} GB/s，其他卡中位数 {r['median_gbps']:.2f} GB/s（比值 {r['ratio']:.2f}），其链路可能劣化",
                ranks=(rk,),
                metrics={
                    "bandwidth_gbps": float(r["bandwidth_gbps"]),
                    "median_gbps": float(r["median_gbps"]),
                    "ratio": float(r["ratio"]),
                    "extra_us": extra,
                },
                evidence=(
                    Evidence(
                        "comm_bandwidth",
                        profile.cite("comm_bandwidth", rk),
                        {"rank": rk, "transport": tr},
                        "Σ size / Σ time per rank and transport",
                    ),
                ),
                symptom_tags=("slow_link", tag) if tag else ("slow_link",),
                estimated_gain_us=extra,
                category=Category.COMMUNICATION,
            )
        )
    return out


def _small_packets(bw: pd.DataFrame) -> pd.DataFrame:
    cols = [
        "transport",
        "threshold_mb",
        "small_share",
        "small_volume_share",
        "small_time_ms",
        "transfers",
        "basis",
    ]
    if bw.empty:
        return pd.DataFrame(columns=cols)
    b = bw[bw["transit_size_mb"] > 0].copy()
    b["tr"] = b["transport"].astype(str).str.upper()
    rows = []
    for fam, members in (("SDMA", _SDMA_FAMILY), ("RDMA", ("RDMA",))):
        sub = b[b["tr"].isin(members)]
        if fam == "SDMA" and (sub["tr"] != "SDMA").any():
            sub = sub[sub["tr"] != "SDMA"]  # SDMA = HCCS + PCIE + SIO: avoid counting twice
        if sub.empty:
            continue
        thr = SMALL_MB[fam]
        if sub["packet_count"].notna().any() and sub["small_packet_count"].notna().any():
            pc = sub["packet_count"].fillna(0).sum()
            share = float(sub["small_packet_count"].fillna(0).sum() / pc) if pc > 0 else np.nan
            basis = "packet counts (Size Distribution)"
        else:
            share = float((sub["transit_size_mb"] < thr).mean())
            basis = "transit size per op"
        small = sub["transit_size_mb"] < thr
        rows.append(
            {
                "transport": fam,
                "threshold_mb": thr,
                "small_share": share,
                "small_volume_share": float(
                    sub.loc[small, "transit_size_mb"].sum() / sub["transit_size_mb"].sum()
                ),
                "small_time_ms": float(sub.loc[small, "transit_time_ms"].sum()),
                "transfers": float(len(sub)),
                "basis": basis,
            }
        )
    return pd.DataFrame(rows, columns=cols)


def _small_findings(
    profile: Profile, bw: pd.DataFrame, small: pd.DataFrame, step_us: float, n_steps: int
) -> list[Finding]:
    out = []
    n_ranks = max(bw["rank"].nunique(), 1) if not bw.empty else 1
    for _, s in small.iterrows():
        if not (s["small_share"] > SMALL_SHARE):
            continue
        per_step = s["small_time_ms"] * 1000.0 / n_steps / n_ranks
        share = per_step / step_us if step_us > 0 else float("nan")
        if share < MIN_SMALL_TIME_SHARE:
            continue  # many small transfers, but they cost nothing measurable
        out.append(
            Finding(
                id=f"slow_link.communication.small_packets_{s['transport'].lower()}",
                kind=FindingKind.COMMUNICATION,
                severity=severity(share),
                summary=(
                    f"Small transfers: {pct(s['small_share'])} of {s['transport']} transfers are under "
                    f"{s['threshold_mb']:g} MB (rule: > 20%; basis: {s['basis']}), "
                    f"{pct(s['small_volume_share'])} of the volume; they take {ms(per_step)} per rank per step. "
                    "Bucket or fuse small collectives to reach full bandwidth"
                ),
                summary_zh=(
                    f"小包过多：{s['transport']} 传输中 {pct(s['small_share'])} 小于 {s['threshold_mb']:g} MB"
                    f"（阈值 20%），每卡每步耗时 {ms(per_step)}；建议合并小通信"
                ),
                metrics={
                    "small_share": float(s["small_share"]),
                    "small_volume_share": float(s["small_volume_share"]),
                    "small_time_us_per_step": per_step,
                },
                evidence=(
                    Evidence(
                        "comm_bandwidth",
                        profile.cite("comm_bandwidth"),
                        {"transport": s["transport"]},
                        f"share of transfers < {s['threshold_mb']:g} MB ({s['basis']})",
                    ),
                ),
                symptom_tags=("small_packets",),
                category=Category.COMMUNICATION,
            )
        )
    return out


def _wait_ratio(ops: pd.DataFrame) -> pd.DataFrame:
    cols = ["rank", "wait_ratio", "synchronization_ratio", "wait_ms", "elapse_ms"]
    if ops.empty:
        return pd.DataFrame(columns=cols)
    o = ops[~is_p2p(ops["op_type"])]
    if o.empty:
        return pd.DataFrame(columns=cols)
    g = o.groupby("rank")[["wait_ms", "synchronization_ms", "elapse_ms"]].sum(min_count=1)
    g["wait_ratio"] = g["wait_ms"] / g["elapse_ms"].where(g["elapse_ms"] > 0)
    g["synchronization_ratio"] = g["synchronization_ms"] / g["elapse_ms"].where(g["elapse_ms"] > 0)
    return g.reset_index()[cols]


def _wait_findings(
    profile: Profile,
    wr: pd.DataFrame,
    ops: pd.DataFrame,
    step_us: float,
    n_steps: int,
    links_ok: bool = False,
) -> list[Finding]:
    if wr.empty or not wr["wait_ratio"].notna().any():
        return []
    top = wr.iloc[int(np.nanargmax(wr["wait_ratio"].to_numpy(dtype=float)))]
    if not (top["wait_ratio"] > WAIT_RATIO_THRESHOLD):
        return []
    rk = int(top["rank"])
    low = wr.iloc[int(np.nanargmin(wr["wait_ratio"].to_numpy(dtype=float)))]
    per_step = float(top["wait_ms"]) * 1000.0 / n_steps
    share = per_step / step_us if step_us > 0 else float("nan")
    sync = float(top["synchronization_ratio"])
    high_ranks = wr.loc[wr["wait_ratio"] > WAIT_RATIO_THRESHOLD, "rank"].astype(int).tolist()
    if sync > WAIT_RATIO_THRESHOLD:
        verdict = (
            f"its synchronization ratio is {sync:.2f} (> 0.2): ranks reach the collectives at different times, "
            f"so this is a slow rank rather than a slow link — rank {int(low['rank'])} waits least "
            f"(wait ratio {low['wait_ratio']:.2f})"
        )
        verdict_zh = f"同步占比 {sync:.2f}（> 0.2）：各卡到达时间不一致，属于慢卡而非慢链路；等待最少的是 {int(low['rank'])}号卡"
        tags: tuple[str, ...] = ("comm_wait_high", "slow_rank")
    elif links_ok:
        # the CANN rule's "probable slow link", checked against the links: none is slow
        verdict = (
            f"its synchronization ratio is only {sync:.2f}: the wait is inside the transfers, yet "
            "every link compared runs at its peers' bandwidth and no transport is below its "
            "standard, so it is the transfers' own latency (small or many transfers), not a slow "
            "link"
        )
        verdict_zh = (
            f"同步占比仅 {sync:.2f}：等待发生在传输中，但参与比较的链路带宽都与同类相当，"
            "也没有哪种传输低于标准带宽，所以是传输本身的时延（小包或通信次数多），不是慢链路"
        )
        tags = ("comm_wait_high",)
    else:
        verdict = f"its synchronization ratio is only {sync:.2f}: the wait is inside the transfer, a probable slow link or bandwidth problem"
        verdict_zh = f"同步占比仅 {sync:.2f}：等待发生在传输中，可能是慢链路或带宽问题"
        tags = ("comm_wait_high", "slow_link")
    return [
        Finding(
            id="slow_link.communication.wait_ratio",
            kind=FindingKind.COMMUNICATION,
            # measured links clear the slow-link reading: a low-severity observation then
            severity=Severity.LOW if links_ok else severity(share),
            summary=(
                f"Rank {rk} spends {pct(top['wait_ratio'])} of its collective time waiting (wait ratio "
                f"{top['wait_ratio']:.2f} > 0.2; {ms(per_step)} per step; ranks with a wait ratio "
                f"over 0.2: {format_ranks(high_ranks)}); {verdict}"
            ),
            summary_zh=f"{rk}号卡 集合通信中 {pct(top['wait_ratio'])} 的时间在等待（等待占比 > 0.2，每步 {ms(per_step)}）；{verdict_zh}",
            ranks=tuple(high_ranks),
            metrics={
                "wait_ratio": float(top["wait_ratio"]),
                "synchronization_ratio": sync,
                "wait_us_per_step": per_step,
                "extra_us": per_step,
            },
            evidence=(
                Evidence(
                    "comm_ops",
                    profile.cite("comm_ops", rk),
                    {"rank": rk},
                    "wait ratio = Σ Wait Time / Σ Elapse Time over collectives (CANN rule: > 0.2)",
                ),
            ),
            symptom_tags=tags,
            category=Category.COMMUNICATION,
        )
    ]


def _transport_standard(links: pd.DataFrame, small: pd.DataFrame) -> pd.DataFrame:
    """Per transport with a standard bandwidth: its links' bandwidth against that standard.

    Columns as in :func:`slow_link` (``transport_standard``); ``large_packet_ratio`` is 1 −
    ``small_share`` of the transport's small-packet row (the SDMA family's for HCCS and PCIE);
    without one, 1 or 0 by the links' mean transfer per op against ``LARGE_PACKET_MB``.
    """
    cols = [
        "transport",
        "links",
        "median_gbps",
        "min_gbps",
        "max_gbps",
        "standard_gbps",
        "utilisation",
        "large_packet_ratio",
        "transit_size_mb",
        "transit_time_ms",
    ]
    if links.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for tr, sub in links.groupby(links["transport"].astype(str).str.upper()):
        std = STANDARD_GBPS.get(str(tr))
        bw = sub["bandwidth_gbps"].astype(float)
        if std is None or bw.empty:
            continue
        fam = [str(tr), "SDMA"] if str(tr) in ("HCCS", "PCIE") else [str(tr)]
        sm = small[small["transport"].isin(fam)] if not small.empty else small
        if len(sm):
            large = 1.0 - float(sm["small_share"].iloc[0])
        else:  # no packet counts: large when the transfers average a large-packet size or more
            per_op = float(sub["transit_size_mb"].sum()) / max(float(sub["ops"].sum()), 1.0)
            large = 1.0 if per_op >= LARGE_PACKET_MB.get(str(tr), 16.0) else 0.0
        med = float(bw.median())
        rows.append(
            {
                "transport": str(tr),
                "links": len(sub),
                "median_gbps": med,
                "min_gbps": float(bw.min()),
                "max_gbps": float(bw.max()),
                "standard_gbps": std,
                "utilisation": med / std,
                "large_packet_ratio": large,
                "transit_size_mb": float(sub["transit_size_mb"].sum()),
                "transit_time_ms": float(sub["transit_time_ms"].sum()),
            }
        )
    return pd.DataFrame(rows, columns=cols)


def _standard_findings(
    profile: Profile, standard: pd.DataFrame, step_us: float, n_steps: int
) -> list[Finding]:
    """A finding per transport whose every link runs below its standard with large transfers.

    ``extra_us``: per link and step, the transit time beyond what the standard bandwidth needs
    (mean over the transport's links): what each rank's transfers over it would take less.
    """
    out: list[Finding] = []
    for _, t in standard.iterrows():
        large = float(t["large_packet_ratio"])
        if not (float(t["utilisation"]) < STANDARD_UTILISATION and large >= LARGE_PACKET_RATIO):
            continue
        tr, n = str(t["transport"]), int(t["links"])
        extra = (
            max(
                float(t["transit_time_ms"])
                - float(t["transit_size_mb"]) / float(t["standard_gbps"]),
                0.0,
            )
            * 1000.0
            / max(n, 1)
            / max(n_steps, 1)
        )
        share = extra / step_us if step_us > 0 else float("nan")
        if not (share >= STANDARD_MIN_SHARE):
            continue
        rng = f"{t['min_gbps']:.1f}-{t['max_gbps']:.1f} GB/s"
        std = float(t["standard_gbps"])
        # the fastest link near its standard: the median is the slow links', not the fabric's
        some = std > 0 and float(t["max_gbps"]) >= STANDARD_UTILISATION * std
        head = (
            f"The median {tr} link is slow, not every one: {n} links at {rng}"
            if some
            else f"Every {tr} link is slow: {n} links at {rng}"
        )
        head_zh = (
            f"{tr} 链路中位数偏慢，但并非每条都慢：{n} 条链路带宽 {rng}"
            if some
            else f"所有 {tr} 链路都慢：{n} 条链路带宽 {rng}"
        )
        where = (
            f"the fastest reach the standard, so some links are slow, not the {tr} fabric as a whole"
            if some
            else f"the {tr} fabric or its configuration, not one link"
        )
        where_zh = (
            f"最快的链路达到标准，所以慢的是部分链路，而不是整个 {tr} 网络"
            if some
            else f"问题在 {tr} 网络或其配置，而不是某一条链路"
        )
        out.append(
            Finding(
                id=f"slow_link.transport.{tr.lower()}_below_standard",
                kind=FindingKind.SLOW_LINK,
                severity=severity(share),
                summary=(
                    f"{head} (median {t['median_gbps']:.1f} "
                    f"GB/s, {t['utilisation']:.0%} of the {t['standard_gbps']:.1f} GB/s standard of "
                    f"an {tr} link) with large transfers: {where}; at the standard bandwidth each "
                    f"link's transfers would take {ms(extra)} less per step"
                ),
                summary_zh=(
                    f"{head_zh}（中位数 {t['median_gbps']:.1f} GB/s，"
                    f"只有 {tr} 链路标准带宽 {t['standard_gbps']:.1f} GB/s 的 {t['utilisation']:.0%}），"
                    f"且传输都是大包：{where_zh}；按标准带宽每条链路每步可少 "
                    f"{ms(extra)}"
                ),
                metrics={
                    "median_gbps": float(t["median_gbps"]),
                    "min_gbps": float(t["min_gbps"]),
                    "max_gbps": float(t["max_gbps"]),
                    "standard_gbps": float(t["standard_gbps"]),
                    "utilisation": float(t["utilisation"]),
                    "links_count": float(n),
                    "extra_us": extra,
                },
                evidence=(
                    Evidence(
                        "comm_matrix",
                        profile.cite("comm_matrix"),
                        {"transport": tr},
                        "bandwidth = Σ Transit Size(MB) / Σ Transit Time(ms) per link; median "
                        "over the transport's links / its standard bandwidth (Atlas A2)",
                    ),
                ),
                symptom_tags=("slow_link", f"{tr.lower()}_low_bandwidth"),
                estimated_gain_us=extra,
                category=Category.COMMUNICATION,
            )
        )
    return out
