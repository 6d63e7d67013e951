"""Twelfth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev14.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: blocking copy calls on the host lanes of
trace_view.json, the bandwidth of one family of collectives in communication.json, the CANN /
torch_npu versions of profiler_info_{rank}.json with the operator types of one node, and the number
of device tasks per step of some ranks):

- ``pageable-h2d-copy``: a vision-language model trained with two micro-batches per step; the
  DataLoader is built with ``pin_memory=False``, so each micro-batch's ``pixel_values`` (fp32,
  ~87 MB) is copied from pageable host memory: ``.to(device, non_blocking=True)`` becomes a
  synchronous copy (the host synchronizes the stream, then a blocking ``aclrtMemcpy`` through a
  staging buffer at ~3 GB/s). The device idles ~29 ms before the first kernel of each micro-batch on
  every rank (step start and between the micro-batches). Job-level; the fix pins the batch
  (``pin_memory=True``) so the copy is asynchronous and overlaps compute.
- ``hccl-deterministic-on``: ``HCCL_DETERMINISTIC=true`` left in the launch script after a
  loss-curve alignment with a GPU run: the reduction collectives (the gradient ``hcom_reduceScatter_``
  of the distributed optimizer, the ``hcom_allReduce_`` of the loss / grad norm) run a fixed-order
  reduction at ~42% of the links' bandwidth on every link (HCCS and RDMA), while the parameter
  ``hcom_allGather_`` of the same job runs at full bandwidth. The gradient communication no longer
  hides behind the backward. Job-level; links normal, no late rank.
- ``old-cann-node-unfused``: node 1 (ranks 8-15) runs an older container image (CANN 7.0.1, torch_npu
  2.1.0 in its profiler_info) whose kernel package has no fused RmsNorm / SwiGlu: the model's NPU
  patch falls back to the PyTorch code there, so each norm becomes Cast, Pow, ReduceMean, Adds,
  Rsqrt, Mul, Cast, Mul (and a chain of ~13 kernels backward) and each SwiGLU a Swish + Mul (Mul,
  Mul, SwishGrad, ConcatD backward). Node 1 computes ~17% longer with ~2.8x the kernels; its MatMuls
  and FlashAttention are as fast as node 0's. Culprit: node 1 (the group); node 0 waits.
- ``uneven-microbatch-split``: the trainer packs each step's samples into 36 micro-batches of 4096
  tokens and deals them round-robin over the 16 data-parallel ranks (``micro_batches[rank::16]``):
  ranks 0-3 run 3 micro-batches, ranks 4-15 run 2. Every kernel takes the same time everywhere; ranks
  0-3 run 1.5x the device tasks per step and the others wait for them in the gradient collectives.
  Culprit: ranks 0-3 (their share of the work, not their cards).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    RANKS_PER_NODE,
    Cluster,
    Collective,
    Item,
    Kernel,
    Perturb,
    default_perturb,
)
from advisor_chat.synth.scenarios import (
    CANN7,
    CANN8,
    HCCL_ENV_KEY,
    Plan,
    ScenarioSpec,
    _info,
    _key,
    _r,
    col,
    group_kinds,
    transformer,
)
from advisor_chat.synth.scenarios_dev import _with_evidence
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_dev4 import _resimulate, _sim_breakdown
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_dev12 import _kernels
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)


def _micro_batch(grad: bool) -> list[Item]:
    """One micro-batch's forward and backward of transformer(4 layers).

    With ``grad`` the gradient all-reduces and the optimizer tail are kept (the last micro-batch of
    the step); without, the backward ends at the last layer's kernels (``no_sync`` micro-batches).
    """
    prog = transformer(layers=4, grad=grad)
    if grad:
        return prog
    opt = next(
        i
        for i, it in enumerate(prog)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    return prog[:opt]


def _healthy_baseline(cl: Cluster, p: Perturb, program: list[Item]) -> dict[str, np.ndarray]:
    """Breakdown of the same run (seed, steps) with perturbations ``p`` and ``program``."""
    return _sim_breakdown(_resimulate(dataclasses.replace(cl, perturb=p), program))


# ---------------------------------------------------------------- pageable-h2d-copy
H2D_DIMS = "18432,1176"  # pixel_values of a micro-batch: image patches x (3 x 2 x 14 x 14), fp32
H2D_DTYPE = "float"
H2D_MB = 18432 * 1176 * 4 / 1e6
H2D_PAGEABLE_GBPS = 3.0  # blocking copy from pageable memory (staged through a bounce buffer)
H2D_JITTER = 0.04
H2D_HOST_US = 60.0  # after the copy: return to Python, launch the micro-batch's first kernel
H2D_MICRO = 2  # micro-batches per step (gradient accumulation)


def h2d_program() -> list[Item]:
    """Two micro-batches (the first without gradient communication), then the optimizer."""
    return _micro_batch(grad=False) + _micro_batch(grad=True)


def _h2d_positions(prog: list[Item]) -> list[int]:
    """Kernel indices of each micro-batch's first kernel (where its input is copied)."""
    return [0, len(_kernels(_micro_batch(grad=False)))]


