"""Answers as projections of the one :class:`~advisor_chat.diagnosis.Diagnosis`.

Each function takes the diagnosis and the parsed question's slots and returns a
:class:`Projection`: the answer's lines (the first sentence answers the question), the causes it
relies on (their remedies become the typed suggestions), and the ranks to highlight. The text is
written from the diagnosis' own sentences (``summary``/``summary_zh``, ``label``/``label_zh``,
``dominant``/``dominant_zh``, ``headline``/``headline_zh``) and its numbers (impacts, gains,
shares), so every number is grounded in the diagnosis and the answer cannot contradict the
report.

Wording rule (issue 12): a rank that is a victim or "on the slow link" is never called
"not slow"; a rank with no role is "not behind any cause found", never told that others wait
for it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from advisor_chat.diagnosis.engine import OPTIMIZATION_LEAD, is_optimization
from advisor_chat.diagnosis.text import lower_first, ms, network_part, upper_first
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Diagnosis,
    Impact,
    Mechanism,
    RootCause,
)
from advisor_chat.i18n import say
from advisor_chat.i18n import t as msg
from advisor_chat.ingest.profile import cite_zh
from advisor_chat.tools.core import fmt_ranks
from advisor_chat.tools.render import clean_data, fence, fmt_num

if TYPE_CHECKING:
    from advisor_chat.analyzers.base import Finding
    from advisor_chat.diagnosis.hypotheses import Verdict


@dataclass
class Projection:
    """One projected answer (before tools' extra details, cases and suggestions)."""

    lines: list[str] = field(default_factory=list)
    causes: list[RootCause] = field(default_factory=list)
    plot_ranks: list[int] = field(default_factory=list)
    #: The verdict is "cannot tell from this data" (another judge of the question may decide).
    undecided: bool = False

    def add_cause(self, c: RootCause) -> None:
        """Cite ``c`` (once)."""
        if all(x.id != c.id for x in self.causes):
            self.causes.append(c)


# -- small phrases --------------------------------------------------------------------------------
_CATEGORY = {
    "compute": ("computation (a compute problem)", "计算（计算问题）"),
    "scheduling": (
        "the host side (a scheduling problem, the device idles waiting for work)",
        "主机侧（调度问题，设备空闲等待任务）",
    ),
    "communication": ("communication (a communication problem)", "通信（通信问题）"),
    "none": ("no single category", "没有单一的瓶颈类型"),
    "unknown": ("an undetermined category", "无法确定的类型"),
}
_HOW = {
    "collective_wait": ("waits at the collectives", "在集合通信中等待"),
    "bubble": ("waits in pipeline bubbles (receive wait)", "在流水线气泡（接收等待）中等待"),
    "slow_link_transit": ("loses transit time on the slow link", "在慢链路上多花传输时间"),
    "idle": ("sits idle", "空闲等待"),
    "own_time": ("loses time in its own work", "自身多花时间"),
    "slow_steps": ("loses time in the slow steps", "在变慢的步中损失时间"),
}
_VICTIM_VERB = {
    "collective_wait": ("waits {amt} at the collectives", "在集合通信中等待{amt}"),
    "bubble": (
        "waits {amt} in pipeline bubbles (receive wait)",
        "在流水线气泡（接收等待）中等待{amt}",
    ),
    "slow_link_transit": ("loses {amt} in transit", "多花传输时间{amt}"),
    "idle": ("sits idle {amt}", "空闲等待{amt}"),
    "slow_steps": ("loses {amt} in the slow steps", "在变慢的步中损失{amt}"),
    "": ("loses {amt}", "损失时间{amt}"),
}
#: A degradation cause's summary that already says the steps grow ("Steps get slower over the
#: run on ..." / "...的步长随训练逐步变长").
_GROWS_ALREADY = re.compile(r"^Steps get slower over the run|^[^，。：]{0,24}的步长随训练逐步变长")

#: A pipeline-stage culprit's own Impact (``how``) → the step component it measures.
_STAGE_PART = {
    "stage_computing": ("Computing", "计算时间"),
    "stage_communication": ("Communication (Not Overlapped)", "未被掩盖的通信时间"),
    "stage_free": ("Free time", "空闲时间"),
}
_RANKLIKE = ("rank", "ranks", "group", "stage")
_META = (Mechanism.NO_CULPRIT, Mechanism.NOT_ENOUGH_SIGNAL, Mechanism.DATA_ARTIFACT)
_JOB_LEVEL = (Mechanism.JOB_IDLE, Mechanism.EXPOSED_COMMUNICATION, Mechanism.JOB_HOTSPOT)


def _job_level(c: RootCause) -> bool:
    """A cause of the whole job (a job-level mechanism, or any mechanism blamed on the job)."""
    return c.mechanism in _JOB_LEVEL or c.culprit.kind == "job"


# Causes that are optimizations of a working job, not faults (``is_optimization``): fixed after
# the faults; one leads "what should I fix first?" only when it gains ``OPTIMIZATION_LEAD`` times
# what the largest fault's fix gains (never exposed communication beside a network fault). The
# diagnosis ranks the job's own costs the same way.


def us(v: float) -> str:
    """A time in µs for display, in ms with the diagnosis' own precision.

    The same figure reads the same in the headline, the bullets and the gain (``111 ms`` in the
    cause's summary is ``111 ms`` here too, not ``110.7 ms``): :func:`advisor_chat.diagnosis.text.ms`.
    """
    v = float(v)
    return ms(v) if abs(v) >= 1000 else fmt_num(v, "us")


def pct(share: float) -> str:
    """A 0..1 share as a percentage."""
    return fmt_num(float(share), "ratio")


def rank_word(ranks: Sequence[int], zh: bool) -> str:
    """``rank 3`` / ``ranks 8-15`` / ``3号卡`` / ``8-15号卡``."""
    rs = sorted(set(ranks))
    if zh:
        return f"{fmt_ranks(rs, sep='、')}号卡"
    return f"rank {rs[0]}" if len(rs) == 1 else f"ranks {fmt_ranks(rs)}"


def label(c: Culprit, zh: bool) -> str:
    """The culprit's label in the answer's language (built from its fields when empty)."""
    if zh and c.label_zh:
        return c.label_zh
    if not zh and c.label:
        return c.label
    if c.kind == "link" and c.link is not None:
        t = f" ({c.transport})" if c.transport else ""
        return say("project.link", zh, c_link=c.link[0], c_link_b=c.link[1], t=t)
    if c.kind == "stage" and c.stage is not None:
        rs = f" ({rank_word(c.ranks, zh)})" if c.ranks else ""
        return say("project.stage", zh, c_stage=c.stage, rs=rs)
    if c.kind in ("rank", "ranks", "group") and c.ranks:
        return rank_word(c.ranks, zh)
    if c.kind == "operator" and c.operator:
        return say("project.operator", zh, c_operator=c.operator)
    if c.kind == "steps":
        return say("project.events_in_single_steps", zh)
    if c.kind == "job":
        return say("project.the_whole_job", zh)
    return say("project.none", zh)


def link_label(c: Culprit, zh: bool) -> str:
    """A link culprit's label without its leading "link"/"链路" (for "the slow link 3→11")."""
    lab = label(c, zh)
    for w in ("link ", "Link ", "链路 ", "链路"):
        if lab.startswith(w):
            return lab[len(w) :]
    return lab


def summary(c: RootCause, zh: bool) -> str:
    """The cause's sentence without its final stop."""
    s = (c.summary_zh or c.summary) if zh else c.summary
    return s.strip().rstrip("。.")


def dominant(c: RootCause, zh: bool) -> str:
    """What dominates the culprit's time, in the answer's language ("" when unknown)."""
    return (c.dominant_zh if zh else c.dominant).strip()


def gain_phrase(c: RootCause, zh: bool) -> str:
    """The "fixing it saves about X per step" phrase with the kind of bound (empty without gain)."""
    if c.gain_us is None or c.gain_us <= 0:
        return ""
    g = us(c.gain_us)
    n_ev = len(c.culprit.events)
    if c.mechanism == Mechanism.STEP_EVENTS and n_ev:
        # the gain of removing every event, not of fixing the one rank/step a sentence names
        kind_en, kind_zh = (
            ("at most", "最多") if c.bound == BoundKind.UPPER_BOUND else ("about", "约")
        )
        if n_ev == 1:
            return say(
                "project.removing_the_stall_saves_per_step",
                zh,
                kind=(kind_zh if zh else kind_en),
                g=g,
            )
        return say(
            "project.removing_all_stall_events_saves_per",
            zh,
            n_ev=n_ev,
            kind=(kind_zh if zh else kind_en),
            g=g,
        )
    onset = c.metrics.get("onset_cost_per_step_us")
    if onset is not None and math.isfinite(onset) and "onset_step" in c.metrics:
        # slow from a step to the end of the capture: what it costs from then on, and the
        # capture's average (the figure causes are ranked by)
        st = int(c.metrics["onset_step"])
        return say("project.fixing_it_saves_about_per_step", zh, us=us(onset), st=st, g=g)
    if c.bound == BoundKind.UPPER_BOUND:
        return say("project.fixing_it_saves_at_most_per", zh, g=g)
    return say("project.fixing_it_saves_about_per_step_b", zh, g=g)


def gain_sentence(c: RootCause, zh: bool) -> str:
    """The gain phrase of ``c`` as its own sentence, ending with the cause's id.

    Placed right after the sentence about ``c`` (never after another cause's bullet), so the
    saving is read as belonging to that cause (trial item 7). A cause of several ranks (a stage,
    a group) names what is fixed: "fixing stage 0 (ranks 0-7) saves …", not "fixing it".
    """
    g = gain_phrase(c, zh)
    if c.culprit.kind in ("stage", "group", "ranks") and len(c.culprit.ranks) > 1 and g:
        lab = label(c.culprit, zh)
        g = (
            g.replace("修复后", f"修复{lab}后", 1)
            if zh
            else g.replace("fixing it", f"fixing {lab}", 1)
        )
    # the cause's own sentence already says what fixing it alone saves (late ranks in layers),
    # or states the gain's figure as a saving ("hiding all of it would save up to 39.2 ms")
    said = ("单独修复它" in c.summary_zh) if zh else ("Fixing it alone saves" in c.summary)
    if not g or said or _states_gain(c, zh):
        return ""
    return _sentence(g if zh else g[0].upper() + g[1:], zh)


def events_text(c: RootCause, zh: bool, limit: int = 8) -> str:
    """The (step, rank) list of a step-event cause."""
    ev = list(c.culprit.events)
    if not ev:
        return ""
    more = len(ev) - limit
    if zh:
        parts = [f"第 {s} 步的{r}号卡" for s, r in ev[:limit]]
        return "、".join(parts) + (f" 等 {len(ev)} 处" if more > 0 else "")
    parts = [f"(step {s}, rank {r})" for s, r in ev[:limit]]
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def _end(zh: bool) -> str:
    return "。" if zh else "."


def _sentence(text: str, zh: bool) -> str:
    text = text.strip()
    if not text:
        return ""
    if text[-1] in "。.!！?？":
        return text
    return text + _end(zh)


def _states_gain(c: RootCause, zh: bool) -> bool:
    """Whether the cause's own sentence states its gain's figure as a saving."""
    text = summary(c, zh)
    if not c.gain_us or us(c.gain_us) not in text:
        return False
    return "节省" in text if zh else re.search(r"\bsav(?:e|es|ed|ing)\b", text) is not None


def cause_bullet(c: RootCause, zh: bool, *, short: bool = False) -> str:
    """``- <summary> (<gain>)`` (the cause id goes to the answer's reference line).

    With ``short`` (the answer already stated the summary), only its title, the part before its
    first colon ("Communication is exposed on every rank"), marked as said above, and the gain.
    """
    g = gain_phrase(c, zh)
    text = summary(c, zh)
    if short:
        title = re.split(r"[:：]", text, maxsplit=1)[0].strip().rstrip("。.")
        text = f"{title}（见上）" if zh else f"{title} (above)"
    elif _states_gain(c, zh):
        g = ""  # the summary already says what fixing it saves
    if zh:
        return f"- {text}" + (f"；{g}" if g else "") + "。"
    return f"- {text}" + (f"; {g}" if g else "") + "."


def cause_operator_launches(c: RootCause, zh: bool) -> str:
    """``"96 Add launches per step are this cause's (33.3 ms per step): <title>."``, or ``""``.

    From the cause's ``operator_launches_per_step`` / ``operator_us_per_step`` metrics (the
    launches of its operator it blames, when only some of that type's are); said before the
    operator's totals so that both counts are labelled.
    """
    n = c.metrics.get("operator_launches_per_step")
    t_us = c.metrics.get("operator_us_per_step")
    if n is None or t_us is None:
        return ""
    op = c.culprit.operator
    title = re.split(r"[:：]", summary(c, zh), maxsplit=1)[0].strip().rstrip("。.")
    if zh:
        return f"其中该原因涉及的 {op} 每步 {n:.0f} 次，共 {us(t_us)}（{title}）；该类算子的全部调用如下。"
    return (
        f"{n:.0f} {op} launches per step, {us(t_us)} per step, are this cause's ({lower_first(title)}); "
        f"all {op} launches follow."
    )


def _real(d: Diagnosis) -> list[RootCause]:
    """Causes that blame something (not the no-culprit / not-enough-signal / data notes)."""
    return [c for c in d.causes if c.mechanism not in _META]


def _meta(d: Diagnosis, mech: Mechanism) -> RootCause | None:
    return next((c for c in d.causes if c.mechanism == mech), None)


def headline(d: Diagnosis, zh: bool) -> str:
    """The diagnosis headline (or "nothing stands out" only when the diagnosis is empty)."""
    h = (d.headline_zh or d.headline) if zh else d.headline
    if h.strip():
        return _sentence(h, zh)
    if not d.causes:
        return say("project.nothing_stands_out_the_diagnosis_found", zh)
    return _sentence(summary(d.causes[0], zh), zh)


def excluded_line(d: Diagnosis, zh: bool) -> str:
    """A sentence on steps excluded as data artifacts ("" when none)."""
    if not d.excluded_steps:
        return ""
    s = ", ".join(str(x) for x in d.excluded_steps)
    if zh:
        return f"step {s} 的设备记录不完整，已从分析中排除（数据问题，不是变慢）。"
    return f"Step {s} has incomplete device records and was excluded (a data artifact, not a slowdown)."


def notes_lines(d: Diagnosis, zh: bool, limit: int = 2) -> list[str]:
    """The diagnosis' caveats in the answer's language (never English notes in Chinese)."""
    notes = d.notes_zh if zh else d.notes
    return [_sentence(n[:1].upper() + n[1:], zh) for n in notes[:limit] if n.strip()]


def shares_line(d: Diagnosis, zh: bool) -> str:
    """Cluster-wide shares of the step (Computing, Communication Not Overlapped, Free, Bubble)."""
    names = (
        ("computing", "Computing", "计算"),
        ("communication_not_overlapped", "Communication (Not Overlapped)", "未被掩盖的通信"),
        ("free", "Free", "空闲（Free）"),
        ("bubble", "Bubble", "气泡（Bubble）"),
    )
    parts = [
        f"{zh_n if zh else en} {pct(d.shares[k])}"
        for k, en, zh_n in names
        if k in d.shares and d.shares[k] > 0
    ]
    if not parts:
        return ""
    step = f"（平均每步耗时 {us(d.step_time_us)}）" if zh and d.step_time_us > 0 else ""
    if zh:
        return "全集群步时间占比：" + "，".join(parts) + step + "。"
    st = f" (average step {us(d.step_time_us)})" if d.step_time_us > 0 else ""
    return "Cluster-wide share of the step: " + ", ".join(parts) + st + "."


def add_shares(p: Projection, d: Diagnosis, zh: bool) -> None:
    """Append :func:`shares_line` unless the answer already states those shares (one figure once).

    A no-culprit cause's summary carries the breakdown itself ("computing 89.7%, ... free 1.6%");
    the same shares again in the next sentence would say each figure twice.
    """
    sl = shares_line(d, zh)
    if not sl:
        return
    said = "\n".join(p.lines)
    figures = [pct(d.shares[k]) for k in ("computing", "free") if d.shares.get(k, 0) > 0]
    if figures and all(f in said for f in figures):
        return
    p.lines.append(sl)


# -- projections ---------------------------------------------------------------------------------
def _role_sentence(rank: int, c: RootCause, role: str, imp: Impact | None, zh: bool) -> str:
    """One sentence: rank ``rank``'s role in cause ``c`` (culprit / on the link / victim)."""
    who = rank_word([rank], zh)
    lab = label(c.culprit, zh)
    dom = dominant(c, zh)
    s = summary(c, zh)
    if role == "on_link":
        if zh:
            return f"{who}在慢链路 {link_label(c.culprit, zh)} 上：{s}。"
        return f"{who.capitalize()} is on the slow link {link_label(c.culprit, zh)}: {s}."
    if role == "culprit":
        if c.mechanism == Mechanism.STEP_EVENTS:
            steps = [st for st, r in c.culprit.events if r == rank]
            st_txt = ", ".join(str(x) for x in steps)
            if zh:
                return _then(
                    f"{who}只在第 {st_txt} 步出现单步停顿（事件，不是平均意义上的慢卡）", s, zh
                )
            return _then(
                f"{who.capitalize()} stalls only in step {st_txt} (an event, not a slow rank on "
                "average)",
                s,
                zh,
            )
        extra = ""
        if imp is not None and imp.lost_us > 0 and imp.how == "own_time":
            extra = say("project.its_own_time_computing_free_is", zh, us=us(imp.lost_us))
        elif imp is not None and imp.lost_us > 0 and imp.how in _STAGE_PART:
            en_part, zh_part = _STAGE_PART[imp.how]
            extra = (
                f"：其{zh_part}每步 {us(imp.lost_us)}，占其步长的 {pct(imp.share)}"
                if zh
                else f": its {en_part} takes {us(imp.lost_us)} per step, {pct(imp.share)} of its "
                "step"
            )
        # the culprit's own label ("rank 0 (every 5 steps, ...)") is the rank, not a unit it is in
        own = c.culprit.kind == "rank" or lab.split("（")[0].split(" (")[0] == who
        if own:
            if zh:
                return _then(f"{who}慢在它自身，是原因所在{extra}", s, zh)
            return _then(f"{who.capitalize()} is slow in its own right{extra}", s, zh)
        # one rank of a culprit unit (a stage, a group): the unit is the cause, not it alone
        # (its own figure follows after a semicolon: one colon per sentence)
        extra = "；" + extra[1:] if extra.startswith("：") else extra
        extra = "; " + extra[2:] if extra.startswith(": ") else extra
        if zh:
            return _then(
                f"{who}慢，是因为它属于{lab}，原因在这一整组卡，而不只是{who}{extra}", s, zh
            )
        return _then(
            f"{who.capitalize()} is slow as part of {lab}: the cause is that whole unit, not "
            f"{who} alone{extra}",
            s,
            zh,
        )
    # victim
    how = imp.how if imp else ""
    amt_en = amt_zh = ""
    if imp is not None and imp.lost_us > 0:
        amt_en = f"{us(imp.lost_us)} per step ({pct(imp.share)} of its step)"
        amt_zh = f"每步 {us(imp.lost_us)}（占其步长的 {pct(imp.share)}）"
    verb_en, verb_zh = _VICTIM_VERB.get(how, _VICTIM_VERB[""])
    if c.culprit.kind == "job":
        if imp is not None and imp.lost_us > 0 and us(imp.lost_us) in s:
            # the cause's sentence states the same figure: say it once, there ("loses time",
            # "损失时间": the Chinese verb already says time)
            amt_en, amt_zh = "time", ""
            verb_en, verb_zh = _VICTIM_VERB[""]
        if zh:
            return _then(f"{who}{verb_zh.format(amt=amt_zh)}，原因在整个作业而不在某张卡", s, zh)
        return _then(
            f"{who.capitalize()} {verb_en.format(amt=amt_en)} for a reason common to the whole "
            "job, not one rank",
            s,
            zh,
        )
    if zh:
        d = f"；{lab}的主要问题是{dom}" if dom else ""
        return _then(f"{who}{verb_zh.format(amt=amt_zh)}，等的是{lab}{d}", s, zh)
    d = f", which is {dom}" if dom else ""
    return _then(f"{who.capitalize()} {verb_en.format(amt=amt_en)} for {lab}{d}", s, zh)


def _titled(lab: str, detail: str, zh: bool) -> tuple[str, str] | None:
    """``(title, rest)`` of a cause sentence ``"title: rest"`` whose title names ``lab``, else ``None``.

    "Compute straggler rank 5: it computes …" under "rank 5 holds the job back" would say the
    culprit twice; its title can carry the verb instead.
    """
    for sep in ("：", ":") if zh else (":",):
        i = detail.find(sep)
        if i > 0:
            title, rest = detail[:i].strip(), detail[i + 1 :].strip().rstrip("。.")
            if lab.lower() in title.lower() and rest:
                return title, rest
            return None
    return None


def _then(head: str, detail: str, zh: bool) -> str:
    """``head`` followed by the cause's ``detail`` without a chain of colons.

    ``head: detail.`` when neither has a colon; ``head — detail.`` when only the detail has one (its
    own "title: explanation"); two sentences when the head has one.
    """
    colon_head = any(c in head for c in ":：")
    colon_detail = any(c in detail for c in ":：")
    if colon_head:
        if zh:
            return _sentence(head, zh) + _sentence(detail, zh)
        return _sentence(head, zh) + " " + _sentence(detail[:1].upper() + detail[1:], zh)
    if colon_detail:
        return f"{head}——{detail}。" if zh else f"{head} — {lower_first(detail)}."
    return say("project.head_detail", zh, head=head, detail=detail)


_VERDICT = {
    # (yes/no question "is rank N slow?") -> the answer's first words, by the rank's main role;
    # the role sentence follows in the same first sentence
    "culprit": ("Yes, ", "是的，"),
    "event": ("No — not on average: ", "不是，平均来看不是慢卡："),
    "on_link": ("Not by itself: ", "不是它自身的问题："),
    "victim": ("No, not by itself: ", "不是它自身的问题："),
}


#: The same verdicts for a question asked the healthy way round ("is rank 11 fine?").
_VERDICT_HEALTHY = {
    "culprit": ("No, ", "不是，"),
    "event": ("Mostly: ", "基本正常："),
    "on_link": ("Not entirely: ", "不完全是："),
    "victim": ("Yes, its own work is fine: ", "是的，它自身没问题："),
}


def _role_key(c: RootCause, role: str) -> str:
    """The verdict key of a role: a culprit of step events is an ``event`` (not slow on average)."""
    if role == "culprit" and c.mechanism == Mechanism.STEP_EVENTS:
        return "event"
    return role


def _upper_first(text: str) -> str:
    """``'rank 3 waits'`` -> ``'Rank 3 waits'``; an identifier (``mc2``, ``torch_npu``) stays."""
    word = text.split(" ", 1)[0]
    if word.isalpha() and word.islower():
        return text[:1].upper() + text[1:]
    return text


def with_verdict(verdict: str, sentence: str, zh: bool) -> str:
    """The verdict and the sentence that justifies it, as one first sentence."""
    return verdict + (sentence if zh else lower_first(sentence))


def _culprit_ranks(c: RootCause) -> list[int]:
    """The ranks a cause blames (:meth:`RootCause.blamed_ranks`)."""
    return c.blamed_ranks()


def _nes(d: Diagnosis) -> RootCause | None:
    """The not-enough-signal cause (the data cannot name a slow rank), if any."""
    return _meta(d, Mechanism.NOT_ENOUGH_SIGNAL)


def _few_ranks(c: RootCause) -> bool:
    """Whether a not-enough-signal cause is about too few ranks (else too few steps)."""
    return c.metrics.get("ranks_count", 0.0) < 3


def _shown_header(c: RootCause, zh: bool) -> str:
    """The line before what the data does show under a not-enough-signal lead."""
    if _few_ranks(c) and "late_rank" in c.metrics:  # the lead already compared the two ranks
        return say("project.what_else_the_data_shows", zh)
    if _few_ranks(c):
        return say("project.what_the_data_does_show_no", zh)
    return say("project.in_the_one_captured_step", zh)


def nes_reason(c: RootCause, zh: bool) -> str:
    """A not-enough-signal cause's sentence without its own "Not enough signal:" lead."""
    s = summary(c, zh)
    for lead in ("Not enough signal: ", "信号不足："):
        if s.startswith(lead):
            return s[len(lead) :]
    return s


def explain_ranks(
    d: Diagnosis,
    ranks: Sequence[int],
    zh: bool,
    *,
    yes_no: bool = False,
    compare: bool = False,
    faster: bool = False,
    healthy: bool = False,
) -> Projection:
    """Answer to “Why is rank N (or ranks A-B) slow?”: the ranks' lost time traced to its causes.

    With ``yes_no`` ("is rank N slow?", "are ranks 8-15 the slow ones?"), the first words give
    the verdict from the ranks' main roles: yes (culprit), no — not on average (one-step events),
    not by itself (on the slow link, or a victim). With ``compare`` and two ranks ("rank 9 vs
    rank 7, which is slower?"), the first sentence names the slower one as the cause
    (:func:`compare_ranks`). When the diagnosis says there is not enough signal to name a slow
    rank (too few ranks or steps), that comes first, then what the data does show.
    """
    if compare and len(ranks) == 2:
        return compare_ranks(d, ranks[0], ranks[1], zh, yes_no=yes_no, faster=faster)
    p = Projection()
    nes = _nes(d)
    if nes is not None:
        p.add_cause(nes)
        who = rank_word(ranks, zh)
        verb = "is" if len(ranks) == 1 else "are"
        avg, avg_zh = ("", "") if _few_ranks(nes) else (" on average", "（平均意义上）")
        p.lines.append(
            f"没有足够的信息判断{who}是否慢{avg_zh}：{nes_reason(nes, zh)}。"
            if zh
            else f"Not enough signal to say whether {who} {verb} slow{avg}: {nes_reason(nes, zh)}."
        )
        shown = _explain(d, ranks, zh, False)
        if any(c.mechanism not in _META for c in shown.causes):
            p.lines.append(_shown_header(nes, zh))
            p.lines += [
                x if x.startswith("- ") else f"- {x}"
                for x in shown.lines
                if x.strip() and x.strip() not in ("Also:", "此外：")
            ]
            for c in shown.causes:
                p.add_cause(c)
        return p
    return _explain(d, ranks, zh, yes_no, healthy)


def _explain(
    d: Diagnosis, ranks: Sequence[int], zh: bool, yes_no: bool, healthy: bool = False
) -> Projection:
    p = Projection()
    if len(ranks) == 1:
        r = ranks[0]
        roles = _roles(d, r)
        if not roles:
            _no_role(d, [r], zh, p)
            _artifact_note(d, [r], zh, p)
            return p
        for i, (c, role, imp) in enumerate(roles[:3]):
            p.add_cause(c)
            line = _role_sentence(r, c, role, imp, zh)
            if i == 0 and yes_no:
                table = _VERDICT_HEALTHY if healthy else _VERDICT
                line = with_verdict(table[_role_key(c, role)][1 if zh else 0], line, zh)
            gs = gain_sentence(c, zh)
            if gs:
                line += " " + gs
            p.lines.append(line if i == 0 else f"- {line}")
            if i == 0 and len(roles) > 1:
                p.lines.append(say("project.also", zh))
            p.plot_ranks += [x for x in _culprit_ranks(c)[:8] if x not in p.plot_ranks]
        return p
    # several ranks: group their roles by cause, most lost time first
    groups: dict[str, tuple[RootCause, dict[str, list[int]], float]] = {}
    main: dict[int, str] = {}
    for r in ranks:
        for c, role, imp in _roles(d, r):
            main.setdefault(r, _role_key(c, role))
            cur = groups.get(c.id)
            by_role = cur[1] if cur else {}
            by_role.setdefault(role, []).append(r)
            lost = (cur[2] if cur else 0.0) + (imp.lost_us if imp else 0.0)
            groups[c.id] = (c, by_role, lost)
    if not groups:
        _no_role(d, list(ranks), zh, p)
        _artifact_note(d, list(ranks), zh, p)
        return p
    verdict = _multi_verdict(ranks, main, zh) if yes_no else ""
    # as for one rank (:func:`_roles`): the causes the ranks themselves are (culprit, on the
    # slow link) before the ones they suffer from, then by the time the ranks lose
    # (whom they wait for before the job's upper bound of what hiding communication could win)
    ordered = sorted(
        groups.values(),
        key=lambda t: (
            set(t[1]) == {"victim"},
            t[0].culprit.kind == "job" and t[0].bound == BoundKind.UPPER_BOUND,
            -t[2],
        ),
    )
    for i, (c, by_role, _lost) in enumerate(ordered[:3]):
        p.add_cause(c)
        p.plot_ranks += [x for x in _culprit_ranks(c)[:8] if x not in p.plot_ranks]
        parts = []
        for role in ("culprit", "on_link", "victim"):
            rs = by_role.get(role, [])
            if not rs:
                continue
            who = rank_word(rs, zh)
            lab = label(c.culprit, zh)
            if role == "culprit":
                same = lab == who
                parts.append(
                    f"{who}是原因本身" + ("" if same else f"（{lab}）")
                    if zh
                    else f"{who} {'is' if len(rs) == 1 else 'are'} the cause"
                    + ("" if same else f" ({lab})")
                )
            elif role == "on_link":
                parts.append(
                    f"{who}在慢链路 {link_label(c.culprit, zh)} 上"
                    if zh
                    else f"{who} {'is' if len(rs) == 1 else 'are'} on the slow link {link_label(c.culprit, zh)}"
                )
            else:
                imps = [i for i in c.victims if i.rank in rs]
                mx = max((i.lost_us for i in imps), default=0.0)
                how_en, how_zh = _HOW.get(imps[0].how if imps else "", ("lose time", "损失时间"))
                dom = dominant(c, zh)
                if zh:
                    amt = f"，每步最多 {us(mx)}" if mx > 0 else ""
                    parts.append(
                        f"{who}{how_zh}{amt}，等的是{lab}" + (f"，后者{dom}" if dom else "")
                    )
                else:
                    if len(rs) > 1:  # plural verb
                        how_en = (
                            how_en.replace("waits", "wait")
                            .replace("sits", "sit")
                            .replace("loses", "lose")
                            .replace("spends", "spend")
                            .replace(" its own", " their own")
                        )
                    amt = f" up to {us(mx)} per step" if mx > 0 else ""
                    parts.append(
                        f"{who} {how_en}{amt} for {lab}" + (f", which is {dom}" if dom else "")
                    )
        text = (
            ("；".join(parts) + f"：{summary(c, zh)}。")
            if zh
            else ("; ".join(parts) + f": {summary(c, zh)}.")
        )
        text = text[0].upper() + text[1:] if not zh else text
        if i == 0 and verdict:
            text = with_verdict(verdict, text, zh)
        gs = gain_sentence(c, zh)
        if gs:
            text += " " + gs
        p.lines.append(text if i == 0 else f"- {text}")
        if i == 0 and len(ordered) > 1:
            p.lines.append(say("project.also", zh))
    return p


def _multi_verdict(ranks: Sequence[int], main: dict[int, str], zh: bool) -> str:
    """Verdict for "are ranks A-B slow?": yes (all culprits), no (none), or only some of them."""
    guilty = [r for r in ranks if main.get(r) == "culprit"]
    if guilty and len(guilty) == len(ranks):
        return _VERDICT["culprit"][1 if zh else 0]
    if not guilty:
        return say("project.no", zh)
    who = rank_word(guilty, zh)
    return say("project.only", zh, who=who)


def _main_role(d: Diagnosis, rank: int) -> tuple[RootCause, str, Impact | None] | None:
    roles = _roles(d, rank)
    return roles[0] if roles else None


def compare_ranks(
    d: Diagnosis, a: int, b: int, zh: bool, *, yes_no: bool = False, faster: bool = False
) -> Projection:
    """Answer to “rank A vs rank B: which is slower?”: the slower one named as the cause first.

    The slower rank is the one that is the culprit of a cause (not of one-step events) while the
    other is not; the other's role (it waits for it, or has no part in it) follows. Without a
    culprit among them, both ranks' roles are said; with not enough signal, that is said first.
    With ``yes_no`` ("is rank A slower than rank B?"; ``faster`` for "faster than"), the verdict
    about rank A comes first.
    """
    p = Projection()
    nes = _nes(d)
    wa, wb = rank_word([a], zh), rank_word([b], zh)
    if nes is not None:
        p.add_cause(nes)
        p.lines.append(
            say(
                "project.not_enough_signal_to_tell_whether",
                zh,
                wa=wa,
                wb=wb,
                nes_reason=nes_reason(nes, zh),
            )
        )
        return p
    ra, rb = _main_role(d, a), _main_role(d, b)

    def guilty(t: tuple[RootCause, str, Impact | None] | None) -> bool:
        return t is not None and _role_key(t[0], t[1]) == "culprit"

    if guilty(ra) != guilty(rb):
        (slow, slow_role), (other, _) = ((a, ra), (b, rb)) if guilty(ra) else ((b, rb), (a, ra))
        assert slow_role is not None
        c = slow_role[0]
        p.add_cause(c)
        ws, wo = rank_word([slow], zh), rank_word([other], zh)
        vic = next((i for i in c.victims if i.rank == other), None)
        if vic is not None and vic.lost_us > 0:
            rest = say(
                "project.waits_for_it_per_step_of",
                zh,
                wo=wo,
                us=us(vic.lost_us),
                vic_share=pct(vic.share),
            )
        else:
            rest = say("project.has_no_part_in_this_cause", zh, wo=wo)
        if zh:
            line = f"{ws}更慢，它就是原因：{summary(c, zh)}；{rest}。"
        else:
            line = f"{ws.capitalize()} is the slower one, and it is the cause: {summary(c, zh)}; {rest}."
        if yes_no:
            yes = (slow == a) != faster
            line = with_verdict(
                ("是的：" if yes else "不是：") if zh else ("Yes: " if yes else "No: "), line, zh
            )
        p.lines.append(line)
        p.plot_ranks = [x for x in _culprit_ranks(c)[:8]]
        gs = gain_sentence(c, zh)
        if gs:
            p.lines[-1] += " " + gs
        return p
    both = _explain(d, [a, b], zh, False)
    if guilty(ra) and guilty(rb):
        lead = say("project.both_and_are_part_of_the", zh, wa=wa, wb=wb)
    else:
        lead = say("project.neither_nor_is_the_cause", zh, wa=wa, wb=wb)
        if yes_no:
            lead = (say("project.no_comma", zh)) + (lead if zh else lower_first(lead))
    if both.lines:
        both.lines[0] = with_verdict(lead, both.lines[0], zh)
    return both


def _roles(d: Diagnosis, rank: int) -> list[tuple[RootCause, str, Impact | None]]:
    """``role_of(rank)`` without the data/meta causes, the rank's own causes first.

    Its own causes (culprit, on the slow link) come first, then the ones it suffers from, each
    in the diagnosis' order of importance.
    """
    order = {c.id: i for i, c in enumerate(d.causes)}
    roles = [t for t in d.role_of(rank) if t[0].mechanism not in _META]
    return sorted(roles, key=lambda t: (t[1] == "victim", order.get(t[0].id, len(order))))


def _artifact_note(d: Diagnosis, ranks: Sequence[int], zh: bool, p: Projection) -> None:
    """Say when the ranks' data was partly excluded as a data artifact."""
    for c in d.causes:
        if c.mechanism == Mechanism.DATA_ARTIFACT and set(c.culprit.ranks) & set(ranks):
            p.add_cause(c)
            p.lines.append(_sentence(summary(c, zh), zh))
            return


def _no_role(d: Diagnosis, ranks: Sequence[int], zh: bool, p: Projection) -> Projection:
    who = rank_word(ranks, zh)
    real = _real(d)
    nes = _meta(d, Mechanism.NOT_ENOUGH_SIGNAL)
    if nes is not None and not real:
        p.add_cause(nes)
        p.lines.append(
            f"没有足够的信息判断{who}是否慢：{nes_reason(nes, zh)}。"
            if zh
            else f"Not enough signal to say whether {who} {'is' if len(ranks) == 1 else 'are'} "
            f"slow: {nes_reason(nes, zh)}."
        )
        return p
    if not real:
        nc = _meta(d, Mechanism.NO_CULPRIT)
        if nc is None:
            p.lines.append(headline(d, zh))
            return p
        p.add_cause(nc)
        p.lines.append(
            f"{who}不是慢卡：各卡之间的差异都在阈值以内。{_sentence(summary(nc, zh), zh)}"
            if zh
            else f"{who.capitalize()} {'is' if len(ranks) == 1 else 'are'} not slow: the spreads "
            "between ranks are under threshold. "
            f"{_sentence(summary(nc, zh), zh)}"
        )
        return p
    top = real[0]
    p.add_cause(top)
    # part of the rank's data could not be read: what is said rests on the rest of it
    partial = sorted(set(ranks) & set(d.left_out_ranks))
    if partial:
        pw = rank_word(partial, zh)
        p.lines.append(
            say("project.cannot_fully_tell_part_of_s", zh, pw=pw, who=who, summary=summary(top, zh))
        )
        return p
    p.lines.append(
        f"{who}不在任何已发现根因的影响范围内（既不是原因，也没有因它损失时间）。作业的主要问题是：{summary(top, zh)}。"
        if zh
        else f"{who.capitalize()} is not behind any cause found, nor measurably hit by one. "
        f"The job's main cause: {summary(top, zh)}."
    )
    return p


def other_ranks(
    d: Diagnosis, excluded: Sequence[int], zh: bool, *, yes_no: bool = True, healthy: bool = True
) -> Projection:
    """Answer to "apart from rank 0, are the other ranks fine?": causes beyond the ranks set aside.

    The verdict (asked the healthy way round; inverted for "are the others slow too?"): fine
    when every cause that blames ranks blames only ranks set aside; not fine when a cause blames
    another rank, or the top cause is the whole job's (every rank loses time to it).
    """
    p = Projection()
    real = _real(d)
    ex = set(excluded)
    ex_en, ex_zh = fmt_ranks(sorted(ex)), fmt_ranks(sorted(ex))
    if not real:
        return no_culprit(d, zh, p)
    top = real[0]
    other = next((c for c in real if c.culprit.kind != "job" and set(_culprit_ranks(c)) - ex), None)
    if top.culprit.kind == "job":
        p.add_cause(top)
        fine = False
        text = say("project.every_rank_loses_time_to_a", zh)
        cause = top
    elif other is not None:
        p.add_cause(other)
        fine = False
        lab = label(other.culprit, zh)
        text = say("project.besides_rank_is_a_cause_too", zh, ex=(ex_zh if zh else ex_en), lab=lab)
        cause = other
    else:
        p.add_cause(top)
        fine = True
        text = say("project.apart_from_rank_the_ranks_are", zh, ex=(ex_zh if zh else ex_en))
        cause = top
    # the verdict sentence alone, then the cause's own account (no clause of it can contradict)
    why = _sentence(summary(cause, zh), zh)
    if not yes_no:  # "which other rank is slow?": the finding itself
        p.lines.append((text if zh else upper_first(text)) + ("" if zh else " ") + upper_first(why))
        return p
    yes = fine if healthy else not fine
    verdict = ("是的，" if yes else "不是，") if zh else ("Yes: " if yes else "No: ")
    p.lines.append(verdict + text + ("" if zh else " ") + (why if zh else upper_first(why)))
    return p


def _because(lab: str, text: str, zh: bool) -> str:
    """``"{label} — {summary}"`` without the label twice: a summary that names it early stands alone."""
    body = text.rstrip("。") if zh else lower_first(text).rstrip(".")
    if lab.lower() in body[: len(lab) + 40].lower():
        return body
    return say("project.label_body", zh, lab=lab, body=body)


def node_question(
    d: Diagnosis, asked: Sequence[int], ordinal: bool, zh: bool, *, yes_no: bool = False
) -> Projection:
    """Answer to "is node 1 slower?" / "第三台机器是不是更慢？" / "which node?": where the top cause is.

    Nodes are :attr:`Diagnosis.nodes` (from on-node links). The node asked is read as counted
    from 1 when the question counts ("the third machine"), or when it names a number no
    0-based index reaches; else as an index from 0 (each node is stated with its ranks, so the
    reading can be checked). The verdict: yes when the top cause's culprit ranks all lie on the
    (first) node asked; no when they lie elsewhere, span nodes, or the cause is the whole job's;
    without a node layout, only a job-wide cause (or none) gives a verdict.
    """
    p = Projection()
    real = _real(d)
    nodes = [tuple(n) for n in d.nodes]
    if not real:
        nc = _meta(d, Mechanism.NO_CULPRIT) or _meta(d, Mechanism.NOT_ENOUGH_SIGNAL)
        if nc is not None:
            p.add_cause(nc)
        rest = summary(nc, zh) if nc is not None else ""
        p.lines.append((say("project.no_node_is_slower_than_the", zh)) + _sentence(rest, zh))
        return _verdict_first(p, say("project.no", zh), zh, yes_no)
    top = real[0]
    p.add_cause(top)
    lab, text = label(top.culprit, zh), summary(top, zh)
    why = _because(lab, text, zh)
    ranks = _culprit_ranks(top)
    base1 = ordinal or (bool(nodes) and bool(asked) and 0 not in asked and max(asked) >= len(nodes))
    idx = [a - 1 if base1 else a for a in asked]

    def node_txt(i: int) -> str:
        rs = fmt_ranks(list(nodes[i]))
        n = i + 1 if base1 else i
        if zh:  # counted as asked: "第三台机器" from 1, "节点 1" from 0 (as the causes say)
            return f"第 {n} 台机器（{rs}号卡）" if base1 else f"节点 {n}（{rs}号卡）"
        return f"node {n} (ranks {rs})"

    if top.culprit.kind == "job" or not ranks:
        p.lines.append(say("project.no_node_is_slower_than_the_b", zh, why=why))
        return _verdict_first(p, say("project.no", zh), zh, yes_no)
    if not nodes and d.one_node:
        p.lines.append(say("project.every_rank_is_on_one_node", zh, why=why))
        return _verdict_first(p, say("project.no", zh), zh, yes_no)
    if not nodes:
        p.lines.append(say("project.the_profile_does_not_show_which", zh, why=why))
        return _verdict_first(p, say("project.cannot_tell", zh), zh, yes_no)
    bad = [i for i in idx if not 0 <= i < len(nodes)]
    if bad:
        n = len(nodes)
        p.lines.append(
            f"这份数据只有 {n} 台机器（{'、'.join(fmt_ranks(list(x)) + '号卡' for x in nodes)}）。"
            f"最主要的原因在{why}。"
            if zh
            else f"The profile has {n} nodes, "
            f"{' and '.join('ranks ' + fmt_ranks(list(x)) for x in nodes)}. "
            f"The top cause is {why}."
        )
        return p
    on = sorted({i for i, n in enumerate(nodes) for r in ranks if r in n})
    if not idx and yes_no and len(ranks) == 1 and len(on) == 1 and len(nodes[on[0]]) > 1:
        # "is one node slower?": one rank of a node is the culprit, not the node
        p.lines.append(
            f"不是整台机器：{node_txt(on[0])}中只有{fmt_ranks(ranks, sep='、')}号卡是罪魁——{text}。"
            if zh
            else f"No, not a whole node: only rank {fmt_ranks(ranks)} of {node_txt(on[0])} is the "
            f"culprit — {lower_first(text)}."
        )
        return p
    whole = [i for i in on if set(nodes[i]) <= set(ranks)]
    if not idx and yes_no and not whole:
        # "is one node slower?": the top cause is no node's every rank (a link, a few ranks)
        p.lines.append(say("project.no_not_a_whole_node_the", zh, why=why))
        return p
    if not idx:  # "which node is slower?": the node(s) the top cause lies on
        one = len(on) == 1
        where = (
            (say("project.and", zh)).join(node_txt(i) for i in on)
            if on
            else (say("project.no_single_node", zh))
        )
        if one and where.lower() in why.lower():  # the cause already names the node
            p.lines.append(f"{why}。" if zh else f"{why[0].upper()}{why[1:]}.")
            return _verdict_first(p, say("project.yes", zh), zh, yes_no)
        p.lines.append(
            (
                f"{where}上的问题最大：{why}。"
                if one
                else f"最主要的原因跨越多台机器（{where}）：{why}。"
            )
            if zh
            else (
                f"{where[0].upper()}{where[1:]} holds the top cause, {why}."
                if one
                else f"The top cause spans {where}: {why}."
            )
        )
        # "is there a slow node?": yes when the top cause is one whole node's
        return _verdict_first(p, say("project.yes", zh), zh, yes_no and one and bool(whole))
    if len(on) == 1 and idx and on[0] == idx[0]:
        p.lines.append(
            f"{node_txt(on[0])}上的问题最大：{why}。"
            if zh
            else f"{node_txt(on[0])[0].upper()}{node_txt(on[0])[1:]} holds the top cause, {why}."
        )
        return _verdict_first(p, say("project.yes", zh), zh, yes_no)
    where = (
        (node_txt(on[0]) if len(on) == 1 else "、".join(node_txt(i) for i in on))
        if zh
        else (node_txt(on[0]) if len(on) == 1 else " and ".join(node_txt(i) for i in on))
    )
    asked_txt = node_txt(idx[0]) if idx else ""
    p.lines.append(
        f"{asked_txt}不是问题所在；最主要的原因在{lab}，位于{where}——{text.rstrip('。')}。"
        if zh
        else f"{asked_txt[0].upper()}{asked_txt[1:]} is not where the problem is; the top cause "
        f"is {lab}, on {where} — {lower_first(text).rstrip('.')}."
    )
    return _verdict_first(p, say("project.no", zh), zh, yes_no)


def cause_text(c: RootCause) -> str:
    """A cause's words in both languages: its summary and its remedies."""
    return " ".join(
        [c.summary, c.summary_zh, *(r.text for r in c.remedies), *(r.text_zh for r in c.remedies)]
    )


def _fits(c: RootCause, zh: bool) -> Projection:
    """The answer "yes, that fits what the data shows", with cause ``c``."""
    p = Projection()
    p.add_cause(c)
    p.plot_ranks = _culprit_ranks(c)[:8]
    p.lines.append(
        f"是的，这与数据相符。{summary(c, zh)}。"
        if zh
        else f"Yes, that fits what the data shows. {_upper_first(summary(c, zh))}."
    )
    return p


def unknown_suspect(d: Diagnosis, x: str, zh: bool) -> Projection:
    """A suspect no rule judges ("is the tokenizer the problem?"), against the top causes' text.

    Yes when one of the top two causes names it in its account (the summary: "the optimizer
    updates the parameters" for an unfused optimizer; not its remedies, which name what to
    change, not what was measured); otherwise nothing in the data points to it and the measured
    time goes to the top cause (or nothing stands out: cannot tell).
    """
    p = Projection()
    real = _real(d)[:2]
    for c in real:
        if x.lower() in f"{c.summary} {c.summary_zh}".lower():
            return _fits(c, zh)
    top = real[0] if real else None
    if top is None:
        p.lines.append(say("project.cannot_tell_from_this_data_whether", zh, x=x))
        return p
    p.add_cause(top)
    # the first words say "no" (a yes/no question was asked), then where the time goes
    p.lines.append(
        f"没有迹象表明是{x}的问题，测得的时间损失在别处——{summary(top, zh)}。"
        if zh
        else f"No sign of the {x} in this data: the measured time goes to "
        f"{_because(label(top.culprit, zh), summary(top, zh), zh)}."
    )
    return p


#: Words of a claim that say nothing about a mechanism (English; Chinese character pairs).
_CLAIM_STOP = frozenset(
    [
        "the",
        "and",
        "that",
        "this",
        "with",
        "from",
        "into",
        "onto",
        "than",
        "then",
        "there",
        "their",
        "they",
        "them",
        "have",
        "has",
        "had",
        "does",
        "did",
        "doing",
        "done",
        "are",
        "was",
        "were",
        "been",
        "being",
        "its",
        "it's",
        "our",
        "ours",
        "your",
        "just",
        "only",
        "most",
        "mostly",
        "much",
        "many",
        "more",
        "less",
        "some",
        "each",
        "every",
        "all",
        "any",
        "gets",
        "got",
        "get",
        "goes",
        "going",
        "because",
        "since",
        "what",
        "which",
        "when",
        "where",
        "while",
        "time",
        "times",
        "spent",
        "spend",
        "step",
        "steps",
        "rank",
        "ranks",
        "card",
        "cards",
        "job",
        "slow",
        "slower",
        "problem",
        "issue",
        "cause",
        "really",
        "also",
        "still",
        "too",
        "very",
        "kernel",
        "kernels",
        "operator",
        "operators",
        "ops",
        "run",
        "runs",
        "running",
        "ran",
        "launch",
        "launches",
        "launched",
        "instead",
        "core",
        "cores",
        "device",
        "devices",
        "npu",
        "npus",
        "slowly",
        "faster",
        "fast",
        "lot",
        "lots",
        # words every account uses: they tell no mechanism from another
        "communication",
        "compute",
        "computation",
        "computing",
        "wait",
        "waits",
        "waiting",
        "data",
        "training",
        "performance",
        "collective",
        "collectives",
        # what every operator has: an input, an output, a shape, a format
        "input",
        "inputs",
        "output",
        "outputs",
        "shape",
        "shapes",
        "format",
        "formats",
        "type",
        "types",
    ]
)
_CLAIM_STOP_ZH = frozenset(
    [
        "是不",
        "不是",
        "是否",
        "会不",
        "不会",
        "难道",
        "因为",
        "所以",
        "导致",
        "问题",
        "原因",
        "时间",
        "时候",
        "主要",
        "每个",
        "一个",
        "这个",
        "那个",
        "我们",
        "他们",
        "你们",
        "还是",
        "多少",
        "太多",
        "太少",
        "很多",
        "很少",
        "了吗",
        "是因",
        "的时",
        "分到",
        "花在",
        "上了",
        "比较",
        "现在",
        "每步",
        "这些",
        "那些",
        # words every account uses: they tell no mechanism from another
        "通信",
        "计算",
        "等待",
        "数据",
        "变慢",
        "太慢",
        "很慢",
        "慢了",
        "拖慢",
        "耗时",
        "性能",
        "训练",
        "集合",
        "算子",
        "每张",
        "张卡",
        "所有",
        "整个",
        "作业",
        "输入",
        "输出",
        "形状",
        "格式",
        "类型",
    ]
)
#: Short names users give operators, as the profile spells them (lower case, no separators).
_CLAIM_ALIAS = {
    "gmm": "groupedmatmul",
    "fa": "flashattention",
    "mm": "matmul",
    "bmm": "batchmatmul",
}


def _claim_terms(claim: str) -> list[str]:
    """Content terms of a claim: ASCII words (aliases resolved) and Chinese character pairs."""
    terms: list[str] = []
    for w in re.findall(r"[A-Za-z][A-Za-z0-9_+.-]{1,}", claim):
        w = w.lower().rstrip(".")
        w = _CLAIM_ALIAS.get(w, w)
        if len(w) >= 3 and w not in _CLAIM_STOP and w not in terms:
            terms.append(w)
    for run in re.findall(r"[\u4e00-\u9fff]{2,}", claim):
        for i in range(len(run) - 1):
            pair = run[i : i + 2]
            if pair not in _CLAIM_STOP_ZH and pair not in terms:
                terms.append(pair)
    return terms


#: Terms of a claim one cause's account must hold for "yes, that fits".
CLAIM_FITS = 2


def claim_support(d: Diagnosis, claim: str) -> tuple[RootCause | None, int]:
    """The top-two cause whose account holds most of the claim's mechanism, and how much.

    Returns the cause and its score: the claim's terms found in its account, operator names
    (``GMM`` as ``GroupedMatmul``) not counted, since naming the operator a cause is about says
    nothing about why it is slow. Overlapping Chinese character pairs of one word ("专家权重":
    家权, 权重) count once.
    """
    terms = _claim_terms(claim)
    best: RootCause | None = None
    hits = 0
    for c in _real(d)[:2]:
        text = f"{c.summary} {c.summary_zh}".lower()
        flat = re.sub(r"[\s_-]", "", text)
        n, last = 0, -2
        for i, t in enumerate(terms):
            if t not in text and t not in flat:
                continue
            op = t in _CLAIM_ALIAS.values() or (t.isascii() and _OP_NAME.search(t))
            if not op and not (i == last + 1 and not t.isascii()):
                n += 1
            last = i
        if n > hits:
            best, hits = c, n
    return best, hits


#: An operator type as the profile spells it, lower-cased (matmul, flashattentionscore, ...).
_OP_NAME = re.compile(r"(?:matmul|attention|gemm|conv|softmax|norm|allreduce|allgather|alltoall)")


def claim_verdict(d: Diagnosis, claim: str, zh: bool) -> Projection:
    """A mechanism the user proposes, judged against what the top causes measured.

    The claim's content terms (:func:`_claim_terms`) are looked up in each of the top two causes'
    account (summary, English and Chinese; operator names without separators). Two terms or
    more in one cause's account: yes, it fits, with that cause. One: the data cannot tell
    whether the claim holds; what it measured is said. None: nothing in the data points to it;
    the measured time goes to the top cause. A word match is evidence that the cause speaks of
    the same things, not proof: the answer gives the cause's own numbers to check it against.
    """
    real = _real(d)[:2]
    top = real[0] if real else None
    if top is None:
        p = Projection()
        p.lines.append(say("project.claim_no_cause", zh, x=claim))
        return p
    best, hits = claim_support(d, claim)
    best = best or top
    if hits >= CLAIM_FITS:
        return _fits(best, zh)
    p = Projection()
    p.add_cause(best)
    if hits == 1:
        p.lines.append(say("project.claim_cannot_tell", zh, x=claim, what=summary(best, zh)))
    else:
        p.lines.append(say("project.claim_no_sign", zh, x=claim, what=summary(top, zh)))
    return p


def _verdict_first(p: Projection, verdict: str, zh: bool, yes_no: bool) -> Projection:
    """Prefix the first line with ``verdict`` for a yes/no question."""
    if yes_no and p.lines:
        p.lines[0] = with_verdict(verdict, p.lines[0], zh)
    return p


def which_culprit(d: Diagnosis, zh: bool, *, yes_no: bool = False) -> Projection:
    """Answer to “Which rank holds the job back?”: the top culprit (or why there is no single rank).

    When the diagnosis says there is not enough signal to name a slow rank (too few ranks or
    steps), that comes first with the data that would decide, then the job-level causes the data
    does show. With ``yes_no`` ("is there a slow rank?"), a rank-like culprit is preceded by "Yes".
    """
    p = Projection()
    real = _real(d)
    nes = _nes(d)
    if nes is not None:
        p.add_cause(nes)
        p.lines.append(
            say("project.not_enough_signal_to_name_a", zh, nes_reason=nes_reason(nes, zh))
        )
        if real:
            p.lines.append(_shown_header(nes, zh))
            for rc in real[:3]:
                p.add_cause(rc)
                p.lines.append(cause_bullet(rc, zh))
        else:
            add_shares(p, d, zh)
        return p
    if not real:
        return no_culprit(d, zh, p)
    top = real[0]
    # a job-wide idle ranked first (it dwarfs every late rank) does not answer "which rank?":
    # the latest rank does, and the idle follows as the larger problem
    job_first = top.mechanism == Mechanism.JOB_IDLE and any(
        x.culprit.kind in _RANKLIKE for x in real[1:]
    )
    if job_first:
        top = next(x for x in real[1:] if x.culprit.kind in _RANKLIKE)
    p.add_cause(top)
    c = top.culprit
    lab = label(c, zh)
    s = summary(top, zh)
    if c.kind in _RANKLIKE:
        p.plot_ranks = list(c.ranks)[:8]
        dom = dominant(top, zh)
        if dom and dom in s:  # the summary says it already ("..., which is communication-bound")
            dom = ""
        verb = "hold" if c.kind != "stage" and len(c.ranks) > 1 else "holds"
        titled = _titled(lab, s, zh)
        if titled is not None:  # the cause's own title names the culprit: say it once
            title, rest = titled
            if zh:
                # "9号卡主机侧阻塞：…" -> "拖慢作业的是9号卡（主机侧阻塞）：…"
                kind = title.replace(lab, "").strip().lstrip("是的上，")
                line = (
                    f"拖慢作业的是{lab}（{kind}）：{rest}。"
                    if len(kind) >= 2
                    else f"拖慢作业的是{lab}：{rest}。"
                )
            else:
                # "Host stall on rank 9: …" -> "Rank 9 holds the job back — host stall: …"
                kind = re.sub(re.escape(lab), "", title, flags=re.I)
                kind = re.sub(r"\s+(on|of|at|for)\s*$", "", kind.strip()).strip(" —-")
                head = f"{lab[0].upper() + lab[1:]} {verb} the job back"
                if dom:
                    head += f", being {dom}"
                line = (
                    f"{head} — {lower_first(kind)}: {rest}."
                    if len(kind.split()) >= 2
                    else f"{head}: {rest}."
                )
        elif zh:
            line = _then(f"拖慢作业的是{lab}" + (f"，它{dom}" if dom else ""), s, zh)
        else:
            line = _then(
                f"{lab[0].upper() + lab[1:]} {verb} the job back"
                + (f", being {dom}" if dom else ""),
                s,
                zh,
            )
        p.lines.append(
            with_verdict(_VERDICT["culprit"][1 if zh else 0], line, zh) if yes_no else line
        )
        vic = sorted(top.victims, key=lambda i: -i.lost_us)
        # a rank blamed by another cause waits for this one too, but it is not "only a victim"
        blamed = {r for rc in real[1:] for r in rc.culprit.ranks} - set(c.ranks)
        only = [i for i in vic if i.rank not in blamed]
        late = sorted({i.rank for i in vic if i.rank in blamed})
        if only:
            vr = [i.rank for i in only]
            if zh:
                p.lines.append(
                    f"受影响的卡：{rank_word(vr, zh)}，每步最多损失 {us(only[0].lost_us)}（它们是受害者，不是原因）。"
                )
            else:
                p.lines.append(
                    f"Victims: {rank_word(vr, zh)} lose up to {us(only[0].lost_us)} per step (they wait; they are not the cause)."
                )
        if late:
            p.lines.append(
                f"{rank_word(late, zh)}也在等它，但它们自己也晚到（见下面的其他原因）。"
                if zh
                else f"{rank_word(late, zh)[0].upper()}{rank_word(late, zh)[1:]} wait for it too, "
                "but are late themselves (see the other causes)."
            )
        if job_first:
            idle = real[0]
            p.add_cause(idle)
            p.lines.append(
                say("project.the_larger_problem_is_the_whole", zh, summary=summary(idle, zh))
            )
    elif c.kind == "link" and c.link is None:  # a rank's links, which one not in the data
        p.plot_ranks = list(c.ranks)
        p.lines.append(
            _then(f"{rank_word(c.ranks, zh)}的链路拖慢了作业", s, zh)
            if zh
            else _then(f"{rank_word(c.ranks, zh).capitalize()}'s links hold the job back", s, zh)
        )
    elif c.kind == "link":
        p.plot_ranks = list(c.link or ())
        ends = rank_word(list(c.link or ()), zh)
        p.lines.append(
            _then(f"不是某张卡，而是慢链路 {link_label(c, zh)}", s, zh) + f"{ends}在这条链路上。"
            if zh
            else _then(
                f"No single rank: the slow link {link_label(c, zh)} holds the job back", s, zh
            )
            + f" {ends.capitalize()} are on that link."
        )
    elif c.kind == "steps":
        p.plot_ranks = _culprit_ranks(top)[:8]
        p.lines.append(
            say("project.no_rank_is_slow_on_average", zh, events_text=events_text(top, zh), s=s)
        )
    elif c.kind == "job":
        p.lines.append(
            _then("没有单独的慢卡，所有卡都因同一个作业级原因损失时间", s, zh)
            if zh
            else _then(
                "No single rank holds the job back, every rank loses time to the same job-level "
                "cause",
                lower_first(s),
                zh,
            )
        )
    else:
        p.lines.append(_sentence(s, zh))
    gs = gain_sentence(top, zh)
    if gs:
        p.lines.append(gs)
    shown = {x.id for x in p.causes}
    for c2 in [x for x in real if x.id not in shown][:2]:
        p.add_cause(c2)
        p.lines.append(cause_bullet(c2, zh))
    return p


def no_culprit(d: Diagnosis, zh: bool, p: Projection | None = None) -> Projection:
    """No blamed cause: not enough signal, no culprit, or nothing at all."""
    p = p or Projection()
    nes = _meta(d, Mechanism.NOT_ENOUGH_SIGNAL)
    nc = _meta(d, Mechanism.NO_CULPRIT)
    if nes is not None:
        p.add_cause(nes)
        p.lines.append(
            say("project.not_enough_signal_to_name_a", zh, nes_reason=nes_reason(nes, zh))
        )
    elif nc is not None:
        p.add_cause(nc)
        p.lines.append(
            f"没有拖慢作业的卡——{summary(nc, zh).removeprefix('没有发现罪魁：')}。"
            if zh
            else "No rank holds the job back — "
            f"{lower_first(summary(nc, zh).removeprefix('No culprit: '))}."
        )
    else:
        p.lines.append(headline(d, zh))
    add_shares(p, d, zh)
    return p


def _between_groups(c: RootCause) -> bool:
    """A slow path between two groups of hosts (``rule_cross_host_group_links``), not one part."""
    return c.id.startswith("cause.slow_link.host_groups_")


def network(
    d: Diagnosis,
    links: Sequence[tuple[int, int]],
    zh: bool,
    ranks: Sequence[int] = (),
    *,
    yes_no: bool = True,
    which: bool = False,
    healthy: bool = False,
    links_judged: bool = True,
    single: bool = False,
    link_transports: dict[tuple[int, int], str] | None = None,
    scope: str = "",
) -> Projection:
    """Answer to “Is the network the problem?” / “which link is slow?”: yes or no with the link.

    With ``scope`` (``network`` between nodes or ``board`` inside one,
    :func:`~advisor_chat.agent.parse.network_scope`) and every slow link on the other part, a
    yes/no question about the part asked is answered "no, not that part", with the slow links.

    ``link_transports`` ({(src, dst): transport}, from the slow_link tool's link table) lets a
    named link be judged against a cause of a whole transport (every RDMA link slow): it is one
    of them when it uses that transport.

    With ``single`` (the question suspects one component: "is one node's NIC bad?") and a
    network cause of the whole job (every link slow at once), the verdict is no: not one part.

    With ``ranks`` ("is rank 3 on a slow link?"), the verdict is about those ranks: whether they
    are endpoints of a slow link. Without ``yes_no`` ("which link is slow?", "why … when the
    bandwidth looks fine?"), the first sentence is the cause itself, not a yes/no verdict;
    with ``which`` ("which link is slow?") and no slow link, it says that no link is slow.
    With ``links_judged`` false (the slow_link analyzer had too few comparable links), "no link
    is slow" becomes "no slow link was found (too few comparable links to judge)".
    """
    p = _network(
        d,
        links,
        zh,
        ranks,
        yes_no=yes_no,
        which=which,
        healthy=healthy,
        single=single,
        link_transports=link_transports or {},
        scope=scope,
    )
    waiting = _transit_small(d)
    if (
        not links_judged
        and not any(c.mechanism == Mechanism.SLOW_LINK for c in p.causes)
        and waiting is not None
        and p.lines
    ):
        # too few links to compare, but the collectives barely transfer: no link can cost much
        # (trial: cluster-8rank, transit 0.0% of the collectives' time, answered "cannot tell")
        m = waiting.metrics
        p.lines[0] = p.lines[0].replace("no link is slow", "no slow link was found", 1)
        p.lines[0] += say(
            "project.transit_too_small_for_the_network",
            zh,
            tr=us(1000.0 * m["comm_transit_ms_per_step"]),
            el=us(1000.0 * m["comm_elapse_ms_per_step"]),
            share=pct(m["transit_share"]),
        )
    elif not links_judged and not any(c.mechanism == Mechanism.SLOW_LINK for c in p.causes):
        p.lines = [_unjudged(x, zh) for x in p.lines]
    elif (
        d.missing_ranks
        and not ranks
        and not any(c.mechanism == Mechanism.SLOW_LINK for c in p.causes)
    ):
        p.lines = [_missing_links(x, d, zh) for x in p.lines]
    return p


def _link_on_slow_transport(
    c: RootCause,
    links: Sequence[tuple[int, int]],
    transports: dict[tuple[int, int], str],
    zh: bool,
    yes_no: bool,
) -> Projection:
    """A named link against a cause of every link of one transport (``c.culprit.transport``)."""
    p = Projection()
    p.add_cause(c)
    tr = str(c.culprit.transport)
    body = _slow_body(c, zh)
    a = ", ".join(f"{x}→{y}" for x, y in links)
    got = [transports.get((x, y)) or transports.get((y, x)) for x, y in links]
    if got and all(t == tr for t in got):
        lead = (
            (
                f"是的：链路 {a} 是 {tr} 链路，而所有 {tr} 链路都慢"
                if yes_no
                else f"链路 {a} 是 {tr} 链路，所有 {tr} 链路都慢"
            )
            if zh
            else (
                f"Yes: link {a} is an {tr} link, and every {tr} link is slow"
                if yes_no
                else f"Link {a} is an {tr} link, and every {tr} link is slow"
            )
        )
        p.plot_ranks = sorted({r for x in links for r in x})
    elif got and all(t is not None for t in got):
        used = "/".join(dict.fromkeys(str(t) for t in got))
        lead = (
            (
                f"不是：链路 {a} 走 {used}，不在慢的 {tr} 链路中"
                if yes_no
                else f"链路 {a} 走 {used}，不在慢的 {tr} 链路中"
            )
            if zh
            else (
                f"No: link {a} runs over {used}, not over the slow {tr} links"
                if yes_no
                else f"Link {a} runs over {used}, not over the slow {tr} links"
            )
        )
    else:
        lead = say("project.this_profile_has_no_transfers_on", zh, a=a, tr=tr)
    p.lines.append(say("project.lead_body", zh, lead=lead, body=body))
    return p


def _missing_links(line: str, d: Diagnosis, zh: bool) -> str:
    """A "no, it is not the network" verdict said as "cannot tell" when ranks are missing.

    The links of the ranks the profile lacks were never measured: a slow one may be among them.
    """
    which = fmt_ranks(d.missing_ranks)
    n = len(d.ranks)
    line = line.replace(
        "No link is slow: the cause is not the network.",
        f"No link among the {n} ranks present is slow, but ranks {which} are missing from the "
        "profile and their links cannot be judged.",
        1,
    ).replace(
        "没有发现慢链路：原因不在网络。",
        f"现有的 {n} 张卡之间没有慢链路，但缺少 {which}号卡的数据，它们的链路无法判断。",
        1,
    )
    if zh:
        return line.replace(
            "不是网络的问题：没有发现慢链路",
            f"无法判断是不是网络的问题：现有的 {n} 张卡之间没有慢链路，缺少 {which}号卡的数据，"
            "它们的链路无法判断",
            1,
        )
    return line.replace(
        "No, the network is not the problem: no link is slow",
        f"Cannot tell whether the network is the problem: no link among the {n} ranks present "
        f"is slow, but ranks {which} are missing from the profile and their links cannot be judged",
        1,
    )


def _slow_body(c: RootCause, zh: bool) -> str:
    """A slow-link cause's sentence without a title that repeats it (``Slow link: ...``).

    The summary states the link and its bandwidth; a leading ``Slow link:`` / ``慢链路：`` title is
    dropped, and the link's label is put first only when the sentence does not name it.
    """
    text = summary(c, zh)
    for title in ("Slow link: ", "慢链路："):
        if text.startswith(title):
            text = text[len(title) :]
    lab = link_label(c.culprit, zh)
    core = lab.split(" (")[0].split("（")[0]
    if (
        c.culprit.link is not None
        and core not in text
        and (c.culprit.label_zh if zh else c.culprit.label) not in text
    ):
        text = (say("project.the_slow_link", zh, lab=lab)) + text
    return text if zh else lower_first(text)


#: The collectives' transit below this share of their time: they hardly transfer.
TRANSIT_SMALL = 0.05


def _transit_small(d: Diagnosis) -> Finding | None:
    """A communication finding whose measured transit share is small (the collectives wait).

    The communication analyzer's findings carry ``transit_share`` (``comm_ops`` Σ Transit /
    Σ Elapse) with the per-step medians; the first one below :data:`TRANSIT_SMALL` among the
    causes' findings and the other findings, provided the collectives it measures hold at least
    half of the step's exposed communication (``d.shares``: communication read for a few ranks
    or operators does not speak for the rest, e.g. the real PP2 sample's 8.4 ms of 151 ms);
    else ``None``.
    """
    exposed_us = d.shares.get("communication_not_overlapped", 0.0) * d.step_time_us
    found = [f for c in d.causes for f in c.findings] + list(d.other_findings)
    for f in found:
        m = f.metrics
        if (
            f.id.startswith("communication.")
            and m.get("transit_share", 1.0) < TRANSIT_SMALL
            and "comm_transit_ms_per_step" in m
            and 1000.0 * m.get("comm_elapse_ms_per_step", 0.0) >= 0.5 * exposed_us
        ):
            return f
    return None


def _unjudged(line: str, zh: bool) -> str:
    """The "no link is slow" phrases said as "none found, too few links to judge".

    A "no, it is not the network" verdict becomes "cannot tell": links that were not compared
    clear nothing.
    """
    line = (
        line.replace("不是网络的问题：", "无法判断是不是网络的问题：", 1)
        .replace(
            "No, the network is not the problem: ",
            "Cannot tell whether the network is the problem: ",
            1,
        )
        # links that were not compared clear nothing: no "the cause is not the network" either
        .replace("没有发现慢链路：原因不在网络。", "没有发现慢链路，但无法断定与网络无关。", 1)
        .replace(
            "No link is slow: the cause is not the network.",
            "No link is slow, but that does not clear the network.",
            1,
        )
    )
    if zh:
        line = line.replace(
            "没有慢链路：没有哪条链路的带宽明显低于同类链路。",
            "没有发现慢链路（可比较的链路太少，无法判断）。",
        )
        if "可比较的链路太少" in line:
            return line
        return line.replace("没有发现慢链路", "没有发现慢链路（可比较的链路太少，无法判断）", 1)
    line = line.replace(
        "No link is slow: no link runs far below the median bandwidth of its transport.",
        "No slow link was found (too few comparable links to judge).",
    )
    line = line.replace(
        "no link is slow", "no slow link was found (too few comparable links to judge)", 1
    )
    return line.replace(
        "No link is slow", "No slow link was found (too few comparable links to judge)", 1
    )


def _network(
    d: Diagnosis,
    links: Sequence[tuple[int, int]],
    zh: bool,
    ranks: Sequence[int] = (),
    *,
    yes_no: bool = True,
    which: bool = False,
    healthy: bool = False,
    single: bool = False,
    link_transports: dict[tuple[int, int], str] | None = None,
    scope: str = "",
) -> Projection:
    p = Projection()
    slow = [c for c in d.causes if c.mechanism == Mechanism.SLOW_LINK]
    other = _off_scope(slow, scope) if yes_no and not healthy and not links else None
    if other is not None:
        p.lines.append(_not_this_part(other, scope, zh))
        p.add_cause(other)
        p.plot_ranks = list(other.culprit.link or other.culprit.ranks)
        return p
    wide = next((c for c in slow if c.culprit.kind == "job" and c.culprit.transport), None)
    if links and wide is not None:
        # a whole transport is slow: a named link is one of those links or not, by its transport
        return _link_on_slow_transport(wide, links, link_transports or {}, zh, yes_no)
    if ranks and not links and slow:
        on = [c for c in slow if set(c.culprit.link or c.culprit.ranks) & set(ranks)]
        if not on:
            c = slow[0]
            p.add_cause(c)
            who = rank_word(ranks, zh)
            p.lines.append(
                f"不是：{who}不在慢链路上；慢链路是 {link_label(c.culprit, zh)}：{summary(c, zh)}。"
                if zh
                else f"No: {who} {'is' if len(ranks) == 1 else 'are'} not on a slow link; the slow "
                f"link is {link_label(c.culprit, zh)}: {summary(c, zh)}."
            )
            p.plot_ranks = list(c.culprit.link or ())
            return p
        slow = on
    if links and slow:
        asked = {tuple(sorted(x)) for x in links}
        match = [
            c for c in slow if c.culprit.link is not None and tuple(sorted(c.culprit.link)) in asked
        ]
        # a rank's slow links without the link named: an asked link at that rank may be it
        at_rank = [
            c
            for c in slow
            if c.culprit.link is None and any(set(c.culprit.ranks) & set(x) for x in links)
        ]
        if not match:
            c = at_rank[0] if at_rank else slow[0]
            p.add_cause(c)
            a = ", ".join(f"{x}→{y}" for x, y in links)
            if at_rank:
                line = say(
                    "project.cannot_tell_whether_link_is_the", zh, a=a, summary=summary(c, zh)
                )
            else:
                line = say(
                    "project.no_link_is_not_the_slow",
                    zh,
                    a=a,
                    link_label=link_label(c.culprit, zh),
                    summary=summary(c, zh),
                )
            p.lines.append(line)
            p.plot_ranks = list(c.culprit.link or c.culprit.ranks)
            return p
        slow = match
    if slow:
        c = slow[0]
        p.add_cause(c)
        p.plot_ranks = list(c.culprit.link or ())
        rank_pos = next((i for i, x in enumerate(d.causes) if x.id == c.id), 0)
        # the cause's sentence already names the link and says it is slow: not said twice
        body = _slow_body(c, zh)
        if yes_no and healthy:  # "is the network fine?"
            p.lines.append(say("project.no_the_network_is_not_fine", zh, body=body))
        elif yes_no and single and (c.culprit.kind == "job" or _between_groups(c)):
            # "is one node's NIC bad?": every link at once, or every link between two groups of
            # hosts (whose NICs reach their own group at full speed), is not one part
            p.lines.append(say("project.no_no_single_node_nic_or", zh, body=body))
        elif yes_no and scope in _SCOPES and c.culprit.transport:
            # the part asked ("is it HCCS inside the server?") is where the slow link is
            part_en, part_zh = _SCOPES[scope]
            p.lines.append(
                f"是的，{part_zh}有问题：{body}。"
                if zh
                else f"Yes, {part_en} {'are' if scope == 'board' else 'is'} the problem: {body}."
            )
        elif yes_no:
            p.lines.append(say("project.yes_the_network_is_a_problem", zh, body=body))
        else:
            p.lines.append(f"{body}。" if zh else f"{body[0].upper()}{body[1:]}.")
        if rank_pos > 0:
            first_cause = d.causes[0]
            p.add_cause(first_cause)
            p.lines.append(
                _then("但它不是首要原因，首要原因在别处", summary(first_cause, zh), zh)
                if zh
                else _then(
                    "It is not the top cause, though; that one lies elsewhere",
                    lower_first(summary(first_cause, zh)),
                    zh,
                )
            )
        for c2 in slow[1:3]:
            p.add_cause(c2)
            p.lines.append(cause_bullet(c2, zh))
        # an independent fault besides the network: said, so it does not disappear
        other = next(
            (
                x
                for x in _real(d)
                if x.mechanism != Mechanism.SLOW_LINK
                and not _job_level(x)
                and all(x.id != y.id for y in p.causes)
            ),
            None,
        )
        if other is not None:
            p.add_cause(other)
            p.lines.append(
                _then("另外还有一个与网络无关的问题", summary(other, zh), zh)
                if zh
                else _then(
                    "Separately, a fault that is not the network",
                    lower_first(summary(other, zh)),
                    zh,
                )
            )
        return p
    comm = [c for c in _real(d) if c.category.value == "communication"]
    top = _real(d)[0] if _real(d) else None
    if which and not yes_no:  # "which link is slow?" with none: that is the answer
        # then where the time goes: the top cause, whatever its kind (a host stall is not hidden
        # behind exposed communication because the question was about links)
        main = top
        if main is not None:
            p.add_cause(main)
            p.plot_ranks = _culprit_ranks(main)[:8]
        # one sentence with the verdict: where the time goes names the culprit first
        rest = f"；时间损失在别处——{summary(main, zh)}。" if zh and main else "。"
        rest_en = (
            f"; the time goes elsewhere — {lower_first(summary(main, zh))}."
            if main and not zh
            else "."
        )
        p.lines.append(say("project.no_link_is_slow_no_link", zh, rest=(rest if zh else rest_en)))
        if comm and main is not None and comm[0].id != main.id:
            p.add_cause(comm[0])
            p.lines.append(cause_bullet(comm[0], zh))
        return p
    if (
        not yes_no
        and top is not None
        and top.category.value != "communication"
        and top.culprit.kind != "job"
        and any(v.how == "collective_wait" for v in top.victims)
    ):
        # "why do the ranks sit in the all-reduces when the bandwidth is fine?": with every
        # link at speed, they wait there for a late rank; that rank is the answer (then the
        # job's own exposed communication, when there is some)
        who = label(top.culprit, zh)
        p.add_cause(top)
        p.plot_ranks = _culprit_ranks(top)[:8]
        text = summary(top, zh) if zh else lower_first(summary(top, zh))
        p.lines.append(msg("answer.wait_for_rank", "zh" if zh else "en", who=who, summary=text))
        if comm:
            p.add_cause(comm[0])
            p.lines.append(cause_bullet(comm[0], zh))
        return p
    if comm and not yes_no:
        cc = comm[0]
        p.add_cause(cc)
        p.plot_ranks = _culprit_ranks(cc)[:8]
        p.lines.append(say("project.no_link_is_slow_the_cause", zh, summary=summary(cc, zh)))
        return p
    if top is not None and not yes_no:
        p.add_cause(top)
        p.plot_ranks = _culprit_ranks(top)[:8]
        p.lines.append(say("project.no_link_is_slow", zh, summary=summary(top, zh)))
        return p
    if healthy:  # "is the network fine?" and no link is slow
        main = comm[0] if comm else top
        if main is not None:
            p.add_cause(main)
        rest = (
            (
                f"；时间损失在别处——{summary(main, zh)}。"
                if zh
                else f"; the time goes elsewhere — {lower_first(summary(main, zh))}."
            )
            if main
            else ("。" if zh else ".")
        )
        p.lines.append(say("project.yes_the_network_is_fine_no", zh, rest=rest))
        return p
    if comm:
        cc = comm[0]
        if top is not None and top.id != cc.id:
            # the top cause first (a late rank makes every other rank's communication wait)
            p.add_cause(top)
            p.add_cause(cc)
            p.plot_ranks = _culprit_ranks(top)[:8]
            p.lines.append(
                f"不是网络的问题：没有发现慢链路；首要原因在别处——{summary(top, zh).rstrip('。')}。"
                + _then("通信本身也是一个原因", summary(cc, zh), zh)
                if zh
                else "No, the network is not the problem: no link is slow; the top cause lies "
                f"elsewhere — {lower_first(summary(top, zh)).rstrip('.')}."
                + " "
                + _then("Communication itself is also a cause", lower_first(summary(cc, zh)), zh)
            )
            return p
        p.add_cause(cc)
        p.lines.append(
            f"不是网络的问题：没有发现慢链路；但通信本身是一个原因：{summary(cc, zh)}。"
            if zh
            else "No, the network is not the problem: no link is slow; communication itself is a "
            f"cause, though — {lower_first(summary(cc, zh))}."
        )
        return p
    if top is not None:
        p.add_cause(top)
        p.lines.append(
            f"不是网络的问题：没有发现慢链路，时间损失在别处——{summary(top, zh)}。"
            if zh
            else "No, the network is not the problem: no link is slow; the time goes elsewhere — "
            f"{lower_first(summary(top, zh))}."
        )
        return p
    p.lines.append(say("project.no_the_network_is_not_the", zh, headline=headline(d, zh)))
    return p


def fix_first(d: Diagnosis, zh: bool, *, ranks_only: bool = False) -> Projection:
    """Answer to “What should I fix first?”: the first action of the top cause, with its gain.

    The actionable fault with the largest expected gain leads (optimizations of a working job,
    exposed communication and operator hotspots, come after the faults unless they gain at least
    ``OPTIMIZATION_LEAD`` times as much); with ``ranks_only``
    ("which rank should I fix first?") causes with a rank culprit lead and job-level ones follow.
    Exposed communication comes after a network fault that slows its collectives, and after a
    load imbalance when it is mostly AlltoAll (the token routing that overloads a rank sizes it).
    The next independent fault is named after it.
    """
    p = Projection()
    real = _real(d)
    if not real:
        return no_culprit(d, zh, p)

    # the actionable cause with the largest expected gain (trial item 5); ties keep report order
    def _act_gain(c: RootCause) -> float:
        # an action on the measurement ("collect again", gain 0, no bound) leads its cause's
        # remedies but gains nothing itself: the cause weighs what its next action gains
        acts = [r for r in c.remedies if r.kind == "action"]
        act = next((r for r in acts if not (r.gain_us == 0 and r.bound.value == "none")), None)
        if act is None:
            return -1.0 if not acts else float(c.gain_us or 0.0)
        g = act.gain_us if act.gain_us is not None else c.gain_us
        return float(g) if g is not None and g > 0 else 0.0

    # several late ranks share their peers' wait in layers (the last to arrive is listed first):
    # a lower layer is gained only once the ranks above it no longer arrive after it, so the
    # layered ranks are fixed in report order and weigh together, as the first of them
    # (the diagnosis marks them: ``late_ranks_gain_us``, what fixing all of them saves)
    layered = [c for c in real if "late_ranks_gain_us" in c.metrics]
    if len(layered) < 2:
        layered = []
    together = sum(max(_act_gain(c), 0.0) for c in layered)
    stated = layered[0].metrics["late_ranks_gain_us"] if layered else None

    def _order_gain(c: RootCause) -> float:
        if layered and c is layered[0]:
            return together
        return -1.0 if c in layered else _act_gain(c)

    # "which rank should I fix first?": the ranks' causes first, job-level causes after them;
    # what is broken (a rank, a link, the network, an idle job) before what could be optimized
    # (exposed communication, an operator hotspot), unless the optimization gains far more
    best_fault = max((_order_gain(c) for c in real if not is_optimization(c)), default=0.0)
    # exposed communication is measured on collectives a network fault (a slow or flapping link,
    # a congested transport) slows: its size is known only once that fault is repaired
    net_fault = any(
        c.category.value == "communication"
        and not is_optimization(c)
        and c.mechanism != Mechanism.PIPELINE_IMBALANCE
        for c in real
    )

    # AlltoAll traffic follows the token routing that overloads a rank with more work (MoE):
    # exposed communication that is mostly AlltoAll is sized by that imbalance, known once the
    # load is balanced
    routed = any("load_imbalance" in c.symptom_tags and not is_optimization(c) for c in real)

    def _alltoall(c: RootCause) -> bool:
        return c.metrics.get("alltoallv_share", 0.0) + c.metrics.get("alltoall_share", 0.0) >= 0.5

    def _after_faults(c: RootCause) -> bool:
        if not is_optimization(c):
            return False
        if c.mechanism == Mechanism.EXPOSED_COMMUNICATION and (
            net_fault or (routed and _alltoall(c))
        ):
            return True
        return _order_gain(c) < OPTIMIZATION_LEAD * best_fault

    order = sorted(
        (c for c in real if _order_gain(c) >= 0),
        key=lambda c: (ranks_only and _job_level(c), _after_faults(c), -_order_gain(c)),
    ) + [c for c in real if _order_gain(c) < 0]
    # the top cause is a fault nothing can be changed for yet (its data says who, not why: only
    # checks), and it costs more than the best change: finding out leads, the change follows
    top = real[0]
    check = next((r for r in top.remedies if r.kind == "check"), None)
    # (a top cause without a gain, e.g. waiting for ranks missing from the data, was ranked
    # first by the diagnosis on what it costs: finding out leads too)
    lead_check = (
        check is not None
        and not (ranks_only and _job_level(top))  # "which rank?": the job's cause follows
        and _act_gain(top) < 0
        and not is_optimization(top)
        and (top.gain_us is None or top.gain_us > max((_order_gain(c) for c in order), default=0.0))
    )
    if lead_check:
        assert check is not None
        p.add_cause(top)
        ctext = ((check.text_zh or check.text) if zh else check.text).strip().rstrip("。.")
        lab = label(top.culprit, zh)
        cost_zh = f"（它让其他卡每步约等 {us(top.gain_us)}）" if top.gain_us else ""
        cost_en = f" (it costs the others about {us(top.gain_us)} per step)" if top.gain_us else ""
        if top.gain_us and top.culprit.kind == "job":  # no "others": every rank loses it
            cost_zh = f"（每张卡每步最多损失 {us(top.gain_us)}）"
            cost_en = f" (it costs every rank up to {us(top.gain_us)} per step)"
        p.lines.append(
            f"先排查{lab}：{ctext}{cost_zh}。原因：{summary(top, zh)}。"
            if zh
            else f"Look into {lab} first: {lower_first(ctext)}{cost_en}. Why: {summary(top, zh)}."
        )
    for c in order:
        act = next((r for r in c.remedies if r.kind == "action"), None)
        if act is None:
            continue
        p.add_cause(c)
        text = (act.text_zh or act.text) if zh else act.text
        gain = act.gain_us if act.gain_us is not None else c.gain_us
        bound = act.bound if act.gain_us is not None else c.bound
        g = ""
        if gain is not None and gain > 0:
            ub = bound == BoundKind.UPPER_BOUND
            g = (
                (
                    f"，预计每步最多节省 {us(gain)}（上限）"
                    if ub
                    else f"，预计每步约节省 {us(gain)}（估计）"
                )
                if zh
                else (
                    f", for at most {us(gain)} per step (upper bound)"
                    if ub
                    else f", for about {us(gain)} per step (estimate)"
                )
            )
        lab = label(c.culprit, zh)
        if (
            c.culprit.kind == "job"
            and lab not in ("the whole job", "整个作业")
            and "every rank" not in lab
            and "每张卡" not in lab
        ):
            # a cost of the job: said of every rank, so no one rank is looked for
            lab = say("project.on_every_rank_no_rank_is", zh, lab=lab)
        text = text.strip().rstrip("。.")
        if lead_check:  # the change comes second, after finding out about the top cause
            p.lines.append(
                f"然后处理{lab}：{text}{g}。" if zh else f"Then {lab}: {lower_first(text)}{g}."
            )
            p.plot_ranks = list(top.culprit.ranks)[:8]
            return p
        # one colon per sentence: a remedy with its own "what: how" follows a dash
        sep_en, sep_zh = (" — ", "——") if any(x in text for x in ":：") else (": ", "：")
        if zh:
            p.lines.append(f"先处理{lab}{sep_zh}{text}{g}。原因——{summary(c, zh)}。")
        else:
            p.lines.append(
                f"Fix {lab} first{sep_en}{lower_first(text)}{g}. Why — {lower_first(summary(c, zh))}."
            )
        if layered and c is layered[0]:
            rest = layered[1:]
            each = [
                f"{label(x.culprit, zh)}{'（' if zh else ' ('}{us(x.gain_us or 0.0)}{'）' if zh else ')'}"
                for x in rest
            ]
            all_zh = f"全部修好每步约节省 {us(stated)}（估计）。" if stated else ""
            all_en = (
                f"; fixing all of them saves about {us(stated)} per step (estimate)"
                if stated
                else ""
            )
            p.lines.append(
                f"{'、'.join(each)}也晚到（括号内为修好它每步节省的时间）：这些收益要等{lab}不再比它们更晚到之后才能得到"
                + ("；" + all_zh if all_zh else "。")
                if zh
                else f"Late too, with what fixing each saves per step: {', '.join(each)}; those "
                f"gains come only once {lab} no longer arrives after them{all_en}."
            )
            for x in rest:
                p.add_cause(x)
        # "which rank first?" passes over a job-level first cause by design: nothing to explain
        if c is not real[0] and not (ranks_only and real[0].culprit.kind == "job"):
            top = real[0]
            p.add_cause(top)
            if _act_gain(top) < 0:
                p.lines.append(
                    say("project.the_top_cause_has_no_direct", zh, summary=summary(top, zh))
                )
            else:
                # an upper bound that beats the fault's estimate is not "a larger expected gain"
                upper = is_optimization(c) and c.bound == BoundKind.UPPER_BOUND
                p.lines.append(
                    say(
                        "project.the_report_lists_first_upper"
                        if upper
                        else "project.the_report_lists_first_it_holds",
                        zh,
                        label=label(top.culprit, zh),
                        label_b=label(c.culprit, zh),
                        gain=us(_act_gain(c)),
                        gain_top=us(_act_gain(top)),
                    )
                )
        # the next independent fault: it stays after the first is fixed (ranked by its gain)
        nxt = next(
            (
                x
                for x in order
                if x is not c
                and x not in layered
                and any(r.kind == "action" for r in x.remedies)
                and _act_gain(x) > 0
            ),
            None,
        )
        if nxt is not None:
            act2 = next(r for r in nxt.remedies if r.kind == "action")
            t2 = ((act2.text_zh or act2.text) if zh else act2.text).strip().rstrip("。.")
            g2 = us(_act_gain(nxt))
            ub2 = (act2.bound if act2.gain_us is not None else nxt.bound) == BoundKind.UPPER_BOUND
            amt = (
                (f"每步最多 {g2}" if ub2 else f"每步约 {g2}")
                if zh
                else (f"at most {g2} per step" if ub2 else f"about {g2} per step")
            )
            p.add_cause(nxt)
            if nxt.culprit.kind == "job":
                # a job-level cause is named by what it is ("every rank idles"), not "the whole
                # job" a second time
                name = _cause_name(nxt, zh)
                p.lines.append(
                    f"然后处理与之无关的另一个问题——{name}：{t2}（{amt}）。"
                    if zh
                    else f"Then an independent fault, {name} — {lower_first(t2)} ({amt})."
                )
            else:
                p.lines.append(
                    f"然后处理与之无关的另一个问题——{label(nxt.culprit, zh)}：{t2}（{amt}）。"
                    if zh
                    else f"Then fix {label(nxt.culprit, zh)}, an independent fault: "
                    f"{lower_first(t2)} ({amt})."
                )
        p.plot_ranks = list(c.culprit.ranks)[:8]
        return p
    if lead_check:  # nothing to change besides finding out
        p.plot_ranks = list(top.culprit.ranks)[:8]
        return p
    p.add_cause(top)
    chk = next((r for r in top.remedies if r.kind == "check"), None)
    what = ((chk.text_zh or chk.text) if zh else chk.text).strip().rstrip("。.") if chk else ""
    p.lines.append(
        f"首先排查{label(top.culprit, zh)}：{summary(top, zh)}。"
        + (f"下一步：{what}。" if what else "")
        if zh
        else f"First look at {label(top.culprit, zh)}: {summary(top, zh)}."
        + (f" Next: {what}." if what else "")
    )
    return p


def evidence(d: Diagnosis, ranks: Sequence[int], zh: bool) -> Projection:
    """Answer to "how do you know?": the evidence a cause rests on.

    The cause of the ranks asked (else the top one) and up to four analyzer findings it claims,
    each with its numbers and the files they come from.
    """
    p = Projection()
    real = _real(d)
    if not real:
        return no_culprit(d, zh, p)
    c = (
        next((x for x in real if set(ranks) & set(_culprit_ranks(x))), real[0])
        if ranks
        else real[0]
    )
    p.add_cause(c)
    p.plot_ranks = _culprit_ranks(c)[:8]
    lab = label(c.culprit, zh)
    p.lines.append(
        f"判断{lab}的依据：{summary(c, zh)}。"
        if zh
        else f"What shows it for {lab}: {lower_first(summary(c, zh))}."
    )
    shown = 0
    for f in c.findings:
        text = (f.summary_zh or f.summary) if zh else f.summary
        if not text.strip():
            continue
        srcs = sorted({e.source for e in f.evidence if e.source})[:2]
        src = (
            ("（来源：" + "，".join("".join(cite_zh(x)) for x in srcs) + "）")
            if zh and srcs
            else (f" (from {', '.join(srcs)})" if srcs else "")
        )
        p.lines.append(f"- {text.strip().rstrip('。.')}{src}{'。' if zh else '.'}")
        shown += 1
        if shown == 4:
            break
    if not shown:
        p.lines.append(say("project.it_rests_on_the_wait_attribution", zh))
    return p


#: A cause's culprit in its role, after "goes to" / "损失在…上" (English, Chinese templates).
_ROLE = {
    Mechanism.COMPUTE_STRAGGLER: (
        "{}, which spends longer computing than its peers",
        "计算耗时比其他卡长的{}",
    ),
    Mechanism.HOST_STALL: (
        "{}, whose device idles waiting for its host",
        "设备空闲、等主机下发的{}",
    ),
    Mechanism.SLOW_LINK: ("the slow {}", "慢{}"),
    Mechanism.SLOW_GROUP: ("{}, slower than the other ranks", "比其他卡慢的{}"),
    Mechanism.PIPELINE_IMBALANCE: ("{}, the slowest pipeline stage", "最慢的{}"),
    Mechanism.LATE_ARRIVAL: ("{}, late at the collectives", "晚到集合通信的{}"),
    Mechanism.DEGRADATION: ("{}, slowing down over the steps", "随步数变慢的{}"),
}


def _in_role(c: RootCause, zh: bool) -> str:
    """``c``'s culprit named with what it does wrong, for "X per step goes to <it>"."""
    if c.culprit.kind in ("job", "none"):
        return _cause_name(c, zh)
    if "device_held" in c.symptom_tags:  # the device idles with work queued (another process)
        tpl: tuple[str, str] | None = (
            "{}, whose device stalls with its work already queued",
            "设备在任务已下发时停顿的{}",
        )
    elif c.mechanism is Mechanism.SLOW_LINK and c.culprit.link is None:
        # a set of links or one rank's links: the label names them ("the HCCS links among …")
        tpl = ("{}, which are slow", "变慢的{}")
    elif c.mechanism is Mechanism.HOST_STALL and c.metrics.get("host_delay_measured") == 0.0:
        tpl = ("{}, whose device idles (Free) more than its peers'", "设备空闲时间比其他卡多的{}")
    else:
        tpl = _ROLE.get(c.mechanism)
    lab = label(c.culprit, zh)
    return tpl[1 if zh else 0].format(lab) if tpl else lab


def how_much(d: Diagnosis, zh: bool, *, share: bool = False, total: bool = False) -> Projection:
    """Answer to “How much could I gain?”: the gain of each cause, top first.

    With ``share`` ("what fraction of the step / device time does it take?"), the top cause's
    own account (the shares it states) comes first and its gain after. With ``total`` ("if
    everything were fixed", "top 3 with what each saves") and two causes or more with a gain,
    their sum opens the answer (each cause's gain named), then the top cause's account.
    """
    p = Projection()
    first = next(iter(_real(d)), None)
    real = [c for c in _real(d) if c.gain_us]
    worst = (
        max(first.victims, key=lambda v: v.lost_us) if first is not None and first.victims else None
    )
    lost = worst.lost_us if worst is not None else 0.0
    if first is not None and not first.gain_us and worst is not None and lost > 0 and not share:
        # the largest loss has no gain estimate (a peer the data lacks): its victims' loss first,
        # then the causes that have one
        p.add_cause(first)
        of = say("project.of_that_rank_s_step", zh, worst_share=pct(worst.share))
        p.lines.append(
            f"损失最大的是在集合通信中的等待：其他卡每步最多等待 {us(lost)}{of}，等的是"
            f"{label(first.culprit, True)}；修复它能节省多少无法从这份数据判断。原因——{summary(first, True)}。"
            if zh
            else f"The largest loss is waiting at the collectives: up to {us(lost)} per step{of}, "
            f"for {label(first.culprit, False)}; what fixing it saves cannot be told from this "
            f"data. Why — {lower_first(summary(first, False))}."
        )
        for c in real[:2]:
            p.add_cause(c)
            p.lines.append(cause_bullet(c, zh))
        return p
    if not real:
        return no_culprit(d, zh, p)
    top = real[0]
    p.add_cause(top)
    g = gain_phrase(top, zh)
    after_txt = ""
    if (
        d.step_time_us > 0
        and top.gain_us
        and top.gain_us < d.step_time_us
        # events hit some steps: their gain is averaged over all steps, and the step they hit is
        # stated by the cause itself (the clean steps' time), not as "median step minus gain"
        and top.mechanism is not Mechanism.STEP_EVENTS
    ):
        # the step after the fix: median step time - gain (both from the diagnosis; grounding
        # adds the same two derived numbers, see grounding.add_diagnosis)
        after, frac = d.step_time_us - top.gain_us, top.gain_us / d.step_time_us
        # an upper bound is not a prediction: the best case, said as such
        after_txt = say(
            "project.the_average_step_of_would_take"
            if top.bound == BoundKind.UPPER_BOUND
            else "project.the_average_step_of_would_take_b",
            zh,
            us=us(d.step_time_us),
            us_b=us(after),
            frac=pct(frac),
        )
    hit, clean = top.metrics.get("hit_step_us"), top.metrics.get("clean_step_us")
    if top.metrics.get("onset_cost_per_step_us") is not None and hit and clean:
        # slow from a step on: its slow steps would run as the clean ones do
        frac = top.metrics.get("onset_cost_share", (hit - clean) / hit)
        after_txt = say(
            "project.its_slow_steps_median_would_run",
            zh,
            us=us(hit),
            us_b=us(clean),
            frac=pct(frac),
        )
    if share:  # the shares the cause states first, then what fixing it gives
        p.lines.append(
            f"{_sentence(summary(top, zh), zh)}修复{label(top.culprit, zh)}：{g}{after_txt}。"
            if zh
            else f"{_sentence(upper_first(summary(top, zh)), zh)} For {label(top.culprit, zh)}, "
            f"{g}{after_txt}."
        )
    elif top.mechanism is Mechanism.STEP_EVENTS or "onset_cost_per_step_us" in top.metrics:
        p.lines.append(
            f"修复{label(top.culprit, zh)}：{g}{after_txt}。原因——{summary(top, zh)}。"
            if zh
            else f"For {label(top.culprit, zh)}, {g}{after_txt}. Why — {lower_first(summary(top, zh))}."
        )
    else:
        # the amount, what it goes to (the culprit in its role) and the step it would leave
        upper = top.bound == BoundKind.UPPER_BOUND
        gain_us = float(top.gain_us or 0.0)
        gain = us(gain_us)
        bound = ("上限" if upper else "估计") if zh else ("upper bound" if upper else "estimate")
        fits = 0 < gain_us < d.step_time_us
        if fits:
            frac_txt = pct(gain_us / d.step_time_us)
            paren = say(
                "project.of_the_average_step",
                zh,
                frac_txt=frac_txt,
                us=us(d.step_time_us),
                bound=bound,
            )
        else:
            paren = say("project.bound_paren", zh, bound=bound)
        amount = (
            f"每步{'最多' if upper else '约'} {gain}{paren}"
            if zh
            else f"{'up to' if upper else 'about'} {gain} per step{paren}"
        )
        why = f"原因——{summary(top, zh)}。" if zh else f"Why — {lower_first(summary(top, zh))}."
        start = len(p.lines)
        if top.culprit.kind in ("job", "none"):  # the job's own cost: every rank loses it
            p.lines.append(
                f"所有卡{amount}损失在一个作业级原因上（不是某一张卡）。{why}"
                if zh
                else f"{upper_first(amount)} is lost on every rank, to a cause of the whole job "
                f"(not of one rank). {why}"
            )
        elif zh:
            p.lines.append(f"{amount}损失在{_in_role(top, zh)}上。{why}")
        else:
            p.lines.append(f"{upper_first(amount)} goes to {_in_role(top, zh)}. {why}")
        if fits:
            after_s = us(d.step_time_us - gain_us)
            p.lines.append(
                (
                    f"完全消除它，平均步长最好的情况下从 {us(d.step_time_us)} 降到约 {after_s}"
                    "（实际收益取决于修改后还剩多少）。"
                    if upper
                    else f"修复后平均步长从 {us(d.step_time_us)} 降到约 {after_s}。"
                )
                if zh
                else (
                    f"Removing it entirely would take the average step from {us(d.step_time_us)} "
                    f"to about {after_s} at best (how much of it a change recovers is not in the "
                    "data)."
                    if upper
                    else f"Fixing it would take the average step from {us(d.step_time_us)} to "
                    f"about {after_s}."
                )
            )
        # a first action that removes a named part of it: what that part alone gives
        act = next((r for r in top.remedies if r.kind == "action"), None)
        part = float(act.gain_us or 0.0) if act is not None else 0.0
        if act is not None and 0 < part < 0.9 * gain_us:
            what = (act.text_zh.split("：")[0] if zh else act.text.split(":")[0]).rstrip("。.")
            most = act.bound == BoundKind.UPPER_BOUND
            # the change the answer proposes first is what "how much would fixing it save?"
            # asks about: its saving leads, the whole cost follows as the bound it is
            p.lines.insert(
                start,
                f"第一项修改（{what}）每步{'最多' if most else '约'}节省 {us(part)}，是下面这个原因的一部分。"
                if zh
                else f"The first change ({lower_first(what)}) saves "
                f"{'up to' if most else 'about'} {us(part)} per step, a part of the cause below.",
            )
    gained = [c for c in d.causes if (c.gain_us or 0.0) > 0]
    if len(gained) >= 2 and gained == [c for c in real if c in gained]:
        # every cause together: their gains summed (independent causes; grounded as the running
        # sum of the diagnosis' gains), "up to" when one of them is an upper bound
        all_us = sum(float(c.gain_us or 0.0) for c in gained)
        any_upper = any(c.bound == BoundKind.UPPER_BOUND for c in gained)
        together = fix_together(d, zh, count=None) if total else None
        if together is not None:  # the sum asked for opens the answer, each cause's part named
            p.lines.insert(0, together.lines[0])
        else:
            p.lines.append(
                f"这份数据中找到的 {len(gained)} 个原因合计每步"
                f"{'最多' if any_upper else '约'} {us(all_us)}。"
                if zh
                else f"{'Both' if len(gained) == 2 else f'All {len(gained)}'} causes found come "
                f"to {'up to' if any_upper else 'about'} {us(all_us)} per step together."
            )
    # the causes the sum above counts are each named with their part (at most five more)
    summed = len(gained) >= 2 and gained == [c for c in real if c in gained]
    for c in real[1 : 6 if summed else 3]:
        p.add_cause(c)
        p.lines.append(cause_bullet(c, zh))
    return p


def steps(d: Diagnosis, zh: bool, asked: Sequence[int] = (), *, yes_no: bool = False) -> Projection:
    """Answer to “Why are some steps slow?”: step-level causes with their (step, rank) list.

    With ``asked`` steps ("why is step 10 slow?"), the events of those steps are named first, or
    it is said that those steps have none (and what costs them time instead). With ``yes_no``
    ("is it getting slower over time?", "are some steps slower?"), the first words are the
    verdict: yes when a step-level cause (events, degradation, a cause scoped to some steps)
    exists, else no.
    """
    p = _steps(d, zh, asked)
    return _step_verdict(p, d, zh) if yes_no else p


def _steps(d: Diagnosis, zh: bool, asked: Sequence[int]) -> Projection:
    p = Projection()
    if asked:
        hit = [
            (c, [(s, r) for s, r in c.culprit.events if s in asked])
            for c in d.causes
            if c.mechanism == Mechanism.STEP_EVENTS
        ]
        hit = [(c, ev) for c, ev in hit if ev]
        st = ", ".join(str(x) for x in asked)
        if hit:
            hc, hev = hit[0]
            p.add_cause(hc)
            pairs = ", ".join(f"(step {s}, rank {r})" for s, r in hev)
            pairs_zh = "、".join(f"第 {s} 步的{r}号卡" for s, r in hev)
            many = len(asked) > 1
            p.lines.append(
                f"第 {st} 步慢在{pairs_zh}的停顿——{summary(hc, zh)}。"
                if zh
                else f"Step{'s' if many else ''} {st} {'are' if many else 'is'} slow because of "
                f"the stall{'s' if len(hev) > 1 else ''} at {pairs} — "
                f"{lower_first(summary(hc, zh))}."
            )
            p.plot_ranks = [r for _, r in hev][:8]
            return p
        if set(asked) & set(d.excluded_steps):
            p.lines.append(excluded_line(d, zh))
            return p
        # a cause scoped to some steps that include the asked ones (a rank slow from a step on,
        # the network slow in some steps, an intermittent link)
        scoped = next(
            (c for c in _real(d) if c.steps and set(c.steps) & set(asked)),
            None,
        )
        if scoped is not None:
            p.add_cause(scoped)
            p.plot_ranks = _culprit_ranks(scoped)[:8]
            lab, text = label(scoped.culprit, zh), summary(scoped, zh)
            head = (
                f"Step{'s' if len(asked) > 1 else ''} {st} {'are' if len(asked) > 1 else 'is'} slow"
            )
            who = lab.split(" (")[0]
            if text.lower().startswith(who.lower()):  # "rank 9 is slower from step 13 on ..."
                p.lines.append(
                    f"第 {st} 步慢是因为{text.rstrip('。')}。"
                    if zh
                    else f"{head} because {lower_first(text).rstrip('.')}."
                )
            else:
                p.lines.append(
                    f"第 {st} 步慢在{lab}——{text.rstrip('。')}。"
                    if zh
                    else f"{head} because of {lab} — {lower_first(text).rstrip('.')}."
                )
            return p
        # a cause scoped to the steps right after the asked ones ("the save is called at the end
        # of step 11": steps 12-14 are slow): the asked step is where it starts, not what is slow
        after = next(
            (c for c in _real(d) if c.steps and 1 <= min(c.steps) - max(asked) <= 2),
            None,
        )
        if after is not None:
            p.add_cause(after)
            p.plot_ranks = _culprit_ranks(after)[:8]
            p.lines.append(
                say(
                    "project.steps_right_after",
                    zh,
                    st=st,
                    summary=(summary(after, zh) if zh else lower_first(summary(after, zh)))
                    .rstrip("。")
                    .rstrip("."),
                )
            )
            return p
        p.lines.append(say("project.step_has_no_event_of_its", zh, st=st))
    ev = [c for c in d.causes if c.mechanism in (Mechanism.STEP_EVENTS, Mechanism.DEGRADATION)]
    for i, c in enumerate(ev[:3]):
        p.add_cause(c)
        if c.mechanism == Mechanism.STEP_EVENTS:
            e = events_text(c, zh)
            p.lines.append(
                (say("project.the_slow_steps_come_from_one", zh, e=e, summary=summary(c, zh)))
                if i == 0
                else cause_bullet(c, zh)
            )
            p.plot_ranks += [r for _, r in c.culprit.events if r not in p.plot_ranks][:8]
        else:
            sts = ", ".join(str(s) for s in c.steps)
            scope_zh = f"（step {sts}）" if sts else ""
            scope_en = f" (steps {sts})" if sts else ""
            text = summary(c, zh)
            if i > 0:
                p.lines.append(cause_bullet(c, zh))
            elif _GROWS_ALREADY.search(text):
                # the cause's summary says it already ("Steps get slower over the run on ..."):
                # one headline, not "Step time grows over the run: Steps get slower ..."
                p.lines.append(text.rstrip("。.") + ("。" if zh else "."))
            else:
                p.lines.append(
                    say(
                        "project.step_time_grows_over_the_run",
                        zh,
                        scope=(scope_zh if zh else scope_en),
                        summary=text,
                    )
                )
    ex = excluded_line(d, zh)
    if not ev and ex:
        # the slow-looking step is a data artifact: that is the answer, said first
        p.lines.append(ex)
        ex = ""
        art = _meta(d, Mechanism.DATA_ARTIFACT)
        if art is not None:
            p.add_cause(art)
    real = _real(d)
    # no step events, but a cause scoped to some of the steps (a job idle in the steps that
    # compile new shapes, a rank slow from a step on): it is what makes those steps slow
    part = next((c for c in real if _some_steps(c, d)), None)
    if not ev and part is not None:
        p.add_cause(part)
        p.plot_ranks = _culprit_ranks(part)[:8]
        st = ", ".join(str(x) for x in part.steps)
        many = len(part.steps) > 1
        lab = label(part.culprit, zh)
        own = lab.startswith(("step", "第"))  # the steps themselves on every rank: no "because"
        st_zh = "、".join(str(x) for x in part.steps)
        if own:  # its summary says which steps and that every rank is slow in them
            line = _sentence(upper_first(summary(part, zh)), zh)
        elif zh:
            line = f"慢的是第 {st_zh} 步，原因在{lab}——{summary(part, zh).rstrip('。')}。"
        else:
            line = (
                f"Step{'s' if many else ''} {st} {'are' if many else 'is'} slow because of "
                f"{lab} — {lower_first(summary(part, zh)).rstrip('.')}."
            )
        p.lines.append(line)
    elif not ev:
        if real:
            p.add_cause(real[0])
            p.lines.append(
                say("project.no_step_level_cause_the_steps", zh, summary=summary(real[0], zh))
            )
        else:
            nc = _meta(d, Mechanism.NO_CULPRIT) or _meta(d, Mechanism.NOT_ENOUGH_SIGNAL)
            rest = _sentence(summary(nc, zh), zh) if nc is not None else ""
            if nc is not None:
                p.add_cause(nc)
            p.lines.append(
                ("没有哪一步比其他步慢。" + rest)
                if zh
                else ("No step is slower than the others. " + rest).strip()
            )
    if ex:
        p.lines.append(ex)
    return p


def _some_steps(c: RootCause, d: Diagnosis) -> bool:
    """Whether cause ``c`` is scoped to some of the profile's (kept) steps, not all of them."""
    return bool(c.steps) and set(c.steps) < set(d.steps) - set(d.excluded_steps)


def _step_verdict(p: Projection, d: Diagnosis, zh: bool) -> Projection:
    """Prefix the first line of a steps projection with yes/no from its causes."""
    if not p.lines:
        return p
    yes = any(
        c.mechanism in (Mechanism.STEP_EVENTS, Mechanism.DEGRADATION) or _some_steps(c, d)
        for c in p.causes
    )
    v = ("是的：" if yes else "不是：") if zh else ("Yes: " if yes else "No: ")
    p.lines[0] = with_verdict(v, p.lines[0], zh)
    return p


_TOPIC_CAT = {"compute": "compute", "communication": "communication", "host": "scheduling"}


def category(
    d: Diagnosis, topics: Sequence[str], yes_no: bool, zh: bool, *, breakdown_first: bool = False
) -> Projection:
    """Compute / scheduling / communication question: the category of the top cause, with numbers.

    With ``breakdown_first`` ("where does the time go?"), the cluster-wide shares of the step
    follow the first sentence (the cause that loses the most) directly.
    """
    p = Projection()
    real = _real(d)
    nes = _meta(d, Mechanism.NOT_ENOUGH_SIGNAL)
    if not real and nes is not None:  # the kind cannot be told: say so, with what would tell it
        p.add_cause(nes)
        if zh:
            lead = "无法判断：" if yes_no else "无法从这份数据判断主要瓶颈的类型："
        else:
            lead = "Cannot tell: " if yes_no else "The kind of the main bottleneck cannot be told: "
        p.lines.append(f"{lead}{nes_reason(nes, zh)}{'。' if zh else '.'}")
        add_shares(p, d, zh)
        return p
    if not real:
        no_culprit(d, zh, p)
        return p
    top = real[0]
    p.add_cause(top)
    cat = top.category.value
    cat_txt = _CATEGORY.get(cat, _CATEGORY["unknown"])[1 if zh else 0]
    asked = [_TOPIC_CAT[t] for t in topics if t in _TOPIC_CAT]
    if cat == "unknown":  # who is known, not what kind of problem (e.g. its own time is missing)
        if zh:
            lead = "无法判断：" if yes_no else "无法从这份数据判断主要瓶颈的类型："
        else:
            lead = "Cannot tell: " if yes_no else "The kind of the main bottleneck cannot be told: "
        p.lines.append(f"{lead}{summary(top, zh)}{'。' if zh else '.'}")
        other = next((c for c in real if c.category.value in asked), None)
        if other is not None:
            p.add_cause(other)
            p.lines.append(
                f"{_CATEGORY[other.category.value][1]}方面也有一个次要原因：{summary(other, zh)}。"
                if zh
                else f"There is also a lesser {other.category.value} cause: {summary(other, zh)}."
            )
    elif yes_no and asked == ["communication"] and top.id == "cause.peer_wait.missing_ranks":
        # the time is in the collectives, but waiting for a peer the data lacks, not transfer:
        # neither a plain yes (tuning communication would not help) nor a no
        p.lines.append(
            _then(
                "表现为通信，但不是通信本身的问题：时间花在等待晚到或缺失的对端上，而不是数据传输",
                summary(top, zh),
                zh,
            )
            if zh
            else _then(
                "It shows up as communication, but communication itself is not the problem: the "
                "time is spent waiting for a late or missing peer, not transferring data",
                summary(top, zh),
                zh,
            )
        )
    elif yes_no and len(asked) == 1:
        yes = asked[0] == cat
        lead = ("是的，" if yes else "不是，") if zh else ("Yes, " if yes else "No, ")
        p.lines.append(
            _then(f"{lead}主要瓶颈是{cat_txt}", summary(top, zh), zh)
            if zh
            else _then(f"{lead}the main bottleneck is {cat_txt}", summary(top, zh), zh)
        )
        if not yes:
            other = next((c for c in real if c.category.value == asked[0]), None)
            if other is not None:
                p.add_cause(other)
                p.lines.append(
                    f"{_CATEGORY[asked[0]][1]}方面也有一个次要原因：{summary(other, zh)}。"
                    if zh
                    else f"There is also a lesser {asked[0]} cause: {summary(other, zh)}."
                )
    else:
        p.lines.append(
            _then(f"主要瓶颈是{cat_txt}", summary(top, zh), zh)
            if zh
            else _then(f"The main bottleneck is {cat_txt}", summary(top, zh), zh)
        )
    dom = dominant(top, zh)
    if dom and dom not in summary(top, zh):  # (a summary that gives it is not repeated)
        p.lines.append(
            f"{label(top.culprit, zh)}：{dom}。"
            if zh
            else f"{label(top.culprit, zh)[0].upper() + label(top.culprit, zh)[1:]}: {dom}."
        )
    why = _category_why(top, zh) if cat != "unknown" else ""
    if why:
        p.lines.append(why)
    sl = shares_line(d, zh)
    if sl:
        p.lines.append(sl)
    shown = {c.id for c in p.causes}
    # a second cause of another kind, as large: the answer to "which kind?" is then not one kind
    second = next(
        (
            c
            for c in real[1:]
            if c.id not in shown
            and c.category is not top.category
            and _size(c) > 0
            and _size(c) >= SIMILAR_SIZE * _size(top)
        ),
        None,
    )
    if second is not None:
        p.add_cause(second)
        cat2 = _CATEGORY.get(second.category.value, _CATEGORY["unknown"])[1 if zh else 0]
        p.lines.append(
            say(
                "project.another_cause_of_comparable_size_about",
                zh,
                cat2=cat2,
                us=us(_size(second)),
                us_b=us(_size(top)),
                summary=summary(second, zh),
            )
        )
    p.plot_ranks = list(top.culprit.ranks)[:8]
    if breakdown_first and sl and not yes_no and p.lines.index(sl) > 1:
        p.lines.remove(sl)
        p.lines.insert(1, sl)
        # the lines that pointed down to the shares now follow them
        p.lines = [
            x.replace("cluster-wide shares below", "cluster-wide shares above").replace(
                "在下面的全集群占比里", "在上面的全集群占比里"
            )
            for x in p.lines
        ]
    return p


#: A second cause is "of similar size" when it explains at least this share of the top one's time.
SIMILAR_SIZE = 0.5


def _size(c: RootCause) -> float:
    """Per-step time a cause explains: its gain, else its largest victim loss (µs)."""
    if c.gain_us is not None and c.gain_us > 0:
        return float(c.gain_us)
    return max((i.lost_us for i in c.victims), default=0.0)


def _category_why(c: RootCause, zh: bool) -> str:
    """Why the answer's category follows from the numbers (trial item 8).

    The category is that of the top cause (its culprit's own time); the victims' waiting counts
    as Communication (Not Overlapped) or Free in the cluster-wide shares, yet it is time lost to
    this cause, so the shares alone do not name the category.
    """
    vic = sorted(c.victims, key=lambda i: -i.lost_us)
    if c.culprit.kind == "job" or not vic or vic[0].lost_us <= 0:
        return ""
    v = vic[0]
    how_en, how_zh = _HOW.get(v.how, ("lose time", "损失时间"))
    cat = c.category.value
    cat_zh = _CATEGORY.get(cat, _CATEGORY["unknown"])[1]
    lab = label(c.culprit, zh)
    if zh:
        return (
            f"为什么是{cat_zh.split('（')[0]}：类型取自{lab}本身，"
            f"其他卡{how_zh}（每步最多 {us(v.lost_us)}，占其步长的 {pct(v.share)}）是被它拖累的时间，"
            "在下面的全集群占比里算作通信或空闲，但不是另一个问题。"
        )
    return (
        f"Why {cat}: the category comes from {lab} itself; the other ranks "
        f"{how_en.replace('waits', 'wait').replace('sits', 'sit').replace('loses', 'lose').replace('spends', 'spend')} "
        f"(up to {us(v.lost_us)} per step, {pct(v.share)} of their step) because of it — that "
        "time counts as communication or Free in the cluster-wide shares below, but it is not a "
        "separate problem."
    )


def pipeline(d: Diagnosis, stages: Sequence[int], zh: bool, *, yes_no: bool = False) -> Projection:
    """Pipeline question: the stage-imbalance cause (downstream waits, upstream dominated by ...).

    Without one, the first cause whose culprit others wait for (a slow hand-off between stages, a
    late rank): the Bubble is waiting, and that is what it waits for.

    With ``yes_no`` and ``stages`` ("is stage 1 slow?"), the verdict comes first: yes when the
    stage asked about is the culprit stage, no when it is the waiting side.
    """
    p = Projection()
    pc = [c for c in d.causes if c.mechanism == Mechanism.PIPELINE_IMBALANCE]
    if not pc:
        # no stage holds the others back: what the waiting ranks wait for (a hand-off between
        # stages, a late rank, a link) is the cause the wait attribution blames them on
        pc = [c for c in _real(d) if c.victims and c.culprit.kind != "job"][:1]
    if not pc:
        return p  # the caller falls back to the bubble findings
    c = pc[0]
    p.add_cause(c)
    vic = sorted(c.victims, key=lambda i: -i.lost_us)
    lab = label(c.culprit, zh)
    if c.culprit.kind == "job":
        # balanced stages: the schedule's bubble, no stage holds the others back
        text = _sentence(summary(c, zh), zh)
        if stages or yes_no:
            st = ", ".join(str(s) for s in stages)
            asked_zh = f"不是阶段{st}的问题" if st else "不是"
            asked_en = f"No, stage {st} is not the problem" if st else "No"
            text = (
                f"{asked_zh}：没有哪个阶段拖慢流水线——{text.rstrip('。')}。"
                if zh
                else f"{asked_en}: no stage holds the pipeline back — "
                f"{lower_first(text).rstrip('.')}."
            )
        p.lines.append(text)
        p.plot_ranks = [r for i in vic[:8] for r in (i.rank,)]
        return p
    if vic:  # the stage that holds the pipeline back, then the cause (its wait said once)
        p.lines.append(
            f"{lab}拖慢了流水线——{summary(c, zh).rstrip('。')}。"
            if zh
            else f"{lab[0].upper() + lab[1:]} holds the pipeline back — "
            f"{lower_first(summary(c, zh)).rstrip('.')}."
            if c.culprit.stage is not None
            else f"The pipeline is held back by {lab} — {lower_first(summary(c, zh)).rstrip('.')}."
        )
    else:
        p.lines.append(_sentence(summary(c, zh), zh))
    if yes_no and stages and c.culprit.stage is not None:
        yes = c.culprit.stage in stages
        p.lines[0] = with_verdict(
            ("是的：" if yes else "不是：") if zh else ("Yes: " if yes else "No: "), p.lines[0], zh
        )
    if stages and c.culprit.stage is not None and c.culprit.stage not in stages:
        st = ", ".join(str(s) for s in stages)
        p.lines.append(say("project.stage_is_the_waiting_side_not", zh, st=st))
    p.plot_ranks = list(c.culprit.ranks)[:8]
    return p


def _shared_idle(d: Diagnosis, real: list[RootCause]) -> RootCause | None:
    """The job-idle cause when it is not the top cause but costs more than it (upper bound)."""
    idle = next((c for c in real if c.mechanism == Mechanism.JOB_IDLE), None)
    if idle is None or not real or real[0] is idle:
        return None
    top_gain = real[0].gain_us or 0.0
    return idle if (idle.gain_us or 0.0) > top_gain else None


def job_question(
    d: Diagnosis, zh: bool, idle: bool, *, only_idle: bool = False
) -> Projection | None:
    """Answer to "why is every rank idle / slow?": the job-level cause first, then the late ranks.

    ``idle``: the question is about idle time (Free), so the job-idle cause answers it; else the
    largest job-level cause. ``only_idle`` ("where in the step is the idle?"): only the job-idle
    cause answers (it says where the idle every rank shares sits), even when it is not the top
    cause. ``None`` without such a cause (the other projections answer).
    """
    real = _real(d)
    jobs = [c for c in real if _job_level(c)]
    if idle or only_idle:
        # the job's idle: unexplained, or the host's dispatch (a job-wide host stall)
        idle_causes = [c for c in jobs if c.mechanism in (Mechanism.JOB_IDLE, Mechanism.HOST_STALL)]
        jobs = idle_causes if only_idle else (idle_causes or jobs)
    if not jobs:
        return None
    c = jobs[0]
    p = Projection(lines=[_sentence(summary(c, zh), zh)])
    p.add_cause(c)
    late = [x for x in real if not _job_level(x)][:3]
    if late:
        for x in late:
            p.add_cause(x)
        first = late[0]
        name_en = label(first.culprit, False)
        p.lines.append(
            f"除此之外，{label(first.culprit, True)}还有自己的原因——{summary(first, zh)}。"
            if zh
            else f"Besides that, {name_en} has a cause of its own — "
            f"{lower_first(summary(first, zh))}."
        )
    return p


def late_chain_line(causes: Sequence[RootCause], zh: bool) -> str:
    """What fixing a chain of late ranks together saves, when each alone saves little.

    A chain: causes of single late ranks where every rank a cause's gain waits for
    (:attr:`RootCause.gain_after`) is the culprit of another cause listed. Fixing all of them saves
    the sum of their gains (the first's alone, each next one's once those before it are fixed), an
    upper bound. '' without such a chain of at least two.
    """
    late = [c for c in causes if c.culprit.kind == "rank" and len(c.culprit.ranks) == 1]
    culprits = {c.culprit.ranks[0] for c in late}
    waited = {r for c in late for r in c.gain_after}
    chain = [c for c in late if c.gain_after or c.culprit.ranks[0] in waited]
    if len(chain) < 2 or not waited <= culprits or not any(c.gain_after for c in chain):
        return ""
    total = sum(float(c.gain_us or 0.0) for c in chain)
    if total <= 0:
        return ""
    # in the order to fix them, not sorted; an upper bound: the later ones' gains are conditional
    ranks = ("、" if zh else ", ").join(str(c.culprit.ranks[0]) for c in chain)
    return say(
        "project.late_ranks_together",
        zh,
        ranks=ranks,
        total=us(total),
        first_rank=chain[0].culprit.ranks[0],
        first=us(float(chain[0].gain_us or 0.0)),
    )


def overview(
    d: Diagnosis, zh: bool, limit: int = 5, *, yes_no: bool = False, healthy: bool = False
) -> Projection:
    """Answer to “What is wrong with this job?”: the headline, then the causes, most important first.

    With ``yes_no`` ("is there a performance problem?"), the headline is preceded by the verdict:
    yes when a cause blames something, no when there is no culprit, "cannot tell" when there is
    not enough signal.
    """
    p = Projection()
    real = _real(d)
    verdict = ""
    if yes_no:
        if real and healthy:  # "is everything fine?"
            verdict = say("project.no", zh)
        elif real:
            verdict = say("project.yes", zh)
        elif _meta(d, Mechanism.NOT_ENOUGH_SIGNAL) is not None:
            verdict = say("project.cannot_tell", zh)
        elif d.causes:
            verdict = say("project.no_clear_problem", zh)
    p.lines.append(with_verdict(verdict, headline(d, zh), zh) if verdict else headline(d, zh))
    shared = _shared_idle(d, real)
    if shared is not None:  # the idle every rank shares, next to the late ranks' own
        p.add_cause(shared)
        p.lines.append(
            f"此外：{summary(shared, zh)}。"
            if zh
            else f"Beyond the late ranks: {lower_first(summary(shared, zh))}."
        )
    if real:
        p.lines += [
            "",
            say("project.root_causes_in_the_order_to", zh),
        ]
        # the headline is the first cause's own sentence: its bullet names it and its gain only
        said = summary(real[0], zh).strip().rstrip("。.") in p.lines[0]
        for i, c in enumerate(real[:limit]):
            p.add_cause(c)
            p.lines.append(cause_bullet(c, zh, short=said and i == 0))
        together = late_chain_line(real[:limit], zh)
        if together:
            p.lines += ["", together]
        p.plot_ranks = sorted({r for c in real[:3] for r in c.culprit.ranks})[:8]
    else:
        for c in d.causes[:2]:
            p.add_cause(c)
        add_shares(p, d, zh)
    ex = excluded_line(d, zh)
    if ex:
        p.lines.append(ex)
    notes = notes_lines(d, zh)
    if notes:  # a paragraph of its own, not the tail of the last bullet
        p.lines += ["", *notes]
    return p


def render_for_model(d: Diagnosis) -> str:
    """The diagnosis as the text a model reads (first tool result of an LLM turn).

    The body is fenced as data (its sentences can quote operator names and paths from the
    profile), each line cleaned of fence markers.
    """
    lines = [f"Headline: {headline(d, False)}"]
    if d.step_time_us > 0:
        lines.append(f"Average step time: {us(d.step_time_us)}.")
    sl = shares_line(d, False)
    if sl:
        lines.append(sl)
    if d.excluded_steps:
        lines.append(excluded_line(d, False))
    if d.left_out:
        lines.append(d.left_out)
    for i, c in enumerate(d.causes, 1):
        lines.append(
            f"{i}. `{c.id}` [{c.mechanism.value}, {c.category.value}, severity {c.severity.value}] "
            f"culprit: {label(c.culprit, False)}. {summary(c, False)}."
        )
        if c.dominant:
            lines.append(f"   dominated by: {c.dominant}")
        vic = sorted(c.victims, key=lambda v: -v.lost_us)[:6]
        if vic:
            lines.append(
                "   victims: "
                + "; ".join(
                    f"rank {v.rank} {v.how} {us(v.lost_us)}/step ({pct(v.share)})" for v in vic
                )
                + (f" (+{len(c.victims) - 6} more)" if len(c.victims) > 6 else "")
            )
        if c.culprit.events:
            lines.append(f"   events: {events_text(c, False, 12)}")
        g = gain_phrase(c, False)
        if g:
            lines.append(f"   gain: {g}")
        for r in c.remedies[:3]:
            gg = f" (gain {us(r.gain_us)}/step, {r.bound.value})" if r.gain_us else ""
            lines.append(f"   {r.kind}: {r.text}{gg}")
        for f in c.findings[:3]:
            lines.append(f"   evidence `{f.id}`: {f.summary}")
    for n in d.notes[:3]:
        lines.append(f"Note: {n}")
    if not d.causes:
        lines.append("No root cause found.")
    body = "\n".join(clean_data(x, 600) for x in lines)
    return "diagnose(): the ranked root causes of this run.\n" + fence(body, "diagnose()")


def reference_line(p: Projection, zh: bool) -> str:
    """The ids of the causes an answer relies on, as a trailing reference (never mid-prose)."""
    if not p.causes:
        return ""
    ids = [f"`{c.id}`" for c in p.causes]
    return ("依据的原因编号：" + "、".join(ids)) if zh else ("Causes cited: " + ", ".join(ids))


#: Hypotheses that propose a change ("should I switch ZeRO-3 to ZeRO-2?"): the verdict says
#: whether it would help, not whether "it is" the cause.
_ACTIONS = {
    "zero_stage": ("switching the ZeRO stage", "调整 ZeRO 阶段"),
    "tp_size": ("changing the tensor-parallel size", "调整 TP 规模"),
    "mc2": ("enabling mc2 (MatMul + collective fusion)", "开启 mc2（MatMul 与通信融合）"),
}


def ruled_out(
    p: Projection, d: Diagnosis, names: Sequence[str], zh: bool, scope: str = ""
) -> Projection:
    """What the data says of the causes the user ruled out, added to answer ``p``.

    A ruled-out cause the data supports opens the answer (the measurement disagrees with the
    user's check, with its evidence); the ones it contradicts are confirmed after the first line.
    A network ruled out on one part (``scope``: "the RoCE switches look clean") while the slow
    links are on the other part is confirmed for the part the user checked.
    """
    from advisor_chat.diagnosis.hypotheses import NAMES, judge

    still, agreed = [], []
    placed: list[RootCause] = []
    for name in names:
        v = judge(d, name)
        if name in ("network", "link") and _other_network(d, v.causes, scope) is not None:
            agreed.append(_SCOPES[scope])
            continue
        cited = [c for cid in v.causes for c in d.causes if c.id == cid]
        if (
            name in ("network", "link")
            and cited
            and all("group_across_nodes" in c.symptom_tags for c in cited)
        ):
            # the links are healthy (the user's check is right); the time goes to a group
            # placed across nodes, which the answer's first line explains
            placed.append(cited[0])
            continue
        if v.status == "supported":
            still.append((NAMES[name], v))
        elif v.status == "contradicted":
            agreed.append(NAMES[name])
    lines = list(p.lines)
    if agreed:
        who = "、".join(z for _, z in agreed) if zh else " or ".join(e for e, _ in agreed)
        note = say("project.the_data_agrees_it_is_not", zh, who=who)
        lines = [*lines[:1], note, *lines[1:]]
    if placed:
        note = say("project.the_data_agrees_that_the_links", zh)
        lines = [*lines[:1], note, *lines[1:]]
        for pc in placed:
            p.add_cause(pc)
    for (en_name, zh_name), v in reversed(still):
        reason = v.reason_zh if zh else upper_first(v.reason)
        lines.insert(
            0,
            f"虽然已经排除了{zh_name}，数据仍然指向它：{_sentence(reason, zh)}"
            if zh
            else f"Although you ruled it out, the data still points to {en_name}. "
            f"{_sentence(reason, zh)}",
        )
        for cid in v.causes:
            hit = next((x for x in d.causes if x.id == cid), None)
            if hit is not None:
                p.add_cause(hit)
    p.lines = lines
    return p


def hypothesis(
    d: Diagnosis,
    name: str,
    zh: bool,
    *,
    healthy: bool = False,
    ranks: Sequence[int] = (),
    links: Sequence[tuple[int, int]] = (),
    scope: str = "",
    action: bool = False,
) -> Projection:
    """Answer to a hypothesis question ("could it be GC?"): a verdict, then its measured evidence.

    The verdict comes from :func:`advisor_chat.diagnosis.hypotheses.judge` (supported,
    contradicted, or not decidable from this data). The first sentence states it alone, so that
    no clause of the evidence can contradict it; the next gives the evidence, and the causes it
    comes from are cited; an undecided verdict says what to collect. With ``ranks`` ("is rank 5
    overheating?") or ``links`` ("is the HCCS between 13 and 14 broken?"), a hypothesis supported
    on other ranks or another link is a "no" for the ones asked. With ``scope``
    (:func:`~advisor_chat.agent.parse.network_scope`: ``network`` between nodes, ``board`` inside
    one), a network supported only on the other part is a "no" for the part asked. With
    ``action`` the question proposes the change the hypothesis implies ("swap the card?"): the
    verdict says whether that change would help.
    """
    from advisor_chat.diagnosis.hypotheses import NAMES, judge

    v = judge(d, name, ranks)
    other = _other_network(d, v.causes, scope) if name in ("network", "link") else None
    if other is not None and v.status == "supported" and not healthy:
        # "is it the RoCE between the machines?" while the slow links are inside one server
        p = Projection(lines=[_not_this_part(other, scope, zh)])
        p.add_cause(other)
        return p
    elsewhere = _supported_elsewhere(d, v.causes, ranks, links) if v.status == "supported" else None
    if elsewhere is not None and not healthy:
        who = fmt_ranks(list(ranks or {r for lk in links for r in lk}))
        en_name, zh_name = NAMES[name]
        p = Projection()
        p.add_cause(elsewhere)
        on_zh, on_en = label(elsewhere.culprit, True), label(elsewhere.culprit, False)
        asked_zh = (
            "、".join(f"链路 {a}↔{b}" for a, b in links) if links and not ranks else f"{who}号卡"
        )
        asked_en = (
            " and ".join(f"link {a}↔{b}" for a, b in links)
            if links and not ranks
            else f"rank{'s' if len(ranks) > 1 else ''} {who}"
        )
        p.lines.append(
            f"不是{asked_zh}：数据指向{zh_name}，但在{on_zh}。{_sentence(summary(elsewhere, True), True)}"
            if zh
            else f"No, not {asked_en}: the data points to {en_name}, but on {on_en}. "
            f"{_sentence(summary(elsewhere, False), False)}"
        )
        return p
    en_name, zh_name = NAMES[name]
    act = _ACTIONS.get(name)
    if act is None and action and name == "card":  # the change it implies: a new card
        act = (msg("answer.swap_action", "en"), msg("answer.swap_action", "zh"))
    # the first sentence also names what the evidence blames (its first cause's culprit), so
    # that "yes"/"no" is said of something; asked the healthy way round ("is rank 13's NPU
    # healthy?"), a supported fault is a "no"
    cited = next((c for cid in v.causes for c in d.causes if c.id == cid), None)
    lab = label(cited.culprit, zh) if cited is not None and cited.culprit.label else ""
    yes, no = ("不是，", "是的，") if healthy else ("是的，", "不是")
    yes_en, no_en = ("No: ", "Yes: ") if healthy else ("Yes: ", "No: ")
    if v.status == "supported":
        if act:
            first = f"是的，{act[1]}会有帮助。" if zh else f"Yes: {act[0]} would help."
        elif lab:
            first = (
                f"{yes}数据指向{zh_name}，在{lab}。"
                if zh
                else f"{yes_en}the data points to {en_name}, on {lab}."
            )
        else:
            first = f"{yes}数据指向{zh_name}。" if zh else f"{yes_en}the data points to {en_name}."
    elif v.status == "contradicted":
        if act:
            first = (
                f"不建议：{act[1]}并不能解决这里的问题。"
                if zh
                else f"No: {act[0]} would not help here."
            )
        elif name == "capacity" and lab and not healthy:
            # "add NPUs?" / "not enough compute?": both are answered by what the time goes to
            first = say("project.no_the_cause_is_not_a", zh, lab=lab)
        elif lab:
            first = (
                f"{no}{'不是' if healthy else ''}{zh_name}，问题在{lab}。"
                if zh
                else f"{no_en}the cause is {lab}, not {en_name}."
            )
        else:
            first = (
                f"{no}{'不是' if healthy else ''}{zh_name}。"
                if zh
                else f"{no_en}it is not {en_name}."
            )
    else:
        first = (
            f"无法从这份数据判断是否是{zh_name}。"
            if zh
            else f"Cannot tell from this data whether it is {en_name}."
        )
    reason = v.reason_zh if zh else _upper_first(v.reason)
    text = first + ("" if zh else " ") + _sentence(reason, zh)
    if v.status == "undecided" and (v.collect_zh if zh else v.collect):
        text += (
            f"要判断，需要采集：{v.collect_zh.rstrip('。')}。"
            if zh
            else f" To decide, collect {lower_first(v.collect.rstrip('.'))}."
        )
    p = Projection(lines=[text])
    for cid in v.causes:
        c = next((x for x in d.causes if x.id == cid), None)
        if c is not None:
            p.add_cause(c)
    return p


def _supported_elsewhere(
    d: Diagnosis,
    cause_ids: Sequence[str],
    ranks: Sequence[int],
    links: Sequence[tuple[int, int]] = (),
) -> RootCause | None:
    """The cause supporting a hypothesis when it blames others than those asked, else None.

    Only a cause that blames ranks (a rank, ranks, a group, a stage, a link's endpoints, step
    events) can be elsewhere; a job-level cause holds for every rank. A link asked is the same
    link in either direction; a rank asked is elsewhere when no blamed rank is among it.
    """
    if not ranks and not links:
        return None
    c = next((x for cid in cause_ids for x in d.causes if x.id == cid), None)
    if c is None or c.culprit.kind in ("job", "none", "operator"):
        return None
    if links and not ranks:
        if c.culprit.kind == "link" and c.culprit.link is not None:
            asked = {frozenset(lk) for lk in links}
            return None if frozenset(c.culprit.link) in asked else c
        if c.category.value != "communication":
            return c  # a link asked, a device's own time blamed: not that link
        ranks = [r for lk in links for r in lk]
    blamed = set(_culprit_ranks(c))
    return c if blamed and not blamed & set(ranks) else None


#: The two parts of the interconnect, as a question names them (English, Chinese).
_SCOPES = {
    "network": (
        "the network between the nodes (RoCE / RDMA)",
        "机器之间的网络（RoCE / RDMA）",
    ),
    "board": ("the links inside one server (HCCS)", "机内链路（HCCS）"),
}
# where the slow links are, said after "the slow links are" / "慢的是"
_WHERE = {
    "network": ("between the nodes (RDMA)", "机器之间的网络（RDMA）"),
    "board": ("inside one server (HCCS)", "机内链路（HCCS）"),
}


def _other_network(d: Diagnosis, cause_ids: Sequence[str], scope: str) -> RootCause | None:
    """The slow-link cause supporting a network verdict when it is on the other part than asked.

    ``scope``: ``network`` or ``board`` (:func:`~advisor_chat.agent.parse.network_scope`). None
    when no part was asked, when a slow link on the part asked exists too, or when the verdict
    does not rest on a slow link.
    """
    cited = [c for cid in cause_ids for c in d.causes if c.id == cid]
    if not any(c.mechanism is Mechanism.SLOW_LINK for c in cited):
        return None
    return _off_scope([c for c in d.causes if c.mechanism is Mechanism.SLOW_LINK], scope)


def _off_scope(slow: Sequence[RootCause], scope: str) -> RootCause | None:
    """The first of the ``slow`` link causes when none is on the part ``scope`` names, else None."""
    named = [c for c in slow if c.culprit.transport]
    if scope not in _SCOPES or not named:
        return None
    if any(network_part(c.culprit.transport) == scope for c in named):
        return None
    return named[0]


def _not_this_part(c: RootCause, scope: str, zh: bool) -> str:
    """The "no, not the part asked" sentence: where the slow links are, then their cause."""
    asked_en, asked_zh = _SCOPES[scope]
    where_en, where_zh = _WHERE[network_part(c.culprit.transport)]
    if zh:
        return (
            f"不是{asked_zh}：慢的是{where_zh}，在{label(c.culprit, True)}。"
            f"{_sentence(summary(c, True), True)}"
        )
    return (
        f"No, not {asked_en}: the slow links are {where_en}, on {label(c.culprit, False)}. "
        f"{_sentence(summary(c, False), False)}"
    )


#: Another cause counts against "is that the whole story?" when it costs at least this share of
#: the named cause's gain ...
OTHER_CAUSE_SHARE = 0.15
#: ... or this share of the median step.
OTHER_CAUSE_STEP_SHARE = 0.03


def _cause_name(c: RootCause, zh: bool) -> str:
    """A cause named in a few words: its culprit, or for a job-level cause its summary's lead."""
    if c.culprit.kind != "job":
        return label(c.culprit, zh)
    text = summary(c, zh)
    lead = re.split(r"[:;：；—（(]", text, maxsplit=1)[0].strip().rstrip("，,。.")
    return lead if zh else lead[:1].lower() + lead[1:]


def sufficiency(
    d: Diagnosis,
    zh: bool,
    *,
    ranks: Sequence[int] = (),
    links: Sequence[tuple[int, int]] = (),
    hypothesis: str = "",
    top: bool = False,
    swap: bool = False,
) -> Projection | None:
    """Answer to "is that the whole story?" / "if we swap rank 3, are we done?".

    ``top``: the question names the top problem ("fix the biggest problem", "最慢的卡") when it
    names no rank, link or suspect.

    The cause the user names (one blaming ``ranks`` or ``links``, else the one supporting
    ``hypothesis``) against every other cause the diagnosis found: "no" when another costs at
    least ``OTHER_CAUSE_SHARE`` of its gain or ``OTHER_CAUSE_STEP_SHARE`` of the step, with the
    other causes and what fixing all of them saves (their gains summed: the causes are
    independent, each measured on its own); "yes" when none does. ``None`` when nothing the user
    names is a cause (the hypothesis verdict answers then).

    ``swap``: the question proposes replacing a card ("把最慢的卡换掉就好了吧？"). When the card
    verdict says a new card would not help (the device waits for its host, is given more work,
    or every rank pays the cost alike), that "no" comes first, then any other cause.
    """
    from advisor_chat.diagnosis.hypotheses import judge

    real = _real(d)
    if swap:
        v = judge(d, "card", ranks)
        if v.status == "contradicted":
            return _swap_would_not_help(d, v, zh)
    named: RootCause | None = None
    if links:
        asked = {frozenset(lk) for lk in links}
        named = next(
            (c for c in real if c.culprit.link is not None and frozenset(c.culprit.link) in asked),
            None,
        )
    if named is None and ranks:
        named = next((c for c in real if set(_culprit_ranks(c)) & set(ranks)), None)
    if named is None and hypothesis:
        v = judge(d, hypothesis)
        if v.status == "supported":
            named = next((c for cid in v.causes for c in real if c.id == cid), None)
    if named is None and top and real:  # "fix the top problem / 最大的问题 / 最慢的卡"
        named = real[0]
    if named is None:
        return None
    gain = float(named.gain_us or 0.0)
    floor = max(OTHER_CAUSE_SHARE * gain, OTHER_CAUSE_STEP_SHARE * (d.step_time_us or 0.0))
    others = [c for c in real if c is not named and float(c.gain_us or 0.0) >= floor]
    p = Projection()
    p.add_cause(named)
    who = label(named.culprit, zh)
    if not others:
        p.lines.append(
            say(
                "project.yes_is_the_only_cause_this",
                zh,
                who=who,
                us=us(gain),
                sentence=_sentence(summary(named, zh), zh),
            )
        )
        return p
    shown = others[:2]
    if zh:
        rest = "；".join(f"{_cause_name(c, True)}（每步约 {us(c.gain_us or 0.0)}）" for c in shown)
        p.lines.append(
            f"不是全部原因：其中一个原因是{who}（修复后每步约节省 {us(gain)}），但还有独立的原因：{rest}。"
        )
    else:
        rest = "; ".join(
            f"{_cause_name(c, False)} (about {us(c.gain_us or 0.0)} per step)" for c in shown
        )
        p.lines.append(
            f"No, that is not the whole story: one cause is {who} (fixing it saves about "
            f"{us(gain)} per step), but there "
            + ("are other, independent ones" if len(shown) > 1 else "is another, independent one")
            + f": {rest}."
        )
    p.lines.append(_sentence(summary(named, zh), zh))
    for c in shown:
        p.add_cause(c)
        p.lines.append(_sentence(summary(c, zh), zh))
    return p


def _swap_would_not_help(d: Diagnosis, v: Verdict, zh: bool) -> Projection:
    """Answer to "swap the card and we're done?" when a new card would not help: why, then more."""
    lang = "zh" if zh else "en"
    reason = v.reason_zh if zh else _upper_first(v.reason)
    p = Projection(lines=[msg("answer.swap_no", lang, reason=_sentence(reason, zh))])
    cited = [c for cid in v.causes for c in d.causes if c.id == cid]
    for c in cited:
        p.add_cause(c)
    floor = OTHER_CAUSE_STEP_SHARE * (d.step_time_us or 0.0)
    rest = [c for c in _real(d) if c not in cited and float(c.gain_us or 0.0) >= floor][:2]
    if rest:
        names = msg("answer.list_sep", lang).join(
            msg("answer.cause_gain", lang, name=_cause_name(c, zh), gain=us(c.gain_us or 0.0))
            for c in rest
        )
        p.lines.append(msg("answer.more_causes", lang, causes=names))
        for c in rest:
            p.add_cause(c)
    return p


def fix_together(d: Diagnosis, zh: bool, *, count: int | None = 2) -> Projection | None:
    """Answer to "if both were fixed, what would we save?": the first ``count`` causes together.

    The causes with a gain in the diagnosis' order (``None``: all of them), their gains summed
    (independent causes, each measured on its own; "up to" when one is an upper bound) and the
    step time that leaves (the median step minus the sum; grounding adds the same prefix sums,
    see :func:`~advisor_chat.agent.grounding.add_diagnosis`). With a single cause that has a
    gain, says so and gives its gain and the step it leaves (the question assumed two); ``None``
    without any.
    """
    real = [c for c in d.causes if (c.gain_us or 0.0) > 0]
    # "both": the faults first (a job-wide overlap upper bound is not one of "both" problems)
    faults = [c for c in real if not is_optimization(c) and c.culprit.kind != "job"]
    chosen = real if count is None else (faults if len(faults) >= count else real)[:count]
    if len(chosen) == 1:
        return _only_one_cause(d, chosen[0], zh)
    if len(chosen) < 2:
        return None
    total = sum(float(c.gain_us or 0.0) for c in chosen)
    upto = any(c.bound == BoundKind.UPPER_BOUND for c in chosen)
    step = float(d.step_time_us or 0.0)
    p = Projection()
    for c in chosen:
        p.add_cause(c)
    if zh:
        parts = "，".join(f"{_cause_name(c, True)} {us(c.gain_us or 0.0)}" for c in chosen)
        line = f"全部修复后每步{'最多' if upto else '约'}节省 {us(total)}（{parts}）"
        if step > total > 0:
            line += f"，步长从 {us(step)} 降到约 {us(step - total)}"
        p.lines.append(line + "。")
    else:
        parts = ", ".join(f"{_cause_name(c, False)} {us(c.gain_us or 0.0)}" for c in chosen)
        line = (
            f"Fixing {'both' if len(chosen) == 2 else 'all of them'} saves "
            f"{'up to' if upto else 'about'} {us(total)} per step ({parts})"
        )
        if step > total > 0:
            line += f", taking the step from {us(step)} to about {us(step - total)}"
        p.lines.append(line + ".")
    for c in chosen:
        p.lines.append(_sentence(summary(c, zh), zh))
    return p


def _only_one_cause(d: Diagnosis, c: RootCause, zh: bool) -> Projection:
    """Answer to "if both were fixed?" when the data shows one cause: its gain, the step left."""
    lang = "zh" if zh else "en"
    gain, step = float(c.gain_us or 0.0), float(d.step_time_us or 0.0)
    upto = c.bound == BoundKind.UPPER_BOUND
    bound = msg("answer.bound_upto" if upto else "answer.bound_about", lang)
    line = msg("answer.one_cause", lang, who=_cause_name(c, zh), bound=bound, gain=us(gain))
    if step > gain > 0:
        line += msg("answer.step_left", lang, step=us(step), left=us(step - gain))
    p = Projection(lines=[line + msg("answer.sentence_end", lang), _sentence(summary(c, zh), zh)])
    p.add_cause(c)
    return p


def run_is_normal(d: Diagnosis, zh: bool) -> Projection:
    """Answer to "is this normal?" about the run: no with the top cause, yes when none stands out."""
    lang = "zh" if zh else "en"
    real = _real(d)
    if not real:
        return Projection(lines=[msg("answer.run_normal", lang)])
    top = real[0]
    text = summary(top, zh) if zh else lower_first(summary(top, zh))
    p = Projection(lines=[msg("answer.run_not_normal", lang, summary=_sentence(text, zh))])
    p.add_cause(top)
    p.plot_ranks = _culprit_ranks(top)[:8]
    return p


#: A question word that may name operators by the start of their type (``softmax`` for
#: ``SoftmaxCrossEntropyWithLogits``): at least this many letters.
OP_WORD_MIN = 6


def op_words(text: str) -> tuple[str, ...]:
    """Latin words of ``OP_WORD_MIN``+ letters in a question (candidate operator-type prefixes)."""
    return tuple(dict.fromkeys(re.findall(rf"(?<![A-Za-z])[A-Za-z]{{{OP_WORD_MIN},}}", text)))


def _starts_op(summary_text: str, word: str) -> bool:
    """Whether a cause's text names an operator type that ``word`` starts.

    An operator type in the text is a CamelCase token (``SoftmaxCrossEntropyWithLogits``), so
    an English word that starts the same way (``normal`` / ``Normalization``) does not count.
    """
    pat = rf"(?<![A-Za-z]){re.escape(word)}[A-Za-z0-9]*"
    return any(
        re.search(r"[A-Z]", m.group(0)[1:]) is not None
        for m in re.finditer(pat, summary_text, re.I)
    )


def ops_not_normal(
    d: Diagnosis, ops: Sequence[str], zh: bool, words: Sequence[str] = ()
) -> Projection | None:
    """Answer to "is it normal to see this many Pow / ReduceMean kernels?" when a cause names them.

    The first cause whose summary names one of ``ops`` (operator types the question names) or an
    operator type one of ``words`` starts (:func:`_starts_op`): the answer is "no" with that
    cause. ``None`` when no cause names them (the tools answer then).
    """
    for c in _real(d):
        if any(
            re.search(rf"(?<![A-Za-z]){re.escape(o)}(?![A-Za-z])", c.summary) for o in ops
        ) or any(_starts_op(c.summary, w) for w in words):
            text = _sentence(summary(c, zh) if zh else lower_first(summary(c, zh)), zh)
            p = Projection(lines=[msg("answer.ops_not_normal", "zh" if zh else "en", summary=text)])
            p.add_cause(c)
            p.plot_ranks = _culprit_ranks(c)[:8]
            return p
    return None


def late_event(d: Diagnosis, zh: bool) -> Projection | None:
    """The cause holding a single very large late arrival ("the job hung for seconds, why?").

    The cause whose summary carries the event's distance from HCCL_EXEC_TIMEOUT (set by the
    diagnosis from the wait attribution), ``None`` when no collective had such a late arrival.
    """
    c = next((x for x in d.causes if "HCCL_EXEC_TIMEOUT" in x.summary), None)
    if c is None:
        return None
    p = Projection(lines=[_sentence(summary(c, zh), zh)])
    p.add_cause(c)
    return p


def link_directions(d: Diagnosis, zh: bool) -> Projection | None:
    """Answer to "is only one direction slow?": from the slow-link cause's directions.

    ``None`` without a slow-link cause (the network projection answers then).
    """
    c = next((x for x in d.causes if x.mechanism == Mechanism.SLOW_LINK), None)
    if c is None:
        return None
    both = c.metrics.get("directions", 1.0) >= 2
    if both:
        first = say("project.no_both_directions_are_slow", zh)
    else:
        first = say("project.yes_only_one_direction_is_slow", zh)
    p = Projection(lines=[first + (summary(c, zh) if zh else lower_first(summary(c, zh)))])
    p.add_cause(c)
    return p


#: Changes a user names as a suspect ("we turned on X, related?"): how the question names it,
#: what in a cause's text shows it, and the environment variable that decides it when one does.
SUSPECTS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "offload": ((r"offload", r"cpu[ _-]?adam", r"卸载"), (r"offload", r"卸载"), ""),
    "recompute": (
        (r"recomput", r"重计算", r"重算", r"activation checkpoint"),
        (r"recomput", r"重计算"),
        "",
    ),
    "empty_cache": ((r"empty[_ ]?cache",), (r"empty_cache",), ""),
    "new_group": (
        (
            r"\b(different|new|changing) (comm(unication)? )?group (id|name|hash)",
            r"\bgroup (id|name|hash)s? (changes?|differ)",
            r"\bnew[_ ]group\b",
            r"通信域.{0,8}(不一样|不同|在变|变了)",
            r"(新的|新建)(的)?通信域",
        ),
        (r"communication group no other step uses", r"其他步没有用过的通信域"),
        "",
    ),
    "dynamic_shapes": (
        (
            r"seq(uence)?[ _-]?len",
            r"\bbucket",
            r"dynamic[ _-]?shape",
            r"variable[ _-]length",
            r"\bpadding\b",
            r"变长(的)?(序列|样本|输入|句子|batch)",
            r"序列长度",
            r"动态\s*shape",
            r"分桶",
            r"\b(changing|varying|different|new) (input )?shapes?\b",
            r"shape\s*(变化|变了|不固定|不一样|在变)",
        ),
        (r"dynamic shapes", r"动态 shape"),
        "",
    ),
    "zero3": ((r"\bzero[- ]?3\b", r"zero stage 3", r"zero-?3"), (r"AllGather",), ""),
    "launch_blocking": (
        (r"launch[_ ]?blocking",),
        (r"ASCEND_LAUNCH_BLOCKING",),
        "ASCEND_LAUNCH_BLOCKING",
    ),
    "intra_roce": ((r"intra[_ ]?roce",), (r"HCCL_INTRA_ROCE_ENABLE",), "HCCL_INTRA_ROCE_ENABLE"),
    # an MoE layer looping over its experts: one grouped matmul instead
    "grouped_gemm": (
        (r"grouped[ _-]?(gemm|matmul|mm)\b", r"\bgmm\b", r"分组矩阵乘", r"分组\s*gemm"),
        (r"one per expert", r"逐个专家"),
        "",
    ),
    # gradient accumulation without no_sync: the gradients all-reduced in every backward pass
    "no_sync": (
        (r"no[_ ]?sync", r"gradient[_ ]accumulation", r"grad[_ ]accum", r"梯度累(积|加)"),
        (r"\bno_sync\b",),
        "",
    ),
    # a small micro-batch / short sequences: kernels too short for the host to launch ahead
    "micro_batch": (
        (
            r"micro[ _-]?batch",
            r"\bmbs\b",
            r"\bbatch[ _-]?size\b",
            r"(small|tiny|short) (batch|sequences?)",
            r"序列(也|太|很|比较)?短",
            r"batch\s*(太|很|比较)?小",
        ),
        (r"micro[ _-]?batch", r"too little work per launch", r"工作量太小"),
        "",
    ),
    # a per-tensor optimizer (foreach / fused off): many short kernels after the backward pass
    "fused_optimizer": (
        (
            r"\bforeach\b",
            r"\b(un)?fused[ _-]?(adam\w*|optimi[sz]er)",
            r"(融合|多张量).{0,4}优化器",
            r"优化器.{0,6}(融合|foreach|fused)",
            r"没(开|用)\s*(fused|foreach|融合)",
            r"\b(native|plain|torch(\.optim)?)\s*adamw?\b",
            r"原生\s*adamw?",
        ),
        (r"fused \(multi-tensor\) optimizer", r"融合（多张量）优化器"),
        "",
    ),
}


