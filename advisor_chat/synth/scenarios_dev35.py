"""Development set 35 of fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs from two areas, mixed precision / numerics in practice and
memory capacity pressure, planted as mechanisms of the simulation (``advisor_chat.synth.model``,
``advisor_chat.synth.writer``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev35.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place of the files: the Input / Output Data Types
columns of kernel_details.csv on the activation's shape; the ``data_type`` / ``count`` of the HCCL
op events of trace_view.json with the Transit Size of communication.json, against the weights'
shapes; the PTA totals of memory_record.csv from one step to the next; and the runtime calls on the
CANN lane of trace_view.json of one node):

- ``fp32-residual-stream``: a ~0.5B-class model (hidden 1024, 16 heads, SwiGLU 2816), 2 x 4096
  tokens per micro-batch, DP 16 over two servers. The model code keeps the residual stream in fp32
  (an fp32 residual connection: ``residual = hidden_states.float()``; ``hidden_states = residual +
  out.float()``) while the norms, MatMuls and attention run in bf16: every attention and MLP
  sub-layer casts the [8192, 1024] stream to bf16 for its RmsNorm, casts its bf16 output to fp32
  and adds it in fp32; the backward mirrors it (the gradient cast to bf16 into the sub-layer, the
  norm's input gradient cast to fp32, an fp32 Add). kernel_details.csv: 35 Casts a step
  (DT_BF16 -> DT_FLOAT / DT_FLOAT -> DT_BF16 on ``8192,1024``, ~43 us each) and 16 Adds with
  ``DT_FLOAT;DT_FLOAT``, every MatMulV2 / FlashAttention DT_BF16; ~3.4 ms of residual-stream work
  a step instead of ~1.3 ms (step ~30.7 ms, ~28.1 ms on a bf16 stream). Job-level: every rank
  alike, links normal. Fix: a bf16 residual stream (drop the casts / --fp32-residual-connection),
  the fused ``npu_add_rms_norm`` (AddRmsNorm accumulates the add in fp32 inside the kernel).
- ``grad-allreduce-fp32``: bf16 training of a model with hidden 2560 (20 heads, SwiGLU 6912),
  2 x 4096 tokens per micro-batch, DP 16 over two servers, the gradients all-reduced per layer
  during the backward. The gradient buffers are fp32 and all-reduced in fp32 (Megatron's default
  fp32 main_grad reduce with --bf16, no --grad-reduce-in-bf16; DeepSpeed communication_data_type
  fp32): every gradient ``hcom_allReduce_`` carries ``data_type`` FP32 and ``count`` 79,298,560 (the
  layer's weights, the second inputs of its four MatMulV2, all DT_BF16) and moves ~317 MB (4 bytes a
  weight) at the links' normal bandwidth: ~21.3 ms against ~14.5 ms of the next layer's backward
  MatMuls, where bf16 gradients (~10.8 ms) would hide. ~33 ms of a ~143 ms step is exposed
  communication on every rank alike (~122 ms with bf16 gradients). Job-level; links, kernels normal.
  Fix: reduce the gradients in bf16 (--grad-reduce-in-bf16 / communication_data_type bf16).
- ``logits-kept-across-steps``: an 8B-class GQA model (hidden 4096, 8 KV groups, vocabulary
  128256), 4096 tokens a step, DP 16. The training loop keeps a reference to every step's logits (a
  list for a metric / an output log, no ``.detach().cpu()``): PTA Total Allocated at the start of
  every step ~1002 MB (one [4096, 128256] bf16 logits tensor) higher than the step before on every
  rank, the peak 53.9 GB at step 10 and 60.9 GB at step 17 against the 61.4 GB the allocator may
  reserve. From step 14 the caching allocator cannot place the activations in its fragmented cache
  and synchronizes, frees its cached segments and mallocs anew (``aclrtSynchronizeDevice`` +
  ``aclrtFree`` + ``aclrtMalloc``) before 3, 5, 13, 19 kernels a step; the step grows from ~222 ms
  to ~258 ms; the next step runs out of memory. Culprit: steps 14-17 (every rank alike: the leak is
  job-wide, the steps near the limit stand out). Fix: drop the reference (keep ``loss.item()`` / a
  detached CPU copy of what the metric needs); expandable_segments or empty_cache() only delay
  the out-of-memory error.
- ``alloc-cache-off-node``: DP 16 over two servers (transformer of 4 layers); node 1's launch script
  still sets ``PYTORCH_NO_NPU_MEMORY_CACHING=1`` from a memory investigation: the caching allocator
  is off on ranks 8-15, so before every launch after the step's first their CANN lane shows an
  ``aclrtSynchronizeDevice`` (until the device has drained, torch_npu synchronizes before a free),
  one or two ``aclrtFree`` and an ``aclrtMalloc`` sized like the kernel's output (~53 us of calls);
  the device idles ~0.1 ms before every kernel (~10 ms a step), memory_record.csv shows Total
  Reserved equal to Total Allocated there (node 0: a flat reservation with ~5 GB of cache above
  the peak); the profiler's ENV_VARIABLES (PYTORCH_NPU_ALLOC_CONF) are the same on both nodes.
  Node 0 waits ~8 ms a step in the collectives; step ~83 ms instead of ~77 ms. Culprit: node 1
  (ranks 8-15); kernels, links and launch calls normal. Fix: unset the variable on node 1.
"""

from __future__ import annotations

import dataclasses
import math
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
from advisor_chat.synth.scenarios_dev19 import _kernel_us, _med, _saving
from advisor_chat.synth.scenarios_dev34 import (
    LAYERS,
    MASK,
    MIB,
    _dist,
    _fa,
    _kernels,
    _link_bw,
    _mm,
    _op_us,
    _tail,
    _vec,
)
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    step_ids,
)


def _typed(k: Kernel, ins: str, out: str) -> Kernel:
    """``k`` with other Input / Output Data Types (``;`` between inputs)."""
    return dataclasses.replace(k, in_dtypes=ins, out_dtypes=out)


def _bw(values: list[float]) -> float | None:
    """Median bandwidth (GB/s) of some links, None when there are none (e.g. one server)."""
    return round(float(np.median(values)), 3) if values else None


def _numel(shapes: str) -> int:
    """Elements of every tensor of a ``;``-separated shape list."""
    return sum(math.prod(int(x) for x in s.split(",")) for s in shapes.split(";") if s)


