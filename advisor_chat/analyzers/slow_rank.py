"""Slow-rank detection: cross-rank spreads plus who arrives last at collectives."""

from __future__ import annotations

import math
from typing import cast

import numpy as np
import pandas as pd
from pydantic import Field

from advisor_chat.analyzers._common import (
    SPREAD_RATIO,
    comm_ops_missing_why,
    is_p2p,
    low_outlier,
    ms,
    pct,
    peer_median,
    per_rank_mean,
    pipeline_stages,
    severity,
    stage_of,
    step_frame,
)
from advisor_chat.analyzers.base import (
    AnalyzerResult,
    Category,
    Evidence,
    Finding,
    FindingKind,
    Params,
    register,
)
from advisor_chat.errors import ToolArgumentError
from advisor_chat.ingest.profile import Profile

#: A rank is a communication-evidence slow rank when it is the late arriver of at least this
#: share of the tested collectives (and of at least 2 of them).
VOTE_SHARE = 0.3
#: A late-arriving rank with no Computing/Free excess whose mean transit time is at least this
#: multiple of the median is the end of a slow link rather than a slow rank.
LINK_TRANSIT_RATIO = 1.2


class SlowRankParams(Params):
    """Parameters of :func:`slow_rank`."""

    group: str | None = Field(
        default=None,
        description="Communication group (hash as in comm_ops.group) to test; default: all groups.",
    )
    step: int | None = Field(
        default=None, description="Step id to analyse; default: all steps (mean per step)."
    )


