"""Two independent faults in one profile: every projection keeps both, ranked by what they cost.

The profile is built from tables (``_analyzers_a_helpers.make_profile``): a degraded RDMA link
3->4 (20 ms of transit excess per step, as in ``test_diagnosis_rules``) and, independently, rank 6
whose host stalls 9 ms per step (its Free is 9 ms longer; the others wait for it). Asked "is it
the network?" or "what should I fix first?", the answer names both.
"""

from __future__ import annotations

import pytest
from _analyzers_a_helpers import make_profile
from test_diagnosis_rules import MS, rows

from advisor_chat.agent import project
from advisor_chat.diagnosis import Mechanism, diagnose


def _two_fault_profile():
    n, steps = 8, 3
    mx = []
    for s in range(1, steps + 1):
        for r in range(n):
            gbps = 4.0 if r == 3 else 20.0
            mx.append(
                {
                    "group": "g",
                    "step": s,
                    "op_name": f"hcom_allReduce_{s}",
                    "src_rank": r,
                    "dst_rank": (r + 1) % n,
                    "transport": "RDMA",
                    "transit_size_mb": 100.0,
                    "transit_time_ms": 100.0 / gbps,
                    "bandwidth_gbps": gbps,
                }
            )
    delta: dict = {}
    for r in range(n):
        if r != 6:
            delta[(r, None)] = {"comm": 20 * MS + 9 * MS}
    delta[(6, None)] = {"free": 9 * MS, "comm": 20 * MS}
    group = {
        "group": "g",
        "group_name": "dp",
        "comm_kind": "collective",
        "ranks": list(range(n)),
        "size": n,
    }
    return make_profile(
        {"step_trace": rows(n, steps, delta=delta), "comm_matrix": mx, "comm_groups": [group]}
    )


@pytest.fixture(scope="module")
def two_faults():
    return diagnose(_two_fault_profile())


def test_both_faults_are_causes_ranked_by_cost(two_faults) -> None:
    mechs = [c.mechanism for c in two_faults.causes[:2]]
    assert mechs == [Mechanism.SLOW_LINK, Mechanism.HOST_STALL]
    assert two_faults.causes[1].culprit.ranks == (6,)


@pytest.mark.parametrize("zh", [False, True])
def test_is_it_the_network_keeps_the_other_fault(two_faults, zh: bool) -> None:
    p = project.network(two_faults, [], zh, yes_no=True)
    text = " ".join(p.lines)
    assert text.startswith("是的" if zh else "Yes")
    assert ("6号卡" if zh else "rank 6") in text
    assert {c.id for c in p.causes} >= {c.id for c in two_faults.causes[:2]}


@pytest.mark.parametrize("zh", [False, True])
def test_fix_first_then_names_the_independent_fault(two_faults, zh: bool) -> None:
    p = project.fix_first(two_faults, zh)
    text = " ".join(p.lines)
    first, second = two_faults.causes[0], two_faults.causes[1]
    assert text.index(first.culprit.label_zh if zh else "3→4") < text.index(
        second.culprit.label_zh if zh else "rank 6"
    )
    assert ("无关" if zh else "independent") in text


@pytest.mark.parametrize("zh", [False, True])
def test_whole_story_names_the_other_fault(two_faults, zh: bool) -> None:
    """ "Swap rank 6 and we're done?": no, the link is a second cause; the sum of both gains."""
    p = project.sufficiency(two_faults, zh, ranks=[6])
    assert p is not None
    text = " ".join(p.lines)
    assert text.startswith("不是全部原因" if zh else "No, that is not the whole story")
    link, host = two_faults.causes[0], two_faults.causes[1]
    assert (link.culprit.label_zh if zh else "3→4") in text.split("。" if zh else ". ")[0]
    assert project.us(link.gain_us or 0.0) in p.lines[0]
    assert project.us(host.gain_us or 0.0) in p.lines[0]
    # the link alone is not all of it either; a cause nobody has is no cause to judge
    p_link = project.sufficiency(two_faults, zh, links=[(3, 4)])
    assert p_link is not None and ("6号卡" if zh else "rank 6") in p_link.lines[0]
    assert project.sufficiency(two_faults, zh, ranks=[1]) is None


