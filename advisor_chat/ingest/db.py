"""Readers for the DB export: ``ascend_pytorch_profiler_{rank}.db`` and ``analysis.db`` (reference §1.15).

The per-rank DB is the CANN schema (times in **ns epoch**, sizes in bytes, strings interned in
``STRING_IDS``); it is converted here to the canonical units (µs, MB). ``analysis.db`` already
holds µs / ms / MB / GB/s like the json files. Files are opened read-only (``mode=ro`` URI) so a
WAL-mode database is never modified.

- ``kernels`` ← ``TASK ⨝ COMPUTE_TASK_INFO`` plus ``COMMUNICATION_OP`` (``accelerator_core`` =
  ``COMMUNICATION``); step from ``STEP_TIME`` ranges.
- ``host_dispatch`` ← ``CANN_API ⨝ TASK`` on ``connectionId`` (so trace_view.json is not needed);
  HCCL-internal tasks (those in ``COMMUNICATION_TASK_INFO``: Notify Wait, Write Value, SDMA, …) are
  left out, as they carry no HostToDevice flow in trace_view.json either.
- ``memory`` ← ``MEMORY_RECORD`` (bytes → MB, 1024-based like memory_record.csv).
- ``step_trace`` ← ``analysis.db StepTraceTime`` (µs; step stored as text without prefix).
- ``comm_ops`` / ``comm_bandwidth`` / ``comm_matrix`` ← ``CommAnalyzerTime`` / ``…Bandwidth`` /
  ``…Matrix`` (one bandwidth row per package size there; aggregated to one row per op × transport).
- meta ← ``META_DATA`` (ENV_VARIABLES, parallel_group_info, distributed_args), ``RANK_DEVICE_MAP``,
  ``NPU_INFO``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from advisor_chat.errors import InputError
from advisor_chat.ingest.common import (
    LARGE_PACKET_MB,
    comm_kind_of,
    comm_op_type,
    hccl_ratio,
    step_from_key,
    unreadable,
)
from advisor_chat.ingest.guard import check_file, short, show_path


def connect(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only (never creates -wal/-shm files next to it when possible).

    Raises:
        InputError: Not a regular file within its size cap (:func:`guard.check_file`), unreadable,
            or not starting with the SQLite header.
    """
    check_file(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(100)
            size = fh.seek(0, 2)
    except PermissionError as exc:
        raise unreadable(path) from exc
    if head[:16] != b"SQLite format 3\x00":
        raise InputError(
            f"{show_path(path)} is not an SQLite database (truncated or corrupted)",
            path=show_path(path),
            remedy="Copy the file again from the training machine, or re-export with export_type=db",
        )
    expected = _size_in_header(head)
    if expected is not None and size < expected:
        raise corrupt(path, f"truncated: {size} of the {expected} bytes its header announces")
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


def _size_in_header(head: bytes) -> int | None:
    """Bytes the SQLite header says the file holds (page size × page count), when it says it.

    The page count (offset 28) is valid only when the version-valid-for number (offset 92) equals
    the change counter (offset 24); page size 1 means 65536 (sqlite.org/fileformat2.html §1.3).
    """
    if len(head) < 100:
        return None
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    count = int.from_bytes(head[28:32], "big")
    if head[92:96] != head[24:28] or not count or page < 512 or page & (page - 1):
        return None
    return page * count


def corrupt(path: Path, exc: BaseException | str) -> InputError:
    """The :class:`InputError` for a DB whose header is valid but whose body is not."""
    return InputError(
        f"{show_path(path)} is a damaged SQLite database ({short(exc, 100)}); it was not read",
        path=show_path(path),
        remedy="Copy the file again from the training machine (a truncated copy gives this), or "
        "re-export the profile with export_type=db",
    )


#: Errors a damaged database raises while it is read (pandas wraps sqlite3's in its own class).
DB_ERRORS: tuple[type[BaseException], ...] = (sqlite3.DatabaseError, pd.errors.DatabaseError)


#: The CANN-schema tables (and their columns) the DB readers use (reference §1.15.1).
CANN_TABLES: dict[str, list[str]] = {
    "STRING_IDS": ["id", "value"],
    "TASK": ["startNs", "endNs", "globalTaskId"],
    "COMPUTE_TASK_INFO": ["name", "globalTaskId"],
    "COMMUNICATION_OP": ["opName", "startNs", "endNs"],
    "CANN_API": ["startNs", "name", "connectionId"],
}


def schema_gaps(tabs: dict[str, list[str]], needed: list[str]) -> list[str]:
    """Tables of :data:`CANN_TABLES` named in ``needed`` that ``tabs`` lacks, or that lack columns.

    Returns:
        Descriptions such as ``'TASK'`` or ``'TASK.endNs'`` (empty when the schema fits).
    """
    out = []
    for t in needed:
        if t not in tabs:
            out.append(t)
            continue
        out += [f"{t}.{c}" for c in CANN_TABLES[t] if c not in tabs[t]]
    return out


def tables_of(con: sqlite3.Connection) -> dict[str, list[str]]:
    """Table name → column names (one query: ``sqlite_master`` ⨝ ``pragma_table_info``)."""
    out: dict[str, list[str]] = {}
    rows = con.execute(
        "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p "
        "WHERE m.type = 'table' ORDER BY m.rowid, p.cid"
    )
    for table, column in rows:
        out.setdefault(table, []).append(column)
    return out


def _q(con: sqlite3.Connection, sql: str) -> pd.DataFrame:
    return pd.read_sql_query(sql, con)


def _strings(con: sqlite3.Connection) -> dict[int, str]:
    return dict(con.execute("SELECT id, value FROM STRING_IDS").fetchall())


def _assign_steps(times_us: pd.Series, steps: pd.DataFrame) -> pd.Series:
    """Step id for each timestamp (µs) from STEP_TIME ranges (µs); -1 outside every step."""
    out = np.full(len(times_us), -1, dtype="int64")
    t = times_us.to_numpy(dtype="float64")
    for sid, s0, s1 in steps[["id", "start_us", "end_us"]].itertuples(index=False):
        mask = (t >= s0) & (t <= s1)
        out[mask] = int(sid)
    return pd.Series(out, index=times_us.index, dtype="Int64")


def _unquote(s: pd.Series) -> pd.Series:
    return s.astype("string").str.strip().str.strip('"')


#: What :func:`read_profiler_db` can read; ``kernels`` and ``host_dispatch`` are the heavy ones.
PROFILER_PARTS = ("kernels", "host_dispatch", "memory", "meta")


def read_profiler_db(
    path: Path, rank: int | None, tables: Iterable[str] | None = None
) -> dict[str, Any]:
    """Read one ``ascend_pytorch_profiler_{rank}.db`` (or MindSpore/msprof CANN-schema DB).

    Args:
        path: The DB file.
        rank: Global rank written into the ``rank`` columns.
        tables: Parts of :data:`PROFILER_PARTS` to read (``None``: all). ``meta`` is the cheap
            part (META_DATA, RANK_DEVICE_MAP, SESSION_TIME_INFO, NPU_INFO and which heavy tables
            the DB holds rows for, without reading them), so that the light read of a rank is
            ``tables=("memory", "meta")`` and a later heavy read ``tables=("kernels",)``.

    Returns:
        The parts asked for: ``kernels`` (also ``comm_op_raw``), ``host_dispatch``, ``memory``
        DataFrames (µs / MB); with ``meta`` the ``meta`` dict, the ``metadata`` copy (META_DATA),
        ``tables`` (table → columns) and ``heavy`` (which of ``kernels`` / ``host_dispatch``
        the DB has rows for); ``step_time`` (STEP_TIME in µs) and ``schema_version`` with
        ``kernels`` or ``host_dispatch``.

    Raises:
        InputError: Unreadable, not an SQLite file, truncated or damaged (names the file).
    """
    want = set(PROFILER_PARTS if tables is None else tables)
    con = connect(path)
    try:
        return _read_profiler_db(con, rank, want)
    except DB_ERRORS as exc:
        raise corrupt(path, exc) from exc
    finally:
        con.close()


def _has_kernels(tabs: dict[str, list[str]]) -> tuple[bool, bool]:
    """Whether the schema gives (compute kernels, communication kernels)."""
    return (
        not schema_gaps(tabs, ["TASK", "COMPUTE_TASK_INFO"]),
        not schema_gaps(tabs, ["COMMUNICATION_OP"]),
    )


def _has_host_dispatch(tabs: dict[str, list[str]]) -> bool:
    return (
        not schema_gaps(tabs, ["CANN_API", "TASK"])
        and "type" in tabs["CANN_API"]
        and {"connectionId", "taskType"} <= set(tabs["TASK"])
    )


def _any_row(con: sqlite3.Connection, table: str) -> bool:
    return con.execute(f'SELECT EXISTS (SELECT 1 FROM "{table}")').fetchone()[0] == 1


def _read_profiler_db(con: sqlite3.Connection, rank: int | None, want: set[str]) -> dict[str, Any]:
    tabs = tables_of(con)
    out: dict[str, Any] = {}
    if "meta" in want:
        out.update(_read_meta(con, tabs))
    if "memory" in want and "MEMORY_RECORD" in tabs:
        out["memory"] = _read_memory(con, tabs, rank)
    if not want & {"kernels", "host_dispatch"}:
        return out
    strings = _strings(con) if "STRING_IDS" in tabs else {}
    s = strings.get
    steps = pd.DataFrame(columns=["id", "start_us", "end_us"])
    if "STEP_TIME" in tabs:
        steps = _q(con, "SELECT id, startNs, endNs FROM STEP_TIME")
        steps["start_us"] = steps["startNs"] / 1000.0
        steps["end_us"] = steps["endNs"] / 1000.0
    out["step_time"] = steps
    if "META_DATA" in tabs:
        row = con.execute("SELECT value FROM META_DATA WHERE name = 'SCHEMA_VERSION'").fetchone()
        out["schema_version"] = _json_or_text(row[0]) if row else None
    compute, comm = _has_kernels(tabs)
    if "kernels" in want:
        out.update(_read_kernels(con, tabs, rank, s, steps, compute, comm))
    if "host_dispatch" in want and _has_host_dispatch(tabs):
        out["host_dispatch"] = _read_host_dispatch(con, tabs, rank, s, steps)
    return out


def _read_kernels(
    con: sqlite3.Connection,
    tabs: dict[str, list[str]],
    rank: int | None,
    s: Any,
    steps: pd.DataFrame,
    compute: bool,
    comm: bool,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    frames = []
    if compute:
        cti = tabs["COMPUTE_TASK_INFO"]
        tsk = tabs["TASK"]

        def col(table: str, cols: list[str], name: str, alias: str) -> str:
            return f"{table}.{name} AS {alias}" if name in cols else f"NULL AS {alias}"

        block = "blockNum" if "blockNum" in cti else "blockDim"
        k = _q(
            con,
            "SELECT t.startNs, t.endNs, "
            + ", ".join(
                [
                    col("t", tsk, "streamId", "streamId"),
                    col("t", tsk, "deviceId", "deviceId"),
                    "c.name",
                    col("c", cti, "opType", "opType"),
                    col("c", cti, "taskType", "taskType"),
                    col("c", cti, block, "block"),
                    col("c", cti, "inputShapes", "inputShapes"),
                    col("c", cti, "inputDataTypes", "inputDataTypes"),
                    col("c", cti, "outputShapes", "outputShapes"),
                    col("c", cti, "waitNs", "waitNs"),
                ]
            )
            + " FROM TASK t JOIN COMPUTE_TASK_INFO c ON t.globalTaskId = c.globalTaskId",
        )
        kd = pd.DataFrame(
            {
                "name": k["name"].map(s),
                "op_type": k["opType"].map(s),
                "accelerator_core": k["taskType"].map(s),
                "start_us": k["startNs"] / 1000.0,
                "duration_us": (k["endNs"] - k["startNs"]) / 1000.0,
                "wait_us": pd.to_numeric(k["waitNs"], errors="coerce") / 1000.0,
                "block_dim": pd.to_numeric(k["block"], errors="coerce"),
                "input_shapes": _unquote(k["inputShapes"].map(s)),
                "input_dtypes": _unquote(k["inputDataTypes"].map(s)),
                "output_shapes": _unquote(k["outputShapes"].map(s)),
                "stream_id": pd.to_numeric(k["streamId"], errors="coerce"),
                "device_id": pd.to_numeric(k["deviceId"], errors="coerce"),
            }
        )
        frames.append(kd)
    if comm:
        co = tabs["COMMUNICATION_OP"]
        c = _q(
            con,
            "SELECT opName, startNs, endNs, "
            + ", ".join(
                f"{n} AS {n}" if n in co else f"NULL AS {n}"
                for n in ("opType", "groupName", "waitNs")
            )
            + " FROM COMMUNICATION_OP",
        )
        out["comm_op_raw"] = pd.DataFrame(
            {
                "op_name": c["opName"].map(s),
                "group_raw": c["groupName"].map(s),
                "start_ns": c["startNs"],
                "end_ns": c["endNs"],
                "wait_ns": pd.to_numeric(c["waitNs"], errors="coerce"),
            }
        )
        frames.append(
            pd.DataFrame(
                {
                    "name": c["opName"].map(s),
                    "op_type": c["opType"].map(s),
                    "accelerator_core": "COMMUNICATION",
                    "start_us": c["startNs"] / 1000.0,
                    "duration_us": (c["endNs"] - c["startNs"]) / 1000.0,
                }
            )
        )
    if frames:
        kernels = pd.concat(frames, ignore_index=True).sort_values("start_us", kind="stable")
        kernels["rank"] = rank
        kernels["step"] = _assign_steps(kernels["start_us"], steps)
        if "wait_us" not in kernels:
            kernels["wait_us"] = np.nan
        out["kernels"] = kernels.reset_index(drop=True)
    return out


def _read_host_dispatch(
    con: sqlite3.Connection,
    tabs: dict[str, list[str]],
    rank: int | None,
    s: Any,
    steps: pd.DataFrame,
) -> pd.DataFrame:
    """host_dispatch: CANN_API -> TASK by connectionId."""
    h = _q(
        con,
        "SELECT a.name AS api, a.type AS atype, a.startNs AS hs, t.startNs AS ds, t.endNs AS de, "
        "t.globalTaskId AS gid, t.taskType AS tt FROM CANN_API a "
        "JOIN TASK t ON a.connectionId = t.connectionId"
        + (
            " WHERE t.globalTaskId NOT IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)"
            if "COMMUNICATION_TASK_INFO" in tabs
            else ""
        ),
    )
    names: dict[int, str] = {}
    if "COMPUTE_TASK_INFO" in tabs:
        names = {
            g: s(n) or ""
            for g, n in con.execute("SELECT globalTaskId, name FROM COMPUTE_TASK_INFO")
        }
    api_types: dict[int, str] = {}
    if "ENUM_API_TYPE" in tabs:
        api_types = dict(con.execute("SELECT id, name FROM ENUM_API_TYPE").fetchall())
    prefix = {"acl": "AscendCL@", "node": "Node@", "runtime": "Runtime@", "model": "Model@"}
    prefix.update({"hccl": "Hccl@", "communication": "Hccl@"})
    hd = pd.DataFrame(
        {
            # same spelling as trace_view.json: "{level}@{name}" (AscendCL@..., Node@launch)
            "api_name": [
                prefix.get(api_types.get(t, ""), "") + (s(n) or "")
                for n, t in zip(h["api"], h["atype"], strict=False)
            ],
            "host_start_us": h["hs"] / 1000.0,
            "device_start_us": h["ds"] / 1000.0,
            "kernel_name": [
                names.get(g) or s(tt) or "" for g, tt in zip(h["gid"], h["tt"], strict=False)
            ],
            "device_duration_us": (h["de"] - h["ds"]) / 1000.0,
        }
    )
    hd["launch_delay_us"] = hd["device_start_us"] - hd["host_start_us"]
    hd["rank"] = rank
    hd["step"] = _assign_steps(hd["host_start_us"], steps)
    return hd


def _read_memory(
    con: sqlite3.Connection, tabs: dict[str, list[str]], rank: int | None
) -> pd.DataFrame:
    """MEMORY_RECORD (bytes → MB, 1024-based); component names resolved in SQL (no STRING_IDS read)."""
    strings = "STRING_IDS" in tabs
    m = _q(
        con,
        f"SELECT {'s.value' if strings else 'NULL'} AS component, m.timestamp, m.totalAllocated, "
        "m.totalReserved, m.totalActive FROM MEMORY_RECORD m"
        + (" LEFT JOIN STRING_IDS s ON s.id = m.component" if strings else ""),
    )
    mb = 1024.0 * 1024.0
    return pd.DataFrame(
        {
            "rank": rank,
            "timestamp_us": m["timestamp"] / 1000.0,
            "component": m["component"],
            "allocated_mb": m["totalAllocated"] / mb,
            "reserved_mb": m["totalReserved"] / mb,
            "active_mb": m["totalActive"] / mb,
        }
    )


def _json_or_text(value: Any) -> Any:
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value


def _read_meta(con: sqlite3.Connection, tabs: dict[str, list[str]]) -> dict[str, Any]:
    """The cheap part: meta dict, META_DATA copy, schema, and which heavy tables have rows."""
    meta: dict[str, Any] = {}
    md: dict[str, Any] = {}
    if "META_DATA" in tabs:
        for name, value in con.execute("SELECT name, value FROM META_DATA"):
            md[name] = _json_or_text(value)
        meta["schema_version"] = md.get("SCHEMA_VERSION")
    if "RANK_DEVICE_MAP" in tabs:
        row = con.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP").fetchone()
        if row:
            meta["db_rank_id"] = row[0]
            meta["device_id"] = row[1]
    if "SESSION_TIME_INFO" in tabs and "endTimeNs" in tabs["SESSION_TIME_INFO"]:
        row = con.execute("SELECT MAX(endTimeNs) FROM SESSION_TIME_INFO").fetchone()
        if row and row[0] is not None:
            meta["collection_end_ns"] = row[0]
    if "NPU_INFO" in tabs:
        row = con.execute("SELECT name FROM NPU_INFO").fetchone()
        if row:
            meta["device_type"] = row[0]
    compute, comm = _has_kernels(tabs)
    heavy = []
    if (compute and _any_row(con, "COMPUTE_TASK_INFO")) or (
        comm and _any_row(con, "COMMUNICATION_OP")
    ):
        heavy.append("kernels")
    if _has_host_dispatch(tabs) and _any_row(con, "CANN_API"):
        heavy.append("host_dispatch")
    if "device_id" not in meta and compute and "deviceId" in tabs["TASK"]:
        row = con.execute(
            "SELECT deviceId FROM TASK WHERE deviceId IS NOT NULL ORDER BY startNs LIMIT 1"
        ).fetchone()
        if row:
            meta["task_device_id"] = row[0]
    return {"meta": meta, "metadata": md, "tables": tabs, "heavy": heavy}


def _band_rows(b: pd.DataFrame) -> pd.DataFrame:
    """CommAnalyzerBandwidth rows (one per package size) → one row per (step, op, transport)."""
    if b.empty:
        return b
    b = b.copy()
    limit = b["transport_type"].map(LARGE_PACKET_MB)
    b["small"] = np.where(
        (b["package_size"].astype(float) <= limit.fillna(-1)) & limit.notna(),
        b["count"].astype(float),
        0.0,
    )
    keys = ["step", "hccl_op_name", "group_name", "transport_type"]
    g = b.groupby(keys, sort=False, dropna=False)
    agg = g.agg(
        transit_size_mb=("transit_size", "first"),
        transit_time_ms=("transit_time", "first"),
        bandwidth_gbps=("bandwidth", "first"),
        large_packet_ratio=("large_packet_ratio", "first"),
        packet_count=("count", "sum"),
        small_packet_count=("small", "sum"),
    ).reset_index()
    return agg


def bandwidth_frame(agg: pd.DataFrame, rank: Any) -> pd.DataFrame:
    """Rows of :func:`_band_rows` → the canonical ``comm_bandwidth`` columns.

    ``rank`` is one rank id (per-rank ``analysis.db``) or a column of them (cluster DB).
    """
    return pd.DataFrame(
        {
            "rank": rank,
            "group": agg["group_name"].astype(str),
            "step": [step_from_key(x) for x in agg["step"]],
            "op_name": agg["hccl_op_name"],
            "transport": agg["transport_type"],
            "transit_size_mb": agg["transit_size_mb"],
            "transit_time_ms": agg["transit_time_ms"],
            "bandwidth_gbps": agg["bandwidth_gbps"],
            "large_packet_ratio": agg["large_packet_ratio"],
            "small_packet_count": agg["small_packet_count"],
            "packet_count": agg["packet_count"],
        }
    )


def read_analysis_db(path: Path, rank: int | None) -> dict[str, pd.DataFrame]:
    """``analysis.db`` / ``communication_analyzer.db`` → step_trace, comm_ops, comm_bandwidth, comm_matrix.

    comm_matrix keeps local ranks in ``src_local``/``dst_local`` (mapped by the loader).
    """
    con = connect(path)
    try:
        return _read_analysis_db(con, rank)
    except DB_ERRORS as exc:
        raise corrupt(path, exc) from exc
    finally:
        con.close()


def _read_analysis_db(con: sqlite3.Connection, rank: int | None) -> dict[str, pd.DataFrame]:
    out: dict[str, pd.DataFrame] = {}
    tabs = tables_of(con)
    if "StepTraceTime" in tabs:
        st = _q(con, "SELECT * FROM StepTraceTime")
        ren = {
            "computing": "computing_us",
            "communication_not_overlapped": "communication_not_overlapped_us",
            "overlapped": "overlapped_us",
            "communication": "communication_us",
            "free": "free_us",
            "stage": "stage_us",
            "bubble": "bubble_us",
            "communication_not_overlapped_and_exclude_receive": "communication_not_overlapped_exclude_receive_us",
            "preparing": "preparing_us",
            "deviceId": "device_id",
        }
        st = st.rename(columns=ren)
        st["step"] = [step_from_key(x) if x not in (None, "") else -1 for x in st["step"]]
        st["rank"] = rank
        for col in ("computing_us", "communication_not_overlapped_us", "free_us"):
            st[col] = pd.to_numeric(st[col], errors="coerce")
        st["step_us"] = (
            st["computing_us"].fillna(0)
            + st["communication_not_overlapped_us"].fillna(0)
            + st["free_us"].fillna(0)
        )
        out["step_trace"] = st
    if "CommAnalyzerTime" in tabs:
        t = _q(con, "SELECT * FROM CommAnalyzerTime")
        t = t[~t["hccl_op_name"].astype(str).str.startswith("Total")]
        wait = pd.to_numeric(t["wait_time"], errors="coerce")
        transit = pd.to_numeric(t["transit_time"], errors="coerce")
        sync = pd.to_numeric(t["synchronization_time"], errors="coerce")
        kind = t["type"] if "type" in t else t["hccl_op_name"].map(comm_kind_of)
        ops = pd.DataFrame(
            {
                "rank": rank,
                "group": t["group_name"].astype(str),
                "step": [step_from_key(x) for x in t.get("step", pd.Series("", index=t.index))],
                "op_name": t["hccl_op_name"],
                "op_type": t["hccl_op_name"].map(comm_op_type),
                "comm_kind": kind,
                "start_us": pd.to_numeric(t["start_timestamp"], errors="coerce"),
                "elapse_ms": pd.to_numeric(t["elapse_time"], errors="coerce"),
                "transit_ms": transit,
                "wait_ms": wait,
                "synchronization_ms": sync,
                "idle_ms": pd.to_numeric(t["idle_time"], errors="coerce"),
                "wait_ratio": hccl_ratio(wait, transit),
                "synchronization_ratio": hccl_ratio(sync, transit),
            }
        )
        out["comm_ops"] = ops.reset_index(drop=True)
    if "CommAnalyzerBandwidth" in tabs:
        b = _q(con, "SELECT * FROM CommAnalyzerBandwidth")
        if "step" not in b:
            b["step"] = ""
        b = b[~b["hccl_op_name"].astype(str).str.startswith("Total")]
        agg = _band_rows(b)
        if not agg.empty:
            out["comm_bandwidth"] = bandwidth_frame(agg, rank)
    if "CommAnalyzerMatrix" in tabs:
        m = _q(con, "SELECT * FROM CommAnalyzerMatrix")
        if "step" not in m:
            m["step"] = ""
        m = m[~m["hccl_op_name"].astype(str).str.startswith("Total")]
        out["comm_matrix"] = pd.DataFrame(
            {
                "group": m["group_name"].astype(str),
                "step": [step_from_key(x) for x in m["step"]],
                "op_name": m["hccl_op_name"],
                "src_local": pd.to_numeric(m["src_rank"], errors="coerce"),
                "dst_local": pd.to_numeric(m["dst_rank"], errors="coerce"),
                "transport": m["transport_type"],
                "transit_size_mb": pd.to_numeric(m["transit_size"], errors="coerce"),
                "transit_time_ms": pd.to_numeric(m["transit_time"], errors="coerce"),
                "bandwidth_gbps": pd.to_numeric(m["bandwidth"], errors="coerce"),
                "link_op_name": m.get("op_name", ""),
                "rank": rank,
            }
        )
    return out
