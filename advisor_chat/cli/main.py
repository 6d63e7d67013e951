"""``advisor-chat`` entry point: a typer app whose commands live in one module each."""

from __future__ import annotations

import importlib

import typer

from advisor_chat import __version__

app = typer.Typer(
    name="advisor-chat",
    help="Why is my distributed training job on Ascend NPUs slow? Reads profiling folders, answers offline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines ``register(app: typer.Typer) -> None``.
_COMMAND_MODULES = (
    "inspect_cmd",
    "report_cmd",
    "ask_cmd",
    "kb_cmd",
    "serve_cmd",
    "eval_cmd",
    "demo_cmd",
    "generate_cmd",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"advisor-chat {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Why is my distributed training job on Ascend NPUs slow?"""


for _name in _COMMAND_MODULES:
    try:
        _mod = importlib.import_module(f"advisor_chat.cli.{_name}")
    except ModuleNotFoundError as exc:  # a command module not written yet
        if exc.name != f"advisor_chat.cli.{_name}":
            raise
        continue
    _mod.register(app)


def main() -> None:
    """Console-script entry point."""
    from advisor_chat.offline import ensure_offline_env

    ensure_offline_env()
    app()


if __name__ == "__main__":
    main()
