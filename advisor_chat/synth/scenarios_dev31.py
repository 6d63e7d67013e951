"""Twenty-ninth set of development fault kinds (new kinds; written without reading the diagnosis).

Problems of the host operating system and the process setup of Ascend training jobs, planted as
mechanisms of the simulation (``advisor_chat.synth.model``, ``advisor_chat.synth.writer``) with an
answer key derived from the simulated timeline and the breakdown the writer measured (never from
typed numbers). Every key carries ``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what
distinguishes the kind in the files). Their question set is
``evals/datasets/generalization_dev31.yaml``: a development set for finding weaknesses; the held-out
kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save" numbers come
from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place of the files: the *absence* of host events,
i.e. windows in which one node's host lanes of trace_view.json record nothing at all, on a fixed
wall-clock grid; the *durations* of individual ``AscendCL@aclnn*`` launch calls on the CANN lane of
trace_view.json; the ``python_function`` frames of the Python lane of trace_view.json (with_stack);
and the duration of a host ``cpu_op`` (``aten::cat``, with its Input Dims) at the step start on one
node):

- ``cfs-throttle-node``: node 1's pod (the Worker template of a PyTorchJob; node 0 runs the Master
  template without a CPU limit) has a CPU limit of 40 cores while its 8 training processes, their
  dataloader workers and runtime threads want ~52: the kernel's CFS bandwidth control lets the pod run
  ~77 ms of every 100 ms period and then freezes every thread of it until the period ends (~23 ms).
  In trace_view.json of ranks 8-15 no host event at all (no launch call, no HCCL launch) for ~23 ms,
  at the same instants on all 8 ranks, repeating exactly every 100 ms of wall clock independent of the
  step structure; the devices drain the ~1.8 ms the host had queued and idle (Free), the first launch
  after a freeze lands right before its kernel. GC detection on, no GC. Node 0 waits for node 1 in
  the gradient all-reduces. Culprit: node 1 (its host, throttled); devices, links and launch calls
  normal. Seen in the files: the silences (gaps between host events with the device idle) and their
  100 ms spacing.
- ``thread-oversubscription``: every rank's process is bound to its 24-core slice
  (``CPU_AFFINITY_CONF``), the dataloader workers it forks inherit the slice and each runs its CPU
  transforms with 24 OpenMP threads (``OMP_NUM_THREADS`` unset): ~150 busy threads on 24 cores. The
  thread that launches the operators is descheduled for milliseconds now and then: in every step on
  every rank 4-6 ``AscendCL@aclnn*`` launch calls at no particular operator last ~0.5-6 ms instead
  of ~11 µs (the thread preempted inside the call), the launches queued behind follow right after, and
  the device idles once the ~1.8 ms lead is used up. Kernels, links and the other launch calls normal,
  no GC; different calls on different ranks in each step, so the late arriver of the collectives
  changes and no rank stands out. Job-level.
- ``print-to-slow-console``: a debug ``print`` of the tensor shapes left in the attention and MLP
  forward of every layer, on every rank; the 16 processes' stdout goes through the launcher to a slow
  sink (an SSH terminal / the log collector), the pipe is full and every ``print`` blocks ~4.6 ms in
  write(): in trace_view.json (with_stack) a ``python_function`` ``<built-in function print>``
  (under ``megatron/core/transformer/attention.py ... forward`` / ``mlp.py ... forward``) of ~4.6 ms
  right before the FlashAttentionScore and the MLP up-projection launch of every forward layer, 8 a
  step, and the device idle there (~3 ms each) on every rank alike. Job-level, launch calls, kernels
  and links normal.
- ``thp-compaction-node``: node 0's hosts run transparent huge pages with ``defrag=always`` (node 1:
  ``madvise``) and their free memory is fragmented by the page cache of the dataset shards: the
  training loop packs each step's image patches on the host (``aten::cat`` of 4 x [1152, 1176] fp32
  into a new 21.7 MB tensor) and every fresh huge page of that allocation stalls in direct
  compaction: ``aten::cat`` takes ~10-30 ms on ranks 0-7, a different amount in every step, against
  ~3.4 ms for the same Input Dims on ranks 8-15; the devices of node 0 idle at every step start
  (Free, Preparing) and node 1 waits for node 0 in the first gradient all-reduce. Culprit: node 0
  (its host memory); launch calls, kernels and links normal.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    RANKS_PER_NODE,
    Cluster,
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


def _kernels(prog: list[Item]) -> list[Kernel]:
    return [it for it in prog if isinstance(it, Kernel)]


def _node_ranks(ranks: int, node: int) -> list[int]:
    node = min(node, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def _launches(cl: Cluster, r: int) -> list[tuple[int, int]]:
    """(start, end) ns of every host launch call of rank ``r`` (kernels and collectives), sorted."""
    out: list[tuple[int, int]] = []
    for st in cl.steps:
        kad0 = int(st.k_api_dur[r, 0])
        for j in range(st.k_start.shape[1]):
            a = int(st.k_api_start[r, j])
            out.append((a, a + int(st.k_api_dur[r, j])))
        for op in st.ops:
            a = int(op.api_start[r])
            out.append((a, a + kad0))
    return sorted(out)


def _device_busy(cl: Cluster, r: int) -> list[tuple[int, int]]:
    """(start, end) ns of every device task of rank ``r`` (kernels and collectives), merged."""
    iv: list[tuple[int, int]] = []
    for st in cl.steps:
        for j in range(st.k_start.shape[1]):
            d = int(st.k_dur[r, j])
            if d > 0:
                a = int(st.k_start[r, j])
                iv.append((a, a + d))
        for op in st.ops:
            iv.append((int(op.start[r]), int(op.end[r])))
    iv.sort()
    merged: list[tuple[int, int]] = []
    for a, b in iv:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _idle_within(busy: list[tuple[int, int]], a: int, b: int) -> int:
    """Time (ns) of [a, b) in which the device runs no task."""
    covered = 0
    for x, y in busy:
        if y <= a:
            continue
        if x >= b:
            break
        covered += min(y, b) - max(x, a)
    return (b - a) - covered


def _host_silences(cl: Cluster, r: int, min_ns: int) -> list[tuple[int, int]]:
    """Gaps (end of one host call, start of the next) of rank ``r`` longer than ``min_ns``."""
    calls = _launches(cl, r)
    out: list[tuple[int, int]] = []
    last_end = calls[0][1]
    for a, b in calls[1:]:
        if a - last_end > min_ns:
            out.append((last_end, a))
        last_end = max(last_end, b)
    return out


def _idle_silences(cl: Cluster, r: int) -> list[tuple[int, int, int]]:
    """Host silences > 10 ms of rank ``r`` during which its device idles > 10 ms: (start, end, idle)."""
    busy = _device_busy(cl, r)
    out = []
    for a, b in _host_silences(cl, r, 10_000_000):
        idle = _idle_within(busy, a, b)
        if idle > 10_000_000:
            out.append((a, b, idle))
    return out


# ---------------------------------------------------------------- cfs-throttle-node
CF_NODE = 1
CF_PERIOD_US = 100_000.0  # cpu.cfs_period_us (the kernel's default)
CF_LIMIT_CPUS = 40  # the Worker pod's CPU limit (cpu.cfs_quota_us = 40 x the period)
CF_DEMAND_CPUS = 52.0  # what its 8 ranks, dataloader workers and runtime threads would use
CF_DEMAND_JITTER = 0.02
CF_PHASE_US = 37_000.0  # where node 1's period boundaries sit relative to the capture's clock
CF_SCALE = 2.0  # a larger model: ~135 ms steps, more than one period per step


def cf_program() -> list[Item]:
    """transformer() at twice the kernel durations."""
    return transformer(layers=LAYERS, scale=CF_SCALE)


def _cf_windows(seed: int, t_end: int) -> list[tuple[int, int]]:
    """(start, end) ns of node 1's throttled windows from before the capture to ``t_end``."""
    rng = np.random.default_rng(seed + 3101)
    period = int(CF_PERIOD_US * 1000)
    t = T0_NS - 2 * period + int(CF_PHASE_US * 1000)
    out = []
    while t < t_end + period:
        demand = CF_DEMAND_CPUS * (
            1.0 + CF_DEMAND_JITTER * float(np.clip(rng.standard_normal(), -2, 2))
        )
        run = int(period * CF_LIMIT_CPUS / demand)
        out.append((t + run, t + period))
        t += period
    return out


