"""Case library: bilingual knowledge cases, their Chroma index, and hybrid retrieval.

Public API (see docs/CONTRACTS.md): :func:`search_cases`, :func:`build_index`, :func:`load_cases`,
:func:`get_case`, plus the :class:`Case` schema and :class:`BuildReport`.
"""

from __future__ import annotations

from advisor_chat.kb.cases import (
    Case,
    Condition,
    get_case,
    knowledge_dir,
    load_cases,
    parse_condition,
)
from advisor_chat.kb.index import BuildReport, build_index, embedding_model_id
from advisor_chat.kb.search import search_cases, tokenize
from advisor_chat.kb.types import CaseHit

__all__ = [
    "BuildReport",
    "Case",
    "CaseHit",
    "Condition",
    "build_index",
    "embedding_model_id",
    "get_case",
    "knowledge_dir",
    "load_cases",
    "parse_condition",
    "search_cases",
    "tokenize",
]
