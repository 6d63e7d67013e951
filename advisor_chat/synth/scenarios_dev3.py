"""Third set of development fault kinds (written without reading the diagnosis).

Five more field faults of Ascend training jobs, each planted as a mechanism of the simulation
(``advisor_chat.synth.model``) with the existing knobs, and an answer key derived from the simulated
timeline and the breakdown the writer measured (never from typed numbers). Like
``scenarios_dev2.py`` every key carries ``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what
distinguishes the kind in the files). Their question set is
``evals/datasets/generalization_dev3.yaml``: a development set for finding weaknesses; the held-out
kinds of ``generalization.yaml`` stay untouched.

Kinds:

- ``zero3-param-gather``: DeepSpeed ZeRO-3 on two nodes (public case C09): every layer's weights are
  all-gathered before its forward and again before its backward, and its gradients reduce-scattered;
  40 large HCCL ops per step, mostly not overlapped, on every rank. Links run at their normal
  bandwidth: the volume, not the network, is the problem.
- ``cpu-offload-optimizer``: ZeRO-2 with ``offload_optimizer: cpu``: the optimizer step runs on the
  host (CPU Adam) on every rank; every device idles ~160 ms after the last gradient all-reduce and
  before the parameter all-gather; no optimizer kernels on the device.
- ``empty-cache-every-step``: ``torch.npu.empty_cache()`` in the training loop on every rank: the
  caching allocator starts every step empty, so the host stalls in device malloc before the forward
  operators with the largest outputs (QKV / MLP up-projection MatMul, FlashAttention) of every layer;
  the device idles there, in the forward pass only; the backward reuses the freed blocks.
- ``recompute-one-stage``: PP=2, activation recomputation (full, per layer) on the first pipeline
  stage only (the stage holding the most in-flight activations): it re-runs the layer forward before
  every micro-batch's backward; the last stage waits for it in ``hcom_receive`` (Bubble).
- ``rank0-ema-update``: the EMA copy of the weights is updated on the main process only (``if rank
  == 0: ema.update(model)``): rank 0 runs extra ``ForeachLerpScalar`` kernels at every step start;
  its other kernels are normal; the other ranks wait for it in the gradient all-reduces.
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
    Plan,
    ScenarioSpec,
    _key,
    _r,
    col,
    transformer,
)
from advisor_chat.synth.scenarios_dev import _plain, _rank_rc, _with_evidence
from advisor_chat.synth.scenarios_ext import (
    PP_ACT_MB,
    PP_MICRO,
    PP_TP_MB,
    _info_pp,
    _layer_kernels,
    _opt_kernels,
    not_slow_sample,
    pipeline_kinds,
    root_cause,
)
from advisor_chat.synth.writer import ENV_KEYS


# ---------------------------------------------------------------- shared helpers
def _all_ranks_rc(ranks: int, mechanism: str, category: str, **kw: Any) -> dict[str, Any]:
    """A job-level cause: every rank loses the time, no rank is the culprit."""
    return root_cause(
        mechanism,
        category,
        "job",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        **kw,
    )


def _scalar_kernel(tag: str) -> Kernel:
    """A tiny scalar vector op (loss / scale bookkeeping): what a rank runs where another works."""
    return Kernel(
        name="aclnnMuls_Muls_Muls",
        op_type="Muls",
        core="AI_VECTOR_CORE",
        in_shapes="1",
        in_dtypes="DT_FLOAT",
        in_formats="ND",
        out_shapes="1",
        out_dtypes="DT_FLOAT",
        out_formats="ND",
        dur_us=2.0,
        block_dim=1,
        api="aclnnMuls",
        tag=tag,
    )


def _share(a: np.ndarray, b: np.ndarray) -> float:
    """Median over ranks of sum(a) / sum(b) (per-rank shares of [ranks, steps] arrays)."""
    return round(float(np.median(a.sum(axis=1) / b.sum(axis=1))), 4)


def _link_bw(cl: Cluster, transport: int) -> list[float]:
    """Bandwidths (GB/s) of every transfer on links of one transport (0 HCCS, 1 RDMA)."""
    out: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            k = op.kind
            sel = (k.transport == transport) & (op.link_ms > 0)
            out.extend((op.link_mb[sel] / op.link_ms[sel]).tolist())
    return out


def _kernel_gap_us(cl: Cluster, r: int, j: int) -> list[float]:
    """Device idle (µs) before program kernel ``j`` on rank ``r``, one value per step."""
    return [
        float(st.k_start[r, j] - st.k_start[r, j - 1] - st.k_dur[r, j - 1]) / 1000
        for st in cl.steps
    ]


# ---------------------------------------------------------------- zero3-param-gather
# bf16 weight bytes (MB) of the layer's modules at H=4096 (qkv [3H,H], o [H,H], up [8H,H], down [4H,H]);
# a ring all-gather / reduce-scatter moves about half the bytes of an all-reduce of the same tensor,
# so the simulated payload is half the weight.
Z3_WEIGHT_MB = {"qkv": 100.66, "attn_out": 33.55, "mlp_up": 268.44, "mlp_down": 134.22}
Z3_BWD_GATHER = {"mlp_down_dx": "mlp_down", "mlp_up_dx": "mlp_up", "attn_out_dx": "attn_out"}
Z3_BWD_GATHER["qkv_dx"] = "qkv"
Z3_LATENCY_US = 60.0  # per-op cost: parameter fetch hooks, HCCL launch and handshakes
Z3_LAYERS = 4
AG = "hcom_allGather_"
RS = "hcom_reduceScatter_"


def zero3_program() -> list[Item]:
    """ZeRO-3: every module's weight all-gathered before it runs, gradients reduce-scattered.

    The gathers come before the forward and again before the backward of each module; the
    gradients of each half of the layer are reduce-scattered; the optimizer updates 1/N of them.
    """
    fwd, bwd = _layer_kernels()
    prog: list[Item] = []
    for _ in range(Z3_LAYERS):
        for k in fwd:
            if k.tag in Z3_WEIGHT_MB:
                prog.append(
                    Collective(
                        AG, "world", Z3_WEIGHT_MB[k.tag] / 2, tag="z3_fwd", latency_us=Z3_LATENCY_US
                    )
                )
            prog.append(k)
    for _ in range(Z3_LAYERS):
        for k in bwd:
            if k.tag in Z3_BWD_GATHER:
                size = Z3_WEIGHT_MB[Z3_BWD_GATHER[k.tag]] / 2
                prog.append(Collective(AG, "world", size, tag="z3_bwd", latency_us=Z3_LATENCY_US))
            prog.append(k)
            if k.tag == "mlp_up_dw":
                size = (Z3_WEIGHT_MB["mlp_up"] + Z3_WEIGHT_MB["mlp_down"]) / 2
                prog.append(Collective(RS, "world", size, overlap=1, latency_us=Z3_LATENCY_US))
            elif k.tag == "qkv_dw":
                size = (Z3_WEIGHT_MB["qkv"] + Z3_WEIGHT_MB["attn_out"]) / 2
                prog.append(Collective(RS, "world", size, overlap=1, latency_us=Z3_LATENCY_US))
    opt = [dataclasses.replace(k, dur_us=round(k.dur_us / 8, 1)) for k in _opt_kernels()]
    prog += opt[:2]
    prog.append(Collective("hcom_allReduce_", "world", 0.001, dtype="FP32", latency_us=30.0))
    prog += opt[2:]
    return prog


def zero3_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, zero3_program(), default_perturb(ranks))


def zero3_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: communication volume (parameter all-gathers) dominates every rank; links normal."""
    cl: Cluster = m[""]["cluster"]
    colls = [it for it in cl.program if isinstance(it, Collective)]
    n_ag = sum(1 for c in colls if c.op_type == AG)
    n_rs = sum(1 for c in colls if c.op_type == RS)
    notov = col(m, "comm_not_overlapped_us")
    comm = col(m, "communication_us")
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    ag_us = np.zeros(ranks)
    for st in cl.steps:
        for op in st.ops:
            if op.item.op_type == AG:
                ag_us += (op.end - op.start) / 1000
    ag_us /= len(cl.steps)
    hccs = _link_bw(cl, 0)
    rdma = _link_bw(cl, 1)
    share = notov.sum(axis=1) / step.sum(axis=1)
    nums = {
        "allgather_ops_per_step": n_ag,
        "reducescatter_ops_per_step": n_rs,
        "hccl_ops_per_step": len(colls),
        "allgather_us_per_step_median": _r(float(np.median(ag_us))),
        "allgather_share_of_step_median": round(float(np.median(ag_us / step.mean(axis=1))), 4),
        "median_comm_not_overlapped_share": round(float(np.median(share)), 4),
        "comm_not_overlapped_share_spread": round(float(share.max() - share.min()), 4),
        "median_computing_share": _share(comp, step),
        "median_overlap_ratio": round(
            float(np.median((comm - notov).sum(axis=1) / comm.sum(axis=1))), 4
        ),
        "hccs_bandwidth_gbps_median": round(float(np.median(hccs)), 3),
        "rdma_bandwidth_gbps_median": round(float(np.median(rdma)), 3),
        "rdma_slowest_vs_median": round(float(min(rdma) / np.median(rdma)), 3),
        "median_step_us": _r(float(np.median(step))),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "comm_not_overlapped_us_per_step": _r(float(np.median(notov.mean(axis=1)))),
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "allgather_ops_per_step": n_ag,
        },
    )
    return _with_evidence(
        key,
        rc,
        op_type="AllGather",
        op_types=[AG, RS],
        allgather_ops_per_step=n_ag,
        reducescatter_ops_per_step=n_rs,
        gathers_per_layer_forward=len(Z3_WEIGHT_MB),
        comm_not_overlapped_share=round(float(np.median(share)), 2),
        rdma_bandwidth_gbps=nums["rdma_bandwidth_gbps_median"],
        links_normal=True,
        all_ranks=True,
    )


