"""Development set 23 kinds against their answer keys (numbers from the simulated timeline).

- ``moe-ep-cross-node``: two expert-parallel groups straddle nodes; their ranks are late.
- ``grad-accum-unfused``: an Add into the fp32 main_grad after every weight gradient.
- ``cpu-powersave-node``: every launch call on one node is slower (the CPU runs slower).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.agent.advisor import Advisor
from advisor_chat.config import load_settings
from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.engine import case_for
from advisor_chat.ingest import load_profile

# scenario-level evidence of a development set: CI and `tools/test.sh --all` run it
pytestmark = pytest.mark.slow


def _key(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())


def test_groups_straddling_nodes_are_the_culprit(scenario) -> None:
    path = scenario("moe-ep-cross-node", ranks=24)
    key = _key(path)
    nums, rc = key["expected_numbers"], key["root_cause"]
    d = diagnose(load_profile(path, use_cache=False, progress=False))
    top = d.top()
    assert top is not None and top.id == "cause.group_layout.ep"
    assert top.culprit.kind == "group" and list(top.culprit.ranks) == rc["culprit_ranks"]
    assert {v.rank for v in top.victims} == set(rc["victim_ranks"])
    m = top.metrics
    assert m["collective_us_straddling"] == pytest.approx(
        nums["alltoallv_us_median_cross_node"], rel=0.03
    )
    assert m["collective_us_inside"] == pytest.approx(nums["alltoallv_us_median_in_node"], rel=0.03)
    assert "expert_model_parallel_size 6" in top.summary
    assert case_for(top) == "parallel-size-power-of-two"  # the case that fits a group size
    # the parts of those ranks are not causes of their own (a node, single late ranks)
    assert not [c.id for c in d.causes[1:] if set(c.culprit.ranks) & set(rc["culprit_ranks"])]


def test_groups_that_all_fit_in_a_node_are_not_blamed(scenario) -> None:
    d = diagnose(load_profile(scenario("moe-hot-expert"), use_cache=False, progress=False))
    assert not [c.id for c in d.causes if c.id.startswith("cause.group_layout")]


def test_unfused_gradient_accumulation(scenario) -> None:
    path = scenario("grad-accum-unfused")
    nums = _key(path)["expected_numbers"]
    top = diagnose(load_profile(path, use_cache=False, progress=False)).top()
    assert top is not None and top.id == "cause.job_hotspot.grad_accumulation"
    m = top.metrics
    assert m["operator_launches_per_step"] == nums["grad_adds_per_step"]
    assert m["operator_us_per_step"] == pytest.approx(nums["grad_add_us_per_step"], rel=0.02)
    assert top.culprit.shape == nums["largest_add_shape"]
    assert "gradient_accumulation_fusion false" in top.summary
    assert top.remedies[0].text.startswith("Turn on --gradient-accumulation-fusion")
    assert top.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.05)
    assert case_for(top) == "tiny-kernels-fusion"


def test_accumulation_with_fused_adds_is_not_claimed(scenario) -> None:
    # the other scenarios' adds are bf16 into bf16 (residuals): no accumulation cause
    for name in ("healthy", "unfused-optimizer"):
        d = diagnose(load_profile(scenario(name), use_cache=False, progress=False))
        assert not [c.id for c in d.causes if c.id == "cause.job_hotspot.grad_accumulation"]


def test_every_launch_call_slower_is_a_slower_cpu(scenario, tmp_path) -> None:
    path = scenario("cpu-powersave-node")
    nums = _key(path)["expected_numbers"]
    prof = load_profile(path, use_cache=False, progress=False)
    top = diagnose(prof).top()
    assert top is not None and set(top.culprit.ranks) == set(nums["culprit_ranks"])
    m = top.metrics
    assert m["launch_api_us"] == pytest.approx(nums["culprit_launch_api_us_median"], rel=0.05)
    assert m["launch_api_us_peer"] == pytest.approx(nums["others_launch_api_us_median"], rel=0.05)
    assert "frequency governor to performance" in top.remedies[0].text
    # "box 2" of two boxes is the second node (counted from 1)
    adv = Advisor(prof, settings=load_settings(model="offline", home=tmp_path))
    first = adv.ask("ranks 0-7 wait in the allreduces. what's different about box 2?").answer
    assert first.startswith("Node 2 (ranks 8-15)"), first


def test_python_run_before_every_launch_names_the_hooks(scenario) -> None:
    path = scenario("hooks-on-every-module")
    nums = _key(path)["expected_numbers"]
    prof = load_profile(path, use_cache=False, progress=False)
    # the short frames are kept summed per thread, frame and step
    fr = prof.python_frames_for([0])
    fwd = fr[fr["frame"].str.endswith("_forward_hook")]
    assert not fwd.empty and fwd["calls"].median() == nums["forward_hook_frames_per_step"]
    top = diagnose(prof).top()
    assert top is not None and top.culprit.kind == "job"
    assert "module_tracer.py" in top.summary and "_forward_hook" in top.summary
    # the host's own Python is named: no "the idle may be the profiler's" caveat first
    assert not top.summary.startswith("This capture was taken")
    assert top.remedies[0].text.startswith("Take `tools/module_tracer.py")
    assert top.metrics["python_frame_us"] > top.gain_us  # more Python than idle: it is the cause


@pytest.mark.parametrize(
    "question",
    [
        "how many of those per step, and how much time do they add up to per step?",
        "how many of those ops run per step?",
    ],
)
def test_how_many_of_those_counts_the_launches_the_cause_blames(scenario, question) -> None:
    from advisor_chat.agent import Advisor
    from advisor_chat.config import Settings

    path = scenario("grad-accum-unfused")
    nums = _key(path)["expected_numbers"]
    a = Advisor(load_profile(path, progress=False), settings=Settings()).ask(question)
    # "add up to" is not the Add operator; "those" are the cause's operator, and its own launches
    # (the gradient Adds) come first, before every Add of the step
    first = a.answer.split(". ")[0]
    assert f"{nums['grad_adds_per_step']} Add launches per step" in first
    assert f"{nums['grad_add_us_per_step'] / 1000:.1f} ms per step" in first


def test_an_english_word_is_an_operator_only_when_written_as_one() -> None:
    from advisor_chat.agent.parse import parse_question

    ops = ["Add", "Cast", "MatMulV2"]
    assert parse_question("how much time do they add up to?", op_types=ops).ops == ()
    assert parse_question("why are the add ops slow?", op_types=ops).ops == ("Add",)
    assert parse_question("is Add the problem?", op_types=ops).ops == ("Add",)
    assert parse_question("we cast to bf16, does it matter?", op_types=ops).ops == ()
    assert parse_question("cast kernels are long", op_types=ops).ops == ("Cast",)
