"""Twenty-eighth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev30.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

All four are operator-efficiency problems that the durations alone do not explain; the evidence of
each is in a different place of kernel_details.csv (and the files beside it):

- ``lm-head-vocab-unaligned``: GPT-2-small-like pretraining from the HF ``gpt2`` weights (hidden
  768, 12 layers, 16 x 1024 tokens per micro-batch) with the tokenizer's vocabulary of 50257 left
  unpadded (not a multiple of 16 / 128): the three LM-head MatMuls (logits ``[16384, 50257]``, its
  input gradient with K = 50257 and the weight gradient ``[50257, 768]``) take the cube's unaligned
  path, ~2.2-2.9x the time their FLOPs need, while every other MatMulV2 runs at the normal rate.
  Evidence: the PipeUtilization columns of those rows (``aic_mac_ratio`` ~0.21-0.28 against 0.62,
  ``aic_mte2_ratio`` ~0.93, ``cube_utilization(%)`` ~25-32 against 71.3) together with the 50257 in
  their Input Shapes (and TFLOPS from shape and duration: ~100 against ~250). Fix: pad the
  vocabulary to 50304 (a multiple of 128). Job-level: every rank and step alike.
- ``attn-head-dim-padded``: a DiT (hidden 1152, 16 heads: head dim 72, 4096 latent tokens per
  image, micro-batch 2) whose attention wrapper pads q / k / v to head dim 128 before
  ``npu_fusion_attention`` and slices the output back (a GPU compatibility shim): a PadV3 before
  each of q, k, v and a StridedSlice after every FlashAttentionScore, the mirror in the backward,
  and FlashAttentionScore / FlashAttentionScoreGrad computing 128 of which 72 are real (~44% of the
  attention work wasted). Evidence: the extra PadV3 / StridedSlice rows around every
  FlashAttention row and the FlashAttention Input Shapes (``2,4096,16,128``) against the QKV
  MatMul's output (3456 = 3 x 16 x 72). Fix: pad only to the next multiple of 16 (80) or pass 72.
  Job-level.
- ``vlm-conv3d-patch-embed``: Qwen2-VL-style SFT with text-only and image data grouped by
  modality (a step is all-image or all-text): in the image steps every rank runs the vision
  tower, whose patch embedding is an ``nn.Conv3d`` with kernel = stride (2, 14, 14) on 3 input
  channels: a TransData of the pixel patches to NDC1HWC0 (3 channels padded to 16), a Conv3D and a
  Conv3DBackpropFilterV2 at ~0.1 of the cube's MAC rate (~15 ms per image step), where the
  equivalent Linear (a [4096, 1176] x [1176, 1280] MatMul) takes ~0.1 ms. Evidence: the Conv3D /
  Conv3DBackpropFilterV2 / TransData rows (Input Formats NDC1HWC0 / FRACTAL_Z_3D, the 3-channel
  input, their PMU columns) present only in the image steps (Step Id), and those steps' Computing
  in step_trace_time.csv. Culprit: those steps (a job-level cause scoped to them).
- ``hf32-off-node``: an fp32 ResNet-50-like CNN on 16 cards; node 1's launch path sets
  ``torch.npu.conv.allow_hf32 = False`` (left from a GPU accuracy comparison), node 0 runs the
  default (HF32 on): node 1's Conv2D / Conv2DBackpropInput / Conv2DBackpropFilter run in full fp32,
  ~1.8-1.95x as long, with the same shapes, dtypes (DT_FLOAT), formats and Block Dim; BatchNorm,
  ReLU, the fc MatMul (HF32 off by default for MatMul everywhere) and the links are normal.
  Evidence: the ``HF32 Eligible`` column of kernel_details.csv (``YES`` on node 0's conv rows, ``NO``
  on node 1's) with those rows' durations; node 0 waits in the gradient all-reduces
  (communication.json). Culprit: node 1 (ranks 8-15).
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
from advisor_chat.synth.scenarios_dev28 import _dist, _kernels
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    step_ids,
    victims_by_wait,
)
from advisor_chat.synth.writer import _AIC_RATIOS

MM_TFLOPS = 250.0  # effective rate of an aligned bf16 MatMulV2 on the simulated 910B
FA_TFLOPS = 180.0  # ... of FlashAttentionScore (forward); the backward takes FAG_FACTOR x as long
FAG_FACTOR = 2.6
MAC_RATIO = dict(_AIC_RATIOS)["aic_mac_ratio"]  # what the writer gives a normal cube kernel
CUBE_UTIL = 71.3


def _kern(
    name: str,
    op_type: str,
    core: str,
    ins: str,
    outs: str,
    dur: float,
    *,
    dt: str = "DT_BF16",
    fmts: str = "",
    out_fmt: str = "ND",
    bd: int = 0,
    tag: str = "",
    api: str = "",
    hf32: bool = False,
    pmu: tuple[tuple[str, float], ...] = (),
) -> Kernel:
    """A kernel template: ``dt`` / ``fmts`` per input (one value repeated when a single one)."""
    n_in = ins.count(";") + 1
    dts = dt if ";" in dt else ";".join([dt] * n_in)
    fm = fmts or ";".join(["ND"] * n_in)
    return Kernel(
        name=name,
        op_type=op_type,
        core=core,
        in_shapes=ins,
        in_dtypes=dts,
        in_formats=fm,
        out_shapes=outs,
        out_dtypes=dt.split(";")[0],
        out_formats=out_fmt,
        dur_us=round(dur, 1),
        block_dim=bd or (24 if core in ("AI_CORE", "MIX_AIC") else 40),
        api=api or f"aclnn{op_type}",
        tag=tag,
        hf32=hf32,
        pmu=pmu,
    )


def _mm(
    tag: str, m: int, k: int, n: int, slow: float = 1.0, dur: float | None = None, **kw: Any
) -> Kernel:
    """MatMulV2 ``[m,k] x [n,k]^T``, its duration from its FLOPs at MM_TFLOPS (``slow`` x that).

    ``dur`` (µs) instead for a MatMul too small to reach the rate (launch-bound tail).
    """
    if dur is None:
        dur = 2.0 * m * k * n / (MM_TFLOPS * 1e6) * slow
    return _kern(
        "aclnnMatmul_MatMulCommon_MatMulV2",
        "MatMulV2",
        "AI_CORE",
        f"{m},{k};{n},{k}",
        f"{m},{n}",
        dur,
        api="aclnnMatmul",
        tag=tag,
        **kw,
    )


def _vec(op_type: str, shape: str, dur: float, tag: str = "", **kw: Any) -> Kernel:
    """A vector kernel on one tensor shape."""
    return _kern(
        f"aclnn{op_type}_{op_type}_{op_type}",
        op_type,
        "AI_VECTOR_CORE",
        kw.pop("ins", shape),
        kw.pop("outs", shape),
        dur,
        tag=tag,
        **kw,
    )


def _flops(k: Kernel) -> float:
    """FLOPs of a MatMulV2 template from its Input Shapes (``m,k;n,k``)."""
    a, b = k.in_shapes.split(";")[:2]
    m, kk = (int(x) for x in a.split(","))
    n = int(b.split(",")[0])
    return 2.0 * m * kk * n


def _slow_pmu(f: float) -> tuple[tuple[str, float], ...]:
    """PipeUtilization of a MatMul on the cube's unaligned path, ``f`` x its aligned time."""
    return (
        ("aic_mac_ratio", round(MAC_RATIO / f, 3)),
        ("aic_scalar_ratio", 0.29),
        ("aic_mte2_ratio", 0.93),
        ("aic_fixpipe_ratio", 0.05),
        ("cube_utilization", round(CUBE_UTIL / f, 1)),
    )


