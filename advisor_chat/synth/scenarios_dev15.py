"""Thirteenth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev15.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: memory-copy tasks on the compute stream of the
device lanes of trace_view.json, the inventory of tensor-parallel collectives in communication.json
with the shapes of the norms, the number of attention blocks per rank against its position in the
context-parallel ring (kernel_details.csv, parallel_group_info), and gaps without any host activity
in some steps on the host lanes of trace_view.json):

- ``activation-offload-inline``: activations offloaded to host memory by saved-tensor hooks
  (``torch.autograd.graph.saved_tensors_hooks`` pack / unpack with ``non_blocking=True``) on the
  current stream: every saved attention tensor ([4096, 4096] bf16, 33.6 MB) is copied device to host
  in the forward and host to device in the backward as ``MEMCPY_ASYNC`` tasks on the compute stream,
  right before the kernel that saves / needs it, no side stream, no prefetch. 20 copies each way per
  step at ~21 / ~24 GB/s; the device computes nothing meanwhile (Free) on every rank. Job-level; the
  fix overlaps the copies (a copy stream with prefetch of the next layer) or drops the offload
  (selective recompute).
- ``sp-norm-extra-gather``: TP=8 with sequence parallelism; the model's RMSNorm is not
  sequence-parallel aware, so a patch gathers the full sequence over TP before each norm and slices
  it back after (gather_from / scatter_to_sequence_parallel_region): 2 more ``hcom_allGather_`` per
  layer in the forward, an all-gather and a reduce-scatter around each RmsNormGrad in the backward,
  and the norms run on [4096, 4096] instead of the [512, 4096] shard. The extra collectives are on
  the critical path on every rank. Job-level; links normal, no late rank.
- ``cp-ring-causal-imbalance``: ring attention over CP=4 (the non-zigzag ring_flash_attn port) with
  the sequence split into contiguous quarters and a causal mask: the ring skips fully masked blocks,
  so the CP rank holding the last quarter computes its diagonal block and three full blocks per layer
  (4 FlashAttentionScore, 4 FlashAttentionScoreGrad) while the first computes only its diagonal
  block; every block takes the same time on every rank. Culprit: ranks 3, 7, 11, 15 (the last CP
  rank of each ring, their share of the work, not their cards); the others wait in the ring's
  ``hcom_batchSendRecv_``.
- ``async-save-thread-contention``: ``torch.distributed.checkpoint.async_save`` (thread-based)
  after step 11: during steps 12-14 the background writer thread holds the Python GIL while it
  serializes and writes the shard, so the training thread stops enqueuing operators several times
  per step (gaps of 2-12 ms with no host activity); the device idles on every rank in those steps
  only. Culprit: those steps (every rank); GC detection on, no GC recorded.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    Cluster,
    Collective,
    GroupKind,
    Item,
    Kernel,
    Perturb,
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
    matmul,
    transformer,
    vec,
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
    step_ids,
)


def _healthy_baseline(cl: Cluster, p: Perturb, program: list[Item]) -> dict[str, np.ndarray]:
    """Breakdown of the same run (seed, steps) with perturbations ``p`` and ``program``."""
    return _sim_breakdown(_resimulate(dataclasses.replace(cl, perturb=p), program))


def _med(x: Any) -> float:
    return _r(float(np.median(x)))


def _idle_before(cl: Cluster, si: int, r: int, j: int) -> float:
    """Device idle (µs) of rank ``r`` before kernel ``j`` in step index ``si``.

    From the end of the last task (kernel or collective) that ended before the kernel.
    """
    st = cl.steps[si]
    k0 = int(st.k_start[r, j])
    prev = int(st.k_start[r, j - 1] + st.k_dur[r, j - 1]) if j > 0 else st.bounds(r)[0]
    for op in st.ops:
        if prev < int(op.end[r]) <= k0:
            prev = int(op.end[r])
    return (k0 - prev) / 1000


# ---------------------------------------------------------------- activation-offload-inline
AO_BYTES = S * H * 2  # one saved attention tensor: [4096, 4096] bf16
AO_D2H_GBPS = 21.0  # pinned device-to-host copy over the card's PCIe link
AO_H2D_GBPS = 24.0  # pinned host-to-device copy
AO_JITTER = 0.03
AO_D2H = "device to host"
AO_H2D = "host to device"
# saved tensors offloaded per layer, by the kernel they are copied before (forward: the op that saves
# them; backward: the first kernel of the autograd node that unpacks them)
AO_FWD = (("qkv", 1), ("FlashAttentionScore", 3), ("attn_out", 1))  # hidden, q/k/v, attention out
AO_BWD = (("attn_out_dx", 1), ("FlashAttentionScoreGrad", 3), ("qkv_dx", 1))


def _ao_positions(prog: list[Item]) -> dict[int, tuple[str, int]]:
    """{kernel index: (copy direction, tensors)} of the offload copies in ``prog``."""
    ks = _kernels(prog)
    out: dict[int, tuple[str, int]] = {}
    for plan, op in ((AO_FWD, AO_D2H), (AO_BWD, AO_H2D)):
        for name, n in plan:
            for j, k in enumerate(ks):
                if k.tag == name or (not k.tag and k.op_type == name):
                    out[j] = (op, n)
    return out


def ao_program() -> list[Item]:
    """transformer(4 layers), data parallel over every rank (the copies are Perturb.dev_copies)."""
    return transformer(layers=4)


def ao_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = ao_program()
    pos = _ao_positions(prog)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 1501)
    for r in range(ranks):
        at: dict[int, list[tuple[str, int, float]]] = {}
        for j, (op, n) in sorted(pos.items()):
            gbps = AO_D2H_GBPS if op == AO_D2H else AO_H2D_GBPS
            f = 1.0 + AO_JITTER * np.clip(rng.standard_normal(n), -2, 2)
            at[j] = [(op, AO_BYTES, round(AO_BYTES / gbps / 1e3 * float(x), 1)) for x in f]
        p.dev_copies[r] = at
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def ao_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: in-stream offload copies before 6 kernels per layer; the device computes nothing."""
    cl: Cluster = m[""]["cluster"]
    pos = _ao_positions(cl.program)
    copies = cl.perturb.dev_copies
    d2h = [c for r in range(ranks) for j in pos for c in copies[r][j] if c[0] == AO_D2H]
    h2d = [c for r in range(ranks) for j in pos for c in copies[r][j] if c[0] == AO_H2D]
    per_rank_us = np.array([sum(c[2] for j in pos for c in copies[r][j]) for r in range(ranks)])
    n_d2h = sum(n for op, n in pos.values() if op == AO_D2H)
    n_h2d = sum(n for op, n in pos.values() if op == AO_H2D)
    n_layers = sum(1 for k in cl.kernels if k.tag == "qkv")
    js = sorted(pos)
    idle = np.array(
        [[[_idle_before(cl, si, r, j) for j in js] for r in range(ranks)] for si in range(steps)]
    )  # [S, R, P] µs without compute before those kernels (the copies and the gap after them)
    others = [j for j in range(1, len(cl.kernels)) if j not in pos]
    gaps = np.array(
        [[_idle_before(cl, si, r, j) for j in others] for si in range(steps) for r in range(ranks)]
    )
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    base = _baseline(cl)
    base_step = float(np.median(base["step_us"]))
    nums = {
        "offload_copies_d2h_per_step": n_d2h,
        "offload_copies_h2d_per_step": n_h2d,
        "offloaded_tensors_per_layer": n_d2h // n_layers,
        "copy_mb": round(AO_BYTES / 1e6, 3),
        "offloaded_mb_per_layer": round(n_d2h // n_layers * AO_BYTES / 1e6, 1),
        "d2h_copy_us_median": _med([c[2] for c in d2h]),
        "h2d_copy_us_median": _med([c[2] for c in h2d]),
        "d2h_bandwidth_gbps": round(float(np.median([c[1] / c[2] / 1e3 for c in d2h])), 2),
        "h2d_bandwidth_gbps": round(float(np.median([c[1] / c[2] / 1e3 for c in h2d])), 2),
        "copy_us_per_step": _med(per_rank_us),
        "idle_before_copy_kernels_us_per_step": _med(idle.sum(axis=2)),
        "idle_before_other_kernels_us_median": _med(gaps),
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _med(step),
        "median_step_us_without_offload": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
        "saving_share_of_step": round(
            (float(np.median(step)) - base_step) / float(np.median(step)), 4
        ),
    }
    key = _key([], "scheduling", ["activation-recompute"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_idle",
        "scheduling",
        metrics={
            "copy_us_per_step": nums["copy_us_per_step"],
            "free_share": nums["median_free_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        task_type="MEMCPY_ASYNC",
        api="aclrtMemcpyAsync",
        operations=[AO_D2H, AO_H2D],
        stream=2,
        same_stream_as_kernels=True,
        copy_bytes=AO_BYTES,
        copies_per_layer_forward=n_d2h // n_layers,
        copies_per_layer_backward=n_h2d // n_layers,
        position_forward="before the QKV MatMul (its input), the FlashAttentionScore (q, k, v) and "
        "the attention-output MatMul (the attention output) of every layer",
        position_backward="before the attention-output dX MatMul, the FlashAttentionScoreGrad and "
        "the QKV dX MatMul of every layer",
        cause="activation offload to host memory through saved-tensor hooks that copy on the "
        "current (compute) stream: every copy runs in line with the kernels, none is prefetched "
        "or overlapped",
        fix="overlap the offload: copy on a separate stream and prefetch the next layer's "
        "activations during the backward (e.g. MindSpeed --swap-attention), or drop the offload "
        "and use selective recomputation / a smaller micro-batch",
        kernels_normal=True,
        same_every_step=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- sp-norm-extra-gather
SP_TP = 8
SP_SHARD = S // SP_TP  # sequence rows per TP rank
SP_MB = 32.0  # gather / reduce-scatter of one [4096, 4096] bf16 activation over the TP group
SP_GRAD_MB = 48.0  # bf16 gradients of one layer's TP shard, all-reduced over DP
SP_NORM_TAG = "norm_gather"
SP_TAG = "sp"


def _sp_norm(extra: bool, grad: bool) -> list[Item]:
    """An RMSNorm (or its gradient) on the shard, or on the full sequence between TP collectives."""
    op, dur = ("RmsNormGrad", 95.0) if grad else ("RmsNorm", 60.0)
    if not extra:
        return [vec("norm", op, round(dur / SP_TP, 1), f"{SP_SHARD},{H}")]
    norm = vec("norm", op, dur, f"{S},{H}")
    ag = Collective("hcom_allGather_", "tp", SP_MB, tag=SP_NORM_TAG)
    if not grad:
        return [ag, norm]  # gather the shards, norm, slice the local shard back (a view)
    rs = Collective("hcom_reduceScatter_", "tp", SP_MB, tag=SP_NORM_TAG)
    return [ag, norm, rs]  # the slice's gradient is a gather, the gather's a reduce-scatter


def _sp_ag(overlap: int = 0) -> Collective:
    return Collective("hcom_allGather_", "tp", SP_MB, overlap=overlap, tag=SP_TAG)


def _sp_rs(overlap: int = 0) -> Collective:
    return Collective("hcom_reduceScatter_", "tp", SP_MB, overlap=overlap, tag=SP_TAG)


def sp_program(extra: bool = True, layers: int = 4) -> list[Item]:
    """Megatron TP=8 with sequence parallelism, 4 layers, DP over the rest.

    All-gather before the column-parallel MatMuls, reduce-scatter after the row-parallel ones; in the
    backward the weight-gradient re-gather and the dX reduce-scatter overlap a MatMul. With ``extra``
    every RMSNorm (and RmsNormGrad) runs on the full sequence between TP collectives.
    """
    h, f = H // SP_TP, 4 * H // SP_TP
    fa = _k(
        "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
        "FlashAttentionScore",
        "MIX_AIC",
        f"1,{S},{h};1,{S},{h};1,{S},{h}",
        f"1,{S},{h}",
        1100.0,
        "aclnnFlashAttentionScore",
    )
    fa_grad = _k(
        "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
        "FlashAttentionScoreGrad",
        "MIX_AIC",
        f"1,{S},{h};1,{S},{h};1,{S},{h};1,{S},{h}",
        f"1,{S},{h}",
        2300.0,
        "aclnnFlashAttentionScoreGrad",
    )
    add = vec("add", "Add", round(30.0 / SP_TP, 1), f"{SP_SHARD},{H}")
    prog: list[Item] = []
    for _ in range(layers):
        prog += _sp_norm(extra, grad=False)
        prog += [_sp_ag(), matmul("qkv", S, H, 3 * h, 900), fa, matmul("attn_out", S, h, H, 320)]
        prog += [_sp_rs(), add]
        prog += _sp_norm(extra, grad=False)
        prog += [_sp_ag(), matmul("mlp_up", S, H, 2 * f, 1500)]
        prog += [vec("swiglu", "SwiGlu", 90, f"{S},{2 * f}"), matmul("mlp_down", S, f, H, 1200)]
        prog += [_sp_rs(), add]
    for li in range(layers):
        prog += [_sp_ag(), matmul("mlp_down_dx", S, H, f, 1200)]
        prog += [matmul("mlp_down_dw", H, S, f, 1250)]
        prog += [vec("swiglu_grad", "SwiGluGrad", 140, f"{S},{2 * f}")]
        prog += [_sp_ag(overlap=1), matmul("mlp_up_dx", S, 2 * f, H, 1500)]
        prog += [_sp_rs(overlap=1), matmul("mlp_up_dw", 2 * f, S, H, 1550)]
        prog += _sp_norm(extra, grad=True)
        prog += [_sp_ag(), matmul("attn_out_dx", S, H, h, 320), matmul("attn_out_dw", H, S, h, 330)]
        prog += [fa_grad, _sp_ag(overlap=1), matmul("qkv_dx", S, 3 * h, H, 900)]
        prog += [_sp_rs(overlap=1), matmul("qkv_dw", 3 * h, S, H, 920)]
        prog += _sp_norm(extra, grad=True)
        ov = 6 if li < layers - 1 else 0
        prog.append(Collective("hcom_allReduce_", "dp", SP_GRAD_MB, overlap=ov, tag="grad"))
    tail = transformer(layers=1)
    opt = next(
        i
        for i, it in enumerate(tail)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    return prog + tail[opt:]


def _sp_count(prog: list[Item], op_type: str, tag: str | None = None) -> int:
    return sum(
        1
        for it in prog
        if isinstance(it, Collective)
        and it.group == "tp"
        and it.op_type == op_type
        and (tag is None or it.tag == tag)
    )


def sp_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, SP_TP, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(sequence_parallel=True, seq_length=S, micro_batch_size=1)
    info.user_metadata["distributed_args"] = dist
    p = default_perturb(ranks)
    return {"": Plan(sp_program(), group_kinds(ranks, SP_TP), p, info, tp=SP_TP)}


def sp_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 2 extra all-gathers per layer forward, 4 extra TP ops per layer backward."""
    cl: Cluster = m[""]["cluster"]
    prog = cl.program
    clean = sp_program(extra=False)
    layers = sum(1 for k in cl.kernels if k.tag == "qkv")
    bwd = next(i for i, it in enumerate(prog) if isinstance(it, Kernel) and it.tag == "mlp_down_dx")

    def op_us(tag: str) -> float:
        return float(
            np.median(
                [
                    (op.end - op.start) / 1000
                    for st in cl.steps
                    for op in st.ops
                    if op.item.tag == tag and op.item.op_type == "hcom_allGather_"
                ]
            )
        )

    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    base = _sim_breakdown(_resimulate(cl, clean))
    base_step = float(np.median(base["step_us"]))
    norm_us = [
        float(np.median(st.k_dur[:, j])) / 1000
        for st in cl.steps
        for j, k in enumerate(cl.kernels)
        if k.op_type == "RmsNorm"
    ]
    nums = {
        "tp_size": SP_TP,
        "tp_allgather_per_step": _sp_count(prog, "hcom_allGather_"),
        "tp_allgather_per_step_sequence_parallel": _sp_count(clean, "hcom_allGather_"),
        "tp_reducescatter_per_step": _sp_count(prog, "hcom_reduceScatter_"),
        "tp_reducescatter_per_step_sequence_parallel": _sp_count(clean, "hcom_reduceScatter_"),
        "extra_tp_collectives_per_step": _sp_count(prog, "hcom_allGather_", SP_NORM_TAG)
        + _sp_count(prog, "hcom_reduceScatter_", SP_NORM_TAG),
        "extra_allgather_per_layer_forward": _sp_count(prog[:bwd], "hcom_allGather_", SP_NORM_TAG)
        // layers,
        "tp_collective_mb": SP_MB,
        "norm_allgather_us_median": _r(op_us(SP_NORM_TAG)),
        "rmsnorm_us_median": _med(norm_us),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_comm_not_overlapped_us_per_step_without_extra": _med(
            base["comm_not_overlapped_us"]
        ),
        "median_step_us": _med(step),
        "median_step_us_without_extra": _r(base_step),
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
            "extra_tp_collectives_per_step": nums["extra_tp_collectives_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        group="tp",
        op_types=["hcom_allGather_", "hcom_reduceScatter_"],
        sequence_parallel=True,
        extra_forward="one hcom_allGather_ before each RmsNorm (2 per layer)",
        extra_backward="an hcom_allGather_ before and an hcom_reduceScatter_ after each "
        "RmsNormGrad (4 per layer)",
        norm_input_shape=f"{S},{H}",
        shard_shape=f"{SP_SHARD},{H}",
        norm_op_types=["RmsNorm", "RmsNormGrad"],
        cause="the model's RMSNorm is not sequence-parallel aware: a patch gathers the full "
        "sequence over TP before each norm (gather_from_sequence_parallel_region) and slices it back "
        "after (scatter_to_sequence_parallel_region)",
        fix="run the norm on the local [S/TP, H] shard (mark its weight sequence_parallel so its "
        "gradient is all-reduced over TP) and remove the gather / scatter around it",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
    )


# ---------------------------------------------------------------- cp-ring-causal-imbalance
CP = 4
CP_SEQ = S  # tokens per CP rank (16K sequence over 4 ranks)
CP_KV = 1024  # 8 KV heads x 128 (GQA)
CP_KV_MB = round(2 * CP_SEQ * CP_KV * 2 / 1e6, 3)  # K and V of one chunk, bf16
CP_DIAG_US = 1100.0  # causal attention of a chunk with itself
CP_FULL_US = 2200.0  # a chunk against a whole earlier chunk (no mask)
CP_GRAD = 2300.0 / 1100.0  # FlashAttentionScoreGrad / FlashAttentionScore
CP_MASK = "2048,2048"  # compressed causal mask input of the diagonal block
CP_TAG = "ring_block"
CP_GRAD_MB = 96.0


def cp_kinds(ranks: int) -> dict[str, GroupKind]:
    """World (gradients over DP x CP) and the CP rings (4 consecutive ranks inside a server).

    A ring rank exchanges K / V with its successor only: one HCCS link per rank (plus the local copy).
    """
    rings = [list(range(i, i + CP)) for i in range(0, ranks, CP)]
    world = make_group_kind("world", "default_group", [list(range(ranks))], ranks, BASE_COMM_US, 0)
    ring = make_group_kind("cp", "cp", rings, ranks, BASE_COMM_US, 3)
    ring.peer[:] = -1
    ring.transport[:] = -1
    ring.frac[:] = 0.0
    for mem in rings:
        for i, r in enumerate(mem):
            ring.peer[r, 0], ring.transport[r, 0], ring.frac[r, 0] = r, 2, 0.1 / CP
            ring.peer[r, 1], ring.transport[r, 1], ring.frac[r, 1] = mem[(i + 1) % CP], 0, 1.0
    return {"world": world, "cp": ring}


def _cp_block(t: int, grad: bool, balanced: bool) -> Kernel:
    """Block ``t`` of the ring (0 = the chunk with itself, causal) forward or backward."""
    diag = t == 0
    us = CP_DIAG_US if diag or balanced else CP_FULL_US
    q = f"1,{CP_SEQ},{H}"
    kv = f"1,{CP_SEQ},{CP_KV}"
    ins = [q, kv, kv] + ([q] if grad else [])
    dts = ["DT_BF16"] * len(ins)
    if diag:
        ins.append(CP_MASK)
        dts.append("DT_BOOL")
    op = "FlashAttentionScoreGrad" if grad else "FlashAttentionScore"
    return Kernel(
        name=f"aclnn{op}_{op}_{op}",
        op_type=op,
        core="MIX_AIC",
        in_shapes=";".join(ins),
        in_dtypes=";".join(dts),
        in_formats=";".join(["ND"] * len(ins)),
        out_shapes=q,
        out_dtypes="DT_BF16",
        out_formats="ND",
        dur_us=round(us * (CP_GRAD if grad else 1.0), 1),
        block_dim=24,
        api=f"aclnn{op}",
        tag=f"{CP_TAG}{t}",
    )


def _cp_ring(grad: bool, balanced: bool) -> list[Item]:
    """The ring: block t computed while the K / V (and dK / dV) for block t + 1 move on."""
    mb = CP_KV_MB * (2 if grad else 1)
    out: list[Item] = []
    for t in range(CP):
        if t < CP - 1:
            out.append(
                Collective(
                    "hcom_batchSendRecv_", "cp", mb, overlap=1, tag="ring_kv",
                    peer_op="hcom_batchSendRecv_",
                )
            )  # fmt: skip
        out.append(_cp_block(t, grad, balanced))
    return out


def cp_program(balanced: bool = False) -> list[Item]:
    """transformer(4 layers) with each attention (and its gradient) a 4-block ring.

    ``balanced``: the zigzag split (every rank computes half a block per ring step); otherwise the
    contiguous split (a ring rank computes the full block or skips it, see ``_cp_skips``).
    """
    out: list[Item] = []
    for it in transformer(layers=4, grad_mb=CP_GRAD_MB):
        if isinstance(it, Kernel) and it.op_type in (
            "FlashAttentionScore",
            "FlashAttentionScoreGrad",
        ):
            out += _cp_ring(it.op_type == "FlashAttentionScoreGrad", balanced)
        else:
            out.append(it)
    return out


def _cp_index(r: int) -> int:
    return r % CP


def _cp_skips(prog: list[Item], ranks: int) -> dict[int, set[int]]:
    """Blocks of later chunks (fully masked) a ring rank skips: block t > its CP index."""
    ks = _kernels(prog)
    out: dict[int, set[int]] = {}
    for r in range(ranks):
        c = _cp_index(r)
        skip = {
            j
            for j, k in enumerate(ks)
            if k.tag.startswith(CP_TAG) and int(k.tag[len(CP_TAG) :]) > c
        }
        if skip:
            out[r] = skip
    return out


def cp_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = cp_program()
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(
        context_parallel_size=CP,
        data_parallel_size=ranks // CP,
        seq_length=CP_SEQ * CP,
        micro_batch_size=1,
        num_query_groups=8,
    )
    info.user_metadata["distributed_args"] = dist
    p = default_perturb(ranks)
    p.skip_kernels = _cp_skips(prog, ranks)
    return {"": Plan(prog, cp_kinds(ranks), p, info)}


def _p2p_wait_us(cl: Cluster) -> np.ndarray:
    """[ranks, steps] waiting (Synchronization + Notify_Wait) inside the ring's batchSendRecv, µs."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if op.item.peer_op:
                out[:, si] += op.sync_ns / 1e3 + np.asarray(op.wait_extra_ms) * 1e3
    return out


def cp_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the last CP rank of each ring runs 4x the attention blocks; the others wait."""
    cl: Cluster = m[""]["cluster"]
    cul = [r for r in range(ranks) if _cp_index(r) == CP - 1]
    first = [r for r in range(ranks) if _cp_index(r) == 0]
    rest = [r for r in range(ranks) if r not in cul]
    ks = cl.kernels
    skips = cl.perturb.skip_kernels

    def n_run(r: int, op: str) -> int:
        return sum(1 for j, k in enumerate(ks) if k.op_type == op and j not in skips.get(r, set()))

    fa_by_index = [n_run(c, "FlashAttentionScore") for c in range(CP)]
    full = [
        j for j, k in enumerate(ks) if k.op_type == "FlashAttentionScore" and k.tag != CP_TAG + "0"
    ]
    diag = [
        j for j, k in enumerate(ks) if k.op_type == "FlashAttentionScore" and k.tag == CP_TAG + "0"
    ]
    full_us = [
        st.k_dur[r, j] / 1000 for st in cl.steps for r in range(ranks) for j in full
        if j not in skips.get(r, set())
    ]  # fmt: skip
    diag_us = [st.k_dur[r, j] / 1000 for st in cl.steps for r in range(ranks) for j in diag]
    comp = col(m, "computing_us")
    p2p = _p2p_wait_us(cl)
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    base = _healthy_baseline(cl, default_perturb(ranks), cp_program(balanced=True))
    base_step = float(np.median(base["step_us"]))
    nums = {
        "cp_size": CP,
        "seq_len_total": CP_SEQ * CP,
        "seq_len_per_cp_rank": CP_SEQ,
        "culprit_ranks": cul,
        "culprit_cp_index": CP - 1,
        "flash_attention_per_step_by_cp_index": fa_by_index,
        "culprit_flash_attention_per_step": fa_by_index[-1],
        "first_cp_rank_flash_attention_per_step": fa_by_index[0],
        "full_block_fa_us_median": _med(full_us),
        "diagonal_block_fa_us_median": _med(diag_us),
        "culprit_computing_us_per_step": _med(comp[cul].mean(axis=1)),
        "first_cp_rank_computing_us_per_step": _med(comp[first].mean(axis=1)),
        "computing_ratio": round(
            float(np.median(comp[cul].mean(axis=1)) / np.median(comp[first].mean(axis=1))), 3
        ),
        "first_cp_rank_ring_wait_us_per_step": _med(p2p[first].mean(axis=1)),
        "culprit_ring_wait_us_per_step": _med(p2p[cul].mean(axis=1)),
        "ring_kv_mb": CP_KV_MB,
        "median_step_us": _med(step),
        "median_step_us_zigzag": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
        "saving_share_of_step": round(
            (float(np.median(step)) - base_step) / float(np.median(step)), 4
        ),
    }
    key = _key(cul, "compute", ["load-imbalance-vs-slow-kernels"], "computing_us", nums)
    per = p2p.mean(axis=1)
    vic = [r for r in rest if per[r] - float(per[cul].max()) >= 1000]
    key["root_cause"] = root_cause(
        "compute_straggler",
        "compute",
        "ranks",
        ranks=cul,
        victims=vic,
        not_slow=not_slow_sample(ranks, cul, vic),
        metrics={
            "culprit_wait_us_per_step": _r(float(per[cul].mean() + wait[cul].mean())),
            "victim_wait_us_per_step": _r(float(per[vic].mean())) if vic else 0.0,
            "culprit_computing_excess_us_per_step": _r(
                float(np.median(comp[cul].mean(axis=1)))
                - float(np.median(comp[first].mean(axis=1)))
            ),
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    key["evidence"] = {
        "culprit_ranks": cul,
        "culprit_cp_index": CP - 1,
        "cp_group_file": "profiler_metadata.json (parallel_group_info, group cp)",
        "cp_groups": [list(range(i, i + CP)) for i in range(0, ranks, CP)],
        "flash_attention_per_step_by_cp_index": fa_by_index,
        "kernel_count_ratio_culprit_to_first": round(fa_by_index[-1] / fa_by_index[0], 3),
        "wait_op": "hcom_batchSendRecv_",
        "same_shapes": True,
        "same_kernel_durations": True,
        "cause": "ring attention with the sequence split into contiguous chunks and a causal mask: "
        "the rank with the last chunk attends to every earlier chunk, the first only to its own; the "
        "ring skips the fully masked blocks, so the work per rank grows with its CP index",
        "fix": "load-balanced (zigzag) split: each CP rank takes chunks i and 2*CP-1-i of the "
        "sequence (zigzag ring attention, Megatron get_batch_on_this_cp_rank), so every rank "
        "computes the same attention work",
        "cards_normal": True,
        "links_normal": True,
        "every_step": True,
    }
    return key


# ---------------------------------------------------------------- async-save-thread-contention
AS_SAVE_AFTER = 1  # step index after which async_save is called (step 11)
AS_STEPS = 3  # steps the background writer runs during
AS_GAPS = (2, 4)  # GIL waits of the training thread per affected step and rank (min, max)
AS_GAP_US = (2000.0, 12000.0)  # device idle of one wait (a storage written under the GIL)


def _as_steps(steps: int) -> list[int]:
    first = min(AS_SAVE_AFTER + 1, steps - 1)
    return list(range(first, min(first + AS_STEPS, steps)))


def as_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    nk = len(_kernels(prog))
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 1504)
    for si in _as_steps(steps):
        per: dict[int, dict[int, float]] = {}
        for r in range(ranks):
            n = int(rng.integers(AS_GAPS[0], AS_GAPS[1] + 1))
            js = sorted(int(j) for j in rng.choice(np.arange(2, nk), size=n, replace=False))
            per[r] = {j: round(float(rng.uniform(*AS_GAP_US)), 1) for j in js}
        p.step_host_gaps[si] = per
    info = dataclasses.replace(_info(CANN8, 1, ranks), gc_detect_threshold_ms=1.0)
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def as_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: in the 3 steps after the save every rank's host stops several times; the rest normal."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    hot = _as_steps(steps)
    rest = [s for s in range(steps) if s not in hot]
    gaps = cl.perturb.step_host_gaps
    n_gaps = [len(gaps[s][r]) for s in hot for r in range(ranks)]
    idle = [_idle_before(cl, s, r, j) for s in hot for r in range(ranks) for j in gaps[s][r]]
    idle_per = [
        sum(_idle_before(cl, s, r, j) for j in gaps[s][r]) for s in hot for r in range(ranks)
    ]
    step = col(m, "step_us").max(axis=0)  # [steps] the job's step time
    free = col(m, "free_us")
    base = _baseline(cl)
    base_step = base["step_us"].max(axis=0)
    extra = step - base_step
    nums = {
        "save_after_step": ids[AS_SAVE_AFTER],
        "affected_steps": [ids[s] for s in hot],
        "normal_steps": [ids[s] for s in rest],
        "host_gaps_per_affected_step_median": int(np.median(n_gaps)),
        "host_gap_us_median": _med(idle),
        "host_gap_us_max": _r(max(idle)),
        "device_idle_us_per_affected_step_median": _med(idle_per),
        "median_free_us_affected_steps": _med(free[:, hot]),
        "median_free_us_other_steps": _med(free[:, rest]),
        "step_us_affected_steps": _med(step[hot]),
        "step_us_other_steps": _med(step[rest]),
        "saving_us_per_affected_step": _med(extra[hot]),
        "checkpoint_cost_us": _r(float(extra[hot].sum())),
        "affected_share_of_captured_time": round(float(step[hot].sum() / step.sum()), 4),
        "gc_events": 0,
    }
    key = _key([], "scheduling", ["checkpoint-save-stall"], "free_us", nums)
    key["slow_step"] = ids[hot[0]]
    key["slow_step2"] = ids[hot[-1]]
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        steps=[ids[s] for s in hot],
        metrics={
            "device_idle_us_per_affected_step": nums["device_idle_us_per_affected_step_median"],
            "step_us_affected_steps": nums["step_us_affected_steps"],
            "step_us_other_steps": nums["step_us_other_steps"],
            "saving_us_per_affected_step": nums["saving_us_per_affected_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        save_after_step=ids[AS_SAVE_AFTER],
        first_affected_step=ids[hot[0]],
        last_affected_step=ids[hot[-1]],
        affected_steps=[ids[s] for s in hot],
        normal_steps=[ids[s] for s in rest],
        host_idle_in_gaps=True,
        launch_calls_normal=True,
        kernels_normal=True,
        gc_detection_on=True,
        gc_events=0,
        cause="torch.distributed.checkpoint.async_save with the default thread-based writer: the "
        "background thread serializes and writes the checkpoint shard while holding the Python GIL, "
        "so the training thread stops enqueuing operators (no host activity) several times per step "
        "until the write finishes",
        fix="write the checkpoint from a separate process (process-based async checkpointing, e.g. "
        "async_checkpointer_type=PROCESS / a persistent async save worker) instead of a thread, or "
        "save less often",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- registry
DEV15_SCENARIOS = (
    ScenarioSpec(
        "activation-offload-inline",
        "activations offloaded by saved-tensor hooks on the compute stream: 20 device-to-host and "
        "20 host-to-device copies of [4096, 4096] bf16 per step (MEMCPY_ASYNC, ~21 / ~24 GB/s) in "
        "line with the kernels, none prefetched; the device computes nothing meanwhile on every rank",
        16,
        4,
        ao_plans,
        ao_answer,
    ),
    ScenarioSpec(
        "sp-norm-extra-gather",
        "TP=8 with sequence parallelism, RMSNorm not sequence-parallel aware: the full sequence "
        "all-gathered over TP before every norm (2 more hcom_allGather_ per layer forward, an "
        "all-gather and a reduce-scatter around every RmsNormGrad), norms on [4096, 4096] instead of "
        "[512, 4096]; exposed on every rank, links normal",
        16,
        4,
        sp_plans,
        sp_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "cp-ring-causal-imbalance",
        "ring attention CP=4 with a contiguous sequence split and a causal mask: the last CP rank "
        "of each ring (ranks 3, 7, 11, 15) computes 4 attention blocks per layer, the first 1 (the "
        "ring skips masked blocks), every block as fast everywhere; the others wait in "
        "hcom_batchSendRecv",
        16,
        4,
        cp_plans,
        cp_answer,
        min_ranks=8,
        rank_multiple=4,
    ),
    ScenarioSpec(
        "async-save-thread-contention",
        "dcp.async_save (thread) after step 11: in steps 12-14 the writer thread holds the GIL and "
        "the training thread stops enqueuing 2-4 times per step (2-12 ms, no host activity); the "
        "device idles on every rank in those steps only; GC detection on, no GC",
        16,
        8,
        as_plans,
        as_answer,
    ),
)
DEV15_KINDS = tuple(s.name for s in DEV15_SCENARIOS)


__all__ = ["DEV15_KINDS", "DEV15_SCENARIOS"]
