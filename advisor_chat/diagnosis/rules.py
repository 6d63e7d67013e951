"""Blame rules: each turns analyzer tables and findings into root causes (issue 12, DESIGN.md §4b).

Every rule is one function ``rule_x(ctx) -> list[RootCause]`` whose docstring states the rule and
its thresholds. Times are µs per step; "own time" of a rank is Computing + Free (time it spends
on its own, not waiting for peers in collectives). A rank's "exposed communication" is
Communication (Not Overlapped and Exclude Receive) from ``step_trace``. Victims of a late rank lose
the difference between their exposed communication and the late rank's (collective wait), capped by
the late rank's excess: that is the time they spend waiting for it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from advisor_chat.analyzers._common import format_ranks, is_comm_kernel, missing_ranks
from advisor_chat.analyzers.base import Category, Finding, FindingKind, Severity
from advisor_chat.diagnosis.context import Context, ranks_label
from advisor_chat.diagnosis.decompose import device_account, job_account
from advisor_chat.diagnosis.evidence import Explanation, explain_device, explain_hotspot
from advisor_chat.diagnosis.text import integer, ms, num, pct, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Impact,
    Mechanism,
    Remedy,
    RootCause,
)

# ------------------------------------------------------------------------------------ thresholds
#: Per-(step, rank) own-time excess over the step's peer median that makes an event (share of the
#: median step).
EVENT_MIN_SHARE = 0.10
#: A rank with events in at least this share of the kept steps is persistent (a straggler), not an
#: event source.
PERSISTENT_STEP_SHARE = 0.75
#: Steps needed before one-step events are told apart from persistent stragglers.
EVENT_MIN_STEPS = 3
#: Straggler: own-time excess over the peer median (share of the median step) — the slow_rank
#: analyzer's threshold (5%), re-checked here on the kept steps.
STRAGGLER_MIN_SHARE = 0.05
#: Slow group: the gap between the two clusters of own time (share of the median step) ...
GROUP_MIN_GAP_SHARE = 0.03
#: ... and at least this many times the larger spread inside a cluster.
GROUP_GAP_VS_SPREAD = 3.0
#: Pipeline: a stage whose Bubble is at least this share of its step is waiting ...
BUBBLE_MIN_SHARE = 0.10
#: ... and at least this much more (share) than the stage it waits for.
BUBBLE_MIN_MARGIN = 0.05
#: Bubble target used for the pipeline gain upper bound (share of the stage's step).
BUBBLE_TARGET_SHARE = 0.05
#: Job idle: the Free every rank shares (minimum over ranks) is at least this share of the step.
IDLE_MIN_SHARE = 0.10
#: Exposed communication: what remains after the specific causes, at least this share of the step.
EXPOSED_MIN_SHARE = 0.15
#: Collectives per step and rank from which "many small collectives" is said.
MANY_COLLECTIVES = 32
#: Victims losing less than this share of their step are not listed.
VICTIM_MIN_SHARE = 0.005
#: Not enough signal: fewer ranks than this cannot name a slow rank against a peer median.
MIN_RANKS = 3
#: Share of the exposed communication the small transfers must take for the exposed-communication
#: cause to be "many small collectives" (with fewer than ``MANY_COLLECTIVES`` per step).
SMALL_TIME_SHARE = 0.5


@dataclass(frozen=True)
class Event:
    """One per-(step, rank) own-time excess over the step's peer median (µs)."""

    step: int
    rank: int
    excess_us: float
    computing_excess_us: float
    free_excess_us: float


# ----------------------------------------------------------------------------------- helpers
def _severity(explained_us: float, step_us: float) -> Severity:
    return Severity.from_share(share_of(explained_us, step_us))


def _step_cite(ctx: Context) -> str:
    return ctx.cite("step_trace")


def _dominant(ctx: Context, ranks: list[int]) -> tuple[str, str, str, float, float]:
    """What dominates ``ranks``' step: (label, label_zh, component, us, share), Bubble excluded."""
    per = ctx.per_rank.loc[[r for r in ranks if r in ctx.per_rank.index]]
    step = float(per["step_us"].mean()) if not per.empty else float("nan")
    comps = {
        "computing": float(per["computing_us"].mean()),
        "communication": float(per["communication_not_overlapped_exclude_receive_us"].mean()),
        "free": float(per["free_us"].mean()),
    }
    name = max(comps, key=lambda k: comps[k])
    us = comps[name]
    share = share_of(us, step)
    en = {
        "computing": f"compute-bound ({pct(share)} Computing)",
        "communication": f"communication-bound ({pct(share)} Communication Not Overlapped)",
        "free": f"host-bound ({pct(share)} Free, device idle)",
    }[name]
    zh = {
        "computing": f"计算受限（计算时间占 {pct(share)}）",
        "communication": f"通信受限（未被掩盖的通信占 {pct(share)}）",
        "free": f"主机受限（设备空闲时间占 {pct(share)}）",
    }[name]
    return en, zh, name, us, share


def wait_victims(
    ctx: Context,
    events: list[Event],
    culprits: set[int],
    n_steps: int,
) -> tuple[Impact, ...]:
    """Victims of late ranks (one late rank per event step).

    Per event step, each peer's exposed communication minus the late rank's, clipped to [0, the late rank's excess]; summed and divided by ``n_steps``.

    Source: ``step_trace`` Communication (Not Overlapped and Exclude Receive) per (rank, step).
    """
    f = ctx.frame
    if f.empty or not events:
        return ()
    # plain dicts keyed by (rank, step): this loop looks up ~10^4 values at 1024 ranks
    keys = list(zip(f["rank"].tolist(), f["step"].tolist(), strict=True))
    comm = dict(
        zip(keys, f["communication_not_overlapped_exclude_receive_us"].tolist(), strict=True)
    )
    step_t = dict(zip(keys, f["step_us"].tolist(), strict=True))
    by_step: dict[int, list[Event]] = defaultdict(list)
    for e in events:
        by_step[e.step].append(e)
    lost: dict[int, float] = defaultdict(float)
    step_sum: dict[int, float] = defaultdict(float)
    for s, evs in by_step.items():
        late = max(evs, key=lambda e: e.excess_us)
        c_late = float(comm.get((late.rank, s), np.nan))
        if not math.isfinite(c_late):
            continue
        for v in ctx.peers(late.rank):
            if v in culprits:
                continue
            cv = float(comm.get((v, s), np.nan))
            if not math.isfinite(cv):
                continue
            lost[v] += min(max(cv - c_late, 0.0), late.excess_us)
            step_sum[v] += float(step_t.get((v, s), 0.0))
    out = []
    for v, total in lost.items():
        per_step = total / max(n_steps, 1)
        step_v = step_sum[v] / max(len(by_step), 1)
        share = share_of(per_step, step_v)
        if share >= VICTIM_MIN_SHARE:
            out.append(Impact(v, per_step, share, "collective_wait"))
    return tuple(sorted(out, key=lambda i: (-i.lost_us, i.rank)))


def layered_victims(
    ctx: Context, culprits: dict[int, list[Event]], n_steps: int
) -> dict[int, tuple[Impact, ...]]:
    """Victims of several persistent late ranks, without double counting.

    Per step, the late ranks are ordered by exposed communication (least first = last to arrive).
    A peer's collective wait (its exposed communication minus the last arriver's) is cut into
    layers: the last arriver is blamed for the wait up to the next late rank's arrival, that rank
    for the next layer, and so on; each layer is capped by its culprit's excess in that step. A
    late rank that arrives before another late rank is itself a victim of the later one.

    Source: ``step_trace`` Communication (Not Overlapped and Exclude Receive) per (rank, step).
    """
    f = ctx.frame
    if f.empty or not culprits:
        return {}
    # plain dicts keyed by (rank, step): this loop looks up ~10^4 values at 1024 ranks
    keys = list(zip(f["rank"].tolist(), f["step"].tolist(), strict=True))
    comm = dict(
        zip(keys, f["communication_not_overlapped_exclude_receive_us"].tolist(), strict=True)
    )
    step_t = dict(zip(keys, f["step_us"].tolist(), strict=True))
    lost: dict[int, dict[int, float]] = {c: defaultdict(float) for c in culprits}
    steps_seen: dict[int, set[int]] = defaultdict(set)
    excess = {(e.rank, e.step): e.excess_us for evs in culprits.values() for e in evs}
    for s in sorted({e.step for evs in culprits.values() for e in evs}):
        late = [c for c in culprits if excess.get((c, s), 0.0) > 0 and (c, s) in comm]
        late.sort(key=lambda c: float(comm[(c, s)]))
        if not late:
            continue
        pool = set(ctx.peers(late[0]))
        for v in pool:
            if (v, s) not in comm:
                continue
            cv = float(comm[(v, s)])
            for i, c in enumerate(late):
                if c == v:
                    break
                lo = float(comm[(c, s)])
                nxt = late[i + 1] if i + 1 < len(late) else None
                hi = cv if nxt is None or nxt == v else min(cv, float(comm[(nxt, s)]))
                seg = min(max(hi - lo, 0.0), excess[(c, s)])
                if seg > 0:
                    lost[c][v] += seg
                    steps_seen[v].add(s)
    out: dict[int, tuple[Impact, ...]] = {}
    for c, per_v in lost.items():
        imps = []
        for v, total in per_v.items():
            per_step = total / max(n_steps, 1)
            step_v = float(np.mean([float(step_t.get((v, s), 0.0)) for s in steps_seen[v]]))
            share = share_of(per_step, step_v)
            if share >= VICTIM_MIN_SHARE:
                imps.append(Impact(v, per_step, share, "collective_wait"))
        out[c] = tuple(sorted(imps, key=lambda i: (-i.lost_us, i.rank)))
    return out


def find_events(ctx: Context) -> list[Event]:
    """Per-(step, rank) events of own time.

    An event is an own-time excess ≥ ``EVENT_MIN_SHARE`` of the median step over the step's
    peer median (peers: the rank's pipeline stage, else every rank).

    Source: ``step_trace`` Computing + Free per (rank, step).
    """
    f = ctx.frame
    if f.empty or not math.isfinite(ctx.step_us):
        return []
    thr = EVENT_MIN_SHARE * ctx.step_us
    own = f.assign(own_us=f["computing_us"] + f["free_us"])
    out: list[Event] = []
    groups = ctx.stages or [tuple(ctx.ranks)]
    for members in groups:
        sub = own[own["rank"].isin(members)]
        for s, g in sub.groupby("step"):
            if len(g) < 2:
                continue
            med_own = float(g["own_us"].median())
            med_c = float(g["computing_us"].median())
            med_f = float(g["free_us"].median())
            for row in g.itertuples(index=False):
                ex = num(row.own_us) - med_own
                if ex >= thr:
                    out.append(
                        Event(
                            integer(s),
                            integer(row.rank),
                            ex,
                            num(row.computing_us) - med_c,
                            num(row.free_us) - med_f,
                        )
                    )
    return out


