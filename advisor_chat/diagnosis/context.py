"""What every blame rule reads: per-rank time split, stages, groups, analyzer results, citations.

The per-rank split comes from ``step_trace`` (``step_trace_time.csv`` / cluster step trace), mean per
step over the kept steps (data-artifact steps removed), via :func:`step_frame`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from advisor_chat.analyzers._common import format_ranks, pipeline_stages, step_frame
from advisor_chat.analyzers.base import AnalyzerResult, Finding
from advisor_chat.diagnosis.text import num
from advisor_chat.ingest.profile import Profile
from advisor_chat.ingest.schema import empty_table

#: Per-rank columns of :attr:`Context.per_rank` (µs per step, mean over kept steps).
SPLIT_COLUMNS = (
    "computing_us",
    "communication_not_overlapped_us",
    "communication_not_overlapped_exclude_receive_us",
    "overlapped_us",
    "free_us",
    "bubble_us",
    "step_us",
)


@dataclass
class Context:
    """Inputs of the blame rules.

    Attributes:
        profile: The profile the rules read (data-artifact steps removed).
        results: Analyzer results by name (run on ``profile``).
        frame: ``step_frame`` rows (rank × step), µs.
        per_rank: Mean per step by rank of :data:`SPLIT_COLUMNS` (µs), plus ``own_us`` =
            computing + free (the time a rank spends on its own, not waiting in collectives).
        step_us: Median over ranks of the mean step time (µs).
        stages: Pipeline stages (tuples of ranks), ``[]`` without pipeline parallelism.
        findings: Every analyzer finding (report order).
        claimed: Finding ids already hung under a cause.
        cache: Intermediate tables shared by the rules (e.g. per-stage pivots).
    """

    profile: Profile
    results: dict[str, AnalyzerResult]
    frame: pd.DataFrame
    per_rank: pd.DataFrame
    step_us: float
    stages: list[tuple[int, ...]]
    findings: list[Finding]
    claimed: set[str] = field(default_factory=set)
    cache: dict[Any, Any] = field(default_factory=dict)

    @property
    def ranks(self) -> list[int]:
        """Ranks with a step trace."""
        return [int(r) for r in self.per_rank.index]

    def result(self, name: str) -> AnalyzerResult | None:
        """The analyzer result ``name``, if it ran."""
        return self.results.get(name)

    def finding(self, prefix: str) -> list[Finding]:
        """Findings whose id starts with ``prefix``."""
        return [f for f in self.findings if f.id.startswith(prefix)]

    def rank_steps(self, rank: int) -> int:
        """Steps in which ``rank`` has a step-trace row.

        A rank whose file lost a step is judged on the steps it has: a missing step is no
        evidence that it ran normally there.
        """
        if "rank_steps" not in self.cache:
            self.cache["rank_steps"] = self.frame.groupby("rank")["step"].nunique().to_dict()
        return int(self.cache["rank_steps"].get(rank, 0))

    def stage_of(self, rank: int) -> int | None:
        """Stage index of ``rank`` or ``None``."""
        for i, s in enumerate(self.stages):
            if rank in s:
                return i
        return None

    def peers(self, rank: int) -> list[int]:
        """Ranks that meet ``rank`` in collectives: its pipeline stage, else every rank."""
        st = self.stage_of(rank)
        pool = list(self.stages[st]) if st is not None else self.ranks
        return [r for r in pool if r in self.per_rank.index]

    @property
    def attribution(self) -> Any:
        """The profile's :class:`~advisor_chat.diagnosis.attribution.WaitAttribution` (or ``None``).

        Computed once from ``comm_ops`` (Wait Time per collective instance) and cached.
        """
        if "attribution" not in self.cache:
            from advisor_chat.diagnosis.attribution import attribute

            step = self.step_us if math.isfinite(self.step_us) else float("nan")
            self.cache["attribution"] = attribute(self.profile, self.stages, step, self.nodes)
        return self.cache["attribution"]

    @property
    def distributed_args(self) -> dict[str, Any]:
        """The framework's parallel settings as recorded (``meta.distributed_args``), ``{}`` if none.

        From profiler_metadata.json ``distributed_args`` (Megatron / MindSpeed arguments); the
        first rank that records them.
        """
        if "distributed_args" not in self.cache:
            meta = self.profile.get("meta")
            args: dict[str, Any] = {}
            if not meta.empty and "distributed_args" in meta.columns:
                args = next((a for a in meta["distributed_args"] if isinstance(a, dict) and a), {})
            self.cache["distributed_args"] = args
        return self.cache["distributed_args"]

    @property
    def clocks(self) -> dict[int, float]:
        """Mean AI Core clock while busy (MHz) of a sample of the ranks, ``{}`` without the track.

        :func:`~advisor_chat.diagnosis.rules.clock.busy_clock_mhz` of the ``aicore_freq`` rows of
        up to ``PEER_SAMPLE`` ranks (the AI Core Freq counter track); computed once and cached.
        """
        if "clocks" not in self.cache:
            from advisor_chat.diagnosis.decompose import _sample
            from advisor_chat.diagnosis.rules.clock import busy_clock_mhz

            ranks = _sample([int(r) for r in self.per_rank.index])
            freq = self.profile.aicore_freq_for(ranks) if ranks else None
            self.cache["clocks"] = (
                busy_clock_mhz(freq) if freq is not None and not freq.empty else {}
            )
        return dict(self.cache["clocks"])

    @property
    def nodes(self) -> list[tuple[int, ...]]:
        """Nodes (hosts) from on-node links (:func:`~advisor_chat.diagnosis.attribution.nodes`), cached."""
        if "nodes" not in self.cache:
            from advisor_chat.diagnosis.attribution import nodes

            self.cache["nodes"] = nodes(self.profile)
        out: list[tuple[int, ...]] = self.cache["nodes"]
        return out

    @property
    def host_groups(self) -> list[Any]:
        """Groups of nodes by hostname (racks, pods; :func:`~advisor_chat.diagnosis.attribution.host_groups`), cached."""
        if "host_groups" not in self.cache:
            from advisor_chat.diagnosis.attribution import host_groups

            self.cache["host_groups"] = host_groups(self.profile, self.nodes)
        out: list[Any] = self.cache["host_groups"]
        return out

    def cite(self, table: str = "step_trace") -> str:
        """Short citation of a table's source files."""
        return self.profile.cite(table)

    def val(self, rank: int, col: str) -> float:
        """``per_rank[col]`` for ``rank`` (0.0 when missing)."""
        try:
            v = num(self.per_rank.at[rank, col])
        except KeyError:
            return 0.0
        return v if math.isfinite(v) else 0.0


