"""Twenty-sixth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev28.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the tensor-parallel ``hcom_allGather_`` /
``hcom_reduceScatter_`` rows of kernel_details.csv / communication.json next to every MatMulV2 with
the Communication(Not Overlapped) of step_trace_time.csv; the ``p2p`` section of
communication.json (dozens of tiny hcom_send_ / hcom_receive_ per step, the node-crossing pairs'
over RDMA); the durations of the same-shape MatMulV2 rows of kernel_details.csv in the steps with
and without the gradient all-reduce beside them; and the router burst of tiny operators with the
device idle between them in kernel_details.csv / trace_view.json):

- ``mc2-off-tp-sp``: TP 4 with sequence parallel (hidden 8192, 4096 tokens), ``--use-ascend-mc2``
  off: in every layer the sequence-parallel all-gather before the QKV / MLP-up MatMuls and the
  reduce-scatter after the attention-output / MLP-down MatMuls (and their mirrors in the backward)
  run as separate hcom_allGather_ / hcom_reduceScatter_ on the tp group, each between two MatMuls
  with nothing to overlap it: 8 per layer, on every rank alike. Job-level, links normal.
- ``pp-p2p-unbatched``: PP 4 x DP 4 on two nodes (stages 0-1 on node 0, 2-3 on node 1); a custom
  pipeline schedule sends each micro-batch's activation tuple tensor by tensor, every tensor after
  its shape metadata (12 hcom_send_ / hcom_receive_ per forward hand-off, 2 per backward one)
  instead of one batched exchange: every op pays its fixed cost, ~80 µs over RDMA across the node
  boundary (stage 1 -> 2, ranks 4-7 <-> 8-11) and ~30 µs over HCCS. Culprit: the node-crossing
  stage boundary (ranks 4-11); ranks 0-3 and 12-15 wait for it in their receives; bandwidth
  normal.
- ``overlap-contention-sync-steps``: gradient accumulation 4 with ``prof.step()`` per micro-batch
  and DDP ``no_sync()`` on the first 3: only every 4th profiled step (11, 15) runs the bucketed
  gradient all-reduce (with the optimizer) beside the backward. ``HCCL_OP_EXPANSION_MODE=AIV`` makes
  those all-reduces run on the AI Vector cores, so the MatMulV2 / vector kernels running beside one
  take ~1.35x / ~1.6x as long as the same shapes in the other steps, on every rank alike; the
  all-reduce itself stays hidden. Culprit: those steps (a job-level cause scoped to them).
- ``moe-router-unfused``: an 8-expert top-2 MoE whose router is written in plain PyTorch: softmax,
  top-k, normalisation, one-hot, cumsum, scatter ... ~14 tiny kernels (2-6 µs) per MoE layer forward
  and ~10 backward instead of the fused MoeGatingTopKSoftmax / MoeInitRouting operators; the host
  needs ~40 µs per launch, so in every router burst the device idles between kernels (Free), on
  every rank alike. Job-level.
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
    default_perturb,
    make_group_kind,
)
from advisor_chat.synth.scenarios import (
    BASE_COMM_US,
    CANN8,
    HCCL_ENV_KEY,
    Plan,
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
from advisor_chat.synth.scenarios_dev19 import _kernel_us, _med, _saving
from advisor_chat.synth.scenarios_dev23 import _host_bound_idle, _idle_between_us
from advisor_chat.synth.scenarios_ext import (
    not_slow_sample,
    root_cause,
    step_ids,
)

LAYERS = 4


def _op_us(cl: Cluster, pick: Any) -> np.ndarray:
    """[ranks, steps] summed duration (µs) of the collectives ``pick(collective)`` accepts."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if pick(op.item):
                out[:, si] += (op.end - op.start) / 1000
    return out


def _kernels(prog: list[Item]) -> list[Kernel]:
    return [it for it in prog if isinstance(it, Kernel)]


def _dist(info: Any, **kw: Any) -> None:
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(kw)
    info.user_metadata["distributed_args"] = dist


# ---------------------------------------------------------------- mc2-off-tp-sp
MC_TP = 4
MC_H = 8192
MC_S = 4096
MC_FFN = 28672
MC_KV = 1024  # GQA: 8 kv heads x 128
MC_MB = 64.0  # the gathered [4096, 8192] bf16 activation (decimal MB, rounded)
MC_TAGS = ("sp_ag", "sp_rs")


def _mc_mm(tag: str, m: int, k: int, n: int, dur: float) -> Kernel:
    return matmul(tag, m, k, n, dur)


