"""End to end on the synthetic ``seed-rank12`` scenario: real ingest, analyzers, case library.

Expected facts come from the generator's answer key (known by construction), not from the code.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import pytest_socket

from advisor_chat.agent import Advisor, extract_numbers
from advisor_chat.config import load_settings

# The first case search of a session builds the case index (minutes on a loaded 2-core machine).
pytestmark = pytest.mark.slow

SCHEDULING_CASES = {"host-dispatch-bound", "rank12-free-16card"}


@pytest.fixture(scope="module")
def seed12(scenario) -> tuple[Path, dict]:
    path = scenario("seed-rank12")
    return path, json.loads((path / "answer_key.json").read_text())


@pytest.fixture(scope="module")
def profile(seed12):
    from advisor_chat.ingest import load_profile

    return load_profile(seed12[0])


@pytest.fixture(scope="module")
def adv(profile) -> Advisor:
    a = Advisor(profile, settings=load_settings())
    a.warm_up()
    return a


def _times_us(text: str) -> list[float]:
    return [n.value * n.scale for n in extract_numbers(text) if n.dim == "time"]


def _check_rank12_answer(ans, key: dict) -> None:
    excess = key["expected_numbers"]["free_excess_us_per_step"]
    assert key["slow_ranks"] == [12] and key["category"] == "scheduling"
    assert ans.intent == "explain_rank"
    # the excess Free of rank 12 is stated (displayed in ms, within rounding of the planted value)
    assert any(abs(v - excess) <= 0.03 * excess for v in _times_us(ans.answer)), ans.answer
    # cited scheduling case(s), concrete suggestions with a gain tied to a finding
    assert SCHEDULING_CASES & {c.id for c in ans.cases}, [c.id for c in ans.cases]
    assert ans.suggestions and all(s.text for s in ans.suggestions)
    first = ans.suggestions[0]
    assert (first.kind, first.cause_id) == ("action", "cause.host_stall.r12")
    assert first.estimated_gain_us and abs(first.estimated_gain_us - excess) <= 0.05 * excess
    assert all(s.cause_id for s in ans.suggestions if s.estimated_gain_us)
    assert all(s.estimated_gain_us is None for s in ans.suggestions if s.kind == "check")
    # findings carry their source files
    assert ans.findings and all(f.sources for f in ans.findings)
    assert any("step_trace_time.csv" in s for f in ans.findings for s in f.sources)
    assert 12 in ans.plot_ranks
    g = ans.grounding
    assert g.numbers_total >= 5 and g.ungrounded == [] and g.numbers_grounded == g.numbers_total


def test_why_is_rank_12_slow_en(adv: Advisor, seed12) -> None:
    ans = adv.ask("why is rank 12 slow?")
    _check_rank12_answer(ans, seed12[1])
    assert ans.answer.startswith(
        "Rank 12 is slow in its own right: its own time (Computing + Free) is"
    )
    assert ans.language == "en"
    assert "Free" in ans.answer and re.search(
        r"\bwait .{0,40}\bfor it\b", ans.answer
    )  # the victims


def test_why_is_rank_12_slow_zh(adv: Advisor, seed12) -> None:
    ans = adv.ask("为什么12号卡慢？")
    _check_rank12_answer(ans, seed12[1])
    assert ans.language == "zh"
    assert ans.answer.startswith("12号卡慢在它自身，是原因所在")


def test_follow_up_other_rank_and_nonexistent_rank(adv: Advisor) -> None:
    adv.reset()
    adv.ask("why is rank 12 slow?")
    ans = adv.ask("and rank 13?")
    assert ans.intent == "explain_rank"
    # rank 13 is a victim (answer key): it waits for rank 12, and is never called "not slow"
    assert (
        ans.answer.startswith("Rank 13 waits ") and "at the collectives for rank 12" in ans.answer
    )
    assert "not slow" not in ans.answer
    assert ans.grounding.ungrounded == []
    zh = adv.ask("那13号卡呢？")
    assert zh.answer.startswith("13号卡在集合通信中等待") and "等的是12号卡" in zh.answer
    bad = adv.ask("why is rank 16 slow?")
    assert "rank 16 does not exist; ranks are 0-15" in bad.answer


@pytest.mark.parametrize(
    "question",
    [
        "which rank is slow?",
        "what kind of bottleneck is this?",
        "是通信问题还是计算问题？",
        "which link is slow?",
        "which operators regressed?",
        "should I enable mc2?",
        "HCCL timeout?",
        "is step time degrading?",
        "summarize",
        "is the data complete? data quality",
    ],
)
def test_all_intents_grounded_on_seed12(adv: Advisor, question: str) -> None:
    ans = adv.ask(question)
    g = ans.grounding
    assert g.ungrounded == [] and g.numbers_grounded == g.numbers_total, (ans.answer, g)
    assert ans.tool_calls


def test_which_rank_is_slow_names_rank_12(adv: Advisor) -> None:
    ans = adv.ask("which rank is slow?")
    assert ans.answer.startswith("Rank 12 holds the job back")
    assert ans.plot_ranks[:1] == [12]


def test_answers_are_fast_once_loaded(adv: Advisor) -> None:
    adv.ask("why is rank 12 slow?")  # analyzers cached per (analyzer, params)
    t0 = time.perf_counter()
    adv.ask("why is rank 12 slow?")
    repeat = time.perf_counter() - t0
    t0 = time.perf_counter()
    adv.ask("and rank 12?")  # same tools, new case query
    follow = time.perf_counter() - t0
    # generous bounds for a loaded 2-core CI machine; the benchmark reports the real figures
    assert repeat < 1.0, repeat
    assert follow < 3.0, follow


def test_no_socket_leaves_the_machine_offline(profile) -> None:
    adv = Advisor(profile, settings=load_settings(model="offline"))
    pytest_socket.disable_socket(allow_unix_socket=False)
    try:
        ans = adv.ask("why is rank 12 slow?")
    finally:
        pytest_socket.enable_socket()
    assert ans.backend == "offline" and ans.cases
