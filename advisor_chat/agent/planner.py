"""The offline planner: question slots -> the diagnosis -> a projected answer (no model).

Every answer starts from the profile's :class:`~advisor_chat.diagnosis.Diagnosis`, recorded as
the turn's first tool result (``diagnose``). Questions about ranks, the culprit, the network,
steps, the bottleneck category, the pipeline, what to fix first and how much it saves are
projections of it (:mod:`.project`); tool capabilities (per-rank components, top operator
types, operator and profile comparisons, mc2, timeouts, launch delays, memory, environment,
data completeness) run their analyzer tool and take the typed remedies of the causes their
findings belong to. The same :class:`~advisor_chat.tools.Tool` objects an LLM would call are
used, so tool calls are recorded identically; every number in the text comes from a tool result
of the turn (checked by :mod:`.grounding`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pandas as pd

from advisor_chat.agent import project
from advisor_chat.agent.answer import CitedCase, CitedFinding, Suggestion
from advisor_chat.agent.parse import (
    Query,
    asks_bandwidth,
    asks_yes_no,
    asks_yes_no_after,
    network_scope,
    parse_question,
    question_part,
)
from advisor_chat.agent.project import Projection, render_for_model
from advisor_chat.agent.validate import BaselineProblem, validate_question
from advisor_chat.analyzers.base import AnalyzerResult, Finding
from advisor_chat.diagnosis.context import ranks_label
from advisor_chat.diagnosis.text import COLLECTIVE_NAMES
from advisor_chat.diagnosis.types import BoundKind, Diagnosis, Mechanism, RootCause
from advisor_chat.i18n import say
from advisor_chat.i18n import t as msg
from advisor_chat.kb.types import CaseHit
from advisor_chat.ranks import parse_ranks
from advisor_chat.symptoms import SYMPTOM_TAGS, WHY_TAGS
from advisor_chat.tools.core import Tool, ToolOutput, ToolSession, strict_mode
from advisor_chat.tools.render import fmt_num

# -- labels --------------------------------------------------------------------------------------
_COMPONENT_LABELS = {
    "free_us": ("Free (device idle) time", "空闲（Free）时间"),
    "computing_us": ("Computing time", "计算（Computing）时间"),
    "communication_not_overlapped_us": (
        "Communication (Not Overlapped) time",
        "未被掩盖的通信（Communication Not Overlapped）时间",
    ),
    "overlapped_us": ("Overlapped communication time", "被计算掩盖的通信（Overlapped）时间"),
    "bubble_us": ("Bubble (pipeline wait) time", "气泡（Bubble）时间"),
    "step_us": ("step time", "每步耗时"),
}
#: The step-trace column a "how much" question about one rank names, by topic.
_AMOUNT_TOPICS = {
    "communication": "communication_not_overlapped_us",
    "compute": "computing_us",
    "host": "free_us",
}


def _rank_amount_column(q: Query) -> str:
    """The component a "how much <topic> on rank N" question asks for ('' for other questions)."""
    if q.intent != "explain_rank" or q.kind != "how_much" or len(q.ranks) != 1:
        return ""
    return next((_AMOUNT_TOPICS[t] for t in q.topics if t in _AMOUNT_TOPICS), "")


_CAPABILITIES = (
    (
        "why is rank N slow? (e.g. `why is rank 12 slow?`)",
        "某张卡为什么慢（如 `为什么12号卡慢？`）",
    ),
    ("which rank is slow? / which rank holds the job back?", "哪张卡是慢卡？/ 哪张卡拖后腿？"),
    ("what should I fix first? how much would it save?", "先修什么？能省多少时间？"),
    (
        "is the network the problem? (or: `is link 3→11 slow?`)",
        "是不是网络的问题？（或：`3-11之间的链路慢吗？`）",
    ),
    ("why are some steps slow?", "为什么有些步特别慢？"),
    (
        "why are ranks N-M (or a pipeline stage) waiting? (e.g. `why are ranks 8-15 slow?`)",
        "某几张卡（或某个流水线阶段）为什么在等待？（如 `8到15号卡为什么慢？`）",
    ),
    (
        "which rank has the most/least Free, Computing, communication or Bubble?",
        "哪张卡的空闲（Free）/计算/通信/气泡时间最多或最少？",
    ),
    (
        "which compute operator type takes the most time (on rank N)?",
        "（某张卡上）哪类计算算子耗时最多？",
    ),
    (
        "what kind of bottleneck is it (compute, scheduling, communication)?",
        "是什么类型的瓶颈（计算、调度、通信）？",
    ),
    (
        "which link is slow? (optionally a group or HCCS/RDMA)",
        "哪条链路慢？（可指定通信域或 HCCS/RDMA）",
    ),
    ("which operators regressed? / compare rank A and rank B", "哪些算子劣化？/ 对比两张卡的算子"),
    (
        "what changed compared with a baseline run? (needs --baseline)",
        "与基线相比有什么变化？（需要 --baseline）",
    ),
    ("should I enable mc2?", "是否应该开启 mc2 通算融合？"),
    ("HCCL timeout settings / hangs", "HCCL 超时设置 / 卡住"),
    ("does step time degrade or jitter?", "每步耗时是否劣化或抖动？"),
    ("is the profiling data complete?", "采集数据是否完整？"),
    ("summarize the problems", "总结主要问题"),
)

# Fallback remedies (no numbers) by symptom tag, when the case library returns nothing.
_FALLBACK_REMEDY = {
    "host_bound": (
        "reduce host dispatch overhead: set `TASK_QUEUE_ENABLE=2`, bind host threads to cores, and remove per-step synchronization (`.item()`, prints)",
        "降低 主机下发开销：设置 `TASK_QUEUE_ENABLE=2`、绑核，并去掉每步的同步操作（`.item()`、打印）",
    ),
    "high_free": (
        "find what the host does while the device is idle (dataloader, Python GC, synchronization) on the slow rank",
        "排查慢卡上设备空闲时主机在做什么（数据加载、Python GC、同步）",
    ),
    "comm_not_overlapped": (
        "overlap communication with computation (gradient bucketing / communication overlap options)",
        "让通信与计算重叠（梯度分桶 / 通信掩盖相关选项）",
    ),
    "slow_link": (
        "check the slow link's hardware and its HCCS/RDMA configuration; compare with a healthy node",
        "检查慢链路的硬件与 HCCS/RDMA 配置，并与健康节点对比",
    ),
    "op_regression_shape": (
        "profile the slow operator at the regressed input shape and align the shape to hardware-friendly sizes",
        "针对劣化 shape 分析该算子，并将 shape 对齐到硬件友好的大小",
    ),
    "missing_comm_data": (
        "collect with profiler Level1 to record communication",
        "使用 Level1 级别采集以记录通信数据",
    ),
}


#: "X or Y?": a question between two answers, which a yes or a no does not answer.
_EITHER_Q = re.compile(r"\b(or|versus|vs\.?)\b[^?？]{2,60}[?？]|还是", re.I)
_YES_NO_LEAD = re.compile(r"^(?:(?:Yes|No)(?::|,)\s+|(?:是的|不是)[，：])")


def _without_yes_no(line: str) -> str:
    """``line`` without a leading "Yes: " / "No, " / "是的，" / "不是，" (first letter raised)."""
    m = _YES_NO_LEAD.match(line)
    if m is None:
        return line
    rest = line[m.end() :]
    return rest[:1].upper() + rest[1:]


#: Below this many MB moved over a transport in all, its bandwidth figures measure latency.
SMALL_TRANSFER_MB = 1.0


def _links_judged(outputs: Sequence[ToolOutput]) -> bool:
    """False when the slow_link tool had too few comparable links to judge any."""
    return not any(
        o.name == "slow_link"
        and o.result is not None
        and o.result.metrics.get("compared_links_count", 1.0) == 0
        for o in outputs
    )


def _link_transports(outputs: Sequence[ToolOutput]) -> dict[tuple[int, int], str]:
    """{(src, dst): transport} of every link in the slow_link tool's link table."""
    for o in outputs:
        if o.name == "slow_link" and o.result is not None:
            t = o.result.table
            if not t.empty and {"src_rank", "dst_rank", "transport"} <= set(t.columns):
                return {
                    (int(a), int(b)): str(tr)
                    for a, b, tr in zip(t["src_rank"], t["dst_rank"], t["transport"], strict=True)
                }
    return {}


#: A question about the Bubble column itself.
#: "What is the host doing (while the device waits)?" / "主机在干什么".
_HOST_DOING = re.compile(
    r"(?i)\bhost\b[^.?!]{0,20}\b(?:doing|busy with|up to)\b|what does the host do|"
    r"主机[^。？！?!]{0,10}(?:在干|在做|干什么|做什么|干嘛|忙什么)"
)
_BUBBLE_Q = re.compile(r"\bbubbles?\b|气泡|空泡", re.I)

#: "Which step is the slowest?" (English, Chinese): a step asked for by its time.
_WHICH_STEP_Q = re.compile(
    r"\b(which|what) (step|iteration)s? (is|was|were|are|took|takes|had|has)\b.{0,20}"
    r"\b(slow|long|worst|most)|哪(一|个)\s*(步|step|迭代).{0,6}(最慢|最长|最久|最差|慢)",
    re.I,
)


def _slowest_step(
    outputs: Sequence[ToolOutput], step_trace: pd.DataFrame
) -> tuple[int, float, int, float, int] | None:
    """(slowest step, its µs, fastest step, its µs, steps) from the step_trend tool's table.

    A step's time is its slowest rank's ``step_us`` (the job finishes a step when its last rank
    does). Without the tool's table (it judges 3 steps or more), the profile's ``step_trace``
    gives the same figures. ``None`` without steps.
    """
    t = next(
        (o.result.table for o in outputs if o.name == "step_trend" and o.result is not None),
        step_trace,
    )
    if t.empty or not {"step", "step_us"} <= set(t.columns):
        return None
    kept = t[t["step"] >= 0] if (t["step"] >= 0).any() else t  # (a cluster output's -1: one)
    per_step = kept.groupby("step")["step_us"].max().dropna()
    if per_step.empty:
        return None
    hi, lo = int(cast(int, per_step.idxmax())), int(cast(int, per_step.idxmin()))
    return hi, float(per_step[hi]), lo, float(per_step[lo]), len(per_step)


#: "Which rank ...?" (English, Chinese).
_WHICH_RANK = re.compile(
    r"\bwhich (rank|card|npu|device|node)|哪(张|个|一张|台)(卡|节点|机器)", re.I
)
#: "Which node / machine / server is slower?" (no node named).
_WHICH_NODE = re.compile(
    r"\b(which|what) (node|server|machine|host)s?\b|哪(台|个|一台)(机器|节点|服务器|主机)", re.I
)
#: Words of a category of time (the category answer judges them, not a suspect's words):
#: a suspect made only of these ("the host CPU", "compute side", "计算") is the category.
_CATEGORY_WORD = re.compile(
    r"^(?:(?:compute|computation|computing|communication|comm|network|host|cpu|npu|device|"
    r"scheduling|dispatch|schedule|io|i/o|data|memory|idle|free|side|bound|part|time|problem|"
    r"issue|the|or|and|itself|just|collectives?|all[- ]?to[- ]?all|alltoallv?|all[- ]?reduce|"
    r"all[- ]?gather|reduce[- ]?scatter|broadcast|send|recv|p2p|hccl|hccs|rdma|roce|links?|"
    r"transfers?|/)\b\s*|/\s*|计算|通信|网络|主机|下发|调度|侧|的|集合通信|链路)+$",
    re.I,
)
#: A node named without its number ("is one node slower?", "是不是有慢节点？").
_NODE_WORD = re.compile(r"\b(nodes?|machines?|servers?|box(?:es)?)\b|节点|机器|服务器", re.I)
#: "Is the optimizer the problem?", "is it the tokenizer?", "是不是日志的问题？": the thing suspected.
_SUSPECT_X = (
    re.compile(
        r"(?i)\b(?:is|could|might|can)\s+(?:it\s+|this\s+|that\s+)?(?:be\s+)?(?:the|our|my)\s+"
        r"(?P<x>[a-z][\w.+-]*(?:\s+[a-z][\w.+-]*){0,2}?)(?:'s)?\s+(?:the\s+)?"
        r"(?:problem|issue|cause|culprit|bottleneck|reason|to blame)\b"
    ),
    re.compile(
        r"(?i)\b(?:is|could|might)\s+(?:it|this|that)\s+(?:be\s+)?(?:the|our|my)\s+"
        r"(?P<x>[a-z][\w.+-]*(?:\s+(?:/\s+|or\s+|and\s+)?[a-z][\w.+-]*){0,3})\s*\?"
    ),
    # "is this a power capping issue?", "could it be a driver problem?"
    re.compile(
        r"(?i)\b(?:is|could|might)\s+(?:it|this|that)\s+(?:be\s+)?(?:a|an|some)\s+"
        r"(?P<x>[a-z][\w.+-]*(?:\s+[a-z][\w.+-]*){0,2}?)\s+(?:problem|issue|thing)\b"
    ),
    # "could the tokenizer be slow?", "is the optimizer step slow?"
    re.compile(
        r"(?i)\b(?:is|are|could|might|can)\s+(?:the|our|my)\s+"
        r"(?P<x>[a-z][\w.+-]*(?:\s+[a-z][\w.+-]*){0,2}?)\s+(?:be\s+|too\s+|just\s+)?"
        r"(?:slow|slower|the slow part|holding (?:us|it|the job) back)\b"
    ),
    # "so is it just flash attention being slower on the NPU?"
    re.compile(
        r"(?i)\b(?:is|could)\s+(?:it|this|that)\s+(?:just\s+|only\s+|simply\s+)?(?:the\s+)?"
        r"(?P<x>[a-z][\w.+-]*(?:\s+[a-z][\w.+-]*){0,2}?)\s+being\s+"
        r"(?:slow|slower|the problem|the bottleneck)\b"
    ),
    re.compile(r"是不是(?P<x>[^，。？?！!、\s]{2,12}?)的?(?:问题|原因|锅)"),
    re.compile(r"是(?P<x>[^，。？?！!、\s]{2,12}?)(?:导致|造成|引起)的吗"),
    # "是不是优化器那一步太慢？", "会不会是日志拖慢了"
    re.compile(
        r"(?:是不是|会不会是|难道是|是否是)(?P<x>[^，。？?！!、\s]{2,12}?)"
        r"(?:那一步|这一步|那块|这块|部分)?(?:太慢|很慢|变慢|慢了|拖慢|拖后腿)"
    ),
)
#: Words that name the question's subject, not a suspect ("is this the problem?").
_NOT_SUSPECT = re.compile(
    r"(?i)^(?:(?:problem|issue|bottleneck|cause|main|real|biggest|same|whole|only|one|thing|"
    r"performance|speed|slowdown|job|training|run|cluster|system|everything|step|steps)\b"
    r"|这|那|哪|什么|性能|速度|训练|作业|任务)"
)


#: A yes/no question that states a mechanism as its hypothesis ("is it that each expert gets too
#: few tokens, so the GMM mostly reads weights?", "是不是每个专家分到的token太少，…？").
_CLAIM_X = (
    re.compile(
        r"(?i)\b(?:is|could|might)\s+(?:it|this|that)\s+(?:be\s+)?(?:because|that|since)\s+"
        r"(?P<x>[^?]{10,200})\?"
    ),
    re.compile(r"(?:是不是|会不会是|是否是|难道是|是因为)(?P<x>[^？?。]{8,80})[？?]"),
)


#: A claim whose subject is the ranks / nodes / stages / links it opens with.
_OPENS_WITH_UNIT = re.compile(
    r"(?i)\s*(?:the\s+)?(?:(?:ranks?|cards?|npus?|devices?|nodes?|stages?|links?|servers?)\s*\d"
    r"|\d+\s*(?:号|-|->|到|和|或)?\s*(?:卡|节点|机|stage|rank)?)"
)


def claim_hypothesis(text: str) -> str:
    """The mechanism a yes/no question proposes in a clause of its own, or ``""``."""
    for rx in _CLAIM_X:
        m = rx.search(text)
        if m is not None:
            return m.group("x").strip(" ，,")
    return ""


def unknown_suspect(text: str) -> str:
    """The thing a yes/no question suspects in its own words ("the optimizer"), or ``""``."""
    for rx in _SUSPECT_X:
        m = rx.search(text)
        if m is not None:
            # "优化器那块" / "the optimizer side": the thing, without the word for "part of"
            x = _FILLER.sub("", m.group("x").strip()).strip()
            if x and not _NOT_SUSPECT.match(x):
                return x
    return ""


_FILLER = re.compile(
    r"(那一步|这一步|那块|这块|那边|这边|方面|部分|相关|\s+(side|part|stuff|thing|step))$", re.I
)


