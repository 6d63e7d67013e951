"""The public ingest steps (plan → cache → parse → assemble → save) that any engine can drive."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from advisor_chat.config import load_settings
from advisor_chat.errors import InputError
from advisor_chat.ingest import load_profile
from advisor_chat.ingest.loader import (
    assemble_profile,
    batch_paths,
    check_root,
    load_cached,
    plan_ingest,
    read_rank_batch,
    save_cached,
)
from advisor_chat.ingest.trace import read_host_dispatch


@pytest.mark.parametrize(
    ("n", "workers", "size"), [(0, 2, None), (1, 2, None), (10, 2, 3), (256, 2, None)]
)
def test_batch_paths_cover_all_paths_in_order(n: int, workers: int, size: int | None) -> None:
    paths = [f"/p/{i}" for i in range(n)]
    batches = batch_paths(paths, workers, size)
    assert [p for b in batches for p in b] == paths
    if n:
        assert all(batches)
        if size is None:
            assert len(batches) <= workers * 4
        else:
            assert max(len(b) for b in batches) == size


def test_check_root_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        check_root(tmp_path / "nope")
    f = tmp_path / "a.json"
    f.write_text("{}")
    with pytest.raises(InputError, match="is a file"):
        check_root(f)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="is empty"):
        check_root(tmp_path / "empty")


def test_public_steps_give_the_load_profile_tables(scenario, tmp_path: Path) -> None:
    root = scenario("seed-rank12", ranks=8, steps=2)
    settings = load_settings(home=tmp_path / "home")
    reference = load_profile(root, settings=settings, use_cache=False, workers=1)

    plan = plan_ingest(root)
    assert plan.root == Path(root).resolve()
    assert len(plan.rank_dirs) == 8
    assert plan.cache_key == reference.profile_id
    assert load_cached(plan, settings) is None  # nothing cached yet

    # a custom engine: threads over reversed batches; assembly must not depend on arrival order
    batches = batch_paths([str(d) for d in plan.rank_dirs], 2, 3)
    with ThreadPoolExecutor(2) as pool:
        parsed = [rd for b in pool.map(read_rank_batch, reversed(batches)) for rd in b]
    profile = assemble_profile(plan, parsed, extra_stats={"tasks": float(len(batches))})
    assert profile.stats["tasks"] == 3.0 and profile.stats["ranks_read"] == 8.0
    assert set(profile.tables) == set(reference.tables)
    for name, df in reference.tables.items():
        got = profile.tables[name]
        keys = [c for c in ("rank", "step", "group", "src_rank", "dst_rank") if c in df.columns]
        if keys and name not in ("comm_groups",):
            df = df.sort_values(keys, kind="stable").reset_index(drop=True)
            got = got.sort_values(keys, kind="stable").reset_index(drop=True)
        pd.testing.assert_frame_equal(got, df, obj=name)

    save_cached(plan, settings, profile)
    again = load_cached(plan_ingest(root), settings)
    assert again is not None and again.cache_hit
    pd.testing.assert_frame_equal(again.tables["kernels"], profile.tables["kernels"])


def test_plan_warns_about_rank_folders_without_output(scenario, tmp_path: Path) -> None:
    src = scenario("seed-rank12", ranks=8, steps=2)
    root = tmp_path / "prof"
    shutil.copytree(src, root)
    raw = root / "rank9_raw_ascend_pt"
    raw.mkdir()
    (raw / "profiler_info_9.json").write_text(json.dumps({"rank_id": 9}))
    plan = plan_ingest(root)
    assert len(plan.rank_dirs) == 8
    assert [w.code for w in plan.warnings] == ["no_profiler_output"]
    assert str(raw) in plan.warnings[0].message


def _flow_trace(n: int, nested_before: int = 0) -> list[dict]:
    """CANN API events + device tasks joined by HostToDevice flows, in torch_npu's key orders."""
    ev: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "x"}}
    ]
    ev.append(
        {
            "ph": "X",
            "name": "ProfilerStep#5",
            "pid": 1,
            "tid": 1,
            "ts": "0.000",
            "dur": 5000.0,
            "cat": "cpu_op",
            "args": {},
        }
    )
    for i in range(n):
        host = 100.0 * i + 10.0
        dev = host + 40.0 + i
        # an enclosing API event that starts earlier: the innermost one must win
        ev.append(
            {
                "name": "AscendCL@outer",
                "pid": 7,
                "tid": 3,
                "ts": f"{host - 5:.3f}",
                "dur": 50.0,
                "args": {"connection_id": i},
                "ph": "X",
            }
        )
        ev.append(
            {
                "name": f"AscendCL@api{i % 3}",
                "pid": 7,
                "tid": 3,
                "ts": f"{host:.3f}",
                "dur": 2.0,
                "args": {"connection_id": i},
                "ph": "X",
            }
        )
        ev.append(
            {
                "name": f"kernel{i}",
                "pid": 9,
                "tid": 2,
                "ts": f"{dev:.3f}",
                "dur": 3.0 + i,
                "args": {"Task Type": "AI_CORE"},
                "ph": "X",
            }
        )
        ev.append(
            {
                "name": f"HostToDevice{i}",
                "ph": "s",
                "cat": "HostToDevice",
                "id": str(i),
                "pid": 7,
                "tid": 3,
                "ts": f"{host + (3 if i % 5 == 0 else 1):.3f}",
            }
        )
        ev.append(
            {
                "name": f"HostToDevice{i}",
                "ph": "f",
                "id": str(i),
                "ts": f"{dev + 1:.3f}",
                "cat": "HostToDevice",
                "pid": 9,
                "tid": 2,
                "bp": "e",
            }
        )
    return ev


