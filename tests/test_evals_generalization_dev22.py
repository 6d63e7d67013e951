"""The twentieth development set of fault kinds (scenarios_dev22.py): what each kind writes.

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


def _comm(d: Path) -> dict[str, dict[str, Any]]:
    """{step key: {op name: record}} of communication.json's collective section."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v["collective"] for s, v in raw.items()}


def _p2p(d: Path) -> dict[str, dict[str, Any]]:
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v.get("p2p", {}) for s, v in raw.items()}


def _wait_ms(d: Path) -> float:
    return sum(
        ops["Total Op Info"]["Communication Time Info"]["Wait Time(ms)"]
        for ops in _comm(d).values()
    )


def _transit_mb(v: dict[str, Any]) -> float:
    bw = v["Communication Bandwidth Info"]
    return bw["HCCS"]["Transit Size(MB)"] + bw["RDMA"]["Transit Size(MB)"]


# ---------------------------------------------------------------- distopt-param-gather-exposed
def test_param_allgathers_open_every_step(scenario) -> None:
    root = scenario("distopt-param-gather-exposed")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    for d in dirs.values():
        for ops in _comm(d).values():
            ag = [v for n, v in ops.items() if n.startswith("hcom_allGather_")]
            big = [v for v in ag if _transit_mb(v) > 50]
            assert len(big) == nums["param_allgathers_per_step"]
            rs = [n for n in ops if n.startswith("hcom_reduceScatter_")]
            assert len(rs) == nums["grad_reduce_scatters_per_step"]
        # each step's first device rows are the gathers (HCCL), then the first forward kernel
        rows = read_csv(d, "kernel_details.csv")
        by_step: dict[str, list[str]] = {}
        for x in rows:
            by_step.setdefault(x["Step Id"], []).append(x["Type"])
        for types in by_step.values():
            assert types[:4] == [ev["collective"]] * 4 and types[4] == "RmsNorm"
        md = json.loads((d / "profiler_metadata.json").read_text())["distributed_args"]
        assert md["use_distributed_optimizer"] is True and md["overlap_param_gather"] is False
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["param_allgather_share_of_step"] > 0.15
    assert (
        0.1 * nums["median_step_us"]
        < nums["saving_us_per_step"]
        < nums["param_allgather_us_per_step"]
    )


# ---------------------------------------------------------------- concat-in-loop
def test_concat_in_a_loop_on_every_rank(scenario) -> None:
    root = scenario("concat-in-loop")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    free: dict[int, float] = {}
    for r, d in dirs.items():
        rows = [x for x in kernel_rows(d) if x["Type"] == ev["operator"]]
        per_step = Counter(x["Step Id"] for x in rows)
        assert set(per_step.values()) == {nums["concat_kernels_per_step"]}
        firsts = [x["Input Shapes"].strip('"').split(";")[0] for x in rows]
        assert firsts[0] == ev["first_input_shape"]
        assert ev["last_input_shapes"] in {x["Input Shapes"].strip('"') for x in rows}
        assert max(float(x["Duration(us)"]) for x in rows) < 50
        stat = {x["OP Type"]: x for x in read_csv(d, "op_statistic.csv")}
        assert int(stat["ConcatD"]["Count"]) == nums["concat_kernels_per_step"] * key["steps"]
        st = read_csv(d, "step_trace_time.csv")
        free[r] = sum(float(x["Free"]) for x in st) / len(st)
    assert max(free.values()) < 1.2 * min(free.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["concat_idle_us_per_step"] > nums["concat_device_us_per_step"]
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- lower-sku-node
def test_one_node_has_fewer_cores(scenario) -> None:
    root = scenario("lower-sku-node")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    mm: dict[int, float] = {}
    wait: dict[int, float] = {}
    for r, d in dirs.items():
        infos = list(d.glob("PROF_*/device_*/info.json.*"))
        assert len(infos) == 1
        di = json.loads(infos[0].read_text())["DeviceInfo"][0]
        assert di["ai_core_num"] == (ev["ai_core_num"] if r in bad else ev["ai_core_num_others"])
        assert di["aiv_num"] == (ev["aiv_num"] if r in bad else ev["aiv_num_others"])
        assert di["aic_frequency"] == "1800"
        rows = kernel_rows(d)
        bds = {int(x["Block Dim"]) for x in rows if x["Type"] == "MatMulV2"}
        assert bds == {ev["block_dim"] if r in bad else ev["block_dim_others"]}
        mm[r] = median(float(x["Duration(us)"]) for x in rows if x["Type"] == "MatMulV2")
        wait[r] = _wait_ms(d)
        # no clock change (not a power cap)
        assert {e["args"]["MHz"] for e in trace(d) if e.get("name") == "AI Core Freq"} <= {1800.0}
    good = [r for r in dirs if r not in bad]
    assert min(mm[r] for r in bad) > 1.15 * max(mm[r] for r in good)
    assert min(wait[r] for r in good) > 3 * max(wait[r] for r in bad)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert not set(rc["victim_ranks"]) & bad
    assert nums["saving_us_per_step"] > 0.08 * nums["median_step_us"]


# ---------------------------------------------------------------- pp-p2p-degraded-link
def test_one_pipeline_pair_link_is_slow(scenario) -> None:
    root = scenario("pp-p2p-degraded-link")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    a, b = ev["link"]
    bw: dict[int, list[float]] = {}
    bubble: dict[int, float] = {}
    for r, d in dirs.items():
        vals = []
        for ops in _p2p(d).values():
            for n, v in ops.items():
                if n.startswith(("hcom_send_", "hcom_receive_")):
                    rd = v["Communication Bandwidth Info"]["RDMA"]
                    if rd["Transit Size(MB)"] > 0:
                        vals.append(rd["Bandwidth(GB/s)"])
        assert vals
        bw[r] = vals
        st = read_csv(d, "step_trace_time.csv")
        bubble[r] = sum(float(x["Bubble"]) for x in st) / len(st)
    ends = {a, b}
    others = [r for r in dirs if r not in ends]
    slow = max(max(bw[r]) for r in ends)
    assert slow < 0.4 * min(min(bw[r]) for r in others)
    assert min(bubble[r] for r in ends) > 2 * max(bubble[r] for r in others)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "link" and rc["culprit_link"] == [a, b]
    assert rc["culprit_transport"] == "RDMA"
    assert not set(rc["victim_ranks"]) & ends
    assert abs(nums["bandwidth_ratio"] - 0.3) < 0.05
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]
