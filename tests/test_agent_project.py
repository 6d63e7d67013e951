"""Answers as projections of a constructed Diagnosis (issue 12 item 4).

Each diagnosis is built by hand (known answer by construction): a slow link 3→11, a pipeline
stage imbalance, one-step stall events, a job-level cause, no culprit, not enough signal. The
projections are checked directly and through the offline Advisor (grounding included).
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from advisor_chat.agent import Advisor
from advisor_chat.agent import project as pj
from advisor_chat.agent.testing import fake_case_search, tiny_profile, tiny_registry
from advisor_chat.analyzers.base import Category, Severity
from advisor_chat.config import Settings
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Diagnosis,
    Impact,
    Mechanism,
    Remedy,
    RootCause,
)

STEP_US = 100_000.0


def _cause(mech: Mechanism, cat: Category, culprit: Culprit, victims=(), **kw) -> RootCause:
    defaults = {
        "id": f"cause.{mech.value}",
        "summary": f"{mech.value} summary",
        "summary_zh": f"{mech.value} 的中文摘要",
        "metrics": {},
        "findings": (),
        "severity": Severity.HIGH,
    }
    defaults.update(kw)
    return RootCause(
        mechanism=mech, category=cat, culprit=culprit, victims=tuple(victims), **defaults
    )


def _diag(*causes: RootCause, ranks=range(16), headline="", headline_zh="", **kw) -> Diagnosis:
    return Diagnosis(
        causes=tuple(causes),
        other_findings=(),
        excluded_steps=kw.pop("excluded_steps", ()),
        ranks=tuple(ranks),
        steps=(1, 2, 3, 4),
        step_time_us=STEP_US,
        shares=kw.pop(
            "shares", {"computing": 0.5, "communication_not_overlapped": 0.3, "free": 0.2}
        ),
        headline=headline or (causes[0].summary if causes else ""),
        headline_zh=headline_zh or (causes[0].summary_zh if causes else ""),
        **kw,
    )


SLOW_LINK = _cause(
    Mechanism.SLOW_LINK,
    Category.COMMUNICATION,
    Culprit(
        "link",
        (),
        link=(3, 11),
        transport="RDMA",
        label="link 3→11 (RDMA)",
        label_zh="链路 3→11 (RDMA)",
    ),
    [Impact(r, 30_000.0, 0.3, "collective_wait") for r in range(16) if r not in (3, 11)],
    id="cause.slow_link.3-11",
    summary="link 3→11 (RDMA) runs at 4 GB/s vs 20 GB/s median",
    summary_zh="链路 3→11 (RDMA) 带宽 4 GB/s，中位数 20 GB/s",
    metrics={"bandwidth_gbps": 4.0, "median_bandwidth_gbps": 20.0},
    gain_us=30_000.0,
    bound=BoundKind.ESTIMATE,
    remedies=(
        Remedy(
            "check",
            "Check the RDMA NIC of ranks 3 and 11 with hccn_tool",
            "用 hccn_tool 检查 3、11 号卡的 RDMA 网卡",
        ),
    ),
    symptom_tags=("slow_link",),
)
PIPE = _cause(
    Mechanism.PIPELINE_IMBALANCE,
    Category.COMMUNICATION,
    Culprit(
        "stage",
        tuple(range(8)),
        stage=0,
        label="stage 0 (ranks 0–7)",
        label_zh="流水线阶段0 (0–7号卡)",
    ),
    [Impact(r, 180_000.0, 0.45, "bubble") for r in range(8, 16)],
    id="cause.pipeline.s0",
    summary="stage 1 waits 180 ms per step for stage 0",
    summary_zh="阶段1每步等待阶段0 180 ms",
    dominant="communication-bound (52% Communication Not Overlapped)",
    dominant_zh="通信受限（52% 未被掩盖的通信）",
    metrics={"bubble_us": 180_000.0, "comm_share": 0.52},
    gain_us=90_000.0,
    bound=BoundKind.UPPER_BOUND,
    remedies=(
        Remedy(
            "action",
            "Overlap stage 0's communication with computation",
            "让阶段0的通信与计算重叠",
            gain_us=90_000.0,
            bound=BoundKind.UPPER_BOUND,
        ),
        Remedy("check", "Look at stage 0's collectives", "查看阶段0的集合通信"),
    ),
)
EVENTS = _cause(
    Mechanism.STEP_EVENTS,
    Category.SCHEDULING,
    Culprit(
        "steps", events=((2, 5), (3, 9), (4, 1)), label="3 one-step stalls", label_zh="3 次单步停顿"
    ),
    (),
    id="cause.step_events",
    summary="one-step host stalls of 650 ms rotate across ranks",
    summary_zh="约 650 ms 的单步 host 停顿在不同卡之间轮换",
    metrics={"stall_us": 650_000.0},
)
JOB = _cause(
    Mechanism.JOB_IDLE,
    Category.SCHEDULING,
    Culprit("job", label="the whole job", label_zh="整个作业"),
    [Impact(r, 20_000.0, 0.2, "idle") for r in range(16)],
    id="cause.job_idle",
    summary="every rank idles 20 ms per step waiting for input",
    summary_zh="每张卡每步空闲 20 ms，等待输入",
)
NO_CULPRIT = _cause(
    Mechanism.NO_CULPRIT,
    Category.NONE,
    Culprit("none"),
    id="cause.no_culprit",
    summary="no rank stands out: spreads are under threshold; Computing dominates every rank",
    summary_zh="没有突出的卡：各卡差异都在阈值以内；每张卡都以计算为主",
    severity=Severity.INFO,
)
NOT_ENOUGH = _cause(
    Mechanism.NOT_ENOUGH_SIGNAL,
    Category.UNKNOWN,
    Culprit("none"),
    id="cause.not_enough_signal",
    summary="2 ranks are too few to tell a slow rank from noise",
    summary_zh="只有 2 张卡，无法区分慢卡与噪声",
    severity=Severity.INFO,
)


def _text(p: pj.Projection) -> str:
    return "\n".join(p.lines)


def test_rank_on_a_slow_link_is_said_so_never_not_slow() -> None:
    d = _diag(SLOW_LINK)
    for zh in (False, True):
        t = _text(pj.explain_ranks(d, [3], zh))
        if zh:
            assert t.startswith("3号卡在慢链路 3→11 (RDMA) 上") and "4 GB/s" in t
        else:
            assert t.startswith("Rank 3 is on the slow link 3→11 (RDMA)") and "4 GB/s" in t
        assert "not slow" not in t and "不是慢卡" not in t
    assert _text(pj.explain_ranks(d, [3], False, yes_no=True)).startswith(
        "Not by itself: rank 3 is on the slow link"
    )
    # a victim of the link waits for it
    t = _text(pj.explain_ranks(d, [5], False))
    assert t.startswith(
        "Rank 5 waits 30.0 ms per step (30.0% of its step) at the collectives for link 3→11"
    )
    net = _text(pj.network(d, [], False))
    # the cause's own sentence names the link once (no "the slow link X: link X runs ...")
    assert net.startswith("Yes, the network is a problem: link 3→11 (RDMA) runs at 4 GB/s")
    assert net.count("3→11") == 1
    zh_net = _text(pj.network(d, [], True))
    assert zh_net.startswith("是的，网络有问题：") and "3→11" in zh_net
    assert _text(pj.network(d, [], False, [11])).startswith("Yes, the network is a problem")
    assert _text(pj.network(d, [], False, [5])).startswith(
        "No: rank 5 is not on a slow link; the slow link is 3→11 (RDMA)"
    )
    other = _text(pj.network(d, [(1, 2)], False))
    assert other.startswith("No: link 1→2 is not the slow one; the slow link is 3→11")


def test_downstream_stage_waits_for_the_upstream_stage_and_what_dominates_it() -> None:
    d = _diag(PIPE)
    t = _text(pj.explain_ranks(d, [12], False))
    assert t.startswith(
        "Rank 12 waits 180 ms per step (45.0% of its step) in pipeline bubbles (receive wait) "
        "for stage 0 (ranks 0–7), which is communication-bound (52% Communication Not Overlapped)"
    )
    zh = _text(pj.explain_ranks(d, [12], True))
    assert (
        zh.startswith("12号卡在流水线气泡（接收等待）中等待每步 180 ms")
        and "等的是流水线阶段0" in zh
    )
    assert _text(pj.explain_ranks(d, [12], True, yes_no=True)).startswith("不是它自身的问题")
    assert _text(pj.explain_ranks(d, [2], False, yes_no=True)).startswith("Yes, rank 2")
    up = _text(pj.explain_ranks(d, [2], False))
    assert up.startswith(
        "Rank 2 is slow as part of stage 0 (ranks 0–7): the cause is that whole unit, not rank 2 alone"
    )
    rng = _text(pj.explain_ranks(d, list(range(8, 16)), False))
    assert rng.startswith(
        "Ranks 8-15 wait in pipeline bubbles (receive wait) up to 180 ms per step for stage 0"
    )
    which = _text(pj.which_culprit(d, False))
    assert which.startswith("Stage 0 (ranks 0–7) holds the job back, being communication-bound")
    fix = _text(pj.fix_first(d, False))
    assert fix.startswith(
        "Fix stage 0 (ranks 0–7) first: overlap stage 0's communication with computation, "
        "for at most 90.0 ms per step (upper bound)"
    )
    for zh, lead in (
        (False, "No, the network is not the problem: no link is slow"),
        (True, "不是网络的问题"),
    ):
        assert _text(pj.network(d, [], zh)).startswith(lead)
    pipe = _text(pj.pipeline(d, [1], False))
    assert pipe.startswith("Stage 0 (ranks 0–7) holds the pipeline back — ")
    first = pipe.split("\n")[0]
    assert "up to" not in first and first.count("180 ms") <= 1, first
    assert "Stage 1 is the waiting side, not the cause." in pipe


def test_step_events_keep_their_step_rank_list() -> None:
    d = _diag(EVENTS)
    t = _text(pj.steps(d, False))
    assert t.startswith(
        "The slow steps come from one-step events (step 2, rank 5), (step 3, rank 9), (step 4, rank 1)"
    )
    w = _text(pj.which_culprit(d, False))
    assert w.startswith(
        "No rank is slow on average: the time goes to one-step stalls, (step 2, rank 5)"
    )
    r5 = _text(pj.explain_ranks(d, [5], False))
    assert r5.startswith("Rank 5 stalls only in step 2 (an event, not a slow rank on average)")
    assert _text(pj.steps(d, True)).startswith("慢的步来自单步事件 第 2 步的5号卡、第 3 步的9号卡")


def test_job_level_cause_names_no_rank() -> None:
    d = _diag(JOB)
    assert _text(pj.which_culprit(d, False)).startswith(
        "No single rank holds the job back, every rank loses time to the same job-level cause"
    )
    t = _text(pj.explain_ranks(d, [4], False))
    assert t.startswith(
        "Rank 4 sits idle 20.0 ms per step (20.0% of its step) for a reason common to the whole job"
    )


def test_no_culprit_and_not_enough_signal() -> None:
    d = _diag(NO_CULPRIT)
    t = _text(pj.which_culprit(d, False))
    assert t.startswith("No rank holds the job back — no rank stands out")
    assert "Computing 50.0%" in t
    assert _text(pj.explain_ranks(d, [3], False)).startswith("Rank 3 is not slow: the spreads")
    assert _text(pj.fix_first(d, True)).startswith("没有拖慢作业的卡")
    d2 = _diag(NOT_ENOUGH, ranks=(0, 1))
    assert _text(pj.which_culprit(d2, False)).startswith(
        "Not enough signal to name a slow rank: 2 ranks"
    )
    assert _text(pj.explain_ranks(d2, [1], False)).startswith(
        "Not enough signal to say whether rank 1 is slow"
    )


def test_nothing_stands_out_only_when_the_diagnosis_is_empty() -> None:
    assert pj.headline(_diag(), False).startswith("Nothing stands out")
    for d in (_diag(SLOW_LINK), _diag(NO_CULPRIT), _diag(EVENTS)):
        for fn in (pj.overview, pj.which_culprit, pj.fix_first):
            assert "Nothing stands out" not in _text(fn(d, False)), fn


def test_category_yes_no_answers_with_the_top_cause() -> None:
    d = _diag(PIPE, JOB)
    yes = _text(pj.category(d, ["communication"], True, False))
    assert yes.startswith("Yes, the main bottleneck is communication")
    no = _text(pj.category(d, ["compute"], True, False))
    assert no.startswith("No, the main bottleneck is communication")
    zh = _text(pj.category(d, ["host"], True, True))
    assert zh.startswith("不是，主要瓶颈是通信") and "次要原因" in zh


def _adv(d: Diagnosis) -> Advisor:
    return Advisor(
        tiny_profile(),
        settings=Settings(),
        registry=tiny_registry(),
        case_search=fake_case_search,
        diagnose=lambda profile, **_: d,
    )


def test_through_the_advisor_typed_suggestions_and_grounding() -> None:
    d = _diag(PIPE, ranks=range(4))
    ans = _adv(d).ask("what should I fix first?")
    assert ans.answer.startswith("Fix stage 0 (ranks 0–7) first")
    acts = [s for s in ans.suggestions if s.kind == "action"]
    checks = [s for s in ans.suggestions if s.kind == "check"]
    assert acts[0].cause_id == "cause.pipeline.s0" and acts[0].estimated_gain_us == 90_000.0
    assert checks and all(s.estimated_gain_us is None for s in checks)
    assert ans.suggestions.index(checks[0]) > ans.suggestions.index(acts[-1])
    assert ans.grounding.ungrounded == [], ans.grounding
    zh = _adv(d).ask("先修什么？")
    assert zh.answer.startswith("先处理流水线阶段0 (0–7号卡)：让阶段0的通信与计算重叠")
    assert zh.grounding.ungrounded == []


def test_case_remedy_that_contradicts_the_cause_is_dropped() -> None:
    from advisor_chat.agent.planner import build_suggestions, consistent_case
    from advisor_chat.kb.types import CaseHit

    bad = CaseHit(
        id="straggler-not-network",
        title="t",
        title_zh="t",
        score=1.0,
        section="",
        source="x.md",
        remedies=("Find the straggler rather than tuning the network",),
        symptom_tags=("slow_link",),
        matched_tags=("slow_link",),
    )
    assert not consistent_case(bad, [SLOW_LINK])
    assert consistent_case(bad, [EVENTS])
    sug = build_suggestions([SLOW_LINK], [], [bad], False)
    assert all("rather than tuning the network" not in s.text for s in sug)
    assert [s.kind for s in sug] == ["check"]


def test_unknown_question_gets_the_headline_and_tool_errors_are_shown() -> None:
    ans = _adv(_diag(SLOW_LINK, ranks=range(4))).ask("tell me a joke")
    assert ans.answer.startswith("What the diagnosis says: link 3→11 (RDMA) runs at 4 GB/s")
    assert "Questions I can answer" in ans.answer

    def broken(profile, **_):
        raise RuntimeError("diagnosis engine exploded")

    adv = Advisor(
        tiny_profile(),
        settings=Settings(),
        registry=tiny_registry(),
        case_search=fake_case_search,
        diagnose=broken,
    )
    out = adv.ask("which rank holds the job back?")
    assert out.answer.startswith("I could not diagnose this profile")
    assert "RuntimeError: diagnosis engine exploded" in out.answer  # the tool error is shown
    zh = adv.ask("哪张卡拖后腿？")
    assert "diagnose" in zh.answer and "exploded" not in zh.answer


_WAITS_FOR = re.compile(r"wait(s|ing)? for (it|them)\b|在等它|等待它", re.I)


def contradiction(answer: str, rank: int) -> bool:
    """Whether ``answer`` calls ``rank`` "not slow" and also says others wait for it / it is on a slow link."""
    # a scoped statement ("rank 5 is not slow in the other steps" about a one-step event) is
    # not a contradiction; an unscoped "rank N is not slow" beside "they wait for it" is
    not_slow = re.search(
        rf"\brank {rank} is not slow(?! (in|on|outside|apart|except|between)\b)|(?<!\d){rank}号卡不是慢卡",
        answer,
        re.I,
    )
    blamed = _WAITS_FOR.search(answer) or re.search(r"on the slow link|在慢链路", answer)
    return bool(not_slow and blamed)


def test_the_contradiction_detector_can_fail_and_pass() -> None:
    assert contradiction("Rank 3 is not slow. The other ranks wait for it.", 3)
    assert contradiction("3号卡不是慢卡。其他卡在等它。", 3)
    assert not contradiction("Rank 3 is not slow in the other steps; the others wait for it.", 3)
    assert not contradiction("Rank 3 is on the slow link 3→11.", 3)
    assert not contradiction("Rank 4 is not slow. The other ranks wait for it.", 3)


@pytest.mark.parametrize(
    "d", [_diag(SLOW_LINK), _diag(PIPE), _diag(EVENTS), _diag(JOB), _diag(NO_CULPRIT)]
)
def test_no_rank_is_both_not_slow_and_waited_for_constructed(d: Diagnosis) -> None:
    for r in d.ranks:
        for zh in (False, True):
            assert not contradiction(_text(pj.explain_ranks(d, [r], zh)), r)


def _ranks_to_ask(folder, ranks) -> list[int]:
    """The ranks where "not slow" and "waited for" can meet: the answer key's slow and culprit
    ranks, the first and last of its victims and of its not-slow ranks, and the first and last
    rank of the job (every rank of 16 cost 4.5 min of CI for the same verdicts)."""
    import json

    key = json.loads((folder / "answer_key.json").read_text(encoding="utf-8"))
    rc = key.get("root_cause") or {}
    pick = {*key.get("slow_ranks", []), *rc.get("culprit_ranks", [])}
    for many in (rc.get("victim_ranks", []), rc.get("not_slow_ranks", [])):
        pick |= set(many[:1]) | set(many[-1:])
    pick |= {min(ranks), max(ranks)}
    return sorted(r for r in pick if r in set(ranks))


@pytest.mark.slow
def test_no_rank_is_both_not_slow_and_waited_for_on_every_scenario(scenario) -> None:
    """Over the generator scenarios (:func:`_sampling.sweep_sample`: the core kinds and a fixed
    half of the others; every kind cost 4.5 min of CI), EN and ZH (the real diagnosis), on the
    ranks where the two verdicts can meet (:func:`_ranks_to_ask`)."""
    from _sampling import sweep_sample

    from advisor_chat.ingest import load_profile
    from advisor_chat.synth import SCENARIOS
    from advisor_chat.synth.blind import BLIND_KINDS
    from advisor_chat.synth.heldout_dev import HELD_OUT_DEV_KINDS
    from advisor_chat.synth.scenarios_dev import DEV_KINDS
    from advisor_chat.synth.scenarios_faults import FAULT_KINDS

    bad: list[str] = []
    for name in sweep_sample(SCENARIOS, "rank-verdicts"):
        if name == "cann-upgrade-pair":
            continue  # a before/after pair, not one profile
        if name in FAULT_KINDS:
            continue  # generalization kinds: measured by evals/datasets/generalization.yaml only
        if name in DEV_KINDS:
            continue  # development kinds: measured by evals/datasets/generalization_dev.yaml
        if name in BLIND_KINDS or name in HELD_OUT_DEV_KINDS:
            continue  # held-out kinds: a failure here would print their names and answers
        folder = scenario(name)
        profile = load_profile(folder)
        adv = Advisor(profile, settings=Settings(), case_search=lambda *a, **k: [])
        for r in _ranks_to_ask(folder, profile.ranks):
            for q in (f"why is rank {r} slow?", f"为什么{r}号卡慢？"):
                ans = adv.ask(q)
                if contradiction(ans.answer, r):
                    bad.append(f"{name}: {q} -> {ans.answer[:200]}")
    assert not bad, bad


def test_the_case_of_the_top_cause_mechanism_leads() -> None:
    from advisor_chat.agent.planner import lead_case_first, lead_tag
    from advisor_chat.kb.types import CaseHit

    def hit(cid: str, matched: tuple[str, ...]) -> CaseHit:
        return CaseHit(cid, cid, cid, 0.5, "", f"{cid}.md", matched_tags=matched)

    deg = _cause(Mechanism.DEGRADATION, Category.SCHEDULING, Culprit("rank", (2,)))
    assert lead_tag(deg) == "step_degradation" and lead_tag(SLOW_LINK) == "slow_link"
    host = hit("host-dispatch-bound", ("host_bound", "high_free", "slow_rank"))
    trend = hit("step-time-degradation", ("step_degradation",))
    assert [h.id for h in lead_case_first([host], [host, trend], "step_degradation")] == [
        "step-time-degradation",
        "host-dispatch-bound",
    ]
    assert lead_case_first([host], [host], "step_degradation") == [host]  # no match: unchanged
    ckpt = CaseHit(
        "checkpoint-save-stall", "c", "c", 0.9, "", "c.md", matched_tags=("step_degradation",)
    )
    led = lead_case_first([host, ckpt], [host, trend, ckpt], "step_degradation")
    assert [h.id for h in led] == [
        "checkpoint-save-stall",
        "step-time-degradation",
        "host-dispatch-bound",
    ]


def test_step_questions_on_too_few_steps_say_not_enough_signal() -> None:
    p = tiny_profile()
    p.tables["step_trace"] = p.tables["step_trace"][p.tables["step_trace"]["step"] == 1]
    p.tables["kernels"] = p.tables["kernels"][p.tables["kernels"]["step"] == 1]
    adv = Advisor(
        p,
        settings=Settings(),
        registry=tiny_registry(),
        case_search=fake_case_search,
        diagnose=lambda profile, **_: _diag(EVENTS, ranks=range(4)),
    )
    en = adv.ask("is the step time getting worse during the run?")
    assert en.answer.startswith("Not enough signal to judge how step time changes")
    assert "holds one step" in en.answer and en.grounding.ungrounded == []
    zh = adv.ask("为什么有些 step 特别慢？")
    assert zh.answer.startswith("没有足够的信息判断每步耗时的变化：这份数据只有一步")


def test_a_named_step_gets_its_own_events_or_is_said_to_have_none() -> None:
    d = _diag(EVENTS)
    assert _text(pj.steps(d, False, [3])).startswith(
        "Step 3 is slow because of the stall at (step 3, rank 9) — "
    )
    assert _text(pj.steps(d, True, [3])).startswith("第 3 步慢在第 3 步的9号卡的停顿——")
    none = _text(pj.steps(d, True, [1]))
    assert none.startswith("第 1 步没有单独的事件。\n慢的步来自单步事件 第 2 步的5号卡")
    assert _text(pj.steps(_diag(SLOW_LINK, excluded_steps=(1,)), False, [1])).startswith(
        "Step 1 has incomplete device records and was excluded"
    )


def test_more_slot_routes() -> None:
    from advisor_chat.agent.parse import parse_question

    assert parse_question("Which node is the bottleneck?").intent == "which_slow_rank"
    assert parse_question("What's dragging down throughput?").intent == "which_slow_rank"
    assert parse_question("这次采集的数据靠谱吗？").intent == "data_quality"
    q = parse_question("0-7号卡和8-15号卡有什么区别？")
    assert (q.intent, sorted(q.ranks)) == ("explain_rank", list(range(16)))
    # an either/or question gets no yes/no verdict
    adv = Advisor(
        tiny_profile(),
        settings=Settings(),
        registry=tiny_registry(),
        case_search=fake_case_search,
        diagnose=lambda profile, **_: _diag(PIPE, ranks=range(4)),
    )
    assert adv.ask("Is rank 2 a victim or the culprit?").answer.startswith(
        "Rank 2 is slow as part of stage 0"
    )
    assert adv.ask("Is rank 2 slow?").answer.startswith("Yes, rank 2 is slow as part of stage 0")


def test_tool_errors_in_chinese_have_no_english() -> None:
    from advisor_chat.agent.planner import error_zh

    assert error_zh("explain_rank", "rank 16 does not exist; ranks are 0-3") == (
        "卡 16 不存在；现有的卡为 0-3"
    )
    assert error_zh("step_trend", "step 9 is not in step_trace; steps are 1-3").startswith(
        "第 9 步不在 step_trace 中"
    )
    for err in (
        "compare_profiles compares two runs but no baseline profile was given; pass …",
        "bad arguments for slow_rank: group: unknown",
        "slow_rank failed with an internal error (KeyError: 'x')",
    ):
        text = error_zh("slow_rank", err)
        assert not re.search(r"[A-Za-z]{3,} [A-Za-z]{3,}", re.sub(r"`[^`]*`", "", text)), text


def test_yes_no_overview_verdicts() -> None:
    assert _text(pj.overview(_diag(PIPE), False, yes_no=True)).startswith("Yes: stage 1 waits")
    assert _text(pj.overview(_diag(NO_CULPRIT), True, yes_no=True)).startswith("没有明显的问题：")
    assert _text(pj.overview(_diag(NOT_ENOUGH), False, yes_no=True)).startswith("Cannot tell: ")
    assert _text(pj.overview(_diag(PIPE), False)).startswith("stage 1 waits")


HOST9 = _cause(
    Mechanism.HOST_STALL,
    Category.SCHEDULING,
    Culprit("rank", (9,), label="rank 9", label_zh="9号卡"),
    [Impact(r, 7_400.0, 0.09, "collective_wait") for r in range(16) if r != 9],
    id="cause.host_stall.r9",
    summary="Host stall on rank 9: its device idles 7.4 ms more per step, waiting for its host",
    summary_zh="9号卡主机侧阻塞：其设备每步多空闲 7.4 ms，在等主机",
    gain_us=7_400.0,
    bound=BoundKind.ESTIMATE,
)
EXPOSED = _cause(
    Mechanism.EXPOSED_COMMUNICATION,
    Category.COMMUNICATION,
    Culprit("job", label="the whole job", label_zh="整个作业"),
    [Impact(r, 25_000.0, 0.25, "collective_wait") for r in range(16)],
    id="cause.exposed_communication",
    summary="Many small collectives are exposed on every rank",
    summary_zh="大量小的集合通信在所有卡上都没有被掩盖",
)


def test_yes_no_verdict_follows_the_ranks_role() -> None:
    ev = _diag(EVENTS)
    assert _text(pj.explain_ranks(ev, [5], False, yes_no=True)).startswith(
        "No — not on average: rank 5 stalls only in step 2"
    )
    assert _text(pj.explain_ranks(ev, [5], True, yes_no=True)).startswith(
        "不是，平均来看不是慢卡：5号卡只在第 2 步"
    )
    pipe = _diag(PIPE)
    assert _text(pj.explain_ranks(pipe, [12], False, yes_no=True)).startswith(
        "No, not by itself: rank 12 waits 180 ms per step"
    )
    vic = list(range(8, 16))
    assert _text(pj.explain_ranks(pipe, vic, False, yes_no=True)).startswith(
        "No: ranks 8-15 wait in pipeline bubbles (receive wait) up to 180 ms per step for stage 0"
    )
    assert _text(pj.explain_ranks(pipe, vic, True, yes_no=True)).startswith(
        "不是：8-15号卡在流水线气泡（接收等待）中等待"
    )
    assert _text(pj.explain_ranks(pipe, [0, 1], False, yes_no=True)).startswith("Yes, ranks 0-1")
    assert _text(pj.explain_ranks(pipe, [1, 12], False, yes_no=True)).startswith("Only rank 1: ")
    host = _diag(HOST9)
    assert _text(pj.explain_ranks(host, [9], False, yes_no=True)).startswith("Yes, rank 9 is slow")
    assert _text(pj.which_culprit(host, False, yes_no=True)).startswith(
        "Yes, rank 9 holds the job back"
    )
    assert _text(pj.which_culprit(host, True, yes_no=True)).startswith("是的，拖慢作业的是9号卡")
    # a slow link or one-step events: no single slow rank (no "yes")
    assert _text(pj.which_culprit(ev, False, yes_no=True)).startswith("No rank is slow on average")


def test_not_enough_signal_leads_which_and_why_rank_answers() -> None:
    d = _diag(EXPOSED, NOT_ENOUGH, ranks=(0, 1))
    for zh in (False, True):
        w = _text(pj.which_culprit(d, zh))
        assert w.startswith(
            "没有足够的信息指出慢卡" if zh else "Not enough signal to name a slow rank"
        )
        assert EXPOSED.summary_zh in w if zh else EXPOSED.summary in w  # job causes follow
        r = _text(pj.explain_ranks(d, [0], zh))
        assert r.startswith(
            "没有足够的信息判断0号卡是否慢"
            if zh
            else "Not enough signal to say whether rank 0 is slow"
        )
        c = _text(pj.explain_ranks(d, [0, 1], zh, compare=True))
        assert c.startswith(
            "没有足够的信息判断0号卡和1号卡哪张更慢"
            if zh
            else "Not enough signal to tell whether rank 0 or rank 1 is slower"
        )
        assert "ranks 0-1 is" not in c
    # the same question on a diagnosis that can decide names the culprit
    assert _text(pj.which_culprit(_diag(HOST9), False)).startswith("Rank 9 holds the job back")


def test_network_verdict_only_for_yes_no_questions() -> None:
    d = _diag(EXPOSED)
    why = _text(pj.network(d, [], False, yes_no=False))
    assert why.startswith("Many small collectives are exposed on every rank")
    assert _text(pj.network(d, [], True, yes_no=False)).startswith("大量小的集合通信")
    assert _text(pj.network(d, [], False)).startswith("No, the network is not the problem")
    link = _diag(SLOW_LINK)
    assert _text(pj.network(link, [], False, yes_no=False)).startswith(
        "Link 3→11 (RDMA) runs at 4 GB/s"
    )
    assert "3→11" in _text(pj.network(link, [], True, yes_no=False)).split("。")[0]


def test_two_ranks_compared_name_the_slower_one_as_the_cause() -> None:
    d = _diag(HOST9)
    for pair in ([9, 7], [7, 9]):
        en = _text(pj.explain_ranks(d, pair, False, compare=True))
        assert en.startswith(
            "Rank 9 is the slower one, and it is the cause: Host stall on rank 9"
        ), en
        assert "rank 7 waits for it (7.4 ms per step" in en.split("\n")[0]
        zh = _text(pj.explain_ranks(d, pair, True, compare=True))
        assert zh.startswith("9号卡更慢，它就是原因：9号卡主机侧阻塞") and "7号卡在等它" in zh
    # neither is the culprit: said so, with their roles
    assert _text(pj.explain_ranks(d, [3, 5], False, compare=True)).startswith(
        "Neither rank 3 nor rank 5 is the cause: ranks 3, 5 wait at the collectives"
    )


def test_plot_ranks_hold_only_the_answers_culprit_ranks() -> None:
    pipe = _diag(PIPE)
    stage0 = set(range(8))
    assert set(pj.explain_ranks(pipe, [12], False).plot_ranks) <= stage0
    assert set(pj.explain_ranks(pipe, list(range(8, 16)), False).plot_ranks) == stage0
    assert set(pj.pipeline(pipe, [], False).plot_ranks) == stage0
    assert pj.explain_ranks(_diag(HOST9), [9, 7], False, compare=True).plot_ranks == [9]
    assert set(pj.explain_ranks(_diag(SLOW_LINK), [5], False).plot_ranks) == {3, 11}


_NOT_SLOW = re.compile(
    r"\b(?:ranks? (?:3|11)(?: and (?:3|11))?)[^.;:]{0,40}\bnot slow\b|(?:3|11)号卡[^。；：]{0,30}不慢",
    re.I,
)


def test_slow_link_endpoints_are_never_called_not_slow(scenario) -> None:
    from advisor_chat.ingest import load_profile

    adv = Advisor(
        load_profile(scenario("slow-link")), settings=Settings(), case_search=fake_case_search
    )
    questions = (
        "why is rank 3 slow?",
        "is rank 11 slow?",
        "is it the network?",
        "which link is slow?",
        "what is holding the job back?",
        "what should I fix first?",
        "summarize the problems",
        "3号卡为什么这么慢？",
        "11号卡也慢吗？",
        "是不是网络的问题？",
        "有没有慢链路？",
        "先修什么？",
    )
    for q in questions:
        a = adv.ask(q).answer
        assert "3→11" in a, (q, a)
        assert not _NOT_SLOW.search(a), (q, a)
        assert "not slow themselves" not in a and "本身并不慢" not in a, (q, a)


def test_yes_no_compare_and_stage_questions_open_with_the_verdict() -> None:
    d = _diag(HOST9)
    assert _text(pj.explain_ranks(d, [9, 2], False, compare=True, yes_no=True)).startswith(
        "Yes: rank 9 is the slower one"
    )
    assert _text(pj.explain_ranks(d, [2, 9], False, compare=True, yes_no=True)).startswith(
        "No: rank 9 is the slower one"
    )
    assert _text(
        pj.explain_ranks(d, [2, 9], False, compare=True, yes_no=True, faster=True)
    ).startswith("Yes: rank 9 is the slower one")
    assert _text(pj.explain_ranks(d, [2, 9], True, compare=True, yes_no=True)).startswith(
        "不是：9号卡更慢"
    )
    pipe = _diag(PIPE)
    assert _text(pj.pipeline(pipe, [1], False, yes_no=True)).startswith(
        "No: stage 0 (ranks 0–7) holds the pipeline back"
    )
    assert _text(pj.pipeline(pipe, [0], True, yes_no=True)).startswith("是的：流水线阶段0")


def test_slow_step_question_on_an_excluded_step_leads_with_the_artifact() -> None:
    d = _diag(NO_CULPRIT, excluded_steps=(1,))
    for zh in (False, True):
        t = _text(pj.steps(d, zh))
        assert t.startswith(
            "step 1 的设备记录不完整" if zh else "Step 1 has incomplete device records"
        )
    # "is rank 5 slower than rank 0?" when neither is the culprit: a "no" first
    host = _diag(HOST9)
    assert _text(pj.explain_ranks(host, [5, 0], False, compare=True, yes_no=True)).startswith(
        "No: neither rank 5 nor rank 0 is the cause"
    )


def test_yes_no_step_questions_open_with_the_verdict() -> None:
    assert _text(pj.steps(_diag(EVENTS), False, yes_no=True)).startswith(
        "Yes: the slow steps come from one-step events (step 2, rank 5)"
    )
    assert _text(pj.steps(_diag(EVENTS), True, yes_no=True)).startswith("是的：慢的步")
    assert _text(pj.steps(_diag(NO_CULPRIT), False, yes_no=True)).startswith(
        "No: no step is slower than the others"
    )


def test_a_cause_scoped_to_some_steps_answers_the_slow_steps_question() -> None:
    # no one-step events, but a job idle that only some steps have (new shapes compiled there):
    # those steps are slow because of it, a "yes"; a cause of every step is still a "no"
    part = _diag(dataclasses.replace(JOB, steps=(2, 4)))
    assert _text(pj.steps(part, False, yes_no=True)).startswith(
        "Yes: steps 2, 4 are slow because of the whole job — "
    )
    assert _text(pj.steps(part, True, yes_no=True)).startswith(
        "是的：慢的是第 2、4 步，原因在整个作业——"
    )
    every = _diag(dataclasses.replace(JOB, steps=(1, 2, 3, 4)))
    assert _text(pj.steps(every, False, yes_no=True)).startswith("No: no step-level cause")


def test_chinese_victim_answer_names_the_culprits_mechanism_in_its_first_sentence() -> None:
    t = _text(pj.explain_ranks(_diag(HOST9), [13], True))
    first = t.split("。")[0]
    assert first.startswith("13号卡在集合通信中等待每步 7.4 ms") and "主机侧阻塞" in first


def test_which_link_with_no_slow_link_says_no_link_is_slow() -> None:
    d = _diag(EXPOSED)
    assert _text(pj.network(d, [], False, yes_no=False, which=True)).startswith(
        "No link is slow: no link runs far below the median bandwidth of its transport; "
        "the time goes elsewhere — many small collectives"
    )
    # the top cause is named even when it is not communication (a host stall ahead of exposed
    # communication), and the communication cause follows as a bullet
    both = _text(pj.network(_diag(HOST9, EXPOSED), [], False, yes_no=False, which=True))
    # in the verdict's own sentence: its first sentence names the culprit
    first = both.split("\n")[0].split(". ")[0]
    assert "the time goes elsewhere — host stall on rank 9" in first
    assert both.split("\n")[1].startswith("- Many small collectives")
    assert _text(pj.network(d, [], True, yes_no=False, which=True)).startswith("没有慢链路")
    link = _diag(SLOW_LINK)
    assert _text(pj.network(link, [], False, yes_no=False, which=True)).startswith(
        "Link 3→11 (RDMA) runs at 4 GB/s"
    )


def test_healthy_way_round_questions_get_the_inverted_verdict() -> None:
    link = _diag(SLOW_LINK)
    assert _text(pj.explain_ranks(link, [11], False, yes_no=True, healthy=True)).startswith(
        "Not entirely: rank 11 is on the slow link 3→11"
    )
    assert _text(pj.network(link, [], False, healthy=True)).startswith(
        "No, the network is not fine: link 3→11"
    )
    assert _text(pj.network(_diag(EXPOSED), [], True, healthy=True)).startswith(
        "是的，网络没有问题：没有发现慢链路"
    )
    assert _text(pj.explain_ranks(_diag(PIPE), [12], False, yes_no=True, healthy=True)).startswith(
        "Yes, its own work is fine: rank 12 waits"
    )
    assert _text(pj.overview(_diag(HOST9), False, yes_no=True, healthy=True)).startswith("No: ")
    assert _text(pj.overview(_diag(NO_CULPRIT), False, yes_no=True, healthy=True)).startswith(
        "No clear problem: "
    )


def test_no_slow_link_is_not_claimed_when_the_links_could_not_be_judged() -> None:
    d = _diag(EXPOSED)
    en = _text(pj.network(d, [], False, links_judged=False))
    assert en.startswith(  # links not compared clear nothing: no "No" verdict
        "Cannot tell whether the network is the problem: no slow link was found (too few "
        "comparable links to judge)"
    )
    assert "no link is slow" not in en
    zh = _text(pj.network(d, [], True, links_judged=False))
    assert zh.startswith("无法判断是不是网络的问题：没有发现慢链路（可比较的链路太少，无法判断）")
    # judged links keep the plain statement
    assert "no link is slow" in _text(pj.network(d, [], False))


def test_network_verdict_names_the_top_cause_before_exposed_communication() -> None:
    """Asked whether the network is to blame, with a late rank on top and no slow link: the
    answer leads with the rank the others wait for, not only with the communication cause."""
    d = _diag(HOST9, EXPOSED)
    en = _text(pj.network(d, [], False))
    assert en.startswith(
        "No, the network is not the problem: no link is slow; the top cause lies elsewhere — "
        "host stall on rank 9"
    )
    assert "Communication itself is also a cause" in en and "many small collectives" in en
    assert "::" not in en.replace(" ", "")
    zh = _text(pj.network(d, [], True))
    assert zh.startswith("不是网络的问题：没有发现慢链路；首要原因在别处——9号卡主机侧阻塞")
    assert "通信本身也是一个原因" in zh
    # the communication cause on top: said as before, nothing else to lead with
    only = _text(pj.network(_diag(EXPOSED, HOST9), [], False))
    assert only.startswith(
        "No, the network is not the problem: no link is slow; communication itself is a cause"
    )


def test_overview_notes_are_a_paragraph_of_their_own() -> None:
    d = _diag(
        PIPE, notes=("only 1 step captured: it may be an event",), notes_zh=("只采集了 1 步",)
    )
    lines = pj.overview(d, False).lines
    assert lines[-2:] == ["", "Only 1 step captured: it may be an event."]
    assert pj.overview(d, True).lines[-2:] == ["", "只采集了 1 步。"]


def test_how_much_gives_the_step_after_the_fix_and_it_is_grounded() -> None:
    """The step after the fix is the median step minus the cause's gain (both in the diagnosis)."""
    from advisor_chat.agent.grounding import NumberPool, add_diagnosis, check_grounding

    d = _diag(HOST9)
    after_ms = (STEP_US - 7_400.0) / 1000.0
    share = 7_400.0 / STEP_US
    pool = NumberPool()
    add_diagnosis(pool, d)
    for zh in (False, True):
        t = _text(pj.how_much(d, zh))
        assert f"{after_ms:.1f} ms" in t or f"{after_ms:.0f} ms" in t, t
        assert f"{share:.1%}" in t, t
        assert "::" not in t.replace(" ", "") and "：：" not in t
        g = check_grounding(t, pool)
        assert g.ungrounded == [], (t, g)


