"""Recovery of the generated scenarios' answer keys by compare_ops, host_dispatch, step_trend,
compare_profiles and the full report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.analyzers import FindingKind, Severity
from advisor_chat.analyzers.compare_ops import CompareOpsParams, compare_ops
from advisor_chat.analyzers.compare_profiles import CompareProfilesParams, compare_profiles
from advisor_chat.analyzers.host_dispatch import HostDispatchParams, host_dispatch
from advisor_chat.analyzers.step_trend import StepTrendParams, step_trend
from advisor_chat.ingest import load_profile
from advisor_chat.reporting import run_report, to_json

pytestmark = pytest.mark.slow  # generates and loads synthetic clusters (~40 s in all)


def _key(root: Path) -> dict:
    return json.loads((root / "answer_key.json").read_text())


def test_matmul_shape_regression(scenario) -> None:
    root = scenario("matmul-shape-regression")
    key = _key(root)
    res = compare_ops(load_profile(root), CompareOpsParams())
    assert res.metrics["rank_b"] == key["slow_ranks"][0]
    regs = [f for f in res.findings if f.kind is FindingKind.OP_REGRESSION]
    assert regs and regs[0].ranks == tuple(key["slow_ranks"])
    top = res.tables["by_shape"].iloc[0]
    assert top["input_shapes"] == key["op"]["input_shapes"]
    assert top["op_type"] == key["op"]["op_type"]
    assert top["count_a"] == top["count_b"]
    nums = key["expected_numbers"]
    assert regs[0].metrics["avg_us_slow"] == pytest.approx(
        nums["slow_rank_avg_us_at_shape"], rel=0.01
    )
    assert key["op"]["input_shapes"] in regs[0].summary
    # only the planted shape regresses
    assert len(regs) == 1


def test_seed_rank12_host_dispatch(scenario) -> None:
    root = scenario("seed-rank12")
    nums = _key(root)["expected_numbers"]
    res = host_dispatch(load_profile(root), HostDispatchParams())
    t = res.table.set_index("rank")
    # the H2D flow (launch delay) mean of rank 12 vs the others, from the answer key
    assert t.loc[12, "launch_delay_p50_us"] < 0.5 * t["launch_delay_p50_us"].median()
    assert t.loc[12, "free_us"] == pytest.approx(nums["slow_rank_free_us_per_step"], rel=0.05)
    hb = [f for f in res.findings if f.id == "host_dispatch.host_bound.host_wait"]
    assert len(hb) == 1 and hb[0].ranks == (12,)
    assert hb[0].severity is Severity.HIGH
    assert "launch_delay" in hb[0].symptom_tags and "host_bound" in hb[0].symptom_tags
    assert hb[0].estimated_gain_us == pytest.approx(nums["free_excess_us_per_step"], rel=0.05)
    assert t.loc[12, "host_wait_ratio"] > 0.5 and t.drop(index=12)["host_wait_ratio"].max() < 0.1


def test_dataloader_stall(scenario) -> None:
    root = scenario("dataloader-stall")
    key = _key(root)
    res = host_dispatch(load_profile(root), HostDispatchParams())
    dl = [f for f in res.findings if f.kind is FindingKind.DATALOADER]
    assert len(dl) == 1
    assert dl[0].ranks == tuple(range(key["ranks"]))
    for s in key["expected_numbers"]["stall_steps"]:
        assert str(s) in dl[0].summary
    assert "dataloader_stall" in dl[0].symptom_tags


def test_degradation(scenario) -> None:
    root = scenario("degradation")
    key = _key(root)
    res = step_trend(load_profile(root), StepTrendParams())
    deg = [f for f in res.findings if f.kind is FindingKind.DEGRADATION]
    assert len(deg) == 1 and deg[0].ranks == tuple(key["slow_ranks"])
    nums = key["expected_numbers"]
    assert deg[0].metrics["slope_us_per_step"] == pytest.approx(
        nums["step_us_slope_per_step"], rel=0.05
    )
    pr = res.tables["per_rank"].set_index("rank")
    slow = key["slow_ranks"][0]
    assert pr.loc[slow, "own_slope_us_per_step"] == pytest.approx(
        nums["slow_rank_free_us_slope_per_step"], rel=0.1
    )


def test_cann_upgrade_pair(scenario) -> None:
    root = scenario("cann-upgrade-pair")
    nums = _key(root)["expected_numbers"]
    res = compare_profiles(
        load_profile(root / "after"),
        CompareProfilesParams(),
        baseline=load_profile(root / "before"),
    )
    h = next(f for f in res.findings if f.id == "compare_profiles.profile_diff.hccl_op_count")
    assert h.metrics["base_hccl_ops_per_step"] == pytest.approx(nums["before_hccl_ops_per_step"])
    assert h.metrics["new_hccl_ops_per_step"] == pytest.approx(nums["after_hccl_ops_per_step"])
    assert h.metrics["hccl_count_ratio"] == pytest.approx(nums["hccl_ops_ratio"], rel=0.01)
    assert {"hccl_op_count_increase", "cann_upgrade"} <= set(h.symptom_tags)
    assert res.metrics["verdict_code"] == 1
    assert res.metrics["base_step_us"] == pytest.approx(nums["before_step_us_median"], rel=0.02)
    assert res.metrics["new_step_us"] == pytest.approx(nums["after_step_us_median"], rel=0.02)
    versions = res.tables["versions"].set_index("field")
    assert versions.loc["cann_version", "new"] == nums["after_cann_version"]


def test_report_with_baseline_and_rank(scenario) -> None:
    root = scenario("cann-upgrade-pair")
    rep = run_report(
        load_profile(root / "after"), baseline=load_profile(root / "before"), rank=0, strict=True
    )
    status = {r.name: r.status for r in rep.runs}
    assert status["compare_profiles"] == "ok" and status["explain_rank"] == "ok"
    assert to_json(rep)["baseline"]["root"].endswith("before")


def test_healthy_has_no_high_finding(scenario) -> None:
    root = scenario("healthy")
    rep = run_report(load_profile(root), strict=True)
    mine = [
        f
        for f in rep.findings
        if f.id.split(".")[0] in ("compare_ops", "host_dispatch", "step_trend")
    ]
    assert not [f for f in mine if f.severity is Severity.HIGH], [f.summary for f in mine]


def test_compute_straggler_is_uniform_not_shape(scenario) -> None:
    root = scenario("compute-straggler-hidden")
    key = _key(root)
    res = compare_ops(load_profile(root), CompareOpsParams())
    regs = [f for f in res.findings if f.kind is FindingKind.OP_REGRESSION]
    slow = key["slow_ranks"][0]
    assert [f.id for f in regs] == [f"compare_ops.op_regression.r{slow}.all_ops"]
    assert regs[0].metrics["overall_ratio"] == pytest.approx(1.25, rel=0.03)
