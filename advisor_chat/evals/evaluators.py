"""Deterministic evaluators: check one :class:`Answer` against resolved expectations.

Every check looks at the answer's text (``Answer.answer``) together with its structured parts (cited
findings' summaries, ranks and metrics; suggestions; cited case ids; tool calls; grounding). No model
is involved: the same answer always gets the same score.

Checks (each a :class:`CheckResult`):

- ``ranks``: every expected rank is named ("rank 12", "ranks 8-15", "12号卡", "卡 12") or is in a
  cited finding's ``ranks``.
- ``category``: the bottleneck category (compute / scheduling / communication / none) is named, with
  English and Chinese synonyms.
- ``link``: both ends of the slow link are named as a pair ("3 → 4", "rank 3 to rank 4") or sit in one
  cited ``slow_link`` finding, and the transport (RDMA, HCCS, ...) is named.
- ``op``: the operator type or name is named, and the dimensions of its first input shape.
- ``verdict``: the verdict words (or their synonyms) are present.
- ``cases``: every required case id is cited (recall); precision is recorded as a metric.
- ``numbers``: each expected number appears within tolerance, in any unit its name allows
  (``_us`` may be said in ms or s, ``_ratio`` as a percentage ...), in the text or a finding's metrics.
- ``tools``: each required tool was called without error.
- ``refusal``: when expected, the answer says there is not enough signal and names the data needed.
- ``grounding``: at most ``max_ungrounded`` ungrounded numbers (``Answer.grounding``).
- ``language``: the answer is in the question's language.
- ``forbidden_findings``: none of the forbidden finding kinds is cited.
- ``forbidden_text``: no forbidden claim (a regular expression, e.g. "rank 13 is slow") is stated.

Root-cause checks (issue 12; the paraphrase sets), on the text the user reads:

- ``culprit``: the root cause's culprit is named as its kind requires (rank(s); group ranks + operator
  + shape; stage or its ranks; link pair + transport; the (step, rank) events; "every rank" for a
  job-level cause; "no culprit" for a healthy run) and no culprit rank is called "not slow";
- ``victims``: no victim rank is called slow or the cause;
- ``mechanism``: the mechanism (host stall, slow link, pipeline, exposed communication ...) is stated;
- ``consistency``: no rank is called "not slow" and also blamed / waited for / on the slow link;
- ``first_sentence``: the first sentence names the culprit (or refuses, or says "no culprit");
- ``yes_no``: the first sentence gives the yes/no verdict;
- ``excluded``: data-artifact steps are said excluded/incomplete, never slow;
- ``language`` (strict): a Chinese answer holds no English phrase (identifiers allowed).

Generalization checks (issue 22; evals/datasets/generalization.yaml):

- ``culprits``: several independent root causes, each named as ``culprit`` requires;
- ``evidence``: the distinguishing evidence (operator, accelerator core, dtype, node, step ...) is
  stated: every group of alternatives matches in the text the user reads;
- ``first_suggestion``: the first thing the answer tells the user to do (first suggestion, else first
  sentence) matches what the evidence points to.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from advisor_chat.agent.answer import Answer

# --------------------------------------------------------------------------------------------------
# Resolved expectations (concrete values; see runner.resolve_expect)


@dataclass
class ExpectedNumber:
    """One concrete expected number.

    Attributes:
        name: Name with unit suffix (e.g. ``free_gap_ms``), used to allow unit conversions.
        value: Expected value in the unit of ``name``.
        rel_tol: Relative tolerance.
        abs_tol: Absolute tolerance (unit of ``name``).
    """

    name: str
    value: float
    rel_tol: float = 0.05
    abs_tol: float = 0.0


@dataclass
class Resolved:
    """Expectations of one turn with every reference resolved to a value."""

    lang: str = "en"
    ranks: list[int] | None = None
    category: str | None = None
    link: dict[str, Any] | None = None
    op: dict[str, Any] | None = None
    verdict: str | None = None
    cases: list[str] | None = None
    acceptable_cases: list[str] = field(default_factory=list)
    numbers: list[ExpectedNumber] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    expect_refusal: bool = False
    refusal_needs: list[list[str]] = field(default_factory=list)
    forbid_finding_kinds: list[str] = field(default_factory=list)
    forbid_patterns: list[str] = field(default_factory=list)
    max_ungrounded: int = 0
    culprit: dict[str, Any] | None = None
    victims: list[int] | None = None
    mechanism: str | None = None
    consistent: bool = False
    first_sentence: str | None = None
    yes_no: str | None = None
    excluded_steps: list[int] | None = None
    strict_language: bool = False
    culprits: list[dict[str, Any]] | None = None
    evidence: list[list[str]] | None = None
    first_suggestion: list[str] | None = None


@dataclass
class CheckResult:
    """Outcome of one check.

    Attributes:
        name: Check name (``ranks``, ``category``, ``numbers`` ...).
        passed: Whether it passed.
        detail: Why it failed (or what matched), for the report.
        hits: Matched units (e.g. numbers found, cases cited correctly).
        total: Units expected (so partial credit can be aggregated).
    """

    name: str
    passed: bool
    detail: str = ""
    hits: int = 0
    total: int = 0


@dataclass
class TurnScore:
    """All checks of one turn plus the raw measures aggregated in the report."""

    checks: list[CheckResult]
    refused: bool
    cited_cases: list[str]
    relevant_cited: int
    numbers_total: int
    numbers_grounded: int
    ungrounded: int

    @property
    def passed(self) -> bool:
        """A turn passes when every check passes."""
        return all(c.passed for c in self.checks)

    def failed(self) -> list[CheckResult]:
        """The failing checks."""
        return [c for c in self.checks if not c.passed]


# --------------------------------------------------------------------------------------------------
# Text helpers


def haystack(answer: Answer) -> str:
    """The text an answer states: its body, cited findings' summaries and suggestions."""
    parts = [answer.answer]
    parts += [f.summary for f in answer.findings]
    parts += [s.text for s in answer.suggestions]
    return "\n".join(p for p in parts if p)


_RANGE_SEP = r"(?:-|–|—|~|to|至|到)"
_LIST_SEP = r"(?:,|，|、|/|&|and|or|和|及|与)"
_RANK_WORD = r"(?:ranks?|rank_id|卡|cards?|devices?)"
_RANK_LIST = re.compile(
    rf"(?:(?<![A-Za-z_])|(?<=卡)){_RANK_WORD}\s*(?:id\s*)?[#:=]?\s*(\d+(?:\s*(?:{_RANGE_SEP}|{_LIST_SEP})\s*(?:{_RANK_WORD}\s*)?\d+)*)",
    re.IGNORECASE,
)
_RANK_ZH = re.compile(r"(?:第\s*)?(\d+)\s*号\s*(?:卡|rank|节点|设备)?|(\d+)\s*卡")
_MAX_RANGE = 8192


def _expand(seq: str) -> set[int]:
    out: set[int] = set()
    tokens = re.split(rf"\s*({_RANGE_SEP}|{_LIST_SEP})\s*", seq, flags=re.IGNORECASE)
    nums: list[int] = []
    ops: list[str] = []
    for tok in tokens:
        t = re.sub(rf"^{_RANK_WORD}\s*", "", tok.strip(), flags=re.IGNORECASE)
        if t.isdigit():
            nums.append(int(t))
        elif t:
            ops.append(t.lower())
    if not nums:
        return out
    out.add(nums[0])
    for i in range(1, len(nums)):
        op = ops[i - 1] if i - 1 < len(ops) else ","
        if (
            re.fullmatch(_RANGE_SEP, op, flags=re.IGNORECASE)
            and 0 <= nums[i] - nums[i - 1] <= _MAX_RANGE
        ):
            out.update(range(nums[i - 1], nums[i] + 1))
        else:
            out.add(nums[i])
    return out


