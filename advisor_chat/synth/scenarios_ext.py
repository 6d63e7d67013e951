"""Issue-12 scenarios (root-cause mechanisms) and the ``root_cause`` object of every answer key.

Every fault is planted as a mechanism in the simulation (``advisor_chat.synth.model``): waits,
bubbles and idle time come out of the timeline, never painted into columns. The ``root_cause``
object (diagnosis contract, docs/CONTRACTS.md) names the culprit from the plan and the victims and
numbers from the simulated timeline / the breakdown the writer measured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
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
    HCCL_ENV_KEY,
    MM_SHAPE,
    Plan,
    ScenarioSpec,
    _deg,
    _info,
    _key,
    _late,
    _link,
    _mm_slow,
    _r,
    _seed_rank12_slow,
    _stall_steps,
    _straggler,
    col,
    group_kinds,
    slow_link_answer,
    transformer,
)
from advisor_chat.synth.writer import RunInfo

NOT_SLOW_SAMPLE = 4  # how many not-slow ranks the key lists


# ---------------------------------------------------------------- measured helpers
def step_ids(m: dict[str, Any], sub: str = "") -> list[int]:
    """Captured step ids, in order."""
    return [int(s["step"]) for s in m[sub]["ranks"][0]]


def coll_wait_us(m: dict[str, Any], sub: str = "") -> np.ndarray:
    """[ranks, steps] collective Wait Time (µs) per rank and step, from the simulation.

    Wait = Synchronization (head start before the last member arrives) + Notify_Wait inside the
    transfer phase, summed over the collectives (not point-to-point ops) written for that rank.
    """
    cl: Cluster = m[sub]["cluster"]
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if op.item.peer_op:
                continue
            w = op.sync_ns / 1e3 + np.asarray(op.wait_extra_ms) * 1e3
            if op.present is not None:
                w = np.where(op.present, w, 0.0)
            out[:, si] += w
    return out


def kernel_counts(m: dict[str, Any], sub: str = "") -> np.ndarray:
    """[ranks, steps] device tasks written (kernels + collectives) per rank and step."""
    cl: Cluster = m[sub]["cluster"]
    out = np.zeros((cl.ranks, len(cl.steps)), dtype=np.int64)
    for si, st in enumerate(cl.steps):
        nk = st.k_start.shape[1]
        out[:, si] += st.k_present.sum(axis=1) if st.k_present is not None else nk
        for op in st.ops:
            out[:, si] += op.present.astype(np.int64) if op.present is not None else 1
    return out


def victims_by_wait(
    wait: np.ndarray,
    culprits: Sequence[int],
    cols: Sequence[int] | None = None,
    min_us: float = 1000,
) -> list[int]:
    """Ranks (not culprits) whose mean collective wait over ``cols`` exceeds the culprits' by ``min_us``."""
    sel = wait if cols is None else wait[:, list(cols)]
    per = sel.mean(axis=1)
    base = float(per[list(culprits)].max()) if culprits else float(per.min())
    return [r for r in range(wait.shape[0]) if r not in culprits and per[r] - base >= min_us]


def not_slow_sample(ranks: int, exclude: Iterable[int], prefer: Sequence[int] = ()) -> list[int]:
    """A few ranks that must not be called slow: from ``prefer`` first, then the lowest ids."""
    ex = set(exclude)
    out: list[int] = []
    for r in [*prefer, *range(ranks)]:
        if r not in ex and r not in out:
            out.append(r)
        if len(out) >= NOT_SLOW_SAMPLE:
            break
    return sorted(out)


