"""Topology from hostnames: rank folder names -> hosts -> groups of hosts (racks), and one cause
for slow links between two groups; the wait a unit spread over parallel groups costs, per rank."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.attribution import WaitAttribution, host_groups
from advisor_chat.diagnosis.types import Mechanism
from advisor_chat.ingest.detect import host_of_folder
from advisor_chat.ingest.loader import load_profile


@pytest.mark.parametrize(
    ("name", "host"),
    [
        ("gz-r07-npu01_3096504_20250109074801020_ascend_pt", "gz-r07-npu01"),
        ("node.a_12_20250109074801020_ascend_ms", "node.a"),
        # a custom worker name without a pid is the whole name
        ("trainer_20250109074801020_ascend_pt", "trainer"),
        # renamed folders and CANN PROF_ folders carry no hostname
        ("rank0_ascend_pt", None),
        ("PROF_000001_20250109074801020_ABCDEF", None),
        # the clock must have 17 digits
        ("host_1_2025010907_ascend_pt", None),
    ],
)
def test_hostname_is_read_from_the_rank_folder_name(name: str, host: str | None) -> None:
    assert host_of_folder(name) == host
    assert host_of_folder(Path("/data/prof") / name) == host


class _Meta:
    """The one table :func:`host_groups` reads: ``meta`` (rank, source_dir)."""

    def __init__(self, folders: dict[int, str]) -> None:
        self.meta = pd.DataFrame(
            {"rank": list(folders), "source_dir": [f"/p/{f}" for f in folders.values()]}
        )

    def get(self, name: str) -> pd.DataFrame:
        return self.meta if name == "meta" else pd.DataFrame()


def _folders(hosts: list[str], per_node: int = 2) -> tuple[_Meta, list[tuple[int, ...]]]:
    folders, nodes = {}, []
    for i, h in enumerate(hosts):
        ranks = tuple(range(i * per_node, (i + 1) * per_node))
        nodes.append(ranks)
        for r in ranks:
            folders[r] = f"{h}_{3000 + r}_20250109074801020_ascend_pt"
    return _Meta(folders), nodes


def test_nodes_group_by_every_varying_hostname_part_but_the_last() -> None:
    meta, nodes = _folders(["gz-r07-npu01", "gz-r07-npu02", "gz-r08-npu01", "gz-r08-npu02"])
    got = host_groups(meta, nodes)  # type: ignore[arg-type]
    assert [(g.name, g.ranks, g.hosts) for g in got] == [
        ("gz-r07", (0, 1, 2, 3), ("gz-r07-npu01", "gz-r07-npu02")),
        ("gz-r08", (4, 5, 6, 7), ("gz-r08-npu01", "gz-r08-npu02")),
    ]
    # IP-like names: the third octet groups, the fourth tells the hosts apart
    meta, nodes = _folders(["10-0-1-5", "10-0-1-6", "10-0-2-5", "10-0-2-9"])
    assert [g.name for g in host_groups(meta, nodes)] == ["10-0-1", "10-0-2"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "hosts",
    [
        # one varying part: hosts, no groups
        ["node01", "node02", "node03", "node04"],
        # every host its own group: nothing is learned
        ["a-r1-n1", "a-r2-n2", "a-r3-n3"],
        # names of different shapes
        ["gz-r07-npu01", "gz-r07-npu02", "gzr08npu01"],
        # one node with two hostnames is not a node
        ["gz-r07-npu01", "gz-r07-npu01", "gz-r08-npu01"],
    ],
)
def test_no_groups_when_the_hostnames_do_not_reveal_them(hosts: list[str]) -> None:
    meta, nodes = _folders(hosts)
    assert host_groups(meta, nodes) == []  # type: ignore[arg-type]


def test_a_unit_spread_over_parallel_groups_costs_what_one_rank_loses() -> None:
    """Two data-parallel rails run at the same time: {0, 2} and {1, 3}. Ranks 2 and 3 arrive
    5 ms after their peer in every one of 2 steps. Each rank loses 5 ms per step; the job loses
    5 ms per step, not the 10 ms the two rails' instances sum to."""
    rail0, rail1 = np.array([0, 2]), np.array([1, 3])
    late = np.array([5_000.0, 0.0])
    attr = WaitAttribution(
        instances=pd.DataFrame(),
        culprits=(),
        events=(),
        steps_count=2,
        total_wait_us_per_step=0.0,
        units=(),
        waits=((rail0, late), (rail1, late)) * 2,
    )
    assert attr.loss_by_rank({2, 3}) == {0: 5_000.0, 1: 5_000.0, 2: 5_000.0, 3: 5_000.0}
    assert attr.fix_alone_us({2, 3}) == 5_000.0
    # one rail's late rank: only its rail loses
    assert attr.loss_by_rank({3}) == {1: 5_000.0, 3: 5_000.0}
    assert attr.loss_by_rank({0}) == {}


def test_slow_links_between_two_racks_are_one_cause(scenario, tmp_path: Path) -> None:
    """cross-rack-uplink: the dp ring's two hops between the racks run at ~35% on every rail.
    One cause names both host groups and the senders of both hops; its gain is the simulated
    saving of a healthy uplink within 20%. The same profile with renamed folders (no hostnames)
    has no such cause: the racks came from the names alone."""
    root = scenario("cross-rack-uplink")
    key = json.loads((root / "answer_key.json").read_text(encoding="utf-8"))
    d = diagnose(load_profile(root, progress=False))
    links = [c for c in d.causes if c.mechanism is Mechanism.SLOW_LINK]
    assert len(links) == 1, [c.id for c in links]
    top = d.causes[0]
    assert top is links[0] and top.id == "cause.slow_link.host_groups_rdma"
    assert list(top.culprit.ranks) == key["root_cause"]["culprit_ranks"]
    assert "gz-r07" in top.summary and "gz-r08" in top.summary
    saving = key["expected_numbers"]["saving_us_per_step"]
    assert top.gain_us == pytest.approx(saving, rel=0.2)
    assert {v.rank for v in top.victims} == set(key["root_cause"]["victim_ranks"])

    renamed = tmp_path / "renamed"
    renamed.mkdir()
    for d_ in sorted(root.glob("*_ascend_pt")):
        rank = json.loads(next(d_.glob("profiler_info_*.json")).read_text())["rank_id"]
        shutil.copytree(d_, renamed / f"rank{rank}_ascend_pt")
    d2 = diagnose(load_profile(renamed, progress=False))
    assert not any("host_groups" in c.id for c in d2.causes)
    assert any(c.mechanism is Mechanism.SLOW_LINK for c in d2.causes)


@pytest.mark.parametrize(
    ("question", "lead"),
    [
        # the NICs of the senders reach hosts of their own group at full speed: not one part
        ("is it the NIC of rank 9?", "No"),
        ("is rank 9's NIC bad?", "No"),
        ("is it the network between the racks?", "Yes"),
    ],
)
def test_one_nic_is_not_the_path_between_two_groups(scenario, question: str, lead: str) -> None:
    from advisor_chat.agent.advisor import Advisor
    from advisor_chat.config import Settings

    def no_cases(*args: object, **kw: object) -> list:
        return []

    adv = Advisor(
        load_profile(scenario("cross-rack-uplink"), progress=False),
        settings=Settings(),
        case_search=no_cases,
    )
    ans = adv.ask(question)
    assert ans.answer.startswith(lead), ans.answer
    assert "gz-r07" in ans.answer
