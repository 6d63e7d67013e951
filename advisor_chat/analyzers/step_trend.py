"""Step-time trend within one run: degradation (growth, change point), jitter, outlier steps."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field

from advisor_chat.analyzers._common import check_rank, format_ranks
from advisor_chat.analyzers.base import (
    AnalyzerResult,
    Evidence,
    Finding,
    FindingKind,
    Params,
    Severity,
    notes_in_chinese,
    register,
)
from advisor_chat.errors import NotAnswerableError
from advisor_chat.ingest.profile import Profile

#: Fewer steps than this: no trend is judged.
MIN_STEPS = 3
#: Degradation: the least-squares line grows by at least this fraction of its first value ...
GROWTH_RATIO = 0.05
#: ... and the growth is at least this many residual standard deviations (noise).
GROWTH_NOISE_FACTOR = 2.0
#: Jitter: residual standard deviation / mean step time at least this (coefficient of variation).
JITTER_CV = 0.05
#: Outlier step: robust z (0.6745 · (x − clean median) / clean MAD) above this
#: (Iglewicz–Hoaglin), where "clean" is the rank's faster half of steps; only slow steps count.
OUTLIER_Z = 3.5
#: Floor of the clean MAD as a share of the clean median (steady runs have a MAD near 0): a step
#: is an outlier only when ≥ 3.5 / 0.6745 × 1% ≈ 5.2% slower than the clean steps.
MIN_SCALE_SHARE = 0.01
#: When at least this share of ranks shows the same kind, report one cluster-wide finding.
CLUSTER_SHARE = 0.5
#: In a cluster-wide degradation, a rank drives it when its Computing + Free grows by at least
#: this share of its step growth (the others' growth is then communication wait).
DRIVER_SHARE = 0.5
#: Per-rank findings kept per kind (largest first).
MAX_FINDINGS = 5


class StepTrendParams(Params):
    """Parameters of :func:`step_trend`."""

    rank: int | None = Field(
        default=None, description="Global rank to report on; default all ranks."
    )


def _ranks_word(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {format_ranks(ranks)}"


def _series(profile: Profile) -> tuple[pd.DataFrame, str]:
    """(rank, step, step_us) rows, from step_trace or, failing that, kernel spans per step."""
    st = profile.get("step_trace")
    if not st.empty:
        df = st[["rank", "step", "step_us"]].copy()
        df["own_us"] = st["computing_us"] + st["free_us"]
        df = df.dropna(subset=["rank", "step", "step_us"])
        if (df["step"] != -1).any():
            df = df[df["step"] != -1]
        if not df.empty:
            agg = df.groupby(["rank", "step"], as_index=False)[["step_us", "own_us"]].sum(
                min_count=1
            )
            return agg, "step_trace"
    k = profile.get("kernels")
    if not k.empty:
        k = k[k["step"].notna() & (k["step"] != -1)]
        if not k.empty:
            span = (
                pd.DataFrame(
                    {
                        "rank": k["rank"],
                        "step": k["step"],
                        "s": k["start_us"],
                        "e": k["start_us"] + k["duration_us"],
                    }
                )
                .groupby(["rank", "step"], as_index=False)
                .agg(s=("s", "min"), e=("e", "max"))
            )
            span["step_us"] = span["e"] - span["s"]
            return span[["rank", "step", "step_us"]], "kernels"
    return pd.DataFrame(columns=["rank", "step", "step_us"]), ""


#: The step time changes in one step rather than growing steadily when two levels (before and after
#: the change point) leave at most this share of the fitted line's squared residual.
STEP_CHANGE_SSE = 0.5


def _per_rank(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Vectorized per-rank statistics; returns (rows with flags, per-rank summary)."""
    df = df.sort_values(["rank", "step"], kind="stable").reset_index(drop=True)
    df["rank"] = df["rank"].astype("int64")
    df["step"] = df["step"].astype("int64")
    y = df["step_us"].astype("float64")
    g = df.groupby("rank", sort=True)
    df["i"] = g.cumcount().astype("float64")  # step position 0..n-1 (steps may skip ids)
    n = g["step_us"].transform("size").astype("float64")
    xm = g["i"].transform("mean")
    ym = g["step_us"].transform("mean")
    dx = df["i"] - xm
    sxy = (dx * (y - ym)).groupby(df["rank"]).transform("sum")
    sxx = (dx * dx).groupby(df["rank"]).transform("sum")
    slope = (sxy / sxx.where(sxx > 0)).fillna(0.0)
    if "own_us" in df.columns:
        own = df["own_us"].astype("float64")
        om = own.groupby(df["rank"]).transform("mean")
        oxy = (dx * (own - om)).groupby(df["rank"]).transform("sum")
        own_slope = oxy / sxx.where(sxx > 0)
    else:
        own_slope = pd.Series(np.nan, index=df.index)
    intercept = ym - slope * xm
    fit = intercept + slope * df["i"]
    resid = y - fit
    dof = (n - 2).clip(lower=1)
    resid_std = np.sqrt((resid**2).groupby(df["rank"]).transform("sum") / dof)
    # outliers are judged against the clean baseline: the median and MAD of the rank's faster
    # half of steps (so a run where most steps are slow flags the slow steps, not the clean ones)
    order = y.groupby(df["rank"]).rank(method="first")
    fast = order <= np.ceil(n / 2)  # the faster half of the rank's steps
    ref = y.where(fast).groupby(df["rank"]).transform("median")
    mad = (y - ref).abs().where(fast).groupby(df["rank"]).transform("median")
    scale = mad.fillna(0.0).clip(lower=MIN_SCALE_SHARE * ref.abs())
    df["robust_z"] = (0.6745 * (y - ref) / scale.where(scale > 0)).fillna(0.0)
    df["is_outlier"] = df["robust_z"] > OUTLIER_Z
    df["clean_step_us"] = ref
    df["fit_us"] = fit

    # change point: split maximizing |mean_after − mean_before| · sqrt(k (n − k) / n)
    k_before = df["i"] + 1.0
    cs = g["step_us"].cumsum()
    tot = g["step_us"].transform("sum")
    mean_before = cs / k_before
    mean_after = (tot - cs) / (n - k_before).where(n - k_before > 0)
    score = (mean_after - mean_before).abs() * np.sqrt(k_before * (n - k_before) / n)
    df["_score"] = score.fillna(-1.0)
    df["_mb"] = mean_before
    df["_ma"] = mean_after
    idx = df.groupby("rank")["_score"].idxmax()
    cp = df.loc[idx, ["rank", "step", "_mb", "_ma", "_score"]].set_index("rank")
    # two levels (before / after the change point) against the line: the score squared is the
    # between-levels sum of squares, so the two-level residual is the total minus it
    ss_tot = ((y - ym) ** 2).groupby(df["rank"]).sum()
    sse_line = (resid**2).groupby(df["rank"]).sum()
    sse_step = (ss_tot - cp["_score"].clip(lower=0.0) ** 2).clip(lower=0.0)
    next_step = g["step"].shift(-1)
    cp["change_point_step"] = next_step.loc[idx].to_numpy()

    first = df.groupby("rank").head(1).set_index("rank")
    last = df.groupby("rank").tail(1).set_index("rank")
    summ = pd.DataFrame(
        {
            "n_steps": g.size(),
            "mean_step_us": g["step_us"].mean(),
            "median_step_us": g["step_us"].median(),
            "first_step_us": first["step_us"],
            "last_step_us": last["step_us"],
            "slope_us_per_step": slope.groupby(df["rank"]).first(),
            "own_slope_us_per_step": own_slope.groupby(df["rank"]).first(),
            "fit_first_us": first["fit_us"],
            "fit_last_us": last["fit_us"],
            "min_step_us": g["step_us"].min(),
            "residual_std_us": resid_std.groupby(df["rank"]).first(),
            "outlier_steps": df.groupby("rank")["is_outlier"].sum(),
            "change_point_step": cp["change_point_step"],
            "mean_before_us": cp["_mb"],
            "mean_after_us": cp["_ma"],
            # a step change: two levels leave at most STEP_CHANGE_SSE of the line's residual
            "step_change": sse_step <= STEP_CHANGE_SSE * sse_line,
        }
    )
    summ["growth_ratio"] = (summ["fit_last_us"] - summ["fit_first_us"]) / summ["fit_first_us"]
    summ["raw_growth_ratio"] = (summ["last_step_us"] - summ["first_step_us"]) / summ[
        "first_step_us"
    ]
    summ["cv"] = g["step_us"].std(ddof=0) / summ["mean_step_us"]
    summ["residual_cv"] = summ["residual_std_us"] / summ["mean_step_us"]
    growth_us = summ["fit_last_us"] - summ["fit_first_us"]
    summ["degrading"] = (
        (summ["n_steps"] >= MIN_STEPS)
        & (summ["growth_ratio"] >= GROWTH_RATIO)
        & (growth_us >= GROWTH_NOISE_FACTOR * summ["residual_std_us"])
    )
    summ["jittery"] = (summ["n_steps"] >= MIN_STEPS) & (summ["residual_cv"] >= JITTER_CV)
    summ.index.name = "rank"
    df = df.merge(summ[["slope_us_per_step", "cv"]], left_on="rank", right_index=True)
    rows = df[
        [
            "rank",
            "step",
            "step_us",
            "fit_us",
            "robust_z",
            "is_outlier",
            "clean_step_us",
            "slope_us_per_step",
            "cv",
        ]
    ]
    return rows.reset_index(drop=True), summ.reset_index()


