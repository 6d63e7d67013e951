"""The tenth development set of fault kinds (scenarios_dev12.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

from _dev_files import PO, kernel_rows, rank_dirs, read_csv, trace

from advisor_chat.synth.model import double_hash

N_STEPS = 4


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _comm(d: Path, sec: str = "collective") -> dict[str, Any]:
    """``{step: {op@hash: op info}}`` of one section (collective / p2p) of communication.json."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: {k: v for k, v in part.get(sec, {}).items() if "@" in k} for s, part in raw.items()}


def _groups(d: Path) -> dict[str, dict[str, Any]]:
    """``{group hash: parallel_group_info entry}`` from profiler_metadata.json."""
    md = json.loads((d / "profiler_metadata.json").read_text())
    return {str(double_hash(name)): g for name, g in md["parallel_group_info"].items()}


def _metadata(d: Path) -> dict[str, Any]:
    return json.loads((d / "profiler_metadata.json").read_text())


def _dims(shapes: str) -> set[int]:
    return {int(x) for x in re.findall(r"\d+", shapes)}


def _all_rows(d: Path) -> list[dict[str, str]]:
    """kernel_details rows (compute and HCCL) in start order."""
    return sorted(read_csv(d, "kernel_details.csv"), key=lambda x: float(x["Start Time(us)"]))


def _step_col(d: Path, name: str) -> float:
    rows = read_csv(d, "step_trace_time.csv")
    return sum(float(x[name]) for x in rows) / len(rows)


def _wait_ms(d: Path) -> float:
    return sum(
        float(op["Communication Time Info"]["Wait Time(ms)"])
        for st in _comm(d).values()
        for op in st.values()
    )


# ---------------------------------------------------------------- moe-expert-loop
def test_experts_run_one_by_one_with_the_device_idle_between(scenario) -> None:
    root = scenario("moe-expert-loop")
    key = _key(root)
    nums, ev_key = key["expected_numbers"], key["evidence"]
    rows_set = set(ev_key["expert_rows"])
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    for r in (0, 7, 13):
        d = dirs[r]
        rows = _all_rows(d)
        loop = [
            x
            for x in rows
            if x["Accelerator Core"] != "HCCL" and _dims(x["Input Shapes"]) & rows_set
        ]
        loop_ids = {id(x) for x in loop}
        mm = [x for x in loop if x["Type"] == ev_key["op_type"]]
        # the experts one by one: per step 8 experts x (3 forward + 5 backward) small MatMuls...
        assert len(mm) == nums["expert_matmuls_per_step"] * N_STEPS
        assert len(loop) == nums["expert_loop_kernels_per_step"] * N_STEPS
        assert {n for x in mm for n in _dims(x["Input Shapes"]) & rows_set} == rows_set
        # ... and never a GroupedMatmul
        assert not [x for x in rows if x["Type"] == ev_key["missing_op_type"]]
        assert median(float(x["Duration(us)"]) for x in mm) < 40.0
        # the device idles before each loop kernel that follows another kernel
        idle = 0.0
        idle_each = []
        for prev, x in itertools.pairwise(rows):
            if (
                id(x) in loop_ids
                and prev["Accelerator Core"] != "HCCL"
                and x["Accelerator Core"] != "HCCL"
            ):
                w = float(x["Wait Time(us)"])
                idle += w
                idle_each.append(w)
        want = nums["device_idle_in_expert_loop_us_per_step"]
        assert abs(idle / N_STEPS - want) <= 0.05 * want
        attn = [float(x["Wait Time(us)"]) for x in rows if x["Type"] == "FlashAttentionScore"]
        assert median(idle_each) > 5 * median(attn)
        md = _metadata(d)["distributed_args"]
        assert md["moe_grouped_gemm"] is False
        assert md["num_experts"] // md["expert_model_parallel_size"] == nums["local_experts"]
    # the idle is Free, on every rank alike
    free = [_step_col(d, "Free") for d in dirs.values()]
    want = nums["median_free_us_per_step"]
    assert abs(median(free) - want) <= 0.05 * want
    assert min(free) > 0.9 * max(free)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "host_stall"
    assert nums["saving_us_per_step"] > 0.9 * want


