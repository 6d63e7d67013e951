"""Development set 19 kinds against their answer keys (numbers from the simulated timeline).

- ``lora-unfused-adapters``: rank-16 LoRA branches as separate kernels on every rank.
- ``moe-capacity-padding``: MoE layers padding expert inputs to 3x capacity.
- ``nfs-metrics-log-rank``: rank 15 fsyncs a metrics file before every step (Python frames).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.decompose import moe_padding
from advisor_chat.diagnosis.hypotheses import judge
from advisor_chat.diagnosis.rules.lowrank import low_rank_dim
from advisor_chat.ingest import load_profile

# scenario-level evidence of a development set: CI and `tools/test.sh --all` run it
pytestmark = pytest.mark.slow


def _key(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())


def test_low_rank_dims() -> None:
    assert low_rank_dim("4096,4096;16,4096") == 16
    assert low_rank_dim("4096,16;12288,16") == 16
    assert low_rank_dim("4096,4096;4096,4096") is None
    assert low_rank_dim("1,4096,4096;1,4096,64") is None  # 3-D (attention heads): not an adapter


def test_unfused_lora_branches(scenario) -> None:
    path = scenario("lora-unfused-adapters")
    nums = _key(path)["expected_numbers"]
    top = diagnose(load_profile(path, use_cache=False, progress=False)).top()
    assert top is not None and top.id == "cause.job_hotspot.low_rank_adapters"
    m = top.metrics
    assert m["lora_kernels_per_step"] == nums["lora_kernels_per_step"]
    assert m["lora_matmuls_per_step"] == nums["lora_matmuls_per_step"]
    assert m["lora_idle_us_per_step"] == pytest.approx(
        nums["idle_before_lora_us_per_step"], rel=0.05
    )
    assert m["lora_us_per_step"] == pytest.approx(nums["lora_total_us_per_step"], rel=0.05)
    assert f"rank-{nums['lora_rank']}" in top.summary
    assert "LoRA" in top.remedies[0].text and "--lora-fusion" in top.remedies[0].text
    # the element-wise kernels and their launch gaps gone: against the key's re-simulation
    assert top.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.2)


def test_no_low_rank_cause_without_adapters(scenario) -> None:
    d = diagnose(load_profile(scenario("healthy"), use_cache=False, progress=False))
    assert all("low_rank" not in c.id for c in d.causes)


def test_moe_padding_to_capacity(scenario) -> None:
    path = scenario("moe-capacity-padding")
    nums = _key(path)["expected_numbers"]
    profile = load_profile(path, use_cache=False, progress=False)
    mp = moe_padding(profile, profile.ranks)
    assert mp is not None and mp.capacity_factor == nums["capacity_factor"]
    assert mp.padding_share == pytest.approx(nums["padding_share_of_rows"], abs=1e-3)
    assert mp.alltoall_us == pytest.approx(nums["alltoallv_us_per_step"], rel=0.05)
    assert mp.expert_us == pytest.approx(nums["grouped_matmul_us_per_step"], rel=0.05)
    top = diagnose(profile).top()
    assert top is not None and top.id == "cause.exposed_communication"
    assert "capacity" in top.summary and "moe-pad-expert-input-to-capacity" in top.remedies[0].text
    assert top.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.2)


def test_no_moe_padding_without_the_arguments(scenario) -> None:
    profile = load_profile(scenario("moe-hot-expert"), use_cache=False, progress=False)
    assert moe_padding(profile, profile.ranks) is None


def test_a_rank_that_fsyncs_its_metrics_every_step(scenario) -> None:
    path = scenario("nfs-metrics-log-rank")
    key = _key(path)
    d = diagnose(load_profile(path, use_cache=False, progress=False))
    top = d.top()
    assert top is not None and list(top.culprit.ranks) == key["root_cause"]["culprit_ranks"]
    assert "fsync" in top.summary and "python_frame_us" in top.metrics
    assert judge(d, "gc").status == "contradicted"
