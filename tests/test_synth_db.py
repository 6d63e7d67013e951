"""DB export: same numbers as the text export of the same seed, read with sqlite3 and through ingest."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest

from advisor_chat.synth import generate


def _dirs(root: Path) -> dict[int, Path]:
    return {
        int(next(d.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1]): d
        for d in root.glob("*_ascend_pt")
    }


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("synth_db")
    return (
        generate("seed-rank12", root / "text", ranks=4, steps=2, seed=5),
        generate("seed-rank12", root / "db", ranks=4, steps=2, seed=5, export="db"),
    )


def test_db_files_and_tables_match_text(pair: tuple[Path, Path]) -> None:
    text, db = pair
    td, dd = _dirs(text), _dirs(db)
    assert sorted(td) == sorted(dd) == [0, 1, 2, 3]
    for r, d in dd.items():
        po = d / "ASCEND_PROFILER_OUTPUT"
        assert sorted(p.name for p in po.iterdir()) == [
            "analysis.db",
            f"ascend_pytorch_profiler_{r}.db",
        ]
        info = json.loads((d / f"profiler_info_{r}.json").read_text())
        assert info["config"]["experimental_config"]["_export_type"] == "db"
        tpo = td[r] / "ASCEND_PROFILER_OUTPUT"
        st = list(
            csv.DictReader(
                io.StringIO((tpo / "step_trace_time.csv").read_bytes().decode(), newline="")
            )
        )
        with sqlite3.connect(po / "analysis.db") as con:
            rows = con.execute(
                "SELECT step, computing, communication_not_overlapped, free, stage FROM StepTraceTime"
            ).fetchall()
            assert [
                (
                    x["Step"],
                    float(x["Computing"]),
                    float(x["Communication(Not Overlapped)"]),
                    float(x["Free"]),
                    float(x["Stage"]),
                )
                for x in st
            ] == rows
            cj = json.loads((tpo / "communication.json").read_text())
            want = sorted(
                (k.split("@")[0], v["Communication Time Info"]["Wait Time(ms)"], s)
                for s, sv in cj.items()
                for k, v in sv["collective"].items()
                if k != "Total Op Info"
            )
            got = sorted(
                con.execute("SELECT hccl_op_name, wait_time, step FROM CommAnalyzerTime").fetchall()
            )
            assert got == want
        with sqlite3.connect(po / f"ascend_pytorch_profiler_{r}.db") as con:
            s = dict(con.execute("SELECT id, value FROM STRING_IDS").fetchall())
            steps = con.execute("SELECT id, startNs, endNs FROM STEP_TIME ORDER BY id").fetchall()
            assert [str(x[0]) for x in steps] == [x["Step"] for x in st]
            for sid, a, b in steps:  # OVERLAP_ANALYSIS covers each step exactly
                tot = con.execute(
                    "SELECT SUM(endNs - startNs) FROM OVERLAP_ANALYSIS WHERE type != 1 AND startNs >= ? AND startNs < ?",
                    (a, b),
                ).fetchone()[0]
                assert tot == b - a, sid
            kd = list(
                csv.DictReader(
                    io.StringIO((tpo / "kernel_details.csv").read_bytes().decode(), newline="")
                )
            )
            comp = [x for x in kd if x["Accelerator Core"] != "HCCL"]
            got_k = con.execute(
                "SELECT c.name, c.inputShapes, t.endNs - t.startNs FROM TASK t JOIN COMPUTE_TASK_INFO c ON t.globalTaskId = c.globalTaskId ORDER BY t.startNs"
            ).fetchall()
            assert [(s[n], s[sh], d) for n, sh, d in got_k] == [
                (x["Name"], x["Input Shapes"], round(float(x["Duration(us)"]) * 1000)) for x in comp
            ]
            ops = con.execute(
                "SELECT opName, groupName FROM COMMUNICATION_OP ORDER BY startNs"
            ).fetchall()
            md = json.loads(
                dict(con.execute("SELECT name, value FROM META_DATA").fetchall())[
                    "parallel_group_info"
                ]
            )
            assert [s[o] for o, _ in ops] == [
                x["Name"] for x in kd if x["Accelerator Core"] == "HCCL"
            ]
            assert {s[g] for _, g in ops} <= set(md)
            # every launch connects a CANN API call to a device task or HCCL op
            conns = {c for (c,) in con.execute("SELECT connectionId FROM CANN_API")}
            assert conns == {
                c
                for (c,) in con.execute(
                    "SELECT connectionId FROM TASK UNION SELECT connectionId FROM COMMUNICATION_OP"
                )
            }


def test_db_loads_through_ingest_like_text(pair: tuple[Path, Path]) -> None:
    from advisor_chat.ingest import load_profile

    text, db = (load_profile(p, use_cache=False) for p in pair)
    assert db.ranks == text.ranks and db.steps == text.steps
    a = db.get("step_trace").sort_values(["rank", "step"]).reset_index(drop=True)
    b = text.get("step_trace").sort_values(["rank", "step"]).reset_index(drop=True)
    for c in ("computing_us", "communication_not_overlapped_us", "free_us", "step_us"):
        assert (a[c] - b[c]).abs().max() < 1e-6, c
    oa = db.get("comm_ops").sort_values(["rank", "start_us"])["synchronization_ms"].to_numpy()
    ob = text.get("comm_ops").sort_values(["rank", "start_us"])["synchronization_ms"].to_numpy()
    assert len(oa) == len(ob) and abs(oa - ob).max() < 1e-9
