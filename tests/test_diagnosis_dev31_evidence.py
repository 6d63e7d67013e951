"""Development sets 31 and 32 kinds against their answer keys (numbers from the simulated timeline).

- ``cfs-throttle-node``: a node whose hosts stop together, with no host call, on a fixed period
  (a CPU quota throttling the container) is named so, with the limit to raise first.
- ``thp-compaction-node``: stalls at the step start on one node where its hosts run the same
  ``aten::cat`` several times slower than the other node's: the host's memory, not the data
  loader.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.agent.parse import parse_question
from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.decompose import host_freezes
from advisor_chat.ingest import load_profile

# scenario-level evidence of a development set: CI and `tools/test.sh --all` run it
pytestmark = pytest.mark.slow


def _key(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())


def test_hosts_frozen_together_on_a_period_are_a_cpu_quota(scenario) -> None:
    path = scenario("cfs-throttle-node")
    nums = _key(path)["expected_numbers"]
    prof = load_profile(path, use_cache=False, progress=False)
    fz = host_freezes(prof, nums["culprit_ranks"])
    assert fz is not None
    assert fz.moments == nums["silences_per_rank"]
    assert fz.each_us == pytest.approx(nums["host_silence_us_median"], rel=0.05)
    assert fz.period_us == pytest.approx(nums["silence_period_us_median"], rel=0.05)
    # the other node's hosts wait in the collectives (calls stop there too), not on a period
    others = [r for r in prof.ranks if r not in nums["culprit_ranks"]]
    assert host_freezes(prof, others) is None
    top = diagnose(prof).top()
    assert top is not None and list(top.culprit.ranks) == nums["culprit_ranks"]
    assert "CPU quota throttling the container" in top.summary and "cgroup" in top.summary_zh
    assert top.remedies[0].text.startswith("Raise or remove the CPU limit of the container")
    assert top.metrics["host_freezes"] == nums["silences_per_rank"]


@pytest.mark.parametrize("name", ["node-host-contention", "cpu-powersave-node", "host-swap-rank"])
def test_slow_hosts_that_keep_calling_are_not_frozen(scenario, name: str) -> None:
    prof = load_profile(scenario(name), use_cache=False, progress=False)
    half = len(prof.ranks) // 2
    assert host_freezes(prof, prof.ranks[half:]) is None
    assert host_freezes(prof, prof.ranks[:half]) is None


@pytest.mark.parametrize(
    ("question", "hypothesis"),
    [
        ("could the worker pod be CPU-throttled by its cgroup cpu limit?", "host_dispatch"),
        ("会不会是worker那个pod的CPU limit设小了，被cgroup限流了？", "host_dispatch"),
        ("is rank 9 being thermally throttled?", "throttling"),
        ("is the NPU throttling?", "throttling"),
    ],
)
def test_a_cpu_quota_is_the_host_not_the_device_clock(question: str, hypothesis: str) -> None:
    assert parse_question(question).hypothesis == hypothesis


def test_a_host_operator_slower_on_one_node_is_its_hosts_memory(scenario) -> None:
    from statistics import median

    from _dev_files import rank_dirs, trace

    from advisor_chat.diagnosis.python_work import slower_frame

    path = scenario("thp-compaction-node")
    nums = _key(path)["expected_numbers"]
    culprit = nums["culprit_ranks"]
    prof = load_profile(path, use_cache=False, progress=False)
    others = [r for r in prof.ranks if r not in culprit]
    sf = slower_frame(prof, culprit, others)
    assert sf is not None and sf.frame == "aten::cat" and sf.memory
    # aten::cat durations from trace_view.json (cpu_op events), per side
    durs = {
        r: [float(e["dur"]) for e in trace(d) if e.get("name") == "aten::cat"]
        for r, d in rank_dirs(path).items()
    }
    mine = [x for r in culprit for x in durs[r]]
    theirs = [x for r in others for x in durs[r]]
    assert sf.us == pytest.approx(median(mine))
    assert sf.us_peer == pytest.approx(median(theirs))
    assert (sf.us_min, sf.us_max) == (min(mine), max(mine))
    top = diagnose(prof).top()
    assert top is not None and set(top.culprit.ranks) <= set(culprit)
    assert "aten::cat" in top.summary and "transparent huge page" in top.summary
    assert "data loader did not deliver" not in top.summary
    assert top.remedies[0].text.startswith("Fix the host memory of ranks 0-7")


def test_named_slow_links_are_not_counted_again_as_a_slow_fabric(scenario) -> None:
    # half the RDMA links at a third of the others: their causes name them; the transport's
    # median (between the two) is not a second, job-wide cause
    d = diagnose(load_profile(scenario("cross-rack-uplink"), use_cache=False, progress=False))
    ids = [c.id for c in d.causes]
    assert any(i.startswith("cause.slow_link.") for i in ids)
    assert not any(i.startswith("cause.slow_transport.") for i in ids)
    # every RDMA link slow: the fabric is the cause
    d = diagnose(load_profile(scenario("lossy-roce-fabric"), use_cache=False, progress=False))
    assert any(c.id == "cause.slow_transport.rdma_standard" for c in d.causes)


def test_a_hand_written_leader_allreduce_is_named_and_replaced(scenario) -> None:
    from collections import defaultdict

    from _dev_files import PO, rank_dirs

    path = scenario("hier-allreduce-leaders")
    d = diagnose(load_profile(path, use_cache=False, progress=False))
    top = d.top()
    # the leaders carry the sync and every other rank waits for them (session 40: their group,
    # not the job, is the culprit)
    assert top is not None and top.culprit.kind == "group" and top.culprit.ranks == (0, 8)
    assert top.remedies[0].text.startswith("Replace the hand-written reduce / leader all-reduce")
    assert "ranks 0, 8 only" in top.summary and "0、8号卡之间" in top.summary_zh
    # nothing blamed on a rank that nobody waits for (the leaders' negligible compute excess)
    assert all(c.victims or c.culprit.kind in ("job", "none") for c in d.causes)
    # the sync's collectives per (step, rank) from communication.json: reduces and broadcasts,
    # and the all-reduces of the group only two rank folders hold (the leaders')
    seen: dict[str, set[int]] = defaultdict(set)
    docs = {}
    for r, rd in rank_dirs(path).items():
        docs[r] = json.loads((rd / PO / "communication.json").read_text())
        for sec in docs[r].values():
            for op in sec.get("collective", {}):
                seen[op.split("@")[-1]].add(r)
    leaders_g = {g for g, rs in seen.items() if len(rs) == 2}
    total, units = 0.0, 0
    for doc in docs.values():
        for sec in doc.values():
            units += 1
            for op, rec in sec.get("collective", {}).items():
                name, g = op.split("@")[0], op.split("@")[-1]
                if name.startswith(("hcom_reduce_", "hcom_broadcast_")) or g in leaders_g:
                    total += float(rec["Communication Time Info"]["Elapse Time(ms)"])
    assert top.metrics["leader_sync_us_per_step"] == pytest.approx(1000 * total / units, rel=0.01)


def test_a_host_collective_in_its_frames_is_not_a_freeze(scenario) -> None:
    # ranks 3 and 11 run a gloo all-reduce together at every step's end: no launch call, device
    # idle, same moment on both, regular like a freeze; but a host frame runs there (busy, not
    # frozen), and the frames are read first
    prof = load_profile(scenario("gloo-dp-group"), use_cache=False, progress=False)
    d = diagnose(prof)
    top = d.top()
    assert top is not None and "gloo" in top.summary and "CPU quota" not in top.summary


def test_findings_no_cause_explains_are_said_in_words_not_ids(scenario) -> None:
    d = diagnose(load_profile(scenario("cfs-throttle-node"), use_cache=False, progress=False))
    other = [f for f in d.other_findings if f.severity.value == "high"]
    assert other, "the scenario's step jitter is a high finding no cause claims"
    note = next(n for n in d.notes if n.startswith("Also found"))
    assert other[0].summary.rstrip(". ") in note and other[0].id not in note
    assert any(other[0].summary_zh.rstrip("。 ") in n for n in d.notes_zh)
