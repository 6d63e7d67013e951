"""Run a backend over eval items and score every answer.

Profiles are generated once per (scenario, generation kwargs, variant) into
``settings.home/evals/profiles/`` and reused by later runs; real samples are read in place (never
written to). Every item gets a fresh advisor (``Advisor(profile, settings=..., baseline=...)``); the
turns of one item are asked in order in the same conversation, so follow-ups ("and rank 13?") see the
earlier turns.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from advisor_chat.agent.answer import Answer
from advisor_chat.config import Settings, load_settings
from advisor_chat.errors import InputError
from advisor_chat.evals.dataset import EvalItem, Expect, Variant
from advisor_chat.evals.evaluators import (
    ExpectedNumber,
    Resolved,
    TurnScore,
    evaluate_turn,
)
from advisor_chat.evals.realfacts import real_facts

DIAGNOSIS_CHECKS = ("ranks", "category", "link", "op", "verdict")


class Conversation(Protocol):
    """What the runner needs from a backend: ``ask`` keeps the conversation."""

    def ask(self, question: str) -> Answer:
        """Answer one question (follow-ups see the previous turns)."""
        ...


AdvisorFactory = Callable[[Any, Any, Settings], Conversation]
"""``(profile, baseline_or_None, settings) -> conversation`` (default: :class:`advisor_chat.agent.Advisor`)."""


def default_factory(profile: Any, baseline: Any, settings: Settings) -> Conversation:
    """Build the project's :class:`~advisor_chat.agent.Advisor` for ``settings.model``."""
    from advisor_chat.agent import Advisor  # type: ignore[attr-defined]

    return Advisor(profile, settings=settings, baseline=baseline)  # type: ignore[no-any-return]


def find_real_root() -> Path | None:
    """The real samples folder, or ``None`` when none is found.

    Tried in order: ``<repo>/tests/data/real`` (shipped with the repository, Mulan PSL v2, see its
    ``PROVENANCE.md``), ``$ADVISOR_SHARED/samples/real``, then ``../shared/samples/real`` beside
    the repository (or one level higher).
    """
    repo = Path(__file__).resolve().parents[2]
    cands = [repo / "tests" / "data" / "real"]
    env = os.environ.get("ADVISOR_SHARED")
    if env:
        cands.append(Path(env) / "samples" / "real")
    cands += [
        repo.parent / "shared" / "samples" / "real",
        repo.parent.parent / "shared" / "samples" / "real",
    ]
    for c in cands:
        if c.is_dir():
            return c.resolve()
    return None


# --------------------------------------------------------------------------------------------------
# Profiles: generate once, derive variants, load once per run


@dataclass
class Source:
    """A resolved profile source of an item."""

    path: Path
    baseline: Path | None
    facts: dict[str, Any]
    kind: str  # "scenario" | "real"


def _gen_key(scenario: str, gen: dict[str, Any]) -> str:
    parts = [scenario] + [f"{k}{gen[k]}" for k in sorted(gen)]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))


class ProfileSource:
    """Generates scenarios (once) and variants under ``home/evals/profiles`` and loads profiles.

    Args:
        settings: Settings (``home`` holds the generated profiles and the parse cache).
        real_root: Folder of the real samples, or ``None`` when they are not available.
    """

    def __init__(self, settings: Settings, real_root: Path | None) -> None:
        self.settings = settings
        self.real_root = real_root
        self.root = settings.home / "evals" / "profiles"
        self._loaded: dict[Path, Any] = {}
        self.load_s: dict[str, float] = {}

    def generated(self, scenario: str, gen: dict[str, Any]) -> Path:
        """Folder of ``scenario`` generated with ``gen`` (generated now if absent)."""
        from advisor_chat.synth import generate  # type: ignore[attr-defined]

        out = self.root / _gen_key(scenario, gen)
        if (out / "answer_key.json").is_file():
            return out
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".tmp-{out.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        generate(scenario, tmp, **gen)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        return out

    def variant(self, base: Path, variant: Variant) -> Path:
        """A copy of ``base`` without the ranks/files the variant drops (made once)."""
        digest = hashlib.sha1(variant.model_dump_json().encode()).hexdigest()[:10]
        out = self.root / f"{base.name}--v{digest}"
        if (out / ".done").is_file():
            return out
        tmp = self.root / f".tmp-{out.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(base, tmp)
        if variant.keep_ranks is not None:
            keep = set(variant.keep_ranks)
            for info in list(tmp.rglob("profiler_info_*.json")):
                rank = int(info.stem.rsplit("_", 1)[1])
                if rank not in keep:
                    shutil.rmtree(info.parent, ignore_errors=True)
        for name in variant.drop_files:
            for f in list(tmp.rglob(name)):
                if f.is_file():
                    f.unlink()
        (tmp / ".done").write_text("ok\n", encoding="utf-8")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        return out

    def resolve(self, item: EvalItem) -> Source:
        """Where the item's profile (and baseline) lives, and the facts its expectations use.

        Raises:
            InputError: A real sample is requested but the samples are not available.
        """
        if item.real is not None:
            if self.real_root is None:
                raise InputError(
                    f"real sample {item.real!r} needed by eval item {item.id} not found",
                    remedy="set ADVISOR_SHARED to the shared folder",
                )
            base = self.real_root / item.real
            facts = real_facts(base)
            kind = "real"
        else:
            assert item.scenario is not None
            base = self.generated(item.scenario, item.gen)
            facts = json.loads((base / "answer_key.json").read_text(encoding="utf-8"))
            kind = "scenario"
        path = base / item.profile if item.profile else base
        baseline = base / item.baseline if item.baseline else None
        if item.variant is not None:
            path = self.variant(path, item.variant)
        return Source(path=path, baseline=baseline, facts=facts, kind=kind)

    def load(self, path: Path) -> Any:
        """Load (once per run) the profile at ``path``."""
        if path not in self._loaded:
            from advisor_chat.ingest import load_profile

            t0 = time.perf_counter()
            self._loaded[path] = load_profile(path, settings=self.settings)
            self.load_s[str(path)] = time.perf_counter() - t0
        return self._loaded[path]


