from __future__ import annotations

import pytest
from _analyzers_a_helpers import make_profile, step_rows

from advisor_chat.analyzers import get_analyzer
from advisor_chat.analyzers.base import Severity
from advisor_chat.analyzers.env_check import CHECKED_SETTINGS
from advisor_chat.symptoms import unknown_tags


def meta_rows(n: int, env: dict[str, str], **kw):
    return [
        {
            "rank": r,
            "source_dir": f"/p/r{r}",
            "export_type": "text",
            "env": dict(env),
            "world_size": n,
            **kw,
        }
        for r in range(n)
    ]


def first_ops(n: int, late_wait_ms: float):
    return [
        {
            "rank": r,
            "group": "g",
            "step": 1,
            "op_name": "hcom_broadcast__1_0",
            "op_type": "broadcast",
            "comm_kind": "collective",
            "start_us": 1e15 + r,
            "elapse_ms": late_wait_ms + 1,
            "transit_ms": 1.0,
            "wait_ms": late_wait_ms if r == 0 else 0.1,
            "synchronization_ms": 0.0,
            "idle_ms": 0.0,
            "wait_ratio": 0.5,
            "synchronization_ratio": 0.0,
        }
        for r in range(n)
    ]


def run(p):
    return get_analyzer("env_check").run(p)


def test_known_answer_settings():
    env = {
        "ASCEND_LAUNCH_BLOCKING": "1",
        "PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:128",
        "ASCEND_GLOBAL_LOG_LEVEL": "1",
        "HCCL_CONNECT_TIMEOUT": "60",
    }
    p = make_profile(
        {
            "meta": meta_rows(4, env, tp_size=3, pp_size=2),
            "step_trace": step_rows(4, free=50_000.0),
            "comm_ops": first_ops(4, late_wait_ms=45_000.0),
        }
    )
    res = run(p)
    ids = {f.id for f in res.findings}
    assert {
        "env_check.env.ascend_launch_blocking",
        "env_check.env.pytorch_npu_alloc_conf",
        "env_check.env.ascend_global_log_level",
        "env_check.env.hccl_connect_timeout",
        "env_check.env.tp_size_not_power_of_two",
    } <= ids
    assert "env_check.env.pp_size_not_power_of_two" not in ids
    hc = next(f for f in res.findings if f.id == "env_check.env.hccl_connect_timeout")
    # 45 s observed first-collective wait >= 0.5 × 60 s -> risk
    assert hc.severity is Severity.HIGH
    assert hc.metrics["observed_wait_s"] == pytest.approx(45.0)
    assert hc.metrics["timeout_s"] == 60.0
    lb = next(f for f in res.findings if f.id == "env_check.env.ascend_launch_blocking")
    assert lb.severity is Severity.HIGH  # Free 50/175 ms of the step
    assert res.metrics["first_collective_wait_max_s"] == pytest.approx(45.0)
    for f in res.findings:
        assert not unknown_tags(f.symptom_tags)
    assert len(res.table[res.table["rank"] >= 0]) == 4 * len(CHECKED_SETTINGS)  # ranks x settings


def test_defaults_are_quiet_and_no_env_is_unknown():
    env = {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "ASCEND_GLOBAL_LOG_LEVEL": "3"}
    res = run(make_profile({"meta": meta_rows(2, env, tp_size=2)}))
    assert not res.findings
    res2 = run(make_profile({"meta": meta_rows(2, {})}))
    assert not res2.findings
    assert set(res2.table["status"]) == {"unknown"}
    assert any("no environment" in n for n in res2.notes)


def test_empty_profile():
    res = run(make_profile({}))
    assert not res.findings


