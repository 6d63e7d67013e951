"""Known-answer tests for step_trend: series built with a known slope, jump, or outlier."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor_chat.analyzers import FindingKind
from advisor_chat.analyzers.step_trend import StepTrendParams, step_trend
from advisor_chat.errors import NotAnswerableError, ToolArgumentError
from advisor_chat.ingest.profile import Profile
from advisor_chat.ingest.schema import validate_table


def _profile(series: dict[int, list[float]], first_step: int = 10) -> Profile:
    rows = []
    for r, ys in series.items():
        for i, y in enumerate(ys):
            rows.append(
                dict(
                    rank=r,
                    step=first_step + i,
                    computing_us=y * 0.8,
                    communication_not_overlapped_us=y * 0.1,
                    overlapped_us=0.0,
                    communication_us=y * 0.1,
                    free_us=y * 0.1,
                    stage_us=y,
                    bubble_us=0.0,
                    step_us=y,
                )
            )
    return Profile(
        root=Path("."),
        layout="synthetic",
        tables={"step_trace": validate_table("step_trace", pd.DataFrame(rows))},
    )


FLAT = [10_000.0] * 10


def test_linear_growth_on_one_rank_is_degradation() -> None:
    grow = [10_000.0 + 200.0 * i for i in range(10)]  # +18% over the run, zero noise
    res = step_trend(_profile({0: FLAT, 1: FLAT, 2: grow, 3: FLAT}), StepTrendParams())
    pr = res.tables["per_rank"].set_index("rank")
    assert pr.loc[2, "slope_us_per_step"] == pytest.approx(200.0)
    assert pr.loc[2, "growth_ratio"] == pytest.approx(1800.0 / 10_000.0)
    assert pr.loc[0, "slope_us_per_step"] == pytest.approx(0.0)
    deg = [f for f in res.findings if f.kind is FindingKind.DEGRADATION]
    assert len(deg) == 1 and deg[0].ranks == (2,)
    assert deg[0].id == "step_trend.degradation.r2"
    assert deg[0].metrics["slope_us_per_step"] == pytest.approx(200.0)
    # per-step excess over the start of the run: mean(grow) - 10000 = 900
    assert deg[0].estimated_gain_us == pytest.approx(900.0)
    assert not [f for f in res.findings if f.kind is FindingKind.JITTER]
    assert len(res.table) == 40


def test_step_change_point_found() -> None:
    jump = [10_000.0] * 6 + [12_000.0] * 6
    res = step_trend(_profile({r: jump for r in range(4)}, first_step=0), StepTrendParams())
    pr = res.tables["per_rank"]
    assert (pr["change_point_step"] == 6).all()
    assert pr["mean_before_us"].iloc[0] == pytest.approx(10_000.0)
    assert pr["mean_after_us"].iloc[0] == pytest.approx(12_000.0)
    deg = [f for f in res.findings if f.kind is FindingKind.DEGRADATION]
    assert len(deg) == 1 and deg[0].id == "step_trend.degradation.cluster"
    assert deg[0].ranks == (0, 1, 2, 3)
    assert deg[0].metrics["change_point_step"] == 6
    # one jump is said as a jump between two levels, not as a slope through it
    assert deg[0].metrics["step_change"] == 1.0
    assert "jumps at step 6, from 10000 us" in deg[0].summary and "12000 us" in deg[0].summary
    assert "slope" not in deg[0].summary and "突然升高" in deg[0].summary_zh


def test_steady_growth_is_not_a_step_change() -> None:
    grow = [10_000.0 + 200.0 * i for i in range(10)]
    (deg,) = [
        f
        for f in step_trend(_profile({0: grow, 1: grow}), StepTrendParams()).findings
        if f.kind is FindingKind.DEGRADATION
    ]
    assert deg.metrics["step_change"] == 0.0 and "slope 200 us/step" in deg.summary


def test_noise_without_trend_is_not_degradation_but_outlier_found() -> None:
    rng = np.random.default_rng(0)
    ys = list(10_000.0 + rng.normal(0, 50.0, 20))
    ys[7] = 16_000.0  # one slow step
    res = step_trend(_profile({0: ys, 1: FLAT * 2}), StepTrendParams())
    rows = res.table[res.table["rank"] == 0].set_index("step")
    assert bool(rows.loc[17, "is_outlier"])
    assert int(rows["is_outlier"].sum()) == 1
    assert not [f for f in res.findings if f.kind is FindingKind.DEGRADATION]
    jit = [f for f in res.findings if f.kind is FindingKind.JITTER]
    assert len(jit) == 1 and jit[0].ranks == (0,)
    assert "17" in jit[0].summary


def test_fewer_than_three_steps_no_finding() -> None:
    res = step_trend(_profile({0: [10_000.0, 20_000.0]}), StepTrendParams())
    assert not res.findings
    assert any("not enough steps" in n for n in res.notes)


def test_errors_and_rank_filter() -> None:
    with pytest.raises(NotAnswerableError):
        step_trend(Profile(root=Path("."), layout="synthetic"), StepTrendParams())
    prof = _profile({0: FLAT, 1: FLAT})
    with pytest.raises(ToolArgumentError, match="0-1"):
        step_trend(prof, StepTrendParams(rank=5))
    res = step_trend(prof, StepTrendParams(rank=1))
    assert set(res.table["rank"]) == {1}


def test_cluster_degradation_names_the_driving_rank() -> None:
    # every rank's step grows 300 us/step; only rank 2's Computing + Free grows, the others'
    # growth sits in communication (they wait for rank 2 at the collective)
    rows = []
    for r in range(4):
        for i in range(8):
            step = 10_000.0 + 300.0 * i
            own_growth = 300.0 * i if r == 2 else 0.0
            comp, free = 7_000.0, 1_000.0 + own_growth
            comm = step - comp - free
            rows.append(
                dict(
                    rank=r,
                    step=i,
                    computing_us=comp,
                    communication_not_overlapped_us=comm,
                    overlapped_us=0.0,
                    communication_us=comm,
                    free_us=free,
                    stage_us=step,
                    bubble_us=0.0,
                    step_us=step,
                )
            )
    prof = Profile(
        root=Path("."),
        layout="synthetic",
        tables={"step_trace": validate_table("step_trace", pd.DataFrame(rows))},
    )
    res = step_trend(prof, StepTrendParams())
    deg = [f for f in res.findings if f.kind is FindingKind.DEGRADATION]
    assert len(deg) == 1 and deg[0].ranks == (2,)
    assert deg[0].metrics["ranks_degrading"] == 4
    assert "rank 2" in deg[0].summary
    pr = res.tables["per_rank"].set_index("rank")
    assert pr.loc[2, "own_slope_us_per_step"] == pytest.approx(300.0)
    assert pr.loc[0, "own_slope_us_per_step"] == pytest.approx(0.0)


def test_outliers_are_judged_against_the_clean_steps_when_most_steps_are_slow() -> None:
    # 4 of 6 steps carry a 650 ms stall (GC-like), 2 are clean at 76 ms: the slow steps are the
    # outliers, not the two clean ones (a median-based judgment would flag the clean steps)
    ys = [726_000.0, 726_000.0, 76_000.0, 726_000.0, 726_000.0, 76_100.0]
    res = step_trend(_profile({r: ys for r in range(4)}), StepTrendParams())
    rows = res.table[res.table["rank"] == 0].set_index("step")
    assert sorted(rows.index[rows["is_outlier"]]) == [10, 11, 13, 14]
    assert rows["clean_step_us"].iloc[0] == pytest.approx(76_100.0)  # median of the faster half
    jit = [f for f in res.findings if f.kind is FindingKind.JITTER]
    assert len(jit) == 1 and "[10, 11, 13, 14]" in jit[0].summary
    assert "most steps are slow" in jit[0].summary and "大多数步都变慢了" in jit[0].summary_zh


def test_jitter_counts_distinct_outlier_steps_not_rank_rows(scenario) -> None:
    """ecc-kernel-retries: the cluster-wide jitter finding lists its outlier steps; its
    ``outlier_steps`` metric is how many steps that list holds (was one per rank and step)."""
    from advisor_chat.analyzers.base import get_analyzer
    from advisor_chat.ingest import load_profile

    prof = load_profile(scenario("ecc-kernel-retries"), use_cache=False, progress=False)
    spec = get_analyzer("step_trend")
    res = spec.run(prof, spec.params())
    jit = [f for f in res.findings if f.id.startswith("step_trend.jitter")]
    assert jit
    for f in jit:
        listed = f.summary.split("outlier steps: [")[1].split("]")[0]
        n = len([x for x in listed.split(",") if x.strip()])
        assert f.metrics["outlier_steps"] == n, (f.summary, f.metrics)
