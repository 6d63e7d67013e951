"""Smoke test of tools/bench.py --quick: the report is produced and has every row (no timing asserts)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_bench_quick_produces_every_row(tmp_path: Path, real_samples: Path) -> None:
    home = tmp_path / "home"
    shared_index = Path(os.environ["ADVISOR_HOME"]) / "index"
    if shared_index.is_dir():  # reuse a case index another test already built
        shutil.copytree(shared_index, home / "index")
    out = tmp_path / "BENCHMARKS.md"
    raw = tmp_path / "bench.json"
    env = {**os.environ, "ADVISOR_SHARED": str(real_samples.parents[1])}
    cmd = [
        sys.executable,
        str(REPO / "tools" / "bench.py"),
        "--quick",
        "--exports",
        "text",
        "--trace-mb",
        "8,2",
        "--workdir",
        str(tmp_path / "work"),
        "--home",
        str(home),
        "--out",
        str(out),
        "--json",
        str(raw),
        "--cleanup",
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3000, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    md = out.read_text(encoding="utf-8")
    data = json.loads(raw.read_text(encoding="utf-8"))

    assert [(r["ranks"], r["export"]) for r in data["rows"]] == [(16, "text"), (256, "text")]
    for r in data["rows"]:
        s = r["summary"]
        for key in (
            "cold_load_s",
            "report_s",
            "cold_peak_mb",
            "cached_load_s",
            "answer_p50_ms",
            "answer_p95_ms",
            "msprof_s",
            "msprof_peak_mb",
        ):
            assert s.get(key) is not None, (r["ranks"], key, r.get("cold", {}).get("stderr_tail"))
        assert s["cached_hit"] is True  # the second load came from the Parquet cache
        assert s["msprof_ok"], r["msprof"].get("stderr_tail")
        assert f"| {r['ranks']} | text |" in md
    assert len(data["trace"]) == 2 and all(t["rc"] == 0 for t in data["trace"])
    assert all(
        t["inner"]["rows"] > 0 for t in data["trace"]
    )  # flows were matched in the tiled trace
    assert {t["verdict"] for t in data["targets"]} <= {"PASS", "FAIL", "n/a"}
    assert len(data["targets"]) == 7
    for section in (
        "## Machine",
        "## Targets",
        "## Load, report and answers",
        "## trace_view.json streaming",
        "nproc",
    ):
        assert section in md
    assert "python tools/bench.py --quick" in md
    # generated folders and traces were removed (--cleanup); nothing written next to the real samples
    assert not list((tmp_path / "work").glob("seed-rank12-*"))
    assert not (real_samples / "pt-text-level1-2rank" / "cluster_analysis_output").exists()
