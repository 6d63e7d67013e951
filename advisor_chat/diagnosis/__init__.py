"""Diagnosis layer: root causes (culprit, victims, evidence, remedies) built from the analyzers.

Entry point: :func:`diagnose`. Data types: :mod:`advisor_chat.diagnosis.types`.
"""

from advisor_chat.diagnosis.engine import diagnose
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Diagnosis,
    Impact,
    Mechanism,
    Remedy,
    RootCause,
)

__all__ = [
    "BoundKind",
    "Culprit",
    "Diagnosis",
    "Impact",
    "Mechanism",
    "Remedy",
    "RootCause",
    "diagnose",
]