def _optimizer(numel_m: float, tag: str = "opt") -> list[Kernel]:
    """AdamW as foreach kernels over ``numel_m`` million parameters (fp32 states)."""
    us = numel_m * 4.2  # ~4 µs per million parameters and kernel (memory-bound)
    return [
        _kern(
            f"aclnn{op}V2_{op}V2_{op}",
            op,
            "AI_VECTOR_CORE",
            "2048,2048;2048,2048",
            "2048,2048",
            us * f,
            dt="DT_FLOAT",
            bd=48,
            tag=tag,
        )
        for op, f in (
            ("ForeachMulScalar", 0.7),
            ("ForeachAddcmulScalar", 1.1),
            ("ForeachSqrt", 0.6),
            ("ForeachAddcdivScalar", 1.2),
        )
    ]


def _ms(x: np.ndarray) -> float:
    """Median over ranks of the per-rank mean (µs)."""
    return _med(x.mean(axis=1))


# ---------------------------------------------------------------- lm-head-vocab-unaligned
VA_V = 50257  # the GPT-2 tokenizer, unpadded
VA_ALIGN = 128
VA_H = 768
VA_LAYERS = 12
VA_SEQ = 1024
VA_MB = 16
VA_T = VA_SEQ * VA_MB  # tokens per micro-batch
# the LM head's three MatMuls on the unaligned path: x their aligned time
VA_SLOW = {"lm_head": 2.4, "lm_head_dx": 2.9, "lm_head_dw": 2.2}
VA_TAGS = tuple(VA_SLOW)
VA_BUCKET_MB = 42.0  # DDP gradient bucket (bf16), one per 3 layers
VA_EMB_MB = 78.0  # the tied embedding / LM head weight's bucket, last


def _va_padded() -> int:
    return math.ceil(VA_V / VA_ALIGN) * VA_ALIGN


def va_program(vocab: int = VA_V) -> list[Item]:
    """GPT-2 small, one micro-batch; with the unpadded ``vocab`` the LM head on the slow path."""
    t, h, f = VA_T, VA_H, 4 * VA_H
    act = f"{t},{h}"
    slow = vocab % VA_ALIGN != 0

    def head(tag: str, m: int, k: int, n: int) -> Kernel:
        s = VA_SLOW[tag] if slow else 1.0
        return _mm(tag, m, k, n, s, pmu=_slow_pmu(s) if slow else ())

    fa = _kern(
        "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
        "FlashAttentionScore",
        "MIX_AIC",
        f"{VA_MB},{VA_SEQ},{h};{VA_MB},{VA_SEQ},{h};{VA_MB},{VA_SEQ},{h}",
        f"{VA_MB},{VA_SEQ},{h}",
        2.0 * VA_MB * VA_SEQ * VA_SEQ * h / (FA_TFLOPS * 1e6),  # causal: half of 4*B*S^2*H
        api="aclnnFlashAttentionScore",
    )
    fag = dataclasses.replace(
        fa,
        name="aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
        op_type="FlashAttentionScoreGrad",
        in_shapes=";".join([f"{VA_MB},{VA_SEQ},{h}"] * 4),
        in_dtypes=";".join(["DT_BF16"] * 4),
        in_formats=";".join(["ND"] * 4),
        dur_us=round(fa.dur_us * FAG_FACTOR, 1),
        api="aclnnFlashAttentionScoreGrad",
    )
    prog: list[Item] = [
        _vec(
            "GatherV2",
            "",
            24.0,
            ins=f"{vocab},{h};{VA_MB},{VA_SEQ}",
            outs=f"{VA_MB},{VA_SEQ},{h}",
            dt="DT_BF16;INT64",
        ),
        _vec(
            "GatherV2",
            "",
            4.0,
            ins=f"{VA_SEQ},{h};1,{VA_SEQ}",
            outs=f"1,{VA_SEQ},{h}",
            dt="DT_BF16;INT64",
        ),
        _vec("Add", act, 22.0),
    ]
    for _ in range(VA_LAYERS):
        prog += [
            _vec("LayerNormV4", act, 26.0),
            _mm("qkv", t, h, 3 * h),
            fa,
            _mm("attn_out", t, h, h),
            _vec("Add", act, 22.0),
            _vec("LayerNormV4", act, 26.0),
            _mm("mlp_up", t, h, f),
            _vec("Gelu", f"{t},{f}", 75.0),
            _mm("mlp_down", t, f, h),
            _vec("Add", act, 22.0),
        ]
    logits = f"{t},{vocab}"
    prog += [
        _vec("LayerNormV4", act, 26.0),
        head("lm_head", t, h, vocab),
        _vec("LogSoftmaxV2", logits, 1900.0 * vocab / VA_V),
        _vec("NLLLoss", "", 45.0, ins=f"{logits};{t}", outs="1", dt="DT_BF16;INT64"),
        _vec(
            "NLLLossGrad", "", 60.0, ins=f"1;{logits};{t}", outs=logits, dt="DT_BF16;DT_BF16;INT64"
        ),
        _vec("LogSoftmaxGrad", logits, 2600.0 * vocab / VA_V),
        head("lm_head_dx", t, vocab, h),
        head("lm_head_dw", vocab, t, h),
        _vec("LayerNormGradV3", act, 40.0),
    ]
    for li in range(VA_LAYERS):
        prog += [
            _mm("mlp_down_dx", t, h, f),
            _mm("mlp_down_dw", h, t, f),
            _vec("GeluGrad", f"{t},{f}", 95.0),
            _mm("mlp_up_dx", t, f, h),
            _mm("mlp_up_dw", f, t, h),
            _vec("LayerNormGradV3", act, 40.0),
            _mm("attn_out_dx", t, h, h),
            _mm("attn_out_dw", h, t, h),
            fag,
            _mm("qkv_dx", t, 3 * h, h),
            _mm("qkv_dw", 3 * h, t, h),
            _vec("LayerNormGradV3", act, 40.0),
        ]
        if li % 3 == 2:  # a bucket of 3 layers, overlapped with the next layer's backward
            last = li == VA_LAYERS - 1
            prog.append(
                Collective("hcom_allReduce_", "world", VA_BUCKET_MB, overlap=3 if last else 12)
            )
    prog += [
        _vec(
            "EmbeddingDenseGrad",
            "",
            260.0 * vocab / VA_V,
            ins=f"{VA_MB},{VA_SEQ},{h};{VA_MB},{VA_SEQ}",
            outs=f"{vocab},{h}",
            dt="DT_BF16;INT64",
        ),
        _vec(
            "EmbeddingDenseGrad",
            "",
            18.0,
            ins=f"1,{VA_SEQ},{h};1,{VA_SEQ}",
            outs=f"{VA_SEQ},{h}",
            dt="DT_BF16;INT64",
        ),
        _vec("Add", f"{vocab},{h}", 45.0 * vocab / VA_V),  # the tied weight's two gradients
        Collective("hcom_allReduce_", "world", VA_EMB_MB, tag="emb_grad"),
    ]
    prog += _optimizer(124.0)
    return prog


