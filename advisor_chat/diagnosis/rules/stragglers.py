"""Late-arriver rules: persistent stragglers (rank, group) and one-step events, with their own-time decomposition."""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import pandas as pd

from advisor_chat.analyzers.base import Category, FindingKind
from advisor_chat.analyzers.slow_link import link_records
from advisor_chat.diagnosis.context import Context, ranks_label
from advisor_chat.diagnosis.decompose import (
    HostFreezes,
    MemoryChurn,
    SlowCalls,
    _sample,
    blocked_calls,
    device_account,
    device_copies,
    gc_pause_us,
    gc_recording,
    host_freezes,
    host_silence,
    idle_before,
    is_copy,
    memory_churn,
    slow_launch_calls,
    sync_calls,
)
from advisor_chat.diagnosis.evidence import Explanation, explain_device
from advisor_chat.diagnosis.python_work import (
    FRAME_WHAT,
    HOST_OPERATOR,
    SlowerFrame,
    frame_kind,
    frame_remedy,
    python_work,
    short_frame,
    slower_frame,
)
from advisor_chat.diagnosis.rules.common import (
    EVENT_MIN_STEPS,
    GROUP_GAP_VS_SPREAD,
    GROUP_MIN_GAP_SHARE,
    GROUP_MIN_GAP_WITH_STRAGGLER,
    PERSISTENT_STEP_SHARE,
    STRAGGLER_MIN_SHARE,
    VICTIM_MIN_SHARE,
    Event,
    _claim,
    _op_sample_txt,
    _severity,
    arrival_measured,
    collective_peers,
    device_idle_evidence,
    env_split,
    even_interval,
    find_events,
    host_evidence,
    host_measured,
    host_timeline,
    layered_victims,
    op_delta,
    transfer_mb_per_step,
    wait_victims,
)
from advisor_chat.diagnosis.rules.stepwork import JobSteps, job_slow_steps
from advisor_chat.diagnosis.text import integer, ms, num, pct, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Impact,
    Mechanism,
    Remedy,
    RootCause,
)
from advisor_chat.ingest.profile import PEER_SAMPLE
from advisor_chat.ranks import spread_sample

#: A rank's idle before one operator (kernel Wait Time, against its peers') at least this many
#: times its Free excess is mostly hidden under its own collectives: its own time, not Free's.
HIDDEN_IDLE_RATIO = 1.5
#: A rank's host synchronize calls set it apart when its peers make at most this share of them.
SYNC_PEER_RATIO = 0.5


#: A stall is at its step's start when this share of its events have at least half their excess
#: before the step's first task.
START_EVENTS_SHARE = 0.5


def _at_step_start(ctx: Context, events: list[Event]) -> float:
    """Share of the events' excess idle before their steps' first device task (0.0 when not).

    Per event (step, rank): the gap from the rank's previous task end (any stream) to the step's
    first task start (``kernels``, kernel_details.csv). When at least ``START_EVENTS_SHARE`` of
    the events have a gap of half their excess or more, the gaps' sum over the excess' sum; else
    0.0.
    """
    ranks = sorted({e.rank for e in events})
    k = ctx.profile.kernels_for(ranks)
    if k.empty or not {"step", "start_us", "duration_us"} <= set(k.columns):
        return 0.0
    k = k[k["step"] >= 0].sort_values(["rank", "start_us"], kind="stable")
    end = (k["start_us"] + k["duration_us"].fillna(0.0)).groupby(k["rank"]).cummax()
    prev_end = end.groupby(k["rank"]).shift(1)
    first = k.assign(_gap=(k["start_us"] - prev_end).clip(lower=0.0)).groupby(["rank", "step"])
    gap = first["_gap"].first()
    hits, held, total = 0, 0.0, 0.0
    for e in events:
        g = float(gap.get((e.rank, e.step), float("nan")))
        total += e.excess_us
        if g == g and g >= 0.5 * e.excess_us:
            hits += 1
            held += min(g, e.excess_us)
    if not events or hits < START_EVENTS_SHARE * len(events) or total <= 0:
        return 0.0
    return held / total


def _n_wait(n: int, *, past: bool = False) -> str:
    """``"7 ranks wait"``, ``"1 rank waits"`` (``past``: ``"waited"``)."""
    verb = "waited" if past else ("waits" if n == 1 else "wait")
    return f"{n} rank{'' if n == 1 else 's'} {verb}"


def _rank_cause(
    ctx: Context,
    rank: int,
    events: list[Event],
    n_steps: int,
    scoped: bool,
    victims: tuple[Impact, ...] | None = None,
    later: tuple[int, ...] = (),
    late_cost_us: float = 0.0,
) -> RootCause:
    """A single-rank cause (host stall or compute straggler) from its events.

    ``later``: other late ranks that arrive after this one in most steps (:func:`arrives_later`).
    Its victims' wait then is a layer they would wait for it only once those ranks are fixed, so
    fixing it alone gives nothing back.
    """
    steps = tuple(sorted({e.step for e in events}))
    comp_ex = sum(e.computing_excess_us for e in events) / max(n_steps, 1)
    free_ex = sum(e.free_excess_us for e in events) / max(n_steps, 1)
    excess = sum(e.excess_us for e in events) / max(n_steps, 1)
    host = free_ex >= comp_ex
    peers = [r for r in ctx.peers(rank) if r != rank]
    # where its extra idle sits: the compute stream's Wait Time before one operator (against the
    # peers'); an idle larger than its Free excess falls while its own collectives run, which the
    # step trace counts as Communication (a host stall hidden under communication)
    spot = (
        idle_before(ctx.profile, [rank], peers, free_ex if free_ex > 0 else 0.5 * late_cost_us)
        if host
        else None
    )
    hidden = spot is not None and spot.delta_us >= HIDDEN_IDLE_RATIO * max(free_ex, 1.0)
    cap = excess
    if spot is not None and hidden:
        # its own time, counted where the idle is (the step trace calls most of it Communication)
        cap = max(comp_ex, 0.0) + spot.delta_us
        att = ctx.attribution.culprit_of(rank) if ctx.attribution is not None else None
        if victims is None and att is not None and att.unit.ranks == (rank,):
            # what the others lose waiting for it, measured at the collectives (their step
            # trace counts it as exposed communication, bounded there by its Free excess)
            step = ctx.step_us
            victims = tuple(
                Impact(int(r), float(v), share_of(float(v), step), "collective_wait")
                for r, v in sorted(att.victims.items())
                if share_of(float(v), step) >= VICTIM_MIN_SHARE
            )
    if victims is None:
        victims = wait_victims(ctx, events, {rank}, n_steps)
    gain = max((v.lost_us for v in victims), default=excess) if victims else excess
    if later and victims:
        # once the later ranks are fixed the step ends when the latest of the others arrives:
        # what fixing this one saves then is the least any of them waits for it
        gain = min(v.lost_us for v in victims)
    gain = min(gain, cap) if cap > 0 else gain
    op = None if host else op_delta(ctx, [rank], peers)
    own = (Impact(rank, excess, share_of(excess, ctx.val(rank, "step_us")), "own_time"),)
    rl, rl_zh = ranks_label([rank])
    scope = ""
    scope_zh = ""
    if scoped:
        st = ", ".join(str(s) for s in steps)
        scope = f" in step {st}" if len(steps) == 1 else f" in steps {st}"
        scope_zh = f"在第 {st} 步"
    wait_mean = float(np.mean([v.lost_us for v in victims])) if victims else 0.0
    gc = [f for f in ctx.finding("host_dispatch.host_bound.gc_pause") if rank in f.ranks]
    findings = _claim(
        ctx,
        lambda f: (
            bool(f.ranks)
            and rank in f.ranks
            and (
                f.kind
                in (
                    FindingKind.SLOW_RANK,
                    FindingKind.OP_REGRESSION,
                    FindingKind.DATALOADER,
                    FindingKind.LOAD_IMBALANCE,
                )
                or (f.kind is FindingKind.BOTTLENECK and len(f.ranks) <= 2)
                # a host-bound finding about many ranks is the job's idle, not this rank's
                or (f.kind is FindingKind.HOST_BOUND and len(f.ranks) <= 2)
                or (f.id.startswith("env_check.env.first_collective_late"))
                or (f.kind is FindingKind.JITTER and len(f.ranks) <= 2)
            )
        ),
    )
    per_step = "" if scoped else " per step"
    ex: Explanation | None = None
    alone = alone_zh = ""
    ll, ll_zh = ranks_label(list(later)) if later else ("", "")
    if later:
        # the peers wait for the latest rank first: this rank's layer shows only after that
        alone = (
            f" Fixing it alone saves nothing while {ll} {'arrive' if len(later) > 1 else 'arrives'}"
            f" after it; once {ll} {'are' if len(later) > 1 else 'is'} fixed, "
            f"fixing it saves up to {ms(gain)} per step"
        )
        alone_zh = (
            f"在{ll_zh}比它更晚到达时，单独修复它节省不了时间；修复{ll_zh}之后，"
            f"再修复它每步最多节省 {ms(gain)}"
        )
        # the longest wait for it and the job's saving differ when a next late rank follows it
        most = max((v.lost_us for v in victims), default=0.0)
        if most > 1.05 * gain:
            alone += (
                f", less than the {ms(most)} the earliest rank would wait for it: the next late "
                "rank then holds the job"
            )
            alone_zh += f"，少于最早到达的卡要等它的 {ms(most)}：下一张晚到的卡随即拖住作业"
        alone += "."
        alone_zh += "。"
    elif victims and gain < 0.8 * excess:
        alone = f" Fixing it alone saves up to {ms(gain)} per step: other late ranks follow it."
        alone_zh = f"单独修复它每步最多节省 {ms(gain)}：其后还有其他晚到的卡。"
    dev: tuple[str, str, dict[str, float]] | None = None
    measured = False
    py: tuple[str, str, str, str, dict[str, float], tuple[str, ...]] | None = None
    if host:
        mech, cat = Mechanism.HOST_STALL, Category.SCHEDULING
        what = f"its device idles (Free) {ms(free_ex)} more{per_step} than its peers"
        what_zh = f"其设备空闲时间（Free）每步比其他卡多 {ms(free_ex)}"
        if scoped:
            tot = sum(e.free_excess_us for e in events)
            what = f"its device idles (Free) {ms(tot)} more than its peers{scope}"
            what_zh = f"{scope_zh}其设备空闲时间（Free）比其他卡多 {ms(tot)}"
        measured = host_measured(ctx, rank)
        spot_txt = spot_zh = ""
        sync = sync_calls(ctx.profile, [rank], peers) if measured else None
        mem = memory_churn(ctx.profile, [rank], peers)
        mem_txt, mem_zh = _churn_text(mem) if mem is not None else ("", "")
        slowcp = _slow_copies(ctx, rank, peers, free_ex) if measured else None
        if slowcp is not None:
            mem_txt += slowcp[0]
            mem_zh += slowcp[1]
        if sync is not None and not (
            sync.per_step >= 1.0 and sync.peer_per_step <= SYNC_PEER_RATIO * sync.per_step
        ):
            sync = None  # its peers synchronize as often: not what sets it apart
        if measured and mem is None and slowcp is None and not gc:
            # what its host's Python runs while the device waits (with_stack frames)
            py = _python_clause(
                ctx,
                tuple((e.step, rank) for e in events),
                (rank,),
                free_ex * n_steps / max(len(events), 1),
            )
            if py is not None:
                mem_txt += py[0]
                mem_zh += py[1]
        api = sync.api.removeprefix("AscendCL@") if sync is not None else ""
        copy = is_copy(api)
        blocks, blocks_zh = (
            (
                "each copies between host and pageable (unpinned) host memory and blocks the "
                "host until it is done",
                "每次都在主机的可分页（未锁页）内存与设备之间拷贝，并让主机阻塞到拷贝完成",
            )
            if copy
            else (
                "each call blocks the host until the device has drained",
                "每次调用都让主机阻塞到设备执行完",
            )
        )
        sync_txt = (
            f"; its host calls {api} {sync.per_step:.3g} times per step "
            f"({sync.peer_per_step:.3g} on its peers): {blocks}, and the device then waits for "
            "the host's next launch"
            if sync is not None
            else ""
        )
        sync_zh = (
            f"；其主机每步调用 {api} {sync.per_step:.3g} 次（其他卡 {sync.peer_per_step:.3g} 次）："
            f"{blocks_zh}，之后设备又要等主机的下一次下发"
            if sync is not None
            else ""
        )
        if spot is not None and hidden:
            op_shape = spot.op_type + (f" [{spot.input_shapes}]" if spot.input_shapes else "")
            what = (
                f"its device idles {ms(spot.delta_us)} more per step than its peers right before "
                f"{op_shape} (kernel Wait Time: {ms(spot.culprit_us)} per step before its "
                f"{spot.launches:g} launch{'es' if spot.launches != 1 else ''} vs {ms(spot.peer_us)} on its peers); only "
                f"{ms(max(free_ex, 0.0))} of it shows as Free, the rest falls while its own "
                "collectives run and counts as Communication"
            )
            what_zh = (
                f"其设备在 {op_shape} 之前每步比其他卡多空闲 {ms(spot.delta_us)}（算子等待时间：其 "
                f"{spot.launches:g} 次启动前每步共 {ms(spot.culprit_us)}，其他卡为 {ms(spot.peer_us)}）；"
                f"其中只有 {ms(max(free_ex, 0.0))} 计入空闲（Free），其余发生在它自己的集合通信"
                "进行期间，计入了通信时间"
            )
        elif spot is not None:
            op_shape = spot.op_type + (f" [{spot.input_shapes}]" if spot.input_shapes else "")
            spot_txt = (
                f"; {pct(spot.share)} of it sits right before {op_shape} ({ms(spot.culprit_us)} "
                f"per step of idle before its {spot.launches:g} launch{'es' if spot.launches != 1 else ''} vs {ms(spot.peer_us)} on "
                "its peers), so its host is late to launch that operator"
            )
            spot_zh = (
                f"；其中 {pct(spot.share)} 集中在 {op_shape} 之前（其 {spot.launches:g} 次启动前每步共空闲 "
                f"{ms(spot.culprit_us)}，其他卡为 {ms(spot.peer_us)}），即主机启动该算子晚了"
            )
        waits = f"{_n_wait(len(victims))} {ms(wait_mean)} per step for it"
        waits_zh = f"{len(victims)} 张卡每步平均为它等待 {ms(wait_mean)}"
        if later:
            # never last (no votes) because a later rank is: the wait layer is measured the same
            # way as that rank's (step_trace exposed communication)
            wait_max = max((v.lost_us for v in victims), default=0.0)
            late = f"it arrives late at the collectives (though before {ll})"
            late_zh = f"它较晚到达集合通信（但早于{ll_zh}）"
            # the victims' loss to it is what it adds after the later ranks' lateness, not the
            # whole of its own lateness
            # (its whole lateness, hidden now behind the later ranks; the gain once they are
            # fixed is smaller when a next late rank then holds the job)
            stop = f"once {ll} stop{'s' if len(later) == 1 else ''} arriving after it"
            waits = f"{_n_wait(len(victims))} up to {ms(wait_max)} per step for it {stop}"
            waits_zh = f"一旦{ll_zh}不再比它晚到，{len(victims)} 张卡每步最多要等它 {ms(wait_max)}"
            if not arrival_measured(ctx, rank):  # no collective data of its own: inferred
                late = (
                    f"by the step times it is a late arriver, though before {ll} (no collective "
                    "data shows its arrival)"
                )
                late_zh = f"按各步时间推断它较晚到达集合通信，但早于{ll_zh}（没有集合通信数据显示它何时到达）"
                waits = (
                    f"{len(victims)} rank{'' if len(victims) == 1 else 's'} would wait up to {ms(wait_max)} per step for it "
                    f"{stop} (inferred, not measured)"
                )
                waits_zh = (
                    f"按推断，一旦{ll_zh}不再比它晚到，{len(victims)} 张卡每步最多要等它 "
                    f"{ms(wait_max)}（推断值，未实测）"
                )
        elif arrival_measured(ctx, rank):
            late = "it arrives late at the collectives"
            late_zh = "它较晚到达集合通信"
            seen = collective_peers(ctx, rank)
            unseen = [v.rank for v in victims if v.rank not in seen]
            if seen and unseen:
                # the collectives recorded hold only some of its victims: the others' wait for
                # it comes from the step times
                sl, sl_zh = ranks_label(sorted(seen))
                late = f"it arrives last at the recorded collectives it shares with {sl}"
                late_zh = f"在它与{sl_zh}的已记录集合通信中它最后到达"
                waits = (
                    f"by the step times {_n_wait(len(victims))} {ms(wait_mean)} per step for "
                    "it (inferred for the ranks with no recorded collective with it)"
                )
                waits_zh = (
                    f"按各步时间推断 {len(victims)} 张卡每步平均为它等待 {ms(wait_mean)}"
                    "（与它没有已记录集合通信的卡为推断值）"
                )
        else:  # no collective shows it arriving last: the step times point to it
            late = "by the step times it is a late arriver (no collective shows it arriving last)"
            late_zh = "按各步时间推断它较晚到达集合通信（没有哪个集合通信显示它最后到达）"
            # so is the others' wait for it: inferred from the step times, not measured
            # "up to": the largest inferred wait, the figure its victims list and its gain show
            wait_max = max((v.lost_us for v in victims), default=0.0)
            waits = (
                f"{len(victims)} rank{'' if len(victims) == 1 else 's'} would wait up to {ms(wait_max)} per step for it "
                "(inferred, not measured)"
            )
            waits_zh = (
                f"按推断 {len(victims)} 张卡每步最多为它等待 {ms(wait_max)}（推断值，未实测）"
            )
        dev = (
            device_idle_evidence(ctx, [rank], peers)
            if measured and not gc and spot is None
            else None
        )
        if dev is not None:
            # the work was queued early: the device was held (another process on the NPU), not
            # the host late; the kernels themselves run as on the peers
            mech, cat = Mechanism.COMPUTE_STRAGGLER, Category.COMPUTE
            same = abs(comp_ex) < 0.1 * max(free_ex, 1.0)  # Computing as on the peers
            summary = (
                f"Device stall on {rl}: {what} although {dev[0]}"
                + (
                    f"; its kernels take as long as its peers' (Computing within "
                    f"{ms(abs(comp_ex))} of theirs)"
                    if same
                    else ""
                )
                + f"; {late} and {waits}."
                + alone
            )
            summary_zh = (
                f"{rl_zh}设备侧停顿：{what_zh}，尽管{dev[1]}"
                + (
                    f"；其算子耗时与其他卡相同（计算时间相差不到 {ms(abs(comp_ex))}）"
                    if same
                    else ""
                )
                + f"；{late_zh}，{waits_zh}。"
                + alone_zh
            )
        elif measured or gc:
            summary = (
                f"Host stall on {rl}: {what}, waiting for its host{spot_txt}{sync_txt}{mem_txt}; "
                f"{late} and {waits}." + alone
            )
            summary_zh = (
                f"{rl_zh}主机侧阻塞：{what_zh}，设备在等主机{spot_zh}{sync_zh}{mem_zh}；{late_zh}，"
                f"{waits_zh}。" + alone_zh
            )
            if slowcp is not None:  # the device is copying, not waiting for its host
                summary = summary.replace(
                    f"Host stall on {rl}: ", f"Slow host-device copies on {rl}: ", 1
                ).replace(", waiting for its host;", ";", 1)
                summary_zh = summary_zh.replace(
                    f"{rl_zh}主机侧阻塞：", f"{rl_zh}主机与设备间的拷贝变慢：", 1
                ).replace("，设备在等主机；", "；", 1)
        else:
            # Free alone: the device idles, but why is not measured (no host launch delays)
            summary = (
                f"Device idle (Free) on {rl}: {what}{spot_txt}; host launch delays are not measured in "
                "this data, so possible causes are a host-side stall (per-step synchronization, "
                f"logging, checkpoint, data loading) or waiting for input; {late} and "
                f"{waits}." + alone
            )
            summary_zh = (
                f"{rl_zh}设备空闲（Free）：{what_zh}{spot_zh}；数据中没有主机下发时延，无法确定原因，"
                f"可能是主机侧阻塞（每步同步、日志、保存检查点、数据加载）或在等输入；{late_zh}，"
                f"{waits_zh}。" + alone_zh
            )
        if dev is not None:
            a_txt = (
                f"Find what else holds {rl}'s NPU: `npu-smi info` for other processes on that "
                "device, other jobs or containers given the same device (ASCEND_RT_VISIBLE_DEVICES), "
                "and device-side synchronization (events, synchronous copies) in its timeline."
            )
            a_zh = (
                f"找出还有什么占用了{rl_zh}的 NPU：用 `npu-smi info` 查看该设备上的其他进程，检查是否有其他作业或容器"
                "被分配了同一张卡（ASCEND_RT_VISIBLE_DEVICES），并在时间线中查看设备侧同步（event、同步拷贝）。"
            )
        elif gc:
            a_txt = (
                f"Stop Python garbage-collection pauses on {rl}: gc.freeze() after model setup and "
                "gc.collect() at fixed step intervals (or gc.disable() during steps)."
            )
            a_zh = (
                f"消除{rl_zh}上的 Python 垃圾回收停顿：模型初始化后调用 gc.freeze()，"
                "并按固定步数间隔调用 gc.collect()（或在训练步内 gc.disable()）。"
            )
        elif py is not None:
            a_txt, a_zh = py[2], py[3]
        elif slowcp is not None:
            a_txt, a_zh = slowcp[2], slowcp[3]
        elif mem is not None:
            a_txt, a_zh = _churn_remedy(mem, rl, rl_zh)
        elif sync is not None and copy:
            a_txt = (
                f"Make {rl}'s host-to-device copies asynchronous ({sync.per_step:.3g} blocking "
                f"{api} calls per step, {sync.peer_per_step:.3g} on its peers): pin the host "
                "memory (DataLoader(pin_memory=True) or tensor.pin_memory()) and copy with "
                ".to(device, non_blocking=True), prefetching the next batch during the step."
            )
            a_zh = (
                f"把{rl_zh}主机到设备的拷贝改为异步（每步 {sync.per_step:.3g} 次阻塞的 {api}，其他卡 "
                f"{sync.peer_per_step:.3g} 次）：使用锁页内存（DataLoader(pin_memory=True) 或 "
                "tensor.pin_memory()），并用 .to(device, non_blocking=True) 拷贝，在本步计算时预取下一批数据。"
            )
        elif sync is not None:
            a_txt = (
                f"Take the per-step synchronizations off {rl}'s host ({sync.per_step:.3g} {api} "
                "calls per step, none or fewer on its peers: a .item() / .cpu() / print of a "
                "device tensor in a hook, a logger or a metric): keep the values on the device and "
                "read them every N steps, or after the step."
            )
            a_zh = (
                f"去掉{rl_zh}主机上每步的同步（每步 {sync.per_step:.3g} 次 {api}，其他卡没有或更少："
                "hook、日志或指标里对设备张量的 .item() / .cpu() / print）：把这些值留在设备上，"
                "每 N 步或步结束后再读取。"
            )
        elif spot is not None:
            a_txt = (
                f"Find what {rl}'s host does right before it launches {spot.op_type} (a memory "
                "allocation or free, a synchronization such as .item()/.cpu(), Python work on "
                "that path) and take it out of the step: preallocate or reuse the buffers, make "
                "it asynchronous, or move it after the step."
            )
            a_zh = (
                f"找出{rl_zh}的主机在启动 {spot.op_type} 之前做了什么（申请或释放显存、.item()/.cpu() "
                "这类同步、该路径上的 Python 计算），并移出训练步：预分配或复用缓冲区、改为异步，或挪到步结束之后。"
            )
        elif measured:
            a_txt = (
                f"Remove the host-side stall on {rl} (per-step host synchronization such as "
                ".item()/.cpu(), logging, checkpoint or data loading on that rank)."
            )
            a_zh = (
                f"消除{rl_zh}上的主机侧阻塞（每步的主机同步如 .item()/.cpu()、日志、"
                "保存检查点或数据加载）。"
            )
        else:
            a_txt = (
                f"Find and remove what keeps {rl}'s device idle (possible causes: a per-step host "
                "synchronization, logging, checkpoint or data loading on that rank)."
            )
            a_zh = (
                f"找出并消除让{rl_zh}设备空闲的原因（可能是该卡每步的主机同步、日志、"
                "保存检查点或数据加载）。"
            )
        where, where_zh = host_timeline(ctx, [rank])
        remedies = (
            Remedy("action", a_txt, a_zh, gain, BoundKind.ESTIMATE),
            Remedy(
                "check",
                f"Measure {rl}'s host-device bandwidth against a peer's on the same node (a "
                "pinned-memory copy of a few hundred MB timed on each card, or the vendor's "
                "bandwidth test) before and after re-seating the card.",
                f"在同一节点上对比{rl_zh}与其他卡的主机-设备带宽（在每张卡上计时拷贝几百 MB 的锁页内存，"
                "或用厂商的带宽测试工具），重新插拔该卡前后各测一次。",
            )
            if slowcp is not None  # what blocks is known: the copies; how slow the link is, not
            else Remedy(
                "check",
                f"Open {rl}'s {where} around its Free gaps to see which host call blocks.",
                f"打开{rl_zh}的 {where_zh}，查看其空闲间隙附近的主机调用，找出阻塞的调用。",
            )
            if measured
            else Remedy(
                "check",
                f"Collect {rl} with host data (torch_npu profiler with CPU activity: "
                "trace_view.json in the text export, CANN_API in the DB export) to see what its "
                "host does during the Free gaps: this profile has none.",
                f"用 torch_npu 性能采集工具（开启 CPU 活动）重新采集{rl_zh}（文本导出的 "
                "trace_view.json 或 DB 导出的 CANN_API 表），查看空闲间隙期间主机在做什么：当前数据中没有主机数据。",
            ),
        )
        tags: tuple[str, ...] = (("synchronize_stream",) if sync is not None else ()) + (
            ("high_free", "slow_rank", "device_held")
            if dev is not None
            else ("high_free", "slow_rank", "device_copies")
            if slowcp is not None  # the device copies slowly: not a host-bound cause
            else ("host_bound", "high_free", "slow_rank", "gc_pause")
            if gc
            else ("host_bound", "high_free", "slow_rank", *(py[5] if py is not None else ()))
        )
    else:
        mech, cat = Mechanism.COMPUTE_STRAGGLER, Category.COMPUTE
        op_txt = op_zh = ""
        units = [(e.step, rank) for e in events] if scoped else [(-1, rank)]
        ex = explain_device(
            device_account(ctx.profile, units, peers),
            rl,
            rl_zh,
            gain if victims else excess,
            said_us=comp_ex,  # "it computes X more per step ..., because <clause>"
        )
        if ex is not None:
            op = None  # the decomposition names the operator (or the device) itself
        if op is not None and op[2] >= 0.5 * comp_ex:
            smp, smp_zh = _op_sample_txt(op)
            op_txt = (
                f"; most of it is {op[0]} [{op[1]}] ({ms(op[2])} per step more, {op[3]:.2f}x){smp}"
            )
            op_zh = f"；主要来自 {op[0]} [{op[1]}]（每步多 {ms(op[2])}，{op[3]:.2f} 倍）{smp_zh}"
        summary = (
            f"Compute straggler {rl}: it computes {ms(comp_ex)} more{per_step} than its peers"
            f"{scope}{op_txt}; {_n_wait(len(victims))} {ms(wait_mean)} per step for it in "
            "collectives." + alone
        )
        summary_zh = (
            f"{rl_zh}是计算慢卡：{scope_zh}其计算时间每步比其他卡多 {ms(comp_ex)}{op_zh}；"
            f"{len(victims)} 张卡每步平均在集合通信中为它等待 {ms(wait_mean)}。" + alone_zh
        )
        if ex is not None:
            summary = (
                f"Compute straggler {rl}: it computes {ms(comp_ex)} more{per_step} than its peers"
                f"{scope}, because {ex.clause}; {_n_wait(len(victims))} {ms(wait_mean)} per "
                "step for it in collectives." + alone
            )
            summary_zh = (
                f"{rl_zh}是计算慢卡：{scope_zh}其计算时间每步比其他卡多 {ms(comp_ex)}，原因是"
                f"{ex.clause_zh}；{len(victims)} 张卡每步平均在集合通信中为它等待 {ms(wait_mean)}。"
                + alone_zh
            )
        if ex is not None:
            a_txt, a_zh = ex.remedy.text, ex.remedy.text_zh
        elif op_txt and op is not None:
            a_txt = (
                f"Make {op[0]} [{op[1]}] on {rl} run as on its peers (check its input shape, "
                "format and dtype, and whether it takes a slower kernel path)."
            )
            a_zh = (
                f"让{rl_zh}上的 {op[0]} [{op[1]}] 与其他卡一样快（检查其输入 shape、格式和数据类型，"
                "以及是否走了更慢的算子实现）。"
            )
        else:
            a_txt = (
                f"Even out {rl}'s work (load balance: sequence lengths, batch split, MoE routing), "
                "or replace its device if every kernel on it is slower."
            )
            a_zh = (
                f"均衡{rl_zh}的计算量（序列长度、batch 切分、MoE 路由），"
                "若其所有算子都更慢则考虑更换该设备。"
            )
        remedies = (
            Remedy("action", a_txt, a_zh, gain, BoundKind.ESTIMATE),
            _compute_check(ex, rl, rl_zh),
        )
        tags = ("slow_rank", "compute_straggler", "compute_spread", *(ex.tags if ex else ()))
    return RootCause(
        id=f"cause.{mech.value}.r{rank}",
        mechanism=mech,
        category=cat,
        culprit=Culprit(
            kind="rank",
            ranks=(rank,),
            operator=ex.operator
            if ex is not None
            else (op[0] if (op is not None and not host and op[2] >= 0.5 * comp_ex) else ""),
            shape=ex.shape
            if ex is not None
            else (op[1] if (op is not None and not host and op[2] >= 0.5 * comp_ex) else ""),
            events=tuple((e.step, e.rank) for e in events) if scoped else (),
            label=rl,
            label_zh=rl_zh,
        ),
        victims=victims,
        summary=summary,
        summary_zh=summary_zh,
        metrics={
            "excess_us": excess,
            "job_gain_us": gain,
            "computing_excess_us": comp_ex,
            "free_excess_us": free_ex,
            "victim_wait_us_mean": wait_mean,
            **({"gain_alone_us": 0.0} if later else {}),
            # whether the host's launch delays were measured (a host stall said as such) or the
            # device's Free alone points to it
            **({"host_delay_measured": float(bool(measured or gc))} if host else {}),
            **(ex.metrics if ex is not None else {}),
            **(dev[2] if dev is not None else {}),
            **(py[4] if py is not None else {}),
            **(
                {"peer_sample_ranks": float(op[4])}
                if op is not None and op[4] and not host and op[2] >= 0.5 * comp_ex
                else {}
            ),
        },
        findings=findings,
        steps=steps if scoped else (),
        gain_us=gain,
        bound=BoundKind.ESTIMATE,
        remedies=remedies,
        symptom_tags=tags,
        gain_after=tuple(later),
        severity=_severity(excess, ctx.step_us),
        own=own,
    )


