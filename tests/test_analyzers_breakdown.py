from __future__ import annotations

import json
import statistics

import pytest
from _analyzers_a_helpers import make_profile, read_cluster_csv, step_rows

from advisor_chat.analyzers import get_analyzer
from advisor_chat.analyzers.base import Category, Severity
from advisor_chat.errors import ToolArgumentError
from advisor_chat.symptoms import unknown_tags


def run(p, **kw):
    spec = get_analyzer("cluster_breakdown")
    return spec.run(p, spec.params(**kw))


def test_known_answer_free_spread_is_scheduling():
    # 8 ranks, step 125 ms; rank 5 has +20 ms Free -> gap 20 ms = 16 % of ~127.5 ms mean step
    p = make_profile({"step_trace": step_rows(8, per_rank={5: {"free": 20_000.0}})})
    res = run(p)
    f = res.findings[0]
    assert f.category is Category.SCHEDULING and f.ranks == (5,)
    assert f.metrics["gap_us"] == pytest.approx(20_000.0)
    mean_step = (7 * 125_000 + 145_000) / 8
    assert f.metrics["gap_share"] == pytest.approx(20_000 / mean_step)
    assert f.severity is Severity.HIGH
    assert f.estimated_gain_us == pytest.approx(20_000.0)  # rank 5 back to the median
    assert "20.0 ms" in f.summary and f.summary_zh
    t = res.table
    assert len(t) == 24 and {"free_share", "computing_share", "bubble_share"} <= set(t.columns)
    assert t.loc[(t["rank"] == 5), "free_share"].iloc[0] == pytest.approx(25_000 / 145_000)
    for f in res.findings:
        assert not unknown_tags(f.symptom_tags)


def test_compute_spread_and_ranking_by_gap():
    p = make_profile(
        {"step_trace": step_rows(8, per_rank={2: {"computing": 30_000.0}, 6: {"free": 10_000.0}})}
    )
    res = run(p)
    cats = [f.category for f in res.findings if f.kind.value == "bottleneck"]
    assert cats[:2] == [Category.COMPUTE, Category.SCHEDULING]


def test_host_bound_free_over_10_percent():
    p = make_profile({"step_trace": step_rows(4, free=40_000.0)})
    res = run(p)
    f = next(f for f in res.findings if f.kind.value == "host_bound")
    assert f.metrics["free_share_mean"] == pytest.approx(40_000 / 160_000)
    assert f.severity is Severity.HIGH


def test_healthy_no_high_and_single_rank_and_step_filter():
    # balanced, 4 % non-overlapped communication, 4 % Free
    res = run(make_profile({"step_trace": step_rows(8, comm=5_000.0)}))
    assert not [f for f in res.findings if f.severity is Severity.HIGH]
    res1 = run(make_profile({"step_trace": step_rows(1, free=1_000.0)}))
    assert any("single rank" in n for n in res1.notes)
    assert len(run(make_profile({"step_trace": step_rows(2)}), step=2).table) == 2
    with pytest.raises(ToolArgumentError):
        run(make_profile({"step_trace": step_rows(2)}), step=9)
    empty = run(make_profile({}))
    assert empty.table.empty and "not enough signal" in empty.notes[0]


def test_nan_components_are_zero():
    rows = step_rows(4)
    rows[0]["free_us"] = float("nan")
    res = run(make_profile({"step_trace": rows}))
    assert res.table["free_us"].notna().all()


def _real(real_samples, name):
    from advisor_chat.ingest import load_profile

    path = real_samples / name
    ranks, stages = read_cluster_csv(path / "cluster_analysis_output/cluster_step_trace_time.csv")
    return load_profile(path, use_cache=False), ranks, stages


