"""User-report fixes that live in the shared analyzers breakdown.py and slow_rank.py (bubble and
communication gains, wait-dominated breakdown, slow_rank without step trace, one peer median).

Kept apart from test_analyzers_user_feedback.py so it is committed with those hunks.
"""

from __future__ import annotations

import csv

import pandas as pd
import pytest
from _analyzers_a_helpers import make_profile, read_cluster_csv, step_rows
from test_analyzers_slow_rank import comm_rows
from test_analyzers_user_feedback import free_profile, run, wait_profile

from advisor_chat.reporting import run_report


def test_breakdown_wait_dominated_communication_has_no_overlap_gain():
    b = [f for f in run("cluster_breakdown", wait_profile()).findings if ".communication_" in f.id]
    assert [x.id for x in b] == ["cluster_breakdown.bottleneck.communication_wait_all_ranks"]
    assert b[0].estimated_gain_us is None
    assert "comm_bound" not in b[0].symptom_tags and "missing_ranks" in b[0].symptom_tags
    assert b[0].metrics["transit_share"] == pytest.approx(2.0 / 80.0)
    assert "ranks 2-7" in b[0].summary


def test_breakdown_transit_dominated_gain_is_transit_capped_upper_bound():
    p = wait_profile(transit=70.0, wait=5.0, idle=5.0)
    b = next(f for f in run("cluster_breakdown", p).findings if ".communication_share" in f.id)
    assert b.estimated_gain_us == pytest.approx(70_000.0)
    assert "UPPER BOUND" in b.evidence[0].note


# ---------------------------------------------------------------- 3. bubble gain
def test_bubble_gain_is_bubble_above_five_percent_of_the_step():
    st = step_rows(4, bubble=30_000.0)  # step = 125 ms, Bubble 30 ms
    f = next(
        f
        for f in run("cluster_breakdown", make_profile({"step_trace": st})).findings
        if "pipeline_bubble" in f.id
    )
    assert f.estimated_gain_us == pytest.approx(30_000.0 - 0.05 * 125_000.0)
    assert f.metrics["gain_upper_bound_us"] == f.estimated_gain_us
    assert "UPPER BOUND" in f.evidence[0].note


# ---------------------------------------------------------------- 4. no step trace
def test_slow_rank_without_step_trace_uses_comm_only():
    p = make_profile({"comm_ops": comm_rows(8, late=5)})
    res = run("slow_rank", p)
    assert any("no step trace (step_trace_time.csv" in n for n in res.notes)
    assert 5 in set(res.table.loc[res.table["slow"], "rank"])


def test_slow_rank_and_explain_rank_use_the_same_peer_median():
    p = free_profile()
    sr = run("slow_rank", p).table.set_index("rank")
    er = run("explain_rank", p, rank=3)
    assert sr.at[3, "free_delta_us"] == pytest.approx(er.metrics["free_delta_us"])
    f = next(f for f in run("slow_rank", p).findings if 3 in f.ranks)
    assert "62.0 ms above the peers' median (excluding rank 3)" in f.summary
    assert "host_bound" not in f.symptom_tags


@pytest.mark.slow
def test_real_samples_report_without_internal_errors(real_samples):
    from advisor_chat.ingest import load_profile

    for folder in sorted(d for d in real_samples.iterdir() if d.is_dir()):
        rep = run_report(load_profile(folder), strict=True)
        assert not [r for r in rep.runs if r.status == "error"], folder.name


@pytest.mark.slow
def test_real_pp2_bubble_ranked_above_host_bound(real_samples):
    from advisor_chat.ingest import load_profile

    folder = real_samples / "cluster-16rank-pp2"
    ranks, _stages = read_cluster_csv(
        folder / "cluster_analysis_output/cluster_step_trace_time.csv"
    )
    df = pd.DataFrame(ranks)
    rep = run_report(load_profile(folder), strict=True)
    bub = [f for f in rep.findings if "pipeline_bubble" in f.id]
    assert bub and all(f.estimated_gain_us is not None for f in bub)
    top = max(bub, key=lambda f: f.estimated_gain_us or 0.0)
    sub = df[df["rank"].isin(top.ranks)]
    assert top.estimated_gain_us == pytest.approx(
        sub["bubble_us"].mean() - 0.05 * sub["step_us"].mean(), rel=1e-6
    )
    ids = [f.id for f in rep.findings]
    hb = [i for i in ids if "host_bound" in i]
    assert hb and ids.index(top.id) < min(ids.index(i) for i in hb)


@pytest.mark.slow
def test_real_cluster_8rank_rank1_free_is_neutral_and_medians_agree(real_samples):
    path = real_samples / "cluster-8rank/cluster_analysis_output/cluster_step_trace_time.csv"
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["Type"] == "rank"]
    free = (
        pd.DataFrame(
            {"rank": [int(r["Index"]) for r in rows], "free": [float(r["Free"]) for r in rows]}
        )
        .groupby("rank")["free"]
        .mean()
    )
    expected = free[1] - free.drop(index=1).median()
    from advisor_chat.ingest import load_profile

    p = load_profile(path.parent.parent)
    er = run("explain_rank", p, rank=1)
    sr = run("slow_rank", p).table.set_index("rank")
    assert er.metrics["free_delta_us"] == pytest.approx(expected, rel=1e-6)
    assert sr.at[1, "free_delta_us"] == pytest.approx(expected, rel=1e-6)
    f = er.findings[0]
    if p.get("host_dispatch").empty:
        assert "host_bound" not in f.symptom_tags and "launch_delay" not in f.symptom_tags
        assert "TASK_QUEUE_ENABLE" not in f.summary


def test_breakdown_free_median_is_labelled_all_ranks():
    f = next(
        f
        for f in run("cluster_breakdown", free_profile()).findings
        if f.id == "cluster_breakdown.host_bound.free_share"
    )
    assert "median over all ranks" in f.summary and "所有卡中位数" in f.summary_zh
    # all-rank median of Free (5, 6, 7, 68 ms) = 6.5 ms, not a per-rank reference
    assert f.metrics["free_us_median"] == pytest.approx(6_500.0)
