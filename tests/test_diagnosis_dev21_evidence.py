"""Development set 21 kinds against their answer keys (numbers from the simulated timeline).

- ``vpp-few-microbatches``: balanced pipeline stages idling in the schedule's fill and drain.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.ingest import load_profile

# scenario-level evidence of a development set: CI and `tools/test.sh --all` run it
pytestmark = pytest.mark.slow


def _key(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())


def test_balanced_pipeline_bubble_is_the_schedule(scenario) -> None:
    path = scenario("vpp-few-microbatches")
    nums = _key(path)["expected_numbers"]
    d = diagnose(load_profile(path, use_cache=False, progress=False))
    top = d.top()
    assert top is not None and top.id == "cause.pipeline_schedule"
    # no stage is blamed besides it (the wait attribution's stage order is the schedule's)
    assert [c.id for c in d.causes if c.mechanism.value == "pipeline_imbalance"] == [top.id]
    assert top.culprit.kind == "job" and not top.culprit.ranks
    m = top.metrics
    assert m["micro_batches_per_step"] == nums["micro_batches_per_step"]
    assert m["virtual_stages"] == nums["virtual_stages"]
    assert m["micro_batches_per_step_more"] == nums["micro_batches_per_step_fixed"]
    # (p - 1) / (v*m + p - 1), the key's ideal fraction
    assert m["ideal_bubble_fraction"] == pytest.approx(nums["ideal_bubble_fraction"], abs=1e-3)
    assert m["not_computing_share"] == pytest.approx(nums["not_computing_share"], rel=0.02)
    assert m["time_per_micro_batch_us"] == pytest.approx(nums["time_per_micro_batch_us"], rel=0.02)
    # the chunk model against the key's re-simulation with 16 micro-batches
    assert m["time_per_micro_batch_us_more"] == pytest.approx(
        nums["time_per_micro_batch_us_fixed"], rel=0.05
    )
    assert "--global-batch-size" in top.remedies[0].text


def test_an_imbalanced_pipeline_still_blames_its_stage(scenario) -> None:
    top = diagnose(
        load_profile(scenario("pipeline-stage-imbalance"), use_cache=False, progress=False)
    ).top()
    assert top is not None and top.culprit.kind == "stage"


def test_operator_computed_on_the_host_cpu(scenario) -> None:
    """aten::isin falls back to the CPU every step: named from the trace's cpu_op frames."""
    path = scenario("isin-cpu-fallback")
    nums = _key(path)["expected_numbers"]
    top = diagnose(load_profile(path, use_cache=False, progress=False)).top()
    assert top is not None and top.culprit.kind == "job"
    assert "aten::isin" in top.summary and "aten::isin" in top.summary_zh
    assert "falling back to the CPU" in top.summary
    assert top.remedies[0].text.startswith("Keep aten::isin on the NPU")
    # the operator's own CPU time lies inside the frame (the copies around it too)
    assert top.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.2)
    assert top.gain_us >= 0.9 * nums["host_op_us_median"]


def test_a_short_host_operator_with_launches_is_not_host_work(tmp_path) -> None:
    """A host operator that launches kernels is dispatching, not computing on the CPU."""
    import numpy as np
    import pandas as pd

    from advisor_chat.diagnosis.python_work import _chains

    frames = pd.DataFrame(
        {
            "start_us": [0.0, 100.0],
            "dur_us": [5000.0, 4000.0],
            "frame": ["aten::isin", "aten::matmul"],
        }
    )
    # a copy at 10 µs inside isin; a launch at 200 µs inside matmul (and isin)
    calls = np.array([10.0, 200.0])
    launches = np.array([200.0])
    chains = _chains(frames.iloc[[0]].reset_index(drop=True), np.array([10.0]), np.array([]))
    assert chains and chains[0][1] == ("aten::isin",)  # only a copy inside: CPU work
    assert _chains(frames, calls, launches) == []  # a launch inside both: neither is


def test_a_host_whose_own_calls_crawl_is_slowed_down(scenario) -> None:
    """Rank 13's host swaps: its launch calls take ms, its idle rises and falls back."""
    path = scenario("host-swap-rank")
    nums = _key(path)["expected_numbers"]
    d = diagnose(load_profile(path, use_cache=False, progress=False))
    c = next(
        c
        for c in d.causes
        if nums["culprit_rank"] in c.culprit.ranks
        or any(r == nums["culprit_rank"] for _, r in c.culprit.events)
    )
    assert "launch calls crawl" in c.summary and "先增后减" in c.summary_zh
    assert f"in step {nums['peak_step']}" in c.summary
    assert "swap" in c.remedies[0].text and f"rank {nums['culprit_rank']}" in c.remedies[0].text


def test_a_group_whose_collective_runs_on_the_host(scenario) -> None:
    """Ranks 3 and 11 all-reduce over gloo: the host frame names it, HCCL is the fix."""
    path = scenario("gloo-dp-group")
    rc = _key(path)["root_cause"]
    top = diagnose(load_profile(path, use_cache=False, progress=False)).top()
    assert top is not None and sorted(top.culprit.ranks) == sorted(rc["culprit_ranks"])
    assert "gloo:all_reduce" in top.summary and "TCP" in top.summary
    assert "backend='hccl'" in top.remedies[0].text


def test_a_plan_to_change_a_timeout_setting_is_not_a_hang_question() -> None:
    from advisor_chat.agent.parse import parse_question

    q = parse_question("what do i fix first? was going to bump HCCL_CONNECT_TIMEOUT on both nodes")
    assert q.intent == "fix_first"
    assert parse_question("what should I fix first? the job hangs").intent == "hccl_timeout"
