"""Development sets 27 and 28 kinds against their answer keys (numbers from the simulated timeline).

- ``node-clock-offset``: a node's timestamps offset (collective ends differ by a constant): a
  data artifact, said with the no-culprit answer; nobody is blamed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.decompose import clock_offsets
from advisor_chat.ingest import load_profile


def _key(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())


def test_a_node_clock_offset_is_found_and_blames_nobody(scenario) -> None:
    path = scenario("node-clock-offset")
    nums = _key(path)["expected_numbers"]
    prof = load_profile(path, use_cache=False, progress=False)
    offs = clock_offsets(prof)
    assert len(offs) == 1
    assert list(offs[0].ranks) == nums["offset_ranks"]
    assert offs[0].offset_us == pytest.approx(nums["clock_offset_us"], rel=0.02)
    d = diagnose(prof)
    assert [c.id for c in d.causes] == ["cause.no_culprit"]
    top = d.causes[0]
    assert top.metrics["clock_offset_us"] == pytest.approx(nums["clock_offset_us"], rel=0.02)
    assert "the hosts' clocks differ" in top.summary and "时钟不一致" in top.summary_zh
    assert top.remedies[0].text.startswith("Synchronize the nodes' clocks")


@pytest.mark.parametrize("name", ["healthy", "slow-nic-node", "cpu-powersave-node"])
def test_nodes_on_one_clock_have_no_offset(scenario, name: str) -> None:
    # a slow node's collectives end together with the others' (it arrives late, its peers wait)
    assert clock_offsets(load_profile(scenario(name), use_cache=False, progress=False)) == []


def test_tp_collectives_beside_matmuls_put_mc2_first(scenario) -> None:
    path = scenario("mc2-off-tp-sp")
    top = diagnose(load_profile(path, use_cache=False, progress=False)).top()
    assert top is not None and top.culprit.kind == "job"
    assert top.remedies[0].text.startswith("Enable MC2 for the tensor-parallel layers")
    assert "use_ascend_mc2 false" in top.summary
    # what MC2 can hide is bounded by the communication the job exposes
    assert (top.remedies[0].gain_us or 0.0) <= top.metrics["hideable_us"] + 1e-6
