"""Readers for the text export of one Ascend PyTorch Profiler rank folder (``*_ascend_pt``).

Files read (``ASCEND_PROFILER_OUTPUT/`` unless noted; reference §1):

- ``step_trace_time.csv`` → ``step_trace`` (µs; 2023 header without ``Preparing``, 2024/25 with it,
  newest with a leading ``Device_id``).
- ``kernel_details.csv`` → ``kernels`` (µs; ``Start Time(us)`` with trailing TAB, quoted or not;
  ``Block Dim``/``Block Num``; ``Step Id``/``Step ID``; Level0 keeps only a few columns).
- ``op_statistic.csv`` → ``op_statistic``.
- ``communication.json`` → ``comm_ops`` (ms) and ``comm_bandwidth`` (MB, ms, GB/s); ``Total Op Info``
  entries skipped; step keys ``step{N}`` or ``step``.
- ``communication_matrix.json`` → ``comm_matrix`` with *local* ranks (mapped to global by the loader).
- ``memory_record.csv`` → ``memory`` (MB).
- ``trace_view.json`` → ``host_dispatch`` (streamed, :mod:`advisor_chat.ingest.trace`).
- ``profiler_info_{rank}.json``, ``profiler_metadata.json`` (folder root) → ``meta`` and groups.
"""

from __future__ import annotations

import operator
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from advisor_chat.ingest.common import (
    LARGE_PACKET_MB,
    clean_str,
    comm_kind_of,
    comm_op_type,
    infer_column,
    num,
    read_columns,
    read_json,
    step_col,
    step_from_key,
)

STEP_TRACE_COLUMNS = {
    "Computing": "computing_us",
    "Communication(Not Overlapped)": "communication_not_overlapped_us",
    "Overlapped": "overlapped_us",
    "Communication": "communication_us",
    "Free": "free_us",
    "Stage": "stage_us",
    "Bubble": "bubble_us",
    "Communication(Not Overlapped and Exclude Receive)": "communication_not_overlapped_exclude_receive_us",
    "Preparing": "preparing_us",
}


#: Columns without which a file of that kind is refused (after header aliases).
STEP_TRACE_REQUIRED = ["Computing", "Communication(Not Overlapped)", "Free"]
OP_STATISTIC_REQUIRED = ["OP Type", "Count", "Total Time(us)"]
MEMORY_REQUIRED = ["Component", "Timestamp(us)"]


def step_trace_frame(df: Any, rank: int | None) -> pd.DataFrame:
    """Map a step_trace_time-style table (DataFrame or :class:`Columns`) to ``step_trace`` columns."""
    return _frame(*step_trace_columns(df, rank))


def step_trace_columns(df: Any, rank: Any) -> tuple[dict[str, Any], int]:
    """Like :func:`step_trace_frame` but returns (columns, rows) without building a DataFrame.

    ``rank`` is a scalar or one value per row (several files' columns concatenated).
    """
    idx = range(len(df))
    out: dict[str, Any] = {"rank": rank, "step": step_col(df.get("Step"), idx)}
    for src, dst in STEP_TRACE_COLUMNS.items():
        out[dst] = np.asarray(num(df.get(src), idx), dtype="float64")
    out["step_us"] = (
        np.nan_to_num(out["computing_us"])
        + np.nan_to_num(out["communication_not_overlapped_us"])
        + np.nan_to_num(out["free_us"])
    )
    out["device_id"] = np.asarray(num(df.get("Device_id"), idx), dtype="float64")
    return out, len(idx)


def read_step_trace(path: Path, rank: int | None) -> pd.DataFrame:
    """``step_trace_time.csv`` → ``step_trace`` rows (µs)."""
    return step_trace_frame(read_columns(path, required=STEP_TRACE_REQUIRED), rank)


def _frame(out: dict[str, Any], n: int) -> pd.DataFrame:
    """DataFrame from columns; lists become object arrays (no per-column string-dtype inference)."""
    cols = {}
    for k, v in out.items():
        if isinstance(v, pd.Series):
            v = v.to_numpy()
        elif isinstance(v, list):
            arr = np.empty(len(v), dtype=object)
            arr[:] = v
            v = arr
        cols[k] = v
    return pd.DataFrame(cols, index=range(n))


def _na(col: Any, fill: str) -> Any:
    if isinstance(col, list):
        return [fill if v is None else v for v in col]
    return col.fillna(fill)


def kernels_frame(df: Any, rank: int | None) -> pd.DataFrame:
    """kernel_details / op_summary columns (kernel_details names) → ``kernels`` rows.

    Columns follow :data:`KERNEL_COLUMNS` (the same map the Arrow reader uses); a column the
    export lacks is all-null (NaN / None).
    """
    idx = range(len(df))
    g = df.get
    out: dict[str, Any] = {"rank": rank}
    for src, (dst, kind) in KERNEL_COLUMNS.items():
        if kind == "step":
            out[dst] = step_col(g(src), idx)
        elif kind == "num":
            out[dst] = num(g(src), idx)
        elif kind == "str_na":
            out[dst] = _na(clean_str(g(src), idx), "N/A")
        else:
            out[dst] = clean_str(g(src), idx)
    return _frame(out, len(idx))


