"""Independent check: the public msprof-analyze tool reads generated clusters like real ones."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.msprof, pytest.mark.slow]


def _tool() -> str:
    exe = Path(sys.executable).with_name("msprof-analyze")
    found = str(exe) if exe.exists() else shutil.which("msprof-analyze")
    if not found:
        if os.environ.get("CI"):
            pytest.fail("msprof-analyze is not installed (pip install -e '.[test]')")
        pytest.skip("msprof-analyze is not installed")
    return found


def _rows(p: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(p.read_bytes().decode(), newline="")))


COLS = (
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
)


@pytest.mark.parametrize("name", ["seed-rank12", "comm-bound-no-overlap"])
def test_msprof_cluster_step_trace_agrees(scenario, tmp_path: Path, name: str) -> None:
    tool = _tool()
    src = scenario(name)
    work = tmp_path / "cluster"
    shutil.copytree(src, work)
    proc = subprocess.run(
        [tool, "cluster", "-d", str(work), "-m", "all", "--force"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "[ERROR]" not in log, log[-3000:]
    assert "16 ranks, data type: text, profiling type: pytorch" in log
    out = work / "cluster_analysis_output"
    got = {
        (r["Step"], int(r["Index"])): r
        for r in _rows(out / "cluster_step_trace_time.csv")
        if r["Type"] == "rank"
    }
    key = json.loads((src / "answer_key.json").read_text())
    assert {s for s, _ in got} == {str(s) for s in key["step_ids"]}
    assert {r for _, r in got} == set(range(key["ranks"]))
    # our per-rank breakdown, recomputed from the trace_view Overlap Analysis events
    for d in sorted(src.glob("*_ascend_pt")):
        rank = int(next(d.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        ev = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
        ov = next(
            e["pid"]
            for e in ev
            if e.get("ph") == "M"
            and e["name"] == "process_name"
            and e["args"]["name"] == "Overlap Analysis"
        )
        steps = sorted(
            (float(e["ts"]), e["dur"], e["name"].split("#")[1])
            for e in ev
            if e.get("name", "").startswith("ProfilerStep#")
        )
        for s0, dur, sid in steps:
            mine = {c: 0.0 for c in COLS}
            for e in ev:
                if (
                    e.get("pid") == ov
                    and e["ph"] == "X"
                    and s0 - 0.5 <= float(e["ts"]) < s0 + dur - 0.5
                ):
                    mine[e["name"]] = mine.get(e["name"], 0.0) + e["dur"]
            mine["Overlapped"] = mine["Communication"] - mine["Communication(Not Overlapped)"]
            mine["Stage"] = dur
            theirs = got[(sid, rank)]
            for c in COLS:
                assert float(theirs[c]) == pytest.approx(mine[c], rel=0.01, abs=1.0), (rank, sid, c)
    grp = json.loads((out / "communication_group.json").read_text())
    assert sorted(map(tuple, grp["collective"]))
    # the cluster communication json groups every op of a group with all its ranks
    cc = json.loads((out / "cluster_communication.json").read_text())
    for group, per_step in cc.items():
        ranks_in = {int(x) for x in group.strip("()").split(",") if x.strip()}
        for ops in per_step.values():
            for opk, per_rank in ops.items():
                assert {int(x) for x in per_rank} == ranks_in, opk


def test_msprof_cluster_db_mode(scenario, tmp_path: Path) -> None:
    import sqlite3

    tool = _tool()
    src = scenario("seed-rank12", ranks=8, export="db")
    work = tmp_path / "cluster"
    shutil.copytree(src, work)
    proc = subprocess.run(
        [tool, "cluster", "-d", str(work), "-m", "all", "--force"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "[ERROR]" not in log, log[-3000:]
    assert "8 ranks, data type: db, profiling type: pytorch" in log
    with sqlite3.connect(work / "cluster_analysis_output" / "cluster_analysis.db") as con:
        got = {
            (s, int(i)): (c, n, f, st)
            for s, t, i, c, n, f, st in con.execute(
                'SELECT step, type, "index", computing, communication_not_overlapped, free, stage FROM ClusterStepTraceTime'
            )
            if t == "rank"
        }
        groups = con.execute("SELECT rank_set, pg_name FROM CommunicationGroupMapping").fetchall()
    assert groups == [("(0,1,2,3,4,5,6,7)", "default_group")]
    for d in src.glob("*_ascend_pt"):
        rank = int(next(d.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        with sqlite3.connect(
            d / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db"
        ) as con:
            steps = con.execute("SELECT id, startNs, endNs FROM STEP_TIME").fetchall()
            for sid, a, b in steps:
                mine = dict.fromkeys(range(4), 0)
                for t, dur in con.execute(
                    "SELECT type, endNs - startNs FROM OVERLAP_ANALYSIS WHERE startNs >= ? AND startNs < ?",
                    (a, b),
                ):
                    mine[t] += dur / 1000
                c, n, f, st = got[(str(sid), rank)]
                assert c == pytest.approx(mine[0], rel=0.01)
                assert n == pytest.approx(mine[2], rel=0.01)
                assert f == pytest.approx(mine[3], rel=0.01)
                assert st == pytest.approx((b - a) / 1000, rel=0.01)


def test_msprof_reads_pipeline_stages(scenario, tmp_path: Path) -> None:
    """msprof-analyze sees two pipeline stages; its Bubble/Stage per rank match ours."""
    tool = _tool()
    src = scenario("pipeline-stage-imbalance", ranks=8)
    work = tmp_path / "cluster"
    shutil.copytree(src, work)
    proc = subprocess.run(
        [tool, "cluster", "-d", str(work), "-m", "all", "--force"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "[ERROR]" not in log, log[-3000:]
    assert "8 ranks, data type: text, profiling type: pytorch" in log
    out = work / "cluster_analysis_output"
    got = _rows(out / "cluster_step_trace_time.csv")
    ranks = [r for r in got if r["Type"] == "rank"]
    stages = {r["Index"] for r in got if r["Type"] == "stage"}
    assert stages == {"(0, 1, 2, 3)", "(4, 5, 6, 7)"}
    assert {(int(r["Index"]), r["PP Index"]) for r in ranks} == {
        (i, "0" if i < 4 else "1") for i in range(8)
    }
    mine = {}
    for d in src.glob("*_ascend_pt"):
        rank = int(next(d.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        for x in _rows(d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"):
            mine[(x["Step"], rank)] = x
    for r in ranks:
        x = mine[(r["Step"], int(r["Index"]))]
        for c in ("Bubble", "Stage", "Communication(Not Overlapped and Exclude Receive)"):
            assert float(r[c]) == pytest.approx(float(x[c]), rel=0.01, abs=1.0), (r["Index"], c)
        assert (float(r["Bubble"]) > 0) == (int(r["Index"]) >= 4)
    grp = json.loads((out / "communication_group.json").read_text())
    assert sorted(sorted(g) for g in grp["p2p"]) == [[i, i + 4] for i in range(4)]
