"""Seventeenth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev19.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the rank-16 MatMulV2 shapes and the Muls / Add
chains of kernel_details.csv, the all-to-all Transit Size of communication.json with the padded
GroupedMatmul rows, the launch calls and host gaps on the CANN lane of trace_view.json on one node,
and the Python frames on the Python lane of trace_view.json on one rank):

- ``lora-unfused-adapters``: LoRA fine-tuning (rank 16) through a plain adapter wrapper on the
  four linear layers of every transformer layer: each adapter runs as its own chain of a
  ``[4096,in]x[16,in]`` MatMulV2, a ``[4096,16]x[out,16]`` MatMulV2, a ``Muls`` (the scaling) and an
  ``Add`` into the base output, and six more in the backward (the scaling's grad, four rank-16
  MatMulV2, an Add into the input grad), 160 extra kernels a step whose launches the host issues
  slower than they run (the device idles before each). The base weights are frozen (no weight-grad
  MatMuls, tiny gradient all-reduces). Job-level (every rank alike), links normal.
- ``moe-capacity-padding``: MoE (16 experts, EP=8 per node, top-2) with
  ``--moe-expert-capacity-factor 3 --moe-pad-expert-input-to-capacity``: every expert's buffer is
  padded to its capacity, so every dispatch / combine ``hcom_alltoallv_`` moves 3x the routed rows
  (2/3 of them padding) and every GroupedMatmul runs on 3x the rows, on every rank alike (the
  routing itself is balanced). Job-level.
- ``numa-binding-node``: node 1 (ranks 8-15) is launched without CPU core binding (its launcher
  lacks the per-rank ``taskset`` / ``CPU_AFFINITY_CONF`` node 0 has), so its host threads migrate
  across cores and NUMA nodes: every launch call takes ~3x longer, the host no longer runs ahead of
  the device, and in every step a few dozen launches come late after the thread was descheduled
  (device idle with no host call covering it, a different place each step). Node 0 waits for node
  1 in every collective. Culprit: node 1 (its host), kernels and links normal.
- ``nfs-metrics-log-rank``: the last rank (which logs the metrics, Megatron's ``print_rank_last``
  rank) appends every step's metrics to a file on an NFS mount and ``os.fsync`` s it before the
  next step: 11-19 ms of Python (``training_log`` > ``metrics_logger.py`` > ``fsync``) before its
  first launch, a different length each step; every other rank waits for it in the first gradient
  all-reduce. Culprit: that rank, its host; kernels and links normal.
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
    default_perturb,
)
from advisor_chat.synth.scenarios import (
    CANN8,
    Plan,
    S,
    ScenarioSpec,
    _info,
    _k,
    _key,
    _r,
    col,
    group_kinds,
    transformer,
)
from advisor_chat.synth.scenarios_dev import _rank_rc, _with_evidence
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_dev4 import (
    A2A,
    GMM,
    MOE_A2A_MB,
    MOE_EP,
    MOE_EXPERTS,
    MOE_TOKENS,
    MOE_TOPK,
    _moe_expert_kernels,
    _moe_info,
    _resimulate,
    _sim_breakdown,
    moe_kinds,
    moe_program,
)
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    step_ids,
    victims_by_wait,
)

LAYERS = 4


def _med(x: Any) -> float:
    return _r(float(np.median(x)))


def _saving(step: np.ndarray, base_step: np.ndarray) -> tuple[float, float, float]:
    """(median step, median step without the fault, saving) in µs."""
    a = float(np.median(step))
    b = float(np.median(base_step))
    return a, b, a - b


def _kernel_us(cl: Cluster, pick: Any) -> np.ndarray:
    """[ranks, steps] summed device time (µs) of the program kernels ``pick(kernel)`` accepts."""
    idx = [j for j, k in enumerate(cl.kernels) if pick(k)]
    return np.stack([st.k_dur[:, idx].sum(axis=1) / 1000 for st in cl.steps], axis=1)


def _gap_before_us(cl: Cluster, pick: Any) -> np.ndarray:
    """[ranks, steps] device idle (µs) right before the kernels ``pick(kernel)`` accepts."""
    idx = [j for j, k in enumerate(cl.kernels) if pick(k) and j > 0]
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for j in idx:
            prev = st.k_start[:, j - 1] + st.k_dur[:, j - 1]
            out[:, si] += np.maximum(st.k_start[:, j] - prev, 0) / 1000
    return out


# ---------------------------------------------------------------- lora-unfused-adapters
LORA_R = 16
LORA_TAG = "lora"
LORA_HOST_US = 26.0  # host time per adapter launch beyond what the tiny kernel takes on the device
HBM_B_PER_US = 1.2e6  # effective HBM streaming rate of a memory-bound kernel (bytes per µs)
# base linear tag -> (in features, out features) of transformer(tp=1)
LORA_LINEARS = {
    "qkv": (4096, 3 * 4096),
    "attn_out": (4096, 4096),
    "mlp_up": (4096, 2 * 4 * 4096),
    "mlp_down": (4 * 4096, 4096),
}
FROZEN_DW = ("qkv_dw", "attn_out_dw", "mlp_up_dw", "mlp_down_dw")
LORA_GRAD_MB = 2.6  # LoRA parameters' gradients per layer (all-reduced; base weights frozen)


def _mem_us(nbytes: float) -> float:
    return round(8.0 + nbytes / HBM_B_PER_US, 1)


def _lora_mm(ins: str, outs: str, nbytes: float, tag: str) -> Kernel:
    return _k(
        "aclnnMatmul_MatMulCommon_MatMulV2",
        "MatMulV2",
        "AI_CORE",
        ins,
        outs,
        _mem_us(nbytes),
        "aclnnMatmul",
        tag,
        bd=8,
    )


def _lora_vec(op: str, shape: str, nbytes: float, tag: str) -> Kernel:
    return _k(
        f"aclnn{op}_{op}_{op}",
        op,
        "AI_VECTOR_CORE",
        shape if op != "Add" else f"{shape};{shape}",
        shape,
        _mem_us(nbytes),
        f"aclnn{op}",
        tag,
        bd=40,
    )


def _lora_fwd(base: str, fused: bool) -> list[Item]:
    i, o = LORA_LINEARS[base]
    r = LORA_R
    x, y = S * i * 2, S * o * 2  # bytes of the input and of the output
    tag = LORA_TAG if not fused else "lora_fused"
    a = _lora_mm(f"{S},{i};{r},{i}", f"{S},{r}", x, f"{tag}_{base}_a")
    if fused:  # scaling folded into B, the product accumulated into the base output in place
        return [a, _lora_mm(f"{S},{r};{o},{r};{S},{o}", f"{S},{o}", 2 * y, f"{tag}_{base}_b")]
    return [
        a,
        _lora_mm(f"{S},{r};{o},{r}", f"{S},{o}", y, f"{tag}_{base}_b"),
        _lora_vec("Muls", f"{S},{o}", 2 * y, f"{tag}_{base}_scale"),
        _lora_vec("Add", f"{S},{o}", 3 * y, f"{tag}_{base}_add"),
    ]


def _lora_bwd(base: str, fused: bool) -> list[Item]:
    i, o = LORA_LINEARS[base]
    r = LORA_R
    x, y = S * i * 2, S * o * 2
    tag = LORA_TAG if not fused else "lora_fused"
    mms = [
        _lora_mm(f"{S},{o};{S},{r}", f"{o},{r}", y, f"{tag}_{base}_db"),
        _lora_mm(f"{S},{o};{o},{r}", f"{S},{r}", y, f"{tag}_{base}_dh"),
        _lora_mm(f"{S},{r};{S},{i}", f"{r},{i}", x, f"{tag}_{base}_da"),
    ]
    if fused:
        return [*mms, _lora_mm(f"{S},{r};{r},{i};{S},{i}", f"{S},{i}", 2 * x, f"{tag}_{base}_dx")]
    return [
        _lora_vec("Muls", f"{S},{o}", 2 * y, f"{tag}_{base}_scale_grad"),
        *mms,
        _lora_mm(f"{S},{r};{r},{i}", f"{S},{i}", x, f"{tag}_{base}_dx"),
        _lora_vec("Add", f"{S},{i}", 3 * x, f"{tag}_{base}_dx_add"),
    ]


def lora_program(fused: bool = False) -> list[Item]:
    """transformer() with frozen base weights and a rank-16 LoRA adapter on its four linears."""
    out: list[Item] = []
    for it in transformer(layers=LAYERS, grad_mb=LORA_GRAD_MB):
        if isinstance(it, Kernel) and it.tag in FROZEN_DW:
            continue  # frozen base weight: no weight gradient
        out.append(it)
        if isinstance(it, Kernel) and it.tag in LORA_LINEARS:
            out += _lora_fwd(it.tag, fused)
        elif isinstance(it, Kernel) and it.tag.endswith("_dx") and it.tag[:-3] in LORA_LINEARS:
            out += _lora_bwd(it.tag[:-3], fused)
    return out


def _is_lora(k: Kernel) -> bool:
    return k.tag.startswith(LORA_TAG + "_")


def lora_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    prog = lora_program()
    ks = [it for it in prog if isinstance(it, Kernel)]
    at = {j: LORA_HOST_US for j, k in enumerate(ks) if _is_lora(k)}
    p.kernel_stalls = {r: dict(at) for r in range(ranks)}
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def lora_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the unfused adapter chains, their device time and the idle before them."""
    cl: Cluster = m[""]["cluster"]
    lk = [k for k in cl.kernels if _is_lora(k)]
    dev = _kernel_us(cl, _is_lora)
    idle = _gap_before_us(cl, _is_lora)
    mm = _kernel_us(cl, lambda k: _is_lora(k) and k.op_type == "MatMulV2")
    ew = _kernel_us(cl, lambda k: _is_lora(k) and k.op_type in ("Muls", "Add"))
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    free = col(m, "free_us")
    base = _baseline(cl, lora_program(fused=True))
    a, b, save = _saving(step, base["step_us"])
    n_adapters = len(LORA_LINEARS) * LAYERS
    nums = {
        "lora_rank": LORA_R,
        "adapters": n_adapters,
        "lora_kernels_per_step": len(lk),
        "lora_matmuls_per_step": sum(1 for k in lk if k.op_type == "MatMulV2"),
        "lora_elementwise_per_step": sum(1 for k in lk if k.op_type in ("Muls", "Add")),
        "kernels_per_adapter": len(lk) // n_adapters,
        "lora_device_us_per_step": _med(dev.mean(axis=0)),
        "lora_matmul_us_per_step": _med(mm.mean(axis=0)),
        "lora_elementwise_us_per_step": _med(ew.mean(axis=0)),
        "idle_before_lora_us_per_step": _med(idle.mean(axis=0)),
        "lora_total_us_per_step": _med((dev + idle).mean(axis=0)),
        "lora_share_of_step": _share(dev + idle, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "median_step_us": _r(a),
        "median_step_us_fused_lora": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "compute", ["tiny-kernels-fusion"], "computing_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={
            "lora_total_us_per_step": nums["lora_total_us_per_step"],
            "lora_share_of_step": nums["lora_share_of_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        lora_rank=LORA_R,
        operators=["MatMulV2", "Muls", "Add"],
        matmul_shape_example=f"{S},4096;{LORA_R},4096",
        per_adapter_forward=["MatMulV2 (x·A)", "MatMulV2 (·B)", "Muls (scaling)", "Add"],
        adapted_linears=list(LORA_LINEARS),
        frozen_weight_grads_missing=list(FROZEN_DW),
        file="kernel_details.csv (Input Shapes with a 16 dimension; Wait Time before them)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause="LoRA (rank 16) through a plain adapter wrapper on qkv, attn_out, mlp_up and mlp_down "
        "of every layer: each adapter runs unfused as x·A, ·B, a Muls for the scaling and an Add into "
        "the base output, and six more kernels in the backward; 160 extra kernels a step, the "
        "elementwise ones streaming full-size activations again, and the host launching them slower "
        "than they run",
        fix="use a fused LoRA implementation (MindSpeed --lora-fusion / CCLoRA, or fold the scaling "
        "into B and accumulate into the base output with one addmm-style kernel), or merge adapters "
        "where possible; fewer adapted modules (e.g. qkv only) also cut it",
    )


# ---------------------------------------------------------------- moe-capacity-padding
CAP_FACTOR = 3.0  # --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity


def _cap_rows() -> int:
    return round(MOE_TOKENS * CAP_FACTOR)


def cap_program(padded: bool = True) -> list[Item]:
    """moe_program() with every expert buffer padded to capacity (3x the routed rows)."""
    if not padded:
        return moe_program()
    ex = _moe_expert_kernels(_cap_rows())
    routed = set(_moe_expert_kernels(MOE_TOKENS))
    out: list[Item] = []
    for it in moe_program():
        if isinstance(it, Collective) and it.op_type == A2A:
            out.append(dataclasses.replace(it, size_mb=MOE_A2A_MB * CAP_FACTOR, tag="a2a_padded"))
        elif isinstance(it, Kernel) and it.tag in routed:
            out.append(ex[it.tag])
        else:
            out.append(it)
    return out


def cap_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _moe_info(ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(moe_expert_capacity_factor=CAP_FACTOR, moe_pad_expert_input_to_capacity=True)
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(cap_program(), moe_kinds(ranks), default_perturb(ranks), info)}


def _a2a_stats(cl: Cluster) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """[ranks, steps] all-to-all time and wire MB, and every op's median duration (µs)."""
    t = np.zeros((cl.ranks, len(cl.steps)))
    mb = np.zeros_like(t)
    per_op: list[float] = []
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if op.item.op_type != A2A:
                continue
            t[:, si] += (op.end - op.start) / 1000
            wire = (op.kind.transport == 0) | (op.kind.transport == 1)
            mb[:, si] += np.where(wire, op.link_mb, 0.0).sum(axis=1)
            per_op.append(float(np.median((op.end - op.start) / 1000)))
    return t, mb, per_op


def cap_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the padded all-to-alls and GroupedMatmuls, the same on every rank."""
    cl: Cluster = m[""]["cluster"]
    a2a_t, a2a_mb, a2a_op = _a2a_stats(cl)
    gmm = _kernel_us(cl, lambda k: k.op_type == GMM)
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    comp = col(m, "computing_us")
    base_cl = _resimulate(dataclasses.replace(cl, perturb=default_perturb(ranks)), moe_program())
    base = _sim_breakdown(base_cl)
    b_t, _b_mb, b_op = _a2a_stats(base_cl)
    b_gmm = _kernel_us(base_cl, lambda k: k.op_type == GMM)
    a, b, save = _saving(step, base["step_us"])
    n_a2a = sum(1 for it in cl.program if isinstance(it, Collective) and it.op_type == A2A)
    a2a_extra = float(np.median(a2a_t.mean(axis=0) - b_t.mean(axis=0)))
    gmm_extra = float(np.median(gmm.mean(axis=0) - b_gmm.mean(axis=0)))
    nums = {
        "capacity_factor": CAP_FACTOR,
        "num_experts": MOE_EXPERTS,
        "ep_size": MOE_EP,
        "topk": MOE_TOPK,
        "routed_rows_per_rank": MOE_TOKENS,
        "padded_rows_per_rank": _cap_rows(),
        "padding_share_of_rows": round(1 - MOE_TOKENS / _cap_rows(), 4),
        "alltoallv_per_step": n_a2a,
        "alltoallv_payload_mb": _r(MOE_A2A_MB * CAP_FACTOR),
        "alltoallv_payload_mb_unpadded": _r(MOE_A2A_MB),
        "alltoallv_us_median": _med(a2a_op),
        "alltoallv_us_median_unpadded": _med(b_op),
        "alltoallv_us_per_step": _med(a2a_t.mean(axis=0)),
        "alltoallv_us_per_step_unpadded": _med(b_t.mean(axis=0)),
        "alltoallv_wire_mb_per_step": _r(float(np.median(a2a_mb))),
        "alltoallv_share_of_step": _share(a2a_t, step),
        "grouped_matmul_us_per_step": _med(gmm.mean(axis=0)),
        "grouped_matmul_us_per_step_unpadded": _med(b_gmm.mean(axis=0)),
        "alltoallv_extra_us_per_step": _r(a2a_extra),
        "grouped_matmul_extra_us_per_step": _r(gmm_extra),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_no_padding": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    comm_first = a2a_extra >= gmm_extra
    category = "communication" if comm_first else "compute"
    key = _key(
        [],
        category,
        ["moe-expert-imbalance", "comm-not-overlapped"],
        "comm_not_overlapped_us" if comm_first else "computing_us",
        nums,
    )
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication" if comm_first else "job_hotspot",
        category,
        metrics={
            "alltoallv_us_per_step": nums["alltoallv_us_per_step"],
            "padding_share_of_rows": nums["padding_share_of_rows"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        collective=A2A,
        group="ep (one per node)",
        payload_mb=_r(MOE_A2A_MB * CAP_FACTOR),
        payload_mb_routed=_r(MOE_A2A_MB),
        expert_operator=GMM,
        expert_rows=_cap_rows(),
        expert_rows_routed=MOE_TOKENS,
        capacity_factor=CAP_FACTOR,
        file="communication.json (Transit Size of the hcom_alltoallv_ ops) and kernel_details.csv "
        "(GroupedMatmul input rows)",
        balanced=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        cause="the MoE layers run with --moe-expert-capacity-factor 3 and "
        "--moe-pad-expert-input-to-capacity: every expert's token buffer is padded to 3x its share, "
        "so each dispatch / combine all-to-all moves 3x the routed tokens (2/3 of them zero padding) "
        "and every GroupedMatmul computes on 3x the rows, on every rank",
        fix="lower the capacity factor (about 1.0-1.25) or stop padding to capacity (drop "
        "--moe-pad-expert-input-to-capacity; dropless alltoall dispatch sends only the routed tokens)",
    )


# ---------------------------------------------------------------- numa-binding-node
NB_NODE = 1
NB_API_US = 34.0  # a launch call on a migrating, cross-NUMA host thread (node 0: 11 µs)
NB_GAP_US = 30.0  # device idle between launches once the host no longer runs ahead (node 0: 14)
NB_MIGRATIONS = (18, 30)  # descheduled launches per step and rank (uniform)
NB_MIGRATION_US = (150.0, 700.0)  # device idle while the host thread is away (uniform)


def _nb_ranks(ranks: int) -> list[int]:
    node = min(NB_NODE, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def nb_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    bad = _nb_ranks(ranks)
    prog = transformer(layers=LAYERS)
    nk = sum(1 for it in prog if isinstance(it, Kernel))
    p.api_us[bad] = NB_API_US
    p.gap_us[bad] = NB_GAP_US
    p.host_bound[bad] = True
    rng = np.random.default_rng(seed + 1901)
    for si in range(steps):
        for r in bad:
            n = int(rng.integers(NB_MIGRATIONS[0], NB_MIGRATIONS[1] + 1))
            js = sorted(int(j) for j in rng.choice(np.arange(1, nk), size=n, replace=False))
            p.step_host_gaps.setdefault(si, {})[r] = {
                j: round(float(rng.uniform(*NB_MIGRATION_US)), 1) for j in js
            }
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def nb_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1's slow, jittery launches; its device idles; node 0 waits in collectives."""
    cl: Cluster = m[""]["cluster"]
    bad = _nb_ranks(ranks)
    good = [r for r in range(ranks) if r not in bad]
    api = np.stack([st.k_api_dur / 1000 for st in cl.steps], axis=2)  # [ranks, K, steps]
    gaps = cl.perturb.step_host_gaps
    mig_n = [len(gaps[si][r]) for si in range(steps) for r in bad]
    mig_us = [sum(gaps[si][r].values()) for si in range(steps) for r in bad]
    mig_one = [g for si in range(steps) for r in bad for g in gaps[si][r].values()]
    wait = coll_wait_us(m)
    free = col(m, "free_us")
    step = col(m, "step_us")
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    kdur = np.stack([st.k_dur / 1000 for st in cl.steps], axis=2)
    nums = {
        "culprit_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "culprit_launch_api_us_median": _med(api[bad]),
        "others_launch_api_us_median": _med(api[good]),
        "culprit_launch_api_us_p99": _r(float(np.percentile(api[bad], 99))),
        "launch_api_ratio": round(float(np.median(api[bad]) / np.median(api[good])), 2),
        "descheduled_launches_per_step_median": _med(mig_n),
        "descheduled_gap_us_median": _med(mig_one),
        "descheduled_gap_us_max": _r(max(mig_one)),
        "descheduled_us_per_step_median": _med(mig_us),
        "culprit_free_us_per_step": _r(float(free[bad].mean())),
        "others_free_us_per_step": _r(float(free[good].mean())),
        "culprit_free_cv_across_steps": round(
            float(np.median(free[bad].std(axis=1) / free[bad].mean(axis=1))), 3
        ),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "kernel_us_ratio_culprit_vs_others": round(
            float(kdur[bad].sum(axis=1).mean() / kdur[good].sum(axis=1).mean()), 3
        ),
        "median_step_us": _r(a),
        "median_step_us_bound": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(bad, "scheduling", ["cpu-core-binding"], "free_us", nums)
    vic = victims_by_wait(wait, bad)
    rc = root_cause(
        "slow_group",
        "scheduling",
        "group",
        ranks=bad,
        victims=vic,
        not_slow=not_slow_sample(ranks, bad, vic),
        metrics={
            "culprit_free_us_per_step": nums["culprit_free_us_per_step"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "culprit_launch_api_us_median": nums["culprit_launch_api_us_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_node=bad[0] // RANKS_PER_NODE,
        culprit_ranks=bad,
        first_rank=bad[0],
        last_rank=bad[-1],
        lane="CANN thread of trace_view.json (AscendCL@aclnn* launch calls, HostToDevice flows)",
        launch_api_us=nums["culprit_launch_api_us_median"],
        launch_api_us_others=nums["others_launch_api_us_median"],
        host_bound=True,
        jitter=True,
        kernels_normal=True,
        links_normal=True,
        every_step=True,
        cause="node 1's ranks run without CPU core binding (their launcher lacks the per-rank "
        "taskset / CPU_AFFINITY_CONF node 0 has): the host threads migrate across cores and NUMA "
        "nodes, every launch call takes ~3x longer, the host no longer runs ahead of the device and "
        "a few dozen launches a step come late after the thread was descheduled; node 0 waits for "
        "node 1 in every collective",
        fix="bind each rank's threads to the CPU cores of its NPU's NUMA node on node 1 as on node 0 "
        "(export CPU_AFFINITY_CONF=1 with torch_npu, or taskset / numactl per rank in the launch "
        "script), and keep other processes off those cores",
    )


# ---------------------------------------------------------------- nfs-metrics-log-rank
NL_MS = (9.0, 30.0)  # fsync of the metrics file on the NFS mount (ms), log-uniform per step
NL_FRAMES = (
    "megatron/training/training.py(1188): training_log",
    "utils/metrics_logger.py(58): log_step",
    "utils/metrics_logger.py(74): _append_jsonl",
    "<built-in function fsync>",
)
NL_PATH = "/mnt/nfs/exp/metrics.jsonl"


def _nl_rank(ranks: int) -> int:
    return ranks - 1


def nl_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    r = _nl_rank(ranks)
    rng = np.random.default_rng(seed + 1902)
    lo, hi = np.log(NL_MS[0]), np.log(NL_MS[1])
    for si in range(steps):
        ms = float(np.exp(rng.uniform(lo, hi)))
        p.step_host_gaps.setdefault(si, {})[r] = {0: round(ms * 1000, 1)}
        p.py_calls.setdefault(si, {})[r] = list(NL_FRAMES)
    info = dataclasses.replace(_info(CANN8, 1, ranks), with_stack=True)
    return {"": Plan(transformer(layers=LAYERS), group_kinds(ranks, 1), p, info)}


def nl_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the last rank's per-step fsync before its first launch; the others wait."""
    cl: Cluster = m[""]["cluster"]
    r = _nl_rank(ranks)
    others = [q for q in range(ranks) if q != r]
    ids = step_ids(m)
    gaps = cl.perturb.step_host_gaps
    fs = [gaps[si][r][0] for si in range(steps)]
    idle0 = np.array(
        [
            [
                (int(cl.steps[si].k_start[q, 0]) - cl.steps[si].bounds(q)[0]) / 1000
                for si in range(steps)
            ]
            for q in range(ranks)
        ]
    )
    wait = coll_wait_us(m)
    free = col(m, "free_us")
    prep = col(m, "preparing_us")
    step = col(m, "step_us")
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "culprit_rank": r,
        "fsync_us_per_step": [_r(x) for x in fs],
        "fsync_us_median": _med(fs),
        "fsync_us_max": _r(max(fs)),
        "fsync_us_min": _r(min(fs)),
        "culprit_idle_before_first_kernel_us_median": _med(idle0[r]),
        "others_idle_before_first_kernel_us_median": _med(idle0[others]),
        "culprit_preparing_us_median": _med(prep[r]),
        "culprit_free_us_per_step": _r(float(free[r].mean())),
        "others_free_us_per_step": _r(float(np.median(free[others].mean(axis=1)))),
        "victim_wait_us_per_step": _r(float(wait[others].mean())),
        "culprit_wait_us_per_step": _r(float(wait[r].mean())),
        "median_step_us": _r(a),
        "median_step_us_no_sync_log": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
        "steps": ids,
    }
    key = _key([r], "scheduling", ["checkpoint-save-stall"], "free_us", nums)
    rc = _rank_rc(
        m,
        ranks,
        r,
        "host_stall",
        "scheduling",
        metrics={
            "culprit_free_us_per_step": nums["culprit_free_us_per_step"],
            "fsync_us_median": nums["fsync_us_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_rank=r,
        python_frames=list(NL_FRAMES),
        logger_frame=NL_FRAMES[1],
        sync_call=NL_FRAMES[-1],
        lane="Python thread of trace_view.json (python_function, with_stack)",
        position="from the start of the step to the first launch",
        every_step=True,
        varies_per_step=True,
        kernels_normal=True,
        links_normal=True,
        gc_detected=False,
        cause=f"the last rank (the one that logs, print_rank_last) appends every step's metrics to "
        f"{NL_PATH} on an NFS mount and calls os.fsync on it before the next step: "
        f"{min(fs) / 1000:.0f}-{max(fs) / 1000:.0f} ms of blocked Python before its first launch, a "
        "different length each step; every other rank waits for it in the first gradient all-reduce",
        fix="do not fsync (or write) the metrics file synchronously in the training loop: buffer and "
        "write every N steps, log to local disk / a background thread or process (async logger), "
        "and only flush at checkpoints",
    )


# ---------------------------------------------------------------- registry
DEV19_SCENARIOS = (
    ScenarioSpec(
        "lora-unfused-adapters",
        "LoRA rank 16 on qkv / attn_out / mlp_up / mlp_down unfused: per adapter two rank-16 "
        "MatMulV2, a Muls and an Add forward and six kernels backward (160 a step, launched slower "
        "than they run) on every rank; base weights frozen; job-level, links normal",
        16,
        4,
        lora_plans,
        lora_answer,
    ),
    ScenarioSpec(
        "moe-capacity-padding",
        "MoE EP=8 with capacity factor 3 and pad-to-capacity: every hcom_alltoallv_ moves 3x the "
        "routed rows and every GroupedMatmul runs on 3x the rows (2/3 zero padding), every rank "
        "alike; job-level",
        16,
        4,
        cap_plans,
        cap_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "numa-binding-node",
        "node 1 without CPU core binding: ~3x slower launch calls, host-bound, a few dozen "
        "descheduled launches a step (device idle, jittery Free); node 0 waits in every collective; "
        "kernels and links normal",
        16,
        6,
        nb_plans,
        nb_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "nfs-metrics-log-rank",
        "the last rank fsyncs a metrics file on NFS every step (11-19 ms of Python before its first "
        "launch, with_stack frames); every other rank waits in the first gradient all-reduce",
        16,
        8,
        nl_plans,
        nl_answer,
    ),
)
DEV19_KINDS = tuple(s.name for s in DEV19_SCENARIOS)


__all__ = ["DEV19_KINDS", "DEV19_SCENARIOS"]
