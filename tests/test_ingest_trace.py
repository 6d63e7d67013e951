"""trace_view.json streaming: HostToDevice flows, chunk boundaries, fallbacks, throughput and scale."""

from __future__ import annotations

import json
import resource
import shutil
import time
from pathlib import Path

import pytest

from advisor_chat.config import load_settings
from advisor_chat.ingest import load_profile
from advisor_chat.ingest import loader as loader_mod
from advisor_chat.ingest.trace import TraceInvalid, read_host_dispatch, scan_trace

PY, CANN, HW = 100, 200, 300


def _events(
    n: int, step_len: float = 10_000.0
) -> tuple[list[dict], list[tuple[str, float, float, str, float]]]:
    """Events in torch_npu's key orders; returns (events, expected rows)."""
    ev: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": PY, "tid": 0, "args": {"name": "Python"}},
        {"name": "process_name", "pid": CANN, "tid": 0, "args": {"name": "CANN"}, "ph": "M"},
        {
            "name": "process_name",
            "pid": HW,
            "tid": 0,
            "args": {"name": "Ascend Hardware"},
            "ph": "M",
        },
    ]
    t0 = 1736408883686740.0
    expected = []
    for step in range(2):
        s0 = t0 + step * step_len
        ev.append(
            {
                "ph": "X",
                "name": f"ProfilerStep#{50 + step}",
                "pid": PY,
                "tid": PY,
                "ts": f"{s0:.3f}",
                "dur": step_len - 1,
                "cat": "cpu_op",
                "args": {"Call stack": "a.py(1): f;\r\nb.py(2): g"},
            }
        )
        for i in range(n):
            api_ts = s0 + 10 + i * 50
            # the API event encloses the flow start (Level1 prunes Runtime events)
            ev.append(
                {
                    "name": "AscendCL@aclnnMul",
                    "pid": CANN,
                    "tid": 7,
                    "ts": f"{api_ts:.3f}",
                    "dur": 30.0,
                    "args": {"connection_id": i},
                    "ph": "X",
                }
            )
            ev.append(
                {
                    "name": "Node@launch",
                    "pid": CANN,
                    "tid": 7,
                    "ts": f"{api_ts + 5:.3f}",
                    "dur": 10.0,
                    "args": {},
                    "ph": "X",
                }
            )
            fid = f"{step}{i:05d}"
            dev_ts = api_ts + 100 + i
            ev.append(
                {
                    "name": f"HostToDevice{fid}",
                    "ph": "s",
                    "cat": "HostToDevice",
                    "id": fid,
                    "pid": CANN,
                    "tid": 7,
                    "ts": f"{api_ts + 6:.3f}",
                }
            )
            ev.append(
                {
                    "name": f"HostToDevice{fid}",
                    "ph": "f",
                    "id": fid,
                    "ts": f"{dev_ts:.3f}",
                    "cat": "HostToDevice",
                    "pid": HW,
                    "tid": 2,
                    "bp": "e",
                }
            )
            ev.append(
                {
                    "name": f"Mul{i}",
                    "pid": HW,
                    "tid": 2,
                    "ts": f"{dev_ts:.3f}",
                    "dur": 3.5,
                    "args": {"Task Type": "AI_CORE", "connection_id": i},
                    "ph": "X",
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "name": "aten::mul",
                    "pid": PY,
                    "tid": PY,
                    "ts": f"{api_ts - 5:.3f}",
                    "dur": 40.0,
                    "cat": "cpu_op",
                    "args": {"Input Dims": ";\r\n", "Call stack": "x" * 200},
                }
            )
            ev.append(
                {
                    "name": "AI Core Freq",
                    "ts": f"{api_ts:.3f}",
                    "pid": 400,
                    "tid": 0,
                    "args": {"MHz": 1800},
                    "ph": "C",
                }
            )
            expected.append(("Node@launch", api_ts + 6, dev_ts, f"Mul{i}", 50 + step))
    return ev, expected


def _write(path: Path, events: list[dict]) -> Path:
    path.write_text(json.dumps(events))  # one line, default separators, like torch_npu
    return path


