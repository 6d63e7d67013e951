"""Own-time decomposition: what a culprit's device does differently from its peers, in the same steps.

A blame rule finds *who* makes the others wait; this module says *what* in that rank's own time is
different, from the per-kernel evidence, so that the cause can name the fix (DESIGN.md §4c):

- device time by operator variant (op type, input shapes, input dtypes, accelerator core), per
  (step, rank) unit, culprit units against peer units of the **same steps**;
- each operator's difference split into *extra work* (more launches: count delta × the peers'
  mean duration) and *slower kernels* (the culprit's launches × the mean-duration delta);
- variants that exist on one side only, for an op type both sides run, are told apart by the
  field that differs: accelerator core (placement, e.g. AI CPU instead of AI Core), dtype, or
  input shape (more work per launch);
- a slowdown that hits most of the device time by about the same factor is *uniform* (the device
  itself is slower: frequency, temperature, health), not one operator's; one that hits every
  operator of one accelerator core (e.g. AI_VECTOR_CORE) by one factor while the other core's
  operators run at their peers' speed is an *engine* slowdown (that unit or its memory path);
- variants are also told apart by input storage format (ND against NZ / 5HD): the same data in
  another layout takes another kernel;
- per-kernel counters the export carries (``block_dim``, the PipeUtilization ratios such as
  ``aic_mte2_ratio`` / ``aiv_vec_ratio``, ``cube_utilization_pct``, ``op_state``) are compared on
  the top operator, or on the slowed core's / every kernel for a device-wide slowdown.

Job-level decomposition (:func:`job_account`): what takes the largest share of every rank's step,
by operator type and engine, when no rank is late.

Source of every figure: the ``kernels`` table (``kernel_details.csv`` / DB ``TASK`` +
``COMPUTE_TASK_INFO``), communication tasks excluded; µs per (step, rank) unit.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from advisor_chat.analyzers._common import OP_CATEGORIES, is_comm_kernel
from advisor_chat.ingest.profile import PEER_SAMPLE, Profile
from advisor_chat.ingest.schema import PMU_RATIOS
from advisor_chat.ingest.trace import BLOCKING_CALL, HOST_CALL
from advisor_chat.ranks import spread_sample

#: Operator variant key (the columns that tell two launches of one op type apart).
VARIANT = ("op_type", "input_shapes", "input_dtypes", "input_formats", "accelerator_core")
#: Slowdown factor below which a mean-duration difference is jitter.
SLOWER_MIN_RATIO = 1.05
#: Uniform slowdown: at least this share of the matched device time is slower by the median factor
#: (within ``UNIFORM_TOLERANCE``), over at least ``UNIFORM_MIN_TYPES`` op types.
UNIFORM_MIN_SHARE = 0.6
UNIFORM_TOLERANCE = 0.12
UNIFORM_MIN_TYPES = 3
#: Counters compared on the top operator (a relative difference at least this large is reported).
COUNTER_MIN_DIFF = 0.15
#: The kernels' counters compared: the launch split, the PMU ratios (:data:`PMU_RATIOS`, one list
#: with the ingest) and the cube utilization.
COUNTERS = ("block_dim", *PMU_RATIOS, "cube_utilization_pct")

#: How a difference is explained (the evidence that picks the remedy).
KINDS = (
    "uniform", "engine", "placement", "dtype", "format", "shape", "extra_work", "slower", "none",
)  # fmt: skip


@dataclass(frozen=True)
class OpDiff:
    """One operator's difference between the culprit and its peers (µs per (step, rank) unit).

    Attributes:
        op_type: Operator type (``Type`` column; the kernel name when the type is missing).
        kind: ``placement``, ``dtype``, ``format``, ``shape``, ``extra_work`` or ``slower``.
        delta_us: Culprit minus peers, µs per unit.
        culprit: The culprit's variant (shapes, dtypes, core), as text.
        peer: The peers' variant, as text (the same as ``culprit`` for extra work / slower).
        count_culprit: Launches per unit on the culprit.
        count_peer: Launches per unit on the peers (mean).
        avg_us_culprit: Mean duration per launch on the culprit, µs.
        avg_us_peer: Mean duration per launch on the peers, µs.
        core_culprit: Accelerator core of the culprit's variant.
        core_peer: Accelerator core of the peers' variant.
        dtype_culprit: Input dtypes of the culprit's variant.
        dtype_peer: Input dtypes of the peers' variant.
        shape_culprit: Input shapes of the culprit's variant.
        shape_peer: Input shapes of the peers' variant.
        format_culprit: Input storage formats of the culprit's variant (``FORMAT_ND;FRACTAL_NZ``).
        format_peer: Input storage formats of the peers' variant.
    """

    op_type: str
    kind: str
    delta_us: float
    count_culprit: float
    count_peer: float
    avg_us_culprit: float
    avg_us_peer: float
    core_culprit: str = ""
    core_peer: str = ""
    dtype_culprit: str = ""
    dtype_peer: str = ""
    shape_culprit: str = ""
    shape_peer: str = ""
    format_culprit: str = ""
    format_peer: str = ""

    @property
    def ratio(self) -> float:
        """Mean-duration ratio culprit / peers (NaN when either is missing)."""
        if self.avg_us_peer > 0 and self.avg_us_culprit > 0:
            return self.avg_us_culprit / self.avg_us_peer
        return float("nan")


@dataclass(frozen=True)
class Outliers:
    """A culprit's extra device time held by a few very long launches (the rest at peer speed).

    Each culprit launch is compared with the median duration of the same operator variant
    (type, input shapes and dtypes, core) on the peers.

    Attributes:
        per_unit: Launches per (step, rank) unit at least ``OUTLIER_RATIO`` x the peers' median.
        ratio: Their median duration / the peers' median of the same variant.
        share: Their share of the culprit's extra device time over its matched launches.
        normal_ratio: Median ratio of the culprit's other launches (about 1.0).
        ops: Their operator types, most extra time first.
        variants: Distinct (type, shapes) among them: one means the same launch every time.
        shapes: The input shapes of one of them (the only ones when ``variants`` is 1).
        core: Their ``accelerator_core`` when they all run on one (``AI_CPU``), else ``""``.
        core_hit_share: Of the culprit's launches on that core, the share that are outliers
            (1.0: every kernel of that engine is slow there; NaN when ``core`` is empty).
    """

    per_unit: float
    ratio: float
    share: float
    normal_ratio: float
    ops: tuple[str, ...]
    variants: int
    shapes: str = ""
    core: str = ""
    core_hit_share: float = math.nan


#: A launch this many times the peers' median of its variant is an outlier.
OUTLIER_RATIO = 3.0
#: Outliers explain the extra time when they hold this share of it and are at most
#: ``OUTLIER_MAX_FRACTION`` of the culprit's launches.
OUTLIER_SHARE = 0.6
OUTLIER_MAX_FRACTION = 0.1


def _outliers(c: pd.DataFrame, p: pd.DataFrame, n_c: int) -> Outliers | None:
    """The culprit's few very long launches, when they hold its extra time (see :class:`Outliers`)."""
    keys = list(VARIANT)
    med = p.groupby(keys, dropna=False)["duration_us"].median().rename("peer_med")
    cc = c.join(med, on=keys)
    cc = cc[cc["peer_med"] > 0]
    if cc.empty:
        return None
    ratio = cc["duration_us"] / cc["peer_med"]
    excess = (cc["duration_us"] - cc["peer_med"]).clip(lower=0.0)
    out = ratio >= OUTLIER_RATIO
    total = float(excess.sum())
    if not out.any() or total <= 0 or out.all():
        return None
    share = float(excess[out].sum()) / total
    normal = float(ratio[~out].median())
    if share < OUTLIER_SHARE or float(out.mean()) > OUTLIER_MAX_FRACTION:
        return None
    if normal >= SLOWER_MIN_RATIO:
        return None
    hit = cc[out].assign(excess=excess[out])
    ops = hit.groupby("op_type")["excess"].sum().sort_values(ascending=False)
    cores: list[str] = (
        [str(x) for x in hit["accelerator_core"].dropna().astype(str).unique()]
        if "accelerator_core" in hit.columns
        else []
    )
    core = str(cores[0]) if len(cores) == 1 else ""
    on_core = cc["accelerator_core"].astype(str) == core if core else None
    return Outliers(
        per_unit=float(out.sum()) / max(n_c, 1),
        ratio=float(ratio[out].median()),
        share=share,
        normal_ratio=normal,
        ops=tuple(str(o) for o in ops.index),
        variants=int(hit.groupby(["op_type", "input_shapes"], dropna=False).ngroups),
        shapes=str(hit["input_shapes"].iloc[0]) if "input_shapes" in hit.columns else "",
        core=core,
        core_hit_share=float(out[on_core].mean())
        if on_core is not None and on_core.any()
        else math.nan,
    )


@dataclass(frozen=True)
class DeviceAccount:
    """Where a culprit's extra device time goes, against its peers in the same steps.

    Attributes:
        culprit_units: Number of (step, rank) units on the culprit side.
        peer_units: Number of (step, rank) units on the peer side.
        busy_us_culprit: Compute-kernel time per unit on the culprit, µs.
        busy_us_peer: Compute-kernel time per unit on the peers, µs.
        by_kind: µs per unit explained by each kind (``KINDS`` without ``none``).
        ops: Operator differences, largest ``delta_us`` first (positive ones only).
        verdict: The kind that explains the largest part of the extra time, ``none`` when the
            culprit's device time is not longer.
        uniform_ratio: Device-time-weighted median slowdown of the matched operators.
        uniform_share: Share of the matched device time within ``UNIFORM_TOLERANCE`` of that
            ratio (0..1).
        counters: Top operator's counters ``{name: (culprit, peer)}`` that differ by at least
            ``COUNTER_MIN_DIFF`` (block_dim, aic_mac_ratio, ...; op_state as 1.0 = dynamic).
        peer_sample: Peer ranks sampled (0: every peer read).
        varies_by_unit: For step-varying accounts: the top operator's input shapes differ between
            the culprit units (the work follows the data).
        outliers: The extra time held by a few very long launches, when it is (:class:`Outliers`).
        engine: For an ``engine`` verdict: the accelerator core whose operators are slower.
        engine_ratio: Its device-time-weighted median slowdown.
        other_ratio: The same for the operators of the other cores (about 1.0 for an engine verdict).
        other_ops: Their heaviest operator types (at most two), by device time.
        clock_mhz_culprit: For a ``uniform`` / ``engine`` verdict: the culprit's mean AI Core
            clock, MHz (:func:`aicore_clock_mhz`; NaN without the AI Core Freq track).
        clock_mhz_peer: The same for the peers sampled.
        versions_differ: Whether the culprit ranks record another CANN or torch_npu version than
            their peers (:func:`versions_differ`); ``None`` when the profile records none.
        absent: Operator types every peer unit launches that the culprit never does, as
            ``(op_type, launches per unit, µs per unit)`` on the peers, most time first (a fused
            kernel the culprit runs as separate operators, or work it skips).
        passes: Forward / backward passes (micro-batches) per step on the culprit and on its
            peers (:func:`pass_sync`; computed for an ``extra_work`` verdict only).
        versions: ``(culprit's, peers')`` CANN / torch_npu versions as text when they differ
            (:func:`version_pair`), else ``None``.
        optimizer_us: Time of the optimizer-step kernels (``OPTIMIZER_OPS``: Foreach*, Apply*,
            Adam, Lamb) per unit, µs, (culprit, peers); NaN on a side that runs none.
        device: For a ``uniform`` / ``engine`` verdict: what the devices report of themselves
            that differs, ``{column: (culprit, peers)}`` (:func:`device_differs`: AI Core and AI
            Vector core counts, reported clock).
    """

    culprit_units: int
    peer_units: int
    busy_us_culprit: float
    busy_us_peer: float
    by_kind: dict[str, float]
    ops: tuple[OpDiff, ...]
    verdict: str
    uniform_ratio: float
    uniform_share: float
    counters: dict[str, tuple[float, float]] = field(default_factory=dict)
    peer_sample: int = 0
    varies_by_unit: bool = False
    engine: str = ""
    engine_ratio: float = float("nan")
    other_ratio: float = float("nan")
    other_ops: tuple[str, ...] = ()
    outliers: Outliers | None = None
    clock_mhz_culprit: float = float("nan")
    clock_mhz_peer: float = float("nan")
    versions_differ: bool | None = None
    optimizer_us: tuple[float, float] = (float("nan"), float("nan"))
    absent: tuple[tuple[str, float, float], ...] = ()
    versions: tuple[str, str] | None = None
    passes: tuple[float, float] = (float("nan"), float("nan"))
    device: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def delta_us(self) -> float:
        """Culprit minus peers compute-kernel time, µs per unit."""
        return self.busy_us_culprit - self.busy_us_peer

    @property
    def top(self) -> OpDiff | None:
        """The operator difference that explains the most, if any."""
        return self.ops[0] if self.ops else None

    def top_of(self, kind: str) -> OpDiff | None:
        """The largest operator difference of one kind, if any."""
        return next((o for o in self.ops if o.kind == kind), None)


def _compute_kernels(profile: Profile, ranks: Iterable[int]) -> pd.DataFrame:
    """Compute kernels of ``ranks`` with the variant columns filled ('' when the export lacks one)."""
    k = profile.kernels_for(ranks)
    if k.empty:
        return k
    for col in ("name", "op_type", "accelerator_core"):
        if col not in k.columns:
            k = k.assign(**{col: ""})
    k = k[~is_comm_kernel(k).to_numpy()]
    if k.empty:
        return k
    name = k["name"].astype("string").fillna("")
    op_type = k["op_type"].astype("string")
    op_type = op_type.where(~op_type.isin(["", "N/A"]) & op_type.notna(), name)
    cols = {
        "op_type": op_type.fillna(""),
        "accelerator_core": k["accelerator_core"].astype("string").fillna("").str.upper(),
    }
    for c in ("input_shapes", "input_dtypes", "input_formats"):
        cols[c] = (
            k[c].astype("string").fillna("") if c in k.columns else pd.Series("", index=k.index)
        )
    return k.assign(**cols)


def _sample(ranks: Sequence[int], n: int = PEER_SAMPLE) -> list[int]:
    rs = sorted(set(ranks))
    if len(rs) <= 2 * n:
        return rs
    return spread_sample(rs, n)


def device_account(
    profile: Profile,
    culprit_units: Sequence[tuple[int, int]],
    peers: Sequence[int],
    steps: Sequence[int] | None = None,
    peer_units: Sequence[tuple[int, int]] | None = None,
) -> DeviceAccount | None:
    """Decompose the culprit's extra device time against its peers in the same steps.

    Args:
        profile: The profile (reads ``kernels`` of the culprit and of up to ``PEER_SAMPLE`` peers).
        culprit_units: ``(step, rank)`` pairs of the culprit side; a step of ``-1`` means every
            kept step of that rank.
        peers: Peer ranks (the culprit's ranks are removed from them).
        steps: Steps to compare when the culprit units say ``-1``; ``None`` = every step.
        peer_units: ``(step, rank)`` pairs of the peer side, given instead of ``peers`` in the
            same steps: the same ranks in other steps (what makes some steps of every rank
            slower). The culprit's ranks are then kept on the peer side.

    Returns:
        The :class:`DeviceAccount`, or ``None`` without kernels for both sides.
    """
    c_ranks = sorted({r for _, r in culprit_units})
    if peer_units is not None:
        all_peers = sorted({int(r) for _, r in peer_units})
        p_ranks = all_peers
    else:
        all_peers = [int(p) for p in peers if int(p) not in set(c_ranks)]
        p_ranks = _sample(all_peers)
    if not c_ranks or not p_ranks:
        return None
    k = _compute_kernels(profile, [*c_ranks, *p_ranks])
    if k.empty:
        return None
    k = k[k["step"] >= 0] if (k["step"] >= 0).any() else k
    explicit = {(int(s), int(r)) for s, r in culprit_units if int(s) >= 0}
    whole = {int(r) for s, r in culprit_units if int(s) < 0}
    if steps is not None:
        k = k[k["step"].isin(list(steps))]
    unit_steps = {s for s, _ in explicit}
    key_rank = k["rank"].astype(int).to_numpy()
    key_step = k["step"].astype(int).to_numpy()
    is_c = np.array(
        [(r in whole) or ((s, r) in explicit) for s, r in zip(key_step, key_rank, strict=True)],
        dtype=bool,
    )
    # peers in the same steps as the explicit culprit units (every step for whole-rank culprits)
    is_p = np.isin(key_rank, p_ranks)
    if peer_units is not None:
        pu = {(int(s), int(r)) for s, r in peer_units}
        is_p = np.array([(s, r) in pu for s, r in zip(key_step, key_rank, strict=True)], dtype=bool)
    elif explicit and not whole:
        is_p &= np.isin(key_step, list(unit_steps))
    c, p = k[is_c], k[is_p]
    if c.empty or p.empty:
        return None
    n_c = int(c.groupby(["step", "rank"]).ngroups)
    n_p = int(p.groupby(["step", "rank"]).ngroups)

    def side(df: pd.DataFrame, n: int) -> pd.DataFrame:
        g = df.groupby(list(VARIANT), dropna=False)["duration_us"].agg(["sum", "count"])
        g["us"] = g["sum"] / n
        g["n"] = g["count"] / n
        g["avg"] = g["sum"] / g["count"]
        return g[["us", "n", "avg"]]

    a, b = side(c, n_c), side(p, n_p)
    j = a.add_suffix("_c").join(b.add_suffix("_p"), how="outer")
    ops: list[OpDiff] = []
    by_kind = dict.fromkeys(KINDS[:-1], 0.0)
    matched = j[j["us_c"].notna() & j["us_p"].notna()]
    # matched variants: extra launches and slower launches
    ratios, weights, types, cores = [], [], [], []
    for key, row in matched.iterrows():
        vkey: Any = key
        op_type, shp, dt, fmt, core = (str(x) for x in vkey)
        extra = (row["n_c"] - row["n_p"]) * row["avg_p"]
        slower = row["n_c"] * (row["avg_c"] - row["avg_p"])
        ratios.append(row["avg_c"] / row["avg_p"] if row["avg_p"] > 0 else np.nan)
        weights.append(row["us_p"])
        types.append(op_type)
        cores.append(core)
        for kind, d in (("extra_work", extra), ("slower", slower)):
            if d > 0:
                ops.append(
                    OpDiff(
                        op_type, kind, float(d), float(row["n_c"]), float(row["n_p"]),
                        float(row["avg_c"]), float(row["avg_p"]), core, core, dt, dt, shp, shp,
                        fmt, fmt,
                    )
                )  # fmt: skip
    # one-sided variants of an op type both sides run: the differing field names the kind
    only_c = j[j["us_p"].isna()].reset_index()
    only_p = j[j["us_c"].isna()].reset_index()
    for op_name, gc in only_c.groupby("op_type"):
        op_type = str(op_name)
        top_c = gc.sort_values("us_c", ascending=False).iloc[0]
        gp = only_p[only_p["op_type"] == op_type]
        us_c = float(gc["us_c"].sum())
        if gp.empty:
            ops.append(
                OpDiff(
                    str(op_type), "extra_work", us_c, float(gc["n_c"].sum()), 0.0,
                    float(top_c["avg_c"]), 0.0, str(top_c["accelerator_core"]), "",
                    str(top_c["input_dtypes"]), "", str(top_c["input_shapes"]), "",
                    str(top_c["input_formats"]), "",
                )
            )  # fmt: skip
            continue
        top_p = gp.sort_values("us_p", ascending=False).iloc[0]
        if str(top_c["accelerator_core"]) != str(top_p["accelerator_core"]):
            kind = "placement"
        elif str(top_c["input_dtypes"]) != str(top_p["input_dtypes"]):
            kind = "dtype"
        elif str(top_c["input_formats"]) != str(top_p["input_formats"]):
            kind = "format"  # the same data stored in another layout (ND / NZ, 5HD)
        else:
            kind = "shape"
        d = us_c - float(gp["us_p"].sum())
        if d > 0:
            ops.append(
                OpDiff(
                    str(op_type), kind, d, float(gc["n_c"].sum()), float(gp["n_p"].sum()),
                    float(top_c["avg_c"]), float(top_p["avg_p"]),
                    str(top_c["accelerator_core"]), str(top_p["accelerator_core"]),
                    str(top_c["input_dtypes"]), str(top_p["input_dtypes"]),
                    str(top_c["input_shapes"]), str(top_p["input_shapes"]),
                    str(top_c["input_formats"]), str(top_p["input_formats"]),
                )
            )  # fmt: skip
    ops.sort(key=lambda o: -o.delta_us)
    for o in ops:
        by_kind[o.kind] += o.delta_us
    # uniform slowdown: most matched device time slower by about the same factor; else, the
    # same test on the operators of one accelerator core, the other cores at their peers' speed
    r_arr, w_arr = np.asarray(ratios, float), np.asarray(weights, float)
    t_arr, k_arr = np.asarray(types, dtype=object), np.asarray(cores, dtype=object)
    ok = np.isfinite(r_arr) & (w_arr > 0)
    u_ratio, u_share, u_ok = _uniform(r_arr[ok], w_arr[ok], t_arr[ok])
    engine, e_ratio, o_ratio = "", float("nan"), float("nan")
    other_ops: tuple[str, ...] = ()
    if u_ok:
        by_kind["uniform"] = by_kind["slower"]
        by_kind["slower"] = 0.0
    else:
        for core in sorted({str(x) for x in k_arr[ok]}):
            on = ok & (k_arr == core)
            off = ok & (k_arr != core)
            if not off.any():
                continue
            r_on, _, on_ok = _uniform(r_arr[on], w_arr[on], t_arr[on])
            r_off = _wmedian(r_arr[off], w_arr[off])
            if on_ok and r_off < SLOWER_MIN_RATIO:
                engine, e_ratio, o_ratio = core, r_on, r_off
                # the other cores' heaviest operator types (at their peers' speed)
                w_off = pd.Series(w_arr[off], index=t_arr[off]).groupby(level=0).sum()
                other_ops = tuple(str(t) for t in w_off.sort_values(ascending=False).index[:2])
                slow_on = sum(
                    o.delta_us for o in ops if o.kind == "slower" and o.core_culprit == core
                )
                by_kind["engine"] = slow_on
                by_kind["slower"] = max(by_kind["slower"] - slow_on, 0.0)
                break
    busy_c = float(c["duration_us"].sum()) / n_c
    busy_p = float(p["duration_us"].sum()) / n_p

    def optimizer(df: pd.DataFrame, n: int) -> float:
        on = df["op_type"].astype(str).str.contains(OPTIMIZER_OPS)
        return float(df.loc[on, "duration_us"].sum()) / n if on.any() else float("nan")

    positive = {kd: v for kd, v in by_kind.items() if v > 0}
    verdict = max(positive, key=lambda kd: positive[kd]) if busy_c > busy_p and positive else "none"
    top = next((o for o in ops if o.kind != "slower" or verdict not in ("uniform", "engine")), None)
    if verdict == "engine":
        counters = _counters(c, p, core=engine)
    elif verdict == "uniform":
        counters = _counters(c, p)
    else:
        counters = _counters(c, p, op_type=top.op_type) if top is not None else {}
    varies = False
    if explicit and top is not None:
        per_unit = (
            c[c["op_type"] == top.op_type]
            .groupby(["step", "rank"])["input_shapes"]
            .agg(lambda s: "|".join(sorted(set(s))))
        )
        varies = int(per_unit.nunique()) > 1
    nan = float("nan")
    clock_c = clock_p = nan
    if verdict in ("uniform", "engine"):  # a device-wide slowdown: was its clock lower?
        # over the span of the kernels compared (the culprit's steps, the peers' same steps)
        clock_c = aicore_clock_mhz(profile, c_ranks, _span(c))
        clock_p = aicore_clock_mhz(profile, p_ranks, _span(p))
    return DeviceAccount(
        culprit_units=n_c,
        peer_units=n_p,
        busy_us_culprit=busy_c,
        busy_us_peer=busy_p,
        by_kind=by_kind,
        ops=tuple(ops),
        verdict=verdict,
        uniform_ratio=u_ratio,
        uniform_share=u_share,
        counters=counters,
        peer_sample=len(p_ranks) if len(p_ranks) < len(all_peers) else 0,
        varies_by_unit=varies,
        engine=engine,
        engine_ratio=e_ratio,
        other_ratio=o_ratio,
        other_ops=other_ops,
        outliers=_outliers(c, p, n_c) if busy_c > busy_p else None,
        clock_mhz_culprit=clock_c,
        clock_mhz_peer=clock_p,
        versions_differ=versions_differ(profile, c_ranks, all_peers),
        optimizer_us=(optimizer(c, n_c), optimizer(p, n_p)),
        absent=_absent(c, p, n_p),
        versions=version_pair(profile, c_ranks, all_peers),
        passes=_pass_counts(profile, c_ranks, p_ranks) if verdict == "extra_work" else (nan, nan),
        device=device_differs(profile, c_ranks, all_peers)
        if verdict in ("uniform", "engine")
        else {},
    )


