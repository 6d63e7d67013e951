"""A report on a profile read back from the cache says what the report on the parsed folder said.

The generator scenarios of ``tests/_sampling.py`` (text export) and every real sample: load with the cache (parsed and
written), report; load again (read from the cache, cache hit) with the stored diagnosis removed,
report again; the findings (id, summary, metrics) and the diagnosis' causes must be equal.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from _sampling import equivalence_sample

from advisor_chat.config import load_settings
from advisor_chat.diagnosis import engine
from advisor_chat.ingest import load_profile
from advisor_chat.reporting import run_report
from advisor_chat.synth import SCENARIOS

REAL = [
    "cluster-8rank",
    "cluster-16rank-pp2",
    "kernel-details-variants",
    "pt-db-level1-2rank",
    "pt-text-level1-2rank",
]


def _metric(v: Any) -> Any:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else round(v, 6)
    return v


def _facts(rep: Any) -> tuple[list[Any], list[Any]]:
    findings = [
        (f.id, f.summary, sorted((k, _metric(v)) for k, v in f.metrics.items()))
        for f in rep.findings
    ]
    diag = rep.diagnosis
    causes = [(c.id, c.summary) for c in diag.causes] if diag is not None else []
    return findings, causes


def _check(folder: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    settings = load_settings(home=home)
    engine.clear_cache()
    cold = load_profile(folder, settings=settings, progress=False, cache_write="now")
    assert not cold.cache_hit
    want = _facts(run_report(cold, strict=True))
    for stored in (home / "cache" / "profiles").glob("*.diagnosis"):
        shutil.rmtree(stored)  # the cached side must compute its diagnosis, not read it back
    engine.clear_cache()
    cached = load_profile(folder, settings=settings, progress=False)
    assert cached.cache_hit
    got = _facts(run_report(cached, strict=True))
    assert got[0] == want[0], folder.name
    assert got[1] == want[1], folder.name


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [s for s in equivalence_sample(SCENARIOS) if s != "cann-upgrade-pair"]
)
def test_report_from_cache_equals_report_from_files(
    name: str, scenario: Any, tmp_path: Path
) -> None:
    _check(scenario(name), tmp_path)


@pytest.mark.parametrize("name", REAL)
def test_real_sample_report_from_cache_equals_report_from_files(
    name: str, real_samples: Path, tmp_path: Path
) -> None:
    _check(real_samples / name, tmp_path)
