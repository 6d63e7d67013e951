"""Function-calling tools generated from the analyzer registry, plus case search and paging.

``diagnose`` first (the root causes, :mod:`advisor_chat.tools.diagnose`), then one :class:`Tool`
per registered analyzer (name, description from its docstring, JSON schema from its pydantic
``Params`` with this profile's valid values injected), plus ``search_cases`` and ``show_table``. Every tool is a plain callable (``tool(rank=12) -> str``), has
:meth:`Tool.invoke` returning the structured :class:`ToolOutput`, and converts to a LangChain
``StructuredTool`` with :meth:`Tool.as_langchain`.

Bad arguments never raise out of a tool: the result text names the valid values
("rank 16 does not exist; ranks are 0-15") so a model can retry.
"""

from __future__ import annotations

import copy
import functools
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor_chat.analyzers.base import REGISTRY, AnalyzerResult, AnalyzerSpec, Finding, load_all
from advisor_chat.config import Settings
from advisor_chat.errors import AdvisorError, InputError, NotAnswerableError, ToolArgumentError
from advisor_chat.ingest.profile import Profile
from advisor_chat.kb.types import CaseHit
from advisor_chat.ranks import format_ranks
from advisor_chat.symptoms import SYMPTOM_TAGS
from advisor_chat.tools.diagnose import DIAGNOSE_DESCRIPTION, DiagnoseParams, render_diagnosis
from advisor_chat.tools.render import (
    cap_tokens,
    clean_data,
    fence,
    fmt_num,
    render_table,
    unit_of,
)
from advisor_chat.tools.store import TableStore

if TYPE_CHECKING:
    from advisor_chat.diagnosis.types import Diagnosis

ToolKind = Literal["analyzer", "search_cases", "show_table", "diagnose"]
CaseSearch = Callable[..., list[CaseHit]]

MAX_ROWS = 10
"""Rows of a result table shown to the model (the rest stays in the :class:`TableStore`)."""

SEARCH_CASES_DESCRIPTION = (
    "Search the case library (known Ascend performance problems with remedies) by the question "
    "and by the symptom tags of measured findings; returns case ids, titles, remedies and "
    "expected effects to cite."
)
SHOW_TABLE_DESCRIPTION = (
    "Show more rows of a table returned earlier by a tool (by its reference, e.g. 't3')."
)

_RANK_FIELDS = ("rank", "rank_a", "rank_b", "src_rank", "dst_rank")

_log = logging.getLogger(__name__)

STRICT_ENV = "ADVISOR_STRICT"
"""Set to 1 to let unexpected analyzer / case-library errors raise (tests, debugging)."""


def strict_mode() -> bool:
    """Whether unexpected errors should raise instead of becoming an error result."""
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


INLINE_TABLES = ("extremes",)
"""Small extra tables shown in full in the tool text (e.g. which rank has the most Free)."""


class SearchCasesParams(BaseModel):
    """Parameters of the ``search_cases`` tool."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    query: str = Field(
        description="What to look for, in the user's words (English or Chinese), e.g. 'rank 12 Free high'"
    )
    symptom_tags: list[str] | None = Field(
        None,
        description="Symptom tags from the findings (finding.symptom_tags) to match cases by measured symptom",
    )
    k: int = Field(5, ge=1, le=10, description="Number of cases to return (1-10)")


class ShowTableParams(BaseModel):
    """Parameters of the ``show_table`` paging tool."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    ref: str = Field(description="Table reference from an earlier tool result, e.g. 't3'")
    offset: int = Field(0, ge=0, description="First row to show (0-based)")
    limit: int = Field(20, ge=1, le=50, description="Number of rows to show (1-50)")


