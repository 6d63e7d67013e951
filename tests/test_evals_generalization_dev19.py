"""The seventeenth development set of fault kinds (scenarios_dev19.py): what each kind writes.

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


def _steps(d: Path) -> list[dict[str, str]]:
    return read_csv(d, "step_trace_time.csv")


def _step_us(x: dict[str, str]) -> float:
    return float(x["Computing"]) + float(x["Communication(Not Overlapped)"]) + float(x["Free"])


def _mean(d: Path, column: str) -> float:
    rows = _steps(d)
    return sum(float(x[column]) for x in rows) / len(rows)


def _comm(d: Path) -> dict[str, dict[str, Any]]:
    """{step key: {op name: record}} of communication.json's collective section."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v["collective"] for s, v in raw.items()}


def _wait_ms(d: Path) -> float:
    return sum(
        ops["Total Op Info"]["Communication Time Info"]["Wait Time(ms)"]
        for ops in _comm(d).values()
    )


def _matmul_median(dirs: dict[int, Path], op: str = "MatMulV2") -> dict[int, float]:
    return {
        r: median(float(x["Duration(us)"]) for x in kernel_rows(d) if x["Type"] == op)
        for r, d in dirs.items()
    }


# ---------------------------------------------------------------- lora-unfused-adapters
def test_lora_adapters_run_as_unfused_rank16_chains(scenario) -> None:
    root = scenario("lora-unfused-adapters")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    r16 = f",{ev['lora_rank']}"
    per_rank: dict[int, float] = {}
    for r, d in dirs.items():
        rows = kernel_rows(d)
        lora_mm = [
            x
            for x in rows
            if x["Type"] == "MatMulV2"
            and any(
                p.endswith(r16) or p.startswith(f"{ev['lora_rank']},")
                for p in x["Input Shapes"].strip('"').split(";")
            )
        ]
        assert len(lora_mm) == nums["lora_matmuls_per_step"] * key["steps"]
        # the frozen base weights have no weight-gradient MatMul: 4 base MatMuls fwd, 4 dx bwd
        big = [x for x in rows if x["Type"] == "MatMulV2" and x not in lora_mm]
        assert len(big) == 2 * 4 * 4 * key["steps"]
        n = Counter(x["Type"] for x in rows)
        assert n["Muls"] == nums["lora_elementwise_per_step"] // 2 * key["steps"]
        # the device idles before the adapter kernels (Wait Time of the rows)
        waits = [float(x["Wait Time(us)"]) for x in lora_mm]
        others = [float(x["Wait Time(us)"]) for x in big]
        assert median(waits) > 2 * median(others)
        per_rank[r] = _mean(d, "Computing")
    assert max(per_rank.values()) < 1.03 * min(per_rank.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["lora_kernels_per_step"] == 10 * nums["adapters"]
    assert 0 < nums["saving_us_per_step"] < nums["lora_total_us_per_step"]
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- moe-capacity-padding
def test_moe_buffers_are_padded_to_capacity_on_every_rank(scenario) -> None:
    root = scenario("moe-capacity-padding")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    size: dict[int, float] = {}
    for r, d in dirs.items():
        rows = kernel_rows(d)
        gmm = [x for x in rows if x["Type"] == ev["expert_operator"]]
        assert gmm
        lead = {int(x["Input Shapes"].strip('"').split(";")[0].split(",")[0]) for x in gmm}
        # forward / dx GroupedMatmuls run on the padded rows (dw ones have them as the 2nd dim)
        assert ev["expert_rows"] in lead and ev["expert_rows_routed"] not in lead
        tot = 0.0
        n = 0
        for ops in _comm(d).values():
            for name, v in ops.items():
                if name.startswith(ev["collective"]):
                    bw = v["Communication Bandwidth Info"]
                    tot += bw["HCCS"]["Transit Size(MB)"] + bw["RDMA"]["Transit Size(MB)"]
                    n += 1
        assert n == nums["alltoallv_per_step"] * key["steps"]
        size[r] = tot / key["steps"]
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["distributed_args"]["moe_expert_capacity_factor"] == ev["capacity_factor"]
    # balanced: every rank moves the same bytes
    assert max(size.values()) < 1.01 * min(size.values())
    assert abs(median(size.values()) - nums["alltoallv_wire_mb_per_step"]) < 0.01 * median(
        size.values()
    )
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["alltoallv_us_per_step"] > 2.5 * nums["alltoallv_us_per_step_unpadded"]
    assert nums["saving_us_per_step"] > 0.3 * nums["median_step_us"]


# ---------------------------------------------------------------- numa-binding-node
def test_one_node_launches_slowly_and_jitters(scenario) -> None:
    root = scenario("numa-binding-node")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    api: dict[int, float] = {}
    free: dict[int, float] = {}
    cv: dict[int, float] = {}
    wait: dict[int, float] = {}
    for r, d in dirs.items():
        calls = [
            float(e["dur"])
            for e in trace(d)
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("AscendCL@aclnn")
        ]
        api[r] = median(calls)
        fr = [float(x["Free"]) for x in _steps(d)]
        free[r] = sum(fr) / len(fr)
        cv[r] = (sum((f - free[r]) ** 2 for f in fr) / len(fr)) ** 0.5 / free[r]
        wait[r] = _wait_ms(d)
    good = [r for r in dirs if r not in bad]
    assert min(api[r] for r in bad) > 2.5 * max(api[r] for r in good)
    assert abs(median(api[r] for r in bad) - nums["culprit_launch_api_us_median"]) < 1.0
    assert min(free[r] for r in bad) > 3 * max(free[r] for r in good)
    assert min(wait[r] for r in good) > 1.5 * max(wait[r] for r in bad)
    assert median(cv[r] for r in bad) > 0.05
    mm = _matmul_median(dirs)
    assert max(mm.values()) < 1.02 * min(mm.values())
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert not set(rc["victim_ranks"]) & bad
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- nfs-metrics-log-rank
def test_last_rank_fsyncs_metrics_before_every_step(scenario) -> None:
    root = scenario("nfs-metrics-log-rank")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    culprit = ev["culprit_rank"]
    prep: dict[int, float] = {}
    for r, d in dirs.items():
        frames = [e for e in trace(d) if e.get("cat") == "python_function"]
        if r == culprit:
            names = Counter(e["name"] for e in frames)
            assert all(names[f] == key["steps"] for f in ev["python_frames"])
            sync = [float(e["dur"]) for e in frames if e["name"] == ev["sync_call"]]
            assert len(sync) == key["steps"]
        else:
            assert not frames
        prep[r] = median(float(x["Preparing"]) for x in _steps(d))
        info = json.loads(next(d.glob("profiler_info_*.json")).read_text())
        assert info["config"]["common_config"]["with_stack"] is True
    others = [r for r in dirs if r != culprit]
    assert prep[culprit] > 100 * max(prep[r] for r in others)
    assert abs(prep[culprit] - nums["culprit_preparing_us_median"]) < 0.01 * prep[culprit]
    assert min(_wait_ms(dirs[r]) for r in others) > 3 * _wait_ms(dirs[culprit])
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "rank" and rc["culprit_ranks"] == [culprit]
    assert len(set(nums["fsync_us_per_step"])) == key["steps"]  # a different length each step
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]
