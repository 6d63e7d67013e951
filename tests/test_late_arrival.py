"""A culprit the collectives name whose own time the step trace does not hold (issue 24 catalogue:
"a rank without step trace"): the generator plants a host stall on one rank, its
``step_trace_time.csv`` is deleted, and the answers must still name it, instead of "no single
rank". Its kernels take its peers' time and its host launches just in time (host_dispatch), so it
is named a host stall from that evidence, with the missing file still asked for; without host
data it would be "cannot tell" (``test_diagnosis_missing_step_trace``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from advisor_chat.diagnosis.types import Category, Mechanism


@pytest.fixture(scope="module")
def late(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    from advisor_chat.synth import generate

    root = generate("seed-rank12", tmp_path_factory.mktemp("late") / "p", ranks=4, steps=3)
    key = json.loads((root / "answer_key.json").read_text())
    (culprit,) = key["slow_ranks"]
    folders = sorted(p for p in root.iterdir() if p.name.endswith("_ascend_pt"))
    (folders[culprit] / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").unlink()
    shutil.rmtree(root / "answer_key.json", ignore_errors=True)
    return root, culprit


def test_diagnosis_names_the_late_rank_from_the_evidence_left(late) -> None:
    from advisor_chat.diagnosis.attribution import attribute
    from advisor_chat.diagnosis.engine import diagnose
    from advisor_chat.ingest import load_profile

    root, culprit = late
    prof = load_profile(root, use_cache=False)
    d = diagnose(prof)
    top = d.causes[0]
    assert top.mechanism is Mechanism.HOST_STALL and top.category is Category.SCHEDULING
    assert top.culprit.ranks == (culprit,)
    assert {v.rank for v in top.victims} == {0, 1, 2, 3} - {culprit}
    # its cost is the collectives' own account of it (independent: the attribution module)
    att = attribute(prof, [], 1.0)  # 1 µs: every culprit is listed
    assert att is not None
    cost = next(c.cost_us_per_step for c in att.culprits if c.unit.ranks == (culprit,))
    assert top.gain_us == pytest.approx(cost)
    assert [r.kind for r in top.remedies] == ["action", "check"]
    assert "host" in top.remedies[0].text and "step trace" in top.remedies[1].text
    # the job-level exposed communication does not count the wait for it again: each rank's
    # exposed communication less what the collectives measured it waiting for the late rank
    exposed = next(c for c in d.causes if c.mechanism is Mechanism.EXPOSED_COMMUNICATION)
    late = {r for c in att.culprits for r in c.unit.ranks}
    waited: dict[int, float] = {}
    for c in att.culprits:
        for r, v in c.victims.items():
            if r not in late:
                waited[r] = waited.get(r, 0.0) + v
    st = prof.get("step_trace")
    col = "communication_not_overlapped_exclude_receive_us"
    own = (st[col] - st["rank"].map(waited).fillna(0.0)).clip(lower=0.0)
    assert exposed.gain_us == pytest.approx(float(own.groupby(st["step"]).min().mean()), rel=0.02)
    assert exposed.gain_us < exposed.metrics["min_not_overlapped_us"] - 0.9 * cost


@pytest.mark.parametrize(
    ("question", "lead"),
    [
        ("which rank is slow?", r"^Rank {r} holds the job back"),
        ("what should I fix first?", r"^Fix rank {r} first: find what rank {r}'s host does"),
        ("is it a communication problem?", r"^No, the main bottleneck is the host side"),
        ("应该先优化什么？", r"^先处理{r}号卡——找出{r}号卡的主机在下发之外做了什么"),
    ],
)
def test_answers_lead_with_the_late_rank(late, question: str, lead: str) -> None:
    import re

    from advisor_chat.agent import Advisor
    from advisor_chat.diagnosis.engine import open_profile

    root, culprit = late
    adv = Advisor(open_profile(root, use_cache=False))
    text = adv.ask(question).answer
    assert re.search(lead.format(r=culprit), text), text[:400]
