"""A node whose MatMul weights stay ND, and the software-version suspect, on generated profiles.

``weight-format-node`` (``advisor_chat.synth.scenarios_ext``) plants ranks 8-15 reading their
MatMul weights as ``ND;ND`` where ranks 0-7 read ``ND;FRACTAL_NZ``, 1.3x slower there. The
formats are checked in the written kernel_details.csv (csv module, independently of ingest); the
diagnosis must name the formats as the evidence. The version suspect is judged from the versions
each rank's profiler_info_{rank}.json records: a copy of the profile with ranks 8-15 on another
CANN is "yes, and the slower ranks are those", the profile as written is "no, the same versions".
"""

from __future__ import annotations

import csv
import functools
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from advisor_chat.agent.advisor import Advisor
from advisor_chat.config import load_settings
from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.hypotheses import judge
from advisor_chat.ingest import Profile, load_profile


def _rank_of(d: Path) -> int:
    return int(json.loads(next(d.glob("profiler_info_*.json")).read_text())["rank_id"])


def _matmul_formats(root: Path) -> dict[int, Counter[str]]:
    out: dict[int, Counter[str]] = {}
    for d in root.glob("*_ascend_pt"):
        path = d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
        with path.open(encoding="utf-8-sig", newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["Type"] == "MatMulV2"]
        out[_rank_of(d)] = Counter(r["Input Formats"].strip('"') for r in rows)
    return out


def test_the_planted_formats_are_in_the_files_and_named_as_evidence(scenario) -> None:
    root = scenario("weight-format-node")
    fm = _matmul_formats(root)
    assert {r for r, c in fm.items() if set(c) == {"ND;ND"}} == set(range(8, 16))
    assert {r for r, c in fm.items() if set(c) == {"ND;FRACTAL_NZ"}} == set(range(8))
    d = diagnose(load_profile(root, progress=False))
    top = d.causes[0]
    assert set(top.culprit.ranks) == set(range(8, 16))
    assert "ND;ND" in top.summary and "ND;FRACTAL_NZ" in top.summary
    assert "ND;ND" in top.summary_zh and "ND;FRACTAL_NZ" in top.summary_zh
    assert "allow_internal_format" in top.remedies[0].text
    # one figure per quantity: the extra compute is said once in the first sentence
    amount = top.summary.split("compute ", 1)[1].split(" more per step", 1)[0]
    assert top.summary.count(f"{amount} more per step") == 1, top.summary


def _with_versions(src: Path, dst: Path, cann: dict[int, str]) -> Path:
    shutil.copytree(src, dst)
    for d in dst.glob("*_ascend_pt"):
        r = _rank_of(d)
        if r in cann:
            f = next(d.glob("profiler_info_*.json"))
            info = json.loads(f.read_text())
            info["cann_version"] = cann[r]
            f.write_text(json.dumps(info))
    return dst


def test_version_suspect_is_judged_from_the_recorded_versions(scenario, tmp_path: Path) -> None:
    root = scenario("weight-format-node")
    d_same = diagnose(load_profile(root, progress=False))
    same = judge(d_same, "version")
    assert same.status == "contradicted" and "CANN 8.0.RC2" in same.reason
    # the same versions everywhere: the format remedy does not send the user to compare them
    assert "allow_internal_format" in d_same.causes[0].remedies[0].text
    assert "version" not in d_same.causes[0].remedies[0].text
    assert "版本" not in d_same.causes[0].remedies[0].text_zh
    mixed_root = _with_versions(root, tmp_path / "mixed", dict.fromkeys(range(8, 16), "8.0.RC3"))
    d_mixed = diagnose(load_profile(mixed_root, use_cache=False, progress=False))
    mixed = judge(d_mixed, "version")
    assert "versions differ from its peers'" in d_mixed.causes[0].remedies[0].text
    assert mixed.status == "supported"
    assert "8.0.RC2 on ranks 0-7" in mixed.reason and "8.0.RC3 on ranks 8-15" in mixed.reason
    assert "the slower ranks 8-15 are the ones on CANN 8.0.RC3" in mixed.reason


@functools.cache
def _weight_format_node(path: Path) -> Profile:
    return load_profile(path, progress=False)


@pytest.mark.parametrize(
    ("question", "start"),
    [
        ("是不是CANN版本不一致？", "不是各卡软件版本不一致"),
        (
            "are the ranks on different CANN versions?",
            "No: the cause is ranks 8-15, not mismatched software versions",
        ),
        # a why-question with a comparison is not a yes/no question
        ("8到15号卡为什么比其他卡慢？", "8-15号卡"),
    ],
)
def test_version_and_why_questions(scenario, tmp_path: Path, question: str, start: str) -> None:
    # one loaded profile for the three questions: its diagnosis is computed once (cached per
    # profile object); each question gets a fresh advisor (no conversation carried over)
    adv = Advisor(
        _weight_format_node(scenario("weight-format-node")),
        settings=load_settings(model="offline", home=tmp_path),
    )
    text = " ".join(adv.ask(question).answer.split())
    assert text.startswith(start), text[:200]


def test_the_db_export_names_the_same_formats(scenario) -> None:
    """The DB export (COMPUTE_TASK_INFO.inputFormats through STRING_IDS) gives the same evidence."""
    root = scenario("weight-format-node", export="db")
    assert not list(root.rglob("kernel_details.csv"))  # the DB is the only source of kernels
    top = diagnose(load_profile(root, progress=False)).causes[0]
    assert set(top.culprit.ranks) == set(range(8, 16))
    assert "ND;ND" in top.summary and "ND;FRACTAL_NZ" in top.summary


def test_every_compared_counter_is_ingested_and_has_a_meaning() -> None:
    """One counter list: the ingest's PMU ratios, all compared, each with the words that state it."""
    from advisor_chat.diagnosis.decompose import COUNTERS
    from advisor_chat.diagnosis.evidence import COUNTER_MEANING
    from advisor_chat.ingest.schema import PMU_RATIOS

    assert set(PMU_RATIOS) <= set(COUNTERS)
    assert set(COUNTER_MEANING) == set(COUNTERS)
