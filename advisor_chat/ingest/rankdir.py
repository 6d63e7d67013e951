"""``read_rank_dir``: parse one ``*_ascend_pt`` / ``*_ascend_ms`` folder into a picklable :class:`RankData`.

Used by the process pool of :func:`advisor_chat.ingest.loader.load_profile` (and by a distributed
engine later): it takes a path, reads only files inside it, and returns plain data.

Rank id, in order of preference (never ``Device_id``):

1. the number in ``profiler_info_{rank}.json`` (what msprof-analyze uses);
2. ``rank_id`` inside that json (string or int);
3. the number in ``ascend_pytorch_profiler_{rank}.db`` / ``ascend_mindspore_profiler_{rank}.db``.

Source choice per table when a folder holds both text and DB files (newest torch_npu writes both):
kernels, host_dispatch and memory come from the DB (exact ns times, connection ids, no need to stream
``trace_view.json``); step_trace and communication come from the CSV/JSON when present, else from
``analysis.db`` / ``communication_analyzer.db``.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from advisor_chat.errors import InputError
from advisor_chat.ingest import db as dbr
from advisor_chat.ingest import mindspore, text
from advisor_chat.ingest.common import (
    MAX_RANK_ID,
    Columns,
    RankData,
    cut_row_warning,
    infer_column,
    num,
    read_columns,
    read_json,
)
from advisor_chat.ingest.detect import is_rank_dir, loose_name
from advisor_chat.ingest.profile import DataWarning, TableSource
from advisor_chat.ingest.schema import check_repeated_kernels
from advisor_chat.ingest.trace import (
    TraceInvalid,
    read_aicore_freq,
    read_hccl_ops,
    read_host_dispatch,
    read_python_frames,
)

OUTPUT = "ASCEND_PROFILER_OUTPUT"
_INFO_RE = re.compile(r"^profiler_info_(\d+)\.json$")
#: ``rank_origin`` prefix of a rank id no cluster has (the folder is assigned one by order).
IMPLAUSIBLE = "implausible rank id "
_DB_RE = re.compile(r"^ascend_(?:pytorch|mindspore)_profiler(?:_(\d+))?\.db$")


def _rank_from_names(folder: Path, out: Path) -> tuple[int | None, Path | None, str]:
    info_path = None
    for p in sorted(folder.glob("profiler_info*.json")):
        info_path = p
        m = _INFO_RE.match(p.name)
        if m:
            rid = int(m.group(1))
            if rid > MAX_RANK_ID:  # not a rank of any cluster: never allocate from it
                return None, p, f"{IMPLAUSIBLE}{rid}"
            return rid, p, "profiler_info file name"
    if info_path is not None:
        try:
            rid = read_json(info_path).get("rank_id")
            if rid is not None and str(rid).strip().lstrip("-").isdigit() and int(rid) >= 0:
                if int(rid) > MAX_RANK_ID:
                    return None, info_path, f"{IMPLAUSIBLE}{int(rid)}"
                return int(rid), info_path, "profiler_info rank_id"
        except InputError:
            pass
    if out.is_dir():
        for p in sorted(out.iterdir()):
            m = _DB_RE.match(p.name)
            if m and m.group(1) is not None:
                if int(m.group(1)) > MAX_RANK_ID:
                    return None, info_path, f"{IMPLAUSIBLE}{int(m.group(1))}"
                return int(m.group(1)), info_path, "DB file name"
    return None, info_path, ""


#: Tables whose text-export files are big and read only for the ranks an analysis examines.
HEAVY_FILES = {
    "kernels": "kernel_details.csv",
    "host_dispatch": "trace_view.json",
    "aicore_freq": "trace_view.json",
    "hccl_ops": "trace_view.json",
    "python_frames": "trace_view.json",
}


class TableSink:
    """Collects the rows of many ranks' light tables as columns; one DataFrame per table at the end.

    Each ``add`` takes columns (lists, numpy arrays or a scalar broadcast to ``n`` rows) or row
    dicts; :meth:`frames` concatenates them per table (columns missing in a part are NaN/None).
    """

    def __init__(self) -> None:
        self.parts: dict[str, list[tuple[dict[str, Any], int]]] = {}
        #: Small CSVs kept as read (:class:`Columns` of strings) with their rank, converted to
        #: numbers once per batch (:data:`_RAW_TABLES`): the per-file conversion calls cost more
        #: than the values of a few rows.
        self.raw: dict[str, list[tuple[Columns, int]]] = {}
        self.rows: dict[str, tuple[tuple[str, ...], list[tuple[Any, ...]]]] = {}
        #: ``comm_matrix`` links of the batch, collected as columns.
        self.links = text.LinkColumns()

    def add_columns(self, table: str, cols: dict[str, Any], n: int) -> None:
        """Add ``n`` rows given as columns."""
        if n:
            self._flush(table)  # rows stay in the order they were added
            self.parts.setdefault(table, []).append((cols, n))

    def add_raw(self, table: str, cols: Columns, rank: int) -> None:
        """Add the rows of one small CSV of ``table`` (a key of :data:`_RAW_TABLES`) as read."""
        if cols.n:
            self.raw.setdefault(table, []).append((cols, rank))

    def _flush(self, table: str) -> None:
        """Convert the raw parts of ``table`` (concatenated, one call) into a columns part."""
        raw = self.raw.pop(table, None)
        if not raw:
            return
        names: dict[str, None] = {}
        for cols, _ in raw:
            names.update(dict.fromkeys(cols))
        batch = Columns()
        for name in names:
            values: list[Any] = []
            for cols, _ in raw:
                v = cols.get(name)
                values += v if v is not None else [None] * cols.n
            batch[name] = values
        batch.n = sum(cols.n for cols, _ in raw)
        ranks = np.repeat(np.array([r for _, r in raw], dtype=object), [c.n for c, _ in raw])
        out, n = _RAW_TABLES[table](batch, ranks)
        self.parts.setdefault(table, []).append((out, n))

    def add_rows(self, table: str, names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        """Add rows given as tuples in the column order ``names`` (communication JSON).

        Raises:
            ValueError: ``names`` differ from the columns of rows added before to ``table``.
        """
        if not rows:
            return
        have = self.rows.setdefault(table, (names, []))
        if have[0] != names:
            raise ValueError(f"{table}: rows with columns {names} after {have[0]}")
        have[1].extend(rows)

    def frames(self) -> dict[str, pd.DataFrame]:
        """One DataFrame per table (columns in first-seen order)."""
        for table in list(self.raw):
            self._flush(table)
        out: dict[str, pd.DataFrame] = {}
        for table, parts in self.parts.items():
            names: dict[str, None] = {}
            for cols, _ in parts:
                names.update(dict.fromkeys(cols))
            data: dict[str, Any] = {}
            for name in names:
                chunks = []
                for cols, n in parts:
                    v = cols.get(name)
                    if isinstance(v, pd.Series):
                        v = v.to_numpy()
                    if isinstance(v, np.ndarray):
                        chunks.append(v)
                    elif isinstance(v, list):
                        arr = np.empty(n, dtype=object)
                        arr[:] = v
                        chunks.append(arr)
                    else:
                        arr = np.empty(n, dtype=object if not isinstance(v, float) else "float64")
                        arr[:] = v if v is not None else None
                        chunks.append(arr)
                kinds = {c.dtype.kind for c in chunks}
                if len(kinds) > 1:
                    chunks = [c.astype(object) for c in chunks]
                data[name] = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
            out[table] = pd.DataFrame(data)
        for table, (columns, rows) in self.rows.items():
            df = _tuples_frame(columns, rows)
            out[table] = pd.concat([out[table], df], ignore_index=True) if table in out else df
        if len(self.links):
            out["comm_matrix"] = self.links.frame()
        return out


#: Tables read from small CSVs whose conversion :class:`TableSink` runs once per batch.
_RAW_TABLES = {
    "step_trace": text.step_trace_columns,
    "op_statistic": text.op_statistic_from,
    "memory": text.memory_from,
}


def _tuples_frame(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """Row tuples in the column order ``names`` → DataFrame (transposed once with ``zip``).

    pandas' list-of-records path is several times slower on ~10^5 rows.
    """
    cols = zip(*rows, strict=True) if rows else (() for _ in names)
    return pd.DataFrame({k: infer_column(list(v)) for k, v in zip(names, cols, strict=True)})


def _put(
    rd: RankData,
    sink: TableSink | None,
    table: str,
    path: Path,
    *,
    cols: tuple[dict[str, Any], int] | None = None,
    rows: tuple[tuple[str, ...], list[tuple[Any, ...]]] | None = None,
    df: pd.DataFrame | None = None,
    raw: Any = None,
    version: str | None = None,
) -> None:
    """Add a table part to ``sink`` (rank known) or to ``rd.tables``; record its source either way.

    ``raw`` is a small CSV as read (a table of :data:`_RAW_TABLES`): the sink converts it with
    the rest of its batch; without a sink (or a known rank), or when the CSV came back as a
    DataFrame (a large file), it is converted here.
    """
    if raw is not None and not (
        sink is not None and rd.rank is not None and isinstance(raw, Columns)
    ):
        cols, raw = _RAW_TABLES[table](raw, rd.rank), None
    if sink is None or rd.rank is None or df is not None:
        if df is None:
            if cols is not None:
                df = text._frame(*cols)
            else:
                df = _tuples_frame(*rows) if rows is not None and rows[1] else pd.DataFrame()
        rd.add(table, df, path, version=version)
        return
    if raw is not None:
        n = raw.n
    else:
        n = cols[1] if cols is not None else len(rows[1]) if rows is not None else 0
    if not n:
        return
    if raw is not None:
        sink.add_raw(table, raw, rd.rank)
    elif cols is not None:
        sink.add_columns(table, cols[0], n)
    elif rows is not None:
        sink.add_rows(table, *rows)
    rd.sources.append(
        TableSource(
            table=table,
            path=str(path),
            export=rd.export,  # type: ignore[arg-type]
            rank=rd.rank,
            rows=n,
            version=version,
        )
    )


def _ends_like_json(path: Path) -> bool:
    """Whether the last bytes of ``path`` close a JSON array/object (a cheap truncation check)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 256))
            tail = fh.read().rstrip()
    except OSError:
        return True  # let the real read report it
    return tail.endswith((b"]", b"}"))


