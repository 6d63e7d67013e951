"""One test per blame rule, on constructed tables whose culprit, victims and lost time are known.

Each profile is built in memory (``tests/_analyzers_a_helpers.make_profile``); the expected
numbers follow from the construction (e.g. a rank with +30 ms Free whose peers wait 30 ms longer
in collectives), never from running the engine first.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from _analyzers_a_helpers import make_profile

from advisor_chat.diagnosis import BoundKind, Diagnosis, Mechanism, diagnose

MS = 1000.0


def rows(
    n_ranks: int,
    n_steps: int,
    *,
    computing: float = 100 * MS,
    comm: float = 5 * MS,
    free: float = 5 * MS,
    bubble: float = 0.0,
    overlapped: float = 2 * MS,
    delta: dict[tuple[int | None, int | None], dict[str, float]] | None = None,
    first_step: int = 1,
) -> list[dict[str, Any]]:
    """step_trace rows; ``delta[(rank|None, step|None)]`` adds µs to computing/comm/free/bubble.

    ``comm`` is the exposed communication (Communication Not Overlapped and Exclude Receive);
    Communication (Not Overlapped) = comm + bubble, step = computing + that + free.
    """
    out = []
    for r in range(n_ranks):
        for s in range(first_step, first_step + n_steps):
            v = {"computing": computing, "comm": comm, "free": free, "bubble": bubble}
            for (dr, ds), d in (delta or {}).items():
                if (dr is None or dr == r) and (ds is None or ds == s):
                    for k, x in d.items():
                        v[k] += x
            not_ov = v["comm"] + v["bubble"]
            step = v["computing"] + not_ov + v["free"]
            out.append(
                {
                    "rank": r,
                    "step": s,
                    "computing_us": v["computing"],
                    "communication_not_overlapped_us": not_ov,
                    "communication_not_overlapped_exclude_receive_us": v["comm"],
                    "overlapped_us": overlapped,
                    "communication_us": not_ov + overlapped,
                    "free_us": v["free"],
                    "stage_us": step - v["bubble"],
                    "bubble_us": v["bubble"],
                    "step_us": step,
                }
            )
    return out


def kernels(
    n_ranks: int,
    n_steps: int,
    slow: dict[int, float] | None = None,
    *,
    calls: int = 10,
    first_step: int = 1,
    drop: dict[tuple[int, int], int] | None = None,
) -> list[dict[str, Any]]:
    """kernel rows: per (rank, step) ``calls`` MatMulV2 [4096,4096;8192,4096] of 1 ms (times
    ``slow[rank]`` on slow ranks) and ``calls`` Add of 0.2 ms; ``drop[(rank, step)]`` removes
    that many MatMulV2 calls (lost device records)."""
    out = []
    for r in range(n_ranks):
        for s in range(first_step, first_step + n_steps):
            t = 0.0
            n_mm = calls - (drop or {}).get((r, s), 0)
            for _i in range(n_mm):
                d = 1000.0 * (slow or {}).get(r, 1.0)
                out.append(_k(r, s, "MatMulV2", "4096,4096;8192,4096", t, d))
                t += d + 10
            for _i in range(calls):
                out.append(_k(r, s, "Add", "4096,8192;4096,8192", t, 200.0))
                t += 210
    return out


def _k(rank: int, step: int, op: str, shape: str, start: float, dur: float) -> dict[str, Any]:
    return {
        "rank": rank,
        "step": step,
        "name": f"aclnn{op}_{op}",
        "op_type": op,
        "accelerator_core": "AI_CORE",
        "start_us": step * 1e6 + start,
        "duration_us": dur,
        "wait_us": 0.0,
        "input_shapes": shape,
    }


def top(d: Diagnosis) -> Any:
    c = d.top()
    assert c is not None, d.headline
    return c


# ------------------------------------------------------------------------------ collective rule
def test_host_stall_late_arriver_is_the_culprit_and_the_waiting_ranks_are_victims() -> None:
    # rank 5 idles 30 ms more per step; it arrives last, so every other rank waits 30 ms longer
    # in the collectives (exposed communication 5 -> 35 ms) while rank 5 waits the least (5 ms)
    delta = {(5, None): {"free": 30 * MS}}
    delta.update({(r, None): {"comm": 30 * MS} for r in range(8) if r != 5})
    d = diagnose(make_profile({"step_trace": rows(8, 4, delta=delta)}))
    c = top(d)
    assert c.mechanism is Mechanism.HOST_STALL and c.category.value == "scheduling"
    assert c.culprit.kind == "rank" and c.culprit.ranks == (5,)
    assert {v.rank for v in c.victims} == {0, 1, 2, 3, 4, 6, 7}
    for v in c.victims:
        assert v.how == "collective_wait"
        assert v.lost_us == pytest.approx(30 * MS)
        assert v.share == pytest.approx(30 / 140)  # step = 100 + 35 + 5 ms
    assert c.gain_us == pytest.approx(30 * MS) and c.bound is BoundKind.ESTIMATE
    assert [r.kind for r in c.remedies] == sorted(r.kind for r in c.remedies)  # actions first
    assert c.remedies[0].kind == "action" and c.remedies[-1].gain_us is None
    # roles: the waiting rank is a victim, never the culprit; rank 5 is the culprit
    role3 = d.role_of(3)
    assert next((x[1], round(x[2].lost_us)) for x in role3 if x[2] is not None) == ("victim", 30000)
    assert all(role != "culprit" for _, role, _ in role3)
    assert d.role_of(5)[0][1] == "culprit"
    assert d.headline == c.summary and "rank 5" in d.headline


def test_several_late_ranks_share_the_wait_without_double_counting() -> None:
    # rank 0 +40 ms Free (arrives last), rank 1 +20 ms Free; exposed comm: rank 0 5, rank 1 25,
    # the others 45 ms. Rank 0 is blamed for 20 ms of everyone's wait (until rank 1 arrives),
    # rank 1 for the next 20 ms; rank 1 is itself a victim of rank 0.
    delta = {(0, None): {"free": 40 * MS}, (1, None): {"free": 20 * MS, "comm": 20 * MS}}
    delta.update({(r, None): {"comm": 40 * MS} for r in range(2, 6)})
    d = diagnose(make_profile({"step_trace": rows(6, 3, delta=delta)}))
    rank_causes = [c for c in d.causes if c.culprit.kind == "rank"]
    assert [c.culprit.ranks for c in rank_causes] == [(0,), (1,)]  # the last arriver first
    c0, c1 = rank_causes
    lost0 = {v.rank: v.lost_us for v in c0.victims}
    lost1 = {v.rank: v.lost_us for v in c1.victims}
    assert lost0 == pytest.approx({1: 20 * MS, 2: 20 * MS, 3: 20 * MS, 4: 20 * MS, 5: 20 * MS})
    assert lost1 == pytest.approx({2: 20 * MS, 3: 20 * MS, 4: 20 * MS, 5: 20 * MS})
    # rank 3's blamed wait adds up to its whole wait (45 - 5 ms), no more
    assert lost0[3] + lost1[3] == pytest.approx(40 * MS)
    assert c0.gain_us == pytest.approx(20 * MS)  # fixing rank 0 alone: then rank 1 is last
    roles1 = {role for _, role, _ in d.role_of(1)}
    assert roles1 == {"culprit", "victim"}


def test_compute_straggler_names_the_operator_and_shape() -> None:
    # rank 2's MatMulV2 calls take 3 ms instead of 1 ms: +20 ms Computing per step; peers wait
    delta = {(2, None): {"computing": 20 * MS}}
    delta.update({(r, None): {"comm": 20 * MS} for r in range(6) if r != 2})
    p = make_profile({"step_trace": rows(6, 3, delta=delta), "kernels": kernels(6, 3, {2: 3.0})})
    c = top(diagnose(p))
    assert c.mechanism is Mechanism.COMPUTE_STRAGGLER and c.culprit.ranks == (2,)
    assert c.culprit.operator == "MatMulV2" and c.culprit.shape == "4096,4096;8192,4096"
    assert c.metrics["computing_excess_us"] == pytest.approx(20 * MS)
    assert all(v.lost_us == pytest.approx(20 * MS) for v in c.victims)
    assert "MatMulV2" in c.summary and "MatMulV2" in c.summary_zh


# --------------------------------------------------------------------------------- group rule
def test_slower_group_is_one_cause_with_the_operator_that_differs() -> None:
    # ranks 0-3 (one node) run MatMulV2 1.5x slower: +5 ms Computing; ranks 4-7 wait 5 ms
    delta = {(r, None): {"computing": 5 * MS} for r in range(4)}
    delta.update({(r, None): {"comm": 5 * MS} for r in range(4, 8)})
    slow = dict.fromkeys(range(4), 1.5)
    p = make_profile({"step_trace": rows(8, 3, delta=delta), "kernels": kernels(8, 3, slow)})
    d = diagnose(p)
    c = top(d)
    assert c.mechanism is Mechanism.SLOW_GROUP and c.culprit.kind == "group"
    assert c.culprit.ranks == (0, 1, 2, 3)
    assert c.culprit.operator == "MatMulV2" and c.culprit.shape == "4096,4096;8192,4096"
    assert c.metrics["op_avg_ratio"] == pytest.approx(1.5)
    assert {v.rank for v in c.victims} == {4, 5, 6, 7}
    assert all(v.lost_us == pytest.approx(5 * MS) for v in c.victims)
    assert not any(x.culprit.kind == "rank" for x in d.causes)  # not four "slow ranks"


# ------------------------------------------------------------------------------ pipeline rule
def _pipeline_rows() -> list[dict[str, Any]]:
    # stage 0 (ranks 0-3): 55 ms exposed communication; stage 1 (ranks 4-7): 44-47 ms Bubble
    delta: dict[tuple[int | None, int | None], dict[str, float]] = {
        (r, None): {"comm": 50 * MS} for r in range(4)
    }
    delta.update({(r, None): {"bubble": 40 * MS + r * MS} for r in range(4, 8)})
    return rows(8, 2, computing=50 * MS, delta=delta)


@pytest.mark.parametrize("stage_source", ["stage_trace", "pp_groups"])
def test_pipeline_bubble_is_blamed_on_the_upstream_stage(stage_source: str) -> None:
    tables: dict[str, Any] = {"step_trace": _pipeline_rows()}
    if stage_source == "stage_trace":
        zeros = dict.fromkeys(
            [
                "computing_us",
                "communication_not_overlapped_us",
                "overlapped_us",
                "communication_us",
                "free_us",
                "stage_us",
                "bubble_us",
            ],
            0.0,
        )
        tables["stage_trace"] = [
            {"stage_ranks": "(0, 1, 2, 3)", "stage_index": 0, "step": 1, **zeros},
            {"stage_ranks": "(4, 5, 6, 7)", "stage_index": 1, "step": 1, **zeros},
        ]
    else:  # per-rank exports: stages from the tp groups, linked by pp send/receive pairs
        tables["comm_groups"] = [
            {
                "group": "g0",
                "group_name": "tp",
                "comm_kind": "collective",
                "ranks": [0, 1, 2, 3],
                "size": 4,
            },
            {
                "group": "g1",
                "group_name": "tp",
                "comm_kind": "collective",
                "ranks": [4, 5, 6, 7],
                "size": 4,
            },
        ] + [
            {
                "group": f"p{r}",
                "group_name": "pp",
                "comm_kind": "p2p",
                "ranks": [r, r + 4],
                "size": 2,
            }
            for r in range(4)
        ]
    d = diagnose(make_profile(tables))
    c = top(d)
    assert c.mechanism is Mechanism.PIPELINE_IMBALANCE and c.category.value == "communication"
    assert c.culprit.kind == "stage" and c.culprit.stage == 0 and c.culprit.ranks == (0, 1, 2, 3)
    assert c.dominant.startswith("communication-bound")
    # stage 0's exposed communication: 55 ms of a 50 + 55 + 5 = 110 ms step
    assert c.metrics["culprit_dominant_share"] == pytest.approx(55 / 110)
    lost = {v.rank: v.lost_us for v in c.victims}
    assert lost == pytest.approx({r: 40 * MS + r * MS for r in range(4, 8)})
    assert all(v.how == "bubble" for v in c.victims)
    assert c.metrics["bubble_us_mean"] == pytest.approx(45.5 * MS)  # 40 + mean(4..7) ms
    role = d.role_of(6)
    assert role[0][1] == "victim" and role[0][2] is not None and role[0][2].how == "bubble"


# ----------------------------------------------------------------------------- slow-link rule
def test_slow_link_is_the_culprit_and_its_endpoints_are_on_the_link() -> None:
    # a ring 0->1->...->7->0 over RDMA, 100 MB per link per step; link 3->4 at 4 GB/s, the others
    # 20 GB/s: 25 ms instead of 5 ms, 20 ms of transit excess per step, which every rank waits
    n, steps = 8, 3
    mx = []
    for s in range(1, steps + 1):
        for r in range(n):
            dst = (r + 1) % n
            gbps = 4.0 if r == 3 else 20.0
            t_ms = 100.0 / gbps  # MB / (GB/s) = ms
            mx.append(
                {
                    "group": "g",
                    "step": s,
                    "op_name": f"hcom_allReduce_{s}",
                    "src_rank": r,
                    "dst_rank": dst,
                    "transport": "RDMA",
                    "transit_size_mb": 100.0,
                    "transit_time_ms": t_ms,
                    "bandwidth_gbps": gbps,
                }
            )
    delta = {(None, None): {"comm": 20 * MS}}
    p = make_profile(
        {
            "step_trace": rows(n, steps, delta=delta),
            "comm_matrix": mx,
            "comm_groups": [
                {
                    "group": "g",
                    "group_name": "dp",
                    "comm_kind": "collective",
                    "ranks": list(range(n)),
                    "size": n,
                }
            ],
        }
    )
    d = diagnose(p)
    c = top(d)
    assert c.mechanism is Mechanism.SLOW_LINK and c.culprit.kind == "link"
    assert c.culprit.link == (3, 4) and c.culprit.transport == "RDMA"
    assert c.metrics["transit_excess_us"] == pytest.approx(20 * MS)
    assert {v.rank for v in c.victims} == {0, 1, 2, 5, 6, 7}
    assert all(v.lost_us == pytest.approx(20 * MS) for v in c.victims)
    for r in (3, 4):
        roles = d.role_of(r)
        assert roles[0][1] == "on_link"
        assert not any(x.culprit.kind == "rank" and r in x.culprit.ranks for x in d.causes)
    assert "sit on the slow link" in c.summary and "not slow" not in c.summary


# ---------------------------------------------------------------------------- step-event rule
def test_rotating_one_step_stalls_stay_events_and_no_rank_is_slow() -> None:
    # 300 ms host stalls at (step, rank) = (1, 2), (2, 5), (4, 7), (5, 1); in each of those steps
    # the other ranks wait 300 ms in collectives. 4 of 6 steps are hit: most steps are slow.
    events = [(1, 2), (2, 5), (4, 7), (5, 1)]
    delta: dict[tuple[int | None, int | None], dict[str, float]] = {}
    for s, r in events:
        delta[(r, s)] = {"free": 300 * MS}
        for o in range(8):
            if o != r:
                delta[(o, s)] = {"comm": 300 * MS}
    d = diagnose(make_profile({"step_trace": rows(8, 6, delta=delta)}))
    c = top(d)
    assert c.mechanism is Mechanism.STEP_EVENTS and c.culprit.kind == "steps"
    assert c.culprit.events == tuple(sorted(events))
    assert c.steps == (1, 2, 4, 5)
    assert c.metrics["event_excess_us_mean"] == pytest.approx(300 * MS)
    assert c.metrics["clean_step_us"] == pytest.approx(110 * MS)  # 100 + 5 + 5 ms
    assert "most steps are slow" in c.summary
    # a rank that never stalls (rank 0) waits in all 4 hit steps: 4 x 300 ms over 6 steps
    lost0 = next(v.lost_us for v in c.victims if v.rank == 0)
    assert lost0 == pytest.approx(4 * 300 * MS / 6)
    assert not any(x.culprit.kind in ("rank", "ranks", "group") for x in d.causes)


def test_one_stall_in_one_step_is_an_event_not_a_slow_rank() -> None:
    delta = {(3, 2): {"free": 500 * MS}}
    delta.update({(o, 2): {"comm": 500 * MS} for o in range(6) if o != 3})
    d = diagnose(make_profile({"step_trace": rows(6, 4, delta=delta)}))
    c = top(d)
    assert c.mechanism is Mechanism.STEP_EVENTS and c.culprit.events == ((2, 3),)
    assert c.steps == (2,) and "rank 3 runs normally in the other steps" in c.summary


# ----------------------------------------------------------------------------- job-level rules
def test_same_idle_on_every_rank_is_one_job_cause() -> None:
    delta = {(r, None): {"free": 40 * MS + 100.0 * r} for r in range(8)}  # 45.0-45.7 ms Free
    d = diagnose(make_profile({"step_trace": rows(8, 3, delta=delta)}))
    c = top(d)
    assert c.mechanism is Mechanism.JOB_IDLE and c.culprit.kind == "job" and c.culprit.ranks == ()
    assert len(c.victims) == 8 and all(v.how == "idle" for v in c.victims)
    assert c.gain_us == pytest.approx(45 * MS) and c.bound is BoundKind.UPPER_BOUND
    assert not any(x.culprit.kind == "rank" for x in d.causes)


@pytest.mark.parametrize("present", [4, 2])
def test_job_idle_on_a_folder_lacking_ranks_speaks_for_the_ranks_present(present: int) -> None:
    """'Every rank idles ... no rank is slow' is not said of 8 ranks when only some are in the data."""
    from advisor_chat.ingest.profile import DataWarning

    delta = {(r, None): {"free": 40 * MS + 100.0 * r} for r in range(present)}
    gone = tuple(range(present, 8))
    warn = DataWarning("missing_ranks", f"{len(gone)} rank(s) have no profiling data", None, gone)
    d = diagnose(make_profile({"step_trace": rows(present, 3, delta=delta)}, warnings=[warn]))
    assert d.causes[0].mechanism is Mechanism.JOB_IDLE, [x.summary for x in d.causes]
    c = d.causes[0]
    assert c.summary.startswith(f"Every rank present ({present} of 8) idles")
    assert c.summary_zh.startswith(f"现有的 {present} 张卡（共 8 张）都在空闲")
    assert "no rank is slow" not in c.summary and "没有慢卡。" not in c.summary_zh
    assert f"whether one of the {len(gone)} missing rank(s) is" in c.summary
    assert c.gain_us == pytest.approx(45 * MS)  # the measured Free still bounds the gain

    every = {(r, None): {"free": 40 * MS + 100.0 * r} for r in range(8)}
    full = diagnose(make_profile({"step_trace": rows(8, 3, delta=every)}))
    f = next(x for x in full.causes if x.mechanism is Mechanism.JOB_IDLE)
    assert f.summary.startswith("Every rank idles") and "no rank is slow" in f.summary


def _allreduces(
    n_ranks: int, n_steps: int, per_step: int, *, elapse_ms: float, transit_ms: float
) -> list[dict[str, Any]]:
    """``comm_ops`` rows: ``per_step`` all-reduces per rank and step, no wait (idle = the rest)."""
    return [
        {
            "rank": r,
            "group": "g",
            "step": s,
            "op_name": f"hcom_allReduce__{s}_{i}",
            "op_type": "hcom_allReduce_",
            "comm_kind": "collective",
            "start_us": s * 1e6 + i * 1000.0,
            "elapse_ms": elapse_ms,
            "transit_ms": transit_ms,
            "wait_ms": 0.0,
            "synchronization_ms": 0.0,
            "idle_ms": elapse_ms - transit_ms,
            "wait_ratio": 0.0,
            "synchronization_ratio": 0.0,
        }
        for r in range(n_ranks)
        for s in range(1, n_steps + 1)
        for i in range(per_step)
    ]


def test_many_small_collectives_exposed_everywhere_is_one_job_cause() -> None:
    # every rank: 40 ms of exposed communication, 64 collectives per step, no late rank
    ops = _allreduces(8, 3, 64, elapse_ms=0.625, transit_ms=0.1)
    p = make_profile({"step_trace": rows(8, 3, comm=40 * MS), "comm_ops": ops})
    d = diagnose(p)
    c = top(d)
    assert c.mechanism is Mechanism.EXPOSED_COMMUNICATION and c.culprit.kind == "job"
    assert c.metrics["collectives_per_step"] == 64
    assert c.metrics["min_not_overlapped_us"] == pytest.approx(40 * MS)
    assert c.summary.startswith("Many small collectives")
    assert c.remedies[0].kind == "action" and "Fuse" in c.remedies[0].text


# ---------------------------------------------------------------------------- data quality
def test_step_with_lost_device_records_is_excluded_not_diagnosed() -> None:
    # step 1 lost half of its MatMulV2 records on every rank, and its step trace on rank 0 shows
    # a big Free that would look like a stall; it must be excluded and said, nothing else
    delta = {(0, 1): {"free": 200 * MS}}
    delta.update({(o, 1): {"comm": 200 * MS} for o in range(1, 6)})
    drop = {(r, 1): 5 for r in range(6)}
    p = make_profile({"step_trace": rows(6, 4, delta=delta), "kernels": kernels(6, 4, drop=drop)})
    d = diagnose(p)
    assert d.excluded_steps == (1,)
    assert [c.mechanism for c in d.causes] == [Mechanism.DATA_ARTIFACT, Mechanism.NO_CULPRIT]
    art = d.causes[0]
    assert art.steps == (1,) and art.gain_us is None and art.victims == ()
    assert (
        art.metrics["kernel_count_flagged_min"] == 15
        and art.metrics["kernel_count_siblings_median"] == 20
    )
    assert all(r.kind == "check" for r in art.remedies)
    assert d.notes and "excluded" in d.notes[0]


def test_two_ranks_one_holding_the_other_back_is_said_with_its_numbers() -> None:
    """Two ranks give no peer median, but one waiting for the other is measured: it leads."""
    from advisor_chat.ingest.profile import DataWarning

    # rank 1: 30 ms more Free per step; rank 0 waits those 30 ms in its collectives
    delta = {(1, None): {"free": 30 * MS}, (0, None): {"comm": 30 * MS}}
    gone = tuple(range(2, 16))
    warn = DataWarning("missing_ranks", "14 rank(s) have no profiling data", None, gone)
    d = diagnose(make_profile({"step_trace": rows(2, 4, delta=delta)}, warnings=[warn]))
    c = d.causes[0]
    assert c.mechanism is Mechanism.NOT_ENOUGH_SIGNAL
    assert "of the 2 ranks present (2 of 16), rank 1 holds rank 0 back" in c.summary
    assert "现有的 2 张卡（共 16 张）中，1号卡拖慢了0号卡" in c.summary_zh
    assert c.metrics["late_rank"] == 1
    assert c.metrics["own_diff_us"] == pytest.approx(30 * MS)
    assert c.metrics["free_diff_us"] == pytest.approx(30 * MS)
    assert c.metrics["wait_diff_us"] == pytest.approx(30 * MS)
    assert "30.0 ms per step longer" in c.summary
    # no slow rank is named as a cause: 2 ranks cannot tell slow from fast
    assert not any(x.culprit.kind == "rank" for x in d.causes)

    from advisor_chat.agent import Advisor
    from advisor_chat.config import Settings

    p = make_profile({"step_trace": rows(2, 4, delta=delta)}, warnings=[warn])
    adv = Advisor(p, settings=Settings(), case_search=lambda *a, **k: [])
    for q, lead in (
        ("why is rank 1 slow?", "Not enough signal to say whether rank 1 is slow: of the 2 ranks"),
        ("为什么1号卡慢？", "没有足够的信息判断1号卡是否慢：现有的 2 张卡"),
    ):
        ans = adv.ask(q).answer
        assert ans.startswith(lead), ans
        assert "no rank named" not in ans and "不指向某张卡" not in ans


def test_two_ranks_within_noise_say_only_that_two_ranks_cannot_tell() -> None:
    delta = {(1, None): {"free": 1 * MS}}  # 1 ms: below 5% of the step
    d = diagnose(make_profile({"step_trace": rows(2, 4, delta=delta)}))
    c = next(x for x in d.causes if x.mechanism is Mechanism.NOT_ENOUGH_SIGNAL)
    assert "holds" not in c.summary and "late_rank" not in c.metrics
    assert "with 2 ranks there is no peer median" in c.summary


def test_no_culprit_on_a_folder_lacking_ranks_is_said_of_the_ranks_present() -> None:
    from advisor_chat.ingest.profile import DataWarning

    warn = DataWarning("missing_ranks", "2 rank(s) have no profiling data", None, (6, 7))
    d = diagnose(make_profile({"step_trace": rows(6, 3)}, warnings=[warn]))
    c = next(x for x in d.causes if x.mechanism is Mechanism.NO_CULPRIT)
    assert "stands out above the thresholds among the ranks present (6 of 8)" in c.summary
    assert "在现有的 6 张卡（共 8 张）中，没有哪张卡" in c.summary_zh
    plain = diagnose(make_profile({"step_trace": rows(8, 3)})).causes[0]
    assert "thresholds;" in plain.summary and "among" not in plain.summary


def test_no_culprit_says_what_dominates_every_rank() -> None:
    d = diagnose(make_profile({"step_trace": rows(8, 3)}))
    assert [c.mechanism for c in d.causes] == [Mechanism.NO_CULPRIT]
    c = d.causes[0]
    assert "compute-bound" in c.summary and c.metrics["computing_share"] == pytest.approx(100 / 110)
    assert d.headline.startswith("No culprit")


def test_two_ranks_are_not_enough_to_name_a_slow_rank() -> None:
    delta = {(1, None): {"free": 10 * MS}, (0, None): {"comm": 10 * MS}}
    d = diagnose(make_profile({"step_trace": rows(2, 3, delta=delta)}))
    c = top(d)
    assert c.mechanism is Mechanism.NOT_ENOUGH_SIGNAL
    assert "at least 3 ranks" in c.summary and "至少 3 张卡" in c.summary_zh
    assert not any(x.culprit.kind == "rank" for x in d.causes)


def test_no_step_trace_is_not_enough_signal_and_names_the_data() -> None:
    p = make_profile({"kernels": kernels(4, 2)})
    d = diagnose(p)
    assert d.causes[0].mechanism is Mechanism.NOT_ENOUGH_SIGNAL
    assert "step_trace_time.csv" in d.causes[0].summary


def test_degrading_rank_is_a_degradation_cause() -> None:
    # rank 1's Free grows by 10 ms every step; the others wait for it
    delta: dict[tuple[int | None, int | None], dict[str, float]] = {}
    for s in range(1, 9):
        delta[(1, s)] = {"free": 10 * MS * s}
        for o in (0, 2, 3, 4, 5):
            delta[(o, s)] = {"comm": 10 * MS * s}
    d = diagnose(make_profile({"step_trace": rows(6, 8, delta=delta)}))
    c = top(d)
    assert c.mechanism is Mechanism.DEGRADATION and c.culprit.ranks == (1,)
    assert {v.rank for v in c.victims} == {0, 2, 3, 4, 5}


def test_job_slowdown_names_the_ranks_once() -> None:
    """Every rank's Computing grows 10 ms a step: one job cause whose summary says who once
    ("on every rank: step time grows"), not the step trend's "6 of 6 ranks (0-5):" after it."""
    delta = {(None, s): {"computing": 10 * MS * s} for s in range(1, 9)}
    c = top(diagnose(make_profile({"step_trace": rows(6, 8, delta=delta)})))
    assert c.mechanism is Mechanism.DEGRADATION and c.culprit.kind == "job"
    assert c.summary.startswith("Steps get slower over the run on every rank: step time grows")
    assert "6 of 6 ranks" not in c.summary and "6 张卡中的" not in c.summary_zh
    assert c.summary_zh.startswith("所有卡的步长随训练逐步变长：")

    from advisor_chat.agent import Advisor
    from advisor_chat.config import Settings

    p = make_profile({"step_trace": rows(6, 8, delta=delta)})
    adv = Advisor(p, settings=Settings(), case_search=lambda *a, **k: [])
    for q, lead in (
        ("why do the steps get slower over time?", "Steps get slower over the run on every rank:"),
        ("为什么训练越来越慢？", "所有卡的步长随训练逐步变长："),
    ):
        ans = adv.ask(q).answer
        assert ans.startswith(lead), ans