# ---------------------------------------------------------------- fp32-residual-stream
FR_H, FR_HEADS, FR_FFN = 1024, 16, 2816
FR_SEQ, FR_MBS = 4096, 2
FR_T = FR_SEQ * FR_MBS  # tokens per micro-batch
FR_EL = FR_T * FR_H  # elements of one residual-stream tensor
FR_PARAMS = 4 * FR_H * FR_H + 3 * FR_H * FR_FFN  # weights of one layer
FR_GRAD_MIB = FR_PARAMS * 2 / MIB  # its bf16 gradient bucket
FR_OVERLAP = 10  # kernels of the next layer's backward beside a gradient all-reduce
FR_CAST, FR_ADD = "res_cast", "res_add"


def _fr_cast(to32: bool) -> Kernel:
    """Cast of a residual-stream tensor (read 2 + write 4 bytes an element, or the other way)."""
    sh = f"{FR_T},{FR_H}"
    k = _vec("Cast", 6 * FR_EL, sh, sh, FR_CAST)
    return _typed(k, "DT_BF16", "DT_FLOAT") if to32 else _typed(k, "DT_FLOAT", "DT_BF16")


def _fr_add(fp32: bool) -> Kernel:
    """The residual add (forward) or the residual-gradient accumulation (backward)."""
    sh = f"{FR_T},{FR_H}"
    if fp32:
        k = _vec("Add", 12 * FR_EL, f"{sh};{sh}", sh, FR_ADD)
        return _typed(k, "DT_FLOAT;DT_FLOAT", "DT_FLOAT")
    return _vec("Add", 6 * FR_EL, f"{sh};{sh}", sh, FR_ADD)


def fr_program(fp32: bool = True) -> list[Item]:
    """4 pre-norm layers; with ``fp32`` the residual stream is kept in fp32 by the model code.

    Every sub-layer (attention, MLP) then casts the stream to bf16 for its norm, casts its bf16
    output to fp32 and adds it in fp32; the backward mirrors it (the gradient cast to bf16 into the
    sub-layer, the norm's input gradient cast to fp32, the fp32 accumulation). Without ``fp32``: the
    same kernels on a bf16 stream, no Cast.
    """
    t, h, f = FR_T, FR_H, FR_FFN
    sh = f"{t},{h}"
    el = FR_EL
    bsh = f"{FR_MBS},{FR_SEQ},{h}"
    fa_flops = 2 * FR_MBS * FR_SEQ * FR_SEQ * h  # causal
    norm = _vec("RmsNorm", 4 * el, f"{sh};{h}", sh)
    ngrad = _vec("RmsNormGrad", 6 * el, f"{sh};{sh};{h}", sh)
    attn: list[Item] = [
        _mm("qkv", t, h, 3 * h),
        _fa(bsh, bsh, fa_flops, False, MASK),
        _mm("attn_out", t, h, h),
    ]
    mlp: list[Item] = [
        _mm("mlp_up", t, h, 2 * f),
        _vec("SwiGlu", 2 * t * 3 * f, f"{t},{2 * f}", f"{t},{f}"),
        _mm("mlp_down", t, f, h),
    ]
    attn_b: list[Item] = [
        _mm("attn_out_dx", t, h, h),
        _mm("attn_out_dw", h, t, h),
        _fa(bsh, bsh, fa_flops, True, MASK),
        _mm("qkv_dx", t, 3 * h, h),
        _mm("qkv_dw", 3 * h, t, h),
    ]
    mlp_b: list[Item] = [
        _mm("mlp_down_dx", t, h, f),
        _mm("mlp_down_dw", h, t, f),
        _vec("SwiGluGrad", 1.6 * 2 * t * 3 * f, f"{t},{f}", f"{t},{2 * f}"),
        _mm("mlp_up_dx", t, 2 * f, h),
        _mm("mlp_up_dw", 2 * f, t, h),
    ]

    def sub_fwd(core: list[Item]) -> list[Item]:
        if fp32:
            return [_fr_cast(False), norm, *core, _fr_cast(True), _fr_add(True)]
        return [norm, *core, _fr_add(False)]

    def sub_bwd(core: list[Item]) -> list[Item]:
        if fp32:
            return [_fr_cast(False), *core, ngrad, _fr_cast(True), _fr_add(True)]
        return [*core, ngrad, _fr_add(False)]

    prog: list[Item] = [_fr_cast(True)] if fp32 else []  # the embedding output into the stream
    for _ in range(LAYERS):
        prog += sub_fwd(attn) + sub_fwd(mlp)
    prog += [_fr_cast(False), norm] if fp32 else [norm]  # the final norm
    prog += [ngrad, _fr_cast(True)] if fp32 else [ngrad]
    for li in range(LAYERS):
        prog += sub_bwd(mlp_b) + sub_bwd(attn_b)
        ov = 0 if li == LAYERS - 1 else FR_OVERLAP
        prog.append(Collective("hcom_allReduce_", "world", FR_GRAD_MIB, overlap=ov))
    return prog + _tail(h)


def fr_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        hidden_size=FR_H,
        num_attention_heads=FR_HEADS,
        ffn_hidden_size=FR_FFN,
        seq_length=FR_SEQ,
        micro_batch_size=FR_MBS,
        num_layers=LAYERS,
        bf16=True,
    )
    return {"": Plan(fr_program(), group_kinds(ranks, 1), default_perturb(ranks), info)}


