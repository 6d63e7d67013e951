"""The ``diagnose`` tool: the profile's root causes as short model-readable text.

An LLM backend calls it first (DESIGN.md §4b, §6): every cause with its culprit, victims, numbers
(with units and sources), gain and typed remedies. Profile-derived text (summaries that quote
operator names, shapes, paths) is fenced as data, like every analyzer tool result.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor_chat.diagnosis.types import Diagnosis, RootCause
from advisor_chat.tools.render import clean_data, fence

DIAGNOSE_DESCRIPTION = (
    "Call this first. The root causes of the profile, most important first: for each, the "
    "mechanism, the culprit (rank, link, stage, group, operator/shape, step events or the whole "
    "job), the victim ranks and the time they lose per step, the numbers with units and their "
    "sources, the expected gain and the typed remedies (actions with gain, then checks). With "
    "'rank', also that rank's role in each cause (culprit, on the slow link, or victim)."
)


class DiagnoseParams(BaseModel):
    """Parameters of the ``diagnose`` tool."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    rank: int | None = Field(
        None, description="Optional global rank: also say this rank's role in each cause"
    )
    language: Literal["en", "zh"] = Field(
        "en", description="Language of the cause summaries and remedies: 'en' or 'zh'"
    )


def _ms(us: float | None) -> str:
    if us is None or not math.isfinite(us):
        return "n/a"
    return f"{us / 1000:.1f} ms" if abs(us) >= 50 else "0.0 ms"


def _ranks(rs: tuple[int, ...] | list[int]) -> str:
    from advisor_chat.tools.core import fmt_ranks

    return fmt_ranks(list(rs))


def _cause_lines(i: int, c: RootCause, zh: bool) -> list[str]:
    cul = c.culprit
    label = cul.label_zh if zh and cul.label_zh else cul.label
    lines = [
        f"cause {i} {c.id} [{c.severity.value}] {c.mechanism.value} ({c.category.value}); "
        f"culprit {cul.kind}: {clean_data(label, 120)}"
    ]
    if cul.operator:
        lines.append(
            f"  operator: {clean_data(cul.operator, 80)} shape {clean_data(cul.shape, 120)}"
        )
    if cul.link is not None:
        lines.append(f"  link: {cul.link[0]}->{cul.link[1]} transport {cul.transport}")
    if cul.events:
        ev = ", ".join(f"(step {s}, rank {r})" for s, r in cul.events[:16])
        lines.append(f"  events: {ev}" + (" ..." if len(cul.events) > 16 else ""))
    lines.append(f"  summary: {clean_data(c.summary_zh if zh else c.summary, 600)}")
    dom = c.dominant_zh if zh and c.dominant_zh else c.dominant
    if dom:
        lines.append(f"  culprit is: {clean_data(dom, 200)}")
    if c.steps:
        lines.append(f"  steps: {', '.join(str(s) for s in c.steps)}")
    if c.victims:
        shown = ", ".join(
            f"rank {v.rank} {_ms(v.lost_us)}/step ({v.share:.1%}, {v.how})" for v in c.victims[:6]
        )
        more = f" ... {len(c.victims)} victim ranks ({_ranks([v.rank for v in c.victims])})"
        lines.append(f"  victims: {shown}" + (more if len(c.victims) > 6 else ""))
    if c.own:
        own = ", ".join(f"rank {o.rank} {_ms(o.lost_us)}/step ({o.how})" for o in c.own[:4])
        lines.append(f"  culprit's own time: {own}")
    if c.metrics:
        nums = "; ".join(f"{k}={v:.4g}" for k, v in c.metrics.items() if math.isfinite(v))
        lines.append(f"  numbers: {nums}")
    if c.gain_us is not None:
        lines.append(f"  expected gain: {_ms(c.gain_us)} per step ({c.bound.value})")
    for r in c.remedies:
        txt = clean_data(r.text_zh if zh else r.text, 300)
        gain = (
            f" [gain {_ms(r.gain_us)}/step, {r.bound.value}]"
            if r.kind == "action" and r.gain_us is not None
            else ""
        )
        case = f" (case {r.case_id})" if r.case_id else ""
        lines.append(f"  {r.kind}: {txt}{gain}{case}")
    if c.findings:
        lines.append(f"  evidence findings: {', '.join(f.id for f in c.findings[:8])}")
        srcs = sorted({e.source for f in c.findings for e in f.evidence if e.source})
        if srcs:
            lines.append(f"  sources: {clean_data('; '.join(srcs[:4]), 300)}")
    return lines


def render_diagnosis(
    d: Diagnosis, *, rank: int | None = None, language: str = "en", call: str = "diagnose()"
) -> str:
    """Model-readable text of a :class:`Diagnosis` (causes, culprits, victims, gains, sources).

    Times are ms per step; shares are of the rank's step. ``rank`` adds that rank's role in
    each cause (:meth:`Diagnosis.role_of`); ``call`` is the call shown (``diagnose(rank=12)``).
    """
    zh = language == "zh"
    head = [
        f"{call}: {len(d.ranks)} ranks ({_ranks(d.ranks)}), steps {_ranks(d.steps)}; "
        f"median step {_ms(d.step_time_us)}; shares "
        + ", ".join(f"{k} {v:.1%}" for k, v in d.shares.items())
    ]
    body = [f"headline: {clean_data(d.headline_zh if zh else d.headline, 600)}"]
    if d.excluded_steps:
        body.append(
            "excluded steps (data artifact): " + ", ".join(str(s) for s in d.excluded_steps)
        )
    if not d.causes:
        body.append("causes: none (nothing stands out)")
    for i, c in enumerate(d.causes, 1):
        body += _cause_lines(i, c, zh)
    if rank is not None:
        roles = d.role_of(rank)
        if not roles:
            body.append(f"rank {rank}: not touched by any cause")
        for c, role, imp in roles:
            i = d.causes.index(c) + 1
            amount = f", {_ms(imp.lost_us)}/step ({imp.share:.1%}, {imp.how})" if imp else ""
            body.append(f"rank {rank}: {role} of cause {i} ({c.mechanism.value}){amount}")
    if d.other_findings:
        body.append("other findings: " + ", ".join(f.id for f in d.other_findings[:10]))
    for n in d.notes_zh if zh else d.notes:
        body.append(f"note: {clean_data(n, 300)}")
    return "\n".join(head) + "\n" + fence("\n".join(body), call)
