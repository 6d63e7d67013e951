"""Development set 22 kinds against their answer keys (numbers from the simulated timeline).

- ``lower-sku-node``: the devices' own info.json (``DeviceInfo``) reports fewer AI Cores.
- ``distopt-param-gather-exposed``: the parameters' all-gathers open every step, not overlapped.
- ``concat-in-loop``: the job's idle precedes one operator's launches ("those ops").
- ``pp-p2p-degraded-link``: a slow point-to-point link; the others wait for its ends.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from advisor_chat.agent.advisor import Advisor
from advisor_chat.config import load_settings
from advisor_chat.diagnosis import diagnose
from advisor_chat.ingest import load_profile

# scenario-level evidence of a development set: CI and `tools/test.sh --all` run it
pytestmark = pytest.mark.slow


def _key(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())


def test_device_info_is_read_from_the_raw_cann_folder(scenario) -> None:
    path = scenario("lower-sku-node")
    meta = load_profile(path, use_cache=False, progress=False).get("meta")
    # independent reading: the info.json files themselves
    by_rank = {}
    for info in path.glob("*_ascend_pt/PROF_*/device_*/info.json.*"):
        body = json.loads(info.read_text())
        by_rank[body["rank_id"]] = body["DeviceInfo"][0]
    assert len(by_rank) == len(meta)
    for row in meta.itertuples():
        dev = by_rank[row.rank]
        assert row.ai_core_num == dev["ai_core_num"] and row.aiv_num == dev["aiv_num"]
        assert row.aic_frequency_mhz == float(dev["aic_frequency"])


def test_fewer_ai_cores_name_the_card_model(scenario) -> None:
    path = scenario("lower-sku-node")
    nums = _key(path)["expected_numbers"]
    top = diagnose(load_profile(path, use_cache=False, progress=False)).top()
    assert top is not None and set(top.culprit.ranks) == set(nums["culprit_ranks"])
    m = top.metrics
    assert (m["ai_core_num"], m["ai_core_num_peer"]) == (
        nums["culprit_ai_core_num"],
        nums["others_ai_core_num"],
    )
    assert (m["block_dim"], m["block_dim_peer"]) == (
        nums["culprit_matmul_block_dim"],
        nums["others_matmul_block_dim"],
    )
    assert "SKU" in top.summary and "型号" in top.summary_zh
    assert top.remedies[0].text.startswith("Run the job on cards of one model")


def test_a_healthy_job_reports_no_device_difference(scenario) -> None:
    # no info.json in the generated healthy job: nothing to compare, nothing claimed
    d = diagnose(
        load_profile(scenario("compute-straggler-hidden"), use_cache=False, progress=False)
    )
    assert all("ai_core_num" not in c.metrics for c in d.causes)


def test_parameter_gathers_at_the_step_start(scenario) -> None:
    path = scenario("distopt-param-gather-exposed")
    nums = _key(path)["expected_numbers"]
    top = diagnose(load_profile(path, use_cache=False, progress=False)).top()
    assert top is not None and top.culprit.kind == "job"
    assert "gathers of sharded parameters" in top.summary
    assert "overlap_param_gather false" in top.summary
    assert "tied together" not in top.summary  # not one tensor gathered again
    first = top.remedies[0]
    assert first.text.startswith("Turn on --overlap-param-gather")
    # the first bucket stays before the step, the others hide under the forward: the key's
    # re-simulation with the overlap on
    assert first.gain_us == pytest.approx(nums["saving_us_per_step"], rel=0.15)


def test_those_ops_are_the_operator_the_idle_precedes(scenario, tmp_path) -> None:
    path = scenario("concat-in-loop")
    nums = _key(path)["expected_numbers"]
    prof = load_profile(path, use_cache=False, progress=False)
    top = diagnose(prof).top()
    assert top is not None and top.culprit.operator == "ConcatD"
    adv = Advisor(prof, settings=load_settings(model="offline", home=tmp_path))
    ans = adv.ask("how many of those ops per step, and how much device time do they add up to?")
    first = ans.answer.split("\n", 1)[0]
    assert f"{nums['concat_kernels_per_step']} launches per step" in first
    stated = float(first.split(" ms of device time per step")[0].rsplit(" ", 1)[-1]) * 1000
    assert stated == pytest.approx(nums["concat_device_us_per_step"], rel=0.02)


def test_a_slow_point_to_point_link_makes_the_others_wait(scenario) -> None:
    path = scenario("pp-p2p-degraded-link")
    key = _key(path)
    nums, rc = key["expected_numbers"], key["root_cause"]
    top = diagnose(load_profile(path, use_cache=False, progress=False)).top()
    assert top is not None and sorted(top.culprit.link or ()) == sorted(rc["culprit_link"])
    # nobody else is in the pair's group: the victims are whom the collectives find waiting
    assert {v.rank for v in top.victims} == set(rc["victim_ranks"])
    assert "hcom_send" in top.summary and "hcom_receive" in top.summary_zh
    per_dir = nums["p2p_ops_per_step"] / 2
    assert f"{per_dir:g} hcom_send and {per_dir:g} hcom_receive per step" in top.summary


def test_ranks_asked_about_for_their_bubble_get_their_own_cause(scenario, tmp_path) -> None:
    path = scenario("pp-p2p-degraded-link")
    a, b = _key(path)["root_cause"]["culprit_link"]
    adv = Advisor(
        load_profile(path, progress=False), settings=load_settings(model="offline", home=tmp_path)
    )
    for q in (
        f"ranks {a} and {b} have far more bubble than the others, what's wrong with them?",
        f"{a}号卡和{b}号卡的bubble比别人大很多，怎么回事？",
    ):
        first = re.split(r"(?<=[.。])\s", adv.ask(q).answer, maxsplit=1)[0]
        # the link, not "no pipeline bubble stands out", in the answer's first sentence
        assert f"{a}↔{b}" in first and "stands out" not in first, first


def test_gathers_all_through_the_step_are_not_the_parameters(scenario) -> None:
    # sequence parallelism gathers before every norm: one of them opens the step, most do not
    top = diagnose(
        load_profile(scenario("sp-norm-extra-gather"), use_cache=False, progress=False)
    ).top()
    assert top is not None and "sharded parameters" not in top.summary
    assert "overlap-param-gather" not in top.remedies[0].text
    assert "RmsNorm" in top.remedies[0].text
