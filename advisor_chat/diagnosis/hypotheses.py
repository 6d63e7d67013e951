"""Users' hypotheses tested against the diagnosis: supported, contradicted, or not decidable.

"Could it be GC?", "is it the hardware?", "should I switch ZeRO-3 to ZeRO-2?": each hypothesis is
checked against the same account the diagnosis gives (its causes, their culprits, evidence tags
and metrics, and the findings), never against the question's words. A verdict carries the
measured evidence for and against it and, when the data cannot decide, what to collect.

:func:`judge` is a pure function of a :class:`~advisor_chat.diagnosis.types.Diagnosis`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from advisor_chat.diagnosis.rules.stragglers import GC_PAUSE_MAX_US
from advisor_chat.diagnosis.text import lower_first, ms, pct
from advisor_chat.diagnosis.types import Diagnosis, Mechanism, RootCause

Status = Literal["supported", "contradicted", "undecided"]

#: The hypotheses a question can name (``Query.hypothesis``).
HYPOTHESES = (
    "gc",
    "dataloader",
    "network",
    "link",
    "card",
    "hardware",
    "kernel_slow",
    "compute_straggler",
    "load_imbalance",
    "checkpoint",
    "zero_stage",
    "tp_size",
    "mc2",
    "hccl_timeout",
    "memory",
    "fragmentation",
    "host_dispatch",
    "software_bug",
    "capacity",
    "profiler",
    "host_sync",
    "aicpu",
    "throttling",
    "memory_bandwidth",
    "device_shared",
    "version",
    "graph_break",
)

#: How each hypothesis is named in an answer (English, Chinese).
NAMES = {
    "gc": ("Python garbage collection", "Python 垃圾回收"),
    "dataloader": ("the input pipeline (dataloader)", "数据加载（dataloader）"),
    "network": ("the network", "网络"),
    "link": ("a slow link", "慢链路"),
    "card": ("a bad card (NPU)", "某张卡（NPU）坏了"),
    "hardware": ("a hardware fault", "硬件故障"),
    "kernel_slow": ("the operators themselves (slower kernels)", "算子本身变慢"),
    "compute_straggler": ("a compute straggler", "计算慢卡"),
    "load_imbalance": ("load imbalance", "负载不均衡"),
    "checkpoint": ("checkpoint saving", "保存检查点"),
    "zero_stage": ("the ZeRO stage", "ZeRO 阶段"),
    "tp_size": ("the tensor-parallel size", "张量并行（TP）规模"),
    "mc2": ("missing mc2 fusion", "未开启 mc2 融合"),
    "hccl_timeout": ("an HCCL timeout risk", "HCCL 超时风险"),
    "memory": ("device memory", "显存"),
    "fragmentation": ("allocator fragmentation", "显存碎片"),
    "host_dispatch": ("host dispatch (a host-bound job)", "主机下发（下发瓶颈）"),
    "software_bug": (
        "a software bug (CANN, the framework or the profiler)",
        "软件缺陷（CANN、框架或 profiler）",
    ),
    "capacity": (
        "a shortage of NPU compute",
        "NPU 算力不足",
    ),
    "profiler": ("the profiler's own overhead (the capture)", "采集本身（profiler）的开销"),
    "host_sync": (
        "host synchronizations (tensor.item(), .cpu())",
        "主机同步（tensor.item()、.cpu()）",
    ),
    "aicpu": ("operators running on AI CPU", "算子跑在 AI CPU 上"),
    "throttling": (
        "a down-clocked device (heat or power throttling)",
        "设备降频（过热或功耗限制）",
    ),
    "memory_bandwidth": ("degraded device memory (HBM) bandwidth", "显存（HBM）带宽变差"),
    "device_shared": ("another process using the NPU", "其他进程占用该 NPU"),
    "version": (
        "mismatched software versions across ranks (CANN / torch_npu)",
        "各卡软件版本不一致（CANN / torch_npu）",
    ),
    "graph_break": ("graph breaks in the compiled model", "编译后的模型出现图中断（断图）"),
}


@dataclass(frozen=True)
class Verdict:
    """A hypothesis judged against the diagnosis.

    Attributes:
        hypothesis: One of :data:`HYPOTHESES`.
        status: ``supported``, ``contradicted`` or ``undecided``.
        reason: English sentence giving the measured evidence that decides (or why nothing does).
        reason_zh: Chinese sentence.
        causes: Ids of the causes the evidence comes from.
        collect: What to collect to decide (English), '' when decided.
        collect_zh: The same in Chinese.
    """

    hypothesis: str
    status: Status
    reason: str
    reason_zh: str
    causes: tuple[str, ...] = field(default_factory=tuple)
    collect: str = ""
    collect_zh: str = ""


_SPECIFIC_EXCLUDED = (
    Mechanism.NO_CULPRIT,
    Mechanism.NOT_ENOUGH_SIGNAL,
    Mechanism.DATA_ARTIFACT,
)


def _real(d: Diagnosis) -> list[RootCause]:
    return [c for c in d.causes if c.mechanism not in _SPECIFIC_EXCLUDED]


def _top(d: Diagnosis) -> RootCause | None:
    real = _real(d)
    return real[0] if real else None


def _tagged(d: Diagnosis, *tags: str) -> RootCause | None:
    return next((c for c in _real(d) if set(tags) & set(c.symptom_tags)), None)


def _mech(d: Diagnosis, *mechs: Mechanism) -> RootCause | None:
    return next((c for c in _real(d) if c.mechanism in mechs), None)


def _findings(d: Diagnosis, prefix: str) -> list[str]:
    return [f.id for f in d.findings if f.id.startswith(prefix)]


def _top_text(c: RootCause | None) -> tuple[str, str]:
    if c is None:
        return (
            "no cause stands out in this profile",
            "这份数据中没有突出的原因",
        )
    return (
        f"the time goes elsewhere — {lower_first(c.summary.rstrip('.'))}",
        f"时间损失在别处——{c.summary_zh.rstrip('。')}",
    )


def _v(
    h: str,
    status: Status,
    en: str,
    zh: str,
    causes: tuple[RootCause | None, ...] = (),
    collect: tuple[str, str] = ("", ""),
) -> Verdict:
    """A verdict citing ``causes``; ``collect`` (English, Chinese) says what would decide."""
    return Verdict(h, status, en, zh, tuple(c.id for c in causes if c is not None), *collect)


def _gc(d: Diagnosis) -> Verdict:
    gc_c = _tagged(d, "gc_pause")
    if gc_c is not None:
        return _v(
            "gc",
            "supported",
            f"the host data shows Python garbage-collection pauses where the device idles: "
            f"{gc_c.summary.rstrip('.')}",
            f"主机数据显示设备空闲时主机正在进行 Python 垃圾回收：{gc_c.summary_zh.rstrip('。')}",
            (gc_c,),
        )
    host = _mech(d, Mechanism.HOST_STALL, Mechanism.STEP_EVENTS, Mechanism.JOB_IDLE)
    if host is not None and "device_copies" in host.symptom_tags:
        # the "idle" device is busy copying: nothing waits for the host
        return _v(
            "gc",
            "contradicted",
            f"the device is not waiting for its host: {lower_first(host.summary.rstrip('.'))}",
            f"设备并不是在等主机：{host.summary_zh.rstrip('。')}",
            (host,),
        )
    if host is not None and "memory_fragmentation" in host.symptom_tags:
        # the host's stall is measured: its caching allocator going to the device
        return _v(
            "gc",
            "contradicted",
            f"the host's stall is its caching allocator, measured in the memory records: "
            f"{lower_first(host.summary.rstrip('.'))}",
            f"主机侧的阻塞来自其缓存分配器，内存记录中可以看到：{host.summary_zh.rstrip('。')}",
            (host,),
        )
    if host is not None and "python_frame_us" in host.metrics:
        # the host's Python frames cover the stalls: the thread runs code, it is not paused
        return _v(
            "gc",
            "contradicted",
            "the host is not paused in the stalls, its Python thread is running code there "
            f"(with_stack frames): {lower_first(host.summary.rstrip('.'))}",
            f"停顿期间主机并没有暂停，它的 Python 线程在执行代码（with_stack 调用栈）：{host.summary_zh.rstrip('。')}",
            (host,),
        )
    thr = host.metrics.get("gc_detect_threshold_ms") if host is not None else None
    if host is not None and thr is not None and not host.metrics.get("gc_pauses_in_affected_steps"):
        # the profiler records GC pauses (gc_detect_threshold) and recorded none where time goes
        return _v(
            "gc",
            "contradicted",
            f"the profiler records Python GC pauses longer than {thr:g} ms (gc_detect_threshold) "
            f"and recorded none in the slow steps; the host's time goes elsewhere: "
            f"{lower_first(host.summary.rstrip('.'))}",
            f"性能数据会记录超过 {thr:g} ms 的 Python GC 停顿（gc_detect_threshold），而变慢的步里一次都"
            f"没有记录到；主机的时间花在别处：{host.summary_zh.rstrip('。')}",
            (host,),
        )
    one_off = (
        host is not None
        and host.mechanism is Mechanism.STEP_EVENTS
        and host.metrics.get("events_count", 0.0) == 1.0
        and host.metrics.get("event_excess_us_mean", 0.0) >= GC_PAUSE_MAX_US
    )
    if host is not None and one_off:
        pause = host.metrics["event_excess_us_mean"] / 1e6
        return _v(
            "gc",
            "contradicted",
            f"the device does wait for its host, but once, for {pause:.1f} s in one step: a "
            "garbage-collection pause recurs and lasts well under two seconds; a single pause "
            f"this long is one-off host work (a checkpoint save, an evaluation): "
            f"{host.summary.rstrip('.')}",
            f"设备确实在等主机，但只有一次、在一步中持续 {pause:.1f} s：垃圾回收停顿会反复出现且远短于两秒，"
            f"这么长的单次停顿是一次性的主机工作（保存检查点、评估）：{host.summary_zh.rstrip('。')}",
            (host,),
        )
    if host is not None and host.category.value == "scheduling":
        # a job-wide idle is the devices idling (Free), not a measured wait for the host
        idle = host.mechanism is Mechanism.JOB_IDLE
        return _v(
            "gc",
            "undecided",
            (
                f"the devices idle ({host.summary[:1].lower()}{host.summary[1:].rstrip('.')}), "
                "but this profile does not show "
                "what the host does then"
                if idle
                else f"the device does idle waiting for its host ({host.summary.rstrip('.')}), "
                "but the host data does not show what the host does then"
            )
            + ", so garbage collection can be neither confirmed nor ruled out",
            (
                f"设备在空闲（{host.summary_zh.rstrip('。')}），但这份数据看不出主机此时在做什么，"
                if idle
                else f"设备确实在等主机（{host.summary_zh.rstrip('。')}），但主机数据没有显示主机此时在做什么，"
            )
            + "无法确认或排除垃圾回收",
            (host,),
            (
                "a profile with the profiler's GC recording on (torch_npu experimental_config "
                "gc_detect_threshold, e.g. 1 ms: every Python GC pause longer than that is "
                "recorded on the host timeline), or gc.callbacks logging pause lengths",
                "开启 GC 记录的性能数据（torch_npu experimental_config 的 gc_detect_threshold，例如 1 ms："
                "超过该时长的每次 Python GC 停顿都会记录在主机时间线上），或用 gc.callbacks 记录回收停顿时长",
            ),
        )
    en, zh = _top_text(_top(d))
    return _v(
        "gc",
        "contradicted",
        f"no rank's device waits on a pause of its host, which a garbage-collection pause "
        f"(every launch stopped for milliseconds at a time) would cause; {en}",
        f"没有哪张卡的设备在等待主机停顿，而垃圾回收停顿（所有下发一次停止数毫秒）会造成这种等待；{zh}",
        (_top(d),),
    )


#: What a slow RDMA link's bandwidth alone cannot tell apart (English, Chinese).
_RDMA_CAVEAT = (
    "the profile shows the bandwidth, not why: packet loss (retransmissions), congestion "
    "(PFC / ECN) or a port negotiated at a lower speed look the same, and the port's counters "
    "(hccn_tool) tell them apart",
    "性能数据只能看到带宽，看不到原因：丢包（重传）、拥塞（PFC / ECN）或端口协商到较低速率看起来都一样，"
    "需用 hccn_tool 查看端口计数来区分",
)


def _network(d: Diagnosis, h: str) -> Verdict:
    link = _mech(d, Mechanism.SLOW_LINK)
    if link is not None:
        rdma = "rdma_low_bandwidth" in link.symptom_tags
        return _v(
            h,
            "supported",
            link.summary.rstrip(".") + (f"; {_RDMA_CAVEAT[0]}" if rdma else ""),
            link.summary_zh.rstrip("。") + (f"；{_RDMA_CAVEAT[1]}" if rdma else ""),
            (link,),
        )
    top = _top(d)
    exposed = _mech(d, Mechanism.EXPOSED_COMMUNICATION)
    if d.missing_ranks:
        # the links of the ranks the folder lacks cannot be judged: no verdict on the network
        from advisor_chat.analyzers._common import format_ranks

        n, total = len(d.missing_ranks), len(d.missing_ranks) + len(d.ranks)
        which = format_ranks(list(d.missing_ranks))
        en, zh = _top_text(top)
        return Verdict(
            h,
            "undecided",
            f"no link among the {len(d.ranks)} ranks present is slower than its peers, but {n} of "
            f"the job's {total} ranks are not in this profile (ranks {which}) and their links "
            f"cannot be judged; among the ranks present, {en}",
            f"现有的 {len(d.ranks)} 张卡之间没有哪条链路比同类慢，但作业的 {total} 张卡中有 {n} 张不在"
            f"这份数据中（{which}号卡），它们的链路无法判断；在现有的卡中，{zh}",
            (top.id,) if top is not None else (),
            f"the profiles of the missing ranks ({which}), with communication.json and "
            "communication_matrix.json",
            f"缺失的卡（{which}号卡）的性能数据，含 communication.json 与 communication_matrix.json",
        )
    if not d.links_judged and (d.comm_data or _findings(d, "communication.")):
        # no link was compared with its peers: none can be blamed, and none cleared
        en, zh = _top_text(top)
        return Verdict(
            h,
            "undecided",
            "no link could be compared with its peers in this profile (no link table, or too few "
            f"links with comparable transfers), so the links can be neither blamed nor cleared; {en}",
            "这份数据中没有可与同类比较的链路（没有链路表，或可比较的链路太少），既不能判定链路有问题，"
            f"也不能排除；{zh}",
            (top.id,) if top is not None else (),
            "communication_matrix.json of every rank (profiler Level1 or higher) and, for the "
            "links themselves, hccn_tool link and error-counter checks",
            "每张卡的 communication_matrix.json（采集级别 Level1 及以上），以及用 hccn_tool 检查链路状态与错误计数",
        )
    if top is not None and top.mechanism is Mechanism.EXPOSED_COMMUNICATION:
        return _v(
            h,
            "contradicted",
            "communication does cost time, but no link is slower than its peers: it is "
            f"communication the computation does not hide, not a network fault ({top.summary.rstrip('.')})",
            f"通信确实耗时，但没有哪条链路比同类慢：是通信没有被计算掩盖，而不是网络故障（{top.summary_zh.rstrip('。')}）",
            (top,),
        )
    if not d.comm_data and not _findings(d, "slow_link.") and not _findings(d, "communication."):
        return Verdict(
            h,
            "undecided",
            "this profile has no communication data to judge the links with",
            "这份数据没有可用于判断链路的通信数据",
            (),
            "communication.json and communication_matrix.json (profiler level Level1 or higher)",
            "communication.json 与 communication_matrix.json（采集级别 Level1 及以上）",
        )
    en, zh = _top_text(top)
    more = (
        "; communication left exposed on every rank is a separate, job-level cost"
        if exposed
        else ""
    )
    more_zh = "；各卡未被掩盖的通信是另一个作业级开销" if exposed else ""
    late = any(v.how == "collective_wait" for c in _real(d) for v in c.victims)
    return _v(
        h,
        "contradicted",
        (
            "every link runs at the bandwidth of its peers and the ranks wait at the collectives "
            "for a late rank, not for transfers"
            if late
            else "every link runs at the bandwidth of its peers"
        )
        + f"; {en}{more}",
        (
            "所有链路的带宽与同类一致，各卡在集合通信中等的是晚到的卡，而不是数据传输"
            if late
            else "所有链路的带宽与同类一致"
        )
        + f"；{zh}{more_zh}",
        (top, exposed),
    )


def _slow_links(d: Diagnosis) -> RootCause | None:
    """The first cause blaming links of some ranks: a slow link, or a group whose links are slow.

    (A node whose HCCS links run at half their peers' bandwidth is a slower group by its
    mechanism, its ``slow_link`` tag says what is slow; the whole job's network is not.)
    """
    return next(
        (
            c
            for c in _real(d)
            if (c.mechanism is Mechanism.SLOW_LINK or "slow_link" in c.symptom_tags)
            and c.culprit.kind != "job"
        ),
        None,
    )


def _link_parts(link: RootCause) -> tuple[str, str]:
    """What a slow link is made of, to name in a verdict (English, Chinese).

    RDMA crosses NICs, optics and switch ports; HCCS / PCIe stay on the server board.
    """
    if "rdma_low_bandwidth" in link.symptom_tags:
        return "port, optical module, cable or NIC", "端口、光模块、线缆或网卡"
    if link.culprit.kind == "group" and len(link.culprit.ranks) > 2:
        # every link among a node's NPUs: what they share, not one NPU pair
        return (
            "the on-board links among all of its NPUs: the width or speed they trained at (the "
            "firmware, `npu-smi info -t hccs`) or the board",
            "其所有 NPU 之间的板内链路：链路协商的宽度或速率（固件，`npu-smi info -t hccs`）或主板",
        )
    return (
        "on-board link between the two NPUs (the NPU module or the board)",
        "两张 NPU 之间的板内链路（NPU 模组或主板）",
    )


def _missing_late(d: Diagnosis) -> Verdict | None:
    """Undecided when the first cause is a wait for ranks the data does not hold.

    Whether a card (or any hardware) is at fault among ranks with no profile cannot be told;
    what would decide it is their data.
    """
    top = _top(d)
    if top is None or not d.missing_ranks or not set(top.culprit.ranks) & set(d.missing_ranks):
        return None
    miss = ", ".join(str(r) for r in sorted(set(top.culprit.ranks) & set(d.missing_ranks)))
    return _v(
        "card",
        "undecided",
        f"the ranks the others wait for ({miss}) are not in this data, so whether one of their "
        f"cards is at fault cannot be told — {lower_first(top.summary.rstrip('.'))}",
        f"其他卡在等的卡（{miss}号卡）不在这份数据中，无法判断是否是它们的卡有问题——"
        f"{top.summary_zh.rstrip('。')}",
        (top,),
        (
            f"the profiling data of ranks {miss} (every rank's *_ascend_pt folder)",
            f"{miss}号卡的性能数据（每张卡的 *_ascend_pt 目录）",
        ),
    )


def _card(d: Diagnosis, ranks: Sequence[int] = ()) -> Verdict:
    """One bad NPU: a device slower on every operator; a slow link is not a card."""
    missing = _missing_late(d)
    if missing is not None:
        return missing
    if ranks:  # "should we replace rank 14's card?": that rank's cause decides first
        named = _not_a_card(d, ranks)
        if named is not None:
            return named
    clock = _tagged(d, "aicore_clock_low")
    if clock is not None and _tagged(d, "device_slow") is None:
        return _v(
            "card",
            "contradicted",
            "not one card: every rank is slowed alike — "
            f"{lower_first(clock.summary.rstrip('.'))}; replacing a card will not help, the "
            "machines' power cap or cooling will",
            f"不是某一张卡：所有卡同样变慢——{clock.summary_zh.rstrip('。')}；换卡无济于事，"
            "要处理的是机器的功耗上限或散热",
            (clock,),
        )
    if _tagged(d, "device_slow") is not None:
        return replace(_hardware(d), hypothesis="card")
    link = _slow_links(d)
    if link is not None:
        en = link.summary.rstrip(".").removeprefix("Slow link: ")
        zh = link.summary_zh.rstrip("。").removeprefix("慢链路：")
        parts, parts_zh = _link_parts(link)
        return _v(
            "card",
            "contradicted",
            f"no NPU computes slower than its peers; what is slow is a link — "
            f"{lower_first(en)}. A link far below its peers' bandwidth is "
            f"usually its {parts}: check the link (hccn_tool) before swapping a card",
            f"没有哪张卡（NPU）算得比同类慢，慢的是链路——{zh}。链路带宽远低于同类"
            f"通常是{parts_zh}的问题：先用 hccn_tool 检查链路，再考虑换卡",
            (link,),
        )
    not_card = _not_a_card(d, ranks)
    if not_card is not None:
        return not_card
    return replace(_hardware(d), hypothesis="card")


#: Explanations of a rank's extra device time that are its work, not its device (decompose kinds).
_WORK_TAGS = (
    "extra_work",
    "load_imbalance",
    "shape",
    "format",
    "aicpu_op",
    "dtype_mismatch",
)


def _blames(c: RootCause) -> set[int]:
    return set(c.culprit.ranks) | set(c.culprit.link or ()) | {r for _, r in c.culprit.events}


def _not_a_card(d: Diagnosis, ranks: Sequence[int] = ()) -> Verdict | None:
    """The "bad card?" / "swap the card?" verdict judged against the cause's mechanism.

    The cause is the first one blaming ``ranks`` when the question names them, else the first
    cause that blames ranks (a rank's own cause beside a job-wide one), else the first cause. A new
    NPU fixes a device that is slower on the same work; it does not fix a device that idles
    waiting for its host (host stall), one given more or different work than its peers, or a
    cost every rank shares. ``None`` when that cause is none of those (undecided then).
    """
    real = _real(d)
    top = next((c for c in real if ranks and _blames(c) & set(ranks)), None)
    if top is None:
        top = next((c for c in real if c.culprit.kind in ("rank", "ranks", "stage")), None)
    if top is None:
        top = _top(d)
    if top is None:
        return None
    kind = top.culprit.kind
    who, who_zh = top.culprit.label, top.culprit.label_zh or top.culprit.label
    en, zh = top.summary.rstrip("."), top.summary_zh.rstrip("。")
    if kind in ("job", "operator"):
        return _v(
            "card",
            "contradicted",
            f"no NPU is slower than its peers: {lower_first(en)}; every rank pays it alike, so "
            "replacing a card changes nothing",
            f"没有哪张卡（NPU）比同类慢：{zh}；每张卡都一样，换卡不会有任何改变",
            (top,),
        )
    if kind not in ("rank", "ranks", "stage", "group") or not who:
        return None
    if top.mechanism is Mechanism.HOST_STALL and top.metrics.get("host_delay_measured") == 0.0:
        # its Free is higher, why is not measured: still not a slower device
        return _v(
            "card",
            "contradicted",
            f"the NPU of {who} computes at its peers' speed; it idles more than they do — "
            f"{lower_first(en)}; a new card would idle the same: what keeps it idle is what to "
            "find",
            f"{who_zh}的 NPU 计算速度与其他卡相同，只是空闲更多——{zh}；换一张卡也会一样空闲，"
            "要找的是让它空闲的原因",
            (top,),
        )
    if top.mechanism is Mechanism.HOST_STALL:
        return _v(
            "card",
            "contradicted",
            f"the NPU of {who} computes at its peers' speed; it idles waiting for its host — "
            f"{lower_first(en)}; a new card would wait the same: the host side (its CPU, "
            "process, data loading) is what to fix",
            f"{who_zh}的 NPU 计算速度与其他卡相同，是在空等主机——{zh}；换一张卡也会一样空等，"
            "要处理的是主机侧（CPU、进程、数据加载）",
            (top,),
        )
    if top.mechanism is Mechanism.COMPUTE_STRAGGLER and "aicpu_busy" in top.symptom_tags:
        return _v(
            "card",
            "contradicted",
            f"the AI Core of {who} runs at its peers' speed; only its AI CPU kernels are slower — "
            f"{lower_first(en)}; free that AI CPU first: a new card beside the same other work "
            "would be as slow",
            f"{who_zh}的 AI Core 与其他卡一样快，只有 AI CPU 算子变慢——{zh}；先把被占用的 AI CPU "
            "腾出来：换一张卡、旁边仍跑着同样的其他工作，也会一样慢",
            (top,),
        )
    if top.mechanism is Mechanism.COMPUTE_STRAGGLER and set(_WORK_TAGS) & set(top.symptom_tags):
        return _v(
            "card",
            "contradicted",
            f"the NPU of {who} runs each operator at its peers' speed; it is given more or different "
            f"work than its peers — {lower_first(en)}; a new card would run the same work",
            f"{who_zh}的 NPU 每个算子的速度与其他卡相同，是它的工作比其他卡多或不同——{zh}；"
            "换一张卡也要跑同样的工作",
            (top,),
        )
    return None


def _hardware(d: Diagnosis) -> Verdict:
    clock = _tagged(d, "aicore_clock_low")
    if clock is not None:
        return _v(
            "hardware",
            "supported",
            f"{clock.summary.rstrip('.')}; a clock below the rated one on every device is the "
            "power supply or cooling of the machines, not the model or its settings",
            f"{clock.summary_zh.rstrip('。')}；所有设备都低于额定频率，问题在机器的供电或散热，"
            "而不是模型或其配置",
            (clock,),
        )
    stack = _tagged(d, "version_mismatch")
    if stack is not None and _tagged(d, "device_slow") is None:
        # the slow ranks run another software stack: what their kernels do follows from it
        return _v(
            "hardware",
            "contradicted",
            f"{stack.summary.rstrip('.')}; the slow ranks run another software stack than "
            "their peers, which explains the difference: align the software before suspecting "
            "the hardware",
            f"{stack.summary_zh.rstrip('。')}；慢的卡与其他卡的软件版本不同，这就能解释差异：先统一软件，"
            "再怀疑硬件",
            (stack,),
        )
    dev = _tagged(d, "device_slow")
    if dev is not None:
        # what the device evidence is: a few launches far longer (bursts), or one factor on all
        bursts = "outlier_ratio" in dev.metrics
        engine = "engine_ratio" in dev.metrics  # one core slower, the others at peer speed
        clock_c = dev.metrics.get("aicore_clock_mhz", math.nan)
        clock_p = dev.metrics.get("peer_aicore_clock_mhz", math.nan)
        full_clock = math.isfinite(clock_c) and math.isfinite(clock_p) and clock_c >= 0.95 * clock_p
        if bursts:
            why_en = (
                "a device whose few launches take many times longer while the rest run normally "
                "is stalling in bursts (memory error correction, throttling): a hardware fault"
            )
            why_zh = "少数调用耗时成倍增加、其余正常，说明设备在间歇性卡顿（显存纠错、降频），属于硬件故障"
        elif engine:
            why_en = (
                "one unit of the device slower at "
                + ("its full clock" if full_clock else "one factor")
                + " while the others run at their peers' speed is that unit or its memory path "
                "(HBM) degraded, not the work"
            )
            why_zh = (
                ("在正常频率下" if full_clock else "")
                + "设备的一个单元变慢、其余单元与其他卡一样快，说明是该单元或其访存通路（HBM）劣化，而不是计算量"
            )
        elif full_clock:
            why_en = (
                "a device that runs every operator slower by one factor at its full clock is "
                "degraded hardware (not throttled)"
            )
            why_zh = "在正常频率下所有算子按同一倍数变慢，说明设备硬件劣化（不是降频）"
        else:
            why_en = (
                "a device that runs every operator slower by one factor is throttled or "
                "degraded hardware"
            )
            why_zh = "所有算子按同一倍数变慢，说明设备降频或硬件劣化"
        return _v(
            "hardware",
            "supported",
            f"{dev.summary.rstrip('.')}; {why_en}",
            f"{dev.summary_zh.rstrip('。')}；{why_zh}",
            (dev,),
        )
    link = _slow_links(d)  # a whole job's network (a setting, congestion) is not one part
    if link is not None and "env_differs" in link.symptom_tags:
        # the slow side runs with settings its peers do not have: a configuration, not a part
        return _v(
            "hardware",
            "contradicted",
            f"{link.summary.rstrip('.')}; the slow side is the one whose environment differs, "
            "so align that setting before replacing any part",
            f"{link.summary_zh.rstrip('。')}；变慢的一侧正是环境变量与其他节点不同的一侧，"
            "先统一该设置，再考虑更换部件",
            (link,),
        )
    if link is not None:
        parts, parts_zh = _link_parts(link)
        # between nodes, congestion or a port that negotiated a lower speed look the same in a
        # profile: the link counters tell them apart, so the verdict says so
        rdma = "rdma_low_bandwidth" in link.symptom_tags
        caveat = f"; but {_RDMA_CAVEAT[0]}, so read them before replacing parts" if rdma else ""
        caveat_zh = f"；但{_RDMA_CAVEAT[1]}，更换部件前先查看" if rdma else ""
        return _v(
            "hardware",
            "supported",
            f"{link.summary.rstrip('.')}; a link far below its peers' bandwidth is usually a "
            f"hardware fault ({parts}){caveat}",
            f"{link.summary_zh.rstrip('。')}；链路带宽远低于同类通常是硬件故障（{parts_zh}）{caveat_zh}",
            (link,),
        )
    top = _top(d)
    shape = (
        top
        if top is not None and {"op_regression_shape", "matmul_slow"} & set(top.symptom_tags)
        else None
    )
    if shape is not None:  # one operator at one shape slower, the rest of the device normal
        return _v(
            "hardware",
            "contradicted",
            "a hardware fault slows every operator of a device, but here only some operators "
            f"at their shapes are slower — {lower_first(shape.summary.rstrip('.'))}",
            f"硬件故障会让设备上所有算子变慢，而这里只有部分算子在特定 shape 下变慢——"
            f"{shape.summary_zh.rstrip('。')}",
            (shape,),
        )
    if (
        top is not None
        and top.culprit.kind == "job"
        and top.mechanism in (Mechanism.JOB_IDLE, Mechanism.JOB_HOTSPOT)
        and "aicore_clock_low" not in top.symptom_tags
    ):
        # the largest cost is how every rank runs (idle, one item everywhere), not a part
        en, zh = _top_text(top)
        links_en = " and no link is degraded" if d.links_judged else ""
        links_zh = "，也没有链路劣化" if d.links_judged else ""
        return _v(
            "hardware",
            "contradicted",
            f"no device runs uniformly slower{links_en}; {en}, which is how the job runs on every "
            "rank, not a broken part",
            f"没有设备整体变慢{links_zh}；{zh}，这是所有卡共同的运行方式，不是某个部件坏了",
            (top,),
        )
    if top is not None and top.category.value == "communication" and not d.links_judged:
        en, zh = _top_text(top)
        return Verdict(
            "hardware",
            "undecided",
            "no device runs uniformly slower, but the largest cost is communication and no link "
            f"could be compared with its peers, so a degraded link can be neither shown nor ruled "
            f"out; {en}",
            "没有设备整体变慢，但最大的开销在通信上，而这份数据中没有可与同类比较的链路，"
            f"无法证实或排除链路劣化；{zh}",
            (top.id,),
            "communication_matrix.json of every rank, and hccn_tool link and error-counter checks",
            "每张卡的 communication_matrix.json，以及用 hccn_tool 检查链路状态与错误计数",
        )
    soft = _tagged(
        d,
        "aicpu_op",
        "dtype_mismatch",
        "load_imbalance",
        "op_count_imbalance",
        "host_bound",
        "gc_pause",
        "dataloader_stall",
        "pipeline_bubble",
        "cann_upgrade",
        "recompute",
        "dynamic_shape",
    )
    if soft is not None:
        return _v(
            "hardware",
            "contradicted",
            f"the evidence points to software, configuration or data, not hardware — "
            f"{lower_first(soft.summary.rstrip('.'))}",
            f"证据指向软件、配置或数据，而不是硬件——{soft.summary_zh.rstrip('。')}",
            (soft,),
        )
    if top is None:
        return _v(
            "hardware",
            "contradicted",
            "no device or link stands out: every rank and link performs like its peers",
            "没有哪个设备或链路异常：各卡与各链路的表现都与同类一致",
        )
    en, zh = _top_text(top)
    m = top.metrics
    measured = (
        "device_extra_us" in m  # its extra device time decomposed from the kernels
        or "idle_placed_share" in m  # where the idle sits, from the kernels
        or any(k.endswith(("gather_share", "scatter_share", "allreduce_share")) for k in m)
        or top.mechanism is Mechanism.JOB_HOTSPOT  # an item measured on every rank's kernels
        or (
            top.culprit.kind == "job"
            and top.mechanism in (Mechanism.HOST_STALL, Mechanism.SLOW_LINK)
        )
    )
    if measured and (
        top.culprit.kind == "job"
        or top.mechanism
        in (
            Mechanism.PIPELINE_IMBALANCE,
            Mechanism.EXPOSED_COMMUNICATION,
            Mechanism.JOB_HOTSPOT,
            Mechanism.JOB_IDLE,
        )
    ):
        # the time goes to how the job runs (its work, partition or settings): no device runs
        # uniformly slower and no link is degraded, so nothing points at a broken part
        return _v(
            "hardware",
            "contradicted",
            f"no device runs uniformly slower and no link is degraded; {en}, which is how the job "
            "is set up or partitioned, not a broken part",
            f"没有设备整体变慢，也没有链路劣化；{zh}，这是作业的配置或切分方式造成的，不是某个部件坏了",
            (top,),
        )
    return _v(
        "hardware",
        "undecided",
        f"no device runs uniformly slower and no link is degraded; {en}",
        f"没有设备整体变慢，也没有链路劣化；{zh}",
        (top,),
        (
            "npu-smi health and frequency readings of the devices involved, and hccn_tool link checks",
            "相关设备的 `npu-smi info` 健康与频率信息，以及 `hccn_tool` 链路检查",
        ),
    )


def _idles(c: RootCause) -> bool:
    """A culprit late by idling (Free), not by computing longer (its measured excesses)."""
    m = c.metrics
    return m.get("free_excess_us", 0.0) > max(m.get("computing_excess_us", 0.0), 0.0)


def _straggler(d: Diagnosis) -> Verdict:
    c = next(
        (
            x
            for x in _real(d)
            if (
                x.mechanism is Mechanism.COMPUTE_STRAGGLER
                or (
                    # a group, a pipeline stage or some steps that compute longer than their peers
                    x.mechanism
                    in (
                        Mechanism.SLOW_GROUP,
                        Mechanism.STEP_EVENTS,
                        Mechanism.PIPELINE_IMBALANCE,
                        Mechanism.DEGRADATION,
                    )
                    and x.category.value == "compute"
                    and bool(x.culprit.ranks)
                )
            )
            and not _idles(x)
        ),
        None,
    )
    idle = next((x for x in _real(d) if _idles(x) and x.culprit.ranks), None)
    if c is None and idle is not None and idle is _top(d):
        # late by idling with its kernels as fast as its peers' (a device or host stall)
        return _v(
            "compute_straggler",
            "contradicted",
            "a rank holds the others back, but by idling, not by computing longer (its kernels "
            f"take as long as its peers'): {idle.summary.rstrip('.')}",
            f"确实有卡拖慢了其他卡，但原因是空闲而不是计算更久（其算子耗时与其他卡相同）：{idle.summary_zh.rstrip('。')}",
            (idle,),
        )
    if c is not None:
        return _v(
            "compute_straggler", "supported", c.summary.rstrip("."), c.summary_zh.rstrip("。"), (c,)
        )
    top = _top(d)
    if top is not None and top.culprit.ranks and top.category.value == "scheduling":
        return _v(
            "compute_straggler",
            "contradicted",
            f"a rank holds the others back, but by idling, not by computing longer: {top.summary.rstrip('.')}",
            f"确实有卡拖慢了其他卡，但原因是空闲而不是计算更久：{top.summary_zh.rstrip('。')}",
            (top,),
        )
    en, zh = _top_text(top)
    return _v(
        "compute_straggler",
        "contradicted",
        f"no rank computes longer than its peers; {en}",
        f"没有哪张卡的计算时间比其他卡长；{zh}",
        (top,),
    )


def _kernels(d: Diagnosis) -> Verdict:
    """Whether the operators themselves run slower, against more work for them."""
    slower = _tagged(
        d,
        "device_slow",
        "op_regression_shape",
        "dtype_mismatch",
        "aicpu_op",
        "matmul_slow",
        "aicore_clock_low",
    )
    more = _tagged(d, "load_imbalance", "op_count_imbalance")
    real = _real(d)
    if more is not None and (slower is None or real.index(more) < real.index(slower)):
        return _v(
            "kernel_slow",
            "contradicted",
            "the operators run as fast as on their peers for the same input; the late ranks "
            f"get more work: {lower_first(more.summary.rstrip('.'))}",
            f"算子在相同输入下与其他卡一样快，是晚到的卡分到了更多计算：{more.summary_zh.rstrip('。')}",
            (more,),
        )
    if slower is not None:
        return _v(
            "kernel_slow", "supported", slower.summary.rstrip("."), slower.summary_zh.rstrip("。"),
            (slower,),
        )  # fmt: skip
    v = _straggler(d)
    return Verdict(
        "kernel_slow", v.status, v.reason, v.reason_zh, v.causes, v.collect, v.collect_zh
    )


def _imbalance(d: Diagnosis) -> Verdict:
    c = _tagged(d, "load_imbalance", "op_count_imbalance")
    stage = next((x for x in _real(d) if x.mechanism is Mechanism.PIPELINE_IMBALANCE), None)
    if c is None and stage is not None and stage.category.value != "compute":
        # the stages are unbalanced in time, but through communication, not more computation
        return _v(
            "load_imbalance",
            "supported",
            "the pipeline stages are unbalanced, through communication rather than more "
            f"computation: {stage.summary.rstrip('.').removeprefix('Pipeline imbalance: ')}",
            "流水线各阶段不均衡，但原因是通信而不是计算量更多："
            f"{stage.summary_zh.rstrip('。').removeprefix('流水线负载不均衡：')}",
            (stage,),
        )
    c = c or stage  # a stage that computes more than the others: the stages' load is uneven
    if c is not None:
        return _v(
            "load_imbalance", "supported", c.summary.rstrip("."), c.summary_zh.rstrip("。"), (c,)
        )
    other = _tagged(d, "device_slow", "aicpu_op", "dtype_mismatch", "op_regression_shape")
    if other is not None:
        return _v(
            "load_imbalance",
            "contradicted",
            "the late rank does the same work as its peers, only slower: "
            f"{other.summary.rstrip('.')}",
            f"晚到的卡与其他卡做的计算量相同，只是更慢：{other.summary_zh.rstrip('。')}",
            (other,),
        )
    top = _top(d)
    en, zh = _top_text(top)
    return _v(
        "load_imbalance",
        "contradicted",
        f"no rank gets more work (operators, shapes, launch counts) than its peers; {en}",
        f"没有哪张卡的计算量（算子、shape、调用次数）比其他卡多；{zh}",
        (top,),
    )


def _dataloader(d: Diagnosis) -> Verdict:
    c = _tagged(d, "dataloader_stall")
    if c is not None and ("profiler_overhead" in c.symptom_tags or len(d.steps) < 2):
        # an idle at the step start in one captured step, or in a heavy capture: consistent with
        # input, not proof of it
        return _v(
            "dataloader",
            "undecided",
            f"the data is consistent with it but does not prove it: {lower_first(c.summary.rstrip('.'))}",
            f"数据与之相符，但不足以证明：{c.summary_zh.rstrip('。')}",
            (c,),
            (
                "several steps captured with a light profiler configuration (Level1, no "
                "with_stack), or the dataloader's own wait time per step from the training loop",
                "用轻量的采集配置（Level1、关闭 with_stack）采集多步，或在训练循环中记录每步等待数据的时间",
            ),
        )
    if c is not None and "host_memory_call_us" in c.metrics:
        # the idle at the step start is the host's own memory calls (a pinned buffer made anew
        # per batch), which more loader workers do not shorten
        return _v(
            "dataloader",
            "contradicted",
            "the ranks idle at the start of the step, but not waiting for the loader's workers: "
            f"the host is in its own memory calls then; {lower_first(c.summary.rstrip('.'))}",
            f"各卡确实在步开始处空闲，但不是在等 DataLoader 的 worker：主机此时在执行它自己的内存调用；"
            f"{c.summary_zh.rstrip('。')}",
            (c,),
        )
    if c is not None:
        return _v("dataloader", "supported", c.summary.rstrip("."), c.summary_zh.rstrip("。"), (c,))
    held = _tagged(d, "pageable_copy") or _tagged(d, "synchronize_stream")
    if held is not None and held.culprit.kind == "job":
        # the idle passes inside (or right after) the host's own blocking calls
        return _v(
            "dataloader",
            "contradicted",
            "the device idles while the host is blocked in its own calls, not while it waits for "
            f"the data loader: {lower_first(held.summary.rstrip('.'))}",
            f"设备空闲时主机正阻塞在它自己的调用里，而不是在等数据加载：{held.summary_zh.rstrip('。')}",
            (held,),
        )
    gc = _tagged(d, "gc_pause")
    if gc is not None and gc.culprit.kind == "job":
        # the recorded GC pauses hold the idle at the start of those steps
        return _v(
            "dataloader",
            "contradicted",
            "the ranks idle together in those steps, but the host is collecting garbage then, "
            f"not waiting for input: {lower_first(gc.summary.rstrip('.'))}",
            f"各卡确实在这些步里一起空闲，但主机此时在做垃圾回收，而不是在等输入：{gc.summary_zh.rstrip('。')}",
            (gc,),
        )
    start = next((f for f in d.findings if f.id.startswith("host_dispatch.dataloader.")), None)
    if start is not None:
        # every rank waits at the start of its steps (the host dispatch analyzer measured it)
        owner = next((c for c in _real(d) if start in c.findings), None)
        if len(d.steps) < 2 or (owner is not None and "profiler_overhead" in owner.symptom_tags):
            return _v(
                "dataloader",
                "undecided",
                "the data is consistent with it but does not prove it: "
                f"{lower_first(start.summary.rstrip('.'))}"
                + (" (one captured step)" if len(d.steps) < 2 else ""),
                f"数据与之相符，但不足以证明：{(start.summary_zh or start.summary).rstrip('。')}"
                + ("（只采集到一步）" if len(d.steps) < 2 else ""),
                (owner,),
                (
                    "several steps captured with a light profiler configuration (Level1, no "
                    "with_stack), or the dataloader's own wait time per step from the training loop",
                    "用轻量的采集配置（Level1、关闭 with_stack）采集多步，或在训练循环中记录每步等待数据的时间",
                ),
            )
        return _v(
            "dataloader",
            "supported",
            start.summary.rstrip("."),
            (start.summary_zh or start.summary).rstrip("。"),
            (owner,),
        )
    idle = _mech(d, Mechanism.JOB_IDLE)
    if idle is not None and idle.metrics.get("idle_placed_share", 0.0) >= 0.5:
        # the idle sits at a known place that is not the step's start (where input waits show)
        return _v(
            "dataloader",
            "contradicted",
            f"the ranks idle together, but not at the start of the step where waiting for input "
            f"shows: {lower_first(idle.summary.rstrip('.'))}",
            f"各卡确实一起空闲，但不在步的开始处（等待输入会出现在那里）：{idle.summary_zh.rstrip('。')}",
            (idle,),
        )
    if idle is not None:
        return _v(
            "dataloader",
            "undecided",
            f"{lower_first(idle.summary.rstrip('.'))}; an input pipeline would cause such idle, "
            "but this data does not show where in the step the idle falls or what the host does "
            "then",
            f"{idle.summary_zh.rstrip('。')}；数据加载会造成这种空闲，但这份数据看不出空闲落在步的哪个位置，"
            "也看不出主机此时在做什么",
            (idle,),
            (
                "a profile with host activity to see what the trainer waits for",
                "开启 CPU 活动的性能数据，查看训练进程在等什么",
            ),
        )
    en, zh = _top_text(_top(d))
    return _v(
        "dataloader",
        "contradicted",
        f"the ranks do not idle together at the start of their steps, where waiting for input "
        f"shows; {en}",
        f"各卡没有在步开始处一起空闲（等待输入时会出现）；{zh}",
        (_top(d),),
    )


def _checkpoint(d: Diagnosis) -> Verdict:
    ev = next(
        (
            c
            for c in _real(d)
            if (c.mechanism is Mechanism.STEP_EVENTS or c.metrics.get("period_steps", 0.0) >= 2)
            and c.category.value == "scheduling"
        ),
        None,
    )
    if ev is not None and ev.metrics.get("period_steps", 0.0) >= 2:
        # one rank stalling at a fixed step interval: what a checkpoint saved by that rank does
        return _v(
            "checkpoint",
            "supported",
            f"{lower_first(ev.summary.rstrip('.'))}",
            ev.summary_zh.rstrip("。"),
            (ev,),
        )
    if ev is not None:
        return _v(
            "checkpoint",
            "undecided",
            f"the data is consistent with it: {ev.summary.rstrip('.')}; a checkpoint save, an "
            "evaluation or a blocking log flush all look like this, and the profile does not name "
            "the host work",
            f"数据与之相符：{ev.summary_zh.rstrip('。')}；保存检查点、评估或阻塞式日志落盘都会如此，"
            "而性能数据无法说明主机在做哪件事",
            (ev,),
            (
                "the training log's checkpoint / evaluation timestamps for those steps, or host "
                "activity with Python call stacks",
                "训练日志中这些步的检查点 / 评估时间戳，或开启 Python 调用栈的主机活动数据",
            ),
        )
    compiled = next((c for c in _real(d) if "dynamic_shape" in c.symptom_tags), None)
    if compiled is not None:
        # the stalls of some steps are placed on operators compiled for new shapes
        return _v(
            "checkpoint",
            "contradicted",
            "the stalls are placed: they sit right before operators launched with input shapes not "
            f"seen before, not where a save would be; {lower_first(compiled.summary.rstrip('.'))}",
            f"这些停顿的位置是确定的：紧挨在输入 shape 首次出现的算子之前，而不是保存检查点的位置；"
            f"{compiled.summary_zh.rstrip('。')}",
            (compiled,),
        )
    en, zh = _top_text(_top(d))
    n = len(d.steps)
    return _v(
        "checkpoint",
        "contradicted",
        f"none of the {n} captured steps has a one-off host stall, which a checkpoint save "
        f"would cause; {en}",
        f"采集到的 {n} 步中没有哪一步出现一次性的主机阻塞，而保存检查点会造成这种阻塞；{zh}",
        (_top(d),),
    )


#: Exposed communication mostly (this share) of one collective kind says what produces it.
KIND_SHARE = 0.5


def _zero(d: Diagnosis) -> Verdict:
    """Whether a lower ZeRO stage would help: exposed communication made of ZeRO-3's collectives.

    ZeRO-3 gathers every layer's parameters (AllGather) and reduce-scatters its gradients; an
    exposed communication that is mostly AllReduce is gradient synchronization, which the stage
    does not remove (the cause's ``*_share`` metrics, from comm_ops by collective kind).
    """
    top = _top(d)
    m = top.metrics if top is not None else {}
    sharded = m.get("allgather_share", 0.0) + m.get("reducescatter_share", 0.0)
    if (
        top is not None
        and top.mechanism is Mechanism.EXPOSED_COMMUNICATION
        and m.get("allreduce_share", 0.0) >= KIND_SHARE
    ):
        ar = m["allreduce_share"]
        return _v(
            "zero_stage",
            "contradicted",
            f"the exposed communication is AllReduce ({pct(ar)} of its time), gradient "
            "synchronization that every ZeRO stage keeps, not ZeRO-3's per-layer parameter "
            f"AllGather; {lower_first(top.summary.rstrip('.'))}",
            f"未被掩盖的通信是 AllReduce（占通信时间的 {pct(ar)}），即梯度同步，任何 ZeRO 阶段都有，"
            f"而不是 ZeRO-3 逐层的参数 AllGather；{top.summary_zh.rstrip('。')}",
            (top,),
        )
    if top is not None and top.mechanism is Mechanism.EXPOSED_COMMUNICATION:
        kinds = (
            f"; {pct(sharded)} of it is AllGather and ReduceScatter, the collectives ZeRO-3 adds"
            if sharded >= KIND_SHARE
            else ""
        )
        kinds_zh = (
            f"；其中 {pct(sharded)} 是 AllGather 与 ReduceScatter，正是 ZeRO-3 增加的集合通信"
            if sharded >= KIND_SHARE
            else ""
        )
        return _v(
            "zero_stage",
            "supported",
            f"communication the computation does not hide is the main cost "
            f"({top.summary.rstrip('.')}){kinds}; ZeRO-3 adds a parameter all-gather per layer, so "
            "a lower stage (ZeRO-2) cuts communication if the memory allows",
            f"未被计算掩盖的通信是主要开销（{top.summary_zh.rstrip('。')}）{kinds_zh}；ZeRO-3 每层都要额外 "
            "all-gather 参数，在显存允许时改用 ZeRO-2 可以减少通信",
            (top,),
        )
    en, zh = _top_text(top)
    return _v(
        "zero_stage",
        "contradicted",
        f"the ZeRO stage changes how much the ranks communicate, but communication is not what "
        f"holds this job back: {en.replace('the time goes elsewhere — ', '')}",
        f"ZeRO 阶段改变的是通信量，但拖慢这个作业的不是通信：{zh.replace('时间损失在别处——', '')}",
        (top,),
    )


def _tp(d: Diagnosis) -> Verdict:
    """Whether changing the tensor-parallel size would help.

    Placement, not size, when the tp groups cross nodes; otherwise only when communication of
    the whole job is what holds it back (and then the data cannot tell).
    """
    placed = next((c for c in _real(d) if "group_across_nodes" in c.symptom_tags), None)
    if placed is not None:
        return _v(
            "tp_size",
            "contradicted",
            "the size is not the problem, the placement is: keep the tensor-parallel size and put "
            f"each tp group inside one node; {lower_first(placed.summary.rstrip('.'))}",
            "问题不在 TP 的大小，而在放置：保持 TP 规模不变，把每个 tp 通信组放在一台机器内；"
            f"{placed.summary_zh.rstrip('。')}",
            (placed,),
        )
    top = _top(d)
    if top is not None and top.category.value == "communication" and top.culprit.kind == "job":
        return _v(
            "tp_size",
            "undecided",
            f"communication is the main cost ({lower_first(top.summary.rstrip('.'))}), but this "
            "profile does not tell how much of it the tensor-parallel collectives hold at another "
            "size",
            f"通信是主要开销（{top.summary_zh.rstrip('。')}），但这份数据无法说明换一个 TP 规模后张量并行通信会变成多少",
            (top,),
            (
                "a profile of the same job at the other tensor-parallel size (the same steps), to "
                "compare with advisor-chat's baseline comparison",
                "同一作业在另一个 TP 规模下的性能数据（相同的步），用 advisor-chat 的基线对比",
            ),
        )
    en, zh = _top_text(top)
    return _v(
        "tp_size",
        "contradicted",
        f"Tensor-parallel communication is not what holds this job back; {en}",
        f"拖慢这个作业的不是张量并行通信；{zh}",
        (top,),
    )


def _mc2(d: Diagnosis) -> Verdict:
    c = _tagged(d, "mc2_opportunity")
    if c is not None:
        return _v("mc2", "supported", c.summary.rstrip("."), c.summary_zh.rstrip("。"), (c,))
    mc2 = [f for f in d.findings if "mc2" in f.id]
    if mc2:
        return _v(
            "mc2",
            "supported",
            mc2[0].summary.rstrip("."),
            (mc2[0].summary_zh or mc2[0].summary).rstrip("。."),
        )
    top = _top(d)
    en, zh = _top_text(top)
    if not d.kernel_data:  # whether a MatMul runs next to a collective is in the kernels
        return _v(
            "mc2",
            "undecided",
            "mc2 hides tensor-parallel communication under its MatMul, and whether a MatMul runs "
            f"right before an exposed collective is in the per-kernel data this profile lacks; {en}",
            "mc2 把张量并行通信藏在 MatMul 下面，而 MatMul 是否紧挨着未被掩盖的集合通信要看逐算子数据，"
            f"这份数据没有；{zh}",
            (top,),
            (
                "kernel_details.csv of each rank (Ascend PyTorch Profiler, level 1 or higher), or "
                "the profiler DB export",
                "每张卡的 kernel_details.csv（Ascend PyTorch Profiler level 1 及以上）或 DB 导出",
            ),
        )
    return _v(
        "mc2",
        "contradicted",
        f"mc2 hides tensor-parallel communication under its MatMul, but no exposed TP collective "
        f"follows a MatMul here; {en}",
        f"mc2 把张量并行通信藏在 MatMul 下面，但这里没有紧跟 MatMul 且未被掩盖的 TP 集合通信；{zh}",
        (top,),
    )


def _timeout(d: Diagnosis) -> Verdict:
    for c in _real(d):
        share = c.metrics.get("hccl_exec_timeout_share")
        if share is not None:
            status: Status = "supported" if share >= 0.5 else "contradicted"
            en = c.summary.rstrip(".")
            return _v(
                "hccl_timeout",
                status,
                en if status == "supported" else f"the longest wait is far from the timeout: {en}",
                c.summary_zh.rstrip("。")
                if status == "supported"
                else f"最长的等待离超时还很远：{c.summary_zh.rstrip('。')}",
                (c,),
            )
    risky = [
        f
        for f in d.findings
        if f.id.startswith("env_check.env.hccl_") and f.severity.value == "high"
    ]
    if risky:
        return _v(
            "hccl_timeout", "supported", risky[0].summary.rstrip("."), risky[0].summary.rstrip(".")
        )
    en, zh = _top_text(_top(d))
    return _v(
        "hccl_timeout",
        "contradicted",
        f"no collective wait in this profile comes near HCCL_EXEC_TIMEOUT (1836 s by default); {en}",
        f"这份数据中没有哪次集合通信等待接近 HCCL_EXEC_TIMEOUT（默认 1836 s）；{zh}",
        (_top(d),),
    )


_ALLOC_WORDS = re.compile(
    r"aclrtMalloc|aclrtFree|empty_cache|allocat|memory fragment|out of memory|\bOOM\b", re.I
)


def _fragmentation(d: Diagnosis) -> Verdict:
    """The caching allocator's fragmentation as the cause (a suspect narrower than memory).

    Supported by a cause tagged ``memory_fragmentation``; contradicted by memory that grows every
    step (``memory_growth``: the allocation itself rises, which expandable segments do not
    stop); else the memory verdict, named as fragmentation.
    """
    frag = _tagged(d, "memory_fragmentation")
    if frag is not None:
        return _v(
            "fragmentation",
            "supported",
            frag.summary.rstrip("."),
            frag.summary_zh.rstrip("。"),
            (frag,),
        )
    grow = _tagged(d, "memory_growth")
    if grow is not None:
        return _v(
            "fragmentation",
            "contradicted",
            "the allocated memory itself grows every step, which no allocator setting "
            "(expandable_segments) stops: "
            f"{lower_first(grow.summary.rstrip('.'))}",
            "已分配内存本身每步都在增长，这不是分配器设置（expandable_segments）能解决的："
            f"{grow.summary_zh.rstrip('。')}",
            (grow,),
        )
    return dataclasses.replace(_memory(d), hypothesis="fragmentation")


def _memory(d: Diagnosis) -> Verdict:
    """Device memory as the cause: a cause tagged or evidenced by allocation work.

    A low-severity environment note (e.g. PYTORCH_NPU_ALLOC_CONF unset) is advice, not evidence
    that memory costs step time; it does not support the hypothesis.
    """
    c = (
        _tagged(d, "memory_fragmentation")
        or _tagged(d, "memory_growth")
        or next((c for c in _real(d) if _ALLOC_WORDS.search(c.summary)), None)
    )
    if c is not None:
        return _v("memory", "supported", c.summary.rstrip("."), c.summary_zh.rstrip("。"), (c,))
    mem = [
        f
        for f in d.findings
        if ("memory" in f.id or "alloc" in f.id) and f.severity.value in ("high", "critical")
    ]
    if mem:
        return _v("memory", "supported", mem[0].summary.rstrip("."), mem[0].summary_zh.rstrip("。"))
    collect = (
        "a profile with profile_memory=True (memory_record.csv, operator_memory.csv)",
        "开启 profile_memory=True 的性能数据（memory_record.csv、operator_memory.csv）",
    )
    top = _top(d)
    if top is not None:
        en, zh = _top_text(top)
        return _v(
            "memory",
            "contradicted",
            "nothing in the time account points to device memory (no allocation stalls, no "
            f"memory findings); {en}",
            f"时间分析中没有任何迹象指向显存（没有内存分配阻塞或显存相关发现）；{zh}",
            (top,),
        )
    return Verdict(
        "memory",
        "undecided",
        "this profile's time account does not show memory as the cause (no allocation stalls or "
        "memory findings); memory pressure can still limit batch size without costing step time",
        "这份数据的时间分析没有显示显存是原因（没有内存分配阻塞或显存相关发现）；显存压力仍可能限制 batch 大小，但不直接增加步时间",
        (),
        *collect,
    )


def _host(d: Diagnosis) -> Verdict:
    c = _tagged(d, "host_bound")
    if c is not None and "profiler_overhead" in c.symptom_tags:
        # measured in a heavy capture: whether the job itself is host-bound is not known yet
        return _v(
            "host_dispatch",
            "undecided",
            f"the device does wait for its host, but the capture was taken with {d.capture}, "
            f"whose own host work per launch makes such waits: {c.summary.rstrip('.')}",
            f"设备确实在等主机，但这份数据以 {d.capture} 采集，采集本身在每次下发上的开销正会造成这种等待："
            f"{c.summary_zh.rstrip('。')}",
            (c,),
            (
                "the same steps collected at Level1 (or Level0) without with_stack / "
                "record_shapes, then tune the dispatch if the waits remain",
                "以 Level1（或 Level0）、关闭 with_stack / record_shapes 重新采集相同的步，等待仍在再调整下发",
            ),
        )
    if c is not None and c.category.value == "scheduling":
        return _v(
            "host_dispatch", "supported", c.summary.rstrip("."), c.summary_zh.rstrip("。"), (c,)
        )
    en, zh = _top_text(_top(d))
    return _v(
        "host_dispatch",
        "contradicted",
        f"no rank's device waits for its host to launch work; {en}",
        f"没有哪张卡的设备在等主机下发任务；{zh}",
        (_top(d),),
    )


def _profiler(d: Diagnosis) -> Verdict:
    """The capture's own overhead: supported when a host-side cause was measured in a heavy capture.

    From :attr:`Diagnosis.capture` (profiler_info.json: ``_profiler_level``, ``with_stack``) and
    the causes the capture rule tagged ``profiler_overhead``.
    """
    c = _tagged(d, "profiler_overhead")
    again = (
        "the same steps collected at Level1 (or Level0) without with_stack / record_shapes",
        "以 Level1（或 Level0）、关闭 with_stack / record_shapes 重新采集相同的步",
    )
    if c is not None:
        return _v(
            "profiler",
            "supported",
            f"the capture was taken with {d.capture} and the time lost is host-side idle, which "
            "the profiler's own work per launch inflates; how much of it is the profiler's, only "
            f"a light capture of the same steps can tell. {c.summary[:1].upper()}{c.summary[1:].rstrip('.')}",
            f"这份数据以 {d.capture} 采集，而损失的时间是主机侧的空闲，采集自身在每次下发上的开销"
            f"正会放大它；其中有多少来自采集本身，只有轻量采集相同的步才能确定。{c.summary_zh.rstrip('。')}",
            (c,),
            again,
        )
    en, zh = _top_text(_top(d))
    if d.capture == "light":
        return _v(
            "profiler",
            "contradicted",
            f"the capture was light (Level0/Level1, no call stacks), which adds little host work; "
            f"{en}",
            f"这份数据是轻量采集（Level0/Level1，未开调用栈），自身开销很小；{zh}",
            (_top(d),),
        )
    if d.capture:
        return _v(
            "profiler",
            "contradicted",
            f"the capture was heavy ({d.capture}), but the time is not lost to host-side idle, "
            f"which is what the profiler inflates; {en}",
            f"这份数据采集较重（{d.capture}），但时间并不是损失在主机侧空闲上（profiler 放大的正是这部分）；{zh}",
            (_top(d),),
        )
    return _v(
        "profiler",
        "undecided",
        "the profiler configuration is not recorded in this data (profiler_info.json)",
        "这份数据没有记录采集配置（profiler_info.json）",
        (_top(d),),
        ("the profiler_info_*.json of each rank", "每张卡的 profiler_info_*.json"),
    )


def _host_sync(d: Diagnosis) -> Verdict:
    """Host synchronizations: supported when the device idles right after synchronize calls.

    From the cause the job-idle rule tagged ``synchronize_stream`` (host_dispatch synchronize
    calls, kernel_details.csv); contradicted when host data exist and no call is followed by an
    idle; undecided without host data.
    """
    c = _tagged(d, "synchronize_stream")
    if c is not None:
        return _v(
            "host_sync",
            "supported",
            c.summary.rstrip("."),
            c.summary_zh.rstrip("。"),
            (c,),
        )
    en, zh = _top_text(_top(d))
    if d.host_data:
        return _v(
            "host_sync",
            "contradicted",
            f"the host's synchronize calls are not followed by device idle that costs the step; "
            f"{en}",
            f"主机的同步调用之后没有造成拖慢步长的设备空闲；{zh}",
            (_top(d),),
        )
    return _v(
        "host_sync",
        "undecided",
        "this data has no host launch records (trace_view.json flows or the DB's CANN_API), so "
        "synchronize calls cannot be seen",
        "这份数据没有主机下发记录（trace_view.json 的连线或 DB 的 CANN_API），看不到同步调用",
        (_top(d),),
        (
            "a profile with CPU activity (host API calls) of the same steps",
            "开启 CPU 活动（主机 API 调用）重新采集相同的步",
        ),
    )


def _software(d: Diagnosis) -> Verdict:
    """A defect in CANN, the driver or the framework: not needed when a measured cause explains the time.

    Contradicted when the top cause accounts for the time with a mechanism the job's own code,
    settings, data or hardware produces (every cause the diagnosis names is one of those, each
    with its fix); undecided when nothing stands out (a defect that costs every rank alike
    cannot be told from one profile).
    """
    top = _top(d)
    if top is None:
        return _v(
            "software_bug",
            "undecided",
            "no cause stands out in this profile, so it can neither show nor rule out a defect "
            "that slows every rank alike",
            "这份数据中没有突出的原因，无法证实或排除一个让所有卡同样变慢的软件缺陷",
            (),
            (
                "a profile of the same job on a known-good CANN / torch_npu version (then compare the "
                "two with --baseline)",
                "同一作业在已知正常的 CANN / torch_npu 版本上的性能数据（再用 --baseline 对比两份数据）",
            ),
        )
    return _v(
        "software_bug",
        "contradicted",
        "the measured time is explained without one: "
        f"{lower_first(top.summary.rstrip('.'))}, which the job's own code, settings or data "
        "produce and its remedy addresses",
        f"不需要用软件缺陷来解释，测得的时间已有原因：{top.summary_zh.rstrip('。')}；"
        "这来自作业自身的代码、配置或数据，按对应的建议修改即可",
        (top,),
    )


#: Compute-bound job: the NPUs compute at least this share of the step (cluster-wide).
CAPACITY_COMPUTE_SHARE = 0.85


def _capacity(d: Diagnosis) -> Verdict:
    """Too little compute: more or faster NPUs would help only when the NPUs are busy computing.

    Supported when, without a cause, the NPUs compute ≥ ``CAPACITY_COMPUTE_SHARE`` of the step;
    contradicted when a cause holds the time: a straggler, idle or communication (more NPUs would
    wait the same) or a job-wide hotspot (work beside the model's own that can be cut; more NPUs
    would only split it); undecided otherwise. Source: the diagnosis' cluster-wide shares.
    """
    comp = float(d.shares.get("computing", float("nan")))
    top = _top(d)
    busy = f"the NPUs compute {comp:.1%} of the step" if comp == comp else ""
    busy_zh = f"NPU 的计算时间占步长 {comp:.1%}" if comp == comp else ""
    if top is not None and top.mechanism is Mechanism.JOB_HOTSPOT:
        # a job hotspot is work beside the model's own (conversions, fallbacks, recomputation):
        # more NPUs would split it, not remove it
        return _v(
            "capacity",
            "contradicted",
            f"{busy}, but {lower_first(top.summary.rstrip('.'))}; that work can be cut, and more "
            "NPUs would only split it (and add communication): cut it first",
            f"{busy_zh}，但{top.summary_zh.rstrip('。')}；这部分计算可以减掉，加卡只会把它分摊开"
            "（还会增加通信）：应先减掉它",
            (top,),
        )
    if top is not None:
        en, zh = _top_text(top)
        return _v(
            "capacity",
            "contradicted",
            f"the time lost is not a lack of compute; {en}; more NPUs or machines would lose the "
            "same time (and more ranks add communication)",
            f"损失的时间不是因为计算能力不够；{zh}；加卡或加机器也会损失同样的时间（卡越多通信也越多）",
            (top,),
        )
    if comp == comp and comp >= CAPACITY_COMPUTE_SHARE:
        return _v(
            "capacity",
            "supported",
            f"{busy}, with no rank, link or idle holding the time: the job is compute-bound, so "
            "more NPUs (or less work per NPU) shorten the step",
            f"{busy_zh}，没有慢卡、慢链路或空闲占用时间：作业受计算限制，加卡（或减少每卡计算量）能缩短步时间",
        )
    return _v(
        "capacity",
        "undecided",
        f"no cause stands out and {busy or 'the compute share is unknown'}, so the data cannot "
        "tell whether more NPUs would help",
        f"没有突出的原因，且{busy_zh or '计算占比未知'}，无法从数据判断加卡是否有用",
        (),
        (
            "a profile at a second scale (more or fewer NPUs) to compare the step time",
            "另一种规模（更多或更少卡）下的性能数据，对比步时间",
        ),
    )


def _aicpu(d: Diagnosis) -> Verdict:
    """Whether operators run on AI CPU for a measurable share of the step (compare_ops check)."""
    c = _tagged(d, "aicpu_op")
    f = next((x for x in d.findings if "aicpu_op" in x.symptom_tags), None)
    if c is not None or f is not None:
        en = c.summary if c is not None else f.summary  # type: ignore[union-attr]
        zh = c.summary_zh if c is not None else f.summary_zh  # type: ignore[union-attr]
        top = _top(d)
        lead = (
            ""
            if c is None or top is None or c is top
            else f" (the top cause is another: {lower_first(top.summary.rstrip('.'))})"
        )
        lead_zh = (
            ""
            if c is None or top is None or c is top
            else f"（主要原因是另一个：{top.summary_zh.rstrip('。')}）"
        )
        return _v("aicpu", "supported", en.rstrip(".") + lead, zh.rstrip("。") + lead_zh, (c,))
    if d.kernel_data:
        top = _top(d)
        en, zh = _top_text(top)
        return _v(
            "aicpu",
            "contradicted",
            "no AI CPU operator takes 1% of any rank's step (kernel_details.csv, Accelerator "
            f"Core); {en}",
            f"没有哪张卡的 AI CPU 算子占到步长的 1%（kernel_details.csv 的 Accelerator Core）；{zh}",
            (top,),
        )
    return _v(
        "aicpu",
        "undecided",
        "this profile has no per-kernel data to see which core each operator ran on",
        "这份数据没有逐算子（kernel）数据，无法看出算子运行在哪种核上",
        (),
        (
            "kernel_details.csv (profiler Level1 or above) of the slow ranks",
            "慢卡的 kernel_details.csv（profiler Level1 及以上）",
        ),
    )


def _clocked(d: Diagnosis) -> RootCause | None:
    """The first cause that measured its culprit's AI Core clock against its peers'."""
    return next(
        (
            c
            for c in _real(d)
            if "aicore_clock_mhz" in c.metrics and "peer_aicore_clock_mhz" in c.metrics
        ),
        None,
    )


def _throttling(d: Diagnosis) -> Verdict:
    """Whether a slow device is down-clocked (the AI Core Freq counter against its peers)."""
    from advisor_chat.diagnosis.evidence import CLOCK_DROP

    job = _tagged(d, "aicore_clock_low")
    if job is not None:
        return _v(
            "throttling", "supported", job.summary.rstrip("."), job.summary_zh.rstrip("。"), (job,)
        )
    c = _clocked(d)
    if c is not None:
        own, peer = c.metrics["aicore_clock_mhz"], c.metrics["peer_aicore_clock_mhz"]
        if own < (1.0 - CLOCK_DROP) * peer:
            return _v(
                "throttling", "supported", c.summary.rstrip("."), c.summary_zh.rstrip("。"), (c,)
            )
        return _v(
            "throttling",
            "contradicted",
            f"its AI Core clock is {own:.0f} MHz against {peer:.0f} MHz on its peers (AI Core "
            f"Freq counter), so it is not down-clocked: {lower_first(c.summary.rstrip('.'))}",
            f"其 AI Core 频率为 {own:.0f} MHz，其他卡为 {peer:.0f} MHz（AI Core 频率计数器），没有降频："
            f"{c.summary_zh.rstrip('。')}",
            (c,),
        )
    slow = _tagged(d, "device_slow")
    if slow is None and _mech(d, Mechanism.COMPUTE_STRAGGLER) is None:
        en, zh = _top_text(_top(d))
        mhz = d.clock_mhz
        if math.isfinite(mhz):  # measured: no device below its peers, and none below the rated
            return _v(
                "throttling",
                "contradicted",
                f"the AI Core clock of the ranks measured is {mhz:.0f} MHz while busy (AI Core "
                f"Freq counter), the rated clock, and no device computes slower than its peers; "
                f"{en}",
                f"所测各卡忙时 AI Core 频率为 {mhz:.0f} MHz（AI Core 频率计数器），即额定频率，"
                f"也没有哪张卡的计算比其他卡慢；{zh}",
                (_top(d),),
            )
        return _v(
            "throttling",
            "contradicted",
            f"no device computes slower than its peers (this profile has no AI Core Freq track "
            f"to check a clock shared by every rank); {en}",
            f"没有哪张卡的计算比其他卡慢（这份数据没有 AI Core 频率轨道，无法检查所有卡共同的降频）；{zh}",
            (_top(d),),
        )
    c = slow or _mech(d, Mechanism.COMPUTE_STRAGGLER)
    comp_ex = c.metrics.get("computing_excess_us", math.nan) if c is not None else math.nan
    total_ex = c.metrics.get("excess_us", math.nan) if c is not None else math.nan
    if (
        slow is None
        and c is not None
        and math.isfinite(comp_ex)
        and math.isfinite(total_ex)
        and total_ex > 0
        and comp_ex < 0.1 * total_ex
    ):
        # the rank is late, but not in its kernels: a down-clocked device runs every kernel longer
        return _v(
            "throttling",
            "contradicted",
            f"its kernels take as long as its peers' (Computing differs by {abs(comp_ex) / 1000:.2f} "
            "ms per step), and a down-clocked device runs every kernel longer; the time is lost "
            f"elsewhere: {lower_first(c.summary.rstrip('.'))}",
            f"其算子耗时与其他卡相同（计算时间每步相差 {abs(comp_ex) / 1000:.2f} ms），而降频的设备会让每个算子都变慢；"
            f"时间损失在别处：{c.summary_zh.rstrip('。')}",
            (c,),
        )
    return _v(
        "throttling",
        "undecided",
        f"a device is slower ({lower_first(c.summary.rstrip('.'))}), but this profile has no "  # type: ignore[union-attr]
        "AI Core frequency to tell a down-clocked device from another fault",
        f"确实有卡更慢（{c.summary_zh.rstrip('。')}），但这份数据没有 AI Core 频率，"  # type: ignore[union-attr]
        "无法区分降频与其他故障",
        (c,),
        (
            "that NPU's temperature, power and AI Core frequency during training (npu-smi info), "
            "or a capture whose trace_view.json has the 'AI Core Freq' counter track",
            "训练时该 NPU 的温度、功耗与 AI Core 频率（npu-smi info），或 trace_view.json 中带 "
            "'AI Core Freq' 计数器轨道的采集",
        ),
    )


def _memory_bandwidth(d: Diagnosis) -> Verdict:
    """Whether a device's memory (HBM) is slow: only its memory-bound (vector) operators slower."""
    c = next((x for x in _real(d) if "memory_bound_engine" in x.metrics), None)
    if c is not None and c.metrics["memory_bound_engine"] == 1.0:
        return _v(
            "memory_bandwidth",
            "supported",
            c.summary.rstrip("."),
            c.summary_zh.rstrip("。"),
            (c,),
        )
    slow = _tagged(d, "device_slow")
    if c is not None or slow is not None:
        x = c or slow
        return _v(
            "memory_bandwidth",
            "contradicted",
            "the slower operators are not only the memory-bound ones: "
            f"{lower_first(x.summary.rstrip('.'))}",  # type: ignore[union-attr]
            f"变慢的不只是访存密集型算子：{x.summary_zh.rstrip('。')}",  # type: ignore[union-attr]
            (x,),
        )
    if d.kernel_data:
        en, zh = _top_text(_top(d))
        return _v(
            "memory_bandwidth",
            "contradicted",
            f"no device runs its operators slower than its peers; {en}",
            f"没有哪张卡的算子比其他卡慢；{zh}",
            (_top(d),),
        )
    return _v(
        "memory_bandwidth",
        "undecided",
        "this profile has no per-kernel data to compare the memory-bound operators' times",
        "这份数据没有逐算子数据，无法比较访存密集型算子的耗时",
        (),
        (
            "kernel_details.csv of every rank (profiler Level1)",
            "所有卡的 kernel_details.csv（Level1 采集）",
        ),
    )


def _device_shared(d: Diagnosis) -> Verdict:
    """Whether something else holds the NPU: its device idles with its work already queued."""
    c = _tagged(d, "device_held")
    if c is not None:
        return _v(
            "device_shared", "supported", c.summary.rstrip("."), c.summary_zh.rstrip("。"), (c,)
        )
    if not d.host_data:
        return _v(
            "device_shared",
            "undecided",
            "this profile has no host launch data to tell a device held by something else from "
            "a late host",
            "这份数据没有主机下发数据，无法区分设备被其他进程占用与主机下发晚",
            (),
            (
                "host data (trace_view.json, or the DB's CANN_API) and `npu-smi info` on the "
                "slow rank's device during training",
                "主机数据（trace_view.json 或 DB 的 CANN_API），以及训练时慢卡所在设备的 `npu-smi info`",
            ),
        )
    en, zh = _top_text(_top(d))
    return _v(
        "device_shared",
        "contradicted",
        f"no device idles with its work already queued (the host launches arrive in time where "
        f"the devices wait); {en}",
        f"没有哪张卡在任务已排队时仍空闲（设备等待之处主机下发都及时）；{zh}",
        (_top(d),),
    )


def _version(d: Diagnosis) -> Verdict:
    """Ranks on different CANN / torch_npu versions, from the versions each rank records.

    Supported when a software has several versions (and says whether the top cause's culprit
    ranks are the ones on one of them); contradicted when every recording rank has one version
    of each; undecided when no rank records its versions.
    """
    from advisor_chat.diagnosis.context import ranks_label

    by_sw: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for sw, ver, ranks in d.versions:
        by_sw.setdefault(sw, []).append((ver, ranks))
    top = _top(d)
    if not by_sw:
        return _v(
            "version",
            "undecided",
            "no rank of this profile records its CANN or torch_npu version",
            "这份数据中没有任何一张卡记录其 CANN 或 torch_npu 版本",
            (),
            (
                "each rank's profiler_info_{rank}.json (it records the CANN and torch_npu "
                "versions), or print torch_npu.__version__ and torch_npu.get_cann_version() on "
                "every rank at start-up",
                "每张卡的 profiler_info_{rank}.json（其中记录了 CANN 与 torch_npu 版本），或在每张卡"
                "启动时打印 torch_npu.__version__ 与 torch_npu.get_cann_version()",
            ),
        )
    mixed = {sw: g for sw, g in by_sw.items() if len(g) > 1}
    if mixed:
        en_parts, zh_parts = [], []
        aligned_en = aligned_zh = ""
        culprit = set(top.blamed_ranks()) if top is not None else set()
        for sw, g in mixed.items():
            en_parts.append(f"{sw} " + ", ".join(f"{v} on {ranks_label(rs)[0]}" for v, rs in g))
            zh_parts.append(f"{sw} " + "，".join(f"{ranks_label(rs)[1]}为 {v}" for v, rs in g))
            hit = next((v for v, rs in g if culprit and culprit <= set(rs)), None)
            if hit is not None and top is not None and not aligned_en:
                cl, cl_zh = ranks_label(sorted(culprit))
                aligned_en = f"; the slower {cl} are the ones on {sw} {hit}: {lower_first(top.summary.rstrip('.'))}"
                aligned_zh = (
                    f"；较慢的{cl_zh}正是 {sw} {hit} 的那些卡：{top.summary_zh.rstrip('。')}"
                )
        if not aligned_en and top is not None:
            aligned_en = (
                "; the measured top cause does not line up with the version groups: "
                f"{lower_first(top.summary.rstrip('.'))}"
            )
            aligned_zh = f"；测得的主要原因与版本分组并不对应：{top.summary_zh.rstrip('。')}"
        return _v(
            "version",
            "supported",
            "the ranks run different versions: " + "; ".join(en_parts) + aligned_en,
            "各卡的软件版本不同：" + "；".join(zh_parts) + aligned_zh,
            (top,),
        )
    same = ", ".join(f"{sw} {g[0][0]}" for sw, g in by_sw.items())
    n = len({r for g in by_sw.values() for _, rs in g for r in rs})
    cover = "every rank" if n >= len(d.ranks) else f"the {n} ranks that record it"
    cover_zh = "所有卡" if n >= len(d.ranks) else f"记录了版本的 {n} 张卡"
    rest_en = f"; the time goes to {lower_first(top.summary.rstrip('.'))}" if top else ""
    rest_zh = f"；时间花在：{top.summary_zh.rstrip('。')}" if top else ""
    return _v(
        "version",
        "contradicted",
        f"{cover} records the same versions ({same}){rest_en}",
        f"{cover_zh}记录的版本相同（{same}）{rest_zh}",
        (top,),
    )


def _graph_break(d: Diagnosis) -> Verdict:
    """Whether a compiled model runs as several graphs the device waits between (graph breaks).

    From a cause's ``graphs_per_step`` / ``graph_breaks_per_step`` / ``graph_break_idle_us``
    metrics (``decompose.graph_runs``: kernel_details.csv Model ID).
    """
    c = next((x for x in _real(d) if "graphs_per_step" in x.metrics), None)
    if c is not None:
        g, b = c.metrics["graphs_per_step"], c.metrics["graph_breaks_per_step"]
        idle = ms(c.metrics["graph_break_idle_us"])
        return _v(
            "graph_break",
            "supported",
            f"the compiled model runs as {g:.0f} graphs per step (Model ID in kernel_details.csv) "
            f"and the device idles {idle} per step before {b:.0f} of them, where the host "
            f"synchronizes and runs Python between graphs — {lower_first(c.summary.rstrip('.'))}",
            f"编译后的模型每步分成 {g:.0f} 个图执行（kernel_details.csv 的 Model ID），设备每步在其中 "
            f"{b:.0f} 个图开始前空闲 {idle}，主机在图与图之间同步并执行 Python——{c.summary_zh.rstrip('。')}",
            (c,),
        )
    if d.kernel_data:
        top = _top(d)
        en, zh = _top_text(top)
        return _v(
            "graph_break",
            "contradicted",
            "no graph run in this profile is preceded by device idle (kernel_details.csv Model ID: "
            f"eager operators, or graphs launched back to back); {en}",
            "这份数据中没有哪个图执行之前设备在空闲（kernel_details.csv 的 Model ID：要么是单算子执行，"
            f"要么图是连续下发的）；{zh}",
            (top,),
        )
    return _v(
        "graph_break",
        "undecided",
        "this profile has no per-kernel data (Model ID) to see the graphs the model runs as",
        "这份数据没有逐算子数据（Model ID），看不出模型分成了哪些图",
        (),
        (
            "kernel_details.csv (profiler Level1 or above)",
            "kernel_details.csv（profiler Level1 及以上）",
        ),
    )


_JUDGES: dict[str, Callable[[Diagnosis], Verdict]] = {
    "gc": _gc,
    "network": lambda d: _network(d, "network"),
    "link": lambda d: _network(d, "link"),
    "card": _card,
    "hardware": _hardware,
    "kernel_slow": _kernels,
    "compute_straggler": _straggler,
    "load_imbalance": _imbalance,
    "dataloader": _dataloader,
    "checkpoint": _checkpoint,
    "zero_stage": _zero,
    "tp_size": _tp,
    "mc2": _mc2,
    "hccl_timeout": _timeout,
    "memory": _memory,
    "fragmentation": _fragmentation,
    "host_dispatch": _host,
    "software_bug": _software,
    "capacity": _capacity,
    "profiler": _profiler,
    "host_sync": _host_sync,
    "aicpu": _aicpu,
    "graph_break": _graph_break,
    "throttling": _throttling,
    "memory_bandwidth": _memory_bandwidth,
    "device_shared": _device_shared,
    "version": _version,
}


#: Hypotheses about something late or slow (a node, a card, a link), which a node's clock offset
#: (it only looks late on a merged timeline) contradicts when nothing else is found.
_LATE_HYPOTHESES = frozenset(
    {"network", "link", "card", "hardware", "compute_straggler", "host_dispatch"}
)


def _clock_artifact(d: Diagnosis) -> RootCause | None:
    """The no-culprit cause when it carries a node's clock offset and nothing else is found."""
    if _real(d):
        return None
    return next(
        (
            c
            for c in d.causes
            if c.mechanism is Mechanism.NO_CULPRIT and "clock_offset_us" in c.metrics
        ),
        None,
    )


def judge(d: Diagnosis, hypothesis: str, ranks: Sequence[int] = ()) -> Verdict:
    """Judge one hypothesis against the diagnosis.

    Args:
        d: The diagnosis.
        hypothesis: One of :data:`HYPOTHESES`.
        ranks: The ranks the question names ("should we replace rank 14's card?"): the card
            verdict judges their cause first.

    Returns:
        The :class:`Verdict`; a profile that cannot be diagnosed (``not enough signal`` only)
        gives ``undecided`` with what to collect.

    Raises:
        ValueError: ``hypothesis`` is not one of :data:`HYPOTHESES`.
    """
    if hypothesis not in _JUDGES:
        raise ValueError(f"unknown hypothesis {hypothesis!r}; known: {', '.join(HYPOTHESES)}")
    nes = next((c for c in d.causes if c.mechanism is Mechanism.NOT_ENOUGH_SIGNAL), None)
    if nes is not None and not _real(d):
        return Verdict(
            hypothesis,
            "undecided",
            nes.summary.rstrip("."),
            nes.summary_zh.rstrip("。"),
            (nes.id,),
            nes.remedies[0].text if nes.remedies else "",
            nes.remedies[0].text_zh if nes.remedies else "",
        )
    clocked = _clock_artifact(d)
    if clocked is not None and hypothesis in _LATE_HYPOTHESES:
        # "node 1 always arrives last, is its NIC bad?": nobody is late, its clock is offset
        # (the clock clause is the no-culprit summary's last, engine.clock_note)
        return _v(
            hypothesis,
            "contradicted",
            "nothing there is late, no rank, link or node stands out: "
            + clocked.summary.rstrip(".").rsplit("; ", 1)[-1],
            "那里并没有谁晚到，没有哪张卡、链路或机器异常："
            + clocked.summary_zh.rstrip("。").rsplit("；", 1)[-1],
        )
    if hypothesis == "card":
        return _card(d, ranks)
    if hypothesis == "hardware":
        missing = _missing_late(d)
        if missing is not None:
            return replace(missing, hypothesis="hardware")
    return _JUDGES[hypothesis](d)


__all__ = ["HYPOTHESES", "NAMES", "Verdict", "judge"]
