"""Twentieth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev22.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the dp-group hcom_allGather_ records at the
start of every step in communication.json with the optimizer settings of profiler_metadata.json,
the ConcatD rows of kernel_details.csv / op_statistic.csv with their growing Input Shapes, the
DeviceInfo of the raw PROF_*/device_*/info.json.* with the Block Dim of kernel_details.csv on one
node, and the hcom_send_ / hcom_receive_ bandwidth of one pipeline pair in communication.json /
communication_matrix.json):

- ``distopt-param-gather-exposed``: Megatron's distributed optimizer (``--use-distributed-optimizer``)
  without ``--overlap-param-gather``: the gradients are reduce-scattered during the backward
  (overlapped), but the updated bf16 parameters are all-gathered on the data-parallel group in 4
  buckets of 96 MB at the start of every step, before the first forward kernel, with nothing to
  overlap them. Job-level (every rank alike), links normal.
- ``concat-in-loop``: an auxiliary-loss helper builds a [4096, 1024] fp32 tensor with
  ``out = torch.cat([out, chunk])`` in a Python loop of 256 iterations of 16 rows, every step on
  every rank: 256 ConcatD kernels per step whose inputs grow from [16,1024] to [4080,1024] (the
  copying grows quadratically), each a few to ~30 µs, with the device idle between them while the
  host runs the loop (~40 µs of Python and dispatch per iteration). Job-level.
- ``lower-sku-node``: node 1 (ranks 8-15) is fitted with a lower card SKU (20 AI Cores / 40 vector
  cores in its DeviceInfo instead of 24 / 48): every cube kernel runs with Block Dim 20 and takes
  ~1.2x, every vector kernel ~1.15-1.2x as long there; the clock is the same (1800 MHz); node 0
  waits for node 1 in every collective. Culprit: node 1 (its devices); host and links normal.
- ``pp-p2p-degraded-link``: PP 2 x DP 8 (stage 0 = node 0, stage 1 = node 1, each rank sending its
  activations to / receiving its gradients from the same device of the other node over RDMA); the
  RoCE link between ranks 3 and 11 runs at 30% of its bandwidth (both directions), so every
  hcom_send_ / hcom_receive_ of that pair takes ~3x as long; ranks 3 and 11 fall behind and the
  other ranks of each stage wait for them in the data-parallel all-reduce. Culprit: that link.
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
    make_group_kind,
)
from advisor_chat.synth.scenarios import (
    BASE_COMM_US,
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
from advisor_chat.synth.scenarios_dev4 import _resimulate, _sim_breakdown
from advisor_chat.synth.scenarios_dev10 import _baseline, _share
from advisor_chat.synth.scenarios_dev19 import _kernel_us, _med, _saving
from advisor_chat.synth.scenarios_ext import (
    _layer_kernels,
    _opt_kernels,
    coll_wait_us,
    not_slow_sample,
    root_cause,
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


# ---------------------------------------------------------------- distopt-param-gather-exposed
DO_BUCKETS = LAYERS  # one parameter bucket per layer
DO_MB = 96.0  # bf16 parameters of one bucket (the same volume as its gradients)
DO_TAG = "param_ag"
DO_FWD_PER_LAYER = 10  # forward kernels of one layer (transformer())


def _do_kinds(ranks: int) -> dict[str, GroupKind]:
    """World plus the data-parallel group (every rank: pure DP)."""
    kinds = group_kinds(ranks, 1)
    kinds["dp"] = make_group_kind("dp", "dp", [list(range(ranks))], ranks, BASE_COMM_US, 2)
    return kinds


def do_program(overlap: bool = False) -> list[Item]:
    """transformer() with gradient reduce-scatters and the parameter all-gathers of each step.

    Without ``overlap`` the 4 bucket all-gathers run back to back before the first forward kernel;
    with it (``--overlap-param-gather``) only the first one does, each other one runs during the
    previous layer's forward.
    """
    base = transformer(layers=LAYERS)
    body: list[Item] = []
    for it in base:
        if isinstance(it, Collective) and it.op_type == "hcom_allReduce_" and it.size_mb == 96.0:
            it = dataclasses.replace(it, op_type="hcom_reduceScatter_", group="dp", tag="grad_rs")
        body.append(it)
    gathers = [
        Collective("hcom_allGather_", "dp", DO_MB, tag=DO_TAG, overlap=0) for _ in range(DO_BUCKETS)
    ]
    if not overlap:
        return [*gathers, *body]
    out: list[Item] = [gathers[0]]
    nk = 0
    layer = 0
    for it in body:
        if isinstance(it, Kernel) and nk % DO_FWD_PER_LAYER == 0 and layer < DO_BUCKETS - 1:
            out.append(dataclasses.replace(gathers[layer + 1], overlap=DO_FWD_PER_LAYER))
            layer += 1
        out.append(it)
        if isinstance(it, Kernel):
            nk += 1
    return out


def do_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(
        use_distributed_optimizer=True,
        overlap_grad_reduce=True,
        overlap_param_gather=False,
        bf16=True,
    )
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(do_program(), _do_kinds(ranks), default_perturb(ranks), info)}


def do_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 4 parameter all-gathers at every step's start, nothing overlapping them."""
    cl: Cluster = m[""]["cluster"]
    ag = _op_us(cl, lambda c: c.tag == DO_TAG)
    rs = _op_us(cl, lambda c: c.tag == "grad_rs")
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    comp = col(m, "computing_us")
    # device idle from the step start to the first forward kernel
    lead = np.stack(
        [
            (st.k_start[:, 0] - np.array([st.bounds(r)[0] for r in range(cl.ranks)])) / 1000
            for st in cl.steps
        ],
        axis=1,
    )
    base = _baseline(cl, do_program(overlap=True))
    a, b, save = _saving(step, base["step_us"])
    per_op = []
    for st in cl.steps:
        for op in st.ops:
            if op.item.tag == DO_TAG:
                per_op.append((op.end - op.start) / 1000)
    nums = {
        "param_allgathers_per_step": DO_BUCKETS,
        "param_allgather_mb": DO_MB,
        "param_allgather_us_median": _med(np.concatenate(per_op)),
        "param_allgather_us_per_step": _med(ag),
        "param_allgather_share_of_step": _share(ag, step),
        "idle_before_first_forward_us_per_step": _med(lead),
        "grad_reduce_scatters_per_step": sum(
            1 for it in cl.program if isinstance(it, Collective) and it.tag == "grad_rs"
        ),
        "grad_reduce_scatter_us_per_step": _med(rs),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_overlapped": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        [],
        "communication",
        ["comm-not-overlapped"],
        "comm_not_overlapped_us",
        nums,
    )
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "param_allgather_us_per_step": nums["param_allgather_us_per_step"],
            "median_comm_not_overlapped_us_per_step": nums[
                "median_comm_not_overlapped_us_per_step"
            ],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        collective="hcom_allGather_",
        group="dp (all ranks)",
        payload_mb=DO_MB,
        per_step=DO_BUCKETS,
        position="at the start of every step, back to back before the first forward kernel "
        "(RmsNorm), the device idle meanwhile",
        reduce_scatter="hcom_reduceScatter_ of the gradients during the backward (overlapped)",
        settings="profiler_metadata.json distributed_args: use_distributed_optimizer true, "
        "overlap_grad_reduce true, overlap_param_gather false",
        file="communication.json (4 hcom_allGather_ of 96 MB per step on the dp group, Transit "
        "Size) and trace_view.json (HCCL lane: the gathers at the step start, nothing on the compute "
        "stream until they end), step_trace_time.csv (Communication(Not Overlapped) on every rank)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause="Megatron's distributed optimizer runs without --overlap-param-gather: after the "
        "optimizer updates its shard, the bf16 parameters are all-gathered on the data-parallel "
        f"group ({DO_BUCKETS} buckets of {DO_MB:.0f} MB) at the start of every step, before the "
        "first forward kernel, with nothing to overlap them, on every rank alike",
        fix="turn on --overlap-param-gather (with --overlap-grad-reduce and the distributed "
        "optimizer) so each bucket's all-gather runs during the previous layers' forward; smaller "
        "buckets (--bucket-size) start the overlap earlier",
    )


