"""``inspect_profile``: what a load found (the ``advisor-chat inspect --json`` shape)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from advisor_chat.ingest.profile import Profile


def _versions(meta: pd.DataFrame) -> dict[str, dict[str, list[int]]]:
    out: dict[str, dict[str, list[int]]] = {}
    if meta.empty:
        return out
    for col, label in (("cann_version", "cann"), ("torch_npu_version", "torch_npu")):
        if col not in meta:
            continue
        sub = meta.dropna(subset=[col])
        if sub.empty:
            continue
        out[label] = {
            str(v): sorted(int(r) for r in g["rank"].dropna())
            for v, g in sub.groupby(col, sort=True)
        }
    return out


def inspect_profile(profile: Profile) -> dict[str, Any]:
    """Summarize a loaded profile as plain JSON-serializable data.

    Returns:
        ``{"root", "layout", "ranks": [int], "steps": [int], "groups": [{"group", "group_name",
        "comm_kind", "ranks", "size"}], "stages": [{"index", "ranks"}], "versions": {"cann":
        {version: [ranks]}, "torch_npu": {...}}, "profiler_level": {level: [ranks]}, "tables":
        {name: {"rows", "source", "files", "file_types": {file name: count}, "on_demand":
        {"ranks", "ranks_read"} (tables read per rank when an analysis needs them: kernels, host
        dispatch; ``rows`` counts the ranks read so far)}}, "warnings": [{"code", "message", "path", "ranks"}],
        "extra_sources": [str], "cache_hit": bool}``. ``source`` is a short citation
        (:meth:`Profile.cite`).
    """
    meta = profile.get("meta")
    groups = []
    cg = profile.get("comm_groups")
    for rec in cg.to_dict("records"):
        groups.append(
            {
                "group": str(rec.get("group") or ""),
                "group_name": str(rec.get("group_name") or ""),
                "comm_kind": str(rec.get("comm_kind") or ""),
                "ranks": [int(r) for r in (rec.get("ranks") or [])],
                "size": int(rec.get("size") or 0),
            }
        )
    stages = []
    st = profile.get("stage_trace")
    if not st.empty:
        seen = st.drop_duplicates("stage_index")
        for rec in seen.to_dict("records"):
            ranks = rec.get("stage_rank_list")
            stages.append(
                {
                    "index": int(rec["stage_index"]),
                    "ranks": [int(r) for r in ranks] if ranks is not None else [],
                    "label": str(rec["stage_ranks"]),
                }
            )
    levels: dict[str, list[int]] = {}
    if not meta.empty and "profiler_level" in meta:
        for lv, g in meta.dropna(subset=["profiler_level"]).groupby("profiler_level"):
            levels[str(lv)] = sorted(int(r) for r in g["rank"].dropna())
    ranks, steps = profile.ranks, profile.steps  # first: without a step trace, steps read kernels
    tables = {}
    heavy = profile.heavy
    lazy_files: dict[str, dict[int, str]] = getattr(heavy, "files", {}) if heavy else {}
    for name in sorted(profile.tables.keys()):  # no read: heavy tables as read so far
        df = dict.get(profile.tables, name)  # as read so far (TableDict.loaded), no read
        files = profile.source_files(name)
        entry: dict[str, Any] = {
            "rows": len(df) if df is not None else 0,
            "source": profile.cite(name),
            "files": len(files),
            "file_types": dict(Counter(Path(f.split("#")[0]).name for f in files)),
        }
        if lazy_files.get(name):
            read = getattr(heavy, "loaded", {}).get(name, set())
            entry["on_demand"] = {"ranks": len(lazy_files[name]), "ranks_read": len(read)}
        tables[name] = entry
    return {
        "root": str(profile.root),
        "layout": profile.layout,
        "ranks": ranks,
        "steps": steps,
        "groups": groups,
        "stages": stages,
        "versions": _versions(meta),
        "profiler_level": levels,
        "tables": tables,
        "warnings": [
            {"code": w.code, "message": w.message, "path": w.path, "ranks": list(w.ranks)}
            for w in profile.warnings
        ],
        "extra_sources": list(profile.extra_sources),
        "cache_hit": profile.cache_hit,
    }
