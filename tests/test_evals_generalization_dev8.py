"""The sixth development set of fault kinds (scenarios_dev8.py) and the mechanisms it exposed.

- The planted fault is in the written files (read with csv / json, independently of ingest).
- The diagnosis' new evidence on those profiles, checked against the files and the answer keys:
  activation recomputation (forward operators launched more often than their gradients), a
  transport whose every link runs below its standard bandwidth, launches the device waits for
  with nothing queued (host-bound with short kernels), and the verdicts on those profiles.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

from _dev_files import kernel_rows, rank_dirs

from advisor_chat.agent.project import hypothesis, named_suspect, suspect_verdict
from advisor_chat.analyzers.host_dispatch import HostDispatchParams, host_dispatch
from advisor_chat.analyzers.slow_link import SlowLinkParams, slow_link
from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.decompose import pass_sync, recompute
from advisor_chat.diagnosis.hypotheses import judge
from advisor_chat.ingest import load_profile


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _load(root: Path) -> Any:
    return load_profile(root, use_cache=False, progress=False)


# ---------------------------------------------------------------- full-recompute
def test_recompute_forward_operators_twice_their_gradients(scenario) -> None:
    root = scenario("full-recompute")
    key = _key(root)
    # in the files: every rank launches FlashAttentionScore twice as often as its gradient
    for d in rank_dirs(root).values():
        n = Counter(r["Type"] for r in kernel_rows(d))
        assert n["FlashAttentionScore"] == 2 * n["FlashAttentionScoreGrad"] > 0
    prof = _load(root)
    rc = recompute(prof, list(range(16)))
    assert rc is not None
    assert rc.forward_share == 1.0
    assert rc.op == "FlashAttentionScore"
    assert rc.op_per_step == key["expected_numbers"]["flash_attention_per_step"]
    assert rc.grad_per_step == key["expected_numbers"]["flash_attention_grad_per_step"]
    # the re-run's device time, estimated from the first forward, against the simulated one
    want = key["expected_numbers"]["recompute_us_per_step_median"]
    assert abs(rc.recompute_us - want) <= 0.15 * want
    # a layer's forward re-run inside the backward is not another micro-batch
    assert pass_sync(prof, list(range(16))) is None
    d = diagnose(prof)
    assert d.causes[0].id == "cause.job_hotspot.recompute"
    assert "selective" in d.causes[0].remedies[0].text
    # the re-run's device time is an estimate of the saving, not a bound on it
    assert d.causes[0].bound.value == "estimate" == d.causes[0].remedies[0].bound.value
    assert judge(d, "capacity").status == "contradicted"
    # "add NPUs?" is answered as such, naming what the time goes to, in both languages
    en = hypothesis(d, "capacity", False).lines[0]
    zh = hypothesis(d, "capacity", True).lines[0]
    assert en.startswith("No: ") and "more NPUs would not help" in en and "recomput" in en
    assert zh.startswith("不需要加卡：") and "重计算" in zh


def test_no_recompute_without_extra_forward_launches(scenario) -> None:
    for name in ("seed-rank12", "grad-sync-every-microbatch"):
        assert recompute(_load(scenario(name)), list(range(16))) is None, name


# ---------------------------------------------------------------- lossy-roce-fabric
def test_every_rdma_link_below_its_standard_is_one_fabric_cause(scenario) -> None:
    root = scenario("lossy-roce-fabric")
    key = _key(root)
    prof = _load(root)
    res = slow_link(prof, SlowLinkParams())
    std = res.tables["transport_standard"].set_index("transport")
    want = key["expected_numbers"]["rdma_bandwidth_gbps_median"]
    assert abs(std.loc["RDMA", "median_gbps"] - want) <= 0.05 * want
    assert std.loc["RDMA", "utilisation"] < 0.8 <= std.loc["HCCS", "utilisation"]
    ids = [f.id for f in res.findings if ".transport." in f.id]
    assert ids == ["slow_link.transport.rdma_below_standard"]
    d = diagnose(prof)
    top = d.causes[0]
    assert top.mechanism.value == "slow_link" and top.culprit.kind == "job"
    assert top.culprit.transport == "RDMA"
    assert "PFC" in top.remedies[0].text
    assert top.bound.value == "estimate"
    assert judge(d, "network").status == "supported"
    assert judge(d, "capacity").status == "contradicted"
    # the exposed communication it does not explain stays a separate, later cause
    exposed = [c for c in d.causes if c.id == "cause.exposed_communication"]
    assert exposed and exposed[0].gain_us is not None and top.gain_us is not None
    # its sentence states the exposed time, the fabric's part of it and the rest, which add up
    ex = exposed[0]
    least = ex.metrics["min_not_overlapped_us"]
    assert abs(least - top.gain_us - ex.gain_us) < 1.0
    for v in (top.gain_us, ex.gain_us):
        assert f"{v / 1000:.1f} ms" in ex.summary
    assert "slow link's longer transfers" in ex.summary and "hiding the rest" in ex.summary
    assert "其余部分" in ex.summary_zh


def test_healthy_fabric_has_no_transport_finding(scenario) -> None:
    prof = _load(scenario("full-recompute"))  # same 2-node layout, links at full speed
    res = slow_link(prof, SlowLinkParams())
    assert not [f for f in res.findings if ".transport." in f.id]


# ---------------------------------------------------------------- small-batch-host-bound
def test_small_kernels_host_bound_job(scenario) -> None:
    root = scenario("small-batch-host-bound")
    key = _key(root)
    # in the files: the median compute kernel is shorter than 1.5x the median gap before it
    rows = kernel_rows(next(iter(rank_dirs(root).values())))
    durs = [float(r["Duration(us)"]) for r in rows]
    assert median(durs) < 1.5 * key["expected_numbers"]["device_gap_us_between_kernels_median"]
    prof = _load(root)
    hd = host_dispatch(prof, HostDispatchParams()).table
    # with nothing queued, the idle between kernels is waiting for the launches
    assert (hd["host_wait_ratio"] > 0.9).all()
    gap = key["expected_numbers"]["device_gap_us_between_kernels_median"]
    assert abs(float(hd["gap_us_median"].median()) - gap) <= 0.1 * gap
    d = diagnose(prof)
    top = d.causes[0]
    assert top.mechanism.value == "host_stall" and top.culprit.kind == "job"
    assert "too little work per launch" in top.summary
    assert top.remedies[0].text.startswith("Give each launch more work")
    # the devices' wait for launches (a finding about every rank) is that cause's evidence
    wait = [f for f in d.findings if f.id.startswith("host_dispatch.host_bound.host_wait")]
    assert wait and len(wait[0].ranks) == 16
    assert wait[0].id in {f.id for f in top.findings}
    # the CANN wait-ratio rule's "probable slow link" is checked against the measured links
    sl = slow_link(prof, SlowLinkParams())
    assert not sl.table["slow"].any()
    wr = [f for f in sl.findings if f.id == "slow_link.communication.wait_ratio"]
    assert wr and wr[0].severity.value == "low" and "not a slow link" in wr[0].summary
    assert "slow_link" not in wr[0].symptom_tags
    small = [f for f in sl.findings if "small_packets" in f.id]
    assert small and all("extra_us" not in f.metrics for f in small)
    assert named_suspect("micro batch is 1 and sequences are short, related?") == "micro_batch"
    assert suspect_verdict(d, "micro_batch", False, True).lines[0].startswith("Yes")
    assert suspect_verdict(d, "launch_blocking", False, True).lines[0].startswith("No")


def test_links_asked_about_on_a_slow_fabric(scenario) -> None:
    from advisor_chat.agent import Advisor
    from advisor_chat.config import Settings

    root = scenario("lossy-roce-fabric")
    # in the files: the transport of rank 0's links to ranks 8 and 1
    d0 = rank_dirs(root)[0]
    doc = json.loads((d0 / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").read_text())
    kinds: dict[str, set[str]] = {}

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if isinstance(v, dict) and "Transport Type" in v:
                    kinds.setdefault(k, set()).add(v["Transport Type"])
                else:
                    walk(v)

    walk(doc)
    assert kinds["0-8"] == {"RDMA"} and kinds["0-1"] == {"HCCS"}
    adv = Advisor(_load(root), settings=Settings(), case_search=lambda *a, **k: [])
    # "is there a slow link?" asks whether any is: yes (every RDMA link), in both languages
    assert adv.ask("Is there a slow link?").answer.startswith("Yes")
    assert adv.ask("有没有慢链路？").answer.startswith("是的")
    # "one bad cable?" suspects one part: no, the whole transport
    assert adv.ask("is a bad cable the problem?").answer.startswith("No: no single")
    # a named link is judged by its transport against a transport-wide cause
    en = adv.ask("How fast is the link from rank 0 to rank 8?").answer
    assert "Link 0→8 is an RDMA link, and every RDMA link is slow" in en, en
    assert "not the slow one" not in en
    zh = adv.ask("0号卡到8号卡的链路有多快？").answer
    assert "链路 0→8（RDMA）" in zh and "链路 0→8 是 RDMA 链路" in zh, zh
    assert adv.ask("Is the link between rank 0 and 1 slow?").answer.startswith(
        "No: link 0→1 runs over HCCS"
    )
