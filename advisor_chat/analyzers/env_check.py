"""Environment checks: HCCL timeouts, launch blocking, allocator, log level, parallel sizes."""

from __future__ import annotations

import math
import re
from typing import cast

import numpy as np
import pandas as pd

from advisor_chat.analyzers._common import format_ranks, pct, severity
from advisor_chat.analyzers.base import (
    AnalyzerResult,
    Category,
    Evidence,
    Finding,
    FindingKind,
    Params,
    Severity,
    notes_in_chinese,
    register,
)
from advisor_chat.ingest.profile import Profile

#: Documented defaults (CANN environment-variable reference, "HCCL_CONNECT_TIMEOUT": 120 s;
#: "HCCL_EXEC_TIMEOUT": 1836 s), see knowledge case ``hccl-timeouts``.
HCCL_CONNECT_TIMEOUT_DEFAULT_S = 120.0
HCCL_EXEC_TIMEOUT_DEFAULT_S = 1836.0
#: An observed wait above this fraction of a timeout is a risk of hitting it.
TIMEOUT_RISK_FRACTION = 0.5
#: A rank reaching the first collective this many seconds after the others is a finding.
FIRST_COLLECTIVE_LATE_S = 1.0

#: The environment variables the check judges (one row per rank and setting).
CHECKED_SETTINGS = (
    "HCCL_CONNECT_TIMEOUT",
    "HCCL_EXEC_TIMEOUT",
    "ASCEND_LAUNCH_BLOCKING",
    "PYTORCH_NPU_ALLOC_CONF",
    "ASCEND_GLOBAL_LOG_LEVEL",
    "HCCL_INTRA_ROCE_ENABLE",
    "HCCL_INTRA_PCIE_ENABLE",
    "HCCL_BUFFSIZE",
    "HCCL_DETERMINISTIC",
)

#: HCCL_BUFFSIZE when unset (MB, CANN environment variable reference): the buffer each
#: communicator allocates for one round of a collective's data.
HCCL_BUFFSIZE_DEFAULT_MB = 200.0


class EnvCheckParams(Params):
    """Parameters of :func:`env_check` (none)."""


#: Chinese twins of this analyzer's fixed notes.
_NOTES_ZH = {
    "no environment variables recorded (meta.env empty): env checks limited": (
        "没有记录环境变量（meta.env 为空）：环境检查受限"
    ),
}


