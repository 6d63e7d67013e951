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

import re
from pathlib import Path
from typing import Any

from advisor_chat.errors import InputError
from advisor_chat.ingest import db as dbr
from advisor_chat.ingest import mindspore, text
from advisor_chat.ingest.common import RankData, read_json
from advisor_chat.ingest.detect import is_rank_dir, loose_name
from advisor_chat.ingest.profile import DataWarning
from advisor_chat.ingest.trace import TraceInvalid, read_host_dispatch

OUTPUT = "ASCEND_PROFILER_OUTPUT"
_INFO_RE = re.compile(r"^profiler_info_(\d+)\.json$")
_DB_RE = re.compile(r"^ascend_(?:pytorch|mindspore)_profiler(?:_(\d+))?\.db$")


def _rank_from_names(folder: Path, out: Path) -> tuple[int | None, Path | None, str]:
    info_path = None
    for p in sorted(folder.glob("profiler_info*.json")):
        info_path = p
        m = _INFO_RE.match(p.name)
        if m:
            return int(m.group(1)), p, "profiler_info file name"
    if info_path is not None:
        try:
            rid = read_json(info_path).get("rank_id")
            if rid is not None and str(rid).strip().lstrip("-").isdigit() and int(rid) >= 0:
                return int(rid), info_path, "profiler_info rank_id"
        except InputError:
            pass
    if out.is_dir():
        for p in sorted(out.iterdir()):
            m = _DB_RE.match(p.name)
            if m and m.group(1) is not None:
                return int(m.group(1)), info_path, "DB file name"
    return None, info_path, ""


def read_rank_dir(path: str | Path) -> RankData:
    """Parse one rank folder (text export, DB export, or both; PyTorch or MindSpore).

    Args:
        path: The ``*_ascend_pt`` / ``*_ascend_ms`` folder.

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

    # --- meta
    if info_path is not None:
        info = read_json(info_path)
        rd.parsed_files += 1
        rd.meta.update(text.parse_profiler_info(info if isinstance(info, dict) else {}))
    md_path = folder / "profiler_metadata.json"
    metadata: dict[str, Any] = {}
    if md_path.is_file():
        md = read_json(md_path)
        rd.parsed_files += 1
        if isinstance(md, dict):
            metadata = md

    # --- DB first (kernels, host dispatch, memory; metadata copy)
    if db_file is not None:
        d = dbr.read_profiler_db(db_file, rank)
        rd.parsed_files += 1
        for t in ("kernels", "host_dispatch", "memory"):
            if t in d and not (t == "memory" and "memory_record.csv" in names):
                rd.add(t, d[t], db_file, version=d["meta"].get("schema_version"))
        for k, v in d["meta"].items():
            rd.meta.setdefault(k, v)
        if not metadata:
            metadata = d.get("metadata", {})
    m, groups = text.parse_metadata(metadata)
    for k, v in m.items():
        rd.meta.setdefault(k, v)
    rd.groups = groups

    # --- step trace
    if "step_trace_time.csv" in names:
        p = names["step_trace_time.csv"]
        rd.add("step_trace", text.read_step_trace(p, rank), p)
        rd.parsed_files += 1
    # --- kernels
    if "kernels" not in rd.tables and "kernel_details.csv" in names:
        p = names["kernel_details.csv"]
        k, version = text.read_kernels(p, rank)
        rd.add("kernels", k, p, version=version)
        rd.parsed_files += 1
    if "op_statistic.csv" in names:
        p = names["op_statistic.csv"]
        rd.add("op_statistic", text.read_op_statistic(p, rank), p)
        rd.parsed_files += 1
    # --- communication
    if "communication.json" in names:
        p = names["communication.json"]
        ops, bw = text.read_communication(p, rank)
        rd.add("comm_ops", ops, p)
        rd.add("comm_bandwidth", bw, p)
        rd.parsed_files += 1
    if "communication_matrix.json" in names:
        p = names["communication_matrix.json"]
        rd.add("comm_matrix", text.read_matrix(p, rank), p)
        rd.parsed_files += 1
    if analysis is not None and (
        "step_trace" not in rd.tables
        or "comm_ops" not in rd.tables
        or "comm_matrix" not in rd.tables
    ):
        a = dbr.read_analysis_db(analysis, rank)
        rd.parsed_files += 1
        for t in ("step_trace", "comm_ops", "comm_bandwidth", "comm_matrix"):
            if t in a and t not in rd.tables:
                rd.add(t, a[t], analysis)
    # --- memory
    if "memory_record.csv" in names:
        p = names["memory_record.csv"]
        rd.add("memory", text.read_memory(p, rank), p)
        rd.parsed_files += 1
    # --- host dispatch from trace_view.json only when the DB did not give it
    tv = names.get("trace_view.json")
    if "host_dispatch" not in rd.tables and tv is not None:
        try:
            rd.add("host_dispatch", read_host_dispatch(tv, rank), tv)
            rd.parsed_files += 1
        except TraceInvalid as exc:
            rd.warnings.append(
                DataWarning(
                    code="trace_view_invalid",
                    message=f"{tv} is truncated or invalid JSON ({str(exc)[:80]}); fell back to CSV/DB "
                    "data: host-dispatch (launch delay) facts are missing for this rank. Copy the file "
                    "again or re-run the offline parse to get them",
                    path=str(tv),
                    ranks=(rank,) if rank is not None else (),
                )
            )
        except PermissionError as exc:
            from advisor_chat.ingest.common import unreadable

            raise unreadable(tv) from exc

    # device id (never the rank): from step trace / kernels / DB
    if rd.meta.get("device_id") is None:
        for t in ("step_trace", "kernels"):
            df = rd.tables.get(t)
            if df is not None and "device_id" in df and df["device_id"].notna().any():
                rd.meta["device_id"] = float(df["device_id"].dropna().iloc[0])
                break
    if not rd.tables:
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
