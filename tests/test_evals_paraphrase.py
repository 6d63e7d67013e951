"""The root-cause checks of the paraphrase set: each passes on a right answer and fails on a wrong one.

Answers are hand-made (true by construction), in English and Chinese, in several phrasings, so the
checks are shown to judge meaning and not one planner wording. Also: the paraphrase files load, the
held-out draw is the recorded seeded draw, and the runner reports a missing scenario as a failure.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor_chat.agent.answer import Answer, Suggestion
from advisor_chat.evals.dataset import (
    EvalItem,
    default_dataset_dir,
    draw_splits,
    load_dataset,
    select_items,
)
from advisor_chat.evals.evaluators import (
    Resolved,
    blamed_ranks,
    check_consistency,
    check_culprit,
    check_excluded,
    check_first_sentence,
    check_language_strict,
    check_mechanism,
    check_victims,
    check_yes_no,
    evaluate_turn,
    first_sentence,
    steps_in_text,
)


def _a(text: str, lang: str = "en", **kw: Any) -> Answer:
    return Answer(answer=text, language=lang, **kw)  # type: ignore[arg-type]


LINK_RC = {
    "mechanism": "slow_link",
    "category": "communication",
    "culprit_kind": "link",
    "culprit_ranks": [],
    "culprit_link": [3, 11],
    "culprit_transport": "RDMA",
    "victim_ranks": [0, 1, 2, 4, 5],
}
STAGE_RC = {
    "mechanism": "pipeline_imbalance",
    "culprit_kind": "stage",
    "culprit_stage": 0,
    "culprit_ranks": list(range(8)),
}
GROUP_RC = {
    "mechanism": "slow_group",
    "culprit_kind": "group",
    "culprit_ranks": list(range(8)),
    "operator": "MatMulV2",
    "shape": "4096,5120;5120,5120",
}
RANK_RC = {"mechanism": "host_stall", "culprit_kind": "rank", "culprit_ranks": [12]}
EVENTS_RC = {
    "mechanism": "step_events",
    "culprit_kind": "steps",
    "events": [[10, 3], [11, 7], [13, 1]],
}
JOB_RC = {"mechanism": "job_idle", "culprit_kind": "job", "culprit_ranks": []}
NONE_RC = {"mechanism": "no_culprit", "culprit_kind": "none", "culprit_ranks": []}
SMALL_RC = {"mechanism": "not_enough_signal", "culprit_kind": "none", "culprit_ranks": []}


# -- culprit named ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rc", "good", "bad"),
    [
        (
            LINK_RC,
            "Rank 3 is on the slow link 3→11 (RDMA): 4.0 GB/s against 20 GB/s on its peers.",
            "Rank 3 arrives last; the RDMA fabric looks busy.",
        ),
        (
            LINK_RC,
            "3号卡处在慢链路 3 → 11（RDMA）上，带宽只有同类链路的两成。",
            "3号卡通信等待较长，建议检查 RDMA 配置。",
        ),
        (
            STAGE_RC,
            "Rank 12 waits 180 ms per step for stage 0 (ranks 0–7), which is communication-bound.",
            "Rank 12 has a large Bubble; look for a slow rank.",
        ),
        (
            STAGE_RC,
            "12号卡每步等待流水线阶段0（0-7号卡）约180 ms，该阶段以通信为主。",
            "12号卡的空泡很大，建议排查慢卡。",
        ),
        (
            STAGE_RC,
            "The first stage is the bottleneck; the second stage only waits for it.",
            "Stage 1 is the bottleneck.",
        ),
        (
            GROUP_RC,
            "Ranks 0-7 (node 0) run MatMulV2 with shape 4096,5120 1.4x slower; ranks 8-15 wait.",
            "Ranks 0-7 are slower than ranks 8-15 (a communication problem).",
        ),
        (
            GROUP_RC,
            "0~7号卡的 MatMulV2（输入 4096×5120）慢了1.4倍，8-15号卡在等它们。",
            "MatMulV2 的 4096×5120 形状变慢了。",
        ),
        (RANK_RC, "Rank 12 is host-bound: its device idles 9.4 ms per step.", "Rank 13 is slow."),
        (RANK_RC, "慢卡是12号卡，Free 偏高。", "慢卡是13号卡。"),
        (
            EVENTS_RC,
            "No rank is slow on average: one-step stalls hit rank 3 in step 10, rank 7 in step 11 "
            "and rank 1 in step 13.",
            "Ranks 3, 7 and 1 are slow ranks (+110 ms per step).",
        ),
        (
            EVENTS_RC,
            "单步卡顿轮流出现：第10步3号卡、第11步7号卡、第13步1号卡。",
            "3、7、1号卡是慢卡。",
        ),
        (
            JOB_RC,
            "Every rank idles 120 ms per step waiting for input; no rank is slower than another.",
            "Rank 5 idles the most: it is the slow rank.",
        ),
        (
            JOB_RC,
            "所有卡每步都空闲约120 ms，在等输入数据，这是作业级的问题。",
            "5号卡空闲最多，是慢卡。",
        ),
        (
            NONE_RC,
            "No rank stands out: spreads are within noise and Computing dominates every rank.",
            "Rank 2 is slightly slow.",
        ),
        (NONE_RC, "没有明显的慢卡，各卡均衡，计算占主导。", "2号卡最慢。"),
        (
            SMALL_RC,
            "Not enough signal: two ranks cannot tell a slow rank from noise; profile more ranks.",
            "Rank 1 is the slow rank.",
        ),
        (SMALL_RC, "信号不足：只有两张卡，无法判断慢卡，需要更多卡的数据。", "1号卡是慢卡。"),
    ],
)
def test_culprit_passes_and_fails(rc: dict[str, Any], good: str, bad: str) -> None:
    lang = "zh" if any("\u4e00" <= c <= "\u9fff" for c in good) else "en"
    assert check_culprit(_a(good, lang), rc).passed, check_culprit(_a(good, lang), rc).detail
    assert not check_culprit(_a(bad, lang), rc).passed


def test_culprit_fails_when_the_culprit_is_cleared() -> None:
    text = "Rank 12 is not slow. Rank 12 has the most Free time."
    c = check_culprit(_a(text), RANK_RC)
    assert not c.passed and "called not slow" in c.detail
    link = "Rank 3 is not slow; link 3→11 (RDMA) runs at 4 GB/s."
    assert not check_culprit(_a(link), LINK_RC).passed


def test_culprit_rank_must_be_named_as_the_cause() -> None:
    echo = "Rank 12 loses 10 ms per step for a reason common to the whole job: communication is exposed."
    assert not check_culprit(_a(echo), RANK_RC).passed
    for text in (
        "Fix rank 12 first: remove the host-side stall on rank 12.",
        "拖慢作业的是12号卡：其设备空闲时间每步多 7.4 ms。",
        "12号卡主机侧阻塞：设备在等主机。",
    ):
        assert check_culprit(_a(text), RANK_RC).passed, text


def test_culprit_reads_the_shown_text_not_the_findings_data() -> None:
    from advisor_chat.agent.answer import CitedFinding

    f = CitedFinding(id="f", kind="slow_rank", severity="high", summary="rank 12", ranks=[12])
    assert not check_culprit(_a("Something is slow.", findings=[f]), RANK_RC).passed
    s = Suggestion(text="Rank 12: bind CPU cores for its dataloader workers.")
    assert check_culprit(_a("See the suggestion.", suggestions=[s]), RANK_RC).passed


# -- victims not blamed -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Rank 12 waits for stage 0 (ranks 0-7); it is not slow itself.",
        "Rank 12 is slowed down by rank 3, which arrives last.",
        "12号卡被0-7号卡拖慢了，它本身不慢。",
        "12号卡慢是因为在等待流水线阶段0。",
        "Rank 12 loses 180 ms per step in Bubble.",
        "Rank 12 was the straggler in step 10 only (a one-step stall).",
        "Fix 12 one-step events first: freeze the GC.",
        "在第10步，12号卡最慢（单步卡顿）。",
    ],
)
def test_victims_not_blamed_passes(text: str) -> None:
    assert check_victims(_a(text), [8, 12, 15]).passed


@pytest.mark.parametrize(
    "text",
    [
        "Rank 12 is the slow rank.",
        "The straggler is rank 12.",
        "Ranks 8-15 are slow.",
        "rank 12 is clearly the bottleneck",
        "Rank 12 is holding the job back.",
        "The other ranks wait for rank 12.",
        "12号卡是慢卡。",
        "慢卡是12号卡",
        "8-15号卡最慢",
        "其他卡都在等12号卡",
        "7号卡在集合通信中等待每步 30 ms，等的是12号卡。",
        "Rank 7 waits 16 ms per step at the collectives for rank 12.",
        "Slower group ranks 8, 12-15: these ranks idle 108 ms more per step.",
    ],
)
def test_victims_blamed_fails(text: str) -> None:
    c = check_victims(_a(text), [8, 12, 15])
    assert not c.passed, text


def test_blamed_ranks_ignores_negations() -> None:
    assert blamed_ranks("Rank 12 is not the slow rank; the slow rank is 3.") == {3}
    assert blamed_ranks("12号卡不慢，慢卡是3号卡。") == {3}
    assert blamed_ranks("the cause is not rank 15") == set()
    assert blamed_ranks("the cause of rank 3's wait is elsewhere") == set()


def test_the_cause_is_rank_n_blames_rank_n() -> None:
    # a verdict on a suspect ("rank 15's card bad?") that names the rank as the cause
    assert blamed_ranks("No: the cause is rank 15, not a bad card (NPU).") == {15}
    # "... is the cause: <explanation>": the ranks after the colon are not the subject
    assert (
        blamed_ranks("No: neither rank 0 nor rank 15 is the cause: ranks 0, 15 sit idle") == set()
    )


@pytest.mark.parametrize(
    "text",
    [
        "Not enough signal to tell whether rank 0 or rank 1 is slower: with 2 ranks there is no "
        "peer median.",
        "Neither rank 0 nor rank 15 is the cause: every rank idles.",
        "无法判断是0号卡还是1号卡更慢：只有 2 张卡。",
    ],
)
def test_blamed_ranks_ignores_open_questions_and_neither(text: str) -> None:
    assert blamed_ranks(text) == set()
    # the same sentence with a plain claim after it still blames
    assert blamed_ranks(text + " Rank 7 is the slow rank.") == {7}


# -- no contradiction -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Rank 3 is not slow … it arrives last and the other ranks wait for it.",
        "Rank 3 is not slow. Rank 3 is the straggler.",
        "Every rank waits for it (ranks 3 and 11 are on the slow link, not slow themselves).",
        "3号卡和11号卡位于这条慢链路上，本身并不慢。",
        "Rank 3 is on the slow link 3→11. Rank 3 is not slow.",
        "3号卡不慢。其他卡都在等它。",
        "3号卡不慢，但3号卡是慢卡。",
        "3号卡在慢链路上；3号卡并不慢。",
    ],
)
def test_contradiction_fails(text: str) -> None:
    assert not check_consistency(_a(text)).passed, text


@pytest.mark.parametrize(
    "text",
    [
        "Rank 3 is on the slow link 3→11 (RDMA); the other ranks wait for it.",
        "Rank 5 is not slow: it waits for rank 3, which arrives last.",
        "5号卡不慢，它在等3号卡；3号卡最后到达。",
        "Rank 12 is the slow rank.",
        "Host stall of 2500 ms on rank 5 in step 10; the others wait for it, and rank 5 is not slow in "
        "the other steps.",
        "10号卡在第10步停顿，其他卡在等它；10号卡在其他步并不慢。",
    ],
)
def test_contradiction_passes(text: str) -> None:
    assert check_consistency(_a(text)).passed, text


# -- first sentence answers ---------------------------------------------------------------------------


def test_first_sentence_names_the_culprit() -> None:
    good = _a("**Rank 12** is host-bound: Free 9.4 ms per step. The others wait for it.")
    late = _a("Communication dominates every rank (52%). The slow rank is rank 12.")
    assert first_sentence(good.answer).startswith("Rank 12 is host-bound")
    assert check_first_sentence(good, "culprit", RANK_RC).passed
    assert not check_first_sentence(late, "culprit", RANK_RC).passed
    zh_good = _a("12号卡是慢卡：每步空闲9.4 ms。其他卡在等它。", "zh")
    zh_late = _a("各卡通信占比都很高。慢卡是12号卡。", "zh")
    assert check_first_sentence(zh_good, "culprit", RANK_RC).passed
    assert not check_first_sentence(zh_late, "culprit", RANK_RC).passed


def test_first_sentence_refusal_and_none() -> None:
    assert check_first_sentence(
        _a("Not enough signal to name a slow rank."), "refusal", None
    ).passed
    assert not check_first_sentence(
        _a("Rank 1 is slower by 2%. Not enough signal though."), "refusal", None
    ).passed
    assert check_first_sentence(_a("没有明显的慢卡。计算占主导。", "zh"), "none", None).passed
    assert not check_first_sentence(_a("计算占主导。没有慢卡。", "zh"), "none", None).passed


@pytest.mark.parametrize(
    ("text", "verdict", "ok"),
    [
        ("Yes: link 3→11 (RDMA) runs at 30% of its peers.", "yes", True),
        ("是的，链路 3→11 带宽只有同类的三成。", "yes", True),
        ("No, the network is fine; rank 12 is host-bound.", "yes", False),
        ("No — no link is slow; rank 12 is host-bound.", "no", True),
        ("不是网络问题：12号卡是 host 侧下发瓶颈。", "no", True),
        ("The network is the problem: link 3→11 is slow.", "no", False),
        ("是网络问题。", "no", False),
        ("Rank 12 is host-bound. The network is not the problem.", "no", False),
        ("不需要：这份数据没有指向 HCCL_BUFFSIZE 的证据。", "no", True),
        ("需要：证据指向调大 HCCL_BUFFSIZE。", "no", False),
    ],
)
def test_yes_no(text: str, verdict: str, ok: bool) -> None:
    lang = "zh" if any("\u4e00" <= c <= "\u9fff" for c in text) else "en"
    assert check_yes_no(_a(text, lang), verdict).passed is ok


# -- mechanism, excluded steps, language -----------------------------------------------------------


def test_mechanism() -> None:
    assert check_mechanism(
        _a("Many small collectives are exposed (not overlapped)."), "exposed_communication"
    ).passed
    assert check_mechanism(_a("大量小包通信没有被计算掩盖。", "zh"), "exposed_communication").passed
    assert not check_mechanism(_a("Rank 3 is slow."), "exposed_communication").passed
    assert check_mechanism(_a("单步卡顿轮流出现在不同的卡上。", "zh"), "step_events").passed
    assert not check_mechanism(_a("3号卡是慢卡。", "zh"), "step_events").passed


def test_steps_in_text() -> None:
    assert steps_in_text("stalls in step 10 and steps 12, 13; 第15步; (16, 3)") == {
        10,
        12,
        13,
        15,
        16,
    }


def test_excluded_steps() -> None:
    ok = _a("Step 10 is excluded: its device records are incomplete (fewer kernels).")
    ok_zh = _a("第10步的设备侧数据不完整，已剔除，不算变慢。", "zh")
    not_named = _a("One step is incomplete and was excluded.")
    slow = _a("Step 10 is the slowest step; its records look incomplete.")
    slow_zh = _a("第10步最慢，数据有缺失。", "zh")
    assert check_excluded(ok, [10]).passed
    assert check_excluded(ok_zh, [10]).passed
    assert not check_excluded(not_named, [10]).passed
    assert not check_excluded(slow, [10]).passed
    assert not check_excluded(slow_zh, [10]).passed


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("12号卡的 Communication (Not Overlapped) 占比 52%，建议设置 HCCL_BUFFSIZE。", True),
        ("12号卡的 Free 为 9.4 ms，见 `step_trace_time.csv` 与 trace_view.json。", True),
        ("链路 3→11（RDMA）带宽 4 GB/s，MatMulV2 形状 4096,5120。", True),
        ("12号卡不是慢卡，not enough signal。", False),
        ("结论：rank 12 is not slow，它在等。", False),
        ("无法回答：cannot access local variable 'c'。", False),
        ("建议调大 micro-batch 与 batch size，检查 DDP bucket、virtual pipeline。", True),
        ("Rank 12 is slow.", False),  # no Chinese at all
    ],
)
def test_language_strict(text: str, ok: bool) -> None:
    assert check_language_strict(_a(text, "zh"), "zh").passed is ok


def test_evaluate_turn_runs_the_new_checks() -> None:
    exp = Resolved(
        lang="en",
        culprit=RANK_RC,
        victims=[3],
        mechanism="host_stall",
        consistent=True,
        first_sentence="culprit",
        yes_no="no",
        strict_language=True,
    )
    s = evaluate_turn(
        _a("No: rank 12 is host-bound (Free 9.4 ms per step); rank 3 waits for it."), exp
    )
    names = {c.name for c in s.checks}
    assert {"culprit", "victims", "mechanism", "consistency", "first_sentence", "yes_no"} <= names
    assert s.passed, [c.detail for c in s.failed()]
    bad = evaluate_turn(_a("Yes, rank 3 is slow."), exp)
    assert {c.name for c in bad.failed()} >= {"culprit", "victims", "first_sentence", "yes_no"}


# -- the dataset and its split ----------------------------------------------------------------------


def _paraphrase_files() -> list[Path]:
    d = default_dataset_dir()
    assert d is not None
    return sorted(d.glob("paraphrase_*.yaml"))


def test_paraphrase_set_size_languages_scenarios() -> None:
    items = load_dataset("paraphrase")
    turns = [(i, t) for i in items for t in i.turns]
    assert len(turns) >= 200
    langs = Counter(i.lang for i, _ in turns)
    assert langs["zh"] >= len(turns) / 2 - 2
    sources = {i.source for i in items}
    for s in (
        "slow-link",
        "pipeline-stage-imbalance",
        "rotating-stalls",
        "end-of-step-stall",
        "slow-group-shape",
        "compute-straggler-hidden",
        "host-bound-last-arriver",
        "job-idle",
        "small-collectives",
        "lost-first-step",
        "healthy",
        "two-ranks",
        "real:cluster-16rank-pp2",
    ):
        assert s in sources, s
    assert all(i.split in ("tune", "heldout") for i in items)
    # not part of the default run (the 70-question set keeps its size)
    assert not any(i.dataset.startswith("paraphrase") for i in load_dataset())


def test_heldout_is_the_recorded_seeded_draw() -> None:
    total = held = 0
    for f in _paraphrase_files():
        raw = yaml.safe_load(f.read_text(encoding="utf-8"))
        assert "HELD-OUT ITEMS" in f.read_text(encoding="utf-8").split("\nsplit_seed:")[0]
        items = load_dataset(f)
        want = draw_splits(items, int(raw["split_seed"]), 0.4)
        got = {i.id: i.split for i in items}
        assert got == want, f.name
        total += len(items)
        held += sum(1 for v in got.values() if v == "heldout")
    assert 0.35 <= held / total <= 0.45


def test_draw_is_stratified_and_seeded() -> None:
    items = [
        EvalItem.model_validate(
            {"id": f"{s}-{lang}-{k}", "lang": lang, "scenario": s, "question": "q"}
        )
        for s in ("a", "b")
        for lang in ("en", "zh")
        for k in range(5)
    ]
    d1, d2, d3 = draw_splits(items, 1), draw_splits(items, 1), draw_splits(items, 2)
    assert d1 == d2 and d1 != d3
    for s in ("a", "b"):
        for lang in ("en", "zh"):
            assert sum(d1[f"{s}-{lang}-{k}"] == "heldout" for k in range(5)) == 2
    tagged = [i.model_copy(update={"split": d1[i.id]}) for i in items]
    assert len(select_items(tagged, split="heldout")) == 8
    assert len(select_items(tagged, split="tune", scenario=["a"])) == 6


def test_missing_scenario_is_a_failure_not_a_skip(tmp_path: Path) -> None:
    from advisor_chat.config import load_settings
    from advisor_chat.evals.runner import run_eval

    item = EvalItem.model_validate(
        {
            "id": "x",
            "lang": "en",
            "scenario": "no-such-scenario",
            "question": "why?",
            "split": "tune",
        }
    )
    rep = run_eval(
        [item], settings=load_settings(model="offline", home=tmp_path), real_root=tmp_path
    )
    (t,) = rep.turns
    assert t.error_kind == "unavailable" and "scenario not available" in (t.error or "")
    assert not t.passed and rep.pass_rate == 0.0 and t in rep.failures
    d = rep.to_dict()
    assert d["by_split"]["tune"]["turns"] == 1 and "no-such-scenario" in d["by_scenario"]
    assert "## By split" in rep.to_markdown()


def test_tools_alternatives() -> None:
    from advisor_chat.agent.answer import ToolCallRecord
    from advisor_chat.evals.evaluators import check_tools

    a = _a("x", tool_calls=[ToolCallRecord(name="diagnose")])
    assert check_tools(a, ["explain_rank|diagnose"]).passed
    assert not check_tools(a, ["explain_rank"]).passed
    assert not check_tools(_a("x"), ["explain_rank|diagnose"]).passed
