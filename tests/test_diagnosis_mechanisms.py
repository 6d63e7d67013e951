"""Unit tests of the general mechanisms, on constructed tables whose answer is known by construction.

- wait attribution (``advisor_chat.diagnosis.attribution``): arrival times are planted per rank
  and collective; each rank's Wait Time is written as HCCL does (last arrival minus own arrival),
  so the expected culprits, costs and victims follow from the planted arrivals;
- own-time decomposition (``advisor_chat.diagnosis.decompose``): kernels are planted per rank with
  a known extra count, slowdown, placement, dtype or shape;
- job-level decomposition: a planted operator share on every rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _analyzers_a_helpers import make_profile

from advisor_chat.diagnosis.attribution import attribute, nodes
from advisor_chat.diagnosis.decompose import device_account, job_account

MS = 1000.0


def comm_rows(
    n_ranks: int,
    steps: list[int],
    late_us: dict[tuple[int, int, int], float],
    *,
    ops_per_step: int = 4,
    group: str = "g0",
    members: list[int] | None = None,
    jitter_us: float = 50.0,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """comm_ops rows: ``late_us[(step, op_index, rank)]`` delays that rank's arrival (µs).

    Wait Time of a rank = latest arrival of the instance - its own arrival (ms), as HCCL reports
    the head start spent in Notify_Wait; a small seeded jitter keeps ranks from tying.
    """
    rng = np.random.default_rng(seed)
    ranks = members if members is not None else list(range(n_ranks))
    out = []
    for s in steps:
        for i in range(ops_per_step):
            arr = {r: float(rng.uniform(0, jitter_us)) + late_us.get((s, i, r), 0.0) for r in ranks}
            last = max(arr.values())
            for r in ranks:
                out.append(
                    {
                        "rank": r,
                        "group": group,
                        "step": s,
                        "op_name": f"hcom_allReduce__{i}_{s}",
                        "op_type": "hcom_allReduce_",
                        "comm_kind": "collective",
                        "start_us": 1e9 + arr[r],
                        "elapse_ms": (last - arr[r]) / MS + 1.0,
                        "transit_ms": 1.0,
                        "wait_ms": (last - arr[r]) / MS,
                        "synchronization_ms": (last - arr[r]) / MS,
                        "idle_ms": 0.0,
                        "wait_ratio": 0.0,
                        "synchronization_ratio": 0.0,
                    }
                )
    return out


def late_everywhere(ranks: list[int], steps: list[int], us: float, ops: int = 4) -> dict:
    return {(s, i, r): us for s in steps for i in range(ops) for r in ranks}


def test_two_independent_culprits_ranked_by_cost_without_double_counting() -> None:
    steps = [1, 2, 3]
    late = late_everywhere([3], steps, 8 * MS)  # rank 3: 8 ms late at every collective
    late.update(late_everywhere([5], steps, 3 * MS))  # rank 5: 3 ms late, independently
    p = make_profile({"comm_ops": comm_rows(8, steps, late)})
    a = attribute(p, [], step_us=100 * MS)
    assert a is not None
    units = [c.unit.ranks for c in a.culprits]
    assert units[:2] == [(3,), (5,)]
    first, second = a.culprits[0], a.culprits[1]
    # rank 3 costs what separates it from rank 5 (8 - 3 ms) at 4 collectives per step
    assert first.cost_us_per_step == pytest.approx(4 * 5 * MS, rel=0.03)
    # once rank 3 is on time, rank 5 costs its own 3 ms per collective: counted once, not twice
    assert second.cost_us_per_step == pytest.approx(4 * 3 * MS, rel=0.03)
    # every on-time rank waits for both: its loss to rank 3 equals rank 3's cost; rank 5, late
    # itself, still waits for rank 3 for the part rank 3 costs
    assert first.victims[0] == pytest.approx(first.cost_us_per_step, rel=0.03)
    assert first.victims[5] == pytest.approx(first.cost_us_per_step, rel=0.03)
    assert 3 not in first.victims
    # nothing counted twice: the two costs add up to an on-time rank's whole wait (8 ms x 4)
    w = a.instances
    assert first.cost_us_per_step + second.cost_us_per_step == pytest.approx(4 * 8 * MS, rel=0.03)
    assert set(w["late_rank"]) == {3}


def test_one_off_multi_second_late_arrival_is_an_event() -> None:
    steps = [1, 2, 3, 4]
    late = {(3, 0, 6): 4_000 * MS}  # rank 6 arrives 4 s late at the first collective of step 3
    p = make_profile({"comm_ops": comm_rows(8, steps, late)})
    a = attribute(p, [], step_us=100 * MS)
    assert a is not None and a.events
    e = a.events[0]
    assert (e.step, e.culprit) == (3, 6)
    assert e.cost_us == pytest.approx(4_000 * MS, rel=0.01)
    assert set(e.victims) == set(range(8)) - {6}
    assert e.max_wait_us == pytest.approx(4_000 * MS, rel=0.01)
    c = a.culprits[0]
    assert c.unit.ranks == (6,) and c.steps_hit == (3,)


def test_slow_node_is_one_unit_and_rotating_ranks_are_not() -> None:
    steps = [1, 2, 3]
    # two nodes of 4 ranks (HCCS inside, RDMA between); node 1's ranks all arrive ~6 ms late,
    # each with its own jitter, so the last arriver of node 1 varies
    rng = np.random.default_rng(1)
    late = {
        (s, i, r): 6 * MS + float(rng.uniform(0, 400))
        for s in steps
        for i in range(4)
        for r in (4, 5, 6, 7)
    }
    matrix = []
    for a_ in range(8):
        for b in range(8):
            if a_ != b:
                same = a_ // 4 == b // 4
                matrix.append(
                    {
                        "group": "g0",
                        "step": 1,
                        "op_name": "hcom_allReduce__0_1",
                        "src_rank": a_,
                        "dst_rank": b,
                        "transport": "HCCS" if same else "RDMA",
                        "transit_size_mb": 1.0,
                        "transit_time_ms": 0.1,
                        "bandwidth_gbps": 10.0,
                    }
                )
    p = make_profile({"comm_ops": comm_rows(8, steps, late), "comm_matrix": matrix})
    assert nodes(p) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    a = attribute(p, [], step_us=100 * MS)
    assert a is not None
    assert a.culprits[0].unit.kind == "node" and a.culprits[0].unit.ranks == (4, 5, 6, 7)
    # rotating one-step stalls inside one node: single ranks, not the node
    late2 = {(1, 0, 4): 30 * MS, (2, 0, 5): 30 * MS, (3, 0, 6): 30 * MS}
    p2 = make_profile({"comm_ops": comm_rows(8, steps, late2), "comm_matrix": matrix})
    a2 = attribute(p2, [], step_us=100 * MS)
    assert a2 is not None
    kinds = {c.unit.kind for c in a2.culprits}
    assert kinds == {"rank"}
    assert {c.unit.ranks[0]: c.steps_hit for c in a2.culprits} == {4: (1,), 5: (2,), 6: (3,)}


def kernel_rows(
    ranks: list[int],
    steps: list[int],
    spec: dict[int, list[tuple[str, str, str, str, float, int]]],
    default: list[tuple[str, str, str, str, float, int]],
) -> list[dict[str, Any]]:
    """kernels: per rank a list of (op_type, shapes, dtypes, core, duration_us, count) per step."""
    out = []
    for r in ranks:
        for s in steps:
            t = 1e9 + s * 1e6
            for op, shp, dt, core, dur, cnt in spec.get(r, default):
                for _ in range(cnt):
                    out.append(
                        {
                            "rank": r,
                            "step": s,
                            "name": f"aclnn{op}",
                            "op_type": op,
                            "accelerator_core": core,
                            "start_us": t,
                            "duration_us": dur,
                            "wait_us": 1.0,
                            "input_shapes": shp,
                            "input_dtypes": dt,
                        }
                    )
                    t += dur + 5
    return out


BASE = [
    ("MatMulV2", "4096,4096;8192,4096", "DT_BF16;DT_BF16", "AI_CORE", 1000.0, 10),
    ("Add", "4096,8192", "DT_BF16", "AI_VECTOR_CORE", 100.0, 20),
    ("SoftmaxV2", "8,4096,4096", "DT_BF16", "AI_VECTOR_CORE", 300.0, 4),
    ("LayerNorm", "4096,4096", "DT_BF16", "AI_VECTOR_CORE", 200.0, 4),
]


def _swap(i: int, **kw: Any) -> list[tuple[str, str, str, str, float, int]]:
    rows = [list(x) for x in BASE]
    fields = {"op": 0, "shape": 1, "dtype": 2, "core": 3, "dur": 4, "count": 5}
    for k, v in kw.items():
        rows[i][fields[k]] = v
    return [tuple(x) for x in rows]  # type: ignore[misc]


@pytest.mark.parametrize(
    ("spec", "verdict", "op", "delta_us"),
    [
        # 5 extra MatMul launches of 1 ms
        (_swap(0, count=15), "extra_work", "MatMulV2", 5 * 1000.0),
        # the same MatMul launches 1.5x slower
        (_swap(0, dur=1500.0), "slower", "MatMulV2", 10 * 500.0),
        # SoftmaxV2 placed on AI CPU at 3 ms per launch
        (_swap(2, core="AI_CPU", dur=3000.0), "placement", "SoftmaxV2", 4 * (3000.0 - 300.0)),
        # MatMul in FP32 at 2 ms per launch
        (_swap(0, dtype="DT_FLOAT;DT_FLOAT", dur=2000.0), "dtype", "MatMulV2", 10 * 1000.0),
        # MatMul on longer sequences: 12288 rows at 1.5 ms
        (_swap(0, shape="4096,4096;12288,4096", dur=1500.0), "shape", "MatMulV2", 10 * 500.0),
    ],
)
def test_device_account_names_what_differs(
    spec: list[tuple[str, str, str, str, float, int]], verdict: str, op: str, delta_us: float
) -> None:
    ranks, steps = list(range(6)), [1, 2, 3]
    p = make_profile({"kernels": kernel_rows(ranks, steps, {4: spec}, BASE)})
    acc = device_account(p, [(-1, 4)], ranks)
    assert acc is not None
    assert acc.verdict == verdict
    assert acc.top is not None and acc.top.op_type == op
    assert acc.delta_us == pytest.approx(delta_us, rel=1e-6)
    assert acc.by_kind[verdict] == pytest.approx(delta_us, rel=1e-6)


def test_uniform_slowdown_is_the_device_not_one_operator() -> None:
    ranks, steps = list(range(6)), [1, 2, 3]
    slow = [(*x[:4], x[4] * 1.3, x[5]) for x in BASE]
    p = make_profile({"kernels": kernel_rows(ranks, steps, {2: slow}, BASE)})
    acc = device_account(p, [(-1, 2)], ranks)
    assert acc is not None and acc.verdict == "uniform"
    assert acc.uniform_ratio == pytest.approx(1.3, rel=1e-6)
    busy = sum(x[4] * x[5] for x in BASE)
    assert acc.delta_us == pytest.approx(0.3 * busy, rel=1e-6)


def test_step_varying_work_is_compared_with_peers_in_the_same_steps() -> None:
    ranks, steps = list(range(4)), [1, 2, 3]
    rows: list[dict[str, Any]] = []
    # in step s, rank s gets longer sequences (a different shape, 2x the MatMul time)
    for s in steps:
        for r in ranks:
            spec = _swap(0, shape=f"4096,4096;{8192 * 2 + s},4096", dur=2000.0) if r == s else BASE
            rows += kernel_rows([r], [s], {r: spec}, BASE)
    p = make_profile({"kernels": rows})
    acc = device_account(p, [(1, 1), (2, 2), (3, 3)], ranks)
    assert acc is not None and acc.verdict == "shape"
    assert acc.delta_us == pytest.approx(10 * 1000.0, rel=1e-6)
    assert acc.varies_by_unit  # a different shape in each (step, rank): the work follows the data


def test_job_account_finds_an_operator_share_on_every_rank() -> None:
    import pandas as pd

    ranks, steps = list(range(4)), [1, 2]
    heavy = [*BASE, ("TransData", "4096,8192", "DT_BF16", "AI_VECTOR_CORE", 500.0, 10)]
    p = make_profile({"kernels": kernel_rows(ranks, steps, {}, heavy)})
    busy = sum(x[4] * x[5] for x in heavy)
    step = pd.Series({r: busy / 0.8 for r in ranks})  # the kernels fill 80% of each step
    ja = job_account(p, step)
    assert ja is not None and ja.hotspot is not None
    assert ja.hotspot.what == "layout"
    assert ja.hotspot.share_min == pytest.approx(5000.0 / (busy / 0.8), rel=1e-6)
    # its share of the device time: of the kernels only, not of the step
    assert ja.hotspot.device_share == pytest.approx(5000.0 / busy, rel=1e-6)
    assert ja.main_work is not None and ja.main_work.name == "MatMulV2"
    # without the conversions nothing but the main work dominates: no hotspot
    p2 = make_profile({"kernels": kernel_rows(ranks, steps, {}, BASE)})
    ja2 = job_account(p2, pd.Series({r: sum(x[4] * x[5] for x in BASE) / 0.8 for r in ranks}))
    assert ja2 is not None and ja2.hotspot is None


def test_a_link_slow_in_both_directions_is_one_cause_counted_once() -> None:
    from test_diagnosis_rules import rows

    from advisor_chat.diagnosis import Mechanism, diagnose

    # a bidirectional ring over RDMA, 100 MB per link per step; 3->4 and 4->3 at 4 GB/s, the
    # others 20 GB/s: 20 ms of transit excess per step in each direction, at the same time
    n, steps = 8, 3
    mx = _ring(
        n, list(range(1, steps + 1)), lambda s, a, b: 4.0 if {a, b} == {3, 4} else 20.0, both=True
    )
    group = {
        "group": "g",
        "group_name": "dp",
        "comm_kind": "collective",
        "ranks": list(range(n)),
        "size": n,
    }
    p = make_profile(
        {
            "step_trace": rows(n, steps, delta={(None, None): {"comm": 20 * MS}}),
            "comm_matrix": mx,
            "comm_groups": [group],
        }
    )
    d = diagnose(p)
    links = [c for c in d.causes if c.mechanism is Mechanism.SLOW_LINK]
    assert len(links) == 1
    c = links[0]
    assert set(c.culprit.link or ()) == {3, 4} and c.metrics["directions"] == 2.0
    # counted once: the excess of one direction (25 - 5 ms), not the sum of both
    assert c.gain_us == pytest.approx(20 * MS)
    assert "both directions" in c.summary and "两个方向" in c.summary_zh


def test_step_varying_late_rank_is_explained_by_its_work_not_called_stalls() -> None:
    from test_diagnosis_rules import rows

    from advisor_chat.diagnosis import Mechanism, diagnose

    # 8 ranks, 4 steps of ~110 ms; in step s rank s gets longer sequences: its MatMuls take
    # 10 x 0.6 ms more (a larger input shape), 6 ms = 5.5% of the step, under the one-step event
    # threshold; the others wait those 6 ms at the step's collectives
    n, steps = 8, [1, 2, 3, 4]
    late = {(s, i, s): 1.5 * MS for s in steps for i in range(4)}
    delta: dict = {}
    for s in steps:
        delta[(s, s)] = {"computing": 6 * MS}
        for r in range(n):
            if r != s:
                delta[(r, s)] = {"comm": 6 * MS}
    kern: list = []
    for s in steps:
        for r in range(n):
            spec = (
                _swap(0, shape=f"4096,4096;{8192 + 1024 * s},4096", dur=1600.0) if r == s else BASE
            )
            kern += kernel_rows([r], [s], {r: spec}, BASE)
    p = make_profile(
        {
            "step_trace": rows(n, len(steps), delta=delta),
            "comm_ops": comm_rows(n, steps, late),
            "kernels": kern,
        }
    )
    d = diagnose(p)
    ev = [c for c in d.causes if c.mechanism is Mechanism.STEP_EVENTS]
    assert len(ev) == 1, [c.id for c in d.causes]
    c = ev[0]
    assert set(c.culprit.events) == {(s, s) for s in steps}
    assert "larger inputs" in c.summary and "follows the data" in c.summary
    assert c.remedies[0].kind == "action" and "tokens per step" in c.remedies[0].text
    # no rank is called slow on average
    assert not [x for x in d.causes if x.mechanism is Mechanism.COMPUTE_STRAGGLER]


def _group_rows(group: str, members: list[int], steps: list[int], transit_ms: float) -> list[dict]:
    """comm_ops rows of one collective per step inside a group, no waiting, given transit."""
    out = []
    for s in steps:
        for r in members:
            out.append(
                {
                    "rank": r,
                    "group": group,
                    "step": s,
                    "op_name": f"hcom_allGather__{group}_{s}",
                    "op_type": "hcom_allGather_",
                    "comm_kind": "collective",
                    "start_us": 1e9 + s * 1e6,
                    "elapse_ms": transit_ms,
                    "transit_ms": transit_ms,
                    "wait_ms": 0.0,
                    "synchronization_ms": 0.0,
                    "idle_ms": 0.0,
                    "wait_ratio": 0.0,
                    "synchronization_ratio": 0.0,
                }
            )
    return out


def test_a_group_slowed_by_its_own_transfers_is_a_communication_cause() -> None:
    from test_diagnosis_rules import rows

    from advisor_chat.diagnosis import Mechanism, diagnose

    # two TP groups of 4 (ranks 0-3, 4-7) and one DP all-reduce across all 8 per step; the TP
    # all-gather of ranks 4-7 transfers 12 ms longer (2 ms vs 14 ms), so ranks 4-7 reach the DP
    # all-reduce 12 ms late and ranks 0-3 wait 12 ms there; Computing and Free are equal
    n, steps = 8, [1, 2, 3]
    slow = [4, 5, 6, 7]
    late = {(s, 0, r): 12 * MS for s in steps for r in slow}
    ops = comm_rows(n, steps, late, ops_per_step=1, group="dp")
    ops += _group_rows("tp0", [0, 1, 2, 3], steps, 2.0) + _group_rows("tp1", slow, steps, 14.0)
    delta: dict = {}
    for r in range(n):
        delta[(r, None)] = {"comm": 12 * MS}  # ranks 0-3 wait, ranks 4-7 transfer
    groups = [
        {"group": g, "group_name": name, "comm_kind": "collective", "ranks": rs, "size": len(rs)}
        for g, name, rs in (
            ("dp", "dp", list(range(n))),
            ("tp0", "tp", [0, 1, 2, 3]),
            ("tp1", "tp", slow),
        )
    ]
    p = make_profile(
        {"step_trace": rows(n, len(steps), delta=delta), "comm_ops": ops, "comm_groups": groups}
    )
    d = diagnose(p)
    c = d.causes[0]
    assert c.mechanism is Mechanism.SLOW_GROUP and c.category.value == "communication"
    assert c.culprit.ranks == tuple(slow)
    assert c.metrics["excess_us"] == pytest.approx(12 * MS, rel=0.02)
    assert "transferring data in their own collectives" in c.summary
    assert {v.rank for v in c.victims} == {0, 1, 2, 3}


# -- development kinds (issue 22, generalization_dev): engine, idle spot, network by step ----------
def test_engine_slowdown_is_one_core_not_the_whole_device() -> None:
    """Every AI_VECTOR_CORE operator 1.9x slower on rank 2, the AI_CORE MatMul at peer speed."""
    ranks, steps = list(range(6)), [1, 2, 3]
    slow = [(*x[:4], x[4] * (1.9 if x[3] == "AI_VECTOR_CORE" else 1.0), x[5]) for x in BASE]
    p = make_profile({"kernels": kernel_rows(ranks, steps, {2: slow}, BASE)})
    acc = device_account(p, [(-1, 2)], ranks)
    assert acc is not None and acc.verdict == "engine" and acc.engine == "AI_VECTOR_CORE"
    assert acc.engine_ratio == pytest.approx(1.9, rel=1e-6)
    assert acc.other_ratio == pytest.approx(1.0, rel=1e-6)
    vec = sum(x[4] * x[5] for x in BASE if x[3] == "AI_VECTOR_CORE")
    assert acc.by_kind["engine"] == pytest.approx(0.9 * vec, rel=1e-6)
    # the same slowdown on every core is the whole device, not one engine
    allslow = [(*x[:4], x[4] * 1.9, x[5]) for x in BASE]
    p2 = make_profile({"kernels": kernel_rows(ranks, steps, {2: allslow}, BASE)})
    acc2 = device_account(p2, [(-1, 2)], ranks)
    assert acc2 is not None and acc2.verdict == "uniform" and acc2.engine == ""


def test_idle_before_one_operator_locates_a_host_stall() -> None:
    """Rank 3's device waits 2 ms before each of its 4 LayerNorm launches; elsewhere 1 µs gaps."""
    from advisor_chat.diagnosis.decompose import idle_before

    ranks, steps = list(range(6)), [1, 2, 3]
    k = kernel_rows(ranks, steps, {}, BASE)
    for row in k:
        if row["rank"] == 3 and row["op_type"] == "LayerNorm":
            row["wait_us"] = 2000.0
    p = make_profile({"kernels": k})
    spot = idle_before(p, [3], ranks, min_delta_us=8 * MS)
    assert spot is not None and spot.op_type == "LayerNorm" and spot.launches == 4
    assert spot.delta_us == pytest.approx(4 * (2000.0 - 1.0), rel=1e-9)
    assert spot.share == pytest.approx(4 * 1999.0 / (8 * MS), rel=1e-9)
    # an idle spread over the step (no operator holds 40% of the extra idle): no spot
    assert idle_before(p, [3], ranks, min_delta_us=40 * MS) is None
    # an export without Wait Time says nothing
    for row in k:
        row["wait_us"] = None
    assert idle_before(make_profile({"kernels": k}), [3], ranks, min_delta_us=8 * MS) is None


