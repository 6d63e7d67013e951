"""Fourth set of development fault kinds (written without reading the diagnosis).

Five more field faults of Ascend training jobs, each planted as a mechanism of the simulation
(``advisor_chat.synth.model``), and an answer key derived from the simulated timeline and the
breakdown the writer measured (never from typed numbers). Like ``scenarios_dev3.py`` every key
carries ``root_cause`` (docs/CONTRACTS.md) and ``evidence`` (what distinguishes the kind in the
files). Their question set is ``evals/datasets/generalization_dev4.yaml``: a development set for
finding weaknesses; the held-out kinds of ``generalization.yaml`` stay untouched.

Kinds:

- ``checkpoint-rank0-periodic``: every 5th step rank 0 saves a checkpoint synchronously at the top of
  the iteration (``if it % save_interval == 0 and rank == 0: torch.save(...)``): its host is busy
  ~0.7 s and launches nothing, its device idles (no kernels) at the start of that step; every other
  rank runs its forward and waits in the first gradient all-reduce of that step. Other steps normal.
- ``hccl-buffsize-small``: ``HCCL_BUFFSIZE=16`` (MB; default 200) in every rank's recorded HCCL
  environment: every gradient all-reduce larger than the buffer runs in ceil(size / 16 MB) loops,
  each a separate small transfer on every link with its own handshake, so the large collectives
  reach a fraction of the link bandwidth (the small ones are normal) and communication is exposed on
  every rank. No late rank.
- ``dynamic-shape-recompile``: variable-length batches (sequence buckets): in the steps where a
  sequence length appears for the first time (2048 in one step, 6144 in another) every operator that
  goes through online compilation (``aclopCompileAndExecute``, jit_compile) meets a new input shape
  and the host compiles it inside the launch call (~40 ms each) while the device idles; the same
  steps on every rank. A later step with an already-seen length (2048 again) pays nothing.
- ``moe-hot-expert``: MoE, EP=8 per node, AlltoAllv dispatch / combine every layer; the experts of one
  rank are hot (2.4x the balanced token load every step): its ``GroupedMatmul`` kernels have 2.4x the
  token rows and run 2.4x longer, the AlltoAll links towards it carry 2.4x the tokens, and the other
  ranks of its EP group wait for it in the combine / dispatch-gradient AlltoAll (the others in the
  gradient all-reduces).
- ``cross-node-tp``: rank placement misconfigured: each TP=8 group is 4 cards of one node and 4 of the
  next, while the DP pairs sit inside a node; every TP all-reduce (on the critical path) moves part of
  its data over RDMA (~12 GB/s) instead of HCCS only, on every rank; no late rank; links normal. The
  fix is the placement (TP inside a node).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
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
    transformer,
)
from advisor_chat.synth.scenarios_dev import _plain, _rank_rc, _with_evidence
from advisor_chat.synth.scenarios_dev3 import _all_ranks_rc
from advisor_chat.synth.scenarios_ext import coll_wait_us, step_ids
from advisor_chat.synth.writer import RunInfo, overlap_intervals


# ---------------------------------------------------------------- shared helpers
def _others(ranks: int, culprit: int) -> list[int]:
    return [q for q in range(ranks) if q != culprit]


def _resimulate(
    cl: Cluster, program: list[Item], kinds: dict[str, GroupKind] | None = None
) -> Cluster:
    """The same run (seed, perturbations, steps) with another program or groups: a counterfactual."""
    return simulate(
        program,
        kinds if kinds is not None else cl.kinds,
        cl.perturb,
        cl.ranks,
        len(cl.steps),
        cl.seed,
        cl.steps[0].step_id,
        cl.t0_ns,
    )


def _sim_breakdown(cl: Cluster) -> dict[str, np.ndarray]:
    """[ranks, steps] ``step_us`` and ``comm_not_overlapped_us`` of a simulated run (writer rules)."""
    step = np.zeros((cl.ranks, len(cl.steps)))
    notov = np.zeros_like(step)
    for si, st in enumerate(cl.steps):
        for r in range(cl.ranks):
            s0, e0 = st.bounds(r)
            comp = [(int(a), int(a + d)) for a, d in zip(st.k_start[r], st.k_dur[r], strict=True)]
            comm = [(int(op.start[r]), int(op.end[r])) for op in st.ops]
            iv = overlap_intervals(comp, comm, s0, e0)
            notov[r, si] = sum(b - a for a, b in iv["Communication(Not Overlapped)"]) / 1000
            step[r, si] = (e0 - s0) / 1000
    return {"step_us": step, "comm_not_overlapped_us": notov}


def _op_bw(cl: Cluster, transport: int, pick: Callable[[Collective], bool]) -> list[float]:
    """Bandwidths (GB/s) of the transfers on one transport (0 HCCS, 1 RDMA) of the ops ``pick`` accepts."""
    out: list[float] = []
    for st in cl.steps:
        for op in st.ops:
            if not pick(op.item):
                continue
            sel = (op.kind.transport == transport) & (op.link_ms > 0)
            out.extend((op.link_mb[sel] / op.link_ms[sel]).tolist())
    return out


# ---------------------------------------------------------------- checkpoint-rank0-periodic
CKPT_RANK = 0
CKPT_PERIOD = 5  # save_interval (steps)
CKPT_FIRST = 3  # step index of the first save in the capture (step 13; then 18, ...)
CKPT_US = 720_000.0  # torch.save of the full state on rank 0: state_dict copies + write to storage
CKPT_JITTER = 0.03


def _ckpt_steps(steps: int) -> list[int]:
    """Step indices with a checkpoint save: every CKPT_PERIOD steps from CKPT_FIRST."""
    return list(range(CKPT_FIRST, steps, CKPT_PERIOD)) or [steps - 1]


def ckpt_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    saves = set(_ckpt_steps(steps))
    rng = np.random.default_rng(seed + 53)
    jit = 1.0 + CKPT_JITTER * np.clip(rng.standard_normal(steps), -2, 2)
    p = default_perturb(ranks)

    def stall(si: int) -> np.ndarray:
        out = np.zeros(ranks)
        if si in saves:
            out[CKPT_RANK] = CKPT_US * jit[si]
        return out

    p.step_stall_us = stall
    return _plain(ranks, transformer(layers=4), p)


def ckpt_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: rank 0's device idles at the start of the save steps; the others wait for it."""
    r = CKPT_RANK
    ids = step_ids(m)
    cl: Cluster = m[""]["cluster"]
    saves = _ckpt_steps(steps)
    normal = [s for s in range(steps) if s not in saves]
    others = _others(ranks, r)
    prep = col(m, "preparing_us")
    free = col(m, "free_us")
    step = col(m, "step_us").max(axis=0)
    wait = coll_wait_us(m)
    first_sync = np.array([cl.steps[s].ops[0].sync_ns / 1000 for s in saves])  # [saves, ranks]
    # the device of rank 0 runs nothing between the step start and its first kernel
    idle0 = [float(cl.steps[s].k_start[r, 0] - cl.steps[s].start) / 1000 for s in saves]

    def med(x: Any) -> float | None:
        return _r(float(np.median(x))) if np.size(x) else None

    nums = {
        "checkpoint_steps": [ids[s] for s in saves],
        "checkpoint_period_steps": CKPT_PERIOD,
        "culprit_idle_us_checkpoint_steps": med(idle0),
        "culprit_preparing_us_checkpoint_steps": med(prep[r, saves]),
        "culprit_preparing_us_other_steps": med(prep[r, normal]),
        "culprit_free_us_checkpoint_steps": med(free[r, saves]),
        "others_wait_us_checkpoint_steps": med(wait[others][:, saves].mean(axis=1)),
        "others_wait_us_other_steps": med(wait[others][:, normal].mean(axis=1)) if normal else None,
        "others_first_collective_sync_us_checkpoint_steps": med(first_sync[:, others]),
        "step_us_checkpoint_steps": med(step[saves]),
        "step_us_other_steps": med(step[normal]) if normal else None,
        "checkpoint_share_of_captured_time": round(float(step[saves].sum() / step.sum()), 4),
    }
    key = _key([r], "scheduling", ["checkpoint-save-stall"], "free_us", nums)
    key["slow_step"] = ids[saves[0]]
    key["slow_step2"] = ids[saves[-1]]
    rc = _rank_rc(
        m,
        ranks,
        r,
        "host_stall",
        "scheduling",
        cols=saves,
        steps=[ids[s] for s in saves],
        metrics={
            "culprit_idle_us_per_save": nums["culprit_idle_us_checkpoint_steps"],
            "step_us_checkpoint_steps": nums["step_us_checkpoint_steps"],
            "step_us_other_steps": nums["step_us_other_steps"],
        },
    )
    return _with_evidence(
        key,
        rc,
        checkpoint_steps=[ids[s] for s in saves],
        normal_steps=[ids[s] for s in normal],
        period_steps=CKPT_PERIOD,
        stall_ms=round(float(np.median(idle0)) / 1000),
        position="step start",
        wait_op="hcom_allReduce_",
        kernels_during_stall=0,
        device_idle=True,
        only_rank=r,
    )