def test_a_named_change_is_judged_against_the_causes_text_and_the_recorded_environment() -> None:
    """'We enabled X, related?': yes when a top cause's text shows X; no for an unset env var."""
    import dataclasses

    assert pj.named_suspect("ds配置里开了offload_optimizer到cpu，跟这个有关系吗") == "offload"
    assert pj.named_suspect("could ASCEND_LAUNCH_BLOCKING be on somewhere?") == "launch_blocking"
    assert pj.named_suspect("why is rank 3 slow?") == ""
    offload = dataclasses.replace(
        HOST9,
        summary=HOST9.summary + "; the optimizer step runs off the NPU (optimizer offload)",
    )
    yes = _text(pj.suspect_verdict(_diag(offload), "offload", False, env_recorded=True))
    assert yes.startswith("Yes, that fits what the data shows.") and "rank 9" in yes
    # the same question where no cause shows it: cannot tell, and where the time goes
    und = _text(pj.suspect_verdict(_diag(HOST9), "offload", False, env_recorded=True))
    assert und.startswith("Cannot tell") and "host stall on rank 9" in und
    # an environment variable the metadata records and the env check does not flag: not set
    no = _text(pj.suspect_verdict(_diag(HOST9), "launch_blocking", False, env_recorded=True))
    assert no.startswith("No: ASCEND_LAUNCH_BLOCKING is not set to 1 on any rank")
    assert "host stall on rank 9" in no
    # nothing recorded: cannot say it is unset
    zh = _text(pj.suspect_verdict(_diag(HOST9), "launch_blocking", True, env_recorded=False))
    assert zh.startswith("无法从这份数据判断")


