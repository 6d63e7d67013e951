"""Plots of the side panel, checked against the profiling files read independently (csv/json)."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from advisor_chat.config import load_settings
from advisor_chat.ui import plots


@pytest.fixture(scope="module")
def demo():
    from advisor_chat.ingest import load_profile
    from advisor_chat.synth import demo_profile

    settings = load_settings()
    path = Path(demo_profile(settings))
    return path, load_profile(path, settings=settings)


def _rank_of(rank_dir: Path) -> int:
    info = next(rank_dir.glob("profiler_info_*.json"))
    return int(info.stem.rsplit("_", 1)[1])


def _csv_mean_per_rank(root: Path, column: str) -> dict[int, float]:
    out = {}
    for d in sorted(root.glob("*_ascend_pt")):
        with (d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").open(newline="") as fh:
            vals = [float(row[column]) for row in csv.DictReader(fh)]
        out[_rank_of(d)] = statistics.fmean(vals)
    return out


def test_rank_breakdown_matches_step_trace_csv(demo):
    path, profile = demo
    fig = plots.rank_breakdown(profile, [12])
    assert fig is not None
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) == {"Computing", "Communication (Not Overlapped)", "Free"}
    assert fig.layout.barmode == "stack"
    labels = list(by_name["Free"].x)
    assert labels[12] == "<b>12★</b>" and sum("★" in lab for lab in labels) == 1
    for trace, column in (
        ("Free", "Free"),
        ("Computing", "Computing"),
        ("Communication (Not Overlapped)", "Communication(Not Overlapped)"),
    ):
        expected = _csv_mean_per_rank(path, column)
        got = list(by_name[trace].y)
        for rank, mean_us in expected.items():
            assert got[rank] == pytest.approx(mean_us / 1000.0, rel=1e-9), (trace, rank)
    opac = list(by_name["Free"].marker.opacity)
    assert opac[12] == 1.0 and opac[0] < 1.0


def test_step_trend_highlights_only_requested_rank(demo):
    _path, profile = demo
    fig = plots.step_trend(profile, [12])
    assert fig is not None
    assert len(fig.data) == 16
    red = [t for t in fig.data if t.line.color == "#D62728"]
    assert [t.name for t in red] == ["rank 12 ★"]


def test_bandwidth_heatmap_median_of_matrix_json(demo):
    path, profile = demo
    fig = plots.bandwidth_heatmap(profile, [12])
    assert fig is not None
    hm = fig.data[0]
    # independent: median bandwidth of one link over the "{type}-total" entries (one per op type
    # and step; the top1/middle/bottom entries repeat single ops) of every rank's matrix file
    values: dict[tuple[int, int], list[float]] = {}
    for f in path.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/communication_matrix.json"):
        data = json.loads(f.read_text())
        for ops in data.values():  # step -> op kind -> op name -> "src-dst" -> link
            for group in ops.values():
                for name, links in group.items():
                    if "-total@" not in name:
                        continue
                    for key, link in links.items():
                        src, dst = (int(x) for x in key.split("-"))
                        if src != dst and link.get("Transport Type") != "LOCAL":
                            values.setdefault((src, dst), []).append(float(link["Bandwidth(GB/s)"]))
    if not values:
        pytest.skip("matrix layout differs from the expected nesting")
    ys = [str(y) for y in hm.y]
    xs = [str(x) for x in hm.x]
    (src, dst), vals = next(iter(sorted(values.items())))
    row = ys.index(str(src) if src != 12 else "<b>12★</b>")
    col = xs.index(str(dst) if dst != 12 else "<b>12★</b>")
    assert hm.z[row][col] == pytest.approx(statistics.median(vals), rel=1e-6)


def test_launch_delay_and_op_compare(demo):
    _, profile = demo
    fig = plots.launch_delay(profile, [12])
    assert fig is not None
    hd = profile.get("host_dispatch")
    med12 = float(hd[hd["rank"] == 12]["launch_delay_us"].median())
    hl = next(t for t in fig.data if t.name == "highlighted")
    assert list(hl.x) == ["<b>12★</b>"] and hl.median[0] == pytest.approx(med12)
    fig = plots.op_compare(profile, [12])
    assert fig is not None and len(fig.data[0].y) > 0
    assert "rank 12" in fig.layout.xaxis.title.text


def test_missing_data_gives_none():
    from advisor_chat.ingest.profile import Profile

    empty = Profile(root=Path("."), layout="synthetic")
    got = plots.build_plots(empty, list(plots.PLOT_TITLES), [1])
    assert got == dict.fromkeys(plots.PLOT_TITLES)


def test_rank_breakdown_draws_bubble_as_its_own_series(real_samples):
    """PP2 sample: Bubble (receive wait) is its own bar, taken out of Communication."""
    from advisor_chat.ingest import load_profile

    root = real_samples / "cluster-16rank-pp2"
    csv_path = root / "cluster_analysis_output" / "cluster_step_trace_time.csv"
    rows: dict[int, list[dict[str, str]]] = {}
    with csv_path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["Type"] == "rank":
                rows.setdefault(int(row["Index"]), []).append(row)
    fig = plots.rank_breakdown(load_profile(root), [])
    assert fig is not None
    by_name = {t.name: t for t in fig.data}
    comm_name = "Communication (Not Overlapped), excl. Bubble"
    assert set(by_name) == {"Computing", comm_name, "Bubble (PP receive wait)", "Free"}
    labels = [int(x) for x in by_name["Free"].x]
    bubbles = {}
    for rank, rs in rows.items():
        i = labels.index(rank)
        bubble = statistics.fmean(float(r["Bubble"]) for r in rs) / 1000.0
        cnov = statistics.fmean(float(r["Communication(Not Overlapped)"]) for r in rs) / 1000.0
        bubbles[rank] = bubble
        assert by_name["Bubble (PP receive wait)"].y[i] == pytest.approx(bubble, rel=1e-9)
        assert by_name[comm_name].y[i] == pytest.approx(
            max(cnov - bubble, 0.0), rel=1e-9, abs=1e-12
        )
    # the downstream stage waits: some ranks carry a real bubble, and the stack still sums.
    assert max(bubbles.values()) > 1.0
