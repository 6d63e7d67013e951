"""Shared CLI helpers: console, error boundary, exit codes."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console

from advisor_chat.errors import (
    AdvisorError,
    ConfigError,
    InputError,
    NotAnswerableError,
    ToolArgumentError,
)
from advisor_chat.textsafe import term_text

#: Exit code when the reader of the output went away (``advisor-chat ask … | head``): what a
#: shell reports for a process ended by SIGPIPE (128 + 13), as for other Unix tools.
EXIT_BROKEN_PIPE = 141


class _Console(Console):
    """A rich console that stops quietly with :data:`EXIT_BROKEN_PIPE` when its pipe closes.

    rich's default exits 1, which this CLI reserves for bugs.
    """

    def on_broken_pipe(self) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(EXIT_BROKEN_PIPE)


console = _Console()
err_console = _Console(stderr=True)

EXIT_INPUT = 2
EXIT_CONFIG = 3
EXIT_UNANSWERABLE = 4
EXIT_ENDPOINT = 5

F = TypeVar("F", bound=Callable[..., Any])

MAX_MESSAGE_CHARS = 2000
"""Cap on an error message printed by the CLI (a garbage file must not print megabytes)."""


def _wants_zh(kwargs: dict[str, Any]) -> bool:
    """Whether the command was asked in Chinese: ``--lang zh`` or a question in Chinese."""
    if kwargs.get("lang") == "zh":
        return True
    q = kwargs.get("question")
    return isinstance(q, str) and any("\u4e00" <= ch <= "\u9fff" for ch in q)


def _msg(exc: BaseException) -> str:
    """The error's message, bounded, without escape sequences, with rich markup escaped.

    For an :class:`InputError` the message part is capped on its own, so the file it names and
    the remedy are always printed in full.
    """
    if isinstance(exc, InputError) and (exc.path is not None or exc.remedy):
        parts = [term_text(exc.message.rstrip("."), limit=MAX_MESSAGE_CHARS) + "."]
        if exc.path is not None and str(exc.path) not in exc.message:
            parts.append(f"File: {term_text(str(exc.path), limit=1000)}.")
        if exc.remedy:
            parts.append(term_text(exc.remedy.rstrip("."), limit=1000) + ".")
        return " ".join(parts)
    return term_text(str(exc), limit=MAX_MESSAGE_CHARS)


def _check_path_encoding(value: Any) -> None:
    """Refuse a path argument whose name is not valid UTF-8 (bytes that cannot be shown or stored).

    Raises:
        InputError: The path, shown with the undecodable bytes as ``xNN`` escapes, and how to fix it.
    """
    if isinstance(value, Path) and any("\udc80" <= ch <= "\udcff" for ch in str(value)):
        shown = os.fsencode(value).decode("utf-8", "backslashreplace")
        raise InputError(
            "the path has bytes that are not UTF-8 in its name (shown as \\xNN)",
            path=shown,
            remedy="Rename the file or folder with UTF-8 characters (e.g. `convmv -f gbk -t utf-8`) "
            "and run the command again",
        )


def handle_errors(func: F) -> F:
    """Turn the package's typed errors into a one-paragraph message and an exit code.

    InputError / ToolArgumentError → 2, ConfigError → 3, NotAnswerableError → 4,
    ModelEndpointError (the model endpoint cannot be reached or fails) → 5. Any other
    exception is a bug and propagates (with a traceback).
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            for value in kwargs.values():
                _check_path_encoding(value)
            return func(*args, **kwargs)
        except (InputError, ToolArgumentError) as exc:
            zh = getattr(exc, "zh", "")
            if zh and _wants_zh(kwargs):
                err_console.print(
                    f"[bold red]错误：[/]{term_text(zh, limit=2000)}",
                    highlight=False,
                    soft_wrap=True,
                )
            else:
                err_console.print(
                    f"[bold red]error:[/] {_msg(exc)}", highlight=False, soft_wrap=True
                )
            raise typer.Exit(EXIT_INPUT) from None
        except ConfigError as exc:
            err_console.print(
                f"[bold red]config error:[/] {_msg(exc)}", highlight=False, soft_wrap=True
            )
            raise typer.Exit(EXIT_CONFIG) from None
        except NotAnswerableError as exc:
            if exc.zh and _wants_zh(kwargs):
                err_console.print(
                    f"[bold yellow]信号不足：[/]{term_text(exc.zh, limit=2000)}",
                    highlight=False,
                    soft_wrap=True,
                )
            else:
                err_console.print(
                    f"[bold yellow]not enough signal:[/] {_msg(exc)}",
                    highlight=False,
                    soft_wrap=True,
                )
            raise typer.Exit(EXIT_UNANSWERABLE) from None
        except AdvisorError as exc:
            from advisor_chat.agent.llm import ModelEndpointError

            if isinstance(exc, ModelEndpointError):  # the model server is unreachable or failed
                err_console.print(
                    f"[bold red]model endpoint error:[/] {_msg(exc)}",
                    highlight=False,
                    soft_wrap=True,
                )
                raise typer.Exit(EXIT_ENDPOINT) from None
            err_console.print(f"[bold red]error:[/] {_msg(exc)}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def print_json(data: Any) -> None:
    """Write ``data`` as JSON to stdout (no rich markup, UTF-8, non-ASCII kept)."""
    import orjson

    sys.stdout.write(
        orjson.dumps(
            data,
            option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS,
            default=str,
        ).decode()
        + "\n"
    )
