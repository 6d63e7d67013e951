"""One rank's links all slow are one fault on that rank's side; the network verdict names the part.

The profile is written by the generator with every HCCS link into and out of rank 5 slowed (an
8-rank, one-node job), so the answer is known by construction: one cause on rank 5 (not seven link
causes), costed by rank 5's transit time in its collectives against its peers', read here
independently from the ``communication.json`` files with ``json``.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import pytest

from advisor_chat.agent.advisor import Advisor
from advisor_chat.agent.parse import network_scope, ruled_out_causes
from advisor_chat.diagnosis import Mechanism, diagnose
from advisor_chat.ingest import load_profile

RANKS = 8
BAD = 5
FACTOR = 0.3


@pytest.fixture(scope="module")
def bad_port(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from advisor_chat.synth import FIRST_STEP, _write_all
    from advisor_chat.synth.model import simulate
    from advisor_chat.synth.scenarios import T0_NS
    from advisor_chat.synth.scenarios_faults import bidir_plans

    out = tmp_path_factory.mktemp("bad-port")
    plan = bidir_plans(RANKS, 4, 0)[""]
    p = dataclasses.replace(plan.perturb, link_factor={})
    for r in range(RANKS):
        if r != BAD:
            p.link_factor[(BAD, r)] = FACTOR
            p.link_factor[(r, BAD)] = FACTOR
    cl = simulate(plan.program, plan.kinds, p, RANKS, 4, 0, FIRST_STEP, T0_NS)
    _write_all(cl, out, plan.info, 1)
    return out


def _transit_ms_per_step(root: Path) -> dict[int, float]:
    """Σ Transit Time(ms) per rank over its collectives, per step, from communication.json."""
    out: dict[int, float] = {}
    for f in root.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json"):
        data = json.loads(f.read_text())
        total = 0.0
        for step in data.values():
            for ops in step.values():
                for name, op in ops.items():
                    if not name.startswith("Total"):
                        total += float(op["Communication Time Info"]["Transit Time(ms)"])
        meta = json.loads((f.parent.parent / "profiler_metadata.json").read_text())
        out[int(meta["distributed_args"]["rank"])] = total / max(len(data), 1)
    return out


def test_every_slow_link_of_one_rank_is_one_cause(bad_port: Path) -> None:
    d = diagnose(load_profile(bad_port, use_cache=False))
    links = [c for c in d.causes if c.mechanism is Mechanism.SLOW_LINK]
    assert len(links) == 1, [c.id for c in links]
    c = links[0]
    assert c.culprit.kind == "link" and c.culprit.link is None
    assert c.culprit.ranks == (BAD,)
    assert c.metrics["links_count"] == RANKS - 1 == c.metrics["rank_links_count"]
    transit = _transit_ms_per_step(bad_port)
    peers = statistics.median(v for r, v in transit.items() if r != BAD)
    assert c.gain_us == pytest.approx((transit[BAD] - peers) * 1000.0, rel=0.02)
    assert f"rank {BAD}'s side" in c.summary and f"故障在{BAD}号卡这一侧" in c.summary_zh


@pytest.mark.parametrize(
    ("question", "lead"),
    [
        ("is it the RoCE network between the machines?", "No, not the network between the nodes"),
        ("是不是两台机器之间的交换机丢包？", "不是机器之间的网络"),
        ("is it the network?", "Yes"),
        ("是不是机内HCCS的问题？", "是的，机内链路（HCCS）有问题"),
        (
            "is it HCCS inside the machine?",
            "Yes, the links inside one server (HCCS) are the problem",
        ),
    ],
)
def test_network_verdict_names_the_part_asked(bad_port: Path, question: str, lead: str) -> None:
    a = Advisor(load_profile(bad_port)).ask(question)
    assert a.answer.startswith(lead), a.answer[:200]
    first = a.answer.split("\n")[0]
    assert (f"rank {BAD}" in first) or (f"{BAD}号卡" in first)


def test_scope_and_ruled_out_wording() -> None:
    assert network_scope("is it the RoCE between the two boxes?") == "network"
    assert network_scope("是不是HCCS坏了") == "board"
    assert network_scope("is it the network?") == ""
    assert ruled_out_causes("the network team says the RoCE switches look clean. ideas?") == (
        "network",
    )
    assert ruled_out_causes("is the network fine?") == ()
