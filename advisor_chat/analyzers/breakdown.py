"""Cluster step breakdown and the compute / scheduling / communication classification."""

from __future__ import annotations

import re
from typing import cast

import numpy as np
import pandas as pd
from pydantic import Field

from advisor_chat.analyzers._common import (
    COMPONENTS,
    FREE_SHARE_HOST_BOUND,
    SPREAD_RATIO,
    TRANSIT_SHARE_LOW,
    comm_time_split,
    comm_wait_dominated,
    comm_wait_text,
    format_ranks,
    groups_table,
    missing_ranks,
    ms,
    pct,
    per_rank_mean,
    pipeline_stages,
    severity,
    stage_of,
    step_frame,
)
from advisor_chat.analyzers.base import (
    AnalyzerResult,
    Category,
    Evidence,
    Finding,
    FindingKind,
    Params,
    notes_in_chinese,
    register,
)
from advisor_chat.ingest.profile import Profile

#: Non-overlapped communication (excluding PP receive) above this share of the step on the rank
#: that waits least is a communication bottleneck: that rank's communication is mostly transfer.
COMM_SHARE_BOUND = 0.15
#: Pipeline bubble share of the step that is flagged; the bubble finding's estimated gain is an
#: upper bound: the Bubble time above this target share of the stage's step.
BUBBLE_SHARE_TARGET = 0.05

_DIMS = {
    "computing_us": (Category.COMPUTE, "Computing", "计算"),
    "free_us": (Category.SCHEDULING, "Free", "空闲(Free)"),
    "communication_not_overlapped_exclude_receive_us": (
        Category.COMMUNICATION,
        "Communication (Not Overlapped, excluding receive)",
        "未掩盖通信(不含接收)",
    ),
}


class BreakdownParams(Params):
    """Parameters of :func:`cluster_breakdown`."""

    step: int | None = Field(
        default=None,
        description="Step id (ProfilerStep#N) to analyse; default: mean over all steps.",
    )


