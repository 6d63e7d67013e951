"""Job-level rules: the same idle, exposed communication or one dominant item on every rank."""

from __future__ import annotations

import dataclasses
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple

import pandas as pd

from advisor_chat.analyzers._common import format_ranks, groups_table, is_p2p, missing_ranks
from advisor_chat.analyzers.base import Category, Finding, FindingKind
from advisor_chat.diagnosis.context import Context, ranks_label
from advisor_chat.diagnosis.decompose import (
    CollectiveContext,
    CollectiveTypes,
    DeviceCopies,
    DominantCollective,
    GatherFeeds,
    GraphRuns,
    JobIdleShape,
    JobItem,
    LaunchLoop,
    MoePadding,
    NewShapeIdle,
    RepeatedCollective,
    SyncStalls,
    _compute_kernels,
    collective_context,
    device_copies,
    dominant_collective,
    event_waits,
    expert_load,
    gather_feeds,
    graph_runs,
    is_copy,
    job_account,
    job_idle_shape,
    launch_loop,
    moe_padding,
    new_groups,
    new_shape_idle,
    op_family,
    pass_sync,
    repeated_collective,
    sync_stalls,
    top_launch_api,
)
from advisor_chat.diagnosis.evidence import FUSION_ZH, explain_hotspot
from advisor_chat.diagnosis.python_work import (
    HOST_OPERATOR,
    PythonWork,
    frame_meaning,
    frame_remedy,
    per_launch_frames,
    python_work,
)
from advisor_chat.diagnosis.rules.common import (
    EXPOSED_MIN_SHARE,
    IDLE_MIN_SHARE,
    MANY_COLLECTIVES,
    SMALL_TIME_SHARE,
    VICTIM_MIN_SHARE,
    _claim,
    _severity,
    every_rank_loses,
    host_timeline,
    presence_scope,
    slow_collective_types,
)
from advisor_chat.diagnosis.text import (
    COLLECTIVE_NAMES,
    integer,
    ms,
    num,
    pct,
    share_of,
    upper_first,
)
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Impact,
    Mechanism,
    Remedy,
    RootCause,
)
from advisor_chat.ingest.profile import PEER_SAMPLE
from advisor_chat.ingest.trace import MEMORY_CALL
from advisor_chat.ranks import spread_sample


