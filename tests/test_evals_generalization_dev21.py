"""The nineteenth development set of fault kinds (scenarios_dev21.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
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


def _transit_mb(v: dict[str, Any]) -> float:
    bw = v["Communication Bandwidth Info"]
    return bw["HCCS"]["Transit Size(MB)"] + bw["RDMA"]["Transit Size(MB)"]


def _free(d: Path) -> list[float]:
    return [float(x["Free"]) for x in _steps(d)]


def _memcpy(ev: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in ev if e.get("name") == "MEMCPY_ASYNC" and e.get("ph") == "X"]


# ---------------------------------------------------------------- vpp-few-microbatches
def test_every_stage_idles_in_the_fill_and_drain_of_the_pipeline(scenario) -> None:
    root = scenario("vpp-few-microbatches")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    idle: dict[int, float] = {}
    for r, d in dirs.items():
        md = json.loads((d / "profiler_metadata.json").read_text())["distributed_args"]
        assert md["pipeline_model_parallel_size"] == ev["pipeline_stages"]
        assert md["virtual_pipeline_model_parallel_size"] == ev["virtual_stages"]
        dp = md["data_parallel_size"]
        assert md["global_batch_size"] == ev["micro_batches"] * dp * md["micro_batch_size"]
        st = _steps(d)
        assert all(float(x["Bubble"]) > 0.1 * float(x["Stage"]) for x in st)
        idle[r] = median(
            1 - float(x["Computing"]) / (float(x["Stage"]) + float(x["Bubble"])) for x in st
        )
        # v x m forward chunk passes of 4 layers per stage and step
        fa = [x for x in kernel_rows(d) if x["Type"] == "FlashAttentionScore"]
        assert len(fa) == nums["forward_chunks_per_stage_per_step"] * 4 * key["steps"]
        p2p = {
            n.split("_")[1]
            for ops in json.loads((d / PO / "communication.json").read_text()).values()
            for n in ops["p2p"]
            if n.startswith("hcom_")
        }
        assert p2p <= {"send", "receive"} and p2p
    # every stage alike: the same share of the step not computing
    assert max(idle.values()) - min(idle.values()) < 0.02
    assert min(idle.values()) > nums["ideal_bubble_fraction"]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["bubble_share_fixed"] < 0.6 * nums["bubble_share"]
    assert nums["saving_share_per_micro_batch"] > 0.1


# ---------------------------------------------------------------- isin-cpu-fallback
def test_isin_runs_on_the_host_cpu_every_step_on_every_rank(scenario) -> None:
    root = scenario("isin-cpu-fallback")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    free: dict[int, float] = {}
    for r, d in dirs.items():
        events = trace(d)
        isin = [e for e in events if e.get("name") == ev["host_op"] and e.get("cat") == "cpu_op"]
        assert len(isin) == key["steps"]
        assert all(float(e["dur"]) > 0.8 * nums["host_op_us_median"] for e in isin)
        assert all(ev["input_dims"].split(";")[0] in e["args"]["Input Dims"] for e in isin)
        # no kernel launch while the host runs it
        for e in isin:
            a, b = float(e["ts"]), float(e["ts"]) + float(e["dur"])
            launches = [
                x
                for x in events
                if x.get("name", "").startswith("AscendCL@aclnn") and a < float(x["ts"]) < b
            ]
            assert not launches
        ops = [e["args"]["operation"] for e in _memcpy(events)]
        assert ops.count("device to host") == ops.count("host to device") == key["steps"]
        # not a device operator: no kernel_details row
        assert not [x for x in kernel_rows(d) if "isin" in x["Type"].lower()]
        free[r] = median(_free(d))
    assert min(free.values()) > 0.8 * nums["device_idle_us_per_step"]  # every rank alike
    assert max(free.values()) < 1.2 * min(free.values())
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.08 * nums["median_step_us"]


# ---------------------------------------------------------------- host-swap-rank
def test_one_rank_launches_stall_by_a_growing_then_shrinking_amount(scenario) -> None:
    root = scenario("host-swap-rank")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = ev["culprit_rank"]
    fb = _free(dirs[bad])
    assert fb == nums["culprit_free_us_per_step"]
    peak = fb.index(max(fb))
    assert 0 < peak < len(fb) - 1  # grows, then shrinks
    assert fb[peak] > 4 * fb[0] and fb[peak] > 4 * fb[-1]
    assert all(fb[i] <= fb[i + 1] for i in range(peak - 1))
    assert all(fb[i] >= fb[i + 1] for i in range(peak + 1, len(fb) - 1))
    others = [median(_free(d)) for r, d in dirs.items() if r != bad]
    assert max(others) < 0.2 * fb[peak]
    # the culprit's launch calls: some of several ms; the others' never
    long_launch = {
        r: max(float(e["dur"]) for e in trace(d) if e.get("name", "").startswith("AscendCL@aclnn"))
        for r, d in dirs.items()
    }
    assert long_launch[bad] > 1000
    assert max(v for r, v in long_launch.items() if r != bad) < 100
    wait = {r: _wait_ms(d) for r, d in dirs.items()}
    assert min(v for r, v in wait.items() if r != bad) > 3 * wait[bad]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "rank" and rc["culprit_ranks"] == [bad]
    assert bad not in rc["victim_ranks"]


# ---------------------------------------------------------------- gloo-dp-group
def test_one_dp_group_all_reduces_on_the_host_over_gloo(scenario) -> None:
    root = scenario("gloo-dp-group")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    free: dict[int, float] = {}
    per_rank_ar: dict[int, int] = {}
    for r, d in dirs.items():
        md = json.loads((d / "profiler_metadata.json").read_text())
        groups = {v["group_name"] for v in md["parallel_group_info"].values()}
        events = trace(d)
        gloo = [e for e in events if e.get("name") == "gloo:all_reduce"]
        n_ar = [sum(1 for n in ops if n.startswith("hcom_allReduce_")) for ops in _comm(d).values()]
        if r in bad:
            assert "dp" not in groups and "tp" in groups
            assert len(gloo) == key["steps"]
            assert all(float(e["dur"]) > 0.7 * nums["gloo_allreduce_us_median"] for e in gloo)
            ops = [e["args"]["operation"] for e in _memcpy(events)]
            assert ops.count("device to host") == ops.count("host to device") == key["steps"]
        else:
            assert "dp" in groups
            assert not gloo and not _memcpy(events)
        free[r] = median(_free(d))
        assert all(x == n_ar[0] for x in n_ar)  # the same all-reduces in every step
        per_rank_ar[r] = n_ar[0]
    good = [r for r in dirs if r not in bad]
    # one HCCL all-reduce per step fewer on the gloo ranks (the dp one)
    assert all(per_rank_ar[r] == per_rank_ar[good[0]] - 1 for r in bad)
    assert min(free[r] for r in bad) > 5 * max(free[r] for r in good)
    wait = {r: _wait_ms(d) for r, d in dirs.items()}
    assert min(wait[r] for r in good) > 3 * max(wait[r] for r in bad)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert not set(rc["victim_ranks"]) & bad
    assert nums["gloo_allreduce_us_median"] > 5 * nums["hccl_dp_allreduce_us_median_other_groups"]
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]
