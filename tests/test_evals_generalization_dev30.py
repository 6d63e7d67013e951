"""The twenty-eighth development set of fault kinds (scenarios_dev30.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from _dev_files import PO, kernel_rows, rank_dirs, read_csv


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _steps(d: Path) -> list[dict[str, str]]:
    return read_csv(d, "step_trace_time.csv")


def _dims(shape: str) -> list[list[int]]:
    """Input Shapes / Output Shapes as written (CANN quotes kept by the csv reader) -> int lists."""
    return [[int(x) for x in part.split(",") if x] for part in shape.strip('"').split(";")]


def _tflops(row: dict[str, str]) -> float:
    """A MatMulV2 row's rate from its shapes (``[m,k] x [n,k]``) and duration."""
    (m, k), (n, _k) = _dims(row["Input Shapes"])[:2]
    return 2.0 * m * k * n / float(row["Duration(us)"]) / 1e6


def _per_step(rows: list[dict[str, str]], pick: Any) -> dict[int, float]:
    """{step id: summed duration (µs) of the rows ``pick`` accepts}."""
    out: dict[int, float] = {}
    for x in rows:
        if pick(x):
            s = int(x["Step Id"])
            out[s] = out.get(s, 0.0) + float(x["Duration(us)"])
    return out


def _wait_ms(d: Path) -> float:
    """Summed Wait Time (ms) of the collectives of communication.json, all steps."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return sum(
        op["Communication Time Info"]["Wait Time(ms)"]
        for sv in raw.values()
        for name, op in sv["collective"].items()
        if not name.startswith("Total")
    )


# ---------------------------------------------------------------- lm-head-vocab-unaligned
def test_lm_head_matmuls_on_the_unaligned_vocab_run_at_a_low_mac_ratio(scenario) -> None:
    root = scenario("lm-head-vocab-unaligned")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    v = ev["vocab_size"]
    assert v % 16 and ev["padded_vocab_size"] % 128 == 0 and ev["padded_vocab_size"] >= v
    head_per_rank: dict[int, float] = {}
    comp: dict[int, float] = {}
    head_tf: list[float] = []
    other_tf: list[float] = []
    head_mac: list[float] = []
    for r, d in dirs.items():
        mm = [x for x in kernel_rows(d) if x["Type"] == "MatMulV2"]
        head = [x for x in mm if any(v in dims for dims in _dims(x["Input Shapes"]))]
        other = [x for x in mm if x not in head]
        n = Counter(int(x["Step Id"]) for x in head)
        assert set(n.values()) == {nums["lm_head_matmuls_per_step"]}
        assert sorted(x["Input Shapes"].strip('"') for x in head[:3]) == sorted(
            ev["lm_head_shapes"]
        )
        # the same device: every other MatMul at the normal PMU ratios, the head's far lower
        assert {float(x["aic_mac_ratio"]) for x in other} == {nums["other_matmul_mac_ratio"]}
        assert {float(x["cube_utilization(%)"]) for x in other} == {
            nums["other_matmul_cube_utilization"]
        }
        assert all(float(x["aic_mac_ratio"]) < 0.5 * nums["other_matmul_mac_ratio"] for x in head)
        assert all(float(x["aic_mte2_ratio"]) > 0.9 for x in head)
        assert all(x["HF32 Eligible"] == "NO" and x["Block Dim"] == "24" for x in mm)
        head_mac += [float(x["aic_mac_ratio"]) for x in head]
        head_tf += [_tflops(x) for x in head]
        other_tf += [_tflops(x) for x in other if float(x["Duration(us)"]) > 50]
        per = _per_step(head, lambda x: True)
        head_per_rank[r] = sum(per.values()) / len(per)
        comp[r] = median(float(x["Computing"]) for x in _steps(d))
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["distributed_args"]["vocab_size"] == v
    assert max(comp.values()) < 1.03 * min(comp.values())  # every rank alike
    assert median(head_per_rank.values()) == pytest.approx(nums["lm_head_us_per_step"], rel=0.02)
    assert median(head_tf) == pytest.approx(nums["lm_head_tflops_median"], rel=0.05)
    assert median(other_tf) == pytest.approx(nums["other_matmul_tflops_median"], rel=0.05)
    assert nums["lm_head_tflops_median"] < 0.5 * nums["other_matmul_tflops_median"]
    assert median(head_mac) == pytest.approx(nums["lm_head_mac_ratio_median"], abs=0.005)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- attn-head-dim-padded
def test_attention_runs_on_a_head_dim_padded_to_128(scenario) -> None:
    root = scenario("attn-head-dim-padded")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    hd, pad = ev["head_dim"], ev["padded_head_dim"]
    attn: dict[int, float] = {}
    for r, d in dirs.items():
        rows = kernel_rows(d)
        first = int(rows[0]["Step Id"])
        n = Counter(x["Type"] for x in rows if int(x["Step Id"]) == first)
        assert n["PadV3"] == nums["pad_kernels_per_step"]
        assert n["StridedSlice"] == nums["slice_kernels_per_step"]
        assert n["FlashAttentionScore"] == nums["attention_layers"]
        for i, x in enumerate(rows):
            if x["Type"] == "FlashAttentionScore":
                assert all(dims[-1] == pad for dims in _dims(x["Input Shapes"]))
                assert [y["Type"] for y in rows[i - 3 : i]] == ["PadV3"] * 3
                assert rows[i + 1]["Type"] == "StridedSlice"
                assert _dims(rows[i + 1]["Output Shapes"])[0][-1] == hd
                # the QKV MatMul before the pads: 3 x heads x the real head dim wide
                qkv = rows[i - 4]
                assert qkv["Type"] == "MatMulV2"
                assert _dims(qkv["Output Shapes"])[0][-1] == 3 * nums["num_heads"] * hd
            if x["Type"] == "FlashAttentionScoreGrad":
                assert rows[i - 1]["Type"] == "PadV3"
                assert [y["Type"] for y in rows[i + 1 : i + 4]] == ["StridedSlice"] * 3
        per = _per_step(rows, lambda x: x["Type"].startswith("FlashAttentionScore"))
        attn[r] = sum(per.values()) / len(per)
    assert max(attn.values()) < 1.03 * min(attn.values())  # every rank alike
    assert median(attn.values()) == pytest.approx(nums["attention_us_per_step"], rel=0.02)
    assert nums["aligned_head_dim"] % 16 == 0 and hd < nums["aligned_head_dim"] < pad
    assert nums["wasted_head_dim_share"] == pytest.approx(1 - hd / pad, abs=1e-4)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- vlm-conv3d-patch-embed
def test_conv3d_patch_embedding_only_in_the_image_steps(scenario) -> None:
    root = scenario("vlm-conv3d-patch-embed")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    img = set(ev["image_steps"])
    assert img and set(ev["text_steps"]) and not img & set(ev["text_steps"])
    embed: list[float] = []
    comp_img: list[float] = []
    comp_txt: list[float] = []
    for d in dirs.values():
        rows = kernel_rows(d)
        conv = [x for x in rows if x["Type"] == "Conv3D"]
        assert {int(x["Step Id"]) for x in conv} == img
        for x in conv:
            fmts = x["Input Formats"].split(";")
            assert fmts[:2] == ["NDC1HWC0", "FRACTAL_Z_3D"]
            assert float(x["aic_mac_ratio"]) < 0.2 and float(x["cube_utilization(%)"]) < 20
        dw = [x for x in rows if x["Type"] == "Conv3DBackpropFilterV2"]
        assert {int(x["Step Id"]) for x in dw} == img
        # the 3-channel pixel patches go into a 16-channel block
        td_in = [x for x in rows if x["Type"] == "TransData" and x["Input Formats"] == "NCDHW"]
        shapes = {tuple(_dims(x["Input Shapes"])[0]) for x in td_in}
        assert (nums["patches_per_image_step"], ev["in_channels"], *ev["kernel_size"]) in shapes
        assert all(_dims(x["Output Shapes"])[0][-1] == ev["channel_block"] for x in td_in)
        # the vision MatMuls run at the normal ratio: it is the convolution, not the tower
        vis_mm = [x for x in rows if x["Type"] == "MatMulV2" and int(x["Step Id"]) in img]
        assert median(float(x["aic_mac_ratio"]) for x in vis_mm) > 0.5
        per = _per_step(
            rows, lambda x: x["Type"] in ("Conv3D", "Conv3DBackpropFilterV2", "TransData")
        )
        assert set(per) == img
        embed += per.values()
        for x in _steps(d):
            (comp_img if int(x["Step"]) in img else comp_txt).append(float(x["Computing"]))
    assert median(embed) == pytest.approx(nums["patch_embed_us_per_image_step"], rel=0.02)
    assert median(comp_img) == pytest.approx(nums["computing_us_image_steps_median"], rel=0.02)
    assert median(comp_img) > median(comp_txt) + nums["patch_embed_us_per_image_step"]
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["steps"] == ev["image_steps"]
    assert nums["first_image_step"] == min(img) and nums["last_image_step"] == max(img)
    assert (
        nums["patch_embed_us_per_image_step_linear"] < 0.05 * nums["patch_embed_us_per_image_step"]
    )


# ---------------------------------------------------------------- hf32-off-node
def test_one_node_runs_its_convolutions_without_hf32(scenario) -> None:
    root = scenario("hf32-off-node")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    conv_types = set(ev["operators"])
    conv_us: dict[int, float] = {}
    other_us: dict[int, float] = {}
    static: dict[int, list[tuple[str, ...]]] = {}
    wait: dict[int, float] = {}
    for r, d in dirs.items():
        rows = kernel_rows(d)
        conv = [x for x in rows if x["Type"] in conv_types]
        assert len(conv) == nums["conv_kernels_per_step"] * key["steps"]
        want = ev["culprit_value"] if r in bad else ev["others_value"]
        assert {x["HF32 Eligible"] for x in conv} == {want}
        assert {x["HF32 Eligible"] for x in rows if x["Type"] not in conv_types} == {"NO"}
        assert {x["Input Data Types"].split(";")[0] for x in conv} == {ev["dtype"]}
        static[r] = [
            (x["Type"], x["Input Shapes"], x["Input Formats"], x["Block Dim"])
            for x in conv
            if int(x["Step Id"]) == key["step_ids"][0]
        ]
        per = _per_step(conv, lambda x: True)
        conv_us[r] = sum(per.values()) / len(per)
        per_o = _per_step(rows, lambda x: x["Type"] not in conv_types)
        other_us[r] = sum(per_o.values()) / len(per_o)
        wait[r] = _wait_ms(d)
    good = [r for r in dirs if r not in bad]
    # the same operators, shapes, formats and Block Dim on both nodes: only HF32 differs
    assert all(static[r] == static[good[0]] for r in dirs)
    ratio = sum(conv_us[r] for r in bad) / len(bad) / (sum(conv_us[r] for r in good) / len(good))
    assert ratio == pytest.approx(nums["conv_ratio_culprit_vs_others"], rel=0.02)
    assert ratio > 1.5
    other = sum(other_us[r] for r in bad) / len(bad) / (sum(other_us[r] for r in good) / len(good))
    assert other == pytest.approx(1.0, abs=0.03)
    # node 0 waits for node 1 in the gradient all-reduces
    assert min(wait[r] for r in good) > 5 * max(wait[r] for r in bad)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert set(rc["victim_ranks"]) == set(good)
    assert nums["saving_us_per_step"] > 0.15 * nums["median_step_us"]