@register("cluster_breakdown", BreakdownParams, order=10)
def cluster_breakdown(profile: Profile, params: BreakdownParams) -> AnalyzerResult:
    """Per-rank step breakdown (Computing, Communication Not Overlapped, Overlapped, Free, Bubble) and the bottleneck class (compute, scheduling or communication) from cross-rank spreads.

    The classification follows msprof-analyze advisor's slow-rank rule (ascend-formats.md §4.1):
    for Computing, Free and non-overlapped communication, ``gap = max − min`` over ranks of the
    per-step mean; ``gap > 5 %`` of the mean step time flags that dimension (Computing → compute
    problem, Free → scheduling problem). With pipeline stages the spread is taken within each
    stage (stages do different work). Communication is a problem when the rank that waits least
    still spends > 15 % of its step in non-overlapped communication (excluding PP receive), or
    its spread is not explained by the Computing/Free spread. Free > 10 % of the step is a
    ``host_bound`` finding; a stage's Bubble ≥ 5 % is a ``pipeline_bubble`` finding.

    Args:
        profile: Canonical profile; uses ``step_trace`` (µs), ``stage_trace``, ``comm_groups``.
        params: ``step`` selects one step (default: mean per step over all steps).

    Returns:
        AnalyzerResult whose ``table`` has one row per rank × step with columns ``rank``,
        ``step``, ``stage`` (pipeline stage index, -1 if unknown), ``computing_us``,
        ``communication_not_overlapped_us``, ``overlapped_us``, ``free_us``, ``bubble_us`` (µs,
        from step_trace_time.csv / cluster_step_trace_time.csv), ``step_us`` (µs, step_trace
        Stage+Bubble or computing + communication_not_overlapped + free), and the shares of
        ``step_us``: ``computing_share``, ``communication_not_overlapped_share``,
        ``free_share``, ``bubble_share`` (ratio 0..1). Extra tables: ``per_rank`` (same columns,
        mean per step), ``spreads`` (``scope``, ``dimension``, ``max_us``, ``min_us``,
        ``median_us``, ``gap_us``, ``gap_share`` of mean step, ``max_rank``, ``min_rank``), ``per_stage``,
        ``per_group`` (mean of member ranks, µs, and ``free_gap_us``/``computing_gap_us``) and
        ``extremes`` (one row per component over all ranks, from ``per_rank``: ``component``,
        ``max_rank``, ``max_us``, ``min_rank``, ``min_us``, ``median_us``, ``mean_us``, µs per step)
        for "which rank has the most Free" questions.

    Raises:
        ToolArgumentError: ``step`` is not in the step trace.
    """
    st = step_frame(profile, params.step)
    if st.empty:
        return AnalyzerResult(
            "cluster_breakdown",
            st,
            notes=(
                "not enough signal: no step trace (step_trace_time.csv / StepTraceTime) in the profile",
            ),
            notes_zh=("信号不足：数据中没有步骤耗时（step_trace_time.csv / StepTraceTime）",),
        )
    src = profile.cite("step_trace")
    stages = pipeline_stages(profile)
    smap = stage_of(stages)
    table = st[["rank", "step", *COMPONENTS, "step_us"]].copy()
    table.insert(2, "stage", table["rank"].map(smap).fillna(-1).astype("int64"))
    denom = table["step_us"].where(table["step_us"] > 0)
    for c, s in (
        ("computing_us", "computing_share"),
        ("communication_not_overlapped_us", "communication_not_overlapped_share"),
        ("free_us", "free_share"),
        ("bubble_us", "bubble_share"),
    ):
        table[s] = table[c] / denom

    pr = per_rank_mean(st)
    pr["stage"] = pr.index.map(lambda r: smap.get(int(r), -1))
    mean_step = float(pr["step_us"].mean())
    per_rank = table.drop(columns=["step"]).groupby("rank").mean()
    per_rank["stage"] = per_rank["stage"].astype("int64")
    per_rank = per_rank.reset_index()

    # --- spreads, within each stage when stages exist ---
    scopes: list[tuple[str, pd.DataFrame]] = []
    if stages:
        for i, ranks in enumerate(stages):
            sub = pr[pr.index.isin(ranks)]
            if len(sub) >= 2:
                scopes.append((f"stage {i} (ranks {format_ranks(ranks)})", sub))
    if not scopes:
        scopes = [(ALL_RANKS, pr)]
    spread_rows = []
    for scope, sub in scopes:
        scope_step = float(sub["step_us"].mean())
        for dim in _DIMS:
            col = sub[dim]
            spread_rows.append(
                {
                    "scope": scope,
                    "dimension": dim,
                    "max_us": float(col.max()),
                    "min_us": float(col.min()),
                    "median_us": float(col.median()),
                    "gap_us": float(col.max() - col.min()),
                    "gap_share": float((col.max() - col.min()) / scope_step)
                    if scope_step > 0
                    else np.nan,
                    "max_rank": int(cast(int, col.idxmax())),
                    "min_rank": int(cast(int, col.idxmin())),
                    "scope_step_us": scope_step,
                    "corr_with_work": _corr_with_work(sub, dim),
                }
            )
    spreads = pd.DataFrame(spread_rows)

    findings: list[Finding] = []
    n_ranks = len(pr)
    steps_note = "all steps (mean per step)" if params.step is None else f"step {params.step}"
    if n_ranks >= 2:
        findings.extend(_spread_findings(spreads, src, steps_note))
    findings.extend(_comm_share_finding(scopes, src, steps_note, profile, params.step))
    findings.extend(_free_findings(pr, src, steps_note))
    findings.extend(_bubble_findings(pr, stages, src, steps_note))
    findings.sort(
        key=lambda f: (
            f.severity.rank,
            ".wait_spread_" in f.id,
            -(f.metrics.get("gap_us", 0.0)),
        )
    )

    per_stage = _per_stage(profile, pr, stages)
    per_group = _per_group(profile, pr)
    metrics = {
        "ranks_count": float(n_ranks),
        "steps_count": float(st["step"].nunique()),
        "mean_step_us": mean_step,
        "mean_computing_share": float((pr["computing_us"] / pr["step_us"]).mean()),
        "mean_free_share": float((pr["free_us"] / pr["step_us"]).mean()),
        "mean_communication_not_overlapped_share": float(
            (pr["communication_not_overlapped_us"] / pr["step_us"]).mean()
        ),
        "mean_bubble_share": float((pr["bubble_us"] / pr["step_us"]).mean()),
    }
    notes = []
    if n_ranks < 2:
        notes.append("single rank: no cross-rank spread can be computed")
    if not stages and pr["bubble_us"].gt(0).any():
        notes.append("Bubble present but pipeline stages unknown (no stage rows or pp_index)")
    return AnalyzerResult(
        "cluster_breakdown",
        table,
        metrics=metrics,
        findings=tuple(findings),
        notes=tuple(notes),
        notes_zh=notes_in_chinese(notes, _NOTES_ZH),
        tables={
            "per_rank": per_rank,
            "spreads": spreads,
            "per_stage": per_stage,
            "per_group": per_group,
            "extremes": _extremes(per_rank),
        },
    )


