"""Parquet cache: the second load of the same folder does not parse; changes invalidate it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from advisor_chat.config import load_settings
from advisor_chat.ingest import load_profile
from advisor_chat.ingest import loader as loader_mod


def test_second_load_comes_from_cache(
    tmp_path: Path, real_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "run"
    shutil.copytree(real_samples / "pt-text-level1-2rank", root)
    settings = load_settings(home=tmp_path / "home")
    first = load_profile(root, settings=settings)
    assert not first.cache_hit and first.stats["files_parsed"] > 0
    parses = loader_mod.PARSE_STATS["parses"]

    def boom(*a, **kw):  # any parse attempt fails the test
        raise AssertionError("re-parsed a cached profile")

    monkeypatch.setattr(loader_mod, "read_rank_dir", boom)
    second = load_profile(root, settings=settings)
    assert second.cache_hit and second.stats["files_parsed"] == 0
    assert loader_mod.PARSE_STATS["parses"] == parses
    assert set(second.tables) == set(first.tables)
    for name, df in first.tables.items():
        pd.testing.assert_frame_equal(df, second.tables[name], check_dtype=False)
    assert second.warnings == first.warnings
    assert second.cite("kernels") == first.cite("kernels")
    # the cache lives under the settings home, never in the input folder
    assert any((tmp_path / "home" / "cache").rglob("*.parquet"))
    assert not list(root.rglob("*.parquet"))

    # touching an input file invalidates the entry
    monkeypatch.undo()
    st = root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    os.utime(st, ns=(st.stat().st_atime_ns, st.stat().st_mtime_ns + 1_000_000_000))
    third = load_profile(root, settings=settings)
    assert not third.cache_hit


def test_use_cache_false_always_parses(tmp_path: Path, real_samples: Path) -> None:
    settings = load_settings(home=tmp_path / "home")
    load_profile(real_samples / "cluster-8rank", settings=settings)
    again = load_profile(real_samples / "cluster-8rank", settings=settings, use_cache=False)
    assert not again.cache_hit
    cached = load_profile(real_samples / "cluster-8rank", settings=settings)
    assert cached.cache_hit
    # object columns survive the Parquet round trip
    assert list(cached.get("stage_trace")["stage_rank_list"].iloc[0]) == list(range(8))
    assert isinstance(cached.get("comm_groups")["ranks"].iloc[0], list)
