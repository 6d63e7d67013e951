"""Fourteenth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev16.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the host lane of trace_view.json with the
event-wait tasks on the compute stream, the bandwidth of the input copies of one rank on the device
lane of trace_view.json, the expert GroupedMatmul row counts of kernel_details.csv with the AllToAllv
sizes of communication_matrix.json, and memory_record.csv with the allocator's device calls of one
rank in the late steps):

- ``grad-reduce-event-wait``: the gradient all-reduces are launched with ``async_op=True`` but a
  custom DDP communication hook calls ``handle.wait()`` right after each launch: the compute stream
  waits on the event the HCCL stream records at the end of the all-reduce (``aclrtRecordEvent`` /
  ``aclrtStreamWaitEvent`` after every ``HcclAllReduce`` launch, an ``EVENT_WAIT`` task on the
  compute stream spanning the all-reduce), so none of the 4 per-layer gradient all-reduces overlaps
  the next layer's backward although the host has queued its kernels long before. Job-level; links
  normal, no late rank.
- ``pcie-downtrained-card``: the PCIe link of one card trained at Gen1 x8 instead of Gen4 x16 (a
  badly seated card / riser): the batch copied to the device at the start of every step (pinned,
  ``non_blocking=True``: input ids, labels, loss mask, position ids and a [1, 1, 4096, 4096] bool
  attention mask, 16.8 MB) runs at ~1.6 GB/s on it instead of ~24 GB/s, so its device idles ~10 ms
  before the first kernel and every other rank waits for it in the first gradient all-reduce.
  Culprit: rank 11 (its link to the host, not its compute, not HCCS / RoCE).
- ``moe-uneven-token-routing``: MoE EP=8 per node with top-2 routing and no load-balancing loss:
  the router sends each expert rank between 0.4x and 2.0x the balanced token rows, the hottest rank
  being a different one in each layer (every rank gets the same tokens over the whole step): the
  dispatch / combine AllToAllv sizes differ per rank pair and each layer's combine waits for that
  layer's most loaded rank. Job-level: every rank waits in some layers, none stands out over a
  step.
- ``allocator-fragmentation-late``: one rank's caching allocator fragments as the run goes on
  (reserved memory creeping up to the device's limit while much less is allocated): from step 14 on,
  before each forward layer's QKV and MLP-up MatMuls it cannot find a free block, synchronizes the
  device, frees cached segments (``aclrtFree``) and allocates anew (``aclrtMalloc``); the device
  idles meanwhile and the other ranks wait for it. Culprit: rank 9 in steps 14-17.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    Cluster,
    Collective,
    Item,
    Kernel,
    Perturb,
    default_perturb,
)
from advisor_chat.synth.scenarios import (
    CANN8,
    Plan,
    S,
    ScenarioSpec,
    _info,
    _key,
    _r,
    col,
    group_kinds,
    transformer,
)
from advisor_chat.synth.scenarios_dev import _rank_rc, _with_evidence
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_dev4 import (
    A2A,
    GMM,
    MOE_EP,
    MOE_LAYERS,
    MOE_TOKENS,
    _ep_groups,
    _moe_expert_kernels,
    _moe_info,
    _resimulate,
    _sim_breakdown,
    moe_kinds,
    moe_program,
)
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_dev12 import _kernels
from advisor_chat.synth.scenarios_ext import coll_wait_us, step_ids


def _med(x: Any) -> float:
    return _r(float(np.median(x)))


def _idle_before(cl: Cluster, si: int, r: int, j: int) -> float:
    """Device idle (µs) of rank ``r`` before kernel ``j`` in step index ``si``.

    From the end of the last task (kernel or collective) that ended before the kernel.
    """
    st = cl.steps[si]
    k0 = int(st.k_start[r, j])
    prev = int(st.k_start[r, j - 1] + st.k_dur[r, j - 1]) if j > 0 else st.bounds(r)[0]
    for op in st.ops:
        if prev < int(op.end[r]) <= k0:
            prev = int(op.end[r])
    return (k0 - prev) / 1000


# ---------------------------------------------------------------- grad-reduce-event-wait
EW_GRAD_OVERLAP = 6  # backward kernels that run during a gradient all-reduce when nothing waits


def _grad_colls(prog: list[Item]) -> list[int]:
    """Collective indices of the per-layer gradient all-reduces (tag-less, 96 MB, world)."""
    colls = [it for it in prog if isinstance(it, Collective)]
    return [
        ci
        for ci, c in enumerate(colls)
        if c.op_type == "hcom_allReduce_" and c.size_mb == 96.0 and c.group == "world"
    ]


def ew_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4, grad_overlap=0)
    p = default_perturb(ranks)
    p.event_waits = set(_grad_colls(prog))
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def ew_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every gradient all-reduce is waited for by the compute stream, none overlaps."""
    cl: Cluster = m[""]["cluster"]
    waits = sorted(cl.perturb.event_waits)
    kernels = cl.kernels
    ar_us: list[float] = []
    wait_us = np.zeros((ranks, steps))
    for si, st in enumerate(cl.steps):
        last_end = np.full(ranks, st.start, dtype=np.int64)
        for ci, op in enumerate(st.ops):
            if ci not in waits:
                continue
            ar_us += ((op.end - op.start) / 1000).tolist()
            for r in range(ranks):
                ends = st.k_start[r] + st.k_dur[r]
                before = ends[ends <= op.start[r]]
                w0 = max(int(before.max()) if before.size else st.start, int(last_end[r]))
                wait_us[r, si] += (int(op.end[r]) - w0) / 1000
                last_end[r] = op.end[r]
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    base = _baseline(cl, transformer(layers=4, grad_overlap=EW_GRAD_OVERLAP))
    base_step = float(np.median(base["step_us"]))
    layers = sum(1 for k in kernels if k.tag == "qkv")
    nums = {
        "gradient_allreduces_per_step": len(waits),
        "event_waits_per_step": len(waits),
        "allreduce_us_median": _med(ar_us),
        "allreduce_mb": 96.0,
        "event_wait_us_per_step": _med(wait_us.mean(axis=0)),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_comm_not_overlapped_us_per_step_overlapped": _med(base["comm_not_overlapped_us"]),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "overlappable_allreduces_per_step": layers - 1,
        "median_step_us": _med(step),
        "median_step_us_overlapped": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
        "saving_share_of_step": round(
            (float(np.median(step)) - base_step) / float(np.median(step)), 4
        ),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "event_wait_us_per_step": nums["event_wait_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        task_type="EVENT_WAIT",
        api="aclrtStreamWaitEvent",
        record_api="aclrtRecordEvent",
        stream=2,
        op_type="hcom_allReduce_",
        waits_per_step=len(waits),
        wait_after="every gradient hcom_allReduce_ launch (4 per step, one per layer's backward)",
        host_ahead=True,
        cause="the gradient all-reduces are launched asynchronously (async_op=True) but a custom DDP "
        "communication hook calls handle.wait() right after each launch: the compute stream waits "
        "on the event the HCCL stream records at the end of the all-reduce, so the next layer's "
        "backward kernels, already queued, start only after it",
        fix="wait for the all-reduce handles only where the gradients are needed (before the "
        "optimizer step, e.g. in the hook's future callback / at the end of backward), or use the "
        "built-in bucketed overlap (DDP default hook, Megatron --overlap-grad-reduce)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
    )


# ---------------------------------------------------------------- pcie-downtrained-card
PC_H2D = "host to device"
# the batch of one step, copied before the first kernel: (tensor, bytes)
PC_BATCH = (
    ("input_ids", S * 8),
    ("labels", S * 8),
    ("loss_mask", S * 4),
    ("position_ids", S * 8),
    ("attention_mask", S * S),  # [1, 1, 4096, 4096] bool
)
PC_GBPS = 24.0  # Gen4 x16, pinned host memory
PC_SLOW_GBPS = 1.6  # Gen1 x8 (2.5 GT/s, 8b/10b): ~2 GB/s on the wire
PC_LATENCY_US = 2.0  # per copy
PC_JITTER = 0.03
PC_GEN = ("Gen4 x16", "Gen1 x8")


def _pc_rank(ranks: int) -> int:
    return 11 if ranks > 11 else ranks - 1


def _pc_copies(rng: np.random.Generator, gbps: float) -> list[tuple[str, int, float]]:
    out = []
    for _name, nbytes in PC_BATCH:
        f = 1.0 + PC_JITTER * float(np.clip(rng.standard_normal(), -2, 2))
        out.append((PC_H2D, nbytes, round(PC_LATENCY_US + nbytes / gbps / 1e3 * f, 1)))
    return out


def _pc_perturb(ranks: int, seed: int, slow: int | None) -> Perturb:
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 1601)
    for r in range(ranks):
        p.dev_copies[r] = {0: _pc_copies(rng, PC_SLOW_GBPS if r == slow else PC_GBPS)}
    return p


