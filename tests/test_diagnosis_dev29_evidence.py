"""Development sets 29 and 30 kinds against their answer keys and the files (csv / json).

- ``hf32-off-node``: a node whose fp32 Cube operators are marked HF32 Eligible NO where the peers'
  are YES is a setting (allow_hf32), not degraded hardware.
- ``zero3-offload-param-node``: a host stall inside a host-to-device copy (``aten::copy_`` under
  ``aten::to``) is named as a blocking copy from pageable memory, pinned memory first.
- ``compile-graph-breaks``: a compiled model split into graphs (Model ID) the device waits
  between: graph breaks, removing them first.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median

import pytest
from _dev_files import kernel_rows, rank_dirs

from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.decompose import graph_runs
from advisor_chat.diagnosis.hypotheses import judge
from advisor_chat.ingest import load_profile

# scenario-level evidence of a development set: CI and `tools/test.sh --all` run it
pytestmark = pytest.mark.slow


def _key(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())


def test_hf32_off_on_a_node_is_a_setting_not_the_device(scenario) -> None:
    path = scenario("hf32-off-node")
    nums = _key(path)["expected_numbers"]
    d = diagnose(load_profile(path, use_cache=False, progress=False))
    top = d.top()
    assert top is not None and list(top.culprit.ranks) == nums["culprit_ranks"]
    # the HF32 Eligible YES share of the Cube operators marked YES anywhere, from the files
    rows = {r: kernel_rows(d_) for r, d_ in rank_dirs(path).items()}
    yes_types = {k["Type"] for rs in rows.values() for k in rs if k["HF32 Eligible"] == "YES"}
    assert yes_types

    def share(ranks: list[int]) -> float:
        ks = [k for r in ranks for k in rows[r] if k["Type"] in yes_types]
        return sum(k["HF32 Eligible"] == "YES" for k in ks) / len(ks)

    culprit = nums["culprit_ranks"]
    peers = [r for r in rows if r not in culprit]
    assert top.metrics["hf32_yes_share"] == pytest.approx(share(culprit))
    assert top.metrics["hf32_yes_share_peer"] == pytest.approx(share(peers))
    assert "HF32 is off on ranks 8-15" in top.summary and "关闭了 HF32" in top.summary_zh
    assert top.remedies[0].text.startswith("Turn HF32 on for ranks 8-15")
    # a setting: replacing the cards is not the answer
    assert judge(d, "card").status == "contradicted"


def test_a_stall_inside_a_host_to_device_copy_is_named_a_blocking_copy(scenario) -> None:
    path = scenario("zero3-offload-param-node")
    nums = _key(path)["expected_numbers"]
    top = diagnose(load_profile(path, use_cache=False, progress=False)).top()
    assert top is not None and list(top.culprit.ranks) == nums["culprit_ranks"]
    assert "aten::copy_" in top.summary and "pageable (not pinned) host memory" in top.summary
    assert "可分页" in top.summary_zh
    first = top.remedies[0].text
    assert first.startswith("Make the copy on the stalled ranks") and "pin_memory" in first


def test_graph_breaks_are_counted_from_the_model_ids(scenario) -> None:
    path = scenario("compile-graph-breaks")
    nums = _key(path)["expected_numbers"]
    prof = load_profile(path, use_cache=False, progress=False)
    gr = graph_runs(prof, prof.ranks)
    assert gr is not None
    # runs of one Model ID per (step, rank), counted from kernel_details.csv in start order
    runs = []
    for d_ in rank_dirs(path).values():
        by_step: dict[str, list[tuple[float, str]]] = {}
        for k in kernel_rows(d_):
            by_step.setdefault(k["Step Id"], []).append(
                (float(k["Start Time(us)"].strip()), k["Model ID"])
            )
        for ks in by_step.values():
            ids = [m for _, m in sorted(ks)]
            # a run starts where the Model ID changes; eager tasks (4294967295) are no graph
            starts = [m for i, m in enumerate(ids) if i == 0 or m != ids[i - 1]]
            runs.append(sum(m != "4294967295" for m in starts))
    assert gr.graphs_per_step == median(runs) == nums["graph_launches_per_step"]
    assert gr.breaks_per_step == nums["graph_breaks_per_step"]
    assert gr.idle_each_us == pytest.approx(nums["idle_per_break_us_median"], rel=0.05)
    assert gr.break_idle_us == pytest.approx(nums["idle_at_breaks_us_per_step"], rel=0.05)
    d = diagnose(prof)
    top = d.top()
    assert top is not None and top.culprit.kind == "job"
    assert top.remedies[0].text.startswith("Remove the graph breaks")
    assert "graph breaks" in top.summary and "图中断" in top.summary_zh
    v = judge(d, "graph_break")
    assert v.status == "supported" and f"{median(runs):.0f} graphs per step" in v.reason


@pytest.mark.parametrize("name", ["seed-rank12", "item-sync-every-step"])
def test_eager_jobs_have_no_graph_runs(scenario, name: str) -> None:
    prof = load_profile(scenario(name), use_cache=False, progress=False)
    assert graph_runs(prof, prof.ranks) is None
    assert judge(diagnose(prof), "graph_break").status == "contradicted"


def test_extra_operators_that_waste_the_cube_are_named(scenario) -> None:
    # the vision tower's patch embedding in the image steps: a 3-channel Conv3D whose Cube MAC is
    # busy ~10% of its time, against ~60% for the MatMuls
    from advisor_chat.diagnosis.decompose import cube_waste

    path = scenario("vlm-conv3d-patch-embed")
    prof = load_profile(path, use_cache=False, progress=False)
    rows = [k for d_ in rank_dirs(path).values() for k in kernel_rows(d_)]

    def wmean(pred) -> float:
        ks = [k for k in rows if pred(k) and float(k["aic_mac_ratio"]) > 0]
        w = sum(float(k["Duration(us)"]) for k in ks)
        return sum(float(k["aic_mac_ratio"]) * float(k["Duration(us)"]) for k in ks) / w

    cw = cube_waste(prof, prof.ranks, "Conv3D")
    assert cw is not None
    assert cw.mac_ratio == pytest.approx(wmean(lambda k: k["Type"] == "Conv3D"), abs=0.01)
    assert cw.mac_ratio_others == pytest.approx(wmean(lambda k: k["Type"] != "Conv3D"), abs=0.02)
    assert cube_waste(prof, prof.ranks, "MatMulV2") is None
    top = diagnose(prof).top()
    assert top is not None and top.id == "cause.slow_steps"
    assert top.remedies[0].text.startswith("Compute the convolution")
    assert "keep the Cube mostly idle" in top.summary