@register("slow_rank", SlowRankParams, order=20)
def slow_rank(profile: Profile, params: SlowRankParams) -> AnalyzerResult:
    """Find slow ranks (stragglers): ranks whose Computing or Free exceeds their peers' and that arrive last at collectives, so that the other ranks wait for them.

    Two kinds of evidence are combined. (a) step_trace spreads: per rank, Computing and Free
    minus the median of the other ranks of its pipeline stage (or of all other ranks; the rank
    itself excluded, as in explain_rank); a rank above that peers' median by more
    than 5 % of the mean step (msprof-analyze advisor threshold) is a candidate. (b)
    communication: for every collective op (same group and op_name on all ranks; send/receive
    excluded) the rank with the smallest Wait Time (elapse when wait is missing) arrived last;
    it gets a vote when it is a low outlier — one-sided Dixon Q test at 99.5 % for 4-100 ranks,
    3-sigma rule beyond, the CANN rule (peer wait ratio > 0.2, own < 0.2) for 2-3 ranks. Phase
    wall time is never used: collectives make every rank's step equally long.

    Args:
        profile: Canonical profile; uses ``step_trace`` (µs) and ``comm_ops`` (ms).
        params: ``group`` restricts the communication evidence to one group; ``step`` to one step.

    Returns:
        AnalyzerResult whose ``table`` has one row per rank with ``rank``, ``stage``,
        ``computing_us``, ``free_us`` (µs per step, step_trace), ``computing_delta_us``,
        ``free_delta_us`` and ``communication_not_overlapped_delta_us`` (µs, minus the peer median), ``votes`` (count of collectives where the
        rank was the late-arriving outlier), ``ops_tested`` (collectives tested that include the
        rank), ``vote_share`` (ratio), ``wait_ms``, ``synchronization_ms`` and ``transit_ms`` (mean per op, from
        communication.json), ``slow`` (bool). Extra table ``votes_by_op``: ``group``, ``op_name``,
        ``step``, ``ranks``, ``late_rank``, ``late_wait_ms``, ``median_wait_ms``, ``method``.

    Raises:
        ToolArgumentError: ``step`` or ``group`` is not in the profile.
    """
    st = step_frame(profile, params.step)
    stages = pipeline_stages(profile)
    smap = stage_of(stages)
    notes: list[str] = []
    notes_zh: list[str] = []  # one for one with ``notes``
    if st.empty:
        pr = pd.DataFrame(
            columns=["computing_us", "free_us", "communication_not_overlapped_us", "step_us"],
            dtype="float64",
        )
        notes.append(
            "no step trace (step_trace_time.csv / StepTraceTime): Computing/Free spreads "
            "unavailable; judged from communication (comm_ops) only"
        )
        notes_zh.append(
            "没有步迹（step_trace_time.csv / StepTraceTime）：无法比较计算/空闲时间，只按通信（comm_ops）判断"
        )
    else:
        pr = per_rank_mean(st)
    pr = pr.copy()
    pr["stage"] = [smap.get(int(r), -1) for r in pr.index]
    for c in ("computing_us", "free_us", "communication_not_overlapped_us"):
        # peers' median EXCLUDING the rank (same reference as explain_rank)
        med = peer_median(pr[c], pr["stage"])
        pr[c.replace("_us", "_delta_us")] = pr[c] - med
    mean_step = float(pr["step_us"].mean()) if not pr.empty else float("nan")

    votes_by_op, comm_stats = _comm_votes(profile, params)
    if votes_by_op is None:
        why = comm_ops_missing_why(profile)
        notes.append(
            "communication evidence missing: no comm_ops (communication.json) — "
            f"{why}; judged from step_trace spreads only"
        )
        notes_zh.append(
            f"缺少通信证据：没有 comm_ops（communication.json）——{comm_ops_missing_why(profile, True)}；"
            "只按步迹的差异判断"
        )
    all_ranks = sorted(set(pr.index.astype(int)) | set(comm_stats.index.astype(int)))
    table = pd.DataFrame({"rank": all_ranks}).set_index("rank")
    table = table.join(
        pr[
            [
                "stage",
                "computing_us",
                "free_us",
                "computing_delta_us",
                "free_delta_us",
                "communication_not_overlapped_delta_us",
            ]
        ]
    )
    table = table.join(comm_stats)
    table["votes"] = table["votes"].fillna(0).astype("int64")
    table["ops_tested"] = table["ops_tested"].fillna(0).astype("int64")
    table["vote_share"] = table["votes"] / table["ops_tested"].where(table["ops_tested"] > 0)
    table["stage"] = table["stage"].fillna(-1).astype("int64")

    thr = SPREAD_RATIO * mean_step if np.isfinite(mean_step) else np.inf
    spread_slow = (table["computing_delta_us"] > thr) | (table["free_delta_us"] > thr)
    vote_slow = (table["votes"] >= 2) & (table["vote_share"] >= VOTE_SHARE)
    if votes_by_op is not None and not votes_by_op.empty:
        # keep only the most-voted ranks (ties allowed) among the vote-slow ones
        top = table.loc[vote_slow, "votes"].max() if vote_slow.any() else 0
        vote_slow &= table["votes"] >= 0.5 * top
    # A rank that arrives last without any Computing/Free excess but whose transfers take
    # longer than its peers' is the sending end of a slow link, not a slow rank.
    transit_ratio = table["transit_ms"] / table["transit_ms"].median()
    link_like = vote_slow & ~spread_slow.fillna(False) & (transit_ratio >= LINK_TRANSIT_RATIO)
    for r in table.index[link_like.fillna(False)]:
        notes.append(
            f"rank {int(r)} arrives last at {int(cast(int, table.at[r, 'votes']))} collectives but its "
            f"Computing and Free are at the median while its transit time is "
            f"{transit_ratio[r]:.2f}x the median: a slow link from this rank (see slow_link), "
            "not a slow rank"
        )
        notes_zh.append(
            f"{int(r)}号卡在 {int(cast(int, table.at[r, 'votes']))} 次集合通信中最后到达，但其计算与空闲"
            f"时间处于中位数，传输时间是中位数的 {transit_ratio[r]:.2f} 倍：是从这张卡出发的慢链路"
            "（见 slow_link），不是慢卡"
        )
    vote_slow &= ~link_like.fillna(False)
    table["slow"] = (spread_slow | vote_slow).fillna(False).astype(bool)
    table = table.reset_index()

    events = _event_steps(st, table, thr) if params.step is None else {}
    findings = _findings(profile, table, votes_by_op, mean_step, thr, params, events)
    if not findings:
        gap = (
            float(np.nanmax(table[["computing_delta_us", "free_delta_us"]].to_numpy()))
            if len(table) > 1 and table["computing_delta_us"].notna().any()
            else float("nan")
        )
        if math.isfinite(gap):
            notes.append(
                f"no slow rank: the largest Computing/Free excess over the peer median is "
                f"{ms(gap)} ({pct(gap / mean_step if mean_step else float('nan'))} of the step, "
                "threshold 5%)"
                + (
                    ""
                    if votes_by_op is None
                    else "; no rank is the late arriver of most collectives"
                )
            )
            notes_zh.append(
                f"没有慢卡：计算/空闲时间比其他卡中位数多得最多的是 {ms(gap)}"
                f"（占步长 {pct(gap / mean_step if mean_step else float('nan'))}，阈值 5%）"
                + ("" if votes_by_op is None else "；没有哪张卡在多数集合通信中最后到达")
            )
        else:  # no Computing / Free to compare (one rank, or no step trace)
            notes.append(
                "no slow rank found: no Computing / Free to compare across ranks"
                + (
                    ""
                    if votes_by_op is None
                    else "; no rank is the late arriver of most collectives"
                )
            )
            notes_zh.append(
                "未发现慢卡：没有可在卡间比较的计算/空闲时间"
                + ("" if votes_by_op is None else "；没有哪张卡在多数集合通信中最后到达")
            )
    metrics = {
        "ranks_count": float(len(table)),
        "slow_ranks_count": float(table["slow"].sum()),
        "ops_tested": float(0 if votes_by_op is None else len(votes_by_op)),
        "mean_step_us": mean_step,
    }
    tables = {} if votes_by_op is None else {"votes_by_op": votes_by_op}
    return AnalyzerResult(
        "slow_rank",
        table,
        metrics=metrics,
        findings=tuple(findings),
        notes=tuple(notes),
        notes_zh=tuple(notes_zh) if len(notes_zh) == len(notes) else (),
        tables=tables,
    )