@pytest.mark.parametrize("chunk", [256, 4096, 8 << 20])
def test_flows_matched_across_chunk_sizes(tmp_path: Path, chunk: int) -> None:
    events, expected = _events(40)
    f = _write(tmp_path / "trace_view.json", events)
    df = read_host_dispatch(f, 3, chunk_bytes=chunk)
    assert len(df) == len(expected)
    got = sorted(
        zip(
            df["api_name"],
            df["host_start_us"],
            df["device_start_us"],
            df["kernel_name"],
            df["step"],
            strict=False,
        )
    )
    want = sorted(expected)
    assert [g[0] for g in got] == [w[0] for w in want]
    assert [g[3] for g in got] == [w[3] for w in want]
    assert [g[4] for g in got] == [w[4] for w in want]
    assert df["launch_delay_us"].tolist() == pytest.approx(
        (df["device_start_us"] - df["host_start_us"]).tolist()
    )
    assert df["device_duration_us"].tolist() == pytest.approx([3.5] * len(df))
    assert (df["rank"] == 3).all()


def test_reindented_file_and_trace_events_wrapper(tmp_path: Path) -> None:
    events, expected = _events(5)
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(events, indent=2, sort_keys=True))
    assert len(read_host_dispatch(pretty, 0)) == len(expected)
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"traceEvents": events}))
    assert len(read_host_dispatch(wrapped, 0)) == len(expected)


def test_nested_list_of_dicts_in_args_does_not_break_the_split(tmp_path: Path) -> None:
    events, expected = _events(10)
    events.insert(
        5,
        {
            "ph": "X",
            "name": "weird",
            "pid": PY,
            "tid": PY,
            "ts": "1.000",
            "dur": 1,
            "cat": "cpu_op",
            "args": {"list": [{"a": 1}, {"b": 2}]},
        },
    )
    f = _write(tmp_path / "trace_view.json", events)
    assert len(read_host_dispatch(f, 0, chunk_bytes=512)) == len(expected)


@pytest.mark.parametrize("cut", [0.3, 0.999])
def test_truncated_raises_trace_invalid(tmp_path: Path, cut: float) -> None:
    events, _ = _events(20)
    data = json.dumps(events).encode()
    f = tmp_path / "trace_view.json"
    f.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(TraceInvalid):
        scan_trace(f, chunk_bytes=1024)


def _big_trace(path: Path, target_mb: int, real_samples: Path) -> int:
    """Replicate the real 2 MB trace_view.json with shifted timestamps and flow ids."""
    src = json.loads(
        (
            real_samples
            / "pt-text-level1-2rank/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
        ).read_text()
    )
    body = [e for e in src if e.get("ph") != "M"]
    n_flows = 0
    written = 0
    with path.open("w") as fh:
        fh.write("[" + ", ".join(json.dumps(e) for e in src if e.get("ph") == "M"))
        rep = 0
        while written < target_mb << 20:
            parts = []
            for e in body:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = f"{float(e2['ts']) + rep * 200000.0:.3f}"
                if e2.get("cat") == "HostToDevice":
                    e2["id"] = f"{e2['id']}r{rep}"
                    n_flows += e2["ph"] == "s"
                if str(e2.get("name", "")).startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{50 + rep}"
                parts.append(json.dumps(e2))
            chunk = ", " + ", ".join(parts)
            fh.write(chunk)
            written += len(chunk)
            rep += 1
        fh.write("]")
    return rep


@pytest.mark.slow
def test_throughput_and_flat_memory(tmp_path: Path, real_samples: Path) -> None:
    small = tmp_path / "small.json"
    big = tmp_path / "big.json"
    reps_small = _big_trace(small, 20, real_samples)
    reps_big = _big_trace(big, 200, real_samples)
    n_small = len(read_host_dispatch(small, 0))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    c0, w0 = time.process_time(), time.perf_counter()
    df = read_host_dispatch(big, 0)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    mb = big.stat().st_size / 1e6
    # every flow (and host synchronize call) of every replica is found, steps assigned per
    # replica (a synchronize call outside every step is step -1)
    assert len(df) == n_small * reps_big // reps_small
    assert df.loc[df["device_start_us"].notna(), "step"].nunique() == reps_big
    print(
        f"\ntrace_view {mb:.0f} MB: {mb / cpu:.0f} MB/s per CPU second, {mb / wall:.0f} MB/s wall, "
        f"peak RSS growth {(rss1 - rss0) / 1024:.0f} MB"
    )
    # memory does not grow with file size: far below the file size (kept events only)
    assert (rss1 - rss0) / 1024 < mb / 2
    assert mb / cpu > 30  # generous floor for a loaded CI machine; measured ~100 MB/s per core


