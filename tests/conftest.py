"""Test-wide setup: user data in a temp folder, no network, paths to the real samples."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _find_shared() -> Path | None:
    env = os.environ.get("ADVISOR_SHARED")
    candidates = [Path(env)] if env else []
    candidates += [REPO.parent / "shared", REPO / ".." / ".." / "shared"]
    for c in candidates:
        if (c / "samples" / "real").is_dir():
            return c.resolve()
    return None


SHARED = _find_shared()


def pytest_configure(config: pytest.Config) -> None:
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="advisor_home_"))
    os.environ["ADVISOR_HOME"] = str(home)
    from advisor_chat.offline import ensure_offline_env

    ensure_offline_env()


@pytest.fixture(scope="session")
def real_samples() -> Path:
    """``shared/samples/real``; fails in CI when absent, skips elsewhere."""
    if SHARED is None:
        if os.environ.get("CI"):
            pytest.fail("shared/samples/real not found next to the repository (set ADVISOR_SHARED)")
        pytest.skip("shared/samples/real not found (set ADVISOR_SHARED to the shared folder)")
    return SHARED / "samples" / "real"


@pytest.fixture(scope="session")
def scenario(tmp_path_factory: pytest.TempPathFactory):
    """Factory ``scenario(name, **kw) -> Path``: a synthetic profile, generated once per session.

    ``kw`` are `advisor_chat.synth.generate` options (ranks, steps, seed). The folder holds the
    per-rank ``*_ascend_pt`` folders (or ``before/`` and ``after/``) and ``answer_key.json``.
    Treat it as read-only: it is shared by every test of the session.
    """
    from advisor_chat.synth import generate

    made: dict[tuple, Path] = {}
    root = tmp_path_factory.mktemp("synth")

    def make(name: str, **kw) -> Path:
        key = (name, tuple(sorted(kw.items())))
        if key not in made:
            tag = "_".join([name] + [f"{k}{v}" for k, v in sorted(kw.items())])
            made[key] = generate(name, root / tag, **kw)
        return made[key]

    return make
