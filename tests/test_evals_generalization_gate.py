"""The offline backend over the generalization set (issue 22): fault kinds no rule was written for.

``evals/datasets/generalization.yaml`` holds 10 simulated fault kinds; half of the kinds are held
out by a seeded draw (``heldout_kinds``) and never used to tune the diagnosis or the answers.
The tune kinds must hold ``TUNE_GATE``; the held-out kinds are a regression floor at
``HELDOUT_FLOOR``, below what was measured, and the assertion says only the rate, never which
held-out items fail (reading them would make them tuning data).
"""

from __future__ import annotations

import pytest
from _sampling import assert_sampled_gate

from advisor_chat.config import load_settings
from advisor_chat.evals.dataset import load_dataset
from advisor_chat.evals.runner import EvalReport, run_eval

TUNE_GATE = 0.95
# Measured 2026-12-03 (session 8): before the attribution / decomposition work tune 21/60,
# held-out 24/56 (42.9%); after it tune 60/60, held-out 42/56 (75.0%) at the first measurement,
# 44/56 (78.6%) after the development kinds (session 9).
# Issue 22 asks held-out >= 85%: not reached; this floor only catches a regression.
HELDOUT_FLOOR = 0.70


@pytest.fixture(scope="module")
def generalization_report(tmp_path_factory: pytest.TempPathFactory) -> EvalReport:
    settings = load_settings(model="offline")
    return run_eval(load_dataset("generalization"), settings=settings)


@pytest.mark.slow
def test_every_generalization_item_resolves(generalization_report: EvalReport) -> None:
    assert generalization_report.metrics["turns"] >= 100
    broken = [
        t.item_id
        for t in generalization_report.turns
        if t.error_kind in ("dataset", "load", "unavailable")
    ]
    assert not broken, broken


@pytest.mark.slow
def test_generalization_tune_gate_and_heldout_floor(generalization_report: EvalReport) -> None:
    splits = generalization_report.breakdown(lambda t: t.split)
    assert set(splits) == {"tune", "heldout"}
    tune = splits["tune"]["pass_rate"] or 0.0
    failing = [t.item_id for t in generalization_report.failures if t.split == "tune"]
    assert tune >= TUNE_GATE, (tune, failing)
    held = splits["heldout"]["pass_rate"] or 0.0
    assert held >= HELDOUT_FLOOR, f"held-out pass rate {held:.3f} < {HELDOUT_FLOOR}"


# The development sets (written without reading the diagnosis; all tune), each gated at 95%:
# - generalization_dev: 26/50 before its kinds were looked at, 49/50 after the mechanisms they
#   exposed were added;
# - generalization_dev2: 18/50 before, 50/50 after (send/receive wait attribution, device vs host
#   stall, job-wide dispatch bound, intra-node traffic off HCCS);
# - generalization_dev3: 28/50 before, 50/50 after (where the job's shared idle sits, a busy
#   stage's extra work, named changes judged against the causes, the collectives that hold the
#   communication time);
# - generalization_dev4: 22/50 before, 49/50 after (a rank whose lateness is inherited from shared
#   collectives is no culprit, tensor-parallel groups across nodes, a rank's periodic stall,
#   operator compilation for new shapes, HCCL_BUFFSIZE and named environment variables, AlltoAll
#   sized by a load imbalance);
# - generalization_dev5 (question styles over the development kinds): 48/60 before, 60/60 after
#   (a pasted report read from its question line, ruled-out suspects, node questions, a
#   step-scoped cause for "why are those steps slow", a hotspot's share of the device time);
# - generalization_dev6 (ten more question styles): 47/60 before, 60/60 after (a vendor-bug
#   suspicion judged, verdicts that name what they blame, health questions' polarity, "the other
#   ranks", the language that carries a code-switched message).
DEV_GATE = 0.95
# - generalization_dev7 (3 new kinds, 30 questions): 13/30 before, 30/30 after (a few very long
#   launches: a device stalling in bursts; the job's idle between many short kernels after the
#   backward pass: a per-tensor optimizer; gradients all-reduced in every backward pass; the
#   capacity hypothesis; no_sync and the fused optimizer as named changes).
# - generalization_dev8 (3 new kinds, 30 questions): 8/30 before (activation recomputation, a
#   RoCE fabric slow on every link, a host-bound small model), see docs/EVALS.md for after.
# - generalization_dev9 (2 new kinds, 20 questions): 5/20 before, 20/20 after (the host's
#   synchronize calls placed in the step, a heavy capture said and a light one asked for).
# - generalization_dev10 (4 new kinds, 40 questions): 14/40 before, 40/40 after (a host stall
#   hidden under the rank's own collectives, the launch path of a host-bound job, composed
#   RMSNorm / RoPE chains, more layers told from a recompute); the blind sets did not move.
# - generalization_dev11 (4 new kinds, 40 questions): 18/40 before, 34/40 in session 23, 39/40
#   after the collective that holds the communication and the optimizer step as a whole.
# - generalization_dev12 (4 new kinds, 40 questions): 16/40 before, 39/40 after (ranks late
#   together, slow launch calls, an allocator that cannot grow, experts in a loop, point-to-point
#   transfers outside a pipeline).
# - generalization_dev13 (4 new kinds, 40 questions): 13/40 before, 34/40 in session 25, 38/40
#   after a node seen in context, "is it normal that", a setting that is no hardware fault.
# - generalization_dev14 (4 new kinds, 40 questions): 18/40 before, 40/40 after (idle inside
#   blocking copies, a collective slow on links another runs at full speed, fused kernels missing
#   on an older stack, more micro-batches per step, kernel counts per rank).


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "generalization_dev",
        "generalization_dev2",
        "generalization_dev3",
        "generalization_dev4",
        "generalization_dev5",
        "generalization_dev6",
        "generalization_dev7",
    ],
)
def test_development_kinds_gate(name: str) -> None:
    """Sets 1-7 here; sets 8-14 in ``test_evals_generalization_gate_later.py`` (a second file, so
    that ``pytest-xdist --dist loadfile`` runs the two halves on two workers)."""
    assert_sampled_gate(name, DEV_GATE)