_RANK_WORD = re.compile(r"\b(ranks?|cards?|npus?|devices?|gpus?)\b|卡", re.I)
#: A question about every rank / the whole job (English, Chinese).
_EVERY_RANK = re.compile(
    r"\b(every|all(?: the)?|each) (ranks?|cards?|npus?|devices?)\b|\bwhole job\b|所有(的)?卡|每张卡|全部(的)?卡|整个作业|所有 ?rank",
    re.I,
)
#: ... about idle time.
_IDLE_Q = re.compile(r"\bidle|\bfree\b|空闲|闲着", re.I)
#: ... asking where in the step it sits, or why / on what the device idles.
_IDLE_PLACE = re.compile(
    r"\b(where|when|which part|what part|why)\b|\bwhat\b.{0,30}\b(doing|waiting)\b"
    r"|哪里|哪儿|哪个(位置|阶段|地方)|什么(位置|时候|阶段|地方)|为什么|为啥|在(干|做|等)什么",
    re.I,
)
#: "Is it only one direction that is slow?" (English, Chinese).
# the question suspects one part of the network, not the network as a whole
_ONE_PART = re.compile(
    r"\b(?:one|a single|one of the)\s+(?:(?:bad|faulty|slow|broken|rdma|roce|hccs|network)\s+){0,2}"
    r"(?:node|nic|host|machine|server|port|switch|link|card|cable|optic|transceiver)(?:'s)?\b"
    # "a bad NIC?", but not "is there a slow link?" (whether any link is slow)
    r"|\b(?:a|some)\s+(?:(?:bad|faulty|broken|rdma|roce|hccs|network)\s+){0,2}"
    r"(?:node|nic|host|machine|server|port|switch|card|cable|optic|transceiver)(?:'s)?\b"
    r"|\b(?:a|some)\s+(?:bad|faulty|broken)\s+(?:(?:rdma|roce|hccs|network)\s+)?link\b"
    r"|某\s*(?:个|台|条|张|块|根|一个|一台|一条|一根)?\s*(?:节点|机器|主机|网卡|链路|服务器|端口|交换机|光模块|线缆|光纤)"
    # one rank's or node's network card: "the NIC of rank 9", "rank 9's NIC", "9号卡的网卡"
    r"|\b(?:nic|port|optic|transceiver)s?\s+(?:of|on)\s+(?:rank|card|npu|node|server|host)\s*\d+"
    r"|\b(?:rank|card|npu|node|server|host)\s*\d+'s\s+(?:nic|port|optic|transceiver)s?\b"
    r"|\d+\s*号?(?:卡|节点|机器|服务器)的\s*(?:网卡|网口|端口|光模块)",
    re.I,
)
#: A physical part of one link (a cable, an optic): suspecting it suspects one link.
_PART = re.compile(
    r"\b(cables?|optics?|optical modules?|transceivers?|fib(er|re)s?)\b|网线|线缆|光模块|光纤", re.I
)
_ONE_WAY = re.compile(
    r"\b(one|single|only one|either) direction|one[- ]way|单向|一个方向|单方向", re.I
)


@dataclass
class PlanResult:
    """What the planner produced for one question (before grounding)."""

    text: str
    findings: list[Finding] = field(default_factory=list)
    cases: list[CaseHit] = field(default_factory=list)
    suggestions: list[Suggestion] = field(default_factory=list)
    outputs: list[ToolOutput] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    plot_ranks: list[int] = field(default_factory=list)
    causes: list[RootCause] = field(default_factory=list)
    diagnosis: Diagnosis | None = None


#: The cause-reference line of an answer (:func:`advisor_chat.agent.project.reference_line`).
_CITED = {False: "Causes cited: ", True: "依据的原因编号："}


def _cited_ids(line: str) -> list[str] | None:
    """The cause ids of a reference line, ``None`` for any other line."""
    s = line.strip()
    for head in _CITED.values():
        if s.startswith(head):
            return [x.strip() for x in re.split(r"[,、]", s[len(head) :]) if x.strip()]
    return None


def _sentences(line: str) -> list[str]:
    """A line's sentences (split after ``.``/``。`` followed by a space or the end)."""
    return [x.strip() for x in re.split(r"(?<=[.。])\s+|(?<=。)", line.strip()) if x.strip()]


def _said_key(sentence: str) -> str:
    """A sentence as compared for repeats: without a leading "Why — " / "原因——", first letter lower."""
    x = re.sub(r"^(?:Why — |原因——)", "", sentence.strip())
    return x[:1].lower() + x[1:]


def _unsaid(line: str, said: set[str]) -> str:
    """``line`` without the sentences already said (``""`` when nothing new is left)."""
    if line.strip() in said:
        return ""
    parts = _sentences(line)
    kept = [x for x in parts if x not in said and _said_key(x) not in said]
    if len(kept) == len(parts):
        return line
    return ("" if any("\u4e00" <= ch <= "\u9fff" for ch in line) else " ").join(kept)


def merge_plans(questions: Sequence[str], plans: Sequence[PlanResult], zh: bool) -> PlanResult:
    """One answer to several questions asked in one message.

    The body of each question's answer, in order; then one "Matching cases" and
    one "Suggestions" section over all of them (each part's own sections are cut, so a case or a
    suggestion is listed once). Findings, cases, suggestions, tool outputs, plots and causes are
    the union of the parts', first occurrence kept.
    """

    def uniq(items: Iterable[Any], key: Callable[[Any], Any]) -> list[Any]:
        seen: set[Any] = set()
        out = []
        for x in items:
            k = key(x)
            if k not in seen:
                seen.add(k)
                out.append(x)
        return out

    lang = "zh" if zh else "en"
    heads = (msg("answer.matching_cases", lang), msg("answer.suggestions", lang))
    cases = uniq((c for p in plans for c in p.cases), lambda c: c.id)
    suggestions = uniq((x for p in plans for x in p.suggestions), lambda x: x.text)
    lines: list[str] = []
    said: set[str] = set()
    cited: list[str] = []  # the parts' cause ids, said once after the last part
    for p in plans:  # the first sentence answers the first question, as for one question
        body = p.text.split("\n")
        cut = next((i for i, ln in enumerate(body) if ln.strip() in heads), len(body))
        for ln in body[:cut]:
            ids = _cited_ids(ln)
            if ids is not None:
                cited += [i for i in ids if i not in cited]
                continue
            # a paragraph (a cause, a notice) or a long sentence (the cause's "why") the earlier
            # answer already gave is not given again
            kept = _unsaid(ln, said)
            if kept or not ln.strip():
                lines.append(kept)
            said.update(x for x in (ln.strip(), *_sentences(ln)) if len(x) > 40)
            said.update(_said_key(x) for x in _sentences(ln) if len(x) > 40)
        while lines and not lines[-1].strip():
            lines.pop()
        lines.append("")
    if cited:
        lines += [_CITED[zh] + ("、" if zh else ", ").join(cited), ""]
    if cases:
        lines.append(msg("answer.matching_cases", lang))
        for h in cases:
            title = h.title_zh if zh and h.title_zh else h.title
            lines.append(msg("answer.case_line", lang, case=h.id, title=title))
        lines.append("")
    if suggestions:
        lines.append(msg("answer.suggestions", lang))
        lines += suggestion_lines(suggestions, zh)
    return PlanResult(
        text="\n".join(lines).rstrip(),
        findings=uniq((f for p in plans for f in p.findings), lambda f: f.id),
        cases=cases,
        suggestions=suggestions,
        outputs=[o for p in plans for o in p.outputs],
        plots=uniq((x for p in plans for x in p.plots), lambda x: x),
        plot_ranks=uniq((r for p in plans for r in p.plot_ranks), lambda r: r),
        causes=uniq((c for p in plans for c in p.causes), lambda c: c.id),
        diagnosis=next((p.diagnosis for p in plans if p.diagnosis is not None), None),
    )


class DataQuoter:
    """Neutralizes data strings (operator names, paths, env values) inside answer text.

    Strings from the profile that could read as prose (whitespace, very long, odd characters)
    are rendered as a short backticked ``[data]`` quote, so an operator called
    "IGNORE PREVIOUS INSTRUCTIONS ..." shows as quoted data, never as the advisor's words.
    """

    def __init__(self, session: ToolSession) -> None:
        self._strings: list[str] | None = None
        self._key: tuple[int, ...] = ()
        self._session = session

    def _read_key(self) -> tuple[int, ...]:
        tables = self._session.profile.tables
        loaded = getattr(tables, "loaded", tables.get)
        return tuple(
            -1 if (df := loaded(t)) is None else len(df) for t in ("kernels", "host_dispatch")
        )

    def _collect(self) -> list[str]:
        # heavy tables: only the ranks read so far (what an answer can quote); recollected when
        # more ranks are read (see quote)
        p = self._session.profile
        loaded = getattr(p.tables, "loaded", p.tables.get)
        found: set[str] = set()
        for table, cols in (
            ("kernels", ("name", "op_type", "input_shapes")),
            ("host_dispatch", ("api_name", "kernel_name")),
            ("comm_ops", ("op_name", "group")),
            ("comm_groups", ("group_name",)),
            ("meta", ("source_dir",)),
        ):
            df = loaded(table)
            if df is None or df.empty:
                continue
            for c in cols:
                if c in df.columns:
                    found.update(_suspicious_values(df[c]))
        meta = p.tables.get("meta")
        if meta is not None and not meta.empty and "env" in meta.columns:
            for env in meta["env"].dropna():
                if isinstance(env, dict):
                    found.update(str(v) for v in env.values() if _suspicious(str(v)))
        return sorted(found, key=len, reverse=True)

    def quote(self, text: str) -> str:
        """Replace every suspicious data string in ``text`` with a backticked ``[data]`` quote."""
        key = self._read_key()
        if self._strings is None or key != self._key:
            self._strings = self._collect()
            self._key = key
        for s in self._strings:
            if s in text:
                text = text.replace(s, quote_data(s))
        return text


def _suspicious(s: str) -> bool:
    return bool(re.search(r"\s", s.strip())) or len(s) > 80 or any(c in s for c in "`<>{}")


def _suspicious_values(col: Any) -> list[str]:
    """The distinct values of a column that :func:`_suspicious` flags.

    Vectorized: a cluster has thousands of distinct operator names.
    """
    import pandas as pd

    u = pd.Series(col.dropna().unique()).astype(str)
    if u.empty:
        return []
    flag = (
        u.str.strip().str.contains(r"\s", regex=True)
        | (u.str.len() > 80)
        | u.str.contains(r"[`<>{}]", regex=True)
    )
    return u[flag].tolist()


def quote_data(s: str, limit: int = 40) -> str:
    """A backticked, length-capped quote of a data string."""
    flat = re.sub(r"\s+", " ", str(s)).replace("`", "'").strip()
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return f"`[data] {flat}`"


DiagnoseFn = Callable[..., Diagnosis]
"""``(profile, *, baseline=None) -> Diagnosis`` (default :func:`advisor_chat.diagnosis.diagnose`)."""


@dataclass
class DiagnosisOutput(ToolOutput):
    """A ``diagnose`` tool output that carries the :class:`Diagnosis` object (for grounding)."""

    diagnosis: Diagnosis | None = None


def default_diagnose(profile: Any, *, baseline: Any = None) -> Diagnosis:
    """:func:`advisor_chat.diagnosis.diagnose` (imported on first use)."""
    from advisor_chat.diagnosis import diagnose

    return diagnose(profile, baseline=baseline)


# A yes/no question asked the healthy way round ("is rank 11 fine?", "网络正常吗？"): the verdict
# is about health, so a culprit gets "no".
_HEALTHY_Q = re.compile(
    r"\b(fine|ok|okay|healthy|normal|alright|all right|(just )?noise|harmless|benign)\b|正常|没问题"
    r"|没事|健康|噪声|噪音|(正常|随机)(的)?波动",
    re.I,
)

#: "What changed?" / "what is different from the old run?": a comparison only a baseline answers.
_CHANGED_Q = re.compile(
    r"what(?:'s| has| have)? changed|what(?:'s| is| are) different|\bdiff(?:erence)?s?\b|"
    r"\bcompar(?:e|ed|ison) (?:to|with|against)\b|变了(?:什么|啥|哪)|(?:什么|哪些?)(?:变化|区别|差异|不同)|"
    r"有(?:什么|啥)(?:变化|区别|差异|不同)",
    re.I,
)

#: An operator type written in a question: CamelCase ("ReduceMean") or capitalised inside a
#: sentence ("a Pow after every layer").
_OP_NAME = re.compile(r"\b[A-Za-z]*[a-z][A-Z][A-Za-z]*\b|(?<=[a-z0-9,;:] )[A-Z][a-z]{2,}\b")

_REAL_Q = re.compile(r"\breal\b|\bgenuine\b|真实|是真的", re.I)

#: "What fraction / share of the step (or device time)?": the shares first, then the gain.
_SHARE_Q = re.compile(
    r"\b(fraction|share|percent(age)?|proportion|what part)\b|比例|占比|百分之|比重|占(了)?多少",
    re.I,
)

#: "How much if everything were fixed?": every cause's gain together, first.
_TOTAL_Q = re.compile(
    r"\b(everything|all (?:the |of (?:the |them|it)|these |those )?(?:causes|problems|issues|"
    r"fixes|of them|of it)|in total|altogether|combined|all (?:fixed|together)|top \d)\b|"
    r"全部|所有(?:的)?(?:问题|原因)|都(?:修|解决|优化)|总共|一共|合计|加起来",
    re.I,
)

# Routes answered as a projection of the diagnosis alone (no analyzer tool needed).
_PROJECTED = {
    "explain_rank",
    "which_slow_rank",
    "slow_link",
    "fix_first",
    "how_much",
    "evidence",
    "step_events",
    "step_trend",
    "bottleneck",
    "communication",
    "pipeline_bubble",
    "summarize",
}