def trace_warning(tv: Path, why: str, rank: int | None) -> DataWarning:
    """The ``trace_view_invalid`` warning of an empty, truncated or invalid trace_view.json."""
    try:
        empty = tv.stat().st_size == 0
    except OSError:
        empty = False
    state = "is empty (0 bytes)" if empty else f"is truncated or invalid JSON ({why[:80]})"
    return DataWarning(
        code="trace_view_invalid",
        message=f"{tv} {state}; fell back to CSV/DB "
        "data: host-dispatch (launch delay) facts are missing for this rank. Copy the file "
        "again or re-run the offline parse to get them",
        path=str(tv),
        ranks=(rank,) if rank is not None else (),
    )


#: What a rank loses when one of its files cannot be read (named in the ``file_skipped`` warning).
_LOST = {
    "profiler_info": "run metadata (versions, profiler level)",
    "profiler_metadata.json": "parallel-group and environment metadata",
    "db": "profiler DB tables (kernels, host dispatch, memory)",
    "step_trace_time.csv": "step breakdown (Computing / Communication / Free)",
    "kernel_details.csv": "kernels",
    "op_statistic.csv": "operator statistics",
    "communication.json": "communication operators and bandwidth",
    "communication_matrix.json": "communication links",
    "analysis.db": "step breakdown and communication from analysis.db",
    "memory_record.csv": "memory records",
}


