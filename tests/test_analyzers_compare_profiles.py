"""Known-answer tests for compare_profiles with two hand-built profiles."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from advisor_chat.analyzers import FindingKind, Severity, get_analyzer
from advisor_chat.analyzers.compare_profiles import CompareProfilesParams, compare_profiles
from advisor_chat.errors import NotAnswerableError
from advisor_chat.ingest.profile import Profile
from advisor_chat.ingest.schema import validate_table


def _profile(
    step_us: list[float], n_ar: int, fused: int, cann: str, comm_us: float = 100.0
) -> Profile:
    """2 ranks x len(step_us) steps; n_ar allReduce per rank-step; fused MatmulAllReduce count."""
    st, k, c, meta = [], [], [], []
    for r in range(2):
        meta.append(
            dict(
                rank=r,
                source_dir=f"/x/r{r}",
                export_type="synthetic",
                cann_version=cann,
                torch_npu_version="2.1.0",
            )
        )
        for s, y in enumerate(step_us):
            comm = n_ar * comm_us
            st.append(
                dict(
                    rank=r,
                    step=s,
                    computing_us=y - comm - 100.0,
                    communication_not_overlapped_us=comm,
                    overlapped_us=0.0,
                    communication_us=comm,
                    free_us=100.0,
                    stage_us=y,
                    bubble_us=0.0,
                    step_us=y,
                )
            )
            t = 1e6 * (s + 1)
            for i in range(n_ar):
                k.append(
                    dict(
                        rank=r,
                        step=s,
                        name=f"hcom_allReduce__1_{i}_1",
                        op_type="hcom_allReduce_",
                        accelerator_core="COMMUNICATION",
                        start_us=t + i,
                        duration_us=comm_us,
                        wait_us=0.0,
                    )
                )
                c.append(
                    dict(
                        rank=r,
                        group="g1",
                        step=s,
                        op_name=f"hcom_allReduce__1_{i}_1",
                        op_type="allreduce",
                        comm_kind="collective",
                        start_us=t + i,
                        elapse_ms=comm_us / 1000,
                        transit_ms=0.05,
                        wait_ms=0.0,
                        synchronization_ms=0.0,
                        idle_ms=0.0,
                        wait_ratio=0.0,
                        synchronization_ratio=0.0,
                    )
                )
            for i in range(fused):
                k.append(
                    dict(
                        rank=r,
                        step=s,
                        name="MatmulAllReduce",
                        op_type="MatmulAllReduce",
                        accelerator_core="MIX_AIC",
                        start_us=t + 100 + i,
                        duration_us=50.0,
                        wait_us=0.0,
                    )
                )
            k.append(
                dict(
                    rank=r,
                    step=s,
                    name="MatMulV2",
                    op_type="MatMulV2",
                    accelerator_core="AI_CORE",
                    start_us=t + 500,
                    duration_us=1000.0,
                    wait_us=0.0,
                )
            )
    return Profile(
        root=Path("."),
        layout="synthetic",
        tables={
            "step_trace": validate_table("step_trace", pd.DataFrame(st)),
            "kernels": validate_table("kernels", pd.DataFrame(k)),
            "comm_ops": validate_table("comm_ops", pd.DataFrame(c)),
            "meta": validate_table("meta", pd.DataFrame(meta)),
        },
    )


def test_registered_needs_baseline() -> None:
    assert get_analyzer("compare_profiles").needs_baseline


def test_hccl_doubled_regression_after_upgrade() -> None:
    base = _profile([10_000.0, 10_050.0, 9_950.0], n_ar=10, fused=12, cann="7.0.1")
    new = _profile([12_000.0, 12_050.0, 11_950.0], n_ar=20, fused=0, cann="8.0.RC2")
    res = compare_profiles(new, CompareProfilesParams(), baseline=base)
    assert res.metrics["verdict_code"] == 1
    assert res.metrics["delta_step_us"] == pytest.approx(2000.0)
    ids = {f.id: f for f in res.findings}
    reg = ids["compare_profiles.profile_diff.regression"]
    assert reg.severity is Severity.HIGH and "profile_regression" in reg.symptom_tags
    assert "cann_upgrade" in reg.symptom_tags
    h = ids["compare_profiles.profile_diff.hccl_op_count"]
    assert h.metrics["base_hccl_ops_per_step"] == 10 and h.metrics["new_hccl_ops_per_step"] == 20
    assert h.metrics["hccl_count_ratio"] == pytest.approx(2.0)
    assert {"hccl_op_count_increase", "cann_upgrade", "mc2_opportunity"} <= set(h.symptom_tags)
    assert "MatmulAllReduce" in h.summary
    assert h.metrics["delta_comm_kernel_us_per_step"] == pytest.approx(1000.0)
    assert "compare_profiles.profile_diff.versions" in ids
    t = res.table.set_index("component")
    assert t.loc["step_us", "delta_us"] == pytest.approx(2000.0)
    assert t.loc["communication_not_overlapped_us", "delta_us"] == pytest.approx(1000.0)
    ops = res.tables["op_types"].set_index("op_type")
    assert ops.loc["hcom_allReduce_", "count_ratio"] == pytest.approx(2.0)
    assert ops.loc["MatmulAllReduce", "new_count_per_step"] == 0
    # Chinese summaries carry identifiers and numbers only, no English words
    from test_diagnosis_rules import assert_no_english_sentence

    for f in res.findings:
        assert_no_english_sentence(f.summary_zh)
        assert "rank-step" not in f.summary_zh and "computing_us" not in f.summary_zh
    assert "MatmulAllReduce（每卡每步 12 个）" in h.summary_zh
    assert "未被掩盖的通信 +1000 us" in reg.summary_zh


def test_change_within_noise_has_no_verdict() -> None:
    # jitter: per-step medians 10000, 10400, 9600 -> std 400; threshold = 2 x 400 = 800 us
    base = _profile([10_000.0, 10_400.0, 9_600.0], n_ar=10, fused=0, cann="8.0.RC2")
    new = _profile([10_500.0, 10_900.0, 10_100.0], n_ar=10, fused=0, cann="8.0.RC2")
    res = compare_profiles(new, CompareProfilesParams(), baseline=base)
    assert res.metrics["noise_threshold_us"] == pytest.approx(800.0)
    assert res.metrics["verdict_code"] == 0
    assert not res.findings
    assert any("no verdict" in n and "800" in n for n in res.notes)


def test_improvement_is_info() -> None:
    base = _profile([12_000.0] * 3, n_ar=10, fused=0, cann="8.0.RC2")
    new = _profile([10_000.0] * 3, n_ar=10, fused=0, cann="8.0.RC2")
    res = compare_profiles(new, CompareProfilesParams(), baseline=base)
    f = [x for x in res.findings if x.kind is FindingKind.PROFILE_DIFF]
    assert [x.id for x in f] == ["compare_profiles.profile_diff.improvement"]
    assert f[0].severity is Severity.INFO and f[0].estimated_gain_us is None


def test_no_baseline_not_answerable() -> None:
    with pytest.raises(NotAnswerableError, match="baseline"):
        compare_profiles(_profile([1.0] * 3, 1, 0, "8"), CompareProfilesParams())