def root_cause(
    mechanism: str,
    category: str,
    culprit_kind: str,
    *,
    ranks: Iterable[int] = (),
    link: tuple[int, int] | None = None,
    transport: str = "",
    stage: int | None = None,
    operator: str = "",
    shape: str = "",
    events: Iterable[tuple[int, int]] = (),
    victims: Iterable[int] = (),
    excluded: Iterable[int] = (),
    not_slow: Iterable[int] = (),
    steps: Iterable[int] = (),
    metrics: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The answer key's ``root_cause`` object.

    Keys of the diagnosis contract, plus ``steps`` (scope, [] = all steps) and ``metrics`` (the
    numbers the checks need, unit-suffixed).
    """
    return {
        "mechanism": mechanism,
        "category": category,
        "culprit_kind": culprit_kind,
        "culprit_ranks": sorted(int(r) for r in ranks),
        "culprit_link": [int(link[0]), int(link[1])] if link is not None else None,
        "culprit_transport": transport,
        "culprit_stage": stage,
        "operator": operator,
        "shape": shape,
        "events": [[int(s), int(r)] for s, r in events],
        "victim_ranks": sorted(int(r) for r in victims),
        "excluded_steps": [int(s) for s in excluded],
        "not_slow_ranks": sorted(int(r) for r in not_slow),
        "steps": [int(s) for s in steps],
        "metrics": metrics or {},
    }


def _rank_cause(
    m: dict[str, Any],
    ranks: int,
    culprit: int,
    mechanism: str,
    category: str,
    cols: Sequence[int] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """A single-rank culprit: victims are the ranks that wait for it in collectives."""
    wait = coll_wait_us(m)
    vic = victims_by_wait(wait, [culprit], cols)
    sel = wait if cols is None else wait[:, list(cols)]
    metrics = {
        "culprit_wait_us_per_step": _r(sel[culprit].mean()),
        "victim_wait_us_per_step": _r(sel[vic].mean()) if vic else 0.0,
        "victim_lost_us_per_step": _r(sel[vic].mean() - sel[culprit].mean()) if vic else 0.0,
    }
    metrics.update(kw.pop("metrics", {}))
    return root_cause(
        mechanism,
        category,
        "rank",
        ranks=[culprit],
        victims=vic,
        not_slow=not_slow_sample(ranks, [culprit], vic),
        metrics=metrics,
        **kw,
    )


def _all_ranks_cause(
    m: dict[str, Any], ranks: int, mechanism: str, category: str, **kw: Any
) -> dict[str, Any]:
    """A job-level cause: every rank loses the time, no rank is the culprit."""
    return root_cause(
        mechanism,
        category,
        "job",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        **kw,
    )


# ---------------------------------------------------------------- root causes of the first ten
def rc_seed_rank12(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Host dispatch stall on one rank; the others wait for it in every collective."""
    slow = _seed_rank12_slow(ranks)
    free = col(m, "free_us")
    others = [r for r in range(ranks) if r != slow]
    excess = float(free[slow].mean() - np.median(free[others].mean(axis=1)))
    return _rank_cause(
        m,
        ranks,
        slow,
        "host_stall",
        "scheduling",
        metrics={"culprit_free_excess_us_per_step": _r(excess)},
    )


def rc_matmul(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """One rank's MatMul at one shape is slower: a compute straggler with its operator+shape."""
    slow = _mm_slow(ranks)
    comp = col(m, "computing_us")
    others = [r for r in range(ranks) if r != slow]
    excess = float(comp[slow].mean() - np.median(comp[others].mean(axis=1)))
    return _rank_cause(
        m,
        ranks,
        slow,
        "compute_straggler",
        "compute",
        operator="MatMulV2",
        shape=MM_SHAPE,
        metrics={"culprit_computing_excess_us_per_step": _r(excess)},
    )


def rc_slow_link(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """A degraded link: every member of the groups using it waits for the transfer."""
    src, dst, tr = _link(ranks)
    cl: Cluster = m[""]["cluster"]
    members: set[int] = set()
    for kind in cl.kinds.values():
        for mem in kind.members:
            if src in mem and dst in mem:
                members.update(mem)
    ends = {src, dst}
    victims = sorted(members - ends)
    nums = slow_link_answer(ranks, steps, m)["expected_numbers"]
    return root_cause(
        "slow_link",
        "communication",
        "link",
        link=(src, dst),
        transport=tr,
        victims=victims,
        not_slow=not_slow_sample(ranks, ends, victims),
        metrics={
            "link_endpoint_ranks": sorted(ends),
            "slow_link_bandwidth_gbps": nums["slow_link_bandwidth_gbps"],
            "median_peer_bandwidth_gbps": nums["median_peer_bandwidth_gbps"],
            "bandwidth_ratio": nums["bandwidth_ratio"],
        },
    )


def rc_comm_bound(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """TP all-reduce exposed on every rank: one job-level cause."""
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    share = notov.sum(axis=1) / step.sum(axis=1)
    return _all_ranks_cause(
        m,
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "min_comm_not_overlapped_share": round(float(share.min()), 4),
            "max_comm_not_overlapped_share": round(float(share.max()), 4),
        },
    )


def rc_cann(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Profile vs baseline: the mc2 fusion is gone after the upgrade."""
    return _all_ranks_cause(
        m,
        ranks,
        "regression",
        "communication",
        operator="MatmulAllReduce",
        metrics={"baseline_profile": "before", "profile": "after"},
    )


def rc_dataloader(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Every rank idles at the start of the stall steps (input pipeline)."""
    ids = step_ids(m)
    stall = [ids[i] for i in _stall_steps(steps)]
    free = col(m, "free_us")
    normal = [i for i in range(steps) if i not in _stall_steps(steps)]
    nums = {"median_free_us_stall_steps": _r(float(np.median(free[:, _stall_steps(steps)])))}
    if normal:
        nums["median_free_us_other_steps"] = _r(float(np.median(free[:, normal])))
    return _all_ranks_cause(m, ranks, "job_idle", "scheduling", steps=stall, metrics=nums)


def rc_wait_skew(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """One rank reaches the first collective of the first step late: one event."""
    late = _late(ranks)
    ids = step_ids(m)
    wait = coll_wait_us(m)
    vic = victims_by_wait(wait, [late], [0])
    return root_cause(
        "step_events",
        "scheduling",
        "steps",
        ranks=[late],
        events=[(ids[0], late)],
        victims=vic,
        not_slow=not_slow_sample(ranks, [late], vic),
        steps=[ids[0]],
        metrics={
            "victim_wait_us_event_step": _r(wait[vic, 0].mean()) if vic else 0.0,
            "culprit_wait_us_event_step": _r(wait[late, 0]),
        },
    )


def rc_degradation(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """One rank's host stall before a collective grows every step."""
    slow = _deg(ranks)
    cols = list(range(1, steps)) if steps > 1 else None
    return _rank_cause(m, ranks, slow, "degradation", "scheduling", cols)


def rc_straggler(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """One rank computes longer; the others wait for it in every collective."""
    slow = _straggler(ranks)
    comp = col(m, "computing_us")
    others = [r for r in range(ranks) if r != slow]
    excess = float(comp[slow].mean() - np.median(comp[others].mean(axis=1)))
    return _rank_cause(
        m,
        ranks,
        slow,
        "compute_straggler",
        "compute",
        metrics={"culprit_computing_excess_us_per_step": _r(excess)},
    )


def rc_healthy(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Nothing planted: say what dominates every rank."""
    step = col(m, "step_us")
    shares = {
        "computing": col(m, "computing_us").sum() / step.sum(),
        "communication_not_overlapped": col(m, "comm_not_overlapped_us").sum() / step.sum(),
        "free": col(m, "free_us").sum() / step.sum(),
    }
    dom = max(shares, key=lambda x: shares[x])
    return root_cause(
        "no_culprit",
        "none",
        "none",
        not_slow=not_slow_sample(ranks, []),
        metrics={"dominant": dom, **{f"{k}_share": round(float(v), 4) for k, v in shares.items()}},
    )


EXISTING_ROOT_CAUSES = {
    "seed-rank12": rc_seed_rank12,
    "matmul-shape-regression": rc_matmul,
    "slow-link": rc_slow_link,
    "comm-bound-no-overlap": rc_comm_bound,
    "cann-upgrade-pair": rc_cann,
    "dataloader-stall": rc_dataloader,
    "hccl-wait-skew": rc_wait_skew,
    "degradation": rc_degradation,
    "compute-straggler-hidden": rc_straggler,
    "healthy": rc_healthy,
}


# ---------------------------------------------------------------- pipeline-stage-imbalance
PP_MICRO = 4  # micro-batches per step
PP_STAGE0_PAYLOAD = 6.0  # stage 0's TP all-reduce payload factor (TP group of 8 on one node)


def pp_payload_factor(ranks: int) -> float:
    """Stage 0's TP all-reduce payload factor.

    Raised for TP groups smaller than a node so that stage 0 stays communication-bound at every
    size: a ring all-reduce over g ranks moves (g-1)/g of the payload per rank.
    """
    g = max(2, ranks // 2)
    per_rank = (g - 1) / g
    ref = (RANKS_PER_NODE - 1) / RANKS_PER_NODE
    return PP_STAGE0_PAYLOAD * max(1.0, ref / per_rank)


PP_TP_MB = 24.0
PP_ACT_MB = 16.0


def _layer_kernels(tp: int = 1) -> tuple[list[Kernel], list[Kernel]]:
    """Forward and backward kernels of one transformer layer (no collectives)."""
    prog = transformer(layers=1, tp=1, grad=False)
    ks = [it for it in prog if isinstance(it, Kernel)]
    # transformer(layers=1): 10 forward kernels, 12 backward kernels, then 3 optimizer kernels
    return ks[:10], ks[10:22]


def _opt_kernels() -> list[Kernel]:
    prog = transformer(layers=1, tp=1, grad=False)
    return [it for it in prog if isinstance(it, Kernel)][22:]


def pipeline_program() -> list[Item]:
    """1F1B steady state of one stage.

    Per micro-batch a layer forward + backward with a TP all-reduce after each, then the
    activation hand-off stage 0 → stage 1 (send/receive pair).
    """
    fwd, bwd = _layer_kernels()
    prog: list[Item] = []
    for _ in range(PP_MICRO):
        prog += fwd
        prog.append(Collective("hcom_allReduce_", "tp", PP_TP_MB, tag="stage_ar"))
        prog += bwd
        prog.append(Collective("hcom_allReduce_", "tp", PP_TP_MB, tag="stage_ar"))
        prog.append(Collective("hcom_send_", "pp", PP_ACT_MB, peer_op="hcom_receive_"))
    prog += _opt_kernels()
    return prog


def pipeline_kinds(ranks: int) -> dict[str, GroupKind]:
    """TP group = one stage (ranks 0..N/2-1, N/2..N-1); PP groups = pairs (r, r + N/2)."""
    half = ranks // 2
    return {
        "tp": make_group_kind(
            "tp", "tp", [list(range(half)), list(range(half, ranks))], ranks, BASE_COMM_US, 1
        ),
        "pp": make_group_kind(
            "pp", "pp", [[r, r + half] for r in range(half)], ranks, BASE_COMM_US, 3
        ),
    }


def _info_pp(ranks: int) -> RunInfo:
    info = _info(CANN8, ranks // 2, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(
        tensor_model_parallel_size=ranks // 2, pipeline_model_parallel_size=2, data_parallel_size=1
    )
    info.user_metadata["distributed_args"] = dist
    return info


def pipeline_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    scale = np.ones(ranks)
    scale[: ranks // 2] = pp_payload_factor(ranks)
    p.coll_scale["stage_ar"] = scale
    return {"": Plan(pipeline_program(), pipeline_kinds(ranks), p, _info_pp(ranks), tp=ranks // 2)}


def pipeline_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: stage 0 communication-bound, stage 1 waits in hcom_receive (Bubble)."""
    half = ranks // 2
    s0, s1 = list(range(half)), list(range(half, ranks))
    bub = col(m, "bubble_us")
    notov = col(m, "comm_not_overlapped_us")
    excl = col(m, "comm_not_overlapped_excl_receive_us")
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    nums: dict[str, Any] = {
        "stages": [s0, s1],
        "stage1_bubble_us_per_step": _r(float(np.median(bub[s1].mean(axis=1)))),
        "stage0_bubble_us_per_step": _r(float(np.median(bub[s0].mean(axis=1)))),
        "stage0_comm_not_overlapped_us_per_step": _r(float(np.median(notov[s0].mean(axis=1)))),
        "stage1_comm_not_overlapped_excl_receive_us_per_step": _r(
            float(np.median(excl[s1].mean(axis=1)))
        ),
        "stage0_computing_us_per_step": _r(float(np.median(comp[s0].mean(axis=1)))),
        "stage1_computing_us_per_step": _r(float(np.median(comp[s1].mean(axis=1)))),
        "stage0_comm_not_overlapped_share": round(float(notov[s0].sum() / step[s0].sum()), 4),
        "stage1_bubble_share": round(float(bub[s1].sum() / step[s1].sum()), 4),
        "stage0_tp_payload_factor": round(pp_payload_factor(ranks), 4),
        "micro_batches_per_step": PP_MICRO,
    }
    key = _key([], "communication", ["pipeline-bubbles", "comm-not-overlapped"], "bubble_us", nums)
    victims = [r for r in s1 if bub[r].mean() > 0]
    # what dominates the culprit stage's time (from the written breakdown)
    parts = {
        "computing": float(comp[s0].sum()),
        "communication_not_overlapped": float(notov[s0].sum()),
        "free": float(col(m, "free_us")[s0].sum()),
    }
    key["root_cause"] = root_cause(
        "pipeline_imbalance",
        "communication",
        "stage",
        ranks=s0,
        stage=0,
        victims=victims,
        not_slow=not_slow_sample(ranks, s0, victims),
        metrics={
            "victim_bubble_us_per_step": _r(float(bub[victims].mean())),
            "culprit_comm_not_overlapped_us_per_step": nums[
                "stage0_comm_not_overlapped_us_per_step"
            ],
            "culprit_comm_excess_us_per_step": _r(
                nums["stage0_comm_not_overlapped_us_per_step"]
                - nums["stage1_comm_not_overlapped_excl_receive_us_per_step"]
            ),
            "culprit_dominant": max(parts, key=lambda x: parts[x]),
            "victim_computing_us_per_step": nums["stage1_computing_us_per_step"],
        },
    )
    return key


# ---------------------------------------------------------------- rotating-stalls
STALL_US = 650_000.0
STALL_COLL = 1  # the stall sits before this collective (host runs Python GC instead of launching)
GC_THRESHOLD_MS = 10.0  # profiler records GC pauses longer than this (_gc_detect_threshold)


def rotating_events(ranks: int, steps: int) -> list[tuple[int, int]]:
    """(step index, rank) of the stalls.

    Every step but each third one, a different rank each (a fixed permutation of the ranks, the
    same for every seed).
    """
    rng = np.random.default_rng(1212)
    order = [int(x) for x in rng.permutation(ranks)]
    ev_steps = [i for i in range(steps) if i % 3 != 2]
    return [(si, order[n % ranks]) for n, si in enumerate(ev_steps)]


def rotating_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    events = dict(rotating_events(ranks, steps))

    def delay(si: int, ci: int) -> np.ndarray | None:
        if ci == STALL_COLL and si in events:
            d = np.zeros(ranks)
            d[events[si]] = STALL_US
            return d
        return None

    p.coll_delay_us = delay
    p.gc_stalls = True
    info = dataclasses.replace(_info(CANN8, 1, ranks), gc_detect_threshold_ms=GC_THRESHOLD_MS)
    return {"": Plan(transformer(layers=4), group_kinds(ranks, 1), p, info)}


def rotating_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the (step, rank) events, the victims' wait in the event steps only."""
    ids = step_ids(m)
    ev = rotating_events(ranks, steps)
    wait = coll_wait_us(m)
    free = col(m, "free_us")
    ev_cols = [si for si, _ in ev]
    clean = [i for i in range(steps) if i not in ev_cols]
    culprits = sorted({r for _, r in ev})
    vic_wait = [float(np.mean([wait[r, si] for r in range(ranks) if r != c])) for si, c in ev]
    nums = {
        "events": [[ids[si], r] for si, r in ev],
        "stall_us": STALL_US,
        "event_steps": [ids[si] for si in ev_cols],
        "clean_steps": [ids[i] for i in clean],
        "culprit_free_us_event_step": [_r(free[r, si]) for si, r in ev],
        "median_free_us_clean": _r(float(np.median(free[:, clean]))) if clean else None,
        "victim_wait_us_event_step": [_r(x) for x in vic_wait],
        "median_wait_us_clean": _r(float(np.median(wait[:, clean]))) if clean else None,
        "step_us_event_steps_median": _r(float(np.median(col(m, "step_us")[:, ev_cols]))),
        "step_us_clean_steps_median": _r(float(np.median(col(m, "step_us")[:, clean])))
        if clean
        else None,
    }
    key = _key([], "scheduling", ["python-gc-pause"], "free_us", nums)
    all_vic = sorted({r for si, c in ev for r in range(ranks) if r != c})
    key["root_cause"] = root_cause(
        "step_events",
        "scheduling",
        "steps",
        ranks=culprits,
        events=[(ids[si], r) for si, r in ev],
        victims=all_vic,
        not_slow=not_slow_sample(ranks, [], culprits),
        steps=[ids[si] for si in ev_cols],
        metrics={
            "victim_wait_us_per_event": _r(float(np.mean(vic_wait))),
            "culprit_free_us_per_event": _r(float(np.mean([free[r, si] for si, r in ev]))),
            "clean_steps": nums["clean_steps"],
        },
    )
    return key


# ---------------------------------------------------------------- end-of-step-stall
END_STALL_US = 30_000.0


def _end_stall_rank(ranks: int) -> int:
    return 10 if ranks > 10 else ranks - 1


def end_stall_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    stall = np.zeros(ranks)
    stall[_end_stall_rank(ranks)] = END_STALL_US
    p.end_stall_us = stall
    return {"": Plan(transformer(layers=4), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def _tail_free_us(m: dict[str, Any]) -> np.ndarray:
    """[ranks, steps] device idle after the last device task of the step (µs)."""
    cl: Cluster = m[""]["cluster"]
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        last = st.k_start[:, -1] + st.k_dur[:, -1]
        for op in st.ops:
            last = np.maximum(last, op.end)
        for r in range(cl.ranks):
            out[r, si] = (st.bounds(r)[1] - int(last[r])) / 1000
    return out


def end_stall_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the stalled rank idles at the step end; the others wait at the first collective."""
    slow = _end_stall_rank(ranks)
    others = [r for r in range(ranks) if r != slow]
    tail = _tail_free_us(m)
    free = col(m, "free_us")
    cl: Cluster = m[""]["cluster"]
    first_sync = np.array([[st.ops[0].sync_ns[r] / 1e3 for st in cl.steps] for r in range(ranks)])
    nums = {
        "slow_rank": slow,
        "end_stall_us": END_STALL_US,
        "slow_rank_tail_free_us_per_step": _r(tail[slow].mean()),
        "median_tail_free_us_per_step_others": _r(float(np.median(tail[others].mean(axis=1)))),
        "slow_rank_free_us_per_step": _r(free[slow].mean()),
        "median_free_us_per_step_others": _r(float(np.median(free[others].mean(axis=1)))),
        "first_collective_sync_us_others_median": _r(float(np.median(first_sync[others]))),
        "first_collective_sync_us_slow_rank": _r(float(first_sync[slow].mean())),
    }
    key = _key(
        [slow],
        "scheduling",
        ["sync-stream-launch-blocking", "log-level-overhead"],
        "free_us",
        nums,
    )
    key["root_cause"] = _rank_cause(
        m,
        ranks,
        slow,
        "host_stall",
        "scheduling",
        metrics={
            "culprit_free_excess_us_per_step": _r(
                free[slow].mean() - float(np.median(free[others].mean(axis=1)))
            ),
            "where": "step_end",
        },
    )
    return key


# ---------------------------------------------------------------- slow-group-shape
GROUP_FACTOR = 1.4
GROUP_TAG = "mlp_up"
GROUP_MM_US = 4000.0


def _group(ranks: int) -> list[int]:
    """The slow group: the first node (ranks 0–7) when there are two nodes or more, else half."""
    n = RANKS_PER_NODE if ranks >= 2 * RANKS_PER_NODE else max(1, ranks // 2)
    return list(range(n))


def group_program() -> list[Item]:
    """transformer(4 layers) with a wider MLP up-projection (the dominant MatMul shape)."""
    out: list[Item] = []
    for it in transformer(layers=4):
        if isinstance(it, Kernel) and it.tag == GROUP_TAG:
            it = dataclasses.replace(it, dur_us=GROUP_MM_US)
        out.append(it)
    return out


def group_shape() -> str:
    """Input shapes of the MatMul the group runs slower."""
    return next(
        it.in_shapes for it in group_program() if isinstance(it, Kernel) and it.tag == GROUP_TAG
    )


def group_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    for r in _group(ranks):
        p.tag_scale[(r, GROUP_TAG)] = GROUP_FACTOR
    return {"": Plan(group_program(), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def group_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: group + MatMul shape; the other ranks wait for the group."""
    grp = _group(ranks)
    rest = [r for r in range(ranks) if r not in grp]
    cl: Cluster = m[""]["cluster"]
    shape = group_shape()
    sel = [j for j, k in enumerate(cl.kernels) if k.op_type == "MatMulV2" and k.in_shapes == shape]
    avg = np.array([st.k_dur[:, sel].mean(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    nums = {
        "group_ranks": grp,
        "avg_us_at_shape_group_median": _r(float(np.median(avg[grp]))),
        "avg_us_at_shape_others_median": _r(float(np.median(avg[rest]))),
        "ratio_at_shape": round(float(np.median(avg[grp]) / np.median(avg[rest])), 3),
        "count_at_shape_per_rank_per_step": len(sel),
        "group_computing_us_per_step": _r(float(np.median(comp[grp].mean(axis=1)))),
        "others_computing_us_per_step": _r(float(np.median(comp[rest].mean(axis=1)))),
        "group_wait_us_per_step": _r(float(np.median(wait[grp].mean(axis=1)))),
        "others_wait_us_per_step": _r(float(np.median(wait[rest].mean(axis=1)))),
    }
    op = {"op_type": "MatMulV2", "name": "aclnnMatmul_MatMulCommon_MatMulV2", "input_shapes": shape}
    key = _key(
        grp,
        "compute",
        ["matmul-shape-regression", "load-imbalance-vs-slow-kernels"],
        "avg_duration_us",
        nums,
        op=op,
    )
    vic = victims_by_wait(wait, grp)
    key["root_cause"] = root_cause(
        "slow_group",
        "compute",
        "group",
        ranks=grp,
        operator="MatMulV2",
        shape=shape,
        victims=vic,
        not_slow=not_slow_sample(ranks, grp, vic),
        metrics={
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "culprit_wait_us_per_step": _r(float(wait[grp].mean())),
            "culprit_computing_excess_us_per_step": _r(
                float(np.median(comp[grp].mean(axis=1))) - float(np.median(comp[rest].mean(axis=1)))
            ),
        },
    )
    return key


# ---------------------------------------------------------------- weight-format-node
WF_FACTOR = 1.3  # an ND weight makes every MatMul take another (slower) kernel path
WF_PEER = "ND;FRACTAL_NZ"  # the weight in the cube's private NZ format (internal format on)
WF_CULPRIT = "ND;ND"  # internal format off on that node: the weight stays ND


def _wf_node(ranks: int) -> list[int]:
    """The node whose image disables the internal format: the last node (ranks 8-15 of 16)."""
    n = RANKS_PER_NODE if ranks >= 2 * RANKS_PER_NODE else max(1, ranks // 2)
    return list(range(ranks - n, ranks))


def wf_program() -> list[Item]:
    """transformer(4 layers) whose MatMul weights are FRACTAL_NZ (torch_npu internal format)."""
    return [
        dataclasses.replace(it, in_formats=WF_PEER)
        if isinstance(it, Kernel) and it.op_type == "MatMulV2"
        else it
        for it in transformer(layers=4)
    ]


def wf_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = wf_program()
    p = default_perturb(ranks)
    kernels = [it for it in prog if isinstance(it, Kernel)]
    for r in _wf_node(ranks):
        for j, k in enumerate(kernels):
            if k.op_type == "MatMulV2":
                p.kernel_swap[(-1, r, j)] = dataclasses.replace(
                    k, in_formats=WF_CULPRIT, dur_us=k.dur_us * WF_FACTOR
                )
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def wf_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one node's MatMuls read ND weights where the others read NZ; the others wait."""
    grp = _wf_node(ranks)
    rest = [r for r in range(ranks) if r not in grp]
    cl: Cluster = m[""]["cluster"]
    sel = [j for j, k in enumerate(cl.kernels) if k.op_type == "MatMulV2"]
    avg = np.array([st.k_dur[:, sel].mean(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    nums = {
        "group_ranks": grp,
        "matmul_avg_us_group_median": _r(float(np.median(avg[grp]))),
        "matmul_avg_us_others_median": _r(float(np.median(avg[rest]))),
        "matmul_ratio": round(float(np.median(avg[grp]) / np.median(avg[rest])), 3),
        "matmul_per_rank_per_step": len(sel),
        "group_computing_us_per_step": _r(float(np.median(comp[grp].mean(axis=1)))),
        "others_computing_us_per_step": _r(float(np.median(comp[rest].mean(axis=1)))),
    }
    key = _key(grp, "compute", ["matmul-shape-regression"], "avg_duration_us", nums)
    vic = victims_by_wait(wait, grp)
    key["root_cause"] = root_cause(
        "slow_group",
        "compute",
        "group",
        ranks=grp,
        operator="MatMulV2",
        victims=vic,
        not_slow=not_slow_sample(ranks, grp, vic),
        metrics={
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "culprit_computing_excess_us_per_step": _r(
                float(np.median(comp[grp].mean(axis=1))) - float(np.median(comp[rest].mean(axis=1)))
            ),
        },
    )
    key["evidence"] = {"input_formats": WF_CULPRIT, "expected_input_formats": WF_PEER}
    return key


# ---------------------------------------------------------------- host-bound-last-arriver
def _hb_rank(ranks: int) -> int:
    return 9 % ranks


def host_bound_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    r = _hb_rank(ranks)
    p.host_bound[r] = True
    p.api_us[r] = 95.0
    p.gap_us[r] = 110.0
    return {"": Plan(transformer(layers=4), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def host_bound_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: short launch-to-start delays, high Free, least wait on the host-bound rank."""
    slow = _hb_rank(ranks)
    others = [r for r in range(ranks) if r != slow]
    cl: Cluster = m[""]["cluster"]
    # launch end → device start (µs): what a trace_view reader measures from the flows
    gap = np.array(
        [((st.k_start - st.k_api_start - st.k_api_dur) / 1000).mean(axis=1) for st in cl.steps]
    ).mean(axis=0)
    free = col(m, "free_us")
    wait = coll_wait_us(m)
    nums = {
        "slow_rank": slow,
        "slow_rank_launch_to_start_us_mean": _r(gap[slow]),
        "median_launch_to_start_us_mean_others": _r(float(np.median(gap[others]))),
        "slow_rank_free_us_per_step": _r(free[slow].mean()),
        "median_free_us_per_step_others": _r(float(np.median(free[others].mean(axis=1)))),
        "min_wait_rank": int(np.argmin(wait.sum(axis=1))),
    }
    key = _key([slow], "scheduling", ["host-dispatch-bound", "task-queue-enable"], "free_us", nums)
    key["root_cause"] = _rank_cause(
        m,
        ranks,
        slow,
        "host_stall",
        "scheduling",
        metrics={
            "culprit_free_excess_us_per_step": _r(
                free[slow].mean() - float(np.median(free[others].mean(axis=1)))
            )
        },
    )
    return key


# ---------------------------------------------------------------- job-idle
IDLE_US = 90_000.0


def job_idle_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 29)
    jit = 1.0 + 0.002 * np.clip(rng.standard_normal((steps, ranks)), -3, 3)
    p.step_stall_us = lambda si: IDLE_US * jit[si]
    return {"": Plan(transformer(layers=4), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def job_idle_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the same idle on every rank and step, at the step start (Preparing)."""
    free = col(m, "free_us")
    prep = col(m, "preparing_us")
    step = col(m, "step_us")
    per_rank = free.mean(axis=1)
    nums = {
        "idle_us_planted": IDLE_US,
        "median_free_us_per_step": _r(float(np.median(free))),
        "median_preparing_us_per_step": _r(float(np.median(prep))),
        "free_us_spread_across_ranks": _r(float(per_rank.max() - per_rank.min())),
        "median_free_share": round(float(np.median(free / step)), 4),
    }
    key = _key([], "scheduling", ["dataloader-stall"], "free_us", nums)
    key["root_cause"] = _all_ranks_cause(
        m,
        ranks,
        "job_idle",
        "scheduling",
        metrics={"idle_us_per_step": nums["median_free_us_per_step"]},
    )
    return key


# ---------------------------------------------------------------- small-collectives
SMALL_MB = 0.5
SMALL_PER_DW = 8
SMALL_LATENCY_US = 160.0


def small_program() -> list[Item]:
    """Gradients all-reduced unbucketed: a few small all-reduces after every weight-gradient MatMul."""
    out: list[Item] = []
    for it in transformer(layers=4, grad=False):
        out.append(it)
        if isinstance(it, Kernel) and it.tag.endswith("_dw"):
            out += [
                Collective("hcom_allReduce_", "world", SMALL_MB, latency_us=SMALL_LATENCY_US)
                for _ in range(SMALL_PER_DW)
            ]
    return out


def small_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return {
        "": Plan(
            small_program(), group_kinds(ranks, 1), default_perturb(ranks), _info(CANN8, 1, ranks)
        )
    }


def small_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: many small collectives, all exposed, the same on every rank."""
    cl: Cluster = m[""]["cluster"]
    notov = col(m, "comm_not_overlapped_us")
    comm = col(m, "communication_us")
    step = col(m, "step_us")
    share = notov.sum(axis=1) / step.sum(axis=1)
    n_ops = sum(1 for it in cl.program if isinstance(it, Collective))
    n_small = sum(1 for it in cl.program if isinstance(it, Collective) and it.size_mb <= SMALL_MB)
    durs = [
        float(np.median(op.end - op.start)) / 1e3
        for op in cl.steps[0].ops
        if op.item.size_mb <= SMALL_MB
    ]
    nums = {
        "hccl_ops_per_step": n_ops,
        "small_ops_per_step": n_small,
        "small_op_payload_mb": SMALL_MB,
        "small_op_duration_us_median": _r(float(np.median(durs))),
        "median_comm_not_overlapped_share": round(float(np.median(share)), 4),
        "comm_not_overlapped_share_spread": round(float(share.max() - share.min()), 4),
        "median_overlap_ratio": round(
            float(np.median((comm - notov).sum(axis=1) / comm.sum(axis=1))), 4
        ),
    }
    key = _key(
        [],
        "communication",
        ["small-packet-transfers", "comm-not-overlapped"],
        "comm_not_overlapped_us",
        nums,
    )
    key["root_cause"] = _all_ranks_cause(
        m,
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "comm_not_overlapped_us_per_step": _r(float(np.median(notov.mean(axis=1)))),
            "small_ops_per_step": n_small,
        },
    )
    return key


# ---------------------------------------------------------------- lost-first-step
LOST_SHARE = 0.45


def lost_cut(ranks: int, nk: int) -> np.ndarray:
    """Leading device tasks lost per rank in the first step (45% of the kernels, ±1 per rank)."""
    return np.array([int(nk * LOST_SHARE) + (r % 3) - 1 for r in range(ranks)], dtype=np.int64)


def lost_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    nk = sum(1 for it in prog if isinstance(it, Kernel))
    p = default_perturb(ranks)
    p.lost_kernels[0] = lost_cut(ranks, nk)
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def lost_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the first step has fewer device tasks and a large Preparing; it is excluded."""
    ids = step_ids(m)
    cnt = kernel_counts(m)
    prep = col(m, "preparing_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    rest = list(range(1, steps))
    cl: Cluster = m[""]["cluster"]
    st0 = cl.steps[0]
    missing = (~st0.k_present).sum(axis=1) if st0.k_present is not None else np.zeros(ranks)
    for op in st0.ops:
        if op.present is not None:
            missing = missing + (~op.present)
    nums = {
        "artifact_step": ids[0],
        "tasks_first_step_median": int(np.median(cnt[:, 0])),
        "tasks_other_steps_median": int(np.median(cnt[:, rest])) if rest else None,
        "host_launches_without_device_task_first_step_median": int(np.median(missing)),
        "median_preparing_us_first_step": _r(float(np.median(prep[:, 0]))),
        "median_preparing_us_other_steps": _r(float(np.median(prep[:, rest]))) if rest else None,
        "median_step_us_first_step": _r(float(np.median(step[:, 0]))),
        "median_step_us_other_steps": _r(float(np.median(step[:, rest]))) if rest else None,
        "median_computing_us_first_step": _r(float(np.median(comp[:, 0]))),
        "median_computing_us_other_steps": _r(float(np.median(comp[:, rest]))) if rest else None,
    }
    key = _key([], "none", ["profiling-collection-pitfalls"], "kernel_count", nums)
    affected = [r for r in range(ranks) if missing[r] > 0]
    key["root_cause"] = root_cause(
        "data_artifact",
        "unknown",
        "steps",
        ranks=affected,  # where the records are incomplete (not a slowdown of these ranks)
        excluded=[ids[0]],
        not_slow=not_slow_sample(ranks, []),
        steps=[ids[0]],
        metrics={"artifact_step": ids[0]},
    )
    return key


# ---------------------------------------------------------------- two-ranks
TWO_DIFF = 1.03


def two_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    p.dur_scale[1] = TWO_DIFF
    return {"": Plan(transformer(layers=4), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def two_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: a 3% difference between two ranks is not enough to name a slow rank."""
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    nums = {
        "computing_us_per_step": [_r(x) for x in comp.mean(axis=1)],
        "computing_ratio": round(float(comp[1].mean() / comp[0].mean()), 4),
        "step_us_per_step": [_r(x) for x in step.mean(axis=1)],
        "planted_compute_factor_rank1": TWO_DIFF,
    }
    key = _key([], "none", [], "computing_us", nums)
    key["root_cause"] = root_cause(
        "not_enough_signal",
        "unknown",
        "none",
        not_slow=[0, 1],
        metrics={"ranks": ranks},
    )
    return key


NEW_SCENARIOS = (
    ScenarioSpec(
        "pipeline-stage-imbalance",
        "PP=2 (TP=N/2): stage 0's TP all-reduces carry 6x the payload (communication-bound); "
        "stage 1 waits for its activations in hcom_receive (Bubble)",
        16,
        3,
        pipeline_plans,
        pipeline_answer,
        min_ranks=4,
        rank_multiple=2,
    ),
    ScenarioSpec(
        "rotating-stalls",
        "~650 ms one-step host stalls (GC-like) on a different rank in two steps of three; "
        "the others wait in that step's collective only",
        16,
        6,
        rotating_plans,
        rotating_answer,
    ),
    ScenarioSpec(
        "end-of-step-stall",
        "one rank holds its host 30 ms at the end of every step (sync / logging); the others "
        "wait for it in the next step's first collective",
        16,
        3,
        end_stall_plans,
        end_stall_answer,
    ),
    ScenarioSpec(
        "weight-format-node",
        "ranks 8-15 (one node) read their MatMul weights as ND where the others use FRACTAL_NZ "
        "(internal format off in that node's image): every MatMul 1.3x slower there; ranks 0-7 wait",
        16,
        3,
        wf_plans,
        wf_answer,
        min_ranks=4,
    ),
    ScenarioSpec(
        "slow-group-shape",
        "ranks 0-7 (one node) run the MLP up-projection MatMul 1.4x slower; ranks 8-15 wait",
        16,
        3,
        group_plans,
        group_answer,
        min_ranks=4,
    ),
    ScenarioSpec(
        "host-bound-last-arriver",
        "one rank host-bound (launch calls ~95 us, kernels start right after their launch), "
        "high Free, last at every collective",
        16,
        3,
        host_bound_plans,
        host_bound_answer,
    ),
    ScenarioSpec(
        "job-idle",
        "every rank idles ~90 ms at the start of every step (trainer waiting for input/rollout)",
        16,
        3,
        job_idle_plans,
        job_idle_answer,
    ),
    ScenarioSpec(
        "small-collectives",
        "gradients all-reduced unbucketed: 128 small (0.5 MB) all-reduces per step, none overlapped",
        16,
        3,
        small_plans,
        small_answer,
    ),
    ScenarioSpec(
        "lost-first-step",
        "the first captured step lost ~45% of its device records (host launches with no device "
        "task, large Preparing): a capture artifact, otherwise healthy",
        8,
        4,
        lost_plans,
        lost_answer,
    ),
    ScenarioSpec(
        "two-ranks",
        "2 ranks, rank 1 computes 3% longer: not enough signal to name a slow rank",
        2,
        3,
        two_plans,
        two_answer,
        max_ranks=2,
    ),
)


def register(registry: dict[str, ScenarioSpec]) -> None:
    """Add the root causes of the first ten scenarios and the issue-12 scenarios (idempotent)."""
    for name, fn in EXISTING_ROOT_CAUSES.items():
        if name in registry and registry[name].root_cause is None:
            registry[name].root_cause = fn
    for spec in NEW_SCENARIOS:
        registry.setdefault(spec.name, spec)


__all__ = ["HCCL_ENV_KEY", "NEW_SCENARIOS", "coll_wait_us", "register", "root_cause"]
