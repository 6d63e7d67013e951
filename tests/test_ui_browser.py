"""The web app in a real browser: Debian's chromium driven by Playwright (no `playwright install`).

Loads the demo profile, asks in English and in Chinese, checks the answer, a tool step, a plot,
that no request leaves the machine, and saves screenshots. Skips when chromium is missing, except
in CI (env ``CI`` set), where it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("ADVISOR_CHROMIUM", "/usr/bin/chromium")
CASE_IDS = sorted(p.stem for p in (REPO / "knowledge" / "cases").glob("*.md"))
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def _need_chromium() -> None:
    if Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK):
        return
    reason = (
        f"chromium not found at {CHROMIUM}: install it with "
        "`apt-get install -y chromium fonts-noto-cjk fonts-noto-color-emoji` (root), "
        "or set ADVISOR_CHROMIUM"
    )
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    _need_chromium()
    from advisor_chat.config import load_settings
    from advisor_chat.synth import demo_profile
    from advisor_chat.ui.app import build_app

    settings = load_settings()
    app = build_app(settings, profile_path=demo_profile(settings))
    try:
        _, url, _ = app.launch(
            server_name="127.0.0.1",
            server_port=_free_port(),
            prevent_thread_lock=True,
            quiet=True,
            share=False,
        )
        yield url
    finally:
        app.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    _need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        try:
            yield b
        finally:
            b.close()


def _run(browser: Any, url: str, question: str, shot: Path) -> tuple[str, list[str]]:
    requests: list[str] = []
    page = browser.new_page(viewport={"width": 1440, "height": 1200})
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto(url)
        page.locator("#status").get_by_text("16 ranks").wait_for(timeout=60_000)
        box = page.locator("#question textarea")
        box.fill(question)
        box.press("Enter")
        # the question is echoed at once (with a pending status), long before the answer
        page.locator('#chat [data-testid="user"]').filter(has_text=question).last.wait_for(
            timeout=15_000
        )
        # the answer is done when the evidence plots arrive
        page.locator("#plots-col .js-plotly-plot").first.wait_for(timeout=600_000)
        bot = page.locator('#chat [data-testid="bot"]')
        text = "\n".join(bot.all_inner_texts())
        # the app scrolls the chat so the answer is read from its first line (no manual scroll)
        answer = bot.filter(has_text=re.compile("Grounding|数据核对")).last
        page.wait_for_timeout(1200)
        top, wrap_top, wrap_bottom = answer.evaluate(
            "el => { const w = el.closest('.bubble-wrap').getBoundingClientRect();"
            " return [el.getBoundingClientRect().top, w.top, w.bottom]; }"
        )
        assert wrap_top - 1 <= top < wrap_bottom - 60, (top, wrap_top, wrap_bottom)
        page.screenshot(path=str(shot), full_page=True)
        # expand the first tool step and check its arguments are shown
        step = page.get_by_text(re.compile(r"tool: \w+")).first
        step.click()
        page.get_by_text("arguments:").first.wait_for(timeout=10_000)
        # a plot rendered with data: plotly drew at least one trace
        n_traces = page.evaluate(
            "() => { const d = document.querySelector('#plots-col .js-plotly-plot');"
            " return d && d.data ? d.data.length : 0; }"
        )
        assert n_traces > 0
        page.wait_for_timeout(300)
        page.screenshot(path=str(shot.with_name(shot.stem + "_tool.png")), full_page=True)
    finally:
        page.close()
    return text, requests


def _non_loopback(requests: list[str]) -> list[str]:
    out = []
    for u in requests:
        parsed = urlparse(u)
        if parsed.scheme in ("data", "blob", "about"):
            continue
        if parsed.hostname not in LOOPBACK:
            out.append(u)
    return out


def test_browser_demo_en_and_zh(app_url: str, browser: Any, tmp_path: Path):
    shot_en = tmp_path / "chat_en.png"
    text, requests = _run(browser, app_url, "why is rank 12 slow?", shot_en)
    assert re.search(r"\brank\s*12\b", text, re.I), text[:1000]
    assert any(cid in text for cid in CASE_IDS), text[:1000]
    assert "tool:" in text
    assert _non_loopback(requests) == []
    assert shot_en.stat().st_size > 10_000

    shot_zh = tmp_path / "chat_zh.png"
    text_zh, requests_zh = _run(browser, app_url, "为什么12号卡慢？", shot_zh)
    assert re.search(r"[\u4e00-\u9fff]", text_zh)
    assert "12" in text_zh
    assert any(cid in text_zh for cid in CASE_IDS)
    assert _non_loopback(requests_zh) == []

    out_dir = os.environ.get("ADVISOR_SCREENSHOTS")
    if out_dir:  # e.g. ADVISOR_SCREENSHOTS=docs/screenshots to refresh the README pictures
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot_en, Path(out_dir) / "chat_en.png")
        shutil.copy(shot_zh, Path(out_dir) / "chat_zh.png")


def test_upload_box_text_is_not_clipped(app_url: str, browser: Any):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    try:
        page.goto(app_url)
        page.locator("#status").get_by_text("16 ranks").wait_for(timeout=60_000)
        page.locator("#folder-acc button").first.click()  # closed when a folder is preset
        upload = page.locator("#upload")
        upload.get_by_text("Click to Upload").wait_for(timeout=10_000)
        page.wait_for_timeout(1000)  # let the accordion finish opening before measuring
        # the rectangle of the text itself (its wrapper is taller than the box and overflows)
        text, outer = page.evaluate(
            """() => {
              const box = document.querySelector('#upload');
              const walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
              let node;
              while ((node = walk.nextNode()) && !node.textContent.includes('Click to Upload')) {}
              const r = document.createRange();
              r.selectNodeContents(node);
              const t = r.getBoundingClientRect(), o = box.getBoundingClientRect();
              return [[t.top, t.bottom], [o.top, o.bottom]];
            }"""
        )
        assert outer[0] <= text[0] and text[1] <= outer[1], (text, outer)
    finally:
        page.close()


# ----- hostile strings from a profile never become live HTML, and nothing is fetched -----------


@pytest.fixture(scope="module")
def hostile_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _need_chromium()
    from _hostile import plant

    from advisor_chat.config import load_settings
    from advisor_chat.synth import generate
    from advisor_chat.ui.app import build_app

    root = generate("seed-rank12", tmp_path_factory.mktemp("hostile") / "prof", ranks=4, steps=2)
    plant(root)
    app = build_app(load_settings(), profile_path=root)
    try:
        _, url, _ = app.launch(
            server_name="127.0.0.1",
            server_port=_free_port(),
            prevent_thread_lock=True,
            quiet=True,
            share=False,
        )
        yield url
    finally:
        app.close()


_INJECTED_JS = """(host) => {
  const hits = [];
  for (const el of document.querySelectorAll('img, a, image, script, iframe, object, embed')) {
    for (const attr of ['src', 'href', 'xlink:href', 'data']) {
      const v = el.getAttribute(attr);
      if (v && v.includes(host)) hits.push(el.tagName + ' ' + attr + '=' + v);
    }
    if (el.tagName === 'SCRIPT' && el.textContent.includes('__pwned')) hits.push('script');
  }
  return hits;
}"""


def test_injected_profile_strings_stay_text_and_nothing_leaves_loopback(
    hostile_url: str, browser: Any
):
    from _hostile import EVIL_HOST
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    requests: list[str] = []
    page = browser.new_page(viewport={"width": 1440, "height": 1200})
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto(hostile_url)
        page.locator("#status").get_by_text("4 ranks").wait_for(timeout=120_000)
        box = page.locator("#question textarea")
        for question in (
            "which communication groups are there?",
            "Compare the operators of the slowest and the fastest rank",
            "check the HCCL environment",
        ):
            n = page.locator('#chat [data-testid="user"]').count()
            box.fill(question)
            box.press("Enter")
            # (a loaded 2-core CI machine can take more than 15 s to render the message; an
            # Enter pressed while the page still finishes the previous answer can be dropped:
            # the question then still stands in the box and is sent again, once)
            sent = page.locator('#chat [data-testid="user"]').nth(n)
            try:
                sent.wait_for(timeout=60_000)
            except PlaywrightTimeout:
                if box.input_value() == question:
                    box.press("Enter")
                sent.wait_for(timeout=120_000)
            page.get_by_text(re.compile("Grounding")).nth(n).wait_for(timeout=300_000)
        # open every collapsible block (tool steps, cited findings, cases)
        titles = page.locator("#chat").get_by_text(
            re.compile(r"tool: \\w+|cited findings|cited cases")
        )
        for title in titles.all():
            title.click(timeout=5_000)
        page.wait_for_timeout(500)
        chat_hits = page.evaluate(_INJECTED_JS, EVIL_HOST)
        chat_text = page.locator("#chat").inner_text()
        # the Overview tab: inspect (communication groups with the planted name) and the report
        page.get_by_role("tab", name="Overview").click()
        page.get_by_text("Inspect").first.wait_for(timeout=30_000)
        page.wait_for_timeout(500)
        overview_text = page.locator("body").inner_text()
        hits = chat_hits + page.evaluate(_INJECTED_JS, EVIL_HOST)
        assert hits == [], hits
        assert page.evaluate("() => window.__pwned === undefined")
        # the planted group name is visible as text (escaped, not dropped)
        assert "![x](http://10.255.255.1/md.png)" in overview_text + chat_text
        page.wait_for_timeout(1000)  # give any late image fetch the chance to show up
    finally:
        page.close()
    assert _non_loopback(requests) == [], _non_loopback(requests)
    assert not any(EVIL_HOST in u for u in requests)
