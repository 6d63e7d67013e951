"""advisor_chat.textsafe: one escaping rule per output for profile-derived strings."""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt
from rich.console import Console
from rich.text import Text

from advisor_chat.textsafe import MAX_CHARS, clean, html_text, md_code, md_text, term_text

HOSTILE = [
    "![x](http://10.255.255.1/x.png)",
    "<img src=http://10.255.255.1/y.png>",
    '<a href="http://10.255.255.1/z">click</a>',
    "<script>alert(1)</script>",
    "[link](javascript:alert(1))",
    "http://10.255.255.1/auto www.example.com a@b.example",
    "| a | b |\n|---|---|\n| c | d |",
    "# heading\n[ref]: http://10.255.255.1/r",
    "**bold** _em_ `code` ~~del~~ $$x^2$$",
    "[/x] [bold]not markup[/bold] [link=http://10.255.255.1]x[/link]",
    "\x1b]8;;http://10.255.255.1\x1b\\osc link\x1b]8;;\x1b\\ \x1b[2J\x1b[31mred\x1b[0m\x07\x00",
    "rtl \u202eevil\u202c end",
    "non-utf8 \udcff name",
    "&lt;img src=x&gt; &amp;",
]


def _md() -> MarkdownIt:
    # CommonMark with HTML enabled, tables and strikethrough: stricter than Gradio's renderer.
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def _visible_text(rendered_html: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", rendered_html)).strip()


@pytest.mark.parametrize("s", HOSTILE)
def test_md_text_renders_as_its_own_text(s: str) -> None:
    out = _md().render(md_text(s))
    assert "<img" not in out and "<a " not in out and "<script" not in out
    assert "<h1" not in out and "<table" not in out and "<strong" not in out and "<code" not in out
    # The visible text is the cleaned input, character for character.
    assert _visible_text(out) == clean(s)


@pytest.mark.parametrize("s", HOSTILE)
def test_md_code_is_one_literal_span(s: str) -> None:
    out = _md().render(md_code(s))
    assert out.count("<code>") == 1
    assert "<img" not in out and "<a " not in out
    assert _visible_text(out) == clean(s).strip() or _visible_text(out) == clean(s)


@pytest.mark.parametrize("s", HOSTILE)
def test_html_text_has_no_tags(s: str) -> None:
    out = html_text(s)
    assert "<" not in out and ">" not in out and '"' not in out
    assert html.unescape(out) == clean(s)


@pytest.mark.parametrize("s", HOSTILE)
def test_term_text_prints_literally_without_escapes(s: str) -> None:
    console = Console(record=True, width=400, force_terminal=True, color_system="truecolor")
    console.print(f"[bold]path:[/] {term_text(s)}", soft_wrap=True)
    plain = console.export_text()
    assert plain.strip() == f"path: {clean(s)}".strip()
    # Only the escape sequences rich itself emits for [bold]: no OSC 8 hyperlink, no clear screen.
    raw = Text.from_markup(f"{term_text(s)}")
    assert raw.plain == clean(s)
    assert not any(span.style and "link" in str(span.style) for span in raw.spans)


def test_clean_strips_controls_and_caps_length() -> None:
    assert clean("a\x1b[31mb\x1b[0mc\x1b]0;title\x07d\x00e\x7ff\x80g\x9b1mh") == "abcdefgh"
    assert clean("line1\nline2\r\n\tline3") == "line1 line2 line3"
    assert clean("a\nb", newlines=True) == "a\nb"
    long = "x" * 10_000
    out = clean(long)
    assert len(out) == MAX_CHARS and out.endswith("…")
    assert clean(None) == "" and clean(3.5) == "3.5"
    assert len(md_text("[" * 5000)) <= 2 * MAX_CHARS
    # A lone surrogate (undecodable file name byte) becomes printable, encodable text.
    clean("bad \udcff").encode("utf-8")


_ALLOWED_TAGS = {
    "p",
    "strong",
    "em",
    "code",
    "pre",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "blockquote",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "hr",
    "br",
    "s",
}


@pytest.mark.parametrize("s", HOSTILE)
def test_md_defang_keeps_our_markdown_and_kills_links(s: str) -> None:
    from advisor_chat.textsafe import md_defang

    answer = (
        f"**The slow rank is 12.** Group {s} waits.\n\n- op `{'MatMul'}` 3.2 ms\n"
        f"> quoted {s}\n\n```text\nhttp://keep.me/in/code <b>\n```\n"
    )
    out = _md().render(md_defang(answer))
    tags = {t.lower() for t in re.findall(r"</?([a-zA-Z0-9]+)", out)}
    assert tags <= _ALLOWED_TAGS, tags - _ALLOWED_TAGS
    assert "<strong>The slow rank is 12.</strong>" in out
    assert "<blockquote>" in out and "<li>op <code>MatMul</code> 3.2 ms</li>" in out
    assert "http://keep.me/in/code &lt;b&gt;" in out  # code blocks are copied unchanged
    # Idempotent enough: defanging twice renders the same visible text.
    assert _visible_text(_md().render(md_defang(md_defang(answer)))) == _visible_text(out)


def test_md_defang_respects_existing_escapes_and_md_text_pieces() -> None:
    from advisor_chat.textsafe import md_defang

    piece = md_text("![x](http://10.255.255.1/x.png)")
    out = _md().render(md_defang(f"group {piece} and \\[not a link\\](x)"))
    assert "<img" not in out and "<a " not in out
    assert "![x](http://10.255.255.1/x.png)" in html.unescape(out)


@pytest.mark.parametrize(
    "s", ["12. item", "3) item", "- item", "+ item", "# h", "=== x", "---", "* x"]
)
def test_md_text_line_start_constructs_stay_text(s: str) -> None:
    out = _md().render(md_text(s))
    assert out.startswith("<p>") and _visible_text(out) == s


def test_md_text_keeps_paths_readable() -> None:
    assert md_text("/data/prof/job-42/rank.0.json") == "/data/prof/job-42/rank.0.json"


def test_zero_width_characters_are_removed() -> None:
    from advisor_chat.textsafe import clean

    assert clean("Mat\u200bMul\u200d\u2060V2\ufeff") == "MatMulV2"