@pytest.mark.parametrize("chunk", [256, 1 << 20])
def test_host_dispatch_innermost_event_and_step(tmp_path: Path, chunk: int) -> None:
    n = 40
    f = tmp_path / "trace_view.json"
    f.write_text(json.dumps(_flow_trace(n)))
    df = read_host_dispatch(f, 3, chunk_bytes=chunk)
    assert len(df) == n
    for i, row in enumerate(df.itertuples()):
        late = i % 5 == 0
        host = 100.0 * i + (13.0 if late else 11.0)
        assert row.host_start_us == pytest.approx(host)
        # a flow start inside the 2 us api event names it (innermost); one after it ended names the
        # enclosing event that started earlier
        assert row.api_name == ("AscendCL@outer" if late else f"AscendCL@api{i % 3}")
        assert row.kernel_name == f"kernel{i}"
        assert row.device_duration_us == pytest.approx(3.0 + i)
        assert row.launch_delay_us == pytest.approx(40.0 + i + (-2.0 if late else 0.0))
        assert row.step == (5 if host <= 5000.0 else -1)
        assert row.rank == 3


# ----------------------------------------------------------------------------- lazy heavy tables


def _eager(root: Path) -> dict[str, pd.DataFrame]:
    """kernels / host_dispatch of every rank read the eager way (read_rank_dir, per rank)."""
    from advisor_chat.ingest.schema import validate_table

    plan = plan_ingest(root)
    units = read_rank_batch([str(d) for d in plan.rank_dirs])
    out = {}
    for name in ("kernels", "host_dispatch"):
        df = pd.concat([u.tables[name] for u in units if name in u.tables], ignore_index=True)
        out[name] = validate_table(name, df)
    return out


