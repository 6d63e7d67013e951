"""Development fault kinds for the generalization benchmark (written without reading the diagnosis).

Five more realistic fault kinds, each planted as a mechanism of the simulation
(``advisor_chat.synth.model``), with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Like ``scenarios_faults.py`` every key
carries ``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the
files). Their question set is ``evals/datasets/generalization_dev.yaml``: a development set for
finding weaknesses; the held-out kinds of ``generalization.yaml`` stay untouched.

Kinds:

- ``throttle-onset``: one device slows down mid-run (thermal / power throttling): from one step on,
  every kernel of that rank runs ~1.3x longer, same operators and shapes; the others wait for it.
- ``flapping-rdma-link``: one RDMA link drops to 20% of its bandwidth in some steps only (port flap,
  retransmissions); the other steps are normal.
- ``fabric-congestion``: every cross-node (RDMA) transfer of the job runs at 40% in some steps
  (traffic of another job on the shared switches); no rank, node or link is singled out.
- ``alloc-churn-rank``: one rank's caching allocator misses (aclrtMalloc / free) before the forward
  MLP up-projection MatMul of every layer: the host stalls, the device idles mid-step, the others wait.
- ``hbm-slow-rank``: one device's memory-bound (AI_VECTOR_CORE) kernels run ~1.9x longer (degraded HBM
  bandwidth); its MatMuls are normal.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    AICORE_MHZ,
    RANKS_PER_NODE,
    Cluster,
    Kernel,
    Perturb,
    default_perturb,
    node_ip,
)
from advisor_chat.synth.scenarios import (
    CANN8,
    Plan,
    ScenarioSpec,
    _info,
    _key,
    _r,
    col,
    group_kinds,
    transformer,
)
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    step_ids,
    victims_by_wait,
)


# ---------------------------------------------------------------- shared helpers
def _with_evidence(key: dict[str, Any], rc: dict[str, Any], **evidence: Any) -> dict[str, Any]:
    key["root_cause"] = rc
    key["evidence"] = evidence
    return key


def _plain(ranks: int, prog: list[Any], p: Perturb) -> dict[str, Plan]:
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def _rank_rc(
    m: dict[str, Any],
    ranks: int,
    culprit: int,
    mechanism: str,
    category: str,
    cols: list[int] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """One culprit rank; victims wait for it in collectives (over ``cols`` steps)."""
    wait = coll_wait_us(m)
    vic = victims_by_wait(wait, [culprit], cols)
    sel = wait if cols is None else wait[:, cols]
    metrics = {
        "culprit_wait_us_per_step": _r(float(sel[culprit].mean())),
        "victim_wait_us_per_step": _r(float(sel[vic].mean())) if vic else 0.0,
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


def _rdma_bw(cl: Cluster, si: int, pick: Any) -> list[float]:
    """Bandwidths (GB/s) of the RDMA transfers of step index ``si`` whose (src, dst) ``pick`` accepts."""
    out: list[float] = []
    st = cl.steps[si]
    for op in st.ops:
        k = op.kind
        for r in range(cl.ranks):
            for j in range(k.peer.shape[1]):
                if k.transport[r, j] != 1 or op.link_ms[r, j] <= 0:
                    continue
                if pick(r, int(k.peer[r, j])):
                    out.append(float(op.link_mb[r, j] / op.link_ms[r, j]))
    return out


def _rdma_transit_ms(cl: Cluster, si: int) -> float:
    """Mean per-rank RDMA transfer time (ms) in step index ``si``."""
    tot = 0.0
    for op in cl.steps[si].ops:
        rd = op.kind.transport == 1
        tot += float(np.where(rd, op.link_ms, 0.0).sum())
    return tot / cl.ranks


# ---------------------------------------------------------------- throttle-onset
THROTTLE_FACTOR = 1.3


def _throttle(ranks: int, steps: int) -> tuple[int, int]:
    """(rank, first throttled step index)."""
    return 9 % ranks, max(1, steps // 2)


def throttle_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    p = default_perturb(ranks)
    r, onset = _throttle(ranks, steps)
    kernels = [it for it in prog if isinstance(it, Kernel)]
    hot = [dataclasses.replace(k, dur_us=k.dur_us * THROTTLE_FACTOR) for k in kernels]
    for si in range(onset, steps):
        for j in range(len(kernels)):
            p.kernel_swap[(si, r, j)] = hot[j]
    # the device lowers its clock from the onset on (the AI Core Freq track records it)
    p.aicore_mhz[r] = [(onset, round(AICORE_MHZ / THROTTLE_FACTOR, 1))]
    return _plain(ranks, prog, p)


def throttle_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: from the onset step on, one rank computes ~1.3x longer; the others wait."""
    r, onset = _throttle(ranks, steps)
    ids = step_ids(m)
    cl: Cluster = m[""]["cluster"]
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    hot = list(range(onset, steps))
    cool = list(range(onset))
    others = [q for q in range(ranks) if q != r]
    ratio_after = float(comp[r, hot].mean() / np.median(comp[others][:, hot].mean(axis=1)))
    ratio_before = float(comp[r, cool].mean() / np.median(comp[others][:, cool].mean(axis=1)))
    kd = [st.k_dur[r].sum() / 1000 for st in cl.steps]
    nums = {
        "onset_step": ids[onset],
        "culprit_computing_ratio_after_onset": round(ratio_after, 3),
        "culprit_computing_ratio_before_onset": round(ratio_before, 3),
        "culprit_computing_excess_us_per_step_after_onset": _r(
            float(comp[r, hot].mean() - np.median(comp[others][:, hot].mean(axis=1)))
        ),
        "step_us_before_onset": _r(float(step[:, cool].max(axis=0).mean())),
        "step_us_after_onset": _r(float(step[:, hot].max(axis=0).mean())),
        "culprit_kernel_us_per_step_last": _r(float(kd[-1])),
    }
    key = _key([r], "compute", ["compute-straggler-hidden"], "computing_us", nums)
    key["onset_step"] = ids[onset]
    rc = _rank_rc(
        m,
        ranks,
        r,
        "compute_straggler",
        "compute",
        cols=hot,
        steps=[ids[s] for s in hot],
        metrics={"computing_ratio": round(ratio_after, 3)},
    )
    return _with_evidence(
        key,
        rc,
        onset_step=ids[onset],
        slow_steps=[ids[s] for s in hot],
        normal_steps=[ids[s] for s in cool],
        ratio=round(ratio_after, 2),
        same_shapes=True,
    )


