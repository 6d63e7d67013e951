"""Second set of development fault kinds (written without reading the diagnosis).

Five more field faults of Ascend training jobs, each planted as a mechanism of the simulation
(``advisor_chat.synth.model``) with the existing knobs, and an answer key derived from the simulated
timeline and the breakdown the writer measured (never from typed numbers). Like
``scenarios_dev.py`` every key carries ``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what
distinguishes the kind in the files). Their question set is
``evals/datasets/generalization_dev2.yaml``: a development set for finding weaknesses; the held-out
kinds of ``generalization.yaml`` stay untouched.

Kinds:

- ``launch-blocking-job``: ``ASCEND_LAUNCH_BLOCKING=1`` left in the launch script after debugging:
  every operator is dispatched synchronously on every rank, so each kernel starts right after its
  launch call, the device idles ~0.1 ms before every kernel and no collective overlaps compute.
  Job-wide; no rank stands out. The variable is in ``profiler_metadata.json`` ENV_VARIABLES.
- ``intra-node-roce``: ``HCCL_INTRA_ROCE_ENABLE=1`` (copied from another cluster's scripts): the
  traffic between cards of the same server goes over RoCE (RDMA through the NIC) at ~6 GB/s per
  peer instead of HCCS at ~18 GB/s; every collective of every rank is slower, every node alike.
- ``device-shared-rank``: another process (a leftover inference / eval job) runs on one rank's NPU:
  that device idles before ~30% of its kernels although the host queued them ~3 ms ahead; kernel
  durations are normal; the others wait for it in every collective.
- ``pp-last-stage-head``: PP=2, the last stage also runs the output layer (LM head MatMul over the
  vocabulary shard) and the cross-entropy loss in every micro-batch; the first stage finishes early
  and waits in ``hcom_send`` for the last stage to take its activations.
- ``transdata-format-churn``: private (FRACTAL_NZ) formats on: every MatMul is wrapped by TransData
  format conversions (ND -> NZ before, NZ -> ND after) on every rank; ~20% of device time.
"""

from __future__ import annotations

import dataclasses
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
    node_ip,
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
from advisor_chat.synth.scenarios_dev import _plain, _rank_rc, _with_evidence
from advisor_chat.synth.scenarios_ext import (
    PP_ACT_MB,
    PP_MICRO,
    PP_TP_MB,
    _info_pp,
    _layer_kernels,
    _opt_kernels,
    not_slow_sample,
    pipeline_kinds,
    root_cause,
)


# ---------------------------------------------------------------- shared helpers
def _kernel_gaps_us(cl: Cluster, r: int) -> list[float]:
    """Device idle (µs) before each kernel that directly follows another kernel in the program."""
    after_kernel: list[int] = []
    prev_kernel = False
    j = 0
    for it in cl.program:
        if isinstance(it, Kernel):
            if prev_kernel and j > 0:
                after_kernel.append(j)
            prev_kernel = True
            j += 1
        else:
            prev_kernel = False
    out: list[float] = []
    for st in cl.steps:
        for q in after_kernel:
            out.append(float(st.k_start[r, q] - st.k_start[r, q - 1] - st.k_dur[r, q - 1]) / 1000)
    return out


def _launch_lead_us(cl: Cluster) -> np.ndarray:
    """[R] mean launch-call start → kernel start (µs, the HostToDevice flow length)."""
    return np.array([((st.k_start - st.k_api_start) / 1000).mean(axis=1) for st in cl.steps]).mean(
        axis=0
    )


def _all_ranks_rc(ranks: int, mechanism: str, category: str, **kw: Any) -> dict[str, Any]:
    """A job-level cause: every rank loses the time, no rank is the culprit."""
    return root_cause(
        mechanism,
        category,
        "job",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        **kw,
    )


# ---------------------------------------------------------------- launch-blocking-job
LB_ENV = "ASCEND_LAUNCH_BLOCKING"
LB_GAP_US = 110.0  # kernel end → next kernel start: the host returns, runs Python, launches again
LB_API_US = 40.0  # synchronous dispatch (no task queue): the whole op preparation in the call
LB_SCALE = 0.35  # a smaller model (~1B): launch overhead weighs more