# ----------------------------------------------------------------------------- object contract
def test_cache_roles_json_and_chinese_text() -> None:
    delta = {(5, None): {"free": 30 * MS}}
    delta.update({(r, None): {"comm": 30 * MS} for r in range(8) if r != 5})
    p = make_profile({"step_trace": rows(8, 3, delta=delta)})
    d = diagnose(p)
    assert diagnose(p) is d  # cached per profile object
    data = json.loads(json.dumps(d.to_dict()))
    assert data["causes"][0]["culprit"]["ranks"] == [5]
    assert data["causes"][0]["mechanism"] == "host_stall"
    assert data["causes"][0]["victims"][0]["how"] == "collective_wait"
    for c in d.causes:
        assert_no_english_sentence(c.summary_zh)
        for r in c.remedies:
            assert_no_english_sentence(r.text_zh)


_ENGLISH_RUN = re.compile(r"[A-Za-z]{2,}(?:[ ,]+[A-Za-z]{2,}){2,}")


def assert_no_english_sentence(text: str) -> None:
    """Chinese text may hold identifiers (MatMulV2, HCCL, gc.freeze()) but no English phrase of
    three or more words."""
    hit = _ENGLISH_RUN.search(text)
    assert hit is None, f"English phrase {hit.group(0)!r} in: {text}"


