"""The twenty-fifth development set of fault kinds (scenarios_dev27.py): what each kind writes.

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


def _bw(v: dict[str, Any], transport: str) -> float:
    return v["Communication Bandwidth Info"][transport]["Transit Size(MB)"]


# ---------------------------------------------------------------- node-clock-offset
def test_one_node_clock_is_offset_but_nothing_is_slow(scenario) -> None:
    root = scenario("node-clock-offset")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["offset_ranks"])
    off_us = ev["clock_offset_us"]
    starts: dict[str, dict[int, float]] = {}
    ends: dict[str, dict[int, float]] = {}
    wait: dict[int, float] = {}
    comp: dict[int, float] = {}
    step0: dict[int, float] = {}
    for r, d in dirs.items():
        for s, ops in _comm(d).items():
            for n, v in ops.items():
                if n == "Total Op Info":
                    continue
                t = v["Communication Time Info"]
                op = f"{s}/{n.split('@')[0]}"
                starts.setdefault(op, {})[r] = t["Start Timestamp(us)"]
                ends.setdefault(op, {})[r] = t["Start Timestamp(us)"] + 1000 * t["Elapse Time(ms)"]
        wait[r] = _wait_ms(d)
        st = _steps(d)
        comp[r] = sum(float(x["Computing"]) for x in st) / len(st)
        step0[r] = min(
            float(e["ts"]) for e in trace(d) if str(e.get("name", "")).startswith("ProfilerStep#")
        )
    good = [r for r in dirs if r not in bad]
    assert len(starts) == key["steps"] * nums["collectives_per_step"]
    for op in ends:
        # a collective ends at the same moment on every rank: here node 1 is off by a constant
        gap = median(ends[op][r] for r in bad) - median(ends[op][r] for r in good)
        assert abs(gap - off_us) < 1.0, op
        late = median(starts[op][r] for r in bad) - median(starts[op][r] for r in good)
        assert late > 0.8 * off_us
    # its step starts are shifted too
    assert abs(median(step0[r] for r in bad) - median(step0[r] for r in good) - off_us) < 1.0
    # ... while the collectives' own wait figures and the breakdown are the same on both nodes
    w_bad = sum(wait[r] for r in bad) / len(bad)
    w_good = sum(wait[r] for r in good) / len(good)
    assert abs(w_bad - w_good) < 0.2 * w_good
    assert 1000 * w_good / key["steps"] < 0.6 * off_us  # node 0 does not wait for node 1
    assert max(comp.values()) < 1.02 * min(comp.values())
    rc = key["root_cause"]
    assert rc["mechanism"] == "no_culprit" and rc["culprit_ranks"] == []
    assert set(rc["not_slow_ranks"]) <= bad
    assert nums["saving_us_per_step"] == 0.0
    assert abs(nums["true_arrival_gap_us_median"]) < 100


# ---------------------------------------------------------------- tp-no-sequence-parallel
def test_tp_all_reduces_the_full_activation_without_sequence_parallel(scenario) -> None:
    root = scenario("tp-no-sequence-parallel")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    per_rank: dict[int, float] = {}
    for r, d in dirs.items():
        for ops in _comm(d).values():
            # the tp all-reduces stay inside the node (HCCS only), the dp ones cross it (RDMA)
            tp = [
                v
                for n, v in ops.items()
                if n.startswith(ev["collective"]) and _bw(v, "HCCS") > 0 and _bw(v, "RDMA") == 0
            ]
            assert len(tp) == nums["tp_allreduces_per_step"]
            assert all(_bw(v, "HCCS") > 0.8 * ev["payload_mb"] for v in tp)
        rows = kernel_rows(d)
        norms = [x for x in rows if x["Type"] in ("RmsNorm", "RmsNormGrad", "Add")]
        assert norms and all(
            x["Input Shapes"].strip('"').startswith(ev["norm_shape"]) for x in norms
        )
        assert any(x["Input Shapes"].strip('"') == ev["matmul_shape_example"] for x in rows)
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["distributed_args"]["sequence_parallel"] is False
        assert md["distributed_args"]["tensor_model_parallel_size"] == 8
        st = _steps(d)
        per_rank[r] = sum(float(x["Communication(Not Overlapped)"]) for x in st) / len(st)
    assert max(per_rank.values()) < 1.05 * min(per_rank.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["tp_allreduce_share_of_step"] > 0.3
    assert nums["norm_add_us_per_step"] > 5 * nums["norm_add_us_per_step_sp"]
    assert 0 < nums["saving_us_per_step"] < nums["norm_add_us_per_step"]


# ---------------------------------------------------------------- swiglu-unfused
def test_swiglu_runs_as_separate_kernels_on_every_rank(scenario) -> None:
    root = scenario("swiglu-unfused")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    layers = nums["unfused_kernels_per_step"] // nums["unfused_kernels_per_layer"]
    for d in dirs.values():
        rows = kernel_rows(d)
        n = Counter((x["Step Id"], x["Type"]) for x in rows)
        steps = {x["Step Id"] for x in rows}
        assert len(steps) == key["steps"]
        for s in steps:
            assert n[(s, "SwiGlu")] == 0 and n[(s, "SwiGluGrad")] == 0
            for op in ("SplitV", "Swish", "SwishGrad", "ConcatD"):
                assert n[(s, op)] == layers, op
            assert n[(s, "Mul")] == nums["mul_per_step"]
        split = [x for x in rows if x["Type"] == "SplitV"]
        assert all(x["Input Shapes"].strip('"') == ev["activation_shape"] for x in split)
        stat = {x["OP Type"] for x in read_csv(d, "op_statistic.csv")}
        assert {"SplitV", "Swish", "SwishGrad", "ConcatD"} <= stat
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["swiglu_unfused_us_per_step"] > 2 * nums["swiglu_fused_us_per_step"]
    assert nums["saving_us_per_step"] > 0.03 * nums["median_step_us"]


# ---------------------------------------------------------------- hbm-slow-node
def test_one_node_runs_its_memory_bound_kernels_slower(scenario) -> None:
    root = scenario("hbm-slow-node")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    dur: dict[int, dict[str, float]] = {}
    wait: dict[int, float] = {}
    for r, d in dirs.items():
        mhz = {e["args"]["MHz"] for e in trace(d) if e.get("name") == "AI Core Freq"}
        assert mhz == {ev["aicore_mhz"]}
        rows = kernel_rows(d)
        dur[r] = {
            t: median(float(x["Duration(us)"]) for x in rows if x["Type"] == t)
            for t in ("RmsNorm", "SwiGlu", "MatMulV2", "FlashAttentionScore")
        }
        wait[r] = _wait_ms(d)
    good = [r for r in dirs if r not in bad]
    for t in ("RmsNorm", "SwiGlu"):
        assert min(dur[r][t] for r in bad) > 1.5 * max(dur[r][t] for r in good), t
    for t in ("MatMulV2", "FlashAttentionScore"):
        assert max(dur[r][t] for r in bad) < 1.03 * min(dur[r][t] for r in good), t
    assert min(wait[r] for r in good) > 2 * max(wait[r] for r in bad)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert not set(rc["victim_ranks"]) & bad
    assert nums["saving_us_per_step"] > 0.03 * nums["median_step_us"]
