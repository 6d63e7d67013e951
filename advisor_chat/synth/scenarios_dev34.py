"""Development set 34 of fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs from two areas, long-context training (sequence / context
parallelism) and operational / multi-tenant cluster problems, planted as mechanisms of the simulation
(``advisor_chat.synth.model``, ``advisor_chat.synth.writer``) with an answer key derived from the
simulated timeline and the breakdown the writer measured (never from typed numbers). Every key
carries ``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the
files). Their question set is ``evals/datasets/generalization_dev34.yaml``: a development set for
finding weaknesses; the held-out kinds of ``generalization.yaml`` stay untouched. The "how much
would fixing it save" numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place of the files: the head count inside the
``Input Shapes`` of the attention operators of kernel_details.csv, which differs between the ranks of
one sequence-parallel group; the ``Transit Size`` of the ring's ``hcom_batchSendRecv_`` records in
the p2p section of communication.json against the query-group count of profiler_metadata.json; the
durations of single ``AscendCL@aclnn*`` launch calls on the CANN lane of trace_view.json of one node,
in card order on a fixed wall-clock period; and the per-link ``Bandwidth(GB/s)`` of
communication_matrix.json, by operator type on the same RDMA links):

- ``ulysses-uneven-heads``: long-context continued pre-training of a 20-head model (hidden 2560, MHA,
  32K tokens per sequence) with DeepSpeed-Ulysses sequence parallelism of 8 (one server) x DP 2. 20
  heads do not divide by 8, so the all-to-all takes the uneven path (``uneven_heads_all2all``,
  ``hcom_alltoallv_``): sequence-parallel ranks 0-3 of each server get 3 heads, ranks 4-7 get 2.
  Every FlashAttentionScore / FlashAttentionScoreGrad on ranks 0-3 and 8-11 runs over 3 heads
  (``1,32768,384``), on the others over 2 (``1,32768,256``), 1.5x as long; the MatMuls, norms and MLP
  (sequence-sharded, 4096 tokens per rank) are alike everywhere. The 2-head ranks wait in the
  ``hcom_alltoallv_`` right after every attention (forward: output, backward: dq / dk / dv). Culprit:
  ranks 0-3 and 8-11 (their share of the heads, not their cards); kernels per head, links and host
  normal. Fix: a sequence-parallel size that divides the head count (4, 5, 10, 20; e.g. SP 4 x DP 4,
  or Ulysses 4 x ring 2) so every rank gets the same heads.
- ``ring-attn-kv-expanded``: 64K-token sequences with ring attention (context parallel 8 inside each
  server, zigzag split, K / V passed around the ring with ``hcom_batchSendRecv_`` beside each block's
  attention) for a GQA model (32 query heads, 8 KV groups, head dim 128). The ring was hooked in
  after the model's ``repeat_kv``, so K and V travel expanded to all 32 heads: every ring step moves
  134 MB instead of 33.5 MB (268 MB instead of 67 MB with dK / dV in the backward), and the transfer
  over the one HCCS link to the ring neighbour (~8.7 ms) outlasts the block's attention (~3.7 ms)
  instead of hiding behind it. In kernel_details.csv an ``Expand`` of K and of V
  (``1,8,1,8192,128`` -> ``1,8,4,8192,128``) before every ring and a ``ReduceSum`` of dK / dV after
  every backward ring, the FlashAttentionScore inputs with K / V of 32 heads like Q
  (``1,32,8192,128``); communication.json's p2p section: the ``hcom_batchSendRecv_`` Transit Size;
  step_trace_time.csv: Communication(Not Overlapped) on every rank alike. Job-level; HCCS bandwidth,
  kernels and host normal. Fix: pass K / V with their 8 groups (FlashAttention / ring attention take
  GQA natively: hook the ring before ``repeat_kv`` or drop it), 4x fewer bytes per step.
- ``npu-monitor-poll-node``: a new version of the node monitoring agent rolled out to node 1 only (a
  canary) polls its 8 NPUs one after the other through the driver every ~250 ms (DCMI queries, like
  ``npu-smi info`` in a loop); each query holds that card's driver channel ~10 ms, and the training
  process' kernel launch on that card blocks meanwhile. In trace_view.json of ranks 8-15 one
  ``AscendCL@aclnn*`` launch call of up to ~10 ms per card and sweep (the others ~11 us), in card order
  (rank 8, 9, ... 15) ~12 ms apart, the sweep repeating on a fixed wall-clock period unrelated to the steps;
  the device idles after each (~7 ms, once the host's lead is used up) and node 0 waits for node 1 in
  the gradient all-reduces. Culprit: node 1 (ranks 8-15, a host-side agent); kernels, links, other
  launch calls normal, no GC. Fix: stop / roll back the agent on node 1 or lengthen its polling
  interval (the same agent version and interval as node 0).
- ``roce-incast-alltoall``: a 64-expert top-2 MoE with expert parallel 16 over two servers: every
  token ``hcom_alltoallv_`` sends half its payload over RoCE to the other server, all cards at once
  (many-to-one incast at every receiving port). The RoCE fabric runs without working congestion
  control (ECN / DCQCN off on the switches and NICs, PFC only), so the incast ends in pause storms:
  the all-to-alls' RDMA transfers reach ~4 GB/s while the gradient all-reduces (ring, one sender per
  port) reach ~12 GB/s over the same links in the same steps; HCCS normal. Every all-to-all is ~2x
  as long, on every rank alike; no rank, link or step stands out. Job-level. Fix: enable and tune
  ECN / DCQCN (switch WRED / ECN marking, the NICs' congestion control) for the RoCE traffic class;
  meanwhile keep expert parallelism inside a server or use hierarchical all-to-all.
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
    Perturb,
    default_perturb,
    make_group_kind,
    simulate,
)
from advisor_chat.synth.scenarios import (
    BASE_COMM_US,
    CANN8,
    T0_NS,
    Plan,
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
from advisor_chat.synth.scenarios_dev4 import _resimulate, _sim_breakdown
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_dev19 import _med, _saving
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)

LAYERS = 4
MM_FLOPS = 180e12  # a bf16 MatMul's effective rate (FLOP/s)
FA_FLOPS = 150e12  # FlashAttention's effective rate
HBM_BPS = 1.3e12  # effective HBM bandwidth of a memory-bound vector kernel (bytes/s)
GAP_US = 14.0  # the device gap between kernels of default_perturb
LEAD_US = 1800.0  # how far default_perturb's host runs ahead of the device
MIB = 2**20  # collective payloads are given in MiB (the files report decimal MB)


def _kernels(prog: list[Item]) -> list[Kernel]:
    return [it for it in prog if isinstance(it, Kernel)]


def _dist(info: Any, **kw: Any) -> None:
    """Add keys to the ``distributed_args`` user metadata of ``info``."""
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(kw)
    info.user_metadata["distributed_args"] = dist


def _mm(tag: str, m: int, k: int, n: int) -> Kernel:
    """MatMulV2 ``[m,k] x [n,k]^T`` at ``MM_FLOPS``."""
    dur = round(2 * m * k * n / MM_FLOPS * 1e6 + 6, 1)
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


def _vec(op: str, nbytes: float, ins: str, outs: str, tag: str = "") -> Kernel:
    """A memory-bound vector kernel moving ``nbytes``."""
    dur = round(nbytes / HBM_BPS * 1e6 + 4, 1)
    return _k(f"aclnn{op}_{op}_{op}", op, "AI_VECTOR_CORE", ins, outs, dur, f"aclnn{op}", tag, 40)


def _fa(q: str, kv: str, flops: float, grad: bool, mask: str = "", tag: str = "") -> Kernel:
    """FlashAttentionScore(Grad) with inputs q, k, v (+ dy) and an optional compressed mask."""
    op = "FlashAttentionScoreGrad" if grad else "FlashAttentionScore"
    ins = [q, kv, kv] + ([q] if grad else [])
    dts = ["DT_BF16"] * len(ins)
    if mask:
        ins.append(mask)
        dts.append("DT_BOOL")
    dur = round(flops / FA_FLOPS * 1e6 * (FA_GRAD if grad else 1.0) + 10, 1)
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
        dur_us=dur,
        block_dim=24,
        api=f"aclnn{op}",
        tag=tag,
    )


FA_GRAD = 2.2  # FlashAttentionScoreGrad / FlashAttentionScore
MASK = "2048,2048"  # the compressed causal mask (sparse mode)


def _node_groups(ranks: int) -> list[list[int]]:
    return [list(range(i, min(i + RANKS_PER_NODE, ranks))) for i in range(0, ranks, RANKS_PER_NODE)]


def _op_us(cl: Cluster, pick: Any) -> np.ndarray:
    """[ranks, steps] summed duration (µs) of the collectives ``pick(collective)`` accepts."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if pick(op.item):
                out[:, si] += (op.end - op.start) / 1000
    return out


