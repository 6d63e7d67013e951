"""Twenty-third set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev25.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the Python lane of trace_view.json
(``python_function`` frames of DDP's ``_post_forward`` at the forward / backward boundary, with_stack)
with the tiny INT32 ``hcom_allReduce_`` of communication.json; the "Python GC" lane of
trace_view.json with the per-step rows of step_trace_time.csv; the ep-group ``hcom_allGather_`` /
``hcom_reduceScatter_`` records of communication.json with profiler_metadata.json; and the
``AI_CPU`` rows of one rank's kernel_details.csv against its peers'):

- ``ddp-find-unused-params``: PyTorch DDP wrapped with ``find_unused_parameters=True`` (the Hugging
  Face Trainer's default without gradient checkpointing) although every parameter is used: at the
  end of every forward DDP's ``_post_forward`` runs ``Reducer.prepare_for_backward``, a host-side
  traversal of the whole autograd graph (~14 ms), before the backward can be launched, so the device
  idles at the forward / backward boundary on every rank; and after the last gradient bucket DDP
  all-reduces its ``local_used_map`` (one INT32 per parameter, 108 bytes), an extra tiny
  ``hcom_allReduce_`` per step. Job-level (every rank alike), links normal.
- ``gc-collect-in-loop``: the training loop calls ``gc.collect()`` every 5 steps (at the top of the
  loop): a full collection of a large Python heap takes ~240 ms on every rank, in the same steps
  (10 and 15 of the capture); the device idles at the start of those steps (Free / Preparing) and
  the GC detection of the profiler records a GC interval of that length on every rank. Culprit:
  those steps (a job-level cause scoped to them); links, kernels and data loading normal.
- ``moe-allgather-dispatcher``: a 32-expert MoE (top-2, an MoE layer every other layer) on 16
  ranks with expert-parallel size 8 inside each node and ``--moe-token-dispatcher-type
  allgather``: in every MoE layer every rank
  all-gathers the hidden states of all 8 ranks of its ep group (134 MB, ``hcom_allGather_``) plus
  the routing indices / probabilities, and reduce-scatters the 134 MB expert output back
  (``hcom_reduceScatter_``), and the mirror pair in the backward: 4x the volume of the all-to-all
  dispatch of the routed tokens only, on the critical path (nothing overlaps it), every rank alike.
  Job-level, links normal.
- ``aicpu-busy-card``: the AI CPU of rank 6's device is shared with another workload (a second
  process on that card): that card's ``AI_CPU`` kernels (``NonZero``, ``IndexPutV2`` int64,
  ``Unique``; 9 a step) take ~4-9x as long as on the peers, its AI Core / AI Vector kernels are
  normal; the other ranks wait for it in the next collective. Culprit: rank 6 (its device's AI CPU).
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
    step_ids,
    victims_by_wait,
)

LAYERS = 4
LEAD_US = 1800.0  # how far the host runs ahead of the device (default_perturb)
HBM_BPS = 1.3e12  # effective HBM bandwidth of a memory-bound vector kernel (bytes/s)
MM_FLOPS = 180e12
FA_FLOPS = 150e12


def _kernels(prog: list[Item]) -> list[Kernel]:
    return [it for it in prog if isinstance(it, Kernel)]


def _op_us(cl: Cluster, pick: Any) -> np.ndarray:
    """[ranks, steps] summed duration (µs) of the collectives ``pick(collective)`` accepts."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if pick(op.item):
                out[:, si] += (op.end - op.start) / 1000
    return out


def _op_durs(cl: Cluster, pick: Any) -> list[float]:
    """Durations (µs) of every instance, on every rank, of the collectives ``pick`` accepts."""
    out: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if pick(op.item):
                out.extend(((op.end - op.start) / 1000).tolist())
    return out


def _gap_before(cl: Cluster, j: int) -> np.ndarray:
    """[ranks, steps] device idle (µs) between kernel ``j - 1``'s end and kernel ``j``'s start."""
    return np.stack(
        [(st.k_start[:, j] - st.k_start[:, j - 1] - st.k_dur[:, j - 1]) / 1000 for st in cl.steps],
        axis=1,
    )


# ---------------------------------------------------------------- ddp-find-unused-params
DDP_TRAVERSAL_US = 14_000.0  # Reducer.prepare_for_backward over the whole autograd graph
DDP_JITTER = 0.02
DDP_PARAMS = 6 * LAYERS + 3  # parameters DDP tracks (4 weights + 2 norms a layer, embedding ...)
DDP_USED_MAP_BYTES = 4 * DDP_PARAMS  # local_used_map: one int32 per parameter
DDP_TAG = "local_used_map"
DDP_LATENCY_US = 55.0  # a tiny all-reduce over 2 nodes: handshakes only
DDP_FRAMES = (
    "torch/nn/parallel/distributed.py(1519): forward",
    "torch/nn/parallel/distributed.py(1474): _post_forward",
    "<built-in method prepare_for_backward of PyCapsule object at 0xfffd6c0b3f90>",
)