# ---------------------------------------------------------------- concat-in-loop
CL_ITERS = 256  # loop iterations (one torch.cat each)
CL_ROWS = 16  # rows appended per iteration
CL_COLS = 1024
CL_BASE_US = 2.5  # a ConcatD's fixed cost
CL_US_PER_MB = 1000 / 1200  # µs per MB moved (read + write) at ~1.2 TB/s
CL_HOST_US = 40.0  # Python loop iteration + torch.cat dispatch on the host
CL_JITTER = 0.08
CL_TAG = "cat_loop"


def _cl_cat(i: int) -> Kernel:
    """The ConcatD of iteration ``i`` (0-based): [16*i, 1024] + [16, 1024] fp32 (the first copies one)."""
    rows = CL_ROWS * i
    moved_mb = 2 * CL_ROWS * (i + 1) * CL_COLS * 4 / 1e6
    ins = f"{rows},{CL_COLS};{CL_ROWS},{CL_COLS}" if i else f"{CL_ROWS},{CL_COLS}"
    return dataclasses.replace(
        _k(
            "aclnnCat_ConcatD_ConcatD",
            "ConcatD",
            "AI_VECTOR_CORE",
            ins,
            f"{rows + CL_ROWS},{CL_COLS}",
            round(CL_BASE_US + moved_mb * CL_US_PER_MB, 2),
            "aclnnCat",
            CL_TAG,
            bd=40,
            dt="DT_FLOAT",
        ),
        in_dtypes="DT_FLOAT;DT_FLOAT" if i else "DT_FLOAT",
        in_formats="ND;ND" if i else "ND",
    )