@dataclass
class ToolOutput:
    """What one tool call produced.

    Attributes:
        name: Tool name.
        args: Arguments as given (before defaults).
        text: Model-readable result (capped to the token budget; data fenced).
        table_ref: Reference of the main table in the session's :class:`TableStore`.
        error: The error message when the arguments were bad or the data cannot answer.
        result: The analyzer result (analyzer tools only).
        cases: Retrieved cases (``search_cases`` only).
        page: The rows shown (``show_table`` only).
        not_answerable: The error was "the data cannot answer" rather than "bad arguments".
        diagnosis: The :class:`~advisor_chat.diagnosis.types.Diagnosis` (``diagnose`` only).
    """

    name: str
    args: dict[str, Any]
    text: str
    table_ref: str | None = None
    error: str | None = None
    result: AnalyzerResult | None = None
    cases: list[CaseHit] = field(default_factory=list)
    page: pd.DataFrame | None = None
    not_answerable: bool = False
    diagnosis: Diagnosis | None = None

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Findings of the analyzer result, or every finding under the diagnosis's causes."""
        if self.result is not None:
            return self.result.findings
        if self.diagnosis is not None:
            return tuple(f for c in self.diagnosis.causes for f in c.findings)
        return ()


def fmt_ranks(ranks: Sequence[int], sep: str = ", ") -> str:
    """Compact rank list: ``[0..15] -> '0-15'``, ``[0,1,2,5] -> '0-2, 5'`` (``"none"`` if empty).

    The same text as :func:`advisor_chat.analyzers._common.format_ranks`.
    """
    return format_ranks(ranks, sep)


class ToolSession:
    """Shared state of one profile's tools: result cache, table store, call log.

    Analyzer results are cached per (analyzer, params) so that asking again never re-runs an
    analyzer. ``calls`` records every :class:`ToolOutput` in order; agents read the slice that
    belongs to a turn.

    Args:
        profile: The profile the analyzers run on.
        baseline: The baseline profile for ``compare_profiles``.
        settings: Token cap (``max_tool_tokens``) and case-index location.
        store: Table store (a new one by default).
        registry: Analyzer registry (the global one, fully loaded, by default; tests pass their own).
        case_search: Case search function (``advisor_chat.kb.search_cases`` by default).

    Attributes:
        cap_tool_text: Cut each tool result's text to ``settings.max_tool_tokens`` (tiktoken).
            On by default; the offline advisor turns it off, since no model reads the text
            (this keeps the tokenizer vocabulary out of the offline path).
    """

    cap_tool_text: bool = True

    def __init__(
        self,
        profile: Profile,
        *,
        baseline: Profile | None = None,
        settings: Settings | None = None,
        store: TableStore | None = None,
        registry: dict[str, AnalyzerSpec[Any]] | None = None,
        case_search: CaseSearch | None = None,
    ) -> None:
        self.profile = profile
        self.baseline = baseline
        self.settings = settings or Settings()
        self.store = store if store is not None else TableStore()
        self.registry = registry if registry is not None else load_all()
        self._case_search = case_search
        self._cache: dict[tuple[str, str], AnalyzerResult | AdvisorError] = {}
        self._case_cache: dict[tuple[str, tuple[str, ...], int], list[CaseHit]] = {}
        self._lock = threading.RLock()
        self.calls: list[ToolOutput] = []
        self.ranks = profile.ranks
        self.steps = profile.steps
        self.groups = _groups(profile)
        self.transports = _transports(profile)

    # -- analyzers ---------------------------------------------------------------------------
    def run_analyzer(self, name: str, params: BaseModel) -> AnalyzerResult:
        """Run (or fetch from cache) analyzer ``name`` with validated ``params``.

        Raises:
            ToolArgumentError: The analyzer rejected the arguments.
            NotAnswerableError: The data cannot answer (e.g. no baseline for a comparison).
        """
        key = (name, params.model_dump_json())
        with self._lock:
            hit = self._cache.get(key)
            if hit is None:
                spec = self.registry[name]
                try:
                    if spec.needs_baseline:
                        if self.baseline is None:
                            raise NotAnswerableError(
                                f"{name} compares two runs but no baseline profile was given; "
                                "pass the earlier run with --baseline PATH"
                            )
                        hit = spec.run(self.profile, params, baseline=self.baseline)
                    else:
                        hit = spec.run(self.profile, params)
                except (ToolArgumentError, NotAnswerableError) as exc:
                    hit = exc
                self._cache[key] = hit
        if isinstance(hit, AdvisorError):
            raise hit
        return hit

    def diagnosis(self) -> Diagnosis:
        """The profile's :class:`Diagnosis` (``advisor_chat.diagnosis.diagnose``, cached)."""
        from advisor_chat.diagnosis import diagnose

        with self._lock:
            return diagnose(self.profile, baseline=self.baseline)

    def search_cases(
        self, query: str, symptom_tags: Sequence[str] | None = None, k: int = 5
    ) -> list[CaseHit]:
        """Retrieve cases by question text and symptom tags (cached per session)."""
        tags = tuple(sorted(set(symptom_tags or ())))
        key = (query, tags, k)
        with self._lock:
            if key not in self._case_cache:
                if self._case_search is not None:
                    hits = self._case_search(query, list(tags) or None, k)
                else:
                    from advisor_chat.kb import search_cases  # type: ignore[attr-defined]

                    hits = search_cases(query, list(tags) or None, k, settings=self.settings)
                self._case_cache[key] = list(hits)
            return self._case_cache[key]

    def valid_values(self) -> dict[str, list[Any]]:
        """Valid values per injected parameter name (ranks, steps, groups, transports)."""
        return {
            "rank": list(self.ranks),
            "step": list(self.steps),
            "group": list(self.groups),
            "transport": list(self.transports),
        }


