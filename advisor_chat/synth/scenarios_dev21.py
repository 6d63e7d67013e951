"""Nineteenth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev21.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the Bubble / p2p columns of
step_trace_time.csv on every stage with the pipeline settings of profiler_metadata.json, the Python
host lane and the MEMCPY_ASYNC tasks of trace_view.json on every rank, the per-step Free of one rank
in step_trace_time.csv with its launch calls, and the missing HCCL communicator of one group in
communication.json / profiler_metadata.json):

- ``vpp-few-microbatches``: an interleaved pipeline (8 ranks: 4 stages x DP 2, 2 virtual stages of
  4 layers each) run with only 4 micro-batches per step (global batch 8 = micro-batch 1 x DP 2 x 4):
  the fill and drain of the schedule leave every stage idle for 2 x 3 of its 2 x 8 + 2 x 3 chunk
  passes (~27% of the step ideally, ~35% not computing with the p2p transfers), waiting in
  hcom_receive_ (Bubble) or for the other stages in the step's last collective, on every stage
  alike. Job-level (no stage stands out); links normal.
- ``isin-cpu-fallback``: ``torch.isin(input_ids, allowed_ids)`` in the loss-mask code has no NPU
  kernel in this torch_npu build and falls back to the host CPU: every step, on every rank, right
  before the backward, the ids are copied to the host (a device-to-host MEMCPY_ASYNC and a stream
  synchronize), ``aten::isin`` runs ~9 ms on the CPU while the device idles, and the mask is copied
  back (host-to-device). Job-level (every rank alike); no AI_CPU / kernel_details row for it.
- ``host-swap-rank``: the host process of rank 13 swaps (host memory over-committed): its launch
  calls stall on page faults by an amount that grows and then shrinks over the capture (~0.6 ms to
  ~25 ms a step), so its Free rises and falls step by step while the other ranks wait for it in the
  collectives. Culprit: that rank (its host); devices and links normal.
- ``gloo-dp-group``: TP 8 inside each node, DP 2 across the nodes; the data-parallel group of TP
  rank 3 (ranks 3 and 11) was created with the gloo backend, so its gradient all-reduce (24 MB) runs
  over host TCP sockets: the gradients are copied to the host, ``gloo:all_reduce`` takes ~22 ms while
  both devices idle, and copied back; there is no HCCL communicator / hcom_allReduce_ for that group,
  while the other seven DP groups reduce over RDMA in ~2 ms. The 14 other ranks wait for ranks 3 and
  11 in the next world collective. Culprit: that group (ranks 3 and 11).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    MIB,
    RANKS_PER_NODE,
    Cluster,
    Collective,
    GroupKind,
    HostOp,
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
from advisor_chat.synth.scenarios_dev4 import _resimulate, _sim_breakdown
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_dev19 import _med, _saving
from advisor_chat.synth.scenarios_ext import (
    coll_wait_us,
    not_slow_sample,
    root_cause,
    step_ids,
    victims_by_wait,
)

LAYERS = 4


def _op_us(cl: Cluster, pick: Any) -> np.ndarray:
    """[ranks, steps] summed duration (µs) of the collectives ``pick(collective)`` accepts."""
    out = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if pick(op.item):
                out[:, si] += (op.end - op.start) / 1000
    return out


def _idle_before_us(cl: Cluster, j: int) -> np.ndarray:
    """[ranks, steps] device idle (µs) right before kernel ``j`` (after kernel ``j - 1``)."""
    return np.stack(
        [(st.k_start[:, j] - st.k_start[:, j - 1] - st.k_dur[:, j - 1]) / 1000 for st in cl.steps],
        axis=1,
    )


def _kidx(prog: list[Item], pick: Any) -> int:
    """Kernel index (position among the program's kernels) of the first kernel ``pick`` accepts."""
    ks = [it for it in prog if isinstance(it, Kernel)]
    return next(j for j, k in enumerate(ks) if pick(k))


# ---------------------------------------------------------------- vpp-few-microbatches
VP_P = 4  # pipeline stages
VP_V = 2  # virtual stages (model chunks) per stage
VP_M = 4  # micro-batches per step: global batch 8 / (micro-batch 1 x DP 2)
VP_M_FIX = 16  # the counterfactual: 4x the micro-batches per step (same schedule)
VP_LPC = 4  # transformer layers per model chunk (32 layers)
VP_ACT_MB = round(2 * 4096 * H / 1e6, 3)  # one micro-batch's activation [1, 4096, 4096] bf16
VP_DP_MB = 192.0  # the stage's gradient all-reduce (one bucket after the pipeline)
VP_PAIRS = ((0, 1), (1, 2), (2, 3), (0, 3))


def _vp_units(m: int) -> list[tuple[dict[int, str], list[tuple[int, int]]]]:
    """The schedule on a grid of chunk-op units: each busy stage's op and the transfers after it.

    Per unit: the op of each busy stage (F / B) and the activation / gradient transfers (src stage,
    dst stage) at its end.

    Stage s runs its v*m forward chunk-ops at units s .. s+vm-1 and its backward chunk-ops at
    vm+2(p-1)-s .. 2vm+2(p-1)-s-1: 2(p-1) idle units per stage (the interleaved schedule's bubble,
    (p-1)/(vm+p-1) of the step).
    """
    p, vm = VP_P, VP_V * m
    out: list[tuple[dict[int, str], list[tuple[int, int]]]] = []
    for t in range(2 * vm + 2 * (p - 1)):
        ops: dict[int, str] = {}
        xfer: list[tuple[int, int]] = []
        for st in range(p):
            kf = t - st
            kb = t - (vm + 2 * p - 2 - st)
            if 0 <= kf < vm:
                ops[st] = "F"
                if st < p - 1:
                    xfer.append((st, st + 1))
                elif kf + p < vm:
                    xfer.append((p - 1, 0))  # to the next model chunk on the first stage
            elif 0 <= kb < vm:
                ops[st] = "B"
                if st > 0:
                    xfer.append((st, st - 1))
                elif kb + p < vm:
                    xfer.append((0, p - 1))
        out.append((ops, xfer))
    return out


def _vp_pair_kind(a: int, b: int) -> str:
    lo, hi = min(a, b), max(a, b)
    return f"pp{lo}{hi}"


def vp_program(m: int) -> tuple[list[Item], list[tuple[dict[int, str], list[int], list[int]]]]:
    """The units' kernels and transfers, then the stage's gradient all-reduce and the optimizer.

    Each unit has a forward and a backward block of kernels; a stage runs one of them or none.

    Returns:
        The program and, per unit, (stage ops, forward block kernel indices, backward block ones).
    """
    one = transformer(layers=1, grad=False)
    ks = [it for it in one if isinstance(it, Kernel)]
    fwd, bwd, opt = ks[:10] * VP_LPC, ks[10:22] * VP_LPC, one
    prog: list[Item] = []
    units: list[tuple[dict[int, str], list[int], list[int]]] = []
    nk = 0
    for ops, xfer in _vp_units(m):
        f_idx = list(range(nk, nk + len(fwd)))
        b_idx = list(range(nk + len(fwd), nk + len(fwd) + len(bwd)))
        nk += len(fwd) + len(bwd)
        prog += fwd + bwd
        for src, dst in xfer:
            kind = _vp_pair_kind(src, dst)
            if src < dst:
                prog.append(Collective("hcom_send_", kind, VP_ACT_MB, peer_op="hcom_receive_"))
            else:
                prog.append(Collective("hcom_receive_", kind, VP_ACT_MB, peer_op="hcom_send_"))
        units.append((ops, f_idx, b_idx))
    j = next(
        i for i, it in enumerate(opt) if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    prog += [Collective("hcom_allReduce_", "dp", VP_DP_MB, tag="dp_grad"), *opt[j:]]
    return prog, units


def _vp_dp(ranks: int) -> int:
    return ranks // VP_P


def _vp_stage(ranks: int, r: int) -> int:
    return r // _vp_dp(ranks)


def vp_kinds(ranks: int) -> tuple[dict[str, GroupKind], dict[int, set[str]]]:
    """World, DP (within a stage) and one kind per pair of neighbouring stages.

    The other stages' ranks are alone in a pair kind (not written); returns the kinds and, per rank,
    the kinds it is not part of.
    """
    dp = _vp_dp(ranks)
    stage = [list(range(s * dp, (s + 1) * dp)) for s in range(VP_P)]
    kinds = {
        "world": make_group_kind(
            "world", "default_group", [list(range(ranks))], ranks, BASE_COMM_US, 0
        ),
        "dp": make_group_kind("dp", "dp", stage, ranks, BASE_COMM_US, 2),
    }
    hidden: dict[int, set[str]] = {}
    for n, (a, b) in enumerate(VP_PAIRS):
        kind = _vp_pair_kind(a, b)
        members = [[stage[a][d], stage[b][d]] for d in range(dp)]
        for st in range(VP_P):
            if st not in (a, b):
                members += [[r] for r in stage[st]]
                for r in stage[st]:
                    hidden.setdefault(r, set()).add(kind)
        kinds[kind] = make_group_kind(kind, "pp", members, ranks, BASE_COMM_US, 3 + n)
    return kinds, hidden


def _vp_perturb(ranks: int, units: list[tuple[dict[int, str], list[int], list[int]]]) -> Any:
    p = default_perturb(ranks)
    _kinds, hidden = vp_kinds(ranks)
    p.hidden_groups = hidden
    for r in range(ranks):
        st = _vp_stage(ranks, r)
        skip: set[int] = set()
        for ops, f_idx, b_idx in units:
            op = ops.get(st)
            if op != "F":
                skip.update(f_idx)
            if op != "B":
                skip.update(b_idx)
        p.skip_kernels[r] = skip
    return p


def vp_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog, units = vp_program(VP_M)
    kinds, _hidden = vp_kinds(ranks)
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(
        pipeline_model_parallel_size=VP_P,
        virtual_pipeline_model_parallel_size=VP_V,
        data_parallel_size=_vp_dp(ranks),
        num_layers=VP_P * VP_V * VP_LPC,
        micro_batch_size=1,
        global_batch_size=VP_M * _vp_dp(ranks),
    )
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(prog, kinds, _vp_perturb(ranks, units), info)}


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


def vp_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every stage idles 2(p-1) of 2(vm+p-1) chunk-op units.

    4x the micro-batches per step (re-simulated) cuts the time per micro-batch.
    """
    from advisor_chat.synth.model import simulate

    cl: Cluster = m[""]["cluster"]
    dp = _vp_dp(ranks)
    bub = col(m, "bubble_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    notov = col(m, "comm_not_overlapped_us")
    free = col(m, "free_us")
    prog16, units16 = vp_program(VP_M_FIX)
    kinds16, _hidden = vp_kinds(ranks)
    fix = simulate(
        prog16,
        kinds16,
        _vp_perturb(ranks, units16),
        ranks,
        steps,
        cl.seed,
        cl.steps[0].step_id,
        cl.t0_ns,
    )
    step16 = _sim_breakdown(fix)["step_us"]
    bub16 = _recv_us(fix)
    a = float(np.median(step))
    b = float(np.median(step16))
    per_mb, per_mb16 = a / VP_M, b / VP_M_FIX
    idle = step - comp  # everything a stage does not compute: bubble, p2p, grad sync, host
    by_stage = [
        _share(idle[s * dp : (s + 1) * dp], step[s * dp : (s + 1) * dp]) for s in range(VP_P)
    ]
    vm = VP_V * VP_M
    nums = {
        "pipeline_stages": VP_P,
        "virtual_stages": VP_V,
        "micro_batches_per_step": VP_M,
        "data_parallel_size": dp,
        "global_batch_size": VP_M * dp,
        "forward_chunks_per_stage_per_step": vm,
        "ideal_bubble_fraction": round((VP_P - 1) / (vm + VP_P - 1), 4),
        "bubble_us_per_step": _med(bub.mean(axis=0)),
        "bubble_share": _share(bub, step),
        "idle_share_by_stage": by_stage,
        "not_computing_share": _share(idle, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_step_us": _r(a),
        "time_per_micro_batch_us": _r(per_mb),
        "micro_batches_per_step_fixed": VP_M_FIX,
        "median_step_us_fixed": _r(b),
        "time_per_micro_batch_us_fixed": _r(per_mb16),
        "bubble_share_fixed": _share(bub16, step16),
        "saving_us_per_micro_batch": _r(per_mb - per_mb16),
        "saving_share_per_micro_batch": round((per_mb - per_mb16) / per_mb, 4),
        "throughput_gain": round(per_mb / per_mb16 - 1, 4),
    }
    key = _key([], "communication", ["pipeline-bubbles"], "bubble_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "pipeline_imbalance",
        "communication",
        metrics={
            "bubble_share": nums["bubble_share"],
            "not_computing_share": nums["not_computing_share"],
            "saving_share_per_micro_batch": nums["saving_share_per_micro_batch"],
        },
    )
    return _with_evidence(
        key,
        rc,
        pipeline_stages=VP_P,
        virtual_stages=VP_V,
        micro_batches=VP_M,
        stages=[list(range(s * dp, (s + 1) * dp)) for s in range(VP_P)],
        p2p_ops=["hcom_send_", "hcom_receive_"],
        file="step_trace_time.csv (Bubble: hcom_receive_ time, a large share on every stage "
        "alike), kernel_details.csv (8 forward chunk passes per stage and step: 32 "
        "FlashAttentionScore rows) and profiler_metadata.json (pipeline 4 x virtual 2, "
        "global_batch_size 8 = micro-batch 1 x DP 2 x 4 micro-batches)",
        all_ranks=True,
        every_stage=True,
        slow_stage=False,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause=f"an interleaved pipeline ({VP_P} stages x {VP_V} virtual stages) run with only "
        f"{VP_M} micro-batches per step (global batch {VP_M * dp} = micro-batch 1 x DP {dp} x "
        f"{VP_M}): the warm-up and cool-down of the schedule leave every stage idle for "
        f"2x{VP_P - 1} of its chunk passes, ~{(VP_P - 1) / (vm + VP_P - 1):.0%} of the step, "
        "on every stage alike",
        fix="run many more micro-batches per step (raise the global batch size / gradient "
        f"accumulation to >= {VP_M_FIX}, i.e. several times the pipeline depth), or use fewer "
        "pipeline stages (more data / tensor parallelism) so the fill and drain are amortised",
    )


# ---------------------------------------------------------------- isin-cpu-fallback
IS_IDS = "8,4096"  # input_ids of a micro-batch (int64)
IS_ALLOWED = 32000  # ids of the allowed vocabulary
IS_D2H_BYTES = 8 * 4096 * 8
IS_H2D_BYTES = 8 * 4096  # bool mask
IS_D2H_US = 24.0
IS_H2D_US = 6.0
IS_CPU_US = 9000.0  # aten::isin on the host CPU (sort-based, 32k test elements) + fallback path
IS_HOST_US = 140.0  # sync return, Python, the next launch
IS_JITTER = 0.04


def _is_pos(prog: list[Item]) -> int:
    """The backward's first kernel: the loss mask is computed right before it."""
    return _kidx(prog, lambda k: k.tag == "mlp_down_dx")


def is_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=LAYERS)
    j = _is_pos(prog)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 2102)
    hop = HostOp(
        ("aten::isin",),
        f"{IS_IDS};{IS_ALLOWED}",
        "long int;long int",
        IS_D2H_BYTES,
        IS_D2H_US,
        IS_H2D_BYTES,
        IS_H2D_US,
    )
    for r in range(ranks):
        p.host_ops[r] = {j: hop}
    for si in range(steps):
        f = 1.0 + IS_JITTER * np.clip(rng.standard_normal(ranks), -2, 2)
        p.step_host_gaps[si] = {
            r: {j: round(IS_D2H_US + IS_CPU_US * float(f[r]) + IS_H2D_US + IS_HOST_US, 1)}
            for r in range(ranks)
        }
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def is_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank idles ~9 ms a step while aten::isin runs on the host CPU."""
    cl: Cluster = m[""]["cluster"]
    j = _is_pos(cl.program)
    idle = _idle_before_us(cl, j)
    others = [q for q in range(1, len(cl.kernels)) if q != j]
    gaps = np.stack([_idle_before_us(cl, q) for q in others], axis=2)  # [R, S, K]
    free = col(m, "free_us")
    step = col(m, "step_us")
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    cpu = np.array(
        [[cl.perturb.step_host_gaps[si][r][j] for si in range(steps)] for r in range(ranks)]
    ) - (IS_D2H_US + IS_H2D_US + IS_HOST_US)
    nums = {
        "fallbacks_per_step": 1,
        "host_op_us_median": _med(cpu),
        "device_idle_us_per_step": _med(idle),
        "idle_before_other_kernels_us_median": _med(gaps),
        "d2h_bytes": IS_D2H_BYTES,
        "h2d_bytes": IS_H2D_BYTES,
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "median_step_us": _r(a),
        "median_step_us_on_device": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        [], "scheduling", ["aicpu-operators", "sync-stream-launch-blocking"], "free_us", nums
    )
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "device_idle_us_per_step": nums["device_idle_us_per_step"],
            "free_share": nums["median_free_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        host_op="aten::isin",
        input_dims=f"{IS_IDS};{IS_ALLOWED}",
        dtype="int64",
        copies=["device to host", "host to device"],
        sync_api="aclrtSynchronizeStream",
        per_step=1,
        position="after the forward, right before the backward's first MatMulV2 (the loss mask)",
        file="trace_view.json (Python thread: aten::isin of ~9 ms with aten::to / "
        "aclrtSynchronizeStream and no kernel launch inside; compute stream: a device-to-host and a "
        "host-to-device MEMCPY_ASYNC around the idle) and step_trace_time.csv (Free on every rank); "
        "no kernel_details.csv / op_statistic.csv row for isin",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        kernels_normal=True,
        cause="torch.isin(input_ids, allowed_ids) in the loss-mask code has no NPU kernel in this "
        "torch_npu build and falls back to the CPU: every step on every rank the ids are copied to "
        "the host (stream synchronize), aten::isin runs ~9 ms on the CPU while the device idles, "
        "and the mask is copied back",
        fix="keep the op on the NPU: compute the mask with a lookup table on the device "
        "(allowed_mask[input_ids] with a bool tensor of the vocabulary size, or an eq/any "
        "comparison), upgrade torch_npu to a build with an isin kernel, or build the mask in the "
        "dataloader on the CPU beforehand",
    )


# ---------------------------------------------------------------- host-swap-rank
SW_PEAK_US = 25000.0  # launch stall per step at the worst of the swapping
SW_FLOOR_US = 600.0
SW_SHARE = 0.3  # share of the launches that fault


def _sw_rank(ranks: int) -> int:
    return 13 if ranks > 13 else ranks - 1


def _sw_amp(steps: int) -> list[float]:
    """Stall (µs) per step: grows to SW_PEAK_US in the middle of the capture, then shrinks."""
    c = (steps - 1) / 2
    w = max(steps / 4, 1.0)
    return [SW_FLOOR_US + SW_PEAK_US * float(np.exp(-(((si - c) / w) ** 2))) for si in range(steps)]


def sw_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=LAYERS)
    nk = sum(1 for it in prog if isinstance(it, Kernel))
    p = default_perturb(ranks)
    bad = _sw_rank(ranks)
    rng = np.random.default_rng(seed + 2103)
    for si, amp in enumerate(_sw_amp(steps)):
        n = max(1, int(SW_SHARE * (nk - 1)))
        js = sorted(int(x) for x in rng.choice(np.arange(1, nk), size=n, replace=False))
        w = rng.exponential(1.0, size=n)
        w = w / w.sum()
        p.step_kernel_stalls[si] = {
            bad: {j: round(amp * float(x), 1) for j, x in zip(js, w, strict=True)}
        }
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def sw_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one rank's launches stall by a growing then shrinking amount; others wait."""
    cl: Cluster = m[""]["cluster"]
    bad = _sw_rank(ranks)
    good = [r for r in range(ranks) if r != bad]
    ids = step_ids(m)
    free = col(m, "free_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    api = np.stack([st.k_api_dur.max(axis=1) / 1000 for st in cl.steps], axis=1)  # [R, S]
    api_med = np.stack([np.median(st.k_api_dur, axis=1) / 1000 for st in cl.steps], axis=1)
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    mean_a = float(np.median(step.mean(axis=1)))
    mean_b = float(np.median(base["step_us"].mean(axis=1)))
    fb = free[bad]
    peak = int(np.argmax(fb))
    nums = {
        "culprit_rank": bad,
        "culprit_free_us_per_step": [_r(x) for x in fb],
        "culprit_free_us_first_step": _r(fb[0]),
        "culprit_free_us_peak": _r(fb[peak]),
        "culprit_free_us_last_step": _r(fb[-1]),
        "peak_step": ids[peak],
        "culprit_free_us_mean": _r(float(fb.mean())),
        "others_free_us_median": _med(free[good]),
        "culprit_longest_launch_us_peak_step": _r(float(api[bad, peak])),
        "culprit_launch_us_median": _med(api_med[bad]),
        "others_launch_us_median": _med(api_med[good]),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "mean_step_us": _r(mean_a),
        "median_step_us": _r(a),
        "mean_step_us_no_swap": _r(mean_b),
        "saving_us_per_step_average": _r(mean_a - mean_b),
        "saving_share_of_mean_step": round((mean_a - mean_b) / mean_a, 4),
    }
    del b, save
    key = _key([bad], "scheduling", ["host-dispatch-bound", "cpu-core-binding"], "free_us", nums)
    rc = _rank_rc(
        m,
        ranks,
        bad,
        "host_stall",
        "scheduling",
        metrics={
            "culprit_free_us_peak": nums["culprit_free_us_peak"],
            "saving_us_per_step_average": nums["saving_us_per_step_average"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_rank=bad,
        peak_step=ids[peak],
        first_step=ids[0],
        last_step=ids[-1],
        pattern="grows then shrinks (not monotonic, not periodic)",
        file="step_trace_time.csv (Free of that rank per step: rises then falls) and trace_view.json "
        "(CANN lane of that rank: AscendCL launch calls of every operator type stalled, up to "
        "several ms, more of them in the middle steps)",
        every_op_type=True,
        devices_normal=True,
        links_normal=True,
        onset=False,
        cause=f"the host process of rank {bad} swaps (host memory over-committed on that server): "
        "its launch calls stall on page faults by an amount that grows and then shrinks over the "
        "capture, so its device idles between kernels and the other ranks wait for it in every "
        "collective",
        fix="stop the swapping on that server: check free -m / vmstat (si/so) and what else holds "
        "memory there, lower the host memory of the job (fewer dataloader workers / prefetch, no "
        "huge pinned buffers, smaller CPU caches), disable swap (swapoff -a) or add memory",
    )


# ---------------------------------------------------------------- gloo-dp-group
GL_TP = 8
GL_LOCAL = 3  # the DP group of this TP rank runs on gloo
GL_MB = 24.0  # bf16 gradients of the rank's TP shard, all-reduced once after the backward
GL_TAG = "dp_grad"
GL_TCP_GBPS = 1.1  # host TCP throughput of gloo's ring between the two servers
GL_COPY_GBPS = 20.0  # device<->host copies of the gradient buffer
GL_HOST_US = 300.0
GL_JITTER = 0.05


def _gl_bad(ranks: int) -> list[int]:
    return list(range(GL_LOCAL, ranks, GL_TP))


def gl_program() -> list[Item]:
    """TP 8 transformer; the gradients all-reduced once on the DP group before the optimizer."""
    prog = transformer(layers=LAYERS, tp=GL_TP, grad=False)
    j = next(
        i
        for i, it in enumerate(prog)
        if isinstance(it, Kernel) and it.op_type == "ForeachMulScalar"
    )
    return [*prog[:j], Collective("hcom_allReduce_", "dp", GL_MB, tag=GL_TAG), *prog[j:]]


def _gl_kinds(ranks: int, bad: list[int]) -> dict[str, GroupKind]:
    """TP / DP groups; the gloo group's ranks each alone in the HCCL DP kind (no HCCL op there)."""
    kinds = group_kinds(ranks, GL_TP)
    dp = kinds["dp"]
    members: list[list[int]] = []
    for mem in dp.members:
        if set(mem) == set(bad):
            members += [[r] for r in mem]
        else:
            members.append(mem)
    kinds["dp"] = make_group_kind("dp", "dp", members, ranks, BASE_COMM_US, 2)
    return kinds


def _gl_pos(prog: list[Item]) -> int:
    return _kidx(prog, lambda k: k.op_type == "ForeachMulScalar")


def gl_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = gl_program()
    bad = _gl_bad(ranks)
    j = _gl_pos(prog)
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 2104)
    nbytes = int(GL_MB * 1e6)
    copy_us = round(GL_MB / GL_COPY_GBPS * 1000, 1)
    n = len(bad)
    tcp_us = GL_MB * 2 * (n - 1) / n / GL_TCP_GBPS * 1000
    hop = HostOp(("c10d::allreduce_", "gloo:all_reduce"), "", "", nbytes, copy_us, nbytes, copy_us)
    for r in bad:
        p.host_ops[r] = {j: hop}
        p.hidden_groups[r] = {"dp"}
    for si in range(steps):
        f = 1.0 + GL_JITTER * float(np.clip(rng.standard_normal(), -2, 2))  # one ring, one time
        gap = round(2 * copy_us + tcp_us * f + GL_HOST_US, 1)
        p.step_host_gaps[si] = {r: {j: gap} for r in bad}
    info = _info(CANN8, GL_TP, ranks)
    return {"": Plan(prog, _gl_kinds(ranks, bad), p, info, tp=GL_TP)}


def gl_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the gloo group's all-reduce runs on the host; everyone else waits for it."""
    cl: Cluster = m[""]["cluster"]
    bad = _gl_bad(ranks)
    good = [r for r in range(ranks) if r not in bad]
    j = _gl_pos(cl.program)
    idle = _idle_before_us(cl, j)
    step = col(m, "step_us")
    free = col(m, "free_us")
    wait = coll_wait_us(m)
    dp_us = _op_us(cl, lambda c: c.tag == GL_TAG)
    world_wait = np.zeros((cl.ranks, len(cl.steps)))
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if op.kind.kind == "world":
                world_wait[:, si] += op.sync_ns / 1e3
    healthy = dataclasses.replace(cl, perturb=default_perturb(ranks))
    bcl = _resimulate(healthy, cl.program, group_kinds(ranks, GL_TP))
    base = _sim_breakdown(bcl)
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "culprit_ranks": bad,
        "tp_size": GL_TP,
        "dp_size": ranks // GL_TP,
        "grad_allreduce_mb": GL_MB,
        "grad_allreduce_mb_on_wire": round(GL_MB * MIB, 3),
        "gloo_allreduce_us_median": _med(idle[bad]),
        "hccl_dp_allreduce_us_median_other_groups": _med(dp_us[good]),
        "culprit_free_us_per_step": _med(free[bad]),
        "others_free_us_per_step": _med(free[good]),
        "victim_wait_in_world_collective_us_per_step": _med(world_wait[good]),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "median_step_us": _r(a),
        "median_step_us_hccl": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(bad, "communication", ["hccl-config-mismatch", "slow-link-rdma"], "free_us", nums)
    vic = victims_by_wait(wait, bad)
    rc = root_cause(
        "slow_group",
        "communication",
        "group",
        ranks=bad,
        victims=vic,
        not_slow=not_slow_sample(ranks, bad, vic),
        metrics={
            "gloo_allreduce_us_median": nums["gloo_allreduce_us_median"],
            "victim_wait_us_per_step": _r(float(wait[vic].mean())) if vic else 0.0,
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        culprit_ranks=bad,
        group="dp",
        tp_rank=GL_LOCAL,
        nodes=sorted({r // RANKS_PER_NODE for r in bad}),
        backend="gloo",
        host_ops=["c10d::allreduce_", "gloo:all_reduce"],
        copies=["device to host", "host to device"],
        payload_mb=GL_MB,
        missing="no hcom_allReduce_ of the dp group in communication.json / kernel_details.csv of "
        "those ranks and no dp communicator in their profiler_metadata.json parallel_group_info "
        "(the other dp groups have one per step, over RDMA)",
        file="communication.json and profiler_metadata.json of those ranks (no HCCL dp op / "
        "communicator), trace_view.json (Python thread: c10d::allreduce_ > gloo:all_reduce of "
        "~22 ms; compute stream: device-to-host and host-to-device MEMCPY_ASYNC of the gradients "
        "around the idle) and step_trace_time.csv (Free on those ranks, Communication waits on the "
        "others)",
        links_normal=True,
        devices_normal=True,
        every_step=True,
        cause=f"the data-parallel group of TP rank {GL_LOCAL} (ranks "
        f"{', '.join(str(r) for r in bad)}) was created with the gloo backend, so its gradient "
        "all-reduce runs over host TCP sockets: the gradients are copied to the host, "
        "gloo:all_reduce takes ~22 ms while both devices idle, and they are copied back; the other "
        "ranks wait for them in the next world collective",
        fix="create that group with the HCCL backend like the other DP groups (new_group(ranks, "
        "backend='hccl') / no backend='gloo' for device tensors) so the all-reduce runs on the NPUs "
        "over RDMA; keep gloo groups for CPU-side objects only",
    )


# ---------------------------------------------------------------- registry
DEV21_SCENARIOS = (
    ScenarioSpec(
        "vpp-few-microbatches",
        "interleaved pipeline (4 stages x 2 virtual) with only 4 micro-batches per step: every "
        "stage idles in the fill and drain of the schedule (~27% of the step in hcom_receive_ / "
        "waits), every stage alike; job-level",
        8,
        3,
        vp_plans,
        vp_answer,
        min_ranks=8,
        rank_multiple=4,
    ),
    ScenarioSpec(
        "isin-cpu-fallback",
        "torch.isin in the loss mask falls back to the host CPU: every step on every rank a "
        "device-to-host copy + stream sync, ~9 ms of aten::isin on the CPU with the device idle, "
        "and a copy back (MEMCPY_ASYNC); job-level",
        16,
        4,
        is_plans,
        is_answer,
    ),
    ScenarioSpec(
        "host-swap-rank",
        "the host of rank 13 swaps: its launch calls stall on page faults by an amount that grows "
        "then shrinks over the capture (Free rises and falls); the others wait in the collectives",
        16,
        8,
        sw_plans,
        sw_answer,
    ),
    ScenarioSpec(
        "gloo-dp-group",
        "TP 8 x DP 2: the DP group of TP rank 3 (ranks 3, 11) created with gloo: its gradient "
        "all-reduce runs over host TCP (~22 ms, copies to and from the host), no HCCL op for it; "
        "the other ranks wait for those two",
        16,
        4,
        gl_plans,
        gl_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
)
DEV21_KINDS = tuple(s.name for s in DEV21_SCENARIOS)


__all__ = ["DEV21_KINDS", "DEV21_SCENARIOS"]
