"""Builders of tiny in-memory profiles for analyzer tests (analyzer engineer A)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pandas as pd

from advisor_chat.ingest.profile import Profile, TableSource
from advisor_chat.ingest.schema import validate_table


def make_profile(tables: dict[str, pd.DataFrame | list[dict[str, Any]]], **kw: Any) -> Profile:
    """Profile from raw tables, each passed through ``validate_table``."""
    out: dict[str, pd.DataFrame] = {}
    sources: dict[str, list[TableSource]] = {}
    for name, t in tables.items():
        df = t if isinstance(t, pd.DataFrame) else pd.DataFrame(t)
        out[name] = validate_table(name, df, source=f"mem://{name}")
        sources[name] = [TableSource(name, f"/mem/{name}.csv", "synthetic", None, len(df))]
    return Profile(root=Path("/mem"), layout="synthetic", tables=out, sources=sources, **kw)


def step_rows(
    ranks: int,
    steps: int = 3,
    *,
    computing: float = 100_000.0,
    comm: float = 20_000.0,
    overlapped: float = 10_000.0,
    free: float = 5_000.0,
    bubble: float = 0.0,
    per_rank: dict[int, dict[str, float]] | None = None,
) -> list[dict[str, Any]]:
    """step_trace rows; ``per_rank[r]`` adds deltas (µs) to that rank's components."""
    rows = []
    for r in range(ranks):
        d = (per_rank or {}).get(r, {})
        for s in range(1, steps + 1):
            c = computing + d.get("computing", 0.0)
            n = comm + d.get("comm", 0.0)
            f = free + d.get("free", 0.0)
            b = bubble + d.get("bubble", 0.0)
            rows.append(
                {
                    "rank": r,
                    "step": s,
                    "computing_us": c,
                    "communication_not_overlapped_us": n,
                    "overlapped_us": overlapped,
                    "communication_us": n + overlapped,
                    "free_us": f,
                    "stage_us": c + n + f - b,
                    "bubble_us": b,
                    "step_us": c + n + f,
                }
            )
    return rows


CLUSTER_COLS = {
    "Computing": "computing_us",
    "Communication(Not Overlapped)": "communication_not_overlapped_us",
    "Overlapped": "overlapped_us",
    "Communication": "communication_us",
    "Free": "free_us",
    "Stage": "stage_us",
    "Bubble": "bubble_us",
    "Communication(Not Overlapped and Exclude Receive)": "communication_not_overlapped_exclude_receive_us",
}


def read_cluster_csv(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rank rows and stage rows of cluster_step_trace_time.csv, read with the csv module."""
    ranks, stages = [], []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            vals = {
                v: float(row[k]) for k, v in CLUSTER_COLS.items() if row.get(k) not in (None, "")
            }
            step = int(row["Step"]) if row["Step"].strip() else -1
            if row["Type"] == "rank":
                vals["step_us"] = vals["stage_us"] + vals["bubble_us"]
                ranks.append({"rank": int(row["Index"]), "step": step, **vals})
            else:
                stages.append(
                    {"stage_ranks": row["Index"], "stage_index": len(stages), "step": step, **vals}
                )
    return ranks, stages


def profile_from_cluster_csv(path: Path) -> Profile:
    """A profile with only step_trace and stage_trace, read independently of ingest."""
    ranks, stages = read_cluster_csv(path)
    tables: dict[str, Any] = {"step_trace": ranks}
    if stages:
        tables["stage_trace"] = stages
    return make_profile(tables)