def _groups(profile: Profile) -> list[str]:
    out: list[str] = []
    for table, cols in (("comm_groups", ("group_name", "group")), ("comm_ops", ("group",))):
        df = profile.tables.get(table)
        if df is None or df.empty:
            continue
        for c in cols:
            if c in df.columns:
                for v in df[c].dropna().unique():
                    s = str(v)
                    if s and s not in out:
                        out.append(s)
    return out


def _transports(profile: Profile) -> list[str]:
    out: set[str] = set()
    for table in ("comm_bandwidth", "comm_matrix"):
        df = profile.tables.get(table)
        if df is not None and not df.empty and "transport" in df.columns:
            out.update(str(v) for v in df["transport"].dropna().unique() if str(v))
    return sorted(out)


# -- JSON schema ------------------------------------------------------------------------------
def base_schema(params: type[BaseModel]) -> dict[str, Any]:
    """A flat, model-friendly JSON schema of ``params`` (refs inlined, ``X | None`` collapsed)."""
    raw = params.model_json_schema()
    defs = raw.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = copy.deepcopy(defs[node["$ref"].split("/")[-1]])
                extra = {k: v for k, v in node.items() if k != "$ref"}
                target.update(extra)
                return inline(target)
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    props: dict[str, Any] = {}
    for name, prop in raw.get("properties", {}).items():
        p = inline(prop)
        if "anyOf" in p:
            non_null = [b for b in p["anyOf"] if b.get("type") != "null"]
            if len(non_null) == 1:
                rest = {k: v for k, v in p.items() if k != "anyOf"}
                p = {**non_null[0], **rest}
        p.pop("title", None)
        if p.get("default", 0) is None:
            p.pop("default")
        props[name] = dict(sorted(p.items()))
    out: dict[str, Any] = {"type": "object", "properties": props}
    req = list(raw.get("required", []))
    if req:
        out["required"] = req
    out["additionalProperties"] = False
    return out


def inject_values(schema: dict[str, Any], session: ToolSession) -> dict[str, Any]:
    """Copy of ``schema`` with this profile's valid ranks, steps, groups and transports."""
    s = copy.deepcopy(schema)
    for name, prop in s.get("properties", {}).items():
        if name in _RANK_FIELDS and prop.get("type") == "integer" and session.ranks:
            _inject_ints(prop, session.ranks, "ranks")
        elif name == "step" and prop.get("type") == "integer" and session.steps:
            _inject_ints(prop, session.steps, "steps")
        elif name == "group" and session.groups:
            prop["enum"] = list(session.groups)
        elif name == "transport" and session.transports:
            allowed = prop.get("enum")
            prop["enum"] = [t for t in session.transports if allowed is None or t in allowed] or (
                allowed or []
            )
    return s


