"""The thirteenth development set of fault kinds (scenarios_dev15.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path
from statistics import median
from typing import Any

from _dev_files import PO, kernel_rows, rank_dirs, read_csv, trace

from advisor_chat.synth.model import double_hash


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


def _by_step(d: Path) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = defaultdict(list)
    for x in kernel_rows(d):
        out[x["Step Id"]].append(x)
    return out


def _computing(d: Path) -> float:
    return median(float(x["Computing"]) for x in _steps(d))


def _step_windows(events: list[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """{step id: (start, end) µs} from the ProfilerStep events."""
    out = {}
    for e in events:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            t = float(e["ts"])
            out[int(e["name"].split("#")[1])] = (t, t + float(e["dur"]))
    return out


def _group_hash(d: Path, group_name: str) -> str:
    md = json.loads((d / "profiler_metadata.json").read_text())
    names = [k for k, v in md["parallel_group_info"].items() if v["group_name"] == group_name]
    assert len(names) == 1, group_name
    return str(double_hash(names[0]))


# ---------------------------------------------------------------- activation-offload-inline
def test_offload_copies_run_in_line_on_the_compute_stream(scenario) -> None:
    root = scenario("activation-offload-inline")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bw: dict[str, list[float]] = {op: [] for op in ev["operations"]}
    for d in list(dirs.values())[:4]:
        events = trace(d)
        win = _step_windows(events)
        copies = [e for e in events if e.get("name") == ev["task_type"]]
        assert copies and all(e["tid"] == ev["stream"] for e in copies)
        assert {e["args"]["size(B)"] for e in copies} == {ev["copy_bytes"]}
        for sid, (a, b) in win.items():
            mine = [e for e in copies if a <= float(e["ts"]) < b]
            per = Counter(e["args"]["operation"] for e in mine)
            assert per == {
                "device to host": nums["offload_copies_d2h_per_step"],
                "host to device": nums["offload_copies_h2d_per_step"],
            }, sid
            # the forward's copies to the host all come before the backward's copies back
            d2h = max(float(e["ts"]) for e in mine if e["args"]["operation"] == "device to host")
            h2d = min(float(e["ts"]) for e in mine if e["args"]["operation"] == "host to device")
            assert d2h < h2d
        for e in copies:
            bw[e["args"]["operation"]].append(float(e["args"]["bandwidth(GB/s)"]))
        # each copy is queued by an aclrtMemcpyAsync before it runs (HostToDevice flow)
        api = {
            e["args"]["connection_id"]: float(e["ts"])
            for e in events
            if e.get("name") == "AscendCL@" + ev["api"]
        }
        assert len(api) == len(copies)
        for e in copies:
            assert api[e["args"]["connection_id"]] < float(e["ts"])
        # the copies sit between kernels of the same stream, never on top of one
        tasks = sorted(
            (
                e
                for e in events
                if e.get("ph") == "X"
                and e.get("tid") == ev["stream"]
                and "Task Type" in e.get("args", {})
            ),
            key=lambda e: float(e["ts"]),
        )
        for x, y in pairwise(tasks):
            assert float(x["ts"]) + float(x["dur"]) <= float(y["ts"]) + 0.01
        # not operators: no kernel_details row; the kernel after a copy waited only a few µs
        rows = kernel_rows(d)
        assert not [x for x in rows if "MEMCPY" in x["Name"].upper()]
        fa = [float(x["Wait Time(us)"]) for x in rows if x["Type"] == "FlashAttentionScore"]
        assert max(fa) < 100
    assert abs(median(bw["device to host"]) - nums["d2h_bandwidth_gbps"]) < 0.3
    assert abs(median(bw["host to device"]) - nums["h2d_bandwidth_gbps"]) < 0.3
    shares = [_share(d, "Free") for d in dirs.values()]
    assert abs(median(shares) - nums["median_free_share"]) <= 0.03 * nums["median_free_share"]
    assert max(shares) - min(shares) < 0.03  # every rank alike
    mm = [
        median(float(x["Duration(us)"]) for x in kernel_rows(d) if x["Type"] == "MatMulV2")
        for d in dirs.values()
    ]
    assert max(mm) < 1.02 * min(mm)  # the kernels are normal
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "job_idle"
    assert nums["saving_us_per_step"] > 0.9 * nums["copy_us_per_step"]
    assert nums["median_step_us_without_offload"] < 0.7 * nums["median_step_us"]


# ---------------------------------------------------------------- sp-norm-extra-gather
def test_norms_gathered_over_tp_add_collectives(scenario) -> None:
    root = scenario("sp-norm-extra-gather")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"] == 16
    bw: dict[str, list[float]] = defaultdict(list)
    for r, d in dirs.items():
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["distributed_args"]["sequence_parallel"] is True
        assert md["distributed_args"]["tensor_model_parallel_size"] == nums["tp_size"]
        tp = _group_hash(d, ev["group"])
        raw = json.loads((d / PO / "communication.json").read_text())
        assert len(raw) == key["steps"]
        for sec in raw.values():
            ops = [k.split("@")[0] for k in sec["collective"] if k.endswith("@" + tp)]
            per = Counter(name.rsplit("_", 3)[0] for name in ops)
            assert per["hcom_allGather_"] == nums["tp_allgather_per_step"]
            assert per["hcom_reduceScatter_"] == nums["tp_reducescatter_per_step"]
            if r < 2:
                for k, v in sec["collective"].items():
                    if k.endswith("@" + tp):
                        bw[k.rsplit("_", 3)[0]].append(
                            float(v["Communication Bandwidth Info"]["HCCS"]["Bandwidth(GB/s)"])
                        )
        rows = kernel_rows(d)
        norms = {x["Input Shapes"].strip('"') for x in rows if x["Type"] in ev["norm_op_types"]}
        assert norms == {ev["norm_input_shape"]}
        adds = {x["Input Shapes"].strip('"') for x in rows if x["Type"] == "Add"}
        assert adds == {ev["shard_shape"]}
    # the gathers run as fast as the reduce-scatters on the same links: nothing slow on the wire
    assert abs(median(bw["hcom_allGather_"]) / median(bw["hcom_reduceScatter_"]) - 1) < 0.03
    extra = (nums["tp_allgather_per_step"] - nums["tp_allgather_per_step_sequence_parallel"]) + (
        nums["tp_reducescatter_per_step"] - nums["tp_reducescatter_per_step_sequence_parallel"]
    )
    assert extra == nums["extra_tp_collectives_per_step"] > 0
    shares = [_share(d, "Communication(Not Overlapped)") for d in dirs.values()]
    want = nums["median_comm_not_overlapped_share"]
    assert abs(median(shares) - want) <= 0.03 * want
    assert max(shares) - min(shares) < 0.03  # every rank alike, nobody late
    notov = median(
        median(float(x["Communication(Not Overlapped)"]) for x in _steps(d)) for d in dirs.values()
    )
    assert notov > 1.3 * nums["median_comm_not_overlapped_us_per_step_without_extra"]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "exposed_communication"
    assert nums["saving_us_per_step"] > 0.15 * nums["median_step_us"]


# ---------------------------------------------------------------- cp-ring-causal-imbalance
def test_last_cp_rank_of_each_ring_computes_every_block(scenario) -> None:
    root = scenario("cp-ring-causal-imbalance")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    # the CP rings from parallel_group_info: each rank's position in its ring
    pos: dict[int, int] = {}
    for r, d in dirs.items():
        md = json.loads((d / "profiler_metadata.json").read_text())
        cp = [v for v in md["parallel_group_info"].values() if v["group_name"] == "cp"]
        assert len(cp) == 1 and len(cp[0]["global_ranks"]) == nums["cp_size"]
        assert cp[0]["global_ranks"] in ev["cp_groups"]
        pos[r] = cp[0]["group_rank"]
        assert md["distributed_args"]["context_parallel_size"] == nums["cp_size"]
    fa: dict[int, set[int]] = {}
    fa_grad: dict[int, set[int]] = {}
    full_us: dict[int, float] = {}
    shapes: set[str] = set()
    for r, d in dirs.items():
        steps = _by_step(d)
        assert len(steps) == key["steps"]
        fa[r] = {sum(x["Type"] == "FlashAttentionScore" for x in rows) for rows in steps.values()}
        fa_grad[r] = {
            sum(x["Type"] == "FlashAttentionScoreGrad" for x in rows) for rows in steps.values()
        }
        rows = kernel_rows(d)
        blocks = [x for x in rows if x["Type"] == "FlashAttentionScore"]
        shapes |= {x["Input Shapes"] for x in blocks if "2048,2048" not in x["Input Shapes"]}
        full = [float(x["Duration(us)"]) for x in blocks if "2048,2048" not in x["Input Shapes"]]
        if full:
            full_us[r] = median(full)
    by_pos = nums["flash_attention_per_step_by_cp_index"]
    for r in dirs:
        assert fa[r] == fa_grad[r] == {by_pos[pos[r]]}, r
    most = sorted(r for r in dirs if fa[r] == {max(by_pos)})
    assert most == ev["culprit_ranks"] == key["root_cause"]["culprit_ranks"]
    assert {pos[r] for r in most} == {ev["culprit_cp_index"]}
    assert by_pos[-1] == 4 * by_pos[0]
    assert len(shapes) == 1  # every full block has the same shapes on every rank
    assert max(full_us.values()) < 1.03 * min(full_us.values())  # and takes as long
    # the others wait inside the ring's batchSendRecv (p2p), the first of each ring the most
    sync: dict[int, float] = {}
    for r, d in dirs.items():
        raw = json.loads((d / PO / "communication.json").read_text())
        ops = [
            (k.split("@")[0], v) for sec in raw.values() for k, v in sec["p2p"].items() if "@" in k
        ]
        assert ops and {name.rsplit("_", 3)[0] for name, _ in ops} == {ev["wait_op"]}
        sync[r] = sum(v["Communication Time Info"]["Wait Time(ms)"] for _, v in ops)
    first = [r for r in dirs if pos[r] == 0]
    assert min(sync[r] for r in first) > 3 * max(sync[r] for r in most)
    want = nums["first_cp_rank_ring_wait_us_per_step"] / 1000
    assert abs(median(sync[r] for r in first) / key["steps"] - want) <= 0.05 * want
    comp_most = median(_computing(dirs[r]) for r in most)
    comp_first = median(_computing(dirs[r]) for r in first)
    assert abs(comp_most / comp_first - nums["computing_ratio"]) <= 0.03
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "ranks" and rc["mechanism"] == "compute_straggler"
    assert set(rc["victim_ranks"]) == set(dirs) - set(most)
    assert nums["saving_us_per_step"] > 0.15 * nums["median_step_us"]


# ---------------------------------------------------------------- async-save-thread-contention
def test_host_stops_launching_in_the_steps_after_the_save(scenario) -> None:
    root = scenario("async-save-thread-contention")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    hot = set(ev["affected_steps"])
    assert hot and set(ev["normal_steps"]) | hot == set(key["step_ids"])
    free_hot: list[float] = []
    free_rest: list[float] = []
    for r, d in dirs.items():
        info = json.loads((d / f"profiler_info_{r}.json").read_text())
        assert info["config"]["experimental_config"]["_gc_detect_threshold"] is not None
        for x in _steps(d):
            (free_hot if int(x["Step"]) in hot else free_rest).append(float(x["Free"]))
        if r >= 4:
            continue
        events = trace(d)
        assert not [e for e in events if e.get("cat") == "GC"]  # GC detection on, no GC
        win = _step_windows(events)
        starts = {
            e["id"]: float(e["ts"])
            for e in events
            if e.get("ph") == "s" and e.get("cat") == "HostToDevice"
        }
        host = sorted(
            (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
            for e in events
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("AscendCL@")
        )
        kernels = [
            e
            for e in events
            if e.get("ph") == "X"
            and "Task Type" in e.get("args", {})
            and e["args"]["Task Type"] != "MEMCPY_ASYNC"
        ]
        late: dict[int, int] = Counter()
        stops: dict[int, int] = Counter()
        for k in kernels:
            t = float(k["ts"])
            launch = starts[str(k["args"]["connection_id"])]
            if t - launch > 100:
                continue  # launched well ahead, as usual
            sid = next(s for s, (a, b) in win.items() if a <= t < b)
            late[sid] += 1
            # launched just before it runs: right after a stretch of milliseconds without any host
            # call (the host was away), or right behind such a launch (the queue refilling)
            idle = launch - max(e for a, e in host if e <= launch - 1)
            assert idle > 1500 or idle < 20, (r, sid, idle)
            stops[sid] += idle > 1500
        for sid in win:
            if sid in hot:
                assert stops[sid] >= 2, (r, sid)
            else:
                assert late[sid] == 0, (r, sid)
    assert median(free_hot) > 5 * median(free_rest)
    want = nums["median_free_us_affected_steps"]
    assert abs(median(free_hot) - want) <= 0.05 * want
    step_by_id: dict[int, list[float]] = defaultdict(list)
    for d in dirs.values():
        for x in _steps(d):
            step_by_id[int(x["Step"])].append(float(x["Stage"]))
    job = {s: max(v) for s, v in step_by_id.items()}
    hot_step = median(job[s] for s in hot)
    assert abs(hot_step - nums["step_us_affected_steps"]) <= 0.02 * hot_step
    assert hot_step > 1.3 * median(job[s] for s in ev["normal_steps"])
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "host_stall"
    assert rc["steps"] == ev["affected_steps"]
    assert nums["checkpoint_cost_us"] > 2 * nums["device_idle_us_per_affected_step_median"]
