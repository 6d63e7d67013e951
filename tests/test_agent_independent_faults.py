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


@pytest.fixture(scope="module")
def two_faults():
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
    p = make_profile(
        {"step_trace": rows(n, steps, delta=delta), "comm_matrix": mx, "comm_groups": [group]}
    )
    return diagnose(p)


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
