"""Development set 32 of fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``, ``advisor_chat.synth.writer``) with an answer key derived from the
simulated timeline and the breakdown the writer measured (never from typed numbers). Every key
carries ``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the
files). Their question set is ``evals/datasets/generalization_dev32.yaml``: a development set for
finding weaknesses; the held-out kinds of ``generalization.yaml`` stay untouched. The "how much would
fixing it save" numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the Bubble column of step_trace_time.csv on
every stage with the order of the forward / backward operators of kernel_details.csv; the hostnames
and device ids of the rank folders (4 folders per host, devices 0-3) with the RDMA Transit Size of
the data-parallel hcom_allReduce_ records of communication.json; the operator types and groups of
communication.json / profiler_metadata.json (hcom_reduce_ / hcom_broadcast_ on the node groups, a
2-member hcom_allReduce_ only on ranks 0 and 8); and the per-link bandwidth of the RDMA links of
communication_matrix.json against the rack in the hostnames):

- ``pp-no-warmup-serial``: pipeline parallel 4 x data parallel 4 (stages 0-1 on node 0, 2-3 on
  node 1), 8 micro-batches per step, a hand-written pipeline loop without warm-up: each
  micro-batch's forward runs through the 4 stages and its backward back through them before the
  next micro-batch starts (forward / backward alternate on every stage, one micro-batch in
  flight). Every stage computes 2 of every 8 slots and waits in hcom_receive_ for the rest (Bubble
  ~70% of the step), every stage alike; more micro-batches would not help (the step grows with
  them). Job-level; links and kernels normal. A pipelined schedule (1F1B: p - s - 1 warm-up
  forwards) keeps the stages busy but for the fill and drain, (p-1)/(m+p-1).
- ``scattered-4card-nodes``: a 16-card job (tensor parallel 4 x data parallel 4) placed by the
  scheduler on 4 servers x 4 cards (devices 0-3; the other half of each server runs another job)
  instead of 2 full servers: every data-parallel group has one member per server, so each gradient
  all-reduce crosses 4 servers over RDMA with ~3x the bytes per card of the packed layout (where
  half of it stays on HCCS), the gradient communication no longer hides behind the backward, on
  every rank alike. Job-level; bandwidth, kernels and the tensor-parallel ops normal.
- ``hier-allreduce-leaders``: data parallel 16 on 2 servers with a hand-written two-level gradient
  sync (Horovod-style): after the backward, for each of 4 gradient buckets an ``hcom_reduce_`` to
  local rank 0 of each server, an ``hcom_allReduce_`` between the two server leaders (ranks 0 and 8)
  only, and an ``hcom_broadcast_`` from the leader: the whole bucket crosses the servers over one
  RoCE port (ranks 0 <-> 8) instead of 1/8 of it over each of the 8; the other 14 ranks wait for
  the leaders in the broadcast. Culprit: ranks 0 and 8 (the leaders' link carries it all); bandwidth
  normal.
- ``cross-rack-uplink``: 32 cards on 4 servers in two racks (hostnames ``*-r07-*`` / ``*-r08-*``),
  tensor parallel 8 per server, data parallel 4 across the servers (ring 0 -> 1 -> 2 -> 3 -> 0):
  the spine uplink between the two racks' leaf switches is oversubscribed, so the two ring hops that
  cross racks (server 1 -> 2 and 3 -> 0, all 8 rails, both directions between the racks) run at
  ~35% of the link bandwidth while the in-rack hops (0 -> 1, 2 -> 3) and HCCS run normally (the same
  NICs receive at full speed). The senders on those hops (ranks 8-15 and 24-31) take the longest in
  every data-parallel all-reduce and the others wait for them. Culprit: the cross-rack links (their
  senders); NICs, kernels and host normal.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
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
    make_group_kind,
    node_ip,
    simulate,
)
from advisor_chat.synth.scenarios import (
    BASE_COMM_US,
    CANN8,
    H,
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
from advisor_chat.synth.scenarios_dev10 import _share
from advisor_chat.synth.scenarios_dev19 import _med, _saving
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    victims_by_wait,
)
from advisor_chat.synth.writer import host_name

LAYERS = 4


def _kernels(prog: list[Item]) -> list[Kernel]:
    return [it for it in prog if isinstance(it, Kernel)]


def _dist(info: Any, **kw: Any) -> None:
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(kw)
    info.user_metadata["distributed_args"] = dist


def _op_us(cl: Cluster, pick: Any) -> np.ndarray:
    """[ranks, steps] summed duration (µs) of the collectives ``pick(collective)`` accepts.

    Ranks for which the op's group kind is hidden (not written) count 0.
    """
    out = np.zeros((cl.ranks, len(cl.steps)))
    hid = cl.perturb.hidden_groups
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if not pick(op.item):
                continue
            d = (op.end - op.start) / 1000
            if hid:
                d = np.array(
                    [0.0 if op.kind.kind in hid.get(r, set()) else d[r] for r in range(cl.ranks)]
                )
            out[:, si] += d
    return out


def _link_bw(cl: Cluster, pick: Any) -> list[float]:
    """Bandwidths (GB/s) of the transfers ``pick(op, rank, peer, transport)`` accepts."""
    out: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            k = op.kind
            for r in range(cl.ranks):
                for j in range(k.peer.shape[1]):
                    tr = int(k.transport[r, j])
                    if tr < 0 or op.link_ms[r, j] <= 0:
                        continue
                    if pick(op, r, int(k.peer[r, j]), tr):
                        out.append(float(op.link_mb[r, j] / op.link_ms[r, j]))
    return out


# ---------------------------------------------------------------- pp-no-warmup-serial
PS_P = 4  # pipeline stages
PS_M = 8  # micro-batches per step
PS_LPS = 2  # transformer layers per stage (8 layers)
PS_SCALE = 0.5
PS_ACT_MB = round(2 * 4096 * H / 1e6, 3)  # one micro-batch's activation [1, 4096, 4096] bf16
PS_DP_MB = 192.0  # the stage's gradient all-reduce (one bucket after the pipeline)

Unit = tuple[dict[int, str], list[tuple[int, int]]]


def _ps_units(m: int, serial: bool) -> list[Unit]:
    """The schedule as slots: the op (F / B) of each busy stage and the transfers after it.

    ``serial``: micro-batch by micro-batch, the forward through every stage, then the backward back
    through them (no warm-up: one micro-batch in flight). Otherwise the pipelined fill / drain
    (stage s runs forward k at slot s + k and backward k at slot m + 2(p-1) - s + k; the same
    (p-1)/(m+p-1) idle share as 1F1B).
    """
    p = PS_P
    out: list[Unit] = []
    if serial:
        for _ in range(m):
            for s in range(p):
                out.append(({s: "F"}, [(s, s + 1)] if s < p - 1 else []))
            for s in reversed(range(p)):
                out.append(({s: "B"}, [(s, s - 1)] if s > 0 else []))
        return out
    for t in range(2 * m + 2 * (p - 1)):
        ops: dict[int, str] = {}
        fwd: list[tuple[int, int]] = []
        bwd: list[tuple[int, int]] = []
        for s in range(p):
            kf = t - s
            kb = t - (m + 2 * p - 2 - s)
            if 0 <= kf < m:
                ops[s] = "F"
                if s < p - 1:
                    fwd.append((s, s + 1))
            elif 0 <= kb < m:
                ops[s] = "B"
                if s > 0:
                    bwd.append((s, s - 1))
        # a stage first hands its result on, then takes its neighbour's (no artificial chain)
        out.append((ops, sorted(fwd, reverse=True) + sorted(bwd)))
    return out


def _in_flight(units: list[Unit], stage: int = 0) -> int:
    """Most micro-batches a stage holds between their forward and their backward."""
    held = peak = 0
    for ops, _x in units:
        op = ops.get(stage)
        if op == "F":
            held += 1
            peak = max(peak, held)
        elif op == "B":
            held -= 1
    return peak


def _ps_pair(a: int, b: int) -> str:
    lo, hi = min(a, b), max(a, b)
    return f"pp{lo}{hi}"


def _ps_blocks() -> tuple[list[Kernel], list[Kernel], list[Item]]:
    one = transformer(layers=1, scale=PS_SCALE, grad=False)
    ks = _kernels(one)
    fwd, bwd = ks[:10] * PS_LPS, ks[10:22] * PS_LPS
    j = next(
        i for i, it in enumerate(one) if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    return fwd, bwd, one[j:]


def ps_program(
    m: int, serial: bool
) -> tuple[list[Item], list[tuple[dict[int, str], list[int], list[int]]]]:
    """The slots' kernels and transfers, then the stage's gradient all-reduce and the optimizer.

    Returns:
        The program and, per slot, (stage ops, forward block kernel indices, backward ones).
    """
    fwd, bwd, opt = _ps_blocks()
    prog: list[Item] = []
    units: list[tuple[dict[int, str], list[int], list[int]]] = []
    nk = 0
    for ops, xfer in _ps_units(m, serial):
        f_idx: list[int] = []
        b_idx: list[int] = []
        if "F" in ops.values():
            f_idx = list(range(nk, nk + len(fwd)))
            nk += len(fwd)
            prog += fwd
        if "B" in ops.values():
            b_idx = list(range(nk, nk + len(bwd)))
            nk += len(bwd)
            prog += bwd
        for src, dst in xfer:
            kind = _ps_pair(src, dst)
            if src < dst:
                prog.append(
                    Collective("hcom_send_", kind, PS_ACT_MB, peer_op="hcom_receive_", tag="act")
                )
            else:
                prog.append(
                    Collective("hcom_receive_", kind, PS_ACT_MB, peer_op="hcom_send_", tag="grad")
                )
        units.append((ops, f_idx, b_idx))
    prog += [Collective("hcom_allReduce_", "dp", PS_DP_MB, tag="dp_grad"), *opt]
    return prog, units


def _ps_dp(ranks: int) -> int:
    return ranks // PS_P


def _ps_stage_ranks(ranks: int, s: int) -> list[int]:
    n = _ps_dp(ranks)
    return list(range(s * n, (s + 1) * n))


def ps_kinds(ranks: int) -> tuple[dict[str, GroupKind], dict[int, set[str]]]:
    """World, DP (one stage) and one kind per pair of neighbouring stages (others alone, hidden)."""
    dp = _ps_dp(ranks)
    stage = [_ps_stage_ranks(ranks, s) for s in range(PS_P)]
    kinds = {
        "world": make_group_kind(
            "world", "default_group", [list(range(ranks))], ranks, BASE_COMM_US, 0
        ),
        "dp": make_group_kind("dp", "dp", stage, ranks, BASE_COMM_US, 2),
    }
    hidden: dict[int, set[str]] = {}
    for n in range(PS_P - 1):
        kind = _ps_pair(n, n + 1)
        members = [[stage[n][d], stage[n + 1][d]] for d in range(dp)]
        for st in range(PS_P):
            if st not in (n, n + 1):
                members += [[r] for r in stage[st]]
                for r in stage[st]:
                    hidden.setdefault(r, set()).add(kind)
        kinds[kind] = make_group_kind(kind, "pp", members, ranks, BASE_COMM_US, 3 + n)
    return kinds, hidden


def _ps_perturb(ranks: int, units: list[tuple[dict[int, str], list[int], list[int]]]) -> Any:
    p = default_perturb(ranks)
    _kinds, hidden = ps_kinds(ranks)
    p.hidden_groups = hidden
    for r in range(ranks):
        st = r // _ps_dp(ranks)
        skip: set[int] = set()
        for ops, f_idx, b_idx in units:
            op = ops.get(st)
            if op != "F":
                skip.update(f_idx)
            if op != "B":
                skip.update(b_idx)
        p.skip_kernels[r] = skip
    return p


def ps_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog, units = ps_program(PS_M, serial=True)
    kinds, _hidden = ps_kinds(ranks)
    info = _info(CANN8, 1, ranks)
    _dist(
        info,
        pipeline_model_parallel_size=PS_P,
        data_parallel_size=_ps_dp(ranks),
        num_layers=PS_P * PS_LPS,
        micro_batch_size=1,
        num_micro_batches=PS_M,
        global_batch_size=PS_M * _ps_dp(ranks),
    )
    return {"": Plan(prog, kinds, _ps_perturb(ranks, units), info)}


def _recv_us(cl: Cluster) -> np.ndarray:
    """[ranks, steps] time (µs) in hcom_receive_ ops as written (the step trace's Bubble)."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    hidden = cl.perturb.hidden_groups
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            for r in range(cl.ranks):
                if op.kind.kind in hidden.get(r, set()):
                    continue
                if op.item.op_type_of(int(op.kind.local[r])).startswith("hcom_receive"):
                    out[r, si] += (op.end[r] - op.start[r]) / 1000
    return out


def _recv_durs(cl: Cluster, ranks: list[int], tag: str) -> list[float]:
    """Durations (µs) of the receives of ``tag`` ops (act / grad) on ``ranks``."""
    out: list[float] = []
    hidden = cl.perturb.hidden_groups
    for st in cl.steps:
        for op in st.ops:
            if op.item.tag != tag:
                continue
            for r in ranks:
                if op.kind.kind in hidden.get(r, set()):
                    continue
                if op.item.op_type_of(int(op.kind.local[r])).startswith("hcom_receive"):
                    out.append(float(op.end[r] - op.start[r]) / 1000)
    return out


def ps_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every stage computes 2 of 2p slots per micro-batch and waits for the rest.

    The same micro-batches pipelined (re-simulated, same seed and steps) give the saving: the
    fill / drain order (each stage starts the forward of micro-batch k+1 as soon as it handed k on),
    whose idle share (p-1)/(m+p-1) is the one 1F1B has too (1F1B differs in memory, not in time,
    and its asynchronous hand-offs are not what the simulator's rendezvous p2p models).
    """
    cl: Cluster = m[""]["cluster"]
    dp = _ps_dp(ranks)
    bub = col(m, "bubble_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    prog_f, units_f = ps_program(PS_M, serial=False)
    kinds_f, _hidden = ps_kinds(ranks)
    fix = simulate(
        prog_f,
        kinds_f,
        _ps_perturb(ranks, units_f),
        ranks,
        steps,
        cl.seed,
        cl.steps[0].step_id,
        cl.t0_ns,
    )
    step_f = _sim_breakdown(fix)["step_us"]
    bub_f = _recv_us(fix)
    a, b, save = _saving(step, step_f)
    by_stage = [
        _share(bub[s * dp : (s + 1) * dp], step[s * dp : (s + 1) * dp]) for s in range(PS_P)
    ]
    first = _ps_stage_ranks(ranks, 0)
    last = _ps_stage_ranks(ranks, PS_P - 1)
    grad_wait = _recv_durs(cl, first, "grad")
    act_wait = _recv_durs(cl, last, "act")
    fa = sum(1 for k in _ps_blocks()[0] if k.op_type == "FlashAttentionScore")
    nums = {
        "pipeline_stages": PS_P,
        "micro_batches_per_step": PS_M,
        "layers_per_stage": PS_LPS,
        "data_parallel_size": dp,
        "forward_passes_per_stage_per_step": PS_M,
        "flash_attention_per_stage_per_step": PS_M * fa,
        "micro_batches_in_flight": _in_flight(_ps_units(PS_M, serial=True)),
        "ideal_bubble_fraction_serial": round((PS_P - 1) / PS_P, 4),
        "ideal_bubble_fraction_pipelined": round((PS_P - 1) / (PS_M + PS_P - 1), 4),
        "bubble_us_per_step": _med(bub.mean(axis=1)),
        "bubble_share": _share(bub, step),
        "bubble_share_by_stage": by_stage,
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_computing_share": _share(comp, step),
        "first_stage_gradient_wait_us_per_micro_batch": _r(float(np.median(grad_wait))),
        "last_stage_activation_wait_us_per_micro_batch": _r(float(np.median(act_wait))),
        "median_step_us": _r(a),
        "time_per_micro_batch_us": _r(a / PS_M),
        "median_step_us_pipelined": _r(b),
        "time_per_micro_batch_us_pipelined": _r(b / PS_M),
        "bubble_share_pipelined": _share(bub_f, step_f),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
        "speedup_pipelined": round(a / b, 3),
    }
    key = _key([], "communication", ["pipeline-bubbles"], "bubble_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "pipeline_imbalance",
        "communication",
        metrics={
            "bubble_share": nums["bubble_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
            "micro_batches_in_flight": nums["micro_batches_in_flight"],
        },
    )
    stages = [_ps_stage_ranks(ranks, s) for s in range(PS_P)]
    return _with_evidence(
        key,
        rc,
        pipeline_stages=PS_P,
        micro_batches=PS_M,
        stages=stages,
        p2p_ops=["hcom_send_", "hcom_receive_"],
        order="on every stage the operators alternate forward (FlashAttentionScore ...) and "
        "backward (FlashAttentionScoreGrad ...) micro-batch by micro-batch: the forward of "
        "micro-batch k+1 starts only after the backward of micro-batch k, with an "
        "hcom_receive_ wait in between",
        file="step_trace_time.csv (Bubble: hcom_receive_ time, ~3/4 of the step on every stage "
        "alike), kernel_details.csv (per stage 8 forward and 8 backward blocks a step, strictly "
        "alternating; the hcom_receive_ rows between them), communication.json (p2p section: one "
        "33.6 MB hcom_send_ / hcom_receive_ per micro-batch and boundary, bandwidth normal) and "
        "profiler_metadata.json (pipeline_model_parallel_size 4, num_micro_batches 8)",
        all_ranks=True,
        every_stage=True,
        slow_stage=False,
        late_rank=False,
        links_normal=True,
        kernels_normal=True,
        same_every_step=True,
        more_micro_batches_help=False,
        cause=f"the hand-written pipeline loop runs one micro-batch at a time: its forward through "
        f"the {PS_P} stages, then its backward back through them, before the next micro-batch "
        f"starts (no warm-up forwards, one micro-batch in flight), so each stage computes 2 of "
        f"every {2 * PS_P} slots and waits in hcom_receive_ for the rest (~"
        f"{(PS_P - 1) / PS_P:.0%} of the step), on every stage alike; more micro-batches only "
        "make the step longer",
        fix="use a pipelined schedule: 1F1B (Megatron / MindSpeed "
        "forward_backward_pipelining_without_interleaving, torch.distributed.pipelining "
        "Schedule1F1B) with p - s - 1 warm-up forwards on stage s, so the stages work on "
        "different micro-batches at once and only the fill / drain ((p-1)/(m+p-1)) stays idle; "
        "then raise the micro-batch count to shrink that",
    )


# ---------------------------------------------------------------- scattered-4card-nodes
SC_TP = 4
SC_PER_HOST = 4  # cards of this job on each server (the scheduler's placement)
SC_GRAD_MB = 96.0  # a layer's gradient bucket (the tp shard's bf16 gradients)
SC_TP_MB = 8.0
SC_OVERLAP = 6  # backward kernels of the next layer beside each gradient all-reduce


def _sc_place(ranks: int, packed: bool = False) -> list[tuple[int, int]]:
    """(server, device id) per rank: 4 cards on each server (devices 0-3), or 8 when packed."""
    per = RANKS_PER_NODE if packed else SC_PER_HOST
    return [(r // per, r % per) for r in range(ranks)]


def sc_kinds(ranks: int, packed: bool = False) -> dict[str, GroupKind]:
    """World, tp (consecutive ranks, one server) and dp groups (same tp rank), with the placement."""
    place = _sc_place(ranks, packed)
    tp_groups = [list(range(i, i + SC_TP)) for i in range(0, ranks, SC_TP)]
    dp_groups = [list(range(j, ranks, SC_TP)) for j in range(SC_TP)]
    return {
        "world": make_group_kind(
            "world", "default_group", [list(range(ranks))], ranks, BASE_COMM_US, 0, place
        ),
        "tp": make_group_kind("tp", "tp", tp_groups, ranks, BASE_COMM_US, 1, place),
        "dp": make_group_kind("dp", "dp", dp_groups, ranks, BASE_COMM_US, 2, place),
    }


def sc_program() -> list[Item]:
    """transformer() at TP 4 with a per-layer gradient all-reduce on the dp group."""
    return transformer(
        layers=LAYERS, tp=SC_TP, tp_mb=SC_TP_MB, grad_mb=SC_GRAD_MB, grad_overlap=SC_OVERLAP
    )


def sc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    place = _sc_place(ranks)
    info = dataclasses.replace(
        _info(CANN8, SC_TP, ranks), placement={r: place[r] for r in range(ranks)}
    )
    return {
        "": Plan(sc_program(), sc_kinds(ranks), default_perturb(ranks), info, tp=SC_TP),
    }


def _rdma_mb_per_op(cl: Cluster, kind: str) -> tuple[list[float], list[float]]:
    """(RDMA MB, HCCS MB) each rank sends per op of the group kind ``kind``."""
    rdma: list[float] = []
    hccs: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if op.kind.kind != kind:
                continue
            tr = op.kind.transport
            rdma.extend(np.where(tr == 1, op.link_mb, 0.0).sum(axis=1).tolist())
            hccs.extend(np.where(tr == 0, op.link_mb, 0.0).sum(axis=1).tolist())
    return rdma, hccs


def sc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every dp all-reduce crosses 4 servers with one card each; packed, half stays on HCCS."""
    cl: Cluster = m[""]["cluster"]
    place = _sc_place(ranks)
    hosts = sorted({n for n, _ in place})
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    comp = col(m, "computing_us")
    dp_us = _op_us(cl, lambda c: c.tag == "" and c.group == "dp")
    n_dp = sum(1 for it in cl.program if isinstance(it, Collective) and it.group == "dp")
    dp_op = [
        float(np.median((op.end - op.start) / 1000))
        for st in cl.steps
        for op in st.ops
        if op.kind.kind == "dp"
    ]
    rdma, hccs = _rdma_mb_per_op(cl, "dp")
    packed = _resimulate(cl, cl.program, sc_kinds(ranks, packed=True))
    base = _sim_breakdown(packed)
    rdma_p, hccs_p = _rdma_mb_per_op(packed, "dp")
    dp_op_p = [
        float(np.median((op.end - op.start) / 1000))
        for st in packed.steps
        for op in st.ops
        if op.kind.kind == "dp"
    ]
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "servers": len(hosts),
        "cards_per_server": SC_PER_HOST,
        "servers_packed": -(-ranks // RANKS_PER_NODE),
        "tp_size": SC_TP,
        "dp_size": ranks // SC_TP,
        "dp_members_per_server": max(
            Counter(place[r][0] for r in mem).most_common(1)[0][1] for mem in cl.kinds["dp"].members
        ),
        "grad_allreduces_per_step": n_dp,
        "grad_allreduce_mb": SC_GRAD_MB,
        "dp_allreduce_rdma_mb_per_card": _r(float(np.median(rdma))),
        "dp_allreduce_hccs_mb_per_card": _r(float(np.median(hccs))),
        "dp_allreduce_rdma_mb_per_card_packed": _r(float(np.median(rdma_p))),
        "rdma_bytes_ratio_vs_packed": (
            round(float(np.median(rdma) / np.median(rdma_p)), 3)
            if float(np.median(rdma_p)) > 0
            else None
        ),
        "dp_allreduce_us_median": _r(float(np.median(dp_op))),
        "dp_allreduce_us_median_packed": _r(float(np.median(dp_op_p))),
        "grad_comm_us_per_step": _med(dp_us.mean(axis=0)),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_comm_not_overlapped_us_per_step_packed": _med(
            base["comm_not_overlapped_us"].mean(axis=1)
        ),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_packed": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    del hccs_p
    key = _key(
        [],
        "communication",
        ["comm-not-overlapped", "slow-link-rdma"],
        "comm_not_overlapped_us",
        nums,
    )
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "median_comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "rdma_bytes_ratio_vs_packed": nums["rdma_bytes_ratio_vs_packed"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    by_host = {host_name(None, n): [r for r in range(ranks) if place[r][0] == n] for n in hosts}
    return _with_evidence(
        key,
        rc,
        hosts=by_host,
        node_ips=[node_ip(n) for n in hosts],
        devices=sorted({d for _, d in place}),
        cards_per_server=SC_PER_HOST,
        dp_groups=[list(range(j, ranks, SC_TP)) for j in range(SC_TP)],
        tp_groups_inside_a_server=True,
        collective="hcom_allReduce_",
        group="dp",
        transport="RDMA",
        file="the rank folders' hostnames (devserver-0000 .. devserver-0003, 4 folders each) and "
        "device ids (NPU:0-3 in memory_record.csv, the communicator names in "
        "profiler_metadata.json parallel_group_info), the dp groups there (one member per server), "
        "communication.json (every dp hcom_allReduce_ over RDMA only, ~3x the Transit Size per "
        "card of a 2-server layout, bandwidth normal) and step_trace_time.csv "
        "(Communication(Not Overlapped) on every rank alike)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        bandwidth_normal=True,
        kernels_normal=True,
        same_every_step=True,
        cause=f"the job's {ranks} cards were placed on {len(hosts)} servers x {SC_PER_HOST} "
        "(devices 0-3; the other half of each server runs another job) instead of "
        f"{-(-ranks // RANKS_PER_NODE)} full server(s): each data-parallel group has one member per "
        "server, so every gradient all-reduce crosses all the servers over RDMA (~3x the bytes "
        "per card of the packed layout, where half of the group shares a server over HCCS) and "
        "no longer hides behind the backward, on every rank alike",
        fix="schedule the job on whole servers (8 cards each: node affinity / bin-packing in the "
        "scheduler, torchrun --nnodes 2 --nproc-per-node 8 / a rank table with full servers) so "
        "each data-parallel group has several members per server; if the job must be split, "
        "keep TP inside a server and overlap the gradient all-reduce (bucketed DDP)",
    )


# ---------------------------------------------------------------- hier-allreduce-leaders
HL_BUCKETS = 4
HL_MB = 128.0
HL_TAGS = ("grad_reduce", "grad_leaders", "grad_bcast")


def _hl_leaders(ranks: int) -> list[int]:
    return list(range(0, ranks, RANKS_PER_NODE))


def hl_kinds(ranks: int) -> tuple[dict[str, GroupKind], dict[int, set[str]]]:
    """World, one group per server, and the servers' leaders (local rank 0; the others alone)."""
    kinds = group_kinds(ranks, 1)
    nodes = [
        list(range(n, min(n + RANKS_PER_NODE, ranks))) for n in range(0, ranks, RANKS_PER_NODE)
    ]
    kinds["node"] = make_group_kind("node", "node_local", nodes, ranks, BASE_COMM_US, 1)
    leaders = _hl_leaders(ranks)
    others = [[r] for r in range(ranks) if r not in leaders]
    kinds["leaders"] = make_group_kind(
        "leaders", "node_leaders", [leaders, *others], ranks, BASE_COMM_US, 2
    )
    hidden = {r: {"leaders"} for r in range(ranks) if r not in leaders}
    return kinds, hidden


def hl_program(fixed: bool = False) -> list[Item]:
    """transformer() with the gradient sync after the backward, bucket by bucket.

    Per bucket the two-level sync (reduce to the leader, the leaders' all-reduce, broadcast), or
    with ``fixed`` one all-reduce over every rank.
    """
    base = transformer(layers=LAYERS, grad=False)
    j = next(
        i
        for i, it in enumerate(base)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    sync: list[Item] = []
    for _ in range(HL_BUCKETS):
        if fixed:
            sync.append(Collective("hcom_allReduce_", "world", HL_MB, tag="grad_world"))
        else:
            sync += [
                Collective("hcom_reduce_", "node", HL_MB, tag=HL_TAGS[0]),
                Collective("hcom_allReduce_", "leaders", HL_MB, tag=HL_TAGS[1]),
                Collective("hcom_broadcast_", "node", HL_MB, tag=HL_TAGS[2]),
            ]
    return [*base[:j], *sync, *base[j:]]


def hl_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    kinds, hidden = hl_kinds(ranks)
    p = default_perturb(ranks)
    p.hidden_groups = hidden
    info = _info(CANN8, 1, ranks)
    _dist(info, gradient_buckets=HL_BUCKETS, bucket_size_mb=HL_MB)
    return {"": Plan(hl_program(), kinds, p, info)}


def hl_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the leaders' link carries every bucket; the others wait in the broadcast."""
    cl: Cluster = m[""]["cluster"]
    leaders = _hl_leaders(ranks)
    others = [r for r in range(ranks) if r not in leaders]
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    wait = coll_wait_us(m)
    lead_us = _op_us(cl, lambda c: c.tag == HL_TAGS[1])
    sync_us = _op_us(cl, lambda c: c.tag in HL_TAGS)
    bcast_sync: list[float] = []
    lead_rdma: list[float] = []
    lead_op: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if op.item.tag == HL_TAGS[2]:
                bcast_sync.extend((op.sync_ns[others] / 1000).tolist())
            if op.item.tag == HL_TAGS[1]:
                tr = op.kind.transport
                lead_rdma.extend(np.where(tr == 1, op.link_mb, 0.0).sum(axis=1)[leaders].tolist())
                lead_op.append(float(np.median((op.end - op.start)[leaders] / 1000)))
    ports: set[int] = set()
    for st in cl.steps:
        for op in st.ops:
            if op.item.tag in HL_TAGS:
                mb = np.where(op.kind.transport == 1, op.link_mb, 0.0).sum(axis=1)
                ports.update(int(r) for r in np.flatnonzero(mb > 0))
    fixed_prog = hl_program(fixed=True)
    fcl = _resimulate(cl, fixed_prog)
    base = _sim_breakdown(fcl)
    f_rdma: list[float] = []
    for st in fcl.steps:
        for op in st.ops:
            if op.item.tag == "grad_world":
                tr = op.kind.transport
                f_rdma.extend(np.where(tr == 1, op.link_mb, 0.0).sum(axis=1).tolist())
    f_sync = _op_us(fcl, lambda c: c.tag == "grad_world")
    a, b, save = _saving(step, base["step_us"])
    vic = victims_by_wait(wait, leaders)
    nums = {
        "leader_ranks": leaders,
        "servers": len(leaders),
        "buckets_per_step": HL_BUCKETS,
        "bucket_mb": HL_MB,
        "leader_allreduce_rdma_mb_per_bucket": _r(float(np.median(lead_rdma))),
        "rdma_mb_per_card_per_bucket_fixed": _r(float(np.median(f_rdma))),
        "rdma_ports_used_per_server": max(
            Counter(r // RANKS_PER_NODE for r in ports).values(), default=0
        ),
        "rdma_ports_per_server": RANKS_PER_NODE,
        "leader_allreduce_us_median": _r(float(np.median(lead_op))),
        "broadcast_wait_us_median_others": _r(float(np.median(bcast_sync))),
        "grad_sync_us_per_step": _med(sync_us[leaders].mean(axis=1)),
        "leader_allreduce_us_per_step": _med(lead_us[leaders].mean(axis=1)),
        "grad_sync_us_per_step_fixed": _med(f_sync.mean(axis=1)),
        "victim_wait_us_per_step": _r(float(wait[others].mean())),
        "leader_wait_us_per_step": _r(float(wait[leaders].mean())),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_step_us": _r(a),
        "median_step_us_fixed": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        leaders,
        "communication",
        ["comm-not-overlapped", "slow-link-rdma"],
        "comm_not_overlapped_us",
        nums,
    )
    rc = root_cause(
        "slow_group",
        "communication",
        "group",
        ranks=leaders,
        victims=vic,
        not_slow=not_slow_sample(ranks, leaders, vic),
        metrics={
            "leader_allreduce_us_median": nums["leader_allreduce_us_median"],
            "broadcast_wait_us_median_others": nums["broadcast_wait_us_median_others"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_ranks=leaders,
        leader_group=leaders,
        node_groups=[list(range(n, n + RANKS_PER_NODE)) for n in leaders],
        collectives=["hcom_reduce_", "hcom_allReduce_", "hcom_broadcast_"],
        per_bucket="hcom_reduce_ (server group, to local rank 0) -> hcom_allReduce_ (ranks "
        + ", ".join(str(r) for r in leaders)
        + " only) -> hcom_broadcast_ (server group, from local rank 0)",
        transport="RDMA",
        rdma_link=[leaders[0], leaders[1]],
        file="communication.json (per step 4 hcom_reduce_ and 4 hcom_broadcast_ on the 8-rank "
        "server groups on every rank, 4 hcom_allReduce_ of a 2-member group only on ranks 0 and 8 "
        "with the whole ~134 MB bucket over RDMA; the broadcasts' Synchronization Time on the "
        "other ranks), profiler_metadata.json (parallel_group_info: node_local [0..7] / [8..15], "
        "node_leaders [0, 8]) and communication_matrix.json (the gradient's only RDMA link 0 <-> 8)",
        bandwidth_normal=True,
        devices_normal=True,
        host_normal=True,
        every_step=True,
        cause="a hand-written two-level gradient sync (Horovod-style hierarchical all-reduce): per "
        "bucket a reduce to local rank 0 of each server, an all-reduce between the server leaders "
        "(ranks " + ", ".join(str(r) for r in leaders) + ") only, and a broadcast back: the whole "
        "gradient crosses the servers over the leaders' single RoCE port instead of 1/8 of it over "
        "each card's own port, so the leaders' all-reduce takes several times longer and the other "
        "ranks wait for them in the broadcast",
        fix="drop the custom sync and all-reduce each bucket over the data-parallel group in one "
        "call (DDP / dist.all_reduce on the default group): HCCL's own hierarchical algorithm "
        "reduce-scatters inside the server, all-reduces each card's 1/8 across the servers over "
        "every card's NIC and all-gathers back; overlap it with the backward (DDP buckets)",
    )


# ---------------------------------------------------------------- cross-rack-uplink
UP_TP = 8
UP_FACTOR = 0.35  # cross-rack RDMA bandwidth / the link's normal bandwidth
UP_GRAD_MB = 48.0
UP_TP_MB = 32.0
UP_RACKS = ("r07", "r08")


def _up_nodes(ranks: int) -> int:
    return ranks // RANKS_PER_NODE


def _up_rack(ranks: int, node: int) -> int:
    return node // (_up_nodes(ranks) // 2)


def _up_hostnames(ranks: int) -> dict[int, str]:
    half = _up_nodes(ranks) // 2
    return {n: f"gz-{UP_RACKS[n // half]}-npu{n % half + 1:02d}" for n in range(_up_nodes(ranks))}


def _up_cross(ranks: int, kinds: dict[str, GroupKind]) -> set[tuple[int, int]]:
    """(src, dst) RDMA links whose ends sit in different racks."""
    out: set[tuple[int, int]] = set()
    for kind in kinds.values():
        for r in range(ranks):
            for j in range(kind.peer.shape[1]):
                if kind.transport[r, j] != 1:
                    continue
                q = int(kind.peer[r, j])
                a, b = r // RANKS_PER_NODE, q // RANKS_PER_NODE
                if _up_rack(ranks, a) != _up_rack(ranks, b):
                    out.add((r, q))
    return out


def up_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    kinds = group_kinds(ranks, UP_TP)
    p = default_perturb(ranks)
    for lk in sorted(_up_cross(ranks, kinds)):
        p.link_factor[lk] = UP_FACTOR
    prog = transformer(layers=LAYERS, tp=UP_TP, tp_mb=UP_TP_MB, grad_mb=UP_GRAD_MB)
    info = dataclasses.replace(_info(CANN8, UP_TP, ranks), hostnames=_up_hostnames(ranks))
    return {"": Plan(prog, kinds, p, info, tp=UP_TP)}


def _up_senders(ranks: int, links: set[tuple[int, int]]) -> list[int]:
    return sorted({a for a, _ in links})


def up_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the cross-rack RDMA hops run slow; their senders finish last in every dp op."""
    cl: Cluster = m[""]["cluster"]
    links = _up_cross(ranks, cl.kinds)
    senders = _up_senders(ranks, links)
    rest = [r for r in range(ranks) if r not in senders]
    hostnames = _up_hostnames(ranks)
    slow_bw = _link_bw(cl, lambda op, r, q, tr: tr == 1 and (r, q) in links)
    ok_bw = _link_bw(cl, lambda op, r, q, tr: tr == 1 and (r, q) not in links)
    hccs_bw = _link_bw(cl, lambda op, r, q, tr: tr == 0)
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    wait = coll_wait_us(m)
    dp_op = [
        float(np.median((op.end - op.start) / 1000))
        for st in cl.steps
        for op in st.ops
        if op.kind.kind == "dp"
    ]
    transit_s: list[float] = []
    transit_o: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if op.kind.kind != "dp":
                continue
            t = np.where(op.kind.transport == 1, op.link_ms, 0.0).sum(axis=1)
            transit_s.extend(t[senders].tolist())
            transit_o.extend(t[rest].tolist())
    healthy = _resimulate(dataclasses.replace(cl, perturb=default_perturb(ranks)), cl.program)
    base = _sim_breakdown(healthy)
    dp_op_h = [
        float(np.median((op.end - op.start) / 1000))
        for st in healthy.steps
        for op in st.ops
        if op.kind.kind == "dp"
    ]
    a, b, save = _saving(step, base["step_us"])
    vic = victims_by_wait(wait, senders)
    hops = sorted(
        {(r // RANKS_PER_NODE, q // RANKS_PER_NODE) for r, q in links}, key=lambda x: x[0]
    )
    nums = {
        "servers": _up_nodes(ranks),
        "racks": len(UP_RACKS),
        "cross_rack_hops": [list(h) for h in hops],
        "slow_rdma_links": len(links),
        "cross_rack_rdma_bandwidth_gbps": round(float(np.median(slow_bw)), 3),
        "in_rack_rdma_bandwidth_gbps": round(float(np.median(ok_bw)), 3),
        "hccs_bandwidth_gbps": round(float(np.median(hccs_bw)), 3),
        "cross_rack_bandwidth_ratio": round(float(np.median(slow_bw) / np.median(ok_bw)), 3),
        "sender_rdma_transit_ms_per_dp_op": round(float(np.median(transit_s)), 3),
        "other_rdma_transit_ms_per_dp_op": round(float(np.median(transit_o)), 3),
        "dp_allreduce_us_median": _r(float(np.median(dp_op))),
        "dp_allreduce_us_median_healthy": _r(float(np.median(dp_op_h))),
        "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
        "culprit_wait_us_per_step": _r(float(wait[senders].mean())),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_step_us": _r(a),
        "median_step_us_healthy_uplink": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(senders, "communication", ["slow-link-rdma"], "bandwidth_gbps", nums)
    rc = root_cause(
        "slow_link",
        "communication",
        "group",
        ranks=senders,
        transport="RDMA",
        victims=vic,
        not_slow=not_slow_sample(ranks, senders, vic),
        metrics={
            "cross_rack_rdma_bandwidth_gbps": nums["cross_rack_rdma_bandwidth_gbps"],
            "in_rack_rdma_bandwidth_gbps": nums["in_rack_rdma_bandwidth_gbps"],
            "victim_wait_us_per_step": nums["victim_wait_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    racks = {
        UP_RACKS[i]: [hostnames[n] for n in range(_up_nodes(ranks)) if _up_rack(ranks, n) == i]
        for i in range(len(UP_RACKS))
    }
    return _with_evidence(
        key,
        rc,
        culprit_ranks=senders,
        racks=racks,
        hostnames={str(n): h for n, h in hostnames.items()},
        cross_rack_hops=[[hostnames[a], hostnames[b]] for a, b in hops],
        cross_rack_server_pairs=[list(h) for h in hops],
        slow_links=sorted([a, b] for a, b in links),
        transport="RDMA",
        every_rail=True,
        in_rack_rdma_normal=True,
        hccs_normal=True,
        receivers_normal=True,
        same_every_step=True,
        wait_op="hcom_allReduce_ (dp group)",
        file="communication_matrix.json (the RDMA links from the r07 rack's second server to "
        "the r08 rack's first and from r08's second to r07's first at ~35% of the other RDMA "
        "links, on all 8 rails; the in-rack hops and HCCS normal), communication.json (dp "
        "hcom_allReduce_: Transit Time of the senders on those hops ~2.5x the others', the "
        "others' Wait Time) and the hostnames of the rank folders (gz-r07-npu01/02, "
        "gz-r08-npu01/02)",
        devices_normal=True,
        host_normal=True,
        cause="the two racks' leaf switches are joined by an oversubscribed spine uplink: the "
        "data-parallel ring's two hops that cross racks (server 1 -> 2 and 3 -> 0) run at ~35% "
        "of the link bandwidth on all 8 rails, while the same NICs reach their in-rack neighbour "
        "at full speed; every gradient all-reduce lasts as long as those hops, their senders "
        "(ranks " + f"{senders[0]}-{senders[RANKS_PER_NODE - 1]}, {senders[RANKS_PER_NODE]}-"
        f"{senders[-1]}" + ") finish last and the others wait",
        fix="have the network team check the spine uplinks / ECMP hashing between the two leaf "
        "switches (oversubscription ratio, congested or down ports, PFC pauses on the spine); "
        "meanwhile ask the scheduler for servers under one leaf switch (or a rail-optimised "
        "placement) so the ring does not cross the spine",
    )


# ---------------------------------------------------------------- registry
DEV32_SCENARIOS = (
    ScenarioSpec(
        "pp-no-warmup-serial",
        "PP 4 x DP 4, 8 micro-batches, a pipeline loop without warm-up: each micro-batch's forward "
        "and backward pass through all 4 stages before the next starts; every stage waits in "
        "hcom_receive_ ~3/4 of the step (Bubble), every stage alike; job-level",
        16,
        4,
        ps_plans,
        ps_answer,
        min_ranks=8,
        rank_multiple=4,
    ),
    ScenarioSpec(
        "scattered-4card-nodes",
        "TP 4 x DP 4 placed on 4 servers x 4 cards (devices 0-3) instead of 2 full servers: every "
        "dp gradient all-reduce crosses 4 servers over RDMA (~3x the bytes per card), exposed on "
        "every rank alike; job-level, bandwidth normal",
        16,
        4,
        sc_plans,
        sc_answer,
        min_ranks=8,
        rank_multiple=4,
    ),
    ScenarioSpec(
        "hier-allreduce-leaders",
        "DP 16 on 2 servers with a hand-written hierarchical gradient sync: per bucket "
        "hcom_reduce_ to local rank 0, an hcom_allReduce_ between ranks 0 and 8 only (the whole "
        "bucket over one RoCE port), hcom_broadcast_ back; the other 14 ranks wait for 0 and 8",
        16,
        4,
        hl_plans,
        hl_answer,
        min_ranks=16,
        rank_multiple=RANKS_PER_NODE,
    ),
    ScenarioSpec(
        "cross-rack-uplink",
        "4 servers in 2 racks (TP 8 x DP 4): the oversubscribed spine uplink slows the dp ring's "
        "two cross-rack hops (servers 1 -> 2, 3 -> 0, all rails) to ~35%; their senders (ranks "
        "8-15, 24-31) finish every gradient all-reduce last, the others wait; in-rack RDMA and "
        "HCCS normal",
        32,
        4,
        up_plans,
        up_answer,
        min_ranks=32,
        max_ranks=32,
        rank_multiple=32,
    ),
)
DEV32_KINDS = tuple(s.name for s in DEV32_SCENARIOS)


__all__ = ["DEV32_KINDS", "DEV32_SCENARIOS"]