#: An environment variable named in a question (as written: upper case with underscores).
_ENV_VAR = re.compile(
    r"(?<![A-Za-z0-9_])((?:HCCL|ASCEND|ACL|ACLNN|TASK_QUEUE|PYTORCH_NPU|CPU_AFFINITY|HOST_CACHE|"
    r"INF_NAN|MULTI_STREAM|COMBINED)_[A-Z0-9_]*)(?![A-Za-z0-9_])"
)


def named_suspect(text: str) -> str:
    """The change a question names as a suspect (a key of :data:`SUSPECTS`), or ``""``.

    Any other environment variable the question names is ``"env:<NAME>"``.
    """
    low = text.lower()
    for key, (asked, _, _) in SUSPECTS.items():
        if any(re.search(p, low, re.I) for p in asked):
            return key
    m = _ENV_VAR.search(text)
    return f"env:{m.group(1)}" if m else ""


def _env_verdict(d: Diagnosis, var: str, zh: bool, env_recorded: bool) -> Projection:
    """Whether an environment variable the user names matters, from the environment check.

    Yes when the environment check flags it (its finding, and the cause it is evidence of); no
    when the profile records the environment and the check, which judges this variable, does not
    flag it; otherwise "cannot tell".
    """
    from advisor_chat.analyzers.env_check import CHECKED_SETTINGS

    p = Projection()
    fid = f"env_check.env.{var.lower()}"
    real = _real(d)
    under = next((c for c in real if any(f.id == fid for f in c.findings)), None)
    f = next((x for x in d.findings if x.id == fid), None)
    top = real[0] if real else None
    if f is not None:
        if under is not None:
            p.add_cause(under)
        body = f.summary_zh if zh else f.summary
        if under is not None and under is top:
            tail_en = f" It is part of the top cause — {lower_first(summary(under, zh))}."
            tail_zh = f"它是首要原因的一部分——{summary(under, zh)}。"
        elif top is not None:
            p.add_cause(top)
            tail_en = f" The largest cost is elsewhere — {lower_first(summary(top, zh))}."
            tail_zh = f"最大的损失在别处——{summary(top, zh)}。"
        else:
            tail_en = tail_zh = ""
        p.lines.append(
            f"是的，它有影响：{body.rstrip('。')}。{tail_zh}"
            if zh
            else f"Yes, it can matter: {lower_first(body.rstrip('.'))}.{tail_en}"
        )
        return p
    if top is not None:
        p.add_cause(top)
    where_en = f" The time goes elsewhere — {lower_first(summary(top, zh))}." if top else ""
    where_zh = f"时间损失在别处——{summary(top, zh)}。" if top else ""
    if env_recorded and var in CHECKED_SETTINGS:
        p.lines.append(
            say(
                "project.probably_not_the_environment_check_judges",
                zh,
                var=var,
                where=(where_zh if zh else where_en),
            )
        )
        return p
    p.lines.append(
        f"无法从这份数据判断 {var} 是否有影响：环境检查不判断这个变量"
        + ("" if env_recorded else "，且数据中没有记录环境变量")
        + f"。{where_zh}"
        if zh
        else f"Cannot tell from this data whether {var} matters: the environment check does not "
        f"judge it{'' if env_recorded else ', and the profile records no environment'}."
        f"{where_en}"
    )
    return p