def _pass_counts(
    profile: Profile, ranks: Sequence[int], peers: Sequence[int]
) -> tuple[float, float]:
    """Backward passes (micro-batches) per step of ``ranks`` and of ``peers`` (:func:`pass_sync`)."""
    a = pass_sync(profile, list(ranks)[:PEER_SAMPLE])
    b = pass_sync(profile, list(peers)[:PEER_SAMPLE])
    nan = float("nan")
    return (a.passes if a is not None else nan, b.passes if b is not None else nan)


#: An operator type the peers launch counts as absent on the culprit when the peers spend at
#: least this share of their compute time in it.
ABSENT_MIN_SHARE = 0.002


def _absent(c: pd.DataFrame, p: pd.DataFrame, n_p: int) -> tuple[tuple[str, float, float], ...]:
    """Operator types the peers launch in every unit and the culprit never (``DeviceAccount.absent``)."""
    have = set(c["op_type"].astype(str))
    pt = p["op_type"].astype(str)
    units = p.groupby(["step", "rank"]).ngroups
    total = float(p["duration_us"].sum())
    out = []
    for op, g in p.groupby(pt, sort=False):
        if str(op) in have or g.groupby(["step", "rank"]).ngroups < units:
            continue
        us = float(g["duration_us"].sum())
        if total > 0 and us >= ABSENT_MIN_SHARE * total:
            out.append((str(op), len(g) / max(n_p, 1), us / max(n_p, 1)))
    return tuple(sorted(out, key=lambda x: -x[2]))


def version_pair(
    profile: Profile, ranks: Sequence[int], peers: Sequence[int]
) -> tuple[str, str] | None:
    """The CANN / torch_npu versions of ``ranks`` and of ``peers`` as text, when they differ.

    From ``meta`` (profiler_info / profiler_metadata per rank): ``("CANN 7.0.1, torch_npu
    2.1.0", "CANN 8.0.RC2, torch_npu 2.1.0.post6")``; ``None`` when the same or not recorded.
    """
    meta = profile.get("meta")
    if meta.empty or "rank" not in meta.columns:
        return None
    mine_txt, theirs_txt, differ = [], [], False
    for col, label in (("cann_version", "CANN"), ("torch_npu_version", "torch_npu")):
        if col not in meta.columns:
            continue
        v = meta[["rank", col]].dropna()
        v = v[v[col].astype(str).str.strip() != ""]
        mine = sorted(set(v.loc[v["rank"].isin(list(ranks)), col].astype(str)))
        theirs = sorted(set(v.loc[v["rank"].isin(list(peers)), col].astype(str)))
        if not mine or not theirs:
            continue
        differ = differ or mine != theirs
        mine_txt.append(f"{label} {'/'.join(mine)}")
        theirs_txt.append(f"{label} {'/'.join(theirs)}")
    return (", ".join(mine_txt), ", ".join(theirs_txt)) if differ else None


#: What a device reports of itself (``meta``, from info.json ``DeviceInfo``), compared by
#: :func:`device_differs`.
DEVICE_FIELDS = ("ai_core_num", "aiv_num", "aic_frequency_mhz")


def device_differs(
    profile: Profile, ranks: Sequence[int], peers: Sequence[int]
) -> dict[str, tuple[float, float]]:
    """The device fields that differ between ``ranks`` and ``peers``: ``{column: (theirs, peers')}``.

    Medians over each side of the ``meta`` columns :data:`DEVICE_FIELDS` (CANN's info.json
    ``DeviceInfo``: core counts, AI Core clock in MHz); a field is kept when both sides report it
    and the medians differ. Empty when the profile carries none.
    """
    meta = profile.get("meta")
    out: dict[str, tuple[float, float]] = {}
    if meta.empty or "rank" not in meta.columns:
        return out
    mine, others = meta[meta["rank"].isin(list(ranks))], meta[meta["rank"].isin(list(peers))]
    for col in DEVICE_FIELDS:
        if col not in meta.columns:
            continue
        a = float(pd.to_numeric(mine[col], errors="coerce").median())
        b = float(pd.to_numeric(others[col], errors="coerce").median())
        if math.isfinite(a) and math.isfinite(b) and a != b:
            out[col] = (a, b)
    return out


def versions_differ(profile: Profile, ranks: Sequence[int], peers: Sequence[int]) -> bool | None:
    """Whether ``ranks`` record another CANN or torch_npu version than ``peers``.

    From the ``meta`` table (``cann_version``, ``torch_npu_version``: profiler_info /
    profiler_metadata per rank). ``None`` when neither side records a version.
    """
    meta = profile.get("meta")
    if meta.empty or "rank" not in meta.columns:
        return None
    seen = False
    for col in ("cann_version", "torch_npu_version"):
        if col not in meta.columns:
            continue
        v = meta[["rank", col]].dropna()
        v = v[v[col].astype(str).str.strip() != ""]
        mine = set(v.loc[v["rank"].isin(list(ranks)), col].astype(str))
        theirs = set(v.loc[v["rank"].isin(list(peers)), col].astype(str))
        if mine and theirs:
            seen = True
            if mine != theirs:
                return True
    return False if seen else None


def aicore_clock_mhz(
    profile: Profile, ranks: Sequence[int], window: tuple[float, float] | None = None
) -> float:
    """Mean AI Core clock of ``ranks`` (MHz) over a time window: each sample holds until the next.

    Reads the ``aicore_freq`` table (the AI Core Freq counter track of trace_view.json, or the
    DB's AICORE_FREQ) of ``ranks`` only. A rank's clock is ∫ f dt / (b − a) over the window
    ``(a, b)`` (epoch µs; ``None``: from its first to its last sample), the value before the first
    sample being the first's; a single sample is its value. The ranks' clocks are averaged. NaN
    when none of them has the track.
    """
    f = profile.aicore_freq_for(ranks)
    if f.empty:
        return float("nan")
    out = []
    for _, g in f.sort_values(["rank", "start_us"], kind="stable").groupby("rank"):
        t = g["start_us"].to_numpy(dtype="float64")
        v = g["freq_mhz"].to_numpy(dtype="float64")
        ok = np.isfinite(t) & np.isfinite(v)
        t, v = t[ok], v[ok]
        if len(v) == 0:
            continue
        a, b = window if window is not None else (t[0], t[-1])
        if not b > a:
            out.append(float(v[0]))
            continue
        x = np.unique(np.concatenate(([a, b], t[(t > a) & (t < b)])))
        held = v[np.clip(np.searchsorted(t, x[:-1], side="right") - 1, 0, len(v) - 1)]
        out.append(float(np.sum(held * np.diff(x)) / (b - a)))
    return float(np.mean(out)) if out else float("nan")


def _span(k: pd.DataFrame) -> tuple[float, float] | None:
    """(first start, last end) of kernels ``k``, epoch µs (``None`` without start times)."""
    if "start_us" not in k.columns or k.empty:
        return None
    s0 = pd.to_numeric(k["start_us"], errors="coerce")
    s1 = s0 + pd.to_numeric(k["duration_us"], errors="coerce").fillna(0.0)
    a, b = float(s0.min()), float(s1.max())
    return (a, b) if math.isfinite(a) and math.isfinite(b) and b > a else None


def _wmedian(values: np.ndarray, weights: np.ndarray) -> float:
    """Weighted median of ``values`` (``nan`` when empty)."""
    if len(values) == 0:
        return float("nan")
    order = np.argsort(values)
    vs, ws = values[order], weights[order]
    return float(vs[min(np.searchsorted(np.cumsum(ws), ws.sum() / 2), len(vs) - 1)])


def _uniform(
    ratios: np.ndarray, weights: np.ndarray, types: np.ndarray
) -> tuple[float, float, bool]:
    """(weighted median slowdown, share of the time within ``UNIFORM_TOLERANCE`` of it, uniform?).

    Uniform: the median is ≥ ``SLOWER_MIN_RATIO``, ≥ ``UNIFORM_MIN_SHARE`` of the device time is
    near it, over ≥ ``UNIFORM_MIN_TYPES`` op types. ``(nan, 0, False)`` with fewer types.
    """
    if len(ratios) < UNIFORM_MIN_TYPES:
        return float("nan"), 0.0, False
    med = _wmedian(ratios, weights)
    near = np.abs(ratios / med - 1.0) <= UNIFORM_TOLERANCE
    share = float(weights[near].sum() / weights.sum())
    near_types = {str(t) for t, n_ok in zip(types, near, strict=True) if n_ok}
    ok = (
        med >= SLOWER_MIN_RATIO
        and share >= UNIFORM_MIN_SHARE
        and len(near_types) >= UNIFORM_MIN_TYPES
    )
    return med, share, ok


def _mean(s: pd.Series) -> float:
    v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")


def _counters(
    c: pd.DataFrame, p: pd.DataFrame, op_type: str | None = None, core: str | None = None
) -> dict[str, tuple[float, float]]:
    """Per-kernel counters that differ between the sides (relative ≥ ``COUNTER_MIN_DIFF``).

    Compares the mean of each ``COUNTERS`` column (kernel_details.csv / DB ``TASK_PMU_INFO``)
    over the culprit's and the peers' kernels of one operator type, or of one accelerator core,
    or of every compute kernel. Returns ``{column: (culprit mean, peers' mean)}``;
    ``op_state_dynamic`` is the share of dynamic-shape launches on each side.
    """
    out: dict[str, tuple[float, float]] = {}
    cc, pp = c, p
    if op_type is not None:
        cc, pp = c[c["op_type"] == op_type], p[p["op_type"] == op_type]
    if core is not None:
        cc, pp = cc[cc["accelerator_core"] == core], pp[pp["accelerator_core"] == core]
    if cc.empty or pp.empty:
        return out
    for col in COUNTERS:
        if col not in cc.columns:
            continue
        a = _mean(cc[col])
        b = _mean(pp[col])
        if col == "block_dim" and op_type is None:
            # operators split over different core counts (cube vs vector): compared operator by
            # operator, stated for the one holding the most of the culprit's time
            a, b = _block_dim_by_op(cc, pp)
        big = max(abs(a), abs(b))
        if (
            math.isfinite(a)
            and math.isfinite(b)
            and big > 0
            and abs(a - b) / big >= COUNTER_MIN_DIFF
        ):
            out[col] = (a, b)
    if "op_state" in cc.columns:
        a = float((cc["op_state"].astype("string").str.lower() == "dynamic").fillna(False).mean())
        b = float((pp["op_state"].astype("string").str.lower() == "dynamic").fillna(False).mean())
        if abs(a - b) >= 0.5:
            out["op_state_dynamic"] = (a, b)
    hf = _hf32_shares(cc, pp)
    if hf is not None and abs(hf[0] - hf[1]) >= 0.5:
        out["hf32_eligible_yes"] = hf
    return out


def _hf32_shares(c: pd.DataFrame, p: pd.DataFrame) -> tuple[float, float] | None:
    """Share of launches marked ``HF32 Eligible`` YES on each side (culprit, peers).

    Over the operator types marked YES on either side (the fp32 Cube operators); ``None`` without
    such a type. Source: kernel_details.csv ``HF32 Eligible``.
    """
    if "hf32_eligible" not in c.columns or "hf32_eligible" not in p.columns:
        return None
    yes_c = c["hf32_eligible"].astype("string").str.upper().str.strip() == "YES"
    yes_p = p["hf32_eligible"].astype("string").str.upper().str.strip() == "YES"
    types = set(c.loc[yes_c.fillna(False), "op_type"]) | set(p.loc[yes_p.fillna(False), "op_type"])
    if not types:
        return None
    in_c, in_p = c["op_type"].isin(types), p["op_type"].isin(types)
    if not in_c.any() or not in_p.any():
        return None
    return float(yes_c[in_c].fillna(False).mean()), float(yes_p[in_p].fillna(False).mean())


def _block_dim_by_op(c: pd.DataFrame, p: pd.DataFrame) -> tuple[float, float]:
    """Block Dim of the culprit's and the peers' kernels, compared on one operator type.

    Operators are split over different core counts (cube vs vector), so the means over all kernels
    blur a difference: the two means of the type both sides run that holds the most of the
    culprit's device time.
    """
    both = sorted(set(c["op_type"]) & set(p["op_type"]))
    if not both:
        return _mean(c["block_dim"]), _mean(p["block_dim"])
    top = str(c[c["op_type"].isin(both)].groupby("op_type")["duration_us"].sum().idxmax())
    return _mean(c.loc[c["op_type"] == top, "block_dim"]), _mean(
        p.loc[p["op_type"] == top, "block_dim"]
    )


# ------------------------------------------------------------------------------- job level
#: Job-level hotspot: one operator type that is not the model's main matrix work takes at least
#: this share of every rank's step ...
HOTSPOT_MIN_SHARE = 0.20
#: ... or layout/dtype conversions together (``LAYOUT_OPS``) take at least this share ...
LAYOUT_MIN_SHARE = 0.12
#: ... or the AI CPU engine takes at least this share. (Dynamic-shape launches are listed but
#: never a hotspot: aclnn operators report ``op_state`` dynamic by design.)
AICPU_MIN_SHARE = 0.05
#: Operator types that are the model's main work (a large share of them is compute-bound, not a
#: fault): matrix multiplications and fused attention.
MAIN_WORK = re.compile(r"matmul|batchmatmul|gemm|flashattention|fusedinferattention|grouped", re.I)
#: Operator types of the optimizer step (multi-tensor "foreach" kernels, fused Adam / apply).
OPTIMIZER_OPS = OP_CATEGORIES["optimizer"]
#: Operator types that only move or convert data (layout, format, dtype).
LAYOUT_OPS = re.compile(
    r"^(transdata|transpose|transposed|cast|tensormove|contiguous|viewcopy|asstrided|identity|"
    r"concatd?|split[vd]?|slice|stridedslice|memcpy)",
    re.I,
)


@dataclass(frozen=True)
class FusiblePattern:
    """Operators a fused NPU kernel replaces, recognised by their op types on every rank.

    Attributes:
        name: What they compute together (``attention``).
        require: Op-type patterns that must all be present (each on every rank examined).
        members: Op-type pattern of every operator the fused kernel replaces (their time adds up).
        fused: Op-type pattern of the fused kernel; the pattern is not reported when it is present.
        min_share: Share of every rank's step the members must take together.
    """

    name: str
    require: tuple[str, ...]
    members: str
    fused: str
    min_share: float


#: Composed computations the fused operators of CANN / torch_npu replace (the "fusion" checks of
#: msprof-analyze's advisor recognise the same sequences).
FUSIBLE = (
    FusiblePattern(
        "attention",
        (r"^BatchMatMul", r"^Softmax"),
        r"^(?:BatchMatMul|Softmax|DropOut|Masked(?:Fill|Softmax))",
        r"FlashAttention|FusedInferAttention|PromptFlashAttention|IncreFlashAttention",
        0.15,
    ),
    FusiblePattern(
        "RMSNorm",
        (r"^(?:Pow|Square)", r"^ReduceMean", r"^Rsqrt"),
        r"^(?:Pow|Square|ReduceMean|Rsqrt)",
        r"RmsNorm",
        0.05,
    ),
    FusiblePattern(
        "rotary position embedding",
        (r"^Neg", r"^Concat"),
        r"^(?:Neg|Concat|StridedSlice|Slice|SplitV?)",
        r"Rotary|RopeWithSinCos|ApplyRotaryPosEmb|InterleaveRope",
        0.03,
    ),
    FusiblePattern(
        "SwiGLU",
        (r"^(?:Sigmoid|Swish|Silu)",),
        r"^(?:Sigmoid|Swish|Silu)",
        r"SwiGlu",
        0.05,
    ),
)


@dataclass(frozen=True)
class JobItem:
    """One item that takes a share of every rank's step.

    Attributes:
        what: ``op_type``, ``engine``, ``layout`` (every layout/dtype conversion together),
            ``fusion`` (the operators of one :data:`FUSIBLE` pattern with no fused kernel),
            ``dynamic`` (every dynamic-shape launch together) or ``few_cores`` (long kernels
            launched on a small part of their engine's cores, :func:`_few_cores`).
        name: The operator type, the accelerator core, or the group's name.
        us_per_step: Mean µs per (step, rank).
        share_min: Smallest share of a rank's step over the ranks examined (0..1).
        share_mean: Mean share of the step (0..1).
        count_per_step: Launches per (step, rank).
        core: The engine the item mostly runs on.
        dtype: The item's most frequent input dtypes.
        shape: The item's most time-consuming input shapes.
        members: For groups: the operator types in it, by time.
        device_share: Median over ranks of its share of the rank's device time (the sum of
            the rank's kernel durations), 0..1; NaN when unknown.
        weight_casts: For ``layout``: Casts per (step, rank) whose input has the shape of a
            MatMul's weight (its second input), fp32 ones (weights cast down) and the others
            (their gradients cast back) together.
        weight_cast_us: Their time per (step, rank), µs.
        weight_fp32_casts: Of them, the Casts of an fp32 (``DT_FLOAT``) input.
        block_dims: For ``few_cores``: per operator type, (type, its Block Dim, the largest Block
            Dim of its engine on the rank, its µs per (step, rank)), by time.
        tflops: For ``slow_matrix``: the operator's achieved TFLOPS (:func:`matrix_flops` over
            the launch durations, time-weighted median).
        peer_tflops: The same for the job's other matrix operators (``peer_ops``).
        peer_ops: Those operator types, by time.
        rows_per_group: For a grouped MatMul: input rows per group (expert) of its heaviest
            shape; NaN otherwise.
        groups: Its group count (0 when not grouped); ``rows``: its input rows.
        pipes: ``{counter: (the operator's median, its peers' median)}`` of ``aic_mac_ratio`` and
            ``aic_mte2_ratio`` (kernel_details.csv PipeUtilization) when recorded.
    """

    what: str
    name: str
    us_per_step: float
    share_min: float
    share_mean: float
    count_per_step: float
    core: str = ""
    dtype: str = ""
    shape: str = ""
    members: tuple[str, ...] = ()
    device_share: float = math.nan
    weight_casts: float = 0.0
    weight_cast_us: float = 0.0
    weight_fp32_casts: float = 0.0
    block_dims: tuple[tuple[str, int, int, float], ...] = ()
    tflops: float = math.nan
    peer_tflops: float = math.nan
    peer_ops: tuple[str, ...] = ()
    rows_per_group: float = math.nan
    groups: int = 0
    rows: int = 0
    pipes: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class JobAccount:
    """What dominates every rank's step (``kernels``, ``step_trace``).

    Attributes:
        ranks: Ranks examined (a sample of at most ``PEER_SAMPLE`` at scale).
        items: Operator types, engines and groups by ``share_min``, largest first.
        hotspot: The item that takes a large share everywhere and is not the model's main
            matrix work (thresholds above), else ``None``.
        main_work: The largest main-work operator type (MatMul, attention), for "what dominates".
        more_fusions: Other composed computations (``fusion`` items) above their own pattern's
            threshold besides a ``fusion`` hotspot, largest first.
    """

    ranks: tuple[int, ...]
    items: tuple[JobItem, ...]
    hotspot: JobItem | None
    main_work: JobItem | None
    more_fusions: tuple[JobItem, ...] = ()


def _item(
    what: str,
    name: str,
    k: pd.DataFrame,
    units: pd.Series,
    step: pd.Series,
    device: pd.Series | None = None,
) -> JobItem:
    per = k.groupby("rank")["duration_us"].agg(["sum", "count"]).reindex(units.index).fillna(0.0)
    per_step = per["sum"] / units
    share = per_step / step
    sub = k
    dev = (per["sum"] / device.reindex(units.index)).median() if device is not None else math.nan
    return JobItem(
        what,
        name,
        float(per_step.mean()),
        float(share.min()),
        float(share.mean()),
        float((per["count"] / units).mean()),
        str(sub.groupby("accelerator_core")["duration_us"].sum().idxmax()) if len(sub) else "",
        str(sub["input_dtypes"].mode().iloc[0]) if len(sub) else "",
        str(sub.groupby("input_shapes")["duration_us"].sum().idxmax()) if len(sub) else "",
        tuple(str(x) for x in sub.groupby("op_type")["duration_us"].sum().sort_values(
            ascending=False).index[:4]) if what in ("layout", "dynamic", "engine", "fusion", "few_cores") else (),
        float(dev),
    )  # fmt: skip


#: A kernel runs on few cores when its Block Dim is at most this share of the largest Block Dim
#: of its engine on the rank ...
FEW_CORES_SHARE = 0.25
#: ... and it lasts at least this long (µs; short kernels use few cores by design) ...
FEW_CORES_MIN_US = 200.0
#: ... and such kernels together are a hotspot when they take this share of every rank's step.
FEW_CORES_MIN_SHARE = 0.08


def _few_cores(
    k: pd.DataFrame,
) -> tuple[pd.DataFrame, tuple[tuple[str, int, int, float], ...]] | None:
    """Long kernels launched on a small part of their engine's cores.

    ``k``: compute kernels with ``block_dim`` (kernel_details.csv Block Dim) and
    ``accelerator_core``. A kernel of at least ``FEW_CORES_MIN_US`` whose Block Dim is at most
    ``FEW_CORES_SHARE`` of the largest Block Dim of the same engine on its rank (the cores that
    engine's kernels do use there). Returns (those rows, per operator type (type, its Block Dim,
    the largest, its µs per (step, rank)) by time), or None.
    """
    if "block_dim" not in k.columns or k.empty:
        return None
    bd = pd.to_numeric(k["block_dim"], errors="coerce")
    core = k["accelerator_core"].astype(str)
    full = bd.groupby([k["rank"], core]).transform("max")
    mask = (
        (bd > 0)
        & (full >= 8)
        & (bd <= FEW_CORES_SHARE * full)
        & (k["duration_us"] >= FEW_CORES_MIN_US)
        & ~core.str.upper().eq("AI_CPU")
    )
    sub = k[mask.fillna(False)]
    if sub.empty:
        return None
    sb, sf = bd[sub.index], full[sub.index]
    by = sub.assign(_bd=sb, _full=sf).groupby("op_type")
    total = by["duration_us"].sum().sort_values(ascending=False)
    units = max(k[k["step"] >= 0].groupby(["rank", "step"]).ngroups, 1) if "step" in k else 1
    dims = tuple(
        (
            str(t),
            int(by.get_group(t)["_bd"].median()),
            int(by.get_group(t)["_full"].max()),
            float(us) / units,
        )
        for t, us in total.items()
    )
    return sub, dims


def _weight_casts(
    k: pd.DataFrame, lay: pd.DataFrame, units: pd.Series
) -> tuple[float, float, float]:
    """Casts over the MatMuls' weight shapes: (count, µs, fp32-input count) per (step, rank).

    A weight is a MatMul's second 2-D input shape (``kernels`` Input Shapes); a Cast whose first
    input has one of those shapes converts a weight (fp32 ``DT_FLOAT`` in: cast down for the
    MatMul) or its gradient (cast back). (0, 0, 0) without any (:class:`JobItem` ``weight_*``).
    """
    mm = k["op_type"].astype(str).str.contains(r"matmul|gemm", case=False)
    weights = {
        parts[1].strip()
        for x in k.loc[mm, "input_shapes"].astype(str)
        if len(parts := x.split(";")) > 1 and len(re.findall(r"\d+", parts[1])) == 2
    }
    cast = lay[lay["op_type"].astype(str).str.fullmatch("Cast", case=False)]
    if not weights or cast.empty:
        return 0.0, 0.0, 0.0
    first = cast["input_shapes"].astype(str).str.split(";").str[0].str.strip()
    on_w = cast[first.isin(weights)]
    if on_w.empty:
        return 0.0, 0.0, 0.0
    n = float(units.sum())
    fp32 = on_w["input_dtypes"].astype(str).str.upper().str.match(r"DT_FLOAT(?:$|;)")
    return len(on_w) / n, float(on_w["duration_us"].sum()) / n, float(fp32.sum()) / n


