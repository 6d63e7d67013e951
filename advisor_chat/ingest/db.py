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
from advisor_chat.ingest.schema import PMU_RATIOS
from advisor_chat.ingest.trace import GC_CALL


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
    wal = path.with_name(path.name + "-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        return _open_with_wal(path, wal)
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


def _open_with_wal(path: Path, wal: Path) -> sqlite3.Connection:
    """Open a DB whose last writes are still in its ``-wal`` file, without touching the user's copy.

    ``immutable=1`` would read the main file alone (the rows still in the WAL would be missing),
    and a normal open would write a ``-shm`` file (and on close checkpoint) into the profiling
    folder. The DB and its WAL are copied to a private temporary folder (removed at exit) and
    opened there, so SQLite replays the WAL into the copy: the rows read are the writer's last.
    """
    import atexit
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="advisor-wal-"))
    atexit.register(shutil.rmtree, tmp, True)
    try:
        shutil.copyfile(path, tmp / path.name)
        shutil.copyfile(wal, tmp / wal.name)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InputError(
            f"{show_path(path)} has unwritten changes in {wal.name} and could not be copied to "
            f"read them ({exc.strerror or exc})",
            path=show_path(path),
            remedy="Free space in the temporary folder (TMPDIR), or open the DB once with sqlite3 "
            "on the training machine so it checkpoints its WAL, then copy it again",
        ) from exc
    return sqlite3.connect(tmp / path.name)


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


#: Columns that hold text in every schema version (names, hashes that may be all digits).
_TEXT_COLUMNS = frozenset(
    {"value", "hostUid", "hostName", "group_name", "hccl_op_name", "op_name", "transport_type",
     "step", "src_rank", "dst_rank", "groupName", "opName"}
)  # fmt: skip


def _q(con: sqlite3.Connection, sql: str) -> pd.DataFrame:
    """Run ``sql``; numbers stored as text become numbers again.

    A table re-created with TEXT columns by another tool stores ``'1736409600000'``: arithmetic
    and comparisons must never run on those strings (issue 24).
    """
    df = pd.read_sql_query(sql, con)
    for c in df.columns:
        if c in _TEXT_COLUMNS or not (
            df[c].dtype == object or pd.api.types.is_string_dtype(df[c].dtype)
        ):
            continue
        vals = pd.to_numeric(df[c], errors="coerce")
        if vals.notna().sum() == df[c].notna().sum():  # every value is a number
            df[c] = vals
    return df


def _strings(con: sqlite3.Connection) -> dict[int, str]:
    return dict(con.execute("SELECT CAST(id AS INTEGER), value FROM STRING_IDS").fetchall())


def _assign_steps(times_us: pd.Series, steps: pd.DataFrame) -> pd.Series:
    """Step id for each timestamp (µs) from STEP_TIME ranges (µs); -1 outside every step."""
    out = np.full(len(times_us), -1, dtype="int64")
    t = times_us.to_numpy(dtype="float64")
    for sid, s0, s1 in steps[["id", "start_us", "end_us"]].itertuples(index=False):
        mask = (t >= s0) & (t <= s1)
        out[mask] = int(sid)
    return pd.Series(out, index=times_us.index, dtype="Int64")


def _unquote(s: pd.Series) -> pd.Series:
    """Outer quotes and spaces removed; ``N/A`` / empty → null, as the text export reads them."""
    out = s.astype("string").str.strip().str.strip('"')
    return out.mask(out.isin(["N/A", ""]))


#: What :func:`read_profiler_db` can read; ``kernels``, ``host_dispatch``, ``aicore_freq`` and
#: ``hccl_ops`` are the heavy ones (read on demand).
PROFILER_PARTS = ("kernels", "host_dispatch", "aicore_freq", "hccl_ops", "memory", "meta")