def setting_verdict(d: Diagnosis, var: str, zh: bool, *, premise: str = "") -> Projection:
    """:func:`_setting_verdict`, then the question's premise when the data contradicts it.

    ``premise``: a suspect the question takes for granted (one of the hypotheses).
    """
    p = _setting_verdict(d, var, zh)
    if premise:
        from advisor_chat.diagnosis.hypotheses import NAMES, judge

        v = judge(d, premise)
        if v.status == "contradicted":
            en, zh_name = NAMES[premise]
            reason = v.reason_zh if zh else v.reason
            # where the time goes was said in the verdict above: the premise keeps its own evidence
            for mark in ("；时间损失在别处——", "; the time goes elsewhere — "):
                reason = reason.split(mark, 1)[0]
            p.lines.append(
                f"另外，问题的前提不成立：不是{zh_name}——{reason.rstrip('。')}。"
                if zh
                else f"The premise does not hold either: it is not {en} — "
                f"{lower_first(reason.rstrip('.'))}."
            )
    return p


def _setting_verdict(d: Diagnosis, var: str, zh: bool) -> Projection:
    """Answer to "should I change <environment variable>?": what the evidence selects.

    Yes when a remedy of a cause names the variable (the evidence selected that change; its gain
    is the remedy's) or the environment check flags it; otherwise the data does not point to it,
    and the answer says where the time goes and the change its evidence selects instead.
    """
    p = Projection()
    real = _real(d)
    low = var.lower()
    for c in real:
        rem = next((r for r in c.remedies if r.kind == "action" and low in r.text.lower()), None)
        if rem is not None:
            p.add_cause(c)
            p.plot_ranks = _culprit_ranks(c)[:8]
            text = (rem.text_zh or rem.text) if zh else rem.text
            if d.capture not in ("", "light") and c.category.value == "scheduling":
                # a heavy capture adds host work to every launch: the host-side evidence that
                # selects this change may be the profiler's own; tune on a light capture
                p.lines.append(
                    f"不要基于这份数据调：它以 {d.capture} 采集，profiler 给每次下发都加了主机开销，"
                    f"这里的下发间隙可能是采集本身造成的；先用 Level1（不带调用栈）重新采集，确认后再考虑："
                    f"{text.rstrip('。')}。原因——{summary(c, zh)}。"
                    if zh
                    else f"Not on this capture: it was taken with {d.capture}, which adds host work "
                    "to every launch, so these launch gaps may be the profiler's own; re-collect at "
                    f"Level1 without stacks, and if they remain: {lower_first(text.rstrip('.'))}. "
                    f"Why — {lower_first(summary(c, zh))}."
                )
                return p
            p.lines.append(
                f"是的，证据指向这一改动：{text.rstrip('。')}。原因——{summary(c, zh)}。"
                if zh
                else f"Yes, the evidence selects that change: {text.rstrip('.')}. Why — "
                f"{lower_first(summary(c, zh))}."
            )
            return p
    flag = next((f for f in d.findings if f.id == f"env_check.env.{low}"), None)
    if flag is not None:
        p.lines.append(
            f"是的，环境检查标出了 {var}：{flag.summary_zh.rstrip('。')}。"
            if zh
            else f"Yes, the environment check flags {var}: {lower_first(flag.summary.rstrip('.'))}."
        )
        return p
    top = real[0] if real else None
    if top is None:
        p.lines.append(say("project.cannot_tell_nothing_in_this_profile", zh, var=var))
        return p
    p.add_cause(top)
    act = next((r for r in top.remedies if r.kind == "action"), None)
    instead_en = f" What its evidence selects instead: {act.text.rstrip('.')}." if act else ""
    instead_zh = f"证据指向的改动是：{(act.text_zh or act.text).rstrip('。')}。" if act else ""
    p.lines.append(
        f"不需要：这份数据没有指向 {var} 的证据，没有哪个原因的证据选择改它。时间损失在别处——{summary(top, zh)}。"
        f"{instead_zh}"
        if zh
        else f"No: nothing in this profile points to {var}; no cause's evidence selects that change. "
        f"The time goes elsewhere — {lower_first(summary(top, zh))}.{instead_en}"
    )
    return p