# ---------------------------------------------------------------- ring-cp-blocking-p2p
def test_ring_exchanges_are_blocking_p2p_over_rdma(scenario) -> None:
    root = scenario("ring-cp-blocking-p2p")
    key = _key(root)
    nums, ev_key = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"] == 16
    for r in (0, 5, 11):
        d = dirs[r]
        groups = _groups(d)
        p2p = _comm(d, "p2p")
        assert len(p2p) == N_STEPS
        names: Counter[str] = Counter()
        for ops in p2p.values():
            assert len(ops) == nums["p2p_ops_per_step"]
            for name, op in ops.items():
                g = groups[name.split("@")[1]]
                # on the CP pair (the same slot on the two servers), over RDMA at normal bandwidth
                assert g["group_name"] == ev_key["group"]
                assert g["global_ranks"] == [r % 8, r % 8 + 8]
                bw = op["Communication Bandwidth Info"]
                assert bw["HCCS"]["Transit Size(MB)"] == 0
                want_bw = nums["cp_rdma_bandwidth_gbps"]
                assert abs(bw["RDMA"]["Bandwidth(GB/s)"] - want_bw) <= 0.15 * want_bw
                names[name.split("@")[0].split("__")[0]] += 1
        # every rank sends and receives each block: as many sends as receives
        assert set(names) == set(ev_key["op_types"])
        assert (
            names["hcom_send"] == names["hcom_receive"] == nums["p2p_ops_per_step"] * N_STEPS // 2
        )
        # no compute kernel runs while an exchange is in flight: not overlapped
        ev = trace(d)
        p2p_ev = [e for e in ev if str(e.get("name", "")).startswith(("hcom_send", "hcom_receive"))]
        assert len(p2p_ev) == nums["p2p_ops_per_step"] * N_STEPS
        spans = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in p2p_ev]
        kern = [
            (float(x["Start Time(us)"].strip()), float(x["Duration(us)"])) for x in kernel_rows(d)
        ]
        for a, b in spans:
            assert not [s for s, du in kern if s < b and s + du > a]
        p2p_us = sum(b - a for a, b in spans) / N_STEPS
        want = nums["p2p_us_per_step"]
        assert abs(p2p_us - want) <= 0.1 * want
        md = _metadata(d)["distributed_args"]
        assert md["pipeline_model_parallel_size"] == nums["pipeline_parallel_size"] == 1
        assert md["context_parallel_size"] == nums["cp_size"]
    # a Bubble column on every rank, although there is no pipeline
    bubble = [_step_col(d, "Bubble") for d in dirs.values()]
    assert min(bubble) > 0
    want = nums["median_bubble_us_per_step"]
    assert abs(median(bubble) - want) <= 0.05 * want
    assert min(bubble) > 0.9 * max(bubble)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "exposed_communication"
    assert nums["saving_us_per_step"] > 0.8 * nums["p2p_us_per_step"] / 2


# ---------------------------------------------------------------- hbm-leftover-process
def _mem(d: Path, comp: str) -> list[dict[str, str]]:
    rows = [x for x in read_csv(d, "memory_record.csv") if x["Component"] == comp]
    return sorted(rows, key=lambda x: float(x["Timestamp(us)"]))


def test_rank5_allocator_saw_tooths_under_a_ceiling(scenario) -> None:
    root = scenario("hbm-leftover-process")
    key = _key(root)
    nums, ev_key = key["expected_numbers"], key["evidence"]
    culprit = ev_key["culprit_rank"]
    dirs = rank_dirs(root)
    peers = [0, 4, 6, 13]
    resv: dict[int, list[float]] = {}
    alloc: dict[int, list[float]] = {}
    for r in (culprit, *peers):
        pta = _mem(dirs[r], ev_key["component"])
        assert pta
        resv[r] = [float(x["Total Reserved(MB)"]) for x in pta]
        alloc[r] = [float(x["Total Allocated(MB)"]) for x in pta]
        # the process level (APP) row is the allocator's reservation plus the same runtime share
        app = [float(x["Total Reserved(MB)"]) for x in _mem(dirs[r], "APP")]
        extra = {round(a - b, 3) for a, b in zip(app, resv[r], strict=True)}
        assert len(extra) == 1
    # the same model: the same allocated bytes on every rank
    assert all(alloc[r] == alloc[culprit] for r in peers)
    assert max(alloc[culprit]) == nums["allocated_peak_mb"]
    # the others' reservation is flat; rank 5's stays under a lower ceiling and drops mid-step
    for r in peers:
        assert max(resv[r]) - min(resv[r]) < 1.0
        assert abs(max(resv[r]) - nums["others_reserved_mb"]) < 1.0
    assert abs(max(resv[culprit]) - nums["culprit_reserved_max_mb"]) < 1.0
    assert max(resv[culprit]) < min(resv[peers[0]])
    drops = [i for i in range(1, len(resv[culprit])) if resv[culprit][i] < resv[culprit][i - 1]]
    assert len(drops) == nums["cache_releases_in_capture"]
    freed = [resv[culprit][i - 1] - alloc[culprit][i - 1] for i in drops]
    assert abs(median(freed) - nums["freed_mb_per_release_median"]) < 1.0
    # where it drops, rank 5's device idles (the host releases and allocates again) ...
    ks = sorted(kernel_rows(dirs[culprit]), key=lambda x: float(x["Start Time(us)"]))
    pta_t = [float(x["Timestamp(us)"]) for x in _mem(dirs[culprit], "PTA")]
    at = {pta_t[i] for i in drops}
    idle = [float(x["Wait Time(us)"]) for x in ks if float(x["Start Time(us)"]) in at]
    assert len(idle) == len(drops)
    want = nums["stall_us_median"]
    assert abs(median(idle) - want) <= 0.05 * want
    peer_ks = kernel_rows(dirs[peers[0]])
    assert median(idle) > 20 * median(float(x["Wait Time(us)"]) for x in peer_ks)
    # ... its kernels are as fast as everyone's, and the others wait for it
    mm = {
        r: median(float(x["Duration(us)"]) for x in kernel_rows(dirs[r]) if x["Type"] == "MatMulV2")
        for r in (culprit, *peers)
    }
    assert all(abs(mm[culprit] - mm[r]) <= 0.03 * mm[r] for r in peers)
    assert min(_wait_ms(dirs[r]) for r in peers) > 2 * _wait_ms(dirs[culprit])
    free5 = _step_col(dirs[culprit], "Free")
    assert abs(free5 - nums["culprit_free_us_per_step"]) <= 0.05 * nums["culprit_free_us_per_step"]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "rank" and rc["culprit_ranks"] == [culprit]
    assert set(peers) <= set(rc["victim_ranks"])


