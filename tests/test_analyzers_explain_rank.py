from __future__ import annotations

import numpy as np
import pytest
from _analyzers_a_helpers import make_profile, profile_from_cluster_csv, read_cluster_csv, step_rows
from test_analyzers_slow_rank import comm_rows

from advisor_chat.analyzers import get_analyzer
from advisor_chat.analyzers.base import Category, Severity
from advisor_chat.errors import ToolArgumentError


def run(profile, **kw):
    spec = get_analyzer("explain_rank")
    return spec.run(profile, spec.params(**kw))


def dispatch_rows(ranks: int, slow: int, steps: int = 3):
    rows = []
    for r in range(ranks):
        for s in range(1, steps + 1):
            for i in range(20):
                delay = 50.0 + i if r != slow else 400.0 + 10 * i
                rows.append(
                    {
                        "rank": r,
                        "step": s,
                        "api_name": "aclnnAdd",
                        "host_start_us": 1e15 + i * 100,
                        "device_start_us": 1e15 + i * 100 + delay,
                        "launch_delay_us": delay,
                    }
                )
    return rows


def kernel_rows(ranks: int, slow: int, steps: int = 2):
    rows = []
    for r in range(ranks):
        for s in range(1, steps + 1):
            n_mm = 10
            for i in range(n_mm):
                dur = 1000.0 if r != slow else 1500.0
                rows.append(
                    {
                        "rank": r,
                        "step": s,
                        "name": f"MatMul_{i}",
                        "op_type": "MatMul",
                        "accelerator_core": "AI_CORE",
                        "start_us": 1e15 + i * 2000,
                        "duration_us": dur,
                        "wait_us": 0.0,
                    }
                )
            rows.append(
                {
                    "rank": r,
                    "step": s,
                    "name": "Add_0",
                    "op_type": "Add",
                    "accelerator_core": "AI_VECTOR_CORE",
                    "start_us": 1e15 + 30000,
                    "duration_us": 100.0,
                    "wait_us": 0.0,
                }
            )
    return rows


def test_rank12_scheduling_with_launch_delays():
    p = make_profile(
        {
            "step_trace": step_rows(16, per_rank={12: {"free": 20_000.0}}),
            "comm_ops": comm_rows(16, late=12),
            "host_dispatch": dispatch_rows(16, slow=12),
        }
    )
    res = run(p, rank=12)
    f = res.findings[0]
    assert f.category is Category.SCHEDULING and f.ranks == (12,)
    assert f.metrics["free_delta_us"] == pytest.approx(20_000.0)
    assert f.estimated_gain_us == pytest.approx(20_000.0)
    assert f.severity is Severity.HIGH
    assert "Free is 20.0 ms" in f.summary
    assert "arrives last" in f.summary
    lt = res.tables["launch_delay"].set_index("rank")
    expected_p90 = float(np.quantile([400.0 + 10 * i for i in range(20)], 0.9))
    assert lt.at[12, "p90_us"] == pytest.approx(expected_p90)
    assert f"p90 {expected_p90:.0f} us" in f.summary
    row = res.table.set_index("component").loc["free_us"]
    assert row["delta_us"] == pytest.approx(20_000.0)
    assert "Free" in f.summary_zh or "空闲" in f.summary_zh


def test_compute_cause_names_operator():
    p = make_profile(
        {
            "step_trace": step_rows(8, steps=2, per_rank={3: {"computing": 10_000.0}}),
            "kernels": kernel_rows(8, slow=3),
        }
    )
    res = run(p, rank=3)
    f = res.findings[0]
    assert f.category is Category.COMPUTE
    od = res.tables["op_deltas"]
    assert od.iloc[0]["op_type"] == "MatMul"
    assert od.iloc[0]["delta_us"] == pytest.approx(5000.0)  # 10 × 500 µs per step
    assert "MatMul" in f.summary


def test_not_slow_rank_says_so():
    p = make_profile({"step_trace": step_rows(8, per_rank={5: {"free": 20_000.0}})})
    res = run(p, rank=2)
    f = res.findings[0]
    assert f.severity is Severity.INFO and "not slow" in f.summary


