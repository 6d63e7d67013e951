"""Blind held-out set 6: four more fault kinds (written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``: the workload's collectives and their fixed per-op cost,
``Perturb.step_kernel_stalls``, ``Perturb.kernel_swap``, ``Perturb.aicore_mhz`` and the per-rank
launch knobs) with answer keys derived from the simulated timeline and the breakdown the writer
measured (never from typed numbers). Every key carries ``root_cause`` (docs/CONTRACTS.md) and
``evidence`` (what distinguishes the kind in the files). Their question set is
``evals/datasets/generalization_heldout6.yaml``; the kinds are listed in
:mod:`advisor_chat.synth.blind` and described only here. The "how much would fixing it save" numbers
come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place of the files):

- ``hccl-deterministic-reduce``: ``HCCL_DETERMINISTIC=true`` in every rank's launch script (set for
  bit-reproducible loss curves and forgotten): with a distributed optimizer the gradients are
  reduce-scattered per layer and the parameters all-gathered at the end of the step, both 64 MB on
  the same world group and the same links. In deterministic mode HCCL gives up the reduce done inline
  by the transport and reduces in a fixed order in a local buffer: every ``hcom_reduceScatter`` runs
  ~3x as long as the same-size ``hcom_allGather`` while its links move data at the normal bandwidth
  (the extra time is inside the op, outside the transit: communication.json's per-op time split).
  The reduce-scatters no longer hide under the backward; every rank loses the same time, no late rank.
- ``async-ckpt-gil``: asynchronous checkpointing every 3 steps: the save's background thread pickles
  and writes the state while holding Python's GIL, so in the save steps the training thread's
  operator launches wait for the GIL (up to the 5 ms switch interval) every ~9 launches: long
  AscendCL launch calls on the host and the device idle in front of the kernels, on every rank, in
  those steps only; the other steps are normal.
- ``fan-fail-node-throttle``: 2 nodes; node 1's chassis lost a fan: its 8 NPUs heat up and throttle
  their AI Core clock in a cycle (1800 MHz at the start, down to ~1100 MHz, a partial recovery, down
  again), visible on each of the 8 ranks' AI Core Freq counter tracks; their kernels run longer in
  proportion (cube ops fully, vector ops half), node 0 waits for them in the gradient all-reduces.
- ``node-compile-path``: 3 nodes; node 2 runs from another container image whose torch_npu launches
  operators through the online-compile path (``jit_compile=True``): its 8 ranks launch through
  ``aclopCompileAndExecute`` (~75 µs on the host per launch, kernels named by op type) instead of
  the aclnn binaries the other nodes use; their devices idle between kernels and the 16 ranks of
  nodes 0 and 1 wait for them in the collectives.
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
    simulate,
)
from advisor_chat.synth.scenarios import (
    CANN8,
    HCCL_ENV_KEY,
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
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)

COMPILE_API = "aclopCompileAndExecute"


def _job_rc(ranks: int, mechanism: str, category: str, **kw: Any) -> dict[str, Any]:
    """A job-level cause: every rank loses the time, no rank is the culprit."""
    return root_cause(
        mechanism,
        category,
        "job",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        **kw,
    )


def _share(part: np.ndarray, whole: np.ndarray) -> float:
    return round(float(np.median(part.sum(axis=1) / whole.sum(axis=1))), 4)


def _step_times_us(cl: Cluster) -> np.ndarray:
    """[steps] step length (µs)."""
    return np.array([st.end - st.start for st in cl.steps]) / 1000


def _alt(cl: Cluster, plan: Plan) -> Cluster:
    """The same run (ranks, steps, seed) simulated with another plan."""
    return simulate(plan.program, plan.kinds, plan.perturb, cl.ranks, len(cl.steps), cl.seed, 0, 0)


def _op_durs_us(cl: Cluster, pick: Any) -> np.ndarray:
    out = [(op.end - op.start) / 1000 for st in cl.steps for op in st.ops if pick(op)]
    return np.concatenate(out) if out else np.zeros(0)


def _op_transit_ms(cl: Cluster, pick: Any) -> np.ndarray:
    """Per (op, rank): summed HCCS + RDMA link time (ms), what communication.json calls transit."""
    out = []
    for st in cl.steps:
        for op in st.ops:
            if pick(op):
                wire = op.kind.transport != 2
                out.append(np.where(wire & (op.kind.transport >= 0), op.link_ms, 0.0).sum(axis=1))
    return np.concatenate(out) if out else np.zeros(0)


def _link_bw(cl: Cluster, pick: Any) -> dict[str, float]:
    """Median link bandwidth (GB/s) per transport of the collectives ``pick`` accepts."""
    out: dict[str, list[float]] = {"HCCS": [], "RDMA": []}
    for st in cl.steps:
        for op in st.ops:
            if not pick(op):
                continue
            k = op.kind
            ok = (k.transport == 0) | (k.transport == 1)
            bw = np.where(ok & (op.link_ms > 0), op.link_mb / np.maximum(op.link_ms, 1e-12), np.nan)
            out["HCCS"].extend(bw[k.transport == 0].tolist())
            out["RDMA"].extend(bw[k.transport == 1].tolist())
    return {t: round(float(np.nanmedian(v)), 3) if v else 0.0 for t, v in out.items()}


def _kernel_gaps_us(cl: Cluster, r: int, steps: list[int] | None = None) -> list[float]:
    """Device idle (µs) before each kernel that directly follows another kernel in the program."""
    after: list[int] = []
    prev = False
    j = 0
    for it in cl.program:
        if isinstance(it, Kernel):
            if prev and j > 0:
                after.append(j)
            prev = True
            j += 1
        else:
            prev = False
    out: list[float] = []
    for si, st in enumerate(cl.steps):
        if steps is not None and si not in steps:
            continue
        for q in after:
            out.append(float(st.k_start[r, q] - st.k_start[r, q - 1] - st.k_dur[r, q - 1]) / 1000)
    return out


def _node_ranks(node: int) -> list[int]:
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


# ---------------------------------------------------------------- hccl-deterministic-reduce
DET_MB = (
    64.0  # per-layer gradient bucket (reduce-scatter) = per-layer parameter bucket (all-gather)
)
DET_REDUCE_US_PER_MB = 125.0  # fixed-order reduction in the local buffer (µs per MB of the op)
DET_NORM_US = 160.0  # the same for the tiny grad-norm all-reduce (launch + ordered reduce)
DET_RS_TAG = "grad_rs"
DET_AG_TAG = "param_ag"


def det_program(deterministic: bool = True) -> list[Item]:
    """transformer() with a distributed optimizer: per-layer gradient reduce-scatter, parameter all-gather.

    ``deterministic``: every reducing collective carries the fixed-order local reduction.
    """
    base = transformer(layers=4, grad_mb=DET_MB, grad_overlap=6)
    lat = DET_MB * DET_REDUCE_US_PER_MB if deterministic else 0.0
    prog: list[Item] = []
    n_layers = 0
    for it in base:
        if isinstance(it, Collective) and it.op_type == "hcom_allReduce_" and it.size_mb == DET_MB:
            prog.append(
                Collective(
                    "hcom_reduceScatter_",
                    "world",
                    DET_MB,
                    overlap=it.overlap,
                    tag=DET_RS_TAG,
                    latency_us=lat,
                )
            )
            n_layers += 1
        elif isinstance(it, Collective) and it.op_type == "hcom_allReduce_":
            # the grad-norm all-reduce (one fp32 per rank)
            prog.append(
                Collective(
                    "hcom_allReduce_",
                    "world",
                    0.004,
                    dtype="FP32",
                    tag="grad_norm",
                    latency_us=DET_NORM_US if deterministic else 0.0,
                )
            )
        elif isinstance(it, Collective) and it.op_type == "hcom_allGather_":
            prog += [
                Collective("hcom_allGather_", "world", DET_MB, tag=DET_AG_TAG)
                for _ in range(n_layers)
            ]
        else:
            prog.append(it)
    return prog


def _det_info(ranks: int, deterministic: bool = True) -> Any:
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    hccl = dict(info.user_metadata[HCCL_ENV_KEY])
    if deterministic:
        hccl["HCCL_DETERMINISTIC"] = "true"
    info.user_metadata[HCCL_ENV_KEY] = hccl
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(use_distributed_optimizer=True)
    info.user_metadata["distributed_args"] = dist
    return info


def det_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return {
        "": Plan(
            det_program(), group_kinds(ranks, 1), default_perturb(ranks), _det_info(ranks), tp=1
        )
    }


def det_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: reduce-scatters ~3x the same-size all-gathers at normal link bandwidth; exposed."""
    cl: Cluster = m[""]["cluster"]
    rs = _op_durs_us(cl, lambda op: op.item.tag == DET_RS_TAG)
    ag = _op_durs_us(cl, lambda op: op.item.tag == DET_AG_TAG)
    rs_tr = _op_transit_ms(cl, lambda op: op.item.tag == DET_RS_TAG) * 1000
    ag_tr = _op_transit_ms(cl, lambda op: op.item.tag == DET_AG_TAG) * 1000
    bw_rs = _link_bw(cl, lambda op: op.item.tag == DET_RS_TAG)
    bw_ag = _link_bw(cl, lambda op: op.item.tag == DET_AG_TAG)
    wait = coll_wait_us(m)
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    alt = _alt(
        cl, Plan(det_program(False), cl.kinds, default_perturb(ranks), _det_info(ranks, False))
    )
    base_step = float(np.median(_step_times_us(alt)))
    med_step = float(np.median(_step_times_us(cl)))
    n_rs = sum(1 for it in cl.program if isinstance(it, Collective) and it.tag == DET_RS_TAG)
    sync_rs = np.concatenate(
        [op.sync_ns / 1000 for st in cl.steps for op in st.ops if op.item.tag == DET_RS_TAG]
    )
    nums = {
        "reduce_scatter_per_step": n_rs,
        "allgather_per_step": n_rs,
        "op_size_mb": DET_MB,
        "reduce_scatter_us_median": _r(float(np.median(rs))),
        "allgather_us_median": _r(float(np.median(ag))),
        "reduce_scatter_vs_allgather_ratio": round(float(np.median(rs) / np.median(ag)), 3),
        "reduce_scatter_transit_us_median": _r(float(np.median(rs_tr))),
        "allgather_transit_us_median": _r(float(np.median(ag_tr))),
        "reduce_scatter_transit_share": round(float(np.median(rs_tr) / np.median(rs)), 4),
        "reduce_scatter_hccs_bandwidth_gbps": bw_rs["HCCS"],
        "allgather_hccs_bandwidth_gbps": bw_ag["HCCS"],
        "reduce_scatter_rdma_bandwidth_gbps": bw_rs["RDMA"],
        "allgather_rdma_bandwidth_gbps": bw_ag["RDMA"],
        "reduce_scatter_sync_us_median": _r(float(np.median(sync_rs))),
        "median_wait_us_per_step": _r(float(np.median(wait.mean(axis=1)))),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_comm_not_overlapped_us_per_step": _r(float(np.median(notov.mean(axis=1)))),
        "median_step_us": _r(med_step),
        "median_step_us_non_deterministic": _r(base_step),
        "saving_us_per_step": _r(med_step - base_step),
        "saving_share_of_step": round((med_step - base_step) / med_step, 4),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _job_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "reduce_scatter_us": nums["reduce_scatter_us_median"],
            "allgather_us": nums["allgather_us_median"],
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        env_var="HCCL_DETERMINISTIC",
        env_value="true",
        env_where="profiler_metadata.json hccl_env",
        slow_op="hcom_reduceScatter",
        normal_op="hcom_allGather",
        same_size_mb=DET_MB,
        same_group="world",
        link_bandwidth_normal=True,
        extra_time_outside_transit=True,
        fix="unset HCCL_DETERMINISTIC (or set false) outside reproducibility runs",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- async-ckpt-gil
CK_SCALE = 0.3  # a ~3B model: kernels of ~10-700 µs
CK_EVERY = 3  # save interval (steps); the first save in the capture is its second step
CK_PHASE = 1
CK_STALL_EVERY = 9  # a launch waits for the GIL about every 9 launches while the writer pickles
CK_SWITCH_US = 5000.0  # sys.getswitchinterval(): the longest wait for the GIL
CK_GRAD_MB = 40.0


def ck_program() -> list[Item]:
    return transformer(layers=4, scale=CK_SCALE, grad_mb=CK_GRAD_MB, grad_overlap=4)


def _ck_steps(steps: int) -> list[int]:
    """Step indexes with a save in flight (a one-step capture: that step)."""
    return [si for si in range(steps) if si % CK_EVERY == CK_PHASE] or [0]


def ck_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = ck_program()
    nk = sum(1 for it in prog if isinstance(it, Kernel))
    rng = np.random.default_rng(seed + 613)
    p = default_perturb(ranks)
    for si in _ck_steps(steps):
        # every rank saves its own shard the same way: the GIL waits fall on about the same
        # launches everywhere (a little jitter per rank)
        picks = np.flatnonzero(rng.random(nk) < 1.0 / CK_STALL_EVERY)
        picks = picks[picks >= 2]
        amp = CK_SWITCH_US * rng.uniform(0.3, 1.0, len(picks))
        at: dict[int, dict[int, float]] = {}
        for r in range(ranks):
            jit = rng.uniform(0.92, 1.08, len(picks))
            at[r] = {
                int(j): round(float(a * f), 1) for j, a, f in zip(picks, amp, jit, strict=True)
            }
        p.step_kernel_stalls[si] = at
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    info.user_metadata["checkpoint"] = {"save_interval": CK_EVERY, "async_save": True}
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def ck_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: long launch calls (GIL waits) and device idle on every rank in the save steps only."""
    cl: Cluster = m[""]["cluster"]
    save = _ck_steps(steps)
    other = [si for si in range(steps) if si not in save] or save
    step_ids = [st.step_id for st in cl.steps]
    api_save = np.concatenate([cl.steps[si].k_api_dur.ravel() for si in save]) / 1000
    api_other = np.concatenate([cl.steps[si].k_api_dur.ravel() for si in other]) / 1000
    long_calls = [
        int((cl.steps[si].k_api_dur >= 1_000_000).sum(axis=1).min()) for si in save
    ]  # per save step, the fewest >= 1 ms launch calls on any rank
    long_other = int(sum((cl.steps[si].k_api_dur >= 1_000_000).sum() for si in other))
    free = col(m, "free_us")
    step = col(m, "step_us")
    st_us = _step_times_us(cl)
    alt = _alt(cl, Plan(cl.program, cl.kinds, default_perturb(ranks), _info(CANN8, 1, ranks)))
    alt_us = _step_times_us(alt)
    diff = st_us - alt_us
    gaps_save = [float(np.sum(_kernel_gaps_us(cl, r, save))) / len(save) for r in range(ranks)]
    gaps_other = [float(np.sum(_kernel_gaps_us(cl, r, other))) / len(other) for r in range(ranks)]
    share_save = free[:, save].sum(axis=1) / step[:, save].sum(axis=1)
    nums = {
        "save_steps": [step_ids[si] for si in save],
        "save_interval_steps": CK_EVERY,
        "median_step_us_save_steps": _r(float(np.median(st_us[save]))),
        "median_step_us_other_steps": _r(float(np.median(st_us[other]))),
        "save_step_ratio": round(float(np.median(st_us[save]) / np.median(st_us[other])), 3),
        "median_free_us_save_steps": _r(float(np.median(free[:, save]))),
        "median_free_us_other_steps": _r(float(np.median(free[:, other]))),
        "median_free_share_save_steps": round(float(np.median(share_save)), 4),
        "launch_api_us_median_save_steps": _r(float(np.median(api_save))),
        "launch_api_us_median_other_steps": _r(float(np.median(api_other))),
        "launch_api_us_max_save_steps": _r(float(api_save.max())),
        "long_launch_calls_per_save_step_min_rank": min(long_calls),
        "long_launch_calls_other_steps": long_other,
        "device_gap_us_per_save_step_median_rank": _r(float(np.median(gaps_save))),
        "device_gap_us_per_other_step_median_rank": _r(float(np.median(gaps_other))),
        "free_share_spread_across_ranks_save_steps": round(
            float(share_save.max() - share_save.min()), 4
        ),
        "saving_us_per_save_step": _r(float(np.median(diff[save]))),
        "saving_us_per_step_average": _r(float(diff.mean())),
    }
    key = _key([], "scheduling", ["host-dispatch-bound"], "free_us", nums)
    rc = _job_rc(
        ranks,
        "host_stall",
        "scheduling",
        steps=nums["save_steps"],
        metrics={
            "launch_api_us_max": nums["launch_api_us_max_save_steps"],
            "free_share_save_steps": nums["median_free_share_save_steps"],
            "saving_us_per_save_step": nums["saving_us_per_save_step"],
            "saving_us_per_step": nums["saving_us_per_step_average"],
        },
    )
    return _with_evidence(
        key,
        rc,
        steps=nums["save_steps"],
        period_steps=CK_EVERY,
        host_api_long="AscendCL launch calls (aclnn*) of several ms",
        where="host launch calls in trace_view.json (CANN API) during the save steps",
        cause="asynchronous checkpoint save thread holding the Python GIL",
        gil_switch_interval_ms=CK_SWITCH_US / 1000,
        kernels_normal=True,
        same_kernel_count=True,
        no_step_start_idle=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        fix="save from a separate process (or write without the GIL), or save less often",
    )


# ---------------------------------------------------------------- fan-fail-node-throttle
FAN_NODE = 1
FAN_CYCLE = (1800.0, 1400.0, 1100.0, 1500.0, 1150.0, 1100.0)  # MHz per step, the hottest card
FAN_CARD_STEP = 40.0  # cards further from the failed fan run a little cooler (MHz per slot)
FAN_VEC_WEIGHT = 0.5  # vector kernels are partly memory-bound: half the clock's effect


def _fan_mhz(steps: int, local: int) -> list[float]:
    out = []
    for si in range(steps):
        base = FAN_CYCLE[si % len(FAN_CYCLE)] if steps > 1 else min(FAN_CYCLE)
        out.append(
            AICORE_MHZ
            if base >= AICORE_MHZ
            else min(AICORE_MHZ, base + FAN_CARD_STEP * (local % 4))
        )
    return out


def _clock_factor(k: Kernel, mhz: float) -> float:
    f = AICORE_MHZ / mhz
    if k.core in ("AI_CORE", "MIX_AIC"):
        return f
    return 1.0 + FAN_VEC_WEIGHT * (f - 1.0)


def fan_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4, grad_mb=128.0, grad_overlap=3)
    kernels = [it for it in prog if isinstance(it, Kernel)]
    p = default_perturb(ranks)
    for r in _node_ranks(FAN_NODE):
        mhz = _fan_mhz(steps, r % RANKS_PER_NODE)
        p.aicore_mhz[r] = [(si, f) for si, f in enumerate(mhz)]
        for si, f in enumerate(mhz):
            if f >= AICORE_MHZ:
                continue
            for j, k in enumerate(kernels):
                p.kernel_swap[(si, r, j)] = dataclasses.replace(
                    k, dur_us=round(k.dur_us * _clock_factor(k, f), 2)
                )
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def fan_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one node's 8 cards cycle their clock down; their compute grows; node 0 waits."""
    cl: Cluster = m[""]["cluster"]
    node = _node_ranks(FAN_NODE)
    rest = [r for r in range(ranks) if r not in node]
    step_ids = [st.step_id for st in cl.steps]
    mhz = np.array([_fan_mhz(steps, r % RANKS_PER_NODE) for r in node])  # [8, S]
    hot = [si for si in range(steps) if mhz[:, si].min() < AICORE_MHZ]
    cool = [si for si in range(steps) if si not in hot]
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    mm = [j for j, k in enumerate(cl.kernels) if k.op_type == "MatMulV2"]
    mm_us = np.array([st.k_dur[:, mm].mean(axis=1) for st in cl.steps]).T / 1000  # [R, S]
    ratio_by_step = [
        round(float(np.median(comp[node, si]) / np.median(comp[rest, si])), 3)
        for si in range(steps)
    ]
    alt = _alt(cl, Plan(cl.program, cl.kinds, default_perturb(ranks), _info(CANN8, 1, ranks)))
    diff = _step_times_us(cl) - _step_times_us(alt)
    vic = victims_by_wait(wait, node, hot or None)
    nums = {
        "node": FAN_NODE,
        "node_ranks": node,
        "throttled_steps": [step_ids[si] for si in hot],
        "full_clock_steps": [step_ids[si] for si in cool],
        "nominal_mhz": AICORE_MHZ,
        "node_min_mhz": float(mhz.min()),
        "node_min_mhz_by_step": [float(mhz[:, si].min()) for si in range(steps)],
        "other_nodes_mhz": AICORE_MHZ,
        "node_vs_others_computing_ratio_by_step": ratio_by_step,
        "node_vs_others_computing_ratio_max": max(ratio_by_step),
        "node_computing_us_per_step": _r(float(np.median(comp[node].mean(axis=1)))),
        "others_computing_us_per_step": _r(float(np.median(comp[rest].mean(axis=1)))),
        "node_matmul_us_median_hottest_step": _r(
            float(np.median(mm_us[node, int(np.argmin(mhz.min(axis=0)))]))
        ),
        "others_matmul_us_median": _r(float(np.median(mm_us[rest]))),
        "others_wait_us_per_step": _r(float(np.median(wait[rest].mean(axis=1)))),
        "node_wait_us_per_step": _r(float(np.median(wait[node].mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "saving_us_per_step_average": _r(float(diff.mean())),
        "saving_us_worst_step": _r(float(diff.max())),
    }
    key = _key(node, "compute", ["compute-straggler-hidden"], "computing_us", nums)
    key["culprit_node"] = FAN_NODE
    key["root_cause"] = root_cause(
        "compute_straggler",
        "compute",
        "ranks",
        ranks=node,
        victims=vic,
        not_slow=not_slow_sample(ranks, node, vic),
        steps=nums["throttled_steps"],
        metrics={
            "node_min_mhz": nums["node_min_mhz"],
            "computing_ratio_max": nums["node_vs_others_computing_ratio_max"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "saving_us_per_step": nums["saving_us_per_step_average"],
        },
    )
    key["evidence"] = {
        "node": FAN_NODE,
        "node_ranks": node,
        "counter": "AI Core Freq",
        "where": "trace_view.json AI Core Freq counter track of each rank",
        "cycling": True,
        "throttled_steps": nums["throttled_steps"],
        "min_mhz": nums["node_min_mhz"],
        "nominal_mhz": AICORE_MHZ,
        "all_8_cards_of_node": True,
        "kernels_same_shapes": True,
        "cube_ops_scale_with_clock": True,
        "other_node_clock_normal": True,
        "links_normal": True,
        "cause": "cooling (fan / airflow) of one server: thermal throttling",
        "fix": "check the server's fans / BMC temperature and npu-smi temperatures, then the airflow",
    }
    return key


# ---------------------------------------------------------------- node-compile-path
NC_SCALE = 0.25
NC_API_US = 75.0  # aclopCompileAndExecute per call: compile-cache lookup, op build, launch
NC_GAP_US = 82.0  # device idle before each kernel on that path
NC_ACLNN_ONLY = frozenset(
    {"FlashAttentionScore", "FlashAttentionScoreGrad", "ForeachMulScalar", "ForeachAddList"}
)


def _nc_node(ranks: int) -> int:
    return ranks // RANKS_PER_NODE - 1


def nc_program() -> list[Item]:
    return transformer(layers=4, scale=NC_SCALE, grad_mb=32.0, grad_overlap=3)


def nc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = nc_program()
    kernels = [it for it in prog if isinstance(it, Kernel)]
    p = default_perturb(ranks)
    for r in _node_ranks(_nc_node(ranks)):
        p.host_bound[r] = True
        p.api_us[r] = NC_API_US
        p.gap_us[r] = NC_GAP_US
        for j, k in enumerate(kernels):
            if k.op_type not in NC_ACLNN_ONLY:
                p.kernel_swap[(-1, r, j)] = dataclasses.replace(k, name=k.op_type, api=COMPILE_API)
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def nc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one node launches through the online-compile path; the other nodes wait for it."""
    cl: Cluster = m[""]["cluster"]
    nd = _nc_node(ranks)
    node = _node_ranks(nd)
    rest = [r for r in range(ranks) if r not in node]
    comp_j = [j for j, k in enumerate(cl.kernels) if k.op_type not in NC_ACLNN_ONLY]
    api = np.array([st.k_api_dur[:, comp_j].mean(axis=1) for st in cl.steps]).T / 1000  # [R, S]
    gaps = np.array([float(np.median(_kernel_gaps_us(cl, r))) for r in range(ranks)])
    free = col(m, "free_us")
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    share = free.sum(axis=1) / step.sum(axis=1)
    alt = _alt(cl, Plan(cl.program, cl.kinds, default_perturb(ranks), _info(CANN8, 1, ranks)))
    base_step = float(np.median(_step_times_us(alt)))
    med_step = float(np.median(_step_times_us(cl)))
    vic = victims_by_wait(wait, node)
    nums = {
        "node": nd,
        "node_ranks": node,
        "kernels_per_step": len(cl.kernels),
        "compile_path_launches_per_step_node": len(comp_j),
        "compile_path_launches_per_step_others": 0,
        "node_launch_api_us_median": _r(float(np.median(api[node]))),
        "others_launch_api_us_median": _r(float(np.median(api[rest]))),
        "node_device_gap_us_median": _r(float(np.median(gaps[node]))),
        "others_device_gap_us_median": _r(float(np.median(gaps[rest]))),
        "node_free_share": round(float(np.median(share[node])), 4),
        "others_free_share": round(float(np.median(share[rest])), 4),
        "node_computing_us_per_step": _r(float(np.median(comp[node].mean(axis=1)))),
        "others_computing_us_per_step": _r(float(np.median(comp[rest].mean(axis=1)))),
        "others_wait_us_per_step": _r(float(np.median(wait[rest].mean(axis=1)))),
        "node_wait_us_per_step": _r(float(np.median(wait[node].mean(axis=1)))),
        "median_step_us": _r(med_step),
        "median_step_us_same_path_everywhere": _r(base_step),
        "saving_us_per_step": _r(med_step - base_step),
    }
    key = _key(node, "scheduling", ["host-dispatch-bound"], "free_us", nums)
    key["culprit_node"] = nd
    key["root_cause"] = root_cause(
        "host_stall",
        "scheduling",
        "ranks",
        ranks=node,
        victims=vic,
        not_slow=not_slow_sample(ranks, node, vic),
        metrics={
            "node_launch_api_us": nums["node_launch_api_us_median"],
            "node_device_gap_us": nums["node_device_gap_us_median"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    key["evidence"] = {
        "node": nd,
        "node_ranks": node,
        "host_api": COMPILE_API,
        "other_nodes_api": "aclnn*",
        "kernel_names": "op type only (e.g. MatMulV2) on that node, aclnn*_ names elsewhere",
        "jit_compile": True,
        "same_kernel_count": True,
        "kernels_normal": True,
        "same_every_step": True,
        "links_normal": True,
        "fix": "same image / torch_npu on every node; torch_npu.npu.set_compile_mode(jit_compile=False)",
    }
    return key


# ---------------------------------------------------------------- registry
HELDOUT6_SCENARIOS = (
    ScenarioSpec(
        "hccl-deterministic-reduce",
        "blind held-out kind (set 6)",
        16,
        3,
        det_plans,
        det_answer,
    ),
    ScenarioSpec(
        "async-ckpt-gil",
        "blind held-out kind (set 6)",
        16,
        6,
        ck_plans,
        ck_answer,
    ),
    ScenarioSpec(
        "fan-fail-node-throttle",
        "blind held-out kind (set 6)",
        16,
        6,
        fan_plans,
        fan_answer,
        min_ranks=16,
        rank_multiple=RANKS_PER_NODE,
    ),
    ScenarioSpec(
        "node-compile-path",
        "blind held-out kind (set 6)",
        24,
        3,
        nc_plans,
        nc_answer,
        min_ranks=16,
        rank_multiple=RANKS_PER_NODE,
    ),
)
HELDOUT6_KINDS = tuple(s.name for s in HELDOUT6_SCENARIOS)


__all__ = ["HELDOUT6_KINDS", "HELDOUT6_SCENARIOS"]
