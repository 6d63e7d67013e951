"""Typed errors, one class per boundary (STYLE.md §9).

- :class:`InputError`: the user's input cannot be used (missing path, unreadable file, ...).
  The CLI and UI show ``str(error)`` as a message; never a traceback.
- :class:`ToolArgumentError`: a model (or user) passed bad arguments to a tool. The message names
  the valid values so the caller can retry.
- :class:`NotAnswerableError`: a tool cannot answer for this profile (the data is not there).
  The message says which data would be needed.
- :class:`ConfigError`: a setting is invalid.

Anything else that escapes is a programming bug and should crash loudly in tests.
"""

from __future__ import annotations

from pathlib import Path


class AdvisorError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(AdvisorError):
    """Bad user input: a missing, empty, unreadable or unrecognizable profiling path or file.

    Args:
        message: What is wrong, in one sentence.
        path: The file or folder concerned; it is named in the message.
        remedy: What the user should do about it.
        zh: The message and remedy in Chinese, when the raiser gives them ('' otherwise); the CLI
            prints it for a Chinese question or ``--lang zh``.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        remedy: str | None = None,
        zh: str = "",
    ):
        self.message = message
        self.path = Path(path) if path is not None else None
        self.remedy = remedy
        self.zh = zh
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.message.rstrip(".") + "."]
        if self.path is not None and str(self.path) not in self.message:
            parts.append(f"File: {self.path}.")
        if self.remedy:
            parts.append(self.remedy.rstrip(".") + ".")
        return " ".join(parts)


class ToolArgumentError(AdvisorError):
    """A tool was called with arguments that do not fit this profile (e.g. a rank that does not exist).

    The message must name the valid values, e.g. ``"rank 16 does not exist; ranks are 0-15"``.

    Args:
        message: What is wrong and the valid values (English).
        zh: The same in Chinese, when the raiser gives it ('' otherwise); the CLI prints it for a
            Chinese question or ``--lang zh``.
    """

    def __init__(self, message: str, *, zh: str = ""):
        self.zh = zh
        super().__init__(message)


class NotAnswerableError(AdvisorError):
    """The profile lacks the data needed to answer; the message names the data that would.

    Args:
        message: What is missing and what would supply it (English).
        zh: The same in Chinese, when the raiser gives it ('' otherwise).
    """

    def __init__(self, message: str, *, zh: str = ""):
        self.zh = zh
        super().__init__(message)


class ConfigError(AdvisorError):
    """A setting (flag, ``ADVISOR_*`` variable or config file) is invalid."""
