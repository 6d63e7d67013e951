"""Input errors in the language the user asked in (a Chinese question or ``--lang zh``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor_chat.cli.main import app


@pytest.mark.parametrize(
    ("args", "zh"),
    [
        (["ask", "{missing}", "为什么12号卡慢？"], True),
        (["ask", "{missing}", "why is rank 12 slow?"], False),
        (["report", "{missing}", "--lang", "zh"], True),
        (["report", "{missing}"], False),
        (["ask", "{empty}", "哪张卡慢？"], True),
        (["ask", "{nodata}", "哪张卡慢？"], True),
        (["ask", "{afile}", "哪张卡慢？"], True),
        (["ask", "{afile}", "which rank is slow?"], False),
    ],
)
def test_input_errors_follow_the_question_language(tmp_path: Path, args, zh: bool) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "nodata").mkdir()
    (tmp_path / "nodata" / "notes.txt").write_text("not a profile", encoding="utf-8")
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    paths = {k: str(tmp_path / k) for k in ("missing", "empty", "nodata", "afile")}
    res = CliRunner().invoke(app, [a.format(**paths) for a in args])
    assert res.exit_code == 2, res.output
    out = res.output
    assert ("错误：" in out) == zh and ("error:" in out) != zh, out
    # the message names the folder either way, and says what to do
    name = Path(args[1].format(**paths)).name
    assert name in out
    assert ("请" in out) if zh else any(w in out for w in ("Point at", "Check", "Copy", "Pass"))


@pytest.mark.parametrize("zh", [True, False])
def test_a_rank_that_does_not_exist_in_the_users_language(scenario, zh: bool) -> None:
    path = scenario("seed-rank12")
    args = ["report", str(path), "--rank", "99", "--no-cache"] + (["--lang", "zh"] if zh else [])
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    out = res.output
    assert "--rank 99" in out and "0-15" in out  # the valid ranks are named either way
    assert ("不存在" in out) == zh and ("does not exist" in out) != zh, out
