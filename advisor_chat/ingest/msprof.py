"""Reader of CANN ``msprof`` output: ``PROF_*/mindstudio_profiler_output/`` (reference §3.1).

Files (each named ``{name}_{14-digit ts}.csv``, big ones sliced as ``{name}_slice_{n}_{ts}.csv``):

- ``op_summary_*.csv`` → ``kernels`` (columns renamed like torch_npu does for kernel_details:
  ``Op Name→Name``, ``OP Type→Type``, ``Task Type→Accelerator Core``, ``Task Start Time(us)→Start
  Time(us)``, ``Task Duration(us)→Duration(us)``, ``Task Wait Time(us)→Wait Time(us)``; µs).
- ``op_statistic_*.csv`` → ``op_statistic``; ``communication_statistic_*.csv`` → ``op_statistic``
  rows with ``core_type = COMMUNICATION``.
- ``step_trace_*.csv`` (graph mode only) → ``step_trace`` with ``step_us = Iteration Time(us)``;
  the breakdown columns are NaN (msprof does not split them here). Kernels are assigned to the
  iteration whose ``[Iteration End − Iteration Time, Iteration End]`` holds their start.
- ``analyze/communication.json`` (after ``msprof --analyze=on``; flat ``{"op@hash": OPINFO}``) →
  ``comm_ops`` + ``comm_bandwidth``; ``analyze/communication_matrix.json`` → ``comm_matrix``.

DB export (``msprof --type=db``): ``PROF_*/msprof_{ts}.db``, the CANN schema of
``ascend_pytorch_profiler_{rank}.db`` (reference §1.15.1), read with
:func:`advisor_chat.ingest.db.read_profiler_db`:

- ``kernels`` ← ``TASK ⨝ COMPUTE_TASK_INFO`` (+ ``COMMUNICATION_OP`` rows as ``COMMUNICATION``), ns → µs;
  used when no ``op_summary_*.csv`` gave kernels.
- ``step_trace`` ← per step (``STEP_TIME`` ranges when the DB has them, else one row, step -1, over
  the span of all tasks), the msprof-analyze DB rule (``msprof_step_trace_time_adapter.py``):
  computing = |∪ compute tasks|, communication = |∪ COMMUNICATION_OP|, communication_not_overlapped
  = |∪ all| − computing, overlapped = communication − not_overlapped, free = span − |∪ all|,
  bubble = Σ ``hcom_receive*`` durations, stage = step − bubble, step_us = computing +
  not_overlapped + free. Used when no ``step_trace_*.csv`` exists.
- ``comm_ops`` ← ``analyze/communication.json``, else ``analyze/communication_analyzer.db``, else
  ``COMMUNICATION_OP`` itself (elapse and ``waitNs`` only; transit/synchronization unknown → NaN;
  group = HCCL hash of the raw ``groupName``).
- ``host_dispatch`` ← ``CANN_API ⨝ TASK``; ``memory`` ← ``MEMORY_RECORD`` when present.

A DB without ``STRING_IDS``/``TASK``/``COMPUTE_TASK_INFO`` (an unknown schema) gives a
``db_schema_unknown`` data-quality warning naming what it lacks; a damaged DB an ``InputError``.

Rank: ``rank_id`` of ``device_*/info.json.*``, else ``RANK_DEVICE_MAP.rankId`` of the DB (a
disagreement between them is warned about); ``-1``/absent leaves it ``None`` and the loader assigns
ranks in folder order, like msprof-analyze does by sorting (host, device).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from advisor_chat.errors import InputError
from advisor_chat.ingest import db as dbr
from advisor_chat.ingest.common import (
    RankData,
    clean_str,
    comm_kind_of,
    comm_op_type,
    double_hash,
    num,
    read_csv,
    read_json,
)
from advisor_chat.ingest.guard import show_path
from advisor_chat.ingest.profile import DataWarning
from advisor_chat.ingest.text import LinkColumns, comm_frames, kernel_header_version, kernels_frame

OP_SUMMARY_RENAME = {
    "Op Name": "Name",
    "OP Type": "Type",
    "Task Type": "Accelerator Core",
    "Task Start Time(us)": "Start Time(us)",
    "Task Duration(us)": "Duration(us)",
    "Task Wait Time(us)": "Wait Time(us)",
}


_DB_RE = re.compile(r"^msprof_\d*.*\.db$")
#: Tables an msprof DB must have for kernels and step data (reference §1.15.1).
DB_CORE = ["STRING_IDS", "TASK", "COMPUTE_TASK_INFO"]


def _files(out: Path, name: str) -> list[Path]:
    pat = re.compile(rf"^{name}(?:_slice_\d+)?_\d+\.csv$")
    try:
        return sorted(p for p in out.iterdir() if pat.match(p.name))
    except OSError:
        return []


def msprof_dbs(folder: Path) -> list[Path]:
    """``msprof_*.db`` files directly in a ``PROF_*`` folder, sorted."""
    try:
        return sorted(p for p in folder.iterdir() if _DB_RE.match(p.name))
    except OSError:
        return []


def _int_rank(v: object) -> int | None:
    try:
        r = int(str(v).strip())
    except (TypeError, ValueError):
        return None
    return r if r >= 0 else None


def msprof_rank(folder: Path, warnings: list[DataWarning] | None = None) -> int | None:
    """``rank_id`` from ``device_*/info.json.*`` (``None`` when absent, -1 or not a number).

    A ``rank_id`` that is not an integer is reported in ``warnings`` (when given).
    """
    for info in sorted(folder.glob("device_*/info.json*")):
        try:
            data = read_json(info)
        except InputError:
            continue
        rid = data.get("rank_id") if isinstance(data, dict) else None
        if rid is None:
            continue
        r = _int_rank(rid)
        if r is None and warnings is not None and str(rid).strip() != "-1":
            warnings.append(
                DataWarning(
                    code="rank_id_invalid",
                    message=f"{show_path(info)}: rank_id {str(rid)[:40]!r} is not a rank number; the "
                    "rank is taken from the DB or assigned by folder order",
                    path=str(info),
                )
            )
        if r is not None:
            return r
    return None


#: ``DeviceInfo`` fields of ``info.json`` kept in the ``meta`` table (field → column).
DEVICE_INFO_FIELDS = {
    "ai_core_num": "ai_core_num",
    "aiv_num": "aiv_num",
    "aic_frequency": "aic_frequency_mhz",
}


def device_info(folder: Path) -> dict[str, float]:
    """The device's core counts and clock from the raw CANN data of a rank folder.

    Reads the first ``DeviceInfo`` entry of ``device_*/info.json.*`` (an msprof ``PROF_*`` folder)
    or ``PROF_*/device_*/info.json.*`` (inside an ``*_ascend_pt`` folder): ``ai_core_num``,
    ``aiv_num`` and ``aic_frequency`` (MHz), written by CANN's profiling collector. Returns
    ``{column: value}`` (:data:`DEVICE_INFO_FIELDS`); empty when there is no such file or it is
    unreadable (nothing in it is required).
    """
    for info in sorted(
        [*folder.glob("device_*/info.json*"), *folder.glob("PROF_*/device_*/info.json*")]
    ):
        try:
            data = read_json(info)
        except InputError:
            continue
        devs = data.get("DeviceInfo") if isinstance(data, dict) else None
        if not isinstance(devs, list) or not devs or not isinstance(devs[0], dict):
            continue
        out = {}
        for key, col in DEVICE_INFO_FIELDS.items():
            try:
                v = float(devs[0][key])
            except (KeyError, TypeError, ValueError):
                continue
            if math.isfinite(v) and v > 0:
                out[col] = v
        if out:
            return out
    return {}


def _union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merged intervals of ``[starts, ends)`` (sorted, disjoint)."""
    if len(starts) == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def _length(starts: np.ndarray, ends: np.ndarray) -> float:
    s, e = _union(starts, ends)
    return float((e - s).sum())