def test_a_step_with_no_records_left_on_one_rank_is_excluded_too() -> None:
    # rank 2's kernel file was cut inside step 3: half of step 3's MatMulV2 are gone and step 4
    # has no kernel row at all, while its step trace has both steps: both are data artifacts
    k = [
        row
        for row in kernels(6, 4, drop={(2, 3): 5})
        if not (row["rank"] == 2 and row["step"] == 4)
    ]
    p = make_profile({"step_trace": rows(6, 4), "kernels": k})
    d = diagnose(p)
    assert d.excluded_steps == (3, 4)
    # a step the rank did not run (no step-trace row) is not an artifact of its records
    st = [r for r in rows(6, 4) if not (r["rank"] == 2 and r["step"] == 4)]
    assert diagnose(make_profile({"step_trace": st, "kernels": k})).excluded_steps == (3,)


def test_excluded_step_blames_no_rank() -> None:
    drop = {(r, 1): 5 for r in range(6)}
    d = diagnose(make_profile({"step_trace": rows(6, 4), "kernels": kernels(6, 4, drop=drop)}))
    assert d.causes[0].mechanism is Mechanism.DATA_ARTIFACT and 3 in d.causes[0].culprit.ranks
    assert d.role_of(3) == []  # rank 3 lost records in step 1: that is not a slowdown of rank 3


