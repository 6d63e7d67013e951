"""Several questions in one message are each answered (issue 24 trial: the first was dropped)."""

from __future__ import annotations

import re

import pytest

from advisor_chat.agent import Advisor
from advisor_chat.agent.parse import split_questions
from advisor_chat.config import load_settings


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        (
            "which rank is slow? also, is the network the problem?",
            ["which rank is slow?", "is the network the problem?"],
        ),
        (
            "which rank is slow and is the network the problem?",
            ["which rank is slow", "is the network the problem?"],
        ),
        ("哪张卡慢？网络有问题吗？", ["哪张卡慢？", "网络有问题吗？"]),
        # two Chinese questions joined by a comma (trial: the second one went unanswered)
        ("先修什么，每项能省多少？", ["先修什么", "每项能省多少？"]),
        ("32卡训练，每步多少时间？", None),  # context, then one question
        ("为什么慢，怎么办？", None),  # one question, asked twice
        # one question, whatever its punctuation: never split
        ("is it rank 3? why?", None),
        ("8张卡里好像有一张不对劲，是哪张？什么问题？", None),  # "which? what is wrong with it?"
        ("is rank 4 hung? it shows ~40 s of wait in one allreduce", None),  # a remark
        ("is it the network? allreduce feels sluggish on the 2-node run", None),
        ("why are ranks 2 and 5 slow?", None),
        ("rank 3 and rank 5: which is slower?", None),
        ("why is rank 12 slow?", None),
        # the same question twice is one question
        ("which rank is slow? which rank is slow?", None),
    ],
)
def test_split_questions(text: str, parts: list[str] | None) -> None:
    assert split_questions(text) == (parts or [text])


@pytest.fixture(scope="module")
def profile(scenario):
    from advisor_chat.ingest import load_profile

    return load_profile(scenario("seed-rank12"))


@pytest.mark.parametrize(
    "text", ["which rank is slow and is the network the problem?", "哪张卡慢？网络有问题吗？"]
)
def test_each_question_answered_in_order(profile, text: str) -> None:
    both = Advisor(profile, settings=load_settings(model="offline")).ask(text)
    parts = split_questions(text)
    alone = [Advisor(profile, settings=load_settings(model="offline")).ask(p) for p in parts]
    pos = []
    for a in alone:
        # each part's first sentence (its verdict); a later sentence the earlier part already
        # said is not said again
        first = re.split(r"(?<=[.。])\s+|(?<=。)", a.answer.split("\n")[0])[0]
        assert first in both.answer, (first, both.answer)
        pos.append(both.answer.index(first))
    assert pos == sorted(pos) and pos[0] == 0  # the first sentence answers the first question
    body = both.answer.split("相关案例：" if both.language == "zh" else "Matching cases:")[0]
    sentences = [
        x.strip() for x in re.split(r"(?<=[.。])\s+|(?<=。)|\n", body) if len(x.strip()) > 40
    ]
    assert len(sentences) == len(set(sentences)), "a sentence said twice"
    # the causes the parts cite, once, after the last part
    cited = [ln for ln in body.split("\n") if ln.startswith(("Causes cited:", "依据的原因编号："))]
    assert len(cited) <= 1
    # one cases section and one suggestions section, each suggestion once
    head = "相关案例：" if both.language == "zh" else "Matching cases:"
    assert both.answer.count(head) <= 1
    texts = [s.text for s in both.suggestions]
    assert len(texts) == len(set(texts))
    assert {s.text for a in alone for s in a.suggestions} == set(texts)
    # the tool calls of both parts are the turn's evidence
    assert len(both.tool_calls) == sum(len(a.tool_calls) for a in alone)
    assert both.grounding is None or not both.grounding.ungrounded
