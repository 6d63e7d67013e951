"""Twenty-first set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev23.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the Python lane of trace_view.json
(``python_function`` hook frames before every launch, with_stack), the fp32 ``Add`` rows of
kernel_details.csv / op_statistic.csv on the weights' shapes, the RDMA part of the expert-parallel
``hcom_alltoallv_`` records of communication.json with the ep groups of profiler_metadata.json,
and the ``AscendCL@`` launch calls of the CANN lane of trace_view.json on one node):

- ``hooks-on-every-module``: a module tracer left on registers a forward hook and a full backward
  hook on every ``nn.Module``: before every operator's launch the host runs ~150-250 µs of Python
  hook code (``_forward_hook`` / ``_backward_hook`` frames), so the host can no longer keep ahead
  of the device: the device idles between kernels on every rank alike (Free), the launch calls are
  of normal length and the kernels of normal duration. Job-level, links normal.
- ``grad-accum-unfused``: 4 micro-batches per step (gradient accumulation) without
  ``--gradient-accumulation-fusion``: after every weight-gradient MatMul the bf16 gradient is added
  into the fp32 ``main_grad`` by a separate ``Add`` (aclnnInplaceAdd, DT_FLOAT + DT_BF16 on the
  weight's shape), 6 per layer and micro-batch (96 a step), each a memory-bound pass over the whole
  weight. Every rank alike. Job-level.
- ``moe-ep-cross-node``: a 60-expert MoE on 3 nodes (24 ranks) with ``--expert-model-parallel-size
  6`` (60 experts do not split over 8): the ep groups are ranks 0-5, 6-11, 12-17, 18-23, so groups
  6-11 and 12-17 straddle two nodes and their token AllToAllv (dispatch / combine, 67 MB) runs
  partly over RDMA instead of HCCS only, ~1.4x as long; those 12 ranks fall behind and the others
  wait in the gradient all-reduces. Culprit: those two ep groups (ranks 6-17).
- ``cpu-powersave-node``: node 1 (ranks 8-15) has its CPU frequency governor on ``powersave``:
  every host call there takes ~2.4x as long (each ``AscendCL@aclnn*`` launch ~27 µs instead of
  ~11 µs, the host's per-operator work likewise), steadily in every step (no stalls, no outliers);
  its host no longer keeps ahead of the device, its devices idle between kernels and node 0 waits
  for it in every collective. Culprit: node 1 (its host); devices and links normal.
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
    default_perturb,
    make_group_kind,
)
from advisor_chat.synth.scenarios import (
    BASE_COMM_US,
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
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_dev19 import _kernel_us, _med, _saving
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)

LAYERS = 4
GAP_US = 14.0  # the device gap between kernels of default_perturb
HBM_BPS = 1.3e12  # effective HBM bandwidth of a memory-bound vector kernel (bytes/s)


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


def _host_bound_idle(durs: list[float], host_us: np.ndarray) -> list[float]:
    """Device idle (µs) beyond the normal gap before each kernel when the host needs ``host_us[j]``.

    A launch queue: the host issues kernel j ``host_us[j]`` after kernel j-1 (it never waits for
    the device); the device starts it when it is issued and the previous kernel is done. The host
    starts the step with the device (no lead). Collectives are left out (the host catches up while
    the device waits in one); the simulated timeline is what the answer keys measure.
    """
    out = [0.0]
    issued = float(host_us[0])
    end = issued + durs[0]
    for j in range(1, len(durs)):
        issued += float(host_us[j])
        start = max(issued, end + GAP_US)
        out.append(round(start - end - GAP_US, 1))
        end = start + durs[j]
    return out


def _idle_between_us(cl: Cluster) -> np.ndarray:
    """[ranks, steps] device idle (µs) between consecutive kernels, beyond the normal gap."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        prev = st.k_start[:, :-1] + st.k_dur[:, :-1]
        gap = (st.k_start[:, 1:] - prev) / 1000
        out[:, si] = np.clip(gap - GAP_US, 0, None).sum(axis=1)
    return out