def _link_bw(cl: Cluster, pick: Any, transport: int) -> list[float]:
    """Bandwidths (GB/s) of the ``transport`` links (0 HCCS, 1 RDMA) of the ops ``pick`` accepts."""
    out: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if not pick(op.item):
                continue
            sel = (op.kind.transport == transport) & (op.link_ms > 0)
            out.extend((op.link_mb[sel] / op.link_ms[sel]).tolist())
    return out


def _transit_mb(cl: Cluster, pick: Any, ranks: list[int]) -> list[float]:
    """Per op and rank of ``ranks``: MB sent over HCCS + RDMA (the Transit Size) by the ops ``pick`` takes."""
    out: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if not pick(op.item):
                continue
            wire = (op.kind.transport == 0) | (op.kind.transport == 1)
            tot = np.where(wire, op.link_mb, 0.0).sum(axis=1)
            out.extend(float(tot[r]) for r in ranks)
    return out


def _tail(h: int) -> list[Item]:
    """The optimizer at the step's end, on ``h``-wide shapes.

    Foreach kernels around the grad-norm all-reduce and the parameter all-gather of ``transformer()``.
    """
    shape = f"{h},{h};{h}"

    def fe(op: str, dur: float) -> Kernel:
        return _k(
            f"aclnn{op}V2_{op}V2_{op}", op, "AI_VECTOR_CORE", shape, shape, dur, f"aclnn{op}", bd=48
        )

    return [
        fe("ForeachMulScalar", 300.0),
        fe("ForeachAddList", 650.0),
        Collective("hcom_allReduce_", "world", 4.0),
        Collective("hcom_allGather_", "world", 2.0),
        fe("ForeachAddList", 640.0),
    ]


# ---------------------------------------------------------------- ulysses-uneven-heads
UH_SP = 8  # Ulysses sequence-parallel size (one server)
UH_HEADS = 20  # attention heads (MHA: as many K / V heads)
UH_HD = 128
UH_H = UH_HEADS * UH_HD  # hidden 2560
UH_FFN = 6912
UH_SEQ = 32768  # tokens per sequence
UH_LOCAL = UH_SEQ // UH_SP  # tokens per rank outside the attention
UH_A2A_MIB = UH_LOCAL * UH_H * 2 / MIB  # one all-to-all's payload per rank (even split), MiB
UH_GRAD_MIB = 64.0  # a layer's gradient bucket
UH_SCATTER, UH_GATHER = "uh_scatter", "uh_gather"  # all-to-alls to the heads / back to the sequence


def uh_heads(sp: int = UH_SP) -> list[int]:
    """Heads per sequence-parallel rank: DeepSpeed's shard sizes, the first ``heads % sp`` get one more."""
    base, rem = divmod(UH_HEADS, sp)
    return [base + 1 if i < rem else base for i in range(sp)]


def _uh_fa(heads: float, grad: bool) -> Kernel:
    """Causal attention over the whole sequence for ``heads`` heads (BSH layout)."""
    bsh = f"1,{UH_SEQ},{round(heads * UH_HD)}"
    return _fa(bsh, bsh, 2 * UH_SEQ * UH_SEQ * UH_HD * heads, grad, MASK)


def uh_program(heads: float) -> list[Item]:
    """4 layers, Ulysses attention (3 all-to-alls in, 1 out) with FlashAttention over ``heads``."""
    t, h, f = UH_LOCAL, UH_H, UH_FFN
    sh = f"{t},{h}"
    act = 2 * t * h

    def a2a(tag: str) -> Collective:
        return Collective("hcom_alltoallv_", "sp", UH_A2A_MIB, tag=tag)

    fwd: list[Item] = [
        _vec("RmsNorm", 2 * act, sh, sh),
        _mm("qkv", t, h, 3 * h),
        a2a(UH_SCATTER),
        a2a(UH_SCATTER),
        a2a(UH_SCATTER),
        _uh_fa(heads, False),
        a2a(UH_GATHER),
        _mm("attn_out", t, h, h),
        _vec("Add", 3 * act, f"{sh};{sh}", sh),
        _vec("RmsNorm", 2 * act, sh, sh),
        _mm("mlp_up", t, h, 2 * f),
        _vec("SwiGlu", 2 * t * 3 * f, f"{t},{2 * f}", f"{t},{f}"),
        _mm("mlp_down", t, f, h),
        _vec("Add", 3 * act, f"{sh};{sh}", sh),
    ]
    prog: list[Item] = []
    for _ in range(LAYERS):
        prog += fwd
    for li in range(LAYERS):
        prog += [
            _mm("mlp_down_dx", t, h, f),
            _mm("mlp_down_dw", h, t, f),
            _vec("SwiGluGrad", 1.6 * 2 * t * 3 * f, f"{t},{f}", f"{t},{2 * f}"),
            _mm("mlp_up_dx", t, 2 * f, h),
            _mm("mlp_up_dw", 2 * f, t, h),
            _vec("RmsNormGrad", 3 * act, f"{sh};{sh}", sh),
            _mm("attn_out_dx", t, h, h),
            _mm("attn_out_dw", h, t, h),
            a2a(UH_SCATTER),
            _uh_fa(heads, True),
            a2a(UH_GATHER),
            a2a(UH_GATHER),
            a2a(UH_GATHER),
            _mm("qkv_dx", t, 3 * h, h),
            _mm("qkv_dw", 3 * h, t, h),
            _vec("RmsNormGrad", 3 * act, f"{sh};{sh}", sh),
            Collective(
                "hcom_allReduce_", "world", UH_GRAD_MIB, overlap=0 if li == LAYERS - 1 else 6
            ),
        ]
    return prog + _tail(h)


def uh_kinds(ranks: int) -> dict[str, GroupKind]:
    """World (gradients over DP x SP) and the sequence-parallel groups (one server each)."""
    kinds = group_kinds(ranks, 1)
    kinds["sp"] = make_group_kind("sp", "sp", _node_groups(ranks), ranks, BASE_COMM_US, 1)
    return kinds


def _uh_sp_index(r: int) -> int:
    return r % UH_SP


def _uh_culprits(ranks: int) -> list[int]:
    heads = uh_heads()
    return [r for r in range(ranks) if heads[_uh_sp_index(r)] == max(heads)]