def _ring(n: int, steps: list[int], gbps: Any, *, both: bool = False) -> list[dict[str, Any]]:
    """comm_matrix rows of a RDMA ring, 100 MB per link per step at ``gbps(step, src, dst)``
    (``both``: each rank also sends to its left neighbour)."""
    out = []
    for s in steps:
        for r in range(n):
            for dst in ((r + 1) % n, (r - 1) % n) if both else ((r + 1) % n,):
                out.append(_link_row(s, r, dst, gbps(s, r, dst)))
    return out


def _link_row(s: int, r: int, dst: int, bw: float) -> dict[str, Any]:
    return {
        "group": "g",
        "step": s,
        "op_name": f"hcom_allReduce_{s}",
        "src_rank": r,
        "dst_rank": dst,
        "transport": "RDMA",
        "transit_size_mb": 100.0,
        "transit_time_ms": 100.0 / bw,
        "bandwidth_gbps": bw,
    }


def test_network_slow_on_every_link_in_some_steps_is_one_job_cause() -> None:
    from test_diagnosis_rules import rows

    from advisor_chat.diagnosis import Mechanism, diagnose

    n, steps = 8, [1, 2, 3, 4, 5]
    hit = {2, 4}  # every link at 8 GB/s in steps 2 and 4, 20 GB/s otherwise
    mx = _ring(n, steps, lambda s, a, b: 8.0 if s in hit else 20.0)
    # every rank waits 7.5 ms more in those steps (12.5 - 5 ms of transit)
    st = rows(n, len(steps), delta={(None, s): {"comm": 7.5 * MS} for s in hit})
    d = diagnose(make_profile({"step_trace": st, "comm_matrix": mx}))
    net = [c for c in d.causes if c.id == "cause.slow_transport.rdma"]
    assert len(net) == 1
    c = net[0]
    assert c.mechanism is Mechanism.SLOW_LINK and c.culprit.kind == "job" and c.steps == (2, 4)
    assert c.metrics["bandwidth_gbps"] == pytest.approx(8.0) and c.metrics["median_gbps"] == 20.0
    assert c.gain_us == pytest.approx(2 * 7.5 * MS / len(steps))
    assert not [x for x in d.causes if x.culprit.link is not None]  # no single link is blamed
    assert c.summary.startswith("Every rank slows down in steps 2, 4")