def read_profiler_db(
    path: Path,
    rank: int | None,
    tables: Iterable[str] | None = None,
    *,
    memory_columns: bool = False,
) -> dict[str, Any]:
    """Read one ``ascend_pytorch_profiler_{rank}.db`` (or MindSpore/msprof CANN-schema DB).

    Args:
        path: The DB file.
        rank: Global rank written into the ``rank`` columns.
        tables: Parts of :data:`PROFILER_PARTS` to read (``None``: all). ``meta`` is the cheap
            part (META_DATA, RANK_DEVICE_MAP, SESSION_TIME_INFO, NPU_INFO and which heavy tables
            the DB holds rows for, without reading them), so that the light read of a rank is
            ``tables=("memory", "meta")`` and a later heavy read ``tables=("kernels",)``.
        memory_columns: Give ``memory`` as ``(columns, rows)`` (for a ``TableSink``) instead of a
            DataFrame.

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
        out = _read_profiler_db(con, rank, want)
    except DB_ERRORS as exc:
        raise corrupt(path, exc) from exc
    finally:
        con.close()
    if "memory" in out and not memory_columns:
        out["memory"] = pd.DataFrame(out["memory"][0], index=range(out["memory"][1]))
    return out


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
    if "aicore_freq" in want and "AICORE_FREQ" in tabs:
        out["aicore_freq"] = _read_aicore_freq(con, tabs, rank)
    if "hccl_ops" in want and _has_hccl_ops(tabs):
        out["hccl_ops"] = _read_hccl_ops(con, tabs, rank)
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
        out.update(_read_kernels(con, tabs, rank, strings, steps, compute, comm))
    if "host_dispatch" in want and _has_host_dispatch(tabs):
        out["host_dispatch"] = _read_host_dispatch(con, tabs, rank, s, steps)
    return out


def _has_hccl_ops(tabs: dict[str, list[str]]) -> bool:
    return "COMMUNICATION_OP" in tabs and {
        "opName",
        "startNs",
        "endNs",
        "dataType",
        "count",
    } <= set(tabs["COMMUNICATION_OP"])


def _read_hccl_ops(
    con: sqlite3.Connection, tabs: dict[str, list[str]], rank: int | None
) -> pd.DataFrame:
    """COMMUNICATION_OP → ``hccl_ops`` rows: each HCCL operator's data type, count and algorithm.

    ``opName`` / ``algType`` are STRING_IDS ids, ``dataType`` an ENUM_HCCL_DATA_TYPE id (reference
    §1.15); times in ns → µs. ``size_mb`` = count x the type's bytes / 1e6.
    """
    from advisor_chat.ingest.trace import HCCL_DTYPE_BYTES

    alg = "c.algType" if "algType" in tabs["COMMUNICATION_OP"] else "NULL"
    enum = "ENUM_HCCL_DATA_TYPE" in tabs
    q = (
        f"SELECT s1.value AS op_name, c.startNs, c.endNs, "
        f"{'e.name' if enum else 'CAST(c.dataType AS TEXT)'} AS data_type, c.count, "
        f"{'s2.value' if alg != 'NULL' else 'NULL'} AS alg_type FROM COMMUNICATION_OP c "
        "LEFT JOIN STRING_IDS s1 ON s1.id = c.opName "
        + (f"LEFT JOIN STRING_IDS s2 ON s2.id = {alg} " if alg != "NULL" else "")
        + ("LEFT JOIN ENUM_HCCL_DATA_TYPE e ON e.id = c.dataType " if enum else "")
    )
    f = _q(con, q)
    out = pd.DataFrame(
        {
            "op_name": f["op_name"].astype("string"),
            "start_us": f["startNs"].astype("float64") / 1000.0,
            "dur_us": (f["endNs"].astype("float64") - f["startNs"].astype("float64")) / 1000.0,
            "data_type": f["data_type"].astype("string").str.strip().str.upper(),
            "count": pd.to_numeric(f["count"], errors="coerce").astype("float64"),
            "alg_type": f["alg_type"].astype("string"),
        }
    ).dropna(subset=["count"])
    nbytes = out["data_type"].map(HCCL_DTYPE_BYTES).astype("float64")
    out["size_mb"] = out["count"] * nbytes / 1e6
    out = out.sort_values("start_us", kind="stable").reset_index(drop=True)
    out.insert(0, "rank", pd.Series([rank] * len(out), dtype="Int64"))
    return out


def _read_aicore_freq(
    con: sqlite3.Connection, tabs: dict[str, list[str]], rank: int | None
) -> pd.DataFrame:
    """AICORE_FREQ → ``aicore_freq`` rows (µs, MHz) of the DB's device (the most sampled one).

    With one row per die (schema 1.2 ``dieId``), a time's samples are averaged.
    """
    cols = set(tabs["AICORE_FREQ"])
    if not {"timestampNs", "freq"} <= cols:
        return pd.DataFrame(columns=["rank", "start_us", "freq_mhz"])
    dev = "deviceId" if "deviceId" in cols else "NULL"
    f = _q(con, f"SELECT {dev} AS dev, timestampNs AS ts, freq FROM AICORE_FREQ")
    f = f.dropna(subset=["ts", "freq"])
    if f["dev"].notna().any():
        f = f[f["dev"] == f["dev"].value_counts().idxmax()]
    g = f.groupby("ts", sort=True)["freq"].mean()
    return pd.DataFrame(
        {
            "rank": pd.array([rank] * len(g), dtype="Int64"),
            "start_us": g.index.to_numpy(dtype="float64") / 1000.0,
            "freq_mhz": g.to_numpy(dtype="float64"),
        }
    )


def _read_kernels(
    con: sqlite3.Connection,
    tabs: dict[str, list[str]],
    rank: int | None,
    strings: dict[int, str],
    steps: pd.DataFrame,
    compute: bool,
    comm: bool,
) -> dict[str, Any]:
    s = strings.get
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
            "SELECT t.startNs, t.endNs, t.globalTaskId AS gtid, "
            + ", ".join(
                [
                    col("t", tsk, "streamId", "streamId"),
                    col("t", tsk, "deviceId", "deviceId"),
                    col("t", tsk, "modelId", "modelId"),
                    "c.name",
                    col("c", cti, "opType", "opType"),
                    col("c", cti, "taskType", "taskType"),
                    col("c", cti, block, "block"),
                    col("c", cti, "inputShapes", "inputShapes"),
                    col("c", cti, "inputDataTypes", "inputDataTypes"),
                    col("c", cti, "inputFormats", "inputFormats"),
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
                "input_formats": _unquote(k["inputFormats"].map(s)),
                "output_shapes": _unquote(k["outputShapes"].map(s)),
                "stream_id": pd.to_numeric(k["streamId"], errors="coerce"),
                "device_id": pd.to_numeric(k["deviceId"], errors="coerce"),
                "model_id": pd.to_numeric(k["modelId"], errors="coerce"),
            }
        )
        if "TASK_PMU_INFO" in tabs and {"globalTaskId", "name", "value"} <= set(
            tabs["TASK_PMU_INFO"]
        ):
            pmu = _read_pmu(con, strings, k["gtid"])
            kd = kd.join(pmu) if not pmu.empty else kd
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


def _read_pmu(con: sqlite3.Connection, strings: dict[int, str], gtid: pd.Series) -> pd.DataFrame:
    """``TASK_PMU_INFO`` (globalTaskId, name id, value) → one column per ratio, aligned to ``gtid``.

    Returns a frame indexed like ``gtid`` with the :data:`PMU_RATIOS` columns present in the
    file (empty when none is): a kernel with several rows for one metric gets their mean.
    """
    ids = {i: v for i, v in strings.items() if v in PMU_RATIOS}
    if not ids:
        return pd.DataFrame(index=gtid.index)
    marks = ",".join(str(int(i)) for i in ids)
    p = _q(
        con,
        "SELECT globalTaskId AS gtid, name, value FROM TASK_PMU_INFO "
        f"WHERE CAST(name AS INTEGER) IN ({marks})",
    )
    if p.empty:
        return pd.DataFrame(index=gtid.index)
    p["name"] = pd.to_numeric(p["name"], errors="coerce").map(ids)
    p["value"] = pd.to_numeric(p["value"], errors="coerce")
    wide = p.groupby(["gtid", "name"])["value"].mean().unstack("name")
    out = wide.reindex(pd.to_numeric(gtid, errors="coerce").to_numpy())
    out.index = gtid.index
    out.columns = [str(c) for c in out.columns]
    return out.astype("float64")


def _read_host_dispatch(
    con: sqlite3.Connection,
    tabs: dict[str, list[str]],
    rank: int | None,
    s: Any,
    steps: pd.DataFrame,
) -> pd.DataFrame:
    """host_dispatch: CANN_API -> TASK by connectionId."""
    has_end = "endNs" in tabs["CANN_API"]
    end = "a.endNs" if has_end else "NULL"
    h = _q(
        con,
        "SELECT a.name AS api, a.type AS atype, a.startNs AS hs, t.startNs AS ds, t.endNs AS de, "
        f"t.globalTaskId AS gid, t.taskType AS tt, {end} AS he FROM CANN_API a "
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
            for g, n in con.execute(
                "SELECT CAST(globalTaskId AS INTEGER), CAST(name AS INTEGER) FROM COMPUTE_TASK_INFO"
            )
        }
    api_types: dict[int, str] = {}
    if "ENUM_API_TYPE" in tabs:
        api_types = dict(
            con.execute("SELECT CAST(id AS INTEGER), name FROM ENUM_API_TYPE").fetchall()
        )
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
            "api_duration_us": (pd.to_numeric(h["he"], errors="coerce") - h["hs"]) / 1000.0,
        }
    )
    hd["launch_delay_us"] = hd["device_start_us"] - hd["host_start_us"]
    # the host's blocking calls (synchronize, aclrtMemcpy) launch no task (no connection id): rows
    # without device columns
    if has_end and "STRING_IDS" in tabs:
        y = _q(
            con,
            "SELECT a.name AS api, a.type AS atype, a.startNs AS hs, a.endNs AS he FROM CANN_API a "
            "WHERE a.name IN (SELECT id FROM STRING_IDS WHERE value LIKE '%Synchronize%' "
            "OR value IN ('aclrtMemcpy', 'aclrtMemcpy2d'))",
        )
        if len(y):
            # a call that launched a task is a launch row already
            y = y[~y["hs"].isin(h["hs"])] if len(h) else y
            names_y = [
                prefix.get(api_types.get(t, ""), "") + (s(n) or "")
                for n, t in zip(y["api"], y["atype"], strict=False)
            ]
            hd = pd.concat([hd, _host_rows(names_y, y["hs"], y["he"])], ignore_index=True)
    # recorded Python GC pauses (GC_RECORD, with gc_detect_threshold): host rows like the above
    if "GC_RECORD" in tabs and {"startNs", "endNs"} <= set(tabs["GC_RECORD"]):
        g = _q(con, "SELECT startNs AS hs, endNs AS he FROM GC_RECORD")
        if len(g):
            gc = _host_rows([GC_CALL] * len(g), g["hs"], g["he"])
            hd = pd.concat([hd, gc], ignore_index=True).sort_values(
                "host_start_us", kind="stable", ignore_index=True
            )
    hd["rank"] = rank
    hd["step"] = _assign_steps(hd["host_start_us"], steps)
    return hd


def _host_rows(names: list[str], start_ns: pd.Series, end_ns: pd.Series) -> pd.DataFrame:
    """``host_dispatch`` rows of host calls that launch no device task (device columns empty)."""
    return pd.DataFrame(
        {
            "api_name": names,
            "host_start_us": start_ns / 1000.0,
            "device_start_us": np.nan,
            "kernel_name": "",
            "device_duration_us": np.nan,
            "api_duration_us": (end_ns - start_ns) / 1000.0,
            "launch_delay_us": np.nan,
        }
    )


def _read_memory(
    con: sqlite3.Connection, tabs: dict[str, list[str]], rank: int | None
) -> tuple[dict[str, Any], int]:
    """MEMORY_RECORD (bytes → MB, 1024-based) as columns; component names resolved in SQL."""
    strings = "STRING_IDS" in tabs
    rows = con.execute(
        f"SELECT {'s.value' if strings else 'NULL'}, m.timestamp, m.totalAllocated, "
        "m.totalReserved, m.totalActive FROM MEMORY_RECORD m"
        + (" LEFT JOIN STRING_IDS s ON s.id = m.component" if strings else "")
    ).fetchall()
    cols = list(zip(*rows, strict=True)) if rows else [()] * 5
    mb = 1024.0 * 1024.0
    component = np.empty(len(rows), dtype=object)
    component[:] = list(cols[0])
    return {
        "rank": rank,
        "timestamp_us": _f64(list(cols[1])) / 1000.0,
        "component": component,
        "allocated_mb": _f64(list(cols[2])) / mb,
        "reserved_mb": _f64(list(cols[3])) / mb,
        "active_mb": _f64(list(cols[4])) / mb,
    }, len(rows)


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
    if "AICORE_FREQ" in tabs and _any_row(con, "AICORE_FREQ"):
        heavy.append("aicore_freq")
    if _has_hccl_ops(tabs) and _any_row(con, "COMMUNICATION_OP"):
        heavy.append("hccl_ops")
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

    DataFrames of :func:`analysis_columns` (same columns and units). comm_matrix keeps local ranks
    in ``src_local``/``dst_local`` (mapped by the loader).

    Raises:
        InputError: Unreadable, not an SQLite file, truncated or damaged (names the file).
    """
    out = {}
    for table, (cols, n) in analysis_columns(path, rank).items():
        data = {}
        for k, v in cols.items():
            if isinstance(v, list):
                arr = np.empty(n, dtype=object)
                arr[:] = v
                v = arr
            data[k] = v
        out[table] = pd.DataFrame(data, index=range(n))
    return out