def _compute_check(ex: Explanation | None, who: str, who_zh: str) -> Remedy:
    """The check that follows a compute cause: what would confirm the evidence, never a tool run."""
    if ex is not None and ex.kind == "uniform":
        return Remedy(
            "check",
            f"Confirm with npu-smi on {who}'s host (AI Core frequency and temperature during "
            "training, health status) and compare with a peer device on the same host.",
            f"在{who_zh}所在主机上用 `npu-smi info` 确认（训练时的 AI Core 频率和温度、健康状态），"
            "并与同一主机上的其他设备对比。",
        )
    if ex is not None and ex.kind in ("shape", "extra_work"):
        return Remedy(
            "check",
            f"Log the number of tokens (sequence lengths, batch size, experts routed) each rank "
            f"gets per step and compare {who} with its peers.",
            f"记录每张卡每步处理的 token 数（序列长度、batch 大小、路由到的专家数），对比{who_zh}与其他卡。",
        )
    return Remedy(
        "check",
        f"Check {who}'s device (npu-smi: AI Core frequency, temperature, health) and its software "
        "(CANN, driver, operator package) against a peer.",
        f"对比其他卡检查{who_zh}的设备（`npu-smi info`：AI Core 频率、温度、健康状态）和软件"
        "（CANN、驱动、算子包）。",
    )


def rule_stragglers_and_events(ctx: Context) -> list[RootCause]:
    """Collective rule (late arriver) and events rule.

    Events: per-(step, rank) own time (Computing + Free) ≥ ``EVENT_MIN_SHARE`` (10%) of the median
    step above that step's peer median. With ≥ ``EVENT_MIN_STEPS`` (3) kept steps, a rank with
    events in ≥ ``PERSISTENT_STEP_SHARE`` (75%) of the steps is a persistent straggler; otherwise
    its events stay events. With fewer steps every event rank is a straggler.

    - A persistent straggler: one cause for the rank; HOST_STALL when its Free excess ≥ its
      Computing excess, else COMPUTE_STRAGGLER (with the operator/shape whose time differs most
      from its peers', from ``kernels``). Several persistent stragglers share the victims' wait
      without double counting (:func:`layered_victims`).
    - Events that are not persistent (one rank once, or rotating ranks): one STEP_EVENTS cause
      with the (step, rank) list and its steps; no rank is called slow on average.
    - Ranks the slow_rank analyzer flags (excess ≥ 5% of the step, late arriver) are added as
      persistent stragglers when their own excess is ≥ ``STRAGGLER_MIN_SHARE``.

    Victims: the peers' collective wait for the late rank (:func:`wait_victims`). Gain: the
    culprit's own excess per step (estimate: its Computing/Free down to the peer median).
    Source: ``step_trace`` per (rank, step); ``kernels`` for the operator.
    """
    if ctx.frame.empty or not math.isfinite(ctx.step_us):
        return []
    steps = sorted(int(s) for s in ctx.frame["step"].unique())
    n_steps = len(steps)
    events = find_events(ctx)
    by_rank: dict[int, list[Event]] = defaultdict(list)
    for e in events:
        by_rank[e.rank].append(e)
    persistent: dict[int, list[Event]] = {}
    transient: dict[int, list[Event]] = {}
    for r, evs in by_rank.items():
        if n_steps < EVENT_MIN_STEPS or len({e.step for e in evs}) >= PERSISTENT_STEP_SHARE * (
            ctx.rank_steps(r) or n_steps
        ):
            persistent[r] = evs
        else:
            transient[r] = evs
    # ranks the slow_rank analyzer flags with a persistent mean excess
    sr = ctx.result("slow_rank")
    if sr is not None and "slow" in sr.table.columns:
        flagged = sr.table[sr.table["slow"].astype(bool)]["rank"].astype(int).tolist()
        for r in flagged:
            if r in persistent or r in transient:
                continue
            evs = _all_step_events(ctx, r)
            if sum(e.excess_us for e in evs) / max(n_steps, 1) >= STRAGGLER_MIN_SHARE * ctx.step_us:
                persistent[r] = evs
    out: list[RootCause] = []
    # own time that follows the position in a kind of group: one cause for the whole ladder (the
    # ranks of the middle positions are late too, by the same split, not stragglers of their own)
    pos = position_pattern(ctx)
    covered: set[int] = set()
    if pos is not None:
        out.append(_position_cause(ctx, pos, n_steps))
        first = int(np.argmin(pos.own_us))
        covered = {r for t in pos.groups for i, r in enumerate(t) if i != first}
        persistent = {r: e for r, e in persistent.items() if r not in covered}
    # a persistent rank's events include every step (its whole excess, not only the big steps)
    groups = [g for g in _slow_groups(ctx, set(persistent)) if not set(g) <= covered]
    grouped = {r for g in groups for r in g}
    for g in groups:
        out.append(_group_cause(ctx, g, n_steps))
    singles = {r: _all_step_events(ctx, r) for r in sorted(persistent) if r not in grouped}
    layered = layered_victims(ctx, singles, n_steps)
    # per step of the steps the rank has (a step its file lost is not a step it ran normally)
    later = arrives_later(ctx, list(singles))
    ranks_out = [
        _rank_cause(
            ctx,
            r,
            evs,
            ctx.rank_steps(r) or n_steps,
            scoped=False,
            victims=layered.get(r, ()),
            later=later.get(r, ()),
        )
        for r, evs in singles.items()
    ]
    if len(ranks_out) >= 2:
        # the late ranks share their peers' wait in layers: what fixing all of them saves
        total = sum(c.gain_us or 0.0 for c in ranks_out)
        ranks_out = [
            dataclasses.replace(c, metrics={**c.metrics, "late_ranks_gain_us": total})
            for c in ranks_out
        ]
    out += ranks_out
    flat = [e for evs in transient.values() for e in evs]
    node = node_cause(ctx, flat, n_steps, grouped | set(singles) | covered) if flat else None
    if node is not None:
        out.append(node)
        transient = {}
    if transient:
        js = job_slow_steps(ctx)
        ev_steps = {e.step for evs in transient.values() for e in evs}
        if (
            js is not None
            and ev_steps <= set(js.steps)
            and js.free_us - js.other_free_us >= (js.computing_us - js.other_computing_us)
        ):
            # every rank's own time is up in those steps: the whole job stalls there, not one
            # rank per step that the others wait for
            out.append(_job_steps_cause(ctx, js, n_steps))
        else:
            out.append(_events_cause(ctx, [e for evs in transient.values() for e in evs], n_steps))
    return out