def _comm_votes(
    profile: Profile, params: SlowRankParams
) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """Per collective op: the late-arriving outlier rank; per rank: votes, tested, wait, sync."""
    ops = profile.get("comm_ops")
    empty_stats = pd.DataFrame(
        columns=["votes", "ops_tested", "wait_ms", "synchronization_ms", "transit_ms"],
        dtype="float64",
    )
    if ops.empty:
        return None, empty_stats
    if params.group is not None:
        groups = sorted(ops["group"].dropna().astype(str).unique())
        if params.group not in groups:
            raise ToolArgumentError(
                f"group {params.group!r} is not in comm_ops; groups are {groups}"
            )
        ops = ops[ops["group"] == params.group]
    if params.step is not None:
        ops = ops[ops["step"] == params.step]
    ops = ops[~is_p2p(ops["op_type"]) & (ops["comm_kind"].fillna("collective") != "p2p")]
    if ops.empty:
        return pd.DataFrame(), empty_stats
    ops = ops.copy()
    ops["stat"] = ops["wait_ms"].where(ops["wait_ms"].notna(), ops["elapse_ms"])
    key = ["group", "op_name", "step"]
    rows = []
    for (grp, op, step), sub in ops.groupby(key, sort=False, dropna=False):
        sub = sub.drop_duplicates("rank")
        n = len(sub)
        if n < 2:
            continue
        vals = sub["stat"].to_numpy(float)
        ranks = sub["rank"].to_numpy()
        late: int | None
        method = "dixon" if n <= 100 else "3sigma"
        if n <= 3:
            method = "wait_ratio"
            wr = (sub["wait_ms"] / sub["elapse_ms"].where(sub["elapse_ms"] > 0)).to_numpy(float)
            i = int(np.nanargmin(vals)) if np.isfinite(vals).any() else None
            others = np.delete(wr, i) if i is not None else wr
            late = i if i is not None and np.nanmin(others) > 0.2 and not (wr[i] > 0.2) else None
        else:
            late = low_outlier(vals)
        rows.append(
            {
                "group": str(grp),
                "op_name": str(op),
                "step": int(cast(int, step)) if pd.notna(cast(float, step)) else -1,
                "ranks": n,
                "late_rank": int(ranks[late]) if late is not None else -1,
                "late_wait_ms": float(vals[late]) if late is not None else np.nan,
                "median_wait_ms": float(np.nanmedian(vals)),
                "method": method,
                "_ranks": ranks,
            }
        )
    if not rows:
        return pd.DataFrame(), empty_stats
    by_op = pd.DataFrame(rows)
    tested = pd.Series(np.concatenate(by_op["_ranks"].to_numpy())).astype(int).value_counts()
    by_op = by_op.drop(columns=["_ranks"])
    votes = by_op.loc[by_op["late_rank"] >= 0, "late_rank"].value_counts()
    g = ops.groupby("rank")
    stats = pd.DataFrame(
        {
            "votes": votes,
            "ops_tested": tested,
            "wait_ms": g["wait_ms"].mean(),
            "synchronization_ms": g["synchronization_ms"].mean(),
            "transit_ms": g["transit_ms"].mean(),
        }
    )
    stats.index = stats.index.astype(int)
    stats.index.name = "rank"
    return by_op, stats