#: :data:`_LOST` in Chinese, by the file's name (``db`` for a profiler ``.db``).
_LOST_ZH = {
    "profiler_info": "运行元数据（版本、采集级别）",
    "profiler_metadata.json": "并行通信域与环境元数据",
    "db": "profiler 数据库表（算子、主机下发、内存）",
    "step_trace_time.csv": "步骤时间拆分（计算 / 通信 / 空闲）",
    "kernel_details.csv": "算子明细",
    "op_statistic.csv": "算子统计",
    "communication.json": "通信算子与带宽",
    "communication_matrix.json": "通信链路",
    "analysis.db": "analysis.db 中的步骤时间与通信数据",
    "memory_record.csv": "内存记录",
}


def skipped_zh(path: str, ranks: tuple[int, ...]) -> str:
    """Chinese sentence of a ``file_skipped`` warning: what is left out and what to do.

    ``path`` as it should be shown (relative to the profile folder); what it held is looked up
    by its file name (``profiler_info_*.json`` and ``*.db`` by their pattern).
    """
    name = Path(path).name
    key = (
        "profiler_info"
        if name.startswith("profiler_info")
        else name
        if name in _LOST_ZH
        else "db"
        if name.endswith(".db")
        else ""
    )
    lost = _LOST_ZH.get(key, "数据")
    who = f"{'、'.join(str(r) for r in ranks)}号卡的" if ranks else ""
    return (
        f"{path} 无法解析，已跳过：未分析{who}{lost}，其余数据照常分析；"
        "请从训练机器重新拷贝该文件，或重新运行 torch_npu 的离线解析"
    )


