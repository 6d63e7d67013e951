"""The second generalization development set: 5 more fault kinds (scenarios_dev2.py) and questions.

- The set loads by name, only its own file (neither ``--dataset generalization`` nor
  ``--dataset generalization_dev`` pulls it in), every item is ``split: tune``, every kind has >= 10
  questions, half of them Chinese.
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
from statistics import median
from typing import Any

import pytest

from advisor_chat.evals.dataset import default_dataset_dir, load_dataset
from advisor_chat.evals.runner import _fill, question_context, resolve_expect
from advisor_chat.synth import SCENARIOS
from advisor_chat.synth.scenarios_dev import DEV_KINDS
from advisor_chat.synth.scenarios_dev2 import DEV2_KINDS
from advisor_chat.synth.scenarios_faults import FAULT_KINDS

PO = "ASCEND_PROFILER_OUTPUT"


def test_dev2_set_loads_by_name_with_every_kind_half_chinese() -> None:
    items = load_dataset("generalization_dev2")
    assert {i.dataset for i in items} == {"generalization_dev2"}
    assert all(i.split == "tune" for i in items)
    by_kind = Counter(i.scenario for i in items)
    assert set(by_kind) == set(DEV2_KINDS) and len(DEV2_KINDS) == 5
    assert not set(DEV2_KINDS) & set(FAULT_KINDS)
    assert not set(DEV2_KINDS) & set(DEV_KINDS)
    for kind in DEV2_KINDS:
        assert kind in SCENARIOS, kind
        assert by_kind[kind] >= 10, kind
        zh = sum(1 for i in items if i.scenario == kind and i.lang == "zh")
        assert 2 * zh == by_kind[kind], kind
    # a development set: neither in the default run nor in the benchmark's or dev set's own run
    assert not any(i.dataset == "generalization_dev2" for i in load_dataset())
    assert {i.dataset for i in load_dataset("generalization")} == {"generalization"}
    assert {i.dataset for i in load_dataset("generalization_dev")} == {"generalization_dev"}
    d = default_dataset_dir()
    assert d is not None
    head = (d / "generalization_dev2.yaml").read_text(encoding="utf-8")
    assert "WITHOUT reading" in head
    # expected facts are references, never typed: no literal rank list or number in an expectation
    for it in items:
        for t in it.turns:
            for v in (t.expect.culprit, t.expect.victims, t.expect.category, t.expect.mechanism):
                assert v is None or (isinstance(v, str | list) and "@key:" in str(v)), it.id


def test_dev2_references_resolve_against_the_generated_keys(scenario) -> None:
    items = load_dataset("generalization_dev2")
    keys: dict[str, dict[str, Any]] = {}
    for it in items:
        assert it.scenario is not None
        if it.scenario not in keys:
            root = scenario(it.scenario, **it.gen)
            keys[it.scenario] = json.loads((root / "answer_key.json").read_text(encoding="utf-8"))
        facts = keys[it.scenario]
        ctx = question_context(facts)
        for t in it.turns:
            q = _fill(t.q, ctx)
            assert "{" not in q, it.id
            r = resolve_expect(t.expect, facts, ctx, it.lang)
            checked = [r.culprit, r.culprits, r.evidence, r.first_suggestion, r.yes_no, r.numbers]
            assert any(x for x in checked), f"{it.id}: nothing specific is checked"


# ---------------------------------------------------------------- the fault is in the files
def _rank_dirs(root: Path) -> dict[int, Path]:
    out = {}
    for info in root.glob("*_ascend_pt/profiler_info_*.json"):
        out[int(info.stem.rsplit("_", 1)[1])] = info.parent
    return out


def _csv(d: Path, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((d / PO / name).read_bytes().decode(), newline="")))


def _trace(d: Path) -> list[dict[str, Any]]:
    return json.loads((d / PO / "trace_view.json").read_text())


def _flows_us(d: Path) -> list[float]:
    """HostToDevice flow lengths (launch start → kernel start) of compute kernels, µs."""
    ev = _trace(d)
    s = {
        e["id"]: float(e["ts"]) for e in ev if e.get("ph") == "s" and e.get("cat") == "HostToDevice"
    }
    f = {
        e["id"]: float(e["ts"]) for e in ev if e.get("ph") == "f" and e.get("cat") == "HostToDevice"
    }
    return [f[i] - s[i] for i in s if i in f and int(i) < 10**9]


def _kernel_rows(d: Path) -> list[dict[str, str]]:
    return [x for x in _csv(d, "kernel_details.csv") if x["Accelerator Core"] != "HCCL"]


def test_launch_blocking_on_every_rank(scenario) -> None:
    root = scenario("launch-blocking-job")
    key = json.loads((root / "answer_key.json").read_text())
    ev = key["evidence"]
    free_share = []
    for _r, d in sorted(_rank_dirs(root).items()):
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["ENV_VARIABLES"][ev["env_var"]] == ev["env_value"]
        # kernels start right after their launch call ends (no run-ahead), on every rank
        assert median(_flows_us(d)) < 100
        st = _csv(d, "step_trace_time.csv")
        free_share.append(sum(float(x["Free"]) for x in st) / sum(float(x["Stage"]) for x in st))
        assert all(float(x["Overlapped"]) == 0 for x in st)
    assert min(free_share) > 0.15 and max(free_share) - min(free_share) < 0.02


def test_intra_node_traffic_on_rdma(scenario) -> None:
    root = scenario("intra-node-roce")
    key = json.loads((root / "answer_key.json").read_text())
    dirs = _rank_dirs(root)
    md = json.loads((dirs[0] / "profiler_metadata.json").read_text())
    assert md["hccl_env"][key["evidence"]["env_var"]] == "1"
    for r in (0, key["ranks"] - 1):
        cj = json.loads((dirs[r] / PO / "communication.json").read_text())
        for sv in cj.values():
            for name, v in sv["collective"].items():
                if name == "Total Op Info":
                    continue
                assert v["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"] == 0
                assert v["Communication Bandwidth Info"]["RDMA"]["Transit Size(MB)"] > 0
        mj = json.loads((dirs[r] / PO / "communication_matrix.json").read_text())
        for sv in mj.values():
            for name, links in sv["collective"].items():
                if "-total@" not in name:
                    continue
                for lk, v in links.items():
                    a, b = (int(x) for x in lk.split("-"))
                    if a != b:  # world group: local index == global rank
                        assert v["Transport Type"] == "RDMA"
                        same = a // 8 == b // 8
                        want = key["evidence"][
                            "intra_node_bandwidth_gbps" if same else "inter_node_bandwidth_gbps"
                        ]
                        assert v["Bandwidth(GB/s)"] == pytest.approx(want, rel=0.08), lk


def test_shared_device_idles_with_work_queued(scenario) -> None:
    root = scenario("device-shared-rank")
    key = json.loads((root / "answer_key.json").read_text())
    r = key["root_cause"]["culprit_ranks"][0]
    other = key["root_cause"]["not_slow_ranks"][0]
    dirs = _rank_dirs(root)
    big = [float(x["Wait Time(us)"]) for x in _kernel_rows(dirs[r])]
    small = [float(x["Wait Time(us)"]) for x in _kernel_rows(dirs[other])]
    n = key["evidence"]["idle_gaps_per_step"] * key["steps"]
    assert sum(1 for w in big if w > 200) >= n > sum(1 for w in small if w > 200)
    # the host launched them well ahead (longer flows than on the other ranks, not host-bound)
    assert median(_flows_us(dirs[r])) == pytest.approx(key["evidence"]["launch_lead_us"], rel=0.05)
    assert median(_flows_us(dirs[r])) > 1.5 * median(_flows_us(dirs[other]))

    # same kernels, same durations
    def dur(q: int) -> float:
        return sum(float(x["Duration(us)"]) for x in _kernel_rows(dirs[q]))

    assert dur(r) == pytest.approx(dur(other), rel=0.02)


def test_last_stage_runs_the_output_layer_first_stage_waits_in_send(scenario) -> None:
    root = scenario("pp-last-stage-head")
    key = json.loads((root / "answer_key.json").read_text())
    ev = key["evidence"]
    dirs = _rank_dirs(root)
    s0, s1 = key["expected_numbers"]["stages"]
    types = {q: Counter(x["Type"] for x in _kernel_rows(dirs[q])) for q in (s0[0], s1[0])}
    for t in ev["head_op_types"]:
        assert types[s1[0]][t] > 0
    assert types[s0[0]]["CrossEntropyLoss"] == 0
    shapes = {x["Input Shapes"].strip('"') for x in _kernel_rows(dirs[s1[0]])}
    assert ev["head_shape"] in shapes

    def send_wait_ms(q: int) -> float:
        cj = json.loads((dirs[q] / PO / "communication.json").read_text())
        return sum(
            v["Communication Time Info"]["Wait Time(ms)"]
            for sv in cj.values()
            for name, v in sv["p2p"].items()
            if name.startswith("hcom_send")
        )

    per_step = send_wait_ms(s0[0]) * 1000 / key["steps"]
    assert per_step == pytest.approx(ev["stage0_send_wait_us_per_step"], rel=0.1)
    assert send_wait_ms(s1[0]) == 0


def test_transdata_around_every_matmul(scenario) -> None:
    root = scenario("transdata-format-churn")
    key = json.loads((root / "answer_key.json").read_text())
    ev = key["evidence"]
    shares = []
    for _q, d in sorted(_rank_dirs(root).items()):
        rows = _kernel_rows(d)
        td = [x for x in rows if x["Type"] == ev["operator"]]
        mm = [x for x in rows if x["Type"] == "MatMulV2"]
        assert len(td) == 2 * len(mm) == ev["transdata_per_step"] * key["steps"]
        assert {x["Input Formats"] for x in td} == {"ND", "FRACTAL_NZ"}
        shares.append(
            sum(float(x["Duration(us)"]) for x in td) / sum(float(x["Duration(us)"]) for x in rows)
        )
    assert min(shares) == pytest.approx(ev["share"], abs=0.02)
    assert max(shares) - min(shares) < 0.01
