"""``Advisor``: ask questions about one profile; offline planner, LLM tool calling, guarded mode.

One Advisor = one session: a :class:`~advisor_chat.tools.ToolSession` (analyzer results cached
per (analyzer, params), a :class:`~advisor_chat.tools.TableStore`), and the conversation (the
last understood question for offline follow-ups, the message history for LLM backends).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from advisor_chat.agent.answer import (
    AgentEvent,
    Answer,
    AnswerEvent,
    Grounding,
    Suggestion,
    TextEvent,
    ToolCallEvent,
    ToolCallRecord,
    ToolResultEvent,
)
from advisor_chat.agent.grounding import check_grounding, pool_from_outputs
from advisor_chat.agent.llm import (
    GUARDED_PROMPT,
    SYSTEM_PROMPT,
    backend_name,
    endpoint_error,
    is_offline,
    make_chat_model,
    use_guarded,
)
from advisor_chat.agent.parse import (
    Query,
    detect_language,
    parse_question,
    split_questions,
    too_long_message,
)
from advisor_chat.agent.planner import (
    DiagnoseFn,
    Planner,
    PlanResult,
    build_suggestions,
    cited_cases,
    cited_findings,
    merge_plans,
)
from advisor_chat.agent.validate import baseline_problem
from advisor_chat.analyzers.base import AnalyzerSpec, Finding
from advisor_chat.config import Settings, load_settings
from advisor_chat.i18n import tidy_zh
from advisor_chat.ingest.profile import Profile
from advisor_chat.kb.types import CaseHit
from advisor_chat.tools.core import CaseSearch, ToolOutput, ToolSession, build_tools, strict_mode
from advisor_chat.tools.store import TableStore

_log = logging.getLogger(__name__)

WARM_ANALYZERS = ("cluster_breakdown", "slow_rank")
"""Analyzers most questions start with; :meth:`Advisor.warm_up` runs them with default params."""

RECURSION_LIMIT = 24
"""LangGraph steps per question (a model call and a tool round are one step each)."""


def snapshot_case_search(settings: Settings) -> CaseSearch:
    """The advisor's case search: :func:`advisor_chat.kb.search_cases` with ``vectors="snapshot"``.

    Same hybrid ranking (vector + BM25 + tags) and so the same cited cases as a search through
    Chroma, but the stored vectors are read from the index snapshot, so a fresh process
    (``advisor-chat ask``) does not import chromadb (about 1 s); a missing or stale snapshot
    falls back to Chroma and rebuilds the index first.
    """

    def search(query: str, symptom_tags: Sequence[str] | None = None, k: int = 5) -> list[CaseHit]:
        from advisor_chat.kb.search import search_cases

        return search_cases(query, symptom_tags, k, settings=settings, vectors="snapshot")

    return search


class Advisor:
    """Answers questions about a profile.

    Args:
        profile: The loaded profile.
        settings: Backend (``settings.model``), endpoint, token cap, guarded mode.
        baseline: An earlier run, for "what changed" questions.
        chat_model: A LangChain chat model to use instead of the one ``settings.model`` selects
            (tests pass scripted fakes; it must implement ``bind_tools`` unless guarded).
        registry: Analyzer registry (default: all registered analyzers).
        case_search: Case search function (default: :func:`snapshot_case_search`, i.e.
            ``advisor_chat.kb.search_cases`` reading the index snapshot).
        diagnose: ``(profile, *, baseline) -> Diagnosis`` (default:
            :func:`advisor_chat.diagnosis.diagnose`; tests pass a constructed diagnosis).

    Example:
        >>> adv = Advisor(load_profile("./prof"))            # doctest: +SKIP
        >>> print(adv.ask("why is rank 12 slow?").answer)     # doctest: +SKIP
    """

    def __init__(
        self,
        profile: Profile,
        *,
        settings: Settings | None = None,
        baseline: Profile | None = None,
        chat_model: Any = None,
        registry: dict[str, AnalyzerSpec[Any]] | None = None,
        case_search: CaseSearch | None = None,
        diagnose: DiagnoseFn | None = None,
    ) -> None:
        self.profile = profile
        self.baseline = baseline
        # a baseline of the same folder or of another world size is not compared with (and not
        # given to the diagnosis); the planner says why (agent.validate)
        self.baseline_problem = baseline_problem(profile, baseline)
        if self.baseline_problem is not None:
            baseline = None
        self.settings = settings if settings is not None else load_settings()
        self.session = ToolSession(
            profile,
            baseline=baseline,
            settings=self.settings,
            registry=registry,
            case_search=case_search or snapshot_case_search(self.settings),
        )
        # offline, no model reads the tool results: no token cap, no tokenizer vocabulary
        self.session.cap_tool_text = chat_model is not None or not is_offline(self.settings)
        if diagnose is not None:  # the session's diagnose tool uses the injected function
            fn = diagnose
            self.session.diagnosis = lambda: fn(profile, baseline=baseline)  # type: ignore[method-assign]
        self.tools = build_tools(profile, session=self.session)
        self.planner = Planner(
            self.tools, self.session, diagnose, baseline_problem=self.baseline_problem
        )
        self._chat_model = chat_model
        self._model_built = chat_model is not None
        self._injected = chat_model is not None
        self._last: Query | None = None
        self._history: list[Any] = []
        self._lock = threading.Lock()
        self._op_types: list[str] | None = None
        self._ids = itertools.count(1)

    # -- public API ------------------------------------------------------------------------
    @property
    def store(self) -> TableStore:
        """The session's table store (``store.get(ref)`` for a ``table_ref``)."""
        return self.session.store

    @property
    def backend(self) -> str:
        """Backend label: ``offline``, the model spec, or ``custom:<class>`` for an injected model."""
        if self._injected:
            return f"custom:{type(self._chat_model).__name__}"
        return backend_name(self.settings)

    @property
    def chat_model(self) -> Any:
        """The chat model (``None`` offline), built on first use."""
        if not self._model_built:
            self._chat_model = make_chat_model(self.settings)
            self._model_built = True
        return self._chat_model

    def ask(self, question: str) -> Answer:
        """Answer ``question`` (multi-turn: follow-ups reuse the previous intent)."""
        answer: Answer | None = None
        for ev in self.stream(question):
            if isinstance(ev, AnswerEvent):
                answer = ev.answer
        assert answer is not None  # stream always ends with an AnswerEvent
        return answer

    def stream(self, question: str) -> Iterator[AgentEvent]:
        """Answer ``question`` as events: tool calls, tool results, text, then the answer.

        A question over :data:`~advisor_chat.agent.parse.MAX_QUESTION_CHARS` characters is
        refused with a message, before any parsing, embedding or model call.
        """
        refusal = too_long_message(question)
        if refusal is not None:
            yield TextEvent(text=refusal + "\n")
            yield AnswerEvent(
                answer=Answer(
                    answer=refusal,
                    language=detect_language(question[:2000]),
                    backend=self.backend,
                    mode="refused",
                    intent="too_long",
                )
            )
            return
        with self._lock:
            model = self.chat_model
            if model is None:
                yield from self._stream_offline(question)
            elif use_guarded(self.settings):
                yield from self._stream_guarded(question, model)
            else:
                yield from self._stream_llm(question, model)

    def warm_up(self, *, analyzers: Sequence[str] = WARM_ANALYZERS) -> None:
        """Do the one-time work now, so that the first answer is fast.

        Loads the case index and its embedding model, the tokenizer vocabulary that caps tool
        results when a model reads them (tiktoken o200k, about 0.5-2 s on first use; not
        offline), and runs ``analyzers`` with their
        default parameters plus ``explain_rank`` / ``host_dispatch`` for the first slow rank
        proven by collectives (all cached in the session, as any later call would be).

        Not required: the first question does the same work otherwise. Errors are ignored here
        (the question that needs the case library or the analyzer reports them).
        """
        if self.session.cap_tool_text:
            from advisor_chat.tools.render import count_tokens

            count_tokens("warm up")
        parse_question("warm up: why is rank 0 slow?")  # compiles the intent patterns
        results = {}
        for name in analyzers:
            spec = self.session.registry.get(name)
            if spec is None or spec.needs_baseline:
                continue
            try:
                results[name] = self.session.run_analyzer(name, spec.params())
            except Exception:  # warming is best effort; ask() reports real errors
                continue
        # the rank the others wait for is the likely first question ("why is rank N slow?")
        slow = results.get("slow_rank")
        suspects = [
            f.ranks[0]
            for f in (slow.findings if slow is not None else ())
            if f.kind.value == "slow_rank" and f.ranks and f.metrics.get("comm_evidence", 1.0)
        ]
        for name in ("explain_rank", "host_dispatch") if suspects else ():
            spec = self.session.registry.get(name)
            if spec is None or "rank" not in spec.params.model_fields:
                continue
            try:
                self.session.run_analyzer(name, spec.params(rank=suspects[0]))
            except Exception:  # warming is best effort; ask() reports real errors
                continue
        with contextlib.suppress(Exception):  # warming is best effort; ask() reports errors
            self.planner.diagnosis([])
        try:
            self.session.search_cases("warm up", ["slow_rank"], 1)
        except Exception:  # warming is best effort; ask() reports real errors
            return

    def close(self) -> None:
        """Release backend resources (stops a local model server this process started)."""
        from advisor_chat.agent.llm import close_backends

        close_backends()

    def __enter__(self) -> Advisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reset(self) -> None:
        """Forget the conversation (analyzer results stay cached)."""
        with self._lock:
            self._last = None
            self._history = []

    # -- offline -----------------------------------------------------------------------------
    def _parse(self, question: str) -> Query:
        if self._op_types is None:
            # op types from op_statistic (every rank, light) and the kernels already read: the
            # question parser never reads every rank's kernel_details.csv
            tables = self.profile.tables
            loaded = getattr(tables, "loaded", tables.get)
            found: set[str] = set()
            for k in (tables.get("op_statistic"), loaded("kernels")):
                if k is not None and not k.empty and "op_type" in k.columns:
                    found.update(str(v) for v in k["op_type"].dropna().unique())
            self._op_types = sorted(found)
        return parse_question(
            question,
            groups=self.session.groups,
            op_types=self._op_types,
            previous=self._last,
            profile_ranks=self.session.ranks,
        )

    def _plan(self, question: str) -> tuple[Query, PlanResult]:
        parts = split_questions(question)
        if len(parts) > 1:  # several questions in one message: each answered, in order
            planned = [self._plan_one(p) for p in parts]
            q0 = planned[0][0]
            merged = merge_plans(parts, [p for _, p in planned], q0.language == "zh")
            return q0, merged
        return self._plan_one(question)

    def _plan_one(self, question: str) -> tuple[Query, PlanResult]:
        q = self._parse(question)
        outputs: list[ToolOutput] = []
        plan = self.planner.run(q, outputs)
        # a question refused for naming what does not exist (rank 99) is no context for the next
        refused = [o.name for o in plan.outputs] == ["validate_question"]
        if q.intent not in ("help", "unsupported") and not refused:
            self._last = q
        return q, plan

    def _plan_safe(self, question: str) -> tuple[Query, PlanResult]:
        """:meth:`_plan`, but an unexpected error becomes an honest answer (unless strict).

        A Chinese answer's spacing is normalised (:func:`~advisor_chat.i18n.tidy_zh`).
        """
        try:
            q, plan = self._plan(question)
        except Exception as exc:
            if strict_mode():
                raise
            _log.exception("offline planner failed on %r", question)
            q = Query(question, detect_language(question), "unsupported")
            text = (
                f"内部错误，无法回答这个问题（{type(exc).__name__}）。请换一种问法或报告此问题。"
                if q.language == "zh"
                else f"Internal error: I could not answer this question ({type(exc).__name__}: "
                f"{exc}). Please rephrase it or report the problem."
            )
            return q, PlanResult(text, outputs=[])
        if q.language == "zh":
            plan.text = tidy_zh(plan.text)
            plan.suggestions = [
                s.model_copy(update={"text": tidy_zh(s.text)}) for s in plan.suggestions
            ]
        return q, plan

    def _stream_offline(self, question: str) -> Iterator[AgentEvent]:
        q, plan = self._plan_safe(question)
        yield from self._tool_events(plan.outputs)
        for para in plan.text.split("\n"):
            yield TextEvent(text=para + "\n")
        yield AnswerEvent(
            answer=self._answer(
                question,
                plan.text,
                q.language,
                plan.findings,
                plan.cases,
                plan.suggestions,
                plan.outputs,
                intent=q.intent,
                mode="planner",
                plots=plan.plots,
                plot_ranks=plan.plot_ranks,
            )
        )

    def _tool_events(self, outputs: Sequence[ToolOutput]) -> Iterator[AgentEvent]:
        for o in outputs:
            cid = f"call_{next(self._ids)}"
            yield ToolCallEvent(id=cid, name=o.name, args=o.args)
            yield ToolResultEvent(id=cid, name=o.name, summary=o.text, error=o.error)

    # -- guarded -----------------------------------------------------------------------------
    def _stream_guarded(self, question: str, model: Any) -> Iterator[AgentEvent]:
        from langchain_core.messages import HumanMessage, SystemMessage

        q, plan = self._plan_safe(question)
        yield from self._tool_events(plan.outputs)
        language = "Chinese" if q.language == "zh" else "English"
        mode = "guarded-fallback"
        text = plan.text
        draft: Grounding | None = None
        usage: dict[str, float] = {}
        # a question refused by the validation step (nothing but its record) is not rewritten
        refused = [o.name for o in plan.outputs] == ["validate_question"]
        if q.intent not in ("help", "unsupported") and not refused:
            t0 = time.perf_counter()
            try:
                msg = model.invoke(
                    [
                        SystemMessage(GUARDED_PROMPT.format(language=language)),
                        HumanMessage(f"Question: {question}\n\nFacts:\n{plan.text}"),
                    ]
                )
                prose = _content(msg).strip()
                usage = _usage(msg, time.perf_counter() - t0)
            except Exception:  # a broken local model must not lose the verified answer
                prose = ""
            pool = pool_from_outputs(plan.outputs, [question])
            g = check_grounding(prose, pool)
            draft = g
            template_nums = check_grounding(plan.text, pool).numbers_total
            if prose and not g.ungrounded and (g.numbers_total > 0 or template_nums == 0):
                text, mode = prose, "guarded"
        for para in text.split("\n"):
            yield TextEvent(text=para + "\n")
        yield AnswerEvent(
            answer=self._answer(
                question,
                text,
                q.language,
                plan.findings,
                plan.cases,
                plan.suggestions,
                plan.outputs,
                intent=q.intent,
                mode=mode,
                plots=plan.plots,
                plot_ranks=plan.plot_ranks,
            ).model_copy(update={"draft_grounding": draft, "model_usage": usage})
        )

    # -- LLM tool calling ------------------------------------------------------------------
    def _stream_llm(self, question: str, model: Any) -> Iterator[AgentEvent]:
        from langchain.agents import create_agent
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        start = len(self.session.calls)
        t0 = time.perf_counter()
        pre: list[ToolOutput] = []
        diag = self.planner.diagnosis(pre, detect_language(question))
        diag_out = pre[0] if pre else None
        tools = [t.as_langchain() for t in self.tools]
        if "diagnose" not in {t.name for t in self.tools}:
            tools.insert(0, _diagnose_tool(diag_out.text if diag_out is not None else ""))
        agent = create_agent(model, tools=tools, system_prompt=SYSTEM_PROMPT)
        new: list[Any] = [HumanMessage(question)]
        names: dict[str, str] = {}
        if diag_out is not None:
            cid = f"call_diagnose_{next(self._ids)}"
            new.append(
                AIMessage(
                    content="",
                    tool_calls=[{"name": "diagnose", "args": {}, "id": cid, "type": "tool_call"}],
                )
            )
            body = diag_out.text if not diag_out.error else f"Error: {diag_out.error}"
            new.append(ToolMessage(content=body, tool_call_id=cid, name="diagnose"))
            names[cid] = "diagnose"
            yield ToolCallEvent(id=cid, name="diagnose", args={})
            yield ToolResultEvent(id=cid, name="diagnose", summary=body, error=diag_out.error)
        final = ""
        from langgraph.errors import GraphRecursionError

        try:
            for chunk in agent.stream(
                {"messages": [*self._history, *new]},
                {"recursion_limit": RECURSION_LIMIT},
                stream_mode="updates",
            ):
                for _node, upd in (chunk or {}).items():
                    for m in (upd or {}).get("messages", []) if isinstance(upd, dict) else []:
                        new.append(m)
                        if isinstance(m, AIMessage) and m.tool_calls:
                            for tc in m.tool_calls:
                                names[tc.get("id") or ""] = tc["name"]
                                yield ToolCallEvent(
                                    id=tc.get("id") or "",
                                    name=tc["name"],
                                    args=tc.get("args") or {},
                                )
                        elif isinstance(m, ToolMessage):
                            yield ToolResultEvent(
                                id=m.tool_call_id,
                                name=names.get(m.tool_call_id, m.name or ""),
                                summary=_content(m),
                                error=_content(m) if m.status == "error" else None,
                            )
                        elif isinstance(m, AIMessage):
                            final = _content(m)
                            if final:
                                yield TextEvent(text=final)
        except GraphRecursionError:
            final = (
                "模型在工具调用次数上限内没有给出答案。请换一种问法，或使用 --model offline。"
                if detect_language(question) == "zh"
                else "The model did not finish within the tool-call limit. Rephrase the question "
                "or use --model offline."
            )
            yield TextEvent(text=final)
        except Exception as exc:
            import openai

            if not isinstance(exc, openai.OpenAIError) and type(exc).__module__.split(".")[
                0
            ] not in ("httpx", "httpcore", "langchain_openai"):
                raise
            raise endpoint_error(self.settings, exc) from exc
        self._history.extend(new)
        outputs = [*pre, *(o for o in self.session.calls[start:] if all(o is not x for x in pre))]
        findings_all = [f for o in outputs for f in o.findings]
        causes = list(diag.causes) if diag is not None else []
        cited_causes = [c for c in causes if c.id in final] or causes[:2]
        findings_all += [f for c in cited_causes for f in c.findings]
        hits_all = _unique_hits(h for o in outputs for h in o.cases)
        cited = [f for f in _unique_findings(findings_all) if f.id in final]
        if not cited:
            cited = _unique_findings(findings_all)[:5]
        cases = [h for h in hits_all if h.id in final]
        suggestions: list[Suggestion] = build_suggestions(
            cited_causes, cited, cases, detect_language(question) == "zh"
        )
        q = self._parse(question)
        if q.intent not in ("help", "unsupported"):
            self._last = q
        yield AnswerEvent(
            answer=self._answer(
                question,
                final,
                detect_language(question),
                cited,
                cases,
                suggestions,
                outputs,
                intent=q.intent,
                mode="tools",
                plots=[],
                plot_ranks=sorted({r for f in cited for r in f.ranks})[:8],
            ).model_copy(update={"model_usage": _usage_sum(new, time.perf_counter() - t0)})
        )

    # -- common ------------------------------------------------------------------------------
    def _answer(
        self,
        question: str,
        text: str,
        language: str,
        findings: Sequence[Finding],
        cases: Sequence[CaseHit],
        suggestions: Sequence[Suggestion],
        outputs: Sequence[ToolOutput],
        *,
        intent: str,
        mode: str,
        plots: Sequence[str],
        plot_ranks: Sequence[int],
    ) -> Answer:
        pool = pool_from_outputs(outputs, [question])
        return Answer(
            answer=text,
            language="zh" if language == "zh" else "en",
            findings=cited_findings(findings),
            cases=cited_cases(cases),
            suggestions=list(suggestions),
            grounding=check_grounding(text, pool),
            tool_calls=[
                ToolCallRecord(
                    name=o.name, args=o.args, summary=o.text, table_ref=o.table_ref, error=o.error
                )
                for o in outputs
            ],
            plots=list(plots),  # type: ignore[arg-type]
            plot_ranks=list(plot_ranks),
            backend=self.backend,
            mode=mode,
            intent=intent,
        )