class Planner:
    """Question slots -> the diagnosis (+ the tools a capability needs) -> projected answer.

    Args:
        tools: The session's tools (by name).
        session: The shared tool session.
        diagnose: How to get the profile's :class:`Diagnosis` (tests pass a constructed one).
    """

    def __init__(
        self,
        tools: Sequence[Tool],
        session: ToolSession,
        diagnose: DiagnoseFn | None = None,
        *,
        baseline_problem: BaselineProblem | None = None,
    ) -> None:
        self.baseline_problem = baseline_problem
        self.tools = {t.name: t for t in tools}
        self.session = session
        self.quoter = DataQuoter(session)
        self._diagnose = diagnose or default_diagnose
        self._last_diagnosis: Diagnosis | None = None

    # -- running tools -------------------------------------------------------------------------
    def call(self, name: str, args: dict[str, Any], outputs: list[ToolOutput]) -> ToolOutput | None:
        """Call tool ``name`` if it exists; append the output to ``outputs``."""
        tool = self.tools.get(name)
        if tool is None:
            return None
        out = tool.invoke({k: v for k, v in args.items() if v is not None})
        outputs.append(out)
        return out

    def diagnosis(self, outputs: list[ToolOutput], language: str = "en") -> Diagnosis | None:
        """The profile's diagnosis, recorded as the turn's first tool result (``diagnose``).

        Calls the session's ``diagnose`` tool when there is one (the advisor points the session
        at an injected diagnose function); otherwise computes the diagnosis with
        ``self._diagnose`` and records it as a ``diagnose`` output. An error is recorded in that
        output (and shown in the answer), never raised (unless ``ADVISOR_STRICT=1``).
        """
        if "diagnose" in self.tools:
            args = {"language": "zh"} if language == "zh" else {}
            out = self.call("diagnose", args, outputs)
            d = getattr(out, "diagnosis", None)
            return d if isinstance(d, Diagnosis) else None
        try:
            d = self._diagnose(self.session.profile, baseline=self.session.baseline)
        except Exception as exc:
            if strict_mode():
                raise
            outputs.append(
                DiagnosisOutput("diagnose", {}, "", error=f"{type(exc).__name__}: {exc}")
            )
            return None
        outputs.append(DiagnosisOutput("diagnose", {}, render_for_model(d), diagnosis=d))
        return d

    def plan(self, q: Query) -> list[tuple[str, dict[str, Any]]]:
        """The analyzer tool calls a capability needs besides the diagnosis."""
        step = q.steps[0] if q.steps else None
        rank = q.ranks[0] if q.ranks else None
        group = q.groups[0] if q.groups else None
        it = q.intent
        if it == "rank_component" or _rank_amount_column(q):
            return [("cluster_breakdown", {"step": step})]
        if it == "top_ops":
            named = ",".join(q.ops) or q.op_category
            if rank is None and q.nodes and q.op_category == "compute":
                # "a rank on server 1 vs one on server 0": the first rank of the first node named
                rank = next(iter(self._node_ranks(q)), None)
            return [("compare_ops", {"rank_b": rank, **({"ops": named} if named else {})})]
        if it == "slow_link" or (q.hypothesis in ("network", "link") and it == "summarize"):
            # (a suspected cable or NIC is judged against the links: whether they could be)
            t = q.transports[0] if q.transports else None
            return [("slow_link", {"group": group, "transport": t})]
        if it == "compare_ops" or (
            it == "explain_rank" and q.kind == "compare" and len(q.ranks) == 2
        ):
            a, b = (q.ranks[0], q.ranks[1]) if len(q.ranks) >= 2 else (None, rank)
            return [("compare_ops", {"rank_a": a, "rank_b": b})]
        if it == "compare_profiles":
            return [("compare_profiles", {})]
        if it == "mc2":
            return [("communication", {"group": group})]
        if it == "hccl_timeout":
            return [("env_check", {})]
        if (
            it == "step_events"
            and q.kind == "which"
            and not q.steps
            and _WHICH_STEP_Q.search(q.text)
        ):
            # "which step is the slowest?": the trend table when it can judge one (3 steps or
            # more), else the step trace gives the steps' times
            st = self.session.profile.get("step_trace")
            few = not st.empty and st["step"].nunique() < 3
            # (fewer than 3 steps: the breakdown's per-rank table holds the steps' times)
            return [("cluster_breakdown", {})] if few else [("step_trend", {"rank": rank})]
        if it == "step_trend":
            return [("step_trend", {"rank": rank})]
        if it == "pipeline_bubble":
            return [("cluster_breakdown", {"step": step})]
        if it == "host_dispatch":
            return [("host_dispatch", {"rank": rank})]
        if it == "memory" and self.session.profile.has("memory"):
            return [("memory", {"rank": rank}), ("env_check", {})]
        if it in ("memory", "env_check"):
            return [("env_check", {})]
        if it == "data_quality":
            return [("data_quality", {})]
        return []

    def run(self, q: Query, outputs: list[ToolOutput]) -> PlanResult:
        """Answer ``q``: checked against the profile first, then diagnosis, tools, cases.

        The check is :func:`~advisor_chat.agent.validate.validate_question`. A rank, range, link, step or baseline that does not exist (or is not comparable) gets
        the refusal alone, without running the diagnosis; notes (a reversed range read in
        order, a job size other than the profile's, a baseline left out) open the answer.
        """
        if q.intent == "help":
            return PlanResult(self._help(q, None), outputs=outputs)
        check = validate_question(
            q,
            self.session.ranks,
            self.session.steps,
            baseline=self.baseline_problem,
            uncaptured=self._uncaptured(),
        )
        if check.says_something:  # the facts the refusal or the notes quote
            outputs.append(ToolOutput("validate_question", {}, check.record))
        if check.refusal:  # before (and instead of) any diagnosis text
            return PlanResult(check.refusal, outputs=outputs)
        result = self._run_valid(q, outputs)
        if check.after:
            # the answer first, then what the question got wrong ("32 cards" for 16)
            head, sep, rest = result.text.partition("\n")
            note = " ".join(check.after)
            result.text = head + "\n\n" + note + ("\n" + rest if sep and rest.strip() else "")
        if check.notes:
            result.text = " ".join(check.notes) + "\n\n" + result.text
        measured = " ".join(
            m
            for m in (self._collective_measures(q, outputs), self._host_call_measures(q, outputs))
            if m
        )
        if measured and q.kind == "how_much" and not asks_yes_no_after(q.text):
            # a question that only asks a quantity: its figures first
            result.text = measured + "\n\n" + result.text
        elif measured:  # a why / yes-no question: its answer first, the measures after it
            head, sep, rest = result.text.partition("\n\n")
            result.text = head + "\n\n" + measured + ("\n\n" + rest if sep and rest.strip() else "")
        return result

    def _collective_measures(self, q: Query, outputs: list[ToolOutput]) -> str:
        """One instance of each collective the question names and measures ("how long is one").

        For a question that asks a quantity (how long / how much / MB / 多久 / 多少) and names a
        collective type (AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast): the
        ``communication`` tool's ``instances`` table, per group × op type, medians per instance
        (elapse, wait, transit, MB and bandwidth of its main transport). With ranks named, the
        groups holding them. ``""`` when the question does not ask, or no row matches.
        """
        codes = [c for c, pat in _COLLECTIVE_WORDS.items() if pat.search(q.text)]
        if not codes or not _QUANTITY_Q.search(q.text) or not self.session.profile.has("comm_ops"):
            return ""
        out = next(
            (o for o in reversed(outputs) if o.name == "communication" and o.result is not None),
            None,
        ) or self.call("communication", {}, outputs)
        if out is None or out.result is None:
            return ""
        t = out.result.tables.get("instances")
        if t is None or t.empty:
            return ""
        zh = q.language == "zh"
        code = t["op_type"].astype(str).str.lower().str.replace(r"[^a-z]", "", regex=True)
        asked = set(q.ranks)
        parts = []
        text = q.text.lower()
        for c in codes:
            rows = t[code.str.startswith(c)]
            # a group the question names ("the dp allreduce") before the ranks it names
            named = (
                rows["group_name"]
                .astype(str)
                .str.lower()
                .map(
                    lambda g: (
                        bool(g)
                        and re.search(rf"(?<![a-z]){re.escape(g)}(?![a-z])", text) is not None
                    )
                )
            )
            if named.any():
                rows = rows[named]
            if asked and not rows.empty:
                holds = rows["rank_list"].map(lambda s: asked <= set(parse_ranks(str(s))))
                some = rows["rank_list"].map(lambda s: bool(asked & set(parse_ranks(str(s)))))
                rows = rows[holds] if holds.any() else rows[some] if some.any() else rows
            for _, r in rows.head(2).iterrows():
                parts.append(self._instance_text(r, zh))
        if not parts:
            return ""
        src = quote_source(self.session.profile.cite("comm_ops"), zh)
        sep = "；" if zh else "; "
        return say("planner.instances_lead", zh, items=sep.join(parts), src=src)

    def _host_call_measures(self, q: Query, outputs: list[ToolOutput]) -> str:
        """Each host call the question names and measures ("how long does one aten::item take").

        For a question that asks a quantity and names a host call (a CANN API such as
        ``aclnnCat`` / ``aclrtSynchronizeStream``, a framework operator such as ``aten::cat``, a
        Python call ``foo()``): the ``host_dispatch`` tool's ``host_calls`` table, per call
        (median and mean µs per call, calls per step, time per step; medians over the ranks
        read). ``aten::x`` and ``aclnnX`` name the same call. ``""`` when nothing matches.
        """
        if not _QUANTITY_Q.search(q.text) or not _HOST_CALL_Q.search(q.text):
            return ""
        if not (
            self.session.profile.has("host_dispatch") or self.session.profile.has("python_frames")
        ):
            return ""
        rank = q.ranks[0] if len(q.ranks) == 1 else None
        out = next(
            (
                o
                for o in reversed(outputs)
                if o.name == "host_dispatch" and o.result is not None and o.args.get("rank") == rank
            ),
            None,
        ) or self.call("host_dispatch", {"rank": rank}, outputs)
        if out is None or out.result is None:
            return ""
        t = out.result.tables.get("host_calls")
        if t is None or t.empty:
            return ""
        text = q.text.lower()
        rows = [r for _, r in t.iterrows() if _names_host_call(text, str(r["name"]))][:2]
        if not rows:
            return ""
        zh = q.language == "zh"
        parts = []
        for r in rows:
            median = float(r["per_call_us_median"])
            parts.append(
                say(
                    "planner.host_call",
                    zh,
                    name=self.quoter.quote(str(r["name"])),
                    each=fmt_num(
                        median if math.isfinite(median) else float(r["per_call_us_mean"]), "us"
                    ),
                    n=fmt_num(float(r["calls_per_step"])),
                    total=fmt_num(float(r["time_per_step_us"]), "us"),
                )
            )
        table = "host_dispatch" if self.session.profile.has("host_dispatch") else "python_frames"
        src = quote_source(self.session.profile.cite(table), zh)
        who = say("planner.host_calls_rank", zh, rank=rank) if rank is not None else ""
        sep = "；" if zh else "; "
        return say("planner.host_calls_lead", zh, items=sep.join(parts), src=src, who=who)

    def _instance_text(self, r: Any, zh: bool) -> str:
        """One row of the ``instances`` table as a clause (see :meth:`_collective_measures`)."""
        name = COLLECTIVE_NAMES.get(str(r["op_type"]).lower(), self.quoter.quote(str(r["op_type"])))
        group = self.quoter.quote(str(r["group_name"] or r["group"]))
        ranks = str(r["rank_list"]).replace(", ", "、") if zh else str(r["rank_list"])
        text = say(
            "planner.instance",
            zh,
            name=name,
            group=group,
            ranks=ranks,
            each=fmt_num(float(r["elapse_ms_median"]) * 1000, "us"),
            wait=fmt_num(float(r["wait_ms_median"]) * 1000, "us"),
            transit=fmt_num(float(r["transit_ms_median"]) * 1000, "us"),
            n=fmt_num(float(r["count_per_step"])),
        )
        if math.isfinite(float(r["transport_size_mb_median"])):
            gbps = float(r["bandwidth_gbps_median"])
            text += say(
                "planner.instance_size" if math.isfinite(gbps) else "planner.instance_size_no_bw",
                zh,
                mb=fmt_num(float(r["transport_size_mb_median"])),
                total=fmt_num(float(r["transit_size_mb_median"])),
                transport=str(r["transport"]),
                gbps=fmt_num(gbps),
            )
        tensor = float(r.get("tensor_mb_median", math.nan))
        if math.isfinite(tensor) and str(r.get("data_type", "")):
            text += say(
                "planner.instance_tensor",
                zh,
                dtype=str(r["data_type"]),
                mb=fmt_num(tensor),
                n=fmt_num(float(r["elements_median"])),
                src=quote_source(self.session.profile.cite("hccl_ops"), zh),
            )
        return text

    def _uncaptured(self) -> list[int]:
        """Ranks of the job the profile has no data for (its ``missing_ranks`` warning)."""
        warnings = getattr(self.session.profile, "warnings", ())
        return sorted({r for w in warnings if w.code == "missing_ranks" for r in w.ranks})

    def _run_valid(self, q: Query, outputs: list[ToolOutput]) -> PlanResult:
        """:meth:`run` for a question whose ranks, steps, links and baseline exist."""
        zh = q.language == "zh"
        lang = "zh" if zh else "en"
        d = self._last_diagnosis = self.diagnosis(outputs, q.language)
        if q.nodes and not q.node_ordinal:
            # "box 2" of 2 boxes: the nodes were counted from 1
            from advisor_chat.diagnosis.attribution import nodes

            n_nodes = len(nodes(self.session.profile))
            if n_nodes and max(q.nodes) == n_nodes and min(q.nodes) >= 1:
                q = dataclasses.replace(q, node_ordinal=True)
        if q.intent == "unsupported" and not q.hypothesis and unknown_suspect(q.text):
            # "is it the optimizer?": a suspect no rule names, judged against the causes' text
            q = dataclasses.replace(q, intent="summarize", kind="yes_no")
        elif q.intent == "unsupported" and not q.hypothesis and claim_hypothesis(q.text):
            # "is it that the GMM mostly reads weights?": a mechanism, judged the same way
            q = dataclasses.replace(
                q, intent="summarize", kind="yes_no", claim=claim_hypothesis(q.text)
            )
        if (
            q.intent == "unsupported"
            and q.kind == "yes_no"
            and _HEALTHY_Q.search(q.text) is not None
            and not (q.ranks or q.links or q.ops or q.stages or q.nodes or q.hypothesis)
        ):
            # "is this normal?" / "这正常吗？": a verdict on the run
            q = dataclasses.replace(q, intent="summarize")
        if q.intent == "unsupported" and not q.hypothesis and not project.named_suspect(q.text):
            return PlanResult(self._help(q, d), outputs=outputs)
        if q.intent == "compare_profiles" and self.session.baseline is None and q.hypothesis:
            # "should we upgrade CANN?": without an earlier run, the verdict on this one
            q = dataclasses.replace(q, intent="summarize")
        if (
            q.intent == "compare_profiles"
            and self.session.baseline is None
            and (
                q.kind in ("why", "overview", "", "fix_first")
                # "was it the agent upgraded on the second machine only?": a part of this run
                # is suspected, and this run can judge it
                or (q.kind == "yes_no" and bool(q.ranks or q.nodes or q.links or q.stages))
            )
            # (the question itself, not the context before it: "... the comparison against our
            # baseline ... what's going on?"); "ranks 0-7 now wait 31 ms ... what changed?" names
            # parts of this run: what differs in it is an answer
            and (
                not _CHANGED_Q.search(question_part(q.text.lower()))
                or bool(q.ranks or q.nodes or q.links or q.stages)
            )
        ):
            # "since the change steps are slower, what's going on?": what this run shows, and how
            # to compare it with the earlier one
            result = self._run_valid(dataclasses.replace(q, intent="summarize"), outputs)
            result.text = result.text + "\n\n" + msg("answer.no_baseline_note", lang)
            return result
        if q.intent == "compare_profiles" and self.session.baseline is None:
            return PlanResult(msg("answer.no_baseline", lang), outputs=outputs)
        if q.intent == "compare_ops" and len(self.session.ranks) == 1 and len(q.ranks) < 2:
            # one rank: nothing to compare against, but its own heaviest operators are known
            result = self._run_valid(dataclasses.replace(q, intent="top_ops"), outputs)
            result.text = msg("answer.one_rank_top_ops", lang) + " " + result.text
            return result
        top = d.top() if d is not None else None
        if (
            (
                q.intent in ("compare_ops", "top_ops")
                or (q.intent == "how_much" and _HOW_MANY.search(q.text) is not None)
            )
            and not (q.ops or q.op_category or q.ranks)
            and top is not None
            and top.culprit.operator
            and _THOSE_OPS_Q.search(q.text) is not None
        ):
            # "how many of those ops per step?": the operator the diagnosis names, and first the
            # launches of it the cause blames when they are some of them
            q = dataclasses.replace(q, intent="top_ops", ops=(top.culprit.operator,))
            lead = project.cause_operator_launches(top, zh)
            if lead:
                result = self._run_valid(q, outputs)
                result.text = lead + " " + result.text
                return result
        if (
            q.intent == "bottleneck"
            and q.kind != "yes_no"
            and not self.session.profile.has("step_trace")
            and self.session.profile.has("kernels")
        ):
            # no step split, but the device's kernel time is known: where it goes, by operator
            result = self._run_valid(dataclasses.replace(q, intent="top_ops"), outputs)
            result.text = msg("answer.no_step_trace_top_ops", lang) + " " + result.text
            return result
        missing = _missing_data(q.intent, self.session)
        if missing is not None:
            self.call("data_quality", {}, outputs)
            what, need = (missing[1], missing[3]) if zh else (missing[0], missing[2])
            return PlanResult(
                msg("answer.missing_data", lang, what=what, need=need), outputs=outputs
            )
        for name, args in self.plan(q):
            out = self.call(name, args, outputs)
            if (
                out is not None
                and out.error
                and not out.not_answerable
                and q.intent in ("step_trend", "compare_ops", "top_ops", "rank_component")
            ):
                return PlanResult(self._bad_args(q, out), outputs=outputs)
        which_step = (
            q.intent == "step_events"
            and q.kind == "which"
            and not q.steps
            and _WHICH_STEP_Q.search(q.text) is not None
            and len(self.session.steps) >= 1
        )  # "which step is the slowest?" on one or two steps: their times, then the causes
        if (
            q.intent in ("step_trend", "step_events")
            and len(self.session.steps) < 3
            and not which_step
            # "is it GC?": a suspect is judged from the causes, however many steps there are
            and not q.hypothesis
        ):
            n = len(self.session.steps)
            return PlanResult(msg(f"answer.few_steps_{n}", lang), outputs=outputs)
        if d is None and q.intent in _PROJECTED:
            proj: Projection | None = Projection(lines=[msg("answer.no_diagnosis", lang)])
        else:
            proj = self._project(q, d, outputs) if d is not None else None
            if proj is not None and d is not None and q.ruled_out and not q.hypothesis:
                # "we ruled out the dataloader and the network, what else?": say what the data
                # says of each before (or beside) the rest
                proj = project.ruled_out(proj, d, q.ruled_out, zh, network_scope(q.text))
        return self._compose(q, d, proj, outputs)

    # -- projections -------------------------------------------------------------------------
    def _op_suspect(self, q: Query, d: Diagnosis, outputs: list[ToolOutput]) -> Projection | None:
        """A verdict on operators the user suspects ("is flash attention the problem?").

        From compare_ops' ``ops_by_rank`` metrics (the named operators' device time per step on
        one rank against the median of the others, and their share of its step) and ``by_shape``
        table (their largest (operator, input shapes) rows). Only when no cause of the diagnosis
        names those operators and no rank runs them 10% slower than the others (``None``
        otherwise: the causes answer). A large share on every rank alike is a cost of the job's
        work, not a fault; whether the operators are slower than this hardware should run them,
        one run cannot tell. A small share is a "no", with where the time goes.
        """
        zh = q.language == "zh"
        out = self.call("compare_ops", {"ops": ",".join(q.ops) or q.op_category}, outputs)
        if out is None or out.error or out.result is None:
            return None
        m = out.result.metrics
        types = list(out.result.tables.get("ops_by_rank", pd.DataFrame()).attrs.get("op_types", []))
        share = m.get("ops_b_step_share")
        ratio = m.get("ops_times_others_median", 1.0)
        if not types or share is None or "ops_b_us" not in m or abs(ratio - 1.0) >= 0.1:
            return None
        real = [c for c in d.causes if c.mechanism is not Mechanism.NO_CULPRIT]
        words = [*(re.escape(t) for t in types), *OP_SUSPECT_WORDS.get(q.op_category, ())]
        if any(re.search(w, project.cause_text(c), re.I) for c in real for w in words):
            # a cause is about them: its answer says how (an unfused optimizer costs the gaps
            # between its kernels, not their device time)
            return None
        shown = ", ".join(self.quoter.quote(t) for t in types[:4])
        shown_zh = "、".join(self.quoter.quote(t) for t in types[:4])
        if q.op_category and not q.ops:  # "the attention operators (FlashAttentionScore, ...)"
            shown = f"the {q.op_category} operators ({shown})"
            shown_zh = f"{OP_CATEGORY_ZH.get(q.op_category, q.op_category)}算子（{shown_zh}）"
        mine = fmt_num(float(m["ops_b_us"]), "us")
        pct_txt = f"{float(share) * 100:.1f}%"
        peers = (
            fmt_num(float(m["ops_others_median_us"]), "us") if "ops_others_median_us" in m else ""
        )
        lang = "zh" if zh else "en"
        # their largest rows by input shapes: what sets their time
        bs = out.result.tables.get("by_shape")
        rows = []
        if bs is not None and not bs.empty and {"op_type", "input_shapes"} <= set(bs.columns):
            sub = bs[bs["op_type"].isin(types)].sort_values("total_us_b", ascending=False)
            for _, r in sub.head(2).iterrows():
                shape = str(r["input_shapes"]).strip().strip('"')
                rows.append((self.quoter.quote(str(r["op_type"])), shape, float(r["avg_us_b"])))
        what = ("；" if zh else "; ").join(
            msg("answer.op_suspect_row", lang, op=o, shapes=sh, each=fmt_num(a, "us"))
            for o, sh, a in rows
        )
        key = (
            "answer.op_suspect_large"
            if share >= OP_SUSPECT_LARGE
            else "answer.op_suspect_small"
            if share < OP_SUSPECT_SMALL
            else "answer.op_suspect_part"
        )
        p = Projection()
        p.lines.append(
            msg(
                key,
                lang,
                ops=shown_zh if zh else shown,
                us=mine,
                share=pct_txt,
                peers=peers or mine,
                n=int(m.get("ops_ranks_others", 0)),
                rank=int(m.get("rank_b", 0)),
            )
            + (msg("answer.op_suspect_work", lang, rows=what) if what else "")
        )
        if real:
            p.add_cause(real[0])
            p.lines.append(msg("answer.op_suspect_top", lang, summary=project.summary(real[0], zh)))
        else:
            p.lines.append(msg("answer.diagnosis_says", lang, headline=project.headline(d, zh)))
        return p

    def _project(self, q: Query, d: Diagnosis, outputs: list[ToolOutput]) -> Projection | None:
        """The diagnosis projection for the question's route (``None`` for tool capabilities)."""
        zh = q.language == "zh"
        it = q.intent
        hyp = q.hypothesis
        # "is that Free real?" asks the healthy way round: a capture that inflates it is a "no"
        healthy = q.kind == "yes_no" and (
            # the question's own sentence ("rank 15's card bad? its matmuls look normal though":
            # the remark after it does not ask the healthy way round)
            _HEALTHY_Q.search(question_part(q.text.lower())) is not None
            or (hyp == "profiler" and _REAL_Q.search(q.text) is not None)
        )
        # operators named by the start of their type ("a softmax cross entropy on every card")
        words = () if q.ops else project.op_words(q.text)
        if healthy and (q.ops or words) and not q.ranks and not hyp:
            # "Pow, ReduceMean, Neg everywhere, is that normal?": not when a cause names them
            odd = project.ops_not_normal(d, q.ops, zh, words)
            if odd is not None:
                return odd
        if (
            healthy
            # "is it normal that backward has an idle gap before every op?": a symptom of the
            # run (no operator named), judged by the whole diagnosis
            and it in ("unsupported", "summarize", "compare_ops", "top_ops", "host_dispatch")
            and not (q.ranks or q.links or q.ops or q.stages or q.nodes or hyp)
            and (it in ("unsupported", "summarize") or not _OP_NAME.search(q.text))
        ):
            # "is this normal?" / "这正常吗？" about the run: a verdict on the whole diagnosis
            return project.run_is_normal(d, zh)
        idle_q = _IDLE_Q.search(q.text) is not None
        # "where in the step is the idle?": the idle every rank shares, when the job has one
        idle_place = idle_q and _IDLE_PLACE.search(q.text) is not None
        if (  # "why is every rank idle?" (a yes/no question keeps its verdict)
            not q.ranks
            and q.kind != "yes_no"
            and it not in ("slow_link", "communication")
            and (_EVERY_RANK.search(q.text) or idle_place)
        ):
            job = project.job_question(
                d, zh, idle=idle_q, only_idle=idle_place and not _EVERY_RANK.search(q.text)
            )
            if job is not None:
                return job
        if q.except_ranks and not hyp:  # "apart from rank 0, are the others fine?"
            return project.other_ranks(
                d, q.except_ranks, zh, yes_no=q.kind == "yes_no", healthy=healthy
            )
        both = _FIX_TOGETHER.search(q.text)
        if both is not None and not q.ranks and not q.links:  # "if both were fixed, what…?"
            count = 2 if re.search(r"\bboth\b|两个|两者|二者|俩", q.text, re.I) else None
            together = project.fix_together(d, zh, count=count)
            if together is not None:
                return together
        if _WHOLE_STORY.search(q.text):  # "is that the whole story?", "swap rank 3 and we're done?"
            whole = project.sufficiency(
                d,
                zh,
                ranks=q.ranks,
                links=q.links,
                hypothesis=hyp,
                top=_TOP_PROBLEM.search(q.text) is not None,
                swap=hyp == "card" and _SWAP_Q.search(q.text) is not None,
            )
            if whole is not None:
                return whole
        # "which node is slower?" (not "which node or card is the straggler?": a rank question)
        which_node = (
            _WHICH_NODE.search(q.text) is not None
            or (q.kind == "yes_no" and _NODE_WORD.search(q.text) is not None)
        ) and not _RANK_WORD.search(q.text)
        # "is node 1 slower?", "which node is slower?"
        # ("ranks 0-7 wait ... what's different about box 2?": ranks said in passing, the node asked)
        asked = question_part(q.text.lower())
        node_asked = (
            bool(q.nodes) and bool(_NODE_WORD.search(asked)) and not _RANK_WORD.search(asked)
        )
        if (
            (q.nodes or which_node)
            and (not q.ranks or node_asked)
            and not q.links
            and not hyp
            and it != "top_ops"  # "how many kernels does a rank on server 1 run?": the counts
            and not network_scope(q.text)  # "is it HCCS inside the machine?": the links
        ):
            return project.node_question(
                d, q.nodes, q.node_ordinal, zh, yes_no=q.kind in ("yes_no", "compare")
            )
        if (
            q.kind == "yes_no"
            and (q.op_category in OP_SUSPECT_CATEGORIES or q.ops)
            and it in ("summarize", "bottleneck", "compare_ops")
            and not (q.ranks or q.nodes or q.links or q.stages)
            # ("太慢", "slow on this hardware": about the operators, not another suspect)
            and hyp in ("", "kernel_slow", "hardware")
        ):
            # "is FA just slow?": a verdict on the operators named, from their time on every rank
            verdict = self._op_suspect(q, d, outputs)
            if verdict is not None:
                return verdict
        suspect = asked_suspect(q)
        # "is it that the GMM mostly reads weights?": a mechanism found in what the top cause
        # measured; a suspect the question also names is judged by its rule first, unless that
        # rule cannot tell
        # (a claim about the ranks, links, stages or nodes it opens with is judged by their own
        # verdicts: "是不是0号卡或者15号卡拖慢了all-to-all？")
        claim = claim_hypothesis(q.text) if q.kind == "yes_no" and not hyp else ""
        if claim and (q.ranks or q.links or q.stages or q.nodes) and _OPENS_WITH_UNIT.match(claim):
            claim = ""
        claim_fits = bool(claim) and project.claim_support(d, claim)[1] >= project.CLAIM_FITS
        if suspect.startswith("env:") and _ACTION_Q.search(q.text):
            # "should I raise HCCL_BUFFSIZE?": whether the evidence selects that change; a
            # suspect stated as the premise ("since the network is the bottleneck, ...") is
            # judged after it when the data contradicts it
            return project.setting_verdict(d, suspect[4:], zh, premise=hyp)
        if (
            suspect
            and hyp != "software_bug"  # "is DeepSpeed broken?" suspects the stack, not a setting
            and (q.kind == "yes_no" or _SUSPECT_Q.search(q.text))
            and not _ACTION_Q.search(q.text)
        ):
            # "we turned on X, related?": X against the evidence of the top causes
            meta = getattr(self.session.profile, "tables", {}).get("meta")
            env = (
                meta is not None
                and "env" in getattr(meta, "columns", ())
                and bool(meta["env"].map(lambda e: isinstance(e, dict) and bool(e)).any())
            )
            sv = project.suspect_verdict(d, suspect, zh, env, undecided_ok=not hyp)
            if sv is not None and not (sv.undecided and claim_fits):
                return sv
        if claim_fits:
            return project.claim_verdict(d, claim, zh)
        if hyp == "hccl_timeout" and q.ranks:  # "is rank 4 hung?": that rank's role
            return project.explain_ranks(d, q.ranks, zh, yes_no=q.kind == "yes_no")
        # "could it be GC?": a verdict first; capabilities with their own tools and data needs
        # (mc2 opportunities, memory records) keep their answers
        # (a network or link suspicion keeps the slow-link answer, which judges the links named)
        if (
            hyp in ("network", "link")
            and not q.links
            and (_ONE_PART.search(q.text) or _PART.search(q.text))
        ):
            # "one bad cable / NIC?": the slow-link answer judges one part against the whole
            return project.network(
                d,
                [],
                zh,
                q.ranks,
                yes_no=True,
                which=False,
                healthy=healthy,
                single=True,
                links_judged=_links_judged(outputs),
                scope=network_scope(q.text),
            )
        if (
            hyp
            # a memory question is about capacity (peak, fragmentation), unless it suspects the
            # memory's bandwidth, which the operators' times judge
            and (
                it not in ("mc2", "memory")
                or hyp in ("memory_bandwidth", "fragmentation")
                # memory that grows every step is a cause the verdict can cite
                or (hyp == "memory" and any("memory_growth" in c.symptom_tags for c in d.causes))
            )
            and (hyp not in ("network", "link") or it not in ("slow_link", "communication"))
        ):
            p = project.hypothesis(
                d,
                hyp,
                zh,
                healthy=healthy,
                ranks=q.ranks,
                links=q.links,
                scope=network_scope(q.text),
                action=_SWAP_Q.search(q.text) is not None,
            )
            if p.lines and _EITHER_Q.search(q.text):
                # "is it real or the profiler's?": the verdict names which, no yes or no
                p.lines[0] = _without_yes_no(p.lines[0])
            return p
        if it == "mc2" and d.causes:
            # no mc2 opportunity: the verdict names where the time goes instead (the tool's
            # answer, when it finds one, keeps its evidence and file)
            from advisor_chat.diagnosis.hypotheses import judge

            if judge(d, "mc2").status == "contradicted":
                return project.hypothesis(d, "mc2", zh)
        if it == "hccl_timeout" and q.ranks:  # "rank 4 waited 40 s, is it stuck?": its role
            return project.explain_ranks(d, q.ranks, zh, yes_no=q.kind == "yes_no")
        if it == "hccl_timeout" and q.kind != "yes_no":  # "the job hung for seconds, why?"
            ev = project.late_event(d, zh)
            if ev is not None:
                return ev
        if it == "explain_rank" and q.ranks:
            alternative = re.search(r"\bor\b|还是", q.text, re.I) is not None
            return project.explain_ranks(
                d,
                q.ranks,
                zh,
                yes_no=(q.kind == "yes_no" or (q.kind == "compare" and asks_yes_no(q.text)))
                and not alternative,
                compare=q.kind == "compare" or (alternative and len(q.ranks) == 2),
                faster=re.search(r"\bfaster\b|更快|快于", q.text, re.I) is not None,
                healthy=healthy,
            )
        if it == "which_slow_rank":
            return project.which_culprit(d, zh, yes_no=q.kind == "yes_no")
        if _ONE_WAY.search(q.text):  # "is only one direction slow?"
            dirs = project.link_directions(d, zh)
            if dirs is not None:
                return dirs
        if it == "slow_link":  # a verdict only for a yes/no question (or a bare "network?")
            return project.network(
                d,
                q.links,
                zh,
                q.ranks,
                # "how fast are the links?" asks for numbers (given first), not a verdict
                yes_no=q.kind in ("yes_no", "") and not (q.kind == "" and asks_bandwidth(q.text)),
                link_transports=_link_transports(outputs) if q.links else None,
                which=q.kind == "which",
                healthy=healthy,
                single=_ONE_PART.search(q.text) is not None,
                links_judged=_links_judged(outputs),
                scope=network_scope(q.text),
            )
        if it == "fix_first":
            return project.fix_first(d, zh, ranks_only=_WHICH_RANK.search(q.text) is not None)
        if it == "how_much":
            # "if we switch to X, how much faster?": the cause whose evidence selects X first
            focus = project.cause_showing(d, project.named_suspect(q.text))
            if focus is not None and focus is not d.causes[0]:
                d = dataclasses.replace(d, causes=(focus, *(c for c in d.causes if c is not focus)))
            return project.how_much(
                d,
                zh,
                share=_SHARE_Q.search(q.text) is not None,
                total=_TOTAL_Q.search(q.text) is not None,
            )
        if it == "evidence":
            return project.evidence(d, q.ranks, zh)
        if it in ("step_events", "step_trend"):
            which = q.kind == "which" and not q.steps and _WHICH_STEP_Q.search(q.text)
            slowest = (
                _slowest_step(outputs, self.session.profile.get("step_trace")) if which else None
            )
            if slowest is not None:  # "which step is the slowest and why?": that step, then why
                step, step_us, fast, fast_us, n = slowest
                if n == 1:  # one step captured: nothing to compare it with, what costs it time
                    p = project.overview(d, zh)
                    sid, sid_zh = (f"step {step}, ", f"第 {step} 步，") if step >= 0 else ("", "")
                    p.lines.insert(
                        0,
                        say(
                            "planner.this_profile_holds_one_step_from",
                            zh,
                            sid=(sid_zh if zh else sid),
                            step_us=fmt_num(step_us, "us"),
                        ),
                    )
                    return p
                p = project.steps(d, zh, (step,))
                even = step_us < 1.05 * fast_us  # within 5%: no step stands out
                p.lines.insert(
                    0,
                    f"最慢的是第 {step} 步：{fmt_num(step_us, 'us')}（{n} 步中最快的第 {fast} 步为 "
                    f"{fmt_num(fast_us, 'us')}；每步取最慢一张卡的步长，来源 step_trend 工具）"
                    + ("，各步耗时相差不到 5%，没有哪一步突出。" if even else "。")
                    if zh
                    else f"Step {step} is the slowest: {fmt_num(step_us, 'us')} (the fastest of the "
                    f"{n} steps, step {fast}, took {fmt_num(fast_us, 'us')}; a step's time is its "
                    "slowest rank's, from the step_trend tool)"
                    + (
                        ", so the steps take about the same time (within 5%): none stands out."
                        if even
                        else "."
                    ),
                )
                return p
            return project.steps(d, zh, q.steps, yes_no=q.kind == "yes_no")
        if it == "bottleneck" and q.kind != "yes_no" and _HOST_DOING.search(q.text):
            # "what is the host doing while the device waits?": the host-side cause's account
            prof = self.session.profile
            return project.host_activity(
                d, zh, prof.has("host_dispatch") or bool(prof.available_ranks("host_dispatch"))
            )
        if it in ("bottleneck", "communication"):
            # "is it the embedding / loss computation?": a part of the computation, not the
            # category; judged against what the causes measured
            part = unknown_suspect(q.text) if q.kind == "yes_no" else ""
            if part and not _CATEGORY_WORD.search(part):
                return project.unknown_suspect(d, part, zh)
            return project.category(
                d,
                q.topics,
                q.kind == "yes_no",
                zh,
                breakdown_first=_WHERE_TIME.search(q.text) is not None,
            )
        if it == "pipeline_bubble":
            p = project.pipeline(d, q.stages, zh, yes_no=q.kind == "yes_no")
            if not p.lines and q.kind == "yes_no" and not q.stages:
                return self._bubble_without_stages(d, outputs, zh)
            if p.lines and q.kind == "yes_no" and healthy and d.causes:
                # "is this much bubble normal?": not when a cause of the pipeline explains it
                pipe = any(c.mechanism is Mechanism.PIPELINE_IMBALANCE for c in d.causes)
                said = p.lines[0].startswith(("No", "Yes", "不", "是"))
                if pipe and not said:
                    p.lines[0] = project.with_verdict(
                        say("planner.no_not_as_it_should_be", zh), p.lines[0], zh
                    )
            elif p.lines and q.kind == "yes_no" and not q.stages and _BUBBLE_Q.search(q.text):
                # "is that Bubble a pipeline bubble?" on a pipeline job: yes, and whose it is
                p.lines[0] = project.with_verdict(
                    say("planner.yes_it_is_a_pipeline_bubble", zh),
                    p.lines[0],
                    zh,
                )
            return p if p.lines else None
        suspect_x = unknown_suspect(q.text) if q.kind == "yes_no" else ""
        if it == "summarize" and suspect_x:  # "is the tokenizer the problem?"
            return project.unknown_suspect(d, suspect_x, zh)
        if it == "summarize" and q.claim:  # "is it that the GMM mostly reads weights?"
            return project.claim_verdict(d, q.claim, zh)
        if it == "summarize":
            return project.overview(d, zh, yes_no=q.kind == "yes_no", healthy=healthy)
        return None

    def _bubble_without_stages(
        self, d: Diagnosis, outputs: list[ToolOutput], zh: bool
    ) -> Projection | None:
        """Answer "is that Bubble a pipeline bubble?" on a job without pipeline stages: no.

        The step trace counts the time in ``hcom_receive`` as Bubble; with no stage rows, no
        ``pp_index`` and no pipeline group, that time is another group's point-to-point receives
        (named from the communication groups whose operators are send / receive).
        """
        from advisor_chat.analyzers._common import groups_table
        from advisor_chat.diagnosis.context import infer_stages

        profile = self.session.profile
        if infer_stages(profile):
            return None
        bub = next(
            (
                f
                for o in outputs
                if o.name == "cluster_breakdown" and o.result is not None
                for f in o.result.findings
                if "pipeline_bubble" in f.symptom_tags
            ),
            None,
        )
        g = groups_table(profile)
        p2p = (
            sorted({str(n) for n in g.loc[g["comm_kind"] == "p2p", "group_name"].dropna()})
            if not g.empty and "comm_kind" in g.columns
            else []
        )
        amount = fmt_num(bub.metrics["bubble_us_mean"], "us") if bub is not None else ""
        names = ("、" if zh else ", ").join(p2p)
        p = Projection()
        if zh:
            line = (
                "不是：这个作业没有流水线阶段（没有 stage 数据、pp_index 或流水线通信组），"
                "Bubble 列统计的是等待 hcom_receive 的时间"
                + (f"（每步平均 {amount}）" if amount else "")
                + (f"，这里是通信组 {names} 的点对点收发（send/receive）" if names else "")
                + "，不是流水线气泡。"
            )
        else:
            line = (
                "No: this job has no pipeline stages (no stage rows, pp_index or pipeline group), "
                "and the Bubble column counts time spent in hcom_receive"
                + (f" ({amount} per step on average)" if amount else "")
                + (f": here the point-to-point send/receive of the {names} group" if names else "")
                + ", not a pipeline bubble."
            )
        p.lines.append(line)
        top = next(iter(d.causes), None)
        if top is not None:
            p.add_cause(top)
            p.lines.append(project.cause_bullet(top, zh))
        return p

    # -- writing ---------------------------------------------------------------------------
    def _help(self, q: Query, d: Diagnosis | None) -> str:
        zh = q.language == "zh"
        lang = "zh" if zh else "en"
        items = "\n".join(f"- {zhs if zh else en}" for en, zhs in _CAPABILITIES)
        if q.intent == "help":
            return f"{msg('answer.help', lang)}\n{items}"
        head = ""
        if d is not None:
            head = msg("answer.diagnosis_says", lang, headline=project.headline(d, zh))
        lead = msg("answer.not_understood", lang)
        return (f"{head}\n\n" if head else "") + f"{lead}\n{items}"

    def _bad_args(self, q: Query, out: ToolOutput) -> str:
        if q.language == "zh":
            return msg("answer.bad_args", "zh", error=error_zh(out.name, out.error or ""))
        return msg("answer.bad_args", "en", error=out.error)

    def _summary(self, f: Finding, zh: bool) -> str:
        s = f.summary_zh if zh and f.summary_zh else f.summary
        if zh and not f.summary_zh:
            s = f"`{f.id}`（详见工具结果）"
        return self.quoter.quote(s.strip().rstrip("。.")) + ("。" if zh else ".")

    def _compose(
        self,
        q: Query,
        d: Diagnosis | None,
        proj: Projection | None,
        outputs: list[ToolOutput],
    ) -> PlanResult:
        zh = q.language == "zh"
        by_tool: dict[str, list[ToolOutput]] = {}
        for o in outputs:
            by_tool.setdefault(o.name, []).append(o)
        lines: list[str] = []
        cited: list[Finding] = []
        causes: list[RootCause] = []
        plots: list[str] = {
            "explain_rank": ["rank_breakdown", "launch_delay"],
            "which_slow_rank": ["rank_breakdown"],
            "slow_link": ["bandwidth_heatmap"],
            "step_events": ["step_trend"],
            "step_trend": ["step_trend"],
            "compare_ops": ["op_compare"],
            "top_ops": ["op_compare"],
            "rank_component": ["rank_breakdown"],
        }.get(q.intent, ["rank_breakdown"])
        plot_ranks: list[int] = []

        def add(f: Finding) -> None:
            if f.id not in {c.id for c in cited}:
                cited.append(f)
                lines.append(f"- {self._summary(f, zh)}{self._source(f, zh)}")

        if proj is not None:
            lines += [self.quoter.quote(x) for x in proj.lines]
            ref = project.reference_line(proj, zh)
            if ref:
                lines += ["", ref]
            causes = list(proj.causes)
            plot_ranks = list(proj.plot_ranks)
            for c in causes:
                for f in c.findings:
                    if f.id not in {x.id for x in cited}:
                        cited.append(f)
            bw_lead = self._bandwidth_lead(q, by_tool, zh) if q.intent == "slow_link" else []
            amount = self._rank_amount_lead(q, by_tool, zh) if _rank_amount_column(q) else ""
            if amount:  # "how much time does rank 5 spend in communication?": that figure first
                lines[:0] = [amount, ""]
            elif (
                d is not None
                and q.intent == "explain_rank"
                and q.kind == "how_much"
                and len(q.ranks) == 1
                and d.role_of(q.ranks[0])
                and all(role == "victim" for _, role, _ in d.role_of(q.ranks[0]))
            ):  # "how much would fixing rank 3 save?" of a rank that only waits
                r = q.ranks[0]
                lines[:0] = [say("planner.fixing_rank_itself_saves_nothing_it", zh, r=r)]
            if bw_lead:  # "how fast are the links?": the measured bandwidth first, then the verdict
                lines[:0] = [*bw_lead, ""]
            elif q.intent == "slow_link" and not any(
                c.mechanism.value == "slow_link" for c in causes
            ):
                n = len(lines)
                self._link_evidence(by_tool, zh, lines)
                if len(lines) > n:
                    lines.insert(n, "")  # its own paragraph, not the tail of "Causes cited"
            if q.intent == "step_trend":
                for f in [f for o in by_tool.get("step_trend", []) for f in o.findings][:2]:
                    add(f)
            if q.intent == "explain_rank" and by_tool.get("compare_ops"):
                ops = [f for o in by_tool["compare_ops"] for f in o.findings]
                if ops:  # two ranks compared: the operator evidence under the roles
                    lines.append(msg("answer.operator_comparison", "zh" if zh else "en"))
                    for f in ops[:2]:
                        if f.id not in {c.id for c in cited}:
                            cited.append(f)
                        lines.append(f"- {self._summary(f, zh)}{self._source(f, zh)}")
        elif q.intent == "rank_component":
            text, plot_ranks = self._rank_component(q, by_tool)
            lines.append(text)
        elif q.intent == "top_ops":
            text, plot_ranks = self._top_ops(q, by_tool)
            lines.append(text)
        else:
            self._capability(q, d, by_tool, lines, add)
            plot_ranks = sorted({r for f in cited for r in f.ranks})[:8]
            # the causes the cited findings are symptoms of: their typed remedies apply
            ids = {f.id for f in cited}
            causes = [c for c in (d.causes if d else ()) if ids & {f.id for f in c.findings}]
        # tool errors are shown, never dropped
        for o in outputs:
            if o.error and o.name != "search_cases":
                lines.append("")
                if zh:
                    lines.append(f"没有足够的信息（{o.name}）：{error_zh(o.name, o.error)}。")
                elif o.not_answerable:
                    lines.append(f"Not enough signal ({o.name}): {self.quoter.quote(o.error)}")
                else:
                    lines.append(f"The {o.name} tool failed: {self.quoter.quote(o.error)}")
        # input that could not be used is said with every answer
        if d is not None and (d.left_out_zh if zh else d.left_out):
            lines += ["", self.quoter.quote(d.left_out_zh if zh else d.left_out)]
        # cases: the question plus the cited causes' and findings' symptom tags
        lead = lead_tag(causes[0]) if causes else None
        tags = sorted(
            (
                {t for c in causes for t in c.symptom_tags}
                | {t for f in cited for t in f.symptom_tags}
                | ({lead} if lead else set())
            )
            & set(SYMPTOM_TAGS)  # the case library's vocabulary (a cause may carry other tags)
        )
        cases: list[CaseHit] = []
        search = (
            self.call(
                "search_cases",
                {"query": case_query(q, causes), "symptom_tags": tags or None, "k": 10},
                outputs,
            )
            if (cited or causes) and tags
            else None
        )
        if search is not None and not search.error:
            cases = [h for h in pick_cases(search.cases, tags) if consistent_case(h, causes)]
            own = {r.case_id for c in causes for r in c.remedies if r.case_id}
            cases = [
                h
                for h in lead_case_first(cases, search.cases, lead)
                # a case about a culprit the diagnosis does not have contradicts the answer
                # ("no rank is slow" beside a slow-rank case); a cause's own case stays
                if h.id in own or not culprit_contradicted(h.symptom_tags, causes)
            ]
            if q.intent == "memory" and cited and _settings_only(cited):
                # a flagged setting, nothing measured: only the cases about that setting's
                # symptom (not a step-time case that lists fragmentation among its causes)
                cases = [h for h in cases if set(list(h.symptom_tags)[:1]) <= set(tags)]
        elif search is not None and search.error:
            lines.append(
                "（案例库无法读取，本回答不引用案例。）"
                if zh
                else "(No cases are cited: "
                f"{self.quoter.quote(project.lower_first(search.error.removeprefix('not enough signal: ')))})"
            )
        suggestions = build_suggestions(causes, cited, cases, zh, mc2_ok=self._mc2_ok(q, by_tool))
        # a case a suggestion cites is listed with the others (a cause's own case may not be
        # among the retrieved ones)
        cases += case_hits(
            [s.case_id for s in suggestions if s.case_id],
            search.cases if search is not None else (),
            skip={h.id for h in cases},
        )
        if cases:
            lines.append("")
            lang = "zh" if zh else "en"
            lines.append(msg("answer.matching_cases", lang))
            for h in cases:
                title = h.title_zh if zh and h.title_zh else h.title
                lines.append(msg("answer.case_line", lang, case=h.id, title=title))
        if suggestions:
            lines.append("")
            lines.append(msg("answer.suggestions", "zh" if zh else "en"))
            lines += suggestion_lines(suggestions, zh)
        return PlanResult(
            "\n".join(lines),
            findings=cited,
            cases=cases,
            suggestions=suggestions,
            outputs=outputs,
            plots=plots,
            plot_ranks=list(plot_ranks),
            causes=causes,
            diagnosis=d,
        )

    def _mc2_ok(self, q: Query, by_tool: dict[str, list[ToolOutput]]) -> bool:
        """Whether mc2 advice fits this answer (not when the data shows no mc2 opportunity)."""
        if q.intent != "mc2":
            return True
        return any(
            f.kind.value == "mc2_opportunity"
            for o in by_tool.get("communication", [])
            for f in o.findings
        )

    def _bandwidth_lead(
        self, q: Query, by_tool: dict[str, list[ToolOutput]], zh: bool
    ) -> list[str]:
        """Measured bandwidth per transport (and of the links named), when the question asks it.

        From the slow_link tool's link table (communication_matrix.json: one row per link,
        ``bandwidth_gbps`` = transit size / transit time), else its per-rank table
        (communication.json). Empty when the question does not ask for bandwidth or no tool
        result has one.
        """
        if q.kind in ("which", "yes_no", "fix_first") or not asks_bandwidth(q.text):
            return []
        res = next((o.result for o in by_tool.get("slow_link", []) if o.result is not None), None)
        if res is None:
            return []
        src, per_link = res.table, True
        if src.empty or "bandwidth_gbps" not in src:
            src, per_link = res.tables.get("rank_bandwidth", src), False
        lang = "zh" if zh else "en"
        if src.empty or "bandwidth_gbps" not in src:
            if q.transports:  # "what bandwidth does the RDMA link get?" with no RDMA transfer
                return [
                    self.quoter.quote(
                        msg("answer.bandwidth_none", lang, transport="/".join(q.transports))
                    )
                ]
            return []
        key = "answer.bandwidth_link" if per_link else "answer.bandwidth_rank"
        out = [msg("answer.bandwidth_lead", lang)]
        for tr, sub in src.groupby("transport", sort=True):
            bw = sub["bandwidth_gbps"].astype(float)
            low = sub.iloc[int(bw.to_numpy().argmin())]
            mb = (
                float(pd.to_numeric(sub["transit_size_mb"], errors="coerce").sum())
                if "transit_size_mb" in sub
                else math.nan
            )
            where = (
                f"{int(low['src_rank'])}→{int(low['dst_rank'])}"
                if per_link
                else str(int(low["rank"]))
            )
            out.append(
                "- "
                + msg(
                    key,
                    lang,
                    transport=tr,
                    n=len(sub),
                    median=f"{bw.median():.1f}",
                    low=f"{bw.min():.1f}",
                    high=f"{bw.max():.1f}",
                    slowest=where,
                    mb=f"{mb:,.3g}" if math.isfinite(mb) else "?",
                    # under 1 MB in all, transfers measure latency, not bandwidth
                    small=msg("answer.bandwidth_small", lang)
                    if math.isfinite(mb) and mb < SMALL_TRANSFER_MB
                    else "",
                )
            )
        if per_link and q.links:
            for a, b in q.links:
                row = src[(src["src_rank"] == a) & (src["dst_rank"] == b)]
                if not row.empty:
                    r = row.iloc[0]
                    out.append(
                        "- "
                        + msg(
                            "answer.bandwidth_named",
                            lang,
                            link=f"{a}→{b}",
                            transport=r["transport"],
                            gbps=f"{float(r['bandwidth_gbps']):.1f}",
                            ratio=f"{float(r['ratio']):.2f}",
                        )
                    )
        return [self.quoter.quote(x) for x in out]

    def _link_evidence(
        self, by_tool: dict[str, list[ToolOutput]], zh: bool, lines: list[str]
    ) -> None:
        """The slow_link tool's "no slow link" note (with the link bandwidths) as evidence."""
        for o in by_tool.get("slow_link", []):
            if o.result is None:
                continue
            for n in o.result.notes:
                if n.lower().startswith("no slow link"):
                    if zh and not o.result.metrics.get("compared_links_count", 1.0):
                        lines.append(
                            "链路分析（slow_link）：可比较的链路太少（每种传输类型至少需要 3 条"
                            "传输量相近的链路），无法判断是否有慢链路。"
                        )
                    elif zh:
                        lines.append("链路分析（slow_link）：没有链路的带宽明显低于同类链路。")
                    dead = int(o.result.metrics.get("zero_bandwidth_links_count", 0.0))
                    if zh and dead:
                        lines[-1] += (
                            f"另有 {dead} 条链路带宽为 0.0 GB/s（未参与判断，可能几乎没有流量或已故障）。"
                        )
                    if not zh:
                        lines.append(
                            "Link evidence: "
                            + self.quoter.quote(n.split(":", 1)[-1].strip().rstrip("."))
                            + "."
                        )
                    return

    def _capability(
        self,
        q: Query,
        d: Diagnosis | None,
        by_tool: dict[str, list[ToolOutput]],
        lines: list[str],
        add: Callable[[Finding], None],
    ) -> None:
        """Tool capabilities (operators, baseline diff, mc2, timeouts, dispatch, memory, data)."""
        zh = q.language == "zh"
        main = {
            "compare_ops": ("compare_ops",),
            "compare_profiles": ("compare_profiles",),
            "mc2": ("communication",),
            "hccl_timeout": ("env_check",),
            "pipeline_bubble": ("cluster_breakdown",),
            "host_dispatch": ("host_dispatch",),
            "memory": ("memory", "env_check"),
            "env_check": ("env_check",),
            "data_quality": ("data_quality",),
        }.get(q.intent, tuple(by_tool))
        found = [f for name in main for o in by_tool.get(name, []) for f in o.findings]
        if q.intent == "pipeline_bubble":
            found = [f for f in found if "pipeline_bubble" in f.symptom_tags]
        if q.intent == "memory":
            found = [
                f
                for f in found
                if {"memory_fragmentation", "profiler_overhead", "memory_growth"}
                & set(f.symptom_tags)
            ]
            mem = next((o for o in by_tool.get("memory", []) if o.result is not None), None)
            if mem is not None and mem.result is not None:
                m = mem.result.metrics
                lines.append(
                    say(
                        "planner.memory_measured"
                        if "allocated_mb_peak" in m
                        else "planner.memory_measured_reserved",
                        zh,
                        n=fmt_num(m.get("ranks_read", 0.0)),
                        alloc=fmt_num(m.get("allocated_mb_peak", math.nan)),
                        reserved=fmt_num(m.get("reserved_mb_peak", math.nan)),
                        src=quote_source(self.session.profile.cite("memory"), zh),
                    )
                )
                if "growth_mb_per_step" in m and not any(
                    "memory_growth" in f.symptom_tags for f in found
                ):
                    lines.append(
                        say(
                            "planner.memory_flat",
                            zh,
                            growth=fmt_num(m["growth_mb_per_step"]),
                        )
                    )
            else:
                lines.append(say("planner.not_enough_signal_to_answer_the", zh))
            top = next((c for c in d.causes if c.culprit.kind != "none"), None) if d else None
            if top is not None and "memory_growth" in top.symptom_tags:
                lines.append(
                    say(
                        "planner.memory_is_the_cause",
                        zh,
                        text=project.summary(top, zh).rstrip("。."),
                    )
                    if zh
                    else say(
                        "planner.memory_is_the_cause",
                        zh,
                        text=project.lower_first(project.summary(top, zh)).rstrip("."),
                    )
                )
            elif top is not None and top.mechanism.value not in ("no_culprit", "not_enough_signal"):
                # the step time is accounted for without memory: say where it goes
                lines.append(
                    f"这份数据里步时间的损失在别处——{project.summary(top, True)}。"
                    if zh
                    else "The step time this profile loses goes elsewhere — "
                    f"{project.lower_first(project.summary(top, False))}."
                )
        if q.intent == "hccl_timeout":
            risk = [
                f
                for f in found
                if {"hccl_timeout_risk", "first_collective_late"} & set(f.symptom_tags)
            ]
            if not risk:
                lines.append(say("planner.the_environment_check_found_no_hccl", zh))
            found = risk
        if q.intent == "mc2":
            mc2 = [f for f in found if f.kind.value == "mc2_opportunity"]
            found = mc2
            if not mc2 and d is not None and not d.kernel_data:
                # a MatMul next to a collective is seen in the kernels: none, no verdict
                lines.append(say("planner.not_enough_signal_whether_mc_would", zh))
            elif not mc2:
                lines.append(say("planner.no_this_data_shows_no_matmul", zh))
            else:
                lines.append(say("planner.yes_mc_looks_worth_trying", zh))
        if q.intent == "data_quality" and d is not None:
            ex = project.excluded_line(d, zh)
            if ex:
                lines.append(ex)
        if found:
            if q.intent == "env_check" and q.kind == "yes_no":
                # "could the env vars I added matter?": a verdict before the flags
                costly = any(f.severity.value in ("high", "medium") for f in found)
                if costly:
                    lines.append(say("planner.yes_they_can_matter_the_environment", zh))
                else:
                    lines.append(say("planner.probably_not_much_the_environment_check", zh))
            elif q.intent == "memory" and _settings_only(found):
                # a setting the environment check flags, not a measured memory problem
                lines.append(say("planner.memory_setting_only", zh))
            elif q.intent not in ("mc2",):
                lines.append(_lead(q.intent, zh))
            for f in found[:3]:
                add(f)
        elif q.intent not in ("mc2", "hccl_timeout") and not (
            q.intent == "data_quality" and d is not None and d.excluded_steps
        ):
            lines.append(self._no_signal(q, d))

    def _no_signal(self, q: Query, d: Diagnosis | None) -> str:
        zh = q.language == "zh"
        need = _needed_data(q.intent, self.session)
        if need:
            return (
                f"没有足够的信息得出结论。需要的数据：{need[1]}。"
                if zh
                else f"Not enough signal to decide. The data that would decide it: {need[0]}."
            )
        if q.intent == "pipeline_bubble":
            # ranks named for their Bubble, which a cause of theirs (not the schedule) explains
            own = next(
                (
                    c
                    for c in (d.causes if d is not None and q.ranks else ())
                    if set(q.ranks) & set(c.culprit.ranks)
                ),
                None,
            )
            if own is not None:
                en_label, zh_label = ranks_label(sorted(set(q.ranks) & set(own.culprit.ranks)))
                return say(
                    "planner.their_bubble_is_not_the_schedule",
                    zh,
                    ranks=zh_label if zh else en_label,
                    summary=project.summary(own, zh),
                ).strip()
            head = project.headline(d, zh) if d is not None else ""
            return (say("planner.no_pipeline_bubble_or_stage_imbalance", zh, head=head)).strip()
        if q.intent == "data_quality":
            return say("planner.the_data_looks_complete_the_data", zh)
        if d is not None and d.causes:
            return say(
                "planner.this_analysis_found_nothing_for_this", zh, headline=project.headline(d, zh)
            )
        return say("planner.nothing_stands_out_the_analysis_found", zh)

    def _rank_amount_lead(self, q: Query, by_tool: dict[str, list[ToolOutput]], zh: bool) -> str:
        """One rank's time in the step-trace component a "how much" question names, with its share.

        From the ``cluster_breakdown`` per_rank table (mean per step; step_trace_time.csv /
        StepTraceTime), with the median over all ranks for scale. '' without that row.
        """
        col = _rank_amount_column(q)
        res = next((o.result for o in by_tool.get("cluster_breakdown", []) if o.result), None)
        pr = res.tables.get("per_rank") if res is not None else None
        if not col or pr is None or pr.empty or col not in pr.columns:
            return ""
        rank = q.ranks[0]
        row = pr[pr["rank"] == rank]
        if row.empty:
            return ""
        v, step = float(row[col].iloc[0]), float(row["step_us"].iloc[0])
        med = float(pr[col].median())
        label, label_zh = _COMPONENT_LABELS[col]
        src = quote_source(self.session.profile.cite("step_trace"), zh)
        n = int(res.metrics.get("steps_count", 0)) if res is not None else 0
        share = f"{v / step:.1%}" if step > 0 else ""
        fv = fmt_num
        if zh:
            return (
                f"{rank}号卡的{label_zh}为每步 {fv(v, 'us')}"
                + (f"（占其步长 {share}）" if share else "")
                + f"，{n} 步的每步平均；{len(pr)} 张卡的中位数为 {fv(med, 'us')}（来源 {src}）。"
            )
        return (
            f"Rank {rank}'s {label} is {fv(v, 'us')} per step"
            + (f" ({share} of its step)" if share else "")
            + f", mean over {n} step{'s' if n != 1 else ''}; the median over the {len(pr)} ranks "
            f"is {fv(med, 'us')} (from {src})."
        )

    def _rank_component(
        self, q: Query, by_tool: dict[str, list[ToolOutput]]
    ) -> tuple[str, list[int]]:
        """Answer "which rank has the most/least <component>" from cluster_breakdown per-rank means."""
        zh = q.language == "zh"
        col = q.component or "free_us"
        label, label_zh = _COMPONENT_LABELS.get(col, (col, col))
        res = next((o.result for o in by_tool.get("cluster_breakdown", []) if o.result), None)
        pr = res.tables.get("per_rank") if res is not None else None
        if pr is None or pr.empty or col not in pr.columns:
            return self._no_signal(q, self._last_diagnosis), []
        v = (
            pr.set_index("rank")[col]
            .astype("float64")
            .dropna()
            .sort_values(ascending=q.extreme == "min")
        )
        if v.empty:
            return self._no_signal(q, self._last_diagnosis), []
        src = quote_source(self.session.profile.cite("step_trace"), zh)
        n_steps = int(res.metrics.get("steps_count", 0)) if res is not None else 0
        steps_en = f"mean per step over {n_steps} step{'s' if n_steps != 1 else ''}"
        steps_zh = f"{n_steps} 步的每步平均"
        if q.steps:
            steps_en, steps_zh = f"step {q.steps[0]}", f"step {q.steps[0]}"
        top = int(v.index[0])
        if float(v.max()) <= 0:
            return (
                say(
                    "planner.no_rank_has_any_it_is", zh, label=(label_zh if zh else label), src=src
                ),
                [],
            )
        word = ("最少", "least") if q.extreme == "min" else ("最多", "most")
        others = [(int(cast(int, r)), float(x)) for r, x in v.iloc[1:3].items()]
        last_r, last_v = int(v.index[-1]), float(v.iloc[-1])
        med = float(v.median())
        fv = fmt_num
        if zh:
            nxt = "、".join(f"rank {r} {fv(x, 'us')}" for r, x in others)
            text = (
                f"{top}号卡的{label_zh}{word[0]}：{fv(float(v.iloc[0]), 'us')}"
                f"（{steps_zh}，来源 {src}，cluster_breakdown 的 per_rank 表）。"
                + (f"其次：{nxt}。" if nxt else "")
                + f"{len(v)} 张卡的中位数为 {fv(med, 'us')}；另一端是 {last_r}号卡，{fv(last_v, 'us')}。"
            )
        else:
            nxt = ", ".join(f"rank {r} {fv(x, 'us')}" for r, x in others)
            text = (
                f"Rank {top} has the {word[1]} {label}: {fv(float(v.iloc[0]), 'us')} "
                f"({steps_en}; from {src}, cluster_breakdown per_rank table)."
                + (f" Next: {nxt}." if nxt else "")
                + f" Median over the {len(v)} ranks: {fv(med, 'us')}; at the other end, rank "
                f"{last_r} with {fv(last_v, 'us')}."
            )
        return text, [top, *(r for r, _ in others), last_r]

    def _top_ops(self, q: Query, by_tool: dict[str, list[ToolOutput]]) -> tuple[str, list[int]]:
        """Answer "which compute operator type takes the most time" from compare_ops by_type."""
        zh = q.language == "zh"
        out = next((o for o in by_tool.get("compare_ops", []) if o.result), None)
        if out is None or out.result is None:
            return self._no_signal(q, self._last_diagnosis), []
        res = out.result
        if "ops_by_rank" in res.tables:
            text, ranks = self._named_ops_time(q, res)
            d = self._last_diagnosis
            if q.op_category == "compute" and d is not None and d.causes:
                # the counts asked for, then what they mean: the top cause
                lang = "zh" if zh else "en"
                text += ("" if zh else " ") + msg(
                    "answer.diagnosis_says", lang, headline=project.headline(d, zh)
                )
            return text, ranks
        bt = res.tables.get("by_type")
        rank = int(res.metrics.get("rank_b", q.ranks[0] if q.ranks else 0))
        if bt is None or bt.empty:
            return self._no_signal(q, self._last_diagnosis), []
        core = bt["accelerator_core"].astype("string").fillna("").str.upper()
        bt = bt[~core.isin(["HCCL", "COMMUNICATION", "DSA_SQE", "SDMA"])]
        bt = bt[bt["total_us_b"] > 0].sort_values("total_us_b", ascending=False)
        if bt.empty:
            return self._no_signal(q, self._last_diagnosis), []
        src = quote_source(self.session.profile.cite("kernels"), zh)
        n_steps = int(res.metrics.get("steps_compared", 0))
        first = bt.iloc[0]
        name = self.quoter.quote(str(first["op_type"]))
        rest = [
            (self.quoter.quote(str(r["op_type"])), float(r["total_us_b"]), int(r["count_b"]))
            for _, r in bt.iloc[1:4].iterrows()
        ]
        total, count = float(first["total_us_b"]), int(first["count_b"])
        share = float(first.get("kernel_time_share_b", math.nan))
        share_en = f", {share * 100:.1f}% of the rank's kernel time" if math.isfinite(share) else ""
        share_zh = f"，占该卡算子总耗时的 {share * 100:.1f}%" if math.isfinite(share) else ""
        if zh:
            nxt = "、".join(f"{n} {fmt_num(t, 'us')}（{c} 次）" for n, t, c in rest)
            return (
                f"{rank}号卡上耗时最多的计算算子类型是 {name}：{n_steps} 步共 "
                f"{fmt_num(total, 'us')}{share_zh}（{count} 次调用，来源 {src}，按算子类型汇总，"
                "不含通信任务）。" + (f"其次：{nxt}。" if nxt else ""),
                [rank],
            )
        nxt = ", ".join(f"{n} {fmt_num(t, 'us')} ({c} calls)" for n, t, c in rest)
        return (
            f"On rank {rank}, the compute operator type with the most device time is {name}: "
            f"{fmt_num(total, 'us')} over {n_steps} step{'s' if n_steps != 1 else ''}{share_en} "
            f"({count} calls; from {src}, compare_ops by_type table, communication tasks "
            "excluded)." + (f" Next: {nxt}." if nxt else ""),
            [rank],
        )

    def _named_ops_time(self, q: Query, res: AnalyzerResult) -> tuple[str, list[int]]:
        """Answer "how long do <these operators> take per step on rank N, and on the others?".

        From compare_ops' ``ops_by_rank`` table: the named operators' device time and launches
        per step on the rank asked (rank B) against the median of the other ranks read.
        """
        zh = q.language == "zh"
        m = res.metrics
        rank = int(m.get("rank_b", q.ranks[0] if q.ranks else 0))
        types = [self.quoter.quote(t) for t in res.tables["ops_by_rank"].attrs.get("op_types", [])]
        what = q.op_category or ", ".join(q.ops)
        src = quote_source(self.session.profile.cite("kernels"), zh)
        if not types or "ops_b_us" not in m:
            return (
                say("planner.no_operator_on_rank_matches_in", zh, rank=rank, what=what, src=src),
                [rank],
            )
        label_zh = (
            f"{OP_CATEGORY_ZH[q.op_category]}算子"
            if q.op_category in OP_CATEGORY_ZH
            else f" {'、'.join(types)} "
        )
        label = f"{q.op_category or ', '.join(types)} operators"
        listed = "、".join(types[:5]) if zh else ", ".join(types[:5])
        if q.op_category == "compute":  # every compute kernel: its types are not a list to read
            listed = ""
        mine, n = fmt_num(m["ops_b_us"], "us"), fmt_num(m["ops_b_count_per_step"])
        # their share of the rank's step (step_trace, mean per step)
        share = m.get("ops_b_step_share")
        share_zh = f"，占该卡步长的 {share * 100:.1f}%" if share is not None else ""
        share_en = f", {share * 100:.1f}% of its step" if share is not None else ""
        if zh:
            text = (
                f"{rank}号卡的{label_zh}每步共 {mine}{share_zh}（每步 {n} 次调用".replace("  ", " ")
                + (f"；包括 {listed}" if listed else "")
                + "）"
            )
        else:
            text = (
                f"On rank {rank}, the {label} take {mine} of device time per step{share_en} ({n} "
                "launches per step" + (f"; {listed}" if listed else "") + ")"
            )
        if "ops_others_median_us" in m:
            peers = fmt_num(m["ops_others_median_us"], "us")
            pn = fmt_num(m["ops_others_median_count_per_step"])
            k = int(m["ops_ranks_others"])
            ratio = m.get("ops_times_others_median", 1.0)
            if zh:
                text += (
                    f"；其他 {k} 张卡的中位数为每步 {peers}（{pn} 次）"
                    if k > 1
                    else f"；另一张卡每步 {peers}（{pn} 次）"
                )
                text += (
                    f"，{rank}号卡是其 {ratio:.1f} 倍" if abs(ratio - 1) >= 0.1 else "，相差不大"
                )
            else:
                text += (
                    f"; the median of the other {k} ranks is {peers} per step ({pn} launches)"
                    if k > 1
                    else f"; the other rank takes {peers} per step ({pn} launches)"
                )
                text += (
                    f", so rank {rank} takes {ratio:.1f}x theirs"
                    if abs(ratio - 1) >= 0.1
                    else ", about the same"
                )
        if (
            not q.ranks
            and not q.nodes
            and "ops_others_median_us" in m
            and int(m["ops_ranks_others"]) > 1
            and abs(m.get("ops_times_others_median", 1.0) - 1) < 0.1
        ):
            # no rank asked and none differs: the job's figure (every rank alike) first
            k = int(m["ops_ranks_others"])
            peers = fmt_num(m["ops_others_median_us"], "us")
            pn = fmt_num(m["ops_others_median_count_per_step"])
            if zh:
                text = (
                    f"每张卡上{label_zh}每步约 {peers}（每步 {pn} 次调用"
                    + (f"；包括 {listed}" if listed else "")
                    + f"），各卡相差不大：{rank}号卡每步 {mine}{share_zh}，其他 {k} 张卡的中位数为 {peers}"
                ).replace("  ", " ")
            else:
                text = (
                    f"On every rank, the {label} take about {peers} of device time per step "
                    f"({pn} launches per step" + (f"; {listed}" if listed else "") + "), about "
                    f"the same on each: rank {rank} takes {mine}{share_en}, the median of the "
                    f"other {k} ranks {peers}"
                )
        if abs(m.get("ops_times_others_median", 1.0) - 1) < 0.1:
            # (per launch over every rank read: only when the ranks run them alike; a rank that
            # differs is stated against the others above)
            text += self._per_launch(res, zh)
        # a second rank (or node) named: its own figures from the same table
        second = [r for r in [*q.ranks[1:2], *self._node_ranks(q)[1:2]] if r != rank][:1]
        t = res.tables["ops_by_rank"]
        if (
            second
            and int(m.get("ops_ranks_others", 0)) > 1  # (one other rank: already said)
            and "rank" in t.columns
            and second[0] in set(t["rank"].astype(int))
        ):
            row = t[t["rank"].astype(int) == second[0]].iloc[0]
            r2, n2 = second[0], fmt_num(float(row["count_per_step"]))
            us2 = fmt_num(float(row["time_per_step_us"]), "us")
            text += say("planner.rank_takes_per_step_launches", zh, r2=r2, us2=us2, n2=n2)
        text += say("planner.from_compare_ops_ops_by_rank", zh, src=src)
        return text, [rank]

    def _per_launch(self, res: AnalyzerResult, zh: bool) -> str:
        """Each named operator type's duration per launch and launches per step that runs it.

        From compare_ops' ``ops_by_type`` table (medians over the ranks read); ``""`` without it.
        For an operator that runs in only some steps, the steps that run it are counted: its
        per-step time above averages over every step.
        """
        t = res.tables.get("ops_by_type")
        if t is None or t.empty:
            return ""
        parts = []
        for _, r in t.head(3).iterrows():
            name = self.quoter.quote(str(r["op_type"]))
            each = fmt_num(float(r["median_us"]), "us")
            n = fmt_num(float(r["launches_per_step"]))
            some = float(r["steps_with_op"]) < float(r["steps"])
            steps = fmt_num(float(r["steps_with_op"]))
            of = fmt_num(float(r["steps"]))
            key = "planner.per_launch_some_steps" if some else "planner.per_launch"
            parts.append(say(key, zh, name=name, each=each, n=n, steps=steps, of=of))
        sep = "；" if zh else "; "
        return say("planner.per_launch_lead", zh, items=sep.join(parts))

    def _node_ranks(self, q: Query) -> list[int]:
        """The first rank of each node the question names, in its order (nodes from metadata)."""
        if not q.nodes:
            return []
        from advisor_chat.diagnosis.attribution import nodes

        groups = nodes(self.session.profile)
        base = 1 if q.node_ordinal else 0
        return [groups[i - base][0] for i in q.nodes if 0 <= i - base < len(groups)]

    def _source(self, f: Finding, zh: bool = False) -> str:
        srcs = sorted({e.source for e in f.evidence if e.source})
        if not srcs:
            return ""
        cited = (quote_source(s, zh) for s in srcs[:2])
        return ("（" + "，".join(cited) + "）") if zh else (" (" + ", ".join(cited) + ")")