def rule_job_idle(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Job-idle rule: the same idle on every rank is one cause of the job, not of a rank.

    Rule: every rank's Free is ≥ ``IDLE_MIN_SHARE`` (10%) of its step, and so is the Free every
    rank shares (the minimum over ranks), however much more some ranks idle: the shared part is
    the job's, the excess of a rank above it is that rank's own cause (a host stall). Victims: every
    rank, lost = its Free, or the shared Free when late ranks have their own host-stall / straggler
    causes (``how="idle"``; their excess is counted there, not twice). Gain (upper bound): the minimum Free over ranks (what every rank could get
    back together). Source: ``step_trace`` Free.
    """
    per = ctx.per_rank
    if per.empty or len(per) < 2 or not math.isfinite(ctx.step_us):
        return []
    share = per["free_us"] / per["step_us"]
    if float(share.min()) < IDLE_MIN_SHARE:
        return []
    spread = float(per["free_us"].max() - per["free_us"].min())
    gain = float(per["free_us"].min())
    # the part of the idle every rank shares is the job's, however much more some ranks idle
    # (that excess is the late ranks' own cause)
    if gain < IDLE_MIN_SHARE * ctx.step_us:
        return []
    med = float(per["free_us"].median())
    # scope: the steps whose median Free over ranks is ≥ IDLE_MIN_SHARE of the step and ≥ 2x the
    # median over steps (a stall in some steps); () when every step idles alike
    by_step = ctx.frame.groupby("step")[["free_us", "step_us"]].median()
    hit = by_step[
        (by_step["free_us"] >= IDLE_MIN_SHARE * by_step["step_us"])
        & (by_step["free_us"] >= 2 * float(by_step["free_us"].median()))
    ]
    steps: tuple[int, ...] = ()
    if 0 < len(hit) < len(by_step):
        steps = tuple(integer(x) for x in hit.index)
    if steps and any(
        c.culprit.kind == "job" and c.steps and set(steps) <= set(c.steps) for c in causes
    ):
        return []  # the idle of some steps is the slow steps' cause (one fault, told once)
    start = ctx.finding("host_dispatch.dataloader.step_start")
    si = start[0].metrics.get("step_start_idle_us", math.nan) if start else math.nan
    # the step-start idle is part of Free only when measured as the device gap before the step's
    # first kernel; step_trace's Preparing (framework step start -> first device task) lies
    # before the device span that Computing + Communication + Free cover (ascend-formats 1.5)
    prep = math.nan
    if start and math.isfinite(si) and not _start_gap_in_free(ctx, si):
        prep, si, start = si, math.nan, []
    where = " at the start of the step (input pipeline)" if start else ""
    timeline, timeline_zh = host_timeline(ctx)
    where_zh = "，发生在步的开始处（数据输入）" if start else ""
    if math.isfinite(si):  # how much of the Free is before the step's first kernel
        where = f", {ms(si)} of it at the start of the step (input pipeline)"
        where_zh = f"，其中 {ms(si)} 发生在步的开始处（数据输入）"
    # the host blocked in its own memory calls at the step's start (a pinned buffer made anew)
    alloc = _alloc_calls(ctx, si) if start and math.isfinite(si) else None
    if alloc is not None:  # the host's own calls, not the input pipeline
        where = where.replace(" (input pipeline)", "") + alloc[0]
        where_zh = where_zh.replace("（数据输入）", "") + alloc[1]
    # the device is not idle: it runs host <-> device copies as tasks of their own (counted as
    # Free by the step trace), in line with its kernels
    dc = device_copies(ctx.profile, ctx.ranks)
    if dc is not None and (
        dc.us_per_step < COPIES_FREE_SHARE * med or dc.overlapped_share > COPIES_OVERLAP_MAX
    ):
        dc = None
    if dc is not None:
        start, where, where_zh, si = [], "", "", math.nan
    # idle in some steps only, right before operators whose input shapes are new there: the
    # host builds (compiles) an operator for each shape it has not seen
    ns = (
        new_shape_idle(ctx.profile, ctx.ranks, steps)
        if steps and not start and dc is None
        else None
    )
    # the host blocked in synchronize calls (tensor.item(), .cpu()): the idle right after them
    ss = sync_stalls(ctx.profile, ctx.ranks) if ns is None and dc is None else None
    if ss is not None and ss.idle_us < SYNC_IDLE_SHARE * gain:
        ss = None
    if start and ss is not None:
        if ss.held_us >= HELD_START_SHARE * (si if math.isfinite(si) else gain):
            # the step-start idle passes inside the host's blocking calls (copies from pageable
            # memory): what the input waits for is those calls, not the data loader
            start, where, where_zh = [], "", ""
        else:
            ss = None
    shape = (
        None
        if start or ns is not None or ss is not None or dc is not None
        else job_idle_shape(ctx.profile, ctx.ranks)
    )
    # what the host runs in the idle after its synchronize calls (with_stack / cpu_op frames)
    sync_work = _gap_work(ctx, ss.ranks, ss.idle_us, steps) if ss is not None else None
    # a compiled model split into graphs the device waits for (graph breaks)
    graphs = graph_runs(ctx.profile, ss.ranks) if ss is not None else None
    dispatch = (
        _copies_text(dc, gain)
        if dc is not None
        else _new_shape_text(ns, gain)
        if ns is not None
        else _sync_text(ss, gain, sync_work, steps, graphs)
        if ss is not None
        else _idle_shape_text(
            shape,
            gain,
            med,
            launch_loop(ctx.profile, ctx.ranks, shape.before)
            if shape.kind == "before_ops"
            else None,
            router=_router_ops(ctx) if shape.kind == "tiny_run" else None,
        )
        if shape is not None
        else _job_dispatch_bound(ctx, gain, si if math.isfinite(si) else 0.0)
    )
    # the user functions the host runs over and over in each step (with_stack): Python work
    # per operator that keeps the host from staying ahead of the device
    frames_txt = (
        _per_launch_text(ctx, gain)
        if dispatch is not None
        and ss is None
        and dc is None
        and not (shape is not None and shape.kind == "stretch")
        else None
    )
    if frames_txt is not None:
        dispatch = (
            (dispatch[0] if dispatch else "") + frames_txt[0],
            (dispatch[1] if dispatch else "") + frames_txt[1],
            (frames_txt[2], *(dispatch[2] if dispatch else ())),
        )
    # one stretch at a fixed point of the step: what the host runs then (with_stack frames)
    stretch_us = (
        min(shape.idle_us, shape.share * med)
        if shape is not None and shape.kind == "stretch" and med > 0
        else math.nan
    )
    gap = (
        _gap_work(ctx, spread_sample(sorted(ctx.ranks), PEER_SAMPLE), stretch_us, steps)
        if dispatch is not None and math.isfinite(stretch_us)
        else None
    )
    if dispatch is not None and gap is not None:
        g_en, g_zh, g_rem = _sync_work_text(gap, min(stretch_us, gain), steps)
        dispatch = (
            dispatch[0] + g_en.replace("in that gap", "in that stretch"),
            dispatch[1] + g_zh.replace("这段空闲里", "这一整段里"),
            (g_rem, *dispatch[2]),
        )
    if dispatch is not None:
        where += f", {dispatch[0]}"
        where_zh += f"，{dispatch[1]}"
    if steps and ns is None:  # (the new-shape text names its steps)
        st = ", ".join(str(x) for x in steps)
        where += f", concentrated in step(s) {st}"
        where_zh += f"，集中在第 {st} 步"
    if math.isfinite(prep):
        where += (
            f"; besides, each step's first device task starts {ms(prep)} after the framework's "
            "step start (Preparing, outside this Free: input pipeline or host work)"
        )
        where_zh += (
            f"；此外，每步第一个设备任务在框架的步开始后 {ms(prep)} 才执行（Preparing，不计入上述空闲："
            "数据输入或主机侧工作）"
        )
    # a folder that lacks some of the job's ranks: the statement covers the ranks present, and a
    # missing rank could be slow
    missing = missing_ranks(ctx.profile)
    sc = presence_scope(ctx, missing)
    if missing:
        who, who_zh = "the ranks present wait", "现有的卡"
        slow = (
            f"none of them is slow; whether one of the {len(missing)} missing rank(s) is, "
            "these ranks cannot tell"
        )
        slow_zh = f"其中没有慢卡；缺少的 {len(missing)} 张卡是否慢，从现有数据无法判断"
    else:
        who, who_zh = "the whole job waits", "整个作业"
        slow, slow_zh = "no rank is slow", "没有慢卡"
    # one stretch right before a collective that runs on a group no other step uses: the host
    # builds a new communicator there in every step (dist.new_group inside the training loop)
    ng = (
        new_groups(ctx.profile)
        if shape is not None
        and shape.kind == "stretch"
        and shape.before
        and shape.before[0].lower().startswith(("hcom", "hccl"))
        else None
    )
    if ng is not None and ng.same_members:
        st = ", ".join(str(x) for x in ng.steps)
        where += (
            f"; each of steps {st} runs that collective on a communication group no other step "
            f"uses ({ng.count} new groups in the capture, {ng.per_step:g} per step, {ng.size} "
            "members, the same members as a group the other steps keep): the host builds a new "
            "HCCL communicator there every step"
        )
        where_zh += (
            f"；第 {st} 步中每一步的这个集合通信都用了一个其他步没有用过的通信域（采集期间共新建 "
            f"{ng.count} 个，每步 {ng.per_step:g} 个，"
            f"{ng.size} 个成员，与其他步一直使用的通信域成员相同）：主机每步都在这里新建一个 HCCL 通信器"
        )
        dispatch = (
            "",
            "",
            (
                Remedy(
                    "action",
                    "Create the communication group once, before the training loop, and reuse it: "
                    "a dist.new_group (or an HCCL communicator) created inside the loop is built "
                    "again in every step, and the device idles while the host sets it up.",
                    "在训练循环开始前只创建一次通信域并重复使用：在循环内调用 dist.new_group（或新建 HCCL "
                    "通信器）会在每一步重新建立通信器，主机建立期间设备一直空闲。",
                    gain,
                    BoundKind.UPPER_BOUND,
                ),
            ),
        )
    # the host launches late (dispatch-bound, or late before some operators): a host stall of the
    # job; one stretch at a fixed point of the step is the job waiting for off-device work
    host_late = (
        dispatch is not None
        and dc is None
        and (
            # (a stretch is off-device work, unless the host's own frames fill it)
            gap is not None
            or not (
                shape is not None
                and shape.kind == "stretch"
                and (ng is None or not ng.same_members)
            )
        )
    )
    outside, outside_zh = (
        "something outside the device (input data, rollout, host work or synchronization)",
        "设备之外的东西（输入数据、推理采样、主机侧工作或同步）",
    )
    if dc is not None:
        outside, outside_zh = (
            "the copies its devices run between their kernels (not the host: the device is busy "
            "copying while the step trace calls it Free)",
            "设备在算子之间执行的拷贝（不是主机：设备在拷贝，只是 step_trace_time.csv 把这段时间算作空闲）",
        )
    elif ng is not None and ng.same_members:
        outside, outside_zh = (
            "its host to set up a communication group (host-bound)",
            "主机建立通信域（下发瓶颈）",
        )
    elif shape is not None and shape.kind == "stretch" and gap is not None:
        outside, outside_zh = (
            "its host, busy in its own code at that point of the step (host-bound)",
            "在步的这个位置忙于自身代码的主机（下发瓶颈）",
        )
    elif shape is not None and shape.kind == "stretch":
        outside, outside_zh = (
            "work done off the device at that point of the step",
            "在步的这个位置、设备之外进行的工作",
        )
    elif ss is not None and sync_copies(ss):
        outside, outside_zh = (
            "its host, blocked in per-step copies from pageable memory (host-bound)",
            "被每步从可分页内存拷贝所阻塞的主机（下发瓶颈）",
        )
    elif ss is not None:
        outside, outside_zh = (
            "its host, blocked in per-step synchronizations (host-bound)",
            "被每步同步阻塞的主机（下发瓶颈）",
        )
    elif dispatch is not None:
        outside, outside_zh = "its host to dispatch work (host-bound)", "主机下发任务（下发瓶颈）"
    blamed = sorted(
        {
            r
            for c in causes
            if c.mechanism in (Mechanism.HOST_STALL, Mechanism.COMPUTE_STRAGGLER)
            for r in c.culprit.ranks
        }
    )
    # each rank loses its Free to this cause; when late ranks have their own causes, only the
    # idle every rank shares (their excess above it is counted there, not twice)
    victims = tuple(
        sorted(
            (
                Impact(
                    integer(r),
                    lost,
                    share_of(lost, num(per.at[r, "step_us"])),
                    "idle",
                )
                for r in per.index
                for lost in [gain if blamed else num(per.at[r, "free_us"])]
            ),
            key=lambda i: (-i.lost_us, i.rank),
        )
    )
    if blamed:  # the shared idle is the job's; the late ranks' excess above it is their own
        bl, bl_zh = ranks_label(blamed)
        slow = (
            f"every rank shares at least {ms(gain)} of it; {bl} idle more than the others, "
            "which is their own cause"
        )
        slow_zh = (
            f"每张卡至少共有 {ms(gain)} 的空闲；{bl_zh}比其他卡空闲得更多，那部分是它们各自的原因"
        )
    findings = _claim(
        ctx,
        lambda f: (
            f.id.startswith("cluster_breakdown.host_bound.free_share")
            or f.id.startswith("host_dispatch.dataloader.")
            or (
                shape is not None
                and shape.kind == "tiny_run"
                and f.id.startswith("host_dispatch.host_bound.tiny_kernels")
            )
            or (f.kind is FindingKind.JITTER and len(f.ranks) >= len(per) // 2)
            # the devices' wait for launches is this cause's own evidence when the host is late
            or (
                host_late
                and f.id.startswith("host_dispatch.host_bound.host_wait")
                and len(f.ranks) >= len(per) // 2
            )
        ),
    )
    return [
        RootCause(
            # a job-wide idle whose evidence is the host dispatch is a host stall of the job
            id="cause.job_host_dispatch" if host_late else "cause.job_idle",
            mechanism=Mechanism.HOST_STALL if host_late else Mechanism.JOB_IDLE,
            category=Category.SCHEDULING,
            culprit=Culprit(
                kind="job",
                ranks=(),
                # the one operator whose launches the idle precedes ("those operators")
                operator=shape.before[0]
                if shape is not None and shape.kind == "before_ops" and len(shape.before) == 1
                else "",
                label="the whole job",
                label_zh="整个作业",
            ),
            victims=victims,
            summary=(
                f"{sc.every[0].upper()}{sc.every[1:]} shows Free {ms(med)} per step "
                f"(median share {pct(float(share.median()))} of the step; {ms(gain)} to "
                f"{ms(gain + spread)} "
                f"across ranks){where}; {slow}."
                if dc is not None
                else f"{sc.every[0].upper()}{sc.every[1:]} idles: median Free {ms(med)} per step "
                f"(median share {pct(float(share.median()))} of the step; {ms(gain)} to "
                f"{ms(gain + spread)} "
                f"across ranks){where}: {who} for {outside}, {slow}."
            ),
            summary_zh=(
                f"{sc.every_zh}每步的空闲（Free）为 {ms(med)}（中位占比为步长的 {pct(float(share.median()))}，"
                f"各卡在 {ms(gain)} 到 {ms(gain + spread)} 之间）{where_zh}；{slow_zh}。"
                if dc is not None
                else f"{sc.every_zh}都在空闲：每步空闲时间中位数 {ms(med)}（中位占比为步长的 {pct(float(share.median()))}，"
                f"各卡在 {ms(gain)} 到 {ms(gain + spread)} 之间）{where_zh}：{who_zh}在等{outside_zh}，"
                f"{slow_zh}。"
            ),
            metrics={
                **({"idle_placed_share": shape.share} if shape is not None else {}),
                **({"idle_stretch_us": stretch_us} if math.isfinite(stretch_us) else {}),
                **({"python_frame_us": gap.us} if gap is not None else {}),
                **({"python_frame_us": sync_work.us} if sync_work is not None else {}),
                # the host's own Python named (not the profiler's): no heavy-capture caveat
                **({"python_frame_us": frames_txt[3]} if frames_txt is not None else {}),
                "free_us_median": med,
                "free_share_median": float(share.median()),
                "free_spread_us": spread,
                "gain_upper_bound_us": gain,
                **({"sync_idle_us": ss.idle_us} if ss is not None else {}),
                **(
                    {
                        "graphs_per_step": graphs.graphs_per_step,
                        "graph_breaks_per_step": graphs.breaks_per_step,
                        "graph_break_idle_us": graphs.break_idle_us,
                    }
                    if graphs is not None and ss is not None and dc is None and ns is None
                    else {}
                ),
                # the host's memory calls that hold the idle at the step's start
                **(
                    {"host_memory_call_us": float(alloc[2].gain_us or 0.0)}
                    if alloc is not None
                    else {}
                ),
                **(
                    {
                        "copy_tasks_per_step": dc.per_step,
                        "copy_us_per_step": dc.us_per_step,
                        "copy_us_median": dc.each_us,
                    }
                    if dc is not None
                    else {}
                ),
            },
            findings=findings,
            steps=steps,
            # the synchronize calls' idle is what their remedy gets back (one figure for both)
            gain_us=_sync_gain(ss, gain)
            if ss is not None
            else min(gain, dc.us_per_step)
            if dc is not None
            else gain,
            # (the copies' idle is measured, what removing them gives is estimated from it: the
            # launches they delay also move)
            bound=BoundKind.ESTIMATE
            if ss is not None and sync_copies(ss)
            else BoundKind.UPPER_BOUND,
            remedies=(
                *(dispatch[2] if dispatch is not None else ()),
                *(
                    ()
                    # the idle is compilation, or between short kernels, or measured as waits
                    # for launches between kernels: placed, not the input
                    if ns is not None
                    or ss is not None
                    or dc is not None
                    or (shape is not None and shape.kind == "tiny_run")
                    or (host_late and not start)
                    else (alloc[2],)
                    if alloc is not None
                    # no host data places the idle: input is one of four possibilities, a thing
                    # to check (the check below), not the fix
                    else ()
                    if not start and not ctx.profile.has("host_dispatch")
                    else (
                        Remedy(
                            "action",
                            "Overlap input preparation with training: more dataloader workers, "
                            "prefetching and pinned memory, or an asynchronous rollout/producer.",
                            "让输入准备与训练重叠：增加 DataLoader 的 num_workers、预取并使用 pin_memory，"
                            "或改为异步的推理采样/数据生产者。",
                            gain,
                            BoundKind.UPPER_BOUND,
                        ),
                    )
                ),
                Remedy(
                    "check",
                    "Look at the MEMCPY_ASYNC tasks in the device lanes of trace_view.json (their "
                    "args give the direction and size) and at the code that issues them (the "
                    "aclrtMemcpyAsync calls on the host): which tensors go to the host and back.",
                    "在 trace_view.json 的设备泳道里查看 MEMCPY_ASYNC 任务（参数中有方向和大小），以及发起它们的"
                    "代码（主机上的 aclrtMemcpyAsync 调用）：哪些张量被拷到主机又拷回来。",
                )
                if dc is not None
                else Remedy(
                    "check",
                    f"Look at the host timeline during the idle ({timeline}) "
                    "to see what the trainer waits for.",
                    f"查看空闲期间的主机时间线（{timeline_zh}），确认训练进程在等什么。",
                )
                if ctx.profile.has("host_dispatch")
                # e.g. cluster_analysis_output alone: no host timeline to point at
                else Remedy(
                    "check",
                    "Collect a few ranks with host data (torch_npu profiler with CPU activity: "
                    "trace_view.json in the text export, CANN_API in the DB export) to see what "
                    "the trainer waits for during the idle (this profile has none); if each step "
                    "starts with the devices waiting for input data, overlap input preparation "
                    "with training (more dataloader workers, prefetching and pinned memory, or an "
                    "asynchronous rollout/producer).",
                    "用带主机侧数据的方式重新采集几张卡（torch_npu 采集时打开 CPU 活动：文本导出中的 "
                    "trace_view.json，DB 导出中的 CANN_API 表），查看空闲期间训练进程在等什么（当前数据中没有）；"
                    "若每步开始时设备都在等输入数据，就让输入准备与训练重叠（增加 DataLoader 的 num_workers、"
                    "预取并使用 pin_memory，或改为异步的推理采样/数据生产者）。",
                ),
            ),
            symptom_tags=("high_free", "device_copies")
            if dc is not None
            else ("high_free", "dataloader_stall")
            if start
            else ("high_free", "host_bound", "dynamic_shape")
            if ns is not None
            else ("high_free", "host_bound", "pageable_copy")
            if ss is not None and sync_copies(ss)
            else ("high_free", "host_bound", "synchronize_stream")
            if ss is not None
            else ("high_free", "host_bound")
            if dispatch is not None
            else ("high_free",),
            severity=_severity(gain, ctx.step_us),
        )
    ]


#: Copy tasks explain a job-wide idle when they take at least this share of the median Free and at
#: most this share of their time overlaps a compute kernel (in line with the kernels).
COPIES_FREE_SHARE = 0.5
COPIES_OVERLAP_MAX = 0.2


#: The host's repeated Python functions name the dispatch bound when they take this share of
#: the idle every rank shares.
PER_LAUNCH_MIN_SHARE = 0.5


def _per_launch_text(ctx: Context, gain_us: float) -> tuple[str, str, Remedy, float] | None:
    """The user functions the host runs before its launches, when they hold the job's idle.

    From :func:`~advisor_chat.diagnosis.python_work.per_launch_frames`: the top frame's time per
    step at least ``PER_LAUNCH_MIN_SHARE`` of the shared idle ``gain_us``. Returns (clause,
    Chinese clause, remedy, the top frame's µs per step) or ``None``.
    """
    frames = per_launch_frames(ctx.profile, ctx.ranks)
    if not frames or frames[0].us_per_step < PER_LAUNCH_MIN_SHARE * gain_us:
        return None
    listed = ", ".join(
        f"`{f.frame}` ({f.calls_per_step:.0f} calls, {ms(f.us_per_step)})" for f in frames
    )
    listed_zh = "、".join(
        f"`{f.frame}`（{f.calls_per_step:.0f} 次，{ms(f.us_per_step)}）" for f in frames
    )
    top = frames[0]
    en = (
        f"; between its launches the host runs the same Python functions over and over, every "
        f"step: {listed} per step (trace_view.json Python frames, {top.each_us:.0f} µs per call "
        "of the first): Python work per operator, such as hooks registered on every module, "
        "keeps the host from staying ahead of the device"
    )
    zh = (
        f"；主机在两次下发之间每步都反复执行相同的 Python 函数：每步 {listed_zh}（trace_view.json 的 "
        f"Python 帧，第一个每次 {top.each_us:.0f} µs）：每个算子前的 Python 开销（例如注册在每个模块上的"
        "钩子 hook）让主机跟不上设备"
    )
    rem = Remedy(
        "action",
        f"Take `{top.frame}` out of the training steps: remove the hooks or tracers that run it "
        "before every operator (keep the handles of register_forward_hook / "
        "register_full_backward_hook and call .remove()), or register them on fewer modules and "
        "only for the steps you inspect.",
        f"把 `{top.frame}` 移出训练步：去掉在每个算子前运行它的钩子或跟踪器（保留 "
        "register_forward_hook / register_full_backward_hook 返回的句柄并调用 .remove()），"
        "或只在少数模块、只在需要观察的步上注册。",
        gain_us,
        BoundKind.UPPER_BOUND,
    )
    return en, zh, rem, top.us_per_step


#: The host's memory calls name the step-start idle when they take this share of it.
ALLOC_MIN_SHARE = 0.5


def _alloc_calls(ctx: Context, start_idle_us: float) -> tuple[str, str, Remedy] | None:
    """The host's memory allocation calls that hold the idle at the step's start.

    From ``host_dispatch`` rows of ``aclrtMalloc`` / ``aclrtFree`` / ``aclrtMallocHost`` /
    ``aclrtFreeHost`` (trace_view.json CANN API events; no device task): their time per (step,
    rank) (median over the sampled ranks) when at least ``ALLOC_MIN_SHARE`` of ``start_idle_us``.
    Pinned host memory allocated anew → reuse one pinned buffer; device memory → the caching
    allocator released and refilled every step. Returns (clause, Chinese clause, remedy) or None.
    """
    hd = ctx.profile.host_dispatch_for(spread_sample(sorted(ctx.ranks), PEER_SAMPLE))
    if hd.empty or not {"api_name", "api_duration_us", "step"} <= set(hd.columns):
        return None
    api = hd["api_name"].astype(str).str.split("@").str[-1]
    mem = hd[api.str.contains(MEMORY_CALL) & (hd["step"] >= 0)]
    if mem.empty:
        return None
    per = mem.groupby(["rank", "step"])["api_duration_us"].sum()
    us = float(per.groupby(level="rank").mean().median())
    if us < ALLOC_MIN_SHARE * start_idle_us:
        return None
    names = api[mem.index].value_counts()
    top = next((str(n) for n in names.index if "Malloc" in str(n)), str(names.index[0]))
    host = "Host" in " ".join(names.index[:2])
    calls = float(mem.groupby(["rank", "step"]).size().median())
    listed = " / ".join(names.index[:2])
    # each call's own duration (median per call): which of them holds the time
    each = mem.groupby(api[mem.index])["api_duration_us"].median()
    each_en = ", ".join(f"{n} {ms(float(each[n]))}" for n in names.index[:2])
    each_zh = "，".join(f"{n} {ms(float(each[n]))}" for n in names.index[:2])
    en = (
        f"; the host spends {ms(us)} per step of it in memory calls ({listed}, {calls:.0f} per "
        f"step, each call (median) {each_en}; trace_view.json CANN API): "
        + (
            "a new pinned (page-locked) host buffer allocated and freed for every batch"
            if host
            else "the device memory allocator freed and allocated again every step"
        )
    )
    zh = (
        f"；主机每步有 {ms(us)} 花在内存调用上（{listed}，每步 {calls:.0f} 次，单次（中位数）"
        f"{each_zh}；trace_view.json 的 CANN API）："
        + (
            "每个 batch 都重新申请并释放一块锁页（pinned）主机内存"
            if host
            else "设备内存每步都被释放后重新申请"
        )
    )
    rem = (
        Remedy(
            "action",
            f"Allocate the pinned host buffer once and reuse it ({top} runs every step now): "
            "let the DataLoader pin batches in its workers (pin_memory=True) or copy into one "
            "preallocated pinned staging tensor, instead of .pin_memory() on a new tensor per "
            "batch.",
            f"只申请一次锁页主机缓冲区并重复使用（现在每步都在调用 {top}）：让 DataLoader 在 worker 中完成"
            "锁页（pin_memory=True），或拷贝到一块预先分配的锁页缓冲区，而不是每个 batch 对新张量调用 "
            ".pin_memory()。",
            us,
            BoundKind.ESTIMATE,
        )
        if host
        else Remedy(
            "action",
            f"Keep the caching allocator's memory across steps ({top} runs every step now): no "
            "torch.npu.empty_cache() in the loop, and reuse buffers of a fixed size.",
            f"让缓存分配器的显存跨步保留（现在每步都在调用 {top}）：循环中不要调用 "
            "torch.npu.empty_cache()，并复用固定大小的缓冲区。",
            us,
            BoundKind.ESTIMATE,
        )
    )
    return en, zh, rem


def _copies_text(dc: DeviceCopies, gain_us: float) -> tuple[str, str, tuple[Remedy, ...]]:
    """The job-idle clause and remedy when the 'idle' device runs copy tasks in line with kernels."""
    api = dc.api.split("@")[-1] or "a copy call"
    en = (
        f"but the device is busy then: it runs {dc.per_step:.0f} MEMCPY_ASYNC copy tasks per step "
        f"({api}, {ms(dc.each_us)} each, {ms(dc.us_per_step)} per step), in line with its kernels "
        f"on the compute stream ({pct(dc.overlapped_share)} of their time overlaps a kernel), "
        "and the step trace counts them as Free; host <-> device copies in the middle of every "
        "step on every rank are activation offloading (saved tensors copied to host memory in "
        "the forward and back in the backward) or explicit .to()/.cpu() transfers, none of them "
        "overlapped with compute"
    )
    zh = (
        f"但设备这时并没有闲着：它每步执行 {dc.per_step:.0f} 个 MEMCPY_ASYNC 拷贝任务（{api}，每个 "
        f"{ms(dc.each_us)}，每步共 {ms(dc.us_per_step)}），在计算流上与算子串行执行（与算子重叠的时间占 "
        f"{pct(dc.overlapped_share)}），step_trace_time.csv 把它们算作空闲；每张卡每步中间都在做主机与设备之间的拷贝，"
        "这是激活值卸载（offload：前向把保存的张量拷到主机内存，反向再拷回）或显式的 .to()/.cpu() 传输，"
        "而且都没有与计算重叠"
    )
    rem = Remedy(
        "action",
        f"Overlap the copies with computation: issue the offload copies on a separate stream and "
        "prefetch the next layer's tensors during the backward (e.g. MindSpeed --swap-attention, "
        "or an offload hook with its own copy stream), so the kernels no longer wait behind them; "
        f"if the memory allows, recompute those activations instead of offloading them "
        f"({ms(dc.us_per_step)} of copies per step).",
        "让拷贝与计算重叠：把卸载拷贝放到独立的拷贝流上，并在反向时预取下一层的张量（例如 MindSpeed "
        "--swap-attention，或自带拷贝流的 offload 钩子），这样算子就不必排在拷贝后面等待；显存允许时，"
        f"用重计算代替卸载这些激活值（每步拷贝 {ms(dc.us_per_step)}）。",
        min(gain_us, dc.us_per_step),
        BoundKind.UPPER_BOUND,
    )
    return en, zh, (rem,)


def _new_shape_text(ns: NewShapeIdle, gain_us: float) -> tuple[str, str, tuple[Remedy, ...]]:
    """The idle of some steps placed before operators with first-seen input shapes.

    Operator compilation for new shapes (dynamic shapes); returns (English, Chinese, remedies).
    """
    st = ", ".join(str(x) for x in ns.steps)
    ops = ", ".join(ns.ops)
    eg = "; ".join(f"[{x}]" for x in ns.shapes)
    reused = ", ".join(str(x) for x in ns.reused_steps)
    again_en = (
        f"; step{'s' if len(ns.reused_steps) > 1 else ''} {reused} "
        f"run{'' if len(ns.reused_steps) > 1 else 's'} the same shapes again "
        "without that idle (the operators built once are reused)"
        if ns.reused_steps
        else ""
    )
    again_zh = (
        f"；第 {reused} 步再次使用这些 shape 时没有这段空闲（已编译的算子被复用）" if reused else ""
    )
    en = (
        f"in step{'s' if len(ns.steps) > 1 else ''} {st}, {pct(ns.idle_share)} of the idle sits "
        f"right before {ns.kernels_per_step:.0f} kernels whose input shapes were not seen in "
        f"earlier steps ({ops}; e.g. {eg}), {ms(ns.idle_us)} per step: the host compiles an "
        f"operator for each new shape (dynamic shapes){again_en}"
    )
    zh = (
        f"在第 {st} 步，{pct(ns.idle_share)} 的空闲紧挨在 {ns.kernels_per_step:.0f} 个输入 shape "
        f"在之前各步从未出现过的算子之前（{ops}；如 {eg}），每步 {ms(ns.idle_us)}：主机在为每个新 shape "
        f"编译算子（动态 shape）{again_zh}"
    )
    rem = Remedy(
        "action",
        "Make the input shapes static: pad sequences to a few fixed lengths (bucketing with "
        "padding), run every bucket once in a warm-up before timing, and use the pre-compiled "
        "binary operators (torch_npu.npu.set_compile_mode(jit_compile=False)) so a new shape "
        "does not compile online.",
        "让输入 shape 固定：把序列补齐到少数几个固定长度（分桶并补齐），正式计时前先用每个桶预热一次，"
        "并使用预编译的二进制算子（torch_npu.npu.set_compile_mode(jit_compile=False)），避免新 shape "
        "在线编译。",
        gain_us,
        BoundKind.UPPER_BOUND,
    )
    return en, zh, (rem,)


#: Synchronize calls explain the job's idle when the device idle right after them is at least
#: this share of the Free every rank shares.
SYNC_IDLE_SHARE = 0.5

_SYNC_WHERE = {
    "after_forward": ("after the forward pass, before the backward", "前向之后、反向之前"),
    "after_backward": (
        "after the backward pass, before the optimizer step",
        "反向之后、优化器更新之前",
    ),
    "forward": ("inside the forward pass", "前向过程中"),
    "backward": ("inside the backward pass", "反向过程中"),
    "step": ("in the step", "步内"),
}


def _start_gap_in_free(ctx: Context, start_idle_us: float) -> bool:
    """Whether the step-start idle is the device gap before the step's first kernel (in Free).

    ``host_dispatch`` ``step_start_idle_us`` measures that gap from the kernels; the dataloader
    finding takes the larger of it and step_trace's Preparing. When the gap holds at least half of
    the finding's figure, the idle is inside the device span, else it is Preparing.
    """
    res = ctx.result("host_dispatch")
    if res is None or res.table.empty or "step_start_idle_us" not in res.table.columns:
        return False
    gap = float(res.table["step_start_idle_us"].median())
    return math.isfinite(gap) and gap >= 0.5 * start_idle_us


#: A step-start idle is the host's blocking calls' (not the data loader's) when the device idles
#: inside them for at least this share of it.
HELD_START_SHARE = 0.5

#: Operators that check values for NaN / Inf (the host reads their boolean result).
NAN_CHECK_OPS = re.compile(r"isnan|isinf|isfinite|reduceany|reduceall|checknumerics", re.I)


def sync_copies(ss: SyncStalls) -> bool:
    """Whether blocking copies (``aclrtMemcpy``), not synchronizes, hold most of the idle."""
    copy_idle = sum(x.idle_us for x in ss.spots if is_copy(x.api))
    return copy_idle >= 0.5 * sum(x.idle_us for x in ss.spots)


#: The compute stream's idle after the calls counts as their cost when it is at least this many
#: times the idle with no task running (the rest fell while collectives ran).
SYNC_HIDDEN_RATIO = 1.5


def _hidden_sync(ss: SyncStalls) -> bool:
    """Whether most of the compute stream's wait after the calls falls while collectives run."""
    return not sync_copies(ss) and ss.compute_idle_us >= SYNC_HIDDEN_RATIO * ss.idle_us


def _sync_gain(ss: SyncStalls, shared_free_us: float) -> float:
    """What taking the synchronize calls out gives back per step (µs).

    The idle right after them (bounded by the Free every rank shares), or, when most of the
    compute stream's wait after them falls while collectives run (:func:`_hidden_sync`), that
    whole wait: without the calls the computation would run under those collectives.
    """
    if _hidden_sync(ss):
        return ss.compute_idle_us
    return min(ss.idle_us, shared_free_us)


#: The host work in the gap after the synchronize calls is named when it lasts at least this share
#: of the idle there, in at least half of the (step, rank) pairs read.
SYNC_WORK_SHARE = 0.5


#: Host operators that build a triangular (causal attention) mask.
_HOST_MASK = re.compile(r"^aten::(?:tril|triu)(?:_|$)")


def _gap_work(
    ctx: Context, ranks: Sequence[int], idle_us: float, steps: Sequence[int] = ()
) -> PythonWork | None:
    """What the host runs in an idle every rank shares, on the ranks read.

    The idle after the host's synchronize calls, or one stretch of the step.
    :func:`~advisor_chat.diagnosis.python_work.python_work` over every (step, rank) pair of
    ``ranks``: the call-free frame (Python, or a framework operator on the host) of at least
    ``SYNC_WORK_SHARE`` of ``idle_us``, found in at least half of the pairs. ``steps``: the steps
    the idle is concentrated in (every step when empty). ``None`` without frames (no with_stack /
    CPU activity, the DB export).
    """
    if not steps:
        steps = sorted(int(x) for x in ctx.frame["step"].unique()) if "step" in ctx.frame else []
    pairs = [(s, r) for r in ranks for s in steps]
    if not pairs:
        return None
    pw = python_work(ctx.profile, pairs, min_us=SYNC_WORK_SHARE * idle_us)
    if pw is None or len(pw.pairs) < 0.5 * max(pw.of_pairs, 1):
        return None
    return pw


#: A host frame that reads a device value into Python (tensor.item(), bool(tensor)).
_READS_VALUE = re.compile(r"aten::(?:item|_local_scalar_dense|is_nonzero)\b")


def _sync_work_text(
    pw: PythonWork, gain: float, steps: Sequence[int] = ()
) -> tuple[str, str, Remedy]:
    """Clause (en, zh) and first change for the host work found after the synchronize calls.

    ``steps``: the steps the idle is concentrated in; then the host operator is a periodic task
    (statistics or logging every N steps) and running it less often comes first.
    """
    f = pw.function
    st = "、".join(str(x) for x in steps)
    often, often_zh = (
        (
            f"{f} runs only in steps {', '.join(str(x) for x in steps)} (a periodic task: "
            "statistics or logging every N steps): run it less often, or ",
            f"{f} 只在第 {st} 步运行（每隔若干步的统计或记录任务）：降低它的频率，或",
        )
        if steps
        else ("", "")
    )
    per, per_zh = ("in each step it hits", "受影响的每步") if steps else ("per step", "每步")
    n = f"{len(pw.pairs)} of {pw.of_pairs}"
    built = [x for x in (pw.frame, *pw.also) if _HOST_MASK.match(x)]
    if HOST_OPERATOR.match(pw.frame) and built:
        # a triangular tensor made on the host: the causal attention mask, built and copied
        names = (pw.frame, *pw.also)
        ops = " and ".join((", ".join(names[:-1]), names[-1])) if len(names) > 1 else names[0]
        en = (
            f"; in that gap the host computes {ops} ({ms(pw.us)} {per}; {n} (step, rank) pairs "
            "read; trace_view.json cpu_op) with no launch inside it: a triangular (causal "
            "attention) mask is built on the host CPU, then copied to the device"
        )
        zh = (
            f"；这段空闲里主机在计算 {'、'.join((pw.frame, *pw.also))}（{per_zh} {ms(pw.us)}；读取的 (step, rank) "
            f"中有 {len(pw.pairs)}/{pw.of_pairs} 个；trace_view.json 的 cpu_op），其中没有任何下发："
            "三角形的（因果注意力）掩码在主机 CPU 上构造，再拷到设备上"
        )
        rem = Remedy(
            "action",
            f"Build the attention mask on the NPU once and reuse it ({built[0]} runs on the host "
            "now): create it with device='npu' outside the loop, or let the fused attention "
            "apply the causal mask itself (FlashAttention's causal / sparse_mode setting) "
            "instead of passing a full mask.",
            f"在 NPU 上构造一次注意力掩码并复用（现在 {built[0]} 在主机上运行）：在循环外用 device='npu' 创建，"
            "或让融合注意力自己处理因果掩码（FlashAttention 的 causal / sparse_mode 设置），不再传入完整掩码。",
            gain,
            BoundKind.ESTIMATE,
        )
        return en, zh, rem
    if _READS_VALUE.match(pw.frame):
        # tensor.item(): Python reads a device value (and branches or logs on it), no fallback
        en = (
            f"; in that gap the host runs {f} ({ms(pw.us)} {per}; {n} (step, rank) pairs read; "
            "trace_view.json cpu_op): Python reads a value from the device (tensor.item(), "
            "bool(tensor), an if on a tensor) and waits for it before launching more"
        )
        zh = (
            f"；这段空闲里主机在执行 {f}（{per_zh} {ms(pw.us)}；读取的 (step, rank) 中有 "
            f"{len(pw.pairs)}/{pw.of_pairs} 个；trace_view.json 的 cpu_op）：Python 从设备读取一个值"
            "（tensor.item()、bool(tensor)、对张量做 if 判断），等它返回后才继续下发"
        )
        rem = Remedy(
            "action",
            f"{often}Stop reading device values in the step ({f}): no tensor.item() / bool(tensor) "
            "/ if on a tensor per step or per layer; keep the check on the device (torch.where, "
            "masking) or read it every N steps.",
            f"{often_zh}不要在训练步里读取设备上的值（{f}）：不要每步或每层调用 tensor.item()、bool(tensor) "
            "或对张量做 if 判断；把判断留在设备上（torch.where、掩码），或每 N 步读取一次。",
            gain,
            BoundKind.UPPER_BOUND,
        )
        return en, zh, rem
    if HOST_OPERATOR.match(pw.frame):
        en = (
            f"; in that gap the host runs {f} ({ms(pw.us)} {per} with its copies to and from "
            f"the device; {n} (step, rank) pairs read; trace_view.json cpu_op) with no launch "
            "inside it: the operator computes on the "
            "host CPU, its input copied from the device first (the synchronize) and its result "
            "copied back — an operator with no NPU kernel falling back to the CPU, or a tensor "
            "moved to the CPU in the code"
        )
        zh = (
            f"；这段空闲里主机在执行 {f}，{per_zh} {ms(pw.us)}（含与设备之间的拷贝；读取的 (step, rank) 中有 {len(pw.pairs)}/"
            f"{pw.of_pairs} 个；trace_view.json 的 cpu_op），其中没有任何下发：该算子在主机 CPU 上计算，"
            "先把输入从设备拷回主机（即那次同步），算完再把结果拷回设备——没有 NPU 实现的算子回退到了 CPU，"
            "或代码把张量挪到了 CPU 上"
        )
        keep = "keep it on the NPU" if often else f"Keep {f} on the NPU"
        keep_zh = "让它留在 NPU 上计算" if often else f"让 {f} 留在 NPU 上计算"
        rem = Remedy(
            "action",
            f"{often}{keep}: write it with operators the NPU runs (comparisons, gathers, "
            "searchsorted), or use a torch_npu / CANN version with an NPU kernel for it; the "
            "run's torch_npu warnings list the operators that fall back to the CPU.",
            f"{often_zh}{keep_zh}：用 NPU 支持的算子改写（比较、gather、searchsorted），或换用带有该"
            "算子 NPU 实现的 torch_npu / CANN 版本；运行日志里 torch_npu 的告警会列出回退到 CPU 的算子。",
            gain,
            BoundKind.ESTIMATE,
        )
        return en, zh, rem
    means, means_zh = frame_meaning(pw)
    en = (
        f"; in that gap the host runs the Python frame `{f}`{means} for {ms(pw.us)} {per} ({n} "
        "(step, rank) pairs read; trace_view.json python_function) with no launch inside it"
    )
    zh = (
        f"；这段空闲里主机在执行 Python 函数 `{f}`{means_zh}，{per_zh} {ms(pw.us)}（读取的 (step, rank) 中有 "
        f"{len(pw.pairs)}/{pw.of_pairs} 个；trace_view.json 的 python_function），其中没有任何下发"
    )
    r_en, r_zh = frame_remedy(pw, "every rank", "每张卡")
    return en, zh, Remedy("action", r_en, r_zh, gain, BoundKind.ESTIMATE)


#: The idle before graph runs is graph breaks when it holds at least this share of the idle
#: after the host's synchronize calls.
GRAPH_BREAK_SHARE = 0.5


def _graph_break_remedy(gain_us: float) -> Remedy:
    """Remove a compiled model's graph breaks (the idle the device has before the graphs)."""
    return Remedy(
        "action",
        "Remove the graph breaks so the model compiles into one graph: keep data-dependent "
        "Python out of the compiled region (no .item(), no if on a tensor value such as "
        "torch.all(mask), no print of a device tensor inside the model); list them with "
        "torch._dynamo.explain(model)(inputs) or TORCH_LOGS=graph_breaks, and compile with "
        "fullgraph=True to make each one an error.",
        "消除图中断，让模型编译成一个图：把依赖数据的 Python 逻辑移出编译区域（模型里不要调用 .item()、"
        "不要对张量值做 if 判断，例如 torch.all(mask)，也不要打印设备上的张量）；用 "
        "torch._dynamo.explain(model)(inputs) 或 TORCH_LOGS=graph_breaks 列出断点，并用 fullgraph=True "
        "编译，让每个断点都直接报错。",
        gain_us,
        BoundKind.UPPER_BOUND,
    )


def _sync_text(
    ss: SyncStalls,
    shared_free_us: float,
    work: PythonWork | None = None,
    steps: Sequence[int] = (),
    graphs: GraphRuns | None = None,
) -> tuple[str, str, tuple[Remedy, ...]]:
    """The job's idle placed right after the host's synchronize calls (``tensor.item()``).

    From :func:`~advisor_chat.diagnosis.decompose.sync_stalls` (trace_view.json / DB CANN_API
    synchronize calls, kernel_details.csv); ``work``: what the host runs in that gap
    (:func:`_gap_work`), which then names the first change; ``steps``: the steps the idle is
    concentrated in (every step when empty); ``graphs``: the job's graph runs
    (:func:`~advisor_chat.diagnosis.decompose.graph_runs`): when the idle before graph runs holds
    at least ``GRAPH_BREAK_SHARE`` of it, the synchronizations are graph breaks and removing them
    is the first change. Returns (English, Chinese, remedies).
    """
    idle = min(ss.idle_us, shared_free_us)
    apis = sorted({x.api.split("@")[-1] for x in ss.spots})
    # concentrated in some steps: the places' idle is that of a step it hits
    hit, hit_zh = (" in each step it hits", "受影响的每步 ") if steps else ("", "")
    spots_en = "; ".join(
        f"{_SYNC_WHERE[x.position][0]} (before {x.op_type}): {ms(x.idle_us)}{hit}" for x in ss.spots
    )
    spots_zh = "；".join(
        f"{_SYNC_WHERE[x.position][1]}（{x.op_type} 之前）：{hit_zh}{ms(x.idle_us)}"
        for x in ss.spots
    )
    n = f"{ss.calls_per_step:.0f}"
    places = "places" if len(ss.spots) > 1 else "place"
    if len(ss.spots) == 1 and ss.calls_per_step > 1:  # one place, several times a step
        spots_en += f" each time ({n} times per step)"
        spots_zh += f"（每次；每步 {n} 次）"
    total = ss.all_calls_per_step
    copies = sync_copies(ss)
    what, what_zh = (
        ("blocking call", "次阻塞调用") if copies else ("synchronize call", "次同步调用")
    )
    if math.isfinite(total) and round(total) > round(ss.calls_per_step):
        # the calls counted are those an idle follows: say of how many
        n_en = f"{n} of the host's {total:.0f} {what}s per step"
        n_zh = f"主机每步 {total:.0f} {what_zh}中的 {n} 次"
    elif n == "1":
        n_en, n_zh = f"the host's one {what} per step", f"主机每步 1 {what_zh}"
    else:
        n_en, n_zh = f"the host's {n} {what}s per step", f"主机每步 {n} {what_zh}"
    how, how_zh = (
        (
            "the host copies a tensor to or from pageable (unpinned) host memory and waits for "
            "the copy, as .to(device) / .npu() without pin_memory and non_blocking=True does",
            "主机在可分页（未锁页）内存与设备之间拷贝张量并等待拷贝完成，不用 pin_memory 和 "
            "non_blocking=True 的 .to(device) / .npu() 就是这样",
        )
        if copies
        else (
            "the host blocks until the device has run everything queued, as tensor.item(), "
            ".cpu() or printing a device value does",
            "主机阻塞到设备执行完已下发的全部任务，tensor.item()、.cpu() 或打印设备上的值都会这样",
        )
    )
    en = (
        f"{ms(idle)} of it right after {n_en} ({', '.join(apis)}: {how}, then runs Python before "
        f"its next launch while the device idles), at the same {places} on every rank: {spots_en}"
    )
    zh = (
        f"其中 {ms(idle)} 紧跟在{n_zh}之后（{', '.join(apis)}：{how_zh}，之后主机先执行 Python "
        f"代码才下发下一个算子，这期间设备空闲），每张卡都在相同位置：{spots_zh}"
    )
    breaks = graphs is not None and graphs.break_idle_us >= GRAPH_BREAK_SHARE * idle
    if graphs is not None and breaks:
        b = f"{graphs.breaks_per_step:.0f}"
        en += (
            f"; the compiled model runs as {graphs.graphs_per_step:.0f} graphs per step "
            f"(Model ID in kernel_details.csv) and the device idles {ms(graphs.break_idle_us)} "
            f"per step before {b} of them ({ms(graphs.idle_each_us)} each): graph breaks, where "
            "the host synchronizes to read a value in Python and then launches the next graph"
        )
        zh += (
            f"；编译后的模型每步分成 {graphs.graphs_per_step:.0f} 个图执行（kernel_details.csv 的 "
            f"Model ID），设备每步在其中 {b} 个图开始前空闲 {ms(graphs.break_idle_us)}（每次 "
            f"{ms(graphs.idle_each_us)}）：这是图中断（断图），主机在断点处同步、在 Python 中读取一个值，"
            "然后才下发下一个图"
        )
    if work is not None:
        w_en, w_zh, w_rem = _sync_work_text(work, min(idle, _sync_gain(ss, shared_free_us)), steps)
        en += w_en
        zh += w_zh
        if breaks:
            return en, zh, (_graph_break_remedy(min(idle, graphs.break_idle_us)), w_rem)  # type: ignore[union-attr]
        return en, zh, (w_rem,)
    if breaks:
        return en, zh, (_graph_break_remedy(min(idle, graphs.break_idle_us)),)  # type: ignore[union-attr]
    if _hidden_sync(ss):
        en += (
            f"; in all the compute stream waits {ms(ss.compute_idle_us)} per step after these "
            "calls, the rest while collectives run (the step trace counts it as Communication): "
            "without the calls that computation would run under them"
        )
        zh += (
            f"；计算流在这些调用之后每步共等待 {ms(ss.compute_idle_us)}，其余部分发生在集合通信进行期间"
            "（step trace 把它算作通信）：没有这些调用，这部分计算本可以与通信重叠"
        )
    gain = _sync_gain(ss, shared_free_us)
    checks = [op for op in ss.waited_for if NAN_CHECK_OPS.search(op)]
    if checks:
        # what the host waits to read: a NaN / Inf check after the operators (anomaly detection)
        ops = ", ".join(checks)
        en += (
            f"; before each call the device runs a NaN / Inf check ({ops}, boolean results): the "
            "host reads after every operator whether its output holds a NaN, which is what "
            "torch.autograd.set_detect_anomaly(True) (or a per-operator NaN check) does"
        )
        zh += (
            f"；每次调用之前设备都在做 NaN / Inf 检查（{ops}，输出为布尔值）：主机在每个算子之后读取其输出"
            "是否含 NaN，这正是 torch.autograd.set_detect_anomaly(True)（或逐算子的 NaN 检查）所做的"
        )
        remedy = Remedy(
            "action",
            "Turn anomaly detection off for training (torch.autograd.set_detect_anomaly(False), or "
            "remove the per-operator NaN check): it checks every backward operator's output and "
            "synchronizes the host each time; keep it for a debugging run.",
            "训练时关闭异常检测（torch.autograd.set_detect_anomaly(False)，或去掉逐算子的 NaN 检查）："
            "它会检查每个反向算子的输出并每次都让主机同步；只在调试时开启。",
            gain,
            BoundKind.UPPER_BOUND,
        )
        return en, zh, (remedy,)
    if copies:
        remedy = Remedy(
            "action",
            "Make the per-step host-to-device copies asynchronous: pin the host memory "
            "(DataLoader(pin_memory=True) or tensor.pin_memory()) and copy with .to(device, "
            "non_blocking=True), prefetching the next batch while the step runs.",
            "把每步主机到设备的拷贝改为异步：使用锁页内存（DataLoader(pin_memory=True) 或 "
            "tensor.pin_memory()），用 .to(device, non_blocking=True) 拷贝，并在本步计算时预取下一批数据。",
            idle,
            BoundKind.ESTIMATE,
        )
        return en, zh, (remedy,)
    remedy = Remedy(
        "action",
        "Take the per-step synchronizations out of the training step: no tensor.item() / .cpu() / "
        "print of device values every step (log the loss and the gradient norm every N steps, or "
        "accumulate them on the device and read them once), and no explicit synchronize in the "
        "loop.",
        "把每步的同步从训练步中拿掉：不要每步调用 tensor.item() / .cpu() 或打印设备上的值（每 N 步"
        "记录一次 loss 和梯度范数，或在设备上累计后一次读出），循环中也不要显式同步。",
        gain,
        BoundKind.UPPER_BOUND,
    )
    return en, zh, (remedy,)


def _idle_shape_text(
    shape: JobIdleShape,
    shared_free_us: float,
    free_us: float,
    loop: LaunchLoop | None = None,
    router: tuple[tuple[str, ...], float] | None = None,
) -> tuple[str, str, tuple[Remedy, ...]]:
    """Where the job's idle sits, as text and the remedies that place selects.

    From :func:`~advisor_chat.diagnosis.decompose.job_idle_shape`; returns (English, Chinese,
    remedies). ``loop``: the operator the idle precedes is launched once per expert
    (:func:`~advisor_chat.diagnosis.decompose.launch_loop`): a grouped kernel is the fix.
    """
    ub = BoundKind.UPPER_BOUND
    # the share of the idle the shape places, applied to the rank's Free, keeps the figures
    # within the Free they explain (the sampled ranks' gaps against the median rank's Free)
    idle = min(shape.idle_us, shape.share * free_us) if free_us > 0 else shape.idle_us
    if shape.kind == "tiny_run":  # its idle is measured as such; its share is of the Free
        idle = min(shape.idle_us, free_us) if free_us > 0 else shape.idle_us
        return _tiny_run_text(
            shape, idle, idle / free_us if free_us > 0 else 1.0, shared_free_us, router
        )
    if shape.kind == "stretch":
        before, after = shape.before[0], shape.after
        # (a DB export may leave a task's type and name empty: then only the side that has one)
        en_at = " and ".join(
            x
            for x in (f"after {after}" if after else "", f"before {before}" if before else "")
            if x
        )
        zh_at = "、".join(
            x for x in (f"{after} 之后" if after else "", f"{before} 之前" if before else "") if x
        )
        en = f"{ms(idle)} of it in one stretch per step" + (
            f", {en_at} on every rank" if en_at else " on every rank"
        )
        zh = f"其中 {ms(idle)} 是每步一整段" + (
            f"，位于 {zh_at}（所有卡相同）" if zh_at else "（所有卡相同）"
        )
        gather = "gather" in before.lower() or "broadcast" in before.lower()
        if shape.after_collective and gather:
            # between the gradient reduction and the next parameter gather: where the
            # optimizer step runs, so the optimizer is not on the device
            en += (
                " (between the gradient reduction and the parameter gather, where the optimizer "
                "step runs: no optimizer kernel runs there, so the optimizer step is done off the "
                "NPU, e.g. an optimizer offloaded to the CPU (ZeRO-Offload / CPU Adam))"
            )
            zh += (
                "（位于梯度归约与参数收集之间，即优化器更新的位置：这里没有优化器算子在设备上运行，"
                "说明优化器更新不在 NPU 上，例如优化器被卸载（offload）到 CPU（ZeRO-Offload / CPU Adam））"
            )
            rem = Remedy(
                "action",
                "Run the optimizer step on the NPU again: turn off the optimizer offload "
                "(DeepSpeed `offload_optimizer`, CPU Adam) if memory allows, or use a ZeRO stage "
                "that shards the optimizer states across the NPUs instead of moving them to the CPU.",
                "让优化器更新回到 NPU 上：在显存允许时关闭优化器卸载（DeepSpeed 的 `offload_optimizer`、"
                "CPU Adam），或改用把优化器状态切分到各 NPU 上的 ZeRO 阶段，而不是卸载到 CPU。",
                shared_free_us,
                ub,
            )
        else:
            rem = Remedy(
                "action",
                f"Find what the training loop does {en_at or 'at that point of the step'} "
                "(a CPU-side step, a synchronization, logging or checkpointing) and take it off "
                "the critical path: run it on the NPU, overlap it, or do it less often.",
                f"找出训练循环在 {zh_at or '步的这个位置'}做了什么（CPU 上的计算、同步、日志或保存检查点），"
                "把它移出关键路径：放到 NPU 上、与计算重叠，或降低频率。",
                shared_free_us,
                ub,
            )
        return en, zh, (rem,)
    ops, ops_zh = " and ".join(shape.before), "和".join(shape.before)
    en = (
        f"{ms(idle)} of it ({pct(shape.share)}) right before the launches of {ops} "
        f"({shape.gaps_per_step:.0f} per step on every rank): the host is late to launch them"
    )
    zh = (
        f"其中 {ms(idle)}（{pct(shape.share)}）紧挨在 {ops_zh} 启动之前（所有卡每步 "
        f"{shape.gaps_per_step:.0f} 次）：主机启动它们晚了"
    )
    if loop is not None:
        en += (
            f"; {loop.per_step:g} of the {loop.launches_per_step:g} {loop.op_type} launches per "
            f"step are one per expert ({loop.chunks:g} different token counts per pass, from "
            f"{loop.rows_min} to {loop.rows_max} rows, the same weights): the MoE layer runs its "
            "experts one after another in a loop, each expert's small kernels launched separately"
        )
        zh += (
            f"；每步 {loop.launches_per_step:g} 次 {loop.op_type} 中有 {loop.per_step:g} 次是逐个专家启动的"
            f"（每轮 {loop.chunks:g} 种不同的 token 数，{loop.rows_min} 到 {loop.rows_max} 行，权重形状相同）："
            "MoE 层在循环里逐个计算专家，每个专家的小算子都单独下发"
        )
        rem = Remedy(
            "action",
            f"Run the experts as one grouped matmul instead of a loop: torch_npu.npu_grouped_matmul "
            "(MindSpeed / Megatron: --moe-grouped-gemm), so each pass is one launch for all local "
            f"experts instead of {loop.chunks:g}.",
            "用分组矩阵乘（grouped matmul）代替逐个专家的循环：torch_npu.npu_grouped_matmul"
            f"（MindSpeed / Megatron：--moe-grouped-gemm），让每一轮所有本地专家只下发一次，而不是 {loop.chunks:g} 次。",
            shared_free_us,
            ub,
        )
        return en, zh, (rem,)
    rem = Remedy(
        "action",
        f"Find what the host does right before it launches {ops}: a memory allocation or free "
        "(e.g. torch.npu.empty_cache() every step, which makes the caching allocator allocate "
        "device memory again for these outputs), a synchronization such as .item()/.cpu(), or "
        "Python work on that path; remove it from the step (no per-step empty_cache, "
        "preallocate or reuse buffers, make it asynchronous).",
        f"找出主机在启动 {ops_zh} 之前做了什么：申请或释放显存（例如每步调用 torch.npu.empty_cache()，"
        "使缓存分配器不得不为这些输出重新申请显存）、.item()/.cpu() 这类同步，或该路径上的 Python 计算；"
        "把它移出训练步（不要每步 empty_cache，预分配或复用缓冲区，改为异步）。",
        shared_free_us,
        ub,
    )
    return en, zh, (rem,)


#: Operator types of an MoE router computed from small operators (top-k selection, the gates'
#: softmax, the token-to-expert bookkeeping).
ROUTER_OPS = re.compile(
    r"^(?:TopK|Softmax|OneHot|Cumsum|CumSum|ScatterElements|Sort|ArgMax|ArgSort)", re.I
)
#: ... each of them short (median device time at most this, µs), at least this many types,
#: one of them a top-k.
ROUTER_KERNEL_US = 20.0
ROUTER_MIN_TYPES = 3


def _router_ops(ctx: Context) -> tuple[tuple[str, ...], float] | None:
    """An MoE router computed from small operators: (their types, launches per step) or None.

    From the kernels (kernel_details.csv) of a rank sample: short operator types of
    :data:`ROUTER_OPS` (a fused router, ``MoeGatingTopKSoftmax``, is absent), at least
    ``ROUTER_MIN_TYPES`` of them and a top-k among them.
    """
    k = _compute_kernels(ctx.profile, spread_sample(sorted(ctx.ranks), PEER_SAMPLE))
    if k.empty or "step" not in k.columns:
        return None
    k = k[k["step"] >= 0]
    t = k["op_type"].astype(str)
    if t.str.contains("MoeGating", case=False).any():
        return None
    hit = k[t.str.match(ROUTER_OPS)]
    med = hit.groupby("op_type")["duration_us"].median()
    short = med[med <= ROUTER_KERNEL_US]
    if len(short) < ROUTER_MIN_TYPES or not any(
        str(x).lower().startswith("topk") for x in short.index
    ):
        return None
    units = max(k.groupby(["rank", "step"]).ngroups, 1)
    n = float(hit["op_type"].isin(short.index).sum()) / units
    order = hit[hit["op_type"].isin(short.index)]["op_type"].value_counts().index
    return tuple(str(x) for x in order), n


def _tiny_run_text(
    shape: JobIdleShape,
    idle_us: float,
    free_share: float,
    shared_free_us: float,
    router: tuple[tuple[str, ...], float] | None = None,
) -> tuple[str, str, tuple[Remedy, ...]]:
    """The job's idle between many short kernels: text and the remedies (English, Chinese, remedies).

    After the backward pass the short kernels are the optimizer step's (the gradients are
    computed; what follows updates the parameters): a per-tensor optimizer, fused by a
    multi-tensor one. Elsewhere: fewer, larger operators and a faster dispatch path.
    """
    ops, ops_zh = ", ".join(shape.before), "、".join(shape.before)
    ub = BoundKind.UPPER_BOUND
    en = (
        f"{ms(idle_us)} of it ({pct(free_share)}) in the gaps between {shape.gaps_per_step:.0f} "
        f"short kernels per step on every rank (median {shape.kernel_us:.1f} µs of device time "
        f"each; {ops})"
    )
    zh = (
        f"其中 {ms(idle_us)}（{pct(free_share)}）分布在每步 {shape.gaps_per_step:.0f} 个短算子"
        f"（每个设备耗时中位数 {shape.kernel_us:.1f} µs；{ops_zh}）之间的间隙里（所有卡相同）"
    )
    if shape.after_collective:
        en += (
            ", after the backward pass, where the optimizer updates the parameters: "
            "the optimizer runs tensor by tensor and the host launches its small kernels one at "
            "a time, more slowly than the device runs them"
        )
        zh += (
            "，位于反向计算之后、即优化器更新参数的位置：优化器逐个张量更新，"
            "主机逐个下发这些小算子，下发速度赶不上设备执行"
        )
        rem = Remedy(
            "action",
            "Use a fused (multi-tensor) optimizer so that the update of all parameters is a few "
            "kernels instead of hundreds: torch_npu's fused optimizers (e.g. "
            "torch_npu.optim.NpuFusedAdamW), or foreach=True / fused=True in torch.optim; "
            "Megatron/DeepSpeed: their fused Adam.",
            "改用融合（多张量）优化器，让所有参数的更新只需少量算子而不是数百个：torch_npu 的融合优化器"
            "（如 torch_npu.optim.NpuFusedAdamW），或 torch.optim 中的 foreach=True / fused=True；"
            "Megatron/DeepSpeed 使用其融合 Adam。",
            shared_free_us,
            ub,
        )
    elif router is not None:
        names, n = router
        en += (
            f"; among them the MoE router's small operators ({', '.join(names[:5])}; {n:.0f} "
            "launches per step): the router is computed from separate small operators, and the "
            "host launches them one at a time more slowly than the device runs them"
        )
        zh += (
            f"；其中有 MoE 路由的小算子（{'、'.join(names[:5])}；每步 {n:.0f} 次调用）：路由由多个独立的"
            "小算子拼接计算，主机逐个下发，下发速度赶不上设备执行"
        )
        rem = Remedy(
            "action",
            "Compute the MoE router with the fused operators: torch_npu.npu_moe_gating_top_k_softmax "
            "for the gates' softmax and top-k, npu_moe_init_routing (or npu_moe_token_permute) "
            "for the token bookkeeping (MindSpeed: its fused MoE routing options), instead of "
            "dozens of small kernels per MoE layer.",
            "用融合算子计算 MoE 路由：门控的 softmax 与 top-k 用 torch_npu.npu_moe_gating_top_k_softmax，"
            "token 分发的记录用 npu_moe_init_routing（或 npu_moe_token_permute）（MindSpeed：其融合的 MoE "
            "路由选项），不再在每个 MoE 层下发几十个小算子。",
            shared_free_us,
            ub,
        )
    else:
        en += ": the host launches them one at a time more slowly than the device runs them"
        zh += "：主机逐个下发这些小算子，下发速度赶不上设备执行"
        rem = Remedy(
            "action",
            "Launch fewer, larger operators where these short kernels run (fused operators, "
            "graph mode) and make the dispatch faster (TASK_QUEUE_ENABLE=2, CPU_AFFINITY_CONF=1).",
            "在这些短算子处减少下发次数、增大单个算子（融合算子、图模式），并加快下发"
            "（TASK_QUEUE_ENABLE=2，CPU_AFFINITY_CONF=1）。",
            shared_free_us,
            ub,
        )
    return en, zh, (rem,)


#: Job-wide dispatch-bound: the device idle waiting for the host's next launch (``host_dispatch``
#: host_wait_us_per_step, median over the measured ranks) is at least this share of the shared
#: Free, and more than the idle before the step's first kernel (input).
DISPATCH_WAIT_SHARE = 0.3
#: Kernels whose median device time is at most this many times the median gap before them are
#: too short for the host to keep ahead of (a launch costs about as much host time as they run).
SHORT_WORK_RATIO = 1.5


#: A median launch-to-start below this (µs) means the host barely keeps ahead of the device.
BARELY_AHEAD_US = 200.0
#: The launch API named as where the host's launch time goes when it takes at least this share.
LAUNCH_API_SHARE = 0.5


def _job_dispatch_bound(
    ctx: Context, shared_free_us: float, start_idle_us: float
) -> tuple[str, str, tuple[Remedy, ...]] | None:
    """Whether the idle every rank shares is the host dispatch's (English, Chinese, remedies).

    Evidence (``host_dispatch`` per-rank table, trace_view.json / DB CANN_API flows): on the
    median measured rank, the device idle spent waiting for the next launch, less the idle at the
    step's start (the wait for the step's first launch, already counted there), is ≥
    ``DISPATCH_WAIT_SHARE`` of the shared Free and larger than the idle at the step's start, and
    kernels start soon after their launch (the host barely keeps ahead). The remedies follow the
    environment: ``ASCEND_LAUNCH_BLOCKING=1`` (env_check) serializes every launch and is the first
    thing to undo; otherwise the host dispatch path is made faster.
    """
    res = ctx.result("host_dispatch")
    if res is None or res.table.empty or "host_wait_us_per_step" not in res.table.columns:
        return None
    t = res.table
    hw = float(t["host_wait_us_per_step"].median())
    lead = (
        float(t["launch_delay_p50_us"].median()) if "launch_delay_p50_us" in t.columns else math.nan
    )
    # the wait for the step's first launch is already the start-of-step idle: what is left is
    # the wait between kernels
    between = hw - max(start_idle_us, 0.0)
    if not (
        math.isfinite(hw)
        and between >= DISPATCH_WAIT_SHARE * shared_free_us
        and between > start_idle_us
    ):
        return None
    # the work per launch against the wait before it: kernels shorter than the gaps before them
    # leave the host too little time to launch the next one (small micro-batch, unfused ops)
    kern = float(t["median_kernel_us"].median()) if "median_kernel_us" in t.columns else math.nan
    gap = float(t["gap_us_median"].median()) if "gap_us_median" in t.columns else math.nan
    short = math.isfinite(kern) and math.isfinite(gap) and kern <= SHORT_WORK_RATIO * gap
    parts_en: list[str] = []
    parts_zh: list[str] = []
    if math.isfinite(lead) and lead <= BARELY_AHEAD_US:
        parts_en.append(
            f"a kernel starts {lead:.0f} µs after its launch: the host barely keeps ahead"
        )
        parts_zh.append(f"算子下发后 {lead:.0f} µs 就开始执行：主机几乎跟不上设备")
    elif math.isfinite(lead):  # ahead most of the time: the waits gather where it falls behind
        parts_en.append(
            f"the host is usually {lead:.0f} µs ahead of the device (median launch to start), so "
            "the waits gather where it falls behind"
        )
        parts_zh.append(
            f"主机通常领先设备 {lead:.0f} µs（下发到执行的中位数），等待集中在主机落后的地方"
        )
    if short:
        parts_en.append(
            f"kernels run {kern:.1f} µs (median), "
            f"{'about as long as' if kern >= 0.5 * gap else 'shorter than'} the {gap:.1f} µs the "
            "device waits before each: too little work per launch"
        )
        parts_zh.append(
            f"算子执行时间中位数 {kern:.1f} µs，"
            f"{'与' if kern >= 0.5 * gap else '短于'}每个算子前设备等待的 {gap:.1f} µs"
            f"{'相当' if kern >= 0.5 * gap else ''}：每次下发的工作量太小"
        )
    top = top_launch_api(ctx.profile, ctx.ranks)
    online = top is not None and "aclopCompile" in top.api  # operators built online
    if top is not None and top.share >= LAUNCH_API_SHARE:
        api = top.api.removeprefix("AscendCL@")
        path = (
            ", the path that compiles an operator online instead of running a prebuilt aclnn kernel"
            if online
            else ""
        )
        path_zh = "，即在线编译算子的路径，而不是直接调用预编译的 aclnn 算子" if online else ""
        parts_en.append(
            f"{pct(top.share)} of the host's launch time is in {api} ({top.per_step:.0f} of "
            f"{top.launches_per_step:.0f} launches per step, {top.median_us:.0f} µs each){path}"
        )
        parts_zh.append(
            f"主机下发时间的 {pct(top.share)} 花在 {api}（每步 {top.launches_per_step:.0f} 次下发中有 "
            f"{top.per_step:.0f} 次，每次 {top.median_us:.0f} µs）{path_zh}"
        )
    lead_en = f" ({'; '.join(parts_en)})" if parts_en else ""
    lead_zh = f"（{'；'.join(parts_zh)}）" if parts_zh else ""
    if start_idle_us > 0:
        en = f"{ms(between)} more between kernels, waiting for the host's next launch{lead_en}"
        zh = f"另有 {ms(between)} 在算子之间等主机下发下一个算子{lead_zh}"
    else:
        en = f"{ms(hw)} of it waiting for the host's next kernel launch{lead_en}"
        zh = f"其中 {ms(hw)} 在等主机下发下一个算子{lead_zh}"
    remedies: list[Remedy] = []
    blocking = ctx.finding("env_check.env.ascend_launch_blocking")
    if blocking:
        rl, rl_zh = ranks_label(list(blocking[0].ranks))
        remedies.append(
            Remedy(
                "action",
                f"Unset ASCEND_LAUNCH_BLOCKING (it is 1 on {rl}): it makes every operator launch "
                "wait for the previous one to finish, so the device idles between kernels; keep "
                "it for debugging only.",
                f"取消环境变量 ASCEND_LAUNCH_BLOCKING（{rl_zh}设置为 1）：它让每个算子的下发都等上一个"
                "执行完（同步下发），设备在算子之间空闲；只在调试时使用。",
                shared_free_us,
                BoundKind.UPPER_BOUND,
            )
        )
    if online and top is not None and not blocking:
        remedies.append(
            Remedy(
                "action",
                "Run the prebuilt operators instead of compiling them online: "
                "torch_npu.npu.set_compile_mode(jit_compile=False) (with "
                f"torch_npu.npu.config.allow_internal_format = False), so the {top.per_step:.0f} "
                f"launches per step stop going through {top.api.removeprefix('AscendCL@')}.",
                "改用预编译的二进制算子，不再在线编译：torch_npu.npu.set_compile_mode(jit_compile=False)"
                f"（并设置 torch_npu.npu.config.allow_internal_format = False），让每步 {top.per_step:.0f} "
                f"次下发不再经过 {top.api.removeprefix('AscendCL@')}。",
                hw,
                BoundKind.UPPER_BOUND,
            )
        )
    if short and not blocking:
        remedies.append(
            Remedy(
                "action",
                "Give each launch more work: a larger micro-batch or longer sequences per step, "
                "fused operators for chains of small ones, or graph mode (torchair / aclgraph "
                "capture) so the host launches a step's kernels at once.",
                "让每次下发做更多的工作：增大微批次（micro batch）或每步的序列长度，用融合算子替代小算子链，"
                "或使用图模式（torchair / aclgraph 捕获），让主机一次下发整步的算子。",
                hw,
                BoundKind.UPPER_BOUND,
            )
        )
    remedies.append(
        Remedy(
            "action",
            "Make the host dispatch faster: TASK_QUEUE_ENABLE=2 (two-level task queue), bind "
            "each rank's threads to CPU cores (CPU_AFFINITY_CONF=1), and fewer, larger "
            "operators (fused operators, or graph mode) so there is less to launch per step.",
            "加快主机下发：设置 TASK_QUEUE_ENABLE=2（二级流水下发），为每张卡绑核（CPU_AFFINITY_CONF=1），"
            "并减少每步要下发的算子数（使用融合算子或图模式）。",
            hw,
            BoundKind.UPPER_BOUND,
        )
    )
    return en, zh, tuple(remedies)


def _row_missing(c: RootCause) -> bool:
    """Whether ``c`` is a late rank whose own step-trace row is missing.

    The attribution's late-arrival cause, whatever its kernels or host then showed it to be.
    """
    return c.id.startswith("cause.late_arrival.")


#: A collective moving at most this many bytes per rank carries no data: a barrier or a scalar.
TINY_COLLECTIVE_BYTES = 1024.0
#: ... and at least this many of them per step and rank are a per-step habit of the code.
TINY_MIN_PER_STEP = 3


#: Gathers that feed a cheap operator name the exposed communication when they take at least this
#: share of it.
FEEDS_MIN_SHARE = 0.2


#: Event waits on the compute stream name the exposed communication when they take at least this
#: share of it.
EVENT_WAIT_MIN_SHARE = 0.3
#: Uneven routing rotates: every rank gets the same tokens per step (max/min of the totals).
ROUTER_TOTAL_SPREAD = 1.1


def _gather_feeds_text(gf: GatherFeeds, rest_us: float) -> tuple[str, str, Remedy]:
    """The clause and the remedy for gathers whose data goes to a cheap operator."""
    norm = "norm" in gf.op_type.lower()
    op = f"{gf.op_type} / {gf.op_type}Grad" if norm else gf.op_type
    share = gf.op_us / gf.collective_us if gf.collective_us > 0 else float("nan")
    why = (
        ": a norm run on the whole gathered sequence instead of the rank's own shard (sequence "
        "parallelism with a norm that is not sequence-parallel aware) is the usual cause"
        if norm
        else ""
    )
    why_zh = (
        "：常见原因是归一化在收集后的完整序列上计算，而不是在本卡的分片上（开了序列并行但归一化不支持序列并行）"
        if norm
        else ""
    )
    en = (
        f"; {gf.per_step:.0f} of the {gf.gathers_per_step:.0f} AllGathers per step "
        f"({ms(gf.collective_us)} each, {ms(gf.us_per_step)} per step) hand their data straight "
        f"to {op} ({ms(gf.op_us)}, {pct(share)} of the gather; input [{gf.shape}]): the data is "
        f"gathered for little work{why}"
    )
    zh = (
        f"；每步 {gf.gathers_per_step:.0f} 次 AllGather 中有 {gf.per_step:.0f} 次（每次 "
        f"{ms(gf.collective_us)}，每步 {ms(gf.us_per_step)}）把数据直接交给 {op}（{ms(gf.op_us)}，"
        f"只有这次收集的 {pct(share)}；输入 [{gf.shape}]）：为很少的计算收集了整份数据{why_zh}"
    )
    if gf.scatters_per_step >= 1:
        # the result goes straight back through a reduce-scatter: a round trip for the operator
        en += (
            f"; {gf.scatters_per_step:.0f} of them have the operator's result reduce-scattered "
            f"right after it ({ms(gf.scatter_us_per_step)} per step): a round trip for that "
            "operator alone"
        )
        zh += (
            f"；其中 {gf.scatters_per_step:.0f} 次在该算子之后立刻对结果做 ReduceScatter（每步 "
            f"{ms(gf.scatter_us_per_step)}）：只为这个算子来回一趟"
        )
    rem = Remedy(
        "action",
        f"Run {op} on the data the rank already holds and remove the AllGather in front of it "
        f"({gf.per_step:.0f} per step)"
        + (
            ": a sequence-parallel norm works on the local [S/TP, H] shard (mark its weight "
            "sequence_parallel so its gradient is reduced over TP), then gather once before the "
            "MatMul that needs the full sequence."
            if norm
            else ": the operator does not need the gathered input."
        ),
        f"让 {op} 直接在本卡已有的数据上计算，去掉它前面的 AllGather（每步 {gf.per_step:.0f} 次）"
        + (
            "：支持序列并行的归一化在本地 [S/TP, H] 分片上计算（把其权重标记为 sequence_parallel，"
            "梯度在 TP 内归约），只在需要完整序列的 MatMul 之前收集一次。"
            if norm
            else "：这个算子不需要收集后的输入。"
        ),
        min(gf.us_per_step + gf.scatter_us_per_step, rest_us),
        BoundKind.UPPER_BOUND,
    )
    return en, zh, rem


#: A collective moving more than this (MB per rank, median) is not a small one.
SMALL_COLLECTIVE_MB = 4.0


def _context_text(
    cc: CollectiveContext, rest_us: float, args: dict[str, Any] | None = None
) -> tuple[str, str, Remedy]:
    """Clause, Chinese clause and remedy for collectives that hold the compute stream.

    Inside an operator split in parts (``cc.before`` … ``cc.after`` of one family) the operator
    exchanges values with the other ranks mid-computation (BatchNorm: a synchronized
    BatchNorm's batch statistics); at the step's start (no operator before them) nothing was
    launched to run under them (a Broadcast there re-sends what one rank holds, typically the
    parameters; all-gathers there, with ``args`` given, are the sharded parameters' gathers:
    :func:`_param_gather_text`, ``args`` being the recorded ``distributed_args``). Gain:
    :attr:`CollectiveContext.saving_us` (an estimate), at most ``rest_us``.
    """
    names = [
        COLLECTIVE_NAMES.get(t.lower().removeprefix("hcom_").rstrip("_"), t.strip("_"))
        for t in cc.collective.split()
    ]
    coll = " / ".join(names[:3])
    n, each, idle = cc.collectives_per_step, ms(cc.collective_us), ms(cc.idle_us_per_step)
    gain = min(cc.saving_us, rest_us)
    if cc.at_step_start:
        bcast = "broadcast" in cc.collective.lower()
        en = (
            f"; every step starts with {n:.0f} {coll} ({each} each) before its first compute "
            f"operator ({cc.after}; kernel_details.csv order): nothing was launched to run under "
            f"them, so the device idles {idle} per step"
        )
        zh = (
            f"；每步一开始先做 {n:.0f} 次 {coll}（每次 {each}），之后才是第一个计算算子（{cc.after}；按 "
            f"kernel_details.csv 的顺序）：此时没有可与之重叠的计算，设备每步空等 {idle}"
        )
        if bcast:
            en += (
                ": a broadcast in every step re-sends what one rank holds, typically the "
                "parameters (a re-sync left in the training loop)"
            )
            zh += "：每步都广播，等于每步把某一张卡上的数据（通常是模型参数）重新发一遍（训练循环里残留的参数同步）"
            rem = Remedy(
                "action",
                "Broadcast the parameters once, at initialization (or after loading a checkpoint), "
                "not every step: remove the per-step re-sync (the model wrapped in DDP again, "
                "sync_module_states / broadcast_parameters / dist.broadcast of the weights in "
                "the loop).",
                "只在初始化时（或加载检查点后）广播一次参数，不要每步广播：去掉训练循环里的参数同步（每步重新"
                "用 DDP 包装模型、sync_module_states / broadcast_parameters / 对权重调用 dist.broadcast）。",
                gain,
                BoundKind.ESTIMATE,
            )
        elif args is not None:  # the parameters' gathers (the caller's reading)
            en_p, zh_p, rem = _param_gather_text(cc, coll, rest_us, args)
            en += en_p
            zh += zh_p
        else:
            rem = Remedy(
                "action",
                f"Take the {coll} off the start of the step: run them once if their result does "
                "not change between steps, or issue them asynchronously and start the forward "
                "on what does not need them.",
                f"把每步开头的 {coll} 移走：若结果在各步之间不变就只做一次，否则异步发起，先开始不依赖它们的前向计算。",
                gain,
                BoundKind.ESTIMATE,
            )
        return en, zh, rem
    fam = op_family(cc.before)
    bn = fam.upper().startswith("BN") or "batchnorm" in fam.lower()
    en = (
        f"; {n:.0f} collectives per step ({coll}, {each} each) run inside {fam} "
        f"operators, between {cc.before} and {cc.after} (kernel_details.csv order): the operator "
        "needs the other ranks' values in the middle of its computation, so the compute stream "
        f"waits for them, and for the collectives queued before them, {idle} per step"
    )
    zh = (
        f"；每步 {n:.0f} 次集合通信（{coll}，每次 {each}）发生在 {fam} 算子内部，位于 {cc.before} 与 "
        f"{cc.after} 之间（按 kernel_details.csv 的顺序）：算子计算到一半需要其他卡的数据，计算流每步要等"
        f"它们以及排在它们之前的集合通信共 {idle}"
    )
    if bn:
        en += " — a synchronized BatchNorm (SyncBatchNorm) exchanging its batch statistics"
        zh += "——这是同步 BatchNorm（SyncBatchNorm）在交换批统计量"
        rem = Remedy(
            "action",
            "Use per-card BatchNorm instead of SyncBatchNorm (do not convert_sync_batchnorm) "
            "when each card's batch is large enough (16-32 samples or more), or synchronize it "
            "within a node only (SyncBatchNorm with a process_group of the node's ranks).",
            "每卡 batch 足够大（16-32 个样本以上）时改用普通 BatchNorm，不要 convert_sync_batchnorm；"
            "或只在节点内同步（SyncBatchNorm 的 process_group 只包含本节点的卡）。",
            gain,
            BoundKind.ESTIMATE,
        )
    else:
        rem = Remedy(
            "action",
            f"Make {fam} local to each rank (no exchange with the other ranks inside it), or "
            "exchange over a smaller group (the node's ranks).",
            f"让 {fam} 在每张卡上本地完成（算子内部不与其他卡交换数据），或只在更小的组（本节点的卡）内交换。",
            gain,
            BoundKind.ESTIMATE,
        )
    return en, zh, rem


#: All-gathers opening the step are the parameters' when they are at least this share of the
#: step's all-gathers (sequence parallelism gathers before every norm, all through the step).
PARAM_GATHER_SHARE = 0.75


def _gathers_per_step(ctx: Context) -> float:
    """AllGathers per (step, rank), median (``comm_ops``, communication.json); 0 without them."""
    ops = ctx.profile.get("comm_ops")
    if ops.empty or "op_type" not in ops.columns:
        return 0.0
    g = ops[ops["op_type"].astype(str).str.lower().str.contains("allgather")]
    return float(g.groupby(["rank", "step"]).size().median()) if not g.empty else 0.0


def _param_gather_text(
    cc: CollectiveContext, coll: str, rest_us: float, args: dict[str, Any]
) -> tuple[str, str, Remedy]:
    """All-gathers that open every step: the sharded parameters gathered before the forward.

    The parameters a distributed optimizer, ZeRO-3 or FSDP keeps sharded are all-gathered before
    the layers that use them; at the step's start with nothing launched under them, the gather is
    not overlapped with the forward. ``args`` (``distributed_args``) names the setting when it
    records ``use_distributed_optimizer`` without ``overlap_param_gather``. Gain (estimate): with
    the gathers overlapped bucket by bucket, the first still runs before the step and each other
    one hides under the forward of the layers before it: (n - 1) x min(one gather, forward / n),
    the forward from :attr:`CollectiveContext.forward_us`; at most ``rest_us``. Returns (clause,
    Chinese clause, remedy).
    """
    n, each = cc.collectives_per_step, cc.collective_us
    window = cc.forward_us / n if math.isfinite(cc.forward_us) and n > 0 else each
    gain = min(max(n - 1.0, 0.0) * min(each, window), cc.saving_us, rest_us)
    dist_opt = bool(args.get("use_distributed_optimizer"))
    off = dist_opt and not args.get("overlap_param_gather")
    setting = (
        " (distributed_args: use_distributed_optimizer true, overlap_param_gather "
        f"{str(args.get('overlap_param_gather', 'unset')).lower()})"
        if off
        else ""
    )
    setting_zh = (
        "（distributed_args：use_distributed_optimizer 为 true，overlap_param_gather 为 "
        f"{str(args.get('overlap_param_gather', '未设置')).lower()}）"
        if off
        else ""
    )
    en = (
        ": all-gathers before the forward are the gathers of sharded parameters (a distributed "
        f"optimizer, ZeRO-3 or FSDP), run for the whole model before its first layer{setting}"
    )
    zh = (
        "：前向之前的 AllGather 是在收集被切分的参数（分布式优化器、ZeRO-3 或 FSDP），"
        f"整个模型的参数都收集完才开始第一层{setting_zh}"
    )
    if off:
        text = (
            "Turn on --overlap-param-gather (Megatron / MindSpeed, with the distributed "
            "optimizer and --overlap-grad-reduce): each bucket's parameter all-gather then runs "
            "under the forward of the layers before it instead of before the step."
        )
        text_zh = (
            "打开 --overlap-param-gather（Megatron / MindSpeed，配合分布式优化器和 "
            "--overlap-grad-reduce）：每个桶的参数 AllGather 与前面层的前向计算重叠，而不是都在步开始前做完。"
        )
    else:
        text = (
            f"Overlap the parameter {coll} with the forward instead of running it before the "
            "step: Megatron / MindSpeed --overlap-param-gather, DeepSpeed ZeRO-3 prefetching "
            "(stage3_prefetch_bucket_size), FSDP forward_prefetch."
        )
        text_zh = (
            f"让参数 {coll} 与前向计算重叠，而不是在步开始前做完：Megatron / MindSpeed 的 "
            "--overlap-param-gather、DeepSpeed ZeRO-3 预取（stage3_prefetch_bucket_size）、FSDP 的 "
            "forward_prefetch。"
        )
    return en, zh, Remedy("action", text, text_zh, gain, BoundKind.ESTIMATE)


def _tiny_collectives(ctx: Context) -> tuple[str, str, Remedy, float, float] | None:
    """Collectives that move (almost) nothing, several per step: barriers or scalar syncs.

    From ``comm_bandwidth`` (communication.json Communication Bandwidth Info): per rank, step and
    operator, the transit size summed over transports; operators of at most
    ``TINY_COLLECTIVE_BYTES`` are counted per (step, rank) (median). Each makes every rank wait
    for all, so a gradient reduction issued before it must finish first: the communication it
    would have hidden under the next computation is exposed. ``None`` below
    ``TINY_MIN_PER_STEP``. Returns (clause, clause_zh, remedy, collectives per step, the span of
    the per-tensor norm loop in µs per step or 0 when they are not one).
    """
    bw = ctx.profile.get("comm_bandwidth")
    if bw.empty or not {"rank", "step", "op_name", "transit_size_mb"} <= set(bw.columns):
        return None
    size = bw.groupby(["rank", "step", "op_name"])["transit_size_mb"].sum()
    per_unit = size.groupby(level=["rank", "step"]).size()
    tiny = size[size * 1e6 <= TINY_COLLECTIVE_BYTES]
    n = float(
        tiny.groupby(level=["rank", "step"]).size().reindex(per_unit.index, fill_value=0).median()
    )
    if n < TINY_MIN_PER_STEP:
        return None
    bytes_ = float(tiny.median()) * 1e6
    tp = _tiny_pattern(ctx, {str(x) for x in tiny.index.get_level_values("op_name")})
    if tp is not None and _NORM_OP.search(tp.before):
        return _per_tensor_norm_text(n, bytes_, tp)
    en = (
        f"; {n:g} collectives per step move almost nothing ({bytes_:.0f} bytes each): barriers "
        "or scalar synchronizations (dist.barrier() in timers or logging, a loss all-reduce), each "
        "a point where every rank waits for all, so the gradient reduction issued before it can "
        "no longer run under the next layer's computation"
    )
    zh = (
        f"；每步有 {n:g} 次几乎不传数据的集合通信（每次 {bytes_:.0f} 字节）：屏障或标量同步（计时、日志中的 "
        "dist.barrier()，loss 的 AllReduce），每一次都让所有卡互相等待，之前发出的梯度归约无法再与下一层的计算重叠"
    )
    rem = Remedy(
        "action",
        f"Take the {n:g} per-step barriers / scalar collectives out of the step (timers that call "
        "dist.barrier(), a loss or metric all-reduced every step): time with device events, "
        "reduce metrics every N steps, so the gradient all-reduces overlap the backward again.",
        f"把每步 {n:g} 次屏障 / 标量集合通信移出训练步（调用 dist.barrier() 的计时器、每步 AllReduce 的 "
        "loss 或指标）：用设备事件计时、每 N 步归约一次指标，让梯度 AllReduce 重新与反向计算重叠。",
        None,
        BoundKind.NONE,
    )
    return en, zh, rem, n, 0.0


def _moe_padding_text(mp: MoePadding) -> tuple[str, str, Remedy]:
    """The padding of the MoE layers' expert inputs, and its remedy (English, Chinese)."""
    frac = f"{pct(mp.padding_share)}"
    en = (
        f"; the MoE layers pad every expert's input to its capacity (distributed_args "
        f"moe_expert_capacity_factor {mp.capacity_factor:g}, moe_pad_expert_input_to_capacity on; "
        f"top-{mp.topk:g} routing over {mp.experts:g} experts): {frac} of the rows each all-to-all "
        f"moves and each expert MatMul computes are padding, and the all-to-alls take "
        f"{ms(mp.alltoall_us)} per step ({ms(mp.each_us)} each, median) and the expert MatMuls "
        f"{ms(mp.expert_us)}"
    )
    zh = (
        f"；MoE 层把每个专家的输入填充到容量上限（distributed_args 中 moe_expert_capacity_factor 为 "
        f"{mp.capacity_factor:g}，并开启了 moe_pad_expert_input_to_capacity；{mp.experts:g} 个专家、top-"
        f"{mp.topk:g} 路由）：每次 AllToAll 传输的行和每个专家 MatMul 计算的行中有 {frac} 是填充，而"
        f"AllToAll 每步耗时 {ms(mp.alltoall_us)}（单次中位数 {ms(mp.each_us)}），专家 MatMul 每步 "
        f"{ms(mp.expert_us)}"
    )
    rem = Remedy(
        "action",
        "Stop padding the expert inputs to capacity: drop `--moe-pad-expert-input-to-capacity` and "
        "run the all-to-all dispatch dropless (or with a capacity factor near 1.0-1.25 if dropping "
        f"a few tokens is acceptable), so the all-to-alls and the expert MatMuls carry only the "
        f"routed tokens ({pct(mp.padding_share)} less).",
        "不要把专家输入填充到容量上限：去掉 `--moe-pad-expert-input-to-capacity`，采用不丢 token 的 "
        "AllToAll 分发（或在可以接受少量丢弃时把 capacity factor 设为 1.0-1.25 左右），让 AllToAll 和专家 "
        f"MatMul 只处理实际路由的 token（减少 {pct(mp.padding_share)}）。",
        mp.saving_us,
        BoundKind.ESTIMATE,
    )
    return en, zh, rem


#: A per-tensor norm: the operator whose result each tiny all-reduce carries (LpNorm, a sum of
#: squares), not a normalization layer (RmsNorm, LayerNorm).
_NORM_OP = re.compile(r"^(?:LpNorm|Norm\b|NormV|ReduceL2|SquareSum|ReduceSumSquare|L2Norm)", re.I)
#: The tiny collectives follow one operator type when at least this share of them does.
TINY_BEFORE_SHARE = 0.8


@dataclasses.dataclass(frozen=True)
class TinyPattern:
    """What surrounds the tiny collectives of a step.

    Attributes:
        before: The compute operator type right before most of them (kernel order).
        before_share: Share of the tiny collectives that follow it.
        span_us: Per (step, rank), from the start of the operator before the first tiny collective
            to the end of the last one (median, µs): the loop that issues them.
        syncs_per_step: Host synchronize calls per (step, rank) (median; ``host_dispatch``
            blocking rows), NaN without host data.
    """

    before: str
    before_share: float
    span_us: float
    syncs_per_step: float


def _tiny_pattern(ctx: Context, names: set[str]) -> TinyPattern | None:
    """The operator type that precedes the tiny collectives ``names`` and the loop's span.

    From ``kernels`` (kernel_details.csv, start order) of a sample of 4 ranks, and their
    ``host_dispatch`` for the synchronize calls (trace_view.json). ``None`` without kernels or
    without one operator type before at least ``TINY_BEFORE_SHARE`` of them.
    """
    from advisor_chat.analyzers._common import is_comm_kernel
    from advisor_chat.ingest.trace import BLOCKING_CALL

    sample = spread_sample(sorted(ctx.ranks), 4)
    k = ctx.profile.kernels_for(sample)
    if k.empty or not {"name", "op_type", "step", "start_us", "duration_us"} <= set(k.columns):
        return None
    k = k[k["step"].notna()].sort_values(["rank", "step", "start_us"], kind="stable")
    comm = is_comm_kernel(k).to_numpy()
    before: list[str] = []
    spans: list[float] = []
    for _key, g in k.assign(_comm=comm).groupby(["rank", "step"], sort=False):
        last_op = ""
        last_start = math.nan
        first = math.nan
        end = math.nan
        for name, op, c, st, du in zip(
            g["name"].astype(str), g["op_type"].astype(str), g["_comm"], g["start_us"],
            g["duration_us"], strict=True,
        ):  # fmt: skip
            if not c:
                last_op, last_start = op, float(st)
                continue
            if name in names:
                before.append(last_op)
                if math.isnan(first):
                    first = last_start
                end = float(st) + float(du)
        if math.isfinite(first) and math.isfinite(end):
            spans.append(end - first)
    if not before or not spans:
        return None
    top, n = (
        pd.Series(before).value_counts().index[0],
        int(pd.Series(before).value_counts().iloc[0]),
    )
    if not top or n < TINY_BEFORE_SHARE * len(before):
        return None
    syncs = math.nan
    hd = ctx.profile.host_dispatch_for(sample)
    if not hd.empty and "api_name" in hd and "device_start_us" in hd:
        blocking = hd[
            hd["device_start_us"].isna()
            & hd["api_name"].astype(str).str.contains(BLOCKING_CALL)
            & (hd["step"] >= 0)
        ]
        units = hd[hd["step"] >= 0].groupby(["rank", "step"]).size().index
        syncs = float(
            blocking.groupby(["rank", "step"]).size().reindex(units, fill_value=0).median()
        )
    return TinyPattern(str(top), n / len(before), float(pd.Series(spans).median()), syncs)


def _per_tensor_norm_text(
    n: float, bytes_: float, tp: TinyPattern
) -> tuple[str, str, Remedy, float, float]:
    """Tiny all-reduces that each carry one norm: gradient clipping tensor by tensor."""
    sync = (
        f", and the host waits for each ({tp.syncs_per_step:g} synchronize calls per step: a "
        ".item() on every norm)"
        if math.isfinite(tp.syncs_per_step) and tp.syncs_per_step >= 0.8 * n
        else ""
    )
    sync_zh = (
        f"，并且主机逐个等待结果（每步 {tp.syncs_per_step:g} 次同步调用：每个范数都调用了 .item()）"
        if sync
        else ""
    )
    en = (
        f"; {n:g} collectives per step move almost nothing ({bytes_:.0f} bytes each) and "
        f"{'all' if tp.before_share >= 0.995 else pct(tp.before_share)} of them follow a "
        f"{tp.before} kernel{sync}: a norm is computed, "
        "all-reduced and read back one tensor at a time, the way a hand-written gradient "
        f"clipping loop does it, {ms(tp.span_us)} per step from the first norm to the last "
        "all-reduce (kernel_details.csv order, communication.json)"
    )
    zh = (
        f"；每步有 {n:g} 次几乎不传数据的集合通信（每次 {bytes_:.0f} 字节），其中"
        f"{'全部' if tp.before_share >= 0.995 else ' ' + pct(tp.before_share) + ' '}紧跟在 "
        f"{tp.before} 算子之后{sync_zh}：逐个张量计算范数、AllReduce 再读回，这正是手写的逐参数梯度裁剪（梯度"
        f"范数）循环的做法，每步从第一个范数到最后一次 AllReduce 共 {ms(tp.span_us)}（kernel_details.csv 顺序、"
        "communication.json）"
    )
    rem = Remedy(
        "action",
        "Clip the gradients in one pass: torch.nn.utils.clip_grad_norm_(params, max_norm, "
        "foreach=True) (or Megatron / MindSpeed's clip_grad_norm_fp32 with multi-tensor apply) "
        "computes every norm in a few fused kernels, all-reduces one value and reads nothing back "
        f"per tensor, instead of {n:g} norms, {n:g} all-reduces and {n:g} host waits.",
        "一次完成梯度裁剪：使用 torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)（或 Megatron / "
        "MindSpeed 基于 multi-tensor apply 的 clip_grad_norm_fp32），用少量融合算子算出全部范数，只做一次 "
        f"AllReduce，不再逐个张量读回，取代每步 {n:g} 次范数、{n:g} 次 AllReduce 和 {n:g} 次主机等待。",
        tp.span_us,
        BoundKind.ESTIMATE,
    )
    return en, zh, rem, n, tp.span_us


#: Point-to-point transfers outside a pipeline name the exposed communication when they take at
#: least this share of the communication time.
P2P_MIN_SHARE = 0.2


def _p2p_outside_pipeline(ctx: Context, rest_us: float) -> tuple[str, str, Remedy] | None:
    """Send / receive in a job without pipeline stages that hold a share of its communication.

    From ``comm_ops`` (Elapse Time of send / receive operators against all) and the groups they
    run in (``comm_groups`` names). Returns (clause, Chinese clause, the overlap remedy with the
    point-to-point time per rank and step as its upper-bound gain, at most ``rest_us``), or
    ``None`` with pipeline stages or below ``P2P_MIN_SHARE``.
    """
    ops = ctx.profile.get("comm_ops")
    if ctx.stages or ops.empty or not {"op_type", "elapse_ms", "group"} <= set(ops.columns):
        return None
    el = pd.to_numeric(ops["elapse_ms"], errors="coerce").fillna(0.0)
    p = is_p2p(ops["op_type"]).to_numpy(dtype=bool)
    total = float(el.sum())
    if not total > 0 or float(el[p].sum()) < P2P_MIN_SHARE * total:
        return None
    share = float(el[p].sum()) / total
    units = max(int(ops.groupby(["rank", "step"]).ngroups), 1)
    per_step_us = float(el[p].sum()) * 1000.0 / units
    g = groups_table(ctx.profile)
    names = (
        dict(zip(g["group"].astype(str), g["group_name"].astype(str), strict=True))
        if not g.empty
        else {}
    )
    grp = sorted({names.get(str(x), "") for x in ops.loc[p, "group"]} - {"", "nan", "None"})
    who = f" of the {', '.join(grp)} group" if grp else ""
    who_zh = f"（通信组 {'、'.join(grp)}）" if grp else ""
    en = (
        f"; {pct(share)} of the communication time is point-to-point send/receive{who} "
        f"({ms(per_step_us)} per step per rank) although the job has no pipeline stages: blocking "
        "exchanges between pairs of ranks, e.g. context parallelism's ring of key/value blocks"
    )
    zh = (
        f"；通信时间的 {pct(share)} 是点对点收发（send/receive）{who_zh}（每卡每步 {ms(per_step_us)}），"
        "而作业没有流水线阶段：这是成对卡之间的阻塞式交换，例如上下文并行（CP）环形传递 key/value 块"
    )
    remedy = Remedy(
        "action",
        f"Overlap the point-to-point exchanges{who} with computation: post the next block's "
        "send/receive asynchronously (isend / irecv, batch_isend_irecv) before computing the "
        "current one (double buffering, as ring attention implementations do), or keep each "
        "exchanging pair of ranks on the same node.",
        f"让点对点交换{who_zh}与计算重叠：在计算当前块之前异步发起下一块的收发（isend / irecv、"
        "batch_isend_irecv，双缓冲，环形注意力的常见做法），或把交换数据的每对卡放在同一节点上。",
        min(per_step_us, rest_us),
        BoundKind.UPPER_BOUND,
    )
    return en, zh, remedy


def rule_exposed_communication(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Exposed-communication rule: communication not overlapped on every rank is a job cause.

    Rule: the exposed communication (Communication Not Overlapped and Exclude Receive) of the rank
    that waits least in each step (mean over steps) — the last to arrive, so none of it is
    waiting for a peer — minus what the
    specific causes already explain (slow-link transit excess, the wait for a late rank without a step trace) is ≥ ``EXPOSED_MIN_SHARE`` (15%, the communication analyzer's communication-bound threshold)
    of the median step. Not applied when a communication-bound pipeline stage owns it. With ≥
    ``MANY_COLLECTIVES`` (32) collectives per step and rank, or a small-packet finding, the cause
    says "many small collectives" (their latency is exposed). Victims: every rank, lost =
    min(remainder, its exposed communication) (``how="own_time"``). Gain: the saving of the first
    change when the evidence selected one with its own measured saving (the router balanced, the
    waits moved, the gathered input removed, ...; ``metrics["first_change_us"]``), else the
    remainder (upper bound: all of it hidden or fused away; ``metrics["hideable_us"]`` either way). Source: ``step_trace``, ``comm_ops``
    (communication.json), ``comm_bandwidth``.
    """
    per = ctx.per_rank
    if per.empty or not math.isfinite(ctx.step_us):
        return []
    if any(
        c.mechanism is Mechanism.PIPELINE_IMBALANCE and c.category is Category.COMMUNICATION
        for c in causes
    ):
        return []
    col = "communication_not_overlapped_exclude_receive_us"
    # per step, the rank that waits least (the last to arrive); mean over steps, so a rank that
    # waited for another rank's one-step stall does not count as exposed communication
    # (without the steps a job-wide cause owns: every rank waits in them for the stalled others,
    # which is that cause's time, not exposed communication of the job's own)
    owned = {x for c in causes if c.culprit.kind == "job" and c.steps for x in c.steps}
    frame = ctx.frame[~ctx.frame["step"].isin(owned)] if owned else ctx.frame
    if frame.empty:
        frame = ctx.frame
    # what the collectives attribute to late ranks is theirs, not the job's: a victim's exposed
    # communication counts less its measured wait for them (a late rank's own stays as it is:
    # when its stall falls inside its collectives it counts there as Communication, and the
    # least over ranks passes over it)
    att = ctx.attribution
    own = frame[col]
    raw_least = float(own.groupby(frame["step"]).min().mean())
    adjusted = False
    if att is not None and att.culprits:
        late = {r for c in att.culprits for r in c.unit.ranks}
        waited: dict[int, float] = defaultdict(float)
        for cc in att.culprits:
            for r, v in cc.victims.items():
                if int(r) not in late:
                    waited[int(r)] += float(v)
        own = (own - frame["rank"].map(waited).fillna(0.0)).clip(lower=0.0)
        adjusted = bool(waited)
    least = float(own.groupby(frame["step"]).min().mean())
    # a slow link's transit excess, and the wait for a late rank whose own row is missing (the
    # least-waiting rank of the step trace then still waits for it; already taken off above when
    # the attribution measured it), are not the job's own
    others = [
        c
        for c in causes
        if c.mechanism is Mechanism.SLOW_LINK or (_row_missing(c) and not adjusted)
    ]
    explained = sum(c.gain_us or 0.0 for c in others)
    rest = least - explained
    if rest < EXPOSED_MIN_SHARE * ctx.step_us:
        return []
    victims = tuple(
        sorted(
            (
                Impact(
                    integer(r), min(rest, num(c)), share_of(min(rest, num(c)), num(st)), "own_time"
                )
                for r, c, st in zip(
                    per.index.tolist(), per[col].tolist(), per["step_us"].tolist(), strict=True
                )
            ),
            key=lambda i: (-i.lost_us, i.rank),
        )
    )
    ops = ctx.profile.get("comm_ops")
    n_ops = float(ops.groupby(["rank", "step"]).size().median()) if not ops.empty else float("nan")
    # the communication analyzer's figure (mean over ranks of Overlapped / Communication), so
    # the cause and the finding it claims quote one number
    comm = ctx.result("communication")
    overlap = float(comm.metrics.get("mean_overlap_ratio", float("nan"))) if comm else float("nan")
    if not math.isfinite(overlap):
        denom = float((per["overlapped_us"] + per[col]).sum())
        overlap = share_of(float(per["overlapped_us"].sum()), denom)
    metrics = {
        "hideable_us": rest,
        "min_not_overlapped_us": raw_least,
        "min_not_overlapped_share": share_of(raw_least, ctx.step_us),
        "overlap_ratio": overlap,
    }
    small_f = ctx.finding("slow_link.communication.small_packets")
    # "many small collectives" names the mechanism only when it holds the time: many collectives
    # per step, or small transfers taking at least half of the exposed communication (a few
    # small transfers of 1 ms beside 48 ms of exposed communication do not)
    small_us = sum(f.metrics.get("small_time_us_per_step", 0.0) for f in small_f)
    # (many collectives that each move megabytes are not small: their transfer, not their
    # latency, is what is exposed, and fusing them saves nothing)
    bw = ctx.profile.get("comm_bandwidth")
    op_mb = (
        float(bw.groupby(["rank", "step", "op_name"])["transit_size_mb"].sum().median())
        if not bw.empty and {"rank", "step", "op_name", "transit_size_mb"} <= set(bw.columns)
        else float("nan")
    )
    many = (
        math.isfinite(n_ops)
        and n_ops >= MANY_COLLECTIVES
        and not (math.isfinite(op_mb) and op_mb > SMALL_COLLECTIVE_MB)
    ) or (bool(small_f) and small_us >= SMALL_TIME_SHARE * rest)
    extra = extra_zh = ""  # facts of the communication (in the parenthesis)
    # what the evidence says about why it is exposed: one sentence each, after the figures
    ev: list[str] = []
    ev_zh: list[str] = []
    if math.isfinite(n_ops):
        metrics["collectives_per_step"] = n_ops
        extra = f", {n_ops:.0f} collectives per step per rank"
        extra_zh = f"，每卡每步 {n_ops:.0f} 次集合通信"
    sl = ctx.result("slow_link")
    if (
        many
        and small_f
        and sl is not None
        and "small_packets" in sl.tables
        and not sl.tables["small_packets"].empty
    ):
        small_share = float(sl.tables["small_packets"]["small_share"].max())
        metrics["small_packet_share"] = small_share
        extra += f", {pct(small_share)} small packets"
        extra_zh += f"，小包占 {pct(small_share)}"
    # which collectives hold the time (comm_ops Elapse by operator type): the evidence that
    # picks between fusing, overlapping and changing what is communicated (e.g. ZeRO-3 gathers)
    ops = ctx.profile.get("comm_ops")
    if not ops.empty and {"op_type", "elapse_ms"} <= set(ops.columns):
        el = pd.to_numeric(ops["elapse_ms"], errors="coerce")
        by = el.groupby(ops["op_type"].astype(str).str.lower()).sum()
        by = by[by > 0].sort_values(ascending=False)
        if len(by) and float(by.sum()) > 0:
            sh = by / float(by.sum())
            top = [(str(t), float(v)) for t, v in sh.items() if v >= 0.2][:2]
            names = COLLECTIVE_NAMES
            if top:
                # how many of each per (step, rank) and how long one takes (median Elapse)
                kind = ops["op_type"].astype(str).str.lower()
                units = (
                    max(ops[["rank", "step"]].drop_duplicates().shape[0], 1)
                    if {"rank", "step"} <= set(ops.columns)
                    else 0
                )

                def each(t: str) -> tuple[str, str]:
                    if not units:
                        return "", ""
                    n = float((kind == t).sum()) / units
                    one = 1000.0 * float(el[kind == t].median())
                    metrics[f"{t}_per_step"] = n
                    metrics[f"{t}_us_median"] = one
                    return (
                        f", {n:.3g} per step, {ms(one)} each (median)",
                        f"，每步 {n:.3g} 次，每次 {ms(one)}（中位数）",
                    )

                parts = [(t, v, *each(t)) for t, v in top]
                txt = " and ".join(f"{names.get(t, t)} ({pct(v)}{e})" for t, v, e, _z in parts)
                extra += f"; mostly {txt} of the communication time"
                extra_zh += f"；通信时间主要是 {'和'.join(f'{names.get(t, t)}（{pct(v)}{z}）' for t, v, _e, z in parts)}"
                for t, v in top:
                    metrics[f"{t}_share"] = v
    # collectives that move (almost) nothing, several per step: barriers / scalar syncs, each a
    # point where every rank waits for all, so the gradient reduction before it cannot overlap
    # collectives that hold the compute stream inside an operator split in parts (a synchronized
    # BatchNorm) or at the start of the step (nothing launched to run under them)
    cc = collective_context(ctx.profile, ctx.ranks)
    cc_remedy: Remedy | None = None
    # one large gather run again with the same size in a step: one tensor moved twice
    rep = repeated_collective(ctx.profile, ctx.ranks)
    # all-gathers opening the step hold the parameters' gathers when they are all of the step's
    # repeated ones (a tied embedding gathered again later in the step is that tensor's)
    param_gather = (
        cc is not None
        and cc.at_step_start
        and "gather" in cc.collective.lower()
        and (rep is None or cc.collectives_per_step >= rep.per_step)
        and cc.collectives_per_step >= PARAM_GATHER_SHARE * _gathers_per_step(ctx)
    )
    if cc is not None and cc.saving_us >= EVENT_WAIT_MIN_SHARE * rest:
        cc_en, cc_zh, cc_remedy = _context_text(
            cc, rest, ctx.distributed_args if param_gather else None
        )
        ev.append(cc_en)
        ev_zh.append(cc_zh)
        metrics |= {
            "context_collectives_per_step": cc.collectives_per_step,
            "context_idle_us_per_step": cc.idle_us_per_step,
        }
    else:
        cc = None
    tiny = _tiny_collectives(ctx)
    if tiny is not None and cc is not None and not cc.at_step_start:
        tiny = None  # the small collectives are that operator's own exchange, not barriers
    if tiny is not None:
        ev.append(tiny[0])
        ev_zh.append(tiny[1])
        metrics["tiny_collectives_per_step"] = tiny[3]
        if tiny[4]:
            metrics["per_tensor_loop_us_per_step"] = tiny[4]
    # point-to-point exchanges in a job without pipeline stages (context parallelism's ring of
    # key/value blocks, a hand-written exchange): blocking send/receive is what to overlap
    p2p = _p2p_outside_pipeline(ctx, rest)
    if p2p is not None:
        ev.append(p2p[0])
        ev_zh.append(p2p[1])
        metrics["p2p_us_per_step"] = p2p[2].gain_us or 0.0
    # gathers whose data goes straight to an operator that costs a few percent of them: the data
    # is gathered for little work (a norm on the whole gathered sequence, not the rank's shard)
    # (parameter gathers opening the step feed the first layer: that is their position, not a
    # gather for little work or one tensor gathered again)
    gf = gather_feeds(ctx.profile, ctx.ranks)
    if gf is not None and (
        gf.per_step < 4 or gf.us_per_step < FEEDS_MIN_SHARE * rest or param_gather
    ):
        gf = None
    # the compute stream waits on the collectives' end events right after launching them
    # (handle.wait() straight after an async_op=True launch): asynchronous, but never overlapped
    ew = event_waits(ctx.profile, ctx.ranks)
    ew_remedy: Remedy | None = None
    if ew is not None and ew.per_step >= 1 and ew.us_per_step >= EVENT_WAIT_MIN_SHARE * rest:
        coll = ew.after.removeprefix("Hccl")
        ev.append(
            f"; the compute stream waits {ew.per_step:.0f} times per step on the event each {coll} "
            f"records at its end, launched right after it ({ms(ew.wait_us)} each, "
            f"{ms(ew.us_per_step)} per step; EVENT_WAIT tasks after aclrtStreamWaitEvent in "
            "trace_view.json): the collectives are asynchronous but waited for at once "
            "(handle.wait() right after the launch), so the computation queued behind them "
            "cannot run under them"
        )
        ev_zh.append(
            f"；计算流每步 {ew.per_step:.0f} 次等待 {coll} 结束时记录的事件，且紧跟在它下发之后（每次 "
            f"{ms(ew.wait_us)}，每步 {ms(ew.us_per_step)}；trace_view.json 中 aclrtStreamWaitEvent 之后的 "
            "EVENT_WAIT 任务）：集合通信虽是异步下发，却在下发后立刻等待（紧跟着 handle.wait()），"
            "排在后面的计算无法与它重叠"
        )
        # the last wait of a step is followed by work that needs its result (the optimizer)
        gain = min(max(ew.us_per_step - ew.wait_us, 0.0), rest)
        ew_remedy = Remedy(
            "action",
            f"Wait for the {coll} handles only where their results are needed: not right after "
            "the launch but before the optimizer step (in the communication hook's future "
            "callback, or at the end of the backward), or use the built-in bucketed overlap "
            "(DDP's default hook, Megatron --overlap-grad-reduce).",
            f"只在需要结果的地方等待 {coll} 的句柄：不要在下发后立刻等待，而是在优化器更新之前（通信 hook 的 "
            "future 回调里，或反向结束时）；或使用内置的分桶重叠（DDP 默认 hook、Megatron "
            "--overlap-grad-reduce）。",
            gain,
            BoundKind.UPPER_BOUND,
        )
        metrics |= {
            "event_waits_per_step": ew.per_step,
            "event_wait_us_per_step": ew.us_per_step,
        }
    # the router spreads tokens unevenly layer by layer: every all-to-all waits for that layer's
    # most loaded expert rank, a different one each layer, the same total per step on every rank
    load = expert_load(ctx.profile, ctx.ranks)
    el_remedy: Remedy | None = None
    if (
        load is not None
        and load.total_spread <= ROUTER_TOTAL_SPREAD
        and load.hot_ranks >= 2
        and load.a2a_us_per_step >= EVENT_WAIT_MIN_SHARE * rest
    ):
        ev.append(
            f"; the router spreads the tokens unevenly in every layer: the GroupedMatmul calls get "
            f"{load.min_rows} to {load.max_rows} token rows depending on the rank (the most loaded "
            f"{load.max_ratio:.1f}x the mean, the least {load.min_ratio:.1f}x; kernel_details.csv "
            f"input shapes), a different rank being the most loaded in each layer ({load.hot_ranks} "
            "ranks in turn) while every rank gets the same total per step; each all-to-all "
            f"(dispatch / combine, {ms(load.a2a_us_per_step)} per step) waits for its layer's most "
            "loaded rank"
        )
        ev_zh.append(
            f"；路由在每一层都把 token 分得不均：GroupedMatmul 各次调用按卡得到 {load.min_rows} 到 "
            f"{load.max_rows} 行 token（最多的是平均的 {load.max_ratio:.1f} 倍，最少的 {load.min_ratio:.1f} 倍；"
            f"来自 kernel_details.csv 的输入 shape），每层最忙的卡都不同（{load.hot_ranks} 张卡轮流），"
            f"而每张卡每步的总量相同；每次 AlltoAll（分发 / 合并，每步 {ms(load.a2a_us_per_step)}）"
            "都要等该层负载最重的卡"
        )
        gain = min(load.a2a_us_per_step * (1.0 - 1.0 / load.max_ratio), rest)
        el_remedy = Remedy(
            "action",
            "Balance the MoE router: an auxiliary load-balancing loss (Megatron / MindSpeed "
            "--moe-router-load-balancing-type aux_loss with --moe-aux-loss-coeff around 1e-2, or "
            "aux-loss-free bias balancing), or a capacity factor that caps each expert's tokens "
            "(--moe-expert-capacity-factor); a larger HCCL buffer or another dispatcher does not "
            "change what the most loaded rank receives.",
            "均衡 MoE 路由：加辅助负载均衡损失（Megatron / MindSpeed 的 --moe-router-load-balancing-type "
            "aux_loss，--moe-aux-loss-coeff 约 1e-2，或无辅助损失的偏置均衡），或用容量因子限制每个专家的 "
            "token 数（--moe-expert-capacity-factor）；调大 HCCL 缓冲或换 dispatcher 都改变不了负载最重的卡"
            "收到的数据量。",
            gain,
            BoundKind.ESTIMATE,
        )
        metrics |= {
            "expert_rows_max_ratio": load.max_ratio,
            "alltoall_us_per_step": load.a2a_us_per_step,
        }
    # tensor parallelism without sequence parallelism: all-reduces of the full activation
    nosp = _tp_without_sequence_parallel(ctx)
    if nosp is not None:
        ev.append(nosp[0])
        ev_zh.append(nosp[1])
        metrics |= nosp[3]
    # MoE tokens dispatched by all-gather: every rank gathers its expert group's tokens
    disp = _moe_allgather_dispatch(ctx, rest)
    if disp is not None:
        ev.append(disp[0])
        ev_zh.append(disp[1])
        metrics |= disp[3]
    # a hand-written two-level sync: reduce in each node, all-reduce between one rank per node
    lead = _leader_allreduce(ctx, rest)
    if lead is not None:
        metrics |= lead.metrics
        if missing_ranks(ctx.profile):  # the job's cause (see _leader_cause): it is evidence
            ev.append(lead.en)
            ev_zh.append(lead.zh)
    gf_remedy: Remedy | None = None
    if gf is not None:
        gf_en, gf_zh, gf_remedy = _gather_feeds_text(gf, rest)
        ev.append(gf_en)
        ev_zh.append(gf_zh)
        metrics |= {
            "gathers_feeding_cheap_op_per_step": gf.per_step,
            "gathers_feeding_cheap_op_us_per_step": gf.us_per_step,
        }
    # one collective that moves far more than its group's others: what it carries (the kernels
    # that write and read it) picks the fix
    dom = dominant_collective(ctx.profile, ctx.ranks)
    d_en = d_zh = ""
    if dom is not None:
        d_en, d_zh, d_metrics = _dominant_text(dom)
        metrics |= d_metrics
    rep_remedy: Remedy | None = None
    rep_shared = False
    if rep is not None and dom is None and not param_gather:
        rep_en, rep_zh, rep_remedy, rep_shared = _repeated_text(rep, rest)
        ev.append(rep_en)
        ev_zh.append(rep_zh)
        metrics |= {
            "repeated_collective_mb": rep.size_mb,
            "repeated_collective_per_step": rep.per_step,
            "repeated_collective_us": rep.elapse_us,
        }
    # MoE layers padding every expert's input to capacity: most of what the all-to-alls move and
    # the expert MatMuls compute is padding
    mp = moe_padding(ctx.profile, ctx.ranks)
    mp_remedy: Remedy | None = None
    if mp is not None and mp.saving_us > 0:
        mp_en, mp_zh, mp_remedy = _moe_padding_text(mp)
        ev.append(mp_en)
        ev_zh.append(mp_zh)
        metrics |= {
            "moe_alltoall_us_per_step": mp.alltoall_us,
            "moe_expert_matmul_us_per_step": mp.expert_us,
            "moe_padding_share": mp.padding_share,
        }
    # one kind of collective slower than another over the same links: the links are fine, that
    # kind is slow (a deterministic reduction, its algorithm)
    ct = slow_collective_types(ctx)
    ct_remedy: Remedy | None = None
    if ct is not None:
        ct_en, ct_zh, ct_remedy = _collective_types_text(ctx, ct)
        ev.append(ct_en)
        ev_zh.append(ct_zh)
        metrics["slow_collective_bandwidth_ratio"] = ct.ratio
    # a communication setting the environment check flags is the first thing to change: it
    # slows every collective of the job (HCCL_BUFFSIZE below its default)
    # (a setting that differs between ranks is not the job's: it is the cause of the ranks that
    # have it, said there)
    setting = [
        f
        for f in ctx.finding("env_check.env.")
        if "comm_setting" in f.symptom_tags and f.id != "env_check.env.differs_across_ranks"
    ]
    if setting:
        ev.append("; " + setting[0].summary.split(". ")[0])
        ev_zh.append("；" + setting[0].summary_zh.split("。")[0])
    # ASCEND_LAUNCH_BLOCKING=1: every launch waits for the previous operator to finish, so no
    # computation can run under a collective; the exposed communication is partly its consequence
    blocking = ctx.finding("env_check.env.ascend_launch_blocking")
    if blocking:
        rl, rl_zh = ranks_label(list(blocking[0].ranks))
        ev.append(
            f"; ASCEND_LAUNCH_BLOCKING=1 on {rl} makes every launch wait for the previous "
            "operator, so no computation can run under a collective"
        )
        ev_zh.append(
            f"；{rl_zh}设置了 ASCEND_LAUNCH_BLOCKING=1，每次下发都等上一个算子执行完，集合通信下面无法有计算"
        )
    # gradient accumulation that all-reduces in every micro-batch's backward pass: only the
    # last pass needs to (no_sync on the others), so most of these collectives are redundant
    ps = pass_sync(ctx.profile, ctx.ranks)
    every_pass = ps is not None and ps.passes_with_sync >= 2 and ps.passes_with_sync >= ps.passes
    if ps is not None and every_pass:
        grads = ps.passes_with_sync * ps.allreduces_per_pass
        metrics |= {
            "backward_passes_per_step": ps.passes,
            "gradient_allreduces_per_step": grads,
            "allreduces_per_backward_pass": ps.allreduces_per_pass,
        }
        ev.append(
            f"; the gradients are all-reduced in each of the {ps.passes:.0f} backward passes "
            f"(micro-batches) of a step ({ps.allreduces_per_pass:.0f} per pass, {grads:.0f} "
            f"gradient all-reduces per step where {ps.allreduces_per_pass:.0f} would do): "
            "gradient accumulation needs them only in the last pass"
        )
        ev_zh.append(
            f"；每步 {ps.passes:.0f} 个微批次，每个微批次的反向都做了梯度 AllReduce（每个反向 "
            f"{ps.allreduces_per_pass:.0f} 次，每步共 {grads:.0f} 次，本来 "
            f"{ps.allreduces_per_pass:.0f} 次就够）：梯度累积只需在最后一个微批次同步"
        )
    waitf = ctx.finding("communication.communication.wait_dominated")
    missing = missing_ranks(ctx.profile)
    if waitf and missing:
        # waiting for a peer: each rank present loses its own exposed communication (not the
        # job-wide floor a setting would give back)
        waiting = tuple(
            sorted(
                (
                    Impact(integer(r), num(c), share_of(num(c), num(st)), "collective_wait")
                    for r, c, st in zip(
                        per.index.tolist(), per[col].tolist(), per["step_us"].tolist(), strict=True
                    )
                    if num(c) > 0
                ),
                key=lambda i: (-i.lost_us, i.rank),
            )
        )
        return [_peer_wait_cause(ctx, waitf[0], missing, raw_least, waiting, metrics)]
    mc2 = ctx.finding("communication.mc2_opportunity")
    findings = _claim(
        ctx,
        lambda f: (
            f.id.startswith("communication.")
            or "comm_setting" in f.symptom_tags
            or f.id.startswith("cluster_breakdown.bottleneck.communication")
            or f.id.startswith("slow_link.communication.")
            or f.id.startswith("cluster_breakdown.communication.wait_spread")
        ),
    )
    # fusing saves at most the time the small transfers take (small-packet findings), never
    # the whole exposed communication; without a measured small-transfer time, no gain
    fuse_gain = min(rest, small_us) if small_us > 0 else None
    fuse = Remedy(
        "action",
        "Fuse the many small collectives into fewer, larger ones (bigger gradient buckets, "
        "coalesced/flattened parameters, fewer per-layer collectives): their latency is exposed.",
        "把大量小的集合通信合并为更少更大的通信（增大梯度分桶、参数扁平化合并、减少逐层通信）："
        "它们的时延没有被掩盖。",
        fuse_gain,
        BoundKind.UPPER_BOUND if fuse_gain is not None else BoundKind.NONE,
    )
    overlap_r = Remedy(
        "action",
        "Overlap communication with computation: asynchronous collectives / gradient-bucket "
        "overlap, a ZeRO stage with prefetching, or more micro-batches to hide it.",
        "让通信与计算重叠：异步集合通信或梯度分桶重叠、带预取的 ZeRO 阶段，或用更多微批次掩盖通信。",
        rest,
        BoundKind.UPPER_BOUND,
    )
    # fusing is offered only where small collectives are measured: a few large all-reduces
    # have nothing to fuse
    # (second to overlapping only when the small transfers hold a share of the exposed time: a
    # fix worth 1 ms of 39 ms is not one to act on)
    small_counts = small_us > 0 and small_us >= FUSE_MIN_SHARE * rest
    remedies = [fuse, overlap_r] if many else [overlap_r, fuse] if small_counts else [overlap_r]
    if ps is not None and every_pass:
        saved = rest * (1.0 - 1.0 / ps.passes)
        remedies.insert(
            0,
            Remedy(
                "action",
                f"All-reduce the gradients once per step, after the last of the {ps.passes:.0f} "
                "micro-batches: wrap the others' forward/backward in DDP's model.no_sync() (or "
                "use the framework's gradient-accumulation fusion: Megatron / MindSpeed "
                "--gradient-accumulation-fusion, DeepSpeed gradient_accumulation_steps).",
                f"每步只在 {ps.passes:.0f} 个微批次中的最后一个之后做一次梯度 AllReduce：其余微批次的"
                "前向/反向放在 DDP 的 model.no_sync() 中（或使用框架的梯度累积融合：Megatron / MindSpeed "
                "的 --gradient-accumulation-fusion，DeepSpeed 的 gradient_accumulation_steps）。",
                saved,
                BoundKind.UPPER_BOUND,
            ),
        )
    if p2p is not None:
        remedies.insert(0, p2p[2])
    if tiny is not None:
        remedies.insert(0, tiny[2])
    if dom is not None and dom.loss is not None:
        remedies.insert(0, _vocab_parallel_remedy(dom))
    if blocking:
        remedies.insert(
            0,
            Remedy(
                "action",
                "Unset ASCEND_LAUNCH_BLOCKING first: with synchronous launches no collective can "
                "overlap computation; measure the exposed communication again without it.",
                "先取消 ASCEND_LAUNCH_BLOCKING：同步下发时集合通信无法与计算重叠；取消后再测一次未被掩盖的通信。",
                None,
                BoundKind.NONE,
            ),
        )
    if ct_remedy is not None:
        remedies.insert(0, ct_remedy)
    if mp_remedy is not None:
        remedies.insert(0, mp_remedy)
    if gf_remedy is not None:
        remedies.insert(0, gf_remedy)
    if ew_remedy is not None:
        remedies.insert(0, ew_remedy)
    if el_remedy is not None:
        remedies.insert(0, el_remedy)
    if cc_remedy is not None:
        remedies.insert(0, cc_remedy)
    if disp is not None:
        remedies.insert(0, disp[2])
    if lead is not None:
        remedies.insert(0, lead.remedy)
    if nosp is not None:
        remedies.insert(0, nosp[2])
    if rep_remedy is not None:
        # first when its instances feed operators that read one tensor (the evidence it is the
        # same data), after the other changes the evidence selected otherwise
        remedies.insert(0 if rep_shared else 1, rep_remedy)
    for f in setting[:1]:
        remedies.insert(
            0,
            Remedy(
                "action",
                "Raise HCCL_BUFFSIZE to at least its default (200 MB) if device memory allows: "
                "large collectives then run in one round instead of several.",
                "显存允许时把 HCCL_BUFFSIZE 至少调回默认值（200 MB）：大通信就能一轮完成，而不是分多轮。",
                None,
                BoundKind.NONE,
            )
            if f.id == "env_check.env.hccl_buffsize"
            else Remedy("check", f.summary, f.summary_zh),
        )
    for f in mc2:
        mc2_r = Remedy(
            "action",
            "Enable MC2 for the tensor-parallel layers (MindSpeed --use-ascend-mc2: the fused "
            "AllGatherMatmul / MatmulReduceScatter / MatmulAllReduce operators), so each TP "
            "collective runs inside the MatMul beside it, in pipelined pieces.",
            "为张量并行层开启 MC2（MindSpeed 的 --use-ascend-mc2：融合算子 AllGatherMatmul / "
            "MatmulReduceScatter / MatmulAllReduce），让每个 TP 集合通信在相邻的 MatMul 内分块流水执行。",
            f.estimated_gain_us,
            BoundKind.UPPER_BOUND,
        )
        # the TP collectives beside the MatMuls hold most of what is exposed: that is the fix
        hid = float(f.metrics.get("hidden_us", 0.0))
        if hid >= MC2_FIRST_SHARE * rest and remedies[0] in (overlap_r, fuse):
            remedies.insert(0, mc2_r)
            off = str(ctx.distributed_args.get("use_ascend_mc2", "")).lower() == "false"
            pairs = float(f.metrics.get("pairs_per_step", 0.0))
            ev.append(
                f"; {pairs:.0f} MatMul kernels per step run right next to a tensor-parallel "
                f"collective with nothing under it (kernel_details.csv), which MC2 would fuse"
                + (" (the recorded distributed_args say use_ascend_mc2 false)" if off else "")
            )
            ev_zh.append(
                f"；每步有 {pairs:.0f} 个 MatMul 紧挨着张量并行集合通信执行，通信下面没有计算"
                "（kernel_details.csv），MC2 可以把它们融合"
                + ("（记录的 distributed_args 中 use_ascend_mc2 为 false）" if off else "")
            )
        else:
            remedies.append(mc2_r)
    remedies.append(
        Remedy(
            "check",
            "Open one step in the timeline (MindStudio Insight) and see which collectives run "
            "with no computation under them and whether many of them are small.",
            "在时间线（MindStudio Insight）中打开一步，确认哪些集合通信下面没有计算、是否有大量小通信。",
        )
    )
    # a first change the evidence selected (the router, an event wait, a gathered input, a slow
    # collective kind, the sharded logits, point-to-point overlap) with its own measured saving
    # is the fault; the rest of the exposed communication is the job's baseline, which hiding
    # could still win (the "up to" figure of the summary and of the overlap remedy)
    first = remedies[0]
    named = (
        first not in (overlap_r, fuse)
        and first.kind == "action"
        and first.gain_us is not None
        and 0 < first.gain_us < rest
    )
    gain, gain_bound = (
        (float(first.gain_us or 0.0), first.bound) if named else (rest, BoundKind.UPPER_BOUND)
    )
    if named:
        metrics["first_change_us"] = gain
    # ranks the job had but the folder lacks: "every rank" and "no rank is to blame" cover only
    # the ranks present, and a missing one could be the slow rank or hold the slow link
    n_in = len(ctx.ranks)
    sc = presence_scope(ctx, missing)
    scope, scope_zh = "on " + sc.every, "在" + sc.every_zh + "上" + ("都" if n_in > 1 else "")
    if missing:
        blame = (
            f"the {len(missing)} missing rank(s) could hide a slow rank or link, so whether one is "
            "to blame cannot be told"
        )
        blame_zh = f"缺少的 {len(missing)} 张卡中可能有慢卡或慢链路，无法判断是否由某张卡或链路造成"
    elif lead is not None:
        blame, blame_zh = (
            "the leaders' devices and links are not faulty: the sync's layout puts every node's "
            "traffic on them, so every other rank waits for them",
            "首卡的设备和链路本身没有故障：是同步方案的结构把每台机器的流量都压在它们身上，其他卡都在等它们",
        )
    else:
        blame, blame_zh = (
            "the same on every rank, not the fault of one rank or link",
            "每张卡都一样，不是某一张卡或某一条链路造成的",
        )
    # one figure per quantity: the exposed time, the part another cause accounts for, the rest
    if explained > 0:
        slow = all(c.mechanism is Mechanism.SLOW_LINK for c in others)
        whose, whose_zh = (
            ("the slow link's longer transfers", "慢链路多花的传输时间")
            if slow
            else ("the wait for the late rank", "等待晚到的卡")
            if all(_row_missing(c) for c in others)
            else ("the causes above", "上面的原因")
        )
        hide = (
            f"{ms(explained)} of it is {whose} (counted there); hiding the rest would save up to "
            f"{ms(rest)} per step."
        )
        hide_zh = f"其中 {ms(explained)} 是{whose_zh}（已计入该原因）；掩盖其余部分每步最多可节省 {ms(rest)}。"
    else:
        hide = f"hiding all of it would save up to {ms(rest)} per step."
        hide_zh = f"全部掩盖后每步最多可节省 {ms(rest)}。"
    # per step, the least-waiting rank of that step (mean over steps): not one rank's own mean,
    # which a finding may quote and which can differ in the last digit
    least_txt = (
        "in each step even the rank that waits least has"
        if n_in > 1
        else f"rank {ctx.ranks[0]} has"
    )
    least_zh = "即使每步等待最少的卡，每步也有" if n_in > 1 else f"{ctx.ranks[0]}号卡每步有"
    # the step trace's figure, and the part of it the collectives charge to late ranks
    waited_en = waited_zh = ""
    if ms(raw_least) != ms(least):
        waited_en = f", {ms(least)} of it the job's own once the waits for late ranks are taken off"
        waited_zh = f"，去掉等待晚到卡的时间后属于作业自身的是 {ms(least)}"
    head = (
        f"Many small collectives are exposed {scope}"
        if many
        else f"Communication is exposed {scope}"
    )
    head_zh = f"大量小的集合通信{scope_zh}没有被掩盖" if many else f"通信{scope_zh}没有被掩盖"
    cause = RootCause(
        id="cause.exposed_communication",
        mechanism=Mechanism.EXPOSED_COMMUNICATION,
        category=Category.COMMUNICATION,
        culprit=Culprit(kind="job", label="the whole job", label_zh="整个作业"),
        victims=victims,
        summary=(
            f"{head}: {least_txt} {ms(raw_least)} per step "
            f"({pct(share_of(raw_least, ctx.step_us))} of the step) of communication not "
            f"overlapped{waited_en} (overlap {pct(overlap)}{extra})."
            + "".join(f" {upper_first(x.removeprefix('; '))}." for x in [*ev, d_en] if x)
            + f" {upper_first(blame)}; {hide}"
        ),
        summary_zh=(
            f"{head_zh}：{least_zh} {ms(raw_least)}（占步长 "
            f"{pct(share_of(raw_least, ctx.step_us))}）未被掩盖的通信{waited_zh}（重叠率 {pct(overlap)}{extra_zh}）。"
            + "".join(f"{x.removeprefix('；')}。" for x in [*ev_zh, d_zh] if x)
            + f"{blame_zh}；{hide_zh}"
        ),
        metrics=metrics,
        findings=findings,
        gain_us=gain,
        bound=gain_bound,
        remedies=tuple(remedies),
        # small_packets only when small transfers were measured (a small-packet finding) and
        # count (many collectives, or a share of the exposed time)
        symptom_tags=(
            ("comm_not_overlapped", "comm_bound", "small_packets")
            if small_f and (many or small_counts)
            else ("comm_not_overlapped", "comm_bound")
        )
        # the tiny collectives each carry one tensor's norm (clipping tensor by tensor)
        + (("per_tensor_sync",) if tiny is not None and tiny[4] else ()),
        severity=_severity(rest, ctx.step_us),
    )
    if lead is not None and not missing:
        return [_leader_cause(ctx, cause, lead)]
    return [cause]


def _leader_cause(ctx: Context, cause: RootCause, lead: LeaderSync) -> RootCause:
    """The exposed-communication cause re-told as the leaders' (a hand-written two-level sync).

    Every other rank waits for the ranks that carry the sync between the nodes: they are the
    culprit (a group), each other rank a victim of its own broadcast wait per step
    (``LeaderSync.waits``, communication.json Wait Time); the evidence, remedies and gain are the
    exposed-communication cause's.
    """
    lr, lr_zh = ranks_label(list(lead.leaders))
    victims = tuple(
        sorted(
            (
                Impact(r, w, share_of(w, ctx.val(r, "step_us")), "collective_wait")
                for r, w in lead.waits.items()
                if w > 0 and share_of(w, ctx.val(r, "step_us")) >= VICTIM_MIN_SHARE
            ),
            key=lambda v: (-v.lost_us, v.rank),
        )
    )
    return dataclasses.replace(
        cause,
        id="cause.slow_group.leader_sync",
        mechanism=Mechanism.SLOW_GROUP,
        culprit=Culprit(
            kind="group",
            ranks=lead.leaders,
            label=f"{lr} (the only ranks that carry the gradient sync between the nodes)",
            label_zh=f"{lr_zh}（唯一承担跨机梯度同步的卡）",
        ),
        victims=victims or cause.victims,
        summary=(
            f"{upper_first(lr)} carry the gradient sync between the nodes alone and every other "
            f"rank waits for them: {lead.en.removeprefix('; ')}. {cause.summary}"
        ),
        summary_zh=(
            f"跨机梯度同步只由{lr_zh}承担，其他卡都在等它们：{lead.zh.removeprefix('；')}。"
            f"{cause.summary_zh}"
        ),
    )


#: Fusing small collectives is offered after overlapping when the small transfers take at least
#: this share of the exposed communication (slow_link small-packet findings).
FUSE_MIN_SHARE = 0.1


#: Settings that make HCCL reduce in a fixed order (slower reductions), when set to these values.
DETERMINISTIC_SETTINGS: dict[str, tuple[str, ...]] = {"HCCL_DETERMINISTIC": ("true", "1")}


def _env_set(
    ctx: Context, settings: dict[str, tuple[str, ...]]
) -> list[tuple[str, str, list[int]]]:
    """``(variable, value, ranks)`` of the ``settings`` set to one of their values (meta.env)."""
    meta = ctx.profile.get("meta")
    if meta.empty or "env" not in meta.columns:
        return []
    out: dict[tuple[str, str], list[int]] = {}
    for r, env in zip(meta["rank"], meta["env"], strict=True):
        if not isinstance(env, dict):
            continue
        for k, vals in settings.items():
            v = str(env.get(k, "")).strip()
            if v.lower() in vals:
                out.setdefault((k, v), []).append(int(r))
    return [(k, v, sorted(rs)) for (k, v), rs in out.items()]


def _collective_types_text(ctx: Context, ct: CollectiveTypes) -> tuple[str, str, Remedy]:
    """Evidence clause (en, zh) and first remedy for collective types slow on good links.

    From :func:`~advisor_chat.diagnosis.decompose.collective_types` (communication.json
    bandwidth per op type and transport) and ``meta.env`` (HCCL_DETERMINISTIC).
    """
    name = COLLECTIVE_NAMES.get(ct.fast.lower(), ct.fast)
    slow = ", ".join(COLLECTIVE_NAMES.get(k.lower(), k) for k in ct.slow)
    per = "; ".join(
        f"{tr} {f:.1f} GB/s against {s_:.1f} GB/s" for tr, (f, s_) in ct.by_transport.items()
    )
    per_zh = "；".join(
        f"{tr} 上 {f:.1f} GB/s 对 {s_:.1f} GB/s" for tr, (f, s_) in ct.by_transport.items()
    )
    en = (
        f"; on the same links {name} reaches full speed while {slow} runs at {ct.ratio:.2f}x of "
        f"it ({per}): the links are fine, {slow} itself is slow"
    )
    zh = (
        f"；在同样的链路上 {name} 能跑满带宽，而 {slow} 只有它的 {ct.ratio:.2f} 倍（{per_zh}）："
        f"链路本身没问题，慢的是 {slow} 本身"
    )
    # what running them at the fast kind's speed gives back: their time per step (comm_ops
    # Elapse, median over (rank, step)) times (1 - ratio)
    gain: float | None = None
    ops = ctx.profile.get("comm_ops")
    if not ops.empty and {"op_type", "elapse_ms", "rank", "step"} <= set(ops.columns):
        slow_kinds = {k.lower() for k in ct.slow}
        el = pd.to_numeric(ops["elapse_ms"], errors="coerce") * 1000.0
        mine = ops["op_type"].astype(str).str.lower().isin(slow_kinds)
        slow_us = el[mine].groupby([ops["rank"][mine], ops["step"][mine]]).sum()
        if len(slow_us):
            gain = float(slow_us.median()) * (1.0 - ct.ratio)
    det = _env_set(ctx, DETERMINISTIC_SETTINGS) if ct.reductions else []
    if det:
        k, v, rs = det[0]
        rl, rl_zh = ranks_label(rs)
        en += (
            f"; {k}={v} on {rl} makes HCCL reduce in a fixed order (deterministic reduction), "
            "which slows every reducing collective"
        )
        zh += f"；{rl_zh}设置了 {k}={v}，HCCL 按固定顺序做归约（确定性计算），所有归约类集合通信都会变慢"
        return (
            en,
            zh,
            Remedy(
                "action",
                f"Turn deterministic reduction off for training ({k}=false, or unset it): it slows "
                f"{slow} to {ct.ratio:.2f}x of the links' speed; keep it only for runs that "
                "compare results bit for bit.",
                f"训练时关闭确定性计算（{k}=false 或不设置）：它让 {slow} 只有链路速度的 "
                f"{ct.ratio:.2f} 倍；只在需要逐位对比结果的运行中开启。",
                gain,
                BoundKind.ESTIMATE if gain is not None else BoundKind.NONE,
            ),
        )
    return (
        en,
        zh,
        Remedy(
            "check",
            f"Find why {slow} is slower than {name} on the same links: deterministic reduction "
            "(HCCL_DETERMINISTIC), the algorithm HCCL selects (HCCL_ALGO) and the data type it "
            "reduces in; the network itself carries {name} at full speed.".replace("{name}", name),
            f"查明同样链路上 {slow} 为何比 {name} 慢：确定性计算（HCCL_DETERMINISTIC）、HCCL 选择的算法"
            f"（HCCL_ALGO）以及归约的数据类型；网络本身传 {name} 能跑满带宽。",
        ),
    )


#: Norm and residual operators that sequence parallelism runs on a shard of the sequence.
_SP_SHARDED_OPS = re.compile(r"^(?:RmsNorm|LayerNorm|Add$|AddRmsNorm|Dropout)", re.I)


def _tp_without_sequence_parallel(
    ctx: Context,
) -> tuple[str, str, Remedy, dict[str, float]] | None:
    """Tensor parallelism with sequence parallelism off: (clause, Chinese clause, remedy, metrics).

    When the recorded ``distributed_args`` say ``tensor_model_parallel_size`` > 1 and
    ``sequence_parallel`` false and all-reduces hold at least half of the communication time
    (``comm_ops`` Elapse): each TP layer all-reduces its full activation, and the norms and
    residual adds run on the whole sequence on every TP rank. Sequence parallelism replaces each
    all-reduce by a reduce-scatter and an all-gather (the same volume) and runs those operators
    on 1/tp of the sequence: the estimated saving is their time per (step, rank)
    (kernel_details.csv) x (1 - 1/tp); it also lets MC2 fuse the TP collectives into the
    MatMuls.
    """
    args = ctx.distributed_args
    tp_v = args.get("tensor_model_parallel_size")
    tp = tp_v if isinstance(tp_v, int) else 0
    if tp < 2 or str(args.get("sequence_parallel", "")).lower() != "false":
        return None
    ops = ctx.profile.get("comm_ops")
    if ops.empty or not {"op_type", "elapse_ms", "rank", "step"} <= set(ops.columns):
        return None
    el = pd.to_numeric(ops["elapse_ms"], errors="coerce").fillna(0.0)
    # the TP groups' all-reduces: groups of tp ranks (those of other sizes are not TP)
    size = (
        ops.groupby("group")["rank"].transform("nunique")
        if "group" in ops.columns
        else pd.Series(tp, index=ops.index)
    )
    ar = (ops["op_type"].astype(str).str.lower() == "allreduce") & (size == tp)
    if float(el.sum()) <= 0 or float(el[ar].sum()) < 0.5 * float(el.sum()):
        return None
    units = ops[["rank", "step"]].drop_duplicates().shape[0]
    ar_us = 1000.0 * float(el[ar].sum()) / max(units, 1)
    n_ar = float(ar.sum()) / max(units, 1)
    k = _compute_kernels(ctx.profile, spread_sample(sorted(ctx.ranks), PEER_SAMPLE))
    norm_us = 0.0
    if not k.empty and "step" in k.columns:
        k = k[k["step"] >= 0]
        hit = k[k["op_type"].astype(str).str.match(_SP_SHARDED_OPS)]
        n_units = max(k.groupby(["rank", "step"]).ngroups, 1)
        norm_us = float(hit["duration_us"].sum()) / n_units
    gain = norm_us * (1.0 - 1.0 / tp)
    en = (
        f"; tensor parallelism {tp} runs without sequence parallelism (distributed_args: "
        f"sequence_parallel false): {n_ar:.0f} all-reduces of the full activation per step "
        f"({ms(ar_us)}), and the norms and residual adds ({ms(norm_us)} per step) run on the "
        "whole sequence on every TP rank"
    )
    zh = (
        f"；张量并行 {tp} 没有开启序列并行（distributed_args：sequence_parallel 为 false）：每步 "
        f"{n_ar:.0f} 次对完整激活的 AllReduce（{ms(ar_us)}），归一化和残差加法（每步 {ms(norm_us)}）"
        "在每张 TP 卡上都对整条序列计算"
    )
    rem = Remedy(
        "action",
        f"Turn on sequence parallelism (--sequence-parallel): each TP all-reduce becomes a "
        f"reduce-scatter and an all-gather (the same volume), the norms and residual adds run on "
        f"1/{tp} of the sequence and the activations take 1/{tp} of the memory; with it, MC2 "
        "(--use-ascend-mc2) can then hide the TP collectives inside the MatMuls.",
        f"开启序列并行（--sequence-parallel）：每次 TP AllReduce 变为一次 ReduceScatter 加一次 AllGather"
        f"（数据量相同），归一化和残差加法只算 1/{tp} 的序列，激活显存也降为 1/{tp}；开启后还可以用 MC2"
        "（--use-ascend-mc2）把 TP 集合通信藏进 MatMul。",
        gain,
        BoundKind.ESTIMATE,
    )
    return en, zh, rem, {"tp_allreduce_us_per_step": ar_us, "sp_shardable_us_per_step": norm_us}


#: MC2 is the first change when the TP collectives next to MatMuls it would hide are at least
#: this share of the job's exposed communication.
MC2_FIRST_SHARE = 0.5

#: The all-gather dispatcher's collectives explain exposed communication when they hold at
#: least this share of the communication time.
DISPATCH_MIN_SHARE = 0.5


class LeaderSync(NamedTuple):
    """A hand-written two-level all-reduce (:func:`_leader_allreduce`).

    Attributes:
        en, zh: The evidence clause.
        remedy: Its first change.
        metrics: ``leader_sync_us_per_step``, ``leader_wait_us_per_step`` (mean over the other
            ranks), ``broadcast_wait_us_median`` (per broadcast, the other ranks), µs.
        leaders: The ranks that carry it (one per node).
        waits: ``{rank: µs per step}`` each other rank waits for its leader in the broadcasts.
        per_node: Ranks per node (the links a node has to the others).
    """

    en: str
    zh: str
    remedy: Remedy
    metrics: dict[str, float]
    leaders: tuple[int, ...]
    waits: dict[int, float]
    per_node: int


def _leader_allreduce(ctx: Context, rest: float) -> LeaderSync | None:
    """A hand-written two-level all-reduce (:class:`LeaderSync`) or None.

    From ``comm_groups`` and ``comm_ops``: one group holds exactly one rank of every node (the
    leaders) and runs all-reduces, and each node's group that holds one leader runs reduces and
    broadcasts: the gradients are reduced to one rank per node, all-reduced between the leaders
    only (each leader's NIC carries all of its node's traffic) and broadcast back; every other
    rank waits for its leader in the broadcast. The first change is one all-reduce over all the
    ranks (HCCL's own hierarchical algorithms use every card's link). Gain (upper bound): the
    time those collectives take per (step, rank), at most ``rest``.
    """
    nodes = ctx.nodes
    ops = ctx.profile.get("comm_ops")
    groups = groups_table(ctx.profile)
    if len(nodes) < 2 or ops.empty or groups.empty or "ranks" not in groups.columns:
        return None
    node_of = {r: i for i, n in enumerate(nodes) for r in n}
    kinds: dict[str, set[str]] = {
        str(g): {str(v).lower() for v in x.unique()}
        for g, x in ops.groupby(ops["group"].astype(str))["op_type"]
    }
    leaders: tuple[int, ...] = ()
    lead_g = ""
    local: list[str] = []
    for gid, rs in zip(groups["group"].astype(str), groups["ranks"], strict=True):
        members = tuple(int(r) for r in (rs or ()))
        on = {node_of.get(r, -1) for r in members}
        if (
            len(members) == len(nodes)
            and len(on) == len(nodes)
            and -1 not in on
            and "allreduce" in kinds.get(gid, set())
        ):
            leaders, lead_g = members, gid
    if not leaders:
        return None
    for gid, rs in zip(groups["group"].astype(str), groups["ranks"], strict=True):
        inside = {int(r) for r in (rs or ())}
        if (
            len(inside) > 1
            and len({node_of.get(r, -1) for r in inside}) == 1
            and len(inside & set(leaders)) == 1
            and {"reduce", "broadcast"} <= kinds.get(gid, set())
        ):
            local.append(gid)
    if len(local) < len(nodes):
        return None
    mine = ops[ops["group"].astype(str).isin([lead_g, *local])]
    el = pd.to_numeric(mine["elapse_ms"], errors="coerce").fillna(0.0)
    units = mine[["rank", "step"]].drop_duplicates().shape[0]
    us = 1000.0 * float(el.sum()) / max(units, 1)
    bc = mine["op_type"].astype(str).str.lower() == "broadcast"
    not_lead = ~mine["rank"].isin(leaders)
    waits: dict[int, float] = {}
    wait = bc_med = 0.0
    if "wait_ms" in mine.columns:
        w = pd.to_numeric(mine.loc[bc & not_lead, "wait_ms"], errors="coerce").fillna(0.0)
        sub = mine.loc[not_lead]
        steps_of = sub.groupby("rank")["step"].nunique()
        by_rank = (1000.0 * w).groupby(mine.loc[bc & not_lead, "rank"]).sum()
        waits = {
            int(r): float(v) / max(int(steps_of.get(r, 1)), 1)
            for r, v in zip(by_rank.index.tolist(), by_rank.tolist(), strict=True)
        }
        wait = 1000.0 * float(w.sum()) / max(sub[["rank", "step"]].drop_duplicates().shape[0], 1)
        bc_med = 1000.0 * float(w.median()) if len(w) else 0.0
    per_node = min(len(n) for n in nodes)
    lr = format_ranks(list(leaders))
    en = (
        f"; the gradients are synchronized in two levels by hand (reduced inside each node to one "
        f"rank, all-reduced between ranks {lr} only and broadcast back), so each node's whole "
        f"gradient crosses between the nodes over one link, its leader's, instead of 1/{per_node} "
        f"of it over each of its {per_node} cards' links; {ms(us)} of these collectives per step"
        + (
            f"; every other rank waits {ms(wait)} per step for its leader in the broadcasts "
            f"({ms(bc_med)} per broadcast, median)"
            if wait > 0
            else ""
        )
    )
    zh = (
        f"；梯度同步是手写的两级方案（先在每台机器内 reduce 到一张卡，再只在 {format_ranks(list(leaders), sep='、')}"
        f"号卡之间做 AllReduce，最后 broadcast 回去），所以每台机器的全部梯度都只经过一条链路（首卡的）跨机，"
        f"而不是每张卡各传 1/{per_node}；这些集合通信每步共 {ms(us)}"
        + (
            f"；其他卡每步在 broadcast 中等待各自的首卡 {ms(wait)}（每次 broadcast 中位数 {ms(bc_med)}）"
            if wait > 0
            else ""
        )
    )
    rem = Remedy(
        "action",
        f"Replace the hand-written reduce / leader all-reduce (ranks {lr}) / broadcast with one "
        "all-reduce over all the data-parallel ranks (torch.distributed.all_reduce on the whole "
        "group, or DDP's gradient buckets): HCCL's own hierarchical algorithms use every card's "
        "link and overlap the levels.",
        f"把手写的 reduce / 首卡（{format_ranks(list(leaders), sep='、')}号卡）AllReduce / broadcast "
        "换成在全部数据并行卡上做一次 AllReduce（在整个通信组上调用 torch.distributed.all_reduce，或用 DDP 的"
        "梯度分桶）：HCCL 自带的分层算法会用上每张卡的链路，并让各层重叠。",
        min(us, rest),
        BoundKind.UPPER_BOUND,
    )
    metrics = {
        "leader_sync_us_per_step": us,
        "leader_wait_us_per_step": wait,
        "broadcast_wait_us_median": bc_med,
    }
    return LeaderSync(en, zh, rem, metrics, leaders, waits, per_node)


def _moe_allgather_dispatch(
    ctx: Context, rest: float
) -> tuple[str, str, Remedy, dict[str, float]] | None:
    """MoE tokens dispatched by all-gather: (clause, Chinese clause, remedy, metrics) or None.

    When the recorded ``distributed_args`` say ``moe_token_dispatcher_type allgather`` and the
    all-gathers and reduce-scatters hold at least ``DISPATCH_MIN_SHARE`` of the communication
    time (``comm_ops`` Elapse, communication.json): each rank gathers every token of its
    expert-parallel group and reduce-scatters the output back. An all-to-all dispatcher sends
    a token only to its top-k experts' ranks: ``topk / ep`` of the volume, so the estimated
    saving is those collectives' time per (step, rank) x (1 - topk / ep), bounded by ``rest``.
    """
    args = ctx.distributed_args
    if str(args.get("moe_token_dispatcher_type", "")).lower() != "allgather":
        return None
    ops = ctx.profile.get("comm_ops")
    if ops.empty or not {"op_type", "elapse_ms", "rank", "step"} <= set(ops.columns):
        return None
    el = pd.to_numeric(ops["elapse_ms"], errors="coerce").fillna(0.0)
    kind = ops["op_type"].astype(str).str.lower()
    pair = kind.isin(("allgather", "reducescatter"))
    total = float(el.sum())
    if total <= 0 or float(el[pair].sum()) < DISPATCH_MIN_SHARE * total:
        return None
    units = ops[["rank", "step"]].drop_duplicates().shape[0]
    us = 1000.0 * float(el[pair].sum()) / max(units, 1)
    ep_v, topk_v = args.get("expert_model_parallel_size"), args.get("moe_router_topk")
    ep = ep_v if isinstance(ep_v, int) else 0
    topk = topk_v if isinstance(topk_v, int) else 0
    known = ep > 1 and 0 < topk < ep
    frac = 1.0 - topk / ep if known else 1.0
    gain = min(us * frac, rest)
    per = ", ".join(
        f"{k}={args[k]}"
        for k in ("expert_model_parallel_size", "num_experts", "moe_router_topk")
        if k in args
    )
    en = (
        f"; the MoE layers dispatch tokens by all-gather (distributed_args: "
        f"moe_token_dispatcher_type allgather{', ' + per if per else ''}): every rank gathers all "
        "the tokens of its expert-parallel group and reduce-scatters the experts' output back, "
        f"{ms(us)} of AllGather and ReduceScatter per step"
        + (
            f", where an all-to-all dispatcher moves only each token's top-{topk} share "
            f"({topk}/{ep} of the volume)"
            if known
            else ""
        )
    )
    zh = (
        f"；MoE 层用 AllGather 分发 token（distributed_args：moe_token_dispatcher_type 为 allgather"
        f"{'，' + per if per else ''}）：每张卡都收集其专家并行组的全部 token，再把专家输出 "
        f"reduce-scatter 回去，每步 AllGather 和 ReduceScatter 共 {ms(us)}"
        + (
            f"；AlltoAll 分发只发送每个 token 的 top-{topk} 部分（数据量为 {topk}/{ep}）"
            if known
            else ""
        )
    )
    rem = Remedy(
        "action",
        "Switch the MoE token dispatcher to all-to-all (--moe-token-dispatcher-type alltoall, "
        "or alltoall_seq in MindSpeed): each token then goes only to the ranks of its top-k "
        "experts; with it, the dispatch can also overlap computation "
        "(--moe-alltoall-overlap-comm).",
        "把 MoE 的 token 分发改为 AlltoAll（--moe-token-dispatcher-type alltoall，MindSpeed 中也可用 "
        "alltoall_seq）：每个 token 只发往其 top-k 专家所在的卡；之后还可以让分发与计算重叠"
        "（--moe-alltoall-overlap-comm）。",
        gain,
        BoundKind.ESTIMATE if known else BoundKind.UPPER_BOUND,
    )
    return en, zh, rem, {"moe_dispatch_us_per_step": us}


def _dims(shapes: str) -> str:
    """The first tensor of a CANN shapes string as ``4096x64000``."""
    return str(shapes).split(";")[0].strip().strip('"').replace(",", "x")


def _dtype(dtypes: str) -> str:
    """The first dtype of a CANN dtypes string, without the ``DT_`` prefix (``FLOAT``)."""
    return str(dtypes).split(";")[0].strip().removeprefix("DT_")


def _dominant_text(dom: DominantCollective) -> tuple[str, str, dict[str, float]]:
    """Evidence sentence (en, zh) and metrics for the collective that holds the communication."""
    name = COLLECTIVE_NAMES.get(dom.op_type, dom.op_type)
    per = "once per step" if dom.per_step <= 1 else f"{dom.per_step:.0f} times per step"
    per_zh = "每步一次" if dom.per_step <= 1 else f"每步 {dom.per_step:.0f} 次"
    grp = f"its {dom.group_size}-rank group" if dom.group_size else "its group"
    grp_zh = f"{dom.group_size} 卡通信组" if dom.group_size else "所在通信组"
    metrics = {
        "dominant_collective_us": dom.elapse_us,
        "dominant_collective_share": dom.share,
        "dominant_collective_per_step": dom.per_step,
    }
    en = (
        f"one {name} ({per}, in {grp}) takes {ms(dom.elapse_us)} ({pct(dom.share)} of a rank's "
        "communication time)"
    )
    zh = f"一个 {name}（{per_zh}，{grp_zh}）耗时 {ms(dom.elapse_us)}（占每卡通信时间 {pct(dom.share)}）"
    if math.isfinite(dom.size_mb) and math.isfinite(dom.others_max_mb) and dom.others_max_mb > 0:
        ratio = dom.size_mb / dom.others_max_mb
        metrics |= {"dominant_collective_mb": dom.size_mb, "dominant_collective_size_ratio": ratio}
        en += (
            f"; its transit size is {dom.size_mb:.0f} MB, {ratio:.1f}x the largest other collective of "
            f"the group ({dom.others_max_mb:.0f} MB)"
        )
        zh += f"，传输 {dom.size_mb:.0f} MB，是同组其他集合通信最大值（{dom.others_max_mb:.0f} MB）的 {ratio:.1f} 倍"
    if dom.producer and dom.consumer:
        en += (
            f"; it carries {dom.producer[0]}'s output ({_dims(dom.producer[1])}) to "
            f"{dom.consumer[0]} ({_dims(dom.consumer[1])}, {_dtype(dom.consumer[2])})"
        )
        zh += (
            f"；它把 {dom.producer[0]} 的输出（{_dims(dom.producer[1])}）送给 {dom.consumer[0]}"
            f"（{_dims(dom.consumer[1])}，{_dtype(dom.consumer[2])}）"
        )
    if dom.loss is not None:
        dims = _dims(dom.loss[1])
        vocab = dims.split("x")[-1]
        metrics["gathered_loss_us"] = dom.loss_us
        en += (
            f": these are the logits, gathered over the whole vocabulary ({vocab}) so that every "
            f"rank of the group computes the same full-vocabulary loss ({dom.loss[0]} on {dims} "
            f"{_dtype(dom.loss[2])}, {ms(dom.loss_us)} per step after the gather)"
        )
        zh += (
            f"：这是按整个词表（{vocab}）收集的 logits，通信组内每张卡都重复计算同一个完整词表的损失"
            f"（{dom.loss[0]}，{dims} {_dtype(dom.loss[2])}，收集之后每步 {ms(dom.loss_us)}）"
        )
    return en, zh, metrics


def _repeated_text(rc: RepeatedCollective, rest_us: float) -> tuple[str, str, Remedy, bool]:
    """Clause (en, zh), remedy and shared-input flag for one large gather run again per step.

    The flag: the operators after its instances all read an input of one shape, the gathered
    tensor used again (a weight shared by two layers: tied input / output embeddings). Gain
    (estimate): every instance but one, at most ``rest_us``.
    """
    name = COLLECTIVE_NAMES.get(rc.op_type, rc.op_type)
    each = ms(rc.elapse_us)
    grp = f"its {rc.group_size}-rank group" if rc.group_size else "its group"
    grp_zh = f"{rc.group_size} 卡通信组" if rc.group_size else "所在通信组"
    other = (
        f"; the group's other {name}s move {rc.others_max_mb:.0f} MB at most"
        if math.isfinite(rc.others_max_mb)
        else ""
    )
    other_zh = (
        f"；同组其他 {name} 最多 {rc.others_max_mb:.0f} MB"
        if math.isfinite(rc.others_max_mb)
        else ""
    )
    times = "twice" if rc.per_step == 2 else f"{rc.per_step:.0f} times"
    times_zh = "两次" if rc.per_step == 2 else f" {rc.per_step:.0f} 次"
    shared = ""
    if len(rc.consumers) >= 2:
        parts = [set(c[1].split(";")) - {""} for c in rc.consumers]
        common = set.intersection(*parts) if parts else set()
        shared = max(common, key=len) if common else ""
    ops = ", ".join(
        f"{op}" + (f" [{shp}]" if shp else "") for op, shp in rc.consumers[: int(rc.per_step)]
    )
    ops_zh = "、".join(
        f"{op}" + (f" [{shp}]" if shp else "") for op, shp in rc.consumers[: int(rc.per_step)]
    )
    en = (
        f"; the same {rc.size_mb:.0f} MB {name} runs {rc.per_step:.0f} times per step in {grp} "
        f"({each} each, {pct(rc.share)} of a rank's communication time{other}), each followed by "
        f"another operator ({ops}; kernel_details.csv order)"
    )
    zh = (
        f"；同一个 {rc.size_mb:.0f} MB 的 {name} 在{grp_zh}里每步做 {rc.per_step:.0f} 次（每次 {each}，占每卡通信"
        f"时间的 {pct(rc.share)}{other_zh}），每次之后是不同的算子（{ops_zh}；按 kernel_details.csv 的顺序）"
    )
    if shared:
        en += (
            f": each of them reads a [{shared}] input, so one tensor (a weight used by two layers, "
            "such as input and output embeddings tied together) is gathered "
            f"{times} per step, again before each further use"
        )
        zh += (
            f"：它们都读取一个 [{shared}] 的输入，即同一个张量（被两层共用的权重，例如输入与输出共享的 "
            f"embedding）每步被收集{times_zh}，每次使用前都重新收集"
        )
    gain = min((rc.per_step - 1.0) * rc.elapse_us, rest_us)
    rem = Remedy(
        "action",
        f"Gather the {rc.size_mb:.0f} MB tensor once per step and keep the full copy until its "
        "last use (for tied embeddings: reuse the gathered table in the output layer, or keep "
        f"that one weight unsharded, {rc.size_mb:.0f} MB per card), instead of gathering it "
        "again.",
        f"每步只收集一次这个 {rc.size_mb:.0f} MB 的张量，并保留完整副本直到最后一次使用（共享 embedding："
        f"在输出层复用已收集的词表权重，或让这一个权重不切分，每卡 {rc.size_mb:.0f} MB），不要重复收集。",
        gain,
        BoundKind.ESTIMATE,
    )
    return en, zh, rem, bool(shared)


def _vocab_parallel_remedy(dom: DominantCollective) -> Remedy:
    """Keep the logits sharded: the gather and the repeated full-vocabulary loss go away."""
    gain = dom.elapse_us * dom.per_step + dom.loss_us
    return Remedy(
        "action",
        "Keep the logits sharded over the vocabulary: compute the loss with a vocab-parallel "
        "cross entropy (Megatron / MindSpeed vocab_parallel_cross_entropy; output layer with "
        "parallel_output=True / gather_output=False), which all-reduces only a few numbers per "
        f"token; the {dom.size_mb:.0f} MB gather and the loss every rank repeats go away.",
        "让 logits 保持按词表切分：用词表并行的交叉熵（Megatron / MindSpeed 的 "
        "vocab_parallel_cross_entropy；输出层 parallel_output=True / gather_output=False）计算损失，"
        f"每个 token 只需 AllReduce 几个数；{dom.size_mb:.0f} MB 的收集和每张卡重复的损失计算都省掉。",
        gain,
        BoundKind.UPPER_BOUND,
    )


def _peer_wait_cause(
    ctx: Context,
    waitf: Finding,
    missing: list[int],
    least: float,
    victims: tuple[Impact, ...],
    metrics: dict[str, float],
) -> RootCause:
    """The exposed communication is waiting for a late or missing peer, not transfer.

    Rule: the communication analyzer found the exposed communication wait-dominated (Σ Transit /
    Σ Elapse < 0.25 in ``comm_ops``) and ranks of the job are missing from the data: the late
    arriver cannot be seen, most likely among the missing ranks. No overlap action and no gain
    (overlap cannot hide waiting); the check is to collect all ranks. Mechanism
    ``COMPUTE_STRAGGLER`` (a late peer; the others wait in collectives), culprit the missing
    ranks, victims the ranks present (their exposed communication); ranked by that wait
    (``explained_us_per_step``).
    """
    miss = format_ranks(missing)
    tr = waitf.metrics.get("comm_transit_ms_per_step", float("nan"))
    wi = waitf.metrics.get("comm_wait_idle_ms_per_step", float("nan"))
    ts = waitf.metrics.get("transit_share", float("nan"))
    m = metrics | {
        "explained_us_per_step": least,
        "missing_ranks_count": float(len(missing)),
        "comm_transit_ms_per_step": tr,
        "comm_wait_idle_ms_per_step": wi,
        "transit_share": ts,
    }
    split_en = split_zh = ""
    if math.isfinite(tr) and math.isfinite(wi):
        # of the collectives' whole time (comm_ops Elapse), which overlaps computation in part:
        # not a split of the not-overlapped figure quoted before it
        split_en = (
            f"; of the collectives' time per step, transit is only {tr:.2f} ms ({pct(ts)}) and "
            f"{wi:.1f} ms is wait/idle"
        )
        split_zh = f"；集合通信每步耗时中，传输仅 {tr:.2f} ms（{pct(ts)}），等待/空闲 {wi:.1f} ms"
        # the split is of the ranks whose communication data was read: a rank whose file could
        # not be read is not in it (trial: a truncated communication.json of rank 1)
        ops = ctx.profile.get("comm_ops")
        have = set(ops["rank"].astype(int)) if not ops.empty and "rank" in ops else set()
        lacking = [r for r in ctx.ranks if r not in have]
        if have and lacking:
            hl, hl_zh = ranks_label(sorted(have))
            ll, ll_zh = ranks_label(lacking)
            split_en += f" (measured on {hl} only: {ll} has no communication data)"
            split_zh += f"（仅为{hl_zh}的实测值：{ll_zh}没有通信数据）"
    findings = _claim(
        ctx,
        lambda f: (
            f.id.startswith("communication.")
            or "comm_setting" in f.symptom_tags
            or f.id.startswith("cluster_breakdown.bottleneck.communication")
            or f.id.startswith("cluster_breakdown.communication.wait_spread")
        ),
    )
    return RootCause(
        id="cause.peer_wait.missing_ranks",
        mechanism=Mechanism.COMPUTE_STRAGGLER,
        category=Category.COMMUNICATION,
        culprit=Culprit(
            kind="ranks",
            ranks=tuple(missing),
            label=f"a late or missing peer (ranks {miss}, missing from the data)",
            label_zh=f"晚到或缺失的对端（{miss}号卡，数据中缺失）",
        ),
        victims=victims,
        summary=(
            f"Most of the exposed communication is waiting for a late or missing peer, not data "
            f"transfer: even the rank that waits least has {ms(least)} per step of communication "
            f"not overlapped{split_en}; the late peer is probably among the ranks missing from "
            f"the data (ranks {miss}); overlap tuning would not help — collect all ranks to find it."
        ),
        summary_zh=(
            f"未被掩盖的通信主要是在等待晚到或缺失的对端，而不是数据传输：即使等待最少的卡，每步也有 "
            f"{ms(least)} 通信未被掩盖{split_zh}；晚到的卡很可能在数据中缺失的卡里（{miss}号卡）；"
            "调整通信掩盖无济于事，请采集所有卡的数据来找出它。"
        ),
        metrics=m,
        findings=findings,
        gain_us=None,
        bound=BoundKind.NONE,
        remedies=(
            Remedy(
                "check",
                f"Collect all ranks (the missing ranks {miss} included) and re-run: the late "
                "arriver is the rank that waits least at the collectives.",
                f"采集所有卡（包括缺失的 {miss}号卡）的数据后重新分析：在集合通信中等待最少的卡就是晚到者。",
            ),
        ),
        symptom_tags=("comm_wait_high", "missing_ranks"),
        severity=_severity(least, ctx.step_us),
    )


#: Chinese labels of job-level items (operator types and engines are identifiers).
_ITEM_ZH = {
    "fusion": "未融合的 {what}（多个独立算子）",
    "layout": "格式与数据类型转换",
    "dynamic": "动态 shape 算子",
    "few_cores": "只用少数核的长算子",
}


def _at_peer_rate(item: JobItem, gain: float, zh: bool = False) -> str:
    """For a ``slow_matrix`` item: its time at the other matrix operators' rate, and the gain."""
    if item.what != "slow_matrix":
        return ""
    at = ms(item.us_per_step - gain)
    if zh:
        return f"；若达到其他矩阵乘的算力，每步只需 {at}，少 {ms(gain)}"
    return (
        f"; at the rate of the other matrix operators it would take {at} per step, {ms(gain)} less"
    )


def rule_job_hotspot(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Job-hotspot rule: one item that is not the model's main work dominates every rank.

    From :func:`~advisor_chat.diagnosis.decompose.job_account` on the ranks present: an operator
    type other than the matrix / attention work taking ≥ 20% of every rank's step, layout and
    dtype conversions together ≥ 12%, or the AI CPU engine ≥ 5%. A job-level cause (no rank is the
    culprit) with the share and the fix the item selects. Gain (upper bound): the item's time on
    every rank (its mean time per step, as the summary states). Source: ``kernels``, ``step_trace``.
    """
    per = ctx.per_rank
    if per.empty or len(per) < 2 or not math.isfinite(ctx.step_us):
        return []
    ja = job_account(ctx.profile, per["step_us"])
    if ja is None or ja.hotspot is None:
        return []
    item = ja.hotspot
    missing = missing_ranks(ctx.profile)
    sc = presence_scope(ctx, missing)
    en, zh, rem = explain_hotspot(item, sc.every, sc.every_zh)
    gain = item.us_per_step  # the item's mean time per (step, rank), the figure the summary states
    if item.what == "slow_matrix":
        # a slow matrix operator still has its work to do: at its peers' rate it would take
        # tflops / peer_tflops of its time
        gain = item.us_per_step * (1.0 - item.tflops / item.peer_tflops)
    # at the other matrix operators' rate is an estimate (the re-simulated change can save more:
    # fewer, larger calls also shorten what runs around them); an item's own time is an upper bound
    bound = BoundKind.ESTIMATE if item.what == "slow_matrix" else BoundKind.UPPER_BOUND
    rem = dataclasses.replace(rem, gain_us=gain, bound=bound)
    sample = f" (kernels of a sample of {len(ja.ranks)} ranks)" if len(ja.ranks) < len(per) else ""
    # the share of the device (kernel) time, beside the share of the step
    ds = item.device_share
    # named, so it never reads as the share of the last thing the explanation mentions
    what = item.name.split(" computed")[0]
    label_zh = _ITEM_ZH.get(item.what, "{name}").format(
        name=item.name, what=FUSION_ZH.get(what, what)
    )
    dev = f"; {what}: {pct(ds)} of the device (kernel) time" if math.isfinite(ds) else ""
    dev_zh = f"；{label_zh}占设备（算子）时间的 {pct(ds)}" if math.isfinite(ds) else ""
    # other composed computations beside it: the same kind of cost, each with its fused operator
    rems = [rem]
    for more in ja.more_fusions:
        more_what = more.name.split(" computed")[0]
        ops = ", ".join(more.members)
        dev += (
            f"; {more_what} is computed from separate operators as well ({ops}: "
            f"{ms(more.us_per_step)} per step, {pct(more.share_min)} of the step)"
        )
        dev_zh += (
            f"；{FUSION_ZH.get(more_what, more_what)} 同样由多个独立算子（{'、'.join(more.members)}）拼接计算"
            f"（每步 {ms(more.us_per_step)}，占步长 {pct(more.share_min)}）"
        )
        r2 = explain_hotspot(more, sc.every, sc.every_zh)[2]
        rems.append(dataclasses.replace(r2, gain_us=more.us_per_step, bound=BoundKind.UPPER_BOUND))
        gain += more.us_per_step  # each is its own fused operator: their times add up
    return [
        RootCause(
            id=f"cause.job_hotspot.{item.what}",
            mechanism=Mechanism.JOB_HOTSPOT,
            category=Category.COMPUTE,
            culprit=Culprit(
                kind="job",  # a cost of every rank (the operator named beside it)
                operator=item.name if item.what == "op_type" else ", ".join(item.members),
                shape=item.shape if item.what == "op_type" else "",
                label=item.name,
                label_zh=label_zh,
            ),
            victims=every_rank_loses(ctx, gain),
            summary=(
                f"{en[0].upper()}{en[1:]}{dev}{sample}{_at_peer_rate(item, gain)}; the same cost on "
                "every rank, so no rank "
                "is late and none is to blame: the time is lost on all of them alike."
            ),
            summary_zh=f"{zh}{dev_zh}{_at_peer_rate(item, gain, zh=True)}；每张卡的开销相同，没有哪张卡晚到，也没有哪张卡是罪魁，所有卡都同样损失了这部分时间。",
            metrics={
                "item_us_per_step": item.us_per_step,
                "item_share_min": item.share_min,
                "item_share_mean": item.share_mean,
                "item_count_per_step": item.count_per_step,
                **({"item_device_share_median": ds} if math.isfinite(ds) else {}),
                "gain_upper_bound_us": gain,
            },
            findings=_claim(
                ctx,
                lambda f: f.kind is FindingKind.BOTTLENECK and not f.ranks,
            ),
            gain_us=gain,
            bound=bound,
            remedies=tuple(rems),
            symptom_tags=("op_hotspot", "aicpu_op")
            if item.name == "AI_CPU" or item.core.upper() == "AI_CPU"
            else ("op_hotspot",),
            severity=_severity(gain, ctx.step_us),
        )
    ]