# ---------------------------------------------------------------- cpu-offload-optimizer
OFFLOAD_US = 160_000.0  # CPU Adam over this rank's 1/16 of the fp32 master weights + copies
OFFLOAD_JITTER = 0.004
OFFLOAD_GATHER_MB = 128.0


def offload_program() -> list[Item]:
    """transformer(4 layers) without the device optimizer.

    After the gradient all-reduces the host runs the optimizer, then the updated bf16 weights are
    all-gathered.
    """
    prog: list[Item] = []
    for it in transformer(layers=4, grad_mb=96.0, grad_overlap=6):
        if isinstance(it, Kernel) and it.op_type.startswith("Foreach"):
            continue
        if isinstance(it, Collective) and it.group == "world" and it.size_mb <= 4.0:
            continue  # the step-closing collectives of the device optimizer
        prog.append(it)
    prog.append(Collective("hcom_allGather_", "world", OFFLOAD_GATHER_MB, tag="param_gather"))
    return prog


def _offload_coll(prog: list[Item]) -> int:
    """Index (among collectives) of the parameter all-gather the host stall sits before."""
    colls = [it for it in prog if isinstance(it, Collective)]
    return next(i for i, c in enumerate(colls) if c.tag == "param_gather")


def offload_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = offload_program()
    ci_stall = _offload_coll(prog)
    rng = np.random.default_rng(seed + 41)
    jit = 1.0 + OFFLOAD_JITTER * np.clip(rng.standard_normal((steps, ranks)), -3, 3)
    p = default_perturb(ranks)

    def delay(si: int, ci: int) -> np.ndarray | None:
        return OFFLOAD_US * jit[si] if ci == ci_stall else None

    p.coll_delay_us = delay
    return _plain(ranks, prog, p)


