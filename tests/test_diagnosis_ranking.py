"""Causes ranked by what they cost: a job-level cost leads only when it dwarfs every late rank's.

Causes are built by hand with known gains; the engine's ranking (``engine._rank``) is what is
tested. The numbers are those of a generated 8-rank ``comm-bound-no-overlap`` (79 ms of exposed
communication on every rank beside a 41 µs compute straggler) and of ``flapping-rdma-link``
(a 7.5 ms slow link beside 29 ms of hideable communication).
"""

from __future__ import annotations

import dataclasses

from advisor_chat.analyzers.base import Category
from advisor_chat.diagnosis.engine import JOB_DWARFS, JOB_FIRST, _rank
from advisor_chat.diagnosis.types import Culprit, Mechanism, RootCause


def _cause(cid: str, mech: Mechanism, kind: str, gain_us: float) -> RootCause:
    return RootCause(
        id=cid,
        mechanism=mech,
        category=Category.COMMUNICATION,
        culprit=Culprit(kind=kind, ranks=(0,) if kind == "rank" else ()),
        victims=(),
        summary=cid,
        summary_zh=cid,
        metrics={"excess_us": gain_us, "job_cost_us": gain_us},
        findings=(),
        gain_us=gain_us,
    )


def test_a_negligible_straggler_does_not_lead_a_job_wide_cost() -> None:
    small = _cause("cause.compute_straggler.r0", Mechanism.COMPUTE_STRAGGLER, "rank", 41.0)
    job = _cause("cause.exposed_communication", Mechanism.EXPOSED_COMMUNICATION, "job", 78_900.0)
    assert JOB_DWARFS * 41.0 <= 78_900.0
    assert [c.id for c in _rank([small, job])] == [job.id, small.id]


def test_a_fault_the_job_cost_does_not_dwarf_keeps_the_lead() -> None:
    link = _cause("cause.slow_link.4_12_rdma", Mechanism.SLOW_LINK, "link", 7_500.0)
    job = _cause("cause.exposed_communication", Mechanism.EXPOSED_COMMUNICATION, "job", 29_100.0)
    assert JOB_DWARFS * 7_500.0 > 29_100.0
    assert [c.id for c in _rank([job, link])] == [link.id, job.id]


def test_a_shared_idle_leads_at_a_lower_ratio() -> None:
    late = _cause("cause.host_stall.r1", Mechanism.HOST_STALL, "rank", 10_000.0)
    idle = _cause("cause.job_idle", Mechanism.JOB_IDLE, "job", 35_000.0)
    assert JOB_FIRST * 10_000.0 <= 35_000.0 < JOB_DWARFS * 10_000.0
    assert [c.id for c in _rank([late, idle])] == [idle.id, late.id]


def test_small_blame_spread_over_ranks_is_jitter_not_a_straggler() -> None:
    """Arrival blame of 3.4, 2.1 and 1.6 ms per step on a 146 ms step (a comm-bound 8-rank job
    whose transfer times vary by a few %): no rank is a straggler. One rank blamed for 3.4 ms
    with the next at 0.2 ms is a steady straggler; above 5% of the step blame is never jitter."""
    from types import SimpleNamespace

    from advisor_chat.diagnosis.rules.attributed import _jitter

    def cc(cost: float) -> SimpleNamespace:
        return SimpleNamespace(unit=SimpleNamespace(kind="rank"), cost_us_per_step=cost)

    step = 146_000.0
    spread = [3381.0, 2090.0, 1609.0]
    assert _jitter(cc(3381.0), spread, step)
    assert not _jitter(cc(3381.0), [3381.0, 200.0], step)
    assert not _jitter(cc(8000.0), [8000.0, 7000.0], step)  # ≥ 5% of the step: judged as a rank


def test_a_cause_that_gives_nothing_back_does_not_lead() -> None:
    """A late unit whose own excess is negative (it saves nothing) ranks after a job-wide cost."""
    none = _cause("cause.slow_node.r8_11", Mechanism.SLOW_GROUP, "group", -9.4)
    job = _cause("cause.exposed_communication", Mechanism.EXPOSED_COMMUNICATION, "job", 238_000.0)
    assert [c.id for c in _rank([none, job])] == [job.id, none.id]


