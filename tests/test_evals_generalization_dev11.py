"""The ninth development set of fault kinds (scenarios_dev11.py): what each kind writes.

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

from advisor_chat.synth.model import double_hash

N_STEPS = 4


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _comm(d: Path) -> dict[str, Any]:
    """``{step: {op@hash: op info}}`` of the collectives in communication.json."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: {k: v for k, v in sec["collective"].items() if "@" in k} for s, sec in raw.items()}


def _groups(d: Path) -> dict[str, dict[str, Any]]:
    """``{group hash: parallel_group_info entry}`` from profiler_metadata.json."""
    md = json.loads((d / "profiler_metadata.json").read_text())
    return {str(double_hash(name)): g for name, g in md["parallel_group_info"].items()}


def _bw(op: dict[str, Any], transport: str) -> float:
    return float(op["Communication Bandwidth Info"][transport]["Bandwidth(GB/s)"])


# ---------------------------------------------------------------- tp-logits-allgather
def test_logits_gather_is_one_huge_tp_collective(scenario) -> None:
    root = scenario("tp-logits-allgather")
    key = _key(root)
    nums, ev_key = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    for d in list(dirs.values())[:3]:
        groups = _groups(d)
        hccl = [e for e in trace(d) if str(e.get("name", "")).startswith("hcom_")]
        size = {e["name"]: int(e["args"]["count"]) * 2 / 1e6 for e in hccl}
        gathers = [e for e in hccl if e["name"].startswith(ev_key["op_type"] + "_")]
        tp_gathers = []
        other_tp = []
        for step in _comm(d).values():
            for name, op in step.items():
                g = groups[name.split("@")[1]]
                if g["group_name"] != ev_key["group"]:
                    continue
                op_name = name.split("@")[0]
                (tp_gathers if op_name.startswith("hcom_allGather") else other_tp).append(
                    (op_name, op)
                )
        # one per step on the TP group, ~16x the payload of every other TP collective there
        assert len(tp_gathers) == ev_key["per_step"] * N_STEPS
        big = [size[n] for n, _ in tp_gathers]
        assert all(abs(s - ev_key["size_mb"]) <= 0.01 * ev_key["size_mb"] for s in big)
        assert min(big) > 10 * max(size[n] for n, _ in other_tp)
        # only on HCCS, at the links' normal bandwidth
        assert all(
            op["Communication Bandwidth Info"]["RDMA"]["Transit Size(MB)"] == 0
            for _, op in tp_gathers
        )
        assert all(_bw(op, "HCCS") > 15.0 for _, op in tp_gathers)
        durs = [float(e["dur"]) for e in gathers if e["name"] in {n for n, _ in tp_gathers}]
        want = nums["logits_allgather_us_median"]
        assert abs(median(durs) - want) <= 0.05 * want
        # the loss over the full vocabulary on every TP rank
        rows = kernel_rows(d)
        ce = [x for x in rows if x["Type"] == ev_key["loss_op"]]
        assert len(ce) == N_STEPS
        assert all(ev_key["loss_shape"] in x["Input Shapes"] for x in ce)
        assert all(x["Accelerator Core"] == "AI_VECTOR_CORE" for x in ce)
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["distributed_args"]["tensor_model_parallel_size"] == nums["tp_size"]
        assert md["distributed_args"]["vocab_size"] == nums["vocab_size"]
    # exposed on every rank alike: Communication(Not Overlapped) share
    shares = []
    for d in dirs.values():
        rows = read_csv(d, "step_trace_time.csv")
        notov = sum(float(x["Communication(Not Overlapped)"]) for x in rows)
        step = sum(
            float(x["Computing"]) + float(x["Communication(Not Overlapped)"]) + float(x["Free"])
            for x in rows
        )
        shares.append(notov / step)
    want = nums["median_comm_not_overlapped_share"]
    assert abs(median(shares) - want) <= 0.05 * want
    assert max(shares) - min(shares) < 0.05
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "exposed_communication"
    assert nums["saving_us_per_step"] > 0.9 * nums["logits_allgather_us_median"]


