"""Development set 20 kinds against their answer keys (numbers from the simulated timeline).

- ``inline-eval-steps``: an evaluation pass (forward only) every few steps inside the loop.
- ``tied-embedding-regather``: a tied embedding table all-gathered twice per step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.context import build_context
from advisor_chat.diagnosis.decompose import repeated_collective
from advisor_chat.diagnosis.engine import _run
from advisor_chat.diagnosis.rules.stepwork import slow_steps
from advisor_chat.ingest import load_profile

# scenario-level evidence of a development set: CI and `tools/test.sh --all` run it
pytestmark = pytest.mark.slow


def _key(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())


def test_evaluation_steps_are_forward_only_extra_work(scenario) -> None:
    path = scenario("inline-eval-steps")
    nums = _key(path)["expected_numbers"]
    profile = load_profile(path, use_cache=False, progress=False)
    ss = slow_steps(build_context(profile, _run(profile, None)))
    assert ss is not None
    assert list(ss.steps) == nums["eval_steps"]
    assert ss.interval == nums["eval_interval"]
    assert ss.forward_passes == nums["eval_iters"]
    assert ss.step_us_slow == pytest.approx(nums["step_us_eval_steps_median"], rel=0.05)
    assert ss.step_us_other == pytest.approx(nums["step_us_train_steps_median"], rel=0.05)
    # FlashAttention's forward runs more often; its backward as often as in the other steps
    fa = next(o for o in ss.ops if o.op_type == "FlashAttentionScore")
    assert fa.n_slow == nums["flash_attention_fwd_per_eval_step"]
    assert fa.n_other == nums["flash_attention_fwd_per_train_step"]
    assert all(a == b for _, a, b in ss.backward)
    top = diagnose(profile).top()
    assert top is not None and top.id == "cause.slow_steps"
    assert list(top.steps) == nums["eval_steps"]
    assert "--eval-interval" in top.remedies[0].text
    assert top.gain_us == pytest.approx(nums["saving_us_per_step_average"], rel=0.2)


def test_no_slow_steps_in_a_steady_job(scenario) -> None:
    for name in ("healthy", "throttle-onset", "rotating-stalls"):
        profile = load_profile(scenario(name), use_cache=False, progress=False)
        assert slow_steps(build_context(profile, _run(profile, None))) is None, name


def test_tied_embedding_gathered_twice(scenario) -> None:
    path = scenario("tied-embedding-regather")
    nums = _key(path)["expected_numbers"]
    profile = load_profile(path, use_cache=False, progress=False)
    rc = repeated_collective(profile, profile.ranks)
    assert rc is not None and rc.op_type == "allgather"
    assert rc.per_step == nums["embedding_allgathers_per_step"]
    assert rc.elapse_us == pytest.approx(nums["extra_allgather_us_median"], rel=0.05)
    # the operators after the two gathers both read the [vocab, hidden] table
    shape = f"{nums['vocab_size']},{nums['hidden_size']}"
    assert len(rc.consumers) == 2 and all(shape in c[1] for c in rc.consumers)
    top = diagnose(profile).top()
    assert top is not None and top.id == "cause.exposed_communication"
    assert "twice per step" in top.summary and "两次" in top.summary_zh
    assert top.remedies[0].text.startswith("Gather the")
    assert top.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.2)


def test_equal_gradient_buckets_are_not_a_repeated_tensor(scenario) -> None:
    # DDP reduces its gradient buckets in equal sizes: a reduction is never "the same tensor"
    profile = load_profile(scenario("healthy"), use_cache=False, progress=False)
    assert repeated_collective(profile, profile.ranks) is None
