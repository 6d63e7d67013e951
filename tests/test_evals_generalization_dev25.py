"""The twenty-third development set of fault kinds (scenarios_dev25.py): what each kind writes.

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


def _transit_mb(v: dict[str, Any]) -> float:
    bw = v["Communication Bandwidth Info"]
    return bw["HCCS"]["Transit Size(MB)"] + bw["RDMA"]["Transit Size(MB)"]


def _profiler_steps(ev: list[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """{step id: (start µs, end µs)} of the ProfilerStep#N host events."""
    out = {}
    for e in ev:
        name = str(e.get("name", ""))
        if name.startswith("ProfilerStep#") and e.get("ph") == "X":
            t = float(e["ts"])
            out[int(name.split("#")[1])] = (t, t + float(e["dur"]))
    return out


# ---------------------------------------------------------------- ddp-find-unused-params
def test_ddp_traverses_the_graph_and_all_reduces_the_used_map(scenario) -> None:
    root = scenario("ddp-find-unused-params")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    free: dict[int, float] = {}
    for r, d in dirs.items():
        events = trace(d)
        # the traversal frame once a step, ~14 ms, under DDP's _post_forward (with_stack)
        frames = [
            e
            for e in events
            if e.get("cat") == "python_function" and ev["frame"] in str(e.get("name"))
        ]
        assert len(frames) == key["steps"]
        assert all(float(e["dur"]) > 10_000 for e in frames)
        names = {e["name"] for e in events if e.get("cat") == "python_function"}
        assert names == set(ev["frames"])
        # one tiny INT32 all-reduce a step besides the gradient all-reduces
        hcl = [
            e
            for e in events
            if str(e.get("name", "")).startswith("hcom_allReduce_") and e.get("ph") == "X"
        ]
        assert Counter(e["args"]["data_type"] for e in hcl)["INT32"] == key["steps"]
        for ops in _comm(d).values():
            tiny = [
                v
                for n, v in ops.items()
                if n.startswith("hcom_allReduce_") and _transit_mb(v) * 1e6 < 1000
            ]
            assert len(tiny) == 1
        st = _steps(d)
        free[r] = sum(float(x["Free"]) / float(x["Stage"]) for x in st) / len(st)
    assert min(free.values()) > 0.1  # the device idles on every rank
    assert max(free.values()) < 1.2 * min(free.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["used_map_allreduce_bytes"] == ev["extra_collective_bytes"]
    idle = nums["device_idle_before_backward_us_median"]
    assert abs(nums["saving_us_per_step"] - idle) < 0.15 * idle
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- gc-collect-in-loop
def test_gc_pauses_every_rank_in_the_same_steps(scenario) -> None:
    root = scenario("gc-collect-in-loop")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    on = set(ev["gc_steps"])
    assert on and all(s % ev["gc_interval"] == 0 for s in on)
    stage_on: dict[int, list[float]] = {s: [] for s in on}
    for d in dirs.values():
        events = trace(d)
        bounds = _profiler_steps(events)
        gcs = [e for e in events if e.get("cat") == "GC"]
        assert len(gcs) == len(on)
        hit = set()
        for e in gcs:
            t = float(e["ts"])
            assert float(e["dur"]) > 100_000
            (s,) = [s for s, (a, b) in bounds.items() if a <= t < b]
            hit.add(s)
            # at the start of the step: nothing on the device before the pause ends
            assert t - bounds[s][0] < 1000
        assert hit == on
        st = {int(x["Step"]): x for x in _steps(d)}
        off = [float(x["Stage"]) for s, x in st.items() if s not in on]
        for s in on:
            assert float(st[s]["Stage"]) > 2 * median(off)
            assert float(st[s]["Free"]) > 0.9 * nums["gc_pause_us_median"]
            stage_on[s].append(float(st[s]["Stage"]))
        info = json.loads(next(d.glob("profiler_info_*.json")).read_text())
        assert (
            info["config"]["experimental_config"]["_gc_detect_threshold"] == ev["gc_threshold_ms"]
        )
    for vals in stage_on.values():  # every rank alike in the collection steps
        assert max(vals) < 1.05 * min(vals)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["steps"] == ev["gc_steps"]
    assert nums["gc_events_per_gc_step"] == key["ranks"]
    assert nums["extra_us_per_gc_step"] > 0.9 * nums["gc_pause_us_median"]


# ---------------------------------------------------------------- moe-allgather-dispatcher
def test_moe_tokens_are_all_gathered_over_the_ep_group(scenario) -> None:
    root = scenario("moe-allgather-dispatcher")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    notov: dict[int, float] = {}
    for r, d in dirs.items():
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["distributed_args"]["moe_token_dispatcher_type"] == "allgather"
        ep = [g for g in md["parallel_group_info"].values() if g["group_name"] == "ep"]
        assert len(ep) == 1 and r in ep[0]["global_ranks"] and len(ep[0]["global_ranks"]) == 8
        for ops in _comm(d).values():
            assert not [n for n in ops if n.startswith("hcom_alltoall")]
            big = Counter(
                n.split("__")[0]
                for n, v in ops.items()
                if n != "Total Op Info" and _transit_mb(v) > 100
            )
            assert big["hcom_allGather"] == nums["big_ep_allgathers_per_step"]
            assert big["hcom_reduceScatter"] == nums["ep_reducescatters_per_step"]
            # on HCCS only: the ep group sits in one node
            for n, v in ops.items():
                if n != "Total Op Info" and _transit_mb(v) > 100:
                    assert v["Communication Bandwidth Info"]["RDMA"]["Transit Size(MB)"] == 0
        perm = [x for x in kernel_rows(d) if x["Type"] == "MoeTokenPermute"]
        assert perm and all(ev["gathered_shape"] in x["Input Shapes"] for x in perm)
        st = _steps(d)
        notov[r] = sum(
            float(x["Communication(Not Overlapped)"]) / float(x["Stage"]) for x in st
        ) / len(st)
    assert min(notov.values()) > 0.3
    assert max(notov.values()) < 1.1 * min(notov.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["volume_ratio_allgather_vs_alltoall"] > 3
    assert nums["saving_us_per_step"] > 0.2 * nums["median_step_us"]


# ---------------------------------------------------------------- aicpu-busy-card
def test_one_cards_ai_cpu_kernels_are_slower(scenario) -> None:
    root = scenario("aicpu-busy-card")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = ev["culprit_rank"]
    cpu: dict[int, float] = {}
    core: dict[int, float] = {}
    wait: dict[int, float] = {}
    for r, d in dirs.items():
        rows = kernel_rows(d)
        aicpu = [x for x in rows if x["Accelerator Core"] == "AI_CPU"]
        assert {x["Type"] for x in aicpu} == set(ev["operators"])
        assert len(aicpu) == nums["aicpu_ops_per_step"] * key["steps"]
        cpu[r] = median(float(x["Duration(us)"]) for x in aicpu)
        core[r] = sum(float(x["Duration(us)"]) for x in rows if x["Accelerator Core"] != "AI_CPU")
        wait[r] = _wait_ms(d)
    good = [r for r in dirs if r != bad]
    assert cpu[bad] > 3 * max(cpu[r] for r in good)
    assert abs(core[bad] - median(core[r] for r in good)) < 0.02 * core[bad]  # AI Core normal
    assert min(wait[r] for r in good) > 3 * wait[bad]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "rank" and rc["culprit_ranks"] == [bad]
    assert set(rc["victim_ranks"]) == set(good)
    assert nums["aicpu_ratio_median"] > 3
    assert nums["saving_us_per_step"] > 0.05 * nums["median_step_us"]