# --------------------------------------------------------------------------------------------------
# References and placeholders


class UnresolvedError(Exception):
    """An expectation refers to a fact the answer key / sample does not have (a dataset bug)."""


def lookup(facts: dict[str, Any], path: str) -> Any:
    """Follow ``a.b[0].c`` through nested dicts/lists.

    Raises:
        UnresolvedError: A part of the path is missing.
    """
    cur: Any = facts
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            idx = int(part[1:-1])
            if not isinstance(cur, list) or idx >= len(cur):
                raise UnresolvedError(f"{path}: index {idx} missing")
            cur = cur[idx]
        else:
            if not isinstance(cur, dict) or part not in cur:
                raise UnresolvedError(f"{path}: {part!r} missing")
            cur = cur[part]
    return cur


def question_context(facts: dict[str, Any]) -> dict[str, Any]:
    """Placeholders for questions and literal expectations, from an answer key or real facts.

    Keys: ``slow_rank`` (first slow rank), ``slow_ranks`` ("3, 5"), ``other_rank`` (a rank that is not
    slow, next after the slow rank), ``link_src``, ``link_dst``, ``transport``, ``op_type``, ``op_name``,
    ``nranks``, ``last_rank``, ``steps``, plus every scalar fact of the source (e.g. ``max_free_rank``).
    """
    ctx: dict[str, Any] = {k: v for k, v in facts.items() if isinstance(v, int | float | str)}
    ranks = facts.get("ranks")
    nranks = len(ranks) if isinstance(ranks, list) else ranks
    if isinstance(nranks, int):
        ctx["nranks"] = nranks
        ctx["last_rank"] = nranks - 1
    slow = [int(r) for r in facts.get("slow_ranks") or []]
    if slow:
        ctx["slow_rank"] = slow[0]
        ctx["slow_ranks"] = ", ".join(str(r) for r in slow)
    if isinstance(nranks, int) and nranks > 1:
        start = slow[0] + 1 if slow else 1
        for i in range(nranks):
            cand = (start + i) % nranks
            if cand not in slow:
                ctx["other_rank"] = cand
                break
    link = facts.get("slow_link")
    if isinstance(link, dict):
        ctx["link_src"] = link.get("src_rank")
        ctx["link_dst"] = link.get("dst_rank")
        ctx["transport"] = link.get("transport")
    op = facts.get("op")
    if isinstance(op, dict):
        ctx["op_type"] = op.get("op_type")
        ctx["op_name"] = op.get("name")
    rc = facts.get("root_cause")
    if isinstance(rc, dict):
        ctx.update(root_cause_context(rc))
    return ctx


