"""Reader of ``msprof-analyze cluster`` output (``cluster_analysis_output/``, reference §2).

- ``cluster_step_trace_time.csv``: ``Type == rank`` rows → ``step_trace`` (rank = ``Index``),
  ``Type == stage`` rows → ``stage_trace`` (``Index`` = ``"(0, 1, ...)"``); µs; optional
  ``DP/PP/TP Index`` columns; empty ``Step`` → -1.
- ``cluster_communication.json``: ``{group tuple | "p2p": {step: {op@hash: {rank: OPINFO}}}}`` →
  ``comm_ops`` + ``comm_bandwidth`` (``Total Op Info`` entries skipped).
- ``cluster_communication_matrix.json``: link keys are already *global* ranks → ``comm_matrix``.
- ``communication_group.json``: collective / p2p rank lists (+ ``comm_group_parallel_info`` in newer
  files) → ``comm_groups``.
- ``cluster_analysis.db`` (DB mode): ``ClusterStepTraceTime``, ``CommunicationGroupMapping``,
  ``ClusterCommunicationTime``, ``ClusterCommunicationBandwidth``, ``ClusterCommunicationMatrix``;
  used for the tables the text files did not give.

Entries of the wrong shape (a link that is not ``"src-dst": {...}``, an OPINFO that is not an
object, a rank list that is not a list of integers) are skipped and counted: one data-quality
warning per file (``cluster_matrix_invalid``, ``cluster_communication_invalid``,
``comm_group_invalid``) names the file and the number of entries left out.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from advisor_chat.errors import InputError
from advisor_chat.ingest import db as dbr
from advisor_chat.ingest.common import (
    MAX_RANK_ID,
    RankData,
    comm_kind_of,
    comm_op_type,
    cut_row_warning,
    hccl_ratio,
    num,
    read_csv,
    read_json,
    step_from_key,
)
from advisor_chat.ingest.guard import short, show_path
from advisor_chat.ingest.profile import DataWarning
from advisor_chat.ingest.rankdir import skip_file
from advisor_chat.ingest.text import STEP_TRACE_COLUMNS, LinkColumns, opinfo_rows, step_trace_frame

_LINK = re.compile(r"^\d+-\d+$")


def _skipped(
    rd: RankData, code: str, path: Path, n: int, total: int, what: str, example: str
) -> None:
    if n:
        rd.warnings.append(
            DataWarning(
                code=code,
                message=f"{show_path(path)}: {n} of {total} {what} have the wrong shape and were left "
                f"out (e.g. {short(example, 60)}); the file looks damaged or hand-edited. Re-run "
                "msprof-analyze cluster to regenerate it",
                path=str(path),
            )
        )


def _int_list(v: Any) -> list[int] | None:
    """A list of non-negative integers (ints or digit strings), else ``None``."""
    if not isinstance(v, list):
        return None
    out = []
    for x in v:
        if isinstance(x, bool):
            return None
        if isinstance(x, int) and x >= 0:
            out.append(x)
        elif isinstance(x, str) and x.strip().isdigit():
            out.append(int(x))
        else:
            return None
    return out


def parse_rank_tuple(text: str) -> list[int]:
    """``"(0, 1, 2)"`` / ``"(0,1,2)"`` / ``"(0,)"`` → ``[0, 1, 2]``; anything else → ``[]``."""
    return (
        sorted(int(x) for x in re.findall(r"-?\d+", str(text)))
        if str(text).strip().startswith("(")
        else []
    )


def _stage_order(keys: list[Any]) -> dict[Any, int]:
    """Stage rows' ``Index`` (``"(0, 1, ...)"``) → stage number.

    The stage with the lowest ranks is 0, whatever order the rows come in (a file re-sorted or
    written by another tool).
    """
    uniq = list(dict.fromkeys(keys))
    first = {k: min(parse_rank_tuple(str(k)), default=1 << 62) for k in uniq}
    return {k: i for i, k in enumerate(sorted(uniq, key=lambda k: (first[k], uniq.index(k))))}


def _step_trace(path: Path, rd: RankData) -> None:
    df = read_csv(
        path, required=["Type", "Index", "Computing", "Communication(Not Overlapped)", "Free"]
    )
    if df.attrs.get("cut_row"):
        rd.warnings.append(cut_row_warning(path, None))
    typ = df["Type"].astype("string").str.strip().str.lower()
    ranks = df[typ == "rank"]
    stages = df[typ == "stage"]
    if not ranks.empty:
        # a rank Index that is not a whole number in 0..MAX_RANK_ID is no rank: left out, said
        idx = num(ranks["Index"].reset_index(drop=True))
        ok = idx.notna() & (idx >= 0) & (idx <= MAX_RANK_ID) & (idx == idx.round())
        if not ok.all():
            bad = ranks["Index"].reset_index(drop=True)[~ok]
            rd.warnings.append(
                DataWarning(
                    code="invalid_rank_id",
                    message=f"{show_path(path)}: {int((~ok).sum())} rank row(s) with an Index that "
                    f"is no rank (e.g. {short(str(bad.iloc[0]), 30)}) were left out; the file "
                    "looks hand-edited: re-run msprof-analyze cluster to regenerate it",
                    path=str(path),
                )
            )
            ranks, idx = ranks[ok.to_numpy()], idx[ok]
        st = step_trace_frame(ranks.reset_index(drop=True), None)
        st["rank"] = idx.reset_index(drop=True).round().astype("Int64")
        for col, dst in (
            ("DP Index", "dp_index"),
            ("PP Index", "pp_index"),
            ("TP Index", "tp_index"),
        ):
            if col in ranks:
                st[dst] = num(ranks[col].reset_index(drop=True))
        rd.add("step_trace", st, path)
    if not stages.empty:
        s = stages.reset_index(drop=True)
        out = pd.DataFrame(index=s.index)
        out["stage_ranks"] = s["Index"].astype("string").str.strip()
        order = _stage_order(out["stage_ranks"].tolist())
        out["stage_index"] = out["stage_ranks"].map(order).astype("Int64")
        out["step"] = num(s.get("Step"), s.index).fillna(-1).round().astype("Int64")
        for src, dst in STEP_TRACE_COLUMNS.items():
            if dst in ("preparing_us", "communication_not_overlapped_exclude_receive_us"):
                continue
            out[dst] = num(s.get(src), s.index)
        out["stage_rank_list"] = [parse_rank_tuple(x) for x in out["stage_ranks"]]
        rd.add("stage_trace", out, path)


def _communication(path: Path, rd: RankData, group_ranks: dict[str, list[int]]) -> None:
    data = read_json(path)
    ops: list[dict[str, Any]] = []
    bws: list[dict[str, Any]] = []
    bad, total, example = 0, 0, ""
    for gkey, steps in (data or {}).items():
        ranks_of_key = parse_rank_tuple(gkey)
        kind_hint = "p2p" if str(gkey).strip().lower() == "p2p" else None
        if not isinstance(steps, dict):
            continue
        for step_key, entries in steps.items():
            step = step_from_key(step_key)
            if not isinstance(entries, dict):
                continue
            for op_key, per_rank in entries.items():
                if op_key.startswith("Total") or not isinstance(per_rank, dict):
                    continue
                group = op_key.partition("@")[2]
                seen = group_ranks.setdefault(group, [])
                for rank_s, info in per_rank.items():
                    total += 1
                    try:
                        r = int(rank_s)
                    except ValueError:
                        r = -1
                    if r < 0 or not isinstance(info, dict):
                        bad, example = bad + 1, example or f"{op_key} / {rank_s}: {info!r}"
                        continue
                    o, b = opinfo_rows(op_key, info, r, step, kind_hint or comm_kind_of(op_key))
                    ops.append(o)
                    bws.extend(b)
                    if r not in seen:
                        seen.append(r)
                if ranks_of_key:
                    group_ranks[group] = sorted(set(seen) | set(ranks_of_key))
    rd.add("comm_ops", pd.DataFrame(ops), path)
    rd.add("comm_bandwidth", pd.DataFrame(bws), path)
    _skipped(rd, "cluster_communication_invalid", path, bad, total, "rank entries", example)


def _matrix(path: Path, rd: RankData) -> None:
    data = read_json(path)
    links_acc = LinkColumns()
    bad, total, example = 0, 0, ""
    for _gkey, steps in (data or {}).items():
        if not isinstance(steps, dict):
            continue
        for step_key, entries in steps.items():
            if not isinstance(entries, dict):
                continue
            step = step_from_key(step_key)
            for op_key, links in entries.items():
                if op_key.startswith("Total"):
                    continue
                if not isinstance(links, dict):
                    bad, total = bad + 1, total + 1
                    example = example or f"{op_key}: {links!r}"
                    continue
                good = {
                    k: v for k, v in links.items() if _LINK.match(str(k)) and isinstance(v, dict)
                }
                total += len(links)
                if len(good) < len(links):
                    bad += len(links) - len(good)
                    k0 = next(k for k in links if k not in good)
                    example = example or f"{op_key} / {k0}: {links[k0]!r}"
                links_acc.add_links(good, op_key, step, None)
    _skipped(rd, "cluster_matrix_invalid", path, bad, total, "links", example)
    df = links_acc.frame() if len(links_acc) else pd.DataFrame()
    if not df.empty:
        df = df.rename(columns={"src_local": "src_rank", "dst_local": "dst_rank"})
        df["rank"] = np.nan
    rd.add("comm_matrix", df, path)


def _groups_json(path: Path, rd: RankData, group_ranks: dict[str, list[int]]) -> None:
    data = read_json(path) or {}
    rows: list[dict[str, Any]] = []
    known: set[tuple[str, tuple[int, ...]]] = set()
    bad, total, example = 0, 0, ""
    infos = data.get("comm_group_parallel_info", []) or []
    if not isinstance(infos, list):
        bad, total, example = 1, 1, f"comm_group_parallel_info: {infos!r}"
        infos = []
    for info in infos:
        total += 1
        rl = _int_list(info.get("rank_set", []) or []) if isinstance(info, dict) else None
        if rl is None or not isinstance(info, dict):
            bad, example = bad + 1, example or f"comm_group_parallel_info: {info!r}"
            continue
        ranks = sorted(rl)
        kind = str(info.get("type", ""))
        rows.append(
            {
                "group": str(info.get("group_name", "")),
                "group_name": str(info.get("pg_name", "") or ""),
                "comm_kind": kind,
                "ranks": ranks,
                "size": len(ranks),
            }
        )
        known.add((kind, tuple(ranks)))
    for kind in ("collective", "p2p"):
        lists = data.get(kind, []) or []
        if not isinstance(lists, list):
            bad, total = bad + 1, total + 1
            example = example or f"{kind}: {lists!r}"
            continue
        for ranks_l in lists:
            total += 1
            rl = _int_list(ranks_l)
            if rl is None:
                bad, example = bad + 1, example or f"{kind}: {ranks_l!r}"
                continue
            ranks = sorted(rl)
            if (kind, tuple(ranks)) in known:
                continue
            known.add((kind, tuple(ranks)))
            # attach the hash when communication data names a group with exactly these ranks
            hashes = [g for g, rs in group_ranks.items() if sorted(rs) == ranks]
            rows.append(
                {
                    "group": hashes[0] if len(hashes) == 1 else "",
                    "group_name": "",
                    "comm_kind": kind,
                    "ranks": ranks,
                    "size": len(ranks),
                }
            )
    rd.add("comm_groups", pd.DataFrame(rows), path)
    _skipped(rd, "comm_group_invalid", path, bad, total, "group entries", example)


def _cluster_db(path: Path, rd: RankData) -> None:
    con = dbr.connect(path)
    try:
        tabs = dbr.tables_of(con)
        if "ClusterStepTraceTime" in tabs and "step_trace" not in rd.tables:
            df = pd.read_sql_query("SELECT * FROM ClusterStepTraceTime", con)
            ren = {
                "step": "Step",
                "type": "Type",
                "index": "Index",
                "computing": "Computing",
                "communication_not_overlapped": "Communication(Not Overlapped)",
                "overlapped": "Overlapped",
                "communication": "Communication",
                "free": "Free",
                "stage": "Stage",
                "bubble": "Bubble",
                "communication_not_overlapped_and_exclude_receive": "Communication(Not Overlapped and Exclude Receive)",
                "preparing": "Preparing",
                "dp_index": "DP Index",
                "pp_index": "PP Index",
                "tp_index": "TP Index",
            }
            df = df.rename(columns=ren).astype(str).replace({"None": "", "nan": ""})
            typ = df["Type"].str.lower()
            ranks = df[typ == "rank"].reset_index(drop=True)
            if not ranks.empty:
                st = step_trace_frame(ranks, None)
                st["rank"] = num(ranks["Index"]).round().astype("Int64")
                rd.add("step_trace", st, f"{path}#ClusterStepTraceTime")
            stages = df[typ == "stage"].reset_index(drop=True)
            if not stages.empty and "stage_trace" not in rd.tables:
                out = pd.DataFrame(index=stages.index)
                out["stage_ranks"] = stages["Index"]
                order = _stage_order(stages["Index"].tolist())
                out["stage_index"] = stages["Index"].map(order)
                out["step"] = num(stages["Step"]).fillna(-1)
                for src, dst in STEP_TRACE_COLUMNS.items():
                    if dst not in (
                        "preparing_us",
                        "communication_not_overlapped_exclude_receive_us",
                    ):
                        out[dst] = num(stages.get(src), stages.index)
                out["stage_rank_list"] = [parse_rank_tuple(x) for x in stages["Index"]]
                rd.add("stage_trace", out, f"{path}#ClusterStepTraceTime")
        if "ClusterCommunicationTime" in tabs and "comm_ops" not in rd.tables:
            t = pd.read_sql_query("SELECT * FROM ClusterCommunicationTime", con)
            t = t[~t["hccl_op_name"].astype(str).str.startswith("Total")]
            wait = pd.to_numeric(t["wait_time"], errors="coerce")
            transit = pd.to_numeric(t["transit_time"], errors="coerce")
            sync = pd.to_numeric(t["synchronization_time"], errors="coerce")
            ops = pd.DataFrame(
                {
                    "rank": pd.to_numeric(t["rank_id"], errors="coerce"),
                    "group": t["group_name"].astype(str),
                    "step": [step_from_key(x) for x in t["step"]],
                    "op_name": t["hccl_op_name"],
                    "op_type": t["hccl_op_name"].map(comm_op_type),
                    "comm_kind": t["hccl_op_name"].map(comm_kind_of),
                    "start_us": pd.to_numeric(t["start_timestamp"], errors="coerce"),
                    "elapse_ms": pd.to_numeric(t["elapsed_time"], errors="coerce"),
                    "transit_ms": transit,
                    "wait_ms": wait,
                    "synchronization_ms": sync,
                    "idle_ms": pd.to_numeric(t["idle_time"], errors="coerce"),
                    # ratios are forced to 0 in this table by msprof-analyze: recompute them
                    "wait_ratio": hccl_ratio(wait, transit),
                    "synchronization_ratio": hccl_ratio(sync, transit),
                }
            )
            rd.add("comm_ops", ops, f"{path}#ClusterCommunicationTime")
        if "ClusterCommunicationBandwidth" in tabs and "comm_bandwidth" not in rd.tables:
            b = pd.read_sql_query("SELECT * FROM ClusterCommunicationBandwidth", con)
            b = b[~b["hccl_op_name"].astype(str).str.startswith("Total")]
            frames = []
            for rank_id, part in b.groupby("rank_id", sort=True):
                agg = dbr._band_rows(part.rename(columns={"band_type": "transport_type"}))
                agg["rank"] = rank_id
                frames.append(agg)
            if frames:
                agg = pd.concat(frames, ignore_index=True)
                rd.add(
                    "comm_bandwidth",
                    dbr.bandwidth_frame(agg, pd.to_numeric(agg["rank"], errors="coerce")),
                    f"{path}#ClusterCommunicationBandwidth",
                )
        if "ClusterCommunicationMatrix" in tabs and "comm_matrix" not in rd.tables:
            m = pd.read_sql_query("SELECT * FROM ClusterCommunicationMatrix", con)
            m = m[~m["hccl_op_name"].astype(str).str.startswith("Total")]
            rd.add(
                "comm_matrix",
                pd.DataFrame(
                    {
                        "group": m["group_name"].astype(str),
                        "step": [step_from_key(x) for x in m["step"]],
                        "op_name": m["hccl_op_name"],
                        "src_rank": pd.to_numeric(m["src_rank"], errors="coerce"),
                        "dst_rank": pd.to_numeric(m["dst_rank"], errors="coerce"),
                        "transport": m["transport_type"],
                        "transit_size_mb": pd.to_numeric(m["transit_size"], errors="coerce"),
                        "transit_time_ms": pd.to_numeric(m["transit_time"], errors="coerce"),
                        "bandwidth_gbps": pd.to_numeric(m["bandwidth"], errors="coerce"),
                        "rank": np.nan,
                    }
                ),
                f"{path}#ClusterCommunicationMatrix",
            )
        if "CommunicationGroupMapping" in tabs and "comm_groups" not in rd.tables:
            g = pd.read_sql_query("SELECT * FROM CommunicationGroupMapping", con)
            rank_lists = [parse_rank_tuple(x) for x in g["rank_set"]]
            rd.add(
                "comm_groups",
                pd.DataFrame(
                    {
                        "group": g["group_name"].astype(str),
                        "group_name": g.get("pg_name", pd.Series("", index=g.index))
                        .fillna("")
                        .astype(str),
                        "comm_kind": g["type"].astype(str),
                        "ranks": rank_lists,
                        "size": [len(r) for r in rank_lists],
                    }
                ),
                f"{path}#CommunicationGroupMapping",
            )
    except dbr.DB_ERRORS as exc:
        raise dbr.corrupt(path, exc) from exc
    finally:
        con.close()


#: What a skipped cluster file takes with it (the ``file_skipped`` warning says it).
_CLUSTER_LOST = {
    "cluster_communication.json": "communication operators and bandwidth",
    "cluster_communication_matrix.json": "link matrix",
    "communication_group.json": "communication groups",
}


def read_cluster_dir(path: str | Path) -> RankData:
    """Parse one ``cluster_analysis_output/`` folder.

    Returns:
        A :class:`RankData` with ``rank=None`` and export ``cluster``; ``comm_matrix`` has global
        ``src_rank``/``dst_rank``.

    Raises:
        InputError: A file is unreadable or a CSV lacks required columns. A JSON file that is
            not valid JSON is left out with a ``file_skipped`` warning instead.
    """
    folder = Path(path).resolve()
    rd = RankData(rank=None, source_dir=str(folder), export="cluster")
    group_ranks: dict[str, list[int]] = {}
    p = folder / "cluster_step_trace_time.csv"
    if p.is_file():
        _step_trace(p, rd)
        rd.parsed_files += 1
    # a damaged JSON file is left out with a warning; the other files are analysed
    for name, read in (
        ("cluster_communication.json", lambda f: _communication(f, rd, group_ranks)),
        ("cluster_communication_matrix.json", lambda f: _matrix(f, rd)),
        ("communication_group.json", lambda f: _groups_json(f, rd, group_ranks)),
    ):
        p = folder / name
        if not p.is_file():
            continue
        try:
            read(p)
        except InputError as exc:
            skip_file(rd, p, _CLUSTER_LOST[name], exc, who="the cluster output")
            continue
        rd.parsed_files += 1
    p = folder / "cluster_analysis.db"
    if p.is_file():
        _cluster_db(p, rd)
        rd.parsed_files += 1
    # groups seen in communication data but absent from communication_group.json
    have = set()
    if "comm_groups" in rd.tables:
        have = set(rd.tables["comm_groups"]["group"].astype(str))
    extra = [
        {"group": g, "group_name": "", "comm_kind": "", "ranks": sorted(rs), "size": len(rs)}
        for g, rs in group_ranks.items()
        if g and g not in have
    ]
    if extra:
        rd.add("comm_groups", pd.DataFrame(extra), folder / "cluster_communication.json")
    rd.meta["group_ranks"] = group_ranks
    return rd
