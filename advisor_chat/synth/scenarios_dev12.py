"""Tenth set of development fault kinds (new kinds; written without reading the diagnosis).

Four more field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev12.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the count and input shapes of the expert
MatMuls, the point-to-point section of communication.json with the Bubble column, the caching
allocator's rows of memory_record.csv, the host launch calls inside the gradient all-reduce windows):

- ``moe-expert-loop``: a small fine-grained MoE (hidden 2048, 64 experts top-2, EP=8 per node, 8
  local experts per rank) without grouped GEMM (``--moe-grouped-gemm`` off: Megatron's
  SequentialMLP): every rank runs its 8 local experts one after another in a Python loop, 3 small
  MatMulV2/SwiGlu kernels per expert forward and 5 backward, on ~380-660 token rows each. The host needs ~150 µs per op of the loop (module call,
  split bookkeeping, autograd, launch), longer than most of these kernels, so the device idles
  between them on every rank. Job-level; the fix is GroupedMatmul (one kernel per projection).
- ``ring-cp-blocking-p2p``: context parallel (ring attention, CP=2) with TP=8 filling each server, so
  every CP pair (rank r, r+8) sits on two servers: each layer's K/V blocks (and the dK/dV blocks
  backward) are exchanged with blocking send/recv before the block attention, over RDMA, never
  overlapped with the attention. Every rank has ``hcom_send``/``hcom_receive`` in the p2p section of
  communication.json and a Bubble column in step_trace_time.csv although there is no pipeline
  parallelism. Job-level; links run at normal bandwidth. The fix overlaps the exchange with the
  local block's attention.
- ``hbm-leftover-process``: a process left over from an earlier (killed) job still holds ~24 GB of
  HBM on device 5: rank 5's caching allocator cannot grow its reservation to what the others hold
  (~41.5 GB), so whenever an allocation does not fit into its fragmented cache near the end of the
  forward it synchronizes, frees its cached blocks and allocates again (a host stall of a few ms,
  the device idles). memory_record.csv: the same allocated curve on every rank, but rank 5's
  reservation saw-tooths under a ceiling while the others' is flat. Culprit: rank 5; the others wait
  in the next collective.
- ``nic-irq-on-train-core``: the RoCE NICs' interrupts of every server are pinned to the first CPU
  cores, which the core binding (``CPU_AFFINITY_CONF=1``) gives to the device-0 process of the
  server: while the gradient all-reduces move data over RDMA, the NIC interrupts preempt the
  training thread of ranks 0 and 8, their kernel launches inside those windows take ~0.5 ms each and
  their devices idle; launches elsewhere in the step are normal. Culprit: ranks 0 and 8 (device 0 of
  each server); the others wait for them in the next all-reduce.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    RANKS_PER_NODE,
    Cluster,
    Collective,
    GroupKind,
    Item,
    Kernel,
    default_perturb,
    make_group_kind,
)
from advisor_chat.synth.scenarios import (
    BASE_COMM_US,
    CANN8,
    H,
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
from advisor_chat.synth.scenarios_dev import _with_evidence
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_dev4 import A2A, moe_kinds
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)
from advisor_chat.synth.scenarios_faults import _plain
from advisor_chat.synth.writer import APP_EXTRA_MB


def _kernels(prog: list[Item]) -> list[Kernel]:
    return [it for it in prog if isinstance(it, Kernel)]


def _gaps_before_us(cl: Cluster, js: list[int], ranks: list[int]) -> np.ndarray:
    """Device idle (µs) before kernels ``js`` (from the previous kernel's end), [steps, ranks, js]."""
    out = []
    for st in cl.steps:
        g = [
            (st.k_start[ranks, j] - (st.k_start[ranks, j - 1] + st.k_dur[ranks, j - 1])) for j in js
        ]
        out.append(np.array(g).T / 1000)
    return np.array(out)


# ---------------------------------------------------------------- moe-expert-loop
# a small fine-grained MoE (hidden 2048, 2048-token micro-batches, 64 experts top-2, EP=8)
MH = 2048  # hidden size
MS = 2048  # tokens per micro-batch
ML_EP = 8
ML_EXPERTS = 64
ML_LOCAL = ML_EXPERTS // ML_EP  # 8 local experts per rank
ML_TOPK = 2
ML_FFN = 1408  # expert FFN hidden size
ML_TOKENS = MS * ML_TOPK  # token rows a rank's experts get per layer (balanced)
ML_ROWS = (616, 437, 552, 479, 661, 383, 505, 463)  # token rows per local expert (sum 4096)
ML_A2A_MB = round(ML_TOKENS * MH * 2 / 1e6, 3)  # dispatched hidden states per rank, bf16
# one GroupedMatmul over all rows of the 8 local experts (µs)
ML_GMM_US = {
    "up": 130.0,
    "down": 66.0,
    "down_dx": 66.0,
    "down_dw": 70.0,
    "up_dx": 130.0,
    "up_dw": 138.0,
}
ML_LOOP_EFF = 1.3  # a MatMul on ~500 rows runs at ~1/1.3 of the rate of one grouped kernel
ML_SWIGLU_US = 14.0  # SwiGlu over all rows (µs); SwiGluGrad 1.6x
ML_HOST_US = 150.0  # host time per op of the expert loop (module call, split, autograd, launch)
ML_LEAD_US = 45.0  # the host is only just ahead of the device in this model
ML_TAG = "expert_loop"


def _ml_mm(sub: str, rows: int) -> Kernel:
    f2 = 2 * ML_FFN
    shapes = {
        "up": (f"{rows},{MH};{f2},{MH}", f"{rows},{f2}"),
        "down": (f"{rows},{ML_FFN};{MH},{ML_FFN}", f"{rows},{MH}"),
        "down_dx": (f"{rows},{MH};{MH},{ML_FFN}", f"{rows},{ML_FFN}"),
        "down_dw": (f"{MH},{rows};{rows},{ML_FFN}", f"{MH},{ML_FFN}"),
        "up_dx": (f"{rows},{f2};{f2},{MH}", f"{rows},{MH}"),
        "up_dw": (f"{f2},{rows};{rows},{MH}", f"{f2},{MH}"),
    }
    ins, outs = shapes[sub]
    dur = round(ML_GMM_US[sub] * rows / ML_TOKENS * ML_LOOP_EFF, 1)
    return _k(
        "aclnnMatmul_MatMulCommon_MatMulV2",
        "MatMulV2",
        "AI_CORE",
        ins,
        outs,
        dur,
        "aclnnMatmul",
        f"{ML_TAG}_{sub}",
    )


def _ml_vec(op: str, rows: int, dur_all: float, tag: str) -> Kernel:
    f2 = 2 * ML_FFN
    outs = f"{rows},{ML_FFN}" if op == "SwiGlu" else f"{rows},{f2}"
    ins = f"{rows},{f2}" if op == "SwiGlu" else f"{rows},{ML_FFN};{rows},{f2}"
    return _k(
        f"aclnn{op}_{op}_{op}",
        op,
        "AI_VECTOR_CORE",
        ins,
        outs,
        round(max(2.0, dur_all * rows / ML_TOKENS), 1),
        f"aclnn{op}",
        tag,
        40,
    )


def _ml_gmm(sub: str) -> Kernel:
    rows, e, f2, f = ML_TOKENS, ML_LOCAL, 2 * ML_FFN, ML_FFN
    shapes = {
        "up": (f"{rows},{MH};{e},{MH},{f2};{e}", f"{rows},{f2}"),
        "down": (f"{rows},{f};{e},{f},{MH};{e}", f"{rows},{MH}"),
        "down_dx": (f"{rows},{MH};{e},{MH},{f};{e}", f"{rows},{f}"),
        "down_dw": (f"{f},{rows};{rows},{MH};{e}", f"{e},{f},{MH}"),
        "up_dx": (f"{rows},{f2};{e},{f2},{MH};{e}", f"{rows},{MH}"),
        "up_dw": (f"{MH},{rows};{rows},{f2};{e}", f"{e},{MH},{f2}"),
    }
    ins, outs = shapes[sub]
    return Kernel(
        name="aclnnGroupedMatmulV4_GroupedMatmul_GroupedMatmul",
        op_type="GroupedMatmul",
        core="AI_CORE",
        in_shapes=ins,
        in_dtypes="DT_BF16;DT_BF16;DT_INT64",
        in_formats="ND;ND;ND",
        out_shapes=outs,
        out_dtypes="DT_BF16",
        out_formats="ND",
        dur_us=ML_GMM_US[sub],
        block_dim=24,
        api="aclnnGroupedMatmulV4",
        tag=f"gmm_{sub}",
    )


def _ml_experts_fwd(loop: bool) -> list[Item]:
    if not loop:
        return [_ml_gmm("up"), _ml_vec("SwiGlu", ML_TOKENS, ML_SWIGLU_US, "gmm"), _ml_gmm("down")]
    out: list[Item] = []
    for n in ML_ROWS:
        out += [_ml_mm("up", n), _ml_vec("SwiGlu", n, ML_SWIGLU_US, ML_TAG), _ml_mm("down", n)]
    # torch.cat of the experts' outputs
    out.append(
        _k(
            "aclnnCat_ConcatD_ConcatD",
            "ConcatD",
            "AI_VECTOR_CORE",
            ";".join(f"{n},{MH}" for n in ML_ROWS),
            f"{ML_TOKENS},{MH}",
            12.0,
            "aclnnCat",
            ML_TAG,
            40,
        )
    )
    return out


def _ml_experts_bwd(loop: bool) -> list[Item]:
    if not loop:
        return [
            _ml_gmm("down_dx"),
            _ml_gmm("down_dw"),
            _ml_vec("SwiGluGrad", ML_TOKENS, 1.6 * ML_SWIGLU_US, "gmm"),
            _ml_gmm("up_dx"),
            _ml_gmm("up_dw"),
        ]
    out: list[Item] = []
    for n in reversed(ML_ROWS):
        out += [
            _ml_mm("down_dx", n),
            _ml_mm("down_dw", n),
            _ml_vec("SwiGluGrad", n, 1.6 * ML_SWIGLU_US, ML_TAG),
            _ml_mm("up_dx", n),
            _ml_mm("up_dw", n),
        ]
    return out


def ml_program(loop: bool = True) -> list[Item]:
    """MoE step (attention + routed experts per layer, AlltoAllv dispatch / combine), 4 layers.

    ``loop``: the local experts one after another (SequentialMLP); otherwise GroupedMatmul.
    """
    sh = f"{MS},{MH}"
    rows = ML_TOKENS
    bsh = f"1,{MS},{MH}"

    def v(op: str, dur: float, ins: str = sh, outs: str = sh) -> Kernel:
        return _k(f"aclnn{op}_{op}_{op}", op, "AI_VECTOR_CORE", ins, outs, dur, f"aclnn{op}", bd=40)

    def mm(tag: str, m: int, k: int, n: int, dur: float) -> Kernel:
        return _k(
            "aclnnMatmul_MatMulCommon_MatMulV2",
            "MatMulV2",
            "AI_CORE",
            f"{m},{k};{n},{k}",
            f"{m},{n}",
            dur,
            "aclnnMatmul",
            tag,
        )

    fa = _k(
        "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
        "FlashAttentionScore",
        "MIX_AIC",
        f"{bsh};{bsh};{bsh}",
        bsh,
        160.0,
        "aclnnFlashAttentionScore",
    )
    fa_g = _k(
        "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
        "FlashAttentionScoreGrad",
        "MIX_AIC",
        f"{bsh};{bsh};{bsh};{bsh}",
        bsh,
        340.0,
        "aclnnFlashAttentionScoreGrad",
    )
    attn_f = [
        v("RmsNorm", 16.0),
        mm("qkv", MS, MH, 3 * MH, 120.0),
        fa,
        mm("attn_out", MS, MH, MH, 42.0),
        v("Add", 8.0),
        v("RmsNorm", 16.0),
    ]
    attn_b = [
        v("RmsNormGrad", 26.0),
        mm("attn_out_dx", MS, MH, MH, 42.0),
        mm("attn_out_dw", MH, MS, MH, 44.0),
        fa_g,
        mm("qkv_dx", MS, 3 * MH, MH, 120.0),
        mm("qkv_dw", 3 * MH, MS, MH, 125.0),
        v("RmsNormGrad", 26.0),
    ]
    router = mm("router", MS, MH, ML_EXPERTS, 14.0)
    gate = v("MoeGatingTopKSoftmax", 10.0, f"{MS},{ML_EXPERTS}", f"{MS},{ML_TOPK}")
    permute = v("MoeTokenPermute", 26.0, f"{sh};{MS},{ML_TOPK}", f"{rows},{MH}")
    unpermute = v("MoeTokenUnpermute", 28.0, f"{rows},{MH};{rows};{MS},{ML_TOPK}", sh)
    unpermute_g = v("MoeTokenUnpermuteGrad", 30.0, f"{sh};{rows},{MH};{rows}", f"{rows},{MH}")
    permute_g = v("MoeTokenPermuteGrad", 27.0, f"{rows},{MH};{rows}", sh)
    opt_shape = f"{MH},{MH};{MH}"
    opt = [
        _k(
            f"aclnn{op}V2_{op}V2_{op}",
            op,
            "AI_VECTOR_CORE",
            opt_shape,
            opt_shape,
            dur,
            f"aclnn{op}",
            bd=48,
        )
        for op, dur in (
            ("ForeachMulScalar", 160.0),
            ("ForeachAddList", 330.0),
            ("ForeachAddList", 325.0),
        )
    ]
    prog: list[Item] = []
    layers = 4
    for _ in range(layers):
        prog += attn_f
        prog += [router, gate, permute, Collective(A2A, "ep", ML_A2A_MB, tag="dispatch")]
        prog += _ml_experts_fwd(loop)
        prog += [Collective(A2A, "ep", ML_A2A_MB, tag="combine"), unpermute, v("Add", 8.0)]
    for li in range(layers):
        prog += [unpermute_g, Collective(A2A, "ep", ML_A2A_MB, tag="combine_grad")]
        prog += _ml_experts_bwd(loop)
        prog += [Collective(A2A, "ep", ML_A2A_MB, tag="dispatch_grad"), permute_g]
        prog += attn_b
        last = li == layers - 1
        prog.append(Collective("hcom_allReduce_", "edp", 8.0, overlap=0 if last else 4))
        prog.append(Collective("hcom_allReduce_", "world", 6.0, overlap=0 if last else 3))
    prog += opt[:2]
    prog += [
        Collective("hcom_allReduce_", "world", 2.0),
        Collective("hcom_allGather_", "world", 1.0),
    ]
    prog.append(opt[2])
    return prog


def _ml_loop_positions(prog: list[Item]) -> list[int]:
    """Kernels of the expert loop that follow another kernel (the first follows the all-to-all)."""
    out: list[int] = []
    j = 0
    prev_kernel = False
    for it in prog:
        if isinstance(it, Kernel):
            if prev_kernel and it.tag.startswith(ML_TAG):
                out.append(j)
            j += 1
        prev_kernel = isinstance(it, Kernel)
    return out


def ml_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = ml_program()
    ks = _kernels(prog)
    p = default_perturb(ranks)
    p.lead_us[:] = ML_LEAD_US
    rng = np.random.default_rng(seed + 1201)
    loop = [j for j, k in enumerate(ks) if k.tag.startswith(ML_TAG)]
    for r in range(ranks):
        host = ML_HOST_US * (1.0 + 0.05 * np.clip(rng.standard_normal(len(ks)), -2, 2))
        # the host needs ML_HOST_US per op of the loop: the device idles for what the previous
        # kernel did not cover
        p.kernel_stalls[r] = {
            j: round(max(0.0, float(host[j]) - ks[j - 1].dur_us), 1) for j in loop
        }
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(
        expert_model_parallel_size=ML_EP,
        num_experts=ML_EXPERTS,
        moe_router_topk=ML_TOPK,
        moe_token_dispatcher_type="alltoall",
        moe_grouped_gemm=False,
        hidden_size=MH,
        moe_ffn_hidden_size=ML_FFN,
        seq_length=MS,
    )
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(prog, moe_kinds(ranks), p, info)}