#: The events cause's first action when no evidence says what the hosts do in the stalls.
ROTATING_HOST_ACTION = (
    "Find the host work that lands on a different rank in each hit step (Python garbage "
    "collection, periodic logging, checkpoint shards, data loading) and take it out of the step: "
    "if it is garbage collection, gc.freeze() after setup and gc.collect() at fixed step "
    "intervals."
)
#: Rotating events are one node's when they hit at least this many of its ranks ...
NODE_EVENT_MIN_RANKS = 3
#: ... in at least this share of the kept steps (and no rank of another node).
NODE_EVENT_MIN_STEP_SHARE = 0.25


def node_cause(
    ctx: Context, events: list[Event], n_steps: int, taken: set[int] | None = None
) -> RootCause | None:
    """The rotating events as one node's cause, when every one falls on that node's ranks.

    Stalls that move between the ranks of one node and never reach another node's are that
    node's (its host, an agent or daemon on it), not noise (:func:`_events_node`). The cause is
    the events' (:func:`_events_cause`: the same (step, rank) pairs, victims and per-step gain)
    blamed on the node: SLOW_GROUP with the node's ranks, its summary led by the node and what
    its ranks never share with the other nodes. ``taken``: ranks another cause already names.
    Returns None when no node holds every event.
    """
    node = _events_node(ctx, events)
    if node is None or set(node[1]) & (taken or set()):
        return None
    i, ranks = node
    ev = _events_cause(ctx, events, n_steps)
    hit = sorted({e.rank for e in events})
    steps = sorted({e.step for e in events})
    others = [r for r in ctx.ranks if r not in set(ranks)]
    label, label_zh = (
        f"node {i} (ranks {ranks[0]}-{ranks[-1]})",
        f"节点 {i}（{ranks[0]}-{ranks[-1]}号卡）",
    )
    ol, ol_zh = ranks_label(others)
    hl, hl_zh = ranks_label(hit)
    lead = (
        f"One-step stalls stay on node {i} (ranks {ranks[0]}-{ranks[-1]}): {len(events)} of them "
        f"move between its ranks ({hl}) in {len(steps)} of {n_steps} steps and never reach {ol}, "
        "so the cause is on that node (its host: an agent, daemon or other process there). "
    )
    lead_zh = (
        f"单步停顿只出现在节点 {i}（{ranks[0]}-{ranks[-1]}号卡）：{len(events)} 次停顿在它的卡（{hl_zh}）"
        f"之间轮换，{n_steps} 步中有 {len(steps)} 步受影响，从未出现在{ol_zh}上，所以原因在这台机器上"
        "（它的主机：上面运行的代理、守护进程或其他进程）。"
    )
    blocked = blocked_calls(ctx.profile, hit)
    if blocked is not None and blocked.count >= len(events) // 2:
        # what the hosts sit in during the stalls: a launch that waits for the device driver
        order = (
            f", one card after another in rank order ({ms(blocked.spacing_us)} apart)"
            if blocked.sweep
            else ""
        )
        order_zh = (
            f"，按卡号顺序一张接一张（间隔 {ms(blocked.spacing_us)}）" if blocked.sweep else ""
        )
        lead += (
            f"In those stalls the hosts sit in one blocked call: launch calls ({blocked.label}) "
            f"take {ms(blocked.each_us)} (median of {blocked.count}) against "
            f"{ms(blocked.normal_us)} normally for {blocked.api} (trace_view.json CANN API)"
            f"{order}: the launch waits for the device "
            "driver, held by another process on that host (an agent polling the NPUs). "
        )
        lead_zh += (
            f"这些停顿里主机的下发调用被阻塞：下发调用（{blocked.label}）耗时 {ms(blocked.each_us)}"
            f"（{blocked.count} 次的中位数），{blocked.api} 平时只要 {ms(blocked.normal_us)}（trace_view.json 的 "
            f"CANN API）{order_zh}：下发在等设备驱动，驱动被这台主机上的另一个进程占用"
            "（轮询 NPU 的监控代理）。"
        )
    node_first = Remedy(
        "action",
        f"Find what runs on node {i}'s host and not on the others' in the hit steps (steps "
        f"{_span(steps)}): monitoring agents or exporters polling the NPUs (npu-smi, DCMI), "
        "cron jobs, other processes; stop it or move it off the training cores, and compare "
        "that host's process list and settings with another node's.",
        f"查明在受影响的步（第 {_span(steps)} 步）里只在节点 {i} 的主机上运行的东西：轮询 NPU 的监控"
        "代理或指标采集程序（npu-smi、DCMI）、定时任务、其他进程；停掉它或让它离开训练所用的 CPU 核，"
        "并把这台主机的进程列表和配置与其他节点对比。",
        gain_us=ev.gain_us,
        bound=ev.bound,
    )
    # the events' own first action stays first when their evidence chose it (what the hosts
    # run in the stalls); the generic "find the host work" one gives way to the node's
    generic = ev.remedies[0].text == ROTATING_HOST_ACTION
    remedies = (
        (node_first, *ev.remedies[1:])
        if generic
        else (ev.remedies[0], node_first, *ev.remedies[1:])
    )
    # what the job loses: in each step, the latest of the node's stalled ranks (the others wait
    # for it), averaged over every kept step; the waiting ranks are the other nodes'
    worst: dict[int, float] = {}
    for e in events:
        worst[e.step] = max(worst.get(e.step, 0.0), e.excess_us)
    gain = sum(worst.values()) / max(n_steps, 1)
    clean, slow_step = ev.metrics.get("clean_step_us"), ev.metrics.get("hit_step_us")
    if clean is not None and slow_step is not None and math.isfinite(clean) and slow_step > clean:
        # with clean steps to compare: the hit steps' extra step time, over every step; never
        # more than brings the mean step down to the clean steps' time (medians and means differ)
        gain = (slow_step - clean) * len(steps) / max(n_steps, 1)
        if "step_us" in ctx.frame.columns and not ctx.frame.empty:
            mean_step = float(ctx.frame.groupby("step")["step_us"].median().mean())
            if math.isfinite(mean_step) and mean_step > clean:
                gain = min(gain, mean_step - clean)
    victims = tuple(v for v in ev.victims if v.rank not in set(ranks))
    if clean is not None and slow_step is not None and math.isfinite(clean) and slow_step > clean:
        lead += (
            f"The hit steps run {ms(slow_step - clean)} longer than the clean ones (medians): "
            f"{ms(gain)} per step over the {n_steps} steps. "
        )
        lead_zh += (
            f"受影响的步比未受影响的步长 {ms(slow_step - clean)}（中位数）：平均到 {n_steps} 步，"
            f"每步 {ms(gain)}。"
        )
    else:
        lead += (
            f"The job waits for the latest of them in each hit step: {ms(gain)} per step over "
            f"the {n_steps} steps. "
        )
        lead_zh += (
            f"每个受影响的步里作业都要等其中最晚的一张卡：平均到 {n_steps} 步，每步 {ms(gain)}。"
        )
    remedies = tuple(
        dataclasses.replace(r, gain_us=gain) if r.gain_us == ev.gain_us else r for r in remedies
    )
    return dataclasses.replace(
        ev,
        id=f"cause.slow_group.node{i}",
        victims=victims,
        gain_us=gain,
        mechanism=Mechanism.SLOW_GROUP,
        culprit=Culprit(
            kind="group",
            ranks=tuple(ranks),
            events=ev.culprit.events,
            label=label,
            label_zh=label_zh,
        ),
        summary=lead + ev.summary,
        summary_zh=lead_zh + ev.summary_zh,
        remedies=remedies,
        metrics={**ev.metrics, "node_ranks_hit": float(len(hit)), "node_gain_us": gain},
    )


def _events_node(ctx: Context, events: list[Event]) -> tuple[int, tuple[int, ...]] | None:
    """The node whose ranks hold every rotating one-step event, when there is one.

    Nodes from :attr:`Context.nodes` (on-node links); at least two nodes. The events (own time
    ≥ ``EVENT_MIN_SHARE`` of the step above the step's peers, :func:`find_events`) must all fall
    on one node's ranks, on at least ``NODE_EVENT_MIN_RANKS`` of them, in at least
    ``NODE_EVENT_MIN_STEP_SHARE`` of the steps: a stall that moves between one node's ranks and
    never reaches another node's is that node's (its host, a daemon on it), not noise. Returns
    ``(node index, its ranks)`` or None.
    """
    nodes = ctx.nodes
    if len(nodes) < 2:
        return None
    hit = {e.rank for e in events}
    for i, n in enumerate(nodes):
        if not hit <= set(n) or len(hit) < NODE_EVENT_MIN_RANKS:
            continue
        steps = {e.step for e in events}
        n_steps = ctx.frame["step"].nunique()
        if len(steps) >= NODE_EVENT_MIN_STEP_SHARE * n_steps:
            return i, tuple(sorted(int(r) for r in n))
    return None


def _span(steps: Sequence[int]) -> str:
    """``12-14`` for consecutive steps, else ``12, 14, 15``."""
    st = list(steps)
    if len(st) > 1 and st == list(range(st[0], st[-1] + 1)):
        return f"{st[0]}-{st[-1]}"
    return ", ".join(str(x) for x in st)


def _job_steps_cause(ctx: Context, js: JobSteps, n_steps: int) -> RootCause:
    """HOST_STALL on the whole job in some steps: every rank's device idles more in them.

    Evidence: what the host does in those steps (:func:`~advisor_chat.diagnosis.decompose.host_silence`):
    more time outside any call (no launch, no blocking call) is a training thread that does not run
    - another thread of the process holding the Python GIL (a background checkpoint writer, a
    logger) or a process that loses its CPU. Victims: every rank, its step time above the other
    steps' (per captured step). Gain (estimate): the slow steps' excess over the others', per
    captured step; ``job_steps_cost_us`` the whole excess of those steps.
    """
    excess = max(js.step_us - js.other_step_us, 0.0)
    f = ctx.frame
    total = float(
        (f[f["step"].isin(js.steps)].groupby("step")["step_us"].median() - js.other_step_us)
        .clip(lower=0.0)
        .sum()
    )
    per_step = total / max(n_steps, 1)
    sp = _span(js.steps)
    sil = host_silence(ctx.profile, ctx.ranks, js.steps, js.others)
    silent = (
        sil is not None and sil.delta_us >= 0.5 * excess and sil.ranks_more >= 0.75 * len(sil.ranks)
    )
    head = (
        f"Steps {sp} are slow on every rank: {ms(js.step_us)} against {ms(js.other_step_us)} in the "
        f"other steps ({js.step_us / js.other_step_us:.2f}x; {ms(total)} lost in all); in them every "
        f"rank's device idles (Free) {ms(js.free_us)} per step ({ms(js.other_free_us)} in the other "
        "steps)"
    )
    head_zh = (
        f"第 {sp} 步在每张卡上都变慢：每步 {ms(js.step_us)}，其他步 {ms(js.other_step_us)}（"
        f"{js.step_us / js.other_step_us:.2f} 倍；合计多用 {ms(total)}）；这些步里每张卡的设备每步空闲"
        f" {ms(js.free_us)}（其他步 {ms(js.other_free_us)}）"
    )
    metrics = {
        "step_us_affected_steps": js.step_us,
        "step_us_other_steps": js.other_step_us,
        "free_us_affected_steps": js.free_us,
        "free_us_other_steps": js.other_free_us,
        "saving_us_per_affected_step": excess,
        "job_steps_cost_us": total,
        "first_affected_step": float(js.steps[0]),
        "last_affected_step": float(js.steps[-1]),
    }
    gc_thr, gc_n = gc_recording(ctx.profile, ctx.ranks, js.steps)
    if math.isfinite(gc_thr):
        metrics |= {"gc_detect_threshold_ms": gc_thr, "gc_pauses_in_affected_steps": float(gc_n)}
    gc_us, gc_pairs = gc_pause_us(ctx.profile, ctx.ranks, js.steps)
    n_read = len(_sample(list(ctx.ranks))) * len(js.steps)
    gc_holds = math.isfinite(gc_us) and gc_us >= GC_HOLDS_SHARE * excess and 2 * gc_pairs >= n_read
    tags: tuple[str, ...] = ("host_bound", "high_free", "step_jitter")
    if gc_holds:
        # Python's garbage collector pauses every rank's training thread in those steps
        head += (
            f": in them the host's Python runs its garbage collector for {ms(gc_us)} per step "
            f"(GC events of trace_view.json in {gc_pairs} of {n_read} (step, rank) pairs read), "
            "on every rank in the same steps: a gc.collect() called in the training loop every "
            f"{_interval(js.steps)[0]}, or the collector's thresholds reached together"
        )
        head_zh += (
            f"：这些步里主机的 Python 在做垃圾回收，每步 {ms(gc_us)}（trace_view.json 的 GC 事件，"
            f"读取的 {n_read} 个（步, 卡）中有 {gc_pairs} 个），所有卡在同样的步里：训练循环里每隔 "
            f"{_interval(js.steps)[1]}调用了一次 gc.collect()，或者回收阈值同时到达"
        )
        metrics |= {"gc_pause_us_affected_steps": gc_us}
        tags = ("host_bound", "high_free", "step_jitter", "gc_pause")
    if gc_holds:
        action = Remedy(
            "action",
            "Take gc.collect() out of the training loop (or call it only where a pause costs "
            "nothing, e.g. right after a checkpoint); to keep the collector from pausing every "
            "rank at once, call gc.freeze() after building the model and data, and raise the "
            "thresholds (gc.set_threshold) or disable automatic collection (gc.disable()).",
            "把 gc.collect() 移出训练循环（或只在停顿不影响训练的地方调用，例如保存检查点之后）；为避免垃圾"
            "回收同时让所有卡停顿，在构建好模型和数据后调用 gc.freeze()，并调高回收阈值（gc.set_threshold）"
            "或关闭自动回收（gc.disable()）。",
            per_step,
            BoundKind.ESTIMATE,
        )
    elif silent and sil is not None:
        head += (
            f": the host stops launching - its time outside any call grows from "
            f"{ms(sil.other_idle_us)} to {ms(sil.idle_us)} per step (longest gap {ms(sil.longest_us)}"
            f" against {ms(sil.other_longest_us)}), with no blocking call or launch in those gaps, so "
            "the training thread is not running: another thread of the process holds the Python GIL "
            "(a background thread: an asynchronous checkpoint writer, logging or metrics upload) or "
            "the process loses its CPU"
        )
        head_zh += (
            f"：主机停止下发——它在任何调用之外的时间从每步 {ms(sil.other_idle_us)} 增加到 "
            f"{ms(sil.idle_us)}（最长空档 {ms(sil.longest_us)}，其他步 {ms(sil.other_longest_us)}），"
            "空档里没有阻塞调用也没有下发，说明训练线程没有在运行：进程里的另一个线程占着 Python GIL"
            "（后台线程：异步检查点写入、日志或指标上传），或者进程被抢走了 CPU"
        )
        metrics |= {
            "host_idle_us_affected_steps": sil.idle_us,
            "host_idle_us_other_steps": sil.other_idle_us,
            "host_gap_us_max": sil.longest_us,
        }
        action = Remedy(
            "action",
            f"Take the background work that runs from step {js.steps[0]} on out of the training "
            "process: write checkpoints from a separate process (process-based asynchronous "
            "checkpointing, e.g. DCP async_save with a process-based checkpointer) instead of a "
            "thread, and move logging / metrics uploads to another process, so no thread holds "
            "the GIL while the training thread enqueues work; or save less often.",
            f"把从第 {js.steps[0]} 步开始运行的后台工作移出训练进程：用独立进程写检查点（基于进程的异步"
            "保存，例如 DCP async_save 使用进程方式的 checkpointer）而不是线程，日志 / 指标上传也放到"
            "其他进程，这样训练线程下发任务时不会有别的线程占着 GIL；或者降低保存频率。",
            per_step,
            BoundKind.ESTIMATE,
        )
    else:
        action = Remedy(
            "action",
            f"Find the host work that starts at step {js.steps[0]} on every rank (a checkpoint save, "
            "evaluation, logging, data loading) and move it off the training step.",
            f"找出从第 {js.steps[0]} 步开始在每张卡上出现的主机侧工作（保存检查点、评估、日志、数据加载），"
            "把它移出训练步。",
            per_step,
            BoundKind.ESTIMATE,
        )
    check = Remedy(
        "check",
        f"Record the host's threads in steps {sp} (py-spy dump, or the profiler with "
        "with_stack=True) to see which thread runs while the training thread issues nothing.",
        f"在第 {sp} 步记录主机上各线程在做什么（py-spy dump，或开启 with_stack=True 采集），"
        "看训练线程不下发时是哪个线程在运行。",
    )
    victims = []
    for r in ctx.ranks:
        g = f[(f["rank"] == r) & f["step"].isin(js.steps)]["step_us"]
        lost = float((g - js.other_step_us).clip(lower=0.0).sum()) / max(n_steps, 1)
        victims.append(Impact(r, lost, share_of(lost, ctx.step_us), "slow_steps"))
    findings = _claim(
        ctx,
        lambda x: (
            x.kind is FindingKind.JITTER
            or x.id.startswith("host_dispatch.host_bound.gc_pause")
            or (x.kind in (FindingKind.BOTTLENECK, FindingKind.HOST_BOUND, FindingKind.SLOW_RANK))
            # the step-start idle of these steps is their cause's symptom (GC, a thread)
            or (x.id.startswith("host_dispatch.dataloader.") and (gc_holds or silent))
        ),
    )
    return RootCause(
        id=f"cause.job_steps.s{js.steps[0]}_{js.steps[-1]}",
        mechanism=Mechanism.HOST_STALL,
        category=Category.SCHEDULING,
        culprit=Culprit(
            kind="job",
            label=f"steps {sp} on every rank",
            label_zh=f"第 {sp} 步（每张卡）",
        ),
        victims=tuple(sorted(victims, key=lambda i: (-i.lost_us, i.rank))),
        summary=head + ".",
        summary_zh=head_zh + "。",
        metrics=metrics,
        findings=findings,
        steps=js.steps,
        gain_us=per_step,
        bound=BoundKind.ESTIMATE,
        remedies=(action, check),
        symptom_tags=tags,
        severity=_severity(per_step, ctx.step_us),
    )


