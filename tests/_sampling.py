"""Which generator scenarios the slow equivalence suites run on (CI time, issue 23).

``test_findings_unchanged`` (lazy = eager reads) and ``test_cached_equals_cold`` (cache = files)
check properties of the ingest and cache paths, not of a fault kind. Every scenario costs about
4 s per suite; with 170 kinds the two suites took about 12 minutes of the CI's 28. They run on
:data:`CORE` (the first kinds, which cover every table and export the generator writes, and the
kinds that exercise a column or table few others do) plus a fixed eighth of the other kinds
chosen by a hash of the name (deterministic: the same kinds every run, new kinds fall in or out
by their name, not by when they were added).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")

#: Always checked: the original kinds and those whose files carry a column or table few others do.
CORE = frozenset(
    {
        "seed-rank12", "matmul-shape-regression", "slow-link", "comm-bound-no-overlap",
        "cann-upgrade-pair", "dataloader-stall", "hccl-wait-skew", "degradation", "healthy",
        "pipeline-stage-imbalance", "rotating-stalls", "two-faults", "aicpu-fallback",
        "throttle-onset", "hf32-off-node", "compile-graph-breaks", "node-clock-offset",
        "allocator-fragmentation-late", "pageable-h2d-copy", "hbm-slow-node", "gloo-dp-group",
        "moe-uneven-token-routing", "cfs-throttle-node", "thp-compaction-node",
    }
)  # fmt: skip


def equivalence_sample(names: Iterable[str]) -> list[str]:
    """``names`` in :data:`CORE`, or whose SHA-1 of ``ci:{name}`` is 0 modulo 8 (about an
    eighth: a quarter cost 4 min of CI in session 38), in order."""
    return [
        n
        for n in names
        if n in CORE or int(hashlib.sha1(f"ci:{n}".encode()).hexdigest(), 16) % 8 == 0
    ]


def gate_sample(items: Sequence[T], key: Callable[[T], str]) -> list[T]:
    """About half of ``items``: those whose SHA-1 of ``gate:{key(item)}`` is even, in order.

    The development sets' CI gates ask this half (the full sets run in every session's eval
    battery, docs/EVALS.md); deterministic, independent of how the items score.
    """
    return [
        i for i in items if int(hashlib.sha1(f"gate:{key(i)}".encode()).hexdigest(), 16) % 2 == 0
    ]


def sweep_sample(names: Iterable[str], suite: str) -> list[str]:
    """:data:`CORE` and about half of the other ``names`` (SHA-1 of ``{suite}:{name}`` even).

    For an answer property checked over every generator scenario (e.g. no rank both "not slow"
    and "waited for"): each suite draws its own half, so a kind left out of one suite is in
    another's; deterministic, independent of how the kinds score.
    """
    return [
        n
        for n in names
        if n in CORE or int(hashlib.sha1(f"{suite}:{n}".encode()).hexdigest(), 16) % 2 == 0
    ]


def failure_budget(full_turns: int, rate: float) -> int:
    """Failures a gate of ``rate`` allows on the full set of ``full_turns`` turns.

    A sampled gate holds its failures to the full set's budget: every failure found in the half
    counts as it would in the whole, so the sample is never more lenient than the full gate.
    """
    return int(full_turns * (1.0 - rate) + 1e-9)


def assert_sampled_gate(name: str, rate: float) -> None:
    """Ask :func:`gate_sample`'s half of development set ``name`` offline and hold its failures
    to the whole set's :func:`failure_budget` at ``rate``.

    The full sets run in every session's eval battery (docs/EVALS.md); CI time, issue 23.

    Raises:
        AssertionError: The set is too small, the half asked too few turns, or more turns failed
            than the budget allows (the message lists them: development sets are tuning data).
    """
    from advisor_chat.config import load_settings
    from advisor_chat.evals.dataset import load_dataset
    from advisor_chat.evals.runner import run_eval

    items = load_dataset(name)
    full = sum(len(i.turns) for i in items)
    report = run_eval(gate_sample(items, lambda i: i.id), settings=load_settings(model="offline"))
    assert full >= 20 and report.metrics["turns"] >= full // 4
    failed = [f"{t.item_id}#{t.turn}" for t in report.failures]
    assert len(failed) <= failure_budget(full, rate), failed