def step_trace_from_kernels(
    kernels: pd.DataFrame, steps: pd.DataFrame, rank: int | None
) -> pd.DataFrame:
    """Step breakdown from device task intervals (µs), the msprof-analyze DB rule (module doc).

    Args:
        kernels: ``start_us``, ``duration_us``, ``accelerator_core`` (``COMMUNICATION`` rows are
            HCCL ops), ``name``.
        steps: ``id``, ``start_us``, ``end_us`` (``STEP_TIME``); empty → one row, step -1.
        rank: Rank to write in the ``rank`` column.

    Returns:
        ``step_trace`` rows (µs).
    """
    start = kernels["start_us"].to_numpy(dtype="float64")
    end = start + kernels["duration_us"].to_numpy(dtype="float64")
    is_comm = (kernels["accelerator_core"].astype(str) == "COMMUNICATION").to_numpy()
    is_recv = kernels["name"].astype(str).str.startswith("hcom_receive").to_numpy() & is_comm
    if steps.empty:
        ranges = [(-1, float(np.nanmin(start)), float(np.nanmax(end)))] if len(start) else []
    else:
        ranges = [
            (int(i), float(a), float(b))
            for i, a, b in steps[["id", "start_us", "end_us"]].itertuples(index=False)
        ]
    rows = []
    for sid, s0, s1 in ranges:
        cs, ce = np.clip(start, s0, s1), np.clip(end, s0, s1)
        keep = ce > cs
        comp = _length(cs[keep & ~is_comm], ce[keep & ~is_comm])
        comm = _length(cs[keep & is_comm], ce[keep & is_comm])
        busy = _length(cs[keep], ce[keep])
        bubble = float((ce[keep & is_recv] - cs[keep & is_recv]).sum())
        cno = busy - comp
        free = (s1 - s0) - busy
        rows.append(
            {
                "rank": rank,
                "step": sid,
                "computing_us": comp,
                "communication_not_overlapped_us": cno,
                "overlapped_us": comm - cno,
                "communication_us": comm,
                "free_us": free,
                "bubble_us": bubble,
                "stage_us": comp + cno + free - bubble,
                "communication_not_overlapped_exclude_receive_us": cno - bubble,
                "preparing_us": 0.0,
                "step_us": comp + cno + free,
            }
        )
    return pd.DataFrame(rows)


