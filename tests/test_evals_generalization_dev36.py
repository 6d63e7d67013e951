"""Development set 36 of fault kinds (scenarios_dev36.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from _dev_files import PO, rank_dirs, read_csv, trace


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _steps(d: Path) -> list[dict[str, str]]:
    return read_csv(d, "step_trace_time.csv")


def _span(x: dict[str, str]) -> float:
    return float(x["Stage"]) + float(x["Bubble"])


def _meta(d: Path) -> dict[str, Any]:
    return json.loads((d / "profiler_metadata.json").read_text())


def _host(d: Path) -> str:
    return d.name.rsplit("_", 4)[0]


def _comm(d: Path) -> dict[str, dict[str, Any]]:
    """{step key: {op name: record}} of the collective section of communication.json."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v["collective"] for s, v in raw.items()}


def _step_windows(ev: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(start, end) µs of every ProfilerStep#, in order."""
    out = [
        (float(e["ts"]), float(e["ts"]) + e["dur"])
        for e in ev
        if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")
    ]
    return sorted(out)


def _kernel_starts(d: Path) -> dict[str, list[tuple[float, dict[str, str]]]]:
    """{step id: [(start µs, row)]} of kernel_details.csv, sorted by start."""
    out: dict[str, list[tuple[float, dict[str, str]]]] = {}
    for x in read_csv(d, "kernel_details.csv"):
        out.setdefault(x["Step Id"], []).append((float(x["Start Time(us)"].strip()), x))
    for v in out.values():
        v.sort(key=lambda t: t[0])
    return out


# ---------------------------------------------------------------- h2d-per-sample-copies
def test_every_sample_is_copied_to_the_device_on_its_own(scenario) -> None:
    root = scenario("h2d-per-sample-copies")
    key = _key(root)
    nums, rc = key["expected_numbers"], key["root_cause"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    copies: list[int] = []
    sizes: list[int] = []
    idle: list[float] = []
    free_share: dict[int, float] = {}
    call_us: list[float] = []
    for r, d in dirs.items():
        ev = trace(d)
        wins = _step_windows(ev)
        calls = sorted(
            (float(e["ts"]), e["dur"])
            for e in ev
            if e.get("ph") == "X" and e["name"] == "AscendCL@aclrtMemcpyAsync"
        )
        tasks = [
            e
            for e in ev
            if e.get("ph") == "X"
            and e["name"] == "MEMCPY_ASYNC"
            and e["args"]["operation"] == "host to device"
        ]
        dims = [
            e["args"]["Input Dims"].split(";")[0]
            for e in ev
            if e.get("ph") == "X" and e["name"] == "aten::to" and "Input Dims" in e["args"]
        ]
        assert len(calls) == len(tasks) == len(dims)  # one call, one task, one sample's shape
        call_us.extend(d_ for _t, d_ in calls)
        sizes.extend(int(e["args"]["size(B)"]) for e in tasks)
        ks = _kernel_starts(d)
        for (a, b), sid in zip(wins, sorted(ks), strict=True):
            n = sum(1 for t, _d in calls if a <= t < b)
            copies.append(n)
            first_t, first = ks[sid][0]
            # every copy of the step is issued before the step's first kernel, the device idle
            assert all(t < first_t for t, _d in calls if a <= t < b)
            idle.append(first_t - a)
            cats = [x for _t, x in ks[sid] if x["Type"] == "ConcatD"]
            assert len(cats) == nums["concat_kernels_per_step"] == 4
            lens = [int(v) for v in cats[0]["Input Shapes"].strip('"').split(";")]
            assert 4 * len(lens) == n  # one ConcatD input per sample, 4 fields per sample
            assert sum(lens) == 4096
            assert all(c["Input Shapes"] == cats[0]["Input Shapes"] for c in cats)
            assert first["Type"] == "ConcatD"
        st = _steps(d)
        free_share[r] = sum(float(x["Free"]) for x in st) / sum(_span(x) for x in st)
    assert max(sizes) < 1024 and max(sizes) == nums["copy_bytes_max"]
    assert len(copies) == key["ranks"] * key["steps"]
    assert sum(copies) == nums["h2d_copies_total"]
    assert nums["h2d_copies_per_step_median"] == pytest.approx(median(copies), rel=1e-6)
    assert min(copies) > 300
    assert nums["memcpy_call_us_median"] == pytest.approx(median(call_us), rel=0.02)
    assert nums["idle_before_first_kernel_us_median"] == pytest.approx(median(idle), rel=0.01)
    assert median(idle) > 10_000
    # every rank alike: no rank stands out
    assert max(free_share.values()) < 1.2 * min(free_share.values())
    assert nums["median_free_share"] == pytest.approx(median(free_share.values()), rel=0.02)
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert rc["victim_ranks"] == sorted(dirs)
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]
    assert nums["idle_before_first_kernel_us_median_fixed"] < 0.05 * median(idle)


# ---------------------------------------------------------------- auto-gc-jitter
def test_gc_pauses_hit_every_rank_at_different_moments(scenario) -> None:
    root = scenario("auto-gc-jitter")
    key = _key(root)
    nums, rc = key["expected_numbers"], key["root_cause"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    gcs: dict[int, list[tuple[float, float]]] = {}
    launch_us: list[float] = []
    waits: dict[int, float] = {}
    for r, d in dirs.items():
        info = json.loads((d / f"profiler_info_{r}.json").read_text())
        thr = info["config"]["experimental_config"]["_gc_detect_threshold"]
        assert thr == nums["gc_detect_threshold_ms"]
        ev = trace(d)
        gcs[r] = sorted(
            (float(e["ts"]), float(e["ts"]) + e["dur"]) for e in ev if e.get("cat") == "GC"
        )
        calls = [
            (float(e["ts"]), e["dur"])
            for e in ev
            if e.get("ph") == "X" and e["name"].startswith("AscendCL@")
        ]
        launch_us.extend(d_ for _t, d_ in calls if d_ < 200)
        # the host launches nothing while it collects
        for a, b in gcs[r]:
            assert not any(a < t < b for t, _d in calls)
            assert b - a >= thr * 1000
        waits[r] = sum(
            v["Communication Time Info"]["Wait Time(ms)"]
            for ops in _comm(d).values()
            for n, v in ops.items()
            if n != "Total Op Info"
        )
    pauses = [b - a for v in gcs.values() for a, b in v]
    assert len(pauses) == nums["gc_events_total"]
    assert all(gcs.values())  # every rank collects
    assert sum(1 for v in gcs.values() if v) == nums["ranks_with_gc"] == key["ranks"]
    assert nums["gc_pause_us_median"] == pytest.approx(median(pauses), rel=0.01)
    assert nums["gc_pause_us_max"] == pytest.approx(max(pauses), rel=0.01)
    # at different moments: hardly two ranks collect at the same time
    starts = sorted(a for v in gcs.values() for a, _b in v)
    overlapping = sum(1 for x, y in pairwise(starts) if y - x < 1000)
    assert overlapping < 0.2 * len(starts)
    assert median(launch_us) == pytest.approx(nums["launch_api_us_median"], rel=0.05)
    # no rank stands out in the waits
    assert max(waits.values()) < 2.0 * min(waits.values())
    assert nums["distinct_last_arrivers"] >= key["ranks"] // 2
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "host_stall"
    assert nums["saving_us_per_step"] > 0.15 * nums["median_step_us"]
    spans = [_span(x) for d in dirs.values() for x in _steps(d)]
    assert nums["median_step_us"] == pytest.approx(median(spans), rel=0.01)


# ---------------------------------------------------------------- accelerate-dispatch-batches
def test_rank0_reads_the_global_batch_and_the_others_wait_in_the_broadcast(scenario) -> None:
    root = scenario("accelerate-dispatch-batches")
    key = _key(root)
    nums, rc = key["expected_numbers"], key["root_cause"]
    dirs = rank_dirs(root)
    n = key["ranks"]
    assert len(dirs) == n
    sync: dict[int, list[float]] = {}
    free: dict[int, float] = {}
    mbs: list[float] = []
    for r, d in dirs.items():
        md = _meta(d)
        assert md["accelerate_config"]["dispatch_batches"] is None
        assert md["train_dataset"]["type"] == "IterableDataset"
        default = [
            name
            for name, g in md["parallel_group_info"].items()
            if g["group_name"] == "default_group"
        ]
        assert len(default) == 1
        ks = _kernel_starts(d)
        for sid, rows in ks.items():
            # every step begins with the broadcasts, before any computing kernel
            head = [x for _t, x in rows[:5]]
            assert all(x["Type"] == "hcom_broadcast_" for x in head), sid
            assert rows[5][1]["Accelerator Core"] != "HCCL"
        sync[r] = []
        for ops in _comm(d).values():
            bc = sorted(
                (
                    (v["Communication Time Info"]["Start Timestamp(us)"], v)
                    for k, v in ops.items()
                    if k.startswith("hcom_broadcast_")
                ),
                key=lambda t: t[0],
            )
            assert len(bc) == nums["broadcasts_per_step"] == 5
            sync[r].append(bc[0][1]["Communication Time Info"]["Synchronization Time(ms)"] * 1000)
            for _t, v in bc[2:]:
                bw = v["Communication Bandwidth Info"]
                mbs.append(bw["HCCS"]["Transit Size(MB)"] + bw["RDMA"]["Transit Size(MB)"])
        st = _steps(d)
        free[r] = sum(float(x["Free"]) for x in st) / len(st)
    others = sorted(r for r in dirs if r != 0)
    assert max(sync[0]) < 100  # rank 0 never waits in it
    assert min(min(sync[r]) for r in others) > 30_000  # everyone else waits for rank 0
    assert nums["first_broadcast_sync_us_median_others"] == pytest.approx(
        median(x for r in others for x in sync[r]), rel=0.01
    )
    # the tensors broadcast are the whole global batch: n rows of 4096 int64
    assert median(mbs) == pytest.approx(n * 4096 * 8 / 1e6, rel=0.01)
    assert nums["broadcast_tensor_mb"] == pytest.approx(median(mbs), rel=0.01)
    assert free[0] > 30_000 + max(free[r] for r in others)
    assert nums["root_free_us_per_step"] == pytest.approx(free[0], rel=0.01)
    assert rc["culprit_kind"] == "rank" and rc["culprit_ranks"] == [0] == key["slow_ranks"]
    assert rc["victim_ranks"] == others
    assert nums["saving_us_per_step"] > 0.25 * nums["median_step_us"]


# ---------------------------------------------------------------- slow-dataset-mount-node
def test_node1_waits_for_its_dataloader_and_node0_waits_for_node1(scenario) -> None:
    root = scenario("slow-dataset-mount-node")
    key = _key(root)
    nums, rc = key["expected_numbers"], key["root_cause"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(nums["culprit_ranks"])
    frame_us: list[float] = []
    prep: dict[int, float] = {}
    first_wait: dict[int, list[float]] = {}
    names: Counter[str] = Counter()
    for r, d in dirs.items():
        info = json.loads((d / f"profiler_info_{r}.json").read_text())
        assert info["config"]["common_config"]["with_stack"] is True
        ev = trace(d)
        py = [e for e in ev if e.get("cat") == "python_function"]
        if r in bad:
            names.update(e["name"] for e in py)
            outer = [e for e in py if e["name"].endswith(": __next__")]
            assert len(outer) == key["steps"]  # one wait for the next batch every step
            frame_us.extend(e["dur"] for e in outer)
        else:
            assert not py
        st = _steps(d)
        prep[r] = median(float(x["Preparing"]) for x in st)
        first_wait[r] = []
        for ops in _comm(d).values():
            ar = sorted(
                (
                    (v["Communication Time Info"]["Start Timestamp(us)"], v)
                    for k, v in ops.items()
                    if k.startswith("hcom_allReduce_")
                ),
                key=lambda t: t[0],
            )
            first_wait[r].append(ar[0][1]["Communication Time Info"]["Wait Time(ms)"] * 1000)
    assert len({_host(dirs[r]) for r in bad}) == 1
    assert _host(dirs[min(bad)]) not in {_host(dirs[r]) for r in dirs if r not in bad}
    assert any("_try_get_data" in x for x in names) and any("queue.py" in x for x in names)
    # the frame covers the wait (from just after the step start to just before the first launch)
    assert median(frame_us) == pytest.approx(nums["loader_wait_us_median"], rel=0.05)
    assert min(prep[r] for r in bad) > 10 * max(prep[r] for r in dirs if r not in bad)
    good = sorted(r for r in dirs if r not in bad)
    assert nums["victim_first_allreduce_wait_us_median"] == pytest.approx(
        median(x for r in good for x in first_wait[r]), rel=0.02
    )
    assert median(x for r in good for x in first_wait[r]) > 2 * median(
        x for r in bad for x in first_wait[r]
    )
    assert rc["culprit_kind"] == "group" and rc["culprit_ranks"] == sorted(bad)
    assert rc["victim_ranks"] == good
    assert nums["saving_us_per_step"] > 0.15 * nums["median_step_us"]
