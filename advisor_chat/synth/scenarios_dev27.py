"""Twenty-fifth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``, ``advisor_chat.synth.writer``) with an answer key derived from the
simulated timeline and the breakdown the writer measured (never from typed numbers). Every key
carries ``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the
files). Their question set is ``evals/datasets/generalization_dev27.yaml``: a development set for
finding weaknesses; the held-out kinds of ``generalization.yaml`` stay untouched. The "how much would
fixing it save" numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the absolute timestamps of one node's files
against the collectives' own Wait / Elapse figures of communication.json, the tp-group
``hcom_allReduce_`` records of communication.json with the full-sequence RmsNorm / Add shapes of
kernel_details.csv and profiler_metadata.json, the operator types and counts of op_statistic.csv /
kernel_details.csv, and the per-operator-type durations of one node's kernel_details.csv):

- ``node-clock-offset``: node 1's (ranks 8-15) host clock runs 3.6 ms ahead of node 0's (not
  synchronised): every timestamp of its files (kernels, launches, collectives, step bounds) is
  shifted by that constant, so on a merged timeline its ranks look late in every collective, while
  the collectives' own Wait / Synchronization Time, their Elapse Time, the step breakdown and the
  kernel durations are the same on both nodes. A data artifact: nothing is slow (root cause
  ``no_culprit``); the evidence names the node and the offset.
- ``tp-no-sequence-parallel``: tensor parallelism 8 inside each node without
  ``--sequence-parallel``: after the attention output and the MLP down projection (forward) and
  after the column-parallel input gradients (backward) a full-activation ``hcom_allReduce_``
  ([4096, 4096] bf16, 33.6 MB) in the tp group, 16 a step (the forward ones with nothing to overlap
  them, the backward ones partly under the weight-gradient MatMul), and every RmsNorm / residual Add
  (and their gradients) on the whole sequence on each of the 8 ranks. Job-level (every rank alike),
  links normal. Sequence parallelism moves the same data in all (reduce-scatter + all-gather of the
  shards, half an all-reduce each); its saving is the norms / adds on a 1/8 shard.
- ``swiglu-unfused``: the SwiGLU activation computed with plain torch ops: a ``SplitV``, a ``Swish``
  (SiLU) and a ``Mul`` over the MLP's [4096, 32768] activation in every layer's forward, and
  ``Mul`` / ``SwishGrad`` / ``Mul`` / ``ConcatD`` in its backward, instead of one ``SwiGlu`` /
  ``SwiGluGrad``: each a memory-bound pass over the activation, on every rank alike. Job-level.
- ``hbm-slow-node``: node 1's (ranks 8-15) HBM runs slower (~60% of the bandwidth): its
  memory-bound vector kernels (RmsNorm, Add, SwiGlu, the optimizer's Foreach*) take ~1.65x as long,
  its MatMuls and FlashAttention the normal time, the AI Core clock 1800 MHz everywhere; node 0
  waits for it in every collective. Culprit: node 1 (its devices), links and host normal.
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
    default_perturb,
)
from advisor_chat.synth.scenarios import (
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
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_dev19 import _kernel_us, _med, _saving
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)

LAYERS = 4
HBM_BPS = 1.3e12  # effective HBM bandwidth of a memory-bound vector kernel (bytes/s)
BF16 = 2


def _node_ranks(ranks: int, node: int = 1) -> list[int]:
    node = min(node, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def _mem_us(nbytes: float, fixed: float = 3.0) -> float:
    """Duration (µs) of a memory-bound pass moving ``nbytes`` through HBM."""
    return round(nbytes / HBM_BPS * 1e6 + fixed, 1)


def _op_us(cl: Cluster, pick: Any) -> np.ndarray:
    """[ranks, steps] summed duration (µs) of the collectives ``pick(collective)`` accepts."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if pick(op.item):
                out[:, si] += (op.end - op.start) / 1000
    return out


# ---------------------------------------------------------------- node-clock-offset
CO_NODE = 1
CO_NS = 3_600_000  # node 1's host clock ahead of node 0's (a constant, ns)


def co_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = dataclasses.replace(
        _info(CANN8, 1, ranks),
        clock_offset_ns={r: CO_NS for r in _node_ranks(ranks, CO_NODE)},
    )
    prog = transformer(layers=LAYERS)
    return {"": Plan(prog, group_kinds(ranks, 1), default_perturb(ranks), info)}


