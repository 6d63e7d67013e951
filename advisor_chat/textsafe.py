r"""One escaping rule for every string that comes from a profile, per output.

Profile folders are user input: a ``group_name`` in ``profiler_metadata.json``, an operator name,
a file or folder name can hold anything, including Markdown images (``![x](http://host/x.png)``),
raw HTML (``<img src=…>``, ``<a href=…>``, ``<script>``), rich markup (``[/x]``) or terminal
escape sequences (``\x1b]8;;…``, ``\x1b[2J``). Every output that shows such a string passes it
through exactly one function of this module, chosen by the output:

- :func:`md_text`: Markdown (chat answers, cited findings, ``report -f md``): the string renders
  as plain text; no link, image, autolink, HTML, heading, table or math is live.
- :func:`md_code`: Markdown inline code span (paths and identifiers shown as code).
- :func:`md_defang`: Markdown *written by us or a model* that may quote profile strings (an
  answer): emphasis, lists, tables and code stay; links, images, autolinks and HTML are made
  text. Use it on a whole answer; use :func:`md_text` on each profile piece you interpolate.
- :func:`html_text`: HTML (``report -f html``, Gradio HTML components, plotly labels and hover).
- :func:`term_text`: terminal through rich (markup escaped so ``[/x]`` cannot raise
  ``MarkupError``); :func:`term_plain` for terminal output printed without markup.

All of them first apply :func:`clean`: strip ANSI/OSC escape sequences, C0/C1 control
characters and Unicode bidi overrides, and cap the length (default :data:`MAX_CHARS`
characters, with ``…`` marking the cut), so one hostile cell cannot flood an answer.

The rule is *escape at the output, once*: analyzers, tools and the diagnosis keep raw strings;
renderers escape. Escaping twice shows backslashes or ``&amp;lt;`` to the user, so a renderer
escapes only the profile-derived pieces it interpolates, never its own finished text.
"""

from __future__ import annotations

import html
import re

__all__ = [
    "MAX_CHARS",
    "clean",
    "html_text",
    "md_code",
    "md_defang",
    "md_text",
    "term_plain",
    "term_text",
]

MAX_CHARS = 300
"""Default cap on the characters of one profile string in any output (after cleaning)."""

# ANSI escape sequences: CSI (ESC [ … final byte), OSC (ESC ] … BEL or ESC \), DCS/SOS/PM/APC
# strings (ESC P/X/^/_ … ST), and two-byte ESC sequences; plus their 8-bit C1 forms.
_ANSI = re.compile(
    r"""
    (?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]                       # CSI
  | (?:\x1b\]|\x9d).*?(?:\x07|\x1b\\|\x9c|$)               # OSC, up to BEL / ST / end
  | (?:\x1b[PX^_]|[\x90\x98\x9e\x9f]).*?(?:\x1b\\|\x9c|$)  # DCS, SOS, PM, APC
  | \x1b[ -/]*[0-~]?                                       # other ESC sequences (and a lone ESC)
    """,
    re.VERBOSE | re.DOTALL,
)
# C0 and C1 controls except tab/newline (handled by the caller's ``newlines``), DEL, the
# Unicode bidi controls that can make a terminal or page show text in a misleading order, and
# the invisible zero-width characters (ZWSP, ZWNJ, ZWJ, word joiner, BOM) that make two names that
# look the same differ.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]"
)
_NEWLINES = re.compile(r"[\t\r\n\u2028\u2029\x85]+")
# Markdown characters that can start something live anywhere in a line (emphasis, links, images,
# code, tables, strikethrough, math, escapes); ``<``, ``>`` and ``&`` become HTML entities
# instead, which every Markdown renderer shows as text. Other punctuation (``. / - : ( )``) is
# left alone so paths and numbers stay readable in the Markdown source.
_MD_INLINE = re.compile(r"([\\`*_\[\]!|~$])")
# ... and what is live only at the start of a line (headings, list items, thematic breaks).
_MD_LINE_START = re.compile(r"^(\s*)([#+=-])")
_MD_ORDERED = re.compile(r"^(\s*\d+)([.)])")
_WWW = re.compile(r"(?i)\b(www)(\.)")
_URL_SCHEME = re.compile(r"(?i)\b(https?|ftp|file|data|javascript|mailto)(:)")


def clean(s: object, *, limit: int | None = MAX_CHARS, newlines: bool = False) -> str:
    r"""Return ``s`` as a printable, bounded string: no escape sequences or control characters.

    Args:
        s: Any value; ``None`` gives ``""``, other non-strings go through ``str()``.
        limit: Maximum characters kept (``None``: no cap). A cut string ends with ``…``.
        newlines: Keep line breaks (``\n``) and tabs; otherwise every run of them becomes one
            space (a profile identifier is one line).

    Returns:
        The cleaned string. Never raises for any input (bytes-like values are shown via
        ``str()``; lone surrogates from undecodable file names become ``\udcXX`` text).
    """
    if s is None:
        return ""
    text = s if isinstance(s, str) else str(s)
    if limit is not None and len(text) > 8 * limit + 64:
        text = text[: 8 * limit + 64]  # bound the regex work before cleaning
    text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n") if newlines else _NEWLINES.sub(" ", text)
    text = _CONTROL.sub("", text)
    # Lone surrogates (from os.fsdecode of non-UTF-8 names) cannot be encoded for output.
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text


