"""Twenty-seventh set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``, ``advisor_chat.synth.writer``) with an answer key derived from the
simulated timeline and the breakdown the writer measured (never from typed numbers). Every key
carries ``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the
files). Their question set is ``evals/datasets/generalization_dev29.yaml``: a development set for
finding weaknesses; the held-out kinds of ``generalization.yaml`` stay untouched. The "how much
would fixing it save" numbers come from re-simulating the same run (seed, steps) without the fault.

Two kinds from DeepSpeed ZeRO-3 configuration, two from graph-mode execution (torch.compile with the
torchair backend: kernels of a compiled graph carry its ``Model ID`` and are launched by one
``aclmdlExecuteAsync`` per graph execution, ``Perturb.model_ids``). The evidence of each is in a
different place of the files:

- ``zero3-prefetch-invalidated``: DeepSpeed ZeRO-3 on two nodes, LLaVA-style SFT on mixed data
  grouped by modality (every global batch all-image or all-text). Steps whose module order differs
  from the previous step's (the image steps 12 and 15 run the frozen vision tower and the
  projector first, and the text steps 13 and 16 right after them do not) invalidate ZeRO-3's
  prefetch trace: in those steps every layer's parameter ``hcom_allGather_`` is issued on demand
  right before the layer, nothing computing beside it, where the other steps prefetch it during
  the previous layer. Same all-gathers (count, 404.8 MB each), same kernels, same links on every
  rank; only their placement differs. Culprit: those steps (a job-level cause scoped to them).
  Evidence: the start of each ``hcom_allGather_`` (communication.json ``Start Timestamp`` /
  kernel_details.csv rows) against the layer's kernels, step by step, and
  Communication(Not Overlapped) of step_trace_time.csv in those steps; the vision kernels
  (a 24-layer ViT on [4608, 1024]) in 12 and 15 only.
- ``zero3-offload-param-node``: the same ZeRO-3 job on two nodes, every layer's all-gather
  prefetched; node 1 (ranks 8-15) was started with a stale copy of the DeepSpeed config that
  offloads the parameters to the CPU (``offload_param: cpu`` with ``pin_memory`` false, the old
  default): before each all-gather its host copies the layer's partition (25.3 MB) from pageable
  memory with a blocking ``aclrtMemcpy`` (~2.4 GB/s, ~10.5 ms), 7 times a step, and its device
  idles meanwhile; node 0 waits for it inside the all-gathers. Evidence: the host lanes of ranks
  8-15 in trace_view.json (``aten::to`` > ``aten::_to_copy`` > ``aten::copy_`` around
  ``AscendCL@aclrtMemcpy``, Input Dims the partition's element count) right before each
  ``hcom_allGather_`` launch, and node 0's Synchronization Time in communication.json. Culprit:
  node 1 (its host), links and kernels normal.
- ``compile-graph-breaks``: a Llama-style model compiled with torch.compile (torchair, fullgraph
  off); each decoder layer checks ``torch.all(attention_mask)`` in Python to choose a fast path:
  a data-dependent branch, so dynamo breaks the graph there: the forward runs as 7 graphs (Model
  IDs 1, 3, ... 13), and at each of the 6 breaks the host syncs on the flag (``aten::item`` >
  ``aclrtSynchronizeStream``), re-enters dynamo and launches the next graph (``aclmdlExecuteAsync``)
  while the device idles (~1.4 ms a break); the backward graphs follow each other without a gap.
  Job-level (every rank alike). Evidence: the ``Model ID`` column of kernel_details.csv (the value
  changes 6 times in the forward, the first kernel after each change has a ~1.4 ms Wait Time, a tiny
  ``ReduceAll`` on DT_BOOL right before it) and the sync + graph launch calls of trace_view.json.
- ``compiled-optimizer-recompile``: ``torch.compile(optimizer.step)`` (torchair) with a per-step
  cosine learning-rate schedule passing the LR as a Python float (and
  ``torch._dynamo.config.cache_size_limit`` raised): the guard on the LR fails every step, so every
  rank recompiles the optimizer graph every step (~260 ms of ``torch/_dynamo/convert_frame.py``
  ``_compile`` > torchair ``compile`` Python frames, with_stack) before launching it, its devices
  idle; the optimizer kernels carry a new Model ID in every step. Job-level (every rank alike,
  links normal). Evidence: the Python lane of trace_view.json and the optimizer rows' Model ID of
  kernel_details.csv step by step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    RANKS_PER_NODE,
    Cluster,
    Collective,
    HostCall,
    Item,
    Kernel,
    Perturb,
    default_perturb,
)
from advisor_chat.synth.scenarios import (
    CANN8,
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
from advisor_chat.synth.scenarios_dev10 import _share
from advisor_chat.synth.scenarios_dev19 import _med, _saving
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    step_ids,
    victims_by_wait,
)
from advisor_chat.synth.writer import host_calls_span_us

AG, RS, AR = "hcom_allGather_", "hcom_reduceScatter_", "hcom_allReduce_"


def _dist(info: Any, **kw: Any) -> None:
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(kw)
    info.user_metadata["distributed_args"] = dist


def _meta(info: Any, key: str, value: Any) -> None:
    assert info.user_metadata is not None
    info.user_metadata[key] = value


def _kernels(prog: list[Item]) -> list[Kernel]:
    return [it for it in prog if isinstance(it, Kernel)]


def _colls(prog: list[Item]) -> list[Collective]:
    return [it for it in prog if isinstance(it, Collective)]


def _op_us(cl: Cluster, pick: Any) -> np.ndarray:
    """[ranks, steps] summed duration (µs) of the collectives ``pick(collective)`` accepts."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if pick(op.item):
                out[:, si] += (op.end - op.start) / 1000
    return out


def _ge_names(ks: list[Kernel]) -> list[Kernel]:
    """The kernels of one compiled graph named as GE names its nodes: op type, then ``_1``, ``_2``."""
    seen: dict[str, int] = {}
    out = []
    for k in ks:
        n = seen.get(k.op_type, 0)
        seen[k.op_type] = n + 1
        out.append(dataclasses.replace(k, name=k.op_type if n == 0 else f"{k.op_type}_{n}"))
    return out