def va_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        num_layers=VA_LAYERS,
        hidden_size=VA_H,
        num_attention_heads=12,
        seq_length=VA_SEQ,
        micro_batch_size=VA_MB,
        vocab_size=VA_V,
        tie_word_embeddings=True,
        init_from="gpt2",
    )
    return {"": Plan(va_program(), group_kinds(ranks, 1), default_perturb(ranks), info)}


def va_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the LM head's three MatMuls run ~2.5x their aligned time on every rank."""
    cl: Cluster = m[""]["cluster"]
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    ks = cl.kernels
    head_idx = [j for j, k in enumerate(ks) if k.tag in VA_TAGS]
    mm_idx = [j for j, k in enumerate(ks) if k.op_type == "MatMulV2" and k.tag not in VA_TAGS]
    head = _kernel_us(cl, lambda k: k.tag in VA_TAGS)
    mm_all = _kernel_us(cl, lambda k: k.op_type == "MatMulV2")
    dur = np.stack([st.k_dur / 1000 for st in cl.steps], axis=2)  # [ranks, K, steps] µs

    def tflops(idx: list[int]) -> float:
        per = [_flops(ks[j]) / float(np.median(dur[:, j, :])) / 1e6 for j in idx]
        return float(np.median(per))

    padded = _va_padded()
    pad_prog = va_program(padded)
    base_cl = _resimulate(dataclasses.replace(cl, perturb=default_perturb(cl.ranks)), pad_prog)
    base = _sim_breakdown(base_cl)
    a, b, save = _saving(step, base["step_us"])
    base_head = _kernel_us(base_cl, lambda k: k.tag in VA_TAGS)
    mac = [dict(ks[j].pmu)["aic_mac_ratio"] for j in head_idx]
    cube = [dict(ks[j].pmu)["cube_utilization"] for j in head_idx]
    first = ks[head_idx[0]]
    nums = {
        "vocab_size": VA_V,
        "vocab_size_mod_128": VA_V % VA_ALIGN,
        "padded_vocab_size": padded,
        "hidden_size": VA_H,
        "tokens_per_micro_batch": VA_T,
        "lm_head_matmuls_per_step": len(head_idx),
        "lm_head_us_per_step": _ms(head),
        "lm_head_share_of_step": _share(head, step),
        "lm_head_share_of_matmul_time": _share(head, mm_all),
        "lm_head_us_per_step_padded_vocab": _ms(base_head),
        "lm_head_slowdown_vs_padded": round(float(head.mean() / base_head.mean()), 3),
        "lm_head_tflops_median": round(tflops(head_idx), 1),
        "other_matmul_tflops_median": round(tflops(mm_idx), 1),
        "lm_head_mac_ratio_median": round(float(np.median(mac)), 3),
        "other_matmul_mac_ratio": MAC_RATIO,
        "lm_head_cube_utilization_median": round(float(np.median(cube)), 1),
        "other_matmul_cube_utilization": CUBE_UTIL,
        "median_computing_us_per_step": _ms(comp),
        "median_computing_share": _share(comp, step),
        "median_step_us": _r(a),
        "median_step_us_padded_vocab": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        [],
        "compute",
        ["shape-axis-alignment"],
        "computing_us",
        nums,
        op={"op_type": first.op_type, "name": first.name, "input_shapes": first.in_shapes},
    )
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={
            "lm_head_us_per_step": nums["lm_head_us_per_step"],
            "lm_head_mac_ratio_median": nums["lm_head_mac_ratio_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operator="MatMulV2",
        vocab_size=VA_V,
        padded_vocab_size=padded,
        lm_head_shapes=[ks[j].in_shapes for j in head_idx],
        logits_shape=f"{VA_T},{VA_V}",
        pmu_columns=["aic_mac_ratio", "aic_mte2_ratio", "cube_utilization(%)"],
        file="kernel_details.csv (the three MatMulV2 rows with 50257 in Input Shapes: "
        "aic_mac_ratio ~0.2-0.3 and cube_utilization(%) ~25-32 against 0.62 / 71.3 on every other "
        "MatMulV2, aic_mte2_ratio ~0.93, ~100 TFLOPS from shape and duration against ~250), "
        "op_statistic.csv (MatMulV2 dominated by them), step_trace_time.csv (Computing on every "
        "rank alike); profiler_metadata.json vocab_size 50257",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        host_normal=True,
        cause=f"the vocabulary is the GPT-2 tokenizer's {VA_V}, not a multiple of 16 / 128: the LM "
        f"head's MatMuls (logits [{VA_T}, {VA_V}], the input gradient with K = {VA_V} and the "
        f"weight gradient [{VA_V}, {VA_H}]) take the cube's unaligned path and run ~2.2-2.9x the "
        "time their FLOPs need (low MAC ratio, memory-transfer bound), on every rank and step "
        "alike; every other MatMul runs at the normal rate",
        fix=f"pad the vocabulary (embedding and LM head) to {padded}, a multiple of 128 (nanoGPT "
        "vocab_size=50304 / Megatron --make-vocab-size-divisible-by 128 / HF "
        "resize_token_embeddings(..., pad_to_multiple_of=128)); the extra rows are never "
        "predicted",
    )


# ---------------------------------------------------------------- attn-head-dim-padded
HD_H = 1152
HD_HEADS = 16
HD_D = HD_H // HD_HEADS  # 72
HD_PAD = 128  # what the wrapper pads to
HD_ALIGN = 16
HD_S = 4096  # latent tokens per image (1024 px, 8x VAE, 2x2 patches)
HD_B = 2
HD_T = HD_S * HD_B
HD_BLOCKS = 12
# DDP buckets (bf16 gradients, ~42.5 MB a block): {backward block index: (MB, kernels overlapped)}
HD_BUCKETS = {3: (170.0, 40), 7: (170.0, 40), 10: (127.5, 22), 11: (42.5, 0)}
HD_PAD_TAG, HD_SLICE_TAG = "head_pad", "head_slice"


def _hd_aligned() -> int:
    return math.ceil(HD_D / HD_ALIGN) * HD_ALIGN


def hd_program(pad_to: int = HD_PAD) -> list[Item]:
    """A DiT of HD_BLOCKS blocks; attention on q / k / v padded to head dim ``pad_to``."""
    t, h, f = HD_T, HD_H, 4 * HD_H
    act = f"{HD_B},{HD_S},{h}"
    real = f"{HD_B},{HD_S},{HD_HEADS},{HD_D}"
    padded = f"{HD_B},{HD_S},{HD_HEADS},{pad_to}"
    copy_us = 40.0 * (HD_D + pad_to) / (HD_D + HD_PAD)  # memory-bound: read 72, write pad_to

    def pad() -> Kernel:
        return _vec(
            "PadV3", "", copy_us, HD_PAD_TAG, ins=f"{real};8", outs=padded, dt="DT_BF16;INT64"
        )

    def cut() -> Kernel:
        return _vec("StridedSlice", "", copy_us, HD_SLICE_TAG, ins=padded, outs=real)

    fa_us = 4.0 * HD_B * HD_HEADS * HD_S * HD_S * pad_to / (FA_TFLOPS * 1e6)
    fa = _kern(
        "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
        "FlashAttentionScore",
        "MIX_AIC",
        ";".join([padded] * 3),
        padded,
        fa_us,
        api="aclnnFlashAttentionScore",
        tag="fa",
    )
    fag = _kern(
        "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
        "FlashAttentionScoreGrad",
        "MIX_AIC",
        ";".join([padded] * 4),
        padded,
        fa_us * FAG_FACTOR,
        api="aclnnFlashAttentionScoreGrad",
        tag="fa_grad",
    )
    attn_fwd = [pad(), pad(), pad(), fa, cut()] if pad_to != HD_D else [fa]
    attn_bwd = [pad(), fag, cut(), cut(), cut()] if pad_to != HD_D else [fag]
    prog: list[Item] = [
        _mm("patch_embed", t, 16, h, dur=12.0),
        _vec("Add", act, 22.0),
    ]
    for _ in range(HD_BLOCKS):
        prog += [
            _vec("LayerNormV4", act, 40.0),
            _vec("Mul", act, 25.0),
            _vec("Add", act, 25.0),
            _mm("qkv", t, h, 3 * h),
            *attn_fwd,
            _mm("proj", t, h, h),
            _vec("Mul", act, 25.0),
            _vec("Add", act, 25.0),
            _vec("LayerNormV4", act, 40.0),
            _vec("Mul", act, 25.0),
            _vec("Add", act, 25.0),
            _mm("mlp_up", t, h, f),
            _vec("Gelu", f"{HD_B},{HD_S},{f}", 110.0),
            _mm("mlp_down", t, f, h),
            _vec("Mul", act, 25.0),
            _vec("Add", act, 25.0),
        ]
    prog += [
        _vec("LayerNormV4", act, 40.0),
        _mm("final", t, h, 32, dur=10.0),
        _vec("Sub", f"{t},32", 6.0),
        _vec("Mul", f"{t},32", 5.0),
        _vec("ReduceMean", f"{t},32", 6.0),
        _mm("final_dx", t, 32, h, dur=11.0),
        _mm("final_dw", 32, t, h, dur=11.0),
        _vec("LayerNormGradV3", act, 60.0),
    ]
    for bi in range(HD_BLOCKS):
        prog += [
            _vec("Mul", act, 30.0),
            _mm("mlp_down_dx", t, h, f),
            _mm("mlp_down_dw", h, t, f),
            _vec("GeluGrad", f"{HD_B},{HD_S},{f}", 140.0),
            _mm("mlp_up_dx", t, f, h),
            _mm("mlp_up_dw", f, t, h),
            _vec("Mul", act, 30.0),
            _vec("LayerNormGradV3", act, 60.0),
            _vec("Mul", act, 30.0),
            _mm("proj_dx", t, h, h),
            _mm("proj_dw", h, t, h),
            *attn_bwd,
            _mm("qkv_dx", t, 3 * h, h),
            _mm("qkv_dw", 3 * h, t, h),
            _vec("Mul", act, 30.0),
            _vec("LayerNormGradV3", act, 60.0),
        ]
        if bi in HD_BUCKETS:  # DDP buckets in backward order; the last one is exposed
            mb, ov = HD_BUCKETS[bi]
            prog.append(Collective("hcom_allReduce_", "world", mb, overlap=ov))
    prog += _optimizer(HD_BLOCKS * 21.2)
    return prog


def hd_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        model="DiT",
        num_layers=HD_BLOCKS,
        hidden_size=HD_H,
        num_attention_heads=HD_HEADS,
        seq_length=HD_S,
        micro_batch_size=HD_B,
        image_size=1024,
        patch_size=2,
        attention_backend="npu_fusion_attention",
    )
    return {"": Plan(hd_program(), group_kinds(ranks, 1), default_perturb(ranks), info)}