@pytest.mark.slow
def test_many_ranks_parallel_and_cached(tmp_path: Path, real_samples: Path) -> None:
    src = real_samples / "pt-text-level1-2rank" / "rank0_ascend_pt"
    root = tmp_path / "run"
    n = 128
    for r in range(n):
        d = root / f"node{r // 8}_{1000 + r}_20250109093000000_ascend_pt"
        shutil.copytree(
            src,
            d,
            ignore=shutil.ignore_patterns(
                "trace_view.json", "operator_details.csv", "profiler_info_0.json"
            ),
        )
        (d / f"profiler_info_{r}.json").write_text(json.dumps({"rank_id": r}))
    settings = load_settings(home=tmp_path / "home")
    t0 = time.perf_counter()
    p = load_profile(root, settings=settings, workers=2, progress=False)
    t_parse = time.perf_counter() - t0
    assert p.ranks == list(range(n))
    assert len(p.get("kernels")) == 191 * n
    parses = loader_mod.PARSE_STATS["parses"]
    t0 = time.perf_counter()
    q = load_profile(root, settings=settings)
    t_cached = time.perf_counter() - t0
    assert q.cache_hit and loader_mod.PARSE_STATS["parses"] == parses
    print(f"\n{n} ranks: parse {t_parse:.1f} s (2 workers), cached reload {t_cached:.2f} s")


def test_one_huge_event_is_streamed_not_handed_to_the_slow_parser(
    scenario, tmp_path, monkeypatch
) -> None:
    """A 40 MB event (a blob in its args) once sent the whole file to ijson: 23-120 s per file.
    With it inserted, the chunked reader reads the same events as without it."""
    from advisor_chat.ingest import trace

    src = sorted(scenario("healthy", ranks=4).glob("*_ascend_pt"))[0]
    events = json.loads((src / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(events))
    events.insert(len(events) // 2, {"ph": "X", "name": "huge", "pid": 1, "tid": 1, "ts": "5",
                                     "dur": 1, "args": {"blob": "x" * (40 << 20)}})  # fmt: skip
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(events))

    def no_ijson(*a, **k):
        raise AssertionError("fell back to ijson")

    monkeypatch.setattr(trace, "_iter_ijson", no_ijson)
    want = trace.scan_trace(plain, chunk_bytes=1 << 20).events
    assert want > 0 and trace.scan_trace(path, chunk_bytes=1 << 20).events == want
    # beyond the bound, the file is refused (the load falls back to the CSV/DB facts)
    monkeypatch.setattr(trace, "MAX_EVENT_BYTES", 8 << 20)
    with pytest.raises(trace.TraceInvalid, match="no event boundary"):
        trace.scan_trace(path, chunk_bytes=1 << 20)


def test_blocking_host_calls_are_rows_without_a_device_task(real_samples: Path) -> None:
    """aclrtMemcpy (a blocking copy) and the synchronizes: one row per CANN event, no device
    columns; aclrtMemcpyAsync starts a HostToDevice flow and stays a launch row."""
    import contextlib
    import re
    import sqlite3

    trace = (
        real_samples / "pt-text-level1-2rank/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
    )
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    want = re.compile(r"^AscendCL@(.*Synchronize.*|aclrtMemcpy)$")
    expected: dict[str, int] = {}
    for e in events:
        if e.get("ph") == "X" and want.match(str(e.get("name", ""))):
            expected[e["name"]] = expected.get(e["name"], 0) + 1
    assert expected.get("AscendCL@aclrtMemcpy", 0) > 0
    hd = read_host_dispatch(trace, 0)
    blocking = hd[hd["device_start_us"].isna()]
    assert blocking["api_name"].value_counts().to_dict() == expected
    assert blocking["api_duration_us"].gt(0).all()
    assert hd[hd["api_name"] == "AscendCL@aclrtMemcpyAsync"]["device_start_us"].notna().all()
    # the DB export of the same kind of run: the same calls from its CANN_API table
    db = (
        real_samples
        / "pt-db-level1-2rank/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
    )
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)) as con:
        rows = con.execute(
            "SELECT s.value, COUNT(*) FROM CANN_API a JOIN STRING_IDS s ON s.id = a.name "
            "WHERE s.value LIKE '%Synchronize%' OR s.value = 'aclrtMemcpy' GROUP BY s.value"
        ).fetchall()
    profile = load_profile(db.parents[2], use_cache=False, progress=False)
    got = profile.host_dispatch_for([0])
    got = got[got["device_start_us"].isna()]["api_name"].str.removeprefix("AscendCL@")
    assert got.value_counts().to_dict() == dict(rows)
