"""``advisor-chat ask`` / ``chat`` / ``tools list`` through the typer app."""

from __future__ import annotations

import json

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
    assert "grounding:" in rich.stdout
    schemas = json.loads(runner.invoke(app, ["tools", "list", str(path), "--json"]).stdout)
    rank = next(s for s in schemas if s["name"] == "explain_rank")["parameters"]["properties"][
        "rank"
    ]
    assert (rank["minimum"], rank["maximum"]) == (0, 15)


@pytest.mark.slow
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