def root_cause_context(rc: dict[str, Any]) -> dict[str, Any]:
    """Placeholders from an answer key's ``root_cause`` (docs/CONTRACTS.md).

    Keys (only those the root cause has): ``culprit_rank`` (first culprit rank), ``culprit_first`` /
    ``culprit_last``, ``victim_rank`` (the middle victim that is neither a culprit nor a link end),
    ``victim_rank2`` (the last such victim), ``victim_first`` / ``victim_last``, ``link_src`` /
    ``link_dst`` / ``transport``, ``stage``, ``event_step`` / ``event_rank`` (first event),
    ``event_step2`` / ``event_rank2`` (second), ``excluded_step``, ``not_slow_rank``, ``operator``,
    ``shape``.
    """
    ctx: dict[str, Any] = {}
    culprits = sorted(int(r) for r in rc.get("culprit_ranks") or [])
    link = [int(r) for r in rc.get("culprit_link") or []]
    if culprits:
        ctx["culprit_rank"] = culprits[0]
        ctx["culprit_first"], ctx["culprit_last"] = culprits[0], culprits[-1]
    victims = sorted(
        int(r)
        for r in rc.get("victim_ranks") or []
        if int(r) not in culprits and int(r) not in link
    )
    if victims:
        ctx["victim_rank"] = victims[len(victims) // 2]
        ctx["victim_rank2"] = victims[-1]
        ctx["victim_first"], ctx["victim_last"] = victims[0], victims[-1]
    if len(link) == 2:
        ctx["link_src"], ctx["link_dst"] = link
        if rc.get("culprit_transport"):
            ctx["transport"] = rc["culprit_transport"]
    if rc.get("culprit_stage") is not None:
        ctx["stage"] = rc["culprit_stage"]
    events = [(int(s), int(r)) for s, r in rc.get("events") or []]
    if events:
        ctx["event_step"], ctx["event_rank"] = events[0]
    if len(events) > 1:
        ctx["event_step2"], ctx["event_rank2"] = events[1]
    if rc.get("excluded_steps"):
        ctx["excluded_step"] = int(rc["excluded_steps"][0])
    if rc.get("not_slow_ranks"):
        ctx["not_slow_rank"] = int(rc["not_slow_ranks"][0])
    for k in ("operator", "shape"):
        if rc.get(k):
            ctx[k] = rc[k]
    return ctx


def _fill(text: str, ctx: dict[str, Any]) -> str:
    def rep(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in ctx or ctx[key] is None:
            raise UnresolvedError(f"placeholder {{{key}}} has no value for this profile")
        return str(ctx[key])

    return re.sub(r"\{([a-z_][a-z0-9_]*)\}", rep, text)


def _ref(value: Any, facts: dict[str, Any], ctx: dict[str, Any]) -> Any:
    if isinstance(value, str):
        if value.startswith("@key:") or value.startswith("@real:"):
            return lookup(facts, value.split(":", 1)[1])
        return _fill(value, ctx)
    return value


def _as_ranks(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, dict):
        return [int(value[k]) for k in ("src_rank", "dst_rank") if k in value]
    if isinstance(value, list | tuple):
        out: list[int] = []
        for v in value:
            out += _as_ranks(v)
        return out
    return [int(value)]


def resolve_expect(exp: Expect, facts: dict[str, Any], ctx: dict[str, Any], lang: str) -> Resolved:
    """Turn an :class:`Expect` with references and placeholders into concrete values.

    Raises:
        UnresolvedError: A reference or placeholder cannot be resolved for this profile.
    """
    r = Resolved(lang=lang)
    if exp.ranks is not None:
        raw = _ref(exp.ranks, facts, ctx)
        vals = raw if isinstance(raw, list) else [raw]
        r.ranks = _as_ranks([_ref(v, facts, ctx) for v in vals])
    if exp.category is not None:
        r.category = str(_ref(exp.category, facts, ctx))
    if exp.link is not None:
        link = _ref(exp.link, facts, ctx)
        if not isinstance(link, dict):
            raise UnresolvedError(f"link {exp.link!r} resolved to {link!r}, not a link")
        r.link = {k: _ref(v, facts, ctx) for k, v in link.items()}
    if exp.op is not None:
        op = _ref(exp.op, facts, ctx)
        if not isinstance(op, dict):
            raise UnresolvedError(f"op {exp.op!r} resolved to {op!r}, not an op")
        r.op = {k: _ref(v, facts, ctx) for k, v in op.items()}
    if exp.verdict is not None:
        v = _ref(exp.verdict, facts, ctx)
        if v is None:
            raise UnresolvedError("verdict resolved to null")
        r.verdict = str(v)
    if exp.cases is not None:
        cases = _ref(exp.cases, facts, ctx)
        r.cases = [str(c) for c in (cases if isinstance(cases, list) else [cases])]
    r.acceptable_cases = list(exp.acceptable_cases)
    for spec in exp.numbers:
        if spec.ref is None:
            r.numbers.append(
                ExpectedNumber(
                    spec.name or "value", float(spec.value or 0.0), spec.rel_tol, spec.abs_tol
                )
            )
            continue
        val = _ref(spec.ref, facts, ctx)
        base = spec.ref.split(":", 1)[1].rsplit(".", 1)[-1]
        if isinstance(val, dict):
            for k, v in val.items():
                if isinstance(v, int | float) and not isinstance(v, bool):
                    r.numbers.append(ExpectedNumber(k, float(v), spec.rel_tol, spec.abs_tol))
        elif isinstance(val, list):
            for i, v in enumerate(val):
                r.numbers.append(
                    ExpectedNumber(
                        f"{spec.name or base}[{i}]", float(v), spec.rel_tol, spec.abs_tol
                    )
                )
        elif isinstance(val, bool) or not isinstance(val, int | float):
            raise UnresolvedError(f"{spec.ref} is {val!r}, not a number")
        else:
            r.numbers.append(
                ExpectedNumber(spec.name or base, float(val), spec.rel_tol, spec.abs_tol)
            )
    r.tools = list(exp.tools)
    r.expect_refusal = exp.expect_refusal
    r.refusal_needs = [list(g) for g in exp.refusal_needs]
    r.forbid_finding_kinds = list(exp.forbid_finding_kinds)
    r.forbid_patterns = [_fill(p, ctx) for p in exp.forbid_patterns]
    r.max_ungrounded = exp.max_ungrounded
    if exp.culprit is not None:
        rc = _ref(exp.culprit, facts, ctx)
        if not isinstance(rc, dict):
            raise UnresolvedError(f"culprit {exp.culprit!r} resolved to {rc!r}, not a root cause")
        r.culprit = {k: _deep_ref(v, facts, ctx) for k, v in rc.items()}
    if exp.victims is not None:
        raw = _ref(exp.victims, facts, ctx)
        vals = raw if isinstance(raw, list) else [raw]
        r.victims = _as_ranks([_ref(v, facts, ctx) for v in vals])
    if exp.mechanism is not None:
        r.mechanism = str(_ref(exp.mechanism, facts, ctx))
    r.consistent = exp.consistent
    r.first_sentence = exp.first_sentence
    r.yes_no = exp.yes_no
    if exp.excluded_steps is not None:
        raw = _ref(exp.excluded_steps, facts, ctx)
        vals = raw if isinstance(raw, list) else [raw]
        r.excluded_steps = [int(_ref(v, facts, ctx)) for v in vals]
    r.strict_language = exp.strict_language
    if exp.culprits is not None:
        r.culprits = []
        for ref in exp.culprits:
            rc = _ref(ref, facts, ctx)
            if not isinstance(rc, dict):
                raise UnresolvedError(f"culprit {ref!r} resolved to {rc!r}, not a root cause")
            r.culprits.append({k: _deep_ref(v, facts, ctx) for k, v in rc.items()})
    if exp.evidence is not None:
        r.evidence = [
            [_evidence_pattern(a, facts, ctx) for a in ([g] if isinstance(g, str) else g)]
            for g in exp.evidence
        ]
    if exp.first_suggestion is not None:
        alts = (
            [exp.first_suggestion]
            if isinstance(exp.first_suggestion, str)
            else exp.first_suggestion
        )
        r.first_suggestion = [_evidence_pattern(a, facts, ctx) for a in alts]
    return r


def _evidence_pattern(alt: str, facts: dict[str, Any], ctx: dict[str, Any]) -> str:
    """A regular expression for one evidence alternative.

    An ``@key:``/``@real:`` reference becomes its value matched literally (a number: as a whole
    number, not inside a longer one; a list: any of its items); anything else is a regular expression
    with ``{placeholders}`` filled.
    """
    if alt.startswith("@key:") or alt.startswith("@real:"):
        val = lookup(facts, alt.split(":", 1)[1])
        vals = val if isinstance(val, list) else [val]
        pats: list[str] = []
        for v in vals:
            if isinstance(v, bool) or v is None or isinstance(v, dict | list):
                raise UnresolvedError(f"{alt} is {v!r}, not a name or a number")
            if isinstance(v, int | float):
                pats.append(rf"(?<![\d.]){re.escape(f'{v:g}')}(?![\d])")
            else:
                pats.append(re.escape(str(v)))
        return "|".join(f"(?:{p})" for p in pats)
    return _fill(alt, ctx)


def _deep_ref(value: Any, facts: dict[str, Any], ctx: dict[str, Any]) -> Any:
    """Resolve references inside a (nested) literal, e.g. a root cause written for a real sample."""
    if isinstance(value, list):
        return [_deep_ref(v, facts, ctx) for v in value]
    v = _ref(value, facts, ctx)
    if isinstance(v, str) and re.fullmatch(r"-?\d+", v):
        return int(v)
    return v


# --------------------------------------------------------------------------------------------------
# Results and report


@dataclass
class TurnResult:
    """One asked question and its score."""

    item_id: str
    turn: int
    lang: str
    question: str
    latency_ms: float | None = None
    score: TurnScore | None = None
    error: str | None = None
    error_kind: str | None = None  # "dataset" | "backend" | "load" | "unavailable" | "skipped"
    answer: dict[str, Any] | None = None
    expect_refusal: bool = False
    tags: list[str] = field(default_factory=list)
    dataset: str = ""
    split: str = ""
    source: str = ""

    @property
    def passed(self) -> bool:
        """Passed: answered without error and every check passed."""
        return self.error is None and self.score is not None and self.score.passed

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        d: dict[str, Any] = {
            "item_id": self.item_id,
            "turn": self.turn,
            "lang": self.lang,
            "dataset": self.dataset,
            "split": self.split,
            "source": self.source,
            "tags": self.tags,
            "question": self.question,
            "passed": self.passed,
            "latency_ms": self.latency_ms,
            "error": self.error,
            "error_kind": self.error_kind,
        }
        if self.score is not None:
            d["checks"] = [c.__dict__ for c in self.score.checks]
            d["refused"] = self.score.refused
            d["cited_cases"] = self.score.cited_cases
            d["grounding"] = {
                "numbers_total": self.score.numbers_total,
                "numbers_grounded": self.score.numbers_grounded,
                "ungrounded": self.score.ungrounded,
            }
        if self.answer is not None:
            d["answer"] = self.answer
        return d


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def aggregate(turns: Sequence[TurnResult]) -> dict[str, Any]:
    """Metrics over ``turns`` (skipped turns excluded).

    Returns:
        ``turns``, ``passed``, ``pass_rate``, ``diagnosis_accuracy``, per-check pass rates
        (``checks``), ``citation_precision``, ``citation_recall``, ``grounded_rate``,
        ``ungrounded_count``, ``numbers_recall``, ``tools_recall``, ``refusal_accuracy``,
        ``false_refusals``, ``errors``, ``latency_p50_ms``, ``latency_p95_ms``.
    """
    run = [t for t in turns if t.error_kind != "skipped"]
    checks: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    diag = [0, 0]
    cases_hit = cases_req = cited = relevant = 0
    n_total = n_grounded = ungrounded = 0
    nums = [0, 0]
    tools = [0, 0]
    refusal = [0, 0]
    false_ref = 0
    for t in run:
        if t.score is None:
            if t.expect_refusal:
                refusal[1] += 1
            continue
        for c in t.score.checks:
            checks[c.name][0] += int(c.passed)
            checks[c.name][1] += 1
            if c.name in DIAGNOSIS_CHECKS:
                diag[0] += int(c.passed)
                diag[1] += 1
            if c.name == "cases":
                cases_hit += c.hits
                cases_req += c.total
                cited += len(set(t.score.cited_cases))
                relevant += t.score.relevant_cited
            if c.name == "numbers":
                nums[0] += c.hits
                nums[1] += c.total
            if c.name == "tools":
                tools[0] += c.hits
                tools[1] += c.total
            if c.name == "refusal":
                refusal[0] += int(c.passed)
                refusal[1] += 1
        if not t.expect_refusal and t.score.refused:
            false_ref += 1
        n_total += t.score.numbers_total
        n_grounded += t.score.numbers_grounded
        ungrounded += t.score.ungrounded
    lat = [t.latency_ms for t in run if t.latency_ms is not None]
    passed = sum(t.passed for t in run)
    model = _model_stats(run)
    return {
        "turns": len(run),
        "passed": passed,
        "pass_rate": _ratio(passed, len(run)),
        "diagnosis_accuracy": _ratio(diag[0], diag[1]),
        "checks": {
            k: {"passed": v[0], "total": v[1], "rate": _ratio(v[0], v[1])}
            for k, v in sorted(checks.items())
        },
        "citation_precision": _ratio(relevant, cited),
        "citation_recall": _ratio(cases_hit, cases_req),
        "grounded_rate": _ratio(n_grounded, n_total),
        "numbers_stated": n_total,
        "ungrounded_count": ungrounded,
        "numbers_recall": _ratio(nums[0], nums[1]),
        "tools_recall": _ratio(tools[0], tools[1]),
        "refusal_accuracy": _ratio(refusal[0], refusal[1]),
        "refusals_expected": refusal[1],
        "false_refusals": false_ref,
        "errors": sum(1 for t in run if t.error is not None),
        "latency_p50_ms": _pct(lat, 0.5),
        "latency_p95_ms": _pct(lat, 0.95),
        **model,
    }


def _model_stats(run: Sequence[TurnResult]) -> dict[str, Any]:
    """Answer modes, guarded-mode drafts and token counts (from the kept answers).

    ``draft_ungrounded_caught`` counts the numbers of guarded-mode drafts that failed the
    grounding check (so the template answer was shown instead); ``tokens_per_s`` is completion
    tokens over model wall time (prompt processing included).
    """
    modes: dict[str, int] = defaultdict(int)
    drafts = draft_nums = caught = 0
    calls = completion = prompt = 0.0
    model_s = 0.0
    for t in run:
        a = t.answer or {}
        if a.get("mode"):
            modes[str(a["mode"])] += 1
        dg = a.get("draft_grounding")
        if isinstance(dg, dict):
            drafts += 1
            draft_nums += int(dg.get("numbers_total", 0))
            caught += len(dg.get("ungrounded") or [])
        u = a.get("model_usage") or {}
        calls += float(u.get("calls", 0.0))
        completion += float(u.get("completion_tokens", 0.0))
        prompt += float(u.get("prompt_tokens", 0.0))
        model_s += float(u.get("model_s", 0.0))
    return {
        "modes": dict(sorted(modes.items())),
        "fallbacks": modes.get("guarded-fallback", 0),
        "drafts": drafts,
        "draft_numbers": draft_nums,
        "draft_ungrounded_caught": caught,
        "model_calls": int(calls),
        "prompt_tokens": int(prompt),
        "completion_tokens": int(completion),
        "model_s": model_s,
        "tokens_per_s": completion / model_s if model_s > 0 and completion > 0 else None,
    }


@dataclass
class EvalReport:
    """Everything one eval run measured."""

    backend: str
    datasets: list[str]
    turns: list[TurnResult]
    started_at: str
    duration_s: float
    load_s: dict[str, float] = field(default_factory=dict)
    gate: float | None = None
    warmup_s: float = 0.0
    #: Show the held-out items' questions, answers and failed checks in :meth:`to_dict` /
    #: :meth:`to_markdown`. Off by default: whoever tunes the rules reads these reports, and a
    #: held-out item seen is no longer held out; its results still count in every rate.
    show_heldout: bool = False

    def _shown(self, turns: list[TurnResult]) -> list[TurnResult]:
        return [t for t in turns if self.show_heldout or t.split != "heldout"]

    def _source(self, t: TurnResult) -> str:
        """The turn's scenario name, or ``blind-N`` for a blind held-out kind (unless shown).

        A blind kind's name says what is planted (:mod:`advisor_chat.synth.blind`); N is stable
        across runs (order of the names' hashes), so per-kind scores still compare between runs.
        """
        return self._blind_label(t.source)

    def _blind_label(self, name: str) -> str:
        from advisor_chat.synth.blind import BLIND_KINDS

        if self.show_heldout or name not in BLIND_KINDS:
            return name
        order = sorted(BLIND_KINDS, key=lambda n: hashlib.sha256(n.encode()).hexdigest())
        return f"blind-{order.index(name) + 1}"

    @property
    def withheld(self) -> int:
        """Held-out turns whose details the reports leave out (0 with ``show_heldout``)."""
        return len(self.turns) - len(self._shown(self.turns))

    @property
    def metrics(self) -> dict[str, Any]:
        """Overall metrics (see :func:`aggregate`)."""
        return aggregate(self.turns)

    def breakdown(self, key: Callable[[TurnResult], str]) -> dict[str, dict[str, Any]]:
        """Metrics per group of turns (e.g. per language)."""
        groups: dict[str, list[TurnResult]] = defaultdict(list)
        for t in self.turns:
            groups[key(t)].append(t)
        return {k: aggregate(v) for k, v in sorted(groups.items())}

    @property
    def pass_rate(self) -> float:
        """Share of (non-skipped) turns that passed; 0 when nothing ran."""
        return float(self.metrics["pass_rate"] or 0.0)

    @property
    def failures(self) -> list[TurnResult]:
        """Turns that failed (skipped excluded)."""
        return [t for t in self.turns if not t.passed and t.error_kind != "skipped"]

    @property
    def skipped(self) -> list[TurnResult]:
        """Turns not run (e.g. real samples unavailable)."""
        return [t for t in self.turns if t.error_kind == "skipped"]

    def to_dict(self, *, answers: bool = True) -> dict[str, Any]:
        """JSON-ready form: metrics, breakdowns, every turn (with the answer when ``answers``)."""
        turns = []
        for t in self._shown(self.turns):
            d = t.to_dict()
            if not answers:
                d.pop("answer", None)
            turns.append(d)
        return {
            "backend": self.backend,
            "datasets": self.datasets,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "gate": self.gate,
            "gate_passed": None if self.gate is None else self.pass_rate >= self.gate,
            "metrics": self.metrics,
            "by_language": self.breakdown(lambda t: t.lang),
            "by_dataset": self.breakdown(lambda t: t.dataset),
            "by_kind": self.breakdown(_kind),
            "by_split": self.breakdown(lambda t: t.split or "none"),
            "by_scenario": self.breakdown(self._source),
            "by_split_language": self.breakdown(lambda t: f"{t.split or 'none'}/{t.lang}"),
            "failures": [
                {
                    "item_id": t.item_id,
                    "turn": t.turn,
                    "question": t.question,
                    "error": t.error,
                    "failed_checks": [c.__dict__ for c in t.score.failed()] if t.score else [],
                }
                for t in self._shown(self.failures)
            ],
            "heldout_withheld": self.withheld,
            "skipped": [
                f"{t.item_id}#{t.turn}" if self._shown([t]) else "held-out item"
                for t in self.skipped
            ],
            "profile_load_s": {
                str(Path(k).parent / self._blind_label(Path(k).name)): v
                for k, v in self.load_s.items()
            },
            "warmup_s": self.warmup_s,
            "turns": turns,
        }

    def to_markdown(self) -> str:
        """The human-readable report."""
        m = self.metrics

        def f(x: Any, pct: bool = True) -> str:
            if x is None:
                return "n/a"
            return f"{100 * x:.1f}%" if pct else f"{x:.0f}"

        lines = [
            f"# Eval report: `{self.backend}`",
            "",
            f"Run {self.started_at}, {self.duration_s:.1f} s, datasets: {', '.join(self.datasets)}.",
            "",
        ]
        if self.gate is not None:
            verdict = "PASS" if self.pass_rate >= self.gate else "FAIL"
            lines += [
                f"**Gate {100 * self.gate:.0f}%: {verdict}** (pass rate {f(m['pass_rate'])})",
                "",
            ]
        lines += [
            "| metric | value |",
            "|---|---|",
            f"| questions (turns) run | {m['turns']} |",
            f"| passed | {m['passed']} |",
            f"| pass rate | {f(m['pass_rate'])} |",
            f"| diagnosis accuracy (ranks/category/link/op/verdict checks) | {f(m['diagnosis_accuracy'])} |",
            f"| case citation precision | {f(m['citation_precision'])} |",
            f"| case citation recall | {f(m['citation_recall'])} |",
            f"| grounded-number rate | {f(m['grounded_rate'])} ({m['numbers_stated']} numbers stated) |",
            f"| ungrounded numbers | {m['ungrounded_count']} |",
            f"| key numbers stated (recall) | {f(m['numbers_recall'])} |",
            f"| required tools called (recall) | {f(m['tools_recall'])} |",
            f"| refusal correctness | {f(m['refusal_accuracy'])} of {m['refusals_expected']} |",
            f"| refusals of answerable questions | {m['false_refusals']} |",
            f"| errors | {m['errors']} |",
            f"| latency p50 / p95 | {f(m['latency_p50_ms'], False)} ms / {f(m['latency_p95_ms'], False)} ms |",
            f"| skipped (data unavailable) | {len(self.skipped)} |",
            *self._model_rows(m),
            f"| one-time case-index warm-up (not in latency) | {self.warmup_s:.1f} s |",
            "",
            "## By language",
            "",
            "| lang | turns | pass rate | diagnosis | citation recall | grounded | p50 ms | p95 ms |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for k, v in self.breakdown(lambda t: t.lang).items():
            lines.append(
                f"| {k} | {v['turns']} | {f(v['pass_rate'])} | {f(v['diagnosis_accuracy'])} | "
                f"{f(v['citation_recall'])} | {f(v['grounded_rate'])} | {f(v['latency_p50_ms'], False)} | "
                f"{f(v['latency_p95_ms'], False)} |"
            )
        lines += ["", "## By kind of question", "", "| kind | turns | pass rate |", "|---|---|---|"]
        for k, v in self.breakdown(_kind).items():
            lines.append(f"| {k} | {v['turns']} | {f(v['pass_rate'])} |")
        if any(t.split for t in self.turns):
            lines += [
                "",
                "## By split (held-out items are never used to tune the advisor)",
                "",
                "| split | lang | turns | passed | pass rate |",
                "|---|---|---|---|---|",
            ]
            for k, v in self.breakdown(lambda t: t.split or "none").items():
                lines.append(f"| {k} | all | {v['turns']} | {v['passed']} | {f(v['pass_rate'])} |")
            for k, v in self.breakdown(lambda t: f"{t.split or 'none'} | {t.lang}").items():
                lines.append(f"| {k} | {v['turns']} | {v['passed']} | {f(v['pass_rate'])} |")
            lines += [
                "",
                "## By scenario",
                "",
                "| scenario | turns | pass rate | failing checks |",
                "|---|---|---|---|",
            ]
            groups: dict[str, list[TurnResult]] = defaultdict(list)
            for t in self.turns:
                groups[self._source(t)].append(t)
            for k, ts in sorted(groups.items()):
                v = aggregate(ts)
                fails: dict[str, int] = defaultdict(int)
                for t in ts:
                    if t.error is not None:
                        fails[f"error:{t.error_kind}"] += 1
                    elif t.score is not None:
                        for c in t.score.failed():
                            fails[c.name] += 1
                why = ", ".join(f"{n} {c}" for n, c in sorted(fails.items(), key=lambda x: -x[1]))
                lines.append(f"| {k} | {v['turns']} | {f(v['pass_rate'])} | {why or '-'} |")
        lines += ["", "## Checks", "", "| check | passed | total | rate |", "|---|---|---|---|"]
        for k, v in m["checks"].items():
            lines.append(f"| {k} | {v['passed']} | {v['total']} | {f(v['rate'])} |")
        lines += ["", f"## Failures ({len(self.failures)})", ""]
        if not self.failures:
            lines.append("None.")
        hidden = len(self.failures) - len(self._shown(self.failures))
        if hidden:
            lines.append(
                f"{hidden} failure(s) of held-out items not listed (they count in every rate "
                "above; `--show-heldout` lists them, and then they are no longer held out for "
                "whoever reads them)."
            )
        for t in self._shown(self.failures):
            why = t.error or "; ".join(
                f"{c.name}: {c.detail}" for c in (t.score.failed() if t.score else [])
            )
            lines.append(f"- `{t.item_id}` turn {t.turn} ({t.lang}) “{t.question}”: {why}")
        if self.skipped:
            lines += ["", "## Skipped", "", ", ".join(f"`{t.item_id}`" for t in self.skipped)]
        return "\n".join(lines) + "\n"

    @staticmethod
    def _model_rows(m: dict[str, Any]) -> list[str]:
        """Report rows for model backends (answer modes, guarded drafts, tokens/s)."""
        if not m.get("model_calls") and not m.get("drafts"):
            return []
        modes = ", ".join(f"{k} {v}" for k, v in m["modes"].items()) or "n/a"
        tps = "n/a" if m["tokens_per_s"] is None else f"{m['tokens_per_s']:.1f}"
        return [
            f"| answer modes | {modes} |",
            f"| guarded fallbacks to the template answer | {m['fallbacks']} of {m['drafts']} drafts |",
            f"| numbers in guarded drafts / ungrounded ones caught (never shown) | "
            f"{m['draft_numbers']} / {m['draft_ungrounded_caught']} |",
            f"| model calls / prompt tokens / completion tokens | {m['model_calls']} / "
            f"{m['prompt_tokens']} / {m['completion_tokens']} |",
            f"| completion tokens/s (model wall time incl. prompt processing) | {tps} "
            f"({m['model_s']:.0f} s in the model) |",
        ]

    def write(self, out_dir: Path, *, prefix: str = "") -> tuple[Path, Path]:
        """Write ``<prefix><backend>.json`` and ``.md`` into ``out_dir``; returns both paths.

        ``prefix`` keeps reports of other datasets apart (``paraphrase-offline.md`` beside the
        default set's ``offline.md``).
        """
        out_dir.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", prefix + self.backend)
        jp, mp = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
        jp.write_text(
            json.dumps(self.to_dict(), ensure_ascii=False, indent=1, default=str), encoding="utf-8"
        )
        mp.write_text(self.to_markdown(), encoding="utf-8")
        return jp, mp


def _kind(t: TurnResult) -> str:
    if "refusal" in t.tags or t.expect_refusal:
        return "refusal" if t.expect_refusal else "refusal-item other turn"
    if t.turn > 0:
        return "follow-up"
    if "real" in t.tags:
        return "real sample"
    return "diagnosis"


def warm_up(settings: Settings) -> float:
    """Build the case index before timing answers (a one-time cost, not answer latency).

    Returns:
        Seconds spent (0 when the index already exists).
    """
    t0 = time.perf_counter()
    try:
        from advisor_chat.kb import build_index  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - the kb layer is always there in a full install
        return 0.0
    build_index(settings)
    return time.perf_counter() - t0


def backend_name(settings: Settings) -> str:
    """Report name of the backend: ``offline`` or the model name (with the host of a base URL)."""
    mode = "" if settings.guarded is None else ("-guarded" if settings.guarded else "-free")
    if settings.base_url:
        host = re.sub(r"^https?://", "", settings.base_url).split("/")[0]
        return f"{settings.model}{mode}@{host}"
    return f"{settings.model}{mode}"


def _scenario_names() -> set[str] | None:
    """Names of the scenarios the generator has (``None`` if the synth package cannot be read)."""
    try:
        from advisor_chat.synth import SCENARIOS
    except ImportError:  # pragma: no cover - synth ships with the package
        return None
    return set(SCENARIOS)


def run_eval(
    items: Sequence[EvalItem],
    *,
    settings: Settings | None = None,
    factory: AdvisorFactory | None = None,
    real_root: Path | None = None,
    progress: Callable[[TurnResult], None] | None = None,
    keep_answers: bool = True,
) -> EvalReport:
    """Run every item's conversation on a backend and score each answer.

    Args:
        items: Eval items (:func:`~advisor_chat.evals.dataset.load_dataset`).
        settings: Settings; ``model``/``base_url`` choose the backend, ``home`` holds the generated
            profiles. Default: :func:`~advisor_chat.config.load_settings`.
        factory: Builds a conversation ``(profile, baseline, settings)``; default: ``Advisor``.
        real_root: Folder of the real samples (``tests/data/real``); default:
            :func:`find_real_root`. Items on real samples are skipped when it is unavailable.
        progress: Called after each turn.
        keep_answers: Keep each answer (as a dict) in the results.

    Returns:
        The report (nothing is written; see :meth:`EvalReport.write`).
    """
    settings = settings or load_settings()
    factory = factory or default_factory
    real_root = real_root if real_root is not None else find_real_root()
    profiles = ProfileSource(settings, real_root)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t_start = time.perf_counter()
    warmup_s = warm_up(settings)
    results: list[TurnResult] = []

    def emit(tr: TurnResult) -> None:
        results.append(tr)
        if progress is not None:
            progress(tr)

    available = _scenario_names()
    for item in items:
        base: dict[str, Any] = {
            "item_id": item.id,
            "lang": item.lang,
            "tags": item.tags,
            "dataset": item.dataset,
            "split": item.split or "",
            "source": item.source,
        }
        if item.scenario is not None and available is not None and item.scenario not in available:
            # a scenario another change has not landed yet: a failure, never a silent skip
            for i, turn in enumerate(item.turns):
                emit(
                    TurnResult(
                        turn=i,
                        question=turn.q,
                        error=f"scenario not available: {item.scenario}",
                        error_kind="unavailable",
                        expect_refusal=turn.expect.expect_refusal,
                        **base,
                    )
                )
            continue
        if item.real is not None and real_root is None:
            for i, turn in enumerate(item.turns):
                emit(
                    TurnResult(
                        turn=i,
                        question=turn.q,
                        error="real samples not available",
                        error_kind="skipped",
                        expect_refusal=turn.expect.expect_refusal,
                        **base,
                    )
                )
            continue
        try:
            src = profiles.resolve(item)
            profile = profiles.load(src.path)
            baseline = profiles.load(src.baseline) if src.baseline is not None else None
            conv = factory(profile, baseline, settings)
        except Exception as exc:
            msg = f"{type(exc).__name__}: {exc}"
            for i, turn in enumerate(item.turns):
                emit(
                    TurnResult(
                        turn=i,
                        question=turn.q,
                        error=msg,
                        error_kind="load",
                        expect_refusal=turn.expect.expect_refusal,
                        **base,
                    )
                )
            continue
        ctx = question_context(src.facts)
        for i, turn in enumerate(item.turns):
            tr = TurnResult(
                turn=i, question=turn.q, expect_refusal=turn.expect.expect_refusal, **base
            )
            try:
                tr.question = _fill(turn.q, ctx)
                exp = resolve_expect(turn.expect, src.facts, ctx, item.lang)
            except UnresolvedError as exc:
                tr.error, tr.error_kind = f"dataset: {exc}", "dataset"
                emit(tr)
                continue
            t0 = time.perf_counter()
            try:
                answer = conv.ask(tr.question)
            except Exception as exc:
                tr.latency_ms = (time.perf_counter() - t0) * 1e3
                tb = traceback.extract_tb(exc.__traceback__)[-1:]
                where = f" at {tb[0].filename.rsplit('/', 1)[-1]}:{tb[0].lineno}" if tb else ""
                tr.error, tr.error_kind = f"{type(exc).__name__}: {exc}{where}", "backend"
                emit(tr)
                continue
            tr.latency_ms = (time.perf_counter() - t0) * 1e3
            tr.score = evaluate_turn(answer, exp)
            if keep_answers:
                tr.answer = answer.model_dump(mode="json")
            emit(tr)
    return EvalReport(
        backend=backend_name(settings),
        datasets=sorted({i.dataset for i in items}),
        turns=results,
        started_at=started,
        duration_s=time.perf_counter() - t_start,
        load_s=profiles.load_s,
        warmup_s=warmup_s,
    )
