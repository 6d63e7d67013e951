"""Development set 35 of fault kinds (scenarios_dev35.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
import math
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


def _comm(d: Path) -> dict[str, dict[str, Any]]:
    """{step key: {op name: record}} of the collective section of communication.json."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v["collective"] for s, v in raw.items()}


def _meta(d: Path) -> dict[str, Any]:
    return json.loads((d / "profiler_metadata.json").read_text())


def _host(d: Path) -> str:
    return d.name.rsplit("_", 4)[0]


def _dims(shapes: str, i: int = 0) -> list[int]:
    """Dimensions of tensor ``i`` of a kernel_details shape column (the CANN value keeps its quotes)."""
    return [int(v) for v in shapes.strip('"').split(";")[i].split(",")]


def _ts(x: dict[str, str]) -> float:
    return float(x["Start Time(us)"].strip())


def _lanes(ev: list[dict[str, Any]]) -> dict[int, str]:
    return {
        e["pid"]: e["args"]["name"]
        for e in ev
        if e.get("ph") == "M" and e["name"] == "process_name"
    }


def _step_spans(ev: list[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """{step id: (start µs, end µs)} of the ProfilerStep# events."""
    return {
        int(e["name"].split("#")[1]): (float(e["ts"]), float(e["ts"]) + e["dur"])
        for e in ev
        if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")
    }


def _cann_calls(ev: list[dict[str, Any]], api: str) -> dict[int, int]:
    """{step id: number of ``AscendCL@{api}`` events on the CANN lane in that step}."""
    lanes = _lanes(ev)
    spans = _step_spans(ev)
    out = dict.fromkeys(spans, 0)
    for e in ev:
        if e.get("ph") == "X" and lanes.get(e["pid"]) == "CANN" and e["name"] == f"AscendCL@{api}":
            t = float(e["ts"])
            for s, (a, b) in spans.items():
                if a <= t < b:
                    out[s] += 1
    return out


# ---------------------------------------------------------------- fp32-residual-stream
def test_residual_stream_cast_to_fp32_around_every_sublayer(scenario) -> None:
    root = scenario("fp32-residual-stream")
    key = _key(root)
    nums, ev, rc = key["expected_numbers"], key["evidence"], key["root_cause"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    cast_us: dict[int, float] = {}
    casts: list[float] = []
    adds: list[float] = []
    shares: dict[int, float] = {}
    for r, d in dirs.items():
        dist = _meta(d)["distributed_args"]
        stream = [dist["seq_length"] * dist["micro_batch_size"], dist["hidden_size"]]
        rows = read_csv(d, "kernel_details.csv")
        steps = sorted({x["Step Id"] for x in rows})
        cast_rows = [x for x in rows if x["Type"] == "Cast"]
        for x in cast_rows:
            # the residual stream: the activation's shape, bf16 <-> fp32 only
            assert _dims(x["Input Shapes"]) == stream == _dims(x["Output Shapes"])
            pair = (x["Input Data Types"], x["Output Data Types"])
            assert pair in (("DT_BF16", "DT_FLOAT"), ("DT_FLOAT", "DT_BF16"))
        per_step = Counter(x["Step Id"] for x in cast_rows)
        assert set(per_step.values()) == {nums["casts_per_step"]}
        to32 = sum(1 for x in cast_rows if x["Output Data Types"] == "DT_FLOAT") / len(steps)
        assert to32 == nums["casts_to_fp32_per_step"]
        add_rows = [x for x in rows if x["Type"] == "Add"]
        assert all(x["Input Data Types"] == "DT_FLOAT;DT_FLOAT" for x in add_rows)
        assert all(x["Output Data Types"] == "DT_FLOAT" for x in add_rows)
        assert len(add_rows) == nums["fp32_adds_per_step"] * len(steps)
        # the MatMuls and the attention stay bf16
        for x in rows:
            if x["Type"] in ("MatMulV2", "FlashAttentionScore", "FlashAttentionScoreGrad"):
                assert set(x["Input Data Types"].split(";")) <= {"DT_BF16", "DT_BOOL"}
        casts.extend(float(x["Duration(us)"]) for x in cast_rows)
        adds.extend(float(x["Duration(us)"]) for x in add_rows)
        cast_us[r] = sum(float(x["Duration(us)"]) for x in cast_rows) / len(steps)
        stat = {x["OP Type"]: x for x in read_csv(d, "op_statistic.csv")}
        assert int(stat["Cast"]["Count"]) == nums["casts_per_step"] * len(steps)
        st = _steps(d)
        shares[r] = sum(float(x["Computing"]) for x in st) / sum(_span(x) for x in st)
    assert nums["cast_us_median"] == pytest.approx(median(casts), rel=0.01)
    assert nums["fp32_add_us_median"] == pytest.approx(median(adds), rel=0.01)
    assert nums["cast_us_per_step"] == pytest.approx(median(cast_us.values()), rel=0.01)
    assert max(cast_us.values()) < 1.05 * min(cast_us.values())  # every rank alike
    assert max(shares.values()) < 1.05 * min(shares.values())
    assert ev["shape"] == nums["stream_shape"] == "8192,1024"
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert rc["victim_ranks"] == sorted(dirs)
    assert rc["mechanism"] == "job_hotspot"
    spans = [_span(x) for d in dirs.values() for x in _steps(d)]
    assert nums["median_step_us"] == pytest.approx(median(spans), rel=0.01)
    assert 0.05 * nums["median_step_us"] < nums["saving_us_per_step"]
    assert nums["residual_stream_us_per_step"] > 2 * nums["residual_stream_us_per_step_bf16"]


# ---------------------------------------------------------------- grad-allreduce-fp32
def test_gradient_allreduces_move_four_bytes_per_weight(scenario) -> None:
    root = scenario("grad-allreduce-fp32")
    key = _key(root)
    nums, ev, rc = key["expected_numbers"], key["evidence"], key["root_cause"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    params = set()
    per_weight: list[float] = []
    bw = {"HCCS": [], "RDMA": []}
    shares: dict[int, float] = {}
    for r, d in dirs.items():
        rows = sorted(read_csv(d, "kernel_details.csv"), key=_ts)
        first = rows[0]["Step Id"]
        mm = [x for x in rows if x["Type"] == "MatMulV2" and x["Step Id"] == first]
        assert all(x["Input Data Types"] == "DT_BF16;DT_BF16" for x in mm)
        # one layer's weights: the second input of its four forward MatMuls
        params.add(sum(math.prod(_dims(x["Input Shapes"], 1)) for x in mm[:4]))
        n = params.copy().pop()
        big = 0
        for step_ops in _comm(d).values():
            for name, v in step_ops.items():
                if not name.startswith("hcom_allReduce_"):
                    continue
                b = v["Communication Bandwidth Info"]
                mb = b["HCCS"]["Transit Size(MB)"] + b["RDMA"]["Transit Size(MB)"]
                if mb < 100:
                    continue  # the optimizer's small all-reduce
                big += 1
                per_weight.append(mb * 1e6 / n)
                for t in bw:
                    bw[t].append(b[t]["Bandwidth(GB/s)"])
        assert big == nums["grad_allreduce_per_step"] * key["steps"]
        st = _steps(d)
        shares[r] = sum(float(x["Communication(Not Overlapped)"]) for x in st) / sum(
            _span(x) for x in st
        )
    assert params == {nums["params_per_layer"]}
    assert median(per_weight) == pytest.approx(4.0, rel=0.01)
    assert nums["bytes_per_grad_element"] == pytest.approx(median(per_weight), rel=0.01)
    assert 11 < median(bw["RDMA"]) < 13 and 17 < median(bw["HCCS"]) < 19  # links normal
    # the HCCL lane: data type and element count of every gradient all-reduce
    for r in (0, max(dirs)):
        evs = trace(dirs[r])
        lanes = _lanes(evs)
        grads = [
            e
            for e in evs
            if e.get("ph") == "X"
            and lanes.get(e["pid"]) == "HCCL"
            and e["name"].startswith("hcom_allReduce_")
            and e["args"]["count"] > 1e7  # not the optimizer's 4 MB one
        ]
        assert len(grads) == nums["grad_allreduce_per_step"] * key["steps"]
        assert {e["args"]["data_type"] for e in grads} == {"FP32"} == {ev["data_type"]}
        assert {e["args"]["count"] for e in grads} == params
    assert max(shares.values()) < 1.1 * min(shares.values())  # every rank alike
    assert nums["median_comm_not_overlapped_share"] == pytest.approx(
        median(shares.values()), rel=0.02
    )
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "exposed_communication"
    assert nums["grad_allreduce_us_median"] > nums["backward_matmul_us_per_layer"]
    assert nums["grad_allreduce_us_median_bf16"] < nums["backward_matmul_us_per_layer"]
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- logits-kept-across-steps
def test_allocated_grows_by_the_logits_every_step(scenario) -> None:
    root = scenario("logits-kept-across-steps")
    key = _key(root)
    nums, ev, rc = key["expected_numbers"], key["evidence"], key["root_cause"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    ids = key["step_ids"]
    growth: list[float] = []
    step_us: dict[int, list[float]] = {}
    for d in dirs.values():
        rows = read_csv(d, "kernel_details.csv")
        head = [x for x in rows if x["Type"] == "MatMulV2" and len(_dims(x["Output Shapes"])) == 2]
        logits = max(math.prod(_dims(x["Output Shapes"])) for x in head)
        logits_mb = 2 * logits / 2**20  # bf16, MB as memory_record counts them
        first = {}
        for x in rows:
            s = int(x["Step Id"])
            if s not in first or _ts(x) < _ts(first[s]):
                first[s] = x
        mem = [x for x in read_csv(d, "memory_record.csv") if x["Component"] == "PTA"]
        at = {x["Timestamp(us)"]: x for x in mem}
        start = [float(at[first[s]["Start Time(us)"]]["Total Allocated(MB)"]) for s in ids]
        diffs = [b - a for a, b in pairwise(start)]
        assert all(x == pytest.approx(logits_mb, abs=0.5) for x in diffs)
        growth.extend(diffs)
        resv = [float(x["Total Reserved(MB)"]) for x in mem]
        assert max(resv) <= nums["allocator_limit_mb"] + 32
        for x, s in zip(_steps(d), ids, strict=True):
            assert int(x["Step"]) == s
            step_us.setdefault(s, []).append(_span(x))
    assert nums["allocated_mb_growth_per_step"] == pytest.approx(median(growth), abs=0.5)
    assert nums["logits_mb"] == pytest.approx(median(growth), abs=0.5)
    assert ev["leaked_tensor_shape"] == nums["logits_shape"] == "4096,128256"
    # the allocator's device calls: none in the first steps, more in every later one
    hit = set(nums["affected_steps"])
    for r in (0, max(dirs)):
        evs = trace(dirs[r])
        syncs = _cann_calls(evs, "aclrtSynchronizeDevice")
        mallocs = _cann_calls(evs, "aclrtMalloc")
        assert [mallocs[s] for s in ids] == nums["cache_releases_per_step"]
        assert [syncs[s] for s in ids] == nums["cache_releases_per_step"]
        assert {s for s in ids if mallocs[s]} == hit
    rel = nums["cache_releases_per_step"]
    assert rel[0] == 0 and rel[-1] > rel[len(rel) // 2] > 0
    assert rel == sorted(rel)
    # every rank alike in every step; the last steps slower
    for s in ids:
        assert max(step_us[s]) < 1.02 * min(step_us[s])
    med = [median(step_us[s]) for s in ids]
    assert nums["step_us_per_step"] == pytest.approx(med, rel=0.01)
    assert med[-1] > 1.1 * med[0]
    assert rc["culprit_kind"] == "job" and rc["steps"] == nums["affected_steps"]
    assert rc["victim_ranks"] == sorted(dirs)
    assert nums["saving_us_last_step"] > 0.1 * med[-1]


# ---------------------------------------------------------------- alloc-cache-off-node
def test_node1_goes_to_the_device_for_every_allocation(scenario) -> None:
    root = scenario("alloc-cache-off-node")
    key = _key(root)
    nums, rc = key["expected_numbers"], key["root_cause"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(nums["culprit_ranks"])
    mallocs: dict[int, int] = {}
    kernels: dict[int, int] = {}
    cached: dict[int, float] = {}
    waits: dict[int, float] = {}
    mm: dict[int, float] = {}
    conf = set()
    for r, d in dirs.items():
        evs = trace(d)
        calls = _cann_calls(evs, "aclrtMalloc")
        syncs = _cann_calls(evs, "aclrtSynchronizeDevice")
        mallocs[r] = median(calls.values())
        # a synchronize before each (none when the device had drained before the call)
        assert all(syncs[s] <= calls[s] for s in calls)
        assert sum(syncs.values()) >= 0.98 * sum(calls.values())
        rows = [x for x in read_csv(d, "kernel_details.csv") if x["Accelerator Core"] != "HCCL"]
        kernels[r] = len(rows) // key["steps"]
        mm[r] = median(float(x["Duration(us)"]) for x in rows if x["Type"] == "MatMulV2")
        mem = [x for x in read_csv(d, "memory_record.csv") if x["Component"] == "PTA"]
        cached[r] = max(
            float(x["Total Reserved(MB)"]) - float(x["Total Allocated(MB)"]) for x in mem
        )
        waits[r] = sum(
            v["Communication Time Info"]["Wait Time(ms)"]
            for step_ops in _comm(d).values()
            for n, v in step_ops.items()
            if n != "Total Op Info"
        )
        conf.add(_meta(d)["ENV_VARIABLES"]["PYTORCH_NPU_ALLOC_CONF"])
    # every launch after the step's first on node 1 comes with a synchronize + free + malloc
    assert {r for r, n in mallocs.items() if n} == bad
    assert all(mallocs[r] == kernels[r] - 1 == nums["mallocs_per_step"] for r in bad)
    assert len({_host(dirs[r]) for r in bad}) == 1
    assert not {_host(dirs[r]) for r in bad} & {_host(dirs[r]) for r in dirs if r not in bad}
    # no cache on node 1: reserved == allocated; node 0 keeps its cache
    assert max(cached[r] for r in bad) == 0 == nums["culprit_reserved_minus_allocated_mb_max"]
    assert min(cached[r] for r in dirs if r not in bad) > 1000
    assert conf == {""}  # the allocator config does not differ
    # kernels normal; node 0 waits for node 1
    assert max(mm.values()) < 1.03 * min(mm.values())
    assert min(waits[r] for r in dirs if r not in bad) > 2 * max(waits[r] for r in bad)
    assert rc["culprit_kind"] == "group" and rc["culprit_ranks"] == sorted(bad)
    assert rc["victim_ranks"] == sorted(set(dirs) - bad)
    free = {r: median(float(x["Free"]) for x in _steps(d)) for r, d in dirs.items()}
    assert nums["culprit_free_us_per_step"] == pytest.approx(
        sum(sum(float(x["Free"]) for x in _steps(dirs[r])) for r in bad) / len(bad) / key["steps"],
        rel=0.01,
    )
    assert min(free[r] for r in bad) > 3 * max(free[r] for r in dirs if r not in bad)
    assert nums["saving_us_per_step"] > 0.05 * nums["median_step_us"]