def _cf_sim(prog: list[Item], kinds: Any, p: Perturb, ranks: int, steps: int, seed: int) -> Cluster:
    from advisor_chat.synth import FIRST_STEP

    return simulate(prog, kinds, p, ranks, steps, seed, FIRST_STEP, T0_NS)


def _cf_apply(
    prog: list[Item], kinds: Any, p: Perturb, ranks: int, steps: int, seed: int
) -> Perturb:
    """Freeze node 1's host in every throttled window: no launch starts inside one.

    The first launch of a node-1 rank at or after a window's start moves to its end: a kernel's by a
    device gap (``step_host_gaps``: it starts right after its launch, the launches queued behind
    follow), a collective's by a delayed arrival (``coll_delay_us``). Windows are applied in time
    order, re-simulating after each (a freeze only moves later events).
    """
    bad = _node_ranks(ranks, CF_NODE)
    gaps: dict[int, dict[int, dict[int, float]]] = {}
    delays: dict[tuple[int, int], np.ndarray] = {}
    p.step_host_gaps = gaps

    def delay(si: int, ci: int) -> np.ndarray | None:
        return delays.get((si, ci))

    p.coll_delay_us = delay
    # program order of the kernels and collectives (launches are issued in this order)
    k_pos: list[int] = []
    c_pos: list[int] = []
    for pos, it in enumerate(prog):
        (k_pos if isinstance(it, Kernel) else c_pos).append(pos)
    cl = _cf_sim(prog, kinds, p, ranks, steps, seed)
    windows = _cf_windows(seed, cl.steps[-1].end + 200_000_000)
    for _ in range(4 * len(windows) + 20):
        fixes: list[tuple[int, int, str, int, int]] = []  # (rank, step, what, index, end)
        for a, b in windows:
            for r in bad:
                # the first launch in program order that falls in the window
                first: tuple[int, int, str, int] | None = None
                for si, st in enumerate(cl.steps):
                    for j in range(st.k_start.shape[1]):
                        if a <= int(st.k_api_start[r, j]) < b:
                            cand = (si, k_pos[j], "k", j)
                            first = cand if first is None or cand < first else first
                    for ci, op in enumerate(st.ops):
                        if a <= int(op.api_start[r]) < b:
                            cand = (si, c_pos[ci], "c", ci)
                            first = cand if first is None or cand < first else first
                if first is not None:
                    fixes.append((r, first[0], first[2], first[3], b))
            if fixes:
                break  # the earliest window with a launch inside: fix it on every rank of the node
        if not fixes:
            return p
        for r, si, what, idx, b in fixes:
            st = cl.steps[si]
            if what == "k":
                need = b + int(st.k_api_dur[r, idx]) + 9_000 - int(st.k_start[r, idx])
                at = gaps.setdefault(si, {}).setdefault(r, {})
                at[idx] = round(at.get(idx, 0.0) + max(need, 0) / 1000, 3)
            else:
                need = b + 1_000 - int(st.ops[idx].api_start[r])
                d = delays.setdefault((si, idx), np.zeros(ranks))
                d[r] += need / 1000
        cl = _cf_sim(prog, kinds, p, ranks, steps, seed)
    raise RuntimeError("cfs-throttle-node: the throttled windows did not settle")