# ---------------------------------------------------------------- flapping-rdma-link
FLAP_FACTOR = 0.2


def _flap_link(ranks: int) -> tuple[int, int]:
    """An RDMA link of the world group: device 4 of node 0 to device 4 of node 1."""
    return 4, 4 + RANKS_PER_NODE


def _flap_steps(steps: int) -> list[int]:
    return sorted({1 % steps, (steps - 2) % steps} - {0}) or [steps - 1]


def flap_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    a, b = _flap_link(ranks)
    p = default_perturb(ranks)
    for si in _flap_steps(steps):
        p.step_link_factor[si] = {(a, b): FLAP_FACTOR}
    return _plain(ranks, transformer(layers=4, grad_mb=128.0, grad_overlap=3), p)


def flap_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one RDMA link is slow in some steps only; everyone waits in those steps."""
    a, b = _flap_link(ranks)
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    bad = _flap_steps(steps)
    good = [s for s in range(steps) if s not in bad]
    on = lambda r, q: (r, q) == (a, b)  # noqa: E731
    off = lambda r, q: (r, q) != (a, b)  # noqa: E731
    bw_bad = float(np.mean([x for s in bad for x in _rdma_bw(cl, s, on)]))
    bw_good = float(np.mean([x for s in good for x in _rdma_bw(cl, s, on)]))
    bw_peers = float(np.median([x for s in bad for x in _rdma_bw(cl, s, off)]))
    step = col(m, "step_us").max(axis=0)
    nums = {
        "link_bandwidth_gbps_slow_steps": round(bw_bad, 3),
        "link_bandwidth_gbps_other_steps": round(bw_good, 3),
        "peer_rdma_bandwidth_gbps_slow_steps": round(bw_peers, 3),
        "step_us_slow_steps": _r(float(step[bad].mean())),
        "step_us_other_steps": _r(float(step[good].mean())),
    }
    key = _key(
        [],
        "communication",
        ["slow-link-rdma"],
        "bandwidth_gbps",
        nums,
        slow_link={"src_rank": a, "dst_rank": b, "transport": "RDMA"},
    )
    key["slow_step"] = ids[bad[0]]
    key["slow_step2"] = ids[bad[-1]]
    victims = [r for r in range(ranks) if r not in (a, b)]
    rc = root_cause(
        "slow_link",
        "communication",
        "link",
        link=(a, b),
        transport="RDMA",
        victims=victims,
        not_slow=not_slow_sample(ranks, {a, b}, victims),
        steps=[ids[s] for s in bad],
        metrics=nums,
    )
    return _with_evidence(
        key,
        rc,
        slow_steps=[ids[s] for s in bad],
        normal_steps=[ids[s] for s in good],
        transport="RDMA",
        intermittent=True,
    )


# ---------------------------------------------------------------- fabric-congestion
CONGEST_FACTOR = 0.4


def _congest_steps(steps: int) -> list[int]:
    return sorted({1 % steps, 3 % steps} - {0}) or [steps - 1]


def congest_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    kinds = group_kinds(ranks, 1)
    k = kinds["world"]
    links = {
        (r, int(k.peer[r, j])): CONGEST_FACTOR
        for r in range(ranks)
        for j in range(k.peer.shape[1])
        if k.transport[r, j] == 1
    }
    p = default_perturb(ranks)
    for si in _congest_steps(steps):
        p.step_link_factor[si] = dict(links)
    prog = transformer(layers=4, grad_mb=128.0, grad_overlap=3)
    return {"": Plan(prog, kinds, p, _info(CANN8, 1, ranks))}


def congest_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every RDMA transfer is slower in some steps; no rank, node or link stands out."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    bad = _congest_steps(steps)
    good = [s for s in range(steps) if s not in bad]
    every = lambda r, q: True  # noqa: E731
    bw_bad = [x for s in bad for x in _rdma_bw(cl, s, every)]
    bw_good = [x for s in good for x in _rdma_bw(cl, s, every)]
    step = col(m, "step_us").max(axis=0)
    # no single link or node: the slowest link of a congested step is within 15% of the median
    spread = float(min(bw_bad) / np.median(bw_bad))
    nums = {
        "rdma_bandwidth_gbps_slow_steps": round(float(np.median(bw_bad)), 3),
        "rdma_bandwidth_gbps_other_steps": round(float(np.median(bw_good)), 3),
        "rdma_bandwidth_ratio": round(float(np.median(bw_bad) / np.median(bw_good)), 3),
        "slowest_link_vs_median_slow_steps": round(spread, 3),
        "rdma_transit_ms_per_rank_slow_steps": round(
            float(np.mean([_rdma_transit_ms(cl, s) for s in bad])), 3
        ),
        "step_us_slow_steps": _r(float(step[bad].mean())),
        "step_us_other_steps": _r(float(step[good].mean())),
    }
    key = _key(
        [], "communication", ["slow-link-rdma", "comm-not-overlapped"], "bandwidth_gbps", nums
    )
    key["slow_step"] = ids[bad[0]]
    key["slow_step2"] = ids[bad[-1]]
    rc = root_cause(
        "slow_link",
        "communication",
        "job",
        transport="RDMA",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        steps=[ids[s] for s in bad],
        metrics=nums,
    )
    return _with_evidence(
        key,
        rc,
        slow_steps=[ids[s] for s in bad],
        normal_steps=[ids[s] for s in good],
        transport="RDMA",
        nodes=[node_ip(n) for n in range(ranks // RANKS_PER_NODE)],
        all_links=True,
    )


# ---------------------------------------------------------------- alloc-churn-rank
ALLOC_STALL_US = 1900.0
ALLOC_TAG = "mlp_up"  # forward MLP up-projection of every layer (its large [S, 8H] output buffer)


def _alloc_rank(ranks: int) -> int:
    return 6 % ranks


def _alloc_positions(prog: list[Any]) -> list[int]:
    kernels = [it for it in prog if isinstance(it, Kernel)]
    return [j for j, k in enumerate(kernels) if k.tag == ALLOC_TAG]


def alloc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    p = default_perturb(ranks)
    r = _alloc_rank(ranks)
    rng = np.random.default_rng(seed + 61)
    p.kernel_stalls[r] = {
        j: ALLOC_STALL_US * (0.85 + 0.3 * rng.random()) for j in _alloc_positions(prog)
    }
    return _plain(ranks, prog, p)


def alloc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one rank's host stalls before specific kernels; its device idles, others wait."""
    r = _alloc_rank(ranks)
    cl: Cluster = m[""]["cluster"]
    pos = _alloc_positions(cl.program)
    free = col(m, "free_us")
    others = [q for q in range(ranks) if q != r]
    gaps = []
    for st in cl.steps:
        for j in pos:
            prev_end = st.k_start[r, j - 1] + st.k_dur[r, j - 1]
            gaps.append((st.k_start[r, j] - prev_end) / 1000)
    peer_gaps = []
    for st in cl.steps:
        for j in pos:
            prev_end = st.k_start[others, j - 1] + st.k_dur[others, j - 1]
            peer_gaps.extend(((st.k_start[others, j] - prev_end) / 1000).tolist())
    k0 = cl.kernels[pos[0]]
    nums = {
        "culprit_free_us_per_step": _r(float(free[r].mean())),
        "others_free_us_per_step_median": _r(float(np.median(free[others].mean(axis=1)))),
        "culprit_free_excess_us_per_step": _r(
            float(free[r].mean() - np.median(free[others].mean(axis=1)))
        ),
        "stall_gap_us_mean": _r(float(np.mean(gaps))),
        "peer_gap_us_same_position_median": _r(float(np.median(peer_gaps))),
        "stalls_per_step": len(pos),
    }
    key = _key(
        [r],
        "scheduling",
        ["expandable-segments-allocator", "host-dispatch-bound"],
        "free_us",
        nums,
    )
    rc = _rank_rc(m, ranks, r, "host_stall", "scheduling", metrics=nums)
    return _with_evidence(
        key,
        rc,
        before_op_type=k0.op_type,
        before_op_shape=k0.in_shapes,
        stalls_per_step=len(pos),
        device_idle=True,
    )


