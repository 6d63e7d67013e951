"""Regression rule: profile against baseline."""

from __future__ import annotations

from typing import Any, cast

from advisor_chat.analyzers.base import Category
from advisor_chat.diagnosis.context import Context
from advisor_chat.diagnosis.rules.common import _claim, _severity
from advisor_chat.diagnosis.text import ms, num, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Impact,
    Mechanism,
    Remedy,
    RootCause,
)


def rule_regression(ctx: Context) -> list[RootCause]:
    """Regression rule: profile vs baseline (compare_profiles analyzer, only with a baseline).

    Rule: a ``compare_profiles.profile_diff.regression`` finding (median step slower by more than
    the analyzer's noise threshold) becomes one REGRESSION cause of the job. Category from the
    step component that grew most (Computing → compute, Communication Not Overlapped →
    communication, Free → scheduling). Operator: a fused op type that disappeared (count per step
    from > 0 to 0, e.g. MatmulAllReduce), else the op type whose time per step grew most.
    Victims: every rank, lost = the median step delta. Gain: the step delta (estimate: back to
    the baseline). Source: both profiles' ``step_trace`` and ``kernels``.
    """
    fs = [
        f
        for f in ctx.finding("compare_profiles.profile_diff.regression")
        if (f.metrics.get("delta_step_us") or 0.0) > 0
    ]
    if not fs:
        return []
    top = fs[0]
    delta = float(top.metrics["delta_step_us"])
    res = ctx.result("compare_profiles")
    comp_cat = {
        "computing_us": Category.COMPUTE,
        "communication_not_overlapped_us": Category.COMMUNICATION,
        "free_us": Category.SCHEDULING,
        "bubble_us": Category.COMMUNICATION,
    }
    category = Category.UNKNOWN
    grew = ""
    operator = ""
    op_txt = op_zh = ""
    if res is not None and not res.table.empty and "component" in res.table.columns:
        t = res.table[res.table["component"].isin(list(comp_cat))]
        if not t.empty:
            row = t.loc[cast(Any, t["delta_us"].idxmax())]
            grew = str(row["component"])
            category = comp_cat[grew]
    if res is not None and "op_types" in res.tables and not res.tables["op_types"].empty:
        ot = res.tables["op_types"]
        gone = ot[(ot["base_count_per_step"] > 0) & (ot["new_count_per_step"].fillna(0) == 0)]
        if not gone.empty:
            g = gone.loc[cast(Any, gone["base_us_per_step"].idxmax())]
            operator = str(g["op_type"])
            op_txt = f"; {operator} ({num(g['base_count_per_step']):.0f} per step before) is gone"
            op_zh = f"；{operator}（之前每步 {num(g['base_count_per_step']):.0f} 次）已消失"
        else:
            g = ot.loc[cast(Any, ot["delta_us_per_step"].idxmax())]
            operator = str(g["op_type"])
            op_txt = f"; {operator} grew most ({ms(num(g['delta_us_per_step']))} per step)"
            op_zh = f"；{operator} 增长最多（每步 {ms(num(g['delta_us_per_step']))}）"
    grew_en = {
        "computing_us": "Computing",
        "communication_not_overlapped_us": "Communication Not Overlapped",
        "free_us": "Free",
        "bubble_us": "Bubble",
    }.get(grew, "")
    grew_zh = {
        "computing_us": "计算时间",
        "communication_not_overlapped_us": "未被掩盖的通信",
        "free_us": "空闲时间",
        "bubble_us": "流水线气泡",
    }.get(grew, "")
    base_step = float(top.metrics.get("base_step_us", float("nan")))
    new_step = float(top.metrics.get("new_step_us", float("nan")))
    all_cp = _claim(ctx, lambda f: f.id.startswith("compare_profiles."))
    victims = tuple(
        Impact(r, delta, share_of(delta, ctx.val(r, "step_us")), "own_time") for r in ctx.ranks
    )
    return [
        RootCause(
            id="cause.regression",
            mechanism=Mechanism.REGRESSION,
            category=category,
            culprit=Culprit(
                kind="job",
                operator=operator,
                label="the profile vs its baseline",
                label_zh="本次与基线的差异",
            ),
            victims=victims,
            summary=(
                f"Regression against the baseline: the median step went from {ms(base_step)} to "
                f"{ms(new_step)} (+{ms(delta)})"
                + (f", mostly {grew_en}" if grew_en else "")
                + f"{op_txt}."
            ),
            summary_zh=(
                f"相对基线变慢：每步中位数从 {ms(base_step)} 变为 {ms(new_step)}（多 {ms(delta)}）"
                + (f"，主要是{grew_zh}增加" if grew_zh else "")
                + f"{op_zh}。"
            ),
            metrics={"delta_step_us": delta, "base_step_us": base_step, "new_step_us": new_step},
            findings=all_cp,
            gain_us=delta,
            bound=BoundKind.ESTIMATE,
            remedies=(
                Remedy(
                    "action",
                    (
                        f"Bring back {operator} (re-enable the fused operator / MC2 setting the new "
                        "version dropped) or pin the previous version."
                        if op_txt.endswith("is gone")
                        else "Pin the previous software version until the slower path is fixed."
                    ),
                    (
                        f"恢复 {operator}（重新开启新版本去掉的融合算子或 MC2 设置），或固定使用之前的版本。"
                        if op_txt.endswith("is gone")
                        else "在修复变慢的路径之前，固定使用之前的软件版本。"
                    ),
                    delta,
                    BoundKind.ESTIMATE,
                ),
                Remedy(
                    "check",
                    "Check the software versions that changed between the two runs (CANN, "
                    "torch_npu, driver, operator packages) against the operators whose time changed.",
                    "对照耗时变化的算子，检查两次运行之间变化了的软件版本（CANN、torch_npu、驱动、算子包）。",
                ),
            ),
            symptom_tags=("profile_regression", "hccl_op_count_increase", "cann_upgrade")
            if operator
            else ("profile_regression",),
            severity=_severity(delta, ctx.step_us),
        )
    ]
