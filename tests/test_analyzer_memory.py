"""The memory analyzer: device memory per step and its growth (memory_record.csv / MEMORY_RECORD)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor_chat.analyzers.memory import MemoryParams, memory
from advisor_chat.config import load_settings
from advisor_chat.errors import NotAnswerableError
from advisor_chat.ingest import load_profile
from advisor_chat.ingest.profile import Profile
from advisor_chat.ingest.schema import validate_table

STEP_US = 10_000.0


def _profile(growth_mb: float, steps: int = 5, ranks: int = 2) -> Profile:
    """Each step: a kernel at its start; memory samples every 1 ms, allocated base + growth*step
    plus a transient 500 MB in the middle of the step; the APP component too (ignored)."""
    k, m = [], []
    for r in range(ranks):
        for s in range(steps):
            t0 = 1e9 + s * STEP_US
            k.append(dict(rank=r, step=s, name="MatMul", op_type="MatMul", start_us=t0,
                          duration_us=100.0, wait_us=0.0, accelerator_core="AI_CORE"))  # fmt: skip
            for i in range(10):
                alloc = 1000.0 + growth_mb * s + (500.0 if i == 5 else 0.0)
                m.append(dict(rank=r, timestamp_us=t0 + 10 + i * 1000.0, component="PTA",
                              allocated_mb=alloc, reserved_mb=4000.0))  # fmt: skip
                m.append(dict(rank=r, timestamp_us=t0 + 10 + i * 1000.0, component="APP",
                              allocated_mb=np.nan, reserved_mb=9000.0))  # fmt: skip
    return Profile(
        root=Path("/data/prof"),
        layout="synthetic",
        tables={
            "kernels": validate_table("kernels", pd.DataFrame(k)),
            "memory": validate_table("memory", pd.DataFrame(m)),
        },
    )


def test_growth_per_step_and_step_peaks_from_construction() -> None:
    res = memory(_profile(250.0), MemoryParams())
    t = res.table[res.table["rank"] == 0].sort_values("step")
    assert t["allocated_mb_end"].tolist() == pytest.approx([1000.0 + 250.0 * s for s in range(5)])
    assert t["allocated_mb_peak"].tolist() == pytest.approx([1500.0 + 250.0 * s for s in range(5)])
    assert t["reserved_mb_peak"].max() == 4000.0  # the PTA allocator's, not APP's 9000
    assert res.metrics["growth_mb_per_step"] == pytest.approx(250.0)
    (f,) = [f for f in res.findings if f.id == "memory.growth.job"]
    assert f.ranks == (0, 1) and f.metrics["growth_first_mb"] == pytest.approx(1000.0)
    assert f.metrics["growth_last_mb"] == pytest.approx(2000.0)


def test_flat_memory_has_no_growth_finding() -> None:
    res = memory(_profile(0.0), MemoryParams())
    assert res.metrics["growth_mb_per_step"] == pytest.approx(0.0)
    assert not res.findings


def test_growth_below_the_threshold_is_not_a_finding() -> None:
    assert not memory(_profile(50.0), MemoryParams()).findings


def test_no_memory_samples_is_not_answerable() -> None:
    p = _profile(0.0)
    p.tables.pop("memory")
    with pytest.raises(NotAnswerableError, match="profile_memory=True"):
        memory(p, MemoryParams())


def test_reserved_only_component_gives_reserved_peaks_and_no_growth() -> None:
    """Only the APP component (Total Allocated empty): reserved peaks, a note, no growth claim."""
    p = _profile(250.0)
    mem = p.tables["memory"]
    p.tables["memory"] = mem[mem["component"] == "APP"].reset_index(drop=True)
    res = memory(p, MemoryParams())
    assert res.metrics["reserved_mb_peak"] == 9000.0
    assert "allocated_mb_peak" not in res.metrics and "growth_mb_per_step" not in res.metrics
    assert res.table["allocated_mb_end"].isna().all() and len(res.table) == 10
    assert not res.findings
    assert any("reserved memory only" in n for n in res.notes)
    assert any("只记录保留内存" in n for n in res.notes_zh)


def _pta_peak(root: Path) -> float:
    """Largest PTA 'Total Allocated(MB)' of memory_record.csv over the rank folders (csv)."""
    peak = 0.0
    for f in root.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/memory_record.csv"):
        with f.open(newline="") as fh:
            for row in csv.DictReader(fh):
                if row["Component"].strip() == "PTA":
                    peak = max(peak, float(row["Total Allocated(MB)"]))
    return peak


def test_real_text_and_db_exports_agree(real_samples: Path, tmp_path: Path) -> None:
    text = load_profile(
        real_samples / "pt-text-level1-2rank", settings=load_settings(home=tmp_path)
    )
    db = load_profile(real_samples / "pt-db-level1-2rank", settings=load_settings(home=tmp_path))
    a, b = memory(text, MemoryParams()), memory(db, MemoryParams())
    assert a.metrics["allocated_mb_peak"] == pytest.approx(b.metrics["allocated_mb_peak"])
    assert a.metrics["allocated_mb_peak"] == pytest.approx(
        _pta_peak(real_samples / "pt-text-level1-2rank")
    )
