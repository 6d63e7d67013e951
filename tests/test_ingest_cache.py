"""Parquet cache: the second load of the same folder does not parse; changes invalidate it."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from advisor_chat.config import Settings, load_settings
from advisor_chat.ingest import load_profile
from advisor_chat.ingest import loader as loader_mod


def _copy(tmp_path: Path, sample: Path) -> tuple[Path, Settings]:
    """A writable copy of ``sample`` (tmp_path/run) and settings with their own home."""
    root = tmp_path / "run"
    shutil.copytree(sample, root)
    return root, load_settings(home=tmp_path / "home")


def test_second_load_comes_from_cache(
    tmp_path: Path, real_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, settings = _copy(tmp_path, real_samples / "pt-text-level1-2rank")
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
        pd.testing.assert_frame_equal(
            df, second.tables[name], check_dtype=False, check_categorical=False
        )
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


def test_heavy_tables_are_cached_as_read(
    tmp_path: Path, real_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor_chat.ingest import text as text_mod

    root, settings = _copy(tmp_path, real_samples / "pt-text-level1-2rank")
    first = load_profile(root, settings=settings)
    k0 = first.kernels_for([0])
    h1 = first.host_dispatch_for([1])
    assert not k0.empty and not h1.empty
    loader_mod.wait_cache_writes()
    heavy_dir = tmp_path / "home" / "cache" / "profiles" / f"{first.profile_id}.heavy"
    assert len(list((heavy_dir / "kernels").glob("part-*.parquet"))) == 1
    assert len(list((heavy_dir / "host_dispatch").glob("part-*.parquet"))) == 1
    # the profile's own cache holds only the light tables
    light = {p.stem for p in (heavy_dir.parent / first.profile_id).glob("*.parquet")}
    assert "step_trace" in light and not light & {"kernels", "host_dispatch"}

    def boom(*a, **kw):
        raise AssertionError("parsed a heavy file that was cached")

    monkeypatch.setattr(text_mod, "read_kernels_arrow", boom)
    monkeypatch.setattr(loader_mod, "_trace_job", boom)
    second = load_profile(root, settings=settings)
    assert second.cache_hit and second.has("kernels") and second.has("host_dispatch")
    pd.testing.assert_frame_equal(second.kernels_for([0]), k0, check_dtype=False)
    pd.testing.assert_frame_equal(second.host_dispatch_for([1]), h1, check_dtype=False)
    # a rank read from the cache still cites its file (it was "no source file")
    assert second.cite("host_dispatch", 1) == first.cite("host_dispatch", 1)
    assert "trace_view.json" in second.cite("host_dispatch")
    with pytest.raises(AssertionError, match="parsed a heavy file"):
        second.kernels_for([1])  # never read: parsed now (and cached)
    monkeypatch.undo()
    parsed = loader_mod.PARSE_STATS.get("heavy_ranks_parsed", 0)
    full = second.get("kernels")
    assert loader_mod.PARSE_STATS["heavy_ranks_parsed"] == parsed + 1  # only rank 1 was parsed
    pd.testing.assert_frame_equal(
        full.reset_index(drop=True), first.get("kernels").reset_index(drop=True), check_dtype=False
    )


def test_cache_written_in_the_background_is_waited_for(tmp_path: Path, real_samples: Path) -> None:
    root, settings = _copy(tmp_path, real_samples / "pt-text-level1-2rank")
    first = load_profile(root, settings=settings)  # cache_write="background" (default)
    loader_mod.wait_cache_writes()
    assert (
        tmp_path / "home" / "cache" / "profiles" / first.profile_id / "profile.json.zst"
    ).is_file()
    shutil.rmtree(tmp_path / "home" / "cache")
    now = load_profile(root, settings=settings, cache_write="now")
    assert not now.cache_hit  # the cache was removed, so this load parsed
    assert (
        tmp_path / "home" / "cache" / "profiles" / now.profile_id / "profile.json.zst"
    ).is_file()


def test_cli_exit_right_after_a_cold_load_writes_the_cache(
    tmp_path: Path, real_samples: Path
) -> None:
    """`inspect` exits as soon as it has printed; the background cache write must still finish.

    It used to die at interpreter exit (pyarrow's conversion pool was already closed): a traceback
    on stderr and no cache, so every later run parsed again and printed the traceback again.
    """
    import subprocess
    import sys

    home = tmp_path / "home"
    env = {**os.environ, "ADVISOR_HOME": str(home)}
    for _ in range(2):  # the second run reads the cache the first one wrote
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "advisor_chat.cli.main",
                "inspect",
                str(real_samples / "pt-db-level1-2rank"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr and "Exception in thread" not in proc.stderr, (
            proc.stderr
        )
        written = list((home / "cache" / "profiles").glob("*/profile.json.zst"))
        assert len(written) == 1, sorted(p.name for p in (home / "cache").rglob("*"))


def test_early_cache_read_is_used_only_for_the_same_files(
    tmp_path: Path, real_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last cache of a folder is read while its key is computed; a changed file makes it moot."""
    from advisor_chat.ingest import cache as cache_mod

    root, settings = _copy(tmp_path, real_samples / "pt-text-level1-2rank")
    first = load_profile(root, settings=settings, cache_write="now")
    assert cache_mod.last_key(settings.cache_dir, str(root.resolve())) == first.profile_id

    calls: list[str] = []
    real_load = cache_mod.load

    def counting(cache_dir: Path, key: str):  # type: ignore[no-untyped-def]
        calls.append(key)
        return real_load(cache_dir, key)

    monkeypatch.setattr(cache_mod, "load", counting)
    second = load_profile(root, settings=settings)
    assert second.cache_hit and calls == [first.profile_id]  # read once, in the early thread
    assert second.sources == first.sources

    # a rewritten step_trace_time.csv (same size, new values): the early read is dropped
    st = root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    lines = st.read_text().splitlines(keepends=True)
    fields = lines[1].split(",")
    computing = float(fields[1])
    fields[1] = ("1" if fields[1][0] != "1" else "2") + fields[1][1:]  # same length, new value
    lines[1] = ",".join(fields)
    st.write_text("".join(lines))
    changed = float(fields[1])
    assert changed != computing
    calls.clear()
    third = load_profile(root, settings=settings, cache_write="now")
    assert not third.cache_hit and calls[:1] == [first.profile_id]
    row = third.get("step_trace")
    assert changed in set(row["computing_us"]) and computing not in set(row["computing_us"])
    assert cache_mod.last_key(settings.cache_dir, str(root.resolve())) == third.profile_id


def test_gc_pauses_nest_across_threads() -> None:
    """The collector resumes when the last pause ends, not when the first one does."""
    import gc
    import threading

    from advisor_chat.ingest.common import gc_paused

    assert gc.isenabled()
    inner_done = threading.Event()
    release = threading.Event()

    def other() -> None:
        with gc_paused():
            release.wait(5)
        inner_done.set()

    with gc_paused():
        th = threading.Thread(target=other)
        th.start()
        release.set()
        inner_done.wait(5)
        assert not gc.isenabled()  # the other thread's pause ended; ours has not
    th.join()
    assert gc.isenabled()


def test_heavy_file_changed_after_load_is_read_but_not_cached(
    tmp_path: Path, real_samples: Path
) -> None:
    """A kernel_details.csv rewritten after the load: its rows are new, flagged, and never cached."""
    import os

    from advisor_chat.diagnosis import engine

    root, settings = _copy(tmp_path, real_samples / "pt-text-level1-2rank")
    profile = load_profile(root, settings=settings, cache_write="now")
    kd = root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    st = kd.stat()
    lines = kd.read_bytes().split(b"\n")  # CRLF files stay CRLF
    header = lines[0].split(b",")
    col = next(i for i, h in enumerate(header) if h.strip() == b"Duration(us)")
    cells = lines[1].split(b",")
    old = cells[col]
    cells[col] = (b"9" if old[:1] != b"9" else b"8") + old[1:]  # same length, new value
    lines[1] = b",".join(cells)
    kd.write_bytes(b"\n".join(lines))
    os.utime(kd, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back, same size: ctime moved
    assert kd.stat().st_size == st.st_size

    k0 = profile.kernels_for([0])
    assert float(cells[col].strip(b'"\t\r ')) in set(k0["duration_us"].round(6))  # as it is now
    changed = [w for w in profile.warnings if w.code == "file_changed"]
    assert changed and changed[0].path == str(kd) and changed[0].ranks == (0,)
    loader_mod.wait_cache_writes()
    heavy_dir = tmp_path / "home" / "cache" / "profiles" / f"{profile.profile_id}.heavy"
    assert not list(heavy_dir.glob("kernels/part-*.parquet"))  # nothing of it cached
    engine.clear_cache()
    engine.diagnose(profile)
    assert not list((tmp_path / "home").rglob("*.diagnosis/*.pkl"))  # nor the diagnosis
    # the next load sees a new file identity (ctime), so it parses again
    again = load_profile(root, settings=settings)
    assert not again.cache_hit


def test_cached_table_that_is_not_the_one_written_is_parsed_again(
    tmp_path: Path, real_samples: Path
) -> None:
    """A cache Parquet replaced by another table (or a subset) is not trusted: the folder is parsed."""
    import pyarrow.parquet as pq

    root, settings = _copy(tmp_path, real_samples / "cluster-8rank")
    first = load_profile(root, settings=settings, cache_write="now")
    folder = settings.cache_dir / "profiles" / first.profile_id
    shutil.copy(folder / "comm_ops.parquet", folder / "step_trace.parquet")  # another table
    swapped = load_profile(root, settings=settings, cache_write="now")
    assert not swapped.cache_hit
    pd.testing.assert_frame_equal(swapped.get("step_trace"), first.get("step_trace"))
    table = pq.read_table(folder / "step_trace.parquet")
    pq.write_table(table.slice(0, 3), folder / "step_trace.parquet")  # same columns, fewer rows
    subset = load_profile(root, settings=settings)
    assert not subset.cache_hit and len(subset.get("step_trace")) == len(first.get("step_trace"))


def test_cache_keeps_to_its_size_budget_least_recently_used_first(
    tmp_path: Path, real_samples: Path
) -> None:
    """Beyond ADVISOR_CACHE_MAX_MB, the entries used longest ago are deleted (never the new one)."""
    import time as time_mod

    from advisor_chat.ingest import cache as cache_mod

    folders = []
    for i in range(3):
        f = tmp_path / f"run{i}"
        shutil.copytree(real_samples / "pt-text-level1-2rank", f)
        folders.append(f)
    big = load_settings(home=tmp_path / "home")
    a = load_profile(folders[0], settings=big, cache_write="now")
    time_mod.sleep(0.05)
    b = load_profile(folders[1], settings=big, cache_write="now")
    entry = cache_mod._size(big.cache_dir / "profiles" / a.profile_id)
    time_mod.sleep(0.05)
    assert load_profile(folders[0], settings=big).cache_hit  # A used after B
    time_mod.sleep(0.05)
    # room for two entries: caching C deletes B (least recently used), keeps A and C
    two = load_settings(home=tmp_path / "home", cache_max_mb=2.5 * entry / 1e6)
    c = load_profile(folders[2], settings=two, cache_write="now")
    kept = {p.name for p in (big.cache_dir / "profiles").iterdir() if len(p.name) == 32}
    assert kept == {a.profile_id, c.profile_id} and b.profile_id not in kept
    assert not load_profile(folders[1], settings=big).cache_hit  # B is parsed again


def _settle(monkeypatch: pytest.MonkeyPatch, seconds: float = 0.2) -> None:
    """Shrink the racy window to ``seconds`` and wait it out, so that the folder's stamps are trusted."""
    from advisor_chat.ingest import cache as cache_mod

    monkeypatch.setattr(cache_mod, "RACY_S", seconds)
    time.sleep(seconds * 1.5)


def test_reload_skips_the_walk_only_while_no_folder_changed(
    tmp_path: Path, real_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored walk stands in for listing the folder; an added or removed file voids it."""
    from advisor_chat.ingest import cache as cache_mod

    stats = loader_mod.PARSE_STATS
    root, settings = _copy(tmp_path, real_samples / "pt-text-level1-2rank")
    # just copied: the folders' stamps are too recent to vouch for them later
    fresh = load_profile(root, settings=settings, cache_write="now")
    assert not cache_mod.has_plan(settings.cache_dir, fresh.profile_id)
    _settle(monkeypatch)
    walks = stats["walks"]
    hit = load_profile(root, settings=settings)  # walked, and now stores the plan it trusts
    assert hit.cache_hit and stats["walks"] == walks + 1
    assert cache_mod.has_plan(settings.cache_dir, fresh.profile_id)

    walks, revalidated = stats["walks"], stats["revalidated"]
    again = load_profile(root, settings=settings)
    assert again.cache_hit and again.profile_id == fresh.profile_id
    assert (stats["walks"], stats["revalidated"]) == (walks, revalidated + 1)
    for name, df in fresh.tables.items():
        pd.testing.assert_frame_equal(
            df, again.tables[name], check_dtype=False, check_categorical=False
        )
    assert again.sources == fresh.sources and again.warnings == fresh.warnings

    # a file removed: its folder's mtime moved, so the folder is walked and parsed again
    gone = root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json"
    gone.unlink()
    walks = stats["walks"]
    fewer = load_profile(root, settings=settings, cache_write="now")
    assert not fewer.cache_hit and stats["walks"] == walks + 1
    assert str(gone) not in {s.path for s in fewer.sources.get("comm_matrix", [])}
    assert str(gone).replace("rank1", "rank0") in {s.path for s in fewer.sources["comm_matrix"]}

    # a file added: every stored file is still there, but its folder's stamps moved
    _settle(monkeypatch)
    assert load_profile(root, settings=settings).cache_hit  # stores the plan of 'fewer'
    assert cache_mod.has_plan(settings.cache_dir, fewer.profile_id)
    shutil.copy(real_samples / "pt-text-level1-2rank" / gone.relative_to(root), gone)
    back = load_profile(root, settings=settings, cache_write="now")
    assert not back.cache_hit
    assert str(gone) in {s.path for s in back.sources["comm_matrix"]}

    # a file rewritten in place, same size, mtime put back: no folder changed, the file's
    # ctime did: the key differs and the rows are read again
    _settle(monkeypatch)
    load_profile(root, settings=settings)  # stores the plan of the current folder
    st = root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    before = st.stat()
    lines = st.read_bytes().split(b"\n")
    fields = lines[1].split(b",")
    fields[1] = (b"1" if fields[1][:1] != b"1" else b"2") + fields[1][1:]
    lines[1] = b",".join(fields)
    st.write_bytes(b"\n".join(lines))
    os.utime(st, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert st.stat().st_size == before.st_size and st.stat().st_mtime_ns == before.st_mtime_ns
    revalidated = stats["revalidated"]
    rewritten = load_profile(root, settings=settings)
    assert not rewritten.cache_hit and stats["revalidated"] == revalidated
    assert float(fields[1]) in set(rewritten.get("step_trace")["computing_us"])


def test_plan_snapshot_refuses_folders_changed_just_before_the_listing(tmp_path: Path) -> None:
    from advisor_chat.ingest import cache as cache_mod

    d = tmp_path / "d"
    d.mkdir()
    st = os.stat(d)
    now = time.time()
    args = (tmp_path, [], [(str(d), st)])
    assert cache_mod.plan_snapshot(*args, listed_at=now, units=1) is None
    later = st.st_ctime_ns / 1e9 + cache_mod.RACY_S + 0.01
    snap = cache_mod.plan_snapshot(*args, listed_at=later, units=1)
    assert snap is not None and snap["dirs"] == ["./d"]
    assert snap["stamps"] == [st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def test_walk_of_a_fresh_folder_is_stored_once_it_has_settled(
    tmp_path: Path, real_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planned right after a copy (not trusted), cached a moment later: walked again and stored."""
    from advisor_chat.ingest import cache as cache_mod

    monkeypatch.setattr(cache_mod, "RACY_S", 0.3)
    root, settings = _copy(tmp_path, real_samples / "pt-text-level1-2rank")
    plan = loader_mod.plan_ingest(root)
    assert cache_mod.plan_snapshot(plan.root, plan.files, plan.dirs, plan.listed_at, 2) is None
    profile = load_profile(root, settings=settings, use_cache=False)
    time.sleep(0.45)
    walks = loader_mod.PARSE_STATS["walks"]
    loader_mod.save_cached(plan, settings, profile)
    assert loader_mod.PARSE_STATS["walks"] == walks + 1
    assert cache_mod.has_plan(settings.cache_dir, plan.cache_key)
    revalidated = loader_mod.PARSE_STATS["revalidated"]
    again = load_profile(root, settings=settings)
    assert again.cache_hit and loader_mod.PARSE_STATS["revalidated"] == revalidated + 1


@pytest.mark.parametrize("damage", ["truncate", "garbage", "huge_size"])
def test_damaged_cache_document_means_a_fresh_parse(
    tmp_path: Path, real_samples: Path, damage: str
) -> None:
    """A cache entry whose compressed document is damaged is a miss: the folder is read again."""
    root, settings = _copy(tmp_path, real_samples / "pt-text-level1-2rank")
    first = load_profile(root, settings=settings, cache_write="now")
    entry = tmp_path / "home" / "cache" / "profiles" / first.profile_id
    for doc in (entry / "profile.json.zst", entry / "plan.json.zst"):
        if not doc.is_file():
            continue
        data = doc.read_bytes()
        if damage == "truncate":
            doc.write_bytes(data[: len(data) // 2])
        elif damage == "garbage":
            doc.write_bytes(data[:8] + b"\x00" * (len(data) - 8))
        else:
            doc.write_bytes((1 << 62).to_bytes(8, "little") + data[8:])
    again = load_profile(root, settings=settings)
    assert not again.cache_hit
    assert set(again.tables) == set(first.tables)
    for name, df in first.tables.items():
        pd.testing.assert_frame_equal(df, again.tables[name], check_dtype=False)


def test_a_damaged_stored_walk_is_written_again(
    tmp_path: Path, real_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reload that cannot read the stored walk walks the folder and stores the walk again."""
    from advisor_chat.ingest import cache as cache_mod

    root, settings = _copy(tmp_path, real_samples / "pt-text-level1-2rank")
    first = load_profile(root, settings=settings, cache_write="now")
    _settle(monkeypatch)
    load_profile(root, settings=settings)  # stores the walk it can now trust
    doc = settings.cache_dir / "profiles" / first.profile_id / cache_mod.PLAN_DOC
    good = doc.read_bytes()
    doc.write_bytes(good[: len(good) // 2])
    walks = loader_mod.PARSE_STATS["walks"]
    again = load_profile(root, settings=settings)
    assert again.cache_hit and loader_mod.PARSE_STATS["walks"] == walks + 1
    assert cache_mod.load_doc(doc)["units"] == 2  # readable again
    revalidated = loader_mod.PARSE_STATS["revalidated"]
    third = load_profile(root, settings=settings)
    assert third.cache_hit and loader_mod.PARSE_STATS["revalidated"] == revalidated + 1
