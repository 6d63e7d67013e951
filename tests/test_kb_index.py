"""Case index: incremental builds (hash-based), deletes, model change, no network."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import pytest_socket

from advisor_chat.config import Settings, load_settings
from advisor_chat.errors import InputError
from advisor_chat.kb import build_index, load_cases, search_cases
from advisor_chat.kb import index as kb_index
from advisor_chat.kb.index import EMBEDDER, chunk_case, get_collection

REPO = Path(__file__).resolve().parents[1]
SMALL = ("python-gc-pause", "slow-link-rdma", "dataloader-stall")


@pytest.fixture()
def small_kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Settings]:
    """A three-case knowledge folder and a private index folder."""
    kdir = tmp_path / "knowledge"
    (kdir / "cases").mkdir(parents=True)
    for cid in SMALL:
        shutil.copy(REPO / "knowledge" / "cases" / f"{cid}.md", kdir / "cases")
    shutil.copy(REPO / "knowledge" / "glossary.yaml", kdir)
    monkeypatch.setenv("ADVISOR_KNOWLEDGE", str(kdir))
    return kdir, Settings(home=tmp_path / "home")


def test_full_build_then_unchanged_rebuild_embeds_nothing() -> None:
    """The session index (default settings) is shared with the other kb tests."""
    settings = load_settings()
    t0 = time.perf_counter()
    first = build_index(settings)
    print(f"\nfirst build_index call: {time.perf_counter() - t0:.2f} s, {first}")
    n_cases = len(load_cases())
    assert first.embedded + first.skipped == n_cases
    before = EMBEDDER.passages_embedded
    again = build_index(settings)
    assert again.embedded == 0
    assert again.chunks_embedded == 0
    assert again.skipped == n_cases
    assert again.deleted == 0
    assert EMBEDDER.passages_embedded == before  # not a single text went through the model
    col = get_collection(settings.index_dir)
    assert col.count() == sum(len(chunk_case(c)) for c in load_cases())
    assert col.metadata["embedding_model"] == kb_index.embedding_model_id()


def test_editing_one_case_reembeds_only_that_case(small_kb: tuple[Path, Settings]) -> None:
    kdir, settings = small_kb
    t0 = time.perf_counter()
    first = build_index(settings)
    print(f"\n3-case build from scratch: {time.perf_counter() - t0:.2f} s")
    assert first.embedded == 3 and first.rebuilt
    assert first.texts_embedded == len({ch.text for c in load_cases(kdir) for ch in chunk_case(c)})
    path = kdir / "cases" / "slow-link-rdma.md"
    path.write_text(
        path.read_text(encoding="utf-8").replace("## 中文摘要\n", "## 中文摘要\n修改过的一句。", 1),
        encoding="utf-8",
    )
    before = EMBEDDER.passages_embedded
    rep = build_index(settings)
    assert rep.embedded_ids == ["slow-link-rdma"]
    assert (rep.embedded, rep.skipped, rep.deleted) == (1, 2, 0)
    case = next(c for c in load_cases(kdir) if c.id == "slow-link-rdma")
    assert rep.chunks_embedded == len(chunk_case(case))
    assert EMBEDDER.passages_embedded - before == len(chunk_case(case)) == rep.texts_embedded
    col = get_collection(settings.index_dir)
    got = col.get(where={"case_id": "slow-link-rdma"}, include=["metadatas", "documents"])
    assert {m["content_hash"] for m in got["metadatas"]} == {case.content_hash}
    assert any("修改过的一句" in d for d in got["documents"])


def test_edit_outside_the_embedded_text_reuses_the_stored_vector(
    small_kb: tuple[Path, Settings],
) -> None:
    """A body edit that leaves the embedded chunk text alone updates the hash but calls no model."""
    kdir, settings = small_kb
    build_index(settings)
    path = kdir / "cases" / "slow-link-rdma.md"
    path.write_text(
        path.read_text(encoding="utf-8").replace("## Pitfalls", "## Pitfalls\n- Edited line.", 1),
        encoding="utf-8",
    )
    before = EMBEDDER.passages_embedded
    rep = build_index(settings)
    assert rep.embedded_ids == ["slow-link-rdma"] and rep.texts_embedded == 0
    assert EMBEDDER.passages_embedded == before
    case = next(c for c in load_cases(kdir) if c.id == "slow-link-rdma")
    got = get_collection(settings.index_dir).get(
        where={"case_id": "slow-link-rdma"}, include=["metadatas"]
    )
    assert {m["content_hash"] for m in got["metadatas"]} == {case.content_hash}


def test_removed_case_is_deleted_and_force_rebuilds(small_kb: tuple[Path, Settings]) -> None:
    kdir, settings = small_kb
    build_index(settings)
    (kdir / "cases" / "dataloader-stall.md").unlink()
    rep = build_index(settings)
    assert (rep.embedded, rep.skipped, rep.deleted) == (0, 2, 1)
    col = get_collection(settings.index_dir)
    assert col.get(where={"case_id": "dataloader-stall"})["ids"] == []
    forced = build_index(settings, force=True)
    assert forced.rebuilt and forced.embedded == 2


def test_embedding_model_change_triggers_rebuild(
    small_kb: tuple[Path, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, settings = small_kb
    build_index(settings)
    monkeypatch.setattr(kb_index, "embedding_model_id", lambda: "other-model-9.9")
    rep = build_index(settings)
    assert rep.rebuilt and rep.embedded == 3
    assert get_collection(settings.index_dir).metadata["embedding_model"] == "other-model-9.9"


def test_build_and_search_with_all_sockets_blocked(small_kb: tuple[Path, Settings]) -> None:
    """pytest-socket blocks even loopback here: build and search must not open any socket."""
    _, settings = small_kb
    pytest_socket.disable_socket()
    try:
        rep = build_index(settings)
        assert rep.embedded == 3
        hits = search_cases("Python 垃圾回收导致 host 停顿", k=3, settings=settings)
    finally:
        pytest_socket.enable_socket()
    assert hits[0].id == "python-gc-pause"


def _corrupt(index_dir: Path, how: str) -> None:
    kb_index.close_client(index_dir)
    if how == "garbage-sqlite":
        (index_dir / "chroma.sqlite3").write_bytes(b"this is not a database\n" * 64)
    else:  # the index folder replaced by a plain file
        shutil.rmtree(index_dir)
        index_dir.write_text("not a folder", encoding="utf-8")


@pytest.mark.parametrize("how", ["garbage-sqlite", "file-instead-of-folder"])
def test_unreadable_index_is_deleted_and_rebuilt_with_a_warning(
    small_kb: tuple[Path, Settings], how: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, settings = small_kb
    build_index(settings)
    _corrupt(settings.index_dir, how)
    with caplog.at_level("WARNING", logger="advisor_chat.kb.index"):
        rep = build_index(settings)
    assert rep.rebuilt and rep.embedded == 3 and rep.skipped == 0
    assert len(rep.warnings) == 1 and "unreadable" in rep.warnings[0]
    assert any("unreadable" in r.getMessage() for r in caplog.records)
    assert settings.index_dir.is_dir()
    assert get_collection(settings.index_dir).count() == sum(
        len(chunk_case(c)) for c in load_cases()
    )


def test_search_survives_an_index_corrupted_under_it(small_kb: tuple[Path, Settings]) -> None:
    _, settings = small_kb
    assert search_cases("Python GC 停顿", k=1, settings=settings)[0].id == "python-gc-pause"
    _corrupt(settings.index_dir, "garbage-sqlite")
    hits = search_cases("Python GC 停顿", k=1, settings=settings)
    assert hits[0].id == "python-gc-pause"
    assert get_collection(settings.index_dir).count() > 0


def test_broken_case_file_leaves_the_index_untouched(small_kb: tuple[Path, Settings]) -> None:
    kdir, settings = small_kb
    build_index(settings)
    col = get_collection(settings.index_dir)
    before = col.get(include=["metadatas"])
    bad = kdir / "cases" / "slow-link-rdma.md"
    bad.write_text(
        bad.read_text(encoding="utf-8").replace("title_zh:", "title_zh_typo:", 1), encoding="utf-8"
    )
    (kdir / "cases" / "dataloader-stall.md").unlink()  # a removal that must NOT be applied
    n_before = EMBEDDER.passages_embedded
    with pytest.raises(InputError) as err:
        build_index(settings)
    assert "slow-link-rdma.md" in str(err.value) and "title_zh" in str(err.value)
    with pytest.raises(InputError, match=r"slow-link-rdma\.md"):
        search_cases("RDMA retransmission", k=1, settings=settings)
    after = get_collection(settings.index_dir).get(include=["metadatas"])
    assert sorted(after["ids"]) == sorted(before["ids"])
    assert EMBEDDER.passages_embedded == n_before


def test_chunks_stay_within_the_token_budget() -> None:
    e5 = EMBEDDER._get()
    chunks = [ch for c in load_cases() for ch in chunk_case(c)]
    assert len({ch.id for ch in chunks}) == len(chunks)
    for ch in chunks:
        assert e5.token_count(ch.text) <= kb_index.CHUNK_TOKENS, ch.id


def test_undeletable_unreadable_index_is_a_clear_input_error(
    small_kb: tuple[Path, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, settings = small_kb
    build_index(settings)
    _corrupt(settings.index_dir, "garbage-sqlite")

    def refuse(path: object, *a: object, **k: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    real_rmtree = kb_index.shutil.rmtree
    monkeypatch.setattr(kb_index.shutil, "rmtree", refuse)
    with pytest.raises(InputError) as err:
        build_index(settings)
    text = str(err.value)
    assert str(settings.index_dir) in text and "kb build" in text
    monkeypatch.setattr(kb_index.shutil, "rmtree", real_rmtree)
    assert build_index(settings).embedded == 3  # once deletable, it repairs itself
