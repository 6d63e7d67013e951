"""Communication per group and op type, overlap with computation, and mc2 fusion opportunities."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import cast

import numpy as np
import pandas as pd
from pydantic import Field

from advisor_chat.analyzers._common import (
    TRANSIT_SHARE_LOW,
    WAIT_RATIO_THRESHOLD,
    comm_ops_missing_why,
    comm_time_split,
    comm_wait_dominated,
    comm_wait_text,
    format_ranks,
    groups_table,
    is_comm_kernel,
    median_step_us,
    missing_ranks,
    ms,
    pct,
    severity,
    step_frame,
)
from advisor_chat.analyzers.base import (
    AnalyzerResult,
    Category,
    Evidence,
    Finding,
    FindingKind,
    Params,
    notes_in_chinese,
    register,
)
from advisor_chat.errors import ToolArgumentError
from advisor_chat.ingest.profile import PEER_SAMPLE, Profile
from advisor_chat.ranks import spread_sample

#: Names of kernels that show mc2 (MatMul + communication fusion) is already on.
MC2_FUSED = (
    "matmulallreduce",
    "allgathermatmul",
    "matmulreducescatter",
    "matmul_all_reduce",
    "all_gather_matmul",
    "matmul_reduce_scatter",
)
#: Collectives that mc2 can fuse with an adjacent MatMul.
MC2_COLLECTIVES = ("allreduce", "allgather", "reducescatter")
#: Non-overlapped communication (on the rank that waits least) is a finding when it is at
#: least COMM_SHARE_BOUND of the step, or at least COMM_SHARE_MIN with an overlap ratio below
#: POOR_OVERLAP (most communication exposed).
COMM_SHARE_BOUND = 0.15
COMM_SHARE_MIN = 0.05
POOR_OVERLAP = 0.5


class CommunicationParams(Params):
    """Parameters of :func:`communication`."""

    group: str | None = Field(
        default=None, description="Communication group hash to analyse; default: all groups."
    )


@register("communication", CommunicationParams, order=35)
def communication(profile: Profile, params: CommunicationParams) -> AnalyzerResult:
    """Summarize communication per group and op type (count, elapse, transit, wait, synchronization), its overlap with computation, wait-heavy groups, and mc2 opportunities (MatMul next to a TP AllReduce / AllGather / ReduceScatter that fusion could overlap).

    Per group × op type, times are summed over ranks and divided by ranks × steps (per rank
    per step, ms, from communication.json). Overlap ratio = Overlapped / (Overlapped +
    Communication Not Overlapped) from the step trace. mc2: on each rank, kernels in time order
    (kernel_details.csv); a MatMul kernel whose next or previous kernel is an HCCL
    AllReduce/AllGather/ReduceScatter of a TP group counts as a pair; hidden time per pair =
    min(MatMul duration, collective duration) (fusion overlaps at most the shorter one).
    Kernels named MatmulAllReduce / AllGatherMatmul / MatmulReduceScatter mean mc2 is on. TP
    groups: ``comm_groups`` named ``tp*``, else collective groups of 2-8 consecutive ranks.

    Args:
        profile: Canonical profile; uses ``comm_ops`` (ms), ``step_trace`` (µs), ``kernels``
            (µs), ``comm_groups``.
        params: ``group`` restricts the analysis to one group.

    Returns:
        AnalyzerResult whose ``table`` has one row per group × op type: ``group``,
        ``group_name``, ``op_type``, ``ranks`` (count), ``count`` (ops per rank per step),
        ``elapse_ms``, ``transit_ms``, ``wait_ms``, ``synchronization_ms`` (ms per rank per step),
        ``wait_ratio`` (Σ wait / Σ elapse). Extra tables: ``overlap`` (per rank:
        ``communication_us``, ``communication_not_overlapped_us``, ``overlapped_us`` µs per
        step, ``overlap_ratio``), ``mc2_pairs`` (per rank: ``rank``, ``pairs`` per step,
        ``hidden_us`` per step, ``collective``), ``instances`` (one collective at a time, per
        group × op type: see :func:`_instances`).

    Raises:
        ToolArgumentError: ``group`` is not in ``comm_ops``.
    """
    ops = profile.get("comm_ops")
    notes: list[str] = []
    findings: list[Finding] = []
    groups = groups_table(profile)
    gname = (
        dict(zip(groups["group"], groups["group_name"], strict=False)) if not groups.empty else {}
    )
    if params.group is not None:
        valid = sorted(ops["group"].dropna().astype(str).unique()) if not ops.empty else []
        if params.group not in valid:
            raise ToolArgumentError(
                f"group {params.group!r} is not in comm_ops; groups are {valid}"
            )
        ops = ops[ops["group"] == params.group]
    step_us = median_step_us(profile) or float("nan")

    table = _per_group_type(ops, gname)
    instances = _instances(ops, profile.get("comm_bandwidth"), gname, hccl_sample(profile, ops))
    twins = dict(_NOTES_ZH)
    if ops.empty:
        why = comm_ops_missing_why(profile)
        note = f"no comm_ops (communication.json): per-op wait/transit unavailable ({why})"
        notes.append(note)
        twins[note] = (
            "没有集合通信明细（communication.json）：无法得到每个算子的等待/传输时间"
            f"（{comm_ops_missing_why(profile, True)}）"
        )
    overlap = _overlap(profile)
    findings += _overlap_findings(profile, overlap)
    findings += _wait_findings(profile, table, step_us)
    mc2_f, pairs, mc2_notes = _mc2(profile, groups, step_us)
    findings += mc2_f
    notes += mc2_notes
    findings.sort(key=lambda f: (f.severity.rank, -(f.estimated_gain_us or 0.0)))
    metrics = {
        "groups_count": float(table["group"].nunique()) if not table.empty else 0.0,
        "mean_overlap_ratio": float(overlap["overlap_ratio"].mean())
        if not overlap.empty
        else float("nan"),
        "mc2_hidden_us": float(pairs["hidden_us"].median()) if not pairs.empty else 0.0,
    }
    return AnalyzerResult(
        "communication",
        table,
        metrics=metrics,
        findings=tuple(findings),
        notes=tuple(notes),
        tables={"overlap": overlap, "mc2_pairs": pairs, "instances": instances},
        notes_zh=notes_in_chinese(notes, twins),
    )


def _per_group_type(ops: pd.DataFrame, gname: dict[str, str]) -> pd.DataFrame:
    cols = [
        "group",
        "group_name",
        "op_type",
        "ranks",
        "count",
        "elapse_ms",
        "transit_ms",
        "wait_ms",
        "synchronization_ms",
        "wait_ratio",
    ]
    if ops.empty:
        return pd.DataFrame(columns=cols)
    o = ops.copy()
    o["op_type"] = o["op_type"].fillna("unknown").astype(str)
    g = o.groupby(["group", "op_type"], dropna=False)
    t = g.agg(
        ranks=("rank", "nunique"),
        steps=("step", "nunique"),
        n=("op_name", "size"),
        elapse_ms=("elapse_ms", "sum"),
        transit_ms=("transit_ms", "sum"),
        wait_ms=("wait_ms", "sum"),
        synchronization_ms=("synchronization_ms", "sum"),
    ).reset_index()
    denom = (t["ranks"] * t["steps"].clip(lower=1)).astype(float)
    t["wait_ratio"] = t["wait_ms"] / t["elapse_ms"].where(t["elapse_ms"] > 0)
    t["count"] = t["n"] / denom
    for c in ("elapse_ms", "transit_ms", "wait_ms", "synchronization_ms"):
        t[c] = t[c] / denom
    t["group"] = t["group"].astype(str)
    t["group_name"] = t["group"].map(gname).fillna("")
    return t[cols].sort_values("elapse_ms", ascending=False).reset_index(drop=True)


#: Columns of the ``instances`` table (:func:`_instances`).
INSTANCE_COLUMNS = [
    "group", "group_name", "op_type", "ranks", "rank_list", "count_per_step", "elapse_ms_median",
    "wait_ms_median", "synchronization_ms_median", "transit_ms_median", "transit_size_mb_median",
    "transport", "transport_size_mb_median", "bandwidth_gbps_median", "data_type",
    "tensor_mb_median", "elements_median",
]  # fmt: skip

#: Ranks whose HCCL operator events (``hccl_ops``, trace_view.json) are read for the instances'
#: data types and counts: the first rank of each group, at most this many.
HCCL_SAMPLE = 4


def hccl_sample(profile: Profile, ops: pd.DataFrame) -> pd.DataFrame:
    """``hccl_ops`` rows of the first rank of each group of ``ops`` (at most :data:`HCCL_SAMPLE`).

    Empty when the export has no HCCL operator events (``hccl_ops``).
    """
    if ops.empty or not profile.has("hccl_ops"):
        return pd.DataFrame()
    firsts = ops.groupby("group", dropna=False)["rank"].min().dropna().astype(int)
    ranks = sorted(set(firsts.tolist()))[:HCCL_SAMPLE]
    return profile.hccl_ops_for(ranks)


def _instances(
    ops: pd.DataFrame,
    bw: pd.DataFrame,
    gname: dict[str, str],
    hccl: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One collective at a time: each group × op type's figures per instance (median).

    Per (group, op type): ``ranks`` (count) and ``rank_list`` (text), ``count_per_step``
    (instances per rank per step), and medians over its (rank, instance) rows of
    ``elapse_ms``, ``wait_ms``, ``synchronization_ms``, ``transit_ms`` (communication.json
    'Communication Time Info', ms) and of ``transit_size_mb`` (MB per instance on a rank, summed
    over transports: 'Communication Bandwidth Info' SDMA + RDMA, SDMA being the sum of HCCS, PCIE
    and SIO; HCCS + PCIE + SIO + RDMA without an SDMA block); ``transport`` is the transport carrying the
    most data, ``transport_size_mb_median`` its MB per instance and ``bandwidth_gbps_median`` its
    bandwidth (transit size / transit time, GB/s). Size columns are NaN without bandwidth rows.
    From ``hccl`` (``hccl_ops`` rows of some ranks: trace_view.json HCCL operator events, matched
    to ``comm_ops`` by rank and op name): ``data_type`` (the most frequent), ``tensor_mb_median``
    (the tensor reduced or gathered: count x type bytes, MB) and ``elements_median``; empty / NaN
    without them. Most elapse time first.
    """
    if ops.empty:
        return pd.DataFrame(columns=INSTANCE_COLUMNS)
    key = ["rank", "group", "step", "op_name"]
    o = ops.assign(op_type=ops["op_type"].fillna("unknown").astype(str))
    size = bw_main = None
    if not bw.empty and {"transit_size_mb", "transport"} <= set(bw.columns):
        b = bw[bw["transit_size_mb"].notna()]
        # SDMA is the sum of HCCS, PCIE and SIO (reference §communication.json): an instance's MB
        # is SDMA + RDMA when SDMA is recorded, never SDMA on top of its parts
        tr = b["transport"].astype(str).str.upper()
        has_sdma = (tr == "SDMA").groupby([b[c] for c in key], dropna=False).transform("any")
        counted = b[~(tr.isin(["HCCS", "PCIE", "SIO"]) & has_sdma)]
        size = counted.groupby(key, dropna=False)["transit_size_mb"].sum().rename("size_mb")
        per_t = b.groupby([*key, "transport"], dropna=False, observed=True).agg(
            mb=("transit_size_mb", "sum"), ms=("transit_time_ms", "sum")
        )
        # each (rank, op instance, transport) with its op type, from comm_ops
        kinds = o.set_index(key)["op_type"]
        kinds = kinds[~kinds.index.duplicated()]
        per_t = per_t.reset_index().join(kinds, on=key, how="inner")
        per_t = per_t[per_t["mb"] > 0]
        main = per_t.groupby(["group", "op_type", "transport"], observed=True)["mb"].sum()
        if len(main):
            top = (
                main.reset_index()
                .sort_values("mb")
                .drop_duplicates(["group", "op_type"], keep="last")
            )
            bw_main = per_t.merge(
                top[["group", "op_type", "transport"]], on=["group", "op_type", "transport"]
            )
            bw_main = bw_main.assign(gbps=bw_main["mb"] / bw_main["ms"].where(bw_main["ms"] > 0))
            bw_main = bw_main.groupby(["group", "op_type"], observed=True).agg(
                transport=("transport", "first"),
                mb_med=("mb", "median"),
                gbps_med=("gbps", "median"),
            )
    if size is not None:
        o = o.join(size, on=key)
    if hccl is not None and not hccl.empty:
        h = hccl.assign(rank=hccl["rank"].astype("int64"), op_name=hccl["op_name"].astype(str))
        h = h.drop_duplicates(["rank", "op_name"])[
            ["rank", "op_name", "data_type", "count", "size_mb"]
        ]
        o = o.merge(
            h.rename(columns={"size_mb": "tensor_mb", "count": "elements"}),
            on=["rank", "op_name"],
            how="left",
        )
    # (group, op type) -> (main transport, MB per instance, GB/s: MB/ms), medians
    by_type: dict[tuple[str, str], tuple[str, float, float]] = {}
    if bw_main is not None:
        flat = bw_main.reset_index()
        for g_, t_, tr_, mb_, gb_ in zip(
            flat["group"],
            flat["op_type"],
            flat["transport"],
            flat["mb_med"],
            flat["gbps_med"],
            strict=True,
        ):
            by_type[(str(g_), str(t_))] = (str(tr_), float(mb_), float(gb_))
    rows = []
    for (group, op_type), g in o.groupby(["group", "op_type"], dropna=False):
        ranks = sorted({int(r) for r in g["rank"].dropna()})
        n_steps = max(int(g["step"].nunique()), 1)
        row = {
            "group": str(group),
            "group_name": gname.get(str(group), ""),
            "op_type": str(op_type),
            "ranks": len(ranks),
            "rank_list": format_ranks(ranks),
            "count_per_step": len(g) / (max(len(ranks), 1) * n_steps),
            "elapse_ms_median": float(g["elapse_ms"].median()),
            "wait_ms_median": float(g["wait_ms"].median()),
            "synchronization_ms_median": float(g["synchronization_ms"].median()),
            "transit_ms_median": float(g["transit_ms"].median()),
            "transit_size_mb_median": float(g["size_mb"].median())
            if "size_mb" in g.columns and g["size_mb"].notna().any()
            else float("nan"),
            "transport": "",
            "transport_size_mb_median": float("nan"),
            "bandwidth_gbps_median": float("nan"),
        }
        if "data_type" in g.columns and g["data_type"].notna().any():
            row["data_type"] = str(g["data_type"].dropna().mode().iloc[0])
            row["tensor_mb_median"] = float(g["tensor_mb"].median())
            row["elements_median"] = float(g["elements"].median())
        else:
            row["data_type"], row["tensor_mb_median"], row["elements_median"] = (
                "",
                math.nan,
                math.nan,
            )
        hit = by_type.get((str(group), str(op_type)))
        if hit is not None:
            row["transport"], row["transport_size_mb_median"], row["bandwidth_gbps_median"] = hit
        rows.append(row)
    out = pd.DataFrame(rows, columns=INSTANCE_COLUMNS)
    order = out["elapse_ms_median"] * out["count_per_step"]
    return out.loc[order.sort_values(ascending=False).index].reset_index(drop=True)