def comm_ops_from_db(raw: pd.DataFrame, steps: pd.DataFrame, rank: int | None) -> pd.DataFrame:
    """``COMMUNICATION_OP`` rows → ``comm_ops`` (elapse and wait only; transit/sync unknown = NaN)."""
    start_us = raw["start_ns"].astype("float64") / 1000.0
    elapse_ms = (raw["end_ns"] - raw["start_ns"]).astype("float64") / 1e6
    groups = [
        ("" if g is None else str(g) if str(g).isdigit() else double_hash(str(g)))
        for g in raw["group_raw"]
    ]
    step = dbr._assign_steps(start_us, steps) if not steps.empty else -1
    return pd.DataFrame(
        {
            "rank": rank,
            "group": groups,
            "step": step,
            "op_name": raw["op_name"],
            "op_type": raw["op_name"].map(comm_op_type),
            "comm_kind": raw["op_name"].map(comm_kind_of),
            "start_us": start_us,
            "elapse_ms": elapse_ms,
            "transit_ms": np.nan,
            "wait_ms": raw["wait_ns"].astype("float64") / 1e6,
            "synchronization_ms": np.nan,
            "idle_ms": np.nan,
            "wait_ratio": np.nan,
            "synchronization_ratio": np.nan,
        }
    )


def _read_db(folder: Path, db: Path, rd: RankData) -> None:
    """Add what the msprof DB ``db`` holds to ``rd`` (tables the text output did not give)."""
    d = dbr.read_profiler_db(db, rd.rank)
    rd.parsed_files += 1
    tabs: dict[str, list[str]] = d.get("tables", {})
    gaps = dbr.schema_gaps(tabs, DB_CORE)
    if gaps:
        rd.warnings.append(
            DataWarning(
                code="db_schema_unknown",
                message=f"{show_path(db)} does not have the CANN msprof schema: it lacks "
                f"{', '.join(gaps[:8])}; kernels and step data were not read from it. Re-export with "
                "a supported CANN version (msprof --type=db) or use the text export",
                path=str(db),
                ranks=(rd.rank,) if rd.rank is not None else (),
            )
        )
    db_rank = _int_rank(d["meta"].get("db_rank_id"))
    if rd.rank is None and db_rank is not None:
        rd.rank = db_rank
        rd.meta["rank_origin"] = "msprof DB RANK_DEVICE_MAP"
    elif rd.rank is not None and db_rank is not None and db_rank != rd.rank:
        rd.warnings.append(
            DataWarning(
                code="rank_id_mismatch",
                message=f"{show_path(db)} says rank {db_rank} (RANK_DEVICE_MAP) but info.json of "
                f"{show_path(folder)} says rank {rd.rank}; rank {rd.rank} is used. Check that the "
                "files come from the same run",
                path=str(db),
                ranks=(rd.rank, db_rank),
            )
        )
    rank = rd.rank
    steps = d["step_time"]
    for t in ("kernels", "host_dispatch", "memory"):
        if t in d and t not in rd.tables:
            df = d[t]
            df["rank"] = rank
            rd.add(t, df, db, version=d["meta"].get("schema_version"))
    k = d.get("kernels")
    if "step_trace" not in rd.tables and k is not None and not k.empty:
        rd.add("step_trace", step_trace_from_kernels(k, steps, rank), db, version="msprof-db")
    raw = d.get("comm_op_raw")
    if "comm_ops" not in rd.tables and raw is not None and not raw.empty:
        rd.add("comm_ops", comm_ops_from_db(raw, steps, rank), db)
    for key in ("device_id", "device_type", "schema_version"):
        if d["meta"].get(key) is not None:
            rd.meta.setdefault(key, d["meta"][key])