def _mc_layer_fwd() -> list[tuple[str, Kernel]]:
    """(role, kernel) of one layer's forward at TP 4: role 'ag' = an all-gather before, 'rs' after."""
    s, h, t = MC_S, MC_H, MC_TP
    sl = s // t  # sequence-parallel shard
    qkv_n = (h + 2 * MC_KV) // t
    return [
        ("", vec("rmsnorm", "RmsNorm", 45.0, f"{sl},{h}")),
        ("ag", _mc_mm("qkv", s, h, qkv_n, 1750.0)),
        (
            "",
            _k(
                "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
                "FlashAttentionScore",
                "MIX_AIC",
                f"1,{s},{h // t};1,{s},{MC_KV // t};1,{s},{MC_KV // t}",
                f"1,{s},{h // t}",
                2300.0,
                "aclnnFlashAttentionScore",
                "fa",
            ),
        ),
        ("rs", _mc_mm("attn_out", s, h // t, h, 1400.0)),
        ("", vec("add", "Add", 35.0, f"{sl},{h}")),
        ("", vec("rmsnorm", "RmsNorm", 45.0, f"{sl},{h}")),
        ("ag", _mc_mm("mlp_up", s, h, 2 * MC_FFN // t, 9600.0)),
        ("", vec("swiglu", "SwiGlu", 380.0, f"{s},{2 * MC_FFN // t}")),
        ("rs", _mc_mm("mlp_down", s, MC_FFN // t, h, 4800.0)),
        ("", vec("add", "Add", 35.0, f"{sl},{h}")),
    ]


def _mc_layer_bwd() -> list[tuple[str, Kernel]]:
    s, h, t = MC_S, MC_H, MC_TP
    sl = s // t
    qkv_n = (h + 2 * MC_KV) // t
    f = MC_FFN // t
    return [
        ("ag", _mc_mm("mlp_down_dx", s, h, f, 4800.0)),
        ("", _mc_mm("mlp_down_dw", h, s, f, 4900.0)),
        ("", vec("swiglu_grad", "SwiGluGrad", 560.0, f"{s},{2 * f}")),
        ("rs", _mc_mm("mlp_up_dx", s, 2 * f, h, 9600.0)),
        ("", _mc_mm("mlp_up_dw", 2 * f, s, h, 9800.0)),
        ("", vec("rmsnorm_grad", "RmsNormGrad", 70.0, f"{sl},{h}")),
        ("ag", _mc_mm("attn_out_dx", s, h, h // t, 1400.0)),
        ("", _mc_mm("attn_out_dw", h, s, h // t, 1450.0)),
        (
            "",
            _k(
                "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
                "FlashAttentionScoreGrad",
                "MIX_AIC",
                f"1,{s},{h // t};1,{s},{MC_KV // t};1,{s},{MC_KV // t};1,{s},{h // t}",
                f"1,{s},{h // t}",
                4800.0,
                "aclnnFlashAttentionScoreGrad",
                "fa_grad",
            ),
        ),
        ("rs", _mc_mm("qkv_dx", s, qkv_n, h, 1750.0)),
        ("", _mc_mm("qkv_dw", qkv_n, s, h, 1800.0)),
        ("", vec("rmsnorm_grad", "RmsNormGrad", 70.0, f"{sl},{h}")),
    ]


def _mc2_fused(k: Kernel, role: str, comm_us: float) -> Kernel:
    """The MC2 operator of a MatMul and its collective (AllGatherMatmul / MatmulReduceScatter).

    It pipelines the transfer with the MatMul tile by tile: about the longer of the two, plus a
    little.
    """
    op = "AllGatherMatmul" if role == "ag" else "MatmulReduceScatter"
    return dataclasses.replace(
        k,
        name=f"aclnn{op}_{op}_{op}",
        op_type=op,
        core="MIX_AIC",
        dur_us=round(max(k.dur_us, comm_us) * 1.06 + 40.0, 1),
        api=f"aclnn{op}",
        tag=k.tag + "_mc2",
    )


def mc_program(mc2_comm_us: float | None = None) -> list[Item]:
    """LAYERS x (forward, backward) at TP 4 with SP; ``mc2_comm_us``: fused (MC2) with that cost."""
    prog: list[Item] = []

    def emit(role: str, k: Kernel) -> None:
        if mc2_comm_us is not None and role:
            prog.append(_mc2_fused(k, role, mc2_comm_us))
        elif role == "ag":
            prog.extend([Collective("hcom_allGather_", "tp", MC_MB, tag=MC_TAGS[0]), k])
        elif role == "rs":
            prog.extend([k, Collective("hcom_reduceScatter_", "tp", MC_MB, tag=MC_TAGS[1])])
        else:
            prog.append(k)

    for _ in range(LAYERS):
        for role, k in _mc_layer_fwd():
            emit(role, k)
    for li in range(LAYERS):
        for role, k in _mc_layer_bwd():
            emit(role, k)
        ov = 6 if li < LAYERS - 1 else 0
        prog.append(Collective("hcom_allReduce_", "dp", 32.0, overlap=ov, tag="dp_grad"))
    tail = transformer(layers=1)
    opt = next(
        j
        for j, it in enumerate(tail)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    prog += tail[opt:]
    return prog


def mc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    tp = MC_TP
    info = _info(CANN8, tp, ranks)
    _dist(
        info,
        sequence_parallel=True,
        use_ascend_mc2=False,
        hidden_size=MC_H,
        ffn_hidden_size=MC_FFN,
        seq_length=MC_S,
        num_query_groups=MC_KV // 128,
        group_query_attention=True,
        micro_batch_size=1,
    )
    return {"": Plan(mc_program(), group_kinds(ranks, tp), default_perturb(ranks), info, tp=tp)}


def mc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 8 unfused TP all-gathers / reduce-scatters per layer, exposed on every rank."""
    cl: Cluster = m[""]["cluster"]
    ag = _op_us(cl, lambda c: c.tag == MC_TAGS[0])
    rs = _op_us(cl, lambda c: c.tag == MC_TAGS[1])
    per_op = [
        float(np.median((op.end - op.start) / 1000))
        for st in cl.steps
        for op in st.ops
        if op.item.tag in MC_TAGS
    ]
    comm_us = float(np.median(per_op))
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    comp = col(m, "computing_us")
    mm = _kernel_us(cl, lambda k: k.op_type == "MatMulV2")
    base = _baseline(cl, mc_program(mc2_comm_us=comm_us))
    a, b, save = _saving(step, base["step_us"])
    n_ag = sum(1 for it in cl.program if isinstance(it, Collective) and it.tag == MC_TAGS[0])
    n_rs = sum(1 for it in cl.program if isinstance(it, Collective) and it.tag == MC_TAGS[1])
    nums = {
        "tp_size": MC_TP,
        "sequence_parallel": True,
        "tp_allgathers_per_step": n_ag,
        "tp_reducescatters_per_step": n_rs,
        "tp_collectives_per_layer": (n_ag + n_rs) // LAYERS,
        "tp_collective_mb": MC_MB,
        "tp_collective_us_median": _r(comm_us),
        "tp_comm_us_per_step": _med((ag + rs).mean(axis=0)),
        "tp_comm_share_of_step": _share(ag + rs, step),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "matmul_us_per_step": _med(mm.mean(axis=0)),
        "median_step_us": _r(a),
        "median_step_us_mc2": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        [],
        "communication",
        ["mc2-tp-fusion", "comm-not-overlapped"],
        "comm_not_overlapped_us",
        nums,
    )
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "tp_comm_us_per_step": nums["tp_comm_us_per_step"],
            "median_comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        collectives=["hcom_allGather_", "hcom_reduceScatter_"],
        group="tp (4 ranks inside a node)",
        tp_size=MC_TP,
        per_layer=(n_ag + n_rs) // LAYERS,
        payload_mb=MC_MB,
        position="an all-gather right before the QKV / MLP-up MatMulV2 (and the backward "
        "attention-output / MLP-down dX), a reduce-scatter right after the attention-output / "
        "MLP-down MatMulV2 (and the backward QKV / MLP-up dX), nothing overlapping them",
        fused_operators_absent=["AllGatherMatmul", "MatmulReduceScatter"],
        file="kernel_details.csv / trace_view.json (every MatMulV2 of a tp linear layer next to an "
        "hcom_allGather_ or hcom_reduceScatter_ of the tp group, nothing running beside it), "
        "communication.json (tp group: 64 per step, HCCS), step_trace_time.csv "
        "(Communication(Not Overlapped)); profiler_metadata.json: sequence_parallel true, "
        "use_ascend_mc2 false",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause="tensor parallel 4 with sequence parallel runs without MC2 (--use-ascend-mc2 off): "
        "in every layer the all-gather of the sequence-parallel activation before the column-"
        "parallel MatMuls and the reduce-scatter after the row-parallel MatMuls (and their mirrors "
        "in the backward) are separate HCCL collectives between the MatMuls, 8 per layer, with "
        "nothing to overlap them, on every rank alike",
        fix="enable MC2 (MindSpeed --use-ascend-mc2, with sequence parallel and TP > 1; or "
        "torch_npu.npu_all_gather_base_mm / npu_mm_reduce_scatter_base in a custom model) so each "
        "all-gather / reduce-scatter is fused with its MatMul (AllGatherMatmul / "
        "MatmulReduceScatter) and pipelined with it; keep TP inside the node",
    )


# ---------------------------------------------------------------- pp-p2p-unbatched
PU_STAGES = 4
PU_MICRO = 4
PU_SCALE = 0.25
PU_HCCS_US = 15.0  # fixed cost per link of one p2p op inside the node (x2: the op's two phases)
PU_RDMA_US = 60.0  # ... across the nodes (RoCE)
# the forward hand-off: each tensor of the activation tuple after its shape metadata
PU_FWD_TENSORS = (
    ("hidden_states", 16.0),
    ("attention_mask", 4.0),
    ("position_ids", 0.016),
    ("rotary_cos", 1.0),
    ("rotary_sin", 1.0),
    ("loss_mask", 0.008),
)
PU_META_MB = 0.0001
PU_BWD_TENSORS = (("hidden_states_grad", 16.0),)


def _pu_stage_ranks(ranks: int, s: int) -> list[int]:
    n = ranks // PU_STAGES
    return list(range(s * n, (s + 1) * n))


def pu_kinds(ranks: int) -> dict[str, GroupKind]:
    """The dp group = one stage; pp01 = pairs of stages 0-1 and 2-3 (inside a node); pp12 = stages 1-2."""
    n = ranks // PU_STAGES
    st = [_pu_stage_ranks(ranks, s) for s in range(PU_STAGES)]
    kinds = group_kinds(ranks, 1)
    kinds["dp"] = make_group_kind("dp", "dp", st, ranks, BASE_COMM_US, 2)
    pairs01 = [[st[0][i], st[1][i]] for i in range(n)] + [[st[2][i], st[3][i]] for i in range(n)]
    kinds["pp01"] = make_group_kind("pp01", "pp", pairs01, ranks, BASE_COMM_US, 3)
    pairs12 = [[st[1][i], st[2][i]] for i in range(n)]
    single = [[r] for r in st[0] + st[3]]
    kinds["pp12"] = make_group_kind("pp12", "pp", pairs12 + single, ranks, BASE_COMM_US, 4)
    return kinds


def _pu_handoff(group: str, fwd: bool, batched: bool) -> list[Item]:
    """The p2p ops of one hand-off on one boundary (local 0 = the earlier stage)."""
    us = PU_RDMA_US if group == "pp12" else PU_HCCS_US
    send, recv = ("hcom_send_", "hcom_receive_") if fwd else ("hcom_receive_", "hcom_send_")
    tensors = PU_FWD_TENSORS if fwd else PU_BWD_TENSORS
    tag = f"{group}_{'act' if fwd else 'grad'}"
    if batched:
        mb = round(sum(x for _, x in tensors), 4)
        return [Collective(send, group, mb, peer_op=recv, tag=tag, chunks=2, chunk_us=us)]
    out: list[Item] = []
    for _, mb in tensors:
        out.append(
            Collective(send, group, PU_META_MB, peer_op=recv, tag=tag, chunks=2, chunk_us=us)
        )
        out.append(Collective(send, group, mb, peer_op=recv, tag=tag, chunks=2, chunk_us=us))
    return out


def pu_program(batched: bool = False) -> list[Item]:
    """1F1B-like step of one stage of a 4-stage pipeline (every stage runs the same program)."""
    base = transformer(layers=2, scale=PU_SCALE, grad=False)
    ks = _kernels(base)
    first_bwd = next(j for j, k in enumerate(ks) if k.tag == "mlp_down_dx")
    opt = next(j for j, k in enumerate(ks) if k.op_type == "ForeachMulScalar")
    fwd, bwd, tail = ks[:first_bwd], ks[first_bwd:opt], ks[opt:]
    prog: list[Item] = []
    for _ in range(PU_MICRO):
        prog += fwd
        prog += _pu_handoff("pp01", True, batched)
        prog += _pu_handoff("pp12", True, batched)
        prog += bwd
        prog += _pu_handoff("pp12", False, batched)
        prog += _pu_handoff("pp01", False, batched)
    prog.append(Collective("hcom_allReduce_", "dp", 48.0, tag="dp_grad"))
    prog.append(Collective("hcom_allReduce_", "world", 0.004, tag="grad_norm"))
    prog += tail
    return prog


def _pu_outer(ranks: int) -> list[int]:
    return _pu_stage_ranks(ranks, 0) + _pu_stage_ranks(ranks, PU_STAGES - 1)


def _pu_bad(ranks: int) -> list[int]:
    return _pu_stage_ranks(ranks, 1) + _pu_stage_ranks(ranks, 2)


def pu_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    for r in _pu_outer(ranks):
        p.hidden_groups[r] = {"pp12"}  # stages 0 and 3 are not on the node-crossing boundary
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        pipeline_model_parallel_size=PU_STAGES,
        data_parallel_size=ranks // PU_STAGES,
        num_micro_batches=PU_MICRO,
        batch_p2p_comm=False,
        variable_seq_lengths=False,
    )
    return {"": Plan(pu_program(), pu_kinds(ranks), p, info)}


def _p2p_stats(cl: Cluster, ranks: list[int], group: str) -> tuple[list[float], list[float]]:
    """(op durations µs, Notify/sync wait µs) of the p2p ops of ``group`` on ``ranks``."""
    d: list[float] = []
    w: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if op.item.peer_op and op.kind.kind == group:
                for r in ranks:
                    d.append(float(op.end[r] - op.start[r]) / 1000)
                    w.append(float(op.sync_ns[r]) / 1000)
    return d, w


def _p2p_wait_us(cl: Cluster) -> np.ndarray:
    """[ranks, steps] synchronization wait (µs) in the written p2p ops."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    hid = cl.perturb.hidden_groups
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if not op.item.peer_op:
                continue
            w = op.sync_ns / 1e3
            for r in range(cl.ranks):
                if op.kind.kind not in hid.get(r, set()):
                    out[r, si] += w[r]
    return out


def pu_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 14 p2p ops per micro-batch and boundary; the node-crossing ones cost the most."""
    cl: Cluster = m[""]["cluster"]
    bad = _pu_bad(ranks)
    outer = _pu_outer(ranks)
    step = col(m, "step_us")
    bub = col(m, "bubble_us")
    p2p12 = _op_us(cl, lambda c: bool(c.peer_op) and c.group == "pp12")
    p2p01 = _op_us(cl, lambda c: bool(c.peer_op) and c.group == "pp01")
    d12, _ = _p2p_stats(cl, bad, "pp12")
    d01, _ = _p2p_stats(cl, outer, "pp01")
    small12 = [x for x, it in zip(d12, _cycle_sizes(cl, "pp12", len(bad)), strict=True) if it < 0.1]
    small01 = [
        x for x, it in zip(d01, _cycle_sizes(cl, "pp01", len(outer)), strict=True) if it < 0.1
    ]
    pw = _p2p_wait_us(cl)
    n12 = sum(
        1 for it in cl.program if isinstance(it, Collective) and it.peer_op and it.group == "pp12"
    )
    n01 = sum(
        1 for it in cl.program if isinstance(it, Collective) and it.peer_op and it.group == "pp01"
    )
    healthy = dataclasses.replace(cl, perturb=cl.perturb)
    base = _sim_breakdown(_resimulate(healthy, pu_program(batched=True)))
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "pipeline_stages": PU_STAGES,
        "micro_batches": PU_MICRO,
        "culprit_ranks": bad,
        "p2p_ops_per_step_node_boundary": n12,
        "p2p_ops_per_step_per_boundary": n12,
        "p2p_ops_per_forward_handoff": 2 * len(PU_FWD_TENSORS),
        "p2p_ops_per_backward_handoff": 2 * len(PU_BWD_TENSORS),
        "p2p_ops_per_micro_batch_and_boundary": 2 * (len(PU_FWD_TENSORS) + len(PU_BWD_TENSORS)),
        "small_p2p_us_median_rdma": _r(float(np.median(small12))),
        "small_p2p_us_median_hccs": _r(float(np.median(small01))),
        "node_boundary_p2p_us_per_step": _med(p2p12[bad].mean(axis=0)),
        "in_node_boundary_p2p_us_per_step": _med(p2p01[outer].mean(axis=0)),
        "outer_stage_p2p_wait_us_per_step": _r(float(pw[outer].mean())),
        "culprit_p2p_wait_us_per_step": _r(float(pw[bad].mean())),
        "median_bubble_us_per_step": _med(bub.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_batched": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    del n01
    key = _key(
        bad, "communication", ["small-packet-transfers", "pipeline-bubbles"], "bubble_us", nums
    )
    rc = root_cause(
        "slow_group",
        "communication",
        "group",
        ranks=bad,
        victims=outer,
        not_slow=not_slow_sample(ranks, bad, outer),
        metrics={
            "node_boundary_p2p_us_per_step": nums["node_boundary_p2p_us_per_step"],
            "small_p2p_us_median_rdma": nums["small_p2p_us_median_rdma"],
            "outer_stage_p2p_wait_us_per_step": nums["outer_stage_p2p_wait_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    st1, st2 = _pu_stage_ranks(ranks, 1), _pu_stage_ranks(ranks, 2)
    return _with_evidence(
        key,
        rc,
        culprit_ranks=bad,
        first_rank=bad[0],
        last_rank=bad[-1],
        boundary_stages=[1, 2],
        boundary_pairs=[[x, y] for x, y in zip(st1, st2, strict=True)],
        transport="RDMA",
        p2p_ops=["hcom_send_", "hcom_receive_"],
        per_micro_batch=2 * (len(PU_FWD_TENSORS) + len(PU_BWD_TENSORS)),
        tensors=[t for t, _ in PU_FWD_TENSORS],
        file="communication.json (p2p section: 56 hcom_send_ / hcom_receive_ per step and "
        "boundary, half of them ~100-byte shape messages, each ~80 µs over RDMA between ranks "
        "4-7 and 8-11 and ~30 µs over HCCS inside a node, bandwidth of the large ones normal) and "
        "step_trace_time.csv (Bubble: ranks 0-3 and 12-15 wait in their receives); "
        "profiler_metadata.json: pipeline_model_parallel_size 4, batch_p2p_comm false",
        bandwidth_normal=True,
        devices_normal=True,
        host_normal=True,
        every_step=True,
        cause="the pipeline schedule sends each micro-batch's activation tuple tensor by tensor, "
        "each tensor after a separate shape message (12 send / receive per forward hand-off, 2 per "
        "backward one) instead of one batched exchange; every op pays its fixed handshake cost, "
        "~80 µs over RoCE on the node-crossing boundary between stage 1 (ranks 4-7) and stage 2 "
        "(ranks 8-11), so those ranks spend the most time in p2p and stages 0 and 3 wait for them",
        fix="batch the hand-off: one batch_isend_irecv per hand-off (Megatron/MindSpeed "
        "--batch-p2p-comm / overlap-p2p-comm), send only the hidden states (recompute masks and "
        "position ids on each stage) and fixed shapes (--variable-seq-lengths off: no shape "
        "messages); place the stage boundary so fewer hand-offs cross nodes",
    )


def _cycle_sizes(cl: Cluster, group: str, n: int) -> list[float]:
    """Payload (MB) of every p2p op of ``group``, in the order _p2p_stats lists them."""
    out: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if op.item.peer_op and op.kind.kind == group:
                out.extend([op.item.size_mb] * n)
    return out


# ---------------------------------------------------------------- overlap-contention-sync-steps
OC_ACCUM = 4  # gradient accumulation steps; prof.step() every micro-batch
OC_CUBE = 1.35  # MatMulV2 / FlashAttention beside an AIV-expanded all-reduce
OC_VEC = 1.6  # vector kernels beside it
OC_GRAD_MB = 80.0
OC_OVERLAP = 5


def oc_program() -> list[Item]:
    """transformer() with a 192 MB bucketed gradient all-reduce beside the next layer's backward."""
    return transformer(layers=LAYERS, grad_mb=OC_GRAD_MB, grad_overlap=OC_OVERLAP)


def _oc_sync_steps(steps: int) -> list[int]:
    """Step indices where the accumulation boundary falls (step id + 1 a multiple of 4)."""
    from advisor_chat.synth import FIRST_STEP

    on = [si for si in range(steps) if (FIRST_STEP + si + 1) % OC_ACCUM == 0]
    return on or [steps - 1]


def _oc_beside(prog: list[Item]) -> dict[int, int]:
    """{kernel index: collective index} of the kernels that run beside a gradient all-reduce."""
    out: dict[int, int] = {}
    kj = 0
    ci = 0
    left = 0
    cur = -1
    for it in prog:
        if isinstance(it, Kernel):
            if left > 0:
                out[kj] = cur
                left -= 1
            kj += 1
        else:
            if it.overlap > 0:
                left, cur = it.overlap, ci
            ci += 1
    return out


def _oc_only_sync(prog: list[Item]) -> tuple[set[int], set[int]]:
    """(collective indices, kernel indices) run only on the accumulation boundary."""
    colls = {ci for ci, it in enumerate(c for c in prog if isinstance(c, Collective))}
    ks = _kernels(prog)
    opt = next(j for j, k in enumerate(ks) if k.op_type == "ForeachMulScalar")
    return colls, set(range(opt, len(ks)))


def _oc_slow(k: Kernel) -> Kernel:
    f = OC_VEC if k.core == "AI_VECTOR_CORE" else OC_CUBE
    return dataclasses.replace(k, dur_us=round(k.dur_us * f, 1))


def oc_plans(ranks: int, steps: int, seed: int, contention: bool = True) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    prog = oc_program()
    ks = _kernels(prog)
    colls, opt = _oc_only_sync(prog)
    on = set(_oc_sync_steps(steps))
    beside = _oc_beside(prog)
    for si in range(steps):
        if si not in on:
            p.step_skip_colls[si] = set(colls)
            p.step_skip_kernels[si] = {r: set(opt) for r in range(ranks)}
        elif contention:
            for j in beside:
                slow = _oc_slow(ks[j])
                for r in range(ranks):
                    p.kernel_swap[(si, r, j)] = slow
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        gradient_accumulation_steps=OC_ACCUM,
        micro_batch_size=1,
        ddp_bucket_size_mb=OC_GRAD_MB,
    )
    assert info.user_metadata is not None
    hccl = dict(info.user_metadata[HCCL_ENV_KEY])
    hccl["HCCL_OP_EXPANSION_MODE"] = "AIV"
    info.user_metadata[HCCL_ENV_KEY] = hccl
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def oc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: in the sync steps the kernels beside the all-reduce run slower on every rank."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    on = _oc_sync_steps(steps)
    off = [si for si in range(steps) if si not in on]
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    notov = col(m, "comm_not_overlapped_us")
    beside = sorted(_oc_beside(cl.program))
    ks = cl.kernels
    mm_idx = [j for j in beside if ks[j].op_type == "MatMulV2"]
    # the same MatMul shapes: beside the all-reduce (sync steps) vs the same positions elsewhere
    dur = np.stack([st.k_dur / 1000 for st in cl.steps], axis=2)  # [ranks, K, steps]
    mm_on = dur[:, mm_idx][:, :, on]
    mm_off = dur[:, mm_idx][:, :, off]
    ratio = float(np.median(mm_on) / np.median(mm_off))
    ar = _op_us(
        cl, lambda c: c.tag == "" and c.op_type == "hcom_allReduce_" and c.size_mb == OC_GRAD_MB
    )
    p_clean = oc_plans(ranks, steps, cl.seed, contention=False)[""]
    clean = _sim_breakdown(
        _resimulate(dataclasses.replace(cl, perturb=p_clean.perturb), cl.program)
    )
    extra = np.median(step, axis=0) - np.median(clean["step_us"], axis=0)
    mean_a = float(np.median(step.mean(axis=1)))
    mean_b = float(np.median(clean["step_us"].mean(axis=1)))
    slowed = (
        dur[:, beside][:, :, on]
        - dur[:, beside][:, :, on]
        / np.array([OC_VEC if ks[j].core == "AI_VECTOR_CORE" else OC_CUBE for j in beside])[
            None, :, None
        ]
    ).sum(axis=1)
    nums = {
        "accumulation_steps": OC_ACCUM,
        "sync_steps": [ids[si] for si in on],
        "first_sync_step": ids[on[0]],
        "last_sync_step": ids[on[-1]],
        "no_sync_steps": [ids[si] for si in off],
        "grad_allreduce_mb": OC_GRAD_MB,
        "grad_allreduces_per_sync_step": sum(
            1 for it in cl.program if isinstance(it, Collective) and it.size_mb == OC_GRAD_MB
        ),
        "grad_allreduce_us_per_sync_step": _med(ar[:, on].mean(axis=0)),
        "kernels_beside_allreduce_per_sync_step": len(beside),
        "matmul_slowdown_beside_allreduce": round(ratio, 3),
        "matmul_us_beside_median": _med(mm_on),
        "matmul_us_same_shapes_other_steps_median": _med(mm_off),
        "slowdown_us_per_sync_step": _med(slowed.mean(axis=0)),
        "comm_not_overlapped_us_sync_steps_median": _med(notov[:, on]),
        "computing_us_sync_steps_median": _med(comp[:, on]),
        "computing_us_other_steps_median": _med(comp[:, off]),
        "step_us_sync_steps_median": _med(step[:, on]),
        "step_us_other_steps_median": _med(step[:, off]),
        "extra_us_per_sync_step": _med(extra[on]),
        "median_step_us": _r(float(np.median(step))),
        "mean_step_us": _r(mean_a),
        "mean_step_us_no_contention": _r(mean_b),
        "saving_us_per_sync_step": _med(extra[on]),
        "saving_us_per_step_average": _r(mean_a - mean_b),
    }
    key = _key([], "compute", ["comm-not-overlapped", "hccl-config-mismatch"], "computing_us", nums)
    rc = root_cause(
        "job_hotspot",
        "compute",
        "job",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        steps=[ids[si] for si in on],
        metrics={
            "extra_us_per_sync_step": nums["extra_us_per_sync_step"],
            "matmul_slowdown_beside_allreduce": nums["matmul_slowdown_beside_allreduce"],
            "sync_steps": nums["sync_steps"],
        },
    )
    return _with_evidence(
        key,
        rc,
        sync_steps=[ids[si] for si in on],
        accumulation_steps=OC_ACCUM,
        collective="hcom_allReduce_",
        hccl_env={"HCCL_OP_EXPANSION_MODE": "AIV"},
        operators=["MatMulV2", "SwiGluGrad", "RmsNormGrad"],
        matmul_slowdown=round(ratio, 2),
        file="kernel_details.csv (the same MatMulV2 shapes ~1.35x longer in the sync steps, exactly "
        "those running while an hcom_allReduce_ runs: trace_view.json HCCL lane / communication.json "
        "Start Timestamp + Elapse Time), step_trace_time.csv (Computing up in those steps, "
        "Communication(Not Overlapped) ~0); profiler_metadata.json hccl_env "
        "HCCL_OP_EXPANSION_MODE=AIV, gradient_accumulation_steps 4",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        every_step=False,
        comm_exposed=False,
        cause="every profiled step is one micro-batch (gradient accumulation 4, DDP no_sync on "
        "the first three): only the accumulation-boundary steps run the bucketed gradient "
        "all-reduce beside the backward, and with HCCL_OP_EXPANSION_MODE=AIV the all-reduce runs "
        "on the AI Vector cores, competing with the compute kernels for cores and HBM bandwidth: "
        "the MatMuls beside it take ~1.35x and the vector kernels ~1.6x as long as the same shapes "
        "in the other steps, on every rank alike; the all-reduce itself stays hidden",
        fix="unset HCCL_OP_EXPANSION_MODE=AIV (default expansion: the transfers run on the "
        "SDMA engines, not on the AI Vector cores) for training; then check that the MatMuls "
        "beside the all-reduce run as fast as in the other steps",
    )


# ---------------------------------------------------------------- moe-router-unfused
MR_EXPERTS = 8
MR_TOPK = 2
MR_SCALE = 0.12
MR_HOST_US = 18.0  # the host's time per launch of an ordinary operator
MR_ROUTER_HOST_US = 45.0  # per router operator: Python + aten dispatch of a small op
MR_JITTER = 0.08
MR_TAG = "router"


def _mr_router(fwd: bool) -> list[Kernel]:
    s = 4096
    e = MR_EXPERTS
    if fwd:
        ops = [
            ("Cast", f"{s},{e}", 2.6),
            ("SoftmaxV2", f"{s},{e}", 3.4),
            ("TopKV2", f"{s},{e}", 5.8),
            ("ReduceSum", f"{s},{MR_TOPK}", 2.4),
            ("RealDiv", f"{s},{MR_TOPK}", 2.2),
            ("OneHot", f"{s},{MR_TOPK}", 3.1),
            ("ReduceSum", f"{s},{MR_TOPK},{e}", 2.7),
            ("Cumsum", f"{s},{e}", 4.6),
            ("Mul", f"{s},{e}", 2.1),
            ("ReduceSum", f"{s},{e}", 2.5),
            ("Sort", f"{s * MR_TOPK}", 6.2),
            ("ScatterElements", f"{s * MR_TOPK}", 4.9),
            ("GatherV2", f"{s * MR_TOPK},{H_MR}", 5.4),
            ("Mean", f"{s},{e}", 2.3),
            # the load-balancing auxiliary loss and the router z-loss
            ("ReduceMean", f"{s},{e}", 2.4),
            ("Mul", f"{e}", 1.8),
            ("ReduceSum", f"{e}", 1.9),
            ("ReduceLogSumExp", f"{s},{e}", 3.9),
            ("Pow", f"{s}", 1.9),
            ("ReduceMean", f"{s}", 2.0),
        ]
    else:
        ops = [
            ("Mul", f"{s},{MR_TOPK}", 2.2),
            ("RealDiv", f"{s},{MR_TOPK}", 2.3),
            ("ScatterElements", f"{s * MR_TOPK}", 5.0),
            ("GatherV2", f"{s * MR_TOPK}", 3.9),
            ("ZerosLike", f"{s},{e}", 1.9),
            ("ScatterElements", f"{s},{e}", 4.4),
            ("SoftmaxGrad", f"{s},{e}", 3.6),
            ("Cast", f"{s},{e}", 2.5),
            ("Add", f"{s},{e}", 2.0),
            ("ReduceSum", f"{s},{e}", 2.6),
            ("Mul", f"{s}", 1.8),
            ("LogSumExpGrad", f"{s},{e}", 3.5),
        ]
    out = []
    for op, shape, dur in ops:
        k = vec(MR_TAG, op, dur, shape)
        out.append(dataclasses.replace(k, tag=MR_TAG, block_dim=8))
    return out


H_MR = 4096


def _mr_fused(fwd: bool) -> list[Kernel]:
    s = 4096
    if fwd:
        return [
            _k(
                "aclnnMoeGatingTopKSoftmax_MoeGatingTopKSoftmax_MoeGatingTopKSoftmax",
                "MoeGatingTopKSoftmax",
                "AI_VECTOR_CORE",
                f"{s},{MR_EXPERTS}",
                f"{s},{MR_TOPK};{s},{MR_TOPK};{s},{MR_TOPK}",
                9.5,
                "aclnnMoeGatingTopKSoftmax",
                MR_TAG + "_fused",
                bd=40,
            ),
            _k(
                "aclnnMoeInitRouting_MoeInitRouting_MoeInitRouting",
                "MoeInitRouting",
                "AI_VECTOR_CORE",
                f"{s},{H_MR};{s},{MR_TOPK};{s},{MR_TOPK}",
                f"{s * MR_TOPK},{H_MR};{s * MR_TOPK};{s * MR_TOPK}",
                16.0,
                "aclnnMoeInitRouting",
                MR_TAG + "_fused",
                bd=40,
            ),
        ]
    return [
        _k(
            "aclnnMoeGatingTopKSoftmaxGrad_MoeGatingTopKSoftmaxGrad_MoeGatingTopKSoftmaxGrad",
            "MoeGatingTopKSoftmaxGrad",
            "AI_VECTOR_CORE",
            f"{s},{MR_TOPK};{s},{MR_EXPERTS}",
            f"{s},{MR_EXPERTS}",
            8.0,
            "aclnnMoeGatingTopKSoftmaxGrad",
            MR_TAG + "_fused",
            bd=40,
        )
    ]


def mr_program(fused: bool = False) -> list[Item]:
    """transformer() at a small scale with an MoE router before every MLP (forward and backward)."""
    base = transformer(layers=LAYERS, scale=MR_SCALE, grad_mb=24.0, grad_overlap=3)
    gate = matmul("router_gate", 4096, H_MR, MR_EXPERTS, 6.0)
    gate_dx = matmul("router_gate_dx", 4096, MR_EXPERTS, H_MR, 6.5)
    out: list[Item] = []
    for it in base:
        if isinstance(it, Kernel) and it.tag == "mlp_up":
            out.append(gate)
            out.extend(_mr_fused(True) if fused else _mr_router(True))
        out.append(it)
        if isinstance(it, Kernel) and it.tag == "mlp_up_dw":
            out.extend(_mr_fused(False) if fused else _mr_router(False))
            out.append(gate_dx)
    return out


def _mr_perturb(prog: list[Item], ranks: int, seed: int) -> Any:
    """The host's launch queue: ~18 µs per ordinary operator, ~42 µs per router operator."""
    ks = _kernels(prog)
    durs = [k.dur_us for k in ks]
    p = default_perturb(ranks)
    p.host_bound[:] = True
    rng = np.random.default_rng(seed + 2804)
    base_host = np.array(
        [MR_ROUTER_HOST_US if k.tag == MR_TAG else MR_HOST_US for k in ks], dtype=float
    )
    for r in range(ranks):
        f = 1.0 + MR_JITTER * np.clip(rng.standard_normal(len(ks)), -2, 2)
        idle = _host_bound_idle(durs, base_host * f)
        p.kernel_stalls[r] = {j: v for j, v in enumerate(idle) if v > 0}
    return p


def mr_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = mr_program()
    p = _mr_perturb(prog, ranks, seed)
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        num_experts=MR_EXPERTS,
        moe_router_topk=MR_TOPK,
        moe_grouped_gemm=False,
        moe_token_dispatcher_type="allgather",
        moe_router_load_balancing_type="aux_loss",
    )
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def mr_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the router's tiny kernels; the device idles between them on every rank."""
    cl: Cluster = m[""]["cluster"]
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    router = [j for j, k in enumerate(cl.kernels) if k.tag == MR_TAG]
    rset = set(router)
    r_us = _kernel_us(cl, lambda k: k.tag == MR_TAG)
    idle_all = _idle_between_us(cl)
    # the idle right before the router kernels (beyond the normal gap)
    idle_r = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for j in router:
            prev = st.k_start[:, j - 1] + st.k_dur[:, j - 1]
            idle_r[:, si] += np.clip((st.k_start[:, j] - prev) / 1000 - 14.0, 0, None)
    kd = np.array([k.dur_us for k in cl.kernels])
    fused_prog = mr_program(fused=True)
    # the fused run is launched by the same host (same queue model): no long bursts of tiny kernels
    fused = dataclasses.replace(cl, perturb=_mr_perturb(fused_prog, ranks, cl.seed))
    fcl = _resimulate(fused, fused_prog)
    base = _sim_breakdown(fcl)
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "num_experts": MR_EXPERTS,
        "router_topk": MR_TOPK,
        "moe_layers": LAYERS,
        "router_kernels_per_step": len(router),
        "router_kernels_per_layer_forward": len(_mr_router(True)),
        "router_kernels_per_layer_backward": len(_mr_router(False)),
        "router_kernel_us_median": _r(float(np.median(kd[router]))),
        "router_device_us_per_step": _med(r_us.mean(axis=0)),
        "idle_before_router_kernels_us_per_step": _med(idle_r.mean(axis=0)),
        "device_idle_between_kernels_us_per_step": _med(idle_all.mean(axis=0)),
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_fused_router": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    del rset
    key = _key([], "scheduling", ["tiny-kernels-fusion", "host-dispatch-bound"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "median_free_share": nums["median_free_share"],
            "router_kernels_per_step": nums["router_kernels_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operators=sorted({cl.kernels[j].op_type for j in router}),
        router_kernels_per_layer=len(_mr_router(True)) + len(_mr_router(False)),
        position="between the router gate MatMulV2 [4096,4096]x[8,4096] and the MLP of every MoE "
        "layer (forward), after the MLP weight gradient (backward)",
        fused_operators=["MoeGatingTopKSoftmax", "MoeInitRouting"],
        file="kernel_details.csv (per MoE layer a burst of ~14 / ~10 tiny SoftmaxV2, TopKV2, "
        "OneHot, Cumsum, ScatterElements, Sort ... rows of 2-6 µs on [4096,8] shapes with ~30 µs "
        "Wait before each), trace_view.json (each launch right before its kernel), op_statistic.csv "
        "(counts), step_trace_time.csv (Free on every rank)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        kernels_normal=True,
        cause=f"the MoE router ({MR_EXPERTS} experts, top-{MR_TOPK}) is written in plain PyTorch: "
        "softmax, top-k, normalisation, one-hot, cumsum, sort, scatter ... each a separate tiny "
        "kernel (2-6 µs) on [4096,8] tensors, ~24 per MoE layer and step; the host needs ~40 µs to "
        "launch each, so in every router burst the device idles between kernels, on every rank "
        "alike",
        fix="use the fused router operators (torch_npu.npu_moe_gating_top_k_softmax / "
        "npu_moe_init_routing; MindSpeed --moe-permutation-async-comm / fused routing options, "
        "moe_grouped_gemm) so the routing is 1-2 kernels per layer; keep the host ahead (e.g. "
        "TASK_QUEUE_ENABLE=2, CPU binding) as a second step",
    )


# ---------------------------------------------------------------- registry
DEV28_SCENARIOS = (
    ScenarioSpec(
        "mc2-off-tp-sp",
        "TP 4 + sequence parallel without MC2: 8 hcom_allGather_ / hcom_reduceScatter_ per layer "
        "on the tp group between the MatMuls, nothing overlapping them, every rank alike; "
        "job-level, links normal",
        16,
        4,
        mc_plans,
        mc_answer,
        min_ranks=8,
        rank_multiple=4,
    ),
    ScenarioSpec(
        "pp-p2p-unbatched",
        "PP 4 x DP 4 on two nodes: activation tuples sent tensor by tensor with shape messages "
        "(14 hcom_send_ / hcom_receive_ per micro-batch and boundary), ~80 µs each over RDMA on "
        "the node-crossing boundary (ranks 4-7 <-> 8-11); stages 0 and 3 wait",
        16,
        4,
        pu_plans,
        pu_answer,
        min_ranks=16,
        max_ranks=16,
        rank_multiple=16,
    ),
    ScenarioSpec(
        "overlap-contention-sync-steps",
        "gradient accumulation 4, prof.step() per micro-batch: only steps 11 and 15 run the "
        "gradient all-reduce beside the backward; HCCL_OP_EXPANSION_MODE=AIV: the MatMuls beside "
        "it ~1.35x the same shapes in the other steps, every rank alike; all-reduce hidden",
        16,
        8,
        oc_plans,
        oc_answer,
    ),
    ScenarioSpec(
        "moe-router-unfused",
        "8-expert top-2 MoE router in plain PyTorch: ~24 tiny kernels per MoE layer (softmax, "
        "top-k, one-hot, cumsum, scatter ...), the host cannot keep ahead, the device idles "
        "between them (Free) on every rank alike; job-level",
        16,
        4,
        mr_plans,
        mr_answer,
    ),
)
DEV28_KINDS = tuple(s.name for s in DEV28_SCENARIOS)


__all__ = ["DEV28_KINDS", "DEV28_SCENARIOS"]
