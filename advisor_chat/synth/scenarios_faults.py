"""Generalization scenarios (issue 22): realistic fault kinds the diagnosis rules were not written for.

Each scenario plants one fault kind (or two independent ones) as a mechanism of the simulation
(``advisor_chat.synth.model``) and derives its answer key from the simulated timeline and the breakdown
the writer measured, never from typed numbers. Besides the ``root_cause`` object of the diagnosis
contract (docs/CONTRACTS.md), every key carries ``root_cause.evidence``: the facts that distinguish the
fault kind in the files (operator, accelerator core, dtype, node, step, group, transport ...), which the
``evidence`` check of the generalization question set (evals/datasets/generalization.yaml) looks for.

Kinds: ``aicpu-fallback``, ``node-host-contention``, ``varlen-imbalance``, ``unfused-attention``,
``two-faults``, ``checkpoint-stall``, ``fp32-rank``, ``slow-tp-group``, ``slow-nic-node``,
``hccs-link-both-ways``.
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
    Perturb,
    default_perturb,
    node_ip,
    simulate,
)
from advisor_chat.synth.scenarios import (
    CANN8,
    HCCL_ENV_KEY,
    T0_NS,
    H,
    Plan,
    ScenarioSpec,
    _info,
    _k,
    _key,
    _r,
    _tp_for,
    col,
    group_kinds,
    matmul,
    transformer,
    vec,
)
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    step_ids,
    victims_by_wait,
)
from advisor_chat.synth.writer import RunInfo

FIRST_STEP = 10  # the generator's first step id (advisor_chat.synth.FIRST_STEP)


# ---------------------------------------------------------------- shared helpers
def _with_evidence(key: dict[str, Any], rc: dict[str, Any], **evidence: Any) -> dict[str, Any]:
    """Set the key's ``root_cause`` and its distinguishing ``evidence``.

    ``evidence`` is a top-level key: the ``root_cause`` object keeps exactly the contract's fields.
    """
    key["root_cause"] = rc
    key["evidence"] = evidence
    return key


def _mean_excess(values: np.ndarray, culprits: list[int]) -> float:
    """Mean per-step value of the culprits minus the median of the other ranks' means."""
    others = [r for r in range(values.shape[0]) if r not in culprits]
    return float(values[culprits].mean() - np.median(values[others].mean(axis=1)))


def _kernel_mean_us(cl: Cluster, ranks: list[int], sel: list[int]) -> float:
    """Mean duration (µs) of the kernels at program positions ``sel`` on ``ranks`` over all steps."""
    return float(np.mean([st.k_dur[np.ix_(ranks, sel)].mean() for st in cl.steps]) / 1000)


def _group_cause(
    m: dict[str, Any],
    ranks: int,
    group: list[int],
    mechanism: str,
    category: str,
    **kw: Any,
) -> dict[str, Any]:
    """A group of culprit ranks; victims are the ranks that wait for the group in collectives."""
    wait = coll_wait_us(m)
    vic = victims_by_wait(wait, group)
    metrics = {
        "culprit_wait_us_per_step": _r(float(wait[group].mean())),
        "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
    }
    metrics.update(kw.pop("metrics", {}))
    return root_cause(
        mechanism,
        category,
        "group",
        ranks=group,
        victims=vic,
        not_slow=not_slow_sample(ranks, group, vic),
        metrics=metrics,
        **kw,
    )


def _ranks_cause(
    m: dict[str, Any],
    ranks: int,
    culprits: list[int],
    mechanism: str,
    category: str,
    **kw: Any,
) -> dict[str, Any]:
    """One or more culprit ranks (``rank`` / ``ranks``); victims wait for them in collectives."""
    wait = coll_wait_us(m)
    vic = victims_by_wait(wait, culprits)
    metrics = {
        "culprit_wait_us_per_step": _r(float(wait[culprits].mean())),
        "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
    }
    metrics.update(kw.pop("metrics", {}))
    return root_cause(
        mechanism,
        category,
        "rank" if len(culprits) == 1 else "ranks",
        ranks=culprits,
        victims=vic,
        not_slow=not_slow_sample(ranks, culprits, vic),
        metrics=metrics,
        **kw,
    )


def _plain(ranks: int, prog: list[Item], p: Perturb, tp: int = 1) -> dict[str, Plan]:
    return {"": Plan(prog, group_kinds(ranks, tp), p, _info(CANN8, tp, ranks), tp=tp)}


