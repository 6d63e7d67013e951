"""Turn the agent's events and :class:`Answer` into chat messages (openai-style dicts).

A message is ``{"role": "user"|"assistant", "content": str, "metadata": {...}}``; a message with
``metadata.title`` is drawn by Gradio as a collapsible step (``status`` ``pending`` shows a
spinner, ``done`` collapses it). Only display formatting happens here (rounding included).
"""

from __future__ import annotations

import json
import re
from typing import Any

from advisor_chat.agent.answer import Answer, CitedCase, CitedFinding, Grounding
from advisor_chat.textsafe import clean, md_code, md_defang, md_text
from advisor_chat.tools.render import metric_label

Message = dict[str, Any]

TOOL_PREFIX = "🛠️ tool: "
_MAX_RESULT_CHARS = 4000

_LANGS = ("en", "zh")


def _lab(key: str, lang: str, /, **values: object) -> str:
    """A page label from the message catalogue (``page.<key>``, :mod:`advisor_chat.i18n`)."""
    from advisor_chat.i18n import t

    return t(f"page.{key}", lang, **values)


def user_message(text: str) -> Message:
    """A user bubble; links, images and HTML in the question are shown as text."""
    return {"role": "user", "content": md_defang(text)}


def assistant_message(text: str) -> Message:
    """A plain assistant bubble; ``text`` is our own Markdown (escape profile pieces first)."""
    return {"role": "assistant", "content": text}


def notice(text: str) -> Message:
    """An assistant bubble for a problem the user can fix (bad path, no profile, ...).

    ``text`` is plain text (error messages name files and paths): it is shown as text.
    """
    return {"role": "assistant", "content": f"⚠️ {md_text(text, limit=2000)}"}


def _fmt_args(args: dict[str, Any]) -> str:
    if not args:
        return "(no arguments)"
    return json.dumps(args, ensure_ascii=False, default=str)


def _code_block(text: str) -> str:
    """A fenced code block that ``text`` cannot close (fence longer than any backtick run)."""
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def tool_step(call_id: str, name: str, args: dict[str, Any]) -> Message:
    """A pending collapsible step for one tool call (arguments shown as code)."""
    return {
        "role": "assistant",
        "content": f"**arguments:** {md_code(_fmt_args(args), limit=2000)}",
        "metadata": {
            "title": f"{TOOL_PREFIX}{clean(name, limit=80)}",
            "status": "pending",
            "id": call_id,
        },
    }


def finish_tool_step(msg: Message, summary: str, error: str | None = None) -> None:
    """Add the result (or the error) to a tool step and mark it done, in place.

    The result is shown in a code block (literal text); an error as escaped text.
    """
    text = clean(summary, limit=_MAX_RESULT_CHARS, newlines=True)
    body = (
        f"**error:** {md_text(error, limit=2000)}"
        if error
        else f"**result:**\n\n{_code_block(text.strip())}"
    )
    msg["content"] = f"{msg['content']}\n\n{body}"
    msg["metadata"] = {**msg.get("metadata", {}), "status": "done"}


PENDING_TITLE = "⏳ working…"


def pending_status() -> Message:
    """A pending (spinner) status bubble shown while the answer is produced."""
    return {
        "role": "assistant",
        "content": "loading the profile and running the analysis tools…",
        "metadata": {"title": PENDING_TITLE, "status": "pending", "id": "pending-status"},
    }


def update_pending(msg: Message, tool: str) -> None:
    """Say in the pending status which tool is running now, in place."""
    msg["content"] = f"running tools… now {md_code(tool, limit=80)}"


def _num(v: float) -> str:
    if v != v:  # NaN
        return "n/a"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


_INT_NAMES = ("rank", "ranks", "votes", "steps", "step", "count", "peers", "level", "index")
_INT_SUFFIXES = ("_count", "_rank", "_ranks", "_votes", "_steps", "_step", "_id", "_level", "_n")
_INT_PREFIXES = ("n_", "num_")
_SHARE_SUFFIXES = ("_share", "_fraction", "_frac")


def _time(us: float) -> str:
    if abs(us) >= 1000:
        return f"{_num(us / 1000.0)} ms"
    return f"{_num(us)} µs"


def format_metric(name: str, value: float | int | None) -> str:
    """Display a finding metric by its name's unit (display only; values are never changed).

    ``*_us`` / ``*_ms`` / ``*_ns`` are times (µs shown as ms from 1000 µs on), ``*_gbps`` GB/s,
    ``*_mb`` MB, ``*_share`` / ``*_fraction`` percentages of 1, ``*_pct`` percentages; counts,
    ranks, votes and steps (``*_count``, ``rank``, ``votes``, ``steps``...) are integers; any
    other whole number is shown without decimals.
    """
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value).lower()
    v = float(value)
    if v != v:
        return "n/a"
    n = name.lower()
    for per in ("_per_step", "_per_call"):
        if n.endswith(per) and n != per.lstrip("_"):
            return f"{format_metric(n[: -len(per)], v)}/{per.rsplit('_', 1)[1]}"
    if n.endswith("_us"):
        return _time(v)
    if n.endswith("_ms"):
        return _time(v * 1000.0)
    if n.endswith("_ns"):
        return _time(v / 1000.0)
    if n.endswith("_gbps"):
        return f"{_num(v)} GB/s"
    if n.endswith("_mb"):
        return f"{_num(v)} MB"
    if n.endswith(_SHARE_SUFFIXES) or n in ("share", "fraction"):
        return f"{v * 100:.1f}%"
    if n.endswith(("_pct", "_percent")):
        return f"{v:.1f}%"
    is_int_name = n in _INT_NAMES or n.endswith(_INT_SUFFIXES) or n.startswith(_INT_PREFIXES)
    if (is_int_name or v.is_integer()) and abs(v) < 1e15:
        return f"{round(v):,}" if abs(v) >= 10_000 else str(round(v))
    return _num(v)


