"""Unit tests of the deterministic eval evaluators on hand-made Answers (true by construction)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_chat.agent.answer import (
    Answer,
    CitedCase,
    CitedFinding,
    Grounding,
    ToolCallRecord,
)
from advisor_chat.errors import InputError
from advisor_chat.evals.dataset import load_dataset
from advisor_chat.evals.evaluators import (
    ExpectedNumber,
    Resolved,
    check_cases,
    check_category,
    check_forbidden_text,
    check_grounding,
    check_language,
    check_link,
    check_numbers,
    check_op,
    check_ranks,
    check_refusal,
    check_tools,
    check_verdict,
    evaluate_turn,
    is_refusal,
    numbers_in_text,
    ranks_in_text,
)


def _answer(text: str, **kw: object) -> Answer:
    return Answer(answer=text, **kw)  # type: ignore[arg-type]


# -- text extraction -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Rank 12 is the slow rank.", {12}),
        ("ranks 3, 5 and 7 wait longest", {3, 5, 7}),
        ("ranks 8-15 sit in the second stage", set(range(8, 16))),
        ("ranks 8–11", {8, 9, 10, 11}),
        ("12号卡是慢卡", {12}),
        ("慢卡是卡 3 和卡 4", {3, 4}),
        ("rank12 has Free 9.4 ms", {12}),
        ("第 13 号卡", {13}),
        ("no rank here, just 12 ms", set()),
    ],
)
def test_ranks_in_text(text: str, expected: set[int]) -> None:
    assert ranks_in_text(text) == expected


def test_numbers_in_text_reads_numbers_next_to_chinese_but_not_inside_identifiers() -> None:
    got = [
        n.value for n in numbers_in_text("每步共16次，每个反向4次；r12 与 hcom_allReduce__210 不算")
    ]
    assert got == [16.0, 4.0]


def test_numbers_in_text_keeps_precision_and_separators() -> None:
    nums = numbers_in_text("Free 1,234.5 us, share 12%, delta −3.25 ms, 2e3 ops")
    assert [(n.value, n.decimals) for n in nums] == [
        (1234.5, 1),
        (12.0, 0),
        (-3.25, 2),
        (2000.0, 0),
    ]


# -- individual checks ------------------------------------------------------------------------------


def test_ranks_from_text_or_findings() -> None:
    a = _answer(
        "Rank 12 is slow.",
        findings=[
            CitedFinding(
                id="slow_rank.x", kind="slow_rank", severity="high", summary="", ranks=[13]
            )
        ],
    )
    assert check_ranks(a, [12, 13]).passed
    c = check_ranks(a, [12, 14])
    assert not c.passed and c.hits == 1 and c.total == 2 and "14" in c.detail


@pytest.mark.parametrize(
    ("text", "cat", "ok"),
    [
        ("The bottleneck is host-bound dispatch: Free is 30% of the step.", "scheduling", True),
        ("瓶颈在下发：Free 占比 30%", "scheduling", True),
        ("Communication (Not Overlapped) dominates the step.", "communication", True),
        ("通信未被掩盖", "communication", True),
        ("Computing on rank 3 is 20% longer.", "compute", True),
        ("All ranks are balanced; no bottleneck stands out.", "none", True),
        ("Communication dominates.", "compute", False),
        ("Rank 3 computes longer.", "none", False),
    ],
)
def test_category(text: str, cat: str, ok: bool) -> None:
    assert check_category(_answer(text), cat).passed is ok


def test_link_pair_and_transport() -> None:
    link = {"src_rank": 3, "dst_rank": 11, "transport": "RDMA"}
    assert check_link(_answer("The link rank 3 → rank 11 (RDMA) runs at 4.1 GB/s."), link).passed
    assert check_link(_answer("链路 11-3 的 RDMA 带宽只有 4.1 GB/s"), link).passed
    assert not check_link(_answer("rank 3 → rank 11 is slow"), link).passed  # transport missing
    assert not check_link(_answer("RDMA link 3 → 12 is slow; rank 11 is fine"), link).passed
    structured = _answer(
        "One RDMA link is slow.",
        findings=[
            CitedFinding(
                id="slow_link.a", kind="slow_link", severity="high", summary="", ranks=[3, 11]
            )
        ],
    )
    assert check_link(structured, link).passed


def test_op_name_and_shape_dims() -> None:
    op = {"op_type": "MatMulV2", "name": "aclnnMatmul_1", "input_shapes": "4096,5120;5120,1712"}
    assert check_op(_answer("MatMulV2 at input shape [4096, 5120] is 2.1x slower"), op).passed
    assert not check_op(_answer("MatMulV2 is slower"), op).passed  # shape not named
    assert not check_op(_answer("An op at 4096 x 5120 is slower"), op).passed  # op not named
    quoted = {"op_type": "MatMul", "input_shapes": '"8,1024;1024,4096"'}
    assert check_op(_answer("MatMul (8, 1024) regressed"), quoted).passed


def test_verdict_synonyms_and_words() -> None:
    assert check_verdict(
        _answer("After the upgrade the step is slower (regression)."), "regression"
    ).passed
    assert check_verdict(_answer("升级后变慢了"), "regression").passed
    assert not check_verdict(_answer("The step got faster"), "regression").passed
    compound = "hccl_ops_doubled_comm_share_up"
    en = "After the upgrade HCCL operators per step went from 24 to 48 (2.0x) and the communication share rose to 41%."
    assert check_verdict(_answer(en), compound).passed
    zh = "升级后每个 step 的 HCCL 算子数翻倍（24 → 48），通信占比上升到 41%。"
    assert check_verdict(_answer(zh), compound).passed
    half = "After the upgrade HCCL operators doubled."  # the communication share is not stated
    assert not check_verdict(_answer(half), compound).passed
    assert check_verdict(_answer("Rank 13 is not slow: it waits for rank 12."), "not_slow").passed
    assert check_verdict(_answer("13号卡不是慢卡"), "not_slow").passed
    assert not check_verdict(_answer("Rank 13 is slow."), "not_slow").passed


def test_forbidden_text() -> None:
    pat = [r"\brank 13 is (?:the |a )?slow"]
    assert not check_forbidden_text(
        _answer("Rank 13 is slow mainly because of communication."), pat
    ).passed
    assert check_forbidden_text(_answer("Rank 13 is not slow."), pat).passed


def test_cases_recall_and_relevant_count() -> None:
    a = _answer(
        "see cases",
        cases=[
            CitedCase(id="rank12-free-16card", title="", source=""),
            CitedCase(id="host-dispatch-bound", title="", source=""),
            CitedCase(id="pipeline-bubbles", title="", source=""),
        ],
    )
    c, relevant = check_cases(a, ["rank12-free-16card"], ["host-dispatch-bound"])
    assert c.passed and relevant == 2
    c2, _ = check_cases(a, ["rank12-free-16card", "expandable-segments-allocator"], [])
    assert not c2.passed and c2.hits == 1 and c2.total == 2


def test_numbers_with_units_and_rounding() -> None:
    stated = _answer("Rank 12's Free is 9.4 ms longer (31% of the step); bandwidth 4.12 GB/s.")
    assert check_numbers(stated, [ExpectedNumber("free_gap_us", 9430.0)]).passed  # us said in ms
    assert check_numbers(
        stated, [ExpectedNumber("free_share_ratio", 0.309)]
    ).passed  # ratio said as %
    assert check_numbers(stated, [ExpectedNumber("link_bandwidth_gbps", 4.1)]).passed
    c = check_numbers(stated, [ExpectedNumber("free_gap_ms", 12.0), ExpectedNumber("x_gbps", 4.12)])
    assert not c.passed and c.hits == 1
    # a metric of a cited finding counts too (exact, within rel_tol)
    f = CitedFinding(id="a", kind="k", severity="high", summary="", metrics={"free_us": 9431.0})
    assert check_numbers(
        _answer("see the finding", findings=[f]), [ExpectedNumber("free_us", 9430.0)]
    ).passed


def test_tools_called_without_error() -> None:
    a = _answer(
        "x",
        tool_calls=[
            ToolCallRecord(name="explain_rank", args={"rank": 12}),
            ToolCallRecord(name="slow_link", error="no communication data"),
        ],
    )
    assert check_tools(a, ["explain_rank"]).passed
    assert not check_tools(a, ["explain_rank", "slow_link"]).passed


def test_refusal_requires_naming_the_data() -> None:
    good = _answer(
        "Not enough signal: this profile has no communication data. Collect with profiler Level1 so "
        "communication.json is written."
    )
    assert is_refusal(good)
    assert check_refusal(good, [["communication.json", "communication data"]]).passed
    vague = _answer("Not enough signal to answer.")
    assert not check_refusal(vague, [["communication.json", "communication data"]]).passed
    zh = _answer(
        "信号不足：该数据没有通信数据（communication.json），请用 Level1 采集。", language="zh"
    )
    assert check_refusal(zh, [["communication.json", "通信数据"]]).passed
    confident = _answer("Rank 3 → rank 4 over RDMA is the slow link.")
    assert not is_refusal(confident)
    assert not check_refusal(confident, []).passed


def test_grounding_and_language() -> None:
    a = _answer("x", grounding=Grounding(numbers_total=5, numbers_grounded=4, ungrounded=["7.7"]))
    assert not check_grounding(a, 0).passed
    assert check_grounding(a, 1).passed
    assert check_language(_answer("慢卡是 12 号卡", language="zh"), "zh").passed
    assert not check_language(_answer("rank 12", language="zh"), "zh").passed  # no Chinese text
    assert not check_language(_answer("rank 12", language="en"), "zh").passed


def test_evaluate_turn_all_checks() -> None:
    answer = _answer(
        "Rank 12 is host-bound: its Free is 9.4 ms above the median. See rank12-free-16card.",
        language="en",
        cases=[CitedCase(id="rank12-free-16card", title="", source="")],
        tool_calls=[ToolCallRecord(name="explain_rank", args={"rank": 12})],
        grounding=Grounding(numbers_total=2, numbers_grounded=2),
    )
    exp = Resolved(
        lang="en",
        ranks=[12],
        category="scheduling",
        cases=["rank12-free-16card"],
        numbers=[ExpectedNumber("free_gap_us", 9400.0)],
        tools=["explain_rank"],
    )
    score = evaluate_turn(answer, exp)
    assert score.passed, [c.detail for c in score.failed()]
    assert {c.name for c in score.checks} == {
        "language",
        "ranks",
        "category",
        "cases",
        "numbers",
        "tools",
        "grounding",
    }
    wrong = evaluate_turn(answer, Resolved(lang="en", ranks=[13], category="communication"))
    assert {c.name for c in wrong.failed()} == {"ranks", "category"}


# -- dataset loading ---------------------------------------------------------------------------------


def test_dataset_schema_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- id: a\n  lang: en\n  question: hi\n", encoding="utf-8")  # no source
    with pytest.raises(InputError, match="scenario"):
        load_dataset(bad)
    dup = tmp_path / "dup.yaml"
    dup.write_text(
        "- {id: a, lang: en, scenario: healthy, question: hi}\n- {id: a, lang: zh, scenario: healthy, question: 你好}\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="duplicate"):
        load_dataset(dup)
    with pytest.raises(InputError, match="not found"):
        load_dataset(tmp_path / "missing.yaml")


def test_repository_dataset_is_valid_and_balanced() -> None:
    items = load_dataset()
    turns = [(i, t) for i in items for t in i.turns]
    assert len(turns) >= 64
    zh = sum(1 for i, _ in turns if i.lang == "zh")
    assert abs(zh - len(turns) / 2) <= len(turns) * 0.1, (zh, len(turns))
    assert sum(1 for i in items if len(i.turns) > 1) >= 6  # follow-ups
    assert sum(1 for _, t in turns if t.expect.expect_refusal) >= 8
    assert any(i.real for i in items)


def test_verdict_doubled_accepts_about_two_x() -> None:
    text = (
        "HCCL operators per rank-step went from 10.0 to 22.0 (2.20x); communication share +12.5%."
    )
    assert check_verdict(_answer(text), "hccl_ops_doubled_comm_share_up").passed
    assert not check_verdict(
        _answer(text.replace("2.20x", "3.10x")), "hccl_ops_doubled_comm_share_up"
    ).passed