#: Collective types a question can name, as the start of ``comm_ops.op_type`` (letters only).
_COLLECTIVE_WORDS = {
    "allreduce": re.compile(r"all[-_ ]?reduce", re.I),
    "allgather": re.compile(r"all[-_ ]?gather", re.I),
    "reducescatter": re.compile(r"reduce[-_ ]?scatter", re.I),
    "alltoall": re.compile(r"all[-_ ]?to[-_ ]?all", re.I),
    "broadcast": re.compile(r"broadcast|广播", re.I),
}
#: A question that names a host call: a framework operator, a CANN API, a Python call.
_HOST_CALL_Q = re.compile(
    r"aten::\w+|\baclnn\w+|\bacl(?:rt)?[A-Z]\w+|\bHccl[A-Z]\w+|torch(?:_npu)?\.[\w.]+|"
    r"[A-Za-z_][\w.]*\(\)|\.item\b|synchroni[sz]e",
    re.I,
)


def _names_host_call(text: str, name: str) -> bool:
    """Whether ``text`` (lower case) names the host call ``name`` (``aten::x`` = ``aclnnX``)."""
    n = name.lower().strip()
    if len(n) < 4:
        return False
    keys = {n}
    if n.startswith("aclnn"):
        keys.add("aten::" + n[5:])
    elif n.startswith("aten::"):
        keys.add("aclnn" + n[6:])
    base = re.split(r"::|\.", n)[-1]
    if len(base) >= 4:  # "item()" / ".item" name aten::item
        keys |= {base + "()", "." + base}
    return any(re.search(r"(?<![\w:])" + re.escape(k) + r"(?![\w])", text) for k in keys)