def pc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    p = _pc_perturb(ranks, seed, _pc_rank(ranks))
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def pc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one rank's input copies run at ~1/15 of the others' bandwidth; the rest wait."""
    cl: Cluster = m[""]["cluster"]
    bad = _pc_rank(ranks)
    others = [r for r in range(ranks) if r != bad]
    copies = cl.perturb.dev_copies
    mask = next(c for c in copies[bad][0] if c[1] == S * S)
    mask_o = [next(c for c in copies[r][0] if c[1] == S * S) for r in others]
    bw_bad = mask[1] / mask[2] / 1e3
    bw_o = [c[1] / c[2] / 1e3 for c in mask_o]
    copy_us = np.array([sum(c[2] for c in copies[r][0]) for r in range(ranks)])
    idle0 = np.array([[_idle_before(cl, si, r, 0) for si in range(steps)] for r in range(ranks)])
    wait = coll_wait_us(m)
    step = col(m, "step_us")
    fixed = _pc_perturb(ranks, cl.seed, None)
    base = _sim_breakdown(_resimulate(dataclasses.replace(cl, perturb=fixed), cl.program))
    base_step = float(np.median(base["step_us"]))
    nums = {
        "culprit_rank": bad,
        "copies_per_step": len(PC_BATCH),
        "batch_bytes": sum(b for _n, b in PC_BATCH),
        "attention_mask_bytes": S * S,
        "culprit_h2d_bandwidth_gbps": round(bw_bad, 2),
        "others_h2d_bandwidth_gbps": round(float(np.median(bw_o)), 2),
        "bandwidth_ratio": round(float(np.median(bw_o)) / bw_bad, 1),
        "culprit_copy_us_per_step": _r(float(copy_us[bad])),
        "others_copy_us_per_step": _med(copy_us[others]),
        "culprit_idle_before_first_kernel_us": _med(idle0[bad]),
        "others_idle_before_first_kernel_us": _med(idle0[others]),
        "victim_wait_us_per_step": _med(wait[others].mean(axis=1)),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "median_step_us": _med(step),
        "median_step_us_fixed_link": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
        "saving_share_of_step": round(
            (float(np.median(step)) - base_step) / float(np.median(step)), 4
        ),
    }
    key = _key([bad], "scheduling", ["heterogeneous-devices"], "free_us", nums)
    rc = _rank_rc(
        m,
        ranks,
        bad,
        "host_stall",
        "scheduling",
        metrics={
            "culprit_copy_us_per_step": nums["culprit_copy_us_per_step"],
            "culprit_h2d_bandwidth_gbps": nums["culprit_h2d_bandwidth_gbps"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_rank=bad,
        task_type="MEMCPY_ASYNC",
        api="aclrtMemcpyAsync",
        operation=PC_H2D,
        stream=2,
        position="before the first kernel of every step (the batch: input_ids, labels, loss_mask, "
        "position_ids, attention_mask)",
        copy_bytes=S * S,
        culprit_bandwidth_gbps=round(bw_bad, 1),
        others_bandwidth_gbps=round(float(np.median(bw_o)), 1),
        pcie_expected=PC_GEN[0],
        pcie_trained=PC_GEN[1],
        same_bytes_every_rank=True,
        kernels_normal=True,
        links_normal=True,
        every_step=True,
        cause="the PCIe link between the host and this card trained at a lower generation / width "
        "(Gen1 x8 instead of Gen4 x16: a badly seated card or riser, a BIOS / retimer problem), so "
        "its host-to-device copies run at ~1/15 of the other cards' bandwidth",
        fix="check the card's PCIe link (lspci -vvv LnkSta against LnkCap, npu-smi info), reseat "
        "the card / riser or replace it, or move the job off that card",
    )


# ---------------------------------------------------------------- moe-uneven-token-routing
# token rows an expert rank receives, relative to the balanced load, by (local rank + 2 x layer) % 8:
# the even and the odd positions sum to the same, so over the 4 layers every rank gets 4x balanced
MU_LOAD = (2.0, 0.6, 0.7, 1.3, 0.9, 1.1, 0.4, 1.0)
MU_DIRS = {"dispatch": "dst", "combine": "src", "combine_grad": "dst", "dispatch_grad": "src"}


def _mu_load(r: int, layer: int) -> float:
    local = r % MOE_EP
    shift = r // MOE_EP  # the other node's EP group has its own pattern
    return MU_LOAD[(local + 2 * layer + shift) % MOE_EP]


def mu_program() -> list[Item]:
    """moe_program with the AllToAllv tags per layer (``dispatch0`` ...) and the expert kernels' too."""
    out: list[Item] = []
    fwd = 0
    bwd = 0
    expert_tags = set(_moe_expert_kernels(MOE_TOKENS))
    layer = 0
    for it in moe_program():
        if isinstance(it, Collective) and it.tag in MU_DIRS:
            if it.tag == "dispatch":
                layer = fwd
                fwd += 1
            elif it.tag == "combine_grad":
                layer = MOE_LAYERS - 1 - bwd
                bwd += 1
            out.append(dataclasses.replace(it, tag=f"{it.tag}{layer}"))
        elif isinstance(it, Kernel) and it.tag in expert_tags:
            out.append(dataclasses.replace(it, tag=f"{it.tag}@{layer}"))
        else:
            out.append(it)
    return out


