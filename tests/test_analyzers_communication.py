from __future__ import annotations

import math

import pandas as pd
import pytest
from _analyzers_a_helpers import make_profile, step_rows
from test_analyzers_slow_rank import comm_rows

from advisor_chat.analyzers import get_analyzer
from advisor_chat.analyzers.base import Severity
from advisor_chat.errors import ToolArgumentError


def run(p, **kw):
    spec = get_analyzer("communication")
    return spec.run(p, spec.params(**kw))


def tp_kernels(ranks=4, steps=2, fused=False):
    rows = []
    for r in range(ranks):
        for s in range(1, steps + 1):
            t = 1e15 + s * 1e6
            for i in range(5):
                mm = "MatmulAllReduce" if fused else "MatMulV2"
                rows.append(
                    {
                        "rank": r,
                        "step": s,
                        "name": f"{mm}_{i}",
                        "op_type": mm,
                        "accelerator_core": "AI_CORE",
                        "start_us": t,
                        "duration_us": 300.0,
                        "wait_us": 0.0,
                    }
                )
                t += 300
                if not fused:
                    rows.append(
                        {
                            "rank": r,
                            "step": s,
                            "name": f"hcom_allReduce__{i}",
                            "op_type": "hcom_allReduce_",
                            "accelerator_core": "COMMUNICATION",
                            "start_us": t,
                            "duration_us": 200.0,
                            "wait_us": 0.0,
                        }
                    )
                    t += 200
                rows.append(
                    {
                        "rank": r,
                        "step": s,
                        "name": f"Add_{i}",
                        "op_type": "Add",
                        "accelerator_core": "AI_VECTOR_CORE",
                        "start_us": t,
                        "duration_us": 50.0,
                        "wait_us": 0.0,
                    }
                )
                t += 50
    return rows


GROUPS = [
    {"group": "g1", "group_name": "tp", "comm_kind": "collective", "ranks": [0, 1, 2, 3], "size": 4}
]


def test_per_group_type_known_answer():
    p = make_profile(
        {"step_trace": step_rows(8), "comm_ops": comm_rows(8, late=5, ops=10, steps=3)}
    )
    res = run(p)
    row = res.table.iloc[0]
    assert row["op_type"] == "allreduce" and row["ranks"] == 8
    assert row["count"] == pytest.approx(10.0)  # ops per rank per step
    assert row["transit_ms"] == pytest.approx(20.0)  # 10 ops × 2 ms
    ops = p.get("comm_ops")
    assert row["wait_ms"] == pytest.approx(ops["wait_ms"].sum() / 24)
    assert any(f.id == "communication.communication.wait_g1" for f in res.findings)


def test_overlap_ratio_and_not_overlapped_finding():
    p = make_profile({"step_trace": step_rows(4, comm=20_000.0, overlapped=5_000.0)})
    res = run(p)
    assert res.tables["overlap"]["overlap_ratio"].tolist() == pytest.approx([0.2] * 4)
    f = next(f for f in res.findings if f.id == "communication.communication.not_overlapped")
    assert f.metrics["not_overlapped_share"] == pytest.approx(20_000 / 125_000)
    assert f.severity is Severity.HIGH


def test_mc2_opportunity_known_answer():
    p = make_profile({"step_trace": step_rows(4), "kernels": tp_kernels(), "comm_groups": GROUPS})
    res = run(p)
    f = next(f for f in res.findings if f.kind.value == "mc2_opportunity")
    assert f.metrics["pairs_per_step"] == 5
    assert f.estimated_gain_us == pytest.approx(5 * 200.0)  # min(300, 200) per pair
    assert f.ranks == (0, 1, 2, 3)


def test_mc2_already_on_and_no_signal():
    res = run(make_profile({"kernels": tp_kernels(fused=True), "comm_groups": GROUPS}))
    assert not any(f.kind.value == "mc2_opportunity" for f in res.findings)
    assert any("already on" in n for n in res.notes)
    res2 = run(make_profile({"step_trace": step_rows(2)}))
    assert any("no kernels" in n for n in res2.notes)
    assert any("no comm_ops" in n for n in res2.notes)


def test_bad_group():
    with pytest.raises(ToolArgumentError):
        run(make_profile({"comm_ops": comm_rows(4, late=1)}), group="x")