def ml_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the experts' small kernels one by one; the device idles between them everywhere."""
    cl: Cluster = m[""]["cluster"]
    pos = _ml_loop_positions(cl.program)
    loop = [j for j, k in enumerate(cl.kernels) if k.tag.startswith(ML_TAG)]
    mm = [cl.kernels[j] for j in loop if cl.kernels[j].op_type == "MatMulV2"]
    idle = _gaps_before_us(cl, pos, list(range(ranks))).sum(axis=2)  # [S, R]
    loop_dev = np.array([st.k_dur[:, loop].sum(axis=1) for st in cl.steps]) / 1000  # [S, R]
    free = col(m, "free_us")
    step = col(m, "step_us")
    base = _baseline(cl, ml_program(loop=False))
    base_step = float(np.median(base["step_us"]))
    layers = sum(1 for it in cl.program if isinstance(it, Collective) and it.tag == "dispatch")
    nums = {
        "local_experts": ML_LOCAL,
        "expert_loop_kernels_per_step": len(loop),
        "expert_matmuls_per_step": len(mm),
        "expert_matmuls_per_layer": len(mm) // layers,
        "grouped_matmul_kernels": sum(1 for k in cl.kernels if k.op_type == "GroupedMatmul"),
        "expert_rows_min": min(ML_ROWS),
        "expert_rows_max": max(ML_ROWS),
        "expert_matmul_us_median": _r(float(np.median([k.dur_us for k in mm]))),
        "device_idle_in_expert_loop_us_per_step": _r(float(np.median(idle))),
        "expert_loop_kernel_us_per_step": _r(float(np.median(loop_dev))),
        "median_free_us_per_step": _r(float(np.median(free.mean(axis=1)))),
        "median_free_share": _share(free, step),
        "free_share_spread_across_ranks": round(
            float(np.ptp(free.sum(axis=1) / step.sum(axis=1))), 4
        ),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_grouped_gemm": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key([], "scheduling", ["host-dispatch-bound", "tiny-kernels-fusion"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "device_idle_in_expert_loop_us": nums["device_idle_in_expert_loop_us_per_step"],
            "free_share": nums["median_free_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        op_type="MatMulV2",
        missing_op_type="GroupedMatmul",
        local_experts=ML_LOCAL,
        expert_rows=list(ML_ROWS),
        expert_ffn_hidden=ML_FFN,
        kernels_per_expert_forward=3,
        kernels_per_expert_backward=5,
        moe_grouped_gemm=False,
        fix="grouped GEMM for the experts (--moe-grouped-gemm: one GroupedMatmul per projection)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- ring-cp-blocking-p2p
CP = 2
CP_TP = 8
CP_KV_MB = round(2 * S * (H // CP_TP) * 2 / 1e6, 3)  # K and V blocks of one CP rank, bf16 (MB)
CP_TAG = "ring_kv"
CP_GRAD_MB = 48.0  # bf16 gradients of one layer's TP shard, all-reduced over the DP x CP pair
CP_FA_TAG = "ring_attn"


def cp_kinds(ranks: int) -> dict[str, GroupKind]:
    """World, TP (one server), DP x CP (the gradient group) and CP pairs (the same slot per server)."""
    tp = [list(range(i, i + CP_TP)) for i in range(0, ranks, CP_TP)]
    pairs = [list(range(j, ranks, CP_TP)) for j in range(CP_TP)]
    return {
        "world": make_group_kind(
            "world", "default_group", [list(range(ranks))], ranks, BASE_COMM_US, 0
        ),
        "tp": make_group_kind("tp", "tp", tp, ranks, BASE_COMM_US, 1),
        "dp": make_group_kind("dp", "dp_cp", pairs, ranks, BASE_COMM_US, 2),
        "cp": make_group_kind("cp", "cp", pairs, ranks, BASE_COMM_US, 3),
    }


def _p2p(tag: str, first_sends: bool, overlap: int = 0) -> Collective:
    a, b = ("hcom_send_", "hcom_receive_") if first_sends else ("hcom_receive_", "hcom_send_")
    return Collective(a, "cp", CP_KV_MB, overlap=overlap, tag=tag, peer_op=b)


def cp_program(blocking: bool = True) -> list[Item]:
    """transformer(tp=8, MC2 forward) with ring attention over the CP pair (two blocks per layer).

    ``blocking``: each exchange is a send then a receive (and the reverse on the peer) before the
    block attention; otherwise one exchange (both directions at once) behind the local block.
    """
    out: list[Item] = []
    for it in transformer(layers=4, tp=CP_TP, grad_mb=CP_GRAD_MB, mc2=True):
        if not isinstance(it, Kernel) or not it.op_type.startswith("FlashAttentionScore"):
            out.append(it)
            continue
        half = dataclasses.replace(it, dur_us=round(it.dur_us / 2, 1), tag=CP_FA_TAG)
        grad = it.op_type == "FlashAttentionScoreGrad"
        if blocking:
            out += [_p2p(CP_TAG, True), _p2p(CP_TAG, False), half, half]
            if grad:  # dK / dV of the received block go back to its owner
                out += [_p2p(CP_TAG + "_grad", True), _p2p(CP_TAG + "_grad", False)]
        else:
            out += [_p2p(CP_TAG, True, overlap=1), half, half]
            if grad:
                out.append(_p2p(CP_TAG + "_grad", True, overlap=1))
    return out


def cp_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, CP_TP, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(
        context_parallel_size=CP,
        data_parallel_size=ranks // (CP_TP * CP),
        context_parallel_algo="megatron_cp_algo",
        seq_length=S * CP,
    )
    info.user_metadata["distributed_args"] = dist
    p = default_perturb(ranks)
    return {"": Plan(cp_program(), cp_kinds(ranks), p, info, tp=CP_TP)}


def cp_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the ring exchanges are exposed on every rank (p2p over RDMA, Bubble without PP)."""
    cl: Cluster = m[""]["cluster"]
    p2p = [it for it in cl.program if isinstance(it, Collective) and it.peer_op]
    dur = np.array(
        [sum((op.end - op.start) for op in st.ops if op.item.peer_op) for st in cl.steps]
    )  # [S, R] ns
    p2p_us = dur / 1000
    bw: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if op.item.peer_op:
                sel = (op.kind.transport == 1) & (op.link_ms > 0)
                bw += (op.link_mb[sel] / op.link_ms[sel]).tolist()
    bubble = col(m, "bubble_us")
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    base = _baseline(cl, cp_program(blocking=False))
    base_step = float(np.median(base["step_us"]))
    nums = {
        "cp_size": CP,
        "tp_size": CP_TP,
        "pipeline_parallel_size": 1,
        "p2p_ops_per_step": len(p2p),
        "kv_block_mb": CP_KV_MB,
        "p2p_us_per_step": _r(float(np.median(p2p_us))),
        "p2p_share_of_step": round(float(np.median(p2p_us)) / float(np.median(step)), 4),
        "median_bubble_us_per_step": _r(float(np.median(bubble.mean(axis=1)))),
        "cp_rdma_bandwidth_gbps": round(float(np.median(bw)), 3),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_overlapped_ring": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "p2p_us_per_step": nums["p2p_us_per_step"],
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        op_types=["hcom_send", "hcom_receive"],
        group="cp",
        cp_pairs=[[j, j + CP_TP] for j in range(CP_TP)],
        transport="RDMA",
        per_layer_forward=2,
        per_layer_backward=4,
        phase="before each layer's block attention (FlashAttentionScore / Grad)",
        bubble_without_pipeline=True,
        fix="overlap the ring's K/V send/recv with the local block's attention (async, double "
        "buffer), or keep the CP group inside one server",
        overlapped=False,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- hbm-leftover-process
HL_RANK = 5
HL_HBM_MB = 65536.0  # 64 GB card
HL_LEFTOVER_MB = 24576.0  # held by the leftover process on device 5
HL_CAP_MB = HL_HBM_MB - HL_LEFTOVER_MB - APP_EXTRA_MB  # what rank 5's allocator can reserve
HL_STATIC_MB = 24576.0  # weights, fp32 master copy, optimizer states, gradients
HL_ACT_LAYER_MB = 3200.0  # activations kept per layer until its backward
HL_FRAG_MB = 4096.0  # cache the allocator holds beyond the allocated bytes (fragmentation)
HL_FRESH_MB = 512.0  # cache right after the allocator released its cached blocks
HL_SYNC_US = 1200.0  # device synchronize before the release
HL_FREE_US_PER_GB = 700.0  # aclrtFree of cached segments + the new aclrtMalloc


def _hl_alloc(prog: list[Item]) -> np.ndarray:
    """Allocated MB at each kernel of the program (the same on every rank).

    Activations are kept by the forward and released by the backward, layer by layer.
    """
    ks = _kernels(prog)
    fwd = 10 * 4
    out = np.zeros(len(ks))
    for j in range(len(ks)):
        if j < fwd:
            out[j] = HL_STATIC_MB + HL_ACT_LAYER_MB * (j + 1) / 10
        elif j < fwd + 12 * 4:
            out[j] = HL_STATIC_MB + HL_ACT_LAYER_MB * (4 - (j - fwd + 1) / 12)
        else:
            out[j] = HL_STATIC_MB
    return out


def _hl_allocator(alloc: np.ndarray, steps: int, cap: float | None) -> tuple[Any, Any]:
    """The caching allocator's reservation per step and kernel, and its release stalls.

    The reservation only grows (cached blocks are kept), to the allocated bytes plus the cache
    the fragmentation needs (which builds up again after a release). When it would exceed ``cap``
    the allocator synchronizes, releases its cached blocks and allocates anew (a stall on the host).

    Returns:
        reserved [steps, kernels] MB, stalls {step index: {kernel index: (stall_us, freed MB)}}.
    """
    res = np.zeros((steps, len(alloc)))
    stalls: dict[int, dict[int, tuple[float, float]]] = {}
    frag = HL_FRAG_MB
    r = float(alloc.max()) + HL_FRAG_MB if cap is None else cap - 8.0
    # one step before the capture settles the state
    for si in range(-1, steps):
        for j, a in enumerate(alloc):
            grow = max(0.0, a - alloc[j - 1]) if j > 0 else 0.0
            frag = min(HL_FRAG_MB, frag + grow)
            need = a + frag
            if cap is not None and need > r and need > cap:
                freed = r - (alloc[j - 1] if j > 0 else a)
                if si >= 0:
                    stall = HL_SYNC_US + HL_FREE_US_PER_GB * freed / 1024
                    stalls.setdefault(si, {})[j] = (round(stall, 1), round(freed, 3))
                frag = HL_FRESH_MB
                r = a + frag
            else:
                r = max(r, need)
            if si >= 0:
                res[si, j] = r
    return res, stalls


def hl_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    alloc = _hl_alloc(prog)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 1203)
    for r in range(ranks):
        res, stalls = _hl_allocator(alloc, steps, HL_CAP_MB if r == HL_RANK else None)
        p.mem_record[r] = [
            [
                (j, round(float(a), 3), round(float(res[si, j]), 3), round(float(a), 3))
                for j, a in enumerate(alloc)
            ]
            for si in range(steps)
        ]
        for si, at in stalls.items():
            p.step_kernel_stalls.setdefault(si, {})[r] = {
                j: round(us * (1.0 + 0.05 * float(np.clip(rng.standard_normal(), -2, 2))), 1)
                for j, (us, _f) in at.items()
            }
    return _plain(ranks, prog, p)


def hl_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: rank 5's allocator at its ceiling releases its cache mid-step; the others wait."""
    cl: Cluster = m[""]["cluster"]
    r5 = HL_RANK
    others = [q for q in range(ranks) if q != r5]
    alloc = _hl_alloc(cl.program)
    res5, stalls = _hl_allocator(alloc, steps, HL_CAP_MB)
    res_o, _ = _hl_allocator(alloc, steps, None)
    n_st = [len(stalls.get(si, {})) for si in range(steps)]
    pos = sorted({j for at in stalls.values() for j in at})
    idle = []
    for si, at in stalls.items():
        st = cl.steps[si]
        for j in at:
            idle.append((st.k_start[r5, j] - (st.k_start[r5, j - 1] + st.k_dur[r5, j - 1])) / 1000)
    freed = [f for at in stalls.values() for _u, f in at.values()]
    free = col(m, "free_us")
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    mm = [j for j, k in enumerate(cl.kernels) if k.op_type == "MatMulV2"]
    mm_us = np.array([st.k_dur[:, mm].mean(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    base = _baseline(cl)
    base_step = float(np.median(base["step_us"]))
    nums = {
        "culprit_rank": r5,
        "hbm_mb": HL_HBM_MB,
        "leftover_process_mb": HL_LEFTOVER_MB,
        "culprit_reserved_max_mb": _r(float(res5.max())),
        "culprit_reserved_min_mb": _r(float(res5.min())),
        "others_reserved_mb": _r(float(res_o.max())),
        "allocated_peak_mb": _r(float(alloc.max())),
        "allocated_peak_mb_culprit": _r(float(alloc.max())),
        "cache_releases_per_step": [int(x) for x in n_st],
        "cache_releases_in_capture": int(sum(n_st)),
        "freed_mb_per_release_median": _r(float(np.median(freed))),
        "stall_us_median": _r(float(np.median(idle))),
        "culprit_stall_us_per_step": _r(float(np.sum(idle)) / steps),
        "culprit_free_us_per_step": _r(float(free[r5].mean())),
        "others_free_us_per_step_median": _r(float(np.median(free[others].mean(axis=1)))),
        "others_wait_us_per_step_median": _r(float(np.median(wait[others].mean(axis=1)))),
        "culprit_wait_us_per_step": _r(float(wait[r5].mean())),
        "culprit_matmul_us_mean": _r(float(mm_us[r5])),
        "others_matmul_us_mean_median": _r(float(np.median(mm_us[others]))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_device_free": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key(
        [r5],
        "scheduling",
        ["expandable-segments-allocator", "host-dispatch-bound"],
        "free_us",
        nums,
    )
    vic = victims_by_wait(wait, [r5])
    key["root_cause"] = root_cause(
        "host_stall",
        "scheduling",
        "rank",
        ranks=[r5],
        victims=vic,
        not_slow=not_slow_sample(ranks, [r5], vic),
        metrics={
            "culprit_wait_us_per_step": nums["culprit_wait_us_per_step"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "culprit_stall_us_per_step": nums["culprit_stall_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    key["evidence"] = {
        "culprit_rank": r5,
        "file": "memory_record.csv",
        "component": "PTA",
        "culprit_reserved_ceiling_mb": nums["culprit_reserved_max_mb"],
        "others_reserved_mb": nums["others_reserved_mb"],
        "same_allocated_on_every_rank": True,
        "stall_before_kernels": [cl.kernels[j].op_type for j in pos],
        "phase": "end of the forward (activations at their peak)",
        "leftover_process": "another process holds device 5's HBM (npu-smi shows it)",
        "fix": "kill the leftover process on device 5 (npu-smi info) before launching; "
        "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True reduces fragmentation",
        "culprit_kernels_normal": True,
        "links_normal": True,
    }
    return key


# ---------------------------------------------------------------- nic-irq-on-train-core
IRQ_DEV = 0  # device id whose process is bound to the cores handling the NIC interrupts
IRQ_STALL_US = 480.0  # device idle before each kernel launched while RDMA traffic flows
IRQ_ENV = {"CPU_AFFINITY_CONF": "1"}


def _irq_ranks(ranks: int) -> list[int]:
    return [r for r in range(ranks) if r % RANKS_PER_NODE == IRQ_DEV]


def _irq_positions(prog: list[Item]) -> list[int]:
    """Kernels that run while a gradient all-reduce (overlapped, over RDMA) is in flight."""
    out: list[int] = []
    j = 0
    left = 0
    for it in prog:
        if isinstance(it, Collective):
            if it.overlap > 0:
                left = it.overlap
            continue
        if left > 0:
            out.append(j)
            left -= 1
        j += 1
    return out


def irq_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    pos = _irq_positions(prog)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 1207)
    for si in range(steps):
        per: dict[int, dict[int, float]] = {}
        for r in _irq_ranks(ranks):
            f = 1.0 + 0.15 * np.clip(rng.standard_normal(len(pos)), -2, 2)
            per[r] = {j: round(IRQ_STALL_US * float(x), 1) for j, x in zip(pos, f, strict=True)}
        p.step_kernel_stalls[si] = per
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks, IRQ_ENV))}


def irq_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: device-0 ranks' launches stall only inside the gradient all-reduce windows."""
    cl: Cluster = m[""]["cluster"]
    cul = _irq_ranks(ranks)
    rest = [r for r in range(ranks) if r not in cul]
    pos = _irq_positions(cl.program)
    outside = [j for j in range(1, len(cl.kernels)) if j not in pos]
    gap_c = _gaps_before_us(cl, pos, cul)
    gap_o = _gaps_before_us(cl, pos, rest)
    api_in = np.array([st.k_api_dur[:, pos] for st in cl.steps]) / 1000  # [S, R, P]
    api_out = np.array([st.k_api_dur[:, outside] for st in cl.steps]) / 1000
    bw: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            sel = (op.kind.transport == 1) & (op.link_ms > 0)
            bw += (op.link_mb[sel] / op.link_ms[sel]).tolist()
    free = col(m, "free_us")
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    base = _baseline(cl)
    base_step = float(np.median(base["step_us"]))
    nums = {
        "culprit_ranks": cul,
        "device_id": IRQ_DEV,
        "stalled_launches_per_step": len(pos),
        "culprit_idle_before_window_kernels_us_median": _r(float(np.median(gap_c))),
        "others_idle_before_window_kernels_us_median": _r(float(np.median(gap_o))),
        "culprit_idle_in_windows_us_per_step": _r(float(np.median(gap_c.sum(axis=2)))),
        "culprit_launch_us_in_windows_median": _r(float(np.median(api_in[:, cul]))),
        "culprit_launch_us_elsewhere_median": _r(float(np.median(api_out[:, cul]))),
        "others_launch_us_in_windows_median": _r(float(np.median(api_in[:, rest]))),
        "culprit_free_us_per_step": _r(float(np.median(free[cul].mean(axis=1)))),
        "others_free_us_per_step_median": _r(float(np.median(free[rest].mean(axis=1)))),
        "others_wait_us_per_step_median": _r(float(np.median(wait[rest].mean(axis=1)))),
        "culprit_wait_us_per_step": _r(float(np.median(wait[cul].mean(axis=1)))),
        "rdma_bandwidth_gbps": round(float(np.median(bw)), 3),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_irqs_elsewhere": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key(cul, "scheduling", ["cpu-core-binding", "host-dispatch-bound"], "free_us", nums)
    vic = victims_by_wait(wait, cul)
    key["root_cause"] = root_cause(
        "host_stall",
        "scheduling",
        "ranks",
        ranks=cul,
        victims=vic,
        not_slow=not_slow_sample(ranks, cul, vic),
        metrics={
            "culprit_wait_us_per_step": nums["culprit_wait_us_per_step"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "culprit_idle_in_windows_us_per_step": nums["culprit_idle_in_windows_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    key["evidence"] = {
        "device_id": IRQ_DEV,
        "culprit_ranks": cul,
        "one_per_node": True,
        "window": "kernels launched while a gradient all-reduce runs (RDMA traffic)",
        "window_kernel_positions": pos,
        "launch_api": "AscendCL launch calls (aclnn*) of those kernels",
        "cpu_affinity_conf": IRQ_ENV["CPU_AFFINITY_CONF"],
        "fix": "move the NIC interrupts off the training cores (irqbalance / smp_affinity of the "
        "RoCE NIC IRQs) or bind the training processes to cores that do not handle them",
        "culprit_kernels_normal": True,
        "links_normal": True,
    }
    return key


# ---------------------------------------------------------------- registry
DEV12_SCENARIOS = (
    ScenarioSpec(
        "moe-expert-loop",
        "MoE EP=8 (64 experts, 8 per rank) without grouped GEMM: each rank runs its 8 local experts "
        "in a Python loop (small MatMulV2 / SwiGlu per expert, ~150 us of host per op), the device "
        "idles between them on every rank; no GroupedMatmul, no late rank",
        16,
        4,
        ml_plans,
        ml_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "ring-cp-blocking-p2p",
        "ring attention CP=2 with TP=8 per server (CP pairs on two servers): K/V (and dK/dV) blocks "
        "exchanged by blocking hcom_send / hcom_receive over RDMA before each block attention, never "
        "overlapped; p2p and Bubble on every rank without pipeline parallelism; links normal",
        16,
        4,
        cp_plans,
        cp_answer,
        min_ranks=16,
        max_ranks=16,
        rank_multiple=16,
    ),
    ScenarioSpec(
        "hbm-leftover-process",
        "a leftover process holds ~24 GB of device 5's HBM: rank 5's caching allocator hits its "
        "ceiling near the end of the forward, synchronizes and releases its cache ~2x per step "
        "(host stall, device idle); memory_record.csv shows its reservation saw-toothing under the "
        "ceiling, the others flat; the others wait",
        16,
        4,
        hl_plans,
        hl_answer,
        min_ranks=8,
    ),
    ScenarioSpec(
        "nic-irq-on-train-core",
        "RoCE NIC interrupts on the cores bound to device 0's process on every server: ranks 0 and 8 "
        "stall ~0.5 ms before each kernel launched during the gradient all-reduces (RDMA traffic), "
        "normal elsewhere; the others wait in the next all-reduce",
        16,
        4,
        irq_plans,
        irq_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
)
DEV12_KINDS = tuple(s.name for s in DEV12_SCENARIOS)


__all__ = ["DEV12_KINDS", "DEV12_SCENARIOS"]