def _inject_ints(prop: dict[str, Any], values: Sequence[int], what: str) -> None:
    vals = sorted(set(int(v) for v in values))
    if vals == list(range(vals[0], vals[-1] + 1)):
        prop["minimum"], prop["maximum"] = vals[0], vals[-1]
    else:
        prop["enum"] = vals
    prop["description"] = (
        f"{prop.get('description', '').rstrip('.')}. Valid {what}: {fmt_ranks(vals)}".lstrip(". ")
    )


# -- the tool ---------------------------------------------------------------------------------
@dataclass
class Tool:
    """One function-calling tool bound to a :class:`ToolSession`.

    Attributes:
        name: Tool name (= analyzer name for analyzer tools).
        description: What the tool does (first paragraph of the analyzer docstring).
        params: The pydantic parameters class (validation).
        kind: ``analyzer``, ``search_cases`` or ``show_table``.
        session: Shared session state.
    """

    name: str
    description: str
    params: type[BaseModel]
    kind: ToolKind
    session: ToolSession

    @functools.cached_property
    def schema(self) -> dict[str, Any]:
        """JSON schema shown to models; analyzer tools carry the profile's valid values.

        Built on first use: pydantic's schema generation takes ~5 ms a tool, 70 ms of an
        offline ``ask`` that validates two calls and never shows a schema.
        """
        base = base_schema(self.params)
        return inject_values(base, self.session) if self.kind in ("analyzer", "diagnose") else base

    def __call__(self, **kwargs: Any) -> str:
        """Run the tool and return its model-readable text (errors included, never raised)."""
        return self.invoke(kwargs).text

    def invoke(self, args: dict[str, Any] | None = None) -> ToolOutput:
        """Run the tool with ``args``; record and return the :class:`ToolOutput`."""
        args = dict(args or {})
        try:
            params = self._validate(args)
            if self.kind == "analyzer":
                out = self._run_analyzer(args, params)
            elif self.kind == "diagnose":
                out = self._run_diagnose(args, params)  # type: ignore[arg-type]
            elif self.kind == "search_cases":
                out = self._run_search(args, params)  # type: ignore[arg-type]
            else:
                out = self._run_show(args, params)  # type: ignore[arg-type]
        except ToolArgumentError as exc:
            out = ToolOutput(self.name, args, f"error: {exc}", error=str(exc))
        except NotAnswerableError as exc:
            out = ToolOutput(
                self.name,
                args,
                f"not enough signal: {exc}",
                error=str(exc),
                not_answerable=True,
            )
        except Exception as exc:  # an analyzer bug must not cost the whole answer
            if strict_mode():
                raise
            _log.exception("tool %s failed", self.name)
            msg = f"{self.name} failed with an internal error ({type(exc).__name__}: {exc})"
            out = ToolOutput(self.name, args, f"error: {msg}", error=msg, not_answerable=True)
        if self.session.cap_tool_text:
            out.text = cap_tokens(out.text, self.session.settings.max_tool_tokens)
        with self.session._lock:
            self.session.calls.append(out)
        return out

    # validation ----------------------------------------------------------------------------
    def _validate(self, args: dict[str, Any]) -> BaseModel:
        clean = {k: v for k, v in args.items() if v is not None}
        props = self.schema.get("properties", {})
        unknown = [k for k in clean if k not in props]
        if unknown:
            valid = ", ".join(props) or "none"
            raise ToolArgumentError(
                f"{self.name} has no argument {', '.join(map(repr, unknown))}; its arguments are: {valid}"
            )
        s = self.session
        for key, value in clean.items():
            if key in _RANK_FIELDS and s.ranks:
                _check_int(key, value, s.ranks, "rank", "ranks")
            elif key == "step" and s.steps:
                _check_int(key, value, s.steps, "step", "steps")
            elif key == "group" and s.groups and str(value) not in s.groups:
                raise ToolArgumentError(
                    f"group {clean_data(value, 60)!r} does not exist; groups are: {', '.join(s.groups)}"
                )
            elif key == "transport" and "enum" in props.get(key, {}):
                allowed = props[key]["enum"]
                if str(value) not in allowed:
                    raise ToolArgumentError(
                        f"transport {clean_data(value, 30)!r} is not in this profile; transports are: "
                        f"{', '.join(allowed) or 'none'}"
                    )
        try:
            return self.params(**clean)
        except ValidationError as exc:
            msgs = []
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"])
                prop = props.get(loc, {})
                hint = ""
                if "enum" in prop:
                    hint = f"; valid values: {', '.join(map(str, prop['enum']))}"
                elif "minimum" in prop or "maximum" in prop:
                    hint = f"; valid range: {prop.get('minimum', '')}-{prop.get('maximum', '')}"
                msgs.append(f"{loc}: {err['msg']}{hint}")
            raise ToolArgumentError(f"bad arguments for {self.name}: " + "; ".join(msgs)) from None

    # runners -------------------------------------------------------------------------------
    def _run_analyzer(self, args: dict[str, Any], params: BaseModel) -> ToolOutput:
        res = self.session.run_analyzer(self.name, params)
        call = _call_repr(self.name, args)
        store = self.session.store
        ref = store.put(res.table, call) if res.table is not None else None
        extra_refs = {k: store.put(v, f"{call}.{k}") for k, v in res.tables.items()}
        text = render_result(res, call, ref, extra_refs, self.session)
        return ToolOutput(self.name, args, text, table_ref=ref, result=res)

    def _run_diagnose(self, args: dict[str, Any], params: DiagnoseParams) -> ToolOutput:
        d = self.session.diagnosis()
        text = render_diagnosis(
            d, rank=params.rank, language=params.language, call=_call_repr(self.name, args)
        )
        return ToolOutput(self.name, args, text, diagnosis=d)

    def _run_search(self, args: dict[str, Any], params: SearchCasesParams) -> ToolOutput:
        bad = [t for t in params.symptom_tags or [] if t not in SYMPTOM_TAGS]
        if bad:
            raise ToolArgumentError(
                f"unknown symptom tag(s) {', '.join(bad)}; valid tags: {', '.join(SYMPTOM_TAGS)}"
            )
        try:
            hits = self.session.search_cases(params.query, params.symptom_tags, params.k)
        except InputError as exc:  # a broken case file must not cost the diagnosis
            raise NotAnswerableError(f"the case library could not be read: {exc}") from exc
        except Exception as exc:  # index/embedding failure: answer without cases
            if strict_mode():
                raise
            raise NotAnswerableError(
                f"the case library could not be read ({type(exc).__name__}: {exc})"
            ) from exc
        lines = []
        for h in hits:
            lines.append(f"- case {h.id}: {clean_data(h.title, 120)} (source: {h.source})")
            if h.matched_tags:
                lines.append(f"  matched symptoms: {', '.join(h.matched_tags)}")
            for r in h.remedies[:3]:
                lines.append(f"  remedy: {clean_data(r, 200)}")
            if h.expected_effect:
                lines.append(f"  expected effect: {clean_data(h.expected_effect, 200)}")
        body = "\n".join(lines) if lines else "no matching case"
        text = f"search_cases: {len(hits)} case(s)\n" + fence(body, "search_cases")
        return ToolOutput(self.name, args, text, cases=hits)

    def _run_show(self, args: dict[str, Any], params: ShowTableParams) -> ToolOutput:
        df = self.session.store.get(params.ref)
        page = df.iloc[params.offset : params.offset + params.limit]
        shown_to = params.offset + len(page)
        head = (
            f"show_table {params.ref} ({clean_data(self.session.store.title(params.ref), 80)}): "
            f"rows {params.offset}-{max(params.offset, shown_to - 1)} of {len(df)}"
        )
        if params.offset >= len(df):
            head += f"; offset {params.offset} is past the end (last row is {len(df) - 1})"
        body = render_table(page, params.limit)
        return ToolOutput(
            self.name,
            args,
            head + "\n" + fence(body, params.ref),
            table_ref=params.ref,
            page=page,
        )

    # LangChain -----------------------------------------------------------------------------
    def as_langchain(self) -> Any:
        """This tool as a LangChain ``StructuredTool`` (same schema; errors returned as text)."""
        from langchain_core.tools import StructuredTool

        def _run(**kwargs: Any) -> str:
            return self.invoke(kwargs).text

        return StructuredTool.from_function(
            func=_run,
            name=self.name,
            description=self.description,
            args_schema=self.schema,
        )

    def spec(self) -> dict[str, Any]:
        """OpenAI-style function spec: ``{"name", "description", "parameters"}``."""
        return {"name": self.name, "description": self.description, "parameters": self.schema}


