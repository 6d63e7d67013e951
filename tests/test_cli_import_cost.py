"""Issue 13 item 5: the offline ``ask`` path imports only what it runs, and reads the same cases.

``advisor-chat ask`` in a fresh process must not import gradio, LangChain, chromadb, tiktoken or
plotly for a short question: the case search scores the stored vectors from the index snapshot
(``advisor_chat.kb.index.read_snapshot``) and the offline advisor does not cap tool results with
the tokenizer. The snapshot route must give the hits Chroma gives, so the cited cases do not
change; a stale or missing snapshot falls back to Chroma and is rewritten by the build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from advisor_chat.agent import Advisor
from advisor_chat.config import Settings, load_settings
from advisor_chat.kb import build_index, load_cases, search_cases
from advisor_chat.kb import index as kb_index

REPO = Path(__file__).resolve().parents[1]

#: Top-level packages the offline ``ask`` path must not import (the LLM backends, the web UI,
#: the vector store client, the tokenizer and plotting).
HEAVY = (
    "gradio",
    "langchain",
    "langchain_core",
    "langchain_openai",
    "chromadb",
    "tiktoken",
    "plotly",
)

_CHILD = """
import json, sys
out = sys.argv[1]
sys.argv = ["advisor-chat", *sys.argv[2:]]
code = 0
if sys.argv[1] == "search":  # the control: a search through Chroma
    from advisor_chat.kb import search_cases
    search_cases("why is rank 12 slow?", ["slow_rank"], 3)
else:
    from advisor_chat.cli.main import main
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
with open(out, "w", encoding="utf-8") as fh:
    json.dump({"exit": code, "modules": sorted(sys.modules)}, fh)
"""


def _run_child(tmp_path: Path, *args: str) -> tuple[dict, str]:
    out = tmp_path / "child.json"
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(out), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8")), proc.stdout


def _heavy(modules: list[str]) -> list[str]:
    return sorted({m.split(".")[0] for m in modules} & set(HEAVY))


@pytest.fixture(scope="module")
def built_index() -> Settings:
    """The session's case index (ADVISOR_HOME of the test run), built once, with its snapshot."""
    settings = load_settings()
    build_index(settings)
    assert kb_index.snapshot_is_current(settings.index_dir, load_cases())
    return settings


@pytest.mark.parametrize("question", ["why is rank 12 slow?", "12号卡为什么慢？"])
def test_offline_ask_imports_no_heavy_library(
    scenario, built_index: Settings, tmp_path: Path, question: str
) -> None:
    prof = scenario("seed-rank12", ranks=16, steps=4)
    child, stdout = _run_child(tmp_path, "ask", str(prof), question, "--json")
    assert child["exit"] == 0
    answer = json.loads(stdout)
    # the question really ran the diagnosis and the case search, and cited cases
    assert [c["name"] for c in answer["tool_calls"]][:1] == ["diagnose"]
    assert "search_cases" in [c["name"] for c in answer["tool_calls"]]
    assert answer["cases"], answer["answer"]
    assert "12" in answer["answer"].split("\n")[0]
    assert _heavy(child["modules"]) == []


def test_a_second_ask_reads_the_stored_diagnosis_without_loading_the_rules(
    scenario, built_index: Settings, tmp_path: Path
) -> None:
    """The first ``ask`` diagnoses and stores the diagnosis; the next one reads it back and never
    imports a blame rule or the decompositions (they are loaded on first use).

    Its own profile (five steps): the tests above asked the four-step one, whose diagnosis the
    shared home has stored already."""
    prof = scenario("seed-rank12", ranks=16, steps=5)
    first, _ = _run_child(tmp_path, "ask", str(prof), "why is rank 12 slow?")
    assert any(m.startswith("advisor_chat.diagnosis.rules.") for m in first["modules"])
    second, stdout = _run_child(tmp_path, "ask", str(prof), "why is rank 12 slow?", "--json")
    assert second["exit"] == 0 and "12" in json.loads(stdout)["answer"].split("\n")[0]
    loaded = [
        m
        for m in second["modules"]
        if m.startswith("advisor_chat.diagnosis.rules.") or m == "advisor_chat.diagnosis.decompose"
    ]
    assert loaded == []


def test_the_import_check_sees_a_chroma_search(built_index: Settings, tmp_path: Path) -> None:
    """Control: the same check in a child that searches through Chroma finds chromadb."""
    child, _ = _run_child(tmp_path, "search")
    assert "chromadb" in _heavy(child["modules"])


QUERIES = [
    ("why is rank 12 slow?", ["slow_rank", "high_free", "host_bound", "launch_delay"]),
    ("12号卡为什么慢？", ["slow_rank", "high_free", "host_bound", "launch_delay"]),
    ("which link is slow?", ["slow_link", "comm_wait_high"]),
    ("梯度 allreduce 没有被计算掩盖", ["comm_not_overlapped"]),
    ("", ["pipeline_bubble", "comm_wait_high"]),
    ("MatMul got slower after the CANN upgrade", None),
]


@pytest.mark.parametrize(("query", "tags"), QUERIES)
def test_snapshot_scores_equal_chroma_scores(
    built_index: Settings, query: str, tags: list[str] | None
) -> None:
    via_chroma = search_cases(query, tags, 10, settings=built_index, vectors="chroma")
    via_snapshot = search_cases(query, tags, 10, settings=built_index, vectors="snapshot")
    assert [(h.id, h.matched_tags) for h in via_snapshot] == [
        (h.id, h.matched_tags) for h in via_chroma
    ]
    for a, b in zip(via_snapshot, via_chroma, strict=True):
        assert a.score == pytest.approx(b.score, abs=1e-5)
        assert a.section == b.section


