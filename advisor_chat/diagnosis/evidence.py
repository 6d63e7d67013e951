"""From a decomposition to the sentence and the remedy it selects (English and Chinese).

:func:`explain_device` turns a :class:`~advisor_chat.diagnosis.decompose.DeviceAccount` into the
clause that says what in a culprit's device time differs from its peers, and the action that
evidence points to: every action names the evidence that selected it (DESIGN.md §4c, §6).
:func:`explain_hotspot` does the same for a job-level item that dominates every rank.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field

from advisor_chat.diagnosis.decompose import OPTIMIZER_OPS, DeviceAccount, JobItem, Outliers
from advisor_chat.diagnosis.text import ms, pct
from advisor_chat.diagnosis.types import BoundKind, Remedy

#: A decomposition explains a culprit's extra compute when its verdict kind holds at least this
#: share of the extra device time.
EXPLAINS_SHARE = 0.5

_CORE_ZH = {"AI_CPU": "AI CPU", "AI_CORE": "AI Core", "AI_VECTOR_CORE": "AI Vector Core"}


def _agree(who: str, singular: str, plural: str) -> str:
    """The verb or pronoun that agrees with ``who`` ("ranks 0-3 launch", "rank 3 launches")."""
    return plural if who.startswith("ranks ") else singular


def _core(c: str) -> str:
    return _CORE_ZH.get(c.upper(), c)


@dataclass(frozen=True)
class Explanation:
    """What the evidence says and the action it selects.

    Attributes:
        kind: The decomposition verdict (``uniform``, ``placement``, ``dtype``, ``format``, ``shape``,
            ``extra_work``, ``slower``), ``outliers`` (a few very long launches), ``aicpu``
            (every AI CPU kernel slower, its AI Core kernels not) or ``setting`` (HF32 off where
            the peers have it on).
        clause: English clause, e.g. ``SoftmaxV2 runs on AI CPU (3.0 ms per launch) where its
            peers run it on AI Core (0.3 ms)``.
        clause_zh: Chinese clause.
        remedy: The action the evidence selects (its gain filled in by the caller).
        operator: Operator type named by the evidence ('' for a uniform slowdown).
        shape: Its input shapes on the culprit.
        metrics: Numbers behind the clause (µs, ratios), for the cause's metrics.
        tags: Symptom tags for case retrieval.
    """

    kind: str
    clause: str
    clause_zh: str
    remedy: Remedy
    operator: str = ""
    shape: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    tags: tuple[str, ...] = ()


#: A culprit whose mean AI Core clock is this share below its peers' is down-clocked (the AI Core
#: frequency check of msprof-analyze's advisor flags a 5% decrease).
CLOCK_DROP = 0.05


def _clock(acc: DeviceAccount, who: str, who_zh: str) -> tuple[str, str, tuple[str, str]] | None:
    """What the AI Core Freq track says of a device-wide slowdown: (clause, Chinese, remedy texts).

    The remedy texts (English, Chinese) replace the generic health-and-clocks check of a uniform
    slowdown (the measured clock names the cause or rules it out); ``None`` without the track on
    both sides.
    """
    c, p = acc.clock_mhz_culprit, acc.clock_mhz_peer
    if not (math.isfinite(c) and math.isfinite(p)) or p <= 0:
        return None
    if c < (1.0 - CLOCK_DROP) * p:
        return (
            f"its AI Core clock averaged {c:.0f} MHz against {p:.0f} MHz on its peers (AI Core "
            f"Freq counter, {c / p:.2f}x): the device is down-clocked",
            f"其 AI Core 频率平均为 {c:.0f} MHz，其他卡为 {p:.0f} MHz（AI Core 频率计数器，"
            f"{c / p:.2f} 倍）：设备被降频",
            (
                f"Find why {who} is down-clocked (npu-smi info: temperature, power and its limit, "
                f"AI Core frequency; the fans and airflow of its server): its AI Core runs at "
                f"{c:.0f} MHz against {p:.0f} MHz on its peers; reset or replace the device if the "
                "clock stays low once cooled or powered normally.",
                f"查明{who_zh}为何降频（`npu-smi info`：温度、功耗及其上限、AI Core 频率；所在服务器的"
                f"风扇与风道）：其 AI Core 频率为 {c:.0f} MHz，其他卡为 {p:.0f} MHz；若散热和供电正常后"
                "频率仍低，则复位或更换该设备。",
            ),
        )
    return (
        f"its AI Core clock was {c:.0f} MHz, as on its peers ({p:.0f} MHz, AI Core Freq "
        "counter): not down-clocked",
        f"其 AI Core 频率为 {c:.0f} MHz，与其他卡（{p:.0f} MHz，AI Core 频率计数器）相同：并未降频",
        (
            f"Check {who}'s NPU health (npu-smi info: health, ECC errors, temperature) and reset or "
            "replace the device if it is degraded: every operator on it is slower by the same "
            f"factor although its AI Core clock is its peers' ({c:.0f} MHz).",
            f"检查{who_zh}的 NPU 健康状态（`npu-smi info`：健康状态、ECC 错误、温度），若性能劣化则复位或"
            f"更换该设备：其 AI Core 频率与其他卡相同（{c:.0f} MHz），但所有算子按同一倍数变慢。",
        ),
    )


def _fewer_cores(
    acc: DeviceAccount, who: str, who_zh: str, m: dict[str, float]
) -> tuple[str, str, str, str] | None:
    """A device-wide slowdown on devices that report fewer cores: (clause, zh, remedy, zh).

    From :attr:`DeviceAccount.device` (info.json ``DeviceInfo``: ``ai_core_num``, ``aiv_num``):
    fewer AI Cores than the peers at the same work is a card of another model (SKU) or one with
    cores fenced off, and every kernel is split over fewer cores. Adds the counts to ``m``.
    ``None`` when the culprit reports no fewer AI Cores.
    """
    aic = acc.device.get("ai_core_num")
    if aic is None or not aic[0] < aic[1]:
        return None
    aiv = acc.device.get("aiv_num")
    m |= {"ai_core_num": aic[0], "ai_core_num_peer": aic[1]}
    vec = vec_zh = vec_p = vec_p_zh = ""
    if aiv is not None:
        m |= {"aiv_num": aiv[0], "aiv_num_peer": aiv[1]}
        vec, vec_p = f" and {aiv[0]:g} AI Vector cores", f" and {aiv[1]:g}"
        vec_zh, vec_p_zh = f"、{aiv[0]:g} 个 AI Vector 核", f"、{aiv[1]:g} 个"
    return (
        f"its devices report {aic[0]:g} AI Cores{vec} (ai_core_num / aiv_num of info.json) against "
        f"{aic[1]:g}{vec_p} on its peers: a card of another model (SKU) or with cores disabled, so "
        "every kernel is split over fewer cores",
        f"其设备报告 {aic[0]:g} 个 AI Core{vec_zh}（info.json 的 ai_core_num / aiv_num），其他卡为 "
        f"{aic[1]:g} 个{vec_p_zh}：是另一型号（规格）的卡或部分核被禁用，每个算子只能切分到更少的核上",
        f"Run the job on cards of one model: {who} report {aic[0]:g} AI Cores against {aic[1]:g} "
        "on the others (npu-smi info -t board shows the chip model); replace those cards or move "
        "the job to nodes of the same SKU, or give those ranks proportionally less work.",
        f"在同一型号的卡上运行作业：{who_zh}报告 {aic[0]:g} 个 AI Core，其他卡为 {aic[1]:g} 个"
        "（`npu-smi info -t board` 可查看芯片型号）；更换这些卡、把作业调度到同一规格的节点，"
        "或按核数给这些卡分配更少的工作量。",
    )


#: What a per-kernel counter measures (English, Chinese), for the clause that states it.
COUNTER_MEANING = {
    "block_dim": ("cores it is split over", "切分的核数"),
    "aic_mac_ratio": ("cube MAC busy share", "Cube MAC 忙碌占比"),
    "aic_mte2_ratio": (
        "share of AI Core time loading from HBM",
        "AI Core 从 HBM 搬入数据的时间占比",
    ),
    "aic_scalar_ratio": ("AI Core scalar share", "AI Core 标量计算占比"),
    "aic_fixpipe_ratio": ("AI Core fixpipe (write-out) share", "AI Core fixpipe（写出）占比"),
    "aic_icache_miss_rate": ("AI Core instruction-cache miss rate", "AI Core 指令缓存缺失率"),
    "aiv_vec_ratio": ("vector unit busy share", "Vector 单元忙碌占比"),
    "aiv_mte2_ratio": (
        "share of AI Vector time loading from HBM",
        "AI Vector 从 HBM 搬入数据的时间占比",
    ),
    "aiv_mte3_ratio": (
        "share of AI Vector time writing to HBM",
        "AI Vector 向 HBM 写回数据的时间占比",
    ),
    "aiv_scalar_ratio": ("AI Vector scalar share", "AI Vector 标量计算占比"),
    "aiv_icache_miss_rate": ("AI Vector instruction-cache miss rate", "AI Vector 指令缓存缺失率"),
    "cube_utilization_pct": ("cube utilization, %", "Cube 利用率（%）"),
}
#: At most this many differing counters are stated in one clause.
COUNTERS_STATED = 2


def counter_clause(acc: DeviceAccount, m: dict[str, float]) -> tuple[str, str]:
    """The per-kernel counters that differ from the peers, as ``("; name a against b (...)", zh)``.

    ``block_dim`` first, then the largest relative differences, at most ``COUNTERS_STATED``;
    source: kernel_details.csv PMU columns / DB ``TASK_PMU_INFO`` (``decompose._counters``).
    Adds ``{name}`` and ``{name}_peer`` to ``m``. ``("", "")`` when none differs.
    """
    items = [(k, v) for k, v in acc.counters.items() if k in COUNTER_MEANING]

    def rel(kv: tuple[str, tuple[float, float]]) -> float:
        a, b = kv[1]
        return 2.0 if kv[0] == "block_dim" else abs(a - b) / max(abs(a), abs(b), 1e-12)

    items.sort(key=rel, reverse=True)
    en, zh = [], []
    for name, (a, b) in items[:COUNTERS_STATED]:
        fmt = ".0f" if name in ("block_dim", "cube_utilization_pct") else ".2f"
        what, what_zh = COUNTER_MEANING[name]
        en.append(f"{name} {a:{fmt}} against {b:{fmt}} on its peers ({what})")
        zh.append(f"{name} 为 {a:{fmt}}，其他卡为 {b:{fmt}}（{what_zh}）")
        m[name], m[f"{name}_peer"] = a, b
    if not en:
        return "", ""
    return "; " + "; ".join(en), "；" + "；".join(zh)


def _hf32_off(
    acc: DeviceAccount,
    hf: tuple[float, float],
    who: str,
    who_zh: str,
    gain_us: float | None,
    m: dict[str, float],
    extra_txt: str,
    extra_zh: str,
) -> Explanation:
    """Slower because the culprit's fp32 Cube operators do not run in HF32 while its peers' do.

    From the ``HF32 Eligible`` column of kernel_details.csv (``decompose._hf32_shares``): the share
    of the fp32 Cube operators' launches marked YES on each side. The same operators, shapes and
    dtypes; the difference is a setting (``allow_hf32``), not the device.
    """
    slow = [o for o in acc.ops if o.kind == "slower"]
    ops = list(dict.fromkeys(o.op_type for o in slow))[:3]
    r = acc.uniform_ratio if acc.verdict == "uniform" else (slow[0].ratio if slow else float("nan"))
    m |= {"hf32_yes_share": hf[0], "hf32_yes_share_peer": hf[1]}
    if math.isfinite(r):
        m["slowdown_ratio"] = r
    names = ", ".join(ops) if ops else "Cube"
    names_zh = "、".join(ops) if ops else "Cube"
    slower = f" run about {r:.2f}x slower" if math.isfinite(r) else " run slower"
    slower_zh = f"慢约 {r:.2f} 倍" if math.isfinite(r) else "更慢"
    clause = (
        f"the fp32 Cube operators on {who} ({names}){slower} than on its peers with the same "
        f"shapes and dtypes{extra_txt}, and kernel_details.csv marks {pct(hf[0])} of their launches "
        f"HF32 Eligible YES against {pct(hf[1])} on its peers: HF32 is off on {who}, so they "
        "compute in full fp32 precision where the peers use HF32; a setting, not the device"
    )
    clause_zh = (
        f"{who_zh}上的 fp32 Cube 算子（{names_zh}）在 shape 和数据类型相同的情况下比其他卡{slower_zh}"
        f"{extra_zh}，kernel_details.csv 中这些算子标记 HF32 Eligible 为 YES 的比例为 {pct(hf[0])}，"
        f"其他卡为 {pct(hf[1])}：{who_zh}关闭了 HF32，这些算子按完整 fp32 精度计算，而其他卡使用 HF32；"
        "这是设置问题，不是设备问题"
    )
    rem = Remedy(
        "action",
        f"Turn HF32 on for {who} as on its peers (torch.npu.matmul.allow_hf32 = True and "
        "torch.npu.conv.allow_hf32 = True, or remove the setting or launcher option that turns "
        "it off there), or train in bf16 mixed precision everywhere.",
        f"像其他卡一样在{who_zh}上开启 HF32（torch.npu.matmul.allow_hf32 = True、"
        "torch.npu.conv.allow_hf32 = True，或去掉那里关闭它的设置或启动参数），或者全部改用 bf16 混合精度训练。",
        gain_us,
        BoundKind.ESTIMATE,
    )
    return Explanation("setting", clause, clause_zh, rem, ops[0] if ops else "", metrics=m,
                       tags=("dtype_mismatch",))  # fmt: skip


def explain_device(
    acc: DeviceAccount | None,
    who: str,
    who_zh: str,
    gain_us: float | None,
    *,
    said_us: float | None = None,
) -> Explanation | None:
    """The explanation of a culprit's extra device time, or ``None`` when nothing explains it.

    Args:
        acc: The culprit's :class:`DeviceAccount` against its peers.
        who: English label of the culprit (``rank 3``, ``ranks 0-7``).
        who_zh: Chinese label.
        gain_us: Per-step gain of the action (µs), ``None`` when unknown.
        said_us: An amount the caller's sentence already states (µs per step); a clause that
            would repeat it (a device-wide clause's extra device time, an operator clause's
            closing "X more per step") leaves it out (one figure per quantity).

    Returns:
        ``None`` without an account, when the culprit's device time is not longer, or when no
        kind holds at least ``EXPLAINS_SHARE`` of the extra time.
    """
    if acc is None or acc.verdict == "none" or acc.delta_us <= 0:
        return None
    held = acc.by_kind.get(acc.verdict, 0.0)
    if held < EXPLAINS_SHARE * acc.delta_us:
        return None
    v = acc.verdict
    extra = acc.delta_us
    said = said_us is not None and ms(said_us) == ms(extra)
    extra_txt = "" if said else f", {ms(extra)} more device time per step"
    extra_zh = "" if said else f"，每步多 {ms(extra)} 设备时间"
    m: dict[str, float] = {"device_extra_us": extra, "explained_us": held}
    if acc.outliers is not None and v in ("slower", "uniform", "engine"):
        return _explain_outliers(acc.outliers, extra, m, who, who_zh, gain_us)
    clock = _clock(acc, who, who_zh)
    if clock is not None:
        m |= {
            "aicore_clock_mhz": acc.clock_mhz_culprit,
            "peer_aicore_clock_mhz": acc.clock_mhz_peer,
        }
    hf = acc.counters.get("hf32_eligible_yes")
    if hf is not None and hf[0] < hf[1] and v in ("uniform", "engine", "slower"):
        return _hf32_off(acc, hf, who, who_zh, gain_us, m, extra_txt, extra_zh)
    if v == "uniform":
        r = acc.uniform_ratio
        m |= {"uniform_ratio": r, "uniform_share": acc.uniform_share}
        clause = (
            f"every operator on {who} runs about {r:.2f}x slower than on its peers (the same "
            f"operators, shapes and launch counts; {pct(acc.uniform_share)} of its device time "
            f"is slower by that factor){extra_txt}: the device itself is slower, not one operator"
        )
        cnt, cnt_zh = counter_clause(acc, m)
        clause_zh = (
            f"{who_zh}上几乎所有算子都比其他卡慢约 {r:.2f} 倍（算子、shape、调用次数都相同；"
            f"{pct(acc.uniform_share)} 的设备时间按这一倍数变慢）{extra_zh}："
            "是设备本身变慢，而不是某个算子"
        )
        clause, clause_zh = clause + cnt, clause_zh + cnt_zh
        rem = Remedy(
            "action",
            f"Check {who}'s NPU health and clocks (npu-smi info: temperature, power, AI Core "
            "frequency, health and ECC errors) and reset or replace the device if it is "
            "throttled or degraded: every operator on it is slower by the same factor.",
            f"检查{who_zh}的 NPU 健康状态和频率（`npu-smi info`：温度、功耗、AI Core 频率、健康状态和 "
            "ECC 错误），若降频或性能劣化则复位或更换该设备：其上所有算子按同一倍数变慢。",
            gain_us,
            BoundKind.ESTIMATE,
        )
        if clock is not None:
            clause, clause_zh = f"{clause}; {clock[0]}", f"{clause_zh}；{clock[1]}"
            rem = dataclasses.replace(rem, text=clock[2][0], text_zh=clock[2][1])
        cores = _fewer_cores(acc, who, who_zh, m)
        if cores is not None:
            clause, clause_zh = f"{clause}; {cores[0]}", f"{clause_zh}；{cores[1]}"
            rem = dataclasses.replace(rem, text=cores[2], text_zh=cores[3])
        return Explanation(v, clause, clause_zh, rem, metrics=m, tags=("device_slow",))
    if v == "engine":
        r, core = acc.engine_ratio, acc.engine
        # the vector unit runs the memory-bound operators: its slowdown alone points at HBM
        m |= {
            "engine_ratio": r,
            "other_engines_ratio": acc.other_ratio,
            "memory_bound_engine": 1.0 if "VECTOR" in str(core).upper() else 0.0,
        }
        clause = (
            f"every operator {who} runs on {core} is about {r:.2f}x slower than on its peers "
            f"(the same operators, shapes and launch counts), while its other operators"
            f"{' (' + ', '.join(acc.other_ops) + ')' if acc.other_ops else ''} run at "
            f"{acc.other_ratio:.2f}x{extra_txt}: one unit of the "
            f"device is slower ({core}, which mostly runs memory-bound operators), not the work"
        )
        cnt, cnt_zh = counter_clause(acc, m)
        clause_zh = (
            f"{who_zh}上在 {core} 上运行的算子都比其他卡慢约 {r:.2f} 倍（算子、shape、调用次数都相同），"
            f"其余算子{'（' + '、'.join(acc.other_ops) + '）' if acc.other_ops else ''}为 "
            f"{acc.other_ratio:.2f} 倍{extra_zh}：是设备的一个单元"
            f"（{core}，主要运行访存密集型算子）变慢，而不是计算量变了"
        )
        clause, clause_zh = clause + cnt, clause_zh + cnt_zh
        rem = Remedy(
            "action",
            f"Check {who}'s NPU health (npu-smi info: health, HBM ECC errors and memory "
            f"frequency, temperature) and run the device's memory-bandwidth test; reset or "
            f"replace the device if it is degraded: only its {core} operators are slower.",
            f"检查{who_zh}的 NPU 健康状态（`npu-smi info`：健康状态、HBM ECC 错误与显存频率、温度），"
            f"并做该设备的显存带宽测试；若性能劣化则复位或更换该设备：只有其 {core} 上的算子变慢。",
            gain_us,
            BoundKind.ESTIMATE,
        )
        if clock is not None:
            clause, clause_zh = f"{clause}; {clock[0]}", f"{clause_zh}；{clock[1]}"
            if acc.clock_mhz_culprit < (1.0 - CLOCK_DROP) * acc.clock_mhz_peer:
                rem = dataclasses.replace(rem, text=clock[2][0], text_zh=clock[2][1])
        return Explanation(v, clause, clause_zh, rem, metrics=m, tags=("device_slow",))
    top = acc.top_of(v)
    if top is None:
        return None
    op = top.op_type
    m |= {"op_delta_us": top.delta_us}
    if math.isfinite(top.ratio):
        m["op_avg_ratio"] = top.ratio
    if v == "placement":
        clause = (
            f"{op} runs on {_core(top.core_culprit)} on {who} ({ms(top.avg_us_culprit)} per "
            f"launch, {top.count_culprit:.0f} per step) where its peers run it on "
            f"{_core(top.core_peer)} ({ms(top.avg_us_peer)} per launch): {ms(top.delta_us)} "
            "more per step"
        )
        clause_zh = (
            f"{who_zh}上的 {op} 运行在 {_core(top.core_culprit)} 上（每次 {ms(top.avg_us_culprit)}，"
            f"每步 {top.count_culprit:.0f} 次），而其他卡在 {_core(top.core_peer)} 上运行（每次 "
            f"{ms(top.avg_us_peer)}）：每步多 {ms(top.delta_us)}"
        )
        rem = Remedy(
            "action",
            f"Make {op} run on {_core(top.core_peer)} on {who} as it does on its peers: find why "
            f"it falls back to {_core(top.core_culprit)} there (an input dtype, format or shape "
            "its AI Core kernel does not support, or a different CANN / operator package on that "
            "node; the plog names the fallback) and align those inputs or that software.",
            f"让{who_zh}上的 {op} 像其他卡一样运行在 {_core(top.core_peer)} 上：查明它为何回退到 "
            f"{_core(top.core_culprit)}（输入的数据类型、格式或 shape 不被 AI Core 算子支持，或该节点的 "
            "CANN / 算子包不同；plog 中会记录回退原因），并使输入或软件与其他卡一致。",
            gain_us,
            BoundKind.ESTIMATE,
        )
        tags: tuple[str, ...] = ("aicpu_op",)
    elif v == "dtype":
        clause = (
            f"{op} takes {top.dtype_culprit} inputs on {who} where its peers use "
            f"{top.dtype_peer} ({ms(top.avg_us_culprit)} against {ms(top.avg_us_peer)} per "
            f"launch): {ms(top.delta_us)} more per step"
        )
        clause_zh = (
            f"{who_zh}上的 {op} 输入为 {top.dtype_culprit}，而其他卡为 {top.dtype_peer}"
            f"（每次 {ms(top.avg_us_culprit)}，其他卡 {ms(top.avg_us_peer)}）：每步多 {ms(top.delta_us)}"
        )
        rem = Remedy(
            "action",
            f"Run {who} in the same precision as its peers: its {op} computes in "
            f"{top.dtype_culprit} instead of {top.dtype_peer}; check the mixed-precision "
            "settings on that rank (autocast / amp level, the model or optimizer dtype, a "
            "per-rank config).",
            f"让{who_zh}使用与其他卡相同的精度：其 {op} 以 {top.dtype_culprit} 而非 {top.dtype_peer} "
            "计算；检查该卡的混合精度设置（autocast / amp 级别、模型或优化器的数据类型、按卡的配置）。",
            gain_us,
            BoundKind.ESTIMATE,
        )
        tags = ("dtype_mismatch",)
    elif v == "format":
        clause = (
            f"{op} [{top.shape_culprit}] reads its inputs as {top.format_culprit} on {who} where its peers use "
            f"{top.format_peer} (the same shapes and dtypes; {ms(top.avg_us_culprit)} against "
            f"{ms(top.avg_us_peer)} per launch): {ms(top.delta_us)} more per step"
        )
        clause_zh = (
            f"{who_zh}上的 {op} [{top.shape_culprit}] 输入格式为 {top.format_culprit}，而其他卡为 {top.format_peer}"
            f"（shape 与数据类型相同；每次 {ms(top.avg_us_culprit)}，其他卡 {ms(top.avg_us_peer)}）："
            f"每步多 {ms(top.delta_us)}"
        )
        # the versions only when they can be the difference (recorded the same: not named)
        vd = acc.versions_differ
        mid, mid_zh = (
            (" and any npu_format_cast in the model code", "和模型代码中的 npu_format_cast")
            if vd is False
            else (
                ", any npu_format_cast in the model code and the CANN / torch_npu versions",
                "、模型代码中的 npu_format_cast 以及 CANN / torch_npu 版本",
            )
        )
        first, first_zh = (
            (
                " Its CANN / torch_npu versions differ from its peers': align them first.",
                "该卡的 CANN / torch_npu 版本与其他卡不同：先统一版本。",
            )
            if vd
            else ("", "")
        )
        rem = Remedy(
            "action",
            f"Give {who} the same tensor formats as its peers: its {op} gets {top.format_culprit} "
            f"instead of {top.format_peer}, which selects another kernel; compare the internal-format "
            f"setting (torch_npu.npu.config.allow_internal_format){mid} on that rank with a "
            f"peer's.{first}",
            f"让{who_zh}使用与其他卡相同的张量格式：其 {op} 的输入为 {top.format_culprit} 而非 "
            f"{top.format_peer}，因而走了另一个算子实现；对比该卡与其他卡的私有格式设置"
            f"（torch_npu.npu.config.allow_internal_format）{mid_zh}。{first_zh}",
            gain_us,
            BoundKind.ESTIMATE,
        )
        tags = ("op_regression_shape",) + (("matmul_slow",) if "matmul" in op.lower() else ())
    elif v == "shape":
        vary = " (a different shape in each step: the work follows the data)"
        vary_zh = "（每步的 shape 都不同：计算量随数据变化）"
        clause = (
            f"{op} gets larger inputs on {who} ([{top.shape_culprit}] against "
            f"[{top.shape_peer}] on its peers){vary if acc.varies_by_unit else ''}: "
            f"{ms(top.delta_us)} more per step, more work rather than slower kernels"
        )
        clause_zh = (
            f"{who_zh}上的 {op} 输入更大（[{top.shape_culprit}]，其他卡为 [{top.shape_peer}]）"
            f"{vary_zh if acc.varies_by_unit else ''}：每步多 {ms(top.delta_us)}，是计算量更多而不是算子更慢"
        )
        rem = Remedy(
            "action",
            f"Balance the work across ranks: {who} gets larger {op} inputs than its peers "
            f"([{top.shape_culprit}] vs [{top.shape_peer}]); give every rank the same tokens per "
            "step (length-grouped or bucketed sampling, sequence packing, an even batch / "
            "expert split).",
            f"均衡各卡的计算量：{who_zh}的 {op} 输入比其他卡大（[{top.shape_culprit}] 对 "
            f"[{top.shape_peer}]）；让每张卡每步处理相同的 token 数（按长度分组或分桶采样、序列打包、"
            "均匀切分 batch / 专家）。",
            gain_us,
            BoundKind.ESTIMATE,
        )
        tags = ("load_imbalance",)
    elif v == "extra_work":
        more = top.count_culprit - top.count_peer
        # the duration of one launch: the peers' when they run it too, else the culprit's own
        each = top.avg_us_peer if top.count_peer > 0 else top.avg_us_culprit
        # the launches counted are those of one variant (operator and input shapes)
        var = f"{op} [{top.shape_culprit}]" if top.shape_culprit else op
        clause = (
            f"{who} {_agree(who, 'launches', 'launch')} {more:.0f} more {var} per step than "
            f"{_agree(who, 'its', 'their')} peers "
            f"({top.count_culprit:.0f} against {top.count_peer:.0f}, {ms(each)} each): "
            f"{ms(top.delta_us)} more per step of extra work, not slower kernels"
        )
        clause_zh = (
            f"{who_zh}每步比其他卡多调用 {more:.0f} 次 {var}（{top.count_culprit:.0f} 次对 "
            f"{top.count_peer:.0f} 次，每次 {ms(each)}）：每步多 {ms(top.delta_us)}，"
            "是多做了计算，而不是算子变慢"
        )
        ratio = top.count_culprit / top.count_peer if top.count_peer > 0 else math.nan
        # gradient operators run that much more often too: whole layers more, not a forward re-run
        # (of other operator families than the top one: another variant of the same operator,
        # or its own gradient, running more says nothing about the other layers' operators)
        family = top.op_type.lower().replace("grad", "")
        grads = [
            o
            for o in acc.ops
            if o is not top
            and "grad" in o.op_type.lower()
            and o.op_type.lower().replace("grad", "") != family
            and o.count_peer > 0
        ]
        layers = math.isfinite(ratio) and any(
            abs(o.count_culprit / o.count_peer - ratio) <= LAYER_RATIO_TOL * ratio for o in grads
        )
        pc, pp = acc.passes
        more_passes = math.isfinite(pc) and math.isfinite(pp) and pc >= pp + 1
        if layers and ratio >= 1.2 and more_passes:
            # whole forward + backward passes more: more micro-batches per step, not more layers
            g = max(grads, key=lambda o: o.delta_us)
            m |= {"passes_per_step": pc, "peer_passes_per_step": pp}
            clause += (
                f"; its gradient operators run {g.count_culprit / g.count_peer:.2f}x as often too "
                f"({g.op_type} {g.count_culprit:.0f} against {g.count_peer:.0f}): it runs "
                f"{pc:.0f} forward / backward passes (micro-batches) per step where its peers run "
                f"{pp:.0f}, so it gets more of the global batch; in all its kernels run "
                f"{ms(acc.delta_us)} more per step than its peers'"
            )
            clause_zh += (
                f"；其梯度算子也多运行了 {g.count_culprit / g.count_peer:.2f} 倍（{g.op_type} "
                f"{g.count_culprit:.0f} 次对 {g.count_peer:.0f} 次）：它每步跑 {pc:.0f} 个前向 / 反向"
                f"（微批次），其他卡跑 {pp:.0f} 个，分到的全局 batch 更多；其所有算子合计每步比其他卡多 "
                f"{ms(acc.delta_us)}"
            )
            rem = Remedy(
                "action",
                f"Split the global batch evenly: {who} runs {pc:.0f} micro-batches per step, its "
                f"peers {pp:.0f}; make the micro-batches per step a multiple of the data-parallel "
                "size (or give every rank the same number of samples / tokens), so no rank waits "
                "for the others.",
                f"均匀切分全局 batch：{who_zh}每步跑 {pc:.0f} 个微批次，其他卡 {pp:.0f} 个；让每步的微批次数"
                "是数据并行数的整数倍（或让每张卡的样本 / token 数相同），这样就没有卡要等别的卡。",
                gain_us,
                BoundKind.ESTIMATE,
            )
            tags = ("load_imbalance", "op_count_imbalance")
            return Explanation(v, clause, clause_zh, rem, op, top.shape_culprit, m, tags)
        if layers and ratio >= 1.2:
            g = max(grads, key=lambda o: o.delta_us)
            clause += (
                f"; its gradient operators run {g.count_culprit / g.count_peer:.2f}x as often too "
                f"({g.op_type} {g.count_culprit:.0f} against {g.count_peer:.0f}): forward and "
                f"backward alike, so it holds about {ratio:.2f}x the layers of its peers (an "
                "uneven layer split), not a re-run of the forward; in all its kernels run "
                f"{ms(acc.delta_us)} more per step than its peers'"
            )
            clause_zh += (
                f"；其梯度算子也多运行了 {g.count_culprit / g.count_peer:.2f} 倍（{g.op_type} "
                f"{g.count_culprit:.0f} 次对 {g.count_peer:.0f} 次）：前向和反向同样增多，说明它承担的层数约为"
                f"其他卡的 {ratio:.2f} 倍（层切分不均），而不是前向被重算；其所有算子合计每步比其他卡多 "
                f"{ms(acc.delta_us)}"
            )
        elif (
            top.count_peer > 0
            and top.count_culprit >= 1.5 * top.count_peer
            and "grad" not in top.op_type.lower()  # recomputation re-runs forward operators
        ):
            # the operators the peers also run, run again: what activation recomputation does
            # (the forward re-run in the backward)
            clause += (
                f"; the same {op} the peers run, run again ({top.count_culprit / top.count_peer:.1f}x "
                "as often), as activation recomputation (re-running the forward in the backward) does"
            )
            clause_zh += (
                f"；其他卡也运行的 {op} 在这里多跑了一遍（{top.count_culprit / top.count_peer:.1f} 倍），"
                "这正是激活重计算（反向时重新执行前向）的特征"
            )
        rem = Remedy(
            "action",
            f"Remove the extra {op} work on {who}: it runs {op} {more:.0f} more times per step "
            "than its peers (a branch only that rank takes, such as metrics, logging or "
            "evaluation, or an uneven layer / expert assignment).",
            f"去掉{who_zh}上多出的 {op} 计算：它每步比其他卡多运行 {more:.0f} 次 {op}"
            "（只有该卡执行的分支，如指标、日志或评估，或层 / 专家分配不均）。",
            gain_us,
            BoundKind.ESTIMATE,
        )
        tags = ("load_imbalance", "op_count_imbalance")
        if acc.absent and top.count_peer == 0:
            # operators its peers launch that it never does, beside operators only it launches:
            # the peers' fused kernels run there as chains of small operators
            names = [a[0] for a in acc.absent[:4]]
            fused = ", ".join(names)
            extra_ops = ", ".join(o.op_type for o in acc.ops if o.count_peer == 0)
            extra_ops = ", ".join(dict.fromkeys(extra_ops.split(", ")).keys())
            clause += (
                f"; {_agree(who, 'it never runs', 'they never run')} {fused}, which "
                f"{_agree(who, 'its', 'their')} peers launch every step: the work of those "
                f"fused kernels runs on {who} as separate small operators ({extra_ops})"
            )
            clause_zh += (
                f"；它从不运行其他卡每步都运行的 {'、'.join(names)}：这些融合算子的计算在{who_zh}上被拆成了"
                f"一串小算子（{extra_ops.replace(', ', '、')}）"
            )
            rem = Remedy(
                "action",
                f"Give {who} the fused kernels its peers run ({fused}): the same software stack "
                "(CANN, torch_npu, the framework's fused-kernel switches such as "
                "--use-fused-rmsnorm / --use-fused-swiglu) as its peers, so the small operators "
                "it runs instead go away.",
                f"让{who_zh}也用上其他卡运行的融合算子（{'、'.join(names)}）：使用与其他卡相同的软件栈"
                "（CANN、torch_npu，以及框架的融合算子开关如 --use-fused-rmsnorm / --use-fused-swiglu），"
                "去掉它代替运行的那一串小算子。",
                gain_us,
                BoundKind.ESTIMATE,
            )
            tags = ("unfused_ops",)
    else:  # slower: the same operator, shape and dtype, slower per launch
        cnt, cnt_zh = counter_clause(acc, m)
        clause = (
            f"{op} [{top.shape_culprit}] is {top.ratio:.2f}x slower per launch on {who} than on "
            f"its peers with the same shape and dtype{cnt}: {ms(top.delta_us)} more per step"
        )
        clause_zh = (
            f"{who_zh}上的 {op} [{top.shape_culprit}] 在 shape 和数据类型相同的情况下每次比其他卡慢 "
            f"{top.ratio:.2f} 倍{cnt_zh}：每步多 {ms(top.delta_us)}"
        )
        rem = Remedy(
            "action",
            f"Make {op} [{top.shape_culprit}] on {who} run as on its peers: same shape and dtype, "
            "so it takes another kernel path there; check its format (ND / NZ), block_dim and "
            "op_state against a peer and the CANN / operator package version on that rank.",
            f"让{who_zh}上的 {op} [{top.shape_culprit}] 与其他卡一样快：shape 和数据类型相同，说明走了"
            "不同的算子实现；对比其他卡检查其格式（ND / NZ）、block_dim、op_state，以及该卡的 CANN / "
            "算子包版本。",
            gain_us,
            BoundKind.ESTIMATE,
        )
        tags = ("op_regression_shape",) + (("matmul_slow",) if "matmul" in op.lower() else ())
    opt_c, opt_p = acc.optimizer_us
    if OPTIMIZER_OPS.search(op) and math.isfinite(opt_c) and math.isfinite(opt_p):
        # one optimizer kernel of several: the optimizer step as a whole is what the rank runs more
        m |= {"optimizer_us_per_step": opt_c, "peer_optimizer_us_per_step": opt_p}
        clause += (
            f"; all its optimizer-step operators (Foreach* / Apply* / Adam) take {ms(opt_c)} per "
            f"step against {ms(opt_p)} on its peers ({ms(opt_c - opt_p)} more)"
        )
        clause_zh += (
            f"；其优化器更新的全部算子（Foreach* / Apply* / Adam）每步共 {ms(opt_c)}，其他卡为 "
            f"{ms(opt_p)}（多 {ms(opt_c - opt_p)}）"
        )
    if acc.versions is not None and v in ("extra_work", "slower", "placement", "format"):
        # another software stack on the culprit: the kernels it selects follow from it
        mine, theirs = acc.versions
        runs = _agree(who, "runs", "run")
        clause += f"; {who} {runs} {mine} where {_agree(who, 'its', 'their')} peers run {theirs}"
        clause_zh += f"；{who_zh}的软件版本为 {mine}，其他卡为 {theirs}"
        tags = (*tags, "version_mismatch")
        rem = dataclasses.replace(
            rem,
            text=f"Install on {who} the software its peers run ({theirs} instead of {mine}): "
            + rem.text[0].lower()
            + rem.text[1:],
            text_zh=f"在{who_zh}上安装与其他卡相同的软件（{theirs}，而不是 {mine}）："
            + rem.text_zh,
        )
    if said_us is not None and ms(said_us) == ms(top.delta_us):
        # the caller's sentence already states the amount: one figure per quantity
        tail, tail_zh = f": {ms(top.delta_us)} more per step", f"：每步多 {ms(top.delta_us)}"
        clause = clause.removesuffix(tail)
        clause_zh = clause_zh.removesuffix(tail_zh)
    return Explanation(v, clause, clause_zh, rem, op, top.shape_culprit, m, tags)


#: Chinese names of the composed computations (:data:`~advisor_chat.diagnosis.decompose.FUSIBLE`).
FUSION_ZH = {"attention": "注意力", "rotary position embedding": "旋转位置编码（RoPE）"}

#: Gradient operators that run as many times more as the top operator (within this share of its
#: launch ratio) mean whole layers more on the culprit, not a forward re-run.
LAYER_RATIO_TOL = 0.15


def _explain_outliers(
    o: Outliers,
    extra: float,
    m: dict[str, float],
    who: str,
    who_zh: str,
    gain_us: float | None,
) -> Explanation:
    """A few launches far longer than the same operator elsewhere: the device, in bursts."""
    m |= {
        "outlier_launches_per_step": o.per_unit,
        "outlier_ratio": o.ratio,
        "outlier_share": o.share,
        "other_launches_ratio": o.normal_ratio,
    }
    ops, ops_zh = ", ".join(o.ops[:3]), "、".join(o.ops[:3])
    if o.core == "AI_CPU" and o.core_hit_share >= AICPU_ALL_SLOW:
        return _explain_aicpu(o, extra, m, who, who_zh, gain_us)
    if o.variants == 1:
        return _explain_same_launch(o, extra, m, who, who_zh, gain_us)
    where = (
        f"{o.variants} different operator shapes" if o.variants > 1 else "always the same launch"
    )
    where_zh = f"涉及 {o.variants} 种不同的算子 shape" if o.variants > 1 else "总是同一个算子调用"
    clause = (
        f"about {o.per_unit:.0f} launches per step on {who} ({ops}; {where}) take {o.ratio:.1f}x "
        f"as long as the same operator with the same shapes on its peers, while its other "
        f"launches run at {o.normal_ratio:.2f}x: {pct(o.share)} of its {ms(extra)} extra device "
        "time per step is in these few outliers, the signature of a device that stalls in bursts "
        "(memory ECC error correction, throttling), not of a slower kernel or more work"
    )
    clause_zh = (
        f"{who_zh}每步约有 {o.per_unit:.0f} 次算子调用（{ops_zh}；{where_zh}）耗时是其他卡相同算子、"
        f"相同 shape 的 {o.ratio:.1f} 倍，而它的其余调用为 {o.normal_ratio:.2f} 倍：每步多出的 "
        f"{ms(extra)} 设备时间中 {pct(o.share)} 来自这几个异常值，这是设备间歇性卡顿（显存 ECC 纠错、"
        "降频）的特征，而不是算子实现变慢或计算量变多"
    )
    rem = Remedy(
        "action",
        f"Check {who}'s NPU hardware: npu-smi info (health, HBM ECC error counts, temperature, "
        "power) and the device / kernel logs for corrected or uncorrected memory errors; if the "
        "error counts grow, take the card out of the job (exclude that device or node) and have "
        "it replaced.",
        f"检查{who_zh}的 NPU 硬件：`npu-smi info`（健康状态、HBM ECC 错误计数、温度、功耗）以及设备 / "
        "内核日志中的可纠正或不可纠正显存错误；若错误计数持续增长，把这张卡移出作业（排除该设备或节点）"
        "并更换。",
        gain_us,
        BoundKind.ESTIMATE,
    )
    return Explanation("outliers", clause, clause_zh, rem, metrics=m, tags=("device_slow",))


#: The outliers are the AI CPU's when at least this share of the culprit's AI CPU launches are.
AICPU_ALL_SLOW = 0.8


def _explain_aicpu(
    o: Outliers, extra: float, m: dict[str, float], who: str, who_zh: str, gain_us: float | None
) -> Explanation:
    """Every AI CPU kernel of the culprit far slower, its AI Core kernels at peer speed.

    The device's AI CPU (the card's control CPU cores that run AI_CPU kernels) is slower there:
    busy with other work on that card, not its AI Core, its host or its links.
    """
    m |= {"aicpu_outlier_share": o.core_hit_share}
    ops, ops_zh = ", ".join(o.ops[:3]), "、".join(o.ops[:3])
    clause = (
        f"its AI CPU kernels ({ops}; about {o.per_unit:.0f} launches per step, "
        f"{pct(o.core_hit_share)} of its AI_CPU launches) take {o.ratio:.1f}x as long as the same "
        f"operators with the same shapes on its peers, while its AI Core kernels run at "
        f"{o.normal_ratio:.2f}x: {pct(o.share)} of its {ms(extra)} extra device time per step "
        "is on the AI CPU (kernel_details.csv Accelerator Core AI_CPU): the device's AI CPU is "
        "busy with other work on that card, not its AI Core"
    )
    clause_zh = (
        f"其 AI CPU 算子（{ops_zh}；每步约 {o.per_unit:.0f} 次调用，占其 AI_CPU 调用的 "
        f"{pct(o.core_hit_share)}）耗时是其他卡相同算子、相同 shape 的 {o.ratio:.1f} 倍，而其 AI Core "
        f"算子为 {o.normal_ratio:.2f} 倍：每步多出的 {ms(extra)} 设备时间中 {pct(o.share)} 在 AI CPU 上"
        "（kernel_details.csv 的 Accelerator Core 为 AI_CPU）：这张卡的 AI CPU 被其他工作占用，"
        "而不是 AI Core 算力的问题"
    )
    rem = Remedy(
        "action",
        f"Find what else uses {who}'s AI CPU (npu-smi info -t usages -i <device id> shows its AI "
        "CPU usage; another process, data preprocessing or a monitoring agent on that card) and "
        f"stop it or move it elsewhere; also take {ops} off the AI CPU where an AI Core version "
        "exists (static shapes, or another formulation), so no step waits on it.",
        f"找出还有什么在占用{who_zh}的 AI CPU（`npu-smi info -t usages -i <设备号>` 可查看 AI CPU 占用率；"
        f"该卡上的其他进程、数据预处理或监控程序），停掉或迁走；并在有 AI Core 实现时让 {ops_zh} 不再跑在 "
        "AI CPU 上（静态 shape 或换一种写法），让训练步不再等它。",
        gain_us,
        BoundKind.ESTIMATE,
    )
    return Explanation("aicpu", clause, clause_zh, rem, metrics=m, tags=("aicpu_busy", "aicpu_op"))


#: Operators whose time depends on the values of their indices: repeated indices make their
#: accumulation into the same rows collide (embedding gradients, scatter / index adds).
INDEX_OPS = re.compile(r"embedding.*grad|scatter|indexadd|index_?put|unsortedsegment", re.I)


def _explain_same_launch(
    o: Outliers, extra: float, m: dict[str, float], who: str, who_zh: str, gain_us: float | None
) -> Explanation:
    """One launch, the same operator at the same input shapes, far longer on one rank every time.

    A device that stalls in bursts hits whichever kernels run then (several operators, several
    shapes); the same launch slower every time, at the shapes its peers run, does more work on
    that rank's input values: for an operator that accumulates by index (an embedding's
    gradient), many repeated indices (padding tokens) collide on the same rows.
    """
    op = o.ops[0] if o.ops else "the operator"
    indexed = INDEX_OPS.search(op) is not None
    why = (
        "; an operator that adds rows by index slows down when many indices repeat (e.g. "
        "padding tokens with one pad id, or many short samples padded to the same length)"
        if indexed
        else ""
    )
    why_zh = (
        "；按索引累加行的算子在索引大量重复时会变慢（例如用同一个 pad id 填充的 token，"
        "或许多短样本被填充到同一长度）"
        if indexed
        else ""
    )
    clause = (
        f"one launch per step on {who}, always the same ({op} at the same input shapes as on its "
        f"peers), takes {o.ratio:.1f}x as long as theirs, while its other launches run at "
        f"{o.normal_ratio:.2f}x ({pct(o.share)} of its {ms(extra)} extra device time per step): "
        "the same kernel with the same shapes doing more work on that rank's data, not a device "
        f"that stalls (that would hit other kernels too){why}"
    )
    clause_zh = (
        f"{who_zh}每步有一次算子调用（总是同一个：{op}，输入 shape 与其他卡相同）耗时是其他卡的 "
        f"{o.ratio:.1f} 倍，而它的其余调用为 {o.normal_ratio:.2f} 倍（占其每步多出的 {ms(extra)} 设备时间的 "
        f"{pct(o.share)}）：同样的算子、同样的 shape，在这张卡的数据上做了更多的工作，而不是设备卡顿"
        f"（那会波及其他算子）{why_zh}"
    )
    rem = Remedy(
        "action",
        f"Look at the data {who} gets, not at the card: what its sampler gives it in these steps "
        + (
            "(padding and repeated token ids: shuffle so short, padded samples spread over the "
            "ranks, pack or pad to each batch's own length, and let the embedding skip the pad id "
            "with padding_idx)"
            if indexed
            else f"(the input values {op} works on)"
        )
        + ".",
        f"检查{who_zh}拿到的数据，而不是这张卡：这些步里它的采样器分给它的数据"
        + (
            "（填充和重复的 token id：打乱数据让短样本、填充样本分散到各卡，按每个 batch 自身长度打包或填充，"
            "并用 padding_idx 让 embedding 跳过 pad id）"
            if indexed
            else f"（{op} 处理的输入值）"
        )
        + "。",
        gain_us,
        BoundKind.ESTIMATE,
    )
    return Explanation(
        "same_launch",
        clause,
        clause_zh,
        rem,
        operator=op if o.ops else "",
        shape=o.shapes.strip('"'),
        metrics=m,
        tags=("compute_straggler", "load_imbalance"),
    )


#: Operators that accumulate into shared outputs (scatter-adds, index puts, reductions): their
#: parallel form adds in an unspecified order, so a deterministic mode runs them serially.
ACCUMULATE_OPS = re.compile(
    r"embedding.*grad|index_?put|index_?add|scatter|reduce_?sum|cumsum|unsortedsegment", re.I
)


def _few_cores_text(
    item: JobItem, share: str, ranks_txt: str, ranks_zh: str
) -> tuple[str, str, Remedy]:
    """Clause (en, zh) and action for long kernels launched on few of their engine's cores."""
    parts = ", ".join(
        f"{t} on {b} of {f}, {ms(us)} per step" for t, b, f, us in item.block_dims[:4]
    )
    parts_zh = "；".join(
        f"{t} 用 {f} 个核中的 {b} 个，每步 {ms(us)}" for t, b, f, us in item.block_dims[:4]
    )
    en = (
        f"long kernels launched on a small part of the cores ({parts}; kernel_details.csv Block "
        f"Dim) take at least {share} of {ranks_txt}'s step ({ms(item.us_per_step)} per step)"
    )
    zh = (
        f"只用了少数核启动的长算子（{parts_zh}；kernel_details.csv 的 Block Dim）至少占{ranks_zh}步长的 "
        f"{share}（每步 {ms(item.us_per_step)}）"
    )
    accumulate = [t for t, _b, _f, _us in item.block_dims if ACCUMULATE_OPS.search(t)]
    if accumulate and len(accumulate) * 2 >= len(item.block_dims):
        ops = ", ".join(accumulate[:3])
        en += (
            f"; {ops} accumulate into shared outputs, which a deterministic mode "
            "(torch.use_deterministic_algorithms(True)) runs in a fixed order on one or a few "
            "cores instead of in parallel"
        )
        zh += (
            f"；{'、'.join(accumulate[:3])} 会把结果累加到共享的输出上，确定性模式"
            "（torch.use_deterministic_algorithms(True)）会让它们按固定顺序在一个或少数几个核上串行执行，"
            "而不是并行"
        )
        rem = Remedy(
            "action",
            "Turn deterministic computation off for training runs "
            "(torch.use_deterministic_algorithms(False), and drop the deterministic settings of "
            f"the launch script): {ops} then run on all cores; keep it for short reproducibility "
            "or precision-alignment runs only.",
            "训练时关闭确定性计算（torch.use_deterministic_algorithms(False)，并去掉启动脚本里的确定性"
            f"设置）：{'、'.join(accumulate[:3])} 就能用上全部核；只在短时间的复现或精度对齐时开启。",
        )
    else:
        rem = Remedy(
            "action",
            f"Find why {item.block_dims[0][0]} launches on so few cores: its input shapes or dtype "
            "may take a fallback kernel (compare with a run where it is fast), or a newer "
            "operator package has a parallel version.",
            f"查明 {item.block_dims[0][0]} 为何只用了很少的核：其输入 shape 或数据类型可能走了兜底的实现"
            "（与它正常时的运行对比），或更新的算子包有并行实现。",
        )
    return en, zh, rem


