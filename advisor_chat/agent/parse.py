"""Understanding a question (English or Chinese): slots, not one keyword label.

Deterministic rules, no model. A question is parsed into

- a **target**: ranks (one, a list or a range: "ranks 8-15", "8到15号卡"), a pipeline stage
  ("stage 0", "阶段0"), a link ("3→11", "link 3-11", "3-11之间"), steps, communication groups
  (only when named as a group), transports, operators of the profile;
- a **kind** of answer (:data:`KINDS`): why / which / yes-no / what to fix first / how much /
  compare / overview / data completeness / help;
- a **topic** (:data:`TOPICS`): what the question is about (network, communication, compute,
  host, pipeline, steps, operators, ...), from small bilingual lexicons (the glossary's terms);
- **context**: parallel sizes written in passing ("TP=8", "PP=2"), which never filter anything;
- **job sizes** ("32卡训练", "2机16卡", "on 64 cards", "2 nodes x 8 NPUs"): never ranks;
- a **hypothesis**: the suspected cause a question names (:data:`HYPOTHESES`: "could it be GC?",
  "是不是网络问题", "should I switch ZeRO-3 to ZeRO-2?");
- ids written in a form no profile can hold ("rank -1", "rank 7.5", "step -2"), kept as written
  so that :mod:`.validate` can refuse them instead of reading "rank 7.5" as rank 7.

The route the planner takes (:attr:`Query.intent`, one of :data:`INTENTS`) is derived from the
slots by :func:`route`, in one place, so that a word in passing ("vs", "the problem", "TP")
cannot hijack it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

Language = Literal["en", "zh"]

MAX_QUESTION_CHARS = 4000
"""Longest question accepted (characters); longer ones are refused before any parsing."""

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
    "step_events",
    "pipeline_bubble",
    "host_dispatch",
    "memory",
    "data_quality",
    "env_check",
    "fix_first",
    "how_much",
    "evidence",
    "summarize",
    "help",
    "unsupported",
)
"""Every route the offline planner knows."""

KINDS = (
    "why",
    "which",
    "yes_no",
    "fix_first",
    "how_much",
    "evidence",
    "compare",
    "overview",
    "data",
    "help",
    "",
)
"""Kinds of answer a question asks for (``""`` = not understood)."""

TOPICS = (
    "network",
    "communication",
    "compute",
    "host",
    "pipeline",
    "steps",
    "trend",
    "operators",
    "memory",
    "mc2",
    "timeout",
    "baseline",
    "dispatch_delay",
    "env",
    "category",
    "slow",
)
"""What a question is about (several may apply)."""

HYPOTHESES = (
    "gc",
    "dataloader",
    "network",
    "link",
    "card",
    "hardware",
    "kernel_slow",
    "compute_straggler",
    "load_imbalance",
    "checkpoint",
    "zero_stage",
    "tp_size",
    "mc2",
    "hccl_timeout",
    "memory",
    "fragmentation",
    "host_dispatch",
    "software_bug",
    "capacity",
    "profiler",
    "host_sync",
    "aicpu",
    "throttling",
    "memory_bandwidth",
    "device_shared",
    "version",
    "graph_break",
)
"""Suspected causes a question can name (:attr:`Query.hypothesis`)."""

TRANSPORTS = ("HCCS", "RDMA", "PCIE", "SDMA", "SIO")
PARALLEL = ("TP", "PP", "DP", "EP", "CP", "SP", "VPP", "ZERO")

_CJK = re.compile(r"[\u4e00-\u9fff]")


_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def _mostly_chinese(text: str) -> bool:
    n_cjk = len(_CJK.findall(text))
    return n_cjk > 0 and 2 * n_cjk >= len(_LATIN_WORD.findall(text))


def detect_language(text: str) -> Language:
    """``zh`` when Chinese carries the text, else ``en``.

    Chinese engineers write English terms inside Chinese ("每个step forward里一堆free gap，是host
    bound吗", "rank3 为啥 slow 了"); English speakers drop a Chinese word into English ("tp
    allreduce 好慢, rdma bw looks fine tho. wat's up?"). The text is Chinese when its ideographs
    count at least half its Latin words, in the whole text or in its last line (the question
    under a pasted English log).
    """
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    return "zh" if _mostly_chinese(text) or _mostly_chinese(last) else "en"


def too_long_message(text: str) -> str | None:
    """The refusal for a question over :data:`MAX_QUESTION_CHARS` characters, else ``None``."""
    if len(text) <= MAX_QUESTION_CHARS:
        return None
    if detect_language(text[:2000]) == "zh":
        return (
            f"问题太长（{len(text)} 个字符，上限 {MAX_QUESTION_CHARS}）。"
            "请只写问题本身，不要粘贴日志或数据文件。"
        )
    return (
        f"The question is too long ({len(text)} characters; the limit is {MAX_QUESTION_CHARS}). "
        "Ask the question alone, without pasting logs or data files."
    )


@dataclass(frozen=True)
class Query:
    """What the planner understood.

    Attributes:
        text: The question.
        language: ``en`` or ``zh``.
        intent: The route (one of :data:`INTENTS`), derived from the slots.
        ranks: Ranks mentioned (a range is expanded), in order.
        steps: Steps mentioned.
        groups: Communication groups named as groups (as named in the profile).
        transports: Transports mentioned.
        ops: Operator types / names mentioned (as named in the profile).
        follow_up: The route was taken from the previous turn.
        component: For ``rank_component``: the step-trace column asked about.
        extreme: For ``rank_component``: ``max`` or ``min``.
        kind: The kind of answer asked for (one of :data:`KINDS`).
        topics: What the question is about (from :data:`TOPICS`), in order of appearance.
        stages: Pipeline stages mentioned.
        links: Links mentioned, ``(src, dst)``.
        rank_range: The ranks were given as a range or list ("ranks 8-15").
        context: Parallel sizes written in passing (``{"TP": 8}``); never a filter.
        world_sizes: Job sizes the question states ("32卡训练", "2机16卡", "on 64 cards",
            "2 nodes x 8 NPUs" -> 16), in order of appearance; never ranks (issue 22).
        hypothesis: The suspected cause the question names, one of :data:`HYPOTHESES` (the
            first named), ``""`` when none ("could it be GC?" -> ``gc``).
        hypotheses: Every suspected cause named, in order of appearance.
        claim: A mechanism a yes/no question no other reading understood proposes in a clause of
            its own (set by the planner: ``planner.claim_hypothesis``), judged against the causes.
        bad_ids: Rank or step ids written in a form no id can take, as ``(kind, text)`` with
            kind ``rank`` or ``step`` ("rank -1", "rank 7.5", "rank 1e3", "step -2").
        rank_ranges: Rank ranges as written, ``(first, last)`` ("ranks 15-8" -> ``(15, 8)``);
            a reversed range is read in increasing order in :attr:`ranks`.
        nodes: Nodes (servers, machines) named, as numbered in the question ("node 1",
            "2号机器"; "the third machine", "第三台" -> 3 with :attr:`node_ordinal`).
        node_ordinal: The nodes were counted ("the second node", "第二台"), from 1.
        except_ranks: Ranks set aside by a question about all the others ("除了0号卡，其他卡都
            正常吧？", "apart from rank 0, are the other ranks fine?"); :attr:`ranks` is then empty.
        ruled_out: Suspected causes (:data:`HYPOTHESES`) the user says were already ruled out
            ("we ruled out the dataloader and the network" -> ``dataloader``, ``network``).
        op_category: An operator category named instead of operator types ("the optimizer
            operators", "优化器那几个算子" -> ``optimizer``; ``attention``, ``matmul``), ``""``
            when none or when :attr:`ops` names types.
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
    kind: str = ""
    topics: tuple[str, ...] = ()
    stages: tuple[int, ...] = ()
    links: tuple[tuple[int, int], ...] = ()
    rank_range: bool = False
    context: dict[str, int] = field(default_factory=dict)
    world_sizes: tuple[int, ...] = ()
    hypothesis: str = ""
    hypotheses: tuple[str, ...] = ()
    bad_ids: tuple[tuple[str, str], ...] = ()
    rank_ranges: tuple[tuple[int, int], ...] = ()
    nodes: tuple[int, ...] = ()
    node_ordinal: bool = False
    except_ranks: tuple[int, ...] = ()
    ruled_out: tuple[str, ...] = ()
    op_category: str = ""
    claim: str = ""


# -- lexicons (English / Chinese; glossary terms) ------------------------------------------------
_KIND_LEX: dict[str, tuple[str, ...]] = {
    "help": (
        r"^\s*help\b",
        r"what can you (do|answer)",
        r"what (questions|can i ask)",
        r"how do i use (you|this)",
        r"^\s*帮助\s*[?？]?\s*$",
        r"你能(做|干)什么",
        r"能回答什么",
        r"可以问什么",
        r"怎么用你",
    ),
    "fix_first": (
        r"\b(fix|change|do|tune|try|address|tackle|flip|switch|turn on|turn off|set) first\b",
        r"\bfirst (thing|change|fix|action|move)\b",
        r"what (should|do|can|could|would|must) (i|we) (do|fix|change|try|tune|optimi[sz]e|check|look at)",
        r"\b(check|look at) first\b",
        r"what (do|would) you (recommend|suggest)",
        r"where (should i|do i|to) (start|begin)",
        r"\bhow (can|do|could|should) i (speed|make|improve|fix|reduce|optimi[sz]e|get)",
        r"\bhow to (speed|fix|improve|optimi[sz]e|reduce)",
        r"\bpriorit",
        r"\bbiggest (win|gain)",
        r"\bquick(est)? win",
        r"先(怎么|如何|要|该)?(修|改|做|优化|解决|处理|调)",
        r"先(查|看|检查|排查)\s*(什么|哪|啥)",
        r"优先(修|改|做|优化|解决|处理|级)",
        r"首先.{0,6}(修|改|做|优化|解决|处理)",
        r"从哪(里|儿)?.{0,4}(入手|开始|下手|着手)",
        r"(怎么|如何|怎样)(优化|提速|加速|改进|解决|修)",
        r"优化建议",
        r"该(怎么|如何)(办|做|改)",
        r"应该(改|修|优化|做)什么",
        r"第一(处|个|件事|步)?.{0,4}(该|要|应该|需要)?(改|修|优化|做|干|弄)",
        r"(该|要|应该|需要)(改|修)(什么|哪|啥)",
        r"具体(的)?(改法|怎么改|改动)",
        r"咋(办|整|改|弄)",
        r"先(干|做|弄|搞)(啥|什么|哪个|嘛)",
        r"\bwhat (should|do|would) (i|we) change\b",
        r"最(大|值得).{0,4}(收益|优化)",
        r"(怎么|如何|怎样)改",
        r"(最快|马上|立刻)见效|见效最快",
    ),
    "how_much": (
        r"\bhow (much|many|long|large|big)\b",
        r"\b(gain|save|saving|savings|speed-?up)\b.{0,30}\b(if|by|from)\b",
        r"\bwhat (would|will|could|do|does|did) (i|we|you|it|that) (gain|save)",
        r"\b(gain|save|saving|savings|speed-?up)\b.{0,20}\bper (step|iteration)\b",
        r"\bwhat step time (would|will|should|could|do|can) (i|we)\b",
        r"多少",
        r"多大(?!(的)?(把握|信心|可能|概率))",
        r"多久",
        r"多长",
        r"(能|可以)(省|节省|提升|加速)",
        r"收益",
    ),
    "evidence": (
        r"\bhow (do|can|did|would) (you|we) (know|tell|conclude)\b",
        r"\bwhat('s| is| are) (the|your) (evidence|proof|basis)\b",
        r"\bwhy do you (say|think|conclude)\b",
        r"\bwhat (makes|made) you (say|think|conclude)\b",
        r"\b(show|give) me the (evidence|proof|numbers behind)\b",
        r"(怎么|如何|凭什么)(知道|判断|确定|看出)",
        r"(证据|依据|根据)(是什么|在哪|呢)",
        r"为什么(说|认为|判断|断定)",
    ),
    "data": (
        r"data (quality|completeness)",
        r"\b(is|are) (the|my|this) (data|profile|capture|profiling)\b.{0,20}\b(ok|valid|complete|usable|reliable|trustworthy|good)",
        r"missing (ranks|steps|data|records|files)",
        # "missing steps", not time "per step is lost to communication"
        r"(?<!per )\b(data|files?|ranks?|steps?|records?) (is |are )?(missing|lost|absent)\b(?! to\b)",
        r"\bincomplete\b",
        r"can i trust",
        r"数据.{0,6}(质量|完整|缺失|可信|可靠|有效|丢|靠谱|准确|准不准|有问题|有没有问题|不对)",
        r"采集.{0,8}(完整|问题|缺失|丢)",
    ),
    "which": (
        r"\bwhich\b",
        r"\bwhat (rank|card|device|npu|link|stage|step|operator|op|kernel)s?\b",
        r"\bwho\b",
        r"\bhold(s|ing)? .{0,20}\bback\b",
        r"\bstraggl",
        r"\bslowest\b",
        r"\bwhat('s| is) (slowing|dragging|holding|hurting|limiting|eating(?! (?:up )?(?:(?:the |all the |my |our )?(?:time|step)|it\b|that\b|this\b)))",
        r"\b(any|one|some) (of (them|the \w+)|ranks?|cards?|devices?|npus?)\b",
        r"\bbottleneck (rank|card|device|node)\b",
        r"\bwhere\b.{0,30}\b(time|bottleneck)\b",
        r"哪(?!(?:儿|里)?来)",  # "哪来的" asks where something comes from: why
        r"谁",
        r"拖后腿",
        r"拖慢.{0,6}(整体|集群|作业|训练|大家)",
    ),
    "why": (
        r"\bwhy\b",
        r"\bhow come\b",
        r"(?:是)?(?:从)?哪(?:儿|里)?来的",
        r"what('s|s| is) (wrong|going on|happening|up|the (cause|reason))",
        r"\bwhat gives\b",
        r"\bwhat(?:'s| is| are)\b.{0,25}\bdoing\b",
        # "what is the npu waiting on?", "NPU在等什么？"
        r"\bwhat(?:'s| is| are)?\b.{0,30}\bwait(?:s|ing)? (?:on|for)\b",
        r"\bwho(?:m)?\b.{0,30}\bwait(?:s|ing)?\b",
        r"在等(?:什么|啥)",
        # "what is eating the time?", "where does the time go?"
        r"\bwhat(?:'s| is| are)? (?:eating|taking|burning|using|wasting) (?:up )?(?:(?:the |all the |my |our )?(?:time|step)|it\b|that\b|this\b)",
        r"\bwhere (?:does|do|did|is|are) (?:the |all the |my |our )?(?:rest|remainder|other|missing|extra|time|step time)\b.{0,30}\b(?:go|going|gone|spent)\b",
        r"(?:时间|耗时)(?:都)?(?:去哪|花在哪|被什么)",
        r"在(干|做|搞)(什么|啥|嘛)",
        r"\bexplain\b",
        r"\b(root )?causes?\b",
        r"\breasons?\b",
        r"为什么",
        r"为啥",
        r"为何",
        r"原因",
        r"根因",
        r"症结",
        r"怎么回事",
        r"咋回事",
        r"怎么(这么|那么)?慢",
        r"什么导致",
        r"导致",
    ),
    "yes_no": (
        r"(^|[.?!。？！]\s*)(so,?\s*|and\s+|but\s+)?(is|are|does|do|did|can|could|should|will|would|has|have|was|were|am)\b",
        r"[,;:]\s*(is|are|does|do|did|was|were) (it|they|this|that|he|she|the|any|some|our|my)\b",
        # tag and declarative questions: "rank 6 is slow, right?", "so rank 6 is the slow one?"
        r",\s*(right|correct|true|yes|no|agreed|ok|okay|yeah)\s*[?？]\s*$",
        r"\b(can|could) you confirm\b",
        # one short sentence that asks without a question word puts something forward: "python
        # GC kicking in after the save?", "checkpoint stalling the step?"
        r"^(?!.*\b(?:what|why|which|who|where|when|how|whats|show|list|per|any)\b)[a-z][^.?!\n]{12,70}\?\s*$",
        # a suspect tacked on after the facts: "FA runs twice as often as its gradient, profiler
        # bug?", "每步都慢，网络问题？" (not "..., why?", "...，怎么办？")
        r"(?:[,;:—–]|[.!]\s)\s*(?!(which|what|who|where|why|how|when|or what|thoughts|ideas?|advice|suggestions?|help|please|anything)\b)(a |an |the |some )?"
        r"[\w-]+( [\w-]+){0,2}\s*[?？]\s*$",
        r"[，；：]\s*(?![^，；？?]*(怎么|为什么|为何|哪|什么|多少|如何|谁|几|帮|看看|请|分析|说说|讲讲|解释|干嘛|干啥|做啥))[^，；？?。]{1,16}[？?]\s*$",
        r"\b(isn't|aren't|doesn't|don't|is not|are not) (it|they|that)\s*[?？]\s*$",
        # ("what's slow?" asks what, not whether)
        r"(?:^|[.!?]\s+)(?:(?!\b(?:what|what's|whats|which|who|where|why|how)\b)[^.!?])*"
        r"\b(slow(er|est)?|fine|ok|okay|healthy|normal|the (culprit|problem|cause|bottleneck|straggler))\b[^?？.]{0,20}[?？]\s*$",
        r"(对吧|是吧|对不对|是不是|吧)[？?。！!\s]*$",
        r"(慢|正常|有问题|没问题)(吧|呢)?[？?]\s*$",
        r"是不是",
        r"是否",
        r"有没有",
        r"会不会",
        r"会不是",  # a common slip for 会不会
        r"难道",
        r"莫非",
        r"^(这|那)?(是|就是)(?![^，,；;。？?]*(什么|啥|哪))[^，,；;。？?]{1,20}(的)?(问题|原因|锅|导致的|造成的|引起的)[？?]\s*$",
        r"要不要",
        r"能不能",
        r"需不需要",
        r"(?<!干)[吗嘛][？?。.!！\s]*$",  # (not "在干嘛？": "what is it doing?")
        r"(?<!干)[吗嘛吧]\s*[？?]",  # "12号卡是正常的吧？看它一直在等recv": the question is not last
    ),
    "overview": (
        r"\bwhat else\b",
        r"还(能|可能|会)是(什么|啥)",
        r"还有(什么|哪些|啥)(原因|可能|问题)",
        r"\bsummar",
        r"\boverview\b",
        r"\bdiagnos",
        r"\breport\b",
        r"\banaly[sz]e\b",
        r"\b(any|a|the|main|biggest) (performance )?(problems?|issues?|bottlenecks?)\b",
        r"\bperformance\b",
        r"\bhealthy\b",
        r"总结",
        r"概况",
        r"诊断",
        r"分析一下",
        r"整体",
        r"(性能)?问题",
        r"瓶颈",
        r"健康",
    ),
}
# A compare needs two things to compare; the word alone is only a hint.
_COMPARE = (
    r"\bcompar",
    r"\bvs\.?\b",
    r"\bversus\b",
    r"\bdifference\b",
    r"\bdiffer\b",
    r"\b(slower|faster) than\b",
    r"对比",
    r"比较",
    r"相比",
    r"区别",
    r"差异",
    r"比.{1,12}(慢|快)",
    # "kernels on 0/8 aren't slower": a fact stated in passing, not a comparison asked
    r"(?<!n't )(?<!not )(?<!no )\b(slower|faster)\b",
    r"谁(更)?(慢|快)",
    r"哪(张|个|一张|一个)(卡)?(更)?(慢|快)",
)

_TOPIC_LEX: dict[str, tuple[str, ...]] = {
    "baseline": (
        r"upgrad",
        r"\bbefore\b.*\bafter\b",
        r"\bbaseline\b",
        r"\b(two|both) (runs|profiles)\b",
        r"what changed(?![^?？.]{0,40}\b(steps?|iterations?)\b)",  # not "what changed in step 12"
        r"previous run",
        r"last run",
        r"\bregress(ed|ion)? (since|after|from)\b",
        r"升级",
        r"基线",
        r"两次(运行|采集|数据)",
        r"之前.*之后",
        r"(上|前)一次",
        r"(新|旧)版本",
        # "v2 is slower than v1", "2.1 vs 2.0", "the new version is slower": two versions compared
        r"\bv\d+(\.\d+)*\b.{0,30}\b(than|vs\.?|versus|compared to)\s+v?\d+(\.\d+)*\b",
        r"\b(new|old|newer|older) (version|release|build|image)\b",
        r"\bslower than (before|last (week|time)|yesterday)\b",
        r"比(之前|以前|上次|上周|昨天)(慢|变慢)",
        r"\bv?\d+(\.\d+)*\s*比\s*v?\d+(\.\d+)*\s*(慢|快)",
    ),
    "mc2": (
        r"\bmc2\b",
        r"matmul[_ ]?all[_ ]?reduce",
        r"fus(e|ed|ion|ing) .{0,20}(comm|allreduce|all-reduce|collective)",
        r"通算融合",
        r"通信.{0,6}融合",
        r"融合.{0,6}通信",
    ),
    "timeout": (
        r"time[ -]?outs?\b",
        r"\bhang",
        r"\bhung\b",
        # ("stuck in allreduce": waiting in the collectives, not a hang)
        r"\bstuck\b(?!\s+(?:in|on|at|inside|waiting (?:in|on|for))\s+(?:the\s+|an?\s+)?"
        r"(?:all[- ]?reduces?|all[- ]?gathers?|reduce[- ]?scatters?|all[- ]?to[- ]?alls?|"
        r"collectives?|comms?|communication|hccl|barriers?|p2p|send|recv))",
        r"EI000\d",
        r"HCCL_(CONNECT|EXEC)",
        r"超时",
        r"卡住",
        r"卡死",
        r"挂住",
        r"EI000",
    ),
    "memory": (
        r"\bmemory\b",
        r"\bfragmentation\b",
        r"\bOOM\b",
        r"out of memory",
        r"\bhbm\b",
        r"显存",
        r"内存",
        r"碎片",
    ),
    "dispatch_delay": (
        r"launch (delay|latenc)",
        r"dispatch (delay|latenc)",
        r"\bhost launch",
        r"hosttodevice",
        r"\bp50\b|\bp90\b",
        r"下发(时延|延迟|耗时)",
    ),
    "env": (
        r"\benv(ironment)?\b",
        r"\bvariables?\b",
        r"\bsettings?\b",
        r"环境变量",
        r"环境",
        r"配置",
    ),
    "network": (
        r"(?<![a-z])(hccs|roce|rdma)(?![a-z])",
        r"\bnetwork",
        r"\blinks?\b",
        r"\bbandwidth\b",
        r"\binterconnect",
        r"\bfabric\b",
        r"\bnic\b",
        # the network device, not the verb ("switch the experts to grouped gemm")
        r"\bswitch\b(?! (the|to|from|off|on|over|back|it|them|this|that|our|my|these|those)\b)",
        r"\bhccs\b",
        r"\brdma\b",
        r"\broce\b",
        r"\bpcie\b",
        r"\bsdma\b",
        r"网络",
        r"链路",
        r"带宽",
        r"互联",
        r"网卡",
        r"交换机",
        r"\b(p2p|send/?recv|send-recv|point[- ]to[- ]point)\b.{0,25}\bslow",
        r"(p2p|send/?recv|点对点).{0,10}慢",
    ),
    "pipeline": (
        r"\bpipeline",
        r"\bbubbles?\b",
        r"(?<![a-z])stages?(?![a-z])",
        r"流水线",
        r"气泡",
        r"空泡",
        r"阶段",
    ),
    "trend": (
        r"\btrend",
        r"over time",
        # a degraded card or link is a fault, not a trend over the run
        r"degrad(?!ed\s+(npu|card|chip|device|link|hccs|port|nic|node))(?<!is degrad)(?<!'s degrad)",
        r"getting (slower|worse)",
        r"slower and slower",
        r"worse over",
        r"during the run",
        r"as (the )?(run|training) (goes|progresses)",
        r"趋势",
        r"劣化",
        r"越来越(慢|差)",
        r"\bjitter",
        r"fluctuat",
        r"\bvar(y|ies|iance)\b",
        r"抖动",
        r"波动",
        r"逐渐变慢",
        r"变差",
        r"长跑",
    ),
    "steps": (
        r"\bsteps\b",
        r"\bsome steps?\b",
        r"\b(first|last) (captured |profiled )?step\b",
        # "第一步" as a step, not "第一步该干啥" (what to do first)
        r"第一(个)?\s*(step|步)(?!\s*(该|要|应该|需要|先|怎么)?\s*(干|做|改|修|弄|优化|怎么))",
        r"\biterations\b",
        r"\bspikes?\b",
        r"\bstalls?\b",
        r"\bhiccups?\b",
        r"\bintermittent",
        r"\boccasional",
        r"\bsometimes\b",
        r"\bpauses?\b",
        r"\bgc\b",
        r"毛刺",
        r"卡顿",
        r"偶尔",
        r"有时",
        r"(某些|有些|一些|个别|部分|几个).{0,4}(步|step|迭代)",
        r"哪(几|些)个?\s*(步|step|迭代)",
        # "which step is the slowest?", "哪一步最慢": a step asked for, not a rank
        r"\b(which|what) (step|iteration)s?\b(?! ?(time|duration|length))",
        r"哪(一|个)\s*(步|step|迭代)",
        r"(那|这)(两|几|些)\s*(个\s*)?(步|step|迭代)",
        r"停顿",
    ),
    "operators": (
        r"\boperators?\b",
        r"\bkernels?\b",
        r"\bops?\b",
        r"\bmatmul",
        r"\bshapes?\b",
        r"算子",
        r"shape",
        r"形状",
    ),
    "communication": (
        r"\bcommunication\b",
        r"\bcomms?\b",
        r"\bcollectives?\b",
        r"all-?reduce|all-?gather|reduce-?scatter|all-?to-?all",
        r"\bhccl\b",
        r"\boverlap",
        r"\bwait(s|ing)? (time|in)\b",
        r"通信",
        r"掩盖",
        r"集合通信",
    ),
    "host": (
        r"\bhost\b",
        r"\bdispatch",
        r"\bscheduling\b",
        r"\bcpu[- ]?bound\b",
        r"\bhost[- ]bound\b",
        r"\bidle\b",
        r"\bfree time\b",
        r"\bdata ?loader",
        r"\binput pipeline\b",
        r"下发",
        r"调度",
        r"空闲",
        r"数据加载",
        r"\bfree\b",
    ),
    "compute": (
        r"\bcompute\b",
        r"\bcomputation",
        r"\bcomputing\b",
        r"\bcompute[- ]bound\b",
        r"\bflops\b",
        r"计算",
    ),
    "category": (
        r"\bbottleneck",
        r"what kind",
        r"what type",
        r"\bcategory\b",
        r"\b(compute|communication|host)[- ]bound\b",
        r"瓶颈",
        r"什么(类型|问题)",
        r"哪(类|种)问题",
        r"还是",
        r"\bdominat",
        r"\bwhere (does|is|do) .{0,30}\btime\b",
        r"\b(most|majority) of the (step )?time\b",
        r"占比最(大|高)",
        r"主要耗时",
        r"时间(都)?花在",
    ),
    "slow": (
        r"\bslow",
        r"\blag",
        r"\bsluggish",
        r"\bdrag",
        r"\bthroughput\b",
        r"\bhurt",
        r"\bbehind\b",
        r"\bback\b",
        r"\blate\b",
        r"\bproblem",
        r"\bissue",
        r"\bwrong\b",
        r"\bculprit\b",
        r"\bbottleneck",
        r"慢",
        r"拖",
        r"问题",
        r"瓶颈",
        r"卡脖子",
    ),
}

#: Suspects that narrow a broader one named by the same words (throttling within hardware, memory
#: bandwidth within memory): at the same position in a question they come first.
_NARROW = frozenset(
    {
        "throttling",
        "memory_bandwidth",
        "device_shared",
        "aicpu",
        "version",
        "graph_break",
        "fragmentation",
    }
)

# Suspected causes (:data:`HYPOTHESES`): the words that name each one (English / Chinese).
_HYPOTHESIS_LEX: dict[str, tuple[str, ...]] = {
    "gc": (r"(?<![a-z])gc(?![a-z])", r"garbage[- ]collect", r"垃圾回收"),
    "dataloader": (
        r"\bdata ?loaders?\b",
        r"\bdata[- ]loading\b",
        r"\binput pipeline\b",
        r"\b(data|disk|file) (reading|i/?o)\b",
        r"\bi/?o[- ]bound\b",
        r"数据加载",
        r"数据读取",
        r"读数据",
        r"dataloader",
        r"数据预处理",
        r"\btokeni[sz](er|ation|ing)\b",
        r"\b(data )?pre-?processing\b",
        r"\bi/?o\b.{0,12}\b(bottleneck|bound|slow)",
        r"(?<![a-z])io\s*瓶颈",
        r"分词",
        r"(磁盘|存储)\s*(io|IO|读)",
        r"\bnum_?workers\b",
        r"\b(?:loader|data|input) workers?\b",
        r"\bworkers? (?:can'?t|cannot|don'?t|do not) keep up\b",
        r"(?:加载|读取|数据)\s*(?:进程|线程|worker)",
    ),
    "link": (
        r"\blinks?\b",
        r"\b(cables?|optics?|optical modules?|transceivers?|fibers?|fibres?)\b",
        r"链路",
        r"光模块|线缆|网线|光纤",
    ),
    "network": (
        r"\bnetwork",
        r"\binterconnect",
        r"\bfabric\b",
        r"\bnic\b",
        r"\broce\b",
        r"\brdma\b",
        r"\bswitch(es)?\b(?! (zero|stage|to|from|off|on))",
        r"\bbandwidth\b",
        r"\bpacket (loss|drops?)\b",
        r"\bretransmi(t|ssion)",
        r"\bcongest(ed|ion)\b",
        r"网络",
        r"丢包",
        r"重传",
        r"拥塞",
        r"网卡",
        r"交换机",
        r"带宽",
        r"互联",
        r"\b(p2p|send/?recv|send-recv|point[- ]to[- ]point)\b.{0,25}\bslow",
        r"(p2p|send/?recv|点对点).{0,10}慢",
    ),
    # one bad NPU (before "hardware": the card is named, so a slow link is not a bad card)
    "card": (
        r"\bbad (card|npu|chip|device)\b",
        r"\b(one|a|some|any) (card|npu|chip|device)\b.{0,30}\b(bad|broken|faulty|dead)\b",
        r"\b(npu|card|chip|device)('s)?\s+(is\s+)?(bad|broken|faulty|dead)\b",
        r"\b(swap|replace|change) (out )?(the|this|that|a) (card|npu|chip|device)",
        r"\b(swap|replace|rma)\b( out)?[^.?!,;]{0,30}\b(cards?|npus?|chips?|devices?|boards?)\b",
        r"\b(rma|return)\b.{0,10}\b(card|npu|chip|device|board)",
        r"\b(npu|card|chip|device)\b.{0,25}\b(degraded|defective)\b",
        r"\bdegraded (npu|card|chip|device)",
        r"(卡|npu|芯片).{0,6}(返修|退化|劣化)",
        r"返修",
        r"换(一张|个|掉)?卡",
        r"(卡|npu|芯片).{0,6}(换掉|更换|替换)",
        r"(换掉|更换|替换)[^，。？！,?!]{0,8}(卡|npu|芯片)",  # "换掉12号卡", "换掉这张卡"
        r"\b(swap|replace|rma)\b( out)?\s+rank\s*\d+",  # "replace rank 12"
        r"坏卡",
        r"卡坏",
        r"(卡|npu|芯片).{0,4}坏了",
        # "是不是某张卡算出了NaN，把它换掉就好": a card suspected, then replaced
        # ("哪张卡有问题" asks which card, not whether one is broken)
        r"(某|一)张卡[^。？！?!]{0,20}(换掉|更换|替换|nan|inf|算出)",
        r"是不是(某|一)张卡[^。？！?!]{0,12}(坏|故障|有问题)",
        # "会不会是某台机器的卡有问题", "是不是有张卡在那两步掉链子了"
        r"(会不会|是不是|是否)[^。？！?!]{0,12}(?<!网)卡[^。？！?!]{0,8}((有|出)了?问题|掉链子)",
        r"把(它|这张卡|那张卡)换掉",
        r"\b(one|a|some) (card|npu|chip|device|rank)\b.{0,30}\b(nans?|infs?)\b",
    ),
    "hardware": (
        r"\bhardware\b",
        # a network card to replace (a cable or its optics is the "link" hypothesis)
        r"\bbad nics?\b",
        r"\b(swap|replace|change)\w*\b[^.?!]{0,20}\bnics?\b",
        r"\bnics?\b[^.?!]{0,12}\b(swapped|replaced|changed)\b",
        r"网卡.{0,4}(坏|故障|有问题)|(换|更换)(掉)?.{0,4}网卡",
        r"\bsilicon\b",
        r"\b(worse|weaker|bad|lemon)\s+(chips?|npus?|cards?|boards?)\b",
        r"(硬件|芯片).{0,4}(差|不行|有问题)",
        r"(卡|芯片)的?体质",
        r"\bfaulty\b",
        r"\bbroken\b",
        r"\bdefective\b",
        r"\bbad node\b",
        r"\becc\b",
        r"\bthrottl",
        r"\boverheat",
        r"\bdown-?clock",
        r"硬件",
        r"故障",
        r"坏了",
        r"降频",
        r"掉频",
        r"过热",
        r"温度",
    ),
    # the operators themselves (their kernels) slower, against more work for them
    "kernel_slow": (
        r"\b(operators?|kernels?|ops|matmuls?)\b.{0,25}\b(get|got|gets|run|runs|are|is|became|become)\s+(just\s+)?slow(er)?\b",
        r"\bslow(er)? (operators?|kernels?|matmuls?)\b",
        r"\b(are|is) (the )?(operators?|kernels?|ops|matmuls?) (just |really |simply |themselves )?slow",
        r"\b(operator|kernel|op) (performance|efficiency|implementation)\b",
        r"算子.{0,8}(变慢|更慢|慢了)",
        r"(matmul|算子|kernel).{0,6}本身.{0,3}慢",
        r"算子.{0,3}(性能|效率|实现).{0,6}(问题|差|慢|低)",
        r"(算子|kernel).{0,6}有问题",
        r"\b(kernels?|operators?|ops|matmuls?) (are |is )?(just |simply )?(bad|broken|inefficient|poor)\b",
    ),
    "compute_straggler": (
        r"\bcompute straggler",
        r"\bstraggl\w* .{0,15}\bcomput",
        r"\bslow(er)? (compute|computation|computing)\b",
        r"\bcomput\w* (is |are )?slow(er)?\b",
        r"\bcomputes? (more|slower|longer)\b",
        r"计算.{0,4}(慢卡|拖后腿|掉队|慢)",
        r"(慢卡|拖后腿).{0,4}计算",
        r"算得(慢|更慢)",
    ),
    "load_imbalance": (
        r"\bload[- ]?imbalance",
        r"\bimbalanced?\b",
        r"\bunbalanced\b",
        r"\buneven(ly)?\b",
        r"\bskew(ed)? (data|batch|sequence|load|work)",
        r"\b(data|length|token) skew\b",
        r"\b(variable|different|uneven|varying) (sequence |seq )?lengths?\b",
        r"\bsequence lengths?\b",
        r"(序列|句子|样本)长度.{0,4}(不均|不一|不同|差异)",
        r"\b(longer|bigger|larger|more) (samples|sequences|seqs|inputs|batch(es)?|tokens)\b",
        r"(样本|序列|句子|数据).{0,6}(更长|更多|更大|长一些|多一些)",
        r"(分到|分配到|拿到|分得)的?(数据|样本|token|序列|batch).{0,3}(多|长|大)",
        r"负载不(均|平衡)",
        r"不均衡",
        r"不均匀",
        r"数据倾斜",
        r"负载倾斜",
    ),
    "checkpoint": (
        r"\bcheck-?points?\b",
        r"\bckpt\b",
        r"\bsav(e|es|ing) (the )?(model|weights|state)\b",
        r"checkpoint",
        r"\bckpt",
        r"保存模型",
        r"保存权重",
        r"存模型",
        r"存权重",
        r"检查点",
        r"存盘",
    ),
    "zero_stage": (
        r"\bzero[- ]?(stage[- ]?)?[0-3]\b",
        r"\bzero stage\b",
        r"\bzero(-| )?(offload|optimi[sz]er)\b",
        r"\bdeepspeed stage\b",
        r"zero[-\s]*[0-3]",
        r"zero\s*阶段",
    ),
    "tp_size": (
        r"\b(change|increase|decrease|reduce|lower|raise|switch|adjust|tune)\b.{0,12}\b(tp|tensor[- ]parallel\w*)\b",
        r"\b(tp|tensor[- ]parallel\w*)\b.{0,12}\b(size|degree)\b.{0,20}\b(change|smaller|larger|lower|higher)",
        r"\btp\s*[=]?\s*\d+\s*(->|→|to)\s*\d+",
        r"(改|调整|调|换|降低|提高|减小|增大).{0,6}(tp|张量并行)",
        r"(tp|张量并行).{0,8}(怎么分|分组|切分|改|调整|有问题)",
    ),
    "mc2": (r"\bmc2\b", r"matmul[_ ]?all[_ ]?reduce", r"通算融合", r"mc2"),
    "hccl_timeout": (
        r"time[ -]?outs?\b",
        r"\bhangs?\b",
        r"\bhung\b",
        r"EI000\d",
        r"HCCL_(CONNECT|EXEC)_TIMEOUT",
        r"超时",
        r"卡死",
        r"挂住",
    ),
    # the caching allocator's fragmentation (narrower than memory at the same words)
    "fragmentation": (
        r"\bfragment\w*",
        r"expandable[_ ]segments",
        r"碎片",
    ),
    "memory": (
        r"\bmemory\b",
        r"\bOOM\b",
        r"out of memory",
        r"\bhbm\b",
        r"\bfragmentation\b",
        r"显存",
        r"内存",
        r"碎片",
    ),
    # a defect of the vendor stack or the framework ("is this a CANN bug?", "torch_npu 适配有问题")
    "software_bug": (
        r"\b(cann|torch[_ ]?npu|driver|firmware|deepspeed|megatron|mindspeed|framework|vendor)\b"
        r".{0,30}\b(bug|broken|defect|regression)",
        r"\b(bug|broken|defect)\b.{0,20}\b(in|of|with) (cann|torch[_ ]?npu|the driver|the framework)",
        r"\bopen an issue with (huawei|ascend)",
        r"\b(bump(?:ing|ed)?|upgrad\w*|updat\w*|downgrad\w*)\b.{0,15}\b(cann|torch[_ ]?npu|driver|firmware)\b",
        r"(升级|更新|降级|换).{0,6}(cann|torch_?npu|驱动|固件)",
        r"\b(driver|firmware)\b.{0,20}\b(problem|issue|version|fault)",
        r"(驱动|固件).{0,6}(问题|版本|故障)",
        r"(cann|torch_?npu|驱动|固件|框架|deepspeed|megatron|mindspeed).{0,12}(bug|缺陷|适配|有问题)",
        r"\bbug\b",
    ),
    "capacity": (
        r"\b(not enough|too little|insufficient|lack of|short of|more) (npu |gpu |device |raw )?"
        r"(compute|computing power|compute power|capacity|flops)\b",
        r"\b(add|adding|buy|need|get|throw|throwing)\b(?: \w+){0,3}? (more|extra|additional|"
        r"bigger|faster) (npus?|gpus?|machines?|nodes?|servers?|cards?|hardware)\b",
        r"\b(more|faster|bigger) (npus?|gpus?|machines?|servers?|cards?) (help|fix|solve)",
        r"\b(compute|computing power|compute power|capacity|flops)\s+(is |are )?(insufficient|"
        r"not enough|too (low|little|small)|lacking|short)\b",
        r"算力不(够|足)",
        r"(加|增加|多加|再加|买|扩).{0,3}(几台|几张|一些|点)?(机器|卡|节点|服务器|npu|NPU)",
    ),
    # the capture itself: "is the Free real or the profiler's?", "does how this was captured
    # matter?", "是不是采集本身的开销？" (before host_dispatch: "profiling overhead" is not dispatch)
    "profiler": (
        r"\bprofil(er|ing)\b.{0,30}\b(overhead|itself|config|settings?|on|off|caus|inflat|distort)",
        r"\b(overhead|caused|inflated|distorted|created) (of|by|from) (the )?(profil|captur|tracing)",
        r"\bhow (this|it|the (trace|profile|data)) was (captured|collected|profiled|recorded)\b",
        r"\b(with_stack|record_shapes|profile_memory|level ?2)\b",
        r"\bprofil(er|ing) (noise|artifact|artefact)s?\b",
        r"\b(noise|artifact|artefact)s? (of|from) (the )?profil",
        r"\b(free|idle|gaps?)\b.{0,40}\b(actually |really )?real\b",
        r"\breal\b.{0,30}\b(free|idle|gaps?)\b",
        r"采集(本身|开销|配置|方式|参数)",
        r"(profil\w*|采集).{0,8}(开销|导致|造成|影响|引起)",
        r"(空闲|free|Free).{0,12}(真实|真的|是真的)",
        r"(真实|真的).{0,12}(空闲|free|Free)",
    ),
    # the host blocking on the device: "is it a sync?", "loss.item() every step?", "同步"
    "host_sync": (
        r"(?<!no_)\bsync(hroni[sz](e|es|ed|ing|ation))?\b",
        r"\.item\(\)|\bitem\(\)",
        r"\.cpu\(\)",
        # "同步" as what the host does, not "同步存一次checkpoint" (a synchronous save)
        r"(?<!不)同步(?!\s*(存|保存|写|读|加载|下载|上传|更新|checkpoint|ckpt))",
    ),
    # a device slowed by heat or power (before "hardware", which also lists these words)
    "throttling": (
        # (a CPU / cgroup throttled is the host's quota: host_dispatch)
        r"(?<!cpu[- ])(?<!cgroup )(?<!cfs )\bthrottl(?!\w*\b.{0,30}\b(cgroup|cpu (limit|quota)|cfs)\b)",
        r"\boverheat",
        r"\bover[- ]?temperature\b",
        r"\bdown-?clock",
        r"\bthermal\b",
        r"\b(too )?hot\b",
        r"\bclock (speed|frequency|rate)\b",
        r"\bfrequency (drop|dropped|is low|lower)",
        r"\bpower[- ]?(cap|capp(ed|ing)|limit(ed|s)?|budget|throttl\w*)\b",
        r"\b(full|rated|nominal|max(imum)?) (clock|frequency)\b",
        r"\b(clocks?|frequency) (is |are )?(low|lower|reduced|capped)\b",
        r"降频",
        r"过热",
        r"温度",
        r"频率",
        r"功耗(墙|上限|限制|封顶)",
        r"限(功耗|功率)",
        r"功率(墙|上限|限制)",
    ),
    # device memory bandwidth (before "memory", which is about capacity)
    "memory_bandwidth": (
        r"\b(memory|hbm|dram) bandwidth\b",
        r"\bhbm\b.{0,20}\b(slow|degraded|bad|bandwidth)",
        r"\bmemory[- ]bound\b",
        r"\bbandwidth[- ]bound\b.{0,20}\b(hbm|memory|dram)\b",
        r"(显存|HBM|hbm|内存)\s*带宽",
        r"访存",
        # "is it the HBM?": the memory itself suspected (not its capacity: usage, OOM, peak)
        r"\b(is it|is this|could it be|blame|suspect|problem with|issue with|wrong with) (the )?hbm\b"
        r"(?!.{0,25}\b(usage|peak|capacity|full|oom|size|allocat|fragment))",
        r"(hbm|HBM)\s*(的问题|有问题|坏了|出问题|故障|劣化|异常)",
    ),
    # something else on the NPU: another process, job or container on the same device
    "device_shared": (
        r"\b(another|other|second|a different) (process|job|container|program|task)s?\b.{0,40}\b(npu|card|device|gpu)\b",
        r"\b(npu|card|device)\b.{0,30}\b(shared|in use by|used by|occupied)\b",
        r"\bshar(ed|ing) (the )?(npu|card|device)\b",
        r"(其他|别的|另一个)(进程|任务|作业|容器|程序).{0,10}(占用|用|跑|在)",
        r"(卡|npu|NPU|设备).{0,8}(被占用|被占|共用|共享)",
    ),
    # ranks on different software versions (within a software bug: the narrower suspect)
    "version": (
        r"\bversions?\b.{0,25}\b(mismatch\w*|differ\w*|inconsistent|not (the )?same|out of sync)",
        r"\b(mismatch\w*|different|inconsistent|mixed|same)\b.{0,25}\bversions?\b",
        r"版本.{0,6}(不一致|不同|不匹配|不配套|不统一|混用|一致|相同|对不上)",
        r"(不同|不一致|不一样)的?.{0,6}版本",
        r"不配套",
    ),
    # a compiled model split into several graphs (torch.compile / torchair graph breaks)
    "graph_break": (
        r"\bgraph[- _]?breaks?\b",
        r"\bbreak(s|ing)?\b.{0,20}\bgraphs?\b",
        r"\bgraphs?\b.{0,25}\b(split|broken|several|multiple|pieces|fragment\w*)\b",
        r"\b(split|broken)\b.{0,15}\b(into|in)\b.{0,15}\b(graphs|pieces|subgraphs)\b",
        r"图中断|断图|图被(拆|切|打断|分)|(拆|切|分)成了?.{0,6}(段|个图|子图)|子图",
    ),
    # operators placed on the AI CPU instead of the AI Core (fallbacks)
    "aicpu": (
        r"\bai[- _]?cpu\b",
        r"\bfall(s|en|ing)? ?back\b.{0,20}\bcpu\b",
        r"(跑|回退|落|放)到?\s*(ai\s*cpu|AI\s*CPU|aicpu|AICPU)",
        r"(ai\s*cpu|AI\s*CPU|aicpu|AICPU)\s*(上|算子)",
    ),
    "host_dispatch": (
        r"\bcpu (limit|quota|request)s?\b",
        r"\bcpu[- ]?throttl",
        r"\bcgroups?\b",
        r"\bcfs\b.{0,20}\bthrottl",
        r"(cpu|CPU).{0,6}(限制|配额|limit|quota)|cgroup",
        r"\bhost[- ]?(dispatch|bound|side|overhead)",
        r"\bdispatch",
        r"\blaunch (delay|latenc|overhead)",
        r"\bcpu[- ]?bound\b",
        r"\b(cpu|python) overhead\b",
        r"\btask[_ ]queue",
        r"\b(slow|late)\b.{0,15}\b(to )?(launch|dispatch|submit)",
        r"\b(launch|launching|dispatch|dispatching)\b.{0,20}\b(too )?(slow|late|behind)\b",
        r"\b(old|older|slow|weak)(er)? (cpu|host|processor)s?\b",
        r"(cpu|主机|host).{0,6}(太慢|太弱|老旧|较老|太老)",
        r"下发",
        r"host\s*(侧|端|瓶颈|bound)",
        r"cpu\s*(瓶颈|bound|侧)",
        r"调度(慢|开销|瓶颈)",
    ),
}
# a question that puts a cause forward ("could it be GC?", "是不是垃圾回收", "should I switch
# ZeRO-3 to ZeRO-2?") or states one as the problem ("显存不够", "硬件故障", "load imbalance")
_SUSPECT = re.compile(
    r"\b(could|can|might|may|would|will)\s+(it|this|that|they)\b|\b(is|are|was|were)\s+(it|this|that|they|there)\b"
    r"|\bcould\b|\bmight\b|\bcaus(e|es|ed|ing)\b|\bsuspect|\bmaybe\b|\bperhaps\b|\bprobably\b|\bcaused by\b|\bdue to\b|\bbecause of\b"
    r"|\bblame|\bshould (i|we)\b|\bwould .{0,30}\bhelp|\bthe (problem|cause|culprit|reason|issue)\b"
    r"|\brelated\b|\bconnected\b|\bhave to do with\b|\bresponsible\b"
    r"|\b(feels|looks|seems) like\b|\bmy (bet|guess)\b|\bi (think|guess|bet)\b"
    r"|\bi'?m (guessing|thinking|betting)\b|\b(pretty|quite|fairly) sure\b|\bwhole story\b"
    r"|\bdoes .{0,40}\bmatter\b|\bactually real\b|\bis (that|this|the) .{0,30}\breal\b"
    r"|\bwe'?re done\b|\bare we done\b|\b(swap|replace|rma)\b"  # a proposed fix suspects
    r"|是不是|会不会|是否|怀疑|可能|难道|导致|引起|造成|要不要|该不该|需不需要|有没有|吗|嘛|么"
    r"|感觉|像是|好像|似乎|估计|猜|换掉|更换|替换"
    r"|不够|不足|故障|不均|坏了|问题",
    re.I,
)

_CAUSAL = re.compile(r"\bcaused by\b|\bdue to\b|\bbecause of\b|\bblame\b|由于|因为", re.I)
_CAUSE_BEFORE = re.compile(r"\bcaus(e|es|ing)\b|\bleads? to\b|导致|引起|造成", re.I)


#: Words that put the network between the nodes (RoCE / RDMA, NICs, switches) in question ...
_BETWEEN_NODES = re.compile(
    r"(?<![a-z])(roce|rdma|nics?|switch(es)?|optics?|optical modules?|transceivers?|infiniband)"
    r"(?![a-z])(?! (zero|stage|to|from|off|on)\b)"
    r"|\bbetween (the )?(two |\d+ )?(nodes|machines|boxes|servers|hosts)\b|\bcross[- ]node\b"
    r"|\binter[- ]node\b|两台机器之间|机器之间|节点之间|跨机|跨节点|机间|交换机|网卡|光模块",
    re.I,
)
# ... and words that put the links inside one server (HCCS, the board) in question.
_ON_BOARD = re.compile(
    r"(?<![a-z])(hccs|sio|pcie|on[- ]board|intra[- ]node|inside (the|one) (node|server|machine))"
    r"(?![a-z])"
    r"|机内|板内|节点内|同一台机器",
    re.I,
)


def network_scope(text: str) -> str:
    """Which network a question suspects: ``network`` (between nodes), ``board`` (inside one).

    "is it the RoCE between the two machines?" -> ``network``; "is the HCCS broken?" -> ``board``;
    both or neither named -> ``""``. A verdict on the network is then said of that part.
    """
    between = _BETWEEN_NODES.search(text) is not None
    board = _ON_BOARD.search(text) is not None
    return "network" if between and not board else "board" if board and not between else ""


def asks_yes_no_after(text: str) -> bool:
    """Whether a yes/no question follows the first question of ``text`` ("… 多久？是 0 号卡的问题吗？")."""
    rest = re.split(r"[?？]", text, maxsplit=1)[1:]
    return bool(rest) and _match_any(_KIND_LEX["yes_no"], rest[0].lower()) is not None


def find_hypotheses(text: str, kind: str) -> tuple[str, ...]:
    """Suspected causes the question names (:data:`HYPOTHESES`), in order of appearance.

    A cause word counts when the question puts it forward (a yes/no question, or a word of
    suspicion or of a fault: "could it be", "是不是", "导致", "不够", "故障"); "which rank has the
    most memory?" names memory but suspects nothing. A link named with its ranks ("is link 3-11
    slow?") is ``link``; "network" is not also counted for the same words.
    """
    low = _MEMORY_SAVING.sub(lambda m: " " * len(m.group(0)), text.lower())
    low = _COMM_SYNC.sub(lambda m: " " * len(m.group(0)), low)
    cue = _SUSPECT.search(text)
    if kind != "yes_no" and cue is None:
        return ()
    hits: list[tuple[int, str]] = []
    ends: dict[str, int] = {}
    for name, pats in _HYPOTHESIS_LEX.items():
        m = _match_any(pats, low)
        if m is not None:
            hits.append((m.start(), name))
            # where its last mention ends ("bad NIC? should I get the NIC swapped": the NIC is
            # named again after the cue)
            ends[name] = max(x.end() for p in pats for x in re.finditer(p, low, re.I))
    # at one position the narrower suspect wins ("overheating": throttling before hardware)
    hits.sort(key=lambda h: (h[0], h[1] not in _NARROW, h[1]))
    # The cause put forward follows the words of suspicion ("the job hung for 40 s, is it the
    # network?": the hang is the symptom, the network the suspect); a cause named after a causal
    # word ("because of", "导致") first, then one after the first cue, then the rest in order.
    causal = _CAUSAL.search(text)
    after_causal = [h for h in hits if causal is not None and h[0] >= causal.end()][:1]
    effect = _CAUSE_BEFORE.search(text)  # "显存不够导致卡死", "does GC cause the hang?"
    before_effect = [h for h in hits if effect is not None and h[0] < effect.start()][-1:]
    # a suspect whose words hold or touch the cue ("某张卡坏了", "HCCS链路坏了": the card, the
    # link, not "坏了" alone) counts as after it
    after_cue = [h for h in hits if cue is not None and ends[h[1]] >= cue.start()][:1]
    first = after_causal or before_effect or after_cue
    # "ZeRO-3 is slow, is DeepSpeed / torch_npu just broken?": a defect of the stack is what is
    # put forward; the causes named beside it describe the symptom
    first = [h for h in hits if h[1] == "software_bug"][:1] or first
    return tuple(n for _, n in first) + tuple(n for h in hits if h not in first for n in (h[1],))


# -- targets --------------------------------------------------------------------------------------
_RANKWORD = r"(?:ranks?|cards?|devices?|npus?)"
_RANK_RANGE = (
    # "ranks 8-15", "ranks 8 to 15", "cards 0..7", "ranks 8–15"
    re.compile(rf"\b{_RANKWORD}\s*(\d+)\s*(?:-|–|—|~|\.\.|to|through|thru)\s*(\d+)\b", re.I),
    # "8到15号卡", "第8到15张卡", "8-15号卡", "8~15卡", "卡8-15", "rank 8到15"
    re.compile(
        r"第?\s*(\d+)\s*(?:到|至|-|–|—|~)\s*第?\s*(\d+)\s*(?:张|号|个)?\s*(?:卡|rank|设备)", re.I
    ),
    re.compile(r"(?:卡|rank)\s*(\d+)\s*(?:到|至|-|–|—|~)\s*(\d+)", re.I),
    # "0-5号和18-23号卡": a range with 号 whose card word comes after the next one
    re.compile(
        r"(?<!月)(?<!月\s)(?<![\d.])(\d+)\s*(?:到|至|-|–|—|~)\s*(\d+)\s*号"
        r"(?!\s*(?:机|节点|服务器|主机|线|口))"
    ),
)
#: "The first 8 cards", "前8张卡": the ranks 0 .. N-1 (a count after "first" / 前 is a range).
_FIRST_N = re.compile(
    rf"\bfirst\s+(\d+)\s+{_RANKWORD}\b|(?<![\d到至])前\s*(?=\d+\s*(?:张|个)?\s*(?:卡|rank))(\d+)",
    re.I,
)
# A rank is named by "rank N", "card N", "device N", "N号卡", "卡N", "第N张卡" or a bare "N卡";
# a number before a rank word with a classifier or in a count context ("16 cards", "8张卡",
# "用2卡试跑", "16卡，TP=8", "2 nodes x 8 NPUs") is a count (:data:`_COUNTS`), never a rank.
_RANK_PATTERNS = (
    re.compile(rf"\b{_RANKWORD}\s*[#:]?\s*(\d+)", re.I),
    re.compile(r"第\s*(\d+)\s*(?:张|号|个)?\s*(?:卡|rank|设备|节点)", re.I),
    re.compile(r"(\d+)\s*号\s*(?:卡|设备)"),
    # a bare "9号" ("9号和7号谁慢"), not "3号机" (a node) or a date ("12月3号")
    re.compile(r"(?<!月)(?<!月\s)(?<![\d.])(\d+)\s*号(?!\s*(?:机|节点|服务器|主机|线|口))"),
    re.compile(r"(\d+)\s*(?:卡|设备)"),
    # "卡12", "rank 12"; not "每卡32张图" / "每卡 4 个 micro-batch" (a per-card count of something)
    re.compile(
        r"(?<!每)(?<!每张)(?:卡|rank)\s*(\d+)(?!\s*(?:张|个|块|条|份|次|层|步|[Kk万亿]|(?:ms|MB|GB|%)))",
        re.I,
    ),
)
_COUNTS = (
    # "8张卡", "2 张卡", "16块NPU", "4个rank", "两台机器16张卡" (not "第8张卡")
    re.compile(
        r"(?<!第)(?<!第\s)(?<![\d.到至~～—–-])(?<![到至~～—–-]\s)(\d+)\s*(?:张|块|个|台)\s*(?:卡|npu|gpu|设备|rank|机器|节点)",
        re.I,
    ),
    # a bare "N卡" followed by what a count is followed by ("16卡，", "16卡的集群", "8卡里", "2卡试跑")
    re.compile(
        r"(?<!第)(?<!第\s)(?<![\d.到至~～—–-])(\d+)\s*卡(?!\s*号)(?=\s*(?:的\s*)?(?:集群|任务|作业|训练|机器|环境|规模|"
        r"里|中|上|下|时|后|以上|左右|之中|以内|试跑|跑|做|并行|数据并行|纯数据并行|纯|扩|/|[,，、;；)）]|$|"
        # "32卡大模型训练", "32卡llama训练", "16卡 TP8 PP2", "16卡的profiling", "16卡场景下"
        r"大模型|模型|预训练|微调|推理|场景|混合|总共|一共|全部|规模|"
        r"的\s*(?:profiling|数据|采集|性能)|(?!(?i:step|free|hccl|bubble|comm|idle|mem|rank))[A-Za-z]))"
    ),
    # a bare "N卡" after a verb of quantity ("用2卡", "共16卡", "只采了2卡")
    re.compile(
        r"(?:用|共|有|采了|采|只|这|那|在|机|到|所有|全部|整个|从|比|x|×|\*)\s*(\d+)\s*卡(?!\s*号)",
        re.I,
    ),
    # English: the number before a rank word is a count ("16 cards", "2 nodes x 8 NPUs", "8-rank")
    re.compile(
        r"\b(\d+)(?:-|\s*)(?:ranks?|cards?|npus?|devices?|gpus?|nodes?|machines?|servers?)\b", re.I
    ),
)
#: A further range right after a rank range ("ranks 0-7 and 16-23", "ranks 0-3, 8-11").
_MORE_RANGE = re.compile(
    r"\s*(?:,|and|&|or)\s*(\d+)\s*(?:-|–|—|~|to)\s*(\d+)\b(?!\s*(?:%|ms|us|µs|s\b|gb|mb))", re.I
)
_RANK_LIST = re.compile(
    rf"\b{_RANKWORD}\s+(\d+(?:\s*(?:,|and|&|vs\.?|versus|or|和|与|跟|、)\s*(?:{_RANKWORD}\s*)?\d+)+)",
    re.I,
)
#: "3、7、11、15号卡", "3,7,11和15号卡", "0号、4号和8号卡": every number of the list is a rank
#: (a full-width comma separates clauses, not list items: "CP=4，3、7号卡").
_RANK_LIST_ZH = re.compile(
    r"(?<![\d.])((?:\d+\s*号?\s*(?:、|,|和|与|跟|及)\s*)+\d+)\s*号\s*(?:卡|设备|rank)", re.I
)
_LINK_PATTERNS = (
    re.compile(r"(\d+)\s*(?:→|->|⇒|=>|—>|↔|<->)\s*(\d+)"),
    re.compile(
        r"\blinks?\s+(?:from\s+)?(?:rank\s*)?(\d+)\s*(?:-|–|to|and)\s*(?:rank\s*)?(\d+)", re.I
    ),
    re.compile(r"\bbetween\s+(?:ranks?\s*)?(\d+)\s+and\s+(?:rank\s*)?(\d+)", re.I),
    re.compile(r"(?:链路|连接)\s*(\d+)\s*(?:-|–|到|和|与)\s*(\d+)"),
    re.compile(
        r"(?:rank\s*|第)?(\d+)\s*(?:号卡|号|卡)?\s*(?:和|与|跟|到)\s*(?:rank\s*|第)?(\d+)\s*(?:号卡|号|卡)?\s*之间",
        re.I,
    ),
    re.compile(r"(\d+)\s*(?:-|–|到|和|与)\s*(\d+)\s*(?:号卡)?\s*(?:之间|间的|的链路|链路)"),
    # "0号卡到8号卡的链路", "从 rank 0 到 rank 8 的链路"
    re.compile(
        r"(?:从\s*)?(?:rank\s*|第)?(\d+)\s*(?:号卡|号|卡)\s*(?:到|至|→)\s*(?:rank\s*|第)?(\d+)\s*"
        r"(?:号卡|号|卡)\s*(?:的|之间的|间的)?\s*(?:链路|连接|传输|带宽)",
        re.I,
    ),
)
_STAGE_PATTERNS = (
    re.compile(r"(?<![a-z])(?:pp\s*)?stage\s*[#:]?\s*(\d+)", re.I),
    re.compile(r"(?:流水线)?阶段\s*(\d+)"),
    re.compile(r"第\s*(\d+)\s*(?:个)?\s*(?:stage|阶段|流水线阶段)", re.I),
)
#: The first pipeline stage named without its number.
_FIRST_STAGE = re.compile(
    r"\bfirst (?:pp |pipeline )?stage\b|前面(?:那个|的|这个)?\s*(?:stage|阶段)|第一个\s*(?:stage|阶段)",
    re.I,
)
_STEP_LIST = re.compile(
    r"\b(?:steps|iterations|iters)\s*(\d+(?:\s*(?:,|，|、|and|&|or)\s*\d+)+)", re.I
)


_STEP_RANGE = re.compile(
    r"(?i)\b(?:steps?|iterations?|iters?)\s*(\d+)\s*(?:-|–|to|through|\.\.)\s*(\d+)\b"
    r"|第\s*(\d+)\s*(?:到|至|-|–|~)\s*第?\s*(\d+)\s*步"
)
#: Widest step range expanded into :attr:`Query.steps`.
MAX_STEP_RANGE = 64

#: After a number: a time or a share, so "step 77ms" is a step time, not step 77.
_NOT_AN_ID = r"(?!\d)(?!(?:\.\d+)?\s*(?:ms|us|µs|s\b|sec|毫秒|微秒|秒|%))"
_STEP_PATTERNS = (
    re.compile(rf"\b(?:step|iteration|iter)s?\s*[#:]?\s*(\d+){_NOT_AN_ID}", re.I),
    re.compile(r"第\s*(\d+)\s*(?:步|个\s*step|个迭代|次迭代|轮)", re.I),
    re.compile(rf"(?:step|迭代)\s*(\d+){_NOT_AN_ID}", re.I),
)
_CONTEXT = re.compile(
    r"\b("
    + "|".join(PARALLEL)
    + r")\s*(?:=|:|＝|是|为)?\s*(\d+)\b|\b(\d+)\s*-?\s*way\s+("
    + "|".join(PARALLEL)
    + r")\b",
    re.I,
)
_WORLD = re.compile(
    r"(\d+)\s*(?:张)?\s*卡\s*(?:的)?\s*(?:集群|任务|作业|训练|机器|环境|规模)|\b(\d+)[- ](?:ranks?|cards?|npus?|devices?|gpus?)\b(?!\s*\d)",
    re.I,
)
_GROUP_WORD = re.compile(
    r"\bgroups?\b|\bdomains?\b|\bcomm(unication)? group|通信域|通信组|\b域\b", re.I
)


def _spans(q: str, pats: Sequence[re.Pattern[str]]) -> list[tuple[int, int, re.Match[str]]]:
    return [(m.start(), m.end(), m) for p in pats for m in p.finditer(q)]


def _overlaps(a: tuple[int, int], spans: Sequence[tuple[int, int]]) -> bool:
    return any(a[0] < e and s < a[1] for s, e in spans)


def _find_context(q: str) -> tuple[dict[str, int], list[tuple[int, int]]]:
    ctx: dict[str, int] = {}
    spans: list[tuple[int, int]] = []
    for m in _CONTEXT.finditer(q):
        name = (m.group(1) or m.group(4) or "").upper()
        val = m.group(2) or m.group(3)
        if name and val:
            ctx[name] = int(val)
            spans.append((m.start(), m.end()))
    for m in _WORLD.finditer(q):  # a job size is never a rank (its value: _find_world)
        spans.append((m.start(), m.end()))
    for m in _HARDWARE.finditer(q):  # "910B", "Atlas 800T A2": a product, never a rank
        spans.append((m.start(), m.end()))
    for m in _CAPTURED_STEPS.finditer(q):  # "grabbed a profile of steps 10-13": what was captured
        spans.append((m.start(), m.end()))
    return ctx, spans


#: Steps said as what was captured ("a profile of steps 10-13", "采了第10到13步"): context, not a
#: question about those steps.
_CAPTURED_STEPS = re.compile(
    r"(?i)\b(?:profil(?:e[ds]?|ing)|captur(?:e[ds]?|ing)|collect(?:ed|ing)|record(?:ed|ing)|"
    r"trac(?:e[ds]?|ing))\b[^.?!;]{0,20}?\bsteps?\s*\d+\s*(?:-|–|to|through|\.\.)\s*\d+"
    r"|\bsteps?\s*\d+\s*(?:-|–|to|through)\s*\d+\s+(?:were |was )?"
    r"(?:profiled|captured|collected|recorded|traced)"
    r"|(?:采|采集|抓|录)了?\s*第?\s*\d+\s*(?:到|至|-|–|~)\s*\d+\s*步"
)


#: Ascend hardware and product names: their numbers are never ranks or steps.
_HARDWARE = re.compile(
    r"(?i)(?:ascend\s*)?(?<![\w.])[39]10(?:[a-z]\d?|pro)?(?![\d.])|\batlas\s*\d{3}[a-z]*(?:\s*a\d)?"
)
#: The line that starts the question of a pasted report ("Question: …", "问：…").
_ASK_MARK = re.compile(r"(?im)^\s*(?:question|q|ask|问题|问|提问)\s*[:：]\s*")
#: A question word or mark: the line holds the question.
_ASKS = re.compile(
    r"[?？]|(?i:\b(?:why|what|which|where|how|is|are|should|can|could)\b)|为什么|怎么|什么|哪|吗|呢|如何"
)


#: A clause that rules causes out ("we ruled out the dataloader and the network", "it's not
#: the network", "通信和数据加载都已经排除了", "RDMA链路查过都正常", "不是这两个"): the whole
#: clause.
_RULED_OUT = re.compile(
    r"(?i)\b(?:ruled? out|excluded|eliminated|(?:it|that)(?:'s| is) not|isn't|wasn't|not due to)\b(?:[^.;?!,(。；？！，]|\([^)]*\))*"
    # "the network team says the RoCE switches look clean", "the dataloader is fine"
    r"|[^.;?!,。；？！，]*\b(?:looks?|looked|seems?|seemed|are|is|was|were|came back|checked(?: out)?)"
    r" (?:all )?(?:clean|fine|ok(?:ay)?|healthy|normal)\b[^.;?!,。；？！，]*"
    # "no rank is late", "no node looks slow": the user's own finding, not the question
    r"|\bno (?:single )?(?:rank|card|node|link|device|npu|gpu)s? (?:is|are|was|were|seems?|looks?|arrives?)"
    r" (?:late|slow|slower|behind|lagging|an outlier|last)\b"
    # "links fine, host cpu idle": a check named with its result, no verb
    r"|[^.;?!,。；？！，]*\b(?:links?|network|nics?|roce|hccs|cpu|cpus|temps?|temperatures?|clocks?"
    r"|switch(?:es)?|optics?|cables?|memory|disk|storage)\s+(?:all\s+)?(?:fine|ok(?:ay)?|clean"
    r"|healthy|normal|idle)\b[^.;?!,。；？！，]*"
    # "the TP collectives run at normal HCCS bandwidth": a measurement found normal
    r"|[^.;?!,。；？！，]*\b(?:runs?|running|ran|are|is|were|was|get|gets|got|reach(?:es)?)\s+at\s+"
    r"(?:the\s+)?(?:normal|full|expected|usual|nominal|good|line[- ]rate)\b[^.;?!,。；？！，]*"
    r"|[^，。,；;？?！!]*(?:排除|排查过|(?:检|查|测|确认)过|(?:都|均|一切|也|看着|看起来|看上去)(?:很|挺|是)?正常|没(?:有)?问题|不是这(?:两|几)?个"
    r"|没(?:有)?(?:报错|异常|告警)|一模一样|完全一样"
    # "hccn_tool看链路正常", "host CPU也基本空闲": a check the user made came back normal (not
    # "不正常", not "正常吗？")
    r"|(?<![不否])正常(?![吗吧呢嘛？?])|(?:基本|很|挺|都|也)(?:是)?空闲(?![吗吧呢嘛？?])"
    # "各卡算子和链路都差不多": the same everywhere, found by the user
    r"|(?:都|均|也)(?:差不多|一样|相同|相近|接近))"
    r"[^，。,；;？?！!]*"
)


def ruled_out_causes(q: str) -> tuple[str, ...]:
    """The suspected causes named inside the clauses that rule causes out, in order."""
    low = q.lower()
    spans = [(m.start(), m.end()) for m in _RULED_OUT.finditer(q)]
    spans = [(a, b) for a, b in spans if _without_ruled_out(q)[a:b].strip() == ""]
    found: list[tuple[int, str]] = []
    for name, pats in _HYPOTHESIS_LEX.items():
        for a, b in spans:
            m = _match_any(pats, low[a:b])
            if m is not None:
                found.append((a + m.start(), name))
                break
    return tuple(dict.fromkeys(n for _, n in sorted(found)))


def _without_ruled_out(q: str) -> str:
    """``q`` with the clauses that rule causes out blanked (same length, so spans still hold).

    A clause that is itself the question ("网络没问题吧？", "is it not the network?") is kept.
    """

    def blank(m: re.Match[str]) -> str:
        asked = re.match(r"\s*[?？]", q[m.end() :]) or re.search(r"[吗吧呢嘛]\s*$", m.group(0))
        return m.group(0) if asked else " " * len(m.group(0))

    return _RULED_OUT.sub(blank, q)


_ZH_NUM = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ORDINAL = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6}
_NODE_WORD = r"(?:nodes?|servers?|machines?|hosts?|box(?:es)?)"
_NODE_ZH = r"(?:节点|机器|服务器|主机)"
#: A node named by its number: "node 1", "server #2", "2号机器", "2号机", "节点1", "机器 2"
#: (not "两机16卡", a job size).
_NODE_NUM = re.compile(
    rf"(?i)\b(?:node|server|machine|host|box)\s*#?\s*(\d+)\b(?!\s*(?:cards?|npus?|ranks?|gpus?|devices?|卡|x\b))"
    rf"|(\d+)\s*号\s*(?:{_NODE_ZH}|机)"
    rf"|{_NODE_ZH}\s*(\d+)(?!\d)(?!\s*[卡张])"
)
#: A node named by its place: "the second node", "第三台（机器）", "第2个节点".
_NODE_ORD = re.compile(
    rf"(?i)\bthe (first|second|third|fourth|fifth|sixth) {_NODE_WORD}\b"
    rf"|第\s*([一二两三四五六七八九]|\d+)\s*(?:台\s*{_NODE_ZH}?|个\s*{_NODE_ZH})"
)


def _find_nodes(q: str) -> tuple[list[int], bool, list[tuple[int, int]]]:
    """Nodes named in ``q`` (see :attr:`Query.nodes`), whether counted from 1, and their spans."""
    found: list[int] = []
    spans: list[tuple[int, int]] = []
    ordinal = False
    for m in _NODE_ORD.finditer(q):
        w = m.group(1) or m.group(2)
        n = _ORDINAL.get(w.lower()) if m.group(1) else _ZH_NUM.get(w) or int(w)
        if n is not None:
            found.append(n)
            spans.append((m.start(), m.end()))
            ordinal = True
    for m in _NODE_NUM.finditer(q):
        if _overlaps((m.start(), m.end()), spans):
            continue
        found.append(int(m.group(1) or m.group(2) or m.group(3)))
        spans.append((m.start(), m.end()))
    return list(dict.fromkeys(found)), ordinal and len(found) == len(spans), spans


#: A question about every rank but the ones named: an exclusion word and "the other ranks".
_EXCEPT = re.compile(r"(?i)除了|除去|\b(other than|apart from|besides|except(?: for)?)\b")
_OTHERS = re.compile(
    r"(?i)(其他|其余|别的|剩下的?)\s*(的)?\s*(卡|rank|设备|npu)|"
    r"\b(the )?(other|remaining|rest of the)\s+(ranks?|cards?|npus?|devices?)\b|\bthe others\b"
    r"|还有(哪|别的|其他)"
)


def focus_start(q: str) -> int:
    """Where the question of a pasted report begins (``0``: the whole text is the question).

    A message of three or more non-empty lines is a report with its question at the end: the
    question is the part after a "Question:" / "问：" line start, else its last non-empty line
    when that line asks something (a question mark or word). The lines before it are context:
    parallel sizes and the job size are read from them; ranks, steps, topics, the kind of
    question and the suspects are read from the question alone ("Profiled steps 10-12", "we
    upgraded the driver", "显存也够" in a job description are not what is asked).
    """
    lines = [ln for ln in q.splitlines() if ln.strip()]
    if len(lines) < 3:
        return 0
    marks = list(_ASK_MARK.finditer(q))
    if marks:
        return marks[-1].start()
    last = lines[-1]
    if not _ASKS.search(last):
        return 0
    return q.rindex(last)


def _find_counts(q: str) -> list[tuple[int, int]]:
    """Spans of counts of ranks/cards/nodes ("16 cards", "8张卡", "2卡试跑"): never rank targets."""
    return [(m.start(), m.end()) for p in _COUNTS for m in p.finditer(q)]


_ZH_NUM = {"单": 1, "一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "八": 8}
# job sizes: "2 nodes x 8 NPUs" (a product), "2机16卡" (the cards are the total; "每机8卡" is per
# node), "world size 16", "16-rank job", "on 64 cards", "32卡训练", "16张卡上"
_NODES_TIMES = re.compile(
    r"\b(\d+)\s*(?:nodes?|machines?|servers?|hosts?)\s*(?:x|×|\*|with|of)\s*(\d+)\s*"
    r"(?:npus?|cards?|devices?|gpus?|ranks?|(?:ascend\s*)?910[a-z]?\d?)(?:\s+each)?"
    r"|\b(\d+)\s*[x×*]\s*(\d+)\s*(?:npus?|cards?|gpus?|devices?|(?:ascend\s*)?910[a-z]?\d?)\b",
    re.I,
)
_NODES_CARDS_ZH = re.compile(
    r"(\d+|[单一两二三四五六八])\s*(?:机|台机器|台服务器|台|个节点|节点)\s*(每(?:机|台|个?节点)|各)?\s*(\d+)\s*(?:张|块)?\s*(?:卡|npu|NPU)"
)
_WORLD_EN = re.compile(
    r"\bworld[ _-]?size\s*(?:=|:|is|of)?\s*(\d+)"
    r"|\b(?:of|among|across|on|over)\s+(?:all\s+|the\s+)?(\d+)[- ](?:ranks?|cards?|npus?|devices?|gpus?)\b"
    r"|(?<!\btop )(?<!\bfirst )(?<!\blast )(?<!\bother )(?<!\bthe )\b(\d+)[- ](?:ranks?|cards?|npus?|devices?|gpus?)\b(?!\s*\d)"
    # "8 cards on server 0": the cards of one node, not the job
    r"(?!\s+(?:on|of|in)\s+(?:the\s+)?(?:first\s+|second\s+)?(?:node|server|machine|host|box)\b)"
    r"(?!\s+(?:are|were|is|was|look|seem|show|have|had|slow|lag|wait)\w*\b)",
    re.I,
)
_WORLD_ZH = re.compile(
    r"(?<!第)(?<!第\s)(?<![\d.到至~～—–-])(?<!其中)(?<!有)(?<!这)(?<!那)(\d+)\s*(?:张|块)?\s*卡(?!\s*号)"
    r"(?!\s*(?:都|全部|也)?\s*(?:慢|比较慢|很慢|特别慢|异常|有问题|不对))"
    r"|比\s*(\d+)\s*(?:张|块)?\s*卡(?!\s*号)"
)


def _find_world(
    q: str, counts: Sequence[tuple[int, int]]
) -> tuple[list[int], list[tuple[int, int]]]:
    """Job sizes the question states, and their spans (see :attr:`Query.world_sizes`).

    A Chinese "N卡" / "N张卡" counts only inside a ``counts`` span (a count, not "12卡为什么慢").
    """
    found: list[tuple[int, int]] = []
    spans: list[tuple[int, int]] = []
    for m in _NODES_TIMES.finditer(q):
        a, b = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        found.append((m.start(), int(a) * int(b)))
        spans.append((m.start(), m.end()))
    for m in _NODES_CARDS_ZH.finditer(q):
        g = m.group(1)
        nodes = int(g) if g.isdigit() else _ZH_NUM.get(g, 1)
        cards = int(m.group(3))
        found.append((m.start(), nodes * cards if m.group(2) else cards))
        spans.append((m.start(), m.end()))
    for m in _WORLD_EN.finditer(q):
        if _overlaps((m.start(), m.end()), spans):
            continue
        found.append((m.start(), int(m.group(1) or m.group(2) or m.group(3))))
        spans.append((m.start(), m.end()))
    for m in _WORLD_ZH.finditer(q):
        g = 1 if m.group(1) else 2
        if _overlaps((m.start(), m.end()), spans) or not _overlaps((m.start(g), m.end(g)), counts):
            continue
        found.append((m.start(), int(m.group(g))))
        spans.append((m.start(), m.end()))
    out: list[int] = []
    for _, n in sorted(found):
        if n > 0 and n not in out:
            out.append(n)
    return out, spans


# ids written in a form no rank or step can take: "rank -1", "rank 7.5", "rank 1e3", "-1号卡",
# "step -2"; read before the integer patterns so that "rank 7.5" is never read as rank 7
_BAD_NUM = r"[-−]\s?\d+(?:\.\d+)?(?:e[+-]?\d+)?|\d+\.\d+(?:e[+-]?\d+)?|\d+e[+-]?\d+"
_BAD_RANK = (
    re.compile(rf"\b{_RANKWORD}\s*[#:]?\s*({_BAD_NUM})(?![A-Za-z0-9_.])", re.I),
    re.compile(rf"第\s*({_BAD_NUM})\s*(?:张|号|个)?\s*(?:卡|rank|设备)", re.I),
    re.compile(rf"(?<![A-Za-z0-9_.])({_BAD_NUM})\s*号\s*(?:卡|设备)?"),
    re.compile(rf"(?:卡|rank)\s*({_BAD_NUM})(?![A-Za-z0-9_.])", re.I),
)
_BAD_STEP = (
    re.compile(rf"\b(?:step|iteration|iter)s?\s*[#:]?\s*({_BAD_NUM})(?![A-Za-z0-9_.])", re.I),
    re.compile(rf"第\s*({_BAD_NUM})\s*(?:步|个\s*step|个迭代|次迭代|轮)", re.I),
    re.compile(rf"(?:迭代)\s*({_BAD_NUM})(?![A-Za-z0-9_.])", re.I),
)


# a bare "N卡" (not "N号卡", "第N张卡", "8-15卡"): a rank or a job size, depending on the profile
_BARE_CARD = re.compile(r"(?<!第)(?<!第\s)(?<![\d.到至~～—–-])(\d+)\s*卡(?!\s*号)")


def _find_bad_ids(q: str) -> tuple[list[tuple[str, str]], list[tuple[int, int]]]:
    """Rank/step ids no profile can hold, as written, and their spans (see :attr:`Query.bad_ids`)."""
    out: list[tuple[str, str]] = []
    spans: list[tuple[int, int]] = []
    for kind, pats in (("step", _BAD_STEP), ("rank", _BAD_RANK)):
        for s, e, m in sorted(_spans(q, pats), key=lambda t: t[0]):
            if _overlaps((s, e), spans):
                continue
            text = re.sub(r"\s", "", m.group(1)).replace("−", "-")
            spans.append((s, e))
            if (kind, text) not in out:
                out.append((kind, text))
    return out, spans


def _find_links(q: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    out: list[tuple[int, int]] = []
    spans: list[tuple[int, int]] = []
    for s, e, m in sorted(_spans(q, _LINK_PATTERNS), key=lambda t: t[0]):
        if _overlaps((s, e), spans):
            continue
        pair = (int(m.group(1)), int(m.group(2)))  # a rank to itself is kept: validation says
        spans.append((s, e))
        if pair not in out:
            out.append(pair)
    return out, spans


MAX_RANGE_RANKS = 4096
"""Widest rank range expanded into :attr:`Query.ranks` (a wider one is kept as written only)."""


def _find_ranks(
    q: str,
    skip: Sequence[tuple[int, int]],
    counts: Sequence[tuple[int, int]] = (),
    ranges: list[tuple[int, int]] | None = None,
) -> tuple[list[int], bool]:
    """Ranks in ``q`` outside ``skip`` spans, and whether they came as a range/list.

    A match that touches a ``counts`` span ("8 NPUs 16" after "2 nodes x 8 NPUs") is not a rank.
    A reversed range ("ranks 15-8") is read in increasing order; a range wider than
    :data:`MAX_RANGE_RANKS` is not expanded. Every range is appended to ``ranges`` as written.
    """
    found: list[tuple[int, int]] = []
    taken: list[tuple[int, int]] = list(skip)
    is_range = False
    for m in _FIRST_N.finditer(q):  # "the first 8 cards", "前8张卡": ranks 0 .. N-1
        n = int(m.group(1) or m.group(2))
        if not 1 < n <= MAX_RANGE_RANKS + 1:  # ("8 cards" alone would be a count: not here)
            continue
        if ranges is not None:
            ranges.append((0, n - 1))
        found.extend((m.start() + i, r) for i, r in enumerate(range(n)))
        taken.append((m.start(), m.end()))
        is_range = True
    for s, e, m in _spans(q, _RANK_RANGE):
        if _overlaps((s, e), taken) or _overlaps((s, e), counts):
            continue
        a, b = int(m.group(1)), int(m.group(2))
        if a == b:
            continue
        if ranges is not None:
            ranges.append((a, b))
        lo, hi = min(a, b), max(a, b)
        if hi <= lo + MAX_RANGE_RANKS:
            found.extend((s + i, r) for i, r in enumerate(range(lo, hi + 1)))
        taken.append((s, e))
        is_range = True
        # "ranks 0-7 and 16-23": more ranges joined to a rank range are ranks too
        pos = e
        while (more := _MORE_RANGE.match(q, pos)) is not None:
            a, b = int(more.group(1)), int(more.group(2))
            lo, hi = min(a, b), max(a, b)
            if ranges is not None:
                ranges.append((a, b))
            if hi <= lo + MAX_RANGE_RANKS:
                found.extend((more.start(1) + i, r) for i, r in enumerate(range(lo, hi + 1)))
            taken.append((more.start(), more.end()))
            pos = more.end()
    for m in [*_RANK_LIST.finditer(q), *_RANK_LIST_ZH.finditer(q)]:
        if _overlaps((m.start(), m.end()), taken) or _overlaps((m.start(), m.end()), counts):
            continue
        for d in re.finditer(r"\d+", m.group(1)):
            found.append((m.start(1) + d.start(), int(d.group())))
        taken.append((m.start(), m.end()))
        is_range = True
    for s, e, m in _spans(q, _RANK_PATTERNS):
        if _overlaps((m.start(1), m.end(1)), taken) or _overlaps((s, e), counts):
            continue
        found.append((m.start(1), int(m.group(1))))
    out: list[int] = []
    for _, r in sorted(found):
        if r not in out:
            out.append(r)
    return out, is_range and len(out) > 1


def _find_ints(
    q: str, pats: Sequence[re.Pattern[str]], skip: Sequence[tuple[int, int]]
) -> list[int]:
    out: list[int] = []
    for _, _, m in sorted(_spans(q, pats), key=lambda t: t[0]):
        if _overlaps((m.start(1), m.end(1)), skip):
            continue
        v = int(m.group(1))
        if v not in out:
            out.append(v)
    return out


def _word_in(word: str, q: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", q, re.I) is not None


#: Operator types that are also English words: written in lower case they name the operator only
#: when an operator word follows ("add ops", "cast kernels"), not in "do they add up to".
_ENGLISH_OPS = frozenset(
    [
        "add",
        "cast",
        "max",
        "min",
        "sub",
        "less",
        "equal",
        "range",
        "fill",
        "select",
        "slice",
        "sort",
        "index",
        "where",
        "split",
        "pad",
        "copy",
        "sum",
        "mean",
        "all",
        "any",
        "greater",
        "tile",
        "pow",
        "sign",
        "floor",
        "round",
    ]
)
#: Words that ask about an operator's backward (gradient) kernels.
_BACKWARD_WORDS = re.compile(r"\bbackward|\bbackprop|\bgrad(?:ient)?s?\b|反向|梯度", re.I)
#: How a gradient kernel's type extends its forward type (Conv3DBackpropFilter, GeluGrad).
_GRADIENT_SUFFIX = re.compile(r"(?:Backprop|Backward|Grad)", re.I)


def _is_gradient_of(op_type: str, forward: str) -> bool:
    """Whether ``op_type`` is a gradient kernel of ``forward`` (its name then Backprop/Grad...)."""
    return (
        op_type.lower().startswith(forward.lower())
        and _GRADIENT_SUFFIX.match(op_type[len(forward) :].lstrip("_")) is not None
    )


_OP_WORD_AFTER = re.compile(r"\s*(?:ops?|operators?|kernels?|算子)\b", re.I)


def _op_in(op: str, q: str) -> bool:
    """Whether the question names operator type ``op`` (see :data:`_ENGLISH_OPS`)."""
    pat = rf"(?<![A-Za-z0-9_]){re.escape(op)}(?![A-Za-z0-9_])"
    for m in re.finditer(pat, q, re.I):
        text = m.group(0)
        if (
            text.lower() not in _ENGLISH_OPS
            or text != text.lower()
            or _OP_WORD_AFTER.match(q, m.end())
        ):
            return True
    return False


def _groups_named(
    q: str, groups: Sequence[str], ctx_spans: Sequence[tuple[int, int]]
) -> tuple[str, ...]:
    """Groups the question names *as a group*; "TP=8" or "the TP ranks" in passing are context."""
    out = []
    has_word = _GROUP_WORD.search(q) is not None
    for g in groups:
        if len(g) < 2:
            continue
        for m in re.finditer(rf"(?<![A-Za-z0-9_]){re.escape(g)}(?![A-Za-z0-9_])", q, re.I):
            if _overlaps((m.start(), m.end()), ctx_spans):
                continue
            if g.upper() in PARALLEL and not has_word:
                continue  # a parallel name in passing ("the TP ranks") is not a filter
            if len(g) <= 4 and not has_word:
                continue
            out.append(g)
            break
    return tuple(out)


def _match_any(pats: Sequence[str], low: str) -> re.Match[str] | None:
    best: re.Match[str] | None = None
    for p in pats:
        m = re.search(p, low, re.I)
        if m and (best is None or m.start() < best.start()):
            best = m
    return best


_QUESTION_WORD = re.compile(r"which|what|who|where|哪|谁", re.I)
#: "why" hits that ask why; the others ("cause", "原因", "导致") only name a cause, and inside a
#: yes/no question ("is the network the cause?", "会不会是网络导致的？") they ask for a verdict.
_WHY_WORD = re.compile(
    r"why|how come|what|explain|为什么|为何|怎么回事|咋回事|怎么|什么导致|(?:什么|啥)原因|原因是(?:什么|啥)",
    re.I,
)


def asks_yes_no(text: str) -> bool:
    """Whether the question is put as a yes/no question ("is rank 9 slower than rank 2?").

    A why-question is not one, whatever follows its question word ("8到15号卡为什么比其他卡慢？").
    """
    low = text.lower()
    yes_no = _match_any(_KIND_LEX["yes_no"], low)
    why = _match_any(_KIND_LEX["why"], low)
    return yes_no is not None and (why is None or why.start() > yes_no.start())


_ASKS_BANDWIDTH = re.compile(
    r"\bhow (fast|quick)\b|\bwhat('s| is| are)?( the)?( \w+)? (bandwidth|speed|throughput)"
    r"|\b(bandwidth|throughput)s? (of|does|do|per|on|for)\b|\bhow much bandwidth\b"
    r"|带宽(是|有|为)?多(少|大)|多少带宽|(速度|速率)(是|有)?多(少|快)|多快",
    re.I,
)


def asks_bandwidth(text: str) -> bool:
    """Whether the question asks for measured bandwidth ("how fast are the links?", "带宽是多少")."""
    return _ASKS_BANDWIDTH.search(text) is not None


#: "Where is the problem?": an overview, not "which rank" (its "哪" asks where, not which rank).
_WHERE_PROBLEM = re.compile(
    r"问题(?:出)?在哪(?:里|儿)?|哪(?:里|儿)(?:有|出了?)问题|\bwhere(?:'s| is) the (?:problem|issue)s?\b"
)


_SENTENCE = re.compile(r"[^.!?。！？]*[?？]")


def question_part(low: str) -> str:
    """The one sentence that ends in a question mark, when the text states more before it.

    "… except rank 5 which waits the least. rank 5's matmuls are as fast. what is rank 5
    doing?": the context before says "which" in passing; the question is the last sentence.
    """
    asked = [m.group(0).strip() for m in _SENTENCE.finditer(low) if m.group(0).strip(" ?？")]
    if len(asked) != 1:  # no question mark, or several questions asked together
        return low
    last = asked[-1]
    return last if len(last) < len(low.strip()) else low


def find_kind(low: str, n_targets: int) -> str:
    """The kind of answer: the first lexicon hit in a fixed precedence (see :data:`KINDS`).

    When the text states context before its question, the question (its last sentence ending
    in a question mark) decides first; the whole text when that sentence says nothing.
    """
    part = question_part(low)
    if part != low:
        kind = find_kind(part, n_targets)
        if kind:
            return kind
    for kind in ("help", "evidence", "fix_first", "data"):
        if _match_any(_KIND_LEX[kind], low):
            return kind
    if n_targets == 0 and _WHERE_PROBLEM.search(low):
        return "overview"
    if n_targets >= 2 and _match_any(_COMPARE, low):
        return "compare"
    hits = {k: _match_any(_KIND_LEX[k], low) for k in ("how_much", "which", "why", "yes_no")}
    # the question word that comes first decides ("why ... which" is a why)
    present = [(m.start(), k) for k, m in hits.items() if m is not None]
    if present:
        # "is ... which ..." -> which; a yes/no opener only decides when nothing else is asked
        non_yn = [(s, k) for s, k in present if k != "yes_no"]
        yn = hits["yes_no"]
        if yn is not None and non_yn:
            first = min(non_yn)
            w = hits[first[1]]
            # "is rank 10 a straggler?", "is rank 3 holding the job back?": a yes/no question
            # whose "which" hit is a word, not a question word
            if (
                first[1] == "which"
                and yn.start() < first[0]
                and w is not None
                and not _QUESTION_WORD.match(w.group(0))
            ):
                return "yes_no"
            # "could it be caused by the network?" / "会不会是网络导致的？": the only "why" is a
            # word naming a cause, and no question word asks why or what
            if (
                first[1] == "why"
                and w is not None
                and not _WHY_WORD.search(low)
                and not any(k in ("which", "how_much") for _, k in non_yn)
            ):
                return "yes_no"
            return first[1]
        return min(present)[1]
    if _match_any(_KIND_LEX["overview"], low):
        return "overview"
    return ""


#: A change made to save memory ("after last week's memory-saving changes", "we do need the
#: memory savings", "为了省显存改了点东西"): context about what was done, not a memory question.
_MEMORY_SAVING = re.compile(
    r"memory[- ]sav\w*|sav(?:e|es|ed|ing)\s+(?:\w+\s+){0,2}memory|(?:省|节省|节约|降低|减少)\s*(?:点|些)?\s*(?:显存|内存)"
)

#: A gradient / parameter synchronization (collectives), not the host waiting for the device:
#: "grad sync", "梯度同步", "按bucket同步", "...allreduce、再broadcast回去的同步函数".
_COMM_SYNC = re.compile(
    r"(?:梯度|参数|权重|bucket|分桶|通信|all-?reduce|broadcast|reduce)[^，。,.?？!！;；]{0,16}同步"
    r"|同步\s*(?:梯度|参数|权重)"
    r"|\b(?:grad(?:ient)?s?|param(?:eter)?s?|weights?|buckets?|all-?reduce)\s+sync\w*",
    re.I,
)


def find_topics(low: str) -> tuple[str, ...]:
    """Topics of the question, in order of first appearance."""
    low = _MEMORY_SAVING.sub(lambda m: " " * len(m.group(0)), low)
    hits = []
    for t in TOPICS:
        m = _match_any(_TOPIC_LEX[t], low)
        if m is not None:
            hits.append((m.start(), t))
    return tuple(t for _, t in sorted(hits))


# Per-rank component questions ("which rank has the most Free?")
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
#: Operator categories named in words (the keys of ``analyzers._common.OP_CATEGORIES``).
_OP_CATEGORY_WORDS = (
    ("optimizer", r"\boptimi[sz]er\b|优化器|\badamw?\b"),
    (
        "attention",
        r"\battention (?:op|operator|kernel)s?\b|flash ?attention|(?<![a-z])fa(?![a-z])|注意力",
    ),
    ("matmul", r"\bmat ?muls?\b|\bgemms?\b|矩阵乘"),
)
#: "How long do <these operators> take (per step)?": a time asked, not a saving.
_OP_TIME = re.compile(
    r"how (?:long|much time)|\btakes? (?:per step|each step)|多久|多长时间|多少时间|耗时多少|"
    r"每步.{0,6}(?:耗时|时间)|"
    + r"how many (?:compute )?(?:kernels?|operators?|ops|launches)|多少个?(?:计算)?(?:算子|kernel)",
    re.I,
)
#: "How many (compute) kernels per step does rank 0 run?": every compute kernel counted.
_KERNEL_COUNT = re.compile(
    r"how many (?:compute |device )?(?:kernels?|operators?|ops|launches)|多少个?(?:计算)?(?:算子|kernel)",
    re.I,
)
_SAVING = re.compile(r"\bsave|\bgain|\bfix|节省|省|收益|修复|优化后", re.I)


def op_category(text: str) -> str:
    """The operator category a question names, or ``""``.

    ``optimizer``, ``attention``, ``matmul`` by their words; ``compute`` when the question counts
    every compute kernel ("how many kernels per step").
    """
    named = next((c for c, pat in _OP_CATEGORY_WORDS if re.search(pat, text, re.I)), "")
    return named or ("compute" if _KERNEL_COUNT.search(text) else "")


_TOP_OPS = (
    r"(which|what) .*\b(operators?|ops?|kernels?)\b.*\b(most|longest|largest|highest|top|dominat)",
    r"\btop \d* ?(operators?|ops?|kernels?|op types?)\b",
    r"\b(most|longest)[- ]running (operators?|ops?|kernels?)",
    r"(operators?|ops?|kernels?)( types?)? (take|takes|taking|spend|spends|use|uses) the most",
    r"哪(类|个|种|些|一类)\s*.{0,6}算子.*(最多|最长|最大|最高|最久|最耗时|最花时间|最费时)",
    r"耗时最(多|长|大)的.{0,6}算子",
    r"算子.{0,6}耗时(最多|最长|排名)",
)


def _component_question(low: str) -> tuple[str, str] | None:
    """(component column, ``max``/``min``) for "which rank has the most/least <component>"."""
    m = _WHICH_RANK.search(low)
    if not m:
        return None
    low = re.split(r"[?？。!！,，;；]|\.\s", low[m.end() :])[0]
    most, least = _MOST.search(low), _LEAST.search(low)
    if not (most or least):
        return None
    extreme = "min" if least and not (most and most.start() < least.start()) else "max"
    for col, pat in _COMPONENTS:
        if re.search(pat, low, re.I):
            return col, extreme
    return None


# "which rank / 哪张卡" asks for a rank's identity (a rank named beside it is context: "I only
# grabbed rank 0's profile. Which rank is the straggler?")
_ASKS_RANK = re.compile(
    r"\b(?:which|what) (?:one|rank|card|device|npu|gpu)s?\b|\bwho\b|哪(?:一)?(?:张|个|块)|哪个\s*rank|是哪(?!(?:儿|里)?来)",
    re.I,
)
# a slow rank as the thing asked about ("is there a slow rank?", "有没有慢卡？")
_SLOW_RANK = re.compile(
    r"\bslow(?:est|er)? (?:rank|card|device|npu|gpu|node)s?\b|\bstraggl|快慢卡|慢卡|慢节点|拖后腿"
    r"|\b(?:any|some|one)\b[^?.]{0,25}\b(?:ranks?|cards?|npus?|devices?|nodes?)\b[^?.]{0,15}\bslow"
    r"|\b(?:any|some|one) of (?:them|these|those)\b[^?.]{0,20}\bslow"
    r"|\b(?:any|some|one|a)\s+(?:rank|card|npu|device|gpu)s?\b[^?.]{0,25}\b(?:drag|hold)"
    r"|(?:某|一|有)\s*(?:张|个|块)\s*(?:卡|rank|设备).{0,10}(?:慢|拖累|拖慢|拖了)",
    re.I,
)


def _timeout_beyond_settings(text: str) -> bool:
    """Whether ``text`` speaks of a timeout or hang other than by naming an HCCL setting."""
    rest = re.sub(r"\bHCCL_\w+", " ", text, flags=re.I).lower()
    return _match_any(_TOPIC_LEX["timeout"], rest) is not None


def route(q: Query) -> str:
    """The planner route of a parsed question (one of :data:`INTENTS`), from its slots only.

    Precedence: help; special capabilities named by their topic (baseline comparison, mc2,
    timeouts, memory, launch delays, environment); per-rank component and top-operator
    questions; "what to fix first"; data completeness; compare (two ranks or operators); then
    the target (link, stage, ranks, steps) and the topic (network, pipeline, steps,
    communication/compute/host category, operators) decide; an overview or a slow/problem word
    without more gets the diagnosis overview; anything else is not understood.
    """
    k, t = q.kind, set(q.topics)
    if k == "help":
        return "help"
    if "baseline" in t:
        return "compare_profiles"
    if "mc2" in t:
        return "mc2"
    if "timeout" in t and not (k == "fix_first" and not _timeout_beyond_settings(q.text)):
        # ("what do I fix first? was going to bump HCCL_CONNECT_TIMEOUT": a plan, not a hang)
        return "hccl_timeout"
    if "memory" in t:
        return "memory"
    if "dispatch_delay" in t:
        return "host_dispatch"
    if q.component:
        return "rank_component"
    if k == "evidence":
        return "evidence"
    if k == "fix_first":
        return "fix_first"
    if k == "data":
        return "data_quality"
    if "env" in t and k in ("yes_no", "which", "overview", "") and not (t & {"network", "slow"}):
        return "env_check"
    if q.nodes and not q.ranks and not q.links:
        return "which_slow_rank"  # "is node 1 slower than node 0?": where the slowness is
    if k == "compare" and (len(q.ranks) > 2 or (len(q.ranks) == 2 and "operators" not in t)):
        return "explain_rank"  # "why is rank 5 slower than rank 3?": each rank's role
    if k == "compare" and (len(q.ranks) >= 2 or q.ops):
        return "compare_ops"
    if k == "which" and len(q.ranks) == 1 and _ASKS_RANK.search(q.text) and "operators" not in t:
        return "which_slow_rank"  # the rank named is context, the question asks which rank
    if q.ranks and k == "yes_no" and "slow" in t and not q.links and "network" not in t:
        return "explain_rank"  # "ranks 8-15 have a big Bubble, are they the slow ones?"
    if q.links or "network" in t:
        return "slow_link"
    if q.stages or "pipeline" in t:
        return "pipeline_bubble"
    if not q.ranks and k == "yes_no" and _SLOW_RANK.search(q.text):
        return "which_slow_rank"  # "is there a slow rank?": the verdict, then the culprit
    if len(q.ranks) == 1:
        if "operators" in t and k in ("which", "how_much") and "slow" not in t:
            return "top_ops"
        return "explain_rank"
    if (
        "operators" in t
        and not q.ranks
        and k != "why"
        and "steps" not in t
        # "the alltoallv ops look long: is the all-to-all the bottleneck?": a category question
        and not {"communication", "category"} <= t
    ):
        return "compare_ops"
    if "trend" in t:
        return "step_trend"
    if "steps" in t or (q.steps and not q.ranks):
        return "step_events"
    if q.ranks and k == "which":
        return "which_slow_rank"
    if len(q.ranks) >= 2:
        return "explain_rank"  # "why are ranks 8-15 slow?": each rank's role
    if k == "which" and re.search(
        r"\b(rank|card|node|device|npu|machine|server)s?\b|卡|节点|机器", q.text, re.I
    ):
        return "which_slow_rank"
    cat = t & {"communication", "compute", "host"}
    if cat and k in ("why", "yes_no", "which", "how_much", "overview", "") and "category" not in t:
        first = next(x for x in q.topics if x in cat)
        return "communication" if first == "communication" else "bottleneck"
    if "category" in t:
        return "bottleneck"
    if k == "how_much":
        return "how_much"
    if k == "which" and ("slow" in t or re.search(r"rank|card|device|npu|卡|节点", q.text, re.I)):
        return "which_slow_rank"
    if k in ("why", "overview") or "slow" in t:
        return "summarize"
    if k == "yes_no" and "operators" in t:
        return "compare_ops"
    if q.ops:
        return "compare_ops"
    if q.groups or q.transports:
        return "slow_link"
    return "unsupported"


_FOLLOW_UP = (
    re.compile(r"^\s*(and|what about|how about|and what about|same for|now)\b", re.I),
    re.compile(r"^\s*(那|那么)?.{0,12}(呢|如何)[？?]?\s*$"),
    re.compile(r"\b(its|that rank|this rank|the same rank)\b|^\s*它|它的", re.I),
)


def parse_question(
    text: str,
    *,
    groups: Sequence[str] = (),
    op_types: Sequence[str] = (),
    previous: Query | None = None,
    profile_ranks: Sequence[int] | None = None,
) -> Query:
    """Parse ``text`` into a :class:`Query` (slots, then the route).

    Args:
        text: The user's question (at most :data:`MAX_QUESTION_CHARS` characters are read).
        groups: Communication group names/hashes of the profile (to recognize them).
        op_types: Operator types of the profile (to recognize them).
        previous: The previous turn's query, for follow-ups ("and rank 13?", "那13号卡呢？").
        profile_ranks: The profile's ranks, when known: a bare Chinese "N卡" whose N is not one
            of them is a job size ("16卡为什么慢？" on ranks 0-15), not a rank; without them only
            its context decides ("12卡为什么慢？" is rank 12, "32卡训练" a job size).
    """
    full = text.strip()[:MAX_QUESTION_CHARS]
    lang = detect_language(full)
    # a pasted report: its sizes from all of it, the rest from the question at its end
    k = focus_start(full)
    q = full[k:].strip()
    ctx_all, _ = _find_context(full)
    world_all, _ = _find_world(full, _find_counts(full))
    bad_ids, bad_spans = _find_bad_ids(q)
    ctx, ctx_spans = _find_context(q)
    ctx = {**ctx_all, **ctx}
    ctx_spans = [*ctx_spans, *bad_spans]
    links, link_spans = _find_links(q)
    nodes, node_ordinal, node_spans = _find_nodes(q)
    ctx_spans = [*ctx_spans, *node_spans]  # a node's number is neither a rank nor a step
    stage_spans = [(m.start(), m.end()) for _, _, m in _spans(q, _STAGE_PATTERNS)]
    stages = _find_ints(q, _STAGE_PATTERNS, ctx_spans)
    if not stages and _FIRST_STAGE.search(q):  # "the first stage", "前面那个stage"
        stages = [0]
    step_spans = [(m.start(1), m.end(1)) for _, _, m in _spans(q, _STEP_PATTERNS)]
    # "steps 13 and 18", "steps 3, 5, 9": every number of the list is a step
    listed = [
        (m.start(1) + n.start(), m.start(1) + n.end(), int(n.group()))
        for m in _STEP_LIST.finditer(q)
        for n in re.finditer(r"\d+", m.group(1))
    ]
    # "steps 10-13", "第10到13步": every step of the range (up to MAX_STEP_RANGE of them)
    for m in _STEP_RANGE.finditer(q):
        if _overlaps((m.start(), m.end()), ctx_spans):
            continue  # "a profile of steps 10-13": what was captured
        lo, hi = (int(x) for x in (m.group(1, 2) if m.group(1) else m.group(3, 4)))
        if lo <= hi <= lo + MAX_STEP_RANGE:
            listed += [(m.start(), m.end(), v) for v in range(lo, hi + 1)]
    step_spans += [(a, b) for a, b, _ in listed]
    count_spans = _find_counts(q)
    if profile_ranks is not None:
        known = set(profile_ranks)
        count_spans += [
            (m.start(), m.end()) for m in _BARE_CARD.finditer(q) if int(m.group(1)) not in known
        ]
    world, world_spans = _find_world(q, count_spans)
    world = world or world_all
    rank_ranges: list[tuple[int, int]] = []
    ranks, is_range = _find_ranks(
        q,
        [*ctx_spans, *link_spans, *stage_spans, *step_spans],
        [*count_spans, *world_spans],
        rank_ranges,
    )
    steps = _find_ints(q, _STEP_PATTERNS, ctx_spans)
    steps += [v for _, _, v in listed if v not in steps]
    grp = _groups_named(q, groups, ctx_spans)
    trans = tuple(t for t in TRANSPORTS if _word_in(t, q))
    ops = tuple(o for o in op_types if len(o) >= 3 and _op_in(o, q))
    if ops and _BACKWARD_WORDS.search(q):
        # "Conv3D and its backward filter kernel": the named types' gradient kernels too
        ops += tuple(
            o for o in op_types if o not in ops and any(_is_gradient_of(o, named) for named in ops)
        )
    bare = tuple(
        int(m.group(1))
        for m in re.finditer(r"(?<![\w.])(\d+)(?![\w.])", q)
        if not _overlaps((m.start(), m.end()), [*ctx_spans, *world_spans])
    )
    low = q.lower()
    n_targets = max(len(ranks), len(ops), len(links))
    kind = find_kind(low, n_targets)
    part = question_part(low)
    part_nodes = _find_nodes(part)[0] if nodes and part != low else nodes
    if nodes and kind in ("why", "overview", "") and part != low and not part_nodes:
        # "the 8 cards on server 0 wait in every allreduce ... what's wrong?": the node is what
        # the user saw, the question asks why
        nodes, node_ordinal = [], False
    elif nodes and part != low and part_nodes and set(part_nodes) < set(nodes):
        # "node 0's cards wait, node 1's barely do. what is different on node 1?": the node the
        # question asks about, not the one described before it
        nodes = [n for n in nodes if n in part_nodes]
    # what the user already ruled out is neither a suspect nor what is asked about
    kept = _without_ruled_out(q)
    hyps = find_hypotheses(kept, kind)
    # "a profile of steps 10-13" says what was captured: not a question about steps
    topics = find_topics(_CAPTURED_STEPS.sub(" ", kept).lower())
    component = _component_question(low)
    if component is not None and ranks:
        component = None
    base = Query(
        q,
        lang,
        "",
        tuple(ranks),
        tuple(steps),
        grp,
        trans,
        ops,
        False,
        bare,
        component[0] if component else "",
        component[1] if component else "",
        kind,
        topics,
        tuple(stages),
        tuple(links),
        is_range,
        ctx,
        tuple(world),
        hyps[0] if hyps else "",
        hyps,
        tuple(bad_ids),
        tuple(rank_ranges),
        tuple(nodes),
        node_ordinal,
    )
    ruled = ruled_out_causes(q)
    if ruled:
        base = replace(base, ruled_out=ruled)
    if ranks and kind != "why" and _EXCEPT.search(q) and _OTHERS.search(q):
        # "除了0号卡，其他卡都正常吧？": a question about every other rank
        base = replace(base, ranks=(), except_ranks=tuple(ranks), rank_range=False)
    intent = route(base)
    if base.except_ranks:
        intent = "which_slow_rank"
    if (
        intent == "communication"
        and {"network", "link"} & set(ruled)
        and kind in ("why", "")
        and re.search(r"\bwait(?:s|ing)?\b|等(?!等)", low)
    ):
        # "带宽正常，但各卡都在allreduce里等，咋回事": the links found fine, the wait asked about:
        # the network answer says whom the ranks wait for, not the links
        intent = "slow_link"
    if intent == "unsupported" and re.search(r"\bwho(?:m)?\b|谁", low):
        # "who are they waiting for?", "在等谁？": the rank the others wait for
        intent = "which_slow_rank"
    if any(re.search(p, low, re.I) for p in _TOP_OPS) and intent not in (
        "compare_profiles",
        "help",
        "rank_component",
    ):
        intent = "top_ops"
    cat = "" if ops else op_category(q)
    if cat == "compute" and not (ranks or nodes):
        cat = ""  # "how many kernels run in that gap?": not a count per rank
    if (
        (ops or cat)
        and kind == "how_much"
        and (len(ranks) <= 1 or (cat == "compute" and len(ranks) == 2))
        and _OP_TIME.search(q)
        and not _SAVING.search(q)
        and intent not in ("compare_profiles", "help")
    ):  # "how long do rank 0's optimizer operators take per step, and on the others?"
        intent = "top_ops"
    base = replace(base, intent=intent, op_category=cat)
    if previous is not None and previous.intent not in ("help", "unsupported"):
        is_follow = any(p.search(q) for p in _FOLLOW_UP)
        has_target = bool(ranks or steps or grp or trans or ops or bare or links or stages)
        weak = intent == "unsupported" or (not kind and not topics)
        if (is_follow and (weak or not kind)) or (weak and has_target):
            if not ranks and bare and previous.ranks and not steps and not links:
                ranks = list(bare)
            follow = previous.intent
            if len(ranks) == 1 and previous.intent in (
                "which_slow_rank",
                "bottleneck",
                "summarize",
                "fix_first",
                "how_much",
                "slow_link",
                "pipeline_bubble",
                "step_events",
            ):
                follow = "explain_rank"  # "which rank is slow?" / "which link?" -> "and rank 5?"
            if not weak and intent not in ("unsupported", "summarize"):
                follow = intent
            return replace(
                previous,
                text=q,
                language=lang,
                intent=follow,
                follow_up=True,
                bare_numbers=bare,
                ranks=tuple(ranks) or previous.ranks,
                steps=tuple(steps) or (previous.steps if not ranks else ()),
                groups=grp or previous.groups,
                transports=trans or previous.transports,
                ops=ops or previous.ops,
                links=tuple(links) or previous.links,
                stages=tuple(stages) or previous.stages,
                context={**previous.context, **ctx},
                world_sizes=tuple(world),
                hypothesis=hyps[0] if hyps else "",
                hypotheses=hyps,
                bad_ids=tuple(bad_ids),
                rank_ranges=tuple(rank_ranges) if ranks else previous.rank_ranges,
            )
    return base


#: A second question joined to the first by "and"/"also" and an interrogative word.
_JOINED = re.compile(
    r"(?i)\s*(?:,\s*)?\b(?:and|also|plus)\b[,\s]+(?:also[,\s]+)?"
    r"(?=(?:is|are|does|do|did|was|were|what|which|why|how|should|can|could|where|when|who)\b)"
)
#: Intents that, after a first question, do not ask a new one ("why?", "what is the problem?"):
#: never split off.
_NOT_ON_THEIR_OWN = ("summarize", "bottleneck", "explain_rank", "help", "unsupported")
#: At most this many questions in one message are answered one by one.
MAX_PARTS = 3


#: A Chinese clause that asks something (a question word or a question particle).
_ZH_ASKS = re.compile(
    r"多少|什么|哪|为什么|为何|怎么|怎样|如何|是否|能否|吗|呢|要不要|该不该|能不能|有没有"
)


def _zh_clauses(text: str) -> list[str]:
    """A Chinese question joined to a second one by a comma ("先修什么，每项能省多少？"), split.

    Only when every clause asks something (:data:`_ZH_ASKS`): "32卡训练，每步多少时间？" is
    one question with its context.
    """
    if not re.search(r"[\u4e00-\u9fff]", text):
        return [text]
    parts = [x.strip() for x in re.split(r"[，,；;]", text) if x.strip()]
    if len(parts) < 2 or not all(_ZH_ASKS.search(x) for x in parts):
        return [text]
    return parts


def split_questions(text: str) -> list[str]:
    """Several questions in one message, each on its own (``[text]`` when it is one question).

    Split after each ``?``/``？`` (when every piece ends with one: a remark after a question is
    context, not a question) and where "and"/"also" joins a second interrogative clause
    ("which rank is slow and is the network the problem?"). Kept as one question unless the
    parts after the first ask something of their own (not "why?", "what is wrong?" or "is it
    rank 3?", which follow the first) and the parts ask different things; at most
    :data:`MAX_PARTS` parts.
    """
    pieces = [p.strip() for p in re.split(r"(?<=[?？])", text) if p.strip()]
    # "is rank 4 hung? it shows 40 s of wait": a remark after the question, not a second one
    if any(not p.endswith(("?", "？")) for p in pieces):
        return [text]
    parts: list[str] = []
    for p in pieces:
        for x in _JOINED.split(p):
            parts += _zh_clauses(x.strip()) if x.strip() else []
    if len(parts) < 2 or len(parts) > MAX_PARTS:
        return [text]
    intents = [parse_question(p).intent for p in parts]
    # "which one? what is wrong with it?": a follow-up on the first question, not a new one
    if any(i in _NOT_ON_THEIR_OWN for i in intents[1:]) or intents[0] in ("help", "unsupported"):
        return [text]
    if len(set(intents)) < len(intents):
        return [text]
    return parts