def fr_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: Casts and fp32 Adds on the residual stream around every sub-layer, every rank."""
    cl: Cluster = m[""]["cluster"]
    ks = cl.kernels
    is_cast = lambda k: k.op_type == "Cast"  # noqa: E731
    is_add32 = lambda k: k.op_type == "Add" and k.out_dtypes == "DT_FLOAT"  # noqa: E731
    is_stream = lambda k: k.tag in (FR_CAST, FR_ADD)  # noqa: E731
    cast = _kernel_us(cl, is_cast)
    add32 = _kernel_us(cl, is_add32)
    stream = _kernel_us(cl, lambda k: is_stream(k) or k.op_type in ("RmsNorm", "RmsNormGrad"))
    mm = _kernel_us(cl, lambda k: k.op_type == "MatMulV2")
    fixed = _resimulate(dataclasses.replace(cl, perturb=default_perturb(ranks)), fr_program(False))
    stream_h = _kernel_us(fixed, lambda k: is_stream(k) or k.op_type in ("RmsNorm", "RmsNormGrad"))
    base = _sim_breakdown(fixed)
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    a, b, save = _saving(step, base["step_us"])
    js_cast = [j for j, k in enumerate(ks) if is_cast(k)]
    to32 = sum(1 for j in js_cast if ks[j].out_dtypes == "DT_FLOAT")
    cast_us = [
        float(st.k_dur[r, j]) / 1000 for st in cl.steps for r in range(ranks) for j in js_cast
    ]
    add_js = [j for j, k in enumerate(ks) if is_add32(k)]
    add_us = [float(st.k_dur[r, j]) / 1000 for st in cl.steps for r in range(ranks) for j in add_js]
    nums = {
        "hidden_size": FR_H,
        "tokens_per_micro_batch": FR_T,
        "stream_shape": f"{FR_T},{FR_H}",
        "casts_per_step": len(js_cast),
        "casts_to_fp32_per_step": to32,
        "casts_to_bf16_per_step": len(js_cast) - to32,
        "fp32_adds_per_step": len(add_js),
        "cast_us_median": _med(cast_us),
        "fp32_add_us_median": _med(add_us),
        "cast_us_per_step": _med(cast),
        "fp32_add_us_per_step": _med(add32),
        "residual_stream_us_per_step": _med(stream),
        "residual_stream_us_per_step_bf16": _med(stream_h),
        "cast_share_of_step": _share(cast, step),
        "residual_stream_share_of_step": _share(stream, step),
        "matmul_us_per_step": _med(mm),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_bf16_stream": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "compute", ["fp32-loss-full-vocab"], "computing_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        operator="Cast",
        metrics={
            "casts_per_step": nums["casts_per_step"],
            "residual_stream_us_per_step": nums["residual_stream_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operator="Cast",
        other_operators=["Add", "RmsNorm", "RmsNormGrad"],
        shape=f"{FR_T},{FR_H}",
        cast_dtypes=["DT_BF16 -> DT_FLOAT", "DT_FLOAT -> DT_BF16"],
        add_dtypes="DT_FLOAT;DT_FLOAT -> DT_FLOAT",
        matmul_dtypes="DT_BF16",
        position="around every RmsNorm / residual Add of each attention and MLP sub-layer: the "
        "fp32 stream cast to bf16 before the norm, the sub-layer's bf16 output cast to fp32 and "
        "added in fp32; in the backward the mirror (the gradient cast to bf16 into the sub-layer, "
        "the norm's input gradient cast to fp32, an fp32 Add)",
        file="kernel_details.csv (Input / Output Data Types: Cast DT_BF16 -> DT_FLOAT and DT_FLOAT "
        f"-> DT_BF16 and Add DT_FLOAT;DT_FLOAT on the activation shape {FR_T},{FR_H}, 4 Casts and 2 "
        "Adds per layer forward and backward; every MatMulV2 / FlashAttentionScore DT_BF16) and "
        f"op_statistic.csv (Cast among the top operator types, {len(js_cast)} a step)",
        weights_normal=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause="the model code keeps the residual stream in fp32 (fp32 residual connection: "
        "residual = hidden_states.float(); hidden_states = residual + output.float()), while the "
        "norms and MatMuls run in bf16: every attention and MLP sub-layer casts the [8192, 1024] "
        "stream to bf16 for its norm, casts its output back to fp32 and adds it in fp32, and the "
        "backward mirrors it: memory-bound Casts and fp32 Adds that move 2-3x the bytes of a bf16 "
        "stream, on every rank alike",
        fix="keep the residual stream in bf16 (drop the .float() casts / --fp32-residual-connection); "
        "for the numerics use the fused add + norm (torch_npu.npu_add_rms_norm, AddRmsNorm: the "
        "residual add accumulates in fp32 inside the kernel and returns bf16), so no separate Cast "
        "or fp32 Add is launched",
    )


# ---------------------------------------------------------------- grad-allreduce-fp32
GR_H, GR_HEADS, GR_FFN = 2560, 20, 6912
GR_SEQ, GR_MBS = 4096, 2
GR_T = GR_SEQ * GR_MBS
GR_PARAMS = 4 * GR_H * GR_H + 3 * GR_H * GR_FFN  # weights (and gradient elements) of one layer
GR_TAG = "grad_ar"
GR_OVERLAP = 12  # kernels of the next layer's backward that run beside a gradient all-reduce


def _gr_grad(fp32: bool, overlap: int) -> Collective:
    """One layer's gradient bucket all-reduced over the data-parallel ranks (4 or 2 bytes each)."""
    nbytes = (4 if fp32 else 2) * GR_PARAMS
    return Collective(
        "hcom_allReduce_",
        "world",
        nbytes / MIB,
        overlap=overlap,
        dtype="FP32" if fp32 else "BFP16",
        tag=GR_TAG,
        count=GR_PARAMS,
    )


def gr_program(fp32: bool = True) -> list[Item]:
    """4 layers (MHA, SwiGLU), the gradients all-reduced per layer during the backward.

    ``fp32``: the gradient buckets are fp32 (4 bytes an element); otherwise bf16.
    """
    t, h, f = GR_T, GR_H, GR_FFN
    sh = f"{t},{h}"
    act = 2 * t * h
    bsh = f"{GR_MBS},{GR_SEQ},{h}"
    fa_flops = 2 * GR_MBS * GR_SEQ * GR_SEQ * h
    fwd: list[Item] = [
        _vec("RmsNorm", 2 * act, f"{sh};{h}", sh),
        _mm("qkv", t, h, 3 * h),
        _fa(bsh, bsh, fa_flops, False, MASK),
        _mm("attn_out", t, h, h),
        _vec("Add", 3 * act, f"{sh};{sh}", sh),
        _vec("RmsNorm", 2 * act, f"{sh};{h}", sh),
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
            _vec("RmsNormGrad", 3 * act, f"{sh};{sh};{h}", sh),
            _vec("Add", 3 * act, f"{sh};{sh}", sh),
            _mm("attn_out_dx", t, h, h),
            _mm("attn_out_dw", h, t, h),
            _fa(bsh, bsh, fa_flops, True, MASK),
            _mm("qkv_dx", t, 3 * h, h),
            _mm("qkv_dw", 3 * h, t, h),
            _vec("RmsNormGrad", 3 * act, f"{sh};{sh};{h}", sh),
            _vec("Add", 3 * act, f"{sh};{sh}", sh),
            _gr_grad(fp32, 0 if li == LAYERS - 1 else GR_OVERLAP),
        ]
    return prog + _tail(h)


def gr_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        hidden_size=GR_H,
        num_attention_heads=GR_HEADS,
        ffn_hidden_size=GR_FFN,
        seq_length=GR_SEQ,
        micro_batch_size=GR_MBS,
        num_layers=LAYERS,
        bf16=True,
    )
    return {"": Plan(gr_program(), group_kinds(ranks, 1), default_perturb(ranks), info)}


