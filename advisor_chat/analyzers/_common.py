"""Small helpers shared by analyzers (pure; no I/O, no rounding)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from advisor_chat.analyzers.base import Severity
from advisor_chat.errors import ToolArgumentError
from advisor_chat.i18n import say
from advisor_chat.ingest.common import plausible_world
from advisor_chat.ingest.profile import Profile
from advisor_chat.ranks import format_ranks

#: ``kernels.accelerator_core`` values of communication (HCCL) tasks: ``HCCL`` up to 2025-01,
#: ``COMMUNICATION`` since (ascend-formats.md §1.6).
COMM_CORES: frozenset[str] = frozenset({"COMMUNICATION", "HCCL"})


def check_rank(profile: Profile, rank: int) -> int:
    """Return ``rank`` if the profile has it.

    Raises:
        ToolArgumentError: The rank is not in the profile; the message names the valid ranks.
    """
    ranks = profile.ranks
    if int(rank) not in ranks:
        raise ToolArgumentError(
            f"rank {rank} does not exist in this profile; ranks are {format_ranks(ranks)}"
        )
    return int(rank)


def is_comm_kernel(kernels: pd.DataFrame) -> pd.Series:
    """Boolean mask of communication (HCCL) tasks in a ``kernels`` table.

    A task is communication when ``accelerator_core`` is ``COMMUNICATION``/``HCCL`` or its name
    starts with ``hcom_`` (Level0 exports write ``N/A`` as the core).
    """
    core = str_mask(kernels["accelerator_core"], lambda v: v.upper() in COMM_CORES)
    name = str_mask(kernels["name"], lambda v: v.lower().startswith("hcom_"))
    return pd.Series(core | name, index=kernels.index)


def str_mask(series: pd.Series, pred: Callable[[str], bool]) -> np.ndarray:
    """Boolean array: ``pred(value)`` for each string of ``series`` (missing values -> False).

    Evaluates ``pred`` once per distinct value (``pd.factorize``), so it stays fast on
    millions of rows with few distinct strings (op types, accelerator cores, names).
    """
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    if len(uniques) == 0:
        return np.zeros(len(series), dtype=bool)
    table = np.fromiter((bool(pred(str(u))) for u in uniques), dtype=bool, count=len(uniques))
    return np.where(codes >= 0, table[np.clip(codes, 0, None)], False)


def str_map(series: pd.Series, func: Callable[[pd.Series], pd.Series]) -> pd.Series:
    """``func(series)`` for a vectorized string transform, computed on the distinct values only.

    ``func`` maps a Series of the distinct values to a Series of the same length (e.g.
    ``lambda s: s.astype(str).str.lower()``); its values are spread back to the rows of
    ``series`` (same index and name); missing values stay missing. Columns of 10^5 rows hold a
    few dozen operator names or types, and pandas' string methods cost per row.
    """
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    mapped = func(pd.Series(uniques)).array
    return pd.Series(
        pd.api.extensions.take(mapped, codes, allow_fill=True), index=series.index, name=series.name
    )


def step_us_by_rank(profile: Profile) -> pd.Series:
    """Median ``step_trace.step_us`` per rank (index ``rank``, µs); empty without a step trace.

    Steps with ``step == -1`` are kept only when a rank has no numbered step.
    """
    st = profile.get("step_trace")
    if st.empty:
        return pd.Series(dtype="float64")
    st = st[["rank", "step", "step_us"]].dropna(subset=["rank", "step_us"])
    numbered = st[st["step"] != -1]
    if not numbered.empty:
        st = numbered
    return st.groupby("rank")["step_us"].median().astype("float64")


def median_step_us(profile: Profile) -> float | None:
    """Median over ranks of each rank's median step time (µs), or ``None`` without step data.

    Falls back to the median span (first task start to last task end) of a (rank, step) in
    ``kernels`` when there is no step trace.
    """
    per_rank = step_us_by_rank(profile)
    if not per_rank.empty and np.isfinite(per_rank.median()) and per_rank.median() > 0:
        return float(per_rank.median())
    k = profile.get("kernels")
    if k.empty:
        return None
    end = k["start_us"] + k["duration_us"]
    span = (
        pd.DataFrame({"rank": k["rank"], "step": k["step"], "s": k["start_us"], "e": end})
        .groupby(["rank", "step"])
        .agg(s=("s", "min"), e=("e", "max"))
    )
    val = float((span["e"] - span["s"]).median())
    return val if np.isfinite(val) and val > 0 else None


# ---- shared by breakdown, slow_rank, explain_rank, slow_link, communication ----

#: Step-trace components (canonical ``step_trace`` columns) in display order.
COMPONENTS: tuple[str, ...] = (
    "computing_us",
    "communication_not_overlapped_us",
    "overlapped_us",
    "free_us",
    "bubble_us",
)

#: Spread threshold of msprof-analyze advisor's slow-rank check: (max − min) / mean step > 5 %
#: (``advisor/analyzer/cluster/slow_rank_analyzer.py`` RATIO_THRESHOLD, see
#: ``shared/reference/ascend-formats.md`` §4.1).
SPREAD_RATIO: float = 0.05

#: Free share of the step above which the device is idle too long (host-bound), issue 4 item 1.
FREE_SHARE_HOST_BOUND: float = 0.10

#: CANN msprof cluster analysis: a collective whose Wait Time Ratio > 0.2 is a bottleneck
#: (``WAIT_TIME_THRESHOLD = 0.2``, ascend-formats.md §4.1).
WAIT_RATIO_THRESHOLD: float = 0.2


def severity(share: float) -> Severity:
    """Severity from a share of step time (NaN → LOW). See :meth:`Severity.from_share`."""
    if share is None or not np.isfinite(share):
        return Severity.LOW
    return Severity.from_share(float(share))


def ms(us: float) -> str:
    """Format microseconds as milliseconds for summaries, e.g. ``'20.0 ms'``."""
    if us is None or not np.isfinite(us):
        return "n/a"
    return f"{us / 1000.0:.1f} ms" if abs(us) >= 50 else "0.0 ms"


def pct(share: float) -> str:
    """Format a 0..1 share as a percentage string, e.g. ``'12.5%'``."""
    if share is None or not np.isfinite(share):
        return "n/a"
    return f"{share * 100.0:.1f}%"


def filter_step(df: pd.DataFrame, step: int | None, *, table: str = "step_trace") -> pd.DataFrame:
    """Rows of ``df`` for ``step`` (all rows when ``None``).

    Raises:
        ToolArgumentError: ``step`` is not in ``df`` (the message lists the valid steps).
    """
    if step is None or df.empty:
        return df
    out = df[df["step"] == int(step)]
    if out.empty:
        steps = sorted(int(s) for s in df["step"].dropna().unique())
        raise ToolArgumentError(f"step {step} is not in {table}; steps are {steps}")
    return out


def step_frame(profile: Profile, step: int | None = None) -> pd.DataFrame:
    """The ``step_trace`` rows (rank × step) for ``step`` with ``step_us`` filled.

    ``step_us`` falls back to computing + communication_not_overlapped + free when NaN (the
    msprof-analyze advisor's step total, ascend-formats.md §4.1). Non-finite components → 0.

    Returns:
        Columns ``rank, step`` + :data:`COMPONENTS` + ``communication_us, step_us,
        communication_not_overlapped_exclude_receive_us`` (float, µs).
    """
    st = filter_step(profile.get("step_trace"), step)
    cols = [
        "rank",
        "step",
        *COMPONENTS,
        "communication_us",
        "step_us",
        "communication_not_overlapped_exclude_receive_us",
    ]
    st = st[cols].copy()
    for c in cols[2:]:
        st[c] = st[c].astype("float64")
    for c in COMPONENTS:
        st[c] = st[c].fillna(0.0)
    total = st["computing_us"] + st["communication_not_overlapped_us"] + st["free_us"]
    st["step_us"] = st["step_us"].where(st["step_us"] > 0, total)
    excl = st["communication_not_overlapped_exclude_receive_us"]
    st["communication_not_overlapped_exclude_receive_us"] = excl.fillna(
        (st["communication_not_overlapped_us"] - st["bubble_us"]).clip(lower=0.0)
    )
    st["rank"] = st["rank"].astype("int64")
    st["step"] = st["step"].fillna(-1).astype("int64")
    return st.reset_index(drop=True)


def per_rank_mean(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean per step of every numeric column of a :func:`step_frame`, indexed by rank.

    Adds ``n_steps`` (count of steps averaged).
    """
    num = [c for c in frame.columns if c not in ("rank", "step")]
    g = frame.groupby("rank")
    out = g[num].mean()
    out["n_steps"] = g.size()
    return out


def pipeline_stages(profile: Profile) -> list[tuple[int, ...]]:
    """Pipeline stages as tuples of ranks, first stage first; ``[]`` when unknown.

    Stage 0 is the one with the lowest ranks (Megatron/MindSpeed number pipeline ranks from
    the lowest global ranks), whatever order the stage rows come in.

    Sources, in order: ``stage_trace.stage_ranks`` (msprof-analyze stage rows), then
    ``step_trace.pp_index``, then ``comm_groups`` rows whose ``group_name`` starts with ``pp`` are
    not stages (they link stages) and are not used.
    """
    stage = profile.get("stage_trace")
    if not stage.empty:
        seen: dict[int, tuple[int, ...]] = {}
        for idx, txt in zip(stage["stage_index"], stage["stage_ranks"], strict=False):
            ranks = tuple(sorted(int(x) for x in re.findall(r"\d+", str(txt))))
            if ranks and int(idx) not in seen:
                seen[int(idx)] = ranks
        # the file lists the stage rows in any order (the index is their position in it):
        # the stage holding the lowest ranks is stage 0, as the frameworks number them
        stages = sorted(seen.values(), key=lambda t: t[0])
        if len(stages) > 1:
            return stages
    st = profile.get("step_trace")
    if not st.empty and st["pp_index"].notna().any():
        pp = st.dropna(subset=["pp_index"]).groupby("pp_index")["rank"].unique()
        stages = [tuple(sorted(int(r) for r in v)) for _, v in sorted(pp.items())]
        if len(stages) > 1:
            return stages
    return []


def stage_of(stages: Sequence[tuple[int, ...]]) -> dict[int, int]:
    """Map rank → stage index for :func:`pipeline_stages` output."""
    return {r: i for i, s in enumerate(stages) for r in s}


def groups_table(profile: Profile) -> pd.DataFrame:
    """Communication groups: ``group, group_name, comm_kind, ranks (tuple), size``.

    From ``comm_groups``; when absent, derived from ``comm_ops`` (ranks that reported each group).
    """
    cg = profile.get("comm_groups")
    if not cg.empty:
        out = cg[["group", "group_name", "comm_kind", "ranks", "size"]].copy()
        out["ranks"] = [tuple(sorted(int(r) for r in (x or ()))) for x in out["ranks"]]
        out["group"] = out["group"].fillna("").astype(str)
        out["group_name"] = out["group_name"].fillna("").astype(str)
        return out.reset_index(drop=True)
    ops = profile.get("comm_ops")
    if ops.empty:
        return pd.DataFrame(columns=["group", "group_name", "comm_kind", "ranks", "size"])
    g = ops.groupby("group")
    rows = []
    for name, sub in g:
        ranks = tuple(sorted(int(r) for r in sub["rank"].dropna().unique()))
        kinds = sub["comm_kind"].dropna().unique()
        rows.append(
            {
                "group": str(name),
                "group_name": "",
                "comm_kind": str(kinds[0]) if len(kinds) == 1 else "",
                "ranks": ranks,
                "size": len(ranks),
            }
        )
    return pd.DataFrame(rows, columns=["group", "group_name", "comm_kind", "ranks", "size"])


def is_p2p(op_type: pd.Series) -> pd.Series:
    """Boolean mask of point-to-point op types (send, receive, batchsendrecv)."""
    t = op_type.fillna("").astype(str).str.lower()
    return t.str.contains("send") | t.str.contains("receive") | t.str.contains("recv")


# ---------------------------------------------------------------------------------------------
# Dixon's Q test (one-sided, on the smallest value)
#
# Statistics (Dixon, W. J. (1950) "Analysis of extreme values", Ann. Math. Stat. 21(4), 488-506;
# the choice by n is the one of msprof-analyze's slow_rank recipe, ascend-formats.md §4.1), with
# x1 ≤ x2 ≤ ... ≤ xn:
#   n ≤ 7:  r10 = (x2 − x1) / (xn − x1)
#   n ≤ 10: r11 = (x2 − x1) / (x(n−1) − x1)
#   n ≤ 13: r21 = (x3 − x1) / (x(n−1) − x1)
#   n ≥ 14: r22 = (x3 − x1) / (x(n−2) − x1)
# Critical values: the 0.995 quantile (99.5 % confidence, one-sided α = 0.005, as in the
# msprof-analyze recipe) of each statistic under normal samples, computed by Monte Carlo
# (numpy default_rng(0), 200 000 samples per n; Monte Carlo noise about ±0.003). They reproduce the published r10 values of
# Rorabacher, D. B. (1991) Anal. Chem. 63(2), 139-146 (α = 0.005: n=3 0.994, n=4 0.926,
# n=5 0.821, n=6 0.740, n=7 0.680) within ±0.005; tests/test_analyzers_slow_rank.py checks this.
# ---------------------------------------------------------------------------------------------
DIXON_CRITICAL_995: dict[int, float] = {
    3: 0.994,
    4: 0.920,
    5: 0.823,
    6: 0.741,
    7: 0.680,
    8: 0.721,
    9: 0.674,
    10: 0.635,
    11: 0.705,
    12: 0.676,
    13: 0.652,
    14: 0.671,
    15: 0.649,
    16: 0.632,
    17: 0.611,
    18: 0.596,
    19: 0.581,
    20: 0.567,
    21: 0.554,
    22: 0.546,
    23: 0.535,
    24: 0.529,
    25: 0.516,
    26: 0.510,
    27: 0.503,
    28: 0.496,
    29: 0.490,
    30: 0.481,
    31: 0.479,
    32: 0.472,
    33: 0.469,
    34: 0.462,
    35: 0.459,
    36: 0.454,
    37: 0.449,
    38: 0.446,
    39: 0.443,
    40: 0.438,
    41: 0.434,
    42: 0.433,
    43: 0.430,
    44: 0.424,
    45: 0.424,
    46: 0.420,
    47: 0.416,
    48: 0.416,
    49: 0.412,
    50: 0.410,
    51: 0.407,
    52: 0.405,
    53: 0.401,
    54: 0.400,
    55: 0.397,
    56: 0.395,
    57: 0.393,
    58: 0.392,
    59: 0.389,
    60: 0.389,
    61: 0.388,
    62: 0.384,
    63: 0.383,
    64: 0.383,
    65: 0.382,
    66: 0.379,
    67: 0.376,
    68: 0.377,
    69: 0.376,
    70: 0.373,
    71: 0.371,
    72: 0.370,
    73: 0.371,
    74: 0.367,
    75: 0.366,
    76: 0.364,
    77: 0.363,
    78: 0.362,
    79: 0.361,
    80: 0.360,
    81: 0.358,
    82: 0.359,
    83: 0.356,
    84: 0.356,
    85: 0.355,
    86: 0.353,
    87: 0.351,
    88: 0.352,
    89: 0.349,
    90: 0.350,
    91: 0.349,
    92: 0.347,
    93: 0.348,
    94: 0.344,
    95: 0.343,
    96: 0.345,
    97: 0.343,
    98: 0.342,
    99: 0.342,
    100: 0.341,
}


def dixon_statistic(sorted_values: np.ndarray) -> float:
    """Dixon's ratio for the smallest of ``sorted_values`` (ascending, n ≥ 3); NaN if degenerate."""
    x = sorted_values
    n = len(x)
    if n < 3:
        return float("nan")
    if n <= 7:
        num, den = x[1] - x[0], x[n - 1] - x[0]
    elif n <= 10:
        num, den = x[1] - x[0], x[n - 2] - x[0]
    elif n <= 13:
        num, den = x[2] - x[0], x[n - 2] - x[0]
    else:
        num, den = x[2] - x[0], x[n - 3] - x[0]
    if den <= 0:
        return float("nan")
    return float(num / den)


def low_outlier(values: np.ndarray) -> int | None:
    """Index (into ``values``) of the smallest value if it is a low outlier, else ``None``.

    n ≤ 100: one-sided Dixon Q test at 99.5 % (skipped for n ≤ 3 or fewer than 3 distinct values,
    as msprof-analyze does; with only two distinct values the lone minimum counts when it is
    below half of the other level). n > 100: 3-sigma rule — the minimum if it lies below mean − 3σ.
    """
    v = np.asarray(values, dtype="float64")
    ok = np.isfinite(v)
    if ok.sum() < 4:
        return None
    idx = np.flatnonzero(ok)
    vv = v[ok]
    if len(np.unique(vv)) < 3:
        # Two levels: the minimum is an outlier only if it is alone and clearly apart.
        lo = vv.min()
        second = np.sort(vv)[1]
        if (vv == lo).sum() == 1 and second > 0 and (second - lo) > 0.5 * abs(second):
            return int(idx[int(np.argmin(vv))])
        return None
    order = np.argsort(vv, kind="stable")
    if len(vv) <= 100:
        q = dixon_statistic(vv[order])
        crit = DIXON_CRITICAL_995.get(len(vv))
        if crit is not None and np.isfinite(q) and q > crit:
            return int(idx[order[0]])
        return None
    mean, sd = float(vv.mean()), float(vv.std())
    if sd > 0 and vv[order[0]] < mean - 3 * sd:
        return int(idx[order[0]])
    return None


#: Transit share of communication time (Σ Transit / Σ Elapse, comm_ops) below which the
#: exposed communication is mostly waiting for peers / idle rather than data transfer.
TRANSIT_SHARE_LOW: float = 0.25


def missing_ranks(profile: Profile) -> list[int]:
    """Ranks expected in the job but absent from the data (sorted global ranks).

    Source: the load-time ``missing_ranks`` warnings (``profile.warnings``), else the ranks
    below ``meta.world_size`` that have no data. Empty when nothing says ranks are missing.
    """
    out: set[int] = set()
    for w in profile.warnings:
        if w.code == "missing_ranks":
            out.update(int(r) for r in w.ranks)
    meta = profile.get("meta")
    if not out and not meta.empty and "world_size" in meta and meta["world_size"].notna().any():
        ws = float(meta["world_size"].max())
        if plausible_world(ws):  # a world size no cluster has is never sized from
            out = set(range(int(ws))) - set(profile.ranks)
    return sorted(out - set(profile.ranks))


def comm_time_split(profile: Profile, step: int | None = None) -> pd.DataFrame:
    """Per rank, communication time split into transit vs waiting, mean per step (ms).

    Source: ``comm_ops`` (communication.json), all ops of the rank summed per step, then the
    mean over steps. HCCL splits each op's Elapse Time into Transit (data moving), Wait (the
    peers have not arrived) and Idle (neither); ``not_transit_ms`` = Wait + Idle.

    Returns:
        DataFrame indexed by ``rank`` with ``elapse_ms``, ``transit_ms``, ``wait_ms``,
        ``idle_ms``, ``not_transit_ms`` (ms per step) and ``transit_share`` (Σ transit /
        Σ elapse, ratio). Empty (same columns) without comm_ops.
    """
    cols = ["elapse_ms", "transit_ms", "wait_ms", "idle_ms", "not_transit_ms", "transit_share"]
    ops = profile.get("comm_ops")
    if step is not None and not ops.empty:
        ops = ops[ops["step"] == step]
    if ops.empty:
        return pd.DataFrame(columns=cols, index=pd.Index([], name="rank"), dtype="float64")
    per = (
        ops.groupby(["rank", "step"], dropna=False)[
            ["elapse_ms", "transit_ms", "wait_ms", "idle_ms"]
        ]
        .sum(min_count=1)
        .groupby("rank")
        .mean()
    )
    per["not_transit_ms"] = per["wait_ms"].fillna(0.0) + per["idle_ms"].fillna(0.0)
    per["transit_share"] = per["transit_ms"] / per["elapse_ms"].where(per["elapse_ms"] > 0)
    per.index = per.index.astype(int)
    per.index.name = "rank"
    return per[cols].astype("float64")


def comm_wait_text(split: pd.DataFrame, missing: Sequence[int]) -> tuple[str, str]:
    """Sentence (en, zh) saying communication is mostly waiting, with the transit numbers.

    Args:
        split: :func:`comm_time_split` output (ranks of interest only).
        missing: Ranks absent from the data (:func:`missing_ranks`).
    """
    el = float(split["elapse_ms"].median())
    tr = float(split["transit_ms"].median())
    nt = float(split["not_transit_ms"].median())
    share = tr / el if el > 0 else float("nan")
    miss = ""
    miss_zh = ""
    if missing:
        miss = f", possibly among the ranks missing from the data (ranks {format_ranks(missing)})"
        miss_zh = f"，可能是数据中缺失的卡（{format_ranks(missing, sep='、')}号卡）"
    en = (
        f"this is mostly waiting, not data transfer: per step (median over ranks, comm_ops) "
        f"communication elapses {el:.1f} ms but transit is only {tr:.2f} ms ({pct(share)}); "
        f"{nt:.1f} ms is wait/idle — a slow or late peer{miss}; overlap tuning would not help"
    )
    zh = (
        f"主要是等待而非数据传输：每步（各卡中位数，comm_ops）通信耗时 {el:.1f} ms，其中传输仅 "
        f"{tr:.2f} ms（{pct(share)}），等待/空闲 {nt:.1f} ms——有慢卡或晚到的卡{miss_zh}；"
        "调整通信掩盖无济于事"
    )
    return en, zh


def comm_wait_dominated(split: pd.DataFrame, not_overlapped_us: pd.Series) -> bool:
    """Whether the exposed communication is mostly wait/idle rather than transit.

    True when comm_ops covers at least half of the ranks of ``not_overlapped_us`` (index rank,
    µs per step from step_trace), the covered ranks' median communication Elapse is at least
    half of their median non-overlapped communication (comm_ops explains the exposed time),
    and Σ Transit / Σ Elapse < :data:`TRANSIT_SHARE_LOW`.
    """
    sub = split[split.index.isin(not_overlapped_us.index)]
    if sub.empty or len(sub) * 2 < len(not_overlapped_us):
        return False
    el = float(sub["elapse_ms"].sum())
    if not el > 0:
        return False
    cno = float(not_overlapped_us[not_overlapped_us.index.isin(sub.index)].median())
    if not float(sub["elapse_ms"].median()) * 1000.0 >= 0.5 * cno:
        return False
    return float(sub["transit_ms"].sum()) / el < TRANSIT_SHARE_LOW


def peer_median(values: pd.Series, groups: pd.Series) -> pd.Series:
    """Per element, the median of the OTHER elements of its group (the element excluded).

    Used so that "above the peers' median" means the same in every analyzer (slow_rank,
    explain_rank): the rank itself is never part of its own reference. NaN for a group of one.

    Args:
        values: Numbers (any index); NaN values are ignored as peers.
        groups: Group label per element (same index), e.g. the pipeline stage.
    """
    out = pd.Series(np.nan, index=values.index, dtype="float64")
    for _, idx in values.groupby(groups, dropna=False).groups.items():
        out.loc[idx] = _leave_one_out_median(values.loc[idx].to_numpy(dtype=float))  # type: ignore[call-overload]
    return out


def _leave_one_out_median(v: np.ndarray) -> np.ndarray:
    """For each element of ``v``, the median of the other finite elements (NaN when none), O(n log n).

    With ``s`` the sorted finite values (``n`` of them) and ``k`` an element's position in ``s``,
    the others are ``s`` without ``s[k]``: their ``j``-th value is ``s[j]`` below ``k``, else
    ``s[j + 1]``; the median of those ``n - 1`` values is the middle one (or the mean of the two
    middle ones). A non-finite element is not among its own peers: its value is the median of ``s``.
    """
    out = np.full(v.size, np.nan)
    fin = np.isfinite(v)
    s = np.sort(v[fin])
    n = s.size
    if n:
        out[~fin] = float(np.median(s))
    m = n - 1
    if m <= 0:
        return out
    k = np.empty(n, dtype=np.int64)
    k[np.argsort(v[fin], kind="stable")] = np.arange(n)

    def other(j: int) -> np.ndarray:
        return np.where(j < k, s[j], s[np.minimum(j + 1, n - 1)])

    out[fin] = other(m // 2) if m % 2 else (other(m // 2 - 1) + other(m // 2)) / 2.0
    return out


def unreadable_files(profile: Profile, name: str) -> list[str]:
    """Files called ``name`` (e.g. ``communication.json``) left out as unreadable at load.

    From the ``file_skipped`` warnings; lets a note about a missing table blame the damaged file
    rather than the profiler level.
    """
    return [
        w.path
        for w in profile.warnings
        if w.code == "file_skipped" and w.path and w.path.replace("\\", "/").endswith("/" + name)
    ]


def comm_ops_missing_why(profile: Profile, zh: bool = False) -> str:
    """Why ``comm_ops`` is empty, for notes: unreadable communication.json files, else the level.

    With ``zh`` the same in Chinese (file names as they are).
    """
    bad = unreadable_files(profile, "communication.json")
    if bad:
        if zh:
            return f"有 {len(bad)} 个 communication.json 文件无法读取（第一个：{bad[0]}；见 file_skipped 警告）"
        return (
            f"{len(bad)} communication.json file(s) could not be read (first: {bad[0]}; see the "
            "file_skipped warning)"
        )
    return say("analyzers.profiler_level_or_no_hccl_ops", zh)


#: Operator categories a question can name instead of operator types (``compare_ops`` ``ops``):
#: a case-insensitive pattern on the op type (or the kernel name where the type is ``N/A``).
OP_CATEGORIES: dict[str, re.Pattern[str]] = {
    # multi-tensor "foreach" kernels, fused Adam / Lamb and Apply* updates of the optimizer step
    "optimizer": re.compile(r"foreach|apply|adam|lamb", re.I),
    # fused attention and its gradient (FlashAttentionScore[Grad], PromptFlashAttention, ...)
    "attention": re.compile(r"attention|flashattn", re.I),
    # matrix multiplications (MatMul[V2|V3], BatchMatMul*, GroupedMatmul, quantized variants)
    "matmul": re.compile(r"matmul|gemm", re.I),
    # every compute kernel (the kernels compare_ops reads exclude the communication tasks)
    "compute": re.compile(r"", re.I),
}


def op_matcher(spec: str) -> Callable[[str], bool]:
    """Predicate on an op type for an ``ops`` argument.

    ``spec`` is a category of :data:`OP_CATEGORIES` (``optimizer``, ``attention``, ``matmul``)
    or operator types separated by commas or ``|`` (matched whole, case-insensitive).

    Raises:
        ToolArgumentError: ``spec`` names nothing (empty after splitting).
    """
    key = spec.strip().lower()
    if key in OP_CATEGORIES:
        pat = OP_CATEGORIES[key]
        return lambda t: pat.search(t) is not None
    names = {x.strip().lower() for x in re.split(r"[,|]", spec) if x.strip()}
    if not names:
        raise ToolArgumentError(
            f"ops={spec!r} names no operator: give op types separated by commas, or one of "
            f"{', '.join(OP_CATEGORIES)}"
        )
    return lambda t: t.strip().lower() in names