def test_a_named_environment_variable_is_judged_by_the_environment_check() -> None:
    """'Could HCCL_BUFFSIZE matter?': yes with the env check's finding, else probably not / cannot tell."""
    import dataclasses

    from advisor_chat.analyzers.base import Evidence, Finding, FindingKind, Severity

    assert pj.named_suspect("could HCCL_BUFFSIZE matter here?") == "env:HCCL_BUFFSIZE"
    assert pj.named_suspect("启动脚本里的HCCL_BUFFSIZE被改小了，会影响吗") == "env:HCCL_BUFFSIZE"
    assert pj.named_suspect("does TASK_QUEUE_ENABLE matter?") == "env:TASK_QUEUE_ENABLE"
    buf = Finding(
        id="env_check.env.hccl_buffsize",
        kind=FindingKind.ENV,
        severity=Severity.MEDIUM,
        summary="HCCL_BUFFSIZE is 16 MB on every rank (ranks 0-15) (default 200 MB)",
        summary_zh="所有卡的 HCCL_BUFFSIZE 为 16 MB（默认 200 MB）",
        ranks=tuple(range(16)),
        evidence=(Evidence("meta", "profiler_metadata.json", {}, "meta.env"),),
    )
    comm = dataclasses.replace(HOST9, findings=(buf,))
    yes = _text(pj.suspect_verdict(_diag(comm, findings=(buf,)), "env:HCCL_BUFFSIZE", False, True))
    assert yes.startswith("Yes, it can matter: HCCL_BUFFSIZE is 16 MB") and "top cause" in yes
    yes_zh = _text(
        pj.suspect_verdict(_diag(comm, findings=(buf,)), "env:HCCL_BUFFSIZE", True, True)
    )
    assert yes_zh.startswith("是的，它有影响") and "16 MB" in yes_zh
    # judged by the check and not flagged: probably not; a variable it does not judge: cannot tell
    no = _text(pj.suspect_verdict(_diag(HOST9), "env:HCCL_BUFFSIZE", False, True))
    assert no.startswith("Probably not") and "host stall on rank 9" in no
    und = _text(pj.suspect_verdict(_diag(HOST9), "env:TASK_QUEUE_ENABLE", False, True))
    assert und.startswith("Cannot tell") and "TASK_QUEUE_ENABLE" in und