# ---------------------------------------------------------------- hccl-buffsize-small
BUFF_MB = 16  # HCCL_BUFFSIZE set in the job's launch script
BUFF_DEFAULT_MB = 200  # HCCL's default
BUFF_LOOP_US = 60.0  # per loop and link: notify handshakes, restarting the transfer
BUFF_GRAD_MB = 128.0  # gradient bucket all-reduced per layer


def buff_program(buff_mb: float = BUFF_MB) -> list[Item]:
    """transformer(4 layers); the collectives above the HCCL buffer run in loops through it."""
    prog: list[Item] = []
    for it in transformer(layers=4, grad_mb=BUFF_GRAD_MB, grad_overlap=6):
        if isinstance(it, Collective) and it.size_mb > buff_mb:
            loops = math.ceil(it.size_mb / buff_mb)
            it = dataclasses.replace(it, chunks=loops, chunk_us=BUFF_LOOP_US, tag="grad_bucket")
        prog.append(it)
    return prog


def buff_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    info.user_metadata[HCCL_ENV_KEY]["HCCL_BUFFSIZE"] = str(BUFF_MB)
    return {"": Plan(buff_program(), group_kinds(ranks, 1), default_perturb(ranks), info)}


def buff_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: the large all-reduces run in 16 MB loops at low bandwidth on every rank."""
    cl: Cluster = m[""]["cluster"]
    colls = [it for it in cl.program if isinstance(it, Collective)]
    big = [c for c in colls if c.chunks > 1]

    def is_big(c: Collective) -> bool:
        return c.chunks > 1

    def is_small(c: Collective) -> bool:
        return c.chunks == 1

    hccs_big = _op_bw(cl, 0, is_big)
    hccs_small = _op_bw(cl, 0, is_small)
    rdma_big = _op_bw(cl, 1, is_big)
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    comm = col(m, "communication_us")
    share = notov.sum(axis=1) / step.sum(axis=1)
    # the same run with the default buffer (one transfer per link per op)
    base = _sim_breakdown(_resimulate(cl, buff_program(BUFF_DEFAULT_MB)))
    base_share = base["comm_not_overlapped_us"].sum(axis=1) / base["step_us"].sum(axis=1)
    big_us = np.zeros(ranks)
    for st in cl.steps:
        for op in st.ops:
            if op.item.chunks > 1:
                big_us += (op.end - op.start) / 1000
    big_us /= len(cl.steps)
    sync_max = max(float(op.sync_ns.max()) / 1000 for st in cl.steps for op in st.ops)
    loops = big[0].chunks if big else 1
    nums = {
        "hccl_buffsize_mb": BUFF_MB,
        "hccl_buffsize_default_mb": BUFF_DEFAULT_MB,
        "large_allreduce_mb": BUFF_GRAD_MB,
        "loops_per_large_allreduce": loops,
        "large_allreduces_per_step": len(big),
        "large_allreduce_us_per_step_median": _r(float(np.median(big_us))),
        "hccs_bandwidth_gbps_large_ops": round(float(np.median(hccs_big)), 3),
        "hccs_bandwidth_gbps_small_ops": round(float(np.median(hccs_small)), 3),
        "rdma_bandwidth_gbps_large_ops": round(float(np.median(rdma_big)), 3) if rdma_big else None,
        "median_comm_not_overlapped_share": round(float(np.median(share)), 4),
        "comm_not_overlapped_share_spread": round(float(share.max() - share.min()), 4),
        "median_comm_not_overlapped_share_default_buffer": round(float(np.median(base_share)), 4),
        "median_overlap_ratio": round(
            float(np.median((comm - notov).sum(axis=1) / comm.sum(axis=1))), 4
        ),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_default_buffer": _r(float(np.median(base["step_us"]))),
        "step_saving_share_default_buffer": round(
            float(1 - np.median(base["step_us"]) / np.median(step)), 4
        ),
        "max_sync_us": _r(sync_max),
    }
    key = _key(
        [],
        "communication",
        ["small-packet-transfers", "comm-not-overlapped"],
        "comm_not_overlapped_us",
        nums,
    )
    rc = _all_ranks_rc(
        ranks,
        "exposed_communication",
        "communication",
        metrics={
            "comm_not_overlapped_us_per_step": _r(float(np.median(notov.mean(axis=1)))),
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "hccs_bandwidth_gbps_large_ops": nums["hccs_bandwidth_gbps_large_ops"],
            "loops_per_large_allreduce": loops,
        },
    )
    return _with_evidence(
        key,
        rc,
        env_var="HCCL_BUFFSIZE",
        env_value=str(BUFF_MB),
        buffsize_mb=BUFF_MB,
        default_buffsize_mb=BUFF_DEFAULT_MB,
        op_type="hcom_allReduce_",
        loops_per_op=loops,
        large_op_mb=round(BUFF_GRAD_MB),
        hccs_bandwidth_gbps_large_ops=nums["hccs_bandwidth_gbps_large_ops"],
        hccs_bandwidth_gbps_small_ops=nums["hccs_bandwidth_gbps_small_ops"],
        links_normal=True,
        late_rank=False,
        all_ranks=True,
    )


# ---------------------------------------------------------------- dynamic-shape-recompile
DS_SEQ = 4096  # the usual sequence bucket (compiled before the capture)
DS_BUCKETS = {1: 2048, 4: 6144, 5: 2048}  # step index -> sequence length of that step's batch
COMPILE_API = "aclopCompileAndExecute"  # online-compiled operator path (jit_compile=True)
COMPILE_US = 42_000.0  # per new (operator, input shape): host compiles, device idles
COMPILE_SPREAD = 0.35
COMPILE_RANK_JITTER = 0.03
DS_VOCAB = 32000


def _ds_seqs(steps: int) -> list[int]:
    return [DS_BUCKETS.get(si, DS_SEQ) for si in range(steps)]


def _aclop(op_type: str, ins: str, outs: str, dur: float, core: str, tag: str = "") -> Kernel:
    n_in = ins.count(";") + 1
    return Kernel(
        name=op_type,
        op_type=op_type,
        core=core,
        in_shapes=ins,
        in_dtypes=";".join(["DT_BF16"] * n_in),
        in_formats=";".join(["ND"] * n_in),
        out_shapes=outs,
        out_dtypes="DT_BF16",
        out_formats="ND",
        dur_us=dur,
        block_dim=24 if core == "AI_CORE" else 40,
        api=COMPILE_API,
        tag=tag,
    )


def _ds_mm(tag: str, m: int, k: int, n: int, dur: float) -> Kernel:
    return _aclop("MatMulV2", f"{m},{k};{n},{k}", f"{m},{n}", dur, "AI_CORE", tag)


def _ds_vec(op_type: str, shape: str, dur: float, tag: str) -> Kernel:
    return _aclop(op_type, shape, shape, dur, "AI_VECTOR_CORE", tag)


def _ds_fa(seq: int, dur: float, grad: bool) -> Kernel:
    op = "FlashAttentionScoreGrad" if grad else "FlashAttentionScore"
    n = 4 if grad else 3
    return _k(
        f"aclnn{op}_{op}_{op}",
        op,
        "MIX_AIC",
        ";".join([f"1,{seq},{H}"] * n),
        f"1,{seq},{H}",
        dur,
        f"aclnn{op}",
        tag="fa_grad" if grad else "fa",
    )


def ds_kernels(seq: int) -> list[Item]:
    """One step at sequence length ``seq`` (same structure at every length: kernel positions match)."""
    f = seq / DS_SEQ
    ff = 4 * H
    prog: list[Item] = [
        Kernel(
            name="aclnnEmbedding_GatherV2AiCore_GatherV2",
            op_type="GatherV2",
            core="AI_VECTOR_CORE",
            in_shapes=f"{DS_VOCAB},{H};1,{seq}",
            in_dtypes="DT_BF16;DT_INT64",
            in_formats="ND;ND",
            out_shapes=f"1,{seq},{H}",
            out_dtypes="DT_BF16",
            out_formats="ND",
            dur_us=45 * f,
            block_dim=40,
            api="aclnnEmbedding",
            tag="embed",
        )
    ]
    sh = f"{seq},{H}"
    for _ in range(4):
        prog += [
            _ds_vec("RmsNorm", sh, 60 * f, "rmsnorm"),
            _ds_mm("qkv", seq, H, 3 * H, 900 * f),
            _ds_fa(seq, 1100 * f * f, grad=False),
            _ds_mm("attn_out", seq, H, H, 320 * f),
            _ds_vec("Add", sh, 30 * f, "add"),
            _ds_vec("RmsNorm", sh, 60 * f, "rmsnorm"),
            _ds_mm("mlp_up", seq, H, 2 * ff, 1500 * f),
            _ds_vec("SwiGlu", f"{seq},{2 * ff}", 90 * f, "swiglu"),
            _ds_mm("mlp_down", seq, ff, H, 1200 * f),
            _ds_vec("Add", sh, 30 * f, "add"),
        ]
    for li in range(4):
        prog += [
            _ds_mm("mlp_down_dx", seq, H, ff, 1200 * f),
            _ds_mm("mlp_down_dw", H, seq, ff, 1250 * f),
            _ds_vec("SwiGluGrad", f"{seq},{2 * ff}", 140 * f, "swiglu_grad"),
            _ds_mm("mlp_up_dx", seq, 2 * ff, H, 1500 * f),
            _ds_mm("mlp_up_dw", 2 * ff, seq, H, 1550 * f),
            _ds_vec("RmsNormGrad", sh, 95 * f, "rmsnorm_grad"),
            _ds_mm("attn_out_dx", seq, H, H, 320 * f),
            _ds_mm("attn_out_dw", H, seq, H, 330 * f),
            _ds_fa(seq, 2300 * f * f, grad=True),
            _ds_mm("qkv_dx", seq, 3 * H, H, 900 * f),
            _ds_mm("qkv_dw", 3 * H, seq, H, 920 * f),
            _ds_vec("RmsNormGrad", sh, 95 * f, "rmsnorm_grad"),
            Collective("hcom_allReduce_", "world", 96.0, overlap=6 if li < 3 else 0),
        ]
    opt = [it for it in transformer(layers=1, grad=False) if isinstance(it, Kernel)][22:]
    prog += opt[:2]
    prog += [
        Collective("hcom_allReduce_", "world", 4.0),
        Collective("hcom_allGather_", "world", 2.0),
    ]
    prog += opt[2:]
    return prog


def _ds_compiles(steps: int) -> dict[int, list[int]]:
    """{step index: kernel positions compiled in that step}.

    The first launch of every online-compiled operator at an (operator type, input shape) not seen
    before (the usual sequence length was compiled before the capture).
    """
    seen: set[tuple[str, str]] = set()
    for it in ds_kernels(DS_SEQ):
        if isinstance(it, Kernel):
            seen.add((it.op_type, it.in_shapes))
    out: dict[int, list[int]] = {}
    for si, seq in enumerate(_ds_seqs(steps)):
        ks = [it for it in ds_kernels(seq) if isinstance(it, Kernel)]
        pos = []
        for j, k in enumerate(ks):
            sig = (k.op_type, k.in_shapes)
            if k.api == COMPILE_API and sig not in seen:
                seen.add(sig)
                pos.append(j)
        if pos:
            out[si] = pos
    return out


def ds_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = ds_kernels(DS_SEQ)
    base = [it for it in prog if isinstance(it, Kernel)]
    p = default_perturb(ranks)
    for si, seq in enumerate(_ds_seqs(steps)):
        if seq == DS_SEQ:
            continue
        ks = [it for it in ds_kernels(seq) if isinstance(it, Kernel)]
        for j, k in enumerate(ks):
            if k != base[j]:
                for r in range(ranks):
                    p.kernel_swap[(si, r, j)] = k
    rng = np.random.default_rng(seed + 71)
    for si, pos in _ds_compiles(steps).items():
        per_op = COMPILE_US * (1 - COMPILE_SPREAD + 2 * COMPILE_SPREAD * rng.random(len(pos)))
        jit = 1 + COMPILE_RANK_JITTER * np.clip(rng.standard_normal((ranks, len(pos))), -2, 2)
        p.step_kernel_stalls[si] = {
            r: {j: float(per_op[i] * jit[r, i]) for i, j in enumerate(pos)} for r in range(ranks)
        }
    return _plain(ranks, prog, p)


def ds_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every rank's host compiles new-shape operators in the same steps; device idle."""
    ids = step_ids(m)
    cl: Cluster = m[""]["cluster"]
    comp = _ds_compiles(steps)
    hot = sorted(comp)
    rest = [s for s in range(steps) if s not in comp]
    seqs = _ds_seqs(steps)
    free = col(m, "free_us")
    step = col(m, "step_us").max(axis=0)
    call_us = [  # host time in the compiling launch calls, per rank and compile step
        float(cl.steps[s].k_api_dur[r, comp[s]].sum()) / 1000 for s in hot for r in range(ranks)
    ]
    idle_us = [
        float(
            sum(
                cl.steps[s].k_start[r, j]
                - cl.steps[s].k_start[r, j - 1]
                - cl.steps[s].k_dur[r, j - 1]
                for j in comp[s]
            )
        )
        / 1000
        for s in hot
        for r in range(ranks)
    ]
    kernels = cl.kernels
    new_types = sorted({kernels[j].op_type for s in hot for j in comp[s]})
    cached = [s for s in rest if seqs[s] != DS_SEQ]
    per_rank_free = free[:, hot].mean(axis=1)
    nums = {
        "compile_steps": [ids[s] for s in hot],
        "compiles_per_compile_step": [len(comp[s]) for s in hot],
        "compile_call_us_per_compile_step_median": _r(float(np.median(call_us))),
        "device_idle_us_per_compile_step_median": _r(float(np.median(idle_us))),
        "median_free_us_compile_steps": _r(float(np.median(free[:, hot]))),
        "median_free_us_other_steps": _r(float(np.median(free[:, rest]))) if rest else None,
        "free_us_spread_across_ranks_compile_steps": _r(
            float(per_rank_free.max() - per_rank_free.min())
        ),
        "step_us_compile_steps": _r(float(np.median(step[hot]))),
        "step_us_other_steps": _r(float(np.median(step[rest]))) if rest else None,
        "usual_seq_len": DS_SEQ,
        "new_seq_lens": sorted({seqs[s] for s in hot}),
    }
    key = _key([], "scheduling", ["dynamic-shape-recompile"], "free_us", nums)
    key["slow_step"] = ids[hot[0]]
    key["slow_step2"] = ids[hot[-1]]
    rc = _all_ranks_rc(
        ranks,
        "host_stall",
        "scheduling",
        steps=[ids[s] for s in hot],
        metrics={
            "device_idle_us_per_compile_step": nums["device_idle_us_per_compile_step_median"],
            "compile_call_us_per_compile_step": nums["compile_call_us_per_compile_step_median"],
            "step_us_compile_steps": nums["step_us_compile_steps"],
            "step_us_other_steps": nums["step_us_other_steps"],
        },
    )
    return _with_evidence(
        key,
        rc,
        compile_steps=[ids[s] for s in hot],
        normal_steps=[ids[s] for s in rest],
        cached_shape_steps=[ids[s] for s in cached],
        compile_api=COMPILE_API,
        new_seq_lens=sorted({seqs[s] for s in hot}),
        usual_seq_len=DS_SEQ,
        op_types=new_types,
        op_type="MatMulV2",
        compiles_per_step=len(comp[hot[0]]),
        device_idle=True,
        all_ranks=True,
    )