def test_unknown_rank_names_valid_ranks():
    p = make_profile({"step_trace": step_rows(16)})
    with pytest.raises(ToolArgumentError, match=r"rank 16 does not exist.*0-15"):
        run(p, rank=16)


def test_single_rank():
    res = run(make_profile({"step_trace": step_rows(1)}), rank=0)
    assert not res.findings and "no peers" in res.notes[0]


def test_real_cluster_8rank_rank1(real_samples):
    path = real_samples / "cluster-8rank/cluster_analysis_output/cluster_step_trace_time.csv"
    ranks, _ = read_cluster_csv(path)
    free = {r["rank"]: r["free_us"] for r in ranks}
    peers = sorted(v for k, v in free.items() if k != 1)
    med = (peers[3] + peers[4]) / 2 if len(peers) % 2 == 0 else peers[len(peers) // 2]
    res = run(profile_from_cluster_csv(path), rank=1)
    f = res.findings[0]
    assert f.category is Category.SCHEDULING
    assert f.metrics["free_delta_us"] == pytest.approx(free[1] - med)


def test_scenario_seed_rank12(scenario):
    import json

    from advisor_chat.ingest import load_profile

    path = scenario("seed-rank12")
    key = json.loads((path / "answer_key.json").read_text())
    res = run(load_profile(path), rank=12)
    f = res.findings[0]
    assert f.category is Category.SCHEDULING and f.severity is Severity.HIGH
    assert f.metrics["free_delta_us"] == pytest.approx(
        key["expected_numbers"]["free_excess_us_per_step"], rel=0.02
    )
    assert "arrives last" in f.summary and "launch delays" in f.summary
    assert {"launch_delay", "op_deltas", "trend"} <= set(res.tables)
    assert len(res.tables["trend"]) == key["steps"]
    other = run(load_profile(path), rank=3).findings[0]
    assert other.severity is Severity.INFO and "not slow" in other.summary


def test_scenario_compute_straggler(scenario):
    import json

    from advisor_chat.ingest import load_profile

    path = scenario("compute-straggler-hidden")
    key = json.loads((path / "answer_key.json").read_text())
    r = key["slow_ranks"][0]
    res = run(load_profile(path), rank=r)
    f = res.findings[0]
    assert f.category is Category.COMPUTE
    assert f.metrics["computing_delta_us"] == pytest.approx(
        key["expected_numbers"]["computing_excess_us_per_step"], rel=0.02
    )
    assert res.tables["op_deltas"]["delta_us"].iloc[0] > 0


def test_rank_of_a_waiting_pipeline_stage_is_said_to_wait_not_to_be_fine(real_samples):
    # real PP2 sample: rank 12 (stage 1) spends its Bubble waiting for stage 0
    path = real_samples / "cluster-16rank-pp2/cluster_analysis_output/cluster_step_trace_time.csv"
    ranks, _ = read_cluster_csv(path)
    row = next(r for r in ranks if r["rank"] == 12)
    res = run(profile_from_cluster_csv(path), rank=12)
    f = res.findings[0]
    assert "not slow" not in f.summary and "并不慢" not in f.summary_zh
    assert (
        f"waits {row['bubble_us'] / 1000:.1f} ms per step" in f.summary
        and "pipeline Bubble" in f.summary
    )
    assert "pipeline_bubble" in f.symptom_tags


def test_endpoint_of_a_slow_link_is_said_to_be_on_the_link(scenario):
    import json

    from advisor_chat.ingest import load_profile

    path = scenario("slow-link")
    link = json.loads((path / "answer_key.json").read_text())["slow_link"]
    for r in (link["src_rank"], link["dst_rank"]):
        f = run(load_profile(path), rank=r).findings[0]
        assert (
            f"on the slow {link['transport']} link {link['src_rank']}→{link['dst_rank']}"
            in f.summary
        )
        assert "not slow" not in f.summary and "wait for it" not in f.summary
        assert "慢链路" in f.summary_zh and "其他卡在等它" not in f.summary_zh