def analysis_columns(path: Path, rank: int | None) -> dict[str, tuple[dict[str, Any], int]]:
    """``analysis.db`` / ``communication_analyzer.db`` as columns: ``{table: (columns, rows)}``.

    Tables (only those with a source table in the file):

    - ``step_trace`` ← ``StepTraceTime``: every column, renamed to µs names (``computing_us``,
      ``communication_not_overlapped_us``, ``free_us``, ``overlapped_us``, ``bubble_us``, …,
      ``device_id``); ``step`` (int, -1 when empty), ``rank``, ``step_us`` = computing +
      communication not overlapped + free (NaN counted 0).
    - ``comm_ops`` ← ``CommAnalyzerTime`` (``Total*`` rows dropped): ``group``, ``step``, ``op_name``,
      ``op_type``, ``comm_kind``, ``start_us``, ``elapse_ms``, ``transit_ms``, ``wait_ms``,
      ``synchronization_ms``, ``idle_ms``, ``wait_ratio``, ``synchronization_ratio``
      (:func:`~advisor_chat.ingest.common.hccl_ratio`).
    - ``comm_bandwidth`` ← ``CommAnalyzerBandwidth`` (one row per package size there): one row per
      (step, op, group, transport): ``transit_size_mb``, ``transit_time_ms``, ``bandwidth_gbps``,
      ``large_packet_ratio`` (first non-null), ``packet_count`` (sum of ``count``),
      ``small_packet_count`` (sum of ``count`` where ``package_size`` ≤
      :data:`~advisor_chat.ingest.common.LARGE_PACKET_MB` of the transport).
    - ``comm_matrix`` ← ``CommAnalyzerMatrix``: ``src_local``/``dst_local`` (local ranks),
      ``transport``, ``transit_size_mb``, ``transit_time_ms``, ``bandwidth_gbps``, ``link_op_name``.

    Values come straight from sqlite3 rows (no DataFrame per table: thousands of ranks are read
    at load time, and pandas' per-frame cost dominated). Numeric columns are float64 arrays
    (non-numbers → NaN), text columns lists.

    Raises:
        InputError: Unreadable, not an SQLite file, truncated or damaged (names the file).
    """
    con = connect(path)
    try:
        return _analysis_columns(con, rank)
    except DB_ERRORS as exc:
        raise corrupt(path, exc) from exc
    finally:
        con.close()


