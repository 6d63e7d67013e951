"""Development set 33 of fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``, ``advisor_chat.synth.writer``) with an answer key derived from the
simulated timeline and the breakdown the writer measured (never from typed numbers). Every key
carries ``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the
files). Their question set is ``evals/datasets/generalization_dev33.yaml``: a development set for
finding weaknesses; the held-out kinds of ``generalization.yaml`` stay untouched. The "how much would
fixing it save" numbers come from re-simulating the same run (seed, steps) without the fault.

Three operator-level inefficiencies and one training-loop habit; the evidence of each is in a
different place of the files: the ``Accelerator Core`` column (``AI_CPU`` rows of a random-number
operator) of kernel_details.csv / the ``Core Type`` of op_statistic.csv; the last axis of the
SoftmaxV2 / SoftmaxGrad ``Input Shapes`` against ``Step Id`` and ``Duration(us)`` (and the
per-step Computing of step_trace_time.csv); operators and an extra communicator present on one
node's ranks only (kernel_details.csv, communication.json, ``parallel_group_info``) with the other
node's Wait Time; and the ``Input Shapes`` (group count, rows) and PipeUtilization columns of the
GroupedMatmul rows:

- ``dropout-rng-aicpu``: a GPT-style model (4 layers of hidden 4096, 4096 tokens) ported from a GPU
  code base whose hidden dropout (p = 0.1, after the attention output and the MLP down projection
  of every layer) draws its masks with ``torch.rand(x.shape, generator=g)`` on an explicit
  per-layer generator and compares: this torch_npu / CANN build runs that draw as an AI CPU kernel,
  ``StatelessRandomUniformV2`` (``Accelerator Core`` ``AI_CPU``, output [4096, 4096] DT_FLOAT),
  ~3.6 ms per call, 8 a step, then GreaterEqual / Cast / Mul / Muls on the AI vector cores (and a
  Mul / Muls per site in the backward). The AI Cores wait while the AI CPU fills the mask, on every
  rank alike (no late rank). Fix: ``torch.nn.functional.dropout`` (torch_npu's npu_dropout:
  DropOutGenMaskV3 + DropOutDoMaskV3 on the AI vector cores, ~0.1 ms a site). Job-level.
- ``softmax-unaligned-buckets``: a DiT-style image diffusion model (hidden 1024, 16 heads of 64, 12
  blocks, 8 images per card) trained with aspect-ratio buckets (one bucket per global batch, so
  every rank sees the same shapes in a step) and timm-style eager attention (BatchMatMulV2,
  SoftmaxV2, BatchMatMulV2). Most buckets give a token count that is a multiple of 16 (32 x 32 =
  1024, 28 x 36 = 1008, 26 x 40 = 1040) but two do not (30 x 34 = 1020, 22 x 46 = 1012): in those
  steps the softmax over a last axis of 1020 / 1012 bf16 values (not 32-byte aligned) takes the
  vector unit's unaligned path, SoftmaxV2 ~2.8x and SoftmaxGrad ~2.6x the time per element of the
  aligned steps (aiv_vec_ratio ~0.15, scalar-bound), so those steps run ~19 ms longer on every rank
  alike; the MatMuls and the other vector kernels scale with the token count as usual. Culprit:
  those steps (a job-level cause scoped to them). Fix: pad the attention's sequence to a multiple
  of 16 (masked keys) or choose bucket sizes whose token count is one; better, fused attention
  (npu_fusion_attention). The eager attention costs time in every step too (what
  ``unfused-attention`` plants); what this kind adds, and what its key is about, is the difference
  between the steps: the same operators at ~2.7x the per-element time when the axis is off 16.
- ``metrics-on-dp0-tp-group``: TP 8 x DP 2 on two servers (the TP all-reduces fused into the
  MatMuls, MC2), vocab-parallel LM head (152064 / 8 = 19008 logits per rank); the training loop computes accuracy, top-5 accuracy and the predictive
  entropy of the logits every step under ``if data_parallel_rank == 0`` (for the progress
  logger), i.e. on the 8 TP ranks of node 0 only: ArgMaxWithValue, TopKV2 and an fp32 entropy
  chain (Cast, ReduceMax, Sub, Exp, ReduceSum, Div, Log, Mul, ReduceSum) over the [4096, 19008]
  logits shard and 5 small collectives on Megatron's model-parallel communicator (``mp``, the same
  8 ranks as TP), ~6.5 ms a step, between the loss and the backward. Node 1 (ranks 8-15) has none of
  them and waits for its data-parallel partner in the first gradient all-reduce of every step
  (~6.9 ms).
  Culprit: node 0 (ranks 0-7, the TP group of data-parallel rank 0); links and kernels normal. Fix:
  compute the metrics every ``log_interval`` steps (or from the loss already reduced), not every
  step.
- ``moe-gmm-tiny-groups``: a fine-grained MoE (64 routed experts of FFN 1408, top-6, hidden 2048)
  fine-tuned with the experts frozen and expert parallelism 1 (every card holds all 64 experts; DP
  16), 1024-token micro-batches, 4 per step (gradient accumulation): every GroupedMatmul gets 6144
  routed rows in 64 groups of ~96 rows, reads all 64 experts' weights (~738 MB / ~369 MB) for
  them and is bound by that read: ~0.4-0.7 ms at ~100 TFLOPS (aic_mac_ratio ~0.25,
  aic_mte2_ratio ~0.93) against ~250 for the attention MatMulV2, 64 of them a step, over half of
  the step, on every rank alike. Fix: more rows per GroupedMatmul call: micro-batch 4 with no
  accumulation (same tokens per step: ~384 rows per group, the weights read once instead of 4
  times), packing, or expert parallelism. Job-level.
"""

from __future__ import annotations

import dataclasses
import math
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
    H,
    Plan,
    S,
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
from advisor_chat.synth.scenarios_dev10 import _share
from advisor_chat.synth.scenarios_dev19 import _kernel_us, _med, _saving
from advisor_chat.synth.scenarios_dev28 import _dist, _kernels
from advisor_chat.synth.scenarios_dev30 import (
    CUBE_UTIL,
    FA_TFLOPS,
    FAG_FACTOR,
    MAC_RATIO,
    MM_TFLOPS,
    _kern,
    _mm,
    _ms,
    _optimizer,
    _vec,
)
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    step_ids,
    victims_by_wait,
)

VEC_GBPS = 1400.0  # effective HBM rate of a streaming bf16 / fp32 vector kernel (GB/s)


def _bytes_us(nbytes: float, gbps: float = VEC_GBPS, floor: float = 8.0) -> float:
    """Duration (µs) of a memory-bound kernel moving ``nbytes`` (plus a small fixed cost)."""
    return nbytes / (gbps * 1e3) + floor


def _with_out(k: Kernel, dtype: str) -> Kernel:
    return dataclasses.replace(k, out_dtypes=dtype)


def _dur_matrix(cl: Cluster) -> np.ndarray:
    """[ranks, kernels, steps] kernel durations (µs) as simulated."""
    return np.stack([st.k_dur / 1000 for st in cl.steps], axis=2)


# ---------------------------------------------------------------- dropout-rng-aicpu
DR_LAYERS = 4
DR_P = 0.1
DR_RNG_US = 3600.0  # AI CPU: 16.8 M Philox draws into a [4096, 4096] fp32 tensor
DR_SITES = ("attn_out", "mlp_down")  # hidden dropout after these forward MatMuls
DR_BWD = {"mlp_down_dx": "mlp_down", "attn_out_dx": "attn_out"}  # its backward, before these
DR_RNG_TAG = "dropout_rng"
DR_TAG = "dropout"
DR_OP = "StatelessRandomUniformV2"
DR_ACT = f"{S},{H}"
DR_MASK_BYTES = S * H // 8  # DropOutGenMaskV3's bit mask


