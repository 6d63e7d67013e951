"""The fifth development set of fault kinds (scenarios_dev7.py) and the mechanisms it exposed.

- The planted fault is in the written files (read with csv, independently of ingest and of the
  generator's own helpers).
- The diagnosis' new evidence on those profiles, checked against the files and the answer keys:
  a few very long launches (``Outliers``), the job's idle between short kernels (``tiny_run``),
  gradients all-reduced in every backward pass (``pass_sync``), the capacity hypothesis and the
  named-change verdicts.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from _dev_files import kernel_rows, rank_dirs, read_csv

from advisor_chat.agent.parse import find_hypotheses
from advisor_chat.agent.project import named_suspect, suspect_verdict
from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.decompose import device_account, job_idle_shape, pass_sync
from advisor_chat.diagnosis.hypotheses import judge
from advisor_chat.ingest import load_profile


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _by_step(rows: list[dict[str, str]]) -> dict[int, list[dict[str, str]]]:
    """Kernel rows by step, from the step boundaries of step_trace_time.csv (start order)."""
    out: dict[int, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        out[int(r.get("Step Id") or 0)].append(r)
    return out


def _load(root: Path) -> Any:
    return load_profile(root, use_cache=False, progress=False)


# ---------------------------------------------------------------- ecc-kernel-retries
def test_ecc_retries_are_a_few_launches_twelve_times_longer_on_one_rank(scenario) -> None:
    root = scenario("ecc-kernel-retries")
    key = _key(root)
    culprit = key["root_cause"]["culprit_ranks"][0]
    dirs = rank_dirs(root)
    rows = {r: kernel_rows(d) for r, d in dirs.items()}
    peer = next(r for r in dirs if r != culprit)
    # same launches in the same order on both ranks: compare position by position
    a = [float(x["Duration(us)"]) for x in rows[culprit]]
    b = [float(x["Duration(us)"]) for x in rows[peer]]
    assert len(a) == len(b)
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    long = [q for q in ratios if q > 5]
    n_steps = len(key["evidence"]["steps"])
    assert len(long) == 3 * n_steps
    assert 11 < median(long) < 13
    assert 0.97 < median(q for q in ratios if q <= 5) < 1.03
    # the same shapes as on the peer: not more work
    assert [x["Input Shapes"] for x in rows[culprit]] == [x["Input Shapes"] for x in rows[peer]]

    acc = device_account(_load(root), [(-1, culprit)], [r for r in dirs if r != culprit])
    assert acc is not None and acc.outliers is not None
    o = acc.outliers
    assert o.per_unit == pytest.approx(3, abs=0.01)
    assert o.ratio == pytest.approx(
        key["expected_numbers"]["retried_kernel_ratio_median"], rel=0.05
    )
    assert o.share > 0.9 and abs(o.normal_ratio - 1) < 0.03
    assert set(o.ops) <= set(key["evidence"]["outlier_op_types"])


def test_a_uniformly_slower_operator_is_not_outliers(scenario) -> None:
    root = scenario("matmul-shape-regression")
    key = _key(root)
    culprit = key["slow_ranks"][0]
    ranks = _load(root).ranks
    acc = device_account(_load(root), [(-1, culprit)], [r for r in ranks if r != culprit])
    assert acc is not None and acc.verdict != "none"
    assert acc.outliers is None


# ---------------------------------------------------------------- unfused-optimizer
def test_unfused_optimizer_idles_between_tiny_kernels_after_the_backward(scenario) -> None:
    root = scenario("unfused-optimizer")
    key = _key(root)
    dirs = rank_dirs(root)
    rows = kernel_rows(dirs[0])
    n = key["expected_numbers"]["optimizer_small_kernels_per_step"]
    steps = _by_step(rows)
    for srows in steps.values():
        tiny = [x for x in srows if float(x["Duration(us)"]) < 10]
        assert len(tiny) == n
        # after the last backward kernel of the step (names with Grad)
        last_grad = max(i for i, x in enumerate(srows) if "grad" in x["Name"].lower())
        assert all(srows.index(x) > last_grad for x in tiny)
    wait_tiny = sum(float(x["Wait Time(us)"]) for x in rows if float(x["Duration(us)"]) < 10)
    free = sum(float(x["Free"]) for x in read_csv(dirs[0], "step_trace_time.csv"))
    assert wait_tiny / free > 0.85

    shape = job_idle_shape(_load(root), list(dirs))
    assert shape is not None and shape.kind == "tiny_run"
    assert shape.gaps_per_step == pytest.approx(n, abs=1)
    assert shape.after_collective
    assert shape.idle_us == pytest.approx(wait_tiny / len(steps), rel=0.05)
    d = diagnose(_load(root))
    top = d.causes[0]
    assert top.culprit.kind == "job" and top.mechanism.value == "host_stall"
    assert "dataloader" not in " ".join(r.text for r in top.remedies)
    assert "fused" in top.remedies[0].text.lower()


def test_an_offloaded_optimizer_is_still_one_stretch(scenario) -> None:
    root = scenario("cpu-offload-optimizer")
    shape = job_idle_shape(_load(root), _load(root).ranks)
    assert shape is not None and shape.kind == "stretch"


# ---------------------------------------------------------------- grad-sync-every-microbatch
def test_grad_sync_all_reduces_in_every_backward_pass(scenario) -> None:
    root = scenario("grad-sync-every-microbatch")
    key = _key(root)
    d0 = rank_dirs(root)[0]
    every = read_csv(d0, "kernel_details.csv")
    steps = _by_step(every)
    for srows in steps.values():
        # a backward pass starts at the first Grad kernel after a forward RmsNorm
        passes, seen_fwd = 0, False
        per_pass: dict[int, int] = defaultdict(int)
        for x in srows:
            name = x["Name"].lower()
            if x["Type"] == "RmsNorm":
                seen_fwd = True
            elif "grad" in name and seen_fwd:
                passes, seen_fwd = passes + 1, False
            if "allreduce" in name and passes:
                per_pass[passes] += 1
        assert passes == key["expected_numbers"]["micro_batches_per_step"]
        # every pass all-reduces its gradients; the last one also holds the step-closing ones
        first = per_pass[1]
        assert all(per_pass[i] == first for i in range(1, passes))
        assert per_pass[passes] > first
        assert passes * first == key["expected_numbers"]["gradient_allreduces_per_step"]
    ps = pass_sync(_load(root), [0, 1, 2])
    assert ps is not None
    assert ps.passes == key["expected_numbers"]["micro_batches_per_step"]
    assert ps.passes_with_sync == ps.passes
    assert (
        ps.passes_with_sync * ps.allreduces_per_pass
        == (key["expected_numbers"]["gradient_allreduces_per_step"])
    )
    d = diagnose(_load(root))
    top = d.causes[0]
    assert top.mechanism.value == "exposed_communication"
    assert "no_sync" in top.remedies[0].text
    assert top.metrics["gradient_allreduces_per_step"] == 16


def test_one_backward_pass_per_step_is_no_pass_sync(scenario) -> None:
    assert pass_sync(_load(scenario("seed-rank12")), [0, 1]) is None


# ---------------------------------------------------------------- verdicts
def test_capacity_hypothesis_is_parsed_and_judged(scenario) -> None:
    for q in ("是不是NPU算力不够？要不要再加几台机器", "do we just need more NPUs?"):
        assert "capacity" in find_hypotheses(q, "yes_no"), q
    idle = judge(diagnose(_load(scenario("unfused-optimizer"))), "capacity")
    assert idle.status == "contradicted"
    # a job hotspot is work that can be cut: more NPUs would only split it
    hot = judge(diagnose(_load(scenario("unfused-attention"))), "capacity")
    assert hot.status == "contradicted"
    assert "cut it first" in hot.reason


def test_named_changes_judged_against_the_causes(scenario) -> None:
    assert named_suspect("we never call no_sync during gradient accumulation") == "no_sync"
    assert named_suspect("optimizer has foreach=False") == "fused_optimizer"
    ga = diagnose(_load(scenario("grad-sync-every-microbatch")))
    assert suspect_verdict(ga, "no_sync", False, False).lines[0].startswith("Yes")
    ecc = diagnose(_load(scenario("ecc-kernel-retries")))
    assert not suspect_verdict(ecc, "no_sync", False, False).lines[0].startswith("Yes")
