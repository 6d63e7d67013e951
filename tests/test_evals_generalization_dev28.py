"""The twenty-sixth development set of fault kinds (scenarios_dev28.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from _dev_files import PO, kernel_rows, rank_dirs, read_csv


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _steps(d: Path) -> list[dict[str, str]]:
    return read_csv(d, "step_trace_time.csv")


def _comm(d: Path, sec: str = "collective") -> dict[str, dict[str, Any]]:
    """{step key: {op name: record}} of one section of communication.json."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v[sec] for s, v in raw.items()}


# ---------------------------------------------------------------- mc2-off-tp-sp
def test_tp_collectives_sit_between_the_matmuls_unfused(scenario) -> None:
    root = scenario("mc2-off-tp-sp")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    notov: dict[int, float] = {}
    for r, d in dirs.items():
        rows = read_csv(d, "kernel_details.csv")
        types = Counter(x["Type"] for x in rows)
        per_step = nums["tp_allgathers_per_step"]
        assert types["hcom_allGather_"] >= per_step * key["steps"]
        assert types["hcom_reduceScatter_"] == nums["tp_reducescatters_per_step"] * key["steps"]
        assert not {"AllGatherMatmul", "MatmulReduceScatter", "MatmulAllReduce"} & set(types)
        # every tp all-gather is followed by a MatMul, every reduce-scatter follows one
        for i, x in enumerate(rows):
            if x["Type"] == "hcom_reduceScatter_":
                assert rows[i - 1]["Type"] == "MatMulV2"
            if x["Type"] == "hcom_allGather_" and i + 1 < len(rows):
                nxt = rows[i + 1]["Type"]
                assert nxt in ("MatMulV2", "ForeachAddList")  # (the optimizer's small gather)
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["distributed_args"]["sequence_parallel"] is True
        assert md["distributed_args"]["use_ascend_mc2"] is False
        st = _steps(d)
        notov[r] = median(float(x["Communication(Not Overlapped)"]) for x in st)
    assert max(notov.values()) < 1.05 * min(notov.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["tp_collectives_per_layer"] == ev["per_layer"] == 8
    assert nums["saving_us_per_step"] > 0.15 * nums["median_step_us"]


# ---------------------------------------------------------------- pp-p2p-unbatched
def test_pipeline_handoffs_are_many_tiny_p2p_ops(scenario) -> None:
    root = scenario("pp-p2p-unbatched")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    bub: dict[int, float] = {}
    for r, d in dirs.items():
        p2p = _comm(d, "p2p")
        for ops in p2p.values():
            recs = {n: v for n, v in ops.items() if n != "Total Op Info"}
            rdma = [
                v
                for v in recs.values()
                if v["Communication Bandwidth Info"]["RDMA"]["Transit Size(MB)"] > 0
            ]
            hccs = [
                v
                for v in recs.values()
                if v["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"] > 0
            ]
            # every rank sits on an in-node boundary; only stages 1 and 2 on the node-crossing one
            assert len(hccs) == nums["p2p_ops_per_step_per_boundary"]
            assert len(rdma) == (nums["p2p_ops_per_step_node_boundary"] if r in bad else 0)
            tiny = [
                v["Communication Time Info"]["Elapse Time(ms)"]
                for v in rdma
                if v["Communication Bandwidth Info"]["RDMA"]["Transit Size(MB)"] < 0.01
            ]
            if r in bad:
                assert len(tiny) >= nums["p2p_ops_per_step_node_boundary"] // 2
                assert 0.06 < median(tiny) < 0.2
        # stages 0 and 3 wait for their peers in the p2p ops (Wait Time of the p2p section)
        bub[r] = median(
            ops["Total Op Info"]["Communication Time Info"]["Wait Time(ms)"] for ops in p2p.values()
        )
    assert min(bub[r] for r in dirs if r not in bad) > 5 * max(bub[r] for r in bad)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert not set(rc["victim_ranks"]) & bad
    assert nums["small_p2p_us_median_rdma"] > 3 * nums["small_p2p_us_median_hccs"]
    assert nums["saving_us_per_step"] > 0.08 * nums["median_step_us"]


# ---------------------------------------------------------------- overlap-contention-sync-steps
def test_matmuls_beside_the_allreduce_run_slower_in_the_sync_steps(scenario) -> None:
    root = scenario("overlap-contention-sync-steps")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    on = set(ev["sync_steps"])
    ratios: list[float] = []
    for d in dirs.values():
        comm = _comm(d)
        for sk, ops in comm.items():
            n = sum(1 for x in ops if x.startswith("hcom_allReduce_"))
            assert (n > 0) == (int(sk[4:]) in on)
        # the same MatMul shape: slower only in the sync steps
        by: dict[tuple[int, str], list[float]] = {}
        for x in kernel_rows(d):
            if x["Type"] == "MatMulV2":
                by.setdefault((int(x["Step Id"]), x["Input Shapes"]), []).append(
                    float(x["Duration(us)"])
                )
        shapes = {sh for _, sh in by}
        slower = 0
        for sh in shapes:
            a = [v for (s, x), vs in by.items() if x == sh and s in on for v in vs]
            b = [v for (s, x), vs in by.items() if x == sh and s not in on for v in vs]
            assert a and b
            if max(a) > 1.25 * median(b):
                slower += 1
                # the launches beside the all-reduce, against the same shape elsewhere
                ratios.extend(v / median(b) for v in a if v > 1.25 * median(b))
        assert slower >= 2
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["hccl_env"]["HCCL_OP_EXPANSION_MODE"] == "AIV"
        st = {int(x["Step"]): float(x["Stage"]) for x in _steps(d)}
        off = [v for s, v in st.items() if s not in on]
        assert all(st[s] > 1.1 * median(off) for s in on)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["steps"] == ev["sync_steps"]
    # the key's slowdown, read again from kernel_details.csv (not the planted factor)
    assert nums["matmul_slowdown_beside_allreduce"] == pytest.approx(median(ratios), rel=0.05)
    assert nums["extra_us_per_sync_step"] > 0.05 * nums["step_us_sync_steps_median"]


# ---------------------------------------------------------------- moe-router-unfused
def test_router_burst_of_tiny_kernels_leaves_the_device_idle(scenario) -> None:
    root = scenario("moe-router-unfused")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    free: dict[int, float] = {}
    for r, d in dirs.items():
        rows = kernel_rows(d)
        n = Counter(x["Type"] for x in rows if int(x["Step Id"]) == key["step_ids"][0])
        assert n["TopKV2"] == nums["moe_layers"] and n["OneHot"] == nums["moe_layers"]
        assert not {"MoeGatingTopKSoftmax", "MoeInitRouting"} & set(n)
        tiny = [x for x in rows if x["Type"] in ev["operators"] and ",8" in x["Input Shapes"]]
        assert tiny and median(float(x["Duration(us)"]) for x in tiny) < 6
        # the device waits before the router kernels far longer than they run
        assert median(float(x["Wait Time(us)"]) for x in tiny) > 3 * median(
            float(x["Duration(us)"]) for x in tiny
        )
        free[r] = median(float(x["Free"]) for x in _steps(d))
    assert max(free.values()) < 1.3 * min(free.values())
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["median_free_share"] > 0.1
    assert nums["saving_us_per_step"] > 0.05 * nums["median_step_us"]
