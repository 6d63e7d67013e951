"""``advisor-chat report`` end to end on a generated 16-rank cluster (seed-rank12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor_chat.cli.main import app

pytestmark = pytest.mark.slow

SEV = {"high": 0, "medium": 1, "low": 2, "info": 3}


@pytest.fixture(scope="module")
def seed(scenario) -> Path:
    return scenario("seed-rank12")


def test_json_to_stdout(seed: Path) -> None:
    res = CliRunner().invoke(app, ["report", str(seed), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["profile"]["ranks"] == list(range(16))
    sev = [SEV[f["severity"]] for f in data["findings"]]
    assert sev == sorted(sev)
    hd = [f for f in data["findings"] if f["id"] == "host_dispatch.host_bound.host_wait"]
    assert hd and hd[0]["ranks"] == [12]
    assert any(f["ranks"] == [12] and f["severity"] == "high" for f in data["findings"])


def test_html_and_md_files(seed: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    res = CliRunner().invoke(
        app, ["report", str(seed), "-f", "html", "-o", str(out), "--rank", "12"]
    )
    assert res.exit_code == 0, res.output
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "rank explained: 12" in page
    md = tmp_path / "r.md"
    res = CliRunner().invoke(app, ["report", str(seed), "-o", str(md)])
    assert res.exit_code == 0
    written = md.read_text(encoding="utf-8")
    assert written.startswith("# advisor-chat report")
    # redirected (not a terminal): stdout is the same Markdown, not rendered or wrapped at 80
    res = CliRunner().invoke(app, ["report", str(seed)])
    assert res.exit_code == 0
    heads = [line for line in written.splitlines() if line.startswith("#")]
    assert res.stdout.startswith("# advisor-chat report")
    assert [line for line in res.stdout.splitlines() if line.startswith("#")] == heads
    assert max(len(line) for line in res.stdout.splitlines()) > 80


def test_bad_inputs_exit_2(seed: Path, tmp_path: Path) -> None:
    inside = seed / "report.json"
    res = CliRunner().invoke(app, ["report", str(seed), "-f", "json", "-o", str(inside)])
    assert res.exit_code == 2 and not inside.exists()
    res = CliRunner().invoke(app, ["report", str(seed), "--rank", "99"])
    assert res.exit_code == 2
    assert "0-15" in res.output
    res = CliRunner().invoke(app, ["report", str(tmp_path / "missing")])
    assert res.exit_code == 2


def test_no_cache_neither_reads_nor_writes_the_cache(
    scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``report --no-cache`` parses again and leaves no profile cache; without it one is written."""
    from advisor_chat.ingest.loader import PARSE_STATS, wait_cache_writes

    prof = scenario("seed-rank12", ranks=4, steps=2)
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path / "home"))
    cache = tmp_path / "home" / "cache" / "profiles"
    parses = PARSE_STATS["parses"]
    for _ in range(2):
        res = CliRunner().invoke(app, ["report", str(prof), "--no-cache", "--format", "json"])
        assert res.exit_code == 0, res.output
    assert PARSE_STATS["parses"] == parses + 2  # parsed both times
    assert not cache.exists() or not any(cache.iterdir())
    res = CliRunner().invoke(app, ["report", str(prof), "--format", "json"])
    assert res.exit_code == 0, res.output
    wait_cache_writes()
    assert any(cache.iterdir())


def test_html_report_embeds_captioned_plots_offline_in_one_language(
    seed: Path, tmp_path: Path
) -> None:
    import html
    import re

    from advisor_chat.ui.plots import PLOT_CAPTIONS, PLOT_TITLES, PLOT_TITLES_ZH

    culprit = json.loads((seed / "answer_key.json").read_text())["root_cause"]["culprit_ranks"][0]
    pages = {}
    for lang in ("en", "zh"):
        out = tmp_path / f"r_{lang}.html"
        res = CliRunner().invoke(
            app, ["report", str(seed), "-f", "html", "-o", str(out), "--lang", lang]
        )
        assert res.exit_code == 0, res.output
        pages[lang] = out.read_text(encoding="utf-8")
    en, zh = pages["en"], pages["zh"]
    for name in ("rank_breakdown", "step_trend"):
        assert PLOT_TITLES[name] in en and html.escape(PLOT_CAPTIONS[name][0]) in en
        assert PLOT_TITLES_ZH[name] in zh and html.escape(PLOT_CAPTIONS[name][1]) in zh
    for page in (en, zh):
        assert page.count("Plotly.newPlot") >= 2  # the figures are in the page
        assert not re.search(r"<script[^>]*\bsrc=", page)  # plotly.js inlined: no CDN, no file
    # one language: the Chinese page states the diagnosis in Chinese, the English page does not
    assert f"{culprit}号卡" in zh and f"{culprit}号卡" not in en
    assert '<html lang="zh">' in zh and '<html lang="en">' in en
    res = CliRunner().invoke(app, ["report", str(seed), "-f", "html", "--lang", "fr"])
    assert res.exit_code == 2 and "--lang" in res.output
