"""Expected facts of the real samples, computed independently of the ingest layer.

The real samples (``tests/data/real`` in the repository) carry no answer key. The facts eval items expect are read
here from the files themselves with the ``csv`` and ``json`` modules (not with advisor-chat's own
parsers), by simple rules whose derivation is written next to each fact, so an expected value is never
copied by hand nor taken from the code under test.

Facts (``@real:<name>`` in a dataset):

- ``max_free_rank`` / ``max_free_ms``: the rank row of ``cluster_step_trace_time.csv`` (or the
  per-rank ``step_trace_time.csv``) with the largest ``Free``, and that Free in ms.
- ``min_comm_rank``: the rank with the least ``Communication(Not Overlapped)``: in a synchronous job
  the rank that waits least on collectives arrived last (the slow-rank rule of the seeds).
  ``max_comm_rank``: the rank that waits most (a victim, not a cause).
- ``bubble_ranks`` / ``max_bubble_ms``: ranks whose ``Bubble`` is above zero (the later pipeline
  stage), and the largest Bubble in ms.
- ``dominant_category`` / ``dominant_share``: the component (computing → compute, non-overlapped
  communication → communication, free → scheduling) with the largest mean share of the step, and that
  share.
- ``top_op_type`` / ``top_op_total_us``: on rank 0, the compute kernel type (``Type`` column of
  ``kernel_details.csv``, rows whose ``Accelerator Core`` is not HCCL/SDMA/DSA) with the largest summed
  ``Duration(us)``.
- ``ranks``: all rank ids found.
- ``min_comm_rank_category``: the largest component (as for ``dominant_category``) of
  ``min_comm_rank``'s own row; ``ranks_except_min_comm``: the other ranks; ``low_free_ranks``: the
  ranks whose Free is at most the (lower) median Free: they wait on others, none of them is host-bound.
- Pipeline samples (some ranks have Bubble, some none): ``upstream_stage_ranks`` (the ranks without
  Bubble: the stage the others receive from), ``upstream_first``/``upstream_last``, ``bubble_rank``
  (largest Bubble), ``bubble_first``/``bubble_last``, and ``upstream_dominant_category``: the largest
  component of the upstream stage's summed rows, communication taken without receive
  (``Communication(Not Overlapped and Exclude Receive)``).
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from advisor_chat.errors import InputError


def _read_csv(path: Path) -> list[dict[str, str]]:
    text = path.read_text(encoding="utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    return [{k.strip(): (v or "").strip() for k, v in r.items() if k is not None} for r in rows]


def _f(x: str) -> float:
    try:
        return float(x.strip().rstrip("\t"))
    except ValueError:
        return 0.0


def _step_rows(root: Path) -> dict[int, dict[str, float]]:
    """Per rank: the step-trace columns (summed over steps) from the cluster CSV or per-rank CSVs."""
    cluster = root / "cluster_analysis_output" / "cluster_step_trace_time.csv"
    per_rank: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    if cluster.is_file():
        for r in _read_csv(cluster):
            if r.get("Type") != "rank":
                continue
            rank = int(float(r["Index"]))
            for k, v in r.items():
                if k not in ("Step", "Type", "Index"):
                    per_rank[rank][k] += _f(v)
        return {k: dict(v) for k, v in per_rank.items()}
    for info in sorted(root.glob("*/profiler_info_*.json")):
        rank = int(info.stem.rsplit("_", 1)[1])
        st = info.parent / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
        if not st.is_file():
            continue
        for r in _read_csv(st):
            for k, v in r.items():
                if k not in ("Step", "Type", "Index"):
                    per_rank[rank][k] += _f(v)
    return {k: dict(v) for k, v in per_rank.items()}


_NON_COMPUTE_CORES = {"HCCL", "COMMUNICATION", "DSA_SQE", "SDMA"}


def _top_op(root: Path) -> tuple[str, float] | None:
    kd = sorted(root.glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    infos = {p.parent: int(p.stem.rsplit("_", 1)[1]) for p in root.glob("*/profiler_info_*.json")}
    kd = [p for p in kd if infos.get(p.parent.parent) == 0] or kd
    if not kd:
        return None
    totals: dict[str, float] = defaultdict(float)
    for r in _read_csv(kd[0]):
        if r.get("Accelerator Core", "").upper() in _NON_COMPUTE_CORES:
            continue
        totals[r.get("Type", "")] += _f(r.get("Duration(us)", "0"))
    op, total = max(totals.items(), key=lambda kv: kv[1])
    return op, total


def _dominant(row: dict[str, float], *, exclude_receive: bool) -> str:
    """The largest component of a step-trace row: compute, communication or scheduling.

    Computing → compute, non-overlapped communication → communication, Free → scheduling, in one
    rank's (or a stage's summed) step-trace row. With ``exclude_receive`` the
    communication is ``Communication(Not Overlapped and Exclude Receive)`` when the file has it, so a
    stage's pipeline receive wait is not counted as its own communication.
    """
    comm_key = "Communication(Not Overlapped)"
    if exclude_receive and "Communication(Not Overlapped and Exclude Receive)" in row:
        comm_key = "Communication(Not Overlapped and Exclude Receive)"
    parts = {
        "compute": row.get("Computing", 0.0),
        "communication": row.get(comm_key, 0.0),
        "scheduling": row.get("Free", 0.0),
    }
    return max(parts, key=lambda k: parts[k])


def real_facts(root: Path) -> dict[str, Any]:
    """Compute the facts of one real sample folder (see the module docstring).

    Args:
        root: A folder under ``tests/data/real`` (e.g. ``cluster-16rank-pp2``).

    Returns:
        Fact name → value; facts the sample cannot give are absent.

    Raises:
        InputError: ``root`` is not a folder.
    """
    if not root.is_dir():
        raise InputError(
            "real sample folder not found",
            path=root,
            remedy="The real samples ship in tests/data/real of the repository: run from a full "
            "checkout (or set ADVISOR_SHARED to a folder holding samples/real)",
        )
    facts: dict[str, Any] = {}
    rows = _step_rows(root)
    if rows:
        ranks = sorted(rows)
        facts["ranks"] = ranks
        free = {r: v.get("Free", 0.0) for r, v in rows.items()}
        comm = {r: v.get("Communication(Not Overlapped)", 0.0) for r, v in rows.items()}
        bubble = {r: v.get("Bubble", 0.0) for r, v in rows.items()}
        facts["max_free_rank"] = max(free, key=lambda r: free[r])
        facts["max_free_ms"] = free[facts["max_free_rank"]] / 1e3
        if len(ranks) > 1:
            facts["min_comm_rank"] = min(comm, key=lambda r: comm[r])
            facts["max_comm_rank"] = max(comm, key=lambda r: comm[r])
        b = [r for r in ranks if bubble[r] > 0]
        if b:
            facts["bubble_ranks"] = b
            facts["max_bubble_ms"] = max(bubble.values()) / 1e3
        shares: dict[str, list[float]] = defaultdict(list)
        for v in rows.values():
            parts = {
                "compute": v.get("Computing", 0.0),
                "communication": v.get("Communication(Not Overlapped)", 0.0),
                "scheduling": v.get("Free", 0.0),
            }
            total = sum(parts.values())
            for k, x in parts.items():
                shares[k].append(x / total if total else 0.0)
        mean = {k: sum(v) / len(v) for k, v in shares.items()}
        facts["dominant_category"] = max(mean, key=lambda k: mean[k])
        facts["dominant_share"] = mean[facts["dominant_category"]]
        if len(ranks) > 1:
            slow = facts["min_comm_rank"]
            facts["min_comm_rank_category"] = _dominant(rows[slow], exclude_receive=False)
            facts["ranks_except_min_comm"] = [r for r in ranks if r != slow]
            med = sorted(free.values())[(len(ranks) - 1) // 2]
            facts["low_free_ranks"] = [r for r in ranks if free[r] <= med and r != slow]
        if b and len(b) < len(ranks):
            up = [r for r in ranks if bubble[r] <= 0]
            facts["upstream_stage_ranks"] = up
            facts["upstream_first"], facts["upstream_last"] = up[0], up[-1]
            facts["bubble_rank"] = max(b, key=lambda r: bubble[r])
            facts["bubble_first"], facts["bubble_last"] = b[0], b[-1]
            summed: dict[str, float] = defaultdict(float)
            for r in up:
                for k, x in rows[r].items():
                    summed[k] += x
            facts["upstream_dominant_category"] = _dominant(summed, exclude_receive=True)
    top = _top_op(root)
    if top:
        facts["top_op_type"], facts["top_op_total_us"] = top
    groups = root / "cluster_analysis_output" / "communication_group.json"
    if groups.is_file():
        data = json.loads(groups.read_text(encoding="utf-8"))
        facts["p2p_groups"] = data.get("p2p", [])
    return facts