def _chains(k: pd.DataFrame, anchors: str) -> pd.DataFrame:
    """The kernels of the operator chains a fused kernel replaces, found around their anchors.

    A composed computation (RMSNorm as Cast, Pow, ReduceMean, Add, Rsqrt, Mul ...) launches its
    anchors (``anchors``: the op types only it uses) among generic ones (Mul, Add, Cast) that
    belong to it too. Per rank and step in launch order, a chain is a run of kernels between two
    main-work kernels (``MAIN_WORK``: MatMul, attention), and it counts when one of its kernels is
    an anchor. Without start times, the anchors alone. The optimizer's kernels (``OPTIMIZER_OPS``)
    end a chain like main work.
    """
    is_anchor = k["op_type"].str.contains(anchors, case=False, regex=True)
    if "start_us" not in k.columns or not is_anchor.any():
        return k[is_anchor]
    start = pd.to_numeric(k["start_us"], errors="coerce")
    if not start.notna().all():
        return k[is_anchor]
    o = k.assign(_start=start, _anchor=is_anchor).sort_values(["rank", "step", "_start"])
    # main work ends a chain, and so does the optimizer step (its multi-tensor kernels belong to
    # no layer's chain)
    main = o["op_type"].str.contains(MAIN_WORK).to_numpy(dtype=bool) | o["op_type"].str.match(
        OPTIMIZER_OPS
    ).to_numpy(dtype=bool)
    rank = o["rank"].to_numpy()
    step = o["step"].to_numpy()
    new = np.ones(len(o), dtype=bool)
    new[1:] = (rank[1:] != rank[:-1]) | (step[1:] != step[:-1]) | main[1:] | main[:-1]
    run = np.cumsum(new)
    has = pd.Series(o["_anchor"].to_numpy(dtype=bool)).groupby(run).transform("any").to_numpy()
    return o[has & ~main].drop(columns=["_start", "_anchor"])


#: A dominant matrix operator is slow when it reaches at most this share of the TFLOPS the
#: job's other matrix operators reach ...
SLOW_MATRIX_RATIO = 0.5
#: ... and those others hold at least this share of the step (a credible reference).
SLOW_MATRIX_PEER_MIN_SHARE = 0.02


def _dims(text: str) -> list[list[int]]:
    """Input shapes text (``"6144,2048;64,2048,2816;64"``) as lists of ints, one per input."""
    out = []
    for part in str(text).replace('"', "").split(";"):
        nums = [int(x) for x in re.findall(r"\d+", part)]
        out.append(nums)
    return out


def matrix_flops(op_type: str, input_shapes: str) -> tuple[float, int, int]:
    """Floating-point operations of one matrix-multiply launch, from its input shapes.

    ``MatMul`` / ``BatchMatMul`` / ``Gemm``: inputs ``[..., M, K]`` and ``[..., K, N]`` (either
    transposed: the shared dimension is found), 2·batch·M·K·N. ``GroupedMatmul``: ``x [M, K]``
    and weights ``[E, K, N]`` (or ``[E, N, K]``): each row goes through one group, 2·M·K·N.
    Returns ``(flops, groups, rows)``: NaN flops when the shapes do not read as a matrix product
    (kernel_details.csv Input Shapes); groups 0 for an ungrouped product.
    """
    d = _dims(input_shapes)
    nan = float("nan")
    if len(d) < 2 or len(d[0]) < 2 or len(d[1]) < 2:
        return nan, 0, 0
    a, b = d[0], d[1]
    if re.search("grouped", op_type, re.I):
        if len(a) != 2 or len(b) != 3:
            return nan, 0, 0
        m, k = a
        n = b[2] if b[1] == k else b[1] if b[2] == k else 0
        return (2.0 * m * k * n if n else nan), b[0], m
    if a[-1] == b[-2]:
        m, k, n = a[-2], a[-1], b[-1]
    elif a[-1] == b[-1]:
        m, k, n = a[-2], a[-1], b[-2]
    elif a[-2] == b[-2]:
        m, k, n = a[-1], a[-2], b[-1]
    else:
        return nan, 0, 0
    batch = float(np.prod(a[:-2])) if len(a) > 2 else 1.0
    return 2.0 * batch * m * k * n, 0, m


def _slow_matrix(
    k: pd.DataFrame, items: Sequence[JobItem], units: pd.Series, step: pd.Series,
    device: pd.Series,
) -> JobItem | None:  # fmt: skip
    """The dominant matrix operator, when it runs far below the job's other matrix operators.

    Of the main-work operator types (``MAIN_WORK``, attention excluded) taking at least
    ``HOTSPOT_MIN_SHARE`` of every rank's step, the largest whose achieved TFLOPS
    (:func:`matrix_flops` / duration, time-weighted median over its launches) is at most
    ``SLOW_MATRIX_RATIO`` of the other matrix operators' (which must hold at least
    ``SLOW_MATRIX_PEER_MIN_SHARE`` of the step): the same engine doing the same kind of work at
    a fraction of the rate (few rows per call re-reading the weights, shapes the Cube pads).
    Source: kernel_details.csv Input Shapes, Duration(us), PipeUtilization ratios.
    """
    mm = k[k["op_type"].str.contains(r"matmul|gemm|grouped", case=False)]
    if mm.empty:
        return None
    fl = [matrix_flops(t, sh) for t, sh in zip(mm["op_type"], mm["input_shapes"], strict=True)]
    flops = np.array([f[0] for f in fl], dtype=float)
    dur = mm["duration_us"].to_numpy(dtype=float)
    rate = flops / np.where(dur > 0, dur, np.nan) / 1e6  # TFLOPS
    ok = np.isfinite(rate)
    if not ok.any():
        return None
    types = mm["op_type"].to_numpy(dtype=object)
    for it in items:
        if it.what != "op_type" or it.share_min < HOTSPOT_MIN_SHARE:
            continue
        if not re.search(r"matmul|gemm|grouped", it.name, re.I):
            continue
        on = ok & (types == it.name)
        off = ok & (types != it.name)
        if not on.any() or not off.any():
            continue
        peer_share = float(dur[off].sum()) / float(units.sum()) / float(step.mean())
        if peer_share < SLOW_MATRIX_PEER_MIN_SHARE:
            continue
        mine = _wmedian(rate[on], dur[on])
        theirs = _wmedian(rate[off], dur[off])
        if not (mine <= SLOW_MATRIX_RATIO * theirs):
            continue
        sub = mm[on]
        heavy = str(sub.groupby("input_shapes")["duration_us"].sum().idxmax())
        _, groups, rows = matrix_flops(it.name, heavy)
        w_off = pd.Series(dur[off], index=types[off]).groupby(level=0).sum()
        pipes = {}
        for col in ("aic_mac_ratio", "aic_mte2_ratio"):
            if col in mm.columns:
                v = pd.to_numeric(mm[col], errors="coerce").to_numpy(dtype=float)
                if np.isfinite(v[on]).any() and np.isfinite(v[off]).any():
                    a, b = float(np.nanmedian(v[on])), float(np.nanmedian(v[off]))
                    pipes[col] = (float(a), float(b))
        return dataclasses.replace(
            _item("slow_matrix", it.name, sub, units, step, device),
            tflops=mine,
            peer_tflops=theirs,
            peer_ops=tuple(str(t) for t in w_off.sort_values(ascending=False).index[:2]),
            rows_per_group=rows / groups if groups else math.nan,
            groups=groups,
            rows=rows,
            pipes=pipes,
        )
    return None


def job_account(profile: Profile, step_us_by_rank: pd.Series) -> JobAccount | None:
    """Decompose every rank's device time by operator type, engine and conversion work.

    Args:
        profile: The profile (reads ``kernels`` of up to ``PEER_SAMPLE`` ranks).
        step_us_by_rank: Mean step time per rank, µs (index: rank), from ``step_trace``.

    Returns:
        The :class:`JobAccount`, or ``None`` without kernels.
    """
    ranks = _sample([int(r) for r in step_us_by_rank.index])
    k = _compute_kernels(profile, ranks)
    if k.empty:
        return None
    k = k[k["step"] >= 0] if (k["step"] >= 0).any() else k
    units = k.groupby("rank")["step"].nunique()
    step = step_us_by_rank.reindex(units.index)
    device = k.groupby("rank")["duration_us"].sum()  # every kernel of the rank, µs
    items: list[JobItem] = []
    for name, sub in k.groupby("op_type"):
        items.append(_item("op_type", str(name), sub, units, step, device))
    for name, sub in k.groupby("accelerator_core"):
        items.append(_item("engine", str(name), sub, units, step, device))
    few = _few_cores(k)
    if few is not None:
        sub, dims = few
        items.append(
            dataclasses.replace(
                _item("few_cores", "operators on few cores", sub, units, step, device),
                block_dims=dims,
            )
        )
    lay = k[k["op_type"].str.match(LAYOUT_OPS)]
    if not lay.empty:
        item = _item("layout", "layout/dtype conversions", lay, units, step, device)
        n, us, fp32 = _weight_casts(k, lay, units)
        items.append(
            dataclasses.replace(item, weight_casts=n, weight_cast_us=us, weight_fp32_casts=fp32)
        )
    types = set(k["op_type"].unique())
    for fp in FUSIBLE:
        if any(re.search(fp.fused, t, re.I) for t in types):
            continue
        if not all(
            k[k["op_type"].str.contains(req, case=False, regex=True)]["rank"].nunique()
            == len(units)
            for req in fp.require
        ):
            continue
        sub = _chains(k, fp.members)
        items.append(
            _item("fusion", f"{fp.name} computed from separate operators", sub, units, step, device)
        )
    if "op_state" in k.columns:
        dyn = k[k["op_state"].astype("string").str.lower() == "dynamic"]
        if not dyn.empty:
            items.append(_item("dynamic", "dynamic-shape operators", dyn, units, step, device))
    items.sort(key=lambda i: -i.share_min)
    slow = _slow_matrix(k, items, units, step, device)
    hot = None
    for it in items:
        pat = next((f for f in FUSIBLE if it.name.startswith(f"{f.name} ")), None)
        if (
            (it.what == "fusion" and pat is not None and it.share_min >= pat.min_share)
            or (it.what == "op_type" and not MAIN_WORK.search(it.name)
             and not LAYOUT_OPS.match(it.name)
             and it.share_min >= HOTSPOT_MIN_SHARE)
            or (it.what == "layout" and it.share_min >= LAYOUT_MIN_SHARE)
            or (it.what == "engine" and it.name == "AI_CPU" and it.share_min >= AICPU_MIN_SHARE)
            or (it.what == "few_cores" and it.share_min >= FEW_CORES_MIN_SHARE)
        ):  # fmt: skip
            hot = it
            break
    if slow is not None:
        # listed just ahead of its own op_type item (the same share); the hotspot only when no
        # other item is: a composed computation that holds it (an attention computed from
        # separate BatchMatMuls) names the first change better than its rate
        at = next(i for i, it in enumerate(items) if it.what == "op_type" and it.name == slow.name)
        items.insert(at, slow)
        hot = hot or slow
    main = next((i for i in items if i.what == "op_type" and MAIN_WORK.search(i.name)), None)
    more = tuple(
        it
        for it in items
        if hot is not None
        and hot.what == "fusion"
        and it.what == "fusion"
        and it is not hot
        and any(it.name.startswith(f"{f.name} ") and it.share_min >= f.min_share for f in FUSIBLE)
    )
    return JobAccount(tuple(int(r) for r in units.index), tuple(items), hot, main, more)


#: Idle before one operator explains a host stall when it holds at least this share of the
#: culprit's extra device idle.
IDLE_SPOT_MIN_SHARE = 0.4


@dataclass(frozen=True)
class IdleSpot:
    """Where in the step a culprit's device idles more than its peers': before which operator.

    Attributes:
        op_type: Operator type launched right after the extra idle.
        input_shapes: Its input shapes ('' when the export has none).
        culprit_us: Idle before it per (step, rank) unit on the culprit, µs.
        peer_us: The same on the peers, µs.
        launches: Its launches per unit on the culprit.
        share: ``(culprit_us - peer_us)`` / the culprit's extra idle before every operator.
    """

    op_type: str
    input_shapes: str
    culprit_us: float
    peer_us: float
    launches: float
    share: float

    @property
    def delta_us(self) -> float:
        """Extra idle before this operator per unit, µs."""
        return self.culprit_us - self.peer_us


def idle_before(
    profile: Profile, ranks: Sequence[int], peers: Sequence[int], min_delta_us: float
) -> IdleSpot | None:
    """The operator the culprit's device waits longest before, against its peers in the same steps.

    Each kernel's Wait Time is the device idle on its stream since the previous task ended
    (``kernel_details.csv`` ``Wait Time(us)``): summed per (op type, input shapes) and per
    (step, rank), the culprit's sums minus the peers' say where in the step the extra idle sits.

    Args:
        profile: The profile (reads ``kernels`` of ``ranks`` and up to ``PEER_SAMPLE`` peers).
        ranks: Culprit ranks.
        peers: Peer ranks (the culprit's ranks are removed).
        min_delta_us: The culprit's extra idle per step (its Free excess, µs); the spot must hold
            at least ``IDLE_SPOT_MIN_SHARE`` of it.

    Returns:
        The :class:`IdleSpot`, or ``None`` without Wait Time in the export or when no single
        operator holds that share.
    """
    c_ranks = sorted({int(r) for r in ranks})
    p_ranks = _sample([int(p) for p in peers if int(p) not in set(c_ranks)])
    if not c_ranks or not p_ranks or min_delta_us <= 0:
        return None
    k = _compute_kernels(profile, [*c_ranks, *p_ranks])
    if k.empty or "wait_us" not in k.columns:
        return None
    w = pd.to_numeric(k["wait_us"], errors="coerce")
    if not w.notna().any():
        return None
    k = k.assign(wait_us=w.fillna(0.0))
    k = k[k["step"] >= 0] if (k["step"] >= 0).any() else k
    is_c = k["rank"].isin(c_ranks)
    c, p = k[is_c], k[k["rank"].isin(p_ranks)]
    if c.empty or p.empty:
        return None
    key = ["op_type", "input_shapes"]
    n_c = c.groupby(["step", "rank"]).ngroups
    n_p = p.groupby(["step", "rank"]).ngroups
    a = c.groupby(key)["wait_us"].agg(["sum", "count"]) / [n_c, n_c]
    b = p.groupby(key)["wait_us"].sum() / n_p
    j = a.join(b.rename("peer"), how="left").fillna({"peer": 0.0})
    j["delta"] = j["sum"] - j["peer"]
    if j.empty:
        return None
    top_key, top = next(iter(j.sort_values("delta", ascending=False).iterrows()))
    share = float(top["delta"]) / min_delta_us
    if share < IDLE_SPOT_MIN_SHARE:
        return None
    op_type, shp = (str(x) for x in top_key)  # type: ignore[misc,attr-defined]
    return IdleSpot(
        op_type, shp, float(top["sum"]), float(top["peer"]), float(top["count"]), min(share, 1.0)
    )


#: One stretch holds the job's idle when the largest gap of a (step, rank) is at least this share
#: of that unit's idle (median over units).
STRETCH_SHARE = 0.6
#: A kernel shorter than this (µs of device time) is short: launching it costs the host about as
#: much as running it costs the device (the tiny-kernel threshold of ``host_dispatch``).
TINY_KERNEL_US = 10.0
#: Share of the compute stream's Wait Time the gaps before short kernels hold to place the idle there.
TINY_RUN_SHARE = 0.5
#: Idle before a few operator types is theirs when the top types (at most 2) hold this share.
BEFORE_OPS_SHARE = 0.6
#: Kernel names of the backward pass.
_BACKWARD = ("grad", "backward")


@dataclass(frozen=True)
class JobIdleShape:
    """Where the idle every rank shares sits in the step (Free gaps between ``kernel_details.csv`` tasks).

    Attributes:
        kind: ``stretch`` (one long gap per step at the same place), ``before_ops`` (many gaps,
            mostly right before the launches of one or two operator types) or ``tiny_run`` (many
            gaps before short kernels: the host launches them more slowly than the device runs
            them).
        before: Operator type(s) launched right after the idle (the most frequent over units).
        after: Operator type that ran right before a ``stretch`` ('' for ``before_ops``).
        idle_us: The idle it covers per (step, rank), µs (median over units).
        share: Its share of the unit's idle.
        gaps_per_step: Gaps per (step, rank) it is made of (median).
        forward_share: Share of the unit's idle before the step's first backward kernel (names
            with ``Grad`` / ``backward``), NaN when no kernel says backward.
        after_collective: For a ``stretch``: the kernel before it is a collective (e.g. the last
            gradient all-reduce); for a ``tiny_run``: most of its idle is after the step's last
            backward kernel (the optimizer step).
        kernel_us: For a ``tiny_run``: median device time of those short kernels, µs.
    """

    kind: str
    before: tuple[str, ...]
    after: str
    idle_us: float
    share: float
    gaps_per_step: float
    forward_share: float
    after_collective: bool
    kernel_us: float = math.nan


def _free_gaps(k: pd.DataFrame) -> pd.DataFrame:
    """Replace each kernel's Wait Time by the Free before it: the time no task ran on any stream.

    ``k``: one rank's or several ranks' kernels sorted by (rank, start), columns rank, start (µs),
    dur (µs), wait (µs), op. A kernel's Wait Time (``kernel_details.csv``) is the idle on its own
    stream, so the compute stream's gap while a collective runs on the communication stream counts
    there although it is Communication, not Free. The gap before a kernel to the latest end of every
    earlier task of its rank is the Free of ``step_trace_time.csv`` (Overlap Analysis: neither
    computing nor communicating); summed over a step it matches that file's Free. ``prev`` is the
    operator whose end closes the gap (the task that ended last). Without durations the Wait Time
    stays, and ``prev`` is the kernel before on any stream.

    Returns:
        ``k`` with ``wait`` (µs, ≥ 0; the rank's first kernel keeps its Wait Time) and ``prev``.
    """
    by_rank = k.groupby("rank", sort=False)
    end = k["start"] + k["dur"]
    if not end.notna().any():
        return k.assign(prev=by_rank["op"].shift().fillna(""))
    end = end.fillna(k["start"])
    latest = end.groupby(k["rank"]).cummax()
    # the operator holding the running latest end: the rows that set a new maximum, carried forward
    owner = k["op"].where(end >= latest).groupby(k["rank"]).ffill()
    gap = k["start"] - latest.groupby(k["rank"]).shift()
    return k.assign(
        wait=gap.fillna(k["wait"]).clip(lower=0.0),
        prev=owner.groupby(k["rank"]).shift().fillna(""),
    )


def job_idle_shape(profile: Profile, ranks: Sequence[int]) -> JobIdleShape | None:
    """Where the job's shared idle sits: one stretch, the gaps before some operators, or between short kernels.

    Reads every kernel (collectives included) of up to ``PEER_SAMPLE`` of ``ranks`` in start
    order; the idle before a kernel is the Free before it (:func:`_free_gaps`: no task on any
    stream), not its own stream's Wait Time. ``None`` without Wait Time, or when
    the idle is neither one stretch (``STRETCH_SHARE``), nor held by one or two operator types
    (``BEFORE_OPS_SHARE``), nor spread before short kernels (``TINY_RUN_SHARE``, see
    :func:`_tiny_run`).
    """
    rs = _sample([int(r) for r in ranks])
    if not rs:
        return None
    k = profile.kernels_for(rs)
    if k.empty or "wait_us" not in k.columns or "start_us" not in k.columns:
        return None
    w = pd.to_numeric(k["wait_us"], errors="coerce")
    if not w.notna().any():
        return None
    name = (
        k["name"].astype("string").fillna("")
        if "name" in k.columns
        else pd.Series("", index=k.index)
    )
    op = k["op_type"].astype("string") if "op_type" in k.columns else name
    op = op.where(op.notna() & ~op.isin(["", "N/A"]), name).fillna("")
    k = pd.DataFrame(
        {
            "rank": k["rank"].to_numpy(),
            "step": k["step"].fillna(-1).to_numpy() if "step" in k.columns else -1,
            "start": pd.to_numeric(k["start_us"], errors="coerce").to_numpy(),
            "wait": w.fillna(0.0).clip(lower=0.0).to_numpy(),
            "dur": pd.to_numeric(k["duration_us"], errors="coerce").to_numpy()
            if "duration_us" in k.columns
            else np.nan,
            "op": op.to_numpy(),
            "name": name.str.lower().to_numpy(),
        }
    ).sort_values(["rank", "start"], kind="stable")
    k = _free_gaps(k)
    k = k[k["step"] >= 0] if (k["step"] >= 0).any() else k
    units = k.groupby(["step", "rank"], sort=False)
    total = units["wait"].sum()
    total = total[total > 0]
    if total.empty:
        return None
    # backward starts at the first kernel whose name says so
    bw = k["name"].str.contains("|".join(_BACKWARD), regex=True)
    fwd_share = float("nan")
    if bw.any():
        first_bw = k[bw].groupby(["step", "rank"])["start"].min()
        kk = k.join(first_bw.rename("bw0"), on=["step", "rank"])
        fwd = kk[kk["start"] < kk["bw0"]].groupby(["step", "rank"])["wait"].sum()
        fwd_share = float((fwd.reindex(total.index).fillna(0.0) / total).median())
    idx = units["wait"].idxmax()
    big = k.loc[idx.to_numpy()].set_index(["step", "rank"])
    big_share = (big["wait"] / total.reindex(big.index)).dropna()
    if len(big_share) and float(big_share.median()) >= STRETCH_SHARE:
        before = str(big["op"].mode().iloc[0])
        after = str(big["prev"].mode().iloc[0])
        return JobIdleShape(
            "stretch",
            (before,),
            after,
            float(big["wait"].median()),
            float(big_share.median()),
            1.0,
            fwd_share,
            after.lower().startswith(("hcom", "hccl")) or "allreduce" in after.lower(),
        )
    coll = k["op"].str.lower().str.startswith(("hcom", "hccl"))
    comp = k[~coll]
    by_op = comp.groupby("op")["wait"].sum().sort_values(ascending=False)
    tot = float(k["wait"].sum())
    if by_op.empty or tot <= 0:
        return None
    top = list(by_op.index[:2])
    held = float(by_op.iloc[:2].sum()) / tot
    if float(by_op.iloc[0]) / tot >= BEFORE_OPS_SHARE:
        top, held = top[:1], float(by_op.iloc[0]) / tot
    n_units = max(len(total), 1)
    if held < BEFORE_OPS_SHARE:
        return _tiny_run(k, comp, coll, total, tot, n_units, fwd_share)
    gaps = float((comp["op"].isin(top) & (comp["wait"] > 0)).sum()) / n_units
    return JobIdleShape(
        "before_ops",
        tuple(str(t) for t in top),
        "",
        held * float(total.median()),
        held,
        gaps,
        fwd_share,
        False,
    )


def _tiny_run(
    k: pd.DataFrame,
    comp: pd.DataFrame,
    coll: pd.Series,
    total: pd.Series,
    tot: float,
    n_units: int,
    fwd_share: float,
) -> JobIdleShape | None:
    """The idle spread over the gaps before many short kernels (``tiny_run``), or ``None``.

    Short: under ``TINY_KERNEL_US`` of device time; their gaps must hold ``TINY_RUN_SHARE`` of the
    Free (``tot``: every gap of the sampled units, :func:`_free_gaps`). ``idle_us``: their gaps per
    (step, rank), median; ``share``: of that Free. ``before``: their operator types, most idle
    first (up to 4); ``after_collective``: most of that idle comes after the step's last
    collective (where the optimizer step runs).
    """
    tiny = comp[(comp["dur"] < TINY_KERNEL_US) & (comp["wait"] > 0)]
    if tiny.empty or tot <= 0 or float(tiny["wait"].sum()) / tot < TINY_RUN_SHARE:
        return None
    held = float(tiny["wait"].sum()) / tot
    per_unit = tiny.groupby(["step", "rank"])["wait"].sum()
    ops = tiny.groupby("op")["wait"].sum().sort_values(ascending=False)
    # where the optimizer runs: after the step's last backward kernel (names with Grad /
    # backward), or after its last collective when no kernel says backward
    bw = k["name"].str.contains("|".join(_BACKWARD), regex=True)
    edge = k[bw] if bw.any() else k[coll]
    last = edge.groupby(["step", "rank"])["start"].max().rename("edge")
    t = tiny.join(last, on=["step", "rank"])
    late = float(t.loc[t["start"] > t["edge"], "wait"].sum()) / float(t["wait"].sum())
    return JobIdleShape(
        "tiny_run",
        tuple(str(o) for o in ops.index[:4]),
        "",
        float(per_unit.median()),
        held,
        len(tiny) / n_units,
        fwd_share,
        late >= 0.5,
        float(tiny["dur"].median()),
    )


