"""Twenty-fourth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev26.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the ``Block Dim`` and ``Duration`` columns of
kernel_details.csv for a few operator types whose counts are normal, the ``ViewCopy`` / ``AsStrided``
rows of op_statistic.csv / kernel_details.csv between the MatMuls, the device-to-host ``MEMCPY_ASYNC``
tasks and ``python_function`` frames of one rank's trace_view.json with the other ranks' Wait Time in
communication.json, and the host ``cpu_op`` / ``AscendCL@aclrtMemcpy`` events at every micro-batch
start of trace_view.json with the Free of step_trace_time.csv):

- ``torch-deterministic-on``: ``torch.use_deterministic_algorithms(True)`` left in the training
  script after a reproducibility check: the operators whose parallel form accumulates in an
  unspecified order take their deterministic path on every rank: the embedding backward
  (``EmbeddingDenseGradV2``, ~60x), the cross-entropy gradient's ``IndexPutV2`` (~90x), both on one
  core (Block Dim 1), and the 8 ``ReduceSum`` of the norm weights' gradients (~11x, Block Dim 8);
  the same operators and counts as a normal run, MatMuls and FlashAttention normal. Job-level.
- ``contiguous-copy-churn``: a model port that calls ``.transpose(...).contiguous()`` around the
  attention (q / k / v to ``[b, heads, s, d]`` and back, the layer's ``[s, b, h]`` <-> ``[b, s, h]``)
  and slices rotary halves: 64 ``ViewCopy`` and 16 ``AsStrided`` kernels per step (per layer 12
  copies of a whole activation, ~207 µs each, and 8 of a rotary half, ~116 µs, forward and backward)
  between the MatMuls, memory-bound copies of the activations, on every rank alike. Job-level.
- ``tensor-dump-one-rank``: a precision-debugging dump (msprobe ``PrecisionDebugger``, task
  ``tensor``, ``rank: [6]``) left enabled for rank 6 only: after every transformer sub-module's
  forward and backward that rank copies the activation (``[4096, 1, 4096]`` bf16, 33.5 MB) to the
  host (a device-to-host ``MEMCPY_ASYNC`` with a stream synchronize) and writes it to disk
  (``torch.save`` frames), 16 times a step; its device idles meanwhile and every other rank waits
  for it in the gradient all-reduces. Culprit: rank 6 (its host); devices and links normal.
- ``host-built-attention-mask``: the training loop builds the attention mask on the host as a full
  ``(batch, seq, seq)`` fp32 tensor (``torch.tril(torch.ones(1, 4096, 4096))`` without ``device=``)
  and copies it to the device at the start of each of the 2 micro-batches of a step: ~21 ms of
  ``aten::ones`` / ``aten::tril`` on the CPU and a ~12 ms blocking ``aclrtMemcpy`` of 67 MB from
  pageable memory each time, while the device idles, on every rank alike. Job-level.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    RANKS_PER_NODE,
    Cluster,
    Collective,
    D2HPull,
    HostCall,
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
    transformer,
)
from advisor_chat.synth.scenarios_dev import _rank_rc, _with_evidence
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_dev4 import _resimulate, _sim_breakdown
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_dev19 import _kernel_us, _med, _saving
from advisor_chat.synth.scenarios_dev20 import TE_VOCAB, _te_kernels
from advisor_chat.synth.scenarios_ext import coll_wait_us
from advisor_chat.synth.writer import d2h_pulls_span_us, host_calls_span_us

LAYERS = 4
HBM_BPS = 1.3e12  # effective HBM bandwidth of a contiguous memory-bound vector kernel (bytes/s)
LEAD_US = 1800.0  # default_perturb's host lead over the device


def _kernels(prog: list[Item]) -> list[Kernel]:
    return [it for it in prog if isinstance(it, Kernel)]


def _numel(shape: str) -> int:
    return int(np.prod([int(x) for x in shape.split(",")]))


def _fwd_bwd_tail(prog: list[Item]) -> tuple[int, int]:
    """(index of the first backward kernel, index of the optimizer's first kernel) in ``prog``."""
    first_bwd = next(
        j for j, it in enumerate(prog) if isinstance(it, Kernel) and it.tag == "mlp_down_dx"
    )
    opt = next(
        j
        for j, it in enumerate(prog)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    return first_bwd, opt


# ---------------------------------------------------------------- torch-deterministic-on
DT_TAG = "det"  # tag prefix of the operators with a deterministic path
# (normal µs, normal block dim, deterministic µs, deterministic block dim)
DT_EMB = (160.0, 40, 9600.0, 1)
DT_INDEX_PUT = (40.0, 40, 3600.0, 1)
DT_REDUCE = (28.0, 40, 310.0, 8)


def _dt_index_put() -> Kernel:
    """grad_logits[arange, target] -= 1 (the cross-entropy gradient), aclnnIndexPutImpl."""
    return dataclasses.replace(
        _k(
            "aclnnIndexPutImpl_IndexPutV2_IndexPutV2",
            "IndexPutV2",
            "AI_VECTOR_CORE",
            f"{S},{TE_VOCAB};{S};{S}",
            f"{S},{TE_VOCAB}",
            DT_INDEX_PUT[0],
            "aclnnIndexPutImpl",
            f"{DT_TAG}_index_put",
            bd=DT_INDEX_PUT[1],
            dt="DT_FLOAT",
        ),
        in_dtypes="DT_FLOAT;DT_INT64;DT_FLOAT",
    )


def _dt_reduce() -> Kernel:
    """The norm weight's gradient: sum over the tokens of x_hat * dy (fp32), aclnnReduceSum."""
    return _k(
        "aclnnReduceSum_ReduceSum_ReduceSum",
        "ReduceSum",
        "AI_VECTOR_CORE",
        f"{S},{H};1",
        f"{H}",
        DT_REDUCE[0],
        "aclnnReduceSum",
        f"{DT_TAG}_reduce_sum",
        bd=DT_REDUCE[1],
        dt="DT_FLOAT",
    )


def _det(k: Kernel) -> Kernel:
    """The deterministic path of an operator (fixed-order accumulation: fewer cores, longer)."""
    spec = {
        "EmbeddingDenseGradV2": DT_EMB,
        "IndexPutV2": DT_INDEX_PUT,
        "ReduceSum": DT_REDUCE,
    }[k.op_type]
    return dataclasses.replace(k, dur_us=spec[2], block_dim=spec[3])


def dt_program(deterministic: bool = True) -> list[Item]:
    """Embedding + transformer(4 layers) + LM head and loss; the embedding gradient after the layers.

    ``deterministic``: the embedding backward, the loss gradient's IndexPutV2 and the norm weights'
    ReduceSum take their deterministic path.
    """
    ks = _te_kernels()
    emb_grad = dataclasses.replace(ks["embedding_grad"], tag=f"{DT_TAG}_embedding_grad")
    base = transformer(layers=LAYERS)
    first_bwd, _opt = _fwd_bwd_tail(base)
    last_bwd = max(j for j, it in enumerate(base) if isinstance(it, Kernel) and it.tag == "qkv_dw")
    head: list[Item] = [
        ks["lm_head"],
        ks["cross_entropy"],
        ks["cross_entropy_grad"],
        _dt_index_put(),
        ks["lm_head_dx"],
        ks["lm_head_dw"],
    ]
    out: list[Item] = [ks["embedding"]]
    for j, it in enumerate(base):
        if j == first_bwd:
            out += head
        out.append(it)
        if isinstance(it, Kernel) and it.op_type == "RmsNormGrad":
            out.append(_dt_reduce())
        if j == last_bwd + 2:  # after the last layer's gradient all-reduce
            out.append(emb_grad)
    if deterministic:
        out = [_det(it) if isinstance(it, Kernel) and _is_dt(it) else it for it in out]
    return out


def _is_dt(k: Kernel) -> bool:
    return k.tag.startswith(DT_TAG + "_")


def dt_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return {
        "": Plan(
            dt_program(), group_kinds(ranks, 1), default_perturb(ranks), _info(CANN8, 1, ranks)
        )
    }


def dt_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: a few operator types on their deterministic path on every rank; counts normal."""
    cl: Cluster = m[""]["cluster"]
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    det = _kernel_us(cl, _is_dt)
    by_op = {
        op: _kernel_us(cl, lambda k, op=op: _is_dt(k) and k.op_type == op)
        for op in ("EmbeddingDenseGradV2", "IndexPutV2", "ReduceSum")
    }
    mm = _kernel_us(cl, lambda k: k.op_type == "MatMulV2")
    normal = dt_program(deterministic=False)
    healthy = dataclasses.replace(cl, perturb=default_perturb(ranks))
    bcl = _resimulate(healthy, normal)
    base = _sim_breakdown(bcl)
    b_det = _kernel_us(bcl, _is_dt)
    a, b, save = _saving(step, base["step_us"])
    n_det = sum(1 for k in cl.kernels if _is_dt(k))
    counts = {op: sum(1 for k in cl.kernels if _is_dt(k) and k.op_type == op) for op in by_op}
    nums = {
        "deterministic_kernels_per_step": n_det,
        "embedding_grad_per_step": counts["EmbeddingDenseGradV2"],
        "index_put_per_step": counts["IndexPutV2"],
        "reduce_sum_per_step": counts["ReduceSum"],
        "embedding_grad_us": _med(by_op["EmbeddingDenseGradV2"]),
        "embedding_grad_us_normal": DT_EMB[0],
        "index_put_us": _med(by_op["IndexPutV2"]),
        "index_put_us_normal": DT_INDEX_PUT[0],
        "reduce_sum_us_median": _r(
            float(np.median(by_op["ReduceSum"])) / max(counts["ReduceSum"], 1)
        ),
        "reduce_sum_us_normal": DT_REDUCE[0],
        "embedding_grad_ratio": round(
            float(np.median(by_op["EmbeddingDenseGradV2"])) / DT_EMB[0], 1
        ),
        "index_put_ratio": round(float(np.median(by_op["IndexPutV2"])) / DT_INDEX_PUT[0], 1),
        "block_dim_embedding_grad": DT_EMB[3],
        "block_dim_index_put": DT_INDEX_PUT[3],
        "block_dim_reduce_sum": DT_REDUCE[3],
        "block_dim_normal": DT_EMB[1],
        "deterministic_us_per_step": _med(det),
        "deterministic_us_per_step_normal": _med(b_det),
        "deterministic_share_of_step": _share(det, step),
        "matmul_us_per_step": _med(mm),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_nondeterministic": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "compute", ["aicpu-operators"], "computing_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={
            "deterministic_us_per_step": nums["deterministic_us_per_step"],
            "embedding_grad_ratio": nums["embedding_grad_ratio"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operators=["EmbeddingDenseGradV2", "IndexPutV2", "ReduceSum"],
        block_dim={"EmbeddingDenseGradV2": 1, "IndexPutV2": 1, "ReduceSum": DT_REDUCE[3]},
        block_dim_normal=DT_EMB[1],
        shapes={
            "EmbeddingDenseGradV2": f"1,{S},{H};1,{S} -> {TE_VOCAB},{H}",
            "IndexPutV2": f"{S},{TE_VOCAB};{S};{S}",
            "ReduceSum": f"{S},{H};1 -> {H}",
        },
        counts_normal=True,
        file="kernel_details.csv (EmbeddingDenseGradV2 ~9.6 ms and IndexPutV2 ~3.6 ms with Block Dim 1, "
        "the 8 ReduceSum ~0.31 ms with Block Dim 8, where the same operators normally take ~160 / "
        "~40 / ~28 µs on 40 cores; the same operators and counts as a normal run) and "
        "op_statistic.csv (EmbeddingDenseGradV2 / IndexPutV2 among the top operator types by time)",
        matmuls_normal=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause="torch.use_deterministic_algorithms(True) was left in the training script after a "
        "reproducibility check: the operators whose parallel form accumulates in an unspecified "
        "order (the embedding backward's scatter-add, the cross-entropy gradient's index_put, the "
        "norm weights' ReduceSum) take their deterministic path with a fixed accumulation order, "
        "on one or a few cores, ~10-90x slower, on every rank alike",
        fix="turn deterministic mode off for training runs (remove torch.use_deterministic_algorithms"
        "(True) / set it to False, and drop the matching deterministic settings of the launch "
        "script); keep it only for short reproducibility or precision-alignment runs",
    )


# ---------------------------------------------------------------- contiguous-copy-churn
CC_TAG = "contig"
CC_HEADS, CC_HEAD_DIM = 32, 128
CC_TRANSPOSE_BPS = 0.33e12  # a transposing copy (strided reads) reaches ~1/4 of HBM bandwidth
CC_STRIDED_BPS = 0.30e12  # a copy of every other half of the last axis


def _cc_view_copy(dst: str, src: str, nbytes: int, bps: float, tag: str) -> Kernel:
    """x.contiguous() of a non-contiguous view: aclnnInplaceCopy -> ViewCopy.

    Inputs: dst, its size, stride and offset, then src, its size, stride and offset.
    """
    return Kernel(
        name="aclnnInplaceCopy_ViewCopy_ViewCopy",
        op_type="ViewCopy",
        core="AI_VECTOR_CORE",
        in_shapes=f"{dst};4;4;1;{src};4;4;1",
        in_dtypes="DT_BF16;DT_INT64;DT_INT64;DT_INT64;DT_BF16;DT_INT64;DT_INT64;DT_INT64",
        in_formats=";".join(["ND"] * 8),
        out_shapes=dst,
        out_dtypes="DT_BF16",
        out_formats="ND",
        dur_us=round(2 * nbytes / bps * 1e6 + 4.0, 1),
        block_dim=40,
        api="aclnnInplaceCopy",
        tag=f"{CC_TAG}_{tag}",
    )


def _cc_as_strided(shape: str, nbytes: int, tag: str) -> Kernel:
    """A rotary half (x[..., :64] / x[..., 64:]) made contiguous: aclnnAsStrided -> AsStrided."""
    return Kernel(
        name="aclnnAsStrided_AsStrided_AsStrided",
        op_type="AsStrided",
        core="AI_VECTOR_CORE",
        in_shapes=f"{shape.rsplit(',', 1)[0]},{CC_HEAD_DIM};4;4;1",
        in_dtypes="DT_BF16;DT_INT64;DT_INT64;DT_INT64",
        in_formats="ND;ND;ND;ND",
        out_shapes=shape,
        out_dtypes="DT_BF16",
        out_formats="ND",
        dur_us=round(2 * nbytes / CC_STRIDED_BPS * 1e6 + 4.0, 1),
        block_dim=40,
        api="aclnnAsStrided",
        tag=f"{CC_TAG}_{tag}",
    )


def _cc_copies() -> dict[str, list[Kernel]]:
    sbhd = f"{S},1,{CC_HEADS},{CC_HEAD_DIM}"
    bhsd = f"1,{CC_HEADS},{S},{CC_HEAD_DIM}"
    sbh, bsh = f"{S},1,{H}", f"1,{S},{H}"
    half = f"1,{CC_HEADS},{S},{CC_HEAD_DIM // 2}"
    full_b = 2 * S * H
    half_b = full_b // 2

    def vc(dst: str, src: str, tag: str, nbytes: int = full_b) -> Kernel:
        bps = CC_TRANSPOSE_BPS if nbytes == full_b else CC_STRIDED_BPS
        return _cc_view_copy(dst, src, nbytes, bps, tag)

    return {
        "layer_in": [vc(bsh, sbh, "layer_in")],
        "qkv": [vc(bhsd, sbhd, t) for t in ("q", "k", "v")]
        + [_cc_as_strided(half, half_b, f"rope_{t}") for t in ("q1", "q2", "k1", "k2")],
        "ctx": [vc(sbhd, bhsd, "ctx")],
        "layer_out": [vc(sbh, bsh, "layer_out")],
        "grad_out": [vc(bsh, sbh, "grad_layer_out")],
        "grad_ctx": [vc(bhsd, sbhd, "grad_ctx")],
        "grad_qkv": [vc(sbhd, bhsd, f"grad_{t}") for t in ("q", "k", "v")]
        + [vc(bhsd, half, f"grad_rope_{t}", half_b) for t in ("q1", "q2", "k1", "k2")],
        "grad_in": [vc(sbh, bsh, "grad_layer_in")],
    }


def cc_program(copies: bool = True) -> list[Item]:
    """transformer(4 layers); with ``copies`` the contiguous copies around every attention."""
    base = transformer(layers=LAYERS)
    if not copies:
        return base
    cp = _cc_copies()
    first_bwd, opt = _fwd_bwd_tail(base)
    out: list[Item] = []
    for pos, it in enumerate(base[:first_bwd]):  # 10 kernels per layer forward (tp = 1)
        assert isinstance(it, Kernel)
        p = pos % 10
        if p == 0:
            out += cp["layer_in"]
        out.append(it)
        if p == 1:
            out += cp["qkv"]
        elif p == 2:
            out += cp["ctx"]
        elif p == 9:
            out += cp["layer_out"]
    n_norm = 0
    for it in base[first_bwd:opt]:
        if isinstance(it, Kernel) and it.tag == "mlp_down_dx":
            out += cp["grad_out"]
        if isinstance(it, Kernel) and it.op_type == "FlashAttentionScoreGrad":
            out += cp["grad_ctx"]
        out.append(it)
        if isinstance(it, Kernel) and it.op_type == "FlashAttentionScoreGrad":
            out += cp["grad_qkv"]
        if isinstance(it, Kernel) and it.op_type == "RmsNormGrad":
            n_norm += 1
            if n_norm % 2 == 0:
                out += cp["grad_in"]
    return out + base[opt:]


def _is_cc(k: Kernel) -> bool:
    return k.tag.startswith(CC_TAG + "_")


def cc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return {
        "": Plan(
            cc_program(), group_kinds(ranks, 1), default_perturb(ranks), _info(CANN8, 1, ranks)
        )
    }


def cc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: ViewCopy / AsStrided copies of the activations around every attention."""
    cl: Cluster = m[""]["cluster"]
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    cc = _kernel_us(cl, _is_cc)
    vcu = _kernel_us(cl, lambda k: _is_cc(k) and k.op_type == "ViewCopy")
    asu = _kernel_us(cl, lambda k: _is_cc(k) and k.op_type == "AsStrided")
    mm = _kernel_us(cl, lambda k: k.op_type == "MatMulV2")
    copies = [k for k in cl.kernels if _is_cc(k)]
    n_vc = sum(1 for k in copies if k.op_type == "ViewCopy")
    n_as = len(copies) - n_vc
    big = max(copies, key=lambda k: k.dur_us)
    base = _baseline(cl, cc_program(copies=False))
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "copy_kernels_per_step": len(copies),
        "view_copy_per_step": n_vc,
        "as_strided_per_step": n_as,
        "copies_per_layer": len(copies) // LAYERS,
        "view_copy_us_median": _r(
            float(np.median([k.dur_us for k in copies if k.op_type == "ViewCopy"]))
        ),
        "as_strided_us_median": _r(
            float(np.median([k.dur_us for k in copies if k.op_type == "AsStrided"]))
        ),
        "largest_copy_shape": big.out_shapes,
        "copy_us_per_step": _med(cc),
        "view_copy_us_per_step": _med(vcu),
        "as_strided_us_per_step": _med(asu),
        "copy_share_of_step": _share(cc, step),
        "copy_share_of_computing": _share(cc, comp),
        "matmul_us_per_step": _med(mm),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_no_copies": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    first = next(k for k in copies if k.op_type == "ViewCopy")
    key = _key(
        [],
        "compute",
        ["tiny-kernels-fusion", "shape-axis-alignment"],
        "computing_us",
        nums,
        op={"op_type": "ViewCopy", "name": first.name, "input_shapes": first.in_shapes},
    )
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={
            "copy_kernels_per_step": nums["copy_kernels_per_step"],
            "copy_us_per_step": nums["copy_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operators=["ViewCopy", "AsStrided"],
        apis=["aclnnInplaceCopy", "aclnnAsStrided"],
        per_step=len(copies),
        shapes=sorted({k.out_shapes for k in copies}),
        transpose_example=f"{S},1,{CC_HEADS},{CC_HEAD_DIM} -> 1,{CC_HEADS},{S},{CC_HEAD_DIM}",
        position="around every attention: the layer input [s,b,h] -> [b,s,h], q / k / v after the QKV "
        "MatMulV2 to [b,heads,s,d] with the rotary halves (AsStrided), the attention output back "
        "before the output MatMulV2, the layer output; the same copies of the gradients in the "
        "backward",
        file="op_statistic.csv (ViewCopy 64 and AsStrided 16 per step, ViewCopy among the top operator "
        "types by time) and kernel_details.csv (ViewCopy / AsStrided rows between the MatMulV2 and "
        "FlashAttentionScore rows, Input Shapes = the activations in transposed layouts, "
        "e.g. 4096,1,32,128 -> 1,32,4096,128, formats ND)",
        formats="ND",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause="the model code (a port from GPU code) transposes the activations around the attention "
        "and calls .contiguous() on every transposed view (q / k / v to [b, heads, s, d] and back, "
        "the layer's [s, b, h] <-> [b, s, h]) and slices the rotary halves, so every layer runs "
        "10 memory-bound copies of the activations forward and 10 backward (ViewCopy / AsStrided), "
        "on every rank alike",
        fix="keep one layout end to end and drop the .contiguous() copies: call the fused attention "
        "in the layout the tensors already have (torch_npu.npu_fusion_attention input_layout "
        "'SBH' / 'BSND' / 'BNSD' instead of transposing), use the fused rotary embedding "
        "(npu_rotary_mul / --use-fused-rotary-pos-emb) instead of slicing halves, and remove "
        "transpose(...).contiguous() pairs between layers",
    )


# ---------------------------------------------------------------- tensor-dump-one-rank
TD_RANK = 6
TD_D2H_GBPS = 22.0  # device-to-host copy
TD_WRITE_GBPS = 6.0  # torch.save of a host tensor (page cache, local disk)
TD_JITTER = 0.04
TD_FWD_FRAMES = (
    "msprobe/pytorch/service.py(121): forward_hook",
    "msprobe/core/data_dump/data_collector.py(98): forward_data_collect",
    "msprobe/core/data_dump/data_processor/pytorch_processor.py(386): dump_tensor",
    "torch/serialization.py(629): save",
)
TD_BWD_FRAMES = (
    "msprobe/pytorch/service.py(157): backward_hook",
    "msprobe/core/data_dump/data_collector.py(121): backward_data_collect",
    "msprobe/core/data_dump/data_processor/pytorch_processor.py(386): dump_tensor",
    "torch/serialization.py(629): save",
)


def _td_rank(ranks: int) -> int:
    return TD_RANK if ranks > TD_RANK else ranks - 1


def _td_positions(prog: list[Item]) -> list[tuple[int, bool]]:
    """(kernel index, forward?) right after every sub-module's forward and backward.

    Forward: after each residual Add (the attention and MLP blocks' outputs); backward: after the
    weight-gradient MatMul that closes each block (before its RmsNormGrad).
    """
    ks = _kernels(prog)
    first_bwd = next(j for j, k in enumerate(ks) if k.tag == "mlp_down_dx")
    out: list[tuple[int, bool]] = []
    for j, k in enumerate(ks[:-1]):
        if j < first_bwd and k.op_type == "Add":
            out.append((j + 1, True))
        elif j >= first_bwd and ks[j + 1].op_type == "RmsNormGrad":
            out.append((j + 1, False))
    return out


def _td_pull(fwd: bool, f: float) -> D2HPull:
    nbytes = 2 * S * H
    return D2HPull(
        f"{S},1,{H}",
        "c10::BFloat16",
        nbytes,
        round(nbytes / (TD_D2H_GBPS * 1e9) * 1e6 + 4.0, 1),
        (),
        round((nbytes / (TD_WRITE_GBPS * 1e9) * 1e6 + 250.0) * f, 1),
        TD_FWD_FRAMES if fwd else TD_BWD_FRAMES,
    )


def td_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=LAYERS)
    p = default_perturb(ranks)
    r = _td_rank(ranks)
    rng = np.random.default_rng(seed + 2603)
    pos = _td_positions(prog)
    for si in range(steps):
        pulls: dict[int, list[D2HPull]] = {}
        gaps: dict[int, float] = {}
        for j, fwd in pos:
            pl = _td_pull(fwd, 1.0 + TD_JITTER * float(np.clip(rng.standard_normal(), -2, 2)))
            pulls[j] = [pl]
            gaps[j] = round(d2h_pulls_span_us([pl]) + 40.0, 1)
        p.step_d2h_pulls[si] = {r: pulls}
        p.step_host_gaps[si] = {r: gaps}
    info = dataclasses.replace(_info(CANN8, 1, ranks), with_stack=True)
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def td_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one rank copies and writes 16 activations a step; the others wait for it."""
    cl: Cluster = m[""]["cluster"]
    bad = _td_rank(ranks)
    good = [q for q in range(ranks) if q != bad]
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    pulls = [
        pl
        for si in range(len(cl.steps))
        for at in cl.perturb.step_d2h_pulls[si][bad].values()
        for pl in at
    ]
    per_step = len(pulls) // len(cl.steps)
    n_fwd = sum(1 for _j, fwd in _td_positions(cl.program) if fwd)
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "culprit_rank": bad,
        "culprit_node": bad // RANKS_PER_NODE,
        "dumps_per_step": per_step,
        "forward_dumps_per_step": n_fwd,
        "backward_dumps_per_step": per_step - n_fwd,
        "dump_tensor_shape": pulls[0].input_dims,
        "dump_tensor_mb": _r(pulls[0].nbytes / 1e6),
        "dump_mb_per_step": _r(per_step * pulls[0].nbytes / 1e6),
        "d2h_copy_us": _r(pulls[0].copy_us),
        "write_us_median": _r(float(np.median([pl.host_us for pl in pulls]))),
        "dump_us_per_step": _r(sum(pl.copy_us + pl.host_us for pl in pulls) / len(cl.steps)),
        "culprit_free_us_per_step": _r(float(free[bad].mean())),
        "others_free_us_per_step": _r(float(free[good].mean())),
        "culprit_computing_us_per_step": _r(float(comp[bad].mean())),
        "others_computing_us_per_step": _r(float(comp[good].mean())),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "median_step_us": _r(a),
        "median_step_us_no_dump": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        [bad], "scheduling", ["sync-stream-launch-blocking", "host-dispatch-bound"], "free_us", nums
    )
    rc = _rank_rc(
        m,
        ranks,
        bad,
        "host_stall",
        "scheduling",
        metrics={
            "culprit_free_us_per_step": nums["culprit_free_us_per_step"],
            "dumps_per_step": per_step,
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_rank=bad,
        per_step=per_step,
        tensor_shape=pulls[0].input_dims,
        tensor_mb=nums["dump_tensor_mb"],
        task="MEMCPY_ASYNC (operation device to host, size(B) 33554432 = one [4096, 1, 4096] bf16 "
        "activation)",
        frames=[TD_FWD_FRAMES[0], TD_BWD_FRAMES[0], TD_FWD_FRAMES[2], TD_FWD_FRAMES[3]],
        copy_frames=["aten::to", "aten::_to_copy", "aten::copy_"],
        position="after every transformer sub-module's forward (each residual Add) and backward "
        "(before each RmsNormGrad), 16 a step, on rank 6 only",
        file="trace_view.json of rank 6 (16 device-to-host MEMCPY_ASYNC tasks a step on the compute "
        "stream, each under aten::to > aten::copy_ with aclrtMemcpyAsync + aclrtSynchronizeStream, "
        "followed by python_function frames msprobe ... dump_tensor > torch/serialization.py save of "
        "~5.8 ms; the device idle meanwhile), step_trace_time.csv (Free of rank 6) and "
        "communication.json of the other ranks (Wait Time in the gradient hcom_allReduce_)",
        kernels_normal=True,
        links_normal=True,
        every_step=True,
        others_clean=True,
        cause=f"a precision-debugging dump (msprobe PrecisionDebugger, task tensor, rank [{bad}]) was "
        f"left enabled for rank {bad}: after every transformer sub-module's forward and backward that "
        "rank copies the activation (a 33.5 MB bf16 tensor) to the host, waiting for the copy, and "
        f"writes it to disk, {per_step} times a step; its device idles meanwhile and every other rank "
        "waits for it in the gradient all-reduces",
        fix=f"turn the dump off (remove PrecisionDebugger start/stop or debugger.step from the "
        f"training loop, or empty the rank list / set the task off in its config.json) on rank "
        f"{bad}; when a dump is needed, limit it to a few steps (step list) and modules (scope / "
        "list), or dump statistics instead of whole tensors",
    )


# ---------------------------------------------------------------- host-built-attention-mask
HM_MICRO = 2  # micro-batches per step (gradient accumulation)
HM_MASK = f"1,{S},{S}"  # (batch, seq, seq)
HM_BYTES = 4 * _numel(HM_MASK)  # fp32
HM_ONES_US = 7_600.0  # aten::ones: allocate and fill 67 MB on the host
HM_TRIL_US = 13_800.0  # aten::tril on the host (one intra-op thread per rank)
HM_H2D_GBPS = 5.5  # pageable host memory -> device, through a staging buffer
HM_JITTER = 0.04
HM_TAG = "mask_cast"


def _hm_copy_us() -> float:
    return round(HM_BYTES / (HM_H2D_GBPS * 1e9) * 1e6, 1)


def _hm_calls(f: float) -> list[HostCall]:
    copy = ("aten::to", "aten::_to_copy", "aten::copy_")
    return [
        HostCall("", round(HM_ONES_US * f, 1), ("aten::ones", "aten::fill_")),
        HostCall("", round(HM_TRIL_US * f, 1), ("aten::tril",), 0.0, HM_MASK, "float"),
        HostCall("aclrtMemcpy", round(_hm_copy_us() * f, 1), copy, 0.0, HM_MASK, "float"),
    ]


def _hm_cast() -> Kernel:
    """The mask on the device turned into FlashAttention's bool atten_mask (1 = masked)."""
    return dataclasses.replace(
        _k(
            "aclnnCast_Cast_Cast",
            "Cast",
            "AI_VECTOR_CORE",
            HM_MASK,
            HM_MASK,
            round(HM_BYTES * 1.25 / HBM_BPS * 1e6 + 3.0, 1),
            "aclnnCast",
            HM_TAG,
            bd=40,
            dt="DT_BOOL",
        ),
        in_dtypes="DT_FLOAT",
    )


def _hm_fa(k: Kernel) -> Kernel:
    """FlashAttention(Grad) with the full mask as its atten_mask input."""
    return dataclasses.replace(
        k,
        in_shapes=k.in_shapes + f";1,1,{S},{S}",
        in_dtypes=k.in_dtypes + ";DT_BOOL",
        in_formats=k.in_formats + ";ND",
    )


def hm_program(mask: bool = True) -> list[Item]:
    """HM_MICRO x (forward + backward) of transformer(); gradient all-reduces in the last one.

    ``mask``: each micro-batch starts with the Cast of the host-built mask and FlashAttention takes
    it as its atten_mask (without: the causal mask FlashAttention builds itself).
    """
    base = transformer(layers=LAYERS)
    _first_bwd, opt = _fwd_bwd_tail(base)
    prog: list[Item] = []
    for mb in range(HM_MICRO):
        last = mb == HM_MICRO - 1
        if mask:
            prog.append(_hm_cast())
        for it in base[:opt]:
            if isinstance(it, Collective) and not last:
                continue
            if mask and isinstance(it, Kernel) and it.op_type.startswith("FlashAttentionScore"):
                it = _hm_fa(it)
            prog.append(it)
    return prog + base[opt:]


def _hm_starts(prog: list[Item]) -> list[int]:
    """Kernel index of each micro-batch's first kernel."""
    ks = _kernels(prog)
    n = (len(ks) - sum(1 for k in ks if k.op_type.startswith("Foreach"))) // HM_MICRO
    return [mb * n for mb in range(HM_MICRO)]


def hm_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = hm_program()
    ks = _kernels(prog)
    starts = _hm_starts(prog)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 2604)
    gaps: dict[int, dict[int, float]] = {}
    for r in range(ranks):
        p.host_calls[r] = {}
        gaps[r] = {}
        for j in starts:
            calls = _hm_calls(1.0 + HM_JITTER * float(np.clip(rng.standard_normal(), -2, 2)))
            span = host_calls_span_us(calls)
            p.host_calls[r][j] = calls
            # the host starts building after the previous launch: the device still runs what the
            # host queued ahead of it (the lead, +-15%), then idles until the mask is on the device
            ahead = 0.0 if j == 0 else LEAD_US + ks[j - 1].dur_us
            gaps[r][j] = round(max(span - ahead, 0.0) + (60.0 if j == 0 else 300.0), 1)
    # the launches the host queues after the copy follow the micro-batch's first launch
    p.step_host_gaps = {si: {r: dict(g) for r, g in gaps.items()} for si in range(steps)}
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(micro_batch_size=1, global_batch_size=HM_MICRO * ranks, seq_length=S)
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def hm_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the host builds and copies a full mask before every micro-batch; the device idles."""
    cl: Cluster = m[""]["cluster"]
    starts = _hm_starts(cl.program)
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    idle = np.zeros((cl.ranks, len(cl.steps), len(starts)))
    for si, st in enumerate(cl.steps):
        for q, j in enumerate(starts):
            prev = st.k_start[:, j - 1] + st.k_dur[:, j - 1] if j > 0 else None
            for r in range(cl.ranks):
                s0 = st.bounds(r)[0] if prev is None else int(prev[r])
                idle[r, si, q] = (int(st.k_start[r, j]) - s0) / 1000
    calls = [c for r in range(ranks) for at in cl.perturb.host_calls[r].values() for c in at]
    ones = [c.us for c in calls if c.frames[0] == "aten::ones"]
    tril = [c.us for c in calls if c.frames[0] == "aten::tril"]
    copy = [c.us for c in calls if c.api == "aclrtMemcpy"]
    host = np.median(ones) + np.median(tril) + np.median(copy)
    cast = _kernel_us(cl, lambda k: k.tag == HM_TAG)
    fixed = _resimulate(dataclasses.replace(cl, perturb=default_perturb(ranks)), hm_program(False))
    base = _sim_breakdown(fixed)
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "micro_batches_per_step": HM_MICRO,
        "mask_shape": HM_MASK,
        "mask_mb": _r(HM_BYTES / 1e6),
        "masks_copied_per_step": HM_MICRO,
        "ones_us_median": _r(float(np.median(ones))),
        "tril_us_median": _r(float(np.median(tril))),
        "build_us_median": _r(float(np.median(ones) + np.median(tril))),
        "h2d_copy_us_median": _r(float(np.median(copy))),
        "h2d_gbps": round(HM_BYTES / float(np.median(copy)) / 1e3, 2),
        "host_us_per_micro_batch": _r(float(host)),
        "host_us_per_step": _r(float(host) * HM_MICRO),
        "idle_per_micro_batch_us_median": _med(idle),
        "idle_us_per_step": _med(idle.sum(axis=2)),
        "mask_cast_us_per_step": _med(cast),
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_mask_on_device": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "scheduling", ["host-dispatch-bound", "dataloader-stall"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "median_free_share": nums["median_free_share"],
            "host_us_per_micro_batch": nums["host_us_per_micro_batch"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        host_operators=["aten::ones", "aten::tril"],
        copy_frames=["aten::to", "aten::_to_copy", "aten::copy_"],
        copy_call="aclrtMemcpy",
        mask_shape=HM_MASK,
        mask_dtype="float",
        mask_mb=nums["mask_mb"],
        per_step=HM_MICRO,
        position="at the start of each of the 2 micro-batches of a step, before its first launch "
        "(the mask's Cast to bool, then the forward)",
        file="trace_view.json (Python / CANN lanes at every micro-batch start on every rank: "
        "aten::ones and aten::tril on the host with Input Dims [1, 4096, 4096] float, ~21 ms, then "
        "aten::to > aten::copy_ around a blocking AscendCL@aclrtMemcpy of ~12 ms; no device task "
        "meanwhile), step_trace_time.csv (Free of every rank) and kernel_details.csv (a Cast "
        "DT_FLOAT -> DT_BOOL on 1,4096,4096 per micro-batch, FlashAttentionScore with a 1,1,4096,4096 "
        "mask input)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        kernels_normal=True,
        same_every_step=True,
        cause="the training loop builds the attention mask on the host as a full (batch, seq, seq) "
        "fp32 tensor (torch.tril(torch.ones(1, 4096, 4096)) without device=) and copies it to the "
        "device at the start of every micro-batch: ~21 ms of CPU work and a ~12 ms blocking copy of "
        "67 MB from pageable memory each time, while the device idles, on every rank alike",
        fix="stop building the mask on the host: let FlashAttention apply the causal mask itself "
        "(npu_fusion_attention sparse_mode with the compressed 2048x2048 mask, MindSpeed builds it "
        "once on the device), or create the mask once on the NPU (device=...) and reuse it for every "
        "micro-batch instead of copying a (batch, seq, seq) tensor each time",
    )


# ---------------------------------------------------------------- registry
DEV26_SCENARIOS = (
    ScenarioSpec(
        "torch-deterministic-on",
        "torch.use_deterministic_algorithms(True) left on: EmbeddingDenseGradV2 (~60x) and IndexPutV2 "
        "(~90x) on one core (Block Dim 1), 8 ReduceSum ~11x (Block Dim 8), every rank alike; same "
        "operators and counts as a normal run; job-level",
        16,
        4,
        dt_plans,
        dt_answer,
    ),
    ScenarioSpec(
        "contiguous-copy-churn",
        ".transpose().contiguous() around every attention and sliced rotary halves: 64 ViewCopy + 16 "
        "AsStrided kernels a step (~207 / ~116 µs) between the MatMuls, every rank alike; job-level",
        16,
        4,
        cc_plans,
        cc_answer,
    ),
    ScenarioSpec(
        "tensor-dump-one-rank",
        "a precision tensor dump left on for rank 6 only: 16 activations a step copied to the host "
        "(device-to-host MEMCPY_ASYNC + synchronize) and saved (~7 ms each); its device idles, the "
        "others wait in the gradient all-reduces",
        16,
        4,
        td_plans,
        td_answer,
    ),
    ScenarioSpec(
        "host-built-attention-mask",
        "a full (1, 4096, 4096) fp32 attention mask built on the host (aten::ones + aten::tril, ~21 ms) "
        "and copied with a blocking aclrtMemcpy (~12 ms) at each of the 2 micro-batches of a step; the "
        "device idles (Free), every rank alike; job-level",
        16,
        4,
        hm_plans,
        hm_answer,
    ),
)
DEV26_KINDS = tuple(s.name for s in DEV26_SCENARIOS)


__all__ = ["DEV26_KINDS", "DEV26_SCENARIOS"]