def ranks_in_text(text: str) -> set[int]:
    """Ranks named in ``text``: "rank 12", "ranks 3, 5 and 7", "ranks 8-15", "12号卡", "卡 3".

    Args:
        text: Answer text (English or Chinese).

    Returns:
        The set of rank numbers named.
    """
    found: set[int] = set()
    for m in _RANK_LIST.finditer(text):
        found |= _expand(m.group(1))
    for m in _RANK_ZH.finditer(text):
        g = m.group(1) or m.group(2)
        if g:
            found.add(int(g))
    for m in re.finditer(_ZH_RANKS, text, re.IGNORECASE):  # "0~7号卡", "3、5号卡"
        found |= _subj_ranks(m)
    return found


# not inside an identifier or another number ("r12", "hcom_allReduce__210", "1.2.3"); a number
# right after a Chinese character is one ("每步共16次": ``\w`` would also match the ideograph)
_NUM = re.compile(
    r"(?<![A-Za-z0-9_.])[-−+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?:[eE][-+]?\d+)?"
)


@dataclass(frozen=True)
class TextNumber:
    """A number stated in text, with its displayed precision."""

    value: float
    decimals: int


def numbers_in_text(text: str) -> list[TextNumber]:
    """Every number in ``text`` (thousands separators and unicode minus handled).

    Args:
        text: Any text.

    Returns:
        The numbers with the count of decimals shown (for rounding tolerance).
    """
    out = []
    for m in _NUM.finditer(text):
        raw = m.group(0).replace(",", "").replace("−", "-")
        try:
            v = float(raw)
        except ValueError:
            continue
        mant = raw.split("e")[0].split("E")[0]
        dec = len(mant.split(".")[1]) if "." in mant else 0
        out.append(TextNumber(v, dec))
    return out


_UNIT_TOKENS = {
    "us": "us",
    "ms": "ms",
    "s": "s",
    "sec": "s",
    "ratio": "ratio",
    "share": "ratio",
    "frac": "ratio",
    "fraction": "ratio",
    "pct": "pct",
    "percent": "pct",
    "mb": "mb",
    "gbps": "gbps",
}


def unit_of(name: str) -> str | None:
    """The unit a number's name carries: the last unit token (``free_excess_us_per_step`` → ``us``)."""
    for tok in reversed(name.lower().split("_")):
        if tok in _UNIT_TOKENS:
            return _UNIT_TOKENS[tok]
    return None


def _unit_variants(name: str, value: float) -> list[float]:
    unit = unit_of(name)
    if unit == "us":
        return [value, value / 1e3, value / 1e6]
    if unit == "ms":
        return [value, value * 1e3, value / 1e3]
    if unit == "s":
        return [value, value * 1e3]
    if unit == "ratio":
        return [value, value * 100]
    if unit == "pct":
        return [value, value / 100]
    if unit == "mb":
        return [value, value / 1e3, value * 1e3]
    return [value]


def number_found(expected: ExpectedNumber, stated: list[TextNumber], metrics: list[float]) -> bool:
    """Whether ``expected`` is stated (text) or carried (finding metrics) within tolerance.

    A text number shown with ``d`` decimals also matches within half a unit of its last digit, so
    "9.4 ms" matches 9.43 ms. Signs are ignored ("9.4 ms shorter" states a delta of -9.4 ms).
    """
    for target in _unit_variants(expected.name, expected.value):
        t = abs(target)
        scale = t / abs(expected.value) if expected.value else 1.0
        tol = max(expected.rel_tol * t, expected.abs_tol * scale)
        for s in stated:
            rounding = 0.5 * 10 ** (-s.decimals)
            if abs(abs(s.value) - t) <= max(tol, rounding if t >= rounding * 2 else 0.0) + 1e-12:
                return True
        for m in metrics:
            if isinstance(m, int | float) and math.isfinite(m) and abs(abs(m) - t) <= tol + 1e-12:
                return True
    return False


CATEGORY_WORDS: dict[str, list[str]] = {
    "compute": [
        r"\bcompute\b",
        r"\bcomputing\b",
        r"\bcomputation",
        r"\bcompute[- ]bound",
        r"计算",
        r"算子",
    ],
    "scheduling": [
        r"host[- ]bound",
        r"\bscheduling\b",
        r"\bdispatch",
        r"\blaunch",
        r"\bfree\b",
        r"下发",
        r"调度",
        r"空闲",
    ],
    "communication": [r"\bcommunication", r"\bcollective", r"\bhccl\b", r"通信", r"集合通信"],
    "none": [
        r"no (?:clear |obvious |significant )?(?:bottleneck|slow rank|problem|issue)",
        r"\bhealthy\b",
        r"\bbalanced\b",
        r"nothing stands out",
        r"within noise",
        r"健康",
        r"均衡",
        r"(?:没有|无|未发现)(?:明显)?(?:的)?(?:瓶颈|慢卡|问题|异常)",
    ],
}


def _any(patterns: list[str], text: str) -> str | None:
    for p in patterns:
        m = re.search(p, text, flags=re.IGNORECASE)
        if m:
            return m.group(0)
    return None


VERDICT_WORDS: dict[str, list[str]] = {
    "regression": [r"regress", r"slower", r"worse", r"变慢", r"劣化", r"退化", r"回退"],
    "improvement": [r"improve", r"faster", r"better", r"变快", r"提升", r"改善"],
    "no_change": [
        r"no (?:significant |real )?change",
        r"within noise",
        r"unchanged",
        r"无明显变化",
        r"噪声",
    ],
    "noise": [r"within noise", r"noise", r"噪声", r"无明显变化"],
    "degradation": [
        r"degrad",
        r"getting slower",
        r"slows down",
        r"grows? (?:by|every|each|per)",
        r"越来越慢",
        r"劣化",
        r"退化",
        r"逐步变慢",
    ],
    "not_slow": [
        r"\bnot (?:a |the )?slow",
        r"\bisn't (?:a |the )?slow",
        r"不是慢卡",
        r"并不慢",
        r"不慢",
        r"不是瓶颈",
    ],
}

# Synonyms of the words of a compound verdict (``hccl_ops_doubled_comm_share_up``): each word of the
# verdict must be stated by one of its alternatives.
VERDICT_WORD_SYNONYMS: dict[str, list[str]] = {
    "hccl": [r"hccl", r"collective", r"communication op", r"集合通信", r"通信算子"],
    "ops": [r"\bops?\b", r"operator", r"算子", r"\bcount"],
    "op": [r"\bops?\b", r"operator", r"算子"],
    "doubled": [
        r"doubl",
        r"twice",
        r"\b(?:1\.[89]\d*|2(?:\.[0-4]\d*)?)\s*[x×倍]",
        r"\b2(?:\.0+)?\s*[x×]",
        r"[x×]\s*2(?:\.0+)?\b",
        r"翻倍",
        r"两倍",
        r"2 ?倍",
    ],
    "comm": [r"\bcomm", r"通信"],
    "share": [r"share", r"ratio", r"%", r"占比", r"比例"],
    "up": [
        r"\bup\b",
        r"rose",
        r"increase",
        r"grew",
        r"higher",
        r"more",
        r"上升",
        r"增加",
        r"增大",
        r"变大",
        r"提高",
        r"\+\s?\d",
    ],
    "down": [r"\bdown\b", r"fell", r"decrease", r"lower", r"less", r"下降", r"减少", r"降低"],
    "slower": [r"slower", r"regress", r"变慢"],
    "faster": [r"faster", r"improv", r"变快"],
}


def verdict_patterns(verdict: str) -> list[list[list[str]]]:
    """Ways to state ``verdict``: a list of alternatives, each a list of word groups that must all match.

    A known verdict (``regression``, ``degradation``, ``not_slow`` ...) maps to its English and Chinese
    synonyms. A compound verdict (``hccl_ops_doubled_comm_share_up``) must state each of its words, each
    through one of its synonyms (``doubled`` → "doubled", "2x", "翻倍" ...).
    """
    v = verdict.strip().lower()
    alts: list[list[list[str]]] = []
    if v in VERDICT_WORDS:
        alts.append([VERDICT_WORDS[v]])
    words = [w for w in re.split(r"[_\-\s]+", v) if w]
    if words and v not in VERDICT_WORDS:
        alts.append([VERDICT_WORD_SYNONYMS.get(w, [re.escape(w)]) for w in words])
    return alts


