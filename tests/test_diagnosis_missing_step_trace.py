"""A late rank whose step trace is missing is explained from its kernels when they tell why.

The collectives name the late rank (the others' Wait Time); without its ``step_trace_time.csv``
rows its Computing / Free are unknown, but its ``kernel_details.csv`` still says whether its device
work is longer than its peers' and why. Built from generator scenarios whose answer is known by
construction (the culprit's planted slowdown), with the culprit's step trace cut to its header in
a copy; the device times are summed here from the CSV files with the csv module, independently of
the ingest code.
"""

from __future__ import annotations

import csv
import json
import shutil
import statistics
from pathlib import Path

import orjson
import pytest

from advisor_chat.diagnosis import Mechanism, diagnose
from advisor_chat.ingest import load_profile


def _without_step_trace(src: Path, dst: Path) -> tuple[Path, int, Path]:
    """Copy ``src`` to ``dst`` and cut the culprit's step_trace_time.csv to its header."""
    shutil.copytree(src, dst)
    rank = json.loads((dst / "answer_key.json").read_text())["root_cause"]["culprit_ranks"][0]
    folder = next(dst.glob(f"*_ascend_pt/profiler_info_{rank}.json")).parent
    st = folder / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    st.write_text(st.read_text().splitlines()[0] + "\n")
    return dst, rank, folder


def _device_us_per_step(folder: Path) -> float:
    """Compute-kernel time per step of one rank folder (collectives left out), µs."""
    with open(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as fh:
        rows = [
            r
            for r in csv.DictReader(fh)
            if not r["Name"].lower().startswith("hcom") and "hccl" not in r["Name"].lower()
        ]
    steps = {r["Step Id"] for r in rows}
    return sum(float(r["Duration(us)"]) for r in rows) / len(steps)


def _peers_us(root: Path, culprit: Path) -> list[float]:
    return [_device_us_per_step(f) for f in sorted(root.glob("*_ascend_pt")) if f != culprit]


def test_slower_kernels_explain_a_late_rank_without_step_trace(scenario, tmp_path: Path) -> None:
    root, rank, folder = _without_step_trace(scenario("hbm-slow-rank"), tmp_path / "p")
    d = diagnose(load_profile(root, use_cache=False))
    c = next(c for c in d.causes if rank in c.culprit.ranks)
    assert c.mechanism is Mechanism.COMPUTE_STRAGGLER, c.summary
    assert "no step trace" in c.summary and "its kernels show why" in c.summary
    assert "AI_VECTOR_CORE" in c.summary  # the unit the scenario slows down
    extra = _device_us_per_step(folder) - statistics.mean(_peers_us(root, folder))
    assert c.metrics["device_extra_us"] == pytest.approx(extra, rel=0.05)
    assert c.remedies[0].kind == "action" and c.remedies[-1].kind == "check"
    assert "算子数据说明了原因" in c.summary_zh


def _launch_delay_p50_us(folder: Path) -> float:
    """Median HostToDevice launch-to-start delay of one rank (flow ``f`` ts − ``s`` ts), µs."""
    ev = orjson.loads((folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_bytes())
    s = {
        e["id"]: float(e["ts"]) for e in ev if e.get("ph") == "s" and e.get("cat") == "HostToDevice"
    }
    f = {
        e["id"]: float(e["ts"]) for e in ev if e.get("ph") == "f" and e.get("cat") == "HostToDevice"
    }
    return statistics.median(f[i] - s[i] for i in s.keys() & f.keys())


def test_a_late_rank_with_ordinary_kernels_and_a_late_host(scenario, tmp_path: Path) -> None:
    root, rank, folder = _without_step_trace(scenario("host-bound-last-arriver"), tmp_path / "p")
    d = diagnose(load_profile(root, use_cache=False))
    c = next(c for c in d.causes if rank in c.culprit.ranks)
    # its kernels take its peers' time; its host launches just in time: a host stall
    assert c.mechanism is Mechanism.HOST_STALL, c.summary
    assert "the host is late" in c.summary and "主机下发晚了" in c.summary_zh
    own, peers = _device_us_per_step(folder), statistics.mean(_peers_us(root, folder))
    assert c.metrics["device_us_culprit"] == pytest.approx(own, rel=0.02)
    assert c.metrics["device_us_peer"] == pytest.approx(peers, rel=0.02)
    others = [f for f in sorted(root.glob("*_ascend_pt")) if f != folder]
    assert c.metrics["launch_delay_p50_us"] == pytest.approx(_launch_delay_p50_us(folder), rel=0.05)
    assert c.metrics["launch_delay_p50_us_peer"] == pytest.approx(
        statistics.median(_launch_delay_p50_us(f) for f in others), rel=0.05
    )
    assert [r.kind for r in c.remedies] == ["action", "check"]


def test_a_late_rank_with_ordinary_kernels_and_no_host_data(scenario, tmp_path: Path) -> None:
    """Without host data nothing tells a host stall from input or a link: said, not guessed."""
    root, rank, folder = _without_step_trace(scenario("host-bound-last-arriver"), tmp_path / "p")
    for tv in root.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"):
        tv.unlink()
    d = diagnose(load_profile(root, use_cache=False))
    c = next(c for c in d.causes if rank in c.culprit.ranks)
    assert c.mechanism is Mechanism.LATE_ARRIVAL  # what is late cannot be told: not "compute"
    assert "not in its operators" in c.summary
    own, peers = _device_us_per_step(folder), statistics.mean(_peers_us(root, folder))
    assert c.metrics["device_us_culprit"] == pytest.approx(own, rel=0.02)
    assert c.metrics["device_us_peer"] == pytest.approx(peers, rel=0.02)
    assert [r.kind for r in c.remedies] == ["check"]