def _complete_step_trace(profile: Profile) -> Profile:
    """``profile`` with every canonical ``step_trace`` column present (NaN when missing)."""
    import dataclasses

    st = profile.get("step_trace")
    ref = empty_table("step_trace")
    missing = [c for c in ref.columns if c not in st.columns]
    if not missing:
        return profile
    st = st.copy()
    for c in missing:
        st[c] = np.nan
    return dataclasses.replace(profile, tables={**profile.tables, "step_trace": st})


def build_context(profile: Profile, results: dict[str, AnalyzerResult]) -> Context:
    """Build the rule inputs from ``profile`` and its analyzer results."""
    from advisor_chat.analyzers.runner import sort_findings

    profile = _complete_step_trace(profile)
    frame = step_frame(profile) if profile.has("step_trace") else pd.DataFrame()
    if frame.empty:
        per = pd.DataFrame(columns=[*SPLIT_COLUMNS, "own_us"], dtype="float64")
        step = float("nan")
    else:
        per = frame.groupby("rank")[list(SPLIT_COLUMNS)].mean()
        per["own_us"] = per["computing_us"] + per["free_us"]
        step = float(np.median(per["step_us"]))
    findings: list[Finding] = []
    for res in results.values():
        findings.extend(res.findings)
    return Context(
        profile=profile,
        results=results,
        frame=frame,
        per_rank=per,
        step_us=step,
        stages=infer_stages(profile),
        findings=sort_findings(findings),
    )


