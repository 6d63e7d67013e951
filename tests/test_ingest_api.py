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