# ---------------------------------------------------------------- hbm-slow-rank
HBM_FACTOR = 1.9
HBM_CORE = "AI_VECTOR_CORE"


def _hbm_rank(ranks: int) -> int:
    return 13 % ranks


def hbm_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    p = default_perturb(ranks)
    r = _hbm_rank(ranks)
    kernels = [it for it in prog if isinstance(it, Kernel)]
    for j, k in enumerate(kernels):
        if k.core == HBM_CORE:
            p.kernel_swap[(-1, r, j)] = dataclasses.replace(k, dur_us=k.dur_us * HBM_FACTOR)
    return _plain(ranks, prog, p)


def hbm_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one rank's vector (memory-bound) kernels are ~1.9x longer, its MatMuls are not."""
    r = _hbm_rank(ranks)
    cl: Cluster = m[""]["cluster"]
    others = [q for q in range(ranks) if q != r]
    vec_j = [j for j, k in enumerate(cl.kernels) if k.core == HBM_CORE]
    mm_j = [j for j, k in enumerate(cl.kernels) if k.op_type == "MatMulV2"]

    def mean_us(rs: list[int], sel: list[int]) -> float:
        return float(np.mean([st.k_dur[np.ix_(rs, sel)].mean() for st in cl.steps]) / 1000)

    vec_ratio = mean_us([r], vec_j) / mean_us(others, vec_j)
    mm_ratio = mean_us([r], mm_j) / mean_us(others, mm_j)
    vec_types = sorted({cl.kernels[j].op_type for j in vec_j})
    comp = col(m, "computing_us")
    nums = {
        "vector_kernel_ratio": round(vec_ratio, 3),
        "matmul_ratio": round(mm_ratio, 3),
        "culprit_computing_excess_us_per_step": _r(
            float(comp[r].mean() - np.median(comp[others].mean(axis=1)))
        ),
    }
    key = _key([r], "compute", ["load-imbalance-vs-slow-kernels"], "computing_us", nums)
    rc = _rank_rc(m, ranks, r, "compute_straggler", "compute", metrics=nums)
    return _with_evidence(
        key,
        rc,
        accelerator_core=HBM_CORE,
        op_types=vec_types,
        vector_ratio=round(vec_ratio, 2),
        matmul_normal=True,
    )