@register("env_check", EnvCheckParams, order=5)
def env_check(profile: Profile, params: EnvCheckParams) -> AnalyzerResult:
    """Check the job's environment: HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT against the observed first-collective and longest waits, ASCEND_LAUNCH_BLOCKING=1, PYTORCH_NPU_ALLOC_CONF without expandable_segments:True, verbose ASCEND_GLOBAL_LOG_LEVEL, HCCL_DETERMINISTIC on, non-power-of-two parallel sizes, settings that differ across ranks.

    Environment values come from ``meta.env`` (ENV_VARIABLES of profiler_info / profiler
    metadata). Timeout defaults when unset: 120 s connect, 1836 s execution (CANN environment
    variable reference). Observed waits come from ``comm_ops``: the first collective of each rank
    (earliest ``start_us``) and its Wait Time (ms), and the longest single Wait Time. A rank that
    reaches the first collective ≥ 1 s after the others (their median wait there minus its own)
    is a ``first_collective_late`` finding.

    Args:
        profile: Canonical profile; uses ``meta`` (env, tp/pp/dp sizes), ``comm_ops``,
            ``step_trace`` (Free share, to size the launch-blocking cost).
        params: None.

    Returns:
        AnalyzerResult whose ``table`` has one row per rank × setting: ``rank``, ``setting``
        (variable name or ``tp_size``/``pp_size``/``dp_size``), ``value`` (as written, '' if
        unset), ``status`` (``ok``, ``warn``, ``unset``, ``unknown`` when the rank recorded no environment), ``note``. Metrics:
        ``first_collective_wait_max_s`` (s), ``max_wait_s`` (s), ``world_size``.

    Raises:
        Nothing: a profile without ``meta.env`` yields ``unset`` rows and a note.
    """
    meta = profile.get("meta")
    rows: list[dict[str, object]] = []
    findings: list[Finding] = []
    notes: list[str] = []
    envs: dict[int, dict[str, str]] = {}
    for r, env in zip(meta["rank"], meta["env"], strict=False):
        if pd.isna(r):
            continue
        envs[int(r)] = {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}
    if not any(envs.values()):
        notes.append("no environment variables recorded (meta.env empty): env checks limited")
    src = profile.cite("meta")
    ranks = sorted(envs) or profile.ranks
    world = (
        float(meta["world_size"].max())
        if not meta.empty and meta["world_size"].notna().any()
        else float(len(ranks))
    )

    # observed waits
    ops = profile.get("comm_ops")
    first_wait_s = max_wait_s = float("nan")
    first_rank = -1
    if not ops.empty and ops["start_us"].notna().any():
        first = ops.sort_values("start_us").groupby("rank").head(1)
        if first["wait_ms"].notna().any():
            i = first["wait_ms"].idxmax()
            first_wait_s = float(cast(float, first.at[i, "wait_ms"])) / 1000.0
            first_rank = int(cast(int, first.at[i, "rank"]))
        if ops["wait_ms"].notna().any():
            max_wait_s = float(ops["wait_ms"].max()) / 1000.0

    late = _first_collective_late(ops)
    if late is not None:
        late_rank, late_s, op = late
        connect = (
            min(
                (_num(e.get("HCCL_CONNECT_TIMEOUT", "")) or HCCL_CONNECT_TIMEOUT_DEFAULT_S)
                for e in (envs.values() or [{}])
            )
            if envs
            else HCCL_CONNECT_TIMEOUT_DEFAULT_S
        )
        frac = late_s / connect
        sev = Severity.HIGH if frac >= TIMEOUT_RISK_FRACTION else Severity.MEDIUM
        findings.append(
            Finding(
                id=f"env_check.env.first_collective_late_r{late_rank}",
                kind=FindingKind.ENV,
                severity=sev,
                summary=(
                    f"Rank {late_rank} reaches the first collective ({op}) {late_s:.1f} s after the "
                    f"others: they wait {late_s:.1f} s in it ({pct(frac)} of HCCL_CONNECT_TIMEOUT "
                    f"{connect:g} s; documented default 120 s, execution timeout default 1836 s). "
                    "Check what that rank does before its first collective (data loading, "
                    "compilation, checkpoint loading); if it grows with scale the job times out"
                ),
                summary_zh=(
                    f"{late_rank}号卡 比其他卡晚 {late_s:.1f} s 到达第一个集合通信（{op}），其他卡在其中等待，"
                    f"占 HCCL_CONNECT_TIMEOUT（{connect:g} s）的 {pct(frac)}；规模变大时可能超时"
                ),
                ranks=(late_rank,),
                metrics={
                    "late_by_s": late_s,
                    "connect_timeout_s": connect,
                    "timeout_fraction": frac,
                },
                evidence=(
                    Evidence(
                        "comm_ops",
                        profile.cite("comm_ops"),
                        {"op_name": op, "rank": late_rank},
                        "first collective per rank (earliest start); lateness = median Wait Time of "
                        "the other ranks in it; the late rank waits least",
                    ),
                ),
                symptom_tags=("first_collective_late", "hccl_timeout_risk"),
                category=Category.SCHEDULING,
            )
        )

    st = profile.get("step_trace")
    free_share = (
        float((st["free_us"] / st["step_us"].where(st["step_us"] > 0)).mean())
        if not st.empty
        else float("nan")
    )

    flagged: dict[str, list[int]] = {}
    values: dict[str, dict[int, str]] = {s: {} for s in CHECKED_SETTINGS}
    for r in ranks:
        env = envs.get(r, {})
        for s in CHECKED_SETTINGS:
            v = env.get(s, "").strip()
            values[s][r] = v
            if env:
                status, note = _judge(s, v, first_wait_s, max_wait_s)
            else:
                status, note = "unknown", "no environment recorded for this rank"
            rows.append({"rank": r, "setting": s, "value": v, "status": status, "note": note})
            if status == "warn":
                flagged.setdefault(s, []).append(r)

    # timeouts
    for s, default, observed, label in (
        (
            "HCCL_CONNECT_TIMEOUT",
            HCCL_CONNECT_TIMEOUT_DEFAULT_S,
            first_wait_s,
            "first-collective wait",
        ),
        ("HCCL_EXEC_TIMEOUT", HCCL_EXEC_TIMEOUT_DEFAULT_S, max_wait_s, "longest collective wait"),
    ):
        if s not in flagged:
            continue
        vals = [_num(values[s][r]) for r in flagged[s]]
        eff = min(v if v is not None else default for v in vals)
        obs_txt = (
            f"; observed {label} {observed:.1f} s (rank {first_rank})"
            if np.isfinite(observed)
            else ""
        )
        risky = np.isfinite(observed) and observed >= TIMEOUT_RISK_FRACTION * eff
        findings.append(
            Finding(
                id=f"env_check.env.{s.lower()}",
                kind=FindingKind.ENV,
                severity=Severity.HIGH if risky else Severity.LOW,
                summary=(
                    f"{s} is {eff:g} s on ranks {format_ranks(flagged[s])} (documented default "
                    f"{default:g} s){obs_txt}"
                    + (
                        ": the job can time out; raise it"
                        if risky
                        else ": below the default; keep it at least at the default for a "
                        f"{world:g}-rank job"
                    )
                ),
                summary_zh=(
                    f"{s} 在 {format_ranks(flagged[s], sep='、')}号卡 上为 {eff:g} s（文档默认 {default:g} s）"
                    + (
                        f"；观测到的等待 {observed:.1f} s，存在超时风险，建议调大"
                        if risky
                        else "；低于默认值"
                    )
                ),
                ranks=tuple(flagged[s]),
                metrics={
                    "timeout_s": eff,
                    "default_s": default,
                    "observed_wait_s": observed,
                    "world_size": world,
                },
                evidence=(
                    Evidence(
                        "meta",
                        src,
                        {"setting": s},
                        "meta.env value, default from the CANN env-var reference",
                    ),
                    *(
                        (
                            Evidence(
                                "comm_ops",
                                profile.cite("comm_ops"),
                                {"rank": first_rank},
                                f"{label}: Wait Time(ms) / 1000",
                            ),
                        )
                        if np.isfinite(observed)
                        else ()
                    ),
                ),
                symptom_tags=("hccl_timeout_risk", "first_collective_late")
                if s == "HCCL_CONNECT_TIMEOUT" and risky
                else ("hccl_timeout_risk",),
            )
        )

    if "ASCEND_LAUNCH_BLOCKING" in flagged:
        rs = flagged["ASCEND_LAUNCH_BLOCKING"]
        sev = severity(free_share) if np.isfinite(free_share) else Severity.MEDIUM
        sev = sev if sev is not Severity.LOW else Severity.MEDIUM
        findings.append(
            Finding(
                id="env_check.env.ascend_launch_blocking",
                kind=FindingKind.ENV,
                severity=sev,
                summary=(
                    f"ASCEND_LAUNCH_BLOCKING=1 on {_on(rs, profile)}: every operator launch waits "
                    f"for the previous one to finish (serial dispatch); Free is {pct(free_share)} of the step. "
                    "Unset it outside debugging"
                ),
                summary_zh=f"{_on_zh(rs, profile)}设置了 ASCEND_LAUNCH_BLOCKING=1：算子串行下发；Free 占步长的 {pct(free_share)}。调试之外请取消",
                ranks=tuple(rs),
                metrics={"free_share": free_share},
                evidence=(
                    Evidence("meta", src, {"setting": "ASCEND_LAUNCH_BLOCKING"}, "meta.env"),
                ),
                symptom_tags=("launch_blocking", "host_bound"),
                category=Category.SCHEDULING,
            )
        )
    for s_name, path, path_zh in (
        ("HCCL_INTRA_ROCE_ENABLE", "RoCE (the RDMA NICs)", "RoCE（RDMA 网卡）"),
        ("HCCL_INTRA_PCIE_ENABLE", "PCIe", "PCIe"),
    ):
        if s_name not in flagged:
            continue
        rs = flagged[s_name]
        m = profile.get("comm_matrix")
        hccs_mb = (
            float(m.loc[m["transport"].astype(str).str.upper() == "HCCS", "transit_size_mb"].sum())
            if not m.empty and {"transport", "transit_size_mb"} <= set(m.columns)
            else float("nan")
        )
        none_txt = (
            "; no transfer in this data went over HCCS"
            if np.isfinite(hccs_mb) and hccs_mb == 0
            else ""
        )
        none_zh = "；本数据中没有任何传输走 HCCS" if np.isfinite(hccs_mb) and hccs_mb == 0 else ""
        findings.append(
            Finding(
                id=f"env_check.env.{s_name.lower()}",
                kind=FindingKind.ENV,
                severity=Severity.MEDIUM,
                summary=(
                    f"{s_name}=1 on {_on(rs, profile)}: HCCL sends the traffic between the NPUs "
                    f"of one server over {path} instead of HCCS{none_txt}. Unset it unless HCCS "
                    "is known to be faulty"
                ),
                summary_zh=(
                    f"{_on_zh(rs, profile)}设置了 {s_name}=1：同一服务器内 NPU 之间的通信走 {path_zh}"
                    f"而不是 HCCS{none_zh}。除非确认 HCCS 有故障，否则请取消"
                ),
                ranks=tuple(rs),
                metrics={"hccs_transit_mb": hccs_mb} if np.isfinite(hccs_mb) else {},
                evidence=(Evidence("meta", src, {"setting": s_name}, "meta.env"),),
                symptom_tags=("intra_node_off_hccs",),
                category=Category.COMMUNICATION,
            )
        )
    if "HCCL_BUFFSIZE" in flagged:
        findings.append(_buffsize_finding(profile, flagged["HCCL_BUFFSIZE"], values, src))
    if "PYTORCH_NPU_ALLOC_CONF" in flagged:
        rs = flagged["PYTORCH_NPU_ALLOC_CONF"]
        findings.append(
            Finding(
                id="env_check.env.pytorch_npu_alloc_conf",
                kind=FindingKind.ENV,
                severity=Severity.LOW,
                summary=(
                    f"PYTORCH_NPU_ALLOC_CONF lacks expandable_segments:True on {_on(rs, profile)}: "
                    "the caching allocator can fragment memory and reorganize it at high watermarks"
                ),
                summary_zh=f"{_on_zh(rs, profile)}的 PYTORCH_NPU_ALLOC_CONF 未开启 expandable_segments:True，可能出现内存碎片",
                ranks=tuple(rs),
                evidence=(
                    Evidence("meta", src, {"setting": "PYTORCH_NPU_ALLOC_CONF"}, "meta.env"),
                ),
                symptom_tags=("memory_fragmentation",),
            )
        )
    if "ASCEND_GLOBAL_LOG_LEVEL" in flagged:
        rs = flagged["ASCEND_GLOBAL_LOG_LEVEL"]
        lv = min(int(_num(values["ASCEND_GLOBAL_LOG_LEVEL"][r]) or 0) for r in rs)
        findings.append(
            Finding(
                id="env_check.env.ascend_global_log_level",
                kind=FindingKind.ENV,
                severity=Severity.MEDIUM if lv == 0 else Severity.LOW,
                summary=(
                    f"ASCEND_GLOBAL_LOG_LEVEL={lv} on {_on(rs, profile)} (below 3 = WARNING): "
                    "verbose device logging slows the job; use 3 for training"
                ),
                summary_zh=f"{_on_zh(rs, profile)}的 ASCEND_GLOBAL_LOG_LEVEL={lv}（低于 3）：日志过多拖慢训练，建议设为 3",
                ranks=tuple(rs),
                metrics={"log_level": float(lv)},
                evidence=(
                    Evidence("meta", src, {"setting": "ASCEND_GLOBAL_LOG_LEVEL"}, "meta.env"),
                ),
                symptom_tags=("log_level_verbose",),
            )
        )

    if "HCCL_DETERMINISTIC" in flagged:
        rs = flagged["HCCL_DETERMINISTIC"]
        v = values["HCCL_DETERMINISTIC"][rs[0]]
        findings.append(
            Finding(
                id="env_check.env.hccl_deterministic",
                kind=FindingKind.ENV,
                severity=Severity.MEDIUM,
                summary=(
                    f"HCCL_DETERMINISTIC={v} on {_on(rs, profile)}: HCCL reduces in a fixed order "
                    "(reproducible sums), which makes ReduceScatter and AllReduce slower; turn it "
                    "off for training runs that do not compare results bit for bit"
                ),
                summary_zh=(
                    f"{_on_zh(rs, profile)}设置了 HCCL_DETERMINISTIC={v}：HCCL 按固定顺序归约（结果可复现），"
                    "ReduceScatter 和 AllReduce 会变慢；不需要逐位对比结果的训练请关闭"
                ),
                ranks=tuple(rs),
                evidence=(Evidence("meta", src, {"setting": "HCCL_DETERMINISTIC"}, "meta.env"),),
                symptom_tags=("hccl_deterministic",),
                category=Category.COMMUNICATION,
            )
        )

    # parallel sizes
    for col in ("tp_size", "pp_size", "dp_size"):
        if meta.empty or meta[col].isna().all():
            continue
        sizes = sorted({int(v) for v in meta[col].dropna()})
        for sz in sizes:
            ok = sz > 0 and (sz & (sz - 1)) == 0
            rows.append(
                {
                    "rank": -1,
                    "setting": col,
                    "value": str(sz),
                    "status": "ok" if ok else "warn",
                    "note": "" if ok else "not a power of two",
                }
            )
            if not ok:
                findings.append(
                    Finding(
                        id=f"env_check.env.{col}_not_power_of_two",
                        kind=FindingKind.ENV,
                        severity=Severity.LOW,
                        summary=(
                            f"{col.split('_')[0].upper()} size is {sz}, not a power of two: HCCL "
                            "algorithms and tensor shapes split unevenly; prefer 2, 4, 8, ..."
                        ),
                        summary_zh=f"{col.split('_')[0].upper()} 并行维度为 {sz}，不是 2 的幂，通信算法与切分效率可能下降",
                        metrics={col: float(sz)},
                        evidence=(
                            Evidence(
                                "meta", src, {col: sz}, "profiler_metadata.json parallel layout"
                            ),
                        ),
                        symptom_tags=("non_power_of_two_parallel",),
                    )
                )

    # settings that differ across ranks
    for s in CHECKED_SETTINGS:
        distinct = {v for v in values[s].values()}
        if len(distinct) > 1:
            notes.append(f"{s} differs across ranks: {sorted(distinct)}")
    differs = env_differences(envs)
    if differs:
        findings.append(_differs_finding(differs, src))

    findings.sort(key=lambda f: f.severity.rank)
    table = pd.DataFrame(rows, columns=["rank", "setting", "value", "status", "note"])
    metrics = {
        "first_collective_wait_max_s": first_wait_s,
        "max_wait_s": max_wait_s,
        "world_size": world,
    }
    return AnalyzerResult(
        "env_check",
        table,
        metrics=metrics,
        findings=tuple(findings),
        notes=tuple(notes),
        notes_zh=notes_in_chinese(notes, _NOTES_ZH),
    )