#: A question that asks a measured quantity.
_QUANTITY_Q = re.compile(
    r"how (?:long|much|many|big|large)|\bMB\b|GB/s|bandwidth|多久|多长|多少|多大|几次|带宽", re.I
)


def quote_source(path: str, zh: bool = False) -> str:
    """A source citation in backticks (file name only for long absolute paths).

    With ``zh`` the file counts of :meth:`~advisor_chat.ingest.Profile.cite` are said in Chinese
    ("(16 files)" -> "（共 16 个文件）"); file names stay as they are.
    """
    s = str(path).replace("`", "'")
    if len(s) > 60 and "/" in s and "(" not in s.rsplit("/", 1)[-1]:
        s = "…/" + s.rsplit("/", 1)[-1]
    if zh:
        from advisor_chat.ingest.profile import cite_zh

        name, note = cite_zh(s)
        return f"`{name}`{note}"
    return f"`{s}`"


#: A question that puts a change forward as the cause ("could that be it?", "related?", "有关系吗").
_SUSPECT_Q = re.compile(
    r"\b(related|could (that|this|it) be|is that why|cause[sd]? (this|it)|be (it|the reason))\b"
    r"|\bcould\b.{0,40}\bbe\b|\b(could|does|would|can|might)\b.{0,40}\b(matter|affect|impact|hurt)"
    r"|\b(that'?s|this is|it'?s) (what|why)\b.{0,40}\b(right|correct|isn'?t it)\b"
    r"|有关系|有关吗|会是这个|是不是因为|是这个原因|导致的|会影响|有影响|影响大吗|对吧|对不对",
    re.I,
)
#: A question that asks whether to make a change ("should I switch...?"): judged elsewhere.
#: "Where does the time go?": the step's shares first.
_WHERE_TIME = re.compile(
    r"\bwhere (does|did|do) (the|my|our|all the) (step )?time (go|goes|went)\b"
    r"|\bwhere is (the|my|our) (step )?time (going|spent)\b|\bbreak ?down of the step\b"
    r"|时间都?(花|耗|用|去)(在|到)?(了)?(哪|什么地方)|时间去哪",
    re.I,
)
#: "If both were fixed, what would we save?": the causes fixed together.
_FIX_TOGETHER = re.compile(
    r"\b(both|all( of them| three| two)?|them all)\b.{0,25}\b(fixed|solved|resolved|gone|addressed)\b"
    r"|\bfix(ing|ed)? (both|them all|all of them|everything)\b"
    r"|(两个|两者|二者|全部|所有)(问题|原因|故障)?都?(修好|解决|修复)|都(修好|解决|修复)(了|后)",
    re.I,
)
#: "The top problem": the cause a question means when it names none ("fix the biggest one").
_TOP_PROBLEM = re.compile(
    r"\b(top|biggest|main|largest|first|worst|slowest)\b|最大|首要|主要|最慢|第一个|最严重", re.I
)
#: "Is the cause I name all of it?": the whole story, done after fixing it, the only cause.
_WHOLE_STORY = re.compile(
    r"\b(whole story|full story|are we done|we'?re done|is that (all|it)\b|that'?s (all|it)\b"
    r"|the only (cause|problem|issue|reason)|all (of )?the (problem|cause)|fix(es)? everything"
    r"|solves? everything|be (all )?(fine|good|done) (after|then|once))"
    r"|就好了|就行了|就够了|就没问题了|就解决了|全部原因|唯一(的)?原因|只有这一个(原因|问题)"
    r"|只有一个(原因|问题)",
    re.I,
)
#: A question that proposes replacing hardware ("swap rank 3's NPU?", "把卡换掉").
_SWAP_Q = re.compile(r"\b(swap|replace|change|rma)\b|换掉|更换|替换|返修|换(一张|个)?卡", re.I)
_ACTION_Q = re.compile(r"\bshould (i|we)\b|要不要|该不该|需不需要|是否应该", re.I)


