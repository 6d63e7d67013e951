"""advisor-chat: why is my distributed training job on Ascend NPUs slow?

The public entry points are re-exported lazily so that ``import advisor_chat`` stays cheap:

- :func:`advisor_chat.ingest.load_profile` reads profiling folders into a :class:`Profile`.
- :func:`advisor_chat.open_profile` loads a folder and diagnoses it (the first question is then
  answered without running the analyzers); the profile it returns shows its diagnosis in a
  notebook and answers ``.ask("...")`` (:mod:`advisor_chat.notebook`).
- :mod:`advisor_chat.analyzers` turns a profile into findings.
- :mod:`advisor_chat.agent` answers questions (offline planner or an LLM with tools).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from advisor_chat.ingest import Profile, load_profile
    from advisor_chat.notebook import open_profile

__all__ = ["Profile", "__version__", "load_profile", "open_profile"]


def __getattr__(name: str) -> Any:
    if name in ("load_profile", "Profile"):
        from advisor_chat import ingest

        return getattr(ingest, name)
    if name == "open_profile":
        from advisor_chat.notebook import open_profile

        return open_profile
    raise AttributeError(f"module 'advisor_chat' has no attribute {name!r}")
