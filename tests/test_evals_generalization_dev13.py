"""The eleventh development set of fault kinds (scenarios_dev13.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from statistics import median
from typing import Any

from _dev_files import PO, kernel_rows, rank_dirs, read_csv, trace

from advisor_chat.synth.model import double_hash

N_STEPS = 4


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _comm(d: Path) -> dict[str, Any]:
    """``{step: {op@hash: op info}}`` of the collectives in communication.json."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: {k: v for k, v in sec["collective"].items() if "@" in k} for s, sec in raw.items()}


def _md(d: Path) -> dict[str, Any]:
    return json.loads((d / "profiler_metadata.json").read_text())


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


# ---------------------------------------------------------------- detect-anomaly-on
def test_nan_checks_follow_every_backward_op_only(scenario) -> None:
    root = scenario("detect-anomaly-on")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    gaps_after: list[float] = []
    for d in list(dirs.values())[:4]:
        by_step: dict[str, list[dict[str, str]]] = defaultdict(list)
        for x in kernel_rows(d):
            by_step[x["Step Id"]].append(x)
        assert len(by_step) == N_STEPS
        for rows in by_step.values():
            types = [x["Type"] for x in rows]
            assert types.count("IsNan") == nums["isnan_per_step"]
            assert sum(types.count(t) for t in ev["op_types"]) == nums["nan_check_kernels_per_step"]
            first_bwd = next(
                i
                for i, x in enumerate(rows)
                if x["Type"] == "MatMulV2"
                and i > 0
                and rows[i - 1]["Type"] == "Add"
                and "," in x["Input Shapes"]
                and types[:i].count("FlashAttentionScore") == 4
            )
            # the forward has no check; in the backward every op is followed by IsNan, ReduceAny
            assert "IsNan" not in types[:first_bwd]
            for i, x in enumerate(rows):
                if x["Type"] != "IsNan":
                    continue
                prev, nxt = rows[i - 1], rows[i + 1]
                assert prev["Type"] not in ev["op_types"]
                assert x["Input Shapes"] == prev["Output Shapes"]
                assert nxt["Type"] == "ReduceAny" and nxt["Input Shapes"] == x["Input Shapes"]
                assert x["Output Data Types"] == ev["output_dtype"] == nxt["Output Data Types"]
                if i + 2 < len(rows) and rows[i + 2]["Type"] not in ev["op_types"]:
                    gaps_after.append(float(rows[i + 2]["Wait Time(us)"]))
        syncs = [e for e in trace(d) if e.get("name") == "AscendCL@" + ev["sync_api"]]
        assert len(syncs) == nums["host_syncs_per_step"] * N_STEPS
        items = [e for e in trace(d) if e.get("name") == ev["host_op"]]
        assert len(items) == len(syncs)
    want = nums["idle_before_backward_kernel_us_median"]
    assert abs(median(gaps_after) - want) <= 0.1 * want
    assert median(gaps_after) > 10 * nums["idle_before_forward_kernel_us_median"]
    shares = [_share(d, "Free") for d in dirs.values()]
    assert abs(median(shares) - nums["median_free_share"]) <= 0.1 * nums["median_free_share"]
    assert max(shares) - min(shares) < 0.03  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "host_stall"
    assert nums["saving_us_per_step"] > 0.15 * nums["median_step_us"]


