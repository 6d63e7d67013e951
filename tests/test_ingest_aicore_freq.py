"""The AI Core Freq counter track (``aicore_freq``): text and DB exports, quirks, lazy reads.

Expected rows come from the files themselves, read here with orjson / sqlite3 independently of the
ingest code (reference: ascend-formats, trace_view.json ``AI Core Freq`` C events and the DB's
``AICORE_FREQ`` table).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import orjson
import pandas as pd
import pytest

from advisor_chat.ingest import load_profile
from advisor_chat.ingest.trace import TraceInvalid, read_aicore_freq


def _trace_samples(path: Path) -> list[tuple[float, float]]:
    return sorted(
        (float(e["ts"]), float(e["args"]["MHz"]))
        for e in orjson.loads(path.read_bytes())
        if isinstance(e, dict) and e.get("name") == "AI Core Freq"
    )


def test_text_export_reads_the_counter_track(real_samples: Path) -> None:
    root = real_samples / "pt-text-level1-2rank"
    p = load_profile(root, use_cache=False)
    got = p.aicore_freq_for(p.ranks)
    for r in p.ranks:
        tv = next(root.glob(f"rank{r}_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"))
        want = _trace_samples(tv)
        assert want  # the real sample has the track
        mine = got[got["rank"] == r]
        assert mine["start_us"].tolist() == pytest.approx([t for t, _ in want], abs=1e-3)
        assert mine["freq_mhz"].tolist() == [f for _, f in want]


def test_db_export_reads_aicore_freq(real_samples: Path) -> None:
    root = real_samples / "pt-db-level1-2rank"
    p = load_profile(root, use_cache=False)
    got = p.aicore_freq_for(p.ranks)
    for r in p.ranks:
        db = next(
            root.glob(f"rank{r}_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db")
        )
        with sqlite3.connect(db) as con:
            rows = con.execute("SELECT timestampNs, freq FROM AICORE_FREQ ORDER BY 1").fetchall()
        mine = got[got["rank"] == r]
        assert mine["start_us"].tolist() == pytest.approx([t / 1000.0 for t, _ in rows])
        assert mine["freq_mhz"].tolist() == [float(f) for _, f in rows]


def test_the_track_is_read_only_for_the_ranks_asked(real_samples: Path) -> None:
    p = load_profile(real_samples / "pt-text-level1-2rank", use_cache=False)
    assert p.heavy is not None
    p.aicore_freq_for([1])
    assert p.heavy.loaded["aicore_freq"] == {1}  # type: ignore[attr-defined]
    assert p.heavy.loaded["host_dispatch"] == set()  # type: ignore[attr-defined]


def _write(path: Path, events: list[dict], *, wrap: bool = False) -> Path:
    body = orjson.dumps({"traceEvents": events} if wrap else events)
    path.write_bytes(body)
    return path


def test_other_key_orders_and_the_object_wrapper(tmp_path: Path) -> None:
    # args before name (another writer's key order): found by the streaming fallback
    ev = [
        {
            "args": {"MHz": 1800},
            "ph": "C",
            "ts": "100.000\t",
            "pid": 1,
            "tid": 0,
            "name": "AI Core Freq",
        },
        {
            "args": {"MHz": 1300},
            "ph": "C",
            "ts": "200.500",
            "pid": 1,
            "tid": 0,
            "name": "AI Core Freq",
        },
        {"ph": "X", "name": "MatMul", "ts": "150", "dur": 3.0, "pid": 2, "tid": 3},
    ]
    for wrap in (False, True):
        df = read_aicore_freq(_write(tmp_path / f"t{wrap}.json", ev, wrap=wrap), 5)
        assert df["rank"].tolist() == [5, 5]
        assert df["start_us"].tolist() == [100.0, 200.5] and df["freq_mhz"].tolist() == [1800, 1300]


def test_no_track_empty_and_truncated_files(tmp_path: Path, real_samples: Path) -> None:
    none = _write(tmp_path / "none.json", [{"ph": "X", "name": "a", "ts": "1", "dur": 1}])
    assert read_aicore_freq(none, 0).empty
    (tmp_path / "empty.json").write_bytes(b"")
    assert read_aicore_freq(tmp_path / "empty.json", 0).empty
    # cut inside the file: the whole events before the cut are kept (torch_npu's key order)
    src = next(
        (real_samples / "pt-text-level1-2rank").glob(
            "rank0_*/ASCEND_PROFILER_OUTPUT/trace_view.json"
        )
    )
    raw = src.read_bytes()
    first = raw.find(b'{"name": "AI Core Freq", "ts"')  # the first sample (not the metadata)
    assert first > 0
    cut = raw[: raw.find(b"}", raw.find(b'"ph"', first)) + 200]
    (tmp_path / "cut.json").write_bytes(cut)
    assert len(read_aicore_freq(tmp_path / "cut.json", 0)) == 1
    # args-first events in a cut file: the fallback cannot parse it and says so
    bad = orjson.dumps([{"args": {"MHz": 1}, "name": "AI Core Freq", "ts": "1", "ph": "C"}])[:-10]
    (tmp_path / "bad.json").write_bytes(bad)
    with pytest.raises(TraceInvalid):
        read_aicore_freq(tmp_path / "bad.json", 0)


def test_a_truncated_trace_is_left_out_with_a_warning(real_samples: Path, tmp_path: Path) -> None:
    """A trace whose counter events cannot be read leaves that rank's track out, named in a warning."""
    root = tmp_path / "p"
    shutil.copytree(real_samples / "pt-text-level1-2rank", root)
    tv = next(root.glob("rank1_*/ASCEND_PROFILER_OUTPUT/trace_view.json"))
    ev = orjson.loads(tv.read_bytes())
    for e in ev:
        if e.get("name") == "AI Core Freq":  # another key order, so the fallback parses the file
            e.pop("name")
            e["name"] = "AI Core Freq"
    tv.write_bytes(orjson.dumps(ev)[:-300] + b"]")  # valid end, broken body
    p = load_profile(root, use_cache=False)
    got = p.aicore_freq_for(p.ranks)
    assert set(got["rank"]) == {0}
    w = [w for w in p.warnings if w.ranks == (1,) and "aicore freq" in w.message]
    assert w and str(tv) in w[0].path
    assert isinstance(got, pd.DataFrame)
