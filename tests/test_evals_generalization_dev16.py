"""The fourteenth development set of fault kinds (scenarios_dev16.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

from _dev_files import PO, kernel_rows, rank_dirs, read_csv, trace


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _steps(d: Path) -> list[dict[str, str]]:
    return read_csv(d, "step_trace_time.csv")


def _share(d: Path, column: str) -> float:
    rows = _steps(d)
    part = sum(float(x[column]) for x in rows)
    step = sum(
        float(x["Computing"]) + float(x["Communication(Not Overlapped)"]) + float(x["Free"])
        for x in rows
    )
    return part / step


def _step_windows(events: list[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """{step id: (start, end) µs} from the ProfilerStep events."""
    out = {}
    for e in events:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            t = float(e["ts"])
            out[int(e["name"].split("#")[1])] = (t, t + float(e["dur"]))
    return out


def _sid(win: dict[int, tuple[float, float]], t: float) -> int:
    return next(s for s, (a, b) in win.items() if a <= t < b)


def _x(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("ph") == "X" and e.get("name") == name]


# ---------------------------------------------------------------- grad-reduce-event-wait
def test_compute_stream_waits_on_every_gradient_allreduce(scenario) -> None:
    root = scenario("grad-reduce-event-wait")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    for d in list(dirs.values())[:4]:
        events = trace(d)
        win = _step_windows(events)
        waits = _x(events, ev["task_type"])
        assert waits and all(e["tid"] == ev["stream"] for e in waits)
        per = Counter(_sid(win, float(e["ts"])) for e in waits)
        assert per == dict.fromkeys(win, ev["waits_per_step"])
        hccl = sorted(
            (float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"])
            for e in events
            if e.get("ph") == "X" and str(e.get("name", "")).startswith(ev["op_type"])
        )
        big = [h for h in hccl if h[1] - h[0] > 3000]  # the 96 MB gradient all-reduces
        assert len(big) == ev["waits_per_step"] * len(win)
        # every wait ends with a gradient all-reduce
        for e in waits:
            end = float(e["ts"]) + float(e["dur"])
            assert min(abs(end - b) for _a, b, _n in big) < 0.01
        # the host queued the wait right after each all-reduce launch
        launches = sorted(float(e["ts"]) for e in _x(events, "AscendCL@HcclAllReduce"))
        api = sorted(float(e["ts"]) for e in _x(events, "AscendCL@" + ev["api"]))
        rec = _x(events, "AscendCL@" + ev["record_api"])
        assert len(api) == len(rec) == len(waits)
        for t in api:
            assert 0 < t - max(a for a in launches if a < t) < 50
        # the kernels after the wait were launched long before it ended (the host ran ahead)
        flows = {
            e["id"]: float(e["ts"])
            for e in events
            if e.get("ph") == "s" and e.get("cat") == "HostToDevice"
        }
        kern = sorted(
            (float(e["ts"]), flows[str(e["args"]["connection_id"])])
            for e in events
            if e.get("ph") == "X"
            and e.get("args", {}).get("Task Type") in ("AI_CORE", "MIX_AIC", "AI_VECTOR_CORE")
        )
        for e in waits:
            end = float(e["ts"]) + float(e["dur"])
            nxt = next(k for k in kern if k[0] >= end - 0.01)
            assert nxt[1] < end - 500
        # not operators: no kernel_details row
        assert not [x for x in kernel_rows(d) if "EVENT" in x["Name"].upper()]
    shares = [_share(d, "Communication(Not Overlapped)") for d in dirs.values()]
    want = nums["median_comm_not_overlapped_share"]
    assert abs(median(shares) - want) <= 0.03 * want
    assert max(shares) - min(shares) < 0.03  # every rank alike, nobody late
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "exposed_communication"
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]
    assert (
        nums["median_comm_not_overlapped_us_per_step_overlapped"]
        < 0.5 * (nums["median_comm_not_overlapped_us_per_step"])
    )


# ---------------------------------------------------------------- pcie-downtrained-card
def test_one_card_copies_its_batch_at_a_fraction_of_the_bandwidth(scenario) -> None:
    root = scenario("pcie-downtrained-card")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bw: dict[int, float] = {}
    for r, d in dirs.items():
        events = trace(d)
        win = _step_windows(events)
        copies = _x(events, ev["task_type"])
        assert {e["args"]["operation"] for e in copies} == {ev["operation"]}
        assert all(e["tid"] == ev["stream"] for e in copies)
        assert Counter(_sid(win, float(e["ts"])) for e in copies) == dict.fromkeys(
            win, nums["copies_per_step"]
        )
        mask = [e for e in copies if e["args"]["size(B)"] == ev["copy_bytes"]]
        assert len(mask) == len(win)
        bw[r] = median(float(e["args"]["bandwidth(GB/s)"]) for e in mask)
    slow = sorted(bw, key=lambda r: bw[r])
    assert slow[0] == ev["culprit_rank"] == key["root_cause"]["culprit_ranks"][0]
    assert abs(bw[slow[0]] - nums["culprit_h2d_bandwidth_gbps"]) < 0.1
    others = [bw[r] for r in slow[1:]]
    assert min(others) > 10 * bw[slow[0]]
    assert abs(median(others) - nums["others_h2d_bandwidth_gbps"]) < 0.5
    # the kernels are as fast on the culprit as elsewhere
    mm = {
        r: median(float(x["Duration(us)"]) for x in kernel_rows(d) if x["Type"] == "MatMulV2")
        for r, d in dirs.items()
    }
    assert max(mm.values()) < 1.02 * min(mm.values())
    # the others wait for it in the collectives: their Free is low, their exposed comm high
    comm = {r: _share(d, "Communication(Not Overlapped)") for r, d in dirs.items()}
    bad = ev["culprit_rank"]
    assert all(comm[r] > comm[bad] + 0.05 for r in dirs if r != bad)
    free = {r: _share(d, "Free") for r, d in dirs.items()}
    assert free[bad] > 5 * median(free[r] for r in dirs if r != bad)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "rank" and bad not in rc["victim_ranks"]
    assert nums["saving_us_per_step"] > 0.8 * (
        nums["culprit_copy_us_per_step"] - nums["others_copy_us_per_step"]
    )


# ---------------------------------------------------------------- moe-uneven-token-routing
def _rows_of(shape: str) -> int:
    return int(re.findall(r"\d+", shape)[0])


def test_expert_token_rows_differ_by_layer_and_rank(scenario) -> None:
    root = scenario("moe-uneven-token-routing")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    table = ev["token_rows_by_rank_and_layer"]
    per_step: dict[int, int] = {}
    for r, d in dirs.items():
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["distributed_args"]["expert_model_parallel_size"] == nums["ep_size"]
        rows = kernel_rows(d)
        step0 = rows[0]["Step Id"]
        up = [
            _rows_of(x["Input Shapes"].strip('"'))
            for x in rows
            if x["Type"] == ev["operator"] and x["Step Id"] == step0
        ]
        # forward: gmm_up, gmm_down per layer; its rows are the tokens the router sent this rank
        fwd = up[: 2 * nums["moe_layers"] : 2]
        assert fwd == table[r], r
        per_step[r] = sum(fwd)
    assert set(per_step.values()) == {nums["token_rows_per_step_every_rank"]}
    flat = [x for row in table for x in row]
    assert max(flat) == nums["max_token_rows"] and min(flat) == nums["min_token_rows"]
    # each layer's most loaded rank differs: no rank is the hottest twice in its EP group
    for g, group in enumerate(ev["ep_groups"]):
        hot = [layer[g] for layer in ev["hot_ranks_by_layer"]]
        assert len(set(hot)) == len(hot) and set(hot) <= set(group)
    # the AllToAllv sizes differ from op to op (communication.json: what rank 0 sends per op)
    raw = json.loads((dirs[0] / PO / "communication.json").read_text())
    sec = next(iter(raw.values()))["collective"]
    sizes = [
        v["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"]
        for k, v in sec.items()
        if k.startswith(ev["wait_op"])
    ]
    assert len(sizes) == nums["alltoallv_per_step"] and max(sizes) > 2 * min(sizes)
    # every rank waits in the AllToAllv alike; none stands out
    shares = [_share(d, "Communication(Not Overlapped)") for d in dirs.values()]
    assert abs(median(shares) - nums["median_comm_not_overlapped_share"]) <= 0.03
    assert max(shares) - min(shares) < 0.05
    comp = [median(float(x["Computing"]) for x in _steps(d)) for d in dirs.values()]
    assert max(comp) < 1.03 * min(comp)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "exposed_communication"
    assert nums["alltoallv_us_median"] > 1.3 * nums["alltoallv_us_median_balanced"]
    assert nums["saving_us_per_step"] > 0.15 * nums["median_step_us"]


# ---------------------------------------------------------------- allocator-fragmentation-late
def test_one_rank_allocator_goes_to_the_device_from_the_onset(scenario) -> None:
    root = scenario("allocator-fragmentation-late")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = ev["culprit_rank"]
    hot = set(ev["affected_steps"])
    assert hot and hot | set(ev["normal_steps"]) == set(key["step_ids"])
    for r in (bad, 0, 1):
        events = trace(dirs[r])
        win = _step_windows(events)
        calls = {api: _x(events, "AscendCL@" + api) for api in ev["apis"]}
        if r != bad:
            assert not any(calls.values()), r
            continue
        for api, evs in calls.items():
            # by where the call ends (a synchronize starts right after the previous launch)
            steps = {_sid(win, float(e["ts"]) + float(e["dur"])) for e in evs}
            assert steps == hot, api
        per = Counter(_sid(win, float(e["ts"])) for e in calls["aclrtMalloc"])
        assert set(per.values()) == {nums["device_calls_per_affected_step"]}
    # memory_record.csv: reserved at the limit on the culprit, flat elsewhere
    resv: dict[int, list[float]] = {}
    alloc: dict[int, list[float]] = {}
    for r, d in dirs.items():
        pta = [x for x in read_csv(d, "memory_record.csv") if x["Component"] == "PTA"]
        resv[r] = [float(x["Total Reserved(MB)"]) for x in pta]
        alloc[r] = [float(x["Total Allocated(MB)"]) for x in pta]
    assert max(resv[bad]) == nums["culprit_reserved_mb_max"]
    assert max(resv[bad]) > max(alloc[bad]) + 8000  # far more reserved than allocated
    assert max(resv[bad]) <= nums["allocator_limit_mb"]
    for r in dirs:
        if r != bad:
            assert len(set(resv[r])) == 1 and max(resv[r]) < max(resv[bad]) - 5000
    # the culprit's device idles in the affected steps only; the others wait for it there
    free = {int(x["Step"]): float(x["Free"]) for x in _steps(dirs[bad])}
    assert min(free[s] for s in hot) > 5 * max(free[s] for s in ev["normal_steps"])
    assert (
        abs(median(free[s] for s in hot) - nums["culprit_free_us_affected_steps"])
        < 0.05 * (nums["culprit_free_us_affected_steps"])
    )
    notov = {int(x["Step"]): float(x["Communication(Not Overlapped)"]) for x in _steps(dirs[0])}
    assert min(notov[s] for s in hot) > max(notov[s] for s in ev["normal_steps"]) + 5000
    mm = {
        r: median(float(x["Duration(us)"]) for x in kernel_rows(d) if x["Type"] == "MatMulV2")
        for r, d in dirs.items()
    }
    assert max(mm.values()) < 1.02 * min(mm.values())
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "rank" and rc["culprit_ranks"] == [bad]
    assert rc["steps"] == ev["affected_steps"]
    assert nums["step_us_affected_steps"] > 1.08 * nums["step_us_other_steps"]
