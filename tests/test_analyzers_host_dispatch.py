"""Known-answer tests for host_dispatch from tiny timelines built by hand."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from advisor_chat.analyzers import FindingKind
from advisor_chat.analyzers.host_dispatch import HostDispatchParams, host_dispatch
from advisor_chat.errors import NotAnswerableError, ToolArgumentError
from advisor_chat.ingest.profile import Profile
from advisor_chat.ingest.schema import validate_table

N_K = 20  # kernels per step
DUR = 100.0


def _build(
    ranks=(0, 1, 2, 3),
    steps=(1, 2, 3),
    gap=lambda r: 10.0,
    delay=lambda r: 500.0,
    host_late=lambda r: False,
    step_gap=20_000.0,
    kernel_dur=DUR,
    api=lambda r, i: "aclnnMatmul",
    extra_gap=None,
    with_hd=True,
):
    k_rows, h_rows, st_rows = [], [], []
    for r in ranks:
        t = 1e9
        for s in steps:
            t += step_gap
            first = t
            for i in range(N_K):
                if i > 0:
                    t += gap(r)
                    if extra_gap and extra_gap(r, s, i):
                        t += extra_gap(r, s, i)
                start = t
                # host launch: either well ahead (delay) or late, just before the device start
                host = start - (5.0 if host_late(r) else delay(r))
                k_rows.append(
                    dict(
                        rank=r,
                        step=s,
                        name="k",
                        op_type="MatMul",
                        accelerator_core="AI_CORE",
                        start_us=start,
                        duration_us=kernel_dur,
                        wait_us=0.0,
                    )
                )
                h_rows.append(
                    dict(
                        rank=r,
                        step=s,
                        api_name=api(r, i),
                        host_start_us=host,
                        device_start_us=start,
                        launch_delay_us=start - host,
                        device_duration_us=kernel_dur,
                    )
                )
                t = start + kernel_dur
            span = t - first
            busy = N_K * kernel_dur
            st_rows.append(
                dict(
                    rank=r,
                    step=s,
                    computing_us=busy,
                    communication_not_overlapped_us=0.0,
                    overlapped_us=0.0,
                    communication_us=0.0,
                    free_us=span - busy,
                    stage_us=span,
                    bubble_us=0.0,
                    step_us=span,
                )
            )
    tables = {
        "kernels": validate_table("kernels", pd.DataFrame(k_rows)),
        "step_trace": validate_table("step_trace", pd.DataFrame(st_rows)),
    }
    if with_hd:
        tables["host_dispatch"] = validate_table("host_dispatch", pd.DataFrame(h_rows))
    return Profile(root=Path("."), layout="synthetic", tables=tables)


def _kinds(res, tag):
    return [f for f in res.findings if tag in f.symptom_tags]


def test_launch_delay_outlier_rank() -> None:
    prof = _build(delay=lambda r: 2000.0 if r == 1 else 500.0)
    res = host_dispatch(prof, HostDispatchParams())
    t = res.table.set_index("rank")
    assert t.loc[1, "launch_delay_p50_us"] == pytest.approx(2000.0)
    assert t.loc[0, "launch_delay_p99_us"] == pytest.approx(500.0)
    assert t.loc[1, "launch_count"] == 3 * N_K
    ld = _kinds(res, "launch_delay")
    assert [f.ranks for f in ld] == [(1,)]
    assert ld[0].metrics["launch_delay_ratio"] == pytest.approx(4.0)
    assert ld[0].metrics["median_launch_delay_p50_us"] == pytest.approx(500.0)


def test_host_wait_on_one_rank_is_host_bound() -> None:
    prof = _build(gap=lambda r: 200.0 if r == 2 else 10.0, host_late=lambda r: r == 2)
    res = host_dispatch(prof, HostDispatchParams())
    t = res.table.set_index("rank")
    # 19 inner gaps per step
    assert t.loc[2, "device_idle_us_per_step"] == pytest.approx(19 * 200.0)
    assert t.loc[0, "device_idle_us_per_step"] == pytest.approx(19 * 10.0)
    # rank 2's host launched 5 us before each start (195 us after the previous end): nothing was
    # queued, so the whole gap waited for the launch (QUEUE_EMPTY_US), not only the 195 us
    assert t.loc[2, "host_wait_us_per_step"] == pytest.approx(19 * 200.0)
    assert t.loc[0, "host_wait_us_per_step"] == pytest.approx(0.0)
    assert t.loc[2, "gap_us_median"] == pytest.approx(200.0)
    assert t.loc[0, "gap_us_median"] == pytest.approx(10.0)
    hb = [f for f in res.findings if f.id == "host_dispatch.host_bound.host_wait"]
    assert len(hb) == 1 and hb[0].ranks == (2,)
    # gain = rank 2's Free minus the median rank's Free (19 gaps of 200 us vs 10 us)
    assert hb[0].estimated_gain_us == pytest.approx(19 * 200.0 - 19 * 10.0)
    assert hb[0].metrics["free_excess_us"] == pytest.approx(19 * 190.0)
    # idle from kernels matches step_trace Free by construction
    assert t.loc[2, "free_us"] == pytest.approx(t.loc[2, "device_idle_us_per_step"])
    assert t.loc[2, "idle_vs_free_ratio"] == pytest.approx(1.0)
    # the rank filter keeps only rank 2
    one = host_dispatch(prof, HostDispatchParams(rank=2))
    assert list(one.table["rank"]) == [2]
    assert all(2 in f.ranks for f in one.findings)


def test_dataloader_gap_at_step_start_on_all_ranks() -> None:
    prof = _build(step_gap=30_000.0)
    res = host_dispatch(prof, HostDispatchParams())
    dl = [f for f in res.findings if f.kind is FindingKind.DATALOADER]
    assert len(dl) == 1
    assert dl[0].metrics["step_start_idle_us"] == pytest.approx(30_000.0)
    assert dl[0].ranks == (0, 1, 2, 3)
    # below threshold -> nothing
    res2 = host_dispatch(_build(step_gap=5_000.0), HostDispatchParams())
    assert not [f for f in res2.findings if f.kind is FindingKind.DATALOADER]


def test_tiny_kernels_and_gc_gap() -> None:
    prof = _build(
        kernel_dur=5.0,
        gap=lambda r: 3.0,
        extra_gap=lambda r, s, i: 300_000.0 if (r == 0 and s == 2 and i == 10) else 0.0,
    )
    res = host_dispatch(prof, HostDispatchParams())
    t = res.table.set_index("rank")
    assert t.loc[1, "tiny_kernel_count_ratio"] == pytest.approx(1.0)
    assert t.loc[0, "gc_like_gap_count"] == 1
    gc = _kinds(res, "gc_pause")
    assert len(gc) == 1 and gc[0].ranks == (0,)
    assert gc[0].metrics["longest_gap_us"] == pytest.approx(300_003.0)
    lg = res.tables["long_gaps"]
    # the 10 remaining kernels of the step were launched 500 us ahead, all inside the gap:
    # 10 launches in 300 ms = 0.033 per ms <= 0.1 -> GC-like
    assert len(lg) == 1 and int(lg.iloc[0]["host_launches"]) == 10


def test_synchronize_after_launch() -> None:
    prof = _build(api=lambda r, i: "aclrtSynchronizeStream" if (r == 3 and i % 2) else "aclnnAdd")
    res = host_dispatch(prof, HostDispatchParams())
    t = res.table.set_index("rank")
    assert t.loc[3, "sync_api_count"] == 3 * (N_K // 2)
    assert t.loc[3, "launch_then_sync_ratio"] == pytest.approx(1.0)
    sy = _kinds(res, "synchronize_stream")
    assert len(sy) == 1 and sy[0].ranks == (3,)


def test_missing_host_dispatch_says_what_is_missing() -> None:
    prof = _build(with_hd=False)
    res = host_dispatch(prof, HostDispatchParams())
    assert any("trace_view" in n and "Level1" in n for n in res.notes)
    assert "launch_delay_p50_us" not in res.table.columns
    assert not _kinds(res, "launch_delay")


def test_errors() -> None:
    with pytest.raises(NotAnswerableError):
        host_dispatch(Profile(root=Path("."), layout="synthetic"), HostDispatchParams())
    with pytest.raises(ToolArgumentError, match="0-3"):
        host_dispatch(_build(), HostDispatchParams(rank=9))


def test_one_rank_one_step() -> None:
    res = host_dispatch(_build(ranks=(0,), steps=(1,)), HostDispatchParams())
    assert len(res.table) == 1
    assert not _kinds(res, "launch_delay")


def test_a_long_launch_call_is_host_time_the_device_waits_for() -> None:
    """A task is submitted when its launch call returns: on rank 1 each call starts 60 µs before
    the previous kernel ends and lasts 150 µs, so the device idles 90 µs waiting for it (the
    gap), all of it host wait; on rank 0 the call (20 µs) returns long before, so nothing is."""
    gap = 90.0
    prof = _build(gap=lambda r: gap, delay=lambda r: 150.0 if r == 1 else 500.0)
    hd = prof.get("host_dispatch")
    # rank 1: call from (start - 150) for 150 µs, i.e. it returns right at the kernel's start;
    # rank 0: call from (start - 500) for 20 µs
    hd = hd.assign(api_duration_us=[150.0 if r == 1 else 20.0 for r in hd["rank"]])
    prof.tables["host_dispatch"] = validate_table("host_dispatch", hd)
    t = host_dispatch(prof, HostDispatchParams()).table.set_index("rank")
    assert t.loc[1, "host_wait_us_per_step"] == pytest.approx((N_K - 1) * gap)
    assert t.loc[0, "host_wait_us_per_step"] == pytest.approx(0.0)
