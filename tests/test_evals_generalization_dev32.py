"""Development set 32 of fault kinds (scenarios_dev32.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from _dev_files import PO, rank_dirs, read_csv


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _steps(d: Path) -> list[dict[str, str]]:
    return read_csv(d, "step_trace_time.csv")


def _comm(d: Path, sec: str = "collective") -> dict[str, dict[str, Any]]:
    """{step key: {op name: record}} of one section of communication.json."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v[sec] for s, v in raw.items()}


def _groups(d: Path) -> dict[str, dict[str, Any]]:
    """{group hash (as in op names): parallel_group_info entry} of one rank."""
    md = json.loads((d / "profiler_metadata.json").read_text())
    return {str(_dh(name)): g for name, g in md["parallel_group_info"].items()}


def _dh(s: str) -> int:
    """Independent double_hash (ascend-formats.md §1.4): rolling 29/131 hashes mod 2**32."""
    a = b = 0
    for ch in s:
        a = (a * 29 + ord(ch)) % (1 << 32)
        b = (b * 131 + ord(ch)) % (1 << 32)
    return a * (1 << 32) + b


def _host(d: Path) -> str:
    """The hostname of a rank folder (``{hostname}_{pid}_{17-digit ts}_ascend_pt``)."""
    return d.name.rsplit("_", 4)[0]


# ---------------------------------------------------------------- pp-no-warmup-serial
def test_every_stage_alternates_forward_and_backward_and_waits(scenario) -> None:
    root = scenario("pp-no-warmup-serial")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    first = key["step_ids"][0]
    shares: dict[int, float] = {}
    spans: list[float] = []
    for r, d in dirs.items():
        md = json.loads((d / "profiler_metadata.json").read_text())
        dist = md["distributed_args"]
        assert dist["pipeline_model_parallel_size"] == ev["pipeline_stages"] == 4
        assert dist["num_micro_batches"] == ev["micro_batches"] == 8
        # forward and backward blocks strictly alternate: one micro-batch in flight
        rows = [x for x in read_csv(d, "kernel_details.csv") if int(x["Step Id"]) == first]
        rows.sort(key=lambda x: float(x["Start Time(us)"].strip()))
        blocks: list[str] = []
        for x in rows:
            t = {"FlashAttentionScore": "F", "FlashAttentionScoreGrad": "B"}.get(x["Type"])
            if t and (not blocks or blocks[-1] != t):
                blocks.append(t)
        assert blocks == ["F", "B"] * nums["micro_batches_per_step"], (r, blocks)
        fa = sum(1 for x in rows if x["Type"] == "FlashAttentionScore")
        assert fa == nums["flash_attention_per_stage_per_step"]
        assert any(x["Type"] == "hcom_receive_" for x in rows)
        st = _steps(d)
        bub = sum(float(x["Bubble"]) for x in st)
        span = [float(x["Stage"]) + float(x["Bubble"]) for x in st]
        spans.extend(span)
        shares[r] = bub / sum(span)
    # every stage waits most of the step in its receives, every stage alike
    assert min(shares.values()) > 0.6
    assert max(shares.values()) < 1.2 * min(shares.values())
    assert nums["bubble_share"] == pytest.approx(median(shares.values()), rel=0.02)
    assert nums["median_step_us"] == pytest.approx(median(spans), rel=0.01)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert rc["mechanism"] == "pipeline_imbalance"
    assert nums["bubble_share_pipelined"] < 0.5 * nums["bubble_share"]
    assert nums["saving_us_per_step"] > 0.3 * nums["median_step_us"]


