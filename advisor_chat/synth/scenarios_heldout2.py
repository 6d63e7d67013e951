"""Second BLIND held-out set of fault kinds (new kinds; written without reading the diagnosis).

Four more field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_heldout2.yaml``: a blind held-out set. Whoever tunes the diagnosis
rules must not read this module, its answer keys or that question set; only the aggregate pass rate
of the set is to be looked at.

The kinds are composed from the existing perturbation knobs (program edits, ``dur_scale``,
``aicore_mhz``, ``link_factor``); no knob was added. The descriptions of what is planted are kept in
the code below and in the registry's one-line summaries, on purpose not repeated here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    AICORE_MHZ,
    RANKS_PER_NODE,
    Cluster,
    Item,
    Kernel,
    Perturb,
    default_perturb,
    node_ip,
)
from advisor_chat.synth.scenarios import Plan, ScenarioSpec, _key, _r, col, transformer
from advisor_chat.synth.scenarios_dev import _plain, _rdma_bw, _with_evidence
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_dev4 import _resimulate, _sim_breakdown
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)


def _share(part: np.ndarray, whole: np.ndarray) -> float:
    return round(float(np.median(part.sum(axis=1) / whole.sum(axis=1))), 4)


def _healthy(cl: Cluster, program: list[Item] | None = None) -> dict[str, np.ndarray]:
    """Breakdown of the same run (seed, steps) without any perturbation (optionally another program)."""
    base = dataclasses.replace(cl, perturb=default_perturb(cl.ranks))
    return _sim_breakdown(_resimulate(base, program if program is not None else cl.program))


def _step_us(cl: Cluster) -> float:
    return float(np.mean([st.end - st.start for st in cl.steps]) / 1000)


# ---------------------------------------------------------------- autocast-cast-churn
# fp32 parameters under autocast without a cast cache (or AMP O1): every MatMul's fp32 weight is cast
# to bf16 right before the forward MatMul, and every bf16 weight gradient is cast back to fp32 after
# its backward MatMul (accumulated into an fp32 .grad). Cast is memory-bound: 6 bytes per element
# (read fp32 + write bf16, or the reverse) at ~1 TB/s.
CAST_BYTES_PER_US = 1.0e6
CAST_TYPE = "Cast"
CAST_TAG = "amp_cast"
_FWD_MM = ("qkv", "attn_out", "mlp_up", "mlp_down")
_DW_MM = ("qkv_dw", "attn_out_dw", "mlp_up_dw", "mlp_down_dw")


def _weight_shape(k: Kernel) -> tuple[int, int]:
    """[out, in] of a forward MatMul's weight (second input, ``n,k``)."""
    n, kk = (int(x) for x in k.in_shapes.split(";")[1].split(","))
    return n, kk


def _cast(shape: tuple[int, int], to_bf16: bool, tag: str) -> Kernel:
    elems = shape[0] * shape[1]
    s = f"{shape[0]},{shape[1]}"
    src, dst = ("DT_FLOAT", "DT_BF16") if to_bf16 else ("DT_BF16", "DT_FLOAT")
    return Kernel(
        name="aclnnCast_Cast_Cast",
        op_type=CAST_TYPE,
        core="AI_VECTOR_CORE",
        in_shapes=s,
        in_dtypes=src,
        in_formats="ND",
        out_shapes=s,
        out_dtypes=dst,
        out_formats="ND",
        dur_us=round(elems * 6 / CAST_BYTES_PER_US, 1),
        block_dim=40,
        api="aclnnCast",
        tag=tag,
    )


def cast_program(churn: bool = True) -> list[Item]:
    """transformer(4 layers) with weight and gradient Casts around the MatMuls.

    A weight Cast before each forward MatMul, a gradient Cast after each weight-gradient MatMul.
    """
    prog = transformer(layers=4)
    if not churn:
        return prog
    shapes: dict[str, tuple[int, int]] = {}
    for it in prog:
        if isinstance(it, Kernel) and it.tag in _FWD_MM:
            shapes.setdefault(it.tag, _weight_shape(it))
    out: list[Item] = []
    for it in prog:
        if isinstance(it, Kernel) and it.tag in _FWD_MM:
            out.append(_cast(shapes[it.tag], True, f"{CAST_TAG}_fwd_{it.tag}"))
            out.append(it)
        elif isinstance(it, Kernel) and it.tag in _DW_MM:
            out.append(it)
            out.append(_cast(shapes[it.tag[:-3]], False, f"{CAST_TAG}_grad_{it.tag}"))
        else:
            out.append(it)
    return out