def test_first_collective_late_rank():
    rows = first_ops(16, late_wait_ms=0.0)
    for r in rows:
        r["wait_ms"] = 0.5 if r["rank"] == 5 else 2500.0
    res = run(
        make_profile({"comm_ops": rows, "meta": meta_rows(16, {"HCCL_CONNECT_TIMEOUT": "4"})})
    )
    f = next(f for f in res.findings if f.id == "env_check.env.first_collective_late_r5")
    assert f.ranks == (5,)
    assert f.metrics["late_by_s"] == pytest.approx(2.4995)
    assert f.metrics["connect_timeout_s"] == 4.0
    assert f.severity is Severity.HIGH  # 2.5 s of a 4 s timeout
    assert "first_collective_late" in f.symptom_tags


def test_scenario_hccl_wait_skew(scenario):
    import json

    from advisor_chat.ingest import load_profile

    path = scenario("hccl-wait-skew")
    key = json.loads((path / "answer_key.json").read_text())
    res = run(load_profile(path))
    f = next(f for f in res.findings if "first_collective_late" in f.id)
    assert list(f.ranks) == key["slow_ranks"]
    assert f.metrics["late_by_s"] == pytest.approx(
        key["expected_numbers"]["late_by_us"] / 1e6, rel=0.01
    )
    assert (
        f.metrics["connect_timeout_s"] == key["expected_numbers"]["hccl_connect_timeout_default_s"]
    )


@pytest.mark.parametrize(
    ("setting", "path"), [("HCCL_INTRA_ROCE_ENABLE", "RoCE"), ("HCCL_INTRA_PCIE_ENABLE", "PCIe")]
)
def test_intra_node_traffic_off_hccs_is_flagged_only_when_set_to_1(setting: str, path: str):
    env = {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "ASCEND_GLOBAL_LOG_LEVEL": "3"}
    off = run(make_profile({"meta": meta_rows(4, {**env, setting: "0"})}))
    assert not [f for f in off.findings if f.id == f"env_check.env.{setting.lower()}"]
    on = run(make_profile({"meta": meta_rows(4, {**env, setting: "1"})}))
    f = next(f for f in on.findings if f.id == f"env_check.env.{setting.lower()}")
    assert f.ranks == (0, 1, 2, 3) and "every rank" in f.summary and path in f.summary
    assert "所有卡" in f.summary_zh and not unknown_tags(f.symptom_tags)


def _matrix(sizes_mb: list[float]):
    return [
        {
            "rank": 0,
            "group": "g",
            "step": 1,
            "op_name": f"hcom_allReduce__{i}",
            "src_rank": 0,
            "dst_rank": 1,
            "transport": "HCCS",
            "transit_size_mb": mb,
            "transit_time_ms": mb / 20.0,
            "bandwidth_gbps": 20.0,
        }
        for i, mb in enumerate(sizes_mb)
    ]


def test_small_hccl_buffsize_is_flagged_with_the_rounds_of_the_largest_transfer():
    env = {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "ASCEND_GLOBAL_LOG_LEVEL": "3"}
    default = run(make_profile({"meta": meta_rows(4, {**env, "HCCL_BUFFSIZE": "200"})}))
    assert not [f for f in default.findings if f.id == "env_check.env.hccl_buffsize"]
    unset = run(make_profile({"meta": meta_rows(4, env)}))
    assert not [f for f in unset.findings if f.id == "env_check.env.hccl_buffsize"]
    small = run(
        make_profile(
            {
                "meta": meta_rows(4, {**env, "HCCL_BUFFSIZE": "16"}),
                "comm_matrix": _matrix([3.0, 67.6, 40.0]),
            }
        )
    )
    f = next(f for f in small.findings if f.id == "env_check.env.hccl_buffsize")
    assert f.ranks == (0, 1, 2, 3) and "comm_setting" in f.symptom_tags
    assert f.metrics["buffsize_mb"] == 16 and f.metrics["default_mb"] == 200
    # 67.6 MB through a 16 MB buffer: ceil(67.6 / 16) = 5 rounds
    assert f.metrics["largest_transit_mb"] == pytest.approx(67.6) and f.metrics["rounds"] == 5
    assert "HCCL_BUFFSIZE" in f.summary_zh and not unknown_tags(f.symptom_tags)