def test_alltoall_exposure_follows_the_load_imbalance_that_routes_it() -> None:
    """MoE: one rank gets more tokens (a load imbalance); the exposed communication, larger but
    mostly AlltoAll, is sized by the same routing: balancing the load leads 'what first?'."""
    import dataclasses

    from advisor_chat.diagnosis.types import Remedy

    g = HOST9.gain_us or 0.0
    hot = dataclasses.replace(
        HOST9,
        mechanism=Mechanism.COMPUTE_STRAGGLER,
        category=Category.COMPUTE,
        symptom_tags=("load_imbalance",),
        summary="Compute straggler rank 9: it gets larger GroupedMatmul inputs.",
        remedies=(Remedy("action", "Balance the tokens per rank.", "均衡各卡的 token 数。", g),),
    )
    a2a = dataclasses.replace(
        EXPOSED,
        gain_us=4 * g,
        metrics={"alltoallv_share": 0.6},
        remedies=(Remedy("action", "Overlap communication.", "让通信与计算重叠。", 4 * g),),
    )
    first = _text(pj.fix_first(_diag(hot, a2a), False)).split("\n")[0]
    assert first.startswith("Fix rank 9 first"), first
    # the same exposure mostly all-reduce: the larger optimization leads
    ar = dataclasses.replace(a2a, metrics={"allreduce_share": 0.9})
    first = _text(pj.fix_first(_diag(hot, ar), False)).split("\n")[0]
    assert not first.startswith("Fix rank 9 first"), first


