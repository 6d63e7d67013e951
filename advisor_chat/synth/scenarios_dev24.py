"""Twenty-second set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev24.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the ``Cast`` rows of kernel_details.csv /
op_statistic.csv on the weights' shapes, the ``AscendCL@aclrtMallocHost`` / ``aclrtFreeHost`` calls
of the CANN lane of trace_view.json at every step start, the device-to-host ``MEMCPY_ASYNC`` tasks
and ``aten::histc`` host operators of trace_view.json in two steps only, and the per-step rows of
one rank's step_trace_time.csv with the other ranks' Wait Time in communication.json):

- ``autocast-fp32-weights``: the model's weights are kept in fp32 and the forward runs under
  ``torch.autocast(dtype=torch.bfloat16)``: every forward MatMul's weight is cast to bf16 first (a
  ``Cast`` DT_FLOAT -> DT_BF16 on the weight's shape) and every weight gradient back to fp32 (a
  ``Cast`` DT_BF16 -> DT_FLOAT after the weight-gradient MatMul), in each of the 2 micro-batches of
  a step: 64 memory-bound casts a step, every rank alike. Job-level, links normal.
- ``pinned-alloc-every-step``: the input pipeline pins a new host buffer for every batch
  (``batch.pin_memory()`` of a fresh 96 MB tensor) and drops the previous one: at the start of every
  step the host spends ~6 ms in ``aclrtFreeHost`` and ~25 ms in ``aclrtMallocHost`` (page-locking)
  before it can queue the batch's host-to-device copy; the device idles meanwhile (Free at the step
  start), every rank alike. Job-level, links normal.
- ``param-histogram-steps``: every 6 steps the training loop logs a histogram of every parameter
  (``torch.histc(p.detach().cpu())``): at the start of steps 12 and 18 the host copies all 24
  parameters (2.1 GB, bf16) to itself one by one and bins them on the CPU, ~0.5 s during which the
  device idles on every rank alike. Culprit: those steps (a job-level cause scoped to them).
- ``loader-worker-respawn``: on rank 11 a data-loader worker process was killed (host OOM) and the
  loader re-created its workers: that rank's next batches come late, its device idles at the start
  of steps 13-15 (~1.4 s, then ~0.26 s and ~0.11 s as the new workers catch up) and every other rank
  waits for it in the first gradient all-reduce of those steps. Culprit: rank 11 in those steps.
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
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    step_ids,
)
from advisor_chat.synth.writer import d2h_pulls_span_us, host_calls_span_us

LAYERS = 4
HBM_BPS = 1.3e12  # effective HBM bandwidth of a memory-bound vector kernel (bytes/s)
GAP_US = 14.0  # the device gap between kernels of default_perturb


def _kernels(prog: list[Item]) -> list[Kernel]:
    return [it for it in prog if isinstance(it, Kernel)]


def _numel(shape: str) -> int:
    return int(np.prod([int(x) for x in shape.split(",")]))


def _first_idle_us(cl: Cluster) -> np.ndarray:
    """[ranks, steps] device idle (µs) from the step start to the first kernel."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for r in range(cl.ranks):
            out[r, si] = (int(st.k_start[r, 0]) - st.bounds(r)[0]) / 1000
    return out


# ---------------------------------------------------------------- autocast-fp32-weights
AC_MICRO = 2  # micro-batches per step (gradient accumulation)
AC_TAG_FWD = "weight_cast"
AC_TAG_BWD = "grad_cast"
AC_BYTES_PER_EL = 6  # read 4 (fp32) + write 2 (bf16), or the other way round