def ddp_program(find_unused: bool = True) -> list[Item]:
    """transformer(); with ``find_unused`` DDP's local_used_map all-reduce after the last bucket."""
    prog = transformer(layers=LAYERS)
    if not find_unused:
        return prog
    last_grad = max(
        j
        for j, it in enumerate(prog)
        if isinstance(it, Collective) and it.op_type == "hcom_allReduce_" and it.size_mb > 50
    )
    extra = Collective(
        "hcom_allReduce_",
        "world",
        DDP_USED_MAP_BYTES / 1e6,
        dtype="INT32",
        tag=DDP_TAG,
        latency_us=DDP_LATENCY_US,
    )
    return [*prog[: last_grad + 1], extra, *prog[last_grad + 1 :]]


def _ddp_first_bwd(prog: list[Item]) -> int:
    return next(j for j, k in enumerate(_kernels(prog)) if k.tag == "mlp_down_dx")


def ddp_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = ddp_program()
    j = _ddp_first_bwd(prog)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 2501)
    f = 1.0 + DDP_JITTER * np.clip(rng.standard_normal(ranks), -2, 2)
    for r in range(ranks):
        host = DDP_TRAVERSAL_US * float(f[r])
        # the host stops launching for the traversal; the device drains its queue, then idles
        p.kernel_stalls[r] = {j: round(host - LEAD_US, 1)}
        p.launch_py_frames[r] = {j: (DDP_FRAMES, round(host, 1))}
    info = dataclasses.replace(_info(CANN8, 1, ranks), with_stack=True)
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def ddp_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: a host traversal at the forward / backward boundary and a tiny all-reduce."""
    cl: Cluster = m[""]["cluster"]
    j = _ddp_first_bwd(cl.program)
    idle = _gap_before(cl, j)
    frames = [cl.perturb.launch_py_frames[r][j][1] for r in range(ranks)]
    used = _op_durs(cl, lambda c: c.tag == DDP_TAG)
    grads = _op_durs(cl, lambda c: c.op_type == "hcom_allReduce_" and c.size_mb > 50)
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    base = _baseline(cl, ddp_program(find_unused=False))
    a, b, save = _saving(step, base["step_us"])
    n_ar = sum(
        1 for it in cl.program if isinstance(it, Collective) and it.op_type == "hcom_allReduce_"
    )
    nums = {
        "traversal_us_median": _r(float(np.median(frames))),
        "device_idle_before_backward_us_median": _med(idle),
        "device_idle_before_backward_share_of_step": _share(idle, step),
        "first_backward_kernel_index": j,
        "used_map_allreduce_bytes": DDP_USED_MAP_BYTES,
        "used_map_allreduce_us_median": _r(float(np.median(used))),
        "used_map_allreduces_per_step": 1,
        "gradient_allreduce_us_median": _r(float(np.median(grads))),
        "allreduces_per_step": n_ar,
        "parameters_tracked": DDP_PARAMS,
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_no_find_unused": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "scheduling", ["host-dispatch-bound", "small-packet-transfers"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "device_idle_before_backward_us_median": nums["device_idle_before_backward_us_median"],
            "traversal_us_median": nums["traversal_us_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        frames=list(DDP_FRAMES),
        frame="prepare_for_backward",
        position="after the last forward kernel, before the first backward kernel (the MatMulV2 "
        "of mlp_down_dx), every step",
        extra_collective="hcom_allReduce_",
        extra_collective_dtype="INT32",
        extra_collective_bytes=DDP_USED_MAP_BYTES,
        extra_collective_position="right after the last gradient all-reduce of the backward",
        file="trace_view.json (Python lane, with_stack: torch/nn/parallel/distributed.py _post_forward "
        "> prepare_for_backward of ~14 ms between the last forward launch and the first backward "
        "launch; the device idle meanwhile) and communication.json (an extra 108-byte INT32 "
        "hcom_allReduce_ per step after the gradient all-reduces); step_trace_time.csv (Free on "
        "every rank)",
        launch_calls_normal=True,
        kernels_normal=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause="PyTorch DDP runs with find_unused_parameters=True although every parameter gets a "
        "gradient: at the end of every forward DDP's _post_forward calls "
        "Reducer.prepare_for_backward, which traverses the whole autograd graph on the host "
        f"(~{DDP_TRAVERSAL_US / 1000:.0f} ms) before the backward can be launched, so the device "
        "idles at the forward / backward boundary on every rank; after the last bucket it also "
        "all-reduces the local_used_map (one int32 per parameter), a tiny extra all-reduce a step",
        fix="construct DDP with find_unused_parameters=False (Hugging Face Trainer: "
        "ddp_find_unused_parameters=False; it defaults to True without gradient checkpointing), or "
        "static_graph=True when the same parameters are used every step; if some parameters are "
        "really unused, freeze them (requires_grad=False) or remove them from the model",
    )


# ---------------------------------------------------------------- gc-collect-in-loop
GC_INTERVAL = 5  # gc.collect() when step % 5 == 0
GC_US = 240_000.0  # a full collection of a large Python heap
GC_JITTER = 0.03
GC_THRESHOLD_MS = 10.0  # experimental_config gc_detect_threshold


def _gc_steps(steps: int) -> list[int]:
    """Step indices of the capture where gc.collect() runs (step id multiple of the interval).

    A capture too short to hold such a step gets its last step as the collection step, so that
    every size shows the fault.
    """
    from advisor_chat.synth import FIRST_STEP

    on = [si for si in range(steps) if (FIRST_STEP + si) % GC_INTERVAL == 0]
    return on or [steps - 1]


def gc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 2502)
    for si in _gc_steps(steps):
        f = 1.0 + GC_JITTER * np.clip(rng.standard_normal(ranks), -2, 2)
        p.step_host_gaps[si] = {r: {0: round(GC_US * float(f[r]), 1)} for r in range(ranks)}
    p.gc_host_gaps = True
    info = dataclasses.replace(_info(CANN8, 1, ranks), gc_detect_threshold_ms=GC_THRESHOLD_MS)
    return {"": Plan(transformer(layers=LAYERS), group_kinds(ranks, 1), p, info)}


def gc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: a GC pause at the start of the collection steps on every rank; the rest clean."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    on = _gc_steps(steps)
    off = [si for si in range(steps) if si not in on]
    step = col(m, "step_us")
    free = col(m, "free_us")
    prep = col(m, "preparing_us")
    wait = coll_wait_us(m)
    pauses = [(b - a) / 1000 for si in on for _r_, a, b in cl.steps[si].gc]
    n_gc = [len(cl.steps[si].gc) for si in on]
    base = _baseline(cl)
    extra = np.median(step, axis=0) - np.median(base["step_us"], axis=0)
    mean_a = float(np.median(step.mean(axis=1)))
    mean_b = float(np.median(base["step_us"].mean(axis=1)))
    nums = {
        "gc_interval": GC_INTERVAL,
        "gc_steps": [ids[si] for si in on],
        "first_gc_step": ids[on[0]],
        "last_gc_step": ids[on[-1]],
        "other_steps": [ids[si] for si in off],
        "gc_events_per_gc_step": int(np.median(n_gc)),
        "gc_pause_us_median": _r(float(np.median(pauses))),
        "gc_pause_us_max": _r(float(np.max(pauses))),
        "step_us_gc_steps_median": _med(step[:, on]),
        "step_us_other_steps_median": _med(step[:, off]) if off else 0.0,
        "free_us_gc_steps_median": _med(free[:, on]),
        "free_us_other_steps_median": _med(free[:, off]) if off else 0.0,
        "preparing_us_gc_steps_median": _med(prep[:, on]),
        "wait_us_gc_steps_median": _med(wait[:, on]),
        "extra_us_per_gc_step": _med(extra[on]),
        "mean_step_us": _r(mean_a),
        "mean_step_us_no_gc": _r(mean_b),
        "saving_us_per_step_average": _r(mean_a - mean_b),
        "saving_share_of_mean_step": round((mean_a - mean_b) / mean_a, 4),
    }
    key = _key([], "scheduling", ["python-gc-pause"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        steps=[ids[si] for si in on],
        metrics={
            "gc_pause_us_median": nums["gc_pause_us_median"],
            "extra_us_per_gc_step": nums["extra_us_per_gc_step"],
            "saving_us_per_step_average": nums["saving_us_per_step_average"],
        },
    )
    return _with_evidence(
        key,
        rc,
        gc_steps=[ids[si] for si in on],
        gc_interval=GC_INTERVAL,
        lane="Python GC process of trace_view.json (cat GC events, one per rank in each collection "
        "step)",
        position="at the start of the step, before its first launch",
        gc_detection_on=True,
        gc_threshold_ms=GC_THRESHOLD_MS,
        file="trace_view.json (Python GC lane: a ~240 ms GC event at the start of steps 10 and 15 on "
        "every rank, no launches meanwhile) and step_trace_time.csv (Free / Preparing of those steps "
        "on every rank); profiler_info _gc_detect_threshold",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        kernels_normal=True,
        every_step=False,
        cause=f"the training loop calls gc.collect() every {GC_INTERVAL} steps: a full collection "
        f"of a large Python heap takes ~{GC_US / 1000:.0f} ms on every rank, at the start of the "
        "same steps, during which the host launches nothing and every device idles",
        fix="remove the explicit gc.collect() from the loop or make its interval much larger "
        "(Megatron --manual-gc-interval in the hundreds or more), and shrink what it has to scan: "
        "gc.freeze() after the model, optimizer and dataset are built (long-lived objects leave GC "
        "tracking), fewer Python objects per sample (keep the dataset in numpy arrays / memory-mapped "
        "files instead of lists of dicts)",
    )


# ---------------------------------------------------------------- moe-allgather-dispatcher
MO_EP = 8
MO_EXPERTS = 32
MO_TOPK = 2
MH = 2048  # hidden size
MS = 4096  # tokens per micro-batch and rank
MO_FFN = 2816  # expert FFN hidden size
MO_DENSE_FFN = 11264  # FFN hidden size of the dense layers
MO_LAYER_FREQ = 2  # an MoE layer every 2 layers
MO_ROWS = MS * MO_TOPK  # token rows a rank's experts get per layer (balanced)
MO_GLOBAL = MO_EP * MS  # token rows of the ep group (what the all-gather dispatcher gathers)
MO_AG_MB = round(MO_GLOBAL * MH * 2 / 1e6, 1)  # bf16 hidden states of the ep group
MO_A2A_MB = round(MO_ROWS * MH * 2 / 1e6, 1)  # bf16 routed tokens of one rank (all-to-all)
MO_IDX_MB = round(MO_GLOBAL * MO_TOPK * 8 / 1e6, 3)  # int64 top-k expert indices of the ep group
MO_PROB_MB = round(MO_GLOBAL * MO_TOPK * 4 / 1e6, 3)  # fp32 top-k probabilities of the ep group
AG, RS, A2A = "hcom_allGather_", "hcom_reduceScatter_", "hcom_alltoallv_"


def _mo_mm(tag: str, m: int, k: int, n: int) -> Kernel:
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


def _mo_v(op: str, nbytes: float, ins: str, outs: str, tag: str = "") -> Kernel:
    dur = round(nbytes / HBM_BPS * 1e6 + 4, 1)
    return _k(f"aclnn{op}_{op}_{op}", op, "AI_VECTOR_CORE", ins, outs, dur, f"aclnn{op}", tag, 40)


def _mo_gmm(tag: str, k: int, n: int) -> Kernel:
    local = MO_EXPERTS // MO_EP
    dur = round(2 * MO_ROWS * k * n / MM_FLOPS * 1e6 + 8, 1)
    return _k(
        "aclnnGroupedMatmulV4_GroupedMatmul_GroupedMatmul",
        "GroupedMatmul",
        "AI_CORE",
        f"{MO_ROWS},{k};{local},{k},{n};{local}",
        f"{MO_ROWS},{n}",
        dur,
        "aclnnGroupedMatmulV4",
        tag,
    )


def _mo_fa(grad: bool) -> Kernel:
    bsh = f"1,{MS},{MH}"
    op = "FlashAttentionScoreGrad" if grad else "FlashAttentionScore"
    n = 4 if grad else 3
    dur = round(2 * MS * MS * MH / FA_FLOPS * 1e6 * (2.1 if grad else 1.0) + 10, 1)
    return _k(f"aclnn{op}_{op}_{op}", op, "MIX_AIC", ";".join([bsh] * n), bsh, dur, f"aclnn{op}")


def _mo_is_moe(layer: int) -> bool:
    """MoE in every other layer (``--moe-layer-freq 2``: layers 1 and 3), dense MLP in the others."""
    return layer % MO_LAYER_FREQ == MO_LAYER_FREQ - 1


def mo_program(allgather: bool = True) -> list[Item]:
    """MoE step, 4 layers: attention + routed experts; the token dispatch by all-gather or all-to-all.

    ``allgather``: every rank gathers the ep group's hidden states (and top-k indices /
    probabilities), picks its experts' tokens, scatters the expert output into an ep-group-sized
    buffer and reduce-scatters it back (Megatron ``MoEAllGatherTokenDispatcher``); the backward
    mirrors it. Else the routed tokens go by AlltoAllv (``MoEAlltoAllTokenDispatcher``).
    """
    sh = f"{MS},{MH}"
    rows = f"{MO_ROWS},{MH}"
    glob = f"{MO_GLOBAL},{MH}"
    act = 2 * MS * MH
    rbytes = 2 * MO_ROWS * MH
    gbytes = 2 * MO_GLOBAL * MH
    attn_f: list[Item] = [
        _mo_v("RmsNorm", 2 * act, sh, sh),
        _mo_mm("qkv", MS, MH, 3 * MH),
        _mo_fa(False),
        _mo_mm("attn_out", MS, MH, MH),
        _mo_v("Add", 3 * act, f"{sh};{sh}", sh),
        _mo_v("RmsNorm", 2 * act, sh, sh),
    ]
    attn_b: list[Item] = [
        _mo_v("RmsNormGrad", 3 * act, f"{sh};{sh}", sh),
        _mo_mm("attn_out_dx", MS, MH, MH),
        _mo_mm("attn_out_dw", MH, MS, MH),
        _mo_fa(True),
        _mo_mm("qkv_dx", MS, 3 * MH, MH),
        _mo_mm("qkv_dw", 3 * MH, MS, MH),
        _mo_v("RmsNormGrad", 3 * act, f"{sh};{sh}", sh),
    ]
    router = _mo_mm("router", MS, MH, MO_EXPERTS)
    gate = _mo_v(
        "MoeGatingTopKSoftmax", 2 * MS * MO_EXPERTS * 2, f"{MS},{MO_EXPERTS}", f"{MS},{MO_TOPK}"
    )
    swi = 2 * MO_ROWS * 3 * MO_FFN
    experts_f: list[Item] = [
        _mo_gmm("expert_up", MH, 2 * MO_FFN),
        _mo_v("SwiGlu", swi, f"{MO_ROWS},{2 * MO_FFN}", f"{MO_ROWS},{MO_FFN}"),
        _mo_gmm("expert_down", MO_FFN, MH),
    ]
    experts_b: list[Item] = [
        _mo_gmm("expert_down_dx", MH, MO_FFN),
        _mo_gmm("expert_down_dw", MO_FFN, MH),
        _mo_v("SwiGluGrad", 1.6 * swi, f"{MO_ROWS},{MO_FFN}", f"{MO_ROWS},{2 * MO_FFN}"),
        _mo_gmm("expert_up_dx", 2 * MO_FFN, MH),
        _mo_gmm("expert_up_dw", 2 * MO_FFN, MH),
    ]
    if allgather:
        n_in = f"{MO_GLOBAL},{MO_TOPK}"
        disp_f: list[Item] = [
            Collective(AG, "ep", MO_AG_MB, tag="ag_hidden"),
            Collective(AG, "ep", MO_IDX_MB, dtype="INT64", tag="ag_indices"),
            Collective(AG, "ep", MO_PROB_MB, dtype="FP32", tag="ag_probs"),
            _mo_v("MoeTokenPermute", gbytes + rbytes, f"{glob};{n_in}", rows),
        ]
        comb_f: list[Item] = [
            _mo_v("MoeTokenUnpermute", rbytes + gbytes, f"{rows};{MO_ROWS};{n_in}", glob),
            Collective(RS, "ep", MO_AG_MB, tag="rs_output"),
        ]
        comb_b: list[Item] = [
            Collective(AG, "ep", MO_AG_MB, tag="ag_output_grad"),
            _mo_v("MoeTokenUnpermuteGrad", gbytes + rbytes, f"{glob};{rows};{MO_ROWS}", rows),
        ]
        disp_b: list[Item] = [
            _mo_v("MoeTokenPermuteGrad", rbytes + gbytes, f"{rows};{MO_ROWS}", glob),
            Collective(RS, "ep", MO_AG_MB, tag="rs_hidden_grad"),
        ]
    else:
        n_in = f"{MS},{MO_TOPK}"
        disp_f = [
            _mo_v("MoeTokenPermute", act + rbytes, f"{sh};{n_in}", rows),
            Collective(A2A, "ep", MO_A2A_MB, tag="dispatch"),
        ]
        comb_f = [
            Collective(A2A, "ep", MO_A2A_MB, tag="combine"),
            _mo_v("MoeTokenUnpermute", rbytes + act, f"{rows};{MO_ROWS};{n_in}", sh),
        ]
        comb_b = [
            _mo_v("MoeTokenUnpermuteGrad", act + rbytes, f"{sh};{rows};{MO_ROWS}", rows),
            Collective(A2A, "ep", MO_A2A_MB, tag="combine_grad"),
        ]
        disp_b = [
            Collective(A2A, "ep", MO_A2A_MB, tag="dispatch_grad"),
            _mo_v("MoeTokenPermuteGrad", rbytes + act, f"{rows};{MO_ROWS}", sh),
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
    dff = MO_DENSE_FFN
    dense_f: list[Item] = [
        _mo_mm("mlp_up", MS, MH, 2 * dff),
        _mo_v("SwiGlu", 2 * MS * 3 * dff, f"{MS},{2 * dff}", f"{MS},{dff}"),
        _mo_mm("mlp_down", MS, dff, MH),
    ]
    dense_b: list[Item] = [
        _mo_mm("mlp_down_dx", MS, MH, dff),
        _mo_mm("mlp_down_dw", MH, MS, dff),
        _mo_v("SwiGluGrad", 3.2 * MS * 3 * dff, f"{MS},{dff}", f"{MS},{2 * dff}"),
        _mo_mm("mlp_up_dx", MS, 2 * dff, MH),
        _mo_mm("mlp_up_dw", 2 * dff, MS, MH),
    ]
    prog: list[Item] = []
    for li in range(LAYERS):
        prog += attn_f
        if _mo_is_moe(li):
            prog += [router, gate]
            prog += disp_f + experts_f + comb_f
        else:
            prog += dense_f
        prog.append(_mo_v("Add", 3 * act, f"{sh};{sh}", sh))
    for li in reversed(range(LAYERS)):
        prog += comb_b + experts_b + disp_b if _mo_is_moe(li) else dense_b
        prog += attn_b
        last = li == 0
        prog.append(Collective("hcom_allReduce_", "edp", 24.0, overlap=0 if last else 4))
        prog.append(Collective("hcom_allReduce_", "world", 32.0, overlap=0 if last else 3))
    prog += opt[:2]
    prog += [
        Collective("hcom_allReduce_", "world", 2.0),
        Collective(AG, "world", 1.0),
    ]
    prog.append(opt[2])
    return prog


def mo_kinds(ranks: int) -> dict[str, GroupKind]:
    """World, ep groups of 8 consecutive ranks (one node each), expert-data-parallel across them."""
    kinds = group_kinds(ranks, 1)
    kinds["ep"] = make_group_kind(
        "ep",
        "ep",
        [list(range(i, i + MO_EP)) for i in range(0, ranks, MO_EP)],
        ranks,
        BASE_COMM_US,
        4,
    )
    kinds["edp"] = make_group_kind(
        "edp", "edp", [list(range(i, ranks, MO_EP)) for i in range(MO_EP)], ranks, BASE_COMM_US, 5
    )
    return kinds


def _is_dispatch(c: Collective) -> bool:
    return c.op_type in (AG, RS, A2A) and c.group == "ep"


def mo_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(
        expert_model_parallel_size=MO_EP,
        num_experts=MO_EXPERTS,
        moe_router_topk=MO_TOPK,
        moe_token_dispatcher_type="allgather",
        moe_grouped_gemm=True,
        hidden_size=MH,
        moe_ffn_hidden_size=MO_FFN,
        seq_length=MS,
    )
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(mo_program(), mo_kinds(ranks), default_perturb(ranks), info)}


def mo_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: ep-group all-gathers / reduce-scatters of the whole group's tokens, every rank."""
    cl: Cluster = m[""]["cluster"]
    big_ag = _op_durs(cl, lambda c: c.op_type == AG and c.group == "ep" and c.size_mb > 50)
    big_rs = _op_durs(cl, lambda c: c.op_type == RS and c.group == "ep")
    disp = _op_us(cl, _is_dispatch)
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    comp = col(m, "computing_us")
    healthy = dataclasses.replace(cl, perturb=default_perturb(ranks))
    fixed = _resimulate(healthy, mo_program(allgather=False))
    base = _sim_breakdown(fixed)
    a2a = _op_durs(fixed, lambda c: c.op_type == A2A)
    a2a_step = _op_us(fixed, _is_dispatch)
    a, b, save = _saving(step, base["step_us"])
    n_ag = sum(1 for it in cl.program if isinstance(it, Collective) and it.op_type == AG)
    nums = {
        "ep_size": MO_EP,
        "num_experts": MO_EXPERTS,
        "router_topk": MO_TOPK,
        "ep_groups": [list(range(i, i + MO_EP)) for i in range(0, ranks, MO_EP)],
        "hidden_allgather_mb": MO_AG_MB,
        "alltoall_mb_equivalent": MO_A2A_MB,
        "volume_ratio_allgather_vs_alltoall": round(MO_AG_MB / MO_A2A_MB, 2),
        "ep_allgathers_per_step": sum(
            1
            for it in cl.program
            if isinstance(it, Collective) and it.op_type == AG and it.group == "ep"
        ),
        "moe_layers": sum(1 for li in range(LAYERS) if _mo_is_moe(li)),
        "big_ep_allgathers_per_step": sum(
            1
            for it in cl.program
            if isinstance(it, Collective)
            and it.op_type == AG
            and it.group == "ep"
            and it.size_mb > 50
        ),
        "ep_reducescatters_per_step": sum(
            1 for it in cl.program if isinstance(it, Collective) and it.op_type == RS
        ),
        "allgathers_per_step": n_ag,
        "allgather_us_median": _r(float(np.median(big_ag))),
        "reducescatter_us_median": _r(float(np.median(big_rs))),
        "dispatch_comm_us_per_step": _med(disp.mean(axis=0)),
        "dispatch_comm_share_of_step": _share(disp, step),
        "alltoall_us_median_fixed": _r(float(np.median(a2a))),
        "dispatch_comm_us_per_step_fixed": _med(a2a_step.mean(axis=0)),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_alltoall": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        [],
        "communication",
        ["moe-expert-imbalance", "comm-not-overlapped"],
        "comm_not_overlapped_us",
        nums,
    )
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "dispatch_comm_us_per_step": nums["dispatch_comm_us_per_step"],
            "hidden_allgather_mb": MO_AG_MB,
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        collectives=[AG, RS],
        group="ep (8 ranks, one node each)",
        payload_mb=MO_AG_MB,
        gathered_shape=f"{MO_GLOBAL},{MH}",
        per_layer="forward: all-gather of the hidden states (+ top-k indices and probabilities), "
        "reduce-scatter of the expert output; backward: all-gather of the output gradient, "
        "reduce-scatter of the input gradient",
        no_alltoall=True,
        setting="profiler_metadata.json distributed_args: moe_token_dispatcher_type allgather, "
        f"expert_model_parallel_size {MO_EP}, num_experts {MO_EXPERTS}, moe_router_topk {MO_TOPK}",
        file="communication.json (per MoE layer hcom_allGather_ and hcom_reduceScatter_ of ~134 MB "
        "on the ep group, 4 + 4 a step, no hcom_alltoallv_; Transit Size) and trace_view.json (HCCL "
        "lane: nothing overlaps them); kernel_details.csv (MoeTokenPermute on the gathered "
        f"[{MO_GLOBAL},{MH}] rows)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause=f"the MoE token dispatcher is the all-gather one (moe_token_dispatcher_type "
        f"allgather) with expert-parallel size {MO_EP}: in every MoE layer each rank gathers the "
        f"hidden states of all {MO_EP} ranks of its ep group ({MO_AG_MB:.0f} MB) to pick its own "
        "experts' tokens and reduce-scatters an ep-group-sized output back, and the same pair runs "
        f"in the backward: {MO_AG_MB / MO_A2A_MB:.0f}x the volume of sending only the routed tokens "
        f"(top-{MO_TOPK}) by all-to-all, on the critical path of every rank",
        fix="switch to the all-to-all dispatcher (--moe-token-dispatcher-type alltoall, or "
        "alltoall_seq in MindSpeed), which sends each token only to the ranks of its top-k experts; "
        "with it, optionally overlap the dispatch with compute (--moe-alltoall-overlap-comm)",
    )


