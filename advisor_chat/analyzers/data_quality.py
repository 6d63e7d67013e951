"""Data-quality checks, run first: is the profile complete and comparable across ranks?"""

from __future__ import annotations

import pandas as pd

from advisor_chat.analyzers._common import format_ranks, unreadable_files
from advisor_chat.analyzers.base import (
    AnalyzerResult,
    Evidence,
    Finding,
    FindingKind,
    Params,
    Severity,
    register,
)
from advisor_chat.ingest.common import MAX_RANK_ID, plausible_world
from advisor_chat.ingest.profile import Profile

#: Load-time warning code → (symptom tag, severity).
_WARNING_TAGS: dict[str, tuple[str | None, Severity]] = {
    "missing_ranks": ("missing_ranks", Severity.MEDIUM),
    "missing_steps": ("missing_steps", Severity.LOW),
    "mixed_versions": ("version_mismatch", Severity.MEDIUM),
    "profiler_level2": ("profiler_overhead", Severity.LOW),
    "no_communication_level0": ("missing_comm_data", Severity.LOW),
    "no_communication_unreadable": ("missing_comm_data", Severity.LOW),
    "partial_comm_data": ("missing_comm_data", Severity.LOW),
    "partial_files": ("missing_comm_data", Severity.LOW),
    "mixed_runs": (None, Severity.HIGH),
}


#: Load-time warning code → what it means, in Chinese (the warning messages are English).
_WARNING_ZH: dict[str, str] = {
    "missing_ranks": "部分卡没有 profiling 数据，跨卡比较只覆盖现有的卡",
    "missing_steps": "部分卡缺少某些步的数据",
    "mixed_versions": "各卡的软件版本（CANN / torch_npu）不一致",
    "file_skipped": "有文件无法解析，已跳过",
    "matrix_ranks_assumed": "通信矩阵中的卡号是推断出来的",
    "matrix_unmapped": "通信矩阵中有无法对应到卡的条目",
    "no_profiler_output": "目录中没有找到 profiler 输出",
    "rank_unknown": "有目录无法确定卡号",
    "trace_view_invalid": "trace_view.json 被截断、为空或不是合法的 JSON，已改用 CSV/DB 数据：这些卡缺少主机下发"
    "（下发时延）相关的结论；请重新拷贝该文件或重新离线解析",
    "missing_table": "部分卡缺少其他卡都有的数据（步骤时间、算子或通信：文件缺失，或只有表头没有数据），"
    "跨卡比较不包含这些卡；请从训练机器重新拷贝这些文件",
    "cluster_output_foreign": "目录中的 msprof-analyze cluster 结果不是旁边这些卡的分析结果，已忽略；"
    "请对这些卡重新运行 msprof-analyze cluster",
    "db_schema_unknown": "有 .db 文件不是 CANN msprof 的格式，其中的算子和步骤数据未被读取；请重新导出",
    "folder_repeated": "有目录通过符号链接被重复指向，只读取了一次",
    "invalid_values": "有数据行的数值不合理（负数、超出范围或无法解析），已按规则处理；请检查导出是否完整",
    "metadata_invalid": "profiler_metadata.json（或数据库 META_DATA）中有类型错误的条目，已忽略：通信组或卡数可能不完整",
    "mixed_runs": "各卡的数据看起来来自不同的采集（结束时间相差很大）：请只放同一次采集的数据",
    "no_communication_level0": "Level0 采集不包含通信分析（没有 communication.json），通信相关结论无法给出",
    "profiler_level2": "使用了 Level2 采集，会增加明显的主机和设备开销，测得的时间偏大",
    "rank_id_invalid": "profiler_info 中的 rank_id 不是合法卡号，已改用文件名中的卡号；请检查文件是否损坏",
    "rank_id_mismatch": "文件内的卡号与文件名或目录名中的卡号不一致，已按文件名中的卡号处理；请确认目录没有被改名或混放",
    "invalid_rank_id": "有卡号不合理（负数、非整数或超出任何集群规模），相应数据已按规则处理",
    "world_size_invalid": "元数据中的 world_size 不合理，已忽略",
    "file_changed": "有文件在读取后被修改",
    "partial_files": "少数卡缺少其他卡都有的文件（如 communication_matrix.json），这些卡的相关结论依据不全",
    "row_cut": "有 CSV 文件在最后一行中间被截断，该行已舍弃",
    "duplicate_rows": "有重复的数据行（同一文件被拼接两次或同一卡被读了两次），重复行已舍弃",
    "both_exports": "同一卡的目录中同时有文本导出和数据库（.db）导出：算子与主机下发取自数据库，"
    "步骤时间与通信取自文本文件；两者若不是同一次采集，数值会不一致",
}


