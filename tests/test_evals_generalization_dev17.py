"""The fifteenth development set of fault kinds (scenarios_dev17.py): what each kind writes.

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


def _share(d: Path, column: str) -> float:
    rows = _steps(d)
    part = sum(float(x[column]) for x in rows)
    step = sum(
        float(x["Computing"]) + float(x["Communication(Not Overlapped)"]) + float(x["Free"])
        for x in rows
    )
    return part / step


def _comm(d: Path) -> dict[str, dict[str, Any]]:
    """{step key: {op name: record}} of communication.json's collective section."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v["collective"] for s, v in raw.items()}


def _matmul_median(dirs: dict[int, Path], op: str = "MatMulV2") -> dict[int, float]:
    return {
        r: median(float(x["Duration(us)"]) for x in kernel_rows(d) if x["Type"] == op)
        for r, d in dirs.items()
    }


# ---------------------------------------------------------------- syncbn-stats-allreduce
def test_every_batchnorm_layer_synchronizes_its_statistics(scenario) -> None:
    root = scenario("syncbn-stats-allreduce")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    fwd_ops, bwd_ops = ev["forward_operators"], ev["backward_operators"]
    for d in (dirs[0], dirs[9]):
        rows = read_csv(d, "kernel_details.csv")
        by_step: dict[str, list[dict[str, str]]] = {}
        for x in rows:
            by_step.setdefault(x["Step Id"], []).append(x)
        assert len(by_step) == key["steps"]
        for srows in by_step.values():
            srows.sort(key=lambda x: float(x["Start Time(us)"].strip()))
            types = [x["Type"] for x in srows]
            n = Counter(types)
            assert n[fwd_ops[0]] == n[bwd_ops[0]] == nums["batchnorm_layers"]
            assert n[ev["forward_op"]] == nums["syncbn_allgathers_per_step"]
            # every all-gather sits between a forward BatchNorm's reduce and its update, every
            # small all-reduce between a backward one's update-grad and reduce-grad
            for i, t in enumerate(types):
                if t == ev["forward_op"]:
                    assert (types[i - 1], types[i + 1]) == tuple(fwd_ops)
            pairs = [
                (types[i - 1], types[i + 1])
                for i, t in enumerate(types)
                if t == ev["backward_op"] and types[i - 1] == bwd_ops[0]
            ]
            assert len(pairs) == nums["syncbn_allreduces_per_step"]
            assert set(pairs) == {tuple(bwd_ops)}
        # communication.json: the statistics collectives carry a few KB, the gradient buckets MB
        for ops in _comm(d).values():
            sizes = {
                name: v["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"]
                for name, v in ops.items()
                if name != "Total Op Info"
            }
            small = [s for n, s in sizes.items() if s < 0.1]
            assert len(small) == nums["syncbn_collectives_per_step"]
            assert len(sizes) - len(small) == nums["gradient_allreduces_per_step"]
    shares = [_share(d, "Communication(Not Overlapped)") for d in dirs.values()]
    want = nums["median_comm_not_overlapped_share"]
    assert abs(median(shares) - want) <= 0.03 * want
    assert max(shares) - min(shares) < 0.03  # every rank alike, nobody late
    conv = _matmul_median(dirs, "Conv2D")
    assert max(conv.values()) < 1.02 * min(conv.values())
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "exposed_communication"
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]
    assert nums["saving_us_per_step"] >= 0.9 * nums["syncbn_us_per_step"]


# ---------------------------------------------------------------- param-rebroadcast-every-step
def test_parameters_are_broadcast_before_every_step(scenario) -> None:
    root = scenario("param-rebroadcast-every-step")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    for r in (0, 5, 13):
        d = dirs[r]
        rows = read_csv(d, "kernel_details.csv")
        first_kernel: dict[str, float] = {}
        for x in rows:
            if x["Accelerator Core"] != "HCCL":
                t = float(x["Start Time(us)"].strip())
                s = x["Step Id"]
                first_kernel[s] = min(first_kernel.get(s, t), t)
        for sk, ops in _comm(d).items():
            sid = sk.removeprefix("step")
            bc = {n: v for n, v in ops.items() if n.startswith(ev["op_type"])}
            assert len(bc) == ev["broadcasts_per_step"]
            for v in bc.values():
                info = v["Communication Time Info"]
                assert info["Start Timestamp(us)"] < first_kernel[sid]
                hccs = v["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"]
                rdma = v["Communication Bandwidth Info"]["RDMA"]["Transit Size(MB)"]
                assert (
                    abs((hccs + rdma) / 1.048576 - ev["broadcast_mb"]) < 0.15 * ev["broadcast_mb"]
                )
        launches = [e for e in trace(d) if e.get("name") == "AscendCL@" + ev["api"]]
        assert len(launches) == ev["broadcasts_per_step"] * key["steps"]
    shares = [_share(d, "Communication(Not Overlapped)") for d in dirs.values()]
    want = nums["median_comm_not_overlapped_share"]
    assert abs(median(shares) - want) <= 0.03 * want
    assert max(shares) - min(shares) < 0.03  # rank 0 (the source) like every other rank
    assert nums["broadcast_mb_per_step"] == nums["gradient_allreduce_mb_per_step"]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.9 * nums["broadcast_us_per_step"]
    assert nums["time_to_first_kernel_us"] > 0.9 * nums["broadcast_us_per_step"]


