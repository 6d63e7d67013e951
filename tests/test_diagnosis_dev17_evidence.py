"""Development set 17 kinds: where the exposed collectives sit, checked against the answer keys.

- ``syncbn-stats-allreduce``: SyncBatchNorm all-gathers / all-reduces its batch statistics
  between BNTrainingReduce and BNTrainingUpdate (and their gradients): tiny collectives inside
  one operator family, not barriers.
- ``param-rebroadcast-every-step``: every step starts with Broadcasts of the parameters before
  its first compute operator.
Expected numbers come from the answer keys, computed from the simulated timeline.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.decompose import collective_context, op_family
from advisor_chat.ingest import load_profile

# scenario-level evidence of a development set: CI and `tools/test.sh --all` run it
pytestmark = pytest.mark.slow


def _nums(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())["expected_numbers"]


def test_operator_families() -> None:
    assert op_family("BNTrainingReduce") == op_family("BNTrainingUpdateGrad") == "BNTraining"
    assert op_family("RmsNormGrad") == op_family("RmsNorm")
    assert op_family("Add") == "Add"


def test_collectives_inside_a_batch_norm_are_its_synchronization(scenario) -> None:
    path = scenario("syncbn-stats-allreduce")
    nums = _nums(path)
    profile = load_profile(path, use_cache=False, progress=False)
    cc = collective_context(profile, profile.ranks)
    assert cc is not None and not cc.at_step_start
    assert op_family(cc.before) == op_family(cc.after) == "BNTraining"
    assert cc.collectives_per_step == nums["syncbn_collectives_per_step"]
    assert cc.collective_us == pytest.approx(nums["syncbn_allgather_us_median"], rel=0.05)
    assert cc.own_us_per_step == pytest.approx(nums["syncbn_us_per_step"], rel=0.05)
    top = diagnose(profile).top()
    assert top is not None and top.culprit.kind == "job"
    assert "SyncBatchNorm" in top.summary and "SyncBatchNorm" in top.summary_zh
    assert "barrier" not in top.summary  # their own exchange, not barriers in timers
    first = top.remedies[0]
    assert "SyncBatchNorm" in first.text and first.gain_us == top.gain_us
    # their time plus the wait for the gradient buckets queued before them, less the last
    # bucket's (exposed either way): against the key's re-simulation with local BatchNorm
    assert top.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.25)


def test_broadcasts_before_the_first_operator_of_every_step(scenario) -> None:
    path = scenario("param-rebroadcast-every-step")
    nums = _nums(path)
    profile = load_profile(path, use_cache=False, progress=False)
    cc = collective_context(profile, profile.ranks)
    assert cc is not None and cc.at_step_start and "broadcast" in cc.collective
    assert cc.collectives_per_step == nums["broadcasts_per_step"]
    assert cc.idle_us_per_step == pytest.approx(nums["time_to_first_kernel_us"], rel=0.02)
    top = diagnose(profile).top()
    assert top is not None and top.culprit.kind == "job"
    assert "once" in top.remedies[0].text and "广播" in top.remedies[0].text_zh
    assert top.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.05)


@pytest.mark.parametrize("name", ["comm-bound-no-overlap", "grad-sync-every-microbatch"])
def test_collectives_between_layers_or_micro_batches_are_not_flagged(scenario, name: str) -> None:
    """A gradient all-reduce between two MatMuls, or between a backward and the next forward."""
    profile = load_profile(scenario(name), use_cache=False, progress=False)
    assert collective_context(profile, profile.ranks) is None


def test_a_node_whose_links_are_slow_is_not_a_broken_card(scenario) -> None:
    """hccs-width-node-firmware: node 1's HCCS links at half bandwidth; card 8 is one of its ranks."""
    from advisor_chat.diagnosis.hypotheses import judge

    path = scenario("hccs-width-node-firmware")
    key = json.loads((path / "answer_key.json").read_text())
    culprits = key["root_cause"]["culprit_ranks"]
    d = diagnose(load_profile(path, use_cache=False, progress=False))
    top = d.top()
    assert top is not None and sorted(top.culprit.ranks) == culprits
    card = judge(d, "card", [culprits[0]])
    assert card.status == "contradicted" and "link" in card.reason
    hw = judge(d, "hardware")
    assert hw.status == "supported" and "HCCS" in hw.reason
    assert "no link is degraded" not in hw.reason