def _diagnose_tool(text: str) -> Any:
    """A ``diagnose`` tool for the model (when the tool layer offers none): the diagnosis text."""
    from langchain_core.tools import StructuredTool

    def diagnose() -> str:
        return text or "No diagnosis is available for this profile."

    return StructuredTool.from_function(
        func=diagnose,
        name="diagnose",
        description="The ranked root causes of this run (culprit, victims, evidence, gain, "
        "remedies). Already called at the start of every question.",
    )


def _usage(msg: Any, seconds: float) -> dict[str, float]:
    """Token counts of one model reply (``usage_metadata``) and its wall time."""
    meta = getattr(msg, "usage_metadata", None) or {}
    return {
        "calls": 1.0,
        "prompt_tokens": float(meta.get("input_tokens", 0) or 0),
        "completion_tokens": float(meta.get("output_tokens", 0) or 0),
        "model_s": seconds,
    }


def _usage_sum(messages: Sequence[Any], seconds: float) -> dict[str, float]:
    """Token counts summed over the model replies of one turn, and the turn's wall time."""
    out = {"calls": 0.0, "prompt_tokens": 0.0, "completion_tokens": 0.0, "model_s": seconds}
    for m in messages:
        meta = getattr(m, "usage_metadata", None)
        if meta:
            out["calls"] += 1
            out["prompt_tokens"] += float(meta.get("input_tokens", 0) or 0)
            out["completion_tokens"] += float(meta.get("output_tokens", 0) or 0)
    return out


def _content(msg: Any) -> str:
    c = getattr(msg, "content", msg)
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in c)
    return str(c or "")


def _unique_findings(fs: Sequence[Finding]) -> list[Finding]:
    seen: dict[str, Finding] = {}
    for f in fs:
        seen.setdefault(f.id, f)
    return list(seen.values())


def _unique_hits(hs: Any) -> list[CaseHit]:
    seen: dict[str, CaseHit] = {}
    for h in hs:
        seen.setdefault(h.id, h)
    return list(seen.values())
