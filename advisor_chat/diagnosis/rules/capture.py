"""Capture rule: a heavy profiler configuration makes part of the host-side idle it measures.

Public case C05 (docs/DIAGNOSIS.md): at profiler Level2, and with Python call stacks
(``with_stack=True``), the profiler adds its own host work to every operator launch; the device
then idles between kernels although the job without the profiler would not. A cause that rests
on host-side idle (a host stall, a job-wide idle) measured in such a capture says so, and its first
remedy is to collect again with a light configuration before tuning the dispatch.

Source: ``meta.config`` (``profiler_info_*.json``: ``common_config.with_stack``,
``experimental_config._profiler_level``), ``host_dispatch.api_duration_us`` (trace_view.json / DB
CANN_API: how long the launch calls take).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from advisor_chat.diagnosis.context import Context
from advisor_chat.diagnosis.decompose import _sample
from advisor_chat.diagnosis.text import pct
from advisor_chat.diagnosis.types import BoundKind, Mechanism, Remedy, RootCause
from advisor_chat.ingest.profile import Profile


@dataclass(frozen=True)
class Capture:
    """The profiler configuration of a capture, over the ranks that record one.

    Attributes:
        level: ``_profiler_level`` of most ranks (``Level0`` / ``Level1`` / ``Level2``), or ``""``.
        with_stack: Python call stacks recorded (``with_stack=True``) on most ranks.
        record_shapes: Input shapes recorded on most ranks.
        ranks: Ranks with a recorded configuration.
        heavy_ranks: Of those, the ranks captured at Level2 or with call stacks.
        launch_us: Median duration of a launch call (µs, ``api_duration_us`` of the launches of
            the ranks read), NaN when not measured.
    """

    level: str
    with_stack: bool
    record_shapes: bool
    ranks: tuple[int, ...]
    heavy_ranks: tuple[int, ...]
    launch_us: float = math.nan

    @property
    def heavy(self) -> bool:
        """Level2 or call stacks on at least half of the ranks with a configuration."""
        return bool(self.ranks) and 2 * len(self.heavy_ranks) >= len(self.ranks)

    def settings(self, zh: bool = False) -> str:
        """The heavy settings as written: ``'Level2 with with_stack=True'``."""
        parts = []
        if self.level == "Level2":
            parts.append("Level2")
        if self.with_stack:
            parts.append("with_stack=True")
        if self.record_shapes and parts:
            parts.append("record_shapes=True")
        return ("、" if zh else ", ").join(parts)


def _get(d: Any, *path: str) -> Any:
    for k in path:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def capture(profile: Profile) -> Capture | None:
    """The capture's profiler configuration from ``meta.config`` (``None`` when no rank has one)."""
    meta = profile.get("meta")
    if meta.empty or "config" not in meta.columns:
        return None
    ranks: list[int] = []
    heavy: list[int] = []
    levels: list[str] = []
    stacks = shapes = 0
    for r, cfg in zip(meta["rank"], meta["config"], strict=True):
        if not isinstance(cfg, dict) or not cfg:
            continue
        rank = int(r)
        level = str(_get(cfg, "experimental_config", "_profiler_level") or "")
        stack = _get(cfg, "common_config", "with_stack") is True
        shapes += _get(cfg, "common_config", "record_shapes") is True
        stacks += stack
        ranks.append(rank)
        levels.append(level)
        if level == "Level2" or stack:
            heavy.append(rank)
    if not ranks:
        return None
    level = pd.Series(levels).mode().iloc[0] if levels else ""
    return Capture(
        level=str(level),
        with_stack=2 * stacks >= len(ranks),
        record_shapes=2 * shapes >= len(ranks),
        ranks=tuple(ranks),
        heavy_ranks=tuple(heavy),
    )


def launch_us(profile: Profile, ranks: list[int]) -> float:
    """Median duration of a launch call (µs) over ``ranks``' ``host_dispatch`` rows with a task."""
    hd = profile.host_dispatch_for(ranks)
    if hd.empty or "api_duration_us" not in hd.columns:
        return math.nan
    launches = hd[hd["device_start_us"].notna()]
    v = pd.to_numeric(launches["api_duration_us"], errors="coerce").dropna()
    return float(v.median()) if len(v) else math.nan


#: Causes that rest on host-side idle: a heavy capture inflates exactly these.
HOST_SIDE = (Mechanism.HOST_STALL, Mechanism.JOB_IDLE)