def kernel_header_version(columns: list[str]) -> str:
    """A tag naming the kernel_details header generation (reference §1.6)."""
    cols = set(columns)
    if "cube_utilization(%)" in cols:
        return "2025-pipe-util" + ("+device_id" if "Device_id" in cols else "")
    if "Model ID" not in cols:
        return "level0"
    if "OP State" not in cols:
        return "2023"
    return "2025"


def read_kernels(path: Path, rank: int | None) -> tuple[pd.DataFrame, str]:
    """``kernel_details.csv`` → (``kernels`` rows, header version tag).

    Raises:
        InputError: See :func:`check_kernel_header` (checked before the whole file is read).
    """
    check_kernel_header(path)
    df = read_columns(path, required=["Name", "Start Time(us)", "Duration(us)"])
    return kernels_frame(df, rank), kernel_header_version(list(df.columns))


def read_op_statistic(path: Path, rank: int | None) -> pd.DataFrame:
    """``op_statistic.csv`` (or CANN ``op_statistic_*.csv``) → ``op_statistic`` rows."""
    return _frame(*op_statistic_columns(path, rank))


def op_statistic_columns(path: Path, rank: int | None) -> tuple[dict[str, Any], int]:
    """``op_statistic.csv`` → (``op_statistic`` columns, rows), no DataFrame built."""
    return op_statistic_from(read_columns(path, required=OP_STATISTIC_REQUIRED), rank)


def op_statistic_from(df: Any, rank: Any) -> tuple[dict[str, Any], int]:
    """Columns of ``op_statistic.csv`` (one file or several concatenated) → ``op_statistic`` columns.

    ``rank`` is a scalar or one value per row.
    """
    idx = range(len(df))
    g = df.get
    out = {
        "rank": rank,
        "op_type": clean_str(g("OP Type"), idx),
        "core_type": clean_str(g("Core Type"), idx),
        "count": num(g("Count"), idx),
        "total_us": num(g("Total Time(us)"), idx),
        "min_us": num(g("Min Time(us)"), idx),
        "avg_us": num(g("Avg Time(us)"), idx),
        "max_us": num(g("Max Time(us)"), idx),
        "ratio_pct": num(g("Ratio(%)"), idx),
    }
    return out, len(idx)


def read_memory(path: Path, rank: int | None) -> pd.DataFrame:
    """``memory_record.csv`` → ``memory`` rows (MB as written, 1024-based)."""
    return _frame(*memory_columns(path, rank))


def memory_columns(path: Path, rank: int | None) -> tuple[dict[str, Any], int]:
    """``memory_record.csv`` → (``memory`` columns, rows), no DataFrame built."""
    return memory_from(read_columns(path, required=MEMORY_REQUIRED), rank)


def memory_from(df: Any, rank: Any) -> tuple[dict[str, Any], int]:
    """Columns of ``memory_record.csv`` (one file or several concatenated) → ``memory`` columns.

    ``rank`` is a scalar or one value per row.
    """
    idx = range(len(df))
    g = df.get
    out = {
        "rank": rank,
        "timestamp_us": num(g("Timestamp(us)"), idx),
        "component": clean_str(g("Component"), idx),
        "allocated_mb": num(g("Total Allocated(MB)"), idx),
        "reserved_mb": num(g("Total Reserved(MB)"), idx),
        "active_mb": num(g("Total Active(MB)"), idx),
    }
    return out, len(idx)


_NAN = float("nan")


def _f(d: dict[str, Any], key: str) -> float:
    v = d.get(key)
    if v.__class__ is float:
        return v  # type: ignore[no-any-return]
    if v is None:
        return _NAN
    try:
        return float(v)
    except (TypeError, ValueError):
        return _NAN


def _ratio(a: float, b: float) -> float:
    den = a + b
    return round(a / den, 4) if den > 1e-15 else 0.0


#: Column order of :func:`opinfo_tuples`' ``comm_ops`` tuples.
COMM_OPS_COLUMNS = (
    "rank",
    "group",
    "step",
    "op_name",
    "op_type",
    "comm_kind",
    "start_us",
    "elapse_ms",
    "transit_ms",
    "wait_ms",
    "synchronization_ms",
    "idle_ms",
    "wait_ratio",
    "synchronization_ratio",
)
#: Column order of :func:`opinfo_tuples`' ``comm_bandwidth`` tuples.
COMM_BANDWIDTH_COLUMNS = (
    "rank",
    "group",
    "step",
    "op_name",
    "transport",
    "transit_size_mb",
    "transit_time_ms",
    "bandwidth_gbps",
    "large_packet_ratio",
    "small_packet_count",
    "packet_count",
)


