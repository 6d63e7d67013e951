"""Evidence that picks the fix, on development set 14 scenarios (``synth/scenarios_dev14.py``).

- ``pageable-h2d-copy``: every micro-batch's input is copied from pageable memory with a blocking
  ``aclrtMemcpy``; the device idles inside the copies (not waiting for the data loader).
- ``hccl-deterministic-on``: HCCL_DETERMINISTIC=true: ReduceScatter runs at ~0.42x of the
  bandwidth AllGather reaches on the same links.
- ``old-cann-node-unfused``: node 1 runs an older CANN / torch_npu without fused RmsNorm /
  SwiGlu: chains of small operators instead.
- ``uneven-microbatch-split``: ranks 0-3 run 3 micro-batches per step, the others 2.

The expected figures come from the answer keys, never typed here.
"""

from __future__ import annotations

import json

import pytest

from advisor_chat.diagnosis import Mechanism, diagnose
from advisor_chat.diagnosis.decompose import collective_types, device_account, sync_stalls
from advisor_chat.diagnosis.hypotheses import judge
from advisor_chat.ingest import load_profile

pytestmark = pytest.mark.slow


def _nums(path) -> dict:
    return json.loads((path / "answer_key.json").read_text())["expected_numbers"]


def test_idle_inside_blocking_copies_is_the_copies_not_the_data_loader(scenario) -> None:
    path = scenario("pageable-h2d-copy")
    nums = _nums(path)
    profile = load_profile(path, use_cache=False, progress=False)
    ss = sync_stalls(profile, profile.ranks)
    assert ss is not None
    # the device idles while the host is inside the copies: about the copies' own duration
    assert ss.held_us == pytest.approx(nums["copy_idle_us_per_step"], rel=0.1)
    d = diagnose(profile)
    top = d.causes[0]
    assert top.culprit.kind == "job" and "pageable_copy" in top.symptom_tags
    assert "aclrtMemcpy" in top.summary
    assert "pin_memory" in top.remedies[0].text and "non_blocking=True" in top.remedies[0].text
    assert top.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.2)
    assert judge(d, "dataloader").status == "contradicted"


def test_a_collective_slow_on_links_another_runs_at_full_speed(scenario, tmp_path) -> None:
    from advisor_chat.agent.advisor import Advisor
    from advisor_chat.config import load_settings

    path = scenario("hccl-deterministic-on")
    nums = _nums(path)
    profile = load_profile(path, use_cache=False, progress=False)
    ct = collective_types(profile)
    assert ct is not None and ct.fast == "allGather" and "reduceScatter" in ct.slow
    assert ct.reductions
    assert ct.ratio == pytest.approx(nums["reduce_to_gather_bandwidth_ratio"], abs=0.03)
    assert ct.by_transport["HCCS"][0] == pytest.approx(nums["gather_hccs_bandwidth_gbps"], rel=0.02)
    assert ct.by_transport["HCCS"][1] == pytest.approx(nums["reduce_hccs_bandwidth_gbps"], rel=0.02)
    d = diagnose(profile)
    # not the fabric: no slow-transport cause; the exposed communication names the setting
    assert not [c for c in d.causes if c.mechanism is Mechanism.SLOW_LINK]
    top = d.causes[0]
    assert top.mechanism is Mechanism.EXPOSED_COMMUNICATION
    assert "HCCL_DETERMINISTIC" in top.remedies[0].text
    assert top.remedies[0].gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.2)
    assert judge(d, "network").status == "contradicted"
    # the environment check names the setting
    adv = Advisor(profile, settings=load_settings(home=tmp_path))
    a = adv.ask("anything suspicious in the HCCL settings?").answer
    assert "HCCL_DETERMINISTIC=true" in a
    # a job whose collectives all run alike has none
    assert collective_types(load_profile(scenario("comm-bound-no-overlap"), progress=False)) is None


def test_fused_kernels_missing_on_an_older_stack(scenario) -> None:
    path = scenario("old-cann-node-unfused")
    nums = _nums(path)
    profile = load_profile(path, use_cache=False, progress=False)
    culprits = nums["culprit_ranks"]
    peers = [r for r in profile.ranks if r not in culprits]
    acc = device_account(profile, [(-1, r) for r in culprits], peers)
    assert acc is not None and acc.verdict == "extra_work"
    assert {a[0] for a in acc.absent} >= {"RmsNorm", "SwiGlu"}
    assert acc.versions is not None and "7.0.1" in acc.versions[0]
    top = diagnose(profile).causes[0]
    assert list(top.culprit.ranks) == culprits
    assert "RmsNorm" in top.summary and "7.0.1" in top.summary
    assert top.remedies[0].text.startswith(f"Install on ranks {culprits[0]}-{culprits[-1]}")


def test_more_micro_batches_per_step_is_an_uneven_batch_split(scenario, tmp_path) -> None:
    from advisor_chat.agent.advisor import Advisor
    from advisor_chat.config import load_settings

    path = scenario("uneven-microbatch-split")
    nums = _nums(path)
    profile = load_profile(path, use_cache=False, progress=False)
    culprits = nums["culprit_ranks"]
    peers = [r for r in profile.ranks if r not in culprits]
    acc = device_account(profile, [(-1, r) for r in culprits], peers)
    assert acc is not None
    assert acc.passes == (
        nums["culprit_micro_batches_per_step"],
        nums["others_micro_batches_per_step"],
    )
    top = diagnose(profile).causes[0]
    assert "micro-batches" in top.summary and "Split the global batch" in top.remedies[0].text
    # an even split gives every rank the mean number of micro-batches: the saving is the slow
    # ranks' excess times the share of the others (re-simulated with an even split in the key)
    assert top.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.2)
    # "how many compute kernels per step on rank 0 and rank 5?": both counts
    adv = Advisor(profile, settings=load_settings(home=tmp_path))
    a = adv.ask("how many compute kernels per step do rank 0 and rank 5 run?").answer
    assert f"{nums['culprit_kernels_per_step']} launches" in a
    assert f"{nums['others_kernels_per_step']} launches" in a
