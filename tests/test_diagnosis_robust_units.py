"""Culprits that must not depend on the generator's seed or the job's size (tools/robustness.py).

- A node whose on-board (HCCS) links trained at half width, in a job of 4 nodes: one cause for the
  node's links, costed at its ranks' extra transit, not four link causes of 3 ms each.
- The same device of every node stalled by interrupts on its cores: one unit late together at
  every big collective, blamed although its own Free excess is smaller than what it costs (the
  stalls fall inside its launch calls while its collectives run).
Expected numbers come from the answer keys (re-simulated without the fault).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.ingest import load_profile


def _key(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())


def test_a_nodes_slow_hccs_links_are_one_cause_at_32_ranks(scenario) -> None:
    path = scenario("hccs-width-node-firmware", ranks=32, seed=3)
    key = _key(path)
    d = diagnose(load_profile(path, use_cache=False, progress=False))
    links = [c for c in d.causes if c.mechanism.value == "slow_link"]
    assert len(links) == 1  # the node's links, not its ranks' or a subset's one by one
    c = links[0]
    assert list(c.culprit.ranks) == key["root_cause"]["culprit_ranks"]
    assert c.culprit.kind == "group" and c.culprit.transport == "HCCS"
    assert "inside the node" in c.summary and "NIC" not in c.summary
    assert c.gain_us == pytest.approx(key["expected_numbers"]["saving_us_per_step"], rel=0.2)


@pytest.mark.parametrize(("ranks", "seed"), [(16, 5), (32, 3)])
def test_the_same_device_of_every_node_is_one_culprit(scenario, ranks: int, seed: int) -> None:
    path = scenario("nic-irq-on-train-core", ranks=ranks, seed=seed)
    key = _key(path)
    d = diagnose(load_profile(path, use_cache=False, progress=False))
    top = d.top()
    assert top is not None
    assert list(top.culprit.ranks) == key["root_cause"]["culprit_ranks"]
    assert top.culprit.label.startswith("device 0 of every node")
    assert top.gain_us == pytest.approx(key["expected_numbers"]["saving_us_per_step"], rel=0.25)