def _dr_site(fixed: bool) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of one dropout site."""
    act = DR_ACT
    n = S * H
    mul_us = round(_bytes_us(3 * 2 * n), 1)  # bf16 x * mask
    muls_us = round(_bytes_us(2 * 2 * n), 1)
    if fixed:
        gen = _with_out(
            _kern(
                "aclnnDropoutGenMaskV2_DropOutGenMaskV3_DropOutGenMaskV3",
                "DropOutGenMaskV3",
                "AI_VECTOR_CORE",
                "2;",
                f"{DR_MASK_BYTES}",
                round(_bytes_us(DR_MASK_BYTES, floor=24.0), 1),
                dt="INT64;DT_FLOAT",
                api="aclnnDropoutGenMaskV2",
                tag=DR_TAG,
            ),
            "UINT8",
        )
        do = _kern(
            "aclnnDropoutDoMask_DropOutDoMaskV3_DropOutDoMaskV3",
            "DropOutDoMaskV3",
            "AI_VECTOR_CORE",
            f"{act};{DR_MASK_BYTES};",
            act,
            round(_bytes_us(2 * 2 * n + DR_MASK_BYTES), 1),
            dt="DT_BF16;UINT8;DT_FLOAT",
            api="aclnnDropoutDoMask",
            tag=DR_TAG,
        )
        return [gen, do], [do]
    rng = Kernel(
        name=DR_OP,
        op_type=DR_OP,
        core="AI_CPU",
        in_shapes="2;1;2;",
        in_dtypes="INT64;UINT64;UINT64;INT32",
        in_formats="ND;ND;ND;ND",
        out_shapes=act,
        out_dtypes="DT_FLOAT",
        out_formats="ND",
        dur_us=DR_RNG_US,
        block_dim=1,
        api="aclnnInplaceUniform",
        tag=DR_RNG_TAG,
    )
    ge = _with_out(
        _kern(
            "aclnnGeScalar_GreaterEqual_GreaterEqual",
            "GreaterEqual",
            "AI_VECTOR_CORE",
            f"{act};",
            act,
            round(_bytes_us(5 * n), 1),
            dt="DT_FLOAT;DT_FLOAT",
            api="aclnnGeScalar",
            tag=DR_TAG,
        ),
        "BOOL",
    )
    cast = _with_out(
        _kern(
            "aclnnCast_Cast_Cast",
            "Cast",
            "AI_VECTOR_CORE",
            act,
            act,
            round(_bytes_us(3 * n), 1),
            dt="BOOL",
            api="aclnnCast",
            tag=DR_TAG,
        ),
        "DT_BF16",
    )
    mul = _vec("Mul", act, mul_us, tag=DR_TAG, ins=f"{act};{act}")
    muls = _with_out(
        _vec("Muls", act, muls_us, tag=DR_TAG, ins=f"{act};", dt="DT_BF16;DT_FLOAT"), "DT_BF16"
    )
    return [rng, ge, cast, mul, muls], [mul, muls]


def dr_program(fixed: bool = False) -> list[Item]:
    """transformer() with a hidden dropout after the attention output and the MLP of every layer."""
    fwd, bwd = _dr_site(fixed)
    prog: list[Item] = []
    for it in transformer(layers=DR_LAYERS):
        if isinstance(it, Kernel) and it.tag in DR_BWD:
            prog += bwd
        prog.append(it)
        if isinstance(it, Kernel) and it.tag in DR_SITES:
            prog += fwd
    return prog


def dr_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        num_layers=DR_LAYERS,
        hidden_size=H,
        seq_length=S,
        micro_batch_size=1,
        hidden_dropout=DR_P,
        attention_dropout=0.0,
    )
    return {"": Plan(dr_program(), group_kinds(ranks, 1), default_perturb(ranks), info)}


def dr_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the AI CPU mask draws of the hidden dropout, on every rank alike."""
    cl: Cluster = m[""]["cluster"]
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    ks = cl.kernels
    rng_idx = [j for j, k in enumerate(ks) if k.core == "AI_CPU"]
    aicpu = _kernel_us(cl, lambda k: k.core == "AI_CPU")
    drop = _kernel_us(cl, lambda k: k.tag in (DR_RNG_TAG, DR_TAG))
    dur = _dur_matrix(cl)
    fix_cl = _resimulate(
        dataclasses.replace(cl, perturb=default_perturb(cl.ranks)), dr_program(fixed=True)
    )
    base = _sim_breakdown(fix_cl)
    drop_fixed = _kernel_us(fix_cl, lambda k: k.tag == DR_TAG)
    a, b, save = _saving(step, base["step_us"])
    wait = coll_wait_us(m).mean(axis=1)
    sites = sum(1 for k in ks if k.tag in DR_SITES)
    nums = {
        "dropout_p": DR_P,
        "dropout_sites_per_step": sites,
        "aicpu_kernels_per_step": len(rng_idx),
        "rng_us_median": _med(dur[:, rng_idx, :]),
        "aicpu_us_per_step": _ms(aicpu),
        "aicpu_share_of_step": _share(aicpu, step),
        "aicpu_share_of_computing": _share(aicpu, comp),
        "dropout_us_per_step": _ms(drop),
        "dropout_us_per_step_fused": _ms(drop_fixed),
        "median_computing_us_per_step": _ms(comp),
        "median_computing_share": _share(comp, step),
        "wait_us_per_step_spread": _r(float(wait.max() - wait.min())),
        "median_step_us": _r(a),
        "median_step_us_fused_dropout": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    k0 = ks[rng_idx[0]]
    key = _key(
        [],
        "compute",
        ["aicpu-operators"],
        "computing_us",
        nums,
        op={"op_type": k0.op_type, "name": k0.name, "input_shapes": k0.in_shapes},
    )
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={
            "aicpu_us_per_step": nums["aicpu_us_per_step"],
            "aicpu_share_of_step": nums["aicpu_share_of_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operator=DR_OP,
        accelerator_core="AI_CPU",
        output_shape=DR_ACT,
        output_dtype="DT_FLOAT",
        after_operators=["MatMulV2 (attention output)", "MatMulV2 (MLP down projection)"],
        mask_operators=["GreaterEqual", "Cast", "Mul", "Muls"],
        fused_operators=["DropOutGenMaskV3", "DropOutDoMaskV3"],
        file="kernel_details.csv (8 StatelessRandomUniformV2 rows a step with Accelerator Core "
        "AI_CPU, Block Dim 1, output [4096, 4096] DT_FLOAT, ~3.6 ms each, right after the "
        "attention-output and MLP-down MatMulV2 of every layer and followed by GreaterEqual / Cast "
        "/ Mul / Muls on the same shape), op_statistic.csv (StatelessRandomUniformV2 with Core "
        "Type AI_CPU near the top of the total time), step_trace_time.csv (Computing on every rank "
        "alike); profiler_metadata.json hidden_dropout 0.1",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        host_normal=True,
        cause="the hidden dropout (p = 0.1, after the attention output and the MLP of every layer) "
        "draws its mask with torch.rand on an explicit generator and a comparison (a "
        "'reproducible dropout' helper from a GPU code base): the draw runs as an AI CPU kernel "
        "(StatelessRandomUniformV2) filling a [4096, 4096] fp32 tensor, ~3.6 ms each, 8 a step, "
        "while the AI Cores wait for it; every rank and step alike",
        fix="use torch.nn.functional.dropout / nn.Dropout (torch_npu's npu_dropout: the mask is "
        "generated on the AI vector cores by DropOutGenMaskV3 and applied by DropOutDoMaskV3, "
        "~0.1 ms a site); keep per-layer generators only if the masks must match across ranks, "
        "through torch_npu's RNG state rather than torch.rand",
    )


# ---------------------------------------------------------------- softmax-unaligned-buckets
SB_H = 1024
SB_HEADS = 16
SB_D = SB_H // SB_HEADS  # 64
SB_B = 8  # images per card per step
SB_BLOCKS = 12
SB_ALIGN = 16  # 32 bytes of bf16
SB_PX = 16  # pixels per token: 8x VAE, 2 x 2 patches
# (height, width) in tokens of the bucket of each step, in sampling order
SB_BUCKETS = ((32, 32), (30, 34), (28, 36), (26, 40), (22, 46), (36, 28))
SB_BMM_TFLOPS = 200.0
SB_SLOW = {"SoftmaxV2": 2.8, "SoftmaxGrad": 2.6}  # per-element time on an unaligned last axis
SB_BUCKET_MB = 110.0  # DDP gradient bucket (bf16): three blocks
SB_BUCKET_BLOCKS = 3
SB_OVERLAP = 60  # kernels of the next blocks' backward that run beside a bucket
SB_ATTN_TAG = "attn"


def _sb_tokens(si: int) -> int:
    h, w = SB_BUCKETS[si % len(SB_BUCKETS)]
    return h * w


def _sb_pad(n: int) -> int:
    return SB_ALIGN * math.ceil(n / SB_ALIGN)


def _sb_unaligned(steps: int) -> list[int]:
    return [si for si in range(steps) if _sb_tokens(si) % SB_ALIGN]


def _sb_unaligned_pmu(kind: str) -> tuple[tuple[str, float], ...]:
    f = SB_SLOW[kind]
    return (
        ("aiv_vec_ratio", round(0.41 / f, 3)),
        ("aiv_scalar_ratio", 0.46),
        ("aiv_mte2_ratio", 0.62),
        ("aiv_mte3_ratio", 0.21),
    )


def sb_block(n: int, attn_n: int | None = None) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of one DiT block on ``n`` tokens per image.

    ``attn_n``: the attention's sequence length (``n`` unless padded to a multiple of 16).
    """
    an = n if attn_n is None else attn_n
    t = SB_B * n
    h, d, heads = SB_H, SB_D, SB_HEADS
    tok = f"{t},{h}"
    bh = f"{SB_B},{heads}"
    qkv5 = f"{SB_B},{n},3,{heads},{d}"
    q4 = f"{SB_B},{heads},{an},{d}"
    sc = f"{bh},{an},{an}"
    scores = SB_B * heads * an * an
    slow = an % SB_ALIGN != 0
    bmm_us = round(2.0 * SB_B * heads * an * an * d / (SB_BMM_TFLOPS * 1e6), 1)

    def bmm(tag: str) -> Kernel:
        return _kern(
            "aclnnBatchMatMul_BatchMatMulV2_BatchMatMulV2",
            "BatchMatMulV2",
            "AI_CORE",
            f"{q4};{q4}" if tag in ("qk", "dq", "dk") else f"{sc};{q4}",
            sc if tag in ("qk", "dp") else q4,
            bmm_us,
            api="aclnnBatchMatMul",
            tag=SB_ATTN_TAG,
        )

    sm_us = _bytes_us(2 * 2 * scores) * (SB_SLOW["SoftmaxV2"] if slow else 1.0)
    smg_us = _bytes_us(3 * 2 * scores) * (SB_SLOW["SoftmaxGrad"] if slow else 1.0)
    sm = _kern(
        "aclnnSoftmax_SoftmaxV2_SoftmaxV2",
        "SoftmaxV2",
        "AI_VECTOR_CORE",
        sc,
        sc,
        sm_us,
        api="aclnnSoftmax",
        tag=SB_ATTN_TAG,
        pmu=_sb_unaligned_pmu("SoftmaxV2") if slow else (),
    )
    smg = _kern(
        "aclnnSoftmaxBackward_SoftmaxGrad_SoftmaxGrad",
        "SoftmaxGrad",
        "AI_VECTOR_CORE",
        f"{sc};{sc}",
        sc,
        smg_us,
        api="aclnnSoftmaxBackward",
        tag=SB_ATTN_TAG,
        pmu=_sb_unaligned_pmu("SoftmaxGrad") if slow else (),
    )
    tr_qkv = _kern(
        "aclnnPermute_Transpose_Transpose",
        "Transpose",
        "AI_VECTOR_CORE",
        qkv5,
        f"3,{SB_B},{heads},{n},{d}",
        _bytes_us(2 * 2 * 3 * t * h),
        api="aclnnPermute",
    )
    tr_out = _kern(
        "aclnnPermute_Transpose_Transpose",
        "Transpose",
        "AI_VECTOR_CORE",
        f"{SB_B},{heads},{n},{d}",
        f"{SB_B},{n},{heads},{d}",
        _bytes_us(2 * 2 * t * h),
        api="aclnnPermute",
    )
    tr_out_g = dataclasses.replace(tr_out, in_shapes=tr_out.out_shapes, out_shapes=tr_out.in_shapes)
    tr_qkv_g = dataclasses.replace(tr_qkv, in_shapes=tr_qkv.out_shapes, out_shapes=tr_qkv.in_shapes)

    def ew(op: str, width: int = h, k: float = 3.0) -> Kernel:
        return _vec(op, f"{t},{width}", _bytes_us(k * 2 * t * width))

    ln = _vec("LayerNormV4", tok, _bytes_us(2 * 2 * t * h, floor=12.0))
    lng = _vec("LayerNormGradV3", tok, _bytes_us(4 * 2 * t * h, floor=12.0))
    fwd = [
        ln,
        ew("Mul"),
        ew("Add"),
        _mm("qkv", t, h, 3 * h),
        tr_qkv,
        bmm("qk"),
        sm,
        bmm("av"),
        tr_out,
        _mm("proj", t, h, h),
        ew("Mul"),
        ew("Add"),
        ln,
        ew("Mul"),
        ew("Add"),
        _mm("mlp_up", t, h, 4 * h),
        ew("GeluV2", 4 * h, 2.0),
        _mm("mlp_down", t, 4 * h, h),
        ew("Mul"),
        ew("Add"),
    ]
    bwd = [
        ew("Mul"),
        _mm("mlp_down_dx", t, h, 4 * h),
        _mm("mlp_down_dw", h, t, 4 * h),
        ew("GeluGrad", 4 * h, 3.0),
        _mm("mlp_up_dx", t, 4 * h, h),
        _mm("mlp_up_dw", 4 * h, t, h),
        ew("Mul"),
        lng,
        ew("Mul"),
        _mm("proj_dx", t, h, h),
        _mm("proj_dw", h, t, h),
        tr_out_g,
        bmm("dp"),
        bmm("dv"),
        smg,
        bmm("dq"),
        bmm("dk"),
        tr_qkv_g,
        _mm("qkv_dx", t, 3 * h, h),
        _mm("qkv_dw", 3 * h, t, h),
        ew("Mul"),
        lng,
    ]
    return fwd, bwd


def sb_kernels(n: int, attn_n: int | None = None) -> list[Kernel]:
    """Every kernel of a step on ``n`` tokens per image, in program order."""
    return _kernels(sb_program(n, attn_n))


def sb_program(n: int | None = None, attn_n: int | None = None) -> list[Item]:
    """Forward of every block, backward in reverse with DDP buckets, AdamW."""
    n = _sb_tokens(0) if n is None else n
    fwd, bwd = sb_block(n, attn_n)
    prog: list[Item] = []
    for _ in range(SB_BLOCKS):
        prog += fwd
    for back in range(SB_BLOCKS):
        prog += bwd
        if (back + 1) % SB_BUCKET_BLOCKS == 0:
            last = back + 1 == SB_BLOCKS
            prog.append(
                Collective(
                    "hcom_allReduce_",
                    "world",
                    SB_BUCKET_MB,
                    overlap=0 if last else SB_OVERLAP,
                    tag="grad_bucket",
                )
            )
    prog += _optimizer(SB_BLOCKS * 19.0)
    return prog


def _sb_perturb(ranks: int, steps: int, pad: bool = False) -> Any:
    """Every rank's kernels of each step on that step's bucket (``pad``: attention padded)."""
    p = default_perturb(ranks)
    base = sb_kernels(_sb_tokens(0))
    for si in range(steps):
        n = _sb_tokens(si)
        an = _sb_pad(n) if pad else n
        if n == _sb_tokens(0) and an == n:
            continue
        ks = sb_kernels(n, an)
        for j, k in enumerate(ks):
            if k != base[j]:
                for r in range(ranks):
                    p.kernel_swap[(si, r, j)] = k
    return p


def sb_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        model="DiT",
        num_layers=SB_BLOCKS,
        hidden_size=SB_H,
        num_attention_heads=SB_HEADS,
        micro_batch_size=SB_B,
        patch_size=2,
        vae_downsample=8,
        aspect_ratio_buckets=[[h * SB_PX, w * SB_PX] for h, w in SB_BUCKETS],
        attention_backend="eager",
    )
    return {"": Plan(sb_program(), group_kinds(ranks, 1), _sb_perturb(ranks, steps), info)}


def sb_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the steps whose bucket has a token count off 16 run a slow softmax."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    bad = _sb_unaligned(steps)
    good = [si for si in range(steps) if si not in bad]
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    sm = _kernel_us(cl, lambda k: k.op_type == "SoftmaxV2")
    smg = _kernel_us(cl, lambda k: k.op_type == "SoftmaxGrad")
    dur = _dur_matrix(cl)
    sm_idx = [j for j, k in enumerate(cl.kernels) if k.op_type == "SoftmaxV2"]
    smg_idx = [j for j, k in enumerate(cl.kernels) if k.op_type == "SoftmaxGrad"]

    def per_elem(idx: list[int], sis: list[int]) -> float:
        """Median ns per score element of those kernels in those steps."""
        vals = [
            float(dur[r, j, si]) * 1000 / (SB_B * SB_HEADS * _sb_tokens(si) ** 2)
            for si in sis
            for j in idx
            for r in range(cl.ranks)
        ]
        return float(np.median(vals))

    pad_p = _sb_perturb(ranks, steps, pad=True)
    fix_cl = _resimulate(dataclasses.replace(cl, perturb=pad_p), cl.program)
    fix = _sim_breakdown(fix_cl)
    extra = step - fix["step_us"]
    shapes = sorted({_sb_tokens(si) for si in bad})
    nums: dict[str, Any] = {
        "blocks": SB_BLOCKS,
        "images_per_card": SB_B,
        "tokens_per_image_by_step": [_sb_tokens(si) for si in range(steps)],
        "unaligned_steps": [ids[si] for si in bad],
        "first_unaligned_step": ids[bad[0]] if bad else None,
        "last_unaligned_step": ids[bad[-1]] if bad else None,
        "unaligned_token_counts": shapes,
        "padded_token_counts": [_sb_pad(n) for n in shapes],
        "alignment_elements": SB_ALIGN,
        "softmax_per_step": len(sm_idx),
        "softmax_us_per_call_unaligned": _med(dur[:, sm_idx][:, :, bad]) if bad else None,
        "softmax_grad_us_per_call_unaligned": _med(dur[:, smg_idx][:, :, bad]) if bad else None,
        "softmax_us_per_step_unaligned": _med((sm + smg)[:, bad]) if bad else None,
        "median_step_us": _r(float(np.median(step))),
        "median_computing_us": _r(float(np.median(comp))),
    }
    if bad and good:
        f_sm = per_elem(sm_idx, bad) / per_elem(sm_idx, good)
        f_smg = per_elem(smg_idx, bad) / per_elem(smg_idx, good)
        nums.update(
            {
                "softmax_us_per_call_aligned": _med(dur[:, sm_idx][:, :, good]),
                "softmax_grad_us_per_call_aligned": _med(dur[:, smg_idx][:, :, good]),
                "softmax_us_per_step_aligned": _med((sm + smg)[:, good]),
                "softmax_slowdown_per_element": round(f_sm, 3),
                "softmax_grad_slowdown_per_element": round(f_smg, 3),
                "step_us_unaligned_median": _med(step[:, bad]),
                "step_us_aligned_median": _med(step[:, good]),
                "extra_us_per_unaligned_step": _r(
                    float(np.median(step[:, bad]) - np.median(step[:, good]))
                ),
                "computing_us_unaligned_median": _med(comp[:, bad]),
                "computing_us_aligned_median": _med(comp[:, good]),
            }
        )
    if bad:
        nums.update(
            {
                "step_us_unaligned_padded_median": _med(fix["step_us"][:, bad]),
                "saving_us_per_unaligned_step": _med(extra[:, bad]),
                "saving_share_of_unaligned_step": round(
                    float(np.median(extra[:, bad]) / np.median(step[:, bad])), 4
                ),
                "saving_us_per_step_average": _r(float(extra.mean())),
            }
        )
    k_sm = sb_kernels(shapes[0])[sm_idx[0]] if bad else cl.kernels[sm_idx[0]]
    key = _key(
        [],
        "compute",
        ["shape-axis-alignment"],
        "computing_us",
        nums,
        op={"op_type": k_sm.op_type, "name": k_sm.name, "input_shapes": k_sm.in_shapes},
    )
    rc = root_cause(
        "job_hotspot",
        "compute",
        "job",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        steps=[ids[si] for si in bad],
        metrics={
            "softmax_us_per_step_unaligned": nums["softmax_us_per_step_unaligned"],
            "saving_us_per_unaligned_step": nums.get("saving_us_per_unaligned_step"),
            "unaligned_steps": nums["unaligned_steps"],
        },
    )
    return _with_evidence(
        key,
        rc,
        unaligned_steps=[ids[si] for si in bad],
        first_unaligned_step=ids[bad[0]] if bad else None,
        last_unaligned_step=ids[bad[-1]] if bad else None,
        aligned_steps=[ids[si] for si in good],
        buckets_tokens={
            str(ids[si]): list(SB_BUCKETS[si % len(SB_BUCKETS)]) for si in range(steps)
        },
        buckets_pixels={
            str(ids[si]): [x * SB_PX for x in SB_BUCKETS[si % len(SB_BUCKETS)]]
            for si in range(steps)
        },
        unaligned_token_counts=shapes,
        operators=["SoftmaxV2", "SoftmaxGrad"],
        softmax_shapes={
            str(ids[si]): f"{SB_B},{SB_HEADS},{_sb_tokens(si)},{_sb_tokens(si)}" for si in bad
        },
        pmu_columns=["aiv_vec_ratio", "aiv_scalar_ratio"],
        file="kernel_details.csv (SoftmaxV2 / SoftmaxGrad rows whose Input Shapes end in 1020 or "
        "1012, only in those steps' Step Id, ~2.6-2.8x the Duration per element of the same "
        "operators on 1024 / 1008 / 1040 in the other steps, aiv_vec_ratio ~0.15 against 0.41; "
        "the MatMulV2 / BatchMatMulV2 and the other vector kernels scale with the token count "
        "only), step_trace_time.csv (Computing higher in those steps on every rank alike); "
        "profiler_metadata.json aspect_ratio_buckets, attention_backend eager",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        every_step=False,
        host_normal=True,
        eager_attention_every_step=True,
        cause="the aspect-ratio buckets 30 x 34 and 22 x 46 (480 x 544 and 352 x 736 px) give "
        "1020 / 1012 tokens per image, not a multiple of 16: the eager attention's SoftmaxV2 and "
        "SoftmaxGrad over a last axis of 1020 / 1012 bf16 values (rows not 32-byte aligned) take "
        "the vector unit's unaligned, scalar-bound path at ~1/2.7 of the per-element rate they "
        "reach on 1024 / 1008 / 1040, so the steps that draw those buckets run ~19 ms longer on "
        "every rank alike",
        fix="pad the attention's sequence to a multiple of 16 with a key-padding mask (or keep "
        "only buckets whose h x w token count is a multiple of 16, e.g. 32 x 32, 28 x 36, 26 x "
        "40); better, replace the eager attention by torch_npu.npu_fusion_attention "
        "(FlashAttentionScore), which does not materialise the softmax",
    )


# ---------------------------------------------------------------- metrics-on-dp0-tp-group
MG_TP = 8
MG_V = 152064
MG_VS = MG_V // MG_TP  # 19008 logits per TP rank
MG_LAYERS = 4
MG_NODE = 0  # data-parallel rank 0's TP group
MG_TAG = "metrics"
MG_COMM_US = 25.0  # fixed cost of one small collective
MG_GBPS = 1300.0
MG_GRAD_MB = 48.0  # a layer's gradient on one TP rank (bf16): 1/8 of ~201 M parameters


def _mg_ranks(ranks: int) -> list[int]:
    return list(range(MG_NODE * MG_TP, (MG_NODE + 1) * MG_TP))


def _mg_loss() -> tuple[list[Item], list[Item]]:
    """LM head + vocab-parallel cross entropy (every rank): (forward, backward) items."""
    sh = f"{S},{MG_VS}"
    n = S * MG_VS
    head = _mm("lm_head", S, H, MG_VS)
    small = 0.016  # MB: one fp32 value per token

    def v(op: str, k: float, ins: str = sh, outs: str = sh) -> Kernel:
        return _vec(op, "", _bytes_us(k * 2 * n, MG_GBPS), ins=ins, outs=outs, tag="loss")

    fwd: list[Item] = [
        head,
        v("ReduceMax", 1.0, outs=f"{S}"),
        Collective("hcom_allReduce_", "tp", small, dtype="FP32", latency_us=MG_COMM_US),
        v("Sub", 2.0, ins=f"{sh};{S},1"),
        _vec("GatherElements", "", 15.0, ins=f"{sh};{S},1", outs=f"{S},1", tag="loss"),
        Collective("hcom_allReduce_", "tp", small, dtype="FP32", latency_us=MG_COMM_US),
        v("Exp", 2.0),
        v("ReduceSum", 1.0, outs=f"{S}"),
        Collective("hcom_allReduce_", "tp", small, dtype="FP32", latency_us=MG_COMM_US),
        _vec("Log", f"{S}", 6.0, tag="loss"),
    ]
    bwd: list[Item] = [
        v("Div", 2.0, ins=f"{sh};{S},1"),
        v("Sub", 2.0),
        _mm("lm_head_dx", S, MG_VS, H),
        Collective("hcom_allReduce_", "tp", 32.0),
        _mm("lm_head_dw", MG_VS, S, H),
    ]
    return fwd, bwd


def _mg_metrics() -> list[Item]:
    """Accuracy, top-5 accuracy and predictive entropy of the vocab-parallel logits (DP rank 0)."""
    sh = f"{S},{MG_VS}"
    n = S * MG_VS

    def v(op: str, k: float, dt: str = "DT_BF16", **kw: Any) -> Kernel:
        kw.setdefault("outs", sh)
        return _vec(op, "", _bytes_us(k * n, MG_GBPS), ins=kw.pop("ins", sh), dt=dt, **kw)

    def tiny(op: str, ins: str, outs: str, dur: float) -> Kernel:
        return _vec(op, "", dur, ins=ins, outs=outs, tag=MG_TAG)

    def mp(op: str, mb: float) -> Collective:
        return Collective(op, "mp", mb, dtype="FP32", latency_us=MG_COMM_US, tag=MG_TAG)

    tok = f"{S}"
    return [
        # accuracy: local argmax, gather the 8 shards' maxima, pick, compare with the labels
        _with_out(v("ArgMaxWithValue", 2.0 * 2.0, outs=f"{tok};{tok}", tag=MG_TAG), "INT32"),
        mp("hcom_allGather_", 0.033),
        tiny("ArgMaxWithValue", f"{MG_TP},{S}", tok, 12.0),
        tiny("Equal", f"{tok};{tok}", tok, 6.0),
        tiny("ReduceSum", tok, "1", 6.0),
        # top-5 accuracy: local top-k, gather, top-k of the 40 candidates, any hit
        v("TopKV2", 2.0 * 12.0, ins=f"{sh};", outs=f"{S},5;{S},5", tag=MG_TAG),
        mp("hcom_allGather_", 0.164),
        tiny("TopKV2", f"{S},{5 * MG_TP};", f"{S},5;{S},5", 15.0),
        tiny("Equal", f"{S},5;{S},1", f"{S},5", 6.0),
        tiny("ReduceAny", f"{S},5", tok, 6.0),
        tiny("ReduceSum", tok, "1", 6.0),
        # entropy in fp32: softmax over the whole vocabulary across the 8 shards
        _with_out(v("Cast", 6.0, tag=MG_TAG), "DT_FLOAT"),
        v("ReduceMax", 4.0, dt="DT_FLOAT", outs=tok, tag=MG_TAG),
        mp("hcom_allReduce_", 0.016),
        v("Sub", 8.0, dt="DT_FLOAT", ins=f"{sh};{S},1", tag=MG_TAG),
        v("Exp", 16.0, dt="DT_FLOAT", tag=MG_TAG),
        v("ReduceSum", 4.0, dt="DT_FLOAT", outs=tok, tag=MG_TAG),
        mp("hcom_allReduce_", 0.016),
        v("Div", 8.0, dt="DT_FLOAT", ins=f"{sh};{S},1", tag=MG_TAG),
        v("Log", 16.0, dt="DT_FLOAT", tag=MG_TAG),
        v("Mul", 12.0, dt="DT_FLOAT", ins=f"{sh};{sh}", tag=MG_TAG),
        v("ReduceSum", 4.0, dt="DT_FLOAT", outs=tok, tag=MG_TAG),
        mp("hcom_allReduce_", 0.016),
    ]


def _mc2(items: list[Item]) -> list[Item]:
    """Every TP all-reduce of an activation fused into the MatMul before it (MatmulAllReduce)."""
    out: list[Item] = []
    for it in items:
        prev = out[-1] if out else None
        if (
            isinstance(it, Collective)
            and it.group == "tp"
            and it.size_mb >= 1.0
            and isinstance(prev, Kernel)
            and prev.op_type == "MatMulV2"
        ):
            out[-1] = dataclasses.replace(
                prev,
                name="aclnnMatmulAllReduce_MatmulAllReduce_MatmulAllReduce",
                op_type="MatmulAllReduce",
                core="MIX_AIC",
                dur_us=round(prev.dur_us * 1.35, 1),
                api="aclnnMatmulAllReduce",
                tag=prev.tag + "_mc2",
            )
            continue
        out.append(it)
    return out


def mg_program(metrics: bool = True) -> list[Item]:
    """TP 8 (MC2-fused) with the LM head and loss; the metrics between the loss and the backward."""
    tf = transformer(layers=MG_LAYERS, tp=MG_TP, tp_mb=32.0, grad_mb=MG_GRAD_MB, mc2=True)
    cut = next(i for i, it in enumerate(tf) if isinstance(it, Kernel) and it.tag == "mlp_down_dx")
    lf, lb = _mg_loss()
    return _mc2([*tf[:cut], *lf, *(_mg_metrics() if metrics else []), *lb, *tf[cut:]])


def mg_kinds(ranks: int) -> tuple[dict[str, GroupKind], dict[int, set[str]]]:
    """World / tp / dp, plus the model-parallel communicator used by the metrics on node 0 only."""
    kinds = group_kinds(ranks, MG_TP)
    bad = _mg_ranks(ranks)
    rest = [r for r in range(ranks) if r not in bad]
    kinds["mp"] = make_group_kind("mp", "mp", [bad] + [[r] for r in rest], ranks, BASE_COMM_US, 3)
    return kinds, {r: {"mp"} for r in rest}


def mg_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = mg_program()
    kinds, hidden = mg_kinds(ranks)
    p = default_perturb(ranks)
    p.hidden_groups = hidden
    idx = {j for j, k in enumerate(_kernels(prog)) if k.tag == MG_TAG}
    bad = set(_mg_ranks(ranks))
    for r in range(ranks):
        if r not in bad:
            p.skip_kernels[r] = set(idx)
    info = _info(CANN8, MG_TP, ranks)
    _dist(
        info,
        num_layers=MG_LAYERS,
        hidden_size=H,
        seq_length=S,
        vocab_size=MG_V,
        micro_batch_size=1,
        log_interval=1,
    )
    return {"": Plan(prog, kinds, p, info, tp=MG_TP)}


def mg_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 0 (DP rank 0's TP group) computes the metrics; node 1 waits for it."""
    cl: Cluster = m[""]["cluster"]
    bad = _mg_ranks(ranks)
    rest = [r for r in range(ranks) if r not in bad]
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    met = _kernel_us(cl, lambda k: k.tag == MG_TAG)
    wait = coll_wait_us(m)
    met_comm = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if op.item.tag == MG_TAG:
                met_comm[:, si] += (op.end - op.start) / 1000
    dur = _dur_matrix(cl)
    topk = [
        j
        for j, k in enumerate(cl.kernels)
        if k.op_type == "TopKV2" and k.tag == MG_TAG and k.dur_us > 100
    ]
    dp_wait: list[float] = []
    for st in cl.steps:
        first = next(op for op in st.ops if op.kind.kind == "dp")
        dp_wait.extend((first.sync_ns[rest] / 1000).tolist())
    healthy = _resimulate(
        dataclasses.replace(cl, perturb=default_perturb(cl.ranks)), mg_program(metrics=False)
    )
    base = _sim_breakdown(healthy)
    a, b, save = _saving(step, base["step_us"])
    vic = victims_by_wait(wait, bad)
    n_kernels = sum(1 for k in cl.kernels if k.tag == MG_TAG)
    n_coll = sum(1 for it in cl.program if isinstance(it, Collective) and it.tag == MG_TAG)
    nums = {
        "tp_size": MG_TP,
        "dp_size": ranks // MG_TP,
        "vocab_size": MG_V,
        "vocab_shard": MG_VS,
        "culprit_ranks": bad,
        "first_culprit_rank": bad[0],
        "last_culprit_rank": bad[-1],
        "metric_kernels_per_step": n_kernels,
        "metric_collectives_per_step": n_coll,
        "metric_us_per_step": _ms(met[bad]),
        "metric_comm_us_per_step": _ms(met_comm[bad]),
        "topk_us_median": _med(dur[bad][:, topk, :]),
        "culprit_computing_us_per_step": _ms(comp[bad]),
        "others_computing_us_per_step": _ms(comp[rest]),
        "computing_excess_us_per_step": _r(_ms(comp[bad]) - _ms(comp[rest])),
        "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "first_dp_allreduce_sync_us_median_others": _r(float(np.median(dp_wait))),
        "median_step_us": _r(a),
        "median_step_us_no_metrics": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        bad,
        "compute",
        ["load-imbalance-vs-slow-kernels", "evaluation-in-training-loop"],
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
            "metric_us_per_step": nums["metric_us_per_step"],
            "victim_wait_us_per_step": nums["victim_wait_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_node=MG_NODE,
        culprit_ranks=bad,
        first_rank=bad[0],
        last_rank=bad[-1],
        data_parallel_rank=0,
        operators=[
            "ArgMaxWithValue",
            "TopKV2",
            "Cast",
            "ReduceMax",
            "Sub",
            "Exp",
            "ReduceSum",
            "Div",
            "Log",
            "Mul",
        ],
        logits_shard_shape=f"{S},{MG_VS}",
        communicator="mp",
        metric_collectives=["hcom_allGather_", "hcom_allReduce_"],
        wait_op="hcom_allReduce_ (dp group, first of the backward)",
        file="kernel_details.csv (on ranks 0-7 only, between the loss and the backward: "
        "ArgMaxWithValue and TopKV2 over the [4096, 19008] logits shard and an fp32 chain Cast / "
        "ReduceMax / Sub / Exp / ReduceSum / Div / Log / Mul / ReduceSum on it, ~6.5 ms a step; "
        "ranks 8-15 have none of them), communication.json / parallel_group_info (5 small "
        "hcom_allGather_ / hcom_allReduce_ a step on the 'mp' communicator of ranks 0-7 only; "
        "ranks 8-15 wait in the first dp hcom_allReduce_ of the backward), step_trace_time.csv "
        "(Computing higher on node 0)",
        links_normal=True,
        host_normal=True,
        every_step=True,
        cause="the training loop computes token accuracy, top-5 accuracy and the predictive "
        "entropy of the vocab-parallel logits every step under `if data_parallel_rank == 0` (for "
        "the progress logger): the 8 TP ranks of node 0 run an argmax, a top-k and an fp32 "
        "softmax-entropy chain over their [4096, 19008] logits shard plus 5 small collectives, "
        "~6.5 ms a step, between the loss and the backward; node 1 has no such work and waits for "
        "its data-parallel partners in the first gradient all-reduce of every step",
        fix="compute the metrics every log_interval steps (and on a sample of tokens), or derive "
        "them from the loss already reduced; if they must be every step, compute them on every "
        "data-parallel rank alike (or asynchronously after the optimizer step) so no group of "
        "ranks runs work the others wait for",
    )


# ---------------------------------------------------------------- moe-gmm-tiny-groups
GM_E = 64
GM_TOPK = 6
GM_H = 2048
GM_F = 1408
GM_HEADS = 16
GM_SEQ = 1024
GM_MICRO = 4  # micro-batches per step (gradient accumulation)
GM_LAYERS = 4
GM_TILE = 128  # rows of one cube tile
GM_GBPS = 1300.0  # weight streaming rate of a GroupedMatmul
GM_GROUP_US = 2.0  # per-group fixed cost
GM_GRAD_MB = round(2 * 4 * GM_H * GM_H / 1e6, 1)  # one layer's attention weights (bf16)
GM_TAG = "gmm"


def _gm_rows(mbs: int) -> int:
    return mbs * GM_SEQ * GM_TOPK


def _gm_full_us(rows: int, k: int, n: int) -> float:
    """Time (µs) of the GroupedMatmul's FLOPs at the MatMul rate with full tiles."""
    return 2.0 * rows * k * n / (MM_TFLOPS * 1e6)


def _gm_us(rows: int, k: int, n: int) -> tuple[float, bool]:
    """(duration µs, weight-bound) of a GroupedMatmul over GM_E groups of rows / GM_E rows."""
    per = rows / GM_E
    eff = per / (GM_TILE * math.ceil(per / GM_TILE))
    compute = _gm_full_us(rows, k, n) / eff
    weights = GM_E * k * n * 2 / (GM_GBPS * 1e3)
    return max(compute, weights) + GM_E * GM_GROUP_US, weights > compute


def _gmm(tag: str, rows: int, k: int, n: int, x_k: int) -> Kernel:
    """GroupedMatmul of ``rows`` routed rows [rows, x_k] against [E, k, n] expert weights."""
    dur, wb = _gm_us(rows, k, n)
    util = _gm_full_us(rows, k, n) / dur
    out_w = n if x_k == k else k
    return _kern(
        "aclnnGroupedMatmulV4_GroupedMatmul_GroupedMatmul",
        "GroupedMatmul",
        "AI_CORE",
        f"{rows},{x_k};{GM_E},{k},{n};{GM_E}",
        f"{rows},{out_w}",
        dur,
        dt="DT_BF16;DT_BF16;INT64",
        api="aclnnGroupedMatmulV4",
        tag=tag,
        pmu=(
            ("aic_mac_ratio", round(MAC_RATIO * util, 3)),
            ("aic_mte2_ratio", 0.93 if wb else 0.71),
            ("aic_scalar_ratio", 0.24),
            ("cube_utilization", round(CUBE_UTIL * util, 1)),
        ),
    )


def gm_layer(mbs: int) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of one MoE layer on a micro-batch of ``mbs`` sequences."""
    t = mbs * GM_SEQ
    rows = _gm_rows(mbs)
    h, f = GM_H, GM_F
    tok = f"{t},{h}"

    def v(op: str, ins: str, outs: str, nbytes: float) -> Kernel:
        return _vec(op, "", _bytes_us(nbytes, GM_GBPS), ins=ins, outs=outs)

    fa_us = 4.0 * mbs * GM_SEQ * GM_SEQ * h / (FA_TFLOPS * 1e6)
    bsh = f"{mbs},{GM_SEQ},{h}"
    fa = _kern(
        "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
        "FlashAttentionScore",
        "MIX_AIC",
        f"{bsh};{bsh};{bsh}",
        bsh,
        fa_us,
        api="aclnnFlashAttentionScore",
    )
    fag = dataclasses.replace(
        fa,
        name="aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
        op_type="FlashAttentionScoreGrad",
        in_shapes=";".join([bsh] * 4),
        in_dtypes=";".join(["DT_BF16"] * 4),
        in_formats=";".join(["ND"] * 4),
        dur_us=round(fa_us * FAG_FACTOR, 1),
        api="aclnnFlashAttentionScoreGrad",
    )
    norm = v("RmsNorm", tok, tok, 4 * t * h)
    norm_g = v("RmsNormGrad", f"{tok};{tok}", tok, 8 * t * h)
    add = v("Add", f"{tok};{tok}", tok, 6 * t * h)
    router = _mm("router", t, h, GM_E, dur=max(12.0, _gm_full_us(t, h, GM_E)))
    gate = _vec(
        "MoeGatingTopKSoftmax",
        "",
        _bytes_us(4 * t * GM_E, GM_GBPS, floor=14.0),
        ins=f"{t},{GM_E}",
        outs=f"{t},{GM_TOPK}",
    )
    perm = v("MoeTokenPermute", f"{tok};{t},{GM_TOPK}", f"{rows},{h}", 4 * rows * h)
    unperm = v("MoeTokenUnpermute", f"{rows},{h};{rows};{t},{GM_TOPK}", tok, 4 * rows * h)
    unperm_g = v("MoeTokenUnpermuteGrad", f"{tok};{rows},{h};{rows}", f"{rows},{h}", 4 * rows * h)
    perm_g = v("MoeTokenPermuteGrad", f"{rows},{h};{rows}", tok, 4 * rows * h)
    swiglu = v("SwiGlu", f"{rows},{2 * f}", f"{rows},{f}", 6 * rows * f)
    swiglu_g = v("SwiGluGrad", f"{rows},{f};{rows},{2 * f}", f"{rows},{2 * f}", 10 * rows * f)
    fwd = [
        norm,
        _mm("qkv", t, h, 3 * h),
        fa,
        _mm("attn_out", t, h, h),
        add,
        norm,
        router,
        gate,
        perm,
        _gmm(GM_TAG, rows, h, 2 * f, h),
        swiglu,
        _gmm(GM_TAG, rows, f, h, f),
        unperm,
        add,
    ]
    bwd = [
        unperm_g,
        _gmm(GM_TAG, rows, f, h, h),  # input gradient of the down projection
        swiglu_g,
        _gmm(GM_TAG, rows, h, 2 * f, 2 * f),  # input gradient of the gate / up projection
        perm_g,
        norm_g,
        _mm("attn_out_dx", t, h, h),
        _mm("attn_out_dw", h, t, h),
        fag,
        _mm("qkv_dx", t, 3 * h, h),
        _mm("qkv_dw", 3 * h, t, h),
        norm_g,
    ]
    return fwd, bwd


def gm_program(mbs: int = 1, micro: int = GM_MICRO) -> list[Item]:
    """``micro`` micro-batches of ``mbs`` sequences; gradients all-reduced in the last one."""
    fwd, bwd = gm_layer(mbs)
    prog: list[Item] = []
    for mi in range(micro):
        for _ in range(GM_LAYERS):
            prog += fwd
        for li in range(GM_LAYERS):
            prog += bwd
            if mi == micro - 1:
                last = li == GM_LAYERS - 1
                prog.append(
                    Collective(
                        "hcom_allReduce_", "world", GM_GRAD_MB, overlap=0 if last else 6, tag="grad"
                    )
                )
    opt = _optimizer(GM_LAYERS * 4 * GM_H * GM_H / 1e6)
    prog += [*opt[:2], Collective("hcom_allReduce_", "world", 0.004, dtype="FP32"), *opt[2:]]
    return prog


def gm_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        num_layers=GM_LAYERS,
        hidden_size=GM_H,
        num_attention_heads=GM_HEADS,
        seq_length=GM_SEQ,
        micro_batch_size=1,
        gradient_accumulation_steps=GM_MICRO,
        num_experts=GM_E,
        moe_router_topk=GM_TOPK,
        moe_ffn_hidden_size=GM_F,
        expert_model_parallel_size=1,
        freeze_experts=True,
    )
    return {"": Plan(gm_program(), group_kinds(ranks, 1), default_perturb(ranks), info)}


def gm_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 64 tiny groups per GroupedMatmul, bound by reading the experts' weights."""
    cl: Cluster = m[""]["cluster"]
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    ks = cl.kernels
    gmm = _kernel_us(cl, lambda k: k.op_type == "GroupedMatmul")
    mm = _kernel_us(cl, lambda k: k.op_type == "MatMulV2")
    dur = _dur_matrix(cl)
    g_idx = [j for j, k in enumerate(ks) if k.op_type == "GroupedMatmul"]
    m_idx = [j for j, k in enumerate(ks) if k.op_type == "MatMulV2" and k.dur_us > 30]

    def gflop(k: Kernel) -> float:
        x, w = k.in_shapes.split(";")[:2]
        rows = int(x.split(",")[0])
        _e, kk, nn = (int(a) for a in w.split(","))
        return 2.0 * rows * kk * nn

    def mm_gflop(k: Kernel) -> float:
        a_, b_ = k.in_shapes.split(";")[:2]
        mm_, kk = (int(x) for x in a_.split(","))
        return 2.0 * mm_ * kk * int(b_.split(",")[0])

    def tflops(idx: list[int], fl: Any) -> float:
        return float(np.median([fl(ks[j]) / float(np.median(dur[:, j, :])) / 1e6 for j in idx]))

    fix_prog = gm_program(mbs=GM_MICRO, micro=1)
    fix_cl = _resimulate(dataclasses.replace(cl, perturb=default_perturb(cl.ranks)), fix_prog)
    fix = _sim_breakdown(fix_cl)
    gmm_fix = _kernel_us(fix_cl, lambda k: k.op_type == "GroupedMatmul")
    a, b, save = _saving(step, fix["step_us"])
    up = [j for j in g_idx if ks[j].in_shapes.split(";")[1].endswith(f",{2 * GM_F}")]
    down = [j for j in g_idx if j not in up]
    rows = _gm_rows(1)
    mac = [dict(ks[j].pmu)["aic_mac_ratio"] for j in g_idx]
    wait = coll_wait_us(m).mean(axis=1)
    nums = {
        "experts": GM_E,
        "top_k": GM_TOPK,
        "tokens_per_micro_batch": GM_SEQ,
        "micro_batches_per_step": GM_MICRO,
        "routed_rows_per_micro_batch": rows,
        "rows_per_expert": rows // GM_E,
        "rows_per_expert_micro_batch_4": _gm_rows(GM_MICRO) // GM_E,
        "gmm_calls_per_step": len(g_idx),
        "gmm_up_us_median": _med(
            dur[:, [j for j in up if ks[j].in_shapes.startswith(f"{rows},{GM_H};")], :]
        ),
        "gmm_down_us_median": _med(
            dur[:, [j for j in down if ks[j].in_shapes.startswith(f"{rows},{GM_F};")], :]
        ),
        "gmm_weight_mb_up": round(GM_E * GM_H * 2 * GM_F * 2 / 1e6, 1),
        "gmm_weight_mb_down": round(GM_E * GM_F * GM_H * 2 / 1e6, 1),
        "gmm_us_per_step": _ms(gmm),
        "gmm_share_of_step": _share(gmm, step),
        "gmm_share_of_computing": _share(gmm, comp),
        "gmm_tflops_median": round(tflops(g_idx, gflop), 1),
        "matmul_tflops_median": round(tflops(m_idx, mm_gflop), 1),
        "gmm_mac_ratio_median": round(float(np.median(mac)), 3),
        "matmul_mac_ratio": MAC_RATIO,
        "gmm_mte2_ratio": 0.93,
        "matmul_us_per_step": _ms(mm),
        "gmm_us_per_step_micro_batch_4": _ms(gmm_fix),
        "median_computing_us_per_step": _ms(comp),
        "wait_us_per_step_spread": _r(float(wait.max() - wait.min())),
        "median_step_us": _r(a),
        "median_step_us_micro_batch_4": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    k0 = ks[g_idx[0]]
    key = _key(
        [],
        "compute",
        ["moe-expert-imbalance"],
        "computing_us",
        nums,
        op={"op_type": k0.op_type, "name": k0.name, "input_shapes": k0.in_shapes},
    )
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={
            "gmm_us_per_step": nums["gmm_us_per_step"],
            "gmm_tflops_median": nums["gmm_tflops_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operator="GroupedMatmul",
        groups=GM_E,
        rows_per_group=rows // GM_E,
        gmm_shapes=sorted({ks[j].in_shapes for j in g_idx}),
        pmu_columns=["aic_mac_ratio", "aic_mte2_ratio", "cube_utilization(%)"],
        file="kernel_details.csv (64 GroupedMatmul rows a step, Input Shapes "
        f"{rows},{GM_H};{GM_E},{GM_H},{2 * GM_F};{GM_E} and the like: 6144 routed rows in 64 "
        "groups (~96 rows per expert) against all 64 experts' weights; ~0.4-0.7 ms each, ~100 "
        "TFLOPS from shape and duration against ~250 for the attention MatMulV2, aic_mac_ratio "
        "~0.25 and aic_mte2_ratio ~0.93 against 0.62 / 0.71), op_statistic.csv (GroupedMatmul on "
        "top), step_trace_time.csv (Computing on every rank alike); profiler_metadata.json "
        "num_experts 64, moe_router_topk 6, expert_model_parallel_size 1, micro_batch_size 1, "
        "gradient_accumulation_steps 4",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        host_normal=True,
        cause="expert parallelism 1 with 1024-token micro-batches: each GroupedMatmul gets 6144 "
        "routed rows (1024 tokens x top-6) split over all 64 local experts, ~96 rows per expert, "
        "and must stream every expert's weights (~738 MB for the gate/up projection, ~369 MB for "
        "the down projection) for them: it is bound by that read, not by the cube (~100 TFLOPS, "
        "aic_mac_ratio ~0.25), and the 4 micro-batches of a step read all the experts 4 times; "
        "on every rank alike",
        fix="give each GroupedMatmul more rows: micro-batch 4 without gradient accumulation (same "
        "tokens per step, ~384 rows per expert, the weights read once per step instead of 4 "
        "times), or pack samples to longer sequences; or use expert parallelism (e.g. EP 8: 8 "
        "experts per card, ~8x the rows per expert, at the cost of the token all-to-all)",
    )


# ---------------------------------------------------------------- registry
DEV33_SCENARIOS = (
    ScenarioSpec(
        "dropout-rng-aicpu",
        "hidden dropout masks drawn with torch.rand on an explicit generator: 8 "
        "StatelessRandomUniformV2 kernels a step on AI_CPU (~3.6 ms each, [4096, 4096] fp32) after "
        "the attention-output and MLP MatMuls, the AI Cores waiting; every rank alike; job-level",
        16,
        4,
        dr_plans,
        dr_answer,
    ),
    ScenarioSpec(
        "softmax-unaligned-buckets",
        "DiT with aspect-ratio buckets and eager attention: in the steps whose bucket gives 1020 / "
        "1012 tokens (not a multiple of 16) SoftmaxV2 / SoftmaxGrad run ~2.7x the per-element time "
        "of the aligned steps, those steps ~19 ms longer on every rank alike",
        16,
        6,
        sb_plans,
        sb_answer,
    ),
    ScenarioSpec(
        "metrics-on-dp0-tp-group",
        "TP 8 x DP 2: accuracy / top-5 / fp32 entropy of the vocab-parallel logits computed every "
        "step on data-parallel rank 0 only (node 0: ArgMaxWithValue, TopKV2, an fp32 chain and 5 "
        "small mp collectives, ~6.5 ms); node 1 waits in the first gradient all-reduce",
        16,
        4,
        mg_plans,
        mg_answer,
        min_ranks=16,
        rank_multiple=MG_TP,
    ),
    ScenarioSpec(
        "moe-gmm-tiny-groups",
        "fine-grained MoE (64 experts, top-6) with EP 1 and 1024-token micro-batches: every "
        "GroupedMatmul runs 64 groups of ~96 rows, bound by reading all experts' weights (~100 "
        "TFLOPS, aic_mac_ratio ~0.25), over half the step on every rank alike; job-level",
        16,
        4,
        gm_plans,
        gm_answer,
    ),
)
DEV33_KINDS = tuple(s.name for s in DEV33_SCENARIOS)


__all__ = ["DEV33_KINDS", "DEV33_SCENARIOS"]