@dataclass(frozen=True)
class PassSync:
    """Gradient all-reduces repeated in every backward pass of a step (``kernel_details.csv``).

    A backward pass starts at the first kernel whose name says backward (``Grad`` / ``backward``)
    after forward operators that have a gradient operator in the profile (RmsNorm before
    RmsNormGrad); an all-reduce belongs to the pass it starts in (or right after).

    Attributes:
        passes: Backward passes per (step, rank) (median): the micro-batches.
        passes_with_sync: Of them, the passes that all-reduce (median).
        allreduces_per_step: All-reduce launches per (step, rank) (median; the step-closing ones
            included).
        allreduces_per_pass: Per pass that all-reduces (median over passes).
    """

    passes: float
    passes_with_sync: float
    allreduces_per_step: float
    allreduces_per_pass: float


#: A run of forward operators starts a new pass (micro-batch) when it holds at least this share of
#: the forward operators of the step's first forward; a shorter run inside the backward is a layer's
#: forward re-run (activation recomputation).
FULL_FORWARD_SHARE = 0.5


def _passes(profile: Profile, ranks: Sequence[int]) -> pd.DataFrame | None:
    """Every kernel of up to ``PEER_SAMPLE`` of ``ranks`` with its pass and forward-run labels.

    Columns: rank, step, start (µs), dur (µs), op (lowercase op type), ar (an all-reduce), bw (a
    backward marker: the name says ``Grad`` / ``backward``), fwd (a forward marker: an operator type
    that has a gradient operator in the profile, RmsNorm before RmsNormGrad; a MatMul runs in both
    passes and marks neither), pass (0 before the first backward, then 1, 2, ...: a pass starts at
    the backward marker after a full forward run), run_fwd (the count of forward markers of the
    forward run a row belongs to, NaN off forward runs), recompute (a forward run inside a pass that
    is too short to be a micro-batch's forward). ``None`` without kernels, start times or steps.
    """
    rs = _sample([int(r) for r in ranks])
    if not rs:
        return None
    k = profile.kernels_for(rs)
    if k.empty or "start_us" not in k.columns or "step" not in k.columns:
        return None
    name = k["name"].astype("string").fillna("").str.lower()
    op = (k["op_type"] if "op_type" in k.columns else k["name"]).astype("string").fillna("")
    f = pd.DataFrame(
        {
            "rank": k["rank"].to_numpy(),
            "step": k["step"].fillna(-1).to_numpy(),
            "start": pd.to_numeric(k["start_us"], errors="coerce").to_numpy(),
            "dur": pd.to_numeric(k["duration_us"], errors="coerce").to_numpy()
            if "duration_us" in k.columns
            else np.nan,
            "op": op.str.lower().to_numpy(),
            "op_type": op.to_numpy(),
            "bw": name.str.contains("|".join(_BACKWARD), regex=True).to_numpy(),
        }
    )
    f["ar"] = f["op"].str.contains("allreduce")
    f = f[f["step"] >= 0].sort_values(["rank", "step", "start"], kind="stable")
    if f.empty:
        return None
    types = set(f["op"].unique())
    fwd_types = {t for t in types if f"{t}grad" in types or f"{t}backward" in types}
    f["fwd"] = f["op"].isin(fwd_types) & ~f["bw"]
    mark = f[f["fwd"] | f["bw"]]
    if mark.empty or not mark["fwd"].any():
        return None
    unit = [mark["rank"], mark["step"]]
    # runs of consecutive forward (or backward) markers within a (step, rank)
    new_unit = (mark["rank"] != mark["rank"].shift()) | (mark["step"] != mark["step"].shift())
    run = ((mark["fwd"] != mark["fwd"].shift()) | new_unit).cumsum()
    run_fwd = run.map(run.value_counts()).where(mark["fwd"])
    first = run_fwd.groupby(unit).transform("first")
    prev = run_fwd.groupby(unit).shift()
    full = prev >= FULL_FORWARD_SHARE * first
    start = (mark["bw"] & full).reindex(f.index, fill_value=False)
    f["pass"] = start.groupby([f["rank"], f["step"]]).cumsum()
    return f


def pass_sync(profile: Profile, ranks: Sequence[int]) -> PassSync | None:
    """The backward passes of each step and how many of them all-reduce; ``None`` with < 2 passes.

    Reads every kernel of up to ``PEER_SAMPLE`` of ``ranks`` in start order (:func:`_passes`). With
    gradient accumulation only the last micro-batch's backward needs to all-reduce the gradients. A
    layer's forward re-run inside the backward (recomputation) does not start a pass.
    """
    f = _passes(profile, ranks)
    if f is None:
        return None
    units = f.groupby(["step", "rank"])
    passes = units["pass"].max()
    if passes.empty or float(passes.median()) < 2:
        return None
    ar = f[f["ar"] & (f["pass"] > 0)]
    if ar.empty:
        return None
    per_pass = ar.groupby(["step", "rank", "pass"]).size()
    with_sync = per_pass.groupby(level=["step", "rank"]).size()
    return PassSync(
        passes=float(passes.median()),
        passes_with_sync=float(with_sync.median()),
        allreduces_per_step=float(ar.groupby(["step", "rank"]).size().median()),
        allreduces_per_pass=float(per_pass.median()),
    )


#: Forward operators re-run per step, as a share of one forward's, below which recomputation is
#: not reported (a stray extra norm or two).
RECOMPUTE_MIN_SHARE = 0.2
#: ... on at least this share of the ranks sampled (the job's recomputation, not one stage's).
RECOMPUTE_RANK_SHARE = 0.8


@dataclass(frozen=True)
class Recompute:
    """Forward operators run more often than their gradient operators (activation recomputation).

    From ``kernel_details.csv`` (:func:`_passes`). Every forward operator type that has a gradient
    operator in the profile (RmsNorm / RmsNormGrad, FlashAttentionScore / ...Grad) runs once per
    micro-batch forward and its gradient once per backward; the launches beyond the gradient's
    are the forward run again before the backward (Megatron ``--recompute-granularity``,
    activation checkpointing). Independent of where the re-run sits in the step.

    Attributes:
        forward_share: Forward-operator launches beyond their gradients' / the gradients' launches,
            per (step, rank) (median): 1.0 when every layer's forward runs twice.
        recompute_us: Device time of the re-run per (step, rank), µs (median): the extra launches
            × the device time per forward-operator launch of the step's first forward (its kernels
            before the first backward marker, collectives excluded).
        op: The forward operator type with the most launches beyond its gradient's (e.g.
            FlashAttentionScore), ``op_per_step`` its launches per (step, rank), ``grad_per_step``
            its gradient operator's.
    """

    forward_share: float
    recompute_us: float
    op: str
    op_per_step: float
    grad_per_step: float


@dataclass(frozen=True)
class NewGroups:
    """Communication groups created anew during the capture: one used in a single step only.

    Attributes:
        count: New groups in the capture (each used in one step only).
        per_step: New groups per step with any (median).
        steps: The steps that use a group no other step uses.
        size: Members of those groups (the largest).
        names: A few of their group hashes.
        same_members: Whether each has the same members as a group used in other steps too (the
            same communicator built again, not a new layout).
    """

    count: int
    per_step: float
    steps: tuple[int, ...]
    size: int
    names: tuple[str, ...]
    same_members: bool


def new_groups(profile: Profile) -> NewGroups | None:
    """Groups used in one captured step only, in at least two steps (``comm_ops`` / ``comm_groups``).

    A communicator that the training loop builds again in every step (``dist.new_group`` inside
    the loop) shows as a new group hash per step whose collectives no other step runs.
    ``None`` without such groups in two steps or more.
    """
    ops = profile.get("comm_ops")
    if ops.empty or not {"group", "step", "rank"} <= set(ops.columns):
        return None
    sub = ops.dropna(subset=["step"])
    steps_of: dict[str, set[int]] = defaultdict(set)
    seen: dict[str, set[int]] = defaultdict(set)
    for g, st, r in zip(
        sub["group"].astype(str), sub["step"].astype(int), sub["rank"].astype(int), strict=True
    ):
        steps_of[g].add(st)
        seen[g].add(r)
    one = {g: next(iter(st)) for g, st in steps_of.items() if len(st) == 1}
    hit = sorted(set(one.values()))
    if len(hit) < 2:
        return None
    members: dict[str, frozenset[int]] = {g: frozenset(rs) for g, rs in seen.items()}
    groups = profile.get("comm_groups")
    if not groups.empty and {"group", "ranks"} <= set(groups.columns):
        for g, rs in zip(groups["group"].astype(str), groups["ranks"], strict=True):
            if isinstance(rs, (list, tuple, np.ndarray)):
                members[g] = frozenset(int(x) for x in rs)
    lasting = {members[g] for g in steps_of if g not in one}
    per = pd.Series(list(one.values())).value_counts()
    return NewGroups(
        count=len(one),
        per_step=float(per.median()),
        steps=tuple(hit),
        size=max(len(members[g]) for g in one),
        names=tuple(list(one)[:3]),
        same_members=all(members[g] in lasting for g in one),
    )


def shapes_repeat(profile: Profile, ranks: Sequence[int]) -> bool | None:
    """Whether every step after a rank's first runs only operator shapes that first step ran.

    Over up to ``PEER_SAMPLE`` of ``ranks``: the (op type, input shapes) pairs of the compute
    kernels (``kernel_details.csv`` Input Shapes / DB TASK) in the rank's first captured step,
    against those of its later steps. True when no later step launches a pair first seen there (no
    operator is built for a new shape in the steady state); ``None`` without input shapes or with
    fewer than two steps.
    """
    k = _compute_kernels(profile, _sample([int(r) for r in ranks]))
    if k.empty or not k["input_shapes"].astype(bool).any():
        return None
    k = k[k["step"] >= 0]
    if k["step"].nunique() < 2:
        return None
    pair = k["op_type"].astype(str) + "|" + k["input_shapes"].astype(str)
    first = k.groupby("rank")["step"].transform("min")
    for _r, g in k.assign(pair=pair, first=first).groupby("rank"):
        seen = set(g.loc[g["step"] == g["first"], "pair"])
        if not set(g.loc[g["step"] != g["first"], "pair"]) <= seen:
            return False
    return True


def recompute(profile: Profile, ranks: Sequence[int]) -> Recompute | None:
    """The forward re-run of each step (``None`` below ``RECOMPUTE_MIN_SHARE`` or without markers)."""
    f = _passes(profile, ranks)
    if f is None:
        return None
    unit = ["step", "rank"]
    grad_of = {t: t + "grad" for t in set(f.loc[f["fwd"], "op"])}
    grad_of.update({t: t + "backward" for t in grad_of if t + "grad" not in set(f["op"])})
    fw = f[f["fwd"]].groupby(unit).size()
    gr = f[f["bw"] & f["op"].isin(set(grad_of.values()))].groupby(unit).size()
    gr = gr.reindex(fw.index, fill_value=0)
    extra = (fw - gr).clip(lower=0)
    share = (extra / gr.where(gr > 0)).dropna()
    if share.empty or float(share.median()) < RECOMPUTE_MIN_SHARE:
        return None
    # on (nearly) every rank sampled: a pipeline stage that recomputes is a stage's cause
    by_rank = share.groupby(level="rank").median()
    if float((by_rank >= RECOMPUTE_MIN_SHARE).mean()) < RECOMPUTE_RANK_SHARE:
        return None
    coll = f["op"].str.startswith(("hcom", "hccl"))
    pre = f[(f["pass"] == 0) & ~f["bw"] & ~coll]
    per_launch = (pre.groupby(unit)["dur"].sum() / pre[pre["fwd"]].groupby(unit).size()).dropna()
    est = (extra * per_launch.reindex(extra.index)).dropna()
    n_units = max(len(fw), 1)
    cnt = f.loc[f["fwd"], "op"].value_counts() / n_units
    grad = f.loc[f["bw"], "op"].value_counts() / n_units
    # the re-run operator to name: the highest launch ratio to its gradient, then the most device time
    busy = f[f["fwd"]].groupby("op")["dur"].sum()
    ratio = {
        o: round(float(c) / max(float(grad.get(grad_of[o], 0.0)), 1e-9), 1) for o, c in cnt.items()
    }
    op = max(ratio, key=lambda o: (min(ratio[o], 1e6), float(busy.get(o, 0.0))))
    return Recompute(
        forward_share=float(share.median()),
        recompute_us=float(est.median()) if len(est) else math.nan,
        op=str(f.loc[f["op"] == op, "op_type"].iloc[0]),
        op_per_step=float(cnt[op]),
        grad_per_step=float(grad.get(grad_of[op], 0.0)),
    )


@dataclass(frozen=True)
class NewShapeIdle:
    """Device idle before operators launched with input shapes first seen in some steps.

    Attributes:
        steps: The steps where kernels of a first-seen (operator type, input shapes) start.
        ops: Their operator types, most idle first.
        shapes: Example input shapes first seen there (``input_shapes`` as written).
        kernels_per_step: Kernels with a first-seen shape per hit step and rank (median).
        idle_us: Device idle (Wait Time) right before those kernels per hit step and rank (median).
        idle_share: Of all the Wait Time of the hit steps.
        reused_steps: Later steps that run the same shapes again without that idle.
    """

    steps: tuple[int, ...]
    ops: tuple[str, ...]
    shapes: tuple[str, ...]
    kernels_per_step: float
    idle_us: float
    idle_share: float
    reused_steps: tuple[int, ...]


#: New shapes explain a step's idle when the idle right before their kernels holds this share.
NEW_SHAPE_IDLE_SHARE = 0.5


def new_shape_idle(
    profile: Profile, ranks: Sequence[int], steps: Sequence[int]
) -> NewShapeIdle | None:
    """Whether the idle of ``steps`` sits before kernels whose input shapes are new there.

    Reads the kernels (``kernels_for``: op_type, input_shapes, step, Wait Time) of up to
    ``PEER_SAMPLE`` of ``ranks``. A kernel is *new* when its (op_type, input_shapes) did not run
    in any earlier step of its rank (the first captured step is the baseline, not counted). The
    device idle right before new kernels (their Wait Time) in ``steps`` must hold
    ≥ ``NEW_SHAPE_IDLE_SHARE`` of those steps' Wait Time: the host spent it launching operators
    it had to build for a shape it had not seen (online compilation). ``None`` otherwise.
    """
    rs = _sample([int(r) for r in ranks])
    if not rs or not steps:
        return None
    k = profile.kernels_for(rs)
    need = {"rank", "step", "op_type", "input_shapes", "wait_us", "start_us"}
    if k.empty or not need <= set(k.columns):
        return None
    k = k[list(need)].dropna(subset=["step"]).copy()
    k = k[k["step"] >= 0].sort_values(["rank", "start_us"], kind="stable")
    if k.empty:
        return None
    k["wait_us"] = pd.to_numeric(k["wait_us"], errors="coerce").fillna(0.0).clip(lower=0.0)
    key = k["op_type"].astype(str) + "|" + k["input_shapes"].astype(str)
    first_step = k.groupby([k["rank"], key])["step"].transform("min")
    base = k.groupby("rank")["step"].transform("min")
    new = (first_step == k["step"]) & (k["step"] > base)
    hit = k["step"].isin([int(s) for s in steps])
    by_unit = k[hit].groupby(["step", "rank"])["wait_us"].sum()
    new_units = k[hit & new].groupby(["step", "rank"])
    idle = new_units["wait_us"].sum().reindex(by_unit.index).fillna(0.0)
    total = float(by_unit.sum())
    if total <= 0 or float(idle.sum()) < NEW_SHAPE_IDLE_SHARE * total:
        return None
    sel = k[hit & new]
    ops = sel.groupby("op_type")["wait_us"].sum().sort_values(ascending=False)
    shapes = sel.loc[sel["op_type"] == ops.index[0], "input_shapes"].astype(str)
    # later steps that run the new shapes again (their compiled operators reused)
    later = k[~hit & (k["step"] > min(int(s) for s in steps))]
    reused = sorted(
        int(s) for s in later.loc[key[later.index].isin(set(key[sel.index])), "step"].unique()
    )
    hit_steps = tuple(sorted(int(s) for s in sel["step"].unique()))
    return NewShapeIdle(
        steps=hit_steps,
        ops=tuple(str(o) for o in ops.index[:3]),
        shapes=tuple(dict.fromkeys(shapes.tolist()))[:2],
        kernels_per_step=float(new_units.size().median()),
        idle_us=float(idle.median()),
        idle_share=float(idle.sum()) / total,
        reused_steps=tuple(reused),
    )


@dataclass(frozen=True)
class SyncSpot:
    """Where in the step the device idles after a host synchronize call.

    Attributes:
        position: ``after_forward`` (after the last forward marker, before the first backward
            one), ``after_backward`` (after the last backward marker: before the optimizer),
            ``forward``, ``backward``, or ``step`` (no forward/backward markers).
        op_type: The operator type of the kernel the device runs next.
        idle_us: Median device idle from the previous kernel's end to that kernel's start (µs).
        api: The synchronize call (``AscendCL@aclrtSynchronizeStream``, ...).
    """

    position: str
    op_type: str
    idle_us: float
    api: str


@dataclass(frozen=True)
class SyncStalls:
    """Device idle right after the host's synchronize calls (``tensor.item()``, ``.cpu()``, ...).

    Attributes:
        calls_per_step: Synchronize calls per step and rank followed by such an idle (median).
        all_calls_per_step: Every synchronize call per step and rank inside the captured steps
            (median over ranks of calls / steps), followed by an idle or not.
        idle_us: Device idle after them per step and rank (median over (step, rank)), µs.
        held_us: Device idle while the host is inside the calls, per step and rank (median over
            the (step, rank) pairs with a call), µs: a blocking copy holds it, a synchronize
            (which waits for busy devices) hardly any.
        share_of_idle: Of all device idle between kernels in those steps (the gaps' sum).
        compute_idle_us: What the calls hold back per step and rank (median over (step, rank)),
            µs: inside a forward / backward pass the compute stream's whole wait before the next
            computation, also the part that falls while a collective runs (the step trace counts
            it as Communication; without the call that computation would run under it); at a
            pass boundary only ``idle_us``'s part (the next computation needs the collective).
        spots: One entry per place in the step, in step order.
        ranks: Ranks examined.
        waited_for: Operator types of the last compute kernel started before each call (what
            the host waits to read), most frequent first.
    """

    calls_per_step: float
    all_calls_per_step: float
    idle_us: float
    held_us: float
    share_of_idle: float
    spots: tuple[SyncSpot, ...]
    ranks: tuple[int, ...]
    waited_for: tuple[str, ...] = ()
    compute_idle_us: float = 0.0


def is_copy(api: str) -> bool:
    """Whether a blocking host call (:data:`BLOCKING_CALL`) is a copy, not a synchronize."""
    return "memcpy" in api.lower()


@dataclass(frozen=True)
class SyncCalls:
    """How often the hosts of some ranks call a stream / device synchronize, per step.

    Attributes:
        api: The synchronize call made most (``AscendCL@aclrtSynchronizeStream``, ...).
        per_step: Calls per (step, rank) of the ranks asked (median).
        peer_per_step: Calls per (step, rank) of their peers (median; 0 when they make none).
    """

    api: str
    per_step: float
    peer_per_step: float


def sync_calls(profile: Profile, ranks: Sequence[int], peers: Sequence[int]) -> SyncCalls | None:
    """Synchronize calls of ``ranks``' hosts per step against their peers' (``host_dispatch``).

    Rows whose ``api_name`` holds ``Synchronize`` (trace_view.json CANN rows / DB CANN_API), counted
    per (step, rank) over the (step, rank) pairs with any host row, the median taken; peers sampled
    (``PEER_SAMPLE``). ``None`` without host rows for both sides, or when ``ranks`` make none.
    """
    c_ranks = sorted({int(r) for r in ranks})
    p_ranks = _sample([int(p) for p in peers if int(p) not in set(c_ranks)])
    if not c_ranks or not p_ranks:
        return None
    hd = profile.host_dispatch_for([*c_ranks, *p_ranks])
    if hd.empty or not {"api_name", "rank", "step"} <= set(hd.columns):
        return None
    names = hd["api_name"].astype("string").fillna("")
    is_sync = names.str.contains(BLOCKING_CALL).to_numpy(dtype=bool)

    def rate(rs: list[int]) -> tuple[float, int]:
        mine = hd["rank"].isin(rs).to_numpy(dtype=bool)
        counts = (
            pd.Series(is_sync[mine])
            .groupby([hd["rank"].to_numpy()[mine], hd["step"].to_numpy()[mine]])
            .sum()
        )
        # the median (step, rank): a step the capture cut short does not lower the count
        return (float(counts.median()), len(counts)) if len(counts) else (math.nan, 0)

    c_rate, c_units = rate(c_ranks)
    p_rate, p_units = rate(p_ranks)
    if not c_units or not p_units or not c_rate > 0:
        return None
    api = str(names[is_sync & hd["rank"].isin(c_ranks).to_numpy(dtype=bool)].mode().iloc[0])
    return SyncCalls(api, c_rate, p_rate)


@dataclass(frozen=True)
class LaunchApi:
    """The host API most of the host's launch time goes to (``host_dispatch``).

    Attributes:
        api: Its name (``AscendCL@aclopCompileAndExecute``, ``AscendCL@aclnnMatmul`` ...).
        share: Its share of the host's launch-call time (sum of ``api_duration_us``).
        per_step: Its calls per (step, rank) (median).
        launches_per_step: All launch calls per (step, rank) (median).
        median_us: Its median call duration, µs.
    """

    api: str
    share: float
    per_step: float
    launches_per_step: float
    median_us: float


def top_launch_api(profile: Profile, ranks: Sequence[int]) -> LaunchApi | None:
    """The launch API that takes the largest share of the host's launch time (sampled ranks).

    Over up to ``PEER_SAMPLE`` of ``ranks``, from ``host_dispatch`` (trace_view.json CANN rows with a HostToDevice flow / DB CANN_API):
    per ``api_name``, the sum of ``api_duration_us`` over the sum for every launch call
    (synchronize calls excluded). ``None`` without call durations.
    """
    rs = _sample([int(r) for r in ranks])
    hd = profile.host_dispatch_for(rs) if rs else pd.DataFrame()
    if hd.empty or not {"api_name", "api_duration_us", "rank", "step"} <= set(hd.columns):
        return None
    names = hd["api_name"].astype("string").fillna("")
    dur = pd.to_numeric(hd["api_duration_us"], errors="coerce")
    keep = (~names.str.contains(HOST_CALL) & dur.notna()).to_numpy(dtype=bool)
    if not keep.any():
        return None
    t = pd.DataFrame(
        {
            "api": names[keep].to_numpy(),
            "dur": dur[keep].to_numpy(dtype="float64"),
            "rank": hd["rank"].to_numpy()[keep],
            "step": hd["step"].to_numpy()[keep],
        }
    )
    total = float(t["dur"].sum())
    if not total > 0:
        return None
    by = t.groupby("api")["dur"].agg(["sum", "median"]).sort_values("sum", ascending=False)
    api = str(by.index[0])
    top = t[t["api"] == api]
    return LaunchApi(
        api,
        float(by["sum"].iloc[0]) / total,
        float(top.groupby(["rank", "step"]).size().median()),
        float(t.groupby(["rank", "step"]).size().median()),
        float(by["median"].iloc[0]),
    )


#: Launches of one operator with the same other inputs and at least this many different leading
#: dimensions of their first input in a step are a loop over chunks of rows (experts, sequences).
LOOP_MIN_CHUNKS = 4
#: Operator types of a mixture-of-experts layer (routing, token permutation, expert all-to-all).
MOE_OPS = re.compile(r"moe|gating|alltoall", re.I)


@dataclass(frozen=True)
class LaunchLoop:
    """Launches of one operator, one per chunk of rows, that a grouped kernel would make one.

    Attributes:
        op_type: The operator type looped over.
        per_step: Its looped launches per (step, rank) (median).
        launches_per_step: All its launches per (step, rank) (median).
        chunks: Different row counts per (step, rank, weights) (median): the chunks per pass.
        rows_min, rows_max: The smallest and largest row count, over the units read.
    """

    op_type: str
    per_step: float
    launches_per_step: float
    chunks: float
    rows_min: int
    rows_max: int