def _overlap(profile: Profile) -> pd.DataFrame:
    st = step_frame(profile)
    cols = [
        "rank",
        "communication_us",
        "communication_not_overlapped_us",
        "overlapped_us",
        "overlap_ratio",
        "not_overlapped_share",
    ]
    if st.empty:
        return pd.DataFrame(columns=cols)
    pr = st.groupby("rank")[["communication_not_overlapped_us", "overlapped_us", "step_us"]].mean()
    pr["communication_us"] = pr["communication_not_overlapped_us"] + pr["overlapped_us"]
    pr["overlap_ratio"] = pr["overlapped_us"] / pr["communication_us"].where(
        pr["communication_us"] > 0
    )
    pr["not_overlapped_share"] = pr["communication_not_overlapped_us"] / pr["step_us"].where(
        pr["step_us"] > 0
    )
    return pr.reset_index()[cols]


def _overlap_findings(profile: Profile, ov: pd.DataFrame) -> list[Finding]:
    if ov.empty or not ov["not_overlapped_share"].notna().any():
        return []
    # the rank that communicates least without overlap: its share is transfer, not waiting
    i = ov["not_overlapped_share"].idxmin()
    share = float(cast(float, ov.at[i, "not_overlapped_share"]))
    ratio = float(ov["overlap_ratio"].mean())
    if not (share >= COMM_SHARE_BOUND or (share >= COMM_SHARE_MIN and ratio < POOR_OVERLAP)):
        return []
    rk = int(cast(int, ov.at[i, "rank"]))
    cno = float(cast(float, ov.at[i, "communication_not_overlapped_us"]))
    ranks = tuple(int(r) for r in ov["rank"])
    split = comm_time_split(profile)
    split = split[split.index.isin(ranks)]
    transit_share = (
        float(split["transit_ms"].sum() / split["elapse_ms"].sum())
        if not split.empty and split["elapse_ms"].sum() > 0
        else float("nan")
    )
    metrics = {"overlap_ratio": ratio, "not_overlapped_share": share, "not_overlapped_us": cno}
    if not split.empty:
        metrics |= {
            "comm_elapse_ms_per_step": float(split["elapse_ms"].median()),
            "comm_transit_ms_per_step": float(split["transit_ms"].median()),
            "comm_wait_idle_ms_per_step": float(split["not_transit_ms"].median()),
            "transit_share": transit_share,
        }
    base_ev = Evidence(
        "step_trace",
        profile.cite("step_trace"),
        {"rank": rk},
        "overlap = Overlapped / (Overlapped + Communication(Not Overlapped))",
    )
    cno_by_rank = ov.set_index("rank")["communication_not_overlapped_us"]
    if comm_wait_dominated(split, cno_by_rank):
        # The exposed communication is waiting for peers, not transfer: overlap cannot hide it.
        missing = missing_ranks(profile)
        en, zh = comm_wait_text(split, missing)
        return [
            Finding(
                id="communication.communication.wait_dominated",
                kind=FindingKind.COMMUNICATION,
                severity=severity(share),
                summary=(
                    f"Communication not overlapped is {ms(cno)} per step ({pct(share)}) even on "
                    f"rank {rk}, which waits least, but {en}"
                ),
                summary_zh=f"{rk}号卡（等待最少）每步仍有 {ms(cno)}（{pct(share)}）通信未被掩盖，但{zh}",
                ranks=ranks,
                metrics=metrics | {"missing_ranks_count": float(len(missing))},
                evidence=(
                    base_ev,
                    Evidence(
                        "comm_ops",
                        profile.cite("comm_ops"),
                        {"ranks": format_ranks(ranks)},
                        "per rank per step: Σ Elapse, Σ Transit, Σ (Wait + Idle); transit_share "
                        f"= Σ Transit / Σ Elapse < {TRANSIT_SHARE_LOW:.2f} means waiting; no gain "
                        "from overlap is claimed",
                    ),
                ),
                symptom_tags=("comm_wait_high", "slow_rank")
                + (("missing_ranks",) if missing else ()),
                estimated_gain_us=None,
                category=Category.COMMUNICATION,
            )
        ]
    # Overlap can hide transfer, not waiting: cap the bound by the rank's Transit (comm_ops).
    gain = cno
    transit_ms = float(split.at[rk, "transit_ms"]) if rk in split.index else float("nan")  # type: ignore[arg-type]
    capped = bool(np.isfinite(transit_ms) and transit_ms * 1000.0 < cno)
    if capped:
        gain = transit_ms * 1000.0
    bound_txt = (
        f"capped by that rank's Transit time per step ({transit_ms:.2f} ms, comm_ops) since "
        "waiting cannot be overlapped"
        if capped
        else f"that rank's Transit time per step ({transit_ms:.2f} ms, comm_ops) is not smaller"
        if np.isfinite(transit_ms)
        else f"NOT capped by Transit: rank {rk} has no communication detail (comm_ops), so part "
        "of it may be waiting that overlap cannot hide"
    )
    # severity follows what overlap could save (the gain), not the exposed share: waiting that
    # overlap cannot hide is not an overlap problem
    gain_share = share * gain / cno if cno > 0 else share
    return [
        Finding(
            id="communication.communication.not_overlapped",
            kind=FindingKind.COMMUNICATION,
            severity=severity(gain_share),
            summary=(
                f"Communication is poorly hidden: only {pct(ratio)} of communication overlaps computation "
                f"(mean over ranks); even rank {rk}, which waits least, has {ms(cno)} per step "
                f"({pct(share)}) of communication not overlapped"
            ),
            summary_zh=f"通信掩盖不足：平均仅 {pct(ratio)} 的通信与计算重叠；等待最少的 {rk}号卡 每步仍有 {ms(cno)}（{pct(share)}）未被掩盖",
            ranks=ranks,
            metrics=metrics | {"gain_upper_bound_us": gain},
            evidence=(
                Evidence(
                    "step_trace",
                    profile.cite("step_trace"),
                    {"rank": rk},
                    "overlap = Overlapped / (Overlapped + Communication(Not Overlapped)); "
                    "estimated gain is an UPPER BOUND: the non-overlapped communication of the "
                    f"rank that waits least (if all of it were hidden); {bound_txt}",
                ),
            ),
            symptom_tags=("comm_not_overlapped", "comm_bound"),
            estimated_gain_us=gain,
            category=Category.COMMUNICATION,
        )
    ]


