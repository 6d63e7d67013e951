"""The answer object every backend returns, and the events a UI streams (DESIGN.md §6)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

PlotName = Literal[
    "rank_breakdown", "bandwidth_heatmap", "step_trend", "op_compare", "launch_delay"
]


class CitedFinding(BaseModel):
    """A finding the answer relies on (a subset of ``Finding.to_dict()``)."""

    id: str
    kind: str
    severity: str
    summary: str
    ranks: list[int] = Field(default_factory=list)
    metrics: dict[str, float] = Field(default_factory=dict)
    sources: list[str] = Field(default_factory=list, description="Files the numbers were read from")
    estimated_gain_us: float | None = None
    summary_zh: str = Field(
        "", description="The finding's Chinese summary (shown with Chinese answers)"
    )


class CitedCase(BaseModel):
    """A knowledge case the answer cites."""

    id: str
    title: str
    source: str
    title_zh: str = Field("", description="The case's Chinese title (shown with Chinese answers)")


class Suggestion(BaseModel):
    """A typed suggestion tied to the root cause (and finding) that motivates it.

    ``action``: a change to code, config or environment, with its expected per-step gain when
    the diagnosis gives one. ``check``: what to look at next; never carries a gain.
    """

    text: str
    kind: Literal["action", "check"] = "action"
    cause_id: str | None = None  # the diagnosis root cause id, e.g. cause.host_stall.r12
    finding_id: str | None = None
    case_id: str | None = None
    estimated_gain_us: float | None = None
    #: ``estimate`` (about) or ``upper_bound`` (up to; also when unknown).
    gain_bound: Literal["estimate", "upper_bound"] = "upper_bound"


class Grounding(BaseModel):
    """Result of checking every number in the answer text against the turn's tool results."""

    numbers_total: int = 0
    numbers_grounded: int = 0
    ungrounded: list[str] = Field(default_factory=list)


class ToolCallRecord(BaseModel):
    """One tool call made while answering."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    summary: str = Field("", description="The model-readable result text (capped)")
    table_ref: str | None = Field(None, description="Reference the UI/paging tool can expand")
    error: str | None = None


class Answer(BaseModel):
    """What ``ask`` returns (``advisor-chat ask --json`` prints it)."""

    answer: str
    language: Literal["en", "zh"] = "en"
    findings: list[CitedFinding] = Field(default_factory=list)
    cases: list[CitedCase] = Field(default_factory=list)
    suggestions: list[Suggestion] = Field(default_factory=list)
    grounding: Grounding = Field(default_factory=Grounding)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    plots: list[PlotName] = Field(default_factory=list, description="Plots that support the answer")
    plot_ranks: list[int] = Field(default_factory=list, description="Ranks to highlight in plots")
    backend: str = "offline"
    mode: str = Field("", description="e.g. 'guarded', 'guarded-fallback', 'free'")
    intent: str = Field("", description="What the planner understood, e.g. 'explain_rank'")
    draft_grounding: Grounding | None = Field(
        default=None,
        description="Guarded mode: grounding check of the model's draft prose (before the "
        "fallback decision); its ungrounded numbers are the ones the guard caught",
    )
    model_usage: dict[str, float] = Field(
        default_factory=dict,
        description="Model calls of this turn: calls, prompt_tokens, completion_tokens, model_s",
    )

    def unlisted_suggestions(self) -> list[Suggestion]:
        """The suggestions the answer text does not list already.

        The planner's text lists its own, each without its final stop and with its case and
        gain after it.
        """
        return [s for s in self.suggestions if s.text.strip().rstrip(".。") not in self.answer]


class ToolCallEvent(BaseModel):
    """Streamed when a tool is called."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ToolResultEvent(BaseModel):
    """Streamed when a tool returns."""

    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str
    summary: str
    error: str | None = None


class TextEvent(BaseModel):
    """Streamed text of the final answer (a chunk)."""

    type: Literal["text"] = "text"
    text: str


class AnswerEvent(BaseModel):
    """Streamed last: the whole answer."""

    type: Literal["answer"] = "answer"
    answer: Answer


AgentEvent = ToolCallEvent | ToolResultEvent | TextEvent | AnswerEvent