def _looped(shapes: Sequence[str]) -> tuple[list[int], int, set[int]]:
    """Positions of the launches (one operator, one step) that loop over chunks of rows.

    A value of a launch's input shapes masked wherever it appears ("R,2048;2816,2048",
    "2048,R;R,1408") is its pattern; a pattern that takes ≥ ``LOOP_MIN_CHUNKS`` values over the
    launches is a loop over chunks of that many rows. Returns (looped launch positions, the
    largest number of chunks of a pattern, the row counts).
    """
    by_key: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, sh in enumerate(shapes):
        parts = re.split(r"(\d+)", sh)
        for v in set(parts[1::2]):
            key = "".join("*" if j % 2 == 1 and x == v else x for j, x in enumerate(parts))
            by_key[key][v].append(i)
    members: set[int] = set()
    rows: set[int] = set()
    most = 0
    for vals in by_key.values():
        if len(vals) >= LOOP_MIN_CHUNKS:
            most = max(most, len(vals))
            rows.update(int(v) for v in vals)
            for idx in vals.values():
                members.update(idx)
    return sorted(members), most, rows


def launch_loop(
    profile: Profile, ranks: Sequence[int], op_types: Sequence[str]
) -> LaunchLoop | None:
    """Whether launches of ``op_types`` are a loop over the experts' tokens (sampled ranks).

    From ``kernels`` (``kernel_details.csv`` Input Shapes) of a job that runs mixture-of-experts
    operators (routing, token permutation, all-to-all): per (step, rank), the launches of one
    operator type whose input shapes differ only in one value (wherever it appears) that takes
    ≥ ``LOOP_MIN_CHUNKS`` values are one launch per chunk of rows, the experts' tokens: the
    experts run one after another in a loop instead of one grouped kernel. ``None`` without input
    shapes, without MoE operators or without such launches.
    """
    rs = _sample([int(r) for r in ranks])
    k = _compute_kernels(profile, rs)
    if k.empty or "input_shapes" not in k.columns or not op_types:
        return None
    moe = bool(k["op_type"].astype(str).str.contains(MOE_OPS).any())
    if not moe:
        ops = profile.get("comm_ops")
        moe = bool(not ops.empty and ops["op_type"].astype(str).str.contains("alltoall").any())
    if not moe:
        return None
    k = k[k["op_type"].isin(list(op_types)) & (k["step"] >= 0)]
    k = k.assign(shapes=k["input_shapes"].astype("string").fillna("").str.strip('"'))
    best: tuple[str, list[int], list[int], list[int], set[int]] | None = None
    for op, sub in k.groupby("op_type"):
        looped: list[int] = []
        totals: list[int] = []
        chunks: list[int] = []
        rows: set[int] = set()
        for _, unit in sub.groupby(["rank", "step"]):
            pos, most, vals = _looped(unit["shapes"].tolist())
            looped.append(len(pos))
            totals.append(len(unit))
            chunks.append(most)
            rows |= vals
        if rows and (best is None or np.median(looped) > np.median(best[1])):
            best = (str(op), looped, totals, chunks, rows)
    if best is None or np.median(best[1]) < LOOP_MIN_CHUNKS:
        return None
    op, looped, totals, chunks, rows = best
    return LaunchLoop(
        op_type=op,
        per_step=float(np.median(looped)),
        launches_per_step=float(np.median(totals)),
        chunks=float(np.median(chunks)),
        rows_min=min(rows),
        rows_max=max(rows),
    )


#: A drop of the caching allocator's reserved memory counts as a cache release when it is at
#: least this many MB ...
CACHE_RELEASE_MIN_MB = 256.0
#: ... and at least this share of the rank's largest reservation.
CACHE_RELEASE_MIN_SHARE = 0.02


@dataclass(frozen=True)
class MemoryChurn:
    """A rank's caching allocator releasing its reserved memory in every step, unlike its peers.

    Attributes:
        releases_per_step: Drops of reserved memory per step (mean over the rank's steps).
        release_mb_median: Their median size, MB.
        reserved_max_mb: The rank's largest reservation, MB.
        peer_reserved_max_mb: The peers' (median of their largest), MB.
        allocated_peak_mb: The rank's peak of allocated memory, MB.
        peer_allocated_peak_mb: The peers' (median of their peaks), MB.
        peer_releases_per_step: The peers' releases per step (median).
        component: The memory_record component read (``PTA`` ...).
    """

    releases_per_step: float
    release_mb_median: float
    reserved_max_mb: float
    peer_reserved_max_mb: float
    allocated_peak_mb: float
    peer_allocated_peak_mb: float
    peer_releases_per_step: float
    component: str

    @property
    def fragmented(self) -> bool:
        """It allocates what its peers do but has reserved ≥ 10% more (fragmented segments).

        Its free cached blocks are too small to reuse, so it grows to the card's limit, then
        frees its cache and allocates again.
        """
        return self.reserved_max_mb >= 1.1 * self.peer_reserved_max_mb and abs(
            self.allocated_peak_mb - self.peer_allocated_peak_mb
        ) <= 0.03 * max(self.peer_allocated_peak_mb, 1.0)

    @property
    def capped(self) -> bool:
        """The rank needs what its peers need but cannot reserve as much (less free HBM)."""
        return self.reserved_max_mb < 0.97 * self.peer_reserved_max_mb and abs(
            self.allocated_peak_mb - self.peer_allocated_peak_mb
        ) <= 0.03 * max(self.peer_allocated_peak_mb, 1.0)


def memory_churn(
    profile: Profile, ranks: Sequence[int], peers: Sequence[int]
) -> MemoryChurn | None:
    """Whether ``ranks``' caching allocator releases its reserved memory every step, unlike peers.

    From ``memory`` (memory_record.csv / DB MEMORY_RECORD), the framework allocator's component
    (``PTA``, else ``PTA+GE``, else ``GE``): per rank, the drops of ``reserved_mb`` of at least
    ``CACHE_RELEASE_MIN_MB`` and ``CACHE_RELEASE_MIN_SHARE`` of its largest reservation (each is
    a cache release: ``empty_cache`` or the allocator freeing its cache to retry an allocation,
    which synchronizes the device), per step of the rank (``step_trace``); the largest
    reservation and the allocated peak against the peers'. ``None`` without memory records or
    when the ranks release less than once every two steps or the peers as often.
    """
    m = profile.get("memory")
    if m.empty or not {"rank", "timestamp_us", "reserved_mb", "allocated_mb"} <= set(m.columns):
        return None
    comp = m["component"].astype("string").fillna("") if "component" in m.columns else None
    name = ""
    if comp is not None:
        name = next((c for c in ("PTA", "PTA+GE", "GE") if (comp == c).any()), "")
        if name:
            m = m[(comp == name).to_numpy(dtype=bool)]
    st = profile.get("step_trace")
    steps = st.groupby("rank")["step"].nunique() if not st.empty else pd.Series(dtype="float64")

    def per_rank(r: int) -> tuple[float, float, float, float] | None:
        x = m[m["rank"] == r].sort_values("timestamp_us")
        x = x[x["reserved_mb"].notna() & x["allocated_mb"].notna()]
        if len(x) < 3:
            return None
        res = x["reserved_mb"].to_numpy(float)
        top = float(res.max())
        d = np.diff(res)
        drops = d[d <= -max(CACHE_RELEASE_MIN_MB, CACHE_RELEASE_MIN_SHARE * top)]
        n = float(steps.get(r, 1) or 1)
        size = float(np.median(-drops)) if len(drops) else 0.0
        return len(drops) / n, size, top, float(x["allocated_mb"].max())

    mine = [v for v in (per_rank(int(r)) for r in ranks) if v is not None]
    theirs = [
        v
        for v in (per_rank(int(r)) for r in _sample([int(p) for p in peers if p not in ranks]))
        if v is not None
    ]
    if not mine or not theirs:
        return None
    rel = float(np.mean([v[0] for v in mine]))
    peer_rel = float(np.median([v[0] for v in theirs]))
    if rel < 0.5 or peer_rel > 0.2 * rel:
        return None
    return MemoryChurn(
        releases_per_step=rel,
        release_mb_median=float(np.median([v[1] for v in mine if v[1] > 0] or [0.0])),
        reserved_max_mb=float(np.mean([v[2] for v in mine])),
        peer_reserved_max_mb=float(np.median([v[2] for v in theirs])),
        allocated_peak_mb=float(np.mean([v[3] for v in mine])),
        peer_allocated_peak_mb=float(np.median([v[3] for v in theirs])),
        peer_releases_per_step=peer_rel,
        component=name,
    )


#: A launch call is slow when it takes at least this many times the peers' median call ...
SLOW_CALL_RATIO = 10.0
#: ... and at least this long (µs).
SLOW_CALL_MIN_US = 100.0


@dataclass(frozen=True)
class SlowCalls:
    """Launch calls that take the host far longer on some ranks than on their peers.

    Attributes:
        per_step: Slow calls per (step, rank) on the ranks (median).
        median_us: Their median duration, µs.
        usual_us: The ranks' other launch calls' median duration, µs.
        peer_us: The peers' median launch call, µs.
        peer_per_step: Calls as slow per (step, rank) on the peers (median).
        in_comm_share: Share of the slow calls made while a collective of the same rank ran on
            the device (its communication kernels' [start, end]); NaN without kernel times.
        apis: The APIs of the slow calls, most frequent first.
    """

    per_step: float
    median_us: float
    usual_us: float
    peer_us: float
    peer_per_step: float
    in_comm_share: float
    apis: tuple[str, ...]


def slow_launch_calls(
    profile: Profile, ranks: Sequence[int], peers: Sequence[int]
) -> SlowCalls | None:
    """Launch calls that take the host ≥ ``SLOW_CALL_RATIO`` x the peers' median on ``ranks``.

    From ``host_dispatch`` (trace_view.json CANN rows with a HostToDevice flow / DB CANN_API):
    ``api_duration_us`` of every launch call (synchronize calls excluded) on ``ranks`` against up
    to ``PEER_SAMPLE`` of ``peers``. A call the host spends far longer in than the same job's
    peers, when the device work is the same, is CPU time taken from the training process
    (interrupts, other processes on its cores). ``None`` without call durations, or when the
    ranks have under one slow call per step or the peers have as many.
    """
    rs = [int(r) for r in ranks]
    ps = _sample([int(r) for r in peers if int(r) not in rs])
    if not rs or not ps:
        return None
    hd = profile.host_dispatch_for([*rs, *ps])
    if hd.empty or not {"api_name", "api_duration_us", "rank", "step"} <= set(hd.columns):
        return None
    names = hd["api_name"].astype("string").fillna("")
    dur = pd.to_numeric(hd["api_duration_us"], errors="coerce")
    hd = hd[(~names.str.contains(HOST_CALL) & dur.notna()).to_numpy(dtype=bool)]
    mine = hd[hd["rank"].isin(rs)]
    theirs = hd[hd["rank"].isin(ps)]
    if mine.empty or theirs.empty:
        return None
    peer_us = float(theirs["api_duration_us"].median())
    thr = max(SLOW_CALL_RATIO * peer_us, SLOW_CALL_MIN_US)

    def per_step(t: pd.DataFrame) -> float:
        n = t.groupby(["rank", "step"]).size()
        slow = t[t["api_duration_us"] >= thr].groupby(["rank", "step"]).size()
        return float(slow.reindex(n.index, fill_value=0).median())

    mine_ps, peer_ps = per_step(mine), per_step(theirs)
    if mine_ps < 1.0 or peer_ps > 0.2 * mine_ps:
        return None
    slow = mine[mine["api_duration_us"] >= thr]
    usual = mine[mine["api_duration_us"] < thr]
    share = float("nan")
    k = profile.kernels_for(rs)
    if not k.empty and "host_start_us" in slow.columns:
        comm = k[is_comm_kernel(k).to_numpy()]
        hits = 0
        for r, calls in slow.groupby("rank"):
            c = comm[comm["rank"] == r].sort_values("start_us")
            if c.empty:
                continue
            starts = c["start_us"].to_numpy(float)
            ends = starts + c["duration_us"].to_numpy(float)
            t = calls["host_start_us"].to_numpy(float)
            i = np.searchsorted(starts, t, side="right") - 1
            ok = i >= 0
            hits += int(np.sum(ok & (t <= ends[np.clip(i, 0, None)])))
        share = hits / len(slow) if len(slow) else float("nan")
    apis = tuple(str(a) for a in slow["api_name"].value_counts().index[:3])
    return SlowCalls(
        per_step=mine_ps,
        median_us=float(slow["api_duration_us"].median()),
        usual_us=float(usual["api_duration_us"].median()) if not usual.empty else float("nan"),
        peer_us=peer_us,
        peer_per_step=peer_ps,
        in_comm_share=share,
        apis=apis,
    )


#: A synchronize call is a stall when the device idles at least this long after it (µs): a
#: call that returns into a queue the host keeps fed costs nothing.
SYNC_IDLE_MIN_US = 200.0


def sync_stalls(profile: Profile, ranks: Sequence[int]) -> SyncStalls | None:
    """The device idle that follows the host's synchronize calls, per step and rank.

    Reads ``host_dispatch`` (the synchronize rows: ``api_name`` with ``Synchronize``, their
    ``host_start_us`` and ``api_duration_us``) and the kernels (``kernels_for``) of up to
    ``PEER_SAMPLE`` of ``ranks``. After a call returns the host runs Python before its next
    launch; the device, drained by the call, idles from the end of its last task (a collective
    included) to the next task's start. A call counts when that idle is ≥ ``SYNC_IDLE_MIN_US``. Positions come from
    the forward / backward markers of :func:`_passes`. ``None`` without synchronize rows, or
    when no call is followed by such an idle.
    """
    rs = _sample([int(r) for r in ranks])
    if not rs:
        return None
    hd = profile.host_dispatch_for(rs)
    if hd.empty or "api_duration_us" not in hd.columns:
        return None
    sy = hd[hd["api_name"].astype("string").fillna("").str.contains(BLOCKING_CALL)]
    sy = sy[pd.to_numeric(sy["api_duration_us"], errors="coerce").notna()]
    if sy.empty:
        return None
    f = _passes(profile, rs)
    k = f
    if k is None:
        kk = profile.kernels_for(rs)
        if kk.empty or "start_us" not in kk.columns:
            return None
        k = pd.DataFrame(
            {
                "rank": kk["rank"].to_numpy(),
                "step": kk["step"].fillna(-1).to_numpy(),
                "start": pd.to_numeric(kk["start_us"], errors="coerce").to_numpy(),
                "dur": pd.to_numeric(kk["duration_us"], errors="coerce").to_numpy(),
                "op_type": kk["op_type"].astype("string").fillna("").to_numpy(),
                "fwd": False,
                "bw": False,
            }
        )
        k = k[k["step"] >= 0].sort_values(["rank", "step", "start"], kind="stable")
    # every device task counts as busy (a collective too): the idle is time with none running
    k = k.dropna(subset=["start", "dur"])
    if k.empty:
        return None
    rows: list[tuple[int, int, float, str, str, str]] = []
    gaps_total: dict[tuple[int, int], float] = {}
    waited: list[str] = []
    all_calls: list[float] = []
    held: dict[tuple[int, int], float] = {}
    c_idle: dict[tuple[int, int], float] = {}
    for r, g in k.groupby("rank", sort=False):
        g = g.sort_values("start", kind="stable")
        start = g["start"].to_numpy(dtype="float64")
        end = start + g["dur"].to_numpy(dtype="float64")
        prev_end = np.maximum.accumulate(np.concatenate([[-np.inf], end[:-1]]))
        gap = np.where(np.isfinite(prev_end), np.clip(start - prev_end, 0.0, None), 0.0)
        steps_r = g["step"].to_numpy()
        rank = int(cast(Any, r))
        for s_, gsum in pd.Series(gap).groupby(steps_r).sum().items():
            gaps_total[(int(cast(Any, s_)), rank)] = float(gsum)
        fwd = g["fwd"].to_numpy(dtype=bool)
        bw = g["bw"].to_numpy(dtype=bool)
        calls = sy[sy["rank"] == r]
        done = (
            pd.to_numeric(calls["host_start_us"], errors="coerce")
            + pd.to_numeric(calls["api_duration_us"], errors="coerce")
        ).to_numpy(dtype="float64")
        names = calls["api_name"].astype(str).to_numpy()

        def steps_of(
            t: np.ndarray, starts: np.ndarray = start, st: np.ndarray = steps_r
        ) -> np.ndarray:
            """The step of the next device task after each time (-1 past the last)."""
            i = np.searchsorted(starts, t, side="left")
            return np.where(i < len(starts), st[np.minimum(i, len(starts) - 1)], -1)

        # every call the host makes inside the captured steps, followed by an idle or not
        n_steps_r = len(set(steps_r.tolist()))
        inside = (done >= start[0]) & (done <= end.max())
        all_calls.append(float(inside.sum()) / max(n_steps_r, 1))
        # the next computation after the call returns (a collective still running is not the
        # host's next launch): the idle before it is time with no task running at all
        compute = np.flatnonzero(
            ~g["op_type"].astype(str).str.lower().str.startswith(("hcom", "hccl")).to_numpy()
        )
        # the compute stream's own idle before each compute task (a collective running then
        # does not fill it: the computation it delays could have run under that collective)
        c_end = np.maximum.accumulate(end[compute])
        c_gap = np.zeros(len(start))
        c_gap[compute[1:]] = np.clip(start[compute[1:]] - c_end[:-1], 0.0, None)
        pos = np.searchsorted(start[compute], done, side="right")
        called = pd.to_numeric(calls["host_start_us"], errors="coerce").to_numpy(dtype="float64")
        before = np.searchsorted(start[compute], called, side="right") - 1
        waited += [str(g["op_type"].iloc[int(compute[b])]) for b in before if 0 <= b < len(compute)]
        # device idle while the host is inside the call (a blocking copy from pageable memory
        # runs while the device has nothing queued): the gaps' overlap with the call
        for a, b, st_ in zip(called, done, steps_of(called), strict=True):
            if not (np.isfinite(a) and np.isfinite(b)) or st_ < 0:
                continue
            j0 = int(np.searchsorted(start, a, side="right"))
            j1 = int(np.searchsorted(start, b, side="right"))
            jj = np.arange(j0, min(j1 + 1, len(start)))
            lo = np.maximum(prev_end[jj], a)
            hi = np.minimum(start[jj], b)
            held[(int(st_), rank)] = held.get((int(st_), rank), 0.0) + float(
                np.clip(hi - lo, 0.0, None).sum()
            )
        # one idle per kernel: several calls before the same kernel (a synchronize, then a copy)
        # share its idle, which goes to the last of them
        by_kernel: dict[int, tuple[int, int, float, str, str, str]] = {}
        waited_on: set[int] = set()
        for p_, api in zip(pos, names, strict=True):
            if p_ >= len(compute):
                continue
            j = int(compute[p_])
            if j <= 0:
                continue
            st = int(steps_r[j])
            in_step = steps_r == st
            where = "step"
            if (fwd & in_step).any() and (bw & in_step).any():
                last_f = start[fwd & in_step].max()
                first_b = start[bw & in_step].min()
                last_b = start[bw & in_step].max()
                if start[j] > last_b:
                    where = "after_backward"
                elif last_f < start[j] <= first_b:
                    where = "after_forward"
                elif start[j] <= last_f:
                    where = "forward"
                else:
                    where = "backward"
            # inside a pass the collectives running then could overlap the computation the call
            # holds back (gradient buckets); at a pass boundary the next computation needs them
            inside = where in ("forward", "backward")
            wait = float(c_gap[j]) if inside else float(gap[j])
            # (once per kernel: calls before the same kernel share its wait)
            if wait >= SYNC_IDLE_MIN_US and j not in waited_on:
                waited_on.add(j)
                c_idle[(st, rank)] = c_idle.get((st, rank), 0.0) + wait
            if gap[j] < SYNC_IDLE_MIN_US:
                continue
            by_kernel[j] = (st, rank, float(gap[j]), where, str(g["op_type"].iloc[j]), api)
        rows += by_kernel.values()
    if not rows:
        return None
    waited_for = tuple(str(x) for x in pd.Series(waited).value_counts().index[:3]) if waited else ()
    t = pd.DataFrame(rows, columns=["step", "rank", "idle", "where", "op", "api"])
    per_unit = t.groupby(["step", "rank"])["idle"].agg(["sum", "size"])
    total = sum(gaps_total.get(u, 0.0) for u in per_unit.index)
    order = {"forward": 0, "after_forward": 1, "backward": 2, "after_backward": 3, "step": 4}
    spots = []
    for key, g in sorted(
        t.groupby(["where", "op", "api"]), key=lambda x: order.get(str(x[0][0]), 9)
    ):
        where_, op_, api_ = (str(x) for x in key)
        spots.append(SyncSpot(where_, op_, float(g["idle"].median()), api_))
    return SyncStalls(
        calls_per_step=float(per_unit["size"].median()),
        all_calls_per_step=float(np.median(all_calls)) if all_calls else math.nan,
        held_us=float(np.median(list(held.values()))) if held else 0.0,
        idle_us=float(per_unit["sum"].median()),
        # per (step, rank) read: the median where most of them hold such waits, else their
        # mean over every pair read (waits in a few steps only, per captured step)
        compute_idle_us=(
            float(np.median(list(c_idle.values())))
            if c_idle and 2 * len(c_idle) >= len(gaps_total)
            else float(sum(c_idle.values())) / max(len(gaps_total), 1)
        ),
        share_of_idle=float(per_unit["sum"].sum()) / total if total > 0 else math.nan,
        spots=tuple(spots),
        ranks=tuple(rs),
        waited_for=waited_for,
    )


#: A collective holds the communication when one instance per step takes at least this share of
#: its group's communication time on a rank (Elapse Time, median over (step, rank))...
DOMINANT_MIN_SHARE = 0.25
#: ... and at least this many times the median instance of its group.
DOMINANT_MIN_RATIO = 4.0
#: ... and at least this share of the rank's whole communication time (every group's).
DOMINANT_MIN_TOTAL_SHARE = 0.1
#: Operators that compute a loss or a softmax over a vocabulary (the consumers of gathered logits).
LOSS_OPS = re.compile(r"crossentropy|softmax|logsoftmax|nllloss", re.I)


@dataclass(frozen=True)
class DominantCollective:
    """One collective per step that holds a large share of every rank's communication time.

    Source: ``comm_ops`` (communication.json Elapse Time per operator), ``comm_bandwidth`` (Transit
    Size per operator, MB summed over transports), ``kernels`` (the compute kernels right before
    and after it on a sample rank of the same step).

    Attributes:
        op_type: Collective type, lower case (``allgather``).
        group: Communication group (hash) it runs in.
        group_size: Ranks in that group (``comm_groups``; 0 when unknown).
        per_step: Instances of it per step and rank (median).
        elapse_us: Its Elapse Time per instance, µs (median over (step, rank)).
        share: ``elapse_us * per_step`` over the rank's communication time per step (median).
        size_mb: Its transit size per instance, MB (median; NaN without comm_bandwidth).
        others_max_mb: The largest median transit size of the group's other collectives, MB.
        others_us: The median Elapse Time of the group's other collectives, µs.
        producer: (op type, output shapes) of the last compute kernel before it, or ``None``.
        consumer: (op type, input shapes, input dtypes) of the first kernel after it, or ``None``.
        loss: (op type, input shapes, input dtypes, time µs) of a loss / softmax operator among
            the three kernels after it that reads a wider last dimension than the producer wrote
            (logits gathered over the vocabulary), or ``None``.
        loss_us: Time of the kernels from the collective's end to the loss operator's end, µs
            (the loss on the gathered tensor; 0 without ``loss``).
    """

    op_type: str
    group: str
    group_size: int
    per_step: float
    elapse_us: float
    share: float
    size_mb: float
    others_max_mb: float
    others_us: float
    producer: tuple[str, str] | None
    consumer: tuple[str, str, str] | None
    loss: tuple[str, str, str] | None
    loss_us: float


def _last_dim(shapes: str) -> int | None:
    """The last dimension of the first tensor of a CANN shapes string (``4096,64000;4096``)."""
    first = str(shapes).split(";")[0].strip().strip('"')
    try:
        return int(first.split(",")[-1])
    except ValueError:
        return None


