"""The twenty-ninth development set of fault kinds (scenarios_dev31.py): what each kind writes.

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
from _dev_files import kernel_rows, rank_dirs, read_csv, trace


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _steps(d: Path) -> list[dict[str, str]]:
    return read_csv(d, "step_trace_time.csv")


def _lanes(d: Path) -> dict[str, list[dict[str, Any]]]:
    """Complete (``X``) events of trace_view.json by process name (Python, CANN, HCCL ...)."""
    ev = trace(d)
    names = {
        e["pid"]: e["args"]["name"]
        for e in ev
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    out: dict[str, list[dict[str, Any]]] = {}
    for e in ev:
        if e.get("ph") == "X":
            out.setdefault(names.get(e["pid"], "?"), []).append(e)
    return out


def _iv(e: dict[str, Any]) -> tuple[float, float]:
    a = float(e["ts"])
    return a, a + float(e["dur"])


def _host_gaps(lanes: dict[str, list[dict[str, Any]]], min_us: float) -> list[tuple[float, float]]:
    """Gaps longer than ``min_us`` between host events (every host lane; step markers left out)."""
    host = sorted(
        _iv(e)
        for name in ("Python", "CANN")
        for e in lanes.get(name, [])
        if not e["name"].startswith("ProfilerStep")
    )
    out = []
    last = host[0][1]
    for a, b in host[1:]:
        if a - last > min_us:
            out.append((last, a))
        last = max(last, b)
    return out


def _device_idle(lanes: dict[str, list[dict[str, Any]]], a: float, b: float) -> float:
    """µs of [a, b) in which no device task (Ascend Hardware / HCCL lane) runs."""
    busy = sorted(_iv(e) for n in ("Ascend Hardware", "HCCL") for e in lanes.get(n, []))
    covered = 0.0
    end = a
    for x, y in busy:
        x, y = max(x, end), min(y, b)
        if y > x:
            covered += y - x
            end = y
    return (b - a) - covered


def _launches(lanes: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return sorted(
        (e for e in lanes.get("CANN", []) if e["name"].startswith("AscendCL@aclnn")),
        key=lambda e: float(e["ts"]),
    )


def _wait_ms(d: Path) -> float:
    raw = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
    return sum(
        s["collective"]["Total Op Info"]["Communication Time Info"]["Wait Time(ms)"]
        for s in raw.values()
    )


# ---------------------------------------------------------------- cfs-throttle-node
def test_throttled_node_host_goes_silent_every_cfs_period(scenario) -> None:
    root = scenario("cfs-throttle-node")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    silences: dict[int, list[tuple[float, float]]] = {}
    free: dict[int, float] = {}
    wait: dict[int, float] = {}
    api: dict[int, float] = {}
    for r, d in dirs.items():
        lanes = _lanes(d)
        assert not lanes.get("Python GC")  # GC detection is on and saw nothing
        info = json.loads((d / f"profiler_info_{r}.json").read_text())
        assert info["config"]["experimental_config"]["_gc_detect_threshold"] is not None
        # host silences > 10 ms in which the device also idles > 10 ms
        silences[r] = [
            (a, b) for a, b in _host_gaps(lanes, 10_000) if _device_idle(lanes, a, b) > 10_000
        ]
        free[r] = median(float(x["Free"]) for x in _steps(d))
        wait[r] = _wait_ms(d)
        api[r] = median(float(e["dur"]) for e in _launches(lanes))
    assert all(not silences[r] for r in dirs if r not in bad)
    for r in bad:
        assert len(silences[r]) == nums["silences_per_rank"]
        starts = [a for a, _ in silences[r]]
        spacing = median(y - x for x, y in pairwise(starts))
        assert spacing == pytest.approx(nums["silence_period_us_median"], rel=0.03)
        assert spacing == pytest.approx(nums["cfs_period_us"], rel=0.03)  # the wall-clock grid
    # the same instants on every rank of the node (the first launch after each silence)
    first = sorted(bad)[0]
    for _a0, b0 in silences[first]:
        ends = [min((b for _a, b in silences[r]), key=lambda e: abs(e - b0)) for r in bad]
        assert max(ends) - min(ends) < 50
    lens = [b - a for r in bad for a, b in silences[r]]
    assert median(lens) == pytest.approx(nums["host_silence_us_median"], rel=0.02)
    # node 1 idles, node 0 waits for it; launch calls normal on both
    assert min(free[r] for r in bad) > 10 * max(free[r] for r in dirs if r not in bad)
    assert min(wait[r] for r in dirs if r not in bad) > 5 * max(wait[r] for r in bad)
    assert max(api.values()) < 1.1 * min(api.values())
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert not set(rc["victim_ranks"]) & bad
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- thread-oversubscription
def test_launch_calls_are_preempted_at_random_on_every_rank(scenario) -> None:
    root = scenario("thread-oversubscription")
    key = _key(root)
    nums = key["expected_numbers"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    held: list[float] = []
    normal: list[float] = []
    free: dict[int, float] = {}
    ops_by_rank: dict[int, set[str]] = {}
    for r, d in dirs.items():
        lanes = _lanes(d)
        assert not lanes.get("Python GC")
        calls = _launches(lanes)
        long_calls = [e for e in calls if float(e["dur"]) > 300]
        held.extend(float(e["dur"]) for e in long_calls)
        normal.extend(float(e["dur"]) for e in calls if float(e["dur"]) <= 300)
        # a few a step on every rank
        assert 4 * key["steps"] <= len(long_calls) <= 6 * key["steps"]
        ops_by_rank[r] = {e["args"]["id"] for e in long_calls}
        # the kernel of a held call starts right after the call ends (the device waited for it)
        dev = {
            int(e["args"]["connection_id"]): float(e["ts"])
            for e in lanes["Ascend Hardware"]
            if "connection_id" in e.get("args", {})
        }
        for e in long_calls:
            start = dev[int(e["args"]["connection_id"])]
            assert 0 < start - _iv(e)[1] < 50
        free[r] = sum(float(x["Free"]) for x in _steps(d)) / key["steps"]
    assert len(held) == nums["preempted_calls_total"]
    assert median(held) == pytest.approx(nums["preempted_call_us_median"], rel=0.01)
    assert median(normal) == pytest.approx(nums["launch_api_us_median_other_calls"], rel=0.05)
    assert median(normal) < 20
    # at no particular operator: different operators held on different ranks
    assert len(set.union(*ops_by_rank.values())) >= 5
    assert len({frozenset(v) for v in ops_by_rank.values()}) > len(dirs) // 2
    # no rank stands out
    assert max(free.values()) < 2 * min(free.values())
    assert nums["max_share_last_arriver"] < 0.3
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- print-to-slow-console
def test_blocked_prints_before_the_forward_launches_on_every_rank(scenario) -> None:
    root = scenario("print-to-slow-console")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    prints: list[float] = []
    free: dict[int, float] = {}
    for r, d in dirs.items():
        info = json.loads((d / f"profiler_info_{r}.json").read_text())
        assert info["config"]["common_config"]["with_stack"] is True
        lanes = _lanes(d)
        py = [e for e in lanes["Python"] if e.get("cat") == "python_function"]
        mine = [e for e in py if e["name"] == ev["frame"]]
        assert len(mine) == nums["prints_per_step"] * key["steps"]
        prints.extend(float(e["dur"]) for e in mine)
        parents = Counter(e["name"] for e in py if e["name"] != ev["frame"])
        assert set(parents) == set(ev["parent_frames"])
        # the next launch after each print: the FlashAttention or the MLP up-projection MatMul
        calls = _launches(lanes)
        after = Counter()
        for e in mine:
            end = _iv(e)[1]
            nxt = next(c for c in calls if float(c["ts"]) >= end)
            assert float(nxt["ts"]) - end < 10
            after[nxt["args"]["id"]] += 1
        assert set(after) == {"aclnnFlashAttentionScore", "aclnnMatmul"}
        assert median(float(c["dur"]) for c in calls) < 20
        free[r] = median(float(x["Free"]) for x in _steps(d))
        # the device idles before the forward FlashAttention kernels
        fa = [
            float(x["Wait Time(us)"]) for x in kernel_rows(d) if x["Type"] == "FlashAttentionScore"
        ]
        assert min(fa) > 2000
    assert median(prints) == pytest.approx(nums["print_us_median"], rel=0.01)
    assert max(free.values()) < 1.05 * min(free.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- thp-compaction-node
def test_host_packing_stalls_on_one_node_only(scenario) -> None:
    root = scenario("thp-compaction-node")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    cat: dict[int, list[float]] = {}
    dims: set[str] = set()
    prep: dict[int, float] = {}
    wait: dict[int, float] = {}
    api: dict[int, float] = {}
    kern: dict[int, float] = {}
    for r, d in dirs.items():
        lanes = _lanes(d)
        steps = sorted(
            (_iv(e) for e in lanes["Python"] if e["name"].startswith("ProfilerStep")),
        )
        mine = sorted(
            (e for e in lanes["Python"] if e["name"] == ev["host_op"]), key=lambda e: float(e["ts"])
        )
        assert len(mine) == key["steps"]
        for e, (s0, _s1) in zip(mine, steps, strict=True):
            assert 0 <= float(e["ts"]) - s0 < 100  # at the step start
            dims.add(e["args"]["Input Dims"])
        cat[r] = [float(e["dur"]) for e in mine]
        prep[r] = median(float(x["Preparing"]) for x in _steps(d))
        wait[r] = _wait_ms(d)
        api[r] = median(float(e["dur"]) for e in _launches(lanes))
        kern[r] = sum(float(x["Duration(us)"]) for x in kernel_rows(d))
    assert len(dims) == 1  # the same tensors everywhere
    good = [r for r in dirs if r not in bad]
    slow = [v for r in bad for v in cat[r]]
    fast = [v for r in good for v in cat[r]]
    assert min(slow) > 2 * max(fast)
    assert median(slow) == pytest.approx(nums["cat_us_median_culprit"], rel=0.01)
    assert median(fast) == pytest.approx(nums["cat_us_median_others"], rel=0.01)
    # erratic on the culprit node, steady on the other

    def cv(v: list[float]) -> float:
        m = sum(v) / len(v)
        return (sum((x - m) ** 2 for x in v) / len(v)) ** 0.5 / m

    assert median(cv(cat[r]) for r in bad) > 0.1
    assert max(cv(cat[r]) for r in good) < 0.05
    assert min(prep[r] for r in bad) > 2 * max(prep[r] for r in good)
    assert min(wait[r] for r in good) > 1.5 * max(wait[r] for r in bad)
    assert max(api.values()) < 1.1 * min(api.values())
    assert max(kern.values()) < 1.03 * min(kern.values())
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert not set(rc["victim_ranks"]) & bad
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]