# ---------------------------------------------------------------- moe-hot-expert
MOE_EP = 8  # expert-parallel group = one node
MOE_EXPERTS = 16
MOE_TOPK = 2
MOE_TOKENS = 8192  # token rows a rank's experts get when balanced (4096 tokens x top-2)
MOE_HOT = 2.4  # the hot rank's experts get 2.4x that, every step
MOE_FFN = 2816  # expert FFN hidden size
MOE_LAYERS = 4
MOE_A2A_MB = 64.0  # dispatch payload per rank (8192 token rows x 4096 bf16)
MOE_DENSE_MB = 48.0  # attention / router gradients (world all-reduce per layer)
MOE_EXPERT_MB = 64.0  # expert gradients (expert-data-parallel all-reduce per layer)
MOE_SEQ = 4096
GMM_US = {"gmm_up": 1500.0, "gmm_down": 760.0, "gmm_down_dx": 760.0, "gmm_down_dw": 780.0}
GMM_US.update({"gmm_up_dx": 1500.0, "gmm_up_dw": 1550.0})
GMM_NAME = "aclnnGroupedMatmulV4_GroupedMatmul_GroupedMatmul"
GMM = "GroupedMatmul"
A2A = "hcom_alltoallv_"


def _hot_rank(ranks: int) -> int:
    return 10 % ranks