def group_size(profile: Profile, group: str) -> int:
    """Ranks in communication group ``group`` (``comm_groups``), 0 when the profile does not say."""
    groups = profile.get("comm_groups")
    if not groups.empty and {"group", "ranks"} <= set(groups.columns):
        hit = groups[groups["group"].astype(str) == group]
        if len(hit) and isinstance(hit["ranks"].iloc[0], (list, tuple, np.ndarray)):
            return len(hit["ranks"].iloc[0])
    return 0


def dominant_collective(profile: Profile, ranks: Sequence[int]) -> DominantCollective | None:
    """The collective that holds the communication, if one per step does (see the class).

    Instances are matched across steps and ranks by (group, op type, position among that group's
    collectives of that type in the step). ``None`` without ``comm_ops``, or unless one instance
    takes ``DOMINANT_MIN_SHARE`` of its group's communication time (and
    ``DOMINANT_MIN_TOTAL_SHARE`` of the rank's) and ``DOMINANT_MIN_RATIO`` times the
    Elapse Time, the Transit Time and the transit size of its group's other collectives (a long
    wait inside a collective is not its own cost).
    """
    ops = profile.get("comm_ops")
    need = {"rank", "step", "group", "op_type", "op_name", "start_us", "elapse_ms"}
    if ops.empty or not need <= set(ops.columns):
        return None
    o = ops.dropna(subset=["step", "start_us", "elapse_ms"])
    o = o[o["rank"].isin(list(ranks))] if len(ranks) else o
    if o.empty:
        return None
    o = o.sort_values(["rank", "step", "start_us"]).assign(
        group=o["group"].astype(str), op_type=o["op_type"].astype(str).str.lower()
    )
    o = o.assign(pos=o.groupby(["rank", "step", "group", "op_type"]).cumcount())
    per_unit = o.groupby(["rank", "step"])["elapse_ms"].sum()
    comm_us = float(per_unit.median()) * 1000.0
    key = ["group", "op_type", "pos"]
    med = o.groupby(key)["elapse_ms"].median() * 1000.0
    if med.empty or comm_us <= 0:
        return None
    top = cast(tuple[str, str, int], med.idxmax())
    top_us = float(med.loc[top])
    g, t, _pos = top
    inst = o[(o["group"] == g) & (o["op_type"] == t) & (o["pos"] == top[2])]
    per_step = float(inst.groupby(["rank", "step"]).size().median())
    rest = o[(o["group"] == g) & ~((o["op_type"] == t) & (o["pos"] == top[2]))]
    others_us = float(rest["elapse_ms"].median()) * 1000.0 if not rest.empty else float("nan")
    share = top_us * per_step / comm_us
    # it holds its own group's communication (another group's traffic, e.g. the data-parallel
    # gradient reduction growing with the world size, does not make it less dominant there),
    # and a material part of the rank's
    in_group = o[o["group"] == g].groupby(["rank", "step"])["elapse_ms"].sum()
    group_us = float(in_group.median()) * 1000.0 if len(in_group) else comm_us
    share_group = top_us * per_step / group_us if group_us > 0 else share
    if (
        share_group < DOMINANT_MIN_SHARE
        or share < DOMINANT_MIN_TOTAL_SHARE
        or not (math.isfinite(others_us) and top_us >= DOMINANT_MIN_RATIO * others_us)
    ):
        return None
    # its own transfer, not a wait for a late peer inside it: the transit time dominates too
    if "transit_ms" in o.columns:
        tr = o.groupby(key)["transit_ms"].median()
        tr_rest = float(rest["transit_ms"].median())
        if not float(tr.loc[top]) >= DOMINANT_MIN_RATIO * tr_rest:
            return None
    size_mb = others_max = float("nan")
    bw = profile.get("comm_bandwidth")
    if not bw.empty and {"rank", "step", "op_name", "transit_size_mb"} <= set(bw.columns):
        mb = bw.groupby(["rank", "step", "op_name"])["transit_size_mb"].sum()
        sizes = o.join(mb.rename("mb"), on=["rank", "step", "op_name"])
        size_mb = float(sizes.loc[inst.index, "mb"].median())
        om = sizes.loc[rest.index].groupby(["op_type", "pos"])["mb"].median()
        others_max = float(om.max()) if len(om) else float("nan")
        if (
            not size_mb >= DOMINANT_MIN_RATIO * others_max
        ):  # it moves far more data, not only longer
            return None
    gs = group_size(profile, g)
    # the kernels around one instance on a sample rank: what writes the tensor, what reads it
    one = inst.iloc[0]
    r, st = int(one["rank"]), int(one["step"])
    t0 = float(one["start_us"])
    t1 = t0 + float(one["elapse_ms"]) * 1000.0
    k = _compute_kernels(profile, [r])
    producer = consumer = loss = None
    loss_us = 0.0
    if not k.empty and {"start_us", "duration_us", "step"} <= set(k.columns):
        k = k[k["step"] == st].sort_values("start_us")
        before = k[k["start_us"] + k["duration_us"] <= t0 + 1.0]
        after = k[k["start_us"] >= t1 - 1.0].head(3)
        out = "output_shapes" in k.columns
        if len(before):
            b = before.iloc[-1]
            producer = (str(b["op_type"]), str(b["output_shapes"]) if out else "")
        if len(after):
            a = after.iloc[0]
            consumer = (str(a["op_type"]), str(a["input_shapes"]), str(a["input_dtypes"]))
        wrote = _last_dim(producer[1]) if producer else None
        for i in range(len(after)):
            a = after.iloc[i]
            read = _last_dim(str(a["input_shapes"]))
            if LOSS_OPS.search(str(a["op_type"])) and read and wrote and read > wrote:
                loss = (str(a["op_type"]), str(a["input_shapes"]), str(a["input_dtypes"]))
                loss_us = float(a["start_us"] + a["duration_us"]) - t1
                break
    return DominantCollective(
        op_type=t,
        group=g,
        group_size=gs,
        per_step=per_step,
        elapse_us=top_us,
        share=share,
        size_mb=size_mb,
        others_max_mb=others_max,
        others_us=others_us,
        producer=producer,
        consumer=consumer,
        loss=loss,
        loss_us=loss_us,
    )


# ------------------------------------------------------------------ the same data moved again
#: A collective moving at least this much (MB per rank, median) several times per step with the
#: same size is a candidate for one tensor communicated again.
REPEAT_MIN_MB = 64.0
#: ... at most this many times per step (per-layer collectives of equal size are many per step).
REPEAT_MAX_PER_STEP = 4


@dataclass(frozen=True)
class RepeatedCollective:
    """One large collective of one size run several times per step in the same group.

    A weight used twice in a step (tied input / output embeddings) and kept sharded is gathered
    before each use; a tensor sent again moves the same bytes again. Only the size and the group
    are seen, not the tensor: the remedy says "if it is the same tensor".

    Attributes:
        op_type: Collective type (``comm_ops`` ``op_type``: allgather, broadcast, ...).
        group: Communication group (domain) hash.
        group_size: Ranks in the group (0 when ``comm_groups`` does not say).
        size_mb: Transit size per instance (``comm_bandwidth`` ``transit_size_mb``, SDMA excluded),
            MB, median.
        others_max_mb: The largest transit size of the group's other collectives, MB (NaN: none).
        per_step: Instances per step (median over (step, rank)).
        elapse_us: Elapse Time per instance (``comm_ops``), median, µs.
        share: Its time per step over the rank's communication time per step.
        consumers: The compute operator after each instance of one (step, rank), in order, as
            ``(op_type, input_shapes)`` (``kernel_details.csv`` order).
    """

    op_type: str
    group: str
    group_size: int
    size_mb: float
    others_max_mb: float
    per_step: float
    elapse_us: float
    share: float
    consumers: tuple[tuple[str, str], ...]


def repeated_collective(profile: Profile, ranks: Sequence[int]) -> RepeatedCollective | None:
    """The large collective run 2 to ``REPEAT_MAX_PER_STEP`` times per step with one size, if any.

    From ``comm_ops`` and ``comm_bandwidth`` of a rank sample: per (step, rank), the collectives of
    one (group, type, transit size rounded to 1 MB) of at least ``REPEAT_MIN_MB``; one taking at
    least ``DOMINANT_MIN_SHARE`` of the communication time, at least ``DOMINANT_MIN_RATIO`` times
    the size of the group's other collectives of its type, in at least 2 instances per step; a
    gather (gradient buckets are reduced in equal sizes by design). ``None`` otherwise (or
    without transit sizes).
    """
    ops = profile.get("comm_ops")
    bw = profile.get("comm_bandwidth")
    need = {"rank", "step", "group", "op_type", "op_name", "start_us", "elapse_ms"}
    if ops.empty or bw.empty or not need <= set(ops.columns):
        return None
    if not {"rank", "step", "op_name", "transit_size_mb"} <= set(bw.columns):
        return None
    sample = _sample(ranks)
    o = ops[ops["rank"].isin(sample)].dropna(subset=["step", "start_us", "elapse_ms"])
    if o.empty:
        return None
    b = bw[bw["rank"].isin(sample)]
    if "transport" in b.columns:
        b = b[b["transport"].astype(str).str.upper() != "SDMA"]
    mb = b.groupby(["rank", "step", "op_name"])["transit_size_mb"].sum()
    o = o.join(mb.rename("mb"), on=["rank", "step", "op_name"])
    o = o[o["mb"].notna()]
    if o.empty:
        return None
    o = o.assign(
        group=o["group"].astype(str),
        op_type=o["op_type"].astype(str).str.lower(),
        size=o["mb"].round(0),
    )
    units = o.groupby(["rank", "step"]).ngroups
    comm_us = float(o.groupby(["rank", "step"])["elapse_ms"].sum().median()) * 1000.0
    key = ["group", "op_type", "size"]
    per_unit = o.groupby([*key, "rank", "step"]).agg(n=("mb", "size"), us=("elapse_ms", "sum"))
    best: RepeatedCollective | None = None
    for gkey, sub in per_unit.groupby(level=key):
        g, t, size = str(gkey[0]), str(gkey[1]), float(cast(float, gkey[2]))
        if size < REPEAT_MIN_MB or len(sub) < 0.8 * units or comm_us <= 0:
            continue
        n = float(sub["n"].median())
        if not 2 <= n <= REPEAT_MAX_PER_STEP:
            continue
        share = float(sub["us"].median()) * 1000.0 / comm_us
        if "gather" not in str(t):
            # gradient buckets are reduced in equal sizes by design; a broadcast repeated is
            # the parameters re-sent in buckets (the start-of-step clause says that)
            continue
        # the group's other collectives of its type (the optimizer's small gathers, ...)
        others = o[(o["group"] == g) & (o["op_type"] == t) & (o["size"] != size)]
        others_max = float(others["mb"].max()) if not others.empty else float("nan")
        if share < DOMINANT_MIN_SHARE or (
            math.isfinite(others_max) and size < DOMINANT_MIN_RATIO * others_max
        ):
            continue
        inst = o[(o["group"] == g) & (o["op_type"] == t) & (o["size"] == size)]
        if best is not None and share <= best.share:
            continue
        best = RepeatedCollective(
            op_type=str(t),
            group=str(g),
            group_size=group_size(profile, g),
            size_mb=float(inst["mb"].median()),
            others_max_mb=others_max,
            per_step=n,
            elapse_us=float(inst["elapse_ms"].median()) * 1000.0,
            share=share,
            consumers=_consumers(profile, inst),
        )
    return best


def _consumers(profile: Profile, inst: pd.DataFrame) -> tuple[tuple[str, str], ...]:
    """The compute operator right after each instance of one (step, rank) (kernel order)."""
    one = inst.sort_values(["rank", "step", "start_us"])
    r, st = int(one["rank"].iloc[0]), int(one["step"].iloc[0])
    one = one[(one["rank"] == r) & (one["step"] == st)]
    k = _compute_kernels(profile, [r])
    if k.empty or not {"start_us", "duration_us", "step"} <= set(k.columns):
        return ()
    k = k[k["step"] == st].sort_values("start_us")
    out = []
    for _, row in one.iterrows():
        end = float(row["start_us"]) + float(row["elapse_ms"]) * 1000.0
        after = k[k["start_us"] >= end - 1.0]
        if len(after):
            a = after.iloc[0]
            out.append((str(a["op_type"]), str(a["input_shapes"])))
    return tuple(out)


# ------------------------------------------------------------------ collective types per link
#: A collective type is slow on links another type uses at full speed when its bandwidth there
#: is at most this share of the fastest type's ...
SLOW_TYPE_RATIO = 0.6
#: ... and it moves at least this share of the transport's transit volume (so is the fastest type).
TYPE_MIN_VOLUME_SHARE = 0.1
#: Transports compared (SDMA is the sum of HCCS, PCIE and SIO: not counted twice).
_TYPE_TRANSPORTS = ("HCCS", "RDMA", "SIO", "PCIE")
_REDUCTIONS = re.compile(r"reduce", re.I)
_HCOM_KIND = re.compile(r"hcom_([A-Za-z]+)")


@dataclass(frozen=True)
class CollectiveTypes:
    """Collective types slower than another type on the same transport (``comm_bandwidth``).

    Attributes:
        fast: Op type that reaches the highest bandwidth (``allGather``).
        slow: Op types at most ``SLOW_TYPE_RATIO`` of it on every transport they share.
        by_transport: ``{transport: (fast GB/s, slow GB/s)}``: transit size over transit time
            summed over every rank, step and op of the types (communication.json Communication
            Bandwidth Info).
        reductions: Every slow type reduces (ReduceScatter, AllReduce, Reduce).
    """

    fast: str
    slow: tuple[str, ...]
    by_transport: dict[str, tuple[float, float]]
    reductions: bool

    @property
    def ratio(self) -> float:
        """The slow types' bandwidth over the fast type's (the lowest over the transports)."""
        return min(s / f for f, s in self.by_transport.values() if f > 0)


@dataclass(frozen=True)
class TransportSplit:
    """One collective type slow on one transport only, where another type runs at full speed.

    Attributes:
        transport: The transport (``RDMA``).
        slow: The op type slow there (``alltoallv``); ``fast``: the type at full speed there.
        slow_gbps: Its bandwidth on that transport, GB/s; ``fast_gbps``: the fast type's.
        other: A transport where the slow type runs at the fast type's speed (``HCCS``).
        other_ratio: The slow type's bandwidth there over the fast type's.
    """

    transport: str
    slow: str
    fast: str
    slow_gbps: float
    fast_gbps: float
    other: str
    other_ratio: float
    transit_us_per_step: float = math.nan

    @property
    def gain_us(self) -> float:
        """The slow type's transit time per step on the transport at the fast type's rate, saved.

        ``transit_us_per_step`` × (1 − slow / fast bandwidth); NaN without it.
        """
        return self.transit_us_per_step * (1.0 - self.slow_gbps / self.fast_gbps)


def _type_bandwidth(
    profile: Profile, min_share: float = TYPE_MIN_VOLUME_SHARE
) -> pd.DataFrame | None:
    """Bandwidth per (transport, op type): transit size over transit time, summed.

    From ``comm_bandwidth`` rows with transit size and time (communication.json Communication
    Bandwidth Info), the op type from the op name (``hcom_allGather_`` -> ``allGather``). Columns
    ``mb``, ``ms``, ``gbps``, ``share`` (of the transport's volume), index ``(tr, kind)``; only
    types with at least ``min_share`` of a transport's volume. None without any.
    """
    bw = profile.get("comm_bandwidth")
    need = {"op_name", "transport", "transit_size_mb", "transit_time_ms"}
    if bw.empty or not need <= set(bw.columns):
        return None
    size = pd.to_numeric(bw["transit_size_mb"], errors="coerce")
    dur = pd.to_numeric(bw["transit_time_ms"], errors="coerce")
    tr = bw["transport"].astype(str).str.upper()
    keep = ((size > 0) & (dur > 0) & tr.isin(_TYPE_TRANSPORTS)).to_numpy(dtype=bool)
    if not keep.any():
        return None
    # the op type from each distinct op name (hundreds of names over 10^5 rows at 1024 ranks)
    names = bw["op_name"].astype(str).to_numpy()[keep]
    uniq, inv = np.unique(names, return_inverse=True)
    op_kinds = np.array(
        [(m.group(1) if (m := _HCOM_KIND.match(n)) else "") for n in uniq.tolist()], dtype=object
    )
    t = pd.DataFrame(
        {
            "kind": op_kinds[inv],
            "tr": tr.to_numpy()[keep],
            "mb": size.to_numpy()[keep],
            "ms": dur.to_numpy()[keep],
        }
    )
    t = t[t["kind"] != ""]
    if t.empty:
        return None
    agg = t.groupby(["tr", "kind"])[["mb", "ms"]].sum()
    agg["gbps"] = agg["mb"] / agg["ms"]
    agg["share"] = agg["mb"] / agg.groupby(level="tr")["mb"].transform("sum")
    agg = agg[agg["share"] >= min_share]
    return agg if not agg.empty else None


#: On another transport, the slow type counts as normal at this share of the fast type or more.
SPLIT_NORMAL_RATIO = 0.8
#: A reference type for the split needs this share of the transport's volume (its transfers are
#: large enough to reach the link rate: the rows are per operator, not per packet).
SPLIT_MIN_VOLUME_SHARE = 0.02


def transport_split(profile: Profile) -> TransportSplit | None:
    """A collective type slow on one transport only: its traffic pattern there, not the links.

    On a transport, a type at most ``SLOW_TYPE_RATIO`` of the fastest type's bandwidth over the
    same transport, which on another transport both use runs at ``SPLIT_NORMAL_RATIO`` of the
    fast type or more: its algorithm is not slow (it is fine elsewhere) and the links are not
    (another type fills them): the way that type loads that transport is (many senders to one
    port: incast and congestion on RoCE). The slowest such pair. Source: communication.json
    Communication Bandwidth Info (:func:`_type_bandwidth`). None when there is none.
    """
    agg = _type_bandwidth(profile, SPLIT_MIN_VOLUME_SHARE)
    if agg is None:
        return None
    gb = {
        (str(key[0]), str(key[1])): float(v)
        for key, v in zip(agg.index.tolist(), agg["gbps"].tolist(), strict=True)
    }
    trs = sorted({a for a, _ in gb})
    best: TransportSplit | None = None
    for tr_ in trs:
        kinds = [k for a, k in gb if a == tr_]
        if len(kinds) < 2:
            continue
        fast = max(kinds, key=lambda k: gb[(tr_, k)])
        for k in kinds:
            r = gb[(tr_, k)] / gb[(tr_, fast)]
            if k == fast or r > SLOW_TYPE_RATIO:
                continue
            for o in trs:
                if o == tr_ or (o, k) not in gb or (o, fast) not in gb:
                    continue
                ro = gb[(o, k)] / gb[(o, fast)]
                if ro >= SPLIT_NORMAL_RATIO and (
                    best is None or r < best.slow_gbps / best.fast_gbps
                ):
                    best = TransportSplit(tr_, k, fast, gb[(tr_, k)], gb[(tr_, fast)], o, ro)
    if best is None:
        return None
    # its transit time per (step, rank) on that transport (median over ranks of the mean per step)
    bw = profile.get("comm_bandwidth")
    if {"rank", "step"} <= set(bw.columns):
        on = (bw["transport"].astype(str).str.upper() == best.transport) & bw["op_name"].astype(
            str
        ).str.match(rf"hcom_{re.escape(best.slow)}_")
        t = bw[on]
        ms_ = pd.to_numeric(t["transit_time_ms"], errors="coerce")
        per = ms_.groupby([t["rank"], t["step"]]).sum().groupby(level=0).mean()
        if len(per):
            best = dataclasses.replace(best, transit_us_per_step=1000.0 * float(per.median()))
    return best


def collective_types(profile: Profile) -> CollectiveTypes | None:
    """Collective types that run slower than another type over the same links.

    Groups ``comm_bandwidth`` rows (transit size > 0) by op type (``hcom_allGather_`` from the op
    name) and transport; the fastest type with at least ``TYPE_MIN_VOLUME_SHARE`` of a transport's
    volume is the reference; a type with that share too and at most ``SLOW_TYPE_RATIO`` of the
    reference's bandwidth on every transport both use is slow. The links then carry one kind of
    collective at full speed: what is slow is the other kind (its algorithm, its reduction), not
    the links. ``None`` when fewer than two types share a transport or none is slow.
    """
    agg = _type_bandwidth(profile)
    if agg is None:
        return None
    # the reference: the type fastest on the transport that carries the most data
    flat = agg.reset_index().sort_values(["tr", "gbps"], ascending=[True, False])
    fast_by_tr = {
        str(a): str(b)
        for a, b in flat.drop_duplicates("tr")[["tr", "kind"]].itertuples(index=False)
    }
    if not fast_by_tr:
        return None
    main_tr = str(agg.groupby(level="tr")["mb"].sum().idxmax())
    fast = fast_by_tr[main_tr]
    kinds = sorted({str(k) for k in agg.index.get_level_values("kind")} - {fast})
    gb: dict[tuple[str, str], float] = {
        (str(key[0]), str(key[1])): float(v)
        for key, v in zip(agg.index.tolist(), agg["gbps"].tolist(), strict=True)
    }
    slow: list[str] = []
    for k in kinds:
        ratios = [
            gb[(tr_, k)] / gb[(tr_, fast)]
            for tr_ in fast_by_tr
            if (tr_, k) in gb and (tr_, fast) in gb
        ]
        if ratios and max(ratios) <= SLOW_TYPE_RATIO:
            slow.append(k)
    if not slow:
        return None
    by_tr: dict[str, tuple[float, float]] = {}
    for tr_ in sorted(fast_by_tr):
        if (tr_, fast) not in gb:
            continue
        s = agg.loc[[(tr_, k) for k in slow if (tr_, k) in gb]]
        if s.empty:
            continue
        by_tr[tr_] = (gb[(tr_, fast)], float(s["mb"].sum() / s["ms"].sum()))
    if not by_tr:
        return None
    return CollectiveTypes(
        fast, tuple(slow), by_tr, all(_REDUCTIONS.search(k) is not None for k in slow)
    )


@dataclass(frozen=True)
class HostSilence:
    """The host's time outside any call, in some steps against the others.

    Attributes:
        idle_us: The host's time between calls per (step, rank) in ``steps`` (median, µs).
        other_idle_us: The same in the other steps (median, µs).
        longest_us: Longest gap between two calls in ``steps`` (µs).
        other_longest_us: Longest gap in the other steps (µs).
        ranks: Ranks read (a sample of at most ``PEER_SAMPLE``).
        ranks_more: Of them, the ranks whose idle in ``steps`` exceeds their other steps' by ≥ 20%.
    """

    idle_us: float
    other_idle_us: float
    longest_us: float
    other_longest_us: float
    ranks: tuple[int, ...]
    ranks_more: int

    @property
    def delta_us(self) -> float:
        """Extra host time outside calls per step in ``steps`` (µs)."""
        return self.idle_us - self.other_idle_us


def host_silence(
    profile: Profile, ranks: Sequence[int], steps: Sequence[int], others: Sequence[int]
) -> HostSilence | None:
    """The host's time outside any call, in ``steps`` against ``others``, from its call record.

    A gap runs from the end of the host's calls so far (the running maximum of ``host_start_us +
    api_duration_us``) to the start of its next call, inside one step. A host that blocks in a
    synchronize or a copy is *in* a call (:data:`~advisor_chat.ingest.trace.BLOCKING_CALL` rows),
    and a launch that waits for a full task queue is a long call: time in gaps is time in which
    the training thread issued nothing (Python work, or a thread that does not run). ``None``
    without host calls in both sets of steps. Source: ``host_dispatch`` (trace_view.json CANN API
    events / the DB's CANN_API).
    """
    sample = _sample(ranks)
    hd = profile.host_dispatch_for(sample)
    if hd.empty or "api_duration_us" not in hd:
        return None
    hd = hd[hd["step"].isin([*steps, *others])]
    if hd.empty:
        return None
    parts = []
    for r, g in hd.groupby("rank", sort=True):
        g = g.sort_values("host_start_us", kind="stable")
        start = g["host_start_us"].to_numpy(dtype="float64")
        end = np.maximum.accumulate(start + g["api_duration_us"].fillna(0.0).to_numpy("float64"))
        st = g["step"].to_numpy()
        same = st[:-1] == st[1:]  # a gap across a step boundary is the steps' edge
        parts.append(
            pd.DataFrame({"rank": r, "step": st[1:][same], "gap_us": (start[1:] - end[:-1])[same]})
        )
    gaps = pd.concat(parts, ignore_index=True)
    gaps = gaps[gaps["gap_us"] > 0]
    hit = gaps[gaps["step"].isin(steps)]
    other = gaps[gaps["step"].isin(others)]
    if hit.empty or other.empty:
        return None
    idle_hit = hit.groupby(["rank", "step"])["gap_us"].sum()
    idle_other = other.groupby(["rank", "step"])["gap_us"].sum()
    by_rank_hit = idle_hit.groupby(level="rank").median()
    by_rank_other = idle_other.groupby(level="rank").median().reindex(by_rank_hit.index)
    return HostSilence(
        idle_us=float(idle_hit.median()),
        other_idle_us=float(idle_other.median()),
        longest_us=float(hit["gap_us"].max()),
        other_longest_us=float(other["gap_us"].max()),
        ranks=tuple(int(r) for r in sample),
        ranks_more=int((by_rank_hit > 1.2 * by_rank_other).sum()),
    )


