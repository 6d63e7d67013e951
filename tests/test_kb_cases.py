"""Case files: schema, vocabulary, contract ids, and schema errors that name file and field."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from advisor_chat.errors import InputError
from advisor_chat.kb import get_case, load_cases, parse_condition
from advisor_chat.kb.cases import REQUIRED_SECTIONS, parse_case_file
from advisor_chat.symptoms import SYMPTOM_TAGS

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "knowledge" / "cases"
CJK = re.compile(r"[\u4e00-\u9fff]")


def _front_matter(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---", 2)[1])


def _contract_ids() -> set[str]:
    text = (REPO / "docs" / "CONTRACTS.md").read_text(encoding="utf-8")
    section = text.split("## Case ids", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`([a-z0-9-]+)`", section))


def test_every_contract_case_id_exists() -> None:
    ids = _contract_ids()
    assert len(ids) >= 30
    files = {p.stem for p in CASES.glob("*.md")}
    assert ids - files == set()
    assert {c.id for c in load_cases()} == files


def test_at_least_32_cases_all_valid() -> None:
    cases = load_cases()
    assert len(cases) >= 32
    for c in cases:
        assert c.path.stem == c.id
        assert c.remedies and c.sources and c.expected_effect
        for s in REQUIRED_SECTIONS:
            assert c.sections.get(s, "").strip(), (c.id, s)
        assert CJK.search(c.title_zh), c.id
        assert len(CJK.findall(c.chinese_summary)) > 40, c.id


def test_every_case_tag_is_in_the_vocabulary_read_from_raw_yaml() -> None:
    for path in CASES.glob("*.md"):
        tags = _front_matter(path)["symptom_tags"]
        assert tags, path
        unknown = [t for t in tags if t not in SYMPTOM_TAGS]
        assert unknown == [], (path.name, unknown)


def test_applies_when_conditions_parse_and_evaluate() -> None:
    for c in load_cases():
        for cond in c.applies_when:
            parsed = parse_condition(cond)
            assert parsed.metric in cond
    c = get_case("host-dispatch-bound")
    assert "mean_free_share > 0.1" in c.matching_conditions({"mean_free_share": 0.25})
    assert c.matching_conditions({"mean_free_share": 0.05}) == []
    assert c.matching_conditions({}) == []
    with pytest.raises(ValueError, match="unit suffix"):
        parse_condition("free > 0.1")
    with pytest.raises(ValueError, match="metric op number"):
        parse_condition("free_share is big")


def test_get_case_unknown_id_lists_known_ids() -> None:
    with pytest.raises(InputError, match="host-dispatch-bound"):
        get_case("no-such-case")


GOOD = (CASES / "python-gc-pause.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (
            lambda t: t.replace("symptom_tags: [gc_pause,", "symptom_tags: [gc_pauses,"),
            "symptom_tags",
        ),
        (lambda t: re.sub(r"title_zh: .*\n", "", t, count=1), "title_zh"),
        (
            lambda t: re.sub(r"title_zh: .*\n", "title_zh: only English here\n", t, count=1),
            "title_zh",
        ),
        (lambda t: t.replace("gc_gap_us_per_step > 200000", "gc_gap > lots"), "applies_when"),
        (lambda t: t.replace("## Pitfalls", "## Caveats"), "sections"),
        (lambda t: t.replace("id: python-gc-pause", "id: python-gc"), "id"),
        (lambda t: t.replace("sources:\n", "sources: []\nold_sources:\n"), "sources"),
        (lambda t: t.replace("remedies:", "remedy_list:"), "remedies"),
    ],
)
def test_bad_case_file_error_names_file_and_field(tmp_path: Path, mutate, field: str) -> None:
    bad = mutate(GOOD)
    assert bad != GOOD
    path = tmp_path / "python-gc-pause.md"
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        parse_case_file(path)
    msg = str(exc.value)
    assert str(path) in msg
    assert field in msg


def test_missing_front_matter_and_bad_yaml(tmp_path: Path) -> None:
    p = tmp_path / "x-case.md"
    p.write_text("## Symptoms\nno front matter\n", encoding="utf-8")
    with pytest.raises(InputError, match="front matter") as exc:
        parse_case_file(p)
    assert str(p) in str(exc.value)
    p.write_text("---\nid: [unclosed\n---\n## Symptoms\n", encoding="utf-8")
    with pytest.raises(InputError, match="YAML"):
        parse_case_file(p)


def test_load_cases_reports_the_bad_file_in_a_folder(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    shutil.copy(CASES / "python-gc-pause.md", cases)
    (cases / "broken-case.md").write_text(
        GOOD.replace("id: python-gc-pause", "id: broken-case").replace(
            "remedies:", "remedies: []\nx:"
        ),
        encoding="utf-8",
    )
    with pytest.raises(InputError) as exc:
        load_cases(tmp_path)
    assert "broken-case.md" in str(exc.value)


def test_crlf_case_file_parses(tmp_path: Path) -> None:
    p = tmp_path / "python-gc-pause.md"
    p.write_bytes(GOOD.replace("\n", "\r\n").encode("utf-8"))
    c = parse_case_file(p)
    assert c.id == "python-gc-pause"
    assert "gc_pause" in c.symptom_tags
