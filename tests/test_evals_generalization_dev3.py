"""The third generalization development set: 5 more fault kinds (scenarios_dev3.py) and questions.

The set's shape and references: tests/test_evals_dev_sets.py.

- The planted fault is in the written files (read with csv/json, independently of ingest).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from statistics import median

import pytest
from _dev_files import PO
from _dev_files import flows_us as _flows_us
from _dev_files import kernel_rows as _kernel_rows
from _dev_files import rank_dirs as _rank_dirs
from _dev_files import read_csv as _csv

# ---------------------------------------------------------------- the fault is in the files


def _hccl_rows(d: Path) -> list[dict[str, str]]:
    return [x for x in _csv(d, "kernel_details.csv") if x["Accelerator Core"] == "HCCL"]


def _device_gaps(d: Path) -> list[tuple[dict[str, str], float]]:
    """(row, device idle before it in µs) for every device task but each step's first."""
    by_step: dict[str, list[dict[str, str]]] = {}
    for x in _csv(d, "kernel_details.csv"):
        by_step.setdefault(x["Step Id"], []).append(x)
    out = []
    for rows in by_step.values():
        rows.sort(key=lambda x: float(x["Start Time(us)"].strip()))
        end = None
        for x in rows:
            s0 = float(x["Start Time(us)"].strip())
            if end is not None:
                out.append((x, s0 - end))
            e0 = s0 + float(x["Duration(us)"])
            end = e0 if end is None else max(end, e0)
    return out


def _share(d: Path, column: str) -> float:
    st = _csv(d, "step_trace_time.csv")
    return sum(float(x[column]) for x in st) / sum(float(x["Stage"]) for x in st)


def test_zero3_gathers_dominate_every_rank_with_normal_links(scenario) -> None:
    root = scenario("zero3-param-gather")
    key = json.loads((root / "answer_key.json").read_text())
    ev = key["evidence"]
    shares = []
    for _r, d in sorted(_rank_dirs(root).items()):
        types = Counter(x["Type"] for x in _hccl_rows(d))
        assert types["hcom_allGather_"] == ev["allgather_ops_per_step"] * key["steps"]
        assert types["hcom_reduceScatter_"] == ev["reducescatter_ops_per_step"] * key["steps"]
        shares.append(_share(d, "Communication(Not Overlapped)"))
    assert min(shares) > 0.6 and max(shares) - min(shares) < 0.01
    assert median(shares) == pytest.approx(ev["comm_not_overlapped_share"], abs=0.01)
    # the links run at their normal bandwidth (no slow link, no congestion)
    mj = json.loads((_rank_dirs(root)[0] / PO / "communication_matrix.json").read_text())
    rdma = [
        v["Bandwidth(GB/s)"]
        for sv in mj.values()
        for name, links in sv["collective"].items()
        if name.startswith("allgather-total@")
        for v in links.values()
        if v["Transport Type"] == "RDMA"
    ]
    assert rdma and min(rdma) == pytest.approx(ev["rdma_bandwidth_gbps"], rel=0.08)


def test_offload_every_rank_idles_before_the_parameter_gather(scenario) -> None:
    root = scenario("cpu-offload-optimizer")
    key = json.loads((root / "answer_key.json").read_text())
    ev = key["evidence"]
    gaps = []
    for _r, d in sorted(_rank_dirs(root).items()):
        rows = _csv(d, "kernel_details.csv")
        assert not any(x["Type"].startswith("Foreach") for x in rows)
        by_step: dict[str, list[dict[str, str]]] = {}
        for x in rows:
            by_step.setdefault(x["Step Id"], []).append(x)
        for srows in by_step.values():
            srows.sort(key=lambda x: float(x["Start Time(us)"].strip()))
            i = next(i for i, x in enumerate(srows) if x["Type"] == ev["idle_before_op"])
            end = max(
                float(x["Start Time(us)"].strip()) + float(x["Duration(us)"]) for x in srows[:i]
            )
            gaps.append(float(srows[i]["Start Time(us)"].strip()) - end)
    assert len(gaps) == key["ranks"] * key["steps"]
    assert min(gaps) == pytest.approx(ev["idle_us"], rel=0.02)
    assert max(gaps) == pytest.approx(ev["idle_us"], rel=0.02)


