"""Small CSVs of many ranks converted once per batch give the rows each file gives on its own.

The expected rows come from reading every file alone (``read_rank_dir`` without a sink, the
per-rank path) and from the values written into the files here; the batch mixes header
versions (with and without ``Device_id`` / ``Preparing``), ``N/A`` and TAB-padded numbers, an
empty file and a file large enough to be read as a DataFrame.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor_chat.ingest import common
from advisor_chat.ingest.rankdir import TableSink, read_rank_dir

_OLD = "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive)\n"
_NEW = "Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive),Preparing\n"
_OPS = "OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
_MEM = "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n"


def _rank_dir(root: Path, rank: int, step_trace: str, ops: str, mem: str) -> Path:
    d = root / f"host_{rank}_ascend_pt"
    out = d / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (d / f"profiler_info_{rank}.json").write_text(json.dumps({"config": {}, "rank_id": rank}))
    (out / "step_trace_time.csv").write_text(step_trace)
    (out / "op_statistic.csv").write_text(ops)
    (out / "memory_record.csv").write_text(mem)
    return d


@pytest.fixture
def folders(tmp_path: Path) -> list[Path]:
    return [
        _rank_dir(
            tmp_path,
            0,
            _OLD + "1,100.5,20,5,25,3,0,0,20\n2,101\t,N/A,5,25,3,0,0,20\n",
            _OPS + 'MatMul,AI_CORE,10,500.0,40,50,60,"55.5"\n',
            _MEM + "PTA,1000.5\t,10,20,5,0x1,NPU:0\n",
        ),
        _rank_dir(
            tmp_path,
            1,
            _NEW + "1,1,200,10,5,15,7,0,0,10,2.5\n",
            _OPS + "Add,AI_VECTOR_CORE,N/A,30,1,3,5,4.5\nMatMul,AI_CORE,12,600,40,50,70,40\n",
            _MEM + "",  # header only: no rows
        ),
        _rank_dir(
            tmp_path,
            2,
            "",  # empty file: a left-out file, the rest of the rank is read
            _OPS + "Cast,AI_CPU,1,2,2,2,2,0.1\n",
            _MEM + "APP,5,1,2,3,0x2,NPU:2\nGE,6,1,2,3,0x2,NPU:2\n",
        ),
    ]


def _per_file(folders: list[Path]) -> dict[str, pd.DataFrame]:
    parts: dict[str, list[pd.DataFrame]] = {}
    for d in folders:
        rd = read_rank_dir(d, heavy=False)  # no sink: per-rank DataFrames
        for t, df in rd.tables.items():
            parts.setdefault(t, []).append(df)
    return {t: pd.concat(v, ignore_index=True) for t, v in parts.items()}


def _batched(folders: list[Path]) -> tuple[dict[str, pd.DataFrame], list]:
    sink = TableSink()
    units = [read_rank_dir(d, heavy=False, sink=sink) for d in folders]
    return sink.frames(), units


@pytest.mark.parametrize("table", ["step_trace", "op_statistic", "memory"])
def test_batch_equals_files_read_one_by_one(folders: list[Path], table: str) -> None:
    want = _per_file(folders)[table]
    got, _ = _batched(folders)
    g = got[table]
    assert list(g.columns) == list(want.columns)
    pd.testing.assert_frame_equal(
        g.reset_index(drop=True), want.reset_index(drop=True), check_dtype=False
    )


def test_values_as_written(folders: list[Path]) -> None:
    got, units = _batched(folders)
    st = got["step_trace"]
    assert st["rank"].tolist() == [0, 0, 1]
    assert st["computing_us"].tolist() == [100.5, 101.0, 200.0]  # the TAB-padded 101 read
    assert np.isnan(st["communication_not_overlapped_us"].iloc[1])  # N/A
    assert st["device_id"].iloc[2] == 1.0 and np.isnan(st["device_id"].iloc[0])
    assert st["preparing_us"].iloc[2] == 2.5 and np.isnan(st["preparing_us"].iloc[0])
    assert st["step_us"].tolist() == [
        123.5,
        104.0,
        217.0,
    ]  # Computing + Comm(N.O.) + Free, N/A as 0
    ops = got["op_statistic"]
    assert ops["rank"].tolist() == [0, 1, 1, 2]
    assert ops["op_type"].tolist() == ["MatMul", "Add", "MatMul", "Cast"]
    assert ops["ratio_pct"].tolist() == [55.5, 4.5, 40.0, 0.1]
    assert np.isnan(ops["count"].iloc[1])
    mem = got["memory"]
    assert mem["rank"].tolist() == [0, 2, 2]
    assert mem["timestamp_us"].tolist() == [1000.5, 5.0, 6.0]
    # sources: one per file with rows; the empty step trace of rank 2 is a left-out file
    rows = {(s.table, s.rank): s.rows for u in units for s in u.sources}
    assert rows[("step_trace", 0)] == 2 and rows[("op_statistic", 1)] == 2
    assert ("memory", 1) not in rows and ("step_trace", 2) not in rows
    assert any(
        w.code == "file_skipped" and "step_trace_time.csv" in w.path for w in units[2].warnings
    )


def test_a_large_file_keeps_its_place_among_small_ones(
    folders: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file read as a DataFrame (over the small-CSV size) is converted alone, rows in rank order."""
    big = folders[1] / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv"
    monkeypatch.setattr(common, "SMALL_CSV_BYTES", big.stat().st_size)  # only rank 1's is "large"
    got, _ = _batched(folders)
    want = _per_file(folders)["op_statistic"]
    assert got["op_statistic"]["rank"].tolist() == [0, 1, 1, 2]
    pd.testing.assert_frame_equal(
        got["op_statistic"].reset_index(drop=True), want.reset_index(drop=True), check_dtype=False
    )