#: Marks a ``file_skipped`` message about an unreadable file (the reader's message comes before it).
LEFT_OUT = " Left out:"


def _note_cut(rd: RankData, path: Path, raw: Any) -> None:
    """Warn (``row_cut``) when the CSV just read ended inside its last row (it was left out)."""
    if getattr(raw, "cut_row", False) or getattr(raw, "attrs", {}).get("cut_row", False):
        rd.warnings.append(cut_row_warning(path, rd.rank))


#: Bytes read from each end of a CSV to tell whether it ends inside a row (a header or a row of
#: kernel_details.csv is well under 4 KiB; 8 KiB per end keeps a 1024-rank load's extra reads
#: at 16 MiB).
_TAIL_BYTES = 1 << 13


def _ends_in_cut_row(path: Path) -> bool:
    """Whether a CSV read later (kernel_details.csv) ends inside its last row.

    The profilers end every row with a line break; a copy cut short ends without one, in a row
    with fewer fields than the header (as :func:`~advisor_chat.ingest.common.drop_cut_row`
    judges a file read now). Reads the first and last 8 KiB only.
    """
    import csv
    import io

    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(min(size, _TAIL_BYTES))
            fh.seek(max(0, size - _TAIL_BYTES))
            tail = fh.read()
    except OSError:
        return False
    if not tail or tail.endswith((b"\n", b"\r")) or b"\n" not in head:
        return False
    last = tail.rsplit(b"\n", 1)[-1].decode("utf-8", "replace")
    first = head.split(b"\n", 1)[0].decode("utf-8-sig", "replace")
    fields = [next(csv.reader(io.StringIO(x)), []) for x in (first, last)]
    return 0 < len(fields[1]) < len(fields[0])


def skip_file(rd: RankData, path: Path, what: str, exc: InputError, who: str | None = None) -> None:
    """Record that ``path`` of this rank could not be read: its tables are left out, not the job.

    One corrupt file among hundreds of ranks must not stop the analysis of the others; the
    warning (``file_skipped``) carries the reader's message (file and remedy) and what is lost.
    ``who`` names the owner when it is not a rank (``"the cluster output"``).
    """
    if who is None:
        who = f"rank {rd.rank}" if rd.rank is not None else f"the rank in {rd.source_dir}"
    rd.warnings.append(
        DataWarning(
            code="file_skipped",
            message=f"{exc}{LEFT_OUT} the {_LOST.get(what, what)} of {who}; the rest is analysed",
            path=str(path),
            ranks=(rd.rank,) if rd.rank is not None else (),
        )
    )


