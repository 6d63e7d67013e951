"""The sixteenth development set of fault kinds (scenarios_dev18.py): what each kind writes.

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


def _share(d: Path, column: str) -> float:
    rows = _steps(d)
    return sum(float(x[column]) for x in rows) / sum(_step_us(x) for x in rows)


def _comm(d: Path) -> dict[str, dict[str, Any]]:
    """{step key: {op name: record}} of communication.json's collective section."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v["collective"] for s, v in raw.items()}


def _matmul_median(dirs: dict[int, Path], op: str = "MatMulV2") -> dict[int, float]:
    return {
        r: median(float(x["Duration(us)"]) for x in kernel_rows(d) if x["Type"] == op)
        for r, d in dirs.items()
    }


# ---------------------------------------------------------------- fp32-vocab-cross-entropy
def test_the_loss_runs_in_fp32_over_the_full_vocabulary(scenario) -> None:
    root = scenario("fp32-vocab-cross-entropy")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    loss_ops = set(ev["op_types"])
    per_rank: dict[int, float] = {}
    for r, d in dirs.items():
        rows = kernel_rows(d)
        loss = [
            x for x in rows if x["Type"] in loss_ops and str(ev["vocab_size"]) in x["Input Shapes"]
        ]
        n = Counter(x["Type"] for x in loss)
        assert sum(n.values()) == nums["fp32_loss_ops_per_step"] * key["steps"]
        assert n["Cast"] == 2 * key["steps"]
        # every loss operator touches fp32 data of the logits' shape
        assert all(ev["dtype"] in x["Input Data Types"] + x["Output Data Types"] for x in loss)
        assert all(ev["logits_shape"] in x["Input Shapes"] for x in loss)
        per_rank[r] = sum(float(x["Duration(us)"]) for x in loss) / key["steps"]
    assert (
        abs(median(per_rank.values()) - nums["fp32_loss_us_per_step"])
        < 0.02 * nums["fp32_loss_us_per_step"]
    )
    assert max(per_rank.values()) < 1.03 * min(per_rank.values())  # every rank alike
    shares = [_share(d, "Computing") for d in dirs.values()]
    assert max(shares) - min(shares) < 0.02
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.07 * nums["median_step_us"]
    assert nums["saving_us_per_step"] < nums["fp32_loss_us_per_step"]


# ---------------------------------------------------------------- grad-clip-per-param-norm
def test_every_parameter_is_clipped_with_its_own_allreduce_and_sync(scenario) -> None:
    root = scenario("grad-clip-per-param-norm")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    for r in (0, 7, 12):
        d = dirs[r]
        rows = read_csv(d, "kernel_details.csv")
        by_step: dict[str, list[dict[str, str]]] = {}
        for x in rows:
            by_step.setdefault(x["Step Id"], []).append(x)
        for srows in by_step.values():
            srows.sort(key=lambda x: float(x["Start Time(us)"].strip()))
            types = [x["Type"] for x in srows]
            norms = [i for i, t in enumerate(types) if t == ev["norm_operator"]]
            assert len(norms) == nums["norm_kernels_per_step"]
            # each norm is followed by its all-reduce
            assert all(types[i + 1] == ev["collective"] for i in norms)
        tiny = 0
        for ops in _comm(d).values():
            for name, v in ops.items():
                if name == "Total Op Info":
                    continue
                bw = v["Communication Bandwidth Info"]
                if bw["HCCS"]["Transit Size(MB)"] + bw["RDMA"]["Transit Size(MB)"] < 0.001:
                    tiny += 1
        assert tiny == nums["clip_allreduces_per_step"] * key["steps"]
        tr = trace(d)
        syncs = [e for e in tr if e.get("name") == "AscendCL@" + ev["host_sync_api"]]
        items = [e for e in tr if e.get("name") == ev["host_op"]]
        assert len(syncs) == len(items) == nums["host_syncs_per_step"] * key["steps"]
    shares = [_share(d, "Communication(Not Overlapped)") for d in dirs.values()]
    want = nums["median_comm_not_overlapped_share"]
    assert abs(median(shares) - want) <= 0.03 * want
    assert max(shares) - min(shares) < 0.03  # nobody late
    mm = _matmul_median(dirs)
    assert max(mm.values()) < 1.02 * min(mm.values())
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "exposed_communication"
    assert nums["saving_us_per_step"] > 0.8 * nums["clip_us_per_step"]


# ---------------------------------------------------------------- hccl-algo-node-mismatch
def test_one_node_runs_another_hccl_algorithm(scenario) -> None:
    root = scenario("hccl-algo-node-mismatch")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    size: dict[int, float] = {}
    bw: dict[int, float] = {}
    wait: dict[int, float] = {}
    for r, d in dirs.items():
        md = json.loads((d / "profiler_metadata.json").read_text())
        algo = md["ENV_VARIABLES"][ev["env_variable"]]
        assert algo == (ev["culprit_value"] if r in bad else ev["others_value"])
        algs = {e["args"]["alg_type"] for e in trace(d) if "alg_type" in e.get("args", {})}
        assert algs == {ev["culprit_alg_type"] if r in bad else ev["others_alg_type"]}
        tot = [ops["Total Op Info"] for ops in _comm(d).values()]
        b = [t["Communication Bandwidth Info"] for t in tot]
        size[r] = sum(x["HCCS"]["Transit Size(MB)"] + x["RDMA"]["Transit Size(MB)"] for x in b)
        bw[r] = sum(x["HCCS"]["Transit Size(MB)"] for x in b) / sum(
            x["HCCS"]["Transit Time(ms)"] for x in b
        )
        wait[r] = sum(t["Communication Time Info"]["Wait Time(ms)"] for t in tot)
    good = [r for r in dirs if r not in bad]
    # the same ops carry ~2.2x the bytes on node 1, at the same bandwidth; node 0 waits
    assert min(size[r] for r in bad) > 2 * max(size[r] for r in good)
    assert max(bw.values()) < 1.1 * min(bw.values())
    assert min(wait[r] for r in good) > 3 * max(wait[r] for r in bad)
    mm = _matmul_median(dirs)
    assert max(mm.values()) < 1.02 * min(mm.values())
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert not set(rc["victim_ranks"]) & bad
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- fp16-overflow-skipped-steps
def test_overflow_steps_skip_the_optimizer_on_every_rank(scenario) -> None:
    root = scenario("fp16-overflow-skipped-steps")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    missing = set(ev["missing_operators"])
    for d in dirs.values():
        rows = kernel_rows(d)
        steps = sorted({int(x["Step Id"]) for x in rows})
        assert len(steps) == key["steps"]
        opt_steps = {int(x["Step Id"]) for x in rows if x["Type"] in missing}
        assert sorted(set(steps) - opt_steps) == ev["overflow_steps"]
        checks = Counter(int(x["Step Id"]) for x in rows if x["Type"] == ev["check_operator"])
        assert set(checks) == set(steps)  # the overflow check runs in every step
        assert any(ev["dtype"] in x["Input Data Types"] for x in rows)
        st = {int(x["Step"]): _step_us(x) for x in _steps(d)}
        ov = [st[s] for s in ev["overflow_steps"]]
        ok = [st[s] for s in st if s not in ev["overflow_steps"]]
        assert max(ov) < min(ok)  # skipped steps are shorter, not longer
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["steps"] == ev["overflow_steps"]
    assert nums["overflow_step_count"] == len(ev["overflow_steps"])
    assert nums["time_per_update_us"] > 1.3 * nums["time_per_update_us_no_overflow"]
