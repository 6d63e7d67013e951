"""Development set 34 of fault kinds (scenarios_dev34.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from _dev_files import PO, rank_dirs, read_csv, trace


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _steps(d: Path) -> list[dict[str, str]]:
    return read_csv(d, "step_trace_time.csv")


def _comm(d: Path, sec: str = "collective") -> dict[str, dict[str, Any]]:
    """{step key: {op name: record}} of one section of communication.json."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v[sec] for s, v in raw.items()}


def _dh(s: str) -> int:
    """Independent double_hash (ascend-formats.md §1.4): rolling 29/131 hashes mod 2**32."""
    a = b = 0
    for ch in s:
        a = (a * 29 + ord(ch)) % (1 << 32)
        b = (b * 131 + ord(ch)) % (1 << 32)
    return a * (1 << 32) + b


def _meta(d: Path) -> dict[str, Any]:
    return json.loads((d / "profiler_metadata.json").read_text())


def _groups(d: Path) -> dict[str, dict[str, Any]]:
    """{group name: parallel_group_info entry + its hash} of one rank."""
    out = {}
    for name, g in _meta(d)["parallel_group_info"].items():
        out[g["group_name"]] = dict(g, hash=str(_dh(name)))
    return out


def _host(d: Path) -> str:
    return d.name.rsplit("_", 4)[0]


def _span(x: dict[str, str]) -> float:
    return float(x["Stage"]) + float(x["Bubble"])


def _first_input(x: dict[str, str], i: int = 0) -> list[int]:
    """Dimensions of input ``i`` of a kernel_details row (the CANN value keeps its quotes)."""
    return [int(v) for v in x["Input Shapes"].strip('"').split(";")[i].split(",")]


