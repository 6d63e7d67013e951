"""Development set 36 of fault kinds (new kinds; written without reading the diagnosis).

Field problems of the input and preprocessing path of Ascend training jobs (the host side of the
data: dataloader workers, collate, host-to-device copies, the Python runtime of the training
process, and how the batch reaches every rank), planted as mechanisms of the simulation
(``advisor_chat.synth.model``, ``advisor_chat.synth.writer``) with an answer key derived from the
simulated timeline and the breakdown the writer measured (never from typed numbers). Every key
carries ``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the
files). Their question set is ``evals/datasets/generalization_dev36.yaml``: a development set for
finding weaknesses; the held-out kinds of ``generalization.yaml`` stay untouched. The "how much would
fixing it save" numbers come from re-simulating the same run (seed, steps) without the fault.

One kind reaches into the other area of the set's brief (process groups): the batch travels to the
ranks through default-group broadcasts. Layout kinds proper (a hybrid-sharded FSDP mesh with its
dimensions swapped, a tensor-parallel size that does not divide the server) were left out: the
first cannot be told apart in this simulation (a rank's HCCS links are timed one after the other,
so a 2-card shard group is not slower than an 8-card one), the second is
``moe-ep-cross-node`` for another group.

Kinds (the evidence of each is in a different place of the files: the host-to-device copies of
trace_view.json (``aten::to`` / ``AscendCL@aclrtMemcpyAsync`` calls and ``MEMCPY_ASYNC`` tasks at
the step start) with the ``ConcatD`` inputs of kernel_details.csv; the ``Python GC`` lane of
trace_view.json; the ``hcom_broadcast_`` records of the default group in communication.json at every
step start; and the ``python_function`` frames of the DataLoader on the Python lane of one node):

- ``h2d-per-sample-copies``: SFT on short samples packed to 4096 tokens per micro-batch; the
  collate returns the list of samples unchanged (``collate_fn=lambda b: b``) and the training loop
  moves every field of every sample to the device on its own (``{k: v.to(device,
  non_blocking=True)}`` per sample, 4 fields: input_ids, labels, position_ids, loss_mask) and packs
  them there with ``torch.cat``: ~110 samples a step, so ~450 host-to-device copies of a few hundred
  bytes, each an ``aten::to`` > ``aten::_to_copy`` > ``aten::copy_`` around an
  ``aclrtMemcpyAsync`` (~38 µs of host time each, the device copy itself ~2.4 µs), then 4 ``ConcatD``
  with one input per sample. The device idles ~17 ms at every step start on every rank while the
  host issues them (Free / Preparing). Job-level; kernels, links normal. Fix: collate into batched
  tensors in the DataLoader (pack on the CPU in the workers, pinned memory): 4 copies a step.
- ``auto-gc-jitter``: the training process keeps a growing heap of Python objects from the data
  path (per-sample metadata dicts of the batches, kept for statistics) and runs with Python's
  automatic garbage collector: a collection of 8-20 ms fires on each rank whenever its allocation
  count trips the threshold, at a different moment on every rank (~once a step per rank, anywhere in
  the step). Each pause stops that rank's launches; the device drains and idles, and every other rank
  waits for it in the next collective, so the job loses one pause per collective interval in which
  some rank collects. The GC detection of the profiler records every pause (``Python GC`` lane).
  Job-level (no rank, step or place stands out); kernels, launch calls, links normal. Fix: collect
  manually at the same point on every rank (Megatron ``--manual-gc --manual-gc-interval``; or
  ``gc.freeze()`` after start-up, ``gc.disable()`` and ``gc.collect()`` every N steps) and keep
  fewer Python objects.
- ``accelerate-dispatch-batches``: a Hugging Face Accelerate / Trainer job on a streaming
  (``IterableDataset``) corpus, 16 processes: Accelerate then defaults to ``dispatch_batches``, so
  process 0 alone reads the 16 micro-batches of every step from its loader and broadcasts them
  (``broadcast_object_list`` of the batch structure, then every tensor): 5 ``hcom_broadcast_`` on the
  default group at every step start. Rank 0 needs ~45-60 ms for 16 batches (its 2 workers cannot
  prefetch that many) and reaches the first broadcast that late; ranks 1-15 wait for it in that
  broadcast (Synchronization Time), every step. Culprit: rank 0 (its input pipeline); kernels and
  links normal. Fix: ``dispatch_batches=False`` (each process reads its own shard of the stream,
  ``split_batches`` unchanged) or a map-style dataset.
- ``slow-dataset-mount-node``: node 1 reads the training data from a network mount (its local copy
  of the dataset was never made; node 0 reads its NVMe cache): its DataLoader workers cannot keep
  up, the prefetch queue runs dry and the main process of every rank of node 1 waits for the next
  batch at every step start (``python_function`` frames ``DataLoader.__next__`` > ``_next_data`` >
  ``_get_data`` > ``_try_get_data`` > ``queue.get`` > ``threading.wait``, ~10-55 ms, a different
  length each step and rank); its devices idle meanwhile and node 0 waits for node 1 in the first
  gradient all-reduce. Culprit: node 1 (ranks 8-15, its input pipeline); kernels, launches, links
  normal. Fix: copy the dataset to node 1's local disk (as on node 0), more workers / a larger
  prefetch factor there.
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
    simulate,
)
from advisor_chat.synth.scenarios import (
    CANN8,
    T0_NS,
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
from advisor_chat.synth.scenarios_dev19 import _med, _saving
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    step_ids,
    victims_by_wait,
)
from advisor_chat.synth.writer import host_calls_span_us

LAYERS = 4
GAP_US = 14.0  # the device gap between kernels of default_perturb
LEAD_US = 1800.0  # how far default_perturb's host runs ahead of the device
TOKENS = 4096  # tokens of one packed micro-batch (transformer()'s sequence)


def _kernels(prog: list[Item]) -> list[Kernel]:
    return [it for it in prog if isinstance(it, Kernel)]


def _node_ranks(ranks: int, node: int) -> list[int]:
    node = min(node, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def _first_idle_us(cl: Cluster) -> np.ndarray:
    """[ranks, steps] device idle (µs) from the step start to the step's first device task."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for r in range(cl.ranks):
            first = int(st.k_start[r, 0])
            for op in st.ops:
                first = min(first, int(op.start[r]))
            out[r, si] = (first - st.bounds(r)[0]) / 1000
    return out


