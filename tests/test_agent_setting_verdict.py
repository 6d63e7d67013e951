"""'Should I change <environment variable>?' gets a verdict from the evidence, not a findings list.

``hccl-buffsize-small`` plants HCCL_BUFFSIZE below its default (its exposed collectives run in
several rounds): the evidence selects raising it. ``seed-rank12`` plants a host stall on one rank:
nothing points to the buffer, and "since the network is the bottleneck" is a premise the data
contradicts (every link at its peers' bandwidth).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.agent import Advisor
from advisor_chat.config import Settings
from advisor_chat.ingest import load_profile


def _no_cases(query, symptom_tags=None, k=5):
    return []


def _ask(path: Path, q: str) -> str:
    return Advisor(load_profile(path), settings=Settings(), case_search=_no_cases).ask(q).answer


@pytest.mark.parametrize(
    "question", ["should I increase HCCL_BUFFSIZE?", "要不要调大HCCL_BUFFSIZE"]
)
def test_the_change_the_evidence_selects_is_a_yes(scenario, question: str) -> None:
    text = _ask(scenario("hccl-buffsize-small"), question)
    assert text.startswith(("Yes", "是的")), text[:200]
    assert "HCCL_BUFFSIZE" in text.split("\n")[0]


def test_a_change_nothing_points_to_names_where_the_time_goes(scenario) -> None:
    root = scenario("seed-rank12")
    (culprit,) = json.loads((root / "answer_key.json").read_text())["slow_ranks"]
    text = _ask(root, "since the network is the bottleneck, should I increase HCCL_BUFFSIZE?")
    first = text.split(". ")[0]
    assert first.startswith("No: nothing in this profile points to HCCL_BUFFSIZE"), first
    assert f"rank {culprit}" in text
    assert "The premise does not hold either: it is not the network" in text
    # the premise keeps its own evidence; where the time goes is said once
    assert text.count("the time goes elsewhere") + text.count("The time goes elsewhere") == 1


@pytest.mark.parametrize(
    "question",
    [
        "should I set TASK_QUEUE_ENABLE=2?",
        "would TASK_QUEUE_ENABLE help here?",
        "要不要开 TASK_QUEUE_ENABLE=2？",
        "TASK_QUEUE_ENABLE 设成 2 有用吗？",
    ],
)
def test_one_verdict_on_a_setting_whatever_the_wording(scenario, question: str) -> None:
    """small-batch-host-bound: the dispatch remedy names TASK_QUEUE_ENABLE, so every wording of
    the question (an action or a suspicion, English or Chinese) gets that evidence's yes."""
    text = _ask(scenario("small-batch-host-bound"), question)
    assert text.startswith(("Yes, the evidence selects that change", "是的，证据指向这一改动")), (
        text[:200]
    )
    assert "TASK_QUEUE_ENABLE=2" in text.split("\n")[0]


@pytest.mark.parametrize(
    ("question", "start"),
    [
        ("should I set TASK_QUEUE_ENABLE=2?", "Not on this capture: it was taken with Level2"),
        ("要不要开 TASK_QUEUE_ENABLE=2？", "不要基于这份数据调：它以 Level2"),
    ],
)
def test_a_host_side_change_is_not_tuned_on_a_heavy_capture(
    scenario, question: str, start: str
) -> None:
    """profiler-overhead: the dispatch remedy names the setting, but the capture (Level2 with
    stacks) adds host work to every launch, so the answer is to re-collect first."""
    text = _ask(scenario("profiler-overhead"), question)
    assert text.startswith(start), text[:200]
    assert "TASK_QUEUE_ENABLE=2" in text.split("\n")[0]
