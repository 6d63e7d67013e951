"""Retrieval eval of the case library: top-1 / top-3 accuracy on evals/retrieval/queries.yaml.

Usage::

    .venv/bin/python evals/retrieval/run.py            # all queries, default weights
    .venv/bin/python evals/retrieval/run.py --split tune
    .venv/bin/python evals/retrieval/run.py --json
    .venv/bin/python evals/retrieval/run.py --grid     # weight grid on the tune split (tuning aid)

A query is a top-k hit when any of its expected case ids is among the first k results.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
QUERIES = HERE / "queries.yaml"


@dataclass
class Result:
    qid: str
    lang: str
    split: str
    nokw: bool
    tagged: bool
    expected: list[str]
    got: list[str]
    seconds: float

    @property
    def top1(self) -> bool:
        return bool(self.got[:1]) and self.got[0] in self.expected

    @property
    def top3(self) -> bool:
        return any(g in self.expected for g in self.got[:3])


@dataclass
class Summary:
    results: list[Result] = field(default_factory=list)

    def subset(self, name: str) -> list[Result]:
        r = self.results
        return {
            "overall": r,
            "english": [x for x in r if x.lang == "en"],
            "chinese": [x for x in r if x.lang == "zh"],
            "tag-only": [x for x in r if x.lang == "tags"],
            "no-keyword": [x for x in r if x.nokw],
            "tune": [x for x in r if x.split == "tune"],
            "held-out": [x for x in r if x.split == "heldout"],
        }[name]

    def rates(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for name in ("overall", "english", "chinese", "tag-only", "no-keyword", "tune", "held-out"):
            sub = self.subset(name)
            n = len(sub)
            out[name] = {
                "n": n,
                "top1": sum(x.top1 for x in sub) / n if n else 0.0,
                "top3": sum(x.top3 for x in sub) / n if n else 0.0,
            }
        lat = sorted(x.seconds for x in self.results)
        if lat:
            out["latency_ms"] = {
                "n": len(lat),
                "p50": 1000 * lat[len(lat) // 2],
                "p95": 1000 * lat[min(len(lat) - 1, int(0.95 * len(lat)))],
            }
        return out


def load_queries(path: Path = QUERIES) -> list[dict[str, Any]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return list(data["queries"])


def evaluate(
    queries: Sequence[dict[str, Any]],
    *,
    split: str | None = None,
    weights: tuple[float, float, float] | None = None,
    rrf_k: float | None = None,
    fusion: str | None = None,
    settings: Any = None,
) -> Summary:
    from advisor_chat.kb import search_cases

    summary = Summary()
    for q in queries:
        if split and q["split"] != split:
            continue
        t0 = time.perf_counter()
        hits = search_cases(
            q.get("query") or "",
            q.get("tags") or None,
            k=5,
            settings=settings,
            weights=weights,
            rrf_k=rrf_k,
            fusion=fusion,
        )
        summary.results.append(
            Result(
                qid=q["id"],
                lang=q["lang"],
                split=q["split"],
                nokw=bool(q.get("nokw")),
                tagged=bool(q.get("tags")),
                expected=list(q["expected"]),
                got=[h.id for h in hits],
                seconds=time.perf_counter() - t0,
            )
        )
    return summary


def print_report(summary: Summary, queries: Sequence[dict[str, Any]]) -> None:
    rates = summary.rates()
    print(f"{'subset':<12} {'n':>4} {'top-1':>7} {'top-3':>7}")
    for name, r in rates.items():
        if name == "latency_ms":
            continue
        print(f"{name:<12} {r['n']:>4} {r['top1']:>7.1%} {r['top3']:>7.1%}")
    if "latency_ms" in rates:
        lat = rates["latency_ms"]
        print(f"search latency: p50 {lat['p50']:.0f} ms, p95 {lat['p95']:.0f} ms")
    by_id = {q["id"]: q for q in queries}
    fails = [x for x in summary.results if not x.top3]
    if fails:
        print(f"\nfailures (expected not in top 3): {len(fails)}")
        for x in fails:
            q = by_id[x.qid]
            words = q.get("query") or f"tags={q.get('tags')}"
            print(f"  {x.qid} [{x.split}] {words!r}\n    expected {x.expected}, got {x.got[:3]}")
    miss1 = [x for x in summary.results if x.top3 and not x.top1]
    if miss1:
        print(f"\nright case at rank 2-3 only: {', '.join(x.qid for x in miss1)}")


def _memoize_query_embeddings() -> None:
    """Cache query embeddings in-process so a weight grid does not re-embed the same queries."""
    from advisor_chat.kb.index import EMBEDDER

    if getattr(EMBEDDER, "_memo", None) is not None:
        return
    memo: dict[str, Any] = {}
    orig = EMBEDDER.query

    def cached(text: str) -> Any:
        if text not in memo:
            memo[text] = orig(text)
        return memo[text]

    EMBEDDER._memo = memo  # type: ignore[attr-defined]
    EMBEDDER.query = cached  # type: ignore[method-assign]


def grid(queries: Sequence[dict[str, Any]]) -> None:
    """Print top-1/top-3 on the TUNE split for a small grid of weights (tuning aid only)."""
    _memoize_query_embeddings()
    rows = []
    configs = [
        ("rrf", wv, wl, wt, kk)
        for wv, wl, wt, kk in itertools.product(
            (0.5, 1.0, 1.5), (0.5, 1.0, 1.5), (1.0, 1.5, 2.5), (5.0, 10.0, 30.0, 60.0)
        )
    ] + [
        ("sum", wv, wl, wt, 0.0)
        for wv, wl, wt in itertools.product((0.5, 1.0, 1.5), (0.5, 1.0, 1.5), (0.5, 1.0, 1.5, 2.5))
    ]
    for mode, wv, wl, wt, kk in configs:
        s = evaluate(
            queries, split="tune", weights=(wv, wl, wt), rrf_k=kk or None, fusion=mode
        ).rates()["overall"]
        rows.append((s["top3"], s["top1"], mode, wv, wl, wt, kk))
    rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
    for r in rows[:20]:
        print(
            f"top3 {r[0]:.3f} top1 {r[1]:.3f}  {r[2]} w_vec {r[3]} w_lex {r[4]} w_tag {r[5]} K {r[6]}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=["tune", "heldout"], default=None)
    ap.add_argument("--json", action="store_true", help="print the rates as JSON")
    ap.add_argument("--grid", action="store_true", help="weight grid on the tune split")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE.parents[1]))
    from advisor_chat.offline import ensure_offline_env

    ensure_offline_env()
    queries = load_queries()
    from advisor_chat.kb import build_index

    rep = build_index()
    print(
        f"index: {rep.embedded} embedded ({rep.texts_embedded} texts through the model),"
        f" {rep.skipped} skipped, {rep.deleted} deleted in {rep.seconds:.2f} s wall,"
        f" {rep.cpu_seconds:.2f} s CPU",
        file=sys.stderr,
    )
    if args.grid:
        grid(queries)
        return 0
    summary = evaluate(queries, split=args.split)
    if args.json:
        print(json.dumps(summary.rates(), indent=2))
    else:
        print_report(summary, queries)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