def _first_collective_late(ops: pd.DataFrame) -> tuple[int, float, str] | None:
    """(late rank, seconds late, op name) when one rank reaches the first collective ≥ 1 s late."""
    if ops.empty or not ops["start_us"].notna().any() or not ops["wait_ms"].notna().any():
        return None
    first = ops.sort_values("start_us").groupby("rank").head(1)
    if len(first) < 2:
        return None
    op = first["op_name"].mode().iloc[0]
    same = first[first["op_name"] == op]
    if len(same) < 2:
        return None
    i = same["wait_ms"].idxmin()
    others = same.drop(index=i)["wait_ms"]
    late_s = float(others.median() - same.at[i, "wait_ms"]) / 1000.0
    if not (late_s >= FIRST_COLLECTIVE_LATE_S):
        return None
    return int(same.at[i, "rank"]), late_s, str(op)


def _num(v: str) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


#: Variables that name the rank, its device, its host or its paths: they differ by design.
_PER_RANK_VAR = re.compile(
    r"RANK|DEVICE|VISIBLE|_IP$|_IP_|IFNAME|ADDR|PORT|HOST|PID|MASTER|NODE|WORLD|PATH|DIR|_ID$|"
    r"LOG_|CUDA|SLURM|HOSTNAME",
    re.I,
)


