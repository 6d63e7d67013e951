"""The twenty-first development set of fault kinds (scenarios_dev23.py): what each kind writes.

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


def _comm(d: Path) -> dict[str, dict[str, Any]]:
    """{step key: {op name: record}} of communication.json's collective section."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v["collective"] for s, v in raw.items()}


def _wait_ms(d: Path) -> float:
    return sum(
        ops["Total Op Info"]["Communication Time Info"]["Wait Time(ms)"]
        for ops in _comm(d).values()
    )


def _free(d: Path) -> float:
    st = _steps(d)
    return sum(float(x["Free"]) for x in st) / len(st)


def _launch_us(d: Path) -> list[float]:
    """Durations of the aclnn launch calls (AscendCL@aclnn*) of trace_view.json."""
    return [
        float(e["dur"])
        for e in trace(d)
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("AscendCL@aclnn")
    ]


# ---------------------------------------------------------------- hooks-on-every-module
def test_hook_frames_run_before_every_launch_on_every_rank(scenario) -> None:
    root = scenario("hooks-on-every-module")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    free: dict[int, float] = {}
    for r, d in dirs.items():
        info = json.loads((d / f"profiler_info_{r}.json").read_text())
        assert info["config"]["common_config"]["with_stack"] is True
        evs = trace(d)
        py = Counter(
            e["name"]
            for e in evs
            if e.get("cat") == "python_function" and e["name"] in ev["frames"]
        )
        assert sum(py.values()) == ev["per_step"] * key["steps"]
        assert py[ev["frames"][0]] == nums["forward_hook_frames_per_step"] * key["steps"]
        # the launch calls are of normal length (the hooks are outside them)
        assert median(_launch_us(d)) < 15
        free[r] = _free(d)
        st = _steps(d)
        assert all(float(x["Free"]) > 0.15 * float(x["Stage"]) for x in st)
    assert max(free.values()) < 1.1 * min(free.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.15 * nums["median_step_us"]


# ---------------------------------------------------------------- grad-accum-unfused
def test_every_weight_gradient_gets_its_own_fp32_add(scenario) -> None:
    root = scenario("grad-accum-unfused")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    shapes = set(ev["shapes"])
    comp: dict[int, float] = {}
    for r, d in dirs.items():
        rows = kernel_rows(d)
        adds = [
            x
            for x in rows
            if x["Type"] == "Add" and x["Input Data Types"].strip('"') == "DT_FLOAT;DT_BF16"
        ]
        per_step = Counter(x["Step Id"] for x in adds)
        assert set(per_step.values()) == {nums["grad_adds_per_step"]}
        assert {x["Output Shapes"].strip('"') for x in adds} == shapes
        assert nums["largest_add_shape"] in shapes
        stat = {x["OP Type"]: x for x in read_csv(d, "op_statistic.csv")}
        # the residual Adds of the forward are bf16; the gradient Adds are more than half of them
        assert int(stat["Add"]["Count"]) == sum(1 for x in rows if x["Type"] == "Add")
        assert 2 * len(adds) > int(stat["Add"]["Count"])
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["distributed_args"]["gradient_accumulation_fusion"] is False
        st = _steps(d)
        comp[r] = sum(float(x["Computing"]) for x in st) / len(st)
    assert max(comp.values()) < 1.03 * min(comp.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["grad_adds_per_step"] == 6 * 4 * nums["micro_batches_per_step"]
    assert abs(nums["saving_us_per_step"] - nums["grad_add_us_per_step"]) < (
        0.05 * nums["grad_add_us_per_step"]
    )


# ---------------------------------------------------------------- moe-ep-cross-node
def test_cross_node_ep_groups_send_tokens_over_rdma(scenario) -> None:
    root = scenario("moe-ep-cross-node")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    a2a: dict[int, float] = {}
    wait: dict[int, float] = {}
    for r, d in dirs.items():
        md = json.loads((d / "profiler_metadata.json").read_text())
        ep = [g for g in md["parallel_group_info"].values() if g["group_name"] == "ep"]
        assert len(ep) == 1
        nodes = {x // 8 for x in ep[0]["global_ranks"]}
        assert (len(nodes) > 1) == (r in bad)
        rdma = 0.0
        el: list[float] = []
        for ops in _comm(d).values():
            for name, v in ops.items():
                if name.startswith(ev["collective"]):
                    rdma += v["Communication Bandwidth Info"]["RDMA"]["Transit Size(MB)"]
                    el.append(v["Communication Time Info"]["Elapse Time(ms)"])
        assert len(el) == nums["alltoallv_per_step"] * key["steps"]
        assert (rdma > 0) == (r in bad)
        a2a[r] = median(el)
        wait[r] = _wait_ms(d)
    good = [r for r in dirs if r not in bad]
    assert min(a2a[r] for r in bad) > 1.25 * max(a2a[r] for r in good)
    assert min(wait[r] for r in good) > 1.5 * max(wait[r] for r in bad)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert set(rc["victim_ranks"]) == set(good)
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- cpu-powersave-node
def test_one_node_launches_slowly_and_steadily(scenario) -> None:
    root = scenario("cpu-powersave-node")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    api: dict[int, float] = {}
    p99: dict[int, float] = {}
    free: dict[int, list[float]] = {}
    wait: dict[int, float] = {}
    kern: dict[int, float] = {}
    for r, d in dirs.items():
        la = sorted(_launch_us(d))
        api[r] = median(la)
        p99[r] = la[int(0.99 * (len(la) - 1))]
        free[r] = [float(x["Free"]) for x in _steps(d)]
        wait[r] = _wait_ms(d)
        kern[r] = sum(float(x["Duration(us)"]) for x in kernel_rows(d))
    good = [r for r in dirs if r not in bad]
    assert min(api[r] for r in bad) > 2 * max(api[r] for r in good)
    # steady: no outlier launches, the same Free every step
    assert max(p99[r] / api[r] for r in bad) < 1.5
    for r in bad:
        assert max(free[r]) < 1.1 * min(free[r])
    assert min(median(free[r]) for r in bad) > 2 * max(median(free[r]) for r in good)
    assert min(wait[r] for r in good) > 3 * max(wait[r] for r in bad)
    assert max(kern.values()) < 1.03 * min(kern.values())  # the kernels are the same everywhere
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert not set(rc["victim_ranks"]) & bad
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]