def op_delta(
    ctx: Context, slow: list[int], fast: list[int]
) -> tuple[str, str, float, float, int] | None:
    """The compute operator that differs most between two rank sets.

    The operator (type + input shapes) whose time per step differs most between the
    ``slow`` and ``fast`` ranks: (op_type, input_shapes, delta_us per step, avg duration ratio).

    Source: ``kernels`` (kernel_details.csv / DB TASK), communication tasks excluded; mean per
    rank per step, then the mean over each rank set. ``None`` without kernels. A rank set larger
    than 2x ``PEER_SAMPLE`` is replaced by ``PEER_SAMPLE`` evenly spaced ranks of it (only their
    kernel_details.csv is read); the last item is the number of ranks sampled that way (0: none).
    """
    from advisor_chat.ingest.profile import PEER_SAMPLE

    if not slow or not fast:
        return None
    n_sample = 0

    def sample(ranks: list[int]) -> list[int]:
        nonlocal n_sample
        rs = sorted(set(ranks))
        if len(rs) <= 2 * PEER_SAMPLE:
            return rs
        idx = np.linspace(0, len(rs) - 1, PEER_SAMPLE).round().astype(int)
        rs = sorted({rs[i] for i in idx})
        n_sample += len(rs)
        return rs

    slow, fast = sample(slow), sample(fast)
    k = ctx.profile.kernels_for([*slow, *fast])
    if k.empty:
        return None
    k = k[~is_comm_kernel(k).to_numpy()]
    k = k[k["rank"].isin([*slow, *fast])]
    if k.empty:
        return None
    k = k.assign(
        op_type=k["op_type"].astype("string").fillna(k["name"].astype("string")),
        input_shapes=k["input_shapes"].astype("string").fillna(""),
    )
    n_steps = k.groupby("rank")["step"].nunique()
    agg = (
        k.groupby(["rank", "op_type", "input_shapes"], dropna=False)["duration_us"]
        .agg(["sum", "count"])
        .reset_index()
    )
    agg["per_step_us"] = agg["sum"] / agg["rank"].map(n_steps)
    agg["avg_us"] = agg["sum"] / agg["count"]

    def side(ranks: list[int]) -> pd.DataFrame:
        s = agg[agg["rank"].isin(ranks)]
        return s.groupby(["op_type", "input_shapes"])[["per_step_us", "avg_us"]].sum() / len(ranks)

    a, b = side(slow), side(fast)
    j = a.add_suffix("_slow").join(b.add_suffix("_fast"), how="outer").fillna(0.0)
    if j.empty:
        return None
    j["delta"] = j["per_step_us_slow"] - j["per_step_us_fast"]
    top = j["delta"].idxmax()
    top_key: Any = top
    row = j.loc[top_key]
    if float(row["delta"]) <= 0:
        return None
    ratio = share_of(float(row["avg_us_slow"]), float(row["avg_us_fast"]))
    return str(top_key[0]), str(top_key[1]), float(row["delta"]), ratio, n_sample


def _op_sample_txt(op: tuple[str, str, float, float, int] | None) -> tuple[str, str]:
    """' (kernels of a peer sample of N ranks)' when :func:`op_delta` sampled, else ''."""
    if op is None or not op[4]:
        return "", ""
    return (
        f" (kernels of a peer sample of {op[4]} ranks)",
        f"（基于 {op[4]} 个抽样 rank 的算子数据）",
    )


def _claim(ctx: Context, pred: object) -> tuple[Finding, ...]:
    out = []
    for f in ctx.findings:
        if f.id in ctx.claimed:
            continue
        if callable(pred) and pred(f):
            out.append(f)
            ctx.claimed.add(f.id)
    return tuple(out)


# --------------------------------------------------------------------------------- data quality
def detect_artifact_steps(profile: object) -> tuple[list[tuple[int, int]], dict[str, float]]:
    """Data-artifact rule: (step, rank) pairs whose device records are incomplete.

    Rule: with a ``kernels`` table and ≥ 2 steps, a (rank, step) with fewer than 0.8× the median
    kernel count of that rank's other steps. A large Preparing (``step_trace.preparing_us``) alone
    does not exclude a step (a data-loading stall also shows as Preparing); it is reported as
    evidence for the flagged steps. Never excludes every step.

    Up to 2x ``PEER_SAMPLE`` ranks with kernels, every rank is counted. Beyond, kernels are
    counted only where a light signal points (``_artifact_suspects``): the
    (rank, step) pairs whose step_trace Computing drops below 0.9x, or whose Preparing rises
    above 5x (and 1 ms), the rank's median of its other steps. When more than 2x
    ``PEER_SAMPLE`` ranks are suspect, kernels are counted for an evenly spaced sample of
    ``PEER_SAMPLE`` of them, a step is flagged on every suspect rank when at least half of
    the sampled ranks confirm it, and ``metrics['peer_sample_ranks']`` says so. Without a
    usable step trace, the ``PEER_SAMPLE`` peer sample is counted.

    Returns:
        The flagged (step, rank) pairs and metrics (kernel counts, preparing).
    """
    from advisor_chat.ingest.profile import PEER_SAMPLE, Profile

    assert isinstance(profile, Profile)
    flagged: list[tuple[int, int]] = []
    metrics: dict[str, float] = {}
    st = profile.get("step_trace")
    avail = profile.available_ranks("kernels")
    suspects: dict[int, set[int]] | None
    if len(avail) <= 2 * PEER_SAMPLE:  # small profile: count every rank
        suspects = {r: set() for r in avail}
    else:
        suspects = _artifact_suspects(st)
    if suspects is None:  # no light signal: count a peer sample
        ranks, _ = profile.peer_sample("kernels")
        suspects = {r: set() for r in ranks}
    sampled = len(suspects) > 2 * PEER_SAMPLE
    ranks = sorted(suspects)
    if sampled:
        idx = np.linspace(0, len(ranks) - 1, PEER_SAMPLE).round().astype(int)
        ranks = sorted({ranks[i] for i in idx})
    k = profile.kernels_for(ranks) if ranks else profile.kernels_for([])
    if not k.empty and k["step"].notna().any():
        counts = k.dropna(subset=["step"]).groupby(["rank", "step"]).size().unstack("step")
        mat = counts.to_numpy(dtype="float64")  # rank x step kernel counts (NaN: no records)
        if mat.shape[1] >= 2:
            import warnings

            for j, s in enumerate(counts.columns):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows
                    ref = np.nanmedian(np.delete(mat, j, axis=1), axis=1)
                low = (ref > 0) & (mat[:, j] < 0.8 * ref)
                for i in np.flatnonzero(low):
                    flagged.append((integer(s), integer(counts.index[int(i)])))
                    n = float(mat[i, j])
                    metrics["kernel_count_flagged_min"] = min(
                        metrics.get("kernel_count_flagged_min", n), n
                    )
                    metrics["kernel_count_siblings_median"] = float(ref[i])
    if sampled:
        # a step confirmed on at least half of the sampled suspects is flagged on every suspect
        # rank of that step (the light signal), the sample is stated
        confirmed = {
            s
            for s in {s for s, _ in flagged}
            if 2 * sum(1 for s2, _ in flagged if s2 == s)
            >= sum(1 for r in ranks if s in suspects.get(r, set()))
        }
        flagged = [(s, r) for r, ss in suspects.items() for s in ss if s in confirmed]
        metrics["peer_sample_ranks"] = float(len(ranks))
        metrics["suspect_ranks"] = float(len(suspects))
    if flagged and not st.empty and st["preparing_us"].notna().any():
        bad = {s for s, _ in flagged}
        prep = st[st["step"].isin(list(bad))]["preparing_us"]
        if prep.notna().any():
            metrics["preparing_us"] = float(prep.max())
    steps = {s for s, _ in flagged}
    all_steps = set(int(s) for s in profile.steps)
    if steps and steps >= all_steps:
        return [], metrics
    return sorted(set(flagged)), metrics


def _artifact_suspects(st: pd.DataFrame) -> dict[int, set[int]] | None:
    """{rank: steps} whose step_trace hints at lost device records (``None``: no signal).

    A (rank, step) is a suspect when its ``computing_us`` is below 0.9x, or its
    ``preparing_us`` above 5x (and above 1 ms), the median of the rank's other steps.
    """
    if st.empty or st["step"].nunique() < 2:
        return None
    out: dict[int, set[int]] = {}
    usable = False
    for col, low in (("computing_us", True), ("preparing_us", False)):
        if col not in st.columns or not st[col].notna().any():
            continue
        usable = True
        piv = st.pivot_table(index="rank", columns="step", values=col, aggfunc="mean")
        mat = piv.to_numpy(dtype="float64")
        import warnings

        for j, s in enumerate(piv.columns):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows
                ref = np.nanmedian(np.delete(mat, j, axis=1), axis=1)
            v = mat[:, j]
            hit = (v < 0.9 * ref) if low else ((v > 5 * ref) & (v > 1000.0))
            for i in np.flatnonzero(hit & np.isfinite(v)):
                out.setdefault(integer(piv.index[int(i)]), set()).add(integer(s))
    return out if usable else None


def artifact_cause(pairs: list[tuple[int, int]], metrics: dict[str, float], cite: str) -> RootCause:
    """The DATA_ARTIFACT cause for the excluded (step, rank) pairs (no gain, checks only)."""
    steps = tuple(sorted({s for s, _ in pairs}))
    ranks = tuple(sorted({r for _, r in pairs}))
    st = ", ".join(str(s) for s in steps)
    rl, rl_zh = ranks_label(ranks)
    detail = ""
    if "kernel_count_flagged_min" in metrics:
        detail = (
            f" (as few as {metrics['kernel_count_flagged_min']:.0f} kernels vs a median of "
            f"{metrics['kernel_count_siblings_median']:.0f} in the sibling steps)"
        )
    if "preparing_us" in metrics:
        detail += f" (Preparing up to {ms(metrics['preparing_us'])})"
    detail_zh = ""
    if "kernel_count_flagged_min" in metrics:
        detail_zh = (
            f"（最少只有 {metrics['kernel_count_flagged_min']:.0f} 个算子，其他步中位数为 "
            f"{metrics['kernel_count_siblings_median']:.0f} 个）"
        )
    if "preparing_us" in metrics:
        detail_zh += f"（Preparing 最长 {ms(metrics['preparing_us'])}）"
    if "peer_sample_ranks" in metrics:
        n, m = int(metrics["peer_sample_ranks"]), int(metrics.get("suspect_ranks", 0))
        detail += f" (kernel counts checked on a peer sample of {n} of the {m} suspect ranks)"
        detail_zh += f"（算子数仅在 {m} 个可疑 rank 中抽样的 {n} 个上核对）"
    return RootCause(
        id="cause.data_artifact.steps_" + "_".join(str(s) for s in steps),
        mechanism=Mechanism.DATA_ARTIFACT,
        category=Category.UNKNOWN,
        culprit=Culprit(
            kind="steps",
            ranks=ranks,
            events=tuple(pairs),
            label=f"step {st}" if len(steps) == 1 else f"steps {st}",
            label_zh=f"第 {st} 步",
        ),
        victims=(),
        summary=(
            f"Step {st} has incomplete device records on {rl}{detail}: it is excluded from the "
            "diagnosis, not a slowdown."
        ),
        summary_zh=(
            f"第 {st} 步在{rl_zh}上的设备侧记录不完整{detail_zh}：已从诊断中排除，这不是性能变慢。"
        ),
        metrics={"excluded_steps_count": float(len(steps)), **metrics},
        findings=(),
        steps=steps,
        remedies=(
            Remedy(
                "check",
                "Capture more steps and skip the first ones (profiler schedule wait/warmup) so "
                "every captured step has complete device records.",
                "多采集几步并跳过最初几步（profiler schedule 的 wait/warmup），"
                "保证每个采集的步都有完整的设备侧记录。",
            ),
        ),
        symptom_tags=("missing_steps",),
        severity=Severity.INFO,
    )


