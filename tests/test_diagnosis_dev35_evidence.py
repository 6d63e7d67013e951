"""Development set 35's tuned kind against its answer key (numbers from the simulation).

- ``logits-kept-across-steps``: allocated device memory that grows every step beside the slowdown
  (the ``memory`` analyzer), with the caching allocator's cache releases per step, is the
  degradation's evidence, and releasing what the loop keeps is its first action.

The held-out kinds of this set are never diagnosed here (``advisor_chat/synth/heldout_dev.py``).
"""

from __future__ import annotations

import json

import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.types import Mechanism
from advisor_chat.ingest import load_profile

# scenario-level evidence of a development set: CI and `tools/test.sh --all` run it
pytestmark = pytest.mark.slow


def test_kept_tensors_are_the_degradations_evidence(scenario) -> None:
    root = scenario("logits-kept-across-steps")
    key = json.loads((root / "answer_key.json").read_text())["expected_numbers"]
    d = diagnose(load_profile(root, use_cache=False))
    top = d.causes[0]
    assert top.mechanism is Mechanism.DEGRADATION and top.culprit.kind == "job"
    assert top.metrics["memory_growth_mb_per_step"] == pytest.approx(
        key["allocated_mb_growth_per_step"], rel=0.01
    )
    releases = ", ".join(str(n) for n in key["cache_releases_per_step"])
    assert f"per step on rank 0: {releases}" in top.summary
    assert top.metrics["allocator_frees_first_step"] == key["first_release_step"]
    assert top.remedies[0].kind == "action" and "Stop keeping tensors" in top.remedies[0].text
    assert "memory_growth" in top.symptom_tags


def test_memory_suspected_supported_fragmentation_contradicted(scenario) -> None:
    from advisor_chat.agent.parse import parse_question
    from advisor_chat.diagnosis.hypotheses import judge

    d = diagnose(load_profile(scenario("logits-kept-across-steps"), use_cache=False))
    assert judge(d, "memory").status == "supported"
    frag = judge(d, "fragmentation")
    assert frag.status == "contradicted" and "grows every step" in frag.reason
    q = parse_question("is it allocator fragmentation? would expandable_segments fix it?")
    assert q.hypothesis == "fragmentation"
    assert parse_question("显存碎片导致的吗？").hypothesis == "fragmentation"