# ---------------------------------------------------------------- hooks-on-every-module
HK_SCALE = 0.2  # a ~2B model, short sequences: kernels of ~6-460 µs
HK_HOST_US = 25.0  # the host's own time per operator without hooks (aten dispatch + launch)
HK_FWD_US = 220.0  # forward pre-hook + forward hook of the operator's module (and its parents')
HK_BWD_US = 180.0  # full backward hook (BackwardHookFunction) per module in the backward
HK_JITTER = 0.12
HK_FWD_FRAMES = (
    "torch/nn/modules/module.py(1568): _call_impl",
    "tools/module_tracer.py(52): _forward_hook",
    "tools/module_tracer.py(88): _record",
)
HK_BWD_FRAMES = (
    "torch/utils/hooks.py(137): hook",
    "tools/module_tracer.py(61): _backward_hook",
    "tools/module_tracer.py(88): _record",
)


def hk_program() -> list[Item]:
    """transformer() at a small scale (short kernels)."""
    return transformer(layers=LAYERS, scale=HK_SCALE, grad_mb=24.0, grad_overlap=3)


def _hk_is_fwd(prog: list[Item]) -> list[bool]:
    ks = _kernels(prog)
    first_bwd = next(j for j, k in enumerate(ks) if k.tag == "mlp_down_dx")
    opt = next(j for j, k in enumerate(ks) if k.op_type == "ForeachMulScalar")
    return [j < first_bwd or j >= opt for j in range(len(ks))]


def hk_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = hk_program()
    ks = _kernels(prog)
    fwd = _hk_is_fwd(prog)
    p = default_perturb(ranks)
    p.host_bound[:] = True
    rng = np.random.default_rng(seed + 2301)
    durs = [k.dur_us for k in ks]
    # the same code on every rank: the per-operator hook time varies with the module, barely with
    # the rank
    f0 = 1.0 + HK_JITTER * np.clip(rng.standard_normal(len(ks)), -2, 2)
    for r in range(ranks):
        f = f0 * (1.0 + 0.02 * np.clip(rng.standard_normal(len(ks)), -2, 2))
        hook = np.array([(HK_FWD_US if fwd[j] else HK_BWD_US) * f[j] for j in range(len(ks))])
        idle = _host_bound_idle(durs, HK_HOST_US + hook)
        p.kernel_stalls[r] = {j: v for j, v in enumerate(idle) if v > 0}
        p.launch_py_frames[r] = {
            j: (HK_FWD_FRAMES if fwd[j] else HK_BWD_FRAMES, round(float(hook[j]), 1))
            for j in range(1, len(ks))
        }
    info = dataclasses.replace(_info(CANN8, 1, ranks), with_stack=True)
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def hk_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: hook Python before every launch on every rank; the device idles between kernels."""
    cl: Cluster = m[""]["cluster"]
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    idle = _idle_between_us(cl)
    hooks = [v[1] for r in range(ranks) for v in cl.perturb.launch_py_frames[r].values()]
    fwd = _hk_is_fwd(cl.program)
    n_fwd = sum(1 for j in range(1, len(fwd)) if fwd[j])
    api = np.stack([st.k_api_dur / 1000 for st in cl.steps], axis=2)
    kdur = np.array([k.dur_us for k in cl.kernels])
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "hooked_launches_per_step": len(cl.kernels) - 1,
        "forward_hook_frames_per_step": n_fwd,
        "backward_hook_frames_per_step": len(cl.kernels) - 1 - n_fwd,
        "hook_us_median": _r(float(np.median(hooks))),
        "hook_us_per_step": _r(float(np.sum(hooks)) / ranks),
        "launch_api_us_median": _med(api),
        "kernel_us_median": _r(float(np.median(kdur))),
        "device_idle_between_kernels_us_per_step": _med(idle),
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_no_hooks": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "scheduling", ["host-dispatch-bound"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "median_free_share": nums["median_free_share"],
            "hook_us_median": nums["hook_us_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        frames=[HK_FWD_FRAMES[1], HK_BWD_FRAMES[1]],
        frame_files="tools/module_tracer.py (_forward_hook / _backward_hook / _record), under "
        "torch/nn/modules/module.py _call_impl and torch/utils/hooks.py hook",
        per_step=len(cl.kernels) - 1,
        position="right before every operator's launch (AscendCL@aclnn*), forward and backward",
        file="trace_view.json (Python lane, with_stack: a python_function hook frame of ~150-250 µs "
        "right before every launch; the device idle between kernels, each launch just before its "
        "kernel) and step_trace_time.csv (Free on every rank); profiler_info with_stack true",
        launch_calls_normal=True,
        kernels_normal=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause="a module tracer (forward hooks and full backward hooks registered on every "
        "nn.Module) was left on: before every operator's launch the host runs ~150-250 µs of Python "
        "hook code, so it can no longer keep ahead of the device and the device idles between "
        "kernels on every rank alike",
        fix="remove the hooks for training runs (keep the handles from register_forward_hook / "
        "register_full_backward_hook and call .remove()), or register them only on the few modules "
        "you need and only on the steps you inspect",
    )


# ---------------------------------------------------------------- grad-accum-unfused
GA_MICRO = 4  # micro-batches per step (gradient accumulation)
GA_TAG = "main_grad_add"
GA_BYTES_PER_EL = 10  # read fp32 main_grad + bf16 grad, write fp32


def _ga_add(weight_shape: str) -> Kernel:
    """main_grad.add_(grad): fp32 + bf16 -> fp32 on the weight's shape (aclnnInplaceAdd)."""
    n = int(np.prod([int(x) for x in weight_shape.split(",")]))
    dur = round(n * GA_BYTES_PER_EL / HBM_BPS * 1e6 + 3.0, 1)
    return dataclasses.replace(
        _k(
            "aclnnInplaceAdd_Add_Add",
            "Add",
            "AI_VECTOR_CORE",
            f"{weight_shape};{weight_shape}",
            weight_shape,
            dur,
            "aclnnInplaceAdd",
            GA_TAG,
            bd=40,
            dt="DT_FLOAT",
        ),
        in_dtypes="DT_FLOAT;DT_BF16",
    )