#: What in a cause's text rules a suspect out (the decomposition said so, e.g. gradient operators
#: scaled with the forward ones: more layers, not a forward re-run).
SUSPECT_RULED_OUT: dict[str, tuple[str, ...]] = {
    "recompute": (r"not a re-run of the forward", r"而不是前向被重算"),
}


def _suspect_ruled_out(
    d: Diagnosis, key: str, real: Sequence[RootCause], zh: bool
) -> Projection | None:
    """A "no" for a suspect the evidence rules out, with that evidence; ``None`` otherwise.

    From the top causes' text (:data:`SUSPECT_RULED_OUT`) or, for dynamic shapes, from the
    kernels: every later step runs only the operator shapes of the first
    (:attr:`~advisor_chat.diagnosis.types.Diagnosis.shapes_repeat`).
    """
    for c in real:
        if any(re.search(p, cause_text(c), re.I) for p in SUSPECT_RULED_OUT.get(key, ())):
            text = _sentence(summary(c, zh), zh)
            p = Projection(lines=[msg("answer.suspect_no", "zh" if zh else "en", summary=text)])
            p.add_cause(c)
            return p
    if key == "dynamic_shapes" and d.shapes_repeat:
        top = real[0] if real else None
        p = Projection()
        if top is not None:
            p.add_cause(top)
            p.plot_ranks = _culprit_ranks(top)[:8]
        lang = "zh" if zh else "en"
        where = ""
        if top is not None:
            text = summary(top, zh) if zh else lower_first(summary(top, zh))
            where = msg("answer.elsewhere", lang, summary=text)
        p.lines.append(msg("answer.shapes_repeat", lang) + where)
        return p
    return None


