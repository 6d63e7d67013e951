"""Ninth set of development fault kinds (new kinds; written without reading the diagnosis).

Four more field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev11.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the size of one collective, the endpoints of
the slow links, the input shapes of the optimizer kernels, the communicator names per step):

- ``tp-logits-allgather``: TP=8 with the output layer's logits gathered over the TP group
  (``gather_output=True`` / no vocab-parallel cross entropy): every micro-batch one
  ``hcom_allGather`` of the full [seq, vocab] bf16 logits (~520 MB per rank, 16x the size of the other
  TP collectives) on every rank, not overlapped, then a full-vocabulary fp32 loss computed redundantly
  by all 8 TP ranks. Links normal, no late rank; the fix keeps the logits sharded.
- ``rail-switch-degraded``: 4 nodes, rail-optimized RoCE (NIC k of every server on leaf switch k):
  the leaf switch of rail 3 is degraded (~30% bandwidth), so every RDMA link between the cards with
  device id 3 (ranks 3, 11, 19, 27) is slow, in every node and every step, while the other rails and
  HCCS are normal. That DP group's gradient all-reduces run long; the other ranks wait for it in the
  next TP all-reduce. Culprit: the group (the rail), not a node, a card or a single link.
- ``zero-shard-imbalance``: an optimizer sharded by whole parameters (torch
  ``ZeroRedundancyOptimizer``-style greedy partition): rank 0 owns the 151936 x 4096 tied embedding,
  ~3x the parameters of any other rank's shard, so its optimizer kernels (the same kernels, larger
  input shapes) run ~3x longer; the others wait in the parameter all-gather after the update. Culprit:
  rank 0, its hardware is fine (its layer kernels are as fast).
- ``new-group-every-step``: ``dist.new_group()`` called inside the training loop for a loss-logging
  all-reduce: every step creates a new HCCL communicator (same members, a new name and hash in
  communication.json and parallel_group_info each step) and every rank's host spends ~140 ms in its
  initialization before the first collective on it; the devices idle meanwhile. Job-level, every
  step; the fix creates the group once.
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
    make_group_kind,
)
from advisor_chat.synth.scenarios import (
    BASE_COMM_US,
    CANN8,
    H,
    Plan,
    S,
    ScenarioSpec,
    _info,
    _k,
    _key,
    _r,
    col,
    group_kinds,
    matmul,
    transformer,
    vec,
)
from advisor_chat.synth.scenarios_dev import _rank_rc, _with_evidence
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)
from advisor_chat.synth.scenarios_faults import _plain


def _op_durs_us(cl: Cluster, pick: Any, ranks: list[int] | None = None) -> np.ndarray:
    """Durations (µs) of the collectives ``pick(op)`` accepts, over steps and ``ranks`` (default all)."""
    sel = slice(None) if ranks is None else ranks
    out = [(op.end - op.start)[sel] / 1000 for st in cl.steps for op in st.ops if pick(op)]
    return np.concatenate(out) if out else np.zeros(0)


def _first_kernel(prog: list[Item], tag: str) -> int:
    """Program position (items, kernels and collectives) of the first kernel with ``tag``."""
    return next(i for i, it in enumerate(prog) if isinstance(it, Kernel) and it.tag == tag)


# ---------------------------------------------------------------- tp-logits-allgather
LG_TP = 8
LG_VOCAB = 64000
LG_TAG = "logits"
LG_LOSS_TAG = "full_vocab_loss"
LG_GATHER_MB = round(S * LG_VOCAB * 2 / 1e6, 3)  # gathered [S, V] bf16 logits per rank (MB)
LG_SMALL_MB = round(S * 4 / 1e6, 4)  # one fp32 per token: vocab-parallel max / sum all-reduces
# vector throughput of the simulated card for a memory-bound op over fp32 [S, V] (µs per 1M elements)
LG_VEC_US_PER_MELEM = 3.7


def _vec_us(elems: int, passes: float = 1.0) -> float:
    return round(elems / 1e6 * LG_VEC_US_PER_MELEM * passes, 1)


def _loss_kernels(vocab: int, tag: str) -> list[Kernel]:
    """fp32 softmax cross entropy over [S, vocab] logits (forward + its fused backprop)."""
    shape = f"{S},{vocab}"
    elems = S * vocab
    cast = _k(
        "aclnnCast_Cast_Cast",
        "Cast",
        "AI_VECTOR_CORE",
        shape,
        shape,
        _vec_us(elems),
        "aclnnCast",
        tag,
        40,
    )
    ce = _k(
        "aclnnSoftmaxCrossEntropyWithLogits_SoftmaxCrossEntropyWithLogits_SoftmaxCrossEntropyWithLogits",
        "SoftmaxCrossEntropyWithLogits",
        "AI_VECTOR_CORE",
        f"{shape};{S}",
        f"{S};{shape}",
        _vec_us(elems, 2.5),
        "aclnnSoftmaxCrossEntropyWithLogits",
        tag,
        40,
        "DT_FLOAT",
    )
    return [
        dataclasses.replace(cast, out_dtypes="DT_FLOAT"),
        dataclasses.replace(ce, in_dtypes="DT_FLOAT;DT_INT64"),
    ]


def lg_program(gather: bool = True) -> list[Item]:
    """transformer(tp=8) with the output layer and loss after the forward.

    ``gather``: the vocab-sharded logits are all-gathered over TP and every TP rank computes the loss
    over the full vocabulary; otherwise vocab-parallel cross entropy on the shard (two tiny TP
    all-reduces of one fp32 per token).
    """
    shard = LG_VOCAB // LG_TP
    prog = transformer(layers=4, tp=LG_TP)
    at = _first_kernel(prog, "mlp_down_dx")
    head = matmul("lm_head", S, H, shard, round(900 * shard / (3 * H), 1))
    fwd: list[Item] = [vec("final_norm", "RmsNorm", 60), head]
    if gather:
        fwd.append(Collective("hcom_allGather_", "tp", LG_GATHER_MB, tag=LG_TAG))
        fwd += _loss_kernels(LG_VOCAB, LG_LOSS_TAG)
        fwd.append(
            _k(
                "aclnnStridedSlice_StridedSlice_StridedSlice",
                "StridedSlice",
                "AI_VECTOR_CORE",
                f"{S},{LG_VOCAB}",
                f"{S},{shard}",
                _vec_us(S * shard),
                "aclnnStridedSlice",
                LG_LOSS_TAG,
                40,
                "DT_FLOAT",
            )
        )
    else:
        cast, ce = _loss_kernels(shard, "vp_loss")
        red = vec("vp_max", "ReduceMax", _vec_us(S * shard), f"{S},{shard}")
        fwd += [cast, red, Collective("hcom_allReduce_", "tp", LG_SMALL_MB, dtype="FP32")]
        fwd += [ce, Collective("hcom_allReduce_", "tp", LG_SMALL_MB, dtype="FP32")]
    fwd += [
        matmul("lm_head_dx", S, shard, H, head.dur_us),
        Collective("hcom_allReduce_", "tp", 32.0),
        matmul("lm_head_dw", shard, S, H, round(head.dur_us * 1.03, 1)),
    ]
    return prog[:at] + fwd + prog[at:]


def lg_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = _plain(ranks, lg_program(), default_perturb(ranks), tp=LG_TP)
    info = p[""].info
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(vocab_size=LG_VOCAB, parallel_output=False)
    info.user_metadata["distributed_args"] = dist
    return p


def lg_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one huge TP all-gather per step, exposed on every rank; the loss over the full vocab."""
    cl: Cluster = m[""]["cluster"]
    gather = _op_durs_us(cl, lambda op: op.item.tag == LG_TAG)
    other_tp = [
        it.size_mb
        for it in cl.program
        if isinstance(it, Collective) and it.group == "tp" and it.tag != LG_TAG
    ]
    lj = [j for j, k in enumerate(cl.kernels) if k.tag == LG_LOSS_TAG]
    loss_us = np.array([st.k_dur[:, lj].sum(axis=1) for st in cl.steps]) / 1000
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    base = _baseline(cl, lg_program(gather=False))
    base_step = float(np.median(base["step_us"]))
    n_gather = sum(1 for it in cl.program if isinstance(it, Collective) and it.tag == LG_TAG)
    nums = {
        "tp_size": LG_TP,
        "vocab_size": LG_VOCAB,
        "logits_allgather_per_step": n_gather,
        "logits_allgather_mb": LG_GATHER_MB,
        "other_tp_collective_mb_max": max(other_tp),
        "logits_allgather_size_ratio": round(LG_GATHER_MB / max(other_tp), 2),
        "logits_allgather_us_median": _r(float(np.median(gather))),
        "logits_allgather_share_of_step": round(
            float(np.median(gather)) * n_gather / float(np.median(step)), 4
        ),
        "full_vocab_loss_us_per_step": _r(float(np.median(loss_us))),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_comm_not_overlapped_us_per_step": _r(float(np.median(notov.mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_vocab_parallel": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "logits_allgather_us": nums["logits_allgather_us_median"],
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        op_type="hcom_allGather",
        group="tp",
        size_mb=LG_GATHER_MB,
        other_tp_size_mb=max(other_tp),
        per_step=n_gather,
        phase="forward, after the output layer (lm_head)",
        loss_op="SoftmaxCrossEntropyWithLogits",
        loss_shape=f"{S},{LG_VOCAB}",
        loss_redundant_on_tp_ranks=LG_TP,
        fix="vocab-parallel cross entropy: keep the logits sharded (gather_output=False)",
        overlapped=False,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- rail-switch-degraded
RAIL_DEV = 3  # device id (and NIC / leaf switch) of the degraded rail
RAIL_FACTOR = 0.3
RAIL_TP = 8


def _rail(ranks: int) -> list[int]:
    return [r for r in range(ranks) if r % RANKS_PER_NODE == RAIL_DEV]


def rail_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    plans = _plain(ranks, transformer(layers=4, tp=RAIL_TP), default_perturb(ranks), tp=RAIL_TP)
    plan = plans[""]
    rail = set(_rail(ranks))
    for kind in plan.kinds.values():
        for r in rail:
            for j in range(kind.peer.shape[1]):
                q = int(kind.peer[r, j])
                if kind.transport[r, j] == 1 and q in rail:
                    plan.perturb.link_factor[(r, q)] = RAIL_FACTOR
    return plans


def rail_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every RDMA link of one rail slow; that DP group runs long, the others wait."""
    cl: Cluster = m[""]["cluster"]
    rail = _rail(ranks)
    rest = [r for r in range(ranks) if r not in rail]
    slow_bw: list[float] = []
    ok_bw: list[float] = []
    hccs_bw: list[float] = []
    links: set[tuple[int, int]] = set()
    for st in cl.steps:
        for op in st.ops:
            k = op.kind
            for r in range(ranks):
                for j in range(k.peer.shape[1]):
                    if op.link_ms[r, j] <= 0 or k.transport[r, j] < 0:
                        continue
                    bw = float(op.link_mb[r, j] / op.link_ms[r, j])
                    q = int(k.peer[r, j])
                    if k.transport[r, j] == 0:
                        hccs_bw.append(bw)
                    elif k.transport[r, j] == 1 and r in rail and q in rail:
                        slow_bw.append(bw)
                        links.add((r, q))
                    elif k.transport[r, j] == 1:
                        ok_bw.append(bw)
    grad = _op_durs_us(cl, lambda op: op.kind.kind == "dp")
    grad_rail = _op_durs_us(cl, lambda op: op.kind.kind == "dp", rail)
    grad_rest = _op_durs_us(cl, lambda op: op.kind.kind == "dp", rest)
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    base = _baseline(cl)
    base_step = float(np.median(base["step_us"]))
    nums = {
        "nodes": ranks // RANKS_PER_NODE,
        "rail_device_id": RAIL_DEV,
        "rail_ranks": rail,
        "slow_rdma_links": len(links),
        "rail_rdma_bandwidth_gbps": round(float(np.median(slow_bw)), 3),
        "other_rdma_bandwidth_gbps": round(float(np.median(ok_bw)), 3),
        "hccs_bandwidth_gbps": round(float(np.median(hccs_bw)), 3),
        "rail_bandwidth_ratio": round(float(np.median(slow_bw) / np.median(ok_bw)), 3),
        "rail_grad_allreduce_us_median": _r(float(np.median(grad_rail))),
        "other_grad_allreduce_us_median": _r(float(np.median(grad_rest))),
        "grad_allreduce_us_median": _r(float(np.median(grad))),
        "rail_wait_us_per_step": _r(float(np.median(wait[rail].mean(axis=1)))),
        "others_wait_us_per_step": _r(float(np.median(wait[rest].mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_healthy_rail": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key(rail, "communication", ["slow-link-rdma"], "bandwidth_gbps", nums)
    vic = victims_by_wait(wait, rail)
    key["root_cause"] = root_cause(
        "slow_link",
        "communication",
        "group",
        ranks=rail,
        transport="RDMA",
        victims=vic,
        not_slow=not_slow_sample(ranks, rail, vic),
        metrics={
            "rail_rdma_bandwidth_gbps": nums["rail_rdma_bandwidth_gbps"],
            "other_rdma_bandwidth_gbps": nums["other_rdma_bandwidth_gbps"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    key["evidence"] = {
        "device_id": RAIL_DEV,
        "rail_ranks": rail,
        "slow_links": sorted([a, b] for a, b in links),
        "transport": "RDMA",
        "every_node": True,
        "every_rdma_link_of_rail": True,
        "hccs_normal": True,
        "other_rails_normal": True,
        "slow_group": "dp",
        "wait_op": "hcom_allReduce",
        "same_every_step": True,
        "culprit_compute_normal": True,
    }
    return key


# ---------------------------------------------------------------- zero-shard-imbalance
ZS_RANK = 0  # the greedy partition gives the largest tensor (the tied embedding) to rank 0
ZS_VOCAB = 151936
ZS_FACTOR = 3.1  # rank 0's shard (the 622M-parameter embedding) vs every other rank's (~200M)
ZS_PEER_SHAPE = f"{3 * H},{H};{4 * H},{H};{H},{4 * H};{H}"  # layer weights of an average shard
ZS_BIG_SHAPE = f"{ZS_VOCAB},{H}"
ZS_TAG = "opt_shard"
ZS_GATHER_MB = 48.0


def _adam_kernels() -> list[Kernel]:
    """Multi-tensor AdamW over one rank's shard (the fp32 states of the parameters it owns)."""
    out = []
    for op, dur in (
        ("ForeachMulScalar", 420.0),
        ("ForeachMulScalar", 410.0),
        ("ForeachAddcmulScalar", 760.0),
        ("ForeachSqrt", 430.0),
        ("ForeachAddScalar", 400.0),
        ("ForeachAddcdivScalar", 780.0),
    ):
        out.append(
            _k(
                f"aclnn{op}V2_{op}V2_{op}",
                op,
                "AI_VECTOR_CORE",
                ZS_PEER_SHAPE,
                ZS_PEER_SHAPE,
                dur,
                f"aclnn{op}",
                ZS_TAG,
                48,
                "DT_FLOAT",
            )
        )
    return out


def zs_program() -> list[Item]:
    """transformer(); the optimizer step on each rank's shard, then the parameter all-gather."""
    prog = transformer(layers=4)
    cut = next(
        i
        for i, it in enumerate(prog)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    return [*prog[:cut], *_adam_kernels(), Collective("hcom_allGather_", "world", ZS_GATHER_MB)]


def zs_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = zs_program()
    p = default_perturb(ranks)
    kernels = [it for it in prog if isinstance(it, Kernel)]
    for j, k in enumerate(kernels):
        if k.tag == ZS_TAG:
            p.kernel_swap[(-1, ZS_RANK, j)] = dataclasses.replace(
                k,
                in_shapes=ZS_BIG_SHAPE,
                out_shapes=ZS_BIG_SHAPE,
                dur_us=round(k.dur_us * ZS_FACTOR, 1),
            )
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def zs_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: rank 0's optimizer kernels (larger shard) run longer; the others wait in the all-gather."""
    cl: Cluster = m[""]["cluster"]
    r0 = ZS_RANK
    others = [q for q in range(ranks) if q != r0]
    oj = [j for j, k in enumerate(cl.kernels) if k.tag == ZS_TAG]
    mj = [j for j, k in enumerate(cl.kernels) if k.op_type == "MatMulV2"]
    opt = np.array([st.k_dur[:, oj].sum(axis=1) for st in cl.steps]).T / 1000  # [R, S]
    mm = np.array([st.k_dur[:, mj].mean(axis=1) for st in cl.steps]).T / 1000
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    # the wait in the parameter all-gather only (the last collective of the step)
    ag = np.array([(st.ops[-1].sync_ns / 1000) for st in cl.steps]).T  # [R, S]
    base = _baseline(cl)
    base_step = float(np.median(base["step_us"]))
    nums = {
        "culprit_rank": r0,
        "optimizer_kernels_per_step": len(oj),
        "culprit_optimizer_us_per_step": _r(float(opt[r0].mean())),
        "others_optimizer_us_per_step_median": _r(float(np.median(opt[others].mean(axis=1)))),
        "optimizer_ratio": round(float(opt[r0].mean() / np.median(opt[others].mean(axis=1))), 3),
        "culprit_matmul_us_median": _r(float(np.median(mm[r0]))),
        "others_matmul_us_median": _r(float(np.median(mm[others]))),
        "others_allgather_wait_us_per_step_median": _r(float(np.median(ag[others].mean(axis=1)))),
        "culprit_allgather_wait_us_per_step": _r(float(ag[r0].mean())),
        "others_wait_us_per_step_median": _r(float(np.median(wait[others].mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_balanced_shards": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key([r0], "compute", ["load-imbalance-vs-slow-kernels"], "computing_us", nums)
    rc = _rank_rc(
        m,
        ranks,
        r0,
        "compute_straggler",
        "compute",
        metrics={
            "culprit_optimizer_excess_us_per_step": _r(
                nums["culprit_optimizer_us_per_step"] - nums["others_optimizer_us_per_step_median"]
            ),
            "culprit_dominant": "computing",
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_rank=r0,
        op_types=sorted({cl.kernels[j].op_type for j in oj}),
        culprit_input_shape=ZS_BIG_SHAPE,
        peer_input_shapes=ZS_PEER_SHAPE,
        same_op_count=True,
        vocab_size=ZS_VOCAB,
        tensor="tied word embedding",
        wait_op="hcom_allGather",
        phase="optimizer step (end of the step)",
        culprit_kernels_normal=True,
        late_rank=True,
        links_normal=True,
    )


# ---------------------------------------------------------------- new-group-every-step
NG_INIT_US = 140_000.0  # HCCL communicator init of a new group (root info exchange, link setup)
NG_TAG = "loss_log"
NG_KIND = "loss_group"


def ng_program() -> list[Item]:
    """transformer(); a loss all-reduce (one fp32) on its own group right after the forward."""
    prog = transformer(layers=4)
    at = _first_kernel(prog, "mlp_down_dx")
    ar = Collective("hcom_allReduce_", NG_KIND, 0.004, dtype="FP32", tag=NG_TAG)
    return [*prog[:at], ar, *prog[at:]]


def _ng_kind_name(si: int) -> str:
    return NG_KIND if si == 0 else f"{NG_KIND}_{si}"


def _ng_ci(prog: list[Item]) -> int:
    """Index of the loss all-reduce among the program's collectives."""
    colls = [it for it in prog if isinstance(it, Collective)]
    return next(i for i, c in enumerate(colls) if c.tag == NG_TAG)


def ng_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = ng_program()
    kinds = group_kinds(ranks, 1)
    everyone = [list(range(ranks))]
    for si in range(steps):
        # torch names new groups by a counter; each is a new HCCL communicator
        kinds[_ng_kind_name(si)] = make_group_kind(
            _ng_kind_name(si),
            str(10 + si),
            everyone,
            ranks,
            BASE_COMM_US + 9_000_000 + si * 480_000,
            10 + si,
        )
    ci = _ng_ci(prog)
    rng = np.random.default_rng(seed + 211)
    init = NG_INIT_US * (1.0 + 0.06 * np.clip(rng.standard_normal(steps), -2, 2))
    skew = 300.0 * rng.random((steps, ranks))
    p = default_perturb(ranks)
    for si in range(1, steps):
        p.step_group[(si, ci)] = _ng_kind_name(si)

    def delay(si: int, c: int) -> np.ndarray | None:
        return init[si] + skew[si] if c == ci else None

    p.coll_delay_us = delay
    return {"": Plan(prog, kinds, p, _info(CANN8, 1, ranks))}


def ng_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: a new communicator every step; every rank's device idles while the host creates it."""
    cl: Cluster = m[""]["cluster"]
    prog = cl.program
    ci = _ng_ci(prog)
    at = next(i for i, it in enumerate(prog) if isinstance(it, Collective) and it.tag == NG_TAG)
    kj = sum(1 for it in prog[:at] if isinstance(it, Kernel))  # kernels launched before the op
    # device idle before the loss all-reduce: from the previous kernel's end to the op's start
    idle = np.array(
        [
            (st.ops[ci].start - (st.k_start[:, kj - 1] + st.k_dur[:, kj - 1])) / 1000
            for st in cl.steps
        ]
    )  # [S, R]
    names = [cl.steps[si].ops[ci].kind.comm_names[0] for si in range(steps)]
    free = col(m, "free_us")
    step = col(m, "step_us")
    base = _baseline(cl)
    base_step = float(np.median(base["step_us"]))
    nums = {
        "new_groups_in_capture": len(set(names)),
        "loss_allreduce_per_step": 1,
        "idle_before_loss_allreduce_us_median": _r(float(np.median(idle))),
        "median_free_us_per_step": _r(float(np.median(free.mean(axis=1)))),
        "median_free_share": _share(free, step),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_group_created_once": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key([], "scheduling", ["host-dispatch-bound"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "idle_before_loss_allreduce_us": nums["idle_before_loss_allreduce_us_median"],
            "free_share": nums["median_free_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        op_type="hcom_allReduce",
        group_members=list(range(ranks)),
        new_group_every_step=True,
        group_names=names,
        group_hashes=[cl.steps[si].ops[ci].kind.hashes[0] for si in range(steps)],
        phase="after the forward (loss all-reduce)",
        fix="create the process group once, outside the training loop",
        same_every_step=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- registry
DEV11_SCENARIOS = (
    ScenarioSpec(
        "tp-logits-allgather",
        "TP=8 without vocab-parallel loss: the [seq, vocab] logits all-gathered over TP every step "
        "(~520 MB hcom_allGather, 16x the other TP ops, not overlapped) and the fp32 loss over the "
        "full vocabulary on every TP rank; no late rank, links normal",
        16,
        4,
        lg_plans,
        lg_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "rail-switch-degraded",
        "4 nodes, rail-optimized RoCE: every RDMA link between the cards with device id 3 (one rail, "
        "one leaf switch) at ~30% bandwidth on every node; that DP group's gradient all-reduces run "
        "long, the other ranks wait in the TP all-reduces; other rails and HCCS normal",
        32,
        4,
        rail_plans,
        rail_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "zero-shard-imbalance",
        "optimizer sharded by whole parameters: rank 0 owns the 151936x4096 tied embedding (~3x the "
        "others' shard), its AdamW foreach kernels run ~3x longer on larger input shapes; the others "
        "wait in the parameter all-gather",
        16,
        4,
        zs_plans,
        zs_answer,
    ),
    ScenarioSpec(
        "new-group-every-step",
        "dist.new_group() inside the training loop for a loss all-reduce: a new HCCL communicator "
        "(new name/hash, same members) every step, every rank's host ~140 ms in its init before the "
        "op while the devices idle",
        16,
        4,
        ng_plans,
        ng_answer,
    ),
)
DEV11_KINDS = tuple(s.name for s in DEV11_SCENARIOS)


__all__ = ["DEV11_KINDS", "DEV11_SCENARIOS"]