#: Random-number operators: dropout masks and torch.rand / randn / bernoulli draws.
RANDOM_OPS = re.compile(
    r"^(?:StatelessRandom|RandomUniform|RandomStandardNormal|StandardNormal|Multinomial|"
    r"Bernoulli|StatelessBernoulli|TruncatedNormal|DropOutGenMask)",
    re.I,
)


def _aicpu_op_text(
    item: JobItem, share: str, ranks_txt: str, ranks_zh: str
) -> tuple[str, str, Remedy]:
    """One operator type on the AI CPU taking a share of every rank's step (clauses, action).

    A random-number operator (:data:`RANDOM_OPS`) draws random numbers on the host-side AI CPU:
    dropout masks or a ``torch.rand`` on an explicit generator; the fix is the framework's
    dropout, whose mask kernels run on the AI Core. Any other operator: give it inputs the AI
    Core supports, or an NPU-supported call. Source: kernel_details.csv Accelerator Core.
    """
    what = (
        f"{item.name} takes at least {share} of {ranks_txt}'s step ({ms(item.us_per_step)} per "
        f"step, {item.count_per_step:.0f} launches on the AI CPU, inputs [{item.shape}])"
    )
    what_zh = (
        f"{item.name} 至少占{ranks_zh}步长的 {share}（每步 {ms(item.us_per_step)}，"
        f"在 AI CPU 上调用 {item.count_per_step:.0f} 次，输入 [{item.shape}]）"
    )
    if RANDOM_OPS.match(item.name):
        en = what + (
            ": random numbers drawn on the AI CPU, as a hand-written dropout mask "
            "(torch.rand / bernoulli on an explicit generator) does; the framework's dropout "
            "draws its mask on the AI Core (DropOutGenMask / DropOutDoMask)"
        )
        zh = what_zh + (
            "：随机数在 AI CPU 上生成，手写的 dropout 掩码（在指定 generator 上调用 torch.rand / "
            "bernoulli）就是这样；框架自带的 dropout 在 AI Core 上生成掩码（DropOutGenMask / "
            "DropOutDoMask）"
        )
        rem = Remedy(
            "action",
            f"Replace the hand-written dropout mask ({item.name}: torch.rand / bernoulli on a "
            "generator) with the framework's dropout (torch.nn.functional.dropout / nn.Dropout, "
            "or torch_npu's npu_dropout), whose DropOutGenMask / DropOutDoMask kernels run on the "
            "AI Core; if a separate generator is needed, keep it on the NPU.",
            f"把手写的 dropout 掩码（{item.name}：在 generator 上调用 torch.rand / bernoulli）换成框架"
            "自带的 dropout（torch.nn.functional.dropout / nn.Dropout，或 torch_npu 的 npu_dropout），"
            "其 DropOutGenMask / DropOutDoMask 算子运行在 AI Core 上；如果需要单独的 generator，"
            "让它留在 NPU 上。",
        )
        return en, zh, rem
    rem = Remedy(
        "action",
        f"Move {item.name} off the AI CPU: give it inputs the AI Core kernels support (dtype such "
        "as int64 / float64, format, shape), or replace the call with an NPU-supported "
        "equivalent.",
        f"让 {item.name} 不再运行在 AI CPU 上：为其提供 AI Core 算子支持的输入（如 int64 / float64 "
        "等数据类型、格式、shape），或换用 NPU 支持的等价调用。",
    )
    return what, what_zh, rem