def test_a_link_slow_in_some_steps_only_is_called_intermittent() -> None:
    from test_diagnosis_rules import rows

    from advisor_chat.diagnosis import Mechanism, diagnose

    n, steps = 8, [1, 2, 3, 4, 5]
    mx = _ring(n, steps, lambda s, a, b: 2.0 if (a, s) in {(3, 2), (3, 5)} else 20.0)
    st = rows(n, len(steps), delta={(None, None): {"comm": 20 * MS}})
    d = diagnose(make_profile({"step_trace": st, "comm_matrix": mx}))
    link = next(c for c in d.causes if c.mechanism is Mechanism.SLOW_LINK)
    assert link.culprit.link == (3, 4) and link.steps == (2, 5)
    assert link.metrics["bandwidth_gbps_slow_steps"] == pytest.approx(2.0)
    assert link.metrics["bandwidth_gbps_other_steps"] == pytest.approx(20.0)
    assert "slow in steps 2, 5 only" in link.summary and "只在第 2, 5 步变慢" in link.summary_zh


def test_a_steady_small_straggler_is_a_cause_and_jitter_is_not() -> None:
    """A rank late by 2.5% of the step at every collective of every step is named; the same
    total lateness in one step only (not steady) stays under the 5% size threshold."""
    from test_diagnosis_rules import rows

    from advisor_chat.diagnosis import diagnose

    n, steps = 8, [1, 2, 3]
    late = 2.875 * MS / 4  # 2.5% of the 115 ms step per step, spread over its 4 collectives
    steady = late_everywhere([5], steps, late)
    st = rows(n, len(steps), delta={(5, None): {"computing": 2.875 * MS}})
    d = diagnose(make_profile({"step_trace": st, "comm_ops": comm_rows(n, steps, steady)}))
    assert any(c.culprit.ranks == (5,) for c in d.causes), [c.id for c in d.causes]
    once = {(2, i, 5): 3 * late for i in range(4)}  # the same per-step average, one step only
    st1 = rows(n, len(steps), delta={(5, 2): {"computing": 3 * 2.875 * MS}})
    d1 = diagnose(make_profile({"step_trace": st1, "comm_ops": comm_rows(n, steps, once)}))
    assert not any(c.culprit.ranks == (5,) and c.culprit.kind == "rank" for c in d1.causes)


