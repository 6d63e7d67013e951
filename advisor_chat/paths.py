"""The user data folder, without importing the settings machinery (pydantic).

``advisor-chat --help`` and the home check of every command need only this; the full settings
live in :mod:`advisor_chat.config`, which re-exports :func:`default_home`.
"""

from __future__ import annotations

import os
from pathlib import Path


def default_home() -> Path:
    """Return the user data folder: ``$ADVISOR_HOME`` or ``$XDG_CACHE_HOME/advisor-chat``.

    ``$XDG_CACHE_HOME`` defaults to ``~/.cache``.
    """
    env = os.environ.get("ADVISOR_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "advisor-chat"
