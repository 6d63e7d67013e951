"""Job-wide slow steps: in a few steps every rank's own time is up (a job-level cost of them).

When some steps are slower on every rank alike and the extra time is device work (Computing), no
rank is to blame and no rank waits for another: the steps themselves carry more work. What differs
is read from the kernels of those steps against the same ranks' other steps: which operators run
more often or longer. Extra forward operators with their backward operators launched as often as in
the other steps are forward passes with no backward: an evaluation (validation) or inference pass
inside the training loop. Otherwise the extra work is named by operator (and by shape when the same
operators run on larger inputs: the work follows the data).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from advisor_chat.analyzers.base import Category
from advisor_chat.diagnosis.context import Context
from advisor_chat.diagnosis.decompose import CubeWaste, _compute_kernels, _sample, cube_waste
from advisor_chat.diagnosis.rules.common import (
    _severity,
    even_interval,
    every_rank_loses,
)
from advisor_chat.diagnosis.text import COLLECTIVE_NAMES, integer, ms, num, pct, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Mechanism,
    Remedy,
    RootCause,
)

#: Slow steps are a minority: at most this share of the steps read.
SLOW_STEP_MAX_SHARE = 0.4
#: Every rank computes more in a slow step: at least this share of the ranks adds at least half of
#: the step's excess to its Computing (one late rank makes the others wait, not compute).
ALL_RANKS_SHARE = 0.8
#: Backward operators (``FlashAttentionScoreGrad``, ``RmsNormGrad``, ``MatMulBackward`` ...).
BACKWARD_OP = re.compile(r"grad|backward", re.I)
#: The backward runs "as often" when its launches per step are within this ratio of the others'.
SAME_COUNT = 0.1


#: Job-wide slow steps: a step whose median step time (over the ranks) is at least this much above
#: the clean steps' (the faster half), with most ranks' own time up by ``JOB_STEP_OWN_SHARE`` of
#: the clean step.
JOB_STEP_MIN_EXCESS = 0.15
JOB_STEP_OWN_SHARE = 0.05


@dataclass(frozen=True)
class JobSteps:
    """Steps that are slow on every rank, their own time up on most ranks (µs per step)."""

    steps: tuple[int, ...]
    others: tuple[int, ...]
    step_us: float
    other_step_us: float
    free_us: float
    other_free_us: float
    computing_us: float
    other_computing_us: float


def job_slow_steps(ctx: Context) -> JobSteps | None:
    """Steps slow on every rank with every rank's own time up in them (not one late rank per step).

    Rule: with ≥ 4 steps, the steps whose median step time over the ranks is ≥ (1 +
    ``JOB_STEP_MIN_EXCESS``) × the median of the faster half of the steps, at least one other step
    left; in each of them the median over the ranks of the own-time (Computing + Free) excess over
    the rank's median in the other steps is ≥ ``JOB_STEP_OWN_SHARE`` of the clean step (a rank that
    only waits for a late one has no own-time excess). Source: ``step_trace`` per (rank, step).
    """
    f = ctx.frame
    if f.empty or f["step"].nunique() < 4 or ctx.stages:
        return None
    per_step = f.groupby("step")["step_us"].median().sort_values()
    clean = float(per_step.iloc[: math.ceil(len(per_step) / 2)].median())
    hit = sorted(integer(s) for s, v in per_step.items() if v >= (1 + JOB_STEP_MIN_EXCESS) * clean)
    others = sorted(integer(s) for s in per_step.index if integer(s) not in hit)
    if not hit or not others:
        return None
    own = f.assign(own_us=f["computing_us"] + f["free_us"])
    base = own[own["step"].isin(others)].groupby("rank")["own_us"].median()
    for s in hit:
        g = own[own["step"] == s].set_index("rank")["own_us"]
        if float((g - base.reindex(g.index)).median()) < JOB_STEP_OWN_SHARE * clean:
            return None
    h, o = f[f["step"].isin(hit)], f[f["step"].isin(others)]
    return JobSteps(
        tuple(hit),
        tuple(others),
        float(h.groupby("step")["step_us"].median().median()),
        float(o.groupby("step")["step_us"].median().median()),
        float(h["free_us"].median()),
        float(o["free_us"].median()),
        float(h["computing_us"].median()),
        float(o["computing_us"].median()),
    )


@dataclass(frozen=True)
class OpExtra:
    """One operator type's launches and time per (step, rank) in the slow steps and the others.

    Attributes:
        op_type: Operator type (``kernel_details.csv`` ``Type``).
        n_slow: Launches per unit in the slow steps.
        n_other: Launches per unit in the other steps.
        us_slow: Device time per unit in the slow steps, µs.
        us_other: Device time per unit in the other steps, µs.
        shape_slow: Its most-time input shapes in the slow steps.
        shape_other: ... in the other steps.
    """

    op_type: str
    n_slow: float
    n_other: float
    us_slow: float
    us_other: float
    shape_slow: str
    shape_other: str

    @property
    def delta_us(self) -> float:
        """Extra device time per unit in the slow steps, µs."""
        return self.us_slow - self.us_other


@dataclass(frozen=True)
class SlowSteps:
    """Steps in which every rank computes more than in the other steps.

    Attributes:
        steps: The slow steps.
        all_steps: Every step read.
        step_us_slow: Their time, median over steps of the median over ranks, µs.
        step_us_other: The other steps' time, the same way, µs.
        computing_extra_us: Extra Computing per slow step, median over ranks, µs.
        ops: Operator types with more device time in the slow steps, most first.
        backward: Backward operator types with their launches per unit (slow, other).
        forward_passes: Extra forward passes per slow step when the backward runs as often (0
            otherwise).
        interval: Steps between consecutive slow steps when they are evenly spaced (0 otherwise).
        ranks: Ranks whose kernels were read (a sample).
    """

    steps: tuple[int, ...]
    all_steps: tuple[int, ...]
    step_us_slow: float
    step_us_other: float
    computing_extra_us: float
    ops: tuple[OpExtra, ...]
    backward: tuple[tuple[str, float, float], ...]
    forward_passes: int
    interval: int
    ranks: tuple[int, ...]


def slow_steps(ctx: Context) -> SlowSteps | None:
    """Steps slower on every rank alike because every rank computes more in them, or ``None``.

    The steps :func:`job_slow_steps` finds (every rank's own time up), in at most
    :data:`SLOW_STEP_MAX_SHARE` of the steps (not the last steps of the capture together: that is
    an onset), with more Computing than Free in the excess, and at least :data:`ALL_RANKS_SHARE`
    of the ranks computing at least half the step's excess more than in their other steps. The kernels (``kernel_details.csv`` ``Step Id``, ``Type``, ``Input
    Shapes``) of a rank sample in those steps are compared with the same ranks' other steps.
    """
    f = ctx.frame
    js = job_slow_steps(ctx)
    if js is None:
        return None
    slow, other = list(js.steps), list(js.others)
    steps = sorted(slow + other)
    if len(slow) > SLOW_STEP_MAX_SHARE * len(steps):
        return None
    if len(slow) >= 2 and slow == steps[-len(slow) :]:
        return None  # the last steps together: the job got slower from a step on (an onset)
    if js.computing_us - js.other_computing_us < js.free_us - js.other_free_us:
        return None  # idle, not work: the host side (job_slow_steps' own cause says what)
    by_step = f.groupby("step")["step_us"].median().sort_index()
    med = js.other_step_us
    comp = f.pivot_table(index="step", columns="rank", values="computing_us", aggfunc="mean")
    base = comp.loc[other].median()
    extra_by_step = []
    for s in slow:
        need = 0.5 * (num(by_step[s]) - med)
        extra = pd.Series(comp.loc[s] - base, dtype=float)
        if float((extra >= need).mean()) < ALL_RANKS_SHARE:
            return None
        extra_by_step.append(float(extra.median()))
    sample = _sample(ctx.ranks)
    k = _compute_kernels(ctx.profile, sample)
    if k.empty or "step" not in k:
        return None
    k = k[k["step"].isin(steps)]
    is_slow = k["step"].isin(slow)
    units_slow = k[is_slow].groupby(["step", "rank"]).ngroups
    units_other = k[~is_slow].groupby(["step", "rank"]).ngroups
    if not units_slow or not units_other:
        return None

    def side(df: pd.DataFrame, n: int) -> pd.DataFrame:
        g = df.groupby("op_type")["duration_us"].agg(["sum", "count"])
        return pd.DataFrame({"us": g["sum"] / n, "n": g["count"] / n})

    def top_shape(df: pd.DataFrame) -> pd.Series:
        g = df.groupby(["op_type", "input_shapes"])["duration_us"].sum().reset_index()
        g = g.sort_values("duration_us", ascending=False).drop_duplicates("op_type")
        return g.set_index("op_type")["input_shapes"].astype(str)

    a, b = side(k[is_slow], units_slow), side(k[~is_slow], units_other)
    j = a.add_suffix("_slow").join(b.add_suffix("_other"), how="outer").fillna(0.0)
    sh_a, sh_b = top_shape(k[is_slow]), top_shape(k[~is_slow])
    ops = [
        OpExtra(
            str(op),
            float(r["n_slow"]),
            float(r["n_other"]),
            float(r["us_slow"]),
            float(r["us_other"]),
            str(sh_a.get(op, "")),
            str(sh_b.get(op, "")),
        )
        for op, r in j.iterrows()
    ]
    more = sorted((o for o in ops if o.delta_us > 0), key=lambda o: -o.delta_us)
    bwd = [o for o in ops if BACKWARD_OP.search(o.op_type) and o.n_other > 0]
    passes = 0
    same_bwd = bool(bwd) and all(abs(o.n_slow - o.n_other) <= SAME_COUNT * o.n_other for o in bwd)
    if same_bwd:
        # the forward operators whose backward runs in every step: how many times as often
        fwd = [
            o
            for o in ops
            if not BACKWARD_OP.search(o.op_type)
            and o.n_other > 0
            and any(b.op_type.lower().startswith(o.op_type.lower()) for b in bwd)
        ]
        mult = [o.n_slow / o.n_other for o in fwd if o.n_slow > (1 + SAME_COUNT) * o.n_other]
        if mult:
            passes = max(round(float(pd.Series(mult).median())) - 1, 1)
    interval = even_interval(slow)
    return SlowSteps(
        steps=tuple(slow),
        all_steps=tuple(steps),
        step_us_slow=float(by_step.loc[slow].median()),
        step_us_other=float(by_step.loc[other].median()),
        computing_extra_us=float(pd.Series(extra_by_step).median()),
        ops=tuple(more),
        backward=tuple((o.op_type, o.n_slow, o.n_other) for o in bwd),
        forward_passes=passes,
        interval=interval,
        ranks=tuple(int(r) for r in sample),
    )


#: The same kernels run slower in the slow steps when the operators holding most of the extra
#: time launch as often, at the same shapes, and take at least this much longer.
SAME_KERNEL_SLOWER = 1.1


def _same_kernels(ss: SlowSteps) -> list[OpExtra]:
    """The operators of the extra time that launch as often at the same shapes, only longer."""
    return [
        o
        for o in ss.ops
        if o.n_other > 0
        and abs(o.n_slow - o.n_other) <= SAME_COUNT * o.n_other
        and o.shape_slow == o.shape_other
        and o.us_other > 0
        and o.us_slow >= SAME_KERNEL_SLOWER * o.us_other
    ]


def _same_ratio(ss: SlowSteps) -> float:
    """Time-weighted slowdown of :func:`_same_kernels` (slow steps' time / the others')."""
    same = _same_kernels(ss)
    other = sum(o.us_other for o in same)
    return sum(o.us_slow for o in same) / other if other > 0 else math.nan


def _contention(ctx: Context, ss: SlowSteps) -> tuple[str, str, Remedy] | None:
    """The same kernels slower in the steps that run collectives the others do not.

    When the operators that hold at least half the extra device time launch as often at the same
    shapes but longer (:func:`_same_kernels`), and the slow steps run collectives the other steps
    lack (``comm_ops`` per Step Id): the collectives running beside the computation compete with
    it for the cores and memory bandwidth. ``HCCL_OP_EXPANSION_MODE=AIV`` in the recorded
    environment (collectives expanded on the AI Vector cores) is named as the setting that does
    it. Returns (clause, Chinese clause, remedy) or None.
    """
    same = _same_kernels(ss)
    extra = sum(o.delta_us for o in ss.ops)
    if not same or sum(o.delta_us for o in same) < 0.5 * extra:
        return None
    ops = ctx.profile.get("comm_ops")
    if ops.empty or not {"step", "op_type", "elapse_ms"} <= set(ops.columns):
        return None
    n_ranks = max(int(ops["rank"].nunique()), 1) if "rank" in ops.columns else 1
    per = ops.groupby(["step", "op_type"])["elapse_ms"].sum().unstack().fillna(0.0) / n_ranks
    slow = per.reindex(list(ss.steps)).fillna(0.0).mean()
    other = per.reindex([s for s in ss.all_steps if s not in ss.steps]).fillna(0.0).mean()
    only = [str(t) for t in slow.index if slow[t] > 0 and other.get(t, 0.0) < 0.1 * slow[t]]
    if not only:
        return None
    coll_us = 1000.0 * float(slow[only].sum())
    ratio = _same_ratio(ss)
    names = ", ".join(o.op_type for o in same[:3])
    colls = " and ".join(COLLECTIVE_NAMES.get(t, t) for t in only)
    colls_zh = "、".join(COLLECTIVE_NAMES.get(t, t) for t in only)
    env = ctx.profile.get("meta")
    aiv = False
    if not env.empty and "env" in env.columns:
        aiv = any(
            isinstance(e, dict) and str(e.get("HCCL_OP_EXPANSION_MODE", "")).upper() == "AIV"
            for e in env["env"]
        )
    en = (
        f": the same kernels ({names}) launch as often at the same shapes but take "
        f"{ratio:.2f}x as long in those steps, which alone run {colls} ({ms(coll_us)} per step, "
        "communication.json): the collectives running beside the computation compete with it "
        "for the cores and the memory bandwidth"
        + (
            " (HCCL_OP_EXPANSION_MODE=AIV in the recorded environment: HCCL expands the "
            "collectives on the AI Vector cores the computation also uses)"
            if aiv
            else ""
        )
    )
    zh = (
        f"：同样的算子（{names}）调用次数和 shape 都相同，但在这些步里耗时是其他步的 {ratio:.2f} 倍，"
        f"而只有这些步在执行 {colls_zh}（每步 {ms(coll_us)}，communication.json）：与计算并行的集合通信"
        "和计算争抢计算核与内存带宽"
        + (
            "（记录的环境变量中 HCCL_OP_EXPANSION_MODE=AIV：HCCL 在计算同样要用的 AI Vector 核上展开集合通信）"
            if aiv
            else ""
        )
    )
    slower_us = sum(o.delta_us for o in same) * len(ss.steps) / max(len(ss.all_steps), 1)
    rem = (
        Remedy(
            "action",
            "Unset HCCL_OP_EXPANSION_MODE=AIV (let HCCL run the collectives on its default "
            "engine), so the overlapped collectives stop taking the vector cores the computation "
            "beside them needs; then compare the same kernels in those steps again.",
            "取消 HCCL_OP_EXPANSION_MODE=AIV（让 HCCL 用默认方式执行集合通信），使并行的集合通信不再占用"
            "旁边计算所需的 Vector 核；之后再对比这些步里同样算子的耗时。",
            slower_us,
            BoundKind.ESTIMATE,
        )
        if aiv
        else Remedy(
            "action",
            "Keep the overlapped collectives from competing with the computation beside them: "
            "fewer, larger buckets at points with less memory traffic, or HCCL settings that use "
            "fewer cores (HCCL_OP_EXPANSION_MODE); compare the same kernels with and without "
            "the collectives running.",
            "避免并行的集合通信与旁边的计算争抢资源：在访存较少的位置使用更少、更大的分桶，或使用占用核更少的 "
            "HCCL 设置（HCCL_OP_EXPANSION_MODE）；对比有无集合通信时同样算子的耗时。",
            slower_us,
            BoundKind.ESTIMATE,
        )
    )
    return en, zh, rem


#: Operators that waste the Cube explain slow steps when they hold at least this share of the
#: extra device time of the operators listed.
WASTE_EXPLAINS_SHARE = 0.5
_CONV = re.compile(r"^Conv", re.I)


def _cube_waste(ctx: Context, top: list[OpExtra]) -> tuple[list[CubeWaste], float] | None:
    """The listed extra operators that keep the Cube mostly idle, and their share of the extra.

    ``None`` when they hold less than ``WASTE_EXPLAINS_SHARE`` of the listed operators' extra
    time (``decompose.cube_waste``: kernel_details.csv aic_mac_ratio).
    """
    extra = sum(max(o.delta_us, 0.0) for o in top)
    if extra <= 0:
        return None
    found = [(o, cube_waste(ctx.profile, ctx.ranks, o.op_type)) for o in top]
    waste = [(o, w) for o, w in found if w is not None]
    share = sum(max(o.delta_us, 0.0) for o, _ in waste) / extra
    if not waste or share < WASTE_EXPLAINS_SHARE:
        return None
    return [w for _, w in waste], share


def _waste_text(ws: list[CubeWaste], gain_us: float) -> tuple[str, str, Remedy]:
    """Why (en, zh) and the first change for extra operators that waste the Cube."""
    ops = ", ".join(w.op_type for w in ws)
    ops_zh = "、".join(w.op_type for w in ws)
    w0 = ws[0]
    others = ", ".join(w0.others)
    why = (
        f": {ops} keep the Cube mostly idle while they run (aic_mac_ratio {w0.mac_ratio:.2f} "
        f"against {w0.mac_ratio_others:.2f} for the job's other Cube operators, {others}; "
        f"{w0.op_type} inputs [{w0.shapes}] in {w0.formats}): their shapes fit the Cube badly, "
        "most of its work is padding"
    )
    why_zh = (
        f"：{ops_zh} 运行时 Cube 大部分时间空闲（aic_mac_ratio 为 {w0.mac_ratio:.2f}，作业中其他 Cube 算子"
        f"（{others}）为 {w0.mac_ratio_others:.2f}；{w0.op_type} 的输入为 [{w0.shapes}]，格式 {w0.formats}）："
        "它们的 shape 与 Cube 不匹配，大部分计算是填充"
    )
    if any(_CONV.match(w.op_type) for w in ws):
        rem = Remedy(
            "action",
            f"Compute the convolution ({ops}) as a MatMul: a patch embedding (kernel = stride) "
            "is a Linear on the unfolded patches (reshape the input into patches and apply "
            "nn.Linear with the convolution's weight flattened); a convolution on few input "
            "channels pads them to 16 on the Cube.",
            f"把卷积（{ops_zh}）改成矩阵乘：步长等于卷积核的 patch embedding 就是对展开后的 patch 做 Linear"
            "（把输入重排成 patch，用展平后的卷积权重做 nn.Linear）；输入通道很少的卷积在 Cube 上会被填充到 16。",
            gain_us,
            BoundKind.UPPER_BOUND,
        )
    else:
        rem = Remedy(
            "action",
            f"Give {ops} Cube-friendly shapes: dimensions that are multiples of 16 (better 128) "
            "and the layout the Cube reads directly, so its MAC unit is busy as for the other "
            "Cube operators.",
            f"让 {ops_zh} 的 shape 适配 Cube：各维度为 16 的倍数（最好是 128 的倍数），并使用 Cube 直接读取的格式，"
            "让其 MAC 单元像其他 Cube 算子一样忙碌。",
            gain_us,
            BoundKind.UPPER_BOUND,
        )
    return why, why_zh, rem


def rule_slow_steps(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Slow-steps rule: a few steps carry more device work on every rank (:func:`slow_steps`).

    Skipped when another cause already covers those steps (a step event, a cause scoped to them).
    Cost: the slow steps' excess over the other steps' time (``step_trace``, median over ranks),
    summed and averaged over the captured steps. Gain (estimate): that average per step, what the
    same capture would save with those steps as fast as the others.
    """
    if ctx.frame.empty or not math.isfinite(ctx.step_us):
        return []
    ss = slow_steps(ctx)
    if ss is None:
        return []
    for c in causes:
        if set(c.steps) & set(ss.steps) or any(s in ss.steps for s, _ in c.culprit.events):
            return []
    by_step = ctx.frame.groupby("step")["step_us"].median()
    excess = float(sum(max(num(by_step[s]) - ss.step_us_other, 0.0) for s in ss.steps))
    total = float(by_step.reindex(list(ss.all_steps)).sum())
    gain = excess / len(ss.all_steps)
    if gain <= 0:
        return []
    sp = ", ".join(str(s) for s in ss.steps)
    sp_zh = "、".join(str(s) for s in ss.steps)
    every = f", every {ss.interval} steps" if ss.interval else ""
    every_zh = f"，每 {ss.interval} 步一次" if ss.interval else ""

    def launches(o: OpExtra) -> str:
        return (
            f"{o.n_slow:.3g} launch{'es' if o.n_slow != 1 else ''} per step against {o.n_other:.3g}"
        )

    def launches_zh(o: OpExtra) -> str:
        return f"每步 {o.n_slow:.3g} 次，其他步 {o.n_other:.3g} 次"

    top = list(ss.ops[:3])
    what = "; ".join(f"{o.op_type} +{ms(o.delta_us)} ({launches(o)})" for o in top)
    what_zh = "；".join(f"{o.op_type} 多 {ms(o.delta_us)}（{launches_zh(o)}）" for o in top)
    bw = ", ".join(f"{n} {a:.3g} against {b:.3g}" for n, a, b in ss.backward[:2])
    bw_zh = "、".join(f"{n} {a:.3g} 次（其他步 {b:.3g} 次）" for n, a, b in ss.backward[:2])
    shape = next(
        (o for o in top if o.shape_slow and o.shape_other and o.shape_slow != o.shape_other),
        None,
    )
    metrics_extra: dict[str, float] = {}
    head = (
        f"Steps {sp} ({len(ss.steps)} of the {len(ss.all_steps)} captured{every}) take "
        f"{ms(ss.step_us_slow)} against {ms(ss.step_us_other)} for the other steps, on every rank "
        f"alike: every rank computes {ms(ss.computing_extra_us)} more in them (Computing), no "
        f"rank is late and no rank waits for another. The extra device work in those steps "
        f"(kernel_details.csv per Step Id): {what}"
    )
    head_zh = (
        f"第 {sp_zh} 步（采集的 {len(ss.all_steps)} 步中的 {len(ss.steps)} 步{every_zh}）耗时 "
        f"{ms(ss.step_us_slow)}，其他步为 {ms(ss.step_us_other)}，每张卡都一样：每张卡在这些步里多计算 "
        f"{ms(ss.computing_extra_us)}（Computing），没有卡迟到，也没有卡在等其他卡。这些步多出的设备工作"
        f"（kernel_details.csv 按 `Step Id` 统计）：{what_zh}"
    )
    if ss.forward_passes:
        why = (
            f", while the backward operators run as often as in the other steps ({bw}): "
            f"{ss.forward_passes} extra forward pass(es) per slow step with no backward, an "
            "evaluation (validation) or inference pass run inside the training loop"
        )
        why_zh = (
            f"，而反向算子的次数与其他步相同（{bw_zh}）：每个慢步多了 {ss.forward_passes} 次只有前向、"
            "没有反向的计算，即训练循环里穿插了评估（验证）或推理"
        )
        rem = Remedy(
            "action",
            "Run the evaluation less often or on fewer batches (Megatron / MindSpeed "
            "--eval-interval, --eval-iters), or outside the training job (a separate process on a "
            f"saved checkpoint); leave steps {sp} out when you measure the training step time.",
            "降低评估频率或减少评估批次（Megatron / MindSpeed 的 `--eval-interval`、`--eval-iters`），或把评估"
            f"移出训练作业（用保存的 checkpoint 单独评估）；统计训练步长时排除第 {sp_zh} 步。",
            gain,
            BoundKind.ESTIMATE,
        )
    elif (cont := _contention(ctx, ss)) is not None:
        why, why_zh, rem = cont
        metrics_extra = {"same_kernel_slowdown": _same_ratio(ss)}
    elif (waste := _cube_waste(ctx, top)) is not None:
        why, why_zh, rem = _waste_text(waste[0], gain * waste[1])
        metrics_extra = {
            "mac_ratio": waste[0][0].mac_ratio,
            "mac_ratio_others": waste[0][0].mac_ratio_others,
        }
    elif shape is not None:
        why = (
            f": the same operators on larger inputs ({shape.op_type} [{shape.shape_slow}] against "
            f"[{shape.shape_other}] in the other steps), so the work follows the data (longer "
            "sequences or larger batches in those steps)"
        )
        why_zh = (
            f"：同样的算子、更大的输入（{shape.op_type} 为 [{shape.shape_slow}]，其他步为 "
            f"[{shape.shape_other}]），即工作量随数据变化（这些步的序列更长或批更大）"
        )
        rem = Remedy(
            "action",
            "Even out the work per step: pack or bucket samples to a fixed token budget per "
            "micro-batch (or cap the sequence length), so that no step carries much more than the "
            "others.",
            "让每步的工作量一致：按固定 token 数打包或分桶组 batch（或限制最大序列长度），避免个别步的计算量远大于其他步。",
            gain,
            BoundKind.ESTIMATE,
        )
    else:
        why = ""
        why_zh = ""
        rem = Remedy(
            "action",
            f"Find what the training loop does in steps {sp}{every} that it does not do in the "
            "others (the operators above: a periodic extra forward / backward, metrics computed "
            "on the device, a larger batch) and move it out of the step or run it less often.",
            f"查明训练循环在第 {sp_zh} 步{every_zh}做了哪些其他步不做的事（即上述算子：周期性的额外前向/反向、"
            "在设备上计算的指标、更大的批），把它移出训练步或降低频率。",
            gain,
            BoundKind.ESTIMATE,
        )
    en = (
        f"{head}{why}. It costs {ms(gain)} per step averaged over the captured steps "
        f"({pct(share_of(excess, total))} of the captured time)."
    )
    zh = (
        f"{head_zh}{why_zh}。平均到每个采集步，它每步耗时 {ms(gain)}（占采集时间的 "
        f"{pct(share_of(excess, total))}）。"
    )
    label = f"steps {sp} (every rank)"
    label_zh = f"第 {sp_zh} 步（每张卡）"
    return [
        RootCause(
            id="cause.slow_steps",
            mechanism=Mechanism.JOB_HOTSPOT,
            category=Category.COMPUTE,
            culprit=Culprit(kind="job", label=label, label_zh=label_zh),
            victims=every_rank_loses(ctx, gain),
            summary=en,
            summary_zh=zh,
            metrics={
                "slow_steps_count": float(len(ss.steps)),
                "captured_steps_count": float(len(ss.all_steps)),
                "step_us_slow_steps": ss.step_us_slow,
                "step_us_other_steps": ss.step_us_other,
                "computing_extra_us_per_slow_step": ss.computing_extra_us,
                "extra_us_per_slow_step": excess / len(ss.steps),
                "slow_steps_time_share": share_of(excess, total),
                **({"extra_forward_passes": float(ss.forward_passes)} if ss.forward_passes else {}),
                **({"slow_step_interval": float(ss.interval)} if ss.interval else {}),
                **metrics_extra,
                "saving_us_per_step": gain,
            },
            findings=(),
            steps=ss.steps,
            gain_us=gain,
            bound=BoundKind.ESTIMATE,
            remedies=(rem,),
            symptom_tags=("slow_steps",),
            severity=_severity(gain, ctx.step_us),
        )
    ]