def env_differences(envs: dict[int, dict[str, str]]) -> dict[str, dict[str, list[int]]]:
    """Recorded environment variables whose value differs across the ranks that record any.

    From ``profiler_metadata.json`` ``ENV_VARIABLES`` per rank (an unset variable reads as
    ``""``); variables that name the rank, its device, host, address or paths are left out
    (they differ by design). Returns ``{variable: {value: [ranks]}}``.
    """
    recorded = {r: e for r, e in envs.items() if e}
    if len(recorded) < 2:
        return {}
    names = sorted({k for e in recorded.values() for k in e} - {""})
    out: dict[str, dict[str, list[int]]] = {}
    for k in names:
        if _PER_RANK_VAR.search(k):
            continue
        by: dict[str, list[int]] = {}
        for r, e in sorted(recorded.items()):
            by.setdefault(str(e.get(k, "")).strip(), []).append(int(r))
        if len(by) > 1:
            out[k] = by
    return out


def _differs_finding(differs: dict[str, dict[str, list[int]]], src: str) -> Finding:
    """One finding for every recorded variable set differently on some ranks."""
    parts, parts_zh = [], []
    for k, by in list(differs.items())[:4]:
        vals = "; ".join(
            f"{(v if v else 'unset')} on ranks {format_ranks(rs)}" for v, rs in by.items()
        )
        vals_zh = "；".join(
            f"{format_ranks(rs, sep='、')}号卡为 {v if v else '未设置'}" for v, rs in by.items()
        )
        parts.append(f"{k} ({vals})")
        parts_zh.append(f"{k}（{vals_zh}）")
    hccl = any(k.startswith(("HCCL_", "ASCEND_", "TASK_QUEUE", "PYTORCH_NPU")) for k in differs)
    ranks = sorted({r for by in differs.values() for rs in by.values() for r in rs})
    return Finding(
        id="env_check.env.differs_across_ranks",
        kind=FindingKind.ENV,
        severity=Severity.MEDIUM if hccl else Severity.LOW,
        summary=(
            "The ranks run with different environments: " + ", ".join(parts) + "; the same job "
            "on every node should set them alike"
        ),
        summary_zh="各卡的环境变量不一致："
        + "，".join(parts_zh)
        + "；同一个作业在所有节点上应设置一致",
        ranks=tuple(ranks),
        metrics={"env_variables_differing": float(len(differs))},
        evidence=(
            Evidence(
                "meta",
                src,
                {"variables": ", ".join(differs)},
                "profiler_metadata.json ENV_VARIABLES per rank, unset read as empty",
            ),
        ),
        symptom_tags=("comm_setting",) if hccl else (),
        category=Category.COMMUNICATION if hccl else Category.UNKNOWN,
    )


