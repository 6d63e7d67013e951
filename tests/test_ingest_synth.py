"""Synthetic profiles (advisor_chat.synth) load through the same readers as real ones."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from advisor_chat.errors import InputError
from advisor_chat.ingest import inspect_profile, load_profile


def test_synthetic_text_export_loads(scenario) -> None:  # type: ignore[no-untyped-def]
    root = scenario("seed-rank12")
    key = json.loads((root / "answer_key.json").read_text())
    p = load_profile(root, use_cache=False)
    assert p.layout == "ascend_pt_text"
    assert p.ranks == list(range(key["ranks"]))
    assert p.steps == key["step_ids"]
    # independent reading of one rank's step_trace_time.csv and kernel_details.csv
    folder = next(root.glob("*_ascend_pt"))
    rank = int(next(folder.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
    with (folder / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    st = p.get("step_trace")
    st = st[st["rank"] == rank].sort_values("step")
    assert st["free_us"].tolist() == pytest.approx([float(r["Free"]) for r in rows])
    with (folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").open(newline="") as fh:
        krows = list(csv.DictReader(fh))
    k = p.get("kernels")
    assert (k["rank"] == rank).sum() == len(krows)
    assert not [
        w for w in p.warnings if w.code in ("missing_ranks", "missing_steps", "trace_view_invalid")
    ]
    assert p.has("host_dispatch") and inspect_profile(p)["groups"]


def test_synthetic_db_export_agrees_with_text(scenario) -> None:  # type: ignore[no-untyped-def]
    try:
        db_root = scenario("seed-rank12", export="db")
    except InputError as exc:  # the generator may not offer DB export yet
        pytest.skip(f"synth DB export not available: {exc}")
    text = load_profile(scenario("seed-rank12"), use_cache=False)
    db = load_profile(db_root, use_cache=False)
    assert db.layout == "ascend_pt_db"
    assert db.ranks == text.ranks and db.steps == text.steps
    assert len(db.get("kernels")) == len(text.get("kernels"))
    for col in ("computing_us", "free_us"):
        a = text.get("step_trace").sort_values(["rank", "step"])[col].to_numpy()
        b = db.get("step_trace").sort_values(["rank", "step"])[col].to_numpy()
        assert a == pytest.approx(b, rel=1e-6, abs=1e-3)
    assert len(db.get("comm_ops")) == len(text.get("comm_ops"))
    assert all(f.endswith(".db") for f in db.source_files("host_dispatch"))


def test_synthetic_rank_folder_paths_are_real_dirs(scenario) -> None:  # type: ignore[no-untyped-def]
    root: Path = scenario("seed-rank12")
    assert all((d / "ASCEND_PROFILER_OUTPUT").is_dir() for d in root.glob("*_ascend_pt"))
