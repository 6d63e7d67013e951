"""``advisor-chat demo``: the 16-rank demo profile (rank 12 slow), in the browser or the terminal."""

from __future__ import annotations

import typer

from advisor_chat.cli.common import console, err_console, handle_errors

DEMO_QUESTION = "why is rank 12 slow?"


def print_demo(model: str | None = None) -> None:
    """Print the inspect summary of the demo profile and the answer to "why is rank 12 slow?"."""
    from rich.markdown import Markdown

    from advisor_chat.cli.inspect_cmd import _render as render_inspect
    from advisor_chat.cli.serve_cmd import prepare_case_index
    from advisor_chat.config import load_settings
    from advisor_chat.ingest import inspect_profile, load_profile
    from advisor_chat.synth import demo_profile
    from advisor_chat.ui.render import answer_messages

    settings = load_settings(model=model)
    prepare_case_index(settings)
    path = demo_profile(settings)
    profile = load_profile(path, settings=settings)
    console.rule(f"inspect {path}")
    render_inspect(inspect_profile(profile))
    console.rule(f"ask: {DEMO_QUESTION}")
    try:
        from advisor_chat.agent import Advisor
    except ImportError:  # the package may not re-export it
        from advisor_chat.agent.advisor import Advisor

    advisor = Advisor(profile, settings=settings)
    answer = advisor.ask(DEMO_QUESTION)
    for call in answer.tool_calls:
        console.print(f"🛠️ tool: {call.name} {call.args}", markup=False, highlight=False)
    for msg in answer_messages(answer):
        title = (msg.get("metadata") or {}).get("title")
        if title:
            console.print(title, style="bold", markup=False)
        console.print(Markdown(msg["content"].replace("<sub>", "").replace("</sub>", "")))


def register(app: typer.Typer) -> None:
    """Add the ``demo`` command to ``app``."""

    @app.command("demo")
    @handle_errors
    def demo(
        port: int = typer.Option(7860, "--port", help="TCP port of the web app."),
        host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind."),
        no_serve: bool = typer.Option(
            False, "--no-serve", help="Print the inspect summary and the answer, then exit."
        ),
        model: str | None = typer.Option(None, "--model", help="Backend (default offline)."),
    ) -> None:
        """Generate the 16-rank demo profile (rank 12 slow) and open the chat on it."""
        if no_serve:
            print_demo(model)
            return
        from advisor_chat.cli.serve_cmd import serve_app
        from advisor_chat.config import load_settings
        from advisor_chat.synth import demo_profile

        path = demo_profile(load_settings(model=model))
        err_console.print(f"demo profile: {path}", highlight=False, soft_wrap=True)
        serve_app(path, host=host, port=port, model=model, base_url=None, baseline=None)
