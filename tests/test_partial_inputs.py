"""Inputs that are partly damaged in ways a copy or an archive produces (issue 24 trial).

Each test damages a generated profile whose answer is known by construction (``answer_key.json``)
and checks both the load-time warning and that the diagnosis still names the planted fault, and
not an artefact of the damage: a file cut inside its last row, kernel rows written twice, one end
of the slow link without its link table, macOS resource-fork copies of the rank folders.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

OUT = "ASCEND_PROFILER_OUTPUT"


def _rank_out(root: Path, rank: int) -> Path:
    info = next(root.glob(f"*_ascend_pt/profiler_info_{rank}.json"))
    return info.parent / OUT


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _load(path: Path):
    from advisor_chat.ingest import load_profile

    return load_profile(path, use_cache=False)


def test_step_trace_cut_inside_its_last_row(scenario, tmp_path: Path) -> None:
    from advisor_chat.diagnosis import diagnose

    src = scenario("seed-rank12")
    key = json.loads((src / "answer_key.json").read_text())
    culprit = key["slow_ranks"][0]
    root = _copy(src, tmp_path / "p")
    f = _rank_out(root, culprit) / "step_trace_time.csv"
    data = f.read_bytes().rstrip(b"\r\n")
    last = data.rsplit(b"\n", 1)[1]
    # cut in the middle of the last row's Free value: 'Step,Computing,...,Free' -> '...,41'
    fields = last.split(b",")
    cut = b",".join(fields[:5]) + b"," + fields[5][:2]
    f.write_bytes(data[: len(data) - len(last)] + cut)
    p = _load(root)
    codes = {w.code for w in p.warnings}
    assert "row_cut" in codes
    w = next(w for w in p.warnings if w.code == "row_cut")
    assert "step_trace_time.csv" in w.message and w.ranks == (culprit,)
    st = p.get("step_trace")
    last_step = int(st["step"].max())
    # the cut row is left out, the other ranks keep that step
    assert st[(st["rank"] == culprit) & (st["step"] == last_step)].empty
    assert not st[(st["rank"] != culprit) & (st["step"] == last_step)].empty
    # the culprit is still a slow rank (judged on the steps it has), not "one-step stalls"
    d = diagnose(p)
    top = d.causes[0]
    assert culprit in top.culprit.ranks
    assert top.mechanism.value != "step_events"
    # its excess per step is the same as on the intact copy, to within the steps' spread
    full = diagnose(_load(src)).causes[0]
    assert top.gain_us == pytest.approx(full.gain_us, rel=0.15)


def test_kernel_rows_written_twice_are_counted_once(scenario, tmp_path: Path) -> None:
    from advisor_chat.diagnosis import diagnose

    src = scenario("matmul-shape-regression")
    key = json.loads((src / "answer_key.json").read_text())
    culprit = key["slow_ranks"][0]
    root = _copy(src, tmp_path / "p")
    f = _rank_out(root, culprit) / "kernel_details.csv"
    text = f.read_text(encoding="utf-8")
    _head, body = text.split("\n", 1)
    f.write_text(text + body, encoding="utf-8")  # every row again, without a header
    n_body = sum(1 for line in body.splitlines() if line.strip())

    p = _load(root)
    k = p.kernels_for([culprit])
    ref = _load(src).kernels_for([culprit])
    assert len(k) == len(ref) and len(ref) <= n_body
    w = [w for w in p.warnings if w.code == "duplicate_rows"]
    assert w and culprit in w[0].ranks and "kernel_details.csv" in w[0].message
    assert str(len(ref)) in w[0].message or str(n_body) in w[0].message
    top = diagnose(p).causes[0]
    assert culprit in top.culprit.ranks
    # the planted fault: the same shape runs slower per launch, not extra launches
    assert "slower per launch" in top.summary and "more launches" not in top.summary


def test_link_end_without_its_link_table(scenario, tmp_path: Path) -> None:
    from advisor_chat.agent import Advisor
    from advisor_chat.config import load_settings
    from advisor_chat.diagnosis import diagnose

    src = scenario("slow-link")
    link = json.loads((src / "answer_key.json").read_text())["slow_link"]
    a, b = int(link["src_rank"]), int(link["dst_rank"])
    root = _copy(src, tmp_path / "p")
    (_rank_out(root, a) / "communication_matrix.json").unlink()
    p = _load(root)
    w = [w for w in p.warnings if w.code == "partial_files"]
    assert w and w[0].ranks == (a,) and "communication_matrix.json" in w[0].message
    d = diagnose(p)
    links = [c for c in d.causes if c.mechanism.value == "slow_link"]
    assert links, [c.id for c in d.causes]
    c = links[0]
    # never a link from a rank to itself: the rank's links, the link not named
    assert c.culprit.link is None and c.culprit.ranks == (a,)
    assert c.culprit.transport == link["transport"]
    adv = Advisor(p, settings=load_settings(model="offline"))
    ans = adv.ask(f"is link {a}->{b} slow?").answer
    assert ans.startswith("Cannot tell") and f"{a}→{a}" not in ans
    which = adv.ask("which link is slow?").answer
    assert not which.startswith("No") and f"rank {a}" in which.split(".")[0]


def test_macos_resource_fork_copies_are_not_ranks(scenario, tmp_path: Path) -> None:
    src = scenario("seed-rank12")
    root = _copy(src, tmp_path / "p")
    fork = root / "__MACOSX"
    for d in sorted(root.glob("*_ascend_pt")):
        (fork / d.name / OUT).mkdir(parents=True)
        # AppleDouble headers: binary, not the files they are named after
        for f in ("._profiler_info_0.json", "._profiler_metadata.json"):
            (fork / d.name / f).write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X")
        (fork / d.name / OUT / "._step_trace_time.csv").write_bytes(b"\x00\x05\x16\x07")
    p = _load(root)
    ref = _load(src)
    assert p.ranks == ref.ranks
    assert not [w for w in p.warnings if w.code == "rank_unknown"]


def test_cluster_step_trace_cut_keeps_the_job_size(real_samples: Path, tmp_path: Path) -> None:
    """A cluster_step_trace_time.csv cut in half: the ranks of its lost rows are named missing
    (from communication_group.json), and every answer says which file was cut."""
    import csv

    from advisor_chat.diagnosis import diagnose

    root = _copy(real_samples / "cluster-16rank-pp2", tmp_path / "p")
    out = root / "cluster_analysis_output"
    f = out / "cluster_step_trace_time.csv"
    f.chmod(0o644)
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    # independent: the ranks of the whole rows left, and every rank communication_group.json lists
    lines = f.read_text().splitlines()
    header = next(csv.reader(lines[:1]))
    whole = [r for r in csv.reader(lines[1:-1]) if len(r) == len(header) and r[1] == "rank"]
    kept = {int(r[2]) for r in whole}
    groups = json.loads((out / "communication_group.json").read_text())
    listed = {r for kind in groups.values() for g in kind for r in g}
    p = _load(root)
    assert set(p.ranks) == kept
    w = next(w for w in p.warnings if w.code == "missing_ranks")
    assert set(w.ranks) == listed - kept and "communication_group.json" in w.message
    d = diagnose(p)
    assert "cluster_step_trace_time.csv ends in the middle" in d.left_out
    assert "this rank's" not in d.left_out