def _judge(setting: str, value: str, first_wait_s: float, max_wait_s: float) -> tuple[str, str]:
    """Status and note of one setting on one rank."""
    if setting in ("HCCL_CONNECT_TIMEOUT", "HCCL_EXEC_TIMEOUT"):
        default, observed = (
            (HCCL_CONNECT_TIMEOUT_DEFAULT_S, first_wait_s)
            if setting == "HCCL_CONNECT_TIMEOUT"
            else (HCCL_EXEC_TIMEOUT_DEFAULT_S, max_wait_s)
        )
        t = _num(value)
        eff = t if t is not None else default
        if np.isfinite(observed) and observed >= TIMEOUT_RISK_FRACTION * eff:
            return "warn", f"observed wait {observed:.1f} s vs timeout {eff:g} s"
        if t is not None and t < default:
            return "warn", f"below the documented default {default:g} s"
        return ("ok" if value else "unset"), f"default {default:g} s" if not value else ""
    if setting == "ASCEND_LAUNCH_BLOCKING":
        return ("warn", "serial dispatch") if value == "1" else ("ok" if value else "unset", "")
    if setting == "PYTORCH_NPU_ALLOC_CONF":
        if "expandable_segments:true" in value.replace(" ", "").lower():
            return "ok", ""
        return "warn", "expandable_segments:True not set"
    if setting in ("HCCL_INTRA_ROCE_ENABLE", "HCCL_INTRA_PCIE_ENABLE"):
        # traffic between the NPUs of one server leaves HCCS (RoCE NIC or PCIe instead)
        return (
            ("warn", "intra-node traffic off HCCS")
            if value == "1"
            else (
                "ok" if value else "unset",
                "",
            )
        )
    if setting == "HCCL_BUFFSIZE":
        mb = _num(value)
        if mb is not None and 0 < mb < HCCL_BUFFSIZE_DEFAULT_MB:
            return "warn", f"below the default {HCCL_BUFFSIZE_DEFAULT_MB:g} MB"
        return ("ok" if value else "unset"), ""
    if setting == "HCCL_DETERMINISTIC":
        # reductions in a fixed order: reproducible sums, slower reducing collectives
        if value.strip().lower() in ("true", "1"):
            return "warn", "deterministic reduction: slower ReduceScatter / AllReduce"
        return ("ok" if value else "unset"), ""
    if setting == "ASCEND_GLOBAL_LOG_LEVEL":
        lv = _num(value)
        if lv is not None and lv < 3:
            return "warn", "verbose logging (< 3)"
        return ("ok" if value else "unset"), ""
    return "ok", ""