def cf_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = cf_program()
    kinds = group_kinds(ranks, 1)
    p = _cf_apply(prog, kinds, default_perturb(ranks), ranks, steps, seed)
    info = dataclasses.replace(_info(CANN8, 1, ranks), gc_detect_threshold_ms=1.0)
    return {"": Plan(prog, kinds, p, info)}


def cf_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1's host frozen ~23 ms of every 100 ms; its devices idle; node 0 waits."""
    cl: Cluster = m[""]["cluster"]
    bad = _node_ranks(ranks, CF_NODE)
    good = [r for r in range(ranks) if r not in bad]
    sil = {r: _idle_silences(cl, r) for r in range(ranks)}
    lens = [(b - a) / 1000 for r in bad for a, b, _ in sil[r]]
    idles = [i / 1000 for r in bad for _, _, i in sil[r]]
    spacing = [
        (sil[r][i + 1][0] - sil[r][i][0]) / 1000 for r in bad for i in range(len(sil[r]) - 1)
    ]
    # the same instants on every rank of the node: each silence of the first rank against the
    # nearest one of every other rank of the node, by where it ends (the first launch after it)
    spread = []
    for _a0, b0, _i in sil[bad[0]]:
        ends = [min((b for _a, b, _x in sil[r]), key=lambda e: abs(e - b0)) for r in bad]
        spread.append((max(ends) - min(ends)) / 1000)
    span_ms = (cl.steps[-1].end - cl.steps[0].start) / 1e6
    wait = coll_wait_us(m)
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    api = np.stack([st.k_api_dur / 1000 for st in cl.steps], axis=2)
    kdur = np.stack([st.k_dur / 1000 for st in cl.steps], axis=2)
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    period = float(np.median(spacing))
    nums: dict[str, Any] = {
        "throttled_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "cfs_period_us": CF_PERIOD_US,
        "pod_cpu_limit": CF_LIMIT_CPUS,
        "silence_period_us_median": _r(period),
        "host_silence_us_median": _med(lens),
        "host_silence_us_max": _r(max(lens)),
        "silences_per_rank": int(np.median([len(sil[r]) for r in bad])),
        "silences_per_step": round(float(np.median([len(sil[r]) for r in bad])) / steps, 2),
        "throttled_share_of_time": round(float(np.median(lens)) / period, 4),
        "silence_end_spread_us_within_node": _r(max(spread)),
        "device_idle_per_silence_us_median": _med(idles),
        "other_node_idle_silences": int(sum(len(sil[r]) for r in good)),
        "captured_ms": _r(span_ms),
        "culprit_free_us_per_step": _r(float(free[bad].mean())),
        "others_free_us_per_step": _r(float(free[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "launch_api_us_median_culprit": _med(api[bad]),
        "launch_api_us_median_others": _med(api[good]),
        "kernel_us_ratio_culprit_vs_others": round(
            float(kdur[bad].sum(axis=1).mean() / kdur[good].sum(axis=1).mean()), 3
        ),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_no_throttling": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
        "gc_events": 0,
    }
    key = _key(bad, "scheduling", ["cpu-core-binding", "host-dispatch-bound"], "free_us", nums)
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
            "host_silence_us_median": nums["host_silence_us_median"],
            "silence_period_us_median": nums["silence_period_us_median"],
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
        period_us=CF_PERIOD_US,
        silence_us=nums["host_silence_us_median"],
        lane="trace_view.json of ranks 8-15: CANN thread (AscendCL@ launch calls, HCCL launches) "
        "and Python thread record nothing for ~23 ms, at the same instants on all 8 ranks, every "
        "100 ms of wall clock; the device (Ascend Hardware / HCCL lanes) idles in those windows",
        file="trace_view.json of ranks 8-15 (host silences of ~23 ms every 100 ms with the device "
        "idle, the first launch after each right before its kernel; no GC events although GC "
        "detection is on in profiler_info), step_trace_time.csv (Free of ranks 8-15) and "
        "communication.json of ranks 0-7 (Wait Time in the gradient hcom_allReduce_)",
        periodic=True,
        same_instants_within_node=True,
        step_aligned=False,
        launch_calls_normal=True,
        kernels_normal=True,
        links_normal=True,
        gc=False,
        every_step=True,
        cause=f"node {node}'s pod has a CPU limit ({CF_LIMIT_CPUS} cores) below what its 8 "
        "training processes, their dataloader workers and runtime threads use: the kernel's CFS "
        "bandwidth control lets the pod run ~77 ms of every 100 ms period, then freezes every thread "
        "of it until the period ends (~23 ms): the hosts of ranks "
        f"{bad[0]}-{bad[-1]} launch nothing, their devices drain the queue and idle, and node 0 "
        "waits for node 1 in the gradient all-reduces",
        fix="raise or remove the CPU limit of that pod (same resources as node 0's: requests = "
        "limits with enough cores for the ranks and their workers, or the kubelet's "
        "cpu-cfs-quota off for this node pool), or cut what the pod uses below the limit (fewer "
        "dataloader workers, OMP_NUM_THREADS=1 in them); check cpu.stat nr_throttled / "
        "throttled_usec of the pod's cgroup",
    )


# ---------------------------------------------------------------- thread-oversubscription
TO_SCALE = 0.5  # shorter kernels: the lead the host keeps is used up sooner
TO_PREEMPT = (4, 7)  # preempted launch calls per step and rank (min, max + 1)
TO_CALL_US = (2000.0, 6000.0)  # how long a preempted call holds the launching thread
TO_API_US = 11.0  # default_perturb's launch call


def to_program() -> list[Item]:
    """transformer() at half the kernel durations."""
    return transformer(layers=LAYERS, scale=TO_SCALE, grad_mb=48.0)


def _to_events(
    ranks: int, steps: int, seed: int, prog: list[Item]
) -> dict[int, dict[int, dict[int, float]]]:
    """{step: {rank: {kernel index: device idle µs}}}: the launch calls preempted in each step.

    A call that holds the thread ``P`` µs leaves the device idle ``P - lead - previous kernel``
    (the host was that far ahead); the simulation lays the call out from the previous launch to
    just before its kernel (``Perturb.step_kernel_stalls``).
    """
    ks = _kernels(prog)
    durs = [k.dur_us for k in ks]
    # not a kernel right after a collective (its launch would cover the collective's) nor the
    # first after an overlapped one (it waits for the collective: the call would span the wait)
    skip = set()
    kj = 0
    for it in prog:
        if isinstance(it, Kernel):
            kj += 1
        else:
            skip.update({kj, kj + it.overlap})
    pool = [j for j in range(2, len(ks)) if j not in skip]
    rng = np.random.default_rng(seed + 3102)
    out: dict[int, dict[int, dict[int, float]]] = {}
    for si in range(steps):
        per: dict[int, dict[int, float]] = {}
        for r in range(ranks):
            n = int(rng.integers(*TO_PREEMPT))
            js: list[int] = []
            for j in rng.permutation(pool).tolist():
                if all(abs(j - q) >= 3 for q in js):
                    js.append(int(j))
                if len(js) == n:
                    break
            js.sort()
            per[r] = {}
            for j in js:
                hold = float(rng.uniform(*TO_CALL_US))
                per[r][j] = round(max(hold - LEAD_US - durs[j - 1] - GAP_US, 0.0), 1)
        out[si] = per
    return out


def to_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = to_program()
    p = default_perturb(ranks)
    p.step_kernel_stalls = _to_events(ranks, steps, seed, prog)
    info = dataclasses.replace(_info(CANN8, 1, ranks), gc_detect_threshold_ms=1.0)
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def _last_arrivers(cl: Cluster, margin_ns: int = 100_000) -> list[int]:
    """The last rank to arrive at each collective of the run that one rank arrives last at.

    Collectives every rank reaches within ``margin_ns`` of the last (e.g. right after another
    collective) have no late arriver and are left out.
    """
    out = []
    for st in cl.steps:
        for op in st.ops:
            order = np.argsort(op.start)
            if int(op.start[order[-1]] - op.start[order[-2]]) > margin_ns:
                out.append(int(order[-1]))
    return out


def to_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: on every rank a few launch calls a step held for ms; the device idles after them."""
    cl: Cluster = m[""]["cluster"]
    ev = cl.perturb.step_kernel_stalls
    long_calls = [
        float(cl.steps[si].k_api_dur[r, j]) / 1000
        for si, per in ev.items()
        for r, at in per.items()
        for j in at
    ]
    held = {(si, r, j) for si, per in ev.items() for r, at in per.items() for j in at}
    normal = [
        float(st.k_api_dur[r, j]) / 1000
        for si, st in enumerate(cl.steps)
        for r in range(ranks)
        for j in range(st.k_start.shape[1])
        if (si, r, j) not in held
    ]
    idle = np.zeros((ranks, steps))
    for si, per in ev.items():
        st = cl.steps[si]
        for r, at in per.items():
            for j in at:
                prev = int(st.k_start[r, j - 1] + st.k_dur[r, j - 1])
                idle[r, si] += max(int(st.k_start[r, j]) - prev, 0) / 1000 - GAP_US
    per_step = np.array([[len(ev[si][r]) for si in range(steps)] for r in range(ranks)])
    ops_held = sorted(
        {cl.kernels[j].op_type for per in ev.values() for at in per.values() for j in at}
    )
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    last = _last_arrivers(cl)
    counts = np.bincount(last, minlength=ranks)
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    fr = free.mean(axis=1)
    nums: dict[str, Any] = {
        "preempted_calls_per_step_per_rank_median": _r(float(np.median(per_step))),
        "preempted_calls_total": int(per_step.sum()),
        "preempted_call_us_median": _med(long_calls),
        "preempted_call_us_max": _r(max(long_calls)),
        "preempted_call_us_min": _r(min(long_calls)),
        "launch_api_us_median_other_calls": _med(normal),
        "distinct_operators_hit": len(ops_held),
        "device_idle_after_preemption_us_per_step": _med(idle.mean(axis=0)),
        "median_free_us_per_step": _med(fr),
        "median_free_share": _share(free, step),
        "free_us_per_step_min_rank": _r(float(fr.min())),
        "free_us_per_step_max_rank": _r(float(fr.max())),
        "median_wait_us_per_step": _med(wait.mean(axis=1)),
        "distinct_last_arrivers": int((counts > 0).sum()),
        "max_share_last_arriver": round(float(counts.max() / counts.sum()), 3),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_no_preemption": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
        "gc_events": 0,
    }
    key = _key([], "scheduling", ["cpu-core-binding", "host-dispatch-bound"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "median_free_share": nums["median_free_share"],
            "preempted_call_us_median": nums["preempted_call_us_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        api_kind="AscendCL@aclnn* operator launch calls (CANN thread of trace_view.json)",
        preempted_per_step=int(np.median(per_step)),
        call_us=nums["preempted_call_us_median"],
        normal_call_us=nums["launch_api_us_median_other_calls"],
        operators=ops_held,
        file="trace_view.json of every rank (CANN thread: "
        f"{int(np.median(per_step))} AscendCL@aclnn* launch calls a step of "
        f"{nums['preempted_call_us_min'] / 1000:.1f}-{nums['preempted_call_us_max'] / 1000:.1f} ms "
        "at no particular operator, the launches queued behind them right after, each kernel "
        "then right after its launch and the device idle before it; every other call ~11 µs; no GC "
        "events although GC detection is on), step_trace_time.csv (Free on every rank, a different "
        "rank late in each collective)",
        all_ranks=True,
        late_rank=False,
        random_positions=True,
        kernels_normal=True,
        links_normal=True,
        gc=False,
        every_step=True,
        cause="CPU oversubscription on every server: each rank's process is bound to its 24-core "
        "slice (CPU_AFFINITY_CONF) and the dataloader workers it forks inherit the slice, each "
        "running its CPU transforms with 24 OpenMP threads (OMP_NUM_THREADS unset): ~150 busy "
        "threads on 24 cores, so the thread that launches the operators is descheduled for "
        "milliseconds a few times a step (inside a launch call), the device drains the ~1.8 ms "
        "queue and idles, on every rank at random places",
        fix="cap the threads of the workers: OMP_NUM_THREADS=1 (and MKL_NUM_THREADS) or "
        "torch.set_num_threads(1) in worker_init_fn, TOKENIZERS_PARALLELISM=false, fewer "
        "num_workers if the data allows; keep the workers off the cores of the training process' "
        "main and launch threads (bind them to other cores / CPU_AFFINITY_CONF=2)",
    )


# ---------------------------------------------------------------- print-to-slow-console
PC_PRINT_US = 4600.0  # one print() blocked in write() on the full stdout pipe
PC_JITTER = 0.08  # per call site (the sink drains every rank's pipe at the same rate)
PC_RANK_JITTER = 0.01
PC_FRAMES = {
    "FlashAttentionScore": (
        "megatron/core/transformer/attention.py(404): forward",
        "<built-in function print>",
    ),
    "mlp_up": (
        "megatron/core/transformer/mlp.py(127): forward",
        "<built-in function print>",
    ),
}


def pc_program() -> list[Item]:
    """transformer() (one micro-batch a step)."""
    return transformer(layers=LAYERS)


def _pc_sites(prog: list[Item]) -> dict[int, str]:
    """{kernel index: call site} of the forward's FlashAttentionScore and MLP up-projection."""
    ks = _kernels(prog)
    first_bwd = next(j for j, k in enumerate(ks) if k.tag == "mlp_down_dx")
    out: dict[int, str] = {}
    for j, k in enumerate(ks[:first_bwd]):
        if k.op_type == "FlashAttentionScore":
            out[j] = "FlashAttentionScore"
        elif k.tag == "mlp_up":
            out[j] = "mlp_up"
    return out


def pc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = pc_program()
    sites = _pc_sites(prog)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 3103)
    f0 = {j: 1.0 + PC_JITTER * float(np.clip(rng.standard_normal(), -2, 2)) for j in sites}
    for r in range(ranks):
        p.kernel_stalls[r] = {}
        p.launch_py_frames[r] = {}
        for j, site in sites.items():
            us = round(
                PC_PRINT_US
                * f0[j]
                * (1 + PC_RANK_JITTER * float(np.clip(rng.standard_normal(), -2, 2))),
                1,
            )
            # the host was LEAD_US ahead: the device idles for the rest of the blocked write
            p.kernel_stalls[r][j] = round(us - LEAD_US + 300.0, 1)
            p.launch_py_frames[r][j] = (PC_FRAMES[site], us)
    info = dataclasses.replace(_info(CANN8, 1, ranks), with_stack=True)
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def _pc_written(cl: Cluster) -> list[float]:
    """Durations (µs) of the print frames as the writer lays them out (all ranks and steps)."""
    out = []
    for st in cl.steps:
        for r in range(cl.ranks):
            for j, (_frames, us) in cl.perturb.launch_py_frames[r].items():
                b = int(st.k_api_start[r, j]) - 2_000
                host0 = int(st.k_api_start[r, j - 1] + st.k_api_dur[r, j - 1])
                a = max(b - round(us * 1000), host0 + 1_000)
                # the inner frame (print) is inset by 1 µs on both sides
                out.append((b - a - 2_000) / 1000)
    return out


def pc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 8 blocked prints a step on every rank; the device idles after each."""
    cl: Cluster = m[""]["cluster"]
    sites = _pc_sites(cl.program)
    written = _pc_written(cl)
    idle = np.zeros((ranks, steps))
    gaps = []
    for si, st in enumerate(cl.steps):
        for j in sites:
            prev = st.k_start[:, j - 1] + st.k_dur[:, j - 1]
            g = (st.k_start[:, j] - prev) / 1000
            idle[:, si] += g
            gaps.extend(g.tolist())
    api = np.stack([st.k_api_dur / 1000 for st in cl.steps], axis=2)
    free = col(m, "free_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    fr = free.mean(axis=1)
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    nums: dict[str, Any] = {
        "prints_per_step": len(sites),
        "prints_per_layer": len(sites) // LAYERS,
        "print_us_median": _med(written),
        "print_us_min": _r(min(written)),
        "print_us_max": _r(max(written)),
        "device_idle_per_print_us_median": _med(gaps),
        "device_idle_at_prints_us_per_step": _med(idle.mean(axis=0)),
        "launch_api_us_median": _med(api),
        "median_free_us_per_step": _med(fr),
        "median_free_share": _share(free, step),
        "free_us_per_step_min_rank": _r(float(fr.min())),
        "free_us_per_step_max_rank": _r(float(fr.max())),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_no_print": _r(b),
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
            "print_us_median": nums["print_us_median"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        frame="<built-in function print>",
        parent_frames=[PC_FRAMES["FlashAttentionScore"][0], PC_FRAMES["mlp_up"][0]],
        before_operators=["FlashAttentionScore", "MatMulV2 (MLP up-projection)"],
        per_step=len(sites),
        print_us=nums["print_us_median"],
        lane="Python thread of trace_view.json (python_function events, with_stack): "
        "<built-in function print> under attention.py / mlp.py forward",
        file="trace_view.json of every rank (a ~4.6 ms python_function <built-in function print> "
        "under megatron/core/transformer/attention.py forward / mlp.py forward right before the "
        "FlashAttentionScore and the MLP up-projection MatMulV2 launch of every forward layer, 8 a "
        "step, the device idle there ~3 ms; launch calls ~11 µs) and step_trace_time.csv (Free on "
        "every rank alike); profiler_info with_stack true",
        all_ranks=True,
        late_rank=False,
        forward_only=True,
        launch_calls_normal=True,
        kernels_normal=True,
        links_normal=True,
        every_step=True,
        cause="a debug print of the tensor shapes was left in the attention and MLP forward of every "
        "layer on every rank; the 16 processes' stdout goes through the launcher to a slow sink (an "
        "SSH terminal / the log collector) that cannot keep up, the pipe is full and every print "
        "blocks ~4.6 ms in write(): the host stops launching, the device drains the ~1.8 ms queue "
        "and idles, 8 times a step on every rank",
        fix="remove the prints from the forward (or log on one rank every N steps through logging "
        "at a level that is off in production); send stdout to a local file (torchrun --log-dir / "
        "redirect) instead of a terminal or a slow collector",
    )


# ---------------------------------------------------------------- thp-compaction-node
TH_NODE = 0
TH_SAMPLES = 4  # images per micro-batch, packed on the host every step
TH_PATCHES = 1152  # patches per image (Qwen2-VL style: 3 x 2 x 14 x 14 = 1176 values each)
TH_DIM = 1176
TH_BYTES = 4 * TH_SAMPLES * TH_PATCHES * TH_DIM  # fp32
TH_CAT_US = 3400.0  # aten::cat into a new tensor with 4 KB pages: faults + copy
TH_HUGEPAGES = TH_BYTES // (2 << 20)  # 2 MB huge pages of the new tensor
TH_COMPACT_US = (700.0, 4200.0)  # direct compaction per huge page on the fragmented node
TH_JITTER = 0.04
TH_H2D_GBPS = 20.0


def _th_copy_us() -> float:
    return round(TH_BYTES / (TH_H2D_GBPS * 1e9) * 1e6, 1)


def _th_call(us: float) -> list[HostCall]:
    dims = ";".join([f"{TH_PATCHES},{TH_DIM}"] * TH_SAMPLES)
    types = ";".join(["float"] * TH_SAMPLES)
    return [HostCall("", round(us, 1), ("aten::cat",), 0.0, dims, types)]


def _th_cat_us(ranks: int, steps: int, seed: int, thp: bool) -> np.ndarray:
    """[ranks, steps] duration (µs) of the packing aten::cat."""
    rng = np.random.default_rng(seed + 3104)
    bad = set(_node_ranks(ranks, TH_NODE))
    out = np.zeros((ranks, steps))
    for si in range(steps):
        for r in range(ranks):
            us = TH_CAT_US * (1.0 + TH_JITTER * float(np.clip(rng.standard_normal(), -2, 2)))
            # the fragmented node: every fresh huge page waits for direct compaction
            stall = float(rng.uniform(*TH_COMPACT_US, size=TH_HUGEPAGES).sum())
            pages_hit = float(rng.uniform(0.35, 1.0))  # the share that found no free huge page
            if thp and r in bad:
                us += stall * pages_hit
            out[r, si] = round(us, 1)
    return out


def th_plans(ranks: int, steps: int, seed: int, thp: bool = True) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    cat = _th_cat_us(ranks, steps, seed, thp)
    copy = [("host to device", TH_BYTES, _th_copy_us())]
    for si in range(steps):
        calls: dict[int, dict[int, list[HostCall]]] = {}
        gaps: dict[int, dict[int, float]] = {}
        for r in range(ranks):
            c = _th_call(float(cat[r, si]))
            calls[r] = {0: c}
            gaps[r] = {0: round(host_calls_span_us(c) + 40.0, 1)}
        p.step_host_calls[si] = calls
        p.step_host_gaps[si] = gaps
    for r in range(ranks):
        p.dev_copies[r] = {0: list(copy)}
    return {"": Plan(transformer(layers=LAYERS), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def th_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 0's packing aten::cat stalls (erratic); its devices idle; node 1 waits."""
    cl: Cluster = m[""]["cluster"]
    bad = _node_ranks(ranks, TH_NODE)
    good = [r for r in range(ranks) if r not in bad]
    sc = cl.perturb.step_host_calls
    cat = np.array([[sc[si][r][0][0].us for si in range(steps)] for r in range(ranks)])
    idle0 = np.array(
        [
            [(int(st.k_start[r, 0]) - st.bounds(r)[0]) / 1000 for st in cl.steps]
            for r in range(ranks)
        ]
    )
    api = np.stack([st.k_api_dur / 1000 for st in cl.steps], axis=2)
    kdur = np.stack([st.k_dur / 1000 for st in cl.steps], axis=2)
    wait = coll_wait_us(m)
    free = col(m, "free_us")
    prep = col(m, "preparing_us")
    step = col(m, "step_us")
    fixed = th_plans(ranks, steps, cl.seed, thp=False)[""]
    base = _sim_breakdown(_resimulate(dataclasses.replace(cl, perturb=fixed.perturb), cl.program))
    a, b, save = _saving(step, base["step_us"])
    ids = step_ids(m)
    worst = np.unravel_index(int(np.argmax(cat)), cat.shape)
    nums: dict[str, Any] = {
        "culprit_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "packed_tensor_mb": round(TH_BYTES / 1e6, 2),
        "huge_pages_per_allocation": int(TH_HUGEPAGES),
        "cat_us_median_culprit": _med(cat[bad]),
        "cat_us_median_others": _med(cat[good]),
        "cat_ratio_culprit_vs_others": round(float(np.median(cat[bad]) / np.median(cat[good])), 2),
        "cat_us_min_culprit": _r(float(cat[bad].min())),
        "cat_us_max_culprit": _r(float(cat[bad].max())),
        "cat_us_max_others": _r(float(cat[good].max())),
        "worst_rank": int(worst[0]),
        "worst_step": ids[int(worst[1])],
        "cat_cv_across_steps_culprit": round(
            float(np.median(cat[bad].std(axis=1) / cat[bad].mean(axis=1))), 3
        ),
        "idle_before_first_kernel_us_median_culprit": _med(idle0[bad]),
        "idle_before_first_kernel_us_median_others": _med(idle0[good]),
        "culprit_preparing_us_per_step": _r(float(prep[bad].mean())),
        "others_preparing_us_per_step": _r(float(prep[good].mean())),
        "culprit_free_us_per_step": _r(float(free[bad].mean())),
        "others_free_us_per_step": _r(float(free[good].mean())),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "launch_api_us_median_culprit": _med(api[bad]),
        "launch_api_us_median_others": _med(api[good]),
        "kernel_us_ratio_culprit_vs_others": round(
            float(kdur[bad].sum(axis=1).mean() / kdur[good].sum(axis=1).mean()), 3
        ),
        "h2d_copy_us": _th_copy_us(),
        "median_step_us": _r(a),
        "median_step_us_no_compaction": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(bad, "scheduling", ["dataloader-stall", "host-dispatch-bound"], "free_us", nums)
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
            "cat_us_median_culprit": nums["cat_us_median_culprit"],
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
        host_op="aten::cat",
        input_dims=f"{TH_SAMPLES} x [{TH_PATCHES}, {TH_DIM}] float",
        position="the step start, before the batch's host-to-device copy (aten::copy_ / "
        "MEMCPY_ASYNC) and the first kernel",
        lane="Python thread of trace_view.json (cpu_op aten::cat with Input Dims, no CANN call "
        "inside)",
        file=f"trace_view.json of ranks {bad[0]}-{bad[-1]} (cpu_op aten::cat of 4 x [1152, 1176] "
        f"float at every step start {nums['cat_us_min_culprit'] / 1000:.0f}-"
        f"{nums['cat_us_max_culprit'] / 1000:.0f} ms, a different length in every step, against "
        f"~{nums['cat_us_median_others'] / 1000:.1f} ms with the same Input Dims on the other "
        "node; launch calls ~11 µs everywhere), step_trace_time.csv (Preparing "
        "and Free of ranks 0-7) and communication.json of ranks 8-15 (Wait Time in the first "
        "gradient hcom_allReduce_)",
        erratic=True,
        launch_calls_normal=True,
        kernels_normal=True,
        links_normal=True,
        every_step=True,
        cause=f"node {node}'s hosts run transparent huge pages with defrag=always (node 1: "
        "madvise) and their free memory is fragmented by the page cache of the dataset: the "
        "training loop packs each step's image patches on the host into a new 21.7 MB tensor "
        "(aten::cat) and every fresh huge page of it stalls in direct compaction, so the packing "
        f"takes {nums['cat_us_min_culprit'] / 1000:.0f}-{nums['cat_us_max_culprit'] / 1000:.0f} ms "
        f"(a different amount every step) instead of ~{nums['cat_us_median_others'] / 1000:.1f} ms "
        f"on ranks {bad[0]}-{bad[-1]}; their devices idle at every step start and node 1 waits for them in the first "
        "gradient all-reduce",
        fix="set transparent huge pages to defrag=madvise (or never) on that node like on the "
        "others (/sys/kernel/mm/transparent_hugepage/defrag, the tuned profile), and compact / drop "
        "the page cache once; better, do not allocate the batch anew every step: pack into a reused "
        "(pinned) buffer (torch.cat(..., out=buf)) or move the packing into the dataloader workers",
    )


# ---------------------------------------------------------------- registry
DEV31_SCENARIOS = (
    ScenarioSpec(
        "cfs-throttle-node",
        "node 1's pod CPU-limited (40 cores) below what it uses: every 100 ms CFS period its "
        "host is frozen ~23 ms (no host event on ranks 8-15, same instants), the devices drain "
        "and idle; node 0 waits in the all-reduces; launch calls, kernels and links normal",
        16,
        6,
        cf_plans,
        cf_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "thread-oversubscription",
        "dataloader workers with unbounded OpenMP threads on every rank's bound cores: 4-6 aclnn "
        "launch calls a step held ~0.5-6 ms (thread preempted) at random places on every rank, the "
        "device idles after them; no rank stands out; job-level",
        16,
        6,
        to_plans,
        to_answer,
    ),
    ScenarioSpec(
        "print-to-slow-console",
        "a debug print in every layer's attention and MLP forward on every rank, stdout to a slow "
        "sink: each print blocks ~4.6 ms (python_function <built-in function print>), 8 a step, "
        "the device idles after each; job-level",
        16,
        4,
        pc_plans,
        pc_answer,
    ),
    ScenarioSpec(
        "thp-compaction-node",
        "node 0's hosts with THP defrag=always and fragmented memory: the per-step host packing "
        "aten::cat (4 x [1152,1176] float, 21.7 MB) takes ~10-30 ms there, erratic, vs ~3.4 ms on "
        "node 1; node 0's devices idle at every step start, node 1 waits",
        16,
        6,
        th_plans,
        th_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
)
DEV31_KINDS = tuple(s.name for s in DEV31_SCENARIOS)


__all__ = ["DEV31_KINDS", "DEV31_SCENARIOS"]
