"""Sixth set of development fault kinds (new kinds; written without reading the diagnosis).

Three more field faults of Ascend training jobs, each planted as a mechanism of the simulation
(``advisor_chat.synth.model``), with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev8.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched.

Kinds:

- ``lossy-roce-fabric``: the RoCE fabric is misconfigured (PFC / ECN off, an MTU mismatch, the
  wrong traffic class): every RDMA transfer of every step runs at about a third of the link's
  bandwidth, while the on-node HCCS links are normal. No rank, node, link or step stands out; the
  gradient all-reduces, which cross the nodes, are exposed on every rank. The fix is the network
  configuration, not the model or one card.
- ``full-recompute``: full activation recomputation (Megatron ``--recompute-granularity full``,
  or checkpointing every layer) on every rank: each layer's forward runs again before its backward,
  so the forward operators run twice per step (FlashAttentionScore twice as often as
  FlashAttentionScoreGrad) and Computing grows by the forward's length on every rank. No late rank,
  no idle, links normal. The fix is selective recomputation (or none where memory allows).
- ``small-batch-host-bound``: a small model and micro-batch on every rank: most kernels run for
  less time than the host needs to launch them (~24 µs a launch), so the device idles between
  kernels on every rank although nothing is misconfigured (``ASCEND_LAUNCH_BLOCKING`` unset, the
  task queue on). The fix is more work per launch (a larger micro-batch, fused operators, graph
  mode) and less host overhead, not the network or a card.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    RANKS_PER_NODE,
    Cluster,
    Item,
    Kernel,
    default_perturb,
    node_ip,
)
from advisor_chat.synth.scenarios import Plan, ScenarioSpec, _key, _r, col, group_kinds, transformer
from advisor_chat.synth.scenarios_dev import _plain, _rdma_bw, _with_evidence
from advisor_chat.synth.scenarios_dev2 import _kernel_gaps_us
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_dev4 import _resimulate, _sim_breakdown


def _share(part: np.ndarray, whole: np.ndarray) -> float:
    return round(float(np.median(part.sum(axis=1) / whole.sum(axis=1))), 4)


# ---------------------------------------------------------------- lossy-roce-fabric
LOSSY_FACTOR = 0.33  # RDMA bandwidth / the link's normal bandwidth, in every step
LOSSY_GRAD_MB = 128.0


def _hccs_bw(cl: Cluster, si: int) -> list[float]:
    """Bandwidths (GB/s) of the HCCS (on-node) transfers of step index ``si``."""
    out: list[float] = []
    for op in cl.steps[si].ops:
        k = op.kind
        for r in range(cl.ranks):
            for j in range(k.peer.shape[1]):
                if k.transport[r, j] == 0 and op.link_ms[r, j] > 0:
                    out.append(float(op.link_mb[r, j] / op.link_ms[r, j]))
    return out


def lossy_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    kinds = group_kinds(ranks, 1)
    k = kinds["world"]
    p = default_perturb(ranks)
    p.link_factor = {
        (r, int(k.peer[r, j])): LOSSY_FACTOR
        for r in range(ranks)
        for j in range(k.peer.shape[1])
        if k.transport[r, j] == 1
    }
    return _plain(ranks, transformer(layers=4, grad_mb=LOSSY_GRAD_MB, grad_overlap=3), p)


def lossy_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every RDMA transfer slow in every step; HCCS normal; nothing stands out."""
    cl: Cluster = m[""]["cluster"]
    every = lambda r, q: True  # noqa: E731
    rdma = [x for s in range(len(cl.steps)) for x in _rdma_bw(cl, s, every)]
    hccs = [x for s in range(len(cl.steps)) for x in _hccs_bw(cl, s)]
    notov = col(m, "comm_not_overlapped_us")
    comm = col(m, "communication_us")
    step = col(m, "step_us")
    # the same run on a healthy fabric
    healthy = _sim_breakdown(
        _resimulate(dataclasses.replace(cl, perturb=default_perturb(ranks)), cl.program)
    )
    nums = {
        "rdma_bandwidth_gbps_median": round(float(np.median(rdma)), 3),
        "hccs_bandwidth_gbps_median": round(float(np.median(hccs)), 3),
        "slowest_rdma_link_vs_median": round(float(min(rdma) / np.median(rdma)), 3),
        "rdma_bandwidth_factor": LOSSY_FACTOR,
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_communication_share": _share(comm, step),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_healthy_fabric": _r(float(np.median(healthy["step_us"]))),
        "step_saving_share_healthy_fabric": round(
            float(1 - np.median(healthy["step_us"]) / np.median(step)), 4
        ),
    }
    key = _key(
        [], "communication", ["slow-link-rdma", "comm-not-overlapped"], "bandwidth_gbps", nums
    )
    rc = _all_ranks_rc(
        ranks,
        "slow_link",
        "communication",
        transport="RDMA",
        metrics={
            "rdma_bandwidth_gbps": nums["rdma_bandwidth_gbps_median"],
            "hccs_bandwidth_gbps": nums["hccs_bandwidth_gbps_median"],
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
        },
    )
    return _with_evidence(
        key,
        rc,
        transport="RDMA",
        rdma_bandwidth_gbps=round(float(np.median(rdma)), 1),
        hccs_bandwidth_gbps=round(float(np.median(hccs)), 1),
        nodes=[node_ip(n) for n in range(ranks // RANKS_PER_NODE)],
        all_links=True,
        all_steps=True,
        late_rank=False,
    )


# ---------------------------------------------------------------- full-recompute
RC_LAYERS = 4
RC_TAG = "recompute"
FA_TYPE = "FlashAttentionScore"


def recompute_program(full: bool = True) -> list[Item]:
    """transformer(4 layers), each layer's forward re-run right before that layer's backward.

    The backward runs the layers in reverse order; a layer's backward starts with its MLP
    down-projection input gradient (tag ``mlp_down_dx``).
    """
    prog = transformer(layers=RC_LAYERS)
    if not full:
        return prog
    n_fwd = next(
        i for i, it in enumerate(prog) if isinstance(it, Kernel) and it.tag == "mlp_down_dx"
    )
    per_layer = n_fwd // RC_LAYERS
    fwd = [prog[i * per_layer : (i + 1) * per_layer] for i in range(RC_LAYERS)]
    assert all(isinstance(it, Kernel) for layer in fwd for it in layer)
    out: list[Item] = list(prog[:n_fwd])
    li = 0
    for it in prog[n_fwd:]:
        if isinstance(it, Kernel) and it.tag == "mlp_down_dx":
            layer = fwd[RC_LAYERS - 1 - li]
            out += [
                dataclasses.replace(k, tag=f"{RC_TAG}_{li}_{i}")
                for i, k in enumerate(layer)
                if isinstance(k, Kernel)
            ]
            li += 1
        out.append(it)
    assert li == RC_LAYERS, li
    return out


def recompute_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, recompute_program(), default_perturb(ranks))


def recompute_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the forward runs twice per step on every rank; Computing grows by its length."""
    cl: Cluster = m[""]["cluster"]
    again = [j for j, k in enumerate(cl.kernels) if k.tag.startswith(RC_TAG)]
    again_us = np.array([st.k_dur[:, again].sum(axis=1) for st in cl.steps]) / 1000  # [S, R]
    fa = sum(1 for k in cl.kernels if k.op_type == FA_TYPE)
    fa_grad = sum(1 for k in cl.kernels if k.op_type == FA_TYPE + "Grad")
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    base = _sim_breakdown(_resimulate(cl, recompute_program(full=False)))
    nums = {
        "flash_attention_per_step": fa,
        "flash_attention_grad_per_step": fa_grad,
        "forward_runs_per_step": fa // max(fa_grad, 1),
        "recompute_us_per_step_median": _r(float(np.median(again_us))),
        "recompute_share_of_computing": round(
            float(np.median(again_us.T.sum(axis=1) / comp.sum(axis=1))), 4
        ),
        "median_computing_share": _share(comp, step),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_no_recompute": _r(float(np.median(base["step_us"]))),
        "step_saving_share_no_recompute": round(
            float(1 - np.median(base["step_us"]) / np.median(step)), 4
        ),
    }
    key = _key([], "compute", ["activation-recompute"], "computing_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={
            "recompute_us_per_step": nums["recompute_us_per_step_median"],
            "computing_share": nums["median_computing_share"],
            "forward_runs_per_step": nums["forward_runs_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        op_type=FA_TYPE,
        forward_op_count_per_step=fa,
        backward_op_count_per_step=fa_grad,
        repeated_op_types=sorted({cl.kernels[j].op_type for j in again}),
        forward_runs_per_step=2,
        recompute_ms_per_step=round(float(np.median(again_us)) / 1000, 1),
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- small-batch-host-bound
SB_SCALE = 0.03  # a ~1B model, micro-batch 1, short sequences: kernels of 2-50 µs
SB_API_US = 22.0  # host time per launch (Python + aclnn preparation)
SB_GAP_US = 24.0  # device idle between consecutive kernels: the host's launch rate


def sb_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    p.host_bound[:] = True
    p.api_us[:] = SB_API_US
    p.gap_us[:] = SB_GAP_US
    prog = transformer(layers=8, scale=SB_SCALE, grad_mb=2.0, grad_overlap=3)
    return _plain(ranks, prog, p)


def sb_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank's device waits for the host's launches; nothing misconfigured."""
    cl: Cluster = m[""]["cluster"]
    free = col(m, "free_us")
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    durs = np.concatenate([st.k_dur.ravel() for st in cl.steps]) / 1000
    gaps = [float(np.median(_kernel_gaps_us(cl, r))) for r in range(ranks)]
    share = free.sum(axis=1) / step.sum(axis=1)
    nums = {
        "kernels_per_step": len(cl.kernels),
        "kernel_us_median": _r(float(np.median(durs))),
        "kernels_shorter_than_gap_share": round(float(np.mean(durs < np.median(gaps))), 4),
        "device_gap_us_between_kernels_median": _r(float(np.median(gaps))),
        "median_free_share": round(float(np.median(share)), 4),
        "free_share_spread_across_ranks": round(float(share.max() - share.min()), 4),
        "median_computing_share": _share(comp, step),
        "median_step_us": _r(float(np.median(step))),
    }
    key = _key([], "scheduling", ["host-dispatch-bound", "tiny-kernels-fusion"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "free_share": nums["median_free_share"],
            "device_gap_us_between_kernels": nums["device_gap_us_between_kernels_median"],
            "kernel_us_median": nums["kernel_us_median"],
        },
    )
    return _with_evidence(
        key,
        rc,
        kernel_us_median=round(float(np.median(durs)), 1),
        device_gap_us=round(float(np.median(gaps)), 1),
        launch_blocking_set=False,
        env_misconfigured=False,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- registry
DEV8_SCENARIOS = (
    ScenarioSpec(
        "lossy-roce-fabric",
        "2 nodes: every RDMA transfer of every step at ~1/3 of the link's bandwidth (RoCE fabric "
        "misconfigured: PFC/ECN, MTU, traffic class); HCCS normal; no rank, link or step stands out",
        16,
        4,
        lossy_plans,
        lossy_answer,
        min_ranks=2 * RANKS_PER_NODE,
    ),
    ScenarioSpec(
        "full-recompute",
        "full activation recomputation on every rank: each layer's forward re-run before its "
        "backward (forward operators twice per step); Computing longer everywhere, no late rank",
        16,
        4,
        recompute_plans,
        recompute_answer,
    ),
    ScenarioSpec(
        "small-batch-host-bound",
        "a small model and micro-batch: most kernels shorter than a launch (~24 us), the device "
        "idles between kernels on every rank; nothing misconfigured (launch blocking off)",
        16,
        4,
        sb_plans,
        sb_answer,
    ),
)
DEV8_KINDS = tuple(s.name for s in DEV8_SCENARIOS)


__all__ = ["DEV8_KINDS", "DEV8_SCENARIOS"]