def _wait_findings(profile: Profile, table: pd.DataFrame, step_us: float) -> list[Finding]:
    out: list[Finding] = []
    if table.empty:
        return out
    g = table.groupby(["group", "group_name"])[["elapse_ms", "wait_ms"]].sum().reset_index()
    g["wait_ratio"] = g["wait_ms"] / g["elapse_ms"].where(g["elapse_ms"] > 0)
    for _, row in g[g["wait_ratio"] > WAIT_RATIO_THRESHOLD].iterrows():
        wait_us = float(row["wait_ms"]) * 1000.0
        share = wait_us / step_us if step_us > 0 else float("nan")
        name = f"{row['group']}" + (f" ({row['group_name']})" if row["group_name"] else "")
        out.append(
            Finding(
                id=f"communication.communication.wait_{row['group']}",
                kind=FindingKind.COMMUNICATION,
                severity=severity(share),
                summary=(
                    f"Group {name}: {pct(row['wait_ratio'])} of collective time is waiting (wait ratio "
                    f"{row['wait_ratio']:.2f} > 0.2), {ms(wait_us)} per rank per step: ranks arrive at "
                    "different times (see slow_rank) or a link is slow (see slow_link)"
                ),
                summary_zh=f"通信域 {name}：集合通信中 {pct(row['wait_ratio'])} 的时间在等待（> 0.2），每卡每步 {ms(wait_us)}",
                metrics={"wait_ratio": float(row["wait_ratio"]), "wait_us_per_step": wait_us},
                evidence=(
                    Evidence(
                        "comm_ops",
                        profile.cite("comm_ops"),
                        {"group": row["group"]},
                        "Σ Wait Time / Σ Elapse Time, per rank per step",
                    ),
                ),
                symptom_tags=("comm_wait_high",),
                category=Category.COMMUNICATION,
            )
        )
    return out