# ---------------------------------------------------------------- scattered-4card-nodes
def test_four_cards_per_server_put_every_dp_allreduce_on_rdma(scenario) -> None:
    root = scenario("scattered-4card-nodes")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    host_of = {r: _host(d) for r, d in dirs.items()}
    per_host = Counter(host_of.values())
    assert len(per_host) == nums["servers"] == 4
    assert set(per_host.values()) == {nums["cards_per_server"]}
    assert {h: sorted(r for r in dirs if host_of[r] == h) for h in per_host} == ev["hosts"]
    rdma: list[float] = []
    notov: dict[int, float] = {}
    shares: dict[int, float] = {}
    for r, d in dirs.items():
        mem = read_csv(d, "memory_record.csv")
        devs = {x["Device Type"] for x in mem}
        assert devs <= {f"NPU:{i}" for i in ev["devices"]} and ev["devices"] == [0, 1, 2, 3]
        groups = _groups(d)
        dp = [h for h, g in groups.items() if g["group_name"] == "dp"]
        assert len(dp) == 1
        members = groups[dp[0]]["global_ranks"]
        assert len({host_of[m] for m in members}) == len(members)  # one member per server
        for ops in _comm(d).values():
            for name, v in ops.items():
                if name.startswith("hcom_allReduce_") and name.endswith("@" + dp[0]):
                    bw = v["Communication Bandwidth Info"]
                    assert bw["HCCS"]["Transit Size(MB)"] == 0
                    rdma.append(bw["RDMA"]["Transit Size(MB)"])
        st = _steps(d)
        notov[r] = median(float(x["Communication(Not Overlapped)"]) for x in st)
        shares[r] = sum(float(x["Communication(Not Overlapped)"]) for x in st) / sum(
            float(x["Stage"]) + float(x["Bubble"]) for x in st
        )
    assert len(rdma) == key["ranks"] * key["steps"] * nums["grad_allreduces_per_step"]
    assert nums["dp_allreduce_rdma_mb_per_card"] == pytest.approx(median(rdma), rel=0.01)
    assert nums["rdma_bytes_ratio_vs_packed"] == pytest.approx(3.0, rel=0.01)
    assert max(notov.values()) < 1.1 * min(notov.values())  # every rank alike
    assert nums["median_comm_not_overlapped_share"] == pytest.approx(
        median(shares.values()), rel=0.02
    )
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- hier-allreduce-leaders
def test_two_level_sync_sends_every_bucket_through_the_leaders(scenario) -> None:
    root = scenario("hier-allreduce-leaders")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    leaders = set(nums["leader_ranks"])
    assert leaders == {0, 8} == set(key["root_cause"]["culprit_ranks"])
    lead_mb: list[float] = []
    bsync: dict[int, list[float]] = {}
    for r, d in dirs.items():
        groups = _groups(d)
        names = {g["group_name"]: g["global_ranks"] for g in groups.values()}
        assert ("node_leaders" in names) == (r in leaders)
        if r in leaders:
            assert names["node_leaders"] == sorted(leaders)
        for ops in _comm(d).values():
            types = Counter(re.sub(r"_\d+_\d+_1@.*", "", n) for n in ops if n != "Total Op Info")
            assert types["hcom_reduce_"] == nums["buckets_per_step"]
            assert types["hcom_broadcast_"] == nums["buckets_per_step"]
            for name, v in ops.items():
                bw = v.get("Communication Bandwidth Info", {})
                if name.startswith("hcom_allReduce_") and bw["RDMA"]["Transit Size(MB)"] > 10:
                    assert r in leaders
                    lead_mb.append(bw["RDMA"]["Transit Size(MB)"])
                if name.startswith("hcom_broadcast_"):
                    bsync.setdefault(r, []).append(
                        v["Communication Time Info"]["Synchronization Time(ms)"] * 1000
                    )
    assert len(lead_mb) == len(leaders) * key["steps"] * nums["buckets_per_step"]
    assert nums["leader_allreduce_rdma_mb_per_bucket"] == pytest.approx(median(lead_mb), rel=0.01)
    others = [x for r, v in bsync.items() if r not in leaders for x in v]
    mine = [x for r, v in bsync.items() if r in leaders for x in v]
    # the others wait for the leaders in every broadcast
    assert median(others) > 20 * max(median(mine), 1.0)
    assert nums["broadcast_wait_us_median_others"] == pytest.approx(median(others), rel=0.05)
    assert ev["rdma_link"] == sorted(leaders)
    assert set(key["root_cause"]["victim_ranks"]) == set(dirs) - leaders
    assert nums["saving_us_per_step"] > 0.2 * nums["median_step_us"]


# ---------------------------------------------------------------- cross-rack-uplink
def test_cross_rack_rdma_links_are_slow_on_every_rail(scenario) -> None:
    root = scenario("cross-rack-uplink")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    rack = {r: re.search(r"-(r\d+)-", _host(d)).group(1) for r, d in dirs.items()}  # type: ignore[union-attr]
    assert sorted(set(rack.values())) == sorted(ev["racks"]) and len(ev["racks"]) == 2
    cross: list[float] = []
    inner: list[float] = []
    hccs: list[float] = []
    slow_src: set[int] = set()
    waits: dict[int, float] = {}
    for r, d in dirs.items():
        groups = _groups(d)
        mx = json.loads((d / PO / "communication_matrix.json").read_text())
        for parts in mx.values():
            for k, links in parts["collective"].items():
                if "-total@" not in k:
                    continue
                members = groups[k.split("@")[1]]["global_ranks"]
                for lk, rec in links.items():
                    a, b = (members[int(x)] for x in lk.split("-"))
                    if a != r:
                        continue
                    bw = rec["Bandwidth(GB/s)"]
                    if rec["Transport Type"] == "HCCS":
                        hccs.append(bw)
                    elif rec["Transport Type"] == "RDMA" and rack[a] != rack[b]:
                        cross.append(bw)
                        slow_src.add(a)
                    elif rec["Transport Type"] == "RDMA":
                        inner.append(bw)
        dp = [h for h, g in groups.items() if g["group_name"] == "dp"]
        waits[r] = median(
            v["Communication Time Info"]["Wait Time(ms)"]
            for ops in _comm(d).values()
            for n, v in ops.items()
            if n.endswith("@" + dp[0])
        )
    assert cross and inner and hccs
    assert max(cross) < 0.5 * min(inner)  # every cross-rack link slow, every in-rack one normal
    assert nums["cross_rack_bandwidth_ratio"] == pytest.approx(
        median(cross) / median(inner), rel=0.05
    )
    assert median(hccs) > 16
    assert sorted(slow_src) == key["root_cause"]["culprit_ranks"] == ev["culprit_ranks"]
    # the senders on the cross-rack hops finish last: the others wait for them
    vic = key["root_cause"]["victim_ranks"]
    assert vic and not set(vic) & slow_src
    assert min(waits[r] for r in vic) > 3 * max(waits[r] for r in slow_src)
    assert nums["saving_us_per_step"] > 0.15 * nums["median_step_us"]