def gc_recording(profile: Profile, ranks: Sequence[int], steps: Sequence[int]) -> tuple[float, int]:
    """``(gc_detect_threshold in ms, recorded GC pauses in steps)``; the threshold NaN when off.

    torch_npu records Python GC pauses longer than ``experimental_config._gc_detect_threshold``
    (``profiler_metadata.json`` / the DB's META_DATA config, ``meta.config``) as ``GC`` events
    (ingest: ``host_dispatch`` rows with ``api_name`` :data:`~advisor_chat.ingest.trace.GC_CALL`).
    Counted on a sample of at most ``PEER_SAMPLE`` ranks.
    """
    from advisor_chat.ingest.trace import GC_CALL

    thr = float("nan")
    meta = profile.get("meta")
    if not meta.empty and "config" in meta:
        for cfg in meta["config"]:
            exp = cfg.get("experimental_config") if isinstance(cfg, dict) else None
            v = exp.get("_gc_detect_threshold") if isinstance(exp, dict) else None
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                thr = float(v)
                break
    hd = profile.host_dispatch_for(_sample(ranks))
    n = 0
    if not hd.empty and "api_name" in hd:
        n = int(((hd["api_name"] == GC_CALL) & hd["step"].isin(list(steps))).sum())
    return thr, n


def gc_pause_us(profile: Profile, ranks: Sequence[int], steps: Sequence[int]) -> tuple[float, int]:
    """``(GC pause per (step, rank), (step, rank) pairs with one)`` in ``steps`` (µs; NaN if none).

    The recorded Python GC pauses (:func:`gc_recording`) summed per (step, rank) of a sample of
    at most ``PEER_SAMPLE`` ranks; the median over the pairs that have one, and their number.
    """
    from advisor_chat.ingest.trace import GC_CALL

    hd = profile.host_dispatch_for(_sample(ranks))
    if hd.empty or not {"api_name", "api_duration_us", "step"} <= set(hd.columns):
        return math.nan, 0
    gc = hd[(hd["api_name"] == GC_CALL) & hd["step"].isin(list(steps))]
    if gc.empty:
        return math.nan, 0
    per = gc.groupby(["step", "rank"])["api_duration_us"].sum()
    return float(per.median()), len(per)


#: A node's timestamps are offset when every collective ends at least this much (µs) later or
#: earlier on its ranks than on the reference node ...
CLOCK_MIN_US = 500.0
#: ... the same on all of its ranks and in most collectives (spread at most this share of it).
CLOCK_SPREAD = 0.2


@dataclass(frozen=True)
class ClockOffset:
    """A node whose host clock is offset from the others' (its timestamps shifted).

    A collective ends on every member at nearly the same moment (the last data arrives for
    all), so its end times differ between ranks only by the ranks' clocks.

    Attributes:
        ranks: The node's ranks.
        offset_us: How much later its timestamps read than the reference node's (µs; negative:
            earlier), the median over its ranks of each rank's median end-time difference.
        ref_ranks: The reference node's ranks (the first node).
        instances: Collective instances compared.
    """

    ranks: tuple[int, ...]
    offset_us: float
    ref_ranks: tuple[int, ...]
    instances: int


def clock_offsets(profile: Profile) -> list[ClockOffset]:
    """Nodes whose timestamps are offset from the first node's, from the collectives' end times.

    Per collective instance (``comm_ops`` group, op_name, step; communication.json start and
    Elapse Time), each rank's end time less the instance's median end; per rank the median over
    instances; per node (:func:`~advisor_chat.diagnosis.attribution.nodes`) the median over its
    ranks, against the first node's. A node is offset when that is at least ``CLOCK_MIN_US`` and
    its ranks and instances agree within ``CLOCK_SPREAD`` of it. ``[]`` with one node or no
    timestamps.
    """
    from advisor_chat.diagnosis.attribution import nodes

    node_list = nodes(profile)
    ops = profile.get("comm_ops")
    need = {"rank", "group", "op_name", "step", "start_us", "elapse_ms"}
    if len(node_list) < 2 or ops.empty or not need <= set(ops.columns):
        return []
    if "comm_kind" in ops.columns:
        ops = ops[ops["comm_kind"].astype(str) == "collective"]
    end = pd.to_numeric(ops["start_us"], errors="coerce") + 1000.0 * pd.to_numeric(
        ops["elapse_ms"], errors="coerce"
    )
    df = ops[["rank", "group", "op_name", "step"]].assign(end=end).dropna(subset=["end"])
    if df.empty:
        return []
    key = ["group", "op_name", "step"]
    size = df.groupby(key)["rank"].transform("nunique")
    df = df[size >= 2]
    df = df.assign(off=df["end"] - df.groupby(key)["end"].transform("median"))
    n_inst = int(df.groupby(key).ngroups)
    node_of = {r: i for i, ns in enumerate(node_list) for r in ns}
    df = df.assign(node=df["rank"].map(node_of))
    # each instance's end per node (median over its ranks), against the first node's
    by_node = df.dropna(subset=["node"]).groupby([*key, "node"])["end"].median().unstack("node")
    if 0 not in by_node.columns:
        return []
    out: list[ClockOffset] = []
    per_rank = df.groupby("rank")["off"].median()
    for i, ns in enumerate(node_list[1:], start=1):
        if i not in by_node.columns:
            continue
        diff = (by_node[i] - by_node[0]).dropna()
        if len(diff) < 3:
            continue
        off = float(diff.median())
        if abs(off) < CLOCK_MIN_US:
            continue
        spread_inst = float((diff - off).abs().quantile(0.75))
        ref = float(per_rank.reindex(node_list[0]).median())
        spread_rank = float((per_rank.reindex(ns) - ref - off).abs().max())
        if max(spread_inst, spread_rank) > CLOCK_SPREAD * abs(off):
            continue
        out.append(ClockOffset(tuple(ns), off, tuple(node_list[0]), n_inst))
    return out


#: Device tasks that copy memory (task types the trace's device lanes and host_dispatch name).
DEVICE_COPY = re.compile(r"^MEMCPY", re.I)


@dataclass(frozen=True)
class DeviceCopies:
    """Host <-> device copies the device runs as tasks of their own (not operators), per step.

    Attributes:
        per_step: Copy tasks per (step, rank) (median).
        us_per_step: Their device time per (step, rank) (median, µs).
        each_us: Median duration of one copy (µs).
        overlapped_share: Share of the copies' time during which a compute kernel runs too (0 when
            they run in line with the kernels, on the same stream).
        api: The host call that launches them (most frequent), e.g. ``AscendCL@aclrtMemcpyAsync``.
        ranks: Ranks read (a sample of at most ``PEER_SAMPLE``).
    """

    per_step: float
    us_per_step: float
    each_us: float
    overlapped_share: float
    api: str
    ranks: tuple[int, ...]


def device_copies(profile: Profile, ranks: Sequence[int]) -> DeviceCopies | None:
    """The copy tasks (``MEMCPY_ASYNC``) the device runs per step, and whether kernels overlap them.

    The step trace counts a copy task as neither Computing nor Communication: its time is Free
    although the device is busy. From ``host_dispatch`` rows whose device task is a copy
    (:data:`DEVICE_COPY`: the launch flows of trace_view.json; the text export), against the
    ``kernels`` of the same ranks (kernel_details.csv) for the overlap. ``None`` without copy tasks.
    """
    sample = _sample(ranks)
    hd = profile.host_dispatch_for(sample)
    if hd.empty or "kernel_name" not in hd:
        return None
    cp = hd[
        hd["kernel_name"].astype(str).str.match(DEVICE_COPY)
        & hd["device_duration_us"].notna()
        & (hd["step"] >= 0)
    ]
    if cp.empty:
        return None
    units = hd[hd["step"] >= 0].groupby(["rank", "step"]).size().index
    g = cp.groupby(["rank", "step"])["device_duration_us"]
    count = g.size().reindex(units, fill_value=0)
    total = g.sum().reindex(units, fill_value=0.0)
    k = profile.kernels_for(sample)
    over = 0.0
    for r, c in cp.groupby("rank"):
        kr = k[(k["rank"] == r) & ~is_comm_kernel(k)] if not k.empty else k
        if kr.empty:
            continue
        ks = kr["start_us"].to_numpy(dtype="float64")
        ke = ks + kr["duration_us"].to_numpy(dtype="float64")
        order = np.argsort(ks)
        ks, ke = ks[order], np.maximum.accumulate(ke[order])
        a = c["device_start_us"].to_numpy(dtype="float64")
        b = a + c["device_duration_us"].to_numpy(dtype="float64")
        # the kernel that starts last before each copy ends: any overlap runs until its end
        j = np.searchsorted(ks, b, side="left") - 1
        jc = np.clip(j, 0, None)
        ov = np.where(
            j >= 0, np.clip(np.minimum(ke[jc], b) - np.maximum(ks[jc], a), 0.0, None), 0.0
        )
        over += float(ov.sum())
    return DeviceCopies(
        per_step=float(count.median()),
        us_per_step=float(total.median()),
        each_us=float(cp["device_duration_us"].median()),
        overlapped_share=over / float(cp["device_duration_us"].sum()),
        api=str(cp["api_name"].mode().iloc[0]) if not cp["api_name"].empty else "",
        ranks=tuple(int(r) for r in sample),
    )


#: A collective "feeds" its next operator when that operator takes at most this share of the
#: collective's time (a gather whose data goes to a cheap operator).
FEEDS_CHEAP_RATIO = 0.1


@dataclass(frozen=True)
class GatherFeeds:
    """Gathers whose data goes straight to a cheap operator, per (step, rank).

    Attributes:
        op_type: The operator family right after them (e.g. ``RmsNorm``: RmsNorm and RmsNormGrad).
        shape: Its input shapes (the most frequent).
        collective: The collective type (e.g. ``hcom_allGather_``).
        per_step: Such gathers per (step, rank) (median).
        us_per_step: Their time per (step, rank) (median, µs).
        collective_us: Median duration of one (µs).
        op_us: Median duration of the operator after it (µs).
        gathers_per_step: Every gather of that type per (step, rank) (median).
        scatters_per_step: Of those gathers, the ones whose operator's result is reduce-scattered
            right after it (a round trip for that operator: the backward of a norm run on the
            gathered sequence), per (step, rank) (median).
        scatter_us_per_step: Those reduce-scatters' time per (step, rank) (median, µs).
    """

    op_type: str
    shape: str
    collective: str
    per_step: float
    us_per_step: float
    collective_us: float
    op_us: float
    gathers_per_step: float
    scatters_per_step: float = 0.0
    scatter_us_per_step: float = 0.0


def gather_feeds(profile: Profile, ranks: Sequence[int]) -> GatherFeeds | None:
    """The gathers (``AllGather``) whose next compute operator costs ≤ ``FEEDS_CHEAP_RATIO`` of them.

    A gather exists to hand data to the operators after it; when the operator it feeds takes a
    few percent of the gather's time, the data is gathered for little work (a norm run on the
    whole gathered sequence instead of the rank's shard is the usual case). From ``kernels``
    (kernel_details.csv / the DB; the HCCL tasks and the compute operators in start order, per
    (step, rank)); the operator type with the most such gather time. ``None`` without gathers.
    """
    sample = _sample(ranks)
    k = profile.kernels_for(sample)
    if k.empty or "op_type" not in k:
        return None
    k = k[k["step"] >= 0].sort_values(["rank", "step", "start_us"], kind="stable")
    comm = is_comm_kernel(k).to_numpy()
    name = k["name"].astype(str).str.lower().to_numpy()
    gather = comm & (np.char.find(name.astype(str), "allgather") >= 0)
    if not gather.any():
        return None
    rows = []
    rank_a, step_a = k["rank"].to_numpy(), k["step"].to_numpy()
    dur = k["duration_us"].to_numpy(dtype="float64")
    op = k["op_type"].astype(str).to_numpy()
    shape = k["input_shapes"].astype(str).to_numpy()
    idx = np.flatnonzero(gather)
    for i in idx:
        j = i + 1
        while j < len(k) and comm[j] and rank_a[j] == rank_a[i]:
            j += 1
        if j >= len(k) or rank_a[j] != rank_a[i] or step_a[j] != step_a[i]:
            continue
        # a reduce-scatter of its result right after it: the round trip exists for that operator
        m = j + 1
        back = (
            dur[m]
            if m < len(k)
            and comm[m]
            and rank_a[m] == rank_a[i]
            and step_a[m] == step_a[i]
            and "reducescatter" in name[m]
            else 0.0
        )
        rows.append((rank_a[i], step_a[i], op[i], dur[i], op[j], shape[j], dur[j], back))
    if not rows:
        return None
    f = pd.DataFrame(
        rows, columns=["rank", "step", "coll", "coll_us", "op", "shape", "op_us", "back_us"]
    )
    units = k.groupby(["rank", "step"]).size().index
    all_g = f.groupby(["rank", "step"]).size().reindex(units, fill_value=0)
    cheap = f[f["op_us"] <= FEEDS_CHEAP_RATIO * f["coll_us"]]
    if cheap.empty:
        return None
    # an operator and its gradient are one family (RmsNorm, RmsNormGrad)
    family = cheap["op"].str.replace(r"Grad$", "", regex=True)
    top = cheap.groupby(family)["coll_us"].sum().idxmax()
    c = cheap[family == top]
    g = c.groupby(["rank", "step"])["coll_us"]
    back = c[c["back_us"] > 0].groupby(["rank", "step"])["back_us"]
    return GatherFeeds(
        op_type=str(top),
        shape=str(c["shape"].mode().iloc[0]),
        collective=str(c["coll"].mode().iloc[0]),
        per_step=float(g.size().reindex(units, fill_value=0).median()),
        us_per_step=float(g.sum().reindex(units, fill_value=0.0).median()),
        collective_us=float(c["coll_us"].median()),
        op_us=float(c["op_us"].median()),
        gathers_per_step=float(all_g.median()),
        scatters_per_step=float(back.size().reindex(units, fill_value=0).median()),
        scatter_us_per_step=float(back.sum().reindex(units, fill_value=0.0).median()),
    )


@dataclass(frozen=True)
class EventWaits:
    """The compute stream waiting on events the collectives record (``EVENT_WAIT`` tasks).

    Attributes:
        per_step: Event waits per (step, rank) (median).
        us_per_step: Their device time per (step, rank) (median, µs).
        wait_us: One wait's duration (median, µs).
        after: The host call launched right before each wait (most frequent, e.g.
            ``HcclAllReduce``): the collective whose end the compute stream waits for.
        after_share: The share of the waits launched right after that call.
    """

    per_step: float
    us_per_step: float
    wait_us: float
    after: str
    after_share: float


def event_waits(profile: Profile, ranks: Sequence[int]) -> EventWaits | None:
    """Event waits on the compute stream launched right after a collective, per (step, rank).

    An asynchronous collective (``async_op=True``) runs on its own stream; ``handle.wait()`` makes
    the compute stream wait on the event recorded at its end (``aclrtStreamWaitEvent`` on the
    host, an ``EVENT_WAIT`` task on the device), so the computation queued after it cannot run
    under it. From ``host_dispatch`` (trace_view.json launch flows: the host call, its device task
    and the task's duration) of up to ``PEER_SAMPLE`` of ``ranks``. ``None`` without such waits.
    """
    rs = _sample([int(r) for r in ranks])
    hd = profile.host_dispatch_for(rs) if rs else pd.DataFrame()
    if hd.empty or "kernel_name" not in hd.columns or "device_duration_us" not in hd.columns:
        return None
    hd = hd[hd["step"] >= 0].sort_values(["rank", "host_start_us"], kind="stable")
    api = hd["api_name"].astype("string").fillna("").str.split("@").str[-1]
    is_wait = (
        (hd["kernel_name"].astype("string").fillna("") == "EVENT_WAIT")
        | (api == "aclrtStreamWaitEvent")
    ).to_numpy(dtype=bool)
    if not is_wait.any():
        return None
    prev = api.groupby(hd["rank"].to_numpy()).shift(1).fillna("")
    before = prev[is_wait]
    before = before[before.str.startswith("Hccl")]
    if before.empty:
        return None
    top = str(before.value_counts().idxmax())
    w = hd[is_wait]
    units = hd.groupby(["rank", "step"]).size().index
    g = w.groupby(["rank", "step"])["device_duration_us"]
    return EventWaits(
        per_step=float(g.size().reindex(units, fill_value=0).median()),
        us_per_step=float(g.sum().reindex(units, fill_value=0.0).median()),
        wait_us=float(pd.to_numeric(w["device_duration_us"], errors="coerce").median()),
        after=top,
        after_share=float((before == top).sum()) / float(is_wait.sum()),
    )


#: Expert load: the most loaded rank of a layer gets at least this many times the mean rows.
EXPERT_HOT_RATIO = 1.5


@dataclass(frozen=True)
class ExpertLoad:
    """Token rows the expert operators (``GroupedMatmul``) get per rank, layer by layer.

    Attributes:
        max_ratio: The most loaded rank's rows over the mean, per call position (median), e.g. 2.0.
        min_ratio: The least loaded rank's rows over the mean (median over positions).
        max_rows: The largest rows any rank gets in one call.
        min_rows: The smallest.
        hot_ranks: How many different ranks are the most loaded one across the call positions.
        positions: Call positions per step compared (GroupedMatmul calls in order).
        total_spread: Max over min of the ranks' rows summed over the step (1.0: every rank gets
            the same total).
        a2a_us_per_step: All-to-all time per (step, rank) (median of the summed Elapse Time, µs).
    """

    max_ratio: float
    min_ratio: float
    max_rows: int
    min_rows: int
    hot_ranks: int
    positions: int
    total_spread: float
    a2a_us_per_step: float


def expert_load(profile: Profile, ranks: Sequence[int]) -> ExpertLoad | None:
    """How unevenly the router spreads tokens over the expert ranks, layer by layer.

    From ``kernels`` (kernel_details.csv / the DB): the first dimension of ``GroupedMatmul``'s
    first input (its token rows), call by call in start order per (step, rank), compared across
    up to ``PEER_SAMPLE`` of ``ranks`` at each call position; ``comm_ops`` (communication.json
    Elapse Time of the all-to-all operators) for the time the all-to-alls take. Each all-to-all
    (dispatch / combine) of a layer waits for that layer's most loaded rank. ``None`` without
    GroupedMatmul calls, when the ranks run different numbers of them, or when no rank of a
    layer gets ≥ ``EXPERT_HOT_RATIO`` x the mean.
    """
    rs = _sample([int(r) for r in ranks])
    k = profile.kernels_for(rs)
    if k.empty or "op_type" not in k or "input_shapes" not in k:
        return None
    g = k[(k["step"] >= 0) & k["op_type"].astype(str).str.contains("GroupedMatmul")]
    if g.empty:
        return None
    rows = pd.to_numeric(
        g["input_shapes"].astype(str).str.extract(r"^\s*\"?(\d+)", expand=False), errors="coerce"
    )
    g = g.assign(rows=rows).dropna(subset=["rows"]).sort_values(["rank", "step", "start_us"])
    g = g.assign(pos=g.groupby(["rank", "step"]).cumcount())
    n_calls = g.groupby(["rank", "step"]).size()
    if n_calls.nunique() != 1 or g["rank"].nunique() < 4:
        return None
    m = g.pivot_table(index=["step", "pos"], columns="rank", values="rows", aggfunc="first")
    # the calls whose first dimension differs across ranks carry the routed tokens (a
    # transposed input starts with a hidden size, the same on every rank)
    m = m[m.nunique(axis=1) > 1]
    if m.empty:
        return None
    mean = m.mean(axis=1)
    hi = (m.max(axis=1) / mean).median()
    lo = (m.min(axis=1) / mean).median()
    if not hi >= EXPERT_HOT_RATIO:
        return None
    hot = m.idxmax(axis=1).nunique()
    totals = g.groupby(["rank", "step"])["rows"].sum().groupby("rank").median()
    c = profile.get("comm_ops")
    a2a = 0.0
    if not c.empty and {"op_name", "elapse_ms", "rank", "step"} <= set(c.columns):
        c = c[c["op_name"].astype(str).str.lower().str.contains("alltoall")]
        if not c.empty:
            a2a = float(c.groupby(["rank", "step"])["elapse_ms"].sum().median()) * 1000.0
    return ExpertLoad(
        max_ratio=float(hi),
        min_ratio=float(lo),
        max_rows=int(m.max().max()),
        min_rows=int(m.min().min()),
        hot_ranks=int(hot),
        positions=int(n_calls.iloc[0]),
        total_spread=float(totals.max() / max(totals.min(), 1.0)),
        a2a_us_per_step=a2a,
    )


@dataclass(frozen=True)
class CollectiveContext:
    """Where the exposed collectives sit on the compute stream: the operators around them.

    Collectives between the same two compute operators (one operator family, e.g.
    ``BNTrainingReduce`` … ``BNTrainingUpdate``: an operator that communicates inside its own
    computation) or before the first compute operator of the step (nothing was launched to run
    under them) hold the compute stream: the operator after them waits for them, and for every
    collective queued before them on the communication stream.

    Attributes:
        collective: The collective types in them, most frequent first, space-separated (e.g.
            ``hcom_allGather_ hcom_allReduce_``).
        before: Operator type right before them (``""`` at the start of the step).
        after: Operator type right after them.
        per_step: Such places per (step, rank) (median).
        collectives_per_step: Collectives in them per (step, rank) (median).
        collective_us: Median duration of one collective (µs).
        idle_us_per_step: The compute stream's idle across them per (step, rank) (median, µs):
            from the end of ``before`` (the first collective's start at the step's start) to
            the start of ``after``; what removing them gives back at most.
        own_us_per_step: Their own duration per (step, rank) (median, µs); the rest of the
            idle is waiting for collectives queued before them.
        last_other_us: Duration of the largest collective after them in the step (median, µs):
            the last gradient bucket's reduction, exposed with or without them.
        forward_us: Device time of the compute operators before the step's first backward
            operator (``Grad`` / ``backward`` in its type) per (step, rank) (median, µs; NaN when
            no operator says backward): the forward work a collective could run under.
    """

    collective: str
    before: str
    after: str
    per_step: float
    collectives_per_step: float
    collective_us: float
    idle_us_per_step: float
    own_us_per_step: float = 0.0
    last_other_us: float = 0.0
    forward_us: float = math.nan

    @property
    def saving_us(self) -> float:
        """What removing them gives back per (step, rank) (µs, an estimate).

        Their own time, plus the wait for the collectives queued before them beyond the last
        gradient bucket's reduction (which stays exposed at the end of the backward either way).
        """
        queued = max(self.idle_us_per_step - self.own_us_per_step, 0.0)
        return self.own_us_per_step + max(queued - self.last_other_us, 0.0)

    @property
    def at_step_start(self) -> bool:
        """Whether they run before the step's first compute operator."""
        return not self.before


#: The words of a CamelCase operator type (``BNTrainingReduce`` -> ``BN``, ``Training``, ``Reduce``).
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def op_family(op_type: str) -> str:
    """The operator type without its last word and gradient suffix: an operator split in parts.

    ``'BNTrainingUpdateGrad'`` -> ``'BNTraining'``, ``'BNTrainingReduce'`` -> ``'BNTraining'``;
    a one-word type is its own family.
    """
    t = re.sub(r"Grad$", "", str(op_type))
    words = _WORDS.findall(t)
    return "".join(words[:-1]) if len(words) >= 2 else t


