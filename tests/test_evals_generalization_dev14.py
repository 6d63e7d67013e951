"""The twelfth development set of fault kinds (scenarios_dev14.py): what each kind writes.

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

N_STEPS = 4


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _comm_ops(d: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(op name, op info)`` of every collective of every step in communication.json."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return [
        (k.split("@")[0], v)
        for sec in raw.values()
        for k, v in sec["collective"].items()
        if "@" in k
    ]


def _wait_ms(d: Path) -> float:
    return sum(op["Communication Time Info"]["Wait Time(ms)"] for _, op in _comm_ops(d))


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


# ---------------------------------------------------------------- pageable-h2d-copy
def test_blocking_pageable_copies_before_each_micro_batch(scenario) -> None:
    root = scenario("pageable-h2d-copy")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    copies: list[float] = []
    idle: list[float] = []
    for d in list(dirs.values())[:4]:
        events = trace(d)
        memcpy = [e for e in events if e.get("name") == "AscendCL@" + ev["api"]]
        assert len(memcpy) == nums["copies_per_step"] * N_STEPS
        copies += [float(e["dur"]) for e in memcpy]
        copy_ops = [e for e in events if e.get("name") == "aten::copy_"]
        assert len(copy_ops) == len(memcpy)
        assert all(ev["input_dims"] in e["args"]["Input Dims"] for e in copy_ops)
        # each memcpy sits inside its aten::copy_ and ends before the next kernel launch
        for m, c in zip(
            sorted(memcpy, key=lambda e: float(e["ts"])),
            sorted(copy_ops, key=lambda e: float(e["ts"])),
            strict=True,
        ):
            assert float(c["ts"]) <= float(m["ts"])
            assert float(m["ts"]) + float(m["dur"]) <= float(c["ts"]) + float(c["dur"])
        # the copy between the micro-batches first waits for the device (stream synchronize)
        syncs = [e for e in events if e.get("name") == "AscendCL@" + ev["sync_api"]]
        assert len(syncs) == (nums["copies_per_step"] - 1) * N_STEPS
        # the device idles before the second micro-batch (its first RmsNorm right after the first
        # micro-batch's last RmsNormGrad): the longest kernel wait of the step
        for rows in _by_step(d).values():
            starts = [
                float(x["Wait Time(us)"])
                for i, x in enumerate(rows)
                if i > 0 and x["Type"] == "RmsNorm" and rows[i - 1]["Type"] == "RmsNormGrad"
            ]
            assert len(starts) == nums["micro_batches_per_step"] - 1
            assert starts[0] == max(float(x["Wait Time(us)"]) for x in rows)
            idle.append(starts[0])
    want = nums["copy_us_median"]
    assert abs(median(copies) - want) <= 0.03 * want
    assert (
        abs(nums["copy_mb"] / (median(copies) / 1000) - nums["pageable_copy_bandwidth_gbps"]) < 0.2
    )
    want = nums["idle_before_micro_batch_us_median"]
    assert abs(median(idle) - want) <= 0.1 * want
    shares = [_share(d, "Free") for d in dirs.values()]
    assert abs(median(shares) - nums["median_free_share"]) <= 0.05 * nums["median_free_share"]
    assert max(shares) - min(shares) < 0.05  # every rank alike (the copies' own jitter)
    # the first micro-batch's copy: the device idles at the step start (Preparing)
    prep = [float(x["Preparing"]) for d in dirs.values() for x in _steps(d)]
    assert min(prep) > 0.8 * nums["copy_us_median"]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "host_stall"
    assert nums["saving_us_per_step"] > 0.8 * nums["copy_idle_us_per_step"]


# ---------------------------------------------------------------- hccl-deterministic-on
def test_reduction_collectives_slow_on_every_link_gathers_normal(scenario) -> None:
    root = scenario("hccl-deterministic-on")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    red: dict[str, list[float]] = {"HCCS": [], "RDMA": []}
    gat: dict[str, list[float]] = {"HCCS": [], "RDMA": []}
    for d in dirs.values():
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["hccl_env"][ev["env_var"]] == ev["env_value"]
        ops = _comm_ops(d)
        per_type = Counter(name.rsplit("_", 3)[0] for name, _ in ops)
        assert sum(per_type[t] for t in ev["slow_op_types"]) == (
            nums["reduce_collectives_per_step"] * N_STEPS
        )
        for name, op in ops:
            kind = name.rsplit("_", 3)[0]
            bw = op["Communication Bandwidth Info"]
            for t in ("HCCS", "RDMA"):
                if bw[t]["Transit Size(MB)"] > 0:
                    (red if kind in ev["slow_op_types"] else gat)[t].append(
                        float(bw[t]["Bandwidth(GB/s)"])
                    )
                    # one transfer per link: no loops through the buffer, no small packets
                    assert sum(c for c, _ in bw[t]["Size Distribution"].values()) <= 8
    for t in ("HCCS", "RDMA"):
        assert max(red[t]) < 0.6 * min(gat[t]), t  # every link, both transports
    ratio = median(red["HCCS"]) / median(gat["HCCS"])
    assert abs(ratio - nums["reduce_to_gather_bandwidth_ratio"]) <= 0.03
    assert abs(median(red["HCCS"]) - nums["reduce_hccs_bandwidth_gbps"]) <= 0.05 * median(
        red["HCCS"]
    )
    assert abs(median(gat["RDMA"]) - nums["gather_rdma_bandwidth_gbps"]) <= 0.05 * median(
        gat["RDMA"]
    )
    shares = [_share(d, "Communication(Not Overlapped)") for d in dirs.values()]
    want = nums["median_comm_not_overlapped_share"]
    assert abs(median(shares) - want) <= 0.05 * want
    assert max(shares) - min(shares) < 0.03  # every rank alike, nobody late
    notov = median(
        sum(float(x["Communication(Not Overlapped)"]) for x in _steps(d)) / N_STEPS
        for d in dirs.values()
    )
    assert notov > 2 * nums["median_comm_not_overlapped_us_per_step_nondeterministic"]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "exposed_communication"
    assert nums["saving_us_per_step"] > 0.15 * nums["median_step_us"]


# ---------------------------------------------------------------- old-cann-node-unfused
def test_one_node_on_an_older_image_runs_the_pytorch_fallbacks(scenario) -> None:
    root = scenario("old-cann-node-unfused")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"] == 16
    info = {r: json.loads((d / f"profiler_info_{r}.json").read_text()) for r, d in dirs.items()}
    old = sorted(r for r, i in info.items() if i["cann_version"] == ev["culprit_cann_version"])
    assert old == ev["culprit_ranks"] == key["root_cause"]["culprit_ranks"]
    assert {r // 8 for r in old} == {ev["culprit_node"]}
    assert {info[r]["torch_npu_version"] for r in old} == {ev["culprit_torch_npu_version"]}
    rest = [r for r in dirs if r not in old]
    assert {info[r]["cann_version"] for r in rest} == {ev["others_cann_version"]}
    counts: dict[int, int] = {}
    mm: dict[int, float] = {}
    for r, d in dirs.items():
        steps = _by_step(d)
        assert len(steps) == N_STEPS
        types = Counter(x["Type"] for x in next(iter(steps.values())))
        counts[r] = sum(types.values())
        fused = set(ev["fused_op_types_missing_on_culprit"])
        eager = set(ev["eager_op_types_on_culprit"])
        if r in old:
            assert not fused & set(types) and eager <= set(types)
        else:
            assert fused <= set(types) and not eager & set(types)
        mm[r] = median(float(x["Duration(us)"]) for x in kernel_rows(d) if x["Type"] == "MatMulV2")
    assert {counts[r] for r in old} == {nums["culprit_kernels_per_step"]}
    assert {counts[r] for r in rest} == {nums["others_kernels_per_step"]}
    assert counts[old[0]] > 2 * counts[rest[0]]
    assert max(mm.values()) < 1.02 * min(mm.values())  # the cards are fine
    comp_old = median(_computing(dirs[r]) for r in old)
    comp_rest = median(_computing(dirs[r]) for r in rest)
    assert abs(comp_old - nums["culprit_computing_us_per_step"]) <= 0.02 * comp_old
    assert comp_old > 1.1 * comp_rest
    wait = {r: _wait_ms(d) for r, d in dirs.items()}
    assert min(wait[r] for r in rest) > 3 * max(wait[r] for r in old)  # node 0 waits
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and rc["mechanism"] == "slow_group"
    assert nums["saving_us_per_step"] > 0.8 * nums["culprit_computing_excess_us_per_step"]


# ---------------------------------------------------------------- uneven-microbatch-split
def test_some_ranks_run_one_more_micro_batch(scenario) -> None:
    root = scenario("uneven-microbatch-split")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    tasks: dict[int, set[int]] = {}
    fa: dict[int, set[int]] = {}
    mm: dict[int, float] = {}
    shapes: set[str] = set()
    for r, d in dirs.items():
        steps = _by_step(d)
        assert len(steps) == N_STEPS
        tasks[r] = {len(rows) for rows in steps.values()}
        fa[r] = {sum(x["Type"] == "FlashAttentionScore" for x in rows) for rows in steps.values()}
        rows = kernel_rows(d)
        mm[r] = median(float(x["Duration(us)"]) for x in rows if x["Type"] == "MatMulV2")
        shapes |= {x["Input Shapes"] for x in rows if x["Type"] == "FlashAttentionScore"}
    more = sorted(r for r in dirs if max(tasks[r]) > min(max(t) for t in tasks.values()))
    assert more == ev["culprit_ranks"] == key["root_cause"]["culprit_ranks"]
    rest = [r for r in dirs if r not in more]
    assert {n for r in more for n in tasks[r]} == {nums["culprit_kernels_per_step"]}
    assert {n for r in rest for n in tasks[r]} == {nums["others_kernels_per_step"]}
    assert {n for r in more for n in fa[r]} == {nums["culprit_flash_attention_per_step"]}
    assert {n for r in rest for n in fa[r]} == {nums["others_flash_attention_per_step"]}
    assert (
        2 * nums["culprit_flash_attention_per_step"] == 3 * nums["others_flash_attention_per_step"]
    )
    assert len(shapes) == 1  # the same micro-batch shapes everywhere
    assert max(mm.values()) < 1.02 * min(mm.values())  # every kernel as fast
    comp_more = median(_computing(dirs[r]) for r in more)
    comp_rest = median(_computing(dirs[r]) for r in rest)
    assert abs(comp_more / comp_rest - nums["computing_ratio"]) <= 0.03
    wait = {r: _wait_ms(d) for r, d in dirs.items()}
    assert min(wait[r] for r in rest) > 3 * max(wait[r] for r in more)
    want = nums["others_wait_us_per_step_median"] / 1000
    assert abs(median(wait[r] for r in rest) / N_STEPS - want) <= 0.05 * want
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "ranks" and rc["mechanism"] == "compute_straggler"
    assert set(rc["victim_ranks"]) == set(rest)
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]