def _uh_perturb(ranks: int, prog: list[Item]) -> Perturb:
    """Fewer heads on the last SP ranks: their attention kernels and their share of the all-to-alls."""
    heads = uh_heads()
    mean = UH_HEADS / UH_SP
    p = default_perturb(ranks)
    ks = _kernels(prog)
    for r in range(ranks):
        hr = heads[_uh_sp_index(r)]
        if hr == max(heads):
            continue
        for j, k in enumerate(ks):
            if k.op_type.startswith("FlashAttentionScore"):
                p.kernel_swap[(-1, r, j)] = _uh_fa(hr, k.op_type.endswith("Grad"))
    # an all-to-all to the heads sends each rank the heads it owns; one back sends one's own heads
    p.coll_dst_scale = {UH_SCATTER: {r: heads[_uh_sp_index(r)] / mean for r in range(ranks)}}
    p.coll_scale = {
        UH_GATHER: np.array([heads[_uh_sp_index(r)] / mean for r in range(ranks)], dtype=float)
    }
    return p


def uh_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = uh_program(max(uh_heads()))
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        ds_sequence_parallel_size=UH_SP,
        data_parallel_size=ranks // UH_SP,
        num_attention_heads=UH_HEADS,
        num_key_value_heads=UH_HEADS,
        kv_channels=UH_HD,
        hidden_size=UH_H,
        ffn_hidden_size=UH_FFN,
        seq_length=UH_SEQ,
        micro_batch_size=1,
        num_layers=LAYERS,
    )
    return {"": Plan(prog, uh_kinds(ranks), _uh_perturb(ranks, prog), info)}