def lb_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    p.host_bound[:] = True
    p.api_us[:] = LB_API_US
    p.gap_us[:] = LB_GAP_US
    # a blocking launch returns when the op is done: nothing runs beside a collective
    prog = transformer(layers=4, scale=LB_SCALE, grad_mb=32.0, grad_overlap=0)
    info = _info(CANN8, 1, ranks, extra_env={LB_ENV: "1"})
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def lb_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank dispatch-bound the same way; the env variable says why."""
    cl: Cluster = m[""]["cluster"]
    free = col(m, "free_us")
    step = col(m, "step_us")
    comm = col(m, "communication_us")
    notov = col(m, "comm_not_overlapped_us")
    start_after_launch = np.array(
        [((st.k_start - st.k_api_start - st.k_api_dur) / 1000).mean(axis=1) for st in cl.steps]
    ).mean(axis=0)
    gaps = [float(np.median(_kernel_gaps_us(cl, r))) for r in range(ranks)]
    share = free.sum(axis=1) / step.sum(axis=1)
    nums = {
        "launch_end_to_kernel_start_us_median": _r(float(np.median(start_after_launch))),
        "device_gap_us_between_kernels_median": _r(float(np.median(gaps))),
        "kernels_per_step": len(cl.kernels),
        "median_free_us_per_step": _r(float(np.median(free.mean(axis=1)))),
        "median_free_share": round(float(np.median(share)), 4),
        "free_share_spread_across_ranks": round(float(share.max() - share.min()), 4),
        "median_overlap_ratio": round(
            float(np.median((comm - notov).sum(axis=1) / comm.sum(axis=1))), 4
        ),
        "median_step_us": _r(float(np.median(step))),
    }
    key = _key(
        [], "scheduling", ["sync-stream-launch-blocking", "host-dispatch-bound"], "free_us", nums
    )
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "free_us_per_step": nums["median_free_us_per_step"],
            "device_gap_us_between_kernels": nums["device_gap_us_between_kernels_median"],
        },
    )
    return _with_evidence(
        key,
        rc,
        env_var=LB_ENV,
        env_value="1",
        launch_end_to_kernel_start_us=nums["launch_end_to_kernel_start_us_median"],
        device_gap_us=nums["device_gap_us_between_kernels_median"],
        overlap_ratio=nums["median_overlap_ratio"],
        all_ranks=True,
    )


# ---------------------------------------------------------------- intra-node-roce
ROCE_ENV = "HCCL_INTRA_ROCE_ENABLE"
ROCE_FACTOR = 0.5  # the 7 same-server peers share the card's NIC port: ~6 GB/s each


def _same_node(a: int, b: int) -> bool:
    return a // RANKS_PER_NODE == b // RANKS_PER_NODE


def roce_kinds(ranks: int) -> dict[str, GroupKind]:
    """The world group with every intra-node (HCCS) link turned into an RDMA (RoCE) link."""
    kinds = group_kinds(ranks, 1)
    k = kinds["world"]
    k.transport[k.transport == 0] = 1
    return kinds


def roce_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    kinds = roce_kinds(ranks)
    k = kinds["world"]
    p = default_perturb(ranks)
    for r in range(ranks):
        for j in range(k.peer.shape[1]):
            q = int(k.peer[r, j])
            if k.transport[r, j] == 1 and q != r and _same_node(r, q):
                p.link_factor[(r, q)] = ROCE_FACTOR
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    info.user_metadata[HCCL_ENV_KEY].update({ROCE_ENV: "1", "HCCL_INTRA_PCIE_ENABLE": "0"})
    prog = transformer(layers=4, grad_mb=96.0, grad_overlap=3)
    return {"": Plan(prog, kinds, p, info)}


def roce_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: intra-node traffic on RDMA at a fraction of HCCS speed on every node."""
    cl: Cluster = m[""]["cluster"]
    intra: list[float] = []
    inter: list[float] = []
    hccs_mb = 0.0
    intra_pairs: set[tuple[int, int]] = set()
    for st in cl.steps:
        for op in st.ops:
            k = op.kind
            for r in range(cl.ranks):
                for j in range(k.peer.shape[1]):
                    q = int(k.peer[r, j])
                    tr = int(k.transport[r, j])
                    if tr == 0:
                        hccs_mb += float(op.link_mb[r, j])
                    if tr != 1 or op.link_ms[r, j] <= 0:
                        continue
                    bw = float(op.link_mb[r, j] / op.link_ms[r, j])
                    if _same_node(r, q):
                        intra.append(bw)
                        intra_pairs.add((r, q))
                    else:
                        inter.append(bw)
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    comm = col(m, "communication_us")
    nodes = (ranks + RANKS_PER_NODE - 1) // RANKS_PER_NODE
    nums = {
        "intra_node_rdma_bandwidth_gbps_median": round(float(np.median(intra)), 3),
        "inter_node_rdma_bandwidth_gbps_median": (
            round(float(np.median(inter)), 3) if inter else None
        ),
        "hccs_transit_mb_total": _r(hccs_mb),
        "intra_node_links_on_rdma": len(intra_pairs),
        "median_comm_not_overlapped_share": round(
            float(np.median(notov.sum(axis=1) / step.sum(axis=1))), 4
        ),
        "median_communication_share": round(
            float(np.median(comm.sum(axis=1) / step.sum(axis=1))), 4
        ),
        "median_step_us": _r(float(np.median(step))),
    }
    key = _key(
        [], "communication", ["hccs-link-degraded", "slow-link-rdma"], "bandwidth_gbps", nums
    )
    rc = _all_ranks_rc(
        ranks,
        "slow_link",
        "communication",
        transport="RDMA",
        metrics={
            "intra_node_rdma_bandwidth_gbps": nums["intra_node_rdma_bandwidth_gbps_median"],
            "hccs_transit_mb_total": nums["hccs_transit_mb_total"],
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
        },
    )
    return _with_evidence(
        key,
        rc,
        env_var=ROCE_ENV,
        env_value="1",
        transport="RDMA",
        expected_transport="HCCS",
        intra_node_bandwidth_gbps=nums["intra_node_rdma_bandwidth_gbps_median"],
        inter_node_bandwidth_gbps=nums["inter_node_rdma_bandwidth_gbps_median"],
        hccs_transit_mb=0.0,
        nodes=[node_ip(n) for n in range(nodes)],
        all_nodes=True,
    )


