"""The fourth generalization development set: 5 more fault kinds (scenarios_dev4.py) and questions.

The set's shape and references: tests/test_evals_dev_sets.py.

- The planted fault is in the written files (read with csv/json, independently of ingest and of
  the generator's own helpers).
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from _dev_files import PO
from _dev_files import kernel_rows as _kernel_rows
from _dev_files import rank_dirs as _rank_dirs
from _dev_files import read_csv as _csv
from _dev_files import trace as _trace


# ---------------------------------------------------------------- independent readers
def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _meta(d: Path) -> dict[str, Any]:
    return json.loads((d / "profiler_metadata.json").read_text())


def _ops(d: Path) -> dict[int, dict[str, dict[str, Any]]]:
    """{step: {op name@hash: op}} of the collectives in communication.json (totals left out)."""
    cj = json.loads((d / PO / "communication.json").read_text())
    return {
        int(s[4:]): {n: v for n, v in sv["collective"].items() if n != "Total Op Info"}
        for s, sv in cj.items()
    }


def _group_hash(name: str) -> str:
    """msprof-analyze's group hash of a communicator name (ascend-formats.md §1.4)."""
    h29 = h131 = 0
    for ch in name:
        h29 = (h29 * 29 + ord(ch)) & 0xFFFFFFFF
        h131 = (h131 * 131 + ord(ch)) & 0xFFFFFFFF
    return str((h29 << 32) | h131)


def _group(d: Path, group_name: str) -> tuple[str, list[int]]:
    """(group hash, global ranks) of this rank's communicator of one group name."""
    for comm, g in _meta(d)["parallel_group_info"].items():
        if g["group_name"] == group_name:
            return _group_hash(comm), list(g["global_ranks"])
    raise AssertionError(f"no {group_name} group in {d.name}")


def _by_step(rows: list[dict[str, str]]) -> dict[int, list[dict[str, str]]]:
    out: dict[int, list[dict[str, str]]] = {}
    for x in rows:
        out.setdefault(int(x["Step Id"]), []).append(x)
    for v in out.values():
        v.sort(key=lambda x: float(x["Start Time(us)"].strip()))
    return out


def _start(x: dict[str, str]) -> float:
    return float(x["Start Time(us)"].strip())


def _steps(d: Path) -> dict[int, dict[str, str]]:
    return {int(x["Step"]): x for x in _csv(d, "step_trace_time.csv")}


def _share(d: Path, column: str) -> float:
    st = _csv(d, "step_trace_time.csv")
    return sum(float(x[column]) for x in st) / sum(float(x["Stage"]) for x in st)


def _host(d: Path) -> str:
    return d.name.split("_", 1)[0]


# ---------------------------------------------------------------- the fault is in the files
def test_checkpoint_rank0_idles_at_the_start_of_every_fifth_step(scenario) -> None:
    root = scenario("checkpoint-rank0-periodic")
    key = _key(root)
    ev = key["evidence"]
    rc = key["root_cause"]
    r0 = ev["only_rank"]
    saves = ev["checkpoint_steps"]
    assert rc["culprit_ranks"] == [r0] and rc["steps"] == saves and len(saves) >= 2
    assert {b - a for a, b in pairwise(saves)} == {ev["period_steps"]}
    dirs = _rank_dirs(root)
    stall_us = ev["stall_ms"] * 1000
    first = {
        q: {s: _start(rows[0]) for s, rows in _by_step(_kernel_rows(d)).items()}
        for q, d in dirs.items()
    }
    counts = {s: len(rows) for s, rows in _by_step(_kernel_rows(dirs[r0])).items()}
    assert len(set(counts.values())) == 1  # no extra device work in the save steps
    other = rc["not_slow_ranks"][0]
    for q, d in sorted(dirs.items()):
        for s, x in _steps(d).items():
            prep = float(x["Preparing"])
            if q == r0 and s in saves:
                assert prep == pytest.approx(stall_us, rel=0.08), (q, s)
                # rank 0's device runs nothing until the save is over; the others start on time
                assert first[r0][s] - first[other][s] == pytest.approx(stall_us, rel=0.08)
            else:
                assert prep < 1000, (q, s)
        if q == r0:
            continue
        # the others wait for rank 0 in the first collective of a save step, not in other steps
        for s, ops in _ops(d).items():
            op0 = min(
                ops.values(), key=lambda v: v["Communication Time Info"]["Start Timestamp(us)"]
            )
            sync_ms = op0["Communication Time Info"]["Synchronization Time(ms)"]
            if s in saves:
                assert sync_ms > 0.8 * ev["stall_ms"], (q, s)
            else:
                assert sync_ms < 5, (q, s)