REFUSAL_WORDS = [
    r"not enough signal",
    r"insufficient (?:signal|data)",
    r"not enough data",
    r"cannot (?:tell|determine|answer|decide|say)",
    r"can't (?:tell|determine|answer|decide|say)",
    r"no (?:\w+ ){0,3}data (?:to|that|for)",
    r"(?:does not|doesn't) contain",
    r"信号不足",
    r"数据不足",
    r"没有足够",
    r"不足以",
    r"无法(?:判断|确定|回答|给出|得出)",
    r"does not exist",
    r"不存在",
]


def is_refusal(answer: Answer) -> bool:
    """Whether the answer says the data cannot support an answer."""
    text = answer.answer
    if answer.intent and re.search(r"refus|not_answerable|insufficient", answer.intent, re.I):
        return True
    return _any(REFUSAL_WORDS, text) is not None


def _has_cjk(text: str) -> bool:
    return re.search(r"[\u4e00-\u9fff]", text) is not None


def _shape_dims(shapes: Any) -> list[int]:
    if shapes is None:
        return []
    if isinstance(shapes, list | tuple):
        first = shapes[0] if shapes else ""
        if isinstance(first, list | tuple):
            return [int(x) for x in first]
        shapes = str(first) if len(shapes) > 0 else ""
    s = str(shapes).strip().strip('"')
    first = s.split(";")[0]
    return [int(x) for x in re.findall(r"\d+", first)]


# --------------------------------------------------------------------------------------------------
# The checks


def check_ranks(answer: Answer, expected: list[int]) -> CheckResult:
    """Every expected rank is named in the text or carried by a cited finding."""
    text_ranks = ranks_in_text(haystack(answer))
    finding_ranks = {r for f in answer.findings for r in f.ranks}
    found = text_ranks | finding_ranks
    missing = [r for r in expected if r not in found]
    return CheckResult(
        "ranks",
        not missing,
        f"missing ranks {missing}; named {sorted(text_ranks)[:20]}" if missing else "",
        len(expected) - len(missing),
        len(expected),
    )


def check_category(answer: Answer, category: str) -> CheckResult:
    """The bottleneck category is named (synonyms in English and Chinese)."""
    pats = CATEGORY_WORDS.get(category.lower(), [re.escape(category)])
    hit = _any(pats, haystack(answer))
    return CheckResult(
        "category",
        hit is not None,
        f"matched {hit!r}" if hit else f"no words for {category!r}",
        int(hit is not None),
        1,
    )


def check_link(answer: Answer, link: dict[str, Any]) -> CheckResult:
    """The slow link's two ranks are named as a pair and its transport is named."""
    src, dst = int(link["src_rank"]), int(link["dst_rank"])
    transport = str(link.get("transport") or "")
    text = haystack(answer)
    pair = False
    pair_re = re.compile(
        rf"(\d+)\s*(?:\)|\s)*(?:->|→|⟶|=>|<->|↔|-|–|to|至|到|和|与|and)\s*(?:\(|\s)*(?:{_RANK_WORD}\s*)?(\d+)",
        re.IGNORECASE,
    )
    for m in pair_re.finditer(text):
        a, b = int(m.group(1)), int(m.group(2))
        if {a, b} == {src, dst}:
            pair = True
            break
    if not pair:
        for f in answer.findings:
            if f.kind == "slow_link" and {src, dst} <= set(f.ranks):
                pair = True
                break
    t_ok = not transport or re.search(re.escape(transport), text, re.IGNORECASE) is not None
    ok = pair and t_ok
    detail = "" if ok else f"pair {src}-{dst} named: {pair}; transport {transport!r} named: {t_ok}"
    return CheckResult("link", ok, detail, int(ok), 1)


def check_op(answer: Answer, op: dict[str, Any]) -> CheckResult:
    """The operator (type or name) and the dimensions of its first input shape are named."""
    text = haystack(answer)
    names = [str(op[k]) for k in ("op_type", "name") if op.get(k)]
    name_ok = any(re.search(re.escape(n), text, re.IGNORECASE) for n in names) if names else True
    dims = _shape_dims(op.get("input_shapes"))
    stated = {int(n.value) for n in numbers_in_text(text) if n.value == int(n.value)}
    missing = [d for d in dims if d not in stated]
    ok = name_ok and not missing
    detail = "" if ok else f"op named: {name_ok} ({names}); missing shape dims {missing}"
    return CheckResult("op", ok, detail, int(ok), 1)


def check_verdict(answer: Answer, verdict: str) -> CheckResult:
    """The verdict is stated (its words through their synonyms, or a known verdict's synonyms)."""
    text = haystack(answer)
    for groups in verdict_patterns(verdict):
        missing = [g for g in groups if _any(g, text) is None]
        if not missing:
            return CheckResult("verdict", True, "", 1, 1)
    return CheckResult("verdict", False, f"verdict {verdict!r} not stated", 0, 1)


def check_forbidden_text(answer: Answer, patterns: list[str]) -> CheckResult:
    """None of the regular expressions matches the answer text (e.g. a wrong claim)."""
    text = haystack(answer)
    bad = [p for p in patterns if re.search(p, text, re.IGNORECASE)]
    return CheckResult("forbidden_text", not bad, f"states {bad}" if bad else "", int(not bad), 1)


def check_cases(
    answer: Answer, required: list[str], acceptable: list[str]
) -> tuple[CheckResult, int]:
    """Every required case id is cited. Returns the check and the number of relevant citations."""
    cited = [c.id for c in answer.cases]
    relevant = set(required) | set(acceptable)
    missing = [c for c in required if c not in cited]
    rel = sum(1 for c in set(cited) if c in relevant)
    return (
        CheckResult(
            "cases",
            not missing,
            f"missing cases {missing}; cited {cited}" if missing else "",
            len(required) - len(missing),
            len(required),
        ),
        rel,
    )


def strip_rank_mentions(text: str) -> str:
    """``text`` without its rank mentions ("rank 12", "12号卡"), so rank ids are not read as values."""
    text = _RANK_LIST.sub(" ", text)
    return _RANK_ZH.sub(" ", text)


def check_numbers(answer: Answer, expected: list[ExpectedNumber]) -> CheckResult:
    """Each expected number is stated within tolerance (text or finding metrics).

    Rank mentions are removed first, so "rank 12" never states the value 12.
    """
    stated = numbers_in_text(strip_rank_mentions(haystack(answer)))
    metrics = [v for f in answer.findings for v in f.metrics.values()]
    metrics += [f.estimated_gain_us for f in answer.findings if f.estimated_gain_us is not None]
    missing = [f"{e.name}={e.value:g}" for e in expected if not number_found(e, stated, metrics)]
    return CheckResult(
        "numbers",
        not missing,
        f"not stated: {missing}" if missing else "",
        len(expected) - len(missing),
        len(expected),
    )


def check_tools(answer: Answer, tools: list[str]) -> CheckResult:
    """Each required tool was called (without error); ``"a|b"`` accepts either tool."""
    called = {t.name for t in answer.tool_calls if not t.error}
    missing = [t for t in tools if not called & set(t.split("|"))]
    return CheckResult(
        "tools",
        not missing,
        f"not called: {missing}; called {sorted(called)}" if missing else "",
        len(tools) - len(missing),
        len(tools),
    )


def check_refusal(answer: Answer, needs: list[list[str]]) -> CheckResult:
    """The answer refuses honestly and names the data that would be needed."""
    refused = is_refusal(answer)
    text = haystack(answer)
    missing = [g for g in needs if not any(re.search(re.escape(w), text, re.IGNORECASE) for w in g)]
    ok = refused and not missing
    detail = "" if ok else f"refused: {refused}; data not named: {missing}"
    return CheckResult("refusal", ok, detail, int(ok), 1)


def check_grounding(answer: Answer, max_ungrounded: int) -> CheckResult:
    """At most ``max_ungrounded`` numbers of the text are not found in the turn's tool results."""
    g = answer.grounding
    n = max(len(g.ungrounded), g.numbers_total - g.numbers_grounded)
    return CheckResult(
        "grounding",
        n <= max_ungrounded,
        f"{n} ungrounded: {g.ungrounded[:8]}" if n > max_ungrounded else "",
        g.numbers_grounded,
        g.numbers_total,
    )