def infer_stages(profile: Profile) -> list[tuple[int, ...]]:
    """Pipeline stages: :func:`pipeline_stages`, else from named communication groups.

    Fallback rule (per-rank exports carry no stage column): when ``comm_groups`` has groups whose
    name starts with ``pp`` (pipeline send/receive pairs), the stages are the connected components
    of the ranks over every *other* named group (tp, dp, cp, ep... live inside one stage; a group
    holding every rank, e.g. ``default_group``, is skipped), ordered
    by their lowest rank; used only when there are ≥ 2 components and every pp group links
    different components.
    """
    stages = pipeline_stages(profile)
    if stages:
        return stages
    g = profile.get("comm_groups")
    if g.empty or "group_name" not in g.columns:
        return _stages_from_bubble(profile)
    names = g["group_name"].astype("string").fillna("").str.lower()
    pp = g[names.str.startswith("pp")]
    other = g[(names != "") & ~names.str.startswith("pp")]
    if pp.empty or other.empty:
        return _stages_from_bubble(profile)
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    world = set(profile.ranks)
    for rs in other["ranks"]:
        rl = [int(r) for r in rs] if isinstance(rs, (list, tuple, np.ndarray)) else []
        if len(rl) > 1 and set(rl) >= world:
            continue  # a world / default group spans every stage
        for r in rl:
            find(r)
        for a, b in itertools.pairwise(rl):
            parent[find(a)] = find(b)
    comps: dict[int, list[int]] = {}
    for r in list(parent):
        comps.setdefault(find(r), []).append(r)
    if len(comps) < 2:
        return []
    for rs in pp["ranks"]:
        rl = [int(r) for r in rs] if isinstance(rs, (list, tuple, np.ndarray)) else []
        if len(rl) < 2 or len({find(r) for r in rl if r in parent}) < 2:
            return []
    return sorted((tuple(sorted(c)) for c in comps.values()), key=lambda t: t[0])


#: A rank waits in pipeline receives when its Bubble is at least this share of its step.
BUBBLE_STAGE_SHARE = 0.05


def _stages_from_bubble(profile: Profile) -> list[tuple[int, ...]]:
    """Two pipeline sides from the step trace's Bubble when nothing names the stages.

    Bubble is the time a rank waits in pipeline receives: ranks with Bubble ≥
    ``BUBBLE_STAGE_SHARE`` of their step are fed by the ranks without any, which come first.
    Used only when both sides exist and every rank of the first has no Bubble at all (a cluster
    step trace whose stage rows were dropped, an export without ``PP Index``). With more than two
    stages the later ones come out as one side: the answer names the first side's ranks and
    the ranks that wait for them, not a stage number of the job.
    """
    st = profile.get("step_trace")
    if st.empty or "bubble_us" not in st.columns or "step_us" not in st.columns:
        return []
    per = st.groupby("rank")[["bubble_us", "step_us"]].mean()
    per = per[per["step_us"] > 0]
    if len(per) < 4:
        return []
    share = per["bubble_us"].fillna(0.0) / per["step_us"]
    waiting = sorted(int(r) for r in share.index[share >= BUBBLE_STAGE_SHARE])
    feeding = sorted(int(r) for r in share.index[per["bubble_us"].fillna(0.0) <= 0])
    if not waiting or not feeding or len(waiting) + len(feeding) != len(per):
        return []
    return [tuple(feeding), tuple(waiting)]


def ranks_label(ranks: Any) -> tuple[str, str]:
    """English and Chinese labels of a rank set: ``rank 3`` / ``3号卡``, ``ranks 0-7`` / ``0-7号卡``."""
    rs = sorted(int(r) for r in ranks)
    txt = format_ranks(rs)
    if len(rs) == 1:
        return f"rank {rs[0]}", f"{rs[0]}号卡"
    return f"ranks {txt}", f"{format_ranks(rs, sep='、')}号卡"