def test_node_questions_place_the_top_cause_on_its_node() -> None:
    two = ((0, 1, 2, 3, 4, 5, 6, 7), (8, 9, 10, 11, 12, 13, 14, 15))
    d = _diag(HOST9, nodes=two)
    # rank 9 is on the second node: "node 1" (0-based, node 0 named) is yes, node 0 is no
    assert _text(pj.node_question(d, [1, 0], False, False, yes_no=True)).startswith(
        "Yes: node 1 (ranks 8-15) holds the top cause, host stall on rank 9: "
    )
    assert _text(pj.node_question(d, [0], False, False, yes_no=True)).startswith(
        "No: node 0 (ranks 0-7) is not where the problem is; the top cause is rank 9, on node 1"
    )
    # counted from 1 ("the first machine") is the node of ranks 0-7
    assert _text(pj.node_question(d, [1], True, True, yes_no=True)).startswith(
        "不是：第 1 台机器（0-7号卡）不是问题所在"
    )
    # a cause of the whole job: no node is slower, whichever is asked
    job = _text(pj.node_question(_diag(JOB, nodes=two), [1], False, False, yes_no=True))
    assert job.startswith("No: no node is slower than the others: the cause is the whole job")
    # no node layout in the data: a yes/no question gets "cannot tell", then why
    t = _text(pj.node_question(_diag(HOST9), [1], False, False, yes_no=True))
    assert t.startswith("Cannot tell: the profile does not show which ranks share a node")
    # "which node is slower?" (none named): the node of the top cause, 0-based as the causes say
    assert _text(pj.node_question(d, [], False, False)).startswith(
        "Node 1 (ranks 8-15) holds the top cause, host stall on rank 9: "
    )
    assert _text(pj.node_question(d, [], False, True)).startswith("节点 1（8-15号卡）上的问题最大")
    assert _text(pj.node_question(_diag(HOST9), [], False, False)).startswith(
        "The profile does not show which ranks share a node"
    )
    # on-node links join every rank: one node, nothing to compare
    one = dataclasses.replace(_diag(HOST9), one_node=True)
    assert _text(pj.node_question(one, [], False, False)).startswith(
        "Every rank is on one node (on-node links join them all)"
    )


