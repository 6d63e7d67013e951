"""UI display helpers without a server: metric formatting, load status with data-quality
warnings, the upload error naming the zip, the inspect overview, and the pending status."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from advisor_chat.config import load_settings
from advisor_chat.errors import InputError
from advisor_chat.ui import render
from advisor_chat.ui.render import format_metric
from advisor_chat.ui.session import Session, UIController, _inspect_md, rank_ranges, status_markdown


def shown(md: str) -> str:
    """The visible text of Markdown as a browser shows it (tags dropped, entities decoded)."""
    import html
    import re

    from markdown_it import MarkdownIt

    out = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", out)).split())


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("fastest_rank", 5.0, "5"),
        ("peers_count", 15.0, "15"),
        ("votes", 18.0, "18"),
        ("steps", 3.0, "3"),
        ("missing_ranks_count", 12345.0, "12,345"),
        ("gap_us", 12345.0, "12.35 ms"),  # µs shown as ms from 1000 µs
        ("gap_us", 250.0, "250 µs"),
        ("wait_us_per_step", 2500.0, "2.50 ms/step"),
        ("step_ms", 1.5, "1.50 ms"),
        ("free_share", 0.25, "25.0%"),
        ("bandwidth_gbps", 17.123, "17.12 GB/s"),
        ("wait_ratio", 0.4567, "0.457"),
        ("comm_evidence", 1.0, "1"),
        ("wait_ratio", float("nan"), "n/a"),
    ],
)
def test_format_metric_by_name_and_unit(name: str, value: float, shown: str):
    assert format_metric(name, value) == shown


def test_rank_ranges():
    assert rank_ranges([3, 0, 1, 2, 8, 10, 11]) == "0-3, 8, 10-11"
    assert rank_ranges([]) == ""


@pytest.fixture(scope="module")
def settings():
    return load_settings()


def _gen(tmp: Path, steps: int) -> Path:
    from advisor_chat.synth import generate

    return Path(generate("healthy", tmp / f"healthy-{steps}", ranks=2, steps=steps, seed=2))


def test_truncated_trace_view_warnings_are_in_the_load_status(tmp_path: Path, settings):
    root = _gen(tmp_path, steps=1)
    traces = sorted(root.rglob("trace_view.json"))
    assert traces, "the generator writes trace_view.json"
    data = traces[0].read_bytes()
    traces[0].write_bytes(data[: len(data) // 2])  # truncated, as after a killed copy
    from advisor_chat.ingest import load_profile

    expected = [w.message for w in load_profile(root, settings=settings).warnings]
    assert expected, "ingest should warn about the truncated trace_view.json"
    ctl = UIController(settings)
    s = Session()
    ctl.load_path(s, str(root))
    status = shown(status_markdown(s, settings.model))
    assert "1 step " in status + " " and "1 steps" not in status
    assert "2 ranks" in status
    for msg in expected:
        assert " ".join(msg.split()) in status
    loaded = s.messages[-1]["content"]
    assert "1 step," in loaded and "data-quality warning" in loaded
    ctl.close()


def test_many_warnings_are_folded(settings):
    from advisor_chat.ingest.profile import DataWarning

    class P:  # only the attributes status_markdown reads
        def __init__(self) -> None:
            self.ranks = [0, 1]
            self.steps = [1, 2]
            self.warnings = [DataWarning(code="x", message=f"problem number {i}") for i in range(5)]

    s = Session(profile=P(), label="x")  # type: ignore[arg-type]
    md = status_markdown(s, "offline")
    assert "<details>" in md and "5 data-quality warnings" in md
    assert all(f"problem number {i}" in shown(md) for i in range(5))
    s.profile.warnings = s.profile.warnings[:1]  # type: ignore[union-attr]
    assert "<details>" not in status_markdown(s, "offline")


def test_upload_error_names_the_zip_not_the_extraction_folder(tmp_path: Path, settings):
    z = tmp_path / "junk.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("notes.txt", b"hello")
        zf.writestr("data/random.bin", os.urandom(64))
    # the remedy the loader gives for this content, obtained independently
    plain = tmp_path / "plain"
    with zipfile.ZipFile(z) as zf:
        zf.extractall(plain)
    from advisor_chat.ingest import load_profile

    with pytest.raises(InputError) as err:
        load_profile(plain, settings=settings)
    ctl = UIController(settings)
    s = Session()
    ctl.load_upload(s, str(z))
    text = shown(s.messages[-1]["content"])
    assert "junk.zip" in text
    assert str(ctl.upload_root) not in text and "upload-" not in text
    if err.value.remedy:
        assert " ".join(err.value.remedy.rstrip(".").split()) in text
    assert s.profile is None
    ctl.close()


def test_overview_has_no_raw_json_or_internal_fields(settings):
    from advisor_chat.ingest import inspect_profile, load_profile
    from advisor_chat.synth import demo_profile

    info = inspect_profile(load_profile(demo_profile(settings), settings=settings))
    md = shown(_inspect_md(info))
    assert "cache_hit" not in md and "file_types" not in md
    assert '{"' not in md
    for by in info["versions"].values():
        for version, ranks in by.items():
            assert f"{version} (ranks {rank_ranges(ranks)})" in md
    assert json.dumps(info["ranks"]) not in md  # rank lists are compacted


def test_question_is_echoed_with_a_pending_status_before_any_work(settings):
    from advisor_chat.synth import demo_profile

    ctl = UIController(settings, profile_path=demo_profile(settings))
    s = Session()
    ctl.ensure_default(s)
    n = len(s.messages)
    gen = ctl.ask(s, "why is rank 12 slow?")
    next(gen)
    assert s.messages[n] == render.user_message("why is rank 12 slow?")
    assert s.messages[n + 1]["metadata"]["status"] == "pending"
    assert len(s.messages) == n + 2
    gen.close()  # the status never outlives the question
    assert all((m.get("metadata") or {}).get("id") != "pending-status" for m in s.messages)
    ctl.close()


def test_question_is_echoed_before_the_server_profile_is_loaded(settings):
    from advisor_chat.synth import demo_profile

    ctl = UIController(settings, profile_path=demo_profile(settings))
    s = Session()  # a session whose page-open load has not happened (e.g. an API client)
    gen = ctl.ask(s, "why is rank 12 slow?")
    next(gen)
    assert s.profile is None  # nothing loaded yet, but the question is already shown
    assert [m["role"] for m in s.messages] == ["user", "assistant"]
    assert s.messages[1]["metadata"]["status"] == "pending"
    next(gen)  # loads the profile, then shows the status again before answering
    assert s.profile is not None
    roles = [(m["role"], (m.get("metadata") or {}).get("id")) for m in s.messages]
    assert roles == [("assistant", None), ("user", None), ("assistant", "pending-status")]
    assert s.messages[0]["content"].startswith("📂 Loaded")
    gen.close()
    ctl.close()


def test_star_legend_says_ranks_named_in_the_answer_not_slow(settings):
    from advisor_chat.ingest import load_profile
    from advisor_chat.synth import demo_profile
    from advisor_chat.ui.plots import STAR_LEGEND, build_plots

    prof = load_profile(demo_profile(settings), settings=settings)
    names = ["rank_breakdown", "bandwidth_heatmap", "launch_delay"]
    for name, fig in build_plots(prof, names, [0, 1]).items():  # e.g. a 2-rank comm answer
        assert fig is not None, name
        title = fig.layout.xaxis.title.text
        assert STAR_LEGEND in title and "slow" not in title, (name, title)
    plain = build_plots(prof, ["rank_breakdown"], [])["rank_breakdown"]
    assert plain is not None and "★" not in plain.layout.xaxis.title.text


def test_failed_load_says_which_profile_questions_still_go_to(tmp_path: Path, settings):
    from advisor_chat.synth import demo_profile

    demo = demo_profile(settings)
    ctl = UIController(settings, profile_path=demo)
    s = Session()
    ctl.load_path(s, str(tmp_path / "does-not-exist"))
    text = shown(
        "\n\n".join(
            str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in s.messages
        )
    )
    assert "does-not-exist" in text and str(demo) in text


def test_loading_another_folder_starts_a_new_conversation(tmp_path: Path, settings):
    first, second = _gen(tmp_path, steps=1), _gen(tmp_path, steps=2)
    ctl = UIController(settings)
    s = Session()
    ctl.load_path(s, str(first))
    list(ctl.ask(s, "which rank is slow?"))
    assert [m["role"] for m in s.messages].count("user") == 1
    ctl.load_path(s, str(second))
    # only the new folder's "Loaded" bubble: no question or answer about the old folder remains
    assert len(s.messages) == 1 and s.messages[0]["content"].startswith("📂 Loaded")
    assert str(second.name) in shown(s.messages[0]["content"])
    assert s.last_answer is None and s.plots == {}
    # a failed load keeps the conversation (questions still go to the loaded folder)
    list(ctl.ask(s, "which rank is slow?"))
    n = len(s.messages)
    ctl.load_path(s, str(tmp_path / "missing"))
    assert len(s.messages) > n and s.messages[0]["content"].startswith("📂 Loaded")
    ctl.close()


def test_answer_is_placed_right_under_the_question_before_the_tool_steps(settings):
    from advisor_chat.synth import demo_profile

    ctl = UIController(settings)
    s = Session()
    ctl.load_path(s, str(demo_profile(settings)))
    list(ctl.ask(s, "why is rank 12 slow?"))
    roles = [((m.get("metadata") or {}).get("title") or m["role"]) for m in s.messages]
    q = roles.index("user")
    assert roles[q + 1] == "assistant", roles  # the answer bubble itself (no title)
    assert "Grounding" in s.messages[q + 1]["content"]
    assert any(r.startswith(render.TOOL_PREFIX) for r in roles[q + 2 :]), roles
    ctl.close()


def test_non_finite_values_are_displayed_not_crashing():
    from advisor_chat.tools.render import fmt_metric, fmt_num, metric_label

    inf, nan = float("inf"), float("nan")
    assert format_metric("free_us", inf) == "inf ms"
    assert format_metric("rank", inf) == "inf" and format_metric("votes", nan) == "n/a"
    assert (
        fmt_num(inf, "us") == "inf" and fmt_num(-inf) == "-inf" and fmt_num(nan, "ratio") == "n/a"
    )
    assert fmt_num(1e308) == f"{1e308:.1f}"
    # the label never contradicts the unit shown with the value
    assert metric_label("free_delta_us") == "free_delta"
    assert fmt_metric("free_delta_us", 39_500.0) == "free_delta = 39.50 ms"
    assert metric_label("wait_us_per_step") == "wait_per_step" and metric_label("rank") == "rank"


def test_hostile_profile_strings_render_as_text_in_every_ui_block():
    """Overview (inspect), status, tool steps, cited findings: no live element from profile strings."""
    import re as _re

    from _hostile import EVIL_HOST, GROUP_NAME, OP_NAME
    from markdown_it import MarkdownIt

    from advisor_chat.agent.answer import CitedFinding
    from advisor_chat.ingest.profile import DataWarning

    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    info = {
        "root": f"/data/{GROUP_NAME}",
        "layout": "ascend_pt_text",
        "ranks": [0, 1],
        "steps": [1],
        "versions": {"cann": {OP_NAME: [0, 1]}},
        "groups": [{"group": "1", "group_name": GROUP_NAME, "ranks": [0, 1]}],
        "warnings": [{"code": "x", "message": GROUP_NAME}],
    }

    class P:
        def __init__(self) -> None:
            self.ranks, self.steps = [0, 1], [1]
            self.warnings = [DataWarning(code="x", message=GROUP_NAME)]

    step = render.tool_step("c1", OP_NAME, {"group": GROUP_NAME})
    render.finish_tool_step(step, f"group {GROUP_NAME}")
    err_step = render.tool_step("c2", "explain_rank", {})
    render.finish_tool_step(err_step, "", error=GROUP_NAME)
    finding = CitedFinding.model_construct(
        id="comm.wait",
        severity="high",
        summary=f"group {GROUP_NAME} waits",
        ranks=[1],
        metrics={"wait_us": 1200.0},
        estimated_gain_us=None,
        sources=[f"/data/{OP_NAME}/communication.json"],
    )
    blocks = {
        "inspect": _inspect_md(info),
        "status": status_markdown(Session(profile=P(), label=GROUP_NAME), "offline"),  # type: ignore[arg-type]
        "tool step": step["content"] + err_step["content"],
        "finding": render._finding_md(finding, "en"),
        "notice": render.notice(f"cannot read {GROUP_NAME}")["content"],
    }
    for name, block in blocks.items():
        out = md.render(block)
        live = _re.findall(r"<(?:img|a|script)\b[^>]*", out)
        assert live == [], (name, live)
        assert EVIL_HOST in html_unescape(out), name  # shown as text, not dropped
        assert "\x1b" not in out, name


def html_unescape(s: str) -> str:
    import html

    return html.unescape(s)


def test_chinese_answers_show_the_cases_chinese_titles():
    """A Chinese answer lists its cited cases by their Chinese titles (case files' ``title_zh``)."""
    from advisor_chat.agent.answer import Answer, CitedCase
    from advisor_chat.kb import load_cases

    case = next(c for c in load_cases() if c.id == "slow-link-rdma")
    cited = CitedCase(id=case.id, title=case.title, source="x", title_zh=case.title_zh)
    for lang, want, other in (("zh", case.title_zh, case.title), ("en", case.title, case.title_zh)):
        msgs = render.answer_messages(Answer(answer="…", language=lang, cases=[cited]))
        text = "\n".join(str(m["content"]) for m in msgs)
        assert want.split("（")[0].split("(")[0] in text, (lang, text)
        assert other not in text, (lang, text)


def test_cited_cases_carry_the_chinese_title():
    """The planner's cited cases take title_zh from the case hit (CLI and web show it in Chinese answers)."""
    from advisor_chat.agent.planner import cited_cases
    from advisor_chat.kb import load_cases

    case = next(c for c in load_cases() if c.id == "slow-link-rdma")
    hit = next(h for h in _hits_for(case.id))
    assert cited_cases([hit])[0].title_zh == case.title_zh


def _hits_for(case_id: str):
    from advisor_chat.kb import search_cases

    return [h for h in search_cases("", symptom_tags=["slow_link"], k=10) if h.id == case_id]