def opinfo_tuples(
    op_key: str, info: dict[str, Any], rank: int | None, step: int, kind: str | None
) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    """One OPINFO dict of communication.json → (``comm_ops`` row, ``comm_bandwidth`` rows) as tuples.

    Columns in the order of :data:`COMM_OPS_COLUMNS` / :data:`COMM_BANDWIDTH_COLUMNS` (tuples, not
    dicts: a 1024-rank folder has ~100k of these rows). Times in ms as in the file; a missing or
    non-numeric value is NaN; ratios are computed from wait/sync and transit when the file lacks them.
    """
    op_name, _, group = op_key.partition("@")
    t = info.get("Communication Time Info", {}) or {}
    elapse, transit, wait = (
        _f(t, "Elapse Time(ms)"),
        _f(t, "Transit Time(ms)"),
        _f(t, "Wait Time(ms)"),
    )
    sync = _f(t, "Synchronization Time(ms)")
    wr = t.get("Wait Time Ratio")
    sr = t.get("Synchronization Time Ratio")
    op_row = (
        rank,
        group,
        step,
        op_name,
        comm_op_type(op_name),
        kind or comm_kind_of(op_name),
        _f(t, "Start Timestamp(us)"),
        elapse,
        transit,
        wait,
        sync,
        _f(t, "Idle Time(ms)"),
        float(wr) if wr is not None else _ratio(wait, transit),
        float(sr) if sr is not None else _ratio(sync, transit),
    )
    bw_rows = []
    for transport, b in (info.get("Communication Bandwidth Info", {}) or {}).items():
        if not isinstance(b, dict):
            continue
        dist = b.get("Size Distribution") or {}
        packets = 0.0
        small = 0.0
        limit = LARGE_PACKET_MB.get(transport)
        for size, val in dist.items():
            try:
                cnt = float(val[0])
                sz = float(size)
            except (TypeError, ValueError, IndexError):
                continue
            packets += cnt
            if limit is not None and sz <= limit:
                small += cnt
        size_mb, time_ms = _f(b, "Transit Size(MB)"), _f(b, "Transit Time(ms)")
        bw = b.get("Bandwidth(GB/s)")
        bw_rows.append(
            (
                rank,
                group,
                step,
                op_name,
                transport,
                size_mb,
                time_ms,
                float(bw)
                if bw is not None
                else (round(size_mb / time_ms, 4) if time_ms > 1e-15 else 0.0),
                _f(b, "Large Packet Ratio"),
                small if dist else _NAN,
                packets if dist else _NAN,
            )
        )
    return op_row, bw_rows


