"""Shared thresholds, events, victims and helpers of the blame rules."""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from advisor_chat.analyzers._common import is_comm_kernel, missing_ranks
from advisor_chat.analyzers.base import Finding, Severity
from advisor_chat.diagnosis.context import Context
from advisor_chat.diagnosis.decompose import CollectiveTypes, collective_types
from advisor_chat.diagnosis.text import integer, ms, num, pct, share_of
from advisor_chat.diagnosis.types import (
    Impact,
)
from advisor_chat.ranks import spread_sample

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


#: A culprit the wait attribution finds late by a steady amount in every step (each step's cost
#: ≥ half the largest) is material from this share of the median step: noise does not arrive
#: last by the same margin step after step, so steadiness stands in for the 5% size threshold.
STEADY_MIN_SHARE = 0.02
#: Smallest step cost / largest step cost for a culprit to count as steady.
STEADY_MIN_RATIO = 0.5


#: Slow group: the gap between the two clusters of own time (share of the median step) ...
GROUP_MIN_GAP_SHARE = 0.03


#: ... and at least this many times the larger spread inside a cluster.
GROUP_GAP_VS_SPREAD = 3.0


#: A cluster that holds a rank already found late on its own (a persistent straggler) needs only
#: this gap (share of the median step): its other ranks have the same excess, so the collectives'
#: arrival order splitting the blame between them does not make one of them the only culprit.
GROUP_MIN_GAP_WITH_STRAGGLER = 0.01


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


def waiting_for(ctx: Context, ranks: set[int]) -> list[Impact]:
    """The ranks the wait attribution finds waiting for ``ranks`` (late ranks among them only).

    Each loses what the collectives measured it waiting for them per step (the
    :class:`~advisor_chat.diagnosis.attribution.CulpritCost` ``victims`` of every culprit unit
    inside ``ranks``), kept when that is at least ``VICTIM_MIN_SHARE`` of its step; most lost
    first. Empty without an attribution.
    """
    att = ctx.attribution
    lost: dict[int, float] = defaultdict(float)
    for cc in att.culprits if att is not None else ():
        if set(cc.unit.ranks) <= ranks:
            for r, v in cc.victims.items():
                if int(r) not in ranks:
                    lost[int(r)] += float(v)
    out = []
    for r, v in lost.items():
        share = share_of(v, ctx.val(r, "step_us"))
        if share >= VICTIM_MIN_SHARE:
            out.append(Impact(r, v, share, "collective_wait"))
    return sorted(out, key=lambda i: (-i.lost_us, i.rank))


def every_rank_loses(ctx: Context, lost_us: float) -> tuple[Impact, ...]:
    """The victims of a job-level cost: every rank with a step trace loses ``lost_us`` per step.

    Each :class:`Impact` is the rank's own time (``how="own_time"``) with its share of that
    rank's step (``per_rank.step_us``).
    """
    return tuple(
        Impact(r, lost_us, share_of(lost_us, ctx.val(r, "step_us")), "own_time") for r in ctx.ranks
    )


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
        # per step of the culprit's own steps (a step its file lost shows no wait for it)
        n_c = ctx.rank_steps(c) or n_steps
        for v, total in per_v.items():
            per_step = total / max(n_c, 1)
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
        rs = spread_sample(rs, PEER_SAMPLE)
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


def slow_collective_types(ctx: Context) -> CollectiveTypes | None:
    """:func:`~advisor_chat.diagnosis.decompose.collective_types` of the profile, once per context."""
    key = ("collective_types",)
    if key not in ctx.cache:
        ctx.cache[key] = collective_types(ctx.profile)
    return cast("CollectiveTypes | None", ctx.cache[key])


def collective_peers(ctx: Context, rank: int) -> set[int]:
    """Ranks whose collectives with ``rank`` are recorded (``comm_ops`` rows of its groups)."""
    ops = ctx.profile.get("comm_ops")
    if ops.empty or not {"group", "rank"} <= set(ops.columns):
        return set()
    mine = set(ops.loc[ops["rank"] == rank, "group"].dropna().astype(str))
    rows = ops[ops["group"].astype(str).isin(mine)]
    return {int(r) for r in rows["rank"].dropna()} - {rank}


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


