"""Shared CLI helpers: console, error boundary, exit codes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
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

console = Console()
err_console = Console(stderr=True)

EXIT_INPUT = 2
EXIT_CONFIG = 3
EXIT_UNANSWERABLE = 4

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn the package's typed errors into a one-paragraph message and an exit code.

    InputError / ToolArgumentError → 2, ConfigError → 3, NotAnswerableError → 4. Any other
    exception is a bug and propagates (with a traceback).
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (InputError, ToolArgumentError) as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_INPUT) from None
        except ConfigError as exc:
            err_console.print(f"[bold red]config error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_CONFIG) from None
        except NotAnswerableError as exc:
            err_console.print(
                f"[bold yellow]not enough signal:[/] {exc}", highlight=False, soft_wrap=True
            )
            raise typer.Exit(EXIT_UNANSWERABLE) from None
        except AdvisorError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
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