def rule_capture(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Capture rule: a host-side cause measured in a heavy capture says so and asks for a light one.

    A cause whose mechanism is a host stall or a job-wide idle, in a capture taken at Level2 or
    with call stacks on most ranks (:func:`capture`), gets a sentence naming the settings (and the
    launch calls' median duration when measured; first at Level2, after the cause's own text
    otherwise) and, as its first remedy, collecting again at
    Level1 (or Level0) without call stacks; its gain stays the captured idle's, an upper bound of
    what the real run can get back.
    """
    cap = capture(ctx.profile)
    if cap is None or not cap.heavy or not any(c.mechanism in HOST_SIDE for c in causes):
        return causes
    cap = dataclasses.replace(cap, launch_us=launch_us(ctx.profile, _sample(list(ctx.ranks))))
    every = len(cap.heavy_ranks) == len(cap.ranks)
    on = "every rank" if every else f"{len(cap.heavy_ranks)} of {len(cap.ranks)} ranks"
    on_zh = "所有卡" if every else f"{len(cap.ranks)} 张卡中的 {len(cap.heavy_ranks)} 张"
    launch = (
        f"; launch calls take {cap.launch_us:.0f} µs (median)"
        if math.isfinite(cap.launch_us)
        else ""
    )
    launch_zh = (
        f"；下发调用耗时中位数 {cap.launch_us:.0f} µs" if math.isfinite(cap.launch_us) else ""
    )
    en = (
        f"This capture was taken with the profiler's {cap.settings()} on {on}{launch}: the profiler adds its own "
        "host work to every operator launch, so part or all of this idle may be the profiler's, "
        "not the job's. "
    )
    zh = (
        f"这份数据是在{on_zh}上以 {cap.settings(zh=True)} 采集的{launch_zh}：profiler 会给每个算子的下发"
        "增加自身的主机开销，这部分空闲可能部分或全部来自采集本身，而不是作业。"
    )
    # an action (the profiler's configuration is changed) that comes before any tuning: the
    # gain of tuning the job can only be told from a light capture
    again = Remedy(
        "action",
        "Collect again at Level1 (or Level0) without with_stack / record_shapes, a few steps, and "
        "compare the Free before tuning the dispatch on this capture.",
        "先以 Level1（或 Level0）、关闭 with_stack / record_shapes 重新采集几步，对比空闲时间，"
        "再决定是否按这份数据调整下发。",
        0.0,  # an action on the measurement: no gain of its own (not the cause's)
        BoundKind.NONE,
    )
    lead = cap.level.strip().lower() == "level2"
    out = []
    for c in causes:
        if c.mechanism not in HOST_SIDE or not _may_be_profiler(c, cap):
            out.append(c)
            continue
        out.append(
            dataclasses.replace(
                c,
                # a Level2 capture's overhead may be the whole idle: said first; call stacks
                # alone add less, said after what the data shows (trial: "why is every rank
                # idle?" opened with the caveat on the real 2-rank sample)
                summary=en + c.summary if lead else f"{c.summary} {en.strip()}",
                summary_zh=zh + c.summary_zh if lead else c.summary_zh + zh,
                metrics={
                    **c.metrics,
                    "capture_heavy_ranks": float(len(cap.heavy_ranks)),
                    **(
                        {"launch_api_us_median": cap.launch_us}
                        if math.isfinite(cap.launch_us)
                        else {}
                    ),
                },
                remedies=(again, *c.remedies),
                symptom_tags=tuple(dict.fromkeys((*c.symptom_tags, "profiler_overhead"))),
            )
        )
    return out


#: Metrics of a host-side cause whose idle the profiler's per-launch work cannot make: the host's
#: own Python named (``python_frame_us``), one stretch at a fixed point of the step
#: (``idle_stretch_us``), the host's memory calls (``host_memory_call_us``).
_JOBS_OWN = ("python_frame_us", "idle_stretch_us", "host_memory_call_us")


def _may_be_profiler(c: RootCause, cap: Capture) -> bool:
    """Whether part of cause ``c``'s idle may be the heavy capture's own host work.

    The profiler adds its work to every launch: it lengthens the gaps between launches, on every
    rank captured so. Not the idle of a cause whose metrics place it elsewhere
    (:data:`_JOBS_OWN`), nor one rank's excess over peers captured the same way (every rank heavy).
    """
    if any(k in c.metrics for k in _JOBS_OWN):
        return False
    # (one rank's excess over peers that carry the same profiler work is its own)
    return not (c.culprit.kind in ("rank", "ranks") and set(cap.heavy_ranks) >= set(cap.ranks))


def capture_text(cap: Capture, zh: bool) -> str:
    """One clause on the capture's configuration, for verdicts: ``'Level2, with_stack=True on every rank'``."""
    share = pct(len(cap.heavy_ranks) / len(cap.ranks)) if cap.ranks else ""
    if zh:
        return f"{cap.settings(zh=True) or cap.level}（{share} 的卡）"
    return f"{cap.settings() or cap.level} ({share} of the ranks)"
