"""Causes the step trace hides, found from the kernels and the host calls (development set 10).

Each scenario plants one fault whose answer key (``advisor_chat/synth/scenarios_dev10.py``) says
what was written; the expected figures come from the key, never typed here:

- ``rank0-grad-hook-sync``: rank 0's host blocks in ``aclrtSynchronizeStream`` four times per
  step; most of its device's idle falls while its own collectives run, so its Free excess is a
  third of what it costs the others. The cause is rank 0's host stall, its cost measured at the
  collectives, with the synchronize calls as evidence.
- ``jit-compile-mode``: most launches go through ``aclopCompileAndExecute`` (operators compiled
  online); the job-wide idle names that launch path and the switch that avoids it.
- ``eager-rmsnorm-rope``: RMSNorm and RoPE composed of small operators on every rank; the chains
  around their anchor operators add up to what the key measured.
- ``pp-uneven-layers``: stage 0 holds 5 layers, stage 1 three; forward and gradient operators
  run 5/3 as often on stage 0 (not a recompute), and rebalancing saves its Computing above the
  stages' mean.
"""

from __future__ import annotations

import json

import pytest

from advisor_chat.diagnosis import Mechanism, diagnose
from advisor_chat.diagnosis.decompose import top_launch_api
from advisor_chat.ingest import load_profile

# each test generates and diagnoses a development scenario: in the slow suite (CI runs it)
pytestmark = pytest.mark.slow


def _load(scenario, name: str):
    path = scenario(name)
    key = json.loads((path / "answer_key.json").read_text())
    profile = load_profile(path, use_cache=False, progress=False)
    return profile, diagnose(profile), key


def test_a_host_stall_hidden_under_communication_is_the_rank_s_cause(scenario) -> None:
    _, d, key = _load(scenario, "rank0-grad-hook-sync")
    top = d.causes[0]
    assert top.mechanism is Mechanism.HOST_STALL and top.culprit.ranks == (0,)
    nums = key["expected_numbers"]
    # its Free excess is much smaller than what it costs: the gain is the collectives' measure
    assert top.metrics["free_excess_us"] < 0.5 * nums["saving_us_per_step"]
    assert top.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.1)
    assert f"calls aclrtSynchronizeStream {nums['syncs_per_step_culprit']:g} times" in top.summary
    assert "synchronize_stream" in top.symptom_tags
    assert "Free" in top.summary and "Communication" in top.summary


def test_the_launch_path_of_a_host_bound_job_is_named(scenario) -> None:
    profile, d, key = _load(scenario, "jit-compile-mode")
    top = top_launch_api(profile, profile.ranks)
    assert top is not None and top.api.endswith(key["evidence"]["host_api"])
    assert top.per_step == key["expected_numbers"]["compile_path_launches_per_step"]
    c = d.causes[0]
    assert c.culprit.kind == "job"
    assert key["evidence"]["host_api"] in c.summary
    assert any("jit_compile=False" in r.text for r in c.remedies)


def test_composed_norm_and_rope_chains_add_up(scenario) -> None:
    _, d, key = _load(scenario, "eager-rmsnorm-rope")
    c = d.causes[0]
    assert c.mechanism is Mechanism.JOB_HOTSPOT
    assert "RMSNorm" in c.summary and "rotary position embedding" in c.summary
    fused = " ".join(r.text for r in c.remedies)
    for api in key["evidence"]["fused_apis"]:
        assert api in fused
    # the two chains' time per step (the remedies' gains) against the key's eager time
    total = sum(r.gain_us or 0.0 for r in c.remedies)
    assert total == pytest.approx(key["expected_numbers"]["eager_us_per_step_median"], rel=0.15)


def test_an_uneven_layer_split_is_not_a_recompute(scenario) -> None:
    _, d, key = _load(scenario, "pp-uneven-layers")
    c = d.causes[0]
    assert c.mechanism is Mechanism.PIPELINE_IMBALANCE
    a, b = key["evidence"]["layers_per_stage"]
    assert f"{a / b:.2f}x the layers" in c.summary and "recomputation" not in c.summary
    assert c.gain_us == pytest.approx(key["expected_numbers"]["saving_us_per_step"], rel=0.1)