def launch_delays(
    ctx: Context, slow: list[int], others: list[int]
) -> tuple[float, float, pd.DataFrame] | None:
    """Median launch-to-start delay (µs) of ``slow`` ranks and of ``others``, and the table.

    From the ``host_dispatch`` analyzer's per-rank table (``launch_delay_p50_us``: trace_view.json
    HostToDevice flows / DB CANN_API); ``None`` when either side is not measured.
    """
    res = ctx.result("host_dispatch")
    if res is None or res.table.empty or "launch_delay_p50_us" not in res.table.columns:
        return None
    t = res.table.set_index("rank")
    a = t.reindex(slow)["launch_delay_p50_us"].dropna()
    b = t.reindex(others)["launch_delay_p50_us"].dropna()
    if a.empty or b.empty:
        return None
    return float(a.median()), float(b.median()), t


def host_evidence(
    ctx: Context, slow: list[int], others: list[int]
) -> tuple[str, str, dict[str, float]] | None:
    """What the host data says about ``slow`` ranks against ``others`` (English, Chinese, metrics).

    From the ``host_dispatch`` analyzer's per-rank table (``trace_view.json`` / DB CANN_API
    flows): the median launch-to-start delay (a device that starts a kernel right after its
    launch is starved: the host barely keeps ahead of it) and the device idle spent waiting for
    the host's next launch per step. ``None`` without those columns for both sides.
    """
    lead = launch_delays(ctx, slow, others)
    if lead is None:
        return None
    da, db, t = lead
    if not da < 0.5 * db:
        return None
    hw = (
        float(t.reindex(slow)["host_wait_us_per_step"].dropna().mean())
        if "host_wait_us_per_step" in t.columns
        else float("nan")
    )
    their, them = ("its", "it") if len(slow) == 1 else ("their", "them")
    wait = (
        f", and {ms(hw)} per step of {their} device idle waits for the next launch"
        if math.isfinite(hw) and hw > 0
        else ""
    )
    wait_zh = f"，每步有 {ms(hw)} 的设备空闲在等下一次下发" if math.isfinite(hw) and hw > 0 else ""
    en = (
        f"{their} host barely keeps ahead of the device: a kernel starts {da:.0f} µs after its "
        f"launch on {them} against {db:.0f} µs on the other ranks{wait}"
    )
    zh = f"其主机几乎跟不上设备：算子下发后 {da:.0f} µs 就开始执行，其他卡为 {db:.0f} µs{wait_zh}"
    metrics = {
        "launch_delay_p50_us": da,
        "launch_delay_p50_us_peer": db,
        "host_wait_us_per_step": hw,
    }
    # every launch call itself slower, steadily: the host CPU runs slower
    ca, cb = launch_call_us(ctx, slow), launch_call_us(ctx, others)
    if math.isfinite(ca) and math.isfinite(cb) and cb > 0 and ca >= SLOW_CALL_RATIO * cb:
        metrics |= {"launch_api_us": ca, "launch_api_us_peer": cb}
        en += (
            f"; each launch call itself takes {ca:.0f} µs against {cb:.0f} µs on the other ranks "
            f"({ca / cb:.1f}x; the AscendCL API's own duration in trace_view.json): {their} host CPU "
            "runs slower (a power-saving CPU frequency governor, CPU contention or a remote NUMA node)"
        )
        zh += (
            f"；每次下发调用本身耗时 {ca:.0f} µs，其他卡为 {cb:.0f} µs（{ca / cb:.1f} 倍；trace_view.json 中 "
            "AscendCL 接口自身的时长）：其主机 CPU 运行更慢（CPU 调频策略为节能模式、CPU 争抢或跨 NUMA 节点）"
        )
    return en, zh, metrics


#: A host's launch calls are slower when their median duration is this many times its peers'.
SLOW_CALL_RATIO = 1.5


def launch_call_us(ctx: Context, ranks: list[int]) -> float:
    """Median duration of the host's launch calls on ``ranks`` (µs), NaN without any.

    ``host_dispatch`` rows that launch a device task (``device_start_us`` recorded), their
    ``api_duration_us`` (the AscendCL call's own duration, trace_view.json / DB CANN_API).
    """
    h = ctx.profile.host_dispatch_for(ranks)
    if h.empty or not {"api_duration_us", "device_start_us"} <= set(h.columns):
        return math.nan
    d = pd.to_numeric(h.loc[h["device_start_us"].notna(), "api_duration_us"], errors="coerce")
    return float(d.median()) if d.notna().any() else math.nan


#: A rank's device idles with its work already queued when its median launch-to-start delay is
#: at least this many times its peers' (and at least ``QUEUED_MIN_US`` longer).
QUEUED_RATIO = 1.5
QUEUED_MIN_US = 300.0