def test_real_16rank_pp2_bubble_and_stage0_comm(real_samples):
    prof, ranks, _ = _real(real_samples, "cluster-16rank-pp2")
    res = run(prof)
    ids = [f.id for f in res.findings]
    bubble = next(f for f in res.findings if "pipeline_bubble" in f.id)
    stage1 = [r for r in ranks if r["rank"] >= 8]
    assert bubble.ranks == tuple(range(8, 16))
    assert bubble.metrics["bubble_us_mean"] == pytest.approx(
        statistics.mean(r["bubble_us"] for r in stage1)
    )
    assert bubble.severity is Severity.HIGH
    comm = next(f for f in res.findings if "communication_share_stage_0" in f.id)
    stage0 = [r for r in ranks if r["rank"] < 8]
    lo = min(
        stage0, key=lambda r: r["communication_not_overlapped_exclude_receive_us"] / r["step_us"]
    )
    assert comm.metrics["min_comm_not_overlapped_us"] == pytest.approx(
        lo["communication_not_overlapped_exclude_receive_us"]
    )
    assert "cluster_breakdown.host_bound.free_share" in ids
    # spreads are taken within stages: no compute problem (computing gap < 5 % in each stage)
    assert not any("compute" in i for i in ids)


def test_real_8rank_scheduling_rank1(real_samples):
    prof, ranks, _ = _real(real_samples, "cluster-8rank")
    res = run(prof)
    sched = next(
        f
        for f in res.findings
        if f.category is Category.SCHEDULING and f.kind.value == "bottleneck"
    )
    free = {r["rank"]: r["free_us"] for r in ranks}
    assert sched.ranks == (max(free, key=free.get),) == (1,)
    assert sched.metrics["gap_us"] == pytest.approx(max(free.values()) - min(free.values()))
    mean_step = statistics.mean(
        r["computing_us"] + r["communication_not_overlapped_us"] + r["free_us"] for r in ranks
    )
    assert sched.metrics["gap_share"] == pytest.approx(
        sched.metrics["gap_us"] / mean_step, rel=0.01
    )
    hb = next(f for f in res.findings if f.kind.value == "host_bound")
    assert hb.metrics["free_share_max"] == pytest.approx(free[1] / (ranks[1]["step_us"]), rel=1e-6)


@pytest.mark.parametrize(
    "name", ["seed-rank12", "compute-straggler-hidden", "comm-bound-no-overlap", "healthy"]
)
def test_scenarios_category(scenario, name):
    from advisor_chat.ingest import load_profile

    path = scenario(name)
    key = json.loads((path / "answer_key.json").read_text())
    res = run(load_profile(path))
    bottlenecks = [f for f in res.findings if f.kind.value == "bottleneck"]
    if key["category"] == "none":
        assert not [f for f in res.findings if f.severity is Severity.HIGH]
        return
    top = bottlenecks[0]
    assert top.category.value == key["category"]
    if key["slow_ranks"]:
        assert top.ranks == tuple(key["slow_ranks"])


MINE = [
    "data_quality",
    "env_check",
    "cluster_breakdown",
    "slow_rank",
    "explain_rank",
    "slow_link",
    "communication",
]


def test_findings_contract_on_seed_scenario(scenario):
    """Every finding: known tags, unique stable ids, Chinese summary, evidence with a source;
    every main-table column is documented in the analyzer's docstring."""
    from advisor_chat.ingest import load_profile

    prof = load_profile(scenario("seed-rank12"))
    ids: list[str] = []
    for name in MINE:
        spec = get_analyzer(name)
        params = spec.params(rank=12) if name == "explain_rank" else spec.params()
        res = spec.run(prof, params)
        again = spec.run(prof, params)
        assert [f.id for f in res.findings] == [f.id for f in again.findings]
        for f in res.findings:
            assert f.id.startswith(f"{name}.{f.kind.value}.")
            assert not unknown_tags(f.symptom_tags), f.id
            assert f.summary and f.summary_zh, f.id
            assert f.evidence and all(e.source for e in f.evidence), f.id
            ids.append(f.id)
        doc = spec.func.__doc__ or ""
        for col in res.table.columns:
            assert f"``{col}``" in doc, (name, col)
    assert len(ids) == len(set(ids))
