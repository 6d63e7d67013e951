"""Eleventh set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev13.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: boolean NaN-check kernels interleaved with the
backward only, 4-byte world all-reduces between the layers in communication.json, the RoCE traffic
class in the ENV_VARIABLES of profiler_metadata.json):

- ``detect-anomaly-on``: ``torch.autograd.set_detect_anomaly(True)`` left on from a NaN hunt: after
  every backward operator autograd checks its gradient for NaN (an ``IsNan`` kernel over the
  gradient's shape, a ``ReduceAny`` to one bool) and reads the flag on the host (``.item()``: a
  blocking ``aclrtSynchronizeStream``), so the host queue drains 48 times per step and the device
  idles before every backward kernel; the forward is untouched. Job-level; the fix turns anomaly
  detection off.
- ``timer-barrier-logging``: a per-layer timing logger (Megatron-style timers with
  ``barrier=True``) calls ``dist.barrier()`` at the start of every layer's forward and backward and
  before the optimizer: 9 extra 4-byte ``hcom_allReduce`` on the world group per step. Each barrier
  waits for the gradient all-reduce still in flight (so the gradient communication is no longer
  hidden behind the next layer's backward) and blocks the host until it completes, so the device
  also idles after it. Job-level; links normal, no late rank.
- ``rdma-tc-lossy-node``: the switches keep RoCE lossless (PFC) on priority 3 (DSCP 26): the launcher
  of server 0 exports ``HCCL_RDMA_TC=104`` / ``HCCL_RDMA_SL=3``, server 1's container does not, so its
  ranks send RDMA in HCCL's default class (TC 132, SL 4), a lossy queue: with another job's traffic
  on the same leaf switch its packets are dropped and retransmitted and every RDMA link *from* node 1
  runs at ~30% bandwidth (the links into node 1 are normal). Culprit: node 1 (ranks 8-15, the group);
  node 0 waits for their data inside the collectives.
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
)
from advisor_chat.synth.scenarios import (
    CANN8,
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
from advisor_chat.synth.scenarios_dev import _with_evidence
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_dev12 import _gaps_before_us, _kernels
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)


def _first_kernel(prog: list[Item], tag: str) -> int:
    """Program position of the first kernel with ``tag``."""
    return next(i for i, it in enumerate(prog) if isinstance(it, Kernel) and it.tag == tag)


def _elems(shape: str) -> int:
    n = 1
    for x in shape.split(";")[0].split(","):
        n *= int(x)
    return n


# ---------------------------------------------------------------- detect-anomaly-on
AN_TAG = "anomaly_check"
AN_HOST_US = 260.0  # host after the flag read: anomaly-mode bookkeeping of the next node + launch
AN_VEC_US_PER_MELEM = 1.6  # IsNan over a bf16 tensor (memory-bound), µs per 1M elements


def _an_checks(k: Kernel) -> list[Kernel]:
    """IsNan over the gradient a backward kernel produced, then ReduceAny to one bool."""
    shape = k.out_shapes
    isnan = _k(
        "aclnnIsNan_IsNan_IsNan",
        "IsNan",
        "AI_VECTOR_CORE",
        shape,
        shape,
        round(max(3.0, _elems(shape) / 1e6 * AN_VEC_US_PER_MELEM), 1),
        "aclnnIsNan",
        AN_TAG,
        40,
    )
    anyk = _k(
        "aclnnAny_ReduceAny_ReduceAny",
        "ReduceAny",
        "AI_VECTOR_CORE",
        shape,
        "",
        round(max(3.0, _elems(shape) / 1e6 * AN_VEC_US_PER_MELEM * 0.5), 1),
        "aclnnAny",
        AN_TAG,
        40,
    )
    return [
        dataclasses.replace(isnan, out_dtypes="DT_BOOL"),
        dataclasses.replace(anyk, in_dtypes="DT_BOOL", out_dtypes="DT_BOOL"),
    ]


def an_program(anomaly: bool = True) -> list[Item]:
    """transformer(); with ``anomaly`` every backward kernel is followed by its NaN check."""
    prog = transformer(layers=4)
    if not anomaly:
        return prog
    at = _first_kernel(prog, "mlp_down_dx")
    opt = next(
        i
        for i, it in enumerate(prog)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    out: list[Item] = list(prog[:at])
    for it in prog[at:opt]:
        out.append(it)
        if isinstance(it, Kernel):
            out += _an_checks(it)
    return out + list(prog[opt:])


def _an_positions(prog: list[Item]) -> list[int]:
    """Kernel indices that follow a NaN check (the host read the flag before launching them)."""
    ks = _kernels(prog)
    return [
        j for j in range(1, len(ks)) if ks[j - 1].op_type == "ReduceAny" and ks[j].tag != AN_TAG
    ]


def an_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = an_program()
    pos = _an_positions(prog)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 1301)
    for r in range(ranks):
        f = 1.0 + 0.08 * np.clip(rng.standard_normal(len(pos)), -2, 2)
        p.kernel_stalls[r] = {
            j: round(AN_HOST_US * float(x), 1) for j, x in zip(pos, f, strict=True)
        }
        p.host_syncs[r] = set(pos)
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def an_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: NaN checks + a host read after every backward operator, on every rank."""
    cl: Cluster = m[""]["cluster"]
    ks = cl.kernels
    pos = _an_positions(cl.program)
    chk = [j for j, k in enumerate(ks) if k.tag == AN_TAG]
    bwd0 = next(j for j, k in enumerate(ks) if k.tag == "mlp_down_dx")
    fwd = list(range(1, bwd0))
    idle = _gaps_before_us(cl, pos, list(range(ranks)))  # [S, R, P]
    idle_fwd = _gaps_before_us(cl, fwd, list(range(ranks)))
    chk_us = np.array([st.k_dur[:, chk].sum(axis=1) for st in cl.steps]) / 1000  # [S, R]
    free = col(m, "free_us")
    step = col(m, "step_us")
    base = _baseline(cl, an_program(anomaly=False))
    base_step = float(np.median(base["step_us"]))
    nums = {
        "nan_check_kernels_per_step": len(chk),
        "isnan_per_step": sum(1 for j in chk if ks[j].op_type == "IsNan"),
        "host_syncs_per_step": len(pos),
        "forward_nan_checks_per_step": 0,
        "idle_before_backward_kernel_us_median": _r(float(np.median(idle))),
        "idle_before_forward_kernel_us_median": _r(float(np.median(idle_fwd))),
        "idle_in_backward_us_per_step": _r(float(np.median(idle.sum(axis=2)))),
        "nan_check_kernel_us_per_step": _r(float(np.median(chk_us))),
        "median_free_us_per_step": _r(float(np.median(free.mean(axis=1)))),
        "median_free_share": _share(free, step),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_anomaly_off": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
        "saving_share_of_step": round(
            (float(np.median(step)) - base_step) / float(np.median(step)), 4
        ),
    }
    key = _key([], "scheduling", ["host-dispatch-bound"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "idle_in_backward_us_per_step": nums["idle_in_backward_us_per_step"],
            "free_share": nums["median_free_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        op_types=["IsNan", "ReduceAny"],
        output_dtype="DT_BOOL",
        checks_per_backward_op=2,
        phase="backward only (after every backward operator); forward untouched",
        sync_api="aclrtSynchronizeStream",
        host_op="aten::item",
        setting="torch.autograd.set_detect_anomaly(True) / torch.autograd.detect_anomaly()",
        fix="turn anomaly detection off (debug only); check the loss / grad norm once per step instead",
        same_every_step=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- timer-barrier-logging
TB_TAG = "timer_barrier"
TB_MB = 0.000004  # one fp32 element
TB_HOST_US = 140.0  # host after the barrier returns: timer bookkeeping, log line, next launch


def _tb_barrier() -> Collective:
    return Collective("hcom_allReduce_", "world", TB_MB, dtype="FP32", tag=TB_TAG, latency_us=30.0)


def tb_program(barriers: bool = True) -> list[Item]:
    """transformer(); a barrier at each layer's forward and backward start and before the optimizer."""
    prog = transformer(layers=4)
    if not barriers:
        return prog
    fwd_per_layer = 10  # RmsNorm, QKV, FA, attn out, Add, RmsNorm, MLP up, SwiGlu, MLP down, Add
    out: list[Item] = []
    j = 0
    seen_opt = False
    for it in prog:
        if isinstance(it, Kernel):
            fwd_start = j < 4 * fwd_per_layer and j % fwd_per_layer == 0
            opt = it.op_type == "ForeachMulScalar" and not seen_opt
            if fwd_start or it.tag == "mlp_down_dx" or opt:
                out.append(_tb_barrier())
            seen_opt = seen_opt or opt
            j += 1
        out.append(it)
    return out


def _tb_positions(prog: list[Item]) -> list[int]:
    """Kernel indices launched right after a barrier."""
    out: list[int] = []
    j = 0
    after = False
    for it in prog:
        if isinstance(it, Collective):
            after = it.tag == TB_TAG
            continue
        if after:
            out.append(j)
        after = False
        j += 1
    return out


def tb_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = tb_program()
    pos = _tb_positions(prog)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 1303)
    for r in range(ranks):
        f = 1.0 + 0.1 * np.clip(rng.standard_normal(len(pos)), -2, 2)
        p.kernel_stalls[r] = {
            j: round(TB_HOST_US * float(x), 1) for j, x in zip(pos, f, strict=True)
        }
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def tb_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 9 barriers per step; the gradient all-reduces they wait for are exposed."""
    cl: Cluster = m[""]["cluster"]
    bars = [(op.end - op.start) / 1000 for st in cl.steps for op in st.ops if op.item.tag == TB_TAG]
    n_bar = sum(1 for it in cl.program if isinstance(it, Collective) and it.tag == TB_TAG)
    grad = [
        (op.end - op.start) / 1000
        for st in cl.steps
        for op in st.ops
        if op.item.tag != TB_TAG and op.item.size_mb > 50
    ]
    notov = col(m, "comm_not_overlapped_us")
    free = col(m, "free_us")
    step = col(m, "step_us")
    base = _baseline(cl, tb_program(barriers=False))
    base_step = float(np.median(base["step_us"]))
    base_notov = base["comm_not_overlapped_us"]
    nums = {
        "barriers_per_step": n_bar,
        "barrier_bytes": round(TB_MB * 1e6),
        "barrier_us_median": _r(float(np.median(np.concatenate(bars)))),
        "grad_allreduce_us_median": _r(float(np.median(np.concatenate(grad)))),
        "median_comm_not_overlapped_us_per_step": _r(float(np.median(notov.mean(axis=1)))),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_comm_not_overlapped_us_per_step_no_barriers": _r(float(np.median(base_notov))),
        "median_free_us_per_step": _r(float(np.median(free.mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_no_barriers": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "barriers_per_step": n_bar,
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        op_type="hcom_allReduce",
        group="world",
        barrier_size_bytes=nums["barrier_bytes"],
        per_step=n_bar,
        where="start of every layer's forward and backward, and before the optimizer",
        blocks_overlap=True,
        source="dist.barrier() in a per-layer timer / logger (barrier=True)",
        fix="drop the barriers from the timers (barrier=False / timing level 0) or time with "
        "events; log once per step",
        same_every_step=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- rdma-tc-lossy-node
TC_NODE = 1
TC_FACTOR = 0.3
TC_GOOD = {"HCCL_RDMA_TC": "104", "HCCL_RDMA_SL": "3"}


def _tc_ranks(ranks: int) -> list[int]:
    return [r for r in range(ranks) if r // RANKS_PER_NODE == TC_NODE]


def tc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    kinds = group_kinds(ranks, 1)
    p = default_perturb(ranks)
    bad = set(_tc_ranks(ranks))
    for kind in kinds.values():
        for r in bad:
            for j in range(kind.peer.shape[1]):
                if kind.transport[r, j] == 1:
                    p.link_factor[(r, int(kind.peer[r, j]))] = TC_FACTOR
    info = _info(CANN8, 1, ranks)
    info = dataclasses.replace(
        info, rank_env={r: dict(TC_GOOD) for r in range(ranks) if r not in bad}
    )
    return {"": Plan(transformer(layers=4), kinds, p, info)}


def tc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every RDMA link sent from node 1 slow, links into node 1 normal; node 0 waits."""
    cl: Cluster = m[""]["cluster"]
    bad = _tc_ranks(ranks)
    rest = [r for r in range(ranks) if r not in bad]
    out_bw: list[float] = []
    in_bw: list[float] = []
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
                    if k.transport[r, j] == 0:
                        hccs_bw.append(bw)
                    elif k.transport[r, j] == 1 and r in bad:
                        out_bw.append(bw)
                        links.add((r, int(k.peer[r, j])))
                    elif k.transport[r, j] == 1:
                        in_bw.append(bw)
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    base = _baseline(cl)
    base_step = float(np.median(base["step_us"]))
    nums = {
        "nodes": ranks // RANKS_PER_NODE,
        "culprit_node": TC_NODE,
        "culprit_ranks": bad,
        "slow_rdma_links": len(links),
        "node1_send_rdma_bandwidth_gbps": round(float(np.median(out_bw)), 3),
        "node0_send_rdma_bandwidth_gbps": round(float(np.median(in_bw)), 3),
        "hccs_bandwidth_gbps": round(float(np.median(hccs_bw)), 3),
        "bandwidth_ratio": round(float(np.median(out_bw) / np.median(in_bw)), 3),
        "node0_wait_us_per_step_median": _r(float(np.median(wait[rest].mean(axis=1)))),
        "node1_wait_us_per_step_median": _r(float(np.median(wait[bad].mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_lossless_class": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key(bad, "communication", ["slow-link-rdma"], "bandwidth_gbps", nums)
    vic = victims_by_wait(wait, bad)
    key["root_cause"] = root_cause(
        "slow_link",
        "communication",
        "group",
        ranks=bad,
        transport="RDMA",
        victims=vic,
        not_slow=not_slow_sample(ranks, bad, vic),
        metrics={
            "culprit_rdma_bandwidth_gbps": nums["node1_send_rdma_bandwidth_gbps"],
            "other_rdma_bandwidth_gbps": nums["node0_send_rdma_bandwidth_gbps"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    key["evidence"] = {
        "culprit_node": TC_NODE,
        "culprit_ranks": bad,
        "direction": "sent from node 1 (node 1 -> node 0); node 0 -> node 1 normal",
        "slow_links": sorted([a, b] for a, b in links),
        "transport": "RDMA",
        "env_file": "profiler_metadata.json ENV_VARIABLES",
        "env_keys": sorted(TC_GOOD),
        "node0_env": dict(TC_GOOD),
        "node1_env": {k: "" for k in TC_GOOD},
        "hccl_default_tc_sl": {"HCCL_RDMA_TC": "132", "HCCL_RDMA_SL": "4"},
        "cause": "node 1's RoCE traffic in a non-PFC (lossy) priority: drops and retransmits",
        "fix": "export HCCL_RDMA_TC=104 HCCL_RDMA_SL=3 on node 1 too (same launcher/env on every "
        "server), matching the switches' lossless priority",
        "hccs_normal": True,
        "every_step": True,
        "culprit_compute_normal": True,
    }
    return key


# ---------------------------------------------------------------- embedding-grad-pad-rank
EP_VOCAB = 32000
EP_PAD_ID = 0
EP_BASE_US = 420.0  # EmbeddingDenseGrad of a packed 4096-token batch (indices nearly all distinct)
# rows of the same index accumulate one after another (atomic adds on one output row): the kernel
# slows with the share of the batch that is one repeated index
EP_SERIAL = 26.0
EP_TAG = "embed_grad"
EP_SHORT_MEAN = 520.0  # mean length of the short (chat / SFT) samples of the last shard


def _ep_culprit(ranks: int) -> int:
    return (
        ranks - 1
    )  # DistributedSampler(shuffle=False) gives the short-sample tail to the last rank


def _ep_kernels() -> tuple[Kernel, Kernel]:
    s, h, v = 4096, 4096, EP_VOCAB
    fwd = Kernel(
        name="aclnnEmbedding_GatherV2AiCore_GatherV2",
        op_type="GatherV2",
        core="AI_VECTOR_CORE",
        in_shapes=f"{v},{h};1,{s};1",
        in_dtypes="DT_BF16;INT64;INT64",
        in_formats="ND;ND;ND",
        out_shapes=f"1,{s},{h}",
        out_dtypes="DT_BF16",
        out_formats="ND",
        dur_us=46.0,
        block_dim=40,
        api="aclnnEmbedding",
        tag="embed",
    )
    bwd = Kernel(
        name="aclnnEmbeddingDenseBackward_EmbeddingDenseGrad_EmbeddingDenseGrad",
        op_type="EmbeddingDenseGrad",
        core="AI_VECTOR_CORE",
        in_shapes=f"1,{s},{h};1,{s}",
        in_dtypes="DT_BF16;INT64",
        in_formats="ND;ND",
        out_shapes=f"{v},{h}",
        out_dtypes="DT_FLOAT",
        out_formats="ND",
        dur_us=EP_BASE_US,
        block_dim=40,
        api="aclnnEmbeddingDenseBackward",
        tag=EP_TAG,
    )
    return fwd, bwd


def ep_program() -> list[Item]:
    """Embedding lookup, transformer(4 layers), the embedding gradient before the optimizer."""
    fwd, bwd = _ep_kernels()
    prog = transformer(layers=4)
    opt = next(
        i
        for i, it in enumerate(prog)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    return [fwd, *prog[:opt], bwd, *prog[opt:]]


def _ep_pad_share(ranks: int, steps: int, seed: int) -> np.ndarray:
    """[steps, ranks] share of each rank's 4096 token ids that are the pad id.

    Every rank but the last gets packed documents (a few pad tokens at the end of the pack); the last
    rank's shard is short samples, one per sequence, padded to 4096.
    """
    rng = np.random.default_rng(seed + 1307)
    s = 4096
    out = np.zeros((steps, ranks))
    cul = _ep_culprit(ranks)
    for si in range(steps):
        for r in range(ranks):
            if r == cul:
                n = int(np.clip(rng.lognormal(np.log(EP_SHORT_MEAN), 0.5), 64, s))
            else:
                n = s - int(rng.integers(0, 24))  # the pack's unfilled tail
            out[si, r] = (s - n) / s
    return out


def _ep_dur(pad: float) -> float:
    return round(EP_BASE_US * (1.0 + EP_SERIAL * pad), 1)


def ep_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = ep_program()
    ks = _kernels(prog)
    j = next(i for i, k in enumerate(ks) if k.tag == EP_TAG)
    pad = _ep_pad_share(ranks, steps, seed)
    p = default_perturb(ranks)
    for si in range(steps):
        for r in range(ranks):
            p.kernel_swap[(si, r, j)] = dataclasses.replace(ks[j], dur_us=_ep_dur(pad[si, r]))
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(vocab_size=EP_VOCAB, seq_length=4096, micro_batch_size=1)
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def ep_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the last rank's embedding gradient runs ~20x longer (its batch is mostly padding)."""
    cl: Cluster = m[""]["cluster"]
    cul = _ep_culprit(ranks)
    others = [q for q in range(ranks) if q != cul]
    j = next(i for i, k in enumerate(cl.kernels) if k.tag == EP_TAG)
    fj = next(i for i, k in enumerate(cl.kernels) if k.tag == "embed")
    mj = [i for i, k in enumerate(cl.kernels) if k.op_type == "MatMulV2"]
    eg = np.array([st.k_dur[:, j] for st in cl.steps]).T / 1000  # [R, S]
    ef = np.array([st.k_dur[:, fj] for st in cl.steps]).T / 1000
    mm = np.array([st.k_dur[:, mj].mean(axis=1) for st in cl.steps]).T / 1000
    pad = _ep_pad_share(ranks, steps, cl.seed)
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    base = _baseline(cl)
    base_step = float(np.median(base["step_us"]))
    nums = {
        "culprit_rank": cul,
        "culprit_embedding_grad_us_median": _r(float(np.median(eg[cul]))),
        "others_embedding_grad_us_median": _r(float(np.median(eg[others]))),
        "embedding_grad_ratio": round(float(np.median(eg[cul]) / np.median(eg[others])), 2),
        "culprit_embedding_grad_excess_us_per_step": _r(
            float(eg[cul].mean() - np.median(eg[others].mean(axis=1)))
        ),
        "culprit_embedding_fwd_us_median": _r(float(np.median(ef[cul]))),
        "others_embedding_fwd_us_median": _r(float(np.median(ef[others]))),
        "culprit_matmul_us_median": _r(float(np.median(mm[cul]))),
        "others_matmul_us_median": _r(float(np.median(mm[others]))),
        "culprit_pad_share_mean": round(float(pad[:, cul].mean()), 3),
        "others_pad_share_max": round(float(pad[:, others].max()), 4),
        "others_wait_us_per_step_median": _r(float(np.median(wait[others].mean(axis=1)))),
        "culprit_wait_us_per_step": _r(float(wait[cul].mean())),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_packed_batches": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
    }
    key = _key([cul], "compute", ["load-imbalance-vs-slow-kernels"], "computing_us", nums)
    vic = victims_by_wait(wait, [cul])
    key["root_cause"] = root_cause(
        "compute_straggler",
        "compute",
        "rank",
        ranks=[cul],
        operator="EmbeddingDenseGrad",
        shape=cl.kernels[j].in_shapes,
        victims=vic,
        not_slow=not_slow_sample(ranks, [cul], vic),
        metrics={
            "culprit_wait_us_per_step": nums["culprit_wait_us_per_step"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "culprit_embedding_grad_excess_us_per_step": nums[
                "culprit_embedding_grad_excess_us_per_step"
            ],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    key["evidence"] = {
        "culprit_rank": cul,
        "op_type": "EmbeddingDenseGrad",
        "input_shapes": cl.kernels[j].in_shapes,
        "same_shapes_on_every_rank": True,
        "only_this_operator": True,
        "forward_lookup_normal": True,
        "varies_by_step": True,
        "cause": "the last rank's data shard is short samples padded to 4096 with one pad id: the "
        "embedding gradient accumulates thousands of rows into the same output row",
        "sampler": "DistributedSampler(shuffle=False) over a concatenated dataset (short samples last)",
        "fix": "shuffle across the whole dataset / pack the short samples (or bucket by length); "
        "the card is fine",
        "culprit_kernels_normal": True,
        "links_normal": True,
    }
    return key


# ---------------------------------------------------------------- registry
DEV13_SCENARIOS = (
    ScenarioSpec(
        "detect-anomaly-on",
        "torch.autograd.set_detect_anomaly(True) left on: after every backward operator an IsNan + "
        "ReduceAny (DT_BOOL) over its gradient and a host .item() (aclrtSynchronizeStream); the "
        "device idles before every backward kernel on every rank; forward untouched",
        16,
        4,
        an_plans,
        an_answer,
    ),
    ScenarioSpec(
        "timer-barrier-logging",
        "per-layer timers with dist.barrier(): 9 four-byte world hcom_allReduce per step (each layer's "
        "forward and backward start, before the optimizer); each waits for the gradient all-reduce "
        "in flight, exposing it, and blocks the host; every rank, links normal",
        16,
        4,
        tb_plans,
        tb_answer,
    ),
    ScenarioSpec(
        "rdma-tc-lossy-node",
        "2 nodes: node 1 launched without HCCL_RDMA_TC=104 / HCCL_RDMA_SL=3 (ENV_VARIABLES differ), "
        "its RoCE traffic in a lossy (non-PFC) class: every RDMA link sent from node 1 at ~30%, "
        "links into node 1 and HCCS normal; node 0 waits inside the collectives",
        16,
        4,
        tc_plans,
        tc_answer,
        min_ranks=16,
        max_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "embedding-grad-pad-rank",
        "the last rank's data shard (DistributedSampler without shuffle) is short samples padded to "
        "4096 with one pad id: its EmbeddingDenseGrad (same shapes as everywhere) runs ~20x longer, "
        "varying by step; its other kernels and the forward lookup normal; the others wait",
        16,
        4,
        ep_plans,
        ep_answer,
    ),
)
DEV13_KINDS = tuple(s.name for s in DEV13_SCENARIOS)


__all__ = ["DEV13_KINDS", "DEV13_SCENARIOS"]