def _cl_once() -> Kernel:
    """The fix: one torch.cat of the 256 chunks at the end (one ConcatD, 256 inputs)."""
    moved_mb = 2 * CL_ROWS * CL_ITERS * CL_COLS * 4 / 1e6
    return _k(
        "aclnnCat_ConcatD_ConcatD",
        "ConcatD",
        "AI_VECTOR_CORE",
        ";".join([f"{CL_ROWS},{CL_COLS}"] * 8),
        f"{CL_ROWS * CL_ITERS},{CL_COLS}",
        round(CL_BASE_US + moved_mb * CL_US_PER_MB, 2),
        "aclnnCat",
        CL_TAG,
        bd=40,
        dt="DT_FLOAT",
    )


def cl_program(loop: bool = True) -> list[Item]:
    """transformer(); the loss helper's concatenation right before the backward."""
    base = transformer(layers=LAYERS)
    j = next(i for i, it in enumerate(base) if isinstance(it, Kernel) and it.tag == "mlp_down_dx")
    cats: list[Item] = [_cl_cat(i) for i in range(CL_ITERS)] if loop else [_cl_once()]
    return [*base[:j], *cats, *base[j:]]


def _cl_first(prog: list[Item]) -> int:
    ks = [it for it in prog if isinstance(it, Kernel)]
    return next(j for j, k in enumerate(ks) if k.tag == CL_TAG)