# ---------------------------------------------------------------- timer-barrier-logging
def test_barriers_expose_the_gradient_allreduces(scenario) -> None:
    root = scenario("timer-barrier-logging")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    for d in list(dirs.values())[:4]:
        groups = {str(double_hash(n)): g for n, g in _md(d)["parallel_group_info"].items()}
        hccl = sorted(
            (e for e in trace(d) if str(e.get("name", "")).startswith("hcom_") and e["ph"] == "X"),
            key=lambda e: float(e["ts"]),
        )
        tiny = [e for e in hccl if int(e["args"]["count"]) * 2 <= 4]
        assert len(tiny) == nums["barriers_per_step"] * N_STEPS
        assert all(e["name"].startswith(ev["op_type"] + "_") for e in tiny)
        assert {e["args"]["data_type"] for e in tiny} == {"FP32"}
        # on the world group, counted per step in communication.json
        per_step = Counter()
        for step, ops in _comm(d).items():
            for name in ops:
                if name.split("@")[0] in {e["name"] for e in tiny}:
                    assert groups[name.split("@")[1]]["group_name"] == "default_group"
                    per_step[step] += 1
        assert set(per_step.values()) == {nums["barriers_per_step"]}
        # a barrier never starts before the gradient all-reduce launched before it has ended
        big = [e for e in hccl if int(e["args"]["count"]) * 2 / 1e6 > 50]
        waited = 0
        for b in tiny:
            t = float(b["ts"])
            before = [g for g in big if float(g["ts"]) < t]
            if before and float(before[-1]["ts"]) + float(before[-1]["dur"]) > t - 200:
                waited += 1
            if before:
                assert float(before[-1]["ts"]) + float(before[-1]["dur"]) <= t + 1.0
        assert waited >= 3 * N_STEPS  # the backward barriers sit right behind a gradient all-reduce
    shares = [_share(d, "Communication(Not Overlapped)") for d in dirs.values()]
    want = nums["median_comm_not_overlapped_share"]
    assert abs(median(shares) - want) <= 0.05 * want
    notov = median(
        sum(float(x["Communication(Not Overlapped)"]) for x in _steps(d)) / N_STEPS
        for d in dirs.values()
    )
    assert notov > 2 * nums["median_comm_not_overlapped_us_per_step_no_barriers"]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "exposed_communication"
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- rdma-tc-lossy-node
def test_one_node_without_the_lossless_traffic_class(scenario) -> None:
    root = scenario("rdma-tc-lossy-node")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"] == 16
    env = {r: _md(d)["ENV_VARIABLES"] for r, d in dirs.items()}
    bad = sorted(r for r, e in env.items() if e["HCCL_RDMA_TC"] != ev["node0_env"]["HCCL_RDMA_TC"])
    assert bad == ev["culprit_ranks"] == key["root_cause"]["culprit_ranks"]
    assert {r // 8 for r in bad} == {ev["culprit_node"]}
    assert all(env[r]["HCCL_RDMA_SL"] == "" and env[r]["HCCL_RDMA_TC"] == "" for r in bad)
    rdma: dict[int, float] = {}
    hccs: dict[int, float] = {}
    wait: dict[int, float] = {}
    for r, d in dirs.items():
        ops = [op for step in _comm(d).values() for op in step.values()]
        rdma[r] = median(
            float(op["Communication Bandwidth Info"]["RDMA"]["Bandwidth(GB/s)"])
            for op in ops
            if op["Communication Bandwidth Info"]["RDMA"]["Transit Size(MB)"] > 0
        )
        hccs[r] = median(
            float(op["Communication Bandwidth Info"]["HCCS"]["Bandwidth(GB/s)"]) for op in ops
        )
        wait[r] = sum(op["Communication Time Info"]["Wait Time(ms)"] for op in ops)
    good = [r for r in dirs if r not in bad]
    assert (
        abs(median(rdma[r] for r in bad) - nums["node1_send_rdma_bandwidth_gbps"])
        <= 0.05 * (nums["node1_send_rdma_bandwidth_gbps"])
    )
    assert (
        abs(median(rdma[r] for r in good) - nums["node0_send_rdma_bandwidth_gbps"])
        <= 0.05 * (nums["node0_send_rdma_bandwidth_gbps"])
    )
    assert max(rdma[r] for r in bad) < 0.5 * min(rdma[r] for r in good)
    assert min(hccs.values()) > 15.0  # HCCS normal everywhere
    # node 0 waits inside the collectives for node 1's data
    assert min(wait[r] for r in good) > 3 * max(wait[r] for r in bad)
    # the slow links go out of node 1 (communication_matrix: src-dst local ranks of each op)
    d = dirs[bad[0]]
    mx = json.loads((d / PO / "communication_matrix.json").read_text())
    slow = [
        v
        for step in mx.values()
        for ops in step["collective"].values()
        for v in ops.values()
        if v.get("Transport Type") == "RDMA"
    ]
    assert slow and max(float(v["Bandwidth(GB/s)"]) for v in slow) < 5.0
    assert key["root_cause"]["mechanism"] == "slow_link"
    assert key["root_cause"]["culprit_kind"] == "group"


# ---------------------------------------------------------------- embedding-grad-pad-rank
def test_one_rank_embedding_grad_runs_long_with_the_same_shapes(scenario) -> None:
    root = scenario("embedding-grad-pad-rank")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    eg: dict[int, list[float]] = {}
    ef: dict[int, float] = {}
    mm: dict[int, float] = {}
    shapes: set[str] = set()
    for r, d in dirs.items():
        rows = kernel_rows(d)
        g = [x for x in rows if x["Type"] == ev["op_type"]]
        assert len(g) == N_STEPS
        shapes |= {x["Input Shapes"].strip('"') for x in g}
        eg[r] = [float(x["Duration(us)"]) for x in g]
        ef[r] = median(float(x["Duration(us)"]) for x in rows if x["Type"] == "GatherV2")
        mm[r] = median(float(x["Duration(us)"]) for x in rows if x["Type"] == "MatMulV2")
    assert shapes == {ev["input_shapes"]}
    cul = max(dirs, key=lambda r: median(eg[r]))
    assert cul == ev["culprit_rank"] == key["root_cause"]["culprit_ranks"][0]
    others = [r for r in dirs if r != cul]
    assert (
        abs(median(eg[cul]) - nums["culprit_embedding_grad_us_median"])
        <= 0.02 * (nums["culprit_embedding_grad_us_median"])
    )
    ratio = median(eg[cul]) / median(x for r in others for x in eg[r])
    assert ratio > 8 and abs(ratio - nums["embedding_grad_ratio"]) <= 0.05 * ratio
    assert max(eg[cul]) > 1.2 * min(eg[cul])  # depends on the step's batch
    assert abs(ef[cul] - median(ef[r] for r in others)) < 0.05 * ef[cul]  # forward lookup normal
    assert abs(mm[cul] - median(mm[r] for r in others)) < 0.02 * mm[cul]  # the card is fine
    # the others wait for it in the collectives
    wait = {
        r: sum(
            op["Communication Time Info"]["Wait Time(ms)"]
            for step in _comm(d).values()
            for op in step.values()
        )
        for r, d in dirs.items()
    }
    assert min(wait[r] for r in others) > 3 * wait[cul]
    assert key["root_cause"]["mechanism"] == "compute_straggler"
    assert nums["saving_us_per_step"] > 0.8 * nums["culprit_embedding_grad_excess_us_per_step"]
