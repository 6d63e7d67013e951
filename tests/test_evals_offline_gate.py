"""The offline backend over the whole eval dataset: every item resolves, and the pass-rate gate holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_chat.config import load_settings
from advisor_chat.evals.dataset import load_dataset
from advisor_chat.evals.runner import EvalReport, run_eval

GATE = 0.9

# The offline advisor passed the gate on 2026-11-29 17:09 UTC (65/70 = 92.9%; failing: matmul-why-en#0,
# pp2-free-en/zh, pt2-topop-en/zh). If a change drops it under the gate, fix the advisor; do not weaken
# the dataset items (evals/datasets).


@pytest.fixture(scope="module")
def offline_report(real_samples: Path, tmp_path_factory: pytest.TempPathFactory) -> EvalReport:
    settings = load_settings(model="offline")
    report = run_eval(load_dataset(), settings=settings, real_root=real_samples)
    report.gate = GATE
    report.write(tmp_path_factory.mktemp("eval_reports"))
    return report


@pytest.mark.slow
def test_every_item_resolves_and_runs(offline_report: EvalReport) -> None:
    assert offline_report.metrics["turns"] >= 64
    assert not offline_report.skipped
    broken = [
        f"{t.item_id}#{t.turn}: {t.error}"
        for t in offline_report.turns
        if t.error_kind in ("dataset", "load")
    ]
    assert not broken, broken


@pytest.mark.slow
def test_metrics_are_all_measured(offline_report: EvalReport) -> None:
    m = offline_report.metrics
    for key in (
        "pass_rate",
        "diagnosis_accuracy",
        "citation_precision",
        "citation_recall",
        "grounded_rate",
        "refusal_accuracy",
        "latency_p50_ms",
        "latency_p95_ms",
    ):
        assert m[key] is not None, key
    langs = offline_report.breakdown(lambda t: t.lang)
    assert set(langs) == {"en", "zh"}
    md = offline_report.to_markdown()
    for label in ("pass rate", "citation precision", "grounded-number rate", "latency p50"):
        assert label in md


@pytest.mark.slow
def test_offline_pass_rate_gate(offline_report: EvalReport) -> None:
    failures = [f"{t.item_id}#{t.turn}" for t in offline_report.failures]
    assert offline_report.pass_rate >= GATE, failures