def _lead(intent: str, zh: bool) -> str:
    en, zhs = {
        "slow_link": ("What the link analysis found:", "链路分析的发现："),
        "compare_ops": (
            "These operators are slower than on the rank compared with:",
            "这些算子比对比的卡慢：",
        ),
        "env_check": ("The environment check flags:", "环境检查发现："),
        "compare_profiles": (
            "What changed compared with the baseline run:",
            "与基线相比的变化：",
        ),
        "hccl_timeout": ("HCCL timeout and wait findings:", "HCCL 超时与等待相关的发现："),
        "communication": ("What the communication analysis found:", "通信分析的发现："),
        "pipeline_bubble": ("Pipeline bubbles:", "流水线气泡（Bubble）："),
        "host_dispatch": ("Host dispatch (launch delays):", "主机下发（下发时延）："),
        "memory": ("Memory:", "内存："),
        "step_trend": ("Step time over the run:", "每步耗时趋势："),
        "data_quality": ("The data has these gaps:", "数据存在这些缺口："),
        "summarize": ("The main problems, most important first:", "主要问题（按重要性排序）："),
    }.get(intent, ("Findings:", "发现："))
    return zhs if zh else en


_COMM_MISSING = (
    "communication data (communication.json / communication_matrix.json)",
    "通信数据（communication.json / communication_matrix.json）",
    "communication data: collect with profiler Level1 (or higher) so that communication.json and communication_matrix.json are written",
    "通信数据：使用 Level1（或更高）级别采集，生成 communication.json 和 communication_matrix.json",
)


