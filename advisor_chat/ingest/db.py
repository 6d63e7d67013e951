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


def connect(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only (never creates -wal/-shm files next to it when possible)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except PermissionError as exc:
        raise unreadable(path) from exc
    if head != b"SQLite format 3\x00":
        raise InputError(
            f"{path} is not an SQLite database (truncated or corrupted)",
            path=path,
            remedy="Copy the file again from the training machine, or re-export with export_type=db",
        )
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


def tables_of(con: sqlite3.Connection) -> dict[str, list[str]]:
    """Table name → column names."""
    out: dict[str, list[str]] = {}
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'"):
        out[name] = [r[1] for r in con.execute(f'PRAGMA table_info("{name}")')]
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


def read_profiler_db(path: Path, rank: int | None) -> dict[str, Any]:
    """Read one ``ascend_pytorch_profiler_{rank}.db`` (or MindSpore/msprof CANN-schema DB).

    Returns:
        ``{"kernels", "host_dispatch", "memory", "meta", "groups", "step_time"}``: DataFrames
        (µs / MB), a meta dict and ``parallel_group_info`` group entries.

    Raises:
        InputError: Unreadable or not an SQLite file.
    """
    con = connect(path)
    try:
        tabs = tables_of(con)
        strings = _strings(con) if "STRING_IDS" in tabs else {}
        s = strings.get
        steps = pd.DataFrame(columns=["id", "start_us", "end_us"])
        if "STEP_TIME" in tabs:
            steps = _q(con, "SELECT id, startNs, endNs FROM STEP_TIME")
            steps["start_us"] = steps["startNs"] / 1000.0
            steps["end_us"] = steps["endNs"] / 1000.0
        out: dict[str, Any] = {"step_time": steps}
        # kernels
        frames = []
        if "TASK" in tabs and "COMPUTE_TASK_INFO" in tabs:
            cti = tabs["COMPUTE_TASK_INFO"]
            block = "blockNum" if "blockNum" in cti else "blockDim"
            wait = "c.waitNs" if "waitNs" in cti else "NULL"
            k = _q(
                con,
                f"SELECT t.startNs, t.endNs, t.streamId, t.deviceId, c.name, c.opType, c.taskType, "
                f"c.{block} AS block, c.inputShapes, c.inputDataTypes, c.outputShapes, {wait} AS waitNs "
                f"FROM TASK t JOIN COMPUTE_TASK_INFO c ON t.globalTaskId = c.globalTaskId",
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
        if "COMMUNICATION_OP" in tabs:
            c = _q(con, "SELECT opName, startNs, endNs, opType FROM COMMUNICATION_OP")
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
        # host dispatch: CANN_API -> TASK by connectionId
        if "CANN_API" in tabs and "TASK" in tabs:
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
                        names.get(g) or s(tt) or ""
                        for g, tt in zip(h["gid"], h["tt"], strict=False)
                    ],
                    "device_duration_us": (h["de"] - h["ds"]) / 1000.0,
                }
            )
            hd["launch_delay_us"] = hd["device_start_us"] - hd["host_start_us"]
            hd["rank"] = rank
            hd["step"] = _assign_steps(hd["host_start_us"], steps)
            out["host_dispatch"] = hd
        if "MEMORY_RECORD" in tabs:
            m = _q(
                con,
                "SELECT component, timestamp, totalAllocated, totalReserved, totalActive FROM MEMORY_RECORD",
            )
            mb = 1024.0 * 1024.0
            out["memory"] = pd.DataFrame(
                {
                    "rank": rank,
                    "timestamp_us": m["timestamp"] / 1000.0,
                    "component": m["component"].map(s),
                    "allocated_mb": m["totalAllocated"] / mb,
                    "reserved_mb": m["totalReserved"] / mb,
                    "active_mb": m["totalActive"] / mb,
                }
            )
        meta: dict[str, Any] = {}
        md: dict[str, Any] = {}
        if "META_DATA" in tabs:
            for name, value in con.execute("SELECT name, value FROM META_DATA"):
                try:
                    md[name] = json.loads(value)
                except (TypeError, ValueError):
                    md[name] = value
            meta["schema_version"] = md.get("SCHEMA_VERSION")
        if "RANK_DEVICE_MAP" in tabs:
            row = con.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP").fetchone()
            if row:
                meta["db_rank_id"] = row[0]
                meta["device_id"] = row[1]
        if "NPU_INFO" in tabs:
            row = con.execute("SELECT name FROM NPU_INFO").fetchone()
            if row:
                meta["device_type"] = row[0]
        out["metadata"] = md
        out["meta"] = meta
        return out
    finally:
        con.close()


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


def read_analysis_db(path: Path, rank: int | None) -> dict[str, pd.DataFrame]:
    """``analysis.db`` / ``communication_analyzer.db`` → step_trace, comm_ops, comm_bandwidth, comm_matrix.

    comm_matrix keeps local ranks in ``src_local``/``dst_local`` (mapped by the loader).
    """
    con = connect(path)
    out: dict[str, pd.DataFrame] = {}
    try:
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
                out["comm_bandwidth"] = pd.DataFrame(
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
    finally:
        con.close()