def _check_int(key: str, value: Any, valid: Sequence[int], noun: str, plural: str) -> None:
    try:
        v = int(value)
        if v != float(value):
            raise ValueError
    except (TypeError, ValueError):
        raise ToolArgumentError(
            f"{key} must be an integer; {plural} are {fmt_ranks(valid)}"
        ) from None
    if v not in set(valid):
        raise ToolArgumentError(f"{noun} {v} does not exist; {plural} are {fmt_ranks(valid)}")


def _call_repr(name: str, args: dict[str, Any]) -> str:
    inner = ", ".join(f"{k}={clean_data(v, 40)}" for k, v in args.items() if v is not None)
    return f"{name}({inner})"


def render_result(
    res: AnalyzerResult,
    call: str,
    ref: str | None,
    extra_refs: dict[str, str],
    session: ToolSession,
) -> str:
    """Model-readable text of an analyzer result: headline metrics, findings, a few rows.

    The analyzer's own numbers (metrics) are shown outside the data block; finding summaries,
    notes and table rows (which can embed operator names, paths, env values) are fenced.
    """
    head = [f"{call}: profile with {len(session.ranks)} ranks ({fmt_ranks(session.ranks)})"]
    if session.steps:
        head[0] += f", steps {fmt_ranks(session.steps)}"
    if res.metrics:
        head.append(
            "metrics: " + "; ".join(f"{k}={fmt_num(v, unit_of(k))}" for k, v in res.metrics.items())
        )
    body: list[str] = []
    if res.findings:
        body.append(f"findings ({len(res.findings)}):")
        for f in res.findings:
            sources = sorted({e.source for e in f.evidence if e.source})
            body.append(f"- [{f.severity.value}] {f.id}: {clean_data(f.summary, 400)}")
            if f.metrics:
                body.append(
                    "  numbers: "
                    + "; ".join(f"{k}={fmt_num(v, unit_of(k))}" for k, v in f.metrics.items())
                )
            if f.estimated_gain_us is not None:
                body.append(f"  estimated gain per step: {fmt_num(f.estimated_gain_us, 'us')}")
            if f.symptom_tags:
                body.append(f"  symptom tags: {', '.join(f.symptom_tags)}")
            if sources:
                body.append(f"  sources: {clean_data('; '.join(sources), 300)}")
    else:
        body.append("findings: none")
    for note in res.notes:
        body.append(f"note: {clean_data(note, 300)}")
    inline = {}
    for k, r in extra_refs.items():  # small summary tables first: they survive the token cap
        df = session.store.get(r)
        if k in INLINE_TABLES and 0 < len(df) <= MAX_ROWS:
            inline[k] = r
            body.append(f"extra table {k}: {r} ({len(df)} rows):")
            body.append(render_table(df, MAX_ROWS))
    if ref is not None and res.table is not None and not res.table.empty:
        n_rows = len(res.table)
        shown = min(n_rows, MAX_ROWS)
        trunc = f"; truncated, {n_rows} rows total" if n_rows > shown else ""
        body.append(f"table {ref} ({n_rows} rows, showing {shown}{trunc}):")
        body.append(render_table(res.table, MAX_ROWS))
    for k, r in extra_refs.items():
        if k not in inline:
            n = len(session.store.get(r))
            body.append(f"extra table {k}: {r} ({n} rows; use show_table)")
    return "\n".join(head) + "\n" + fence("\n".join(body), call)


