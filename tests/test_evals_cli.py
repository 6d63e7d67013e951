"""``advisor-chat eval``: options reach the runner, reports are written, the gate sets the exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from advisor_chat.agent.answer import Answer
from advisor_chat.cli.main import app
from advisor_chat.evals import runner as runner_mod
from advisor_chat.evals.evaluators import Resolved, evaluate_turn
from advisor_chat.evals.runner import EvalReport, TurnResult

DATASET = """
- {id: a-one, lang: en, scenario: healthy, question: "is anything wrong?"}
- {id: b-two, lang: zh, scenario: healthy, question: "有问题吗？"}
"""


def _fake_report(passing: int, total: int, settings: Any) -> EvalReport:
    turns = []
    for i in range(total):
        ok = i < passing
        ans = Answer(answer="rank 3" if ok else "nothing", language="en")
        score = evaluate_turn(ans, Resolved(lang="en", ranks=[3]))
        turns.append(
            TurnResult(
                item_id=f"i{i}", turn=0, lang="en", question="q", latency_ms=10.0, score=score
            )
        )
    return EvalReport(
        backend=runner_mod.backend_name(settings),
        datasets=["t"],
        turns=turns,
        started_at="now",
        duration_s=0.1,
    )


@pytest.mark.parametrize(("passing", "gate", "code"), [(9, 0.9, 0), (8, 0.9, 1), (8, 0.8, 0)])
def test_eval_gate_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, passing: int, gate: float, code: int
) -> None:
    ds = tmp_path / "d.yaml"
    ds.write_text(DATASET, encoding="utf-8")
    seen: dict[str, Any] = {}

    def fake_run_eval(
        items: list[Any], *, settings: Any, progress: Any = None, **kw: Any
    ) -> EvalReport:
        seen["ids"] = [i.id for i in items]
        seen["model"] = settings.model
        seen["base_url"] = settings.base_url
        return _fake_report(passing, 10, settings)

    monkeypatch.setattr(runner_mod, "run_eval", fake_run_eval)
    out = tmp_path / "reports"
    args = ["eval", "--dataset", str(ds), "--out", str(out), "--gate", str(gate), "--json"]
    args += ["--model", "qwen", "--base-url", "http://127.0.0.1:9/v1", "--only", "a-"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == code, res.output
    assert seen == {"ids": ["a-one"], "model": "qwen", "base_url": "http://127.0.0.1:9/v1"}
    data = json.loads((out / "d-qwen_127.0.0.1_9.json").read_text(encoding="utf-8"))
    assert data["metrics"]["passed"] == passing
    assert data["gate_passed"] is (code == 0)
    assert "Gate" in (out / "d-qwen_127.0.0.1_9.md").read_text(encoding="utf-8")


def test_eval_missing_dataset_is_an_input_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["eval", "--dataset", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2
    assert "not found" in res.output


def test_eval_paraphrase_by_name_split_and_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor_chat.evals.dataset import load_dataset

    seen: dict[str, Any] = {}

    def fake_run_eval(
        items: list[Any], *, settings: Any, progress: Any = None, **kw: Any
    ) -> EvalReport:
        seen["items"] = items
        return _fake_report(1, 1, settings)

    monkeypatch.setattr(runner_mod, "run_eval", fake_run_eval)
    args = ["eval", "--dataset", "paraphrase", "--split", "heldout", "--out", str(tmp_path)]
    res = CliRunner().invoke(app, [*args, "--scenario", "slow-link", "--gate", "0"])
    assert res.exit_code == 0, res.output
    # its own report file: the default set's offline.md is not overwritten
    stems = sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".md", ".json"))
    assert stems and all(n.startswith("paraphrase-") for n in stems), stems
    want = [
        i.id
        for i in load_dataset("paraphrase")
        if i.split == "heldout" and i.scenario == "slow-link"
    ]
    assert want and [i.id for i in seen["items"]] == want
    res = CliRunner().invoke(app, ["eval", "--dataset", "paraphrase", "--split", "nope"])
    assert res.exit_code == 2 and "unknown split" in res.output


def test_reports_withhold_held_out_details_unless_asked(tmp_path: Path) -> None:
    """Held-out items count in every rate, but their questions, answers and failed checks are not
    listed (whoever tunes the rules reads these reports) unless ``show_heldout`` is set."""
    turns = []
    for i, (split, ok) in enumerate(
        [("tune", False), ("heldout", False), ("heldout", True), ("tune", True)]
    ):
        ans = Answer(answer="rank 3" if ok else "nothing", language="en")
        turns.append(
            TurnResult(
                item_id=f"{split}-{i}",
                turn=0,
                lang="en",
                question=f"secret question {i}",
                latency_ms=1.0,
                score=evaluate_turn(ans, Resolved(lang="en", ranks=[3])),
                split=split,
            )
        )
    rep = EvalReport(backend="offline", datasets=["t"], turns=turns, started_at="n", duration_s=0.1)
    d = rep.to_dict()
    assert d["metrics"]["turns"] == 4 and d["metrics"]["passed"] == 2  # every item counts
    assert [f["item_id"] for f in d["failures"]] == ["tune-0"]
    assert {t["item_id"] for t in d["turns"]} == {"tune-0", "tune-3"}
    assert d["heldout_withheld"] == 2
    md = rep.to_markdown()
    assert "secret question 1" not in md and "heldout-1" not in md and "tune-0" in md
    assert "1 failure(s) of held-out items not listed" in md
    rep.show_heldout = True
    d = rep.to_dict()
    assert [f["item_id"] for f in d["failures"]] == ["tune-0", "heldout-1"]
    assert d["heldout_withheld"] == 0 and "secret question 1" in rep.to_markdown()


def test_reports_name_blind_kinds_by_a_label_unless_asked() -> None:
    """A blind held-out kind's scenario name says what is planted: the per-scenario scores and the
    load times name it ``blind-N`` (stable) unless ``show_heldout`` is set."""
    from advisor_chat.synth.blind import BLIND_KINDS

    blind = sorted(BLIND_KINDS)[0]
    turns = [
        TurnResult(
            item_id=f"i{i}",
            turn=0,
            lang="en",
            question="q",
            latency_ms=1.0,
            score=evaluate_turn(Answer(answer="rank 3", language="en"), Resolved(lang="en")),
            split="heldout",
            source=src,
        )
        for i, src in enumerate([blind, "seed-rank12"])
    ]
    rep = EvalReport(
        backend="offline",
        datasets=["t"],
        turns=turns,
        started_at="n",
        duration_s=0.1,
        load_s={f"/h/profiles/{blind}": 1.0, "/h/profiles/seed-rank12": 2.0},
    )
    text = json.dumps(rep.to_dict()) + rep.to_markdown()
    assert blind not in text and "seed-rank12" in text
    labels = [k for k in rep.to_dict()["by_scenario"] if k.startswith("blind-")]
    assert len(labels) == 1 and labels[0] in rep.to_markdown()
    assert rep._source(turns[0]) == labels[0]  # stable: the same label on every call
    rep.show_heldout = True
    assert blind in rep.to_dict()["by_scenario"]