#: The recorded GC pauses explain a job's slow steps when they last this share of the excess.
GC_HOLDS_SHARE = 0.5


def _interval(steps: Sequence[int]) -> tuple[str, str]:
    """``("5 steps", "5 步")`` when ``steps`` are evenly spaced, else ``("few steps", "若干步")``."""
    g = even_interval(steps)
    return (f"{g} steps", f"{g} 步") if g else ("few steps", "若干步")


def arrives_later(ctx: Context, ranks: list[int]) -> dict[int, tuple[int, ...]]:
    """For each late rank, the other late ranks that arrive after it in most shared steps.

    A rank arrives after another when its exposed communication is shorter (it waits less); ranks
    on other pipeline stages are not compared. cluster-8rank: rank 1 arrives last at every
    collective, ranks 3 and 6 before it, so fixing rank 3 alone gives nothing back.

    Source: ``step_trace`` Communication (Not Overlapped and Exclude Receive) per (rank, step).
    """
    f = ctx.frame
    if len(ranks) < 2 or f.empty:
        return {}
    piv = f[f["rank"].isin(ranks)].pivot_table(
        index="step",
        columns="rank",
        values="communication_not_overlapped_exclude_receive_us",
        aggfunc="mean",
    )
    out: dict[int, tuple[int, ...]] = {}
    for r in ranks:
        if r not in piv.columns:
            continue
        peers = set(ctx.peers(r))
        after = []
        for c in ranks:
            if c == r or c not in piv.columns or c not in peers:
                continue
            both = piv[[r, c]].dropna()
            if len(both) and float((both[c] < both[r]).mean()) > 0.5:
                after.append(c)
        if after:
            out[r] = tuple(sorted(after))
    return out


def _all_step_events(ctx: Context, rank: int) -> list[Event]:
    """The rank's own-time excess over its peers' median in every kept step (may be < 0)."""
    f = ctx.frame
    peers = ctx.peers(rank)
    key = ("pivots", tuple(peers))
    if key not in ctx.cache:
        sub = f[f["rank"].isin(peers)].assign(own_us=lambda d: d["computing_us"] + d["free_us"])
        ctx.cache[key] = {
            c: sub.pivot_table(index="step", columns="rank", values=c, aggfunc="mean")
            for c in ("own_us", "computing_us", "free_us")
        }
    piv: dict[str, pd.DataFrame] = ctx.cache[key]
    if rank not in piv["own_us"].columns or piv["own_us"].shape[1] < 2:
        return []
    delta = {
        c: t[rank] - t.drop(columns=[rank]).median(axis=1, skipna=True) for c, t in piv.items()
    }
    out = []
    for s in piv["own_us"].index:
        own = num(delta["own_us"].get(s))
        if not math.isfinite(own):
            continue
        out.append(
            Event(
                integer(s),
                rank,
                own,
                num(delta["computing_us"].get(s)),
                num(delta["free_us"].get(s)),
            )
        )
    return out


def _slow_groups(ctx: Context, persistent: set[int]) -> list[list[int]]:
    """Two clusters of own time inside each stage (or the whole job).

    Rule: sort the ranks' own time (Computing + Free, median over steps, so one-step events do
    not count); the largest gap between neighbours
    splits them in two when it is ≥ ``GROUP_MIN_GAP_SHARE`` (3%) of the median step and ≥
    ``GROUP_GAP_VS_SPREAD`` (3×) the larger range inside a cluster, and the slow cluster has ≥ 2
    ranks and fewer ranks than the stage. Needs ≥ 4 ranks in the stage. A slow cluster that holds
    a rank of ``persistent`` (late on its own) needs a gap of ``GROUP_MIN_GAP_WITH_STRAGGLER``
    (1%) only, and at most half the stage's ranks: ranks with the same excess as a straggler are
    stragglers with it, whichever of them the collectives saw arrive last.
    """
    out = []
    pools = ctx.stages or [tuple(ctx.ranks)]
    for pool in pools:
        ranks = [r for r in pool if r in ctx.per_rank.index]
        if len(ranks) < 4:
            continue
        f = ctx.frame[ctx.frame["rank"].isin(ranks)]
        # median over steps: a one-step event does not make a rank part of a slower group
        own = (f["computing_us"] + f["free_us"]).groupby(f["rank"]).median().sort_values()
        vals = own.to_numpy()
        gaps = np.diff(vals)
        i = int(np.argmax(gaps))
        gap = float(gaps[i])
        low, high = vals[: i + 1], vals[i + 1 :]
        spread = max(float(np.ptp(low)), float(np.ptp(high)))
        slow = [int(r) for r in own.index[i + 1 :]]
        min_gap = (
            GROUP_MIN_GAP_WITH_STRAGGLER
            if set(slow) & persistent and 2 * len(slow) <= len(ranks)
            else GROUP_MIN_GAP_SHARE
        )
        if (
            len(slow) >= 2
            and len(slow) < len(ranks)
            and gap >= min_gap * ctx.step_us
            and gap >= GROUP_GAP_VS_SPREAD * spread
        ):
            out.append(sorted(slow))
    return out


def transit_per_step(ctx: Context) -> pd.Series:
    """Transit time per rank (µs per step): its collectives' Transit Time summed per step, mean.

    Source: ``comm_ops`` ``transit_ms`` (communication.json), send/receive included (a rank's
    own transfers). Empty without ``comm_ops``.
    """
    if "transit" not in ctx.cache:
        ops = ctx.profile.get("comm_ops")
        if ops.empty or ops["transit_ms"].isna().all():
            ctx.cache["transit"] = pd.Series(dtype=float)
        else:
            per_step = ops.groupby(["rank", "step"])["transit_ms"].sum() * 1000.0
            ctx.cache["transit"] = per_step.groupby(level="rank").mean()
    out: pd.Series = ctx.cache["transit"]
    return out


def _transit_cause(
    ctx: Context,
    slow: list[int],
    fast: list[int],
    own_ex: float,
    unit: tuple[str, str, str] | None,
    cost_us: float | None = None,
) -> RootCause | None:
    """A unit slowed by its own transfers: its transit time, not its Computing or Free, is longer.

    When the unit's transit per step (:func:`transit_per_step`) exceeds the other ranks' median by
    more than its own-time excess and by ≥ ``STRAGGLER_MIN_SHARE`` of the step, its members come
    late to the other collectives because their own collectives transfer slowly. The links with
    both ends in the unit (``comm_matrix``) against the same transport's links elsewhere say
    whether its links are slower. Victims: the other ranks' wait, up to the transit excess.
    """
    tr = transit_per_step(ctx)
    if tr.empty or not set(slow) <= set(tr.index) or not set(fast) & set(tr.index):
        return None
    a = float(tr.reindex(slow).mean())
    b = float(tr.reindex([r for r in fast if r in tr.index]).median())
    ex = a - b
    floor = STRAGGLER_MIN_SHARE * ctx.step_us
    if cost_us is not None and cost_us > 0:  # the collectives measured what it costs
        floor = min(floor, 0.5 * cost_us)
    if not (ex > own_ex and ex >= floor):
        return None
    gl, gl_zh = ranks_label(slow)
    if unit is not None:
        gl, gl_zh = unit[1], unit[2]
    fl, fl_zh = ranks_label(fast)
    link_txt = link_zh = ""
    transport = ""
    mx, _ = link_records(ctx.profile.get("comm_matrix"))
    m: dict[str, float] = {"transit_us_per_step": a, "transit_us_per_step_peer": b}
    if not mx.empty and "bandwidth_gbps" in mx.columns:
        inside = mx[
            mx["src_rank"].isin(slow)
            & mx["dst_rank"].isin(slow)
            & (mx["src_rank"] != mx["dst_rank"])
        ]
        outside = mx[
            ~mx["src_rank"].isin(slow)
            & ~mx["dst_rank"].isin(slow)
            & (mx["src_rank"] != mx["dst_rank"])
        ]
        if not inside.empty and not outside.empty:
            transport = str(inside["transport"].astype("string").mode().iloc[0])
            bi = float(inside[inside["transport"] == transport]["bandwidth_gbps"].median())
            bo = float(outside[outside["transport"] == transport]["bandwidth_gbps"].median())
            if bi > 0 and bo > 0:
                m |= {"bandwidth_gbps": bi, "bandwidth_gbps_peer": bo}
                link_txt = (
                    f"; the {transport} links among them run at a median {bi:.1f} GB/s against "
                    f"{bo:.1f} GB/s among the other ranks"
                )
                link_zh = f"；它们之间的 {transport} 链路带宽中位数 {bi:.1f} GB/s，其他卡之间为 {bo:.1f} GB/s"
                if abs(bi - bo) <= 0.05 * bo:
                    link_txt = (
                        f"; the {transport} links among them run as fast as the others' (a "
                        f"median {bi:.1f} GB/s against {bo:.1f} GB/s)"
                    )
                    link_zh = (
                        f"；它们之间的 {transport} 链路与其他卡的一样快（带宽中位数 {bi:.1f} GB/s，"
                        f"其他卡之间为 {bo:.1f} GB/s）"
                    )
    slow_links = "bandwidth_gbps" in m and m["bandwidth_gbps"] < 0.8 * m["bandwidth_gbps_peer"]
    # more data through links as fast as the others': their collectives move more (another
    # algorithm, a larger payload); a setting only they have says why
    more_txt = more_zh = ""
    tm = transfer_mb_per_step(ctx)
    if not slow_links and not tm.empty and set(slow) <= set(tm.index):
        ma = float(tm.reindex(slow).mean())
        mb = float(tm.reindex([r for r in fast if r in tm.index]).median())
        if mb > 0 and ma >= TRANSFER_MORE * mb:
            m |= {"transfer_mb_per_step": ma, "transfer_mb_per_step_peer": mb}
            more_txt = (
                f"; they move {ma / mb:.1f}x the data per step ({ma:.1f} MB against {mb:.1f} MB "
                "transit size)"
            )
            more_zh = f"；它们每步传输的数据量是其他卡的 {ma / mb:.1f} 倍（传输量 {ma:.1f} MB 对 {mb:.1f} MB）"
    env = [e for e in env_split(ctx, slow) if e[0].startswith(("HCCL_", "ASCEND_"))]
    env_txt = env_zh = ""
    if env:
        parts = [
            f"{k} is {v or 'unset'} on them and {o or 'unset'} on the others" for k, v, o in env
        ]
        parts_zh = [f"{k} 在它们上为 {v or '未设置'}，其他卡为 {o or '未设置'}" for k, v, o in env]
        env_txt = "; " + ", ".join(parts[:2]) + " (profiler_metadata.json ENV_VARIABLES)"
        env_zh = "；" + "，".join(parts_zh[:2]) + "（profiler_metadata.json ENV_VARIABLES）"
    if (
        unit is not None
        and unit[0] == "node"
        and node_sizes_differ(ctx, slow)
        and links_as_fast(mx, slow)
    ):
        # nodes of different sizes: a node's ranks move more data over its links by topology
        # (the hierarchical collectives), at the same bandwidth as everyone's: not a slower node
        return None
    # victims: what the attribution measures them waiting for this unit at the collectives
    # (their exposed communication cannot show it: the unit's own is longer by its transfers)
    attr = ctx.attribution
    cc = (
        next((x for x in attr.culprits if set(x.unit.ranks) == set(slow)), None)
        if attr is not None
        else None
    )
    c_slow = float(ctx.per_rank.loc[slow, "communication_not_overlapped_exclude_receive_us"].mean())
    victims = []
    for v in fast:
        if cc is not None:
            lost = min(cc.victims.get(v, 0.0), ex)
        else:
            lost = min(
                max(ctx.val(v, "communication_not_overlapped_exclude_receive_us") - c_slow, 0.0),
                ex,
            )
        share = share_of(lost, ctx.val(v, "step_us"))
        if share >= VICTIM_MIN_SHARE:
            victims.append(Impact(v, lost, share, "collective_wait"))
    victims.sort(key=lambda i: (-i.lost_us, i.rank))
    wait_mean = float(np.mean([v.lost_us for v in victims])) if victims else 0.0
    if slow_links:
        a_txt = (
            f"Repair the {transport} links among {gl}: their own collectives transfer slowly while "
            f"the same links elsewhere do not; check those devices' {transport} ports and link "
            "status (npu-smi info -t hccs / hccn_tool -link and -stat) and run an HCCL test "
            "inside that group."
        )
        a_zh = (
            f"修复{gl_zh}之间的 {transport} 链路：它们自己的集合通信传输慢，而其他地方的同类链路正常；"
            f"检查这些设备的 {transport} 端口与链路状态（`npu-smi info -t hccs`、`hccn_tool -link`、`-stat`），"
            "并在该组内跑一次 HCCL 测试。"
        )
    elif env:
        e_var, e_mine, e_other = env[0]
        a_txt = (
            f"Set {e_var} on {gl} as on the other ranks ({e_other or 'unset it'}; it is {e_mine} "
            f"there): the same job should run the same collective settings on every node, and "
            f"{gl} then moves the others' amount of data."
        )
        a_zh = (
            f"把{gl_zh}上的 {e_var} 设置成与其他卡一致（{e_other or '取消设置'}；目前为 {e_mine}）：同一个"
            f"作业在所有节点上应使用相同的集合通信设置，这样{gl_zh}的传输量就与其他卡相同。"
        )
    elif more_txt:
        a_txt = (
            f"Find why the collectives of {gl} move more data than the same collectives elsewhere: "
            "compare their HCCL settings (HCCL_ALGO, HCCL_OP_EXPANSION_MODE), CANN version and "
            "launch script with the other ranks' and make them alike."
        )
        a_zh = (
            f"查明{gl_zh}的集合通信为何比其他卡的同类通信传输更多数据：对比它们与其他卡的 HCCL 设置"
            "（HCCL_ALGO、HCCL_OP_EXPANSION_MODE）、CANN 版本和启动脚本，并改为一致。"
        )
    else:
        a_txt = (
            f"Find why the collectives of {gl} transfer slowly (their links, the algorithm HCCL "
            "picks for that group, a larger payload than the same collectives elsewhere) and run "
            "an HCCL test inside that group."
        )
        a_zh = (
            f"查明{gl_zh}的集合通信为何传输慢（其链路、HCCL 为该组选择的算法、比其他组更大的数据量），"
            "并在该组内跑一次 HCCL 测试。"
        )
    return RootCause(
        id=f"cause.slow_group.r{slow[0]}_{slow[-1]}",
        # the group's own links measured slower than the same links elsewhere: the links are the
        # fault (a node's HCCS trained at a lower width), the group is where they are
        mechanism=Mechanism.SLOW_LINK if slow_links else Mechanism.SLOW_GROUP,
        category=Category.COMMUNICATION,
        culprit=Culprit(
            kind="group", ranks=tuple(slow), transport=transport, label=gl, label_zh=gl_zh
        ),
        victims=tuple(victims),
        summary=(
            f"Slower {'group ' if unit is None else ''}{gl}: these ranks spend {ms(ex)} more per step "
            f"transferring data in their own collectives ({ms(a)} of transit per step against "
            f"{ms(b)} on {fl}) while their Computing and Free match their peers'{link_txt}"
            f"{more_txt}{env_txt}; {_n_wait(len(victims))} {ms(wait_mean)} per step for them "
            "in collectives."
        ),
        summary_zh=(
            f"{gl_zh}这一组更慢：它们在自己的集合通信中每步多花 {ms(ex)} 传输数据（每步传输 {ms(a)}，"
            f"{fl_zh}为 {ms(b)}），计算与空闲时间与其他卡一致{link_zh}{more_zh}{env_zh}；{len(victims)} 张卡每步平均在集合通信中"
            f"为它们等待 {ms(wait_mean)}。"
        ),
        metrics={"excess_us": ex, "victim_wait_us_mean": wait_mean, **m},
        findings=_claim(
            ctx,
            lambda f: bool(f.ranks) and set(f.ranks) <= set(slow) and f.kind is not FindingKind.ENV,
        ),
        gain_us=ex,
        bound=BoundKind.ESTIMATE,
        remedies=(Remedy("action", a_txt, a_zh, ex, BoundKind.ESTIMATE),),
        symptom_tags=(
            ("slow_link", "env_differs")
            if env and not slow_links
            else ("slow_link", "hccs_low_bandwidth" if transport == "HCCS" else "slow_rank")
        ),
        severity=_severity(ex, ctx.step_us),
    )


#: A unit "moves more data" when its collectives' transit size per step is at least this many
#: times the other ranks' median.
TRANSFER_MORE = 1.3


def node_sizes_differ(ctx: Context, node: list[int]) -> bool:
    """Whether the job's nodes (:attr:`Context.nodes`) are not all the size of ``node``."""
    sizes = {len(n) for n in ctx.nodes}
    return len(sizes) > 1 and len(node) in sizes


#: Links touching a unit run "as fast" as the others when each transport's median bandwidth is at
#: least this share of the same transport's median among the links that do not touch it.
AS_FAST_SHARE = 0.9


def links_as_fast(mx: pd.DataFrame, ranks: list[int]) -> bool:
    """Whether every link with an end in ``ranks`` runs at the bandwidth of the other links.

    Per transport, the median ``bandwidth_gbps`` of the links touching ``ranks`` against the
    median of the links that do not (``comm_matrix``, self links left out); False without links
    to compare.
    """
    if mx.empty or "bandwidth_gbps" not in mx.columns:
        return False
    mx = mx[mx["src_rank"] != mx["dst_rank"]]
    touch = mx["src_rank"].isin(ranks) | mx["dst_rank"].isin(ranks)
    compared = False
    for _t, g in mx.groupby(mx["transport"].astype(str)):
        a, b = (
            g.loc[touch.loc[g.index], "bandwidth_gbps"],
            g.loc[~touch.loc[g.index], "bandwidth_gbps"],
        )
        if a.empty or b.empty:
            continue
        compared = True
        if float(a.median()) < AS_FAST_SHARE * float(b.median()):
            return False
    return compared


def _is_topology_unit(ctx: Context, ranks: list[int]) -> bool:
    """Whether ``ranks`` are a node, a communication group or a pipeline stage.

    Also true when the data reveals no nodes: a cluster of slower ranks is then taken for one.
    """
    from advisor_chat.diagnosis.attribution import _units, nodes

    if not nodes(ctx.profile):
        return True
    want = tuple(sorted(ranks))
    units = _units(ctx.profile, [tuple(sorted(s)) for s in ctx.stages], set(ctx.ranks))
    return any(tuple(sorted(u.ranks)) == want for u in units)


