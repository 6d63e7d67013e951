"""Ranks late together are one cause, whichever of them the collectives saw arrive last.

``nic-irq-on-train-core`` plants the same host stall on device 0 of every node (ranks 0 and 8 of
16). With the generator's default seed the collectives show both arriving late together; with
other seeds the jitter makes one of them the last arriver of most collectives, and the wait
attribution gave almost all the cost to that one. Their own time (Computing + Free) exceeds the
peers' by the same amount, so the diagnosis names both: the answer key (computed from the
simulated timeline) says which ranks are the culprits.
"""

from __future__ import annotations

import json

import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.ingest import load_profile


@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_ranks_with_the_same_excess_are_one_cause(scenario, seed: int) -> None:
    path = scenario("nic-irq-on-train-core", seed=seed)
    key = json.loads((path / "answer_key.json").read_text())["root_cause"]
    d = diagnose(load_profile(path, use_cache=False, progress=False))
    top = d.top()
    assert top is not None
    assert sorted(top.culprit.ranks) == sorted(key["culprit_ranks"]), top.summary
    # named by what the ranks share: their position on every node
    assert top.summary.startswith("Slower device 0 of every node"), top.summary
    assert "每个节点的第 0 号设备" in top.summary_zh
    # what fixing them saves is what the others wait for them at the collectives (the step
    # trace shows only part of their stall as Free: the rest falls inside their own collectives)
    saving = json.loads((path / "answer_key.json").read_text())["expected_numbers"][
        "saving_us_per_step"
    ]
    assert top.gain_us is not None and 0.75 * saving <= top.gain_us <= 1.1 * saving, (
        top.gain_us,
        saving,
    )
    assert top.id == "cause.slow_ranks.r0_8"
    # no rank of the pair is blamed again on its own
    singles = [c.id for c in d.causes if c.culprit.kind == "rank"]
    assert singles == [], singles