# ---------------------------------------------------------------- aicpu-busy-card
AB_RANK = 6
AB_SLOW = (4.0, 9.0)  # the busy card's AI CPU kernels take this many times as long (per launch)
AB_TAG = "aicpu"


def _aicpu(op: str, ins: str, in_dt: str, outs: str, out_dt: str, dur: float, api: str) -> Kernel:
    n = ins.count(";") + 1
    return Kernel(
        name=op,
        op_type=op,
        core="AI_CPU",
        in_shapes=ins,
        in_dtypes=in_dt,
        in_formats=";".join(["ND"] * n),
        out_shapes=outs,
        out_dtypes=out_dt,
        out_formats="ND",
        dur_us=dur,
        block_dim=1,
        api=api,
        tag=AB_TAG,
    )


def ab_program() -> list[Item]:
    """transformer(4 layers) with the model's AI CPU operators.

    ``Unique`` over the batch's token ids once a step, and in every layer's forward a ``NonZero``
    (document starts of the packed sample) and an int64 ``IndexPutV2`` (position ids reset there),
    right after the layer's first RmsNorm.
    """
    s = 4096
    uniq = _aicpu("Unique", f"{s}", "DT_INT64", f"{s}", "DT_INT64", 280.0, "aclnnUnique2")
    nz = _aicpu("NonZero", f"1,{s}", "DT_BOOL", f"{s},2", "DT_INT64", 160.0, "aclnnNonzero")
    ip = _aicpu(
        "IndexPutV2",
        f"1,{s};{s};{s}",
        "DT_INT64;DT_INT64;DT_INT64",
        f"1,{s}",
        "DT_INT64",
        220.0,
        "aclnnIndexPutImpl",
    )
    out: list[Item] = [uniq]
    seen = 0
    for it in transformer(layers=LAYERS):
        out.append(it)
        if isinstance(it, Kernel) and it.op_type == "RmsNorm":
            if seen % 2 == 0:
                out += [nz, ip]
            seen += 1
    return out