#: Chinese twins of this analyzer's fixed notes.
_NOTES_ZH = {
    "single rank: no cross-rank spread can be computed": "只有一张卡：无法计算卡间差异",
    "Bubble present but pipeline stages unknown (no stage rows or pp_index)": (
        "存在气泡（Bubble），但不知道流水线阶段（没有 Stage 行或 pp_index）"
    ),
}

#: The scope of a whole-job comparison (no pipeline stages known).
ALL_RANKS = "all ranks"


def _scope_zh(scope: str) -> str:
    """A comparison scope in Chinese: ``all ranks`` → 所有卡, ``stage 0 (ranks 0-7)`` → 阶段 0（0-7号卡）."""
    if scope == ALL_RANKS:
        return "所有卡"
    m = re.fullmatch(r"stage (\d+) \(ranks (.+)\)", scope)
    return f"阶段 {m.group(1)}（{m.group(2)}号卡）" if m else scope


def _extremes(per_rank: pd.DataFrame) -> pd.DataFrame:
    """Per component: the ranks with the largest and smallest mean per step (µs), median, mean."""
    rows = []
    pr = per_rank.set_index("rank")
    for col in (*COMPONENTS, "step_us"):
        if col not in pr.columns:
            continue
        v = pr[col].astype("float64").dropna()
        if v.empty:
            continue
        rows.append(
            {
                "component": col,
                "max_rank": int(cast(int, v.idxmax())),
                "max_us": float(v.max()),
                "min_rank": int(cast(int, v.idxmin())),
                "min_us": float(v.min()),
                "median_us": float(v.median()),
                "mean_us": float(v.mean()),
            }
        )
    return pd.DataFrame(
        rows,
        columns=["component", "max_rank", "max_us", "min_rank", "min_us", "median_us", "mean_us"],
    )


