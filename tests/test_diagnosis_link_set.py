"""Slow links that connect most pairs of a set of ranks are one fault: that set's interconnect.

``slow-tp-group`` slows every HCCS link among the 4 ranks of one tensor-parallel group (the
generator's ``link_factor`` on each directed pair): the diagnosis must name those ranks and their
group as one cause, costed by the group's collectives against the other TP groups (the answer
key's ``group_tp_allreduce_ms_per_step`` / ``others_tp_allreduce_ms_per_step``, computed by the
generator from what it wrote), not one of its links. A single slow link (``hccs-link-both-ways``)
stays a link.
"""

from __future__ import annotations

import json

import pytest

from advisor_chat.diagnosis import Mechanism, diagnose
from advisor_chat.ingest import load_profile


def test_every_slow_link_of_a_group_is_one_group_cause(scenario) -> None:
    root = scenario("slow-tp-group")
    key = json.loads((root / "answer_key.json").read_text())["root_cause"]
    d = diagnose(load_profile(root, use_cache=False))
    top = d.top()
    assert top is not None and top.mechanism is Mechanism.SLOW_LINK
    assert top.culprit.kind == "group"
    assert list(top.culprit.ranks) == key["culprit_ranks"]
    # one cause for the set: no other cause blames a link among those ranks
    inside = set(key["culprit_ranks"])
    others = [c for c in d.causes if c is not top and c.culprit.link is not None]
    assert not [c for c in others if set(c.culprit.link) <= inside]
    m = key["metrics"]
    extra_ms = m["group_tp_allreduce_ms_per_step"] - m["others_tp_allreduce_ms_per_step"]
    assert top.gain_us == pytest.approx(extra_ms * 1000.0, rel=0.05)
    assert f"{key['metrics']['tp_size']} ranks" in top.summary
    assert top.metrics["links_count"] == 6  # every pair of 4 ranks


def test_one_slow_link_stays_a_link(scenario) -> None:
    root = scenario("hccs-link-both-ways")
    top = diagnose(load_profile(root, use_cache=False)).top()
    assert top is not None and top.culprit.kind == "link" and top.culprit.link is not None