def _event_steps(
    st: pd.DataFrame, table: pd.DataFrame, thr: float
) -> dict[int, tuple[list[int], float, int]]:
    """Slow ranks whose excess comes from a minority of the steps (one-step events).

    Per step, a slow rank's Computing + Free minus the median of the other ranks in that step;
    with ≥ 3 steps, a rank above ``thr`` in fewer than half of them is slow only in those steps.

    Returns:
        rank → (event steps, largest per-step excess µs, number of steps).
    """
    out: dict[int, tuple[list[int], float, int]] = {}
    if st.empty or st["step"].nunique() < 3:
        return out
    own = st.assign(own_us=st["computing_us"] + st["free_us"])
    piv = own.pivot_table(index="step", columns="rank", values="own_us", aggfunc="mean")
    n = len(piv)
    for r in table.loc[table["slow"], "rank"].astype(int):
        if r not in piv.columns or piv.shape[1] < 2:
            continue
        ex = piv[r] - piv.drop(columns=[r]).median(axis=1)
        hit = ex[ex > thr]
        if 0 < len(hit) < n / 2:
            out[r] = ([int(cast(int, s)) for s in hit.index], float(hit.max()), n)
    return out


def _findings(
    profile: Profile,
    table: pd.DataFrame,
    by_op: pd.DataFrame | None,
    mean_step: float,
    thr: float,
    params: SlowRankParams,
    events: dict[int, tuple[list[int], float, int]] | None = None,
) -> list[Finding]:
    out: list[Finding] = []
    slow = table[table["slow"]]
    if slow.empty:
        return out
    waiters = table[~table["slow"]].sort_values("wait_ms", ascending=False)
    waiters = waiters[waiters["wait_ms"].notna()].head(3)
    # mean wait per collective (the table's wait_ms), as the culprit's own "mean wait per op"
    pairs = list(zip(waiters["rank"], waiters["wait_ms"], strict=False))
    waiter_txt = ", ".join(f"rank {int(r)} ({w:.1f} ms per op)" for r, w in pairs)
    waiter_zh = "、".join(f"{int(r)}号卡（每个算子 {w:.1f} ms）" for r, w in pairs)
    for _, row in slow.iterrows():
        r = int(row["rank"])
        # no step trace for this rank (absent or without rows): Computing and Free are unknown
        no_trace = pd.isna(row["computing_delta_us"]) and pd.isna(row["free_delta_us"])
        cd = float(row["computing_delta_us"]) if pd.notna(row["computing_delta_us"]) else 0.0
        fd = float(row["free_delta_us"]) if pd.notna(row["free_delta_us"]) else 0.0
        if no_trace:
            cat, cause, cause_zh = (
                Category.UNKNOWN,
                "its Computing and Free are unknown (no step trace rows for this rank)",
                "其计算与空闲时间未知（该卡没有 step_trace 数据）",
            )
            tags = ["slow_rank"]
        elif cd > thr and cd >= fd:
            cat, cause, cause_zh = (
                Category.COMPUTE,
                f"Computing is {ms(cd)} above the peers' median (excluding rank {r})",
                f"计算时间比其他卡中位数（不含 {r}号卡）多 {ms(cd)}",
            )
            tags = ["slow_rank", "compute_straggler"]
        elif fd > thr:
            cat, cause, cause_zh = (
                Category.SCHEDULING,
                f"Free (device idle) is {ms(fd)} above the peers' median (excluding rank {r})",
                f"Free（空闲）比其他卡中位数（不含 {r}号卡）多 {ms(fd)}",
            )
            # Free alone does not show host dispatch (see explain_rank / host_dispatch): neutral tags
            tags = ["slow_rank", "free_spread", "high_free"]
        else:
            cat, cause, cause_zh = (
                Category.UNKNOWN,
                "its Computing and Free are close to the median (cause not in step_trace)",
                "计算与空闲接近中位数（原因不在 step_trace 中）",
            )
            tags = ["slow_rank"]
        gain = max(cd, 0.0) + max(fd, 0.0)
        share = gain / mean_step if mean_step and np.isfinite(mean_step) else float("nan")
        votes, tested = int(row["votes"]), int(row["ops_tested"])
        comm_txt = ""
        comm_zh = ""
        if by_op is not None and tested:
            comm_txt = (
                f"; it arrived last at {votes} of {tested} collectives (its mean wait "
                f"{row['wait_ms']:.2f} ms per op)"
            )
            comm_zh = f"；在 {tested} 个集合通信中有 {votes} 个是最后到达（平均等待 {row['wait_ms']:.2f} ms/算子）"
            if waiter_txt:
                comm_txt += f"; the ranks that wait most for it: {waiter_txt}"
                comm_zh += f"；等待它最多的卡：{waiter_zh}"
        elif by_op is None:
            comm_txt = "; communication evidence missing (no comm_ops)"
            comm_zh = "；缺少通信数据（无 comm_ops）"
        else:
            comm_txt = "; no collective data for this rank"
            comm_zh = "；该卡没有集合通信数据"
        cn = row.get("communication_not_overlapped_delta_us")
        # Collective data exists for other ranks but not for this one: its excess Free/Computing
        # makes it suspicious, but nothing shows that the others wait for it.
        unproven = by_op is not None and not tested
        others_wait = votes > 0 or (pd.notna(cn) and cn < 0 and not unproven)
        # what the others wait is measured by the collectives (the diagnosis attributes it); the
        # rank's own excess only bounds it
        wait_txt = (
            "; the other ranks wait for it"
            if others_wait and no_trace
            else f"; the other ranks wait for it (at most its excess, {ms(gain)} per step)"
            if others_wait
            else f" (estimated {ms(gain)} per step)"
        )
        if pd.notna(cn) and cn < 0 and not votes:
            comm_txt += f"; its non-overlapped communication is {ms(-cn)} below the peers' median (it waits less)"
            comm_zh += f"；其未掩盖通信比中位数少 {ms(-cn)}（等待更少）"
        if unproven:
            wait_txt = (
                f"; not proven by collectives: no data shows the other ranks wait for it "
                f"(up to {ms(gain)} per step if they do)"
            )
        if votes and tested and share != share:  # no step trace: severity from vote share
            share = 0.05 if votes / tested >= VOTE_SHARE else 0.0
        evidence = [
            Evidence(
                "step_trace",
                profile.cite("step_trace"),
                {"rank": r, "step": params.step if params.step is not None else "all"},
                "delta = rank value − median of the other ranks of its stage (or of all other ranks), mean per step",
            )
        ]
        if by_op is not None and tested:
            evidence.append(
                Evidence(
                    "comm_ops",
                    profile.cite("comm_ops"),
                    {
                        "rank": r,
                        "ops": by_op.loc[by_op["late_rank"] == r, "op_name"].head(10).tolist(),
                    },
                    "per collective: smallest Wait Time = last to arrive; outlier by Dixon Q (99.5%) / 3-sigma",
                )
            )
        ev = (events or {}).get(r)
        summary = (
            f"Rank {r} looks slow from step_trace only: {cause}{comm_txt}{wait_txt}"
            if unproven
            else f"Rank {r} is a slow rank: {cause}{comm_txt}{wait_txt}"
        )
        summary_zh = (
            f"{r}号卡 仅从 step_trace 看可疑（未被集合通信证实）：{cause_zh}{comm_zh}；"
            f"若其他卡在等它，每步最多约 {ms(gain)}"
            if unproven
            else f"{r}号卡 是慢卡：{cause_zh}{comm_zh}"
            + (
                "；其他卡在等待它"
                if others_wait and no_trace
                else f"；其他卡在等待它（最多为它多出的 {ms(gain)}/步）"
                if others_wait
                else f"；每步约 {ms(gain)}"
            )
        )
        if ev is not None:  # the excess is a one-step event, not a slow rank on average
            st_txt = ", ".join(str(x) for x in ev[0])
            summary = (
                f"Rank {r} is slow only in step(s) {st_txt} ({len(ev[0])} of {ev[2]} steps; a "
                f"one-step event, up to "
                f"{ms(ev[1])} of Computing + Free above its peers there), not on average; "
                f"averaged over the steps: {cause}{comm_txt}{wait_txt}"
            )
            summary_zh = (
                f"{r}号卡只在第 {st_txt} 步慢（共 {ev[2]} 步；单步事件，该步计算加空闲比同组最多多 "
                f"{ms(ev[1])}），平均来看并不慢；按各步平均：{cause_zh}{comm_zh}"
            )
            tags = [*tags, "step_jitter"]
        out.append(
            Finding(
                id=f"slow_rank.slow_rank.r{r}",
                kind=FindingKind.SLOW_RANK,
                severity=severity(share),
                summary=summary,
                summary_zh=summary_zh,
                ranks=(r,),
                metrics={
                    "computing_delta_us": math.nan if no_trace else cd,
                    "free_delta_us": math.nan if no_trace else fd,
                    "votes": float(votes),
                    "ops_tested": float(tested),
                    "wait_ms": float(row["wait_ms"]) if pd.notna(row["wait_ms"]) else float("nan"),
                    "gap_us": gain,
                    "gap_share": share,
                    "comm_evidence": 0.0 if unproven or by_op is None else 1.0,
                    **({"event_steps_count": float(len(ev[0]))} if ev is not None else {}),
                },
                evidence=tuple(evidence),
                symptom_tags=tuple(tags),
                estimated_gain_us=gain if gain > 0 else None,
                category=cat,
            )
        )
    out.sort(key=lambda f: (f.severity.rank, -f.metrics["gap_us"], -f.metrics["votes"]))
    return out