#: "How many" (a count asked for).
_HOW_MANY = re.compile(r"\bhow many\b|多少(?:个|次)|几(?:个|次)", re.IGNORECASE)

#: A question about operators it does not name: the ones the answer is about.
_THOSE_OPS_Q = re.compile(
    r"\b(?:those|these|that|this|the same)\s+(?:ops?|operators?|kernels?)\b"
    r"|\bhow many of (?:those|these|them)\b"
    r"|(?:那些|这些|那个|这个|该)(?:算子|kernel|op)",
    re.IGNORECASE,
)


def _missing_data(intent: str, session: ToolSession) -> tuple[str, str, str, str] | None:
    """(what is missing en/zh, what would decide en/zh) when the profile cannot answer ``intent``."""
    p = session.profile
    if intent in ("slow_link", "which_slow_rank", "compare_ops") and len(session.ranks) == 1:
        return (
            "second rank to compare with: it holds data for one rank only",
            "可对比的其他卡：只有一张卡的数据",
            "profiling data of all ranks of the job (each rank's *_ascend_pt folder)",
            "作业所有卡的 profiling 数据（每张卡的 *_ascend_pt 目录）",
        )
    if intent == "slow_link" and not (p.has("comm_matrix") or p.has("comm_bandwidth")):
        return _COMM_MISSING
    if intent == "host_dispatch" and not p.has("host_dispatch"):
        return (
            "host launch data (HostToDevice flows)",
            "主机下发数据（HostToDevice 连线）",
            "trace_view.json with HostToDevice flows, or ascend_pytorch_profiler_{rank}.db",
            "包含 HostToDevice 连线的 trace_view.json，或 ascend_pytorch_profiler_{rank}.db",
        )
    if intent == "memory" and not p.has("memory"):
        return (
            "memory data (memory_record.csv / operator_memory.csv)",
            "内存数据（memory_record.csv / operator_memory.csv）",
            "memory data: collect with profile_memory=True so that memory_record.csv and operator_memory.csv are written",
            "显存数据：采集时设置 profile_memory=True，生成 memory_record.csv 和 operator_memory.csv",
        )
    if intent in ("mc2", "communication") and not p.has("comm_ops"):
        return _COMM_MISSING
    return None


def _needed_data(intent: str, session: ToolSession) -> tuple[str, str] | None:
    p = session.profile
    if intent in ("slow_link", "mc2", "hccl_timeout", "communication") and not p.has("comm_ops"):
        return (
            "communication data (collect with profiler Level1 to record communication)",
            "通信数据（用 Level1 级别采集以记录通信）",
        )
    if intent == "explain_rank" and not p.has("host_dispatch"):
        return (
            "host-to-device dispatch flows (trace_view.json or the profiler DB) to see launch delays",
            "主机到设备的下发连线（trace_view.json 或 profiler DB）以查看下发时延",
        )
    if intent in ("compare_ops",) and not p.has("kernels"):
        return ("kernel_details.csv (operator details)", "kernel_details.csv（算子明细）")
    if intent == "step_trend" and len(session.steps) < 3:
        return ("more profiled steps", "更多采集的步")
    return None


STRONG_MATCH = 3
"""Matched symptom tags that make a retrieved case worth citing beyond the best two."""


def _all_tags_matched(hit: CaseHit) -> bool:
    """Whether every symptom tag of the case (at least two) was measured."""
    return len(hit.symptom_tags) >= 2 and set(hit.symptom_tags) <= set(hit.matched_tags)


def pick_cases(hits: Sequence[CaseHit], tags: Sequence[str], limit: int = 4) -> list[CaseHit]:
    """The cases to cite: the ones matching most of the measured symptoms.

    Hits are re-ranked by the number of the findings' symptom tags they match (then by the
    retrieval score). The best two are cited; further ones (up to ``limit``) when they match as
    many tags as the best one or at least :data:`STRONG_MATCH` measured symptoms: a case that
    matches that many measured symptoms is evidence whatever the order of its retrieval score.
    Without tags (question text only), the retrieval order is kept.
    """
    if not tags:
        return [h for h in hits if h.score > 0][:2]
    # A case whose every symptom tag was measured counts as fully matched even with few tags
    # (e.g. hccl-timeouts: first_collective_late + hccl_timeout_risk).
    ranked = sorted(
        (h for h in hits if h.matched_tags),
        key=lambda h: (
            -max(len(h.matched_tags), STRONG_MATCH if _all_tags_matched(h) else 0),
            -h.score,
        ),
    )
    if not ranked:
        return []
    best = len(ranked[0].matched_tags)
    out = ranked[:2]
    extra = [h for h in ranked[2:] if len(h.matched_tags) >= min(best, STRONG_MATCH)]
    # weak matches (fewer than STRONG_MATCH tags): at most one more, tied with the best
    return out + extra[: max(limit - 2, 0) if best >= STRONG_MATCH else 1]


_ZH_REMEDY = re.compile(r"(?:处理|优化手段|优化|解决|修复|做法|建议)[:：]\s*(.+)")
_ZH_ACTION = re.compile(r"建议|应|开启|关闭|使用|改用|设置|export|--")


@functools.lru_cache(maxsize=128)
def case_remedy_zh(case_id: str) -> str | None:
    """The remedy sentence of a case's Chinese summary (``## 中文摘要``), commands kept as written.

    Returns ``None`` when the case cannot be read or its summary names no remedy.
    """
    try:
        from advisor_chat.kb import get_case  # type: ignore[attr-defined]

        summary = get_case(case_id).sections.get("中文摘要", "")
    except Exception:  # a bad case file: the English remedies are still shown
        return None
    flat = re.sub(r"\s*\n\s*", "", summary).strip()
    sentences = [x.strip() for x in re.split(r"(?<=。)", flat) if x.strip()]
    for sent in sentences:
        m = _ZH_REMEDY.search(sent)
        if m:
            return m.group(1).strip().rstrip("。")
    for sent in sentences[1:] + sentences[:1]:
        if _ZH_ACTION.search(sent):
            return sent.rstrip("。")
    return None


#: Something to type in a remedy: a command-line flag, an assignment (``X=1``, ``a=True``), a
#: call (``gc.freeze()``) or a backticked command.
#: A case remedy that is code alone: one call with its arguments (``DataLoader(num_workers=8)``).
_CODE_ONLY = re.compile(r"^[A-Za-z_][\w.]*\([^()]*(?:\([^()]*\)[^()]*)*\)$")
_CONCRETE = re.compile(r"(?<![\w-])--[a-z][\w-]+|\b\w+=\S|\w\(\)|`[^`]+`")


def _command_of(remedy: str) -> str | None:
    """The shell command of a remedy (``export X=1  # comment`` -> ``export X=1``), if any.

    The English prose around a command is cut ("npu-smi info on every node: board model, …" ->
    ``npu-smi info``; "… -i CARD_ID to check link state" -> "… -i CARD_ID"); two commands joined
    by "and" keep both (``a`；`b``), so a Chinese answer quotes commands, not English sentences.
    """
    cmd = remedy.split("  #", 1)[0].split(" # ", 1)[0].strip()
    if not re.match(r"^(export|unset|python|torchrun|npu-smi|hccn_tool|msprof)\b", cmd):
        return None
    cmd = re.split(r":\s|\s+(?:to|for|on|in|so|which|that|then|before|after|when|while)\s+", cmd)[0]
    parts = [x.strip() for x in re.split(r"\s+and\s+", cmd) if x.strip()]
    keep = [
        x
        for x in parts
        if re.match(r"^(export|unset|python|torchrun|npu-smi|hccn_tool|msprof)\b", x)
    ]
    return "`；`".join(keep) if keep else None


def _best_finding(cited: Sequence[Finding], tags: Sequence[str]) -> Finding | None:
    best, score = None, 0
    for f in cited:
        s = len(set(f.symptom_tags) & set(tags))
        if s > score:
            best, score = f, s
    return best


def _settings_only(findings: Sequence[Finding]) -> bool:
    """Every finding is the environment check's (a setting flagged, nothing measured)."""
    return all(f.id.startswith("env_check.") for f in findings)


def suggestion_lines(suggestions: Sequence[Suggestion], zh: bool) -> list[str]:
    """The answer's suggestion bullets (``- `` lines), one per suggestion.

    An action after another of the same cause with the same gain says that gain is the same one,
    not a second saving to add (trial: two fixes of one pipeline stage each "up to 143 ms per
    step").
    """
    shown: set[tuple[str | None, float]] = set()
    out = []
    for s in suggestions:
        key = (s.cause_id or s.finding_id, round(s.estimated_gain_us or 0.0, 1))
        same = s.kind == "action" and key[1] > 0 and key in shown
        shown.add(key)
        out.append("- " + _suggestion_text(s, zh, same_gain=same))
    return out


def _suggestion_text(s: Suggestion, zh: bool, *, same_gain: bool = False) -> str:
    lang = "zh" if zh else "en"
    text = s.text.strip().rstrip("。.")
    ref = []
    if s.kind == "check":
        # "Check: Check rank 13's device" -> "Check: rank 13's device"; "检查：检查……" likewise
        text = re.sub(r"^(?:check\s+|检查)", "", text, flags=re.I)
        text = msg("answer.check", lang, text=text)
    if s.case_id:
        ref.append(msg("answer.case_ref", lang, case=s.case_id))
    if s.kind == "action" and s.estimated_gain_us is not None and s.estimated_gain_us > 0:
        gain = project.us(s.estimated_gain_us)
        key = "answer.gain_ref_about" if s.gain_bound == "estimate" else "answer.gain_ref"
        if same_gain:  # another way to the saving a bullet above states
            key = "answer.gain_ref_same"
        ref.append(msg(key, lang, gain=gain, source=s.cause_id or s.finding_id))
    if not ref:
        return text
    return text + msg("answer.refs", lang, refs=msg("answer.refs_join", lang).join(ref))


def cited_findings(findings: Sequence[Finding]) -> list[CitedFinding]:
    """Answer-model view of findings (id, numbers, sources)."""
    return [
        CitedFinding(
            id=f.id,
            kind=f.kind.value,
            severity=f.severity.value,
            summary=f.summary,
            ranks=list(f.ranks),
            metrics={k: float(v) for k, v in f.metrics.items()},
            sources=sorted({e.source for e in f.evidence if e.source}),
            estimated_gain_us=f.estimated_gain_us,
            summary_zh=f.summary_zh or "",
        )
        for f in findings
    ]


#: The Chinese name of each operator category a question can name (``Query.op_category``).
OP_CATEGORY_ZH = {
    "optimizer": "优化器",
    "attention": "注意力",
    "matmul": "矩阵乘",
    "compute": "计算",
}
#: Operator categories a user may suspect by name (compare_ops ``ops``).
OP_SUSPECT_CATEGORIES = ("attention", "matmul", "optimizer")
#: How a cause's text names an operator category (then the cause, not the share, answers).
OP_SUSPECT_WORDS: dict[str, tuple[str, ...]] = {
    "optimizer": (r"\boptimi[sz]er", r"优化器"),
    "attention": (r"\battention\b", r"注意力"),
    "matmul": (r"\bmatmul", r"矩阵乘"),
}
#: A suspected operator set taking at least this share of every rank's step is a large cost of
#: the job's work; under :data:`OP_SUSPECT_SMALL` it is not what makes the step long.
OP_SUSPECT_LARGE = 0.2
OP_SUSPECT_SMALL = 0.1


