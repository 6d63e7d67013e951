"""Blind held-out set 5: four more fault kinds (written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``: the workload's operators, shapes and collectives, communication
groups, ``Perturb.kernel_swap`` and ``Perturb.step_stall_us``) with answer keys derived from the
simulated timeline and the breakdown the writer measured (never from typed numbers). Every key
carries ``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the
files). Their question set is ``evals/datasets/generalization_heldout5.yaml``; the kinds are listed
in :mod:`advisor_chat.synth.blind` and described only here.

Kinds:

- ``attention-full-mask``: the fused attention operator is called with a full ``[1, 1, S, S]``
  boolean causal mask in its default mode (torch_npu ``npu_fusion_attention`` with
  ``sparse_mode=0``) instead of a causal sparse mode with the compressed 2048 x 2048 mask: the kernel
  cannot skip the masked half, so FlashAttentionScore and FlashAttentionScoreGrad run about twice as
  long as they need to, on every rank. The S x S mask is an input of both kernels in
  kernel_details.csv. No late rank, MatMuls and links normal.
- ``ddp-buffer-broadcast``: PyTorch DDP with ``broadcast_buffers=True`` (the default) on a model whose
  large constant tensors (per-layer rotary cos / sin caches in FP32) are registered as buffers: at
  the start of every forward DDP broadcasts them from rank 0 (256 MB in FP32, coalesced into two
  ``hcom_broadcast_`` ops of 224 and 32 MB on the whole job), the first device tasks of every step,
  with no kernel to overlap; communication is exposed on every rank, links run at their normal
  bandwidth.
- ``tp-rank0-data-load``: Megatron-style input: only the first rank of each tensor-parallel group
  (TP=8, one group per node) reads the batch from the data iterator and broadcasts it to its group
  (``hcom_broadcast_`` of INT64 tensors on the tp group at the step start). Its data loading is slow
  (no worker processes, tokenising on the fly), so ranks 0 and 8 idle on the host ~30 ms at the start
  of every step and the other seven ranks of each group wait for them in those broadcasts. Kernels,
  launches and links normal.
- ``cp-causal-imbalance``: context parallelism (CP=4, all-gather of K/V) with a causal mask and the
  sequence split into contiguous chunks (no load-balanced / zigzag sharding): the rank with the last
  chunk of each CP group attends to the whole prefix while the first attends only to its own chunk,
  so FlashAttentionScore / FlashAttentionScoreGrad run (i + 0.5) units of work on CP rank i with the
  same input shapes and operator counts everywhere; ranks 3, 7, 11 and 15 compute longest and the
  rest of their CP groups wait for them in the K/V all-gathers and the dK/dV reduce-scatters.
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
    simulate,
)
from advisor_chat.synth.scenarios import (
    BASE_COMM_US,
    CANN8,
    HCCL_ENV_KEY,
    H,
    Plan,
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
from advisor_chat.synth.scenarios_dev import _plain, _with_evidence
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)
from advisor_chat.synth.writer import RunInfo


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


def _step_times_us(cl: Cluster) -> np.ndarray:
    """[steps] step length (µs)."""
    return np.array([st.end - st.start for st in cl.steps]) / 1000


def _saving_us(cl: Cluster, ranks: int, steps: int, plan: Plan) -> float:
    """Median step time (µs) saved by running ``plan`` instead (same seed)."""
    alt = simulate(plan.program, plan.kinds, plan.perturb, ranks, steps, cl.seed, 0, 0)
    return _r(float(np.median(_step_times_us(cl) - _step_times_us(alt))))


def _kernels_during(cl: Cluster, tag: str) -> int:
    """Kernels running (on any rank) while a collective tagged ``tag`` is in flight there."""
    busy = 0
    for st in cl.steps:
        for op in st.ops:
            if op.item.tag != tag:
                continue
            for r in range(cl.ranks):
                ks, ke = st.k_start[r], st.k_start[r] + st.k_dur[r]
                busy += int(((ks < op.end[r]) & (ke > op.start[r])).sum())
    return busy


def _link_bw(cl: Cluster, tag: str | None) -> dict[str, float]:
    """Median link bandwidth (GB/s) per transport of the collectives tagged ``tag`` (None: others)."""
    out: dict[str, list[float]] = {"HCCS": [], "RDMA": []}
    for st in cl.steps:
        for op in st.ops:
            if (tag is None) == (op.item.tag == tag):
                continue
            k = op.kind
            for r in range(cl.ranks):
                for j in range(k.peer.shape[1]):
                    t = int(k.transport[r, j])
                    if t in (0, 1) and op.link_ms[r, j] > 0:
                        out["HCCS" if t == 0 else "RDMA"].append(
                            float(op.link_mb[r, j] / op.link_ms[r, j])
                        )
    return {t: round(float(np.median(v)), 3) if v else 0.0 for t, v in out.items()}


# ---------------------------------------------------------------- attention-full-mask
FA_TYPES = ("FlashAttentionScore", "FlashAttentionScoreGrad")
SEQ = 4096
FULL_MASK = f"1,1,{SEQ},{SEQ}"  # the whole causal mask, materialised
COMPRESSED_MASK = "2048,2048"  # what a causal sparse mode takes instead
FULL_MASK_WORK = 2.0  # every block computed instead of the causal half
MASK_READ = 1.04  # reading a 16 MB mask per call


def _with_mask(k: Kernel, mask: str, factor: float) -> Kernel:
    """The attention kernel with an extra boolean mask input; work scaled by ``factor``."""
    return dataclasses.replace(
        k,
        in_shapes=f"{k.in_shapes};{mask}",
        in_dtypes=f"{k.in_dtypes};DT_BOOL",
        in_formats=f"{k.in_formats};ND",
        dur_us=round(k.dur_us * factor, 1),
    )


def mask_program(full: bool = True) -> list[Item]:
    """transformer(4 layers) whose attention takes the full mask (or the compressed causal one)."""
    out: list[Item] = []
    for it in transformer(layers=4):
        if isinstance(it, Kernel) and it.op_type in FA_TYPES:
            it = (
                _with_mask(it, FULL_MASK, FULL_MASK_WORK * MASK_READ)
                if full
                else _with_mask(it, COMPRESSED_MASK, 1.0)
            )
        out.append(it)
    return out


def mask_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, mask_program(), default_perturb(ranks))


def mask_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank's attention kernels compute the masked half too."""
    cl: Cluster = m[""]["cluster"]
    ks = cl.kernels
    fwd = [j for j, k in enumerate(ks) if k.op_type == FA_TYPES[0]]
    bwd = [j for j, k in enumerate(ks) if k.op_type == FA_TYPES[1]]
    mm = [j for j, k in enumerate(ks) if k.op_type == "MatMulV2"]
    all_t = _kernel_time_us(cl, list(range(len(ks))))
    fa_t = _kernel_time_us(cl, fwd + bwd)
    plan = _plain(ranks, mask_program(full=False), default_perturb(ranks))[""]
    alt = simulate(plan.program, plan.kinds, plan.perturb, ranks, steps, cl.seed, 0, 0)
    alt_fa = _kernel_time_us(alt, fwd + bwd)

    def per_call(c: Cluster, sel: list[int]) -> float:
        return float(np.median(np.concatenate([st.k_dur[:, sel].ravel() for st in c.steps]))) / 1000

    step = col(m, "step_us")
    comp = col(m, "computing_us")
    nums = {
        "attention_calls_per_step": len(fwd) + len(bwd),
        "attention_us_per_step_median": _r(float(np.median(fa_t))),
        "attention_share_of_kernel_time": _median_share(fa_t, all_t),
        "fa_forward_us_median": _r(per_call(cl, fwd)),
        "fa_backward_us_median": _r(per_call(cl, bwd)),
        "fa_forward_us_causal_mode": _r(per_call(alt, fwd)),
        "fa_backward_us_causal_mode": _r(per_call(alt, bwd)),
        "attention_slowdown_ratio": round(float(np.median(fa_t) / np.median(alt_fa)), 3),
        "matmul_us_per_step_median": _r(float(np.median(_kernel_time_us(cl, mm)))),
        "saving_with_causal_mode_us_per_step": _r(
            float(np.median(_step_times_us(cl) - _step_times_us(alt)))
        ),
        "median_computing_share": _median_share(comp, step),
        "median_step_us": _r(float(np.median(step))),
    }
    first = ks[fwd[0]]
    key = _key(
        [],
        "compute",
        ["matmul-shape-regression"],
        "computing_us",
        nums,
        op={"op_type": first.op_type, "name": first.name, "input_shapes": first.in_shapes},
    )
    rc = _all_job_rc(
        ranks,
        "job_hotspot",
        "compute",
        operator=first.op_type,
        shape=first.in_shapes,
        metrics={
            "attention_us_per_step": nums["attention_us_per_step_median"],
            "attention_slowdown_ratio": nums["attention_slowdown_ratio"],
            "saving_with_causal_mode_us_per_step": nums["saving_with_causal_mode_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operators=list(FA_TYPES),
        mask_shape=FULL_MASK,
        mask_dtype="DT_BOOL",
        mask_side=SEQ,
        compressed_mask_shape=COMPRESSED_MASK,
        sparse_mode_used=0,
        sparse_mode_suggested=[2, 3],
        input_shapes=first.in_shapes,
        matmuls_normal=True,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- ddp-buffer-broadcast
ROPE_POSITIONS = 65536
ROPE_DIM = 128
BUF_LAYERS = 4
# one cos or sin cache, FP32: 65536 * 128 * 4 B = 32 MiB; two per layer
BUF_TENSOR_MB = ROPE_POSITIONS * ROPE_DIM * 4 / 2**20
BUF_MB = BUF_LAYERS * 2 * BUF_TENSOR_MB
DDP_BUCKET_MB = 250.0  # DDP coalesces the buffers into broadcasts of at most 250 MiB
BUF_TAG = "ddp_buffers"


def _buffer_buckets() -> list[float]:
    """Sizes (MB) of DDP's coalesced buffer broadcasts: whole tensors up to the bucket size."""
    out: list[float] = []
    cur = 0.0
    for _ in range(BUF_LAYERS * 2):
        if cur + BUF_TENSOR_MB > DDP_BUCKET_MB:
            out.append(cur)
            cur = 0.0
        cur += BUF_TENSOR_MB
    return [*out, cur]


def bcast_program(with_buffers: bool = True) -> list[Item]:
    """Every step starts with DDP's broadcasts of the module buffers (then the usual step)."""
    prog = transformer(layers=BUF_LAYERS)
    if not with_buffers:
        return prog
    bcs: list[Item] = [
        Collective("hcom_broadcast_", "world", mb, dtype="FP32", tag=BUF_TAG)
        for mb in _buffer_buckets()
    ]
    return [*bcs, *prog]


def bcast_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return _plain(ranks, bcast_program(), default_perturb(ranks))


def bcast_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one large FP32 broadcast at every step start, overlapped with nothing."""
    cl: Cluster = m[""]["cluster"]
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    everyone = list(range(ranks))
    n_bc = len(_buffer_buckets())
    bc_ms = [
        (int(op.end[r]) - int(op.start[r])) / 1e6
        for st in cl.steps
        for op in st.ops[:1]
        if op.item.tag == BUF_TAG
        for r in everyone
    ]
    # the broadcast is the step's first device task on every rank
    first_task = all(
        bool(np.all(op.end <= st.k_start[:, 0]))
        for st in cl.steps
        for op in st.ops
        if op.item.tag == BUF_TAG
    )
    plan = _plain(ranks, bcast_program(with_buffers=False), default_perturb(ranks))[""]
    bw_bc = _link_bw(cl, BUF_TAG)
    bw_rest = _link_bw(cl, None)
    # [ranks, steps] µs in the buffer broadcasts (first op start to last op end)
    bc_us = np.array(
        [
            [
                (
                    max(int(op.end[r]) for op in st.ops if op.item.tag == BUF_TAG)
                    - min(int(op.start[r]) for op in st.ops if op.item.tag == BUF_TAG)
                )
                / 1000
                for r in everyone
            ]
            for st in cl.steps
        ]
    ).T
    nums = {
        "broadcasts_per_step": n_bc,
        "broadcast_mb_total": round(BUF_MB, 3),
        "broadcast_mb_each": [round(x, 3) for x in _buffer_buckets()],
        "broadcast_ms_per_step_median": round(float(np.median(bc_us)) / 1000, 3),
        "largest_broadcast_ms_median": round(float(np.median(bc_ms)), 3),
        "broadcast_share_of_step": _median_share(bc_us, step),
        "kernels_during_broadcast": _kernels_during(cl, BUF_TAG),
        "median_comm_not_overlapped_us_per_step": _r(float(np.median(notov.mean(axis=1)))),
        "median_comm_not_overlapped_share": _median_share(notov, step),
        "broadcast_hccs_bandwidth_gbps": bw_bc["HCCS"],
        "other_hccs_bandwidth_gbps": bw_rest["HCCS"],
        "broadcast_rdma_bandwidth_gbps": bw_bc["RDMA"],
        "other_rdma_bandwidth_gbps": bw_rest["RDMA"],
        "saving_without_broadcast_us_per_step": _saving_us(cl, ranks, steps, plan),
        "median_step_us": _r(float(np.median(step))),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_job_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "broadcast_us_per_step": _r(float(np.median(bc_us))),
            "broadcasts_per_step": n_bc,
            "comm_not_overlapped_us_per_step": nums["median_comm_not_overlapped_us_per_step"],
            "saving_without_broadcast_us_per_step": nums["saving_without_broadcast_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        collective="hcom_broadcast_",
        data_type="FP32",
        size_mb=round(BUF_MB, 3),
        sizes_mb=[round(x, 3) for x in _buffer_buckets()],
        group="world",
        position="first device task of every step, before the first forward kernel",
        first_task=first_task,
        overlapped_kernels=nums["kernels_during_broadcast"],
        per_step=n_bc,
        all_ranks=True,
        late_rank=False,
        links_normal=True,
    )


# ---------------------------------------------------------------- tp-rank0-data-load
DATA_TP = 8
DATA_STALL_US = 30_000.0
DATA_JITTER = 0.15
DATA_TOKENS = 4096
# Megatron broadcast_data: first the sizes of the batch tensors, then the flattened batch (tokens,
# labels, loss mask, position ids: 4 x 4096 int64); small ops, dominated by their fixed latency
SIZES_MB = 4 * 2 * 8 / 1e6
BATCH_MB = 4 * DATA_TOKENS * 8 / 1e6


def _data_ranks(ranks: int) -> list[int]:
    """The first rank of every tensor-parallel group: the ranks that read the data."""
    return list(range(0, ranks, DATA_TP))


def _data_stalls(ranks: int, steps: int, seed: int) -> np.ndarray:
    """[steps, ranks] host time (µs) reading the batch at each step's start."""
    rng = np.random.default_rng(seed + 5501)
    out = np.zeros((steps, ranks))
    for r in _data_ranks(ranks):
        out[:, r] = DATA_STALL_US * (1 + DATA_JITTER * np.clip(rng.standard_normal(steps), -2, 2))
    return np.round(out, 1)


def data_program() -> list[Item]:
    """The batch broadcast inside each TP group, then a TP=8 step."""
    return [
        Collective(
            "hcom_broadcast_", "tp", SIZES_MB, dtype="INT64", tag="batch_sizes", latency_us=18.0
        ),
        Collective(
            "hcom_broadcast_", "tp", BATCH_MB, dtype="INT64", tag="batch_data", latency_us=24.0
        ),
        *transformer(layers=4, tp=DATA_TP, grad_mb=96.0 / DATA_TP),
    ]


def _data_plan(ranks: int, stalls: np.ndarray | None) -> Plan:
    p = default_perturb(ranks)
    if stalls is not None:
        p.step_stall_us = lambda si: stalls[si]
    info = _info(CANN8, DATA_TP, ranks)
    return Plan(data_program(), group_kinds(ranks, DATA_TP), p, info, tp=DATA_TP)


def data_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    return {"": _data_plan(ranks, _data_stalls(ranks, steps, seed))}


def data_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the data-reading rank of each TP group is late; its group waits in the broadcast."""
    cl: Cluster = m[""]["cluster"]
    src = _data_ranks(ranks)
    rest = [r for r in range(ranks) if r not in src]
    stalls = _data_stalls(ranks, steps, cl.seed)
    free = col(m, "free_us")
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    # wait inside the batch broadcasts only
    bwait = np.zeros((ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if op.item.tag in ("batch_sizes", "batch_data"):
                bwait[:, si] += op.sync_ns / 1e3 + np.asarray(op.wait_extra_ms) * 1e3
    lead = np.array([(st.k_start[:, 0] - st.start) / 1000 for st in cl.steps]).T  # [R, S]
    vic = victims_by_wait(wait, src)
    fixed = _data_plan(ranks, None)
    nums = {
        "data_ranks": src,
        "tp_size": DATA_TP,
        "stall_us_per_step_median": _r(float(np.median(stalls[:, src]))),
        "data_ranks_free_us_per_step": _r(float(np.median(free[src].mean(axis=1)))),
        "others_free_us_per_step": _r(float(np.median(free[rest].mean(axis=1)))),
        "others_broadcast_wait_us_per_step": _r(float(np.median(bwait[rest].mean(axis=1)))),
        "data_ranks_broadcast_wait_us_per_step": _r(float(np.median(bwait[src].mean(axis=1)))),
        "first_kernel_delay_us_median": _r(float(np.median(lead))),
        "data_ranks_computing_us_per_step": _r(float(np.median(comp[src].mean(axis=1)))),
        "others_computing_us_per_step": _r(float(np.median(comp[rest].mean(axis=1)))),
        "median_step_us": _r(float(np.median(step))),
        "saving_if_data_ready_us_per_step": _saving_us(cl, ranks, steps, fixed),
    }
    key = _key(src, "scheduling", ["dataloader-stall"], "free_us", nums)
    rc = root_cause(
        "host_stall",
        "scheduling",
        "ranks",
        ranks=src,
        victims=vic,
        not_slow=not_slow_sample(ranks, src, vic),
        metrics={
            "culprit_wait_us_per_step": _r(float(wait[src].mean())),
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "culprit_free_us_per_step": nums["data_ranks_free_us_per_step"],
            "stall_us_per_step": nums["stall_us_per_step_median"],
            "saving_if_data_ready_us_per_step": nums["saving_if_data_ready_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        data_ranks=src,
        tp_size=DATA_TP,
        tp_local_rank=0,
        per_node=[r // RANKS_PER_NODE for r in src],
        wait_op="hcom_broadcast_",
        wait_group="tp",
        broadcast_dtype="INT64",
        where="step_start",
        every_step=True,
        kernels_normal=True,
        launches_normal=True,
        links_normal=True,
    )


# ---------------------------------------------------------------- cp-causal-imbalance
CP = 4
CP_CHUNK = 4096  # tokens of the sequence per CP rank
KV_H = 1024  # 8 KV heads x 128 (GQA)
KV_MB = CP_CHUNK * KV_H * 2 * 2 / 2**20  # K and V of the local chunk, BF16
FA_UNIT_FWD = 1100.0  # one fully computed chunk x chunk block (µs)
FA_UNIT_BWD = 2300.0
CP_TAGS = ("cp_fa", "cp_fa_grad")


def _cp_groups(ranks: int) -> tuple[list[list[int]], list[list[int]]]:
    cp = [list(range(i, i + CP)) for i in range(0, ranks, CP)]
    dp = [list(range(j, ranks, CP)) for j in range(CP)]
    return cp, dp


def _cp_kinds(ranks: int) -> dict[str, Any]:
    cp, dp = _cp_groups(ranks)
    return {
        "world": make_group_kind(
            "world", "default_group", [list(range(ranks))], ranks, BASE_COMM_US, 0
        ),
        "cp": make_group_kind("cp", "cp", cp, ranks, BASE_COMM_US, 1),
        "dp": make_group_kind("dp", "dp", dp, ranks, BASE_COMM_US, 2),
    }


def _cp_info(ranks: int) -> RunInfo:
    dist = {
        "tensor_model_parallel_size": 1,
        "pipeline_model_parallel_size": 1,
        "data_parallel_size": ranks // CP,
        "context_parallel_size": CP,
        "expert_model_parallel_size": 1,
        "sequence_parallel": False,
        "rank": 0,
        "world_size": ranks,
        "seq_length": CP * CP_CHUNK,
    }
    hccl = {"HCCL_CONNECT_TIMEOUT": "", "HCCL_EXEC_TIMEOUT": "", "HCCL_BUFFSIZE": ""}
    return RunInfo(
        cann_version=CANN8.cann_version,
        torch_npu_version=CANN8.torch_npu_version,
        user_metadata={"distributed_args": dist, HCCL_ENV_KEY: hccl},
    )


def _cp_attention(grad: bool) -> Kernel:
    """Local query chunk against the gathered keys / values (causal, compressed mask)."""
    kv = CP * CP_CHUNK
    q = f"1,{CP_CHUNK},{H}"
    kvs = f"1,{kv},{KV_H}"
    mean_units = CP / 2  # what every rank would compute with a balanced split
    if grad:
        return _k(
            "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
            "FlashAttentionScoreGrad",
            "MIX_AIC",
            f"{q};{kvs};{kvs};{q};2048,2048",
            q,
            FA_UNIT_BWD * mean_units,
            "aclnnFlashAttentionScoreGrad",
            CP_TAGS[1],
        )
    return _k(
        "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
        "FlashAttentionScore",
        "MIX_AIC",
        f"{q};{kvs};{kvs};2048,2048",
        q,
        FA_UNIT_FWD * mean_units,
        "aclnnFlashAttentionScore",
        CP_TAGS[0],
    )


def _bool_mask(k: Kernel) -> Kernel:
    """The mask input is boolean."""
    dts = k.in_dtypes.split(";")
    dts[-1] = "DT_BOOL"
    return dataclasses.replace(k, in_dtypes=";".join(dts))


def cp_program() -> list[Item]:
    """4 layers, CP=4 with K/V all-gathered per layer, DP gradient all-reduce, optimizer."""
    s, h, f = CP_CHUNK, H, 4 * H
    qkv_n = h + 2 * KV_H
    fa, fag = _bool_mask(_cp_attention(False)), _bool_mask(_cp_attention(True))
    prog: list[Item] = []
    layers = 4
    for _ in range(layers):
        prog += [
            vec("rmsnorm", "RmsNorm", 60),
            matmul("qkv", s, h, qkv_n, 900 * qkv_n / (3 * h)),
            Collective("hcom_allGather_", "cp", KV_MB, tag="kv_gather"),
            fa,
            matmul("attn_out", s, h, h, 320),
            vec("add", "Add", 30),
            vec("rmsnorm", "RmsNorm", 60),
            matmul("mlp_up", s, h, 2 * f, 1500),
            vec("swiglu", "SwiGlu", 90, f"{s},{2 * f}"),
            matmul("mlp_down", s, f, h, 1200),
            vec("add", "Add", 30),
        ]
    for li in range(layers):
        prog += [
            matmul("mlp_down_dx", s, h, f, 1200),
            matmul("mlp_down_dw", h, s, f, 1250),
            vec("swiglu_grad", "SwiGluGrad", 140, f"{s},{2 * f}"),
            matmul("mlp_up_dx", s, 2 * f, h, 1500),
            matmul("mlp_up_dw", 2 * f, s, h, 1550),
            vec("rmsnorm_grad", "RmsNormGrad", 95),
            matmul("attn_out_dx", s, h, h, 320),
            matmul("attn_out_dw", h, s, h, 330),
            fag,
            Collective("hcom_reduceScatter_", "cp", KV_MB, tag="dkv_scatter"),
            matmul("qkv_dx", s, qkv_n, h, 900 * qkv_n / (3 * h)),
            matmul("qkv_dw", qkv_n, s, h, 920 * qkv_n / (3 * h)),
            vec("rmsnorm_grad", "RmsNormGrad", 95),
            Collective("hcom_allReduce_", "dp", 96.0, overlap=6 if li < layers - 1 else 0),
        ]
    tail = transformer(layers=1)
    at = next(
        i
        for i, it in enumerate(tail)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    return prog + tail[at:]


def _cp_index(r: int) -> int:
    return r % CP


def _cp_units(r: int) -> float:
    """Attention work of CP rank i with contiguous causal chunks: i full blocks + the diagonal."""
    return _cp_index(r) + 0.5


def cp_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = cp_program()
    ks = [it for it in prog if isinstance(it, Kernel)]
    p = default_perturb(ranks)
    for j, k in enumerate(ks):
        if k.tag not in CP_TAGS:
            continue
        unit = FA_UNIT_FWD if k.tag == CP_TAGS[0] else FA_UNIT_BWD
        for r in range(ranks):
            p.kernel_swap[(-1, r, j)] = dataclasses.replace(k, dur_us=unit * _cp_units(r))
    return {"": Plan(prog, _cp_kinds(ranks), p, _cp_info(ranks))}


def cp_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the last CP rank of each group computes the most attention; its group waits."""
    cl: Cluster = m[""]["cluster"]
    ks = cl.kernels
    last = [r for r in range(ranks) if _cp_index(r) == CP - 1]
    rest = [r for r in range(ranks) if r not in last]
    fa = [j for j, k in enumerate(ks) if k.tag in CP_TAGS]
    fwd = [j for j in fa if ks[j].tag == CP_TAGS[0]]
    other = [j for j in range(len(ks)) if j not in fa]
    fa_t = _kernel_time_us(cl, fa)
    other_t = _kernel_time_us(cl, other)
    by_index = [
        _r(float(np.median(fa_t[[r for r in range(ranks) if _cp_index(r) == i]].mean(axis=1))))
        for i in range(CP)
    ]
    fwd_by_index = [
        _r(
            float(
                np.median(
                    np.concatenate(
                        [
                            st.k_dur[[r for r in range(ranks) if _cp_index(r) == i]][:, fwd].ravel()
                            for st in cl.steps
                        ]
                    )
                )
                / 1000
            )
        )
        for i in range(CP)
    ]
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    vic = victims_by_wait(wait, last)
    balanced = Plan(cl.program, cl.kinds, default_perturb(ranks), _cp_info(ranks))
    shapes_equal = all(
        cl.perturb.kernel_at(0, r, j, ks[j]).in_shapes == ks[j].in_shapes
        for r in range(ranks)
        for j in fa
    )
    nums: dict[str, Any] = {
        "cp_size": CP,
        "cp_groups": _cp_groups(ranks)[0],
        "culprit_ranks": last,
        "attention_us_per_step_by_cp_index": by_index,
        "fa_forward_us_by_cp_index": fwd_by_index,
        "attention_ratio_last_to_first": round(by_index[-1] / by_index[0], 3),
        "attention_ratio_last_to_mean": round(by_index[-1] / float(np.mean(by_index)), 3),
        "culprit_attention_us_per_step": _r(float(np.median(fa_t[last].mean(axis=1)))),
        "others_attention_us_per_step": _r(float(np.median(fa_t[rest].mean(axis=1)))),
        "culprit_other_kernels_us_per_step": _r(float(np.median(other_t[last].mean(axis=1)))),
        "others_other_kernels_us_per_step": _r(float(np.median(other_t[rest].mean(axis=1)))),
        "culprit_computing_us_per_step": _r(float(np.median(comp[last].mean(axis=1)))),
        "others_computing_us_per_step": _r(float(np.median(comp[rest].mean(axis=1)))),
        "culprit_wait_us_per_step": _r(float(np.median(wait[last].mean(axis=1)))),
        "others_wait_us_per_step": _r(float(np.median(wait[rest].mean(axis=1)))),
        "kernels_per_step_each_rank": len(ks),
        "median_step_us": _r(float(np.median(step))),
        "saving_if_balanced_us_per_step": _saving_us(cl, ranks, steps, balanced),
    }
    key = _key(
        last,
        "compute",
        ["load-imbalance-vs-slow-kernels"],
        "computing_us",
        nums,
        op={
            "op_type": ks[fwd[0]].op_type,
            "name": ks[fwd[0]].name,
            "input_shapes": ks[fwd[0]].in_shapes,
        },
    )
    rc = root_cause(
        "compute_straggler",
        "compute",
        "ranks",
        ranks=last,
        operator="FlashAttentionScore",
        victims=vic,
        not_slow=not_slow_sample(ranks, last, vic),
        metrics={
            "culprit_wait_us_per_step": nums["culprit_wait_us_per_step"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "culprit_computing_excess_us_per_step": _r(
                nums["culprit_computing_us_per_step"] - nums["others_computing_us_per_step"]
            ),
            "saving_if_balanced_us_per_step": nums["saving_if_balanced_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        cp_size=CP,
        cp_index_of_culprits=CP - 1,
        operators=list(FA_TYPES),
        input_shapes=ks[fwd[0]].in_shapes,
        same_shapes=shapes_equal,
        same_kernel_count=True,
        other_kernels_normal=True,
        wait_ops=["hcom_allGather_", "hcom_reduceScatter_"],
        wait_group="cp",
        staircase=True,
        links_normal=True,
    )


# ---------------------------------------------------------------- registry
HELDOUT5_SCENARIOS = (
    ScenarioSpec(
        "attention-full-mask",
        "blind held-out kind (set 5)",
        16,
        3,
        mask_plans,
        mask_answer,
    ),
    ScenarioSpec(
        "ddp-buffer-broadcast",
        "blind held-out kind (set 5)",
        16,
        3,
        bcast_plans,
        bcast_answer,
    ),
    ScenarioSpec(
        "tp-rank0-data-load",
        "blind held-out kind (set 5)",
        16,
        3,
        data_plans,
        data_answer,
        min_ranks=16,
        rank_multiple=DATA_TP,
    ),
    ScenarioSpec(
        "cp-causal-imbalance",
        "blind held-out kind (set 5)",
        16,
        3,
        cp_plans,
        cp_answer,
        min_ranks=2 * CP,
        rank_multiple=CP,
    ),
)
HELDOUT5_KINDS = tuple(s.name for s in HELDOUT5_SCENARIOS)


__all__ = ["HELDOUT5_KINDS", "HELDOUT5_SCENARIOS"]
