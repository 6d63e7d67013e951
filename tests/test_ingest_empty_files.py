"""Per-rank files that exist but hold nothing: a header-only step trace, a 0-byte trace_view.json.

They are named as such (not as "missing"), with the file's path and what to do, in English and in
Chinese; a rank whose step trace has no rows has unknown Computing and Free, not zero deltas.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from advisor_chat.analyzers.data_quality import _WARNING_ZH, warning_zh
from advisor_chat.ingest import load_profile


def _header_only(csv_file: Path) -> None:
    header = csv_file.read_text(encoding="utf-8").splitlines()[0]
    csv_file.write_text(header + "\n", encoding="utf-8")


def test_header_only_step_trace_is_named_as_a_file_with_no_rows(
    real_samples: Path, tmp_path: Path
) -> None:
    root = tmp_path / "p"
    shutil.copytree(real_samples / "pt-text-level1-2rank", root)
    f = root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    _header_only(f)
    p = load_profile(root, use_cache=False)
    (w,) = [w for w in p.warnings if w.code == "missing_table"]
    assert w.ranks == (1,)
    assert "no rows" in w.message and "step_trace_time.csv" in w.message
    assert Path(w.path) == f  # the file itself, not only its folder
    assert "Copy step_trace_time.csv" in w.message


def test_absent_step_trace_is_named_as_missing(real_samples: Path, tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(real_samples / "pt-text-level1-2rank", root)
    (root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").unlink()
    p = load_profile(root, use_cache=False)
    (w,) = [w for w in p.warnings if w.code == "missing_table"]
    assert "no rows" not in w.message and "have no step trace" in w.message


def test_empty_trace_view_is_called_empty(real_samples: Path, tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(real_samples / "pt-text-level1-2rank", root)
    (root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_bytes(b"")
    p = load_profile(root, use_cache=False)
    p.host_dispatch_for([0, 1])  # the trace is read lazily
    (w,) = [w for w in p.warnings if w.code == "trace_view_invalid"]
    assert "is empty (0 bytes)" in w.message and w.ranks == (0,)


def test_every_load_warning_code_has_its_own_chinese_text() -> None:
    import re

    src = Path(__file__).resolve().parents[1] / "advisor_chat" / "ingest"
    codes = {
        m
        for f in src.glob("*.py")
        for m in re.findall(r'code="([a-z_0-9]+)"', f.read_text(encoding="utf-8"))
    }
    assert codes, "no warning codes found"
    generic = warning_zh("__unknown__", [])
    missing = sorted(c for c in codes if c not in _WARNING_ZH)
    assert not missing, f"load warnings without Chinese text: {missing}"
    assert all(warning_zh(c, [1]) != generic for c in codes)


@pytest.fixture(scope="module")
def culprit_without_rows(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    from advisor_chat.synth import generate

    root = generate("seed-rank12", tmp_path_factory.mktemp("hdr") / "p", ranks=4, steps=3)
    (culprit,) = json.loads((root / "answer_key.json").read_text())["slow_ranks"]
    folders = sorted(p for p in root.iterdir() if p.name.endswith("_ascend_pt"))
    _header_only(folders[culprit] / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
    return root, culprit


def test_slow_rank_without_step_trace_rows_has_unknown_deltas(culprit_without_rows) -> None:
    from advisor_chat.analyzers.slow_rank import SlowRankParams, slow_rank

    root, culprit = culprit_without_rows
    res = slow_rank(load_profile(root, use_cache=False), SlowRankParams())
    (f,) = [f for f in res.findings if f.ranks == (culprit,)]
    assert math.isnan(f.metrics["computing_delta_us"]) and math.isnan(f.metrics["free_delta_us"])
    assert "unknown" in f.summary and "0.0 ms" not in f.summary