def _ep_groups(ranks: int) -> list[list[int]]:
    return [list(range(i, i + MOE_EP)) for i in range(0, ranks, MOE_EP)]


def _tokens(ranks: int) -> np.ndarray:
    """Token rows per rank's experts: the hot rank 2.4x, its EP group-mates share the rest."""
    hot = _hot_rank(ranks)
    t = np.full(ranks, float(MOE_TOKENS))
    mates = [q for q in _ep_groups(ranks)[hot // MOE_EP] if q != hot]
    t[hot] = round(MOE_TOKENS * MOE_HOT)
    t[mates] = round((MOE_EP * MOE_TOKENS - t[hot]) / len(mates))
    return t


def _gmm(tag: str, rows: int) -> Kernel:
    e_loc = MOE_EXPERTS // MOE_EP
    f2 = 2 * MOE_FFN
    shapes = {
        "gmm_up": (f"{rows},{H};{e_loc},{H},{f2};{e_loc}", f"{rows},{f2}"),
        "gmm_down": (f"{rows},{MOE_FFN};{e_loc},{MOE_FFN},{H};{e_loc}", f"{rows},{H}"),
        "gmm_down_dx": (f"{rows},{H};{e_loc},{H},{MOE_FFN};{e_loc}", f"{rows},{MOE_FFN}"),
        "gmm_down_dw": (f"{MOE_FFN},{rows};{rows},{H};{e_loc}", f"{e_loc},{MOE_FFN},{H}"),
        "gmm_up_dx": (f"{rows},{f2};{e_loc},{f2},{H};{e_loc}", f"{rows},{H}"),
        "gmm_up_dw": (f"{H},{rows};{rows},{f2};{e_loc}", f"{e_loc},{H},{f2}"),
    }
    ins, outs = shapes[tag]
    return Kernel(
        name=GMM_NAME,
        op_type=GMM,
        core="AI_CORE",
        in_shapes=ins,
        in_dtypes="DT_BF16;DT_BF16;DT_INT64",
        in_formats="ND;ND;ND",
        out_shapes=outs,
        out_dtypes="DT_BF16",
        out_formats="ND",
        dur_us=GMM_US[tag] * rows / MOE_TOKENS,
        block_dim=24,
        api="aclnnGroupedMatmulV4",
        tag=tag,
    )


def _tok_vec(op_type: str, rows: int, width: int, dur: float, tag: str) -> Kernel:
    k = _k(
        f"aclnn{op_type}_{op_type}_{op_type}",
        op_type,
        "AI_VECTOR_CORE",
        f"{rows},{width}",
        f"{rows},{width}",
        dur * rows / MOE_TOKENS,
        f"aclnn{op_type}",
        tag,
        bd=40,
    )
    return k


def _moe_expert_kernels(rows: int) -> dict[str, Kernel]:
    """The token-dependent kernels of one rank (GroupedMatmul and the activation between them)."""
    out = {tag: _gmm(tag, rows) for tag in GMM_US}
    out["swiglu_e"] = _tok_vec("SwiGlu", rows, 2 * MOE_FFN, 60.0, "swiglu_e")
    out["swiglu_e_grad"] = _tok_vec("SwiGluGrad", rows, 2 * MOE_FFN, 95.0, "swiglu_e_grad")
    return out


def moe_program() -> list[Item]:
    """MoE transformer step: attention + routed experts per layer, AlltoAllv dispatch / combine."""
    fwd, bwd = (
        [it for it in transformer(layers=1, grad=False) if isinstance(it, Kernel)][a:b]
        for a, b in ((0, 10), (10, 22))
    )
    ex = _moe_expert_kernels(MOE_TOKENS)
    sh = f"{MOE_SEQ},{H}"
    router = _k(
        "aclnnMatmul_MatMulCommon_MatMulV2",
        "MatMulV2",
        "AI_CORE",
        f"{MOE_SEQ},{H};{MOE_EXPERTS},{H}",
        f"{MOE_SEQ},{MOE_EXPERTS}",
        25.0,
        "aclnnMatmul",
        "router",
    )
    gate = _k(
        "aclnnMoeGatingTopKSoftmax_MoeGatingTopKSoftmax_MoeGatingTopKSoftmax",
        "MoeGatingTopKSoftmax",
        "AI_VECTOR_CORE",
        f"{MOE_SEQ},{MOE_EXPERTS}",
        f"{MOE_SEQ},{MOE_TOPK}",
        22.0,
        "aclnnMoeGatingTopKSoftmax",
        bd=40,
    )
    rows = MOE_SEQ * MOE_TOPK

    def v(op: str, ins: str, outs: str, dur: float) -> Kernel:
        return _k(f"aclnn{op}_{op}_{op}", op, "AI_VECTOR_CORE", ins, outs, dur, f"aclnn{op}", bd=40)

    permute = v("MoeTokenPermute", f"{sh};{MOE_SEQ},{MOE_TOPK}", f"{rows},{H}", 85.0)
    unpermute = v("MoeTokenUnpermute", f"{rows},{H};{rows};{MOE_SEQ},{MOE_TOPK}", sh, 95.0)
    unpermute_g = v("MoeTokenUnpermuteGrad", f"{sh};{rows},{H};{rows}", f"{rows},{H}", 105.0)
    permute_g = v("MoeTokenPermuteGrad", f"{rows},{H};{rows}", sh, 90.0)
    attn_f = fwd[:6]  # RmsNorm, qkv, FA, attn_out, Add, RmsNorm (pre-MoE norm)
    add = fwd[9]
    attn_b = bwd[5:]  # RmsNormGrad, attn_out dx/dw, FA grad, qkv dx/dw, RmsNormGrad
    prog: list[Item] = []
    for _ in range(MOE_LAYERS):
        prog += attn_f
        prog += [router, gate, permute]
        prog.append(Collective(A2A, "ep", MOE_A2A_MB, tag="dispatch"))
        prog += [ex["gmm_up"], ex["swiglu_e"], ex["gmm_down"]]
        prog.append(Collective(A2A, "ep", MOE_A2A_MB, tag="combine"))
        prog += [unpermute, add]
    for li in range(MOE_LAYERS):
        prog.append(unpermute_g)
        prog.append(Collective(A2A, "ep", MOE_A2A_MB, tag="combine_grad"))
        prog += [ex["gmm_down_dx"], ex["gmm_down_dw"], ex["swiglu_e_grad"]]
        prog += [ex["gmm_up_dx"], ex["gmm_up_dw"]]
        prog.append(Collective(A2A, "ep", MOE_A2A_MB, tag="dispatch_grad"))
        prog.append(permute_g)
        prog += attn_b
        last = li == MOE_LAYERS - 1
        prog.append(Collective("hcom_allReduce_", "edp", MOE_EXPERT_MB, overlap=0 if last else 4))
        prog.append(Collective("hcom_allReduce_", "world", MOE_DENSE_MB, overlap=0 if last else 3))
    opt = [it for it in transformer(layers=1, grad=False) if isinstance(it, Kernel)][22:]
    prog += opt[:2]
    prog += [
        Collective("hcom_allReduce_", "world", 4.0),
        Collective("hcom_allGather_", "world", 2.0),
    ]
    prog += opt[2:]
    return prog


def moe_kinds(ranks: int) -> dict[str, GroupKind]:
    """World, EP groups (one per node) and expert-data-parallel groups (the same EP slot per node)."""
    ep = _ep_groups(ranks)
    edp = [list(range(j, ranks, MOE_EP)) for j in range(MOE_EP)]
    return {
        "world": make_group_kind(
            "world", "default_group", [list(range(ranks))], ranks, BASE_COMM_US, 0
        ),
        "ep": make_group_kind("ep", "ep", ep, ranks, BASE_COMM_US, 1),
        "edp": make_group_kind("edp", "edp", edp, ranks, BASE_COMM_US, 2),
    }


def _moe_info(ranks: int) -> RunInfo:
    info = _info(CANN8, 1, ranks)
    assert info.user_metadata is not None
    dist = dict(info.user_metadata["distributed_args"])
    dist.update(
        expert_model_parallel_size=MOE_EP,
        num_experts=MOE_EXPERTS,
        moe_router_topk=MOE_TOPK,
        moe_token_dispatcher_type="alltoall",
    )
    info.user_metadata["distributed_args"] = dist
    return info


def moe_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    prog = moe_program()
    kernels = [it for it in prog if isinstance(it, Kernel)]
    tok = _tokens(ranks)
    p = default_perturb(ranks)
    for r in range(ranks):
        if tok[r] == MOE_TOKENS:
            continue
        mine = _moe_expert_kernels(int(tok[r]))
        for j, k in enumerate(kernels):
            if k.tag in mine:
                p.kernel_swap[(-1, r, j)] = mine[k.tag]
    # tokens go to the experts' ranks (dispatch, combine-gradient) and come back from them
    share = tok / MOE_TOKENS
    to_rank = {q: float(share[q]) for q in range(ranks) if share[q] != 1.0}
    p.coll_dst_scale["dispatch"] = to_rank
    p.coll_dst_scale["combine_grad"] = dict(to_rank)
    p.coll_scale["combine"] = share
    p.coll_scale["dispatch_grad"] = share.copy()
    return {"": Plan(prog, moe_kinds(ranks), p, _moe_info(ranks))}


def moe_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: one rank's GroupedMatmuls carry 2.4x the tokens; its EP group waits in AlltoAll."""
    hot = _hot_rank(ranks)
    cl: Cluster = m[""]["cluster"]
    tok = _tokens(ranks)
    others = _others(ranks, hot)
    mates = [q for q in _ep_groups(ranks)[hot // MOE_EP] if q != hot]
    gmm_j = [j for j, k in enumerate(cl.kernels) if k.op_type == GMM]
    gmm_us = np.array([st.k_dur[:, gmm_j].sum(axis=1) for st in cl.steps]).mean(axis=0) / 1000
    comp = col(m, "computing_us")
    a2a_sync = np.zeros(ranks)
    a2a_mb = np.zeros(ranks)
    for st in cl.steps:
        for op in st.ops:
            if op.item.op_type == A2A:
                a2a_sync += op.sync_ns / 1000
                if op.item.tag == "combine":
                    a2a_mb += op.link_mb.sum(axis=1)
    a2a_sync /= len(cl.steps)
    a2a_mb /= len(cl.steps)
    nums = {
        "hot_rank": hot,
        "hot_rank_token_rows": int(tok[hot]),
        "balanced_token_rows": MOE_TOKENS,
        "group_mates_token_rows": int(tok[mates[0]]),
        "token_ratio": round(float(tok[hot] / MOE_TOKENS), 3),
        "culprit_gmm_us_per_step": _r(float(gmm_us[hot])),
        "median_gmm_us_per_step_others": _r(float(np.median(gmm_us[others]))),
        "gmm_ratio_vs_median": round(float(gmm_us[hot] / np.median(gmm_us[others])), 3),
        "culprit_computing_excess_us_per_step": _r(
            float(comp[hot].mean() - np.median(comp[others].mean(axis=1)))
        ),
        "culprit_combine_transit_mb_per_step": _r(float(a2a_mb[hot])),
        "median_combine_transit_mb_per_step_others": _r(float(np.median(a2a_mb[others]))),
        "group_mates_alltoall_sync_us_per_step": _r(float(np.median(a2a_sync[mates]))),
        "culprit_alltoall_sync_us_per_step": _r(float(a2a_sync[hot])),
    }
    k0 = _gmm("gmm_up", int(tok[hot]))
    key = _key(
        [hot],
        "compute",
        ["moe-expert-imbalance", "load-imbalance-vs-slow-kernels"],
        "computing_us",
        nums,
        op={"op_type": GMM, "name": GMM_NAME, "input_shapes": k0.in_shapes},
    )
    rc = _rank_rc(
        m,
        ranks,
        hot,
        "compute_straggler",
        "compute",
        operator=GMM,
        metrics={
            "culprit_computing_excess_us_per_step": nums["culprit_computing_excess_us_per_step"],
            "token_ratio": nums["token_ratio"],
            "group_mates_alltoall_sync_us_per_step": nums["group_mates_alltoall_sync_us_per_step"],
        },
    )
    return _with_evidence(
        key,
        rc,
        operator=GMM,
        wait_op=A2A,
        hot_token_rows=int(tok[hot]),
        balanced_token_rows=MOE_TOKENS,
        token_ratio=round(float(tok[hot] / MOE_TOKENS), 1),
        ep_group=_ep_groups(ranks)[hot // MOE_EP],
        ep_size=MOE_EP,
        same_rank_every_step=True,
        kernels_slower_at_same_shape=False,
    )


# ---------------------------------------------------------------- cross-node-tp
XT_TP = 8
XT_TP_MB = 64.0  # activations all-reduced per row-parallel layer (sequence 4096 x hidden 8192 bf16)
XT_GRAD_MB = 32.0  # this rank's 1/8 shard of a layer's gradients (DP=2)
XT_SCALE = 0.5  # kernel durations of a TP=8 shard of the layer


def xt_kinds(ranks: int, cross: bool = True) -> dict[str, GroupKind]:
    """World, TP and DP groups.

    ``cross``: each TP group = half of one node + half of the next (the DP pairs inside a node);
    else the intended layout (TP = one node, DP across nodes).
    """
    if not cross:
        return group_kinds(ranks, XT_TP)
    half = RANKS_PER_NODE // 2
    tp: list[list[int]] = []
    for n0 in range(0, ranks, 2 * RANKS_PER_NODE):
        for h in (0, half):
            tp.append(
                [n0 + h + i for i in range(half)]
                + [n0 + RANKS_PER_NODE + h + i for i in range(half)]
            )
    dp: list[list[int]] = []
    by_pair: dict[int, list[list[int]]] = {}
    for g in tp:
        by_pair.setdefault(g[0] // (2 * RANKS_PER_NODE), []).append(g)
    for groups in by_pair.values():
        for i in range(XT_TP):
            dp.append(sorted(g[i] for g in groups))
    return {
        "world": make_group_kind(
            "world", "default_group", [list(range(ranks))], ranks, BASE_COMM_US, 0
        ),
        "tp": make_group_kind("tp", "tp", tp, ranks, BASE_COMM_US, 1),
        "dp": make_group_kind("dp", "dp", sorted(dp), ranks, BASE_COMM_US, 2),
    }


def xt_program() -> list[Item]:
    """Megatron TP=8 step: row-parallel all-reduces after attention-out / MLP-down (and backward)."""
    return transformer(
        layers=4, tp=XT_TP, scale=XT_SCALE, tp_mb=XT_TP_MB, grad_mb=XT_GRAD_MB, grad_overlap=6
    )


def xt_plans(ranks: int, steps: int, seed: int) -> dict[str, Plan]:
    """Plans (profiles to write) of this scenario."""
    info = _info(CANN8, XT_TP, ranks)
    return {"": Plan(xt_program(), xt_kinds(ranks), default_perturb(ranks), info, tp=XT_TP)}


def xt_answer(ranks: int, steps: int, m: dict[str, Any]) -> dict[str, Any]:
    """Answer key: every TP all-reduce crosses nodes over RDMA on every rank; links normal."""
    cl: Cluster = m[""]["cluster"]
    tp_kind = cl.kinds["tp"]
    notov = col(m, "comm_not_overlapped_us")
    step = col(m, "step_us")
    share = notov.sum(axis=1) / step.sum(axis=1)
    tp_us = np.zeros(ranks)
    tp_rdma_mb = 0.0
    tp_mb = 0.0
    for st in cl.steps:
        for op in st.ops:
            if op.kind.kind != "tp":
                continue
            tp_us += (op.end - op.start) / 1000
            wire = op.kind.transport != 2
            tp_mb += float(op.link_mb[wire].sum())
            tp_rdma_mb += float(op.link_mb[op.kind.transport == 1].sum())
    tp_us /= len(cl.steps)

    def on(kind: str) -> Callable[[Collective], bool]:
        return lambda c: c.group == kind

    tp_rdma = _op_bw(cl, 1, on("tp"))
    tp_hccs = _op_bw(cl, 0, on("tp"))
    dp_rdma = _op_bw(cl, 1, on("dp"))
    # the same run with TP inside a node (DP pairs across the nodes)
    good = _resimulate(cl, cl.program, xt_kinds(ranks, cross=False))
    good_b = _sim_breakdown(good)
    good_tp = np.zeros(ranks)
    for st in good.steps:
        for op in st.ops:
            if op.kind.kind == "tp":
                good_tp += (op.end - op.start) / 1000
    good_tp /= len(good.steps)
    n_tp = sum(1 for it in cl.program if isinstance(it, Collective) and it.group == "tp")
    nodes_per_group = sorted({len({r // RANKS_PER_NODE for r in g}) for g in tp_kind.members})
    nums = {
        "tp_size": XT_TP,
        "tp_groups": tp_kind.members,
        "nodes_per_tp_group": nodes_per_group[0],
        "tp_allreduces_per_step": n_tp,
        "tp_allreduce_us_per_step_median": _r(float(np.median(tp_us))),
        "tp_allreduce_us_per_step_tp_in_node": _r(float(np.median(good_tp))),
        "tp_rdma_share_of_transit_mb": round(tp_rdma_mb / tp_mb, 4),
        "tp_rdma_bandwidth_gbps_median": round(float(np.median(tp_rdma)), 3),
        "tp_hccs_bandwidth_gbps_median": round(float(np.median(tp_hccs)), 3),
        "dp_rdma_transfers": len(dp_rdma),
        "median_comm_not_overlapped_share": round(float(np.median(share)), 4),
        "comm_not_overlapped_share_spread": round(float(share.max() - share.min()), 4),
        "median_comm_not_overlapped_share_tp_in_node": round(
            float(
                np.median(
                    good_b["comm_not_overlapped_us"].sum(axis=1) / good_b["step_us"].sum(axis=1)
                )
            ),
            4,
        ),
        "median_step_us": _r(float(np.median(step))),
        "median_step_us_tp_in_node": _r(float(np.median(good_b["step_us"]))),
        "step_saving_share_tp_in_node": round(
            float(1 - np.median(good_b["step_us"]) / np.median(step)), 4
        ),
        "rdma_slowest_vs_median": round(float(min(tp_rdma) / np.median(tp_rdma)), 3),
    }
    key = _key([], "communication", ["comm-not-overlapped"], "comm_not_overlapped_us", nums)
    rc = _all_ranks_rc(
        ranks,
        "slow_link",
        "communication",
        transport="RDMA",
        metrics={
            "tp_rdma_bandwidth_gbps": nums["tp_rdma_bandwidth_gbps_median"],
            "tp_allreduce_us_per_step": nums["tp_allreduce_us_per_step_median"],
            "comm_not_overlapped_share": nums["median_comm_not_overlapped_share"],
            "step_saving_share_tp_in_node": nums["step_saving_share_tp_in_node"],
        },
    )
    first = tp_kind.members[0]
    return _with_evidence(
        key,
        rc,
        group="tp",
        tp_size=XT_TP,
        transport="RDMA",
        expected_transport="HCCS",
        tp_group=first,
        tp_group_nodes=[node_ip(n) for n in sorted({r // RANKS_PER_NODE for r in first})],
        nodes_per_tp_group=nodes_per_group[0],
        op_type="hcom_allReduce_",
        tp_rdma_bandwidth_gbps=nums["tp_rdma_bandwidth_gbps_median"],
        dp_on_rdma=bool(dp_rdma),
        links_normal=True,
        late_rank=False,
        all_ranks=True,
    )


# ---------------------------------------------------------------- registry
DEV4_SCENARIOS = (
    ScenarioSpec(
        "checkpoint-rank0-periodic",
        "every 5th step rank 0 saves a checkpoint synchronously at the step start (~0.7 s host "
        "busy, device idle, no kernels); the others wait in that step's first gradient all-reduce",
        16,
        10,
        ckpt_plans,
        ckpt_answer,
    ),
    ScenarioSpec(
        "hccl-buffsize-small",
        "HCCL_BUFFSIZE=16 (MB, default 200) on every rank: gradient all-reduces run in 16 MB loops "
        "at low bandwidth; communication exposed on every rank, no late rank",
        16,
        3,
        buff_plans,
        buff_answer,
    ),
    ScenarioSpec(
        "dynamic-shape-recompile",
        "variable sequence buckets: in the steps where a sequence length is new, every online-"
        "compiled operator (aclopCompileAndExecute) recompiles ~40 ms on every rank, device idle",
        16,
        6,
        ds_plans,
        ds_answer,
    ),
    ScenarioSpec(
        "moe-hot-expert",
        "MoE EP=8 per node: rank 10's experts get 2.4x the tokens every step (GroupedMatmul 2.4x "
        "longer, more AlltoAll traffic to it); its EP group waits in AlltoAllv",
        16,
        3,
        moe_plans,
        moe_answer,
        min_ranks=16,
        rank_multiple=MOE_EP,
    ),
    ScenarioSpec(
        "cross-node-tp",
        "rank placement: each TP=8 group spans two nodes (4+4 cards), DP pairs inside a node; every "
        "TP all-reduce goes partly over RDMA on every rank, links normal",
        16,
        3,
        xt_plans,
        xt_answer,
        min_ranks=2 * RANKS_PER_NODE,
        rank_multiple=2 * RANKS_PER_NODE,
    ),
)
DEV4_KINDS = tuple(s.name for s in DEV4_SCENARIOS)


__all__ = ["DEV4_KINDS", "DEV4_SCENARIOS"]
