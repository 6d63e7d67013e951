"""Development set 33 of fault kinds (scenarios_dev33.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from _dev_files import PO, rank_dirs, read_csv


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _steps(d: Path) -> list[dict[str, str]]:
    return read_csv(d, "step_trace_time.csv")


def _span(x: dict[str, str]) -> float:
    """A step's length on a rank (µs): Stage + Bubble of step_trace_time.csv."""
    return float(x["Stage"]) + float(x["Bubble"])


def _dist(d: Path) -> dict[str, Any]:
    return json.loads((d / "profiler_metadata.json").read_text())["distributed_args"]


def _shape(cell: str) -> list[list[int]]:
    """Input Shapes of a kernel_details row (CANN quotes stripped), one list per input."""
    out: list[list[int]] = []
    for part in cell.strip('"').split(";"):
        out.append([int(x) for x in part.split(",") if x])
    return out


def _dh(s: str) -> int:
    """Independent double_hash (ascend-formats.md §1.4): rolling 29/131 hashes mod 2**32."""
    a = b = 0
    for ch in s:
        a = (a * 29 + ord(ch)) % (1 << 32)
        b = (b * 131 + ord(ch)) % (1 << 32)
    return a * (1 << 32) + b


def _groups(d: Path) -> dict[str, dict[str, Any]]:
    """{group hash (as in op names): parallel_group_info entry} of one rank."""
    md = json.loads((d / "profiler_metadata.json").read_text())
    return {str(_dh(name)): g for name, g in md["parallel_group_info"].items()}


