"""Development sets 8-14 gated at 95%, like sets 1-7 in ``test_evals_generalization_gate.py``.

The sets, their before / after scores and what they exposed are listed there and in
docs/EVALS.md; this file only holds the second half of the gate, so that ``pytest-xdist --dist
loadfile`` runs the two halves on two workers.
"""

from __future__ import annotations

import pytest

from advisor_chat.config import load_settings
from advisor_chat.evals.dataset import load_dataset
from advisor_chat.evals.runner import run_eval

DEV_GATE = 0.95


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "generalization_dev8",
        "generalization_dev9",
        "generalization_dev10",
        "generalization_dev11",
        "generalization_dev12",
        "generalization_dev13",
        "generalization_dev14",
    ],
)
def test_development_kinds_gate_later(name: str) -> None:
    report = run_eval(load_dataset(name), settings=load_settings(model="offline"))
    assert report.metrics["turns"] >= 20
    rate = report.metrics["pass_rate"] or 0.0
    assert rate >= DEV_GATE, (rate, [t.item_id for t in report.failures])