def cause_showing(d: Diagnosis, key: str) -> RootCause | None:
    """The first real cause whose text shows the change ``key`` of :data:`SUSPECTS` names."""
    if key not in SUSPECTS:
        return None
    shows = SUSPECTS[key][1]
    return next(
        (c for c in _real(d) if any(re.search(p, cause_text(c), re.I) for p in shows)), None
    )


def suspect_verdict(
    d: Diagnosis, key: str, zh: bool, env_recorded: bool, *, undecided_ok: bool = True
) -> Projection | None:
    """Whether a change the user names fits the diagnosis ("we enabled X, could that be it?").

    Yes when the text of one of the top two causes (summary, remedies) shows it (e.g. the
    optimizer off the NPU for an offload, the same operators run again for recompute); no when
    it is an environment variable the profiler metadata records and the environment check does
    not flag (it is not set); otherwise "cannot tell", with where the time goes — or ``None``
    without ``undecided_ok`` (the question also names a hypothesis the diagnosis can judge).
    """
    if key.startswith("env:"):
        var = key[4:]
        env_flag = any(f.id == f"env_check.env.{var.lower()}" for f in d.findings)
        named = any(
            r.kind == "action" and var.lower() in r.text.lower()
            for c in _real(d)
            for r in c.remedies
        )
        if named and not env_flag:
            # "would X help?" and "should I set X?" get one answer: the change the evidence
            # selects (a setting the environment check flags keeps that check's verdict)
            return _setting_verdict(d, var, zh)
        return _env_verdict(d, var, zh, env_recorded)
    _, shows, var = SUSPECTS[key]
    real = _real(d)[:2]
    for c in real:
        if any(re.search(p, cause_text(c), re.I) for p in shows):
            return _fits(c, zh)
    if var and env_recorded:
        flagged = [f for f in d.findings if f.id == f"env_check.env.{var.lower()}"]
        if not flagged:
            p = Projection()
            top = real[0] if real else None
            rest_en = f" The time goes elsewhere — {lower_first(summary(top, zh))}." if top else ""
            rest_zh = f"时间损失在别处——{summary(top, zh)}。" if top else ""
            if top is not None:
                p.add_cause(top)
            p.lines.append(
                say("project.no_is_not_set_to_on", zh, var=var, rest=(rest_zh if zh else rest_en))
            )
            return p
    # (a hypothesis the question also names is judged instead: "uneven sequence lengths?" asks
    # about load balance, not about shapes the device has not seen)
    if not undecided_ok:
        return None
    no = _suspect_ruled_out(d, key, real, zh)
    if no is not None:
        return no
    # neither shown nor ruled out: say so, and where the time goes
    p = Projection(undecided=True)
    top = real[0] if real else None
    if top is not None:
        p.add_cause(top)
        p.plot_ranks = _culprit_ranks(top)[:8]
    where_en = f" The time goes elsewhere — {lower_first(summary(top, zh))}." if top else ""
    where_zh = f"时间损失在别处——{summary(top, zh)}。" if top else ""
    p.lines.append(
        say(
            "project.cannot_tell_from_this_data_whether_b", zh, where=(where_zh if zh else where_en)
        )
    )
    return p