# ---------------------------------------------------------------- ulysses-uneven-heads
def test_uneven_heads_give_the_first_sp_ranks_longer_attention(scenario) -> None:
    root = scenario("ulysses-uneven-heads")
    key = _key(root)
    nums, ev, rc = key["expected_numbers"], key["evidence"], key["root_cause"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    heads: dict[int, int] = {}
    fa: dict[int, list[float]] = {}
    mm_shapes: dict[int, Counter[str]] = {}
    gather_mb: dict[int, float] = {}
    a2a_wait: dict[int, float] = {}
    for r, d in dirs.items():
        dist = _meta(d)["distributed_args"]
        assert dist["num_attention_heads"] == nums["attention_heads"] == 20
        assert dist["ds_sequence_parallel_size"] == nums["sp_size"] == 8
        sp = _groups(d)["sp"]
        assert len(sp["global_ranks"]) == 8 and r in sp["global_ranks"]
        rows = read_csv(d, "kernel_details.csv")
        fas = [x for x in rows if x["Type"] == "FlashAttentionScore"]
        hidden = {_first_input(x)[-1] for x in fas}
        assert len(hidden) == 1  # one head count per rank
        heads[r] = hidden.pop() // 128
        assert heads[r] == nums["heads_by_sp_rank"][sp["group_rank"]]
        fa[r] = [float(x["Duration(us)"]) for x in fas]
        mm_shapes[r] = Counter(x["Input Shapes"] for x in rows if x["Type"] == "MatMulV2")
        # the all-to-all right after each forward attention (back to the sequence): its bytes
        rows.sort(key=lambda x: float(x["Start Time(us)"].strip()))
        after = {
            rows[i + 1]["Name"]
            for i, x in enumerate(rows[:-1])
            if x["Type"] == "FlashAttentionScore"
        }
        assert all(n.startswith("hcom_alltoallv_") for n in after)
        ops = _comm(d)
        mbs = [
            v["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"]
            for step_ops in ops.values()
            for n, v in step_ops.items()
            if n.split("@")[0] in after
        ]
        gather_mb[r] = median(mbs)
        a2a_wait[r] = sum(
            v["Communication Time Info"]["Wait Time(ms)"] * 1000
            for step_ops in ops.values()
            for n, v in step_ops.items()
            if n.startswith("hcom_alltoallv_") and n.endswith("@" + sp["hash"])
        ) / len(ops)
    three = sorted(r for r, h in heads.items() if h == 3)
    two = sorted(r for r, h in heads.items() if h == 2)
    assert three == rc["culprit_ranks"] == ev["culprit_ranks"] == [0, 1, 2, 3, 8, 9, 10, 11]
    assert sum(heads[r] for r in range(8)) == 20
    # the MatMuls (sequence-sharded) are the same everywhere; only the attention differs
    assert len({tuple(sorted(c.items())) for c in mm_shapes.values()}) == 1
    fa3 = [x for r in three for x in fa[r]]
    fa2 = [x for r in two for x in fa[r]]
    assert nums["fa_us_median_culprit"] == pytest.approx(median(fa3), rel=0.01)
    assert nums["fa_us_median_others"] == pytest.approx(median(fa2), rel=0.01)
    assert median(fa3) / median(fa2) == pytest.approx(1.5, rel=0.03)
    assert nums["gather_alltoall_mb_culprit"] == pytest.approx(
        median(gather_mb[r] for r in three), rel=0.01
    )
    assert nums["gather_alltoall_mb_others"] == pytest.approx(
        median(gather_mb[r] for r in two), rel=0.01
    )
    # the 2-head ranks wait for the 3-head ones in the all-to-alls
    assert min(a2a_wait[r] for r in two) > 4 * max(a2a_wait[r] for r in three)
    assert nums["others_alltoall_wait_us_per_step"] == pytest.approx(
        median(a2a_wait[r] for r in two), rel=0.02
    )
    assert rc["victim_ranks"] == two
    spans = [_span(x) for d in dirs.values() for x in _steps(d)]
    assert nums["median_step_us"] == pytest.approx(median(spans), rel=0.01)
    assert 0.05 * nums["median_step_us"] < nums["saving_us_per_step"]


# ---------------------------------------------------------------- ring-attn-kv-expanded
def test_ring_moves_kv_expanded_to_every_query_head(scenario) -> None:
    root = scenario("ring-attn-kv-expanded")
    key = _key(root)
    nums, ev, rc = key["expected_numbers"], key["evidence"], key["root_cause"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    shares: dict[int, float] = {}
    p2p_mb: list[float] = []
    p2p_ms: dict[float, list[float]] = {}
    fa_us: list[float] = []
    bw: list[float] = []
    for r, d in dirs.items():
        dist = _meta(d)["distributed_args"]
        groups, heads = dist["num_query_groups"], dist["num_attention_heads"]
        assert (groups, heads, dist["context_parallel_size"]) == (8, 32, 8)
        tokens = dist["seq_length"] // dist["context_parallel_size"]
        needed_mb = 2 * tokens * groups * dist["kv_channels"] * 2 / 1e6
        rows = read_csv(d, "kernel_details.csv")
        fas = [x for x in rows if x["Type"] == "FlashAttentionScore"]
        for x in fas:
            q, k = _first_input(x, 0), _first_input(x, 1)
            assert k[1] == q[1] == heads  # K / V over all 32 heads, not the 8 groups
        fa_us.extend(float(x["Duration(us)"]) for x in fas)
        per_step = Counter((x["Step Id"], x["Type"]) for x in rows)
        for step in {x["Step Id"] for x in rows}:
            assert per_step[(step, "Expand")] == nums["expand_per_step"] == 8
            assert per_step[(step, "ReduceSum")] == nums["reducesum_per_step"] == 8
        for step_ops in _comm(d, "p2p").values():
            for n, v in step_ops.items():
                if not n.startswith("hcom_batchSendRecv_"):
                    continue
                hc = v["Communication Bandwidth Info"]["HCCS"]
                mb = round(hc["Transit Size(MB)"], 1)
                p2p_mb.append(hc["Transit Size(MB)"])
                p2p_ms.setdefault(mb, []).append(v["Communication Time Info"]["Elapse Time(ms)"])
                bw.append(hc["Bandwidth(GB/s)"])
                # 4x (forward) / 8x (backward, K / V and dK / dV) one chunk's 8-group K / V
                assert hc["Transit Size(MB)"] / needed_mb in (
                    pytest.approx(4, rel=0.01),
                    pytest.approx(8, rel=0.01),
                )
        st = _steps(d)
        shares[r] = sum(float(x["Communication(Not Overlapped)"]) for x in st) / sum(
            _span(x) for x in st
        )
    assert sorted(p2p_ms) == pytest.approx(
        [nums["ring_kv_mb_forward"], nums["ring_kv_mb_backward"]], rel=0.01
    )
    fwd = median(p2p_ms[min(p2p_ms)]) * 1000
    assert nums["ring_transfer_us_forward"] == pytest.approx(fwd, rel=0.02)
    # the transfer outlasts the attention block beside it
    assert fwd > 2 * median(fa_us)
    assert 16 < median(bw) < 20  # HCCS at its normal rate
    assert max(shares.values()) < 1.1 * min(shares.values())  # every rank alike
    assert nums["median_comm_not_overlapped_share"] == pytest.approx(
        median(shares.values()), rel=0.02
    )
    assert ev["kv_shape_moved"] == "1,32,8192,128"
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert rc["mechanism"] == "exposed_communication"
    assert nums["ring_kv_mb_forward"] == pytest.approx(
        4 * nums["ring_kv_mb_forward_needed"], rel=1e-4
    )
    assert nums["saving_us_per_step"] > 0.25 * nums["median_step_us"]


# ---------------------------------------------------------------- npu-monitor-poll-node
def test_node1_launch_calls_block_card_after_card(scenario) -> None:
    root = scenario("npu-monitor-poll-node")
    key = _key(root)
    nums, rc = key["expected_numbers"], key["root_cause"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    longs: list[tuple[float, int, float]] = []  # (end µs, rank, duration µs)
    short: dict[str, list[float]] = {"culprit": [], "others": []}
    waits: dict[int, float] = {}
    culprits = set(nums["culprit_ranks"])
    for r, d in dirs.items():
        info = json.loads((d / f"profiler_info_{r}.json").read_text())
        assert info["config"]["experimental_config"]["_gc_detect_threshold"] is not None
        ev = trace(d)
        assert not any(e.get("cat") == "GC" for e in ev)
        for e in ev:
            if e.get("ph") != "X" or not e["name"].startswith("AscendCL@aclnn"):
                continue
            if e["dur"] > 1000:
                longs.append((float(e["ts"]) + e["dur"], r, e["dur"]))
            else:
                short["culprit" if r in culprits else "others"].append(e["dur"])
        ops = _comm(d)
        waits[r] = sum(
            v["Communication Time Info"]["Wait Time(ms)"]
            for step_ops in ops.values()
            for n, v in step_ops.items()
            if n != "Total Op Info"
        )
    hosts = {_host(dirs[r]) for _e, r, _x in longs}
    assert {r for _e, r, _x in longs} == culprits and len(hosts) == 1
    assert len(longs) == nums["blocked_launches"]
    assert nums["blocked_launch_us_median"] == pytest.approx(
        median(x for *_a, x in longs), rel=0.01
    )
    assert median(short["culprit"]) == pytest.approx(median(short["others"]), rel=0.1)
    # sweeps: the long calls end in card order (rank 8, 9, ...), at a fixed spacing
    longs.sort()
    sweeps: list[list[tuple[float, int]]] = []
    for e, r, _x in longs:
        if sweeps and r > sweeps[-1][-1][1] and e - sweeps[-1][-1][0] < 100_000:
            sweeps[-1].append((e, r))
        else:
            sweeps.append([(e, r)])
    assert len(sweeps) == nums["sweeps_captured"] >= 2
    gaps = [
        (s[i + 1][0] - s[i][0]) / (s[i + 1][1] - s[i][1]) for s in sweeps for i in range(len(s) - 1)
    ]
    assert nums["card_spacing_us_median"] == pytest.approx(median(gaps), rel=0.01)
    starts = [s[0][0] - (s[0][1] - min(culprits)) * median(gaps) for s in sweeps]
    period = median(b - a for a, b in pairwise(starts))
    assert nums["sweep_period_us_median"] == pytest.approx(period, rel=0.02)
    # node 0 waits for node 1 in the collectives
    assert min(waits[r] for r in dirs if r not in culprits) > max(waits[r] for r in culprits) * 0.9
    assert median(waits[r] for r in dirs if r not in culprits) > median(waits[r] for r in culprits)
    assert rc["culprit_kind"] == "group" and sorted(culprits) == rc["culprit_ranks"]
    assert rc["victim_ranks"] == sorted(set(dirs) - culprits)
    assert nums["saving_us_per_step"] > 0.05 * nums["mean_step_us"]


# ---------------------------------------------------------------- roce-incast-alltoall
def test_alltoall_rdma_slow_where_allreduce_is_not(scenario) -> None:
    root = scenario("roce-incast-alltoall")
    key = _key(root)
    nums, rc = key["expected_numbers"], key["root_cause"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    a2a_bw: list[float] = []
    ar_bw: list[float] = []
    pair_ratio: list[float] = []
    shares: dict[int, float] = {}
    for r, d in dirs.items():
        groups = _groups(d)
        ep, world = groups["ep"], groups["default_group"]
        assert ep["global_ranks"] == world["global_ranks"] == list(range(key["ranks"]))
        assert _meta(d)["distributed_args"]["expert_model_parallel_size"] == key["ranks"]
        for step_ops in _comm(d).values():
            for n, v in step_ops.items():
                rd = v["Communication Bandwidth Info"]["RDMA"]
                if n.startswith("hcom_alltoallv_") and n.endswith("@" + ep["hash"]):
                    a2a_bw.append(rd["Bandwidth(GB/s)"])
                    assert v["Communication Bandwidth Info"]["HCCS"]["Bandwidth(GB/s)"] > 16
                elif n.startswith("hcom_allReduce_") and rd["Transit Size(MB)"] > 1:
                    ar_bw.append(rd["Bandwidth(GB/s)"])
        # the same RDMA link, by op type (communication_matrix.json totals per step)
        mx = json.loads((d / PO / "communication_matrix.json").read_text())
        for parts in mx.values():
            links: dict[str, dict[str, float]] = {}
            for k, lk in parts["collective"].items():
                typ, h = k.split("-total@") if "-total@" in k else (None, None)
                if typ is None:
                    continue
                for pair, rec in lk.items():
                    if rec["Transport Type"] == "RDMA" and pair.split("-")[0] == str(r):
                        links.setdefault(pair, {})[f"{typ}@{h}"] = rec["Bandwidth(GB/s)"]
            for by in links.values():
                a = by.get(f"alltoall@{ep['hash']}")
                b = by.get(f"allreduce@{world['hash']}")
                if a and b:
                    pair_ratio.append(a / b)
        st = _steps(d)
        shares[r] = sum(float(x["Communication(Not Overlapped)"]) for x in st) / sum(
            _span(x) for x in st
        )
    assert len(pair_ratio) == key["ranks"] * key["steps"]
    assert max(pair_ratio) < 0.5  # every rank's RDMA link: all-to-all far below all-reduce
    assert nums["alltoall_rdma_bandwidth_gbps"] == pytest.approx(median(a2a_bw), rel=0.01)
    assert nums["allreduce_rdma_bandwidth_gbps"] == pytest.approx(median(ar_bw), rel=0.01)
    assert median(ar_bw) > 11  # the links themselves are fine
    assert nums["rdma_bandwidth_ratio_alltoall_vs_allreduce"] == pytest.approx(
        median(a2a_bw) / median(ar_bw), rel=0.02
    )
    assert max(shares.values()) < 1.1 * min(shares.values())  # every rank alike
    assert nums["median_comm_not_overlapped_share"] == pytest.approx(
        median(shares.values()), rel=0.02
    )
    assert rc["culprit_kind"] == "job" and rc["culprit_transport"] == "RDMA"
    assert nums["saving_us_per_step"] > 0.2 * nums["median_step_us"]