def test_scenario_comm_bound_mc2(scenario):
    import json

    from advisor_chat.ingest import load_profile

    path = scenario("comm-bound-no-overlap")
    key = json.loads((path / "answer_key.json").read_text())
    exp = key["expected_numbers"]
    res = run(load_profile(path))
    ids = [f.id for f in res.findings]
    assert "communication.communication.not_overlapped" in ids
    mc2 = next(f for f in res.findings if f.kind.value == "mc2_opportunity")
    assert mc2.severity is Severity.HIGH
    assert mc2.metrics["pairs_per_step"] >= exp["matmul_followed_by_tp_allreduce_per_step"]
    assert res.metrics["mean_overlap_ratio"] == pytest.approx(exp["median_overlap_ratio"], abs=0.02)


def test_scenario_healthy_no_high(scenario):
    from advisor_chat.ingest import load_profile

    res = run(load_profile(scenario("healthy")))
    assert not [f for f in res.findings if f.severity is Severity.HIGH]


def test_real_16rank_groups(real_samples):
    import json

    from advisor_chat.ingest import load_profile

    data = json.loads(
        (
            real_samples / "cluster-16rank-pp2/cluster_analysis_output/cluster_communication.json"
        ).read_text()
    )
    ops = data["(0, 1, 2, 3, 4, 5, 6, 7)"]["step2"]
    infos = [
        v["Communication Time Info"]
        for op, per in ops.items()
        if op != "Total Op Info"
        for v in per.values()
    ]
    res = run(load_profile(real_samples / "cluster-16rank-pp2", use_cache=False))
    row = res.table[res.table["op_type"] == "broadcast"].iloc[0]
    n_ranks = len({r for op, per in ops.items() if op != "Total Op Info" for r in per})
    assert row["elapse_ms"] == pytest.approx(sum(i["Elapse Time(ms)"] for i in infos) / n_ranks)
    assert row["wait_ratio"] == pytest.approx(
        sum(i["Wait Time(ms)"] for i in infos) / sum(i["Elapse Time(ms)"] for i in infos)
    )


def test_instances_one_collective_at_a_time_known_answer():
    """``instances``: medians per instance, and the main transport's MB and bandwidth
    (construction: comm_rows' AllReduce takes wait + 2 ms, rank 5 waits ~0, the others ~20 ms;
    each instance moves 64 MB over RDMA in 4 ms and 8 MB over HCCS)."""
    ops = comm_rows(8, late=5, ops=4, steps=3)
    bw = []
    for o in ops:
        key = {k: o[k] for k in ("rank", "group", "step", "op_name")}
        bw.append({**key, "transport": "RDMA", "transit_size_mb": 64.0, "transit_time_ms": 4.0,
                   "bandwidth_gbps": 16.0, "large_packet_ratio": 1.0})  # fmt: skip
        bw.append({**key, "transport": "HCCS", "transit_size_mb": 8.0, "transit_time_ms": 1.0,
                   "bandwidth_gbps": 8.0, "large_packet_ratio": 1.0})  # fmt: skip
    p = make_profile({"step_trace": step_rows(8), "comm_ops": ops, "comm_bandwidth": bw})
    t = run(p).tables["instances"]
    assert len(t) == 1
    row = t.iloc[0]
    frame = pd.DataFrame(ops)
    assert row["op_type"] == "allreduce" and row["ranks"] == 8 and row["rank_list"] == "0-7"
    assert row["count_per_step"] == pytest.approx(4.0)
    assert row["elapse_ms_median"] == pytest.approx(frame["elapse_ms"].median())
    assert row["wait_ms_median"] == pytest.approx(frame["wait_ms"].median())
    assert row["transit_ms_median"] == pytest.approx(2.0)
    assert row["transit_size_mb_median"] == pytest.approx(72.0)  # over both transports
    assert row["transport"] == "RDMA" and row["transport_size_mb_median"] == pytest.approx(64.0)
    assert row["bandwidth_gbps_median"] == pytest.approx(16.0)  # 64 MB / 4 ms
    # without bandwidth rows: sizes unknown, times still there
    bare = run(make_profile({"step_trace": step_rows(8), "comm_ops": ops})).tables["instances"]
    assert math.isnan(bare.iloc[0]["transit_size_mb_median"]) and bare.iloc[0]["transport"] == ""
