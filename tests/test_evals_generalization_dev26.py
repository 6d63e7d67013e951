"""The twenty-fourth development set of fault kinds (scenarios_dev26.py): what each kind writes.

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


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _steps(d: Path) -> dict[int, dict[str, float]]:
    return {
        int(x["Step"]): {k: float(v) for k, v in x.items() if k != "Step"}
        for x in read_csv(d, "step_trace_time.csv")
    }


def _wait_ms(d: Path) -> float:
    raw = json.loads((d / PO / "communication.json").read_text())
    return sum(
        v["collective"]["Total Op Info"]["Communication Time Info"]["Wait Time(ms)"]
        for v in raw.values()
    )


def _x(d: Path) -> list[dict[str, Any]]:
    return [e for e in trace(d) if e.get("ph") == "X"]


def _mean_computing(d: Path) -> float:
    st = _steps(d)
    return sum(v["Computing"] for v in st.values()) / len(st)


# ---------------------------------------------------------------- torch-deterministic-on
def test_deterministic_paths_run_on_few_cores_on_every_rank(scenario) -> None:
    root = scenario("torch-deterministic-on")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    comp: dict[int, float] = {}
    for r, d in dirs.items():
        rows = kernel_rows(d)
        n = Counter((int(x["Step Id"]), x["Type"]) for x in rows)
        for s in {int(x["Step Id"]) for x in rows}:
            assert n[(s, "EmbeddingDenseGradV2")] == nums["embedding_grad_per_step"] == 1
            assert n[(s, "IndexPutV2")] == nums["index_put_per_step"] == 1
            assert n[(s, "ReduceSum")] == nums["reduce_sum_per_step"]
        for op, bd in ev["block_dim"].items():
            mine = [x for x in rows if x["Type"] == op]
            assert mine and all(int(x["Block Dim"]) == bd for x in mine), op
        emb = [float(x["Duration(us)"]) for x in rows if x["Type"] == "EmbeddingDenseGradV2"]
        put = [float(x["Duration(us)"]) for x in rows if x["Type"] == "IndexPutV2"]
        assert min(emb) > 30 * nums["embedding_grad_us_normal"]
        assert min(put) > 30 * nums["index_put_us_normal"]
        # the MatMuls are not touched: all cores, normal durations
        mm = [x for x in rows if x["Type"] == "MatMulV2"]
        assert all(int(x["Block Dim"]) == 24 for x in mm)
        stat = {x["OP Type"]: x for x in read_csv(d, "op_statistic.csv")}
        top = [x["OP Type"] for x in read_csv(d, "op_statistic.csv")][:6]
        assert "EmbeddingDenseGradV2" in top and "IndexPutV2" in top
        assert int(stat["ReduceSum"]["Count"]) == nums["reduce_sum_per_step"] * key["steps"]
        comp[r] = _mean_computing(d)
    assert max(comp.values()) < 1.03 * min(comp.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    extra = nums["deterministic_us_per_step"] - nums["deterministic_us_per_step_normal"]
    assert abs(nums["saving_us_per_step"] - extra) < 0.1 * extra
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- contiguous-copy-churn
def test_contiguous_copies_surround_every_attention(scenario) -> None:
    root = scenario("contiguous-copy-churn")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    comp: dict[int, float] = {}
    for r, d in dirs.items():
        stat = {x["OP Type"]: x for x in read_csv(d, "op_statistic.csv")}
        assert int(stat["ViewCopy"]["Count"]) == nums["view_copy_per_step"] * key["steps"]
        assert int(stat["AsStrided"]["Count"]) == nums["as_strided_per_step"] * key["steps"]
        top = [x["OP Type"] for x in read_csv(d, "op_statistic.csv")][:3]
        assert "ViewCopy" in top
        rows = kernel_rows(d)
        copies = [x for x in rows if x["Type"] in ev["operators"]]
        assert all(set(x["Input Formats"].split(";")) == {"ND"} for x in copies)
        # per step: the three q / k / v copies into [b, heads, s, d] right after each QKV MatMul
        for i, x in enumerate(rows):
            if x["Type"] == "MatMulV2" and x["Input Shapes"].strip('"') == "4096,4096;12288,4096":
                nxt = [y["Type"] for y in rows[i + 1 : i + 8]]
                assert nxt == ["ViewCopy"] * 3 + ["AsStrided"] * 4
                assert rows[i + 1]["Output Shapes"].strip('"') == "1,32,4096,128"
        comp[r] = _mean_computing(d)
    assert max(comp.values()) < 1.03 * min(comp.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["copy_kernels_per_step"] == nums["view_copy_per_step"] + nums["as_strided_per_step"]
    assert (
        abs(nums["saving_us_per_step"] - nums["copy_us_per_step"]) < 0.15 * nums["copy_us_per_step"]
    )
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- tensor-dump-one-rank
def test_one_rank_dumps_activations_and_the_others_wait(scenario) -> None:
    root = scenario("tensor-dump-one-rank")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = ev["culprit_rank"]
    free: dict[int, float] = {}
    wait: dict[int, float] = {}
    for r, d in dirs.items():
        x = _x(d)
        d2h = [
            e
            for e in x
            if e["name"] == "MEMCPY_ASYNC" and e["args"].get("operation") == "device to host"
        ]
        py = [e for e in x if e.get("cat") == "python_function" and "dump_tensor" in e["name"]]
        if r == bad:
            assert len(d2h) == len(py) == ev["per_step"] * key["steps"]
            assert {e["args"]["size(B)"] for e in d2h} == {2 * 4096 * 4096}
            syncs = [e for e in x if e["name"] == "AscendCL@aclrtSynchronizeStream"]
            assert len(syncs) == len(d2h)
            saves = [e for e in x if e["name"].startswith("torch/serialization.py")]
            assert len(saves) == len(d2h) and min(float(e["dur"]) for e in saves) > 3000
        else:
            assert not d2h and not py
        st = _steps(d)
        free[r] = sum(v["Free"] for v in st.values()) / len(st)
        wait[r] = _wait_ms(d)
    good = [r for r in dirs if r != bad]
    assert free[bad] > 20 * max(free[r] for r in good)
    assert min(wait[r] for r in good) > 20 * wait[bad]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "rank" and rc["culprit_ranks"] == [bad]
    assert bad not in rc["victim_ranks"] and len(rc["victim_ranks"]) == key["ranks"] - 1
    assert (
        abs(nums["saving_us_per_step"] - nums["dump_us_per_step"]) < 0.1 * nums["dump_us_per_step"]
    )


# ---------------------------------------------------------------- host-built-attention-mask
def test_mask_is_built_on_the_host_and_copied_every_micro_batch(scenario) -> None:
    root = scenario("host-built-attention-mask")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    want = ev["per_step"] * key["steps"]
    shares: list[float] = []
    for d in dirs.values():
        x = _x(d)
        tril = [e for e in x if e["name"] == "aten::tril"]
        assert len(tril) == want
        assert all(ev["mask_shape"] in e["args"]["Input Dims"] for e in tril)
        assert len([e for e in x if e["name"] == "aten::ones"]) == want
        cp = [e for e in x if e["name"] == "AscendCL@aclrtMemcpy"]
        assert len(cp) == want and min(float(e["dur"]) for e in cp) > 5000
        # no device task runs while the host copies the mask
        dev = [
            (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
            for e in x
            if e.get("args", {}).get("Task Type") in ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC")
        ]
        for e in cp:
            a, b = float(e["ts"]), float(e["ts"]) + float(e["dur"])
            assert not [s for s, t in dev if s < b and t > a]
        rows = kernel_rows(d)
        casts = [y for y in rows if y["Type"] == "Cast"]
        assert len(casts) == want
        assert all(
            y["Input Data Types"] == "DT_FLOAT" and y["Output Data Types"] == "DT_BOOL"
            for y in casts
        )
        fa = [y for y in rows if y["Type"].startswith("FlashAttentionScore")]
        assert fa and all("1,1,4096,4096" in y["Input Shapes"] for y in fa)
        st = _steps(d)
        shares.append(median(v["Free"] / v["Stage"] for v in st.values()))
    assert min(shares) > 0.25 and max(shares) < 1.1 * min(shares)  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["idle_us_per_step"] > 0.9 * nums["host_us_per_step"]
    assert nums["saving_us_per_step"] > 0.25 * nums["median_step_us"]
