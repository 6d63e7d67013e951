"""Eighth set of development fault kinds (new kinds; written without reading the diagnosis).

Four more field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev10.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds:

- ``jit-compile-mode``: ``torch_npu.npu.set_compile_mode(jit_compile=True)`` left in the training
  script on every rank: the operators that have both paths go through the online-compile path
  (``aclopCompileAndExecute``: compile-cache lookup and op build on the host at every call) instead
  of the prebuilt binary ``aclnn*`` kernels. Every launch costs the host ~75 µs, the kernels of this
  mid-size model are shorter than that, so the device idles before every kernel on every rank (large
  Free). Not a recompilation (no step pays more than another) and nothing else is misconfigured; the
  fix is ``jit_compile=False``.
- ``eager-rmsnorm-rope``: a model ported from GPU code with RMSNorm and rotary position embedding
  written in plain PyTorch (no ``torch_npu.npu_rms_norm`` / ``npu_rotary_mul``): each norm becomes
  Cast, Pow, ReduceMean, Adds, Rsqrt, Mul, Cast, Mul (and a chain of small ops backward), each RoPE a
  Mul, two StridedSlice, Neg, ConcatD, Mul, Add per q and k. ~240 memory-bound vector kernels per
  step on every rank where the fused operators would run 32; RmsNorm and the rotary kernels are
  absent. Compute-bound job, no late rank.
- ``pp-uneven-layers``: PP=2 (TP = one stage) with a hand-written layer split of 5 / 3 (8 layers): the
  first stage runs 5 layers per micro-batch, the last 3, so stage 0 computes ~5/3 as long and stage 1
  waits for its activations in ``hcom_receive`` (Bubble) every micro-batch. Culprit: stage 0 (its
  partition), not its hardware: per-layer kernels are as fast as on stage 1. (One program runs on
  every rank, so the last stage's two missing layer slots are tiny scalar kernels there.)
- ``rank0-grad-hook-sync``: a gradient-norm logging hook registered on rank 0 only (``if rank == 0``)
  calls ``.item()`` on each layer's gradient norm during the backward: rank 0's host blocks in
  ``aclrtSynchronizeStream`` until its queue drains, then logs (~2.5-3.5 ms) before launching the
  next kernel, 4 times per step; the other ranks wait for rank 0 in the gradient all-reduces.
  Rank 0's kernels are normal; the network is not slow.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import Cluster, Collective, Item, Kernel, default_perturb
from advisor_chat.synth.scenarios import (
    Plan,
    ScenarioSpec,
    _key,
    _r,
    col,
    transformer,
)
from advisor_chat.synth.scenarios_dev import _plain, _rank_rc, _with_evidence
from advisor_chat.synth.scenarios_dev2 import _kernel_gaps_us
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc, _kernel_gap_us, _scalar_kernel
from advisor_chat.synth.scenarios_dev4 import COMPILE_API, _resimulate, _sim_breakdown
from advisor_chat.synth.scenarios_ext import (
    PP_ACT_MB,
    PP_MICRO,
    PP_TP_MB,
    _info_pp,
    _layer_kernels,
    _opt_kernels,
    coll_wait_us,
    not_slow_sample,
    pipeline_kinds,
    root_cause,
)


def _share(part: np.ndarray, whole: np.ndarray) -> float:
    return round(float(np.median(part.sum(axis=1) / whole.sum(axis=1))), 4)


def _baseline(cl: Cluster, program: list[Item] | None = None) -> dict[str, np.ndarray]:
    """Breakdown of the same run (seed, steps) without the fault: default knobs, another program."""
    healthy = dataclasses.replace(cl, perturb=default_perturb(cl.ranks))
    return _sim_breakdown(_resimulate(healthy, program if program is not None else cl.program))


# ---------------------------------------------------------------- jit-compile-mode
JIT_SCALE = 0.2  # a ~2B model, short sequences: kernels of ~6-460 µs
JIT_API_US = 75.0  # aclopCompileAndExecute per call: compile-cache lookup, op build, launch
JIT_GAP_US = 82.0  # device idle before each kernel: the host's launch rate on that path
# only these have no online-compile implementation (aclnn only), they keep their aclnn launch
JIT_ACLNN_ONLY = frozenset(
    {"FlashAttentionScore", "FlashAttentionScoreGrad", "ForeachMulScalar", "ForeachAddList"}
)


def jit_program(jit: bool = True) -> list[Item]:
    """transformer(); with ``jit`` through the online-compile path where an operator has one.

    Those kernels are named by their op type, as the aclop path writes them.
    """
    prog = transformer(layers=4, scale=JIT_SCALE, grad_mb=24.0, grad_overlap=3)
    if not jit:
        return prog
    out: list[Item] = []
    for it in prog:
        if isinstance(it, Kernel) and it.op_type not in JIT_ACLNN_ONLY:
            it = dataclasses.replace(it, name=it.op_type, api=COMPILE_API)
        out.append(it)
    return out


def jit_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    p.host_bound[:] = True
    p.api_us[:] = JIT_API_US
    p.gap_us[:] = JIT_GAP_US
    return _plain(ranks, jit_program(), p)


def jit_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank's host launches through the compile path; the device idles between."""
    cl: Cluster = m[""]["cluster"]
    comp_j = [j for j, k in enumerate(cl.kernels) if k.api == COMPILE_API]
    durs = np.concatenate([st.k_dur.ravel() for st in cl.steps]) / 1000
    api = np.concatenate([st.k_api_dur[:, comp_j].ravel() for st in cl.steps]) / 1000
    gaps = [float(np.median(_kernel_gaps_us(cl, r))) for r in range(ranks)]
    free = col(m, "free_us")
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    share = free.sum(axis=1) / step.sum(axis=1)
    base = _baseline(cl, jit_program(jit=False))
    base_step = float(np.median(base["step_us"]))
    nums = {
        "kernels_per_step": len(cl.kernels),
        "compile_path_launches_per_step": len(comp_j),
        "compile_path_share_of_launches": round(len(comp_j) / len(cl.kernels), 4),
        "launch_api_us_median": _r(float(np.median(api))),
        "kernel_us_median": _r(float(np.median(durs))),
        "device_gap_us_between_kernels_median": _r(float(np.median(gaps))),
        "median_free_share": round(float(np.median(share)), 4),
        "median_free_us_per_step": _r(float(np.median(free.mean(axis=1)))),
        "free_share_spread_across_ranks": round(float(share.max() - share.min()), 4),
        "median_computing_share": _share(comp, step),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_binary_kernels": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key([], "scheduling", ["host-dispatch-bound"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "free_share": nums["median_free_share"],
            "device_gap_us_between_kernels": nums["device_gap_us_between_kernels_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        host_api=COMPILE_API,
        jit_compile=True,
        compile_path_launches_per_step=len(comp_j),
        aclnn_launches_per_step=len(cl.kernels) - len(comp_j),
        launch_api_us=round(float(np.median(api)), 1),
        device_gap_us=round(float(np.median(gaps)), 1),
        same_every_step=True,
        fix="torch_npu.npu.set_compile_mode(jit_compile=False)",
        launch_blocking_set=False,
        profiler_level="Level1",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- eager-rmsnorm-rope
S, H = 4096, 4096
ER_TAG = "eager"
ROT_H = 4096  # q and k: 32 heads x 128 (no GQA)


def _ev(op: str, dur: float, shape: str, dt_in: str = "DT_FLOAT", dt_out: str = "") -> Kernel:
    """A small memory-bound vector kernel of the eager norm / rotary code."""
    n_in = 2 if op in ("Mul", "Add", "RsqrtGrad") else 1
    return Kernel(
        name=f"aclnn{op}_{op}_{op}",
        op_type=op,
        core="AI_VECTOR_CORE",
        in_shapes=";".join([shape] * n_in),
        in_dtypes=";".join([dt_in] * n_in),
        in_formats=";".join(["ND"] * n_in),
        out_shapes=shape,
        out_dtypes=dt_out or dt_in,
        out_formats="ND",
        dur_us=dur,
        block_dim=40,
        api=f"aclnn{op}",
        tag=ER_TAG,
    )


def _eager_norm() -> list[Kernel]:
    x, v = f"{S},{H}", f"{S},1"
    return [
        _ev("Cast", 62.0, x, "DT_BF16", "DT_FLOAT"),
        _ev("Pow", 84.0, x),
        _ev("ReduceMean", 47.0, x),
        _ev("Adds", 3.0, v),
        _ev("Rsqrt", 3.0, v),
        _ev("Mul", 86.0, x),
        _ev("Cast", 60.0, x, "DT_FLOAT", "DT_BF16"),
        _ev("Mul", 42.0, x, "DT_BF16"),
    ]


def _eager_norm_grad() -> list[Kernel]:
    x, v = f"{S},{H}", f"{S},1"
    return [
        _ev("Mul", 42.0, x, "DT_BF16"),
        _ev("Cast", 61.0, x, "DT_BF16", "DT_FLOAT"),
        _ev("Mul", 85.0, x),
        _ev("ReduceSum", 48.0, x),
        _ev("RsqrtGrad", 4.0, v),
        _ev("Mul", 86.0, x),
        _ev("Muls", 80.0, x),
        _ev("Add", 88.0, x),
        _ev("Cast", 60.0, x, "DT_FLOAT", "DT_BF16"),
    ]


def _eager_rope(grad: bool) -> list[Kernel]:
    x, half = f"{S},{ROT_H}", f"{S},{ROT_H // 2}"
    one = (
        [
            _ev("Mul", 41.0, x, "DT_BF16"),
            _ev("Mul", 41.0, x, "DT_BF16"),
            _ev("SplitV", 38.0, x, "DT_BF16"),
            _ev("Neg", 22.0, half, "DT_BF16"),
            _ev("ConcatD", 40.0, half, "DT_BF16"),
            _ev("Add", 43.0, x, "DT_BF16"),
        ]
        if grad
        else [
            _ev("Mul", 41.0, x, "DT_BF16"),
            _ev("StridedSlice", 24.0, x, "DT_BF16"),
            _ev("StridedSlice", 24.0, x, "DT_BF16"),
            _ev("Neg", 22.0, half, "DT_BF16"),
            _ev("ConcatD", 40.0, half, "DT_BF16"),
            _ev("Mul", 41.0, x, "DT_BF16"),
            _ev("Add", 43.0, x, "DT_BF16"),
        ]
    )
    return one + one  # q, then k


def _fused_rope(grad: bool) -> list[Kernel]:
    op = "RotaryMulGrad" if grad else "RotaryMul"
    x = f"1,{S},32,128"
    k = Kernel(
        name=f"aclnn{op}_{op}_{op}",
        op_type=op,
        core="AI_VECTOR_CORE",
        in_shapes=f"{x};1,{S},1,128;1,{S},1,128",
        in_dtypes="DT_BF16;DT_BF16;DT_BF16",
        in_formats="ND;ND;ND",
        out_shapes=x,
        out_dtypes="DT_BF16",
        out_formats="ND",
        dur_us=70.0 if grad else 48.0,
        block_dim=40,
        api=f"aclnn{op}",
    )
    return [k, k]


def eager_program(eager: bool = True) -> list[Item]:
    """transformer(); RMSNorm and RoPE as eager op chains (``eager``) or the fused torch_npu ops."""
    out: list[Item] = []
    for it in transformer(layers=4):
        if not isinstance(it, Kernel):
            out.append(it)
            continue
        if it.tag == "qkv_dx":  # rotary backward before the q/k gradient reaches the projection
            out += _eager_rope(True) if eager else _fused_rope(True)
        if eager and it.op_type == "RmsNorm":
            out += _eager_norm()
            continue
        if eager and it.op_type == "RmsNormGrad":
            out += _eager_norm_grad()
            continue
        out.append(it)
        if it.tag == "qkv":  # rotary embedding of q and k, right after the projection
            out += _eager_rope(False) if eager else _fused_rope(False)
    return out


def eager_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, eager_program(), default_perturb(ranks))


def eager_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the eager chains lengthen Computing on every rank; the fused ops would not."""
    cl: Cluster = m[""]["cluster"]
    ej = [j for j, k in enumerate(cl.kernels) if k.tag == ER_TAG]
    eager_us = np.array([st.k_dur[:, ej].sum(axis=1) for st in cl.steps]) / 1000  # [S, R]
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    base = _baseline(cl, eager_program(eager=False))
    base_step = float(np.median(base["step_us"]))
    counts: dict[str, int] = {}
    for j in ej:
        counts[cl.kernels[j].op_type] = counts.get(cl.kernels[j].op_type, 0) + 1
    fused_us = sum(
        k.dur_us for k in eager_program(eager=False) if isinstance(k, Kernel) and "Rotary" in k.name
    ) + sum(
        k.dur_us
        for k in transformer(layers=4)
        if isinstance(k, Kernel) and k.op_type in ("RmsNorm", "RmsNormGrad")
    )
    nums = {
        "kernels_per_step": len(cl.kernels),
        "eager_kernels_per_step": len(ej),
        "eager_kernel_us_median": _r(
            float(np.median(np.concatenate([st.k_dur[:, ej].ravel() for st in cl.steps]) / 1000))
        ),
        "eager_us_per_step_median": _r(float(np.median(eager_us))),
        "eager_share_of_computing": round(
            float(np.median(eager_us.T.sum(axis=1) / comp.sum(axis=1))), 4
        ),
        "fused_ops_us_per_step": _r(fused_us),
        "rmsnorm_kernels_per_step": sum(1 for k in cl.kernels if k.op_type == "RmsNorm"),
        "rotary_kernels_per_step": sum(1 for k in cl.kernels if "Rotary" in k.op_type),
        "median_computing_share": _share(comp, step),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_fused": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key([], "compute", ["tiny-kernels-fusion"], "computing_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={
            "eager_us_per_step": nums["eager_us_per_step_median"],
            "computing_share": nums["median_computing_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        op_types=sorted(counts),
        op_counts_per_step=dict(sorted(counts.items())),
        core="AI_VECTOR_CORE",
        missing_fused_ops=["RmsNorm", "RmsNormGrad", "RotaryMul", "RotaryMulGrad"],
        fused_apis=["torch_npu.npu_rms_norm", "torch_npu.npu_rotary_mul"],
        fp32_upcast=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- pp-uneven-layers
PPU_SPLIT = (5, 3)  # layers of stage 0 / stage 1 (8 layers; an even split is 4 / 4)
PPU_TAG = "layer_slot"


def ppu_program(layers: int = PPU_SPLIT[0]) -> list[Item]:
    """1F1B steady state of one stage with ``layers`` layer slots per micro-batch.

    Per micro-batch: the forward of every slot, a TP all-reduce, the backward of every slot, a TP
    all-reduce, the activation hand-off stage 0 -> stage 1.
    """
    fwd, bwd = _layer_kernels()
    prog: list[Item] = []
    for _ in range(PP_MICRO):
        for li in range(layers):
            prog += [dataclasses.replace(k, tag=f"{PPU_TAG}_{li}") for k in fwd]
        prog.append(Collective("hcom_allReduce_", "tp", PP_TP_MB))
        for li in reversed(range(layers)):
            prog += [dataclasses.replace(k, tag=f"{PPU_TAG}_{li}") for k in bwd]
        prog.append(Collective("hcom_allReduce_", "tp", PP_TP_MB))
        prog.append(Collective("hcom_send_", "pp", PP_ACT_MB, peer_op="hcom_receive_"))
    prog += _opt_kernels()
    return prog


def _ppu_empty_slots() -> set[str]:
    """Layer slots the last stage does not have (scalar bookkeeping there)."""
    return {f"{PPU_TAG}_{li}" for li in range(PPU_SPLIT[1], PPU_SPLIT[0])}


def ppu_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = ppu_program()
    kernels = [it for it in prog if isinstance(it, Kernel)]
    empty = _ppu_empty_slots()
    p = default_perturb(ranks)
    for r in range(ranks // 2, ranks):
        for j, k in enumerate(kernels):
            if k.tag in empty:
                p.kernel_swap[(-1, r, j)] = _scalar_kernel(k.tag)
    info = _info_pp(ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(num_layers=sum(PPU_SPLIT), num_layer_list=",".join(map(str, PPU_SPLIT)))
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(prog, pipeline_kinds(ranks), p, info, tp=ranks // 2)}


def ppu_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: stage 0 runs more layers (longer computing); stage 1 waits (Bubble)."""
    half = ranks // 2
    s0, s1 = list(range(half)), list(range(half, ranks))
    cl: Cluster = m[""]["cluster"]
    comp = col(m, "computing_us")
    bub = col(m, "bubble_us")
    step = col(m, "step_us")
    mm = {
        r: sum(
            1
            for j, k in enumerate(cl.kernels)
            if cl.perturb.kernel_at(0, r, j, k).op_type == "MatMulV2"
        )
        for r in (s0[0], s1[0])
    }
    fa = "FlashAttentionScore"
    fa_n = {
        r: sum(
            1 for j, k in enumerate(cl.kernels) if cl.perturb.kernel_at(0, r, j, k).op_type == fa
        )
        for r in (s0[0], s1[0])
    }
    # per-layer speed: the duration of the same kernel position on both stages (shared slots)
    shared = [
        j
        for j, k in enumerate(cl.kernels)
        if k.op_type == "MatMulV2" and k.tag not in _ppu_empty_slots()
    ]
    mm_us = {
        name: _r(
            float(
                np.median(
                    np.concatenate([st.k_dur[grp][:, shared].ravel() for st in cl.steps]) / 1000
                )
            )
        )
        for name, grp in (("stage0", s0), ("stage1", s1))
    }
    balanced = _baseline(cl, ppu_program(sum(PPU_SPLIT) // 2))
    base_step = float(np.median(balanced["step_us"]))
    nums: dict[str, Any] = {
        "stages": [s0, s1],
        "layers_per_stage": list(PPU_SPLIT),
        "micro_batches_per_step": PP_MICRO,
        "stage0_matmul_per_step": mm[s0[0]],
        "stage1_matmul_per_step": mm[s1[0]],
        "stage0_flash_attention_per_step": fa_n[s0[0]],
        "stage1_flash_attention_per_step": fa_n[s1[0]],
        "stage0_matmul_us_median": mm_us["stage0"],
        "stage1_matmul_us_median": mm_us["stage1"],
        "stage0_computing_us_per_step": _r(float(np.median(comp[s0].mean(axis=1)))),
        "stage1_computing_us_per_step": _r(float(np.median(comp[s1].mean(axis=1)))),
        "stage1_bubble_us_per_step": _r(float(np.median(bub[s1].mean(axis=1)))),
        "stage0_bubble_us_per_step": _r(float(np.median(bub[s0].mean(axis=1)))),
        "stage1_bubble_share": round(float(bub[s1].sum() / step[s1].sum()), 4),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_balanced_split": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key(
        s0, "compute", ["pipeline-bubbles", "load-imbalance-vs-slow-kernels"], "computing_us", nums
    )
    victims = [r for r in s1 if bub[r].mean() >= 1000.0]
    key["root_cause"] = root_cause(
        "pipeline_imbalance",
        "compute",
        "stage",
        ranks=s0,
        stage=0,
        victims=victims,
        not_slow=not_slow_sample(ranks, s0, victims),
        metrics={
            "victim_bubble_us_per_step": nums["stage1_bubble_us_per_step"],
            "culprit_computing_excess_us_per_step": _r(
                nums["stage0_computing_us_per_step"] - nums["stage1_computing_us_per_step"]
            ),
            "culprit_dominant": "computing",
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    key["evidence"] = {
        "first_stage": 0,
        "layers_per_stage": list(PPU_SPLIT),
        "num_layer_list": ",".join(map(str, PPU_SPLIT)),
        "balanced_split": [sum(PPU_SPLIT) // 2] * 2,
        "op_type": fa,
        "stage0_flash_attention_per_step": fa_n[s0[0]],
        "stage1_flash_attention_per_step": fa_n[s1[0]],
        "same_kernel_speed": True,
        "wait_op": "hcom_receive",
        "recompute": False,
        "stage1_bubble_us_per_step": nums["stage1_bubble_us_per_step"],
    }
    return key


# ---------------------------------------------------------------- rank0-grad-hook-sync
HOOK_RANK = 0
HOOK_LOG_US = 3000.0  # host work after each .item() returns (format + write the log line)


def _hook_positions(prog: list[Item]) -> list[int]:
    """Kernel indices launched right after a layer's gradients are complete (the hook fires then).

    The next layer's first backward kernel, and the optimizer's first kernel after the last layer.
    """
    ks = [it for it in prog if isinstance(it, Kernel)]
    starts = [j for j, k in enumerate(ks) if k.tag == "mlp_down_dx"]
    first_opt = next(j for j, k in enumerate(ks) if k.op_type == "ForeachMulScalar")
    return [*starts[1:], first_opt]


def hook_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    pos = _hook_positions(prog)
    rng = np.random.default_rng(seed + 151)
    p = default_perturb(ranks)
    p.kernel_stalls[HOOK_RANK] = {j: HOOK_LOG_US * (0.85 + 0.3 * float(rng.random())) for j in pos}
    p.host_syncs[HOOK_RANK] = set(pos)
    return _plain(ranks, prog, p)


def hook_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: rank 0's device idles after each hook's sync; the others wait in the all-reduces."""
    cl: Cluster = m[""]["cluster"]
    pos = _hook_positions(cl.program)
    idle = [g for j in pos for g in _kernel_gap_us(cl, HOOK_RANK, j)]
    host_work = [cl.perturb.kernel_stalls[HOOK_RANK][j] for j in pos]
    others = [q for q in range(ranks) if q != HOOK_RANK]
    other_idle = [g for q in others[:4] for j in pos for g in _kernel_gap_us(cl, q, j)]
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    free = col(m, "free_us")
    base = _baseline(cl)
    base_step = float(np.median(base["step_us"]))
    nums = {
        "syncs_per_step_culprit": len(pos),
        "syncs_per_step_others": 0,
        "idle_after_sync_us_median": _r(float(np.median(idle))),
        "host_work_after_sync_us_median": _r(float(np.median(host_work))),
        "culprit_sync_idle_us_per_step": _r(float(np.median(idle)) * len(pos)),
        "other_ranks_gap_us_median_at_same_kernels": _r(float(np.median(other_idle))),
        "culprit_free_us_per_step": _r(float(free[HOOK_RANK].mean())),
        "others_free_us_per_step_median": _r(float(np.median(free[others].mean(axis=1)))),
        "culprit_wait_us_per_step": _r(float(wait[HOOK_RANK].mean())),
        "others_wait_us_per_step_median": _r(float(np.median(wait[others].mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_without_hook": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key(
        [HOOK_RANK],
        "scheduling",
        ["sync-stream-launch-blocking", "host-dispatch-bound"],
        "free_us",
        nums,
    )
    rc = _rank_rc(
        m,
        ranks,
        HOOK_RANK,
        "host_stall",
        "scheduling",
        metrics={
            "culprit_sync_idle_us_per_step": nums["culprit_sync_idle_us_per_step"],
            "syncs_per_step": len(pos),
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        host_api="aclrtSynchronizeStream",
        framework_op="aten::item",
        culprit_rank=HOOK_RANK,
        syncs_per_step=len(pos),
        syncs_on_other_ranks=0,
        phase="backward (after each layer's gradients)",
        before_op_types=sorted({cl.kernels[j].op_type for j in pos}),
        wait_op="hcom_allReduce",
        culprit_kernels_normal=True,
        launch_blocking_set=False,
        late_rank=True,
        links_normal=True,
    )


# ---------------------------------------------------------------- registry
DEV10_SCENARIOS = (
    ScenarioSpec(
        "jit-compile-mode",
        "jit_compile=True left on every rank: operators launched through aclopCompileAndExecute "
        "(~75 us host per launch) instead of binary aclnn kernels; the device idles before every "
        "kernel; same in every step",
        16,
        4,
        jit_plans,
        jit_answer,
    ),
    ScenarioSpec(
        "eager-rmsnorm-rope",
        "RMSNorm and rotary embedding in plain PyTorch on every rank: ~240 small vector "
        "kernels per step (Cast/Pow/ReduceMean/Rsqrt/Mul, StridedSlice/Neg/ConcatD) instead of "
        "RmsNorm / RotaryMul; Computing longer everywhere, no late rank",
        16,
        4,
        eager_plans,
        eager_answer,
    ),
    ScenarioSpec(
        "pp-uneven-layers",
        "PP=2 with a 5/3 layer split: the first stage runs 5 layers per micro-batch, the last 3; "
        "stage 1 waits in hcom_receive (Bubble); per-layer kernels equally fast on both stages",
        16,
        4,
        ppu_plans,
        ppu_answer,
        min_ranks=4,
        rank_multiple=2,
    ),
    ScenarioSpec(
        "rank0-grad-hook-sync",
        "a grad-norm logging hook on rank 0 only calls .item() after each layer's backward: rank 0 "
        "blocks in aclrtSynchronizeStream, idles ~3 ms 4x per step; the others wait in the "
        "gradient all-reduces",
        16,
        4,
        hook_plans,
        hook_answer,
    ),
)
DEV10_KINDS = tuple(s.name for s in DEV10_SCENARIOS)


__all__ = ["DEV10_KINDS", "DEV10_SCENARIOS"]