def _slow_matrix_text(
    item: JobItem, share: str, ranks_txt: str, ranks_zh: str
) -> tuple[str, str, Remedy]:
    """A dominant matrix operator far below the job's other matrix operators' TFLOPS.

    See :func:`~advisor_chat.diagnosis.decompose.job_account` (``slow_matrix``). Bound by
    reading its inputs (aic_mte2_ratio ≥ 0.8, aic_mac_ratio ≤ 0.5) with few rows per group or
    call: more rows per call (micro-batch, expert parallelism). Otherwise: its shapes.
    """
    peers = " / ".join(item.peer_ops)
    rate = item.tflops / item.peer_tflops
    en = (
        f"{item.name} takes at least {share} of {ranks_txt}'s step ({ms(item.us_per_step)} per "
        f"step, {item.count_per_step:.0f} launches) and runs at {item.tflops:.0f} TFLOPS, "
        f"{rate:.2f}x the {item.peer_tflops:.0f} TFLOPS the job's {peers} reach (from the input "
        "shapes and durations in kernel_details.csv)"
    )
    zh = (
        f"{item.name} 至少占{ranks_zh}步长的 {share}（每步 {ms(item.us_per_step)}，调用 "
        f"{item.count_per_step:.0f} 次），算力只有 {item.tflops:.0f} TFLOPS，是本作业 {peers} 的 "
        f"{item.peer_tflops:.0f} TFLOPS 的 {rate:.2f} 倍（由 kernel_details.csv 的输入 shape 和耗时算出）"
    )
    mac, mte2 = item.pipes.get("aic_mac_ratio"), item.pipes.get("aic_mte2_ratio")
    bound = mte2 is not None and mte2[0] >= 0.8 and (mac is None or mac[0] <= 0.5)
    if bound and mte2 is not None:
        en += f"; it waits on reading its inputs: aic_mte2_ratio {mte2[0]:.2f}" + (
            f", aic_mac_ratio {mac[0]:.2f} against {mac[1]:.2f} for {peers}" if mac else ""
        )
        zh += f"；它在等待读取输入：aic_mte2_ratio {mte2[0]:.2f}" + (
            f"，aic_mac_ratio {mac[0]:.2f}（{peers} 为 {mac[1]:.2f}）" if mac else ""
        )
    if item.groups and math.isfinite(item.rows_per_group):
        en += (
            f"; each call splits {item.rows} rows over {item.groups} groups, "
            f"{item.rows_per_group:.0f} rows per group: every group's weights are read for few "
            "rows"
        )
        zh += (
            f"；每次调用把 {item.rows} 行分到 {item.groups} 个分组，每组 {item.rows_per_group:.0f} 行："
            "每个分组的权重只为很少的行读取一次"
        )
        rem = Remedy(
            "action",
            f"Give {item.name} more rows per group: a larger micro-batch with fewer "
            "gradient-accumulation steps (the same tokens per step), or expert parallelism so "
            "each card holds fewer experts with more tokens each; each group's weights are then "
            "read once for more rows.",
            f"让 {item.name} 每个分组有更多行：增大微批次、减少梯度累积步数（每步 token 数不变），"
            "或开启专家并行，让每张卡放更少的专家、每个专家分到更多 token；这样每个分组的权重读一次能算更多行。",
        )
    elif bound:
        rem = Remedy(
            "action",
            f"Give {item.name} more rows per call ({item.rows} now): a larger micro-batch with "
            "fewer gradient-accumulation steps, or fuse the small products into one call; its "
            "weights are then read once for more rows.",
            f"让 {item.name} 每次调用有更多行（现在 {item.rows} 行）：增大微批次、减少梯度累积步数，"
            "或把多个小矩阵乘合并成一次调用；这样权重读一次能算更多行。",
        )
    else:
        rem = Remedy(
            "action",
            f"Find why {item.name} runs at {rate:.2f}x the rate of {peers}: compare its input "
            f"shapes ([{item.shape}]) and dtypes with theirs (dimensions that are not multiples "
            "of 16, very small or very thin products) and reshape or pad them.",
            f"查明 {item.name} 的算力为何只有 {peers} 的 {rate:.2f} 倍：对比其输入 shape（[{item.shape}]）"
            "和数据类型（维度不是 16 的倍数、很小或很窄的矩阵乘），并调整或补齐 shape。",
        )
    return en, zh, rem