def h2d_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = h2d_program()
    pos = _h2d_positions(prog)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 1401)
    base_us = H2D_MB / H2D_PAGEABLE_GBPS * 1000
    for r in range(ranks):
        f = 1.0 + H2D_JITTER * np.clip(rng.standard_normal(len(pos)), -2, 2)
        copy = {j: round(base_us * float(x), 1) for j, x in zip(pos, f, strict=True)}
        p.h2d_copies[r] = {j: (H2D_DIMS, H2D_DTYPE, us) for j, us in copy.items()}
        p.kernel_stalls[r] = {j: round(us + H2D_HOST_US, 1) for j, us in copy.items()}
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(micro_batch_size=1, global_batch_size=H2D_MICRO * ranks)
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def h2d_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: a blocking ~29 ms copy before each micro-batch on every rank; the device idles."""
    cl: Cluster = m[""]["cluster"]
    pos = _h2d_positions(cl.program)
    copies = np.array(
        [[cl.perturb.h2d_copies[r][j][2] for j in pos] for r in range(ranks)]
    )  # [R, P] µs
    idle = np.array(
        [
            [
                [
                    float(st.k_start[r, j] - (st.k_start[r, j - 1] + st.k_dur[r, j - 1])) / 1000
                    if j > 0
                    else float(st.k_start[r, 0] - st.bounds(r)[0]) / 1000
                    for j in pos
                ]
                for r in range(ranks)
            ]
            for st in cl.steps
        ]
    )  # [S, R, P]
    others = [
        j for j in range(1, len(cl.kernels)) if j not in pos
    ]  # every other kernel: normal launch gaps
    gaps = np.array(
        [
            [(st.k_start[:, j] - st.k_start[:, j - 1] - st.k_dur[:, j - 1]) / 1000 for j in others]
            for st in cl.steps
        ]
    )
    free = col(m, "free_us")
    step = col(m, "step_us")
    base = _baseline(cl)
    base_step = float(np.median(base["step_us"]))
    bw = H2D_MB / (copies / 1000)  # MB per ms = GB/s
    nums = {
        "copies_per_step": len(pos),
        "micro_batches_per_step": H2D_MICRO,
        "copy_mb": round(H2D_MB, 1),
        "copy_us_median": _r(float(np.median(copies))),
        "pageable_copy_bandwidth_gbps": round(float(np.median(bw)), 2),
        "idle_before_micro_batch_us_median": _r(float(np.median(idle))),
        "idle_before_other_kernels_us_median": _r(float(np.median(gaps))),
        "copy_idle_us_per_step": _r(float(np.median(idle.sum(axis=2)))),
        "median_free_us_per_step": _r(float(np.median(free.mean(axis=1)))),
        "median_free_share": _share(free, step),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_pinned": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
        "saving_share_of_step": round(
            (float(np.median(step)) - base_step) / float(np.median(step)), 4
        ),
    }
    key = _key([], "scheduling", ["host-dispatch-bound"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "copy_idle_us_per_step": nums["copy_idle_us_per_step"],
            "free_share": nums["median_free_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        api="aclrtMemcpy",
        sync_api="aclrtSynchronizeStream",
        host_ops=["aten::to", "aten::copy_"],
        input_dims=H2D_DIMS,
        dtype="float32",
        copy_mb=nums["copy_mb"],
        per_step=len(pos),
        position="before the first kernel of each micro-batch (step start and between the two "
        "micro-batches)",
        cause="DataLoader(pin_memory=False): copying pageable host memory is synchronous (stream "
        "synchronize + blocking aclrtMemcpy through a staging buffer)",
        fix="pin_memory=True in the DataLoader (with non_blocking=True) or prefetch the next batch "
        "to the device, so the copy is asynchronous and overlaps compute",
        kernels_normal=True,
        same_every_step=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- hccl-deterministic-on
DET_BW = 0.42  # reduction collectives' share of the links' bandwidth with HCCL_DETERMINISTIC=true
DET_REDUCE = ("hcom_reduceScatter_", "hcom_allReduce_")
DET_GRAD_MB = 96.0  # fp32 gradients of a layer (reduce-scattered during the backward)
DET_PARAM_MB = 48.0  # bf16 parameters of a layer (all-gathered after the optimizer)


def det_program(deterministic: bool = True) -> list[Item]:
    """transformer(4 layers) with a distributed optimizer.

    Gradients reduce-scattered per layer during the backward (fp32), the parameters all-gathered per
    layer after the optimizer step (bf16); with ``deterministic`` every reduction runs at ``DET_BW``.
    """
    f = DET_BW if deterministic else 1.0
    out: list[Item] = []
    for it in transformer(layers=4, grad_mb=DET_GRAD_MB, grad_overlap=6):
        if isinstance(it, Collective) and it.size_mb == DET_GRAD_MB:
            it = dataclasses.replace(it, op_type="hcom_reduceScatter_", dtype="FP32", tag="grad_rs")
        if isinstance(it, Collective) and it.op_type in DET_REDUCE:
            it = dataclasses.replace(it, bw_factor=f)
        out.append(it)
    out += [Collective("hcom_allGather_", "world", DET_PARAM_MB, tag="param_ag") for _ in range(4)]
    return out


def det_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    info.user_metadata[HCCL_ENV_KEY]["HCCL_DETERMINISTIC"] = "true"
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(use_distributed_optimizer=True)
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(det_program(), group_kinds(ranks, 1), default_perturb(ranks), info)}


def _det_bw(cl: Cluster, transport: int, reduce: bool) -> list[float]:
    out: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if (op.item.op_type in DET_REDUCE) != reduce:
                continue
            sel = (op.kind.transport == transport) & (op.link_ms > 0)
            out.extend((op.link_mb[sel] / op.link_ms[sel]).tolist())
    return out


def det_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: reduction collectives at ~42% bandwidth on every link, gathers normal."""
    cl: Cluster = m[""]["cluster"]
    colls = [it for it in cl.program if isinstance(it, Collective)]

    def op_us(pick: str, size: float) -> float:
        return float(
            np.median(
                [
                    (op.end - op.start) / 1000
                    for st in cl.steps
                    for op in st.ops
                    if op.item.op_type == pick and op.item.size_mb == size
                ]
            )
        )

    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    base = _sim_breakdown(_resimulate(cl, det_program(deterministic=False)))
    base_step = float(np.median(base["step_us"]))
    red_h = float(np.median(_det_bw(cl, 0, True)))
    gat_h = float(np.median(_det_bw(cl, 0, False)))
    red_r = _det_bw(cl, 1, True)
    gat_r = _det_bw(cl, 1, False)
    nums = {
        "reduce_collectives_per_step": sum(1 for c in colls if c.op_type in DET_REDUCE),
        "gather_collectives_per_step": sum(1 for c in colls if c.op_type not in DET_REDUCE),
        "reduce_scatter_mb": DET_GRAD_MB,
        "all_gather_mb": DET_PARAM_MB,
        "reduce_hccs_bandwidth_gbps": round(red_h, 3),
        "gather_hccs_bandwidth_gbps": round(gat_h, 3),
        "reduce_rdma_bandwidth_gbps": round(float(np.median(red_r)), 3) if red_r else None,
        "gather_rdma_bandwidth_gbps": round(float(np.median(gat_r)), 3) if gat_r else None,
        "reduce_to_gather_bandwidth_ratio": round(red_h / gat_h, 3),
        "reduce_scatter_us_median": _r(op_us("hcom_reduceScatter_", DET_GRAD_MB)),
        "all_gather_us_median": _r(op_us("hcom_allGather_", DET_PARAM_MB)),
        "median_comm_not_overlapped_us_per_step": _r(float(np.median(notov.mean(axis=1)))),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_comm_not_overlapped_us_per_step_nondeterministic": _r(
            float(np.median(base["comm_not_overlapped_us"]))
        ),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_nondeterministic": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
        "saving_share_of_step": round(
            (float(np.median(step)) - base_step) / float(np.median(step)), 4
        ),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "reduce_hccs_bandwidth_gbps": nums["reduce_hccs_bandwidth_gbps"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        env_var="HCCL_DETERMINISTIC",
        env_value="true",
        env_file="profiler_metadata.json (hccl_env)",
        slow_op_types=list(DET_REDUCE),
        normal_op_types=["hcom_allGather_"],
        bandwidth_ratio=nums["reduce_to_gather_bandwidth_ratio"],
        every_link=True,
        transports=["HCCS", "RDMA"],
        packets_normal=True,
        cause="deterministic (fixed-order) reduction in HCCL, enabled for loss-curve alignment "
        "with a GPU run and never turned off",
        fix="unset HCCL_DETERMINISTIC (false) for performance runs; keep it only for "
        "precision-alignment / reproducibility runs",
        same_every_step=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- old-cann-node-unfused
OC_NODE = 1
OC_OLD = (CANN7.cann_version, CANN7.torch_npu_version)
OC_TAG_FUSED = "fused"
OC_TAG_EAGER = "eager"
_SH = "4096,4096"
_SH1 = "4096,1"
_SHF = "4096,16384"
_SHF2 = "4096,32768"


def _ek(op_type: str, ins: str, outs: str, dur: float, dt_in: str, dt_out: str) -> Kernel:
    """An eager (PyTorch) vector kernel of the fallback code path."""
    api = {"Swish": "aclnnSilu", "SwishGrad": "aclnnSiluBackward", "ConcatD": "aclnnCat"}.get(
        op_type, f"aclnn{op_type}"
    )
    n_in = ins.count(";") + 1
    return Kernel(
        name=f"{api}_{op_type}_{op_type}",
        op_type=op_type,
        core="AI_VECTOR_CORE",
        in_shapes=ins,
        in_dtypes=";".join([dt_in] * n_in),
        in_formats=";".join(["ND"] * n_in),
        out_shapes=outs,
        out_dtypes=dt_out,
        out_formats="ND",
        dur_us=dur,
        block_dim=40,
        api=api,
        tag=OC_TAG_EAGER,
    )


BF, FP = "DT_BF16", "DT_FLOAT"


def _eager_norm() -> list[Kernel]:
    """RMSNorm in PyTorch: x.float(), pow(2), mean(-1), + eps, rsqrt, x * r, .to(bf16), * weight."""
    return [
        _ek("Cast", _SH, _SH, 80.0, BF, FP),
        _ek("Pow", _SH, _SH, 100.0, FP, FP),
        _ek("ReduceMean", _SH, _SH1, 60.0, FP, FP),
        _ek("Adds", _SH1, _SH1, 4.0, FP, FP),
        _ek("Rsqrt", _SH1, _SH1, 4.0, FP, FP),
        _ek("Mul", f"{_SH};{_SH1}", _SH, 100.0, FP, FP),
        _ek("Cast", _SH, _SH, 70.0, FP, BF),
        _ek("Mul", f"{_SH};4096", _SH, 60.0, BF, BF),
    ]


def _eager_norm_grad() -> list[Kernel]:
    """Autograd of the PyTorch RMSNorm (weight and input gradients)."""
    return [
        _ek("Mul", f"{_SH};4096", _SH, 60.0, BF, BF),
        _ek("Cast", _SH, _SH, 70.0, BF, FP),
        _ek("Mul", f"{_SH};{_SH1}", _SH, 100.0, FP, FP),
        _ek("Mul", f"{_SH};{_SH}", _SH, 100.0, FP, FP),
        _ek("ReduceSum", _SH, _SH1, 60.0, FP, FP),
        _ek("RsqrtGrad", f"{_SH1};{_SH1}", _SH1, 4.0, FP, FP),
        _ek("Muls", _SH1, _SH1, 4.0, FP, FP),
        _ek("Mul", f"{_SH};{_SH1}", _SH, 100.0, FP, FP),
        _ek("Mul", f"{_SH};{_SH}", _SH, 100.0, FP, FP),
        _ek("Add", f"{_SH};{_SH}", _SH, 100.0, FP, FP),
        _ek("Cast", _SH, _SH, 70.0, FP, BF),
        _ek("Mul", f"{_SH};{_SH}", _SH, 60.0, BF, BF),
        _ek("ReduceSum", _SH, "4096", 60.0, BF, BF),
    ]


def _eager_swiglu() -> list[Kernel]:
    """SwiGLU in PyTorch: silu(gate) * up over the two halves of the up-projection."""
    return [
        _ek("Swish", _SHF, _SHF, 60.0, BF, BF),
        _ek("Mul", f"{_SHF};{_SHF}", _SHF, 90.0, BF, BF),
    ]


def _eager_swiglu_grad() -> list[Kernel]:
    """Autograd of silu(gate) * up, the two halves' gradients concatenated."""
    return [
        _ek("Mul", f"{_SHF};{_SHF}", _SHF, 85.0, BF, BF),
        _ek("Mul", f"{_SHF};{_SHF}", _SHF, 85.0, BF, BF),
        _ek("SwishGrad", f"{_SHF};{_SHF}", _SHF, 85.0, BF, BF),
        _ek("ConcatD", f"{_SHF};{_SHF}", _SHF2, 115.0, BF, BF),
    ]


_OC_EAGER = {
    "RmsNorm": _eager_norm,
    "RmsNormGrad": _eager_norm_grad,
    "SwiGlu": _eager_swiglu,
    "SwiGluGrad": _eager_swiglu_grad,
}


def oc_program() -> list[Item]:
    """transformer(4 layers); after each fused norm / SwiGLU the slots of its PyTorch fallback.

    One program runs on every rank: node 0 skips the fallback slots, node 1 the fused kernels.
    """
    out: list[Item] = []
    for it in transformer(layers=4):
        if isinstance(it, Kernel) and it.op_type in _OC_EAGER:
            out.append(dataclasses.replace(it, tag=OC_TAG_FUSED))
            out += _OC_EAGER[it.op_type]()
        else:
            out.append(it)
    return out


def _oc_ranks(ranks: int) -> list[int]:
    return [r for r in range(ranks) if r // RANKS_PER_NODE == OC_NODE]


def _oc_skips(prog: list[Item], ranks: int, node1_old: bool = True) -> dict[int, set[int]]:
    ks = _kernels(prog)
    fused = {j for j, k in enumerate(ks) if k.tag == OC_TAG_FUSED}
    eager = {j for j, k in enumerate(ks) if k.tag == OC_TAG_EAGER}
    old = set(_oc_ranks(ranks)) if node1_old else set()
    return {r: (set(fused) if r in old else set(eager)) for r in range(ranks)}


def oc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = oc_program()
    p = default_perturb(ranks)
    p.skip_kernels = _oc_skips(prog, ranks)
    info = dataclasses.replace(
        _info(CANN8, 1, ranks), rank_versions={r: OC_OLD for r in _oc_ranks(ranks)}
    )
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def oc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1 runs the PyTorch fallbacks of RMSNorm / SwiGLU; node 0 waits for it."""
    cl: Cluster = m[""]["cluster"]
    bad = _oc_ranks(ranks)
    rest = [r for r in range(ranks) if r not in bad]
    ks = cl.kernels
    skips = cl.perturb.skip_kernels
    n_run = np.array([len(ks) - len(skips.get(r, set())) for r in range(ranks)])
    mm = [j for j, k in enumerate(ks) if k.op_type in ("MatMulV2", "FlashAttentionScore")]
    mm_us = np.array([st.k_dur[:, mm].mean(axis=1) for st in cl.steps]).T / 1000  # [R, S]
    norm_fused = [j for j, k in enumerate(ks) if k.op_type == "RmsNorm"]
    norm_us = np.array([st.k_dur[:, norm_fused].mean(axis=1) for st in cl.steps]).T / 1000
    # an eager forward norm: the 8 slots after each fused RmsNorm (node 1)
    chains = [list(range(j + 1, j + 1 + len(_eager_norm()))) for j in norm_fused]
    chain_us = np.array(
        [[st.k_dur[:, c].sum(axis=1) / 1000 for c in chains] for st in cl.steps]
    )  # [S, P, R] µs
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    healthy = default_perturb(ranks)
    healthy.skip_kernels = _oc_skips(cl.program, ranks, node1_old=False)
    base = _healthy_baseline(cl, healthy, cl.program)
    base_step = float(np.median(base["step_us"]))
    fused_types = sorted(_OC_EAGER)
    common = {k.op_type for k in ks if k.tag not in (OC_TAG_EAGER, OC_TAG_FUSED)}
    eager_types = sorted({k.op_type for k in ks if k.tag == OC_TAG_EAGER} - common)
    nums = {
        "nodes": ranks // RANKS_PER_NODE,
        "culprit_node": OC_NODE,
        "culprit_ranks": bad,
        "culprit_kernels_per_step": int(np.median(n_run[bad])),
        "others_kernels_per_step": int(np.median(n_run[rest])),
        "culprit_computing_us_per_step": _r(float(np.median(comp[bad].mean(axis=1)))),
        "others_computing_us_per_step": _r(float(np.median(comp[rest].mean(axis=1)))),
        "culprit_computing_excess_us_per_step": _r(
            float(np.median(comp[bad].mean(axis=1))) - float(np.median(comp[rest].mean(axis=1)))
        ),
        "computing_ratio": round(
            float(np.median(comp[bad].mean(axis=1)) / np.median(comp[rest].mean(axis=1))), 3
        ),
        "culprit_eager_rmsnorm_us_median": _r(float(np.median(chain_us[:, :, bad]))),
        "others_fused_rmsnorm_us_median": _r(float(np.median(norm_us[rest]))),
        "culprit_matmul_fa_us_median": _r(float(np.median(mm_us[bad]))),
        "others_matmul_fa_us_median": _r(float(np.median(mm_us[rest]))),
        "others_wait_us_per_step_median": _r(float(np.median(wait[rest].mean(axis=1)))),
        "culprit_wait_us_per_step_median": _r(float(np.median(wait[bad].mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_same_image": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key(bad, "compute", ["load-imbalance-vs-slow-kernels"], "computing_us", nums)
    vic = victims_by_wait(wait, bad)
    key["root_cause"] = root_cause(
        "slow_group",
        "compute",
        "group",
        ranks=bad,
        victims=vic,
        not_slow=not_slow_sample(ranks, bad, vic),
        metrics={
            "culprit_computing_excess_us_per_step": nums["culprit_computing_excess_us_per_step"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    key["evidence"] = {
        "culprit_node": OC_NODE,
        "culprit_ranks": bad,
        "version_file": "profiler_info_{rank}.json (cann_version, torch_npu_version)",
        "culprit_cann_version": OC_OLD[0],
        "culprit_torch_npu_version": OC_OLD[1],
        "others_cann_version": CANN8.cann_version,
        "others_torch_npu_version": CANN8.torch_npu_version,
        "fused_op_types_missing_on_culprit": fused_types,
        "eager_op_types_on_culprit": eager_types,
        "cause": "node 1's container image has an older CANN / torch_npu without the fused "
        "RmsNorm and SwiGlu kernels; the model falls back to the PyTorch RMSNorm and SwiGLU there",
        "fix": "run node 1 on the same image as node 0 (CANN 8.0.RC2, torch_npu 2.1.0.post6): one "
        "image on every server",
        "matmul_normal": True,
        "links_normal": True,
        "every_step": True,
    }
    return key


# ---------------------------------------------------------------- uneven-microbatch-split
UM_MICRO = 3  # micro-batches of the ranks that get one more
UM_SCALE_EVEN = 0.75  # the same tokens split evenly: 3 micro-batches of 3072 tokens on every rank


def _um_extra(ranks: int) -> list[int]:
    """Ranks dealt a third micro-batch: 2 * ranks + 4 micro-batches dealt round-robin."""
    return list(range(min(4, ranks - 1)))


def um_program(scale: float = 1.0) -> list[Item]:
    """Three micro-batches (the last with the gradient all-reduces), then the optimizer."""
    if scale == 1.0:
        return _micro_batch(False) + _micro_batch(False) + _micro_batch(True)
    out: list[Item] = []
    for it in _micro_batch(False) + _micro_batch(False) + _micro_batch(True):
        if isinstance(it, Kernel) and it.op_type not in ("ForeachMulScalar", "ForeachAddList"):
            it = dataclasses.replace(it, dur_us=it.dur_us * scale)
        out.append(it)
    return out


def _um_second(prog: list[Item]) -> set[int]:
    """Kernel indices of the second micro-batch (not run by the ranks with two)."""
    n = len(_kernels(_micro_batch(False)))
    return set(range(n, 2 * n))


def um_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = um_program()
    p = default_perturb(ranks)
    extra = set(_um_extra(ranks))
    second = _um_second(prog)
    p.skip_kernels = {r: set(second) for r in range(ranks) if r not in extra}
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(micro_batch_size=1, seq_length=4096, global_batch_size=2 * ranks + len(extra))
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def um_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: ranks 0-3 run 3 micro-batches, the others 2; the others wait for them."""
    cl: Cluster = m[""]["cluster"]
    cul = _um_extra(ranks)
    others = [r for r in range(ranks) if r not in cul]
    ks = cl.kernels
    skips = cl.perturb.skip_kernels
    n_run = np.array([len(ks) - len(skips.get(r, set())) for r in range(ranks)])
    fa = [j for j, k in enumerate(ks) if k.op_type == "FlashAttentionScore"]
    n_fa = np.array([len([j for j in fa if j not in skips.get(r, set())]) for r in range(ranks)])
    mm = [
        j for j, k in enumerate(ks) if k.op_type == "MatMulV2" and j not in _um_second(cl.program)
    ]
    mm_us = np.array([st.k_dur[:, mm].mean(axis=1) for st in cl.steps]).T / 1000
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    base = _healthy_baseline(cl, default_perturb(ranks), um_program(UM_SCALE_EVEN))
    base_step = float(np.median(base["step_us"]))
    nums = {
        "culprit_ranks": cul,
        "micro_batches_per_step_total": 2 * ranks + len(cul),
        "culprit_micro_batches_per_step": UM_MICRO,
        "others_micro_batches_per_step": UM_MICRO - 1,
        "culprit_kernels_per_step": int(np.median(n_run[cul])),
        "others_kernels_per_step": int(np.median(n_run[others])),
        "culprit_flash_attention_per_step": int(np.median(n_fa[cul])),
        "others_flash_attention_per_step": int(np.median(n_fa[others])),
        "culprit_matmul_us_median": _r(float(np.median(mm_us[cul]))),
        "others_matmul_us_median": _r(float(np.median(mm_us[others]))),
        "culprit_computing_us_per_step": _r(float(np.median(comp[cul].mean(axis=1)))),
        "others_computing_us_per_step": _r(float(np.median(comp[others].mean(axis=1)))),
        "computing_ratio": round(
            float(np.median(comp[cul].mean(axis=1)) / np.median(comp[others].mean(axis=1))), 3
        ),
        "others_wait_us_per_step_median": _r(float(np.median(wait[others].mean(axis=1)))),
        "culprit_wait_us_per_step_median": _r(float(np.median(wait[cul].mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_even_split": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
        "saving_share_of_step": round(
            (float(np.median(step)) - base_step) / float(np.median(step)), 4
        ),
    }
    key = _key(cul, "compute", ["load-imbalance-vs-slow-kernels"], "computing_us", nums)
    vic = victims_by_wait(wait, cul)
    key["root_cause"] = root_cause(
        "compute_straggler",
        "compute",
        "ranks",
        ranks=cul,
        victims=vic,
        not_slow=not_slow_sample(ranks, cul, vic),
        metrics={
            "culprit_wait_us_per_step": nums["culprit_wait_us_per_step_median"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "culprit_computing_excess_us_per_step": _r(
                float(np.median(comp[cul].mean(axis=1)))
                - float(np.median(comp[others].mean(axis=1)))
            ),
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    key["evidence"] = {
        "culprit_ranks": cul,
        "culprit_micro_batches": UM_MICRO,
        "others_micro_batches": UM_MICRO - 1,
        "kernel_count_ratio": round(float(np.median(n_run[cul]) / np.median(n_run[others])), 3),
        "same_kernel_durations": True,
        "same_shapes": True,
        "cause": "36 micro-batches per step dealt round-robin over 16 data-parallel ranks "
        "(micro_batches[rank::16]): ranks 0-3 get a third one",
        "fix": "split the step's samples evenly before packing (same tokens on every rank), or make "
        "the micro-batch count per step a multiple of the data-parallel size (32 or 48)",
        "cards_normal": True,
        "links_normal": True,
        "every_step": True,
    }
    return key


# ---------------------------------------------------------------- registry
DEV14_SCENARIOS = (
    ScenarioSpec(
        "pageable-h2d-copy",
        "pin_memory=False: each micro-batch's pixel_values (fp32, ~87 MB) copied from pageable "
        "memory, a stream synchronize + blocking aclrtMemcpy (~29 ms, ~3 GB/s) before the first "
        "kernel of each of the 2 micro-batches; the device idles there on every rank",
        16,
        4,
        h2d_plans,
        h2d_answer,
    ),
    ScenarioSpec(
        "hccl-deterministic-on",
        "HCCL_DETERMINISTIC=true left on (hccl_env): the reduction collectives (gradient "
        "hcom_reduceScatter_, hcom_allReduce_) at ~42% of the links' bandwidth on every link, the "
        "parameter hcom_allGather_ at full bandwidth; the gradient communication no longer hides "
        "behind the backward; every rank, links normal",
        16,
        4,
        det_plans,
        det_answer,
    ),
    ScenarioSpec(
        "old-cann-node-unfused",
        "node 1 on an older image (CANN 7.0.1 / torch_npu 2.1.0 in profiler_info) without fused "
        "RmsNorm / SwiGlu: the PyTorch RMSNorm and SwiGLU chains (Cast, Pow, ReduceMean, Rsqrt, "
        "Mul ..., Swish, SwishGrad, ConcatD) there, ~2.8x the kernels; its MatMuls normal; node 0 "
        "waits",
        16,
        4,
        oc_plans,
        oc_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "uneven-microbatch-split",
        "36 micro-batches per step dealt round-robin over DP16: ranks 0-3 run 3 micro-batches "
        "(1.5x the device tasks, every kernel as fast as elsewhere), ranks 4-15 run 2 and wait "
        "for them in the gradient all-reduces",
        16,
        4,
        um_plans,
        um_answer,
        min_ranks=8,
    ),
)
DEV14_KINDS = tuple(s.name for s in DEV14_SCENARIOS)


__all__ = ["DEV14_KINDS", "DEV14_SCENARIOS"]
