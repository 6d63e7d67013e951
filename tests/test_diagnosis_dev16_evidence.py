"""Development set 16 kinds: the evidence the diagnosis states, checked against the answer keys.

- ``allocator-fragmentation-late``: one rank's caching allocator fragments over the run; from a
  step on it synchronizes the device to free and re-allocate cached segments before forward
  layers. The stall is one cause from that step on (not "one-step events"), and its evidence is
  the rank's memory records (memory_record.csv): reserved far above what it allocates.
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


def test_a_fragmenting_allocator_from_a_step_on_is_one_cause_with_its_memory(scenario) -> None:
    path = scenario("allocator-fragmentation-late")
    nums = _key(path)["expected_numbers"]
    top = diagnose(load_profile(path, use_cache=False, progress=False)).top()
    assert top is not None
    assert top.culprit.ranks == (nums["culprit_rank"],)
    assert f"from step {nums['onset_step']} on" in top.summary
    assert "one-step" not in top.summary
    # the memory records say why: reserved up to the key's maximum, allocating what peers do
    assert f"reserved up to {nums['culprit_reserved_mb_max']:.0f} MB" in top.summary
    assert "fragmented" in top.summary and "碎片化" in top.summary_zh
    assert "expandable_segments" in top.remedies[0].text
    # the stall per affected step, against the key's idle
    assert top.metrics["onset_cost_per_step_us"] == pytest.approx(
        nums["saving_us_per_affected_step"], rel=0.1
    )


def test_fragmented_and_capped_allocators_are_told_apart() -> None:
    from advisor_chat.diagnosis.decompose import MemoryChurn

    def churn(reserved: float, allocated: float) -> MemoryChurn:
        return MemoryChurn(2.0, 1000.0, reserved, 52000.0, allocated, 51000.0, 0.0, "PTA")

    # same allocations, much more reserved: fragmentation (not less free HBM)
    assert churn(61000.0, 51000.0).fragmented and not churn(61000.0, 51000.0).capped
    # same allocations, less reserved than its peers: something else holds the HBM
    assert churn(45000.0, 51000.0).capped and not churn(45000.0, 51000.0).fragmented
    # more allocated too: neither (it simply needs more)
    assert not churn(61000.0, 60000.0).fragmented


def test_collectives_waited_for_right_after_launch_lead_the_exposed_communication(
    scenario,
) -> None:
    """grad-reduce-event-wait: async all-reduces, each waited for at once (EVENT_WAIT tasks)."""
    from advisor_chat.diagnosis.decompose import event_waits

    path = scenario("grad-reduce-event-wait")
    nums = _key(path)["expected_numbers"]
    profile = load_profile(path, use_cache=False, progress=False)
    ew = event_waits(profile, profile.ranks)
    assert ew is not None and ew.after == "HcclAllReduce"
    assert ew.per_step == nums["event_waits_per_step"]
    assert ew.us_per_step == pytest.approx(nums["event_wait_us_per_step"], rel=0.05)
    top = diagnose(profile).top()
    assert top is not None and top.culprit.kind == "job"
    assert "EVENT_WAIT" in top.summary and "handle.wait()" in top.summary
    first = top.remedies[0]
    assert "only where their results are needed" in first.text
    assert first.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.25)
    # the cause costs what that change saves, not all of the exposed communication (its bound)
    assert top.gain_us == first.gain_us < top.metrics["hideable_us"]
    # no such waits in a job whose collectives are simply not overlapped
    plain = load_profile(scenario("comm-bound-no-overlap"), use_cache=False, progress=False)
    assert event_waits(plain, plain.ranks) is None


def test_one_cards_slow_host_device_copies_point_to_its_pcie_link(scenario) -> None:
    """pcie-downtrained-card: the same copies, many times slower on one card only."""
    path = scenario("pcie-downtrained-card")
    key = _key(path)
    culprit = key["root_cause"]["culprit_ranks"]
    top = diagnose(load_profile(path, use_cache=False, progress=False)).top()
    assert top is not None and list(top.culprit.ranks) == culprit
    assert top.summary.startswith(f"Slow host-device copies on rank {culprit[0]}")
    assert "MEMCPY_ASYNC" in top.summary and "PCIe" in top.summary and "PCIe" in top.summary_zh
    assert "lspci" in top.remedies[0].text
    # and a card whose copies run as its peers' gets no such clause
    other = diagnose(load_profile(scenario("seed-rank12"), use_cache=False, progress=False))
    assert all("PCIe" not in c.summary for c in other.causes)


def test_uneven_routing_that_rotates_over_layers_is_the_all_to_alls_cause(scenario) -> None:
    """moe-uneven-token-routing: each layer's most loaded expert rank differs; same totals."""
    from advisor_chat.diagnosis.decompose import expert_load

    path = scenario("moe-uneven-token-routing")
    nums = _key(path)["expected_numbers"]
    profile = load_profile(path, use_cache=False, progress=False)
    load = expert_load(profile, profile.ranks)
    assert load is not None
    assert (load.max_rows, load.min_rows) == (nums["max_token_rows"], nums["min_token_rows"])
    assert load.total_spread == pytest.approx(1.0, abs=0.01)
    assert load.a2a_us_per_step == pytest.approx(nums["alltoallv_us_per_step"], rel=0.02)
    top = diagnose(profile).top()
    assert top is not None and top.culprit.kind == "job"
    first = top.remedies[0]
    assert "router" in first.text and "aux_loss" in first.text
    # the all-to-alls shrink to the balanced load: the key's re-simulated saving
    assert first.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.15)
    assert top.gain_us == first.gain_us and top.bound is first.bound
    # one expert rank hot in every layer (a fixed hot expert) is that rank's cause, not this one
    hot = diagnose(load_profile(scenario("moe-hot-expert"), use_cache=False, progress=False))
    assert all("router spreads" not in c.summary for c in hot.causes)
