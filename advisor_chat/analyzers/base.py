"""The one result type of every analyzer, findings, and the analyzer registry (STYLE.md §4, §6).

An analyzer is a pure function ``(Profile, Params) -> AnalyzerResult`` registered with
:func:`register`. Its ``Params`` is a pydantic model whose field descriptions (with units) become
the function-calling tool schema.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, TypeVar

import pandas as pd
from pydantic import BaseModel, ConfigDict

from advisor_chat.ingest.profile import Profile


class Severity(str, Enum):
    """Severity from the finding's share of step time: HIGH ≥ 5%, MEDIUM ≥ 3%, else LOW."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"

    @classmethod
    def from_share(cls, share: float) -> Severity:
        """Map a share of step time (0..1) to a severity (≥ 0.05 high, ≥ 0.03 medium, else low)."""
        if share >= 0.05:
            return cls.HIGH
        if share >= 0.03:
            return cls.MEDIUM
        return cls.LOW

    @property
    def rank(self) -> int:
        """Sort key: 0 for HIGH ... 3 for INFO."""
        return ["high", "medium", "low", "info"].index(self.value)


class FindingKind(str, Enum):
    """What a finding is about."""

    SLOW_RANK = "slow_rank"
    SLOW_LINK = "slow_link"
    BOTTLENECK = "bottleneck"
    OP_REGRESSION = "op_regression"
    LOAD_IMBALANCE = "load_imbalance"
    HOST_BOUND = "host_bound"
    DATALOADER = "dataloader"
    COMMUNICATION = "communication"
    MC2_OPPORTUNITY = "mc2_opportunity"
    DEGRADATION = "degradation"
    JITTER = "jitter"
    PROFILE_DIFF = "profile_diff"
    ENV = "env"
    DATA_QUALITY = "data_quality"
    AICPU_OP = "aicpu_op"
    DYNAMIC_SHAPE = "dynamic_shape"


class Category(str, Enum):
    """Bottleneck category of the seeds' classification."""

    COMPUTE = "compute"
    SCHEDULING = "scheduling"
    COMMUNICATION = "communication"
    NONE = "none"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Evidence:
    """Where a finding's numbers come from.

    Attributes:
        table: Canonical table name (``step_trace``, ``kernels``, ...).
        source: File(s) the rows were read from, as a short citation.
        rows: Selector of the rows used, e.g. ``{"rank": 12, "step": 3}`` or a list of op names.
        note: How the number was computed (formula), when not obvious.
    """

    table: str
    source: str
    rows: dict[str, Any] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class Finding:
    """One diagnosed fact, with numbers and where they come from.

    Attributes:
        id: Stable id, ``{analyzer}.{kind}.{discriminator}`` e.g. ``slow_rank.slow_rank.r12``.
        kind: What it is about.
        severity: From share of step time (see :class:`Severity`).
        summary: One line, English, numbers included (each also in ``metrics``).
        ranks: Ranks concerned (sorted).
        metrics: Unit-suffixed numbers (``free_us``, ``free_share``, ``bandwidth_gbps``...).
        evidence: Where the numbers come from.
        symptom_tags: Vocabulary shared with ``knowledge/cases`` front matter.
        estimated_gain_us: Per-step time saved if the cause were fixed, when computable.
        category: Bottleneck category when the finding classifies one.
        summary_zh: The summary in Chinese, when the analyzer provides one.
    """

    id: str
    kind: FindingKind
    severity: Severity
    summary: str
    ranks: tuple[int, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    evidence: tuple[Evidence, ...] = ()
    symptom_tags: tuple[str, ...] = ()
    estimated_gain_us: float | None = None
    category: Category | None = None
    summary_zh: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``report --format json`` finding shape)."""
        return {
            "id": self.id,
            "kind": self.kind.value,
            "severity": self.severity.value,
            "ranks": list(self.ranks),
            "summary": self.summary,
            "summary_zh": self.summary_zh,
            "metrics": dict(self.metrics),
            "evidence": [
                {"table": e.table, "source": e.source, "rows": e.rows, "note": e.note}
                for e in self.evidence
            ],
            "symptom_tags": list(self.symptom_tags),
            "estimated_gain_us": self.estimated_gain_us,
            "category": self.category.value if self.category else None,
        }


@dataclass(frozen=True)
class AnalyzerResult:
    """The single result type of every analyzer.

    Attributes:
        name: Analyzer name (registry key).
        table: The main result table (documented per analyzer), unrounded.
        metrics: Headline numbers, unit-suffixed names.
        findings: Diagnosed facts, most important first.
        notes: Caveats, e.g. "no communication data (profiler Level0)"; "not enough signal" cases.
        notes_zh: The same notes in Chinese, one for one (empty tuple, or ``""`` for one note:
            not translated; a report in Chinese then shows it in English, labelled so).
        tables: Extra named tables (e.g. ``by_shape``) for the UI and paging tool.
    """

    name: str
    table: pd.DataFrame
    metrics: dict[str, float] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes_zh: tuple[str, ...] = ()


def notes_in_chinese(notes: list[str], twins: dict[str, str]) -> tuple[str, ...]:
    """``AnalyzerResult.notes_zh`` for ``notes``: each note's Chinese twin by its English text.

    ``twins`` maps a note's English text to its Chinese (a note with figures in it is added by its
    caller as it formats both); a note without a twin gets ``""``.
    """
    return tuple(twins.get(n, "") for n in notes)


class Params(BaseModel):
    """Base of every analyzer's parameters. Field descriptions become tool schemas.

    Validators are built on first use (``defer_build``): a question calls two or three of the
    thirteen tools, and building all of them took ~30 ms of every ``ask``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