@register("step_trend", StepTrendParams, order=60)
def step_trend(profile: Profile, params: StepTrendParams, **_: Any) -> AnalyzerResult:
    """Judge how each rank's step time evolves over the run: degradation, jitter, outlier steps.

    Per rank over the steps of ``step_trace`` (or kernel spans per step): least-squares slope,
    relative growth of the fitted line from first to last step, the largest mean-shift split
    (change point), coefficient of variation (raw and of the residuals around the line) and
    outlier steps (robust z on the MAD > 3.5). Degradation = fitted growth ≥ 5% of the first
    fitted step and ≥ 2 residual standard deviations; jitter = residual CV ≥ 0.05. With fewer
    than 3 steps no trend is judged. When most ranks degrade together (collectives spread one
    rank's delay to all), the ranks whose Computing + Free grows by ≥ 50% of their step growth
    are named as the drivers and become the finding's ranks.

    Args:
        profile: Loaded profile; uses ``step_trace`` (``step_us``), else ``kernels``.
        params: ``rank`` (global rank) to restrict the table and findings to.

    Returns:
        AnalyzerResult whose ``table`` has one row per rank × step: rank, step, step_us (µs),
        fit_us (µs, least-squares line), robust_z (0.6745·(x − clean median)/clean MAD, the
        clean steps being the rank's faster half; MAD floored at 1% of the clean median),
        is_outlier (slow side only), clean_step_us (the clean median, µs),
        slope_us_per_step (µs per step), cv (std/mean). ``tables['per_rank']``: rank, n_steps,
        mean_step_us, median_step_us, first_step_us, last_step_us, slope_us_per_step,
        own_slope_us_per_step (µs per step, slope of computing_us + free_us),
        fit_first_us, fit_last_us, min_step_us, residual_std_us (µs), outlier_steps (count),
        change_point_step (first step after the split), mean_before_us, mean_after_us (µs),
        growth_ratio (fitted last/first − 1), raw_growth_ratio, cv, residual_cv, degrading,
        jittery. Metrics: steps, median slope, median growth_ratio, ranks degrading/jittery.

    Raises:
        ToolArgumentError: ``rank`` is not in the profile.
        NotAnswerableError: Neither step_trace nor kernels with step ids exist.
    """
    if params.rank is not None:
        check_rank(profile, params.rank)
    series, src = _series(profile)
    if series.empty:
        raise NotAnswerableError(
            "no per-step data: step_trace_time.csv (or kernels with Step Id) is needed to judge "
            "a trend; profile several steps (schedule with active >= 3)"
        )
    rows, summ = _per_rank(series)
    notes: list[str] = []
    if src == "kernels":
        notes.append(
            "no step_trace: step time = span of the step's kernels (first start to last end)"
        )
    twins = {
        "no step_trace: step time = span of the step's kernels (first start to last end)": (
            "没有 step_trace：步长取该步算子的时间跨度（第一个开始到最后一个结束）"
        )
    }
    n_max = int(summ["n_steps"].max())
    if n_max < MIN_STEPS:
        few = f"not enough steps to judge a trend ({n_max} step(s); at least {MIN_STEPS} needed)"
        notes.append(few)
        twins[few] = f"步数不足，无法判断趋势（{n_max} 步；至少需要 {MIN_STEPS} 步）"
    cite = profile.cite(src)
    all_ranks = [int(r) for r in summ["rank"]]
    findings: list[Finding] = []

    deg = summ[summ["degrading"]].sort_values("growth_ratio", ascending=False)
    if not deg.empty:
        cluster = len(deg) >= CLUSTER_SHARE * len(summ) and len(summ) > 1
        picks = [deg] if cluster else [deg.iloc[[i]] for i in range(min(len(deg), MAX_FINDINGS))]
        for part in picks:
            row = part.iloc[0] if not cluster else part.median(numeric_only=True)
            flagged = [int(r) for r in part["rank"]]
            degrading = flagged
            drivers_txt = drivers_zh = ""
            if cluster:
                own = part["own_slope_us_per_step"]
                drv = part[own >= DRIVER_SHARE * part["slope_us_per_step"]]
                if 0 < len(drv) < len(part) / 2:
                    flagged = [int(r) for r in drv["rank"]]
                    d0 = drv.sort_values("own_slope_us_per_step", ascending=False).iloc[0]
                    drivers_txt = (
                        f" The growth comes from {_ranks_word(flagged)}: Computing + Free grows "
                        f"{float(d0['own_slope_us_per_step']):.0f} us/step on rank {int(d0['rank'])} "
                        f"vs {float(own.median()):.0f} us/step on the median rank, whose growth is "
                        "communication (waiting for it)."
                    )
                    drivers_zh = (
                        f"增长来源于 {_ranks_word(flagged)}：{int(d0['rank'])}号卡 的 Computing + Free 每步增长 "
                        f"{float(d0['own_slope_us_per_step']):.0f} us，中位数卡仅 {float(own.median()):.0f} us，"
                        "其余卡的增长在通信（等待）中。"
                    )
            growth = float(row["growth_ratio"])
            # back to the first steps' time: the line's start, but never below the fastest
            # measured step (a line through a late rise starts below every step)
            excess = float(
                row["mean_step_us"] - max(float(row["fit_first_us"]), float(row["min_step_us"]))
            )
            share = float(row["fit_last_us"] - row["fit_first_us"]) / float(row["median_step_us"])
            who = (
                f"{len(degrading)} of {len(summ)} ranks ({format_ranks(degrading)})"
                if cluster
                else f"Rank {flagged[0]}"
            )
            who_zh = (
                f"{len(summ)} 张卡中的 {len(degrading)} 个（{format_ranks(degrading)}）"
                if cluster
                else f"rank {flagged[0]}"
            )
            cp = row["change_point_step"]
            cp_txt = f"; the largest shift is before step {int(cp)}" if pd.notna(cp) else ""
            cp_zh = f"；最大的均值跳变发生在第 {int(cp)} 步之前" if pd.notna(cp) else ""
            # one jump (an onset) is said as such, not as a slope through it
            jump = (
                pd.notna(cp)
                and bool(part["step_change"].all())
                and float(row["mean_after_us"]) > float(row["mean_before_us"])
            )
            findings.append(
                Finding(
                    id="step_trend.degradation." + ("cluster" if cluster else f"r{flagged[0]}"),
                    kind=FindingKind.DEGRADATION,
                    severity=Severity.from_share(max(share, 0.0)),
                    summary=(
                        f"{who}: step time jumps at step {int(cp)}, from "
                        f"{float(row['mean_before_us']):.0f} us (mean before) to "
                        f"{float(row['mean_after_us']):.0f} us (mean from then on): a step change, "
                        "not a steady growth (two levels fit the steps better than a line)."
                        f"{drivers_txt}"
                        if jump
                        else f"{who}: step time grows {growth:.1%} over {int(row['n_steps'])} steps "
                        f"(slope {float(row['slope_us_per_step']):.0f} us/step, fitted "
                        f"{float(row['fit_first_us']):.0f} -> {float(row['fit_last_us']):.0f} us){cp_txt}."
                        f"{drivers_txt}"
                    ),
                    summary_zh=(
                        f"{who_zh}：步耗时在第 {int(cp)} 步突然升高，从之前平均 "
                        f"{float(row['mean_before_us']):.0f} us 升到之后平均 "
                        f"{float(row['mean_after_us']):.0f} us：是一次跳变，而不是持续增长"
                        f"（两段水平比一条直线更贴合）。{drivers_zh}"
                        if jump
                        else f"{who_zh}：步耗时在 {int(row['n_steps'])} 步内增长 {growth:.1%}"
                        f"（斜率 {float(row['slope_us_per_step']):.0f} us/step，拟合值 "
                        f"{float(row['fit_first_us']):.0f} -> {float(row['fit_last_us']):.0f} us）{cp_zh}。"
                        f"{drivers_zh}"
                    ),
                    ranks=tuple(sorted(flagged)),
                    metrics={
                        "growth_ratio": growth,
                        "slope_us_per_step": float(row["slope_us_per_step"]),
                        "fit_first_us": float(row["fit_first_us"]),
                        "fit_last_us": float(row["fit_last_us"]),
                        "residual_std_us": float(row["residual_std_us"]),
                        "n_steps": float(row["n_steps"]),
                        "growth_threshold_ratio": GROWTH_RATIO,
                        "ranks_degrading": float(len(degrading)),
                        "step_change": 1.0 if jump else 0.0,
                        **(
                            {
                                "change_point_step": float(cp),
                                "mean_before_us": float(row["mean_before_us"]),
                                "mean_after_us": float(row["mean_after_us"]),
                            }
                            if pd.notna(cp)
                            else {}
                        ),
                    },
                    evidence=(
                        Evidence(
                            src,
                            cite,
                            {"ranks": degrading},
                            "least-squares line of step_us over step position; degradation when "
                            f"growth >= {GROWTH_RATIO:.0%} of the first fitted value and >= "
                            f"{GROWTH_NOISE_FACTOR:.0f} residual std",
                        ),
                    ),
                    symptom_tags=("step_degradation",),
                    estimated_gain_us=excess if excess > 0 else None,
                )
            )

    jit = summ[summ["jittery"] & ~summ["degrading"]].sort_values("residual_cv", ascending=False)
    if not jit.empty:
        cluster = len(jit) >= CLUSTER_SHARE * len(summ) and len(summ) > 1
        picks = [jit] if cluster else [jit.iloc[[i]] for i in range(min(len(jit), MAX_FINDINGS))]
        for part in picks:
            row = part.iloc[0] if not cluster else part.median(numeric_only=True)
            flagged = [int(r) for r in part["rank"]]
            out_steps = rows[rows["rank"].isin(flagged) & rows["is_outlier"]]
            steps_txt = sorted({int(s) for s in out_steps["step"]})[:10]
            cv = float(row["residual_cv"])
            sub = rows[rows["rank"].isin(flagged)]
            n_steps_all = int(sub["step"].nunique())
            clean_us = float(sub["clean_step_us"].median())
            most = len(steps_txt) > n_steps_all / 2
            most_txt = (
                f" ({len(steps_txt)} of {n_steps_all} steps slower than the clean steps at "
                f"{clean_us / 1000:.1f} ms: most steps are slow)"
                if most and np.isfinite(clean_us)
                else ""
            )
            most_zh = (
                f"（{n_steps_all} 步中有 {len(steps_txt)} 步慢于正常步的 {clean_us / 1000:.1f} ms："
                "大多数步都变慢了）"
                if most and np.isfinite(clean_us)
                else ""
            )
            med_by_rank = sub.groupby("rank")["step_us"].transform("median")
            excess = float((sub["step_us"] - med_by_rank).clip(lower=0).mean())
            who = (
                f"{len(flagged)} of {len(summ)} ranks ({format_ranks(flagged)})"
                if cluster
                else f"Rank {flagged[0]}"
            )
            who_zh = (
                f"{len(summ)} 张卡中的 {len(flagged)} 张（{format_ranks(flagged, sep='、')}号卡）"
                if cluster
                else f"{flagged[0]}号卡"
            )
            findings.append(
                Finding(
                    id="step_trend.jitter." + ("cluster" if cluster else f"r{flagged[0]}"),
                    kind=FindingKind.JITTER,
                    severity=Severity.from_share(cv),
                    summary=(
                        f"{who}: step time jitters (CV {cv:.1%} around the trend, threshold "
                        f"{JITTER_CV:.0%}); outlier steps: {steps_txt or 'none'}{most_txt}."
                    ),
                    summary_zh=(
                        f"{who_zh}：步耗时抖动（去趋势后变异系数 {cv:.1%}，阈值 "
                        f"{JITTER_CV:.0%}）；异常 step：{steps_txt or '无'}{most_zh}。"
                    ),
                    ranks=tuple(sorted(flagged)),
                    metrics={
                        "residual_cv": cv,
                        "cv": float(row["cv"]),
                        # distinct steps (as listed), not (rank, step) rows
                        "outlier_steps": float(out_steps["step"].nunique()),
                        "mean_step_us": float(row["mean_step_us"]),
                        "median_step_us": float(row["median_step_us"]),
                        "jitter_threshold_cv": JITTER_CV,
                    },
                    evidence=(
                        Evidence(
                            src,
                            cite,
                            {"ranks": flagged, "outlier_steps": steps_txt},
                            "CV = std of residuals around the least-squares line / mean; outlier "
                            f"when 0.6745 (x - clean median) / clean MAD > {OUTLIER_Z}, the clean "
                            "steps being each rank's faster half",
                        ),
                    ),
                    symptom_tags=("step_jitter",),
                    estimated_gain_us=excess if excess > 0 else None,
                )
            )

    metrics = {
        "steps": float(n_max),
        "ranks": float(len(all_ranks)),
        "median_slope_us_per_step": float(summ["slope_us_per_step"].median()),
        "median_growth_ratio": float(summ["growth_ratio"].median()),
        "ranks_degrading": float(summ["degrading"].sum()),
        "ranks_jittery": float(summ["jittery"].sum()),
    }
    table = rows
    if params.rank is not None:
        table = rows[rows["rank"] == params.rank].reset_index(drop=True)
        summ = summ[summ["rank"] == params.rank].reset_index(drop=True)
        findings = [f for f in findings if params.rank in f.ranks]
    return AnalyzerResult(
        name="step_trend",
        table=table,
        metrics=metrics,
        findings=tuple(findings),
        notes=tuple(notes),
        tables={"per_rank": summ},
        notes_zh=notes_in_chinese(notes, twins),
    )