def test_whole_story_yes_when_one_cause(two_faults) -> None:
    import dataclasses

    only = dataclasses.replace(two_faults, causes=[two_faults.causes[0]])
    p = project.sufficiency(only, False, links=[(3, 4)])
    assert p is not None and p.lines[0].startswith("Yes: link")


@pytest.mark.parametrize("zh", [False, True])
def test_fix_together_sums_the_first_two_causes(two_faults, zh: bool) -> None:
    p = project.fix_together(two_faults, zh, count=2)
    assert p is not None
    a, b = two_faults.causes[0], two_faults.causes[1]
    total = (a.gain_us or 0.0) + (b.gain_us or 0.0)
    assert project.us(total) in p.lines[0]
    step = two_faults.step_time_us or 0.0
    assert project.us(step - total) in p.lines[0]


@pytest.mark.parametrize(
    "question",
    [
        "if we swap rank 6, are we done?",
        "把6号卡换掉就好了吧？",
    ],
)
def test_whole_story_questions_route(question: str) -> None:
    from advisor_chat.agent.planner import _WHOLE_STORY

    assert _WHOLE_STORY.search(question)


def test_fix_first_then_names_the_report_s_first_fault_when_it_is_not_first() -> None:
    """A rank's fix gains more than the link the report lists first: the rank leads, and the link
    (an independent fault with its own gain) is what to fix next, not left out."""
    import dataclasses

    d0 = diagnose(_two_fault_profile())
    link, host = d0.causes[0], d0.causes[1]
    bigger = dataclasses.replace(
        host,
        gain_us=30_000.0,
        remedies=tuple(
            dataclasses.replace(r, gain_us=30_000.0) if r.kind == "action" else r
            for r in host.remedies
        ),
    )
    d = dataclasses.replace(d0, causes=(link, bigger, *d0.causes[2:]))
    text = " ".join(project.fix_first(d, False).lines)
    assert text.startswith("Fix rank 6 first")
    assert "of the faults found" in text
    assert "Then fix link 3→4 (RDMA), an independent fault" in text


@pytest.mark.parametrize("zh", [False, True])
def test_the_top_problem_is_the_one_named_when_the_question_names_none(two_faults, zh) -> None:
    """ "Is that the whole story if we fix the top problem?": the report's first cause is judged."""
    from advisor_chat.agent.planner import _TOP_PROBLEM, _WHOLE_STORY

    q = "修好最大的问题就够了吗？" if zh else "is that the whole story if we fix the top problem?"
    assert _WHOLE_STORY.search(q) and _TOP_PROBLEM.search(q)
    assert project.sufficiency(two_faults, zh) is None  # nothing named, not asked for the top
    p = project.sufficiency(two_faults, zh, top=True)
    assert p is not None and p.causes[0].id == two_faults.causes[0].id
    assert p.lines[0].startswith("不是全部原因" if zh else "No, that is not the whole story")


def test_both_means_the_two_faults_not_a_job_wide_bound(two_faults) -> None:
    import dataclasses

    from advisor_chat.diagnosis import BoundKind, Culprit, RootCause

    bound = RootCause(
        id="cause.exposed_communication",
        mechanism=Mechanism.EXPOSED_COMMUNICATION,
        category=two_faults.causes[0].category,
        culprit=Culprit(kind="job", label="the whole job", label_zh="整个作业"),
        victims=(),
        summary="Communication is exposed on every rank",
        summary_zh="通信在所有卡上都没有被掩盖",
        metrics={},
        findings=(),
        gain_us=50_000.0,
        bound=BoundKind.UPPER_BOUND,
    )
    d = dataclasses.replace(two_faults, causes=(bound, *two_faults.causes))
    p = project.fix_together(d, False, count=2)
    assert p is not None and [c.id for c in p.causes] == [c.id for c in two_faults.causes[:2]]
