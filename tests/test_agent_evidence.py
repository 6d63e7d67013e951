""" "How do you know?" answers with the evidence a cause rests on (new-user trial: follow-ups
such as "how do you know it is the host?" got the generic category answer)."""

from __future__ import annotations

import json

import pytest

from advisor_chat.agent import Advisor
from advisor_chat.agent.parse import parse_question
from advisor_chat.config import load_settings


@pytest.mark.parametrize(
    "text",
    ["how do you know it is the host?", "what is the evidence?", "why do you say that?",
     "你怎么知道是主机的问题？", "证据是什么？"],
)  # fmt: skip
def test_evidence_questions(text: str) -> None:
    assert parse_question(text).intent == "evidence"


@pytest.mark.parametrize("text", ["how do I know which rank is slow?", "why is rank 3 slow?"])
def test_not_evidence_questions(text: str) -> None:
    assert parse_question(text).intent != "evidence"


def test_evidence_follow_up_names_the_findings(scenario) -> None:
    from advisor_chat.diagnosis import diagnose
    from advisor_chat.ingest import load_profile

    path = scenario("seed-rank12")
    culprit = json.loads((path / "answer_key.json").read_text())["slow_ranks"][0]
    profile = load_profile(path)
    cause = next(c for c in diagnose(profile).causes if culprit in c.culprit.ranks)
    adv = Advisor(profile, settings=load_settings(model="offline"))
    adv.ask(f"why is rank {culprit} slow?")
    ans = adv.ask("how do you know it is the host?")
    assert ans.answer.startswith(f"What shows it for rank {culprit}:"), ans.answer
    shown = [f for f in cause.findings if f.summary.rstrip(".") in ans.answer]
    assert shown and len(shown) == min(4, len([f for f in cause.findings if f.summary.strip()]))
    assert ans.grounding.ungrounded == []
    zh = adv.ask("你怎么知道的？")
    assert zh.answer.startswith(f"判断{culprit}号卡的依据：") and zh.grounding.ungrounded == []
