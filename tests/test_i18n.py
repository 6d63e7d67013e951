"""The message catalogue (issue 23): every message in every language, the same placeholders, and a
Chinese report page without English prose.

Keys come from ``advisor_chat/locale/<lang>/LC_MESSAGES/advisor_chat.po`` (read with Babel); the
code's keys are found by scanning the source for ``t("...")`` / ``T("...")`` calls, so a key used
but never written to the catalogue fails here before a user sees a ``KeyError``.
"""

from __future__ import annotations

import html
import re
import string
from pathlib import Path

import pytest

from advisor_chat.i18n import LANGS, messages, t

PKG = Path(__file__).resolve().parents[1] / "advisor_chat"
CJK = re.compile(r"[\u4e00-\u9fff]")


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_message_exists_in_every_language_with_the_same_placeholders() -> None:
    keys = {lang: set(messages(lang)) for lang in LANGS}
    assert keys["en"] == keys["zh"], keys["en"] ^ keys["zh"]
    assert len(keys["en"]) >= 70
    for k in keys["en"]:
        en, zh = messages("en")[k], messages("zh")[k]
        assert en and zh, k
        assert _fields(en) == _fields(zh), (k, en, zh)


def test_chinese_messages_are_chinese() -> None:
    """A zh message holds Chinese unless it is an identifier left as is or punctuation only."""
    for k, zh in messages("zh").items():
        if zh == messages("en")[k] or not re.search(r"[A-Za-z]", re.sub(r"\{\w+\}", "", zh)):
            continue
        assert CJK.search(zh), (k, zh)


def test_every_key_the_code_uses_is_in_the_catalogue() -> None:
    used: set[str] = set()
    families: set[str] = set()
    for f in PKG.rglob("*.py"):
        src = f.read_text(encoding="utf-8")
        used |= set(re.findall(r"""\b(?:t|T|msg|say)\(\s*["']([a-z_]+\.[a-z_.]+)["']""", src))
        families |= set(re.findall(r"""\b(?:t|T|msg|say)\(\s*f["']([a-z_]+\.[a-z_.]*)\{""", src))
    assert used, "no t() call found: the scan is broken"
    cat = set(messages("en"))
    assert used <= cat, used - cat
    for fam in families:  # keys built at run time: the family must exist
        assert any(k.startswith(fam) for k in cat), fam


def test_t_fills_named_placeholders_and_refuses_unknown_keys() -> None:
    assert t("report.cause", "zh", n=2) == "原因 2."
    assert t("report.cause", "en", n=2) == "Cause 2."
    assert t("report.cause", "fr", n=2) == "Cause 2."  # any other language reads English
    with pytest.raises(KeyError):
        t("report.no_such_message", "en")


# ----- a Chinese report page -------------------------------------------------------------------

#: Hyphenated terms Chinese engineers write as is.
ALLOWED = {"micro-batch", "advisor-chat"}


def english_prose(page: str) -> list[str]:
    """Runs of two or more lowercase English words in the page's visible text, outside code,
    identifiers, file names, plots and the analyzers' notes (English-only, labelled so)."""
    t_ = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    t_ = re.sub(r'<ul class="analyzer-notes".*?</ul>', " ", t_, flags=re.S)
    t_ = re.sub(r"<code>.*?</code>", " ", t_, flags=re.S)
    t_ = html.unescape(re.sub(r"<[^>]+>", " ", t_))
    t_ = re.sub(r"https?://\S+|\S+\.(?:json|csv|db|py|yaml|txt|log|md)\b", " ", t_)
    found = re.findall(r"\b[a-z][a-z'’]+(?:[ \-]+[a-z][a-z'’]+)+\b", t_)
    return [f for f in found if f not in ALLOWED]