def test_pipeline_stages_from_pp_groups_ignore_the_world_group() -> None:
    groups = [
        {
            "group": "w",
            "group_name": "default_group",
            "comm_kind": "collective",
            "ranks": list(range(8)),
            "size": 8,
        },
        {
            "group": "g0",
            "group_name": "tp",
            "comm_kind": "collective",
            "ranks": [0, 1, 2, 3],
            "size": 4,
        },
        {
            "group": "g1",
            "group_name": "tp",
            "comm_kind": "collective",
            "ranks": [4, 5, 6, 7],
            "size": 4,
        },
    ] + [
        {"group": f"p{r}", "group_name": "pp", "comm_kind": "p2p", "ranks": [r, r + 4], "size": 2}
        for r in range(4)
    ]
    d = diagnose(make_profile({"step_trace": _pipeline_rows(), "comm_groups": groups}))
    c = top(d)
    assert c.mechanism is Mechanism.PIPELINE_IMBALANCE and c.culprit.ranks == (0, 1, 2, 3)


@pytest.mark.parametrize("export", ["text", "db"])
def test_host_remedies_point_at_the_file_the_export_has(
    scenario: Any, tmp_path: Any, export: str
) -> None:
    """A DB export has no trace_view.json: its host checks name the profiler DB, and vice versa."""
    from advisor_chat.config import load_settings
    from advisor_chat.ingest import load_profile

    root = scenario("seed-rank12", export=export)
    p = load_profile(root, settings=load_settings(home=tmp_path), use_cache=False, progress=False)
    d = diagnose(p)
    checks = [
        (r.text, r.text_zh)
        for c in d.causes
        for r in c.remedies
        if r.kind == "check" and "host" in r.text.lower()
    ]
    assert checks, [c.summary for c in d.causes]
    for en, zh in checks:
        if "text export" in en:  # the collect advice names both exports
            continue
        if export == "db":
            assert "trace_view.json" not in en + zh and ".db" in en and ".db" in zh, en
        else:
            assert "trace_view.json" in en and ".db" not in en, en