# --------------------------------------------------------------------------------------- rules
def rule_pipeline(ctx: Context) -> list[RootCause]:
    """Pipeline rule: a stage's receive wait (Bubble) is blamed on the stage it waits for.

    Rule: with ≥ 2 pipeline stages, a stage whose mean Bubble is ≥ ``BUBBLE_MIN_SHARE`` (10%)
    of its step and ≥ ``BUBBLE_MIN_MARGIN`` (5 points) above the stage with the least Bubble is
    waiting; the culprit is the stage with the least Bubble (the busiest stage), and the cause says
    what dominates it (Computing, Communication Not Overlapped and Exclude Receive, or Free).
    Victims: every rank of the waiting stages, lost = its Bubble per step (``how="bubble"``).
    Gain (upper bound): mean Bubble of the waiting ranks minus ``BUBBLE_TARGET_SHARE`` (5%) of
    their step. Source: ``step_trace`` Bubble / Stage columns (cluster_step_trace_time.csv).
    """
    if len(ctx.stages) < 2 or ctx.per_rank.empty:
        return []
    per = ctx.per_rank
    stats = []
    for i, members in enumerate(ctx.stages):
        m = [r for r in members if r in per.index]
        if not m:
            continue
        sub = per.loc[m]
        stats.append(
            (
                i,
                m,
                float(sub["bubble_us"].mean()),
                share_of(float(sub["bubble_us"].mean()), float(sub["step_us"].mean())),
            )
        )
    if len(stats) < 2:
        return []
    culprit = min(stats, key=lambda t: t[3])
    waiting = [
        t
        for t in stats
        if t[0] != culprit[0]
        and t[3] >= BUBBLE_MIN_SHARE
        and t[3] - culprit[3] >= BUBBLE_MIN_MARGIN
    ]
    if not waiting:
        return []
    c_idx, c_ranks = culprit[0], culprit[1]
    dom, dom_zh, comp, dom_us, dom_share = _dominant(ctx, c_ranks)
    victims = []
    for _, ranks, _, _ in waiting:
        for r in ranks:
            b = ctx.val(r, "bubble_us")
            victims.append(Impact(r, b, share_of(b, ctx.val(r, "step_us")), "bubble"))
    victims.sort(key=lambda i: (-i.lost_us, i.rank))
    w_ranks = sorted(r for _, rs, _, _ in waiting for r in rs)
    bubble_mean = float(np.mean([v.lost_us for v in victims]))
    w_step = float(per.loc[w_ranks, "step_us"].mean())
    bubble_share = share_of(bubble_mean, w_step)
    gain = max(bubble_mean - BUBBLE_TARGET_SHARE * w_step, 0.0)
    own_col = {
        "computing": "computing_us",
        "communication": "communication_not_overlapped_exclude_receive_us",
        "free": "free_us",
    }[comp]
    own = tuple(
        Impact(
            r, ctx.val(r, own_col), share_of(ctx.val(r, own_col), ctx.val(r, "step_us")), "own_time"
        )
        for r in c_ranks
    )
    cl, cl_zh = ranks_label(c_ranks)
    wl, wl_zh = ranks_label(w_ranks)
    w_stage_txt = ", ".join(str(t[0]) for t in waiting)
    label = f"stage {c_idx} ({cl})"
    label_zh = f"流水线阶段{c_idx}（{cl_zh}）"
    comm_claim = comp == "communication"
    # limited evidence (trial item 4): a communication-bound claim resting on few steps or on
    # communication detail (comm_ops) for only some ranks is said so, with the counts
    lim = lim_zh = ""
    if comm_claim:
        ops = ctx.profile.get("comm_ops")
        n_comm = int(ops["rank"].nunique()) if not ops.empty and "rank" in ops else 0
        n_all = len(ctx.ranks)
        n_st = int(ctx.frame["step"].nunique()) if "step" in ctx.frame else 0
        parts, parts_zh = [], []
        if n_comm < n_all:
            parts.append(f"communication detail (comm_ops) for {n_comm} of {n_all} ranks")
            parts_zh.append(f"通信明细（comm_ops）只覆盖 {n_all} 张卡中的 {n_comm} 张")
        if n_st <= 1:
            parts.append(f"{n_st} step captured")
            parts_zh.append(f"只采集了 {n_st} 步")
        if parts:
            lim = (
                " Limited evidence: " + ", ".join(parts) + "; the split of that communication "
                "into transfer and waiting is not known for every rank, so the gain is a loose "
                "upper bound."
            )
            lim_zh = (
                "证据有限：" + "，".join(parts_zh) + "；无法确定每张卡的通信中传输与等待各占多少，"
                "收益只是宽松的上限。"
            )
    findings = _claim(
        ctx,
        lambda f: (
            f.id.startswith("cluster_breakdown.bottleneck.pipeline_bubble")
            or (f.id.startswith("cluster_breakdown.bottleneck.") and f"stage_{c_idx}" in f.id)
            or (f.id.startswith("cluster_breakdown.communication.wait_spread_stage"))
            or (
                comm_claim
                and f.id in ("communication.communication.not_overlapped",)
                and bool(set(f.ranks) & set(c_ranks))
            )
        ),
    )
    remedies: list[Remedy] = []
    upper = BoundKind.UPPER_BOUND
    if comp == "communication":
        remedies.append(
            Remedy(
                "action",
                f"Cut stage {c_idx}'s non-overlapped communication ({ms(dom_us)} per step): overlap "
                "its collectives with computation, use fewer and larger collectives (bucket sizes), "
                f"or move its communication-heavy parallel dimension; stage {w_stage_txt} then "
                "waits less.",
                f"减少阶段{c_idx}未被掩盖的通信（每步 {ms(dom_us)}）：让其集合通信与计算重叠、"
                f"合并为更少更大的集合通信（调整 bucket 大小），或调整通信量大的并行维度；"
                f"这样阶段{w_stage_txt}的等待会减少。",
                gain,
                upper,
            )
        )
    elif comp == "computing":
        remedies.append(
            Remedy(
                "action",
                f"Rebalance the pipeline partition: move layers from stage {c_idx} to stage "
                f"{w_stage_txt}.",
                f"重新划分流水线：把部分层从阶段{c_idx}移到阶段{w_stage_txt}。",
                gain,
                upper,
            )
        )
    else:
        remedies.append(
            Remedy(
                "action",
                f"Remove the host-side idle of stage {c_idx} (dispatch, synchronization, data "
                "loading), which the other stage waits for.",
                f"消除阶段{c_idx}的主机侧空闲（下发、同步、数据加载），其他阶段正在等它。",
                gain,
                upper,
            )
        )
    remedies.append(
        Remedy(
            "action",
            "Use more micro-batches per step (or an interleaved 1F1B schedule) so the Bubble "
            "is a smaller share of the step.",
            "每步使用更多的 micro-batch（或交错式 1F1B 调度），降低流水线气泡在每步中的占比。",
            gain,
            upper,
        )
    )
    remedies.append(
        Remedy(
            "check",
            f"Open stage {c_idx}'s ranks ({cl}) in the timeline (MindStudio Insight) and see which "
            "part of its step has no computation under its communication.",
            f"在时间线（MindStudio Insight）中打开阶段{c_idx}（{cl_zh}）的卡，"
            "确认其每步中哪一部分通信下面没有计算可以掩盖。",
        )
    )
    return [
        RootCause(
            id=f"cause.pipeline_imbalance.stage_{c_idx}",
            mechanism=Mechanism.PIPELINE_IMBALANCE,
            category=Category.COMMUNICATION
            if comp == "communication"
            else Category.COMPUTE
            if comp == "computing"
            else Category.SCHEDULING,
            culprit=Culprit(
                kind="stage", ranks=tuple(c_ranks), stage=c_idx, label=label, label_zh=label_zh
            ),
            victims=tuple(victims),
            summary=(
                f"Pipeline imbalance: stage {w_stage_txt} ({wl}) waits {ms(bubble_mean)} per step "
                f"in Bubble ({pct(bubble_share)} of its step) for stage {c_idx} ({cl}), which is "
                f"{dom}." + lim
            ),
            summary_zh=(
                f"流水线负载不均衡：阶段{w_stage_txt}（{wl_zh}）每步在气泡中等待 {ms(bubble_mean)}"
                f"（占其步长 {pct(bubble_share)}），等的是阶段{c_idx}（{cl_zh}），"
                f"后者{dom_zh}。" + lim_zh
            ),
            metrics={
                "bubble_us_mean": bubble_mean,
                "bubble_share": bubble_share,
                "culprit_dominant_us": dom_us,
                "culprit_dominant_share": dom_share,
                "gain_upper_bound_us": gain,
            },
            findings=findings,
            gain_us=gain,
            bound=upper,
            remedies=tuple(remedies),
            symptom_tags=("pipeline_bubble", "comm_not_overlapped")
            if comp == "communication"
            else ("pipeline_bubble",),
            dominant=dom,
            dominant_zh=dom_zh,
            severity=_severity(bubble_mean, w_step),
            own=own,
        )
    ]


