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
    return found


_NUM = re.compile(r"(?<![\w.])[-−+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?:[eE][-+]?\d+)?")


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
    """Each required tool was called (without error)."""
    called = {t.name for t in answer.tool_calls if not t.error}
    missing = [t for t in tools if t not in called]
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
    checks: list[CheckResult] = [check_language(answer, exp.lang)]
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