def test_advisor_cites_the_same_cases_as_a_chroma_search(scenario, built_index: Settings) -> None:
    from advisor_chat.ingest import load_profile

    prof = load_profile(scenario("seed-rank12", ranks=16, steps=4), settings=built_index)

    def chroma(query: str, symptom_tags: list[str] | None = None, k: int = 5) -> list:
        return search_cases(query, symptom_tags, k, settings=built_index, vectors="chroma")

    for q in ("why is rank 12 slow?", "12号卡为什么慢？", "what should I fix first?"):
        default = Advisor(prof, settings=built_index).ask(q)
        reference = Advisor(prof, settings=built_index, case_search=chroma).ask(q)
        assert [c.id for c in default.cases] == [c.id for c in reference.cases], q
        assert default.cases, q
        assert default.answer == reference.answer


def test_offline_tool_results_are_not_token_capped(scenario, built_index: Settings) -> None:
    from advisor_chat.agent.testing import scripted
    from advisor_chat.ingest import load_profile

    prof = load_profile(scenario("seed-rank12", ranks=16, steps=4), settings=built_index)
    offline = Advisor(prof, settings=Settings(home=built_index.home, max_tool_tokens=50))
    assert offline.session.cap_tool_text is False
    ans = offline.ask("why is rank 12 slow?")
    diag = next(c for c in offline.session.calls if c.name == "diagnose")
    assert "truncated to the token budget" not in diag.text
    assert len(diag.text.encode("utf-8")) > 50  # over the cap, kept whole
    assert ans.grounding.numbers_total > 0
    # with a model reading the results, the cap applies
    with_model = Advisor(prof, settings=Settings(home=built_index.home), chat_model=scripted([]))
    assert with_model.session.cap_tool_text is True


@pytest.fixture()
def small_kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Settings]:
    kdir = tmp_path / "knowledge"
    (kdir / "cases").mkdir(parents=True)
    for cid in ("python-gc-pause", "slow-link-rdma", "dataloader-stall"):
        shutil.copy(REPO / "knowledge" / "cases" / f"{cid}.md", kdir / "cases")
    shutil.copy(REPO / "knowledge" / "glossary.yaml", kdir)
    monkeypatch.setenv("ADVISOR_KNOWLEDGE", str(kdir))
    return kdir, Settings(home=tmp_path / "home")


def test_a_stale_snapshot_is_not_used_and_the_build_rewrites_it(
    small_kb: tuple[Path, Settings],
) -> None:
    kdir, settings = small_kb
    build_index(settings)
    assert kb_index.snapshot_is_current(settings.index_dir, load_cases(kdir))
    case = kdir / "cases" / "python-gc-pause.md"
    text = case.read_text(encoding="utf-8")
    case.write_text(text.replace('title: "Python', 'title: "CPython', 1), encoding="utf-8")
    cases = load_cases(kdir)
    assert not kb_index.snapshot_is_current(settings.index_dir, cases)
    assert kb_index.read_snapshot(settings.index_dir, cases) is None
    before = kb_index.EMBEDDER.passages_embedded
    hits = search_cases("Python GC 停顿", k=1, settings=settings, vectors="snapshot")
    assert hits[0].id == "python-gc-pause"
    # the stale snapshot sent the search through the build: one changed case re-embedded
    assert kb_index.EMBEDDER.passages_embedded - before == 1
    assert kb_index.snapshot_is_current(settings.index_dir, cases)


def test_a_failed_write_leaves_no_snapshot(
    small_kb: tuple[Path, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    kdir, settings = small_kb
    build_index(settings)
    (kdir / "cases" / "slow-link-rdma.md").unlink()  # a removal to write
    from chromadb.api.models.Collection import Collection

    def boom(self: object, *a: object, **k: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(Collection, "delete", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        build_index(settings)
    assert not (settings.index_dir / kb_index.SNAPSHOT).exists()
    monkeypatch.undo()
    monkeypatch.setenv("ADVISOR_KNOWLEDGE", str(kdir))
    hits = search_cases("RDMA", k=3, settings=settings, vectors="snapshot")
    assert "slow-link-rdma" not in [h.id for h in hits]
    assert kb_index.snapshot_is_current(settings.index_dir, load_cases(kdir))


@pytest.mark.parametrize("damage", ["garbage", "no-stamp", "short-vectors"])
def test_a_damaged_snapshot_falls_back_to_chroma(
    small_kb: tuple[Path, Settings], damage: str
) -> None:
    _, settings = small_kb
    build_index(settings)
    expected = search_cases("Python GC 停顿", k=3, settings=settings, vectors="chroma")
    path = settings.index_dir / kb_index.SNAPSHOT
    if damage == "garbage":
        path.write_bytes(b"\x00not json")
    elif damage == "no-stamp":
        path.write_text('{"chunks": []}', encoding="utf-8")
    else:  # stamped for these cases, but not vectors of this model
        data = json.loads(path.read_text(encoding="utf-8"))
        data["chunks"] = [[i, c, s, v[:10]] for i, c, s, v in data["chunks"]]
        path.write_text(json.dumps(data), encoding="utf-8")
    got = search_cases("Python GC 停顿", k=3, settings=settings, vectors="snapshot")
    assert [(h.id, h.score) for h in got] == [(h.id, h.score) for h in expected]
