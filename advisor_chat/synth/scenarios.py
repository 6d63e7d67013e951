"""Named scenario presets: workload, planted fault and the answer key.

Each builder returns a `Plan` (program, groups, perturbations, installation info) and a function
that derives the answer key from the per-rank breakdown the writer measured, so every number in
``answer_key.json`` comes from what was written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    RANKS_PER_NODE,
    Cluster,
    Collective,
    GroupKind,
    Item,
    Kernel,
    Perturb,
    default_perturb,
    make_group_kind,
)
from advisor_chat.synth.writer import RunInfo

T0_NS = 1_736_408_880_000_000_000  # 2025-01-09 07:48 UTC, the era of the real sample
BASE_COMM_US = 1_736_408_538_306_028  # communicator creation clock (16-digit µs) in HCCL names

CANN7 = RunInfo(cann_version="7.0.1", torch_npu_version="2.1.0")
CANN8 = RunInfo(cann_version="8.0.RC2", torch_npu_version="2.1.0.post6")
# Extra env a real run can carry: ENV_VARIABLES has a fixed key list (torch_npu _utils.py), so
# HCCL settings are recorded as user metadata (prof.add_metadata_json) under this key.
HCCL_ENV_KEY = "hccl_env"


def _k(
    name: str,
    op_type: str,
    core: str,
    ins: str,
    outs: str,
    dur: float,
    api: str,
    tag: str = "",
    bd: int = 24,
    dt: str = "DT_BF16",
) -> Kernel:
    n_in = ins.count(";") + 1
    return Kernel(
        name=name,
        op_type=op_type,
        core=core,
        in_shapes=ins,
        in_dtypes=";".join([dt] * n_in),
        in_formats=";".join(["ND"] * n_in),
        out_shapes=outs,
        out_dtypes=dt,
        out_formats="ND",
        dur_us=dur,
        block_dim=bd,
        api=api,
        tag=tag,
    )


H, S, B = 4096, 4096, 1  # hidden, sequence, micro-batch


def matmul(tag: str, m: int, k: int, n: int, dur: float) -> Kernel:
    """MatMulV2 kernel with ``[m,k] x [n,k]^T``."""
    return _k(
        "aclnnMatmul_MatMulCommon_MatMulV2",
        "MatMulV2",
        "AI_CORE",
        f"{m},{k};{n},{k}",
        f"{m},{n}",
        dur,
        "aclnnMatmul",
        tag,
    )


def vec(name: str, op_type: str, dur: float, shape: str = f"{S},{H}", api: str = "") -> Kernel:
    """Vector kernel."""
    return _k(
        f"aclnn{op_type}_{op_type}_{op_type}",
        op_type,
        "AI_VECTOR_CORE",
        shape,
        shape,
        dur,
        api or f"aclnn{op_type}",
        bd=40,
    )


def transformer(
    layers: int = 4,
    tp: int = 1,
    scale: float = 1.0,
    tp_mb: float = 32.0,
    grad_mb: float = 96.0,
    grad_overlap: int = 6,
    mc2: bool = False,
    final_mb: float = 4.0,
    grad: bool = True,
) -> list[Item]:
    """A Megatron-like step: forward, backward with gradient all-reduce, optimizer.

    Args:
        layers: transformer layers.
        tp: tensor-parallel size; >1 adds row-parallel all-reduces in the 'tp' group after the
            attention-output and MLP-down MatMuls (forward) and after the input-grad MatMuls
            (backward). With ``mc2`` the forward ones are fused MatmulAllReduce kernels.
        scale: multiplier on every kernel duration.
        tp_mb: TP all-reduce payload (MB).
        grad_mb: gradient all-reduce payload per layer in the 'dp' (or 'world') group.
        grad_overlap: kernels of the next layer's backward that run during the gradient all-reduce.
        mc2: fuse forward TP MatMul + AllReduce into MatmulAllReduce (CANN 7 style).
        final_mb: payload of the step-closing all-reduce on the world group.
        grad: emit the per-layer gradient all-reduce (False when the dp group has one rank).
    """
    h = H // tp
    f = 4 * H // tp
    dp_group = "dp" if tp > 1 else "world"
    prog: list[Item] = []

    def tp_ar(mm: Kernel) -> list[Item]:
        if tp <= 1:
            return [mm]
        if mc2:
            fused = _k(
                "aclnnMatmulAllReduce_MatmulAllReduce_MatmulAllReduce",
                "MatmulAllReduce",
                "MIX_AIC",
                mm.in_shapes,
                mm.out_shapes,
                mm.dur_us * 1.35,
                "aclnnMatmulAllReduce",
                mm.tag + "_mc2",
            )
            return [fused]
        return [mm, Collective("hcom_allReduce_", "tp", tp_mb)]

    for _ in range(layers):
        prog += [vec("rmsnorm", "RmsNorm", 60 * scale)]
        prog += [matmul("qkv", S, H, 3 * h, 900 * scale / 1.0)]
        prog += [
            _k(
                "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
                "FlashAttentionScore",
                "MIX_AIC",
                f"{B},{S},{h};{B},{S},{h};{B},{S},{h}",
                f"{B},{S},{h}",
                1100 * scale,
                "aclnnFlashAttentionScore",
            )
        ]
        prog += tp_ar(matmul("attn_out", S, h, H, 320 * scale))
        prog += [vec("add", "Add", 30 * scale), vec("rmsnorm", "RmsNorm", 60 * scale)]
        prog += [matmul("mlp_up", S, H, 2 * f, 1500 * scale)]
        prog += [vec("swiglu", "SwiGlu", 90 * scale, f"{S},{2 * f}")]
        prog += tp_ar(matmul("mlp_down", S, f, H, 1200 * scale))
        prog += [vec("add", "Add", 30 * scale)]
    for li in range(layers):
        bwd: list[Item] = [
            matmul("mlp_down_dx", S, H, f, 1200 * scale),
            matmul("mlp_down_dw", H, S, f, 1250 * scale),
            vec("swiglu_grad", "SwiGluGrad", 140 * scale, f"{S},{2 * f}"),
        ]
        bwd += tp_ar(matmul("mlp_up_dx", S, 2 * f, H, 1500 * scale))
        bwd += [
            matmul("mlp_up_dw", 2 * f, S, H, 1550 * scale),
            vec("rmsnorm_grad", "RmsNormGrad", 95 * scale),
            matmul("attn_out_dx", S, H, h, 320 * scale),
            matmul("attn_out_dw", H, S, h, 330 * scale),
            _k(
                "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
                "FlashAttentionScoreGrad",
                "MIX_AIC",
                f"{B},{S},{h};{B},{S},{h};{B},{S},{h};{B},{S},{h}",
                f"{B},{S},{h}",
                2300 * scale,
                "aclnnFlashAttentionScoreGrad",
            ),
            matmul("qkv_dx", S, 3 * h, H, 900 * scale),
        ]
        if tp > 1:
            bwd.append(Collective("hcom_allReduce_", "tp", tp_mb))
        bwd += [
            matmul("qkv_dw", 3 * h, S, H, 920 * scale),
            vec("rmsnorm_grad", "RmsNormGrad", 95 * scale),
        ]
        prog += bwd
        ov = grad_overlap if li < layers - 1 else 0
        if grad:
            prog.append(Collective("hcom_allReduce_", dp_group, grad_mb, overlap=ov))
    prog += [
        _k(
            "aclnnForeachMulScalarV2_ForeachMulScalarV2_ForeachMulScalar",
            "ForeachMulScalar",
            "AI_VECTOR_CORE",
            f"{H},{H};{H}",
            f"{H},{H};{H}",
            300 * scale,
            "aclnnForeachMulScalar",
            bd=48,
        ),
        _k(
            "aclnnForeachAddListV2_ForeachAddListV2_ForeachAddList",
            "ForeachAddList",
            "AI_VECTOR_CORE",
            f"{H},{H};{H}",
            f"{H},{H};{H}",
            650 * scale,
            "aclnnForeachAddList",
            bd=48,
        ),
        Collective("hcom_allReduce_", "world", final_mb),
        Collective("hcom_allGather_", "world", final_mb / 2),
        _k(
            "aclnnForeachAddListV2_ForeachAddListV2_ForeachAddList",
            "ForeachAddList",
            "AI_VECTOR_CORE",
            f"{H},{H};{H}",
            f"{H},{H};{H}",
            640 * scale,
            "aclnnForeachAddList",
            bd=48,
        ),
    ]
    return prog


def group_kinds(ranks: int, tp: int) -> dict[str, GroupKind]:
    """World (+ tp and dp when tp > 1) communication groups, Megatron layout (tp innermost)."""
    kinds = {
        "world": make_group_kind(
            "world", "default_group", [list(range(ranks))], ranks, BASE_COMM_US, 0
        )
    }
    if tp > 1:
        tp_groups = [list(range(i, i + tp)) for i in range(0, ranks, tp)]
        dp_groups = [list(range(j, ranks, tp)) for j in range(tp)]
        kinds["tp"] = make_group_kind("tp", "tp", tp_groups, ranks, BASE_COMM_US, 1)
        kinds["dp"] = make_group_kind("dp", "dp", dp_groups, ranks, BASE_COMM_US, 2)
    return kinds


@dataclass
class Plan:
    """What a scenario wants simulated and written for one profile."""

    program: list[Item]
    kinds: dict[str, GroupKind]
    perturb: Perturb
    info: RunInfo
    tp: int = 1


@dataclass
class ScenarioSpec:
    """A named preset.

    Attributes:
        name: scenario id (CLI argument).
        description: one line.
        default_ranks / default_steps / min_ranks: sizes.
        plans: (ranks, steps, seed) -> {subdir: Plan}; subdir "" = the output folder itself.
        answer: (ranks, steps, measured) -> answer-key fields; ``measured[subdir][rank]`` is the
            list of per-step breakdown dicts the writer returned, plus ``"cluster"`` objects.
        root_cause: (ranks, steps, measured) -> the ``root_cause`` object of the answer key
            (diagnosis contract), or None when ``answer`` already returns it.
        max_ranks: largest world size the scenario accepts (None = the generator's limit).
        rank_multiple: world size must be a multiple of this (e.g. 2 for two pipeline stages).
    """

    name: str
    description: str
    default_ranks: int
    default_steps: int
    plans: Callable[[int, int, int], dict[str, Plan]]
    answer: Callable[[int, int, dict[str, Any]], dict[str, Any]]
    min_ranks: int = 2
    notes: list[str] = field(default_factory=list)
    root_cause: Callable[[int, int, dict[str, Any]], dict[str, Any]] | None = None
    max_ranks: int | None = None
    rank_multiple: int = 1


def _info(base: RunInfo, tp: int, ranks: int, extra_env: dict[str, str] | None = None) -> RunInfo:
    dist = {
        "tensor_model_parallel_size": tp,
        "pipeline_model_parallel_size": 1,
        "data_parallel_size": ranks // tp,
        "context_parallel_size": 1,
        "expert_model_parallel_size": 1,
        "sequence_parallel": False,
        "rank": 0,
        "world_size": ranks,
    }
    hccl = {"HCCL_CONNECT_TIMEOUT": "", "HCCL_EXEC_TIMEOUT": "", "HCCL_BUFFSIZE": ""}
    return RunInfo(
        cann_version=base.cann_version,
        torch_npu_version=base.torch_npu_version,
        env=extra_env,
        user_metadata={"distributed_args": dist, HCCL_ENV_KEY: hccl},
    )


def _tp_for(ranks: int, want: int = 8) -> int:
    tp = min(want, max(2, ranks // 2))
    while ranks % tp:
        tp -= 1
    return max(tp, 1)


# ---------------------------------------------------------------- per-step helpers on measured data
def col(measured: dict[str, Any], key: str, sub: str = "") -> np.ndarray:
    """[ranks, steps] array of one breakdown column."""
    per_rank = measured[sub]["ranks"]
    return np.array([[s[key] for s in per_rank[r]] for r in range(len(per_rank))])


def sync_ms(measured: dict[str, Any], sub: str = "") -> np.ndarray:
    """Total Synchronization Time (ms) per rank over all steps, recomputed from the simulation."""
    cl: Cluster = measured[sub]["cluster"]
    tot = np.zeros(cl.ranks)
    for st in cl.steps:
        for op in st.ops:
            tot += op.sync_ns / 1e6
    return tot


def wait_ms(measured: dict[str, Any], sub: str = "") -> np.ndarray:
    """Total Wait Time (ms) per rank over all steps."""
    cl: Cluster = measured[sub]["cluster"]
    tot = np.zeros(cl.ranks)
    for st in cl.steps:
        for op in st.ops:
            tot += op.sync_ns / 1e6 + op.wait_extra_ms
    return tot


def _key(
    slow: list[int],
    category: str,
    cases: list[str],
    metric: str,
    numbers: dict[str, Any],
    **kw: Any,
) -> dict[str, Any]:
    return {
        "slow_ranks": slow,
        "category": category,
        "slow_link": kw.get("slow_link"),
        "op": kw.get("op"),
        "verdict": kw.get("verdict"),
        "expected_case_ids": cases,
        "proving_metric": metric,
        "expected_numbers": numbers,
    }


def _r(x: float) -> float:
    return round(float(x), 3)


# ---------------------------------------------------------------- scenarios
def _seed_rank12_slow(ranks: int) -> int:
    return 12 if ranks > 12 else ranks - 1


def seed_rank12_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    slow = _seed_rank12_slow(ranks)
    p = default_perturb(ranks)
    # host dispatch stalls: slow launch calls, device waits for every kernel, plus long stalls
    p.api_us[slow] = 180.0
    p.gap_us[slow] = 200.0
    p.host_bound[slow] = True
    p.dispatch_stalls[slow] = (9, 2500.0)
    prog = transformer(layers=4, grad_mb=160.0, grad_overlap=2, final_mb=16.0)
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def seed_rank12_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer-key fields computed from what was written."""
    slow = _seed_rank12_slow(ranks)
    free = col(m, "free_us")
    step = col(m, "step_us")
    notov = col(m, "comm_not_overlapped_us")
    comp = col(m, "computing_us")
    others = [r for r in range(ranks) if r != slow]
    free_slow = free[slow].mean()
    free_med = float(np.median(free[others].mean(axis=1)))
    sync = sync_ms(m)
    wait = wait_ms(m)
    cl: Cluster = m[""]["cluster"]
    flow = (
        np.array([(st.k_start[:, :] - st.k_api_start[:, :]).mean(axis=1) for st in cl.steps]).mean(
            axis=0
        )
        / 1000
    )
    apid = np.array([st.k_api_dur.mean(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    comm_share = float(np.median((notov[others] / step[others]).mean(axis=1)))
    nums = {
        "slow_rank": slow,
        "slow_rank_free_us_per_step": _r(free_slow),
        "median_free_us_per_step_others": _r(free_med),
        "free_excess_us_per_step": _r(free_slow - free_med),
        "slow_rank_free_share": round(float(free[slow].sum() / step[slow].sum()), 4),
        "median_comm_not_overlapped_share_others": round(comm_share, 4),
        "slow_rank_sync_ms_total": _r(sync[slow]),
        "median_sync_ms_total_others": _r(float(np.median(sync[others]))),
        "min_sync_rank": int(np.argmin(sync)),
        "min_wait_rank": int(np.argmin(wait)),
        "slow_rank_launch_api_us_mean": _r(apid[slow]),
        "median_launch_api_us_mean_others": _r(float(np.median(apid[others]))),
        "slow_rank_h2d_flow_us_mean": _r(flow[slow]),
        "median_h2d_flow_us_mean_others": _r(float(np.median(flow[others]))),
        "slow_rank_computing_us_per_step": _r(comp[slow].mean()),
        "median_computing_us_per_step_others": _r(float(np.median(comp[others].mean(axis=1)))),
    }
    return _key(
        [slow], "scheduling", ["rank12-free-16card", "host-dispatch-bound"], "free_us", nums
    )


def _mm_slow(ranks: int) -> int:
    return 5 % ranks


MM_SHAPE = f"{S},{H};{3 * H},{H}"


def matmul_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    p.tag_scale[(_mm_slow(ranks), "qkv")] = 2.6
    prog = transformer(layers=4)
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def matmul_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer-key fields computed from what was written."""
    slow = _mm_slow(ranks)
    cl: Cluster = m[""]["cluster"]
    sel = [j for j, k in enumerate(cl.kernels) if k.tag == "qkv"]
    other_mm = [
        j for j, k in enumerate(cl.kernels) if k.op_type == "MatMulV2" and k.in_shapes != MM_SHAPE
    ]
    avg = np.array([st.k_dur[:, sel].mean(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    avg_other = (
        np.array([st.k_dur[:, other_mm].mean(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    )
    others = [r for r in range(ranks) if r != slow]
    comp = col(m, "computing_us")
    nums = {
        "slow_rank": slow,
        "slow_rank_avg_us_at_shape": _r(avg[slow]),
        "median_avg_us_at_shape_others": _r(float(np.median(avg[others]))),
        "ratio_at_shape": round(float(avg[slow] / np.median(avg[others])), 3),
        "count_at_shape_per_rank": len(sel) * steps,
        "slow_rank_avg_us_other_matmul_shapes": _r(avg_other[slow]),
        "median_avg_us_other_matmul_shapes_others": _r(float(np.median(avg_other[others]))),
        "slow_rank_computing_us_per_step": _r(comp[slow].mean()),
        "median_computing_us_per_step_others": _r(float(np.median(comp[others].mean(axis=1)))),
    }
    op = {
        "op_type": "MatMulV2",
        "name": "aclnnMatmul_MatMulCommon_MatMulV2",
        "input_shapes": MM_SHAPE,
    }
    return _key(
        [slow],
        "compute",
        ["matmul-shape-regression", "load-imbalance-vs-slow-kernels"],
        "avg_duration_us",
        nums,
        op=op,
    )


def _link(ranks: int) -> tuple[int, int, str]:
    if ranks > RANKS_PER_NODE:
        src = 3 % RANKS_PER_NODE
        nodes = (ranks + RANKS_PER_NODE - 1) // RANKS_PER_NODE
        dst = src + RANKS_PER_NODE if nodes > 1 else src
        return src, dst, "RDMA"
    return 0, 1, "HCCS"


def slow_link_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    src, dst, _ = _link(ranks)
    p.link_factor[(src, dst)] = 0.3
    prog = transformer(layers=4, grad_mb=128.0, grad_overlap=3)
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def slow_link_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer-key fields computed from what was written."""
    src, dst, tr = _link(ranks)
    cl: Cluster = m[""]["cluster"]
    kind = cl.kinds["world"]
    code = 1 if tr == "RDMA" else 0
    per_link: dict[tuple[int, int], list[float]] = {}
    for st in cl.steps:
        for op in st.ops:
            k = op.kind
            for r in range(cl.ranks):
                for j in range(k.peer.shape[1]):
                    if k.transport[r, j] == code:
                        per_link.setdefault((r, int(k.peer[r, j])), []).append(
                            float(op.link_mb[r, j] / op.link_ms[r, j])
                        )
    bw = {lk: sum(v) / len(v) for lk, v in per_link.items()}
    slow_bw = bw[(src, dst)]
    peers = [v for lk, v in bw.items() if lk != (src, dst)]
    wait = wait_ms(m)
    nums = {
        "slow_link_bandwidth_gbps": round(slow_bw, 4),
        "median_peer_bandwidth_gbps": round(float(median(peers)), 4),
        "bandwidth_ratio": round(slow_bw / float(median(peers)), 3),
        "src_rank_wait_ms_total": _r(wait[src]),
        "median_wait_ms_total": _r(float(np.median(wait))),
        "reference_bandwidth_gbps": 12.0 if tr == "RDMA" else 18.0,
    }
    cases = ["slow-link-rdma"] if tr == "RDMA" else ["hccs-link-degraded"]
    del kind
    return _key(
        [],
        "communication",
        cases,
        "bandwidth_gbps",
        nums,
        slow_link={"src_rank": src, "dst_rank": dst, "transport": tr},
    )


def comm_bound_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    tp = _tp_for(ranks)
    p = default_perturb(ranks)
    prog = transformer(layers=4, tp=tp, tp_mb=96.0, grad_mb=64.0, grad_overlap=6, grad=ranks > tp)
    return {"": Plan(prog, group_kinds(ranks, tp), p, _info(CANN8, tp, ranks), tp=tp)}


def comm_bound_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer-key fields computed from what was written."""
    tp = _tp_for(ranks)
    notov = col(m, "comm_not_overlapped_us")
    comm = col(m, "communication_us")
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    cl: Cluster = m[""]["cluster"]
    tp_ops = sum(1 for it in cl.program if isinstance(it, Collective) and it.group == "tp")
    mm_then_ar = 0
    for a, b in zip(cl.program, cl.program[1:], strict=False):
        if (
            isinstance(a, Kernel)
            and a.op_type == "MatMulV2"
            and isinstance(b, Collective)
            and b.group == "tp"
        ):
            mm_then_ar += 1
    tp_ms = 0.0
    for st in cl.steps:
        for op in st.ops:
            if op.kind.kind == "tp":
                tp_ms += float(np.median(op.end - op.start)) / 1e6
    nums = {
        "tp_size": tp,
        "median_comm_not_overlapped_share": round(
            float(np.median(notov.sum(axis=1) / step.sum(axis=1))), 4
        ),
        "median_overlap_ratio": round(
            float(np.median((comm - notov).sum(axis=1) / comm.sum(axis=1))), 4
        ),
        "median_computing_share": round(float(np.median(comp.sum(axis=1) / step.sum(axis=1))), 4),
        "tp_allreduce_ops_per_step": tp_ops,
        "matmul_followed_by_tp_allreduce_per_step": mm_then_ar,
        "mc2_ops": 0,
        "tp_allreduce_ms_per_step_median_rank": _r(tp_ms / steps),
    }
    return _key(
        [],
        "communication",
        ["comm-not-overlapped", "mc2-tp-fusion"],
        "comm_not_overlapped_us",
        nums,
    )


def cann_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    tp = _tp_for(ranks)
    before = transformer(layers=4, tp=tp, tp_mb=48.0, grad_mb=64.0, mc2=True, grad=ranks > tp)
    after = transformer(layers=4, tp=tp, tp_mb=48.0, grad_mb=64.0, mc2=False, grad=ranks > tp)
    return {
        "before": Plan(
            before, group_kinds(ranks, tp), default_perturb(ranks), _info(CANN7, tp, ranks), tp=tp
        ),
        "after": Plan(
            after, group_kinds(ranks, tp), default_perturb(ranks), _info(CANN8, tp, ranks), tp=tp
        ),
    }


def cann_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer-key fields computed from what was written."""
    out: dict[str, Any] = {}
    for sub in ("before", "after"):
        cl: Cluster = m[sub]["cluster"]
        n_hccl = sum(1 for it in cl.program if isinstance(it, Collective))
        n_mc2 = sum(1 for k in cl.kernels if k.op_type == "MatmulAllReduce")
        step = col(m, "step_us", sub)
        comm = col(m, "communication_us", sub)
        notov = col(m, "comm_not_overlapped_us", sub)
        out[f"{sub}_hccl_ops_per_step"] = n_hccl
        out[f"{sub}_mc2_ops_per_step"] = n_mc2
        out[f"{sub}_comm_share_median"] = round(
            float(np.median(comm.sum(axis=1) / step.sum(axis=1))), 4
        )
        out[f"{sub}_comm_not_overlapped_share_median"] = round(
            float(np.median(notov.sum(axis=1) / step.sum(axis=1))), 4
        )
        out[f"{sub}_step_us_median"] = _r(float(np.median(step.mean(axis=1))))
        out[f"{sub}_cann_version"] = (CANN7 if sub == "before" else CANN8).cann_version
    out["hccl_ops_ratio"] = round(
        out["after_hccl_ops_per_step"] / out["before_hccl_ops_per_step"], 3
    )
    return _key(
        [],
        "communication",
        ["cann8-comm-operator-changes", "mc2-tp-fusion"],
        "hccl_op_count",
        out,
        verdict="hccl_ops_doubled_comm_share_up",
    )


def _stall_steps(steps: int) -> list[int]:
    return [i for i in range(steps) if i % 3 == 0]


def dataloader_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    rng = np.random.default_rng(seed + 17)
    jitter = 1.0 + 0.02 * rng.standard_normal(ranks)
    stall_steps = set(_stall_steps(steps))
    p.step_stall_us = lambda si: (
        (120_000.0 * jitter) if si in stall_steps else np.full(ranks, 300.0)
    )
    prog = transformer(layers=4)
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def dataloader_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer-key fields computed from what was written."""
    free = col(m, "free_us")
    prep = col(m, "preparing_us")
    step_ids = [s["step"] for s in m[""]["ranks"][0]]
    stall = _stall_steps(steps)
    normal = [i for i in range(steps) if i not in stall]
    nums = {
        "stall_steps": [step_ids[i] for i in stall],
        "stall_period_steps": 3,
        "median_free_us_stall_steps": _r(float(np.median(free[:, stall]))),
        "median_free_us_other_steps": _r(float(np.median(free[:, normal]))) if normal else None,
        "median_preparing_us_stall_steps": _r(float(np.median(prep[:, stall]))),
        "ranks_affected": ranks,
    }
    return _key([], "scheduling", ["dataloader-stall"], "free_us", nums)


def _late(ranks: int) -> int:
    return 5 % ranks


LATE_US = 2_500_000.0


def wait_skew_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    late = _late(ranks)

    def delay(si: int, ci: int) -> np.ndarray | None:
        if si == 0 and ci == 0:
            d = np.zeros(ranks)
            d[late] = LATE_US
            return d
        return None

    p.coll_delay_us = delay
    prog = transformer(layers=4)
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def wait_skew_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer-key fields computed from what was written."""
    late = _late(ranks)
    cl: Cluster = m[""]["cluster"]
    op0 = cl.steps[0].ops[0]
    sync0 = op0.sync_ns / 1e6
    others = [r for r in range(ranks) if r != late]
    kind = op0.kind
    g = int(kind.gidx[late])
    name = f"{op0.item.op_type}_{kind.hashes[g][-3:]}_{op0.index}_1"
    nums = {
        "late_rank": late,
        "late_by_us": LATE_US,
        "first_op_name": name,
        "first_op_sync_ms_late_rank": _r(sync0[late]),
        "first_op_sync_ms_median_others": _r(float(np.median(sync0[others]))),
        "first_step_free_us_late_rank": _r(col(m, "free_us")[late, 0]),
        "hccl_connect_timeout_default_s": 120,
        "hccl_exec_timeout_default_s": 1836,
        "hccl_env_metadata_key": HCCL_ENV_KEY,
    }
    return _key(
        [late],
        "scheduling",
        ["hung-rank-first-collective", "hccl-timeouts"],
        "synchronization_time_ms",
        nums,
    )


def _deg(ranks: int) -> int:
    return 2 % ranks


DEG_STEP_US = 6000.0


def degradation_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    slow = _deg(ranks)

    def delay(si: int, ci: int) -> np.ndarray | None:
        if ci == 2 and si > 0:
            d = np.zeros(ranks)
            d[slow] = DEG_STEP_US * si
            return d
        return None

    p.coll_delay_us = delay
    prog = transformer(layers=4)
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def degradation_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer-key fields computed from what was written."""
    slow = _deg(ranks)
    step = col(m, "step_us")
    free = col(m, "free_us")
    x = np.arange(steps)
    slope = float(np.polyfit(x, step[slow], 1)[0]) if steps > 1 else 0.0
    fslope = float(np.polyfit(x, free[slow], 1)[0]) if steps > 1 else 0.0
    others = [r for r in range(ranks) if r != slow]
    oslope = float(np.median([np.polyfit(x, free[r], 1)[0] for r in others])) if steps > 1 else 0.0
    nums = {
        "slow_rank": slow,
        "step_us_first": _r(step[slow, 0]),
        "step_us_last": _r(step[slow, -1]),
        "step_us_slope_per_step": _r(slope),
        "slow_rank_free_us_slope_per_step": _r(fslope),
        "median_free_us_slope_per_step_others": _r(oslope),
        "planted_growth_us_per_step": DEG_STEP_US,
    }
    return _key([slow], "scheduling", ["step-time-degradation"], "step_us", nums)


def _straggler(ranks: int) -> int:
    return 6 % ranks


def straggler_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    p.dur_scale[_straggler(ranks)] = 1.25
    prog = transformer(layers=4)
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def straggler_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer-key fields computed from what was written."""
    slow = _straggler(ranks)
    comp = col(m, "computing_us")
    step = col(m, "step_us")
    wait = wait_ms(m)
    others = [r for r in range(ranks) if r != slow]
    nums = {
        "slow_rank": slow,
        "slow_rank_computing_us_per_step": _r(comp[slow].mean()),
        "median_computing_us_per_step_others": _r(float(np.median(comp[others].mean(axis=1)))),
        "computing_excess_us_per_step": _r(
            comp[slow].mean() - float(np.median(comp[others].mean(axis=1)))
        ),
        "step_us_spread_across_ranks": _r(float((step.max(axis=0) - step.min(axis=0)).max())),
        "slow_rank_wait_ms_total": _r(wait[slow]),
        "median_wait_ms_total_others": _r(float(np.median(wait[others]))),
        "min_wait_rank": int(np.argmin(wait)),
    }
    return _key(
        [slow],
        "compute",
        ["compute-straggler-hidden", "load-imbalance-vs-slow-kernels"],
        "computing_us",
        nums,
    )


def healthy_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = transformer(layers=4)
    return {"": Plan(prog, group_kinds(ranks, 1), default_perturb(ranks), _info(CANN8, 1, ranks))}


def healthy_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer-key fields computed from what was written."""
    comp = col(m, "computing_us")
    free = col(m, "free_us")
    step = col(m, "step_us")
    mean_total = float(step.mean())
    nums = {
        "computing_gap_ratio": round(float((comp.max() - comp.min()) / mean_total), 4),
        "free_gap_ratio": round(float((free.max() - free.min()) / mean_total), 4),
        "max_free_share": round(float((free / step).max()), 4),
    }
    return _key([], "none", [], "gap_ratio", nums)


SCENARIOS: dict[str, ScenarioSpec] = {
    s.name: s
    for s in (
        ScenarioSpec(
            "seed-rank12",
            "16 ranks, one group, communication-dominated; rank 12 host-dispatch bound (large Free), others wait for it",
            16,
            3,
            seed_rank12_plans,
            seed_rank12_answer,
        ),
        ScenarioSpec(
            "matmul-shape-regression",
            "equal op counts; one rank's MatMul slower for one input shape only",
            8,
            3,
            matmul_plans,
            matmul_answer,
        ),
        ScenarioSpec(
            "slow-link",
            "2 nodes of 8 (HCCS intra, RDMA inter); one RDMA link at 30% of its peers",
            16,
            3,
            slow_link_plans,
            slow_link_answer,
        ),
        ScenarioSpec(
            "comm-bound-no-overlap",
            "TP all-reduce right after MatMul, not overlapped, no mc2",
            16,
            3,
            comm_bound_plans,
            comm_bound_answer,
        ),
        ScenarioSpec(
            "cann-upgrade-pair",
            "before (CANN 7.0, MatmulAllReduce fused) / after (CANN 8.0, split: ~2x HCCL ops)",
            16,
            3,
            cann_plans,
            cann_answer,
        ),
        ScenarioSpec(
            "dataloader-stall",
            "every third step starts with a long Free on all ranks",
            8,
            6,
            dataloader_plans,
            dataloader_answer,
        ),
        ScenarioSpec(
            "hccl-wait-skew",
            "one rank reaches the first collective 2.5 s late; HCCL timeouts at defaults",
            16,
            3,
            wait_skew_plans,
            wait_skew_answer,
        ),
        ScenarioSpec(
            "degradation",
            "one rank's step time grows every step (host stall before a collective)",
            8,
            8,
            degradation_plans,
            degradation_answer,
        ),
        ScenarioSpec(
            "compute-straggler-hidden",
            "one rank computes 25% longer; collectives equalize step time",
            8,
            3,
            straggler_plans,
            straggler_answer,
        ),
        ScenarioSpec(
            "healthy", "balanced cluster, nothing to report", 8, 3, healthy_plans, healthy_answer
        ),
    )
}