def ga_program(unfused: bool = True) -> list[Item]:
    """GA_MICRO x (forward + backward) of transformer(); gradient all-reduces in the last one.

    ``unfused``: an Add into main_grad after every weight-gradient MatMul and RmsNormGrad.
    """
    base = transformer(layers=LAYERS)
    ks = base
    first_bwd = next(
        j for j, it in enumerate(ks) if isinstance(it, Kernel) and it.tag == "mlp_down_dx"
    )
    opt = next(
        j for j, it in enumerate(ks) if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    fwd = base[:first_bwd]
    bwd = base[first_bwd:opt]
    tail = base[opt:]
    prog: list[Item] = []
    for mb in range(GA_MICRO):
        last = mb == GA_MICRO - 1
        prog += fwd
        for it in bwd:
            if isinstance(it, Collective):
                if last:
                    prog.append(it)
                continue
            prog.append(it)
            if not unfused:
                continue
            if it.op_type == "MatMulV2" and it.tag.endswith("_dw"):
                prog.append(_ga_add(it.out_shapes))
            elif it.op_type == "RmsNormGrad":
                prog.append(_ga_add(it.out_shapes.split(",")[-1]))
    return prog + tail


def ga_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(
        micro_batch_size=1,
        global_batch_size=GA_MICRO * ranks,
        gradient_accumulation_fusion=False,
        accumulate_allreduce_grads_in_fp32=True,
        bf16=True,
    )
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(ga_program(), group_kinds(ranks, 1), default_perturb(ranks), info)}