def _rows(con: sqlite3.Connection, table: str) -> dict[str, list[Any]]:
    """Every column of ``table`` as lists (one ``SELECT *``)."""
    cur = con.execute(f'SELECT * FROM "{table}"')
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    if not rows:
        return {n: [] for n in names}
    return {n: list(c) for n, c in zip(names, zip(*rows, strict=True), strict=True)}


def _f64(values: list[Any]) -> np.ndarray:
    """Values as float64 (None and non-numbers → NaN), like ``pd.to_numeric(errors='coerce')``."""
    try:
        return np.array(values, dtype="float64")
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(
            dtype="float64"
        )


def _infer(values: list[Any]) -> Any:
    """A column of unknown meaning: float64 when every value is a number or NULL, else the list."""
    if all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values):
        return np.array(values, dtype="float64")
    return values


def _keep(names: list[Any]) -> list[int]:
    """Indexes of the rows whose op name does not start with ``Total`` (summary rows)."""
    return [i for i, n in enumerate(names) if not str(n).startswith("Total")]


def _pick(cols: dict[str, list[Any]], idx: list[int]) -> dict[str, list[Any]]:
    if len(idx) == len(next(iter(cols.values()), [])):
        return cols
    return {k: [v[i] for i in idx] for k, v in cols.items()}


