"""The advisor: offline planner, LLM tool calling, guarded mode, grounded answers."""

from advisor_chat.agent.advisor import Advisor
from advisor_chat.agent.answer import (
    AgentEvent,
    Answer,
    AnswerEvent,
    CitedCase,
    CitedFinding,
    Grounding,
    Suggestion,
    TextEvent,
    ToolCallEvent,
    ToolCallRecord,
    ToolResultEvent,
)
from advisor_chat.agent.grounding import check_grounding, extract_numbers, pool_from_outputs
from advisor_chat.agent.llm import make_chat_model, register_chat_model

__all__ = [
    "Advisor",
    "AgentEvent",
    "Answer",
    "AnswerEvent",
    "CitedCase",
    "CitedFinding",
    "Grounding",
    "Suggestion",
    "TextEvent",
    "ToolCallEvent",
    "ToolCallRecord",
    "ToolResultEvent",
    "check_grounding",
    "extract_numbers",
    "make_chat_model",
    "pool_from_outputs",
    "register_chat_model",
]
