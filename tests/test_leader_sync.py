"""A hand-written two-level gradient sync: its leaders are the culprit, every other rank waits for
them; and a question that names a communication group ("the dp allreduce") is answered with that
group's collective."""

from __future__ import annotations

import json
import re

import pytest

from advisor_chat.agent.advisor import Advisor
from advisor_chat.config import Settings
from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.types import Mechanism
from advisor_chat.ingest.loader import load_profile


def _no_cases(*args: object, **kw: object) -> list:
    return []


def test_the_leaders_of_a_hand_written_sync_are_the_culprit(scenario) -> None:
    """hier-allreduce-leaders: reduce to local rank 0, all-reduce between ranks 0 and 8 only,
    broadcast back. The key (from the simulation) names the leaders as culprit, the others as
    victims and each victim's median wait in one broadcast."""
    root = scenario("hier-allreduce-leaders")
    key = json.loads((root / "answer_key.json").read_text(encoding="utf-8"))
    rc = key["root_cause"]
    top = diagnose(load_profile(root, progress=False)).causes[0]
    assert top.mechanism is Mechanism.SLOW_GROUP and top.culprit.kind == "group"
    assert list(top.culprit.ranks) == rc["culprit_ranks"]
    assert {v.rank for v in top.victims} == set(rc["victim_ranks"])
    per_bc = key["expected_numbers"]["broadcast_wait_us_median_others"]
    assert top.metrics["broadcast_wait_us_median"] == pytest.approx(per_bc, rel=0.15)
    # the first sentence names them, the evidence says what the layout does to the links
    assert top.summary.startswith("Ranks 0, 8 carry the gradient sync")
    assert "over one link, its leader's, instead of 1/8" in top.summary
    assert top.summary_zh.startswith("跨机梯度同步只由0、8号卡承担")
    assert top.remedies[0].text.startswith("Replace the hand-written reduce")


def test_a_victim_asked_about_is_told_no_with_its_wait_per_broadcast(scenario) -> None:
    root = scenario("hier-allreduce-leaders")
    key = json.loads((root / "answer_key.json").read_text(encoding="utf-8"))
    adv = Advisor(load_profile(root, progress=False), settings=Settings(), case_search=_no_cases)
    ans = adv.ask(
        "rank 5 spends ages inside every hcom_broadcast_. is rank 5 the problem? "
        "how long does it wait in one of them?"
    )
    assert ans.answer.startswith("No"), ans.answer
    m = re.search(r"\(([\d.]+) ms per broadcast, median\)", ans.answer)
    assert m is not None, ans.answer
    per_bc = key["expected_numbers"]["broadcast_wait_us_median_others"] / 1000.0
    assert float(m.group(1)) == pytest.approx(per_bc, rel=0.15)


def test_the_collective_of_the_group_the_question_names(scenario) -> None:
    """cross-rack-uplink (TP 8 x DP 4): "the dp allreduce" is the data-parallel groups'
    all-reduce, not the job-wide default group's small one."""
    root = scenario("cross-rack-uplink")
    adv = Advisor(load_profile(root, progress=False), settings=Settings(), case_search=_no_cases)
    ans = adv.ask("how long does one dp allreduce take, and how much of it is waiting?")
    assert "AllReduce in group dp" in ans.answer, ans.answer
    assert "default_group" not in ans.answer
