"""Development sets 8-14 gated at 95%, like sets 1-7 in ``test_evals_generalization_gate.py``.

The sets, their before / after scores and what they exposed are listed there and in
docs/EVALS.md; this file only holds the second half of the gate, so that ``pytest-xdist --dist
loadfile`` runs the two halves on two workers.
"""

from __future__ import annotations

import pytest
from _sampling import assert_sampled_gate

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
    assert_sampled_gate(name, DEV_GATE)
