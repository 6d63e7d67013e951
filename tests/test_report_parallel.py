"""The report's forked helper and the forked cache writer change nothing but the wall time.

``reporting._run_jobs`` runs part of the analyzers in a forked helper process for large profiles
and merges the helper's heavy-table reads back; ``save_cached`` writes the cache from a forked
process. Expected values come from the same code run in one process (``FORK_HELPERS`` off): the
report (findings, notes, run statuses, diagnosis) and the profile afterwards (heavy tables, their
sources, warnings, read counts) must be equal. The failure paths (helper dies, helper raises)
must end with the one-process result or the exception, never a hang.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from advisor_chat import reporting
from advisor_chat.analyzers.base import REGISTRY
from advisor_chat.config import load_settings
from advisor_chat.ingest import common, load_profile, loader

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
    reason="forked helpers run on Linux with 2+ CPUs only",
)


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Use the helper on any profile (the threshold is for speed, not correctness)."""
    monkeypatch.setattr(reporting, "PARALLEL_FROM_RANKS", 1)


@pytest.fixture
def calls_here(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the analyzers run in this process (the helper's calls happen in its copy)."""
    seen: list[str] = []
    real = reporting._run_one

    def spy(job: Any, profile: Any, strict: bool) -> Any:
        if os.getpid() == parent:
            seen.append(job.spec.name)
        return real(job, profile, strict)

    parent = os.getpid()
    monkeypatch.setattr(reporting, "_run_one", spy)
    return seen


def _state(profile: Any, rep: reporting.Report) -> dict[str, Any]:
    """What must not depend on where the analyzers ran."""
    heavy = {}
    for name in ("kernels", "host_dispatch"):
        df = profile.tables.loaded(name)
        heavy[name] = None if df is None else df.reset_index(drop=True)
    return {
        "findings": [(f.id, f.summary, sorted(f.metrics.items())) for f in rep.findings],
        "notes": list(rep.notes),
        "runs": [(r.name, r.status, r.findings) for r in rep.runs],
        "causes": [(c.id, c.summary) for c in rep.diagnosis.causes] if rep.diagnosis else [],
        "heavy": heavy,
        "sources": {
            n: sorted((s.path, s.rank, s.rows) for s in profile.sources.get(n, []))
            for n in ("kernels", "host_dispatch")
        },
        "warnings": sorted((w.code, w.message) for w in profile.warnings),
        "read": {k: v for k, v in profile.stats.items() if k.endswith("_ranks_read")},
    }


def _run(path: Path, home: Path, *, fork: bool, rank: int | None = None) -> dict[str, Any]:
    common.FORK_HELPERS = fork
    try:
        p = load_profile(path, settings=load_settings(home=home), use_cache=False, progress=False)
        rep = reporting.run_report(p, rank=rank, strict=True)
    finally:
        common.FORK_HELPERS = True
    return _state(p, rep)


def _assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in a:
        if key == "heavy":
            for name, df in a[key].items():
                other = b[key][name]
                assert (df is None) == (other is None), name
                if df is not None:
                    pd.testing.assert_frame_equal(df, other, check_like=False)
        else:
            assert a[key] == b[key], key


@pytest.mark.parametrize("rank", [None, 12])
def test_helper_report_equals_one_process(
    scenario: Any, tmp_path: Path, forced: None, calls_here: list[str], rank: int | None
) -> None:
    root = scenario("seed-rank12", ranks=32, steps=3)
    one = _run(root, tmp_path, fork=False, rank=rank)
    n_jobs = len(calls_here)
    calls_here.clear()
    two = _run(root, tmp_path, fork=True, rank=rank)
    assert 0 < len(calls_here) < n_jobs, "the helper ran none (or all) of the analyzers"
    assert one["read"].get("kernels_ranks_read", 0) > 0  # heavy reads happened, some in the helper
    _assert_same(one, two)


def test_helper_report_equals_one_process_real(
    real_samples: Path, tmp_path: Path, forced: None, calls_here: list[str]
) -> None:
    path = real_samples / "cluster-16rank-pp2"
    one = _run(path, tmp_path, fork=False)
    calls_here.clear()
    two = _run(path, tmp_path, fork=True)
    assert calls_here, "nothing ran in this process"
    _assert_same(one, two)


def test_dead_helper_leaves_its_analyzers_to_the_parent(
    scenario: Any, tmp_path: Path, forced: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = scenario("seed-rank12", ranks=32, steps=3)
    one = _run(root, tmp_path, fork=False)
    monkeypatch.setattr(reporting, "_helper_main", lambda *a: os._exit(3))
    _assert_same(one, _run(root, tmp_path, fork=True))


def test_helper_exception_is_raised_in_strict_mode_and_a_note_otherwise(
    scenario: Any, tmp_path: Path, forced: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = scenario("seed-rank12", ranks=32, steps=3)

    def boom(*a: Any, **k: Any) -> Any:
        raise RuntimeError("step_trend exploded")

    monkeypatch.setitem(
        REGISTRY, "step_trend", dataclasses.replace(REGISTRY["step_trend"], func=boom)
    )
    # everything but the first analyzer goes to the helper, so step_trend runs there
    monkeypatch.setattr(reporting, "_split", lambda jobs: (jobs[:1], jobs[1:]))
    p = load_profile(root, settings=load_settings(home=tmp_path), use_cache=False, progress=False)
    with pytest.raises(RuntimeError, match="step_trend exploded"):
        reporting.run_report(p, strict=True)
    rep = reporting.run_report(p, strict=False)
    assert any("[step_trend] internal error" in n and "exploded" in n for n in rep.notes)
    assert [r.status for r in rep.runs if r.name == "step_trend"] == ["error"]
    import multiprocessing

    assert not [c for c in multiprocessing.active_children() if c.name == "advisor-report-helper"]


def test_cache_written_by_a_forked_process_unless_threads_run(
    scenario: Any, tmp_path: Path
) -> None:
    import multiprocessing.process

    root = scenario("seed-rank12", ranks=8, steps=3)
    settings = load_settings(home=tmp_path)
    p = load_profile(root, settings=settings, progress=False)
    writer = loader._PENDING_WRITES[p.profile_id]
    assert isinstance(writer, multiprocessing.process.BaseProcess)
    loader.wait_cache_writes()
    assert writer.exitcode == 0
    again = load_profile(root, settings=settings, progress=False)
    assert again.cache_hit
    for name in ("step_trace", "comm_ops", "comm_matrix"):
        # the cache stores repeated strings as categories: compare values
        pd.testing.assert_frame_equal(again.get(name).astype(object), p.get(name).astype(object))

    # with another thread running, a fork could copy a lock that thread holds: a thread writes
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        home2 = tmp_path / "other"
        q = load_profile(root, settings=load_settings(home=home2), progress=False)
        assert isinstance(loader._PENDING_WRITES[q.profile_id], threading.Thread)
        loader.wait_cache_writes()
    finally:
        stop.set()
        other.join()
    assert load_profile(root, settings=load_settings(home=home2), progress=False).cache_hit


def test_replay_merges_another_readers_reads_without_reading(scenario: Any, tmp_path: Path) -> None:
    """What a helper read (its journal) lands in the parent's profile as if read there."""
    root = scenario("seed-rank12", ranks=32, steps=3)
    settings = load_settings(home=tmp_path)

    def fresh() -> Any:
        return load_profile(root, settings=settings, use_cache=False, progress=False)

    helper, parent, direct = fresh(), fresh(), fresh()
    helper.heavy.journal = []
    helper.kernels_for([3, 4, 5])
    helper.table_for("host_dispatch", [4])
    parent.kernels_for([4])  # read here meanwhile: not merged twice
    parsed = loader.PARSE_STATS.get("heavy_ranks_parsed", 0)
    parent.heavy.replay(helper.heavy.journal)
    assert loader.PARSE_STATS.get("heavy_ranks_parsed", 0) == parsed  # nothing was read
    direct.kernels_for([4])
    direct.kernels_for([3, 4, 5])
    direct.table_for("host_dispatch", [4])
    for name in ("kernels", "host_dispatch"):
        got = parent.tables.loaded(name)
        want = direct.tables.loaded(name)
        pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))
        assert parent.heavy.loaded[name] == direct.heavy.loaded[name]
        assert sorted(map(str, parent.sources[name])) == sorted(map(str, direct.sources[name]))
    assert parent.stats["kernels_ranks_read"] == direct.stats["kernels_ranks_read"] == 3
    assert parent.stats["host_dispatch_ranks_read"] == 1