def mu_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = mu_program()
    kernels = _kernels(prog)
    p = default_perturb(ranks)
    for r in range(ranks):
        for layer in range(MOE_LAYERS):
            rows = round(MOE_TOKENS * _mu_load(r, layer))
            mine = _moe_expert_kernels(rows)
            for j, k in enumerate(kernels):
                if "@" in k.tag and int(k.tag.split("@")[1]) == layer:
                    p.kernel_swap[(-1, r, j)] = mine[k.tag.split("@")[0]]
    for layer in range(MOE_LAYERS):
        share = np.array([_mu_load(r, layer) for r in range(ranks)])
        for tag, d in MU_DIRS.items():
            if d == "dst":
                p.coll_dst_scale[f"{tag}{layer}"] = {q: float(share[q]) for q in range(ranks)}
            else:
                p.coll_scale[f"{tag}{layer}"] = share.copy()
    return {"": Plan(prog, moe_kinds(ranks), p, _moe_info(ranks))}


def mu_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: per layer a different hot expert rank; every rank waits in the AllToAllv."""
    cl: Cluster = m[""]["cluster"]
    rows = np.array(
        [[round(MOE_TOKENS * _mu_load(r, lay)) for lay in range(MOE_LAYERS)] for r in range(ranks)]
    )
    hot = [
        [g[int(np.argmax([rows[q, lay] for q in g]))] for g in _ep_groups(ranks)]
        for lay in range(MOE_LAYERS)
    ]
    a2a_us: list[float] = []
    a2a_sync = np.zeros((ranks, steps))
    a2a_time = np.zeros((ranks, steps))
    link_mb: list[float] = []
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if op.item.op_type != A2A:
                continue
            a2a_us.append(float(np.median((op.end - op.start) / 1000)))
            a2a_sync[:, si] += op.sync_ns / 1000
            a2a_time[:, si] += (op.end - op.start) / 1000
            if si == 0 and op.item.tag == "dispatch0":
                sel = (op.kind.transport == 0) & (op.link_mb > 0)
                link_mb += op.link_mb[sel].tolist()
    gmm_j = [j for j, k in enumerate(cl.kernels) if k.op_type == GMM]
    gmm_us = np.array([st.k_dur[:, gmm_j].sum(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    clean = moe_program()
    base_cl = _resimulate(dataclasses.replace(cl, perturb=default_perturb(ranks)), clean)
    base = _sim_breakdown(base_cl)
    base_a2a = [
        float(np.median((op.end - op.start) / 1000))
        for st in base_cl.steps
        for op in st.ops
        if op.item.op_type == A2A
    ]
    base_step = float(np.median(base["step_us"]))
    total_rows = rows.sum(axis=1)
    nums = {
        "ep_size": MOE_EP,
        "moe_layers": MOE_LAYERS,
        "balanced_token_rows": MOE_TOKENS,
        "max_token_rows": int(rows.max()),
        "min_token_rows": int(rows.min()),
        "max_to_min_token_ratio": round(float(rows.max() / rows.min()), 2),
        "hot_ranks_by_layer": hot,
        "token_rows_per_step_every_rank": int(total_rows[0]),
        "alltoallv_per_step": sum(
            1 for it in cl.program if isinstance(it, Collective) and it.op_type == A2A
        ),
        "alltoallv_us_median": _med(a2a_us),
        "alltoallv_us_median_balanced": _med(base_a2a),
        "alltoallv_us_per_step": _med(a2a_time.mean(axis=0)),
        "alltoallv_wait_us_per_step": _med(a2a_sync.mean(axis=0)),
        "dispatch_link_mb_max": _r(max(link_mb)),
        "dispatch_link_mb_min": _r(min(link_mb)),
        "gmm_us_per_step_spread": round(float(gmm_us.max() / gmm_us.min()), 3),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_step_us": _med(step),
        "median_step_us_balanced": _r(base_step),
        "saving_us_per_step": _r(float(np.median(step)) - base_step),
        "saving_share_of_step": round(
            (float(np.median(step)) - base_step) / float(np.median(step)), 4
        ),
    }
    key = _key([], "communication", ["moe-expert-imbalance"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "alltoallv_wait_us_per_step": nums["alltoallv_wait_us_per_step"],
            "max_to_min_token_ratio": nums["max_to_min_token_ratio"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        wait_op=A2A,
        operator=GMM,
        ep_groups=_ep_groups(ranks),
        token_rows_by_rank_and_layer=rows.tolist(),
        hot_ranks_by_layer=hot,
        hot_rank_changes_every_layer=True,
        same_tokens_per_step_every_rank=True,
        max_load=max(MU_LOAD),
        min_load=min(MU_LOAD),
        cause="top-2 routing without a load-balancing loss: the router sends each expert rank "
        "between 0.4x and 2.0x the balanced tokens, a different rank being the most loaded in each "
        "layer; every AllToAllv (dispatch / combine) waits for the layer's most loaded rank",
        fix="balance the router: an auxiliary load-balancing loss (--moe-router-load-balancing-type "
        "aux_loss, --moe-aux-loss-coeff ~1e-2) or aux-loss-free bias balancing, or a capacity "
        "factor with token dropping (--moe-expert-capacity-factor)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
    )


# ---------------------------------------------------------------- allocator-fragmentation-late
AF_ONSET = 4  # step index from which the allocator goes to the device (step 14)
AF_TAGS = ("qkv", "mlp_up")  # forward MatMuls whose outputs need a fresh block
AF_FREE_US = (140.0, 420.0)  # one aclrtFree of a cached segment
AF_MALLOC_US = (380.0, 720.0)  # aclrtMalloc of the new block
AF_FREES = (2, 4)
AF_RETURN_US = 40.0  # from the last call to the kernel (launch, bookkeeping)
AF_LIMIT_MB = 61440.0  # what the allocator may reserve on the card
AF_BLOCK_MB = {"qkv": 100.7, "mlp_up": 268.4}


def _af_rank(ranks: int) -> int:
    return 9 if ranks > 9 else ranks - 1


def _af_steps(steps: int) -> list[int]:
    onset = min(AF_ONSET, steps - 1)
    return list(range(onset, steps))


def _af_positions(prog: list[Item]) -> list[int]:
    return [j for j, k in enumerate(_kernels(prog)) if k.tag in AF_TAGS]


def _af_mem(
    ranks: int,
    steps: int,
    kernels: list[Kernel],
    bad: int,
    calls: dict[int, dict[int, list[tuple[str, float]]]],
) -> dict[int, list[list[tuple[int, float, float, float]]]]:
    """memory_record samples per rank and step (kernel index, allocated, reserved, active MB).

    Allocated rises through the forward and falls through the backward on every rank; reserved is
    flat, except on the culprit: it creeps up step by step to the limit, and in the affected steps
    drops by the freed segments and rises by the new block at each allocator call.
    """
    nk = len(kernels)
    js = sorted({0, nk // 4, nk // 2, 3 * nk // 4, nk - 1})
    out: dict[int, list[list[tuple[int, float, float, float]]]] = {}
    for r in range(ranks):
        per: list[list[tuple[int, float, float, float]]] = []
        for si in range(steps):
            at = calls.get(si, {}) if r == bad else {}
            pts = sorted(set(js) | set(at) | {j - 1 for j in at})
            samples: list[tuple[int, float, float, float]] = []
            for j in pts:
                alloc = 38912.0 + 12288.0 * (1.0 - abs(2.0 * j / (nk - 1) - 1.0)) + 8.0 * (r % 8)
                if r != bad:
                    resv = 52224.0 + 16.0 * (r % 8)
                elif not at:
                    resv = min(AF_LIMIT_MB - 96.0, 57344.0 + 1024.0 * si)
                elif j in at:
                    freed = 512.0 * sum(1 for api, _d in at[j] if api == "aclrtFree")
                    resv = AF_LIMIT_MB - 96.0 - freed + AF_BLOCK_MB[kernels[j].tag]
                else:
                    resv = AF_LIMIT_MB - 96.0
                samples.append((j, round(alloc, 1), round(resv, 1), round(alloc + 64.0, 1)))
            per.append(samples)
        out[r] = per
    return out


def af_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    bad = _af_rank(ranks)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 1604)
    calls: dict[int, dict[int, list[tuple[str, float]]]] = {}
    for si in _af_steps(steps):
        at: dict[int, list[tuple[str, float]]] = {}
        for j in _af_positions(prog):
            n = int(rng.integers(AF_FREES[0], AF_FREES[1] + 1))
            c = [("aclrtFree", round(float(rng.uniform(*AF_FREE_US)), 1)) for _ in range(n)]
            c.append(("aclrtMalloc", round(float(rng.uniform(*AF_MALLOC_US)), 1)))
            at[j] = c
        calls[si] = at
        p.alloc_calls[si] = {bad: at}
        p.step_host_gaps[si] = {
            bad: {j: round(sum(d for _a, d in c) + len(c) + AF_RETURN_US, 1) for j, c in at.items()}
        }
    p.mem_record = _af_mem(ranks, steps, _kernels(prog), bad, calls)
    info = _info(CANN8, 1, ranks)
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def af_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: from the onset one rank's allocator frees and mallocs on the device; others wait."""
    cl: Cluster = m[""]["cluster"]
    bad = _af_rank(ranks)
    others = [r for r in range(ranks) if r != bad]
    ids = step_ids(m)
    hot = _af_steps(steps)
    rest = [s for s in range(steps) if s not in hot]
    calls = cl.perturb.alloc_calls
    idle = np.array(
        [sum(_idle_before(cl, s, bad, j) for j in calls[s][bad]) for s in hot]
    )  # per affected step
    n_free = [
        sum(1 for a, _d in c if a == "aclrtFree") for s in hot for c in calls[s][bad].values()
    ]
    call_us = [sum(d for _a, d in c) for s in hot for c in calls[s][bad].values()]
    wait = coll_wait_us(m)
    step = col(m, "step_us").max(axis=0)  # [steps] the job's step time
    free = col(m, "free_us")
    base = _baseline(cl)
    extra = step - base["step_us"].max(axis=0)
    mem = cl.perturb.mem_record
    resv_bad = [x[2] for si in hot for x in mem[bad][si]]
    alloc_bad = [x[1] for si in hot for x in mem[bad][si]]
    resv_first = max(x[2] for x in mem[bad][0])
    resv_others = float(np.median([x[2] for r in others for per in mem[r] for x in per]))
    nums = {
        "culprit_rank": bad,
        "onset_step": ids[hot[0]],
        "affected_steps": [ids[s] for s in hot],
        "normal_steps": [ids[s] for s in rest],
        "device_calls_per_affected_step": len(calls[hot[0]][bad]),
        "frees_per_call_median": int(np.median(n_free)),
        "allocator_stall_us_median": _med(call_us),
        "culprit_idle_us_per_affected_step": _med(idle),
        "culprit_reserved_mb_max": _r(max(resv_bad)),
        "culprit_reserved_mb_first_step": _r(resv_first),
        "culprit_allocated_mb_max": _r(max(alloc_bad)),
        "others_reserved_mb_median": _r(resv_others),
        "allocator_limit_mb": AF_LIMIT_MB,
        "victim_wait_us_per_affected_step": _med(wait[np.ix_(others, hot)].mean(axis=0)),
        "culprit_free_us_affected_steps": _med(free[bad, hot]),
        "culprit_free_us_other_steps": _med(free[bad, rest]),
        "step_us_affected_steps": _med(step[hot]),
        "step_us_other_steps": _med(step[rest]),
        "saving_us_per_affected_step": _med(extra[hot]),
    }
    key = _key([bad], "scheduling", ["expandable-segments-allocator"], "free_us", nums)
    key["slow_step"] = ids[hot[0]]
    rc = _rank_rc(
        m,
        ranks,
        bad,
        "host_stall",
        "scheduling",
        cols=hot,
        steps=[ids[s] for s in hot],
        metrics={
            "culprit_idle_us_per_affected_step": nums["culprit_idle_us_per_affected_step"],
            "step_us_affected_steps": nums["step_us_affected_steps"],
            "step_us_other_steps": nums["step_us_other_steps"],
            "saving_us_per_affected_step": nums["saving_us_per_affected_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_rank=bad,
        onset_step=ids[hot[0]],
        first_affected_step=ids[hot[0]],
        last_affected_step=ids[hot[-1]],
        affected_steps=[ids[s] for s in hot],
        normal_steps=[ids[s] for s in rest],
        apis=["aclrtSynchronizeDevice", "aclrtFree", "aclrtMalloc"],
        before_kernels="the QKV and MLP-up MatMuls of every forward layer",
        memory_file="memory_record.csv",
        reserved_near_limit=True,
        reserved_much_more_than_allocated=True,
        alloc_conf_set=False,
        kernels_normal=True,
        links_normal=True,
        cause="the caching allocator of this rank fragments over the run: its reserved memory "
        "creeps up to what the card allows while much less is allocated, until no cached block "
        "fits a new activation; it then synchronizes the device, frees cached segments (aclrtFree) "
        "and allocates a new one (aclrtMalloc) before each forward layer's QKV and MLP-up MatMuls",
        fix="PYTORCH_NPU_ALLOC_CONF=expandable_segments:True (segments that grow instead of "
        "fragmenting), or fewer variable-size allocations on that rank / a smaller max_split_size_mb; "
        "empty_cache() does not fix it",
    )


# ---------------------------------------------------------------- registry
DEV16_SCENARIOS = (
    ScenarioSpec(
        "grad-reduce-event-wait",
        "async gradient all-reduces waited for right after launch (handle.wait() in a DDP hook): "
        "aclrtRecordEvent / aclrtStreamWaitEvent after each HcclAllReduce, an EVENT_WAIT task on the "
        "compute stream spanning it; none of the 4 per-layer all-reduces overlaps the backward on "
        "any rank, links normal",
        16,
        4,
        ew_plans,
        ew_answer,
    ),
    ScenarioSpec(
        "pcie-downtrained-card",
        "rank 11's PCIe link trained at Gen1 x8: its per-step batch copy (16.8 MB attention mask "
        "and 4 small tensors, MEMCPY_ASYNC on the compute stream) runs at ~1.6 GB/s instead of "
        "~24 GB/s; it idles ~10 ms before its first kernel and the others wait for it",
        16,
        4,
        pc_plans,
        pc_answer,
    ),
    ScenarioSpec(
        "moe-uneven-token-routing",
        "MoE EP=8 per node, top-2 routing without a load-balancing loss: expert ranks get 0.4x-2.0x "
        "the balanced token rows, the hottest a different rank in each layer (equal over a step); "
        "every AllToAllv waits for the layer's most loaded rank on every rank",
        16,
        4,
        mu_plans,
        mu_answer,
        # two nodes at least: at 8 ranks the gradient all-reduce across nodes has one rank
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "allocator-fragmentation-late",
        "rank 9's caching allocator fragments: from step 14 on it synchronizes the device, frees "
        "cached segments and mallocs anew before each forward QKV / MLP-up MatMul (reserved at the "
        "card's limit in memory_record.csv); the others wait for it in those steps",
        16,
        8,
        af_plans,
        af_answer,
    ),
)
DEV16_KINDS = tuple(s.name for s in DEV16_SCENARIOS)


__all__ = ["DEV16_KINDS", "DEV16_SCENARIOS"]