# ---------------------------------------------------------------- nic-irq-on-train-core
def test_device0_launches_stall_inside_the_gradient_allreduces(scenario) -> None:
    root = scenario("nic-irq-on-train-core")
    key = _key(root)
    nums, ev_key = key["expected_numbers"], key["evidence"]
    culprits = ev_key["culprit_ranks"]
    dirs = rank_dirs(root)
    assert culprits == sorted(r for r in dirs if r % 8 == ev_key["device_id"])
    assert len({r // 8 for r in culprits}) == len(culprits) == 2  # one per server
    long_launch: dict[int, int] = {}
    inside: dict[int, float] = {}
    rdma: dict[int, float] = {}
    for r in (*culprits, 1, 5, 9, 14):
        d = dirs[r]
        ev = trace(d)
        launches = [
            e
            for e in ev
            if str(e.get("name", "")).startswith("AscendCL@aclnn") and e.get("ph") == "X"
        ]
        slow = [e for e in launches if float(e["dur"]) > 300.0]
        long_launch[r] = len(slow)
        # the kernels of the windows: the first 6 on the compute stream after an all-reduce starts
        ar = sorted(
            float(e["ts"]) for e in ev if str(e.get("name", "")).startswith("hcom_allReduce")
        )
        kern = sorted(
            (float(e["ts"]), e["args"]["connection_id"])
            for e in ev
            if e.get("ph") == "X" and "Task Type" in e.get("args", {})
        )
        window: set[int] = set()
        for a in ar:
            window |= {c for _t, c in [k for k in kern if k[0] > a][:6]}
        got = [e["args"]["connection_id"] for e in slow]
        inside[r] = sum(1 for c in got if c in window) / max(len(got), 1)
        if r in culprits:
            want = nums["culprit_launch_us_in_windows_median"]
            assert abs(median(float(e["dur"]) for e in slow) - want) <= 0.1 * want
            normal = [float(e["dur"]) for e in launches if float(e["dur"]) <= 300.0]
            assert median(normal) < 30.0
        ops = [op for st in _comm(d).values() for op in st.values()]
        rdma[r] = median(
            float(op["Communication Bandwidth Info"]["RDMA"]["Bandwidth(GB/s)"])
            for op in ops
            if op["Communication Bandwidth Info"]["RDMA"]["Transit Size(MB)"]
        )
        md = _metadata(d)
        assert md["ENV_VARIABLES"]["CPU_AFFINITY_CONF"] == ev_key["cpu_affinity_conf"]
    others = [r for r in long_launch if r not in culprits]
    # only device 0's ranks, only while a gradient all-reduce is in flight
    for r in culprits:
        assert long_launch[r] == nums["stalled_launches_per_step"] * N_STEPS
        assert inside[r] == 1.0
    assert all(long_launch[r] == 0 for r in others)
    # the links are normal (the same RDMA bandwidth on every rank) and the others wait
    assert max(rdma.values()) - min(rdma.values()) < 0.1 * median(rdma.values())
    assert (
        abs(median(rdma.values()) - nums["rdma_bandwidth_gbps"])
        <= 0.05 * nums["rdma_bandwidth_gbps"]
    )
    assert min(_wait_ms(dirs[r]) for r in others) > 2 * max(_wait_ms(dirs[r]) for r in culprits)
    free_c = median(_step_col(dirs[r], "Free") for r in culprits)
    want = nums["culprit_free_us_per_step"]
    assert abs(free_c - want) <= 0.05 * want
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "ranks" and rc["culprit_ranks"] == culprits
    assert set(others) <= set(rc["victim_ranks"])
