"""Diagnosis engine (first commit: a stub returning an empty Diagnosis; rules follow)."""

from __future__ import annotations

from typing import Any

from advisor_chat.diagnosis.types import Diagnosis
from advisor_chat.ingest.profile import Profile


def diagnose(
    profile: Profile, *, results: dict[str, Any] | None = None, baseline: Profile | None = None
) -> Diagnosis:
    """Diagnose ``profile`` (stub: empty diagnosis, replaced by the rule engine)."""
    del results, baseline
    return Diagnosis(
        causes=(),
        other_findings=(),
        excluded_steps=(),
        ranks=tuple(profile.ranks),
        steps=tuple(profile.steps),
        step_time_us=0.0,
        shares={},
        headline="",
        headline_zh="",
    )