# ---------------------------------------------------------------- hccs-width-node-firmware
def _hccs_bw(d: Path) -> list[float]:
    """Bandwidths of this rank's HCCS links in communication_matrix.json (every op's own record)."""
    raw = json.loads((d / PO / "communication_matrix.json").read_text())
    out = []
    for sec in raw.values():
        for name, links in sec["collective"].items():
            if "-middle@" not in name:
                continue
            out += [v["Bandwidth(GB/s)"] for v in links.values() if v["Transport Type"] == "HCCS"]
    return out


def test_one_node_hccs_links_run_at_half_bandwidth(scenario) -> None:
    root = scenario("hccs-width-node-firmware")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    bw = {r: median(_hccs_bw(d)) for r, d in dirs.items()}
    slow = sorted(bw, key=lambda r: bw[r])[: len(bad)]
    assert set(slow) == bad == set(key["root_cause"]["culprit_ranks"])
    good_bw = [bw[r] for r in dirs if r not in bad]
    assert max(bw[r] for r in bad) < 0.6 * min(good_bw)
    assert abs(median(bw[r] for r in bad) - nums["culprit_hccs_bandwidth_gbps"]) < 0.5
    # RoCE is the same on both nodes; the healthy node waits (Wait Time), the slow one transfers
    wait: dict[int, float] = {}
    rdma: dict[int, float] = {}
    for r, d in dirs.items():
        tot = [ops["Total Op Info"] for ops in _comm(d).values()]
        wait[r] = sum(t["Communication Time Info"]["Wait Time(ms)"] for t in tot)
        rb = [t["Communication Bandwidth Info"]["RDMA"] for t in tot]
        rdma[r] = sum(x["Transit Size(MB)"] for x in rb) / sum(x["Transit Time(ms)"] for x in rb)
    assert max(rdma.values()) < 1.1 * min(rdma.values())
    assert min(wait[r] for r in dirs if r not in bad) > 3 * max(wait[r] for r in bad)
    mm = _matmul_median(dirs)
    assert max(mm.values()) < 1.02 * min(mm.values())
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and rc["culprit_transport"] == "HCCS"
    assert not set(rc["victim_ranks"]) & bad
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- inline-tokenize-some-steps
def test_some_ranks_tokenize_inline_in_some_steps(scenario) -> None:
    root = scenario("inline-tokenize-some-steps")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    events = {(s, r) for s, r in ev["events"]}
    culprits = set(ev["culprit_ranks"])
    for r, d in dirs.items():
        tr = trace(d)
        win = {}
        for e in tr:
            if str(e.get("name", "")).startswith("ProfilerStep#"):
                t = float(e["ts"])
                win[int(e["name"].split("#")[1])] = (t, t + float(e["dur"]))
        py = [e for e in tr if e.get("cat") == "python_function"]
        if r not in culprits:
            assert not py, r
            continue
        tok = [e for e in py if e["name"] == ev["tokenizer_frame"]]
        steps = sorted(next(s for s, (a, b) in win.items() if a <= float(e["ts"]) < b) for e in tok)
        assert steps == sorted(s for s, q in events if q == r)
        assert {e["name"] for e in py} == set(ev["python_frames"])
        info = json.loads((d / f"profiler_info_{r}.json").read_text())
        assert info["config"]["common_config"]["with_stack"] is True
        free = {int(x["Step"]): float(x["Free"]) for x in _steps(d)}
        mine = [s for s, q in events if q == r]
        assert min(free[s] for s in mine) > 25_000
        assert max(free[s] for s in free if s not in mine) < 5_000
    # the others wait in the event steps only
    other = next(r for r in dirs if r not in culprits)
    notov = {int(x["Step"]): float(x["Communication(Not Overlapped)"]) for x in _steps(dirs[other])}
    ev_steps = set(ev["event_steps"])
    assert (
        min(notov[s] for s in ev_steps) > max(notov[s] for s in notov if s not in ev_steps) + 20_000
    )
    mm = _matmul_median(dirs)
    assert max(mm.values()) < 1.02 * min(mm.values())
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "steps" and sorted(map(tuple, rc["events"])) == sorted(events)
    assert nums["step_us_event_steps_median"] > 1.3 * nums["step_us_clean_steps_median"]