def test_idle_before_first_seen_shapes_is_placed_on_those_kernels() -> None:
    """Steps 2 and 4 bring a new sequence length: the device idles 300 ms before each new-shape
    MatMul (online compilation); step 5 runs step 2's length again and does not idle."""
    from advisor_chat.diagnosis.decompose import new_shape_idle

    ranks, steps = list(range(4)), [1, 2, 3, 4, 5]
    seq = {1: 4096, 2: 2048, 3: 4096, 4: 6144, 5: 2048}
    rows: list[dict[str, Any]] = []
    for r in ranks:
        for s in steps:
            t = 1e9 + s * 1e7
            for i in range(3):
                new = s in (2, 4)
                wait = 300_000.0 if new and i == 0 else 10.0
                t += wait
                rows.append(
                    {
                        "rank": r, "step": s, "name": "aclnnMatmul", "op_type": "MatMulV2",
                        "accelerator_core": "AI_CORE", "start_us": t, "duration_us": 500.0,
                        "wait_us": wait, "input_shapes": f"{seq[s]},4096;4096,4096",
                        "input_dtypes": "DT_BF16;DT_BF16",
                    }
                )  # fmt: skip
                t += 500.0
    p = make_profile({"kernels": rows})
    ns = new_shape_idle(p, ranks, [2, 4])
    assert ns is not None and ns.steps == (2, 4) and ns.ops == ("MatMulV2",)
    assert ns.reused_steps == (5,)  # step 5 reuses step 2's shape
    assert ns.kernels_per_step == 3  # every MatMul of a new-shape step is first seen there
    assert ns.idle_us == pytest.approx(300_000.0 + 2 * 10.0)
    assert ns.idle_share == pytest.approx(1.0)
    assert any("2048" in x for x in ns.shapes)
    # the same idle in a step whose shapes all ran before: not placed on new shapes
    assert new_shape_idle(p, ranks, [3]) is None