#: StepTraceTime column → canonical ``step_trace`` column.
_STEP_TRACE_NAMES = {
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


def _steps(keys: list[Any]) -> np.ndarray:
    """:func:`~advisor_chat.ingest.common.step_from_key` of each key (parsed once per distinct key)."""
    known = {k: step_from_key(k) for k in set(keys)}
    return np.array([known[k] for k in keys], dtype="int64")


def _null(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _analysis_columns(
    con: sqlite3.Connection, rank: int | None
) -> dict[str, tuple[dict[str, Any], int]]:
    out: dict[str, tuple[dict[str, Any], int]] = {}
    tabs = tables_of(con)
    if "StepTraceTime" in tabs:
        c = _rows(con, "StepTraceTime")
        n = len(next(iter(c.values()), []))
        st: dict[str, Any] = {}
        for name, values in c.items():
            new = _STEP_TRACE_NAMES.get(name, name)
            if name == "step":
                st[new] = np.array(
                    [step_from_key(x) if x not in (None, "") else -1 for x in values],
                    dtype="int64",
                )
            elif new in _STEP_TRACE_NAMES.values():
                st[new] = _f64(values)
            else:
                st[new] = _infer(values)
        st["rank"] = rank
        for col in ("computing_us", "communication_not_overlapped_us", "free_us"):
            if col not in st:
                raise sqlite3.DatabaseError(f"StepTraceTime has no column {col[:-3]}")
        st["step_us"] = (
            np.nan_to_num(st["computing_us"])
            + np.nan_to_num(st["communication_not_overlapped_us"])
            + np.nan_to_num(st["free_us"])
        )
        out["step_trace"] = (st, n)
    if "CommAnalyzerTime" in tabs:
        c = _rows(con, "CommAnalyzerTime")
        c = _pick(c, _keep(c["hccl_op_name"]))
        names = c["hccl_op_name"]
        wait = _f64(c["wait_time"])
        transit = _f64(c["transit_time"])
        sync = _f64(c["synchronization_time"])
        steps = c.get("step") or [""] * len(names)
        ops: dict[str, Any] = {
            "rank": rank,
            "group": [str(g) for g in c["group_name"]],
            "step": _steps(steps),
            "op_name": names,
            "op_type": [comm_op_type(x) for x in names],
            "comm_kind": c["type"] if "type" in c else [comm_kind_of(x) for x in names],
            "start_us": _f64(c["start_timestamp"]),
            "elapse_ms": _f64(c["elapse_time"]),
            "transit_ms": transit,
            "wait_ms": wait,
            "synchronization_ms": sync,
            "idle_ms": _f64(c["idle_time"]),
            "wait_ratio": hccl_ratio(wait, transit),
            "synchronization_ratio": hccl_ratio(sync, transit),
        }
        out["comm_ops"] = (ops, len(names))
    if "CommAnalyzerBandwidth" in tabs:
        c = _rows(con, "CommAnalyzerBandwidth")
        c = _pick(c, _keep(c["hccl_op_name"]))
        bw = _bandwidth_columns(c, rank)
        if bw[1]:
            out["comm_bandwidth"] = bw
    if "CommAnalyzerMatrix" in tabs:
        c = _rows(con, "CommAnalyzerMatrix")
        c = _pick(c, _keep(c["hccl_op_name"]))
        n = len(c["hccl_op_name"])
        steps = c.get("step") or [""] * n
        mx: dict[str, Any] = {
            "group": [str(g) for g in c["group_name"]],
            "step": _steps(steps),
            "op_name": c["hccl_op_name"],
            "src_local": _f64(c["src_rank"]),
            "dst_local": _f64(c["dst_rank"]),
            "transport": c["transport_type"],
            "transit_size_mb": _f64(c["transit_size"]),
            "transit_time_ms": _f64(c["transit_time"]),
            "bandwidth_gbps": _f64(c["bandwidth"]),
            "link_op_name": c.get("op_name", ""),
            "rank": rank,
        }
        out["comm_matrix"] = (mx, n)
    return out


def _bandwidth_columns(c: dict[str, list[Any]], rank: int | None) -> tuple[dict[str, Any], int]:
    """CommAnalyzerBandwidth rows → one row per (step, op, group, transport), as :func:`_band_rows`.

    Groups in order of first appearance; sizes, times, bandwidth and large-packet ratio are the
    group's first non-null value; ``packet_count`` sums ``count``, ``small_packet_count`` sums it
    over the rows whose ``package_size`` is at most the transport's large-packet limit.
    """
    n = len(c["hccl_op_name"])
    steps = c.get("step") or [""] * n
    size = _f64(c["package_size"])
    count = _f64(c["count"])
    firsts = ("transit_size", "transit_time", "bandwidth", "large_packet_ratio")
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for i in range(n):
        tr = c["transport_type"][i]
        key = (steps[i], c["hccl_op_name"][i], c["group_name"][i], tr)
        g = groups.get(key)
        if g is None:
            g = groups[key] = [None] * len(firsts) + [0.0, 0.0]
        for j, col in enumerate(firsts):
            if _null(g[j]) and not _null(c[col][i]):
                g[j] = c[col][i]
        cnt = count[i]
        if cnt == cnt:
            g[4] += cnt
            limit = LARGE_PACKET_MB.get(tr) if isinstance(tr, str) else None
            if limit is not None and size[i] <= limit:
                g[5] += cnt
    keys = list(groups)
    vals = list(groups.values())
    cols: dict[str, Any] = {
        "rank": rank,
        "group": [str(k[2]) for k in keys],
        "step": np.array([step_from_key(k[0]) for k in keys], dtype="int64"),
        "op_name": [k[1] for k in keys],
        "transport": [k[3] for k in keys],
        "transit_size_mb": _f64([v[0] for v in vals]),
        "transit_time_ms": _f64([v[1] for v in vals]),
        "bandwidth_gbps": _f64([v[2] for v in vals]),
        "large_packet_ratio": _f64([v[3] for v in vals]),
        "small_packet_count": np.array([v[5] for v in vals], dtype="float64"),
        "packet_count": np.array([v[4] for v in vals], dtype="float64"),
    }
    return cols, len(keys)