def check_language(answer: Answer, lang: str) -> CheckResult:
    """The answer is in the question's language (field and script)."""
    ok = answer.language == lang and (lang != "zh" or _has_cjk(answer.answer))
    return CheckResult(
        "language",
        ok,
        "" if ok else f"answer language {answer.language!r}, expected {lang!r}",
        int(ok),
        1,
    )


def check_forbidden(answer: Answer, kinds: list[str]) -> CheckResult:
    """None of the forbidden finding kinds is cited."""
    bad = [f.id for f in answer.findings if f.kind in kinds]
    return CheckResult(
        "forbidden_findings", not bad, f"cites {bad}" if bad else "", int(not bad), 1
    )


def evaluate_turn(answer: Answer, exp: Resolved) -> TurnScore:
    """Run every applicable check of ``exp`` on ``answer``.

    Args:
        answer: What the backend returned.
        exp: Resolved expectations of this turn.

    Returns:
        The checks and the raw measures (refusal, citations, grounding) for aggregation.
    """
    lang_check = check_language_strict if exp.strict_language else check_language
    checks: list[CheckResult] = [lang_check(answer, exp.lang)]
    relevant = 0
    if exp.expect_refusal:
        checks.append(check_refusal(answer, exp.refusal_needs))
    if exp.ranks:
        checks.append(check_ranks(answer, exp.ranks))
    if exp.category:
        checks.append(check_category(answer, exp.category))
    if exp.link:
        checks.append(check_link(answer, exp.link))
    if exp.op:
        checks.append(check_op(answer, exp.op))
    if exp.verdict:
        checks.append(check_verdict(answer, exp.verdict))
    if exp.cases is not None:
        c, relevant = check_cases(answer, exp.cases, exp.acceptable_cases)
        checks.append(c)
    if exp.numbers:
        checks.append(check_numbers(answer, exp.numbers))
    if exp.tools:
        checks.append(check_tools(answer, exp.tools))
    if exp.forbid_finding_kinds:
        checks.append(check_forbidden(answer, exp.forbid_finding_kinds))
    if exp.forbid_patterns:
        checks.append(check_forbidden_text(answer, exp.forbid_patterns))
    if exp.culprit is not None:
        checks.append(check_culprit(answer, exp.culprit))
    if exp.victims:
        checks.append(check_victims(answer, exp.victims))
    if exp.mechanism:
        checks.append(check_mechanism(answer, exp.mechanism))
    if exp.consistent:
        checks.append(check_consistency(answer))
    if exp.first_sentence:
        checks.append(check_first_sentence(answer, exp.first_sentence, exp.culprit))
    if exp.yes_no:
        checks.append(check_yes_no(answer, exp.yes_no))
    if exp.excluded_steps:
        checks.append(check_excluded(answer, exp.excluded_steps))
    if exp.culprits:
        checks.append(check_culprits(answer, exp.culprits))
    if exp.evidence:
        checks.append(check_evidence(answer, exp.evidence))
    if exp.first_suggestion:
        checks.append(check_first_suggestion(answer, exp.first_suggestion))
    checks.append(check_grounding(answer, exp.max_ungrounded))
    g = answer.grounding
    return TurnScore(
        checks=checks,
        refused=is_refusal(answer),
        cited_cases=[c.id for c in answer.cases],
        relevant_cited=relevant,
        numbers_total=g.numbers_total,
        numbers_grounded=g.numbers_grounded,
        ungrounded=max(len(g.ungrounded), g.numbers_total - g.numbers_grounded),
    )


# --------------------------------------------------------------------------------------------------
# Root-cause checks (issue 12): culprit named, victims not blamed, no contradiction, first sentence
# answers, yes/no verdict, mechanism, excluded steps, strict language. They read the text the user
# sees (the answer and its suggestions), in English or Chinese, by meaning: several phrasings per
# claim, negations excluded, never one planner wording.


def shown_text(answer: Answer) -> str:
    """The text a user reads: the answer body and the suggestions (not the cited findings' data)."""
    parts = [answer.answer] + [s.text for s in answer.suggestions]
    return "\n".join(p for p in parts if p)


_SENT_SPLIT = re.compile(r"(?<=[.!?;])\s+|[。！？；\n]+")


def sentences(text: str) -> list[str]:
    """``text`` cut into sentences (English ``. ! ? ;`` before a space, Chinese ``。！？；``, new lines).

    Markdown emphasis and list/heading markers are removed; empty pieces dropped. A decimal point
    ("9.4 ms") never ends a sentence.
    """
    clean = re.sub(r"[*_`]{1,3}", "", text)
    out: list[str] = []
    for piece in _SENT_SPLIT.split(clean):
        s = re.sub(r"^\s*(?:[-•>]|\d+[.)]|#+)\s+", "", piece).strip()
        if s:
            out.append(s)
    return out


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (markdown headings skipped): what a reader sees first."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    sents = sentences("\n".join(lines))
    return sents[0] if sents else ""


# A list of ranks after an English rank word: "rank 3", "ranks 8-15", "ranks 3, 5 and 7", "rank #3".
_EN_RANKS = (
    rf"(?<![A-Za-z_])(?:ranks?|cards?|devices?|npus?)\s*#?\s*"
    rf"(?P<en>\d+(?:\s*(?:{_RANGE_SEP}|,|and|&|/)\s*(?:ranks?\s*)?\d+)*)"
)
# Chinese: "12号卡", "3、5号卡", "8-15号卡", "第12号卡", "卡12", "rank12".
_ZH_RANKS = (
    rf"(?:第\s*)?(?P<zh>\d+(?:\s*(?:{_RANGE_SEP}|、|,|，|和|及)\s*\d+)*)\s*号\s*(?:卡|rank|设备|NPU)?"
    rf"|(?:卡|rank)\s*(?P<zh2>\d+(?:\s*(?:{_RANGE_SEP}|、|,|，)\s*\d+)*)"
)
# "3号卡和11号卡" as one subject
_ZH_RANK_PAIR = r"(?P<zh3>\d+\s*号卡(?:\s*(?:和|、|与|及|,|，)\s*\d+\s*号卡)+)"
_SUBJ = rf"(?:{_ZH_RANK_PAIR}|{_EN_RANKS}|{_ZH_RANKS})"


def _subj_ranks(m: re.Match[str]) -> set[int]:
    try:
        pair = m.group("zh3")
    except IndexError:
        pair = None
    if pair:
        return {int(x) for x in re.findall(r"\d+", pair)}
    for g in ("en", "zh", "zh2", "bare"):
        try:
            v = m.group(g)
        except IndexError:
            continue
        if v:
            return _expand(v)
    return set()


