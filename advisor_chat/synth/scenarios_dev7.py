"""Fifth set of development fault kinds (new kinds; written without reading the diagnosis).

Three more field faults of Ascend training jobs, each planted as a mechanism of the simulation
(``advisor_chat.synth.model``), with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev7.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched.

Kinds:

- ``ecc-kernel-retries``: one device corrects memory errors (HBM ECC retries, a card going bad):
  in every step three of its cube kernels (MatMul, attention), at different places each step, run ~12x longer
  than the same operator with the same shapes on the other ranks and in its own other steps;
  everything else it runs is normal. The other ranks wait for it in the next collective. The fix
  is the hardware (error counters, isolate / replace the card), not the model or the network.
- ``grad-sync-every-microbatch``: gradient accumulation over 4 micro-batches without ``no_sync``:
  the data-parallel gradient all-reduce runs after every micro-batch's backward instead of once
  per step, so every rank all-reduces the same gradients 4 times per step (4x the collectives and
  the transit size) and the extra communication is exposed on every rank; no late rank, links
  normal.
- ``unfused-optimizer``: AdamW runs per parameter tensor (``foreach``/fused optimizer off) for the
  many small tensors (norm weights, biases): ~450 tiny vector kernels (2-3 µs each) at the end of
  every step, each launched separately by the host (~24 µs a launch): the device idles between
  them; the same on every rank. The fix is a fused / multi-tensor optimizer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import Cluster, Collective, Item, Kernel, default_perturb
from advisor_chat.synth.scenarios import Plan, ScenarioSpec, _key, _r, col, transformer
from advisor_chat.synth.scenarios_dev import _plain, _rank_rc, _with_evidence
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_dev4 import _resimulate, _sim_breakdown
from advisor_chat.synth.scenarios_ext import coll_wait_us, step_ids


def _share(part: np.ndarray, whole: np.ndarray) -> float:
    return round(float(np.median(part.sum(axis=1) / whole.sum(axis=1))), 4)


# ---------------------------------------------------------------- ecc-kernel-retries
ECC_PER_STEP = 3  # kernel instances retried per step
ECC_FACTOR = 12.0  # duration of a retried kernel / its normal duration


def _ecc_rank(ranks: int) -> int:
    return 5 if ranks > 5 else ranks - 1


def _ecc_candidates(kernels: list[Kernel]) -> list[int]:
    """Program positions that may be retried: the cube (MatMul / attention) kernels."""
    return [j for j, k in enumerate(kernels) if k.core in ("AI_CORE", "MIX_AIC")]


def _ecc_picks(kernels: list[Kernel], steps: int, seed: int) -> list[list[int]]:
    """Per step index: the program positions whose kernel is retried on the bad device."""
    rng = np.random.default_rng(seed + 97)
    cand = _ecc_candidates(kernels)
    out: list[list[int]] = []
    for _ in range(steps):
        picks = rng.choice(len(cand), ECC_PER_STEP, replace=False)
        out.append(sorted(cand[int(i)] for i in picks))
    return out


def ecc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    kernels = [it for it in prog if isinstance(it, Kernel)]
    r = _ecc_rank(ranks)
    p = default_perturb(ranks)
    for si, picks in enumerate(_ecc_picks(kernels, steps, seed)):
        for j in picks:
            k = kernels[j]
            p.kernel_swap[(si, r, j)] = dataclasses.replace(k, dur_us=k.dur_us * ECC_FACTOR)
    return _plain(ranks, prog, p)


def ecc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: three kernels a step run ~12x longer on one device; the rest of it is normal."""
    cl: Cluster = m[""]["cluster"]
    r = _ecc_rank(ranks)
    ids = step_ids(m)
    picks = _ecc_picks(cl.kernels, steps, cl.seed)
    others = [q for q in range(ranks) if q != r]
    ratios, extra, types = [], np.zeros(steps), []
    normal_ratio = []
    for si, st in enumerate(cl.steps):
        for j in range(len(cl.kernels)):
            peer = float(np.median(st.k_dur[others, j]))
            if j in picks[si]:
                ratios.append(float(st.k_dur[r, j]) / peer)
                extra[si] += (float(st.k_dur[r, j]) - peer) / 1000
                types.append(cl.kernels[j].op_type)
            else:
                normal_ratio.append(float(st.k_dur[r, j]) / peer)
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    nums = {
        "retried_kernels_per_step": ECC_PER_STEP,
        "retried_kernel_ratio_median": round(float(np.median(ratios)), 2),
        "other_kernels_ratio_median": round(float(np.median(normal_ratio)), 3),
        "culprit_extra_device_us_per_step": _r(float(np.median(extra))),
        "culprit_computing_us_median": _r(float(np.median(comp[r]))),
        "others_computing_us_median": _r(float(np.median(comp[others]))),
        "others_wait_us_per_step": _r(float(np.median(wait[others].mean(axis=0)))),
        "median_step_us": _r(float(np.median(step))),
    }
    key = _key([r], "compute", ["heterogeneous-devices"], "computing_us", nums)
    rc = _rank_rc(
        m,
        ranks,
        r,
        "compute_straggler",
        "compute",
        metrics={
            "culprit_extra_device_us_per_step": nums["culprit_extra_device_us_per_step"],
            "retried_kernel_ratio_median": nums["retried_kernel_ratio_median"],
        },
    )
    return _with_evidence(
        key,
        rc,
        only_rank=r,
        outlier_kernels_per_step=ECC_PER_STEP,
        outlier_ratio=round(float(np.median(ratios))),
        outlier_op_types=sorted(set(types)),
        same_shapes_as_peers=True,
        other_kernels_normal=True,
        steps=ids,
        hardware=True,
    )


