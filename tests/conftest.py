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