# ---------------------------------------------------------------- ZeRO-3 job (two kinds)
Z_H = 4096
Z_FFN = 11008
Z_B, Z_S = 3, 8192  # micro-batch 3 x 8192 tokens
Z_M = Z_B * Z_S
Z_LAYERS = 4
Z_CUBE_TFLOPS = 280.0  # MatMul throughput of the simulated card
Z_FA_TFLOPS = 220.0
Z_HBM = 1.3e12  # bytes/s of a memory-bound vector kernel
# bf16 weights of one decoder layer (qkv, o, gate+up, down), decimal MB
Z_LAYER_PARAMS = 4 * Z_H * Z_H + 3 * Z_H * Z_FFN
Z_LAYER_MB = round(2 * Z_LAYER_PARAMS / 1e6, 2)
Z_VIT_LAYERS = 24
Z_VIT_H, Z_VIT_FFN, Z_VIT_TOK = 1024, 4096, 8 * 576  # ViT-L/14-336 on 8 images
Z_PROJ_MB = round(2 * (Z_VIT_H * Z_H + Z_H * Z_H) / 1e6, 2)


def _mm_us(m: int, k: int, n: int) -> float:
    return round(2 * m * k * n / (Z_CUBE_TFLOPS * 1e12) * 1e6, 1)


def _mem_us(nbytes: float) -> float:
    return round(nbytes / Z_HBM * 1e6 + 4.0, 1)


def _zmm(tag: str, m: int, k: int, n: int, f: float = 1.0) -> Kernel:
    return _k(
        "aclnnMatmul_MatMulCommon_MatMulV2",
        "MatMulV2",
        "AI_CORE",
        f"{m},{k};{n},{k}",
        f"{m},{n}",
        round(_mm_us(m, k, n) * f, 1),
        "aclnnMatmul",
        tag,
    )


def _zvec(tag: str, op: str, shape: str, nbytes: float) -> Kernel:
    return dataclasses.replace(
        _k(
            f"aclnn{op}_{op}_{op}",
            op,
            "AI_VECTOR_CORE",
            shape,
            shape,
            _mem_us(nbytes),
            f"aclnn{op}",
        ),
        tag=tag,
        block_dim=40,
    )


def _zfa(grad: bool, b: int, s: int, h: int, tag: str, causal: bool = True) -> Kernel:
    flops = 4 * b * s * s * h / (2 if causal else 1) * (2.5 if grad else 1.0)
    op = "FlashAttentionScoreGrad" if grad else "FlashAttentionScore"
    n_in = 4 if grad else 3
    return _k(
        f"aclnn{op}_{op}_{op}",
        op,
        "MIX_AIC",
        ";".join([f"{b},{s},{h}"] * n_in),
        f"{b},{s},{h}",
        round(flops / (Z_FA_TFLOPS * 1e12) * 1e6, 1),
        f"aclnn{op}",
        tag,
    )


def _z_fwd() -> list[Kernel]:
    m, h, f = Z_M, Z_H, Z_FFN
    act = 2 * m * h  # bytes of one [M, H] bf16 activation
    return [
        _zvec("norm", "RmsNorm", f"{m},{h}", 2 * act),
        _zmm("qkv", m, h, 3 * h),
        _zfa(False, Z_B, Z_S, h, "fa"),
        _zmm("o", m, h, h),
        _zvec("add", "Add", f"{m},{h}", 3 * act),
        _zvec("norm", "RmsNorm", f"{m},{h}", 2 * act),
        _zmm("gate_up", m, h, 2 * f),
        _zvec("swiglu", "SwiGlu", f"{m},{2 * f}", 3 * m * f * 2),
        _zmm("down", m, f, h),
        _zvec("add", "Add", f"{m},{h}", 3 * act),
    ]


def _z_bwd() -> tuple[list[Kernel], list[Kernel]]:
    """One layer's backward in two halves (MLP, attention)."""
    m, h, f = Z_M, Z_H, Z_FFN
    act = 2 * m * h
    mlp = [
        _zmm("down_dx", m, h, f),
        _zmm("down_dw", h, m, f, 1.02),
        _zvec("swiglu_grad", "SwiGluGrad", f"{m},{2 * f}", 5 * m * f * 2),
        _zmm("gate_up_dx", m, 2 * f, h),
        _zmm("gate_up_dw", 2 * f, m, h, 1.02),
        _zvec("norm_grad", "RmsNormGrad", f"{m},{h}", 3 * act),
    ]
    attn = [
        _zmm("o_dx", m, h, h),
        _zmm("o_dw", h, m, h, 1.02),
        _zfa(True, Z_B, Z_S, h, "fa_grad"),
        _zmm("qkv_dx", m, 3 * h, h),
        _zmm("qkv_dw", 3 * h, m, h, 1.02),
        _zvec("norm_grad", "RmsNormGrad", f"{m},{h}", 3 * act),
    ]
    return mlp, attn


def _z_prep() -> list[Kernel]:
    """Embedding lookup and rotary tables at the step start (the LLM's input)."""
    m, h = Z_M, Z_H
    return [
        dataclasses.replace(
            _k(
                "aclnnEmbedding_GatherV2_GatherV2",
                "GatherV2",
                "AI_VECTOR_CORE",
                f"151936,{h};{m}",
                f"{m},{h}",
                _mem_us(2 * 2 * m * h),
                "aclnnEmbedding",
                "prep",
                bd=40,
            ),
            in_dtypes="DT_BF16;INT64",
        ),
        _zvec("prep", "Cos", f"{Z_S},128", 4 * Z_S * 128 * 2),
        _zvec("prep", "Sin", f"{Z_S},128", 4 * Z_S * 128 * 2),
    ]


def _z_vit() -> list[Kernel]:
    """The frozen vision tower (ViT-L, kept whole on every rank) and the projector's forward."""
    t, h, f = Z_VIT_TOK, Z_VIT_H, Z_VIT_FFN
    act = 2 * t * h
    out: list[Kernel] = []
    for _ in range(Z_VIT_LAYERS):
        out += [
            _zvec("vit", "LayerNorm", f"{t},{h}", 2 * act),
            _zmm("vit", t, h, 3 * h),
            _zfa(False, 8, 577, h, "vit", causal=False),
            _zmm("vit", t, h, h),
            _zvec("vit", "Add", f"{t},{h}", 3 * act),
            _zvec("vit", "LayerNorm", f"{t},{h}", 2 * act),
            _zmm("vit", t, h, f),
            _zvec("vit", "Gelu", f"{t},{f}", 2 * t * f * 2),
            _zmm("vit", t, f, h),
            _zvec("vit", "Add", f"{t},{h}", 3 * act),
        ]
    return out


