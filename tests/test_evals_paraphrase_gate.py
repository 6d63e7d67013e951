"""The offline backend over the paraphrase set (issue 12): every item resolves, and both splits hold the gate.

The paraphrase set (``evals/datasets/paraphrase_*.yaml``) is scored per split; the held-out split is
never used to tune the advisor. ``GATE`` is the 95% issue 12 asks for, on each split.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_chat.config import load_settings
from advisor_chat.evals.dataset import load_dataset
from advisor_chat.evals.runner import EvalReport, run_eval

GATE = 0.95
# Issue 12 asks for 95% on both splits. Measured 2026-12-01 17:19 UTC on 40f49f3: overall 227/232 =
# 97.8%; tune 137/140 = 97.9%, held-out 90/92 = 97.8% (evals/reports/paraphrase-offline.md; baseline
# before the diagnosis-based planner: 81.9%). Do not weaken the dataset to
# pass; fix the advisor.


@pytest.fixture(scope="module")
def paraphrase_report(real_samples: Path, tmp_path_factory: pytest.TempPathFactory) -> EvalReport:
    settings = load_settings(model="offline")
    report = run_eval(load_dataset("paraphrase"), settings=settings, real_root=real_samples)
    report.gate = GATE
    report.write(tmp_path_factory.mktemp("paraphrase_reports"))
    return report


@pytest.mark.slow
def test_every_paraphrase_item_resolves(paraphrase_report: EvalReport) -> None:
    assert paraphrase_report.metrics["turns"] >= 200
    assert not paraphrase_report.skipped
    broken = [
        f"{t.item_id}#{t.turn}: {t.error}"
        for t in paraphrase_report.turns
        if t.error_kind in ("dataset", "load", "unavailable")
    ]
    assert not broken, broken


@pytest.mark.slow
def test_paraphrase_gate_on_both_splits(paraphrase_report: EvalReport) -> None:
    splits = paraphrase_report.breakdown(lambda t: t.split)
    assert set(splits) == {"tune", "heldout"}
    for name, m in splits.items():
        failing = [f"{t.item_id}#{t.turn}" for t in paraphrase_report.failures if t.split == name]
        assert (m["pass_rate"] or 0.0) >= GATE, (name, m["pass_rate"], failing)
