"""The twenty-second development set of fault kinds (scenarios_dev24.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

from _dev_files import PO, kernel_rows, rank_dirs, read_csv, trace


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _steps(d: Path) -> dict[int, dict[str, float]]:
    return {
        int(x["Step"]): {k: float(v) for k, v in x.items() if k != "Step"}
        for x in read_csv(d, "step_trace_time.csv")
    }


def _wait_ms_per_step(d: Path) -> dict[int, float]:
    raw = json.loads((d / PO / "communication.json").read_text())
    return {
        int(s[4:]): v["collective"]["Total Op Info"]["Communication Time Info"]["Wait Time(ms)"]
        for s, v in raw.items()
    }


def _x(d: Path) -> list[dict[str, Any]]:
    return [e for e in trace(d) if e.get("ph") == "X"]


def _step_of(ev: list[dict[str, Any]]) -> list[tuple[int, float, float]]:
    """(step id, start µs, end µs) of the ProfilerStep ranges."""
    out = []
    for e in ev:
        if e["name"].startswith("ProfilerStep#"):
            a = float(e["ts"])
            out.append((int(e["name"][13:]), a, a + float(e["dur"])))
    return out


def _in_step(t: float, steps: list[tuple[int, float, float]]) -> int | None:
    for sid, a, b in steps:
        if a <= t < b:
            return sid
    return None


# ---------------------------------------------------------------- autocast-fp32-weights
def test_every_weight_is_cast_in_every_micro_batch(scenario) -> None:
    root = scenario("autocast-fp32-weights")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    comp: dict[int, float] = {}
    for r, d in dirs.items():
        rows = kernel_rows(d)
        casts = [x for x in rows if x["Type"] == ev["operator"]]
        assert len(casts) == nums["casts_per_step"] * key["steps"]
        fwd = [x for x in casts if x["Input Data Types"] == "DT_FLOAT"]
        bwd = [x for x in casts if x["Input Data Types"] == "DT_BF16"]
        assert all(x["Output Data Types"] == "DT_BF16" for x in fwd)
        assert all(x["Output Data Types"] == "DT_FLOAT" for x in bwd)
        assert len(fwd) == len(bwd) == nums["weight_casts_per_step"] * key["steps"]
        # every forward Cast is on the weight of the MatMul right after it
        for i, x in enumerate(rows):
            if x in fwd:
                nxt = rows[i + 1]
                assert nxt["Type"] == "MatMulV2"
                weight = nxt["Input Shapes"].strip('"').split(";")[1]
                assert x["Input Shapes"].strip('"') == weight
        stat = {x["OP Type"]: x for x in read_csv(d, "op_statistic.csv")}
        assert int(stat["Cast"]["Count"]) == nums["casts_per_step"] * key["steps"]
        st = _steps(d)
        comp[r] = sum(v["Computing"] for v in st.values()) / len(st)
    assert max(comp.values()) < 1.03 * min(comp.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.8 * nums["cast_us_per_step"]
    assert nums["saving_us_per_step"] > 0.08 * nums["median_step_us"]


# ---------------------------------------------------------------- pinned-alloc-every-step
def test_a_pinned_buffer_is_allocated_at_every_step_start(scenario) -> None:
    root = scenario("pinned-alloc-every-step")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    for d in dirs.values():
        x = _x(d)
        steps = _step_of(x)
        assert len(steps) == key["steps"]
        mallocs = [e for e in x if e["name"] == "AscendCL@aclrtMallocHost"]
        frees = [e for e in x if e["name"] == "AscendCL@aclrtFreeHost"]
        assert len(mallocs) == len(frees) == key["steps"]
        kern = sorted(float(e["ts"]) for e in x if e["name"].startswith("aclnnRmsNorm"))
        for sid, a, _b in steps:
            m = [e for e in mallocs if _in_step(float(e["ts"]), steps) == sid]
            assert len(m) == 1 and float(m[0]["dur"]) > 0.8 * nums["malloc_host_us_median"]
            # the allocation comes before the step's first kernel, inside aten::_pin_memory
            first = min(t for t in kern if t >= a)
            assert float(m[0]["ts"]) + float(m[0]["dur"]) < first
            pin = [e for e in x if e["name"] == ev["frames"][1] and _in_step(float(e["ts"]), steps)]
            assert any(
                float(p["ts"]) <= float(m[0]["ts"]) < float(p["ts"]) + float(p["dur"]) for p in pin
            )
        copies = [e for e in x if e["name"] == "MEMCPY_ASYNC"]
        assert len(copies) == key["steps"]
        assert all(e["args"]["operation"] == "host to device" for e in copies)
        st = _steps(d)
        for v in st.values():
            assert v["Free"] > 0.25 * v["Stage"]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == [] and rc["steps"] == []
    assert nums["saving_us_per_step"] > 0.9 * (
        nums["malloc_host_us_median"] + nums["free_host_us_median"]
    )


# ---------------------------------------------------------------- param-histogram-steps
def test_parameters_are_pulled_to_the_host_in_the_histogram_steps(scenario) -> None:
    root = scenario("param-histogram-steps")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    on = set(ev["histogram_steps"])
    assert on and all(s % ev["log_interval"] == 0 for s in on)
    free_on: dict[int, list[float]] = {s: [] for s in on}
    for d in dirs.values():
        x = _x(d)
        steps = _step_of(x)
        d2h = Counter(
            _in_step(float(e["ts"]), steps)
            for e in x
            if e["name"] == "MEMCPY_ASYNC" and e["args"]["operation"] == "device to host"
        )
        histc = Counter(_in_step(float(e["ts"]), steps) for e in x if e["name"] == "aten::histc")
        assert set(d2h) == set(histc) == on
        assert all(d2h[s] == histc[s] == ev["parameters"] for s in on)
        mb = sum(
            e["args"]["size(B)"]
            for e in x
            if e["name"] == "MEMCPY_ASYNC" and _in_step(float(e["ts"]), steps) == min(on)
        )
        assert abs(mb / 1e6 - ev["d2h_mb"]) < 0.01 * ev["d2h_mb"]
        st = _steps(d)
        off = [v["Stage"] for s, v in st.items() if s not in on]
        for s in on:
            assert st[s]["Stage"] > 3 * median(off)
            assert st[s]["Free"] > 0.7 * st[s]["Stage"]
            free_on[s].append(st[s]["Free"])
        n = Counter(int(r["Step Id"]) for r in kernel_rows(d))
        assert len(set(n.values())) == 1  # the same device work in every step
    for vals in free_on.values():  # every rank alike
        assert max(vals) < 1.05 * min(vals)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["steps"] == ev["histogram_steps"]
    assert nums["extra_us_per_histogram_step"] > 3 * nums["step_us_clean_steps_median"]
    assert abs(nums["wait_us_histogram_steps_median"] - nums["wait_us_clean_steps_median"]) < 1000


# ---------------------------------------------------------------- loader-worker-respawn
def test_one_rank_waits_for_input_in_consecutive_steps(scenario) -> None:
    root = scenario("loader-worker-respawn")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = ev["culprit_rank"]
    late = ev["late_steps"]
    assert late == list(range(late[0], late[0] + len(late)))  # consecutive
    st_bad = _steps(dirs[bad])
    clean = [v["Free"] for s, v in st_bad.items() if s not in late]
    frees = [st_bad[s]["Free"] for s in late]
    assert all(f > 20 * max(clean) for f in frees)
    assert frees == sorted(frees, reverse=True)  # the longest first, then catching up
    wait_bad = _wait_ms_per_step(dirs[bad])
    for r, d in dirs.items():
        if r == bad:
            continue
        st = _steps(d)
        w = _wait_ms_per_step(d)
        for s in late:
            assert st[s]["Free"] < 0.2 * st_bad[s]["Free"]
            assert w[s] * 1000 > 0.8 * st_bad[s]["Free"] and w[s] > 20 * wait_bad[s]
    # no host call fills the idle: the host is away, not in CANN
    x = _x(dirs[bad])
    assert not [e for e in x if "MallocHost" in e["name"] or e["name"] == "MEMCPY_ASYNC"]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "rank" and rc["culprit_ranks"] == [bad]
    assert rc["steps"] == late and bad not in rc["victim_ranks"]
    assert len(rc["victim_ranks"]) == key["ranks"] - 1
    assert nums["extra_us_total"] > 0.9 * nums["culprit_idle_us_total"]