def test_a_few_small_transfers_do_not_name_exposed_communication_many_small_collectives() -> None:
    """The mechanism in the headline is the one that holds the time: 6 collectives per step whose
    small transfers take 1.2 ms of 40 ms exposed is plain exposed communication, overlap first."""
    from advisor_chat.analyzers.base import Finding, FindingKind, Severity
    from advisor_chat.diagnosis.context import build_context
    from advisor_chat.diagnosis.rules import rule_exposed_communication
    from advisor_chat.reporting import run_report

    ops = _allreduces(8, 3, 6, elapse_ms=40 / 6, transit_ms=40 / 6)
    p = make_profile({"step_trace": rows(8, 3, comm=40 * MS), "comm_ops": ops})
    ctx = build_context(p, run_report(p, diagnose=False).results)

    def small(time_us: float) -> Finding:
        return Finding(
            id="slow_link.communication.small_packets",
            kind=FindingKind.COMMUNICATION,
            severity=Severity.LOW,
            summary="small transfers",
            metrics={"small_time_us_per_step": time_us},
            symptom_tags=("small_packets",),
        )

    for time_us, many in ((1.2 * MS, False), (30 * MS, True)):
        ctx.findings = [f for f in ctx.findings if "small_packets" not in f.id] + [small(time_us)]
        ctx.claimed = set()
        (c,) = rule_exposed_communication(ctx, [])
        assert c.summary.startswith("Many small collectives") is many, c.summary
        assert ("Fuse" in c.remedies[0].text) is many
        assert c.metrics["collectives_per_step"] == 6