def _ac_cast(shape: str, fwd: bool) -> Kernel:
    """Cast of a weight (fp32 -> bf16) or of its gradient (bf16 -> fp32), aclnnCast."""
    dur = round(_numel(shape) * AC_BYTES_PER_EL / HBM_BPS * 1e6 + 3.0, 1)
    src, dst = ("DT_FLOAT", "DT_BF16") if fwd else ("DT_BF16", "DT_FLOAT")
    return dataclasses.replace(
        _k(
            "aclnnCast_Cast_Cast",
            "Cast",
            "AI_VECTOR_CORE",
            shape,
            shape,
            dur,
            "aclnnCast",
            AC_TAG_FWD if fwd else AC_TAG_BWD,
            bd=40,
            dt=dst,
        ),
        in_dtypes=src,
    )


def ac_program(casts: bool = True) -> list[Item]:
    """AC_MICRO x (forward + backward) of transformer(); gradient all-reduces in the last one.

    ``casts``: a Cast of the weight before every forward MatMul and of the weight gradient after
    every weight-gradient MatMul (fp32 weights under autocast).
    """
    base = transformer(layers=LAYERS)
    first_bwd = next(
        j for j, it in enumerate(base) if isinstance(it, Kernel) and it.tag == "mlp_down_dx"
    )
    opt = next(
        j
        for j, it in enumerate(base)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    fwd = base[:first_bwd]
    bwd = base[first_bwd:opt]
    prog: list[Item] = []
    for mb in range(AC_MICRO):
        last = mb == AC_MICRO - 1
        for it in fwd:
            if casts and isinstance(it, Kernel) and it.op_type == "MatMulV2":
                prog.append(_ac_cast(it.in_shapes.split(";")[1], True))
            prog.append(it)
        for it in bwd:
            if isinstance(it, Collective):
                if last:
                    prog.append(it)
                continue
            prog.append(it)
            if casts and it.op_type == "MatMulV2" and it.tag.endswith("_dw"):
                prog.append(_ac_cast(it.out_shapes, False))
    return prog + base[opt:]


def ac_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(micro_batch_size=1, global_batch_size=AC_MICRO * ranks)
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(ac_program(), group_kinds(ranks, 1), default_perturb(ranks), info)}


def _is_cast(k: Kernel) -> bool:
    return k.tag in (AC_TAG_FWD, AC_TAG_BWD)