# ---------------------------------------------------------------- device-shared-rank
SHARE_LEAD_US = 3200.0  # the host runs ahead until the launch queue is full
SHARE_PICK = 0.3  # share of the kernels that find the device busy with the other process
SHARE_STALL_US = (250.0, 1350.0)  # device busy elsewhere before such a kernel (below the lead)


def _share_rank(ranks: int) -> int:
    return 11 % ranks


def _share_positions(prog: list[Item], seed: int) -> dict[int, float]:
    nk = sum(1 for it in prog if isinstance(it, Kernel))
    rng = np.random.default_rng(seed + 83)
    pick = rng.random(nk) < SHARE_PICK
    lo, hi = SHARE_STALL_US
    vals = lo + (hi - lo) * rng.random(nk)
    return {int(j): float(vals[j]) for j in np.flatnonzero(pick) if j > 0}


def share_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    p = default_perturb(ranks)
    r = _share_rank(ranks)
    p.kernel_stalls[r] = _share_positions(prog, seed)
    p.lead_us[r] = SHARE_LEAD_US
    return _plain(ranks, prog, p)


def share_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one device idles with work queued (kernels normal); the others wait for it."""
    r = _share_rank(ranks)
    cl: Cluster = m[""]["cluster"]
    others = [q for q in range(ranks) if q != r]
    pos = sorted(cl.perturb.kernel_stalls[r])
    free = col(m, "free_us")
    comp = col(m, "computing_us")
    lead = _launch_lead_us(cl)
    gaps = [
        float(st.k_start[r, j] - st.k_start[r, j - 1] - st.k_dur[r, j - 1]) / 1000
        for st in cl.steps
        for j in pos
    ]
    kd = np.array([st.k_dur.sum(axis=1) for st in cl.steps]).mean(axis=0)
    nums = {
        "culprit_free_us_per_step": _r(float(free[r].mean())),
        "others_free_us_per_step_median": _r(float(np.median(free[others].mean(axis=1)))),
        "culprit_free_excess_us_per_step": _r(
            float(free[r].mean() - np.median(free[others].mean(axis=1)))
        ),
        "culprit_launch_lead_us_mean": _r(float(lead[r])),
        "others_launch_lead_us_median": _r(float(np.median(lead[others]))),
        "idle_gaps_per_step": len(pos),
        "idle_gap_us_mean": _r(float(np.mean(gaps))),
        "kernel_time_ratio": round(float(kd[r] / np.median(kd[others])), 3),
        "computing_ratio": round(float(comp[r].mean() / np.median(comp[others].mean(axis=1))), 3),
    }
    key = _key([r], "compute", ["compute-straggler-hidden"], "free_us", nums)
    rc = _rank_rc(m, ranks, r, "compute_straggler", "compute", metrics=nums)
    return _with_evidence(
        key,
        rc,
        launch_lead_us=round(float(lead[r])),
        peer_launch_lead_us=round(float(np.median(lead[others]))),
        idle_gaps_per_step=len(pos),
        kernel_ratio=round(float(kd[r] / np.median(kd[others])), 2),
        host_ahead=True,
        device_idle=True,
    )


# ---------------------------------------------------------------- pp-last-stage-head
VOCAB_SHARD = 18992  # 151936-token vocabulary over TP=8 (vocab-parallel output layer)
HEAD_TAGS = ("slot_f0", "slot_f1", "slot_b0", "slot_b1", "slot_b2")


def _kern(
    name: str,
    op_type: str,
    core: str,
    ins: list[tuple[str, str]],
    out: tuple[str, str],
    dur: float,
    api: str,
    tag: str,
    bd: int = 24,
) -> Kernel:
    """A kernel template with per-input dtypes ((shape, dtype) pairs)."""
    return Kernel(
        name=name,
        op_type=op_type,
        core=core,
        in_shapes=";".join(s for s, _ in ins),
        in_dtypes=";".join(d for _, d in ins),
        in_formats=";".join("ND" for _ in ins),
        out_shapes=out[0],
        out_dtypes=out[1],
        out_formats="ND",
        dur_us=dur,
        block_dim=bd,
        api=api,
        tag=tag,
    )


def _first_stage_slots() -> list[Kernel]:
    """What the first stage runs at the slots: embedding lookup, dropout, their gradients."""
    v, s, h = VOCAB_SHARD, 4096, 4096
    bf, i64, f32 = "DT_BF16", "DT_INT64", "DT_FLOAT"
    return [
        _kern(
            "aclnnEmbedding_GatherV2_GatherV2",
            "GatherV2",
            "AI_VECTOR_CORE",
            [(f"{v},{h}", bf), (f"{s}", i64)],
            (f"{s},{h}", bf),
            38,
            "aclnnEmbedding",
            HEAD_TAGS[0],
            40,
        ),
        _kern(
            "aclnnDropoutDoMask_DropOutDoMaskV3_DropOutDoMaskV3",
            "DropOutDoMaskV3",
            "AI_VECTOR_CORE",
            [(f"{s},{h}", bf), (f"{s * h // 8}", "DT_UINT8")],
            (f"{s},{h}", bf),
            30,
            "aclnnDropoutDoMask",
            HEAD_TAGS[1],
            40,
        ),
        _kern(
            "aclnnDropoutDoMask_DropOutDoMaskV3_DropOutDoMaskV3",
            "DropOutDoMaskV3",
            "AI_VECTOR_CORE",
            [(f"{s},{h}", bf), (f"{s * h // 8}", "DT_UINT8")],
            (f"{s},{h}", bf),
            30,
            "aclnnDropoutDoMask",
            HEAD_TAGS[2],
            40,
        ),
        _kern(
            "aclnnEmbeddingDenseBackward_EmbeddingDenseGrad_EmbeddingDenseGrad",
            "EmbeddingDenseGrad",
            "AI_VECTOR_CORE",
            [(f"{s},{h}", bf), (f"{s}", i64)],
            (f"{v},{h}", f32),
            170,
            "aclnnEmbeddingDenseBackward",
            HEAD_TAGS[3],
            40,
        ),
        _kern(
            "aclnnCast_Cast_Cast",
            "Cast",
            "AI_VECTOR_CORE",
            [(f"{v},{h}", f32)],
            (f"{v},{h}", bf),
            60,
            "aclnnCast",
            HEAD_TAGS[4],
            40,
        ),
    ]


def _last_stage_slots() -> list[Kernel]:
    """What the last stage runs at the slots: output layer MatMuls and the cross-entropy loss."""
    v, s, h = VOCAB_SHARD, 4096, 4096
    bf, i64, f32 = "DT_BF16", "DT_INT64", "DT_FLOAT"
    mm = ("aclnnMatmul_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE")
    return [
        _kern(
            *mm,
            [(f"{s},{h}", bf), (f"{v},{h}", bf)],
            (f"{s},{v}", bf),
            870,
            "aclnnMatmul",
            "lm_head",
        ),
        _kern(
            "aclnnCrossEntropyLoss_CrossEntropyLoss_CrossEntropyLoss",
            "CrossEntropyLoss",
            "AI_VECTOR_CORE",
            [(f"{s},{v}", f32), (f"{s}", i64)],
            ("1", f32),
            460,
            "aclnnCrossEntropyLoss",
            "loss",
            40,
        ),
        _kern(
            "aclnnCrossEntropyLossGrad_CrossEntropyLossGrad_CrossEntropyLossGrad",
            "CrossEntropyLossGrad",
            "AI_VECTOR_CORE",
            [("1", f32), (f"{s},{v}", f32), (f"{s}", i64)],
            (f"{s},{v}", f32),
            380,
            "aclnnCrossEntropyLossGrad",
            "loss_grad",
            40,
        ),
        _kern(
            *mm,
            [(f"{s},{v}", bf), (f"{h},{v}", bf)],
            (f"{s},{h}", bf),
            880,
            "aclnnMatmul",
            "lm_head_dx",
        ),
        _kern(
            *mm,
            [(f"{v},{s}", bf), (f"{h},{s}", bf)],
            (f"{v},{h}", bf),
            900,
            "aclnnMatmul",
            "lm_head_dw",
        ),
    ]


def head_program() -> list[Item]:
    """1F1B steady state of one stage, with five stage-specific kernel slots per micro-batch.

    The program is the same on both stages (the simulator runs one program); the first stage runs its
    embedding kernels at the slots, the last stage is given the output layer there (kernel swaps).
    """
    fwd, bwd = _layer_kernels()
    slots = _first_stage_slots()
    prog: list[Item] = []
    for _ in range(PP_MICRO):
        prog += fwd
        prog += slots[:2]
        prog.append(Collective("hcom_allReduce_", "tp", PP_TP_MB))
        prog += slots[2:]
        prog += bwd
        prog.append(Collective("hcom_allReduce_", "tp", PP_TP_MB))
        prog.append(Collective("hcom_send_", "pp", PP_ACT_MB, peer_op="hcom_receive_"))
    prog += _opt_kernels()
    return prog


def head_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = head_program()
    kernels = [it for it in prog if isinstance(it, Kernel)]
    last = dict(zip(HEAD_TAGS, _last_stage_slots(), strict=True))
    p = default_perturb(ranks)
    for r in range(ranks // 2, ranks):
        for j, k in enumerate(kernels):
            if k.tag in last:
                p.kernel_swap[(-1, r, j)] = last[k.tag]
    return {"": Plan(prog, pipeline_kinds(ranks), p, _info_pp(ranks), tp=ranks // 2)}


def _p2p_wait_us(cl: Cluster) -> np.ndarray:
    """[ranks, steps] wait (µs) in point-to-point ops (send/receive) per rank and step."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if op.item.peer_op:
                out[:, si] += op.sync_ns / 1e3 + np.asarray(op.wait_extra_ms) * 1e3
    return out


