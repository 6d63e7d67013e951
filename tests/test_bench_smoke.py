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
        "--sizes",
        "16",  # (the every-row check; 64 ranks cost 45 s of CI, 256 ranks 2 min, same rows)
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

    assert [(r["ranks"], r["export"]) for r in data["rows"]] == [(16, "text")]
    for r in data["rows"]:
        s = r["summary"]
        assert len(r["pairs"]) == 2  # two alternating ours / msprof-analyze pairs per size
        for key in (
            "cold_load_s",
            "report_s",
            "cold_peak_mb",
            "cold_wall_s",
            "msprof_s",
            "speedups",
        ):
            assert s.get(key) and len(s[key]) == 2, (
                r["ranks"],
                key,
                r["pairs"][0]["ours"].get("stderr_tail"),
            )
        for key in (
            "cached_load_s",
            "answer_first_ms",
            "answer_p95_ms",
            "floor",
            "cold_first_ms_0",
            "cold_first_ms_1",
            "cold_diagnose_s",
            "cli_report_cold_s",
            "cli_report_cached_s",
            "cli_ask_cached_s",
        ):
            assert s.get(key) is not None, (r["ranks"], key)
        assert len(s["cached_loads_s"]) == 2  # the cached row's reload and the answers row's
        assert s["cached_hit"] is True  # the second load came from the Parquet cache
        assert s["msprof_ok"], r["pairs"][0]["msprof"].get("stderr_tail")
        # the parse floor read every file and parsed one kernel CSV per rank
        assert s["floor"]["kernel_csvs"] == r["ranks"] and s["floor"]["kernel_rows"] > 0
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
        "## Cold load + report, side by side",
        "## The CLI, as a user runs it",
        "## Parse floor, cached reload and answers",
        "## trace_view.json streaming",
        "nproc",
    ):
        assert section in md
    assert "python tools/bench.py --quick" in md