def rule_slow_link(ctx: Context) -> list[RootCause]:
    """Slow-link rule: transit excess on a degraded link is blamed on the link.

    Rule: every ``slow_link`` finding of kind ``slow_link`` (a link below 0.6× the median
    bandwidth of its transport, the slow_link analyzer's threshold). Culprit: the link
    (src, dst, transport); its endpoint ranks are "on the slow link" (``own`` = the transit excess,
    ``how="slow_link_transit"``). Victims: the other ranks of the communication group(s) the link
    belongs to, lost = min(transit excess per step, their exposed communication). Transit excess =
    link transit time − transit size / median bandwidth, per step (the finding's ``extra_us``).
    Source: ``comm_matrix`` (communication_matrix.json) and ``step_trace``.
    """
    out = []
    for f in ctx.finding("slow_link.slow_link."):
        if f.kind is not FindingKind.SLOW_LINK:
            continue
        src, dst = (
            int(f.metrics.get("src_rank", f.ranks[0])),
            int(f.metrics.get("dst_rank", f.ranks[-1])),
        )
        transport = f.id.rsplit("_", 1)[-1].upper() if "_" in f.id else ""
        res = ctx.result("slow_link")
        group_ranks: set[int] = set()
        if res is not None and not res.table.empty:
            t = res.table
            row = t[(t["src_rank"] == src) & (t["dst_rank"] == dst) & t["slow"].astype(bool)]
            if not row.empty:
                transport = str(row["transport"].iloc[0])
                grp = str(row["group"].iloc[0])
                g = ctx.profile.get("comm_groups")
                if not g.empty:
                    hit = g[g["group"].astype(str) == grp]
                    for rs in hit["ranks"]:
                        if isinstance(rs, (list, tuple, np.ndarray)):
                            group_ranks.update(int(x) for x in rs)
        if not group_ranks:
            group_ranks = set(ctx.peers(src))
        extra = float(f.metrics.get("extra_us", f.estimated_gain_us or 0.0))
        victims = []
        for v in sorted(group_ranks - {src, dst}):
            if v not in ctx.per_rank.index:
                continue
            lost = min(extra, ctx.val(v, "communication_not_overlapped_exclude_receive_us"))
            share = share_of(lost, ctx.val(v, "step_us"))
            if share >= VICTIM_MIN_SHARE:
                victims.append(Impact(v, lost, share, "collective_wait"))
        own = tuple(
            Impact(r, extra, share_of(extra, ctx.val(r, "step_us")), "slow_link_transit")
            for r in (src, dst)
        )
        bw, med = (
            f.metrics.get("bandwidth_gbps", float("nan")),
            f.metrics.get("median_gbps", float("nan")),
        )
        label = f"link {src}→{dst} ({transport})"
        label_zh = f"链路 {src}→{dst}（{transport}）"
        claimed = _claim(
            ctx,
            lambda x, fid=f.id: (
                x.id == fid
                or x.id.startswith("slow_link.communication.wait_ratio")
                or x.id.startswith("communication.communication.wait_")
                or x.id.startswith("cluster_breakdown.communication.wait_spread")
            ),
        )
        out.append(
            RootCause(
                id=f"cause.slow_link.{src}_{dst}_{transport.lower()}",
                mechanism=Mechanism.SLOW_LINK,
                category=Category.COMMUNICATION,
                culprit=Culprit(
                    kind="link",
                    ranks=tuple(sorted({src, dst})),
                    link=(src, dst),
                    transport=transport,
                    label=label,
                    label_zh=label_zh,
                ),
                victims=tuple(victims),
                summary=(
                    f"Slow link: {transport} link {src}→{dst} runs at {bw:.1f} GB/s against a "
                    f"median of {med:.1f} GB/s for {transport}; the extra transit time costs "
                    f"{ms(extra)} per step, and every rank of its collectives waits for it "
                    f"(ranks {src} and {dst} sit on the slow link; their own Computing and Free are normal)."
                ),
                summary_zh=(
                    f"慢链路：{transport} 链路 {src}→{dst} 带宽只有 {bw:.1f} GB/s，同类链路中位数为 "
                    f"{med:.1f} GB/s；多出的传输时间每步 {ms(extra)}，同一集合通信中的所有卡都在等它"
                    f"（{src}号卡和{dst}号卡位于这条慢链路上，其自身计算与空闲时间正常）。"
                ),
                metrics={
                    "bandwidth_gbps": float(bw),
                    "median_gbps": float(med),
                    "transit_excess_us": extra,
                },
                findings=claimed,
                gain_us=extra,
                bound=BoundKind.ESTIMATE,
                remedies=(
                    Remedy(
                        "action",
                        f"Repair the {transport} path between ranks {src} and {dst} (NIC, optical "
                        "module, cable or switch port) so it runs at its peers' bandwidth.",
                        f"修复{src}号卡与{dst}号卡之间的 {transport} 通路（网卡、光模块、线缆或交换机端口），"
                        "使其达到同类链路的带宽。",
                        extra,
                        BoundKind.ESTIMATE,
                    ),
                    Remedy(
                        "check",
                        f"Run hccn_tool link, optical and statistics checks on the devices of ranks "
                        f"{src} and {dst}, and an HCCL test between them.",
                        f"在{src}号卡和{dst}号卡所在设备上用 hccn_tool 检查链路、光模块和统计信息，"
                        "并在两者之间跑一次 HCCL 测试。",
                    ),
                ),
                symptom_tags=(
                    "slow_link",
                    "rdma_low_bandwidth" if transport.upper() == "RDMA" else "hccs_low_bandwidth",
                ),
                severity=_severity(extra, ctx.step_us),
                own=own,
            )
        )
    return _one_cause_per_link(out)


def _one_cause_per_link(causes: list[RootCause]) -> list[RootCause]:
    """Both directions of one physical link are one cause, its cost counted once.

    The two directions of a link carry their transfers at the same time within a collective, so
    the job loses the larger of the two directions' transit excess, not their sum. The merged
    cause keeps the slower direction's numbers and names both bandwidths.
    """
    by_link: dict[tuple[int, int, str], list[RootCause]] = defaultdict(list)
    for c in causes:
        a, b = c.culprit.link or (0, 0)
        by_link[(min(a, b), max(a, b), c.culprit.transport)].append(c)
    out = []
    for (a, b, t), cs in by_link.items():
        if len(cs) == 1:
            out.append(cs[0])
            continue
        cs.sort(key=lambda c: -(c.gain_us or 0.0))
        top, other = cs[0], cs[1]
        bw1, bw2 = top.metrics["bandwidth_gbps"], other.metrics["bandwidth_gbps"]
        med = top.metrics["median_gbps"]
        extra = top.gain_us or 0.0
        victims = {v.rank: v for c in cs for v in c.victims}
        summary = (
            f"Slow link: {t} link {a}↔{b} is slow in both directions ({bw1:.1f} and {bw2:.1f} GB/s "
            f"against a median of {med:.1f} GB/s for {t}); the extra transit time costs "
            f"{ms(extra)} per step, counted once because both directions transfer at the same "
            f"time, and every rank of its collectives waits for it (ranks {a} and {b} sit on the "
            "slow link; their own Computing and Free are normal)."
        )
        summary_zh = (
            f"慢链路：{t} 链路 {a}↔{b} 两个方向都慢（{bw1:.1f} 和 {bw2:.1f} GB/s，同类链路中位数为 "
            f"{med:.1f} GB/s）；多出的传输时间每步 {ms(extra)}（两个方向同时传输，只计一次），"
            f"同一集合通信中的所有卡都在等它（{a}号卡和{b}号卡位于这条慢链路上，其自身计算与空闲时间正常）。"
        )
        out.append(
            dataclasses.replace(
                top,
                id=f"cause.slow_link.{a}_{b}_{t.lower()}",
                culprit=dataclasses.replace(
                    top.culprit, label=f"link {a}↔{b} ({t})", label_zh=f"链路 {a}↔{b}（{t}）"
                ),
                victims=tuple(sorted(victims.values(), key=lambda i: (-i.lost_us, i.rank))),
                summary=summary,
                summary_zh=summary_zh,
                metrics={**top.metrics, "bandwidth_gbps_reverse": float(bw2), "directions": 2.0},
                findings=(*top.findings, *other.findings),
            )
        )
    return out


def arrival_measured(ctx: Context, rank: int) -> bool:
    """Whether per-collective data shows ``rank`` arriving late (``slow_rank`` table ``votes`` > 0).

    ``votes`` counts the collectives (``comm_ops``, from communication.json or the DB) in which the
    rank waited least, i.e. arrived last. With none (no such data, e.g. a cluster step trace only,
    or no collective where this rank came last) the late arrival is inferred from the step times
    alone, and the text says so.
    """
    res = ctx.result("slow_rank")
    t = res.table if res is not None else None
    if t is None or t.empty or "votes" not in t.columns or "rank" not in t.columns:
        return False
    row = t.loc[t["rank"] == rank, "votes"]
    return bool(len(row)) and float(row.iloc[0]) > 0


def host_timeline(ctx: Context, ranks: list[int] | None = None) -> tuple[str, str]:
    """Where the host timeline of ``ranks`` (default: every rank) is, as (English, Chinese) text.

    ``trace_view.json`` for the text export; the profiler DB (``ascend_pytorch_profiler_{rank}.db``,
    its CANN_API / PYTORCH_API tables) for the DB export, which has no ``trace_view.json``. Decided
    by the files ``host_dispatch`` comes from (listed before they are read), else by the layout.
    """
    paths = [
        s.path
        for s in ctx.profile.sources.get("host_dispatch", [])
        if ranks is None or s.rank is None or s.rank in ranks
    ]
    db = [p for p in paths if p.endswith(".db")]
    in_db = len(db) == len(paths) if paths else ctx.profile.layout == "ascend_pt_db"
    if not in_db:
        return "trace_view.json", "trace_view.json"
    name = os.path.basename(db[0]) if db else "ascend_pytorch_profiler_{rank}.db"
    if not (ranks is not None and len(ranks) == 1 and len(db) == 1):  # several ranks: the pattern
        name = re.sub(r"_\d+\.db$", "_{rank}.db", name)
    return f"{name} (CANN_API / PYTORCH_API tables)", f"{name}（CANN_API / PYTORCH_API 表）"


def host_measured(ctx: Context, rank: int) -> bool:
    """Whether host launch delays of ``rank`` are measured (``host_dispatch`` from trace_view.json).

    Without them, a rank's extra Free is "device idle (Free)" with possible causes, never a
    host stall stated as fact, and no remedy points at a trace file the profile does not have.
    """
    if not ctx.profile.has("host_dispatch"):
        return False
    hd = ctx.profile.host_dispatch_for([rank])  # only this rank's trace_view.json
    if hd.empty or "rank" not in hd or "launch_delay_us" not in hd:
        return False
    return bool(hd.loc[hd["rank"] == rank, "launch_delay_us"].notna().any())


