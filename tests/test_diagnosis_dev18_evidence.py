"""Development set 18 kinds against their answer keys (numbers from the simulated timeline).

- ``fp32-vocab-cross-entropy``: the loss over an fp32 copy of the full-vocabulary logits.
- ``fp16-overflow-skipped-steps``: steps in which every rank skips the optimizer update.
- ``grad-clip-per-param-norm``: one norm, one tiny all-reduce and one host wait per parameter.
- ``hccl-algo-node-mismatch``: node 1 runs another HCCL_ALGO and moves 2.2x the data.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.context import build_context
from advisor_chat.diagnosis.engine import _run, case_for
from advisor_chat.diagnosis.rules.precision import fp32_path
from advisor_chat.diagnosis.rules.skipped import skipped_steps
from advisor_chat.ingest import load_profile

# scenario-level evidence of a development set: CI and `tools/test.sh --all` run it
pytestmark = pytest.mark.slow


def _nums(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())["expected_numbers"]


def _ctx(profile):
    return build_context(profile, _run(profile, None))


def test_fp32_loss_path_and_its_cause(scenario) -> None:
    path = scenario("fp32-vocab-cross-entropy")
    nums = _nums(path)
    profile = load_profile(path, use_cache=False, progress=False)
    fp = fp32_path(_ctx(profile))
    assert fp is not None and fp.half == "DT_BF16"
    assert {"LogSoftmaxV2", "LogSoftmaxGrad", "NLLLoss", "NLLLossGrad"} == set(fp.ops)
    assert fp.shape.endswith(str(nums["vocab_size"]))
    assert fp.us == pytest.approx(nums["fp32_loss_us_per_step"], rel=0.05)
    assert fp.casts_us == pytest.approx(nums["cast_us_per_step"], rel=0.05)
    top = diagnose(profile).top()
    assert top is not None and top.id == "cause.job_hotspot.fp32"
    assert top.culprit.kind == "job" and top.culprit.operator == "LogSoftmaxV2"
    assert "cross-entropy" in top.remedies[0].text and "交叉熵" in top.remedies[0].text_zh
    # the Casts gone and half the bytes: against the key's re-simulation with a fused bf16 loss
    assert top.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.25)
    assert case_for(top) == "fp32-loss-full-vocab"


@pytest.mark.parametrize("name", ["eager-rmsnorm-rope", "healthy"])
def test_no_fp32_cause_where_it_is_not_a_separate_cost(scenario, name: str) -> None:
    # an unfused RMSNorm computing in fp32 is the hotspot cause already; a healthy bf16 run has
    # no fp32 path worth a cause
    d = diagnose(load_profile(scenario(name), use_cache=False, progress=False))
    assert all(c.id != "cause.job_hotspot.fp32" for c in d.causes)


def test_skipped_updates_in_overflow_steps(scenario) -> None:
    path = scenario("fp16-overflow-skipped-steps")
    nums = _nums(path)
    profile = load_profile(path, use_cache=False, progress=False)
    sk = skipped_steps(_ctx(profile))
    assert sk is not None and list(sk.steps) == nums["overflow_steps"]
    assert len(sk.ops) == nums["optimizer_ops_per_normal_step"] and sk.fp16
    assert sk.optimizer_us == pytest.approx(nums["optimizer_us_per_normal_step"], rel=0.05)
    top = diagnose(profile).top()
    assert top is not None and top.id == "cause.skipped_update" and top.culprit.kind == "job"
    m = top.metrics
    assert m["time_per_update_us"] == pytest.approx(nums["time_per_update_us"], rel=0.01)
    assert m["saving_us_per_update"] == pytest.approx(nums["saving_us_per_update"], rel=0.02)
    assert m["skipped_time_share"] == pytest.approx(nums["wasted_share_of_time"], abs=0.005)
    assert "bf16" in top.remedies[0].text and case_for(top) == "overflow-skipped-steps"


@pytest.mark.parametrize("name", ["healthy", "dataloader-stall"])
def test_no_skipped_steps_when_every_step_updates(scenario, name: str) -> None:
    profile = load_profile(scenario(name), use_cache=False, progress=False)
    assert skipped_steps(_ctx(profile)) is None


def test_per_parameter_norm_loop(scenario) -> None:
    path = scenario("grad-clip-per-param-norm")
    nums = _nums(path)
    profile = load_profile(path, use_cache=False, progress=False)
    d = diagnose(profile)
    c = next(c for c in d.causes if c.id == "cause.exposed_communication")
    assert "per_tensor_sync" in c.symptom_tags
    assert c.metrics["tiny_collectives_per_step"] == nums["clip_allreduces_per_step"]
    # from the first norm to the last all-reduce; the key's span also holds the Muls after it
    assert c.metrics["per_tensor_loop_us_per_step"] == pytest.approx(
        nums["clip_us_per_step"], rel=0.15
    )
    assert f"{nums['host_syncs_per_step']} synchronize calls" in c.summary
    first = c.remedies[0]
    assert "clip_grad_norm_" in first.text and first.gain_us == c.gain_us
    assert c.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.25)
    assert case_for(c) is None


def test_a_node_with_its_own_hccl_setting(scenario) -> None:
    path = scenario("hccl-algo-node-mismatch")
    nums = _nums(path)
    profile = load_profile(path, use_cache=False, progress=False)
    d = diagnose(profile)
    top = d.top()
    assert top is not None and list(top.culprit.ranks) == nums["culprit_ranks"]
    assert "env_differs" in top.symptom_tags
    assert top.metrics["transfer_mb_per_step"] == pytest.approx(
        nums["culprit_transfer_mb_per_step"], rel=0.02
    )
    assert top.metrics["transfer_mb_per_step_peer"] == pytest.approx(
        nums["others_transfer_mb_per_step"], rel=0.02
    )
    assert "HCCL_ALGO" in top.summary and top.remedies[0].text.startswith("Set HCCL_ALGO")
    assert case_for(top) == "hccl-config-mismatch"
    # the setting is that node's cause, not a job-wide one the exposed communication quotes
    for c in d.causes:
        if c.id == "cause.exposed_communication":
            assert "different environments" not in c.summary