def _finding_md(f: CitedFinding, lang: str) -> str:
    from advisor_chat.i18n import messages, t

    ranks = f" — {_lab('ranks', lang, ranks=', '.join(map(str, f.ranks)))}" if f.ranks else ""
    sev = f"severity.{f.severity}"
    sev_text = t(sev, lang) if sev in messages("en") else f.severity
    lines = [
        f"**{md_code(f.id)}** ({md_text(sev_text)}){ranks}",
        "",
        md_text(f.summary_zh if lang == "zh" and f.summary_zh else f.summary, limit=2000),
    ]
    if f.metrics:
        lines.append("")
        lines.append(
            "; ".join(
                f"{md_code(metric_label(k), limit=80)} = {format_metric(k, v)}"
                for k, v in list(f.metrics.items())[:12]
            )
        )
    if f.estimated_gain_us is not None:
        gain = _lab("gain_value", lang, ms=_num(f.estimated_gain_us / 1000.0))
        lines.append(f"\n{_lab('gain', lang)}: {gain}")
    if f.sources:
        shown = ", ".join(md_code(s) for s in f.sources[:4])
        more = f" (+{len(f.sources) - 4})" if len(f.sources) > 4 else ""
        lines.append(f"\n{_lab('sources', lang)}: {shown}{more}")
    return "\n".join(lines)


def _case_title(c: CitedCase, lang: str) -> str:
    """The case title in the answer's language (Chinese title with Chinese answers)."""
    return c.title_zh if lang == "zh" and c.title_zh else c.title


def _case_md(c: CitedCase, lang: str = "en") -> str:
    """The case's id and title, with its source line on English pages.

    The source (where the case comes from) is written in English: a Chinese page names the case
    by id and Chinese title.
    """
    head = f"**{md_code(c.id)}** — {md_text(_case_title(c, lang))}"
    return head if lang == "zh" else f"{head}  \n{md_text(c.source)}"


def grounding_line(g: Grounding, lang: str = "en") -> str:
    """One line saying how many numbers of the answer were found in the tool results."""
    if g.numbers_total == 0:
        return f"ℹ️ {_lab('grounding', lang)}: {_lab('no_numbers', lang)}"
    ok = g.numbers_grounded == g.numbers_total
    line = (
        ("✅ " if ok else "⚠️ ")
        + f"{_lab('grounding', lang)}: "
        + _lab("grounded", lang, g=g.numbers_grounded, t=g.numbers_total)
    )
    if g.ungrounded:
        line += f"; {_lab('ungrounded', lang)}: " + ", ".join(
            md_code(u, limit=80) for u in g.ungrounded[:8]
        )
    return line


def _guarded_note(answer: Answer, lang: str) -> str:
    """Which answer guarded mode showed: the model's prose or the verified template."""
    key = "guarded" if answer.mode == "guarded" else "guarded_fallback"
    return _lab(key, lang, backend=answer.backend)


def answer_messages(answer: Answer) -> list[Message]:
    """The answer bubble (text, suggestions, case titles, grounding) plus collapsible evidence."""
    lang = answer.language if answer.language in _LANGS else "en"
    # The answer is Markdown written by the planner or a model and may quote profile strings
    # (or a prompt-injected link): keep its emphasis and code, make links/images/HTML text.
    parts = [md_defang(answer.answer.strip())]
    text = answer.answer
    extra = answer.unlisted_suggestions()  # the text may list them already
    if extra:
        items = []
        for s in extra:
            tail = []
            if s.case_id:
                tail.append(_lab("case_ref", lang, case=md_code(s.case_id)))
            if s.finding_id:
                tail.append(_lab("finding_ref", lang, finding=md_code(s.finding_id)))
            sep = "，" if lang == "zh" else ", "
            items.append(f"- {md_defang(s.text)}" + (f" ({sep.join(tail)})" if tail else ""))
        parts.append(f"**{_lab('suggestions', lang)}**\n" + "\n".join(items))
    unnamed = [c for c in answer.cases if c.id not in text]
    if unnamed:
        parts.append(
            f"**{_lab('cases_inline', lang)}:** "
            + "; ".join(f"{md_code(c.id)} {md_text(_case_title(c, lang))}" for c in unnamed)
        )
    footer = grounding_line(answer.grounding, lang)
    if answer.mode.startswith("guarded"):
        footer += " · " + _guarded_note(answer, lang)
    if answer.findings or answer.cases:
        footer += f" · {_lab('expand', lang)}"
    parts.append(f"<sub>{footer}</sub>")
    out: list[Message] = [assistant_message("\n\n".join(parts))]
    if answer.findings:
        out.append(
            {
                "role": "assistant",
                "content": "\n\n---\n\n".join(_finding_md(f, lang) for f in answer.findings),
                "metadata": {
                    "title": f"{_lab('findings', lang)} ({len(answer.findings)})",
                    "status": "done",
                },
            }
        )
    if answer.cases:
        out.append(
            {
                "role": "assistant",
                "content": "\n\n".join(_case_md(c, lang) for c in answer.cases),
                "metadata": {
                    "title": f"{_lab('cases', lang)} ({len(answer.cases)})",
                    "status": "done",
                },
            }
        )
    return out
