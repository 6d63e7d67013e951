"""The generalization development set: 5 more fault kinds (scenarios_dev.py) and their questions.

- The set loads by name, only its own file (and ``--dataset generalization`` does not pull it in),
  every item is ``split: tune``, every kind has >= 10 questions, half of them Chinese.
- Every reference and placeholder resolves against the generated answer keys, and every item checks
  something specific.
- The planted fault is in the written files (read with csv/json, independently of ingest).
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest


# ---------------------------------------------------------------- the fault is in the files
def _rank_dir(root: Path, rank: int) -> Path:
    for info in root.glob("*_ascend_pt/profiler_info_*.json"):
        if int(info.stem.rsplit("_", 1)[1]) == rank:
            return info.parent
    raise AssertionError(f"rank {rank} not found")


def _csv(root: Path, rank: int, name: str) -> list[dict[str, str]]:
    text = (_rank_dir(root, rank) / "ASCEND_PROFILER_OUTPUT" / name).read_text()
    return list(csv.DictReader(io.StringIO(text)))


def _kernel_us(root: Path, rank: int, step: int, pred: Any = None) -> float:
    return sum(
        float(x["Duration(us)"])
        for x in _csv(root, rank, "kernel_details.csv")
        if int(x["Step Id"]) == step
        and x["Type"].startswith("hcom_") is False
        and (pred is None or pred(x))
    )


def test_throttle_onset_files(scenario) -> None:
    root = scenario("throttle-onset")
    key = json.loads((root / "answer_key.json").read_text())
    r = key["root_cause"]["culprit_ranks"][0]
    other = key["root_cause"]["not_slow_ranks"][0]
    for s in key["step_ids"]:
        ratio = _kernel_us(root, r, s) / _kernel_us(root, other, s)
        if s in key["evidence"]["slow_steps"]:
            assert ratio == pytest.approx(key["evidence"]["ratio"], abs=0.03), s
        else:
            assert ratio == pytest.approx(1.0, abs=0.03), s

    # same operators and shapes on the throttled rank
    def sig(q: int) -> Counter[tuple[str, str]]:
        return Counter((x["Type"], x["Input Shapes"]) for x in _csv(root, q, "kernel_details.csv"))

    assert sig(r) == sig(other)


def _link_bw(root: Path, rank: int, transport: str) -> dict[int, float]:
    """Per step: RDMA bandwidth (MB/ms) of ``rank`` summed over its collectives."""
    cj = json.loads(
        (_rank_dir(root, rank) / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text()
    )
    out: dict[int, float] = {}
    for step, sv in cj.items():
        size = ms = 0.0
        for name, v in sv["collective"].items():
            if name == "Total Op Info":
                continue
            bw = v["Communication Bandwidth Info"][transport]
            size += bw["Transit Size(MB)"]
            ms += bw["Transit Time(ms)"]
        out[int(step.rsplit("step", 1)[-1])] = size / ms if ms else 0.0
    return out


def test_flapping_link_is_slow_only_in_its_steps(scenario) -> None:
    root = scenario("flapping-rdma-link")
    key = json.loads((root / "answer_key.json").read_text())
    a, _ = key["root_cause"]["culprit_link"]
    bw = _link_bw(root, a, "RDMA")
    slow = set(key["evidence"]["slow_steps"])
    fast = [v for s, v in bw.items() if s not in slow]
    assert slow and fast
    for s in slow:
        assert bw[s] < 0.5 * min(fast), (s, bw)
    peer = _link_bw(root, key["root_cause"]["not_slow_ranks"][0], "RDMA")
    assert max(peer.values()) / min(peer.values()) < 1.1


def test_congestion_hits_every_rank_in_its_steps(scenario) -> None:
    root = scenario("fabric-congestion")
    key = json.loads((root / "answer_key.json").read_text())
    slow = set(key["evidence"]["slow_steps"])
    for r in range(key["ranks"]):
        bw = _link_bw(root, r, "RDMA")
        fast = [v for s, v in bw.items() if s not in slow]
        assert all(bw[s] < 0.6 * min(fast) for s in slow), r


def test_alloc_churn_gaps_before_the_matmul(scenario) -> None:
    root = scenario("alloc-churn-rank")
    key = json.loads((root / "answer_key.json").read_text())
    r = key["root_cause"]["culprit_ranks"][0]
    other = key["root_cause"]["not_slow_ranks"][0]
    shape = key["evidence"]["before_op_shape"]

    def waits(q: int) -> list[float]:
        return [
            float(x["Wait Time(us)"])
            for x in _csv(root, q, "kernel_details.csv")
            if x["Type"] == key["evidence"]["before_op_type"]
            and x["Input Shapes"].strip('"') == shape
        ]

    big, small = waits(r), waits(other)
    n = key["evidence"]["stalls_per_step"] * key["steps"]
    assert len(big) == len(small) == n
    assert min(big) > 10 * max(small)
    # its kernels are not slower
    assert _kernel_us(root, r, key["step_ids"][0]) == pytest.approx(
        _kernel_us(root, other, key["step_ids"][0]), rel=0.02
    )


def test_hbm_slow_rank_only_vector_kernels(scenario) -> None:
    root = scenario("hbm-slow-rank")
    key = json.loads((root / "answer_key.json").read_text())
    r = key["root_cause"]["culprit_ranks"][0]
    other = key["root_cause"]["not_slow_ranks"][0]
    core = key["evidence"]["accelerator_core"]
    s = key["step_ids"][0]
    is_vec = lambda x: x["Accelerator Core"] == core  # noqa: E731
    is_mm = lambda x: x["Type"] == "MatMulV2"  # noqa: E731
    vec = _kernel_us(root, r, s, is_vec) / _kernel_us(root, other, s, is_vec)
    mm = _kernel_us(root, r, s, is_mm) / _kernel_us(root, other, s, is_mm)
    assert vec == pytest.approx(key["evidence"]["vector_ratio"], abs=0.05)
    assert mm == pytest.approx(1.0, abs=0.02)