# -- building ---------------------------------------------------------------------------------
def build_tools(
    profile: Profile,
    *,
    baseline: Profile | None = None,
    settings: Settings | None = None,
    store: TableStore | None = None,
    registry: dict[str, AnalyzerSpec[Any]] | None = None,
    case_search: CaseSearch | None = None,
    session: ToolSession | None = None,
) -> list[Tool]:
    """Generate the tools for ``profile``: one per registered analyzer, ``search_cases``, ``show_table``.

    Args:
        profile: The profile the tools work on (valid values are injected from it).
        baseline: Baseline profile; ``compare_profiles`` (and any ``needs_baseline`` analyzer)
            is only offered when one is given.
        settings: Token cap and case index settings.
        store: Where result tables go (``TableStore.get(ref)``).
        registry: Analyzer registry (default: every analyzer module, loaded).
        case_search: Case search function (default: ``advisor_chat.kb.search_cases``).
        session: An existing session to share (then the other keyword arguments are ignored).

    Returns:
        ``diagnose`` first, then the analyzers by report order, then ``search_cases``,
        ``show_table``.
    """
    s = session or ToolSession(
        profile,
        baseline=baseline,
        settings=settings,
        store=store,
        registry=registry,
        case_search=case_search,
    )
    tools: list[Tool] = [
        Tool(
            "diagnose",
            DIAGNOSE_DESCRIPTION,
            DiagnoseParams,
            "diagnose",
            s,
        )
    ]
    for spec in sorted(s.registry.values(), key=lambda sp: (sp.order, sp.name)):
        if spec.needs_baseline and s.baseline is None:
            continue
        tools.append(
            Tool(
                spec.name,
                spec.description,
                spec.params,
                "analyzer",
                s,
            )
        )
    tools.append(
        Tool(
            "search_cases",
            SEARCH_CASES_DESCRIPTION,
            SearchCasesParams,
            "search_cases",
            s,
        )
    )
    tools.append(
        Tool(
            "show_table",
            SHOW_TABLE_DESCRIPTION,
            ShowTableParams,
            "show_table",
            s,
        )
    )
    return tools