def hd_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: attention on head dim 128 of which 72 are real, plus the pad / slice copies."""
    cl: Cluster = m[""]["cluster"]
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    ks = cl.kernels
    fa = _kernel_us(cl, lambda k: k.op_type == "FlashAttentionScore")
    fag = _kernel_us(cl, lambda k: k.op_type == "FlashAttentionScoreGrad")
    copies = _kernel_us(cl, lambda k: k.tag in (HD_PAD_TAG, HD_SLICE_TAG))
    dur = np.stack([st.k_dur / 1000 for st in cl.steps], axis=2)
    fa_idx = [j for j, k in enumerate(ks) if k.op_type == "FlashAttentionScore"]
    fag_idx = [j for j, k in enumerate(ks) if k.op_type == "FlashAttentionScoreGrad"]
    aligned = _hd_aligned()
    fix_prog = hd_program(aligned)
    base_cl = _resimulate(dataclasses.replace(cl, perturb=default_perturb(cl.ranks)), fix_prog)
    base = _sim_breakdown(base_cl)
    a, b, save = _saving(step, base["step_us"])
    base_attn = _kernel_us(base_cl, lambda k: k.op_type.startswith("FlashAttentionScore"))
    nums = {
        "hidden_size": HD_H,
        "num_heads": HD_HEADS,
        "head_dim": HD_D,
        "padded_head_dim": HD_PAD,
        "aligned_head_dim": aligned,
        "wasted_head_dim_share": round(1 - HD_D / HD_PAD, 4),
        "attention_layers": len(fa_idx),
        "pad_kernels_per_step": sum(1 for k in ks if k.tag == HD_PAD_TAG),
        "slice_kernels_per_step": sum(1 for k in ks if k.tag == HD_SLICE_TAG),
        "fa_us_median": _med(dur[:, fa_idx, :]),
        "fa_grad_us_median": _med(dur[:, fag_idx, :]),
        "attention_us_per_step": _ms(fa + fag),
        "attention_share_of_step": _share(fa + fag, step),
        "attention_us_per_step_head_dim_80": _ms(base_attn),
        "pad_slice_us_per_step": _ms(copies),
        "median_computing_us_per_step": _ms(comp),
        "median_computing_share": _share(comp, step),
        "median_step_us": _r(a),
        "median_step_us_head_dim_80": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    k0 = ks[fa_idx[0]]
    key = _key(
        [],
        "compute",
        ["shape-axis-alignment"],
        "computing_us",
        nums,
        op={"op_type": k0.op_type, "name": k0.name, "input_shapes": k0.in_shapes},
    )
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={
            "attention_us_per_step": nums["attention_us_per_step"],
            "wasted_head_dim_share": nums["wasted_head_dim_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operators=["FlashAttentionScore", "FlashAttentionScoreGrad"],
        copy_operators=["PadV3", "StridedSlice"],
        head_dim=HD_D,
        padded_head_dim=HD_PAD,
        aligned_head_dim=aligned,
        fa_input_shape=k0.in_shapes.split(";")[0],
        qkv_output_width=3 * HD_H,
        file="kernel_details.csv (three PadV3 [2,4096,16,72] -> [2,4096,16,128] before and a "
        "StridedSlice back after every FlashAttentionScore, the mirror around every "
        "FlashAttentionScoreGrad; FlashAttention Input Shapes 2,4096,16,128 while the QKV MatMulV2 "
        "output is 3456 = 3 x 16 x 72 wide), op_statistic.csv (FlashAttentionScoreGrad / "
        "FlashAttentionScore on top, PadV3 / StridedSlice counts), step_trace_time.csv (Computing "
        "on every rank alike); profiler_metadata.json hidden_size 1152, num_attention_heads 16",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        host_normal=True,
        cause=f"the model's head dim is {HD_D} (hidden {HD_H} / {HD_HEADS} heads) and the attention "
        f"wrapper pads q, k and v to {HD_PAD} before npu_fusion_attention and slices the output "
        f"back (a shim written for a GPU kernel's head-dim list): FlashAttentionScore and its "
        f"gradient compute {HD_PAD} per head of which {HD_D} are real (~44% of the attention work "
        "wasted) plus 8 pad / slice copies per block, on every rank and step alike",
        fix=f"drop the pad-to-{HD_PAD} shim: pass the real head dim to npu_fusion_attention, or "
        f"pad only to the next multiple of {HD_ALIGN} ({aligned}) where the installed "
        "FlashAttentionScore needs alignment; (or choose heads so the head dim is 64 / 128)",
    )


# ---------------------------------------------------------------- vlm-conv3d-patch-embed
CV_PATCHES = 4096  # 4 images of 448 x 448 per micro-batch: 4 x 32 x 32 patches of 14 px
CV_IN_CH = 3
CV_C0 = 16  # the cube's channel block: 3 channels padded to 16
CV_TP, CV_P = 2, 14  # temporal patch, spatial patch
CV_VH = 1280  # vision hidden
CV_VBLOCKS = 4
CV_LLM_H = 4096
CV_TAG = "vision"
CV_EMBED_TAG = "patch_embed"


def _cv_image_steps(steps: int, seed: int) -> list[int]:
    """Step indices whose global batch is image data (group_by_modality_length: whole steps)."""
    rng = np.random.default_rng(seed + 3003)
    n = max(1, steps // 4)
    first = 1 if steps > 2 else 0  # (not the first captured step, when there is a choice)
    return sorted(first + int(x) for x in rng.choice(steps - first, size=n, replace=False))


def _cv_embed(linear: bool) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of the patch embedding: Conv3d (slow) or its Linear."""
    n, c, tp, p = CV_PATCHES, CV_IN_CH, CV_TP, CV_P
    kdim = c * tp * p * p  # 1176
    if linear:
        return [_mm(CV_EMBED_TAG, n, kdim, CV_VH)], [_mm(CV_EMBED_TAG, CV_VH, n, kdim)]
    c1 = math.ceil(c / CV_C0)
    vol = f"{n},{tp},{c1},{p},{p},{CV_C0}"  # NDC1HWC0 of the pixel patches
    wz = f"{tp * c1 * p * p},{CV_VH // CV_C0},{CV_C0},{CV_C0}"  # FRACTAL_Z_3D weight
    out5 = f"{n},1,{CV_VH // CV_C0},1,1,{CV_C0}"
    conv_pmu = (
        ("aic_mac_ratio", 0.11),
        ("aic_mte2_ratio", 0.88),
        ("aic_scalar_ratio", 0.24),
        ("cube_utilization", 12.6),
    )
    td_in = _kern(
        "aclnnConvolution_TransData_TransData",
        "TransData",
        "AI_VECTOR_CORE",
        f"{n},{c},{tp},{p},{p}",
        vol,
        520.0,
        fmts="NCDHW",
        out_fmt="NDC1HWC0",
        api="aclnnConvolution",
        tag=CV_EMBED_TAG,
    )
    conv = _kern(
        "aclnnConvolution_Conv3D_Conv3D",
        "Conv3D",
        "AI_CORE",
        f"{vol};{wz};{CV_VH}",
        out5,
        4600.0,
        fmts="NDC1HWC0;FRACTAL_Z_3D;ND",
        out_fmt="NDC1HWC0",
        api="aclnnConvolution",
        tag=CV_EMBED_TAG,
        pmu=conv_pmu,
    )
    td_out = _kern(
        "aclnnConvolution_TransData_TransData",
        "TransData",
        "AI_VECTOR_CORE",
        out5,
        f"{n},{CV_VH},1,1,1",
        90.0,
        fmts="NDC1HWC0",
        out_fmt="NCDHW",
        api="aclnnConvolution",
        tag=CV_EMBED_TAG,
    )
    td_g = dataclasses.replace(
        td_out,
        name="aclnnConvolutionBackward_TransData_TransData",
        in_shapes=f"{n},{CV_VH},1,1,1",
        in_formats="NCDHW",
        out_shapes=out5,
        out_formats="NDC1HWC0",
        api="aclnnConvolutionBackward",
    )
    dw = _kern(
        "aclnnConvolutionBackward_Conv3DBackpropFilterV2_Conv3DBackpropFilterV2",
        "Conv3DBackpropFilterV2",
        "AI_CORE",
        f"{vol};{wz};{out5}",
        wz,
        9800.0,
        fmts="NDC1HWC0;FRACTAL_Z_3D;NDC1HWC0",
        out_fmt="FRACTAL_Z_3D",
        api="aclnnConvolutionBackward",
        tag=CV_EMBED_TAG,
        pmu=(
            ("aic_mac_ratio", 0.09),
            ("aic_mte2_ratio", 0.9),
            ("aic_scalar_ratio", 0.27),
            ("cube_utilization", 11.2),
        ),
    )
    td_w = _kern(
        "aclnnConvolutionBackward_TransData_TransData",
        "TransData",
        "AI_VECTOR_CORE",
        wz,
        f"{CV_VH},{c},{tp},{p},{p}",
        25.0,
        fmts="FRACTAL_Z_3D",
        out_fmt="NCDHW",
        api="aclnnConvolutionBackward",
        tag=CV_EMBED_TAG,
    )
    return [td_in, conv, td_out], [td_g, dw, td_w]