def _z_proj(fwd: bool) -> list[Kernel]:
    t, v, h = Z_VIT_TOK, Z_VIT_H, Z_H
    if fwd:
        return [
            _zmm("proj", t, v, h),
            _zvec("proj", "Gelu", f"{t},{h}", 2 * t * h * 2),
            _zmm("proj", t, h, h),
        ]
    return [
        _zmm("proj_bwd", h, t, h),
        _zmm("proj_bwd", t, h, h),
        _zvec("proj_bwd", "GeluGrad", f"{t},{h}", 3 * t * h * 2),
        _zmm("proj_bwd", h, t, v),
    ]


def _z_opt(ranks: int) -> list[Kernel]:
    """The fp32 AdamW step on this rank's partition (DeepSpeed's fused Adam on flat buffers)."""
    n = Z_LAYERS * Z_LAYER_PARAMS // ranks
    shape = f"{n}"
    return [
        dataclasses.replace(
            _k(
                f"aclnn{op}_{op}_{op}",
                op,
                "AI_VECTOR_CORE",
                shape,
                shape,
                _mem_us(n * nb),
                f"aclnn{op}",
                "opt",
                bd=48,
                dt="DT_FLOAT",
            ),
        )
        for op, nb in (("Cast", 6), ("ForeachMulScalar", 8), ("ApplyAdamW", 28), ("Cast", 6))
    ]


def zero3_program(vision: bool, ranks: int) -> list[Item]:
    """One ZeRO-3 step of a 4-layer slice of a 7B LLM (+ the image path when ``vision``).

    Every gather has two slots (collective tags): ``pf_*`` = prefetched during the previous layer
    (overlapping its kernels), ``od_*`` = issued on demand right before its layer (nothing
    overlapping); a scenario skips one of the two in each step (``Perturb.step_skip_colls``).
    Layer ``Z_LAYERS - 1`` stays resident from its forward to its backward (reuse distance).
    """
    prog: list[Item] = []
    if vision:
        prog += _z_vit()
        prog.append(Collective(AG, "world", Z_PROJ_MB, tag="od_proj"))
        prog += _z_proj(True)
    prep = _z_prep()
    prog.append(Collective(AG, "world", Z_LAYER_MB, overlap=len(prep), tag="first_f0"))
    prog += prep
    fwd = _z_fwd()
    for li in range(Z_LAYERS):
        if li > 0:
            prog.append(Collective(AG, "world", Z_LAYER_MB, tag=f"od_f{li}"))
        if li + 1 < Z_LAYERS:
            prog.append(Collective(AG, "world", Z_LAYER_MB, overlap=len(fwd), tag=f"pf_f{li + 1}"))
        prog += _z_fwd()
    for li in reversed(range(Z_LAYERS)):
        mlp, attn = _z_bwd()
        if li < Z_LAYERS - 1:
            prog.append(Collective(AG, "world", Z_LAYER_MB, tag=f"od_b{li}"))
        if li > 0:
            prog.append(Collective(AG, "world", Z_LAYER_MB, overlap=len(mlp), tag=f"pf_b{li - 1}"))
        prog += mlp
        if li < Z_LAYERS - 1:
            prog.append(Collective(RS, "world", Z_LAYER_MB, overlap=len(attn), tag=f"rs{li + 1}"))
        prog += attn
    prog.append(Collective(RS, "world", Z_LAYER_MB, tag="rs0"))
    if vision:
        prog += _z_proj(False)
        prog.append(Collective(RS, "world", Z_PROJ_MB, tag="rs_proj"))
    prog.append(Collective(AR, "world", 0.004, tag="grad_norm", latency_us=40.0))
    prog += _z_opt(ranks)
    return prog


def _z_info(ranks: int, **ds: Any) -> Any:
    info = _info(CANN8, 1, ranks)
    _dist(info, micro_batch_size=Z_B, seq_length=Z_S, hidden_size=Z_H, ffn_hidden_size=Z_FFN)
    cfg = {
        "stage": 3,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "reduce_bucket_size": Z_H * Z_H,
        "stage3_prefetch_bucket_size": int(0.9 * Z_H * Z_H),
        "stage3_param_persistence_threshold": 10 * Z_H,
        "stage3_max_live_parameters": 1_000_000_000,
        "stage3_max_reuse_distance": 1_000_000_000,
    }
    cfg.update(ds)
    _meta(info, "deepspeed_zero_optimization", cfg)
    return info


def _tag_idx(prog: list[Item]) -> dict[str, int]:
    """{collective tag: collective index} of a program."""
    return {c.tag: ci for ci, c in enumerate(_colls(prog))}


def _gather_us(cl: Cluster) -> float:
    """Median duration (µs) of one layer's all-gather on the ranks that arrive last."""
    d = [
        float(np.min(op.end - op.start)) / 1000
        for st in cl.steps
        for op in st.ops
        if op.item.op_type == AG and op.item.size_mb == Z_LAYER_MB
    ]
    return float(np.median(d))


# ---------------------------------------------------------------- zero3-prefetch-invalidated
PI_PERIOD = 3  # an image step every 3rd step (12, 15 in 10..17)


def _pi_image_steps(steps: int) -> list[int]:
    on = [si for si in range(steps) if si % PI_PERIOD == PI_PERIOD - 1]
    return on or [steps - 1]


def _pi_invalid_steps(steps: int) -> list[int]:
    """The image steps and the text step right after each (the module order changed)."""
    img = _pi_image_steps(steps)
    return sorted({si for s in img for si in (s, s + 1) if si < steps})


def _pi_perturb(ranks: int, steps: int, prog: list[Item], invalid: bool = True) -> Perturb:
    """The slots each step skips.

    The vision path in text steps, the on-demand slots in steps with a valid trace and the
    prefetch slots in the others (``invalid`` False: the trace stays valid in every step, the
    counterfactual).
    """
    p = default_perturb(ranks)
    tags = _tag_idx(prog)
    ks = _kernels(prog)
    vis_k = {j for j, k in enumerate(ks) if k.tag in ("vit", "proj", "proj_bwd")}
    vis_c = {tags["od_proj"], tags["rs_proj"]}
    od = {ci for t, ci in tags.items() if t.startswith("od_f") or t.startswith("od_b")}
    pf = {ci for t, ci in tags.items() if t.startswith("pf_")}
    img = set(_pi_image_steps(steps))
    bad = set(_pi_invalid_steps(steps)) if invalid else set()
    for si in range(steps):
        skip = set(pf if si in bad else od)
        if si not in img:
            skip |= vis_c
            p.step_skip_kernels[si] = {r: set(vis_k) for r in range(ranks)}
        p.step_skip_colls[si] = skip
    return p


