"""Eighteenth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev20.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the hcom_allGather_ records of
communication.json, the Input Shapes of kernel_details.csv, the per-step rows of
step_trace_time.csv with the per-step operator counts, and the AI Core Freq counter track of
trace_view.json on one node):

- ``tied-embedding-regather``: the tied input / output embedding (vocab 32000 x hidden 4096, bf16,
  262 MB) is kept sharded over the 16 ranks by a memory-saving wrapper; it is all-gathered whole
  before the embedding lookup and, because the tie makes the LM head a second use of the same
  parameter that the wrapper does not recognise, all-gathered whole a second time right before the
  LM head, every step, with nothing to overlap it. Job-level (every rank alike), links normal.
- ``padded-to-max-seqlen``: SFT without sequence packing: every sample (~2k real tokens on average)
  is padded to ``--seq-length 8192``, so every MatMul and FlashAttention runs on 8192 rows (the
  attention with a full ``[1,1,8192,8192]`` padding mask) on every rank and step, and the attention
  grows quadratically with the padding. Job-level.
- ``inline-eval-steps``: the training loop runs an evaluation pass (3 forward-only iterations of the
  model, no backward, no gradient all-reduce) every 4 steps inside the step: steps 12 and 16 of the
  capture are ~2x longer on every rank alike, with 4x the forward operators and no extra
  backward ones. Culprit: those steps (every rank alike: a job-level cause scoped to the eval steps);
  links normal.
- ``power-capped-node``: node 1 (ranks 8-15) runs under a power cap: its AI Core clock is 1300 MHz
  for the whole capture instead of 1800 MHz (the AI Core Freq track), so every cube kernel takes
  ~1.38x and every vector kernel ~1.18x longer there; node 0 waits for node 1 in every collective.
  Culprit: node 1 (its devices), links and host normal.
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
    B,
    H,
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
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_dev19 import _kernel_us, _med, _saving
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    step_ids,
    victims_by_wait,
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


# ---------------------------------------------------------------- tied-embedding-regather
TE_VOCAB = 32000
TE_MB = round(2 * TE_VOCAB * H / 1e6, 3)  # the whole bf16 table (decimal MB)
TE_TAG_FIRST = "emb_gather"
TE_TAG_EXTRA = "tied_head_regather"


def _te_kernels() -> dict[str, Kernel]:
    s = 4096
    emb = Kernel(
        name="aclnnEmbedding_GatherV2_GatherV2",
        op_type="GatherV2",
        core="AI_VECTOR_CORE",
        in_shapes=f"{TE_VOCAB},{H};{B},{s}",
        in_dtypes="DT_BF16;DT_INT64",
        in_formats="ND;ND",
        out_shapes=f"{B},{s},{H}",
        out_dtypes="DT_BF16",
        out_formats="ND",
        dur_us=48.0,
        block_dim=40,
        api="aclnnEmbedding",
        tag="embedding",
    )
    emb_grad = Kernel(
        name="aclnnEmbeddingDenseBackward_EmbeddingDenseGradV2_EmbeddingDenseGradV2",
        op_type="EmbeddingDenseGradV2",
        core="AI_VECTOR_CORE",
        in_shapes=f"{B},{s},{H};{B},{s}",
        in_dtypes="DT_BF16;DT_INT64",
        in_formats="ND;ND",
        out_shapes=f"{TE_VOCAB},{H}",
        out_dtypes="DT_FLOAT",
        out_formats="ND",
        dur_us=160.0,
        block_dim=40,
        api="aclnnEmbeddingDenseBackward",
        tag="embedding_grad",
    )
    ce = _k(
        "aclnnCrossEntropyLoss_SoftmaxCrossEntropyWithLogits_SoftmaxCrossEntropyWithLogits",
        "SoftmaxCrossEntropyWithLogits",
        "AI_VECTOR_CORE",
        f"{s},{TE_VOCAB};{s}",
        f"{s}",
        380.0,
        "aclnnCrossEntropyLoss",
        "cross_entropy",
        bd=40,
    )
    ce_grad = vec("cross_entropy_grad", "Muls", 160.0, f"{s},{TE_VOCAB}")
    return {
        "embedding": emb,
        "embedding_grad": emb_grad,
        "lm_head": matmul("lm_head", s, H, TE_VOCAB, 2350.0),
        "cross_entropy": ce,
        "cross_entropy_grad": ce_grad,
        "lm_head_dx": matmul("lm_head_dx", s, TE_VOCAB, H, 2350.0),
        "lm_head_dw": matmul("lm_head_dw", TE_VOCAB, s, H, 2400.0),
    }


def te_program(regather: bool = True) -> list[Item]:
    """transformer() with a sharded tied embedding: gathered before the lookup (and the LM head)."""
    ks = _te_kernels()
    base = transformer(layers=LAYERS)
    first_bwd = next(
        j for j, it in enumerate(base) if isinstance(it, Kernel) and it.tag == "mlp_down_dx"
    )
    last_bwd = max(j for j, it in enumerate(base) if isinstance(it, Kernel) and it.tag == "qkv_dw")
    gather = Collective("hcom_allGather_", "world", TE_MB, tag=TE_TAG_FIRST)
    head: list[Item] = []
    if regather:
        head.append(Collective("hcom_allGather_", "world", TE_MB, tag=TE_TAG_EXTRA))
    head += [ks["lm_head"], ks["cross_entropy"], ks["cross_entropy_grad"], ks["lm_head_dx"]]
    head.append(ks["lm_head_dw"])
    out: list[Item] = [gather, ks["embedding"]]
    for j, it in enumerate(base):
        if j == first_bwd:
            out += head
        out.append(it)
        if j == last_bwd + 2:  # after the last layer's gradient all-reduce
            out.append(ks["embedding_grad"])
    return out


def te_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    return {"": Plan(te_program(), group_kinds(ranks, 1), default_perturb(ranks), info)}


def te_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: two whole-table all-gathers a step, the second one (before the LM head) extra."""
    cl: Cluster = m[""]["cluster"]
    extra = _op_us(cl, lambda c: c.tag == TE_TAG_EXTRA)
    first = _op_us(cl, lambda c: c.tag == TE_TAG_FIRST)
    both = extra + first
    other_ag = _op_us(
        cl, lambda c: c.op_type == "hcom_allGather_" and c.tag not in (TE_TAG_EXTRA, TE_TAG_FIRST)
    )
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    comp = col(m, "computing_us")
    base = _baseline(cl, te_program(regather=False))
    a, b, save = _saving(step, base["step_us"])
    n_big = sum(
        1
        for it in cl.program
        if isinstance(it, Collective) and it.tag in (TE_TAG_EXTRA, TE_TAG_FIRST)
    )
    nums = {
        "vocab_size": TE_VOCAB,
        "hidden_size": H,
        "embedding_table_mb": TE_MB,
        "embedding_allgathers_per_step": n_big,
        "extra_allgathers_per_step": 1,
        "extra_allgather_us_median": _med(extra),
        "first_allgather_us_median": _med(first),
        "embedding_allgather_us_per_step": _med(both.mean(axis=0)),
        "extra_allgather_share_of_step": _share(extra, step),
        "other_allgather_us_median": _med(other_ag),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_no_regather": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        [],
        "communication",
        ["comm-not-overlapped"],
        "comm_not_overlapped_us",
        nums,
    )
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "extra_allgather_us_median": nums["extra_allgather_us_median"],
            "embedding_table_mb": TE_MB,
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        collective="hcom_allGather_",
        group="world (all ranks)",
        payload_mb=TE_MB,
        element_count=TE_VOCAB * H,
        table_shape=f"{TE_VOCAB},{H}",
        per_step=n_big,
        position="one before the embedding lookup (GatherV2), one right before the LM-head MatMulV2 "
        f"[4096,{H}]x[{TE_VOCAB},{H}]",
        file="communication.json (two hcom_allGather_ of the whole table per step, Transit Size) and "
        "trace_view.json (HCCL lane: the gather right before the LM head, nothing overlapping it)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause=f"the tied input / output embedding ({TE_VOCAB}x{H} bf16, {TE_MB:.0f} MB) is kept "
        "sharded by a memory-saving wrapper; besides the all-gather before the embedding lookup, the "
        "tie makes the LM head a second use of the same parameter that the wrapper does not "
        "recognise, so the whole table is all-gathered again right before the LM head every step, "
        "with nothing to overlap it",
        fix="keep the gathered tied weight for the LM head (one gather per step: register the tie "
        "with the wrapper / keep the embedding persistent or replicated, e.g. ZeRO-3 "
        "stage3_param_persistence_threshold or FSDP ignored/unsharded module), or prefetch it so it "
        "overlaps the last layers; untying the embedding also removes the second gather",
    )