# ---------------------------------------------------------------- a sequence-length-aware program
def lm_program(seq: int = 4096, layers: int = 4, attention: str = "flash") -> list[Item]:
    """A Megatron-like data-parallel step whose shapes and durations follow the sequence length.

    Linear layers and vector ops scale with ``seq``; attention scales with ``seq**2``.

    Args:
        seq: tokens per micro-batch.
        layers: transformer layers.
        attention: ``"flash"`` (FlashAttentionScore, fused) or ``"unfused"`` (Transpose, BatchMatMulV2,
            Mul, SoftmaxV2, DropOutDoMask, BatchMatMulV2 and their gradients: what an eager attention
            without the fused kernel launches).
    """
    f = seq / 4096
    a = f * f
    hd = H
    ffn = 4 * H
    heads = 32
    dh = hd // heads
    prog: list[Item] = []

    def mm(tag: str, m_: int, k_: int, n_: int, dur: float) -> Kernel:
        return matmul(tag, m_, k_, n_, dur)

    def attn_fwd() -> list[Item]:
        if attention == "flash":
            return [
                _k(
                    "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
                    "FlashAttentionScore",
                    "MIX_AIC",
                    f"1,{seq},{hd};1,{seq},{hd};1,{seq},{hd}",
                    f"1,{seq},{hd}",
                    1100 * a,
                    "aclnnFlashAttentionScore",
                )
            ]
        qk = f"{heads},{seq},{dh}"
        sc = f"{heads},{seq},{seq}"
        return [
            _tr(qk, 260 * f),
            _tr(qk, 260 * f),
            _tr(qk, 260 * f),
            _bmm(f"{qk};{qk}", sc, 1500 * a),
            vec("scale", "Mul", 700 * a, sc),
            vec("softmax", "SoftmaxV2", 1400 * a, sc),
            vec("dropout", "DropOutDoMask", 900 * a, sc),
            _bmm(f"{sc};{qk}", qk, 1500 * a),
            _tr(qk, 260 * f),
        ]

    def attn_bwd() -> list[Item]:
        if attention == "flash":
            return [
                _k(
                    "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
                    "FlashAttentionScoreGrad",
                    "MIX_AIC",
                    f"1,{seq},{hd};1,{seq},{hd};1,{seq},{hd};1,{seq},{hd}",
                    f"1,{seq},{hd}",
                    2300 * a,
                    "aclnnFlashAttentionScoreGrad",
                )
            ]
        qk = f"{heads},{seq},{dh}"
        sc = f"{heads},{seq},{seq}"
        return [
            _tr(qk, 260 * f),
            _bmm(f"{qk};{qk}", sc, 1500 * a),
            _bmm(f"{sc};{qk}", qk, 1500 * a),
            vec("dropout_grad", "DropOutDoMask", 900 * a, sc),
            vec("softmax_grad", "SoftmaxGrad", 1600 * a, sc),
            vec("scale_grad", "Mul", 700 * a, sc),
            _bmm(f"{sc};{qk}", qk, 1500 * a),
            _bmm(f"{sc};{qk}", qk, 1500 * a),
            _tr(qk, 260 * f),
            _tr(qk, 260 * f),
            _tr(qk, 260 * f),
        ]

    for _ in range(layers):
        prog += [vec("rmsnorm", "RmsNorm", 60 * f, f"{seq},{hd}")]
        prog += [mm("qkv", seq, hd, 3 * hd, 900 * f)]
        prog += attn_fwd()
        prog += [mm("attn_out", seq, hd, hd, 320 * f)]
        prog += [
            vec("add", "Add", 30 * f, f"{seq},{hd}"),
            vec("rmsnorm", "RmsNorm", 60 * f, f"{seq},{hd}"),
        ]
        prog += [mm("mlp_up", seq, hd, 2 * ffn, 1500 * f)]
        prog += [vec("swiglu", "SwiGlu", 90 * f, f"{seq},{2 * ffn}")]
        prog += [mm("mlp_down", seq, ffn, hd, 1200 * f)]
        prog += [vec("add", "Add", 30 * f, f"{seq},{hd}")]
    for li in range(layers):
        prog += [
            mm("mlp_down_dx", seq, hd, ffn, 1200 * f),
            mm("mlp_down_dw", hd, seq, ffn, 1250 * f),
            vec("swiglu_grad", "SwiGluGrad", 140 * f, f"{seq},{2 * ffn}"),
            mm("mlp_up_dx", seq, 2 * ffn, hd, 1500 * f),
            mm("mlp_up_dw", 2 * ffn, seq, hd, 1550 * f),
            vec("rmsnorm_grad", "RmsNormGrad", 95 * f, f"{seq},{hd}"),
            mm("attn_out_dx", seq, hd, hd, 320 * f),
            mm("attn_out_dw", hd, seq, hd, 330 * f),
        ]
        prog += attn_bwd()
        prog += [
            mm("qkv_dx", seq, 3 * hd, hd, 900 * f),
            mm("qkv_dw", 3 * hd, seq, hd, 920 * f),
            vec("rmsnorm_grad", "RmsNormGrad", 95 * f, f"{seq},{hd}"),
        ]
        prog.append(
            Collective("hcom_allReduce_", "world", 96.0, overlap=6 if li < layers - 1 else 0)
        )
    prog += [
        _k(
            "aclnnForeachAddListV2_ForeachAddListV2_ForeachAddList",
            "ForeachAddList",
            "AI_VECTOR_CORE",
            f"{H},{H};{H}",
            f"{H},{H};{H}",
            650,
            "aclnnForeachAddList",
            bd=48,
        ),
        Collective("hcom_allReduce_", "world", 4.0),
        Collective("hcom_allGather_", "world", 2.0),
    ]
    return prog


