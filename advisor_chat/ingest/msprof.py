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

Rank: ``rank_id`` of ``device_*/info.json.*``; ``-1`` (unknown) leaves it ``None`` and the loader
assigns ranks in folder order, like msprof-analyze does by sorting (host, device).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from advisor_chat.ingest.common import RankData, clean_str, comm_kind_of, num, read_csv, read_json
from advisor_chat.ingest.text import comm_frames, kernel_header_version, kernels_frame, matrix_rows

OP_SUMMARY_RENAME = {
    "Op Name": "Name",
    "OP Type": "Type",
    "Task Type": "Accelerator Core",
    "Task Start Time(us)": "Start Time(us)",
    "Task Duration(us)": "Duration(us)",
    "Task Wait Time(us)": "Wait Time(us)",
}


def _files(out: Path, name: str) -> list[Path]:
    pat = re.compile(rf"^{name}(?:_slice_\d+)?_\d+\.csv$")
    return sorted(p for p in out.iterdir() if pat.match(p.name))


def msprof_rank(folder: Path) -> int | None:
    """``rank_id`` from ``device_*/info.json.*`` (``None`` when absent or -1)."""
    for info in sorted(folder.glob("device_*/info.json*")):
        try:
            rid = read_json(info).get("rank_id")
        except Exception:
            continue
        if rid is not None and int(rid) >= 0:
            return int(rid)
    return None


def read_msprof_dir(path: str | Path) -> RankData:
    """Parse one ``PROF_*`` folder (one device).

    Raises:
        InputError: A CSV lacks required columns or a file is unreadable.
    """
    folder = Path(path).resolve()
    out = folder / "mindstudio_profiler_output"
    rank = msprof_rank(folder)
    rd = RankData(rank=rank, source_dir=str(folder), export="msprof")
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
        rows = []
        for op_key, links in (data or {}).items():
            if str(op_key).startswith("Total") or not isinstance(links, dict):
                continue
            rows.extend(matrix_rows(links, op_key, -1, rank))
        rd.add("comm_matrix", pd.DataFrame(rows), mat)
    return rd
