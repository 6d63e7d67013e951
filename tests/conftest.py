"""Test-wide setup: user data in a temp folder, no network, paths to the real samples."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


#: The real samples shipped with the repository (Mulan PSL v2; see tests/data/real/PROVENANCE.md).
REPO_REAL = REPO / "tests" / "data" / "real"


def find_real_samples() -> Path | None:
    """The real samples folder: ``tests/data/real`` first, then ``$ADVISOR_SHARED/samples/real``,
    then ``../shared/samples/real`` beside the repository (``None`` when none exists)."""
    candidates = [REPO_REAL]
    env = os.environ.get("ADVISOR_SHARED")
    if env:
        candidates.append(Path(env) / "samples" / "real")
    candidates += [
        REPO.parent / "shared" / "samples" / "real",
        REPO.parent.parent / "shared" / "samples" / "real",
    ]
    for c in candidates:
        if (c / "PROVENANCE.md").is_file():
            return c.resolve()
    return None


REAL = find_real_samples()


def pytest_configure(config: pytest.Config) -> None:
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="advisor_home_"))
    config._advisor_home = home  # type: ignore[attr-defined]
    os.environ["ADVISOR_HOME"] = str(home)
    from advisor_chat.offline import ensure_offline_env

    ensure_offline_env()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the session's ADVISOR_HOME (caches, Chroma store) so runs leave nothing in /tmp."""
    import shutil

    home = getattr(config, "_advisor_home", None)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def real_samples() -> Path:
    """The real samples (``tests/data/real``). A test that needs them FAILS when they are absent:
    they ship with the repository, so a missing folder is a broken checkout, not an optional extra."""
    if REAL is None:
        pytest.fail(
            f"real samples not found: expected {REPO_REAL} (shipped with the repository), "
            "$ADVISOR_SHARED/samples/real or ../shared/samples/real"
        )
    return REAL


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