def opinfo_rows(
    op_key: str, info: dict[str, Any], rank: int | None, step: int, kind: str | None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One OPINFO dict of communication.json → (comm_ops row, comm_bandwidth rows) as dicts."""
    o, b = opinfo_tuples(op_key, info, rank, step, kind)
    return dict(zip(COMM_OPS_COLUMNS, o, strict=True)), [
        dict(zip(COMM_BANDWIDTH_COLUMNS, r, strict=True)) for r in b
    ]


def comm_frames(data: dict[str, Any], rank: int | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """communication.json content → (``comm_ops``, ``comm_bandwidth``); ``Total Op Info`` skipped."""
    ops, bws = comm_rows(data, rank)
    return pd.DataFrame(ops), pd.DataFrame(bws)


def comm_rows(
    data: dict[str, Any], rank: int | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """communication.json content → (``comm_ops`` rows, ``comm_bandwidth`` rows) as dicts."""
    ops, bws = comm_tuples(data, rank)
    return [dict(zip(COMM_OPS_COLUMNS, o, strict=True)) for o in ops], [
        dict(zip(COMM_BANDWIDTH_COLUMNS, b, strict=True)) for b in bws
    ]


def comm_tuples(
    data: dict[str, Any], rank: int | None
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """communication.json content → (``comm_ops``, ``comm_bandwidth``) rows as tuples.

    Columns in the order of :data:`COMM_OPS_COLUMNS` / :data:`COMM_BANDWIDTH_COLUMNS`; the
    ``Total Op Info`` entries are skipped. Reads the PyTorch layout ``{step: {p2p|collective: {op@group:
    OPINFO}}}`` and msprof's flat ``{step: {op@group: OPINFO}}``.
    """
    ops: list[tuple[Any, ...]] = []
    bws: list[tuple[Any, ...]] = []
    for step_key, sections in data.items():
        if not isinstance(sections, dict):
            continue
        step = step_from_key(step_key)
        for kind, entries in sections.items():
            if not isinstance(entries, dict):
                continue
            if kind not in ("p2p", "collective"):
                # msprof analyze/communication.json is flat: {"op@hash": OPINFO}
                if kind.startswith("Total") or "Communication Time Info" not in entries:
                    continue
                o, b = opinfo_tuples(kind, entries, rank, step, None)
                ops.append(o)
                bws.extend(b)
                continue
            for op_key, info in entries.items():
                if op_key.startswith("Total") or not isinstance(info, dict):
                    continue
                o, b = opinfo_tuples(op_key, info, rank, step, kind)
                ops.append(o)
                bws.extend(b)
    return ops, bws


def load_json(path: Path) -> Any:
    """Parse a JSON file with orjson (UTF-8, BOM tolerated).

    Raises:
        InputError: Unreadable or invalid JSON (the message of
            :func:`~advisor_chat.ingest.common.read_json`, which re-reads the file to say where).
    """
    return read_json(path)  # issue-14 hook: common.read_json is orjson + guards + shape check


def read_communication(path: Path, rank: int | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``communication.json`` → (``comm_ops``, ``comm_bandwidth``)."""
    return comm_frames(load_json(path), rank)


#: Column order of :meth:`LinkColumns.frame` (local ranks: ``src_local``/``dst_local``).
MATRIX_COLUMNS = (
    "group",
    "step",
    "op_name",
    "src_local",
    "dst_local",
    "transport",
    "transit_size_mb",
    "transit_time_ms",
    "bandwidth_gbps",
    "link_op_name",
    "rank",
)


def read_matrix(path: Path, rank: int | None) -> pd.DataFrame:
    """``communication_matrix.json`` (2023 or 2024+ format) → link rows with local ranks."""
    acc = LinkColumns()
    acc.add_file(load_json(path), rank)
    return acc.frame()


def matrix_file_rows(data: Any, rank: int | None) -> list[dict[str, Any]]:
    """Content of ``communication_matrix.json`` → link rows (dicts) with local ranks."""
    acc = LinkColumns()
    acc.add_file(data, rank)
    return acc.frame().to_dict("records")  # type: ignore[return-value]


#: The fields of one link of ``communication_matrix.json``, in the order :class:`LinkColumns` keeps.
_LINK_FIELDS = (
    "Transport Type",
    "Transit Size(MB)",
    "Transit Time(ms)",
    "Bandwidth(GB/s)",
    "Op Name",
)
_LINK_GET = operator.itemgetter(*_LINK_FIELDS)
#: The same without ``Op Name``, which the ``*-total`` entries of the file lack.
_LINK_GET_NO_NAME = operator.itemgetter(*_LINK_FIELDS[:4])
#: An operator's link keys joined with ``|``: every one ``"{src}-{dst}"`` in plain digits.
_LINK_KEYS = re.compile(r"[0-9]{1,18}-[0-9]{1,18}(?:\|[0-9]{1,18}-[0-9]{1,18})*")
#: The link fields as Arrow types: a batch's value tuples become one struct array in one call.
_LINK_TYPE = pa.struct(
    [(f, pa.string() if f in ("Transport Type", "Op Name") else pa.float64()) for f in _LINK_FIELDS]
)
#: pandas' default string dtype (``str``), the one a column of Python strings gets.
_STR = pd.StringDtype("pyarrow", na_value=np.nan)


def _floats(values: tuple[Any, ...] | list[Any]) -> np.ndarray:
    """Link field values → float64, as :func:`_f` converts one (``None`` or non-numeric → NaN)."""
    try:
        return np.asarray(values, dtype="float64")
    except (TypeError, ValueError):
        return np.fromiter((_f({"v": v}, "v") for v in values), dtype="float64", count=len(values))


class LinkColumns:
    """Link rows of ``communication_matrix.json`` files, collected per operator (:data:`MATRIX_COLUMNS`).

    The fields every link of an operator shares (group, step, operator name, rank) are kept once
    per operator and repeated when the frame is built. The links themselves are kept as the
    operator's keys joined into one string and one tuple of the file's values per link
    (:data:`_LINK_FIELDS`, taken by ``operator.itemgetter``), and turned into numbers once per
    frame: a 1024-rank folder has ~3·10^5 link rows, and a Python statement per link was most of
    the matrix read. An operator whose keys are not all ``"{src}-{dst}"`` in digits, or one of
    whose links is not an object with every field, goes through the per-link path, which skips
    the links it cannot read (as msprof-analyze does).
    """

    __slots__ = ("_group", "_keys", "_n", "_op", "_rank", "_step", "_vals")

    def __init__(self) -> None:
        self._group: list[str] = []
        self._step: list[int] = []
        self._op: list[str] = []
        self._rank: list[int | None] = []
        self._n: list[int] = []
        self._keys: list[str] = []
        self._vals: list[tuple[Any, ...]] = []

    def __len__(self) -> int:
        return len(self._vals)

    def add_file(self, data: Any, rank: int | None) -> int:
        """Add the links of one file's content (``{step: {kind: {op@group: {"s-d": LINK}}}}``).

        Returns:
            Rows added. ``Total*`` entries and non-object sections are skipped.
        """
        before = len(self._vals)
        if not isinstance(data, dict):
            return 0
        for step_key, sections in data.items():
            if not isinstance(sections, dict):
                continue
            step = step_from_key(step_key)
            for _kind, entries in sections.items():
                if not isinstance(entries, dict):
                    continue
                for op_key, links in entries.items():
                    if op_key.startswith("Total") or not isinstance(links, dict):
                        continue
                    self.add_links(links, op_key, step, rank)
        return len(self._vals) - before

    def add_links(self, links: dict[str, Any], op_key: str, step: int, rank: int | None) -> int:
        """Add one operator's LINKS dict; returns the rows added.

        A link key that is not ``"src-dst"`` (integers) or whose value is not an object is
        skipped. Bandwidth is the file's ``Bandwidth(GB/s)``, else transit size (MB) / transit
        time (ms) rounded to 4 decimals (0.0 for a zero time); a missing transport or operator
        name is ``""``, a missing or non-numeric size or time NaN.
        """
        if not links:
            return 0
        try:
            keys = "|".join(links)
        except TypeError:  # a key that is not a string: the per-link path
            keys = ""
        vals: list[tuple[Any, ...]] | None = None
        if keys.count("|") == len(links) - 1 and _LINK_KEYS.fullmatch(keys):
            try:
                vals = list(map(_LINK_GET, links.values()))
            except (KeyError, TypeError):
                try:
                    vals = [(*v, "") for v in map(_LINK_GET_NO_NAME, links.values())]
                except (KeyError, TypeError):
                    vals = None
        if vals is None:
            keys, vals = self._checked(links)
            if not vals:
                return 0
        op_name, _, group = op_key.partition("@")
        self._keys.append(keys)
        self._vals += vals
        self._group.append(group)
        self._step.append(step)
        self._op.append(op_name)
        self._rank.append(rank)
        self._n.append(len(vals))
        return len(vals)

    @staticmethod
    def _checked(links: dict[Any, Any]) -> tuple[str, list[tuple[Any, ...]]]:
        """The per-link path: the links that can be read, as normalized keys and value tuples."""
        keys: list[str] = []
        vals: list[tuple[Any, ...]] = []
        for link, v in links.items():
            if v.__class__ is not dict:
                continue
            a, _, b = str(link).partition("-")
            try:
                s_, d_ = int(a), int(b)
            except ValueError:
                continue
            keys.append(f"{s_}-{d_}")
            vals.append(
                (
                    v.get("Transport Type", ""),
                    v.get("Transit Size(MB)"),
                    v.get("Transit Time(ms)"),
                    v.get("Bandwidth(GB/s)"),
                    v.get("Op Name", ""),
                )
            )
        return "|".join(keys), vals

    def frame(self) -> pd.DataFrame:
        """The rows as one DataFrame with the columns of :data:`MATRIX_COLUMNS`.

        The link values become one Arrow struct array (strings and floats converted in C++);
        values Arrow does not take as they are (a number written as a string, a boolean, an
        integer beyond 2^53) are converted as :func:`_f` does, column by column.
        """
        n = np.asarray(self._n, dtype=np.int64)
        op_of_row = np.repeat(np.arange(len(n)), n)

        def per_op(values: list[Any]) -> Any:
            if all(v.__class__ is str for v in values):  # group, operator name: Arrow strings
                return pd.array(pa.array(values, pa.string()).take(op_of_row), dtype=_STR)
            return np.repeat(infer_column(values), n)

        ends = (  # the keys are digits (checked when added): "s-d|s-d" -> s, d, s, d
            np.fromstring("-".join(self._keys).replace("|", "-"), dtype=np.int64, sep="-")
            if self._keys
            else np.empty(0, dtype=np.int64)
        )
        try:
            links = pa.array(self._vals, type=_LINK_TYPE)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            links = None
        if links is not None:
            transport = pd.array(links.field(0), dtype=_STR)
            size_mb, time_ms, bw_gbps = (
                links.field(i).to_numpy(zero_copy_only=False, writable=True) for i in (1, 2, 3)
            )
            link_op = pd.array(links.field(4), dtype=_STR)
        else:
            transport_, size, time_, bw, lop = zip(*self._vals, strict=True)
            transport, link_op = infer_column(list(transport_)), infer_column(list(lop))
            size_mb, time_ms, bw_gbps = _floats(size), _floats(time_), _floats(bw)
        missing = np.flatnonzero(np.isnan(bw_gbps))
        for i in missing.tolist():  # the file lacks the bandwidth: size / time, as msprof-analyze
            t = float(time_ms[i])
            bw_gbps[i] = round(float(size_mb[i]) / t, 4) if t > 1e-15 else 0.0
        cols = {
            "group": per_op(self._group),
            "step": per_op(self._step),
            "op_name": per_op(self._op),
            "src_local": ends[0::2],
            "dst_local": ends[1::2],
            "transport": transport,
            "transit_size_mb": size_mb,
            "transit_time_ms": time_ms,
            "bandwidth_gbps": bw_gbps,
            "link_op_name": link_op,
            "rank": per_op(self._rank),
        }
        return pd.DataFrame(cols)


def parse_profiler_info(info: dict[str, Any]) -> dict[str, Any]:
    """profiler_info json → meta fields (versions, level, config)."""
    cfg = info.get("config") or {}
    exp = cfg.get("experimental_config") or {}
    export = exp.get("_export_type")
    if isinstance(export, list):
        export = ",".join(str(x) for x in export)
    return {
        "cann_version": info.get("cann_version"),
        "torch_npu_version": info.get("torch_npu_version"),
        "profiler_level": exp.get("_profiler_level"),
        "export_setting": export,
        "config": cfg,
        "rank_id_in_file": info.get("rank_id"),
        "collection_end_ns": (info.get("end_info") or {}).get("collectionTimeEnd")
        if isinstance(info.get("end_info"), dict)
        else None,
    }


#: Environment-variable names a job records in its own metadata (``prof.add_metadata_json``):
#: torch_npu's ENV_VARIABLES list is fixed and lacks e.g. HCCL_EXEC_TIMEOUT.
_USER_ENV = re.compile(
    r"^(HCCL|ASCEND|PYTORCH_NPU|TASK_QUEUE|CPU_AFFINITY|ACL|INF_NAN)_[A-Z0-9_]+$"
)


def parse_metadata(md: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """profiler_metadata.json → (meta fields, group entries).

    ``meta["env"]``: ``ENV_VARIABLES`` (torch_npu's fixed list), completed by environment
    variables the job recorded in its own metadata: any top-level object whose keys are such
    names (``HCCL_*``, ``ASCEND_*``, ``PYTORCH_NPU_*`` ...), for the names ``ENV_VARIABLES``
    leaves unset or empty.
    """
    meta: dict[str, Any] = {}
    env = md.get("ENV_VARIABLES")
    if isinstance(env, str):
        try:
            import json

            env = json.loads(env)
        except ValueError:
            env = None
    if isinstance(env, dict):
        meta["env"] = {str(k): str(v) for k, v in env.items()}
    for key, val in md.items():
        if key == "ENV_VARIABLES" or not isinstance(val, dict):
            continue
        user = {str(k): str(v) for k, v in val.items() if _USER_ENV.match(str(k)) and str(v) != ""}
        if user:
            merged = meta.setdefault("env", {})
            for k, v in user.items():
                if not merged.get(k):
                    merged[k] = v
    dist = md.get("distributed_args")
    if isinstance(dist, str):
        try:
            import json

            dist = json.loads(dist)
        except ValueError:
            dist = None
    if isinstance(dist, dict):
        from advisor_chat.ingest.guard import count_or_none

        problems: list[str] = meta.setdefault("metadata_problems", [])
        for key, field in (
            ("world_size", "world_size"),
            ("tp_size", "tensor_model_parallel_size"),
            ("pp_size", "pipeline_model_parallel_size"),
            ("dp_size", "data_parallel_size"),
        ):  # issue-14 hook: a size that is not a positive integer is dropped and reported
            meta[key] = count_or_none(dist.get(field), field, problems)
        meta["distributed_args"] = dist
    groups: list[dict[str, Any]] = []
    pgi = md.get("parallel_group_info")
    if isinstance(pgi, str):
        try:
            import json

            pgi = json.loads(pgi)
        except ValueError:
            pgi = None
    if isinstance(pgi, dict):
        for comm_name, g in pgi.items():
            if not isinstance(g, dict):
                continue
            from advisor_chat.ingest.guard import rank_list

            ranks_or_none = rank_list(g.get("global_ranks", []) or [])
            if ranks_or_none is None:  # issue-14 hook: reported by guard.check_units
                meta.setdefault("metadata_problems", []).append(
                    f"parallel_group_info[{str(comm_name)[:40]!r}].global_ranks is not a list of ranks"
                )
                continue
            ranks = sorted(ranks_or_none)
            groups.append(
                {
                    "comm_name": str(comm_name),
                    "group_name": str(g.get("group_name", "")),
                    "group_rank": g.get("group_rank"),
                    "global_ranks": ranks,
                }
            )
    return meta, groups


# ----------------------------------------------------------------------------- kernels with Arrow

#: kernel_details column → (canonical column, kind): "num" float64, "str" string, "str_na" string
#: with ``N/A`` for a missing value, "step" int. Both readers (:func:`kernels_frame`, Arrow) use it.
#: The PMU ratios are those of the PipeUtilization metrics set (reference §1.6): the share of a
#: kernel's AI Core / AI Vector time each pipeline (cube MAC, vector, scalar, MTE1/2/3 memory
#: moves, fixpipe) is busy, and the instruction-cache miss rate.
KERNEL_COLUMNS = {
    "Step Id": ("step", "step"),
    "Name": ("name", "str"),
    "Type": ("op_type", "str_na"),
    "Accelerator Core": ("accelerator_core", "str_na"),
    "Start Time(us)": ("start_us", "num"),
    "Duration(us)": ("duration_us", "num"),
    "Wait Time(us)": ("wait_us", "num"),
    "Block Dim": ("block_dim", "num"),
    "Input Shapes": ("input_shapes", "str"),
    "Input Data Types": ("input_dtypes", "str"),
    "Input Formats": ("input_formats", "str"),
    "Output Shapes": ("output_shapes", "str"),
    "OP State": ("op_state", "str"),
    "Stream ID": ("stream_id", "num"),
    "Model ID": ("model_id", "num"),
    "HF32 Eligible": ("hf32_eligible", "str"),
    "aic_mac_ratio": ("aic_mac_ratio", "num"),
    "aic_scalar_ratio": ("aic_scalar_ratio", "num"),
    "aic_mte2_ratio": ("aic_mte2_ratio", "num"),
    "aic_fixpipe_ratio": ("aic_fixpipe_ratio", "num"),
    "aic_icache_miss_rate": ("aic_icache_miss_rate", "num"),
    "aiv_vec_ratio": ("aiv_vec_ratio", "num"),
    "aiv_scalar_ratio": ("aiv_scalar_ratio", "num"),
    "aiv_mte2_ratio": ("aiv_mte2_ratio", "num"),
    "aiv_mte3_ratio": ("aiv_mte3_ratio", "num"),
    "aiv_icache_miss_rate": ("aiv_icache_miss_rate", "num"),
    "cube_utilization(%)": ("cube_utilization_pct", "num"),
    "Device_id": ("device_id", "num"),
}
_KERNEL_REQUIRED = ["Name", "Start Time(us)", "Duration(us)"]
#: Columns whose values must be numbers in the sampled first rows (:func:`guard.sniff_csv_body`).
_KERNEL_NUMERIC = ["Duration(us)"]


def _header_names(line: bytes) -> list[str]:
    import csv

    from advisor_chat.ingest.common import HEADER_ALIASES

    text = line.decode("utf-8", errors="replace").lstrip("\ufeff")
    row = next(csv.reader([text]), [])
    return [HEADER_ALIASES.get(h.strip(), h.strip()) for h in row]


def _arrow_col(col: Any, kind: str) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(col.type):
        col = col.cast(pa.string())
    if kind == "num" or kind == "step":
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
            s = pc.utf8_trim(pc.utf8_trim_whitespace(col.cast(pa.string())), '"')
            s = pc.if_else(pc.equal(s, ""), pa.scalar(None, pa.string()), s)
            try:
                col = s.cast(pa.float64())
            except pa.ArrowInvalid:  # a non-numeric value: per value, NaN where it does not parse
                col = pa.array(
                    [_flt(v) for v in s.to_pylist()], type=pa.float64(), from_pandas=True
                )
        arr = col.cast(pa.float64()).to_numpy(zero_copy_only=False)
        if kind == "step":
            return np.where(np.isnan(arr), -1, np.round(arr)).astype("int64")
        return arr
    s = col.cast(pa.string())
    s = pc.utf8_trim(pc.utf8_trim_whitespace(s), '"')
    if kind == "str_na":
        s = pc.fill_null(s, "N/A")
    return s


def _flt(v: Any) -> float:
    try:
        return float(v) if v is not None else float("nan")
    except (TypeError, ValueError):
        return float("nan")


def check_kernel_header(path: Path) -> str:
    """Read only the header line of ``kernel_details.csv``; return its version tag.

    Lets a lazy load fail at load time, as a full parse would, on a file without the required
    columns.

    Raises:
        InputError: Unreadable file, or ``Name`` / ``Start Time(us)`` / ``Duration(us)`` missing.
    """
    from advisor_chat.errors import InputError
    from advisor_chat.ingest.common import _check_required, unreadable
    from advisor_chat.ingest.guard import (
        SNIFF_BYTES,
        check_file,
        show_path,
        sniff_csv_body,
        sniff_csv_head,
    )

    # issue-14 hook: FIFO/device/symlink loop/size cap/binary data → InputError, never a hang
    size = check_file(path).st_size
    try:
        with path.open("rb") as fh:
            first = fh.read(SNIFF_BYTES)  # one read: the binary sniff and the header line
    except PermissionError as exc:
        raise unreadable(path) from exc
    except OSError as exc:
        shown = show_path(path)
        raise InputError(f"cannot read {shown}: {exc.strerror or exc}", path=shown) from exc
    sniff_csv_head(path, size, first)
    head = first.split(b"\n", 1)[0]
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    names = _header_names(head.rstrip(b"\r"))
    _check_required(path, names, _KERNEL_REQUIRED)
    sniff_csv_body(path, names, _KERNEL_NUMERIC, size)
    return kernel_header_version(names)


def read_kernels_arrow(files: list[tuple[Path, int | None]]) -> tuple[pd.DataFrame, list[str]]:
    """Several ranks' ``kernel_details.csv`` → one ``kernels`` table, parsed by Arrow.

    Files with the same header line are joined into one CSV text (each body line prefixed with
    its rank) and parsed once (Arrow's multithreaded reader); ``N/A``/empty → null; quotes and
    whitespace (the trailing TAB of ``Start Time(us)``) are stripped in Arrow. Same values as
    :func:`read_kernels`. A file the joined parse cannot take (ragged rows, odd quoting) is read
    by :func:`read_kernels` on its own.

    Args:
        files: (path, rank) pairs.

    Returns:
        (``kernels`` rows in the order of ``files``, header version tag per file).

    Raises:
        InputError: A file is unreadable or lacks ``Name`` / ``Start Time(us)`` / ``Duration(us)``.
    """
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    from advisor_chat.ingest.common import _check_required, unreadable

    versions: list[str] = []
    groups: dict[bytes, list[tuple[int, bytes]]] = {}
    headers: dict[bytes, list[str]] = {}
    singles: dict[int, pd.DataFrame] = {}
    from advisor_chat.ingest.guard import check_file

    for i, (path, rank) in enumerate(files):
        check_file(path)  # issue-14 hook: FIFO/device/symlink loop/size cap → InputError
        check_kernel_header(path)  # bounded: header, then the first rows' plausibility
        try:
            raw = path.read_bytes()
        except PermissionError as exc:
            raise unreadable(path) from exc
        except OSError:
            raw = b""
        if raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        nl = raw.find(b"\n")
        head = (raw if nl < 0 else raw[:nl]).rstrip(b"\r")
        names = _header_names(head)
        _check_required(path, names, _KERNEL_REQUIRED)
        versions.append(kernel_header_version(names))
        body = b"" if nl < 0 else raw[nl + 1 :]
        if b'"' in head or rank is None or b"\n\n" in body or b"\r\n\r\n" in body:
            singles[i] = read_kernels(path, rank)[0]
            continue
        if body and not body.endswith(b"\n"):
            body += b"\n"
        prefix = b"%d," % rank
        if body:
            body = prefix + body.replace(b"\n", b"\n" + prefix)[: -len(prefix)]
        headers[head] = names
        groups.setdefault(head, []).append((i, body))
    parts: dict[int, pd.DataFrame] = dict(singles)
    for head, items in groups.items():
        names = ["__rank__", *headers[head]]
        blob = b"".join(b for _, b in items)
        n_rows = [b.count(b"\n") for _, b in items]
        table = None
        if blob:
            try:
                table = pacsv.read_csv(
                    io.BytesIO(blob),
                    read_options=pacsv.ReadOptions(column_names=names, block_size=32 << 20),
                    parse_options=pacsv.ParseOptions(newlines_in_values=False),
                    convert_options=pacsv.ConvertOptions(
                        null_values=["N/A", "NA", "n/a", ""],
                        strings_can_be_null=True,
                        column_types={"__rank__": pa.int64()},
                        include_columns=[
                            n for n in names if n == "__rank__" or n in KERNEL_COLUMNS
                        ],
                    ),
                )
            except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError, ValueError):
                table = None
            if table is not None and any(pa.types.is_binary(f.type) for f in table.schema):
                table = None  # bytes that are not UTF-8: the per-file reader names the file
        if table is None or table.num_rows != sum(n_rows):
            for i, _ in items:
                parts[i] = read_kernels(*files[i])[0]
            continue
        n = table.num_rows
        out: dict[str, Any] = {"rank": table.column("__rank__").to_numpy()}
        for src, (dst, kind) in KERNEL_COLUMNS.items():
            if src in table.column_names:
                out[dst] = _arrow_col(table.column(src).combine_chunks(), kind)
            elif kind == "step":
                out[dst] = np.full(n, -1, dtype="int64")
            elif kind == "num":
                out[dst] = np.full(n, np.nan)
            else:
                out[dst] = pa.nulls(n, pa.string()) if kind == "str" else pa.array(["N/A"] * n)
        order = ["rank", *[d for d, _ in KERNEL_COLUMNS.values()]]
        df = pa.table({c: out[c] for c in order}).to_pandas(
            types_mapper={pa.string(): pd.StringDtype(), pa.large_string(): pd.StringDtype()}.get
        )
        cols = ["rank", "step", *[c for c in df.columns if c not in ("rank", "step")]]
        df = df[cols]
        bounds = np.cumsum([0, *n_rows])
        for j, (i, _) in enumerate(items):
            parts[i] = df.iloc[bounds[j] : bounds[j + 1]]
    frames = [parts[i] for i in range(len(files)) if i in parts and not parts[i].empty]
    if not frames:
        return pd.DataFrame(), versions
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(
        drop=True
    ), versions
