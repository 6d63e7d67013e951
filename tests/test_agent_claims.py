"""A yes/no question that proposes a mechanism in a clause of its own ("is it that each expert gets
too few tokens, so the GMM mostly reads weights?") gets a verdict against what the top cause
measured, not "I did not understand"."""

from __future__ import annotations

import pytest

from advisor_chat.agent import project
from advisor_chat.agent.advisor import Advisor
from advisor_chat.agent.planner import claim_hypothesis
from advisor_chat.config import Settings
from advisor_chat.ingest.loader import load_profile


def _no_cases(*args: object, **kw: object) -> list:
    return []


@pytest.mark.parametrize(
    ("text", "claim"),
    [
        (
            "is it that each expert gets too few tokens, so the GMM mostly reads weights?",
            "each expert gets too few tokens, so the GMM mostly reads weights",
        ),
        (
            "是不是每个专家分到的token太少，GMM主要在读权重？",
            "每个专家分到的token太少，GMM主要在读权重",
        ),
        # a suspect, not a clause: the suspect patterns answer it
        ("is the optimizer the problem?", ""),
        ("是不是网络的问题？", ""),
    ],
)
def test_a_claim_is_the_clause_after_the_question_words(text: str, claim: str) -> None:
    assert claim_hypothesis(text) == claim


def test_claim_terms_resolve_operator_names_and_leave_out_filler() -> None:
    terms = project._claim_terms("is it that the GMM kernels spend their time reading weights")
    assert "groupedmatmul" in terms and "weights" in terms and "reading" in terms
    assert not {"the", "kernels", "that", "time"} & set(terms)
    zh = project._claim_terms("GMM的时间主要花在读专家权重上")
    assert "权重" in zh and "时间" not in zh and "主要" not in zh


@pytest.fixture(scope="module")
def gmm_advisor(tmp_path_factory: pytest.TempPathFactory) -> Advisor:
    """moe-gmm-tiny-groups: GroupedMatmul splits few rows over many groups and waits on reading
    each group's weights (its account says so: aic_mte2_ratio, rows per group)."""
    from advisor_chat.synth import generate

    root = generate("moe-gmm-tiny-groups", tmp_path_factory.mktemp("gmm") / "p")
    return Advisor(load_profile(root, progress=False), settings=Settings(), case_search=_no_cases)


@pytest.mark.parametrize(
    ("question", "lead"),
    [
        (
            "is it that each expert gets too few tokens, so the GMM time mostly goes to reading "
            "the weights?",
            "Yes",
        ),
        ("是不是每个分组的行太少，GMM主要在读取权重？", "是的"),
        # one term of the account (权重) is not enough to confirm a claim
        ("是不是每个专家分到的token太少，GMM的时间主要花在读专家权重上了？", "无法"),
        # an operator and a word every operator has ("input") confirm nothing (trial)
        ("is it because the GMM input is fp32?", "not yes"),
        ("是不是GMM的输入是fp32？", "not yes"),
        # the operator alone is not the mechanism: claims the account does not hold are not
        # confirmed ("no sign", or "cannot tell" where a rule judges the suspect it names)
        ("is it because the GMM kernels are launched too slowly by the host?", "not yes"),
        ("是不是因为GMM用了fp32精度？", "没有迹象"),
    ],
)
def test_a_claim_gets_a_verdict_from_the_top_cause(
    gmm_advisor: Advisor, question: str, lead: str
) -> None:
    ans = gmm_advisor.ask(question)
    if lead == "not yes":
        assert not ans.answer.startswith(("Yes", "是")), ans.answer
    else:
        assert ans.answer.startswith(lead), ans.answer
    assert "GroupedMatmul" in ans.answer  # the measured account follows the verdict


def test_a_claim_about_the_ranks_it_opens_with_is_left_to_their_verdicts() -> None:
    from advisor_chat.agent.planner import _OPENS_WITH_UNIT

    assert _OPENS_WITH_UNIT.match("0号卡或者15号卡拖慢了all-to-all")
    assert _OPENS_WITH_UNIT.match("rank 3 is slower because it reads more data")
    assert _OPENS_WITH_UNIT.match("the node 1 NICs are slow")
    # ranks named inside a described mechanism: the mechanism is the claim
    assert not _OPENS_WITH_UNIT.match(
        "我们那个先reduce到每台机器的0号卡、再broadcast回去的同步函数导致的"
    )
    assert not _OPENS_WITH_UNIT.match("each expert gets too few tokens on ranks 0-7")