# ---------------------------------------------------------------- rail-switch-degraded
def test_rail_links_are_slow_on_every_node(scenario) -> None:
    root = scenario("rail-switch-degraded")
    key = _key(root)
    nums, ev_key = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"] == 32
    rail = ev_key["rail_ranks"]
    assert rail == sorted(r for r in dirs if r % 8 == ev_key["device_id"])
    assert len({r // 8 for r in rail}) == nums["nodes"] == 4  # one card on every node
    rdma: dict[int, float] = {}
    hccs: dict[int, float] = {}
    wait: dict[int, float] = {}
    for r, d in dirs.items():
        ops = [op for step in _comm(d).values() for op in step.values()]
        rdma[r] = median(
            _bw(op, "RDMA")
            for op in ops
            if op["Communication Bandwidth Info"]["RDMA"]["Transit Size(MB)"]
        )
        hccs[r] = median(
            _bw(op, "HCCS")
            for op in ops
            if op["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"]
        )
        wait[r] = sum(float(op["Communication Time Info"]["Wait Time(ms)"]) for op in ops)
    rest = [r for r in dirs if r not in rail]
    for r in rail:
        want = nums["rail_rdma_bandwidth_gbps"]
        assert abs(rdma[r] - want) <= 0.1 * want, r
    for r in rest:
        want = nums["other_rdma_bandwidth_gbps"]
        assert abs(rdma[r] - want) <= 0.1 * want, r
    # HCCS normal for the rail cards too; not one node, not one link: every rail card, same ratio
    assert abs(median(hccs[r] for r in rail) - median(hccs[r] for r in rest)) < 0.05 * median(
        hccs.values()
    )
    assert max(rdma[r] for r in rail) < 0.4 * min(rdma[r] for r in rest)
    # the other ranks wait (for the rail's DP group); the rail ranks wait least
    assert median(wait[r] for r in rest) > 3 * median(wait[r] for r in rail)
    # the slow links join the rail ranks only
    assert all(a in rail and b in rail for a, b in ev_key["slow_links"])
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and rc["culprit_ranks"] == rail
    assert rc["culprit_transport"] == "RDMA"
    assert set(rc["victim_ranks"]) <= set(rest)


# ---------------------------------------------------------------- zero-shard-imbalance
def test_rank0_optimizer_kernels_run_on_a_larger_shard(scenario) -> None:
    root = scenario("zero-shard-imbalance")
    key = _key(root)
    nums, ev_key = key["expected_numbers"], key["evidence"]
    culprit = ev_key["culprit_rank"]
    dirs = rank_dirs(root)
    opt_us: dict[int, float] = {}
    counts: dict[int, Counter[str]] = {}
    mm: dict[int, float] = {}
    for r in (culprit, 1, 7, 15):
        rows = kernel_rows(dirs[r])
        opt = [x for x in rows if x["Type"] in ev_key["op_types"]]
        counts[r] = Counter(x["Type"] for x in opt)
        opt_us[r] = sum(float(x["Duration(us)"]) for x in opt) / N_STEPS
        mm[r] = median(float(x["Duration(us)"]) for x in rows if x["Type"] == "MatMulV2")
        want = ev_key["culprit_input_shape"] if r == culprit else ev_key["peer_input_shapes"]
        assert all(x["Input Shapes"].strip('"') == want for x in opt), r
        assert len(opt) == nums["optimizer_kernels_per_step"] * N_STEPS
    others = [r for r in opt_us if r != culprit]
    # the same kernels, the same count, ~3x the time on rank 0
    assert all(counts[r] == counts[culprit] for r in others)
    ratio = opt_us[culprit] / median(opt_us[r] for r in others)
    assert abs(ratio - nums["optimizer_ratio"]) <= 0.05 * nums["optimizer_ratio"]
    want = nums["culprit_optimizer_us_per_step"]
    assert abs(opt_us[culprit] - want) <= 0.05 * want
    # its layer kernels are as fast as everyone's: not the card
    assert all(abs(mm[culprit] - mm[r]) <= 0.03 * mm[r] for r in others)
    # the others wait for it in the parameter all-gather that closes the step
    sync = {}
    for r in (culprit, *others):
        steps = _comm(dirs[r])
        last = [
            op
            for st in steps.values()
            for name, op in st.items()
            if name.startswith("hcom_allGather")
        ]
        assert len(last) == N_STEPS
        sync[r] = sum(
            float(op["Communication Time Info"]["Synchronization Time(ms)"]) for op in last
        )
    want = nums["others_allgather_wait_us_per_step_median"]
    got = median(sync[r] for r in others) * 1000 / N_STEPS
    assert abs(got - want) <= 0.1 * want
    assert sync[culprit] < 0.1 * min(sync[r] for r in others)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "rank" and rc["culprit_ranks"] == [culprit]
    assert set(others) <= set(rc["victim_ranks"])


# ---------------------------------------------------------------- new-group-every-step
def test_a_new_communicator_every_step(scenario) -> None:
    root = scenario("new-group-every-step")
    key = _key(root)
    nums, ev_key = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    for d in list(dirs.values())[:3]:
        groups = _groups(d)
        comm = _comm(d)
        assert len(comm) == N_STEPS
        hashes = {s: {name.split("@")[1] for name in ops} for s, ops in comm.items()}
        seen = Counter(h for hs in hashes.values() for h in hs)
        # exactly one group per step that no other step uses, all with every rank as members
        once = [h for h, n in seen.items() if n == 1]
        assert len(once) == nums["new_groups_in_capture"] == N_STEPS
        assert all(len(hashes[s] & set(once)) == 1 for s in hashes)
        for h in once:
            assert groups[h]["global_ranks"] == ev_key["group_members"]
        assert sorted(once) == sorted(ev_key["group_hashes"])
        # every group in the metadata has the same members; one more than the new ones (default)
        assert len(groups) == N_STEPS + 1
        assert all(g["global_ranks"] == ev_key["group_members"] for g in groups.values())
        # the device idles before that op: from the previous kernel's end to the op's start
        rows = sorted(kernel_rows(d), key=lambda x: float(x["Start Time(us)"]))
        ends = [(float(x["Start Time(us)"]) + float(x["Duration(us)"])) for x in rows]
        idles = []
        for ops in comm.values():
            for name, op in ops.items():
                if name.split("@")[1] not in once:
                    continue
                t0 = float(op["Communication Time Info"]["Start Timestamp(us)"])
                idles.append(t0 - max(e for e in ends if e <= t0))
        want = nums["idle_before_loss_allreduce_us_median"]
        assert abs(median(idles) - want) <= 0.05 * want
    # the idle is Free, on every rank alike
    free = []
    for d in dirs.values():
        rows = read_csv(d, "step_trace_time.csv")
        free.append(sum(float(x["Free"]) for x in rows) / len(rows))
    want = nums["median_free_us_per_step"]
    assert abs(median(free) - want) <= 0.05 * want
    assert min(free) > 0.9 * max(free)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["mechanism"] == "host_stall"
    assert nums["saving_us_per_step"] > 0.5 * nums["median_step_us"]