# ---------------------------------------------------------------- padded-to-max-seqlen
PS_SEQ = 8192  # --seq-length: every sample padded to it
PS_REAL = 2048  # mean real tokens per sample (the packed / varlen counterfactual)
PS_HEAD_DIM = 128


def _fa(s: int, padded: bool, grad: bool) -> Kernel:
    r = s / 4096
    op = "FlashAttentionScoreGrad" if grad else "FlashAttentionScore"
    if padded:
        x = f"{B},{s},{H}"
        n = 4 if grad else 3
        ins = ";".join([x] * n) + f";{B},1,{s},{s}"
        dts = ";".join(["DT_BF16"] * n) + ";DT_BOOL"
        out = x
    else:  # packed: TND layout, compressed causal mask, actual_seq_len per sample
        x = f"{s},{H // PS_HEAD_DIM},{PS_HEAD_DIM}"
        n = 4 if grad else 3
        ins = ";".join([x] * n) + ";2048,2048"
        dts = ";".join(["DT_BF16"] * n) + ";DT_BOOL"
        out = x
    return Kernel(
        name=f"aclnn{op}_{op}_{op}",
        op_type=op,
        core="MIX_AIC",
        in_shapes=ins,
        in_dtypes=dts,
        in_formats=";".join(["ND"] * (n + 1)),
        out_shapes=out,
        out_dtypes="DT_BF16",
        out_formats="ND",
        dur_us=round((2300.0 if grad else 1100.0) * r * r, 1),
        block_dim=24,
        api=f"aclnn{op}",
        tag="fa_grad" if grad else "fa",
    )


