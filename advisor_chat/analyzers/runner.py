"""Run every report analyzer on a profile once: results, findings, notes, and how each run went.

The one place the analyzers are run for a whole profile: the diagnosis (``advisor_chat.diagnosis``)
and the report (``advisor_chat.reporting``) both call :func:`run_analyzers`, so the diagnosis
does not depend on the report that renders it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from advisor_chat.analyzers.base import AnalyzerResult, Finding, load_all
from advisor_chat.errors import InputError, NotAnswerableError, ToolArgumentError
from advisor_chat.ingest.profile import Profile

#: Analyzers that only make sense with extra input.
_NEEDS_RANK = "explain_rank"


@dataclass(frozen=True)
class AnalyzerRun:
    """How one analyzer went in a report.

    Attributes:
        name: Registry name.
        status: ``ok``, ``not_answerable``, ``bad_arguments``, ``bad_input`` (a file it needed
            could not be read), ``error`` or ``skipped``.
        seconds: Wall time of the run (s).
        findings: Number of findings it returned.
        message: Why it did not run / failed, if so.
        message_zh: The same in Chinese when the error gave it (``NotAnswerableError.zh``).
    """

    name: str
    status: str
    seconds: float = 0.0
    findings: int = 0
    message: str = ""
    message_zh: str = ""


@dataclass(frozen=True)
class Analysis:
    """Every report analyzer's outcome on one profile.

    Attributes:
        results: Analyzer results by registry name (only the ones that ran).
        findings: Every finding, sorted (:func:`sort_findings`).
        notes: Analyzer notes and why an analyzer did not run, prefixed ``[name]``.
        runs: How each analyzer went.
    """

    results: dict[str, AnalyzerResult]
    findings: tuple[Finding, ...]
    notes: tuple[str, ...]
    runs: tuple[AnalyzerRun, ...]


def _sort_key(f: Finding) -> tuple[int, int, float, str]:
    gain = f.estimated_gain_us
    has = gain is not None and math.isfinite(gain)
    return (f.severity.rank, 0 if has else 1, -(gain or 0.0) if has else 0.0, f.id)


def sort_findings(findings: list[Finding] | tuple[Finding, ...]) -> list[Finding]:
    """De-duplicate by id (first wins) and sort: severity, then larger estimated gain, then id."""
    seen: dict[str, Finding] = {}
    for f in findings:
        seen.setdefault(f.id, f)
    return sorted(seen.values(), key=_sort_key)


def run_analyzers(
    profile: Profile,
    *,
    baseline: Profile | None = None,
    rank: int | None = None,
    strict: bool = False,
) -> Analysis:
    """Run every report analyzer (``in_report``) on ``profile``, in the registry's order.

    ``explain_rank`` runs only when ``rank`` is given; analyzers with ``needs_baseline`` only with
    a ``baseline``. An analyzer raising :class:`NotAnswerableError`, :class:`ToolArgumentError`
    or :class:`InputError` becomes a note; with ``strict`` an unexpected exception (a programming
    bug) is raised, else it becomes a note too.

    Args:
        profile: The profile.
        baseline: Optional baseline profile.
        rank: Optional global rank for ``explain_rank``.
        strict: Re-raise unexpected exceptions.

    Returns:
        The :class:`Analysis`.
    """
    registry = load_all()
    specs = sorted(registry.values(), key=lambda s: (s.order, s.name))
    findings: list[Finding] = []
    notes: list[str] = []
    results: dict[str, AnalyzerResult] = {}
    runs: list[AnalyzerRun] = []
    for spec in specs:
        if not spec.in_report:
            continue
        kwargs: dict[str, Any] = {}
        params = None
        if spec.name == _NEEDS_RANK:
            if rank is None:
                runs.append(AnalyzerRun(spec.name, "skipped", message="no --rank given"))
                continue
            try:
                params = spec.params(rank=rank)
            except Exception as exc:  # pydantic validation of the rank
                notes.append(f"[{spec.name}] bad arguments: {exc}")
                runs.append(AnalyzerRun(spec.name, "bad_arguments", message=str(exc)))
                continue
        if spec.needs_baseline:
            if baseline is None:
                runs.append(AnalyzerRun(spec.name, "skipped", message="no baseline given"))
                continue
            kwargs["baseline"] = baseline
        t0 = time.perf_counter()
        try:
            res = spec.run(profile, params, **kwargs)
        except NotAnswerableError as exc:
            notes.append(f"[{spec.name}] not enough signal: {exc}")
            runs.append(
                AnalyzerRun(
                    spec.name,
                    "not_answerable",
                    time.perf_counter() - t0,
                    message=str(exc),
                    message_zh=exc.zh,
                )
            )
            continue
        except ToolArgumentError as exc:
            notes.append(f"[{spec.name}] bad arguments: {exc}")
            runs.append(
                AnalyzerRun(spec.name, "bad_arguments", time.perf_counter() - t0, message=str(exc))
            )
            continue
        except InputError as exc:  # a file read on demand is unreadable: the user's data, not a bug
            notes.append(f"[{spec.name}] left out, a file it needs could not be read: {exc}")
            runs.append(
                AnalyzerRun(spec.name, "bad_input", time.perf_counter() - t0, message=str(exc))
            )
            continue
        except Exception as exc:
            if strict:
                raise
            msg = f"{type(exc).__name__}: {exc}"
            notes.append(f"[{spec.name}] internal error (please report): {msg}")
            runs.append(AnalyzerRun(spec.name, "error", time.perf_counter() - t0, message=msg))
            continue
        results[spec.name] = res
        findings.extend(res.findings)
        notes.extend(f"[{spec.name}] {n}" for n in res.notes)
        runs.append(AnalyzerRun(spec.name, "ok", time.perf_counter() - t0, len(res.findings)))
    return Analysis(
        results, tuple(sort_findings(findings)), tuple(dict.fromkeys(notes)), tuple(runs)
    )