def read_rank_dir(
    path: str | Path, *, heavy: bool = True, sink: TableSink | None = None
) -> RankData:
    """Parse one rank folder (text export, DB export, or both; PyTorch or MindSpore).

    Args:
        path: The ``*_ascend_pt`` / ``*_ascend_ms`` folder.
        heavy: Also parse ``kernel_details.csv`` and ``trace_view.json`` (or the profiler DB's
            kernels and host dispatch). When false they are only listed in
            ``meta["heavy_files"]`` (table → path; the ``.db`` file for the DB export) for a
            later, lazy read.
        sink: Collect the light tables of a batch of ranks here (as columns) instead of building
            per-rank DataFrames in ``tables`` (only when the rank is known).

    Returns:
        A :class:`RankData` with partial canonical tables (validated later by the loader).
        ``comm_matrix`` keeps local ranks in ``src_local``/``dst_local``.

    Raises:
        InputError: ``ASCEND_PROFILER_OUTPUT/`` is missing (the offline parse was not run), a CSV lacks
            required columns, or a file is unreadable.
    """
    folder = Path(path).resolve()
    out = folder / OUTPUT
    is_ms = mindspore.is_mindspore_dir(folder)
    loose = (
        not out.is_dir()
        and not is_rank_dir(folder)
        and any(loose_name(p.name) for p in folder.iterdir() if p.is_file())
    )
    if loose:
        out = folder
    if not out.is_dir():
        raise InputError(
            f"rank folder {folder} has no {OUTPUT}/ subfolder, so it was never parsed",
            path=folder,
            remedy="Run the offline parse of torch_npu on it: "
            f"`python -c \"from torch_npu.profiler.profiler import analyse; analyse('{folder}')\"` "
            "(MindSpore: `mindspore.profiler.profiler.analyse`), then load the folder again",
        )
    rank, info_path, rank_origin = _rank_from_names(folder, out)
    try:
        names = {p.name: p for p in out.iterdir()}
        if loose:
            names = {loose_name(n) or n: p for n, p in sorted(names.items(), reverse=True)}
    except PermissionError as exc:
        from advisor_chat.ingest.common import unreadable

        raise unreadable(out) from exc
    db_file = next((p for n, p in sorted(names.items()) if _DB_RE.match(n)), None)
    analysis = names.get("analysis.db") or names.get("communication_analyzer.db")
    has_text = any(
        n in names for n in ("step_trace_time.csv", "kernel_details.csv", "communication.json")
    )
    export = "mindspore" if is_ms else ("db" if db_file is not None and not has_text else "text")
    rd = RankData(rank=rank, source_dir=str(folder), export=export)
    rd.meta["rank_origin"] = rank_origin or ("loose files" if loose else "")
    rd.meta["has_db"] = db_file is not None
    rd.meta["has_text"] = has_text
    heavy_files: dict[str, str] = {}

    # --- meta. From here on, a file that cannot be read is left out with a ``file_skipped``
    # warning (``_skip_file``) and the rank keeps what its other files give.
    if info_path is not None:
        try:
            info = text.load_json(info_path)
            rd.parsed_files += 1
            rd.meta.update(text.parse_profiler_info(info if isinstance(info, dict) else {}))
        except InputError as exc:
            skip_file(rd, info_path, "profiler_info", exc)
    md_path = folder / "profiler_metadata.json"
    metadata: dict[str, Any] = {}
    if md_path.is_file():
        try:
            md = text.load_json(md_path)
            rd.parsed_files += 1
            if isinstance(md, dict):
                metadata = md
        except InputError as exc:
            skip_file(rd, md_path, "profiler_metadata.json", exc)

    # --- DB first (kernels, host dispatch, memory; metadata copy). Without ``heavy`` only the
    # cheap meta and MEMORY_RECORD are read; kernels / host_dispatch are listed for a lazy read.
    task_device_id = None
    d_ok = False
    if db_file is not None:
        parts = ["meta"] if "memory_record.csv" in names else ["meta", "memory"]
        try:
            d = dbr.read_profiler_db(
                db_file,
                rank,
                tables=parts
                + (["kernels", "host_dispatch", "aicore_freq", "hccl_ops"] if heavy else []),
                memory_columns=True,
            )
            d_ok = True
        except InputError as exc:
            skip_file(rd, db_file, "db", exc)
    if db_file is not None and d_ok:
        rd.parsed_files += 1
        version = d["meta"].get("schema_version")
        for t in ("kernels", "host_dispatch", "aicore_freq", "hccl_ops"):
            if t in d:
                rd.add(t, d[t], db_file, version=version)
        if "memory" in d:
            _put(rd, sink, "memory", db_file, cols=d["memory"], version=version)
        if not heavy:
            heavy_files.update({t: str(db_file) for t in d["heavy"]})
        task_device_id = d["meta"].pop("task_device_id", None)
        for k, v in d["meta"].items():
            rd.meta.setdefault(k, v)
        if not metadata:
            metadata = d.get("metadata", {})
    m, groups = text.parse_metadata(metadata)
    for k, v in m.items():
        rd.meta.setdefault(k, v)
    rd.groups = groups

    # --- step trace
    df_st: Any = None
    if "step_trace_time.csv" in names:
        p = names["step_trace_time.csv"]
        try:
            df_st = read_columns(p, required=text.STEP_TRACE_REQUIRED)
            _note_cut(rd, p, df_st)
            _put(rd, sink, "step_trace", p, raw=df_st)
            rd.parsed_files += 1
        except InputError as exc:
            df_st = None
            skip_file(rd, p, "step_trace_time.csv", exc)
    # --- kernels
    if (
        "kernels" not in rd.tables
        and "kernels" not in heavy_files
        and "kernel_details.csv" in names
    ):
        p = names["kernel_details.csv"]
        try:
            if heavy:
                k, version = text.read_kernels(p, rank)
                k, repeated = check_repeated_kernels(
                    k, [TableSource("kernels", str(p), "text", rank)]
                )
                rd.warnings += repeated
                rd.add("kernels", k, p, version=version)
                rd.parsed_files += 1
            else:
                text.check_kernel_header(p)
                if _ends_in_cut_row(p):  # read later: say now that its last row is cut
                    rd.warnings.append(cut_row_warning(p, rd.rank))
                heavy_files["kernels"] = str(p)
        except InputError as exc:
            skip_file(rd, p, "kernel_details.csv", exc)
    if "op_statistic.csv" in names:
        p = names["op_statistic.csv"]
        try:
            raw = read_columns(p, text.OP_STATISTIC_REQUIRED)
            _note_cut(rd, p, raw)
            _put(rd, sink, "op_statistic", p, raw=raw)
            rd.parsed_files += 1
        except InputError as exc:
            skip_file(rd, p, "op_statistic.csv", exc)
    # --- communication
    if "communication.json" in names:
        p = names["communication.json"]
        try:
            ops, bw = text.comm_tuples(text.load_json(p), rank)
            _put(rd, sink, "comm_ops", p, rows=(text.COMM_OPS_COLUMNS, ops))
            _put(rd, sink, "comm_bandwidth", p, rows=(text.COMM_BANDWIDTH_COLUMNS, bw))
            rd.parsed_files += 1
        except InputError as exc:
            skip_file(rd, p, "communication.json", exc)
    matrix_data: Any = None
    if "communication_matrix.json" in names:
        p = names["communication_matrix.json"]
        try:
            matrix_data = text.load_json(p)
        except InputError as exc:
            skip_file(rd, p, "communication_matrix.json", exc)
    if matrix_data is not None:
        p = names["communication_matrix.json"]
        data = matrix_data
        if sink is not None and rank is not None:
            n = sink.links.add_file(data, rank)
            if n:
                rd.sources.append(
                    TableSource(
                        table="comm_matrix",
                        path=str(p),
                        export=rd.export,  # type: ignore[arg-type]
                        rank=rank,
                        rows=n,
                    )
                )
        else:
            acc = text.LinkColumns()
            if acc.add_file(data, rank):
                rd.add("comm_matrix", acc.frame(), p)
        rd.parsed_files += 1
    have = {s.table for s in rd.sources}
    if analysis is not None and (
        "step_trace" not in have or "comm_ops" not in have or "comm_matrix" not in have
    ):
        try:
            a = dbr.analysis_columns(analysis, rank)
            rd.parsed_files += 1
        except InputError as exc:
            a = {}
            skip_file(rd, analysis, "analysis.db", exc)
        for t in ("step_trace", "comm_ops", "comm_bandwidth", "comm_matrix"):
            if t in a and t not in have:
                _put(rd, sink, t, analysis, cols=a[t])
    # --- memory
    if "memory_record.csv" in names:
        p = names["memory_record.csv"]
        try:
            raw = read_columns(p, text.MEMORY_REQUIRED)
            _note_cut(rd, p, raw)
            _put(rd, sink, "memory", p, raw=raw)
            rd.parsed_files += 1
        except InputError as exc:
            skip_file(rd, p, "memory_record.csv", exc)
    # --- host dispatch from trace_view.json only when the DB did not give it
    tv = names.get("trace_view.json")
    # the AI Core Freq counter track, from the same file when the DB does not give it
    tv_whole = tv is not None and not heavy and _ends_like_json(tv)  # (one tail read per file)
    if "aicore_freq" not in heavy_files and "aicore_freq" not in rd.tables and tv is not None:
        if not heavy:
            if tv_whole:
                heavy_files["aicore_freq"] = str(tv)
        else:
            # a truncated trace: the host-dispatch read below warns about the file
            with contextlib.suppress(TraceInvalid):
                freq = read_aicore_freq(tv, rank)
                rd.add("aicore_freq", freq, tv)
                # read, with no samples: the table exists (as the lazy reader lists it)
                rd.tables.setdefault("aicore_freq", freq)
    # the host's Python frames (with_stack), from the same file: a text-export-only table
    if "python_frames" not in rd.tables and tv is not None:
        if not heavy:
            if tv_whole:
                heavy_files["python_frames"] = str(tv)
        else:
            with contextlib.suppress(TraceInvalid):
                frames = read_python_frames(tv, rank)
                rd.add("python_frames", frames, tv)
                rd.tables.setdefault("python_frames", frames)
    # the HCCL operators' data type and count, from the same file: a text-export-only table
    if "hccl_ops" not in rd.tables and "hccl_ops" not in heavy_files and tv is not None:
        if not heavy:
            if tv_whole:
                heavy_files["hccl_ops"] = str(tv)
        else:
            with contextlib.suppress(TraceInvalid):
                hccl = read_hccl_ops(tv, rank)
                rd.add("hccl_ops", hccl, tv)
                rd.tables.setdefault("hccl_ops", hccl)
    if "host_dispatch" in heavy_files:
        tv = None  # the DB gives it (read lazily)
    if "host_dispatch" not in rd.tables and tv is not None and not heavy:
        if tv_whole:
            heavy_files["host_dispatch"] = str(tv)
        else:
            rd.warnings.append(trace_warning(tv, "the file does not end with ']' or '}'", rank))
    elif "host_dispatch" not in rd.tables and tv is not None:
        try:
            rd.add("host_dispatch", read_host_dispatch(tv, rank), tv)
            rd.parsed_files += 1
        except TraceInvalid as exc:
            rd.warnings.append(trace_warning(tv, str(exc), rank))
        except PermissionError as exc:
            from advisor_chat.ingest.common import unreadable

            raise unreadable(tv) from exc

    if heavy_files:
        rd.meta["heavy_files"] = heavy_files
    # device id (never the rank): from step trace / kernels / DB
    if rd.meta.get("device_id") is None and df_st is not None:
        dev = [
            v
            for v in (
                num(df_st.get("Device_id"), df_st.index)
                if df_st.get("Device_id") is not None
                else []
            )
            if v == v
        ]
        if dev:
            rd.meta["device_id"] = float(dev[0])
    if rd.meta.get("device_id") is None:
        for t in ("step_trace", "kernels"):
            df = rd.tables.get(t)
            if df is not None and "device_id" in df and df["device_id"].notna().any():
                rd.meta["device_id"] = float(df["device_id"].dropna().iloc[0])
                break
    if rd.meta.get("device_id") is None and task_device_id is not None:
        rd.meta["device_id"] = float(task_device_id)  # the DB's kernels, not read yet
    skipped = any(w.code == "file_skipped" for w in rd.warnings)
    if not rd.tables and not rd.sources and not heavy_files and not skipped:
        rd.warnings.append(
            DataWarning(
                code="file_skipped",
                message=f"{out} holds no file this tool reads (step_trace_time.csv, kernel_details.csv, "
                "communication.json, *.db); the rank contributes only metadata",
                path=str(out),
                ranks=(rank,) if rank is not None else (),
            )
        )
    return rd
