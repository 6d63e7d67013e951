"""Case index: incremental builds (hash-based), deletes, model change, no network."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import pytest_socket

from advisor_chat.config import Settings, load_settings
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
    path = kdir / "cases" / "slow-link-rdma.md"
    path.write_text(
        path.read_text(encoding="utf-8").replace("## Pitfalls", "## Pitfalls\n- Edited line.", 1),
        encoding="utf-8",
    )
    before = EMBEDDER.passages_embedded
    rep = build_index(settings)
    assert rep.embedded_ids == ["slow-link-rdma"]
    assert (rep.embedded, rep.skipped, rep.deleted) == (1, 2, 0)
    case = next(c for c in load_cases(kdir) if c.id == "slow-link-rdma")
    assert rep.chunks_embedded == len(chunk_case(case))
    assert EMBEDDER.passages_embedded - before == len(chunk_case(case))
    col = get_collection(settings.index_dir)
    got = col.get(where={"case_id": "slow-link-rdma"}, include=["metadatas"])
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
