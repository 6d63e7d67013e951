"""Per-browser-session state and the actions of the web UI, without any Gradio import.

:class:`UIController` is created once per app (it holds settings and the server-configured
paths); :class:`Session` is created once per browser session and stored in ``gr.State``, so each
session has its own profile, :class:`~advisor_chat.agent.Advisor`, chat history and upload folder.
Every action turns the package's typed errors into a chat message (never a traceback); anything
else is a bug, logged with its traceback on the server and reported as an internal error.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor_chat.agent.answer import (
    Answer,
    AnswerEvent,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from advisor_chat.config import Settings
from advisor_chat.errors import AdvisorError, InputError
from advisor_chat.ingest.profile import Profile
from advisor_chat.textsafe import md_code, md_defang, md_text
from advisor_chat.ui import render
from advisor_chat.ui.plots import build_plots
from advisor_chat.ui.uploads import UploadLimits, extract_zip, private_dir, remove_upload_dir

log = logging.getLogger(__name__)

NO_PROFILE = (
    "No profiling folder is loaded yet. Type the folder's path on this server in the "
    "'Profiling folder' field and press Load, upload a zipped folder, or load the demo profile."
)
INTERNAL = "Internal error while {what} ({kind}); the details are in the server log. The app is still usable."


@dataclass
class Session:
    """What one browser session owns.

    Attributes:
        profile: The loaded profile, or ``None``.
        label: Human-readable name of the loaded folder.
        advisor: The session's :class:`~advisor_chat.agent.Advisor` (conversation memory).
        messages: Chat history (openai-style dicts, see :mod:`advisor_chat.ui.render`).
        upload_dir: Private extraction folder of the last upload (deleted with the session).
        overview_md: Markdown of ``inspect`` + ``report`` for the loaded profile.
        last_answer: The last :class:`Answer`.
        plots: Figures chosen by the last answer, ``{plot name: figure or None}``.
    """

    profile: Profile | None = None
    label: str = ""
    advisor: Any = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    upload_dir: Path | None = None
    overview_md: str = ""
    last_answer: Answer | None = None
    plots: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        """Delete the session's upload folder (called when the session ends)."""
        remove_upload_dir(self.upload_dir)
        self.upload_dir = None


def close_session(session: Session | None) -> None:
    """``gr.State`` delete callback: release what the session holds."""
    if isinstance(session, Session):
        session.close()


