"""Hybrid case search: languages, tags, hit fields, errors, threads, CLI."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest
from typer.testing import CliRunner

from advisor_chat.cli.main import app
from advisor_chat.errors import InputError, ToolArgumentError
from advisor_chat.kb import CaseHit, get_case, search_cases, tokenize


def test_tokenizer_english_words_and_cjk_bigrams() -> None:
    toks = tokenize("Set TASK_QUEUE_ENABLE=2 for 下发慢")
    assert "task_queue_enable" in toks and "queue" in toks
    assert {"下发", "发慢"} <= set(toks)
    assert "for" not in toks


def test_chinese_question_finds_the_rank12_case() -> None:
    hits = search_cases("为什么12卡慢？它有大段空闲时间，其他卡都在等它", k=3)
    assert hits[0].id == "rank12-free-16card"


def test_chinese_query_for_an_english_env_var_case() -> None:
    hits = search_cases("怎么开启 mc2 通算融合", k=3)
    assert hits[0].id == "mc2-tp-fusion"


def test_tag_only_query_matches_by_tags() -> None:
    hits = search_cases("", ["mc2_opportunity"], k=3)
    assert hits[0].id == "mc2-tp-fusion"
    assert hits[0].matched_tags == ("mc2_opportunity",)
    hits = search_cases("", ["gc_pause"], k=3)
    assert hits[0].id == "python-gc-pause"


def test_hit_fields_come_from_the_case_file() -> None:
    hit = search_cases("HCCL_CONNECT_TIMEOUT EI0006", ["hccl_timeout_risk"], k=1)[0]
    case = get_case(hit.id)
    assert isinstance(hit, CaseHit)
    assert hit.id == "hccl-timeouts"
    assert hit.source.startswith(f"knowledge/cases/{hit.id}.md")
    assert all(src in hit.source for src in case.sources)
    assert hit.remedies == case.remedies
    assert hit.expected_effect == case.expected_effect
    assert hit.title_zh == case.title_zh
    assert hit.matched_tags == ("hccl_timeout_risk",)
    section_name = hit.section.split(":", 1)[0]
    assert section_name in case.sections
    assert hit.score > 0


def test_scores_are_sorted_and_k_respected() -> None:
    hits = search_cases("communication is slow", k=7)
    assert len(hits) == 7
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len({h.id for h in hits}) == 7


def test_bad_arguments() -> None:
    with pytest.raises(InputError):
        search_cases("   ")
    with pytest.raises(ToolArgumentError, match="host_bound"):
        search_cases("slow", ["not_a_tag"])
    with pytest.raises(ToolArgumentError):
        search_cases("slow", k=0)


def test_concurrent_searches_from_threads_agree_with_serial() -> None:
    queries = ["数据加载慢", "slow RDMA link", "MoE experts unbalanced", "内存碎片 OOM"]
    serial = [[h.id for h in search_cases(q, k=3)] for q in queries]
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(lambda q: [h.id for h in search_cases(q, k=3)], queries * 2))
    assert parallel == serial * 2


runner = CliRunner()


def test_cli_kb_list_and_search_json() -> None:
    res = runner.invoke(app, ["kb", "list", "--json"])
    assert res.exit_code == 0, res.output
    listed = orjson.loads(res.stdout)
    assert any(c["id"] == "rank12-free-16card" for c in listed)
    res = runner.invoke(app, ["kb", "search", "绑核", "--tags", "cpu_binding", "-k", "2", "--json"])
    assert res.exit_code == 0, res.output
    hits = orjson.loads(res.stdout)
    assert len(hits) == 2 and hits[0]["id"] == "cpu-core-binding"
    assert hits[0]["matched_tags"] == ["cpu_binding"]


def test_cli_kb_build_and_errors(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    res = runner.invoke(app, ["kb", "build"])
    assert res.exit_code == 0, res.output
    assert "0 embedded" in res.stdout
    res = runner.invoke(app, ["kb", "search", "x", "--tags", "bogus_tag"])
    assert res.exit_code == 2
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "bad-case.md").write_text("---\nid: bad-case\ntitle: t\n---\n", encoding="utf-8")
    monkeypatch.setenv("ADVISOR_KNOWLEDGE", str(tmp_path))
    res = runner.invoke(app, ["kb", "list"])
    assert res.exit_code == 2
    assert "bad-case.md" in res.output


def test_stored_corpus_is_reused_and_gives_the_same_ranking(monkeypatch, tmp_path) -> None:
    """The tokenized corpus kept under ADVISOR_HOME (a CLI question does not tokenize the
    library again) ranks exactly as a freshly built one; a damaged file is rebuilt."""
    from advisor_chat.kb import search as S

    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path))
    q = "rank 12 long Free, others wait in collectives"
    monkeypatch.setattr(S, "_CORPUS", {})
    fresh = [(h.id, round(h.score, 9)) for h in search_cases(q, k=5)]
    stored = list((tmp_path / "cache" / "kb-corpus").glob("*.pkl"))
    assert len(stored) == 1
    monkeypatch.setattr(S, "_CORPUS", {})  # a new process: memory empty, the file is read
    built = []
    monkeypatch.setattr(S, "_build_corpus", lambda *a: built.append(1) or None)
    again = [(h.id, round(h.score, 9)) for h in search_cases(q, k=5)]
    assert again == fresh and built == []
    monkeypatch.undo()
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path))
    stored[0].write_bytes(b"not a pickle")
    monkeypatch.setattr(S, "_CORPUS", {})
    assert [(h.id, round(h.score, 9)) for h in search_cases(q, k=5)] == fresh
