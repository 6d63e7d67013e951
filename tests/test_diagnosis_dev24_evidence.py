"""Development set 24 kinds against their answer keys (numbers from the simulated timeline).

- ``autocast-fp32-weights``: Casts over the MatMuls' weight shapes, fp32 in.
- ``pinned-alloc-every-step``: the step-start idle held by the host's memory calls.
- ``param-histogram-steps``: a host operator repeated in the stall (aten::histc), summed.
- ``loader-worker-respawn``: a rank's stalls before its steps' first task: the input.
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


def _top(path: Path):
    top = diagnose(load_profile(path, use_cache=False, progress=False)).top()
    assert top is not None
    return top


def test_fp32_weights_cast_in_every_pass(scenario) -> None:
    path = scenario("autocast-fp32-weights")
    nums = _key(path)["expected_numbers"]
    top = _top(path)
    assert f"{nums['casts_per_step']} Casts per step" in top.summary
    assert f"{nums['weight_casts_per_step']} of them from fp32" in top.summary
    assert top.remedies[0].text.startswith("Keep the weights in bf16")


def test_casts_elsewhere_are_not_weight_casts(scenario) -> None:
    # transdata-format-churn converts activations, not weights: the generic remedy stays
    top = _top(scenario("transdata-format-churn"))
    assert "weight shapes" not in top.summary


def test_pinned_buffers_made_every_step(scenario) -> None:
    path = scenario("pinned-alloc-every-step")
    nums = _key(path)["expected_numbers"]
    prof = load_profile(path, use_cache=False, progress=False)
    hd = prof.host_dispatch_for([0])
    malloc = hd[hd["api_name"].astype(str).str.endswith("aclrtMallocHost")]
    assert len(malloc) and malloc["api_duration_us"].median() == pytest.approx(
        nums["malloc_host_us_median"], rel=0.01
    )
    assert malloc["device_start_us"].isna().all()  # a host call, not a launch
    top = diagnose(prof).top()
    assert top is not None and "aclrtMallocHost" in top.summary
    first = top.remedies[0]
    assert first.text.startswith("Allocate the pinned host buffer once")
    spent = nums["malloc_host_us_median"] + nums["free_host_us_median"]
    assert first.gain_us == pytest.approx(spent, rel=0.05)
    assert top.metrics["host_memory_call_us"] == pytest.approx(first.gain_us)
    assert "(input pipeline)" not in top.summary  # the host's own calls hold the idle


def test_more_loader_workers_is_not_the_fix_for_pinned_buffers(scenario) -> None:
    from advisor_chat.diagnosis.hypotheses import judge

    # the idle sits at the step start as an input wait would, but the host is in its own memory
    # calls then: the dataloader hypothesis is contradicted; on a real input stall it holds
    d = diagnose(load_profile(scenario("pinned-alloc-every-step"), use_cache=False))
    assert judge(d, "dataloader").status == "contradicted"
    d = diagnose(load_profile(scenario("dataloader-stall"), use_cache=False))
    assert judge(d, "dataloader").status == "supported"


def test_a_host_operator_repeated_in_the_stall_is_summed(scenario) -> None:
    path = scenario("param-histogram-steps")
    nums = _key(path)["expected_numbers"]
    top = _top(path)
    assert list(top.steps) == nums["histogram_steps"]
    # only in the histogram steps: running it less often comes first, then keeping it on the NPU
    steps = ", ".join(str(s) for s in nums["histogram_steps"])
    first = top.remedies[0].text
    assert first.startswith(f"aten::histc runs only in steps {steps}")
    assert "less often" in first and "keep it on the NPU" in first
    # the per-step figure is the 24 histc calls together, not the longest one, in a step it hits
    assert (
        f"aten::histc ({nums['histc_us_per_histogram_step'] / 1000:.0f} ms in each step it hits"
        in top.summary
    )
    assert top.gain_us == pytest.approx(nums["saving_us_per_step_average"], rel=0.05)


def test_stalls_before_the_first_task_wait_for_the_input(scenario) -> None:
    path = scenario("loader-worker-respawn")
    nums = _key(path)["expected_numbers"]
    top = _top(path)
    assert top.culprit.ranks == (nums["culprit_rank"],)
    assert "before the first task of their steps" in top.summary
    assert "gc.freeze" not in top.remedies[0].text
    assert "DataLoader" in top.remedies[0].text and "dataloader_stall" in top.symptom_tags
