"""Degradation rule: one rank's step time grows over the run."""

from __future__ import annotations

import dataclasses

from advisor_chat.analyzers.base import Category
from advisor_chat.diagnosis.context import Context, ranks_label
from advisor_chat.diagnosis.rules.common import _severity
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Mechanism,
    Remedy,
    RootCause,
)


def rule_degradation(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Degradation rule: steps get slower over the run (step_trend analyzer).

    Rule: a ``step_trend.degradation`` finding (robust slope × steps ≥ the analyzer's threshold).
    When its ranks are exactly one existing rank cause's culprit, that cause becomes a DEGRADATION
    cause of the rank (same victims); when they are the one rank of a step-events cause or of a
    rank slow from some step on (``onset_step``), the finding joins that cause as its symptom
    (one fault, one cause);
    otherwise one job-level DEGRADATION cause with the finding's
    gain (estimate: last steps back to the first steps' time). Returns the updated cause list.
    """
    out = list(causes)
    for f in ctx.finding("step_trend.degradation."):
        if f.id in ctx.claimed:
            continue
        ctx.claimed.add(f.id)
        growth = float(f.metrics.get("growth_ratio", f.metrics.get("median_growth_ratio", 0.0)))
        for i, c in enumerate(out):
            if (c.culprit.kind == "steps" or "onset_step" in c.metrics) and set(
                c.culprit.ranks
            ) == set(f.ranks):
                # the same rank late in the last steps: an onset the events cause already
                # states (one fault, one cause); the trend is its symptom
                out[i] = dataclasses.replace(
                    c,
                    findings=(*c.findings, f),
                    symptom_tags=(*c.symptom_tags, "step_degradation"),
                )
                break
            if c.culprit.kind == "rank" and set(c.culprit.ranks) == set(f.ranks):
                rl, rl_zh = c.culprit.label, c.culprit.label_zh
                out[i] = RootCause(
                    **{
                        **c.__dict__,
                        "id": f"cause.degradation.r{c.culprit.ranks[0]}",
                        "mechanism": Mechanism.DEGRADATION,
                        "summary": f"Degradation on {rl}: it gets slower step after step. "
                        + c.summary,
                        "summary_zh": f"{rl_zh}逐步变慢。" + c.summary_zh,
                        "findings": (*c.findings, f),
                        "remedies": (
                            *(r for r in c.remedies if r.kind == "action"),
                            Remedy(
                                "check",
                                f"Find what grows every step on {rl} (host memory, lists or tensors kept "
                                "per step, log buffers).",
                                f"找出{rl_zh}上每步都在增长的东西（主机内存、每步保留的列表或张量、日志缓冲）。",
                            ),
                            *(r for r in c.remedies if r.kind == "check"),
                        ),
                        "symptom_tags": (*c.symptom_tags, "step_degradation"),
                    }
                )
                break
        else:
            gain = f.estimated_gain_us or 0.0
            rl, rl_zh = ranks_label(f.ranks or ctx.ranks)
            out.append(
                RootCause(
                    id="cause.degradation.job",
                    mechanism=Mechanism.DEGRADATION,
                    category=f.category or Category.UNKNOWN,
                    culprit=Culprit(
                        kind="job", ranks=tuple(f.ranks), label="the whole job", label_zh="整个作业"
                    ),
                    victims=(),
                    summary=f"Steps get slower over the run on {rl}: {f.summary}",
                    summary_zh=f"{rl_zh}的步长随训练逐步变长"
                    + (f"：{f.summary_zh}" if f.summary_zh else "。"),
                    metrics={"gain_us": gain, "growth_ratio": growth},
                    findings=(f,),
                    gain_us=gain,
                    bound=BoundKind.ESTIMATE,
                    remedies=(
                        Remedy(
                            "check",
                            "Find what grows every step (host memory, cached tensors, log buffers).",
                            "找出每步都在增长的东西（主机内存、缓存的张量、日志缓冲）。",
                        ),
                    ),
                    symptom_tags=("step_degradation",),
                    severity=_severity(gain, ctx.step_us),
                )
            )
    return out