def co_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1's timestamps shifted by a constant; its collectives' own figures normal."""
    cl: Cluster = m[""]["cluster"]
    bad = _node_ranks(ranks, CO_NODE)
    good = [r for r in range(ranks) if r not in bad]
    shift = np.zeros(ranks, dtype=np.int64)
    shift[bad] = CO_NS
    late: list[float] = []  # written start of node 1 minus node 0's, per collective (µs)
    end_gap: list[float] = []  # written end of node 1 minus node 0's (µs): the clock offset
    true_late: list[float] = []  # the same on one clock (the simulated arrival), µs
    elapse_b: list[float] = []
    elapse_g: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            s_w = op.start + shift
            e_w = op.end + shift
            late.append(float(np.median(s_w[bad]) - np.median(s_w[good])) / 1000)
            end_gap.append(float(np.median(e_w[bad]) - np.median(e_w[good])) / 1000)
            true_late.append(float(np.median(op.start[bad]) - np.median(op.start[good])) / 1000)
            d = (op.end - op.start) / 1000
            elapse_b.append(float(np.median(d[bad])))
            elapse_g.append(float(np.median(d[good])))
    wait = coll_wait_us(m)
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    free = col(m, "free_us")
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "offset_node": bad[0] // RANKS_PER_NODE,
        "offset_ranks": bad,
        "clock_offset_us": _med(end_gap),
        "clock_offset_ms": _r(float(np.median(end_gap)) / 1000),
        "apparent_late_us_median": _med(late),
        "true_arrival_gap_us_median": _med(true_late),
        "collectives_per_step": len(cl.steps[0].ops),
        "offset_node_wait_us_per_step": _r(float(wait[bad].mean())),
        "other_node_wait_us_per_step": _r(float(wait[good].mean())),
        "offset_node_elapse_us_median": _med(elapse_b),
        "other_node_elapse_us_median": _med(elapse_g),
        "offset_node_computing_us_per_step": _r(float(comp[bad].mean())),
        "other_node_computing_us_per_step": _r(float(comp[good].mean())),
        "offset_node_free_us_per_step": _r(float(free[bad].mean())),
        "other_node_free_us_per_step": _r(float(free[good].mean())),
        "median_step_us": _r(a),
        "median_step_us_synced_clocks": _r(b),
        "saving_us_per_step": _r(save),
    }
    key = _key([], "none", ["profiling-collection-pitfalls"], "start_timestamp_offset_us", nums)
    rc = root_cause(
        "no_culprit",
        "none",
        "none",
        not_slow=not_slow_sample(ranks, [], prefer=bad),
        metrics={
            "clock_offset_us": nums["clock_offset_us"],
            "offset_node_wait_us_per_step": nums["offset_node_wait_us_per_step"],
            "other_node_wait_us_per_step": nums["other_node_wait_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        offset_node=bad[0] // RANKS_PER_NODE,
        offset_ranks=bad,
        first_rank=bad[0],
        last_rank=bad[-1],
        clock_offset_us=nums["clock_offset_us"],
        constant_offset=True,
        file="every absolute timestamp of ranks 8-15 (trace_view.json ts, kernel_details.csv Start "
        "Time, communication.json Start Timestamp, the ProfilerStep / Overlap Analysis bounds) is "
        "3.6 ms later than node 0's for the same collective, start and end alike, in every step; "
        "communication.json of both nodes: Wait / Synchronization Time and Elapse Time the same; "
        "step_trace_time.csv: the same Computing / Free / step time on both nodes",
        collective_wait_normal=True,
        durations_normal=True,
        slow_ranks=[],
        links_normal=True,
        every_step=True,
        cause=f"node {bad[0] // RANKS_PER_NODE}'s host clock is {CO_NS / 1e6:.1f} ms ahead of node "
        "0's (the servers' clocks are not synchronised): the profiler stamps every event of ranks "
        f"{bad[0]}-{bad[-1]} with it, so on a merged timeline they look late in every collective; "
        "the collectives' own wait figures, the durations and the step breakdown show nothing slow "
        "(a data artifact, not a fault)",
        fix="synchronise the servers' clocks (chrony / NTP or PTP against one time source, check "
        "chronyc tracking / timedatectl on every node) before profiling, or align the ranks' "
        "timelines on a collective's end before comparing them; nothing to fix in the training job",
    )


# ---------------------------------------------------------------- tp-no-sequence-parallel
TP = 8
TP_F = 11008  # MLP hidden size (SwiGLU), a Llama-7B-like layer
TP_HEADS = 32
TP_ACT_MB = round(S * H * BF16 / 1e6, 3)  # one full activation [4096, 4096] bf16
TP_TFLOPS = 250e12  # effective cube throughput of a MatMul


def _mm_us(m: int, k: int, n: int) -> float:
    return round(2 * m * k * n / TP_TFLOPS * 1e6 + 8.0, 1)


def _fa(s: int, grad: bool) -> Kernel:
    h = H // TP
    op = "FlashAttentionScoreGrad" if grad else "FlashAttentionScore"
    n = 4 if grad else 3
    flops = (10 if grad else 4) * s * s * h * 0.5  # causal
    return _k(
        f"aclnn{op}_{op}_{op}",
        op,
        "MIX_AIC",
        ";".join([f"1,{s},{h}"] * n),
        f"1,{s},{h}",
        round(flops / (0.6 * TP_TFLOPS) * 1e6 + 10.0, 1),
        f"aclnn{op}",
        "fa_grad" if grad else "fa",
    )


def _tp_vec(tag: str, op_type: str, rows: int, n_read: int, n_write: int) -> Kernel:
    k = vec(tag, op_type, _mem_us((n_read + n_write) * rows * H * BF16), f"{rows},{H}")
    return dataclasses.replace(k, tag=tag)


def tp_program(sp: bool = False) -> list[Item]:
    """A TP-8 Llama-7B-like step: 4 layers, dp gradient all-reduce, optimizer.

    ``sp`` False: the row-parallel outputs and column-parallel input gradients are all-reduced in
    the tp group (full activation) and the norms / residual adds run on the whole sequence on every
    tp rank. ``sp`` True (the counterfactual): the sequence is sharded between those MatMuls:
    reduce-scatter / all-gather of the shards (each moving half of an all-reduce's data) and the
    norms / adds on a [4096 / 8, 4096] shard.
    """
    h = H // TP
    f = TP_F // TP
    rows = S // TP if sp else S

    def comm(scatter: bool, ov: int = 0) -> list[Item]:
        if not sp:
            return [Collective("hcom_allReduce_", "tp", TP_ACT_MB, overlap=ov, tag="tp_ar")]
        if scatter:
            return [Collective("hcom_reduceScatter_", "tp", TP_ACT_MB / 2, overlap=ov, tag="sp_rs")]
        return [Collective("hcom_allGather_", "tp", TP_ACT_MB / 2, tag="sp_ag")]

    prog: list[Item] = []
    for _ in range(LAYERS):
        prog += [_tp_vec("rmsnorm", "RmsNorm", rows, 1, 1)]
        if sp:
            prog += comm(False)
        prog += [matmul("qkv", S, H, 3 * h, _mm_us(S, H, 3 * h)), _fa(S, False)]
        prog += [matmul("attn_out", S, h, H, _mm_us(S, h, H))]
        prog += comm(True)
        prog += [_tp_vec("add", "Add", rows, 2, 1), _tp_vec("rmsnorm", "RmsNorm", rows, 1, 1)]
        if sp:
            prog += comm(False)
        prog += [matmul("mlp_up", S, H, 2 * f, _mm_us(S, H, 2 * f))]
        prog += [vec("swiglu", "SwiGlu", _mem_us(3 * S * f * BF16), f"{S},{2 * f}")]
        prog += [matmul("mlp_down", S, f, H, _mm_us(S, f, H))]
        prog += comm(True)
        prog += [_tp_vec("add", "Add", rows, 2, 1)]
    for _ in range(LAYERS):
        if sp:
            prog += comm(
                False
            )  # the output gradient's shards, gathered for the row-parallel MatMul
        prog += [
            matmul("mlp_down_dx", S, H, f, _mm_us(S, H, f)),
            matmul("mlp_down_dw", H, S, f, _mm_us(H, S, f)),
            vec("swiglu_grad", "SwiGluGrad", _mem_us(5 * S * f * BF16), f"{S},{2 * f}"),
            matmul("mlp_up_dx", S, 2 * f, H, _mm_us(S, 2 * f, H)),
        ]
        prog += comm(True, ov=1)  # async, under the weight-gradient MatMul (Megatron)
        prog += [
            matmul("mlp_up_dw", 2 * f, S, H, _mm_us(2 * f, S, H)),
            _tp_vec("rmsnorm_grad", "RmsNormGrad", rows, 3, 2),
            _tp_vec("add_grad", "Add", rows, 2, 1),
        ]
        if sp:
            prog += comm(False)
        prog += [
            matmul("attn_out_dx", S, H, h, _mm_us(S, H, h)),
            matmul("attn_out_dw", H, S, h, _mm_us(H, S, h)),
            _fa(S, True),
            matmul("qkv_dx", S, 3 * h, H, _mm_us(S, 3 * h, H)),
        ]
        prog += comm(True, ov=1)
        prog += [
            matmul("qkv_dw", 3 * h, S, H, _mm_us(3 * h, S, H)),
            _tp_vec("rmsnorm_grad", "RmsNormGrad", rows, 3, 2),
            _tp_vec("add_grad", "Add", rows, 2, 1),
        ]
        prog.append(Collective("hcom_allReduce_", "dp", 50.0))
    tail = transformer(layers=1, scale=0.4)
    opt = next(
        j
        for j, it in enumerate(tail)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    return prog + tail[opt:]


def tp_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, TP, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(
        sequence_parallel=False,
        hidden_size=H,
        ffn_hidden_size=TP_F,
        num_attention_heads=TP_HEADS,
        seq_length=S,
        micro_batch_size=1,
    )
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(tp_program(), group_kinds(ranks, TP), default_perturb(ranks), info, tp=TP)}


def tp_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 16 full-activation tp all-reduces a step, norms on the whole sequence; every rank."""
    cl: Cluster = m[""]["cluster"]
    tp_ar = _op_us(cl, lambda c: c.tag == "tp_ar")
    n_ar = sum(1 for it in cl.program if isinstance(it, Collective) and it.tag == "tp_ar")
    per_op = tp_ar / n_ar
    norms = _kernel_us(cl, lambda k: k.op_type in ("RmsNorm", "RmsNormGrad", "Add"))
    mm = _kernel_us(cl, lambda k: k.op_type == "MatMulV2")
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    comp = col(m, "computing_us")
    from advisor_chat.synth.scenarios_dev4 import _resimulate

    healthy = dataclasses.replace(cl, perturb=default_perturb(ranks))
    spc = _resimulate(healthy, tp_program(sp=True))
    base = _baseline(cl, tp_program(sp=True))
    b_norms = _kernel_us(spc, lambda k: k.op_type in ("RmsNorm", "RmsNormGrad", "Add"))
    b_tp = _op_us(spc, lambda c: c.tag in ("sp_rs", "sp_ag"))
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "tensor_parallel_size": TP,
        "tp_allreduces_per_step": n_ar,
        "tp_allreduce_mb": TP_ACT_MB,
        "tp_allreduce_us_median": _med(per_op),
        "tp_allreduce_us_per_step": _med(tp_ar.mean(axis=0)),
        "tp_allreduce_share_of_step": _share(tp_ar, step),
        "tp_collectives_us_per_step_sp": _med(b_tp.mean(axis=0)),
        "norm_add_us_per_step": _med(norms.mean(axis=0)),
        "norm_add_us_per_step_sp": _med(b_norms.mean(axis=0)),
        "matmul_us_per_step": _med(mm.mean(axis=0)),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_sequence_parallel": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        [],
        "communication",
        ["comm-not-overlapped", "mc2-tp-fusion"],
        "comm_not_overlapped_us",
        nums,
    )
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "tp_allreduce_us_per_step": nums["tp_allreduce_us_per_step"],
            "tp_allreduces_per_step": n_ar,
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        collective="hcom_allReduce_",
        group="tp (ranks 0-7, 8-15: one node each)",
        payload_mb=TP_ACT_MB,
        activation_shape=f"{S},{H}",
        per_step=n_ar,
        norm_shape=f"{S},{H}",
        matmul_shape_example=f"{S},{H};{3 * H // TP},{H}",
        sequence_parallel=False,
        tensor_model_parallel_size=TP,
        file="communication.json (16 hcom_allReduce_ of the tp group per step, 33.6 MB each, HCCS, "
        "the forward ones with nothing overlapping them), kernel_details.csv (RmsNorm / Add / RmsNormGrad on the whole "
        f"[{S},{H}] sequence next to TP-sharded MatMuls [{S},{H}]x[{3 * H // TP},{H}]) and "
        "profiler_metadata.json (tensor_model_parallel_size 8, sequence_parallel false)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause="tensor parallelism 8 without sequence parallelism: after the attention output and "
        "the MLP down projection (forward) and after the column-parallel input gradients "
        f"(backward) the whole [{S},{H}] activation is all-reduced in the tp group, 16 times a "
        "step (the forward ones with nothing to overlap them), and every RmsNorm / residual Add and their gradients "
        "run on the whole sequence on each of the 8 tp ranks",
        fix="turn on sequence parallelism (--sequence-parallel: reduce-scatter / all-gather of the "
        "sequence shards instead of the all-reduces, norms and adds on a 1/8 shard), then let the "
        "tp communication overlap the MatMuls (MindSpeed --use-ascend-mc2 / --use-ascend-coc need "
        "it); or a smaller tensor-parallel size for a model this size",
    )