def warning_zh(code: str, ranks: tuple[int, ...] | list[int]) -> str:
    """Chinese text of a load-time warning: its meaning and the ranks it concerns."""
    what = _WARNING_ZH.get(code, "加载数据时的提示（详见英文原文）")
    return what + (f"（涉及 {format_ranks(sorted(ranks))}号卡）" if ranks else "")


class DataQualityParams(Params):
    """Parameters of :func:`data_quality` (none)."""


@register("data_quality", DataQualityParams, order=0)
def data_quality(profile: Profile, params: DataQualityParams) -> AnalyzerResult:
    """Check that the profile can be trusted before diagnosing it: missing ranks or steps, mixed CANN/torch_npu versions, profiler Level2 overhead, missing communication data (Level0), files skipped at load.

    Combines the load-time warnings (``profile.warnings``) with checks on the tables: ranks
    present vs ``meta.world_size`` and vs a contiguous 0..max range; the step set of every rank
    vs the union (step_trace); distinct ``meta.cann_version`` / ``torch_npu_version``;
    ``meta.profiler_level`` = Level2; step_trace shows communication but ``comm_ops`` is empty.

    Args:
        profile: Canonical profile (any tables).
        params: None.

    Returns:
        AnalyzerResult whose ``table`` has one row per check: ``check`` (name), ``status``
        (``ok``, ``warn`` or ``n/a``), ``detail`` (one sentence), ``ranks`` (compact text of the
        ranks concerned). Metrics: ``ranks_count``, ``steps_count``, ``warnings_count``.

    Raises:
        Nothing: missing tables are reported as ``n/a`` checks.
    """
    rows: list[dict[str, str]] = []
    findings: list[Finding] = []
    seen_codes: set[str] = set()

    def add(check: str, status: str, detail: str, ranks: list[int] | tuple[int, ...] = ()) -> None:
        rows.append(
            {
                "check": check,
                "status": status,
                "detail": detail,
                "ranks": format_ranks(ranks) if ranks else "",
            }
        )

    def finding(
        code: str,
        summary: str,
        summary_zh: str,
        ranks: tuple[int, ...],
        table: str,
        metrics: dict[str, float] | None = None,
        note: str = "",
    ) -> None:
        if code in seen_codes:
            return
        seen_codes.add(code)
        tag, sev = _WARNING_TAGS.get(code, (None, Severity.LOW))
        findings.append(
            Finding(
                id=f"data_quality.data_quality.{code}",
                kind=FindingKind.DATA_QUALITY,
                severity=sev,
                summary=summary,
                summary_zh=summary_zh,
                ranks=tuple(sorted(ranks)),
                metrics=metrics or {},
                evidence=(Evidence(table, profile.cite(table), {}, note),),
                symptom_tags=(tag,) if tag else (),
            )
        )

    ranks = profile.ranks
    meta = profile.get("meta")
    st = profile.get("step_trace")

    # --- ranks ---
    world = meta["world_size"].dropna() if not meta.empty else pd.Series(dtype="float64")
    world = world[world.map(lambda w: plausible_world(float(w)))]  # never sized from 10^12
    expected: set[int] = set()
    if not world.empty:
        expected = set(range(int(world.max())))
    elif ranks and max(ranks) < MAX_RANK_ID:
        expected = set(range(max(ranks) + 1))
    missing = sorted(expected - set(ranks))
    if missing and ranks:
        src = "meta.world_size" if not world.empty else "the rank range 0..max"
        add("ranks", "warn", f"{len(missing)} rank(s) missing vs {src}", missing)
        finding(
            "missing_ranks",
            f"{len(missing)} of {len(expected)} ranks have no data (ranks {format_ranks(missing)}); "
            "cross-rank comparisons cover only the ranks present",
            f"{len(expected)} 张卡中有 {len(missing)} 张缺少数据（{format_ranks(missing, sep='、')}号卡）；跨卡比较仅覆盖现有数据",
            tuple(missing),
            "meta" if not world.empty else "step_trace",
            {
                "missing_ranks_count": float(len(missing)),
                "expected_ranks_count": float(len(expected)),
            },
        )
    else:
        add("ranks", "ok" if ranks else "n/a", f"{len(ranks)} rank(s) present")

    # --- steps ---
    if not st.empty:
        pairs = st[["rank", "step"]].dropna().drop_duplicates()
        union = sorted(int(x) for x in pairs["step"].unique())
        counts = pairs.groupby("rank")["step"].size()
        short = [int(r) for r in counts.index[counts < len(union)]]
        if short:
            add("steps", "warn", f"{len(short)} rank(s) lack some of the {len(union)} steps", short)
            finding(
                "missing_steps",
                f"{len(short)} rank(s) lack some of the {len(union)} steps seen on other ranks "
                f"(ranks {format_ranks(short)}); per-step comparisons use the common steps only",
                f"{len(short)} 张卡缺少部分步（共 {len(union)} 步），逐步比较仅用共有的步",
                tuple(short),
                "step_trace",
                {"ranks_with_missing_steps": float(len(short)), "steps_count": float(len(union))},
            )
        else:
            add("steps", "ok", f"all ranks have the same {len(union)} step(s)")
        # a single captured step (or none marked): trends and one-step events cannot be told apart
        if union == [-1] or len(union) == 1:
            no_marks = union == [-1]
            en = (
                "No step markers: the whole capture is analyzed as one step; per-step trends and "
                "one-step events cannot be judged (capture several steps with step markers)"
                if no_marks
                else f"Only 1 step captured (step {union[0]}): per-step trends and one-step "
                "events cannot be judged (capture several steps)"
            )
            zh = (
                "没有步标记：整个采集被当作一步分析，无法判断逐步趋势和单步事件"
                "（请采集带步标记的多步数据）"
                if no_marks
                else f"只采集了 1 步（第 {union[0]} 步）：无法判断逐步趋势和单步事件（请采集多步）"
            )
            add("steps_count", "warn", en)
            finding(
                "single_step",
                en,
                zh,
                (),
                "step_trace",
                {"steps_count": float(len(union)), "no_step_markers": float(no_marks)},
            )
    else:
        add("steps", "n/a", "no step trace")

    # --- versions ---
    for col in ("cann_version", "torch_npu_version"):
        vals = meta[col].dropna().astype(str) if not meta.empty else pd.Series(dtype="string")
        vals = vals[vals.str.strip() != ""]
        uniq = sorted(vals.unique())
        if len(uniq) > 1:
            odd = meta.loc[vals.index][vals != vals.mode().iloc[0]]["rank"].astype(int).tolist()
            add(col, "warn", f"{len(uniq)} different values: {', '.join(uniq)}", odd)
            finding(
                "mixed_versions",
                f"Ranks run different {col.replace('_', ' ')}s ({', '.join(uniq)}; minority on ranks "
                f"{format_ranks(odd)}): mixed software makes ranks behave differently",
                f"各卡 {col} 不一致（{', '.join(uniq)}；少数派 {format_ranks(odd, sep='、')}号卡）",
                tuple(odd),
                "meta",
                {"distinct_versions": float(len(uniq))},
            )
        else:
            add(col, "ok" if uniq else "n/a", uniq[0] if uniq else "unknown")

    # --- profiler level ---
    levels = (
        meta["profiler_level"].dropna().astype(str) if not meta.empty else pd.Series(dtype="string")
    )
    lvl2 = (
        meta.loc[levels[levels.str.lower() == "level2"].index, "rank"].astype(int).tolist()
        if not levels.empty
        else []
    )
    if lvl2:
        add("profiler_level", "warn", "Level2 collection adds overhead to every kernel", lvl2)
        finding(
            "profiler_level2",
            f"Profiled at Level2 on {len(lvl2)} rank(s): its extra counters slow kernels and inflate "
            "measured times; use Level1 for timing questions",
            f"{len(lvl2)} 张卡使用 Level2 采集：额外开销会放大算子耗时，分析耗时请用 Level1",
            tuple(lvl2),
            "meta",
        )
    else:
        add(
            "profiler_level",
            "ok" if not levels.empty else "n/a",
            ", ".join(sorted(levels.unique())) or "unknown",
        )

    # --- communication data ---
    has_comm_time = not st.empty and float(st["communication_us"].fillna(0).sum()) > 0
    if has_comm_time and not profile.has("comm_ops"):
        add("communication_data", "warn", "step trace shows communication but comm_ops is empty")
        lvl0 = levels.str.lower().eq("level0").any() if not levels.empty else False
        bad = unreadable_files(profile, "communication.json")
        if bad:  # the files exist but are damaged: the level is not the problem
            finding(
                "no_communication_unreadable",
                "No per-operator communication data although the step trace shows communication: "
                f"{len(bad)} communication.json file(s) could not be read (first: {bad[0]}); "
                "wait/transit per collective and slow-link checks are unavailable; copy the "
                "file(s) again or re-run the offline parse of torch_npu",
                f"缺少通信算子数据：{len(bad)} 个 communication.json 无法读取（第一个：{bad[0]}），"
                "无法分析等待/传输与慢链路；请重新拷贝这些文件或重新运行 torch_npu 离线解析",
                (),
                "step_trace",
            )
        else:
            finding(
                "no_communication_level0",
                "No per-operator communication data (communication.json) although the step trace "
                "shows communication"
                + (" — collected at Level0" if lvl0 else "")
                + ": wait/transit per collective and slow-link checks are unavailable; collect at "
                "Level1",
                "缺少通信算子数据（communication.json），无法分析等待/传输与慢链路；请用 Level1 采集",
                (),
                "step_trace",
            )
    else:
        add(
            "communication_data",
            "ok" if profile.has("comm_ops") else "n/a",
            "comm_ops present" if profile.has("comm_ops") else "no communication in this profile",
        )
    # partial communication detail: comm_ops (communication.json / cluster_communication.json)
    # covers fewer ranks than the step trace
    if has_comm_time and profile.has("comm_ops") and not st.empty:
        ops = profile.get("comm_ops")
        c_ranks = sorted(int(r) for r in ops["rank"].dropna().unique()) if "rank" in ops else []
        s_ranks = sorted(int(r) for r in st["rank"].dropna().unique())
        lacking = sorted(set(s_ranks) - set(c_ranks))
        if c_ranks and lacking:
            add(
                "communication_coverage",
                "warn",
                f"comm_ops covers {len(c_ranks)} of {len(s_ranks)} ranks",
                lacking,
            )
            finding(
                "partial_comm_data",
                f"Communication detail (comm_ops) covers only {len(c_ranks)} of {len(s_ranks)} "
                f"ranks (ranks {format_ranks(c_ranks)}): wait/transit splits and slow-link checks "
                f"cover those ranks only; ranks {format_ranks(lacking)} have none",
                f"通信明细（comm_ops）只覆盖 {len(s_ranks)} 张卡中的 {len(c_ranks)} 张"
                f"（{format_ranks(c_ranks, sep='、')}号卡）：等待/传输拆分和慢链路检查只针对这些卡；"
                f"{format_ranks(lacking, sep='、')}号卡没有通信明细",
                tuple(lacking),
                "comm_ops",
                {
                    "comm_ranks_count": float(len(c_ranks)),
                    "step_trace_ranks_count": float(len(s_ranks)),
                },
            )

    # --- load-time warnings ---
    for w in profile.warnings:
        add(f"load:{w.code}", "warn", w.message, w.ranks)
        tag, _sev = _WARNING_TAGS.get(w.code, (None, Severity.LOW))
        if w.code in seen_codes:
            continue
        seen_codes.add(w.code)
        findings.append(
            Finding(
                id=f"data_quality.data_quality.{w.code}",
                kind=FindingKind.DATA_QUALITY,
                severity=_WARNING_TAGS.get(w.code, (None, Severity.LOW))[1],
                summary=w.message,
                summary_zh=f"数据质量提示（{w.code}）：{warning_zh(w.code, tuple(w.ranks))}。",
                ranks=tuple(sorted(w.ranks)),
                evidence=(
                    Evidence(
                        "meta", w.path or str(profile.root), {"code": w.code}, "load-time warning"
                    ),
                ),
                symptom_tags=(tag,) if tag else (),
            )
        )

    findings.sort(key=lambda f: f.severity.rank)
    table = pd.DataFrame(rows, columns=["check", "status", "detail", "ranks"])
    metrics = {
        "ranks_count": float(len(ranks)),
        "steps_count": float(len(profile.steps)),
        "warnings_count": float(len(profile.warnings)),
    }
    return AnalyzerResult("data_quality", table, metrics=metrics, findings=tuple(findings))