def test_buffsize_splits_the_large_allreduces_into_slow_loops(scenario) -> None:
    root = scenario("hccl-buffsize-small")
    key = _key(root)
    ev = key["evidence"]
    shares = []
    for _q, d in sorted(_rank_dirs(root).items()):
        assert _meta(d)["hccl_env"]["HCCL_BUFFSIZE"] == ev["env_value"]
        big_bw, small_bw, big_n, small_n, sync = [], [], set(), set(), []
        for ops in _ops(d).values():
            for v in ops.values():
                hccs = v["Communication Bandwidth Info"]["HCCS"]
                n = sum(c for c, _t in hccs["Size Distribution"].values())
                sync.append(v["Communication Time Info"]["Synchronization Time(ms)"])
                # every transfer fits in the buffer
                assert max(float(s) for s in hccs["Size Distribution"]) <= ev["buffsize_mb"]
                if hccs["Transit Size(MB)"] > ev["buffsize_mb"]:
                    big_bw.append(hccs["Bandwidth(GB/s)"])
                    big_n.add(n)
                else:
                    small_bw.append(hccs["Bandwidth(GB/s)"])
                    small_n.add(n)
        # a large op moves its data in `loops` transfers per link, a small one in one
        assert len(small_n) == 1 and big_n == {ev["loops_per_op"] * next(iter(small_n))}
        assert median(big_bw) < 0.8 * median(small_bw)
        assert median(big_bw) == pytest.approx(ev["hccs_bandwidth_gbps_large_ops"], rel=0.05)
        assert max(sync) < 1.0  # no late rank
        shares.append(_share(d, "Communication(Not Overlapped)"))
    assert min(shares) > 0.25 and max(shares) - min(shares) < 0.02


def test_dynamic_shapes_compile_in_the_same_steps_on_every_rank(scenario) -> None:
    root = scenario("dynamic-shape-recompile")
    key = _key(root)
    ev = key["evidence"]
    compile_steps = set(ev["compile_steps"])
    api = f"AscendCL@{ev['compile_api']}"
    for _q, d in sorted(_rank_dirs(root).items()):
        by_step = _by_step(_kernel_rows(d))
        sigs = {s: {(x["Type"], x["Input Shapes"]) for x in rows} for s, rows in by_step.items()}
        order = sorted(sigs)
        seen = set(sigs[order[0]])
        for s in order[1:]:
            assert bool(sigs[s] - seen) == (s in compile_steps), s
            seen |= sigs[s]
        for s in ev[
            "cached_shape_steps"
        ]:  # a length seen before: new to the usual steps, no compile
            assert sigs[s] != sigs[order[0]] and s not in compile_steps
        ev_all = _trace(d)
        windows = [
            (int(e["name"].split("#")[1]), float(e["ts"]), float(e["ts"]) + float(e["dur"]))
            for e in ev_all
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
        ]
        calls = [e for e in ev_all if e.get("ph") == "X" and e.get("name") == api]
        assert calls  # every step launches through the compile path (cache hits are short)
        long_calls: Counter[int] = Counter()
        long_us: dict[int, float] = {}
        for e in calls:
            if float(e["dur"]) < 10_000:
                continue
            ts = float(e["ts"])
            s = next(s for s, a, b in windows if a <= ts < b)
            long_calls[s] += 1
            long_us[s] = long_us.get(s, 0.0) + float(e["dur"])
        assert set(long_calls) == compile_steps
        assert set(long_calls.values()) == {ev["compiles_per_step"]}
        steps = _steps(d)
        normal_free = max(float(steps[s]["Free"]) for s in ev["normal_steps"])
        for s in compile_steps:
            free = float(steps[s]["Free"])
            # the device idles while the host compiles (the host was ahead by its launch queue)
            assert free > 20 * normal_free and long_us[s] > free