def _by_rank(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values("rank", kind="stable").reset_index(drop=True)


def test_heavy_tables_read_only_for_the_ranks_asked(scenario, tmp_path: Path) -> None:
    from advisor_chat.ingest import loader as loader_mod

    root = scenario("seed-rank12", ranks=8, steps=2)
    eager = _eager(root)
    p = load_profile(root, settings=load_settings(home=tmp_path / "h"), use_cache=False)
    # light tables only: nothing heavy parsed yet, but the tables are known and citable
    assert p.tables.loaded("kernels") is None and p.tables.loaded("host_dispatch") is None
    assert p.has("kernels") and p.has("host_dispatch") and "kernels" in p.tables
    assert p.cite("kernels") == "kernel_details.csv (8 files; read on demand)"
    from advisor_chat.ingest import inspect_profile

    listed = inspect_profile(p)["tables"]  # inspect lists them without reading them
    assert listed["kernels"]["on_demand"] == {"ranks": 8, "ranks_read": 0}
    assert listed["kernels"]["rows"] == 0 and p.tables.loaded("kernels") is None
    assert p.available_ranks("kernels") == list(range(8)) and p.ranks == list(range(8))
    before = loader_mod.PARSE_STATS.get("heavy_ranks_parsed", 0)
    k3 = p.kernels_for([3])
    assert loader_mod.PARSE_STATS["heavy_ranks_parsed"] == before + 1
    assert set(k3["rank"]) == {3} and p.stats["kernels_ranks_read"] == 1.0
    assert p.cite("kernels").endswith("kernel_details.csv (read for 1 of 8 ranks)")
    listed = inspect_profile(p)["tables"]["kernels"]
    assert listed["on_demand"] == {"ranks": 8, "ranks_read": 1} and listed["rows"] == len(k3)
    want = eager["kernels"][eager["kernels"]["rank"] == 3].reset_index(drop=True)
    pd.testing.assert_frame_equal(k3, want, check_dtype=False)
    hd = p.host_dispatch_for([3, 5])
    assert sorted(set(hd["rank"])) == [3, 5] and p.stats["host_dispatch_ranks_read"] == 2.0
    # the whole table: the remaining ranks are read, rows in rank-folder order, same values
    full = p.get("kernels")
    assert loader_mod.PARSE_STATS["heavy_ranks_parsed"] == before + 3 + 7
    pd.testing.assert_frame_equal(_by_rank(full), _by_rank(eager["kernels"]), check_dtype=False)
    pd.testing.assert_frame_equal(
        _by_rank(p.tables["host_dispatch"]), _by_rank(eager["host_dispatch"]), check_dtype=False
    )
    assert [s.rows for s in p.sources["kernels"]] == full.groupby("rank").size().tolist()


def test_peer_sample_is_focus_plus_evenly_spaced_peers(scenario, tmp_path: Path) -> None:
    root = scenario("seed-rank12", ranks=8, steps=2)
    p = load_profile(root, settings=load_settings(home=tmp_path / "h"), use_cache=False)
    assert p.peer_sample("kernels", [5], n=16) == (list(range(8)), False)
    ranks, sampled = p.peer_sample("kernels", [5], n=3)
    # 7 peers (0-4, 6, 7), three evenly spaced: positions 0, 3, 6 -> ranks 0, 3, 7
    assert sampled and ranks == [0, 3, 5, 7]
    assert p.tables.loaded("kernels") is None  # sampling reads nothing


def test_arrow_kernels_equal_the_csv_reader_on_real_files(real_samples: Path) -> None:
    from advisor_chat.ingest.text import read_kernels, read_kernels_arrow

    files = sorted(real_samples.rglob("kernel_details*.csv"))
    assert len(files) >= 3  # 2-rank sample, DB sample's text copy or variants
    pairs = [(f, i) for i, f in enumerate(files)]
    got, versions = read_kernels_arrow(pairs)
    want = pd.concat([read_kernels(f, r)[0] for f, r in pairs], ignore_index=True)
    assert versions == [read_kernels(f, r)[1] for f, r in pairs]
    from advisor_chat.ingest.schema import validate_table

    pd.testing.assert_frame_equal(
        validate_table("kernels", got), validate_table("kernels", want), check_dtype=False
    )
    assert got["start_us"].notna().all() and (got["start_us"] > 1e15).all()  # tab stripped


def test_light_batch_is_one_frame_per_table(scenario) -> None:
    from advisor_chat.ingest.loader import read_light_batch

    root = scenario("seed-rank12", ranks=8, steps=2)
    plan = plan_ingest(root)
    b = read_light_batch([str(d) for d in plan.rank_dirs[:4]])
    assert [u.rank for u in b.units] == [0, 1, 2, 3] and all(not u.tables for u in b.units)
    assert {"step_trace", "comm_ops", "comm_matrix"} <= set(b.tables)
    assert sorted(b.tables["step_trace"]["rank"].unique()) == [0, 1, 2, 3]
    assert all(
        set(u.meta["heavy_files"])
        == {"kernels", "host_dispatch", "aicore_freq", "python_frames", "hccl_ops"}
        for u in b.units
    )
    assert sum(s.rows for u in b.units for s in u.sources if s.table == "comm_ops") == len(
        b.tables["comm_ops"]
    )


def test_progress_callback_sees_every_rank_and_lazy_reads(scenario, tmp_path: Path) -> None:
    root = scenario("seed-rank12", ranks=8, steps=2)
    calls: list[tuple[str, int, int]] = []
    p = load_profile(
        root,
        settings=load_settings(home=tmp_path / "h"),
        use_cache=False,
        progress=lambda stage, done, total: calls.append((stage, done, total)),
    )
    assert calls[-1] == ("ranks", 8, 8)
    assert [c[1] for c in calls] == sorted(c[1] for c in calls)
    p.host_dispatch_for([0, 1, 2])
    assert calls[-1] == ("host_dispatch", 3, 3)


def test_pool_workers_die_with_their_parent(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(
        "import os, sys, time\n"
        "from advisor_chat.ingest.loader import make_pool\n"
        "def busy():\n"
        "    print(os.getpid(), flush=True)\n"
        "    time.sleep(60)  # busy in a task: only the death signal ends it early\n"
        "if __name__ == '__main__':\n"
        "    pool = make_pool(1)\n"
        "    pool.submit(busy)\n"
        "    time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    worker = int(proc.stdout.readline())
    time.sleep(0.5)
    os.kill(worker, 0)  # alive while the parent lives
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        stat = Path(f"/proc/{pid}/stat")  # a zombie (dead, not yet reaped) counts as dead
        return not (stat.is_file() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")

    deadline = time.time() + 10
    while time.time() < deadline:
        if not alive(worker):
            break
        time.sleep(0.1)
    else:
        os.kill(worker, signal.SIGKILL)
        raise AssertionError(f"pool worker {worker} outlived its killed parent {proc.pid}")


def test_a_citation_counts_each_file_once(real_samples: Path) -> None:
    """Trial: the communication groups of the real 2-rank DB export cited "analysis.db (4 files)":
    each rank's analysis.db feeds two parts of the table. The count is the files on disk."""
    root = real_samples / "pt-db-level1-2rank"
    on_disk = sorted(root.rglob("analysis.db"))
    assert len(on_disk) == 2
    p = load_profile(root, use_cache=False)
    for table in ("comm_groups", "comm_ops", "step_trace"):
        assert p.cite(table) == f"analysis.db ({len(on_disk)} files)", table
