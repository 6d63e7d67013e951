"""Rank-vs-rank operator comparison (the "compute problem" drill-down of the seeds' workflow)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
from pydantic import Field

from advisor_chat.analyzers._common import (
    check_rank,
    format_ranks,
    is_comm_kernel,
    median_step_us,
    op_matcher,
    step_us_by_rank,
    str_mask,
)
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
from advisor_chat.errors import NotAnswerableError, ToolArgumentError
from advisor_chat.ingest.profile import PEER_SAMPLE, Profile

#: "Same count, slower": the slower rank's average is at least this many times the other's.
REGRESSION_RATIO = 1.2
#: Ignore differences worth less than this share of the step (noise).
MIN_SHARE = 0.005
#: "Different count": op counts differ by at least this fraction of the larger count.
COUNT_DIFF_RATIO = 0.05
#: Uniform slowdown: the slower rank's equal-count groups are ≥ this ratio slower ...
UNIFORM_MIN_RATIO = 1.1
#: ... for at least this share of their time (then one "all ops" finding replaces per-shape ones).
UNIFORM_TIME_SHARE = 0.8
#: ... and for at least this share of the groups (so one dominant shape is not "uniform").
UNIFORM_GROUP_SHARE = 0.6
#: AI CPU time share of the step that makes AI CPU ops worth a finding.
AICPU_MIN_SHARE = 0.01
#: Findings of one kind kept (largest first).
MAX_FINDINGS = 3

_MATMUL_TYPES = ("matmul", "batchmatmul", "gemm")


class CompareOpsParams(Params):
    """Parameters of :func:`compare_ops`."""

    rank_a: int | None = Field(
        default=None,
        description="Reference (fast) rank. Default: the rank with the least median Computing "
        "time (step_trace), or the least compute-kernel time per step without a step trace.",
    )
    rank_b: int | None = Field(
        default=None,
        description="Rank to explain (usually the slow one). Default: the rank with the most "
        "median Computing time (or compute-kernel time per step).",
    )
    by: Literal["type", "shape"] = Field(
        default="shape",
        description="Grouping of the main table: 'type' = by op type; 'shape' = by op name + input "
        "shapes. Both are always computed (tables 'by_type' and 'by_shape').",
    )
    ops: str | None = Field(
        default=None,
        description="Operators whose device time per step is totalled on every rank read (table "
        "'ops_by_rank', metrics ops_*): one of 'optimizer', 'attention', 'matmul', or op types "
        "separated by commas (e.g. 'MatMulV2,BatchMatMul').",
    )
    top: int = Field(
        default=20,
        ge=1,
        le=1000,
        description="Rows kept in the main table (largest |delta_total_us| first); the full "
        "tables stay in 'by_type' / 'by_shape'.",
    )


def _type_key(k: pd.DataFrame) -> pd.Series:
    """Op type, or the kernel name where the type is missing / ``N/A`` (Level0 exports)."""
    t = k["op_type"].astype("string")
    bad = str_mask(t, lambda v: v.strip().upper() in ("N/A", "", "NAN")) | t.isna().to_numpy()
    if bad.any():
        t = t.mask(bad, k["name"].astype("string"))
    return t.fillna("")


def _rank_order(profile: Profile, comp: pd.DataFrame) -> pd.Series:
    """Per-rank ordering value (µs): median step_trace Computing, else compute-kernel time per step.

    Computing, not step time: collectives equalize step time across ranks, so the rank that
    computes longest is the one whose operators explain a compute problem.
    """
    st = profile.get("step_trace")
    if not st.empty and st["computing_us"].notna().any():
        s = st[st["step"] != -1] if (st["step"] != -1).any() else st
        return s.groupby("rank")["computing_us"].median().astype("float64")
    steps = comp.groupby("rank")["step"].nunique().clip(lower=1)
    return (comp.groupby("rank")["duration_us"].sum() / steps).astype("float64")


def _aggregate(k: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return (
        k.groupby(keys, dropna=False, observed=True)
        .agg(
            count=("duration_us", "size"),
            total_us=("duration_us", "sum"),
            accelerator_core=("accelerator_core", "first"),
        )
        .reset_index()
    )


def _compare(ka: pd.DataFrame, kb: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    a = _aggregate(ka, keys)
    b = _aggregate(kb, keys)
    m = a.merge(b, on=keys, how="outer", suffixes=("_a", "_b"))
    for side in ("a", "b"):
        m[f"count_{side}"] = m[f"count_{side}"].fillna(0).astype("int64")
        m[f"total_us_{side}"] = m[f"total_us_{side}"].fillna(0.0).astype("float64")
        m[f"avg_us_{side}"] = (
            m[f"total_us_{side}"] / m[f"count_{side}"].where(m[f"count_{side}"] > 0)
        ).astype("float64")
    m["accelerator_core"] = m["accelerator_core_b"].fillna(m["accelerator_core_a"])
    m["delta_count"] = m["count_b"] - m["count_a"]
    m["delta_total_us"] = m["total_us_b"] - m["total_us_a"]
    m["delta_avg_us"] = m["avg_us_b"] - m["avg_us_a"]
    m["avg_ratio"] = m["avg_us_b"] / m["avg_us_a"]
    m = m.drop(columns=["accelerator_core_a", "accelerator_core_b"])
    order = m["delta_total_us"].abs().sort_values(ascending=False, kind="stable").index
    cols = [
        *keys,
        "accelerator_core",
        "count_a",
        "count_b",
        "delta_count",
        "total_us_a",
        "total_us_b",
        "delta_total_us",
        "avg_us_a",
        "avg_us_b",
        "delta_avg_us",
        "avg_ratio",
    ]
    return m.loc[order, cols].reset_index(drop=True)


def _unaligned(shapes: str) -> bool:
    """Whether a MatMul input has one of its last two axes not a multiple of 16."""
    for tensor in str(shapes).split(";"):
        dims = [d.strip() for d in tensor.split(",") if d.strip()]
        for d in dims[-2:]:
            if d.isdigit() and int(d) % 16 != 0:
                return True
    return False


def _pick_ranks(a: int | None, b: int | None, fastest: int, slowest: int) -> tuple[int, int]:
    """Fill missing ranks: A defaults to the fastest, B to the slowest (never equal if avoidable)."""
    if a is None and b is None:
        return fastest, slowest
    if a is None:
        return (fastest if b != fastest else slowest), int(b)  # type: ignore[arg-type]
    if b is None:
        return int(a), (slowest if a != slowest else fastest)
    return int(a), int(b)


def _uniform_slowdown(same: pd.DataFrame) -> dict[str, float] | None:
    """Detect "every op slower by a similar factor" among equal-count (name, shape) groups.

    Returns the overall ratio and the time share of the groups slowed by ≥ UNIFORM_MIN_RATIO in
    the same direction, when that share is ≥ UNIFORM_TIME_SHARE, those groups are ≥
    UNIFORM_GROUP_SHARE of all and the overall ratio is ≥ UNIFORM_MIN_RATIO; else ``None``.
    """
    tot_a, tot_b = float(same["total_us_a"].sum()), float(same["total_us_b"].sum())
    if tot_a <= 0 or tot_b <= 0 or len(same) < 3:
        return None
    overall = tot_b / tot_a
    b_slow = overall >= 1.0
    r = same["avg_ratio"] if b_slow else 1.0 / same["avg_ratio"]
    times = same["total_us_b"] if b_slow else same["total_us_a"]
    slowed = float(times[r >= UNIFORM_MIN_RATIO].sum()) / float(times.sum())
    ov = overall if b_slow else 1.0 / overall
    n_slowed = float((r >= UNIFORM_MIN_RATIO).sum())
    if (
        ov >= UNIFORM_MIN_RATIO
        and slowed >= UNIFORM_TIME_SHARE
        and n_slowed >= UNIFORM_GROUP_SHARE * len(same)
    ):
        return {
            "overall_ratio": ov,
            "slowed_time_share": slowed,
            "b_slow": float(b_slow),
            "delta_total_us": abs(tot_b - tot_a),
            "groups": float(len(same)),
            "groups_slowed": n_slowed,
        }
    return None


def _uniform_finding(
    u: dict[str, float],
    rank_a: int,
    rank_b: int,
    n_steps: int,
    step_us: float,
    step_src: str,
    cite: str,
) -> Finding:
    slow, fast = (rank_b, rank_a) if u["b_slow"] else (rank_a, rank_b)
    per_step = u["delta_total_us"] / n_steps
    sh = per_step / step_us if step_us > 0 else 0.0
    return Finding(
        id=f"compare_ops.op_regression.r{slow}.all_ops",
        kind=FindingKind.OP_REGRESSION,
        severity=Severity.from_share(sh),
        summary=(
            f"Rank {slow} runs nearly every operator slower than rank {fast} at equal counts: "
            f"{u['overall_ratio']:.2f}x overall, {int(u['groups_slowed'])} of {int(u['groups'])} "
            f"(name, shape) groups slowed by >= {UNIFORM_MIN_RATIO:.1f}x "
            f"({u['slowed_time_share']:.0%} of their time); {per_step:.0f} us more per step "
            f"({sh:.1%} of the step). A uniform slowdown points at the device (frequency, "
            "thermal, memory bandwidth) rather than one shape."
        ),
        summary_zh=(
            f"{slow}号卡 上几乎所有算子在调用次数相同的情况下都比 {fast}号卡 慢：整体 "
            f"{u['overall_ratio']:.2f} 倍，{int(u['groups'])} 个（名称, shape）分组中有 "
            f"{int(u['groups_slowed'])} 个慢 {UNIFORM_MIN_RATIO:.1f} 倍以上；每步多 {per_step:.0f} us"
            f"（占步长 {sh:.1%}）。整体变慢通常指向设备本身（频率、温度、内存带宽），而非某个 shape。"
        ),
        ranks=(slow,),
        metrics={
            "overall_ratio": u["overall_ratio"],
            "slowed_time_share_ratio": u["slowed_time_share"],
            "groups": u["groups"],
            "groups_slowed": u["groups_slowed"],
            "delta_us_per_step": per_step,
            "share_of_step_ratio": sh,
            "step_us": step_us,
        },
        evidence=(
            Evidence(
                "kernels",
                cite,
                {"ranks": [rank_a, rank_b]},
                "equal-count (op type, name, input shapes) groups: sum(duration_us) of rank B / "
                f"rank A; share of step vs median step_us ({step_src})",
            ),
        ),
        symptom_tags=("compute_straggler", "compute_spread"),
        estimated_gain_us=per_step,
    )


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_," else "_" for c in text)[:80]


def _cut_kernel_files(profile: Profile) -> dict[int, str]:
    """``{rank: file}`` of the kernel files that end in the middle of a row (``row_cut`` warnings)."""
    out: dict[int, str] = {}
    for w in profile.warnings:
        if w.code == "row_cut" and w.path and "kernel" in Path(w.path).name.lower():
            for r in w.ranks:
                out[int(r)] = Path(w.path).name
    return out


@register("compare_ops", CompareOpsParams, order=40)
def compare_ops(profile: Profile, params: CompareOpsParams, **_: Any) -> AnalyzerResult:
    """Compare the operators of two ranks by op type and by op name + input shape.

    For rank A (default: least Computing) and rank B (default: most Computing; step time is not
    used because collectives equalize it) over the steps both ranks have,
    counts and times of compute kernels (``kernels`` table, communication tasks excluded) are
    grouped by op type and by (op type, name, input shapes) and differenced (B − A). Flags
    "same count, slower" at a shape (``op_regression``: avg ratio ≥ 1.2 and ≥ 0.5% of the step;
    one ``all_ops`` finding instead when ≥ 60% of the equal-count groups and ≥ 80% of their time
    are ≥ 1.1x slower),
    "different count" (``load_imbalance``: counts differ by ≥ 5%), AI CPU operators taking
    ≥ 1% of the step on any rank (``aicpu_op``) and ops whose input shapes change between steps
    (``dynamic_shape``).

    Args:
        profile: Loaded profile; uses ``kernels`` (and ``step_trace`` for step times).
        params: ``rank_a``, ``rank_b`` (global ranks), ``by`` ('type' | 'shape'), ``top`` (rows).

    Returns:
        AnalyzerResult whose ``table`` (top rows of ``by_type`` or ``by_shape``) has columns:
        op_type (or op_type, name, input_shapes for 'shape'), accelerator_core, count_a, count_b,
        delta_count (count), total_us_a, total_us_b, delta_total_us (µs, B − A, summed over the
        common steps), avg_us_a, avg_us_b, delta_avg_us (µs per call), avg_ratio (B / A).
        ``tables``: ``by_type`` (full, plus ``kernel_time_share_a`` / ``_b``: the type's
        share of the rank's total kernel time, 0..1), ``by_shape`` (full), ``aicpu`` (rank,
        op_type, count, total_us,
        share_of_step_ratio), ``dynamic`` (rank, name, shapes_total, shapes_max_per_step,
        total_us). Metrics: rank_a, rank_b, steps_compared, step_us (median step of B),
        compute_us_a / compute_us_b (per step), dynamic_time_ratio (time share of kernels whose
        ``op_state`` is ``dynamic``). With ``ops``: table ``ops_by_rank`` (rank, steps,
        count_per_step, time_per_step_us: the named operators on every rank read), table
        ``ops_by_type`` (each named type per launch: :func:`_ops_by_type`) and metrics
        ops_b_us, ops_b_count_per_step (rank B), ops_others_median_us,
        ops_others_median_count_per_step, ops_ranks_others (the other ranks read),
        ops_times_others_median (rank B's time / the others' median), ops_types_matched,
        ops_b_step_share (rank B's time / its median step, 0..1).

    Raises:
        ToolArgumentError: ``rank_a`` / ``rank_b`` is not in the profile (message lists ranks).
        NotAnswerableError: The profile has no kernel data (kernel_details / op_summary / DB TASK).
    """
    # large profiles with a step trace: the two ranks compared come from step_trace (light), and
    # kernel_details.csv is read for them plus a peer sample (AI CPU / dynamic-shape checks say so)
    kernel_ranks = profile.available_ranks("kernels")
    st0 = profile.get("step_trace")
    n_sample = 0
    if len(kernel_ranks) > 2 * PEER_SAMPLE and not st0.empty and st0["computing_us"].notna().any():
        order0 = _rank_order(profile, st0.iloc[:0]).reindex(kernel_ranks).dropna()
        focus = [int(r) for r in (params.rank_a, params.rank_b) if r is not None]
        if not order0.empty:
            focus += [int(cast(int, order0.idxmin())), int(cast(int, order0.idxmax()))]
        examined, _sampled = profile.peer_sample("kernels", focus)
        n_sample = len([r for r in examined if r not in focus])
        k_all = profile.kernels_for(examined)
    else:
        k_all = profile.get("kernels")
    if k_all.empty:
        raise NotAnswerableError(
            "no per-kernel data (kernel_details.csv / op_summary / DB TASK table) in this profile; "
            "collect with the Ascend PyTorch Profiler at Level0 or above to compare operators",
            zh="这份数据中没有逐算子数据（kernel_details.csv / op_summary / DB 的 TASK 表）；请用 Ascend "
            "PyTorch Profiler 以 Level0 或更高级别采集，才能比较算子",
        )
    for r in (params.rank_a, params.rank_b):
        if r is not None:
            check_rank(profile, r)
    # a kernel file cut short holds an unknown part of its rank's launches: its counts and totals
    # would read as different work, so that rank is compared with no other
    cut = _cut_kernel_files(profile)
    for r in (params.rank_a, params.rank_b):
        if r is not None and int(r) in cut:
            raise NotAnswerableError(
                f"rank {r}'s kernel file {cut[int(r)]} was cut short (it ends in the middle of a "
                "row), so its operator counts and times are incomplete and cannot be compared with "
                "another rank; copy the file again from the training machine",
                zh=f"{r}号卡的算子文件 {cut[int(r)]} 被截断（结束在某一行的中间），其算子次数和耗时不完整，"
                "无法与其他卡比较；请从训练机器重新拷贝该文件",
            )
    if cut:
        k_all = k_all[~k_all["rank"].isin(list(cut))]
        kernel_ranks = [r for r in kernel_ranks if int(r) not in cut]
        if k_all.empty:
            raise NotAnswerableError(
                "every kernel file was cut short (each ends in the middle of a row): operator "
                "counts cannot be compared; copy the files again from the training machine",
                zh="所有算子文件都被截断（都结束在某一行的中间）：无法比较算子次数；请从训练机器重新拷贝这些文件",
            )
    if not n_sample:
        kernel_ranks = sorted(int(r) for r in k_all["rank"].dropna().unique())
    for r in (params.rank_a, params.rank_b):
        if r is not None and int(r) not in kernel_ranks:
            # a kernel file of that rank left out at load: name it (what to fix)
            skipped = next(
                (
                    w.path
                    for w in getattr(profile, "warnings", ())
                    if w.path and int(r) in w.ranks and "kernel" in w.path.lower()
                ),
                None,
            )
            why = (
                f" (its {skipped} could not be read: see `advisor-chat inspect`)" if skipped else ""
            )
            raise ToolArgumentError(
                f"rank {r} has no kernel data{why}; ranks with kernels are "
                f"{format_ranks(kernel_ranks)}"
            )

    comm = is_comm_kernel(k_all).to_numpy()
    cols = ["rank", "step", "name", "op_type", "accelerator_core", "duration_us"]
    cols += ["input_shapes", "op_state"]
    comp = k_all.loc[~comm, cols]
    comp = comp.assign(
        op_type=_type_key(comp), input_shapes=comp["input_shapes"].astype("string").fillna("")
    )
    notes: list[str] = ["Communication (HCCL) tasks are excluded: their time includes waits."]
    if cut:
        notes.append(
            f"left out: rank(s) {format_ranks(sorted(cut))}, whose kernel file was cut short "
            f"({', '.join(sorted(set(cut.values())))}): their counts are incomplete"
        )

    order = _rank_order(profile, comp).reindex(kernel_ranks).dropna()
    if order.empty:
        order = pd.Series(0.0, index=kernel_ranks)
    fastest, slowest = int(cast(int, order.idxmin())), int(cast(int, order.idxmax()))
    rank_a, rank_b = _pick_ranks(params.rank_a, params.rank_b, fastest, slowest)
    twins = {
        "Communication (HCCL) tasks are excluded: their time includes waits.": (
            "通信（HCCL）任务不计入：其耗时包含等待。"
        )
    }
    if rank_a == rank_b:
        one = (
            f"only rank {rank_a} is available for comparison; rank-vs-rank deltas are zero "
            "(AI CPU and dynamic-shape checks still apply)"
        )
        notes.append(one)
        twins[one] = f"只有{rank_a}号卡可以比较；卡间差值为零（AI CPU 与动态 shape 检查仍然有效）"

    ka = comp[comp["rank"] == rank_a]
    kb = comp[comp["rank"] == rank_b]
    steps_a = set(ka["step"].dropna().astype(int))
    steps_b = set(kb["step"].dropna().astype(int))
    common = sorted(steps_a & steps_b)
    if common and (steps_a != steps_b):
        notes.append(f"compared on the {len(common)} step(s) both ranks have: {common[:10]}")
        ka = ka[ka["step"].isin(common)]
        kb = kb[kb["step"].isin(common)]
    elif not common:
        notes.append("the two ranks share no step id; all their kernels are compared")
    n_steps = max(len(common) if common else max(len(steps_a), len(steps_b)), 1)

    by_type = _compare(ka, kb, ["op_type"])
    for side in ("a", "b"):  # each type's share of the rank's kernel (device) time
        all_us = float(by_type[f"total_us_{side}"].sum())
        by_type[f"kernel_time_share_{side}"] = (
            by_type[f"total_us_{side}"] / all_us if all_us > 0 else 0.0
        )
    by_shape = _compare(ka, kb, ["op_type", "name", "input_shapes"])

    per_rank_step = step_us_by_rank(profile)
    step_us = float(per_rank_step.get(rank_b, np.nan)) if not per_rank_step.empty else np.nan
    if not np.isfinite(step_us) or step_us <= 0:
        step_us = median_step_us(profile) or float("nan")
    step_src = "step_trace" if not per_rank_step.empty else "kernels"

    def share(delta_total: float) -> float:
        if not np.isfinite(step_us) or step_us <= 0:
            return 0.0
        return abs(delta_total) / n_steps / step_us

    cite_k = f"{profile.cite('kernels', rank_a)}; {profile.cite('kernels', rank_b)}"
    findings: list[Finding] = []

    # "same count, slower" at a shape -> op_regression
    if rank_a != rank_b:
        same = by_shape[(by_shape["count_a"] == by_shape["count_b"]) & (by_shape["count_a"] > 0)]
        ratio = np.maximum(same["avg_ratio"], 1.0 / same["avg_ratio"])
        shares = same["delta_total_us"].abs() / n_steps / step_us if step_us > 0 else 0.0
        reg = same[(ratio >= REGRESSION_RATIO) & (shares >= MIN_SHARE)]
        uniform = _uniform_slowdown(same)
        if uniform is not None:
            findings.append(
                _uniform_finding(uniform, rank_a, rank_b, n_steps, step_us, step_src, cite_k)
            )
            reg = reg.iloc[0:0]
        row: Any
        for row in reg.head(MAX_FINDINGS).itertuples(index=False):
            slow, fast = (rank_b, rank_a) if row.delta_total_us > 0 else (rank_a, rank_b)
            avg_slow = row.avg_us_b if slow == rank_b else row.avg_us_a
            avg_fast = row.avg_us_a if slow == rank_b else row.avg_us_b
            ratio_v = float(avg_slow / avg_fast)
            per_step = abs(float(row.delta_total_us)) / n_steps
            sh = share(row.delta_total_us)
            tags = ["op_regression_shape", "compute_straggler"]
            is_mm = any(t in str(row.op_type).lower() for t in _MATMUL_TYPES)
            if is_mm:
                tags.append("matmul_slow")
                if _unaligned(row.input_shapes):
                    tags.append("shape_alignment")
            shape_txt = row.input_shapes or "(no shape recorded)"
            findings.append(
                Finding(
                    id=f"compare_ops.op_regression.r{slow}.{_slug(str(row.op_type))}.{_slug(shape_txt)}",
                    kind=FindingKind.OP_REGRESSION,
                    severity=Severity.from_share(sh),
                    summary=(
                        f"Rank {slow} runs {row.op_type} ({row.name}) at input shape {shape_txt} "
                        f"{ratio_v:.2f}x slower than rank {fast} with the same count ({int(row.count_a)}): "
                        f"avg {avg_slow:.1f} us vs {avg_fast:.1f} us, {per_step:.0f} us more per step "
                        f"({sh:.1%} of the {step_us:.0f} us step)."
                    ),
                    summary_zh=(
                        f"{slow}号卡 上的 {row.op_type}（{row.name}）在输入 shape {shape_txt} 下比 "
                        f"{fast}号卡 慢 {ratio_v:.2f} 倍，调用次数相同（{int(row.count_a)}）：平均 "
                        f"{avg_slow:.1f} us 对比 {avg_fast:.1f} us，每步多 {per_step:.0f} us"
                        f"（占步长 {sh:.1%}）。"
                    ),
                    ranks=(slow,),
                    metrics={
                        "count": float(row.count_a),
                        "avg_us_slow": float(avg_slow),
                        "avg_us_fast": float(avg_fast),
                        "avg_ratio": ratio_v,
                        "delta_total_us": abs(float(row.delta_total_us)),
                        "delta_us_per_step": per_step,
                        "share_of_step_ratio": sh,
                        "step_us": step_us,
                        "steps_compared": float(n_steps),
                    },
                    evidence=(
                        Evidence(
                            "kernels",
                            cite_k,
                            {
                                "ranks": [rank_a, rank_b],
                                "op_type": str(row.op_type),
                                "name": str(row.name),
                                "input_shapes": str(row.input_shapes),
                            },
                            "avg = sum(duration_us) / count per rank; delta per step = "
                            "|total_b - total_a| / steps; share = delta per step / median step_us "
                            f"({step_src})",
                        ),
                    ),
                    symptom_tags=tuple(tags),
                    estimated_gain_us=per_step,
                )
            )

        # "different count" by op type -> load_imbalance
        bt = by_type[(by_type["delta_count"] != 0)]
        mx = np.maximum(bt["count_a"], bt["count_b"]).astype("float64")
        cdiff = bt["delta_count"].abs() / mx
        shares_t = bt["delta_total_us"].abs() / n_steps / step_us if step_us > 0 else 0.0
        imb = bt[(cdiff >= COUNT_DIFF_RATIO) & (shares_t >= MIN_SHARE)]
        for row in imb.head(MAX_FINDINGS).itertuples(index=False):
            heavy = rank_b if row.count_b > row.count_a else rank_a
            light = rank_a if heavy == rank_b else rank_b
            c_heavy = max(int(row.count_a), int(row.count_b))
            c_light = min(int(row.count_a), int(row.count_b))
            per_step = abs(float(row.delta_total_us)) / n_steps
            sh = share(row.delta_total_us)
            findings.append(
                Finding(
                    id=f"compare_ops.load_imbalance.r{heavy}.{_slug(str(row.op_type))}",
                    kind=FindingKind.LOAD_IMBALANCE,
                    severity=Severity.from_share(sh),
                    summary=(
                        f"Rank {heavy} runs {c_heavy} {row.op_type} ops vs {c_light} on rank {light} "
                        f"over {n_steps} step(s): different work, not slower kernels; "
                        f"{per_step:.0f} us per step difference ({sh:.1%} of the step)."
                    ),
                    summary_zh=(
                        f"{heavy}号卡 执行了 {c_heavy} 个 {row.op_type} 算子，{light}号卡 为 {c_light} 个"
                        f"（{n_steps} 步）：属于负载不均而非算子变慢；每步相差 {per_step:.0f} us"
                        f"（占步长 {sh:.1%}）。"
                    ),
                    ranks=(heavy,),
                    metrics={
                        "count_heavy": float(c_heavy),
                        "count_light": float(c_light),
                        "delta_count": float(c_heavy - c_light),
                        "delta_us_per_step": per_step,
                        "share_of_step_ratio": sh,
                        "step_us": step_us,
                        "steps_compared": float(n_steps),
                    },
                    evidence=(
                        Evidence(
                            "kernels",
                            cite_k,
                            {"ranks": [rank_a, rank_b], "op_type": str(row.op_type)},
                            "count and sum(duration_us) per op type per rank over the common steps",
                        ),
                    ),
                    symptom_tags=("op_count_imbalance", "compute_spread"),
                    estimated_gain_us=per_step / 2.0,
                )
            )

    # AI CPU on the hot path (all ranks)
    aic = comp[str_mask(comp["accelerator_core"], lambda v: v.upper() == "AI_CPU")]
    aicpu_tbl = pd.DataFrame(
        columns=["rank", "op_type", "count", "total_us", "share_of_step_ratio"]
    )
    steps_per_rank = comp.groupby("rank")["step"].nunique().clip(lower=1)
    step_ref = per_rank_step if not per_rank_step.empty else None
    if not aic.empty:
        aicpu_tbl = (
            aic.groupby(["rank", "op_type"], observed=True)["duration_us"]
            .agg(count="size", total_us="sum")
            .reset_index()
        )
        denom_steps = aicpu_tbl["rank"].map(steps_per_rank).astype("float64")
        if step_ref is not None:
            denom = aicpu_tbl["rank"].map(step_ref).astype("float64")
        else:
            denom = pd.Series(median_step_us(profile) or np.nan, index=aicpu_tbl.index)
        aicpu_tbl["share_of_step_ratio"] = aicpu_tbl["total_us"] / denom_steps / denom
        aicpu_tbl = aicpu_tbl.sort_values("total_us", ascending=False, kind="stable")
        per_rank_share = aicpu_tbl.groupby("rank")["share_of_step_ratio"].sum()
        hot = per_rank_share[per_rank_share >= AICPU_MIN_SHARE]
        if not hot.empty:
            top_types = (
                aicpu_tbl[aicpu_tbl["rank"].isin(hot.index)]
                .groupby("op_type")["total_us"]
                .sum()
                .sort_values(ascending=False)
            )
            names = ", ".join(str(t) for t in top_types.index[:3])
            worst = int(cast(int, hot.idxmax()))
            sh = float(hot.max())
            us_per_step = float(
                aicpu_tbl.loc[aicpu_tbl["rank"] == worst, "total_us"].sum()
                / steps_per_rank.get(worst, 1)
            )
            n_read = int(per_rank_share.index.nunique())
            every = len(hot) == n_read and n_read > 1
            if every:  # the same cost on every rank read: a job's cost, not one rank's
                low = float(hot.min())
                summary = (
                    f"AI CPU operators ({names}) take {low:.1%} to {sh:.1%} of the step on every "
                    f"rank read ({n_read} of {n_read}; most on rank {worst}: {us_per_step:.0f} us "
                    "per step)."
                )
                summary_zh = (
                    f"AI CPU 算子（{names}）在所读的每张卡上（{n_read}/{n_read}）都占步长的 {low:.1%} 到 "
                    f"{sh:.1%}（最多的是 {worst}号卡：每步 {us_per_step:.0f} us）。"
                )
            else:
                summary = (
                    f"AI CPU operators ({names}) take {sh:.1%} of the step on rank {worst} "
                    f"({us_per_step:.0f} us per step); {len(hot)} rank(s) above "
                    f"{AICPU_MIN_SHARE:.0%}."
                )
                summary_zh = (
                    f"AI CPU 算子（{names}）在 {worst}号卡 上占步长的 {sh:.1%}"
                    f"（每步 {us_per_step:.0f} us）；共 {len(hot)} 张卡超过 {AICPU_MIN_SHARE:.0%}。"
                )
            findings.append(
                Finding(
                    id="compare_ops.aicpu_op.hot",
                    kind=FindingKind.AICPU_OP,
                    severity=Severity.from_share(sh),
                    summary=summary,
                    summary_zh=summary_zh,
                    ranks=tuple(int(r) for r in hot.index),
                    metrics={
                        "aicpu_share_of_step_ratio": sh,
                        "aicpu_us_per_step": us_per_step,
                        "ranks_affected": float(len(hot)),
                    },
                    evidence=(
                        Evidence(
                            "kernels",
                            profile.cite("kernels", worst),
                            {"accelerator_core": "AI_CPU", "rank": worst},
                            "sum(duration_us) of AI_CPU tasks / steps / median step_us; "
                            "overlap with other streams is not subtracted",
                        ),
                    ),
                    symptom_tags=("aicpu_op",),
                    estimated_gain_us=None,
                )
            )

    # dynamic shapes: shapes of one op name change between steps
    dyn_tbl = pd.DataFrame(
        columns=["rank", "name", "shapes_total", "shapes_max_per_step", "total_us"]
    )
    dyn_mask = str_mask(comp["op_state"], lambda v: v.lower() == "dynamic")
    durs = comp["duration_us"].to_numpy(dtype="float64", na_value=0.0)
    total_comp = float(durs.sum())
    dyn_time_ratio = float(durs[dyn_mask].sum()) / total_comp if total_comp > 0 else 0.0
    shape_ok = str_mask(comp["input_shapes"], lambda v: v != "")
    has_shapes = bool(shape_ok.any())
    if has_shapes and comp["step"].nunique() > 1:
        name_codes, name_uni = pd.factorize(comp["name"])
        shape_codes = pd.factorize(comp["input_shapes"])[0]
        d = pd.DataFrame(
            {
                "rank": comp["rank"].to_numpy(dtype="int64", na_value=-1),
                "name": name_codes,
                "step": comp["step"].to_numpy(dtype="int64", na_value=-1),
                "shape": shape_codes,
                "total_us": durs,
            }
        )[shape_ok]
        uniq = d.drop_duplicates(["rank", "name", "step", "shape"])
        tot = pd.DataFrame(
            {
                "shapes_total": uniq.drop_duplicates(["rank", "name", "shape"])
                .groupby(["rank", "name"])
                .size(),
                "shapes_max_per_step": uniq.groupby(["rank", "name", "step"])
                .size()
                .groupby(level=[0, 1])
                .max(),
                "total_us": d.groupby(["rank", "name"])["total_us"].sum(),
            }
        )
        dyn_tbl = tot.reset_index()
        dyn_tbl["name"] = np.asarray(name_uni, dtype=object)[dyn_tbl["name"].to_numpy()]
        dyn_tbl = dyn_tbl[dyn_tbl["shapes_total"] > dyn_tbl["shapes_max_per_step"]]
        dyn_tbl = dyn_tbl.sort_values("total_us", ascending=False, kind="stable")[
            ["rank", "name", "shapes_total", "shapes_max_per_step", "total_us"]
        ].reset_index(drop=True)
        if not dyn_tbl.empty:
            dyn_names = dyn_tbl["name"].drop_duplicates().tolist()
            ranks_dyn = sorted(int(r) for r in dyn_tbl["rank"].unique())
            top = dyn_tbl.iloc[0]
            findings.append(
                Finding(
                    id="compare_ops.dynamic_shape.varying",
                    kind=FindingKind.DYNAMIC_SHAPE,
                    severity=Severity.LOW,
                    summary=(
                        f"{len(dyn_names)} operator(s) change input shape between steps (e.g. "
                        f"{top['name']}: {int(top['shapes_total'])} shapes in total vs at most "
                        f"{int(top['shapes_max_per_step'])} per step) on ranks {format_ranks(ranks_dyn)}; "
                        "each new shape can trigger a compile and slower kernels."
                    ),
                    summary_zh=(
                        f"{len(dyn_names)} 个算子的输入 shape 在不同步之间变化（如 {top['name']}：共 "
                        f"{int(top['shapes_total'])} 种 shape，单步最多 "
                        f"{int(top['shapes_max_per_step'])} 种），涉及 {format_ranks(ranks_dyn, sep='、')}号卡；"
                        "每个新 shape 都可能触发编译。"
                    ),
                    ranks=tuple(ranks_dyn),
                    metrics={
                        "ops_with_varying_shapes": float(len(dyn_names)),
                        "shapes_total": float(top["shapes_total"]),
                        "shapes_max_per_step": float(top["shapes_max_per_step"]),
                        "dynamic_time_ratio": dyn_time_ratio,
                    },
                    evidence=(
                        Evidence(
                            "kernels",
                            profile.cite("kernels"),
                            {"names": dyn_names[:10]},
                            "per (rank, name): distinct input_shapes over all steps > the most "
                            "distinct input_shapes within one step",
                        ),
                    ),
                    symptom_tags=("dynamic_shape",),
                )
            )
    elif not has_shapes:
        notes.append(
            "no input shapes recorded (record_shapes off or Level0): grouped by op name only"
        )

    metrics = {
        "rank_a": float(rank_a),
        "rank_b": float(rank_b),
        "steps_compared": float(n_steps),
        "step_us": step_us,
        "compute_us_a": float(ka["duration_us"].sum()) / n_steps,
        "compute_us_b": float(kb["duration_us"].sum()) / n_steps,
        "dynamic_time_ratio": dyn_time_ratio,
    }
    ops_tbl = types_tbl = None
    if params.ops:
        ops_tbl = _ops_by_rank(comp, params.ops)
        types_tbl = _ops_by_type(comp, params.ops)
        metrics.update(_ops_metrics(ops_tbl, rank_b))
        if "ops_b_us" in metrics and math.isfinite(step_us) and step_us > 0:
            metrics["ops_b_step_share"] = metrics["ops_b_us"] / step_us
        notes.append(
            f"ops={params.ops!r}: {', '.join(ops_tbl.attrs['op_types']) or 'no operator matched'}"
        )
    if n_sample:
        metrics["peer_sample_ranks"] = float(n_sample)
        n_read = len(set(comp["rank"].dropna().astype(int)))
        findings = [
            replace(
                f,
                summary=f.summary
                + f" (AI CPU and dynamic shapes checked on {n_read} of {len(kernel_ranks)} ranks:"
                f" ranks {rank_a}, {rank_b} and a peer sample of {n_sample})",
                summary_zh=(f.summary_zh or "")
                + f"（AI CPU 与动态 shape 仅在 {len(kernel_ranks)} 张卡中的 {n_read} 个上检查："
                f"{rank_a}、{rank_b} 号卡与 {n_sample} 张抽样卡）",
                metrics={**f.metrics, "peer_sample_ranks": float(n_sample)},
            )
            if f.id.startswith(("compare_ops.aicpu_op", "compare_ops.dynamic_shape"))
            else f
            for f in findings
        ]
        notes.append(
            f"kernels read for {n_read} of {len(kernel_ranks)} ranks (ranks {rank_a} "
            f"and {rank_b}, and a peer sample of {n_sample}); AI CPU and dynamic-shape checks "
            "cover those ranks"
        )
    main = by_type if params.by == "type" else by_shape
    return AnalyzerResult(
        name="compare_ops",
        table=main.head(params.top).reset_index(drop=True),
        metrics=metrics,
        findings=tuple(findings),
        notes=tuple(notes),
        notes_zh=notes_in_chinese(notes, twins),
        tables={
            "by_type": by_type,
            "by_shape": by_shape,
            "aicpu": aicpu_tbl.reset_index(drop=True),
            "dynamic": dyn_tbl,
            **({"ops_by_rank": ops_tbl} if ops_tbl is not None else {}),
            **({"ops_by_type": types_tbl} if types_tbl is not None else {}),
        },
    )


def _ops_by_rank(comp: pd.DataFrame, spec: str) -> pd.DataFrame:
    """Device time and launches per step of the operators ``spec`` names, on every rank read.

    Columns: rank, steps (steps with kernels), count_per_step, time_per_step_us (µs: Σ duration_us of
    the matched compute kernels / steps), from the ``kernels`` table (kernel_details.csv / DB
    TASK), communication excluded. ``attrs['op_types']``: the op types matched, most time first.
    """
    hit = comp[str_mask(comp["op_type"], op_matcher(spec))]
    steps = comp.groupby("rank")["step"].nunique().clip(lower=1)
    g = hit.groupby("rank")["duration_us"].agg(["count", "sum"]).reindex(steps.index, fill_value=0)
    out = pd.DataFrame(
        {
            "rank": steps.index.astype("int64"),
            "steps": steps.to_numpy().astype("int64"),
            "count_per_step": g["count"].to_numpy() / steps.to_numpy(),
            "time_per_step_us": g["sum"].to_numpy() / steps.to_numpy(),
        }
    )
    out.attrs["op_types"] = [
        str(t) for t in hit.groupby("op_type")["duration_us"].sum().sort_values().index[::-1]
    ]
    return out


def _ops_by_type(comp: pd.DataFrame, spec: str) -> pd.DataFrame:
    """Per launch figures of each operator type ``spec`` names, over every rank read.

    Columns: op_type, accelerator_core (the most common one), ranks (ranks that run it),
    steps_with_op (steps that run it on a rank, median over those ranks), steps (steps with
    kernels on a rank, median), launches_per_step (launches per step that runs it, median over
    (step, rank)), median_us (per launch: median duration_us), time_per_step_us (µs per step
    over every step with kernels, median over the ranks that run it). Most time first. Source:
    the ``kernels`` table (kernel_details.csv / DB TASK), communication excluded.
    """
    cols = [
        "op_type", "accelerator_core", "ranks", "steps_with_op", "steps", "launches_per_step",
        "median_us", "time_per_step_us",
    ]  # fmt: skip
    hit = comp[str_mask(comp["op_type"], op_matcher(spec))]
    if hit.empty:
        return pd.DataFrame(columns=cols)
    steps = comp.groupby("rank")["step"].nunique().clip(lower=1)
    rows = []
    for op_type, g in hit.groupby("op_type"):
        per_unit = g.groupby(["rank", "step"])["duration_us"].agg(["count", "sum"])
        by_rank = g.groupby("rank").agg(n_steps=("step", "nunique"), us=("duration_us", "sum"))
        core = g["accelerator_core"].astype("string").fillna("").mode()
        rows.append(
            {
                "op_type": str(op_type),
                "accelerator_core": str(core.iloc[0]) if not core.empty else "",
                "ranks": len(by_rank),
                "steps_with_op": float(by_rank["n_steps"].median()),
                "steps": float(steps.reindex(by_rank.index).median()),
                "launches_per_step": float(per_unit["count"].median()),
                "median_us": float(g["duration_us"].median()),
                "time_per_step_us": float(
                    (by_rank["us"] / steps.reindex(by_rank.index).to_numpy()).median()
                ),
            }
        )
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values("time_per_step_us", ascending=False).reset_index(drop=True)


def _ops_metrics(tbl: pd.DataFrame, rank: int) -> dict[str, float]:
    """The asked rank's matched-operator time per step against the other ranks' median."""
    mine = tbl[tbl["rank"] == rank]
    others = tbl[tbl["rank"] != rank]
    out = {"ops_types_matched": float(len(tbl.attrs["op_types"]))}
    if not mine.empty:
        out["ops_b_us"] = float(mine["time_per_step_us"].iloc[0])
        out["ops_b_count_per_step"] = float(mine["count_per_step"].iloc[0])
    if not others.empty:
        out["ops_others_median_us"] = float(others["time_per_step_us"].median())
        out["ops_others_median_count_per_step"] = float(others["count_per_step"].median())
        out["ops_ranks_others"] = float(len(others))
        med = out["ops_others_median_us"]
        if "ops_b_us" in out and med > 0:
            out["ops_times_others_median"] = out["ops_b_us"] / med
    return out