def test_a_share_question_gets_the_causes_shares_before_its_gain() -> None:
    job = _diag(dataclasses.replace(JOB, gain_us=20_000.0, bound=BoundKind.UPPER_BOUND))
    t = _text(pj.how_much(job, False, share=True))
    assert t.startswith("Every rank idles 20 ms per step waiting for input. For the whole job, ")
    assert _text(pj.how_much(job, True, share=True)).startswith(
        "每张卡每步空闲 20 ms，等待输入。修复整个作业"
    )
    # "how much would I gain?" keeps the gain first: the amount, its share of the step, the bound
    assert _text(pj.how_much(job, False)).startswith(
        "Up to 20.0 ms per step (20.0% of the 100 ms average step, upper bound) is lost on every "
        "rank"
    )
    assert _text(pj.how_much(job, True)).startswith(
        "所有卡每步最多 20.0 ms（占平均步长 100 ms 的 20.0%，上限）"
    )


def test_other_ranks_question_judges_the_ranks_not_set_aside() -> None:
    # HOST9 blames rank 9 only: "apart from rank 9, are the others fine?" is a yes
    d = _diag(HOST9)
    assert _text(pj.other_ranks(d, [9], False)).startswith(
        "Yes: apart from rank 9, the ranks are fine by themselves; they only wait for it. Host"
    )
    assert _text(pj.other_ranks(d, [9], True)).startswith("是的，除了9号卡，其他卡自身都正常")
    # "are the others slow too?" (not the healthy way round): a no
    assert _text(pj.other_ranks(d, [9], False, healthy=False)).startswith("No: apart from rank 9")
    # set aside another rank: rank 9 is a cause besides it
    assert _text(pj.other_ranks(d, [3], False)).startswith(
        "No: besides rank 3, rank 9 is a cause too. Host stall on rank 9"
    )
    # a cause of the whole job: every rank loses time to it
    assert _text(pj.other_ranks(_diag(JOB), [3], False)).startswith(
        "No: every rank loses time to a cause of the whole job. Every rank idles"
    )