def _buffsize_finding(
    profile: Profile, rs: list[int], values: dict[str, dict[int, str]], src: str
) -> Finding:
    """HCCL_BUFFSIZE below its default: a collective larger than the buffer runs in rounds.

    Evidence: the value (``meta.env``) and, from ``comm_matrix``, the largest Transit Size of
    one collective on one link (MB) and how many buffers it fills.
    """
    mb = min(_num(values["HCCL_BUFFSIZE"][r]) or HCCL_BUFFSIZE_DEFAULT_MB for r in rs)
    m = profile.get("comm_matrix")
    big = (
        float(pd.to_numeric(m["transit_size_mb"], errors="coerce").max())
        if not m.empty and "transit_size_mb" in m.columns
        else float("nan")
    )
    rounds_en = rounds_zh = ""
    metrics = {"buffsize_mb": mb, "default_mb": HCCL_BUFFSIZE_DEFAULT_MB}
    if np.isfinite(big) and big > mb:
        rounds = math.ceil(big / mb)
        metrics |= {"largest_transit_mb": big, "rounds": float(rounds)}
        rounds_en = (
            f"; the largest transfer of one collective on one link is {big:.1f} MB, "
            f"{rounds} rounds through the buffer"
        )
        rounds_zh = (
            f"；单个集合通信在一条链路上最大的传输为 {big:.1f} MB，需分 {rounds} 轮经过缓冲区"
        )
    return Finding(
        id="env_check.env.hccl_buffsize",
        kind=FindingKind.ENV,
        severity=Severity.MEDIUM,
        summary=(
            f"HCCL_BUFFSIZE is {mb:g} MB on {_on(rs, profile)} (default "
            f"{HCCL_BUFFSIZE_DEFAULT_MB:g} MB): a collective larger than the buffer is split into "
            f"several rounds, each with its own handshake, so large collectives reach less bandwidth"
            f"{rounds_en}. Raise it to at least the default if device memory allows"
        ),
        summary_zh=(
            f"{_on_zh(rs, profile)}的 HCCL_BUFFSIZE 为 {mb:g} MB（默认 {HCCL_BUFFSIZE_DEFAULT_MB:g} MB）："
            f"大于缓冲区的集合通信要分多轮完成，每轮都有握手开销，大通信的带宽因此降低{rounds_zh}。"
            "显存允许时请至少调回默认值"
        ),
        ranks=tuple(rs),
        metrics=metrics,
        evidence=(
            Evidence("meta", src, {"setting": "HCCL_BUFFSIZE"}, "meta.env (MB)"),
            *(
                (
                    Evidence(
                        "comm_matrix",
                        profile.cite("comm_matrix"),
                        {},
                        "largest Transit Size (MB) of one collective on one link; rounds = "
                        "ceil(largest / HCCL_BUFFSIZE)",
                    ),
                )
                if "largest_transit_mb" in metrics
                else ()
            ),
        ),
        symptom_tags=("hccl_buffsize_small", "comm_setting"),
        category=Category.COMMUNICATION,
    )


def _on(ranks: list[int], profile: Profile) -> str:
    """``'every rank (ranks 0-15)'`` when a setting is on all the profile's ranks, else ``'ranks 3, 5'``."""
    if len(ranks) > 1 and set(ranks) >= {int(r) for r in profile.ranks}:
        return f"every rank (ranks {format_ranks(ranks)})"
    return f"ranks {format_ranks(ranks)}"


def _on_zh(ranks: list[int], profile: Profile) -> str:
    """Chinese :func:`_on`: ``'所有卡（0-15号卡）'`` or ``'3, 5号卡'``."""
    if len(ranks) > 1 and set(ranks) >= {int(r) for r in profile.ranks}:
        return f"所有卡（{format_ranks(ranks, sep='、')}号卡）"
    return f"{format_ranks(ranks, sep='、')}号卡"
