"""Fifteenth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev17.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the BatchNorm operators of kernel_details.csv
with a small collective between each pair, the hcom_broadcast_ ops of communication.json at the start
of every step, the HCCS bandwidth of one node's links in communication_matrix.json, and the Python
lane of trace_view.json with the device idle at the start of some steps of some ranks):

- ``syncbn-stats-allreduce``: a CNN (ResNet-50-like, 36 conv + BatchNorm layers) trained with
  ``nn.SyncBatchNorm`` over 16 cards (``convert_sync_batchnorm``): every forward BatchNorm all-gathers
  its batch statistics (``hcom_allGather_`` of (2C+1) fp32 values between ``BNTrainingReduce`` and
  ``BNTrainingUpdate``) and every backward one all-reduces its gradient sums (``hcom_allReduce_`` of
  2C fp32 values between ``BNTrainingUpdateGrad`` and ``BNTrainingReduceGrad``): 72 tiny collectives a
  step across the two nodes that nothing can overlap (the next operator needs their result).
  Job-level; links normal, no late rank.
- ``param-rebroadcast-every-step``: a leftover re-sync in the training loop broadcasts every
  parameter from rank 0 at the start of every step (``dist.broadcast(p, src=0)`` per layer bucket,
  the same 4 x 96 MB the gradient all-reduces carry): the device idles before the first forward
  kernel on every rank while the broadcasts run. Job-level (rank 0 is the source, not slow).
- ``hccs-width-node-firmware``: after a firmware update the HCCS links inside one node trained at
  half width: every intra-node transfer of node 1 (ranks 8-15) runs at ~9 GB/s instead of ~18 GB/s,
  so every collective of the job lasts as long as that node's transfers; node 0 waits in them
  (Notify_Wait). Culprit: node 1's HCCS links (not RoCE, not its compute).
- ``inline-tokenize-some-steps``: two ranks' data shards hold raw text that the dataset tokenizes in
  ``__getitem__`` in the training process (no pre-tokenized cache, num_workers=0): in the steps
  where such a batch comes up, that rank's Python thread tokenizes for 30-60 ms before the first
  launch; the device idles and every other rank waits in the first gradient all-reduce. Culprit:
  (step, rank) events on ranks 5 and 12.
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
    _key,
    _r,
    col,
    group_kinds,
    transformer,
)
from advisor_chat.synth.scenarios_dev import _with_evidence
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_dev4 import _resimulate, _sim_breakdown
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    step_ids,
    victims_by_wait,
)


def _med(x: Any) -> float:
    return _r(float(np.median(x)))


def _saving(step: np.ndarray, base_step: np.ndarray) -> tuple[float, float, float]:
    """(median step, median step without the fault, saving) in µs."""
    a = float(np.median(step))
    b = float(np.median(base_step))
    return a, b, a - b


# ---------------------------------------------------------------- syncbn-stats-allreduce
SB_BATCH = 32  # images per card
# (stage: mid channels, spatial size); 3 bottleneck blocks of 3 convs per stage
SB_STAGES = ((64, 56), (128, 28), (256, 14), (512, 7))
SB_BLOCKS = 3
SB_LATENCY_US = 110.0  # a tiny collective across the two nodes: notify handshakes, launch
SB_GRAD_MB = 25.0  # DDP gradient bucket (fp32)
SB_GRAD_BUCKETS = 4
SB_GRAD_OVERLAP = 8
SB_FWD, SB_BWD = "syncbn_fwd", "syncbn_bwd"


def _sb_layers() -> list[tuple[int, int, int]]:
    """(channels out, spatial size, kernel size) of every conv + BatchNorm layer, in forward order."""
    out = []
    for mid, hw in SB_STAGES:
        for _ in range(SB_BLOCKS):
            out += [(mid, hw, 1), (mid, hw, 3), (4 * mid, hw, 1)]
    return out


def _sb_kernel(name: str, op_type: str, core: str, shape: str, dur: float, fmt: str) -> Kernel:
    return Kernel(
        name=name,
        op_type=op_type,
        core=core,
        in_shapes=shape,
        in_dtypes="DT_FLOAT16",
        in_formats=fmt,
        out_shapes=shape,
        out_dtypes="DT_FLOAT16",
        out_formats=fmt,
        dur_us=dur,
        block_dim=24 if core == "AI_CORE" else 40,
        api=f"aclnn{op_type}",
    )


def sb_program(sync: bool = True) -> list[Item]:
    """The CNN step; with ``sync`` the SyncBatchNorm collectives (else local BatchNorm)."""
    layers = _sb_layers()
    prog: list[Item] = []
    for i, (c, hw, ks) in enumerate(layers):
        act = f"{SB_BATCH},{c},{hw},{hw}"
        elems = SB_BATCH * c * hw * hw / 1e6
        conv = 160.0 + (150.0 if ks == 3 else 0.0) + 2.0 * elems
        bn = 18.0 + 1.2 * elems
        prog.append(
            _sb_kernel("aclnnConvolution_Conv2D_Conv2D", "Conv2D", "AI_CORE", act, conv, "NC1HWC0")
        )
        prog.append(
            _sb_kernel(
                "aclnnBatchNorm_BNTrainingReduce_BNTrainingReduce",
                "BNTrainingReduce",
                "AI_VECTOR_CORE",
                act,
                bn,
                "NC1HWC0",
            )
        )
        if sync:
            prog.append(
                Collective(
                    "hcom_allGather_",
                    "world",
                    round((2 * c + 1) * 4 / 1e6, 6),
                    dtype="FP32",
                    tag=f"{SB_FWD}{i}",
                    latency_us=SB_LATENCY_US,
                )
            )
        prog.append(
            _sb_kernel(
                "aclnnBatchNorm_BNTrainingUpdate_BNTrainingUpdate",
                "BNTrainingUpdate",
                "AI_VECTOR_CORE",
                act,
                bn * 1.3,
                "NC1HWC0",
            )
        )
        prog.append(
            _sb_kernel("aclnnRelu_Relu_Relu", "Relu", "AI_VECTOR_CORE", act, 0.5 * bn, "NC1HWC0")
        )
    n = len(layers)
    per_bucket = n // SB_GRAD_BUCKETS
    for back, i in enumerate(reversed(range(n))):
        c, hw, ks = layers[i]
        act = f"{SB_BATCH},{c},{hw},{hw}"
        elems = SB_BATCH * c * hw * hw / 1e6
        conv = 160.0 + (150.0 if ks == 3 else 0.0) + 2.0 * elems
        bn = 18.0 + 1.2 * elems
        prog.append(
            _sb_kernel(
                "aclnnReluGrad_ReluGrad_ReluGrad",
                "ReluGrad",
                "AI_VECTOR_CORE",
                act,
                0.6 * bn,
                "NC1HWC0",
            )
        )
        prog.append(
            _sb_kernel(
                "aclnnBatchNormBackward_BNTrainingUpdateGrad_BNTrainingUpdateGrad",
                "BNTrainingUpdateGrad",
                "AI_VECTOR_CORE",
                act,
                bn * 1.2,
                "NC1HWC0",
            )
        )
        if sync:
            prog.append(
                Collective(
                    "hcom_allReduce_",
                    "world",
                    round(2 * c * 4 / 1e6, 6),
                    dtype="FP32",
                    tag=f"{SB_BWD}{i}",
                    latency_us=SB_LATENCY_US,
                )
            )
        prog.append(
            _sb_kernel(
                "aclnnBatchNormBackward_BNTrainingReduceGrad_BNTrainingReduceGrad",
                "BNTrainingReduceGrad",
                "AI_VECTOR_CORE",
                act,
                bn * 1.4,
                "NC1HWC0",
            )
        )
        prog.append(
            _sb_kernel(
                "aclnnConvolutionBackward_Conv2DBackpropInput_Conv2DBackpropInput",
                "Conv2DBackpropInput",
                "AI_CORE",
                act,
                conv * 1.1,
                "NC1HWC0",
            )
        )
        prog.append(
            _sb_kernel(
                "aclnnConvolutionBackward_Conv2DBackpropFilter_Conv2DBackpropFilter",
                "Conv2DBackpropFilter",
                "AI_CORE",
                act,
                conv * 1.15,
                "NC1HWC0",
            )
        )
        if (back + 1) % per_bucket == 0:
            last = back + 1 == n
            prog.append(
                Collective(
                    "hcom_allReduce_",
                    "world",
                    SB_GRAD_MB,
                    overlap=0 if last else SB_GRAD_OVERLAP,
                    dtype="FP32",
                    tag="grad_bucket",
                )
            )
    for name, op, dur in (
        ("aclnnForeachMulScalarV2_ForeachMulScalarV2_ForeachMulScalar", "ForeachMulScalar", 260.0),
        ("aclnnForeachAddListV2_ForeachAddListV2_ForeachAddList", "ForeachAddList", 520.0),
    ):
        prog.append(
            Kernel(
                name,
                op,
                "AI_VECTOR_CORE",
                "2048,2048",
                "DT_FLOAT",
                "ND",
                "2048,2048",
                "DT_FLOAT",
                "ND",
                dur,
                48,
                f"aclnn{op}",
            )
        )
    return prog


def sb_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    return {"": Plan(sb_program(), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def sb_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: two tiny collectives per BatchNorm layer, none overlapped, on every rank."""
    cl: Cluster = m[""]["cluster"]
    layers = _sb_layers()
    fwd_us: list[float] = []
    bwd_us: list[float] = []
    per_step = np.zeros((ranks, steps))
    grad_n = 0
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            tag = op.item.tag
            d = (op.end - op.start) / 1000
            if tag.startswith(SB_FWD):
                fwd_us += d.tolist()
                per_step[:, si] += d
            elif tag.startswith(SB_BWD):
                bwd_us += d.tolist()
                per_step[:, si] += d
            elif si == 0 and tag == "grad_bucket":
                grad_n += 1
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    base = _baseline(cl, sb_program(sync=False))
    a, b, save = _saving(step, base["step_us"])
    chans = [c for c, _hw, _k in layers]
    nums = {
        "batchnorm_layers": len(layers),
        "syncbn_collectives_per_step": 2 * len(layers),
        "syncbn_allgathers_per_step": len(layers),
        "syncbn_allreduces_per_step": len(layers),
        "syncbn_allgather_bytes_max": (2 * max(chans) + 1) * 4,
        "syncbn_allgather_bytes_min": (2 * min(chans) + 1) * 4,
        "syncbn_allgather_us_median": _med(fwd_us),
        "syncbn_allreduce_us_median": _med(bwd_us),
        "syncbn_us_per_step": _med(per_step.mean(axis=0)),
        "gradient_allreduces_per_step": grad_n,
        "gradient_bucket_mb": SB_GRAD_MB,
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_comm_not_overlapped_us_per_step_local_bn": _med(base["comm_not_overlapped_us"]),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_local_bn": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "syncbn_us_per_step": nums["syncbn_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        forward_operators=["BNTrainingReduce", "BNTrainingUpdate"],
        backward_operators=["BNTrainingUpdateGrad", "BNTrainingReduceGrad"],
        forward_op="hcom_allGather_",
        backward_op="hcom_allReduce_",
        collectives_per_step=2 * len(layers),
        position="between BNTrainingReduce and BNTrainingUpdate in every forward BatchNorm, between "
        "BNTrainingUpdateGrad and BNTrainingReduceGrad in every backward one",
        payload="(2C+1) fp32 statistics forward (mean, invstd, count), 2C fp32 gradient sums backward",
        model="ResNet-50-like CNN, 36 conv + BatchNorm layers, 32 images per card",
        cause="nn.SyncBatchNorm (convert_sync_batchnorm) synchronizes the batch statistics of every "
        "BatchNorm layer across all 16 cards: an all-gather in every forward BatchNorm and an "
        "all-reduce in every backward one, 72 tiny collectives a step across the two nodes that "
        "nothing can overlap (the next operator needs their result)",
        fix="use plain (per-card) BatchNorm when the per-card batch is large enough (32 images), or "
        "synchronize within a node only (process_group of the 8 local cards), or GroupNorm",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
    )


# ---------------------------------------------------------------- param-rebroadcast-every-step
PB_LAYERS = 4
PB_MB = 96.0  # one layer's parameters (bf16), as much as its gradient all-reduce
PB_TAG = "resync"


def pb_program(resync: bool = True) -> list[Item]:
    """transformer(); with ``resync`` a broadcast of every layer's parameters from rank 0 first."""
    prog = transformer(layers=PB_LAYERS)
    if not resync:
        return prog
    head: list[Item] = [
        Collective("hcom_broadcast_", "world", PB_MB, tag=f"{PB_TAG}{i}") for i in range(PB_LAYERS)
    ]
    return head + prog


def pb_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    return {"": Plan(pb_program(), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def pb_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 4 parameter broadcasts at the start of every step, before any kernel, every rank."""
    cl: Cluster = m[""]["cluster"]
    bc_us: list[float] = []
    per_step = np.zeros((ranks, steps))
    idle0 = np.zeros((ranks, steps))
    grad_mb = 0.0
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if op.item.op_type == "hcom_broadcast_":
                d = (op.end - op.start) / 1000
                bc_us += d.tolist()
                per_step[:, si] += d
            elif si == 0 and op.item.op_type == "hcom_allReduce_" and op.item.size_mb == 96.0:
                grad_mb += op.item.size_mb
        for r in range(ranks):
            idle0[r, si] = (int(st.k_start[r, 0]) - st.bounds(r)[0]) / 1000
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    base = _baseline(cl, pb_program(resync=False))
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "broadcasts_per_step": PB_LAYERS,
        "broadcast_mb": PB_MB,
        "broadcast_mb_per_step": PB_MB * PB_LAYERS,
        "gradient_allreduce_mb_per_step": grad_mb,
        "broadcast_us_median": _med(bc_us),
        "broadcast_us_per_step": _med(per_step.mean(axis=0)),
        "time_to_first_kernel_us": _med(idle0),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_no_resync": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "broadcast_us_per_step": nums["broadcast_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        op_type="hcom_broadcast_",
        api="HcclBroadcast",
        broadcasts_per_step=PB_LAYERS,
        broadcast_mb=PB_MB,
        root_rank=0,
        position="at the start of every step, before the first forward kernel",
        same_bytes_as_gradients=True,
        cause="the training loop re-broadcasts every parameter from rank 0 at the start of every step "
        "(a re-sync meant for initialization, e.g. dist.broadcast(p, src=0) over the model, left in "
        "the loop): 4 x 96 MB, the whole model, before any kernel can start, on every rank",
        fix="broadcast the parameters once at initialization (DDP already does it when it wraps the "
        "model) and remove the per-step broadcast / re-sync from the training loop",
        all_ranks=True,
        late_rank=False,
        rank0_slow=False,
        links_normal=True,
        same_every_step=True,
    )


# ---------------------------------------------------------------- hccs-width-node-firmware
HW_NODE = 1
HW_FACTOR = 0.5  # half of the lanes after the firmware update


def _hw_ranks(ranks: int) -> list[int]:
    node = min(HW_NODE, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def hw_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    bad = _hw_ranks(ranks)
    for a in bad:
        for b in bad:
            if a != b:
                p.link_factor[(a, b)] = HW_FACTOR
    return {"": Plan(transformer(layers=4), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def _hccs_bw(cl: Cluster, pick: Any) -> list[float]:
    out: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            k = op.kind
            sel = (k.transport == 0) & (op.link_ms > 0)
            for r in range(cl.ranks):
                if pick(r):
                    out.extend((op.link_mb[r, sel[r]] / op.link_ms[r, sel[r]]).tolist())
    return out


def hw_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one node's HCCS links at half bandwidth; every collective waits for that node."""
    cl: Cluster = m[""]["cluster"]
    bad = _hw_ranks(ranks)
    good = [r for r in range(ranks) if r not in bad]
    bw_bad = _hccs_bw(cl, lambda r: r in bad)
    bw_good = _hccs_bw(cl, lambda r: r not in bad)
    hccs_ms = np.zeros((ranks, steps))
    rdma_bw: list[float] = []
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            tr = op.kind.transport
            hccs_ms[:, si] += np.where(tr == 0, op.link_ms, 0.0).sum(axis=1)
            sel = (tr == 1) & (op.link_ms > 0)
            rdma_bw += (op.link_mb[sel] / op.link_ms[sel]).tolist()
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    base = _sim_breakdown(
        _resimulate(dataclasses.replace(cl, perturb=default_perturb(ranks)), cl.program)
    )
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "culprit_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "culprit_hccs_bandwidth_gbps": _med(bw_bad),
        "others_hccs_bandwidth_gbps": _med(bw_good),
        "hccs_bandwidth_ratio": round(float(np.median(bw_good) / np.median(bw_bad)), 2),
        "rdma_bandwidth_gbps": _med(rdma_bw),
        "culprit_hccs_transit_us_per_step": _r(float(hccs_ms[bad].mean()) * 1000),
        "others_hccs_transit_us_per_step": _r(float(hccs_ms[good].mean()) * 1000),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_full_width": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(bad, "communication", ["hccs-link-degraded"], "bandwidth_gbps", nums)
    vic = victims_by_wait(wait, bad)
    rc = root_cause(
        "slow_link",
        "communication",
        "group",
        ranks=bad,
        transport="HCCS",
        victims=vic,
        not_slow=not_slow_sample(ranks, bad, vic),
        metrics={
            "culprit_hccs_bandwidth_gbps": nums["culprit_hccs_bandwidth_gbps"],
            "other_hccs_bandwidth_gbps": nums["others_hccs_bandwidth_gbps"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_node=bad[0] // RANKS_PER_NODE,
        culprit_ranks=bad,
        first_rank=bad[0],
        last_rank=bad[-1],
        transport="HCCS",
        file="communication_matrix.json",
        culprit_bandwidth_gbps=round(float(np.median(bw_bad)), 1),
        others_bandwidth_gbps=round(float(np.median(bw_good)), 1),
        rdma_normal=True,
        kernels_normal=True,
        every_step=True,
        cause="after a firmware update the HCCS links inside node 1 trained at half width: every "
        "intra-node transfer of ranks 8-15 runs at about half the bandwidth of node 0's, so every "
        "collective lasts as long as node 1's transfers and node 0 waits in it",
        fix="check the HCCS link state of that node (npu-smi info -t hccs / the link width and "
        "speed against node 0), roll back or re-apply the firmware (npu-smi upgrade) and reboot, or "
        "move the job off the node",
    )


# ---------------------------------------------------------------- inline-tokenize-some-steps
IT_RANKS = (5, 12)
# (step index, rank position in IT_RANKS, raw documents in the batch)
IT_EVENTS = ((1, 0, 6), (2, 1, 9), (4, 0, 8), (6, 1, 5))
IT_DOC_MS = (5.2, 6.4)  # tokenizing one raw document (ms), uniform
IT_FRAMES = (
    "pretrain_gpt.py(143): get_batch",
    "torch/utils/data/dataloader.py(631): __next__",
    "data/raw_text_dataset.py(97): __getitem__",
    "transformers/tokenization_utils_base.py(2858): __call__",
)


def _it_ranks(ranks: int) -> list[int]:
    return [r if r < ranks else ranks - 1 - i for i, r in enumerate(IT_RANKS)]


def _it_events(ranks: int, steps: int) -> list[tuple[int, int, int]]:
    """(step index, rank, raw documents) of the inline tokenization."""
    rs = _it_ranks(ranks)
    return [(si, rs[q], n) for si, q, n in IT_EVENTS if si < steps]


def it_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 1704)
    for si, r, n in _it_events(ranks, steps):
        ms = float(sum(rng.uniform(*IT_DOC_MS) for _ in range(n)))
        p.step_host_gaps.setdefault(si, {})[r] = {0: round(ms * 1000, 1)}
        p.py_calls.setdefault(si, {})[r] = list(IT_FRAMES)
    info = dataclasses.replace(_info(CANN8, 1, ranks), with_stack=True)
    return {"": Plan(transformer(layers=4), group_kinds(ranks, 1), p, info)}


def it_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the (step, rank) events, the device idle before the first kernel, the victims' wait."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    ev = _it_events(ranks, steps)
    ev_cols = sorted({si for si, _r_, _n in ev})
    clean = [s for s in range(steps) if s not in ev_cols]
    culprits = sorted({r for _si, r, _n in ev})
    gaps = cl.perturb.step_host_gaps
    tok_us = [gaps[si][r][0] for si, r, _n in ev]
    idle0 = {
        (si, r): (int(cl.steps[si].k_start[r, 0]) - cl.steps[si].bounds(r)[0]) / 1000
        for si in range(steps)
        for r in range(ranks)
    }
    wait = coll_wait_us(m)
    free = col(m, "free_us")
    step = col(m, "step_us").max(axis=0)
    base = _baseline(cl)
    extra = step - base["step_us"].max(axis=0)
    others_ev = [float(np.mean([wait[q, si] for q in range(ranks) if q != r])) for si, r, _n in ev]
    nums = {
        "events": [[ids[si], r] for si, r, _n in ev],
        "culprit_ranks": culprits,
        "event_steps": [ids[si] for si in ev_cols],
        "clean_steps": [ids[s] for s in clean],
        "raw_documents_per_event": [n for _si, _r_, n in ev],
        "tokenize_us_per_event": [_r(x) for x in tok_us],
        "tokenize_us_max": _r(max(tok_us)),
        "tokenize_us_min": _r(min(tok_us)),
        "culprit_idle_before_first_kernel_us": [_r(idle0[(si, r)]) for si, r, _n in ev],
        "idle_before_first_kernel_us_clean": _med(
            [idle0[(s, r)] for s in clean for r in range(ranks)]
        ),
        "culprit_free_us_per_event": [_r(free[r, si]) for si, r, _n in ev],
        "victim_wait_us_per_event": [_r(x) for x in others_ev],
        "median_wait_us_clean": _med(wait[:, clean]),
        "step_us_event_steps_median": _med(step[ev_cols]),
        "step_us_clean_steps_median": _med(step[clean]),
        "saving_us_per_event_step": _med(extra[ev_cols]),
        "saving_us_per_step_average": _r(float(extra.mean())),
    }
    key = _key([], "scheduling", ["dataloader-stall"], "free_us", nums)
    vic = victims_by_wait(wait, culprits, ev_cols)
    rc = root_cause(
        "step_events",
        "scheduling",
        "steps",
        ranks=culprits,
        events=[(ids[si], r) for si, r, _n in ev],
        victims=vic,
        not_slow=not_slow_sample(ranks, culprits, vic),
        steps=[ids[si] for si in ev_cols],
        metrics={
            "victim_wait_us_per_event": _r(float(np.mean(others_ev))),
            "culprit_free_us_per_event": _r(float(np.mean([free[r, si] for si, r, _n in ev]))),
            "clean_steps": nums["clean_steps"],
            "saving_us_per_event_step": nums["saving_us_per_event_step"],
        },
    )
    first_si, first_r, _n = ev[0]
    return _with_evidence(
        key,
        rc,
        culprit_ranks=culprits,
        events=[[ids[si], r] for si, r, _n in ev],
        event_steps=[ids[si] for si in ev_cols],
        first_event_step=ids[first_si],
        first_event_rank=first_r,
        python_frames=list(IT_FRAMES),
        tokenizer_frame=IT_FRAMES[-1],
        dataset_frame=IT_FRAMES[2],
        lane="Python thread of trace_view.json (python_function, with_stack)",
        position="from the start of the step to the first launch",
        kernels_normal=True,
        links_normal=True,
        gc_detected=False,
        cause="the dataset tokenizes raw-text samples in __getitem__ inside the training process "
        "(num_workers=0, no pre-tokenized cache for those shards): when such a batch comes up on "
        "rank 5 or 12, its Python thread tokenizes for 30-60 ms before launching the step, its device "
        "idles and every other rank waits in the first gradient all-reduce",
        fix="pre-tokenize the raw-text shards offline (the same cache as the other shards), or move "
        "tokenization into DataLoader workers (num_workers > 0, prefetch_factor) so it overlaps the "
        "step",
    )


# ---------------------------------------------------------------- registry
DEV17_SCENARIOS = (
    ScenarioSpec(
        "syncbn-stats-allreduce",
        "ResNet-50-like CNN with nn.SyncBatchNorm on 16 cards: every forward BatchNorm all-gathers its "
        "statistics (between BNTrainingReduce and BNTrainingUpdate), every backward one all-reduces "
        "its gradient sums: 72 tiny collectives a step, none overlapped, on every rank, links normal",
        16,
        4,
        sb_plans,
        sb_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "param-rebroadcast-every-step",
        "a leftover re-sync broadcasts every parameter from rank 0 at the start of every step "
        "(4 x 96 MB hcom_broadcast_, the whole model) before the first forward kernel; every rank "
        "idles meanwhile, rank 0 is the source and not slow",
        16,
        4,
        pb_plans,
        pb_answer,
    ),
    ScenarioSpec(
        "hccs-width-node-firmware",
        "after a firmware update node 1's HCCS links run at half width (~9 GB/s instead of ~18, "
        "communication_matrix.json); every collective lasts as long as that node's intra-node "
        "transfers and node 0 waits in them; RoCE and kernels normal",
        16,
        4,
        hw_plans,
        hw_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "inline-tokenize-some-steps",
        "ranks 5 and 12 tokenize raw-text batches inline in the training process in some steps "
        "(python_function frames of the tokenizer on the Python thread for 30-60 ms before the first "
        "launch); their device idles and the others wait in the first gradient all-reduce",
        16,
        8,
        it_plans,
        it_answer,
        min_ranks=16,
    ),
)
DEV17_KINDS = tuple(s.name for s in DEV17_SCENARIOS)


__all__ = ["DEV17_KINDS", "DEV17_SCENARIOS"]