def collective_context(profile: Profile, ranks: Sequence[int]) -> CollectiveContext | None:
    """Collectives holding the compute stream inside an operator family or at the step's start.

    Between two operators of one family (an operator in parts) or before the step's first
    operator, with the compute idle across them, per (step, rank). From ``kernels`` (kernel_details.csv / the DB: HCCL tasks and compute operators in start
    order) of up to ``PEER_SAMPLE`` of ``ranks``. Places are grouped by (operators around them,
    collective type); the group with the most idle per step is returned, ``None`` when no
    collective sits inside an operator family or at the step's start.
    """
    k = profile.kernels_for(_sample([int(r) for r in ranks]))
    if k.empty or not {"op_type", "start_us", "duration_us"} <= set(k.columns):
        return None
    k = k[k["step"] >= 0].sort_values(["rank", "step", "start_us"], kind="stable")
    k = k.reset_index(drop=True)
    comm = is_comm_kernel(k).to_numpy(dtype=bool)
    if not comm.any() or comm.all():
        return None
    unit = k["rank"].astype("int64").to_numpy() * 1_000_000 + k["step"].astype("int64").to_numpy()
    start = k["start_us"].to_numpy(dtype="float64")
    end = start + k["duration_us"].to_numpy(dtype="float64")
    op = k["op_type"].astype(str).to_numpy()
    # each row's previous and next compute row in its (rank, step)
    idx = np.arange(len(k))
    comp_idx = np.where(~comm, idx, -1)
    prev_c = pd.Series(np.where(comp_idx >= 0, comp_idx, np.nan)).ffill().to_numpy()
    next_c = pd.Series(np.where(comp_idx >= 0, comp_idx, np.nan)).bfill().to_numpy()
    rows = []
    for i in np.flatnonzero(comm):
        n = next_c[i]
        p = prev_c[i]
        first = not np.isfinite(p) or unit[int(p)] != unit[i]
        # (-1: after the step's last operator, the gradient reduction's own place)
        last = not np.isfinite(n) or unit[int(n)] != unit[i]
        rows.append(
            (
                unit[i],
                -1 if first else int(p),
                -1 if last else int(n),
                op[i],
                end[i] - start[i],
                start[i],
            )
        )
    if not rows:
        return None
    every = pd.DataFrame(rows, columns=["unit", "prev", "next", "coll", "coll_us", "coll_start"])
    f = every[every["next"] >= 0]
    if f.empty:
        return None
    places = f.groupby(["unit", "prev", "next"], sort=False).agg(
        coll=("coll", lambda s: s.mode().iloc[0]),
        n=("coll", "size"),
        coll_us=("coll_us", "median"),
        own_us=("coll_us", "sum"),
        first_start=("coll_start", "min"),
    )
    places = places.reset_index()
    nxt = places["next"].to_numpy(dtype="int64")
    prv = places["prev"].to_numpy(dtype="int64")
    at_start = prv < 0
    before = np.where(at_start, "", op[np.maximum(prv, 0)])
    after = op[nxt]
    idle_from = np.where(at_start, places["first_start"].to_numpy(), end[np.maximum(prv, 0)])
    places["idle_us"] = np.maximum(start[nxt] - idle_from, 0.0)
    places["before"], places["after"] = before, after
    fam_b = pd.Series(before).map(op_family).to_numpy()
    fam_a = pd.Series(after).map(op_family).to_numpy()
    # an operator in parts with the collective between them: not two layers of one type, not
    # an operator's backward and the next micro-batch's forward (RmsNormGrad, RmsNorm)
    base_b = np.array([re.sub(r"Grad$", "", str(x)) for x in before])
    base_a = np.array([re.sub(r"Grad$", "", str(x)) for x in after])
    keep = at_start | ((fam_b == fam_a) & (before != "") & (base_b != base_a))
    places = places[keep]
    if places.empty:
        return None
    # one group per operator family (its forward and backward parts together), or the step start
    places["family"] = np.where(places["before"] == "", "", fam_b[keep])
    top = places.groupby("family")["idle_us"].sum().idxmax()
    g = places[places["family"] == top]
    pair = g.groupby(["before", "after"]).size().idxmax()
    units = pd.Index(np.unique(unit))
    by = g.groupby("unit")
    # the largest collective after these places (the last gradient bucket's reduction): exposed
    # at the end of the backward whether or not they go, so not part of what waiting behind
    # them costs
    inside = (
        every.merge(
            g[["unit", "prev", "next"]], on=["unit", "prev", "next"], how="left", indicator=True
        )["_merge"]
        .eq("both")
        .to_numpy()
    )
    last_place = every[inside].groupby("unit")["coll_start"].max()
    rest = every[~inside]
    later = rest[rest["coll_start"].to_numpy() > last_place.reindex(rest["unit"]).to_numpy()]
    other = later.groupby("unit")["coll_us"].max()
    # the forward: compute device time before each unit's first backward operator
    bwd = (~comm) & k["op_type"].astype(str).str.contains(r"Grad$|backward", case=False).to_numpy()
    first_bwd = pd.Series(start[bwd]).groupby(unit[bwd]).min()
    fwd_rows = (~comm) & (start < first_bwd.reindex(unit).to_numpy(dtype="float64"))
    fwd = pd.Series(end[fwd_rows] - start[fwd_rows]).groupby(unit[fwd_rows]).sum()
    return CollectiveContext(
        forward_us=float(fwd.median()) if not fwd.empty else math.nan,
        collective=" ".join(pd.Series(every[inside]["coll"]).value_counts().index.astype(str)),
        before=str(pair[0]),
        after=str(pair[1]),
        per_step=float(by.size().reindex(units, fill_value=0).median()),
        collectives_per_step=float(by["n"].sum().reindex(units, fill_value=0).median()),
        collective_us=float(g["coll_us"].median()),
        idle_us_per_step=float(by["idle_us"].sum().reindex(units, fill_value=0.0).median()),
        own_us_per_step=float(by["own_us"].sum().reindex(units, fill_value=0.0).median()),
        last_other_us=float(other.reindex(units, fill_value=0.0).median()),
    )


#: Expert MatMul kernels of MoE layers (grouped over the local experts).
_EXPERT_MM = re.compile(r"grouped_?mat_?mul|GroupedMatmul", re.I)


@dataclass(frozen=True)
class MoePadding:
    """MoE layers that pad every expert's input to capacity.

    Attributes:
        capacity_factor: ``moe_expert_capacity_factor`` of distributed_args.
        topk: ``moe_router_topk`` (NaN when not recorded).
        experts: ``num_experts`` (NaN when not recorded).
        alltoall_us: The all-to-all collectives' time per (step, rank) (median rank, µs; Elapse).
        expert_us: The expert MatMuls' device time per (step, rank) (median rank, µs).
        ranks: Ranks read (a sample).
        each_us: One all-to-all's Elapse Time (median, µs).
    """

    capacity_factor: float
    topk: float
    experts: float
    alltoall_us: float
    expert_us: float
    ranks: tuple[int, ...]
    each_us: float = math.nan

    @property
    def padding_share(self) -> float:
        """Share of the padded rows: ``1 - 1 / capacity_factor``."""
        return 1.0 - 1.0 / self.capacity_factor

    @property
    def saving_us(self) -> float:
        """Estimate per step (µs): the padding's share of the all-to-alls and expert MatMuls."""
        return self.padding_share * (self.alltoall_us + self.expert_us)


def moe_padding(profile: Profile, ranks: Sequence[int]) -> MoePadding | None:
    """MoE layers padding expert inputs to capacity, from the recorded framework arguments.

    ``meta.distributed_args`` (profiler_metadata.json) with ``moe_pad_expert_input_to_capacity``
    true and ``moe_expert_capacity_factor`` > 1: every expert receives ``capacity_factor`` times
    its even share of the routed tokens, the rest zeros. Times: ``comm_ops`` Elapse Time of the
    all-to-all collectives (communication.json), ``kernels`` of the expert MatMuls (GroupedMatmul),
    per (step, rank), on a sample of the ranks. ``None`` without those arguments or all-to-alls.
    """
    meta = profile.get("meta")
    if meta.empty or "distributed_args" not in meta:
        return None
    args = next((a for a in meta["distributed_args"] if isinstance(a, dict)), None)
    if args is None:
        return None
    pad = str(args.get("moe_pad_expert_input_to_capacity", "")).strip().lower() in ("true", "1")
    try:
        cf = float(args.get("moe_expert_capacity_factor") or "nan")
    except (TypeError, ValueError):
        return None
    if not pad or not math.isfinite(cf) or cf <= 1.0:
        return None

    def num(key: str) -> float:
        try:
            return float(args.get(key) or "nan")
        except (TypeError, ValueError):
            return math.nan

    sample = _sample(ranks)
    ops = profile.get("comm_ops")
    if ops.empty or not {"op_name", "elapse_ms"} <= set(ops.columns):
        return None
    kind = ops["op_type"].astype(str) if "op_type" in ops else ops["op_name"].astype(str)
    a2a = ops[ops["rank"].isin(sample) & kind.str.contains("all_?to_?all", case=False)]
    if a2a.empty:
        return None
    per = a2a.groupby(["rank", "step"])["elapse_ms"].sum() * 1000.0
    a2a_us = float(per.groupby(level="rank").mean().median())
    k = profile.kernels_for(sample)
    expert_us = 0.0
    if not k.empty and "op_type" in k:
        e = k[k["op_type"].astype(str).str.contains(_EXPERT_MM)]
        if not e.empty:
            units = k.groupby(["rank", "step"]).size().index
            s = e.groupby(["rank", "step"])["duration_us"].sum().reindex(units, fill_value=0.0)
            expert_us = float(s.groupby(level="rank").mean().median())
    return MoePadding(
        cf,
        num("moe_router_topk"),
        num("num_experts"),
        a2a_us,
        expert_us,
        tuple(sample),
        float(a2a["elapse_ms"].median()) * 1000.0,
    )


#: ``Model ID`` of a task that runs in no graph (eager, single-operator mode).
NO_MODEL_ID = 4294967295
#: Graph mode: at least this share of the compute kernels carry a Model ID.
GRAPH_KERNELS_SHARE = 0.5
#: A graph run the device waits for: at least this idle (µs) before its first kernel.
BREAK_IDLE_MIN_US = 100.0


@dataclass(frozen=True)
class GraphRuns:
    """How a compiled model runs: its graphs per step and the device idle between them.

    Attributes:
        ranks: The ranks read (a sample).
        graphs_per_step: Runs of consecutive kernels of one Model ID per (step, rank) (median).
        breaks_per_step: Runs after the step's first one that the device waits for (at least
            ``BREAK_IDLE_MIN_US`` idle before their first kernel) per (step, rank) (median).
        break_idle_us: Device idle per (step, rank) right before those runs (median, µs).
        idle_each_us: Median idle before one of them (µs).
        graphs: Distinct Model IDs seen.
    """

    ranks: tuple[int, ...]
    graphs_per_step: float
    breaks_per_step: float
    break_idle_us: float
    idle_each_us: float
    graphs: int


def graph_runs(profile: Profile, ranks: Sequence[int]) -> GraphRuns | None:
    """The graph runs of a job in graph mode (torch.compile / torchair, MindSpore graph mode).

    From the ``Model ID`` column of kernel_details.csv (DB ``TASK.modelId``) of up to
    ``PEER_SAMPLE`` of ``ranks``: per (step, rank), the compute kernels in start order are split
    into runs of one Model ID; the idle before a run is its first kernel's start minus the end of
    the task before it (any task). ``None`` when fewer than ``GRAPH_KERNELS_SHARE`` of the
    kernels carry a Model ID, or with at most one run per step.
    """
    rs = _sample([int(r) for r in ranks])
    if not rs:
        return None
    k = profile.kernels_for(rs)
    if k.empty or "model_id" not in k.columns:
        return None
    k = k[~is_comm_kernel(k).to_numpy()]
    mid = pd.to_numeric(k["model_id"], errors="coerce")
    in_graph = mid.notna() & (mid != NO_MODEL_ID)
    if k.empty or float(in_graph.mean()) < GRAPH_KERNELS_SHARE:
        return None
    runs, breaks, idles, each = [], [], [], []
    k = k.assign(_mid=mid.where(in_graph, -1.0)).sort_values(["rank", "start_us"], kind="stable")
    for _, g in k[k["step"] >= 0].groupby(["step", "rank"]):
        m = g["_mid"].to_numpy()
        start = g["start_us"].to_numpy(dtype="float64")
        end = start + g["duration_us"].to_numpy(dtype="float64")
        first = np.r_[True, m[1:] != m[:-1]] & (m >= 0)
        n = int(first.sum())
        if n == 0:
            continue
        prev_end = np.r_[start[0], np.maximum.accumulate(end)[:-1]]
        gap = np.clip(start - prev_end, 0.0, None)
        later = first.copy()
        later[np.flatnonzero(first)[0]] = False  # the step's first run starts the step
        held = later & (gap >= BREAK_IDLE_MIN_US)
        runs.append(n)
        breaks.append(int(held.sum()))
        idles.append(float(gap[held].sum()))
        each += gap[held].tolist()
    if not runs or float(np.median(runs)) <= 1 or float(np.median(breaks)) < 1:
        return None
    return GraphRuns(
        ranks=tuple(rs),
        graphs_per_step=float(np.median(runs)),
        breaks_per_step=float(np.median(breaks)),
        break_idle_us=float(np.median(idles)),
        idle_each_us=float(np.median(each)) if each else 0.0,
        graphs=int(k.loc[k["_mid"] >= 0, "_mid"].nunique()),
    )


#: A host freeze: a stretch of at least this many µs with no host call while the device idles.
FREEZE_MIN_US = 5000.0
#: Freezes of ranks that start within this many µs of each other are the same moment.
FREEZE_SAME_MOMENT_US = 2000.0
#: A moment is shared when at least this share of the ranks freeze in it.
FREEZE_SHARED_SHARE = 0.75
#: The moments recur on a period when at least this share of their spacings is a whole number
#: of periods (within ``FREEZE_PERIOD_TOLERANCE`` of one).
FREEZE_REGULAR_SHARE = 0.8
FREEZE_PERIOD_TOLERANCE = 0.1


@dataclass(frozen=True)
class HostFreezes:
    """The hosts of some ranks stopping together, at the same moments, on a fixed period.

    Attributes:
        ranks: The ranks read.
        moments: Shared freezes (moments at which most of ``ranks`` make no host call while
            their devices idle).
        each_us: Median length of one freeze (µs).
        period_us: Median spacing of consecutive moments, as a whole-period estimate (µs).
        regular_share: Share of the spacings that are a whole number of periods.
        per_step_us: Freeze time per (step, rank) (median over the ranks, µs).
    """

    ranks: tuple[int, ...]
    moments: int
    each_us: float
    period_us: float
    regular_share: float
    per_step_us: float


def host_freezes(profile: Profile, ranks: Sequence[int]) -> HostFreezes | None:
    """Whether the hosts of ``ranks`` freeze together on a fixed period (descheduled, not busy).

    From ``host_dispatch`` (every host call with its ``host_start_us`` / ``api_duration_us``) and
    the kernels: per rank, the stretches of at least ``FREEZE_MIN_US`` with no host call during
    which the device runs nothing for at least half of the stretch; the stretches of different
    ranks that start within ``FREEZE_SAME_MOMENT_US`` are one moment, kept when at least
    ``FREEZE_SHARED_SHARE`` of the ranks freeze in it. The moments recur on a period when at least
    ``FREEZE_REGULAR_SHARE`` of their spacings are a whole number of the smallest common spacing.
    A process that is busy (Python, a slow call) still makes calls or starts frames; one that the
    kernel stops (a CPU quota, a host-wide stall) makes none, on all its ranks at once (the
    caller checks first that no host frame runs in the stalls: work the step does on the host,
    such as a gloo collective, also makes no launch call). ``None`` with fewer than 2 ranks,
    fewer than 3 shared moments, or no regular period.
    """
    rs = sorted(int(r) for r in ranks)
    if len(rs) < 2:
        return None
    hd = profile.host_dispatch_for(rs)
    k = profile.kernels_for(rs)
    if hd.empty or k.empty or "api_duration_us" not in hd.columns:
        return None
    found: list[tuple[float, float, int]] = []  # (start, length, rank)
    per_rank: dict[int, float] = {}
    steps: dict[int, int] = {}
    for r in rs:
        h = hd[hd["rank"] == r].sort_values("host_start_us")
        kk = k[k["rank"] == r].sort_values("start_us")
        if len(h) < 2 or kk.empty:
            continue
        s = h["host_start_us"].to_numpy(dtype="float64")
        e = s + pd.to_numeric(h["api_duration_us"], errors="coerce").fillna(0.0).to_numpy()
        reach = np.maximum.accumulate(e)
        gap_s, gap_e = reach[:-1], s[1:]
        big = np.flatnonzero(gap_e - gap_s >= FREEZE_MIN_US)
        ks = kk["start_us"].to_numpy(dtype="float64")
        ke = ks + kk["duration_us"].to_numpy(dtype="float64")
        total = 0.0
        for i in big:
            a, b = float(gap_s[i]), float(gap_e[i])
            busy = float(np.clip(np.minimum(ke, b) - np.maximum(ks, a), 0.0, None).sum())
            if busy <= 0.5 * (b - a):
                found.append((a, b - a, r))
                total += b - a
        per_rank[r] = total
        steps[r] = max(int(kk.loc[kk["step"] >= 0, "step"].nunique()), 1)
    if len(per_rank) < 2 or not found:
        return None
    found.sort()
    moments: list[list[tuple[float, float, int]]] = []
    for f in found:
        if moments and f[0] - moments[-1][0][0] <= FREEZE_SAME_MOMENT_US:
            moments[-1].append(f)
        else:
            moments.append([f])
    need = FREEZE_SHARED_SHARE * len(per_rank)
    shared = [m for m in moments if len({x[2] for x in m}) >= need]
    if len(shared) < 3:
        return None
    starts = np.array([float(np.median([x[0] for x in m])) for m in shared])
    gaps = np.diff(starts)
    period = float(np.min(gaps))
    if period <= 0:
        return None
    whole = gaps / period
    regular = float((np.abs(whole - np.round(whole)) <= FREEZE_PERIOD_TOLERANCE).mean())
    if regular < FREEZE_REGULAR_SHARE:
        return None
    # the period as the median spacing of consecutive moments one period apart
    one = gaps[np.round(whole) == 1]
    est = float(np.median(one)) if len(one) else period
    lengths = [x[1] for m in shared for x in m]
    return HostFreezes(
        ranks=tuple(sorted(per_rank)),
        moments=len(shared),
        each_us=float(np.median(lengths)),
        period_us=est,
        regular_share=regular,
        per_step_us=float(np.median([per_rank[r] / steps[r] for r in per_rank])),
    )


#: A Cube operator wastes the Cube when its MAC busy share (aic_mac_ratio) is at most this share
#: of the job's other Cube operators'.
CUBE_WASTE_RATIO = 0.4


@dataclass(frozen=True)
class CubeWaste:
    """A Cube operator whose MAC unit is mostly idle while it runs, against the job's other ones.

    Attributes:
        op_type: The operator type.
        mac_ratio: Its mean ``aic_mac_ratio`` (share of its AI Core time the Cube MAC is busy).
        mac_ratio_others: The same over the other Cube operators of those ranks (time-weighted).
        others: The other Cube operator types compared with (heaviest first, at most 2).
        shapes: Its most frequent input shapes.
        formats: Its most frequent input formats.
    """

    op_type: str
    mac_ratio: float
    mac_ratio_others: float
    others: tuple[str, ...]
    shapes: str
    formats: str


def cube_waste(profile: Profile, ranks: Sequence[int], op_type: str) -> CubeWaste | None:
    """Whether ``op_type`` keeps the Cube mostly idle while it runs (a shape the Cube pads).

    From the PipeUtilization columns of kernel_details.csv (``aic_mac_ratio``) of up to
    ``PEER_SAMPLE`` of ``ranks``: the operator's time-weighted mean against that of the other
    operators with a measured MAC share (the job's other Cube work); ``None`` without the column,
    without other Cube operators, or when its share is above ``CUBE_WASTE_RATIO`` of theirs.
    """
    k = _compute_kernels(profile, _sample([int(r) for r in ranks]))
    if k.empty or "aic_mac_ratio" not in k.columns:
        return None
    mac = pd.to_numeric(k["aic_mac_ratio"], errors="coerce")
    cube = k[mac.notna() & (mac > 0)].assign(_mac=mac)
    mine = cube[cube["op_type"] == op_type]
    rest = cube[cube["op_type"] != op_type]
    if mine.empty or rest.empty:
        return None

    def wmean(df: pd.DataFrame) -> float:
        w = df["duration_us"].to_numpy(dtype="float64")
        return (
            float(np.average(df["_mac"].to_numpy(dtype="float64"), weights=w)) if w.sum() else 0.0
        )

    a, b = wmean(mine), wmean(rest)
    if not (b > 0 and a <= CUBE_WASTE_RATIO * b):
        return None
    heavy = rest.groupby("op_type")["duration_us"].sum().sort_values(ascending=False)
    return CubeWaste(
        op_type=op_type,
        mac_ratio=a,
        mac_ratio_others=b,
        others=tuple(str(t) for t in heavy.index[:2]),
        shapes=str(mine["input_shapes"].mode().iloc[0]) if "input_shapes" in mine else "",
        formats=str(mine["input_formats"].mode().iloc[0]) if "input_formats" in mine else "",
    )


#: A host API call is blocked when it lasts this many times its API's median ...
BLOCKED_CALL_RATIO = 20.0
#: ... and at least this long, µs.
BLOCKED_CALL_MIN_US = 1000.0


@dataclass(frozen=True)
class BlockedCalls:
    """Host API calls of some ranks that block far beyond their usual duration.

    Attributes:
        api: The API most of them are (``AscendCL@aclnnMatmul``).
        count: How many, over the ranks read.
        each_us: Their median duration, µs.
        normal_us: The median duration of the same API's other calls, µs.
        sweep: In the steps where several ranks block, they do so one rank after another in
            rank order (a poller visiting the cards in turn).
        spacing_us: Median time between consecutive ranks' blocked calls in a sweep, µs.
    """

    api: str
    count: int
    each_us: float
    normal_us: float
    sweep: bool
    spacing_us: float
    apis: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The blocked APIs, most frequent first (at most three, then "…")."""
        return ", ".join(self.apis[:3]) + (", …" if len(self.apis) > 3 else "")


def blocked_calls(profile: Profile, ranks: Sequence[int]) -> BlockedCalls | None:
    """Host API calls of ``ranks`` that last ``BLOCKED_CALL_RATIO`` x their API's median or more.

    From ``host_dispatch`` (trace_view.json CANN API / the DB's CANN_API): calls of at least
    ``BLOCKED_CALL_MIN_US``. A kernel launch that blocks for milliseconds waits for the device
    driver (another process on the host holding it), not for Python. ``sweep``: in each step
    where three or more ranks block, their blocked calls start in rank order. None without any.
    """
    hd = profile.host_dispatch_for(list(ranks))
    if hd.empty or not {"api_name", "api_duration_us", "host_start_us"} <= set(hd.columns):
        return None
    dur = pd.to_numeric(hd["api_duration_us"], errors="coerce")
    api = hd["api_name"].astype(str)
    med = dur.groupby(api).transform("median")
    hit = (dur >= BLOCKED_CALL_RATIO * med) & (dur >= BLOCKED_CALL_MIN_US)
    if not hit.any():
        return None
    b = hd[hit.fillna(False)]
    counts = api[b.index].value_counts()
    top = str(counts.index[0])
    normal = float(dur[(api == top) & ~hit.fillna(False)].median())
    sweep, gaps = True, []
    n_sweeps = 0
    if "step" in b.columns:
        for _, g in b.groupby("step"):
            first = g.sort_values("host_start_us").drop_duplicates("rank")
            if len(first) < 3:
                continue
            n_sweeps += 1
            order = first["rank"].astype(int).tolist()
            sweep &= order == sorted(order)
            gaps += np.diff(first["host_start_us"].to_numpy(dtype=float)).tolist()
    return BlockedCalls(
        top,
        len(b),
        float(dur[b.index].median()),
        normal,
        bool(sweep and n_sweeps > 0),
        float(np.median(gaps)) if gaps else float("nan"),
        tuple(str(a) for a in counts.index),
    )