def test_empty_cache_stalls_before_forward_ops_on_every_rank(scenario) -> None:
    root = scenario("empty-cache-every-step")
    key = json.loads((root / "answer_key.json").read_text())
    ev = key["evidence"]
    for _r, d in sorted(_rank_dirs(root).items()):
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["ENV_VARIABLES"]["ASCEND_LAUNCH_BLOCKING"] == ""
        assert md["ENV_VARIABLES"]["PYTORCH_NPU_ALLOC_CONF"] == ""
        big = [(x, g) for x, g in _device_gaps(d) if g > 1000]
        assert len(big) == ev["stalls_per_step"] * key["steps"]
        assert {x["Type"] for x, _ in big} == set(ev["before_op_types"])
        # forward only: no input-gradient / weight-gradient kernel waits
        assert not any("Grad" in x["Type"] for x, _ in big)
        assert median(g for _, g in big) == pytest.approx(ev["stall_gap_us"], rel=0.1)
        # the host is otherwise ahead of the device (not launch-blocking)
        assert median(_flows_us(d)) > 1000


def test_recompute_first_stage_runs_the_forward_twice(scenario) -> None:
    root = scenario("recompute-one-stage")
    key = json.loads((root / "answer_key.json").read_text())
    ev = key["evidence"]
    nums = key["expected_numbers"]
    dirs = _rank_dirs(root)
    s0, s1 = nums["stages"]
    fa = {
        q: Counter(x["Type"] for x in _kernel_rows(dirs[q]))[ev["op_type"]] for q in (s0[0], s1[0])
    }
    assert fa[s0[0]] == nums["stage0_flash_attention_per_step"] * key["steps"]
    assert fa[s1[0]] == nums["stage1_flash_attention_per_step"] * key["steps"]
    assert fa[s0[0]] == 2 * fa[s1[0]]
    bub = _csv(dirs[s1[0]], "step_trace_time.csv")
    per_step = sum(float(x["Bubble"]) for x in bub) / key["steps"]
    assert per_step == pytest.approx(ev["stage1_bubble_us_per_step"], rel=0.1)
    assert all(float(x["Bubble"]) == 0 for x in _csv(dirs[s0[0]], "step_trace_time.csv"))


def test_ema_kernels_on_rank0_only(scenario) -> None:
    root = scenario("rank0-ema-update")
    key = json.loads((root / "answer_key.json").read_text())
    ev = key["evidence"]
    dirs = _rank_dirs(root)
    r = ev["only_on_rank"]
    assert key["root_cause"]["culprit_ranks"] == [r]
    for q, d in sorted(dirs.items()):
        n = sum(1 for x in _kernel_rows(d) if x["Type"] == ev["operator"])
        assert n == (ev["extra_kernels_per_step"] * key["steps"] if q == r else 0), q
    other = key["root_cause"]["not_slow_ranks"][0]

    def common_us(q: int) -> float:
        return sum(
            float(x["Duration(us)"])
            for x in _kernel_rows(dirs[q])
            if x["Type"] not in (ev["operator"], "Muls")
        )

    assert common_us(r) == pytest.approx(common_us(other), rel=0.02)

    def wait_ms(q: int) -> float:
        cj = json.loads((dirs[q] / PO / "communication.json").read_text())
        return sum(
            v["Communication Time Info"]["Wait Time(ms)"]
            for sv in cj.values()
            for name, v in sv["collective"].items()
            if name != "Total Op Info"
        )

    assert wait_ms(other) > wait_ms(r) + ev["extra_us_per_step"] / 1000 * key["steps"] * 0.8