_EN_FILL = (
    r"(?:\s*(?:\([^)]{0,40}\)|,|is|are|was|were|'s|looks|seems|appears|remains|to|be|the|a|an|"
    r"clearly|likely|probably|definitely|still|also|really|indeed|one|of|our|your|main|real|"
    r"actual|primary|top|obviously|just|mostly|consistently|much|significantly|noticeably|"
    r"here|very|quite|so|too|by far|biggest|single|only)\b)*"
)
_EN_BLAME = (
    r"\s*(?:slow(?:est|er)?\b(?!\s*(?:down|ed\b|because it wait|only because))"
    r"|straggl\w*|culprit|bottleneck|(?:root )?cause\b|problem\b|to blame|lagging|the laggard"
    r"|(?:the )?last (?:to arrive|arriver)|arriv\w* last|late (?:arriver|rank)"
    r"|holding (?:\w+ ){0,2}back|holds (?:\w+ ){0,2}back|dragg?\w* (?:\w+ ){0,2}down)"
)
_ZH_BLAME = (
    r"(?:是|为|就是|成了|属于|明显|确实|最|比较|有点|一直|偏|较|更|其实|本身)*(?:的)?"
    r"(?:慢卡|慢节点|瓶颈|罪魁祸首|元凶|根因|主因|原因本身|问题所在|拖后腿|最慢|偏慢|较慢|慢(?![^，。,.；;]{0,12}等)"
    r"|拖慢了?(?!自己)|最后(?:一个)?到达|晚到达|落后)"
)
_BLAME_OBJ_FIRST = (
    r"(?:slow(?:er|est)?\s+(?:group\s+(?:of\s+)?)?(?:ranks?|cards?)|slow(?:er|est)?\s+group|"
    r"stragglers?|culprits?|bottleneck(?:\s+ranks?)?|root cause|(?<!is )(?<!are )\bthe cause(?=\s+(?:is|are)\s)|"
    r"last arriver|慢卡|瓶颈|罪魁祸首|元凶|根因)\s*(?:is|are|here is|in this job is|:|=|—|–|是|为|：|在)?\s*"
    r"(?:the\s+)?"
)
_WAIT_FOR = (
    r"(?:(?:others?|other ranks|the other \w+|everyone|everybody|the rest|all (?:the )?(?:other )?ranks|"
    r"the cluster|they)\s+(?:all\s+)?(?:have to |must |keep )?wait(?:s|ing|ed)?\s+(?:for|on)\s+"
    r"|\bwait(?:s|ing|ed)?\b[^.;:。]{0,60}?\b(?:for|on)\s+"
    r"|(?:其他|其余|别的|所有)(?:的)?(?:卡|rank)?(?:都)?(?:在)?等(?:待)?"
    r"|等(?:待)?的是|在等(?:待)?"
    r"|\bfix\s+|先(?:处理|修|改|解决)|优先(?:处理|修|解决)|拖慢(?:了)?(?:作业|训练|整体|集群|大家)?的(?:是|为))"
)


def _claims_only(text: str) -> str:
    """``text`` without code spans (examples such as `why is rank 12 slow?`) and questions."""
    t = re.sub(r"`[^`]*`", " ", text)
    return re.sub(r"[^.。!！?？\n]*[?？]", " ", t)


def blamed_ranks(text: str) -> set[int]:
    """Ranks the text calls slow or the cause (negated claims excluded).

    Recognised, in English and Chinese: "rank 3 is (clearly) the slow rank / the straggler / the
    bottleneck / slowest / the cause / holding the job back / arrives last"; "the slow rank is rank 3",
    "culprit: rank 3", "the cause is rank 3"; "the others wait for rank 3"; "3号卡是慢卡", "3号卡最慢", "慢卡是3号卡",
    "其他卡都在等3号卡". Not blame: "rank 3 is not slow", "rank 3 is slowed down by …",
    "rank 3 is slow only because it waits …", "3号卡不慢", "3号卡被拖慢", "3号卡慢是因为在等…",
    "whether rank 0 or rank 3 is slower", "neither rank 0 nor rank 3 is the cause".

    Args:
        text: Answer text.

    Returns:
        The blamed rank numbers.
    """
    out: set[int] = set()
    for s in sentences(_claims_only(text)):
        for m in re.finditer(rf"{_SUBJ}(?P<rest>{_EN_FILL}{_EN_BLAME}|\s*{_ZH_BLAME})", s, re.I):
            after = s[m.end() : m.end() + 25]
            before = s[max(0, m.start() - 12) : m.start()]
            if re.search(
                r"^\W*(?:in|at|during|of|for)\s+(?:one\s+)?steps?\b", after, re.I
            ) or re.search(r"第\s*\d+\s*步", before):
                continue  # blame scoped to one step: an event, not a slow rank
            if re.search(r"(?:比|than)\s*$", before, re.I):
                continue  # "A 比 rank 6 慢": the other side of a comparison
            if re.search(
                r"\b(?:whether|neither|nor)\b|是否|还是|无法判断|不能判断",
                s[max(0, m.start() - 40) : m.start()],
                re.I,
            ):
                continue  # "whether rank 0 or rank 1 is slower", "neither … nor rank 15 is"
            out |= _subj_ranks(m)
        for m in re.finditer(
            rf"{_BLAME_OBJ_FIRST}(?:{_SUBJ}|(?P<bare>\d+(?:\s*(?:{_RANGE_SEP}|,|and|&)\s*\d+)*)\b)",
            s,
            re.I,
        ):
            pre = s[max(0, m.start() - 12) : m.start()]
            if re.search(r"\bnot\b|n't|不是|并非", pre + m.group(0)[:20], re.I):
                continue
            out |= _subj_ranks(m)
        for m in re.finditer(rf"{_WAIT_FOR}{_SUBJ}", s, re.I):
            out |= _subj_ranks(m)
    return out


_EN_NOT_SLOW = (
    r"\s*(?:\([^)]{0,40}\)\s*)?(?:is|are|was|were|'s)\s*(?:actually |really |itself )?"
    r"(?:not|n't|never)\s+(?:really |actually |itself )?(?:a |the )?"
    r"(?:slow\w*|straggl\w*|culprit|bottleneck|(?:root )?cause|problem|to blame)"
    r"|\s+isn't\s+(?:a |the )?(?:slow|straggl|culprit|bottleneck|problem|cause)"
)
_ZH_NOT_SLOW = (
    r"(?:本身|其实|实际上|自身)?(?:并|也)?(?:不慢|不是慢卡|不是瓶颈|不是根因|并非慢卡|没有问题|没问题|"
    r"不是问题|不算慢|并不慢)"
)


def exonerated_ranks(text: str) -> set[int]:
    """Ranks the text says are not slow / not the cause ("rank 3 is not slow", "3号卡不慢")."""
    out: set[int] = set()
    text = _claims_only(text)
    for m in re.finditer(rf"{_SUBJ}(?:{_EN_NOT_SLOW}|\s*{_ZH_NOT_SLOW})", text, re.I):
        if not _scoped(text, m):
            out |= _subj_ranks(m)
    # "ranks 3 and 11 are on the slow link, not slow themselves", "3号卡和11号卡位于慢链路上，本身并不慢":
    # a later "not slow" in the same sentence with no other rank named in between
    gap = r"(?:(?!\brank|\d\s*号|卡\s*\d)[^.。;；!?！？\n]){0,80}?"
    tail = r"(?:\bnot\s+(?:slow|the (?:problem|cause|culprit))\b|本身(?:并)?不慢|(?:并|也)不慢|不是慢卡)"
    for m in re.finditer(rf"{_SUBJ}{gap}{tail}", text, re.I):
        if not _scoped(text, m):
            out |= _subj_ranks(m)
    return out


_SCOPE = re.compile(
    r"other steps|clean steps|remaining steps|rest of the steps|on average|outside (?:of )?(?:that|this|those|these)"
    r"|apart from|except (?:in|for)|其他步|其余步|其它步|别的步|平均|除了?(?:这|那|第)",
    re.I,
)


def _scoped(text: str, m: re.Match[str]) -> bool:
    """Whether a "not slow" claim is scoped to other steps / on average (then it clears nobody)."""
    return _SCOPE.search(m.group(0) + text[m.end() : m.end() + 30]) is not None


_LATE_IT = re.compile(
    r"\b(?:it|this rank)\b(?:\s+\w+){0,2}\s+(?:arrives?|arrived|comes?|is)\s+(?:the\s+)?last"
    r"|(?:others?|other ranks|everyone|the rest|all (?:other )?ranks)[^.]{0,30}wait\w*\s+(?:for|on)\s+(?:it|him|this rank)\b"
    r"|它(?:总是|每次)?(?:最后|最晚)(?:一个)?到达|(?:其他|其余|别的)(?:的)?卡[^。]{0,10}等(?:待)?它",
    re.I,
)
_ON_LINK = (
    r"[^.。]{0,40}?(?:\bon\b|\bat one end of\b|\bendpoint of\b|\bsits on\b)\s+(?:the\s+|a\s+)?(?:slow|degraded)\s+link"
    r"|[^。]{0,20}?(?:在|位于|处于)?(?:慢链路|异常链路|降级链路|慢速链路)(?:上|的一端|端点)"
)