# ---------------------------------------------------------------- grad-sync-every-microbatch
GA_MICRO = 4  # gradient-accumulation micro-batches per step
GA_GRAD_MB = 96.0  # gradient bucket per layer
GA_OVERLAP = 3  # backward kernels that run during each bucket's all-reduce
GA_FINAL_MB = 4.0  # step-closing collectives (gradient norm, parameter sync)


def ga_program(sync_every: bool = True) -> list[Item]:
    """GA_MICRO forward/backward passes, then the optimizer.

    ``sync_every``: the gradient all-reduces run in every micro-batch (the fault); else only in the
    last one (``no_sync`` on the others: what DDP / Megatron do with gradient accumulation).
    """
    prog: list[Item] = []
    for mb in range(GA_MICRO):
        last = mb == GA_MICRO - 1
        for it in transformer(
            layers=4, grad_mb=GA_GRAD_MB, grad_overlap=GA_OVERLAP, final_mb=GA_FINAL_MB
        ):
            if last:
                prog.append(it)
            elif isinstance(it, Kernel) and it.op_type.startswith("Foreach"):
                continue  # the optimizer runs once, after the last micro-batch
            elif isinstance(it, Collective) and it.size_mb <= GA_FINAL_MB:
                continue  # so do the step-closing collectives
            elif isinstance(it, Collective) and not sync_every:
                continue
            else:
                prog.append(it)
    return prog


def ga_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, ga_program(), default_perturb(ranks))


def ga_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 4x the gradient all-reduces per step, exposed on every rank; no late rank."""
    cl: Cluster = m[""]["cluster"]
    grads = [it for it in cl.program if isinstance(it, Collective) and it.size_mb == GA_GRAD_MB]
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    comm = col(m, "communication_us")
    base = _sim_breakdown(_resimulate(cl, ga_program(sync_every=False)))
    nums = {
        "micro_batches_per_step": GA_MICRO,
        "gradient_allreduces_per_step": len(grads),
        "gradient_allreduces_per_step_expected": len(grads) // GA_MICRO,
        "gradient_allreduce_mb": GA_GRAD_MB,
        "gradient_transit_mb_per_step": round(GA_GRAD_MB * len(grads), 1),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_communication_share": _share(comm, step),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_no_sync": _r(float(np.median(base["step_us"]))),
        "step_saving_share_no_sync": round(
            float(1 - np.median(base["step_us"]) / np.median(step)), 4
        ),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "comm_not_overlapped_us_per_step": _r(float(np.median(notov.mean(axis=1)))),
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "gradient_allreduces_per_step": len(grads),
        },
    )
    return _with_evidence(
        key,
        rc,
        op_type="hcom_allReduce_",
        allreduces_per_step=len(grads),
        expected_allreduces_per_step=len(grads) // GA_MICRO,
        repeats_per_step=GA_MICRO,
        allreduce_mb=round(GA_GRAD_MB),
        links_normal=True,
        late_rank=False,
        all_ranks=True,
    )


# ---------------------------------------------------------------- unfused-optimizer
UO_LAYERS = 4
UO_SMALL_TENSORS = 14  # per layer: norm weights and biases ([4096] / [12288] fp32 master copies)
UO_OPS = ("Muls", "Lerp", "Muls", "Addcmul", "Sqrt", "Divs", "Adds", "Addcdiv")  # AdamW, per tensor
UO_KERNEL_US = 2.6
UO_LAUNCH_US = 24.0  # host time per launch of a tiny kernel: the device waits for each


def _uo_kernel(op: str, n: int) -> Kernel:
    return Kernel(
        name=f"aclnn{op}_{op}_{op}",
        op_type=op,
        core="AI_VECTOR_CORE",
        in_shapes=f"{n}" if op in ("Muls", "Sqrt", "Divs", "Adds") else f"{n};{n}",
        in_dtypes="DT_FLOAT" if op in ("Muls", "Sqrt", "Divs", "Adds") else "DT_FLOAT;DT_FLOAT",
        in_formats="ND" if op in ("Muls", "Sqrt", "Divs", "Adds") else "ND;ND",
        out_shapes=f"{n}",
        out_dtypes="DT_FLOAT",
        out_formats="ND",
        dur_us=UO_KERNEL_US * (1.6 if n > 4096 else 1.0),
        block_dim=8,
        api=f"aclnn{op}",
        tag="adamw_small",
    )


def uo_program(fused: bool = False) -> list[Item]:
    """transformer(4 layers); the optimizer's small tensors updated one by one after the big ones."""
    prog = transformer(layers=UO_LAYERS)
    if fused:
        return prog
    tiny = [
        _uo_kernel(op, 12288 if t % 7 == 3 else 4096)
        for _ in range(UO_LAYERS)
        for t in range(UO_SMALL_TENSORS)
        for op in UO_OPS
    ]
    # after the fused update of the big weights (the second Foreach kernel), before the
    # step-closing collectives
    at = [
        i
        for i, it in enumerate(prog)
        if isinstance(it, Kernel) and it.op_type.startswith("Foreach")
    ]
    cut = at[1] + 1
    return [*prog[:cut], *tiny, *prog[cut:]]


