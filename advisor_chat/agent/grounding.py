"""Grounding check: every number in an answer must come from that turn's tool results.

Numbers are extracted from the answer text (English and Chinese) with their unit and displayed
precision, and compared with a pool of numbers collected from the tool results (text shown to
the model, analyzer metrics, finding metrics, result tables, case hits) plus the numbers the user
wrote in the question. A number is grounded when some pool value of a compatible dimension rounds
to it at the precision it was written with. Allowed conversions: us ↔ ms ↔ s (and 微秒/毫秒/秒),
ratio ↔ percent.

Text inside backticks (identifiers such as case ids, env settings, file names) is not checked,
nor are digits that are part of a word (``rank12``, ``Level1``, ``o200k``, ``8.0.RC2``).
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from advisor_chat.agent.answer import Grounding

Dim = str  # "time" (value in us), "pct", "bw" (GB/s), "size" (MB), "none"

_UNITS: dict[str, tuple[Dim, float]] = {
    "us": ("time", 1.0),
    "µs": ("time", 1.0),
    "μs": ("time", 1.0),
    "微秒": ("time", 1.0),
    "ms": ("time", 1000.0),
    "毫秒": ("time", 1000.0),
    "s": ("time", 1e6),
    "秒": ("time", 1e6),
    "%": ("pct", 1.0),
    "％": ("pct", 1.0),
    "gb/s": ("bw", 1.0),
    "gbps": ("bw", 1.0),
    "mb": ("size", 1.0),
    "gb": ("size", 1000.0),
}

_NUM_RE = re.compile(
    r"(?<![A-Za-z0-9_.\-/#])"
    r"(?P<sign>[-+−])?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?:\s?(?P<unit>GB/s|GBps|µs|μs|us|ms|MB|GB|毫秒|微秒|秒|s|%|％))?"
    r"(?!\.?[A-Za-z0-9_])"
)
_CODE_RE = re.compile(r"`[^`\n]*`")


@dataclass(frozen=True)
class Num:
    """A number found in text.

    Attributes:
        text: As written (with unit).
        value: Absolute value in the written unit.
        decimals: Decimals written (the displayed precision).
        dim: Dimension (``time``, ``pct``, ``bw``, ``size``, ``none``).
        scale: Factor to the dimension's base unit (ms -> 1000 for time in us).
    """

    text: str
    value: float
    decimals: int
    dim: Dim
    scale: float


def extract_numbers(text: str) -> list[Num]:
    """Numbers in ``text`` (outside backticks), with unit and displayed precision."""
    out: list[Num] = []
    stripped = _CODE_RE.sub(" ", text)
    for m in _NUM_RE.finditer(stripped):
        raw = m.group("num").replace(",", "")
        unit = (m.group("unit") or "").lower()
        # "12 s" is seconds, but "12 steps"/"rank 12 slow" are not: the lookahead rejects letters
        # after a unit, so "s" only matches when followed by a non-word character.
        dim, scale = _UNITS.get(unit, ("none", 1.0))
        decimals = len(raw.split(".", 1)[1]) if "." in raw else 0
        out.append(Num(m.group(0).strip(), abs(float(raw)), decimals, dim, scale))
    return out


class NumberPool:
    """Numbers available to ground an answer, by dimension (times in us, ratios as percent)."""

    def __init__(self) -> None:
        self._by_dim: dict[Dim, list[float]] = {
            "time": [],
            "pct": [],
            "bw": [],
            "size": [],
            "none": [],
        }
        self._tables: dict[Dim, list[np.ndarray]] = {d: [] for d in self._by_dim}
        self._merged: dict[Dim, np.ndarray] | None = None

    def add(self, value: float, dim: Dim = "none") -> None:
        """Add ``value`` of dimension ``dim`` (time in us; pct in percent)."""
        try:
            v = abs(float(value))
        except (TypeError, ValueError):
            return
        if math.isnan(v) or math.isinf(v):
            return
        self._by_dim[dim].append(v)
        self._merged = None

    def add_named(self, name: str, value: float) -> None:
        """Add a unit-suffixed metric (``free_us``, ``wait_ratio``, ``bandwidth_gbps``...)."""
        dim, factor, raw_too = _named_dim(name)
        self.add(_f(value) * factor, dim)
        if raw_too:
            self.add(value, "none")

    def add_text(self, text: str) -> None:
        """Add every number written in ``text`` (with its unit)."""
        for n in extract_numbers(text):
            self.add(n.value * n.scale, n.dim)
            if n.dim == "none":
                continue
            self.add(n.value, "none")

    def add_table(self, df: pd.DataFrame, max_rows: int = 5000) -> None:
        """Add the numeric cells of ``df`` (unit from the column name)."""
        if df is None or df.empty:
            return
        for dim, arr in _table_values(df, max_rows):
            self._tables[dim].append(arr)
        self._merged = None

    def _arrays(self) -> dict[Dim, np.ndarray]:
        if self._merged is None:
            self._merged = {
                d: np.concatenate([np.asarray(self._by_dim[d], dtype="float64"), *self._tables[d]])
                for d in self._by_dim
            }
        return self._merged

    def matches(self, n: Num) -> bool:
        """Whether some pool value rounds to ``n`` at its displayed precision."""
        tol = 0.5 * 10 ** (-n.decimals) * (1 + 1e-9) + 1e-12
        dims: Sequence[Dim]
        if n.dim == "none":
            dims = ("none", "time", "pct", "bw", "size")
        else:
            dims = (n.dim, "none") if n.dim != "time" else ("time",)
        arrays = self._arrays()
        for d in dims:
            arr = arrays[d]
            if arr.size == 0:
                continue
            conv = arr / n.scale if d == n.dim else arr
            if bool(np.any(np.abs(conv - n.value) <= tol)):
                return True
        return False


_TABLE_CACHE: dict[int, tuple[weakref.ref[pd.DataFrame], list[tuple[Dim, np.ndarray]]]] = {}


def _table_values(df: pd.DataFrame, max_rows: int) -> list[tuple[Dim, np.ndarray]]:
    """(dimension, values in the base unit) per numeric column of ``df``, cached per table.

    Analyzer result tables are cached by the tool session and reused across turns, so each is
    read once.
    """
    key = id(df)
    hit = _TABLE_CACHE.get(key)
    if hit is not None and hit[0]() is df:
        return hit[1]
    out: list[tuple[Dim, np.ndarray]] = []
    sub = df.head(max_rows)
    for col in sub.columns:
        s = sub[col]
        if not pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            continue
        vals = pd.to_numeric(s, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
        vals = np.unique(np.abs(vals[np.isfinite(vals)]))
        dim, factor, raw_too = _named_dim(str(col))
        out.append((dim, vals * factor))
        if raw_too:
            out.append(("none", vals))
    try:
        ref = weakref.ref(df)
    except TypeError:  # not weak-referenceable: no caching
        return out
    if len(_TABLE_CACHE) > 512:
        for k in [k for k, (r, _) in _TABLE_CACHE.items() if r() is None]:
            del _TABLE_CACHE[k]
    _TABLE_CACHE[key] = (ref, out)
    return out


def _named_dim(name: str) -> tuple[Dim, float, bool]:
    """(dimension, factor to the base unit, also add the raw value) of a unit-suffixed name."""
    n = name.lower()
    if n.endswith(("_us_a", "_us_b", "_ms_a", "_ms_b", "_share_a", "_share_b")):
        # compare_ops' side columns (total_us_b, kernel_time_share_b)
        n = n[:-2]
    for stat in ("_median", "_mean", "_p50"):  # a statistic of a unit column (elapse_ms_median)
        n = n.removesuffix(stat)
    if n.endswith("_us"):
        return "time", 1.0, False
    if n.endswith("_ms"):
        return "time", 1000.0, False
    if n.endswith("_s"):
        return "time", 1e6, False
    if n.endswith(("_ratio", "_share", "_frac", "_fraction")):
        return "pct", 100.0, True
    if n.endswith(("_pct", "_percent")):
        return "pct", 1.0, False
    if n.endswith("_gbps"):
        return "bw", 1.0, False
    if n.endswith("_mb"):
        return "size", 1.0, False
    return "none", 1.0, False


def _f(v: float) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def check_grounding(text: str, pool: NumberPool) -> Grounding:
    """Check every number of ``text`` against ``pool``.

    Returns:
        :class:`Grounding` with totals and the ungrounded numbers as written.
    """
    nums = extract_numbers(text)
    bad = [n.text for n in nums if not pool.matches(n)]
    return Grounding(numbers_total=len(nums), numbers_grounded=len(nums) - len(bad), ungrounded=bad)


def pool_from_outputs(outputs: Iterable[object], extra_text: Iterable[str] = ()) -> NumberPool:
    """Build the pool from a turn's :class:`~advisor_chat.tools.ToolOutput` objects.

    Args:
        outputs: Tool outputs of the turn.
        extra_text: Other text whose numbers count as given (the user's question).
    """
    pool = NumberPool()
    for out in outputs:
        pool.add_text(getattr(out, "text", ""))
        for v in (getattr(out, "args", {}) or {}).values():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                pool.add(v)
        res = getattr(out, "result", None)
        if res is not None:
            for k, v in res.metrics.items():
                pool.add_named(k, v)
            for f in res.findings:
                for k, v in f.metrics.items():
                    pool.add_named(k, v)
                for r in f.ranks:
                    pool.add(r)
                if f.estimated_gain_us is not None:
                    pool.add(f.estimated_gain_us, "time")
                pool.add_text(f.summary)
                pool.add_text(f.summary_zh)
            pool.add_table(res.table)
            for t in res.tables.values():
                pool.add_table(t)
        page = getattr(out, "page", None)
        if page is not None:
            pool.add_table(page)
        for hit in getattr(out, "cases", []) or []:
            pool.add_text(hit.expected_effect)
            for r in hit.remedies:
                pool.add_text(r)
            from advisor_chat.agent.planner import case_remedy_zh

            pool.add_text(case_remedy_zh(hit.id) or "")
        diag = getattr(out, "diagnosis", None)
        if diag is not None:
            add_diagnosis(pool, diag)
    for t in extra_text:
        pool.add_text(t)
    return pool


def add_diagnosis(pool: NumberPool, diag: Any) -> None:
    """Add a :class:`~advisor_chat.diagnosis.Diagnosis`' numbers to ``pool``.

    Step time, shares, ranks, steps; the running sums of the causes' gains (and the median step
    minus each); per cause: metrics, gain (and, derived from it, the median
    step minus the gain and the gain's share of the step), victims' and own impacts (lost
    time and share), culprit ranks/link/stage/events, its sentences (summary, dominant, labels),
    remedies' gains and texts, and its findings' metrics and summaries.
    """
    pool.add(diag.step_time_us, "time")
    if math.isfinite(diag.clock_mhz):
        pool.add(diag.clock_mhz)  # the AI Core clock while busy (MHz), verdicts quote it
    for k, v in diag.shares.items():
        pool.add_named(f"{k}_share", v)
    for r in (*diag.ranks, *diag.steps, *diag.excluded_steps):
        pool.add(r)
    for t in (diag.headline, diag.headline_zh, *diag.notes, *diag.notes_zh):
        pool.add_text(t)
    # several causes fixed together (project.fix_together): the running sums of their gains in
    # the diagnosis' order, and the step they would leave
    # (all causes with a gain, and the faults alone: no job-wide cause or overlap bound)
    gained = [x for x in diag.causes if (x.gain_us or 0.0) > 0]
    faults = [
        x
        for x in gained
        if x.culprit.kind != "job"
        and x.mechanism.value not in ("exposed_communication", "job_hotspot")
    ]
    for seq in (gained, faults):
        total = 0.0
        for i, c in enumerate(seq):
            total += float(c.gain_us or 0.0)
            if i >= 1:
                pool.add(total, "time")
                if total < diag.step_time_us:
                    pool.add(diag.step_time_us - total, "time")
    for c in diag.causes:
        for k, v in c.metrics.items():
            pool.add_named(k, v)
        if c.gain_us is not None:
            pool.add(c.gain_us, "time")
            if 0 < c.gain_us < diag.step_time_us:  # the step after the fix and the share saved
                pool.add(diag.step_time_us - c.gain_us, "time")
                pool.add_named("gain_share", c.gain_us / diag.step_time_us)
        for imp in (*c.victims, *c.own):
            pool.add(imp.rank)
            pool.add(imp.lost_us, "time")
            pool.add_named("impact_share", imp.share)
        cu = c.culprit
        for r in (*cu.ranks, *(cu.link or ()), *(x for e in cu.events for x in e), *c.steps):
            pool.add(r)
        if cu.stage is not None:
            pool.add(cu.stage)
        for t in (
            c.summary,
            c.summary_zh,
            c.dominant,
            c.dominant_zh,
            cu.label,
            cu.label_zh,
            cu.shape,
        ):
            pool.add_text(t)
        for rem in c.remedies:
            if rem.gain_us is not None:
                pool.add(rem.gain_us, "time")
            pool.add_text(rem.text)
            pool.add_text(rem.text_zh)
        for f in c.findings:
            for k, v in f.metrics.items():
                pool.add_named(k, v)
            for r in f.ranks:
                pool.add(r)
            if f.estimated_gain_us is not None:
                pool.add(f.estimated_gain_us, "time")
            pool.add_text(f.summary)
            pool.add_text(f.summary_zh)
