"""``advisor-chat`` entry point: a typer app whose commands live in one module each."""

from __future__ import annotations

import importlib
from typing import Any

import typer

from advisor_chat import __version__

app = typer.Typer(
    name="advisor-chat",
    help="Why is my distributed training job on Ascend NPUs slow? Reads profiling folders, answers offline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _hide_flag_types() -> None:
    """Show flags without a type in the help (typer's rich help prints ``--json <bool>``).

    A flag takes no value, so ``<bool>`` after it reads as if it needed one. Options with a
    value keep their type (``--port <int>``).
    """
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "_flags_hidden", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    display_type_rich._flags_hidden = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_hide_flag_types()

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
    "mcp_cmd",
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
    import gc
    import os

    from advisor_chat.offline import ensure_offline_env

    # A command holds ~10^6 long-lived Python objects once a profile is loaded; with the default
    # generation-0 threshold (700) the collector ran ~260 times over them: 0.16 s of a 1 s `ask`
    # on a cached 1024-rank profile (measured with gc.callbacks). Collect 285x less often, as
    # mypy's command line does; cycles are still collected.
    gc.set_threshold(200_000, 30, 30)
    # pydantic looks for plugins in every installed distribution's entry points when it builds its
    # first validator (15-20 ms); this command line uses none. A user's own setting wins.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

    _check_home()
    ensure_offline_env()
    app()


def _check_home() -> None:
    """Exit 3 with one message when ``$ADVISOR_HOME`` is unusable.

    Unusable: a file, a folder that cannot be created, or a read-only folder without a case index.

    A read-only home that holds a built case index (a shared, prepared home) is usable: nothing
    is cached, the index is read as is; a note says so once.
    """
    import os

    from advisor_chat.cli.common import EXIT_CONFIG, err_console
    from advisor_chat.paths import default_home

    home = default_home()
    problem = None
    if home.exists() and not home.is_dir():
        problem = "is a file, not a folder"
    elif not home.exists():
        try:
            home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            problem = f"cannot be created ({exc.strerror or type(exc).__name__})"
    elif not os.access(home, os.W_OK | os.X_OK) and not (home / "index").is_dir():
        problem = "is read-only and holds no case index (the first run builds one there)"
    elif not os.access(home, os.W_OK | os.X_OK):
        err_console.print(
            f"note: {home} (ADVISOR_HOME) is read-only: nothing is cached, each run parses "
            "the profile again",
            highlight=False,
            soft_wrap=True,
        )
    if problem is not None:
        err_console.print(
            f"[bold red]config error:[/] {home} (ADVISOR_HOME) {problem}. Set ADVISOR_HOME to a "
            "folder this user can write (or unset it to use ~/.cache/advisor-chat)",
            highlight=False,
            soft_wrap=True,
        )
        raise SystemExit(EXIT_CONFIG)


if __name__ == "__main__":
    main()