# ---------------------------------------------------------------- dropout-rng-aicpu
def test_dropout_masks_are_drawn_on_the_ai_cpu_on_every_rank(scenario) -> None:
    root = scenario("dropout-rng-aicpu")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    durs: list[float] = []
    per_rank: dict[int, float] = {}
    shares: dict[int, float] = {}
    for r, d in dirs.items():
        assert _dist(d)["hidden_dropout"] == nums["dropout_p"]
        rows = read_csv(d, "kernel_details.csv")
        comp = [x for x in rows if x["Accelerator Core"] not in ("HCCL", "COMMUNICATION")]
        aicpu = [x for x in comp if x["Accelerator Core"] == "AI_CPU"]
        assert {x["Type"] for x in aicpu} == {ev["operator"]} == {"StatelessRandomUniformV2"}
        assert all(x["Output Shapes"].strip('"') == ev["output_shape"] for x in aicpu)
        assert all(x["Output Data Types"] == "DT_FLOAT" for x in aicpu)
        per_step = Counter(x["Step Id"] for x in aicpu)
        assert set(per_step.values()) == {nums["aicpu_kernels_per_step"]}
        # each draw follows a MatMulV2 (attention output / MLP down) and feeds the mask compare
        by_step: dict[str, list[dict[str, str]]] = defaultdict(list)
        for x in comp:
            by_step[x["Step Id"]].append(x)
        for seq in by_step.values():
            seq.sort(key=lambda x: float(x["Start Time(us)"].strip()))
            for i, x in enumerate(seq):
                if x["Accelerator Core"] == "AI_CPU":
                    assert seq[i - 1]["Type"] == "MatMulV2"
                    assert seq[i + 1]["Type"] == "GreaterEqual"
        durs += [float(x["Duration(us)"]) for x in aicpu]
        st = _steps(d)
        per_rank[r] = sum(float(x["Duration(us)"]) for x in aicpu) / len(st)
        shares[r] = per_rank[r] * len(st) / sum(_span(x) for x in st)
        stat = {x["OP Type"]: x for x in read_csv(d, "op_statistic.csv")}
        assert stat[ev["operator"]]["Core Type"] == "AI_CPU"
        assert int(stat[ev["operator"]]["Count"]) == len(aicpu)
        assert not any(x["Type"].startswith("DropOut") for x in comp)
    assert nums["rng_us_median"] == pytest.approx(median(durs), rel=0.01)
    assert nums["aicpu_us_per_step"] == pytest.approx(median(per_rank.values()), rel=0.01)
    assert nums["aicpu_share_of_step"] == pytest.approx(median(shares.values()), rel=0.02)
    assert max(per_rank.values()) < 1.03 * min(per_rank.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert sorted(rc["victim_ranks"]) == sorted(dirs)
    assert nums["saving_us_per_step"] > 0.2 * nums["median_step_us"]


# ---------------------------------------------------------------- softmax-unaligned-buckets
def test_softmax_on_a_last_axis_off_16_is_slow_in_those_steps_only(scenario) -> None:
    root = scenario("softmax-unaligned-buckets")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    ns_per_elem: dict[tuple[str, bool], list[float]] = defaultdict(list)
    spans: dict[int, list[float]] = defaultdict(list)
    unaligned: set[int] = set()
    for d in dirs.values():
        assert _dist(d)["attention_backend"] == "eager"
        for x in read_csv(d, "kernel_details.csv"):
            if x["Type"] not in ("SoftmaxV2", "SoftmaxGrad"):
                continue
            shp = _shape(x["Input Shapes"])[0]
            n = shp[-1]
            assert shp[-2] == n and shp[:2] == [nums["images_per_card"], 16]
            off = n % nums["alignment_elements"] != 0
            if off:
                unaligned.add(int(x["Step Id"]))
            elems = shp[0] * shp[1] * n * n
            ns_per_elem[(x["Type"], off)].append(float(x["Duration(us)"]) * 1000 / elems)
        for i, x in enumerate(_steps(d)):
            spans[i].append(_span(x))
    assert sorted(unaligned) == nums["unaligned_steps"] == key["root_cause"]["steps"]
    assert sorted(unaligned) == ev["unaligned_steps"] and unaligned
    for op, name in (("SoftmaxV2", "softmax"), ("SoftmaxGrad", "softmax_grad")):
        ratio = median(ns_per_elem[(op, True)]) / median(ns_per_elem[(op, False)])
        assert ratio > 2.0
        assert nums[f"{name}_slowdown_per_element"] == pytest.approx(ratio, rel=0.02)
    ids = key["step_ids"]
    bad = [spans[i] for i, s in enumerate(ids) if s in unaligned]
    good = [spans[i] for i, s in enumerate(ids) if s not in unaligned]
    # every rank alike in a step; the unaligned steps longer than every aligned one
    for v in spans.values():
        assert max(v) < 1.03 * min(v)
    assert min(min(v) for v in bad) > max(max(v) for v in good)
    assert nums["step_us_unaligned_median"] == pytest.approx(
        median(x for v in bad for x in v), rel=0.01
    )
    assert nums["extra_us_per_unaligned_step"] == pytest.approx(
        median(x for v in bad for x in v) - median(x for v in good for x in v), rel=0.05
    )
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_unaligned_step"] > 0.1 * nums["step_us_unaligned_median"]


# ---------------------------------------------------------------- metrics-on-dp0-tp-group
def test_metrics_run_on_data_parallel_rank_0_only_and_node_1_waits(scenario) -> None:
    root = scenario("metrics-on-dp0-tp-group")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    culprits = set(key["root_cause"]["culprit_ranks"])
    assert culprits == set(nums["culprit_ranks"]) == set(range(8))
    comp: dict[int, float] = {}
    first_dp_sync: dict[int, list[float]] = defaultdict(list)
    for r, d in dirs.items():
        rows = read_csv(d, "kernel_details.csv")
        types = Counter(x["Type"] for x in rows if x["Step Id"] == str(key["step_ids"][0]))
        # the argmax / top-k over the [4096, 19008] logits shard: only where the metrics run
        big = [
            x
            for x in rows
            if x["Type"] in ("TopKV2", "ArgMaxWithValue")
            and _shape(x["Input Shapes"])[0] == [4096, nums["vocab_shard"]]
        ]
        assert bool(big) == (r in culprits), r
        assert (types["TopKV2"] > 0) == (r in culprits)
        groups = _groups(d)
        mp = [h for h, g in groups.items() if g["group_name"] == "mp"]
        assert bool(mp) == (r in culprits)
        raw = json.loads((d / PO / "communication.json").read_text())
        dp = next(h for h, g in groups.items() if g["group_name"] == "dp")
        for ops in raw.values():
            names = [n for n in ops["collective"] if n != "Total Op Info"]
            if mp:
                on_mp = [n for n in names if n.endswith("@" + mp[0])]
                assert len(on_mp) == nums["metric_collectives_per_step"]
            dp_ops = sorted(
                (n for n in names if n.endswith("@" + dp)),
                key=lambda n: ops["collective"][n]["Communication Time Info"][
                    "Start Timestamp(us)"
                ],
            )
            info = ops["collective"][dp_ops[0]]["Communication Time Info"]
            first_dp_sync[r].append(info["Synchronization Time(ms)"] * 1000)
        comp[r] = median(float(x["Computing"]) for x in _steps(d))
    others = [r for r in dirs if r not in culprits]
    excess = median(comp[r] for r in culprits) - median(comp[r] for r in others)
    assert nums["computing_excess_us_per_step"] == pytest.approx(excess, rel=0.05)
    assert excess > 0.05 * median(comp.values())
    o_sync = [x for r in others for x in first_dp_sync[r]]
    c_sync = [x for r in culprits for x in first_dp_sync[r]]
    # the other node waits for its data-parallel partners in the first gradient all-reduce
    assert median(o_sync) > 10 * max(median(c_sync), 50.0)
    assert nums["first_dp_allreduce_sync_us_median_others"] == pytest.approx(
        median(o_sync), rel=0.05
    )
    assert set(key["root_cause"]["victim_ranks"]) == set(others)
    assert ev["communicator"] == "mp"
    assert nums["saving_us_per_step"] > 0.03 * nums["median_step_us"]


# ---------------------------------------------------------------- moe-gmm-tiny-groups
def test_grouped_matmuls_run_many_tiny_groups_at_a_low_rate(scenario) -> None:
    root = scenario("moe-gmm-tiny-groups")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    tflops: list[float] = []
    mm_tflops: list[float] = []
    mac: list[float] = []
    shares: dict[int, float] = {}
    for r, d in dirs.items():
        dist = _dist(d)
        assert dist["num_experts"] == nums["experts"] == ev["groups"]
        assert dist["expert_model_parallel_size"] == 1
        rows = read_csv(d, "kernel_details.csv")
        gmm = [x for x in rows if x["Type"] == "GroupedMatmul"]
        assert set(Counter(x["Step Id"] for x in gmm).values()) == {nums["gmm_calls_per_step"]}
        for x in gmm:
            xs, w, gl = _shape(x["Input Shapes"])
            assert w[0] == gl[0] == nums["experts"]
            assert xs[0] == nums["routed_rows_per_micro_batch"]
            assert xs[0] // gl[0] == nums["rows_per_expert"] == ev["rows_per_group"]
            tflops.append(2.0 * xs[0] * w[1] * w[2] / float(x["Duration(us)"]) / 1e6)
            mac.append(float(x["aic_mac_ratio"]))
        for x in rows:
            if x["Type"] == "MatMulV2" and float(x["Duration(us)"]) > 30:
                a, b = _shape(x["Input Shapes"])[:2]
                mm_tflops.append(2.0 * a[0] * a[1] * b[0] / float(x["Duration(us)"]) / 1e6)
        st = _steps(d)
        shares[r] = sum(float(x["Duration(us)"]) for x in gmm) / sum(_span(x) for x in st)
    assert nums["gmm_tflops_median"] == pytest.approx(median(tflops), rel=0.03)
    assert nums["matmul_tflops_median"] == pytest.approx(median(mm_tflops), rel=0.03)
    assert median(tflops) < 0.5 * median(mm_tflops)
    assert nums["gmm_mac_ratio_median"] == pytest.approx(median(mac), rel=0.02)
    assert nums["gmm_share_of_step"] == pytest.approx(median(shares.values()), rel=0.02)
    assert min(shares.values()) > 0.4 and max(shares.values()) < 1.05 * min(shares.values())
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.25 * nums["median_step_us"]