def _corr_with_work(sub: pd.DataFrame, dim: str) -> float:
    """Correlation over ranks of ``dim`` with computing + free (the rank's own work)."""
    if len(sub) < 3:
        return float("nan")
    work = sub["computing_us"] + sub["free_us"]
    a, b = sub[dim].to_numpy(float), work.to_numpy(float)
    if np.std(a) == 0 or np.std(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def _spread_findings(spreads: pd.DataFrame, src: str, steps_note: str) -> list[Finding]:
    out: list[Finding] = []
    comm_dim = "communication_not_overlapped_exclude_receive_us"
    for _, row in spreads.iterrows():
        if not (row["gap_share"] > SPREAD_RATIO):
            continue
        dim = row["dimension"]
        cat, label, label_zh = _DIMS[dim]
        explained = dim == comm_dim and (
            (row["corr_with_work"] < -0.5)
            or spreads[(spreads["scope"] == row["scope"]) & (spreads["dimension"] != comm_dim)][
                "gap_share"
            ]
            .gt(SPREAD_RATIO)
            .any()
        )
        hi, lo = int(row["max_rank"]), int(row["min_rank"])
        metrics = {
            "gap_us": float(row["gap_us"]),
            "gap_share": float(row["gap_share"]),
            "max_us": float(row["max_us"]),
            "min_us": float(row["min_us"]),
            "mean_step_us": float(row["scope_step_us"]),
            "max_rank": float(hi),
            "min_rank": float(lo),
        }
        if explained:
            summary = (
                f"{label} differs by {ms(row['gap_us'])} ({pct(row['gap_share'])} of the "
                f"{ms(row['scope_step_us'])} step) across {row['scope']}: rank {hi} "
                f"{ms(row['max_us'])} vs rank {lo} {ms(row['min_us'])}; this is mostly waiting "
                "for late ranks (it mirrors the Computing/Free spread), not slow transfers"
            )
            summary_zh = (
                f"{_scope_zh(row['scope'])}之间{label_zh}相差 {ms(row['gap_us'])}（占步长的 {pct(row['gap_share'])}）："
                f"{hi}号卡 为 {ms(row['max_us'])}，{lo}号卡 为 {ms(row['min_us'])}；主要是等待慢卡，而非传输慢"
            )
            out.append(
                Finding(
                    id=f"cluster_breakdown.communication.wait_spread_{_slug(row['scope'])}",
                    kind=FindingKind.COMMUNICATION,
                    severity=severity(row["gap_share"] / 2),
                    summary=summary,
                    summary_zh=summary_zh,
                    ranks=(hi, lo),
                    metrics=metrics,
                    evidence=(_ev(src, row, dim, steps_note),),
                    symptom_tags=("comm_wait_high", "slow_rank"),
                    category=Category.COMMUNICATION,
                )
            )
            continue
        tags = {
            Category.COMPUTE: ("compute_spread", "compute_straggler"),
            Category.SCHEDULING: ("free_spread", "host_bound"),
            Category.COMMUNICATION: ("comm_not_overlapped", "slow_link"),
        }[cat]
        problem = {
            Category.COMPUTE: "compute problem",
            Category.SCHEDULING: "scheduling (host dispatch) problem",
            Category.COMMUNICATION: "communication problem",
        }[cat]
        problem_zh = {
            Category.COMPUTE: "计算问题",
            Category.SCHEDULING: "调度（下发）问题",
            Category.COMMUNICATION: "通信问题",
        }[cat]
        summary = (
            f"{problem.capitalize()}: {label} differs by {ms(row['gap_us'])} across "
            f"{row['scope']} ({pct(row['gap_share'])} of the mean step {ms(row['scope_step_us'])}, "
            f"threshold 5%); highest rank {hi} {ms(row['max_us'])}, lowest rank {lo} "
            f"{ms(row['min_us'])}"
        )
        summary_zh = (
            f"{problem_zh}：{_scope_zh(row['scope'])}之间{label_zh}最大差 {ms(row['gap_us'])}"
            f"（占平均步长 {ms(row['scope_step_us'])} 的 {pct(row['gap_share'])}，阈值 5%）；"
            f"最高 {hi}号卡 {ms(row['max_us'])}，最低 {lo}号卡 {ms(row['min_us'])}"
        )
        gain = (
            float(row["max_us"] - row["median_us"]) if cat is not Category.COMMUNICATION else None
        )
        out.append(
            Finding(
                id=f"cluster_breakdown.bottleneck.{cat.value}_{_slug(row['scope'])}",
                kind=FindingKind.BOTTLENECK,
                severity=severity(row["gap_share"]),
                summary=summary,
                summary_zh=summary_zh,
                ranks=(hi,),
                metrics=metrics,
                evidence=(_ev(src, row, dim, steps_note),),
                symptom_tags=tags,
                estimated_gain_us=gain,
                category=cat,
            )
        )
    return out


def _comm_share_finding(
    scopes: list[tuple[str, pd.DataFrame]],
    src: str,
    steps_note: str,
    profile: Profile,
    step: int | None = None,
) -> list[Finding]:
    out: list[Finding] = []
    split_all = comm_time_split(profile, step)
    missing = missing_ranks(profile)
    for scope, pr in scopes:
        col = pr["communication_not_overlapped_exclude_receive_us"]
        share = col / pr["step_us"]
        if share.empty or not np.isfinite(share.min()):
            continue
        lo_rank = int(cast(int, share.idxmin()))
        lo = float(share.min())
        if lo < COMM_SHARE_BOUND:
            continue
        both = pr["overlapped_us"] + pr["communication_not_overlapped_us"]
        overlap = (pr["overlapped_us"] / both.where(both > 0)).mean()
        metrics = {
            "min_comm_not_overlapped_share": lo,
            "min_comm_not_overlapped_us": float(col[lo_rank]),
            # the stage's mean non-overlapped communication over its mean step (the share the
            # diagnosis states for the same ranks, one figure)
            "mean_comm_not_overlapped_share": float(col.mean() / pr["step_us"].mean()),
            "mean_overlap_ratio": float(overlap),
            "gap_us": float(col[lo_rank]),
        }
        split = split_all[split_all.index.isin(pr.index)]
        el = float(split["elapse_ms"].sum()) if not split.empty else 0.0
        transit_share = float(split["transit_ms"].sum()) / el if el > 0 else float("nan")
        if np.isfinite(transit_share):
            metrics |= {
                "comm_elapse_ms_per_step": float(split["elapse_ms"].median()),
                "comm_transit_ms_per_step": float(split["transit_ms"].median()),
                "comm_wait_idle_ms_per_step": float(split["not_transit_ms"].median()),
                "transit_share": transit_share,
            }
        if comm_wait_dominated(split_all, col):
            # Exposed communication that is mostly wait/idle: a late peer, not a transfer problem.
            en, zh = comm_wait_text(split, missing)
            out.append(
                Finding(
                    id=f"cluster_breakdown.bottleneck.communication_wait_{_slug(scope)}",
                    kind=FindingKind.BOTTLENECK,
                    severity=severity(lo),
                    summary=(
                        f"Communication not overlapped in {scope} is {ms(col[lo_rank])} per step "
                        f"({pct(lo)}) even on rank {lo_rank}, which waits least, but {en}"
                    ),
                    summary_zh=(
                        f"{_scope_zh(scope)} 中等待最少的 {lo_rank}号卡 每步仍有 {ms(col[lo_rank])}"
                        f"（{pct(lo)}）未掩盖通信，但{zh}"
                    ),
                    ranks=tuple(int(r) for r in pr.index),
                    metrics=metrics | {"missing_ranks_count": float(len(missing))},
                    evidence=(
                        Evidence(
                            "step_trace",
                            src,
                            {"ranks": format_ranks(pr.index), "steps": steps_note},
                            "share = Communication(Not Overlapped and Exclude Receive) / step; "
                            "min over ranks",
                        ),
                        Evidence(
                            "comm_ops",
                            profile.cite("comm_ops"),
                            {"ranks": format_ranks(pr.index)},
                            "per rank per step: Σ Elapse, Σ Transit, Σ (Wait + Idle); "
                            f"transit_share = Σ Transit / Σ Elapse < {TRANSIT_SHARE_LOW:.2f}: "
                            "waiting, no overlap gain claimed",
                        ),
                    ),
                    symptom_tags=("comm_wait_high", "slow_rank")
                    + (("missing_ranks",) if missing else ()),
                    category=Category.COMMUNICATION,
                )
            )
            continue
        # Overlap can hide transfer, not waiting: cap the bound by the rank's Transit (comm_ops).
        gain = float(col[lo_rank])
        transit_ms = (
            float(split.at[lo_rank, "transit_ms"])  # type: ignore[arg-type]
            if lo_rank in split.index
            else float("nan")
        )
        capped = bool(np.isfinite(transit_ms) and transit_ms * 1000.0 < gain)
        if capped:
            gain = transit_ms * 1000.0
        metrics["gain_upper_bound_us"] = gain
        # say the bound as it is: capped only when that rank's Transit was measured and smaller
        if capped:
            bound_txt = (
                f"capped by its Transit time per step ({transit_ms:.2f} ms, comm_ops) since "
                "waiting cannot be overlapped"
            )
        elif np.isfinite(transit_ms):
            bound_txt = f"its Transit time per step ({transit_ms:.2f} ms, comm_ops) is not smaller"
        else:
            bound_txt = (
                f"NOT capped by Transit: rank {lo_rank} has no communication detail (comm_ops), "
                "so part of it may be waiting that overlap cannot hide"
            )
        out.append(
            Finding(
                id=f"cluster_breakdown.bottleneck.communication_share_{_slug(scope)}",
                kind=FindingKind.BOTTLENECK,
                severity=severity(lo),
                summary=(
                    f"Communication problem in {scope}: even the rank that waits least (rank "
                    f"{lo_rank}) spends {ms(col[lo_rank])} per step ({pct(lo)}) in communication "
                    f"not overlapped with computation (PP receive excluded); mean "
                    f"{pct(share.mean())}, only {pct(overlap)} of communication is overlapped"
                ),
                summary_zh=(
                    f"通信问题（{_scope_zh(scope)}）：等待最少的 {lo_rank}号卡 每步仍有 {ms(col[lo_rank])}"
                    f"（{pct(lo)}）未被计算掩盖的通信（不含 PP 接收）；平均 {pct(share.mean())}，"
                    f"通信掩盖率仅 {pct(overlap)}"
                ),
                ranks=tuple(int(r) for r in pr.index),
                metrics=metrics,
                evidence=(
                    Evidence(
                        "step_trace",
                        src,
                        {"ranks": format_ranks(pr.index), "steps": steps_note},
                        "share = Communication(Not Overlapped and Exclude Receive) / step; "
                        "min over ranks; estimated gain is an UPPER BOUND: that rank's "
                        f"non-overlapped communication (if all of it were hidden); {bound_txt}",
                    ),
                ),
                symptom_tags=("comm_bound", "comm_not_overlapped"),
                estimated_gain_us=gain,
                category=Category.COMMUNICATION,
            )
        )
    return out


def _free_findings(pr: pd.DataFrame, src: str, steps_note: str) -> list[Finding]:
    share = pr["free_us"] / pr["step_us"]
    hot = share[share > FREE_SHARE_HOST_BOUND]
    if hot.empty:
        return []
    med_free = float(pr["free_us"].median())
    worst = int(cast(int, share.idxmax()))
    metrics = {
        "free_share_max": float(share.max()),
        "free_share_mean": float(share.mean()),
        "free_us_median": med_free,
        "free_us_max": float(pr["free_us"].max()),
        "free_us_min": float(pr["free_us"].min()),
        "ranks_over_threshold": float(len(hot)),
        "threshold_share": FREE_SHARE_HOST_BOUND,
        "gap_us": med_free,
    }
    return [
        Finding(
            id="cluster_breakdown.host_bound.free_share",
            kind=FindingKind.HOST_BOUND,
            severity=severity(float(share.median())),
            summary=(
                f"The device is idle (Free) {pct(share.mean())} of the step on average "
                f"(median over all ranks {ms(med_free)} per step; up to {pct(share.max())} on rank {worst}); "
                f"{len(hot)} of {len(pr)} ranks exceed 10% Free: the host does not feed the "
                "device fast enough (dispatch, data loading or synchronization)"
            ),
            summary_zh=(
                f"设备空闲(Free)平均占步长的 {pct(share.mean())}（所有卡中位数每步 {ms(med_free)}，"
                f"{worst}号卡 最高 {pct(share.max())}）；{len(pr)} 张卡中 {len(hot)} 张超过 10%："
                "主机下发/数据加载/同步跟不上设备"
            ),
            ranks=tuple(int(r) for r in hot.index),
            metrics=metrics,
            evidence=(
                Evidence(
                    "step_trace",
                    src,
                    {"ranks": format_ranks(hot.index), "steps": steps_note},
                    "free_share = Free / step time; estimated gain is an UPPER BOUND: the least "
                    "Free over all ranks (the idle every rank shares; a rank's Free above it is "
                    "its own)",
                ),
            ),
            symptom_tags=("high_free", "host_bound"),
            estimated_gain_us=float(pr["free_us"].min()),
            category=Category.SCHEDULING,
        )
    ]


def _bubble_findings(
    pr: pd.DataFrame, stages: list[tuple[int, ...]], src: str, steps_note: str
) -> list[Finding]:
    out: list[Finding] = []
    groups: list[tuple[str, str, list[int]]] = []
    if stages:
        groups = [(f"stage {i}", f"阶段{i}", list(s)) for i, s in enumerate(stages)]
    else:
        groups = [("ranks", "各卡", [int(r) for r in pr.index])]
    for label, label_zh, ranks in groups:
        sub = pr[pr.index.isin(ranks)]
        if sub.empty:
            continue
        sh = float((sub["bubble_us"] / sub["step_us"]).mean())
        if not (sh >= BUBBLE_SHARE_TARGET):
            continue
        bub = float(sub["bubble_us"].mean())
        # upper bound: Bubble above the target share of the stage's mean step
        gain = max(bub - BUBBLE_SHARE_TARGET * float(sub["step_us"].mean()), 0.0)
        out.append(
            Finding(
                id=f"cluster_breakdown.bottleneck.pipeline_bubble_{_slug(label)}",
                kind=FindingKind.BOTTLENECK,
                severity=severity(sh),
                summary=(
                    f"Pipeline bubble: {label} (ranks {format_ranks(sub.index)}) waits "
                    f"{ms(bub)} per step in PP receive (Bubble), {pct(sh)} of its step; "
                    f"max {ms(sub['bubble_us'].max())} on rank {int(cast(int, sub['bubble_us'].idxmax()))}"
                ),
                summary_zh=(
                    f"流水线气泡：{label_zh}（{format_ranks(sub.index, sep='、')}号卡）每步在 PP 接收上等待 "
                    f"{ms(bub)}（Bubble），占步长的 {pct(sh)}"
                ),
                ranks=tuple(int(r) for r in sub.index),
                metrics={
                    "bubble_us_mean": bub,
                    "bubble_share": sh,
                    "bubble_us_max": float(sub["bubble_us"].max()),
                    "gap_us": bub,
                    "gain_upper_bound_us": gain,
                },
                evidence=(
                    Evidence(
                        "step_trace",
                        src,
                        {"ranks": format_ranks(sub.index), "steps": steps_note},
                        "Bubble = hcom_receive* time; share = Bubble / step; estimated gain "
                        "is an UPPER BOUND: mean Bubble − 5% of the stage's mean step (Bubble "
                        "brought down to the 5% target, e.g. by more micro-batches)",
                    ),
                ),
                symptom_tags=("pipeline_bubble",),
                estimated_gain_us=gain,
                category=Category.COMMUNICATION,
            )
        )
    return out


def _per_stage(profile: Profile, pr: pd.DataFrame, stages: list[tuple[int, ...]]) -> pd.DataFrame:
    cols = [*COMPONENTS, "step_us"]
    st = profile.get("stage_trace")
    if not st.empty:
        out = st.groupby(["stage_index", "stage_ranks"])[
            [c for c in cols if c in st.columns]
        ].mean()
        return out.reset_index()
    if not stages:
        return pd.DataFrame(columns=["stage_index", "stage_ranks", *cols])
    rows = []
    for i, s in enumerate(stages):
        sub = pr[pr.index.isin(s)]
        rows.append({"stage_index": i, "stage_ranks": str(s), **sub[cols].max().to_dict()})
    return pd.DataFrame(rows)


def _per_group(profile: Profile, pr: pd.DataFrame) -> pd.DataFrame:
    g = groups_table(profile)
    cols = [*COMPONENTS, "step_us"]
    out_cols = ["group", "group_name", "ranks", "size", *cols, "computing_gap_us", "free_gap_us"]
    if g.empty:
        return pd.DataFrame(columns=out_cols)
    g = g.reset_index(drop=True)
    members = g[["ranks"]].explode("ranks").dropna()
    members = members.rename(columns={"ranks": "rank"}).astype({"rank": "int64"})
    members["gi"] = members.index
    joined = members.merge(pr[cols], left_on="rank", right_index=True, how="inner")
    if joined.empty:
        return pd.DataFrame(columns=out_cols)
    agg = joined.groupby("gi")
    out = agg[cols].mean()
    out["computing_gap_us"] = agg["computing_us"].max() - agg["computing_us"].min()
    out["free_gap_us"] = agg["free_us"].max() - agg["free_us"].min()
    head = g.loc[out.index, ["group", "group_name", "ranks"]]
    out.insert(0, "size", [len(r) for r in head["ranks"]])
    out.insert(0, "ranks", [format_ranks(r) for r in head["ranks"]])
    out.insert(0, "group_name", head["group_name"].to_numpy())
    out.insert(0, "group", head["group"].to_numpy())
    return out.reset_index(drop=True)[out_cols]


def _ev(src: str, row: pd.Series, dim: str, steps_note: str) -> Evidence:
    return Evidence(
        "step_trace",
        src,
        {
            "scope": row["scope"],
            "ranks": [int(row["max_rank"]), int(row["min_rank"])],
            "steps": steps_note,
        },
        f"gap = max − min over ranks of {dim} (mean per step); share = gap / mean step time",
    )


def _slug(text: str) -> str:
    out = "".join(ch if ch.isalnum() else "_" for ch in text.lower())
    while "__" in out:
        out = out.replace("__", "_")
    return out.strip("_")
