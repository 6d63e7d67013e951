"""Where the job's idle sits is measured as Free (no task on any stream), not as Wait Time.

A kernel's ``Wait Time(us)`` in ``kernel_details.csv`` is the idle on its own stream: while a
collective runs on the communication stream, the compute stream's gap counts there although the
device is communicating. The real 2-rank captures show it: their largest Wait Time (before a
TensorMove, after a Mul) lies inside an all-reduce, while their Free is ~90 short gaps.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from advisor_chat.diagnosis.decompose import _free_gaps, job_idle_shape
from advisor_chat.ingest import load_profile


def _kernels(rows: list[tuple[int, float, float, float, str]]) -> pd.DataFrame:
    """(rank, start µs, duration µs, Wait Time µs, op) rows sorted as job_idle_shape sorts them."""
    k = pd.DataFrame(rows, columns=["rank", "start", "dur", "wait", "op"])
    return k.sort_values(["rank", "start"], kind="stable").reset_index(drop=True)


def test_gap_covered_by_a_collective_is_not_free() -> None:
    # compute A [0, 100); all-reduce C [100, 600) on its own stream; compute B at 300 (its stream
    # waited 200 since A); compute D at 700 (100 of Free after C)
    k = _free_gaps(
        _kernels(
            [
                (0, 0.0, 100.0, 0.0, "MatMul"),
                (0, 100.0, 500.0, 0.0, "hcom_allReduce_"),
                (0, 300.0, 50.0, 200.0, "Mul"),
                (0, 700.0, 10.0, 350.0, "Add"),
            ]
        )
    )
    by_op = k.set_index("op")
    assert by_op.at["Mul", "wait"] == 0.0  # inside the all-reduce
    assert by_op.at["Add", "wait"] == 100.0  # after the all-reduce ended at 600
    assert by_op.at["Add", "prev"] == "hcom_allReduce_"  # the task that ended last
    assert k["wait"].sum() == 100.0


def test_ranks_are_independent() -> None:
    k = _free_gaps(
        _kernels(
            [
                (0, 0.0, 1000.0, 0.0, "A"),
                (1, 10.0, 5.0, 3.0, "B"),
                (1, 40.0, 5.0, 25.0, "C"),
            ]
        )
    )
    assert k.loc[k["op"] == "C", "wait"].item() == 25.0  # rank 0's long task does not cover it
    assert k.loc[k["op"] == "B", "wait"].item() == 3.0  # first kernel of its rank keeps Wait Time


def _file_free_us(folder: Path) -> float:
    """Free (us) of step_trace_time.csv, read with the csv module."""
    with open(folder / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return sum(float(r["Free"].strip()) for r in rows)


@pytest.mark.parametrize("rank", [0, 1])
def test_free_gaps_add_up_to_the_step_traces_free_on_the_real_capture(
    real_samples: Path, rank: int
) -> None:
    root = real_samples / "pt-text-level1-2rank"
    p = load_profile(root)
    kd = p.kernels_for([rank])
    k = pd.DataFrame(
        {
            "rank": kd["rank"].to_numpy(),
            "start": kd["start_us"].to_numpy(),
            "dur": kd["duration_us"].to_numpy(),
            "wait": kd["wait_us"].fillna(0.0).to_numpy(),
            "op": kd["op_type"].astype("string").fillna("").to_numpy(),
        }
    ).sort_values(["rank", "start"], kind="stable")
    gaps = _free_gaps(k)
    # the rank's first kernel keeps its Wait Time (the gap before the capture's first task is
    # not in the step's Free)
    free = float(gaps["wait"].iloc[1:].sum())
    folder = next(f.parent for f in root.rglob(f"profiler_info_{rank}.json") if f.parent.is_dir())
    assert free == pytest.approx(_file_free_us(folder), rel=0.01)
    # the Wait Time sums to ~4x that: it counts the compute stream's gaps inside collectives
    assert float(kd["wait_us"].sum()) > 3 * free


@pytest.mark.parametrize("sample", ["pt-text-level1-2rank", "pt-db-level1-2rank"])
def test_real_capture_idle_is_not_one_stretch(real_samples: Path, sample: str) -> None:
    p = load_profile(real_samples / sample)
    shape = job_idle_shape(p, p.ranks)
    assert shape is None or shape.kind != "stretch"