def _tr(shape: str, dur: float) -> Kernel:
    return _k(
        "aclnnPermute_TransposeAiCore_Transpose",
        "Transpose",
        "AI_VECTOR_CORE",
        shape,
        shape,
        dur,
        "aclnnPermute",
        bd=40,
    )


def _bmm(ins: str, out: str, dur: float) -> Kernel:
    return _k(
        "aclnnBatchMatMul_BatchMatMulV2Common_BatchMatMulV2",
        "BatchMatMulV2",
        "AI_CORE",
        ins,
        out,
        dur,
        "aclnnBatchMatMul",
    )


def _kernels(prog: list[Item]) -> list[Kernel]:
    return [it for it in prog if isinstance(it, Kernel)]


# ---------------------------------------------------------------- aicpu-fallback
AICPU_OP = "IndexPutV2"
AICPU_US = 3200.0
AICPU_NORMAL_US = 45.0


def _aicpu_ranks(ranks: int) -> list[int]:
    return sorted({3 % ranks, 11 % ranks})


def _index_put(core: str, dur: float, idx_dtype: str) -> Kernel:
    ins = f"{4096},{H};{4096};{4096},{H}"
    k = _k(
        "aclnnIndexPutImpl_IndexPutV2_IndexPutV2" if core != "AI_CPU" else AICPU_OP,
        AICPU_OP,
        core,
        ins,
        f"{4096},{H}",
        dur,
        "aclnnIndexPutImpl",
        tag="index_put",
        bd=40 if core != "AI_CPU" else 1,
    )
    return dataclasses.replace(k, in_dtypes=f"DT_BF16;{idx_dtype};DT_BF16")


def aicpu_program() -> list[Item]:
    """transformer(4 layers) with an IndexPutV2 (masked update) after the first RmsNorm of each layer."""
    out: list[Item] = []
    seen = 0
    for it in transformer(layers=4):
        out.append(it)
        if isinstance(it, Kernel) and it.op_type == "RmsNorm" and seen % 2 == 0 and seen < 8:
            out.append(_index_put("AI_VECTOR_CORE", AICPU_NORMAL_US, "DT_INT32"))
        if isinstance(it, Kernel) and it.op_type == "RmsNorm":
            seen += 1
    return out


def aicpu_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = aicpu_program()
    p = default_perturb(ranks)
    slow_k = _index_put("AI_CPU", AICPU_US, "DT_INT64")
    for j, k in enumerate(_kernels(prog)):
        if k.tag == "index_put":
            for r in _aicpu_ranks(ranks):
                p.kernel_swap[(-1, r, j)] = slow_k
    return _plain(ranks, prog, p)