#: Position pattern: at least this many positions per group and this many groups of the kind, the
#: positions explaining at least this share of the ranks' own-time variance.
POSITION_MIN_SIZE = 3
POSITION_MIN_GROUPS = 2
POSITION_MIN_R2 = 0.9
#: Context-parallel group names (the remedy for a causal mask over contiguous chunks).
_CP_GROUP = re.compile(r"(?:^|[^a-z])(?:cp|context|ring)(?:[^a-z]|$)", re.I)
_ATTENTION = re.compile(r"attention|flash|\bfa\b|softmax", re.I)


@dataclasses.dataclass(frozen=True)
class Positions:
    """Own time that follows the ranks' position in the groups of one kind (a split along them).

    Attributes:
        kind: The groups' name (``parallel_group_info`` / ``comm_groups.group_name``, e.g. ``cp``).
        groups: The groups of that kind (ranks in the order the metadata lists them).
        own_us: Median own time (Computing + Free, µs per step) of the ranks at each position.
        computing_us: Median Computing (µs per step) at each position.
        last: The position with the most own time; its ranks are the culprits.
    """

    kind: str
    groups: tuple[tuple[int, ...], ...]
    own_us: tuple[float, ...]
    computing_us: tuple[float, ...]
    last: int

    def ranks_at(self, i: int) -> list[int]:
        """The ranks at position ``i`` of every group, sorted."""
        return sorted(g[i] for g in self.groups)


def position_pattern(ctx: Context) -> Positions | None:
    """Own time rising (or falling) with the ranks' position in their groups of one kind.

    Rule: a kind of communication group (not the world group, not pipeline ``pp`` groups) whose
    groups cover the ranks, each of ``POSITION_MIN_SIZE`` (3) or more ranks, at least
    ``POSITION_MIN_GROUPS`` (2) groups; the median own time per position is strictly monotone over
    the positions, its range is ≥ ``GROUP_MIN_GAP_SHARE`` of the median step, and the positions
    explain ≥ ``POSITION_MIN_R2`` (90%) of the variance of the ranks' own time. A set of culprits
    that is a node, a group or a stage is that unit's, not a position's. Source: ``comm_groups``
    (profiler_metadata.json ``parallel_group_info`` / the DB), ``step_trace`` per rank.
    """
    g = ctx.profile.get("comm_groups")
    per = ctx.per_rank
    if g is None or g.empty or per.empty or "group_name" not in g or "ranks" not in g:
        return None
    n = len(ctx.ranks)
    best: Positions | None = None
    for name, rows in g.groupby(g["group_name"].astype(str), sort=True):
        if not name or name.lower().startswith(("default", "world", "pp", "hccl_world")):
            continue
        groups = []
        for rs in rows["ranks"]:
            t = tuple(int(r) for r in rs) if isinstance(rs, (list, tuple, np.ndarray)) else ()
            if t and t not in groups:
                groups.append(t)
        k = len(groups[0]) if groups else 0
        members = [r for t in groups for r in t]
        if (
            k < POSITION_MIN_SIZE
            or k >= n
            or len(groups) < POSITION_MIN_GROUPS
            or any(len(t) != k for t in groups)
            or len(set(members)) != len(members)
            or not set(members) <= set(per.index)
        ):
            continue
        own = per["own_us"]
        med = [float(np.median([own[t[i]] for t in groups])) for i in range(k)]
        diffs = np.diff(med)
        if not (np.all(diffs > 0) or np.all(diffs < 0)):
            continue
        if max(med) - min(med) < GROUP_MIN_GAP_SHARE * ctx.step_us:
            continue
        vals = np.array([own[r] for r in members])
        total = float(np.sum((vals - vals.mean()) ** 2))
        within = float(sum((own[t[i]] - med[i]) ** 2 for t in groups for i in range(k)))
        if total <= 0 or 1.0 - within / total < POSITION_MIN_R2:
            continue
        last = int(np.argmax(med))
        pos = Positions(
            str(name),
            tuple(groups),
            tuple(med),
            tuple(float(np.median([per["computing_us"][t[i]] for t in groups])) for i in range(k)),
            last,
        )
        if _is_topology_unit(ctx, pos.ranks_at(last)):
            continue
        if best is None or max(med) - min(med) > max(best.own_us) - min(best.own_us):
            best = pos
    return best


def _mean(victims: Sequence[Impact]) -> float:
    return float(np.mean([v.lost_us for v in victims])) if victims else 0.0


def _position_cause(ctx: Context, pos: Positions, n_steps: int) -> RootCause:
    """COMPUTE_STRAGGLER (or HOST_STALL) for the ranks at the last position of their groups.

    Built as the ranks' group cause (:func:`_group_cause`: victims, device evidence), with what the
    positions say: every position's own time, and the fix that evens the work along the groups.
    Gain (estimate): the culprits' own time above the positions' mean (an even split keeps the total
    work and gives every position the mean).
    """
    culprits = pos.ranks_at(pos.last)
    cl, cl_zh = ranks_label(culprits)
    att = ctx.attribution.culprit_of(culprits[0]) if ctx.attribution is not None else None
    if att is not None and set(att.unit.ranks) == set(culprits):
        # named by the collectives: the victims' wait as measured there
        base = _group_cause(
            ctx, culprits, n_steps, ("ranks", cl, cl_zh), cost_us=att.cost_us_per_step
        )
    else:
        base = _group_cause(ctx, culprits, n_steps)
    k = len(pos.own_us)
    mean = float(np.mean(pos.own_us))
    gain = max(pos.own_us[pos.last] - mean, 0.0)
    ladder = ", ".join(ms(v) for v in pos.computing_us)
    ladder_zh = "、".join(ms(v) for v in pos.computing_us)
    # each other position waits, at the collectives of its group, for what the last position
    # computes more than it (bounded by its own exposed communication, where that wait shows)
    victims = sorted(
        (
            Impact(r, lost, share_of(lost, ctx.val(r, "step_us")), "collective_wait")
            for i in range(k)
            if i != pos.last
            for r in pos.ranks_at(i)
            if r in ctx.per_rank.index
            for lost in [
                min(
                    max(pos.own_us[pos.last] - pos.own_us[i], 0.0),
                    ctx.val(r, "communication_not_overlapped_exclude_receive_us"),
                )
            ]
            if share_of(lost, ctx.val(r, "step_us")) >= VICTIM_MIN_SHARE
        ),
        key=lambda v: (-v.lost_us, v.rank),
    )
    waits = [v.lost_us for v in victims]
    old_en = (
        f"; {_n_wait(len(base.victims))} {ms(_mean(base.victims))} per step for them in collectives"
    )
    old_zh = f"；{len(base.victims)} 张卡每步平均在集合通信中为它们等待 {ms(_mean(base.victims))}"
    new_en = new_zh = ""
    if waits:
        span = (
            ms(max(waits))
            if len(set(map(ms, waits))) == 1
            else f"{ms(min(waits))} to {ms(max(waits))}"
        )
        span_zh = (
            ms(max(waits))
            if len(set(map(ms, waits))) == 1
            else f"{ms(min(waits))} 到 {ms(max(waits))}"
        )
        new_en = f"; the other positions' {len(victims)} ranks wait {span} per step for them in collectives (the farther from position {pos.last}, the longer)"
        new_zh = f"；其他位置的 {len(victims)} 张卡每步在集合通信中为它们等待 {span_zh}（离位置 {pos.last} 越远等得越久）"
    kind = pos.kind
    clause = (
        f"; the work follows the ranks' position in their {kind} groups ({len(pos.groups)} groups "
        f"of {k}): positions 0-{k - 1} compute {ladder} per step, the same in every {kind} group, "
        f"and {cl} hold position {pos.last} - the work is split unevenly along the {kind} groups, "
        "not slower cards"
    )
    clause_zh = (
        f"；计算量随卡在 {kind} 通信组中的位置变化（共 {len(pos.groups)} 组，每组 {k} 张卡）："
        f"位置 0-{k - 1} 每步计算分别为 {ladder_zh}，每个 {kind} 组都一样，{cl_zh}处于位置 {pos.last}"
        f"——是工作沿 {kind} 组切分不均，而不是卡变慢"
    )
    op = base.culprit.operator
    if _CP_GROUP.search(kind) and (not op or _ATTENTION.search(op)):
        text = (
            f"Balance the context-parallel split: with a causal mask, a sequence cut into "
            f"contiguous chunks gives the {kind} rank holding the last chunk the most attention "
            f"work (it attends to every earlier chunk); split it load-balanced (zigzag: {kind} "
            f"rank i takes chunks i and 2x{k}-1-i, as Megatron's get_batch_on_this_cp_rank does) "
            "so every position computes the same."
        )
        text_zh = (
            f"均衡上下文并行（CP）的切分：在因果掩码下，把序列按连续块切分会让持有最后一块的 {kind} "
            f"卡承担最多的注意力计算（它要关注之前所有的块）；改用负载均衡的切分（zigzag：{kind} 中第 i "
            f"张卡取第 i 块和第 2x{k}-1-i 块，如 Megatron 的 get_batch_on_this_cp_rank），"
            "让每个位置的计算量相同。"
        )
    else:
        text = (
            f"Even out the work along the {kind} groups: position {pos.last} of every {kind} group "
            f"({cl}) computes the most and the others wait for it; give every position the same "
            f"share (the split of the sequence, batch, layers or experts along {kind})."
        )
        text_zh = (
            f"均衡沿 {kind} 组的切分：每个 {kind} 组中位置 {pos.last} 的卡（{cl_zh}）计算最多，其他卡在等它；"
            f"让每个位置分到相同的工作量（沿 {kind} 切分的序列、batch、层或专家）。"
        )
    metrics = {
        **base.metrics,
        **{f"position_{i}_computing_us": v for i, v in enumerate(pos.computing_us)},
        "group_size": float(k),
        "culprit_position": float(pos.last),
        "even_split_gain_us": gain,
    }
    return dataclasses.replace(
        base,
        id=f"cause.positions.{kind}.p{pos.last}",
        mechanism=base.mechanism
        if base.mechanism is not Mechanism.SLOW_GROUP
        else Mechanism.COMPUTE_STRAGGLER,
        culprit=dataclasses.replace(base.culprit, kind="ranks"),
        summary=base.summary.removeprefix("Slower group ")
        .rstrip(".")
        .replace(old_en, clause + new_en, 1)
        + ".",
        summary_zh=base.summary_zh.rstrip("。").replace(old_zh, clause_zh + new_zh, 1) + "。",
        victims=tuple(victims),
        metrics={**metrics, "victim_wait_us_mean": float(np.mean(waits)) if waits else 0.0},
        # the middle positions' slow-rank findings are this split too
        findings=base.findings
        + _claim(
            ctx,
            lambda f: (
                f.kind is FindingKind.SLOW_RANK
                and bool(f.ranks)
                and all(r in {x for t in pos.groups for x in t} for r in f.ranks)
            ),
        ),
        gain_us=gain,
        remedies=(
            Remedy("action", text, text_zh, gain, BoundKind.ESTIMATE),
            *base.remedies[1:],
        ),
        symptom_tags=tuple(dict.fromkeys((*base.symptom_tags, "load_imbalance"))),
    )


def _group_cause(
    ctx: Context,
    slow: list[int],
    n_steps: int,
    unit: tuple[str, str, str] | None = None,
    cost_us: float | None = None,
) -> RootCause:
    """SLOW_GROUP: ranks that split into a slower cluster, with the operator/shape that differs.

    Victims: the faster ranks' collective wait (their exposed communication minus the slow
    cluster's mean, capped by the cluster's mean excess). ``cost_us``: what the wait attribution
    says the unit costs the job per step, when it named the unit (its transfers then explain it
    when their excess is at least half of that cost). Source: ``step_trace``, ``kernels``.
    """
    peers = ctx.peers(slow[0])
    fast = [r for r in peers if r not in slow]
    per = ctx.per_rank
    comp_ex = float(per.loc[slow, "computing_us"].mean() - per.loc[fast, "computing_us"].median())
    free_ex = float(per.loc[slow, "free_us"].mean() - per.loc[fast, "free_us"].median())
    transit = _transit_cause(ctx, slow, fast, max(comp_ex, free_ex, 0.0), unit, cost_us)
    if transit is not None:
        return transit
    excess = float(per.loc[slow, "own_us"].mean() - per.loc[fast, "own_us"].median())
    c_slow = float(per.loc[slow, "communication_not_overlapped_exclude_receive_us"].mean())
    victims = []
    for v in fast:
        lost = min(
            max(ctx.val(v, "communication_not_overlapped_exclude_receive_us") - c_slow, 0.0), excess
        )
        share = share_of(lost, ctx.val(v, "step_us"))
        if share >= VICTIM_MIN_SHARE:
            victims.append(Impact(v, lost, share, "collective_wait"))
    victims.sort(key=lambda i: (-i.lost_us, i.rank))
    gl, gl_zh = ranks_label(slow)
    if unit is not None:  # a unit the data reveals: (kind, English label, Chinese label)
        gl, gl_zh = unit[1], unit[2]
    ex = (
        explain_device(
            device_account(ctx.profile, [(-1, r) for r in slow], fast),
            gl,
            gl_zh,
            excess,
            said_us=comp_ex,  # "these ranks compute X more per step ..., because <clause>"
        )
        if comp_ex >= free_ex
        else None
    )
    op = op_delta(ctx, slow, fast) if comp_ex >= free_ex and ex is None else None
    use_op = op is not None and op[2] >= 0.3 * max(comp_ex, 1.0)
    wait_mean = float(np.mean([v.lost_us for v in victims])) if victims else 0.0
    host = free_ex > comp_ex
    what = (
        f"idle (Free) {ms(free_ex)} more per step"
        if host
        else f"compute {ms(comp_ex)} more per step"
    )
    what_zh = f"每步空闲时间多 {ms(free_ex)}" if host else f"每步计算时间多 {ms(comp_ex)}"
    op_txt = op_zh = ""
    if use_op and op is not None:
        op_txt = (
            f", mostly {op[0]} [{op[1]}] ({ms(op[2])} per step more, {op[3]:.2f}x slower per call)"
            + _op_sample_txt(op)[0]
        )
        op_zh = (
            f"，主要是 {op[0]} [{op[1]}]（每步多 {ms(op[2])}，单次慢 {op[3]:.2f} 倍）"
            + (_op_sample_txt(op)[1])
        )
    fl, fl_zh = ranks_label(fast)
    findings = _claim(
        ctx,
        lambda f: (
            bool(f.ranks)
            and set(f.ranks) <= set(slow)
            and f.kind
            in (
                FindingKind.SLOW_RANK,
                FindingKind.OP_REGRESSION,
                FindingKind.BOTTLENECK,
                FindingKind.HOST_BOUND,
                FindingKind.LOAD_IMBALANCE,
            )
        ),
    )
    hostev = host_evidence(ctx, slow, fast) if host else None
    calls = slow_launch_calls(ctx.profile, slow, fast) if host and hostev is None else None
    node = unit is not None and unit[0] == "node"
    gain = excess
    late = _late_together(ctx, slow) if unit is not None and unit[0] == "ranks" else None
    if late is not None:
        # ranks late together, named by the collectives: their victims' loss is measured there
        # (the step trace counts it as the victims' exposed communication), their own time where
        # their idle is (before which operators; the step trace counts most of it as
        # Communication when it falls while their own collectives run)
        victims = sorted(
            (
                Impact(int(r), float(v), share_of(float(v), ctx.step_us), "collective_wait")
                for r, v in late.items()
                if share_of(float(v), ctx.step_us) >= VICTIM_MIN_SHARE
            ),
            key=lambda i: (-i.lost_us, i.rank),
        )
        wait_mean = float(np.mean([v.lost_us for v in victims])) if victims else 0.0
        spot = idle_before(ctx.profile, slow, fast, float(cost_us or excess)) if host else None
        cap = max(excess, spot.delta_us if spot is not None else 0.0)
        if calls is not None:  # the host's lost time measured in its calls: the whole delay
            cap = max(cap, float(cost_us or 0.0))
        gain = min(max((v.lost_us for v in victims), default=excess), cap)
    host_group = False
    freeze: HostFreezes | None = None
    if ex is not None and "passes_per_step" in ex.metrics:
        # more micro-batches than their peers: an even split gives every rank the mean, so the
        # slow ranks save their excess times the share of the ranks that are not slow
        gain = gain * len(fast) / max(len(fast) + len(slow), 1)
    if ex is not None:
        op_txt = f", because {ex.clause}"
        op_zh = f"，原因是{ex.clause_zh}"
        a_txt, a_zh = ex.remedy.text, ex.remedy.text_zh
    elif use_op and op is not None:
        a_txt = (
            f"Make {op[0]} [{op[1]}] on {gl} run as on {fl}: check the input shape/format/dtype and "
            "the software (CANN, driver, config) of the node these ranks share."
        )
        a_zh = (
            f"让{gl_zh}上的 {op[0]} [{op[1]}] 与{fl_zh}一样快：检查输入 shape、格式、数据类型，"
            "以及这些卡所在节点的软件（CANN、驱动、配置）。"
        )
    elif host and calls is not None:
        op_txt, op_zh, a_txt, a_zh = _slow_calls_text(calls, gl, gl_zh)
    elif host and (
        py := _python_clause(
            ctx,
            tuple((int(s), r) for r in slow for s in ctx.frame["step"].unique()),
            tuple(slow),
            free_ex,
        )
    ):
        # what the group's hosts run while their devices idle (with_stack / cpu_op frames)
        op_txt, op_zh, a_txt, a_zh = py[0], py[1], py[2], py[3]
        # ranks whose hosts run the same collective, and no other rank does: its group
        host_group = "host_collective" in py[4]
    elif host and (fz := host_freezes(ctx.profile, slow)) is not None:
        # (after the frames: a host running a frame is busy, not frozen)
        op_txt, op_zh, a_txt, a_zh = _freeze_text(fz, gl, gl_zh, node)
        freeze = fz
    elif host and (node or hostev is not None):
        if hostev is not None:
            op_txt = f": {hostev[0]}"
            op_zh = f"：{hostev[1]}"
        where = f"the host of {gl}" if node else f"the hosts of {gl}"
        where_zh = f"{gl_zh}所在主机" if node else f"{gl_zh}的主机"
        calls_ratio = (
            hostev[2]["launch_api_us"] / hostev[2]["launch_api_us_peer"]
            if hostev is not None and "launch_api_us" in hostev[2]
            else None
        )
        if calls_ratio is not None:  # every call slower: the CPU runs slower
            a_txt = (
                f"Give {where} {'its' if node else 'their'} full CPU speed: set the CPU frequency "
                "governor to performance "
                "(cpupower frequency-set -g performance; cpupower frequency-info shows it), and "
                "check the CPU binding (CPU_AFFINITY_CONF, numactl) and other processes there: "
                f"every launch call takes {calls_ratio:.1f}x as long as on the other ranks."
            )
            a_zh = (
                f"让{where_zh}的 CPU 全速运行：把 CPU 调频策略设为 performance（`cpupower frequency-set "
                "-g performance`，用 `cpupower frequency-info` 查看），并检查绑核（CPU_AFFINITY_CONF、"
                f"numactl）和其上的其他进程：每次下发调用耗时是其他卡的 {calls_ratio:.1f} 倍。"
            )
        else:
            a_txt = (
                f"Free {where}: these ranks idle together ({ms(free_ex)} more Free per step than "
                f"{fl}) because their host launches work late; check the CPU binding "
                "(CPU_AFFINITY_CONF, taskset / numactl per rank), other processes and the CPU "
                "frequency governor there, and the dataloader workers per rank."
            )
            a_zh = (
                f"排查{where_zh}：这些卡一起空闲（每步 Free 比{fl_zh}多 {ms(free_ex)}），因为主机下发任务较慢；"
                "检查 CPU 绑核（CPU_AFFINITY_CONF、每卡的 taskset / numactl）、主机上的其他进程、CPU 调频策略，"
                "以及每卡 DataLoader 的 `num_workers`。"
            )
    else:
        a_txt = (
            f"Find what differs on {gl} (node hardware, software versions, configuration, "
            "work assignment) and make it match the other ranks."
        )
        a_zh = f"找出{gl_zh}与其他卡的差异（节点硬件、软件版本、配置、任务分配）并使其一致。"
    # ranks late together that no node, group or stage holds: each is a straggler of its own
    # kind (a host stall when their extra time is idle), named together
    together = not host_group and (
        (unit is not None and unit[0] == "ranks")
        or (unit is None and not _is_topology_unit(ctx, slow))
    )
    return RootCause(
        id=f"cause.slow_group.r{slow[0]}_{slow[-1]}",
        mechanism=(
            (Mechanism.HOST_STALL if host else Mechanism.COMPUTE_STRAGGLER)
            if together
            else Mechanism.SLOW_GROUP
        ),
        # (a collective its hosts run themselves is communication, slowly done)
        category=Category.COMMUNICATION
        if host_group
        else Category.SCHEDULING
        if host
        else Category.COMPUTE,
        culprit=Culprit(
            kind="ranks" if together else "group",
            ranks=tuple(slow),
            operator=ex.operator
            if ex is not None
            else (op[0] if use_op and op is not None else ""),
            shape=ex.shape if ex is not None else (op[1] if use_op and op is not None else ""),
            label=gl,
            label_zh=gl_zh,
        ),
        victims=tuple(victims),
        summary=(
            f"Slower {'group ' if unit is None else ''}{gl}: these ranks {what} than {fl}{op_txt}; "
            f"{_n_wait(len(victims))} {ms(wait_mean)} per step for them in collectives."
        ),
        summary_zh=(
            f"{gl_zh}这一组更慢：{what_zh}（相对{fl_zh}）{op_zh}；{len(victims)} 张卡每步平均在集合通信中"
            f"为它们等待 {ms(wait_mean)}。"
        ),
        metrics={
            "excess_us": excess,
            "computing_excess_us": comp_ex,
            "free_excess_us": free_ex,
            "victim_wait_us_mean": wait_mean,
            **({"op_delta_us": op[2], "op_avg_ratio": op[3]} if use_op and op is not None else {}),
            **(ex.metrics if ex is not None else {}),
            **(hostev[2] if hostev is not None else {}),
            **(
                {
                    "slow_launch_calls_per_step": calls.per_step,
                    "slow_launch_call_us_median": calls.median_us,
                    "launch_call_us_median_usual": calls.usual_us,
                    "launch_call_us_median_peer": calls.peer_us,
                }
                if calls is not None
                else {}
            ),
            **({"peer_sample_ranks": float(op[4])} if use_op and op is not None and op[4] else {}),
            **(
                {
                    "host_freezes": float(freeze.moments),
                    "host_freeze_us_median": freeze.each_us,
                    "host_freeze_period_us": freeze.period_us,
                }
                if freeze is not None
                else {}
            ),
        },
        findings=findings,
        gain_us=gain,
        bound=BoundKind.ESTIMATE,
        remedies=(
            Remedy("action", a_txt, a_zh, gain, BoundKind.ESTIMATE),
            _compute_check(ex, gl, gl_zh),
        ),
        symptom_tags=(
            ("slow_rank", *ex.tags)
            if ex is not None
            else ("slow_rank", "host_bound", "high_free")
            if host
            else ("slow_rank", "op_regression_shape")
            + (("matmul_slow",) if use_op and op is not None and "matmul" in op[0].lower() else ())
            if use_op
            else ("slow_rank", "compute_spread")
        ),
        severity=_severity(excess, ctx.step_us),
        own=tuple(
            Impact(
                r,
                ctx.val(r, "own_us") - float(per.loc[fast, "own_us"].median()),
                share_of(
                    ctx.val(r, "own_us") - float(per.loc[fast, "own_us"].median()),
                    ctx.val(r, "step_us"),
                ),
                "own_time",
            )
            for r in slow
        ),
    )