def _by_unique(values: pd.Series, func: Callable[[pd.Series], pd.Series]) -> pd.Series:
    """Apply a vectorized string function to the unique values only, then map back (fast)."""
    codes, uniques = pd.factorize(values.astype("string").fillna(""), sort=False)
    res = func(pd.Series(uniques, dtype="string")).fillna(False).to_numpy()
    return pd.Series(res[codes], index=values.index)


def _coll_code(names: pd.Series) -> np.ndarray:
    """Per kernel name: 0, or 1 + the index in :data:`MC2_COLLECTIVES` of the collective it names."""
    codes, uniques = pd.factorize(names.astype("string").fillna(""), sort=False)
    u = pd.Series(uniques, dtype="string").str.lower().str.replace("_", "")
    table = np.zeros(len(u) + 1, dtype=np.int8)
    for i, c in enumerate(MC2_COLLECTIVES, 1):
        hit = u.str.contains(c).fillna(False).to_numpy(dtype=bool)
        table[:-1][hit & (table[:-1] == 0)] = i
    return table[codes]


def _tp_ranks(groups: pd.DataFrame) -> tuple[set[int], str]:
    """Ranks in TP groups and how they were identified."""
    if groups.empty:
        return set(), "none"
    named = groups[groups["group_name"].str.lower().str.startswith("tp")]
    if not named.empty:
        return {r for rs in named["ranks"] for r in rs}, "group name"
    # No names: Megatron places TP innermost, so TP groups are runs of consecutive ranks of
    # 2-8 ranks (one node at most) that are collective and smaller than the world.
    world = max((len(rs) for rs in groups["ranks"]), default=0)
    tp: set[int] = set()
    for rs, kind in zip(groups["ranks"], groups["comm_kind"], strict=False):
        n = len(rs)
        if (
            kind != "p2p"
            and 2 <= n <= 8
            and n < world
            and list(rs) == list(range(rs[0], rs[0] + n))
        ):
            tp.update(rs)
    return tp, ("group size (consecutive ranks, 2-8)" if tp else "none")