def tool_schemas(registry: dict[str, AnalyzerSpec[Any]] | None = None) -> list[dict[str, Any]]:
    """Profile-independent specs of every tool (what ``advisor-chat tools list`` prints)."""
    reg = registry if registry is not None else load_all()
    out = [
        {
            "name": "diagnose",
            "description": DIAGNOSE_DESCRIPTION,
            "parameters": base_schema(DiagnoseParams),
            "needs_baseline": False,
        }
    ]
    for spec in sorted(reg.values(), key=lambda sp: (sp.order, sp.name)):
        out.append(
            {
                "name": spec.name,
                "description": spec.description,
                "parameters": base_schema(spec.params),
                "needs_baseline": spec.needs_baseline,
            }
        )
    for name, params, desc in (
        ("search_cases", SearchCasesParams, SEARCH_CASES_DESCRIPTION),
        ("show_table", ShowTableParams, SHOW_TABLE_DESCRIPTION),
    ):
        out.append(
            {
                "name": name,
                "description": desc,
                "parameters": base_schema(params),
                "needs_baseline": False,
            }
        )
    return out


__all__ = [
    "REGISTRY",
    "SearchCasesParams",
    "ShowTableParams",
    "Tool",
    "ToolOutput",
    "ToolSession",
    "base_schema",
    "build_tools",
    "fmt_ranks",
    "inject_values",
    "strict_mode",
    "tool_schemas",
]