def ac_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: a Cast per weight and micro-batch forward, one per weight gradient backward."""
    cl: Cluster = m[""]["cluster"]
    cast = _kernel_us(cl, _is_cast)
    cast_fwd = _kernel_us(cl, lambda k: k.tag == AC_TAG_FWD)
    cast_bwd = _kernel_us(cl, lambda k: k.tag == AC_TAG_BWD)
    mm = _kernel_us(cl, lambda k: k.op_type == "MatMulV2")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    casts = [k for k in cl.kernels if _is_cast(k)]
    n_fwd = sum(1 for k in casts if k.tag == AC_TAG_FWD)
    big = max(casts, key=lambda k: k.dur_us)
    base = _baseline(cl, ac_program(casts=False))
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "micro_batches_per_step": AC_MICRO,
        "casts_per_step": len(casts),
        "weight_casts_per_step": n_fwd,
        "grad_casts_per_step": len(casts) - n_fwd,
        "casts_per_micro_batch": len(casts) // AC_MICRO,
        "weights_cast_per_micro_batch": n_fwd // AC_MICRO,
        "largest_cast_shape": big.in_shapes,
        "largest_cast_us": _r(big.dur_us),
        "cast_us_per_step": _med(cast),
        "weight_cast_us_per_step": _med(cast_fwd),
        "grad_cast_us_per_step": _med(cast_bwd),
        "cast_share_of_step": _share(cast, step),
        "matmul_us_per_step": _med(mm),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_bf16_weights": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "compute", ["fp32-loss-full-vocab"], "computing_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={
            "casts_per_step": nums["casts_per_step"],
            "cast_us_per_step": nums["cast_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operator="Cast",
        api="aclnnCast",
        dtypes_forward="DT_FLOAT -> DT_BF16",
        dtypes_backward="DT_BF16 -> DT_FLOAT",
        shapes=sorted({k.in_shapes for k in casts}),
        largest_shape=big.in_shapes,
        per_step=len(casts),
        position="right before every forward MatMulV2 (on its weight's shape, the MatMul's second "
        "input) and right after every weight-gradient MatMulV2, in each of the 2 micro-batches",
        file="kernel_details.csv (Cast rows: Input Data Types DT_FLOAT / Output DT_BF16 on the weights' "
        "shapes, e.g. 32768,4096, before each MatMulV2; DT_BF16 -> DT_FLOAT after each weight-gradient "
        "MatMulV2) and op_statistic.csv (Cast count 64 per step, among the top operator types)",
        matmul_dtypes="DT_BF16",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause="the model's weights are kept in fp32 and the forward runs under torch.autocast(bf16): "
        "autocast casts every MatMul weight to bf16 in every micro-batch (its cast cache lives only "
        "for one autocast region) and the backward casts every weight gradient back to fp32, "
        f"{len(casts)} memory-bound Casts over the weights' shapes per step on every rank alike",
        fix="keep the model weights in bf16 and the fp32 master copy in the optimizer (Megatron / "
        "MindSpeed --bf16, which keeps fp32 main params and main_grad in the (distributed) optimizer, "
        "or model.to(torch.bfloat16) with an fp32-master optimizer) instead of fp32 weights under "
        "autocast; at least run all micro-batches in one autocast region so each weight is cast once "
        "per step",
    )


# ---------------------------------------------------------------- pinned-alloc-every-step
PA_BATCH_MB = 96.0  # the batch tensor pinned anew every step (decimal MB)
PA_BYTES = int(PA_BATCH_MB * 1e6)
PA_MALLOC_US = 25_000.0  # aclrtMallocHost of the new buffer: page-locking ~96 MB
PA_FILL_US = 3_800.0  # _pin_memory copies the batch into the new buffer
PA_FREE_US = 6_000.0  # aclrtFreeHost of the previous step's buffer (unpinning)
PA_H2D_GBPS = 24.0  # pinned host-to-device copy
PA_JITTER = 0.04
PA_FRAMES = ("aten::pin_memory", "aten::_pin_memory")


def _pa_copy_us() -> float:
    return round(PA_BYTES / (PA_H2D_GBPS * 1e9) * 1e6, 1)


def _pa_calls(f: float) -> list[HostCall]:
    return [
        HostCall("aclrtFreeHost", round(PA_FREE_US * f, 1)),
        HostCall("aclrtMallocHost", round(PA_MALLOC_US * f, 1), PA_FRAMES, PA_FILL_US),
    ]


def pa_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 2402)
    copy = [("host to device", PA_BYTES, _pa_copy_us())]
    for r in range(ranks):
        calls = _pa_calls(1.0 + PA_JITTER * float(np.clip(rng.standard_normal(), -2, 2)))
        p.host_calls[r] = {0: calls}
        p.kernel_stalls[r] = {0: round(host_calls_span_us(calls) + 40.0, 1)}
        p.dev_copies[r] = {0: list(copy)}
    return {"": Plan(transformer(layers=LAYERS), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def pa_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the host pins a new buffer at every step start; the device idles meanwhile."""
    cl: Cluster = m[""]["cluster"]
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    prep = col(m, "preparing_us")
    idle0 = _first_idle_us(cl)
    calls = [c for r in range(ranks) for c in cl.perturb.host_calls[r][0]]
    malloc = [c.us for c in calls if c.api == "aclrtMallocHost"]
    freeh = [c.us for c in calls if c.api == "aclrtFreeHost"]
    fixed = dataclasses.replace(default_perturb(ranks), dev_copies=dict(cl.perturb.dev_copies))
    base = _sim_breakdown(_resimulate(dataclasses.replace(cl, perturb=fixed), cl.program))
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "pinned_buffer_mb": PA_BATCH_MB,
        "malloc_host_us_median": _r(float(np.median(malloc))),
        "free_host_us_median": _r(float(np.median(freeh))),
        "pin_memory_us_median": _r(float(np.median(malloc)) + PA_FILL_US),
        "host_calls_per_step": 2,
        "h2d_copy_us": _pa_copy_us(),
        "idle_before_first_kernel_us_median": _med(idle0),
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "median_preparing_us_per_step": _med(prep.mean(axis=1)),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_reused_buffer": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "scheduling", ["dataloader-stall", "host-dispatch-bound"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_idle",
        "scheduling",
        metrics={
            "median_free_share": nums["median_free_share"],
            "malloc_host_us_median": nums["malloc_host_us_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        calls=["aclrtFreeHost", "aclrtMallocHost"],
        frames=list(PA_FRAMES),
        buffer_mb=PA_BATCH_MB,
        lane="CANN thread of trace_view.json (AscendCL@aclrtMallocHost inside aten::pin_memory > "
        "aten::_pin_memory on the Python thread, AscendCL@aclrtFreeHost before it)",
        position="at the start of every step, before the batch's aclrtMemcpyAsync (host to device "
        "MEMCPY_ASYNC) and the first launch",
        file="trace_view.json (CANN lane: aclrtFreeHost ~6 ms + aclrtMallocHost ~25 ms at every step "
        "start on every rank; the device idle until the batch copy) and step_trace_time.csv (Free / "
        "Preparing of every rank, every step alike)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        kernels_normal=True,
        same_every_step=True,
        cause=f"the input pipeline pins a new {PA_BATCH_MB:.0f} MB host buffer for every batch "
        "(batch.pin_memory() on a fresh tensor, the previous buffer dropped): at every step start the "
        "host spends ~6 ms in aclrtFreeHost and ~25 ms page-locking the new buffer in aclrtMallocHost "
        "before it can queue the host-to-device copy, and the device idles meanwhile on every rank",
        fix="allocate the pinned buffer once and reuse it (copy each batch into a persistent "
        "pin_memory buffer, or let the DataLoader pin in its pin-memory thread with pin_memory=True "
        "so the host caching allocator reuses blocks), and copy with non_blocking=True / prefetch the "
        "next batch so the copy overlaps the step",
    )


# ---------------------------------------------------------------- param-histogram-steps
PH_INTERVAL = 6  # histogram logging every 6 steps
PH_D2H_GBPS = 25.0  # device-to-host copy
PH_HIST_EL_PER_S = 2.5e9  # torch.histc on the host (elements / s)
PH_FRAMES = ("aten::histc",)


def _ph_params() -> list[tuple[str, str]]:
    """(name, shape) of every parameter of the 4-layer model, in named_parameters() order."""
    f = 4 * H
    out: list[tuple[str, str]] = []
    for li in range(LAYERS):
        pre = f"layers.{li}."
        out += [
            (pre + "input_layernorm.weight", f"{H}"),
            (pre + "self_attention.query_key_value.weight", f"{3 * H},{H}"),
            (pre + "self_attention.dense.weight", f"{H},{H}"),
            (pre + "post_attention_layernorm.weight", f"{H}"),
            (pre + "mlp.dense_h_to_4h.weight", f"{2 * f},{H}"),
            (pre + "mlp.dense_4h_to_h.weight", f"{H},{f}"),
        ]
    return out


def _ph_pulls() -> list[D2HPull]:
    out = []
    for _name, shape in _ph_params():
        n = _numel(shape)
        out.append(
            D2HPull(
                shape,
                "c10::BFloat16",
                2 * n,
                round(2 * n / (PH_D2H_GBPS * 1e9) * 1e6 + 4.0, 1),
                PH_FRAMES,
                round(n / PH_HIST_EL_PER_S * 1e6 + 20.0, 1),
            )
        )
    return out


def _ph_steps(steps: int) -> list[int]:
    """Step indices of the capture with histogram logging (step id multiple of the interval).

    A capture too short to hold such a step gets its last step, so that every size shows the fault.
    """
    from advisor_chat.synth import FIRST_STEP

    on = [si for si in range(steps) if (FIRST_STEP + si) % PH_INTERVAL == 0]
    return on or [steps - 1]


def ph_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    pulls = _ph_pulls()
    span = d2h_pulls_span_us(pulls)
    rng = np.random.default_rng(seed + 2403)
    for si in _ph_steps(steps):
        for r in range(ranks):
            p.step_d2h_pulls.setdefault(si, {})[r] = {0: pulls}
            extra = 40.0 + 30.0 * float(rng.uniform())
            p.step_host_gaps.setdefault(si, {})[r] = {0: round(span + extra, 1)}
    return {"": Plan(transformer(layers=LAYERS), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def ph_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every parameter copied to the host and binned in those steps; the device idles."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    on = _ph_steps(steps)
    off = [si for si in range(steps) if si not in on]
    step = col(m, "step_us")
    free = col(m, "free_us")
    wait = coll_wait_us(m)
    pulls = _ph_pulls()
    base = _baseline(cl)
    extra = np.median(step, axis=0) - np.median(base["step_us"], axis=0)
    mean_a = float(np.median(step.mean(axis=1)))
    mean_b = float(np.median(base["step_us"].mean(axis=1)))
    n_el = sum(_numel(s) for _n, s in _ph_params())
    nums = {
        "log_interval": PH_INTERVAL,
        "histogram_steps": [ids[si] for si in on],
        "first_histogram_step": ids[on[0]],
        "last_histogram_step": ids[on[-1]],
        "clean_steps": [ids[si] for si in off],
        "parameters_copied_per_histogram_step": len(pulls),
        "parameter_elements": n_el,
        "d2h_mb_per_histogram_step": _r(sum(p.nbytes for p in pulls) / 1e6),
        "d2h_copy_us_per_histogram_step": _r(sum(p.copy_us for p in pulls)),
        "histc_us_per_histogram_step": _r(sum(p.host_us for p in pulls)),
        "largest_parameter_shape": max(_ph_params(), key=lambda x: _numel(x[1]))[1],
        "step_us_histogram_steps_median": _med(step[:, on]),
        "step_us_clean_steps_median": _med(step[:, off]) if off else 0.0,
        "free_us_histogram_steps_median": _med(free[:, on]),
        "free_us_clean_steps_median": _med(free[:, off]) if off else 0.0,
        "wait_us_histogram_steps_median": _med(wait[:, on]),
        "wait_us_clean_steps_median": _med(wait[:, off]) if off else 0.0,
        "extra_us_per_histogram_step": _med(extra[on]),
        "histogram_step_ratio": round(float(np.median(step[:, on]) / np.median(step[:, off])), 2)
        if off
        else 0.0,
        "mean_step_us": _r(mean_a),
        "mean_step_us_no_histograms": _r(mean_b),
        "saving_us_per_step_average": _r(mean_a - mean_b),
        "saving_share_of_mean_step": round((mean_a - mean_b) / mean_a, 4),
    }
    key = _key([], "scheduling", ["checkpoint-save-stall", "dataloader-stall"], "free_us", nums)
    # (a job idling while its host computes, after a synchronize: a host stall of the job, as
    # isin-cpu-fallback's key says it)
    rc = root_cause(
        "host_stall",
        "scheduling",
        "job",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        steps=[ids[si] for si in on],
        metrics={
            "extra_us_per_histogram_step": nums["extra_us_per_histogram_step"],
            "histogram_steps": nums["histogram_steps"],
            "saving_us_per_step_average": nums["saving_us_per_step_average"],
        },
    )
    return _with_evidence(
        key,
        rc,
        histogram_steps=[ids[si] for si in on],
        log_interval=PH_INTERVAL,
        parameters=len(pulls),
        d2h_mb=nums["d2h_mb_per_histogram_step"],
        host_operator="aten::histc",
        copy_frames=["aten::to", "aten::_to_copy", "aten::copy_"],
        task="MEMCPY_ASYNC (operation device to host, size(B) = each parameter's bytes)",
        file="trace_view.json (in steps 12 and 18 only: 24 device-to-host MEMCPY_ASYNC tasks on the "
        "compute stream, one per parameter, each under aten::to > aten::copy_ with "
        "aclrtMemcpyAsync + aclrtSynchronizeStream, followed by an aten::histc host operator; the "
        "device idle before the first forward kernel) and step_trace_time.csv (Free of those steps on "
        "every rank)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        kernels_normal=True,
        every_step=False,
        cause=f"every {PH_INTERVAL} steps the training loop logs a histogram of every parameter "
        "(torch.histc on p.detach().cpu()): at the start of those steps the host copies all "
        f"{len(pulls)} parameters ({nums['d2h_mb_per_histogram_step']:.0f} MB) to itself one by one, "
        "each a blocking copy, and bins them on the CPU while the device idles, on every rank alike",
        fix="log parameter histograms far less often (or not at all in performance runs), only on "
        "rank 0 and for a few tensors, and compute the statistics on the device (torch.histc / "
        "min / max / norm on the NPU, copying back only the small result) or asynchronously from a "
        "checkpoint",
    )


# ---------------------------------------------------------------- loader-worker-respawn
LW_RANK = 11
LW_FIRST = 3  # step index of the first late batch (step 13)
LW_STALL_US = (1_420_000.0, 262_000.0, 108_000.0)  # respawn + dataset init, then catching up


def _lw_rank(ranks: int) -> int:
    return LW_RANK if ranks > LW_RANK else ranks - 1


def _lw_steps(steps: int) -> list[int]:
    first = min(LW_FIRST, max(steps - len(LW_STALL_US), 0))
    return [si for si in range(first, first + len(LW_STALL_US)) if si < steps]


def lw_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    r = _lw_rank(ranks)
    rng = np.random.default_rng(seed + 2404)
    for q, si in enumerate(_lw_steps(steps)):
        f = 1.0 + 0.03 * float(np.clip(rng.standard_normal(), -2, 2))
        p.step_host_gaps[si] = {r: {0: round(LW_STALL_US[q] * f, 1)}}
    return {"": Plan(transformer(layers=LAYERS), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def lw_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one rank idles at the start of a few consecutive steps; the others wait for it."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    bad = _lw_rank(ranks)
    on = _lw_steps(steps)
    off = [si for si in range(steps) if si not in on]
    good = [q for q in range(ranks) if q != bad]
    free = col(m, "free_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    idle0 = _first_idle_us(cl)
    base = _baseline(cl)
    extra = np.median(step, axis=0) - np.median(base["step_us"], axis=0)
    mean_a = float(np.median(step.mean(axis=1)))
    mean_b = float(np.median(base["step_us"].mean(axis=1)))
    nums = {
        "culprit_rank": bad,
        "culprit_node": bad // RANKS_PER_NODE,
        "late_steps": [ids[si] for si in on],
        "first_late_step": ids[on[0]],
        "last_late_step": ids[on[-1]],
        "clean_steps": [ids[si] for si in off],
        "culprit_idle_before_first_kernel_us": [_r(idle0[bad, si]) for si in on],
        "culprit_idle_us_total": _r(float(sum(idle0[bad, si] for si in on))),
        "culprit_free_us_per_late_step": [_r(free[bad, si]) for si in on],
        "victim_wait_us_per_late_step": [_r(float(wait[good, si].mean())) for si in on],
        "victim_wait_us_first_late_step": _r(float(wait[good, on[0]].mean())),
        "culprit_wait_us_late_steps_median": _med(wait[bad, on]),
        "wait_us_clean_steps_median": _med(wait[:, off]) if off else 0.0,
        "step_us_late_steps": [_r(float(np.median(step[:, si]))) for si in on],
        "step_us_clean_steps_median": _med(step[:, off]) if off else 0.0,
        "extra_us_per_late_step": [_r(extra[si]) for si in on],
        "extra_us_total": _r(float(sum(extra[si] for si in on))),
        "mean_step_us": _r(mean_a),
        "mean_step_us_no_respawn": _r(mean_b),
        "saving_us_per_step_average": _r(mean_a - mean_b),
    }
    key = _key([bad], "scheduling", ["dataloader-stall"], "free_us", nums)
    rc = _rank_rc(
        m,
        ranks,
        bad,
        "host_stall",
        "scheduling",
        cols=on,
        steps=[ids[si] for si in on],
        metrics={
            "culprit_free_us_per_late_step": nums["culprit_free_us_per_late_step"],
            "extra_us_total": nums["extra_us_total"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_rank=bad,
        late_steps=[ids[si] for si in on],
        first_late_step=ids[on[0]],
        consecutive=True,
        decreasing=True,
        position="from the start of the step to the first launch of that rank (no host call, no "
        "kernel: the training process waits for its next batch)",
        file="step_trace_time.csv of rank 11 (Free / Preparing of steps 13-15: ~1.4 s, ~0.26 s, "
        "~0.11 s; the other steps normal) and communication.json of the other ranks (Wait Time of "
        "the first gradient hcom_allReduce_ in those steps)",
        host_calls_normal=True,
        kernels_normal=True,
        links_normal=True,
        every_step=False,
        cause=f"on rank {bad} a data-loader worker process was killed (host out of memory) and the "
        "loader re-created its workers: the rank's next batches came late, so its device idled at "
        "the start of three consecutive steps (longest in the first, while the new workers started "
        "and re-opened the dataset, then shorter as they caught up) and every other rank waited for "
        "it in the first gradient all-reduce",
        fix=f"find why the worker died on rank {bad}'s node (dmesg / OOM killer, host memory of the "
        "workers: lower num_workers or prefetch_factor, memory-map the dataset instead of copying "
        "it into every worker), keep persistent_workers=True, and watch worker restarts in the logs",
    )


# ---------------------------------------------------------------- registry
DEV24_SCENARIOS = (
    ScenarioSpec(
        "autocast-fp32-weights",
        "fp32 weights under torch.autocast(bf16), 2 micro-batches a step: a Cast (DT_FLOAT -> DT_BF16) "
        "of every MatMul weight in every forward and of every weight gradient back to fp32, 64 Casts "
        "a step on the weights' shapes, every rank alike; job-level",
        16,
        4,
        ac_plans,
        ac_answer,
    ),
    ScenarioSpec(
        "pinned-alloc-every-step",
        "a new 96 MB pinned host buffer for every batch: aclrtFreeHost (~6 ms) + aclrtMallocHost "
        "(~25 ms) at every step start before the batch's host-to-device copy; the device idles "
        "(Free), every rank alike; job-level",
        16,
        4,
        pa_plans,
        pa_answer,
    ),
    ScenarioSpec(
        "param-histogram-steps",
        "a histogram of every parameter every 6 steps: in steps 12 and 18 the host copies all 24 "
        "parameters (2.1 GB) to itself and runs aten::histc, ~0.5 s of device idle on every rank "
        "alike; links normal",
        16,
        10,
        ph_plans,
        ph_answer,
    ),
    ScenarioSpec(
        "loader-worker-respawn",
        "rank 11's data-loader workers re-created after one was killed: its device idles at the start "
        "of steps 13-15 (~1.4 s, ~0.26 s, ~0.11 s), every other rank waits in the first gradient "
        "all-reduce of those steps",
        16,
        10,
        lw_plans,
        lw_answer,
    ),
)
DEV24_KINDS = tuple(s.name for s in DEV24_SCENARIOS)


__all__ = ["DEV24_KINDS", "DEV24_SCENARIOS"]
