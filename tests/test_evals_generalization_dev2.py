"""The second generalization development set: 5 more fault kinds (scenarios_dev2.py) and questions.

The set's shape and references: tests/test_evals_dev_sets.py.

- The planted fault is in the written files (read with csv/json, independently of ingest).
"""

from __future__ import annotations

import json
from collections import Counter
from statistics import median

import pytest
from _dev_files import PO
from _dev_files import flows_us as _flows_us
from _dev_files import kernel_rows as _kernel_rows
from _dev_files import rank_dirs as _rank_dirs
from _dev_files import read_csv as _csv

# ---------------------------------------------------------------- the fault is in the files


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