def _rank_cause(
    ctx: Context,
    rank: int,
    events: list[Event],
    n_steps: int,
    scoped: bool,
    victims: tuple[Impact, ...] | None = None,
) -> RootCause:
    """A single-rank cause (host stall or compute straggler) from its events."""
    steps = tuple(sorted({e.step for e in events}))
    comp_ex = sum(e.computing_excess_us for e in events) / max(n_steps, 1)
    free_ex = sum(e.free_excess_us for e in events) / max(n_steps, 1)
    excess = sum(e.excess_us for e in events) / max(n_steps, 1)
    host = free_ex >= comp_ex
    if victims is None:
        victims = wait_victims(ctx, events, {rank}, n_steps)
    gain = max((v.lost_us for v in victims), default=excess) if victims else excess
    gain = min(gain, excess) if excess > 0 else gain
    peers = [r for r in ctx.peers(rank) if r != rank]
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
                    FindingKind.HOST_BOUND,
                    FindingKind.OP_REGRESSION,
                    FindingKind.DATALOADER,
                    FindingKind.LOAD_IMBALANCE,
                )
                or (f.kind is FindingKind.BOTTLENECK and len(f.ranks) <= 2)
                or (f.id.startswith("env_check.env.first_collective_late"))
                or (f.kind is FindingKind.JITTER and len(f.ranks) <= 2)
            )
        ),
    )
    per_step = "" if scoped else " per step"
    ex: Explanation | None = None
    alone = alone_zh = ""
    if victims and gain < 0.8 * excess:
        alone = f" Fixing it alone saves up to {ms(gain)} per step: other late ranks follow it."
        alone_zh = f"单独修复它每步最多节省 {ms(gain)}：其后还有其他晚到的卡。"
    if host:
        mech, cat = Mechanism.HOST_STALL, Category.SCHEDULING
        what = f"its device idles (Free) {ms(free_ex)} more{per_step} than its peers"
        what_zh = f"其设备空闲时间（Free）每步比同组多 {ms(free_ex)}"
        if scoped:
            tot = sum(e.free_excess_us for e in events)
            what = f"its device idles (Free) {ms(tot)} more than its peers{scope}"
            what_zh = f"{scope_zh}其设备空闲时间（Free）比同组多 {ms(tot)}"
        measured = host_measured(ctx, rank)
        if arrival_measured(ctx, rank):
            late = "it arrives late at the collectives"
            late_zh = "它较晚到达集合通信"
        else:  # no collective shows it arriving last: the step times point to it
            late = "by the step times it is a late arriver (no collective shows it arriving last)"
            late_zh = "按各步时间推断它较晚到达集合通信（没有哪个集合通信显示它最后到达）"
        if measured or gc:
            summary = (
                f"Host stall on {rl}: {what}, waiting for its host; {late} and "
                f"{len(victims)} rank(s) wait {ms(wait_mean)} per step for it." + alone
            )
            summary_zh = (
                f"{rl_zh}主机侧阻塞：{what_zh}，设备在等主机；{late_zh}，"
                f"{len(victims)} 张卡每步平均为它等待 {ms(wait_mean)}。" + alone_zh
            )
        else:
            # Free alone: the device idles, but why is not measured (no host launch delays)
            summary = (
                f"Device idle (Free) on {rl}: {what}; host launch delays are not measured in "
                "this data, so possible causes are a host-side stall (per-step synchronization, "
                f"logging, checkpoint, data loading) or waiting for input; {late} and "
                f"{len(victims)} rank(s) wait {ms(wait_mean)} per step for it." + alone
            )
            summary_zh = (
                f"{rl_zh}设备空闲（Free）：{what_zh}；数据中没有主机下发时延，无法确定原因，"
                f"可能是主机侧阻塞（每步同步、日志、保存检查点、数据加载）或在等输入；{late_zh}，"
                f"{len(victims)} 张卡每步平均为它等待 {ms(wait_mean)}。" + alone_zh
            )
        if gc:
            a_txt = (
                f"Stop Python garbage-collection pauses on {rl}: gc.freeze() after model setup and "
                "gc.collect() at fixed step intervals (or gc.disable() during steps)."
            )
            a_zh = (
                f"消除{rl_zh}上的 Python 垃圾回收停顿：模型初始化后调用 gc.freeze()，"
                "并按固定步数间隔调用 gc.collect()（或在训练步内 gc.disable()）。"
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
        tags: tuple[str, ...] = (
            ("host_bound", "high_free", "slow_rank", "gc_pause")
            if gc
            else ("host_bound", "high_free", "slow_rank")
        )
    else:
        mech, cat = Mechanism.COMPUTE_STRAGGLER, Category.COMPUTE
        op_txt = op_zh = ""
        units = [(e.step, rank) for e in events] if scoped else [(-1, rank)]
        ex = explain_device(
            device_account(ctx.profile, units, peers), rl, rl_zh, gain if victims else excess
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
            f"{scope}{op_txt}; {len(victims)} rank(s) wait {ms(wait_mean)} per step for it in "
            "collectives." + alone
        )
        summary_zh = (
            f"{rl_zh}是计算慢卡：{scope_zh}其计算时间每步比同组多 {ms(comp_ex)}{op_zh}；"
            f"{len(victims)} 张卡每步平均在集合通信中为它等待 {ms(wait_mean)}。" + alone_zh
        )
        if ex is not None:
            summary = (
                f"Compute straggler {rl}: it computes {ms(comp_ex)} more{per_step} than its peers"
                f"{scope}, because {ex.clause}; {len(victims)} rank(s) wait {ms(wait_mean)} per "
                "step for it in collectives." + alone
            )
            summary_zh = (
                f"{rl_zh}是计算慢卡：{scope_zh}其计算时间每步比同组多 {ms(comp_ex)}，原因是"
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
                f"让{rl_zh}上的 {op[0]} [{op[1]}] 与同组一样快（检查其输入 shape、格式和数据类型，"
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
            **(ex.metrics if ex is not None else {}),
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
            f"在{who_zh}所在主机上用 npu-smi 确认（训练时的 AI Core 频率和温度、健康状态），"
            "并与同一主机上的其他设备对比。",
        )
    if ex is not None and ex.kind in ("shape", "extra_work"):
        return Remedy(
            "check",
            f"Log the number of tokens (sequence lengths, batch size, experts routed) each rank "
            f"gets per step and compare {who} with its peers.",
            f"记录每张卡每步处理的 token 数（序列长度、batch 大小、路由到的专家数），对比{who_zh}与同组。",
        )
    return Remedy(
        "check",
        f"Check {who}'s device (npu-smi: AI Core frequency, temperature, health) and its software "
        "(CANN, driver, operator package) against a peer.",
        f"对比同组检查{who_zh}的设备（npu-smi：AI Core 频率、温度、健康状态）和软件"
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
        if (
            n_steps < EVENT_MIN_STEPS
            or len({e.step for e in evs}) >= PERSISTENT_STEP_SHARE * n_steps
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
    # a persistent rank's events include every step (its whole excess, not only the big steps)
    groups = _slow_groups(ctx, set(persistent))
    grouped = {r for g in groups for r in g}
    for g in groups:
        out.append(_group_cause(ctx, g, n_steps))
    singles = {r: _all_step_events(ctx, r) for r in sorted(persistent) if r not in grouped}
    layered = layered_victims(ctx, singles, n_steps)
    ranks_out = [
        _rank_cause(ctx, r, evs, n_steps, scoped=False, victims=layered.get(r, ()))
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
    if transient:
        out.append(_events_cause(ctx, [e for evs in transient.values() for e in evs], n_steps))
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
    ranks and fewer ranks than the stage. Needs ≥ 4 ranks in the stage.
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
        if (
            len(slow) >= 2
            and len(slow) < len(ranks)
            and gap >= GROUP_MIN_GAP_SHARE * ctx.step_us
            and gap >= GROUP_GAP_VS_SPREAD * spread
        ):
            out.append(sorted(slow))
    return out


def _group_cause(
    ctx: Context, slow: list[int], n_steps: int, unit: tuple[str, str, str] | None = None
) -> RootCause:
    """SLOW_GROUP: ranks that split into a slower cluster, with the operator/shape that differs.

    Victims: the faster ranks' collective wait (their exposed communication minus the slow
    cluster's mean, capped by the cluster's mean excess). Source: ``step_trace``, ``kernels``.
    """
    peers = ctx.peers(slow[0])
    fast = [r for r in peers if r not in slow]
    per = ctx.per_rank
    comp_ex = float(per.loc[slow, "computing_us"].mean() - per.loc[fast, "computing_us"].median())
    free_ex = float(per.loc[slow, "free_us"].mean() - per.loc[fast, "free_us"].median())
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
            device_account(ctx.profile, [(-1, r) for r in slow], fast), gl, gl_zh, excess
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
    elif host and unit is not None and unit[0] == "node":
        a_txt = (
            f"Free the host of {gl}: its ranks idle together ({ms(free_ex)} more Free per step "
            "than the other nodes' ranks), so that host launches their work late; check its CPU "
            "binding (CPU_AFFINITY_CONF, taskset / numactl per rank), other processes and the CPU "
            "frequency governor on it, and its dataloader workers."
        )
        a_zh = (
            f"排查{gl_zh}所在主机：其上各卡一起空闲（每步 Free 比其他节点的卡多 {ms(free_ex)}），"
            "说明该主机下发任务较慢；检查其 CPU 绑核（CPU_AFFINITY_CONF、每卡的 taskset / numactl）、"
            "该主机上的其他进程、CPU 调频策略以及 dataloader 的 worker。"
        )
    else:
        a_txt = (
            f"Find what differs on {gl} (node hardware, software versions, configuration, "
            "work assignment) and make it match the other ranks."
        )
        a_zh = f"找出{gl_zh}与其他卡的差异（节点硬件、软件版本、配置、任务分配）并使其一致。"
    return RootCause(
        id=f"cause.slow_group.r{slow[0]}_{slow[-1]}",
        mechanism=Mechanism.SLOW_GROUP,
        category=Category.SCHEDULING if host else Category.COMPUTE,
        culprit=Culprit(
            kind="group",
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
            f"Slower {'group ' if unit is None else ''}{gl}: these ranks {what} than {fl}{op_txt}; {len(victims)} rank(s) "
            f"wait {ms(wait_mean)} per step for them in collectives."
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
            **({"peer_sample_ranks": float(op[4])} if use_op and op is not None and op[4] else {}),
        },
        findings=findings,
        gain_us=excess,
        bound=BoundKind.ESTIMATE,
        remedies=(
            Remedy("action", a_txt, a_zh, excess, BoundKind.ESTIMATE),
            _compute_check(ex, gl, gl_zh),
        ),
        symptom_tags=(
            ("slow_rank", *ex.tags)
            if ex is not None
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


def _late_event(ctx: Context, pairs: tuple[tuple[int, int], ...]) -> tuple[str, str] | None:
    """The largest single late arrival among ``pairs`` and its distance from the HCCL timeouts.

    From the wait attribution's events (one collective instance costing ≥ 2 steps and ≥ 0.5 s):
    the step, the culprit, the collective, how many ranks waited and the longest wait, as a share
    of HCCL_EXEC_TIMEOUT (and of HCCL_CONNECT_TIMEOUT when it is the first collective captured,
    where communicators are still being set up). ``None`` when no such event matches.
    """
    attr = ctx.attribution
    if attr is None or not attr.events:
        return None
    ev = next((e for e in attr.events if (e.step, e.culprit) in set(pairs)), None)
    if ev is None:
        return None
    conn, exe, from_job = hccl_timeouts_s(ctx)
    wait_s = ev.max_wait_us / 1e6
    src = "as set for this job" if from_job else "default"
    src_zh = "本作业设置值" if from_job else "默认值"
    first = (
        ev.step == min(int(s) for s in ctx.frame["step"].unique()) if not ctx.frame.empty else False
    )
    conn_txt = (
        f", {pct(wait_s / conn)} of HCCL_CONNECT_TIMEOUT ({conn:g} s, {src}) if this is where the "
        "communicator is set up"
        if first
        else ""
    )
    conn_zh = (
        f"，若此处是通信域建链，则为 HCCL_CONNECT_TIMEOUT（{conn:g} s，{src_zh}）的 {pct(wait_s / conn)}"
        if first
        else ""
    )
    en = (
        f"at {ev.op_name} in step {ev.step} rank {ev.culprit} arrived {ms(ev.cost_us)} after the "
        f"others and {len(ev.victims)} rank(s) waited up to {wait_s:.1f} s for it: "
        f"{pct(wait_s / exe)} of HCCL_EXEC_TIMEOUT ({exe:g} s, {src}){conn_txt}"
    )
    zh = (
        f"第 {ev.step} 步的 {ev.op_name} 中，{ev.culprit}号卡比其他卡晚到 {ms(ev.cost_us)}，"
        f"{len(ev.victims)} 张卡最长等待 {wait_s:.1f} s：为 HCCL_EXEC_TIMEOUT（{exe:g} s，{src_zh}）的 "
        f"{pct(wait_s / exe)}{conn_zh}"
    )
    return en, zh


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
    ex = (
        None
        if host
        else explain_device(
            device_account(ctx.profile, [(e.step, e.rank) for e in events], ctx.ranks),
            "the late rank of each step",
            "每步较晚的卡",
            per_step,
        )
    )
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
    summary = (
        f"One-step {kind} of {ms(per_event)} on average rotate across ranks: (step, rank) = "
        f"{pair_txt}{clean_txt}; no rank is slow on average"
        if len(ranks) > 1
        else f"A one-step event: {kind} of {ms(per_event)} on rank {ranks[0]} at (step, rank) "
        f"= {pair_txt}{clean_txt}; the other ranks wait for it there, and rank {ranks[0]} runs "
        "normally in the other steps"
    ) + (" (most steps are slow)." if most else ".")
    summary_zh = (
        f"单步{kind_zh}在不同卡之间轮换出现，平均每次 {ms(per_event)}：（步, 卡）= {pair_txt}"
        f"{clean_zh}；平均来看没有哪张卡是慢卡"
        if len(ranks) > 1
        else f"单步事件：{ranks[0]}号卡出现一次{kind_zh}，时长 {ms(per_event)}，（步, 卡）= "
        f"{pair_txt}{clean_zh}；其他卡都在等它，{ranks[0]}号卡在其他步运行正常"
    ) + ("（大多数步都变慢了）。" if most else "。")
    gc_seen = any(set(f.ranks) & culprits for f in ctx.finding("host_dispatch.host_bound.gc_pause"))
    first = (
        Remedy(
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
            "Find the host work that lands on a different rank in each hit step (Python garbage "
            "collection, periodic logging, checkpoint shards, data loading) and take it out of "
            "the step: if it is garbage collection, gc.freeze() after setup and gc.collect() at "
            "fixed step intervals.",
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
    hung = _late_event(ctx, pairs)
    if hung is not None:
        summary = summary.rstrip(".") + "; " + hung[0] + "."
        summary_zh = summary_zh.rstrip("。") + "；" + hung[1] + "。"
    if ex is not None:
        lead = (
            "The slowest rank changes from step to step because its work does: "
            if len(ranks) > 1
            else f"Rank {ranks[0]} computes more in step {steps[0]}: "
        )
        lead_zh = (
            "每步最慢的卡都不同，因为各卡每步的计算量不同："
            if len(ranks) > 1
            else f"{ranks[0]}号卡在第 {steps[0]} 步计算更多："
        )
        summary = (
            f"{lead}in each (step, rank) = {pair_txt} {ex.clause}{clean_txt}; no rank is slow "
            "on average, the others wait for the late one in each step."
        )
        summary_zh = (
            f"{lead_zh}在（步, 卡）= {pair_txt} 中，{ex.clause_zh}{clean_zh}；平均来看没有哪张卡是慢卡，"
            "其他卡在每步等待最晚的那张。"
        )
        first = ex.remedy
    return RootCause(
        id="cause.step_events",
        mechanism=Mechanism.STEP_EVENTS,
        category=Category.SCHEDULING if host else Category.COMPUTE,
        culprit=Culprit(
            kind="steps",
            ranks=ranks,
            events=pairs,
            label=f"{len(pairs)} one-step events"
            if len(pairs) > 1
            else f"step {pairs[0][0]} on rank {pairs[0][1]}",
            label_zh=f"{len(pairs)} 次单步事件"
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
        },
        findings=findings,
        steps=steps,
        gain_us=per_step,
        bound=BoundKind.ESTIMATE,
        remedies=(
            first,
            Remedy(
                "check",
                f"Open the host timeline ({where}) of the listed (step, rank) pairs and look at "
                "what the host does during the stall (host_dispatch tool: long gaps, GC-like "
                "pauses).",
                f"打开所列（步, 卡）的主机时间线（{where_zh}），查看阻塞期间主机在做什么"
                "（host_dispatch 工具：长间隙、类似垃圾回收的停顿）。",
            ),
        ),
        symptom_tags=("step_jitter", "gc_pause")
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


def rule_degradation(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Degradation rule: steps get slower over the run (step_trend analyzer).

    Rule: a ``step_trend.degradation`` finding (robust slope × steps ≥ the analyzer's threshold).
    When its ranks are exactly one existing rank cause's culprit, that cause becomes a DEGRADATION
    cause of the rank (same victims); otherwise one job-level DEGRADATION cause with the finding's
    gain (estimate: last steps back to the first steps' time). Returns the updated cause list.
    """
    out = list(causes)
    for f in ctx.finding("step_trend.degradation."):
        if f.id in ctx.claimed:
            continue
        ctx.claimed.add(f.id)
        growth = float(f.metrics.get("growth_ratio", f.metrics.get("median_growth_ratio", 0.0)))
        for i, c in enumerate(out):
            if c.culprit.kind == "rank" and set(c.culprit.ranks) == set(f.ranks):
                rl, rl_zh = c.culprit.label, c.culprit.label_zh
                out[i] = RootCause(
                    **{
                        **c.__dict__,
                        "id": f"cause.degradation.r{c.culprit.ranks[0]}",
                        "mechanism": Mechanism.DEGRADATION,
                        "summary": f"Degradation on {rl}: it gets slower step after step. "
                        + c.summary,
                        "summary_zh": f"{rl_zh}逐步变慢。" + c.summary_zh,
                        "findings": (*c.findings, f),
                        "remedies": (
                            *(r for r in c.remedies if r.kind == "action"),
                            Remedy(
                                "check",
                                f"Find what grows every step on {rl} (host memory, lists or tensors kept "
                                "per step, log buffers).",
                                f"找出{rl_zh}上每步都在增长的东西（主机内存、每步保留的列表或张量、日志缓冲）。",
                            ),
                            *(r for r in c.remedies if r.kind == "check"),
                        ),
                        "symptom_tags": (*c.symptom_tags, "step_degradation"),
                    }
                )
                break
        else:
            gain = f.estimated_gain_us or 0.0
            rl, rl_zh = ranks_label(f.ranks or ctx.ranks)
            out.append(
                RootCause(
                    id="cause.degradation.job",
                    mechanism=Mechanism.DEGRADATION,
                    category=f.category or Category.UNKNOWN,
                    culprit=Culprit(
                        kind="job", ranks=tuple(f.ranks), label="the whole job", label_zh="整个作业"
                    ),
                    victims=(),
                    summary=f"Steps get slower over the run on {rl}: {f.summary}",
                    summary_zh=f"{rl_zh}的步长随训练逐步变长"
                    + (f"：{f.summary_zh}" if f.summary_zh else "。"),
                    metrics={"gain_us": gain, "growth_ratio": growth},
                    findings=(f,),
                    gain_us=gain,
                    bound=BoundKind.ESTIMATE,
                    remedies=(
                        Remedy(
                            "check",
                            "Find what grows every step (host memory, cached tensors, log buffers).",
                            "找出每步都在增长的东西（主机内存、缓存的张量、日志缓冲）。",
                        ),
                    ),
                    symptom_tags=("step_degradation",),
                    severity=_severity(gain, ctx.step_us),
                )
            )
    return out


@dataclasses.dataclass(frozen=True)
class PresenceScope:
    """How a job-wide statement names the ranks it covers (English, Chinese).

    ``every``: "every rank" or, when the folder lacks some of the job's ranks, "every rank
    present (2 of 8)" / "the only rank present (rank 0, 1 of 8)"; ``every_zh`` the same in
    Chinese ("所有卡" / "现有的 2 张卡（共 8 张）" / "唯一现有的0号卡（共 8 张）").
    """

    every: str
    every_zh: str


def presence_scope(ctx: Context, missing: list[int] | None = None) -> PresenceScope:
    """The ranks a job-wide statement covers: all of them, or only those present (``missing_ranks``)."""
    missing = missing_ranks(ctx.profile) if missing is None else missing
    n_in = len(ctx.ranks)
    if not missing:
        return PresenceScope("every rank", "所有卡")
    n_all = n_in + len(missing)
    if n_in > 1:
        return PresenceScope(
            f"every rank present ({n_in} of {n_all})", f"现有的 {n_in} 张卡（共 {n_all} 张）"
        )
    r = ctx.ranks[0] if ctx.ranks else "?"
    return PresenceScope(
        f"the only rank present (rank {r}, 1 of {n_all})", f"唯一现有的{r}号卡（共 {n_all} 张）"
    )


def rule_job_idle(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Job-idle rule: the same idle on every rank is one cause of the job, not of a rank.

    Rule: every rank's Free is ≥ ``IDLE_MIN_SHARE`` (10%) of its step, and so is the Free every
    rank shares (the minimum over ranks), however much more some ranks idle: the shared part is
    the job's, the excess of a rank above it is that rank's own cause (a host stall). Victims: every rank, lost = its Free
    (``how="idle"``). Gain (upper bound): the minimum Free over ranks (what every rank could get
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
    victims = tuple(
        sorted(
            (
                Impact(integer(r), num(per.at[r, "free_us"]), num(share[r]), "idle")
                for r in per.index
            ),
            key=lambda i: (-i.lost_us, i.rank),
        )
    )
    start = ctx.finding("host_dispatch.dataloader.step_start")
    where = " at the start of the step (input pipeline)" if start else ""
    timeline, timeline_zh = host_timeline(ctx)
    where_zh = "，发生在步的开始处（数据输入）" if start else ""
    si = start[0].metrics.get("step_start_idle_us", math.nan) if start else math.nan
    if math.isfinite(si):  # how much of the Free is before the step's first kernel
        where = f", {ms(si)} of it at the start of the step (input pipeline)"
        where_zh = f"，其中 {ms(si)} 发生在步的开始处（数据输入）"
    if steps:
        st = ", ".join(str(x) for x in steps)
        where += f", concentrated in step(s) {st}"
        where_zh += f"，集中在第 {st} 步"
    # a folder that lacks some of the job's ranks: the statement covers the ranks present, and a
    # missing rank could be slow
    missing = missing_ranks(ctx.profile)
    sc = presence_scope(ctx, missing)
    if missing:
        who, who_zh = "the ranks present wait", "现有的卡"
        slow = (
            f"none of them is slow; the {len(missing)} missing rank(s) could be, which these "
            "ranks cannot tell"
        )
        slow_zh = f"其中没有慢卡；缺少的 {len(missing)} 张卡是否慢，从现有数据无法判断"
    else:
        who, who_zh = "the whole job waits", "整个作业"
        slow, slow_zh = "no rank is slow", "没有慢卡"
    blamed = sorted(
        {
            r
            for c in causes
            if c.mechanism in (Mechanism.HOST_STALL, Mechanism.COMPUTE_STRAGGLER)
            for r in c.culprit.ranks
        }
    )
    if blamed:  # the shared idle is the job's; the late ranks' excess above it is their own
        bl, bl_zh = ranks_label(blamed)
        slow = (
            f"every rank shares at least {ms(gain)} of it; {bl} idle more than that, which is "
            "their own cause"
        )
        slow_zh = f"每张卡至少共有 {ms(gain)} 的空闲；{bl_zh}空闲得更多，那部分是它们各自的原因"
    findings = _claim(
        ctx,
        lambda f: (
            f.id.startswith("cluster_breakdown.host_bound.free_share")
            or f.id.startswith("host_dispatch.dataloader.")
            or (f.kind is FindingKind.JITTER and len(f.ranks) >= len(per) // 2)
        ),
    )
    return [
        RootCause(
            id="cause.job_idle",
            mechanism=Mechanism.JOB_IDLE,
            category=Category.SCHEDULING,
            culprit=Culprit(kind="job", ranks=(), label="the whole job", label_zh="整个作业"),
            victims=victims,
            summary=(
                f"{sc.every[0].upper()}{sc.every[1:]} idles: median Free {ms(med)} per step "
                f"({pct(float(share.median()))} of the step){where}, from {ms(gain)} to "
                f"{ms(gain + spread)} across ranks: {who} for something outside the "
                f"device (input data, rollout, host work or synchronization), {slow}."
            ),
            summary_zh=(
                f"{sc.every_zh}都在空闲：每步空闲时间中位数 {ms(med)}（占步长 {pct(float(share.median()))}）"
                f"{where_zh}，各卡在 {ms(gain)} 到 {ms(gain + spread)} 之间：{who_zh}在等设备之外的东西"
                f"（输入数据、rollout、主机侧工作或同步），{slow_zh}。"
            ),
            metrics={
                "free_us_median": med,
                "free_share_median": float(share.median()),
                "free_spread_us": spread,
                "gain_upper_bound_us": gain,
            },
            findings=findings,
            steps=steps,
            gain_us=gain,
            bound=BoundKind.UPPER_BOUND,
            remedies=(
                Remedy(
                    "action",
                    "Overlap input preparation with training: more dataloader workers, prefetching "
                    "and pinned memory, or an asynchronous rollout/producer.",
                    "让输入准备与训练重叠：增加 dataloader 的 worker 数、预取并使用 pin_memory，"
                    "或改为异步 rollout/生产者。",
                    gain,
                    BoundKind.UPPER_BOUND,
                ),
                Remedy(
                    "check",
                    f"Look at the host timeline during the idle ({timeline}) "
                    "to see what the trainer waits for.",
                    f"查看空闲期间的主机时间线（{timeline_zh}），确认训练进程在等什么。",
                ),
            ),
            symptom_tags=("high_free", "dataloader_stall") if start else ("high_free",),
            severity=_severity(gain, ctx.step_us),
        )
    ]


def rule_exposed_communication(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Exposed-communication rule: communication not overlapped on every rank is a job cause.

    Rule: the exposed communication (Communication Not Overlapped and Exclude Receive) of the rank
    that waits least in each step (mean over steps) — the last to arrive, so none of it is
    waiting for a peer — minus what the
    specific causes already explain (slow-link transit excess) is ≥ ``EXPOSED_MIN_SHARE`` (15%, the communication analyzer's communication-bound threshold)
    of the median step. Not applied when a communication-bound pipeline stage owns it. With ≥
    ``MANY_COLLECTIVES`` (32) collectives per step and rank, or a small-packet finding, the cause
    says "many small collectives" (their latency is exposed). Victims: every rank, lost =
    min(remainder, its exposed communication) (``how="own_time"``). Gain: the remainder (upper
    bound: all of it hidden or fused away). Source: ``step_trace``, ``comm_ops``
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
    least = float(ctx.frame.groupby("step")[col].min().mean())
    explained = sum(c.gain_us or 0.0 for c in causes if c.mechanism is Mechanism.SLOW_LINK)
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
    denom = float((per["overlapped_us"] + per[col]).sum())
    overlap = share_of(float(per["overlapped_us"].sum()), denom)
    metrics = {
        "hideable_us": rest,
        "min_not_overlapped_us": least,
        "min_not_overlapped_share": share_of(least, ctx.step_us),
        "overlap_ratio": overlap,
    }
    small_f = ctx.finding("slow_link.communication.small_packets")
    # "many small collectives" names the mechanism only when it holds the time: many collectives
    # per step, or small transfers taking at least half of the exposed communication (a few
    # small transfers of 1 ms beside 48 ms of exposed communication do not)
    small_us = sum(f.metrics.get("small_time_us_per_step", 0.0) for f in small_f)
    many = (math.isfinite(n_ops) and n_ops >= MANY_COLLECTIVES) or (
        bool(small_f) and small_us >= SMALL_TIME_SHARE * rest
    )
    extra = extra_zh = ""
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
    waitf = ctx.finding("communication.communication.wait_dominated")
    missing = missing_ranks(ctx.profile)
    if waitf and missing:
        return [_peer_wait_cause(ctx, waitf[0], missing, least, victims, metrics)]
    mc2 = ctx.finding("communication.mc2_opportunity")
    findings = _claim(
        ctx,
        lambda f: (
            f.id.startswith("communication.")
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
        "把大量小的集合通信合并为更少更大的通信（增大梯度 bucket、参数扁平化合并、减少逐层通信）："
        "它们的时延没有被掩盖。",
        fuse_gain,
        BoundKind.UPPER_BOUND if fuse_gain is not None else BoundKind.NONE,
    )
    overlap_r = Remedy(
        "action",
        "Overlap communication with computation: asynchronous collectives / gradient-bucket "
        "overlap, a ZeRO stage with prefetching, or more micro-batches to hide it.",
        "让通信与计算重叠：异步集合通信或梯度分桶重叠、带预取的 ZeRO 阶段，或用更多 micro-batch 掩盖通信。",
        rest,
        BoundKind.UPPER_BOUND,
    )
    remedies = [fuse, overlap_r] if many else [overlap_r, fuse]
    for f in mc2:
        remedies.append(
            Remedy(
                "action",
                "Enable MC2 (fused MatMul + collective) for the tensor-parallel layers.",
                "为张量并行层开启 MC2（MatMul 与集合通信融合）。",
                f.estimated_gain_us,
                BoundKind.UPPER_BOUND,
            )
        )
    remedies.append(
        Remedy(
            "check",
            "Open one step in the timeline (MindStudio Insight) and see which collectives run "
            "with no computation under them and whether many of them are small.",
            "在时间线（MindStudio Insight）中打开一步，确认哪些集合通信下面没有计算、是否有大量小通信。",
        )
    )
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
    else:
        blame, blame_zh = "no rank or link is to blame", "不是某张卡或某条链路的问题"
    least_txt = "even the rank that waits least has" if n_in > 1 else f"rank {ctx.ranks[0]} has"
    least_zh = "即使等待最少的卡，每步也有" if n_in > 1 else f"{ctx.ranks[0]}号卡每步有"
    head = (
        f"Many small collectives are exposed {scope}"
        if many
        else f"Communication is exposed {scope}"
    )
    head_zh = f"大量小的集合通信{scope_zh}没有被掩盖" if many else f"通信{scope_zh}没有被掩盖"
    return [
        RootCause(
            id="cause.exposed_communication",
            mechanism=Mechanism.EXPOSED_COMMUNICATION,
            category=Category.COMMUNICATION,
            culprit=Culprit(kind="job", label="the whole job", label_zh="整个作业"),
            victims=victims,
            summary=(
                f"{head}: {least_txt} {ms(least)} per step "
                f"({pct(share_of(least, ctx.step_us))} of the step) of communication not "
                f"overlapped (overlap {pct(overlap)}{extra}); {blame}, up to "
                f"{ms(rest)} per step could be saved."
            ),
            summary_zh=(
                f"{head_zh}：{least_zh} {ms(least)}（占步长 "
                f"{pct(share_of(least, ctx.step_us))}）未被掩盖的通信（重叠率 {pct(overlap)}{extra_zh}）；"
                f"{blame_zh}，每步最多可节省 {ms(rest)}。"
            ),
            metrics=metrics,
            findings=findings,
            gain_us=rest,
            bound=BoundKind.UPPER_BOUND,
            remedies=tuple(remedies),
            # small_packets only when small transfers were measured (a small-packet finding)
            symptom_tags=("comm_not_overlapped", "comm_bound", "small_packets")
            if small_f
            else ("comm_not_overlapped", "comm_bound"),
            severity=_severity(rest, ctx.step_us),
        )
    ]


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
    findings = _claim(
        ctx,
        lambda f: (
            f.id.startswith("communication.")
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


def rule_regression(ctx: Context) -> list[RootCause]:
    """Regression rule: profile vs baseline (compare_profiles analyzer, only with a baseline).

    Rule: a ``compare_profiles.profile_diff.regression`` finding (median step slower by more than
    the analyzer's noise threshold) becomes one REGRESSION cause of the job. Category from the
    step component that grew most (Computing → compute, Communication Not Overlapped →
    communication, Free → scheduling). Operator: a fused op type that disappeared (count per step
    from > 0 to 0, e.g. MatmulAllReduce), else the op type whose time per step grew most.
    Victims: every rank, lost = the median step delta. Gain: the step delta (estimate: back to
    the baseline). Source: both profiles' ``step_trace`` and ``kernels``.
    """
    fs = [
        f
        for f in ctx.finding("compare_profiles.profile_diff.regression")
        if (f.metrics.get("delta_step_us") or 0.0) > 0
    ]
    if not fs:
        return []
    top = fs[0]
    delta = float(top.metrics["delta_step_us"])
    res = ctx.result("compare_profiles")
    comp_cat = {
        "computing_us": Category.COMPUTE,
        "communication_not_overlapped_us": Category.COMMUNICATION,
        "free_us": Category.SCHEDULING,
        "bubble_us": Category.COMMUNICATION,
    }
    category = Category.UNKNOWN
    grew = ""
    operator = ""
    op_txt = op_zh = ""
    if res is not None and not res.table.empty and "component" in res.table.columns:
        t = res.table[res.table["component"].isin(list(comp_cat))]
        if not t.empty:
            row = t.loc[cast(Any, t["delta_us"].idxmax())]
            grew = str(row["component"])
            category = comp_cat[grew]
    if res is not None and "op_types" in res.tables and not res.tables["op_types"].empty:
        ot = res.tables["op_types"]
        gone = ot[(ot["base_count_per_step"] > 0) & (ot["new_count_per_step"].fillna(0) == 0)]
        if not gone.empty:
            g = gone.loc[cast(Any, gone["base_us_per_step"].idxmax())]
            operator = str(g["op_type"])
            op_txt = f"; {operator} ({num(g['base_count_per_step']):.0f} per step before) is gone"
            op_zh = f"；{operator}（之前每步 {num(g['base_count_per_step']):.0f} 次）已消失"
        else:
            g = ot.loc[cast(Any, ot["delta_us_per_step"].idxmax())]
            operator = str(g["op_type"])
            op_txt = f"; {operator} grew most ({ms(num(g['delta_us_per_step']))} per step)"
            op_zh = f"；{operator} 增长最多（每步 {ms(num(g['delta_us_per_step']))}）"
    grew_en = {
        "computing_us": "Computing",
        "communication_not_overlapped_us": "Communication Not Overlapped",
        "free_us": "Free",
        "bubble_us": "Bubble",
    }.get(grew, "")
    grew_zh = {
        "computing_us": "计算时间",
        "communication_not_overlapped_us": "未被掩盖的通信",
        "free_us": "空闲时间",
        "bubble_us": "流水线气泡",
    }.get(grew, "")
    base_step = float(top.metrics.get("base_step_us", float("nan")))
    new_step = float(top.metrics.get("new_step_us", float("nan")))
    all_cp = _claim(ctx, lambda f: f.id.startswith("compare_profiles."))
    victims = tuple(
        Impact(r, delta, share_of(delta, ctx.val(r, "step_us")), "own_time") for r in ctx.ranks
    )
    return [
        RootCause(
            id="cause.regression",
            mechanism=Mechanism.REGRESSION,
            category=category,
            culprit=Culprit(
                kind="job",
                operator=operator,
                label="the profile vs its baseline",
                label_zh="本次与基线的差异",
            ),
            victims=victims,
            summary=(
                f"Regression against the baseline: the median step went from {ms(base_step)} to "
                f"{ms(new_step)} (+{ms(delta)})"
                + (f", mostly {grew_en}" if grew_en else "")
                + f"{op_txt}."
            ),
            summary_zh=(
                f"相对基线变慢：每步中位数从 {ms(base_step)} 变为 {ms(new_step)}（多 {ms(delta)}）"
                + (f"，主要是{grew_zh}增加" if grew_zh else "")
                + f"{op_zh}。"
            ),
            metrics={"delta_step_us": delta, "base_step_us": base_step, "new_step_us": new_step},
            findings=all_cp,
            gain_us=delta,
            bound=BoundKind.ESTIMATE,
            remedies=(
                Remedy(
                    "action",
                    (
                        f"Bring back {operator} (re-enable the fused operator / MC2 setting the new "
                        "version dropped) or pin the previous version."
                        if op_txt.endswith("is gone")
                        else "Pin the previous software version until the slower path is fixed."
                    ),
                    (
                        f"恢复 {operator}（重新开启新版本去掉的融合算子或 MC2 设置），或固定使用之前的版本。"
                        if op_txt.endswith("is gone")
                        else "在修复变慢的路径之前，固定使用之前的软件版本。"
                    ),
                    delta,
                    BoundKind.ESTIMATE,
                ),
                Remedy(
                    "check",
                    "Check the software versions that changed between the two runs (CANN, "
                    "torch_npu, driver, operator packages) against the operators whose time changed.",
                    "对照耗时变化的算子，检查两次运行之间变化了的软件版本（CANN、torch_npu、驱动、算子包）。",
                ),
            ),
            symptom_tags=("profile_regression", "hccl_op_count_increase", "cann_upgrade")
            if operator
            else ("profile_regression",),
            severity=_severity(delta, ctx.step_us),
        )
    ]


def covered_ranks(ctx: Context, causes: list[RootCause]) -> set[int]:
    """Ranks a cause already names as its culprit (ranks, events, link ends, stage members)."""
    out: set[int] = set()
    for c in causes:
        out |= set(c.culprit.ranks) | {r for _, r in c.culprit.events}
        if c.culprit.link is not None:
            out |= set(c.culprit.link)
        if c.culprit.stage is not None and 0 <= c.culprit.stage < len(ctx.stages):
            out |= set(ctx.stages[c.culprit.stage])
    return out


def rule_attributed(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Attribution rule: culprits the wait attribution finds that no other rule named.

    The collectives' wait attribution (:mod:`advisor_chat.diagnosis.attribution`) names the units
    (ranks, nodes, communication groups, stages) the others wait for, each with what it costs the
    job. A culprit costing ≥ ``STRAGGLER_MIN_SHARE`` of the median step per step whose ranks no
    cause names yet becomes a cause: a node / group / stage through the group decomposition, a
    rank late in ≥ ``PERSISTENT_STEP_SHARE`` of the steps through the rank decomposition, else its
    late steps as events. Source: ``comm_ops`` Wait Time; ``step_trace`` and ``kernels`` for the
    decomposition.
    """
    if len(ctx.ranks) < MIN_RANKS:  # no peer median to tell a late rank from a fast one
        return []
    attr = ctx.attribution
    if attr is None or ctx.frame.empty or not math.isfinite(ctx.step_us):
        return []
    covered = covered_ranks(ctx, causes)
    n_steps = int(ctx.frame["step"].nunique())
    out: list[RootCause] = []
    for cc in attr.culprits:
        if cc.cost_us_per_step < STRAGGLER_MIN_SHARE * ctx.step_us:
            continue
        if set(cc.unit.ranks) & covered or not set(cc.unit.ranks) <= set(ctx.ranks):
            continue
        if cc.unit.kind == "rank":
            r = cc.unit.ranks[0]
            evs = _all_step_events(ctx, r)
            if n_steps < EVENT_MIN_STEPS or len(cc.steps_hit) >= PERSISTENT_STEP_SHARE * n_steps:
                cause = _rank_cause(ctx, r, evs, n_steps, scoped=False)
            else:
                hit = [e for e in evs if e.step in cc.steps_hit and e.excess_us > 0]
                if not hit:
                    continue
                cause = dataclasses.replace(
                    _events_cause(ctx, hit, n_steps), id=f"cause.step_events.r{r}"
                )
        else:
            label = cc.unit.name
            label_zh = label.replace("node ", "节点 ").replace("ranks ", "").replace("(", "（") + (
                "号卡）" if "(" in label else ""
            )
            if cc.unit.kind == "stage" and cc.unit.name.startswith("stage "):
                label_zh = f"流水线阶段 {cc.unit.name.split()[1]}"
            cause = _group_cause(ctx, list(cc.unit.ranks), n_steps, (cc.unit.kind, label, label_zh))
            cause = dataclasses.replace(
                cause, id=f"cause.slow_{cc.unit.kind}.r{cc.unit.ranks[0]}_{cc.unit.ranks[-1]}"
            )
        cause = dataclasses.replace(
            cause, metrics={**cause.metrics, "job_cost_us": cc.cost_us_per_step}
        )
        out.append(cause)
        covered |= set(cc.unit.ranks)
    return out


def rule_job_hotspot(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Job-hotspot rule: one item that is not the model's main work dominates every rank.

    From :func:`~advisor_chat.diagnosis.decompose.job_account` on the ranks present: an operator
    type other than the matrix / attention work taking ≥ 20% of every rank's step, layout and
    dtype conversions together ≥ 12%, or the AI CPU engine ≥ 5%. A job-level cause (no rank is the
    culprit) with the share and the fix the item selects. Gain (upper bound): the item's time on
    the rank where it takes the least. Source: ``kernels``, ``step_trace``.
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
    gain = item.share_min * float(per["step_us"].min())
    rem = dataclasses.replace(rem, gain_us=gain, bound=BoundKind.UPPER_BOUND)
    sample = f" (kernels of a sample of {len(ja.ranks)} ranks)" if len(ja.ranks) < len(per) else ""
    return [
        RootCause(
            id=f"cause.job_hotspot.{item.what}",
            mechanism=Mechanism.JOB_HOTSPOT,
            category=Category.COMPUTE,
            culprit=Culprit(
                kind="operator" if item.what == "op_type" else "job",
                operator=item.name if item.what == "op_type" else ", ".join(item.members),
                shape=item.shape if item.what == "op_type" else "",
                label=item.name,
                label_zh=item.name,
            ),
            victims=tuple(
                Impact(integer(r), gain, share_of(gain, num(per.at[r, "step_us"])), "own_time")
                for r in per.index
            ),
            summary=(
                f"{en[0].upper()}{en[1:]}{sample}: the same cost on every rank, so no rank is "
                "late and none is to blame; the time is lost on all of them alike."
            ),
            summary_zh=f"{zh}：每张卡的开销相同，没有哪张卡晚到，也没有哪张卡是罪魁；所有卡都同样损失了这部分时间。",
            metrics={
                "item_us_per_step": item.us_per_step,
                "item_share_min": item.share_min,
                "item_share_mean": item.share_mean,
                "item_count_per_step": item.count_per_step,
                "gain_upper_bound_us": gain,
            },
            findings=_claim(
                ctx,
                lambda f: f.kind is FindingKind.BOTTLENECK and not f.ranks,
            ),
            gain_us=gain,
            bound=BoundKind.UPPER_BOUND,
            remedies=(rem,),
            symptom_tags=("op_hotspot", "aicpu_op") if item.name == "AI_CPU" else ("op_hotspot",),
            severity=_severity(gain, ctx.step_us),
        )
    ]


def spreads_text(ctx: Context) -> tuple[str, str, dict[str, float]]:
    """What dominates every rank (for NO_CULPRIT), from the per-rank split."""
    per = ctx.per_rank
    step = float(per["step_us"].mean())
    shares = {
        "computing_share": share_of(float(per["computing_us"].mean()), step),
        "communication_not_overlapped_share": share_of(
            float(per["communication_not_overlapped_exclude_receive_us"].mean()), step
        ),
        "free_share": share_of(float(per["free_us"].mean()), step),
    }
    spread = float(per["own_us"].max() - per["own_us"].min())
    shares["own_time_spread_us"] = spread
    dom, dom_zh, *_ = _dominant(ctx, ctx.ranks)
    en = (
        f"every rank is {dom}; computing {pct(shares['computing_share'])}, communication not "
        f"overlapped {pct(shares['communication_not_overlapped_share'])}, free "
        f"{pct(shares['free_share'])}; the spread of own time across ranks is {ms(spread)}"
    )
    zh = (
        f"所有卡都是{dom_zh}；计算 {pct(shares['computing_share'])}，未被掩盖的通信 "
        f"{pct(shares['communication_not_overlapped_share'])}，空闲 {pct(shares['free_share'])}；"
        f"卡间自身耗时差异为 {ms(spread)}"
    )
    return en, zh, shares