def asked_suspect(q: Query) -> str:
    """The suspect the question asks about (:func:`~advisor_chat.agent.project.named_suspect`).

    A suspect named in the question sentence (ending in ``?``/``？``) is asked about; one named
    only in the context before it counts when the question refers back to it ("we turned on
    recompute. related?"), not when the question names a subject of its own (trial: "seq-length
    set to 8192 ... is FA just slow on 910B?" was answered about dynamic shapes).
    """
    sentences = [x.strip() for x in re.split(r"(?<=[.。!！?？])\s*", q.text) if x.strip()]
    asked = " ".join(x for x in sentences if x.endswith(("?", "？")))
    if not asked or asked == q.text.strip():
        return project.named_suspect(q.text)
    own = project.named_suspect(asked)
    if own:
        return own
    a = parse_question(asked)
    if a.op_category or a.ops or a.hypothesis or a.ranks or a.links or a.stages or a.nodes:
        return ""  # the question is about something else it names
    return project.named_suspect(q.text)


def case_hits(
    ids: Sequence[str], retrieved: Sequence[CaseHit], skip: Collection[str] = ()
) -> list[CaseHit]:
    """The cases with these ids (first occurrence, those in ``skip`` left out) as hits.

    From ``retrieved`` when the search returned them, else read from ``knowledge/cases/<id>.md``
    (score 0, no matched tags); an id with no readable case is left out.
    """
    by_id = {h.id: h for h in retrieved}
    out: list[CaseHit] = []
    seen = set(skip)
    for cid in ids:
        if cid in seen:
            continue
        seen.add(cid)
        hit = by_id.get(cid)
        if hit is None:
            try:
                from advisor_chat.kb.cases import get_case

                k = get_case(cid)
            except Exception:  # a case file that cannot be read is not cited
                continue
            hit = k.hit()
        out.append(hit)
    return out


def cited_cases(hits: Sequence[CaseHit]) -> list[CitedCase]:
    """Answer-model view of case hits."""
    return [CitedCase(id=h.id, title=h.title, source=h.source, title_zh=h.title_zh) for h in hits]


_CONTRA = {
    # a remedy that steers away from what the cause blames contradicts the diagnosis
    "communication": re.compile(
        r"(rather than|instead of|not|no need to|don't|do not)\s+(\w+\s+){0,2}(the\s+)?"
        r"(network|links?|hccl|communication|interconnect|bandwidth)",
        re.I,
    ),
    "compute": re.compile(
        r"(rather than|instead of|not|no need to|don't|do not)\s+(\w+\s+){0,2}(the\s+)?"
        r"(operators?|kernels?|compute|computation|shapes?)",
        re.I,
    ),
    "scheduling": re.compile(
        r"(rather than|instead of|not|no need to|don't|do not)\s+(\w+\s+){0,2}(the\s+)?"
        r"(host|dispatch|dataloader|cpu)",
        re.I,
    ),
}


_LEAD_TAG = {
    "host_stall": "host_bound",
    "compute_straggler": "compute_straggler",
    "slow_link": "slow_link",
    "slow_group": "compute_spread",
    "pipeline_imbalance": "pipeline_bubble",
    "exposed_communication": "comm_not_overlapped",
    "job_idle": "high_free",
    "job_hotspot": "op_hotspot",
    "step_events": "step_jitter",
    "degradation": "step_degradation",
    "regression": "profile_regression",
    "data_artifact": "missing_steps",
}


def lead_tag(cause: RootCause) -> str | None:
    """The case-library symptom tag of a cause's mechanism (the case that should lead)."""
    if cause.mechanism.value == "slow_group" and cause.culprit.operator:
        return "op_regression_shape"
    if cause.mechanism.value == "slow_group" and cause.category.value == "communication":
        # ranks the others wait for in the collectives, not a spread of computation
        return "comm_not_overlapped"
    if "hccl_timeout_risk" in cause.symptom_tags:  # a late arrival measured against the timeout
        return "hccl_timeout_risk"
    if cause.mechanism.value == "job_hotspot" and cause.symptom_tags:
        return cause.symptom_tags[0]  # what is hot on every rank: an operator type, the clock
    # what the evidence found (a fragmented allocator, slow copies) before the mechanism's family
    why = [t for t in cause.symptom_tags if t in WHY_TAGS]
    if why:
        return why[0]
    return _LEAD_TAG.get(cause.mechanism.value)


def case_query(q: Query, causes: Sequence[RootCause]) -> str:
    """The case search's query text: what the question and the diagnosis are about, in English.

    Built from the parsed question (its intent, topics, suspected causes, operators) and the top
    causes' English summaries rather than the question's own words, so that an English and a
    Chinese question that parse alike cite the same cases. The question text itself only when
    neither says anything (no cause, no topic).
    """
    parts = [c.summary for c in causes[:2]]
    parts += [q.intent.replace("_", " ")]
    parts += [t.replace("_", " ") for t in (*q.topics, *q.hypotheses)]
    parts += list(q.ops)
    text = " ".join(x for x in parts if x).strip()
    return text if causes or q.topics or q.hypotheses else q.text


def lead_case_first(
    cases: Sequence[CaseHit], hits: Sequence[CaseHit], lead: str | None, limit: int = 4
) -> list[CaseHit]:
    """``cases`` led by the (at most two) hits that match the top cause's mechanism tag.

    Among those, the retrieval score (question text and tags) orders them.
    """
    if not lead:
        return list(cases)
    match = sorted((h for h in hits if lead in h.matched_tags), key=lambda h: -h.score)[:2]
    if not match:
        return list(cases)
    ids = {h.id for h in match}
    return [*match, *(c for c in cases if c.id not in ids)][:limit]


def _contradicts(text: str, causes: Sequence[RootCause]) -> bool:
    for c in causes:
        pat = _CONTRA.get(c.category.value)
        if pat is not None and pat.search(text):
            return True
    return False


def culprit_contradicted(case_tags: Sequence[str], causes: Sequence[RootCause]) -> bool:
    """Whether a slow-rank case would contradict the answer: it says no rank is to blame.

    That is when there are causes and none blames ranks among their peers (a rank, some ranks,
    a node, a group, a rank in some steps): a job-level cause ("no rank is slow") or a pipeline stage that every
    other stage waits for by the schedule (trial: the real PP2 sample cited the "one rank shows
    long Free stretches" case). Answers without a diagnosis may cite such a case (a late rank
    named by a finding).
    """
    if "slow_rank" not in case_tags or not causes:
        return False
    return not any(
        c.culprit.kind not in ("job", "stage") and bool(c.culprit.ranks or c.culprit.events)
        for c in causes
    )


def consistent_case(hit: CaseHit, causes: Sequence[RootCause]) -> bool:
    """Whether a case fits the diagnosis: its remedies do not steer away from a cited cause.

    (A case that matches a cause's shape but not the reason its evidence found is still cited
    as a similar case; its remedies are offered only when it fits, see :func:`case_fits_cause`.)
    """
    if not causes:
        return True
    return not any(_contradicts(r, causes[:1]) for r in hit.remedies[:2])


#: Tags that many mechanisms share (a share of the step, not a distinguishing measurement).
GENERIC_TAGS = frozenset(
    {
        "comm_bound",
        "comm_not_overlapped",
        "high_free",
        "host_bound",
        "comm_wait_high",
        "compute_spread",
    }
)


def measured_tags(c: RootCause) -> set[str]:
    """The symptom tags measured for a cause: its own and those of its findings."""
    return set(c.symptom_tags) | {t for f in c.findings for t in f.symptom_tags}


def case_fits_cause(case_tags: Sequence[str], c: RootCause) -> bool:
    """Whether a case is consistent with cause ``c`` (trial item 9).

    Rule: the case shares a tag with what was measured for ``c``, and every distinguishing tag
    of the case (those not in :data:`GENERIC_TAGS`, e.g. ``small_packets``, ``slow_rank``,
    ``mc2_opportunity``, ``tiny_kernels``) is measured for ``c``; when ``c``'s own tags say why
    (:data:`~advisor_chat.symptoms.WHY_TAGS`), the case carries one of them.
    """
    own = measured_tags(c)
    tags = set(case_tags)
    # the cause's evidence says why (WHY_TAGS): a case fits only if it is about that
    why = set(c.symptom_tags) & WHY_TAGS
    return bool(tags & own) and (tags - GENERIC_TAGS) <= own and (not why or bool(tags & why))


def case_acts_on(case_tags: Sequence[str], c: RootCause) -> bool:
    """Whether a case's remedy acts on ``c``'s mechanism (its lead tag is one of the case's)."""
    lead = lead_tag(c)
    return lead is not None and lead in set(case_tags)


def _cause_for(causes: Sequence[RootCause], tags: Sequence[str]) -> RootCause | None:
    best, score = None, 0
    for c in causes:
        own = set(c.symptom_tags) | {t for f in c.findings for t in f.symptom_tags}
        s = len(own & set(tags))
        if s > score:
            best, score = c, s
    return best


#: A case remedy that locates the problem (the diagnosis' own method), not a change to make.
_LOCATING = re.compile(
    r"^(?:name|identify|find|locate) the (?:slow|stalled|hung|late|lagging) rank"
    r"|\b(?:compare_ops|explain_rank|host_dispatch|slow_rank|step_trend)\b"
    r"|^open (?:that|the) (?:slow )?rank's timeline",
    re.I,
)


#: Culprits that are some ranks, not the job: a launch-wide setting does not tell them apart.
_RANK_SET_KINDS = frozenset({"rank", "ranks", "group", "stage", "node"})

#: A case remedy that sets an environment variable ("export TASK_QUEUE_ENABLE=2", a Chinese
#: summary's "开启 TASK_QUEUE_ENABLE=2、...").
_ENV_SETTING = re.compile(r"(?<![A-Za-z0-9_.])[A-Z][A-Z0-9]*_[A-Z0-9_]+=\S")

#: Culprits that are some ranks among peers on the same nodes: a launch-wide setting the peers
#: share cannot be what makes them slower (a node or group may differ in placement or binding).
_RANK_KINDS = frozenset({"rank", "ranks"})

#: A remedy said under a condition ("If host-bound on that rank: ...", "若…").
_CONDITIONAL = re.compile(r"^(?:if|when|若|如果)\b", re.I)


def build_suggestions(
    causes: Sequence[RootCause],
    cited: Sequence[Finding],
    cases: Sequence[CaseHit],
    zh: bool,
    *,
    mc2_ok: bool = True,
    limit: int = 5,
) -> list[Suggestion]:
    """Typed suggestions: the causes' actions (with gains) first, case remedies, then checks.

    Actions come from the diagnosis' remedies (each tied to its cause, gain and bound from the
    remedy, else the cause's); a case remedy is an action tied to the cause whose symptom tags it
    matches, and only when it does not steer away from the top cause (e.g. no "rather than
    tuning the network" on a slow-link cause). Checks carry no gain. Chinese answers use the
    remedies' Chinese text and the cases' Chinese summaries (commands kept verbatim).
    """
    actions: list[Suggestion] = []
    checks: list[Suggestion] = []
    seen: set[str] = set()

    def push(bucket: list[Suggestion], s: Suggestion) -> None:
        key = s.text.strip()
        if not key or key in seen:
            return
        if not mc2_ok and re.search(r"mc2|通算融合", key, re.I):
            return
        seen.add(key)
        bucket.append(s)

    for c in causes:
        fid = c.findings[0].id if c.findings else None
        for r in c.remedies:
            text = (r.text_zh or r.text) if zh else r.text
            if r.kind == "action":
                gain = r.gain_us if r.gain_us is not None else c.gain_us
                bound = r.bound if r.gain_us is not None else c.bound
                push(
                    actions,
                    Suggestion(
                        text=text,
                        kind="action",
                        cause_id=c.id,
                        finding_id=fid,
                        case_id=r.case_id,
                        estimated_gain_us=gain if gain and gain > 0 else None,
                        gain_bound="estimate" if bound == BoundKind.ESTIMATE else "upper_bound",
                    ),
                )
            else:
                push(
                    checks,
                    Suggestion(
                        text=text, kind="check", cause_id=c.id, finding_id=fid, case_id=r.case_id
                    ),
                )
    for h in cases:
        hc = _cause_for(causes, h.symptom_tags)
        f = _best_finding(cited, h.symptom_tags)
        if causes and (hc is None or not case_fits_cause(h.symptom_tags, hc)):
            continue  # the case's symptoms are not measured for any cause of this diagnosis
        if hc is not None:
            # the cause's gain only for a case about that cause's mechanism (its first tag): a
            # case that shares a secondary tag (a dataloader case's host_bound) acts on part of
            # it at most, by an amount this data does not give
            lead = lead_tag(hc)
            gain = hc.gain_us if lead is not None and list(h.symptom_tags)[:1] == [lead] else None
        else:
            gain = f.estimated_gain_us if f else None
        texts: list[str] = []
        # when the cause already says what to do about its mechanism, a case adds only its
        # concrete settings (a flag, a variable, a call), not a rewording of the same advice
        concrete_only = (
            hc is not None
            and any(r.kind == "action" for r in hc.remedies)
            and case_acts_on(h.symptom_tags, hc)
        )
        if zh:
            zh_text = case_remedy_zh(h.id)
            if zh_text:
                texts.append(zh_text)
            cmds = [x for x in (_command_of(r) for r in h.remedies[:3]) if x]
            # a command the summary already gives is not repeated as a check
            cmds = [x for x in cmds if not (zh_text and x in zh_text)]
            texts += [f"执行 `{x}`" for x in cmds[:1]]
            # a remedy that is code alone (a call with its settings) reads the same in Chinese
            code = [r.strip() for r in h.remedies[:3] if _CODE_ONLY.match(r.strip())]
            texts += [f"使用 `{x}`" for x in code[:1]]
        else:
            # a case's locating steps ("name the slow rank from the collectives", "compare_ops
            # between ...") are what the diagnosis already did when it names a cause
            texts = [r for r in h.remedies if not (causes and _LOCATING.search(r))][:2]
        cmd_texts = {f"执行 `{x}`" for x in cmds[:1]} if zh else set()
        for t in texts:
            if _contradicts(t, causes[:1]) or (concrete_only and not _CONCRETE.search(t)):
                continue
            # a command to run alone ("执行 `npu-smi info`") looks, it changes nothing: no gain
            is_cmd = t in cmd_texts
            # a launch-wide setting (an environment variable) is the same on the culprit ranks
            # and on the peers that do not lose the time: the cause's gap is not its saving (a
            # setting that differs between them is the environment split's own action)
            job_wide = (
                hc is not None
                and hc.culprit.kind in _RANK_SET_KINDS
                and _ENV_SETTING.search(t) is not None
            )
            if (
                job_wide
                and hc is not None
                and hc.culprit.kind in _RANK_KINDS
                and not _CONDITIONAL.search(t.strip())
            ):
                # the peers run with the same setting and do not stall (trial: the demo's rank-12
                # stall got TASK_QUEUE_ENABLE=2 though its launches are not late)
                continue
            push(
                checks if is_cmd else actions,
                Suggestion(
                    text=t,
                    kind="check" if is_cmd else "action",
                    cause_id=hc.id if hc is not None else None,
                    finding_id=(
                        hc.findings[0].id
                        if hc is not None and hc.findings
                        else (f.id if f else None)
                    ),
                    case_id=h.id,
                    estimated_gain_us=(
                        gain if gain and gain > 0 and not is_cmd and not job_wide else None
                    ),
                ),
            )
    if not actions and not checks:
        for f in cited:
            for t in f.symptom_tags:
                if t in _FALLBACK_REMEDY:
                    push(
                        checks,
                        Suggestion(
                            text=_FALLBACK_REMEDY[t][1 if zh else 0], kind="check", finding_id=f.id
                        ),
                    )
    return (actions + checks)[:limit]


def error_zh(tool: str, error: str) -> str:
    """A tool error in Chinese (known forms translated; otherwise said without English)."""
    e = error.strip().rstrip(".")
    nouns = {"rank": "卡", "step": "step", "group": "通信域", "transport": "链路类型"}
    m = re.match(r"(rank|step|group|transport) (\S+) does not exist; \w+ are (.+)$", e)
    if m:
        n = nouns[m.group(1)]
        return f"{n} {m.group(2)} 不存在；现有的{n}为 {m.group(3)}"
    m = re.match(
        r"rank (\S+) has no kernel data(?: \(its (\S+) could not be read[^)]*\))?; ranks with "
        r"kernels are (.+)$",
        e,
    )
    if m:
        why = (
            f"（其 {m.group(2)} 无法读取，`advisor-chat inspect` 可查看原因）" if m.group(2) else ""
        )
        return f"{m.group(1)}号卡没有算子数据{why}；有算子数据的卡为 {m.group(3)}"
    m = re.match(r"step (\S+) is not in (\S+); steps are (.+)$", e)
    if m:
        return f"第 {m.group(1)} 步不在 {m.group(2)} 中；现有的步为 {m.group(3)}"
    if "no baseline" in e:
        return "对比两次运行需要基线数据，请用 `--baseline PATH` 传入"
    if e.startswith("bad arguments"):
        return f"工具 {tool} 的参数无效"
    if "case library" in e:
        return "案例库无法读取"
    if re.search(r"no (communication|comm)", e, re.I):
        return "缺少通信数据（需要 Level1 或更高级别采集）"
    return f"工具 {tool} 无法给出结果（原始错误信息见工具调用记录）"


def _suggestions(cited: Sequence[Finding], cases: Sequence[CaseHit], zh: bool) -> list[Suggestion]:
    """Suggestions from findings and cases only (no diagnosis): see :func:`build_suggestions`."""
    return build_suggestions((), cited, cases, zh)