def aicpu_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the ranks whose IndexPutV2 ran on AI_CPU, its time vs the AI_VECTOR_CORE peers."""
    slow = _aicpu_ranks(ranks)
    cl: Cluster = m[""]["cluster"]
    sel = [j for j, k in enumerate(cl.kernels) if k.tag == "index_put"]
    others = [r for r in range(ranks) if r not in slow]
    comp = col(m, "computing_us")
    slow_us = _kernel_mean_us(cl, slow, sel)
    peer_us = _kernel_mean_us(cl, others, sel)
    nums = {
        "aicpu_op_avg_us_culprits": _r(slow_us),
        "aicpu_op_avg_us_others": _r(peer_us),
        "aicpu_op_ratio": round(slow_us / peer_us, 2),
        "aicpu_op_count_per_step": len(sel),
        "culprit_computing_excess_us_per_step": _r(_mean_excess(comp, slow)),
    }
    key = _key(slow, "compute", ["aicpu-operators"], "avg_duration_us", nums)
    rc = _ranks_cause(
        m,
        ranks,
        slow,
        "compute_straggler",
        "compute",
        operator=AICPU_OP,
        metrics=nums,
    )
    return _with_evidence(
        key,
        rc,
        operator=AICPU_OP,
        accelerator_core="AI_CPU",
        normal_core="AI_VECTOR_CORE",
        index_dtype="DT_INT64",
    )
    return key


# ---------------------------------------------------------------- node-host-contention
def _contended_node(ranks: int) -> int:
    return 1 if ranks >= 2 * RANKS_PER_NODE else 0


def _node_ranks(ranks: int, node: int) -> list[int]:
    return [r for r in range(ranks) if r // RANKS_PER_NODE == node]


def node_host_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 41)
    for i, r in enumerate(_node_ranks(ranks, _contended_node(ranks))):
        p.host_bound[r] = True
        p.api_us[r] = 60.0 + 20.0 * rng.random()
        p.gap_us[r] = 75.0 + 15.0 * rng.random()
        p.dispatch_stalls[r] = (11 + i % 3, 700.0 + 60.0 * i)
    return _plain(ranks, transformer(layers=4), p)


def node_host_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the 8 ranks of one node are host-bound; the other node waits for them."""
    node = _contended_node(ranks)
    grp = _node_ranks(ranks, node)
    rest = [r for r in range(ranks) if r not in grp]
    cl: Cluster = m[""]["cluster"]
    free = col(m, "free_us")
    api = np.array([st.k_api_dur.mean(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    nums = {
        "node_free_us_per_step_median": _r(float(np.median(free[grp].mean(axis=1)))),
        "others_free_us_per_step_median": _r(float(np.median(free[rest].mean(axis=1))))
        if rest
        else 0.0,
        "node_launch_api_us_median": _r(float(np.median(api[grp]))),
        "others_launch_api_us_median": _r(float(np.median(api[rest]))) if rest else 0.0,
        "culprit_free_excess_us_per_step": _r(_mean_excess(free, grp)) if rest else 0.0,
    }
    key = _key(grp, "scheduling", ["cpu-core-binding", "host-dispatch-bound"], "free_us", nums)
    key["culprit_node"] = node
    key["culprit_node_ip"] = node_ip(node)
    rc = _group_cause(m, ranks, grp, "host_stall", "scheduling", metrics=nums)
    return _with_evidence(
        key, rc, node=node, node_ip=node_ip(node), first_rank=grp[0], last_rank=grp[-1]
    )
    return key


# ---------------------------------------------------------------- varlen-imbalance
VARLEN_SEQ = 4096
VARLEN_LONG = 6144
VARLEN_ORDER = (2, 5, 0, 7, 3, 6, 1, 4)


def varlen_events(ranks: int, steps: int) -> list[tuple[int, int]]:
    """(step index, rank) that got the longest sequences in each step."""
    return [(si, VARLEN_ORDER[si % len(VARLEN_ORDER)] % ranks) for si in range(steps)]


def varlen_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    base = lm_program(VARLEN_SEQ)
    long_k = _kernels(lm_program(VARLEN_LONG))
    p = default_perturb(ranks)
    for si, r in varlen_events(ranks, steps):
        for j, k in enumerate(long_k):
            p.kernel_swap[(si, r, j)] = k
    return _plain(ranks, base, p)


def varlen_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: a different rank computes longest in every step, with longer-sequence shapes."""
    ids = step_ids(m)
    ev = varlen_events(ranks, steps)
    comp = col(m, "computing_us")
    wait = coll_wait_us(m)
    slowest = [int(np.argmax(comp[:, si])) for si in range(steps)]
    excess = [float(comp[r, si] - np.median(np.delete(comp[:, si], r))) for si, r in ev]
    vic_wait = [float(np.median(np.delete(wait[:, si], r)) - wait[r, si]) for si, r in ev]
    nums = {
        "slowest_rank_per_step": slowest,
        "excess_computing_us_per_event": [_r(x) for x in excess],
        "victim_extra_wait_us_per_event": [_r(x) for x in vic_wait],
        "long_seq": VARLEN_LONG,
        "base_seq": VARLEN_SEQ,
    }
    key = _key([], "compute", ["load-imbalance-vs-slow-kernels"], "computing_us", nums)
    ev_ranks = sorted({r for _, r in ev})
    rc = root_cause(
        "step_events",
        "compute",
        "steps",
        ranks=ev_ranks,
        events=[(ids[si], r) for si, r in ev],
        victims=[],
        not_slow=[r for r in range(ranks) if r not in ev_ranks],
        steps=[],
        metrics={
            "mean_excess_computing_us_per_event": _r(float(np.mean(excess))),
            "distinct_slowest_ranks": len(set(slowest)),
        },
    )
    return _with_evidence(
        key,
        rc,
        long_seq=VARLEN_LONG,
        base_seq=VARLEN_SEQ,
        operator="FlashAttentionScore",
        per_step_slowest=[[ids[si], r] for si, r in ev],
    )
    return key


# ---------------------------------------------------------------- unfused-attention
def unfused_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, lm_program(4096, attention="unfused"), default_perturb(ranks))


UNFUSED_TYPES = ("BatchMatMulV2", "SoftmaxV2", "SoftmaxGrad", "DropOutDoMask", "Transpose", "Mul")


def unfused_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: eager attention ops take the biggest share of compute on every rank."""
    cl: Cluster = m[""]["cluster"]
    by_type: dict[str, float] = {}
    tot = 0.0
    for st in cl.steps:
        d = st.k_dur.mean(axis=0) / 1000
        for j, k in enumerate(cl.kernels):
            by_type[k.op_type] = by_type.get(k.op_type, 0.0) + float(d[j])
            tot += float(d[j])
    attn = sum(v for t, v in by_type.items() if t in UNFUSED_TYPES)
    top = max(by_type, key=lambda t: by_type[t])
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    nums = {
        "attention_ops_share_of_compute": round(attn / tot, 4),
        "top_op_type": top,
        "top_op_share_of_compute": round(by_type[top] / tot, 4),
        "computing_share_median": round(float(np.median(comp.sum(axis=1) / step.sum(axis=1))), 4),
        "transpose_count_per_step": sum(1 for k in cl.kernels if k.op_type == "Transpose"),
    }
    key = _key([], "compute", ["tiny-kernels-fusion"], "op_time_share", nums)
    # no rank is late: no culprit rank; what costs the job is an operator pattern on every rank
    rc = root_cause(
        "no_culprit",
        "compute",
        "none",
        not_slow=not_slow_sample(ranks, []),
        metrics={
            "dominant": "computing",
            **{k: v for k, v in nums.items() if not isinstance(v, str)},
        },
    )
    return _with_evidence(
        key,
        rc,
        top_op_type=top,
        op_types=list(UNFUSED_TYPES),
        fused_replacement="FlashAttentionScore",
    )
    return key


# ---------------------------------------------------------------- two-faults
def _two_link(ranks: int) -> tuple[int, int]:
    src = 4 % RANKS_PER_NODE
    return src, (src + RANKS_PER_NODE) % ranks


def _two_host(ranks: int) -> int:
    return 14 % ranks if ranks > 8 else 6 % ranks


def _two_perturb(ranks: int, link: bool, host: bool) -> Perturb:
    p = default_perturb(ranks)
    if link:
        p.link_factor[_two_link(ranks)] = 0.3
    if host:
        h = _two_host(ranks)
        p.api_us[h] = 120.0
        p.gap_us[h] = 130.0
        p.host_bound[h] = True
        p.dispatch_stalls[h] = (13, 1200.0)
    return p


def two_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(
        ranks, transformer(layers=4, grad_mb=128.0, grad_overlap=3), _two_perturb(ranks, True, True)
    )


def _mean_step_us(cl: Cluster) -> float:
    return float(np.mean([st.end - st.start for st in cl.steps]) / 1000)


def two_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: both faults, each with its cost (step time saved by removing it, re-simulated)."""
    cl: Cluster = m[""]["cluster"]
    src, dst = _two_link(ranks)
    h = _two_host(ranks)
    prog = transformer(layers=4, grad_mb=128.0, grad_overlap=3)
    seed = cl.seed
    both = _mean_step_us(cl)
    kinds = group_kinds(ranks, 1)

    def sim(link: bool, host: bool) -> float:
        c = simulate(
            prog, kinds, _two_perturb(ranks, link, host), ranks, steps, seed, FIRST_STEP, T0_NS
        )
        return _mean_step_us(c)

    link_cost = both - sim(False, True)
    host_cost = both - sim(True, False)
    free = col(m, "free_us")
    wait = coll_wait_us(m)
    ends = {src, dst}
    vic_link = sorted(set(range(ranks)) - ends - {h})
    link_rc = root_cause(
        "slow_link",
        "communication",
        "link",
        link=(src, dst),
        transport="RDMA" if src // RANKS_PER_NODE != dst // RANKS_PER_NODE else "HCCS",
        victims=vic_link,
        not_slow=not_slow_sample(ranks, ends | {h}, vic_link),
        metrics={"cost_us_per_step": _r(link_cost)},
    )
    vic_h = [r for r in victims_by_wait(wait, [h]) if r not in ends]
    host_rc = root_cause(
        "host_stall",
        "scheduling",
        "rank",
        ranks=[h],
        victims=vic_h,
        not_slow=not_slow_sample(ranks, ends | {h}, vic_h),
        metrics={
            "cost_us_per_step": _r(host_cost),
            "culprit_free_excess_us_per_step": _r(_mean_excess(free, [h])),
        },
    )
    causes = sorted([link_rc, host_rc], key=lambda c: -c["metrics"]["cost_us_per_step"])
    nums = {"link_cost_us_per_step": _r(link_cost), "host_cost_us_per_step": _r(host_cost)}
    key = _key(
        [h],
        "communication",
        ["slow-link-rdma", "host-dispatch-bound"],
        "step_us",
        nums,
        slow_link={"src_rank": src, "dst_rank": dst, "transport": link_rc["culprit_transport"]},
    )
    key["root_causes"] = causes  # by cost, biggest first
    key["link_cause"] = link_rc
    key["host_cause"] = host_rc
    not_slow = not_slow_sample(ranks, ends | {h})
    top = dict(causes[0])
    top["not_slow_ranks"] = not_slow
    return _with_evidence(
        key,
        top,
        host_rank=h,
        link=[src, dst],
        bigger=causes[0]["mechanism"],
    )


# ---------------------------------------------------------------- checkpoint-stall
CKPT_STEP_INDEX = 2
CKPT_S = 42.0
CKPT_EXEC_TIMEOUT_S = 60


def _ckpt_rank(ranks: int) -> int:
    return 0


def ckpt_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    si_ck = min(CKPT_STEP_INDEX, steps - 1)
    r0 = _ckpt_rank(ranks)

    def stall(si: int) -> np.ndarray:
        d = np.full(ranks, 300.0)
        if si == si_ck:
            d[r0] = CKPT_S * 1e6
        return d

    p.step_stall_us = stall
    info = _info(CANN8, 1, ranks)
    meta = dict(info.user_metadata or {})
    meta[HCCL_ENV_KEY] = {
        "HCCL_CONNECT_TIMEOUT": "",
        "HCCL_EXEC_TIMEOUT": str(CKPT_EXEC_TIMEOUT_S),
        "HCCL_BUFFSIZE": "",
    }
    info = RunInfo(
        cann_version=info.cann_version,
        torch_npu_version=info.torch_npu_version,
        env=info.env,
        user_metadata=meta,
    )
    return {"": Plan(transformer(layers=4), group_kinds(ranks, 1), p, info)}


def ckpt_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one step in which rank 0 arrives ~42 s late; the others wait in its first collective."""
    ids = step_ids(m)
    si_ck = min(CKPT_STEP_INDEX, steps - 1)
    r0 = _ckpt_rank(ranks)
    wait = coll_wait_us(m)
    free = col(m, "free_us")
    step = col(m, "step_us")
    vic = victims_by_wait(wait, [r0], [si_ck])
    normal = [i for i in range(steps) if i != si_ck]
    nums = {
        "stall_step": ids[si_ck],
        "stall_rank": r0,
        "late_by_s": round(CKPT_S, 3),
        "victim_wait_s_stall_step": round(float(wait[vic, si_ck].mean()) / 1e6, 3) if vic else 0.0,
        "culprit_free_s_stall_step": round(float(free[r0, si_ck]) / 1e6, 3),
        "step_s_stall_step": round(float(step[:, si_ck].max()) / 1e6, 3),
        "step_ms_other_steps_median": round(float(np.median(step[:, normal])) / 1e3, 3)
        if normal
        else 0.0,
        "hccl_exec_timeout_s": CKPT_EXEC_TIMEOUT_S,
        "timeout_margin_s": round(CKPT_EXEC_TIMEOUT_S - float(wait[vic, si_ck].max()) / 1e6, 3)
        if vic
        else float(CKPT_EXEC_TIMEOUT_S),
    }
    key = _key(
        [r0],
        "scheduling",
        ["checkpoint-save-stall", "hccl-timeouts"],
        "synchronization_time_ms",
        nums,
    )
    key["stall_step"] = ids[si_ck]
    key["hccl_exec_timeout_s"] = CKPT_EXEC_TIMEOUT_S
    rc = root_cause(
        "step_events",
        "scheduling",
        "steps",
        ranks=[r0],
        events=[(ids[si_ck], r0)],
        victims=vic,
        not_slow=not_slow_sample(ranks, [r0], vic),
        steps=[ids[si_ck]],
        metrics={
            "victim_wait_us_event_step": _r(float(wait[vic, si_ck].mean())) if vic else 0.0,
            "late_by_s": round(CKPT_S, 3),
        },
    )
    return _with_evidence(
        key,
        rc,
        step=ids[si_ck],
        rank=r0,
        late_by_s=round(CKPT_S, 3),
        hccl_exec_timeout_s=CKPT_EXEC_TIMEOUT_S,
        env="HCCL_EXEC_TIMEOUT",
    )
    return key


# ---------------------------------------------------------------- fp32-rank
FP32_CUBE = 2.0
FP32_VEC = 1.7


def _fp32_rank(ranks: int) -> int:
    return 13 if ranks > 13 else ranks - 1


def _as_fp32(k: Kernel) -> Kernel:
    cube = k.core in ("AI_CORE", "MIX_AIC")
    return dataclasses.replace(
        k,
        in_dtypes=k.in_dtypes.replace("DT_BF16", "DT_FLOAT"),
        out_dtypes=k.out_dtypes.replace("DT_BF16", "DT_FLOAT"),
        dur_us=k.dur_us * (FP32_CUBE if cube else FP32_VEC),
    )


def fp32_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    p = default_perturb(ranks)
    r = _fp32_rank(ranks)
    for j, k in enumerate(_kernels(prog)):
        p.kernel_swap[(-1, r, j)] = _as_fp32(k)
    return _plain(ranks, prog, p)


def fp32_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one rank runs every kernel in float32; its MatMuls take ~2x, the others wait."""
    r = _fp32_rank(ranks)
    cl: Cluster = m[""]["cluster"]
    others = [x for x in range(ranks) if x != r]
    mm = [j for j, k in enumerate(cl.kernels) if k.op_type == "MatMulV2"]
    comp = col(m, "computing_us")
    nums = {
        "culprit_matmul_avg_us": _r(_kernel_mean_us(cl, [r], mm)),
        "others_matmul_avg_us": _r(_kernel_mean_us(cl, others, mm)),
        "culprit_computing_excess_us_per_step": _r(_mean_excess(comp, [r])),
    }
    key = _key([r], "compute", ["compute-straggler-hidden"], "computing_us", nums)
    rc = _ranks_cause(m, ranks, [r], "compute_straggler", "compute", metrics=nums)
    return _with_evidence(key, rc, dtype="DT_FLOAT", expected_dtype="DT_BF16")


# ---------------------------------------------------------------- slow-tp-group
TPG_FACTOR = 0.35


def _tpg(ranks: int) -> tuple[int, list[int]]:
    tp = _tp_for(ranks, 4)
    g = (ranks // tp) // 2
    return tp, list(range(g * tp, g * tp + tp))


def tpg_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    tp, grp = _tpg(ranks)
    p = default_perturb(ranks)
    for a in grp:
        for b in grp:
            if a != b:
                p.link_factor[(a, b)] = TPG_FACTOR
    prog = transformer(layers=4, tp=tp, tp_mb=32.0, grad_mb=64.0, grad_overlap=6, grad=ranks > tp)
    return _plain(ranks, prog, p, tp)


def _kind_bw(cl: Cluster, kind_name: str) -> dict[int, float]:
    """Mean HCCS bandwidth (GB/s) per rank over its links in one group kind."""
    out: dict[int, list[float]] = {}
    for st in cl.steps:
        for op in st.ops:
            if op.kind.kind != kind_name:
                continue
            k = op.kind
            for r in range(cl.ranks):
                for j in range(k.peer.shape[1]):
                    if k.transport[r, j] == 0 and op.link_ms[r, j] > 0:
                        out.setdefault(r, []).append(float(op.link_mb[r, j] / op.link_ms[r, j]))
    return {r: float(np.mean(v)) for r, v in out.items()}


def tpg_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one TP group's HCCS links are slow; the other TP groups wait in the DP all-reduce."""
    tp, grp = _tpg(ranks)
    cl: Cluster = m[""]["cluster"]
    bw = _kind_bw(cl, "tp")
    rest = [r for r in range(ranks) if r not in grp]
    tp_ms = np.zeros(ranks)
    for st in cl.steps:
        for op in st.ops:
            if op.kind.kind == "tp":
                tp_ms += (op.end - op.start) / 1e6
    nums = {
        "group_tp_bandwidth_gbps": round(float(np.median([bw[r] for r in grp])), 3),
        "others_tp_bandwidth_gbps": round(float(np.median([bw[r] for r in rest])), 3),
        "group_tp_allreduce_ms_per_step": _r(float(np.median(tp_ms[grp])) / steps),
        "others_tp_allreduce_ms_per_step": _r(float(np.median(tp_ms[rest])) / steps),
        "tp_size": tp,
    }
    key = _key(grp, "communication", ["hccs-link-degraded"], "bandwidth_gbps", nums)
    rc = _group_cause(m, ranks, grp, "slow_group", "communication", transport="HCCS", metrics=nums)
    return _with_evidence(
        key, rc, group="tp", tp_size=tp, transport="HCCS", first_rank=grp[0], last_rank=grp[-1]
    )
    return key


# ---------------------------------------------------------------- slow-nic-node
NIC_FACTOR = 0.35


def _nic_node(ranks: int) -> int:
    return 1


def nic_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    kinds = group_kinds(ranks, 1)
    node = _nic_node(ranks)
    k = kinds["world"]
    for r in range(ranks):
        for j in range(k.peer.shape[1]):
            if k.transport[r, j] != 1:
                continue
            q = int(k.peer[r, j])
            if r // RANKS_PER_NODE == node or q // RANKS_PER_NODE == node:
                p.link_factor[(r, q)] = NIC_FACTOR
    return {
        "": Plan(
            transformer(layers=4, grad_mb=128.0, grad_overlap=3), kinds, p, _info(CANN8, 1, ranks)
        )
    }


def nic_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every RDMA link into and out of one node is slow; HCCS and the other RDMA links are not."""
    node = _nic_node(ranks)
    grp = _node_ranks(ranks, node)
    cl: Cluster = m[""]["cluster"]
    slow_bw: list[float] = []
    ok_bw: list[float] = []
    slow_links: set[tuple[int, int]] = set()
    for st in cl.steps:
        for op in st.ops:
            k = op.kind
            for r in range(ranks):
                for j in range(k.peer.shape[1]):
                    if k.transport[r, j] != 1 or op.link_ms[r, j] <= 0:
                        continue
                    q = int(k.peer[r, j])
                    bw = float(op.link_mb[r, j] / op.link_ms[r, j])
                    if r in grp or q in grp:
                        slow_bw.append(bw)
                        slow_links.add((r, q))
                    else:
                        ok_bw.append(bw)
    rest = [r for r in range(ranks) if r not in grp]
    nums = {
        "node_rdma_bandwidth_gbps": round(float(np.median(slow_bw)), 3),
        "other_rdma_bandwidth_gbps": round(float(np.median(ok_bw)), 3) if ok_bw else 0.0,
        "slow_rdma_links": len(slow_links),
    }
    key = _key(grp, "communication", ["slow-link-rdma"], "bandwidth_gbps", nums)
    key["culprit_node"] = node
    key["culprit_node_ip"] = node_ip(node)
    rc = root_cause(
        "slow_link",
        "communication",
        "group",
        ranks=grp,
        transport="RDMA",
        victims=rest,
        not_slow=not_slow_sample(ranks, grp, rest),
        metrics=nums,
    )
    return _with_evidence(
        key,
        rc,
        node=node,
        node_ip=node_ip(node),
        transport="RDMA",
        first_rank=grp[0],
        last_rank=grp[-1],
    )
    return key


# ---------------------------------------------------------------- hccs-link-both-ways
BIDIR_FACTOR = 0.25


def _bidir(ranks: int) -> tuple[int, int]:
    return 2 % ranks, 5 % ranks


def bidir_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    a, b = _bidir(ranks)
    p = default_perturb(ranks)
    p.link_factor[(a, b)] = BIDIR_FACTOR
    p.link_factor[(b, a)] = BIDIR_FACTOR
    return _plain(ranks, transformer(layers=4, grad_mb=128.0, grad_overlap=3), p)


def bidir_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the HCCS link between two ranks is slow in both directions."""
    a, b = _bidir(ranks)
    cl: Cluster = m[""]["cluster"]
    per: dict[tuple[int, int], list[float]] = {}
    for st in cl.steps:
        for op in st.ops:
            k = op.kind
            for r in range(ranks):
                for j in range(k.peer.shape[1]):
                    if k.transport[r, j] == 0 and op.link_ms[r, j] > 0:
                        per.setdefault((r, int(k.peer[r, j])), []).append(
                            float(op.link_mb[r, j] / op.link_ms[r, j])
                        )
    bw = {lk: float(np.mean(v)) for lk, v in per.items()}
    peers = [v for lk, v in bw.items() if lk not in ((a, b), (b, a))]
    nums = {
        "forward_bandwidth_gbps": round(bw[(a, b)], 3),
        "reverse_bandwidth_gbps": round(bw[(b, a)], 3),
        "median_peer_bandwidth_gbps": round(float(np.median(peers)), 3),
    }
    key = _key(
        [],
        "communication",
        ["hccs-link-degraded"],
        "bandwidth_gbps",
        nums,
        slow_link={"src_rank": a, "dst_rank": b, "transport": "HCCS"},
    )
    members = set(range(ranks))
    victims = sorted(members - {a, b})
    rc = root_cause(
        "slow_link",
        "communication",
        "link",
        link=(a, b),
        transport="HCCS",
        victims=victims,
        not_slow=not_slow_sample(ranks, {a, b}, victims),
        metrics=nums,
    )
    return _with_evidence(key, rc, both_directions=True, reverse_link=[b, a])


# ---------------------------------------------------------------- registry
FAULT_SCENARIOS = (
    ScenarioSpec(
        "aicpu-fallback",
        "IndexPutV2 runs on AI_CPU (int64 indices) on ranks 3 and 11, on AI_VECTOR_CORE elsewhere",
        16,
        3,
        aicpu_plans,
        aicpu_answer,
    ),
    ScenarioSpec(
        "node-host-contention",
        "all 8 ranks of node 1 host-bound (CPU contention / NUMA): slow launches, dispatch gaps",
        16,
        3,
        node_host_plans,
        node_host_answer,
        min_ranks=16,
    ),
    ScenarioSpec(
        "varlen-imbalance",
        "variable sequence lengths: in every step a different rank gets 6144-token inputs",
        8,
        6,
        varlen_plans,
        varlen_answer,
    ),
    ScenarioSpec(
        "unfused-attention",
        "eager (unfused) attention on every rank: Transpose/BatchMatMulV2/SoftmaxV2 dominate, no late rank",
        8,
        3,
        unfused_plans,
        unfused_answer,
    ),
    ScenarioSpec(
        "two-faults",
        "two independent faults: an RDMA link at 30% and a host-stalled rank on the other node",
        16,
        3,
        two_plans,
        two_answer,
        min_ranks=16,
    ),
    ScenarioSpec(
        "checkpoint-stall",
        "rank 0 arrives 42 s late in one step (checkpoint save); HCCL_EXEC_TIMEOUT=60",
        8,
        5,
        ckpt_plans,
        ckpt_answer,
    ),
    ScenarioSpec(
        "fp32-rank",
        "one rank runs every kernel in DT_FLOAT instead of DT_BF16",
        16,
        3,
        fp32_plans,
        fp32_answer,
    ),
    ScenarioSpec(
        "slow-tp-group",
        "TP=4: the HCCS links inside one TP group run at 35%; the other groups wait in the DP all-reduce",
        16,
        3,
        tpg_plans,
        tpg_answer,
        min_ranks=8,
    ),
    ScenarioSpec(
        "slow-nic-node",
        "3 nodes: every RDMA link into and out of node 1 at 35% (slow NIC)",
        24,
        3,
        nic_plans,
        nic_answer,
        min_ranks=24,
    ),
    ScenarioSpec(
        "hccs-link-both-ways",
        "one HCCS link degraded in both directions (ranks 2 and 5)",
        8,
        3,
        bidir_plans,
        bidir_answer,
        min_ranks=8,
    ),
)

FAULT_KINDS = tuple(s.name for s in FAULT_SCENARIOS)


def register(registry: dict[str, ScenarioSpec]) -> None:
    """Add the generalization scenarios to the generator's registry (idempotent)."""
    for spec in FAULT_SCENARIOS:
        registry.setdefault(spec.name, spec)


__all__ = ["FAULT_KINDS", "FAULT_SCENARIOS", "lm_program", "register"]