@pytest.mark.parametrize(
    "name", ["seed-rank12", "slow-link", "pipeline-stage-imbalance", "two-ranks", "healthy"]
)
def test_chinese_report_page_has_no_english_prose(scenario, name: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from advisor_chat.cli.main import app

    prof = scenario(name)
    out = tmp_path / "r.html"
    res = CliRunner().invoke(
        app, ["report", str(prof), "-f", "html", "--lang", "zh", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output[-2000:]
    page = out.read_text(encoding="utf-8")
    assert "<h2>诊断</h2>" in page and 'class="f cause' in page
    # only a cause that blames something is numbered ("原因 1."); healthy and 2-rank profiles
    # state no culprit / not enough signal instead
    assert ("原因 1." in page) == (name not in ("healthy", "two-ranks"))
    assert english_prose(page) == []
    # the detector finds English where it is: the English page of the same report
    res = CliRunner().invoke(
        app, ["report", str(prof), "-f", "html", "--lang", "en", "-o", str(out)]
    )
    assert res.exit_code == 0
    assert len(english_prose(out.read_text(encoding="utf-8"))) > 10


# ----- Chinese answers ---------------------------------------------------------------------------

ZH_QUESTIONS = [
    "哪张卡慢？",
    "这是计算、调度还是通信问题？",
    "哪条链路慢？",
    "应该先优化什么？",
    "是GC导致的吗？",
    "是硬件问题吗？",
    "3号卡为什么慢？",
    "通信带宽正常吗？",
]


def _md_prose(text: str) -> list[str]:
    """English prose in a Markdown answer (code spans and identifiers left out)."""
    t_ = re.sub(r"```.*?```", " ", text, flags=re.S)
    t_ = re.sub(r"`[^`]*`", " ", t_)
    t_ = re.sub(r"https?://\S+|\S+\.(?:json|csv|db|py|yaml|txt|log|md)\b", " ", t_)
    found = re.findall(r"\b[a-z][a-z'’]+(?:[ \-]+[a-z][a-z'’]+)+\b", t_)
    return [f for f in found if f not in ALLOWED]


@pytest.mark.parametrize(
    "name",
    ["seed-rank12", "slow-link", "compute-straggler-hidden", "node-host-contention", "job-idle"],
)
def test_chinese_answers_and_their_page_have_no_english_prose(scenario, name: str) -> None:
    """The answer text, and the web page's bubbles for it (suggestions, cited findings and cases,
    the grounding line), in Chinese: no English prose outside code spans and identifiers."""
    from advisor_chat.agent import Advisor
    from advisor_chat.diagnosis.engine import open_profile
    from advisor_chat.ui.render import answer_messages

    adv = Advisor(open_profile(scenario(name), use_cache=False))
    leaks = {}
    for q in ZH_QUESTIONS:
        answer = adv.ask(q)
        assert CJK.search(answer.answer), (q, answer.answer[:200])
        page = "\n\n".join(
            m["content"] + " " + m.get("metadata", {}).get("title", "")
            for m in answer_messages(answer)
        )
        found = _md_prose(answer.answer) + _md_prose(re.sub(r"<[^>]+>", " ", page))
        # sentences assembled from pieces: no stray space between two Chinese characters
        found += re.findall(r"[\u4e00-\u9fff][ \t]+[\u4e00-\u9fff]", answer.answer)
        found += [
            g
            for s in answer.suggestions
            for g in re.findall(r"[\u4e00-\u9fff] +[\u4e00-\u9fff]", s.text)
        ]
        if found:
            leaks[q] = found
    assert leaks == {}


def test_tidy_zh_spacing() -> None:
    from advisor_chat.i18n import tidy_zh

    assert (
        tidy_zh("融合的注意力 算子；V2占设备 29.7%，在 AI CPU上")
        == "融合的注意力算子；V2 占设备 29.7%，在 AI CPU 上"
    )
    # numbers before a Chinese unit and line breaks stay as written
    assert tidy_zh("第3步\n\n下一段") == "第3步\n\n下一段"


def test_chinese_plots_have_no_english_labels(tmp_path: Path) -> None:
    """Title, axes, legend and trace names of every plot in Chinese (field names such as
    Computing, Free, Bubble and units stay as they are)."""
    from advisor_chat.diagnosis.engine import open_profile
    from advisor_chat.synth import generate
    from advisor_chat.ui.plots import PLOT_NAMES, build_plots

    prof = open_profile(generate("seed-rank12", tmp_path / "p", ranks=16), use_cache=False)
    figs = build_plots(prof, PLOT_NAMES, ranks=[12], lang="zh")
    built = {n: f for n, f in figs.items() if f is not None}
    assert {"rank_breakdown", "bandwidth_heatmap", "step_trend"} <= set(built)
    for name, fig in built.items():
        lay = fig.layout
        texts = [lay.title.text, lay.xaxis.title.text, lay.yaxis.title.text, lay.legend.title.text]
        texts += [tr.name for tr in fig.data]
        shown = " | ".join(x for x in texts if x)
        assert CJK.search(lay.title.text or ""), (name, lay.title.text)
        assert _md_prose(shown) == [], (name, shown)
        assert not re.search(r"\b(?:rank|ranks|per|step|source|destination)\b", shown), shown
    # the English plots of the same profile are what the detector catches
    en = build_plots(prof, ["rank_breakdown"], ranks=[12], lang="en")["rank_breakdown"]
    assert en is not None and _md_prose(str(en.layout.yaxis.title.text)) == ["ms per step"]


def test_parsed_catalogue_is_kept_and_matches_the_po_file(monkeypatch, tmp_path: Path) -> None:
    """A later process reads the parsed catalogue from ADVISOR_HOME (no Babel import) and gets the
    same messages; a damaged cache file is parsed again from the .po file."""
    import advisor_chat.i18n as I

    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path))
    I.messages.cache_clear()
    try:
        first = I.messages("zh")
        (cached,) = (tmp_path / "cache" / "i18n").glob("zh-*.json")
        I.messages.cache_clear()
        assert I.messages("zh") == first
        cached.write_text("{broken", encoding="utf-8")
        I.messages.cache_clear()
        assert I.messages("zh") == first
    finally:
        I.messages.cache_clear()


@pytest.mark.parametrize("name", ["seed-rank12", "slow-link", "pipeline-stage-imbalance"])
def test_chinese_markdown_report_has_no_english_prose(scenario, name: str) -> None:
    """``report --lang zh`` in the terminal format: Chinese labels and sentences; the analyzers'
    notes (English only, under a heading that says so) are left out of the check."""
    from advisor_chat.ingest import load_profile
    from advisor_chat.reporting import render_markdown, run_report

    rep = run_report(load_profile(scenario(name), use_cache=False))
    text = render_markdown(rep, lang="zh")
    assert "## 诊断" in text and "原因 1." in text
    body = text.split("## 分析器的说明")[0]
    assert _md_prose(body) == []
    # the detector finds English where it is: the English report of the same profile
    assert len(_md_prose(render_markdown(rep).split("## Notes")[0])) > 10


def test_report_cli_lang_for_markdown(scenario, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from advisor_chat.cli.main import app

    prof = scenario("slow-link")
    out = tmp_path / "r.md"
    res = CliRunner().invoke(app, ["report", str(prof), "--lang", "zh", "-o", str(out)])
    assert res.exit_code == 0, res.output[-2000:]
    assert out.read_text(encoding="utf-8").startswith("# advisor-chat 报告")
    res = CliRunner().invoke(app, ["report", str(prof), "--lang", "both", "-o", str(out)])
    assert res.exit_code != 0 and "-f html" in res.output


def test_report_header_lists_the_step_ids_in_both_languages(real_samples) -> None:
    """The header names the captured steps (read from step_trace_time.csv) in en and zh alike."""
    import csv

    from advisor_chat.ingest import load_profile
    from advisor_chat.reporting import render_html, render_markdown, run_report

    root = real_samples / "pt-text-level1-2rank"
    with open(
        root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline=""
    ) as fh:
        steps = sorted({int(r["Step"].strip()) for r in csv.DictReader(fh)})
    rep = run_report(load_profile(root, use_cache=False))
    html = render_html(rep, lang="zh")
    meta = html[html.index('<p class="meta">') :]
    for head in (render_markdown(rep, "en"), render_markdown(rep, "zh"), meta):
        first = head.split("\n\n")[1] if not head.startswith("<p") else head.split("</p>")[0]
        assert str(steps) in first, first


@pytest.mark.parametrize(
    ("citation", "name", "note"),
    [
        ("step_trace_time.csv (16 files)", "step_trace_time.csv", "（共 16 个文件）"),
        ("k.csv (1024 files; read on demand)", "k.csv", "（共 1024 个文件，按需读取）"),
        (
            "k.csv (24 files; read for 24 of 1024 ranks)",
            "k.csv",
            "（共 24 个文件，已读 24/1024 张卡）",
        ),
        ("/p/trace_view.json (read for 1 of 16 ranks)", "/p/trace_view.json", "（已读 1/16 张卡）"),
        ("/p/trace_view.json (read on demand)", "/p/trace_view.json", "（按需读取）"),
        ("host_dispatch (no source file)", "host_dispatch", "（无源文件）"),
        ("/p/one.csv", "/p/one.csv", ""),
    ],
)
def test_citations_said_in_chinese(citation: str, name: str, note: str) -> None:
    from advisor_chat.ingest.profile import cite_zh

    assert cite_zh(citation) == (name, note)