# ---------------------------------------------------------------- swiglu-unfused
SW_F = 4 * H  # the MLP's intermediate size (the up projection gives [S, 2 * SW_F])
SW_TAG = "swiglu_unfused"


def _sw_v(op: str, api: str, ins: str, out: str, nbytes: float, tag: str) -> Kernel:
    return _k(
        f"{api}_{op}_{op}",
        op,
        "AI_VECTOR_CORE",
        ins,
        out,
        _mem_us(nbytes),
        api,
        f"{SW_TAG}_{tag}",
        bd=40,
    )


def sw_program(unfused: bool = True) -> list[Item]:
    """transformer() with the SwiGLU activation fused (SwiGlu / SwiGluGrad) or as plain torch ops.

    Durations of both from the bytes each kernel moves through HBM.
    """
    half = f"{S},{SW_F}"
    full = f"{S},{2 * SW_F}"
    hb = S * SW_F * BF16  # bytes of one half of the activation
    fused_f = _k(
        "aclnnSwiGlu_SwiGlu_SwiGlu", "SwiGlu", "AI_VECTOR_CORE", full, half, _mem_us(3 * hb),
        "aclnnSwiGlu", "swiglu", bd=40,
    )  # fmt: skip
    fused_b = _k(
        "aclnnSwiGluGrad_SwiGluGrad_SwiGluGrad", "SwiGluGrad", "AI_VECTOR_CORE", f"{half};{full}",
        full, _mem_us(5 * hb), "aclnnSwiGluGrad", "swiglu_grad", bd=40,
    )  # fmt: skip
    fwd = [
        _sw_v("SplitV", "aclnnSplitWithSize", full, f"{half};{half}", 4 * hb, "split"),
        _sw_v("Swish", "aclnnSilu", half, half, 2 * hb, "silu"),
        _sw_v("Mul", "aclnnMul", f"{half};{half}", half, 3 * hb, "mul"),
    ]
    bwd = [
        _sw_v("Mul", "aclnnMul", f"{half};{half}", half, 3 * hb, "mul_grad_b"),
        _sw_v("SwishGrad", "aclnnSiluBackward", f"{half};{half}", half, 3 * hb, "silu_grad"),
        _sw_v("Mul", "aclnnMul", f"{half};{half}", half, 3 * hb, "mul_grad_a"),
        _sw_v("ConcatD", "aclnnCat", f"{half};{half}", full, 4 * hb, "cat"),
    ]
    out: list[Item] = []
    for it in transformer(layers=LAYERS):
        if isinstance(it, Kernel) and it.op_type == "SwiGlu":
            out += fwd if unfused else [fused_f]
        elif isinstance(it, Kernel) and it.op_type == "SwiGluGrad":
            out += bwd if unfused else [fused_b]
        elif isinstance(it, Collective) and it.overlap > 0 and unfused:
            # the gradient all-reduce overlaps the same operators of the next layer's backward
            # (its window holds the SwiGluGrad, now len(bwd) kernels)
            out.append(dataclasses.replace(it, overlap=it.overlap + len(bwd) - 1))
        else:
            out.append(it)
    return out


