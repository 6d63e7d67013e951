"""Development sets 25 and 26 kinds against their answer keys (numbers from the simulated timeline).

- ``ddp-find-unused-params``: the host's frame in the job's one stretch of idle (DDP's graph walk).
- ``aicpu-busy-card``: one rank's AI CPU kernels all slower, its AI Core kernels not.
- ``tensor-dump-one-rank``: one rank's host in a tensor dump (msprobe) while the others wait.
- ``host-built-attention-mask``: the host computing a triangular mask before each copy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.hypotheses import judge
from advisor_chat.ingest import load_profile

# scenario-level evidence of a development set: CI and `tools/test.sh --all` run it
pytestmark = pytest.mark.slow


def _key(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())


def _diag(path: Path):
    return diagnose(load_profile(path, use_cache=False, progress=False))


def test_a_stretch_of_idle_names_what_the_host_runs_in_it(scenario) -> None:
    path = scenario("ddp-find-unused-params")
    nums = _key(path)["expected_numbers"]
    top = _diag(path).top()
    assert top is not None and top.culprit.kind == "job"
    assert "`prepare_for_backward`" in top.summary and "find_unused_parameters=True" in top.summary
    # the frame lasts about the graph walk; the idle it holds is the stretch the key measures
    assert top.metrics["python_frame_us"] == pytest.approx(nums["traversal_us_median"], rel=0.1)
    assert top.metrics["idle_stretch_us"] == pytest.approx(
        nums["device_idle_before_backward_us_median"], rel=0.05
    )
    assert top.remedies[0].text.startswith("Construct DistributedDataParallel with")
    # the job's own Python, placed in one stretch: not the profiler's per-launch work
    assert "profiler_overhead" not in top.symptom_tags
    assert "capture was taken" not in top.summary


def test_every_ai_cpu_kernel_slower_on_one_card(scenario) -> None:
    path = scenario("aicpu-busy-card")
    nums = _key(path)["expected_numbers"]
    d = _diag(path)
    top = d.top()
    assert top is not None and top.culprit.ranks == (nums["culprit_rank"],)
    assert "aicpu_busy" in top.symptom_tags
    assert f"{nums['aicpu_ratio_median']:.1f}x" in top.summary
    assert "AI Core kernels run at 1.00x" in top.summary
    for op in nums["aicpu_op_types"]:
        assert op in top.summary
    assert top.remedies[0].text.startswith(
        f"Find what else uses rank {nums['culprit_rank']}'s AI CPU"
    )
    # a new card is not the fix: its AI Core is as fast as its peers'
    v = judge(d, "card", (nums["culprit_rank"],))
    assert v.status == "contradicted" and "only its AI CPU kernels are slower" in v.reason


def test_outliers_on_several_engines_stay_a_device_that_stalls(scenario) -> None:
    # ECC retries hit AI Core kernels: not the AI CPU explanation
    top = _diag(scenario("ecc-kernel-retries")).top()
    assert top is not None and "aicpu_busy" not in top.symptom_tags


def test_a_tensor_dump_on_one_rank(scenario) -> None:
    path = scenario("tensor-dump-one-rank")
    nums = _key(path)["expected_numbers"]
    top = _diag(path).top()
    assert top is not None and top.culprit.ranks == (nums["culprit_rank"],)
    assert "msprobe" in top.summary and "profiler_overhead" not in top.symptom_tags
    assert top.remedies[0].text.startswith(
        f"Turn off the tensor dump on rank {nums['culprit_rank']}"
    )
    assert top.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.05)


def test_a_mask_built_on_the_host(scenario) -> None:
    path = scenario("host-built-attention-mask")
    nums = _key(path)["expected_numbers"]
    top = _diag(path).top()
    assert top is not None and top.culprit.kind == "job"
    assert "aten::tril" in top.summary and "causal attention) mask" in top.summary
    # the host's operators and the copy together: the host's time per step in the key
    assert top.metrics["python_frame_us"] == pytest.approx(nums["host_us_per_step"], rel=0.05)
    assert top.remedies[0].text.startswith("Build the attention mask on the NPU")


def test_gc_collect_every_few_steps(scenario) -> None:
    path = scenario("gc-collect-in-loop")
    nums = _key(path)["expected_numbers"]
    d = _diag(path)
    # one planted fault, one cause: the slow steps, held by the recorded GC pauses
    assert [c.id for c in d.causes] == [
        f"cause.job_steps.s{nums['first_gc_step']}_{nums['last_gc_step']}"
    ]
    top = d.top()
    assert top is not None and list(top.steps) == nums["gc_steps"]
    assert "gc_pause" in top.symptom_tags
    assert f"every {nums['gc_interval']} steps" in top.summary
    assert top.metrics["gc_pause_us_affected_steps"] == pytest.approx(
        nums["gc_pause_us_median"], rel=0.05
    )
    assert top.remedies[0].text.startswith("Take gc.collect() out of the training loop")
    assert top.gain_us == pytest.approx(nums["saving_us_per_step_average"], rel=0.05)
    assert judge(d, "dataloader").status == "contradicted"
    assert judge(d, "gc").status == "supported"


def test_slow_steps_without_gc_events_are_not_called_gc(scenario) -> None:
    d = _diag(scenario("async-save-thread-contention"))
    top = d.top()
    assert top is not None and "gc_pause" not in top.symptom_tags


def test_moe_tokens_dispatched_by_all_gather(scenario) -> None:
    path = scenario("moe-allgather-dispatcher")
    nums = _key(path)["expected_numbers"]
    top = _diag(path).top()
    assert top is not None and top.culprit.kind == "job"
    assert "moe_token_dispatcher_type allgather" in top.summary
    assert top.metrics["moe_dispatch_us_per_step"] == pytest.approx(
        nums["dispatch_comm_us_per_step"], rel=0.05
    )
    first = top.remedies[0]
    assert first.text.startswith("Switch the MoE token dispatcher to all-to-all")
    # (1 - top-k / ep) of the dispatch: the re-simulated saving with the all-to-all dispatcher
    assert first.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.1)


def test_an_alltoall_dispatcher_is_not_told_to_switch(scenario) -> None:
    top = _diag(scenario("moe-hot-expert")).top()
    assert top is not None and "moe_dispatch_us_per_step" not in top.metrics


def test_long_kernels_on_few_cores_in_deterministic_mode(scenario) -> None:
    path = scenario("torch-deterministic-on")
    nums = _key(path)["expected_numbers"]
    ev = _key(path)["evidence"]
    top = _diag(path).top()
    assert top is not None and top.culprit.kind == "job"
    for op, bd in ev["block_dim"].items():
        assert f"{op} on {bd} of " in top.summary
    assert "torch.use_deterministic_algorithms(True)" in top.summary
    assert top.metrics["item_us_per_step"] == pytest.approx(
        nums["deterministic_us_per_step"], rel=0.05
    )
    assert top.remedies[0].text.startswith("Turn deterministic computation off")


def test_kernels_on_all_cores_are_not_few_cores(scenario) -> None:
    from advisor_chat.diagnosis.decompose import _few_cores

    prof = load_profile(scenario("healthy"), use_cache=False, progress=False)
    assert _few_cores(prof.kernels_for([0, 1])) is None