def test_a_vendor_bug_suspicion_is_contradicted_by_a_measured_cause() -> None:
    t = _text(pj.hypothesis(_diag(HOST9), "software_bug", False))
    assert t.startswith(
        "No: the cause is rank 9, not a software bug (CANN, the framework or the profiler)."
    )
    assert _text(pj.hypothesis(_diag(HOST9), "software_bug", True)).startswith(
        "不是软件缺陷（CANN、框架或 profiler），问题在9号卡。"
    )
    # nothing stands out: cannot tell, and what would decide
    t = _text(pj.hypothesis(_diag(NO_CULPRIT), "software_bug", False))
    assert t.startswith(
        "Cannot tell from this data whether it is a software bug (CANN, the framework or the profiler)."
    )
    assert "known-good CANN" in t


def test_a_ruled_out_cause_the_data_supports_opens_the_answer() -> None:
    from advisor_chat.diagnosis.hypotheses import judge

    d = _diag(dataclasses.replace(HOST9, symptom_tags=("host_bound",)))
    first = pj.overview(d, False).lines[0]
    # host dispatch is what the top cause is: ruled out by the user, still supported by the data
    assert judge(d, "host_dispatch").status == "supported"
    p = pj.ruled_out(pj.overview(d, False), d, ["host_dispatch"], False)
    assert p.lines[0].startswith(
        "Although you ruled it out, the data still points to host dispatch (a host-bound job). "
    )
    assert p.lines[1] == first
    # a ruled-out cause the data contradicts is confirmed after the first line
    assert judge(d, "software_bug").status == "contradicted"
    q = pj.ruled_out(pj.overview(d, True), d, ["software_bug"], True)
    assert q.lines[0] == pj.overview(d, True).lines[0]
    assert q.lines[1] == "数据也表明不是软件缺陷（CANN、框架或 profiler）。"