def seq_program(s: int, padded: bool) -> list[Item]:
    """transformer(layers=4) at ``s`` tokens per micro-batch (MatMuls ~s, attention ~s²)."""
    r = s / 4096
    f = 4 * H
    prog: list[Item] = []
    for _ in range(LAYERS):
        prog += [
            vec("rmsnorm", "RmsNorm", 60 * r, f"{s},{H}"),
            matmul("qkv", s, H, 3 * H, 900 * r),
            _fa(s, padded, False),
            matmul("attn_out", s, H, H, 320 * r),
            vec("add", "Add", 30 * r, f"{s},{H}"),
            vec("rmsnorm", "RmsNorm", 60 * r, f"{s},{H}"),
            matmul("mlp_up", s, H, 2 * f, 1500 * r),
            vec("swiglu", "SwiGlu", 90 * r, f"{s},{2 * f}"),
            matmul("mlp_down", s, f, H, 1200 * r),
            vec("add", "Add", 30 * r, f"{s},{H}"),
        ]
    for li in range(LAYERS):
        prog += [
            matmul("mlp_down_dx", s, H, f, 1200 * r),
            matmul("mlp_down_dw", H, s, f, 1250 * r),
            vec("swiglu_grad", "SwiGluGrad", 140 * r, f"{s},{2 * f}"),
            matmul("mlp_up_dx", s, 2 * f, H, 1500 * r),
            matmul("mlp_up_dw", 2 * f, s, H, 1550 * r),
            vec("rmsnorm_grad", "RmsNormGrad", 95 * r, f"{s},{H}"),
            matmul("attn_out_dx", s, H, H, 320 * r),
            matmul("attn_out_dw", H, s, H, 330 * r),
            _fa(s, padded, True),
            matmul("qkv_dx", s, 3 * H, H, 900 * r),
            matmul("qkv_dw", 3 * H, s, H, 920 * r),
            vec("rmsnorm_grad", "RmsNormGrad", 95 * r, f"{s},{H}"),
        ]
        prog.append(
            Collective("hcom_allReduce_", "world", 96.0, overlap=6 if li < LAYERS - 1 else 0)
        )
    tail = transformer(layers=1)
    opt = next(
        j
        for j, it in enumerate(tail)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    prog += tail[opt:]  # the optimizer and the step-closing collectives
    return prog


def ps_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(
        seq_length=PS_SEQ,
        micro_batch_size=1,
        variable_seq_lengths=False,
        reset_attention_mask=False,
        reset_position_ids=False,
    )
    info.user_metadata["distributed_args"] = dist
    return {
        "": Plan(seq_program(PS_SEQ, True), group_kinds(ranks, 1), default_perturb(ranks), info)
    }


def ps_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every kernel at the padded length on every rank; the packed run as the saving."""
    cl: Cluster = m[""]["cluster"]
    fa = _kernel_us(cl, lambda k: k.op_type.startswith("FlashAttentionScore"))
    mm = _kernel_us(cl, lambda k: k.op_type == "MatMulV2")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    base_cl_prog = seq_program(PS_REAL, False)
    base = _baseline(cl, base_cl_prog)
    healthy = dataclasses.replace(cl, perturb=default_perturb(ranks))
    from advisor_chat.synth.scenarios_dev4 import _resimulate

    bcl = _resimulate(healthy, base_cl_prog)
    b_fa = _kernel_us(bcl, lambda k: k.op_type.startswith("FlashAttentionScore"))
    b_mm = _kernel_us(bcl, lambda k: k.op_type == "MatMulV2")
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "seq_length": PS_SEQ,
        "real_tokens_per_sample": PS_REAL,
        "padding_share_of_tokens": round(1 - PS_REAL / PS_SEQ, 4),
        "flash_attention_us_per_step": _med(fa.mean(axis=0)),
        "flash_attention_us_per_step_packed": _med(b_fa.mean(axis=0)),
        "matmul_us_per_step": _med(mm.mean(axis=0)),
        "matmul_us_per_step_packed": _med(b_mm.mean(axis=0)),
        "flash_attention_share_of_step": _share(fa, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_computing_share": _share(comp, step),
        "median_step_us": _r(a),
        "median_step_us_packed": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
        "speedup_packed": round(a / b, 2),
    }
    key = _key([], "compute", ["shape-axis-alignment"], "computing_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={
            "padding_share_of_tokens": nums["padding_share_of_tokens"],
            "median_computing_us_per_step": nums["median_computing_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        seq_length=PS_SEQ,
        real_tokens_per_sample=PS_REAL,
        operators=["FlashAttentionScore", "FlashAttentionScoreGrad", "MatMulV2"],
        attention_mask_shape=f"{B},1,{PS_SEQ},{PS_SEQ}",
        matmul_shape_example=f"{PS_SEQ},{H};{3 * H},{H}",
        file="kernel_details.csv (Input Shapes: 8192 rows in every MatMulV2 / FlashAttentionScore, "
        "a full [1,1,8192,8192] mask input) and profiler_metadata.json (seq_length 8192, "
        "variable_seq_lengths false, reset_attention_mask false)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        shapes_vary_across_steps=False,
        cause=f"supervised fine-tuning without sequence packing: every sample (~{PS_REAL} real tokens "
        f"on average) is padded to --seq-length {PS_SEQ}, so every MatMul and FlashAttention runs "
        f"on {PS_SEQ} rows ({1 - PS_REAL / PS_SEQ:.0%} of them padding) with a full padding mask; "
        "attention cost grows with the square of the padded length",
        fix="pack several samples into each sequence (MindSpeed-LLM --pack / neat_pack with "
        "--reset-attention-mask and TND varlen FlashAttention via actual_seq_len), or pad per batch "
        "to the longest sample (--variable-seq-lengths, pad to a multiple of 16) instead of the "
        "maximum",
    )


# ---------------------------------------------------------------- inline-eval-steps
EV_INTERVAL = 4  # --eval-interval
EV_ITERS = 3  # --eval-iters (forward-only micro-batches per evaluation)
EV_TAG = "eval"


def _eval_block() -> list[Item]:
    fwd: list[Kernel] = []
    for it in transformer(layers=LAYERS):
        if isinstance(it, Kernel) and it.tag == "mlp_down_dx":
            break
        if isinstance(it, Kernel):
            fwd.append(it)
    return [dataclasses.replace(k, tag=f"{EV_TAG}_{k.tag}") for _ in range(EV_ITERS) for k in fwd]


def ev_program(with_eval: bool = True) -> list[Item]:
    """transformer(); with ``with_eval`` an evaluation pass (forward only) after the optimizer."""
    prog = transformer(layers=LAYERS)
    return prog + _eval_block() if with_eval else prog


def _is_eval(k: Kernel) -> bool:
    return k.tag.startswith(EV_TAG + "_")


def _ev_steps(steps: int) -> list[int]:
    """Step indices of the capture where the evaluation runs (step id multiple of the interval).

    A capture too short to hold such a step gets its last step as the evaluation step, so that
    every size shows the fault.
    """
    from advisor_chat.synth import FIRST_STEP

    on = [si for si in range(steps) if (FIRST_STEP + si) % EV_INTERVAL == 0]
    return on or [steps - 1]


def ev_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    prog = ev_program()
    ks = [it for it in prog if isinstance(it, Kernel)]
    skip = {j for j, k in enumerate(ks) if _is_eval(k)}
    on = set(_ev_steps(steps))
    for si in range(steps):
        if si not in on:
            p.step_skip_kernels[si] = {r: set(skip) for r in range(ranks)}
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(eval_interval=EV_INTERVAL, eval_iters=EV_ITERS)
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def ev_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the evaluation steps are longer on every rank alike; the others are clean."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    on = _ev_steps(steps)
    off = [si for si in range(steps) if si not in on]
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    ev_dev = _kernel_us(cl, _is_eval)
    n_eval = sum(1 for k in cl.kernels if _is_eval(k))
    n_train = len(cl.kernels) - n_eval
    fa_fwd_train = sum(
        1 for k in cl.kernels if k.op_type == "FlashAttentionScore" and not _is_eval(k)
    )
    base = _baseline(cl, ev_program(with_eval=False))
    # per step: the evaluation's extra time (same run without it)
    extra = np.median(step, axis=0) - np.median(base["step_us"], axis=0)
    a, b, save = _saving(step, base["step_us"])
    mean_a = float(np.median(step.mean(axis=1)))
    mean_b = float(np.median(base["step_us"].mean(axis=1)))
    nums = {
        "eval_interval": EV_INTERVAL,
        "eval_iters": EV_ITERS,
        "eval_steps": [ids[si] for si in on],
        "first_eval_step": ids[on[0]],
        "last_eval_step": ids[on[-1]],
        "train_only_steps": [ids[si] for si in off],
        "eval_kernels_per_eval_step": n_eval,
        "train_kernels_per_step": n_train,
        "flash_attention_fwd_per_train_step": fa_fwd_train,
        "flash_attention_fwd_per_eval_step": fa_fwd_train * (1 + EV_ITERS),
        "eval_device_us_per_eval_step": _med(ev_dev[:, on].mean(axis=0)),
        "step_us_eval_steps_median": _med(step[:, on]),
        "step_us_train_steps_median": _med(step[:, off]),
        "eval_step_ratio": round(float(np.median(step[:, on]) / np.median(step[:, off])), 3),
        "computing_us_eval_steps_median": _med(comp[:, on]),
        "computing_us_train_steps_median": _med(comp[:, off]),
        "wait_us_eval_steps_median": _med(wait[:, on]),
        "wait_us_train_steps_median": _med(wait[:, off]),
        "extra_us_per_eval_step": _med(extra[on]),
        "extra_us_per_step_average": _r(mean_a - mean_b),
        "mean_step_us": _r(mean_a),
        "mean_step_us_no_eval": _r(mean_b),
        "median_step_us": _r(a),
        "saving_us_per_step_average": _r(mean_a - mean_b),
        "saving_share_of_mean_step": round((mean_a - mean_b) / mean_a, 4),
    }
    del b, save
    key = _key([], "compute", ["evaluation-in-training-loop"], "computing_us", nums)
    # every rank alike in those steps: a job-level cause scoped to the evaluation steps
    rc = root_cause(
        "job_hotspot",
        "compute",
        "job",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        steps=[ids[si] for si in on],
        metrics={
            "extra_us_per_eval_step": nums["extra_us_per_eval_step"],
            "eval_steps": nums["eval_steps"],
            "saving_us_per_step_average": nums["saving_us_per_step_average"],
        },
    )
    return _with_evidence(
        key,
        rc,
        eval_steps=[ids[si] for si in on],
        eval_interval=EV_INTERVAL,
        eval_iters=EV_ITERS,
        forward_only=True,
        operators=["FlashAttentionScore", "MatMulV2", "RmsNorm", "SwiGlu"],
        no_backward_in_eval=True,
        file="step_trace_time.csv (Computing of the eval steps on every rank) and kernel_details.csv "
        "(per step: 4x the FlashAttentionScore rows, no extra FlashAttentionScoreGrad)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        every_step=False,
        cause=f"the training loop runs an evaluation pass every {EV_INTERVAL} steps inside the step: "
        f"{EV_ITERS} forward-only iterations of the model (no backward, no gradient all-reduce) after "
        "the optimizer, on every rank alike, so those steps take ~2x as long",
        fix="evaluate less often (a larger --eval-interval) or on fewer batches (--eval-iters), or "
        "move evaluation out of the training loop (a separate job / process on a saved checkpoint); "
        "and keep those steps out of the profiled step range when comparing step times",
    )


# ---------------------------------------------------------------- power-capped-node
PC_NODE = 1
PC_MHZ = 1300.0  # AI Core clock under the power cap (nominal AICORE_MHZ)
PC_VECTOR_EXP = 0.5  # vector kernels are partly memory-bound: they slow by ratio**0.5


def _pc_ranks(ranks: int) -> list[int]:
    node = min(PC_NODE, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def _pc_factor(k: Kernel) -> float:
    ratio = AICORE_MHZ / PC_MHZ
    return ratio**PC_VECTOR_EXP if k.core == "AI_VECTOR_CORE" else ratio


def pc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    prog = transformer(layers=LAYERS)
    ks = [it for it in prog if isinstance(it, Kernel)]
    slow = [dataclasses.replace(k, dur_us=round(k.dur_us * _pc_factor(k), 1)) for k in ks]
    for r in _pc_ranks(ranks):
        for j in range(len(ks)):
            p.kernel_swap[(-1, r, j)] = slow[j]
        p.aicore_mhz[r] = [(0, PC_MHZ)]
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def pc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1 runs every kernel at the capped clock; node 0 waits in collectives."""
    cl: Cluster = m[""]["cluster"]
    bad = _pc_ranks(ranks)
    good = [r for r in range(ranks) if r not in bad]
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    mm = _kernel_us(cl, lambda k: k.op_type == "MatMulV2")
    vk = _kernel_us(cl, lambda k: k.core == "AI_VECTOR_CORE")
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "culprit_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "culprit_aicore_mhz": PC_MHZ,
        "others_aicore_mhz": AICORE_MHZ,
        "clock_ratio": round(PC_MHZ / AICORE_MHZ, 3),
        "culprit_computing_us_per_step": _r(float(comp[bad].mean())),
        "others_computing_us_per_step": _r(float(comp[good].mean())),
        "computing_ratio_culprit_vs_others": round(float(comp[bad].mean() / comp[good].mean()), 3),
        "matmul_ratio_culprit_vs_others": round(float(mm[bad].mean() / mm[good].mean()), 3),
        "vector_ratio_culprit_vs_others": round(float(vk[bad].mean() / vk[good].mean()), 3),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "median_step_us": _r(a),
        "median_step_us_full_clock": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        bad, "compute", ["heterogeneous-devices", "compute-straggler-hidden"], "computing_us", nums
    )
    vic = victims_by_wait(wait, bad)
    rc = root_cause(
        "slow_group",
        "compute",
        "group",
        ranks=bad,
        victims=vic,
        not_slow=not_slow_sample(ranks, bad, vic),
        metrics={
            "culprit_aicore_mhz": PC_MHZ,
            "computing_ratio_culprit_vs_others": nums["computing_ratio_culprit_vs_others"],
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
        aicore_mhz=PC_MHZ,
        aicore_mhz_others=AICORE_MHZ,
        lane="AI Core Freq counter track of trace_view.json (args.MHz), the same for the whole "
        "capture",
        every_op_type_slower=True,
        onset=False,
        host_normal=True,
        links_normal=True,
        every_step=True,
        cause=f"node {bad[0] // RANKS_PER_NODE} (ranks {bad[0]}-{bad[-1]}) runs under a power cap: "
        f"its AI Core clock is {PC_MHZ:.0f} MHz for the whole run instead of {AICORE_MHZ:.0f} MHz, "
        "so every cube kernel takes ~1.38x and every vector kernel ~1.18x as long there; the other "
        "node waits for it in every collective",
        fix="lift the power cap / restore the default power and frequency policy on that node "
        "(npu-smi info -t power / npu-smi set -t power-mode or the BMC power capping, check cooling "
        "and the PSU), then confirm 1800 MHz on the AI Core Freq track",
    )


# ---------------------------------------------------------------- registry
DEV20_SCENARIOS = (
    ScenarioSpec(
        "tied-embedding-regather",
        "tied input/output embedding (32000x4096 bf16, 262 MB) kept sharded: all-gathered whole "
        "before the lookup and again right before the LM head every step (hcom_allGather_ with "
        "nothing to overlap); job-level, links normal",
        16,
        4,
        te_plans,
        te_answer,
    ),
    ScenarioSpec(
        "padded-to-max-seqlen",
        "SFT without packing: ~2k-token samples padded to seq-length 8192, every MatMulV2 / "
        "FlashAttention on 8192 rows with a full [1,1,8192,8192] mask, every rank and step; "
        "job-level",
        16,
        4,
        ps_plans,
        ps_answer,
    ),
    ScenarioSpec(
        "inline-eval-steps",
        "an evaluation pass (3 forward-only iterations) every 4 steps inside the training loop: "
        "steps 12 and 16 ~2x longer on every rank alike, 4x the forward operators; links normal",
        16,
        10,
        ev_plans,
        ev_answer,
    ),
    ScenarioSpec(
        "power-capped-node",
        "node 1 power-capped: AI Core clock 1300 MHz for the whole run (AI Core Freq track), every "
        "kernel ~1.2-1.4x longer there; node 0 waits in every collective; host and links normal",
        16,
        6,
        pc_plans,
        pc_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
)
DEV20_KINDS = tuple(s.name for s in DEV20_SCENARIOS)


__all__ = ["DEV20_KINDS", "DEV20_SCENARIOS"]