def gr_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 4 bytes per gradient element on the wire; the all-reduces outlast the backward."""
    cl: Cluster = m[""]["cluster"]
    is_grad = lambda c: c.tag == GR_TAG  # noqa: E731
    fixed = _resimulate(dataclasses.replace(cl, perturb=default_perturb(ranks)), gr_program(False))
    base = _sim_breakdown(fixed)
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    comp = col(m, "computing_us")
    a, b, save = _saving(step, base["step_us"])
    ar_us = [float(np.median((op.end - op.start) / 1000)) for st in cl.steps for op in st.ops
             if is_grad(op.item)]  # fmt: skip
    ar_us_h = [float(np.median((op.end - op.start) / 1000)) for st in fixed.steps
               for op in st.ops if is_grad(op.item)]  # fmt: skip
    mb = []  # MB each rank sends per gradient all-reduce (HCCS + RDMA Transit Size)
    for st in cl.steps:
        for op in st.ops:
            if is_grad(op.item):
                wire = (op.kind.transport == 0) | (op.kind.transport == 1)
                mb.extend(np.where(wire, op.link_mb, 0.0).sum(axis=1).tolist())
    grad_step = _op_us(cl, is_grad)
    bwd = [j for j, k in enumerate(cl.kernels) if k.tag.endswith(("_dx", "_dw"))]
    bwd_layer_us = float(np.median([st.k_dur[:, bwd].sum(axis=1) for st in cl.steps])) / 1000
    n_grad = sum(1 for it in cl.program if isinstance(it, Collective) and is_grad(it))
    nums = {
        "dp_size": ranks,
        "params_per_layer": GR_PARAMS,
        "grad_allreduce_per_step": n_grad,
        "grad_allreduce_count": GR_PARAMS,
        "grad_allreduce_dtype": "FP32",
        "grad_allreduce_mb": _med(mb),
        "grad_allreduce_mb_bf16": _r(2 * GR_PARAMS / 1e6),
        "bytes_per_grad_element": round(float(np.median(mb)) * 1e6 / GR_PARAMS, 3),
        "grad_allreduce_us_median": _med(ar_us),
        "grad_allreduce_us_median_bf16": _med(ar_us_h),
        "grad_allreduce_us_per_step": _med(grad_step.mean(axis=0)),
        "backward_matmul_us_per_layer": _r(bwd_layer_us / LAYERS),
        "rdma_bandwidth_gbps": _bw(_link_bw(cl, is_grad, 1)),
        "hccs_bandwidth_gbps": _bw(_link_bw(cl, is_grad, 0)),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_comm_not_overlapped_us_per_step_bf16": _med(
            base["comm_not_overlapped_us"].mean(axis=1)
        ),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_bf16_grads": _r(b),
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
            "bytes_per_grad_element": nums["bytes_per_grad_element"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        collective="hcom_allReduce_",
        group="default_group",
        data_type="FP32",
        count=GR_PARAMS,
        params_per_layer=GR_PARAMS,
        weight_dtype="DT_BF16",
        file="trace_view.json (HCCL lane: every gradient hcom_allReduce_ with data_type FP32 and "
        f"count {GR_PARAMS}, one layer's weights), communication.json (its Transit Size over HCCS + "
        f"RDMA ~{nums['grad_allreduce_mb']:.0f} MB, 4 bytes per weight of the layer, at the links' "
        "normal bandwidth) against kernel_details.csv (the layer's four MatMulV2 weights, "
        f"{GR_PARAMS / 1e6:.1f}M elements, all DT_BF16) and step_trace_time.csv "
        "(Communication(Not Overlapped) on every rank alike)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        bandwidth_normal=True,
        kernels_normal=True,
        same_every_step=True,
        cause="the bf16 run keeps its gradient buffers (main_grad) in fp32 and all-reduces them in "
        "fp32 (Megatron's default --accumulate-allreduce-grads-in-fp32 with --bf16, no "
        "--grad-reduce-in-bf16; DeepSpeed communication_data_type fp32): every gradient all-reduce "
        "moves 4 bytes per weight, twice what bf16 gradients need, and no longer hides behind the "
        "next layer's backward; the rest is exposed on every rank",
        fix="reduce the gradients in bf16 (Megatron --grad-reduce-in-bf16, DeepSpeed "
        '"communication_data_type": "bf16" / a bf16 compress hook with DDP): half the bytes, the '
        "all-reduces hide behind the backward again; keep the fp32 master weights and the fp32 "
        "accumulation in the optimizer",
    )


# ---------------------------------------------------------------- logits-kept-across-steps
KL_H, KL_HEADS, KL_KV, KL_HD, KL_FFN = 4096, 32, 8, 128, 14336
KL_VOCAB, KL_SEQ = 128256, 4096
KL_T = KL_SEQ
KL_LOGITS_MB = KL_T * KL_VOCAB * 2 / MIB  # one step's logits, bf16, MiB (what memory_record counts)
KL_GRAD_MIB = 96.0  # a layer's gradient bucket (ZeRO-sharded slice of the 8B-class model)
KL_LIMIT_MB = 61440.0  # what the caching allocator may reserve on the 64 GB card
KL_STATIC_MB = 27520.0  # weights, gradients, optimizer shard
KL_ACT_LAYER_MB = 3584.0  # activations a layer keeps for its backward
KL_FRAG_MB = 4096.0  # cached memory no new block fits in (fragmentation)
KL_FRESH_MB = 256.0  # cache right after it released its cached blocks
KL_BIG_MB = 32.0  # an output block this large needs a free segment of its own
KL_MIN_HEADROOM_MB = 500.0  # the last captured step's peak stays at least this under the limit
KL_FREE_US = (260.0, 480.0)  # one aclrtFree of a cached segment
KL_MALLOC_US = (420.0, 760.0)  # the new block's aclrtMalloc
KL_SEGMENT_MB = 256.0  # size of a cached segment freed by a release
KL_RETURN_US = 40.0  # from the last call to the kernel (bookkeeping, launch)


def kl_program() -> list[Item]:
    """4 layers of an 8B-class GQA model, the LM head over a 128K vocabulary, a fused bf16 loss."""
    t, h, f = KL_T, KL_H, KL_FFN
    kvh = KL_KV * KL_HD
    sh = f"{t},{h}"
    act = 2 * t * h
    q = f"1,{t},{h}"
    kv = f"1,{t},{kvh}"
    fa_flops = 2 * t * t * h
    fwd: list[Item] = [
        _vec("RmsNorm", 2 * act, f"{sh};{h}", sh),
        _mm("qkv", t, h, h + 2 * kvh),
        _fa(q, kv, fa_flops, False, MASK),
        _mm("attn_out", t, h, h),
        _vec("Add", 3 * act, f"{sh};{sh}", sh),
        _vec("RmsNorm", 2 * act, f"{sh};{h}", sh),
        _mm("mlp_up", t, h, 2 * f),
        _vec("SwiGlu", 2 * t * 3 * f, f"{t},{2 * f}", f"{t},{f}"),
        _mm("mlp_down", t, f, h),
        _vec("Add", 3 * act, f"{sh};{sh}", sh),
    ]
    v = KL_VOCAB
    logits = 2 * t * v
    ce = _typed(
        _vec("CrossEntropyLoss", logits + 8 * t, f"{t},{v};{t}", f"{t}", "loss"),
        "DT_BF16;DT_INT64",
        "DT_FLOAT",
    )
    ce_grad = _typed(
        _vec("CrossEntropyLossGrad", 2 * logits + 8 * t, f"{t},{v};{t}", f"{t},{v}", "loss"),
        "DT_BF16;DT_INT64",
        "DT_BF16",
    )
    prog: list[Item] = []
    for _ in range(LAYERS):
        prog += fwd
    prog += [
        _vec("RmsNorm", 2 * act, f"{sh};{h}", sh),
        _mm("lm_head", t, h, v),
        ce,
        ce_grad,
        _mm("lm_head_dx", t, v, h),
        _mm("lm_head_dw", v, t, h),
        _vec("RmsNormGrad", 3 * act, f"{sh};{sh};{h}", sh),
    ]
    for li in range(LAYERS):
        prog += [
            _mm("mlp_down_dx", t, h, f),
            _mm("mlp_down_dw", h, t, f),
            _vec("SwiGluGrad", 1.6 * 2 * t * 3 * f, f"{t},{f}", f"{t},{2 * f}"),
            _mm("mlp_up_dx", t, 2 * f, h),
            _mm("mlp_up_dw", 2 * f, t, h),
            _vec("RmsNormGrad", 3 * act, f"{sh};{sh};{h}", sh),
            _vec("Add", 3 * act, f"{sh};{sh}", sh),
            _mm("attn_out_dx", t, h, h),
            _mm("attn_out_dw", h, t, h),
            _fa(q, kv, fa_flops, True, MASK),
            _mm("qkv_dx", t, h + 2 * kvh, h),
            _mm("qkv_dw", h + 2 * kvh, t, h),
            _vec("RmsNormGrad", 3 * act, f"{sh};{sh};{h}", sh),
            _vec("Add", 3 * act, f"{sh};{sh}", sh),
            Collective(
                "hcom_allReduce_", "world", KL_GRAD_MIB, overlap=0 if li == LAYERS - 1 else 6
            ),
        ]
    return prog + _tail(h)


def _kl_alloc_base(prog: list[Item]) -> tuple[np.ndarray, int]:
    """Allocated MB at each kernel's start without the leak, and the first kernel after the step's logits die.

    Activations grow through the forward (a layer's share per kernel), the logits and their
    gradient live from the LM head to its weight gradient, the backward releases the layers' share.
    """
    ks = _kernels(prog)
    n_fwd = next(j for j, k in enumerate(ks) if k.tag == "lm_head") - 1  # the layers + final norm
    per_layer = (n_fwd - 1) / LAYERS
    j_head = n_fwd + 1
    j_ce_grad = j_head + 2
    j_dead = j_head + 4  # after lm_head_dw
    j_bwd = j_dead + 1
    n_bwd = next(j for j, k in enumerate(ks) if k.op_type == "ForeachMulScalar") - j_bwd
    out = np.zeros(len(ks))
    act_total = KL_ACT_LAYER_MB * LAYERS
    for j in range(len(ks)):
        if j < n_fwd:
            a = KL_ACT_LAYER_MB * min(j / per_layer, LAYERS)
        elif j <= j_head:
            a = act_total
        elif j < j_dead:
            a = act_total + KL_LOGITS_MB * (2 if j > j_ce_grad else 1)
        elif j < j_bwd + n_bwd:
            a = act_total * (1.0 - (j - j_dead + 1) / (n_bwd + 1))
        else:
            a = 0.0
        out[j] = KL_STATIC_MB + a
    return out, j_dead


def _kl_held(steps: int) -> np.ndarray:
    """Earlier steps' logits still referenced at each captured step's start (how many).

    The list has grown since the start of training: at the default capture (steps 10-17) the logits
    of every earlier step; the last captured step's peak is just under the allocator's limit (the
    run ends in an out-of-memory error the step after the capture), whatever the capture's length.
    """
    peak0 = KL_STATIC_MB + KL_ACT_LAYER_MB * LAYERS + 2 * KL_LOGITS_MB
    last = int((KL_LIMIT_MB - KL_MIN_HEADROOM_MB - peak0) // KL_LOGITS_MB)
    return np.array([max(0, last - (steps - 1 - si)) for si in range(steps)])


def _kl_allocated(prog: list[Item], steps: int, leak: bool = True) -> np.ndarray:
    """[steps, kernels] allocated MB (the logits of this step stay referenced after they die)."""
    base, j_dead = _kl_alloc_base(prog)
    if not leak:
        return np.repeat(base[None, :], steps, axis=0)
    held = _kl_held(steps) * KL_LOGITS_MB
    out = np.zeros((steps, len(base)))
    for si in range(steps):
        out[si] = base + held[si]
        out[si, j_dead:] += KL_LOGITS_MB
    return out


def _kl_allocator(
    prog: list[Item], alloc: np.ndarray
) -> tuple[np.ndarray, dict[int, dict[int, float]]]:
    """The caching allocator's reservation per step and kernel, and its releases.

    Its cache is fragmented: a kernel's output block (``KL_BIG_MB`` or more) fits only while the
    allocated bytes, the block and ``KL_FRAG_MB`` of unusable cache stay under the limit. When they
    do not, it synchronizes the device, frees its cached segments and mallocs the block anew
    (``release_cached_blocks``), a stall on the host; the reservation then restarts from the
    allocated bytes.

    Returns:
        reserved [steps, kernels] MB, releases {step index: {kernel index: freed MB}}.
    """
    out = np.array([2 * _numel(k.out_shapes) / MIB for k in _kernels(prog)])
    steps, nk = alloc.shape
    res = np.zeros_like(alloc)
    rel: dict[int, dict[int, float]] = {}
    r = min(KL_LIMIT_MB, float(alloc[0].max()) + KL_FRAG_MB)
    prev = float(alloc[0, -1])
    for si in range(-1, steps):  # one step before the capture settles the state
        row = alloc[max(si, 0)]
        for j in range(nk):
            a = float(row[j])
            need = a + float(out[j]) + KL_FRAG_MB
            if out[j] >= KL_BIG_MB and need > KL_LIMIT_MB:
                if si >= 0:
                    rel.setdefault(si, {})[j] = round(max(r - prev, 0.0), 3)
                r = a + float(out[j]) + KL_FRESH_MB
            else:
                r = max(r, min(need, KL_LIMIT_MB))
            if si >= 0:
                res[si, j] = r
            prev = a
    return res, rel


def _kl_calls(rng: np.random.Generator, freed: float) -> list[tuple[str, float]]:
    n = max(1, math.ceil(freed / KL_SEGMENT_MB))
    c = [("aclrtFree", round(float(rng.uniform(*KL_FREE_US)), 1)) for _ in range(n)]
    c.append(("aclrtMalloc", round(float(rng.uniform(*KL_MALLOC_US)), 1)))
    return c


def _kl_samples(nk: int, rel: dict[int, float]) -> list[int]:
    """Kernel indices of one step's memory_record samples (every 8th kernel, the last, releases)."""
    pts = set(range(0, nk, 8)) | {nk - 1}
    for j in rel:
        pts |= {j - 1, j}
    return sorted(p for p in pts if p >= 0)


def kl_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = kl_program()
    alloc = _kl_allocated(prog, steps)
    res, rel = _kl_allocator(prog, alloc)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 3501)
    for si, at in rel.items():
        p.alloc_calls[si] = {}
        p.step_host_gaps[si] = {}
        for r in range(ranks):
            calls = {j: _kl_calls(rng, freed) for j, freed in at.items()}
            p.alloc_calls[si][r] = calls
            p.step_host_gaps[si][r] = {
                j: round(sum(d for _a, d in c) + len(c) + KL_RETURN_US, 1) for j, c in calls.items()
            }
    nk = alloc.shape[1]
    for r in range(ranks):
        off = 4.0 * (r % RANKS_PER_NODE)
        p.mem_record[r] = [
            [
                (
                    j,
                    round(float(alloc[si, j]) + off, 1),
                    round(float(res[si, j]) + off, 1),
                    round(float(alloc[si, j]) + off + 48.0, 1),
                )
                for j in _kl_samples(nk, rel.get(si, {}))
            ]
            for si in range(steps)
        ]
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        hidden_size=KL_H,
        num_attention_heads=KL_HEADS,
        num_query_groups=KL_KV,
        ffn_hidden_size=KL_FFN,
        padded_vocab_size=KL_VOCAB,
        seq_length=KL_SEQ,
        micro_batch_size=1,
        num_layers=LAYERS,
        bf16=True,
    )
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def _kl_idle(cl: Cluster, si: int, r: int, j: int) -> float:
    """Device idle (µs) before program kernel ``j`` on rank ``r`` in step index ``si``."""
    st = cl.steps[si]
    prev = int(st.k_start[r, j - 1] + st.k_dur[r, j - 1])
    for op in st.ops:
        if prev < int(op.end[r]) <= int(st.k_start[r, j]):
            prev = int(op.end[r])
    return max(int(st.k_start[r, j]) - prev, 0) / 1000


