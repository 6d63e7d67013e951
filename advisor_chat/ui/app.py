"""The Gradio app: pick a profiling folder, ask, see tool steps, cited evidence and plots.

A thin shell (STYLE.md §13): every action calls :class:`~advisor_chat.ui.session.UIController`,
which calls the library. Per-session data lives in ``gr.State`` (a
:class:`~advisor_chat.ui.session.Session`), never in module globals. Offline: analytics are off,
the default theme uses bundled fonts, and nothing is fetched from the internet.

Usage::

    from advisor_chat.config import load_settings
    from advisor_chat.ui.app import build_app

    app = build_app(load_settings(), profile_path="./prof")
    app.launch(server_name="127.0.0.1", server_port=7860)
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor_chat.config import Settings, load_settings
from advisor_chat.i18n import t
from advisor_chat.offline import ensure_offline_env
from advisor_chat.ui.plots import PLOT_CAPTIONS, PLOT_TITLES, PLOT_TITLES_ZH
from advisor_chat.ui.session import Session, UIController, close_session, status_markdown

if TYPE_CHECKING:
    import gradio as gr

PLOT_NAMES = tuple(PLOT_TITLES)
SESSION_TTL_S = 12 * 3600
CHAT_CONCURRENCY = 16
"""Questions answered at the same time (all sessions). Answers are mostly waiting (on a model) or
short CPU bursts, so one slow answer must not hold the others in the queue; the planner refuses
over-long questions before any work."""
LOAD_CONCURRENCY = 2
"""Folder loads / uploads at the same time (all sessions): they are memory-heavy."""

EXAMPLES_EN = [
    "why is rank 12 slow?",
    "Is this job compute, communication or host bound?",
    "Which link is slow?",
    "Compare the operators of the slowest and the fastest rank",
]
EXAMPLES_ZH = ["为什么12号卡慢？", "通信有没有瓶颈？"]

# After an answer: scroll the chat so the last question sits at the top and the answer (placed
# right under it, above the collapsed tool steps) is read from its first line. Run twice to win
# over Gradio's own autoscroll, which may land after the event finishes.
SCROLL_TO_ANSWER_JS = """
() => {
  const go = () => {
    const wrap = document.querySelector('#chat .bubble-wrap');
    const users = document.querySelectorAll('#chat [data-testid="user"]');
    if (!wrap || !users.length) return;
    const u = users[users.length - 1];
    const top = u.getBoundingClientRect().top - wrap.getBoundingClientRect().top;
    wrap.scrollTo({top: wrap.scrollTop + top - 8, behavior: 'instant'});
  };
  setTimeout(go, 150);
  setTimeout(go, 600);
}
"""

_CSS = """
#plots-col { min-width: 360px; }
footer { display: none !important; }
"""


def _session(state: Any) -> Session:
    return state if isinstance(state, Session) else Session()


def build_app(
    settings: Settings | None = None,
    *,
    profile_path: Path | str | None = None,
    baseline_path: Path | str | None = None,
) -> gr.Blocks:
    """Build (not launch) the advisor-chat web app.

    Args:
        settings: Settings; ``load_settings()`` when ``None``. ``settings.model`` picks the backend,
            ``settings.upload_*`` cap uploads, uploads go under ``settings.uploads_dir``.
        profile_path: Profiling folder every new session starts with (optional; users can
            change it in the page).
        baseline_path: Baseline profile for ``compare_profiles`` (optional).

    Returns:
        The ``gr.Blocks``; launch it with ``server_name="127.0.0.1"`` and ``share=False``.
        Closing it (``.close()``) deletes every upload folder the app created.
    """
    ensure_offline_env()
    import gradio as gr

    settings = settings or load_settings()
    ctl = UIController(settings, profile_path=profile_path, baseline_path=baseline_path)

    with gr.Blocks(
        title="advisor-chat",
        analytics_enabled=False,
        fill_width=True,
        delete_cache=(3600, 3600),  # Gradio's own copies of uploads: hourly sweep, and on close
    ) as app:
        # Gradio deletes a session's state 1 h after its tab closed, or after SESSION_TTL_S without
        # updates; close_session then removes the session's upload folder.
        state = gr.State(None, time_to_live=SESSION_TTL_S, delete_callback=close_session)
        gr.Markdown(
            "## advisor-chat · why is my Ascend training job slow?\n"
            "Point it at a profiling folder, ask in English or Chinese; every number comes from "
            "a tool call shown below the question."
        )
        with gr.Tabs():
            with gr.Tab("Chat", id="chat-tab"), gr.Row(equal_height=False):
                with gr.Column(scale=3, min_width=420):
                    with gr.Accordion(
                        "Profiling folder", open=profile_path is None, elem_id="folder-acc"
                    ):
                        with gr.Row():
                            path_box = gr.Textbox(
                                label="Folder on the server",
                                placeholder="/data/prof/job_42  (a *_ascend_pt, PROF_*, *_ascend_ms "
                                "or cluster_analysis_output folder)",
                                value=str(profile_path) if profile_path else "",
                                scale=5,
                                elem_id="path-box",
                            )
                            load_btn = gr.Button("Load", scale=1, elem_id="load-btn")
                        with gr.Row():
                            upload = gr.File(
                                label="…or upload a zipped folder (.zip)",
                                file_types=[".zip"],
                                type="filepath",
                                height=150,
                                elem_id="upload",
                            )
                            demo_btn = gr.Button(
                                "Load the demo profile (16 ranks, rank 12 slow)",
                                elem_id="demo-btn",
                            )
                    status = gr.Markdown("No profile loaded.", elem_id="status")
                    chatbot = gr.Chatbot(
                        label="advisor",
                        height=600,
                        elem_id="chat",
                        buttons=["copy"],
                        feedback_options=None,
                        placeholder="Ask about the loaded profile, e.g. *why is rank 12 slow?* "
                        "or *为什么12号卡慢？*",
                    )
                    with gr.Row():
                        box = gr.Textbox(
                            show_label=False,
                            placeholder="why is rank 12 slow? / 为什么12号卡慢？",
                            scale=6,
                            elem_id="question",
                            autofocus=True,
                        )
                        send = gr.Button("Ask", variant="primary", scale=1, elem_id="ask-btn")
                    with gr.Row():
                        gr.Examples(EXAMPLES_EN + EXAMPLES_ZH, inputs=box, label="Examples")
                        new_btn = gr.Button("New conversation", size="sm", scale=0)
                with gr.Column(scale=2, min_width=360, elem_id="plots-col"):
                    plot_note = gr.Markdown(
                        "### Evidence plots\nThe plots that support an answer appear here.",
                        elem_id="plot-note",
                    )
                    plots = [
                        gr.Plot(label=PLOT_TITLES[n], visible=False, elem_id=f"plot-{n}")
                        for n in PLOT_NAMES
                    ]
            with gr.Tab("Overview", id="overview-tab"):
                overview = gr.Markdown("Load a profile to see its inspect summary and report.")

        view = [state, chatbot, status, overview, plot_note, *plots]

        def render_view(s: Session, *, with_plots: bool = True) -> list[Any]:
            status_md = status_markdown(s, settings.model)
            out: list[Any] = [
                s,
                copy.deepcopy(s.messages),
                status_md,
                s.overview_md or "Load a profile to see its inspect summary and report.",
            ]
            if not with_plots:
                return out + [gr.skip()] * (1 + len(PLOT_NAMES))
            shown = [n for n in PLOT_NAMES if s.plots.get(n) is not None]
            missing = [n for n in s.plots if s.plots[n] is None]
            # the plots' note follows the last answer's language
            lang = "zh" if s.last_answer is not None and s.last_answer.language == "zh" else "en"
            titles = PLOT_TITLES_ZH if lang == "zh" else PLOT_TITLES
            sep = "、" if lang == "zh" else ", "
            note = f"### {t('page.plots_heading', lang)}\n"
            if shown:
                note += t("page.plots_chosen", lang, plots=sep.join(titles[n] for n in shown))
                if s.last_answer is not None and s.last_answer.plot_ranks:
                    legend = t("plot.star_legend", lang)
                    note += f" · {legend}: " + ", ".join(map(str, s.last_answer.plot_ranks))
                note += "\n\n" + "\n".join(  # how to read each plot
                    f"- **{titles[n]}**{'：' if lang == 'zh' else ': '}"
                    f"{PLOT_CAPTIONS[n][1 if lang == 'zh' else 0]}"
                    for n in shown
                )
            else:
                note += t("page.plots_empty", lang)
            if missing:
                note += "\n\n" + t(
                    "page.plots_missing", lang, plots=sep.join(titles[n] for n in missing)
                )
            out.append(note)
            for n in PLOT_NAMES:
                fig = s.plots.get(n)
                out.append(
                    gr.Plot(value=fig, visible=True)
                    if fig is not None
                    else gr.Plot(value=None, visible=False)
                )
            return out

        def on_open(state_v: Any) -> list[Any]:
            s = _session(state_v)
            ctl.ensure_default(s)
            return render_view(s)

        def on_load_path(state_v: Any, path_text: str) -> list[Any]:
            s = _session(state_v)
            ctl.load_path(s, path_text)
            return render_view(s)

        def on_upload(state_v: Any, file_path: str | None) -> list[Any]:
            s = _session(state_v)
            ctl.load_upload(s, file_path)
            _drop_gradio_copy(file_path)
            return render_view(s)

        def on_demo(state_v: Any) -> list[Any]:
            s = _session(state_v)
            ctl.load_demo(s)
            return render_view(s)

        def on_new(state_v: Any) -> list[Any]:
            s = _session(state_v)
            ctl.reset(s)
            return render_view(s)

        def on_ask(state_v: Any, question: str) -> Iterator[list[Any]]:
            s = _session(state_v)
            for _ in ctl.ask(s, question):
                yield [*render_view(s, with_plots=False), ""]
            yield [*render_view(s), ""]

        load: dict[str, Any] = {"concurrency_id": "load", "concurrency_limit": LOAD_CONCURRENCY}
        chat: dict[str, Any] = {"concurrency_id": "chat", "concurrency_limit": CHAT_CONCURRENCY}
        app.load(on_open, inputs=[state], outputs=view, api_visibility="private", **load)
        load_btn.click(on_load_path, [state, path_box], view, api_name="load_path", **load)
        path_box.submit(on_load_path, [state, path_box], view, api_visibility="private", **load)
        upload.upload(on_upload, [state, upload], view, api_name="upload_zip", **load)
        demo_btn.click(on_demo, [state], view, api_name="load_demo", **load)
        new_btn.click(on_new, [state], view, api_name="new_conversation")
        for ev in (
            send.click(on_ask, [state, box], [*view, box], api_name="chat", **chat),
            box.submit(on_ask, [state, box], [*view, box], api_visibility="private", **chat),
        ):
            ev.then(None, None, None, js=SCROLL_TO_ANSWER_JS, api_visibility="private")

    app.queue(default_concurrency_limit=LOAD_CONCURRENCY)
    _close = app.close

    def close(*args: Any, **kwargs: Any) -> Any:
        try:
            return _close(*args, **kwargs)
        finally:
            ctl.close()

    app.close = close  # type: ignore[method-assign]
    app.advisor_controller = ctl  # type: ignore[attr-defined]
    return app


def _drop_gradio_copy(file_path: str | None) -> None:
    """Delete Gradio's cached copy of an uploaded zip once it has been extracted (never a user file)."""
    if not file_path:
        return
    from gradio.utils import get_upload_folder

    path = Path(file_path).resolve()
    cache = Path(get_upload_folder()).resolve()
    if cache not in path.parents:
        return
    path.unlink(missing_ok=True)
    # Gradio stores each upload in its own <cache>/<hash>/ folder: remove it once empty.
    parent = path.parent
    while parent != cache and cache in parent.parents:
        try:
            parent.rmdir()
        except OSError:  # not empty (another upload with the same content) or already gone
            break
        parent = parent.parent


def launch(
    app: gr.Blocks,
    *,
    host: str = "127.0.0.1",
    port: int = 7860,
    settings: Settings | None = None,
    block: bool = True,
) -> tuple[Any, str]:
    """Launch ``app`` locally (``share=False``), with the upload size cap from ``settings``.

    Returns:
        ``(fastapi_app, local_url)``.
    """
    settings = settings or load_settings()
    fast, url, _ = app.launch(
        server_name=host,
        server_port=port,
        share=False,
        prevent_thread_lock=not block,
        quiet=True,  # no Gradio banner: no "set share=True" hint; serve prints the URL
        max_file_size=int(settings.upload_max_mb * 1_000_000),
        footer_links=[],
        show_error=False,
    )
    return fast, url