def md_text(s: object, *, limit: int | None = MAX_CHARS) -> str:
    r"""Escape a profile string for Markdown so it renders as exactly its text.

    Args:
        s: The profile-derived value (group name, operator name, path, ...).
        limit: Length cap, see :func:`clean`.

    Returns:
        One line of Markdown source: ``\ ` * _ [ ] ! | ~ $`` backslash-escaped, ``<``, ``>``,
        ``&`` as HTML entities, a leading ``#``/``-``/``+``/``=``/``1.`` escaped, and autolink
        starts broken (``http\://``, ``www\.``, ``a\@b``): no image, link, autolink, HTML tag,
        emphasis, heading, list, table cell break or math delimiter is live. Paths and numbers
        keep their ``/ . - :`` unescaped.
    """
    text = html.escape(clean(s, limit=limit), quote=False)
    text = _MD_INLINE.sub(r"\\\1", text)
    text = _MD_LINE_START.sub(r"\1\\\2", text, count=1)
    text = _MD_ORDERED.sub(r"\1\\\2", text, count=1)
    text = _URL_SCHEME.sub(r"\1\\\2", text)
    text = _WWW.sub(r"\1\\\2", text)
    return text.replace("@", "\\@")


def md_code(s: object, *, limit: int | None = MAX_CHARS) -> str:
    """Return a profile string as a Markdown inline code span (shown literally, never live).

    The fence is one backtick longer than the longest backtick run inside, with spaces so a
    leading or trailing backtick cannot close it (CommonMark §6.1).

    Args:
        s: The profile-derived value.
        limit: Length cap, see :func:`clean`.

    Returns:
        ``` `text` ``` (or a longer fence); ``""`` for an empty string.
    """
    text = clean(s, limit=limit)
    if not text:
        return ""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) or longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def html_text(s: object, *, limit: int | None = MAX_CHARS) -> str:
    """Escape a profile string for HTML text or attribute values (also plotly labels/hover).

    Args:
        s: The profile-derived value.
        limit: Length cap, see :func:`clean`.

    Returns:
        The cleaned string with ``& < > " '`` as entities.
    """
    return html.escape(clean(s, limit=limit), quote=True)


def term_text(s: object, *, limit: int | None = MAX_CHARS) -> str:
    """Make a profile string safe to interpolate into a rich markup string for the terminal.

    Args:
        s: The profile-derived value.
        limit: Length cap, see :func:`clean`.

    Returns:
        The cleaned string (no escape sequences, no control characters) with rich markup
        escaped: ``[/x]`` prints literally instead of raising ``rich.errors.MarkupError``.
    """
    from rich.markup import escape

    return escape(clean(s, limit=limit))


def term_plain(s: object, *, limit: int | None = MAX_CHARS, newlines: bool = False) -> str:
    """Clean a profile string for terminal output printed *without* rich markup.

    Use for ``print``/``sys.stdout.write`` or ``console.print(..., markup=False)``.

    Args:
        s: The profile-derived value.
        limit: Length cap, see :func:`clean`.
        newlines: Keep line breaks, see :func:`clean`.

    Returns:
        The cleaned string; no escape sequences or control characters reach the terminal.
    """
    return clean(s, limit=limit, newlines=newlines)


_FENCE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})")


def _defang_plain(text: str, line_start: bool) -> str:
    """Escape link/HTML/autolink syntax in a piece of Markdown with no code span in it."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:  # an existing escape: keep it and the escaped char
            out.append(text[i : i + 2])
            i += 2
            line_start = False
            continue
        if ch in "[]":
            out.append("\\" + ch)
        elif ch == "<":
            out.append("&lt;")
        elif ch == ">" and not line_start:  # a '>' opening a line is a block quote
            out.append("&gt;")
        else:
            out.append(ch)
        if ch == "\n":
            line_start = True
        elif not ch.isspace():
            line_start = False
        i += 1
    res = _URL_SCHEME.sub(r"\1\\\2", "".join(out))
    res = _WWW.sub(r"\1\\\2", res)
    return re.sub(r"(?<!\\)@", r"\\@", res)


_CODE_SPAN = re.compile(r"(?<![`\\])(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


def _defang_inline(text: str) -> str:
    """Defang everything outside complete code spans (code spans render literally)."""
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_defang_plain(text[pos : m.start()], not out or text[pos - 1 : pos] == "\n"))
        out.append(m.group(0))
        pos = m.end()
    out.append(_defang_plain(text[pos:], pos == 0 or text[pos - 1 : pos] == "\n"))
    return "".join(out)


def md_defang(markdown: str, *, limit: int | None = 20_000) -> str:
    r"""Make Markdown we did not fully write (answers quoting profile strings) inert.

    Keeps emphasis, headings, lists, tables, block quotes and code (fenced blocks and code spans
    are copied unchanged: they render literally). Everything else that could fetch or link is
    made text: ``[``/``]`` are escaped (no link, image or reference), ``<``/``>`` become
    entities (no HTML, no ``<http://…>`` autolink; a ``>`` opening a line stays a quote),
    ``scheme:`` and ``www.`` and ``@`` are escaped (no GFM bare-URL or e-mail autolink).
    Already escaped characters (``\[``) are left as they are, so applying it to text that
    contains :func:`md_text` pieces is safe.

    Args:
        markdown: The Markdown source.
        limit: Length cap, see :func:`clean` (line breaks are kept).

    Returns:
        Markdown whose rendering contains no link, image or HTML element.
    """
    text = clean(markdown, limit=limit, newlines=True)
    out: list[str] = []
    fence: str | None = None
    buf: list[str] = []

    def flush() -> None:
        if buf:
            out.append(_defang_inline("".join(buf)))
            buf.clear()

    for line in text.splitlines(keepends=True):
        m = _FENCE.match(line)
        if fence is None and m:
            flush()
            fence = m.group(1)[0] * len(m.group(1))
            out.append(line)
        elif fence is not None:
            out.append(line)
            if line.strip().startswith(fence) and set(line.strip()) == {fence[0]}:
                fence = None
        else:
            buf.append(line)
    flush()
    return "".join(out)
