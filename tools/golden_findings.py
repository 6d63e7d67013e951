#!/usr/bin/env python
"""Snapshot of every report analyzer's findings on the generator scenarios and the real samples.

``tests/test_findings_unchanged.py`` compares the findings of the current code with
``tests/data/golden_findings.json``, written by this script from the code at the branch point of
issue 13 (lazy heavy tables, peer samples), so a change of ingest cannot change a finding silently.

Usage (from the repository root)::

    .venv/bin/python tools/golden_findings.py            # rewrite tests/data/golden_findings.json

A finding is recorded as ``id, kind, severity, ranks`` and its metrics rounded to 4 significant
digits. Cases: every scenario at its default size (text export), ``seed-rank12`` at 64 ranks (more
ranks than the peer sample, so sampling is exercised) and as DB export, each report run without a
rank and with the scenario's first slow rank (``explain_rank``; ``cann-upgrade-pair`` with its
baseline), and the real samples that hold rank folders or a cluster output.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "data" / "golden_findings.json"

#: (case name, scenario, generate() keyword arguments)
SCENARIO_CASES: list[tuple[str, str, dict[str, Any]]] = [
    *[
        (name, name, {})
        for name in (
            "seed-rank12",
            "matmul-shape-regression",
            "slow-link",
            "comm-bound-no-overlap",
            "cann-upgrade-pair",
            "dataloader-stall",
            "hccl-wait-skew",
            "degradation",
            "compute-straggler-hidden",
            "healthy",
        )
    ],
    ("seed-rank12-64", "seed-rank12", {"ranks": 64}),
    ("seed-rank12-db", "seed-rank12", {"export": "db"}),
]
REAL_CASES = ["pt-text-level1-2rank", "pt-db-level1-2rank", "cluster-8rank", "cluster-16rank-pp2"]


def _round(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        f = float(v)
        if not math.isfinite(f):
            return str(f)
        if f == 0:
            return 0.0
        return float(f"{f:.4g}")
    return str(v)


def finding_record(f: Any) -> dict[str, Any]:
    """The compared part of a finding (metrics rounded to 4 significant digits)."""
    return {
        "id": f.id,
        "kind": f.kind.value,
        "severity": f.severity.value,
        "ranks": [int(r) for r in f.ranks],
        "metrics": {k: _round(v) for k, v in sorted(f.metrics.items())},
        "summary": f.summary,
    }


def report_records(profile: Any, *, rank: int | None = None, baseline: Any = None) -> list[dict]:
    """Findings of ``run_report`` (strict: a programming error raises)."""
    from advisor_chat.reporting import run_report

    rep = run_report(profile, rank=rank, baseline=baseline, strict=True)
    return [finding_record(f) for f in rep.findings]


def scenario_case(root: Path, tmp: Path) -> dict[str, Any]:
    """Findings of one generated scenario folder (``root`` holds ``answer_key.json``)."""
    from advisor_chat.config import load_settings
    from advisor_chat.ingest import load_profile

    settings = load_settings(home=tmp)
    key = json.loads((root / "answer_key.json").read_text())
    slow = (key.get("slow_ranks") or [0])[0]
    if (root / "after").is_dir():
        prof = load_profile(root / "after", settings=settings, use_cache=False)
        base = load_profile(root / "before", settings=settings, use_cache=False)
    else:
        prof = load_profile(root, settings=settings, use_cache=False)
        base = None
    return {
        "report": report_records(prof, baseline=base),
        "report_rank": report_records(prof, rank=int(slow), baseline=base),
        "rank": int(slow),
    }


def real_case(folder: Path, tmp: Path) -> dict[str, Any]:
    """Findings of one real sample folder (read-only; the cache goes to ``tmp``)."""
    from advisor_chat.config import load_settings
    from advisor_chat.ingest import load_profile

    prof = load_profile(folder, settings=load_settings(home=tmp), use_cache=False)
    return {"report": report_records(prof), "report_rank": report_records(prof, rank=0), "rank": 0}


def real_root() -> Path | None:
    for c in (
        REPO / "tests" / "data" / "real",
        REPO.parent / "shared" / "samples" / "real",
        Path("/work/shared/samples/real"),
    ):
        if (c / "PROVENANCE.md").is_file():
            return c
    return None


def collect(work: Path) -> dict[str, Any]:
    """Generate every scenario case under ``work`` and collect all findings."""
    from advisor_chat.synth import generate

    out: dict[str, Any] = {"scenarios": {}, "real": {}}
    for case, name, kw in SCENARIO_CASES:
        root = generate(name, work / case, workers=1, **kw)
        out["scenarios"][case] = scenario_case(root, work / "home")
    real = real_root()
    if real is not None:
        for name in REAL_CASES:
            if (real / name).is_dir():
                out["real"][name] = real_case(real / name, work / "home")
    return out


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="golden_") as tmp:
        data = collect(Path(tmp))
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    n = sum(len(c["report"]) + len(c["report_rank"]) for s in data.values() for c in s.values())
    print(f"wrote {GOLDEN} ({n} findings)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
