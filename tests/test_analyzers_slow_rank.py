from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _analyzers_a_helpers import make_profile, step_rows

from advisor_chat.analyzers import get_analyzer
from advisor_chat.analyzers._common import DIXON_CRITICAL_995, dixon_statistic, low_outlier
from advisor_chat.analyzers.base import Category, Severity
from advisor_chat.errors import ToolArgumentError


def comm_rows(ranks: int, late: int | None, ops: int = 10, steps: int = 3, seed: int = 0):
    """Collectives where ``late`` arrives last: it waits ~0, the others ~20 ms (+ noise)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(1, steps + 1):
        for i in range(ops):
            for r in range(ranks):
                wait = 0.01 if r == late else 20.0 + rng.normal(0, 1.0)
                rows.append(
                    {
                        "rank": r,
                        "group": "g1",
                        "step": s,
                        "op_name": f"hcom_allReduce__{i}_{s}",
                        "op_type": "allreduce",
                        "comm_kind": "collective",
                        "start_us": 1e15 + s * 1e6 + i * 1e3,
                        "elapse_ms": wait + 2.0,
                        "transit_ms": 2.0,
                        "wait_ms": wait,
                        "synchronization_ms": wait * 0.9,
                        "idle_ms": 0.0,
                        "wait_ratio": wait / (wait + 2.0),
                        "synchronization_ratio": 0.9 * wait / (wait + 2.0),
                    }
                )
    return rows


def run(profile, **kw):
    spec = get_analyzer("slow_rank")
    return spec.run(profile, spec.params(**kw))


def test_dixon_table_matches_rorabacher():
    # Rorabacher (1991), r10, one-tailed alpha = 0.005
    for n, q in {3: 0.994, 4: 0.926, 5: 0.821, 6: 0.740, 7: 0.680}.items():
        assert abs(DIXON_CRITICAL_995[n] - q) < 0.01
    assert set(DIXON_CRITICAL_995) == set(range(3, 101))


def test_low_outlier_definition():
    x = np.array([10.0, 10.2, 9.9, 10.1, 0.5, 10.05, 9.95, 10.15])
    assert low_outlier(x) == 4
    assert dixon_statistic(np.sort(x)) > 0.9
    assert low_outlier(np.array([10.0, 10.2, 9.9, 10.1, 9.8, 10.05])) is None
    # two levels: a lone value far below counts, a rounding-size dip does not
    assert low_outlier(np.array([20.0] * 7 + [0.01])) == 7
    assert low_outlier(np.array([20.0] * 7 + [19.99])) is None
    big = np.r_[np.random.default_rng(1).normal(20, 1, 200), 0.0]
    assert low_outlier(big) == 200  # 3-sigma branch (n > 100)


def test_known_answer_rank5_free_and_smallest_waits():
    p = make_profile(
        {
            "step_trace": step_rows(8, per_rank={5: {"free": 20_000.0}}),
            "comm_ops": comm_rows(8, late=5),
        }
    )
    res = run(p)
    slow = res.table[res.table["slow"]]
    assert slow["rank"].tolist() == [5]
    f = res.findings[0]
    assert f.ranks == (5,)
    assert f.category is Category.SCHEDULING
    assert f.metrics["free_delta_us"] == pytest.approx(20_000.0)
    assert f.metrics["votes"] == 30 and f.metrics["ops_tested"] == 30
    assert f.estimated_gain_us == pytest.approx(20_000.0)
    # 20 ms of a 125 ms step = 16% -> High
    assert f.severity is Severity.HIGH
    assert "rank 5" in f.summary.lower() and "20.0 ms" in f.summary
    # fast ranks that wait most are named
    assert "wait most" in f.summary


def test_comm_only_evidence_without_spread():
    p = make_profile({"step_trace": step_rows(16), "comm_ops": comm_rows(16, late=12)})
    res = run(p)
    assert res.table.loc[res.table["slow"], "rank"].tolist() == [12]


def test_level0_without_comm_ops_uses_spreads():
    p = make_profile({"step_trace": step_rows(8, per_rank={3: {"computing": 15_000.0}})})
    res = run(p)
    assert res.findings[0].ranks == (3,)
    assert res.findings[0].category is Category.COMPUTE
    assert any("communication evidence missing" in n for n in res.notes)


def test_healthy_no_slow_rank_and_single_rank():
    res = run(make_profile({"step_trace": step_rows(8), "comm_ops": comm_rows(8, late=None)}))
    assert not res.findings and not res.table["slow"].any()
    assert any("no slow rank" in n for n in res.notes)
    res1 = run(make_profile({"step_trace": step_rows(1)}))
    assert not res1.findings


def test_bad_group_and_step():
    p = make_profile({"step_trace": step_rows(4), "comm_ops": comm_rows(4, late=1)})
    with pytest.raises(ToolArgumentError, match="groups are"):
        run(p, group="nope")
    with pytest.raises(ToolArgumentError, match="steps are"):
        run(p, step=99)


def test_nan_waits_fall_back_to_elapse():
    rows = comm_rows(8, late=2)
    for r in rows:
        r["wait_ms"] = float("nan")
    p = make_profile({"step_trace": step_rows(8), "comm_ops": pd.DataFrame(rows)})
    res = run(p)
    assert res.table.loc[res.table["slow"], "rank"].tolist() == [2]


def test_scale_1024_ranks():
    # correctness at scale (speed is measured by the benchmark, not asserted here)
    p = make_profile(
        {
            "step_trace": step_rows(1024, steps=2, per_rank={700: {"free": 30_000.0}}),
            "comm_ops": comm_rows(1024, late=700, ops=3, steps=2),
        }
    )
    res = run(p)
    assert res.findings[0].ranks == (700,)
    assert res.findings[0].metrics["votes"] == 6  # 3-sigma branch (n > 100) on every op
    assert (res.tables["votes_by_op"]["method"] == "3sigma").all()


def _key_and_result(scenario, name):
    import json

    from advisor_chat.ingest import load_profile

    path = scenario(name)
    key = json.loads((path / "answer_key.json").read_text())
    return key, run(load_profile(path))


@pytest.mark.parametrize(
    "name", ["seed-rank12", "compute-straggler-hidden", "hccl-wait-skew", "slow-link", "healthy"]
)
def test_scenarios_slow_ranks(scenario, name):
    key, res = _key_and_result(scenario, name)
    assert res.table.loc[res.table["slow"], "rank"].tolist() == key["slow_ranks"]
    if key["slow_ranks"]:
        f = res.findings[0]
        assert list(f.ranks) == key["slow_ranks"]
        if key["category"] in ("compute", "scheduling"):
            assert f.category.value == key["category"]
    else:
        assert not res.findings


def test_scenario_seed_rank12_numbers(scenario):
    key, res = _key_and_result(scenario, "seed-rank12")
    f = res.findings[0]
    exp = key["expected_numbers"]
    assert f.metrics["free_delta_us"] == pytest.approx(exp["free_excess_us_per_step"], rel=0.02)
    row = res.table.set_index("rank")
    assert row["wait_ms"].idxmin() == exp["min_wait_rank"]
    assert row.at[12, "votes"] >= 0.5 * row.at[12, "ops_tested"]


def test_real_cluster_8rank_rank1_arrives_last(real_samples):
    import json

    from advisor_chat.ingest import load_profile

    data = json.loads(
        (
            real_samples / "cluster-8rank/cluster_analysis_output/cluster_communication.json"
        ).read_text()
    )
    ops = data["(0, 1)"]["step"]
    waits = {
        op: {r: v["Communication Time Info"]["Wait Time(ms)"] for r, v in per.items()}
        for op, per in ops.items()
        if op != "Total Op Info"
    }
    # in every broadcast rank 1 waits least: it arrives last
    assert all(min(w, key=w.get) == "1" for w in waits.values())
    res = run(load_profile(real_samples / "cluster-8rank", use_cache=False))
    f = next(f for f in res.findings if f.ranks == (1,))
    assert f.metrics["votes"] == len(waits)
    assert "rank 0" in f.summary  # the rank that waits most for it
    assert res.findings[0].ranks == (1,)  # largest Free excess first


def test_a_one_step_stall_is_said_as_an_event_not_a_slow_rank_on_average() -> None:
    # rank 2 idles 600 ms in step 2 only (of 4): its mean Free excess (150 ms) clears the 5%
    # threshold, but it is slow in 1 of 4 steps: the finding says so
    rows = step_rows(6, steps=4)
    for row in rows:
        if row["rank"] == 2 and row["step"] == 2:
            row["free_us"] += 600_000.0
            row["step_us"] += 600_000.0
    res = get_analyzer("slow_rank").run(make_profile({"step_trace": rows}))
    (f,) = [x for x in res.findings if x.id == "slow_rank.slow_rank.r2"]
    assert "slow only in step(s) 2 (1 of 4 steps" in f.summary and "not on average" in f.summary
    assert "只在第 2 步慢" in f.summary_zh
    assert f.metrics["event_steps_count"] == 1
    assert f.metrics["free_delta_us"] == pytest.approx(150_000.0)