def test_a_late_arrival_far_below_the_timeout_keeps_its_share() -> None:
    from test_diagnosis_rules import rows

    from advisor_chat.diagnosis import diagnose

    # rank 6 arrives 0.6 s late once (step 3): 0.6 / 1836 s of the default HCCL_EXEC_TIMEOUT is
    # 0.033%, which one decimal would print as "0.0%"
    n, steps = 8, [1, 2, 3, 4]
    late = {(3, 0, 6): 600 * MS}
    delta = {(r, 3): {"comm": 600 * MS} for r in range(n) if r != 6}
    delta[(6, 3)] = {"free": 600 * MS}
    p = make_profile(
        {"step_trace": rows(n, len(steps), delta=delta), "comm_ops": comm_rows(n, steps, late)}
    )
    d = diagnose(p)
    c = next(c for c in d.causes if "hccl_exec_timeout_share" in c.metrics)
    share = c.metrics["hccl_exec_timeout_share"]
    assert share == pytest.approx(0.6 / 1836, rel=0.02)
    assert f"{share * 100:.2g}% of HCCL_EXEC_TIMEOUT" in c.summary
    assert "0.0% of" not in c.summary


def _with(rows: list[dict[str, Any]], rank: int, op: str, **cols: Any) -> list[dict[str, Any]]:
    """Set ``cols`` on every ``op`` launch of ``rank`` (other rows unchanged)."""
    return [r | cols if r["rank"] == rank and r["op_type"] == op else r for r in rows]


