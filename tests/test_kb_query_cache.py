"""The query-vector cache beside the case index (``advisor_chat.kb.index.query_vector``)."""

from __future__ import annotations


def test_a_query_vector_is_embedded_once_and_read_back_by_the_next_search(tmp_path) -> None:
    import numpy as np

    from advisor_chat.kb.index import EMBEDDER, QUERY_CACHE, query_vector

    text = "rank 12 waits for its host: host-bound dispatch"
    before = EMBEDDER.queries_embedded
    first = query_vector(tmp_path, text)
    assert EMBEDDER.queries_embedded == before + 1
    again = query_vector(tmp_path, text)
    assert EMBEDDER.queries_embedded == before + 1  # read from the cache, not embedded
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first, EMBEDDER.query(text), rtol=0, atol=1e-6)
    (f,) = (tmp_path / QUERY_CACHE).glob("*.npy")
    # a damaged cache file is computed again (and replaced), never a wrong vector
    f.write_bytes(b"not a vector")
    np.testing.assert_allclose(query_vector(tmp_path, text), first, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(np.load(f), first)


def test_a_query_vector_needs_no_writable_index_folder(tmp_path) -> None:
    import numpy as np

    from advisor_chat.kb.index import EMBEDDER, query_vector

    blocked = tmp_path / "file"
    blocked.write_text("a file where the index folder would be")
    v = query_vector(blocked, "slow link 3-11")
    np.testing.assert_allclose(v, EMBEDDER.query("slow link 3-11"), rtol=0, atol=1e-6)
