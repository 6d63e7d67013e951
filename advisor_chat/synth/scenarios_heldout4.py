"""Blind held-out set 4: four more fault kinds (written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``: the workload's shapes and payloads, ``Perturb.tag_scale``,
``kernel_swap`` and ``link_factor``) with answer keys derived from the simulated
timeline and the breakdown the writer measured (never from typed numbers). Every key carries
``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files).
Their question set is ``evals/datasets/generalization_heldout4.yaml``; the kinds are listed in
:mod:`advisor_chat.synth.blind` and described only here.

Kinds:

- ``ffn-dim-unaligned``: the model's MLP intermediate size is not a multiple of 16 (a hand-computed
  8/3 x hidden without rounding): every MatMul that carries that dimension (up / down projection,
  forward and backward) runs at a much lower cube throughput than the aligned MatMuls of the same
  model, on every rank. No late rank; the fix is to pad the intermediate size to an aligned value.
- ``grad-reduce-single-bucket``: data-parallel gradient reduction not overlapped with the backward
  (DDP ``bucket_cap_mb`` larger than the model / Megatron ``overlap_grad_reduce`` off): all the
  gradients go in one large all-reduce after the last backward kernel, before the optimizer, while
  no kernel runs; communication is exposed on every rank, links run at their normal bandwidth.
- ``node-microbatch-mismatch``: one node's launch configuration has a micro-batch of 2 where the
  others use 1 (config drift between nodes): its ranks run the same operators in the same number,
  but with twice the tokens (input shapes differ), so they compute about twice as long; the other
  node waits for them in the gradient all-reduces.
- ``hccs-card-degraded``: one NPU's HCCS ports run at a fraction of their bandwidth (lanes trained
  down / a card to reseat or replace): every HCCS link into and out of that card is slow, the other
  HCCS links and RDMA are normal; every collective waits for that card's transfers.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    RANKS_PER_NODE,
    Cluster,
    Collective,
    Item,
    Kernel,
    default_perturb,
    simulate,
)
from advisor_chat.synth.scenarios import (
    H,
    Plan,
    ScenarioSpec,
    _key,
    _r,
    col,
    transformer,
)
from advisor_chat.synth.scenarios_dev import _plain, _with_evidence
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)


def _all_job_rc(ranks: int, mechanism: str, category: str, **kw: Any) -> dict[str, Any]:
    """A job-level cause: every rank loses the time, no rank is the culprit."""
    return root_cause(
        mechanism,
        category,
        "job",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        **kw,
    )


def _median_share(part: np.ndarray, whole: np.ndarray) -> float:
    return round(float(np.median(part.sum(axis=1) / whole.sum(axis=1))), 4)


def _kernel_time_us(cl: Cluster, sel: list[int]) -> np.ndarray:
    """[ranks, steps] device time (µs) of the program kernels ``sel``."""
    return np.array([st.k_dur[:, sel].sum(axis=1) for st in cl.steps]).T / 1000


def _dims(shape: str) -> list[list[int]]:
    return [[int(x) for x in part.split(",") if x] for part in shape.split(";")]


def _matmul_flops(k: Kernel) -> float:
    """2*m*k*n of a MatMulV2 ``[m,k] x [n,k]^T``."""
    a, b = _dims(k.in_shapes)[:2]
    return 2.0 * a[0] * a[1] * b[0]


def _saving_us(cl: Cluster, ranks: int, steps: int, plan: Plan) -> float:
    """Median step time (µs) saved by running ``plan`` instead (same seed and program)."""
    alt = simulate(plan.program, plan.kinds, plan.perturb, ranks, steps, cl.seed, 0, 0)
    now = np.array([st.end - st.start for st in cl.steps]) / 1000
    fixed = np.array([st.end - st.start for st in alt.steps]) / 1000
    return _r(float(np.median(now - fixed)))


# ---------------------------------------------------------------- ffn-dim-unaligned
FFN_ALIGNED = 4 * H  # the MLP width the base program's durations are written for
FFN_DIM = 10923  # round(8 / 3 * H) without rounding up to a multiple of 16 / 128
FFN_PADDED = 11008  # the aligned size the model should use (multiple of 256)
UNALIGNED_FACTOR = 1.65  # cube efficiency lost when the K / N axis is not 16-aligned
FFN_TAGS = ("mlp_up", "mlp_down", "mlp_down_dx", "mlp_down_dw", "mlp_up_dx", "mlp_up_dw")


def _ffn_kernel(k: Kernel, ref_flops_per_us: float) -> Kernel:
    """The same kernel with the MLP width ``FFN_DIM`` (shapes rewritten, work scaled)."""
    f_old, f_new = FFN_ALIGNED, FFN_DIM

    def fix(shape: str) -> str:
        parts = []
        for part in shape.split(";"):
            dims = [int(x) for x in part.split(",")]
            dims = [f_new if d == f_old else 2 * f_new if d == 2 * f_old else d for d in dims]
            parts.append(",".join(str(d) for d in dims))
        return ";".join(parts)

    out = dataclasses.replace(k, in_shapes=fix(k.in_shapes), out_shapes=fix(k.out_shapes))
    if k.op_type == "MatMulV2":
        # an aligned MatMul of these dimensions would run at the attention MatMuls' throughput
        return dataclasses.replace(out, dur_us=_matmul_flops(out) / ref_flops_per_us)
    return dataclasses.replace(out, dur_us=k.dur_us * f_new / f_old)


def _ref_flops_per_us(prog: list[Item]) -> float:
    ks = [it for it in prog if isinstance(it, Kernel) and it.tag in ("qkv", "attn_out")]
    return float(np.median([_matmul_flops(k) / k.dur_us for k in ks]))


def ffn_program() -> list[Item]:
    """transformer(4 layers) whose MLP width is ``FFN_DIM``."""
    out: list[Item] = []
    base = transformer(layers=4)
    ref = _ref_flops_per_us(base)
    for it in base:
        if isinstance(it, Kernel) and (
            it.tag in FFN_TAGS or it.op_type in ("SwiGlu", "SwiGluGrad")
        ):
            it = _ffn_kernel(it, ref)
        out.append(it)
    return out


def ffn_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    for r in range(ranks):
        for t in FFN_TAGS:
            p.tag_scale[(r, t)] = UNALIGNED_FACTOR
    return _plain(ranks, ffn_program(), p)


def ffn_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank's MLP MatMuls (unaligned width) run at a low throughput."""
    cl: Cluster = m[""]["cluster"]
    ks = cl.kernels
    mm = [j for j, k in enumerate(ks) if k.op_type == "MatMulV2"]
    bad = [j for j in mm if ks[j].tag in FFN_TAGS]
    good = [j for j in mm if ks[j].tag not in FFN_TAGS]
    all_k = list(range(len(ks)))
    bad_t = _kernel_time_us(cl, bad)
    all_t = _kernel_time_us(cl, all_k)

    def tflops(sel: list[int]) -> float:
        vals = []
        for st in cl.steps:
            for j in sel:
                vals.extend((_matmul_flops(ks[j]) / (st.k_dur[:, j] / 1e9) / 1e12).tolist())
        return float(np.median(vals))

    bad_tf, good_tf = tflops(bad), tflops(good)
    # aligned counterfactual: the padded width at the aligned MatMuls' efficiency
    saved = bad_t * (1.0 - FFN_PADDED / FFN_DIM / UNALIGNED_FACTOR)
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    shapes = sorted({ks[j].in_shapes for j in bad})
    nums = {
        "unaligned_matmuls_per_step": len(bad),
        "unaligned_matmul_us_per_step_median": _r(float(np.median(bad_t))),
        "unaligned_matmul_share_of_kernel_time": _median_share(bad_t, all_t),
        "unaligned_matmul_tflops_median": round(bad_tf, 2),
        "aligned_matmul_tflops_median": round(good_tf, 2),
        "throughput_ratio": round(bad_tf / good_tf, 3),
        "saving_if_padded_us_per_step": _r(float(np.median(saved))),
        "median_computing_share": _median_share(comp, step),
        "median_step_us": _r(float(np.median(step))),
    }
    first = ks[bad[0]]
    key = _key(
        [],
        "compute",
        ["shape-axis-alignment"],
        "computing_us",
        nums,
        op={"op_type": "MatMulV2", "name": first.name, "input_shapes": first.in_shapes},
    )
    rc = _all_job_rc(
        ranks,
        "job_hotspot",
        "compute",
        operator="MatMulV2",
        metrics={
            "unaligned_matmul_us_per_step": nums["unaligned_matmul_us_per_step_median"],
            "throughput_ratio": nums["throughput_ratio"],
            "saving_if_padded_us_per_step": nums["saving_if_padded_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operator="MatMulV2",
        unaligned_dim=FFN_DIM,
        unaligned_dim_mod_16=FFN_DIM % 16,
        suggested_dim=FFN_PADDED,
        shapes=shapes,
        aligned_matmuls_normal=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- grad-reduce-single-bucket
SB_LAYERS = 4
SB_GRAD_MB = 96.0  # gradient bytes per layer (BF16)


def _opt_index(prog: list[Item]) -> int:
    return next(
        i
        for i, it in enumerate(prog)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )


def sb_program() -> list[Item]:
    """Every layer's gradients reduced in one all-reduce after the whole backward pass."""
    prog = transformer(layers=SB_LAYERS, grad=False)
    at = _opt_index(prog)
    big = Collective("hcom_allReduce_", "world", SB_LAYERS * SB_GRAD_MB, tag="one_bucket")
    return [*prog[:at], big, *prog[at:]]


def sb_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, sb_program(), default_perturb(ranks))


def sb_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one large gradient all-reduce after the backward, overlapped with nothing."""
    cl: Cluster = m[""]["cluster"]
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    # the same job with per-layer buckets overlapped with the backward (same seed)
    plan = _plain(ranks, transformer(layers=SB_LAYERS, grad_mb=SB_GRAD_MB), default_perturb(ranks))[
        ""
    ]
    alt = simulate(plan.program, plan.kinds, plan.perturb, ranks, steps, cl.seed, 0, 0)
    step_now = np.array([st.end - st.start for st in cl.steps]) / 1000
    step_alt = np.array([st.end - st.start for st in alt.steps]) / 1000
    big = [op for st in cl.steps for op in st.ops if op.item.tag == "one_bucket"]
    big_ms = [(int(op.end[r]) - int(op.start[r])) / 1e6 for op in big for r in range(ranks)]
    # kernels running while the big all-reduce is in flight (none: it waits for the backward)
    busy = 0
    for st in cl.steps:
        for op in st.ops:
            if op.item.tag != "one_bucket":
                continue
            for r in range(ranks):
                ks, ke = st.k_start[r], st.k_start[r] + st.k_dur[r]
                busy += int(((ks < op.end[r]) & (ke > op.start[r])).sum())
    ks_all = cl.kernels
    last_bwd = max(j for j, k in enumerate(ks_all) if k.tag.endswith(("_dx", "_dw")))
    n_coll = len(cl.steps[0].ops)
    nums = {
        "grad_allreduces_per_step": 1,
        "collectives_per_step": n_coll,
        "grad_allreduce_mb": SB_LAYERS * SB_GRAD_MB,
        "grad_allreduce_ms_median": round(float(np.median(big_ms)), 3),
        "kernels_during_grad_allreduce": busy,
        "median_comm_not_overlapped_us_per_step": _r(float(np.median(notov.mean(axis=1)))),
        "median_comm_not_overlapped_share": _median_share(notov, step),
        "saving_with_overlapped_buckets_us_per_step": _r(float(np.median(step_now - step_alt))),
        "median_step_us": _r(float(np.median(step))),
        "overlapped_buckets_step_us": _r(float(np.median(step_alt))),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_job_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "comm_not_overlapped_us_per_step": nums["median_comm_not_overlapped_us_per_step"],
            "saving_with_overlapped_buckets_us_per_step": nums[
                "saving_with_overlapped_buckets_us_per_step"
            ],
        },
    )
    return _with_evidence(
        key,
        rc,
        collective="hcom_allReduce_",
        grad_allreduces_per_step=1,
        size_mb=SB_LAYERS * SB_GRAD_MB,
        position="after the last backward kernel, before the optimizer",
        after_op_type=ks_all[last_bwd].op_type,
        before_op_type="ForeachMulScalar",
        overlapped_kernels=busy,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- node-microbatch-mismatch
MB_FACTOR = 2  # micro-batch of the drifted node / of the others
MB_DUR = {"AI_CORE": 1.95, "MIX_AIC": 2.0, "AI_VECTOR_CORE": 2.0}


def _mb_node(ranks: int) -> list[int]:
    """The drifted node: the second node (ranks 8-15), or the upper half of a smaller job."""
    if ranks >= 2 * RANKS_PER_NODE:
        return list(range(RANKS_PER_NODE, 2 * RANKS_PER_NODE))
    return list(range(ranks // 2, ranks))


def _batched(k: Kernel) -> Kernel | None:
    """The kernel with ``MB_FACTOR`` times the tokens (None: parameter-sized, unchanged)."""
    if k.op_type.startswith("Foreach"):
        return None
    parts = [[int(x) for x in p.split(",")] for p in k.in_shapes.split(";")]
    outs = [int(x) for x in k.out_shapes.split(",")]
    if k.op_type.startswith("FlashAttention"):
        parts = [[d[0] * MB_FACTOR, *d[1:]] for d in parts]
        outs = [outs[0] * MB_FACTOR, *outs[1:]]
    elif k.op_type == "MatMulV2" and k.tag.endswith("_dw"):
        # [out, tokens] x [in, tokens]^T: the token axis is the reduced one
        parts = [[d[0], d[1] * MB_FACTOR] for d in parts]
    else:
        parts = [[parts[0][0] * MB_FACTOR, *parts[0][1:]], *parts[1:]]
        outs = [outs[0] * MB_FACTOR, *outs[1:]]
    return dataclasses.replace(
        k,
        in_shapes=";".join(",".join(str(x) for x in d) for d in parts),
        out_shapes=",".join(str(x) for x in outs),
        dur_us=k.dur_us * MB_DUR.get(k.core, 2.0),
    )


def mb_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    ks = [it for it in prog if isinstance(it, Kernel)]
    p = default_perturb(ranks)
    for j, k in enumerate(ks):
        big = _batched(k)
        if big is None:
            continue
        for r in _mb_node(ranks):
            p.kernel_swap[(-1, r, j)] = big
    return _plain(ranks, prog, p)


def mb_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one node computes twice the tokens; the other ranks wait for it."""
    cl: Cluster = m[""]["cluster"]
    grp = _mb_node(ranks)
    rest = [r for r in range(ranks) if r not in grp]
    p = cl.perturb
    ks = cl.kernels
    qkv = next(j for j, k in enumerate(ks) if k.tag == "qkv")
    shape_grp = p.kernel_at(0, grp[0], qkv, ks[qkv]).in_shapes
    shape_rest = ks[qkv].in_shapes
    fa = next(j for j, k in enumerate(ks) if k.op_type == "FlashAttentionScore")
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    counts_equal = all(st.k_start.shape[1] == len(ks) for st in cl.steps)
    kt = _kernel_time_us(cl, list(range(len(ks))))
    vic = victims_by_wait(wait, grp)
    fixed = _plain(ranks, cl.program, default_perturb(ranks))[""]
    nums = {
        "group_ranks": grp,
        "group_computing_us_per_step": _r(float(np.median(comp[grp].mean(axis=1)))),
        "others_computing_us_per_step": _r(float(np.median(comp[rest].mean(axis=1)))),
        "computing_ratio": round(
            float(np.median(comp[grp].mean(axis=1)) / np.median(comp[rest].mean(axis=1))), 3
        ),
        "group_kernel_us_per_step": _r(float(np.median(kt[grp].mean(axis=1)))),
        "others_kernel_us_per_step": _r(float(np.median(kt[rest].mean(axis=1)))),
        "kernels_per_step_each_rank": len(ks),
        "group_wait_us_per_step": _r(float(np.median(wait[grp].mean(axis=1)))),
        "others_wait_us_per_step": _r(float(np.median(wait[rest].mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "saving_if_same_config_us_per_step": _saving_us(cl, ranks, steps, fixed),
    }
    key = _key(
        grp,
        "compute",
        ["load-imbalance-vs-slow-kernels"],
        "computing_us",
        nums,
        op={"op_type": "MatMulV2", "name": ks[qkv].name, "input_shapes": shape_grp},
    )
    rc = root_cause(
        "slow_group",
        "compute",
        "group",
        ranks=grp,
        victims=vic,
        not_slow=not_slow_sample(ranks, grp, vic),
        metrics={
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "culprit_wait_us_per_step": _r(float(wait[grp].mean())),
            "culprit_computing_excess_us_per_step": _r(
                float(np.median(comp[grp].mean(axis=1))) - float(np.median(comp[rest].mean(axis=1)))
            ),
            "saving_if_same_config_us_per_step": nums["saving_if_same_config_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        node=grp[0] // RANKS_PER_NODE,
        first_rank=grp[0],
        last_rank=grp[-1],
        tokens_group=_dims(shape_grp)[0][0],
        tokens_others=_dims(shape_rest)[0][0],
        qkv_shape_group=shape_grp,
        qkv_shape_others=shape_rest,
        flash_attention_batch_group=_dims(p.kernel_at(0, grp[0], fa, ks[fa]).in_shapes)[0][0],
        flash_attention_batch_others=_dims(ks[fa].in_shapes)[0][0],
        same_kernel_count=counts_equal,
        same_operators=True,
        kernels_slower_at_same_shape=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- hccs-card-degraded
CARD_FACTOR = 0.3


def _card(ranks: int) -> int:
    return 5 % min(ranks, RANKS_PER_NODE)


def card_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    c = _card(ranks)
    p = default_perturb(ranks)
    node = c // RANKS_PER_NODE
    for q in range(node * RANKS_PER_NODE, min(ranks, (node + 1) * RANKS_PER_NODE)):
        if q != c:
            p.link_factor[(c, q)] = CARD_FACTOR
            p.link_factor[(q, c)] = CARD_FACTOR
    return _plain(ranks, transformer(layers=4, grad_mb=128.0, grad_overlap=3), p)


def card_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every HCCS link touching one card is slow; everyone waits for its transfers."""
    c = _card(ranks)
    cl: Cluster = m[""]["cluster"]
    per: dict[tuple[int, int], list[float]] = {}
    rdma: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            k = op.kind
            for r in range(ranks):
                for j in range(k.peer.shape[1]):
                    if op.link_ms[r, j] <= 0:
                        continue
                    bw = float(op.link_mb[r, j] / op.link_ms[r, j])
                    if k.transport[r, j] == 0:
                        per.setdefault((r, int(k.peer[r, j])), []).append(bw)
                    elif k.transport[r, j] == 1:
                        rdma.append(bw)
    bw = {lk: float(np.mean(v)) for lk, v in per.items()}
    card_links = [lk for lk in bw if c in lk]
    out_bw = [bw[lk] for lk in card_links if lk[0] == c]
    in_bw = [bw[lk] for lk in card_links if lk[1] == c]
    peers = [v for lk, v in bw.items() if c not in lk]
    wait = coll_wait_us(m)
    vic = victims_by_wait(wait, [c])
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    nums = {
        "card_hccs_out_bandwidth_gbps": round(float(np.median(out_bw)), 3),
        "card_hccs_in_bandwidth_gbps": round(float(np.median(in_bw)), 3),
        "other_hccs_bandwidth_gbps": round(float(np.median(peers)), 3),
        "rdma_bandwidth_gbps": round(float(np.median(rdma)), 3) if rdma else 0.0,
        "slow_hccs_links": len(card_links),
        "culprit_wait_us_per_step": _r(float(wait[c].mean())),
        "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
        "median_comm_not_overlapped_us_per_step": _r(float(np.median(notov.mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "saving_if_card_fixed_us_per_step": _saving_us(
            cl, ranks, steps, _plain(ranks, cl.program, default_perturb(ranks))[""]
        ),
    }
    key = _key([c], "communication", ["hccs-link-degraded"], "bandwidth_gbps", nums)
    rc = root_cause(
        "slow_link",
        "communication",
        "rank",
        ranks=[c],
        transport="HCCS",
        victims=vic,
        not_slow=not_slow_sample(ranks, [c], vic),
        metrics={
            "card_hccs_bandwidth_gbps": nums["card_hccs_out_bandwidth_gbps"],
            "other_hccs_bandwidth_gbps": nums["other_hccs_bandwidth_gbps"],
            "slow_hccs_links": len(card_links),
            "saving_if_card_fixed_us_per_step": nums["saving_if_card_fixed_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        card=c,
        transport="HCCS",
        slow_links=sorted([list(lk) for lk in card_links]),
        both_directions=True,
        links_per_direction=len(out_bw),
        rdma_normal=True,
        compute_normal=True,
    )


# ---------------------------------------------------------------- registry
HELDOUT4_SCENARIOS = (
    ScenarioSpec(
        "ffn-dim-unaligned",
        "blind held-out kind (set 4)",
        16,
        3,
        ffn_plans,
        ffn_answer,
    ),
    ScenarioSpec(
        "grad-reduce-single-bucket",
        "blind held-out kind (set 4)",
        16,
        3,
        sb_plans,
        sb_answer,
    ),
    ScenarioSpec(
        "node-microbatch-mismatch",
        "blind held-out kind (set 4)",
        16,
        3,
        mb_plans,
        mb_answer,
        min_ranks=4,
    ),
    ScenarioSpec(
        "hccs-card-degraded",
        "blind held-out kind (set 4)",
        16,
        3,
        card_plans,
        card_answer,
        min_ranks=8,
    ),
)
HELDOUT4_KINDS = tuple(s.name for s in HELDOUT4_SCENARIOS)


__all__ = ["HELDOUT4_KINDS", "HELDOUT4_SCENARIOS"]