def kl_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: allocated grows by one step's logits a step; the last steps release the cache."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    alloc = _kl_allocated(cl.program, steps)
    res, rel = _kl_allocator(cl.program, alloc)
    hit = sorted(rel)
    clean = [si for si in range(steps) if si not in rel]
    per_step = [len(rel.get(si, {})) for si in range(steps)]
    calls = cl.perturb.alloc_calls
    idle = {
        si: float(np.median([sum(_kl_idle(cl, si, r, j) for j in rel[si]) for r in range(ranks)]))
        for si in hit
    }
    call_us = [
        sum(d for _a, d in c) for si in hit for per in calls[si].values() for c in per.values()
    ]
    step = col(m, "step_us")
    free = col(m, "free_us")
    base = _baseline(cl)
    extra = np.median(step, axis=0) - np.median(base["step_us"], axis=0)
    start_alloc = alloc[:, 0]
    growth = np.diff(start_alloc)
    grow_med = float(np.median(growth)) if len(growth) else 0.0
    mean_a = float(np.median(step.mean(axis=1)))
    mean_b = float(np.median(base["step_us"].mean(axis=1)))
    ks = cl.kernels
    rel_ops = sorted({ks[j].op_type for at in rel.values() for j in at})
    nums: dict[str, Any] = {
        "vocab_size": KL_VOCAB,
        "tokens_per_step": KL_T,
        "logits_shape": f"{KL_T},{KL_VOCAB}",
        "logits_mb": _r(KL_LOGITS_MB),
        "allocated_mb_growth_per_step": _r(grow_med),
        "logits_held_at_first_step_start": int(_kl_held(steps)[0]),
        "logits_held_at_last_step_start": int(_kl_held(steps)[-1]),
        "allocated_mb_at_first_step_start": _r(float(start_alloc[0])),
        "allocated_mb_at_last_step_start": _r(float(start_alloc[-1])),
        "allocated_peak_mb_first_step": _r(float(alloc[0].max())),
        "allocated_peak_mb_last_step": _r(float(alloc[-1].max())),
        "allocator_limit_mb": KL_LIMIT_MB,
        "reserved_mb_max": _r(float(res.max())),
        "headroom_mb_last_step": _r(KL_LIMIT_MB - float(alloc[-1].max())),
        "steps_to_oom_after_capture": math.ceil(
            (KL_LIMIT_MB - float(alloc[-1].max())) / KL_LOGITS_MB
        ),
        "cache_releases_per_step": per_step,
        "cache_releases_in_capture": int(sum(per_step)),
        "first_release_step": ids[hit[0]] if hit else None,
        "affected_steps": [ids[si] for si in hit],
        "clean_steps": [ids[si] for si in clean],
        "release_call_us_median": _med(call_us) if call_us else 0.0,
        "release_idle_us_per_step": [_r(idle.get(si, 0.0)) for si in range(steps)],
        "release_before_op_types": rel_ops,
        "step_us_per_step": [_r(float(x)) for x in np.median(step, axis=0)],
        "step_us_first_step": _r(float(np.median(step[:, 0]))),
        "step_us_last_step": _r(float(np.median(step[:, -1]))),
        "step_us_clean_steps_median": _med(step[:, clean]) if clean else None,
        "free_us_last_step_median": _med(free[:, -1]),
        "free_us_first_step_median": _med(free[:, 0]),
        "extra_us_last_step": _r(float(extra[-1])),
        "extra_us_per_affected_step": [_r(float(extra[si])) for si in hit],
        "mean_step_us": _r(mean_a),
        "mean_step_us_no_leak": _r(mean_b),
        "saving_us_per_step_average": _r(mean_a - mean_b),
        "saving_us_last_step": _r(float(extra[-1])),
        "saving_share_of_mean_step": round((mean_a - mean_b) / mean_a, 4),
    }
    key = _key([], "scheduling", ["expandable-segments-allocator"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "degradation",
        "scheduling",
        steps=[ids[si] for si in hit],
        metrics={
            "allocated_mb_growth_per_step": nums["allocated_mb_growth_per_step"],
            "cache_releases_in_capture": nums["cache_releases_in_capture"],
            "extra_us_last_step": nums["extra_us_last_step"],
            "saving_us_per_step_average": nums["saving_us_per_step_average"],
        },
    )
    return _with_evidence(
        key,
        rc,
        memory_file="memory_record.csv",
        component="PTA",
        allocated_growth_mb_per_step=_r(grow_med),
        leaked_tensor_shape=f"{KL_T},{KL_VOCAB}",
        leaked_tensor_op="MatMulV2 (the LM head: output 4096,128256 bf16)",
        allocated_grows_every_step=True,
        same_on_every_rank=True,
        affected_steps=[ids[si] for si in hit],
        apis=["aclrtSynchronizeDevice", "aclrtFree", "aclrtMalloc"],
        file="memory_record.csv (PTA Total Allocated at the start of every step ~1002 MB higher than "
        "the step before on every rank, the size of one step's [4096, 128256] bf16 logits; Total "
        "Reserved pinned at the ~61.4 GB limit in the last steps and dropping at each release), "
        "trace_view.json (CANN lane of every rank: aclrtSynchronizeDevice + aclrtFree + aclrtMalloc "
        "before some kernels of the last steps, more each step, none in the first ones) and "
        "step_trace_time.csv (Free and step time growing over the last steps on every rank alike)",
        kernels_normal=True,
        links_normal=True,
        late_rank=False,
        all_ranks=True,
        alloc_conf_set=False,
        cause="the training loop keeps a reference to every step's logits (e.g. appended to a list "
        "for a metric / a log of the outputs without .detach().cpu() or .item()): allocated memory "
        "grows by one [4096, 128256] bf16 logits tensor (~1 GB) a step on every rank; near the "
        "card's limit the caching allocator can no longer serve the forward's activations from its "
        "cache and synchronizes, frees its cached segments and mallocs anew, more often every step, "
        "until the run dies with an out-of-memory error",
        fix="drop the reference to the logits (keep loss.item() / a detached CPU copy of what the "
        "metric needs, or compute the metric on the device and keep only the number); "
        "expandable_segments or empty_cache() only delay the out-of-memory error",
    )


# ---------------------------------------------------------------- alloc-cache-off-node
AO_NODE = 1
AO_MALLOC_US = (14.0, 0.28)  # aclrtMalloc: fixed + per MB of the block
AO_FREE_US = (9.0, 0.1)  # aclrtFree: fixed + per MB
AO_JITTER = 0.1
AO_RETURN_US = 30.0  # from the last call to the kernel (bookkeeping, the launch)
AO_STATIC_MB = 24576.0
AO_ACT_MB = 16384.0  # activations at the end of the forward
AO_CACHE_MB = 5120.0  # what the caching allocator holds beyond the peak (node 0)


def _ao_ranks(ranks: int) -> list[int]:
    node = min(AO_NODE, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def _ao_blocks(ks: list[Kernel], j: int) -> tuple[list[float], float]:
    """(MB freed, MB allocated) right before kernel ``j``: what dies with the previous op, its output.

    The previous kernel's inputs that are not kept for the backward die in the forward (one block);
    the backward frees the saved activation and the incoming gradient (two blocks).
    """
    prev = ks[j - 1]
    ins = [s for s in prev.in_shapes.split(";") if s]
    sizes = [2 * _numel(s) / 1e6 for s in ins]
    bwd = prev.tag.endswith(("_dx", "_dw")) or prev.op_type.endswith("Grad")
    freed = sizes[:2] if bwd else sizes[:1]
    return freed, 2 * _numel(ks[j].out_shapes) / 1e6


def _ao_calls(rng: np.random.Generator, ks: list[Kernel], j: int) -> list[tuple[str, float]]:
    freed, new = _ao_blocks(ks, j)

    def us(base: tuple[float, float], mb: float) -> float:
        jit = 1.0 + AO_JITTER * float(np.clip(rng.standard_normal(), -2, 2))
        return round((base[0] + base[1] * mb) * jit, 1)

    out = [("aclrtFree", us(AO_FREE_US, mb)) for mb in freed]
    out.append(("aclrtMalloc", us(AO_MALLOC_US, new)))
    return out


def _ao_alloc(ks: list[Kernel]) -> np.ndarray:
    """Allocated MB at each kernel's start: activations grow through the forward, fall backward."""
    n_fwd = next(j for j, k in enumerate(ks) if k.tag == "mlp_down_dx")
    n_bwd = next(j for j, k in enumerate(ks) if k.op_type == "ForeachMulScalar") - n_fwd
    out = np.zeros(len(ks))
    for j in range(len(ks)):
        if j < n_fwd:
            a = AO_ACT_MB * (j + 1) / n_fwd
        elif j < n_fwd + n_bwd:
            a = AO_ACT_MB * (1 - (j - n_fwd + 1) / (n_bwd + 1))
        else:
            a = 0.0
        out[j] = AO_STATIC_MB + a
    return out


def ao_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=LAYERS)
    ks = _kernels(prog)
    bad = _ao_ranks(ranks)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 3504)
    for si in range(steps):
        p.alloc_calls[si] = {}
        p.step_host_gaps[si] = {}
        for r in bad:
            calls = {j: _ao_calls(rng, ks, j) for j in range(1, len(ks))}
            p.alloc_calls[si][r] = calls
            p.step_host_gaps[si][r] = {
                j: round(sum(d for _a, d in c) + len(c) + AO_RETURN_US, 1) for j, c in calls.items()
            }
    alloc = _ao_alloc(ks)
    pts = sorted(set(range(0, len(ks), 6)) | {len(ks) - 1})
    for r in range(ranks):
        off = 4.0 * (r % RANKS_PER_NODE)
        resv = float(alloc.max()) + AO_CACHE_MB + off
        p.mem_record[r] = [
            [
                (
                    j,
                    round(float(alloc[j]) + off, 1),
                    round(float(alloc[j]) + off if r in bad else resv, 1),
                    round(float(alloc[j]) + off, 1),
                )
                for j in pts
            ]
            for _si in range(steps)
        ]
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def ao_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1 goes to the device for every allocation and free; node 0 waits."""
    cl: Cluster = m[""]["cluster"]
    bad = _ao_ranks(ranks)
    good = [r for r in range(ranks) if r not in bad]
    calls = cl.perturb.alloc_calls
    n_calls = {api: 0 for api in ("aclrtFree", "aclrtMalloc")}
    span: list[float] = []
    for si in range(steps):
        for c in calls[si][bad[0]].values():
            for api, _d in c:
                n_calls[api] += 1
            span.append(sum(d for _a, d in c))
    idle = []
    for si, st in enumerate(cl.steps):
        for r in bad:
            tot = 0.0
            for j in calls[si][r]:
                prev = int(st.k_start[r, j - 1] + st.k_dur[r, j - 1])
                for op in st.ops:
                    if prev < int(op.end[r]) <= int(st.k_start[r, j]):
                        prev = int(op.end[r])
                tot += max(int(st.k_start[r, j]) - prev, 0) / 1000
            idle.append(tot)
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    mem = cl.perturb.mem_record
    gap_bad = [x[2] - x[1] for r in bad for per in mem[r] for x in per]
    gap_good = [x[2] - x[1] for r in good for per in mem[r] for x in per]
    nk = len(cl.kernels)
    nums: dict[str, Any] = {
        "culprit_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "kernels_per_step": nk,
        "frees_per_step": n_calls["aclrtFree"] // steps,
        "mallocs_per_step": n_calls["aclrtMalloc"] // steps,
        "device_syncs_per_step": len(calls[0][bad[0]]),
        "alloc_calls_us_before_kernel_median": _med(span),
        "culprit_alloc_idle_us_per_step": _med(idle),
        "culprit_free_us_per_step": _r(float(free[bad].mean())),
        "others_free_us_per_step": _r(float(free[good].mean())) if good else 0.0,
        "culprit_computing_us_per_step": _r(float(comp[bad].mean())),
        "others_computing_us_per_step": _r(float(comp[good].mean())) if good else 0.0,
        "culprit_reserved_minus_allocated_mb_max": _r(max(gap_bad)),
        "others_reserved_minus_allocated_mb_median": _med(gap_good) if gap_good else 0.0,
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "victim_wait_us_per_step": _r(float(wait[good].mean())) if good else 0.0,
        "median_step_us": _r(a),
        "median_step_us_cached": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(bad, "scheduling", ["host-dispatch-bound"], "free_us", nums)
    vic = [r for r in good if float(wait[r].mean()) > float(wait[bad].mean()) + 1000.0]
    rc = root_cause(
        "slow_group",
        "scheduling",
        "group",
        ranks=bad,
        victims=vic,
        not_slow=not_slow_sample(ranks, bad, vic),
        metrics={
            "culprit_free_us_per_step": nums["culprit_free_us_per_step"],
            "culprit_alloc_idle_us_per_step": nums["culprit_alloc_idle_us_per_step"],
            "victim_wait_us_per_step": nums["victim_wait_us_per_step"],
            "culprit_wait_us_per_step": nums["culprit_wait_us_per_step"],
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
        apis=["aclrtSynchronizeDevice", "aclrtFree", "aclrtMalloc"],
        lane="trace_view.json of ranks 8-15, CANN thread: before every kernel launch an "
        "AscendCL@aclrtSynchronizeDevice (until the device has drained), one or two aclrtFree and "
        "an aclrtMalloc sized like the kernel's output; none on ranks 0-7",
        file="trace_view.json of ranks 8-15 (the allocator's runtime calls around every launch, the "
        "device idle ~0.1 ms before every kernel), memory_record.csv (ranks 8-15: Total Reserved "
        "equal to Total Allocated at every sample, no cache; ranks 0-7: ~5 GB reserved above the "
        "peak, flat), profiler_metadata.json (PYTORCH_NPU_ALLOC_CONF empty on both nodes) and "
        "communication.json of ranks 0-7 (Wait Time in every collective)",
        every_kernel=True,
        kernels_normal=True,
        links_normal=True,
        launch_calls_normal=True,
        alloc_conf_differs=False,
        cause=f"the caching allocator is off on node {node} (PYTORCH_NO_NPU_MEMORY_CACHING=1 left in "
        "that node's launch script from a memory investigation): every tensor is allocated with "
        "aclrtMalloc and freed with aclrtFree after a device synchronize, so the host of ranks "
        f"{bad[0]}-{bad[-1]} waits for its device before nearly every launch and the device idles "
        "~0.1 ms before every kernel; node 0 waits for node 1 in every collective",
        fix=f"unset PYTORCH_NO_NPU_MEMORY_CACHING on node {node} (the same launch environment as "
        "node 0): the caching allocator serves the tensors from its cache without device calls; "
        "to debug memory use the memory snapshot / memory_record instead of disabling the cache",
    )


# ---------------------------------------------------------------- registry
DEV35_SCENARIOS = (
    ScenarioSpec(
        "fp32-residual-stream",
        "the model code keeps the residual stream in fp32 (fp32 residual connection) while norms and "
        "MatMuls run in bf16: 4 Casts (DT_BF16 <-> DT_FLOAT) and 2 fp32 Adds on the [8192, 1024] "
        "activation per layer forward and backward, every rank alike; job-level, MatMuls and links "
        "normal",
        16,
        4,
        fr_plans,
        fr_answer,
    ),
    ScenarioSpec(
        "grad-allreduce-fp32",
        "bf16 training with the gradient buffers all-reduced in fp32: every per-layer gradient "
        "hcom_allReduce_ has data_type FP32 and moves 4 bytes per weight (~317 MB for 79.3M), no "
        "longer hidden behind the next layer's backward; exposed on every rank alike; job-level, "
        "links normal",
        16,
        4,
        gr_plans,
        gr_answer,
    ),
    ScenarioSpec(
        "logits-kept-across-steps",
        "every step's [4096, 128256] bf16 logits kept referenced by the training loop: PTA allocated "
        "~1 GB higher at every step start on every rank; near the 61.4 GB limit the caching "
        "allocator synchronizes, frees and mallocs before some kernels, more each step, the last "
        "steps slower on every rank alike",
        16,
        8,
        kl_plans,
        kl_answer,
    ),
    ScenarioSpec(
        "alloc-cache-off-node",
        "the caching allocator off on node 1 (PYTORCH_NO_NPU_MEMORY_CACHING=1): ranks 8-15 call "
        "aclrtSynchronizeDevice + aclrtFree + aclrtMalloc before every kernel launch, the device idles "
        "~0.1 ms before every kernel, reserved == allocated; node 0 waits; kernels and links normal",
        16,
        4,
        ao_plans,
        ao_answer,
        min_ranks=16,
        rank_multiple=RANKS_PER_NODE,
    ),
)
DEV35_KINDS = tuple(s.name for s in DEV35_SCENARIOS)


__all__ = ["DEV35_KINDS", "DEV35_SCENARIOS"]