def test_a_node_late_by_its_own_transfers_is_said_so_and_ranked_by_cost(scenario) -> None:
    """zero3-param-gather on 12 ranks (nodes of 8 and 4): the 4-rank node's ranks move more of the
    AllGather / ReduceScatter over RDMA, so their transit per step is longer (read from
    communication.json with json, independently) and the collectives wait for them, over links as
    fast as everyone's. That node is late by placement (nodes of different sizes), not a slower
    node, never one "idling 6 µs more"; the job's exposed communication, far larger, leads."""
    import json
    from collections import defaultdict

    from advisor_chat.diagnosis import diagnose
    from advisor_chat.ingest import load_profile

    root = scenario("zero3-param-gather", ranks=12, seed=21)
    transit: dict[int, float] = defaultdict(float)
    for d in root.glob("*_ascend_pt"):
        rank = json.loads(next(d.glob("profiler_info_*.json")).read_text())["rank_id"]
        comm = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
        for step in comm.values():
            for kind in step.values():
                for name, op in kind.items():
                    if not name.startswith("Total"):
                        transit[int(rank)] += op["Communication Time Info"]["Transit Time(ms)"]
    assert min(transit[r] for r in range(8, 12)) > max(transit[r] for r in range(8))
    d = diagnose(load_profile(root, progress=False))
    assert d.causes[0].mechanism is Mechanism.EXPOSED_COMMUNICATION
    node = next(c for c in d.causes if c.culprit.ranks == (8, 9, 10, 11))
    assert (node.gain_us or 0.0) > 0 and "late by placement, not by a fault" in node.summary
    assert "8 and 4 ranks" in node.summary and "nodes of one size" in node.remedies[0].text


def test_independent_late_ranks_are_ranked_by_what_fixing_each_first_gives() -> None:
    """Two late ranks in one 4-rank collective per step: rank 3 arrives 8 ms before the others'
    latest in every step, rank 2 (the second latest) 5 ms behind its own peers. Fixing rank 3
    first gives its lead over rank 2 (8 ms); fixing rank 2 first gives nothing while rank 3 is
    later, except in the steps where rank 3 is on time. The greedy partition costs the second
    culprit what is left after the first is re-timed, so it can exceed the first's; the ranking
    key is the fix-first gain, computed here by hand."""
    import numpy as np
    import pandas as pd

    from advisor_chat.diagnosis.attribution import WaitAttribution

    rs = np.array([0, 1, 2, 3])
    # waits (µs): the latest arriver waits least. Steps 1-2: rank 3 last (0), rank 2 next (8000),
    # the others 13000. Step 3: rank 3 on time; rank 2 last by 5000.
    steps = [
        np.array([13_000.0, 13_000.0, 8_000.0, 0.0]),
        np.array([13_000.0, 13_000.0, 8_000.0, 0.0]),
        np.array([5_000.0, 5_000.0, 0.0, 5_000.0]),
    ]
    attr = WaitAttribution(
        instances=pd.DataFrame(),
        culprits=(),
        events=(),
        steps_count=3,
        total_wait_us_per_step=0.0,
        units=(),
        waits=tuple((rs, w) for w in steps),
    )
    assert attr.fix_alone_us({3}) == (8_000.0 + 8_000.0) / 3
    assert attr.fix_alone_us({2}) == 5_000.0 / 3
    assert attr.fix_alone_us({2, 3}) == (13_000.0 + 13_000.0 + 5_000.0) / 3
    assert attr.fix_alone_us({7}) == 0.0
    first = _cause("cause.host_stall.r3", Mechanism.HOST_STALL, "rank", 9_000.0)
    second = _cause("cause.host_stall.r2", Mechanism.HOST_STALL, "rank", 9_000.0)
    first = dataclasses.replace(
        first, metrics={"job_cost_us": 5_000.0, "job_gain_first_us": attr.fix_alone_us({3})}
    )
    second = dataclasses.replace(
        second, metrics={"job_cost_us": 9_000.0, "job_gain_first_us": attr.fix_alone_us({2})}
    )
    assert [c.id for c in _rank([second, first])] == [first.id, second.id]