def read_msprof_dir(path: str | Path) -> RankData:
    """Parse one ``PROF_*`` folder (one device).

    Raises:
        InputError: A CSV lacks required columns or a file is unreadable.
    """
    folder = Path(path).resolve()
    out = folder / "mindstudio_profiler_output"
    warns: list[DataWarning] = []
    rank = msprof_rank(folder, warns)
    rd = RankData(rank=rank, source_dir=str(folder), export="msprof")
    rd.warnings.extend(warns)
    steps = pd.DataFrame(columns=["step", "start_us", "end_us"])
    for p in _files(out, "step_trace"):
        df = read_csv(p, required=["Iteration ID", "Iteration Time(us)"])
        rd.parsed_files += 1
        st = pd.DataFrame(index=df.index)
        st["rank"] = rank
        st["step"] = num(df["Iteration ID"]).round().astype("Int64")
        st["step_us"] = num(df["Iteration Time(us)"])
        end = num(df.get("Iteration End(us)"), df.index)
        st["device_id"] = num(df.get("Device_id"), df.index)
        for col in (
            "computing_us",
            "communication_not_overlapped_us",
            "overlapped_us",
            "communication_us",
            "free_us",
            "stage_us",
            "bubble_us",
        ):
            st[col] = np.nan
        rd.add("step_trace", st, p, version="msprof-graph")
        steps = pd.concat(
            [
                steps,
                pd.DataFrame({"step": st["step"], "start_us": end - st["step_us"], "end_us": end}),
            ],
            ignore_index=True,
        )
    for p in _files(out, "op_summary"):
        df = read_csv(p, required=["Op Name", "Task Start Time(us)", "Task Duration(us)"])
        rd.parsed_files += 1
        version = kernel_header_version([OP_SUMMARY_RENAME.get(c, c) for c in df.columns])
        k = kernels_frame(df.rename(columns=OP_SUMMARY_RENAME), rank)
        if not steps.empty:
            t = k["start_us"].to_numpy()
            step = np.full(len(k), -1)
            for sid, s0, s1 in steps.itertuples(index=False):
                step[(t >= s0) & (t <= s1)] = int(sid)
            k["step"] = pd.array(step, dtype="Int64")
        rd.add("kernels", k, p, version=version)
    for name, core in (("op_statistic", None), ("communication_statistic", "COMMUNICATION")):
        for p in _files(out, name):
            df = read_csv(p, required=["OP Type", "Count", "Total Time(us)"])
            rd.parsed_files += 1
            o = pd.DataFrame(index=df.index)
            o["rank"] = rank
            o["op_type"] = clean_str(df["OP Type"])
            o["core_type"] = clean_str(df.get("Core Type"), df.index) if core is None else core
            o["count"] = num(df["Count"])
            o["total_us"] = num(df["Total Time(us)"])
            o["min_us"] = num(df.get("Min Time(us)"), df.index)
            o["avg_us"] = num(df.get("Avg Time(us)"), df.index)
            o["max_us"] = num(df.get("Max Time(us)"), df.index)
            o["ratio_pct"] = num(df.get("Ratio(%)"), df.index)
            rd.add("op_statistic", o, p)
    comm = folder / "analyze" / "communication.json"
    if comm.is_file():
        data = read_json(comm)
        rd.parsed_files += 1
        if isinstance(data, dict) and not any(str(k).startswith("step") for k in data):
            wrapped: dict[str, dict[str, dict[str, object]]] = {
                "step": {"p2p": {}, "collective": {}}
            }
            for k, v in data.items():
                if str(k).startswith("Total"):
                    continue
                wrapped["step"][comm_kind_of(k)][k] = v
            data = wrapped
        ops, bw = comm_frames(data, rank)
        rd.add("comm_ops", ops, comm)
        rd.add("comm_bandwidth", bw, comm)
    mat = folder / "analyze" / "communication_matrix.json"
    if mat.is_file():
        data = read_json(mat)
        rd.parsed_files += 1
        acc = LinkColumns()
        for op_key, links in (data or {}).items():
            if str(op_key).startswith("Total") or not isinstance(links, dict):
                continue
            acc.add_links(links, op_key, -1, rank)
        rd.add("comm_matrix", acc.frame() if len(acc) else pd.DataFrame(), mat)
    cadb = folder / "analyze" / "communication_analyzer.db"
    if "comm_ops" not in rd.tables and cadb.is_file():
        a = dbr.read_analysis_db(cadb, rank)
        rd.parsed_files += 1
        for table in ("comm_ops", "comm_bandwidth", "comm_matrix"):
            if table in a and table not in rd.tables:
                rd.add(table, a[table], cadb)
    dbs = msprof_dbs(folder)
    for db in dbs[:1]:
        _read_db(folder, db, rd)
    if len(dbs) > 1:
        rd.warnings.append(
            DataWarning(
                code="file_skipped",
                message=f"{show_path(folder)} holds {len(dbs)} msprof_*.db files; only {dbs[0].name} "
                "was read (one DB per PROF_ folder is expected)",
                path=str(folder),
            )
        )
    if rd.rank != rank:  # the DB gave the rank: fill the rows read before it
        for df in rd.tables.values():
            if "rank" in df.columns:
                df["rank"] = rd.rank
        rd.sources = [x._replace(rank=rd.rank) for x in rd.sources]
    return rd