#: What a host-side cause measured about the host (its calls, frames, allocator): the metrics that
#: say what the host did, not only that the device idled.
_HOST_MEASURED = (
    "python_frame_us",
    "slow_launch_calls_per_step",
    "host_idle_us_affected_steps",
    "gc_pauses_in_affected_steps",
)


def host_activity(d: Diagnosis, zh: bool, host_data: bool) -> Projection:
    """Answer to "what is the host doing while the device waits?".

    The first cause whose devices idle waiting for their host (a host stall, host-side events, a
    job-wide idle or dispatch bound), with what its host was measured doing (its Python frames,
    blocking calls, slow launches, allocator; the cause's summary). When no cause waits for the
    host: says so and names the top cause. ``host_data``: whether the profile has host activity
    (trace_view.json / CANN_API); without it the answer says the host was not recorded.
    """
    p = Projection()
    host = next(
        (
            c
            for c in _real(d)
            if c.category.value == "scheduling"
            or c.mechanism in (Mechanism.HOST_STALL, Mechanism.JOB_IDLE)
        ),
        None,
    )
    if host is None:
        top = next(iter(_real(d)), None)
        if top is not None:
            p.add_cause(top)
        p.lines.append(
            (
                "设备并没有在等主机：没有哪个原因是设备空闲等待主机下发。"
                + (f"时间主要损失在别处——{summary(top, zh)}。" if top is not None else "")
            )
            if zh
            else "The devices are not waiting for their hosts here: no cause is a device idling "
            "for its host's next launch."
            + (f" The time goes elsewhere: {summary(top, zh)}." if top is not None else "")
        )
        return p
    p.add_cause(host)
    measured = any(k in host.metrics for k in _HOST_MEASURED)
    if not host_data:
        p.lines.append(
            f"这份数据没有记录主机活动（文本导出的 trace_view.json，或 DB 导出的 CANN_API），看不出主机在做什么；"
            f"设备确实在等主机——{summary(host, zh)}。"
            if zh
            else "This profile does not record the host's activity (trace_view.json in the text "
            "export, CANN_API in the DB), so what the host does cannot be told; the devices do "
            f"wait for it: {lower_first(summary(host, zh))}."
        )
        return p
    p.lines.append(
        f"设备等待期间主机在做的事（{label(host.culprit, zh)}）：{summary(host, zh)}。"
        if zh
        else f"What the host does while the device waits ({label(host.culprit, zh)}): "
        f"{lower_first(summary(host, zh))}."
    )
    if not measured:
        p.lines.append(
            "主机数据只显示它没有及时下发，没有显示它在哪段代码里；用 with_stack=True 采集可以看到 Python 调用栈。"
            if zh
            else "The host data shows it launching late, not which code it runs then; a capture "
            "with with_stack=True records its Python frames."
        )
    return p