P = TypeVar("P", bound=Params)


@dataclass(frozen=True)
class AnalyzerSpec(Generic[P]):
    """A registered analyzer.

    Attributes:
        name: Registry key and tool name.
        func: The pure function ``(profile, params) -> AnalyzerResult``.
        params: The pydantic params class.
        description: First paragraph of the function's docstring (the tool description).
        order: Report order (data quality first).
        in_report: Whether ``report`` runs it by default.
        needs_baseline: Whether it compares two profiles (takes ``baseline`` keyword).
    """

    name: str
    func: Callable[..., AnalyzerResult]
    params: type[P]
    description: str
    order: int = 50
    in_report: bool = True
    needs_baseline: bool = False

    def run(self, profile: Profile, params: P | None = None, **kwargs: Any) -> AnalyzerResult:
        """Run the analyzer with ``params`` (defaults when ``None``)."""
        return self.func(profile, params if params is not None else self.params(), **kwargs)


REGISTRY: dict[str, AnalyzerSpec[Any]] = {}


def register(
    name: str,
    params: type[P],
    *,
    order: int = 50,
    in_report: bool = True,
    needs_baseline: bool = False,
) -> Callable[[Callable[..., AnalyzerResult]], Callable[..., AnalyzerResult]]:
    """Register an analyzer under ``name``.

    Raises:
        ValueError: ``name`` is already registered or the function has no docstring.
    """

    def deco(func: Callable[..., AnalyzerResult]) -> Callable[..., AnalyzerResult]:
        if name in REGISTRY:
            raise ValueError(f"analyzer {name!r} is already registered")
        doc = (func.__doc__ or "").strip()
        if not doc:
            raise ValueError(
                f"analyzer {name!r} needs a docstring (it becomes the tool description)"
            )
        description = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
        REGISTRY[name] = AnalyzerSpec(
            name, func, params, description, order, in_report, needs_baseline
        )
        return func

    return deco


def get_analyzer(name: str) -> AnalyzerSpec[Any]:
    """Return the registered analyzer ``name``.

    Raises:
        KeyError: Unknown name; the message lists the registered ones.
    """
    load_all()
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown analyzer {name!r}; registered: {sorted(REGISTRY)}") from None


def load_all() -> dict[str, AnalyzerSpec[Any]]:
    """Import every analyzer module so that the registry is complete; return the registry."""
    import importlib
    import pkgutil

    import advisor_chat.analyzers as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if not mod.name.startswith("_") and mod.name != "base":
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
    return REGISTRY
