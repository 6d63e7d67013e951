"""Third BLIND held-out set of fault kinds (new kinds; written without reading the diagnosis).

Four more field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_heldout3.yaml``: a blind held-out set. Whoever tunes the diagnosis
rules must not read this module, its answer keys or that question set; only the aggregate pass rate
of the set is to be looked at.

The kinds are composed from the existing perturbation knobs (program edits, ``kernel_swap``,
``step_stall_us``); no knob was added. The descriptions of what is planted are kept in the code below
and in the registry's one-line summaries, on purpose not repeated here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    AICORE_MHZ,
    RANKS_PER_NODE,
    Cluster,
    Collective,
    Item,
    Kernel,
    Perturb,
    default_perturb,
    node_ip,
)
from advisor_chat.synth.scenarios import (
    H,
    Plan,
    S,
    ScenarioSpec,
    _key,
    _r,
    col,
    matmul,
    transformer,
    vec,
)
from advisor_chat.synth.scenarios_dev import _plain, _rdma_bw, _with_evidence
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_dev4 import _op_bw, _resimulate, _sim_breakdown
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)


def _share(part: np.ndarray, whole: np.ndarray) -> float:
    return round(float(np.median(part.sum(axis=1) / whole.sum(axis=1))), 4)


def _healthy(cl: Cluster, program: list[Item] | None = None) -> dict[str, np.ndarray]:
    """Breakdown of the same run (seed, steps) without any perturbation (optionally another program)."""
    base = dataclasses.replace(cl, perturb=default_perturb(cl.ranks))
    return _sim_breakdown(_resimulate(base, program if program is not None else cl.program))


def _node_ranks(ranks: int, node: int) -> list[int]:
    return list(range(node * RANKS_PER_NODE, min(ranks, (node + 1) * RANKS_PER_NODE)))


def _saving(base_step: np.ndarray, step: np.ndarray) -> tuple[float, float]:
    """(µs per step saved, share of the step) when the run had ``base_step`` instead of ``step``."""
    now = float(np.median(step))
    then = float(np.median(base_step))
    return _r(now - then), round(1 - then / now, 4)


# ---------------------------------------------------------------- fewer cube cores on one node
# One server of the job is a different SKU of the same card family: 20 AI Cores (cube) per chip
# instead of 24. Every cube kernel is tiled over 20 blocks (Block Dim 20) and runs ~24/20 longer;
# vector kernels and the clock are the same. The other node waits for it in every collective.
CORES_FULL = 24
CORES_FEW = 20
CUBE_CORES = ("AI_CORE", "MIX_AIC")


def _few_node(ranks: int) -> int:
    return 1 if ranks >= 2 * RANKS_PER_NODE else 0


def _few_perturb(ranks: int, program: list[Item]) -> Perturb:
    p = default_perturb(ranks)
    kernels = [it for it in program if isinstance(it, Kernel)]
    for r in _node_ranks(ranks, _few_node(ranks)):
        for j, k in enumerate(kernels):
            if k.core in CUBE_CORES and k.block_dim == CORES_FULL:
                p.kernel_swap[(-1, r, j)] = dataclasses.replace(
                    k, block_dim=CORES_FEW, dur_us=round(k.dur_us * CORES_FULL / CORES_FEW, 1)
                )
    return p


def few_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    return _plain(ranks, prog, _few_perturb(ranks, prog))


def few_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one node's cube kernels tiled on fewer cores; the other node waits for it."""
    cl: Cluster = m[""]["cluster"]
    grp = _node_ranks(ranks, _few_node(ranks))
    rest = [r for r in range(ranks) if r not in grp]
    cube = [j for j, k in enumerate(cl.kernels) if k.core in CUBE_CORES]
    vecs = [j for j, k in enumerate(cl.kernels) if k.core not in CUBE_CORES]
    cube_us = np.array([st.k_dur[:, cube].sum(axis=1) for st in cl.steps]).T / 1000  # [R, S]
    vec_us = np.array([st.k_dur[:, vecs].sum(axis=1) for st in cl.steps]).T / 1000
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    base = _healthy(cl)
    saved, saved_share = _saving(base["step_us"], step)
    cube_ratio = float(np.median(cube_us[grp].mean(axis=1)) / np.median(cube_us[rest].mean(axis=1)))
    vec_ratio = float(np.median(vec_us[grp].mean(axis=1)) / np.median(vec_us[rest].mean(axis=1)))
    vic = victims_by_wait(wait, grp)
    nums = {
        "group_ranks": grp,
        "culprit_block_dim": CORES_FEW,
        "normal_block_dim": CORES_FULL,
        "cube_kernel_time_ratio": round(cube_ratio, 3),
        "vector_kernel_time_ratio": round(vec_ratio, 3),
        "cube_kernels_per_step": len(cube),
        "group_cube_us_per_step": _r(float(np.median(cube_us[grp].mean(axis=1)))),
        "others_cube_us_per_step": _r(float(np.median(cube_us[rest].mean(axis=1)))),
        "group_computing_us_per_step": _r(float(np.median(comp[grp].mean(axis=1)))),
        "others_computing_us_per_step": _r(float(np.median(comp[rest].mean(axis=1)))),
        "computing_excess_us_per_step": _r(
            float(np.median(comp[grp].mean(axis=1)) - np.median(comp[rest].mean(axis=1)))
        ),
        "others_wait_us_per_step": _r(float(np.median(wait[rest].mean(axis=1)))),
        "group_wait_us_per_step": _r(float(np.median(wait[grp].mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_same_cores": _r(float(np.median(base["step_us"]))),
        "step_saving_us_same_cores": saved,
        "step_saving_share_same_cores": saved_share,
    }
    key = _key(grp, "compute", ["heterogeneous-devices"], "computing_us", nums)
    rc = root_cause(
        "slow_group",
        "compute",
        "group",
        ranks=grp,
        victims=vic,
        not_slow=not_slow_sample(ranks, grp, vic),
        metrics={
            "culprit_wait_us_per_step": nums["group_wait_us_per_step"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "culprit_computing_excess_us_per_step": nums["computing_excess_us_per_step"],
            "block_dim": CORES_FEW,
            "block_dim_peer": CORES_FULL,
        },
    )
    return _with_evidence(
        key,
        rc,
        block_dim=CORES_FEW,
        normal_block_dim=CORES_FULL,
        cores=list(CUBE_CORES),
        node=node_ip(_few_node(ranks)),
        vector_normal=True,
        aicore_mhz=int(AICORE_MHZ),
        clock_normal=True,
        links_normal=True,
        all_steps=True,
    )


# ---------------------------------------------------------------- gradients reduced in fp32
# bf16 training whose gradient all-reduce runs in fp32 (an fp32 gradient buffer / FSDP reduce_dtype
# float32 / DeepSpeed communication_data_type fp32): every gradient all-reduce moves twice the bytes
# of the bf16 gradients, at normal link bandwidth; what no longer hides behind backward is exposed on
# every rank alike.
FP32_TAG = "grad_fp32"
GRAD_MB = 96.0  # bf16 gradient bucket per layer (transformer default)


def fp32_program(fp32: bool = True) -> list[Item]:
    """transformer(4 layers) whose per-layer gradient all-reduces carry fp32 (2x bytes) or bf16."""
    out: list[Item] = []
    for it in transformer(layers=4, grad_mb=GRAD_MB):
        if isinstance(it, Collective) and it.size_mb == GRAD_MB:
            if fp32:
                it = dataclasses.replace(it, size_mb=2 * GRAD_MB, dtype="FP32", tag=FP32_TAG)
            else:
                it = dataclasses.replace(it, tag=FP32_TAG)
        out.append(it)
    return out


def fp32_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, fp32_program(), default_perturb(ranks))


def fp32_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: exposed gradient communication on every rank; payload doubled, links normal."""
    cl: Cluster = m[""]["cluster"]
    notov = col(m, "comm_not_overlapped_us")
    comm = col(m, "communication_us")
    step = col(m, "step_us")
    base = _healthy(cl, fp32_program(fp32=False))
    saved, saved_share = _saving(base["step_us"], step)
    grads = [it for it in cl.program if isinstance(it, Collective) and it.tag == FP32_TAG]
    others = [it for it in cl.program if isinstance(it, Collective) and it.tag != FP32_TAG]
    gms = [
        float(np.median(op.end - op.start)) / 1000
        for st in cl.steps
        for op in st.ops
        if op.item.tag == FP32_TAG
    ]
    hccs = _op_bw(cl, 0, lambda c: c.tag == FP32_TAG)
    rdma = [x for s in range(len(cl.steps)) for x in _rdma_bw(cl, s, lambda a, b: True)]
    nums = {
        "grad_allreduce_per_step": len(grads),
        "grad_allreduce_mb": grads[0].size_mb,
        "grad_allreduce_mb_bf16": GRAD_MB,
        "payload_ratio": round(grads[0].size_mb / GRAD_MB, 3),
        "grad_allreduce_us_median": _r(float(np.median(gms))),
        "median_comm_not_overlapped_us": _r(float(np.median(notov))),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_communication_us": _r(float(np.median(comm))),
        "median_comm_not_overlapped_us_bf16": _r(float(np.median(base["comm_not_overlapped_us"]))),
        "hccs_bandwidth_gbps_median": round(float(np.median(hccs)), 3) if hccs else 0.0,
        "rdma_bandwidth_gbps_median": round(float(np.median(rdma)), 3) if rdma else 0.0,
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_bf16_reduce": _r(float(np.median(base["step_us"]))),
        "step_saving_us_bf16_reduce": saved,
        "step_saving_share_bf16_reduce": saved_share,
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "comm_not_overlapped_us_per_step": nums["median_comm_not_overlapped_us"],
            "grad_allreduce_mb": nums["grad_allreduce_mb"],
            "step_saving_us_bf16_reduce": saved,
        },
    )
    return _with_evidence(
        key,
        rc,
        data_type="FP32",
        other_data_type=others[0].dtype if others else "BFP16",
        op_type=grads[0].op_type,
        grad_allreduce_mb=grads[0].size_mb,
        grad_allreduce_per_step=len(grads),
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- one node's input pipeline
# The training data sits on a slow mount on one server (or its page cache is cold / its loader runs
# with too few workers): at the start of every step each rank of that node waits on the host for its
# batch (device idle, nothing launched); the ranks of the other node compute and then wait for it in
# the first gradient all-reduce of the step.
LOADER_STALL_US = 38_000.0
LOADER_JITTER = 0.12


def _loader_node(ranks: int) -> int:
    return 1 if ranks >= 2 * RANKS_PER_NODE else 0


def _loader_stalls(ranks: int, steps: int, seed: int) -> np.ndarray:
    """[steps, ranks] host stall at each step's start (µs)."""
    rng = np.random.default_rng(seed + 9173)
    out = np.zeros((steps, ranks))
    for r in _node_ranks(ranks, _loader_node(ranks)):
        out[:, r] = LOADER_STALL_US * (
            1 + LOADER_JITTER * np.clip(rng.standard_normal(steps), -2, 2)
        )
    return np.round(out, 1)


def loader_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    stalls = _loader_stalls(ranks, steps, seed)
    p = default_perturb(ranks)
    p.step_stall_us = lambda si: stalls[si]
    return _plain(ranks, transformer(layers=4), p)


def loader_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one node idles at every step start; the other node waits for it."""
    cl: Cluster = m[""]["cluster"]
    grp = _node_ranks(ranks, _loader_node(ranks))
    rest = [r for r in range(ranks) if r not in grp]
    stalls = _loader_stalls(ranks, steps, cl.seed)
    free = col(m, "free_us")
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    base = _healthy(cl)
    saved, saved_share = _saving(base["step_us"], step)
    # device idle before the first kernel of each step, per rank (µs)
    lead = np.array([(st.k_start[:, 0] - st.start) / 1000 for st in cl.steps]).T  # [R, S]
    vic = victims_by_wait(wait, grp)
    nums = {
        "group_ranks": grp,
        "stall_us_per_step_median": _r(float(np.median(stalls[:, grp]))),
        "group_step_start_idle_us_median": _r(float(np.median(lead[grp]))),
        "others_step_start_idle_us_median": _r(float(np.median(lead[rest]))),
        "group_free_us_per_step": _r(float(np.median(free[grp].mean(axis=1)))),
        "others_free_us_per_step": _r(float(np.median(free[rest].mean(axis=1)))),
        "group_computing_us_per_step": _r(float(np.median(comp[grp].mean(axis=1)))),
        "others_computing_us_per_step": _r(float(np.median(comp[rest].mean(axis=1)))),
        "others_wait_us_per_step": _r(float(np.median(wait[rest].mean(axis=1)))),
        "group_wait_us_per_step": _r(float(np.median(wait[grp].mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_without_stall": _r(float(np.median(base["step_us"]))),
        "step_saving_us_without_stall": saved,
        "step_saving_share_without_stall": saved_share,
    }
    key = _key(grp, "scheduling", ["dataloader-stall"], "free_us", nums)
    rc = root_cause(
        "host_stall",
        "scheduling",
        "group",
        ranks=grp,
        victims=vic,
        not_slow=not_slow_sample(ranks, grp, vic),
        metrics={
            "culprit_wait_us_per_step": nums["group_wait_us_per_step"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "culprit_free_us_per_step": nums["group_free_us_per_step"],
            "stall_us_per_step": nums["stall_us_per_step_median"],
        },
    )
    return _with_evidence(
        key,
        rc,
        node=node_ip(_loader_node(ranks)),
        where="step_start",
        every_step=True,
        kernels_normal=True,
        launches_normal=True,
        links_normal=True,
    )


# ---------------------------------------------------------------- unaligned vocabulary
# The output projection (LM head) has an odd vocabulary (50257 rows, not a multiple of 16): the cube
# unit cannot tile it cleanly, so its forward, input-gradient and weight-gradient MatMuls run ~2.4x
# longer than their FLOPs take at the other MatMuls' rate, on every rank alike. Padding the vocabulary
# to a multiple of 128 (50304) restores the rate.
VOCAB = 50257
VOCAB_PADDED = 50304
UNALIGNED_FACTOR = 2.4
MLP_UP_US = 1500.0  # transformer's [S,H] x [2*4H,H] MatMul: the reference rate
LM_TAGS = ("lm_head", "lm_head_dx", "lm_head_dw")


def _lm_us(vocab: int) -> float:
    """Duration of one LM-head MatMul at the reference rate (FLOPs ∝ vocab), aligned or not."""
    us = MLP_UP_US * vocab / (2 * 4 * H)
    return round(us * (UNALIGNED_FACTOR if vocab % 16 else 1.0), 1)


def _lm_head(vocab: int) -> tuple[list[Item], list[Item]]:
    """(forward part, backward part) of the output layer for a vocabulary size."""
    d = _lm_us(vocab)
    fwd: list[Item] = [
        matmul("lm_head", S, H, vocab, d),
        vec("ce", "SoftmaxCrossEntropyWithLogits", 420.0, f"{S},{vocab}"),
    ]
    bwd: list[Item] = [
        matmul("lm_head_dx", S, vocab, H, d),
        matmul("lm_head_dw", vocab, S, H, d),
    ]
    return fwd, bwd


def vocab_program(vocab: int = VOCAB) -> list[Item]:
    """transformer(4 layers) with the output layer between forward and backward."""
    prog = transformer(layers=4)
    at = next(i for i, it in enumerate(prog) if isinstance(it, Kernel) and it.tag == "mlp_down_dx")
    fwd, bwd = _lm_head(vocab)
    return [*prog[:at], *fwd, *bwd, *prog[at:]]


def vocab_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, vocab_program(), default_perturb(ranks))


def vocab_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one operator shape dominates every rank; padding the vocabulary saves the excess."""
    cl: Cluster = m[""]["cluster"]
    lm = [j for j, k in enumerate(cl.kernels) if k.tag in LM_TAGS]
    fwd = next(j for j, k in enumerate(cl.kernels) if k.tag == "lm_head")
    ref = next(j for j, k in enumerate(cl.kernels) if k.tag == "mlp_up")
    lm_us = np.array([st.k_dur[:, lm].sum(axis=1) for st in cl.steps]).T / 1000  # [R, S]
    fwd_us = float(np.median([st.k_dur[:, fwd] for st in cl.steps])) / 1000
    ref_us = float(np.median([st.k_dur[:, ref] for st in cl.steps])) / 1000

    def rate(j: int, us: float) -> float:
        """FLOPs per µs of a MatMul ``[m,k] x [n,k]^T``."""
        a, b = cl.kernels[j].in_shapes.split(";")
        m_, k_ = (int(x) for x in a.split(","))
        n_ = int(b.split(",")[0])
        return 2.0 * m_ * k_ * n_ / us

    comp = col(m, "computing_us")
    step = col(m, "step_us")
    base = _healthy(cl, vocab_program(VOCAB_PADDED))
    saved, saved_share = _saving(base["step_us"], step)
    shape = cl.kernels[fwd].in_shapes
    nums = {
        "vocab_size": VOCAB,
        "vocab_padded": VOCAB_PADDED,
        "lm_head_matmuls_per_step": len(lm),
        "lm_head_us_per_step_median": _r(float(np.median(lm_us))),
        "lm_head_share_of_computing": round(
            float(np.median(lm_us.sum(axis=1) / comp.sum(axis=1))), 4
        ),
        "lm_head_fwd_us_median": _r(fwd_us),
        "rate_ratio_vs_other_matmuls": round(rate(fwd, fwd_us) / rate(ref, ref_us), 3),
        "median_computing_us": _r(float(np.median(comp))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_padded_vocab": _r(float(np.median(base["step_us"]))),
        "step_saving_us_padded_vocab": saved,
        "step_saving_share_padded_vocab": saved_share,
    }
    op = {"op_type": "MatMulV2", "name": cl.kernels[fwd].name, "input_shapes": shape}
    key = _key([], "compute", ["shape-axis-alignment"], "avg_duration_us", nums, op=op)
    rc = root_cause(
        "job_hotspot",
        "compute",
        "operator",
        operator="MatMulV2",
        shape=shape,
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        metrics={
            "lm_head_us_per_step": nums["lm_head_us_per_step_median"],
            "rate_ratio_vs_other_matmuls": nums["rate_ratio_vs_other_matmuls"],
            "step_saving_us_padded_vocab": saved,
        },
    )
    return _with_evidence(
        key,
        rc,
        op_type="MatMulV2",
        shape=shape,
        vocab=VOCAB,
        vocab_padded=VOCAB_PADDED,
        dim=VOCAB,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- registry
HELDOUT3_SCENARIOS = (
    ScenarioSpec(
        "mixed-sku-node",
        "2 nodes: node 1's cards have 20 AI Cores instead of 24 (another SKU): every cube kernel "
        "there runs with Block Dim 20 and ~1.2x longer, vector kernels and clock normal; node 0 waits",
        16,
        4,
        few_plans,
        few_answer,
        min_ranks=2 * RANKS_PER_NODE,
    ),
    ScenarioSpec(
        "fp32-grad-allreduce",
        "bf16 training with gradients all-reduced in fp32 on every rank (2x payload, data_type FP32): "
        "gradient communication exposed everywhere, bandwidth and op count normal, no late rank",
        16,
        4,
        fp32_plans,
        fp32_answer,
    ),
    ScenarioSpec(
        "slow-input-node",
        "2 nodes: every rank of node 1 idles ~38 ms at the start of every step waiting for its batch "
        "(slow data mount on that server); node 0 waits in the first gradient all-reduce",
        16,
        4,
        loader_plans,
        loader_answer,
        min_ranks=2 * RANKS_PER_NODE,
    ),
    ScenarioSpec(
        "unaligned-vocab-head",
        "output layer with vocabulary 50257 (not 16-aligned) on every rank: its three MatMuls run "
        "~2.4x below the other MatMuls' rate; padding to 50304 removes the excess",
        16,
        4,
        vocab_plans,
        vocab_answer,
    ),
)
HELDOUT3_KINDS = tuple(s.name for s in HELDOUT3_SCENARIOS)


__all__ = ["HELDOUT3_KINDS", "HELDOUT3_SCENARIOS"]