def _freeze_text(fz: HostFreezes, gl: str, gl_zh: str, node: bool) -> tuple[str, str, str, str]:
    """Clause (en, zh) and first change (en, zh) for hosts frozen together on a fixed period.

    From :func:`~advisor_chat.diagnosis.decompose.host_freezes` (host calls in trace_view.json,
    kernel_details.csv).
    """
    where = f"the node of {gl}" if node else gl
    where_zh = f"{gl_zh}所在节点" if node else gl_zh
    en = (
        f": {fz.moments} times in the capture their hosts stop together, at the same moment on "
        f"every one of them, for {ms(fz.each_us)} each (median) with no host call at all while "
        f"their devices idle, every {ms(fz.period_us)} of wall-clock time: a process that is busy "
        "still makes calls; these are frozen from outside, on a fixed period — the signature of "
        "a CPU quota throttling the container (cgroup CFS, 100 ms period by default)"
    )
    zh = (
        f"：采集期间它们的主机共有 {fz.moments} 次在同一时刻一起停住，每次 {ms(fz.each_us)}（中位数），"
        f"期间没有任何主机调用，设备也在空闲，而且每隔 {ms(fz.period_us)}（墙钟时间）出现一次：忙碌的进程仍会"
        "发出调用，这些进程是被外部按固定周期冻结的——这是容器被 CPU 配额限流（cgroup CFS，默认周期 100 ms）"
        "的特征"
    )
    a = (
        f"Raise or remove the CPU limit of the container on {where} (Kubernetes "
        "resources.limits.cpu, or cpu.cfs_quota_us / cpu.max), or lower its CPU demand "
        "(DataLoader workers, OMP_NUM_THREADS); cpu.stat's nr_throttled and throttled_usec in "
        "that container confirm it."
    )
    a_zh = (
        f"调大或去掉{where_zh}上容器的 CPU 限制（Kubernetes 的 resources.limits.cpu，或 "
        "cpu.cfs_quota_us / cpu.max），或降低它的 CPU 需求（DataLoader worker 数、OMP_NUM_THREADS）；"
        "该容器 cpu.stat 中的 nr_throttled 和 throttled_usec 可以确认。"
    )
    return en, zh, a, a_zh


def _late_together(ctx: Context, slow: list[int]) -> dict[int, float] | None:
    """What each other rank waits per step for the ranks ``slow``, from the wait attribution.

    The attribution's unit when it names exactly these ranks; else the sum over those of them it
    names one by one (ranks late by the same amount split the blame by arrival order, so each
    holds a part of what the others wait for the set). ``None`` when it names none of them.
    """
    attr = ctx.attribution
    if attr is None:
        return None
    whole = attr.culprit_of(slow[0])
    if whole is not None and whole.unit.ranks == tuple(slow):
        return {int(r): float(v) for r, v in whole.victims.items()}
    parts = [attr.culprit_of(r) for r in slow]
    named = [p for r, p in zip(slow, parts, strict=True) if p is not None and p.unit.ranks == (r,)]
    if not named:
        return None
    out: dict[int, float] = defaultdict(float)
    for p in named:
        for r, v in p.victims.items():
            if int(r) not in slow:
                out[int(r)] += float(v)
    return dict(out)


def _churn_text(mem: MemoryChurn) -> tuple[str, str]:
    """The clause (English, Chinese) for a rank whose caching allocator releases memory per step."""
    src = f"memory_record.csv {mem.component}".strip()
    peers = (
        "which none of its peers does"
        if mem.peer_releases_per_step == 0
        else f"against {mem.peer_releases_per_step:g} on its peers"
    )
    peers_zh = (
        "其他卡都没有"
        if mem.peer_releases_per_step == 0
        else f"其他卡为 {mem.peer_releases_per_step:g} 次"
    )
    en = (
        f"; its caching allocator releases its reserved device memory {mem.releases_per_step:g} "
        f"times per step ({mem.release_mb_median:.0f} MB each, {src}), {peers}"
    )
    zh = (
        f"；其缓存分配器每步释放预留显存 {mem.releases_per_step:g} 次（每次 "
        f"{mem.release_mb_median:.0f} MB，来自 {src}），{peers_zh}"
    )
    if mem.capped:
        en += (
            f": it needs what they need (allocated peak {mem.allocated_peak_mb:.0f} MB, "
            f"{mem.peer_allocated_peak_mb:.0f} MB on its peers) but cannot reserve as much (at "
            f"most {mem.reserved_max_mb:.0f} MB against {mem.peer_reserved_max_mb:.0f} MB), so it "
            "frees its cache and allocates again, synchronizing the device each time: less free "
            "HBM on that NPU"
        )
        zh += (
            f"：它需要的显存与其他卡相同（已分配峰值 {mem.allocated_peak_mb:.0f} MB，其他卡 "
            f"{mem.peer_allocated_peak_mb:.0f} MB），却预留不到那么多（最多 {mem.reserved_max_mb:.0f} MB，"
            f"其他卡 {mem.peer_reserved_max_mb:.0f} MB），只好释放缓存再重新申请，每次都要同步设备："
            "这张 NPU 上可用的 HBM 更少"
        )
    elif mem.fragmented:
        en += (
            f": it allocates what they do (allocated peak {mem.allocated_peak_mb:.0f} MB, "
            f"{mem.peer_allocated_peak_mb:.0f} MB on its peers) but has reserved up to "
            f"{mem.reserved_max_mb:.0f} MB against {mem.peer_reserved_max_mb:.0f} MB: its cached "
            "segments are fragmented, so at the card's limit it frees its cache and allocates "
            "again, synchronizing the device each time"
        )
        zh += (
            f"：它分配的显存与其他卡相同（已分配峰值 {mem.allocated_peak_mb:.0f} MB，其他卡 "
            f"{mem.peer_allocated_peak_mb:.0f} MB），预留却高达 {mem.reserved_max_mb:.0f} MB（其他卡 "
            f"{mem.peer_reserved_max_mb:.0f} MB）：缓存的内存段碎片化，到达显存上限后只能释放缓存再重新申请，"
            "每次都要同步设备"
        )
    else:
        en += ": each release synchronizes the device"
        zh += "：每次释放都要同步设备"
    return en, zh


#: A rank's copy tasks are slow when they take this many times its peers' for the same count...
SLOW_COPY_RATIO = 3.0
#: ... and their extra time is at least this share of its Free excess.
SLOW_COPY_SHARE = 0.5


def _slow_copies(
    ctx: Context, rank: int, peers: Sequence[int], free_ex: float
) -> tuple[str, str, str, str] | None:
    """The rank's host↔device copies slower than its peers' same copies: its PCIe link.

    From :func:`~advisor_chat.diagnosis.decompose.device_copies` (the MEMCPY_ASYNC tasks of
    trace_view.json's launch flows) of the rank against its peers': as many copies per step,
    ≥ ``SLOW_COPY_RATIO`` x their time, the extra ≥ ``SLOW_COPY_SHARE`` of its Free excess.
    Returns (clause, Chinese clause, action, Chinese action) or ``None``.
    """
    mine = device_copies(ctx.profile, [rank])
    theirs = device_copies(ctx.profile, list(peers))
    if mine is None or theirs is None or mine.per_step != theirs.per_step:
        return None
    extra = mine.us_per_step - theirs.us_per_step
    if mine.us_per_step < SLOW_COPY_RATIO * theirs.us_per_step or extra < SLOW_COPY_SHARE * max(
        free_ex, 1.0
    ):
        return None
    ratio = mine.us_per_step / max(theirs.us_per_step, 1.0)
    en = (
        f"; its {mine.per_step:g} host-device copies per step (MEMCPY_ASYNC tasks, as many as its "
        f"peers') take {ms(mine.us_per_step)} against {ms(theirs.us_per_step)} on its peers "
        f"({ratio:.1f}x slower for the same copies): data moves slower over this card's PCIe link "
        "while its kernels and network links run as the others'"
    )
    zh = (
        f"；它每步 {mine.per_step:g} 次主机与设备之间的拷贝（MEMCPY_ASYNC 任务，与其他卡次数相同）共耗时 "
        f"{ms(mine.us_per_step)}，其他卡为 {ms(theirs.us_per_step)}（同样的拷贝慢 {ratio:.1f} 倍）："
        "这张卡的 PCIe 链路传输更慢，而它的算子和网络链路都与其他卡一样"
    )
    a_en = (
        f"Check rank {rank}'s PCIe link: `lspci -vv` for its NPU, LnkSta (speed, width) against "
        "LnkCap; a link trained at a lower generation or width is fixed by re-seating the card or "
        "its riser, or moving the job off that card."
    )
    a_zh = (
        f"检查{rank}号卡的 PCIe 链路：对该 NPU 执行 `lspci -vv`，对比 LnkSta（速率、宽度）与 LnkCap；"
        "链路协商到更低代数或更窄宽度时，重新插拔该卡或其转接卡，或让作业避开这张卡。"
    )
    return en, zh, a_en, a_zh


def _churn_remedy(mem: MemoryChurn, rl: str, rl_zh: str) -> tuple[str, str]:
    """The action (English, Chinese) for a rank whose allocator releases its cache every step."""
    if mem.capped:
        return (
            f"Find what else holds {rl}'s device memory: `npu-smi info` lists the processes on "
            "that NPU (a process left over from an earlier job, another container given the same "
            "device); stop it or move the job to a free NPU, so its allocator can reserve what "
            "its peers do.",
            f"找出还有什么占用了{rl_zh}的显存：`npu-smi info` 会列出该 NPU 上的进程（上一个作业残留的进程、"
            "被分配了同一张卡的其他容器）；结束它或换一张空闲的 NPU，让分配器能预留与其他卡一样多的显存。",
        )
    if mem.fragmented:
        return (
            f"Stop the allocator's fragmentation on {rl}: PYTORCH_NPU_ALLOC_CONF="
            "expandable_segments:True (segments that grow instead of new blocks), or "
            "max_split_size_mb to keep large blocks whole; calling torch.npu.empty_cache() every "
            "step would make every step pay the release.",
            f"消除{rl_zh}上分配器的碎片化：设置 PYTORCH_NPU_ALLOC_CONF=expandable_segments:True（内存段可扩展，"
            "不再申请新块），或用 max_split_size_mb 保持大块不被切分；每步调用 torch.npu.empty_cache() "
            "只会让每一步都付出释放的代价。",
        )
    return (
        f"Stop the per-step cache releases on {rl}: no torch.npu.empty_cache() inside the step, "
        "and let the allocator keep its segments (PYTORCH_NPU_ALLOC_CONF=expandable_segments:True).",
        f"去掉{rl_zh}每步的缓存释放：训练步内不要调用 torch.npu.empty_cache()，并让分配器保留其内存段"
        "（PYTORCH_NPU_ALLOC_CONF=expandable_segments:True）。",
    )


def _slow_calls_text(calls: SlowCalls, gl: str, gl_zh: str) -> tuple[str, str, str, str]:
    """(clause, Chinese clause, action, Chinese action) for ranks whose launch calls are slow.

    The host spends far longer inside some launch calls than the same calls take elsewhere:
    something else runs on the training process's CPU cores. When most of those calls are made
    while the ranks' own collectives run, the network card's interrupts are the first suspect.
    """
    apis = ", ".join(a.removeprefix("AscendCL@") for a in calls.apis)
    apis_zh = "、".join(a.removeprefix("AscendCL@") for a in calls.apis)
    during = math.isfinite(calls.in_comm_share) and calls.in_comm_share >= 0.6
    en = (
        f": their host spends {ms(calls.median_us)} (median) in each of {calls.per_step:g} launch "
        f"calls per step ({apis}) that take {ms(calls.usual_us)} at other times and "
        f"{ms(calls.peer_us)} on the other ranks"
        + (
            f"; {pct(calls.in_comm_share)} of those calls are made while their collectives "
            "move data"
            if during
            else ""
        )
        + ": the training process loses its CPU inside these calls"
    )
    zh = (
        f"：其主机每步有 {calls.per_step:g} 次算子下发调用（{apis_zh}）每次耗时 {ms(calls.median_us)}"
        f"（中位数），同样的调用在其他时候只需 {ms(calls.usual_us)}，其他卡为 {ms(calls.peer_us)}"
        + (f"；其中 {pct(calls.in_comm_share)} 发生在它们的集合通信传输数据期间" if during else "")
        + "：训练进程在这些调用里被抢走了 CPU"
    )
    first = (
        "the network cards' interrupts (RoCE traffic is served on the cores CPU_AFFINITY_CONF "
        "binds the training processes to: check /proc/interrupts, move the NIC IRQs to other "
        "cores with the IRQ affinity settings or irqbalance exclusions), then "
        if during
        else ""
    )
    first_zh = (
        "网卡中断（RoCE 流量的中断落在 CPU_AFFINITY_CONF 为训练进程绑定的核上：查看 /proc/interrupts，"
        "用中断亲和性设置或 irqbalance 排除把网卡中断移到其他核），然后是"
        if during
        else ""
    )
    a = (
        f"Give the training processes of {gl} their CPU cores back: find what else runs on those "
        f"cores — {first}other processes on them (top -H, pidstat) and the CPU binding itself."
    )
    a_zh = (
        f"把 CPU 核还给{gl_zh}的训练进程：找出还有什么在这些核上运行——{first_zh}这些核上的其他进程"
        "（top -H、pidstat）以及绑核设置本身。"
    )
    return en, zh, a, a_zh