def test_moe_hot_rank_gets_more_tokens_and_its_group_waits_in_alltoall(scenario) -> None:
    root = scenario("moe-hot-expert")
    key = _key(root)
    ev = key["evidence"]
    hot = key["root_cause"]["culprit_ranks"][0]
    dirs = _rank_dirs(root)
    mates = [q for q in ev["ep_group"] if q != hot]
    tokens: dict[int, set[int]] = {}
    gmm_us: dict[int, float] = {}
    for q, d in dirs.items():
        rows = [x for x in _kernel_rows(d) if x["Type"] == ev["operator"]]
        # token rows: first dim of the 2-D outputs (the weight-gradient outputs are 3-D)
        outs = [x["Output Shapes"].strip('"').split(",") for x in rows]
        tokens[q] = {int(o[0]) for o in outs if len(o) == 2}
        gmm_us[q] = sum(float(x["Duration(us)"]) for x in rows)
        assert Counter(x["Type"] for x in _csv(d, "kernel_details.csv"))["hcom_alltoallv_"] > 0
    assert tokens[hot] == {ev["hot_token_rows"]}
    for q in dirs:
        if q in mates:
            assert max(tokens[q]) < ev["balanced_token_rows"], q
        elif q != hot:
            assert tokens[q] == {ev["balanced_token_rows"]}, q
    others = [q for q in dirs if q != hot]
    assert gmm_us[hot] / median(gmm_us[q] for q in others) == pytest.approx(
        ev["token_ratio"], rel=0.05
    )

    def a2a_sync_ms(q: int) -> float:
        return sum(
            v["Communication Time Info"]["Synchronization Time(ms)"]
            for ops in _ops(dirs[q]).values()
            for n, v in ops.items()
            if n.startswith("hcom_alltoallv_")
        )

    assert min(a2a_sync_ms(q) for q in mates) > 10 * a2a_sync_ms(hot) + 1.0
    # in a group-mate's matrix the AlltoAll link towards the hot rank carries the most tokens
    h, members = _group(dirs[mates[0]], "ep")
    me, to_hot = members.index(mates[0]), members.index(hot)
    mj = json.loads((dirs[mates[0]] / PO / "communication_matrix.json").read_text())
    for sv in mj.values():
        links = sv["collective"][f"alltoall-total@{h}"]
        size = {lk: v["Transit Size(MB)"] for lk, v in links.items() if lk.startswith(f"{me}-")}
        peers = [v for lk, v in size.items() if lk not in (f"{me}-{me}", f"{me}-{to_hot}")]
        assert size[f"{me}-{to_hot}"] > 1.8 * max(peers)


def test_cross_node_tp_groups_span_two_nodes_and_use_rdma(scenario) -> None:
    root = scenario("cross-node-tp")
    key = _key(root)
    ev = key["evidence"]
    dirs = _rank_dirs(root)
    host = {q: _host(d) for q, d in dirs.items()}
    shares = []
    rdma_bw: list[float] = []
    for _q, d in sorted(dirs.items()):
        md = _meta(d)
        assert md["distributed_args"]["tensor_model_parallel_size"] == ev["tp_size"]
        tp_hash, tp = _group(d, "tp")
        dp_hash, dp = _group(d, "dp")
        assert len(tp) == ev["tp_size"] and len({host[r] for r in tp}) == ev["nodes_per_tp_group"]
        assert len({host[r] for r in dp}) == 1  # the DP pairs sit inside a node
        n_tp = 0
        for ops in _ops(d).values():
            for name, v in ops.items():
                bw = v["Communication Bandwidth Info"]
                if name.endswith(f"@{tp_hash}"):
                    n_tp += 1
                    assert bw["RDMA"]["Transit Size(MB)"] > 0 and bw["HCCS"]["Transit Size(MB)"] > 0
                    rdma_bw.append(bw["RDMA"]["Bandwidth(GB/s)"])
                elif name.endswith(f"@{dp_hash}"):
                    assert bw["RDMA"]["Transit Size(MB)"] == 0
                assert (
                    v["Communication Time Info"]["Synchronization Time(ms)"] < 5.0
                )  # no late rank
        assert n_tp == key["expected_numbers"]["tp_allreduces_per_step"] * key["steps"]
        shares.append(_share(d, "Communication(Not Overlapped)"))
    # every RDMA transfer at the normal link speed: placement, not a bad link
    assert median(rdma_bw) == pytest.approx(ev["tp_rdma_bandwidth_gbps"], rel=0.05)
    assert min(rdma_bw) > 0.85 * median(rdma_bw)
    assert min(shares) > 0.5 and max(shares) - min(shares) < 0.02