def _is_sw(k: Kernel) -> bool:
    return k.tag.startswith(SW_TAG)


def sw_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(swiglu=True, use_fused_swiglu=False, hidden_size=H, ffn_hidden_size=SW_F)
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(sw_program(), group_kinds(ranks, 1), default_perturb(ranks), info)}


def sw_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 7 unfused kernels per layer instead of SwiGlu / SwiGluGrad, on every rank."""
    cl: Cluster = m[""]["cluster"]
    unf = _kernel_us(cl, _is_sw)
    n_unf = sum(1 for k in cl.kernels if _is_sw(k))
    by_type: dict[str, int] = {}
    for k in cl.kernels:
        if _is_sw(k):
            by_type[k.op_type] = by_type.get(k.op_type, 0) + 1
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    from advisor_chat.synth.scenarios_dev4 import _resimulate

    fused_prog = sw_program(unfused=False)
    healthy = dataclasses.replace(cl, perturb=default_perturb(ranks))
    fcl = _resimulate(healthy, fused_prog)
    fused = _kernel_us(fcl, lambda k: k.op_type in ("SwiGlu", "SwiGluGrad"))
    base = _baseline(cl, fused_prog)
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "unfused_kernels_per_step": n_unf,
        "unfused_kernels_per_layer": n_unf // LAYERS,
        "split_per_step": by_type.get("SplitV", 0),
        "swish_per_step": by_type.get("Swish", 0),
        "mul_per_step": by_type.get("Mul", 0),
        "swiglu_unfused_us_per_step": _med(unf.mean(axis=0)),
        "swiglu_fused_us_per_step": _med(fused.mean(axis=0)),
        "swiglu_unfused_share_of_step": _share(unf, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_fused": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "compute", ["tiny-kernels-fusion"], "computing_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={
            "swiglu_unfused_us_per_step": nums["swiglu_unfused_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operators=["SplitV", "Swish", "Mul", "SwishGrad", "ConcatD"],
        fused_operator="SwiGlu",
        activation_shape=f"{S},{2 * SW_F}",
        half_shape=f"{S},{SW_F}",
        per_layer_forward=3,
        per_layer_backward=4,
        file="kernel_details.csv / op_statistic.csv (SplitV, Swish, Mul, SwishGrad, ConcatD on "
        f"[{S},{2 * SW_F}] / [{S},{SW_F}] between the MLP MatMuls, no SwiGlu / SwiGluGrad) and "
        "profiler_metadata.json (swiglu true, use_fused_swiglu false)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause="the SwiGLU activation is computed with plain torch ops (chunk, F.silu, *): a SplitV, "
        "a Swish and a Mul over the MLP's activation in every layer's forward and Mul / SwishGrad / "
        "Mul / ConcatD in its backward, each a memory-bound pass over it, instead of one fused "
        "SwiGlu / SwiGluGrad, on every rank",
        fix="use the fused SwiGLU (MindSpeed --use-fused-swiglu with --swiglu, or "
        "torch_npu.npu_swiglu in the model's MLP)",
    )


# ---------------------------------------------------------------- hbm-slow-node
HB_NODE = 1
HB_FACTOR = 1.65  # memory-bound kernels on the slow node (HBM at ~60% of its bandwidth)
HB_VEC_SCALE = 2.0  # vector kernels of this model: twice transformer()'s (a wider optimizer state)


def hb_program() -> list[Item]:
    """transformer() with the memory-bound vector kernels twice as long (bigger optimizer state)."""
    return [
        dataclasses.replace(it, dur_us=round(it.dur_us * HB_VEC_SCALE, 1))
        if isinstance(it, Kernel) and it.core == "AI_VECTOR_CORE"
        else it
        for it in transformer(layers=LAYERS)
    ]


def hb_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    prog = hb_program()
    ks = [it for it in prog if isinstance(it, Kernel)]
    slow = {
        j: dataclasses.replace(k, dur_us=round(k.dur_us * HB_FACTOR, 1))
        for j, k in enumerate(ks)
        if k.core == "AI_VECTOR_CORE"
    }
    for r in _node_ranks(ranks, HB_NODE):
        for j, k in slow.items():
            p.kernel_swap[(-1, r, j)] = k
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def hb_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1's vector kernels ~1.65x, its MatMuls normal; node 0 waits."""
    cl: Cluster = m[""]["cluster"]
    bad = _node_ranks(ranks, HB_NODE)
    good = [r for r in range(ranks) if r not in bad]
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    mm = _kernel_us(cl, lambda k: k.op_type == "MatMulV2")
    fa = _kernel_us(cl, lambda k: k.op_type.startswith("FlashAttention"))
    vk = _kernel_us(cl, lambda k: k.core == "AI_VECTOR_CORE")
    rms = _kernel_us(cl, lambda k: k.op_type == "RmsNorm")
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "culprit_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "vector_ratio_culprit_vs_others": round(float(vk[bad].mean() / vk[good].mean()), 3),
        "matmul_ratio_culprit_vs_others": round(float(mm[bad].mean() / mm[good].mean()), 3),
        "flash_attention_ratio_culprit_vs_others": round(
            float(fa[bad].mean() / fa[good].mean()), 3
        ),
        "rmsnorm_ratio_culprit_vs_others": round(float(rms[bad].mean() / rms[good].mean()), 3),
        "culprit_vector_us_per_step": _r(float(vk[bad].mean())),
        "others_vector_us_per_step": _r(float(vk[good].mean())),
        "culprit_computing_us_per_step": _r(float(comp[bad].mean())),
        "others_computing_us_per_step": _r(float(comp[good].mean())),
        "aicore_mhz": AICORE_MHZ,
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "median_step_us": _r(a),
        "median_step_us_healthy_hbm": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(bad, "compute", ["heterogeneous-devices"], "computing_us", nums)
    vic = victims_by_wait(wait, bad)
    rc = root_cause(
        "slow_group",
        "compute",
        "group",
        ranks=bad,
        victims=vic,
        not_slow=not_slow_sample(ranks, bad, vic),
        metrics={
            "vector_ratio_culprit_vs_others": nums["vector_ratio_culprit_vs_others"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
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
        slow_operators=["RmsNorm", "Add", "SwiGlu", "RmsNormGrad", "SwiGluGrad", "ForeachAddList"],
        normal_operators=["MatMulV2", "FlashAttentionScore", "FlashAttentionScoreGrad"],
        accelerator_core="AI_VECTOR_CORE",
        aicore_mhz=AICORE_MHZ,
        file="kernel_details.csv / op_statistic.csv of ranks 8-15 (every AI_VECTOR_CORE operator "
        "~1.65x as long as on node 0, MatMulV2 / FlashAttention the same), the AI Core Freq track "
        "of trace_view.json 1800 MHz on both nodes, communication.json of ranks 0-7 (Wait Time in "
        "every collective)",
        memory_bound_only=True,
        clock_normal=True,
        host_normal=True,
        links_normal=True,
        every_step=True,
        cause=f"node {bad[0] // RANKS_PER_NODE}'s HBM runs slower (~60% of its bandwidth): every "
        f"memory-bound vector kernel of ranks {bad[0]}-{bad[-1]} (RmsNorm, Add, SwiGlu, the "
        "optimizer's Foreach*) takes ~1.65x as long, the MatMuls and FlashAttention (compute-bound) "
        "and the AI Core clock are normal; node 0 waits for node 1 in every collective",
        fix="check that node's HBM (npu-smi info -t memory / -t ecc / -t health: HBM frequency, "
        "temperature and ECC counts, the firmware version against node 0's); have the cards or the "
        "node serviced, or move the job off it until it is",
    )


# ---------------------------------------------------------------- registry
DEV27_SCENARIOS = (
    ScenarioSpec(
        "node-clock-offset",
        "node 1's host clock 3.6 ms ahead of node 0's: every timestamp of ranks 8-15 shifted, they "
        "look late in every collective on a merged timeline, while Wait / Elapse / step breakdown "
        "are the same on both nodes; a data artifact, nothing slow",
        16,
        4,
        co_plans,
        co_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "tp-no-sequence-parallel",
        "TP 8 without --sequence-parallel: 16 full-activation (33.6 MB) tp hcom_allReduce_ a step, "
        "RmsNorm / Add on the whole sequence on every tp rank; job-level",
        16,
        4,
        tp_plans,
        tp_answer,
        # (two data-parallel replicas at least: the gradient all-reduce needs peers)
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "swiglu-unfused",
        "SwiGLU as plain torch ops: SplitV + Swish + Mul (forward) and Mul / SwishGrad / Mul / "
        "ConcatD (backward) over the [4096,32768] activation in every layer instead of SwiGlu; "
        "every rank; job-level",
        16,
        4,
        sw_plans,
        sw_answer,
    ),
    ScenarioSpec(
        "hbm-slow-node",
        "node 1's HBM slower: its AI_VECTOR_CORE (memory-bound) kernels ~1.65x, MatMul / "
        "FlashAttention and the 1800 MHz clock normal; node 0 waits in every collective",
        16,
        4,
        hb_plans,
        hb_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
)
DEV27_KINDS = tuple(s.name for s in DEV27_SCENARIOS)


__all__ = ["DEV27_KINDS", "DEV27_SCENARIOS"]