@pytest.mark.parametrize(("name", "board"), [("slow-link", False), ("hccs-link-both-ways", True)])
def test_link_repair_names_the_parts_of_its_transport(scenario, name: str, board: bool) -> None:
    """An RDMA path crosses NICs, optics and switches; an HCCS path is on the server board."""
    import json

    from advisor_chat.diagnosis import diagnose
    from advisor_chat.ingest import load_profile

    path = scenario(name)
    transport = json.loads((path / "answer_key.json").read_text())["slow_link"]["transport"]
    c = next(c for c in diagnose(load_profile(path)).causes if c.mechanism.value == "slow_link")
    act = next(r for r in c.remedies if r.kind == "action")
    assert transport in act.text
    assert ("on-board" in act.text) is board and ("optical module" in act.text) is not board
    assert ("板内链路" in act.text_zh) is board


# -------------------------------------------------------------------------- environment split
def _meta(n: int, env: dict[int, dict[str, str]]) -> list[dict[str, Any]]:
    """meta rows whose ``env`` is ``env.get(rank, {})`` plus a per-rank variable (left out)."""
    return [
        {
            "rank": r,
            "source_dir": f"rank{r}",
            "export_type": "synthetic",
            "env": {"RANK_ID": str(r), **env.get(r, {})},
        }
        for r in range(n)
    ]


