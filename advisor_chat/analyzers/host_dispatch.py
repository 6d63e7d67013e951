"""Host dispatch (scheduling) analysis: launch delays, device-idle gaps, tiny kernels, stalls."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import numpy as np
import pandas as pd
from pydantic import Field

from advisor_chat.analyzers._common import check_rank, format_ranks, is_comm_kernel, str_mask
from advisor_chat.analyzers.base import (
    AnalyzerResult,
    Evidence,
    Finding,
    FindingKind,
    Params,
    Severity,
    notes_in_chinese,
    register,
)
from advisor_chat.errors import NotAnswerableError
from advisor_chat.i18n import say
from advisor_chat.ingest.profile import Profile

#: Kernels shorter than this are "tiny" (µs); their launch cost rivals their run time.
TINY_KERNEL_US = 10.0
#: Tiny kernels matter when they are at least this share of the compute kernels (count).
TINY_COUNT_RATIO = 0.5
#: Free share of the step above which the device is considered under-fed (advisor rule).
FREE_RATIO = 0.10
#: A rank's launch-delay quantile this many times the cluster median is an outlier ...
LAUNCH_RATIO = 2.0
#: ... when it is also at least this much above the median (µs; HTA flags launch delay > 100 µs).
LAUNCH_ABS_US = 100.0
#: Share of the device idle time during which the host had not launched the next task yet.
HOST_WAIT_RATIO = 0.5
#: A kernel that starts within this long of its launch call had no task queued ahead of it (the
#: host's lead was gone): the device idle right before it was spent waiting for that launch (µs;
#: with a task queue that keeps up, kernels start hundreds of µs to ms after their launch).
QUEUE_EMPTY_US = 50.0
#: Device gap regarded as a possible GC pause (µs; advisor conjectured-GC rule: 200 ms).
GC_GAP_US = 200_000.0
#: At most this many host launches per ms inside such a gap (advisor: < 1 per 10 ms).
GC_MAX_LAUNCH_PER_MS = 0.1
#: Idle at step start above this is a dataloader stall (µs; advisor dataloader rule: 10 ms).
DATALOADER_US = 10_000.0
#: Share of launches directly followed by a Synchronize call (advisor synchronize rule).
SYNC_SHARE = 0.5
#: On large profiles, trace_view.json / kernel_details.csv are read for the ranks with the most
#: Free (this many), the rank asked about and a fixed peer sample (``Profile.peer_sample``).
SUSPECTS = 8


def _examined(profile: Profile, rank: int | None, st: pd.DataFrame) -> tuple[list[int], int, int]:
    """Ranks whose heavy tables are read: (ranks, suspects, peer sample size; 0 = every rank)."""
    focus = [rank] if rank is not None else []
    if not st.empty:
        free = st.groupby("rank")["free_us"].median().sort_values(ascending=False, kind="stable")
        focus += [int(r) for r in free.index[:SUSPECTS] if int(r) not in focus]
    avail = sorted(
        set(profile.available_ranks("host_dispatch")) | set(profile.available_ranks("kernels"))
    )
    if len(avail) <= SUSPECTS + 16 + 1:
        return avail, len(focus), 0
    ranks, _ = profile.peer_sample("kernels" if profile.has("kernels") else "host_dispatch", focus)
    return ranks, len(focus), len(ranks) - len([r for r in focus if r in ranks])


def _say_sample(f: Finding, n: int, suspects: int, sample: int, total: int) -> Finding:
    en = (
        f" (launch and kernel data read for {n} of {total} ranks: the {suspects} with the most "
        f"Free or asked about, and a peer sample of {sample}; medians are over those ranks)"
    )
    zh = f"（仅读取 {total} 张卡中的 {n} 个：Free 最大或被询问的 {suspects} 个与 {sample} 张抽样对照卡，中位数基于这些卡）"
    return replace(
        f,
        summary=f.summary + en,
        summary_zh=(f.summary_zh + zh) if f.summary_zh else "",
        metrics={**f.metrics, "peer_sample_ranks": float(sample)},
    )


_MISSING_HD = (
    "no host-to-device launch data (host_dispatch is empty): launch delays, host-wait "
    "attribution of idle gaps, synchronize and GC checks need trace_view.json with HostToDevice "
    "flows (torch_npu profiler Level1, text export) or the DB export with CANN_API connection ids"
)


#: Chinese twins of this analyzer's fixed notes.
_NOTES_ZH = {
    _MISSING_HD: (
        "没有主机到设备的下发数据（host_dispatch 为空）：下发时延、空闲间隙的主机等待归因、同步与 GC "
        "检查需要带 HostToDevice 连线的 trace_view.json（torch_npu profiler Level1，文本导出），"
        "或带 CANN_API 连接 ID 的 DB 导出"
    ),
    "no kernels table: device idle gaps and tiny-kernel share cannot be computed "
    "(kernel_details.csv / DB TASK needed)": (
        "没有算子表：无法计算设备空闲间隙和小算子占比（需要 kernel_details.csv 或 DB 的 TASK 表）"
    ),
    "no step_trace: Free and step time come from the kernels timeline only": (
        "没有 step_trace：空闲（Free）和步长只能从算子时间线得出"
    ),
}


class HostDispatchParams(Params):
    """Parameters of :func:`host_dispatch`."""

    rank: int | None = Field(
        default=None,
        description="Global rank to report on; default all ranks. Cluster medians always use "
        "every rank.",
    )


def _kernel_gaps(k: pd.DataFrame) -> pd.DataFrame:
    """Device timeline per rank: gap before each task (µs) and whether it starts its step.

    Sorted by (rank, start); ``prev_end_us`` is the running max of the previous tasks' ends on
    the rank (all streams), ``gap_us`` = max(0, start − prev_end).
    """
    rank = k["rank"].to_numpy(dtype="int64", na_value=-1)
    step = k["step"].to_numpy(dtype="int64", na_value=-1)
    start = k["start_us"].to_numpy(dtype="float64", na_value=np.nan)
    end = start + k["duration_us"].to_numpy(dtype="float64", na_value=0.0)
    order = np.lexsort((start, rank))
    rank, step, start, end = rank[order], step[order], start[order], end[order]
    cummax = pd.Series(end).groupby(rank).cummax().to_numpy()
    first = np.ones(len(rank), dtype=bool)
    first[1:] = rank[1:] != rank[:-1]
    prev_end = np.full(len(rank), np.nan)
    prev_end[1:] = cummax[:-1]
    prev_end[first] = np.nan
    prev_step = np.full(len(rank), -2, dtype="int64")
    prev_step[1:] = step[:-1]
    gap = np.clip(start - prev_end, 0.0, None)
    return pd.DataFrame(
        {
            "rank": rank,
            "step": step,
            "start_us": start,
            "end_us": end,
            "prev_end_us": prev_end,
            "gap_us": gap,
            "step_start": ~first & (step != prev_step),
        }
    )


def _host_wait(gaps: pd.DataFrame, hd: pd.DataFrame) -> pd.DataFrame:
    """Attach the host launch time of each device task (matched on device start within 1 µs): ``host_launch_us``, the end of its launch call.

    ``host_wait_us``: the part of the gap before a task that the device spent waiting for its
    launch: the whole gap when the task started within ``QUEUE_EMPTY_US`` of the end of its launch
    call (the queue was empty, the launch itself was late), else the time from the previous task's
    end to the end of the launch call (the host had not launched it yet: a task is submitted when
    its launch call returns, so a long call, e.g. an operator compiled online in
    ``aclopCompileAndExecute``, is host time the device waits for), at most the gap. The call's end
    is ``host_start_us + api_duration_us``; its start when the duration is not in the export.

    Matching uses one sorted key per row, rank · 1e11 + (start − t0) µs (exact to ~0.02 µs for
    profiles shorter than 27 h; longer ones fall back to a per-rank ``merge_asof``).
    """
    h_rank = hd["rank"].to_numpy(dtype="int64", na_value=-1)
    h_dev = hd["device_start_us"].to_numpy(dtype="float64", na_value=np.nan)
    h_host = hd["host_start_us"].to_numpy(dtype="float64", na_value=np.nan)
    if "api_duration_us" in hd.columns:  # the launch is submitted when its call returns
        api = pd.to_numeric(hd["api_duration_us"], errors="coerce").to_numpy(dtype="float64")
        h_host = h_host + np.where(np.isfinite(api) & (api > 0), api, 0.0)
    ok = np.isfinite(h_dev) & np.isfinite(h_host)
    h_rank, h_dev, h_host = h_rank[ok], h_dev[ok], h_host[ok]
    out = gaps.copy()
    out["host_launch_us"] = np.nan
    out["host_wait_us"] = np.nan
    if not len(h_dev) or out.empty:
        return out
    k_rank = out["rank"].to_numpy()
    k_start = out["start_us"].to_numpy()
    t0 = float(min(np.nanmin(k_start), h_dev.min()))
    span = float(max(np.nanmax(k_start), h_dev.max())) - t0
    if span >= 1e11:
        m = pd.merge_asof(
            out.drop(columns=["host_launch_us", "host_wait_us"]).sort_values("start_us"),
            pd.DataFrame({"rank": h_rank, "start_us": h_dev, "host_launch_us": h_host}).sort_values(
                "start_us"
            ),
            on="start_us",
            by="rank",
            tolerance=cast(Any, 1.0),
            direction="nearest",
        )
        out = m.sort_values(["rank", "start_us"], kind="stable").reset_index(drop=True)
        host = out["host_launch_us"].to_numpy()
    else:
        key_h = h_rank * 1e11 + (h_dev - t0)
        o = np.argsort(key_h, kind="stable")
        key_h, hs = key_h[o], h_host[o]
        key_k = k_rank * 1e11 + (k_start - t0)
        pos = np.searchsorted(key_h, key_k)
        lo = np.clip(pos - 1, 0, len(key_h) - 1)
        hi = np.clip(pos, 0, len(key_h) - 1)
        d_lo, d_hi = np.abs(key_k - key_h[lo]), np.abs(key_h[hi] - key_k)
        best = np.where(d_hi < d_lo, hi, lo)
        dist = np.minimum(d_lo, d_hi)
        host = np.where(dist <= 1.0, hs[best], np.nan)
        out["host_launch_us"] = host
    late = np.clip(host - out["prev_end_us"].to_numpy(), 0.0, None)
    empty = (out["start_us"].to_numpy() - host) <= QUEUE_EMPTY_US
    late = np.where(empty, out["gap_us"].to_numpy(), late)
    out["host_wait_us"] = np.where(np.isfinite(host), np.minimum(late, out["gap_us"]), np.nan)
    return out


def _cluster_finding_ranks(flagged: list[int], ranks: list[int], zh: bool = False) -> str:
    if len(ranks) > 1 and set(flagged) >= set(ranks):
        return say("host_dispatch.all_ranks", zh)
    if zh:
        return f"{format_ranks(flagged, sep='、')}号卡"
    return f"rank {flagged[0]}" if len(flagged) == 1 else f"ranks {format_ranks(flagged)}"


@register("host_dispatch", HostDispatchParams, order=45)
def host_dispatch(profile: Profile, params: HostDispatchParams, **_: Any) -> AnalyzerResult:
    """Check whether the host keeps the device fed: launch delays, idle gaps, tiny kernels, stalls.

    Per rank: the distribution of launch delay (host API start → device task start, from the
    HostToDevice flows), device-idle gaps between consecutive tasks (kernels timeline), the part
    of that idle during which the host had not launched the next task yet (host-wait), the share
    of tiny kernels (< 10 µs), idle at step start (dataloader), device gaps > 200 ms with almost
    no host launches (GC-like) and launches directly followed by a Synchronize call.
    Thresholds: launch-delay outlier ≥ 2× the cluster median and ≥ 100 µs above it; host-bound
    when Free > 10% of the step and host-wait ≥ 50% of idle; tiny kernels ≥ 50% of compute
    kernels; dataloader > 10 ms idle at step start on every rank; synchronize share > 0.5.

    Args:
        profile: Loaded profile; uses ``host_dispatch``, ``kernels``, ``step_trace``, ``meta``.
        params: ``rank`` (global rank) to restrict the table and findings to.

    Returns:
        AnalyzerResult whose ``table`` has one row per rank: rank, steps (count), launch_count
        (count), launch_delay_p50_us / _p90_us / _p99_us / _max_us (µs, host_dispatch
        launch_delay_us), launch_delay_p90_vs_median_ratio (rank p90 / median of ranks' p90),
        sync_api_count (count of api_name containing 'Synchronize'), launch_then_sync_ratio,
        device_idle_us_per_step (µs, sum of gaps between consecutive kernels inside steps / steps),
        idle_vs_free_ratio (that idle / step_trace free_us; ≈ 1 when the two sources agree),
        host_wait_us_per_step (µs, part of those gaps spent waiting for the next launch: the whole gap
        when the kernel started within QUEUE_EMPTY_US of its launch, else until the launch call),
        host_wait_ratio (host_wait / idle), step_start_idle_us (µs, gap before a step's
        first kernel, mean over steps), tiny_kernel_count_ratio and
        tiny_kernel_time_ratio (compute kernels < 10 µs), median_kernel_us (µs), gap_us_median (µs,
        median device idle before a kernel, of the gaps inside a step), long_gap_count
        (gaps > 200 ms), gc_like_gap_count, free_us (µs, median step_trace free_us), free_ratio
        (free / step), step_us (µs), preparing_us (µs, mean step_trace Preparing). ``tables['long_gaps']``: rank, step, start_us, gap_us,
        host_launches (count), gc_like. Metrics: cluster medians of the launch-delay quantiles.

    Raises:
        ToolArgumentError: ``rank`` is not in the profile.
        NotAnswerableError: No host_dispatch, kernels or step_trace data at all.
        ``tables['host_calls']``: one row per host call (:func:`host_calls`).
    """
    if params.rank is not None:
        check_rank(profile, params.rank)
    st = profile.get("step_trace")
    examined, n_suspects, n_sample = _examined(profile, params.rank, st)
    if n_sample:
        hd = profile.host_dispatch_for(examined)
        k = profile.kernels_for(examined)
    else:
        hd = profile.get("host_dispatch")
        k = profile.get("kernels")
    if hd.empty and k.empty and st.empty:
        raise NotAnswerableError(
            "no host dispatch, kernel or step-trace data; " + _MISSING_HD.split(": ", 1)[1]
        )
    notes: list[str] = []
    ranks = profile.ranks
    stall_steps: list[int] = []
    table = pd.DataFrame(index=pd.Index(ranks, name="rank", dtype="int64"))

    # step trace: Free and step per rank (medians over steps)
    if not st.empty:
        s = st[st["step"] != -1] if (st["step"] != -1).any() else st
        agg = s.groupby("rank").agg(
            free_us=("free_us", "median"),
            step_us=("step_us", "median"),
            steps=("step", "nunique"),
            preparing_us=("preparing_us", "mean"),
        )
        agg.index = agg.index.astype("int64")
        table = table.join(agg)
        table["free_ratio"] = table["free_us"] / table["step_us"]
        prep_hit = s[s["preparing_us"] > DATALOADER_US].groupby("step")["rank"].nunique()
        stall_steps = sorted(int(x) for x in prep_hit[prep_hit >= len(ranks) / 2].index)
    else:
        notes.append("no step_trace: Free and step time come from the kernels timeline only")

    # launch delays
    if not hd.empty:
        h = hd.dropna(subset=["launch_delay_us"])
        g = h.groupby("rank")["launch_delay_us"]
        ld = pd.DataFrame(
            {
                "launch_count": g.size(),
                "launch_delay_p50_us": g.quantile(0.5),
                "launch_delay_p90_us": g.quantile(0.9),
                "launch_delay_p99_us": g.quantile(0.99),
                "launch_delay_max_us": g.max(),
            }
        )
        ld.index = ld.index.astype("int64")
        table = table.join(ld)
        table["launch_delay_p90_vs_median_ratio"] = (
            table["launch_delay_p90_us"] / table["launch_delay_p90_us"].median()
        )
        sync_all = str_mask(hd["api_name"], lambda v: "synchronize" in v.lower())
        # launches start a device task; a blocking copy (aclrtMemcpy) is neither
        has_task = hd["device_start_us"].notna().to_numpy(dtype=bool) & ~sync_all
        if sync_all.any():
            h_rank = hd["rank"].to_numpy(dtype="int64", na_value=-1)
            o = np.lexsort((hd["host_start_us"].to_numpy(dtype="float64", na_value=np.nan), h_rank))
            r_sorted, is_sync = h_rank[o], sync_all[o]
            is_launch = has_task[o]
            next_sync = np.zeros(len(o), dtype=bool)
            next_sync[:-1] = is_sync[1:] & (r_sorted[1:] == r_sorted[:-1])
        else:
            r_sorted = hd["rank"].to_numpy(dtype="int64", na_value=-1)
            is_sync = next_sync = np.zeros(len(hd), dtype=bool)
            is_launch = has_task
        sync_df = (
            pd.DataFrame(
                {
                    "rank": r_sorted,
                    "sync": is_sync,
                    "launch": is_launch,
                    "launch_then_sync": is_launch & next_sync,
                }
            )
            .groupby("rank")[["sync", "launch", "launch_then_sync"]]
            .sum()
        )
        table["sync_api_count"] = sync_df["sync"]
        table["launch_then_sync_ratio"] = sync_df["launch_then_sync"] / sync_df["launch"].where(
            sync_df["launch"] > 0
        )
    else:
        notes.append(_MISSING_HD)

    # kernels timeline: idle gaps, tiny kernels, step-start idle, long gaps
    long_gaps = pd.DataFrame(
        columns=["rank", "step", "start_us", "gap_us", "host_launches", "gc_like"]
    )
    if not k.empty:
        gaps = _kernel_gaps(k)
        if not hd.empty:
            gaps = _host_wait(gaps, hd)
        else:
            gaps["host_wait_us"] = np.nan
        inner = gaps[~gaps["step_start"] & gaps["prev_end_us"].notna()]
        n_steps = gaps.groupby("rank")["step"].nunique().clip(lower=1)
        idle = inner.groupby("rank")["gap_us"].sum() / n_steps
        table["device_idle_us_per_step"] = idle.reindex(table.index)
        table["gap_us_median"] = (
            inner[inner["gap_us"] > 0].groupby("rank")["gap_us"].median().reindex(table.index)
        )
        if "free_us" in table.columns:
            table["idle_vs_free_ratio"] = table["device_idle_us_per_step"] / table["free_us"].where(
                table["free_us"] > 0
            )
        if not hd.empty:
            hw = inner.groupby("rank")["host_wait_us"].sum(min_count=1) / n_steps
            table["host_wait_us_per_step"] = hw.reindex(table.index)
            table["host_wait_ratio"] = table["host_wait_us_per_step"] / table[
                "device_idle_us_per_step"
            ].where(table["device_idle_us_per_step"] > 0)
        starts = gaps[gaps["step_start"]]
        if not starts.empty:
            table["step_start_idle_us"] = (
                starts.groupby("rank")["gap_us"].mean().reindex(table.index)
            )
            hit = starts[starts["gap_us"] > DATALOADER_US]
            by_step = hit.groupby("step")["rank"].nunique()
            stall_steps = sorted(
                set(stall_steps) | {int(x) for x in by_step[by_step >= len(ranks) / 2].index}
            )
        is_comp = ~is_comm_kernel(k).to_numpy()
        if is_comp.any():
            dur = k["duration_us"].to_numpy(dtype="float64", na_value=np.nan)[is_comp]
            tiny = dur < TINY_KERNEL_US
            tk = pd.DataFrame(
                {
                    "rank": k["rank"].to_numpy(dtype="int64", na_value=-1)[is_comp],
                    "tiny_n": tiny.astype("float64"),
                    "tiny_t": np.where(tiny, dur, 0.0),
                    "dur": dur,
                }
            ).groupby("rank")
            table["tiny_kernel_count_ratio"] = tk["tiny_n"].mean()
            table["tiny_kernel_time_ratio"] = tk["tiny_t"].sum() / tk["dur"].sum()
            table["median_kernel_us"] = tk["dur"].median()
        lg = gaps[gaps["gap_us"] > GC_GAP_US]
        if not lg.empty:
            rows = []
            host_by_rank = (
                {
                    int(cast(int, r)): np.sort(v.to_numpy(dtype="float64"))
                    for r, v in hd.groupby("rank")["host_start_us"]
                }
                if not hd.empty
                else {}
            )
            for r, sub in lg.groupby("rank"):
                hs_arr = host_by_rank.get(int(cast(int, r)))
                lo = sub["prev_end_us"].to_numpy()
                hi = sub["start_us"].to_numpy()
                if hs_arr is not None:
                    cnt = np.searchsorted(hs_arr, hi, "left") - np.searchsorted(hs_arr, lo, "right")
                else:
                    cnt = np.full(len(sub), np.nan)
                rows.append(
                    pd.DataFrame(
                        {
                            "rank": int(cast(int, r)),
                            "step": sub["step"].to_numpy(),
                            "start_us": lo,
                            "gap_us": sub["gap_us"].to_numpy(),
                            "host_launches": cnt,
                        }
                    )
                )
            long_gaps = pd.concat(rows, ignore_index=True)
            long_gaps["gc_like"] = long_gaps["host_launches"] <= (
                long_gaps["gap_us"] / 1000.0 * GC_MAX_LAUNCH_PER_MS
            )
            table["long_gap_count"] = long_gaps.groupby("rank").size().reindex(table.index)
            table["gc_like_gap_count"] = (
                long_gaps.groupby("rank")["gc_like"].sum().reindex(table.index)
            )
    else:
        notes.append(
            "no kernels table: device idle gaps and tiny-kernel share cannot be computed "
            "(kernel_details.csv / DB TASK needed)"
        )
    if "steps" not in table.columns and not k.empty:
        table["steps"] = k.groupby("rank")["step"].nunique().reindex(table.index)
    table = table.reset_index()

    metrics: dict[str, float] = {"ranks": float(len(ranks))}
    for col in ("launch_delay_p50_us", "launch_delay_p90_us", "launch_delay_p99_us"):
        if col in table.columns:
            metrics[f"median_{col}"] = float(table[col].median())
    for col in ("free_ratio", "tiny_kernel_count_ratio", "host_wait_ratio"):
        if col in table.columns:
            metrics[f"median_{col}"] = float(table[col].median())

    frames = (
        (profile.python_frames_for(examined) if n_sample else profile.get("python_frames"))
        if profile.has("python_frames")
        else pd.DataFrame()
    )
    calls = host_calls(hd, frames, table.set_index("rank")["steps"] if "steps" in table else None)
    if params.rank is not None and not calls.empty:
        calls = host_calls(
            hd[hd["rank"] == params.rank] if not hd.empty else hd,
            frames[frames["rank"] == params.rank] if not frames.empty else frames,
            table.set_index("rank")["steps"] if "steps" in table else None,
        )

    findings = _findings(profile, table, long_gaps, metrics, hd.empty, stall_steps)
    if n_sample:
        metrics["peer_sample_ranks"] = float(n_sample)
        metrics["ranks_examined"] = float(len(examined))
        findings = [
            _say_sample(f, len(examined), n_suspects, n_sample, len(ranks)) for f in findings
        ]
        notes.append(
            f"host dispatch and kernels read for {len(examined)} of {len(ranks)} ranks "
            f"(the {n_suspects} with the most Free or asked about, and a peer sample of {n_sample}: "
            f"{format_ranks(examined)}); the other ranks' launch and kernel columns are empty"
        )
    out_table = table
    if params.rank is not None:
        out_table = table[table["rank"] == params.rank].reset_index(drop=True)
        findings = [f for f in findings if params.rank in f.ranks]
    return AnalyzerResult(
        name="host_dispatch",
        table=out_table,
        metrics=metrics,
        findings=tuple(findings),
        notes=tuple(notes),
        tables={"long_gaps": long_gaps, "host_calls": calls},
        notes_zh=notes_in_chinese(notes, _NOTES_ZH),
    )


def _col(t: pd.DataFrame, name: str) -> pd.Series:
    return t[name] if name in t.columns else pd.Series(np.nan, index=t.index)


def _findings(
    profile: Profile,
    t: pd.DataFrame,
    long_gaps: pd.DataFrame,
    metrics: dict[str, float],
    no_hd: bool,
    stall_steps: list[int],
) -> list[Finding]:
    out: list[Finding] = []
    ranks = [int(r) for r in t["rank"]]
    step = _col(t, "step_us")
    free = _col(t, "free_us")
    med_step = float(step.median()) if step.notna().any() else float("nan")
    med_free = float(free.median()) if free.notna().any() else float("nan")
    free_ratio = _col(t, "free_ratio")
    cite_hd = profile.cite("host_dispatch")
    cite_k = profile.cite("kernels")
    cite_st = profile.cite("step_trace")

    # 1. launch-delay outliers
    if not no_hd:
        for q in ("p50", "p90"):
            col = f"launch_delay_{q}_us"
            med = float(t[col].median())
            bad = t[(t[col] >= LAUNCH_RATIO * med) & (t[col] - med >= LAUNCH_ABS_US)]
            if bad.empty:
                continue
            row: Any
            for row in bad.sort_values(col, ascending=False).head(5).itertuples(index=False):
                r = int(row.rank)
                val = float(getattr(row, col))
                fr = float(getattr(row, "free_us", np.nan))
                gain = fr - med_free if np.isfinite(fr) and np.isfinite(med_free) else np.nan
                stp = float(getattr(row, "step_us", np.nan))
                share = gain / stp if np.isfinite(gain) and stp > 0 else 0.0
                m = {
                    f"launch_delay_{q}_us": val,
                    f"median_launch_delay_{q}_us": med,
                    "launch_delay_ratio": val / med if med > 0 else float("inf"),
                    "launch_count": float(row.launch_count),
                    "launch_delay_max_us": float(row.launch_delay_max_us),
                }
                text_free = ""
                text_free_zh = ""
                if np.isfinite(gain):
                    m["free_us"] = fr
                    m["median_free_us"] = med_free
                    m["free_excess_us"] = gain
                    text_free = f"; its Free is {fr:.0f} us per step vs {med_free:.0f} us median"
                    text_free_zh = f"；其 Free 为每步 {fr:.0f} us，中位数为 {med_free:.0f} us"
                out.append(
                    Finding(
                        id=f"host_dispatch.host_bound.launch_delay.r{r}",
                        kind=FindingKind.HOST_BOUND,
                        severity=Severity.from_share(max(share, 0.0)),
                        summary=(
                            f"Rank {r}: launch delay (host API to device start) {q} is {val:.0f} us, "
                            f"{m['launch_delay_ratio']:.1f}x the cluster median of {med:.0f} us over "
                            f"{int(row.launch_count)} launches{text_free}."
                        ),
                        summary_zh=(
                            f"{r}号卡 的下发时延（主机 API 调用到设备开始执行）{q} 为 {val:.0f} us，是集群中位数 "
                            f"{med:.0f} us 的 {m['launch_delay_ratio']:.1f} 倍（{int(row.launch_count)} 次下发）"
                            f"{text_free_zh}。"
                        ),
                        ranks=(r,),
                        metrics=m,
                        evidence=(
                            Evidence(
                                "host_dispatch",
                                profile.cite("host_dispatch", r),
                                {"rank": r},
                                f"launch_delay_us = device_start_us - host_start_us; {q} per rank vs "
                                "median over ranks",
                            ),
                        ),
                        symptom_tags=("launch_delay", "host_bound"),
                        estimated_gain_us=float(gain) if np.isfinite(gain) and gain > 0 else None,
                    )
                )
            break  # p50 outliers already explain the p90 ones

    # 2. host-bound idle: high Free and the host launched after the device went idle
    if "host_wait_ratio" in t.columns:
        hb = t[(free_ratio > FREE_RATIO) & (t["host_wait_ratio"] >= HOST_WAIT_RATIO)]
        if not hb.empty:
            flagged = [int(r) for r in hb["rank"]]
            worst: Any = hb.sort_values("host_wait_us_per_step", ascending=False).iloc[0]
            hw = float(worst["host_wait_us_per_step"])
            fr = float(worst["free_us"])
            excess = fr - med_free if len(flagged) < len(ranks) else hw
            gain = excess if np.isfinite(excess) and excess > 0 else hw
            share = gain / float(worst["step_us"]) if worst["step_us"] > 0 else 0.0
            tags = ["host_bound", "high_free"]
            ld = float(worst.get("launch_delay_p50_us", np.nan))
            med_ld = (
                float(t["launch_delay_p50_us"].median()) if "launch_delay_p50_us" in t else np.nan
            )
            vertical = bool(np.isfinite(ld) and np.isfinite(med_ld) and ld <= 0.5 * med_ld)
            if vertical:
                tags.append("launch_delay")
            ld_txt = (
                f" Its median launch delay is {ld:.0f} us vs {med_ld:.0f} us on the median rank: "
                "the device starts each task as soon as the host launches it (vertical "
                "HostToDevice lines)."
                if vertical
                else ""
            )
            ld_zh = (
                f"其下发时延中位数为 {ld:.0f} us（集群中位数 {med_ld:.0f} us）：任务一下发设备就立即执行"
                "（HostToDevice 连线呈竖直状）。"
                if vertical
                else ""
            )
            tiny = float(worst.get("tiny_kernel_count_ratio", np.nan))
            if np.isfinite(tiny) and tiny >= TINY_COUNT_RATIO:
                tags.append("tiny_kernels")
            out.append(
                Finding(
                    id="host_dispatch.host_bound.host_wait",
                    kind=FindingKind.HOST_BOUND,
                    severity=Severity.from_share(share),
                    summary=(
                        f"Host-bound on {_cluster_finding_ranks(flagged, ranks)}: on rank "
                        f"{int(worst['rank'])} the device idles {hw:.0f} us per step waiting for the "
                        f"host to launch the next task ({float(worst['host_wait_ratio']):.0%} of its "
                        f"idle time); Free is {fr:.0f} us per step ({float(worst['free_ratio']):.1%} "
                        f"of the step) vs {med_free:.0f} us on the median rank.{ld_txt}"
                    ),
                    summary_zh=(
                        f"{_cluster_finding_ranks(flagged, ranks, zh=True)}存在下发瓶颈（最严重的是 "
                        f"{int(worst['rank'])}号卡）：每步有 {hw:.0f} us 设备空闲在等待主机下发（占空闲的 "
                        f"{float(worst['host_wait_ratio']):.0%}）；空闲（Free）每步 {fr:.0f} us（占步长 "
                        f"{float(worst['free_ratio']):.1%}），中位数卡为 {med_free:.0f} us。{ld_zh}"
                    ),
                    ranks=tuple(flagged),
                    metrics={
                        "host_wait_us_per_step": hw,
                        "host_wait_ratio": float(worst["host_wait_ratio"]),
                        "free_ratio": float(worst["free_ratio"]),
                        "device_idle_us_per_step": float(worst["device_idle_us_per_step"]),
                        "free_us": fr,
                        "median_free_us": med_free,
                        "free_excess_us": fr - med_free,
                        "ranks_affected": float(len(flagged)),
                        **(
                            {"launch_delay_p50_us": ld, "median_launch_delay_p50_us": med_ld}
                            if np.isfinite(ld)
                            else {}
                        ),
                    },
                    evidence=(
                        Evidence(
                            "kernels",
                            cite_k,
                            {"rank": int(worst["rank"])},
                            "gap = start - running max of previous ends; host-wait = min(gap, "
                            "host_start of next task - previous end) when the host launched late",
                        ),
                        Evidence("host_dispatch", cite_hd, {"rank": int(worst["rank"])}),
                        Evidence("step_trace", cite_st, {"rank": int(worst["rank"])}),
                    ),
                    symptom_tags=tuple(tags),
                    estimated_gain_us=gain,
                )
            )

    # 3. tiny kernels dominate while the device is under-fed
    if "tiny_kernel_count_ratio" in t.columns:
        tk = t[(t["tiny_kernel_count_ratio"] >= TINY_COUNT_RATIO) & (free_ratio > FREE_RATIO)]
        if not tk.empty:
            flagged = [int(r) for r in tk["rank"]]
            worst = tk.sort_values("free_ratio", ascending=False).iloc[0]
            out.append(
                Finding(
                    id="host_dispatch.host_bound.tiny_kernels",
                    kind=FindingKind.HOST_BOUND,
                    severity=Severity.from_share(float(worst["free_ratio"]) - FREE_RATIO),
                    summary=(
                        f"Tiny kernels on {_cluster_finding_ranks(flagged, ranks)}: "
                        f"{float(worst['tiny_kernel_count_ratio']):.0%} of compute kernels on rank "
                        f"{int(worst['rank'])} run < {TINY_KERNEL_US:.0f} us (median "
                        f"{float(worst['median_kernel_us']):.1f} us) while Free is "
                        f"{float(worst['free_ratio']):.1%} of the step; launch cost dominates."
                    ),
                    summary_zh=(
                        f"{_cluster_finding_ranks(flagged, ranks, zh=True)}存在大量极短算子：以 "
                        f"{int(worst['rank'])}号卡为例，其上 {float(worst['tiny_kernel_count_ratio']):.0%} 的计算算子短于 {TINY_KERNEL_US:.0f} us"
                        f"（中位数 {float(worst['median_kernel_us']):.1f} us），空闲（Free）占步长 "
                        f"{float(worst['free_ratio']):.1%}。"
                    ),
                    ranks=tuple(flagged),
                    metrics={
                        "tiny_kernel_count_ratio": float(worst["tiny_kernel_count_ratio"]),
                        "tiny_kernel_time_ratio": float(worst["tiny_kernel_time_ratio"]),
                        "median_kernel_us": float(worst["median_kernel_us"]),
                        "free_ratio": float(worst["free_ratio"]),
                        "tiny_kernel_threshold_us": TINY_KERNEL_US,
                    },
                    evidence=(
                        Evidence(
                            "kernels",
                            cite_k,
                            {"rank": int(worst["rank"])},
                            f"share of compute kernels with duration_us < {TINY_KERNEL_US:.0f}",
                        ),
                        Evidence("step_trace", cite_st, {"rank": int(worst["rank"])}),
                    ),
                    symptom_tags=("tiny_kernels", "host_bound"),
                )
            )

    # 4. dataloader: idle at step start on every rank
    prep = _col(t, "preparing_us")
    ssi = _col(t, "step_start_idle_us")
    start_idle = pd.Series(np.fmax(prep.to_numpy(), ssi.to_numpy()), index=t.index)
    src = (
        "max(step_trace preparing_us, gap before the step's first kernel)"
        if prep.notna().any()
        else "gap before the step's first kernel (kernels)"
    )
    if start_idle.notna().all() and len(t) and (start_idle > DATALOADER_US).all():
        med_idle = float(start_idle.median())
        steps_txt = f" Stalled steps: {stall_steps[:10]}." if stall_steps else ""
        share = med_idle / med_step if np.isfinite(med_step) and med_step > 0 else 0.0
        out.append(
            Finding(
                id="host_dispatch.dataloader.step_start",
                kind=FindingKind.DATALOADER,
                severity=Severity.from_share(share),
                summary=(
                    f"Every rank idles {med_idle / 1000:.1f} ms per step on average (median over "
                    f"ranks) at step start before its first device task, above the "
                    f"{DATALOADER_US / 1000:.0f} ms dataloader threshold: the input pipeline is on "
                    f"the critical path.{steps_txt}"
                ),
                summary_zh=(
                    f"所有卡在每步开始处平均每步空闲 {med_idle / 1000:.1f} ms（各卡中位数）才执行第一个设备任务，"
                    f"超过 {DATALOADER_US / 1000:.0f} ms 的数据加载阈值：数据加载位于关键路径上。"
                ),
                ranks=tuple(ranks),
                metrics={
                    "step_start_idle_us": med_idle,
                    "step_start_idle_min_us": float(start_idle.min()),
                    "dataloader_threshold_us": DATALOADER_US,
                    "share_of_step_ratio": share,
                    "stalled_steps": float(len(stall_steps)),
                },
                evidence=(
                    Evidence(
                        "kernels",
                        cite_k,
                        {"ranks": "all", "stalled_steps": stall_steps[:20]},
                        f"idle at step start = {src}, mean over steps per rank, median over ranks",
                    ),
                ),
                symptom_tags=("dataloader_stall", "high_free"),
                estimated_gain_us=med_idle,
            )
        )

    # 5. GC-like long gaps
    if not long_gaps.empty:
        gc = long_gaps[long_gaps["gc_like"]] if not no_hd else long_gaps.iloc[0:0]
        if not gc.empty:
            flagged = sorted(int(r) for r in gc["rank"].unique())
            n_steps = _col(t, "steps").fillna(1).clip(lower=1)
            steps_map = dict(zip(t["rank"].astype(int), n_steps, strict=False))
            per_rank = gc.groupby("rank")["gap_us"].sum()
            per_step = per_rank / per_rank.index.map(lambda r: steps_map.get(int(r), 1.0))
            worst = int(cast(int, per_step.idxmax()))
            g = float(per_step.max())
            share = g / med_step if np.isfinite(med_step) and med_step > 0 else 0.0
            longest = float(gc["gap_us"].max())
            out.append(
                Finding(
                    id="host_dispatch.host_bound.gc_pause",
                    kind=FindingKind.HOST_BOUND,
                    severity=Severity.from_share(share),
                    summary=(
                        f"{len(gc)} device gap(s) longer than {GC_GAP_US / 1000:.0f} ms with almost no "
                        f"host launches on ranks {format_ranks(flagged)} (longest {longest / 1000:.0f} ms; "
                        f"{g / 1000:.1f} ms per step on rank {worst}): the host paused (Python GC is the usual "
                        "cause; also checkpoint saves or preprocessing on that rank)."
                    ),
                    summary_zh=(
                        f"{format_ranks(flagged, sep='、')}号卡 上有 {len(gc)} 段超过 {GC_GAP_US / 1000:.0f} ms 的设备空闲且"
                        f"几乎没有主机下发（最长 {longest / 1000:.0f} ms；{worst}号卡 每步 {g / 1000:.1f} ms），"
                        "主机出现停顿（常见原因是 Python GC，也可能是保存检查点或该卡上的预处理）。"
                    ),
                    ranks=tuple(flagged),
                    metrics={
                        "gc_like_gaps": float(len(gc)),
                        "longest_gap_us": longest,
                        "gc_gap_us_per_step": g,
                        "gap_threshold_us": GC_GAP_US,
                    },
                    evidence=(
                        Evidence(
                            "kernels",
                            cite_k,
                            {"ranks": flagged},
                            "device gap > 200 ms with host launches per ms <= 0.1 "
                            "(only launches with a HostToDevice flow are visible)",
                        ),
                        Evidence("host_dispatch", cite_hd, {"ranks": flagged}),
                    ),
                    symptom_tags=("gc_pause", "host_bound"),
                    estimated_gain_us=g,
                )
            )

    # 6. synchronize after launches
    if "launch_then_sync_ratio" in t.columns:
        sy = t[t["launch_then_sync_ratio"] > SYNC_SHARE]
        if not sy.empty:
            flagged = [int(r) for r in sy["rank"]]
            worst = sy.sort_values("launch_then_sync_ratio", ascending=False).iloc[0]
            tags = ["synchronize_stream", "host_bound"]
            meta = profile.get("meta")
            blocking = False
            if not meta.empty and "env" in meta.columns:
                blocking = any(
                    isinstance(e, dict) and str(e.get("ASCEND_LAUNCH_BLOCKING", "")) == "1"
                    for e in meta["env"]
                )
            if blocking:
                tags.append("launch_blocking")
            out.append(
                Finding(
                    id="host_dispatch.host_bound.synchronize",
                    kind=FindingKind.HOST_BOUND,
                    severity=Severity.from_share(float(worst.get("free_ratio", 0.0) or 0.0)),
                    summary=(
                        f"{float(worst['launch_then_sync_ratio']):.0%} of launches on rank "
                        f"{int(worst['rank'])} are directly followed by a Synchronize call "
                        f"({int(worst['sync_api_count'])} calls)"
                        + ("; ASCEND_LAUNCH_BLOCKING=1 is set" if blocking else "")
                        + "."
                    ),
                    summary_zh=(
                        f"{int(worst['rank'])}号卡 上 {float(worst['launch_then_sync_ratio']):.0%} 的下发后紧跟"
                        f"同步调用（共 {int(worst['sync_api_count'])} 次）"
                        + ("；设置了 ASCEND_LAUNCH_BLOCKING=1" if blocking else "")
                        + "。"
                    ),
                    ranks=tuple(flagged),
                    metrics={
                        "launch_then_sync_ratio": float(worst["launch_then_sync_ratio"]),
                        "sync_api_count": float(worst["sync_api_count"]),
                        "sync_share_threshold_ratio": SYNC_SHARE,
                    },
                    evidence=(
                        Evidence(
                            "host_dispatch",
                            cite_hd,
                            {"rank": int(worst["rank"])},
                            "share of non-Synchronize launches whose next host call (by "
                            "host_start_us) has 'Synchronize' in api_name",
                        ),
                    ),
                    symptom_tags=tuple(tags),
                )
            )
    return out


#: Host calls kept in the ``host_calls`` table (by time per step).
HOST_CALLS_TOP = 40


def host_calls(hd: pd.DataFrame, frames: pd.DataFrame, steps: pd.Series | None) -> pd.DataFrame:
    """What the host spends its time on, per call: CANN API calls and Python frames.

    Args:
        hd: ``host_dispatch`` rows (``api_name``, ``api_duration_us``; one row per API call).
        frames: ``python_frames`` rows (``frame``, ``dur_us``, ``calls``: frames of ≥ 1 ms one per
            row, shorter ones of 50 µs - 1 ms summed per thread, frame and step; shorter than
            50 µs not recorded, so their calls are undercounted).
        steps: Steps per rank (index rank) to turn totals into per-step figures; ``None``: the
            steps the ``host_dispatch`` rows carry.

    Returns:
        Up to :data:`HOST_CALLS_TOP` rows, by ``time_per_step_us``: source (``cann_api`` from
        trace_view.json / the DB's CANN_API, ``python`` from the trace's python_function and
        cpu_op events), name (the API without its ``AscendCL@`` prefix; the frame's function,
        e.g. ``aten::cat`` or ``train_step``), frame (the full frame or API name), ranks (count),
        calls_per_step (median over ranks), per_call_us_median (µs, median over the calls; for
        Python frames over the frames recorded one per row), per_call_us_mean (µs, total /
        calls), time_per_step_us (µs, median over ranks of the call's total per step). Empty
        when neither table has durations.
    """
    cols = [
        "source", "name", "frame", "ranks", "calls_per_step", "per_call_us_median",
        "per_call_us_mean", "time_per_step_us",
    ]  # fmt: skip
    parts = []
    if not hd.empty and "api_duration_us" in hd.columns:
        h = hd.dropna(subset=["api_duration_us"])
        if not h.empty:
            parts.append(
                pd.DataFrame(
                    {
                        "source": "cann_api",
                        "frame": h["api_name"].astype(str).to_numpy(),
                        "rank": h["rank"].astype("int64").to_numpy(),
                        "dur_us": h["api_duration_us"].astype("float64").to_numpy(),
                        "calls": 1,
                        "step": h["step"].to_numpy() if "step" in h.columns else -1,
                    }
                )
            )
    if not frames.empty:
        n = frames["calls"].fillna(1).astype("int64") if "calls" in frames.columns else 1
        parts.append(
            pd.DataFrame(
                {
                    "source": "python",
                    "frame": frames["frame"].astype(str).to_numpy(),
                    "rank": frames["rank"].astype("int64").to_numpy(),
                    "dur_us": frames["dur_us"].astype("float64").to_numpy(),
                    "calls": np.asarray(n),
                    "step": -1,
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=cols)
    d = pd.concat(parts, ignore_index=True)
    if steps is not None:
        per_rank_steps = steps.astype("float64")
    else:
        per_rank_steps = d.groupby("rank")["step"].nunique().astype("float64")
    g = d.groupby(["source", "frame", "rank"], sort=False).agg(
        dur_us=("dur_us", "sum"), calls=("calls", "sum")
    )
    g = g.reset_index()
    n_steps = g["rank"].map(per_rank_steps).fillna(1.0).clip(lower=1.0)
    g["per_step_us"] = g["dur_us"] / n_steps
    g["calls_per_step"] = g["calls"] / n_steps
    out = g.groupby(["source", "frame"], sort=False).agg(
        ranks=("rank", "nunique"),
        calls_per_step=("calls_per_step", "median"),
        time_per_step_us=("per_step_us", "median"),
        dur_us=("dur_us", "sum"),
        calls=("calls", "sum"),
    )
    out["per_call_us_mean"] = out["dur_us"] / out["calls"]
    single = d[d["calls"] == 1]
    out["per_call_us_median"] = single.groupby(["source", "frame"])["dur_us"].median()
    out = out.reset_index()
    out["name"] = [
        f.split("@", 1)[1] if src == "cann_api" and "@" in f else f.rsplit("): ", 1)[-1]
        for src, f in zip(out["source"], out["frame"], strict=True)
    ]
    out = out.sort_values("time_per_step_us", ascending=False).head(HOST_CALLS_TOP)
    return out[cols].reset_index(drop=True)