def hccl_timeouts_s(ctx: Context) -> tuple[float, float, bool]:
    """(HCCL_CONNECT_TIMEOUT, HCCL_EXEC_TIMEOUT) in s, and whether they were read from the job.

    The smallest value any rank recorded in ``meta.env`` (``ENV_VARIABLES``), else the documented
    defaults (120 s, 1836 s; ``env_check``).
    """
    from advisor_chat.analyzers.env_check import (
        HCCL_CONNECT_TIMEOUT_DEFAULT_S,
        HCCL_EXEC_TIMEOUT_DEFAULT_S,
    )

    meta = ctx.profile.get("meta")
    got: dict[str, float] = {}
    if "env" in meta.columns:
        for env in meta["env"]:
            if not isinstance(env, dict):
                continue
            for k in ("HCCL_CONNECT_TIMEOUT", "HCCL_EXEC_TIMEOUT"):
                try:
                    v = float(str(env.get(k, "")).strip())
                except ValueError:
                    continue
                if v > 0:
                    got[k] = min(got.get(k, v), v)
    return (
        got.get("HCCL_CONNECT_TIMEOUT", HCCL_CONNECT_TIMEOUT_DEFAULT_S),
        got.get("HCCL_EXEC_TIMEOUT", HCCL_EXEC_TIMEOUT_DEFAULT_S),
        bool(got),
    )


def _late_event(
    ctx: Context, pairs: tuple[tuple[int, int], ...]
) -> tuple[str, str, dict[str, float]] | None:
    """The largest single late arrival among ``pairs`` and its distance from the HCCL timeouts.

    From the wait attribution's events (one collective instance costing ≥ 2 steps and ≥ 0.5 s):
    the step, the culprit, the collective, how many ranks waited and the longest wait, as a share
    of HCCL_EXEC_TIMEOUT (and of HCCL_CONNECT_TIMEOUT when it is the first collective captured,
    where communicators are still being set up). ``None`` when no such event matches; else the
    English and Chinese clauses and the metrics ``late_arrival_max_wait_us``,
    ``hccl_exec_timeout_s`` and ``hccl_exec_timeout_share`` (longest wait / HCCL_EXEC_TIMEOUT).
    """
    attr = ctx.attribution
    if attr is None or not attr.events:
        return None
    ev = next((e for e in attr.events if (e.step, e.culprit) in set(pairs)), None)
    if ev is None:
        return None
    conn, exe, from_job = hccl_timeouts_s(ctx)
    wait_s = ev.max_wait_us / 1e6

    def of_timeout(share: float) -> str:  # far below the timeout: two significant digits
        return pct(share) if share >= 0.001 else f"{share * 100:.2g}%"

    src = "as set for this job" if from_job else "default"
    src_zh = "本作业设置值" if from_job else "默认值"
    first = (
        ev.step == min(int(s) for s in ctx.frame["step"].unique()) if not ctx.frame.empty else False
    )
    conn_txt = (
        f", {of_timeout(wait_s / conn)} of HCCL_CONNECT_TIMEOUT ({conn:g} s, {src}) if this is where the "
        "communicator is set up"
        if first
        else ""
    )
    conn_zh = (
        f"，若此处是通信域建链，则为 HCCL_CONNECT_TIMEOUT（{conn:g} s，{src_zh}）的 {of_timeout(wait_s / conn)}"
        if first
        else ""
    )
    en = (
        f"at {ev.op_name} in step {ev.step} rank {ev.culprit} arrived {ms(ev.cost_us)} after the "
        f"others and {_n_wait(len(ev.victims), past=True)} up to {wait_s:.1f} s for it: "
        f"{of_timeout(wait_s / exe)} of HCCL_EXEC_TIMEOUT ({exe:g} s, {src}){conn_txt}"
    )
    zh = (
        f"第 {ev.step} 步的 {ev.op_name} 中，{ev.culprit}号卡比其他卡晚到 {ms(ev.cost_us)}，"
        f"{len(ev.victims)} 张卡最长等待 {wait_s:.1f} s：为 HCCL_EXEC_TIMEOUT（{exe:g} s，{src_zh}）的 "
        f"{of_timeout(wait_s / exe)}{conn_zh}"
    )
    return (
        en,
        zh,
        {
            "late_arrival_max_wait_us": float(ev.max_wait_us),
            "hccl_exec_timeout_s": float(exe),
            "hccl_exec_timeout_share": wait_s / exe,
        },
    )


#: A single host pause longer than this is not a garbage-collection pause (µs).
GC_PAUSE_MAX_US = 2_000_000.0


#: One rank late in at least this many consecutive steps is that rank's cause (scoped to them).
RUN_MIN_STEPS = 3


def _events_cause(ctx: Context, events: list[Event], n_steps: int) -> RootCause:
    """STEP_EVENTS: one-step stalls on rotating ranks, kept as (step, rank) events."""
    events = sorted(events, key=lambda e: (e.step, e.rank))
    pairs = tuple((e.step, e.rank) for e in events)
    ranks = tuple(sorted({e.rank for e in events}))
    steps = tuple(sorted({e.step for e in events}))
    culprits = set(ranks)
    # victims: in each event step, everybody else waits for the stalled rank
    # (a stalled rank is itself a victim of the other ranks' stalls in the other steps)
    victims = wait_victims(ctx, events, set(), n_steps)
    per_event = float(np.mean([e.excess_us for e in events]))
    # the spread of the events, when they differ: the shortest and the longest
    lo, hi = min(e.excess_us for e in events), max(e.excess_us for e in events)
    spread = len(events) > 1 and ms(lo) != ms(hi)
    span_en = f" ({ms(lo)} to {ms(hi)})" if spread else ""
    span_zh = f"（{ms(lo)} 到 {ms(hi)}）" if spread else ""
    per_step = sum(e.excess_us for e in events) / max(n_steps, 1)
    host = sum(e.free_excess_us for e in events) >= sum(e.computing_excess_us for e in events)
    where, where_zh = host_timeline(ctx, list(ranks))
    f = ctx.frame
    clean = f[~f["step"].isin(steps)]
    clean_step = (
        float(clean.groupby("step")["step_us"].median().median())
        if not clean.empty
        else float("nan")
    )
    slow_step = float(f[f["step"].isin(steps)].groupby("step")["step_us"].median().median())
    pair_txt = ", ".join(f"({s}, {r})" for s, r in pairs[:12]) + (" ..." if len(pairs) > 12 else "")
    all_steps = sorted(int(x) for x in f["step"].unique())
    # one rank late in several steps: in which steps, and whether it stays slow from one step on
    onset = (
        len(ranks) == 1
        and len(steps) >= 2
        and list(steps) == all_steps[all_steps.index(steps[0]) :]
        and steps[0] != all_steps[0]
    )
    # slow from a step to the end: what each step costs from then on (its slow steps' median over
    # the clean steps') is what a fix gives back per step; the capture's average ranks the cause
    onset_cost = (
        slow_step - clean_step
        if onset and math.isfinite(clean_step) and slow_step > clean_step
        else math.nan
    )
    fix_us = onset_cost if math.isfinite(onset_cost) else per_step
    ex = (
        None
        if host
        else explain_device(
            device_account(ctx.profile, [(e.step, e.rank) for e in events], ctx.ranks),
            "the late rank of each step" if len(ranks) > 1 else f"rank {ranks[0]}",
            "每步较晚的卡" if len(ranks) > 1 else f"{ranks[0]}号卡",
            fix_us,
        )
    )
    steps_txt = ", ".join(str(x) for x in steps)
    kind = "host stalls (device Free)" if host else "compute spikes"
    kind_zh = "主机侧阻塞（设备空闲）" if host else "计算时间突增"
    most = len(steps) > n_steps / 2
    clean_txt = (
        f"; {len(steps)} of {n_steps} steps are hit (median {ms(slow_step)}), the clean steps run at "
        f"{ms(clean_step)}"
        if math.isfinite(clean_step)
        else f"; every one of the {n_steps} steps is hit"
    )
    clean_zh = (
        f"；{n_steps} 步中有 {len(steps)} 步受影响（中位数 {ms(slow_step)}），未受影响的步为 {ms(clean_step)}"
        if math.isfinite(clean_step)
        else f"；{n_steps} 步全部受影响"
    )
    findings = _claim(
        ctx,
        lambda x: (
            x.kind is FindingKind.JITTER
            or (x.kind is FindingKind.SLOW_RANK and bool(x.ranks) and set(x.ranks) <= culprits)
            or x.id.startswith("host_dispatch.host_bound.gc_pause")
            or x.id.startswith("env_check.env.first_collective_late")
            or (x.kind is FindingKind.BOTTLENECK and bool(x.ranks) and set(x.ranks) <= culprits)
            or (x.kind is FindingKind.HOST_BOUND and bool(x.ranks) and set(x.ranks) <= culprits)
        ),
    )
    # one rank stalling at a fixed step interval: periodic work only that rank does (a checkpoint
    # save most often; periodic evaluation or logging look the same)
    gaps = {b - a for a, b in itertools.pairwise(steps)}
    period = gaps.pop() if host and len(ranks) == 1 and len(steps) >= 2 and len(gaps) == 1 else 0
    period = period if period >= 2 and not onset else 0
    summary = (
        f"One-step {kind} of {ms(per_event)} on average{span_en} rotate across ranks: (step, rank) = "
        f"{pair_txt}{clean_txt}; no rank is slow on average"
        if len(ranks) > 1
        else (
            f"A one-step event: {kind} of {ms(per_event)} on rank {ranks[0]} at (step, rank) "
            if len(pairs) == 1
            else f"Rank {ranks[0]} stalls in {len(pairs)} steps: {kind} of {ms(per_event)} on "
            f"average{span_en} at (step, rank) "
        )
        + f"= {pair_txt}{clean_txt}; the other ranks wait for it there, and rank {ranks[0]} runs "
        "normally in the other steps"
    ) + (" (most steps are slow)." if most else ".")
    summary_zh = (
        f"单步{kind_zh}在不同卡之间轮换出现，平均每次 {ms(per_event)}{span_zh}：（步, 卡）= {pair_txt}"
        f"{clean_zh}；平均来看没有哪张卡是慢卡"
        if len(ranks) > 1
        else (
            f"单步事件：{ranks[0]}号卡出现一次{kind_zh}，时长 {ms(per_event)}，（步, 卡）= "
            if len(pairs) == 1
            else f"{ranks[0]}号卡在 {len(pairs)} 步中停顿：{kind_zh}，平均每次 {ms(per_event)}{span_zh}，（步, 卡）= "
        )
        + f"{pair_txt}{clean_zh}；其他卡都在等它，{ranks[0]}号卡在其他步运行正常"
    ) + ("（大多数步都变慢了）。" if most else "。")
    if period:
        summary = (
            f"Rank {ranks[0]} stalls every {period} steps: {kind} of {ms(per_event)} at (step, "
            f"rank) = {pair_txt}{clean_txt}; the other ranks wait for it there, and it runs "
            "normally in the other steps. A stall on one rank at a fixed step interval is periodic "
            "work only that rank does: a checkpoint save most often (or periodic evaluation or "
            "logging)."
        )
        summary_zh = (
            f"{ranks[0]}号卡每 {period} 步停顿一次：{kind_zh}，每次 {ms(per_event)}，（步, 卡）= "
            f"{pair_txt}{clean_zh}；其他卡都在等它，{ranks[0]}号卡在其他步运行正常。只在一张卡上、"
            "按固定步数间隔出现的停顿，是只有这张卡做的周期性工作：最常见的是保存检查点（也可能是周期性"
            "评估或日志）。"
        )
    # long host gaps without launches look like garbage collection only when they recur or are
    # short; a single pause of seconds is one-off host work (checkpoint, evaluation, data)
    # (a stall before the step's first task is the wait for its input, not a GC pause)
    # (several stalls: one alone before a step is as likely a checkpoint save between steps)
    at_start = _at_step_start(ctx, events) if host and len(pairs) >= 2 else 0.0
    gc_seen = (
        any(set(f.ranks) & culprits for f in ctx.finding("host_dispatch.host_bound.gc_pause"))
        and (len(pairs) > 1 or per_event < GC_PAUSE_MAX_US)
        and not at_start
    )
    periodic = Remedy(
        "action",
        f"Take the work rank {ranks[0]} does every {period} steps off the training step: save "
        "checkpoints asynchronously (copy the state to host memory, write it in a background "
        "thread or process), shard the save across ranks, or save less often.",
        f"把{ranks[0]}号卡每 {period} 步做一次的工作移出训练步：异步保存检查点（先把状态拷到主机内存，"
        "再由后台线程或进程写盘）、把保存分摊到各卡，或降低保存频率。",
        per_step,
        BoundKind.ESTIMATE,
    )
    # (garbage collection runs on every rank alike: a stall on one rank alone at a fixed
    # interval is that rank's own periodic work even when its host gaps look like GC pauses)
    first = (
        periodic
        if period
        else Remedy(
            "action",
            "Stop the Python garbage-collection pauses the host data shows: call gc.freeze() "
            "after model setup and gc.collect() at fixed step intervals (or gc.disable() during "
            "steps).",
            "消除主机数据中可见的 Python 垃圾回收停顿：模型初始化后调用 gc.freeze()，并按固定步数间隔调用 "
            "gc.collect()（或在训练步内 gc.disable()）。",
            per_step,
            BoundKind.ESTIMATE,
        )
        if host and gc_seen
        else Remedy(
            "action",
            f"Take the one-off host work out of the training step on rank {ranks[0]} in step "
            f"{steps[0]} (a checkpoint save, an evaluation, a blocking data load or log flush "
            "that only this rank does): make it asynchronous, or do it on every rank at the same "
            "step so nobody waits.",
            f"把{ranks[0]}号卡在第 {steps[0]} 步做的一次性主机工作移出训练步（保存检查点、评估、阻塞式数据"
            "加载或日志落盘等只有该卡做的事）：改为异步，或让所有卡在同一步一起做，避免其他卡等待。",
            per_step,
            BoundKind.ESTIMATE,
        )
        if host and len(pairs) == 1
        else Remedy(
            "action",
            ROTATING_HOST_ACTION,
            "找出每个受影响步落在不同卡上的主机工作（Python 垃圾回收、周期性日志、检查点分片、数据加载），"
            "并移出训练步：若是垃圾回收，初始化后调用 gc.freeze()，并按固定步数间隔调用 gc.collect()。",
            per_step,
            BoundKind.ESTIMATE,
        )
        if host
        else Remedy(
            "check",
            "Look at the operators of the listed (step, rank) pairs for dynamic shapes or "
            "recompilation.",
            "检查所列（步, 卡）中的算子是否有动态 shape 或重新编译。",
        )
    )
    extra_tags: tuple[str, ...] = ()
    if host and len(ranks) == 1 and not period:
        r0 = ranks[0]
        if onset:  # stalled in every step from one on: not a one-step event
            summary = (
                f"Rank {r0} stalls on the host from step {steps[0]} on (the last {len(steps)} of "
                f"{n_steps} steps): its device idles (Free) {ms(per_event)} per step more than its "
                f"peers{clean_txt}; the other ranks wait for it in those steps, and it stays slow "
                "to the end of the capture."
            )
            summary_zh = (
                f"{r0}号卡从第 {steps[0]} 步起（共 {n_steps} 步中的最后 {len(steps)} 步）主机侧阻塞：其设备空闲"
                f"时间（Free）每步比其他卡多 {ms(per_event)}{clean_zh}；这些步里其他卡都在等它，且直到采集结束"
                "都没有恢复。"
            )
        # what its host does there: its caching allocator going to the device
        mem = memory_churn(ctx.profile, [r0], [r for r in ctx.peers(r0) if r != r0])
        if mem is not None:
            m_en, m_zh = _churn_text(mem)
            summary = summary.rstrip(".") + m_en + "."
            summary_zh = summary_zh.rstrip("。") + m_zh + "。"
            a_en, a_zh = _churn_remedy(mem, f"rank {r0}", f"{r0}号卡")
            first = Remedy("action", a_en, a_zh, fix_us, BoundKind.ESTIMATE)
            extra_tags = ("memory_fragmentation",) if mem.fragmented else ("host_bound",)
    # what the host's Python thread runs in the stalls (with_stack frames), when nothing else
    # (the allocator) already names it
    py = (
        _python_clause(ctx, pairs, ranks, per_event)
        if host and not extra_tags and not gc_seen
        else None
    )
    if py is not None:
        summary = summary.rstrip(".") + py[0] + "."
        summary_zh = summary_zh.rstrip("。") + py[1] + "。"
        first = Remedy("action", py[2], py[3], fix_us, BoundKind.ESTIMATE)
        extra_tags = py[5]
    # the host runs the same frame much slower there than on the ranks never stalled: the
    # host itself is slower at that work (its memory, when the frame moves memory)
    calm = [r for r in ctx.ranks if r not in set(ranks)]
    sf = (
        slower_frame(ctx.profile, ranks, calm)
        if host and py is None and not extra_tags and not gc_seen and calm
        else None
    )
    if sf is not None:
        s_en, s_zh, a_en, a_zh = _slower_frame_text(sf, ranks)
        summary = summary.rstrip(".") + s_en + "."
        summary_zh = summary_zh.rstrip("。") + s_zh + "。"
        first = Remedy("action", a_en, a_zh, fix_us, BoundKind.ESTIMATE)
        extra_tags = ("host_bound",)
    if py is None and at_start and not period and not extra_tags:
        # the stall is the gap before the step's first task: the step waits for its input
        summary = (
            summary.rstrip(".")
            + (
                f"; {pct(at_start)} of the stalls' idle sits before the first task of their steps "
                "(kernel_details.csv), where a step waits for its input: the data loader did not "
                "deliver the batch in time"
            )
            + "."
        )
        summary_zh = (
            summary_zh.rstrip("。")
            + (
                f"；这些停顿的空闲中有 {pct(at_start)} 位于所在步的第一个任务之前（kernel_details.csv），"
                "即每步等待输入数据的位置：数据加载（DataLoader）没有及时送来 batch"
            )
            + "。"
        )
        first = Remedy(
            "action",
            "Keep the data loader ahead of these steps: look for workers that died or were "
            "restarted there (the DataLoader's worker errors, out-of-memory kills in dmesg), use "
            "persistent_workers=True with enough num_workers and prefetch_factor, and read the "
            "input from fast local storage.",
            "让数据加载在这些步之前准备好：检查这些步里是否有 DataLoader worker 退出或被重启（worker 报错、"
            "dmesg 中的 OOM 终止），使用 persistent_workers=True 并配置足够的 `num_workers` 和 "
            "prefetch_factor，输入数据放在本地高速存储上。",
            fix_us,
            BoundKind.ESTIMATE,
        )
        extra_tags = ("dataloader_stall",)
    # nothing of its own runs there, but the host's own calls crawl: the host is slowed
    slow = (
        _slow_host_clause(ctx, ranks[0], steps, per_event)
        if host and len(ranks) == 1 and not period and not extra_tags and py is None
        else None
    )
    if slow is not None:
        summary = summary.rstrip(".") + slow[0] + "."
        summary_zh = summary_zh.rstrip("。") + slow[1] + "。"
        first = Remedy("action", slow[2], slow[3], fix_us, BoundKind.ESTIMATE)
        extra_tags = ("host_bound",)
    hung = _late_event(ctx, pairs)
    if hung is not None:
        summary = summary.rstrip(".") + "; " + hung[0] + "."
        summary_zh = summary_zh.rstrip("。") + "；" + hung[1] + "。"
    if ex is not None and len(ranks) > 1:
        summary = (
            f"The slowest rank changes from step to step because its work does: in each (step, "
            f"rank) = {pair_txt} {ex.clause}{clean_txt}; no rank is slow on average, the others "
            "wait for the late one in each step."
        )
        summary_zh = (
            f"每步最慢的卡都不同，因为各卡每步的计算量不同：在（步, 卡）= {pair_txt} 中，{ex.clause_zh}"
            f"{clean_zh}；平均来看没有哪张卡是慢卡，其他卡在每步等待最晚的那张。"
        )
        first = ex.remedy
    elif ex is not None:
        r0 = ranks[0]
        slower = ex.kind in ("uniform", "engine", "slower")
        verb, verb_zh = ("is slower", "变慢") if slower else ("computes more", "计算更多")
        when = (
            f"from step {steps[0]} on (the last {len(steps)} of {n_steps} steps)"
            if onset
            else f"in step{'s' if len(steps) > 1 else ''} {steps_txt} only"
        )
        when_zh = (
            f"从第 {steps[0]} 步起（共 {n_steps} 步中的最后 {len(steps)} 步）"
            if onset
            else f"仅在第 {steps_txt} 步"
        )
        summary = (
            f"Rank {r0} {verb} {when}: {ex.clause}{clean_txt}; the other ranks wait for it in "
            f"those steps{', and it stays slow to the end of the capture' if onset else ''}."
        )
        summary_zh = (
            f"{r0}号卡{when_zh}{verb_zh}：{ex.clause_zh}{clean_zh}；这些步里其他卡都在等它"
            f"{'，且直到采集结束都没有恢复' if onset else ''}。"
        )
        first = ex.remedy
    # one rank slow from a step to the end of the capture is a straggler since that step (an
    # onset: throttling, a degraded device, a leak that saturates), not a series of events
    # one rank late in a run of consecutive steps (at least RUN_MIN_STEPS, e.g. its host slowed
    # for a while) is that rank's cause too
    run = (
        len(ranks) == 1
        and len(steps) >= RUN_MIN_STEPS
        and list(steps) == list(range(steps[0], steps[-1] + 1))
    )
    own = onset or bool(period) or run
    return RootCause(
        id=(
            f"cause.{'host_stall' if host else 'compute_straggler'}.r{ranks[0]}"
            if own
            else "cause.step_events"
        ),
        # one rank late from a step on (an onset), at a fixed interval (periodic work of that
        # rank) or in a run of steps is that rank's cause, scoped to its steps; otherwise events
        mechanism=(
            (Mechanism.HOST_STALL if host else Mechanism.COMPUTE_STRAGGLER)
            if own
            else Mechanism.STEP_EVENTS
        ),
        category=Category.SCHEDULING if host else Category.COMPUTE,
        culprit=Culprit(
            kind="rank" if own else "steps",
            ranks=ranks,
            events=pairs,
            label=_events_label(pairs, ranks, steps)[0]
            if len(ranks) > 1
            else f"rank {ranks[0]}"
            if onset
            else f"rank {ranks[0]} (every {period} steps, in steps {steps_txt})"
            if period
            else f"rank {ranks[0]} in steps {steps_txt}"
            if len(pairs) > 1
            else f"step {pairs[0][0]} on rank {pairs[0][1]}",
            label_zh=_events_label(pairs, ranks, steps)[1]
            if len(ranks) > 1
            else f"{ranks[0]}号卡"
            if onset
            else f"{ranks[0]}号卡（每 {period} 步一次，第 {steps_txt} 步）"
            if period
            else f"第 {steps_txt} 步的{ranks[0]}号卡"
            if len(pairs) > 1
            else f"第 {pairs[0][0]} 步的{pairs[0][1]}号卡",
        ),
        victims=victims,
        summary=summary,
        summary_zh=summary_zh,
        metrics={
            "event_excess_us_mean": per_event,
            "events_count": float(len(pairs)),
            "steps_hit_count": float(len(steps)),
            "clean_step_us": clean_step,
            "hit_step_us": slow_step,
            "explained_us_per_step": per_step,
            **(hung[2] if hung is not None else {}),
            **(ex.metrics if ex is not None else {}),
            **({"onset_step": float(steps[0])} if onset else {}),
            # what each step costs from the onset on (hit steps' median over the clean steps'):
            # the rank stays slow, so this is what fixing it saves per step from then on
            **(
                {
                    "onset_cost_per_step_us": onset_cost,
                    "onset_cost_share": onset_cost / slow_step,
                }
                if math.isfinite(onset_cost)
                else {}
            ),
            **({"period_steps": float(period)} if period else {}),
            **(py[4] if py is not None else {}),
        },
        findings=findings,
        steps=steps,
        gain_us=per_step,
        bound=BoundKind.ESTIMATE,
        remedies=(
            first,
            # the host timeline only where the host is behind (a device explanation has its own)
            *(
                ()
                if ex is not None
                else (
                    Remedy(
                        "check",
                        f"Open the host timeline ({where}) of the listed (step, rank) pairs and "
                        "look at what the host does during the stall (long gaps with no "
                        "launches, GC-like pauses, file or checkpoint writes).",
                        f"打开所列（步, 卡）的主机时间线（{where_zh}），查看阻塞期间主机在做什么"
                        "（没有下发的长间隙、类似垃圾回收的停顿、写文件或保存检查点）。",
                    ),
                )
            ),
        ),
        symptom_tags=(*extra_tags, "step_jitter")
        if extra_tags
        else ("step_jitter", "first_collective_late", "hccl_timeout_risk")
        if hung is not None
        else ("step_jitter", "gc_pause")
        if host and gc_seen
        else ("step_jitter", "host_bound")
        if host
        else ("step_jitter", *(ex.tags if ex is not None else ())),
        severity=_severity(per_step, ctx.step_us),
        own=tuple(
            Impact(
                r,
                sum(e.excess_us for e in events if e.rank == r) / max(n_steps, 1),
                share_of(
                    sum(e.excess_us for e in events if e.rank == r) / max(n_steps, 1),
                    ctx.val(r, "step_us"),
                ),
                "own_time",
            )
            for r in ranks
        ),
    )


