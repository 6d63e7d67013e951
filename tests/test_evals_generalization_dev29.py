"""The twenty-seventh development set of fault kinds (scenarios_dev29.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from _dev_files import PO, kernel_rows, rank_dirs, read_csv, trace


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _steps(d: Path) -> list[dict[str, str]]:
    return read_csv(d, "step_trace_time.csv")


def _comm(d: Path, sec: str = "collective") -> dict[str, dict[str, Any]]:
    """{step key: {op name: record}} of one section of communication.json."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v[sec] for s, v in raw.items()}


def _step_of(d: Path) -> list[tuple[int, Decimal, Decimal]]:
    """(step id, start µs, end µs) of the ProfilerStep events of trace_view.json."""
    out = []
    for e in trace(d):
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"):
            s0 = Decimal(e["ts"])
            out.append((int(e["name"].split("#")[1]), s0, s0 + Decimal(repr(e["dur"]))))
    return sorted(out)


def _in_step(steps: list[tuple[int, Decimal, Decimal]], ts: str) -> int | None:
    t = Decimal(ts)
    for sid, a, b in steps:
        if a <= t < b:
            return sid
    return None


# ---------------------------------------------------------------- zero3-prefetch-invalidated
def test_allgathers_run_on_demand_only_in_the_invalidated_steps(scenario) -> None:
    root = scenario("zero3-prefetch-invalidated")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad, img = set(ev["invalidated_steps"]), set(ev["image_steps"])
    assert img < bad and len(bad) < key["steps"]
    notov: dict[str, list[float]] = {"bad": [], "good": []}
    for d in dirs.values():
        rows = kernel_rows(d)
        comm = _comm(d)
        for sk, ops in comm.items():
            sid = int(sk[4:])
            ks = sorted(
                (float(x["Start Time(us)"]), float(x["Wait Time(us)"]))
                for x in rows
                if int(x["Step Id"]) == sid
            )
            layer = [
                v["Communication Time Info"]
                for n, v in ops.items()
                if n.startswith("hcom_allGather_")
                and v["Communication Time Info"]["Elapse Time(ms)"] > 15  # a layer's 405 MB
            ]
            assert len(layer) == nums["layer_allgathers_per_step"]
            # a gather is on demand when the next kernel starts only after it ends, waiting for it
            on_demand = 0
            for t in layer:
                end = t["Start Timestamp(us)"] + 1000 * t["Elapse Time(ms)"]
                nxt = next(k for k in ks if k[0] >= t["Start Timestamp(us)"])
                if nxt[0] >= end - 50 and nxt[1] > 500 * t["Elapse Time(ms)"]:
                    on_demand += 1
            # (layer 0's gather, at the step start beside the embedding lookup, is not counted)
            want = nums["on_demand_allgathers_per_invalidated_step"] if sid in bad else 0
            assert on_demand == want, sid
            vit = [x for x in rows if int(x["Step Id"]) == sid and x["Type"] == "LayerNorm"]
            assert bool(vit) == (sid in img)
        for x in _steps(d):
            notov["bad" if int(x["Step"]) in bad else "good"].append(
                float(x["Communication(Not Overlapped)"])
            )
    assert min(notov["bad"]) > 3 * max(notov["good"])
    # the key's numbers, read again from step_trace_time.csv
    assert nums["comm_not_overlapped_us_invalidated_steps_median"] == pytest.approx(
        median(notov["bad"]), rel=1e-4
    )
    assert nums["comm_not_overlapped_us_prefetched_steps_median"] == pytest.approx(
        median(notov["good"]), rel=1e-4
    )
    md = json.loads((next(iter(dirs.values())) / "profiler_metadata.json").read_text())
    assert md["deepspeed_zero_optimization"]["stage"] == 3
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert rc["steps"] == ev["invalidated_steps"]
    assert nums["saving_us_per_invalidated_step"] > 0.15 * nums["step_us_invalidated_steps_median"]


# ---------------------------------------------------------------- zero3-offload-param-node
def test_node_copies_each_partition_from_pageable_memory_before_its_gather(scenario) -> None:
    root = scenario("zero3-offload-param-node")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    copies: list[float] = []
    free: dict[int, float] = {}
    sync: dict[int, float] = {}
    for r, d in dirs.items():
        evs = trace(d)
        steps = _step_of(d)
        mc = [e for e in evs if e.get("name") == "AscendCL@aclrtMemcpy"]
        if r not in bad:
            assert not mc
        else:
            per = Counter(_in_step(steps, e["ts"]) for e in mc)
            assert set(per.values()) == {nums["copies_per_step"]}
            copies.extend(e["dur"] for e in mc)
            to = [e for e in evs if e.get("name") == "aten::to" and e.get("cat") == "cpu_op"]
            assert len(to) == len(mc)
            assert all(
                e["args"]["Input Dims"].split(";")[0] == str(ev["copy_elements"]) for e in to
            )
            # every copy ends before the launch of an all-gather, the next host launch after it
            launches = sorted(
                (Decimal(e["ts"]), e["name"])
                for e in evs
                if e.get("ph") == "X" and str(e.get("name", "")).startswith("AscendCL@Hccl")
            )
            for e in mc:
                end = Decimal(e["ts"]) + Decimal(repr(e["dur"]))
                nxt = next(n for t, n in launches if t >= end)
                assert nxt == "AscendCL@HcclAllGather"
        free[r] = sum(float(x["Free"]) for x in _steps(d)) / key["steps"]
        sync[r] = sum(
            v["Communication Time Info"]["Synchronization Time(ms)"]
            for ops in _comm(d).values()
            for n, v in ops.items()
            if n.startswith("hcom_allGather_")
        )
    good = [r for r in dirs if r not in bad]
    assert min(free[r] for r in bad) > 20 * max(free[r] for r in good)
    assert min(sync[r] for r in good) > 3 * max(sync[r] for r in bad)
    assert nums["copy_us_median"] == pytest.approx(median(copies), rel=1e-4)
    assert nums["culprit_free_us_per_step"] == pytest.approx(
        sum(free[r] for r in bad) / len(bad), rel=1e-4
    )
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert not set(rc["victim_ranks"]) & bad
    assert nums["saving_us_per_step"] > 0.05 * nums["median_step_us"]


