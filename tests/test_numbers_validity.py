"""Numbers parsed or refused, never guessed (issue 24).

Generated profiles (the real text export) are edited the way a spreadsheet round trip or a mixed
export leaves them: thousands separators, decimal commas, one rank's step trace in ns, a step
with zero time, values no convention can resolve. Expected: the same diagnosis as the clean
profile when the numbers can be read unambiguously; otherwise the conclusion is withheld with a
message naming the file and the column (or the step left out), never a culprit made of the file.
"""

from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from advisor_chat.diagnosis import Mechanism, diagnose
from advisor_chat.ingest import load_profile
from advisor_chat.ingest.common import num

STEP_TRACE = "ASCEND_PROFILER_OUTPUT/step_trace_time.csv"


def test_locale_numbers_are_read_when_unambiguous() -> None:
    col = pd.Series(['"1,234.5"', "65,132.238\t", "12.5", "N/A", ""], dtype=object)
    assert num(col).tolist()[:3] == [1234.5, 65132.238, 12.5]
    assert num(["65132,238", "1,5", "12"]).tolist() == [65132.238, 1.5, 12.0]
    # "1,234" alone is 1234 or 1.234: read only by the convention the column's other values show
    assert num(pd.Series(["1,234", "2,345.5"], dtype=object)).tolist() == [1234.0, 2345.5]
    assert num(pd.Series(["1,234", "5,5"], dtype=object)).tolist() == [1.234, 5.5]
    assert num(pd.Series(["1,234", "2,345"], dtype=object)).isna().all()
    # both conventions in one column: neither is read
    assert num(pd.Series(["1,234.5", "65132,238"], dtype=object)).isna().all()


def _edit(src: Path, dst: Path, fn: Callable[[int, list[list[str]]], list[list[str]]]) -> Path:
    shutil.copytree(src, dst)
    for i, rank_dir in enumerate(sorted(dst.glob("*_ascend_pt"))):
        p = rank_dir / STEP_TRACE
        rows = list(csv.reader(io.StringIO(p.read_text(encoding="utf-8"))))
        buf = io.StringIO()
        csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\r\n").writerows(fn(i, rows))
        p.write_text(buf.getvalue(), encoding="utf-8")
    return dst


def _values(fn: Callable[[str], str]) -> Callable[[int, list[list[str]]], list[list[str]]]:
    return lambda i, rows: [rows[0]] + [[r[0]] + [fn(x) for x in r[1:]] for r in rows[1:]]


@pytest.fixture(scope="module")
def straggler(scenario) -> Path:
    return scenario("compute-straggler-hidden")


def _top(path: Path):
    d = diagnose(load_profile(path, use_cache=False, progress=False))
    return d, d.causes[0]


@pytest.mark.parametrize(
    "fmt",
    [
        lambda x: f"{float(x):,.3f}",  # thousands separators
        lambda x: x.replace(".", ","),  # decimal comma
    ],
    ids=["thousands", "decimal-comma"],
)
def test_locale_step_trace_gives_the_clean_diagnosis(straggler, tmp_path, fmt) -> None:
    _, clean = _top(straggler)
    _, got = _top(_edit(straggler, tmp_path / "p", _values(fmt)))
    assert (got.mechanism, got.culprit.ranks) == (clean.mechanism, clean.culprit.ranks)
    assert got.gain_us == pytest.approx(clean.gain_us, rel=1e-6)


def test_unreadable_numbers_withhold_the_conclusion_naming_file_and_column(
    straggler, tmp_path
) -> None:
    # "1,234"-style values only (no convention can be told): not numbers this tool can read
    def ambiguous(i: int, rows: list[list[str]]) -> list[list[str]]:
        def grouped(x: str) -> str:
            v = int(float(x))
            return f"{v // 1000},{v % 1000:03d}" if v >= 1000 else x

        return [rows[0]] + [[r[0]] + [grouped(x) for x in r[1:]] for r in rows[1:]]

    d, top = _top(_edit(straggler, tmp_path / "p", ambiguous))
    assert top.mechanism is Mechanism.NOT_ENOUGH_SIGNAL and top.id.endswith("number_unreadable")
    assert "Computing column" in top.summary and "step_trace_time.csv" in top.summary
    assert len(d.causes) == 1  # no culprit stated beside it


def test_one_rank_in_ns_is_refused_not_called_slow(straggler, tmp_path) -> None:
    def ns_on_rank_2(i: int, rows: list[list[str]]) -> list[list[str]]:
        if i != 2:
            return rows
        return [rows[0]] + [[r[0]] + [str(float(x) * 1000) for x in r[1:]] for r in rows[1:]]

    d, top = _top(_edit(straggler, tmp_path / "p", ns_on_rank_2))
    assert top.mechanism is Mechanism.NOT_ENOUGH_SIGNAL and top.id.endswith("unit_mismatch")
    assert "rank 2's step times" in top.summary and "1000x" in top.summary
    assert len(d.causes) == 1


def test_a_step_with_zero_time_is_left_out_and_said(straggler, tmp_path) -> None:
    def zero_second_step(i: int, rows: list[list[str]]) -> list[list[str]]:
        rows[2] = [rows[2][0]] + ["0"] * (len(rows[2]) - 1)
        return rows

    _, clean = _top(straggler)
    p = _edit(straggler, tmp_path / "p", zero_second_step)
    d, top = _top(p)
    first = sorted(p.glob("*_ascend_pt"))[0] / STEP_TRACE
    step = int(next(csv.reader(io.StringIO(first.read_text().splitlines()[2])))[0])
    assert (top.mechanism, top.culprit.ranks) == (clean.mechanism, clean.culprit.ranks)
    assert f"Step {step} left out" in d.left_out and f"第 {step} 步未纳入分析" in d.left_out_zh


def test_ranks_captured_in_different_steps_are_not_compared(straggler, tmp_path) -> None:
    def shift_upper_half(i: int, rows: list[list[str]]) -> list[list[str]]:
        if i < 4:
            return rows
        return [rows[0]] + [[str(int(r[0]) + 100), *r[1:]] for r in rows[1:]]

    d, top = _top(_edit(straggler, tmp_path / "p", shift_upper_half))
    assert top.mechanism is Mechanism.NOT_ENOUGH_SIGNAL and top.id.endswith("steps_disjoint")
    assert "captured in different steps" in top.summary and len(d.causes) == 1


@pytest.mark.parametrize("n", [3, 4, 5, 8, 17])
def test_leave_one_out_median_matches_numpy(n: int) -> None:
    """The unit check's 'other ranks' median, computed at once, equals numpy's one-by-one median."""
    import numpy as np

    from advisor_chat.diagnosis.validity import _leave_one_out_median

    rng = np.random.default_rng(n)
    for _ in range(20):
        v = rng.integers(0, 6, n).astype(float)  # many ties
        expected = [float(np.median(np.delete(v, i))) for i in range(n)]
        assert _leave_one_out_median(v).tolist() == pytest.approx(expected)