#: A launch call this many times the peers' median call, and at least ``SLOW_CALL_MIN_US``, is
#: the host itself stalling (not the work it launches).
SLOW_CALL_RATIO = 50.0
SLOW_CALL_MIN_US = 1000.0
#: ... when such calls add up to at least this share of the stall.
SLOW_CALLS_SHARE = 0.3
_COPY_OR_WAIT_API = re.compile(r"memcpy|synchroni[sz]e", re.I)


def _slow_host_clause(
    ctx: Context, rank: int, steps: tuple[int, ...], per_event_us: float
) -> tuple[str, str, str, str] | None:
    """The rank's own host calls crawl in its stalled steps: its host is slowed down.

    From ``host_dispatch`` (trace_view.json / DB CANN API calls): the rank's launch calls (not
    copies or synchronizes, which wait by design) in ``steps`` against a sample of its peers'.
    Named when its longest call is at least ``SLOW_CALL_RATIO`` x the peers' median call and
    ``SLOW_CALL_MIN_US``, and its calls of at least ``SLOW_CALL_MIN_US`` add up to
    ``SLOW_CALLS_SHARE`` of the stall per step. The rank's idle per step over every step (Free
    above its peers' median, ``step_trace``) says whether it rose and fell back (a transient
    slowdown of that host). Returns (clause, clause_zh, action, action_zh) or ``None``.
    """
    peers = [r for r in ctx.peers(rank) if r != rank]
    sample = [rank, *spread_sample(sorted(peers), PEER_SAMPLE)] if peers else [rank]
    hd = ctx.profile.host_dispatch_for(sample)
    if hd.empty or "api_duration_us" not in hd:
        return None
    hd = hd[~hd["api_name"].astype(str).str.contains(_COPY_OR_WAIT_API)]
    dur = pd.to_numeric(hd["api_duration_us"], errors="coerce")
    mine = dur[(hd["rank"] == rank) & hd["step"].isin(list(steps))].dropna()
    theirs = dur[hd["rank"] != rank].dropna()
    if mine.empty or theirs.empty:
        return None
    longest, med = float(mine.max()), float(theirs.median())
    long_sum = float(mine[mine >= SLOW_CALL_MIN_US].sum()) / max(len(steps), 1)
    if (
        longest < SLOW_CALL_MIN_US
        or longest < SLOW_CALL_RATIO * med
        or long_sum < SLOW_CALLS_SHARE * per_event_us
    ):
        return None
    en = (
        f"; in those steps its host's own launch calls crawl (up to {ms(longest)} for one call, "
        f"against {ms(med)} on its peers; trace_view.json CANN API durations): the host process "
        "itself is slowed down — memory pressure (swapping, page faults), another process on "
        "its CPUs, or throttled CPUs"
    )
    zh = (
        f"；这些步里其主机自己的下发调用变得极慢（单次最长 {ms(longest)}，其他卡为 {ms(med)}；"
        "trace_view.json 中 CANN API 的耗时）：是主机进程本身被拖慢了——内存压力（换页到交换分区、缺页）、"
        "其 CPU 上有其他进程，或 CPU 被降频"
    )
    f = ctx.frame
    if {"rank", "step", "free_us"} <= set(f.columns):
        own = f[f["rank"] == rank].set_index("step")["free_us"].sort_index()
        peer = f[f["rank"] != rank].groupby("step")["free_us"].median()
        ex = (own - peer.reindex(own.index)).dropna()
        if len(ex) >= 4:
            k = int(np.argmax(ex.to_numpy()))
            peak = float(ex.iloc[k])
            lo = min(float(ex.iloc[0]), float(ex.iloc[-1]))
            if 0 < k < len(ex) - 1 and peak >= 3 * max(lo, 1.0):
                s0, sp, sn = int(ex.index[0]), int(ex.index[k]), int(ex.index[-1])
                en += (
                    f"; its idle over its peers' grows from {ms(float(ex.iloc[0]))} in step {s0} "
                    f"to {ms(peak)} in step {sp} and falls back to {ms(float(ex.iloc[-1]))} in "
                    f"step {sn}: a transient slowdown of that host, not work done every step"
                )
                zh += (
                    f"；其空闲（相对其他卡）先增后减：第 {s0} 步 {ms(float(ex.iloc[0]))}，第 {sp} 步升到 "
                    f"{ms(peak)}，第 {sn} 步回落到 {ms(float(ex.iloc[-1]))}：是该主机一时变慢，不是每步都做的工作"
                )
    a_en = (
        f"Check rank {rank}'s host while the job runs: its memory (free -m, and vmstat's si / so "
        "columns for swapping), other processes on its CPUs (top), its CPU frequency governor; "
        "keep the job out of swap (fewer DataLoader workers or a smaller prefetch on that host, "
        "other jobs moved off it, vm.swappiness=0)."
    )
    a_zh = (
        f"在作业运行时检查{rank}号卡所在主机：内存（`free -m`，以及 `vmstat` 的 si / so 列看是否在换页）、其 CPU "
        "上的其他进程（`top`）、CPU 调频策略；避免作业用到交换分区（该主机上减少 DataLoader worker 或预取量、把"
        "其他作业挪走、`vm.swappiness=0`）。"
    )
    return en, zh, a_en, a_zh


def _slower_frame_text(sf: SlowerFrame, ranks: Sequence[int]) -> tuple[str, str, str, str]:
    """Clause (en, zh) and first change (en, zh) for a host frame slower on the stalled ranks.

    From :func:`~advisor_chat.diagnosis.python_work.slower_frame` (trace_view.json frames).
    """
    rl, rl_zh = ranks_label(list(ranks))
    en = (
        f"; in those stalls their hosts run `{sf.frame}`, which takes {ms(sf.us_min)} to "
        f"{ms(sf.us_max)} there (median {ms(sf.us)}) against {ms(sf.us_peer)} on the other ranks "
        f"({sf.ratio:.1f}x, the same work; trace_view.json): the host itself is slower at it"
    )
    zh = (
        f"；这些停顿里它们的主机在执行 `{sf.frame}`，在那里耗时 {ms(sf.us_min)} 到 {ms(sf.us_max)}"
        f"（中位数 {ms(sf.us)}），其他卡为 {ms(sf.us_peer)}（{sf.ratio:.1f} 倍，相同的工作；trace_view.json）："
        "是主机本身做这件事更慢"
    )
    if sf.memory:
        en += (
            ", by an amount that varies from step to step: host memory that the kernel stalls "
            "to make (transparent huge page compaction, page faults) or reaches across NUMA nodes"
        )
        zh += "，而且每步慢得不一样：主机内存分配被内核卡住（透明大页整理、缺页）或跨 NUMA 访问"
        a = (
            f"Fix the host memory of {rl}: set transparent huge pages' defrag to madvise or never "
            "(/sys/kernel/mm/transparent_hugepage/defrag; compact_stall in /proc/vmstat counts "
            f"the stalls), bind each rank's memory to its NUMA node (numactl --membind), and "
            f"check free memory and swap there; `{sf.frame}` should then take about "
            f"{ms(sf.us_peer)} as on the other ranks."
        )
        a_zh = (
            f"修复{rl_zh}所在主机的内存问题：把透明大页的 defrag 设为 madvise 或 never"
            "（/sys/kernel/mm/transparent_hugepage/defrag；/proc/vmstat 中的 compact_stall 统计这类停顿），"
            "把每个 rank 的内存绑定到它的 NUMA 节点（numactl --membind），并检查那里的空闲内存和 swap；"
            f"之后 `{sf.frame}` 应当和其他卡一样约 {ms(sf.us_peer)}。"
        )
    else:
        a = (
            f"Find why the host of {rl} runs `{sf.frame}` slower than the other ranks' (CPU "
            "frequency governor, CPU binding and other processes on it), or take that work off "
            "the training step."
        )
        a_zh = (
            f"查明{rl_zh}的主机为何执行 `{sf.frame}` 比其他卡慢（CPU 调频策略、绑核、其上的其他进程），"
            "或把这部分工作移出训练步。"
        )
    return en, zh, a, a_zh


def _python_clause(
    ctx: Context,
    pairs: tuple[tuple[int, int], ...],
    ranks: tuple[int, ...],
    per_event_us: float,
) -> tuple[str, str, str, str, dict[str, float], tuple[str, ...]] | None:
    """What the host's Python thread runs in the stalled ``pairs``, from with_stack frames.

    Returns (clause, clause_zh, action, action_zh, metrics, tags), or ``None`` without frames that
    explain the stalls.

    The frame (:func:`~advisor_chat.diagnosis.python_work.python_work`) must run in at least half
    of the stalled pairs for at least a third of the stall, and in at most a quarter of the other
    (step, rank) pairs read: work that runs in every step is not what makes these steps slow.
    """
    pw = python_work(ctx.profile, pairs, ctx.ranks, min_us=per_event_us / 3)
    if pw is None or 2 * len(pw.pairs) < pw.of_pairs or 4 * pw.other_hits > pw.other_pairs:
        return None
    where = f"rank {ranks[0]}" if len(ranks) == 1 else "the stalled ranks"
    where_zh = f"{ranks[0]}号卡" if len(ranks) == 1 else "停顿的卡"
    outer = short_frame(pw.callers[0]) if pw.callers else ""
    called = f", called from `{outer}`" if outer else ""
    called_zh = f"，由 `{outer}` 调用" if outer else ""
    kind = frame_kind(pw)
    what = FRAME_WHAT.get(kind, FRAME_WHAT["python"])
    n_in = (
        f"in each of the {pw.of_pairs} stalled (step, rank) pairs"
        if len(pw.pairs) == pw.of_pairs
        else f"in {len(pw.pairs)} of the {pw.of_pairs} stalled (step, rank) pairs"
    )
    op = HOST_OPERATOR.match(pw.frame) is not None
    src = "trace_view.json cpu_op" if op else "Python frames, trace_view.json with_stack"
    src_zh = "trace_view.json 的 cpu_op" if op else "Python 调用栈，trace_view.json with_stack"
    en = (
        f"; {n_in} the host's Python thread is inside `{pw.function}` ({ms(pw.us)} per step"
        f"{called}) and issues nothing to the device: "
        f"{what[0]} ({src}; in {pw.other_hits} of {pw.other_pairs} other (step, rank) pairs)"
    )
    zh = (
        f"；{'在每个停顿的（步, 卡）中' if len(pw.pairs) == pw.of_pairs else f'{pw.of_pairs} 个停顿的（步, 卡）中有 {len(pw.pairs)} 个，'}"
        f"主机的 Python 线程都在 `{pw.function}` 中（每步 "
        f"{ms(pw.us)}{called_zh}），期间不向设备下发任何任务：{what[1]}（{src_zh}；其他 "
        f"{pw.other_pairs} 个（步, 卡）中出现 {pw.other_hits} 次）"
    )
    a_en, a_zh = frame_remedy(pw, where, where_zh)
    metrics = {
        "python_frame_us": pw.us,
        "python_frame_stalls": float(len(pw.pairs)),
        "python_frame_other_pairs_hit": float(pw.other_hits),
        **({"host_collective": 1.0} if kind == "host_collective" else {}),
    }
    tag = {"tokenize": "dataloader_stall", "data": "dataloader_stall"}.get(kind, "python_work")
    return en, zh, a_en, a_zh, metrics, (tag,)


def _events_label(
    pairs: tuple[tuple[int, int], ...], ranks: tuple[int, ...], steps: tuple[int, ...]
) -> tuple[str, str]:
    """Label of one-step events on several ranks that names where they are (English, Chinese).

    Up to 6 events: their (step, rank) pairs; more: the ranks and the steps they hit.
    """
    if len(pairs) <= 6:
        at = ", ".join(f"({s}, {r})" for s, r in pairs)
        return (
            f"the one-step stalls at (step, rank) = {at}",
            f"（步, 卡）= {at} 的单步停顿",
        )
    rl, rl_zh = ranks_label(list(ranks))
    st = ", ".join(str(s) for s in steps)
    return (
        f"{len(pairs)} one-step stalls on {rl} in steps {st}",
        f"{rl_zh}在第 {st} 步的 {len(pairs)} 次单步停顿",
    )