def _uo_positions(program: list[Item]) -> list[int]:
    kernels = [it for it in program if isinstance(it, Kernel)]
    return [j for j, k in enumerate(kernels) if k.tag == "adamw_small"]


def uo_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = uo_program()
    p = default_perturb(ranks)
    stalls = dict.fromkeys(_uo_positions(prog), UO_LAUNCH_US)
    # each tiny kernel's launch holds the host until just before the kernel: the device waits for
    # every launch (the host's lead over the device is gone in this part of the step)
    p.step_kernel_stalls = {si: {r: dict(stalls) for r in range(ranks)} for si in range(steps)}
    return _plain(ranks, prog, p)


def uo_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: ~450 tiny optimizer kernels at every step's end, the device idle between them."""
    cl: Cluster = m[""]["cluster"]
    pos = _uo_positions(cl.program)
    busy, span = [], []
    for st in cl.steps:
        a = st.k_start[:, pos[0]]
        b = st.k_start[:, pos[-1]] + st.k_dur[:, pos[-1]]
        span.append((b - a) / 1000)
        busy.append(st.k_dur[:, pos].sum(axis=1) / 1000)
    span_a, busy_a = np.array(span), np.array(busy)
    free = col(m, "free_us")
    step = col(m, "step_us")
    # the same run with the fused optimizer: no small-tensor kernels, no launches to wait for
    plain = dataclasses.replace(cl, perturb=dataclasses.replace(cl.perturb, step_kernel_stalls={}))
    fused = _sim_breakdown(_resimulate(plain, uo_program(fused=True)))
    nums = {
        "optimizer_small_kernels_per_step": len(pos),
        "optimizer_tail_us_median": _r(float(np.median(span_a))),
        "optimizer_tail_device_busy_us_median": _r(float(np.median(busy_a))),
        "optimizer_tail_busy_share": round(float(np.median(busy_a / span_a)), 4),
        "median_kernel_us": UO_KERNEL_US,
        "median_free_share": _share(free, step),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_fused": _r(float(np.median(fused["step_us"]))),
        "step_saving_share_fused": round(
            float(1 - np.median(fused["step_us"]) / np.median(step)), 4
        ),
    }
    key = _key([], "scheduling", ["tiny-kernels-fusion", "host-dispatch-bound"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "optimizer_tail_us_per_step": nums["optimizer_tail_us_median"],
            "optimizer_small_kernels_per_step": len(pos),
            "free_share": nums["median_free_share"],
        },
    )
    return _with_evidence(
        key,
        rc,
        kernels_per_step=len(pos),
        op_types=sorted(set(UO_OPS)),
        position="step end",
        after="gradient all-reduces",
        kernel_us=UO_KERNEL_US,
        tail_ms=round(float(np.median(span_a)) / 1000, 1),
        device_busy_share=round(float(np.median(busy_a / span_a)), 2),
        all_ranks=True,
        late_rank=False,
    )


# ---------------------------------------------------------------- registry
DEV7_SCENARIOS = (
    ScenarioSpec(
        "ecc-kernel-retries",
        "one device retries memory errors: 3 of its cube kernels a step (at different places each "
        "step) run ~12x longer than the same operator and shapes elsewhere; the others wait for it",
        16,
        4,
        ecc_plans,
        ecc_answer,
    ),
    ScenarioSpec(
        "grad-sync-every-microbatch",
        "gradient accumulation over 4 micro-batches without no_sync: the gradient all-reduces run "
        "after every micro-batch (4x per step), exposed on every rank; no late rank",
        16,
        3,
        ga_plans,
        ga_answer,
    ),
    ScenarioSpec(
        "unfused-optimizer",
        "AdamW per tensor for the small parameters: ~450 tiny vector kernels at each step's end, "
        "each launched separately; the device idles between them on every rank",
        16,
        3,
        uo_plans,
        uo_answer,
    ),
)
DEV7_KINDS = tuple(s.name for s in DEV7_SCENARIOS)


__all__ = ["DEV7_KINDS", "DEV7_SCENARIOS"]