class UIController:
    """The app-wide part of the UI: settings, server-configured paths, upload root.

    Args:
        settings: Settings (model, home, upload limits).
        profile_path: Folder every new session starts with (``serve PATH``), optional.
        baseline_path: Baseline profile for comparisons (``serve --baseline``), optional.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        profile_path: Path | str | None = None,
        baseline_path: Path | str | None = None,
    ) -> None:
        self.settings = settings
        self.profile_path = Path(profile_path).expanduser() if profile_path else None
        self.baseline_path = Path(baseline_path).expanduser() if baseline_path else None
        self.limits = UploadLimits.from_settings(settings)
        self._lock = threading.Lock()
        self._shared: dict[str, Profile] = {}  # server-configured profiles only (read-only)
        self._overviews: dict[int, str] = {}  # overview Markdown of the shared profiles
        self._upload_root: Path | None = None
        self._finalizer: weakref.finalize | None = None

    # ----- app-wide resources -------------------------------------------------------------
    @property
    def upload_root(self) -> Path:
        """This app's private folder under ``settings.uploads_dir`` (created on first use)."""
        with self._lock:
            if self._upload_root is None:
                self._upload_root = private_dir(self.settings.uploads_dir, prefix="app-")
                self._finalizer = weakref.finalize(self, remove_upload_dir, self._upload_root)
            return self._upload_root

    def close(self) -> None:
        """Delete every upload of this app (called when the app closes)."""
        if self._finalizer is not None:
            self._finalizer()
        self._upload_root = None

    def _server_profile(self, path: Path) -> Profile:
        """Load a server-configured profile once per app; sessions share it read-only."""
        key = str(path.resolve())
        with self._lock:
            prof = self._shared.get(key)
            if prof is None:
                prof = self._load(path)
                self._shared[key] = prof
            return prof

    def _load(self, path: Path) -> Profile:
        from advisor_chat.ingest import load_profile

        return load_profile(path, settings=self.settings)

    def preload(self) -> None:
        """Load the server-configured profiles and their overview now (best effort).

        Then the first page open and the first question do not wait for them; a failure is
        reported later to the session that needs the profile.
        """
        for path in (self.profile_path, self.baseline_path):
            if path is None:
                continue
            try:
                prof = self._server_profile(path)
                if path == self.profile_path:
                    self.overview(prof)
            except Exception as exc:  # reported to the session that needs the profile
                log.info("preloading %s failed: %s", path, exc)

    def _baseline(self) -> Profile | None:
        return self._server_profile(self.baseline_path) if self.baseline_path else None

    # ----- actions --------------------------------------------------------------------
    def _guard(self, session: Session, what: str, exc: BaseException) -> None:
        if isinstance(exc, AdvisorError):
            session.messages.append(render.notice(str(exc)))
        else:
            log.exception("UI action failed while %s", what, exc_info=exc)
            session.messages.append(
                render.notice(INTERNAL.format(what=what, kind=type(exc).__name__))
            )

    def _install(self, session: Session, profile: Profile, label: str) -> None:
        try:
            from advisor_chat.agent import Advisor
        except ImportError:  # the package may not re-export it
            from advisor_chat.agent.advisor import Advisor

        advisor = Advisor(profile, settings=self.settings, baseline=self._baseline())
        if session.profile is not None:
            # another folder: a new conversation (the old answers are about the old folder)
            session.messages = []
        session.profile = profile
        session.label = label
        session.advisor = advisor
        session.last_answer = None
        session.plots = {}
        session.overview_md = self.overview(profile)
        ranks = profile.ranks
        span = f"ranks {ranks[0]}–{ranks[-1]}" if ranks else "no ranks"
        text = (
            f"📂 Loaded **{md_text(label)}**: {plural(len(ranks), 'rank')} ({span}), "
            f"{plural(len(profile.steps), 'step')}, layout {md_code(profile.layout)}."
        )
        if profile.warnings:
            text += (
                f" ⚠️ {plural(len(profile.warnings), 'data-quality warning')} (listed under "
                "the folder field above): answers may rest on partial data."
            )
        session.messages.append(
            render.assistant_message(text + " Ask a question, e.g. *which rank is slow, and why?*")
        )

    def ensure_default(self, session: Session) -> None:
        """Load the server-configured profile into a session that has none yet."""
        if session.profile is not None or self.profile_path is None:
            return
        try:
            profile = self._server_profile(self.profile_path)
            self._install(session, profile, str(self.profile_path))
        except Exception as exc:
            self._guard(session, f"loading {self.profile_path}", exc)

    def load_path(self, session: Session, path_text: str) -> None:
        """Load the folder at ``path_text`` (a path on the server) into the session."""
        text = (path_text or "").strip().strip("'\"")
        if not text:
            session.messages.append(render.notice("Type a folder path first, then press Load."))
            return
        path = Path(text).expanduser()
        try:
            if not path.exists():
                raise InputError(
                    "no such file or folder on the server",
                    path=path,
                    remedy="Check the path (it is read on the machine running advisor-chat)",
                )
            profile = self._load(path)
            self._install(session, profile, str(path))
        except Exception as exc:
            self._guard(session, f"loading {path}", exc)
            self._say_active(session)

    def _say_active(self, session: Session) -> None:
        """After a failed load, say which profile questions still go to (if any)."""
        if session.profile is not None:
            session.messages.append(
                render.notice(f"Questions still go to the profile loaded before: {session.label}.")
            )
        elif self.profile_path is not None:
            session.messages.append(
                render.notice(f"Questions still go to the server's profile: {self.profile_path}.")
            )

    def load_upload(self, session: Session, file_path: str | Path | None) -> None:
        """Extract an uploaded zip safely into a private folder and load it."""
        if not file_path:
            session.messages.append(render.notice("No file received; choose a .zip to upload."))
            return
        name = Path(file_path).name
        try:
            root = extract_zip(file_path, self.upload_root, self.limits)
        except AdvisorError as exc:
            # the user knows their zip, not the server folder Gradio stored it in
            text = str(exc).replace(str(Path(file_path)), name).replace(str(self.upload_root), name)
            session.messages.append(render.notice(text))
            return
        except Exception as exc:
            self._guard(session, f"extracting {name}", exc)
            return
        old = session.upload_dir
        new_dir = root if root.parent == self.upload_root else root.parent
        try:
            profile = self._load(root)
            self._install(session, profile, f"{name} (uploaded)")
        except AdvisorError as exc:
            remove_upload_dir(new_dir)
            # the user knows their zip, not our private extraction folder: name the zip instead
            text = str(exc)
            for inner in sorted({str(root), str(new_dir)}, key=len, reverse=True):
                text = text.replace(inner, name)
            session.messages.append(render.notice(text.replace(str(self.upload_root), name)))
            return
        except Exception as exc:
            remove_upload_dir(new_dir)
            self._guard(session, f"loading {name}", exc)
            return
        session.upload_dir = new_dir
        if old is not None and old != new_dir:
            remove_upload_dir(old)

    def load_demo(self, session: Session) -> None:
        """Generate (once) and load the 16-rank demo profile where rank 12 is slow."""
        try:
            from advisor_chat.synth import demo_profile

            path = demo_profile(self.settings)
            self._install(session, self._server_profile(Path(path)), f"demo profile ({path})")
        except Exception as exc:
            self._guard(session, "loading the demo profile", exc)

    def reset(self, session: Session) -> None:
        """Start a new conversation on the same profile."""
        session.messages = []
        session.last_answer = None
        session.plots = {}
        if session.advisor is not None:
            session.advisor.reset()

    def ask(self, session: Session, question: str) -> Iterator[None]:
        """Answer ``question`` in the session, yielding after each change to ``session.messages``."""
        question = (question or "").strip()
        if not question:
            return
        session.messages.append(render.user_message(question))
        if session.advisor is None and self.profile_path is not None:
            # echo the question before the (slow) load of the server-configured profile
            status = render.pending_status()
            session.messages.append(status)
            try:
                yield
            finally:
                _remove(session.messages, status)
            at = len(session.messages)
            self.ensure_default(session)
            # the "Loaded ..." bubble goes above the question it was loaded for
            loaded = session.messages[at:]
            del session.messages[at:]
            session.messages[at - 1 : at - 1] = loaded
        if session.advisor is None:
            yield
            session.messages.append(render.notice(NO_PROFILE))
            yield
            return
        # echo the question at once, with a pending status line that stays last until the answer
        pending = render.pending_status()
        session.messages.append(pending)

        def add(msg: dict[str, Any]) -> None:
            if pending in session.messages:
                session.messages.insert(session.messages.index(pending), msg)
            else:
                session.messages.append(msg)

        steps: dict[str, dict[str, Any]] = {}
        text_msg: dict[str, Any] | None = None
        try:
            yield  # the echo and the status reach the page before any work starts
            for event in session.advisor.stream(question):
                if isinstance(event, ToolCallEvent):
                    steps[event.id] = render.tool_step(event.id, event.name, event.args)
                    add(steps[event.id])
                    render.update_pending(pending, event.name)
                elif isinstance(event, ToolResultEvent):
                    msg = steps.get(event.id)
                    if msg is None:
                        msg = render.tool_step(event.id, event.name, {})
                        add(msg)
                    render.finish_tool_step(msg, event.summary, event.error)
                elif isinstance(event, TextEvent):
                    if text_msg is None:
                        text_msg = render.assistant_message("")
                        add(text_msg)
                    text_msg["content"] += event.text
                elif isinstance(event, AnswerEvent):
                    if text_msg is not None:
                        session.messages.remove(text_msg)
                        text_msg = None
                    _remove(session.messages, pending)
                    # the answer goes right under the question; the (collapsed) tool steps follow
                    for msg in steps.values():
                        _remove(session.messages, msg)
                    self._show_answer(session, event.answer, steps=list(steps.values()))
                yield
        except Exception as exc:
            _remove(session.messages, pending)
            self._guard(session, "answering", exc)
            yield
        finally:
            _remove(session.messages, pending)
            for msg in steps.values():
                if msg.get("metadata", {}).get("status") == "pending":
                    render.finish_tool_step(msg, "", error="interrupted")

    def _show_answer(
        self, session: Session, answer: Answer, steps: list[dict[str, Any]] | None = None
    ) -> None:
        """Append the answer bubble, then the tool steps, then the cited evidence blocks."""
        msgs = render.answer_messages(answer)
        session.messages.extend([msgs[0], *(steps or []), *msgs[1:]])
        session.last_answer = answer
        if answer.plots and session.profile is not None:
            session.plots = build_plots(session.profile, answer.plots, answer.plot_ranks)

    # ----- overview -------------------------------------------------------------------
    def overview(self, profile: Profile) -> str:
        """Markdown of the ``inspect`` summary and the full ``report`` of ``profile``.

        Cached per server-configured profile (sessions share those read-only).
        """
        shared = any(p is profile for p in self._shared.values())
        key = id(profile)
        if shared and key in self._overviews:
            return self._overviews[key]
        md = self._overview(profile)
        if shared:
            self._overviews[key] = md
        return md

    def _overview(self, profile: Profile) -> str:
        parts = ["## Inspect"]
        try:
            from advisor_chat.ingest import inspect_profile

            parts.append(_inspect_md(inspect_profile(profile)))
        except Exception as exc:
            parts.append(_overview_error("inspect", exc))
        parts.append("## Report")
        try:
            from advisor_chat.reporting import render_markdown, run_report

            # The report escapes its profile strings; defang the whole as a second line of defence.
            parts.append(md_defang(render_markdown(run_report(profile, baseline=self._baseline()))))
        except Exception as exc:
            parts.append(_overview_error("report", exc))
        return "\n\n".join(parts)