def ga_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 96 fp32 Adds per step on the weights' shapes, every rank alike."""
    cl: Cluster = m[""]["cluster"]
    add = _kernel_us(cl, lambda k: k.tag == GA_TAG)
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    adds = [k for k in cl.kernels if k.tag == GA_TAG]
    big = max(adds, key=lambda k: k.dur_us)
    base = _baseline(cl, ga_program(unfused=False))
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "micro_batches_per_step": GA_MICRO,
        "grad_adds_per_step": len(adds),
        "grad_adds_per_micro_batch": len(adds) // GA_MICRO,
        "grad_adds_per_layer_and_micro_batch": len(adds) // GA_MICRO // LAYERS,
        "largest_add_shape": big.out_shapes,
        "largest_add_us": _r(big.dur_us),
        "grad_add_us_per_step": _med(add),
        "grad_add_share_of_step": _share(add, step),
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
            "grad_adds_per_step": nums["grad_adds_per_step"],
            "grad_add_us_per_step": nums["grad_add_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operator="Add",
        api="aclnnInplaceAdd",
        dtypes="DT_FLOAT;DT_BF16 -> DT_FLOAT",
        shapes=sorted({k.out_shapes for k in adds}),
        per_step=len(adds),
        position="right after every weight-gradient MatMulV2 (and RmsNormGrad) of the backward, in "
        "each of the 4 micro-batches",
        settings="profiler_metadata.json distributed_args: gradient_accumulation_fusion false, "
        "micro_batch_size 1, global_batch_size 4 x data-parallel size",
        file="kernel_details.csv (Add rows, Input Data Types DT_FLOAT;DT_BF16, Input Shapes = the "
        "weights' shapes, e.g. 32768,4096) and op_statistic.csv (Add count 96 per step, among the "
        "top operator types by time)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause=f"gradient accumulation over {GA_MICRO} micro-batches without "
        "--gradient-accumulation-fusion: after every weight-gradient MatMul the bf16 gradient is "
        "added into the fp32 main_grad by a separate Add over the whole weight (6 per layer and "
        f"micro-batch, {len(adds)} a step), each a memory-bound pass, on every rank alike",
        fix="turn on --gradient-accumulation-fusion (MindSpeed: the weight-gradient MatMul "
        "accumulates straight into the fp32 main_grad, npu_matmul_add_fp32), so the separate Adds "
        "disappear; fewer, larger micro-batches also cut their number",
    )


# ---------------------------------------------------------------- moe-ep-cross-node
ME_EP = 6
ME_EP_FIX = 4  # 60 experts over 4: every ep group inside one node
ME_EXPERTS = 60
ME_TOPK = 4
MH = 2048  # hidden size
MS = 4096  # tokens per micro-batch
ME_FFN = 1408  # expert FFN hidden size
ME_ROWS = MS * ME_TOPK  # token rows a rank's experts get per layer (balanced)
ME_A2A_MB = round(ME_ROWS * MH * 2 / 1e6, 1)  # bf16 tokens dispatched per rank
A2A = "hcom_alltoallv_"
MM_FLOPS = 180e12
FA_FLOPS = 150e12


def _me_mm(tag: str, m: int, k: int, n: int) -> Kernel:
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


def _me_v(op: str, nbytes: float, ins: str, outs: str, tag: str = "") -> Kernel:
    dur = round(nbytes / HBM_BPS * 1e6 + 4, 1)
    return _k(f"aclnn{op}_{op}_{op}", op, "AI_VECTOR_CORE", ins, outs, dur, f"aclnn{op}", tag, 40)


def _me_gmm(tag: str, k: int, n: int, local: int) -> Kernel:
    dur = round(2 * ME_ROWS * k * n / MM_FLOPS * 1e6 + 8, 1)
    return _k(
        "aclnnGroupedMatmulV4_GroupedMatmul_GroupedMatmul",
        "GroupedMatmul",
        "AI_CORE",
        f"{ME_ROWS},{k};{local},{k},{n};{local}",
        f"{ME_ROWS},{n}",
        dur,
        "aclnnGroupedMatmulV4",
        tag,
    )


def _me_fa(grad: bool) -> Kernel:
    bsh = f"1,{MS},{MH}"
    op = "FlashAttentionScoreGrad" if grad else "FlashAttentionScore"
    n = 4 if grad else 3
    dur = round(2 * MS * MS * MH / FA_FLOPS * 1e6 * (2.1 if grad else 1.0) + 10, 1)
    return _k(f"aclnn{op}_{op}_{op}", op, "MIX_AIC", ";".join([bsh] * n), bsh, dur, f"aclnn{op}")