def _sim(prog: list[Item], kinds: Any, p: Perturb, ranks: int, steps: int, seed: int) -> Cluster:
    from advisor_chat.synth import FIRST_STEP

    return simulate(prog, kinds, p, ranks, steps, seed, FIRST_STEP, T0_NS)


def _add_user_metadata(info: Any, **kw: Any) -> None:
    assert info.user_metadata is not None
    info.user_metadata.update(kw)


# ---------------------------------------------------------------- h2d-per-sample-copies
PS_FIELDS = (  # (field, Input type of the aten::to, kernel dtype, bytes per token)
    ("input_ids", "long int", "DT_INT64", 8),
    ("labels", "long int", "DT_INT64", 8),
    ("position_ids", "long int", "DT_INT64", 8),
    ("loss_mask", "float", "DT_FLOAT", 4),
)
PS_LEN = (12, 60)  # sample lengths (tokens), uniform
PS_CALL_US = 21.0  # the aclrtMemcpyAsync call of one small non-blocking copy
PS_TAIL_US = 7.0  # host time in the aten::to frames after the call (tensor bookkeeping)
PS_JITTER = 0.08
PS_COPY_FIXED_US = 2.4  # one small host-to-device DMA (latency-bound)
PS_H2D_GBPS = 20.0
PS_FRAMES = ("aten::to", "aten::_to_copy", "aten::copy_")


def _ps_copy_us(nbytes: int) -> float:
    return round(PS_COPY_FIXED_US + nbytes / PS_H2D_GBPS / 1000, 2)


def _ps_lengths(rng: np.random.Generator) -> list[int]:
    """Sample lengths of one packed micro-batch: random short samples filling ``TOKENS``."""
    out: list[int] = []
    left = TOKENS
    while left > 0:
        n = int(rng.integers(PS_LEN[0], PS_LEN[1] + 1))
        if left - n < PS_LEN[0]:
            n = left
        out.append(n)
        left -= n
    return out


def _ps_concat(field: int, lengths: list[int]) -> Kernel:
    """``torch.cat`` of one field over the samples (one input per sample)."""
    _name, _t, dt, nb = PS_FIELDS[field]
    n = len(lengths)
    dur = round(6.0 + 0.32 * n + TOKENS * nb / 1.3e12 * 1e6, 1)
    return Kernel(
        name="aclnnCat_ConcatD_ConcatD",
        op_type="ConcatD",
        core="AI_VECTOR_CORE",
        in_shapes=";".join(str(x) for x in lengths),
        in_dtypes=";".join([dt] * n),
        in_formats=";".join(["ND"] * n),
        out_shapes=str(TOKENS),
        out_dtypes=dt,
        out_formats="ND",
        dur_us=dur,
        block_dim=40,
        api="aclnnCat",
        tag=f"pack_{PS_FIELDS[field][0]}",
    )


def _ps_calls(lengths: list[int], f: np.ndarray) -> list[HostCall]:
    """The per-sample copies, sample by sample, field by field; ``f``: call-time factors."""
    calls: list[HostCall] = []
    i = 0
    for n in lengths:
        for _name, typ, _dt, nb in PS_FIELDS:
            calls.append(
                HostCall(
                    "aclrtMemcpyAsync",
                    round(PS_CALL_US * float(f[i]), 1),
                    PS_FRAMES,
                    PS_TAIL_US,
                    f"{n};;",
                    f"{typ};ScalarType;bool;bool",
                    copy_bytes=n * nb,
                    copy_us=_ps_copy_us(n * nb),
                )
            )
            i += 1
    return calls