def contradicted_ranks(text: str) -> dict[int, str]:
    """Ranks the text both clears ("not slow") and blames, makes others wait for, or puts on the slow link.

    The blame may be stated about the rank by number anywhere in the text, or by "it"/"它" in the same
    or the next sentence ("Rank 3 is not slow … it arrives last and the other ranks wait for it").

    Returns:
        Rank → the clashing claim.
    """
    out: dict[int, str] = {}
    cleared = exonerated_ranks(text)
    if not cleared:
        return out
    blamed = blamed_ranks(text)
    on_link: set[int] = set()
    for m in re.finditer(rf"{_SUBJ}(?:{_ON_LINK})", text, re.I):
        on_link |= _subj_ranks(m)
    for r in cleared & blamed:
        out[r] = "called not slow and slow/the cause"
    for r in cleared & on_link:
        out[r] = "called not slow and on the slow link"
    sents = sentences(text)
    for i, s in enumerate(sents):
        here = exonerated_ranks(s)
        if not here:
            continue
        window = " ".join(sents[i : i + 2])
        if _LATE_IT.search(window):
            for r in here:
                out.setdefault(r, "called not slow and 'it arrives last / others wait for it'")
    return out


def check_consistency(answer: Answer) -> CheckResult:
    """No rank is both called not slow and blamed / waited for / on the slow link."""
    bad = contradicted_ranks(shown_text(answer))
    return CheckResult(
        "consistency",
        not bad,
        "; ".join(f"rank {r}: {why}" for r, why in sorted(bad.items())),
        int(not bad),
        1,
    )


def check_victims(answer: Answer, victims: list[int]) -> CheckResult:
    """No victim rank is called slow or the cause (it loses time because of the culprit)."""
    blamed = blamed_ranks(shown_text(answer)) & set(victims)
    return CheckResult(
        "victims",
        not blamed,
        f"victim ranks blamed: {sorted(blamed)}" if blamed else "",
        int(not blamed),
        1,
    )


_STEP_LIST = re.compile(
    rf"(?<![A-Za-z_])steps?\s*#?\s*(\d+(?:\s*(?:{_RANGE_SEP}|,|、|and|&)\s*(?:steps?\s*)?\d+)*)"
    r"|第\s*(\d+(?:\s*(?:、|,|，|和)\s*\d+)*)\s*(?:个)?步|(\d+)\s*步|\((\d+)\s*,\s*\d+\)"
    r"|step_?(\d+)",
    re.I,
)


def steps_in_text(text: str) -> set[int]:
    """Steps named in ``text``: "step 12", "steps 11, 13", "第12步", "12步", "(12, 3)" (step, rank)."""
    out: set[int] = set()
    for m in _STEP_LIST.finditer(text):
        g = next((x for x in m.groups() if x), None)
        if g:
            out |= _expand(re.sub(r"steps?\s*", "", g, flags=re.IGNORECASE))
    return out


_PAIR_RANK = re.compile(r"\(\s*(?:step\s*)?\d+\s*[,，]\s*(?:rank\s*)?(\d+)\s*\)", re.I)

_STAGE_WORD = r"(?:pipeline\s+)?stage|(?:流水线|流水)?(?:阶段|stage|级)|pp\s*(?:stage|rank)?"
_ORDINAL_EN = {0: "first", 1: "second", 2: "third", 3: "fourth"}
_ORDINAL_ZH = {0: "一", 1: "二", 2: "三", 3: "四"}


def _stage_named(text: str, stage: int) -> bool:
    pats = [
        rf"(?:{_STAGE_WORD})\s*#?\s*{stage}(?!\d)",
        rf"第\s*{stage}\s*(?:个)?(?:{_STAGE_WORD})",
        rf"\b{_ORDINAL_EN.get(stage, 'zzz')}\s+(?:pipeline\s+)?stage",
        rf"第{_ORDINAL_ZH.get(stage, '零')}(?:个)?(?:{_STAGE_WORD})",
    ]
    return any(re.search(p, text, re.I) for p in pats)


_JOB_WORDS = [
    r"\bevery rank\b",
    r"\ball (?:the )?(?:\d+ )?ranks\b",
    r"\beach rank\b",
    r"\bjob[- ]level\b",
    r"\bwhole (?:job|cluster)\b",
    r"\bcluster[- ]wide\b",
    r"\bacross (?:all )?(?:the )?ranks\b",
    r"\bevery card\b",
    r"\ball cards\b",
    r"所有(?:的)?(?:卡|rank|节点)",
    r"每(?:张|个)?(?:卡|rank)",
    r"全部(?:的)?(?:卡|rank)",
    r"各(?:张)?卡",
    r"整个(?:作业|任务|集群|训练)",
    r"作业级",
    r"全局",
]
_NO_CULPRIT = CATEGORY_WORDS["none"] + [
    r"\bno (?:single |one |specific |particular )?(?:culprit|straggler|slow rank|rank stands out|outlier)",
    r"\bnone of the ranks (?:is|are) slow",
    r"\bno rank (?:is|stands out|lags)",
    r"没有(?:哪|一)?(?:张|个)?(?:卡|rank)(?:明显)?(?:更慢|慢|拖后腿|掉队)",
    r"(?:没有|无|未发现)(?:明显)?(?:的)?(?:慢卡|罪魁祸首|异常卡|掉队)",
    r"各卡(?:之间)?(?:基本)?(?:均衡|一致|差不多)",
    r"(?:under|below|within) (?:the )?thresholds?",
    r"(?:差异|差距|离散)[^。；]{0,8}(?:在|低于)阈值(?:以内|之内|内|以下)",
    r"没有(?:发现)?(?:罪魁|元凶)",
    r"没有哪(?:张|个)(?:卡|rank)",
    r"没有(?:拖慢|拖累)[^。；，]{0,6}(?:的)?(?:卡|rank)",
    r"\bno rank holds\b",
]


# the root-cause phrasings of "no culprit" also state the category "none"
CATEGORY_WORDS["none"] = _NO_CULPRIT


def _rc(rc: dict[str, Any], key: str, default: Any = None) -> Any:
    v = rc.get(key, default)
    return default if v is None else v