# ---------------------------------------------------------------- registry
DEV_SCENARIOS = (
    ScenarioSpec(
        "throttle-onset",
        "rank 9 throttles mid-run: from step 13 on every kernel ~1.3x longer (thermal/power cap)",
        16,
        6,
        throttle_plans,
        throttle_answer,
        min_ranks=10,
    ),
    ScenarioSpec(
        "flapping-rdma-link",
        "the RDMA link 4->12 drops to 20% bandwidth in some steps only (flapping port)",
        16,
        6,
        flap_plans,
        flap_answer,
        min_ranks=16,
    ),
    ScenarioSpec(
        "fabric-congestion",
        "3 nodes: every RDMA transfer at 40% in steps 11 and 13 (shared-switch congestion)",
        24,
        5,
        congest_plans,
        congest_answer,
        min_ranks=16,
    ),
    ScenarioSpec(
        "alloc-churn-rank",
        "rank 6 stalls ~2 ms on the host (allocator misses) before each layer's MLP up-projection MatMul",
        16,
        3,
        alloc_plans,
        alloc_answer,
        min_ranks=8,
    ),
    ScenarioSpec(
        "hbm-slow-rank",
        "rank 13's AI_VECTOR_CORE (memory-bound) kernels ~1.9x longer, MatMuls normal (degraded HBM)",
        16,
        3,
        hbm_plans,
        hbm_answer,
        min_ranks=14,
    ),
)
DEV_KINDS = tuple(s.name for s in DEV_SCENARIOS)


__all__ = ["DEV_KINDS", "DEV_SCENARIOS"]
