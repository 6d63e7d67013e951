"""Understanding a question (English or Chinese): language, entities, intent.

Deterministic rules, no model. Entities: ranks ("rank 12", "12号卡", "第12张卡", "卡12"), steps
("step 3", "第3步"), communication groups (names/hashes present in the profile), transports
(HCCS, RDMA, PCIE, SDMA, SIO), operator types present in the profile. Intents are listed in
:data:`INTENTS`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

Language = Literal["en", "zh"]

INTENTS = (
    "explain_rank",
    "which_slow_rank",
    "rank_component",
    "top_ops",
    "bottleneck",
    "slow_link",
    "compare_ops",
    "communication",
    "compare_profiles",
    "mc2",
    "hccl_timeout",
    "step_trend",
    "pipeline_bubble",
    "host_dispatch",
    "memory",
    "data_quality",
    "summarize",
    "help",
    "unsupported",
)
"""Every intent the offline planner knows."""

TRANSPORTS = ("HCCS", "RDMA", "PCIE", "SDMA", "SIO")

_CJK = re.compile(r"[\u4e00-\u9fff]")


def detect_language(text: str) -> Language:
    """``zh`` when the text contains CJK ideographs, else ``en``."""
    return "zh" if _CJK.search(text) else "en"


@dataclass(frozen=True)
class Query:
    """What the planner understood.

    Attributes:
        text: The question.
        language: ``en`` or ``zh``.
        intent: One of :data:`INTENTS`.
        ranks: Ranks mentioned, in order.
        steps: Steps mentioned.
        groups: Communication groups mentioned (as named in the profile).
        transports: Transports mentioned.
        ops: Operator types / names mentioned (as named in the profile).
        follow_up: The intent was taken from the previous turn.
        component: For ``rank_component``: the step-trace column asked about (``free_us``,
            ``computing_us``, ``communication_not_overlapped_us``, ``overlapped_us``,
            ``bubble_us``, ``step_us``).
        extreme: For ``rank_component``: ``max`` (most/highest) or ``min`` (least/lowest).
    """

    text: str
    language: Language
    intent: str
    ranks: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()
    groups: tuple[str, ...] = ()
    transports: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    follow_up: bool = False
    bare_numbers: tuple[int, ...] = field(default=(), repr=False)
    component: str = ""
    extreme: str = ""


_RANK_PATTERNS = (
    r"\branks?\s*[#:]?\s*(\d+)",
    r"\bcards?\s*[#:]?\s*(\d+)",
    r"\bdevices?\s*[#:]?\s*(\d+)",
    r"\bnpu\s*[#:]?\s*(\d+)",
    r"第\s*(\d+)\s*(?:张|号|个)?\s*(?:卡|rank|设备|节点)",
    r"(\d+)\s*(?:号|张)?\s*(?:卡|设备)",
    r"(?:卡|rank)\s*(\d+)",
)
_RANK_LIST = re.compile(
    r"\branks?\s+(\d+(?:\s*(?:,|and|&|vs\.?|versus|or|和|与|跟|、)\s*(?:rank\s*)?\d+)+)", re.I
)
_STEP_PATTERNS = (
    r"\b(?:step|iteration|iter)s?\s*[#:]?\s*(\d+)",
    r"第\s*(\d+)\s*(?:步|个\s*step|个迭代|次迭代|轮)",
    r"(?:step|迭代)\s*(\d+)",
)

# (intent, English patterns, Chinese patterns) in priority order.
_RULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "help",
        (
            r"^\s*help\b",
            r"what can you (do|answer)",
            r"what (questions|can i ask)",
            r"how do i use",
        ),
        (r"^\s*帮助\s*[?？]?\s*$", "你能做什么", "能回答什么", "可以问什么", "怎么用"),
    ),
    (
        "compare_profiles",
        (
            r"upgrad",
            r"\bbefore\b.*\bafter\b",
            r"\bbaseline\b",
            r"(two|both|the) runs",
            r"what changed",
            r"compare (the )?(two )?(profiles|runs)",
            r"previous run",
            r"\bdiff\b",
        ),
        ("升级", "前后", "两次", "基线", "变化", "对比.*(profile|数据|运行)", "之前.*之后"),
    ),
    (
        "mc2",
        (r"\bmc2\b", r"matmul[_ ]?all[_ ]?reduce", r"fus(e|ion) .*(comm|allreduce|collective)"),
        ("mc2", "通算融合", "通信.*融合", "融合.*通信"),
    ),
    (
        "hccl_timeout",
        (r"time[ -]?out", r"\bhang", r"\bhung\b", r"\bstuck\b", r"EI000\d", r"HCCL_(CONNECT|EXEC)"),
        ("超时", "卡住", "卡死", "挂住", "EI000"),
    ),
    (
        "slow_link",
        (r"\blinks?\b", r"bandwidth", r"\bhccs\b", r"\brdma\b", r"\bpcie\b", r"\bsdma\b"),
        ("链路", "带宽", "传输慢"),
    ),
    (
        "compare_ops",
        (
            r"\boperators?\b",
            r"\bkernels?\b",
            r"\bops?\b",
            r"regress",
            r"\bcompare\b",
            r"\bvs\.?\b",
            r"\bversus\b",
            r"\bmatmul\b",
            r"which op",
        ),
        ("算子", "对比", "比较"),
    ),
    (
        "memory",
        (r"\bmemory\b", r"\bfragmentation\b", r"\bOOM\b", r"out of memory", r"\bhbm\b"),
        ("显存", "内存", "碎片"),
    ),
    (
        "pipeline_bubble",
        (r"\bbubbles?\b", r"pipeline[- ]parallel wait"),
        ("空泡", "气泡", "bubble"),
    ),
    (
        "host_dispatch",
        (r"launch delay", r"dispatch delay", r"host launch", r"hosttodevice", r"\bp50\b|\bp90\b"),
        ("下发时延", "下发延迟", "下发耗时"),
    ),
    (
        "step_trend",
        (
            r"\btrend",
            r"over time",
            r"degrad",
            r"jitter",
            r"getting slower",
            r"slower and slower",
            r"step time (grow|increas|vary|varies)",
            r"fluctuat",
            r"getting worse",
            r"which steps",
            r"what steps",
            r"during the run",
            r"worse over",
        ),
        (
            "趋势",
            "劣化",
            "抖动",
            "越来越慢",
            "波动",
            "逐渐变慢",
            "越来越差",
            "变差",
            r"哪(几|些)个?\s*step",
            "哪几步",
        ),
    ),
    (
        "which_slow_rank",
        (
            r"which (rank|card|device|npu)",
            r"slow(est)? (rank|card|node)",
            r"straggler",
            r"who is slow",
            r"one of them .*slow",
            r"(any|one|a) (rank|card|device)s? .*slow",
            r"actually slow",
        ),
        ("哪张卡", "哪个卡", "哪块卡", "哪个rank", "哪个 rank", "慢卡", "慢节点", "哪一张"),
    ),
    (
        "bottleneck",
        (
            r"bottleneck",
            r"what kind",
            r"compute[- ]bound",
            r"communication[- ]bound",
            r"host[- ]bound",
            r"\bscheduling\b",
            r"\bdispatch",
            r"compute or comm",
            r"\bcategory\b",
        ),
        (
            "瓶颈",
            "计算问题",
            "通信问题",
            "调度问题",
            "下发",
            "什么问题",
            "哪类问题",
            "计算还是通信",
        ),
    ),
    (
        "communication",
        (
            r"\bcommunication\b",
            r"\bcollectives?\b",
            r"all-?reduce|all-?gather|reduce-?scatter",
            r"\bhccl\b",
            r"\boverlap",
        ),
        ("通信", "掩盖", "集合通信"),
    ),
    (
        "explain_rank",
        (r"\bwhy\b.*\bslow", r"\bslow\b", r"\bexplain\b", r"what('s| is) wrong", r"\blag"),
        ("为什么", "为何", "慢", "怎么回事", "原因"),
    ),
    (
        "data_quality",
        (r"data quality", r"missing (ranks|steps|data)", r"is (the|my) (data|profile) (ok|valid)"),
        ("数据质量", "数据缺失", "数据是否完整", "采集.*问题"),
    ),
    (
        "summarize",
        (
            r"summar",
            r"overview",
            r"diagnos",
            r"\breport\b",
            r"why is (my|the|this) (job|training|run|model)",
            r"how can i (speed|make)",
            r"what should i (do|fix|change)",
            r"\boptimi[sz]",
            r"\b(any|a|the) (performance )?(problems?|issues?|bottlenecks?)\b",
            r"\bwhat('s| is) wrong\b",
        ),
        (
            "性能问题",
            "有问题吗",
            "有什么问题",
            "总结",
            "概况",
            "诊断",
            "分析一下",
            "整体",
            "怎么优化",
            "如何优化",
            "优化建议",
        ),
    ),
)

_FOLLOW_UP = (
    re.compile(r"^\s*(and|what about|how about|and what about|same for|now)\b", re.I),
    re.compile(r"^\s*(那|那么)?.{0,12}(呢|如何)[？?]?\s*$"),
    re.compile(r"\b(its|that rank|this rank|the same rank)\b|^\s*它|它的", re.I),
)


# Per-rank component questions ("which rank has the most Free?"): a rank question, a
# superlative and a step-trace component must all be present.
_WHICH_RANK = re.compile(
    r"which (rank|card|device|npu)s?|what (rank|card|device)|哪(张|个|块|一张|一个)\s*(卡|rank|设备)|哪个\s*rank",
    re.I,
)
_MOST = re.compile(
    r"\b(most|highest|largest|longest|biggest|max(imum)?|greatest)\b|最多|最长|最大|最高|最久", re.I
)
_LEAST = re.compile(
    r"\b(least|lowest|smallest|shortest|min(imum)?|fewest)\b|最少|最短|最小|最低", re.I
)
_COMPONENTS = (
    ("bubble_us", r"\bbubbles?\b|空泡|气泡"),
    ("overlapped_us", r"(?<!not )\boverlapped\b|被掩盖"),
    ("communication_not_overlapped_us", r"\bcommunication\b|\bcomm\b|\bhccl\b|通信"),
    ("free_us", r"\bfree\b|\bidle\b|空闲"),
    ("computing_us", r"\bcomput(e|ing|ation)\b|计算"),
    ("step_us", r"\bstep time\b|step 耗时|迭代耗时"),
)
# "which operator type takes the most time" (per rank, by op type)
_TOP_OPS = (
    r"(which|what) .*\b(operators?|ops?|kernels?)\b.*\b(most|longest|largest|highest|top|dominat)",
    r"\btop \d* ?(operators?|ops?|kernels?|op types?)\b",
    r"\b(most|longest)[- ]running (operators?|ops?|kernels?)",
    r"(operators?|ops?|kernels?)( types?)? (take|takes|taking|spend|spends|use|uses) the most",
    r"哪(类|个|种|些|一类)\s*.{0,6}算子.*(最多|最长|最大|最高|最久)",
    r"耗时最(多|长|大)的.{0,6}算子",
    r"算子.{0,6}耗时(最多|最长|排名)",
)


def _component_question(low: str) -> tuple[str, str] | None:
    """(component column, ``max``/``min``) for "which rank has the most/least <component>"."""
    m = _WHICH_RANK.search(low)
    if not m:
        return None
    # the superlative and the component belong to the same clause as "which rank"
    low = re.split(r"[?？。!！,，;；]|\.\s", low[m.end() :])[0]
    most, least = _MOST.search(low), _LEAST.search(low)
    if not (most or least):
        return None
    extreme = "min" if least and not (most and most.start() < least.start()) else "max"
    for col, pat in _COMPONENTS:
        if re.search(pat, low, re.I):
            return col, extreme
    return None


def _find_ranks(q: str) -> list[int]:
    found: list[tuple[int, int]] = []
    for m in _RANK_LIST.finditer(q):
        for d in re.finditer(r"\d+", m.group(1)):
            found.append((m.start(1) + d.start(), int(d.group())))
    for pat in _RANK_PATTERNS:
        for m in re.finditer(pat, q, re.I):
            found.append((m.start(1), int(m.group(1))))
    out: list[int] = []
    for _, r in sorted(found):
        if r not in out:
            out.append(r)
    return out


def _find_steps(q: str) -> list[int]:
    out: list[int] = []
    for pat in _STEP_PATTERNS:
        for m in re.finditer(pat, q, re.I):
            v = int(m.group(1))
            if v not in out:
                out.append(v)
    return out


def _word_in(word: str, q: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", q, re.I) is not None


def parse_question(
    text: str,
    *,
    groups: Sequence[str] = (),
    op_types: Sequence[str] = (),
    previous: Query | None = None,
) -> Query:
    """Parse ``text`` into a :class:`Query`.

    Args:
        text: The user's question.
        groups: Communication group names/hashes of the profile (to recognize them).
        op_types: Operator types of the profile (to recognize them).
        previous: The previous turn's query, for follow-ups ("and rank 13?", "那13号卡呢？").
    """
    q = text.strip()
    lang = detect_language(q)
    ranks = _find_ranks(q)
    steps = _find_steps(q)
    steps = [s for s in steps if s not in ranks or re.search(rf"step\s*{s}", q, re.I)]
    grp = tuple(g for g in groups if len(g) >= 2 and _word_in(g, q))
    trans = tuple(t for t in TRANSPORTS if _word_in(t, q))
    ops = tuple(o for o in op_types if len(o) >= 3 and _word_in(o, q))
    bare = tuple(int(m) for m in re.findall(r"(?<![\w.])(\d+)(?![\w.])", q))

    intent = ""
    low = q.lower()
    for name, en, zh in _RULES:
        pats = en + zh
        if any(re.search(p, low, re.I) for p in pats):
            intent = name
            break
    component = _component_question(low)
    if component is not None and not ranks:
        intent = "rank_component"
    elif any(re.search(p, low, re.I) for p in _TOP_OPS) and intent not in (
        "compare_profiles",
        "help",
    ):
        intent = "top_ops"
    is_follow = any(p.search(q) for p in _FOLLOW_UP)
    if previous is not None and previous.intent not in ("help", "unsupported"):
        entity_only = not intent and (ranks or steps or grp or trans or ops or bare)
        if is_follow or entity_only:
            if not ranks and bare and previous.ranks and not steps:
                ranks = list(bare)
            base = replace(
                previous,
                text=q,
                language=lang,
                follow_up=True,
                bare_numbers=bare,
            )
            follow_intent = intent or previous.intent
            if (
                not intent
                and len(ranks) == 1
                and previous.intent in ("which_slow_rank", "bottleneck", "summarize")
            ):
                follow_intent = "explain_rank"  # "which rank is slow?" -> "and rank 5?"
            return replace(
                base,
                intent=follow_intent,
                ranks=tuple(ranks) or previous.ranks,
                steps=tuple(steps) or (previous.steps if not ranks else ()),
                groups=grp or previous.groups,
                transports=trans or previous.transports,
                ops=ops or previous.ops,
            )
    if intent == "which_slow_rank" and len(ranks) == 1:
        intent = "explain_rank"
    if intent == "which_slow_rank" and len(ranks) >= 2:
        intent = "compare_ops"
    if intent in ("bottleneck", "communication") and len(ranks) == 1:
        intent = "explain_rank"
    if intent == "explain_rank" and len(ranks) >= 2:
        intent = "compare_ops"
    if intent in ("explain_rank",) and not ranks:
        # "why is my job slow?" without a rank: which rank and what kind of problem.
        intent = "summarize" if not re.search(r"rank|card|卡", low) else "which_slow_rank"
    if not intent and ranks:
        intent = "explain_rank"
    if not intent and ops:
        intent = "compare_ops"
    if not intent and (grp or trans):
        intent = "slow_link"
    if not intent:
        intent = "unsupported"
    return Query(
        q,
        lang,
        intent,
        tuple(ranks),
        tuple(steps),
        grp,
        trans,
        ops,
        False,
        bare,
        component[0] if component and intent == "rank_component" else "",
        component[1] if component and intent == "rank_component" else "",
    )
