"""Send/receive pairs in the wait attribution (``attribution.p2p_waits``), on constructed rows.

A 2-stage pipeline of 4 ranks: stage 0 = ranks 0-1, stage 1 = ranks 2-3; groups {0, 2} and
{1, 3} carry the transfers. Stage 1 is late to receive: each send on stage 0 waits ``LATE_MS``
while its receive waits ``0.1`` ms, so, by construction, stage 1 arrived last by ``LATE_MS - 0.1``
ms in each of ``N_MB`` transfers per step, and those transfers run at the same time across the
two groups (one instance each, not two).
"""

from __future__ import annotations

import pytest
from _analyzers_a_helpers import make_profile

from advisor_chat.diagnosis.attribution import attribute, instance_waits, p2p_waits

LATE_MS = 3.0
N_MB = 4
STEPS = (1, 2)


def _rows(captured=(0, 1, 2, 3)) -> list[dict]:
    rows = []
    for step in STEPS:
        for k in range(N_MB):
            t0 = 1e15 + step * 1e6 + k * 1e4
            for sender, receiver in ((0, 2), (1, 3)):
                grp = f"g{sender}{receiver}"
                for rank, op, wait in ((sender, "send", LATE_MS), (receiver, "receive", 0.1)):
                    if rank not in captured:
                        continue
                    rows.append(
                        {
                            "rank": rank,
                            "group": grp,
                            "step": step,
                            "op_name": f"hcom_{op}__{grp}_{step}_{k}",
                            "op_type": op,
                            "comm_kind": "p2p",
                            "start_us": t0 + (0 if op == "send" else 50),
                            "elapse_ms": wait + 1.0,
                            "transit_ms": 1.0,
                            "wait_ms": wait,
                            "synchronization_ms": 0.0,
                            "idle_ms": 0.0,
                            "wait_ratio": 0.5,
                            "synchronization_ratio": 0.0,
                        }
                    )
    return rows


def test_pairs_running_together_are_one_instance_and_the_receiver_is_late() -> None:
    prof = make_profile({"comm_ops": _rows()})
    stages = [(0, 1), (2, 3)]
    w = p2p_waits(prof.get("comm_ops"), stages)
    # one instance per (step, micro-batch): both groups' pairs together, 4 ranks each
    assert w.groupby(["group", "op_name", "step"]).ngroups == len(STEPS) * N_MB
    assert set(w.groupby(["group", "op_name", "step"])["rank"].nunique()) == {4}
    assert set(w["group"]) == {"p2p 0-1"} and set(instance_waits(prof, stages)["group"]) == {
        "p2p 0-1"
    }
    att = attribute(prof, stages, step_us=100_000.0)
    assert att is not None and att.culprits
    top = att.culprits[0]
    assert top.unit.ranks == (2, 3)
    # per step: N_MB transfers, each late by LATE_MS - 0.1 ms (µs)
    assert top.cost_us_per_step == pytest.approx(N_MB * (LATE_MS - 0.1) * 1000.0)
    assert set(top.victims) == {0, 1}


def test_a_pair_with_one_side_missing_is_not_an_instance() -> None:
    # only the senders captured (the real 16-rank PP2 sample has comm detail for 2 ranks)
    prof = make_profile({"comm_ops": _rows(captured=(0, 1))})
    assert p2p_waits(prof.get("comm_ops"), [(0, 1), (2, 3)]).empty