def pi_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = zero3_program(vision=True, ranks=ranks)
    info = _z_info(ranks)
    _meta(
        info,
        "data_args",
        {
            "group_by_modality_length": True,
            "image_aspect_ratio": "pad",
            "freeze_vision_tower": True,
        },
    )
    return {"": Plan(prog, group_kinds(ranks, 1), _pi_perturb(ranks, steps, prog), info)}


def _od_gather_us(cl: Cluster) -> np.ndarray:
    """[ranks, steps] time (µs) in the layer all-gathers issued on demand (nothing beside them)."""
    return _op_us(cl, lambda c: c.tag.startswith("od_f") or c.tag.startswith("od_b"))


def pi_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: in the steps after a module-order change every all-gather runs on demand."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    bad = _pi_invalid_steps(steps)
    good = [si for si in range(steps) if si not in bad]
    img = _pi_image_steps(steps)
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    comp = col(m, "computing_us")
    ag = _op_us(cl, lambda c: c.op_type == AG and c.size_mb == Z_LAYER_MB)
    exposed_ag = _od_gather_us(cl)
    clean = _sim_breakdown(
        _resimulate(
            dataclasses.replace(cl, perturb=_pi_perturb(ranks, steps, cl.program, invalid=False)),
            cl.program,
        )
    )
    extra = np.median(step, axis=0) - np.median(clean["step_us"], axis=0)
    mean_a = float(np.median(step.mean(axis=1)))
    mean_b = float(np.median(clean["step_us"].mean(axis=1)))
    n_ag = sum(
        1
        for c in _colls(cl.program)
        if c.op_type == AG and c.size_mb == Z_LAYER_MB and not c.tag.startswith("od_")
    )
    n_od = sum(1 for c in _colls(cl.program) if c.tag.startswith(("od_f", "od_b")))
    vit_us = float(
        np.median(
            [
                sum(float(st.k_dur[r, j]) for j, k in enumerate(cl.kernels) if k.tag == "vit")
                / 1000
                for si, st in enumerate(cl.steps)
                if si in img
                for r in range(cl.ranks)
            ]
        )
    )

    def med_cols(a: np.ndarray, cols: list[int]) -> float:
        return _med(a[:, cols]) if cols else 0.0

    nums = {
        "zero_stage": 3,
        "invalidated_steps": [ids[si] for si in bad],
        "first_invalidated_step": ids[bad[0]],
        "last_invalidated_step": ids[bad[-1]],
        "image_steps": [ids[si] for si in img],
        "first_image_step": ids[img[0]],
        "text_steps_after_image": [ids[si] for si in bad if si not in img],
        "first_text_step_after_image": ids[next((si for si in bad if si not in img), img[0])],
        "prefetched_steps": [ids[si] for si in good],
        "layer_allgathers_per_step": n_ag,
        "layer_allgather_mb": Z_LAYER_MB,
        "layer_allgather_us_median": _r(_gather_us(cl)),
        "on_demand_allgathers_per_invalidated_step": n_od,
        "allgather_us_per_step": _med(ag.mean(axis=0)),
        "exposed_allgather_us_invalidated_steps_median": med_cols(exposed_ag, bad),
        "comm_not_overlapped_us_invalidated_steps_median": med_cols(notov, bad),
        "comm_not_overlapped_us_prefetched_steps_median": med_cols(notov, good),
        "computing_us_invalidated_steps_median": med_cols(comp, bad),
        "computing_us_prefetched_steps_median": med_cols(comp, good),
        "step_us_invalidated_steps_median": med_cols(step, bad),
        "step_us_prefetched_steps_median": med_cols(step, good),
        "vision_tower_us_per_image_step": _r(vit_us),
        "extra_us_per_invalidated_step": _med(extra[bad]),
        "median_step_us": _r(float(np.median(step))),
        "mean_step_us": _r(mean_a),
        "mean_step_us_trace_kept": _r(mean_b),
        "saving_us_per_invalidated_step": _med(extra[bad]),
        "saving_us_per_step_average": _r(mean_a - mean_b),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = root_cause(
        "exposed_communication",
        "communication",
        "job",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        steps=[ids[si] for si in bad],
        metrics={
            "extra_us_per_invalidated_step": nums["extra_us_per_invalidated_step"],
            "comm_not_overlapped_us_invalidated_steps_median": nums[
                "comm_not_overlapped_us_invalidated_steps_median"
            ],
            "invalidated_steps": nums["invalidated_steps"],
        },
    )
    return _with_evidence(
        key,
        rc,
        invalidated_steps=[ids[si] for si in bad],
        image_steps=[ids[si] for si in img],
        collective=AG,
        group="world (ZeRO-3 data parallel, 2 nodes)",
        allgather_mb=Z_LAYER_MB,
        position="in the invalidated steps every layer's hcom_allGather_ (but layer 0's, issued at "
        "the step start in every step) starts after the previous layer's last kernel and the "
        "layer's first kernel waits for its end; in the other steps it starts with the previous "
        "layer's first kernel and ends under it",
        vision_operators=["LayerNorm", "Gelu", "MatMulV2"],
        file="communication.json (Start Timestamp / Elapse Time of each hcom_allGather_ against the "
        "layers' kernels in kernel_details.csv, step by step: same count and size in every step), "
        "step_trace_time.csv (Communication(Not Overlapped) and step time up in the invalidated "
        "steps only), kernel_details.csv (the ViT LayerNorm / Gelu / MatMulV2 rows on [4608, 1024] "
        "in the image steps only); profiler_metadata.json: deepspeed_zero_optimization stage 3, "
        "data_args group_by_modality_length true",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        kernels_normal=True,
        every_step=False,
        cause="DeepSpeed ZeRO-3 prefetches each layer's parameters during the previous layer by "
        "replaying the module order it traced; batches are grouped by modality, so the image steps "
        "run the vision tower and the projector first and the text steps do not: in every step "
        "whose module order differs from the previous step's (each image step and the text step "
        "after it) the trace is invalidated ('Invalidate trace cache') and every all-gather is "
        "issued on demand right before its layer, with nothing to overlap it, on every rank",
        fix="keep the module order the same in every step: run the vision tower and projector on "
        "every step (a dummy image for text-only batches) or mix images and text in every batch "
        "(group_by_modality_length off); or mark the vision path as a ZeRO-3 leaf / exclude it "
        "from partitioning (deepspeed.utils.set_z3_leaf_modules, "
        "stage3_param_persistence_threshold); then check that the all-gathers overlap in every step",
    )


# ---------------------------------------------------------------- zero3-offload-param-node
OP_NODE = 1
OP_GBPS = 2.4  # pageable (staged) host-to-device copy bandwidth, GB/s


def _op_node(ranks: int) -> list[int]:
    node = min(OP_NODE, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def _op_fetch(ranks: int) -> HostCall:
    """The blocking copy of one layer's partition from pageable host memory."""
    n = Z_LAYER_PARAMS // ranks
    us = round(2 * n / (OP_GBPS * 1e9) * 1e6, 1)
    return HostCall(
        "aclrtMemcpy",
        us,
        ("aten::to", "aten::_to_copy", "aten::copy_"),
        tail_us=12.0,
        input_dims=f"{n}",
        input_type="c10::BFloat16",
    )


def _op_gathers(prog: list[Item]) -> dict[int, int]:
    """{collective index: index of the first kernel after it} of the layer all-gathers."""
    out: dict[int, int] = {}
    ci = kj = 0
    pending: list[int] = []
    for it in prog:
        if isinstance(it, Kernel):
            for c in pending:
                out[c] = kj
            pending = []
            kj += 1
        else:
            if it.op_type == AG and it.size_mb == Z_LAYER_MB:
                pending.append(ci)
            ci += 1
    return out


def op_program(ranks: int) -> list[Item]:
    """The ZeRO-3 step with every layer's all-gather prefetched (no vision path)."""
    prog = zero3_program(vision=False, ranks=ranks)
    return [it for it in prog if not (isinstance(it, Collective) and it.tag.startswith("od_"))]


def _op_perturb(ranks: int, seed: int, prog: list[Item], offload: bool = True) -> Perturb:
    """Node 1's host copies each layer's partition (blocking) before launching its all-gather.

    The all-gather arrives that much later on node 1 (``coll_delay_us``): the copy's span after
    the previous launch, less the previous kernel's run (the host was ahead by its launch lead),
    plus the relaunch; the step's first fetch waits for the whole copy; the prefetch issued right
    after it is hidden behind the first all-gather (the comm stream is busy with it).
    """
    p = default_perturb(ranks)
    if not offload:
        return p
    bad = _op_node(ranks)
    gathers = _op_gathers(prog)
    tags = [c.tag for c in _colls(prog)]
    ks = _kernels(prog)
    rng = np.random.default_rng(seed + 2901)
    calls: dict[int, dict[int, list[HostCall]]] = {}
    delay = np.zeros((ranks, len(tags)))
    base = _op_fetch(ranks)
    for r in bad:
        calls[r] = {}
        for ci, j in gathers.items():
            c = dataclasses.replace(
                base,
                us=round(base.us * (1.0 + 0.03 * float(np.clip(rng.standard_normal(), -2, 2))), 1),
            )
            calls[r][j] = [c]
            span = host_calls_span_us([c])
            if j == 0:
                delay[r, ci] = span + 1.15 * p.lead_us[r] + 230.0
            elif ci > 0 and tags[ci - 1] == "first_f0":
                delay[r, ci] = 0.0
            else:
                delay[r, ci] = max(span + 700.0 - 0.97 * ks[j - 1].dur_us, 0.0)
    p.host_calls = calls

    def coll_delay(si: int, ci: int) -> np.ndarray | None:
        return delay[:, ci] if ci < delay.shape[1] and delay[:, ci].any() else None

    p.coll_delay_us = coll_delay
    return p


def op_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = op_program(ranks)
    return {"": Plan(prog, group_kinds(ranks, 1), _op_perturb(ranks, seed, prog), _z_info(ranks))}


def op_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1's host copies every partition from pageable memory before each gather."""
    cl: Cluster = m[""]["cluster"]
    bad = _op_node(ranks)
    good = [r for r in range(ranks) if r not in bad]
    step = col(m, "step_us")
    free = col(m, "free_us")
    wait = coll_wait_us(m)
    calls = cl.perturb.host_calls
    copy_us = [c.us for r in bad for cs in calls[r].values() for c in cs]
    n_copies = len(calls[bad[0]])
    fetch = _op_fetch(ranks)
    base = _sim_breakdown(
        _resimulate(
            dataclasses.replace(cl, perturb=_op_perturb(ranks, cl.seed, cl.program, False)),
            cl.program,
        )
    )
    a, b, save = _saving(step, base["step_us"])
    vic = victims_by_wait(wait, bad)
    nums = {
        "culprit_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "zero_stage": 3,
        "copies_per_step": n_copies,
        "partition_mb": round(2 * int(fetch.input_dims) / 1e6, 2),
        "copy_us_median": _r(float(np.median(copy_us))),
        "copy_gbps": round(2 * int(fetch.input_dims) / (float(np.median(copy_us)) * 1e3), 3),
        "copy_us_per_step": _r(float(np.median(copy_us)) * n_copies),
        "layer_allgathers_per_step": len(_op_gathers(cl.program)),
        "layer_allgather_mb": Z_LAYER_MB,
        "culprit_free_us_per_step": _r(float(free[bad].mean())),
        "others_free_us_per_step": _r(float(free[good].mean())),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "median_step_us": _r(a),
        "median_step_us_no_offload": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(bad, "scheduling", ["sync-stream-launch-blocking"], "free_us", nums)
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
            "copy_us_per_step": nums["copy_us_per_step"],
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
        host_call="aclrtMemcpy",
        host_frames=["aten::to", "aten::_to_copy", "aten::copy_"],
        copy_elements=int(fetch.input_dims),
        dtype="c10::BFloat16",
        collective=AG,
        file="trace_view.json of ranks 8-15 (a blocking AscendCL@aclrtMemcpy of ~10 ms inside "
        "aten::to > aten::_to_copy > aten::copy_, Input Dims = one layer's partition, right before "
        "the launch of each hcom_allGather_, 7 per step; none on node 0), step_trace_time.csv (Free "
        "of ranks 8-15), communication.json of ranks 0-7 (Synchronization Time in the all-gathers)",
        links_normal=True,
        kernels_normal=True,
        every_step=True,
        cause=f"node {bad[0] // RANKS_PER_NODE} (ranks {bad[0]}-{bad[-1]}) runs with a stale "
        "DeepSpeed config that offloads the ZeRO-3 parameters to the CPU (offload_param: cpu, "
        "pin_memory false): before every layer's all-gather its host copies the layer's partition "
        "from pageable memory with a blocking copy (~2.4 GB/s), its device idles meanwhile, and "
        "node 0 waits for it inside the all-gathers",
        fix="give every node the same DeepSpeed config: drop offload_param on that node (the "
        "partitions fit in device memory, as on node 0); if offloading is really needed, set "
        "offload_param.pin_memory true on every node; check the config each node reads at launch",
    )


# ---------------------------------------------------------------- compile-graph-breaks
GB_LAYERS = 6
GB_SCALE = 0.5
GB_PY_US = 1000.0  # the host between graphs: dynamo re-entry, guard checks, eager Python
GB_LAUNCH_US = 240.0  # aclmdlExecuteAsync: binding one graph's inputs and launching it
GB_LEAD_US = 1000.0  # how far the host runs ahead of the device between syncs
GB_FRAMES = (
    "model/llama.py(214): forward",
    "torch/_dynamo/eval_frame.py(632): _fn",
    "torch/_functorch/aot_autograd.py(1012): forward",
    "torchair/_ge_concrete_graph/fx2ge_converter.py(547): __call__",
)


def _gb_check() -> Kernel:
    """``torch.all(attention_mask)``: a tiny reduction whose bool the host reads (``.item()``)."""
    return dataclasses.replace(
        _k(
            "aclnnAll_ReduceAll_ReduceAll",
            "ReduceAll",
            "AI_VECTOR_CORE",
            "1,4096",
            "",
            3.1,
            "aclnnAll",
            "mask_check",
            bd=1,
            dt="DT_BOOL",
        ),
        out_shapes="",
    )


def gb_program(breaks: bool = True) -> tuple[list[Item], dict[int, int], list[int]]:
    """The step, the graph of every kernel and the kernels a graph break precedes.

    Forward graph ``g`` (id ``2g + 1``) ends right after layer ``g``'s input RmsNorm and mask
    check; its backward graph (id ``2g + 2``) holds the matching backward kernels. Without
    ``breaks``: no mask check, one forward graph (1) and one backward graph (2).
    """
    base = transformer(layers=GB_LAYERS, scale=GB_SCALE, grad_mb=48.0, grad_overlap=3)
    ks = _kernels(base)
    first_bwd = next(j for j, k in enumerate(ks) if k.tag == "mlp_down_dx")
    norms = _gb_input_norms(ks, first_bwd)
    prog: list[Item] = []
    graph: list[int | None] = []  # per kernel of prog; backward filled below, optimizer eager
    kj = 0
    fwd_graph = 0
    for it in base:
        prog.append(it)
        if not isinstance(it, Kernel):
            continue
        graph.append(2 * fwd_graph + 1 if kj < first_bwd else None)
        if kj in norms and breaks:
            # the layer's mask check ends the graph: the host reads its result
            prog.append(_gb_check())
            graph.append(2 * fwd_graph + 1)
            fwd_graph += 1
        kj += 1
    # backward: layer l's kernels (top down) belong to the backward of forward graph l + 1, except
    # its last (the input-norm gradient), which belongs to forward graph l's backward
    pk = _kernels(prog)
    nf = next(j for j, k in enumerate(pk) if k.tag == "mlp_down_dx")
    no = next(j for j, k in enumerate(pk) if k.op_type == "ForeachMulScalar")
    per_layer = (no - nf) // GB_LAYERS
    for j in range(nf, no):
        li = GB_LAYERS - 1 - (j - nf) // per_layer
        last = (j - nf) % per_layer == per_layer - 1
        g = (li if last else li + 1) if breaks else 0
        graph[j] = 2 * g + 2
    ids = {j: g for j, g in enumerate(graph) if g is not None}
    # GE names per graph
    by_graph: dict[int, list[int]] = {}
    for j, g in ids.items():
        by_graph.setdefault(g, []).append(j)
    renamed = list(pk)
    for js in by_graph.values():
        for j, k in zip(js, _ge_names([pk[j] for j in js]), strict=True):
            renamed[j] = k
    it_k = iter(renamed)
    prog = [next(it_k) if isinstance(it, Kernel) else it for it in prog]
    starts = [j for j in sorted(ids) if j > 0 and ids.get(j - 1) != ids[j] and ids[j] % 2 == 1]
    return prog, ids, starts


def _gb_input_norms(ks: list[Kernel], first_bwd: int) -> set[int]:
    """Forward kernel indices of each layer's input RmsNorm (the first of the two per layer)."""
    norms = [j for j in range(first_bwd) if ks[j].op_type == "RmsNorm"]
    return set(norms[0::2])


def _gb_perturb(ranks: int, seed: int, breaks: bool = True) -> tuple[list[Item], Perturb]:
    prog, ids, starts = gb_program(breaks)
    p = default_perturb(ranks)
    p.lead_us[:] = GB_LEAD_US
    p.model_ids = {(-1, j): g for j, g in ids.items()}
    first = [j for j in sorted(ids) if j == 0 or ids.get(j - 1) != ids[j]]
    p.launch_api_us = {j: GB_LAUNCH_US for j in first}
    if breaks:
        rng = np.random.default_rng(seed + 2902)
        for r in range(ranks):
            p.host_syncs[r] = set(starts)
            p.kernel_stalls[r] = {}
            p.launch_py_frames[r] = {}
            for j in starts:
                py = round(
                    GB_PY_US * (1.0 + 0.06 * float(np.clip(rng.standard_normal(), -2, 2))), 1
                )
                p.launch_py_frames[r][j] = (GB_FRAMES, py)
                p.kernel_stalls[r][j] = round(py + 1.35 * GB_LAUNCH_US + 60.0, 1)
    return prog, p


def gb_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog, p = _gb_perturb(ranks, seed)
    info = dataclasses.replace(_info(CANN8, 1, ranks), with_stack=True)
    _meta(
        info,
        "torch_compile",
        {"backend": "torchair (npu)", "mode": "max-autotune", "fullgraph": False, "dynamic": False},
    )
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def _gap_before_us(cl: Cluster, js: list[int]) -> np.ndarray:
    """[ranks, steps] device idle (µs) before kernels ``js`` (from the previous kernel's end)."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for j in js:
            prev = st.k_start[:, j - 1] + st.k_dur[:, j - 1]
            out[:, si] += (st.k_start[:, j] - prev) / 1000
    return out


def gb_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 6 graph breaks in the forward, the device idle at each on every rank."""
    cl: Cluster = m[""]["cluster"]
    _prog, ids, starts = gb_program(True)
    step = col(m, "step_us")
    free = col(m, "free_us")
    idle = _gap_before_us(cl, starts)
    per_break = [
        float(st.k_start[r, j] - st.k_start[r, j - 1] - st.k_dur[r, j - 1]) / 1000
        for st in cl.steps
        for j in starts
        for r in range(cl.ranks)
    ]
    fwd_graphs = sorted({g for g in ids.values() if g % 2 == 1})
    bwd_graphs = sorted({g for g in ids.values() if g % 2 == 0})
    launches = sum(1 for j in sorted(ids) if j == 0 or ids.get(j - 1) != ids[j])
    fixed_prog, fixed_p = _gb_perturb(ranks, cl.seed, breaks=False)
    base = _sim_breakdown(_resimulate(dataclasses.replace(cl, perturb=fixed_p), fixed_prog))
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "graph_breaks_per_step": len(starts),
        "forward_graphs_per_step": len(fwd_graphs),
        "backward_graphs_per_step": len(bwd_graphs),
        "graph_launches_per_step": launches,
        "forward_model_ids": fwd_graphs,
        "host_syncs_per_step": len(starts),
        "idle_per_break_us_median": _r(float(np.median(per_break))),
        "idle_at_breaks_us_per_step": _med(idle.mean(axis=0)),
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "median_step_us": _r(a),
        "median_step_us_full_graph": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        [], "scheduling", ["sync-stream-launch-blocking", "host-dispatch-bound"], "free_us", nums
    )
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "idle_at_breaks_us_per_step": nums["idle_at_breaks_us_per_step"],
            "graph_breaks_per_step": nums["graph_breaks_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        graph_breaks_per_step=len(starts),
        forward_graphs_per_step=len(fwd_graphs),
        check_operator="ReduceAll",
        check_dtype="DT_BOOL",
        host_calls=["aclrtSynchronizeStream", "aclmdlExecuteAsync"],
        host_op="aten::item",
        python_frames=list(GB_FRAMES),
        file="kernel_details.csv (Model ID changes 6 times in each step's forward: graphs 1, 3, "
        "..., 13; the first kernel after each change, a MatMulV2 of the next layer, has a ~1.4 ms "
        "Wait Time; a tiny ReduceAll on DT_BOOL ends each forward graph; the backward graphs 2 ... "
        "14 follow each other without a gap), trace_view.json (aten::item > "
        "AscendCL@aclrtSynchronizeStream, then the torch/_dynamo eval_frame frames and one "
        "AscendCL@aclmdlExecuteAsync per graph), step_trace_time.csv (Free on every rank); "
        "profiler_metadata.json: torch_compile fullgraph false",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        kernels_normal=True,
        same_every_step=True,
        backward_normal=True,
        cause="the model is compiled with torch.compile (torchair) but each decoder layer checks "
        "torch.all(attention_mask) in Python to pick a fast path: a data-dependent branch, so "
        "dynamo breaks the graph there; the forward runs as 7 graphs, and at each of the 6 "
        "breaks the host waits for the device to read the flag (.item(): "
        "aclrtSynchronizeStream), re-enters dynamo and launches the next graph while the device "
        "idles (~1.4 ms a break), on every rank alike; the backward graphs run back to back",
        fix="remove the graph break: take the data-dependent check out of the compiled region "
        "(decide the mask path once per batch outside the model, or always use the masked path), "
        "compile with fullgraph=True to catch breaks (torch._dynamo.explain lists them), so the "
        "forward is one graph with no host sync",
    )


# ---------------------------------------------------------------- compiled-optimizer-recompile
OR_COMPILE_US = 260_000.0  # dynamo + GE compile of the optimizer graph, every step
OR_LAUNCH_US = 300.0
OR_FRAMES = (
    "train.py(241): train_step",
    "torch/optim/optimizer.py(484): wrapper",
    "torch/_dynamo/eval_frame.py(632): _fn",
    "torch/_dynamo/convert_frame.py(1116): __call__",
    "torch/_dynamo/convert_frame.py(672): _compile",
    "torch/_dynamo/output_graph.py(1251): compile_and_call_fx_graph",
    "torchair/npu_fx_compiler.py(412): __call__",
    "torchair/_ge_concrete_graph/fx2ge_converter.py(904): compile",
)


def _or_opt() -> list[Kernel]:
    """The compiled AdamW step (foreach over the parameters, fp32), GE node names."""
    h = 4096
    shape = f"{h},{h};{h}"
    ops = (
        ("ForeachMulScalar", 1600.0),
        ("ForeachLerpScalar", 2400.0),
        ("ForeachAddcmulScalar", 3100.0),
        ("ForeachSqrt", 1600.0),
        ("ForeachAddcdivScalar", 3400.0),
    )
    return _ge_names(
        [
            dataclasses.replace(
                _k(op, op, "AI_VECTOR_CORE", shape, shape, d, f"aclnn{op}", "opt", bd=48),
                in_dtypes="DT_FLOAT;DT_FLOAT",
                out_dtypes="DT_FLOAT",
            )
            for op, d in ops
        ]
    )


def or_program() -> list[Item]:
    """transformer() (eager) with its optimizer replaced by the compiled AdamW graph."""
    base = transformer(layers=4)
    ks = _kernels(base)
    opt = next(j for j, k in enumerate(ks) if k.op_type == "ForeachMulScalar")
    prog: list[Item] = []
    kj = 0
    for it in base:
        if isinstance(it, Kernel):
            if kj >= opt:
                break
            kj += 1
        prog.append(it)
    prog.append(Collective(AR, "world", 0.004, tag="grad_norm", latency_us=40.0))
    prog += _or_opt()
    return prog


def _or_opt_idx(prog: list[Item]) -> list[int]:
    return [j for j, k in enumerate(_kernels(prog)) if k.tag == "opt"]


def _or_perturb(ranks: int, steps: int, seed: int, recompile: bool = True) -> Perturb:
    from advisor_chat.synth import FIRST_STEP

    prog = or_program()
    opt = _or_opt_idx(prog)
    p = default_perturb(ranks)
    # a new graph in every step (the recompiled one); compiled once: the same graph every step
    for si in range(steps):
        for j in opt:
            p.model_ids[(si, j)] = FIRST_STEP + si if recompile else 1
    p.launch_api_us = {opt[0]: OR_LAUNCH_US}
    if recompile:
        rng = np.random.default_rng(seed + 2903)
        for r in range(ranks):
            us = round(OR_COMPILE_US * (1.0 + 0.002 * float(np.clip(rng.standard_normal(), -2, 2))))
            p.launch_py_frames[r] = {opt[0]: (OR_FRAMES, us)}
            p.kernel_stalls[r] = {opt[0]: round(us + 1.35 * OR_LAUNCH_US + 60.0, 1)}
    return p


def or_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = dataclasses.replace(_info(CANN8, 1, ranks), with_stack=True)
    _meta(
        info,
        "torch_compile",
        {"backend": "torchair (npu)", "compiled": ["optimizer.step"], "dynamic": False},
    )
    _meta(
        info,
        "training_args",
        {"optimizer": "AdamW", "lr_scheduler_type": "cosine", "warmup_steps": 100, "lr": 3e-4},
    )
    p = _or_perturb(ranks, steps, seed)
    return {"": Plan(or_program(), group_kinds(ranks, 1), p, info)}


def or_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank recompiles the optimizer graph every step; the devices idle."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    opt = _or_opt_idx(cl.program)
    step = col(m, "step_us")
    free = col(m, "free_us")
    idle = _gap_before_us(cl, [opt[0]])
    compile_us = [cl.perturb.launch_py_frames[r][opt[0]][1] for r in range(ranks)]
    base = _sim_breakdown(
        _resimulate(
            dataclasses.replace(cl, perturb=_or_perturb(ranks, steps, cl.seed, False)), cl.program
        )
    )
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "recompiles_per_step": round(
            len({cl.perturb.model_id_at(si, opt[0]) for si in range(steps)}) / steps, 3
        ),
        "compile_us_median": _r(float(np.median(compile_us))),
        "idle_before_optimizer_us_median": _med(idle),
        "optimizer_kernels_per_step": len(opt),
        "optimizer_model_ids": [ids[si] for si in range(steps)],
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "median_step_us": _r(a),
        "median_step_us_compiled_once": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "scheduling", ["dynamic-shape-recompile"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_idle",
        "scheduling",
        metrics={
            "compile_us_median": nums["compile_us_median"],
            "median_free_share": nums["median_free_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        python_frames=list(OR_FRAMES),
        compile_frame="torch/_dynamo/convert_frame.py(672): _compile",
        operators=sorted({cl.kernels[j].op_type for j in opt}),
        graph_launch="aclmdlExecuteAsync",
        position="after the backward's last gradient all-reduce and the grad-norm all-reduce, "
        "before the optimizer's Foreach* kernels",
        file="trace_view.json (Python lane, with_stack: torch/_dynamo/convert_frame.py _compile > "
        "torch/_dynamo/output_graph.py compile_and_call_fx_graph > torchair fx2ge_converter "
        "compile, ~260 ms, in every step on every rank, right before the optimizer graph's "
        "AscendCL@aclmdlExecuteAsync), kernel_details.csv (the optimizer's Foreach* rows carry a "
        "new Model ID in every step: 10, 11, 12, 13; the other kernels are eager), "
        "step_trace_time.csv (Free on every rank); profiler_metadata.json: torch_compile of "
        "optimizer.step, training_args lr_scheduler_type cosine",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        kernels_normal=True,
        same_every_step=True,
        cause="optimizer.step is compiled with torch.compile (torchair) and the learning rate is "
        "passed as a Python float that the per-step cosine schedule changes every step: dynamo "
        "guards on the float, so the guard fails and the optimizer graph is recompiled in every "
        "step (cache_size_limit raised, so it never falls back) on every rank: ~260 ms of "
        "host compilation before the optimizer's kernels while the devices idle",
        fix="make the learning rate a tensor (param_group['lr'] = torch.tensor(lr), the "
        "compiled-optimizer recipe) so a new value does not change the guard; or compile the "
        "optimizer with dynamic=True / stop compiling optimizer.step; then check that the "
        "optimizer keeps one Model ID across steps",
    )


# ---------------------------------------------------------------- registry
DEV29_SCENARIOS = (
    ScenarioSpec(
        "zero3-prefetch-invalidated",
        "DeepSpeed ZeRO-3, batches grouped by modality: in the image steps (12, 15) and the text "
        "steps right after them (13, 16) the module order changed, the prefetch trace is "
        "invalidated and every layer's 405 MB hcom_allGather_ runs on demand before its layer, "
        "nothing beside it; the other steps prefetch; every rank alike",
        16,
        8,
        pi_plans,
        pi_answer,
    ),
    ScenarioSpec(
        "zero3-offload-param-node",
        "DeepSpeed ZeRO-3 on two nodes, node 1 with a stale config offloading the parameters "
        "(offload_param cpu, pin_memory false): its host copies each layer's partition with a "
        "blocking aclrtMemcpy (~10 ms) before every all-gather, 7 a step; node 0 waits",
        16,
        4,
        op_plans,
        op_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "compile-graph-breaks",
        "torch.compile (torchair) with a data-dependent mask check in every layer: the forward "
        "breaks into 7 graphs (Model IDs), at each of the 6 breaks a host sync + graph launch "
        "with the device idle ~1.4 ms, every rank alike; job-level",
        16,
        4,
        gb_plans,
        gb_answer,
    ),
    ScenarioSpec(
        "compiled-optimizer-recompile",
        "compiled optimizer.step with the LR as a Python float under a per-step schedule: the "
        "optimizer graph recompiles every step on every rank (~260 ms of dynamo / torchair "
        "compile frames, a new Model ID each step), devices idle; job-level",
        16,
        4,
        or_plans,
        or_answer,
    ),
)
DEV29_KINDS = tuple(s.name for s in DEV29_SCENARIOS)


__all__ = ["DEV29_KINDS", "DEV29_SCENARIOS"]
