"""The diagnosis is computed once per profile and stored next to its cache (issue 13 item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_chat.config import load_settings
from advisor_chat.diagnosis import engine
from advisor_chat.ingest import load_profile
from advisor_chat.synth import generate


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_diagnosis_is_stored_under_home_and_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "prof"
    generate("seed-rank12", folder, ranks=16, steps=3)
    before = _files(folder)
    settings = load_settings(home=tmp_path / "home")

    p1 = load_profile(folder, settings=settings, progress=False, cache_write="now")
    d1 = engine.diagnose(p1)
    stored = list((tmp_path / "home").rglob("*.diagnosis/*.pkl"))
    assert len(stored) == 1 and stored[0].name == f"{engine.code_version()}.pkl"
    assert p1.profile_id in stored[0].parent.name
    assert _files(folder) == before  # nothing written inside the profiling folder

    # a fresh process: in-memory cache gone, profile from the cache; the rules must not run
    engine.clear_cache()
    p2 = load_profile(folder, settings=settings, progress=False)
    assert p2.cache_hit

    def boom(*a: object, **kw: object) -> None:
        raise AssertionError("diagnosis recomputed although it is stored")

    monkeypatch.setattr(engine, "_diagnose", boom)
    d2 = engine.diagnose(p2)
    assert [c.id for c in d2.causes] == [c.id for c in d1.causes]
    assert [c.summary for c in d2.causes] == [c.summary for c in d1.causes]
    assert d2.excluded_steps == d1.excluded_steps


def test_other_code_version_or_corrupt_file_recomputes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "prof"
    generate("seed-rank12", folder, ranks=8, steps=3)
    settings = load_settings(home=tmp_path / "home")
    p = load_profile(folder, settings=settings, progress=False, cache_write="now")
    d1 = engine.diagnose(p)
    path = engine._stored_path(p)
    assert path is not None and path.exists()

    path.write_bytes(b"not a pickle")
    engine.clear_cache()
    calls: list[int] = []
    real = engine._diagnose

    def counting(*a: object, **kw: object) -> object:
        calls.append(1)
        return real(*a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "_diagnose", counting)
    d2 = engine.diagnose(p)
    assert calls == [1] and [c.id for c in d2.causes] == [c.id for c in d1.causes]

    engine.clear_cache()
    monkeypatch.setattr(engine, "_CODE_VERSION", ["other-version"])
    engine.diagnose(p)
    assert calls == [1, 1]
    assert (path.parent / "other-version.pkl").exists()


def test_uncached_profile_stores_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "prof"
    generate("seed-rank12", folder, ranks=8, steps=3)
    settings = load_settings(home=tmp_path / "home")
    p = load_profile(folder, settings=settings, progress=False, use_cache=False)
    assert p.cache_dir is None and engine._stored_path(p) is None
    engine.diagnose(p)
    assert not list((tmp_path / "home").rglob("*.pkl"))


def test_open_profile_diagnoses_at_load_and_the_first_question_reuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """open_profile = load + diagnosis stored with the cache; the first answer runs no analyzer."""
    import advisor_chat
    from advisor_chat.agent import Advisor
    from advisor_chat.analyzers import base

    folder = tmp_path / "prof"
    generate("seed-rank12", folder, ranks=16, steps=3)
    settings = load_settings(home=tmp_path / "home")
    engine.clear_cache()
    profile = advisor_chat.open_profile(folder, settings=settings, progress=False)
    assert list((tmp_path / "home").rglob("*.diagnosis/*.pkl"))  # stored with the tables
    reference = engine.diagnose(profile)

    ran: list[str] = []
    real_run = base.AnalyzerSpec.run

    def counting(self, *a, **kw):  # type: ignore[no-untyped-def]
        ran.append(self.name)
        return real_run(self, *a, **kw)

    monkeypatch.setattr(engine, "_diagnose", lambda *a, **kw: pytest.fail("diagnosed twice"))
    monkeypatch.setattr(base.AnalyzerSpec, "run", counting)
    answer = Advisor(profile, settings=settings).ask("why is rank 12 slow?")
    # the rules did not run again; the answer names the culprit the stored diagnosis found
    top = reference.causes[0]
    assert top.culprit.ranks and f"rank {top.culprit.ranks[0]}" in answer.answer
    assert "slow_rank" not in ran and "slow_link" not in ran  # the cluster-wide scans were reused