def _cv_vision(linear: bool) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of the vision tower (patch embed, blocks, patch merger)."""
    n, h, f = CV_PATCHES, CV_VH, 4 * CV_VH
    act = f"{n},{h}"
    emb_f, emb_b = _cv_embed(linear)
    heads = 16
    fa_us = 4.0 * 4 * 1024 * 1024 * h / (FA_TFLOPS * 1e6)  # attention within each image
    tnd = f"{n},{heads},{h // heads}"
    fa = _kern(
        "aclnnFlashAttentionVarLenScore_FlashAttentionScore_FlashAttentionScore",
        "FlashAttentionScore",
        "MIX_AIC",
        f"{tnd};{tnd};{tnd}",
        tnd,
        fa_us,
        api="aclnnFlashAttentionVarLenScore",
    )
    fag = dataclasses.replace(
        fa,
        name="aclnnFlashAttentionVarLenScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
        op_type="FlashAttentionScoreGrad",
        in_shapes=";".join([tnd] * 4),
        in_dtypes=";".join(["DT_BF16"] * 4),
        in_formats=";".join(["ND"] * 4),
        dur_us=round(fa_us * FAG_FACTOR, 1),
        api="aclnnFlashAttentionVarLenScoreGrad",
    )
    fwd: list[Kernel] = list(emb_f)
    for _ in range(CV_VBLOCKS):
        fwd += [
            _vec("LayerNormV4", act, 18.0),
            _mm("v_qkv", n, h, 3 * h),
            _vec("RotaryMul", tnd, 12.0),
            fa,
            _mm("v_proj", n, h, h),
            _vec("Add", act, 15.0),
            _vec("LayerNormV4", act, 18.0),
            _mm("v_mlp_up", n, h, f),
            _vec("FastGelu", f"{n},{f}", 50.0),
            _mm("v_mlp_down", n, f, h),
            _vec("Add", act, 15.0),
        ]
    m4 = n // 4
    fwd += [
        _vec("LayerNormV4", act, 18.0),
        _mm("merger_fc1", m4, 4 * h, 4 * h),
        _vec("Gelu", f"{m4},{4 * h}", 25.0),
        _mm("merger_fc2", m4, 4 * h, CV_LLM_H),
    ]
    bwd: list[Kernel] = [
        _mm("merger_fc2_dx", m4, CV_LLM_H, 4 * h),
        _mm("merger_fc2_dw", CV_LLM_H, m4, 4 * h),
        _vec("GeluGrad", f"{m4},{4 * h}", 32.0),
        _mm("merger_fc1_dx", m4, 4 * h, 4 * h),
        _mm("merger_fc1_dw", 4 * h, m4, 4 * h),
        _vec("LayerNormGradV3", act, 28.0),
    ]
    for _ in range(CV_VBLOCKS):
        bwd += [
            _mm("v_mlp_down_dx", n, h, f),
            _mm("v_mlp_down_dw", h, n, f),
            _vec("FastGeluGrad", f"{n},{f}", 65.0),
            _mm("v_mlp_up_dx", n, f, h),
            _mm("v_mlp_up_dw", f, n, h),
            _vec("LayerNormGradV3", act, 28.0),
            _mm("v_proj_dx", n, h, h),
            _mm("v_proj_dw", h, n, h),
            fag,
            _vec("RotaryMulGrad", tnd, 16.0),
            _mm("v_qkv_dx", n, 3 * h, h),
            _mm("v_qkv_dw", 3 * h, n, h),
            _vec("LayerNormGradV3", act, 28.0),
        ]
    bwd += emb_b

    def tag(k: Kernel) -> Kernel:
        return dataclasses.replace(k, tag=CV_EMBED_TAG if k.tag == CV_EMBED_TAG else CV_TAG)

    return [tag(k) for k in fwd], [tag(k) for k in bwd]


def cv_program(linear: bool = False) -> list[Item]:
    """Vision tower forward, the LLM (transformer(), 4 layers), vision backward, optimizer."""
    vf, vb = _cv_vision(linear)
    llm = transformer(layers=4)
    opt = next(
        j for j, it in enumerate(llm) if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    return [*vf, *llm[:opt], *vb, *llm[opt:]]


def _cv_vision_idx(prog: list[Item]) -> set[int]:
    return {j for j, k in enumerate(_kernels(prog)) if k.tag in (CV_TAG, CV_EMBED_TAG)}


def cv_plans(ranks: int, steps: int, seed: int, linear: bool = False) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = cv_program(linear)
    p = default_perturb(ranks)
    vis = _cv_vision_idx(prog)
    img = set(_cv_image_steps(steps, seed))
    for si in range(steps):
        if si not in img:  # a text-only global batch: the vision tower does not run
            p.step_skip_kernels[si] = {r: set(vis) for r in range(ranks)}
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        model="qwen2_vl",
        vision_hidden_size=CV_VH,
        patch_size=CV_P,
        temporal_patch_size=CV_TP,
        in_channels=CV_IN_CH,
        freeze_vision_tower=False,
        group_by_modality_length=True,
        micro_batch_size=1,
    )
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def cv_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: in the image steps the Conv3d patch embedding dominates the vision tower."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    img = _cv_image_steps(steps, cl.seed)
    txt = [si for si in range(steps) if si not in img]
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    emb = _kernel_us(cl, lambda k: k.tag == CV_EMBED_TAG)
    vis = _kernel_us(cl, lambda k: k.tag in (CV_TAG, CV_EMBED_TAG))
    conv = _kernel_us(cl, lambda k: k.op_type == "Conv3D")
    dw = _kernel_us(cl, lambda k: k.op_type == "Conv3DBackpropFilterV2")
    td = _kernel_us(cl, lambda k: k.op_type == "TransData")
    p_lin = cv_plans(ranks, steps, cl.seed, linear=True)[""]
    lin_cl = _resimulate(dataclasses.replace(cl, perturb=p_lin.perturb), p_lin.program)
    lin = _sim_breakdown(lin_cl)
    lin_emb = _kernel_us(lin_cl, lambda k: k.tag == CV_EMBED_TAG)
    extra = np.median(step, axis=0) - np.median(lin["step_us"], axis=0)
    mean_a = float(np.median(step.mean(axis=1)))
    mean_b = float(np.median(lin["step_us"].mean(axis=1)))
    kdim = CV_IN_CH * CV_TP * CV_P * CV_P
    nums: dict[str, Any] = {
        "image_steps": [ids[si] for si in img],
        "first_image_step": ids[img[0]],
        "last_image_step": ids[img[-1]],
        "image_steps_count": len(img),
        "text_steps": [ids[si] for si in txt],
        "patches_per_image_step": CV_PATCHES,
        "conv_in_channels": CV_IN_CH,
        "conv_channel_block": CV_C0,
        "padded_channel_share": round(1 - CV_IN_CH / CV_C0, 4),
        "linear_equivalent_k": kdim,
        "conv3d_us_median": _med(conv[:, img]),
        "conv3d_backprop_filter_us_median": _med(dw[:, img]),
        "transdata_us_per_image_step": _med(td[:, img]),
        "patch_embed_us_per_image_step": _med(emb[:, img]),
        "patch_embed_us_per_image_step_linear": _med(lin_emb[:, img]),
        "vision_tower_us_per_image_step": _med(vis[:, img]),
        "patch_embed_share_of_vision_tower": round(
            float(np.median(emb[:, img].sum(axis=1) / vis[:, img].sum(axis=1))), 4
        ),
        "patch_embed_share_of_image_step": round(
            float(np.median(emb[:, img].sum(axis=1) / step[:, img].sum(axis=1))), 4
        ),
        "step_us_image_steps_median": _med(step[:, img]),
        "computing_us_image_steps_median": _med(comp[:, img]),
        "median_step_us": _r(float(np.median(step))),
        "mean_step_us": _r(mean_a),
        "mean_step_us_linear_embed": _r(mean_b),
        "saving_us_per_image_step": _med(extra[img]),
        "saving_share_of_image_step": round(
            float(np.median(extra[img]) / np.median(step[:, img])), 4
        ),
        "saving_us_per_step_average": _r(mean_a - mean_b),
    }
    if txt:
        nums["step_us_text_steps_median"] = _med(step[:, txt])
        nums["computing_us_text_steps_median"] = _med(comp[:, txt])
        nums["extra_us_per_image_step"] = _r(
            float(np.median(step[:, img]) - np.median(step[:, txt]))
        )
    key = _key(
        [],
        "compute",
        ["shape-axis-alignment"],
        "computing_us",
        nums,
        op={
            "op_type": "Conv3D",
            "name": "aclnnConvolution_Conv3D_Conv3D",
            "input_shapes": next(k.in_shapes for k in cl.kernels if k.op_type == "Conv3D"),
        },
    )
    rc = root_cause(
        "job_hotspot",
        "compute",
        "job",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        steps=[ids[si] for si in img],
        metrics={
            "patch_embed_us_per_image_step": nums["patch_embed_us_per_image_step"],
            "saving_us_per_image_step": nums["saving_us_per_image_step"],
            "image_steps": nums["image_steps"],
        },
    )
    return _with_evidence(
        key,
        rc,
        image_steps=[ids[si] for si in img],
        text_steps=[ids[si] for si in txt],
        operators=["Conv3D", "Conv3DBackpropFilterV2", "TransData"],
        input_formats=["NDC1HWC0", "FRACTAL_Z_3D"],
        in_channels=CV_IN_CH,
        channel_block=CV_C0,
        kernel_size=[CV_TP, CV_P, CV_P],
        linear_equivalent=f"[{CV_PATCHES}, {kdim}] x [{kdim}, {CV_VH}] MatMul",
        file="kernel_details.csv (in the image steps only: TransData of the [4096,3,2,14,14] "
        "pixel patches to NDC1HWC0 (3 channels in a 16-channel block), Conv3D "
        "(NDC1HWC0;FRACTAL_Z_3D) and Conv3DBackpropFilterV2 rows, ~15 ms a step, aic_mac_ratio "
        "~0.1 and cube_utilization(%) ~12 against 0.62 / 71.3 on the vision MatMuls; the text "
        "steps have no vision rows), step_trace_time.csv (Computing higher in those steps on "
        "every rank alike); profiler_metadata.json patch_size 14, temporal_patch_size 2, "
        "group_by_modality_length true",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        every_step=False,
        host_normal=True,
        cause="the vision tower's patch embedding is an nn.Conv3d with kernel = stride (2, 14, "
        "14) on 3 input channels: on the NPU it runs as a TransData to NDC1HWC0 (3 channels "
        "padded to a 16-channel block), a Conv3D and a Conv3DBackpropFilterV2 at ~0.1 of the "
        "cube's MAC rate, ~15 ms per image step, where the mathematically identical Linear over "
        "the flattened 1176-value patches takes ~0.1 ms; only the image steps (the modality-"
        "grouped batches that run the vision tower) pay it, on every rank alike",
        fix="replace the Conv3d patch embedding by the equivalent Linear: reshape the patches to "
        "[N, 1176] and use F.linear with the Conv3d weight viewed as [1280, 1176] (MindSpeed-MM / "
        "transformers patch-embed fusion do this); the Conv3D, its TransData and the backprop-"
        "filter kernels disappear",
    )


# ---------------------------------------------------------------- hf32-off-node
HF_NODE = 1
HF_BATCH = 32
HF_STAGES = ((64, 56), (128, 28), (256, 14), (512, 7))
HF_BLOCKS = 3
HF_FP32 = 1.5  # an fp32 conv with HF32 against the same conv in fp16
# full fp32 (HF32 off) against HF32, per conv operator
HF_OFF = {"Conv2D": 1.85, "Conv2DBackpropInput": 1.8, "Conv2DBackpropFilter": 1.95}
HF_GRAD_MB = 25.6  # DDP gradient bucket (fp32)
HF_GRAD_BUCKETS = 4
HF_GRAD_OVERLAP = 8


def _hf_ranks(ranks: int) -> list[int]:
    node = min(HF_NODE, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def _hf_layers() -> list[tuple[int, int, int, int]]:
    """(channels in, channels out, spatial size, kernel size) of every conv, in forward order."""
    out = []
    cin = 64
    for mid, hw in HF_STAGES:
        for _ in range(HF_BLOCKS):
            out += [(cin, mid, hw, 1), (mid, mid, hw, 3), (mid, 4 * mid, hw, 1)]
            cin = 4 * mid
    return out


def _hf_conv(op: str, cin: int, c: int, hw: int, ks: int, dur: float) -> Kernel:
    act = f"{HF_BATCH},{c},{hw},{hw}"
    x = f"{HF_BATCH},{cin},{hw},{hw}"
    w = f"{c},{cin},{ks},{ks}"
    api = "aclnnConvolution" if op == "Conv2D" else "aclnnConvolutionBackward"
    ins = {
        "Conv2D": f"{x};{w}",
        "Conv2DBackpropInput": f"{w};{act}",
        "Conv2DBackpropFilter": f"{x};{act}",
    }[op]
    fm = {
        "Conv2D": "NC1HWC0;FRACTAL_Z",
        "Conv2DBackpropInput": "FRACTAL_Z;NC1HWC0",
        "Conv2DBackpropFilter": "NC1HWC0;NC1HWC0",
    }[op]
    outs = {"Conv2D": act, "Conv2DBackpropInput": x, "Conv2DBackpropFilter": w}[op]
    return _kern(
        f"{api}_{op}_{op}",
        op,
        "AI_CORE",
        ins,
        outs,
        dur,
        dt="DT_FLOAT",
        fmts=fm,
        out_fmt="FRACTAL_Z" if op == "Conv2DBackpropFilter" else "NC1HWC0",
        api=api,
        tag="conv",
        hf32=True,
    )


def hf_program() -> list[Item]:
    """ResNet-50-like fp32 step: 36 conv + BatchNorm + ReLU layers, fc, DDP buckets, SGD."""
    layers = _hf_layers()
    prog: list[Item] = []

    def bn(op: str, act: str, dur: float) -> Kernel:
        return _vec(op, act, dur, dt="DT_FLOAT", fmts="NC1HWC0", out_fmt="NC1HWC0")

    for cin, c, hw, ks in layers:
        act = f"{HF_BATCH},{c},{hw},{hw}"
        elems = HF_BATCH * c * hw * hw / 1e6
        conv = (160.0 + (150.0 if ks == 3 else 0.0) + 2.0 * elems) * HF_FP32
        b = (18.0 + 1.2 * elems) * 1.6
        prog += [
            _hf_conv("Conv2D", cin, c, hw, ks, conv),
            bn("BNTrainingReduce", act, b),
            bn("BNTrainingUpdate", act, 1.3 * b),
            bn("Relu", act, 0.5 * b),
        ]
    feat = f"{HF_BATCH},2048"
    prog += [
        _vec("ReduceMean", "", 24.0, ins=f"{HF_BATCH},2048,7,7", outs=feat, dt="DT_FLOAT"),
        _mm("fc", HF_BATCH, 2048, 1000, dur=28.0, dt="DT_FLOAT"),
        _vec("LogSoftmaxV2", f"{HF_BATCH},1000", 6.0, dt="DT_FLOAT"),
        _vec("NLLLoss", "", 5.0, ins=f"{HF_BATCH},1000;{HF_BATCH}", outs="1", dt="DT_FLOAT;INT64"),
        _vec("LogSoftmaxGrad", f"{HF_BATCH},1000", 6.0, dt="DT_FLOAT"),
        _mm("fc_dx", HF_BATCH, 1000, 2048, dur=30.0, dt="DT_FLOAT"),
        _mm("fc_dw", 1000, HF_BATCH, 2048, dur=30.0, dt="DT_FLOAT"),
    ]
    n = len(layers)
    per_bucket = n // HF_GRAD_BUCKETS
    for back, i in enumerate(reversed(range(n))):
        cin, c, hw, ks = layers[i]
        act = f"{HF_BATCH},{c},{hw},{hw}"
        elems = HF_BATCH * c * hw * hw / 1e6
        conv = (160.0 + (150.0 if ks == 3 else 0.0) + 2.0 * elems) * HF_FP32
        b = (18.0 + 1.2 * elems) * 1.6
        prog += [
            bn("ReluGrad", act, 0.6 * b),
            bn("BNTrainingUpdateGrad", act, 1.2 * b),
            bn("BNTrainingReduceGrad", act, 1.4 * b),
            _hf_conv("Conv2DBackpropInput", cin, c, hw, ks, conv * 1.1),
            _hf_conv("Conv2DBackpropFilter", cin, c, hw, ks, conv * 1.15),
        ]
        if (back + 1) % per_bucket == 0:
            last = back + 1 == n
            prog.append(
                Collective(
                    "hcom_allReduce_",
                    "world",
                    HF_GRAD_MB,
                    overlap=0 if last else HF_GRAD_OVERLAP,
                    dtype="FP32",
                    tag="grad_bucket",
                )
            )
    for op, dur in (("ForeachMulScalar", 260.0), ("ForeachAddList", 520.0)):
        prog.append(
            _kern(
                f"aclnn{op}V2_{op}V2_{op}",
                op,
                "AI_VECTOR_CORE",
                "2048,2048;2048,2048",
                "2048,2048",
                dur,
                dt="DT_FLOAT",
                bd=48,
            )
        )
    return prog


def _hf_off(k: Kernel) -> Kernel:
    """The conv in full fp32 (HF32 off): HF32 Eligible NO, longer."""
    return dataclasses.replace(k, hf32=False, dur_us=round(k.dur_us * HF_OFF[k.op_type], 1))


def hf_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = hf_program()
    p = default_perturb(ranks)
    ks = _kernels(prog)
    for r in _hf_ranks(ranks):
        for j, k in enumerate(ks):
            if k.hf32:
                p.kernel_swap[(-1, r, j)] = _hf_off(k)
    info = _info(CANN8, 1, ranks)
    _dist(info, model="resnet50", precision="fp32", micro_batch_size=HF_BATCH, image_size=224)
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def hf_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1's convs run without HF32, ~1.9x longer; node 0 waits for it."""
    cl: Cluster = m[""]["cluster"]
    bad = _hf_ranks(ranks)
    good = [r for r in range(ranks) if r not in bad]
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    conv = _kernel_us(cl, lambda k: k.tag == "conv")
    other = _kernel_us(cl, lambda k: k.tag != "conv")
    ks = cl.kernels
    dur = np.stack([st.k_dur / 1000 for st in cl.steps], axis=2)
    by_op = {
        op: round(
            float(
                np.median(dur[bad][:, [j for j, k in enumerate(ks) if k.op_type == op], :])
                / np.median(dur[good][:, [j for j, k in enumerate(ks) if k.op_type == op], :])
            ),
            3,
        )
        for op in HF_OFF
    }
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    vic = victims_by_wait(wait, bad)
    nums = {
        "culprit_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "first_culprit_rank": bad[0],
        "last_culprit_rank": bad[-1],
        "conv_kernels_per_step": sum(1 for k in ks if k.tag == "conv"),
        "conv_us_per_step_culprit": _r(float(conv[bad].mean())),
        "conv_us_per_step_others": _r(float(conv[good].mean())),
        "conv_ratio_culprit_vs_others": round(float(conv[bad].mean() / conv[good].mean()), 3),
        "conv2d_ratio_culprit_vs_others": by_op["Conv2D"],
        "conv2d_backprop_filter_ratio_culprit_vs_others": by_op["Conv2DBackpropFilter"],
        "other_kernels_ratio_culprit_vs_others": round(
            float(other[bad].mean() / other[good].mean()), 3
        ),
        "culprit_computing_us_per_step": _r(float(comp[bad].mean())),
        "others_computing_us_per_step": _r(float(comp[good].mean())),
        "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "median_step_us": _r(a),
        "median_step_us_hf32_everywhere": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        bad,
        "compute",
        ["compute-straggler-hidden", "load-imbalance-vs-slow-kernels"],
        "computing_us",
        nums,
    )
    rc = root_cause(
        "slow_group",
        "compute",
        "group",
        ranks=bad,
        victims=vic,
        not_slow=not_slow_sample(ranks, bad, vic),
        metrics={
            "conv_ratio_culprit_vs_others": nums["conv_ratio_culprit_vs_others"],
            "victim_wait_us_per_step": nums["victim_wait_us_per_step"],
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
        column="HF32 Eligible",
        culprit_value="NO",
        others_value="YES",
        operators=sorted(HF_OFF),
        dtype="DT_FLOAT",
        setting="torch.npu.conv.allow_hf32",
        file="kernel_details.csv (HF32 Eligible YES on every Conv2D / Conv2DBackpropInput / "
        "Conv2DBackpropFilter row of ranks 0-7, NO on the same rows of ranks 8-15, which run "
        "~1.8-1.95x as long with the same Input Shapes, DT_FLOAT, formats and Block Dim; "
        "BatchNorm / ReLU / the fc MatMulV2 (HF32 NO everywhere) equal), communication.json "
        "(node 0 waits in the gradient all-reduces), step_trace_time.csv (Computing higher on "
        "node 1)",
        same_shapes=True,
        same_dtypes=True,
        block_dim_same=True,
        links_normal=True,
        host_normal=True,
        every_step=True,
        cause=f"node {bad[0] // RANKS_PER_NODE} (ranks {bad[0]}-{bad[-1]}) runs with "
        "torch.npu.conv.allow_hf32 = False (left in its launch path from a GPU accuracy "
        "comparison) while node 0 keeps the default (HF32 on): in this fp32 CNN every "
        "convolution there (Conv2D and both backward convolutions) computes in full fp32, "
        "~1.8-1.95x as long as the same convolution with HF32, so node 1 finishes each backward "
        "bucket late and node 0 waits for it in every gradient all-reduce",
        fix="run node 1 with the same precision settings as node 0: remove "
        "torch.npu.conv.allow_hf32 = False (and any matching accuracy-debug setup) from its launch "
        "path / sync its training code, then check that HF32 Eligible reads YES on every conv "
        "row of every rank (or turn HF32 off everywhere if the accuracy study needs it)",
    )


# ---------------------------------------------------------------- registry
DEV30_SCENARIOS = (
    ScenarioSpec(
        "lm-head-vocab-unaligned",
        "GPT-2-small-like pretraining with the tokenizer's 50257-word vocabulary unpadded: the "
        "LM head's 3 MatMulV2 (logits [16384, 50257], K = 50257, [50257, 768]) at ~0.4x the "
        "other MatMuls' rate (aic_mac_ratio ~0.25 vs 0.62), every rank alike; job-level",
        16,
        4,
        va_plans,
        va_answer,
    ),
    ScenarioSpec(
        "attn-head-dim-padded",
        "DiT with head dim 72 (1152 / 16 heads): q / k / v padded to 128 around every "
        "FlashAttentionScore (3 PadV3 + a StridedSlice forward, the mirror backward), ~44% of "
        "the attention work on padding, every rank alike; job-level",
        16,
        4,
        hd_plans,
        hd_answer,
    ),
    ScenarioSpec(
        "vlm-conv3d-patch-embed",
        "VLM SFT grouped by modality: in the image steps the vision patch embedding runs as a "
        "Conv3D on 3 channels (TransData to NDC1HWC0, Conv3D + Conv3DBackpropFilterV2, ~15 ms) "
        "instead of a ~0.1 ms Linear; those steps longer on every rank alike",
        16,
        8,
        cv_plans,
        cv_answer,
    ),
    ScenarioSpec(
        "hf32-off-node",
        "fp32 ResNet-50-like CNN: node 1 runs with torch.npu.conv.allow_hf32 = False (HF32 "
        "Eligible NO on its conv rows, YES on node 0's): every convolution there ~1.9x longer, "
        "same shapes / dtypes / Block Dim; node 0 waits in the gradient all-reduces",
        16,
        4,
        hf_plans,
        hf_answer,
        min_ranks=16,
        rank_multiple=RANKS_PER_NODE,
    ),
)
DEV30_KINDS = tuple(s.name for s in DEV30_SCENARIOS)


__all__ = ["DEV30_KINDS", "DEV30_SCENARIOS"]