def explain_hotspot(item: JobItem, ranks_txt: str, ranks_zh: str) -> tuple[str, str, Remedy]:
    """English clause, Chinese clause and action for a job-level item (see ``job_account``).

    Args:
        item: The hotspot.
        ranks_txt: Which ranks it covers (``every rank``, ``every rank present (2 of 8)``).
        ranks_zh: The same in Chinese.
    """
    share = pct(item.share_min)
    if item.what == "engine":  # AI CPU
        ops = ", ".join(item.members)
        en = (
            f"AI CPU operators take at least {share} of {ranks_txt}'s step ({ms(item.us_per_step)} "
            f"per step: {ops})"
        )
        zh = f"AI CPU 算子至少占{ranks_zh}步长的 {share}（每步 {ms(item.us_per_step)}：{ops}）"
        rem = Remedy(
            "action",
            f"Move {ops} off the AI CPU: give them inputs the AI Core kernels support (dtype such "
            "as int64 / float64, format, shape), or replace the call with an NPU-supported "
            "equivalent.",
            f"让 {ops} 不再运行在 AI CPU 上：为其提供 AI Core 算子支持的输入（如 int64 / float64 "
            "等数据类型、格式、shape），或换用 NPU 支持的等价调用。",
        )
    elif item.what == "few_cores":
        en, zh, rem = _few_cores_text(item, share, ranks_txt, ranks_zh)
    elif item.what == "slow_matrix":
        en, zh, rem = _slow_matrix_text(item, share, ranks_txt, ranks_zh)
    elif item.what == "fusion":
        ops, ops_zh = ", ".join(item.members), "、".join(item.members)
        what = item.name.split(" computed")[0]
        what_zh = FUSION_ZH.get(what, what)
        en = (
            f"{what} is computed from separate operators ({ops}) that take at least {share} of "
            f"{ranks_txt}'s step ({ms(item.us_per_step)} per step), with no fused {what} kernel: "
            "a computation cost (compute-bound), not waiting"
        )
        zh = (
            f"{what_zh} 由多个独立算子（{ops_zh}）拼接计算，至少占{ranks_zh}步长的 {share}"
            f"（每步 {ms(item.us_per_step)}），没有使用融合的 {what_zh} 算子：这是计算开销，不是等待"
        )
        fused = {
            "attention": (
                "the fused attention operator (torch_npu.npu_fusion_attention, FlashAttentionScore; "
                "in Megatron / MindSpeed --use-flash-attn)",
                "融合注意力算子（torch_npu.npu_fusion_attention、FlashAttentionScore；Megatron / "
                "MindSpeed 中开启 `--use-flash-attn`）",
            ),
            "RMSNorm": (
                "torch_npu.npu_rms_norm (--use-fused-rmsnorm)",
                "torch_npu.npu_rms_norm（--use-fused-rmsnorm）",
            ),
            "SwiGLU": (
                "torch_npu.npu_swiglu (--use-fused-swiglu)",
                "torch_npu.npu_swiglu（--use-fused-swiglu）",
            ),
            "rotary position embedding": (
                "torch_npu.npu_rotary_mul (--use-fused-rotary-pos-emb)",
                "torch_npu.npu_rotary_mul（--use-fused-rotary-pos-emb）",
            ),
        }.get(what, (f"the fused {what} operator", f"融合的 {what} 算子"))
        rem = Remedy(
            "action",
            f"Replace the composed {what} ({ops}) with {fused[0]}: one kernel instead of "
            f"{item.count_per_step:.0f} launches per step, and no intermediate tensors.",
            f"用{fused[1]}替换拼接的 {what_zh}（{ops_zh}）：每步 {item.count_per_step:.0f} 次调用合并为一个算子，"
            "也不再产生中间张量。",
        )
    elif item.what == "layout":
        ops = ", ".join(item.members)
        n = f"{item.count_per_step:.0f}"
        en = (
            f"layout and dtype conversions ({ops}) take at least {share} of {ranks_txt}'s step "
            f"({ms(item.us_per_step)} per step in {n} launches) without computing anything"
        )
        zh = (
            f"格式与数据类型转换（{ops}）至少占{ranks_zh}步长的 {share}"
            f"（每步 {ms(item.us_per_step)}，共 {n} 次调用），本身不做计算"
        )
        if item.weight_fp32_casts > 0 and item.weight_cast_us >= 0.5 * item.us_per_step:
            # the weights themselves converted in every pass: fp32 weights under autocast
            en += (
                f"; {ms(item.weight_cast_us)} of it ({item.weight_casts:.0f} Casts per step) is on "
                f"the MatMuls' weight shapes, {item.weight_fp32_casts:.0f} of them from fp32 "
                "(DT_FLOAT) inputs: fp32 weights cast to half precision before every MatMul and "
                "their gradients cast back, in every micro-batch, as autocast over an fp32 model "
                "does"
            )
            zh += (
                f"；其中 {ms(item.weight_cast_us)}（每步 {item.weight_casts:.0f} 个 Cast）作用在 MatMul 的"
                f"权重形状上，{item.weight_fp32_casts:.0f} 个的输入是 fp32（DT_FLOAT）：fp32 权重在每次 "
                "MatMul 之前被转成半精度、梯度再转回来，每个微批次都做一遍，这正是对 fp32 模型使用 autocast 的结果"
            )
            rem = Remedy(
                "action",
                "Keep the weights in bf16 for compute and the fp32 master copy in the optimizer "
                "only (Megatron / MindSpeed --bf16; or model.to(torch.bfloat16) with a "
                "mixed-precision optimizer) instead of autocast over fp32 weights: the weights "
                "are then converted once per step in the optimizer, not before every MatMul.",
                "计算用 bf16 权重，只在优化器里保留 fp32 主权重（Megatron / MindSpeed 的 `--bf16`；"
                "或 model.to(torch.bfloat16) 配合混合精度优化器），不要对 fp32 权重使用 autocast："
                "这样权重每步只在优化器里转换一次，而不是每次 MatMul 之前都转换。",
            )
            return en, zh, rem
        rem = Remedy(
            "action",
            f"Remove the conversions ({ops}): keep tensors in one format and dtype between "
            "operators (avoid .contiguous() / .t() / .to(dtype) in the hot path, use the fused "
            "NPU operators that take the layout as it is).",
            f"去掉这些转换（{ops}）：让张量在算子之间保持同一格式和数据类型（热点路径上避免 "
            ".contiguous() / .t() / .to(dtype)，使用直接接受当前布局的 NPU 融合算子）。",
        )
    elif item.core.upper() == "AI_CPU":
        en, zh, rem = _aicpu_op_text(item, share, ranks_txt, ranks_zh)
    else:
        en = (
            f"{item.name} takes at least {share} of {ranks_txt}'s step ({ms(item.us_per_step)} per "
            f"step, {item.count_per_step:.0f} launches on {_core(item.core)}, inputs "
            f"[{item.shape}])"
        )
        zh = (
            f"{item.name} 至少占{ranks_zh}步长的 {share}（每步 {ms(item.us_per_step)}，"
            f"在 {_core(item.core)} 上调用 {item.count_per_step:.0f} 次，输入 [{item.shape}]）"
        )
        rem = Remedy(
            "action",
            f"Cut {item.name}'s time on every rank: use the fused NPU operator that replaces it "
            "(e.g. npu_fusion_attention for a composed attention, npu_rms_norm / "
            "npu_rotary_mul for their composed forms) or remove the call from the step.",
            f"减少各卡上 {item.name} 的耗时：换用可替代它的 NPU 融合算子（如用 npu_fusion_attention "
            "替代拼接的注意力计算，用 npu_rms_norm / npu_rotary_mul 替代其拼接实现），或把该调用移出训练步。",
        )
    return en, zh, rem
