"""The Gradio app driven headlessly through gradio_client, on the real stack (ingest, agent, kb).

The app runs in-process on 127.0.0.1 with a free port; each ``Client`` is its own browser session.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from advisor_chat.config import load_settings
from advisor_chat.ui.render import TOOL_PREFIX

pytestmark = pytest.mark.slow  # the first question builds the case index (kb)

REPO = Path(__file__).resolve().parents[1]
CASE_IDS = {p.stem for p in (REPO / "knowledge" / "cases").glob("*.md")}
PLOT_NAMES = ("rank_breakdown", "bandwidth_heatmap", "step_trend", "op_compare", "launch_delay")
# /chat outputs: chatbot, status, overview, plot note, 5 plots, question box
CHAT, STATUS, OVERVIEW, NOTE = 0, 1, 2, 3
PLOTS = slice(4, 9)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def settings():
    return load_settings()


@pytest.fixture(scope="module")
def demo_path(settings) -> Path:
    from advisor_chat.synth import demo_profile

    return Path(demo_profile(settings))


@pytest.fixture(scope="module")
def server(settings) -> Iterator[tuple[Any, str]]:
    from advisor_chat.ui.app import build_app

    app = build_app(settings)
    try:
        _, url, _ = app.launch(
            server_name="127.0.0.1",
            server_port=free_port(),
            prevent_thread_lock=True,
            quiet=True,
            share=False,
        )
        yield app, url
    finally:
        app.close()


def client(url: str):
    from gradio_client import Client

    return Client(url, verbose=False)


def text_of(msg: dict[str, Any]) -> str:
    """What the page shows for a message: its Markdown rendered, tags dropped, entities decoded."""
    import html

    from markdown_it import MarkdownIt

    out = MarkdownIt("commonmark", {"html": True}).enable("table").render(raw_of(msg))
    return html.unescape(re.sub(r"<[^>]+>", "", out)).strip()


def raw_of(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content if isinstance(c, dict))
    return str(content)


def title_of(msg: dict[str, Any]) -> str:
    return str((msg.get("metadata") or {}).get("title") or "")


def answer_bubbles(history: list[dict[str, Any]]) -> list[str]:
    return [text_of(m) for m in history if m["role"] == "assistant" and not title_of(m)]


def tool_steps(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in history if title_of(m).startswith(TOOL_PREFIX)]


def plot_data(out: Any) -> list[Any]:
    """The traces of a gr.Plot output (``{'type': 'plotly', 'plot': json}``), [] if hidden."""
    value = out.get("value") if isinstance(out, dict) and "value" in out else out
    if not value:
        return []
    return json.loads(value["plot"]).get("data", [])


def ask(c, question: str) -> tuple:
    return c.predict(question=question, api_name="/chat")


def test_demo_flow_names_rank_12_cites_case_shows_tools_and_plot(server, demo_path):
    _, url = server
    c = client(url)
    loaded = c.predict(api_name="/load_demo")
    assert "16 ranks" in loaded[STATUS]
    out = ask(c, "why is rank 12 slow?")
    history = out[CHAT]
    user = [text_of(m) for m in history if m["role"] == "user"]
    assert user == ["why is rank 12 slow?"]
    steps = tool_steps(history)
    assert steps, "no tool step in the chat"
    assert all((s["metadata"] or {}).get("status") == "done" for s in steps)
    assert all("**arguments:**" in raw_of(s) for s in steps)
    assert any("**result:**" in raw_of(s) for s in steps)
    answer = "\n".join(answer_bubbles(history))
    assert re.search(r"\brank\s*12\b", answer, re.I), answer
    raw = "\n".join(raw_of(m) for m in history if m["role"] == "assistant")
    cited = set(re.findall(r"`([a-z0-9-]+)`", raw)) & CASE_IDS
    assert cited, f"no case id of knowledge/cases cited in: {answer[:500]}"
    assert not any("Internal error" in t for t in answer_bubbles(history))
    # the demo's answer key says rank 12 is the slow rank; the plots highlight it
    key = json.loads((demo_path / "answer_key.json").read_text())
    assert key["slow_ranks"] == [12]
    shown = [n for n, o in zip(PLOT_NAMES, out[PLOTS], strict=True) if plot_data(o)]
    assert shown, f"no plot rendered: {out[NOTE]}"
    assert "12" in out[NOTE]
    if "rank_breakdown" in shown:
        traces = plot_data(out[PLOTS][PLOT_NAMES.index("rank_breakdown")])
        assert {t["name"] for t in traces} >= {"Computing", "Free"}
        assert any("12★" in str(x) for x in traces[0]["x"])
    assert "## Inspect" in out[OVERVIEW] and "## Report" in out[OVERVIEW]


def test_follow_up_keeps_history_and_chinese_answer(server):
    _, url = server
    c = client(url)
    c.predict(api_name="/load_demo")
    ask(c, "why is rank 12 slow?")
    out = ask(c, "为什么12号卡慢？")
    history = out[CHAT]
    assert [text_of(m) for m in history if m["role"] == "user"] == [
        "why is rank 12 slow?",
        "为什么12号卡慢？",
    ]
    last = answer_bubbles(history)[-1]
    assert re.search(r"[\u4e00-\u9fff]", last), last
    assert "12" in last
    out = c.predict(api_name="/new_conversation")
    assert out[CHAT] == []


def _generate(tmp: Path, scenario: str, ranks: int) -> Path:
    from advisor_chat.synth import generate

    return Path(generate(scenario, tmp / f"{scenario}-{ranks}", ranks=ranks, steps=3, seed=ranks))


def test_five_concurrent_sessions_do_not_mix(server, demo_path, tmp_path):
    _, url = server
    jobs = [
        (demo_path, 16, "why is rank 12 slow?"),
        (_generate(tmp_path, "healthy", 4), 4, "why is rank 3 slow?"),
        (_generate(tmp_path, "slow-link", 8), 8, "Which link is slow?"),
        (_generate(tmp_path, "dataloader-stall", 6), 6, "why is rank 5 slow?"),
        (_generate(tmp_path, "matmul-shape-regression", 2), 2, "为什么1号卡慢？"),
    ]

    def run(job: tuple[Path, int, str]) -> tuple[tuple, tuple, tuple]:
        path, _, question = job
        c = client(url)
        loaded = c.predict(path_text=str(path), api_name="/load_path")
        first = ask(c, question)
        second = ask(c, f"and {path.name}?")
        return loaded, first, second

    with ThreadPoolExecutor(max_workers=5) as pool:
        results = list(pool.map(run, jobs))

    for (path, n_ranks, question), (loaded, first, second) in zip(jobs, results, strict=True):
        assert str(path) in loaded[STATUS] and f"{n_ranks} ranks" in loaded[STATUS]
        users = [text_of(m) for m in second[CHAT] if m["role"] == "user"]
        assert users == [question, f"and {path.name}?"], users
        assert f"{n_ranks} ranks" in second[STATUS]
        # no other session's folder or question leaked into this chat
        text = "\n".join(text_of(m) for m in second[CHAT])
        for other_path, _, other_q in jobs:
            if other_path != path:
                assert str(other_path) not in text
                assert other_q not in users
        assert answer_bubbles(first[CHAT]), "no answer"


def test_bad_input_is_a_chat_message_and_app_stays_usable(server, tmp_path, demo_path):
    _, url = server
    c = client(url)
    # no profile yet
    out = ask(c, "why is rank 12 slow?")
    assert "No profiling folder is loaded yet" in answer_bubbles(out[CHAT])[-1]
    # a path that does not exist
    missing = tmp_path / "no_such_prof"
    out = c.predict(path_text=str(missing), api_name="/load_path")
    last = answer_bubbles(out[CHAT])[-1]
    assert last.startswith("⚠️") and str(missing) in last
    # a folder with unreadable / unrelated data
    junk = tmp_path / "junk"
    (junk / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (junk / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").write_bytes(
        b"\x00\xff garbage \x00"
    )
    out = c.predict(path_text=str(junk), api_name="/load_path")
    last = answer_bubbles(out[CHAT])[-1]
    assert last.startswith("⚠️"), last
    assert "Traceback" not in last and "Internal error" not in last
    assert "No profile loaded" in out[STATUS]
    # an upload that tries to escape its folder
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../../evil.txt", "x")
    from gradio_client import handle_file

    out = c.predict(file_path=handle_file(str(evil)), api_name="/upload_zip")
    assert "refusing to extract" in answer_bubbles(out[CHAT])[-1]
    # still usable: load the demo, ask about a rank that does not exist, then a real question
    c.predict(path_text=str(demo_path), api_name="/load_path")
    out = ask(c, "why is rank 99 slow?")
    msgs = [text_of(m) for m in out[CHAT][-6:]]
    joined = "\n".join(msgs)
    assert "99" in joined and re.search(r"0\s*[-–]\s*15", joined), joined
    assert "Traceback" not in joined and "Internal error" not in joined
    out = ask(c, "why is rank 12 slow?")
    assert re.search(r"\brank\s*12\b", answer_bubbles(out[CHAT])[-1], re.I)


def test_upload_zip_extracts_privately_and_is_removed_on_close(settings, tmp_path):
    from gradio_client import handle_file

    from advisor_chat.ui.app import build_app

    prof = _generate(tmp_path, "healthy", 2)
    archive = tmp_path / f"prof-{os.getpid()}-{id(tmp_path)}.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in prof.rglob("*"):
            if f.is_file():
                zf.write(f, Path("prof") / f.relative_to(prof))
    app = build_app(settings)
    try:
        _, url, _ = app.launch(
            server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True
        )
        out = client(url).predict(file_path=handle_file(str(archive)), api_name="/upload_zip")
        assert "2 ranks" in out[STATUS], answer_bubbles(out[CHAT])
        root = app.advisor_controller.upload_root  # type: ignore[attr-defined]
        assert root.parent == settings.uploads_dir
        extracted = [p for p in root.iterdir() if p.is_dir()]
        assert len(extracted) == 1
        assert stat.S_IMODE(os.stat(extracted[0]).st_mode) == 0o700
        assert (extracted[0] / "prof").is_dir()
        # Gradio's cached copy of the upload is deleted once extracted
        from gradio.utils import get_upload_folder

        assert list(Path(get_upload_folder()).rglob(archive.name)) == []
    finally:
        app.close()
    assert not root.exists()
    assert prof.is_dir()  # the user's data is untouched


def test_session_close_removes_its_upload(settings, tmp_path):
    from advisor_chat.ui.session import Session, UIController, close_session

    prof = _generate(tmp_path, "healthy", 2)
    archive = tmp_path / "p.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in prof.rglob("*"):
            if f.is_file():
                zf.write(f, f.relative_to(prof))
    ctl = UIController(settings)
    s = Session()
    ctl.load_upload(s, archive)
    assert s.profile is not None and s.upload_dir is not None and s.upload_dir.is_dir()
    first = s.upload_dir
    ctl.load_upload(s, archive)  # a second upload replaces (and deletes) the first
    assert not first.exists() and s.upload_dir.is_dir()
    close_session(s)
    assert s.upload_dir is None
    assert not any(ctl.upload_root.iterdir())
    ctl.close()


def test_slow_answers_do_not_block_another_sessions_quick_question(server, demo_path, monkeypatch):
    """Three sessions busy with slow answers (more than the old limit of 2): a fourth session's
    quick question is answered while they are still running."""
    import threading
    import time

    from advisor_chat.agent.advisor import Advisor

    slow_s = 20.0
    orig = Advisor.stream
    started = threading.Semaphore(0)

    def stream(self, question, *a, **kw):
        if question.startswith("SLOW"):
            started.release()
            time.sleep(slow_s)
        yield from orig(self, question, *a, **kw)

    monkeypatch.setattr(Advisor, "stream", stream)
    _, url = server
    slow_clients = [client(url) for _ in range(3)]
    for c in slow_clients:
        c.predict(path_text=str(demo_path), api_name="/load_path")
    quick = client(url)
    quick.predict(path_text=str(demo_path), api_name="/load_path")
    t = time.perf_counter()
    ask(quick, "which rank is slow?")  # warm: this session's profile is analysed once
    warm_s = time.perf_counter() - t
    t0 = time.perf_counter()
    jobs = [c.submit(question="SLOW why is rank 12 slow?", api_name="/chat") for c in slow_clients]
    for _ in jobs:
        assert started.acquire(timeout=slow_s / 2), "a slow question waited in the queue"
    t1 = time.perf_counter()
    out = ask(quick, "why is rank 12 slow?")
    quick_s = time.perf_counter() - t1
    assert re.search(r"\brank\s*12\b", answer_bubbles(out[CHAT])[-1], re.I)
    assert not all(j.done() for j in jobs), "the slow answers finished first: nothing was tested"
    assert quick_s < slow_s - 2.0, (quick_s, warm_s)
    for j in jobs:
        res = j.result(timeout=120)
        assert answer_bubbles(res[CHAT])
    assert time.perf_counter() - t0 < 3 * slow_s  # the slow ones ran side by side, not in turn
