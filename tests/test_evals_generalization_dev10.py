"""The eighth development set of fault kinds (scenarios_dev10.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

from _dev_files import kernel_rows, rank_dirs, read_csv, trace

N_STEPS = 4


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _gaps_us(rows: list[dict[str, str]]) -> list[float]:
    """Device idle before each compute kernel of a step (start − previous end), µs."""
    out = []
    prev = None
    for x in sorted(rows, key=lambda x: (int(x["Step Id"]), float(x["Start Time(us)"]))):
        s = float(x["Start Time(us)"])
        if prev is not None and prev[0] == x["Step Id"]:
            out.append(s - prev[1])
        prev = (x["Step Id"], s + float(x["Duration(us)"]))
    return out


def _per_step(rows: list[dict[str, str]], pick: Any) -> float:
    return sum(1 for x in rows if pick(x)) / N_STEPS


# ---------------------------------------------------------------- jit-compile-mode
def test_jit_compile_launches_are_in_the_trace(scenario) -> None:
    root = scenario("jit-compile-mode")
    key = _key(root)
    nums, ev_key = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    for d in list(dirs.values())[:3]:
        ev = trace(d)
        calls = [e for e in ev if e.get("name") == "AscendCL@aclopCompileAndExecute"]
        assert len(calls) == ev_key["compile_path_launches_per_step"] * N_STEPS
        durs = sorted(float(e["dur"]) for e in calls)
        want = nums["launch_api_us_median"]
        assert abs(median(durs) - want) <= 0.1 * want
        rows = kernel_rows(d)
        gaps = _gaps_us(rows)
        want = nums["device_gap_us_between_kernels_median"]
        assert abs(median(gaps) - want) <= 0.15 * want
        # shorter kernels than the launch: the device idles before each of them
        assert median(float(x["Duration(us)"]) for x in rows) < 2 * median(durs)
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["ENV_VARIABLES"]["ASCEND_LAUNCH_BLOCKING"] == ""
    # the same cost in every step (no step compiles more than another)
    rows = kernel_rows(next(iter(dirs.values())))
    per = Counter(x["Step Id"] for x in rows)
    assert len(set(per.values())) == 1 and len(per) == N_STEPS
    assert key["root_cause"]["culprit_kind"] == "job"
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- eager-rmsnorm-rope
def test_eager_norm_and_rope_chains_are_in_the_kernels(scenario) -> None:
    root = scenario("eager-rmsnorm-rope")
    key = _key(root)
    ev_key = key["evidence"]
    for d in list(rank_dirs(root).values())[:3]:
        rows = kernel_rows(d)
        types = Counter(x["Type"] for x in rows)
        for fused in ev_key["missing_fused_ops"]:
            assert types[fused] == 0, fused
        for op, n in ev_key["op_counts_per_step"].items():
            # MatMul-free chains: every counted type appears at least that often per step
            assert types[op] >= n * N_STEPS, op
        for op in ("Pow", "ReduceMean", "Rsqrt", "Neg", "ConcatD", "StridedSlice"):
            assert types[op] == ev_key["op_counts_per_step"][op] * N_STEPS, op
            assert all(x["Accelerator Core"] == "AI_VECTOR_CORE" for x in rows if x["Type"] == op)
        # the norm computes in fp32: a Cast from bf16 before Pow
        assert any(
            x["Type"] == "Cast"
            and "FLOAT" in x["Output Data Types"]
            and "BF16" in x["Input Data Types"]
            for x in rows
        )
        assert len(rows) == key["expected_numbers"]["kernels_per_step"] * N_STEPS
    nums = key["expected_numbers"]
    assert nums["rmsnorm_kernels_per_step"] == nums["rotary_kernels_per_step"] == 0
    assert nums["saving_us_per_step"] > nums["fused_ops_us_per_step"]
    assert key["root_cause"]["culprit_kind"] == "job"


# ---------------------------------------------------------------- pp-uneven-layers
def test_uneven_split_is_in_the_op_counts_and_the_waits(scenario) -> None:
    root = scenario("pp-uneven-layers")
    key = _key(root)
    nums = key["expected_numbers"]
    s0, s1 = nums["stages"]
    dirs = rank_dirs(root)
    counts = {}
    mm_us = {}
    for r in (s0[0], s1[0]):
        rows = kernel_rows(dirs[r])
        counts[r] = _per_step(rows, lambda x: x["Type"] == "FlashAttentionScore")
        mm_us[r] = median(float(x["Duration(us)"]) for x in rows if x["Type"] == "MatMulV2")
        md = json.loads((dirs[r] / "profiler_metadata.json").read_text())
        assert md["distributed_args"]["pipeline_model_parallel_size"] == 2
        assert md["distributed_args"]["num_layer_list"] == key["evidence"]["num_layer_list"]
    assert counts[s0[0]] == nums["stage0_flash_attention_per_step"]
    assert counts[s1[0]] == nums["stage1_flash_attention_per_step"]
    split = nums["layers_per_stage"]
    assert counts[s0[0]] * split[1] == counts[s1[0]] * split[0]
    # per-layer kernels as fast on both stages: the partition, not the hardware
    assert abs(mm_us[s0[0]] - mm_us[s1[0]]) <= 0.03 * mm_us[s0[0]]
    # the last stage waits for its activations in hcom_receive, the first stage does not wait
    bubble = {}
    for r in (s0[0], s1[0]):
        rows = read_csv(dirs[r], "step_trace_time.csv")
        bubble[r] = sum(float(x["Bubble"]) for x in rows) / len(rows)
    assert bubble[s0[0]] < 0.05 * bubble[s1[0]]
    want = nums["stage1_bubble_us_per_step"]
    assert abs(bubble[s1[0]] - want) <= 0.1 * want
    recv = [e for e in trace(dirs[s1[0]]) if str(e.get("name", "")).startswith("hcom_receive")]
    assert recv
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "stage" and rc["culprit_stage"] == 0
    assert rc["culprit_ranks"] == s0 and set(rc["victim_ranks"]) <= set(s1)


# ---------------------------------------------------------------- rank0-grad-hook-sync
def test_hook_syncs_on_one_rank_only(scenario) -> None:
    root = scenario("rank0-grad-hook-sync")
    key = _key(root)
    nums, ev_key = key["expected_numbers"], key["evidence"]
    culprit = ev_key["culprit_rank"]
    dirs = rank_dirs(root)
    for r, d in dirs.items():
        ev = trace(d)
        syncs = [e for e in ev if e.get("name") == "AscendCL@aclrtSynchronizeStream"]
        items = [e for e in ev if e.get("name") == "aten::item"]
        want = ev_key["syncs_per_step"] * N_STEPS if r == culprit else 0
        assert len(syncs) == len(items) == want, r
    # the culprit's device idles after each call returns: the next kernel starts late
    rows = sorted(kernel_rows(dirs[culprit]), key=lambda x: float(x["Start Time(us)"]))
    starts = [float(x["Start Time(us)"]) for x in rows]
    ends = [s + float(x["Duration(us)"]) for s, x in zip(starts, rows, strict=True)]
    idles = []
    for e in trace(dirs[culprit]):
        if e.get("name") != "AscendCL@aclrtSynchronizeStream":
            continue
        done = float(e["ts"]) + float(e["dur"])
        j = next(i for i, s in enumerate(starts) if s > done)
        idles.append(starts[j] - ends[j - 1])
    want = nums["idle_after_sync_us_median"]
    assert abs(median(idles) - want) <= 0.1 * want
    # its kernels are as fast as the others' (the same MatMul shapes)
    other = next(r for r in dirs if r != culprit)
    mm = {
        r: median(float(x["Duration(us)"]) for x in kernel_rows(dirs[r]) if x["Type"] == "MatMulV2")
        for r in (culprit, other)
    }
    assert abs(mm[culprit] - mm[other]) <= 0.03 * mm[other]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "rank" and rc["culprit_ranks"] == [culprit]
    assert other in rc["victim_ranks"]
    assert nums["others_wait_us_per_step_median"] > 3 * nums["culprit_wait_us_per_step"]