def device_idle_evidence(
    ctx: Context, slow: list[int], others: list[int]
) -> tuple[str, str, dict[str, float]] | None:
    """Evidence that ``slow`` ranks' extra idle is on the device side: their work was queued early.

    A host that is late launches kernels that start right away (a short launch-to-start delay,
    :func:`host_evidence`); a device that idles while its host has already queued the next
    kernels shows the opposite, a longer delay than its peers': the kernels wait although this
    process gives the device nothing else to do, so the device is held by something the profile
    does not show (another process or container on the same NPU, device-side synchronization).
    From the ``host_dispatch`` per-rank table (``launch_delay_p50_us``: trace_view.json / DB
    CANN_API flows). ``None`` when not measured or not longer by ``QUEUED_RATIO`` and
    ``QUEUED_MIN_US``.
    """
    lead = launch_delays(ctx, slow, others)
    if lead is None:
        return None
    da, db, _ = lead
    if not (da >= QUEUED_RATIO * db and da - db >= QUEUED_MIN_US):
        return None
    en = (
        f"its host had queued the kernels {ms(da)} ahead (median launch-to-start delay, "
        f"{ms(db)} on its peers), so the device idled with its work waiting in the queue: the "
        "device itself was held, not the host late"
    )
    zh = (
        f"其主机早已把算子下发到队列中（下发到开始执行的中位时延 {ms(da)}，其他卡为 {ms(db)}），"
        "设备却在队列里有任务时空闲：被占住的是设备本身，而不是主机下发慢"
    )
    return en, zh, {"launch_delay_p50_us": da, "launch_delay_p50_us_peer": db}


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


def env_split(ctx: Context, ranks: Sequence[int]) -> list[tuple[str, str, str]]:
    """Recorded variables that split the job exactly between ``ranks`` and the other ranks.

    Every rank of ``ranks`` has one value and every other rank another (unset reads as ``""``):
    ``[(variable, value on ranks, value on the others)]``, HCCL / Ascend variables first. From
    ``meta.env`` (profiler_metadata.json ``ENV_VARIABLES``), per-rank variables (rank, device,
    address, paths) left out (:func:`~advisor_chat.analyzers.env_check.env_differences`).
    """
    from advisor_chat.analyzers.env_check import env_differences

    meta = ctx.profile.get("meta")
    if meta.empty or "env" not in meta.columns:
        return []
    envs = {
        int(r): dict(e)
        for r, e in zip(meta["rank"], meta["env"], strict=True)
        if isinstance(e, dict) and e
    }
    mine = set(int(r) for r in ranks)
    out = []
    for k, by in env_differences(envs).items():
        if len(by) != 2:
            continue
        (v1, r1), (v2, r2) = by.items()
        if set(r1) == mine and not set(r2) & mine:
            out.append((k, v1, v2))
        elif set(r2) == mine and not set(r1) & mine:
            out.append((k, v2, v1))
    out.sort(key=lambda t: (not t[0].startswith(("HCCL_", "ASCEND_", "HCCS")), t[0]))
    return out


def transfer_mb_per_step(ctx: Context) -> pd.Series:
    """Data each rank's collectives move per step (MB, mean over steps): transit size summed.

    Source: ``comm_bandwidth`` ``transit_size_mb`` (communication.json Communication Bandwidth
    Info), every transport but SDMA (the sum of the on-chip ones: HCCS, PCIE, SIO). Empty
    without it.
    """
    if "transfer_mb" not in ctx.cache:
        cb = ctx.profile.get("comm_bandwidth")
        if not cb.empty and "transport" in cb:
            cb = cb[cb["transport"].astype(str).str.upper() != "SDMA"]
        if cb.empty or "transit_size_mb" not in cb or cb["transit_size_mb"].isna().all():
            ctx.cache["transfer_mb"] = pd.Series(dtype=float)
        else:
            per = cb.groupby(["rank", "step"])["transit_size_mb"].sum()
            ctx.cache["transfer_mb"] = per.groupby(level="rank").mean()
    out: pd.Series = ctx.cache["transfer_mb"]
    return out


def even_interval(steps: Sequence[int]) -> int:
    """The spacing of ``steps`` when they are at least two and evenly spaced, else 0."""
    gaps = {b - a for a, b in itertools.pairwise(steps)}
    return gaps.pop() if len(steps) >= 2 and len(gaps) == 1 else 0