def test_a_different_input_format_is_told_apart_from_a_shape_change() -> None:
    """Rank 4's MatMul reads FRACTAL_NZ (same shapes and dtypes) at 1.4 ms; its peers ND at 1 ms."""
    from advisor_chat.diagnosis.evidence import explain_device

    ranks, steps = list(range(6)), [1, 2, 3]
    rows = [
        r | {"input_formats": "FORMAT_ND;FORMAT_ND"} for r in kernel_rows(ranks, steps, {}, BASE)
    ]
    rows = _with(rows, 4, "MatMulV2", input_formats="FRACTAL_NZ;FORMAT_ND", duration_us=1400.0)
    acc = device_account(make_profile({"kernels": rows}), [(-1, 4)], ranks)
    assert acc is not None and acc.verdict == "format"
    top = acc.top
    assert top is not None and top.op_type == "MatMulV2"
    assert (top.format_culprit, top.format_peer) == ("FRACTAL_NZ;FORMAT_ND", "FORMAT_ND;FORMAT_ND")
    assert acc.by_kind["format"] == pytest.approx(10 * 400.0, rel=1e-6)
    ex = explain_device(acc, "rank 4", "rank 4", None)
    assert (
        ex is not None
        and "FRACTAL_NZ;FORMAT_ND" in ex.clause
        and "FORMAT_ND;FORMAT_ND" in ex.clause
    )
    assert "allow_internal_format" in ex.remedy.text