def _remove(messages: list[dict[str, Any]], msg: dict[str, Any]) -> None:
    """Remove ``msg`` (by identity) from ``messages`` if it is there."""
    for i, m in enumerate(messages):
        if m is msg:
            del messages[i]
            return


def plural(n: int, word: str) -> str:
    """``"1 step"``, ``"2 steps"`` (English display only)."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


MAX_INLINE_WARNINGS = 3


def status_markdown(session: Session, backend: str) -> str:
    """The load status line under the folder field, with the profile's data-quality warnings.

    Up to :data:`MAX_INLINE_WARNINGS` warnings are listed in full; more are folded in a
    ``<details>`` block whose summary gives their count.
    """
    prof = session.profile
    if prof is None:
        return "No profile loaded."
    line = (
        f"**Loaded:** {md_code(session.label)} · {plural(len(prof.ranks), 'rank')} · "
        f"{plural(len(prof.steps), 'step')} · backend {md_code(backend)}"
    )
    warns = [md_text(w.message, limit=1000) for w in prof.warnings]
    if not warns:
        return line
    items = "\n".join(f"- ⚠️ {w}" for w in warns)
    head = f"**{plural(len(warns), 'data-quality warning')}**"
    if len(warns) <= MAX_INLINE_WARNINGS:
        return f"{line}\n\n{head}\n\n{items}"
    return (
        f"{line}\n\n<details><summary>⚠️ {head} (click to show)</summary>\n\n{items}\n\n</details>"
    )


def _overview_error(what: str, exc: BaseException) -> str:
    if isinstance(exc, AdvisorError):
        return f"⚠️ {md_text(exc, limit=2000)}"
    log.exception("overview: %s failed", what, exc_info=exc)
    return f"⚠️ Internal error in {what} ({type(exc).__name__}); see the server log."


def rank_ranges(ranks: Any) -> str:
    """Compact a list of ranks for display: ``[0, 1, 2, 3, 8]`` → ``"0-3, 8"``."""
    try:
        vals = sorted({int(r) for r in ranks})
    except (TypeError, ValueError):
        return ", ".join(map(str, ranks))
    parts: list[str] = []
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        parts.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ", ".join(parts)


def _by_ranks(v: dict[str, Any]) -> str:
    """``{"8.0.RC2": [0, 1]}`` → ``"8.0.RC2 (ranks 0-1)"``; several values joined by ``; ``."""
    out = []
    for key, ranks in v.items():
        if isinstance(ranks, (list, tuple)) and ranks:
            word = "rank" if len(ranks) == 1 else "ranks"
            out.append(f"{key} ({word} {rank_ranges(ranks)})")
        else:
            out.append(f"{key}: {_raw(ranks)}")
    return "; ".join(out)


_INTERNAL_FIELDS = {"cache_hit", "profile_id", "file_types"}
_FIELD_NAMES = {"root": "folder", "extra_sources": "inputs not used for the tables"}


def _cell(v: Any) -> str:
    """One Markdown table cell showing ``v`` as text (profile strings escaped, one line)."""
    return md_text(_raw(v))


def _raw(v: Any) -> str:
    """``v`` as display text, unescaped (see :func:`_cell`)."""
    if isinstance(v, dict):
        lists = all(isinstance(x, (list, tuple)) for x in v.values())
        text = (
            _by_ranks(v)
            if v and lists
            else ", ".join(f"{k}: {_raw(x)}" for k, x in v.items() if k not in _INTERNAL_FIELDS)
        )
    elif isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float)) for x in v):
        text = ", ".join(map(str, v))
    elif isinstance(v, (list, tuple)):
        text = "; ".join(_raw(x) for x in v)
    else:
        text = str(v)
    return text


def _inspect_md(info: dict[str, Any], max_rows: int = 40) -> str:
    """Render the ``inspect --json`` dict as Markdown (display only).

    Internal fields (``cache_hit``, file-type counts) are dropped; rank lists are compacted
    (``0-15``); per-rank values such as versions read ``8.0.RC2 (ranks 0-15)``; warnings are a
    bullet list.
    """
    info = {k: v for k, v in info.items() if k not in _INTERNAL_FIELDS}
    out: list[str] = []
    summary: list[tuple[str, str]] = []
    for key in ("root", "layout"):
        if info.get(key):
            summary.append((_FIELD_NAMES.get(key, key), _cell(info[key])))
    for key in ("ranks", "steps"):
        vals = info.get(key)
        if isinstance(vals, list):
            vals = [v for v in vals if not (key == "steps" and isinstance(v, int) and v < 0)]
            text = f"{plural(len(vals), key[:-1])}: {rank_ranges(vals)}" if vals else "none"
            if key == "steps" and not vals:
                text = "no step markers: the whole capture is analyzed as one step"
            summary.append((key, text))
    if isinstance(info.get("profiler_level"), dict) and info["profiler_level"]:
        summary.append(("profiler level", md_text(_by_ranks(info["profiler_level"]))))
    if isinstance(info.get("versions"), dict):
        for comp, by in info["versions"].items():
            val = md_text(_by_ranks(by)) if isinstance(by, dict) else _cell(by)
            summary.append((f"{md_text(comp)} version", val))
    done = {"root", "layout", "ranks", "steps", "profiler_level", "versions", "warnings"}
    for key, v in info.items():  # other plain fields
        if key in done or v in (None, "", [], {}):
            continue
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            continue
        if isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values()):
            continue
        summary.append((_FIELD_NAMES.get(key, key).replace("_", " "), _cell(v)))
        done.add(key)
    lines = ["| field | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in summary]
    out.append("\n".join(lines))
    warns = info.get("warnings") or []
    if warns:
        items = [
            "- ⚠️ " + md_text(w.get("message", "") if isinstance(w, dict) else w, limit=1000)
            for w in warns
        ]
        out.append(f"**data-quality warnings** ({len(warns)})\n\n" + "\n".join(items))
    for key, v in info.items():
        if key in done or v in (None, "", [], {}):
            continue
        rows = (
            [{"table": k, **x} for k, x in v.items()]
            if isinstance(v, dict)
            else [x for x in v if isinstance(x, dict)]
        )
        cols: list[str] = []
        for row in rows:
            cols += [c for c in row if c not in cols and c not in _INTERNAL_FIELDS]
        head = md_text(key.replace("_", " "))
        lines = [f"**{head}** ({len(rows)})", "", "| " + " | ".join(map(md_text, cols)) + " |"]
        lines.append("|" + "---|" * len(cols))
        for row in rows[:max_rows]:
            cells = [
                md_text(rank_ranges(row[c]))
                if c == "ranks" and isinstance(row.get(c), list)
                else _cell(row.get(c, ""))
                for c in cols
            ]
            lines.append("| " + " | ".join(cells) + " |")
        if len(rows) > max_rows:
            lines.append(f"\n… {len(rows) - max_rows} more")
        out.append("\n".join(lines))
    return "\n\n".join(out)
