"""Profile-vs-profile diff (baseline → new): breakdown, operator counts and times, versions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from advisor_chat.analyzers._common import is_comm_kernel, str_mask
from advisor_chat.analyzers.base import (
    AnalyzerResult,
    Evidence,
    Finding,
    FindingKind,
    Params,
    Severity,
    register,
)
from advisor_chat.errors import NotAnswerableError
from advisor_chat.ingest.profile import Profile

#: No verdict when |Δ median step| is below this fraction of the baseline step ...
MIN_CHANGE_RATIO = 0.02
#: ... or below this many pooled standard deviations of the per-step step time (jitter).
NOISE_FACTOR = 2.0
#: Chinese names of the step components (Chinese summaries carry no English words).
_COMPONENT_ZH = {
    "computing_us": "计算",
    "communication_not_overlapped_us": "未被掩盖的通信",
    "overlapped_us": "被掩盖的通信",
    "communication_us": "通信",
    "free_us": "空闲（Free）",
    "bubble_us": "气泡（Bubble）",
    "preparing_us": "准备（Preparing）",
    "step_us": "每步耗时",
}

#: HCCL operator count change worth a finding (new / base per rank-step, or its inverse).
HCCL_COUNT_RATIO = 1.5
#: Op types of fused compute + communication (mc2) kernels.
_FUSED_RE = r"(?:matmul.*(?:allreduce|reducescatter|alltoall))|(?:(?:allgather|alltoall).*matmul)"
#: Contributors listed in the verdict.
TOP_CONTRIBUTORS = 3

COMPONENTS = (
    "computing_us",
    "communication_not_overlapped_us",
    "overlapped_us",
    "communication_us",
    "free_us",
    "bubble_us",
    "preparing_us",
    "step_us",
)


class CompareProfilesParams(Params):
    """Parameters of :func:`compare_profiles` (none: the baseline is passed as a keyword)."""


def _steps(profile: Profile) -> pd.DataFrame:
    st = profile.get("step_trace")
    if st.empty:
        return st
    return st[st["step"] != -1] if (st["step"] != -1).any() else st


def _jitter_us(st: pd.DataFrame) -> float:
    """Std over steps of the per-step median (over ranks) step time; NaN with < 2 steps."""
    per_step = st.groupby("step")["step_us"].median()
    return float(per_step.std(ddof=1)) if len(per_step) >= 2 else float("nan")


def _op_counts(profile: Profile) -> pd.DataFrame:
    """Per op type: count and time per rank-step, with whether it is communication."""
    k = profile.get("kernels")
    cols = ["op_type", "is_comm", "count_per_step", "us_per_step"]
    if k.empty:
        return pd.DataFrame(columns=cols)
    comm = is_comm_kernel(k).to_numpy()
    t = k["op_type"].astype("string")
    bad = str_mask(t, lambda v: v.strip().upper() in ("N/A", "")) | t.isna().to_numpy()
    key = t.mask(bad, k["name"].astype("string")) if bad.any() else t
    codes, uniques = pd.factorize(key)
    rank_steps = max(len(k[["rank", "step"]].drop_duplicates()), 1)
    df = pd.DataFrame(
        {
            "code": codes,
            "is_comm": comm,
            "d": k["duration_us"].to_numpy(dtype="float64", na_value=0.0),
        }
    )
    out = df.groupby(["code", "is_comm"])["d"].agg(["size", "sum"]).reset_index()
    out = out[out["code"] >= 0]
    out["op_type"] = np.asarray(uniques, dtype=object)[out["code"].to_numpy()]
    out["count_per_step"] = out["size"] / rank_steps
    out["us_per_step"] = out["sum"] / rank_steps
    return out[cols]


def _comm_counts(profile: Profile) -> pd.DataFrame:
    """Per HCCL op type of ``comm_ops``: ops per rank-step."""
    c = profile.get("comm_ops")
    if c.empty:
        return pd.DataFrame(columns=["op_type", "count_per_step"])
    rank_steps = max(len(c[["rank", "step"]].drop_duplicates()), 1)
    out = c.groupby("op_type").size().rename("n").reset_index()
    out["count_per_step"] = out["n"] / rank_steps
    return out[["op_type", "count_per_step"]]


def _versions(profile: Profile, col: str) -> list[str]:
    meta = profile.get("meta")
    if meta.empty or col not in meta.columns:
        return []
    return sorted({str(v) for v in meta[col].dropna() if str(v) not in ("", "nan", "<NA>")})


@register("compare_profiles", CompareProfilesParams, order=90, needs_baseline=True)
def compare_profiles(
    profile: Profile,
    params: CompareProfilesParams,
    *,
    baseline: Profile | None = None,
    **_: Any,
) -> AnalyzerResult:
    """Compare this profile (new) with a baseline: step breakdown, operator counts and times.

    Medians over ranks and steps of each step_trace component, operator counts and times per
    rank-step by op type (``kernels``), HCCL operator counts (``comm_ops``, else communication
    kernels), and CANN / torch_npu versions (``meta``). Verdict (regression / improvement) only
    when |Δ median step| ≥ max(2% of the baseline step, 2 × pooled step jitter), where jitter is
    the std over steps of the per-step median step time; otherwise "no verdict". An HCCL op
    count ratio ≥ 1.5 (or ≤ 1/1.5) is a finding of its own.

    Args:
        profile: The new profile.
        params: No parameters.
        baseline: The baseline profile (keyword; required).

    Returns:
        AnalyzerResult whose ``table`` has one row per step component: component, base_us,
        new_us, delta_us (new − base, µs, median over ranks × steps), delta_ratio (Δ / base).
        ``tables['op_types']``: op_type, is_comm, base_count_per_step, new_count_per_step,
        count_ratio, base_us_per_step, new_us_per_step, delta_us_per_step (µs per rank-step),
        sorted by |delta_us_per_step|. ``tables['hccl_ops']``: op_type, base_count_per_step,
        new_count_per_step, count_ratio (comm_ops). ``tables['versions']``: field, base, new.
        Metrics: base_step_us, new_step_us, delta_step_us, delta_ratio, noise_threshold_us,
        base_jitter_us, new_jitter_us, verdict_code (1 regression, −1 improvement, 0 none),
        base_hccl_ops_per_step, new_hccl_ops_per_step, hccl_count_ratio.

    Raises:
        NotAnswerableError: No baseline, or neither profile has step_trace nor kernels.
    """
    if baseline is None:
        raise NotAnswerableError(
            "comparing profiles needs a baseline profile (e.g. `advisor-chat report NEW "
            "--baseline OLD`)"
        )
    sb, sn = _steps(baseline), _steps(profile)
    ob, on = _op_counts(baseline), _op_counts(profile)
    if (sb.empty or sn.empty) and (ob.empty or on.empty):
        raise NotAnswerableError(
            "neither step_trace nor kernels exist in both profiles; step_trace_time.csv or "
            "kernel_details.csv is needed on both sides to compare"
        )
    notes: list[str] = []
    findings: list[Finding] = []
    metrics: dict[str, float] = {}
    cite_new = profile.cite("step_trace")
    cite_base = baseline.cite("step_trace")

    # step breakdown
    rows = []
    if not sb.empty and not sn.empty:
        for c in COMPONENTS:
            b, n = float(sb[c].median()), float(sn[c].median())
            if np.isnan(b) and np.isnan(n):
                continue
            rows.append({"component": c, "base_us": b, "new_us": n, "delta_us": n - b})
    table = pd.DataFrame(rows, columns=["component", "base_us", "new_us", "delta_us"])
    table["delta_ratio"] = table["delta_us"] / table["base_us"].where(table["base_us"] > 0)
    if sb.empty or sn.empty:
        notes.append("step_trace missing in one profile: no step-time verdict")

    # operator counts / times by type
    ops = ob.merge(on, on=["op_type", "is_comm"], how="outer", suffixes=("_base", "_new"))
    ops = ops.rename(
        columns={
            "count_per_step_base": "base_count_per_step",
            "count_per_step_new": "new_count_per_step",
            "us_per_step_base": "base_us_per_step",
            "us_per_step_new": "new_us_per_step",
        }
    )
    for c in ("base_count_per_step", "new_count_per_step", "base_us_per_step", "new_us_per_step"):
        ops[c] = ops[c].astype("float64").fillna(0.0)
    ops["count_ratio"] = ops["new_count_per_step"] / ops["base_count_per_step"].where(
        ops["base_count_per_step"] > 0
    )
    ops["delta_us_per_step"] = ops["new_us_per_step"] - ops["base_us_per_step"]
    ops = ops.reindex(ops["delta_us_per_step"].abs().sort_values(ascending=False).index)
    ops = ops[
        [
            "op_type",
            "is_comm",
            "base_count_per_step",
            "new_count_per_step",
            "count_ratio",
            "base_us_per_step",
            "new_us_per_step",
            "delta_us_per_step",
        ]
    ].reset_index(drop=True)

    # HCCL op counts: comm_ops when both have it, else communication kernels
    cb, cn = _comm_counts(baseline), _comm_counts(profile)
    hccl = cb.merge(cn, on="op_type", how="outer", suffixes=("_base", "_new")).fillna(0.0)
    hccl = hccl.rename(
        columns={
            "count_per_step_base": "base_count_per_step",
            "count_per_step_new": "new_count_per_step",
        }
    )
    hccl["count_ratio"] = hccl["new_count_per_step"] / hccl["base_count_per_step"].where(
        hccl["base_count_per_step"] > 0
    )
    if not cb.empty and not cn.empty:
        hb, hn = float(cb["count_per_step"].sum()), float(cn["count_per_step"].sum())
        hsrc, hcite = "comm_ops", profile.cite("comm_ops")
    else:
        comm_ops_k = ops[ops["is_comm"].astype(bool)]
        hb = float(comm_ops_k["base_count_per_step"].sum())
        hn = float(comm_ops_k["new_count_per_step"].sum())
        hsrc, hcite = "kernels", profile.cite("kernels")

    # versions
    vrows = []
    for field in ("cann_version", "torch_npu_version"):
        vb, vn = _versions(baseline, field), _versions(profile, field)
        vrows.append({"field": field, "base": ", ".join(vb), "new": ", ".join(vn)})
    versions = pd.DataFrame(vrows, columns=["field", "base", "new"])
    changed = versions[(versions["base"] != versions["new"]) & (versions["base"] != "")]
    changed = changed[changed["new"] != ""]
    upgrade = not changed.empty
    base_step = new_step = float("nan")

    # verdict
    if not sb.empty and not sn.empty:
        base_step = float(sb["step_us"].median())
        new_step = float(sn["step_us"].median())
        delta = new_step - base_step
        jb, jn = _jitter_us(sb), _jitter_us(sn)
        pooled = float(np.sqrt(np.nanmean([jb**2, jn**2]))) if np.isfinite([jb, jn]).any() else 0.0
        threshold = max(MIN_CHANGE_RATIO * base_step, NOISE_FACTOR * pooled)
        metrics.update(
            base_step_us=base_step,
            new_step_us=new_step,
            delta_step_us=delta,
            delta_ratio=delta / base_step if base_step > 0 else float("nan"),
            noise_threshold_us=threshold,
            base_jitter_us=jb,
            new_jitter_us=jn,
        )
        if not np.isfinite([jb, jn]).any():
            notes.append("one step per profile: step jitter unknown, threshold = 2% of the step")
        if abs(delta) < threshold:
            metrics["verdict_code"] = 0.0
            notes.append(
                f"no verdict: the median step changed by {delta:+.0f} us ({delta / base_step:+.1%}), "
                f"under the noise threshold of {threshold:.0f} us = max({MIN_CHANGE_RATIO:.0%} of "
                f"the baseline step, {NOISE_FACTOR:.0f} x pooled step jitter)"
            )
        else:
            verdict = "regression" if delta > 0 else "improvement"
            metrics["verdict_code"] = 1.0 if delta > 0 else -1.0
            comp = table[~table["component"].isin(["step_us", "communication_us", "stage_us"])]
            comp = comp[comp["delta_us"] * np.sign(delta) > 0]
            comp = comp.reindex(
                (comp["delta_us"] * np.sign(delta)).sort_values(ascending=False).index
            ).head(TOP_CONTRIBUTORS)
            comp_txt = ", ".join(f"{r.component} {r.delta_us:+.0f} us" for r in comp.itertuples())
            comp_zh = "，".join(
                f"{_COMPONENT_ZH.get(str(r.component), str(r.component))} {r.delta_us:+.0f} us"
                for r in comp.itertuples()
            )
            top_ops = ops[ops["delta_us_per_step"] * np.sign(delta) > 0]
            top_ops = top_ops.reindex(
                (top_ops["delta_us_per_step"] * np.sign(delta)).sort_values(ascending=False).index
            ).head(TOP_CONTRIBUTORS)
            ops_txt = ", ".join(
                f"{r.op_type} {r.delta_us_per_step:+.0f} us" for r in top_ops.itertuples()
            )
            tags = ["profile_regression"] if delta > 0 else []
            if upgrade:
                tags.append("cann_upgrade")
            zh_word = "变慢" if delta > 0 else "变快"
            m = dict(metrics)
            for r in comp.itertuples():
                m[f"delta_{r.component}"] = float(r.delta_us)
            findings.append(
                Finding(
                    id=f"compare_profiles.profile_diff.{verdict}",
                    kind=FindingKind.PROFILE_DIFF,
                    severity=Severity.from_share(abs(delta) / base_step)
                    if delta > 0
                    else Severity.INFO,
                    summary=(
                        f"{verdict.capitalize()}: the median step went from {base_step:.0f} us to "
                        f"{new_step:.0f} us ({delta:+.0f} us, {delta / base_step:+.1%}; noise "
                        f"threshold {threshold:.0f} us). Largest step components: {comp_txt or 'n/a'}. "
                        f"Largest op types per rank-step: {ops_txt or 'n/a'}."
                    ),
                    summary_zh=(
                        f"新的性能数据{zh_word}：步长中位数从 {base_step:.0f} us 变为 {new_step:.0f} us"
                        f"（{delta:+.0f} us，{delta / base_step:+.1%}；噪声阈值 {threshold:.0f} us）。"
                        f"主要变化：{comp_zh or '无'}。算子类型：{ops_txt or '无'}。"
                    ),
                    ranks=(),
                    metrics=m,
                    evidence=(
                        Evidence(
                            "step_trace",
                            f"new: {cite_new}; baseline: {cite_base}",
                            {"components": list(comp["component"])},
                            "median over ranks x steps per profile; threshold = max(2% of the "
                            "baseline step, 2 x pooled std over steps of the per-step median)",
                        ),
                        Evidence(
                            "kernels",
                            f"new: {profile.cite('kernels')}; baseline: {baseline.cite('kernels')}",
                            {"op_types": [str(x) for x in top_ops["op_type"]]},
                            "sum(duration_us) per op type / (rank, step) pairs",
                        ),
                    ),
                    symptom_tags=tuple(tags),
                    estimated_gain_us=delta if delta > 0 else None,
                )
            )

    # HCCL op count change
    metrics.update(base_hccl_ops_per_step=hb, new_hccl_ops_per_step=hn)
    if hb > 0:
        ratio = hn / hb
        metrics["hccl_count_ratio"] = ratio
        if ratio >= HCCL_COUNT_RATIO or ratio <= 1 / HCCL_COUNT_RATIO:
            comm_k = ops[ops["is_comm"].astype(bool)]
            comm_delta = float(comm_k["delta_us_per_step"].sum())
            denom = base_step if np.isfinite(base_step) and base_step > 0 else np.nan
            share = abs(comm_delta) / denom if np.isfinite(denom) else 0.0
            by = hccl.sort_values("new_count_per_step", ascending=False).head(4)
            by_txt = ", ".join(
                f"{r.op_type} {r.base_count_per_step:.0f}->{r.new_count_per_step:.0f}"
                for r in by.itertuples()
            )
            ver_txt = "; ".join(f"{r.field} {r.base} -> {r.new}" for r in changed.itertuples())
            tags = ["hccl_op_count_increase"] if ratio > 1 else []
            if upgrade:
                tags.append("cann_upgrade")
            # fused compute+communication (mc2) kernels that disappeared, e.g. MatmulAllReduce
            gone = ops[
                (ops["new_count_per_step"] == 0)
                & (ops["base_count_per_step"] > 0)
                & ~ops["is_comm"].astype(bool)
                & ops["op_type"].astype("string").str.contains(_FUSED_RE, case=False, regex=True)
            ]
            fused_txt = ", ".join(
                f"{r.op_type} ({r.base_count_per_step:.0f} per rank-step)"
                for r in gone.itertuples()
            )
            fused_zh = "，".join(
                f"{r.op_type}（每卡每步 {r.base_count_per_step:.0f} 个）" for r in gone.itertuples()
            )
            if fused_txt and ratio > 1:
                tags.append("mc2_opportunity")
            findings.append(
                Finding(
                    id="compare_profiles.profile_diff.hccl_op_count",
                    kind=FindingKind.PROFILE_DIFF,
                    severity=Severity.from_share(share) if ratio > 1 else Severity.INFO,
                    summary=(
                        f"HCCL operators per rank-step went from {hb:.1f} to {hn:.1f} "
                        f"({ratio:.2f}x; {by_txt}); communication kernel time changed by "
                        f"{comm_delta:+.0f} us per rank-step"
                        + (f" after {ver_txt}" if ver_txt else "")
                        + (f"; fused kernels no longer present: {fused_txt}." if fused_txt else ".")
                    ),
                    summary_zh=(
                        f"每张卡每步的 HCCL 算子数从 {hb:.1f} 变为 {hn:.1f}（{ratio:.2f} 倍；{by_txt}）；"
                        f"通信算子耗时变化 {comm_delta:+.0f} us"
                        + (f"（版本变化：{ver_txt}）" if ver_txt else "")
                        + (f"；不再出现的融合算子：{fused_zh}。" if fused_zh else "。")
                    ),
                    metrics={
                        "base_hccl_ops_per_step": hb,
                        "new_hccl_ops_per_step": hn,
                        "hccl_count_ratio": ratio,
                        "delta_comm_kernel_us_per_step": comm_delta,
                        "count_ratio_threshold": HCCL_COUNT_RATIO,
                        "fused_op_types_gone": float(len(gone)),
                    },
                    evidence=(
                        Evidence(
                            hsrc,
                            f"new: {hcite}; baseline: {baseline.cite(hsrc)}",
                            {"op_types": [str(x) for x in by["op_type"]]},
                            "operators per (rank, step) pair in each profile",
                        ),
                    ),
                    symptom_tags=tuple(tags),
                    estimated_gain_us=comm_delta if comm_delta > 0 else None,
                )
            )

    if upgrade:
        ver_txt = "; ".join(f"{r.field} {r.base} -> {r.new}" for r in changed.itertuples())
        findings.append(
            Finding(
                id="compare_profiles.profile_diff.versions",
                kind=FindingKind.PROFILE_DIFF,
                severity=Severity.INFO,
                summary=f"Software versions changed between the profiles: {ver_txt}.",
                summary_zh=f"两份性能数据的软件版本不同：{ver_txt}。",
                evidence=(
                    Evidence(
                        "meta",
                        f"new: {profile.cite('meta')}; baseline: {baseline.cite('meta')}",
                        {"fields": list(changed["field"])},
                    ),
                ),
                symptom_tags=("cann_upgrade",),
            )
        )

    return AnalyzerResult(
        name="compare_profiles",
        table=table,
        metrics=metrics,
        findings=tuple(findings),
        notes=tuple(notes),
        tables={"op_types": ops, "hccl_ops": hccl, "versions": versions},
    )