def cast_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, cast_program(), default_perturb(ranks))


def cast_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank spends a fifth of its computing in weight / gradient dtype casts."""
    cl: Cluster = m[""]["cluster"]
    casts = [j for j, k in enumerate(cl.kernels) if k.tag.startswith(CAST_TAG)]
    cast_us = np.array([st.k_dur[:, casts].sum(axis=1) for st in cl.steps]).T / 1000  # [R, S]
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    base = _healthy(cl, cast_program(churn=False))
    top = max(casts, key=lambda j: cl.kernels[j].dur_us)
    nums = {
        "casts_per_step": len(casts),
        "cast_us_per_step_median": _r(float(np.median(cast_us))),
        "cast_share_of_computing": round(
            float(np.median(cast_us.sum(axis=1) / comp.sum(axis=1))), 4
        ),
        "largest_cast_us_median": _r(
            float(np.median([st.k_dur[:, top] for st in cl.steps]) / 1000)
        ),
        "median_computing_share": _share(comp, step),
        "median_computing_us": _r(float(np.median(comp))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_without_casts": _r(float(np.median(base["step_us"]))),
        "step_saving_share_without_casts": round(
            float(1 - np.median(base["step_us"]) / np.median(step)), 4
        ),
    }
    key = _key([], "compute", ["tiny-kernels-fusion"], "computing_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        operator=CAST_TYPE,
        metrics={
            "cast_us_per_step": nums["cast_us_per_step_median"],
            "cast_share_of_computing": nums["cast_share_of_computing"],
        },
    )
    return _with_evidence(
        key,
        rc,
        op_type=CAST_TYPE,
        core="AI_VECTOR_CORE",
        casts_per_step=len(casts),
        dtypes=["DT_FLOAT", "DT_BF16"],
        largest_cast_shape=cl.kernels[top].in_shapes,
        cast_ms_per_step=round(float(np.median(cast_us)) / 1000, 1),
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- power-capped-cluster
CAP_MHZ = 1300.0  # every card's AI Core clock under the cluster's power cap
CAP_FACTOR = AICORE_MHZ / CAP_MHZ


def cap_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    p.dur_scale[:] = CAP_FACTOR
    for r in range(ranks):
        p.aicore_mhz[r] = [(0, CAP_MHZ)]
    return _plain(ranks, transformer(layers=4), p)


def cap_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every card runs at the same lowered clock for the whole capture; no outlier."""
    cl: Cluster = m[""]["cluster"]
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    base = _healthy(cl)
    per_rank = comp.mean(axis=1)
    nums = {
        "aicore_mhz": CAP_MHZ,
        "aicore_mhz_nominal": AICORE_MHZ,
        "clock_ratio": round(CAP_MHZ / AICORE_MHZ, 3),
        "median_computing_us": _r(float(np.median(comp))),
        "computing_spread_across_ranks": round(float(per_rank.max() / per_rank.min() - 1), 4),
        "median_computing_share": _share(comp, step),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_nominal_clock": _r(float(np.median(base["step_us"]))),
        "step_saving_share_nominal_clock": round(
            float(1 - np.median(base["step_us"]) / np.median(step)), 4
        ),
    }
    key = _key([], "compute", ["heterogeneous-devices"], "computing_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        metrics={"aicore_mhz": CAP_MHZ, "aicore_mhz_nominal": AICORE_MHZ},
    )
    return _with_evidence(
        key,
        rc,
        aicore_mhz=int(CAP_MHZ),
        aicore_mhz_nominal=int(AICORE_MHZ),
        whole_capture=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- hccs-degraded-card
HCCS_CARD_FACTOR = 0.35  # every HCCS link from / to the card at ~1/3 of its bandwidth


def _hccs_card(ranks: int) -> int:
    return 13 % ranks


def _hccs_card_perturb(ranks: int) -> Perturb:
    c = _hccs_card(ranks)
    node = c // RANKS_PER_NODE
    p = default_perturb(ranks)
    for q in range(node * RANKS_PER_NODE, min(ranks, (node + 1) * RANKS_PER_NODE)):
        if q != c:
            p.link_factor[(c, q)] = HCCS_CARD_FACTOR
            p.link_factor[(q, c)] = HCCS_CARD_FACTOR
    return p


def hccs_card_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, transformer(layers=4), _hccs_card_perturb(ranks))