def test_pmu_counters_that_differ_are_stated_with_their_values() -> None:
    """Rank 4's MatMul is 1.5x slower and spends 0.80 of its time on MTE2 loads (peers 0.40)."""
    from advisor_chat.diagnosis.evidence import explain_device

    ranks, steps = list(range(6)), [1, 2, 3]
    rows = [
        r | {"aic_mte2_ratio": 0.40, "aic_mac_ratio": 0.60, "aic_scalar_ratio": 0.10}
        for r in kernel_rows(ranks, steps, {}, BASE)
    ]
    rows = _with(rows, 4, "MatMulV2", duration_us=1500.0, aic_mte2_ratio=0.80, aic_mac_ratio=0.40)
    acc = device_account(make_profile({"kernels": rows}), [(-1, 4)], ranks)
    assert acc is not None and acc.verdict == "slower"
    assert acc.counters["aic_mte2_ratio"] == pytest.approx((0.80, 0.40))
    assert acc.counters["aic_mac_ratio"] == pytest.approx((0.40, 0.60))
    assert "aic_scalar_ratio" not in acc.counters  # equal on both sides
    ex = explain_device(acc, "rank 4", "第 4 卡", None)
    assert ex is not None
    assert "aic_mte2_ratio 0.80 against 0.40" in ex.clause
    assert "aic_mte2_ratio 为 0.80，其他卡为 0.40" in ex.clause_zh
    assert ex.metrics["aic_mte2_ratio"] == pytest.approx(0.80)
    # an engine slowdown compares the counters of that core's kernels only
    slow = [(*x[:4], x[4] * (1.9 if x[3] == "AI_VECTOR_CORE" else 1.0), x[5]) for x in BASE]
    rows2 = [r | {"aiv_mte2_ratio": 0.3} for r in kernel_rows(ranks, steps, {2: slow}, BASE)]
    rows2 = [
        r | {"aiv_mte2_ratio": 0.6}
        if r["rank"] == 2 and r["accelerator_core"] == "AI_VECTOR_CORE"
        else r
        for r in rows2
    ]
    acc2 = device_account(make_profile({"kernels": rows2}), [(-1, 2)], ranks)
    assert acc2 is not None and acc2.verdict == "engine"
    assert acc2.counters["aiv_mte2_ratio"] == pytest.approx((0.6, 0.3))