def _ab_rank(ranks: int) -> int:
    return AB_RANK % ranks


def ab_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = ab_program()
    ks = _kernels(prog)
    p = default_perturb(ranks)
    bad = _ab_rank(ranks)
    rng = np.random.default_rng(seed + 2504)
    for si in range(steps):
        for j, k in enumerate(ks):
            if k.core == "AI_CPU":
                f = float(rng.uniform(*AB_SLOW))
                p.kernel_swap[(si, bad, j)] = dataclasses.replace(k, dur_us=round(k.dur_us * f, 1))
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def ab_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one card's AI CPU kernels several times slower; its AI Core kernels normal."""
    cl: Cluster = m[""]["cluster"]
    bad = _ab_rank(ranks)
    good = [r for r in range(ranks) if r != bad]
    idx = [j for j, k in enumerate(cl.kernels) if k.core == "AI_CPU"]
    core = [j for j, k in enumerate(cl.kernels) if k.core != "AI_CPU"]
    kd = np.stack([st.k_dur / 1000 for st in cl.steps], axis=2)  # [ranks, K, steps]
    ratio = kd[bad][idx] / np.median(kd[good][:, idx], axis=0)  # per launch vs the peers' median
    aicpu = _kernel_us(cl, lambda k: k.core == "AI_CPU")
    aicore = _kernel_us(cl, lambda k: k.core != "AI_CPU")
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    vic = victims_by_wait(wait, [bad])
    per_op = {
        op: round(
            float(
                np.median(kd[bad][[j for j in idx if cl.kernels[j].op_type == op]])
                / np.median(kd[good][:, [j for j in idx if cl.kernels[j].op_type == op]])
            ),
            2,
        )
        for op in sorted({cl.kernels[j].op_type for j in idx})
    }
    nums = {
        "culprit_rank": bad,
        "aicpu_ops_per_step": len(idx),
        "aicpu_op_types": sorted({cl.kernels[j].op_type for j in idx}),
        "aicpu_ratio_median": _r(float(np.median(ratio))),
        "aicpu_ratio_min": _r(float(ratio.min())),
        "aicpu_ratio_max": _r(float(ratio.max())),
        "aicpu_ratio_by_op": per_op,
        "culprit_aicpu_us_per_step": _r(float(aicpu[bad].mean())),
        "others_aicpu_us_per_step": _r(float(aicpu[good].mean())),
        "aicore_ratio_culprit_vs_others": round(
            float(kd[bad][core].sum() / kd[good][:, core].sum(axis=(1, 2)).mean()), 3
        ),
        "culprit_aicore_us_per_step": _r(float(aicore[bad].mean())),
        "others_aicore_us_per_step": _r(float(aicore[good].mean())),
        "culprit_computing_us_per_step": _r(float(comp[bad].mean())),
        "others_computing_us_per_step": _r(float(comp[good].mean())),
        "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "median_step_us": _r(a),
        "median_step_us_idle_aicpu": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        [bad], "compute", ["aicpu-operators", "compute-straggler-hidden"], "computing_us", nums
    )
    rc = root_cause(
        "compute_straggler",
        "compute",
        "rank",
        ranks=[bad],
        victims=vic,
        not_slow=not_slow_sample(ranks, [bad], vic),
        metrics={
            "aicpu_ratio_median": nums["aicpu_ratio_median"],
            "culprit_aicpu_us_per_step": nums["culprit_aicpu_us_per_step"],
            "others_aicpu_us_per_step": nums["others_aicpu_us_per_step"],
            "culprit_wait_us_per_step": nums["culprit_wait_us_per_step"],
            "victim_wait_us_per_step": nums["victim_wait_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_rank=bad,
        accelerator_core="AI_CPU",
        operators=nums["aicpu_op_types"],
        aicpu_slower_x=nums["aicpu_ratio_median"],
        aicore_normal=True,
        same_ops_same_shapes=True,
        file="kernel_details.csv of rank 6 (AI_CPU rows NonZero / IndexPutV2 / Unique ~4-9x the "
        "Duration of the same rows on the other ranks, AI_CORE / AI_VECTOR_CORE rows equal) and "
        "op_statistic.csv (AI_CPU op types' Avg Time); communication.json of the others (Wait Time "
        "in the next collective)",
        host_normal=True,
        links_normal=True,
        every_step=True,
        cause=f"the AI CPU of rank {bad}'s device is shared with another workload (another process "
        "on that card): its AI CPU kernels queue behind that work and take ~4-9x as long as on the "
        "peers, while its AI Core kernels run normally; every other rank waits for it in the next "
        "collective",
        fix=f"find and stop (or move) the other workload on rank {bad}'s card (npu-smi info: "
        "processes and AI CPU usage of that chip; make device allocation exclusive, e.g. the "
        "scheduler / ASCEND_RT_VISIBLE_DEVICES), then re-check the AI_CPU durations; independently, "
        "replace the AI CPU operators with AI Core ones (int32 indices, masks instead of "
        "nonzero / unique) so the step no longer depends on the AI CPU",
    )


# ---------------------------------------------------------------- registry
DEV25_SCENARIOS = (
    ScenarioSpec(
        "ddp-find-unused-params",
        "PyTorch DDP with find_unused_parameters=True: a ~14 ms host traversal of the autograd "
        "graph (DDP _post_forward > prepare_for_backward, with_stack) between the forward and the "
        "backward, the device idle meanwhile, and a tiny INT32 all-reduce of the used-parameter map "
        "per step; every rank alike",
        16,
        4,
        ddp_plans,
        ddp_answer,
    ),
    ScenarioSpec(
        "gc-collect-in-loop",
        "gc.collect() every 5 steps in the training loop: a ~240 ms GC pause (Python GC lane) at "
        "the start of steps 10 and 15 on every rank, the devices idle meanwhile; other steps clean",
        16,
        10,
        gc_plans,
        gc_answer,
    ),
    ScenarioSpec(
        "moe-allgather-dispatcher",
        "32-expert top-2 MoE (every other layer), ep 8 per node, moe_token_dispatcher_type "
        "allgather: per MoE layer a "
        "134 MB hcom_allGather_ of the ep group's hidden states and a 134 MB hcom_reduceScatter_ "
        "back (and their mirror in the backward), not overlapped, every rank alike",
        16,
        4,
        mo_plans,
        mo_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "aicpu-busy-card",
        "rank 6's device AI CPU shared with another workload: its AI_CPU kernels (NonZero, "
        "IndexPutV2 int64, Unique) ~4-9x as long as on the peers, AI Core kernels normal; the other "
        "ranks wait in the next collective",
        16,
        6,
        ab_plans,
        ab_answer,
        min_ranks=8,
    ),
)
DEV25_KINDS = tuple(s.name for s in DEV25_SCENARIOS)


__all__ = ["DEV25_KINDS", "DEV25_SCENARIOS"]
