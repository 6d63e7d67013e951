"""The diagnosis object: root causes with culprit, victims, evidence and typed remedies.

This module only defines data (see docs/CONTRACTS.md, "Diagnosis"). Fields may be added later,
never renamed or removed: the planner, the tools and the report code against these names.
Times are microseconds per step (``*_us``); shares are fractions of step time (0..1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from advisor_chat.analyzers.base import Category, Finding, Severity


class Mechanism(str, Enum):
    """How a root cause costs time (the blame rule that produced it)."""

    COMPUTE_STRAGGLER = "compute_straggler"
    HOST_STALL = "host_stall"
    SLOW_LINK = "slow_link"
    SLOW_GROUP = "slow_group"
    PIPELINE_IMBALANCE = "pipeline_imbalance"
    EXPOSED_COMMUNICATION = "exposed_communication"
    JOB_IDLE = "job_idle"
    JOB_HOTSPOT = "job_hotspot"
    STEP_EVENTS = "step_events"
    LATE_ARRIVAL = "late_arrival"
    DEGRADATION = "degradation"
    SKIPPED_UPDATE = "skipped_update"
    REGRESSION = "regression"
    DATA_ARTIFACT = "data_artifact"
    NOT_ENOUGH_SIGNAL = "not_enough_signal"
    NO_CULPRIT = "no_culprit"


class BoundKind(str, Enum):
    """What kind of number a gain is."""

    ESTIMATE = "estimate"
    UPPER_BOUND = "upper_bound"
    NONE = "none"


CulpritKind = Literal["rank", "ranks", "link", "stage", "group", "operator", "steps", "job", "none"]


@dataclass(frozen=True)
class Culprit:
    """What a cause is blamed on.

    Attributes:
        kind: ``rank``, ``ranks``, ``link``, ``stage``, ``group``, ``operator``, ``steps``,
            ``job`` or ``none``.
        ranks: Culprit ranks (rank/ranks/group/stage), sorted.
        link: ``(src_rank, dst_rank)`` for a link.
        transport: HCCS / RDMA / PCIE / SDMA / SIO for a link.
        stage: Pipeline stage index for a stage.
        operator: Op type or name that differs (compute/group causes). When the cause blames
            only some of that type's launches, its metrics carry ``operator_launches_per_step``
            and ``operator_us_per_step`` for those (e.g. the gradient accumulation's Adds).
        shape: Input shapes of that operator, when known.
        events: ``(step, rank)`` pairs for step events.
        label: English label, e.g. ``rank 12``, ``link 3→11 (RDMA)``.
        label_zh: Chinese label, e.g. ``12号卡``.
    """

    kind: CulpritKind
    ranks: tuple[int, ...] = ()
    link: tuple[int, int] | None = None
    transport: str = ""
    stage: int | None = None
    operator: str = ""
    shape: str = ""
    events: tuple[tuple[int, int], ...] = ()
    label: str = ""
    label_zh: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "kind": self.kind,
            "ranks": list(self.ranks),
            "link": list(self.link) if self.link is not None else None,
            "transport": self.transport,
            "stage": self.stage,
            "operator": self.operator,
            "shape": self.shape,
            "events": [list(e) for e in self.events],
            "label": self.label,
            "label_zh": self.label_zh,
        }


@dataclass(frozen=True)
class Impact:
    """How much of one victim rank's time a cause explains (per step, averaged over the cause's steps).

    Attributes:
        rank: The rank.
        lost_us: µs per step of this rank explained by the cause.
        share: ``lost_us`` / this rank's step time (0..1).
        how: ``collective_wait``, ``bubble``, ``slow_link_transit``, ``idle``, ``own_time``
            (own time, Computing + Free, beyond its peers') or, for a pipeline stage that holds
            the others back, ``stage_computing`` / ``stage_communication`` / ``stage_free`` (the
            rank's whole time of the component its stage is bound by, not an excess).
    """

    rank: int
    lost_us: float
    share: float
    how: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"rank": self.rank, "lost_us": self.lost_us, "share": self.share, "how": self.how}


@dataclass(frozen=True)
class Remedy:
    """A typed suggestion tied to its cause.

    Attributes:
        kind: ``action`` (a change to code/config/environment, with expected gain) or ``check``
            (what to look at next, no gain).
        text: English text.
        text_zh: Chinese text.
        gain_us: Expected per-step gain (µs), actions only; ``None`` for checks (an action
            without one takes its cause's); ``0.0`` with ``bound`` none: an action on the
            measurement (collect again), which gains the job nothing by itself.
        bound: What kind of number ``gain_us`` is.
        case_id: The knowledge case the remedy comes from, if any.
    """

    kind: Literal["action", "check"]
    text: str
    text_zh: str
    gain_us: float | None = None
    bound: BoundKind = BoundKind.NONE
    case_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "kind": self.kind,
            "text": self.text,
            "text_zh": self.text_zh,
            "gain_us": self.gain_us,
            "bound": self.bound.value,
            "case_id": self.case_id,
        }


@dataclass(frozen=True)
class RootCause:
    """One root cause: mechanism, culprit, victims, evidence, gain and remedies.

    Attributes:
        id: Stable id, e.g. ``cause.host_stall.r12``.
        mechanism: The blame rule that produced it.
        category: Bottleneck category (compute / scheduling / communication / none / unknown).
        culprit: What it is blamed on.
        victims: Ranks that lose time because of it (not the culprit's own time).
        summary: One English sentence answering "what is wrong" (numbers also in ``metrics``).
        summary_zh: The same in Chinese (identifiers only in Latin script).
        metrics: Unit-suffixed numbers the summary uses.
        findings: The analyzer findings that are symptoms of this cause.
        steps: Scope in steps; ``()`` means all steps.
        gain_us: Per-step time saved if fixed (µs).
        bound: What kind of number ``gain_us`` is.
        gain_after: Ranks that arrive after the culprit: ``gain_us`` shows only once they are
            fixed (alone, fixing the culprit saves nothing); ``()`` when it shows alone.
        remedies: Actions first, then checks.
        symptom_tags: Tags for case retrieval (``advisor_chat/symptoms.py`` vocabulary).
        dominant: What dominates the culprit's time, e.g.
            ``communication-bound (52% Communication Not Overlapped)``.
        dominant_zh: The same in Chinese.
        severity: From the share of step time explained.
    """

    id: str
    mechanism: Mechanism
    category: Category
    culprit: Culprit
    victims: tuple[Impact, ...]
    summary: str
    summary_zh: str
    metrics: dict[str, float]
    findings: tuple[Finding, ...]
    steps: tuple[int, ...] = ()
    gain_us: float | None = None
    bound: BoundKind = BoundKind.NONE
    remedies: tuple[Remedy, ...] = ()
    symptom_tags: tuple[str, ...] = ()
    gain_after: tuple[int, ...] = ()
    dominant: str = ""
    dominant_zh: str = ""
    severity: Severity = Severity.LOW
    own: tuple[Impact, ...] = ()

    def blamed_ranks(self) -> list[int]:
        """The ranks this cause blames, in order, once each.

        A slow link's endpoints; else the culprit ranks, then the ranks of its step events.
        """
        cu = self.culprit
        if cu.kind == "link" and cu.link is not None:
            return list(cu.link)
        out = list(cu.ranks)
        out += [r for _, r in cu.events if r not in out]
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``diagnosis.causes[]`` shape of ``report --format json``)."""
        return {
            "id": self.id,
            "mechanism": self.mechanism.value,
            "category": self.category.value,
            "culprit": self.culprit.to_dict(),
            "victims": [v.to_dict() for v in self.victims],
            "own": [v.to_dict() for v in self.own],
            "summary": self.summary,
            "summary_zh": self.summary_zh,
            "metrics": dict(self.metrics),
            "findings": [f.id for f in self.findings],
            "steps": list(self.steps),
            "gain_us": self.gain_us,
            "bound": self.bound.value,
            "gain_after_ranks": list(self.gain_after),
            "remedies": [r.to_dict() for r in self.remedies],
            "symptom_tags": list(self.symptom_tags),
            "dominant": self.dominant,
            "dominant_zh": self.dominant_zh,
            "severity": self.severity.value,
        }


Role = Literal["culprit", "on_link", "victim"]

_NOT_PERFORMANCE = (Mechanism.DATA_ARTIFACT, Mechanism.NOT_ENOUGH_SIGNAL, Mechanism.NO_CULPRIT)


@dataclass(frozen=True)
class Diagnosis:
    """Ranked root causes of one profile.

    Attributes:
        causes: Ranked, most important first (per-step time explained); empty = nothing stands out.
        other_findings: Findings not under any cause (environment checks, info).
        excluded_steps: Steps excluded as data artifacts.
        ranks: Ranks of the profile.
        steps: Steps of the profile (including excluded ones).
        step_time_us: Median step time (µs) over the kept steps.
        shares: Cluster-wide share of ``computing``, ``communication_not_overlapped``, ``free``,
            ``bubble`` in step time (0..1).
        headline: One sentence: the top cause, or "no culprit: … dominates every rank".
        headline_zh: The same in Chinese.
        notes: Caveats (English).
        notes_zh: The same in Chinese.
        left_out: Which input could not be used (a file skipped at load: the first one's
            message, and how many more), said with every answer; ``""`` when all was read.
        left_out_zh: The same in Chinese.
        left_out_ranks: Ranks some of whose input could not be used (the ranks of those
            warnings): what is said of them rests on the rest of their data.
        missing_ranks: Ranks the job had that the profile lacks (``missing_ranks`` load
            warnings, or below the recorded world size): no statement covers them.
        nodes: The ranks of each node (server), ordered by their lowest rank, from the on-node
            (HCCS/PCIe/SIO) links of ``comm_matrix``; ``()`` when the matrix does not show them.
        one_node: On-node links join every rank into one node (``nodes`` is then ``()``).
        capture: The profiler settings that add host work (``'Level2, with_stack=True'``) when
            most ranks were captured with them, ``'light'`` when the configuration is recorded
            and light, ``''`` when no rank records one (profiler_info.json).
        host_data: Whether the profile has host launch data (host_dispatch: trace_view.json
            flows or the DB's CANN_API).
        comm_data: Whether it has communication data to judge the links with (comm_matrix or
            comm_bandwidth rows: communication_matrix.json / communication.json).
        links_judged: Whether the slow_link analyzer compared links against their peers (False
            without link data or with too few comparable links: no link can be called healthy).
        kernel_data: Whether it has per-kernel data (``kernels``: kernel_details.csv or the DB's
            TASK table) for some rank, so the operator checks ran.
        clock_mhz: Median over a sample of ranks of the AI Core clock while busy (MHz, the AI Core
            Freq counter track, idle clock left out); NaN without the track.
        versions: The software versions the ranks record (profiler_info / DB META_DATA):
            ``(software, version, ranks)`` per distinct value, software ``CANN`` or
            ``torch_npu``; empty when none is recorded.
        shapes_repeat: Whether every later step runs only the (operator, input shapes) pairs of
            the first captured step (:func:`~advisor_chat.diagnosis.decompose.shapes_repeat`,
            kernel_details.csv Input Shapes); ``None`` when the kernels do not tell.
    """

    causes: tuple[RootCause, ...]
    other_findings: tuple[Finding, ...]
    excluded_steps: tuple[int, ...]
    ranks: tuple[int, ...]
    steps: tuple[int, ...]
    step_time_us: float
    shares: dict[str, float]
    headline: str
    headline_zh: str
    notes: tuple[str, ...] = ()
    notes_zh: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = field(default=(), repr=False)
    left_out: str = ""
    left_out_zh: str = ""
    left_out_ranks: tuple[int, ...] = ()
    missing_ranks: tuple[int, ...] = ()
    nodes: tuple[tuple[int, ...], ...] = ()
    one_node: bool = False
    capture: str = ""
    host_data: bool = False
    comm_data: bool = False
    links_judged: bool = True
    kernel_data: bool = False
    clock_mhz: float = float("nan")
    versions: tuple[tuple[str, str, tuple[int, ...]], ...] = ()
    shapes_repeat: bool | None = None

    def role_of(self, rank: int) -> list[tuple[RootCause, Role, Impact | None]]:
        """Each cause touching ``rank`` and the rank's role in it, ordered by lost time.

        Data-artifact, not-enough-signal and no-culprit causes touch no rank. Roles: ``culprit`` (the rank is or belongs to the culprit; the Impact is its own excess
        time when known), ``on_link`` (an endpoint of the blamed link), ``victim`` (it loses
        time because of the cause; the Impact says how much).
        """
        out: list[tuple[RootCause, Role, Impact | None]] = []
        for cause in self.causes:
            if cause.mechanism in _NOT_PERFORMANCE:
                continue  # an excluded step or "not enough signal" blames no rank
            c = cause.culprit
            own = next((i for i in cause.own if i.rank == rank), None)
            if c.kind == "link" and c.link is not None and rank in c.link:
                out.append((cause, "on_link", own))
                continue
            if rank in c.ranks or any(r == rank for _, r in c.events):
                out.append((cause, "culprit", own))
                continue
            victim = next((i for i in cause.victims if i.rank == rank), None)
            if victim is not None:
                out.append((cause, "victim", victim))
        out.sort(key=lambda t: -(t[2].lost_us if t[2] is not None else 0.0))
        return out

    def top(self) -> RootCause | None:
        """The most important cause, or ``None`` when there is none."""
        return self.causes[0] if self.causes else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``diagnosis`` key of ``report --format json``)."""
        return {
            "headline": self.headline,
            "headline_zh": self.headline_zh,
            "causes": [c.to_dict() for c in self.causes],
            "other_findings": [f.id for f in self.other_findings],
            "excluded_steps": list(self.excluded_steps),
            "ranks": list(self.ranks),
            "missing_ranks": list(self.missing_ranks),
            "steps": list(self.steps),
            "step_time_us": self.step_time_us,
            "shares": dict(self.shares),
            "notes": list(self.notes),
            "notes_zh": list(self.notes_zh),
            # the AI Core clock while busy (MHz), when the trace has the counter track
            **({"clock_mhz": self.clock_mhz} if math.isfinite(self.clock_mhz) else {}),
        }