def check_culprit(answer: Answer, rc: dict[str, Any], *, text: str | None = None) -> CheckResult:
    """The root cause's culprit is named, as its kind requires, and never cleared.

    ``rc`` is an answer key's ``root_cause`` (docs/CONTRACTS.md): by ``culprit_kind``

    - ``rank``/``ranks``: every culprit rank named;
    - ``group``: every rank of the group named (a range counts), and the operator and the dimensions of
      its shape when the key has them;
    - ``stage``: the stage named ("stage 0", "第一个阶段") or all of its ranks;
    - ``link``: both ends as a pair and the transport;
    - ``operator``: the operator and its shape dimensions;
    - ``steps``: at least 60% of the events' distinct ranks and of their distinct steps named;
    - ``job``: the cause said of every rank / the whole job, and no rank blamed;
    - ``none``: "no culprit / balanced / 没有慢卡" said, and no rank blamed;
    - mechanism ``not_enough_signal``: an honest "not enough signal".

    Culprit ranks (and a slow link's endpoints) must not be called "not slow".

    Args:
        answer: The answer.
        rc: The resolved root-cause dict.
        text: Text to look in (default: :func:`shown_text`); the first-sentence check passes one sentence.
    """
    t = shown_text(answer) if text is None else text
    kind = str(_rc(rc, "culprit_kind", "none"))
    mech = str(_rc(rc, "mechanism", ""))
    ranks = [int(r) for r in _rc(rc, "culprit_ranks", [])]
    named = ranks_in_text(t)
    problems: list[str] = []
    if mech == "not_enough_signal":
        if _any([*REFUSAL_WORDS, r"too (?:few|small)", r"太少", r"太小"], t) is None:
            problems.append("no 'not enough signal'")
        bl = blamed_ranks(t)
        if bl:
            problems.append(f"blames ranks {sorted(bl)} without signal")
    elif kind in ("rank", "ranks"):
        miss = [r for r in ranks if r not in named]
        if miss:
            problems.append(f"culprit ranks not named: {miss}")
        else:
            # named as the cause: blamed, or named in a sentence that states the mechanism (an echo of
            # the question's rank next to a job-level explanation is not naming the culprit)
            blamed = blamed_ranks(t)
            mech_pats = MECHANISM_WORDS.get(mech, [])
            in_role = set(blamed)
            for sent in sentences(t):
                if mech_pats and _any(mech_pats, sent) is not None:
                    in_role |= ranks_in_text(sent)
            not_role = [r for r in ranks if r not in in_role]
            if not_role:
                problems.append(
                    f"ranks {not_role} named but not as the cause ({mech or 'culprit'})"
                )
    elif kind == "group":
        miss = [r for r in ranks if r not in named]
        if miss:
            problems.append(f"group ranks not named: {miss}")
        op = str(_rc(rc, "operator", ""))
        if op and re.search(re.escape(op), t, re.I) is None:
            problems.append(f"operator {op} not named")
        dims = _shape_dims(_rc(rc, "shape", ""))
        stated = {int(n.value) for n in numbers_in_text(t) if n.value == int(n.value)}
        if [d for d in dims if d not in stated]:
            problems.append(f"shape {_rc(rc, 'shape', '')} not named")
    elif kind == "stage":
        stage = _rc(rc, "culprit_stage")
        by_stage = stage is not None and _stage_named(t, int(stage))
        by_ranks = bool(ranks) and all(r in named for r in ranks)
        if not (by_stage or by_ranks):
            problems.append(f"stage {stage} (ranks {ranks}) not named")
    elif kind == "link":
        link = _rc(rc, "culprit_link", [])
        if len(link) == 2:
            fake = answer.model_copy(update={"answer": t, "findings": [], "suggestions": []})
            c = check_link(
                fake,
                {
                    "src_rank": link[0],
                    "dst_rank": link[1],
                    "transport": _rc(rc, "culprit_transport", ""),
                },
            )
            if not c.passed:
                problems.append(c.detail)
            ranks = [int(link[0]), int(link[1])]
        else:
            problems.append("key has no culprit_link")
    elif kind == "operator":
        op = str(_rc(rc, "operator", ""))
        if op and re.search(re.escape(op), t, re.I) is None:
            problems.append(f"operator {op} not named")
        dims = _shape_dims(_rc(rc, "shape", ""))
        stated = {int(n.value) for n in numbers_in_text(t) if n.value == int(n.value)}
        if [d for d in dims if d not in stated]:
            problems.append(f"shape {_rc(rc, 'shape', '')} not named")
    elif kind == "steps":
        events = [(int(s), int(r)) for s, r in _rc(rc, "events", [])]
        ev_ranks = {r for _, r in events}
        ev_steps = {s for s, _ in events}
        said_steps = steps_in_text(t)
        # "(step 10, rank 7)", "(10, 7)" after "(step, rank)": the pair's second number is a rank
        named = named | {int(m.group(1)) for m in _PAIR_RANK.finditer(t)}
        hit_r = len(ev_ranks & named)
        hit_s = len(ev_steps & said_steps)
        if not events:
            problems.append("key has no events")
        elif hit_r < 0.6 * len(ev_ranks) or hit_s < 0.6 * len(ev_steps):
            problems.append(
                f"events: {hit_r}/{len(ev_ranks)} ranks and {hit_s}/{len(ev_steps)} steps named"
            )
    elif kind == "job":
        if _any(_JOB_WORDS, t) is None:
            problems.append("not said of every rank / the whole job")
        bl = blamed_ranks(t)
        if bl:
            problems.append(f"a job-level cause blamed on ranks {sorted(bl)}")
    else:  # none
        if _any(_NO_CULPRIT, t) is None:
            problems.append("no 'no culprit / balanced' statement")
        bl = blamed_ranks(t)
        if bl:
            problems.append(f"blames ranks {sorted(bl)} on a run without culprit")
    cleared = exonerated_ranks(t) & set(ranks)
    if cleared and kind not in ("none", "job", "steps"):
        problems.append(f"culprit ranks called not slow: {sorted(cleared)}")
    return CheckResult("culprit", not problems, "; ".join(problems), int(not problems), 1)


_YES = [
    r"^\W*(?:yes|yeah|yep|indeed|correct|right)\b",
    r"^\W*(?:是的|对|没错|确实|是(?=[，,。]))",
    r"\b(?:is|are) (?:indeed |clearly )?(?:the|a) (?:(?:main|real|root|top) )?(?:problem|cause|bottleneck)",
    r"(?:确实|就)是(?:网络|通信|链路)",
]
_NO = [
    r"^\W*no\b",
    r"\bnot\b",
    r"n't\b",
    r"\bno (?:slow|degraded|network|link|bandwidth|communication)",
    r"^\W*(?:不是|不对|并非|没有|不需要|不必|不用|不会|不太(?:可能|会)|不建议|不正常)",
    r"不是",
    r"并非",
    r"并不",
    r"没有(?:明显)?(?:的)?(?:问题|慢链路|异常)",
    r"不存在",
]


def check_yes_no(answer: Answer, verdict: str) -> CheckResult:
    """The first sentence gives the yes/no verdict (``yes`` or ``no``).

    ``no``: the first sentence negates ("No —", "not", "不是", "没有…问题"). ``yes``: it affirms ("Yes",
    "是的", "is the problem") and does not negate.
    """
    fs = first_sentence(answer.answer)
    neg = _any(_NO, fs)
    pos = _any(_YES, fs)
    ok = (pos is not None and neg is None) if verdict == "yes" else neg is not None
    detail = "" if ok else f"first sentence does not say {verdict!r}: {fs[:120]!r}"
    return CheckResult("yes_no", ok, detail, int(ok), 1)


def check_first_sentence(answer: Answer, what: str, rc: dict[str, Any] | None) -> CheckResult:
    """The first sentence answers the question.

    ``what``: ``culprit`` (it names the culprit, see :func:`check_culprit`), ``refusal`` (it says there
    is not enough signal) or ``none`` (it says there is no culprit).
    """
    fs = first_sentence(answer.answer)
    if what == "refusal":
        ok = _any([*REFUSAL_WORDS, r"too (?:few|small)", r"太少"], fs) is not None
        detail = "" if ok else f"no refusal in {fs[:120]!r}"
    elif what == "none":
        ok = _any(_NO_CULPRIT, fs) is not None
        detail = "" if ok else f"no 'no culprit' in {fs[:120]!r}"
    else:
        c = check_culprit(answer, rc or {}, text=fs)
        ok, detail = c.passed, ("" if c.passed else f"{c.detail} in {fs[:120]!r}")
    return CheckResult("first_sentence", ok, detail, int(ok), 1)


