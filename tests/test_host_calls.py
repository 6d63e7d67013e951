"""The host_dispatch tool's ``host_calls`` table and answers to "how long does one <host call> take"."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd
import pytest

from advisor_chat.analyzers.host_dispatch import host_calls


def test_host_calls_per_call_and_per_step_figures_from_constructed_tables() -> None:
    # rank 0: 2 steps, 3 aclnnCat calls of 10, 20, 30 µs; rank 1: 2 steps, 1 call of 40 µs
    hd = pd.DataFrame(
        {
            "rank": [0, 0, 0, 1, 0],
            "step": [1, 1, 2, 2, 2],
            "api_name": ["AscendCL@aclnnCat"] * 4 + ["AscendCL@aclrtSynchronizeStream"],
            "api_duration_us": [10.0, 20.0, 30.0, 40.0, 500.0],
        }
    )
    # python frames: one 2 ms frame on rank 0, and 4 short ones summed into one row (600 µs)
    frames = pd.DataFrame(
        {
            "rank": [0, 0],
            "tid": [1, 1],
            "start_us": [0.0, 10.0],
            "dur_us": [2000.0, 600.0],
            "frame": ["aten::item", "train.py(12): log_metrics"],
            "calls": [1, 4],
        }
    )
    steps = pd.Series({0: 2.0, 1: 2.0})
    t = host_calls(hd, frames, steps).set_index("name")
    cat = t.loc["aclnnCat"]
    assert cat["source"] == "cann_api" and cat["ranks"] == 2
    assert cat["per_call_us_median"] == pytest.approx(25.0)  # median of 10, 20, 30, 40
    assert cat["per_call_us_mean"] == pytest.approx(25.0)
    assert cat["calls_per_step"] == pytest.approx(statistics.median([3 / 2, 1 / 2]))
    assert cat["time_per_step_us"] == pytest.approx(statistics.median([60 / 2, 40 / 2]))
    item = t.loc["aten::item"]
    assert item["source"] == "python" and item["time_per_step_us"] == pytest.approx(1000.0)
    log = t.loc["log_metrics"]  # the function of a 'file.py(line): function' frame
    assert log["per_call_us_mean"] == pytest.approx(150.0)  # 600 µs over 4 calls
    assert pd.isna(log["per_call_us_median"])  # no single call recorded
    assert log["calls_per_step"] == pytest.approx(2.0)
    # ordered by time per step
    assert list(t.index[:2]) == ["aten::item", "log_metrics"]


def test_host_calls_empty_without_durations() -> None:
    assert host_calls(pd.DataFrame(), pd.DataFrame(), None).empty


def _trace_durations(root: Path, name: str) -> list[float]:
    """Durations (µs) of the trace events called ``name``, every rank (read with json)."""
    out = []
    for f in sorted(root.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json")):
        doc = json.loads(f.read_text())
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        out += [float(e["dur"]) for e in events if e.get("name") == name and e.get("ph") == "X"]
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_named_host_call_gets_its_measure(scenario, lang: str) -> None:
    from advisor_chat.agent import Advisor
    from advisor_chat.diagnosis.engine import open_profile
    from advisor_chat.evals.evaluators import ExpectedNumber, number_found, numbers_in_text

    root = scenario("item-sync-every-step")
    durs = _trace_durations(root, "aten::item")
    assert durs  # the planted host call is in the trace
    q = {
        "en": "how long does one aten::item call take?",
        "zh": "aten::item 每次调用要多久？",
    }[lang]
    answer = Advisor(open_profile(root, use_cache=False)).ask(q)
    stated = numbers_in_text(answer.answer)
    expected = ExpectedNumber(name="per_call_us", value=statistics.median(durs), rel_tol=0.02)
    assert number_found(expected, stated, []), answer.answer
    assert "host_calls" in answer.answer
    assert answer.grounding.numbers_total == answer.grounding.numbers_grounded


def test_a_call_the_profile_does_not_have_adds_nothing(scenario) -> None:
    from advisor_chat.agent import Advisor
    from advisor_chat.diagnosis.engine import open_profile

    answer = Advisor(open_profile(scenario("item-sync-every-step"), use_cache=False)).ask(
        "how long does one aten::nonexistent_op call take?"
    )
    assert "host_calls" not in answer.answer


def test_a_quantity_question_gets_its_figures_first_a_why_question_its_answer(scenario) -> None:
    from advisor_chat.agent import Advisor
    from advisor_chat.diagnosis.engine import open_profile

    adv = Advisor(open_profile(scenario("item-sync-every-step"), use_cache=False))
    only = adv.ask("how long does one aten::item call take?").answer
    assert only.startswith("Host calls")
    both = adv.ask("how long does one aten::item call take? is the host the problem?").answer
    assert not both.startswith("Host calls") and "Host calls" in both
