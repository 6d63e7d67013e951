"""The eval runner with a scripted backend: references, placeholders, follow-ups, aggregation, reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor_chat.agent.answer import Answer, CitedCase, Grounding, ToolCallRecord
from advisor_chat.config import load_settings
from advisor_chat.evals import runner as runner_mod
from advisor_chat.evals.dataset import load_dataset
from advisor_chat.evals.runner import run_eval

DATASET = """
- id: t-why
  lang: en
  scenario: seed-rank12
  gen: {ranks: 16, steps: 3}
  turns:
    - q: "Why is rank {slow_rank} slow?"
      expect:
        ranks: "@key:slow_ranks"
        category: "@key:category"
        cases: "@key:expected_case_ids"
        numbers: [{ref: "@key:expected_numbers.free_excess_us_per_step", rel_tol: 0.05}]
        tools: [explain_rank]
    - q: "and rank {other_rank}?"
      expect:
        ranks: ["{other_rank}"]
        verdict: not_slow
- id: t-refuse
  lang: zh
  scenario: seed-rank12
  gen: {ranks: 16, steps: 3}
  variant: {keep_ranks: [0, 1], drop_files: [communication.json]}
  question: "集群里有没有慢链路？"
  expect:
    expect_refusal: true
    refusal_needs: [[communication.json, 通信数据]]
- id: t-bad-ref
  lang: en
  scenario: seed-rank12
  gen: {ranks: 16, steps: 3}
  question: "Which link is slow?"
  expect: {link: "@key:slow_link"}
"""


class Scripted:
    """Answers from the answer key itself, so every check of t-why passes by construction."""

    def __init__(self, key: dict[str, Any], profile: Path) -> None:
        self.key = key
        self.profile = profile
        self.asked: list[str] = []

    def ask(self, q: str) -> Answer:
        self.asked.append(q)
        slow = self.key["slow_ranks"][0]
        if "慢链路" in q:
            return Answer(
                answer="信号不足：没有通信数据（communication.json），无法判断慢链路。",
                language="zh",
            )
        if len(self.asked) == 1:
            gap_ms = self.key["expected_numbers"]["free_excess_us_per_step"] / 1000
            return Answer(
                answer=f"Rank {slow} is host-bound: its Free is {gap_ms:.1f} ms per step above the median.",
                cases=[CitedCase(id=c, title="", source="") for c in self.key["expected_case_ids"]]
                + [CitedCase(id="pipeline-bubbles", title="", source="")],
                tool_calls=[ToolCallRecord(name="explain_rank", args={"rank": slow})],
                grounding=Grounding(numbers_total=1, numbers_grounded=1),
            )
        return Answer(answer=f"Rank {slow} is slow.", grounding=Grounding(numbers_total=0))


def test_runner_scores_scripted_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = tmp_path / "t.yaml"
    ds.write_text(DATASET, encoding="utf-8")
    items = load_dataset(ds)
    settings = load_settings(home=tmp_path / "home")
    monkeypatch.setattr(runner_mod.ProfileSource, "load", lambda self, path: path)
    monkeypatch.setattr(runner_mod, "warm_up", lambda settings: 0.0)
    convs: list[Scripted] = []

    def factory(profile: Path, baseline: Any, settings: Any) -> Scripted:
        root = profile
        while not (root / "answer_key.json").is_file():
            root = (
                root.parent
                if (root.parent / "answer_key.json").is_file()
                else root.with_name(root.name.split("--v")[0])
            )
        c = Scripted(json.loads((root / "answer_key.json").read_text()), profile)
        convs.append(c)
        return c

    report = run_eval(items, settings=settings, factory=factory, real_root=tmp_path)
    key = convs[0].key
    assert convs[0].asked == [
        f"Why is rank {key['slow_ranks'][0]} slow?",
        f"and rank {key['slow_ranks'][0] + 1}?",
    ]
    turns = {(t.item_id, t.turn): t for t in report.turns}
    assert turns[("t-why", 0)].passed, turns[("t-why", 0)].score.failed()  # type: ignore[union-attr]
    follow = turns[("t-why", 1)]
    assert not follow.passed
    assert {c.name for c in follow.score.failed()} == {"ranks", "verdict"}  # type: ignore[union-attr]
    assert turns[("t-refuse", 0)].passed
    bad = turns[("t-bad-ref", 0)]
    assert bad.error_kind == "dataset" and "slow_link" in (bad.error or "")
    # the variant kept 2 ranks and dropped communication.json, outside the generated folder
    variant = convs[1].profile
    assert variant != convs[0].profile
    assert len(list(variant.glob("*/profiler_info_*.json"))) == 2
    assert not list(variant.rglob("communication.json"))
    assert list(convs[0].profile.rglob("communication.json"))
    m = report.metrics
    assert m["turns"] == 4 and m["passed"] == 2
    assert m["pass_rate"] == pytest.approx(0.5)
    n_req = len(key["expected_case_ids"])
    assert m["citation_recall"] == pytest.approx(1.0)
    assert m["citation_precision"] == pytest.approx(n_req / (n_req + 1))
    assert m["refusal_accuracy"] == pytest.approx(1.0)
    assert m["errors"] == 1
    jp, mp = report.write(tmp_path / "reports")
    data = json.loads(jp.read_text(encoding="utf-8"))
    assert data["metrics"]["passed"] == 2
    assert set(data["by_language"]) == {"en", "zh"}
    assert "`t-why` turn 1" in mp.read_text(encoding="utf-8")