def cl_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = cl_program()
    j0 = _cl_first(prog)
    ks = [it for it in prog if isinstance(it, Kernel)]
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 2201)
    for si in range(steps):
        gaps: dict[int, dict[int, float]] = {}
        for r in range(ranks):
            f = 1.0 + CL_JITTER * np.clip(rng.standard_normal(CL_ITERS), -2, 2)
            at: dict[int, float] = {}
            for i in range(1, CL_ITERS):
                # the host needs CL_HOST_US per iteration; the device idles for what the previous
                # (queued) ConcatD does not cover
                idle = CL_HOST_US * float(f[i]) - ks[j0 + i - 1].dur_us
                if idle > 1.0:
                    at[j0 + i] = round(idle, 1)
            gaps[r] = at
        p.step_host_gaps[si] = gaps
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def cl_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: 256 growing ConcatD per step on every rank, the device idle between them."""
    cl: Cluster = m[""]["cluster"]
    j0 = _cl_first(cl.program)
    j1 = j0 + CL_ITERS - 1
    cat = _kernel_us(cl, lambda k: k.tag == CL_TAG)
    region = np.stack(
        [(st.k_start[:, j1] + st.k_dur[:, j1] - st.k_start[:, j0]) / 1000 for st in cl.steps],
        axis=1,
    )
    idle = region - cat
    step = col(m, "step_us")
    free = col(m, "free_us")
    comp = col(m, "computing_us")
    base = _baseline(cl, cl_program(loop=False))
    a, b, save = _saving(step, base["step_us"])
    durs = np.array([k.dur_us for k in cl.kernels if k.tag == CL_TAG])
    nums = {
        "concat_kernels_per_step": CL_ITERS,
        "concat_rows_per_iteration": CL_ROWS,
        "final_shape": f"{CL_ROWS * CL_ITERS},{CL_COLS}",
        "concat_device_us_per_step": _med(cat),
        "concat_us_min": _r(float(durs.min())),
        "concat_us_max": _r(float(durs.max())),
        "concat_idle_us_per_step": _med(idle),
        "concat_region_us_per_step": _med(region),
        "concat_region_share_of_step": _share(region, step),
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_free_share": _share(free, step),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_one_cat": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "scheduling", ["tiny-kernels-fusion", "host-dispatch-bound"], "free_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        metrics={
            "concat_kernels_per_step": CL_ITERS,
            "concat_region_us_per_step": nums["concat_region_us_per_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operator="ConcatD",
        api="aclnnCat",
        per_step=CL_ITERS,
        first_input_shape=f"{CL_ROWS},{CL_COLS}",
        last_input_shapes=f"{CL_ROWS * (CL_ITERS - 1)},{CL_COLS};{CL_ROWS},{CL_COLS}",
        dtype="DT_FLOAT",
        position="after the forward, right before the backward's first MatMulV2",
        file="kernel_details.csv (256 ConcatD rows per step, the first input growing by 16 rows "
        "each: [16,1024] ... [4080,1024]) and op_statistic.csv (ConcatD count = 256 x steps), "
        "trace_view.json (the device idle between them, each launch right before its kernel) and "
        "step_trace_time.csv (Free on every rank)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
        cause=f"an auxiliary-loss helper builds a [{CL_ROWS * CL_ITERS}, {CL_COLS}] fp32 tensor with "
        f"out = torch.cat([out, chunk]) in a Python loop ({CL_ITERS} iterations of {CL_ROWS} rows) "
        "every step on every rank: each iteration launches a ConcatD that copies everything "
        "gathered so far (quadratic copying), and the device idles between these tiny kernels "
        "while the host runs the loop",
        fix="collect the chunks in a Python list and call torch.cat once after the loop (or "
        "preallocate the output and write slices / use a single vectorized op), so one ConcatD "
        "replaces the 256",
    )


# ---------------------------------------------------------------- lower-sku-node
LS_NODE = 1
LS_AIC, LS_AIV = 20, 40  # the lower SKU (e.g. Ascend 910B4)
OK_AIC, OK_AIV = 24, 48  # the job's cards (e.g. Ascend 910B2)
LS_VEC_MEM = 1.15  # vector kernels not capped by the core count: lower memory bandwidth


def _ls_ranks(ranks: int) -> list[int]:
    node = min(LS_NODE, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def _ls_kernel(k: Kernel) -> Kernel:
    """The kernel on the lower SKU: block dim capped at its core count, longer."""
    if k.core == "AI_VECTOR_CORE":
        bd = min(k.block_dim, LS_AIV)
        f = k.block_dim / bd if k.block_dim > LS_AIV else LS_VEC_MEM
    else:
        bd = min(k.block_dim, LS_AIC)
        f = k.block_dim / bd if k.block_dim > LS_AIC else 1.0
    return dataclasses.replace(k, block_dim=bd, dur_us=round(k.dur_us * f, 1))


def _device_info(aic: int, aiv: int) -> dict[str, Any]:
    return {
        "ctrl_cpu_id": "ARMv8_Cortex_A55",
        "ctrl_cpu_core_num": 1,
        "ctrl_cpu_endian_little": 1,
        "ts_cpu_core_num": 1,
        "ai_cpu_core_num": 6,
        "ai_core_num": aic,
        "ai_cpu_core_id": 2,
        "ai_core_id": 0,
        "aicpu_occupy_bitmap": 252,
        "ctrl_cpu": "0",
        "ai_cpu": "2,3,4,5,6,7",
        "aiv_num": aiv,
        "hwts_frequency": "50",
        "aic_frequency": "1800",
        "aiv_frequency": "1800",
    }


def ls_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    prog = transformer(layers=LAYERS)
    ks = [it for it in prog if isinstance(it, Kernel)]
    slow = [_ls_kernel(k) for k in ks]
    bad = _ls_ranks(ranks)
    for r in bad:
        for j in range(len(ks)):
            p.kernel_swap[(-1, r, j)] = slow[j]
    info = _info(CANN8, 1, ranks)
    info.device_info = {
        r: _device_info(LS_AIC, LS_AIV) if r in bad else _device_info(OK_AIC, OK_AIV)
        for r in range(ranks)
    }
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def ls_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1's cards have fewer cores, every kernel slower; node 0 waits."""
    cl: Cluster = m[""]["cluster"]
    bad = _ls_ranks(ranks)
    good = [r for r in range(ranks) if r not in bad]
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    mm = _kernel_us(cl, lambda k: k.op_type == "MatMulV2")
    vk = _kernel_us(cl, lambda k: k.core == "AI_VECTOR_CORE")
    base = _baseline(cl)
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "culprit_node": bad[0] // RANKS_PER_NODE,
        "culprit_ranks": bad,
        "culprit_ai_core_num": LS_AIC,
        "others_ai_core_num": OK_AIC,
        "culprit_aiv_num": LS_AIV,
        "others_aiv_num": OK_AIV,
        "culprit_matmul_block_dim": LS_AIC,
        "others_matmul_block_dim": OK_AIC,
        "culprit_computing_us_per_step": _r(float(comp[bad].mean())),
        "others_computing_us_per_step": _r(float(comp[good].mean())),
        "computing_ratio_culprit_vs_others": round(float(comp[bad].mean() / comp[good].mean()), 3),
        "matmul_ratio_culprit_vs_others": round(float(mm[bad].mean() / mm[good].mean()), 3),
        "vector_ratio_culprit_vs_others": round(float(vk[bad].mean() / vk[good].mean()), 3),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "median_step_us": _r(a),
        "median_step_us_same_sku": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        bad, "compute", ["heterogeneous-devices", "compute-straggler-hidden"], "computing_us", nums
    )
    vic = victims_by_wait(wait, bad)
    rc = root_cause(
        "slow_group",
        "compute",
        "group",
        ranks=bad,
        victims=vic,
        not_slow=not_slow_sample(ranks, bad, vic),
        metrics={
            "culprit_ai_core_num": LS_AIC,
            "computing_ratio_culprit_vs_others": nums["computing_ratio_culprit_vs_others"],
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
        ai_core_num=LS_AIC,
        ai_core_num_others=OK_AIC,
        aiv_num=LS_AIV,
        aiv_num_others=OK_AIV,
        block_dim=LS_AIC,
        block_dim_others=OK_AIC,
        file="PROF_*/device_*/info.json.* of every rank folder (DeviceInfo ai_core_num 20 / aiv_num "
        "40 on node 1, 24 / 48 on node 0; aic_frequency 1800 on both) and kernel_details.csv (Block "
        "Dim 20 instead of 24 for every MatMulV2 / FlashAttentionScore there, every operator type "
        "slower), communication.json (node 0 waits)",
        aicore_mhz_same=True,
        every_op_type_slower=True,
        onset=False,
        host_normal=True,
        links_normal=True,
        every_step=True,
        cause=f"node {bad[0] // RANKS_PER_NODE} (ranks {bad[0]}-{bad[-1]}) is fitted with a lower "
        f"card SKU: {LS_AIC} AI Cores / {LS_AIV} vector cores per device instead of {OK_AIC} / "
        f"{OK_AIV} (same clock), so every cube kernel runs on {LS_AIC} blocks and takes ~1.2x, every "
        "vector kernel ~1.15-1.2x as long there; the other node waits for it in every collective",
        fix="put the job on identical cards (swap node 1's cards / move the job to a node with the "
        "same SKU, check npu-smi info for the chip model); if it must stay, give that node's ranks "
        "less work (uneven data split) so the others do not wait",
    )


# ---------------------------------------------------------------- pp-p2p-degraded-link
PL_MICRO = 4
PL_LAYERS = 2  # layers per stage
PL_ACT_MB = 16.0  # activation / gradient of one micro-batch
PL_DP_MB = 64.0  # the stage's gradient all-reduce (data-parallel group, inside the node)
PL_LOCAL = 3  # the degraded link: this device of node 0 <-> the same device of node 1
PL_FACTOR = 0.3


def _pl_link(ranks: int) -> tuple[int, int]:
    half = ranks // 2
    return PL_LOCAL % half, PL_LOCAL % half + half


def pl_program() -> list[Item]:
    """1F1B-like step of one stage of a 2-stage pipeline.

    Per micro-batch: the forward, the activation hand-off, the backward, the gradient hand-off;
    then the stage's gradient all-reduce, the gradient-norm all-reduce and the optimizer.
    """
    fwd, bwd = _layer_kernels()
    prog: list[Item] = []
    for _ in range(PL_MICRO):
        prog += fwd * PL_LAYERS
        prog.append(Collective("hcom_send_", "pp", PL_ACT_MB, peer_op="hcom_receive_", tag="act"))
        prog += bwd * PL_LAYERS
        prog.append(Collective("hcom_receive_", "pp", PL_ACT_MB, peer_op="hcom_send_", tag="grad"))
    prog.append(Collective("hcom_allReduce_", "dp", PL_DP_MB, tag="dp_grad"))
    prog.append(Collective("hcom_allReduce_", "pp", 0.004, tag="grad_norm"))
    prog += _opt_kernels()
    return prog


def pl_kinds(ranks: int) -> dict[str, GroupKind]:
    """DP group = one stage (one node); PP groups = pairs (r, r + N/2) across the nodes."""
    half = ranks // 2
    return {
        "dp": make_group_kind(
            "dp", "dp", [list(range(half)), list(range(half, ranks))], ranks, BASE_COMM_US, 2
        ),
        "pp": make_group_kind(
            "pp", "pp", [[r, r + half] for r in range(half)], ranks, BASE_COMM_US, 3
        ),
    }


def pl_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    a, b = _pl_link(ranks)
    p.link_factor[(a, b)] = PL_FACTOR
    p.link_factor[(b, a)] = PL_FACTOR
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(pipeline_model_parallel_size=2, data_parallel_size=ranks // 2)
    info.user_metadata["distributed_args"] = dist
    return {"": Plan(pl_program(), pl_kinds(ranks), p, info)}


def _p2p_bw(cl: Cluster, pick: Any) -> dict[tuple[int, int], float]:
    """Mean RDMA bandwidth (GB/s) per (rank, peer) of the point-to-point ops ``pick`` accepts."""
    acc: dict[tuple[int, int], list[float]] = {}
    for st in cl.steps:
        for op in st.ops:
            if not pick(op.item):
                continue
            k = op.kind
            for r in range(cl.ranks):
                for j in range(k.peer.shape[1]):
                    if k.transport[r, j] == 1 and op.link_ms[r, j] > 0:
                        acc.setdefault((r, int(k.peer[r, j])), []).append(
                            float(op.link_mb[r, j] / op.link_ms[r, j])
                        )
    return {lk: float(np.mean(v)) for lk, v in acc.items()}


def pl_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one pipeline pair's link at 30%; its p2p ops ~3x; the stages wait for it."""
    cl: Cluster = m[""]["cluster"]
    a_r, b_r = _pl_link(ranks)
    ends = [a_r, b_r]
    others = [r for r in range(ranks) if r not in ends]
    p2p = _op_us(cl, lambda c: bool(c.peer_op))
    bub = col(m, "bubble_us")
    step = col(m, "step_us")
    wait = coll_wait_us(m)
    bw = _p2p_bw(cl, lambda c: bool(c.peer_op))
    slow_bw = bw[(a_r, b_r)]
    peers = [v for lk, v in bw.items() if a_r not in lk and b_r not in lk]
    per_op: list[float] = []
    per_op_ok: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if op.item.peer_op:
                d = (op.end - op.start) / 1000
                per_op.append(float(d[a_r]))
                per_op_ok.extend(float(d[r]) for r in others)
    healthy = dataclasses.replace(cl, perturb=default_perturb(ranks))
    base = _sim_breakdown(_resimulate(healthy, cl.program))
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "link_src_rank": a_r,
        "link_dst_rank": b_r,
        "transport": "RDMA",
        "slow_link_bandwidth_gbps": round(slow_bw, 4),
        "median_peer_bandwidth_gbps": round(float(np.median(peers)), 4),
        "bandwidth_ratio": round(slow_bw / float(np.median(peers)), 3),
        "p2p_ops_per_step": 2 * PL_MICRO,
        "p2p_mb": PL_ACT_MB,
        "slow_pair_p2p_us_median": _r(float(np.median(per_op))),
        "other_pairs_p2p_us_median": _r(float(np.median(per_op_ok))),
        "slow_pair_p2p_us_per_step": _med(p2p[ends]),
        "other_pairs_p2p_us_per_step": _med(p2p[others]),
        "slow_pair_bubble_us_per_step": _med(bub[ends]),
        "other_pairs_bubble_us_per_step": _med(bub[others]),
        "victim_wait_us_per_step": _r(float(wait[others].mean())),
        "endpoint_wait_us_per_step": _r(float(wait[ends].mean())),
        "median_step_us": _r(a),
        "median_step_us_link_ok": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(
        [],
        "communication",
        ["slow-link-rdma", "pipeline-bubbles"],
        "bandwidth_gbps",
        nums,
        slow_link={"src_rank": a_r, "dst_rank": b_r, "transport": "RDMA"},
    )
    vic = victims_by_wait(wait, ends)
    rc = root_cause(
        "slow_link",
        "communication",
        "link",
        link=(a_r, b_r),
        transport="RDMA",
        victims=vic,
        not_slow=not_slow_sample(ranks, ends, vic),
        metrics={
            "link_endpoint_ranks": ends,
            "slow_link_bandwidth_gbps": nums["slow_link_bandwidth_gbps"],
            "median_peer_bandwidth_gbps": nums["median_peer_bandwidth_gbps"],
            "bandwidth_ratio": nums["bandwidth_ratio"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        link=[a_r, b_r],
        transport="RDMA",
        p2p_ops=["hcom_send_", "hcom_receive_"],
        stages=[list(range(ranks // 2)), list(range(ranks // 2, ranks))],
        pipeline_stages=2,
        micro_batches=PL_MICRO,
        file="communication.json of ranks 3 and 11 (hcom_send_ / hcom_receive_: RDMA Bandwidth "
        "~3.6 GB/s vs ~12 GB/s on the other pairs, Transit Time ~3x) and "
        "communication_matrix.json (the 3 <-> 11 link), step_trace_time.csv (Bubble / receive time "
        "of ranks 3 and 11; the other ranks wait in the stage's hcom_allReduce_)",
        collectives_normal=True,
        devices_normal=True,
        host_normal=True,
        every_step=True,
        cause=f"the RoCE link between rank {a_r} (stage 0, node 0) and rank {b_r} (stage 1, node 1) "
        f"runs at ~{PL_FACTOR:.0%} of its bandwidth: every activation / gradient hand-off of that "
        "pipeline pair (hcom_send_ / hcom_receive_) takes ~3x as long, so those two ranks fall "
        "behind and the other ranks of each stage wait for them in the data-parallel all-reduce",
        fix=f"check and repair that link (hccn_tool -i {a_r % RANKS_PER_NODE} -link / -net_health "
        "/ -optical on both nodes: port speed, optics / cable, error counters, switch port), then "
        "re-run; the devices and the other links are fine",
    )


# ---------------------------------------------------------------- registry
DEV22_SCENARIOS = (
    ScenarioSpec(
        "distopt-param-gather-exposed",
        "distributed optimizer without --overlap-param-gather: 4 x 96 MB parameter hcom_allGather_ "
        "on the dp group at the start of every step, before the first forward kernel, nothing "
        "overlapping them (gradients reduce-scattered, overlapped); job-level, links normal",
        16,
        4,
        do_plans,
        do_answer,
    ),
    ScenarioSpec(
        "concat-in-loop",
        "torch.cat in a Python loop: 256 ConcatD per step on every rank with growing inputs "
        "([16,1024] ... [4080,1024] fp32), the device idle between them while the host loops; "
        "job-level",
        16,
        4,
        cl_plans,
        cl_answer,
    ),
    ScenarioSpec(
        "lower-sku-node",
        "node 1 fitted with a lower card SKU (20 AI Cores / 40 vector cores in its DeviceInfo vs "
        "24 / 48, same clock): Block Dim 20, every kernel ~1.15-1.2x longer there; node 0 waits",
        16,
        4,
        ls_plans,
        ls_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "pp-p2p-degraded-link",
        "PP 2 x DP 8 across two nodes: the RoCE link of pipeline pair 3 <-> 11 at 30% bandwidth, its "
        "hcom_send_ / hcom_receive_ ~3x longer; the other ranks of each stage wait for ranks 3 / 11",
        16,
        4,
        pl_plans,
        pl_answer,
        min_ranks=16,
        rank_multiple=16,
    ),
)
DEV22_KINDS = tuple(s.name for s in DEV22_SCENARIOS)


__all__ = ["DEV22_KINDS", "DEV22_SCENARIOS"]
