"""Two questions about the whole run, on profiles whose planted fault is known.

- "which step is the slowest and why?" names the slowest step (its slowest rank's step time, from
  the step_trend tool) and then what happened in it: on ``hccl-wait-skew`` rank 5 stalls 2.5 s in
  one step (the answer key's event), on ``jit-compile-mode`` every step loses the same time.
- "how much faster if everything were fixed?" opens with every cause's gain together.
"""

from __future__ import annotations

import json
import re

import pytest

from advisor_chat.agent.advisor import Advisor
from advisor_chat.config import load_settings
from advisor_chat.evals.evaluators import numbers_in_text
from advisor_chat.ingest import load_profile


@pytest.fixture(scope="module")
def advisor(scenario, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    made: dict[str, Advisor] = {}

    def make(name: str) -> Advisor:
        if name not in made:
            made[name] = Advisor(
                load_profile(scenario(name), progress=False),
                settings=load_settings(model="offline", home=home),
            )
        return made[name]

    return make


def _step_times_ms(adv: Advisor) -> dict[int, float]:
    """Each step's time (ms) as its slowest rank's step_us, computed here from the step trace."""
    st = adv.session.profile.get("step_trace")
    return (st.groupby("step")["step_us"].max() / 1000.0).to_dict()


@pytest.mark.parametrize(
    ("question", "lead"),
    [
        ("which step is the slowest and why?", "Step {step} is the slowest: "),
        ("哪一步最慢？为什么", "最慢的是第 {step} 步："),
    ],
)
def test_the_slowest_step_is_named_then_its_event(advisor, scenario, question, lead) -> None:
    adv = advisor("hccl-wait-skew")
    key = json.loads((scenario("hccl-wait-skew") / "answer_key.json").read_text())
    step = key["root_cause"]["events"][0][0]
    times = _step_times_ms(adv)
    assert max(times, key=times.__getitem__) == step  # the construction: the stall's step
    answer = adv.ask(question)
    text = " ".join(answer.answer.split())
    assert text.startswith(lead.format(step=step)), text[:300]
    first = text.split("。" if answer.language == "zh" else ". ")[0]
    shown = [n.value for n in numbers_in_text(first)]
    assert any(abs(v - times[step]) <= 0.001 * times[step] for v in shown), first
    late = str(key["expected_numbers"]["late_rank"])
    assert re.search(rf"rank {late}\b|{late}号卡", text), text[:600]
    assert "within 5%" not in text and "相差不到 5%" not in text
    assert answer.grounding.ungrounded == []


def test_steps_that_take_the_same_time_are_said_to_be_even(advisor) -> None:
    adv = advisor("jit-compile-mode")
    times = _step_times_ms(adv)
    assert max(times.values()) < 1.05 * min(times.values())  # the construction: no step event
    text = " ".join(adv.ask("which step is the slowest and why?").answer.split())
    assert "about the same time (within 5%): none stands out" in text.split(". ")[0], text[:300]


@pytest.mark.parametrize(
    ("question", "lead"),
    [
        ("how much faster could this job get if everything were fixed?", "Fixing both saves "),
        ("全部问题都修好，总共能快多少？", "全部修复后每步"),
    ],
)
def test_everything_fixed_opens_with_every_cause_together(advisor, question, lead) -> None:
    adv = advisor("jit-compile-mode")
    from advisor_chat.diagnosis import diagnose

    gains_ms = [
        float(c.gain_us) / 1000.0 for c in diagnose(adv.session.profile).causes if c.gain_us
    ]
    assert len(gains_ms) == 2  # the construction: online compilation and exposed communication
    text = " ".join(adv.ask(question).answer.split())
    assert text.startswith(lead), text[:300]
    first = [n.value for n in numbers_in_text(re.split(r"。|\. ", text)[0])]
    for want in (sum(gains_ms), *gains_ms):
        assert any(abs(v - want) <= 0.05 + 0.005 * want for v in first), (want, text[:300])
