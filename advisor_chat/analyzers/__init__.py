"""Analyzers: pure functions over the canonical Profile that return findings with evidence."""

from advisor_chat.analyzers.base import (
    REGISTRY,
    AnalyzerResult,
    AnalyzerSpec,
    Category,
    Evidence,
    Finding,
    FindingKind,
    Params,
    Severity,
    get_analyzer,
    load_all,
    register,
)

__all__ = [
    "REGISTRY",
    "AnalyzerResult",
    "AnalyzerSpec",
    "Category",
    "Evidence",
    "Finding",
    "FindingKind",
    "Params",
    "Severity",
    "get_analyzer",
    "load_all",
    "register",
]