def test_which_rank_names_the_culprit_once_in_its_first_sentence() -> None:
    d = _diag(HOST9)
    en = _text(pj.which_culprit(d, False)).split("\n")[0]
    assert en.startswith("Rank 9 holds the job back — host stall: its device idles"), en
    assert en.lower().count("rank 9") == 1, en
    zh = _text(pj.which_culprit(d, True)).split("\n")[0]
    assert zh.startswith("拖慢作业的是9号卡（主机侧阻塞）：其设备"), zh
    assert zh.count("9号卡") == 1, zh


def test_a_suspect_no_rule_names_is_judged_against_the_causes_text() -> None:
    from advisor_chat.agent.planner import unknown_suspect

    assert unknown_suspect("is the optimizer the problem?") == "optimizer"
    assert unknown_suspect("is it the loss function?") == "loss function"
    assert unknown_suspect("是不是日志的问题？") == "日志"
    assert unknown_suspect("是不是优化器那块的问题？") == "优化器"
    assert unknown_suspect("is this the problem?") == ""
    assert unknown_suspect("is there a performance problem?") == ""
    # "a X issue", "could the X be slow?", "是不是X那一步太慢": the suspect, not a bare "yes"
    assert unknown_suspect("is this a power capping issue?") == "power capping"
    assert unknown_suspect("could the tokenizer be slow?") == "tokenizer"
    assert unknown_suspect("是不是优化器那一步太慢？") == "优化器"
    # the subject of the question is not a suspect
    assert unknown_suspect("is the job slow?") == ""
    assert unknown_suspect("是不是训练太慢？") == ""
    d = _diag(HOST9)
    no = _text(pj.unknown_suspect(d, "tokenizer", False))
    assert no.startswith("No sign of the tokenizer in this data: the measured time goes to")
    assert "rank 9" in no
    # named by the top cause (its summary): the data fits
    yes = _text(pj.unknown_suspect(d, "host", False))
    assert yes.startswith("Yes, that fits what the data shows. Host stall on rank 9")
    assert _text(pj.unknown_suspect(d, "日志", True)).startswith("没有迹象表明是日志的问题")


def test_how_much_names_the_amount_its_share_and_the_culprit_in_role() -> None:
    """ "How much are we losing, and to what?": the first sentence holds all three."""
    d = _diag(HOST9)
    first = _text(pj.how_much(d, False)).split(". ")[0]
    share = 7_400.0 / STEP_US
    assert first.startswith(f"About 7.4 ms per step ({share:.1%} of the")
    assert "rank 9, whose device idles waiting for its host" in first
    zh_first = _text(pj.how_much(d, True)).split("。")[0]
    assert zh_first.startswith("每步约 7.4 ms") and "等主机下发的9号卡" in zh_first
    # the step the fix leaves: the median step minus the gain
    assert pj.us(STEP_US - 7_400.0) in _text(pj.how_much(d, False))


@pytest.mark.parametrize("zh", [False, True])
def test_where_does_the_time_go_gives_the_shares_right_after_the_cause(zh: bool) -> None:
    d = _diag(HOST9)
    p = pj.category(d, ("category",), False, zh, breakdown_first=True)
    assert p.lines[1] == pj.shares_line(d, zh)
    assert ("rank 9" if not zh else "9号卡") in p.lines[0]