def me_program(local: int = ME_EXPERTS // ME_EP) -> list[Item]:
    """MoE step, 4 layers: attention + routed experts (GroupedMatmul), AlltoAllv on the ep group."""
    sh = f"{MS},{MH}"
    rows = f"{ME_ROWS},{MH}"
    act = 2 * MS * MH
    attn_f: list[Item] = [
        _me_v("RmsNorm", 2 * act, sh, sh),
        _me_mm("qkv", MS, MH, 3 * MH),
        _me_fa(False),
        _me_mm("attn_out", MS, MH, MH),
        _me_v("Add", 3 * act, f"{sh};{sh}", sh),
        _me_v("RmsNorm", 2 * act, sh, sh),
    ]
    attn_b: list[Item] = [
        _me_v("RmsNormGrad", 3 * act, f"{sh};{sh}", sh),
        _me_mm("attn_out_dx", MS, MH, MH),
        _me_mm("attn_out_dw", MH, MS, MH),
        _me_fa(True),
        _me_mm("qkv_dx", MS, 3 * MH, MH),
        _me_mm("qkv_dw", 3 * MH, MS, MH),
        _me_v("RmsNormGrad", 3 * act, f"{sh};{sh}", sh),
    ]
    router = _me_mm("router", MS, MH, ME_EXPERTS)
    gate = _me_v(
        "MoeGatingTopKSoftmax", 2 * MS * ME_EXPERTS * 2, f"{MS},{ME_EXPERTS}", f"{MS},{ME_TOPK}"
    )
    rbytes = 2 * ME_ROWS * MH
    permute = _me_v("MoeTokenPermute", act + rbytes, f"{sh};{MS},{ME_TOPK}", rows)
    unpermute = _me_v("MoeTokenUnpermute", act + rbytes, f"{rows};{ME_ROWS};{MS},{ME_TOPK}", sh)
    unpermute_g = _me_v("MoeTokenUnpermuteGrad", act + rbytes, f"{sh};{rows};{ME_ROWS}", rows)
    permute_g = _me_v("MoeTokenPermuteGrad", act + rbytes, f"{rows};{ME_ROWS}", sh)
    swi = 2 * ME_ROWS * 3 * ME_FFN
    experts_f: list[Item] = [
        _me_gmm("expert_up", MH, 2 * ME_FFN, local),
        _me_v("SwiGlu", swi, f"{ME_ROWS},{2 * ME_FFN}", f"{ME_ROWS},{ME_FFN}"),
        _me_gmm("expert_down", ME_FFN, MH, local),
    ]
    experts_b: list[Item] = [
        _me_gmm("expert_down_dx", MH, ME_FFN, local),
        _me_gmm("expert_down_dw", ME_FFN, MH, local),
        _me_v("SwiGluGrad", 1.6 * swi, f"{ME_ROWS},{ME_FFN}", f"{ME_ROWS},{2 * ME_FFN}"),
        _me_gmm("expert_up_dx", 2 * ME_FFN, MH, local),
        _me_gmm("expert_up_dw", 2 * ME_FFN, MH, local),
    ]
    opt_shape = f"{MH},{MH};{MH}"
    opt = [
        _k(
            f"aclnn{op}V2_{op}V2_{op}",
            op,
            "AI_VECTOR_CORE",
            opt_shape,
            opt_shape,
            dur,
            f"aclnn{op}",
            bd=48,
        )
        for op, dur in (
            ("ForeachMulScalar", 420.0),
            ("ForeachAddList", 860.0),
            ("ForeachAddList", 850.0),
        )
    ]
    prog: list[Item] = []
    for _ in range(LAYERS):
        prog += attn_f
        prog += [router, gate, permute, Collective(A2A, "ep", ME_A2A_MB, tag="dispatch")]
        prog += experts_f
        prog += [
            Collective(A2A, "ep", ME_A2A_MB, tag="combine"),
            unpermute,
            _me_v("Add", 3 * act, f"{sh};{sh}", sh),
        ]
    for li in range(LAYERS):
        prog += [unpermute_g, Collective(A2A, "ep", ME_A2A_MB, tag="combine_grad")]
        prog += experts_b
        prog += [Collective(A2A, "ep", ME_A2A_MB, tag="dispatch_grad"), permute_g]
        prog += attn_b
        last = li == LAYERS - 1
        prog.append(Collective("hcom_allReduce_", "edp", 24.0, overlap=0 if last else 4))
        prog.append(Collective("hcom_allReduce_", "world", 32.0, overlap=0 if last else 3))
    prog += opt[:2]
    prog += [
        Collective("hcom_allReduce_", "world", 2.0),
        Collective("hcom_allGather_", "world", 1.0),
    ]
    prog.append(opt[2])
    return prog


def me_kinds(ranks: int, ep: int = ME_EP) -> dict[str, GroupKind]:
    """World, ep groups of ``ep`` consecutive ranks, expert-data-parallel groups across them."""
    kinds = group_kinds(ranks, 1)
    kinds["ep"] = make_group_kind(
        "ep", "ep", [list(range(i, i + ep)) for i in range(0, ranks, ep)], ranks, BASE_COMM_US, 4
    )
    kinds["edp"] = make_group_kind(
        "edp", "edp", [list(range(i, ranks, ep)) for i in range(ep)], ranks, BASE_COMM_US, 5
    )
    return kinds


def _me_cross(ranks: int, ep: int = ME_EP) -> list[int]:
    """Ranks of the ep groups whose members sit on more than one node."""
    out: list[int] = []
    for i in range(0, ranks, ep):
        g = list(range(i, i + ep))
        if len({r // RANKS_PER_NODE for r in g}) > 1:
            out += g
    return out


def me_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(
        expert_model_parallel_size=ME_EP,
        num_experts=ME_EXPERTS,
        moe_router_topk=ME_TOPK,
        moe_token_dispatcher_type="alltoall",
        moe_grouped_gemm=True,
        hidden_size=MH,
        moe_ffn_hidden_size=ME_FFN,
        seq_length=MS,
    )
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(me_program(), me_kinds(ranks), default_perturb(ranks), info)}


def me_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the ep groups across two nodes run their AllToAllv partly over RDMA; others wait."""
    cl: Cluster = m[""]["cluster"]
    bad = _me_cross(ranks)
    good = [r for r in range(ranks) if r not in bad]
    a2a = _op_us(cl, lambda c: c.op_type == A2A)
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    per_op_bad: list[float] = []
    per_op_good: list[float] = []
    rdma_mb: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if op.item.op_type != A2A:
                continue
            d = (op.end - op.start) / 1000
            per_op_bad.extend(float(d[r]) for r in bad)
            per_op_good.extend(float(d[r]) for r in good)
            for r in bad:
                rdma_mb.append(float(op.link_mb[r][op.kind.transport[r] == 1].sum()))
    healthy = dataclasses.replace(cl, perturb=default_perturb(ranks))
    fixed = _resimulate(healthy, me_program(ME_EXPERTS // ME_EP_FIX), me_kinds(ranks, ME_EP_FIX))
    base = _sim_breakdown(fixed)
    a, b, save = _saving(step, base["step_us"])
    groups = [list(range(i, i + ME_EP)) for i in range(0, ranks, ME_EP)]
    cross = [g for g in groups if g[0] in bad]
    nums = {
        "ep_size": ME_EP,
        "num_experts": ME_EXPERTS,
        "ep_groups": groups,
        "cross_node_ep_groups": cross,
        "culprit_ranks": bad,
        "alltoallv_per_step": sum(
            1 for it in cl.program if isinstance(it, Collective) and it.op_type == A2A
        ),
        "alltoallv_mb": ME_A2A_MB,
        "alltoallv_us_median_cross_node": _r(float(np.median(per_op_bad))),
        "alltoallv_us_median_in_node": _r(float(np.median(per_op_good))),
        "alltoallv_ratio": round(float(np.median(per_op_bad) / np.median(per_op_good)), 3),
        "alltoallv_rdma_mb_median": _r(float(np.median(rdma_mb))),
        "culprit_alltoallv_us_per_step": _r(float(a2a[bad].mean())),
        "others_alltoallv_us_per_step": _r(float(a2a[good].mean())),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "median_step_us": _r(a),
        "median_step_us_ep_in_node": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        bad, "communication", ["moe-expert-imbalance", "slow-link-rdma"], "bandwidth_gbps", nums
    )
    vic = victims_by_wait(wait, bad)
    rc = root_cause(
        "slow_group",
        "communication",
        "group",
        ranks=bad,
        victims=vic,
        not_slow=not_slow_sample(ranks, bad, vic),
        metrics={
            "alltoallv_ratio": nums["alltoallv_ratio"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_ranks=bad,
        first_rank=bad[0],
        last_rank=bad[-1],
        ep_groups=cross,
        nodes_spanned=[[r // RANKS_PER_NODE for r in (g[0], g[-1])] for g in cross],
        collective=A2A,
        group="ep",
        transport="RDMA",
        file="communication.json (hcom_alltoallv_ of ranks 6-17: RDMA Transit Size / Time besides "
        "HCCS, ~1.4x the Elapse Time of ranks 0-5 / 18-23 whose all-to-alls are HCCS only) and "
        "profiler_metadata.json (parallel_group_info: ep groups [6..11] and [12..17] spanning two "
        "nodes; expert_model_parallel_size 6, num_experts 60), communication.json of the others "
        "(Wait Time in the hcom_allReduce_)",
        links_normal=True,
        devices_normal=True,
        host_normal=True,
        every_step=True,
        cause=f"--expert-model-parallel-size {ME_EP} on 8-card nodes (60 experts do not split over "
        f"8): the ep groups are consecutive blocks of {ME_EP} ranks, so groups 6-11 and 12-17 "
        "straddle two nodes and their token AllToAllv (dispatch / combine) runs partly over RDMA "
        "instead of HCCS only, ~1.4x as long; those ranks fall behind and the others wait for "
        "them in the gradient all-reduces",
        fix=f"choose an expert-parallel size that divides the 8 cards of a node (EP {ME_EP_FIX}: "
        "15 experts per rank, or EP 2 / 8 with a matching expert count) so every ep group stays on "
        "HCCS inside one node; check parallel_group_info for the ep groups' nodes",
    )


# ---------------------------------------------------------------- cpu-powersave-node
PS_NODE = 1
PS_SCALE = 0.1  # a ~1B model, short sequences: kernels of ~3-230 µs
PS_HOST_US = 50.0  # the host's time per operator at full CPU clock (aten + dispatch + launch)
PS_API_US = 11.0  # default_perturb's launch call
PS_FACTOR = 2.4  # 2.6 GHz performance vs the powersave governor's lowest clock (~1.1 GHz)
PS_JITTER = 0.04


def _ps_ranks(ranks: int) -> list[int]:
    node = min(PS_NODE, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def ps_program() -> list[Item]:
    """transformer() at a small scale (short kernels)."""
    return transformer(layers=LAYERS, scale=PS_SCALE, grad_mb=12.0, grad_overlap=3)


def ps_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = ps_program()
    ks = _kernels(prog)
    durs = [k.dur_us for k in ks]
    p = default_perturb(ranks)
    bad = _ps_ranks(ranks)
    p.api_us[bad] = round(PS_API_US * PS_FACTOR, 1)
    p.host_bound[bad] = True
    rng = np.random.default_rng(seed + 2304)
    for r in bad:
        f = 1.0 + PS_JITTER * np.clip(rng.standard_normal(len(ks)), -2, 2)
        idle = _host_bound_idle(durs, PS_HOST_US * PS_FACTOR * f)
        p.kernel_stalls[r] = {j: v for j, v in enumerate(idle) if v > 0}
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def ps_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1's host calls ~2.4x slower, steadily; its devices idle; node 0 waits."""
    cl: Cluster = m[""]["cluster"]
    bad = _ps_ranks(ranks)
    good = [r for r in range(ranks) if r not in bad]
    api = np.stack([st.k_api_dur / 1000 for st in cl.steps], axis=2)  # [ranks, K, steps]
    wait = coll_wait_us(m)
    free = col(m, "free_us")
    step = col(m, "step_us")
    idle = _idle_between_us(cl)
    kdur = np.stack([st.k_dur / 1000 for st in cl.steps], axis=2)
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "culprit_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "culprit_launch_api_us_median": _med(api[bad]),
        "others_launch_api_us_median": _med(api[good]),
        "launch_api_ratio": round(float(np.median(api[bad]) / np.median(api[good])), 2),
        "culprit_launch_api_us_p99": _r(float(np.percentile(api[bad], 99))),
        "culprit_free_us_per_step": _r(float(free[bad].mean())),
        "others_free_us_per_step": _r(float(free[good].mean())),
        "culprit_free_cv_across_steps": round(
            float(np.median(free[bad].std(axis=1) / free[bad].mean(axis=1))), 3
        ),
        "culprit_idle_between_kernels_us_per_step": _r(float(idle[bad].mean())),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "kernel_us_ratio_culprit_vs_others": round(
            float(kdur[bad].sum(axis=1).mean() / kdur[good].sum(axis=1).mean()), 3
        ),
        "median_step_us": _r(a),
        "median_step_us_performance_governor": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(bad, "scheduling", ["host-dispatch-bound", "cpu-core-binding"], "free_us", nums)
    vic = victims_by_wait(wait, bad)
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
            "culprit_launch_api_us_median": nums["culprit_launch_api_us_median"],
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
        lane="CANN thread of trace_view.json (AscendCL@aclnn* / AscendCL@Hccl* launch calls, "
        "HostToDevice flows)",
        launch_api_us=nums["culprit_launch_api_us_median"],
        launch_api_us_others=nums["others_launch_api_us_median"],
        file="trace_view.json of ranks 8-15 (every AscendCL@ launch call ~2.4x as long as on node "
        "0, uniformly, each launch right before its kernel, the device idle between kernels) and "
        "step_trace_time.csv (Free of ranks 8-15, steady across steps; Wait in the collectives of "
        "ranks 0-7)",
        host_bound=True,
        uniform_slowdown=True,
        jitter=False,
        kernels_normal=True,
        links_normal=True,
        every_step=True,
        cause=f"node {bad[0] // RANKS_PER_NODE}'s CPU frequency governor is on powersave: its "
        "cores run at their lowest clock, so every host call of ranks "
        f"{bad[0]}-{bad[-1]} (launch calls, aten dispatch, Python) takes ~{PS_FACTOR:g}x as long, "
        "steadily; the host no longer keeps ahead of the device, the devices idle between kernels "
        "and node 0 waits for node 1 in every collective",
        fix="set the CPU frequency governor of that node to performance (cpupower frequency-set -g "
        "performance, or the BIOS power policy to Performance; check "
        "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor on every node), then re-run",
    )


# ---------------------------------------------------------------- registry
DEV23_SCENARIOS = (
    ScenarioSpec(
        "hooks-on-every-module",
        "forward + full backward hooks on every nn.Module (a module tracer left on): ~150-250 µs of "
        "Python hook code before every launch on every rank, the device idles between kernels "
        "(Free); launch calls and kernels normal; job-level",
        16,
        4,
        hk_plans,
        hk_answer,
    ),
    ScenarioSpec(
        "grad-accum-unfused",
        "4 micro-batches without --gradient-accumulation-fusion: a separate fp32 Add "
        "(aclnnInplaceAdd, DT_FLOAT;DT_BF16) of every weight's gradient into main_grad per "
        "micro-batch, 96 a step on the weights' shapes; every rank alike; job-level",
        16,
        4,
        ga_plans,
        ga_answer,
    ),
    ScenarioSpec(
        "moe-ep-cross-node",
        "60-expert MoE on 24 ranks with expert-parallel size 6: ep groups 6-11 and 12-17 straddle "
        "two nodes, their token hcom_alltoallv_ partly over RDMA, ~1.4x as long; the other ranks "
        "wait in the gradient all-reduces",
        24,
        4,
        me_plans,
        me_answer,
        min_ranks=24,
        max_ranks=24,
        rank_multiple=24,
    ),
    ScenarioSpec(
        "cpu-powersave-node",
        "node 1's CPU governor on powersave: every host call of ranks 8-15 ~2.4x longer (launch "
        "calls ~27 µs vs ~11 µs), steadily; host-bound, its devices idle between kernels; node 0 "
        "waits in every collective; kernels and links normal",
        16,
        6,
        ps_plans,
        ps_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
)
DEV23_KINDS = tuple(s.name for s in DEV23_SCENARIOS)


__all__ = ["DEV23_KINDS", "DEV23_SCENARIOS"]
