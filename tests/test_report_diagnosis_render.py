"""The report leads with the diagnosis; profile strings are escaped in Markdown and HTML."""

from __future__ import annotations

import json

from _analyzers_a_helpers import make_profile
from test_diagnosis_rules import MS, kernels, rows

from advisor_chat.reporting import render_html, render_markdown, run_report, to_json

EVIL_OP = "MatMul<img src=x onerror=alert(1)>[link](http://evil.example)"


def _straggler_with_hostile_op():
    delta = {(2, None): {"computing": 20 * MS}}
    delta.update({(r, None): {"comm": 20 * MS} for r in range(6) if r != 2})
    ks = kernels(6, 3, {2: 3.0})
    for k in ks:
        if k["op_type"] == "MatMulV2":
            k["op_type"] = EVIL_OP
    return make_profile({"step_trace": rows(6, 3, delta=delta), "kernels": ks})


def test_markdown_leads_with_the_cause_and_groups_its_symptoms() -> None:
    rep = run_report(_straggler_with_hostile_op(), strict=True)
    d = rep.diagnosis
    assert d is not None and d.top() is not None
    top = d.top()
    assert top.culprit.ranks == (2,) and top.culprit.operator == EVIL_OP  # raw in the object
    md = render_markdown(rep)
    i_diag, i_cause = md.index("## Diagnosis"), md.index("### Cause 1. Compute straggler: rank 2")
    i_other = md.index("## Other findings")
    assert i_diag < i_cause < i_other
    section = md[i_cause:i_other]
    for part in (
        "**Victims**",
        "**What to change:**",
        "*action*",
        "*check*",
        "**Expected gain:** 20.0 ms per step (estimate)",
    ):
        assert part in section
    # the symptom findings are shown under the cause, not again among the other findings
    for f in top.findings:
        assert f"`{f.id}`" in section
        assert f"`{f.id}`" not in md[i_other:]
    # hostile operator name: never a live image, link or HTML tag
    assert "<img" not in md and "](http://evil.example)" not in md
    assert "&lt;img" in md


def test_html_escapes_profile_strings_and_json_has_the_diagnosis() -> None:
    rep = run_report(_straggler_with_hostile_op(), strict=True)
    page = render_html(rep)
    assert "<img" not in page and "&lt;img" in page
    assert page.index("<h2>Diagnosis</h2>") < page.index("<h2>Other findings")
    data = to_json(rep)
    json.dumps(data)
    cause = data["diagnosis"]["causes"][0]
    assert cause["culprit"]["ranks"] == [2] and cause["mechanism"] == "compute_straggler"
    assert set(cause["findings"]) <= {f["id"] for f in data["findings"]}
    assert cause["victims"][0]["how"] == "collective_wait"


def test_cause_gain_states_its_actions_saving_next_to_its_cost() -> None:
    """A cause whose actions save less than it costs states the actions' figure, with the cost."""
    import dataclasses

    from test_agent_project import PIPE

    from advisor_chat.diagnosis import BoundKind, Remedy
    from advisor_chat.reporting import _cause_gain_text

    # the action saves the whole cost: one figure
    assert _cause_gain_text(PIPE, "en") == "90.0 ms per step (upper bound)"
    part = dataclasses.replace(
        PIPE,
        remedies=(
            Remedy("action", "a", "a", gain_us=60_000.0, bound=BoundKind.UPPER_BOUND),
            Remedy("action", "b", "b", gain_us=40_000.0, bound=BoundKind.ESTIMATE),
        ),
    )
    en = _cause_gain_text(part, "en")
    assert en.startswith("60.0 ms per step (upper bound)") and "90.0 ms per step it costs" in en
    assert "90.0 ms" in _cause_gain_text(part, "zh") and "60.0 ms" in _cause_gain_text(part, "zh")
    # no action with a gain: the cause's own figure
    checks = dataclasses.replace(PIPE, remedies=(Remedy("check", "c", "c"),))
    assert _cause_gain_text(checks, "en") == "90.0 ms per step (upper bound)"


def test_a_job_cause_heading_names_the_job_once() -> None:
    """A job-level mechanism's title already says "(job)": no ": the whole job" after it."""
    from advisor_chat.analyzers.base import Category
    from advisor_chat.diagnosis.types import Culprit, Mechanism, RootCause
    from advisor_chat.reporting import _cause_heading

    job = Culprit(kind="job", label="the whole job", label_zh="整个作业")
    c = RootCause(
        id="cause.exposed_communication.job",
        mechanism=Mechanism.EXPOSED_COMMUNICATION,
        category=Category.COMMUNICATION,
        culprit=job,
        summary="Exposed communication costs every rank 10 ms per step",
        summary_zh="每张卡每步有 10 ms 通信未被掩盖",
        victims=(),
        metrics={},
        findings=(),
    )
    assert _cause_heading(c, "en") == "Exposed communication (job)"
    assert _cause_heading(c, "zh") == "通信未被掩盖（整个作业）"
    rank = RootCause(
        id="cause.host_stall.r3",
        mechanism=Mechanism.HOST_STALL,
        category=Category.SCHEDULING,
        culprit=Culprit(kind="rank", ranks=(3,), label="rank 3", label_zh="3号卡"),
        summary="Rank 3 stalls",
        summary_zh="3号卡阻塞",
        victims=(),
        metrics={},
        findings=(),
    )
    assert _cause_heading(rank, "en").endswith(": rank 3")