def offload_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank idles the same ~160 ms before the parameter all-gather, every step."""
    cl: Cluster = m[""]["cluster"]
    ci = _offload_coll(cl.program)
    # device idle before the all-gather: its start minus the end of everything before it
    idle = np.zeros((ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        prev = st.k_start[:, -1] + st.k_dur[:, -1]
        for op in st.ops[:ci]:
            prev = np.maximum(prev, op.end)
        idle[:, si] = (st.ops[ci].start - prev) / 1000
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    per_rank = idle.mean(axis=1)
    n_opt = sum(1 for k in cl.kernels if k.op_type.startswith(("Foreach", "Adam", "ApplyAdam")))
    nums = {
        "idle_before_param_allgather_us_median": _r(float(np.median(idle))),
        "idle_spread_across_ranks_us": _r(float(per_rank.max() - per_rank.min())),
        "median_free_us_per_step": _r(float(np.median(free.mean(axis=1)))),
        "median_free_share": _share(free, step),
        "median_computing_share": _share(comp, step),
        "optimizer_kernels_on_device": n_opt,
        "median_step_us": _r(float(np.median(step))),
    }
    # no case covers offloading; CPU Adam runs as fast as the host cores it gets (binding, NUMA)
    key = _key([], "scheduling", ["cpu-core-binding"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_idle",
        "scheduling",
        metrics={
            "idle_us_per_step": nums["idle_before_param_allgather_us_median"],
            "free_share": nums["median_free_share"],
        },
    )
    return _with_evidence(
        key,
        rc,
        idle_us=round(float(np.median(idle))),
        idle_before_op="hcom_allGather_",
        idle_after="last gradient all-reduce",
        optimizer_on_device=False,
        optimizer_kernels_on_device=n_opt,
        all_ranks=True,
    )


# ---------------------------------------------------------------- empty-cache-every-step
# host stall (µs) in device malloc before the forward ops with the largest new outputs
EC_STALL_US = {"qkv": 2400.0, "fa": 2200.0, "mlp_up": 3000.0}  # all above the host lead
EC_END_US = 2500.0  # empty_cache itself at the step end: device sync, then the blocks are freed
FA_TYPE = "FlashAttentionScore"


def _ec_positions(prog: list[Item]) -> dict[int, str]:
    """{kernel index: which stall} for the forward pass (backward reuses the freed blocks)."""
    out: dict[int, str] = {}
    for j, k in enumerate(it for it in prog if isinstance(it, Kernel)):
        if k.tag in ("qkv", "mlp_up"):
            out[j] = k.tag
        elif k.op_type == FA_TYPE:
            out[j] = "fa"
    return out


def empty_cache_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    pos = _ec_positions(prog)
    rng = np.random.default_rng(seed + 97)
    p = default_perturb(ranks)
    for r in range(ranks):
        p.kernel_stalls[r] = {
            j: EC_STALL_US[what] * (0.88 + 0.3 * float(rng.random())) for j, what in pos.items()
        }
    p.end_stall_us = EC_END_US * (1.0 + 0.01 * np.clip(rng.standard_normal(ranks), -2, 2))
    return _plain(ranks, prog, p)


def empty_cache_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank's device idles before the same forward ops; backward without stalls."""
    cl: Cluster = m[""]["cluster"]
    pos = sorted(_ec_positions(cl.program))
    kernels = cl.kernels
    first_bwd = next(j for j, k in enumerate(kernels) if k.tag.endswith(("_dx", "_dw")))
    bwd = [j for j in range(first_bwd + 1, len(kernels)) if j not in pos]
    stall = [g for r in range(ranks) for j in pos for g in _kernel_gap_us(cl, r, j)]
    bwd_gap = [g for r in range(ranks) for j in bwd for g in _kernel_gap_us(cl, r, j)]
    free = col(m, "free_us")
    step = col(m, "step_us")
    share = free.sum(axis=1) / step.sum(axis=1)
    before = sorted({kernels[j].op_type for j in pos})
    nums = {
        "stalls_per_step": len(pos),
        "stall_gap_us_median": _r(float(np.median(stall))),
        "stall_us_per_step_median": _r(float(np.median(stall)) * len(pos)),
        "backward_gap_us_median": _r(float(np.median(bwd_gap))),
        "median_free_us_per_step": _r(float(np.median(free.mean(axis=1)))),
        "median_free_share": round(float(np.median(share)), 4),
        "free_share_spread_across_ranks": round(float(share.max() - share.min()), 4),
        "median_step_us": _r(float(np.median(step))),
    }
    key = _key(
        [],
        "scheduling",
        ["expandable-segments-allocator", "host-dispatch-bound"],
        "free_us",
        nums,
    )
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "free_us_per_step": nums["median_free_us_per_step"],
            "stall_gap_us": nums["stall_gap_us_median"],
            "stalls_per_step": len(pos),
        },
    )
    assert "ASCEND_LAUNCH_BLOCKING" in ENV_KEYS and "PYTORCH_NPU_ALLOC_CONF" in ENV_KEYS
    return _with_evidence(
        key,
        rc,
        before_op_types=before,
        op_type=FA_TYPE,
        stalls_per_step=len(pos),
        stall_gap_us=round(float(np.median(stall))),
        phase="forward",
        backward_stalls=0,
        launch_blocking_set=False,
        alloc_conf_set=False,
        all_ranks=True,
    )