def _hccs_bw_by(cl: Cluster, touching: int) -> tuple[list[float], list[float]]:
    """HCCS bandwidths (GB/s) of links touching rank ``touching`` and of all other HCCS links."""
    hit: list[float] = []
    rest: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            k = op.kind
            for r in range(cl.ranks):
                for j in range(k.peer.shape[1]):
                    if k.transport[r, j] != 0 or op.link_ms[r, j] <= 0:
                        continue
                    bw = float(op.link_mb[r, j] / op.link_ms[r, j])
                    (hit if touching in (r, int(k.peer[r, j])) else rest).append(bw)
    return hit, rest


def hccs_card_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every HCCS link of one card is slow; the whole job waits on its transfers."""
    cl: Cluster = m[""]["cluster"]
    c = _hccs_card(ranks)
    hit, rest = _hccs_bw_by(cl, c)
    rdma = [x for s in range(len(cl.steps)) for x in _rdma_bw(cl, s, lambda a, b: True)]
    wait = coll_wait_us(m)
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    base = _healthy(cl)
    others = [r for r in range(ranks) if r != c]
    nums = {
        "culprit_hccs_bandwidth_gbps_median": round(float(np.median(hit)), 3),
        "other_hccs_bandwidth_gbps_median": round(float(np.median(rest)), 3),
        "hccs_bandwidth_ratio": round(float(np.median(hit) / np.median(rest)), 3),
        "culprit_slow_links": sum(1 for k in _hccs_card_perturb(ranks).link_factor if k[0] == c),
        "rdma_bandwidth_gbps_median": round(float(np.median(rdma)), 3),
        "victim_wait_us_per_step": _r(float(wait[others].mean())),
        "culprit_wait_us_per_step": _r(float(wait[c].mean())),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_healthy_links": _r(float(np.median(base["step_us"]))),
        "step_saving_share_healthy_links": round(
            float(1 - np.median(base["step_us"]) / np.median(step)), 4
        ),
    }
    key = _key([c], "communication", ["hccs-link-degraded"], "bandwidth_gbps", nums)
    rc = root_cause(
        "slow_link",
        "communication",
        "rank",
        ranks=[c],
        transport="HCCS",
        victims=others,
        not_slow=not_slow_sample(ranks, [c], others),
        metrics={
            "culprit_hccs_bandwidth_gbps": nums["culprit_hccs_bandwidth_gbps_median"],
            "other_hccs_bandwidth_gbps": nums["other_hccs_bandwidth_gbps_median"],
            "victim_wait_us_per_step": nums["victim_wait_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        transport="HCCS",
        card=c,
        node=node_ip(c // RANKS_PER_NODE),
        slow_link_count=nums["culprit_slow_links"],
        hccs_bandwidth_gbps=round(float(np.median(hit)), 1),
        normal_hccs_bandwidth_gbps=round(float(np.median(rest)), 1),
        rdma_normal=True,
        computing_normal=True,
        all_steps=True,
    )


# ---------------------------------------------------------------- hot-card-and-slow-nic
HOT_FACTOR = 1.3  # one card's clock lowered (thermal) for the whole capture
HOT_LINK_FACTOR = 0.3  # one RDMA link at ~30% of its bandwidth
HOT_GRAD_MB = 128.0


def _hot_card(ranks: int) -> int:
    return 3 % ranks


def _hot_link(ranks: int) -> tuple[int, int]:
    src = (RANKS_PER_NODE + 4) % ranks
    return src, (src + RANKS_PER_NODE) % ranks


def _hot_program() -> list[Item]:
    return transformer(layers=4, grad_mb=HOT_GRAD_MB, grad_overlap=3)


def _hot_perturb(ranks: int, card: bool, link: bool) -> Perturb:
    p = default_perturb(ranks)
    if card:
        h = _hot_card(ranks)
        p.dur_scale[h] = HOT_FACTOR
        p.aicore_mhz[h] = [(0, round(AICORE_MHZ / HOT_FACTOR, 1))]
    if link:
        p.link_factor[_hot_link(ranks)] = HOT_LINK_FACTOR
    return p


def hot_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, _hot_program(), _hot_perturb(ranks, True, True))


def hot_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: both faults, each with its cost (step time saved by removing it, re-simulated)."""
    cl: Cluster = m[""]["cluster"]
    h = _hot_card(ranks)
    src, dst = _hot_link(ranks)
    both = _step_us(cl)

    def sim(card: bool, link: bool) -> float:
        alt = dataclasses.replace(cl, perturb=_hot_perturb(ranks, card, link))
        return _step_us(_resimulate(alt, cl.program))

    card_cost = both - sim(False, True)
    link_cost = both - sim(True, False)
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    others = [r for r in range(ranks) if r != h]
    ratio = float(comp[h].mean() / np.median(comp[others].mean(axis=1)))
    slow = _rdma_bw(cl, 0, lambda a, b: (a, b) == (src, dst))
    normal = [
        x for s in range(len(cl.steps)) for x in _rdma_bw(cl, s, lambda a, b: (a, b) != (src, dst))
    ]
    ends = {src, dst}
    vic_link = sorted(set(range(ranks)) - ends - {h})
    link_rc = root_cause(
        "slow_link",
        "communication",
        "link",
        link=(src, dst),
        transport="RDMA",
        victims=vic_link,
        not_slow=not_slow_sample(ranks, ends | {h}, vic_link),
        metrics={
            "cost_us_per_step": _r(link_cost),
            "bandwidth_gbps": round(float(np.median(slow)), 3),
        },
    )
    vic_h = [r for r in victims_by_wait(wait, [h]) if r not in ends]
    card_rc = root_cause(
        "compute_straggler",
        "compute",
        "rank",
        ranks=[h],
        victims=vic_h,
        not_slow=not_slow_sample(ranks, ends | {h}, vic_h),
        metrics={"cost_us_per_step": _r(card_cost), "computing_ratio": round(ratio, 3)},
    )
    causes = sorted([link_rc, card_rc], key=lambda c: -c["metrics"]["cost_us_per_step"])
    nums = {
        "card_cost_us_per_step": _r(card_cost),
        "link_cost_us_per_step": _r(link_cost),
        "both_fixed_saving_us_per_step": _r(both - sim(False, False)),
        "culprit_computing_ratio": round(ratio, 3),
        "culprit_aicore_mhz": round(AICORE_MHZ / HOT_FACTOR, 1),
        "slow_link_bandwidth_gbps": round(float(np.median(slow)), 3),
        "other_rdma_bandwidth_gbps_median": round(float(np.median(normal)), 3),
        "mean_step_us": _r(both),
    }
    key = _key(
        [h],
        "compute",
        ["compute-straggler-hidden", "slow-link-rdma"],
        "step_us",
        nums,
        slow_link={"src_rank": src, "dst_rank": dst, "transport": "RDMA"},
    )
    key["root_causes"] = causes  # by cost, biggest first
    key["card_cause"] = card_rc
    key["link_cause"] = link_rc
    top = dict(causes[0])
    top["not_slow_ranks"] = not_slow_sample(ranks, ends | {h})
    return _with_evidence(
        key,
        top,
        card=h,
        card_aicore_mhz=round(AICORE_MHZ / HOT_FACTOR, 1),
        link=[src, dst],
        link_transport="RDMA",
        bigger=causes[0]["mechanism"],
        nodes=[node_ip(n) for n in range(ranks // RANKS_PER_NODE)],
    )


# ---------------------------------------------------------------- registry
HELDOUT2_SCENARIOS = (
    ScenarioSpec(
        "autocast-cast-churn",
        "fp32 weights under autocast without a cast cache on every rank: a Cast before every "
        "forward MatMul and after every weight-gradient MatMul; Computing longer everywhere",
        16,
        4,
        cast_plans,
        cast_answer,
    ),
    ScenarioSpec(
        "power-capped-cluster",
        "every card's AI Core clock capped (1300 MHz vs 1800) for the whole capture: all ranks "
        "compute ~1.38x longer, evenly; no rank, link or step stands out",
        16,
        4,
        cap_plans,
        cap_answer,
    ),
    ScenarioSpec(
        "hccs-degraded-card",
        "2 nodes: every HCCS link from and to one card at ~1/3 bandwidth (HCCS lanes degraded); "
        "all collectives wait on it; RDMA and computing normal",
        16,
        4,
        hccs_card_plans,
        hccs_card_answer,
        min_ranks=2 * RANKS_PER_NODE,
    ),
    ScenarioSpec(
        "hot-card-and-slow-nic",
        "2 nodes, two faults at once: one card clocked down ~1.3x (thermal) for the whole capture "
        "and one RDMA link on the other node at ~30% bandwidth",
        16,
        4,
        hot_plans,
        hot_answer,
        min_ranks=2 * RANKS_PER_NODE,
    ),
)
HELDOUT2_KINDS = tuple(s.name for s in HELDOUT2_SCENARIOS)


__all__ = ["HELDOUT2_KINDS", "HELDOUT2_SCENARIOS"]
