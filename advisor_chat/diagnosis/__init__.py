"""Diagnosis layer: root causes (culprit, victims, evidence, remedies) built from the analyzers.

Entry points: :func:`diagnose`; :func:`open_profile` (load a folder and diagnose it). Data types: :mod:`advisor_chat.diagnosis.types`.
"""

from advisor_chat.diagnosis.engine import diagnose, open_profile
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
    "open_profile",
]