# ---------------------------------------------------------------- recompute-one-stage
RC_TAG = "recompute"


def recompute_program() -> list[Item]:
    """1F1B steady state of one stage, the layer forward re-run before each micro-batch's backward.

    The first stage runs the recomputation slot; the last stage, which keeps its activations, runs
    only scalar bookkeeping there (kernel swaps).
    """
    fwd, bwd = _layer_kernels()
    again = [dataclasses.replace(k, tag=f"{RC_TAG}_{i}") for i, k in enumerate(fwd)]
    prog: list[Item] = []
    for _ in range(PP_MICRO):
        prog += fwd
        prog.append(Collective("hcom_allReduce_", "tp", PP_TP_MB))
        prog += again
        prog += bwd
        prog.append(Collective("hcom_allReduce_", "tp", PP_TP_MB))
        prog.append(Collective("hcom_send_", "pp", PP_ACT_MB, peer_op="hcom_receive_"))
    prog += _opt_kernels()
    return prog


def recompute_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = recompute_program()
    kernels = [it for it in prog if isinstance(it, Kernel)]
    p = default_perturb(ranks)
    for r in range(ranks // 2, ranks):
        for j, k in enumerate(kernels):
            if k.tag.startswith(RC_TAG):
                p.kernel_swap[(-1, r, j)] = _scalar_kernel(k.tag)
    return {"": Plan(prog, pipeline_kinds(ranks), p, _info_pp(ranks), tp=ranks // 2)}


def recompute_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the first stage re-runs the forward (longer computing); the last waits (Bubble)."""
    half = ranks // 2
    s0, s1 = list(range(half)), list(range(half, ranks))
    cl: Cluster = m[""]["cluster"]
    slot_j = [j for j, k in enumerate(cl.kernels) if k.tag.startswith(RC_TAG)]
    slot_us = np.array([st.k_dur[:, slot_j].sum(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    comp = col(m, "computing_us")
    bub = col(m, "bubble_us")
    step = col(m, "step_us")
    fa = [j for j, k in enumerate(cl.kernels) if k.op_type == FA_TYPE]
    fa_s0 = len(fa)  # the first stage runs every FlashAttentionScore position
    fa_s1 = len(fa) - sum(1 for j in fa if j in slot_j)
    nums: dict[str, Any] = {
        "stages": [s0, s1],
        "micro_batches_per_step": PP_MICRO,
        "stage0_computing_us_per_step": _r(float(np.median(comp[s0].mean(axis=1)))),
        "stage1_computing_us_per_step": _r(float(np.median(comp[s1].mean(axis=1)))),
        "stage0_recompute_us_per_step": _r(float(np.median(slot_us[s0]))),
        "stage0_flash_attention_per_step": fa_s0,
        "stage1_flash_attention_per_step": fa_s1,
        "stage1_bubble_us_per_step": _r(float(np.median(bub[s1].mean(axis=1)))),
        "stage0_bubble_us_per_step": _r(float(np.median(bub[s0].mean(axis=1)))),
        "stage1_bubble_share": round(float(bub[s1].sum() / step[s1].sum()), 4),
        "median_step_us": _r(float(np.median(step))),
    }
    key = _key(
        s0, "compute", ["pipeline-bubbles", "load-imbalance-vs-slow-kernels"], "computing_us", nums
    )
    victims = [r for r in s1 if bub[r].mean() >= 1000.0]
    key["root_cause"] = root_cause(
        "pipeline_imbalance",
        "compute",
        "stage",
        ranks=s0,
        stage=0,
        victims=victims,
        not_slow=not_slow_sample(ranks, s0, victims),
        metrics={
            "victim_bubble_us_per_step": nums["stage1_bubble_us_per_step"],
            "culprit_computing_excess_us_per_step": _r(
                nums["stage0_computing_us_per_step"] - nums["stage1_computing_us_per_step"]
            ),
            "culprit_recompute_us_per_step": nums["stage0_recompute_us_per_step"],
            "culprit_dominant": "computing",
        },
    )
    key["evidence"] = {
        "first_stage": 0,
        "recompute": True,
        "repeated_op_types": sorted({cl.kernels[j].op_type for j in slot_j}),
        "op_type": FA_TYPE,
        "forward_runs_per_micro_batch": 2,
        "wait_op": "hcom_receive",
        "stage1_bubble_us_per_step": nums["stage1_bubble_us_per_step"],
        "stage0_recompute_us_per_step": nums["stage0_recompute_us_per_step"],
    }
    return key


# ---------------------------------------------------------------- rank0-ema-update
EMA_RANK = 0
EMA_CHUNKS = 8  # foreach launches over the parameter list (one per tensor-list chunk)
EMA_US = 1050.0  # lerp over ~1/8 of a 1.3B-parameter fp32 EMA copy: memory-bound
EMA_TYPE = "ForeachLerpScalar"


def _ema_kernel(i: int) -> Kernel:
    shapes = "4096,4096;4096,4096"
    return Kernel(
        name="aclnnForeachLerpScalar_ForeachLerpScalar_ForeachLerpScalar",
        op_type=EMA_TYPE,
        core="AI_VECTOR_CORE",
        in_shapes=shapes,
        in_dtypes="DT_FLOAT;DT_FLOAT",
        in_formats="ND;ND",
        out_shapes="4096,4096",
        out_dtypes="DT_FLOAT",
        out_formats="ND",
        dur_us=EMA_US,
        block_dim=48,
        api="aclnnForeachLerpScalar",
        tag=f"ema_{i}",
    )


def ema_program() -> list[Item]:
    """EMA slots at the step start (after the previous optimizer step), then transformer(4 layers)."""
    return [_scalar_kernel(f"ema_{i}") for i in range(EMA_CHUNKS)] + transformer(layers=4)


def ema_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = ema_program()
    p = default_perturb(ranks)
    for j in range(EMA_CHUNKS):
        p.kernel_swap[(-1, EMA_RANK, j)] = _ema_kernel(j)
    return _plain(ranks, prog, p)


def ema_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: rank 0 runs extra EMA kernels; its other kernels are normal; the others wait."""
    r = EMA_RANK
    cl: Cluster = m[""]["cluster"]
    others = [q for q in range(ranks) if q != r]
    ema_j = list(range(EMA_CHUNKS))
    rest = list(range(EMA_CHUNKS, len(cl.kernels)))
    ema_us = np.array([st.k_dur[r, ema_j].sum() for st in cl.steps]).mean() / 1000
    rest_us = np.array([st.k_dur[:, rest].sum(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    comp = col(m, "computing_us")
    nums = {
        "culprit_extra_kernels_per_step": EMA_CHUNKS,
        "culprit_extra_us_per_step": _r(float(ema_us)),
        "culprit_computing_excess_us_per_step": _r(
            float(comp[r].mean() - np.median(comp[others].mean(axis=1)))
        ),
        "common_kernel_time_ratio": round(float(rest_us[r] / np.median(rest_us[others])), 3),
    }
    key = _key(
        [r],
        "compute",
        ["load-imbalance-vs-slow-kernels", "compute-straggler-hidden"],
        "computing_us",
        nums,
        op={
            "op_type": EMA_TYPE,
            "name": _ema_kernel(0).name,
            "input_shapes": _ema_kernel(0).in_shapes,
        },
    )
    rc = _rank_rc(m, ranks, r, "compute_straggler", "compute", operator=EMA_TYPE, metrics=nums)
    return _with_evidence(
        key,
        rc,
        operator=EMA_TYPE,
        extra_kernels_per_step=EMA_CHUNKS,
        extra_us_per_step=round(float(ema_us)),
        position="step start",
        other_kernels_normal=True,
        only_on_rank=r,
    )


# ---------------------------------------------------------------- registry
DEV3_SCENARIOS = (
    ScenarioSpec(
        "zero3-param-gather",
        "DeepSpeed ZeRO-3 on 2 nodes: every layer's weights all-gathered before forward and backward, "
        "gradients reduce-scattered; 40 large HCCL ops per step mostly exposed on every rank, links normal",
        16,
        3,
        zero3_plans,
        zero3_answer,
        min_ranks=RANKS_PER_NODE + 1,
    ),
    ScenarioSpec(
        "cpu-offload-optimizer",
        "ZeRO-2 with the optimizer offloaded to CPU: every rank idles ~160 ms after the last gradient "
        "all-reduce, before the parameter all-gather; no optimizer kernels on the device",
        16,
        3,
        offload_plans,
        offload_answer,
    ),
    ScenarioSpec(
        "empty-cache-every-step",
        "torch.npu.empty_cache() every step on every rank: host stalls ~2-3 ms in device malloc before "
        "the QKV / MLP-up MatMuls and FlashAttention of every forward layer; backward unaffected",
        16,
        3,
        empty_cache_plans,
        empty_cache_answer,
    ),
    ScenarioSpec(
        "recompute-one-stage",
        "PP=2: activation recomputation on the first stage only (layer forward re-run before every "
        "micro-batch's backward); the last stage waits in hcom_receive",
        16,
        3,
        recompute_plans,
        recompute_answer,
        min_ranks=4,
        rank_multiple=2,
    ),
    ScenarioSpec(
        "rank0-ema-update",
        "EMA weights updated on rank 0 only: 8 extra ForeachLerpScalar kernels (~8 ms) at every step "
        "start on rank 0, its other kernels normal; the others wait in the gradient all-reduces",
        16,
        3,
        ema_plans,
        ema_answer,
    ),
)
DEV3_KINDS = tuple(s.name for s in DEV3_SCENARIOS)


__all__ = ["DEV3_KINDS", "DEV3_SCENARIOS"]
