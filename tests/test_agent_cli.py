"""``advisor-chat ask`` / ``chat`` / ``tools list`` through the typer app."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor_chat.cli.main import app

runner = CliRunner()


def test_tools_list_json_and_table() -> None:
    res = runner.invoke(app, ["tools", "list", "--json"])
    assert res.exit_code == 0, res.output
    specs = json.loads(res.stdout)
    names = [s["name"] for s in specs]
    assert names[-2:] == ["search_cases", "show_table"]
    assert {"explain_rank", "slow_rank", "cluster_breakdown"} <= set(names)
    table = runner.invoke(app, ["tools", "list"])
    assert table.exit_code == 0 and "explain_rank" in table.stdout and "rank*" in table.stdout


def test_unknown_model_is_a_config_error(tmp_path) -> None:
    res = runner.invoke(app, ["ask", str(tmp_path / "missing"), "why?", "--model", "llama3"])
    assert res.exit_code in (
        2,
        3,
    )  # missing path (input) or unknown model (config), never a traceback
    assert "Traceback" not in res.output


@pytest.mark.slow
def test_ask_json_shape_and_rich_output(scenario) -> None:
    path = scenario("seed-rank12")
    res = runner.invoke(app, ["ask", str(path), "why is rank 12 slow?", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert {
        "answer",
        "language",
        "findings",
        "cases",
        "suggestions",
        "grounding",
        "tool_calls",
    } <= set(data)
    assert data["language"] == "en" and data["intent"] == "explain_rank"
    assert set(data["grounding"]) == {"numbers_total", "numbers_grounded", "ungrounded"}
    assert data["grounding"]["ungrounded"] == []
    assert all(set(c) >= {"id", "title", "source"} for c in data["cases"])
    assert data["tool_calls"][0]["name"] == "diagnose"  # the diagnosis is always the first result
    assert data["answer"].startswith("Rank 12 is slow in its own right")
    assert data["suggestions"][0]["kind"] == "action" and data["suggestions"][0]["cause_id"]
    rich = runner.invoke(app, ["ask", str(path), "为什么99号卡慢？", "--tools"])
    assert rich.exit_code == 0, rich.output
    assert "99号卡（rank 99）不存在；现有的卡为 0-15" in rich.stdout
    # a refusal states no measured number: no grounding footer; the footer is in Chinese
    assert "grounding" not in rich.stdout and "数据核对" not in rich.stdout
    assert re.search(r"（后端：离线，规划器，\d+\.\d\d 秒）", rich.stdout), rich.stdout
    schemas = json.loads(runner.invoke(app, ["tools", "list", str(path), "--json"]).stdout)
    rank = next(s for s in schemas if s["name"] == "explain_rank")["parameters"]["properties"][
        "rank"
    ]
    assert (rank["minimum"], rank["maximum"]) == (0, 15)


@pytest.mark.slow
def test_a_chinese_answer_loses_nothing_in_the_terminal(scenario) -> None:
    """Every character of a Chinese answer reaches the terminal, bullets included (wrapped, not cut).

    Independent reading: the answer of ``--json``, whitespace removed, against the printed text,
    whitespace removed (wrapping only adds line breaks and padding).
    """
    path = scenario("seed-rank12")
    zh = runner.invoke(app, ["ask", str(path), "为什么12号卡慢？怎么改？"])
    assert zh.exit_code == 0, zh.output
    data = json.loads(
        runner.invoke(app, ["ask", str(path), "为什么12号卡慢？怎么改？", "--json"]).stdout
    )
    printed = re.sub(r"\s+", "", zh.stdout)
    for line in data["answer"].splitlines():
        text = re.sub(r"\s+", "", line.lstrip("-• ").replace("`", "").replace("**", ""))
        if text:
            assert text in printed, line


def test_chat_multi_turn_until_exit(scenario) -> None:
    path = scenario("seed-rank12")
    res = runner.invoke(
        app, ["chat", str(path)], input="why is rank 12 slow?\nand rank 13?\nexit\nnever asked\n"
    )
    assert res.exit_code == 0, res.output
    assert "Rank 12 is slow in its own right" in res.stdout
    assert "Rank 13 waits" in res.stdout and "not slow" not in res.stdout
    assert "never asked" not in res.stdout
    eof = runner.invoke(app, ["chat", str(path)], input="help\n")
    assert eof.exit_code == 0 and "which rank is slow?" in eof.stdout


def _rendered(answer, question: str, **kw) -> str:
    """What ``ask`` prints for ``answer`` (rich output recorded, 200 columns, no colour)."""
    from rich.console import Console

    import advisor_chat.cli.ask_cmd as ask_cmd

    con = Console(record=True, width=200, color_system=None)
    old = ask_cmd.console
    ask_cmd.console = con
    try:
        ask_cmd.render_answer(answer, question=question, seconds=1.5, **kw)
    finally:
        ask_cmd.console = old
    return con.export_text()


def _answer(text: str, *, total: int, bad: list[str] | None = None, **kw):
    from advisor_chat.agent.answer import Answer, Grounding

    bad = bad or []
    g = Grounding(numbers_total=total, numbers_grounded=total - len(bad), ungrounded=bad)
    return Answer(answer=text, grounding=g, backend="offline", mode="planner", **kw)


def test_grounding_footer_only_when_the_answer_states_measured_numbers() -> None:
    from advisor_chat.agent.answer import CitedFinding

    refusal = _answer(
        "I cannot answer that for this profile: rank 99 does not exist; ranks are 0-15.", total=2
    )
    out = _rendered(refusal, "why is rank 99 slow?")
    assert "grounding" not in out and "(backend offline, planner, 1.50 s)" in out
    measured = _answer("Rank 12 idles 39.5 ms per step (Free 27.0%).", total=3)
    out = _rendered(measured, "why is rank 12 slow?")
    assert "grounding: 3/3 numbers found in this turn's tool results" in out
    # a measured number the question already wrote is an echo, not a finding
    echo = _answer("A step of 39.5 ms is not slow for this job.", total=1)
    assert "grounding" not in _rendered(echo, "is a 39.5 ms step slow?")
    assert "grounding: 1/1" in _rendered(echo, "is a 40 ms step slow?")
    # an answer citing findings keeps its footer, even when its text has only integers
    cited = _answer(
        "Rank 3 waits for rank 12.",
        total=2,
        findings=[CitedFinding(id="slow_rank.r12", kind="slow_rank", severity="high", summary="")],
    )
    assert "grounding: 2/2" in _rendered(cited, "and rank 3?")
    # an ungrounded number is always reported, even in a refusal-like answer
    wrong = _answer("Rank 99 does not exist; ranks are 0-17.", total=2, bad=["17"])
    assert "grounding: 1/2 numbers found in this turn's tool results; UNGROUNDED: 17" in _rendered(
        wrong, "why is rank 99 slow?"
    )
    too_long = _answer("The question is too long (4100 characters).", total=1)
    too_long.mode = "refused"
    assert "grounding" not in _rendered(too_long, "x" * 4100)


def test_grounding_footer_in_chinese_for_a_chinese_answer() -> None:
    zh = _answer("12号卡每步空闲（Free）39.5 ms。", total=2, language="zh")
    out = _rendered(zh, "为什么12号卡慢？")
    assert "数据核对：2/2 个数字与本轮工具结果一致（后端：离线，规划器，1.50 秒）" in out
    assert "grounding" not in out and "backend" not in out
    bad = _answer("12号卡每步空闲 41.0 ms。", total=2, bad=["41.0 ms"], language="zh")
    assert "；未在工具结果中找到：41.0 ms" in _rendered(bad, "为什么12号卡慢？")


@pytest.mark.slow
def test_ask_about_a_missing_rank_exits_0_with_the_reason_as_the_docs_say(scenario) -> None:
    path = scenario("seed-rank12")
    res = runner.invoke(app, ["ask", str(path), "why is rank 99 slow?"])
    assert res.exit_code == 0, res.output
    assert "rank 99 does not exist; ranks are 0-15" in res.stdout
    assert "grounding" not in res.stdout
    # `report --rank` with a missing rank is bad input (2), with the valid ranks named
    rep = runner.invoke(app, ["report", str(path), "--rank", "99"])
    assert rep.exit_code == 2 and "ranks are 0-15" in rep.output and "Traceback" not in rep.output
    usage = (Path(__file__).resolve().parents[1] / "docs" / "USAGE.md").read_text()
    codes = " ".join(usage.split("**Exit codes**", 1)[1].split("\n\n", 1)[0].split())
    ok, bad_input = codes.split("`2` bad input", 1)
    assert "rank 99 slow?" in ok and "does not exist" in ok  # ask on a missing rank: 0
    assert "`report --rank` naming a rank that does not exist" in bad_input.split("`3`", 1)[0]


def test_the_evidence_table_is_shown_on_request_and_counted_otherwise() -> None:
    from advisor_chat.agent.answer import CitedFinding

    found = [
        CitedFinding(
            id=f"slow_rank.r{r}", kind="slow_rank", severity="high", summary="", metrics={"x": 1.0}
        )
        for r in (3, 12)
    ]
    a = _answer("Rank 12 idles 39.5 ms per step.", total=1, findings=found)
    short = _rendered(a, "why is rank 12 slow?")
    assert "2 finding(s) back this answer: add --evidence" in short
    assert "slow_rank.r12" not in short
    full = _rendered(a, "why is rank 12 slow?", show_evidence=True)
    assert "slow_rank.r12" in full and "--evidence" not in full