@pytest.mark.parametrize(
    ("var", "acted"), [("HCCL_ALGO", True), ("MY_APP_FLAG", False)], ids=["runtime", "other"]
)
def test_a_setting_only_the_culprit_ranks_have_is_named_with_both_values(
    var: str, acted: bool
) -> None:
    """Ranks 0-3 run MatMulV2 1.5x slower and alone set ``var``: the group cause names the split;
    a runtime variable becomes the first action, another a check after the cause's actions."""
    delta = {(r, None): {"computing": 5 * MS} for r in range(4)}
    delta.update({(r, None): {"comm": 5 * MS} for r in range(4, 8)})
    env = {r: {var: "x1", "SHARED": "same"} for r in range(4)}
    env.update({r: {"SHARED": "same"} for r in range(4, 8)})
    p = make_profile(
        {
            "step_trace": rows(8, 3, delta=delta),
            "kernels": kernels(8, 3, dict.fromkeys(range(4), 1.5)),
            "meta": _meta(8, env),
        }
    )
    c = top(diagnose(p))
    assert c.culprit.ranks == (0, 1, 2, 3)
    assert f"{var} is x1 on ranks 0-3 and unset on every other rank" in c.summary
    assert f"{var} 在0-3号卡上为 x1，其他各卡为 未设置" in c.summary_zh
    assert "SHARED" not in c.summary and "RANK_ID" not in c.summary
    assert c.metrics["env_variables_split"] == 1.0
    assert any(f.id == "env_check.env.differs_across_ranks" for f in c.findings)
    hit = [i for i, r in enumerate(c.remedies) if var in r.text]
    assert len(hit) == 1
    if acted:
        assert (
            hit == [0] and c.remedies[0].kind == "action" and f"unset {var}" in c.remedies[0].text
        )
    else:
        r = c.remedies[hit[0]]
        assert r.kind == "check"
        assert all(x.kind == "action" for x in c.remedies[: hit[0]])


def test_a_setting_that_does_not_split_the_culprit_from_the_rest_is_not_evidence() -> None:
    """The variable differs on ranks 0-1 only, the slow group is ranks 0-3: no split named."""
    delta = {(r, None): {"computing": 5 * MS} for r in range(4)}
    delta.update({(r, None): {"comm": 5 * MS} for r in range(4, 8)})
    p = make_profile(
        {
            "step_trace": rows(8, 3, delta=delta),
            "kernels": kernels(8, 3, dict.fromkeys(range(4), 1.5)),
            "meta": _meta(8, {0: {"HCCL_ALGO": "x1"}, 1: {"HCCL_ALGO": "x1"}}),
        }
    )
    c = top(diagnose(p))
    assert c.culprit.ranks == (0, 1, 2, 3)
    assert "HCCL_ALGO" not in c.summary and "env_variables_split" not in c.metrics
