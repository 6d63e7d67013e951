"""Sixteenth set of development fault kinds (new kinds; written without reading the diagnosis).

Field problems of Ascend training jobs, planted as mechanisms of the simulation
(``advisor_chat.synth.model``) with an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Every key carries ``root_cause``
(docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the files). Their question set
is ``evals/datasets/generalization_dev18.yaml``: a development set for finding weaknesses; the
held-out kinds of ``generalization.yaml`` stay untouched. The "how much would fixing it save"
numbers come from re-simulating the same run (seed, steps) without the fault.

Kinds (the evidence of each is in a different place: the dtypes and vocabulary-sized shapes of the
loss operators in kernel_details.csv, the per-parameter ``aten::item`` / ``aclrtSynchronizeStream``
host syncs of trace_view.json around tiny all-reduces before the optimizer, the HCCL_ALGO of
profiler_metadata.json and the per-op transfer sizes of communication.json on one node, and the
optimizer operators missing from some steps of kernel_details.csv / step_trace_time.csv):

- ``fp32-vocab-cross-entropy``: a Qwen-like vocabulary (152064) and the loss computed the plain
  PyTorch way on every rank: the bf16 logits [4096, 152064] are cast to fp32 (``Cast``), then
  ``LogSoftmaxV2`` and ``NLLLoss`` in fp32, and in the backward ``NLLLossGrad``, ``LogSoftmaxGrad`` in
  fp32 and a ``Cast`` back, ~2.5 GB fp32 tensors streamed through HBM six times a step instead of one
  fused bf16 cross-entropy kernel. Job-level (every rank alike), links normal, no late rank.
- ``grad-clip-per-param-norm``: a hand-written gradient clipping loop computes the norm of every
  parameter's gradient separately, all-reduces it (``hcom_allReduce_`` of one fp32 value) and calls
  ``.item()`` on it before the next parameter: 51 ``LpNormV2`` kernels, 51 four-byte all-reduces
  and 51 blocking stream synchronizes between the backward and the optimizer on every rank, where
  ``clip_grad_norm_`` (foreach) needs one norm kernel and one all-reduce. Job-level.
- ``hccl-algo-node-mismatch``: the launcher of node 1 (ranks 8-15) still exports
  ``HCCL_ALGO="level0:ring;level1:ring"`` from a debugging session, node 0 runs the default: node
  1's ranks run every collective with the ring algorithm and move ~2.2x the bytes per op at the
  same link bandwidth, so every collective lasts as long as node 1's transfers and node 0 waits in
  it (Notify_Wait). Culprit: node 1 (its HCCL configuration), links and kernels normal.
- ``fp16-overflow-skipped-steps``: fp16 mixed precision with a dynamic loss scale that keeps
  growing into overflow: in 3 of the 8 captured steps the gradients hold inf/nan, the all-reduced
  overflow flag makes every rank skip the optimizer update (the Adam foreach kernels and the
  parameter update are missing from those steps) and the whole step's work is thrown away. The
  culprit is those steps (on every rank); kernels, links and the host normal.
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
    S,
    ScenarioSpec,
    _info,
    _k,
    _key,
    _r,
    col,
    group_kinds,
    transformer,
    vec,
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

LAYERS = 4
FWD_ITEMS = 10  # items of one transformer() layer's forward (tp=1)


def _med(x: Any) -> float:
    return _r(float(np.median(x)))


def _saving(step: np.ndarray, base_step: np.ndarray) -> tuple[float, float, float]:
    """(median step, median step without the fault, saving) in µs."""
    a = float(np.median(step))
    b = float(np.median(base_step))
    return a, b, a - b


def _kernel_us(cl: Cluster, pick: Any) -> np.ndarray:
    """[ranks, steps] summed device time (µs) of the program kernels ``pick(kernel)`` accepts."""
    idx = [j for j, k in enumerate(cl.kernels) if pick(k)]
    return np.stack([st.k_dur[:, idx].sum(axis=1) / 1000 for st in cl.steps], axis=1)


# ---------------------------------------------------------------- fp32-vocab-cross-entropy
CE_VOCAB = 152064
CE_SHAPE = f"{S},{CE_VOCAB}"
CE_TAG = "ce_fp32"
# (op type, dtype in, dtype out, µs): the plain PyTorch loss on fp32 logits
CE_FWD = (
    ("Cast", "DT_BF16", "DT_FLOAT", 2350.0),
    ("LogSoftmaxV2", "DT_FLOAT", "DT_FLOAT", 3650.0),
    ("NLLLoss", "DT_FLOAT", "DT_FLOAT", 420.0),
)
CE_BWD = (
    ("NLLLossGrad", "DT_FLOAT", "DT_FLOAT", 1900.0),
    ("LogSoftmaxGrad", "DT_FLOAT", "DT_FLOAT", 5150.0),
    ("Cast", "DT_FLOAT", "DT_BF16", 2300.0),
)
# the fused bf16 cross-entropy (what the fix runs)
CE_FUSED = (("CrossEntropyLoss", 1650.0), ("CrossEntropyLossGrad", 1850.0))


def _ce_kernel(op: str, din: str, dout: str, dur: float, tag: str) -> Kernel:
    ins = CE_SHAPE if op != "NLLLoss" and op != "NLLLossGrad" else f"{CE_SHAPE};{S}"
    return Kernel(
        name=f"aclnn{op}_{op}_{op}",
        op_type=op,
        core="AI_VECTOR_CORE",
        in_shapes=ins,
        in_dtypes=";".join([din] * (ins.count(";") + 1)),
        in_formats=";".join(["ND"] * (ins.count(";") + 1)),
        out_shapes=CE_SHAPE if op not in ("NLLLoss",) else "",
        out_dtypes=dout,
        out_formats="ND",
        dur_us=dur,
        block_dim=48,
        api=f"aclnn{op}",
        tag=tag,
    )


def ce_program(fp32: bool = True) -> list[Item]:
    """transformer() with an LM head over a 152064 vocabulary and its loss (fp32 chain or fused bf16)."""
    body = transformer(layers=LAYERS)
    fwd, bwd = body[: FWD_ITEMS * LAYERS], body[FWD_ITEMS * LAYERS :]
    head: list[Item] = [
        vec("final_norm", "RmsNorm", 60.0),
        _k(
            "aclnnMatmul_MatMulCommon_MatMulV2",
            "MatMulV2",
            "AI_CORE",
            f"{S},4096;{CE_VOCAB},4096",
            CE_SHAPE,
            9800.0,
            "aclnnMatmul",
            "lm_head",
        ),
    ]
    if fp32:
        loss_f = [_ce_kernel(op, a, b, d, CE_TAG) for op, a, b, d in CE_FWD]
        loss_b = [_ce_kernel(op, a, b, d, CE_TAG) for op, a, b, d in CE_BWD]
    else:
        loss_f = [_ce_kernel(CE_FUSED[0][0], "DT_BF16", "DT_FLOAT", CE_FUSED[0][1], "ce_fused")]
        loss_b = [_ce_kernel(CE_FUSED[1][0], "DT_BF16", "DT_BF16", CE_FUSED[1][1], "ce_fused")]
    head_b: list[Item] = [
        _k(
            "aclnnMatmul_MatMulCommon_MatMulV2",
            "MatMulV2",
            "AI_CORE",
            f"{S},{CE_VOCAB};4096,{CE_VOCAB}",
            f"{S},4096",
            9900.0,
            "aclnnMatmul",
            "lm_head_dx",
        ),
        _k(
            "aclnnMatmul_MatMulCommon_MatMulV2",
            "MatMulV2",
            "AI_CORE",
            f"{CE_VOCAB},{S};4096,{S}",
            f"{CE_VOCAB},4096",
            10100.0,
            "aclnnMatmul",
            "lm_head_dw",
        ),
        vec("final_norm_grad", "RmsNormGrad", 95.0),
    ]
    return fwd + head + loss_f + loss_b + head_b + bwd


def ce_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    return {"": Plan(ce_program(), group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def ce_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the fp32 loss chain on the full-vocabulary logits, the same on every rank."""
    cl: Cluster = m[""]["cluster"]
    loss = _kernel_us(cl, lambda k: k.tag == CE_TAG)
    head = _kernel_us(cl, lambda k: k.tag.startswith("lm_head"))
    by_op: dict[str, float] = {}
    for j, k in enumerate(cl.kernels):
        if k.tag == CE_TAG:
            d = [float(np.median(st.k_dur[:, j])) / 1000 for st in cl.steps]
            by_op[k.op_type] = by_op.get(k.op_type, 0.0) + float(np.median(d))
    step = col(m, "step_us")
    comp = col(m, "computing_us")
    base = _baseline(cl, ce_program(fp32=False))
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "vocab_size": CE_VOCAB,
        "tokens_per_card": S,
        "fp32_loss_ops_per_step": len(CE_FWD) + len(CE_BWD),
        "fp32_loss_us_per_step": _med(loss.mean(axis=0)),
        "fp32_loss_share_of_step": _share(loss, step),
        "fp32_loss_share_of_computing": _share(loss, comp),
        "log_softmax_us": _r(by_op["LogSoftmaxV2"]),
        "log_softmax_grad_us": _r(by_op["LogSoftmaxGrad"]),
        "cast_us_per_step": _r(by_op["Cast"]),
        "fp32_logits_gb": round(S * CE_VOCAB * 4 / 1e9, 2),
        "lm_head_matmul_us_per_step": _med(head.mean(axis=0)),
        "median_computing_us_per_step": _med(comp.mean(axis=1)),
        "median_computing_share": _share(comp, step),
        "median_step_us": _r(a),
        "median_step_us_fused_bf16_loss": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "compute", ["fp32-loss-full-vocab"], "computing_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "job_hotspot",
        "compute",
        operator="LogSoftmaxV2",
        shape=CE_SHAPE,
        metrics={
            "fp32_loss_us_per_step": nums["fp32_loss_us_per_step"],
            "fp32_loss_share_of_step": nums["fp32_loss_share_of_step"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        op_types=[op for op, *_ in CE_FWD + CE_BWD],
        dtype="DT_FLOAT",
        logits_shape=CE_SHAPE,
        vocab_size=CE_VOCAB,
        core="AI_VECTOR_CORE",
        position="between the LM-head MatMul [4096,4096]x[152064,4096] and its backward",
        cause="the loss is computed the plain PyTorch way on the full-vocabulary logits: the bf16 "
        "[4096, 152064] logits are cast to fp32 (Cast), log_softmax (LogSoftmaxV2) and nll_loss "
        "(NLLLoss) run in fp32 and the backward (NLLLossGrad, LogSoftmaxGrad, Cast) again, ~2.5 GB "
        "fp32 tensors streamed through HBM six times a step on every rank",
        fix="use the fused cross-entropy (torch_npu / MindSpeed fused CrossEntropyLoss on the bf16 "
        "logits, e.g. --cross-entropy-loss-fusion, or a vocab-chunked loss) instead of "
        "logits.float() + log_softmax + nll_loss",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
    )


# ---------------------------------------------------------------- grad-clip-per-param-norm
GC_PER_LAYER = 12  # weight + bias of qkv, proj, fc1, fc2 and of the two layer norms
GC_EXTRA = 3  # embedding, final norm weight and bias
GC_NORM_US = 22.0
GC_LATENCY_US = 110.0  # a one-value all-reduce across the two nodes
GC_HOST_US = 42.0  # the host's work after .item() returns until the next norm lands
GC_NORM_TAG, GC_AR_TAG, GC_MUL_TAG = "clip_norm", "clip_allreduce", "clip_mul"


def _gc_params() -> int:
    return GC_PER_LAYER * LAYERS + GC_EXTRA


def gc_program(per_param: bool = True) -> list[Item]:
    """transformer() with gradient clipping before the optimizer: per parameter, or one foreach norm."""
    body = transformer(layers=LAYERS)
    tail = body[-5:]  # optimizer kernels and the step-closing collectives
    prog = body[:-5]
    if per_param:
        for i in range(_gc_params()):
            prog.append(
                dataclasses.replace(
                    vec("lp_norm", "LpNormV2", GC_NORM_US, "4096,4096"),
                    in_dtypes="DT_FLOAT",
                    out_dtypes="DT_FLOAT",
                    out_shapes="1",
                    block_dim=8,
                    tag=GC_NORM_TAG,
                )
            )
            prog.append(
                Collective(
                    "hcom_allReduce_",
                    "world",
                    4e-06,
                    dtype="FP32",
                    tag=f"{GC_AR_TAG}{i}",
                    latency_us=GC_LATENCY_US,
                )
            )
        for _ in range(_gc_params()):
            prog.append(
                dataclasses.replace(
                    vec("clip_mul", "Muls", 9.0, "4096,4096"), block_dim=8, tag=GC_MUL_TAG
                )
            )
    else:
        prog.append(
            dataclasses.replace(
                vec("foreach_norm", "ForeachNorm", 310.0, "4096,4096"), tag=GC_NORM_TAG
            )
        )
        prog.append(
            Collective(
                "hcom_allReduce_",
                "world",
                4e-06,
                dtype="FP32",
                tag=GC_AR_TAG,
                latency_us=GC_LATENCY_US,
            )
        )
        prog.append(
            dataclasses.replace(
                vec("foreach_mul", "ForeachMulScalar", 290.0, "4096,4096"), tag=GC_MUL_TAG
            )
        )
    return prog + tail


def _gc_sync_kernels(prog: list[Item]) -> set[int]:
    """Kernel indices the host synchronizes before: every norm but the first, the first clip Muls."""
    ks = [it for it in prog if isinstance(it, Kernel)]
    norms = [j for j, k in enumerate(ks) if k.tag == GC_NORM_TAG]
    first_mul = next(j for j, k in enumerate(ks) if k.tag == GC_MUL_TAG)
    return {*norms[1:], first_mul}


def gc_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    prog = gc_program()
    at = _gc_sync_kernels(prog)
    p.host_syncs = {r: set(at) for r in range(ranks)}
    p.kernel_stalls = {r: dict.fromkeys(sorted(at), GC_HOST_US) for r in range(ranks)}
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def gc_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one norm, one tiny all-reduce and one host sync per parameter, on every rank."""
    cl: Cluster = m[""]["cluster"]
    n = _gc_params()
    ar_us: list[float] = []
    clip_span = np.zeros((ranks, steps))
    ks = cl.kernels
    norms = [j for j, k in enumerate(ks) if k.tag == GC_NORM_TAG]
    muls = [j for j, k in enumerate(ks) if k.tag == GC_MUL_TAG]
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            if op.item.tag.startswith(GC_AR_TAG):
                ar_us += ((op.end - op.start) / 1000).tolist()
        t0 = st.k_start[:, norms[0]]
        t1 = st.k_start[:, muls[-1]] + st.k_dur[:, muls[-1]]
        clip_span[:, si] = (t1 - t0) / 1000
    notov = col(m, "comm_not_overlapped_us")
    free = col(m, "free_us")
    step = col(m, "step_us")
    base = _baseline(cl, gc_program(per_param=False))
    a, b, save = _saving(step, base["step_us"])
    nums = {
        "parameters_clipped": n,
        "norm_kernels_per_step": n,
        "clip_allreduces_per_step": n,
        "host_syncs_per_step": len(_gc_sync_kernels(cl.program)),
        "clip_allreduce_bytes": 4,
        "clip_allreduce_us_median": _med(ar_us),
        "clip_us_per_step": _med(clip_span.mean(axis=0)),
        "clip_share_of_step": _share(clip_span, step),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_comm_not_overlapped_share": _share(notov, step),
        "median_free_us_per_step": _med(free.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_foreach_clip": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "clip_us_per_step": nums["clip_us_per_step"],
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "saving_us_per_step": nums["saving_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        norm_operator="LpNormV2",
        collective="hcom_allReduce_",
        collective_bytes=4,
        host_sync_api="aclrtSynchronizeStream",
        host_op="aten::item",
        per_step=n,
        position="after the last gradient all-reduce of the backward, before the optimizer "
        "(ForeachMulScalar / ForeachAddList)",
        cause="a hand-written gradient clipping loop computes every parameter's gradient norm "
        "separately, all-reduces it (one fp32 value) and calls .item() on it before the next "
        "parameter: 51 LpNormV2 kernels, 51 four-byte all-reduces and 51 blocking stream "
        "synchronizes a step on every rank, the device idle in between",
        fix="clip with torch.nn.utils.clip_grad_norm_ (foreach=True) / the framework's fused clip "
        "(one norm over all gradients, one all-reduce, no .item() in the loop)",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        same_every_step=True,
    )


# ---------------------------------------------------------------- hccl-algo-node-mismatch
HA_NODE = 1
HA_ALGO = "level0:ring;level1:ring"
HA_SCALE = 2.2  # bytes per op of the ring algorithm on that node against the default's
HA_ALG_TYPE = ("MESH-RING", "RING-RING")  # trace alg_type: default, node with HCCL_ALGO


def _ha_ranks(ranks: int) -> list[int]:
    node = min(HA_NODE, ranks // RANKS_PER_NODE - 1)
    return list(range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE))


def ha_program() -> list[Item]:
    """transformer() with every collective tagged (its per-rank payload factor)."""
    out: list[Item] = []
    for i, it in enumerate(transformer(layers=LAYERS)):
        out.append(dataclasses.replace(it, tag=f"ha{i}") if isinstance(it, Collective) else it)
    return out


def ha_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    bad = _ha_ranks(ranks)
    prog = ha_program()
    fac = np.ones(ranks)
    fac[bad] = HA_SCALE
    for it in prog:
        if isinstance(it, Collective):
            p.coll_scale[it.tag] = fac
    info = _info(CANN8, 1, ranks)
    info = dataclasses.replace(
        info,
        rank_env={r: {"HCCL_ALGO": HA_ALGO} for r in bad},
        rank_alg_type={r: HA_ALG_TYPE[1] for r in bad},
    )
    return {"": Plan(prog, group_kinds(ranks, 1), p, info)}


def ha_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: node 1 moves more bytes per collective at the same bandwidth; node 0 waits."""
    cl: Cluster = m[""]["cluster"]
    bad = _ha_ranks(ranks)
    good = [r for r in range(ranks) if r not in bad]
    mb = np.zeros((ranks, steps))
    ms = np.zeros((ranks, steps))
    # transport -> on the culprit node -> GB/s
    bw: dict[int, dict[bool, list[float]]] = {0: {True: [], False: []}, 1: {True: [], False: []}}
    for si, st in enumerate(cl.steps):
        for op in st.ops:
            tr = op.kind.transport
            wire = (tr == 0) | (tr == 1)
            mb[:, si] += np.where(wire, op.link_mb, 0.0).sum(axis=1)
            ms[:, si] += np.where(wire, op.link_ms, 0.0).sum(axis=1)
            for r in range(ranks):
                for t in (0, 1):
                    sel = (tr[r] == t) & (op.link_ms[r] > 0)
                    bw[t][r in bad].extend((op.link_mb[r, sel] / op.link_ms[r, sel]).tolist())
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
        "culprit_transfer_mb_per_step": _r(float(mb[bad].mean())),
        "others_transfer_mb_per_step": _r(float(mb[good].mean())),
        "transfer_size_ratio": round(float(mb[bad].mean() / mb[good].mean()), 2),
        "culprit_transit_us_per_step": _r(float(ms[bad].mean()) * 1000),
        "others_transit_us_per_step": _r(float(ms[good].mean()) * 1000),
        "culprit_hccs_bandwidth_gbps": _med(bw[0][True]),
        "others_hccs_bandwidth_gbps": _med(bw[0][False]),
        "culprit_rdma_bandwidth_gbps": _med(bw[1][True]),
        "others_rdma_bandwidth_gbps": _med(bw[1][False]),
        "victim_wait_us_per_step": _r(float(wait[good].mean())),
        "culprit_wait_us_per_step": _r(float(wait[bad].mean())),
        "median_comm_not_overlapped_us_per_step": _med(notov.mean(axis=1)),
        "median_step_us": _r(a),
        "median_step_us_same_algo": _r(b),
        "saving_us_per_step": _r(save),
        "saving_share_of_step": round(save / a, 4),
    }
    key = _key(bad, "communication", ["hccl-config-mismatch"], "transit_size_mb", nums)
    vic = victims_by_wait(wait, bad)
    rc = root_cause(
        "slow_group",
        "communication",
        "group",
        ranks=bad,
        victims=vic,
        not_slow=not_slow_sample(ranks, bad, vic),
        metrics={
            "culprit_transit_us_per_step": nums["culprit_transit_us_per_step"],
            "other_transit_us_per_step": nums["others_transit_us_per_step"],
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
        env_variable="HCCL_ALGO",
        culprit_value=HA_ALGO,
        others_value="",
        file="profiler_metadata.json (ENV_VARIABLES)",
        culprit_alg_type=HA_ALG_TYPE[1],
        others_alg_type=HA_ALG_TYPE[0],
        bandwidth_normal=True,
        kernels_normal=True,
        every_step=True,
        cause="node 1's launcher still exports HCCL_ALGO=level0:ring;level1:ring (left from a "
        "debugging session) while node 0 runs the default algorithm: ranks 8-15 run every collective "
        "with the ring algorithm and move about 2.2x the bytes per op at the same link bandwidth, so "
        "every collective lasts as long as their transfers and node 0 waits in it",
        fix="unset HCCL_ALGO on node 1 (or set the same value on every node) in the launch script / "
        "container env and restart; keep the HCCL environment identical across nodes",
    )


# ---------------------------------------------------------------- fp16-overflow-skipped-steps
OF_STEPS = (1, 4, 6)  # step indices whose gradients overflow
OF_CHECK_TAG, OF_OPT_TAG = "overflow_check", "adam"
OF_OPT = (
    ("ForeachMulScalar", 310.0),
    ("ForeachAddcmulScalar", 520.0),
    ("ForeachSqrt", 300.0),
    ("ForeachAddcdivScalar", 560.0),
    ("ForeachAddList", 640.0),
)


def _fp16(it: Item) -> Item:
    if isinstance(it, Kernel):
        return dataclasses.replace(
            it,
            in_dtypes=it.in_dtypes.replace("DT_BF16", "DT_FLOAT16"),
            out_dtypes=it.out_dtypes.replace("DT_BF16", "DT_FLOAT16"),
        )
    return dataclasses.replace(it, dtype="FP16") if it.dtype == "BFP16" else it


def of_program() -> list[Item]:
    """An fp16 transformer step with a dynamic loss scale: unscale + overflow check, then Adam."""
    body = [_fp16(it) for it in transformer(layers=LAYERS)[:-5]]
    check: list[Item] = [
        dataclasses.replace(
            vec(
                "unscale",
                "ForeachNonFiniteCheckAndUnscale",
                430.0,
                "4096,4096",
                "aclnnForeachNonFiniteCheckAndUnscale",
            ),
            in_dtypes="DT_FLOAT",
            out_dtypes="DT_FLOAT",
            tag=OF_CHECK_TAG,
        ),
        Collective(
            "hcom_allReduce_", "world", 4e-06, dtype="FP32", tag="found_inf", latency_us=20.0
        ),
        dataclasses.replace(
            vec("update_scale", "AmpUpdateScale", 6.0, "1", "aclnnAmpUpdateScale"),
            in_dtypes="DT_FLOAT",
            out_dtypes="DT_FLOAT",
            block_dim=1,
            tag=OF_CHECK_TAG,
        ),
    ]
    opt: list[Item] = [
        dataclasses.replace(
            vec(op, op, dur, "4096,4096"),
            in_dtypes="DT_FLOAT",
            out_dtypes="DT_FLOAT",
            tag=OF_OPT_TAG,
        )
        for op, dur in OF_OPT
    ]
    close: list[Item] = [Collective("hcom_allReduce_", "world", 4.0, dtype="FP32")]
    return body + check + opt + close


def _of_steps(steps: int) -> list[int]:
    return [s for s in OF_STEPS if s < steps]


def of_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    p = default_perturb(ranks)
    prog = of_program()
    ks = [it for it in prog if isinstance(it, Kernel)]
    opt = {j for j, k in enumerate(ks) if k.tag == OF_OPT_TAG}
    for si in _of_steps(steps):
        p.step_skip_kernels[si] = {r: set(opt) for r in range(ranks)}
    return {"": Plan(prog, group_kinds(ranks, 1), p, _info(CANN8, 1, ranks))}


def of_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the overflow steps (no optimizer update on any rank) and the time they waste."""
    cl: Cluster = m[""]["cluster"]
    ids = step_ids(m)
    ov = _of_steps(steps)
    ok = [s for s in range(steps) if s not in ov]
    opt = _kernel_us(cl, lambda k: k.tag == OF_OPT_TAG)
    step = col(m, "step_us")
    job = step.max(axis=0)  # a step of the job lasts as long as its slowest rank
    base = _baseline(cl)
    base_job = base["step_us"].max(axis=0)
    per_update = float(job.sum()) / len(ok)
    per_update_fixed = float(base_job.sum()) / steps
    nums = {
        "overflow_steps": [ids[s] for s in ov],
        "overflow_step_count": len(ov),
        "captured_steps": steps,
        "normal_steps": [ids[s] for s in ok],
        "skipped_update_share": round(len(ov) / steps, 4),
        "optimizer_ops_per_normal_step": len(OF_OPT),
        "optimizer_us_per_normal_step": _med(opt[:, ok].mean(axis=0)),
        "step_us_overflow_steps_median": _med(job[ov]),
        "step_us_normal_steps_median": _med(job[ok]),
        "wasted_us_total": _r(float(job[ov].sum())),
        "wasted_share_of_time": round(float(job[ov].sum() / job.sum()), 4),
        "time_per_update_us": _r(per_update),
        "time_per_update_us_no_overflow": _r(per_update_fixed),
        "saving_us_per_update": _r(per_update - per_update_fixed),
        "saving_share_per_update": round((per_update - per_update_fixed) / per_update, 4),
    }
    key = _key([], "compute", ["overflow-skipped-steps"], "step_us", nums)
    rc = root_cause(
        "skipped_update",
        "compute",
        "job",
        victims=range(ranks),
        not_slow=not_slow_sample(ranks, []),
        steps=[ids[s] for s in ov],
        metrics={
            "overflow_steps": nums["overflow_steps"],
            "wasted_share_of_time": nums["wasted_share_of_time"],
            "saving_us_per_update": nums["saving_us_per_update"],
        },
    )
    return _with_evidence(
        key,
        rc,
        overflow_steps=[ids[s] for s in ov],
        missing_operators=[op for op, _d in OF_OPT],
        check_operator="ForeachNonFiniteCheckAndUnscale",
        scale_operator="AmpUpdateScale",
        dtype="DT_FLOAT16",
        file="kernel_details.csv (operators per Step Id) and step_trace_time.csv",
        all_ranks=True,
        late_rank=False,
        links_normal=True,
        kernels_normal=True,
        cause="fp16 mixed precision with a dynamic loss scale that keeps growing into overflow: in "
        "steps with inf/nan gradients the all-reduced overflow flag makes every rank skip the "
        "optimizer update (no Adam foreach kernels in those steps), the step's forward and backward "
        "are thrown away",
        fix="train in bf16 (no loss scaling needed on 910B), or make the loss scale stable (a "
        "longer growth interval / loss-scale window, a lower initial or maximum scale) and find the "
        "layer that overflows",
    )


# ---------------------------------------------------------------- registry
DEV18_SCENARIOS = (
    ScenarioSpec(
        "fp32-vocab-cross-entropy",
        "the loss over a 152064 vocabulary computed in fp32 on every rank: Cast of the [4096,152064] "
        "logits, LogSoftmaxV2 and NLLLoss in DT_FLOAT and their grads (~18 ms a step) instead of a "
        "fused bf16 cross-entropy; job-level, links normal",
        16,
        4,
        ce_plans,
        ce_answer,
    ),
    ScenarioSpec(
        "grad-clip-per-param-norm",
        "gradient clipping one parameter at a time: 51 LpNormV2 kernels, 51 four-byte "
        "hcom_allReduce_ and 51 .item() host syncs (aclrtSynchronizeStream) between the backward "
        "and the optimizer on every rank; job-level",
        16,
        4,
        gc_plans,
        gc_answer,
    ),
    ScenarioSpec(
        "hccl-algo-node-mismatch",
        "node 1's launcher exports HCCL_ALGO=level0:ring;level1:ring (profiler_metadata.json), node "
        "0 the default: node 1 moves ~2.2x the bytes per collective at the same bandwidth and node "
        "0 waits in every collective; kernels and links normal",
        16,
        4,
        ha_plans,
        ha_answer,
        min_ranks=16,
        rank_multiple=8,
    ),
    ScenarioSpec(
        "fp16-overflow-skipped-steps",
        "fp16 with a dynamic loss scale overflowing in 3 of 8 steps: every rank skips the optimizer "
        "update there (the Adam foreach kernels missing from those steps), their work is wasted",
        16,
        8,
        of_plans,
        of_answer,
    ),
)
DEV18_KINDS = tuple(s.name for s in DEV18_SCENARIOS)


__all__ = ["DEV18_KINDS", "DEV18_SCENARIOS"]
