"""The analyzers' findings are the same as at the branch point of issue 13 (lazy heavy tables).

``tests/data/golden_findings.json`` was written by ``tools/golden_findings.py`` from the code before
ingest read ``trace_view.json`` / ``kernel_details.csv`` lazily. Every report finding (id, kind,
severity, ranks, metrics to 4 significant digits, summary) must be unchanged, except a finding
computed on a peer sample: it may differ only if it says so (metric ``peer_sample_ranks`` and the
word "sample" in its summary).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
GOLDEN = json.loads((REPO / "tests" / "data" / "golden_findings.json").read_text())

pytestmark = pytest.mark.slow


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "golden_findings", REPO / "tools" / "golden_findings.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TOOL = _tool()


def _says_sample(rec: dict[str, Any]) -> bool:
    return rec["metrics"].get("peer_sample_ranks", 0) > 0 and "sample" in rec["summary"]


def compare(golden: list[dict[str, Any]], now: list[dict[str, Any]]) -> list[str]:
    """Differences between two finding lists that are not explained by a stated peer sample."""
    old = {r["id"]: r for r in golden}
    new = {r["id"]: r for r in now}
    problems = []
    for fid in sorted(set(old) | set(new)):
        a, b = old.get(fid), new.get(fid)
        if a == b:
            continue
        if b is not None and _says_sample(b):
            continue
        if a is not None and b is not None:
            keys = [k for k in a if a[k] != b.get(k)]
            problems.append(
                f"{fid}: changed {keys}: {[a[k] for k in keys]} -> {[b.get(k) for k in keys]}"
            )
        else:
            problems.append(f"{fid}: {'missing now' if b is None else 'new'}")
    return problems


def test_compare_flags_a_changed_metric_and_accepts_a_stated_sample() -> None:
    rec = {
        "id": "x.y.r1",
        "kind": "k",
        "severity": "high",
        "ranks": [1],
        "metrics": {"a_us": 1.0},
        "summary": "s",
    }
    changed = {**rec, "metrics": {"a_us": 2.0}}
    assert compare([rec], [changed]) and "a_us" not in compare([rec], [rec])
    sampled = {
        **changed,
        "metrics": {"a_us": 2.0, "peer_sample_ranks": 16.0},
        "summary": "s (peer medians over a sample of 16 ranks)",
    }
    assert compare([rec], [sampled]) == []
    assert compare([rec], []) == ["x.y.r1: missing now"]


@pytest.mark.parametrize(
    "case,name,kw", TOOL.SCENARIO_CASES, ids=[c[0] for c in TOOL.SCENARIO_CASES]
)
def test_scenario_findings_unchanged(
    scenario, tmp_path: Path, case: str, name: str, kw: dict
) -> None:
    root = scenario(name, **kw)
    got = TOOL.scenario_case(root, tmp_path)
    want = GOLDEN["scenarios"][case]
    assert got["rank"] == want["rank"]
    if case != "healthy":
        assert want["report"], "the golden file holds findings for every scenario but healthy"
    assert compare(want["report"], got["report"]) == []
    assert compare(want["report_rank"], got["report_rank"]) == []


@pytest.mark.parametrize("name", sorted(GOLDEN["real"]))
def test_real_sample_findings_unchanged(real_samples: Path, tmp_path: Path, name: str) -> None:
    got = TOOL.real_case(real_samples / name, tmp_path)
    assert compare(GOLDEN["real"][name]["report"], got["report"]) == []
    assert compare(GOLDEN["real"][name]["report_rank"], got["report_rank"]) == []