#: Chinese twins of this analyzer's fixed notes.
_NOTES_ZH = {
    "mc2: not enough signal — no kernels (kernel_details.csv) to see MatMul next to collectives": (
        "mc2：信号不足——没有算子数据（kernel_details.csv），看不到 MatMul 是否紧邻集合通信"
    ),
    "mc2: fused MatMul+communication kernels found (mc2 already on)": (
        "mc2：发现 MatMul 与通信融合的算子（mc2 已开启）"
    ),
    "mc2: no MatMul kernel directly next to a TP AllReduce/AllGather/ReduceScatter": (
        "mc2：没有紧邻 TP AllReduce/AllGather/ReduceScatter 的 MatMul 算子"
    ),
    "mc2: not enough signal — no TP group identified (comm_groups without a 'tp' group name)": (
        "mc2：信号不足——没有识别出 TP 通信域（comm_groups 中没有名为 tp 的通信域）"
    ),
}


def _mc2(
    profile: Profile, groups: pd.DataFrame, step_us: float
) -> tuple[list[Finding], pd.DataFrame, list[str]]:
    cols = ["rank", "pairs", "hidden_us", "collective"]
    empty = pd.DataFrame(columns=cols)
    tp, how = _tp_ranks(groups)
    # kernels are read only for the TP ranks examined: all of them up to 2x PEER_SAMPLE, else an
    # evenly spaced sample of PEER_SAMPLE (said in the finding); op_statistic (every rank, light)
    # also answers "mc2 already on"
    avail = profile.available_ranks("kernels")
    pool = sorted(set(tp) & set(avail)) if tp else avail
    sampled = len(pool) > 2 * PEER_SAMPLE
    if sampled:
        pool = spread_sample(pool, PEER_SAMPLE)
    k = profile.kernels_for(pool)[
        ["rank", "step", "name", "op_type", "accelerator_core", "start_us", "duration_us"]
    ]
    if k.empty and not avail:
        return (
            [],
            empty,
            [
                "mc2: not enough signal — no kernels (kernel_details.csv) to see MatMul next to collectives"
            ],
        )
    fused_pat = "|".join(m.replace("_", "") for m in MC2_FUSED)
    ost = profile.get("op_statistic")
    if _by_unique(
        k["name"], lambda n: n.str.lower().str.replace("_", "").str.contains(fused_pat)
    ).any() or (
        not ost.empty
        and _by_unique(
            ost["op_type"].astype(str),
            lambda n: n.str.lower().str.replace("_", "").str.contains(fused_pat),
        ).any()
    ):
        return [], empty, ["mc2: fused MatMul+communication kernels found (mc2 already on)"]
    if not tp:
        return (
            [],
            empty,
            [
                "mc2: not enough signal — no TP group identified (comm_groups without a 'tp' group name)"
            ],
        )
    k = k[k["rank"].isin(tp)].sort_values(["rank", "start_us"], kind="stable")
    if k.empty:
        return [], empty, []
    comm = is_comm_kernel(k).to_numpy()
    is_mm = (
        _by_unique(k["op_type"], lambda t: t.str.lower().str.contains("matmul"))
        | _by_unique(k["name"], lambda n: n.str.lower().str.contains("matmul"))
    ).to_numpy() & ~comm
    coll = _coll_code(k["name"])  # 0 = none, i = MC2_COLLECTIVES[i - 1]
    is_coll = comm & (coll > 0)
    rank = k["rank"].to_numpy()
    dur = k["duration_us"].to_numpy(float)
    # neighbour in time order on the same rank
    nxt_same = np.r_[rank[1:] == rank[:-1], False]
    prv_same = np.r_[False, rank[1:] == rank[:-1]]
    nxt_coll = np.r_[is_coll[1:], False] & nxt_same
    prv_coll = np.r_[False, is_coll[:-1]] & prv_same
    pair_mm = is_mm & (nxt_coll | prv_coll)
    if not pair_mm.any():
        return (
            [],
            empty,
            ["mc2: no MatMul kernel directly next to a TP AllReduce/AllGather/ReduceScatter"],
        )
    nxt_dur = np.r_[dur[1:], np.nan]
    prv_dur = np.r_[np.nan, dur[:-1]]
    other = np.where(nxt_coll, nxt_dur, prv_dur)
    hidden = np.minimum(dur, other)
    kind = np.where(nxt_coll, np.r_[coll[1:], 0], np.r_[0, coll[:-1]])
    steps = k.groupby("rank")["step"].nunique().clip(lower=1)
    df = pd.DataFrame({"rank": rank[pair_mm], "hidden": hidden[pair_mm], "coll": kind[pair_mm]})
    per = df.groupby("rank").agg(pairs=("hidden", "size"), hidden_us=("hidden", "sum"))
    kinds = df[["rank", "coll"]].drop_duplicates().sort_values(["rank", "coll"])
    names_by_rank: dict[int, list[str]] = {}
    for r, c in zip(kinds["rank"].to_numpy(), kinds["coll"].to_numpy(), strict=False):
        names_by_rank.setdefault(int(r), []).append(MC2_COLLECTIVES[int(c) - 1])
    per["collective"] = [",".join(names_by_rank.get(int(r), [])) for r in per.index]
    per["pairs"] = per["pairs"] / steps.reindex(per.index)
    per["hidden_us"] = per["hidden_us"] / steps.reindex(per.index)
    per = per.reset_index()[cols]
    hid = float(per["hidden_us"].median())
    share = hid / step_us if step_us > 0 else float("nan")
    f = Finding(
        id="communication.mc2_opportunity.tp",
        kind=FindingKind.MC2_OPPORTUNITY,
        severity=severity(share),
        summary=(
            f"mc2 opportunity: {per['pairs'].median():.0f} MatMul kernels per step sit next to TP "
            f"{', '.join(MC2_COLLECTIVES[int(c) - 1] for c in sorted(set(df['coll'])))} on ranks {format_ranks(per['rank'])}; fusing them "
            f"(MatmulAllReduce / AllGatherMatmul / MatmulReduceScatter) could hide up to {ms(hid)} per step "
            f"({pct(share)} of the step)"
        ),
        summary_zh=f"mc2 融合机会：每步约 {per['pairs'].median():.0f} 个 MatMul 紧邻 TP 集合通信；融合后每步最多可掩盖 {ms(hid)}（{pct(share)}）",
        ranks=tuple(int(r) for r in per["rank"]),
        metrics={
            "pairs_per_step": float(per["pairs"].median()),
            "hidden_us": hid,
            "hidden_share": share,
        },
        evidence=(
            Evidence(
                "kernels",
                profile.cite("kernels"),
                {"ranks": format_ranks(per["rank"])},
                f"MatMul adjacent to a TP collective in time order (TP from {how}); hidden = Σ min(MatMul, collective) per step",
            ),
        ),
        symptom_tags=("mc2_opportunity", "comm_not_overlapped"),
        estimated_gain_us=hid,
        category=Category.COMMUNICATION,
    )
    if sampled:
        n_tp = len(set(tp) & set(avail))
        f = replace(
            f,
            summary=f.summary
            + f" (kernels read for a peer sample of {len(pool)} of the {n_tp} TP ranks,"
            " evenly spaced; the median is over that sample)",
            summary_zh=f.summary_zh
            + f"（仅读取 {n_tp} 张 TP 卡中均匀抽样的 {len(pool)} 个的 kernel_details.csv，中位数基于抽样）",
            metrics={**f.metrics, "peer_sample_ranks": float(len(pool))},
        )
        return [f], per, [f"mc2: kernels read for a peer sample of {len(pool)} of {n_tp} TP ranks"]
    return [f], per, []
