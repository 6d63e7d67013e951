"""Types of the case library shared with the tools and agent layers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CaseHit:
    """One retrieved knowledge case.

    Attributes:
        id: Case id (file stem of ``knowledge/cases/<id>.md``).
        title: English title.
        title_zh: Chinese title.
        score: Combined retrieval score (higher is better; only comparable within one query).
        section: The best-matching section text of the case body (short).
        source: Citation: the case file path relative to the repository, e.g. ``knowledge/cases/<id>.md``,
            plus the public sources it was written from.
        remedies: Concrete settings / commands / code changes from the front matter.
        expected_effect: What fixing it should gain (with the source's numbers where given).
        symptom_tags: The case's tags.
        matched_tags: Which of the query's symptom tags the case matched.
    """

    id: str
    title: str
    title_zh: str
    score: float
    section: str
    source: str
    remedies: tuple[str, ...] = ()
    expected_effect: str = ""
    symptom_tags: tuple[str, ...] = ()
    matched_tags: tuple[str, ...] = field(default_factory=tuple)