MECHANISM_WORDS: dict[str, list[str]] = {
    "compute_straggler": [
        r"comput",
        r"kernel",
        r"operator",
        r"\bop\b",
        r"matmul",
        r"\b\d+(?:\.\d+)?\s*x slower",
        r"慢\s*\d+(?:\.\d+)?\s*倍",
        r"算子",
        r"计算",
    ],
    "host_stall": [
        r"\bhost\b",
        r"dispatch",
        r"launch",
        r"\bfree\b",
        r"\bidle",
        r"\bcpu\b",
        r"\bgc\b",
        r"garbage",
        r"下发",
        r"空闲",
        r"主机",
        r"host侧",
    ],
    "slow_link": [r"\blink\b", r"bandwidth", r"rdma", r"hccs", r"链路", r"带宽"],
    "slow_group": [r"\bnode\b", r"\bgroup\b", r"\bhost\b", r"节点", r"一组", r"分组", r"机器"],
    "pipeline_imbalance": [r"pipeline", r"\bstage", r"bubble", r"流水", r"阶段", r"空泡", r"气泡"],
    "exposed_communication": [
        r"not overlapped",
        r"exposed",
        r"overlap",
        r"small (?:collective|message|packet|transfer)",
        r"many (?:small )?(?:collective|hccl|communication)",
        r"未(?:被)?(?:覆盖|掩盖)",
        r"没有(?:被)?(?:覆盖|掩盖|重叠)",
        r"小包",
        r"小(?:的)?通信",
        r"通信(?:算子)?(?:次数|数量)",
    ],
    "job_idle": [
        r"\bidle",
        r"\bfree\b",
        r"waiting for (?:input|data|the data|rollout|the dataloader|samples)",
        r"dataloader",
        r"rollout",
        r"空闲",
        r"等(?:待)?(?:数据|输入|rollout)",
    ],
    "step_events": [
        r"one[- ]step",
        r"single[- ]step",
        r"rotat",
        r"intermittent",
        r"sporadic",
        r"spike",
        r"\bstalls?\b",
        r"different rank",
        r"偶发",
        r"轮流",
        r"轮换",
        r"个别(?:步|step)",
        r"单步",
        r"毛刺",
        r"抖动",
        r"不同(?:的)?(?:卡|rank)",
        r"(?:卡|rank)都不(?:同|一样)",  # "每步最慢的卡都不同"
    ],
    "data_artifact": [
        r"incomplete",
        r"missing",
        r"\blost\b",
        r"artifact",
        r"excluded",
        r"不完整",
        r"丢失",
        r"缺失",
        r"剔除",
        r"排除",
    ],
    # what dominates a rank's time (analyzer component names, e.g. a no-culprit key's "dominant")
    "computing": [r"comput", r"计算"],
    "communication_not_overlapped": [r"communication", r"通信"],
    "free": [r"\bfree\b", r"\bidle", r"空闲"],
    "degradation": VERDICT_WORDS["degradation"],
    "regression": VERDICT_WORDS["regression"],
    "no_culprit": _NO_CULPRIT,
    "not_enough_signal": REFUSAL_WORDS,
}


def check_mechanism(answer: Answer, mechanism: str) -> CheckResult:
    """The mechanism of the root cause is stated (bilingual word lists per mechanism)."""
    pats = MECHANISM_WORDS.get(mechanism, [re.escape(mechanism)])
    hit = _any(pats, shown_text(answer))
    return CheckResult(
        "mechanism",
        hit is not None,
        f"matched {hit!r}" if hit else f"no words for {mechanism!r}",
        int(hit is not None),
        1,
    )


_EXCLUDED_WORDS = [
    r"exclud",
    r"incomplete",
    r"missing",
    r"\blost\b",
    r"dropped",
    r"ignor",
    r"skipp",
    r"left out",
    r"artifact",
    r"不完整",
    r"丢失",
    r"缺失",
    r"剔除",
    r"排除",
    r"忽略",
    r"不计入",
]


def check_excluded(answer: Answer, steps: list[int]) -> CheckResult:
    """The data-artifact steps are named and said excluded/incomplete, and never called slow."""
    t = shown_text(answer)
    problems = []
    named = steps_in_text(t)
    miss = [s for s in steps if s not in named]
    if miss:
        problems.append(f"excluded steps not named: {miss}")
    if _any(_EXCLUDED_WORDS, t) is None:
        problems.append("not said excluded/incomplete")
    for s in steps:
        slow = (
            rf"(?:step\s*{s}\b[^.。]{{0,25}}?(?:is|was)\s+(?:the\s+)?(?:slow\w*|an outlier|abnormal)"
            rf"|(?:slow\w*|outlier)\s+steps?\s*(?:is|:)?\s*{s}\b"
            rf"|第\s*{s}\s*步[^。]{{0,8}}?(?:最慢|变慢|偏慢|异常慢|慢))"
        )
        if re.search(slow, t, re.I):
            problems.append(f"step {s} called slow")
    return CheckResult("excluded", not problems, "; ".join(problems), int(not problems), 1)


_FUNCTION_WORDS = {
    "the", "is", "are", "a", "an", "of", "to", "for", "and", "on", "in", "with", "not", "by", "at",
    "it", "this", "that", "was", "be", "per", "than", "from", "its", "no", "there", "has", "have",
    "does", "do", "or", "as", "which", "what", "because", "rank", "slow", "step", "steps", "ranks",
    "enough", "signal", "wait", "waits", "time", "cannot", "can", "will", "would", "should", "been",
    "into", "all", "each", "every", "more", "less", "most", "only", "also", "but", "if", "when",
    "where", "while", "then", "we", "you", "they", "their", "your", "our", "about", "found",
    "nothing", "none", "question", "answer", "data", "why", "how",
}  # fmt: skip


def english_fragments(text: str) -> list[str]:
    """English phrases in a Chinese text: runs of 3+ plain English words with a lowercase common word.

    Identifiers are allowed: code spans, file names, snake_case/CamelCase/ALLCAPS tokens, numbers with
    units, and standard field names in Title Case ("Communication (Not Overlapped)", "Free").
    """
    t = re.sub(r"`[^`]*`", " ", text)
    t = re.sub(r"https?://\S+|\S+\.(?:json|csv|db|py|yaml|txt|log)\b", " ", t)
    out: list[str] = []
    for m in re.finditer(
        r"[A-Za-z][A-Za-z'’]*(?:[ \t,\-]+(?:[A-Za-z][A-Za-z'’]*|\d+(?:\.\d+)?(?=[ \t,\-])))+", t
    ):
        words = re.findall(r"[A-Za-z][A-Za-z'’]*", m.group(0))
        plain = [
            w for w in words if not (w.isupper() and len(w) > 1) and not re.search(r"[a-z][A-Z]", w)
        ]
        lower_common = [w for w in plain if w.islower() and w in _FUNCTION_WORDS]
        if len(plain) >= 3 and lower_common:
            out.append(m.group(0).strip())
    return out


def check_language_strict(answer: Answer, lang: str) -> CheckResult:
    """The answer is in the question's language, strictly.

    A Chinese answer has no English sentence or phrase (identifiers and field names allowed; see
    :func:`english_fragments`).
    """
    base = check_language(answer, lang)
    if not base.passed or lang != "zh":
        return base
    frags = english_fragments(shown_text(answer))
    return CheckResult(
        "language",
        not frags,
        f"English in a Chinese answer: {frags[:3]}" if frags else "",
        int(not frags),
        1,
    )


# --------------------------------------------------------------------------------------------------
# Generalization checks (issue 22)


def check_culprits(answer: Answer, causes: list[dict[str, Any]]) -> CheckResult:
    """Each of several independent root causes is named as :func:`check_culprit` requires."""
    fails = []
    for rc in causes:
        c = check_culprit(answer, rc)
        if not c.passed:
            fails.append(f"{_rc(rc, 'mechanism', '?')}: {c.detail}")
    hits = len(causes) - len(fails)
    return CheckResult("culprits", not fails, "; ".join(fails), hits, len(causes))


def check_evidence(answer: Answer, groups: list[list[str]]) -> CheckResult:
    """Every group of evidence alternatives (regular expressions) matches the text the user reads.

    Args:
        answer: The answer (its body and suggestions are searched, case-insensitively).
        groups: Each a list of alternative patterns; all groups must match.
    """
    text = shown_text(answer)
    missing = [g for g in groups if _any(g, text) is None]
    detail = f"evidence not stated: {[g[:3] for g in missing]}" if missing else ""
    return CheckResult("evidence", not missing, detail, len(groups) - len(missing), len(groups))


def first_action_text(answer: Answer) -> str:
    """What the answer puts first as the thing to do.

    The first ``action`` suggestion (else the first suggestion), or the answer's first sentence when it
    carries no suggestion.
    """
    for s in answer.suggestions:
        if s.kind == "action" and s.text.strip():
            return s.text
    for s in answer.suggestions:
        if s.text.strip():
            return s.text
    return first_sentence(answer.answer)


def check_first_suggestion(answer: Answer, patterns: list[str]) -> CheckResult:
    """The first thing the answer tells the user to do matches one of ``patterns``."""
    first = first_action_text(answer)
    hit = _any(patterns, first)
    detail = f"matched {hit!r}" if hit else f"first suggestion does not match: {first[:120]!r}"
    return CheckResult("first_suggestion", hit is not None, detail, int(hit is not None), 1)