def head_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the last stage computes longer (output layer + loss); the first waits in send."""
    half = ranks // 2
    s0, s1 = list(range(half)), list(range(half, ranks))
    cl: Cluster = m[""]["cluster"]
    slot_j = [j for j, k in enumerate(cl.kernels) if k.tag in HEAD_TAGS]
    slot_us = np.array([st.k_dur[:, slot_j].sum(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    comp = col(m, "computing_us")
    bub = col(m, "bubble_us")
    excl = col(m, "comm_not_overlapped_excl_receive_us")
    step = col(m, "step_us")
    p2p = _p2p_wait_us(cl)
    wait = p2p.mean(axis=1)
    last = _last_stage_slots()
    nums: dict[str, Any] = {
        "stages": [s0, s1],
        "micro_batches_per_step": PP_MICRO,
        "stage1_computing_us_per_step": _r(float(np.median(comp[s1].mean(axis=1)))),
        "stage0_computing_us_per_step": _r(float(np.median(comp[s0].mean(axis=1)))),
        "stage1_output_layer_us_per_step": _r(float(np.median(slot_us[s1]))),
        "stage0_embedding_us_per_step": _r(float(np.median(slot_us[s0]))),
        "stage0_send_wait_us_per_step": _r(float(np.median(wait[s0]))),
        "stage1_receive_wait_us_per_step": _r(float(np.median(wait[s1]))),
        "stage0_comm_not_overlapped_excl_receive_us_per_step": _r(
            float(np.median(excl[s0].mean(axis=1)))
        ),
        "stage1_bubble_us_per_step": _r(float(np.median(bub[s1].mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
    }
    key = _key(
        s1, "compute", ["pipeline-bubbles", "load-imbalance-vs-slow-kernels"], "computing_us", nums
    )
    victims = [r for r in s0 if wait[r] >= 1000.0]
    key["root_cause"] = root_cause(
        "pipeline_imbalance",
        "compute",
        "stage",
        ranks=s1,
        stage=1,
        victims=victims,
        not_slow=not_slow_sample(ranks, s1, victims),
        metrics={
            "victim_send_wait_us_per_step": nums["stage0_send_wait_us_per_step"],
            "culprit_computing_excess_us_per_step": _r(
                nums["stage1_computing_us_per_step"] - nums["stage0_computing_us_per_step"]
            ),
            "culprit_output_layer_us_per_step": nums["stage1_output_layer_us_per_step"],
            "culprit_dominant": "computing",
        },
    )
    key["evidence"] = {
        "last_stage": 1,
        "head_op_types": sorted({k.op_type for k in last}),
        "head_shape": last[0].in_shapes,
        "vocab_shard": VOCAB_SHARD,
        "wait_op": "hcom_send",
        "stage0_send_wait_us_per_step": nums["stage0_send_wait_us_per_step"],
        "stage1_output_layer_us_per_step": nums["stage1_output_layer_us_per_step"],
    }
    return key


# ---------------------------------------------------------------- transdata-format-churn
NZ = "FRACTAL_NZ"
TD_BYTES_PER_US = 1.0e6  # ~1 TB/s: TransData is a memory-bound copy (read + write)


def _nz_shape(shape: str) -> str:
    """ND [m, n] → FRACTAL_NZ [n/16, m/16, 16, 16]."""
    m_, n_ = (int(x) for x in shape.split(","))
    return f"{n_ // 16},{m_ // 16},16,16"


def _transdata(shape: str, to_nz: bool) -> Kernel:
    m_, n_ = (int(x) for x in shape.split(","))
    dur = 8.0 + m_ * n_ * 2 * 2 / TD_BYTES_PER_US
    nz = _nz_shape(shape)
    return Kernel(
        name="aclnnMatmul_TransData_TransData",
        op_type="TransData",
        core="AI_VECTOR_CORE",
        in_shapes=shape if to_nz else nz,
        in_dtypes="DT_BF16",
        in_formats="ND" if to_nz else NZ,
        out_shapes=nz if to_nz else shape,
        out_dtypes="DT_BF16",
        out_formats=NZ if to_nz else "ND",
        dur_us=round(dur, 1),
        block_dim=40,
        api="aclnnMatmul",
        tag="transdata",
    )


def transdata_program() -> list[Item]:
    """transformer(4 layers) with every MatMul on NZ inputs: TransData before and after it."""
    out: list[Item] = []
    for it in transformer(layers=4):
        if isinstance(it, Kernel) and it.op_type == "MatMulV2":
            a = it.in_shapes.split(";")[0]
            mm = dataclasses.replace(it, in_formats=f"{NZ};{NZ}", out_formats=NZ)
            out += [_transdata(a, True), mm, _transdata(it.out_shapes, False)]
        else:
            out.append(it)
    return out


def transdata_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, transdata_program(), default_perturb(ranks))


def transdata_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: TransData around every MatMul on every rank; its share of device time."""
    cl: Cluster = m[""]["cluster"]
    td = [j for j, k in enumerate(cl.kernels) if k.op_type == "TransData"]
    mm = [j for j, k in enumerate(cl.kernels) if k.op_type == "MatMulV2"]
    tot = np.array([st.k_dur.sum(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    td_us = np.array([st.k_dur[:, td].sum(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    share = td_us / tot
    by_type: dict[str, float] = {}
    for j, k in enumerate(cl.kernels):
        by_type[k.op_type] = by_type.get(k.op_type, 0.0) + float(
            np.mean([st.k_dur[:, j].mean() for st in cl.steps]) / 1000
        )
    order = sorted(by_type, key=lambda t: -by_type[t])
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    nums = {
        "transdata_per_step": len(td),
        "matmuls_per_step": len(mm),
        "transdata_us_per_step_median": _r(float(np.median(td_us))),
        "transdata_share_of_kernel_time_median": round(float(np.median(share)), 4),
        "transdata_share_spread_across_ranks": round(float(share.max() - share.min()), 4),
        "transdata_rank_among_op_types": order.index("TransData") + 1,
        "median_computing_share": round(float(np.median(comp.sum(axis=1) / step.sum(axis=1))), 4),
        "median_step_us": _r(float(np.median(step))),
    }
    first = cl.kernels[td[0]]
    key = _key(
        [],
        "compute",
        ["shape-axis-alignment", "tiny-kernels-fusion"],
        "computing_us",
        nums,
        op={"op_type": "TransData", "name": first.name, "input_shapes": first.in_shapes},
    )
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        operator="TransData",
        metrics={
            "transdata_us_per_step": nums["transdata_us_per_step_median"],
            "transdata_share_of_kernel_time": nums["transdata_share_of_kernel_time_median"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operator="TransData",
        formats=f"ND -> {NZ}",
        transdata_per_step=len(td),
        share=round(float(np.median(share)), 2),
        matmul_normal=True,
        all_ranks=True,
    )


# ---------------------------------------------------------------- registry
DEV2_SCENARIOS = (
    ScenarioSpec(
        "launch-blocking-job",
        "ASCEND_LAUNCH_BLOCKING=1 left on: every rank dispatches synchronously, device idle before "
        "every kernel, no overlap",
        16,
        3,
        lb_plans,
        lb_answer,
    ),
    ScenarioSpec(
        "intra-node-roce",
        "HCCL_INTRA_ROCE_ENABLE=1: same-server traffic over RoCE (~6 GB/s per peer) instead of HCCS",
        16,
        3,
        roce_plans,
        roce_answer,
    ),
    ScenarioSpec(
        "device-shared-rank",
        "another process on rank 11's NPU: its device idles before ~30% of its kernels although "
        "they were queued ~3 ms ahead; kernels normal",
        16,
        3,
        share_plans,
        share_answer,
    ),
    ScenarioSpec(
        "pp-last-stage-head",
        "PP=2: the last stage also runs the output layer + loss per micro-batch; the first stage "
        "waits in hcom_send",
        16,
        3,
        head_plans,
        head_answer,
        min_ranks=4,
        rank_multiple=2,
    ),
    ScenarioSpec(
        "transdata-format-churn",
        "private NZ format: TransData before and after every MatMul on every rank (~20% of device time)",
        16,
        3,
        transdata_plans,
        transdata_answer,
    ),
)
DEV2_KINDS = tuple(s.name for s in DEV2_SCENARIOS)


__all__ = ["DEV2_KINDS", "DEV2_SCENARIOS"]