def _wait_in(cl: Cluster, tag: str) -> np.ndarray:
    """[ranks, steps] wait (Synchronization + Notify_Wait, µs) in the collectives tagged ``tag``."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if op.item.tag == tag:
                out[:, si] += op.sync_ns / 1e3 + np.asarray(op.wait_extra_ms) * 1e3
    return out


def uh_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the 3-head ranks' attention runs 1.5x as long; the 2-head ranks wait for them."""
    cl: Cluster = m[""]["cluster"]
    heads = uh_heads()
    cul = _uh_culprits(ranks)
    rest = [r for r in range(ranks) if r not in cul]
    ks = cl.kernels

    def kus(op: str, rs: list[int]) -> list[float]:
        js = [j for j, k in enumerate(ks) if k.op_type == op]
        return [float(st.k_dur[r, j]) / 1000 for st in cl.steps for r in rs for j in js]

    fa_c, fa_o = kus("FlashAttentionScore", cul), kus("FlashAttentionScore", rest)
    fg_c, fg_o = kus("FlashAttentionScoreGrad", cul), kus("FlashAttentionScoreGrad", rest)
    mm_c, mm_o = kus("MatMulV2", cul), kus("MatMulV2", rest)
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    gw = _wait_in(cl, UH_GATHER)
    aw = _wait_in(cl, UH_GATHER) + _wait_in(cl, UH_SCATTER)
    a2a_n = sum(1 for it in cl.program if isinstance(it, Collective) and it.group == "sp")
    gather = lambda c: c.tag == UH_GATHER  # noqa: E731
    base = _baseline(cl, uh_program(UH_HEADS / UH_SP))
    a, b, save = _saving(step, base["step_us"])
    vic = victims_by_wait(wait, cul)
    nums = {
        "attention_heads": UH_HEADS,
        "sp_size": UH_SP,
        "heads_by_sp_rank": heads,
        "culprit_heads": max(heads),
        "other_heads": min(heads),
        "seq_len": UH_SEQ,
        "tokens_per_rank": UH_LOCAL,
        "culprit_ranks": cul,
        "fa_us_median_culprit": _med(fa_c),
        "fa_us_median_others": _med(fa_o),
        "fa_grad_us_median_culprit": _med(fg_c),
        "fa_grad_us_median_others": _med(fg_o),
        "fa_ratio": round(float(np.median(fa_c) / np.median(fa_o)), 3),
        "matmul_us_median_culprit": _med(mm_c),
        "matmul_us_median_others": _med(mm_o),
        "culprit_computing_us_per_step": _med(comp[cul].mean(axis=1)),
        "others_computing_us_per_step": _med(comp[rest].mean(axis=1)),
        "computing_excess_us_per_step": _r(
            float(np.median(comp[cul].mean(axis=1)) - np.median(comp[rest].mean(axis=1)))
        ),
        "alltoall_per_step": a2a_n,
        "others_wait_after_attention_us_per_step": _med(gw[rest].mean(axis=1)),
        "culprit_wait_after_attention_us_per_step": _med(gw[cul].mean(axis=1)),
        "others_alltoall_wait_us_per_step": _med(aw[rest].mean(axis=1)),
        "culprit_alltoall_wait_us_per_step": _med(aw[cul].mean(axis=1)),
        "gather_alltoall_mb_culprit": _med(_transit_mb(cl, gather, cul)),
        "gather_alltoall_mb_others": _med(_transit_mb(cl, gather, rest)),
        "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
        "culprit_wait_us_per_step": _r(float(wait[cul].mean())),
        "median_step_us": _r(a),
        "median_step_us_balanced_heads": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(cul, "compute", ["load-imbalance-vs-slow-kernels"], "computing_us", nums)
    rc = root_cause(
        "compute_straggler",
        "compute",
        "ranks",
        ranks=cul,
        operator="FlashAttentionScore",
        victims=vic,
        not_slow=not_slow_sample(ranks, cul, vic),
        metrics={
            "culprit_wait_us_per_step": nums["culprit_wait_us_per_step"],
            "victim_wait_us_per_step": nums["victim_wait_us_per_step"],
            "computing_excess_us_per_step": nums["computing_excess_us_per_step"],
            "fa_ratio": nums["fa_ratio"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    hs = {h: f"1,{UH_SEQ},{h * UH_HD}" for h in sorted(set(heads))}
    return _with_evidence(
        key,
        rc,
        culprit_ranks=cul,
        sp_groups=_node_groups(ranks),
        heads_by_sp_rank=heads,
        operator="FlashAttentionScore",
        culprit_shape=hs[max(heads)],
        other_shape=hs[min(heads)],
        collective="hcom_alltoallv_",
        group="sp",
        wait_op="hcom_alltoallv_ (sp group, right after each attention)",
        file="kernel_details.csv (FlashAttentionScore / FlashAttentionScoreGrad Input Shapes "
        f"{hs[max(heads)]} on ranks with SP index 0-3 against {hs[min(heads)]} on SP index 4-7, "
        "1.5x the duration; MatMuls and norms alike), communication.json (sp-group "
        "hcom_alltoallv_: the 2-head ranks' Wait Time after every attention, uneven Transit Size) "
        "and profiler_metadata.json (num_attention_heads 20, ds_sequence_parallel_size 8)",
        same_shapes_outside_attention=True,
        kernels_per_head_normal=True,
        links_normal=True,
        host_normal=True,
        every_step=True,
        cause=f"{UH_HEADS} attention heads over Ulysses sequence parallelism of {UH_SP}: the heads "
        "do not divide evenly, so DeepSpeed's uneven all-to-all gives SP ranks 0-3 of each server "
        f"{max(heads)} heads and ranks 4-7 {min(heads)}; every attention (forward and backward) on "
        "ranks " + ", ".join(str(r) for r in cul) + " covers 1.5x the heads over the full 32K "
        "sequence and the others wait for them in the all-to-all after it",
        fix="use a sequence-parallel size that divides the 20 heads (4, 5, 10 or 20; e.g. Ulysses 4 "
        "x DP 4, or Ulysses 4 x ring attention 2 for the same sequence per group), so every rank "
        "computes the same number of heads",
    )


# ---------------------------------------------------------------- ring-attn-kv-expanded
RK_CP = 8  # ring (context-parallel) size, one server
RK_SEQ = 65536
RK_CHUNK = RK_SEQ // RK_CP  # tokens per rank (two zigzag halves)
RK_HEADS, RK_GROUPS, RK_HD = 32, 8, 128
RK_H = RK_HEADS * RK_HD  # 4096
RK_FFN = 14336
RK_GRAD_MIB = 96.0
RK_TAG = "ring_kv"


def _rk_kv_mib(heads: int) -> float:
    """K and V of one chunk over ``heads`` heads (bf16), MiB."""
    return 2 * RK_CHUNK * heads * RK_HD * 2 / MIB


def _rk_block(t: int, kv_heads: int, grad: bool) -> Kernel:
    """Ring step ``t`` (0: the chunk with itself, causal) of the zigzag ring (BNSD layout).

    Every rank computes 1/CP of the layer's attention work in each step of the ring.
    """
    q = f"1,{RK_HEADS},{RK_CHUNK},{RK_HD}"
    kv = f"1,{kv_heads},{RK_CHUNK},{RK_HD}"
    flops = 2 * RK_SEQ * RK_SEQ * RK_HD * RK_HEADS / RK_CP / RK_CP
    return _fa(q, kv, flops, grad, MASK if t == 0 else "", tag=f"ring_block{t}")


def _rk_ring(kv_heads: int, grad: bool) -> list[Item]:
    """The ring: block t computed while the K / V (and dK / dV) for block t + 1 move on."""
    mib = _rk_kv_mib(kv_heads) * (2 if grad else 1)
    out: list[Item] = []
    for t in range(RK_CP):
        if t < RK_CP - 1:
            out.append(
                Collective(
                    "hcom_batchSendRecv_", "cp", mib, overlap=1, tag=RK_TAG,
                    peer_op="hcom_batchSendRecv_",
                )
            )  # fmt: skip
        out.append(_rk_block(t, kv_heads, grad))
    return out


def rk_program(expanded: bool = True) -> list[Item]:
    """4 layers with ring attention; ``expanded``: K / V repeated to every query head first."""
    t, h, f = RK_CHUNK, RK_H, RK_FFN
    g = RK_GROUPS
    kvh = RK_HEADS if expanded else g
    sh = f"{t},{h}"
    act = 2 * t * h
    rep = RK_HEADS // g
    kv_bytes = 2 * t * g * RK_HD
    expand = [
        _vec("Expand", kv_bytes * (1 + rep), f"1,{g},1,{t},{RK_HD}", f"1,{g},{rep},{t},{RK_HD}"),
        _vec("Expand", kv_bytes * (1 + rep), f"1,{g},1,{t},{RK_HD}", f"1,{g},{rep},{t},{RK_HD}"),
    ]
    reduce = [
        _vec("ReduceSum", kv_bytes * (1 + rep), f"1,{g},{rep},{t},{RK_HD}", f"1,{g},{t},{RK_HD}"),
        _vec("ReduceSum", kv_bytes * (1 + rep), f"1,{g},{rep},{t},{RK_HD}", f"1,{g},{t},{RK_HD}"),
    ]
    fwd: list[Item] = [
        _vec("RmsNorm", 2 * act, sh, sh),
        _mm("qkv", t, h, h + 2 * g * RK_HD),
        *(expand if expanded else []),
        *_rk_ring(kvh, False),
        _mm("attn_out", t, h, h),
        _vec("Add", 3 * act, f"{sh};{sh}", sh),
        _vec("RmsNorm", 2 * act, sh, sh),
        _mm("mlp_up", t, h, 2 * f),
        _vec("SwiGlu", 2 * t * 3 * f, f"{t},{2 * f}", f"{t},{f}"),
        _mm("mlp_down", t, f, h),
        _vec("Add", 3 * act, f"{sh};{sh}", sh),
    ]
    prog: list[Item] = []
    for _ in range(LAYERS):
        prog += fwd
    for li in range(LAYERS):
        prog += [
            _mm("mlp_down_dx", t, h, f),
            _mm("mlp_down_dw", h, t, f),
            _vec("SwiGluGrad", 1.6 * 2 * t * 3 * f, f"{t},{f}", f"{t},{2 * f}"),
            _mm("mlp_up_dx", t, 2 * f, h),
            _mm("mlp_up_dw", 2 * f, t, h),
            _vec("RmsNormGrad", 3 * act, f"{sh};{sh}", sh),
            _mm("attn_out_dx", t, h, h),
            _mm("attn_out_dw", h, t, h),
            *_rk_ring(kvh, True),
            *(reduce if expanded else []),
            _mm("qkv_dx", t, h + 2 * g * RK_HD, h),
            _mm("qkv_dw", h + 2 * g * RK_HD, t, h),
            _vec("RmsNormGrad", 3 * act, f"{sh};{sh}", sh),
            Collective(
                "hcom_allReduce_", "world", RK_GRAD_MIB, overlap=0 if li == LAYERS - 1 else 4
            ),
        ]
    return prog + _tail(h)


def rk_kinds(ranks: int) -> dict[str, GroupKind]:
    """World (gradients over DP x CP) and the rings (8 consecutive ranks, one server).

    A ring rank exchanges K / V with its successor only: one HCCS link per rank (plus the local copy).
    """
    rings = _node_groups(ranks)
    world = make_group_kind("world", "default_group", [list(range(ranks))], ranks, BASE_COMM_US, 0)
    ring = make_group_kind("cp", "cp", rings, ranks, BASE_COMM_US, 3)
    ring.peer[:] = -1
    ring.transport[:] = -1
    ring.frac[:] = 0.0
    for mem in rings:
        n = len(mem)
        for i, r in enumerate(mem):
            ring.peer[r, 0], ring.transport[r, 0], ring.frac[r, 0] = r, 2, 0.1 / n
            if n > 1:
                ring.peer[r, 1], ring.transport[r, 1], ring.frac[r, 1] = mem[(i + 1) % n], 0, 1.0
    return {"world": world, "cp": ring}


def rk_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        context_parallel_size=RK_CP,
        context_parallel_algo="megatron_cp_algo",
        cp_comm_type="p2p",
        cp_attention_mask_type="causal",
        data_parallel_size=ranks // RK_CP,
        seq_length=RK_SEQ,
        num_attention_heads=RK_HEADS,
        group_query_attention=True,
        num_query_groups=RK_GROUPS,
        kv_channels=RK_HD,
        hidden_size=RK_H,
        ffn_hidden_size=RK_FFN,
        micro_batch_size=1,
        num_layers=LAYERS,
    )
    return {"": Plan(rk_program(), rk_kinds(ranks), default_perturb(ranks), info)}


def _rk_ops(cl: Cluster, grad: bool) -> tuple[list[float], list[float], list[float]]:
    """(p2p µs, MB each rank sends, the block attention µs beside it) of the forward / backward ring."""
    p2p: list[float] = []
    mb: list[float] = []
    fa: list[float] = []
    want = "FlashAttentionScoreGrad" if grad else "FlashAttentionScore"
    ks = cl.kernels
    # the kernel right after each ring transfer runs beside it
    beside: list[int] = []
    kj = 0
    for it in cl.program:
        if isinstance(it, Kernel):
            kj += 1
        elif it.tag == RK_TAG:
            beside.append(kj)
    ci_ring = [ci for ci, it in enumerate(c for c in cl.program if isinstance(c, Collective))
               if it.tag == RK_TAG]  # fmt: skip
    for st in cl.steps:
        for ci, j in zip(ci_ring, beside, strict=True):
            if ks[j].op_type != want:
                continue
            op = st.ops[ci]
            p2p.extend(((op.end - op.start) / 1000).tolist())
            mb.extend(np.where(op.kind.transport == 0, op.link_mb, 0.0).sum(axis=1).tolist())
            fa.extend((st.k_dur[:, j] / 1000).tolist())
    return p2p, mb, fa


def rk_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 4x the K / V bytes per ring step; the transfers outlast the attention blocks."""
    cl: Cluster = m[""]["cluster"]
    p2p_f, mb_f, fa_f = _rk_ops(cl, grad=False)
    p2p_b, mb_b, fa_b = _rk_ops(cl, grad=True)
    fixed = _resimulate(dataclasses.replace(cl, perturb=default_perturb(ranks)), rk_program(False))
    fp2p_f, fmb_f, _x = _rk_ops(fixed, grad=False)
    fp2p_b, fmb_b, _y = _rk_ops(fixed, grad=True)
    base = _sim_breakdown(fixed)
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    comp = col(m, "computing_us")
    a, b, save = _saving(step, base["step_us"])
    n_ring = sum(1 for it in cl.program if isinstance(it, Collective) and it.tag == RK_TAG)
    ks = cl.kernels
    nums = {
        "cp_size": RK_CP,
        "seq_len": RK_SEQ,
        "tokens_per_rank": RK_CHUNK,
        "query_heads": RK_HEADS,
        "kv_groups": RK_GROUPS,
        "kv_heads_moved": RK_HEADS,
        "kv_expansion_factor": RK_HEADS // RK_GROUPS,
        "ring_transfers_per_step": n_ring,
        "expand_per_step": sum(1 for k in ks if k.op_type == "Expand"),
        "reducesum_per_step": sum(1 for k in ks if k.op_type == "ReduceSum"),
        "ring_kv_mb_forward": _med(mb_f),
        "ring_kv_mb_backward": _med(mb_b),
        "ring_kv_mb_forward_needed": _med(fmb_f),
        "ring_kv_mb_backward_needed": _med(fmb_b),
        "ring_transfer_us_forward": _med(p2p_f),
        "ring_transfer_us_backward": _med(p2p_b),
        "ring_transfer_us_forward_needed": _med(fp2p_f),
        "ring_transfer_us_backward_needed": _med(fp2p_b),
        "block_attention_us_forward": _med(fa_f),
        "block_attention_us_backward": _med(fa_b),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_comm_not_overlapped_us_per_step_fixed": _med(
            base["comm_not_overlapped_us"].mean(axis=1)
        ),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_fixed": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "median_comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "kv_expansion_factor": nums["kv_expansion_factor"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        rings=_node_groups(ranks),
        p2p_op="hcom_batchSendRecv_",
        group="cp",
        transport="HCCS",
        kv_shape_moved=f"1,{RK_HEADS},{RK_CHUNK},{RK_HD}",
        kv_shape_needed=f"1,{RK_GROUPS},{RK_CHUNK},{RK_HD}",
        expand_op="Expand",
        reduce_op="ReduceSum",
        file="communication.json (p2p section: every hcom_batchSendRecv_ of the cp group moves "
        "~134 MB forward / ~268 MB backward over the one HCCS link to the ring neighbour, 4x the "
        "8-group K / V of one 8192-token chunk, and lasts ~8.7 / ~17 ms), kernel_details.csv "
        "(FlashAttentionScore K / V inputs 1,32,8192,128 like Q; an Expand of K and of V before "
        "every ring and a ReduceSum of dK / dV after every backward ring; the attention blocks "
        "~3.7 / ~8 ms), profiler_metadata.json (num_query_groups 8, num_attention_heads 32, "
        "context_parallel_size 8) and step_trace_time.csv (Communication(Not Overlapped) on every "
        "rank alike)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        bandwidth_normal=True,
        kernels_normal=True,
        same_every_step=True,
        cause="ring attention hooked in after the model's repeat_kv: K and V go around the ring "
        f"expanded from {RK_GROUPS} KV groups to all {RK_HEADS} query heads, so every ring step "
        f"sends {RK_HEADS // RK_GROUPS}x the bytes over the single HCCS link to the neighbour; "
        "the transfer no longer hides behind the block's attention and the difference is exposed "
        "communication on every rank",
        fix="pass K / V around the ring with their 8 KV groups (apply the ring attention before "
        "repeat_kv, or drop repeat_kv: FlashAttention / npu_fusion_attention and ring attention "
        "take GQA natively), 4x fewer bytes per ring step; the Expand / ReduceSum go away too",
    )


# ---------------------------------------------------------------- npu-monitor-poll-node
MP_NODE = 1
MP_PERIOD_US = 250000.0  # the agent's polling interval (wall clock)
MP_CARD_US = 12000.0  # one card's query: the agent moves to the next card after it
MP_HOLD_US = 10000.0  # how long a query holds the card's driver channel
MP_HOLD_JITTER = 0.06
MP_PHASE_US = 23_000.0  # the first sweep's start after the capture's start


def _mp_ranks(ranks: int) -> list[int]:
    node = min(MP_NODE, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def _mp_windows(ranks: int, seed: int, t0: int, t_end: int) -> list[tuple[int, int, int]]:
    """(rank, start ns, end ns) of every query of the agent, in time order, up to ``t_end``."""
    rng = np.random.default_rng(seed + 3403)
    bad = _mp_ranks(ranks)
    out: list[tuple[int, int, int]] = []
    t = t0 + int(MP_PHASE_US * 1000)
    while t < t_end:
        for d, r in enumerate(bad):
            a = t + int(d * MP_CARD_US * 1000)
            hold = MP_HOLD_US * (1 + MP_HOLD_JITTER * float(np.clip(rng.standard_normal(), -2, 2)))
            out.append((r, a, a + int(hold * 1000)))
        t += int(MP_PERIOD_US * 1000)
    return [w for w in out if w[1] < t_end]


def _mp_eligible(prog: list[Item]) -> set[int]:
    """Kernel indices whose launch can block alone.

    Not the first kernel, not one right after a collective, nor the first kernel after an
    overlapped one (its launch would span the collective's).
    """
    skip = {0}
    kj = 0
    for it in prog:
        if isinstance(it, Kernel):
            kj += 1
        else:
            skip.update({kj, kj + it.overlap})
    return {j for j in range(len(_kernels(prog))) if j not in skip}


def _mp_sim(prog: list[Item], kinds: Any, p: Perturb, ranks: int, steps: int, seed: int) -> Cluster:
    from advisor_chat.synth import FIRST_STEP

    return simulate(prog, kinds, p, ranks, steps, seed, FIRST_STEP, T0_NS)


def _mp_apply(
    prog: list[Item], kinds: Any, p: Perturb, ranks: int, steps: int, seed: int
) -> tuple[Perturb, list[tuple[int, int, int, int, int]]]:
    """Block the first launch of a node-1 rank inside each query window until the window ends.

    The launch (a kernel's, ``step_kernel_stalls``) is laid out from the previous launch to just
    before its kernel, which starts when the window ends (plus the call); windows are applied in time
    order, re-simulating after each (a block only moves later events).

    Returns:
        The perturbation and the blocked launches: (rank, step index, kernel index, window start,
        window end).
    """
    ok = _mp_eligible(prog)
    stalls: dict[int, dict[int, dict[int, float]]] = {}
    p.step_kernel_stalls = stalls
    cl = _mp_sim(prog, kinds, p, ranks, steps, seed)
    windows = _mp_windows(ranks, seed, cl.steps[0].start, cl.steps[-1].end)
    done: list[tuple[int, int, int, int, int]] = []
    for r, a, b in windows:
        if a >= cl.steps[-1].end:
            break
        hit: tuple[int, int] | None = None
        for si, st in enumerate(cl.steps):
            if st.end < a:
                continue
            cand = [
                (int(st.k_api_start[r, j]), j)
                for j in range(st.k_start.shape[1])
                if j in ok and int(st.k_api_start[r, j]) >= a
            ]
            if cand:
                t_api, j = min(cand)
                # no collective launched between the window's start and that launch
                between = any(a <= int(op.api_start[r]) < t_api for op in st.ops)
                if t_api < b and not between:
                    hit = (si, j)
                break
        if hit is None:
            continue
        si, j = hit
        st = cl.steps[si]
        need = b + int(st.k_api_dur[r, j]) + 8_000 - int(st.k_start[r, j])
        if need <= 0:
            continue
        at = stalls.setdefault(si, {}).setdefault(r, {})
        at[j] = round(at.get(j, 0.0) + need / 1000, 3)
        done.append((r, si, j, a, b))
        cl = _mp_sim(prog, kinds, p, ranks, steps, seed)
    return p, done


def mp_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=LAYERS)
    kinds = group_kinds(ranks, 1)
    p, _done = _mp_apply(prog, kinds, default_perturb(ranks), ranks, steps, seed)
    info = dataclasses.replace(_info(CANN8, 1, ranks), gc_detect_threshold_ms=1.0)
    return {"": Plan(prog, kinds, p, info)}


def mp_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1's launch calls blocked card after card every ~250 ms; node 0 waits."""
    cl: Cluster = m[""]["cluster"]
    bad = _mp_ranks(ranks)
    good = [r for r in range(ranks) if r not in bad]
    ev = cl.perturb.step_kernel_stalls
    held = sorted(
        (int(cl.steps[si].k_api_start[r, j]), r, si, j)
        for si, per in ev.items()
        for r, at in per.items()
        for j in at
    )
    ends = [(a + int(cl.steps[si].k_api_dur[r, j]), r) for a, r, si, j in held]
    long_us = [float(cl.steps[si].k_api_dur[r, j]) / 1000 for _a, r, si, j in held]
    held_set = {(si, r, j) for _a, r, si, j in held}
    normal = {
        g: [
            float(st.k_api_dur[r, j]) / 1000
            for si, st in enumerate(cl.steps)
            for r in rs
            for j in range(st.k_start.shape[1])
            if (si, r, j) not in held_set
        ]
        for g, rs in (("bad", bad), ("good", good))
    }
    idle = []
    for _a, r, si, j in held:
        st = cl.steps[si]
        prev = int(st.k_start[r, j - 1] + st.k_dur[r, j - 1])
        idle.append(max(int(st.k_start[r, j]) - prev, 0) / 1000)
    # sweeps: runs of blocked calls in card order; the spacing of consecutive cards in one sweep and
    # of the sweeps' first cards
    sweeps: list[list[tuple[int, int]]] = []
    for e, r in sorted(ends):
        if sweeps and r > sweeps[-1][-1][1] and e - sweeps[-1][-1][0] < MP_PERIOD_US * 500:
            sweeps[-1].append((e, r))
        else:
            sweeps.append([(e, r)])
    card_gap = [
        (s[i + 1][0] - s[i][0]) / (s[i + 1][1] - s[i][1]) / 1000
        for s in sweeps
        for i in range(len(s) - 1)
    ]
    firsts = [s[0][0] - (s[0][1] - bad[0]) * MP_CARD_US * 1000 for s in sweeps]
    period = [(firsts[i + 1] - firsts[i]) / 1000 for i in range(len(firsts) - 1)]
    free = col(m, "free_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    base = _baseline(cl)
    a, b, _save = _saving(step, base["step_us"])
    steps_hit = sorted({cl.steps[si].step_id for _a, _r, si, _j in held})
    nums: dict[str, Any] = {
        "culprit_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "polling_interval_us": MP_PERIOD_US,
        "sweep_period_us_median": _med(period) if period else None,
        "card_spacing_us_median": _med(card_gap) if card_gap else None,
        "sweeps_captured": len(sweeps),
        "blocked_launches": len(held),
        "blocked_launches_per_culprit_rank": round(len(held) / len(bad), 2),
        "blocked_launch_us_median": _med(long_us),
        "blocked_launch_us_max": _r(max(long_us)),
        "launch_us_median_culprit_others": _med(normal["bad"]),
        "launch_us_median_node0": _med(normal["good"]),
        "device_idle_per_blocked_launch_us_median": _med(idle),
        "blocked_kernel_types": sorted({cl.kernels[j].op_type for _a, _r, _s, j in held}),
        "steps_hit": steps_hit,
        "culprit_free_us_per_step": _r(float(free[bad].mean())),
        "others_free_us_per_step": _r(float(free[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "median_step_us": _r(a),
        "median_step_us_no_agent": _r(b),
        "mean_step_us": _r(float(step.mean())),
        "mean_step_us_no_agent": _r(float(base["step_us"].mean())),
        "saving_us_per_step": _r(float(step.mean() - base["step_us"].mean())),
        "saving_share_of_step": round(float(1 - base["step_us"].mean() / step.mean()), 4),
        "gc_events": 0,
    }
    key = _key(bad, "scheduling", ["host-dispatch-bound"], "free_us", nums)
    # node 0 waits for whichever card of node 1 is blocked; node 1's other cards wait too, but less
    # (never for their own block)
    vic = [r for r in good if float(wait[r].mean()) > float(wait[bad].mean())]
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
            "culprit_wait_us_per_step": nums["culprit_wait_us_per_step"],
            "blocked_launch_us_median": nums["blocked_launch_us_median"],
            "sweep_period_us_median": nums["sweep_period_us_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    node = bad[0] // RANKS_PER_NODE
    return _with_evidence(
        key,
        rc,
        culprit_node=node,
        culprit_ranks=bad,
        first_rank=bad[0],
        last_rank=bad[-1],
        lane="trace_view.json of ranks 8-15, CANN thread: one AscendCL@aclnn* launch call of "
        "up to ~10 ms per card and sweep (the others ~11 us), card after card (rank 8, 9, ... 15) "
        "~12 ms apart, the sweep repeating every ~250 ms of wall clock whatever the step is doing; the "
        "device (Ascend Hardware lane) idles behind each",
        file="trace_view.json of ranks 8-15 (the long launch calls in card order, periodic; no GC "
        "events although GC detection is on in profiler_info), step_trace_time.csv (Free of ranks "
        "8-15 in the steps a sweep falls in) and communication.json of ranks 0-7 (Wait Time in the "
        "gradient hcom_allReduce_)",
        periodic=True,
        card_order=True,
        step_aligned=False,
        same_operator=False,
        kernels_normal=True,
        links_normal=True,
        other_launch_calls_normal=True,
        gc=False,
        cause=f"a monitoring agent on node {node} (a new version rolled out there only) polls its "
        "8 NPUs through the driver one after the other every ~250 ms; each query holds the card's "
        "driver channel ~10 ms and the training process' kernel launch on that card blocks until it "
        "is released: the host's ~1.8 ms lead runs out, the device idles ~7 ms, and ranks "
        f"{bad[0]}-{bad[-1]} reach the next gradient all-reduce late, one card after the other, "
        "while node 0 waits",
        fix=f"stop or roll back the monitoring agent on node {node} (or lengthen its polling "
        "interval / move it off the device driver: the same agent version and settings as node "
        "0); check the node's daemons (npu-smi / DCMI exporters, health checks) against the "
        "sweep period",
    )


# ---------------------------------------------------------------- roce-incast-alltoall
IC_EXPERTS = 64
IC_TOPK = 2
IC_H = 2048
IC_T = 4096  # tokens per rank and micro-batch
IC_FFN = 2816  # expert FFN hidden size
IC_ROWS = IC_T * IC_TOPK  # token rows dispatched per rank (balanced)
IC_A2A_MIB = IC_ROWS * IC_H * 2 / MIB
IC_GRAD_MIB = 32.0  # attention / router gradients of a layer
IC_FACTOR = (0.28, 0.42)  # incast: the all-to-alls' RDMA bandwidth / the link's, per op position
IC_TAGS = ("dispatch", "combine", "combine_grad", "dispatch_grad")


def _ic_gmm(tag: str, k: int, n: int, local: int) -> Kernel:
    dur = round(2 * IC_ROWS * k * n / MM_FLOPS * 1e6 + 8, 1)
    return _k(
        "aclnnGroupedMatmulV4_GroupedMatmul_GroupedMatmul",
        "GroupedMatmul",
        "AI_CORE",
        f"{IC_ROWS},{k};{local},{k},{n};{local}",
        f"{IC_ROWS},{n}",
        dur,
        "aclnnGroupedMatmulV4",
        tag,
    )


def ic_program(ep: int, factors: list[float] | None) -> list[Item]:
    """4 MoE layers (attention + 64 routed experts, ``ep``-way expert parallel, token all-to-alls).

    ``factors``: the RDMA bandwidth factor of each all-to-all in program order (None = 1.0).
    """
    t, h, f = IC_T, IC_H, IC_FFN
    local = IC_EXPERTS // ep
    sh = f"{t},{h}"
    rows = f"{IC_ROWS},{h}"
    act = 2 * t * h
    rb = 2 * IC_ROWS * h
    bsh = f"1,{t},{h}"
    fa_flops = 2 * t * t * h  # causal, 16 heads x 128
    attn_f: list[Item] = [
        _vec("RmsNorm", 2 * act, sh, sh),
        _mm("qkv", t, h, 3 * h),
        _fa(bsh, bsh, fa_flops, False, MASK),
        _mm("attn_out", t, h, h),
        _vec("Add", 3 * act, f"{sh};{sh}", sh),
        _vec("RmsNorm", 2 * act, sh, sh),
        _mm("router", t, h, IC_EXPERTS),
        _vec("MoeGatingTopKSoftmax", 4 * t * IC_EXPERTS, f"{t},{IC_EXPERTS}", f"{t},{IC_TOPK}"),
        _vec("MoeTokenPermute", act + rb, f"{sh};{t},{IC_TOPK}", rows),
    ]
    swi = 2 * IC_ROWS * 3 * f
    experts_f: list[Item] = [
        _ic_gmm("expert_up", h, 2 * f, local),
        _vec("SwiGlu", swi, f"{IC_ROWS},{2 * f}", f"{IC_ROWS},{f}"),
        _ic_gmm("expert_down", f, h, local),
    ]
    experts_b: list[Item] = [
        _ic_gmm("expert_down_dx", h, f, local),
        _ic_gmm("expert_down_dw", f, h, local),
        _vec("SwiGluGrad", 1.6 * swi, f"{IC_ROWS},{f}", f"{IC_ROWS},{2 * f}"),
        _ic_gmm("expert_up_dx", 2 * f, h, local),
        _ic_gmm("expert_up_dw", 2 * f, h, local),
    ]
    attn_b: list[Item] = [
        _vec("RmsNormGrad", 3 * act, f"{sh};{sh}", sh),
        _mm("router_dx", t, IC_EXPERTS, h),
        _vec("RmsNormGrad", 3 * act, f"{sh};{sh}", sh),
        _mm("attn_out_dx", t, h, h),
        _mm("attn_out_dw", h, t, h),
        _fa(bsh, bsh, fa_flops, True, MASK),
        _mm("qkv_dx", t, 3 * h, h),
        _mm("qkv_dw", 3 * h, t, h),
        _vec("RmsNormGrad", 3 * act, f"{sh};{sh}", sh),
    ]
    fs = iter(factors or [])

    def a2a(tag: str) -> Collective:
        return Collective("hcom_alltoallv_", "ep", IC_A2A_MIB, tag=tag, rdma_factor=next(fs, 1.0))

    prog: list[Item] = []
    for _ in range(LAYERS):
        prog += [*attn_f, a2a("dispatch"), *experts_f, a2a("combine")]
        prog.append(
            _vec("MoeTokenUnpermute", act + rb, f"{rows};{IC_ROWS};{t},{IC_TOPK}", sh),
        )
        prog.append(_vec("Add", 3 * act, f"{sh};{sh}", sh))
    for li in range(LAYERS):
        prog.append(_vec("MoeTokenUnpermuteGrad", act + rb, f"{sh};{rows};{IC_ROWS}", rows))
        prog.append(a2a("combine_grad"))
        prog += experts_b
        prog.append(a2a("dispatch_grad"))
        prog.append(_vec("MoeTokenPermuteGrad", act + rb, f"{rows};{IC_ROWS}", sh))
        prog += attn_b
        last = li == LAYERS - 1
        prog.append(Collective("hcom_allReduce_", "world", IC_GRAD_MIB, overlap=0 if last else 4))
    return prog + _tail(h)


def ic_kinds(ranks: int) -> dict[str, GroupKind]:
    """World (gradients, ring links) and the ep group (every rank): all-to-all link shares.

    In a token all-to-all each rank sends 1/n of its rows to every member: the members on its own
    server over HCCS (1/n per link), the ones on the other servers through its RoCE port (their
    share together on its one RDMA link).
    """
    kinds = group_kinds(ranks, 1)
    ep = make_group_kind("ep", "ep", [list(range(ranks))], ranks, BASE_COMM_US, 4)
    n = ranks
    for r in range(ranks):
        remote = sum(1 for q in range(ranks) if q // RANKS_PER_NODE != r // RANKS_PER_NODE)
        for j in range(ep.peer.shape[1]):
            tr = int(ep.transport[r, j])
            if tr in (0, 2):
                ep.frac[r, j] = 1.0 / n
            elif tr == 1:
                ep.frac[r, j] = remote / n
    kinds["ep"] = ep
    return kinds


def _ic_factors(seed: int) -> list[float]:
    rng = np.random.default_rng(seed + 3404)
    n = 4 * LAYERS
    return [round(float(x), 3) for x in rng.uniform(*IC_FACTOR, size=n)]


def ic_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        expert_model_parallel_size=ranks,
        num_experts=IC_EXPERTS,
        moe_router_topk=IC_TOPK,
        moe_token_dispatcher_type="alltoall",
        moe_grouped_gemm=True,
        hidden_size=IC_H,
        moe_ffn_hidden_size=IC_FFN,
        seq_length=IC_T,
        num_layers=LAYERS,
    )
    prog = ic_program(ranks, _ic_factors(seed))
    return {"": Plan(prog, ic_kinds(ranks), default_perturb(ranks), info)}


def ic_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the all-to-alls' RDMA transfers at ~1/3 of the all-reduces' on the same links."""
    cl: Cluster = m[""]["cluster"]
    is_a2a = lambda c: c.op_type == "hcom_alltoallv_"  # noqa: E731
    is_ar = lambda c: c.op_type == "hcom_allReduce_" and c.size_mb >= IC_GRAD_MIB  # noqa: E731
    a2a_rdma = _link_bw(cl, is_a2a, 1)
    a2a_hccs = _link_bw(cl, is_a2a, 0)
    ar_rdma = _link_bw(cl, is_ar, 1)
    healthy = _resimulate(
        dataclasses.replace(cl, perturb=default_perturb(ranks)), ic_program(ranks, None)
    )
    base = _sim_breakdown(healthy)
    a2a_us = [float(np.median((op.end - op.start) / 1000)) for st in cl.steps for op in st.ops
              if is_a2a(op.item)]  # fmt: skip
    a2a_us_h = [float(np.median((op.end - op.start) / 1000)) for st in healthy.steps
                for op in st.ops if is_a2a(op.item)]  # fmt: skip
    a2a_step = _op_us(cl, is_a2a)
    a2a_step_h = _op_us(healthy, is_a2a)
    rdma_mb = _transit_mb(cl, is_a2a, list(range(ranks)))
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    comp = col(m, "computing_us")
    a, b, save = _saving(step, base["step_us"])
    n_a2a = sum(1 for it in cl.program if isinstance(it, Collective) and is_a2a(it))
    rdma_per_op = []
    for st in cl.steps:
        for op in st.ops:
            if is_a2a(op.item):
                rdma_per_op.extend(np.where(op.kind.transport == 1, op.link_mb, 0.0).sum(axis=1))
    nums = {
        "ep_size": ranks,
        "servers": ranks // RANKS_PER_NODE,
        "num_experts": IC_EXPERTS,
        "experts_per_rank": IC_EXPERTS // ranks,
        "alltoall_per_step": n_a2a,
        "alltoall_mb_per_rank": round(IC_A2A_MIB * MIB / 1e6, 3),
        "alltoall_rdma_mb_per_rank": _med(rdma_per_op),
        "alltoall_transit_mb_per_rank": _med(rdma_mb),
        "alltoall_rdma_bandwidth_gbps": round(float(np.median(a2a_rdma)), 3),
        "allreduce_rdma_bandwidth_gbps": round(float(np.median(ar_rdma)), 3),
        "alltoall_hccs_bandwidth_gbps": round(float(np.median(a2a_hccs)), 3),
        "rdma_bandwidth_ratio_alltoall_vs_allreduce": round(
            float(np.median(a2a_rdma) / np.median(ar_rdma)), 3
        ),
        "alltoall_us_median": _med(a2a_us),
        "alltoall_us_median_healthy": _med(a2a_us_h),
        "alltoall_us_per_step": _med(a2a_step.mean(axis=0)),
        "alltoall_us_per_step_healthy": _med(a2a_step_h.mean(axis=0)),
        "alltoall_share_of_step": _share(a2a_step, step),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_healthy_fabric": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
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
            "alltoall_rdma_bandwidth_gbps": nums["alltoall_rdma_bandwidth_gbps"],
            "allreduce_rdma_bandwidth_gbps": nums["allreduce_rdma_bandwidth_gbps"],
            "alltoall_share_of_step": nums["alltoall_share_of_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        transport="RDMA",
        slow_op="hcom_alltoallv_",
        normal_op="hcom_allReduce_",
        group="ep",
        servers=ranks // RANKS_PER_NODE,
        alltoall_rdma_bandwidth_gbps=round(float(np.median(a2a_rdma)), 1),
        allreduce_rdma_bandwidth_gbps=round(float(np.median(ar_rdma)), 1),
        file="communication_matrix.json (the same rank pairs' RDMA links: ~4 GB/s in the "
        "alltoall entries of the ep group, ~12 GB/s in the allreduce entries of the default group; "
        "HCCS normal in both), communication.json (hcom_alltoallv_: RDMA Transit Time ~3x what "
        "its Transit Size needs at the link's rate, on every rank and op alike) and "
        "step_trace_time.csv (Communication(Not Overlapped) on every rank alike)",
        all_links=True,
        all_ranks=True,
        all_steps=True,
        late_rank=False,
        hccs_normal=True,
        allreduce_normal=True,
        cause="the RoCE fabric runs without working congestion control (ECN / DCQCN off, PFC "
        "only): in every token all-to-all all 16 cards send to the other server's ports at once, "
        "the many-to-one incast fills the switch buffers and ends in PFC pause storms, so the "
        "all-to-alls' RDMA transfers get ~1/3 of the link rate, while the ring all-reduces (one "
        "sender per port) reach the full rate over the same links",
        fix="enable and tune congestion control for the RoCE traffic class (ECN marking / WRED "
        "on the switches, DCQCN on the NICs; with the network team); meanwhile keep expert "
        "parallelism inside a server (EP 8, experts replicated across the two) or use a "
        "hierarchical all-to-all so fewer senders hit each remote port",
    )


# ---------------------------------------------------------------- registry
DEV34_SCENARIOS = (
    ScenarioSpec(
        "ulysses-uneven-heads",
        "20-head model, Ulysses SP 8 (one server) x DP 2 at 32K tokens: the heads do not divide by "
        "8, SP ranks 0-3 get 3 heads, 4-7 get 2 (uneven all-to-all): FlashAttention 1.5x as long on "
        "ranks 0-3 and 8-11, the others wait in the hcom_alltoallv_ after every attention",
        16,
        4,
        uh_plans,
        uh_answer,
        min_ranks=8,
        rank_multiple=UH_SP,
    ),
    ScenarioSpec(
        "ring-attn-kv-expanded",
        "ring attention CP 8 (one server) at 64K tokens for a GQA model (32 heads, 8 KV groups) "
        "hooked in after repeat_kv: K / V passed around the ring at all 32 heads (4x the bytes, "
        "Expand / ReduceSum), every hcom_batchSendRecv_ outlasts its attention block; exposed on "
        "every rank alike; job-level, links normal",
        16,
        4,
        rk_plans,
        rk_answer,
        min_ranks=8,
        rank_multiple=RK_CP,
    ),
    ScenarioSpec(
        "npu-monitor-poll-node",
        "a monitoring agent on node 1 polls its 8 NPUs through the driver one after the other "
        "every ~250 ms: one ~10 ms aclnn launch call per card and sweep on ranks 8-15, in card order "
        "~12 ms apart, device idle behind it; node 0 waits; kernels, links, other launches normal",
        16,
        8,
        mp_plans,
        mp_answer,
        min_ranks=16,
        rank_multiple=RANKS_PER_NODE,
    ),
    ScenarioSpec(
        "roce-incast-alltoall",
        "64-expert MoE, EP 16 over two servers, RoCE without congestion control: every token "
        "hcom_alltoallv_ runs its RDMA part at ~1/3 of the link rate (incast), the gradient "
        "all-reduces at the full rate over the same links; every rank alike; job-level",
        16,
        4,
        ic_plans,
        ic_answer,
        min_ranks=16,
        max_ranks=64,
        rank_multiple=16,
    ),
)
DEV34_KINDS = tuple(s.name for s in DEV34_SCENARIOS)


__all__ = ["DEV34_KINDS", "DEV34_SCENARIOS"]
