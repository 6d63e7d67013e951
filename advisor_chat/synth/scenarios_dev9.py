"""Seventh set of development fault kinds (new kinds; written without reading the diagnosis).

Two more field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev9.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched.

Kinds:

- ``profiler-overhead``: the capture itself is heavy: profiler Level2 with Python call stacks
  (``with_stack=True``) and shapes recorded on every rank. Each operator's launch then carries the
  profiler's host work (~150 µs of stack capture and bookkeeping), so the device idles between
  kernels on every rank and Free looks large, while the job without the profiler is not
  host-bound (public case C05: Level2 creates Free that is not in the real run). The fix is to
  re-collect at Level1 (or Level0) without stacks before tuning dispatch, not to tune the job on
  this capture.
- ``item-sync-every-step``: the training loop calls ``loss.item()`` after the forward pass and
  ``grad_norm.item()`` before the optimizer on every rank. Each call blocks the host in a stream
  synchronize until the device has run everything queued, then the host does its Python work
  (logging, metrics) before it launches the next kernel, so the device idles 3.5-5 ms twice per step
  at the same two places on every rank. The trace shows the ``aclrtSynchronizeStream`` calls (and
  ``aten::item``) right before those idles. The fix is to log every N steps or keep the values on
  the device (no per-step ``.item()``), not the network or one card.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import Cluster, Kernel, default_perturb
from advisor_chat.synth.scenarios import Plan, ScenarioSpec, _key, _r, col, transformer
from advisor_chat.synth.scenarios_dev import _plain, _with_evidence
from advisor_chat.synth.scenarios_dev2 import _kernel_gaps_us
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc, _kernel_gap_us


def _share(part: np.ndarray, whole: np.ndarray) -> float:
    return round(float(np.median(part.sum(axis=1) / whole.sum(axis=1))), 4)


# ---------------------------------------------------------------- profiler-overhead
PO_SCALE = 0.25  # kernels of ~8-575 µs: the job itself keeps the device fed at Level1
PO_GAP_US = 150.0  # device idle before each kernel: the profiler's host work per launch
PO_API_US = 40.0  # the launch call itself, inflated by the profiler's callbacks
PO_LEVEL2_SCALE = 1.04  # Level2's extra counters lengthen every kernel a little


def po_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    p.host_bound[:] = True
    p.api_us[:] = PO_API_US
    p.gap_us[:] = PO_GAP_US
    p.dur_scale[:] = PO_LEVEL2_SCALE
    prog = transformer(layers=4, scale=PO_SCALE, grad_mb=24.0, grad_overlap=3)
    plans = _plain(ranks, prog, p)
    plan = plans[""]
    plans[""] = dataclasses.replace(
        plan, info=dataclasses.replace(plan.info, profiler_level="Level2", with_stack=True)
    )
    return plans


def po_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank idles between kernels because of the profiler's own host work."""
    cl: Cluster = m[""]["cluster"]
    free = col(m, "free_us")
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    durs = np.concatenate([st.k_dur.ravel() for st in cl.steps]) / 1000
    gaps = [float(np.median(_kernel_gaps_us(cl, r))) for r in range(ranks)]
    api = np.concatenate([st.k_api_dur.ravel() for st in cl.steps]) / 1000
    share = free.sum(axis=1) / step.sum(axis=1)
    nums = {
        "kernels_per_step": len(cl.kernels),
        "kernel_us_median": _r(float(np.median(durs))),
        "device_gap_us_between_kernels_median": _r(float(np.median(gaps))),
        "launch_api_us_median": _r(float(np.median(api))),
        "median_free_share": round(float(np.median(share)), 4),
        "median_free_us_per_step": _r(float(np.median(free.mean(axis=1)))),
        "free_share_spread_across_ranks": round(float(share.max() - share.min()), 4),
        "median_computing_share": _share(comp, step),
        "median_step_us": _r(float(np.median(step))),
    }
    key = _key([], "scheduling", ["host-dispatch-bound"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "free_share": nums["median_free_share"],
            "device_gap_us_between_kernels": nums["device_gap_us_between_kernels_median"],
        },
    )
    return _with_evidence(
        key,
        rc,
        profiler_level="Level2",
        with_stack=True,
        record_shapes=True,
        device_gap_us=round(float(np.median(gaps)), 1),
        kernel_us_median=round(float(np.median(durs)), 1),
        capture_artifact=True,
        recapture_advice="Level1 (or Level0) without with_stack / record_shapes",
        launch_blocking_set=False,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- item-sync-every-step
SYNC_AFTER_US = {"loss": 5000.0, "grad_norm": 3500.0}  # host work after each .item() returns
# (logging, metrics, a progress bar: what the loop does with the value)


def _sync_positions(prog: list[Any]) -> dict[int, str]:
    """{kernel index: which .item()}: before the first backward kernel and the optimizer's first."""
    ks = [it for it in prog if isinstance(it, Kernel)]
    first_bwd = next(j for j, k in enumerate(ks) if k.tag.endswith(("_dx", "_dw")))
    first_opt = next(j for j, k in enumerate(ks) if k.op_type == "ForeachMulScalar")
    return {first_bwd: "loss", first_opt: "grad_norm"}


def sync_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    pos = _sync_positions(prog)
    rng = np.random.default_rng(seed + 131)
    p = default_perturb(ranks)
    for r in range(ranks):
        p.kernel_stalls[r] = {
            j: SYNC_AFTER_US[what] * (0.9 + 0.2 * float(rng.random())) for j, what in pos.items()
        }
        p.host_syncs[r] = set(pos)
    return _plain(ranks, prog, p)


def sync_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank's device idles after the two host syncs of each step."""
    cl: Cluster = m[""]["cluster"]
    pos = _sync_positions(cl.program)
    kernels = cl.kernels
    at = sorted(pos)
    stall = {
        what: [g for r in range(ranks) for g in _kernel_gap_us(cl, r, j)] for j, what in pos.items()
    }
    # the host's work after each .item() returns (the device idles that long once it has drained)
    host_work = {
        what: [cl.perturb.kernel_stalls[r][j] for r in range(ranks)] for j, what in pos.items()
    }
    others = [j for j in range(1, len(kernels)) if j not in pos]
    other_gap = [g for r in range(ranks) for j in others[:200] for g in _kernel_gap_us(cl, r, j)]
    free = col(m, "free_us")
    step = col(m, "step_us")
    share = free.sum(axis=1) / step.sum(axis=1)
    per_step = sum(float(np.median(v)) for v in host_work.values())
    nums = {
        "syncs_per_step": len(pos),
        "idle_after_loss_item_us_median": _r(float(np.median(host_work["loss"]))),
        "idle_after_grad_norm_item_us_median": _r(float(np.median(host_work["grad_norm"]))),
        "gap_before_loss_item_kernel_us_median": _r(float(np.median(stall["loss"]))),
        "gap_before_grad_norm_item_kernel_us_median": _r(float(np.median(stall["grad_norm"]))),
        "sync_idle_us_per_step_median": _r(per_step),
        "other_gap_us_median": _r(float(np.median(other_gap))),
        "median_free_us_per_step": _r(float(np.median(free.mean(axis=1)))),
        "median_free_share": round(float(np.median(share)), 4),
        "free_share_spread_across_ranks": round(float(share.max() - share.min()), 4),
        "median_step_us": _r(float(np.median(step))),
    }
    key = _key([], "scheduling", ["host-dispatch-bound"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "sync_idle_us_per_step": nums["sync_idle_us_per_step_median"],
            "syncs_per_step": len(pos),
        },
    )
    return _with_evidence(
        key,
        rc,
        host_api="aclrtSynchronizeStream",
        framework_op="aten::item",
        syncs_per_step=len(pos),
        before_op_types=sorted({kernels[j].op_type for j in at}),
        phase=["before the backward pass", "before the optimizer step"],
        launch_blocking_set=False,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- registry
DEV9_SCENARIOS = (
    ScenarioSpec(
        "profiler-overhead",
        "the capture is heavy (Level2, with_stack=True) on every rank: each launch carries ~150 us "
        "of profiler host work, so the device idles between kernels; the job itself is not "
        "host-bound",
        16,
        4,
        po_plans,
        po_answer,
    ),
    ScenarioSpec(
        "item-sync-every-step",
        "loss.item() after the forward and grad_norm.item() before the optimizer on every rank: "
        "the host blocks in aclrtSynchronizeStream, then the device idles 3.5-5 ms twice per step",
        16,
        4,
        sync_plans,
        sync_answer,
    ),
)
DEV9_KINDS = tuple(s.name for s in DEV9_SCENARIOS)


__all__ = ["DEV9_KINDS", "DEV9_SCENARIOS"]