def ps_program(per_sample: bool = True) -> list[Item]:
    """The 4 packing ``ConcatD`` (per-sample copies) in front of the transformer step."""
    base = transformer(layers=LAYERS)
    if not per_sample:
        return base
    lengths = [32] * (TOKENS // 32)
    return [_ps_concat(i, lengths) for i in range(len(PS_FIELDS))] + base


def _ps_perturb(ranks: int, steps: int, seed: int, per_sample: bool) -> Perturb:
    """Per (step, rank): the batch's copies before the first kernel, the device idle meanwhile.

    ``per_sample=False`` is the fix: the DataLoader packs the batch, 4 copies of ``TOKENS`` each.
    """
    rng = np.random.default_rng(seed + 3601)
    p = default_perturb(ranks)
    for si in range(steps):
        for r in range(ranks):
            lengths = _ps_lengths(rng) if per_sample else [TOKENS]
            f = 1.0 + PS_JITTER * np.clip(rng.standard_normal(len(lengths) * 4), -2.5, 2.5)
            calls = _ps_calls(lengths, f)
            p.step_host_calls.setdefault(si, {}).setdefault(r, {})[0] = calls
            p.step_host_gaps.setdefault(si, {}).setdefault(r, {})[0] = round(
                host_calls_span_us(calls) + 30.0, 1
            )
            if per_sample:
                for i in range(len(PS_FIELDS)):
                    p.kernel_swap[(si, r, i)] = _ps_concat(i, lengths)
    return p


def ps_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    _add_user_metadata(
        info,
        data_config={
            "packing": True,
            "seq_length": TOKENS,
            "dataloader_num_workers": 2,
            "dataloader_pin_memory": True,
            "collate_fn": "<lambda>",
        },
    )
    p = _ps_perturb(ranks, steps, seed, per_sample=True)
    return {"": Plan(ps_program(), group_kinds(ranks, 1), p, info)}


def ps_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: hundreds of tiny host-to-device copies at every step start; the device idles."""
    cl: Cluster = m[""]["cluster"]
    shc = cl.perturb.step_host_calls
    calls = [shc[si][r][0] for si in range(steps) for r in range(ranks)]
    n_copies = [len(c) for c in calls]
    n_samples = [len(c) // len(PS_FIELDS) for c in calls]
    call_us = [c.us for cs in calls for c in cs]
    host_us = [host_calls_span_us(cs) / len(cs) for cs in calls]  # per copy, frames included
    nbytes = [c.copy_bytes for cs in calls for c in cs]
    task_us = [max(round(c.copy_us * 1000), 1000) / 1000 for cs in calls for c in cs]
    span = [host_calls_span_us(cs) for cs in calls]
    idle0 = _first_idle_us(cl)
    concat_us = [
        float(st.k_dur[r, i]) / 1000
        for st in cl.steps
        for r in range(ranks)
        for i in range(len(PS_FIELDS))
    ]
    free = col(m, "free_us")
    prep = col(m, "preparing_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    fixed_p = _ps_perturb(ranks, steps, cl.seed, per_sample=False)
    fixed = _resimulate(dataclasses.replace(cl, perturb=fixed_p), ps_program(per_sample=False))
    base = _sim_breakdown(fixed)
    a, b, save = _saving(step, base["step_us"])
    fixed_idle = _first_idle_us(fixed)
    nums: dict[str, Any] = {
        "fields_per_sample": len(PS_FIELDS),
        "samples_per_step_median": _med(n_samples),
        "samples_per_step_min": int(min(n_samples)),
        "samples_per_step_max": int(max(n_samples)),
        "h2d_copies_per_step_median": _med(n_copies),
        "h2d_copies_total": int(sum(n_copies)),
        "memcpy_call_us_median": _med(call_us),
        "host_us_per_copy_median": _med(host_us),
        "copy_bytes_median": _med(nbytes),
        "copy_bytes_max": int(max(nbytes)),
        "memcpy_task_us_median": _med(task_us),
        "host_copy_span_us_median": _med(span),
        "concat_kernels_per_step": len(PS_FIELDS),
        "concat_inputs_median": _med(n_samples),
        "concat_us_median": _med(concat_us),
        "idle_before_first_kernel_us_median": _med(idle0),
        "idle_before_first_kernel_us_median_fixed": _med(fixed_idle),
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "median_preparing_us_per_step": _med(prep.mean(axis=1)),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_batched_copies": _r(b),
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
            "h2d_copies_per_step_median": nums["h2d_copies_per_step_median"],
            "idle_before_first_kernel_us_median": nums["idle_before_first_kernel_us_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        host_api="AscendCL@aclrtMemcpyAsync",
        host_frames=list(PS_FRAMES),
        device_task="MEMCPY_ASYNC",
        operation="host to device",
        pack_op="ConcatD",
        fields=[f[0] for f in PS_FIELDS],
        position="every step start, before the first kernel (the 4 ConcatD that pack the batch)",
        file="trace_view.json of every rank (at every step start ~"
        f"{int(nums['h2d_copies_per_step_median'])} aten::to > aten::_to_copy > aten::copy_ "
        "frames, each around an AscendCL@aclrtMemcpyAsync of ~"
        f"{nums['memcpy_call_us_median']:.0f} µs, with Input Dims of one sample (12-60 tokens, "
        "long int / float), each with a MEMCPY_ASYNC host-to-device task of a few hundred bytes "
        "(~3 µs) on the compute stream; the device idle between them), kernel_details.csv (4 "
        "ConcatD a step with one input per sample, ~100-130 inputs, output 4096) and "
        "step_trace_time.csv (Free / Preparing at the step start on every rank alike)",
        all_ranks=True,
        every_step=True,
        late_rank=False,
        kernels_normal=True,
        links_normal=True,
        pageable=False,
        cause="the collate returns the list of samples as they are (collate_fn=lambda b: b) and "
        "the training loop moves every field of every sample to the NPU on its own "
        "(.to(device, non_blocking=True) per tensor) and packs them there with torch.cat: ~"
        f"{int(nums['h2d_copies_per_step_median'])} tiny host-to-device copies a step, each "
        f"costing ~{nums['host_us_per_copy_median']:.0f} µs of host time for a ~3 µs copy, so the "
        f"device idles ~{nums['idle_before_first_kernel_us_median'] / 1000:.0f} ms at every step "
        "start on every rank while the host issues them",
        fix="collate into batched tensors in the DataLoader (pack the samples on the CPU in "
        "collate_fn / the workers, pin_memory=True) and move the batch with one non-blocking copy "
        "per field (4 a step) — or prefetch it to the device on a side stream during the previous "
        "step",
    )


# ---------------------------------------------------------------- auto-gc-jitter
AG_SCALE = 1.5  # a larger model: ~115 ms steps
AG_GC_US = (
    10_000.0,
    22_000.0,
)  # one automatic collection (the host's ~1.8 ms lead covers the first part)
AG_RATE = 0.85  # chance that a rank collects in a given step (~once a step per rank)
AG_THRESHOLD_MS = 5.0  # experimental_config gc_detect_threshold
AG_MIN_KERNEL = 3  # not at the very start of a step


def ag_program() -> list[Item]:
    return transformer(layers=LAYERS, scale=AG_SCALE)


def _ag_eligible(prog: list[Item]) -> list[int]:
    """Kernel indices a pause may stop the launch of.

    Not the first kernels of the step, not one right after a collective, nor the first kernel
    after an overlapped one (its launch would fall among the collective's).
    """
    skip = set(range(AG_MIN_KERNEL))
    kj = 0
    for it in prog:
        if isinstance(it, Kernel):
            kj += 1
        else:
            skip.update({kj, kj + it.overlap})
    return [j for j in range(len(_kernels(prog))) if j not in skip]


def _ag_draw(
    ranks: int, steps: int, seed: int, prog: list[Item]
) -> list[tuple[int, int, int, float]]:
    """(step index, rank, kernel index, pause µs) of every automatic collection, seeded."""
    rng = np.random.default_rng(seed + 3602)
    ok = _ag_eligible(prog)
    out: list[tuple[int, int, int, float]] = []
    for si in range(steps):
        for r in range(ranks):
            if rng.random() < AG_RATE:
                j = int(rng.choice(ok))
                out.append((si, r, j, round(float(rng.uniform(*AG_GC_US)), 1)))
    return out


def _ag_apply(
    prog: list[Item], kinds: Any, ranks: int, steps: int, seed: int
) -> tuple[Perturb, list[tuple[int, int, int, float]]]:
    """Pauses as host gaps recorded as GC (``gc_host_gaps``), the device idle for the pause.

    A pause whose recorded interval would hold one of that rank's collective launches is dropped
    (the host launches nothing while it collects), re-simulating until none does.
    """
    events = _ag_draw(ranks, steps, seed, prog)
    while True:
        p = default_perturb(ranks)
        p.gc_host_gaps = True
        for si, r, j, us in events:
            gap = max(us - LEAD_US, 1000.0)  # the host's lead covers the first part
            p.step_host_gaps.setdefault(si, {}).setdefault(r, {})[j] = gap
        cl = _sim(prog, kinds, p, ranks, steps, seed)
        bad: set[tuple[int, int]] = set()
        for si, st in enumerate(cl.steps):
            for r, ga, gb in st.gc:
                if any(ga <= int(op.api_start[r]) <= gb for op in st.ops):
                    bad.add((si, r))
        if not bad:
            return p, events
        events = [e for e in events if (e[0], e[1]) not in bad]


def ag_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = ag_program()
    kinds = group_kinds(ranks, 1)
    p, _events = _ag_apply(prog, kinds, ranks, steps, seed)
    info = dataclasses.replace(_info(CANN8, 1, ranks), gc_detect_threshold_ms=AG_THRESHOLD_MS)
    _add_user_metadata(info, data_config={"dataloader_num_workers": 4, "keep_sample_meta": True})
    return {"": Plan(prog, kinds, p, info)}


def _last_arrivers(cl: Cluster, margin_ns: int = 100_000) -> list[tuple[int, int]]:
    """(step index, rank) of the rank arriving last (by > margin) at each collective."""
    out: list[tuple[int, int]] = []
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            order = np.argsort(op.start)
            if int(op.start[order[-1]] - op.start[order[-2]]) > margin_ns:
                out.append((si, int(order[-1])))
    return out


def ag_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: GC pauses on every rank at different moments; the others wait for each."""
    cl: Cluster = m[""]["cluster"]
    gcs = [(si, r, (b - a) / 1000) for si, st in enumerate(cl.steps) for r, a, b in st.gc]
    gc_us = [x[2] for x in gcs]
    per_rank = np.bincount([x[1] for x in gcs], minlength=ranks)
    per_step = np.bincount([x[0] for x in gcs], minlength=steps)
    gc_tot = np.zeros((ranks, steps))
    for si, r, us in gcs:
        gc_tot[r, si] += us
    ops_hit = sorted({cl.kernels[j].op_type for per in cl.perturb.step_host_gaps.values()
                      for at in per.values() for j in at})  # fmt: skip
    wait = coll_wait_us(m)
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    last = _last_arrivers(cl)
    last_ranks = np.bincount([r for _si, r in last], minlength=ranks)
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    api = np.stack([st.k_api_dur / 1000 for st in cl.steps], axis=2)
    nums: dict[str, Any] = {
        "gc_events_total": len(gcs),
        "gc_events_per_step_median": _med(per_step),
        "gc_events_per_rank_median": _med(per_rank),
        "ranks_with_gc": int((per_rank > 0).sum()),
        "gc_pause_us_median": _med(gc_us),
        "gc_pause_us_min": _r(min(gc_us)),
        "gc_pause_us_max": _r(max(gc_us)),
        "gc_us_per_rank_per_step_median": _med(gc_tot.mean(axis=1)),
        "gc_detect_threshold_ms": AG_THRESHOLD_MS,
        "distinct_operators_hit": len(ops_hit),
        "distinct_last_arrivers": int((last_ranks > 0).sum()),
        "max_share_last_arriver": round(float(last_ranks.max() / max(last_ranks.sum(), 1)), 3),
        "median_wait_us_per_step": _med(wait.mean(axis=1)),
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "free_us_per_step_min_rank": _r(float(free.mean(axis=1).min())),
        "free_us_per_step_max_rank": _r(float(free.mean(axis=1).max())),
        "launch_api_us_median": _med(api),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_no_auto_gc": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "scheduling", ["python-gc-pause"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "median_free_share": nums["median_free_share"],
            "gc_pause_us_median": nums["gc_pause_us_median"],
            "gc_events_per_step_median": nums["gc_events_per_step_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        lane="Python GC (trace_view.json, cat GC; GC detection on in profiler_info, threshold "
        f"{AG_THRESHOLD_MS:g} ms)",
        gc=True,
        all_ranks=True,
        random_positions=True,
        late_rank=False,
        file="trace_view.json of every rank (Python GC lane: "
        f"{nums['gc_pause_us_min'] / 1000:.0f}-{nums['gc_pause_us_max'] / 1000:.0f} ms GC events, "
        "about one a step on each rank, at a different moment on every rank and at no particular "
        "operator; no host call during them, the kernel launches resume right after, the device "
        "idle behind each), communication.json (Wait Time spread over every rank, a different rank "
        "last in each collective) and step_trace_time.csv (Free on every rank alike)",
        launch_calls_normal=True,
        kernels_normal=True,
        links_normal=True,
        cause="Python's automatic garbage collector runs in every training process: the data "
        "path keeps a growing heap of Python objects (per-sample metadata dicts kept for "
        "statistics), so a collection of "
        f"{nums['gc_pause_us_min'] / 1000:.0f}-{nums['gc_pause_us_max'] / 1000:.0f} ms fires on "
        "each rank whenever its allocation count trips the threshold — about once a step, at a "
        "different moment on every rank; each pause stops that rank's launches, its device drains "
        "and idles, and every other rank waits for it in the next collective, so the job loses a "
        "pause in almost every collective interval",
        fix="take the collector off the critical path and synchronise it: gc.freeze() after "
        "start-up, gc.disable() and gc.collect() every N steps at the same point on every rank "
        "(Megatron --manual-gc --manual-gc-interval N); keep fewer Python objects per sample "
        "(tensors / numpy arrays instead of dicts and lists, no per-sample metadata kept)",
    )


# ---------------------------------------------------------------- accelerate-dispatch-batches
AD_ROOT = 0
AD_LOAD_US = (44_000.0, 64_000.0)  # rank 0 reads 16 micro-batches from its own loader
AD_LATENCY_US = 25.0  # per-op cost of a tiny broadcast (handshakes, launch)
AD_FIELDS = ("input_ids", "attention_mask", "labels")
AD_TAG = "dispatch"
MIB = 2**20


def _ad_bcasts(ranks: int) -> list[Item]:
    """``broadcast_object_list`` (sizes, pickled structure) then one broadcast per tensor."""
    rows = ranks  # one micro-batch of 1 x TOKENS per process
    tensor_mib = rows * TOKENS * 8 / MIB
    out: list[Item] = [
        Collective("hcom_broadcast_", "world", 8 / MIB, latency_us=AD_LATENCY_US, tag=AD_TAG,
                   dtype="INT64"),
        Collective("hcom_broadcast_", "world", 1571 / MIB, latency_us=AD_LATENCY_US, tag=AD_TAG,
                   dtype="UINT8"),
    ]  # fmt: skip
    for _f in AD_FIELDS:
        out.append(
            Collective(
                "hcom_broadcast_", "world", tensor_mib, latency_us=AD_LATENCY_US, tag=AD_TAG,
                dtype="INT64",
            )
        )  # fmt: skip
    return out


def ad_program(ranks: int, dispatch: bool = True) -> list[Item]:
    base = transformer(layers=LAYERS)
    return (_ad_bcasts(ranks) + base) if dispatch else base


def _ad_load(ranks: int, steps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 3603)
    return np.round(rng.uniform(*AD_LOAD_US, size=steps), 1)


def ad_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    load = _ad_load(ranks, steps, seed)
    p = default_perturb(ranks)

    def delay(si: int, ci: int) -> np.ndarray | None:
        if ci != 0:
            return None
        d = np.zeros(ranks)
        d[AD_ROOT] = load[si]
        return d

    p.coll_delay_us = delay
    info = _info(CANN8, 1, ranks)
    _add_user_metadata(
        info,
        accelerate_config={
            "num_processes": ranks,
            "dispatch_batches": None,
            "split_batches": False,
            "even_batches": True,
        },
        train_dataset={
            "type": "IterableDataset",
            "streaming": True,
            "per_device_train_batch_size": 1,
            "seq_length": TOKENS,
            "dataloader_num_workers": 2,
        },
    )
    return {"": Plan(ad_program(ranks), group_kinds(ranks, 1), p, info)}


def ad_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: rank 0 reads every rank's batch and reaches the broadcasts late; all wait."""
    cl: Cluster = m[""]["cluster"]
    root = AD_ROOT
    others = [r for r in range(ranks) if r != root]
    first = [st.ops[0] for st in cl.steps]
    late_us = [float(op.start[root] - np.median(op.start[others])) / 1000 for op in first]
    sync_first = np.array([op.sync_ns / 1000 for op in first]).T  # [ranks, steps] µs
    bc = [op for st in cl.steps for op in st.ops if op.item.tag == AD_TAG]
    n_bc = sum(1 for it in cl.program if isinstance(it, Collective) and it.tag == AD_TAG)
    bc_us = np.zeros((ranks, steps))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if op.item.tag == AD_TAG:
                bc_us[:, si] += (op.end - op.start) / 1000
    tensor_mb = [
        float(np.where(op.kind.transport != 2, op.link_mb, 0.0).sum(axis=1)[root])
        for op in bc
        if op.item.size_mb > 0.01
    ]
    idle0 = _first_idle_us(cl)
    wait = coll_wait_us(m)
    free = col(m, "free_us")
    prep = col(m, "preparing_us")
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    base = _baseline(cl, ad_program(ranks, dispatch=False))
    a, b, save = _saving(step, base["step_us"])
    vic = victims_by_wait(wait, [root])
    nums: dict[str, Any] = {
        "root_rank": root,
        "processes": ranks,
        "global_batch_rows": ranks,
        "tokens_per_row": TOKENS,
        "broadcasts_per_step": n_bc,
        "broadcast_tensor_mb": round(float(np.median(tensor_mb)), 4),
        "broadcast_mb_per_step": round(
            sum(it.size_mb for it in cl.program if isinstance(it, Collective) and it.tag == AD_TAG)
            * MIB
            / 1e6,
            4,
        ),
        "root_late_us_median": _med(late_us),
        "root_late_us_min": _r(min(late_us)),
        "root_late_us_max": _r(max(late_us)),
        "first_broadcast_sync_us_median_others": _med(sync_first[others]),
        "first_broadcast_sync_us_root": _med(sync_first[root]),
        "broadcast_us_per_step_others": _med(bc_us[others].mean(axis=1)),
        "broadcast_us_per_step_root": _r(float(bc_us[root].mean())),
        "root_idle_before_first_task_us_median": _med(idle0[root]),
        "others_idle_before_first_task_us_median": _med(idle0[others]),
        "root_free_us_per_step": _r(float(free[root].mean())),
        "others_free_us_per_step": _med(free[others].mean(axis=1)),
        "root_preparing_us_per_step": _r(float(prep[root].mean())),
        "others_comm_not_overlapped_us_per_step": _med(notov[others].mean(axis=1)),
        "root_comm_not_overlapped_us_per_step": _r(float(notov[root].mean())),
        "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
        "root_wait_us_per_step": _r(float(wait[root].mean())),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_own_shards": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([root], "scheduling", ["dataloader-stall"], "synchronization_time_ms", nums)
    rc = root_cause(
        "host_stall",
        "scheduling",
        "rank",
        ranks=[root],
        victims=vic,
        not_slow=not_slow_sample(ranks, [root], vic),
        metrics={
            "culprit_free_us_per_step": nums["root_free_us_per_step"],
            "victim_wait_us_per_step": nums["victim_wait_us_per_step"],
            "culprit_wait_us_per_step": nums["root_wait_us_per_step"],
            "root_late_us_median": nums["root_late_us_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_rank=root,
        collective="hcom_broadcast_",
        group="default_group",
        broadcasts_per_step=n_bc,
        broadcast_shape=f"{ranks},{TOKENS}",
        position="every step start, before the first forward kernel",
        file="communication.json (5 hcom_broadcast_ of the default group at every step start: "
        "the object sizes, the pickled batch structure, then input_ids / attention_mask / labels "
        f"of the whole global batch ({ranks} x {TOKENS} int64, "
        f"{nums['broadcast_tensor_mb']:.2f} MB each); ranks 1-{ranks - 1} with "
        f"~{nums['first_broadcast_sync_us_median_others'] / 1000:.0f} ms of Synchronization Time "
        "in the first one, rank 0 with none), trace_view.json of rank 0 (its host idle and its "
        "device idle at the step start until it launches the first broadcast, no kernel before), "
        "step_trace_time.csv (Free of rank 0, Communication(Not Overlapped) of the others at the "
        "step start) and profiler_metadata.json (accelerate_config: dispatch_batches null, "
        "an IterableDataset)",
        kernels_normal=True,
        links_normal=True,
        every_step=True,
        cause="Accelerate dispatches the batches of an IterableDataset by default "
        "(dispatch_batches=None means True there): process 0 alone reads the next micro-batch of "
        f"all {ranks} processes from its DataLoader, then broadcasts the batch structure and every "
        "tensor to the others; its 2 workers cannot prefetch 16 batches a step, so rank 0 reaches "
        f"the first broadcast {nums['root_late_us_min'] / 1000:.0f}-"
        f"{nums['root_late_us_max'] / 1000:.0f} ms into every step and ranks 1-{ranks - 1} wait "
        "for it there",
        fix="dispatch_batches=False (Accelerator(dataloader_config=DataLoaderConfiguration("
        "dispatch_batches=False)) / accelerator_config in the Trainer): every process reads its "
        "own shard of the stream with its own workers; or a map-style (non-iterable) dataset",
    )


# ---------------------------------------------------------------- slow-dataset-mount-node
SM_NODE = 1
SM_WAIT_US = (3_000.0, 60_000.0)  # the main process' wait for the next batch (node 1)
SM_MEAN_US = 27_000.0
SM_SD_US = 11_000.0
SM_FRAMES = [
    "pretrain.py(212): train_step",
    "torch/utils/data/dataloader.py(631): __next__",
    "torch/utils/data/dataloader.py(1329): _next_data",
    "torch/utils/data/dataloader.py(1285): _get_data",
    "torch/utils/data/dataloader.py(1133): _try_get_data",
    "queue.py(180): get",
    "threading.py(324): wait",
]


def _sm_waits(ranks: int, steps: int, seed: int) -> dict[int, dict[int, float]]:
    """{step index: {rank: µs}} the main processes of node 1 wait for their next batch."""
    rng = np.random.default_rng(seed + 3604)
    bad = _node_ranks(ranks, SM_NODE)
    out: dict[int, dict[int, float]] = {}
    for si in range(steps):
        w = np.clip(rng.normal(SM_MEAN_US, SM_SD_US, size=len(bad)), *SM_WAIT_US)
        out[si] = {r: round(float(x), 1) for r, x in zip(bad, w, strict=True)}
    return out


def sm_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    waits = _sm_waits(ranks, steps, seed)
    for si, per in waits.items():
        for r, us in per.items():
            p.step_host_gaps.setdefault(si, {}).setdefault(r, {})[0] = us
            p.py_calls.setdefault(si, {})[r] = list(SM_FRAMES)
    info = dataclasses.replace(_info(CANN8, 1, ranks), with_stack=True)
    _add_user_metadata(
        info,
        data_config={
            "dataloader_num_workers": 2,
            "prefetch_factor": 2,
            "pin_memory": True,
            "data_path": "/data/corpus/pretrain_text_document",
        },
    )
    return {"": Plan(transformer(layers=LAYERS), group_kinds(ranks, 1), p, info)}


def sm_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1's main processes wait for their DataLoader; node 0 waits for node 1."""
    cl: Cluster = m[""]["cluster"]
    bad = _node_ranks(ranks, SM_NODE)
    good = [r for r in range(ranks) if r not in bad]
    shg = cl.perturb.step_host_gaps
    waits = np.array([[shg[si][r][0] for si in range(steps)] for r in bad])
    idle0 = _first_idle_us(cl)
    wait = coll_wait_us(m)
    first_wait = np.array(
        [
            [
                float(st.ops[0].sync_ns[r] / 1000 + st.ops[0].wait_extra_ms[r] * 1000)
                for st in cl.steps
            ]
            for r in range(ranks)
        ]
    )
    free = col(m, "free_us")
    prep = col(m, "preparing_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    api = np.stack([st.k_api_dur / 1000 for st in cl.steps], axis=2)
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    ids = step_ids(m)
    worst = np.unravel_index(int(np.argmax(waits)), waits.shape)
    vic = victims_by_wait(wait, bad)
    nums: dict[str, Any] = {
        "culprit_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "loader_wait_us_median": _med(waits),
        "loader_wait_us_min": _r(float(waits.min())),
        "loader_wait_us_max": _r(float(waits.max())),
        "worst_rank": bad[int(worst[0])],
        "worst_step": ids[int(worst[1])],
        "idle_before_first_kernel_us_median_culprit": _med(idle0[bad]),
        "idle_before_first_kernel_us_median_others": _med(idle0[good]),
        "culprit_preparing_us_per_step": _r(float(prep[bad].mean())),
        "others_preparing_us_per_step": _r(float(prep[good].mean())),
        "culprit_free_us_per_step": _r(float(free[bad].mean())),
        "others_free_us_per_step": _r(float(free[good].mean())),
        "victim_first_allreduce_wait_us_median": _med(first_wait[good]),
        "culprit_first_allreduce_wait_us_median": _med(first_wait[bad]),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "launch_api_us_median_culprit": _med(api[bad]),
        "launch_api_us_median_others": _med(api[good]),
        "dataloader_num_workers": 2,
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_local_data": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(bad, "scheduling", ["dataloader-stall"], "free_us", nums)
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
            "loader_wait_us_median": nums["loader_wait_us_median"],
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
        frames=list(SM_FRAMES),
        wait_frame="_try_get_data",
        lane="Python thread of trace_view.json (python_function frames, with_stack)",
        position="every step start, before the first launch",
        file=f"trace_view.json of ranks {bad[0]}-{bad[-1]} (python_function frames "
        "DataLoader __next__ > _next_data > _get_data > _try_get_data > queue.get > "
        f"threading wait at every step start, {nums['loader_wait_us_min'] / 1000:.0f}-"
        f"{nums['loader_wait_us_max'] / 1000:.0f} ms, a different length every step and rank, no "
        "CANN call inside, the device idle until the first launch; none on the other node), "
        f"step_trace_time.csv (Preparing / Free of ranks {bad[0]}-{bad[-1]}) and "
        "communication.json of the other node (Wait Time in the first gradient hcom_allReduce_ of "
        "every step)",
        erratic=True,
        launch_calls_normal=True,
        kernels_normal=True,
        links_normal=True,
        every_step=True,
        cause=f"node {node} reads the training data from a network mount (its local copy of the "
        "dataset was never made, node 0 reads its NVMe cache): its DataLoader workers (2 per rank) "
        "cannot produce a batch per step, the prefetch queue runs dry and the main process of every "
        f"rank of node {node} waits for the next batch at every step start "
        f"({nums['loader_wait_us_min'] / 1000:.0f}-{nums['loader_wait_us_max'] / 1000:.0f} ms); "
        "its devices idle meanwhile and the other node waits for it in the first gradient "
        "all-reduce",
        fix=f"make node {node}'s input pipeline keep up: copy the dataset to its local disk (as on "
        "node 0) or fix the mount, and give its loader more workers / a larger prefetch_factor; "
        "check its data path against node 0's",
    )


# ---------------------------------------------------------------- registry
DEV36_SCENARIOS = (
    ScenarioSpec(
        "h2d-per-sample-copies",
        "packed SFT batches moved to the NPU sample by sample (collate_fn returns the list, "
        ".to(device) per field): ~450 aclrtMemcpyAsync of a few hundred bytes (~38 µs of host "
        "each) and 4 ConcatD with one input per sample at every step start; the device idles "
        "~17 ms meanwhile on every rank; job-level",
        16,
        4,
        ps_plans,
        ps_answer,
    ),
    ScenarioSpec(
        "auto-gc-jitter",
        "Python's automatic GC in every training process (a growing heap of per-sample "
        "metadata): 8-20 ms collections (Python GC lane) about once a step on each rank at a "
        "different moment, the device idle behind each and every other rank waiting in the next "
        "collective; no rank stands out; job-level",
        16,
        6,
        ag_plans,
        ag_answer,
    ),
    ScenarioSpec(
        "accelerate-dispatch-batches",
        "Accelerate on a streaming IterableDataset (dispatch_batches by default): rank 0 reads "
        "all 16 micro-batches and broadcasts them (5 hcom_broadcast_ on the default group at "
        "every step start); it arrives ~45-60 ms late and ranks 1-15 wait for it in the first "
        "broadcast",
        16,
        4,
        ad_plans,
        ad_answer,
    ),
    ScenarioSpec(
        "slow-dataset-mount-node",
        "node 1 reads the dataset from a slow network mount: the main process of ranks 8-15 "
        "waits ~10-55 ms for its DataLoader (python_function __next__ > _try_get_data > queue.get) "
        "at every step start, its devices idle; node 0 waits in the first gradient all-reduce",
        16,
        6,
        sm_plans,
        sm_answer,
        min_ranks=16,
        rank_multiple=RANKS_PER_NODE,
    ),
)
DEV36_KINDS = tuple(s.name for s in DEV36_SCENARIOS)


__all__ = ["DEV36_KINDS", "DEV36_SCENARIOS"]