# ---------------------------------------------------------------- compile-graph-breaks
def test_forward_breaks_into_graphs_with_the_device_idle_at_each_break(scenario) -> None:
    root = scenario("compile-graph-breaks")
    key = _key(root)
    nums = key["expected_numbers"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    idle: list[float] = []
    free: dict[int, float] = {}
    for r, d in dirs.items():
        rows = kernel_rows(d)
        for sid in key["step_ids"]:
            ks = [x for x in rows if int(x["Step Id"]) == sid]
            mids = [int(x["Model ID"]) for x in ks]
            graphs = [m for m in mids if m != 4294967295]
            fwd = sorted({m for m in graphs if m % 2 == 1})
            assert fwd == nums["forward_model_ids"]
            assert len({m for m in graphs if m % 2 == 0}) == nums["backward_graphs_per_step"]
            breaks = 0
            for i in range(1, len(ks)):
                if mids[i] != mids[i - 1] and mids[i] % 2 == 1 and mids[i] != 4294967295:
                    # a break: the previous graph ends with the flag the host reads
                    assert ks[i - 1]["Type"] == "ReduceAll"
                    assert ks[i - 1]["Input Data Types"] == "DT_BOOL"
                    assert float(ks[i]["Wait Time(us)"]) > 500
                    idle.append(float(ks[i]["Wait Time(us)"]))
                    breaks += 1
                elif mids[i] != mids[i - 1] and mids[i] % 2 == 0 and mids[i - 1] % 2 == 0:
                    assert float(ks[i]["Wait Time(us)"]) < 100  # backward graphs back to back
            assert breaks == nums["graph_breaks_per_step"]
        evs = trace(d)
        names = Counter(str(e.get("name", "")) for e in evs if e.get("ph") == "X")
        assert (
            names["AscendCL@aclmdlExecuteAsync"] == key["steps"] * nums["graph_launches_per_step"]
        )
        assert (
            names["AscendCL@aclrtSynchronizeStream"] == key["steps"] * nums["host_syncs_per_step"]
        )
        assert names["aten::item"] == names["AscendCL@aclrtSynchronizeStream"]
        # graph kernels have no launch of their own: only the optimizer's eager kernels do
        aclnn = [e for e in evs if str(e.get("name", "")).startswith("AscendCL@aclnn")]
        eager = [x for x in rows if int(x["Model ID"]) == 4294967295]
        assert len(aclnn) == len(eager)
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["torch_compile"]["fullgraph"] is False
        free[r] = median(float(x["Free"]) for x in _steps(d))
    assert max(free.values()) < 1.2 * min(free.values())  # every rank alike
    assert nums["idle_per_break_us_median"] == pytest.approx(median(idle), rel=1e-3)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.05 * nums["median_step_us"]


# ---------------------------------------------------------------- compiled-optimizer-recompile
def test_optimizer_graph_recompiled_every_step_on_every_rank(scenario) -> None:
    root = scenario("compiled-optimizer-recompile")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    compile_us: list[float] = []
    shares: list[float] = []
    for d in dirs.values():
        rows = kernel_rows(d)
        opt = [x for x in rows if x["Type"] in ev["operators"]]
        by_step: dict[int, set[int]] = {}
        for x in opt:
            by_step.setdefault(int(x["Step Id"]), set()).add(int(x["Model ID"]))
        assert all(len(by_step[s]) == 1 for s in key["step_ids"])
        ids = [min(by_step[s]) for s in key["step_ids"]]
        assert ids == nums["optimizer_model_ids"] and len(set(ids)) == key["steps"]
        assert all(int(x["Model ID"]) == 4294967295 for x in rows if x not in opt)
        evs = trace(d)
        steps = _step_of(d)
        comp = [e for e in evs if e.get("name") == ev["compile_frame"]]
        assert sorted(_in_step(steps, e["ts"]) for e in comp) == key["step_ids"]
        assert all(e.get("cat") == "python_function" for e in comp)
        launches = sorted(
            Decimal(e["ts"]) for e in evs if e.get("name") == "AscendCL@aclmdlExecuteAsync"
        )
        for e in comp:
            end = Decimal(e["ts"]) + Decimal(repr(e["dur"]))
            nxt = next(t for t in launches if t >= end)
            assert nxt - end < 1000  # the recompiled graph is launched right after
            compile_us.append(e["dur"])
        st = _steps(d)
        shares.append(
            sum(float(x["Free"]) for x in st)
            / sum(float(x["Stage"]) + float(x["Bubble"]) for x in st)
        )
    assert max(shares) < 1.05 * min(shares)  # every rank alike
    assert nums["median_free_share"] == pytest.approx(median(shares), abs=1e-3)
    # the compile frames, read again (each nested frame is inset by 1 µs on both sides)
    assert nums["compile_us_median"] == pytest.approx(median(compile_us), rel=1e-3)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.5 * nums["median_step_us"]
