"""Known-answer tests for compare_ops: answers true by construction of tiny profiles."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from advisor_chat.analyzers import FindingKind, Severity, get_analyzer
from advisor_chat.analyzers.compare_ops import CompareOpsParams, compare_ops
from advisor_chat.errors import NotAnswerableError, ToolArgumentError
from advisor_chat.ingest.profile import Profile
from advisor_chat.ingest.schema import validate_table

S1 = "4096,4096;4096,11008"
S2 = "4096,1024;1024,4096"
STEP_US = 10_000.0


def _kernels(ranks=(0, 1, 2, 3), steps=(1, 2), slow_rank=3, extra=None) -> pd.DataFrame:
    rows = []
    for r in ranks:
        for s in steps:
            t = 1e6 * s
            ops = [
                (
                    "MatMul",
                    "aclnnMatmul_MatMulCommon_MatMul",
                    S1,
                    10,
                    200.0 if r == slow_rank else 100.0,
                )
            ]
            ops += [("MatMul", "aclnnMatmul_MatMulCommon_MatMul", S2, 5, 50.0)]
            ops += [("Add", "aclnnAdd_AddAiCore_Add", "4096,4096;4096,4096", 20, 10.0)]
            ops += [("hcom_allReduce_", "hcom_allReduce__1_0_1", "", 2, 300.0)]
            if extra:
                ops += extra(r, s)
            for op_type, name, shape, n, dur in ops:
                core = "COMMUNICATION" if op_type.startswith("hcom") else "AI_CORE"
                if op_type == "NonZero":
                    core = "AI_CPU"
                for _ in range(n):
                    rows.append(
                        dict(
                            rank=r,
                            step=s,
                            name=name,
                            op_type=op_type,
                            accelerator_core=core,
                            start_us=t,
                            duration_us=dur,
                            wait_us=0.0,
                            input_shapes=shape,
                            op_state="dynamic",
                        )
                    )
                    t += dur + 1.0
    return validate_table("kernels", pd.DataFrame(rows))


def _step_trace(ranks=(0, 1, 2, 3), steps=(1, 2), slow_rank=3) -> pd.DataFrame:
    rows = []
    for r in ranks:
        for s in steps:
            step = STEP_US + (1000.0 if r == slow_rank else 0.0)
            rows.append(
                dict(
                    rank=r,
                    step=s,
                    computing_us=step * 0.8,
                    communication_not_overlapped_us=step * 0.1,
                    overlapped_us=0.0,
                    communication_us=step * 0.1,
                    free_us=step * 0.1,
                    stage_us=step,
                    bubble_us=0.0,
                    step_us=step,
                )
            )
    return validate_table("step_trace", pd.DataFrame(rows))


def _profile(kernels: pd.DataFrame | None, step_trace: pd.DataFrame | None = None) -> Profile:
    tables = {}
    if kernels is not None:
        tables["kernels"] = kernels
    if step_trace is not None:
        tables["step_trace"] = step_trace
    return Profile(root=Path("."), layout="synthetic", tables=tables)


def test_registered_with_params() -> None:
    spec = get_analyzer("compare_ops")
    assert spec.params is CompareOpsParams
    assert "op" in spec.description.lower()


def test_same_count_slower_at_one_shape_is_op_regression() -> None:
    prof = _profile(_kernels(), _step_trace())
    res = compare_ops(prof, CompareOpsParams())
    assert res.metrics["rank_a"] == 0 and res.metrics["rank_b"] == 3
    regs = [f for f in res.findings if f.kind is FindingKind.OP_REGRESSION]
    assert len(regs) == 1  # only S1 differs; S2 and Add are equal
    f = regs[0]
    assert f.ranks == (3,)
    assert S1 in f.summary
    assert f.metrics["avg_ratio"] == pytest.approx(2.0)
    assert f.metrics["delta_us_per_step"] == pytest.approx(10 * 100.0)  # 10 calls x +100 us
    assert f.metrics["share_of_step_ratio"] == pytest.approx(1000.0 / 11000.0)
    assert f.severity is Severity.HIGH
    assert "matmul_slow" in f.symptom_tags and "op_regression_shape" in f.symptom_tags
    assert f.estimated_gain_us == pytest.approx(1000.0)
    assert f.evidence and f.evidence[0].table == "kernels"
    assert not [x for x in res.findings if x.kind is FindingKind.LOAD_IMBALANCE]
    # table sorted by |delta_total_us| with S1 first, communication excluded
    bs = res.tables["by_shape"]
    assert bs.iloc[0]["input_shapes"] == S1
    assert bs.iloc[0]["delta_total_us"] == pytest.approx(2 * 10 * 100.0)
    assert not bs["op_type"].str.startswith("hcom").any()
    bt = res.tables["by_type"].set_index("op_type")
    assert bt.loc["MatMul", "count_a"] == bt.loc["MatMul", "count_b"] == 30
    assert bt.loc["Add", "delta_total_us"] == 0
    # each type's share of its rank's kernel time: its total over the sum of every type's total
    for side in ("a", "b"):
        share = bt[f"kernel_time_share_{side}"]
        assert share.sum() == pytest.approx(1.0)
        expected = bt.loc["MatMul", f"total_us_{side}"] / bt[f"total_us_{side}"].sum()
        assert share["MatMul"] == pytest.approx(expected)


def test_different_count_is_load_imbalance() -> None:
    def extra(r, s):
        return [("Add", "aclnnAdd_AddAiCore_Add", "4096,4096;4096,4096", 30 if r == 2 else 0, 10.0)]

    prof = _profile(_kernels(extra=extra), _step_trace())
    res = compare_ops(prof, CompareOpsParams(rank_a=0, rank_b=2, by="type"))
    imb = [f for f in res.findings if f.kind is FindingKind.LOAD_IMBALANCE]
    assert len(imb) == 1
    assert imb[0].ranks == (2,)
    assert imb[0].metrics["count_heavy"] == 2 * 50 and imb[0].metrics["count_light"] == 2 * 20
    assert imb[0].metrics["delta_us_per_step"] == pytest.approx(300.0)
    assert not [f for f in res.findings if f.kind is FindingKind.OP_REGRESSION]
    assert list(res.table.columns[:2]) == ["op_type", "accelerator_core"]


def test_aicpu_and_dynamic_shapes() -> None:
    def extra(r, s):
        return [("NonZero", "NonZero", f"{s * 7},4", 5, 100.0)]  # 500 us/step AI CPU, shape varies

    prof = _profile(_kernels(extra=extra), _step_trace())
    res = compare_ops(prof, CompareOpsParams())
    aic = [f for f in res.findings if f.kind is FindingKind.AICPU_OP]
    assert len(aic) == 1
    assert aic[0].metrics["aicpu_us_per_step"] == pytest.approx(500.0)
    assert set(aic[0].ranks) == {0, 1, 2, 3}
    dyn = [f for f in res.findings if f.kind is FindingKind.DYNAMIC_SHAPE]
    assert len(dyn) == 1 and "NonZero" in dyn[0].summary
    assert dyn[0].metrics["shapes_total"] == 2 and dyn[0].metrics["shapes_max_per_step"] == 1


def test_unknown_rank_names_valid_ranks() -> None:
    prof = _profile(_kernels(), _step_trace())
    with pytest.raises(ToolArgumentError, match="0-3"):
        compare_ops(prof, CompareOpsParams(rank_b=16))


def test_no_kernels_not_answerable() -> None:
    with pytest.raises(NotAnswerableError, match="kernel"):
        compare_ops(_profile(None, _step_trace()), CompareOpsParams())


def test_one_rank_and_one_step() -> None:
    prof = _profile(_kernels(ranks=(0,), steps=(1,)), None)
    res = compare_ops(prof, CompareOpsParams())
    assert res.metrics["rank_a"] == res.metrics["rank_b"] == 0
    assert not [f for f in res.findings if f.kind is FindingKind.OP_REGRESSION]
    assert any("only rank 0" in n for n in res.notes)


def test_uniform_slowdown_is_one_finding() -> None:
    # rank 3 runs every op 1.25x slower (a slower device), equal counts
    k = _kernels(slow_rank=-1)
    k.loc[(k["rank"] == 3) & (k["accelerator_core"] != "COMMUNICATION"), "duration_us"] *= 1.25
    prof = _profile(k, _step_trace())
    res = compare_ops(prof, CompareOpsParams())
    regs = [f for f in res.findings if f.kind is FindingKind.OP_REGRESSION]
    assert [f.id for f in regs] == ["compare_ops.op_regression.r3.all_ops"]
    assert regs[0].metrics["overall_ratio"] == pytest.approx(1.25)
    assert regs[0].metrics["groups_slowed"] == regs[0].metrics["groups"] == 3
    # per step: 0.25 x (10x100 + 5x50 + 20x10) = 362.5 us
    assert regs[0].metrics["delta_us_per_step"] == pytest.approx(362.5)
    assert "compute_straggler" in regs[0].symptom_tags


def test_a_kernel_file_cut_short_is_compared_with_no_other_rank(tmp_path, real_samples) -> None:
    """Half of rank 0's kernel_details.csv cut off (mid-row): its counts are incomplete, so the
    comparison leaves it out (no "different work" findings about it) and refuses it by name."""
    import shutil

    from advisor_chat.analyzers.base import get_analyzer
    from advisor_chat.errors import NotAnswerableError
    from advisor_chat.ingest import load_profile

    root = tmp_path / "cut"
    shutil.copytree(real_samples / "pt-text-level1-2rank", root)
    f = next(root.glob("rank0_*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    prof = load_profile(root, use_cache=False, progress=False)
    spec = get_analyzer("compare_ops")
    res = spec.run(prof, spec.params())
    assert any("left out: rank(s) 0" in n for n in res.notes), res.notes
    assert not any(0 in f.ranks for f in res.findings if "load_imbalance" in f.id)
    with pytest.raises(NotAnswerableError, match="cut short"):
        spec.run(prof, spec.params(rank_a=0, rank_b=1))
    # the intact sample compares both ranks
    whole = spec.run(
        load_profile(real_samples / "pt-text-level1-2rank", use_cache=False, progress=False),
        spec.params(),
    )
    assert not any("left out" in n for n in whole.notes)


def test_named_operators_per_step_on_every_rank() -> None:
    """``ops``: a category or op types, totalled per step on every rank (construction: rank 3's
    MatMul at shape S1 runs 200 us instead of 100 us, 10 calls; S2 5 calls of 50 us each)."""

    def extra(r: int, s: int) -> list[tuple]:  # an optimizer kernel, 3x longer on rank 1
        return [("ForeachMulScalar", "aclnnForeachMulScalar", "4096", 2, 90.0 if r == 1 else 30.0)]

    p = _profile(_kernels(extra=extra), _step_trace())
    res = compare_ops(p, CompareOpsParams(rank_b=3, ops="matmul"))
    tbl = res.tables["ops_by_rank"].set_index("rank")
    assert tbl.loc[3, "time_per_step_us"] == pytest.approx(10 * 200.0 + 5 * 50.0)
    assert tbl.loc[0, "time_per_step_us"] == pytest.approx(10 * 100.0 + 5 * 50.0)
    assert tbl.loc[0, "count_per_step"] == 15 and tbl.loc[0, "steps"] == 2
    assert res.metrics["ops_b_us"] == pytest.approx(2250.0)
    assert res.metrics["ops_others_median_us"] == pytest.approx(1250.0)
    assert res.metrics["ops_times_others_median"] == pytest.approx(2250.0 / 1250.0)
    assert res.metrics["ops_ranks_others"] == 3
    assert res.tables["ops_by_rank"].attrs["op_types"] == ["MatMul"]

    opt = compare_ops(p, CompareOpsParams(rank_b=1, ops="optimizer"))
    assert opt.metrics["ops_b_us"] == pytest.approx(180.0)
    assert opt.metrics["ops_others_median_us"] == pytest.approx(60.0)
    # op types by name, case-insensitive, comma-separated; communication is never counted
    by_name = compare_ops(p, CompareOpsParams(rank_b=0, ops="add, hcom_allReduce_"))
    assert by_name.metrics["ops_b_us"] == pytest.approx(20 * 10.0)
    none = compare_ops(p, CompareOpsParams(rank_b=0, ops="Conv2D"))
    assert none.metrics["ops_types_matched"] == 0 and none.metrics["ops_b_us"] == 0
    with pytest.raises(ToolArgumentError, match="names no operator"):
        compare_ops(p, CompareOpsParams(rank_b=0, ops=" , "))
    assert "ops_by_rank" not in compare_ops(p, CompareOpsParams(rank_b=0)).tables


def test_named_operators_per_launch_over_the_steps_that_run_them() -> None:
    """``ops_by_type``: per launch medians and launches per step that runs the operator
    (construction: Conv3D runs only in step 2, 2 launches of 400 µs on every rank; its
    gradient Conv3DBackpropFilter once in step 2, 900 µs; 2 steps with kernels)."""

    def extra(r: int, s: int) -> list[tuple]:
        if s != 2:
            return []
        return [
            ("Conv3D", "aclnnConv3d", "1,3,2,224,224", 2, 400.0),
            ("Conv3DBackpropFilter", "aclnnConv3dBackpropFilter", "1,3,2,224,224", 1, 900.0),
        ]

    p = _profile(_kernels(extra=extra), _step_trace())
    res = compare_ops(p, CompareOpsParams(rank_b=0, ops="Conv3D,Conv3DBackpropFilter"))
    t = res.tables["ops_by_type"].set_index("op_type")
    assert list(t.index) == ["Conv3DBackpropFilter", "Conv3D"]  # most time per step first
    conv = t.loc["Conv3D"]
    assert conv["median_us"] == pytest.approx(400.0)
    assert conv["launches_per_step"] == 2 and conv["steps_with_op"] == 1 and conv["steps"] == 2
    assert conv["time_per_step_us"] == pytest.approx(2 * 400.0 / 2)  # over every step
    assert conv["ranks"] == 4 and conv["accelerator_core"] == "AI_CORE"
    assert t.loc["Conv3DBackpropFilter", "median_us"] == pytest.approx(900.0)
    # nothing named that runs: an empty table with its columns
    none = compare_ops(p, CompareOpsParams(rank_b=0, ops="Conv2D")).tables["ops_by_type"]
    assert none.empty and "median_us" in none.columns
