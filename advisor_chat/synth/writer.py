"""Write a simulated `Cluster` as Ascend PyTorch Profiler text-export folders (one per rank).

Formats follow ``shared/reference/ascend-formats.md`` §1 and the real Jan-2025 Level1 sample
(``pt-text-level1-2rank``): CRLF csv with minimal quoting, trailing TAB in absolute timestamps,
quoted CANN shapes, ``json.dumps`` default separators for the communication files and
``indent=4`` for profiler_info / profiler_metadata.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from advisor_chat.synth.model import (
    AICORE_MHZ,
    GRAPH_LAUNCH_API,
    RANKS_PER_NODE,
    Cluster,
    D2HPull,
    HostCall,
    HostOp,
    Kernel,
    OpRec,
    StepRec,
)

KERNEL_HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),"
    "Duration(us),Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,"
    "Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),"
    "aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,"
    "aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),"
    "aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),"
    "aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,"
    "aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)"
)
N_KERNEL_COLS = KERNEL_HEADER.count(",") + 1
STEP_HEADER = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
    "Communication(Not Overlapped and Exclude Receive),Preparing"
)
OPSTAT_HEADER = (
    "OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)"
)
MEM_HEADER = "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type"
ENV_KEYS = (
    "ASCEND_GLOBAL_LOG_LEVEL",
    "HCCL_RDMA_TC",
    "HCCL_RDMA_SL",
    "ACLNN_CACHE_LIMIT",
    "HOST_CACHE_CAPACITY",
    "ASCEND_ENHANCE_ENABLE",
    "PYTORCH_NPU_ALLOC_CONF",
    "ASCEND_LAUNCH_BLOCKING",
    "HCCL_ALGO",
)
TRANSPORTS = ("HCCS", "RDMA", "LOCAL")
_MATRIX_TYPE = re.compile(
    r"send|reduce|invalid|broadcast|allreduce|receive|allgather|reducescatter|scatter|alltoall|alltoallv|alltoallvc|batchsendrecv"
)
HW_SORT, CANN_SORT, HCCL_SORT, OVERLAP_SORT = 13, 7, 15, 23
FREQ_SORT = 14  # the AI Core Freq counter process
COMPUTE_STREAM = 2
FLOW_ID_BASE = 5046586572799  # HCCL launch flow ids are large numbers in real files
APP_EXTRA_MB = 1536.0  # process device memory outside the PyTorch allocator (runtime, workspace)
PTA_STREAM_PTR = 1162636336  # Stream Ptr of the compute stream in PTA memory rows


@dataclass
class RunInfo:
    """Installation-level settings shared by every rank of one profile."""

    cann_version: str = "8.0.RC2"
    torch_npu_version: str = "2.1.0.post6"
    env: dict[str, str] | None = None
    user_metadata: dict[str, Any] | None = None  # extra top-level keys of profiler_metadata.json
    export: str = (
        "text"  # "text" (csv/json) or "db" (ascend_pytorch_profiler_{rank}.db + analysis.db)
    )
    gc_detect_threshold_ms: float | None = None  # experimental_config._gc_detect_threshold
    profiler_level: str = "Level1"  # experimental_config._profiler_level
    with_stack: bool = False  # common_config.with_stack (Python call stacks per op)
    # per-rank additions to ``env`` (a launcher that sets other variables on some servers)
    rank_env: dict[int, dict[str, str]] | None = None
    # per-rank (cann_version, torch_npu_version) of profiler_info (another image on some servers)
    rank_versions: dict[int, tuple[str, str]] | None = None
    # per-rank ``alg_type`` of the HCCL op events in trace_view.json (another HCCL_ALGO on some
    # servers); ranks not listed (and None) write "MESH-RING"
    rank_alg_type: dict[int, str] | None = None
    # per-rank ``DeviceInfo`` fields of the raw CANN data (``PROF_*/device_{id}/info.json.{id}``,
    # what msprof-analyze's DeviceInfoParser reads: ``ai_core_num``, ``aiv_num``, frequencies);
    # None (the default) writes no PROF_ folder
    device_info: dict[int, dict[str, Any]] | None = None
    # per-rank offset (ns) of the host clock the profiler stamps every event with (a server whose
    # clock is not synchronised with the others'): every absolute timestamp of that rank's files is
    # shifted by it, durations unchanged; None (the default) = every rank on the same clock
    clock_offset_ns: dict[int, int] | None = None
    # per-rank (node index, device id) of a job not laid out RANKS_PER_NODE ranks per node in rank
    # order (the scenario builds its groups with the same placement, ``make_group_kind(place=)``):
    # the folder's hostname, the device id of the trace lanes / memory rows / DB, the host id;
    # None (the default) = (rank // RANKS_PER_NODE, rank % RANKS_PER_NODE)
    placement: dict[int, tuple[int, int]] | None = None
    # hostname per node index (e.g. names that carry the rack); nodes not listed (and None) are
    # ``devserver-{node:04d}``
    hostnames: dict[int, str] | None = None


def ts_str(ns: int) -> str:
    """µs epoch timestamp with 3 decimals from integer ns (CANN ``convert_ns2us_str``)."""
    q, m = divmod(ns, 1000)
    return f"{q}.{m:03d}"


def us(ns: int) -> float:
    """Duration in µs as a float (``53.741``)."""
    return ns / 1000


def _csv_text(rows: list[list[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerows(rows)
    return buf.getvalue()


def _q(shape: str) -> str:
    """CANN shape value (with its own double quotes) as a minimal-quoted CSV field."""
    return '"""' + shape + '"""'


def _kernel_static(k: Kernel) -> tuple[str, str]:
    """Parts of a kernel_details row that never change between launches."""
    mid = f"{k.name},{k.op_type},dynamic,{k.core}"
    shapes = (
        f"{k.block_dim},0,{'YES' if k.hf32 else 'NO'},{_q(k.in_shapes)},{k.in_dtypes},{k.in_formats},"
        f"{_q(k.out_shapes)},{k.out_dtypes},{k.out_formats},N/A"
    )
    return mid, shapes


_AIC_RATIOS = (
    ("aic_mac_ratio", 0.62),
    ("aic_scalar_ratio", 0.18),
    ("aic_mte1_ratio", 0.45),
    ("aic_mte2_ratio", 0.71),
    ("aic_fixpipe_ratio", 0.12),
)
_AIV_RATIOS = (
    ("aiv_vec_ratio", 0.41),
    ("aiv_scalar_ratio", 0.2),
    ("aiv_mte2_ratio", 0.55),
    ("aiv_mte3_ratio", 0.38),
)


def _pmu_override(k: Kernel, t: float, cyc: int) -> str:
    """PMU columns with ``Kernel.pmu`` overrides (the same layout as :func:`_pmu`)."""
    o = dict(k.pmu)

    def part(ratios: tuple[tuple[str, float], ...], miss_name: str, miss: float) -> str:
        cells = [f"{t}", f"{cyc}"]
        for name, default in ratios:
            v = o.get(name, default)
            cells += [f"{round(t * v, 3)}", f"{v}"]
        cells.append(f"{o.get(miss_name, miss)}")
        return ",".join(cells)

    if k.core in ("AI_CORE", "MIX_AIC"):
        aic = part(_AIC_RATIOS, "aic_icache_miss_rate", 0.001)
        aiv = "0.0,0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0"
        cube = f"{o.get('cube_utilization', 71.3)}"
    else:
        aic = "0.0,0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0"
        aiv = part(_AIV_RATIOS, "aiv_icache_miss_rate", 0.002)
        cube = f"{o.get('cube_utilization', 0)}"
    return f"{aic},{aiv},{cube}"


def _pmu(k: Kernel, dur_us: float) -> str:
    """PMU columns (PipeUtilization) consistent with the duration and block dim (1.8 GHz)."""
    t = round(dur_us * 0.985, 3)
    cyc = int(t * 1800 * k.block_dim)
    if k.pmu:
        return _pmu_override(k, t, cyc)
    if k.core in ("AI_CORE", "MIX_AIC"):
        aic = (
            f"{t},{cyc},{round(t * 0.62, 3)},0.62,{round(t * 0.18, 3)},0.18,{round(t * 0.45, 3)},0.45,"
            f"{round(t * 0.71, 3)},0.71,{round(t * 0.12, 3)},0.12,0.001"
        )
        aiv = "0.0,0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0"
        cube = "71.3"
    else:
        aic = "0.0,0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0"
        aiv = (
            f"{t},{cyc},{round(t * 0.41, 3)},0.41,{round(t * 0.2, 3)},0.2,{round(t * 0.55, 3)},0.55,"
            f"{round(t * 0.38, 3)},0.38,0.002"
        )
        cube = "0"
    return f"{aic},{aiv},{cube}"


def _merge(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _subtract(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """A minus b (both merged, sorted)."""
    out: list[tuple[int, int]] = []
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def overlap_intervals(
    comp: list[tuple[int, int]], comm: list[tuple[int, int]], s: int, e: int
) -> dict[str, list[tuple[int, int]]]:
    """Overlap Analysis intervals of one step (msprof overlap_analysis_processor semantics).

    Computing = union of compute tasks; Communication = union of communication ops;
    Communication(Not Overlapped) = Communication minus Computing; Free = the rest of [s, e).
    """
    c = _merge(comp)
    m = _merge(comm)
    busy = _merge(c + m)
    return {
        "Computing": c,
        "Communication": m,
        "Communication(Not Overlapped)": _subtract(m, c),
        "Free": _subtract([(s, e)], busy),
    }


def _block(
    mb: float, ms: float, packets: dict[float, list[Any]], large_mb: float
) -> dict[str, Any]:
    if ms <= 0:
        return {
            "Transit Size(MB)": 0,
            "Transit Time(ms)": 0,
            "Bandwidth(GB/s)": 0,
            "Large Packet Ratio": 0,
            "Size Distribution": {},
        }
    n = sum(v[0] for v in packets.values())
    large = sum(v[0] for k, v in packets.items() if k > large_mb)
    return {
        "Transit Size(MB)": mb,
        "Transit Time(ms)": ms,
        "Bandwidth(GB/s)": round(mb / ms, 4),
        "Large Packet Ratio": round(large / n, 4) if n else 0,
        "Size Distribution": {str(k): v for k, v in packets.items()},
    }


def _ratio(a: float, b: float) -> float | int:
    return round(a / (a + b), 4) if (a + b) > 0 else 0


def node_device(info: RunInfo | None, rank: int) -> tuple[int, int]:
    """(node index, device id) of a rank (``RunInfo.placement``, else rank order, 8 per node)."""
    if info is not None and info.placement and rank in info.placement:
        return info.placement[rank]
    return rank // RANKS_PER_NODE, rank % RANKS_PER_NODE


def host_name(info: RunInfo | None, node: int) -> str:
    """Hostname of a node (``RunInfo.hostnames``, else ``devserver-{node:04d}``)."""
    if info is not None and info.hostnames and node in info.hostnames:
        return info.hostnames[node]
    return f"devserver-{node:04d}"


def rank_folder_name(rank: int, pid: int, end_ns: int, info: RunInfo | None = None) -> str:
    """``{hostname}_{pid}_{17-digit ms clock}_ascend_pt``."""
    sec = end_ns // 1_000_000_000
    ms = (end_ns // 1_000_000) % 1000
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(sec)) + f"{ms:03d}"
    return f"{host_name(info, node_device(info, rank)[0])}_{pid}_{stamp}_ascend_pt"


def rank_pid(rank: int) -> int:
    """OS pid of the training process of a rank."""
    return 3096504 + rank * 7919 % 900000


def _clock_shifted(cl: Cluster, r: int, off: int) -> Cluster:
    """``cl`` as rank ``r``'s files see it when its host clock runs ``off`` ns ahead of the others'.

    Every time of rank ``r`` (kernels, launches, collectives, step bounds, GC pauses) is shifted by
    ``off``; the other ranks' rows and every duration are unchanged (``RunInfo.clock_offset_ns``).
    """
    steps: list[StepRec] = []
    for st in cl.steps:
        k_start = st.k_start.copy()
        k_start[r] += off
        k_api = st.k_api_start.copy()
        k_api[r] += off
        ops: list[OpRec] = []
        for op in st.ops:
            s0, e0, a0 = op.start.copy(), op.end.copy(), op.api_start.copy()
            s0[r] += off
            e0[r] += off
            a0[r] += off
            ops.append(dataclasses.replace(op, start=s0, end=e0, api_start=a0))
        rs = st.r_start.copy() if st.r_start is not None else np.full(cl.ranks, st.start)
        re_ = st.r_end.copy() if st.r_end is not None else np.full(cl.ranks, st.end)
        rs[r] += off
        re_[r] += off
        gc = [(g, a + off, b + off) if g == r else (g, a, b) for g, a, b in st.gc]
        steps.append(
            dataclasses.replace(
                st,
                k_start=k_start,
                k_api_start=k_api,
                ops=ops,
                r_start=rs,
                r_end=re_,
                gc=gc,
            )
        )
    return dataclasses.replace(cl, steps=steps)


def write_rank(cl: Cluster, r: int, out: Path, info: RunInfo) -> dict[str, Any]:
    """Write one rank's ``*_ascend_pt`` folder.

    Returns:
        Per-step breakdown in µs (``computing_us``, ``comm_not_overlapped_us``, ``overlapped_us``,
        ``communication_us``, ``free_us``, ``step_us``) and the folder name.
    """
    off = (info.clock_offset_ns or {}).get(r, 0)
    if off:
        cl = _clock_shifted(cl, r, off)
    pid = rank_pid(r)
    dev = node_device(info, r)[1]
    hw_pid = (pid << 10) | (HW_SORT << 5) | dev
    cann_pid = (pid << 10) | (CANN_SORT << 5) | dev
    hccl_pid = (pid << 10) | (HCCL_SORT << 5) | dev
    ov_pid = (pid << 10) | (OVERLAP_SORT << 5) | dev
    host_tid = pid + 3198
    alg_type = (info.rank_alg_type or {}).get(r, "MESH-RING")
    last_end = cl.steps[-1].end
    folder = out / rank_folder_name(r, pid, last_end + 350_000_000 + r * 1_000_000, info)
    po = folder / "ASCEND_PROFILER_OUTPUT"
    po.mkdir(parents=True, exist_ok=True)
    kstatic = [_kernel_static(k) for k in cl.kernels]

    k_lines = [KERNEL_HEADER]
    step_lines = [STEP_HEADER]
    ev: list[str] = []
    comm_json: dict[str, Any] = {}
    matrix_json: dict[str, Any] = {}
    op_stat: dict[tuple[str, str], list[float]] = {}
    breakdown: list[dict[str, float]] = []
    na_tail = ",".join(["N/A"] * (N_KERNEL_COLS - 12))
    task_id = 11051
    conn = 900
    mem_lines = [MEM_HEADER]
    # records for the DB export: kernels, HCCL ops, overlap intervals, memory samples
    db: dict[str, list[Any]] = {
        "k": [],
        "op": [],
        "ov": [],
        "mem": [],
        "step": [],
        "api": [],
        "gc": [],
        "freq": [],
        "kg": [],  # graph-mode kernels (Perturb.model_ids): (index in "k", model id, launched)
    }

    # metadata events
    ev.append(
        f'{{"ph": "M", "name": "process_name", "pid": {pid}, "tid": 0, "args": {{"name": "Python"}}}}'
    )
    ev.append(
        f'{{"ph": "M", "name": "process_labels", "pid": {pid}, "tid": 0, "args": {{"labels": "CPU"}}}}'
    )
    ev.append(
        f'{{"ph": "M", "name": "process_sort_index", "pid": {pid}, "tid": 0, "args": {{"sort_index": 0}}}}'
    )
    ev.append(
        f'{{"ph": "M", "name": "thread_name", "pid": {pid}, "tid": {pid}, "args": {{"name": "Thread {pid}"}}}}'
    )
    ev.append(
        f'{{"ph": "M", "name": "thread_sort_index", "pid": {pid}, "tid": {pid}, "args": {{"sort_index": {pid}}}}}'
    )
    for p, pname, label, sort, threads in (
        (hw_pid, "Ascend Hardware", "NPU", HW_SORT, [(COMPUTE_STREAM, f"Stream {COMPUTE_STREAM}")]),
        (hccl_pid, "HCCL", "NPU", HCCL_SORT, [(0, "Group 0 Communication")]),
        (cann_pid, "CANN", "CPU", CANN_SORT, [(host_tid, f"Thread {host_tid}")]),
        (
            ov_pid,
            "Overlap Analysis",
            "NPU",
            OVERLAP_SORT,
            [
                (0, "Computing"),
                (1, "Communication"),
                (2, "Communication(Not Overlapped)"),
                (3, "Free"),
            ],
        ),
    ):
        ev.append(
            f'{{"name": "process_name", "pid": {p}, "tid": 0, "args": {{"name": "{pname}"}}, "ph": "M"}}'
        )
        for tid, tname in threads:
            ev.append(
                f'{{"name": "thread_name", "pid": {p}, "tid": {tid}, "args": {{"name": "{tname}"}}, "ph": "M"}}'
            )
            ev.append(
                f'{{"name": "thread_sort_index", "pid": {p}, "tid": {tid}, "args": {{"sort_index": {tid}}}, "ph": "M"}}'
            )
        ev.append(
            f'{{"name": "process_labels", "pid": {p}, "tid": 0, "args": {{"labels": "{label}"}}, "ph": "M"}}'
        )
        ev.append(
            f'{{"name": "process_sort_index", "pid": {p}, "tid": 0, "args": {{"sort_index": {sort}}}, "ph": "M"}}'
        )

    # kernel templates as written (the program's, then per-rank swaps, see Perturb.kernel_swap)
    written = list(cl.kernels)
    swap_idx: dict[int, int] = {}
    for si, st in enumerate(cl.steps):
        sid = st.step_id
        st_start, st_end = st.bounds(r)
        rows: list[tuple[int, str]] = []
        comp_iv: list[tuple[int, int]] = []
        comm_iv: list[tuple[int, int]] = []
        recv_ns = 0
        ev.append(
            f'{{"ph": "X", "name": "ProfilerStep#{sid}", "pid": {pid}, "tid": {pid}, "ts": "{ts_str(st_start)}", '
            f'"dur": {us(st_end - st_start)}, "cat": "cpu_op", "args": {{"Sequence number": -1, "Fwd thread id": 0}}}}'
        )
        prev_end = None
        ks = st.k_start[r].tolist()
        kd = st.k_dur[r].tolist()
        ka = st.k_api_start[r].tolist()
        kad = st.k_api_dur[r].tolist()
        kp = st.k_present[r].tolist() if st.k_present is not None else None
        skip = cl.perturb.skip_kernels.get(r)
        step_skip = cl.perturb.step_skip_kernels.get(si, {}).get(r)
        if step_skip:
            skip = set(skip or ()) | step_skip
        copies = cl.perturb.h2d_copies.get(r)
        dev_copies = cl.perturb.dev_copies.get(r)
        alloc_at = cl.perturb.alloc_calls.get(si, {}).get(r) if cl.perturb.alloc_calls else None
        py_at = cl.perturb.py_calls.get(si, {}).get(r) if cl.perturb.py_calls else None
        host_ops = cl.perturb.host_ops.get(r) if cl.perturb.host_ops else None
        launch_py = cl.perturb.launch_py_frames.get(r) if cl.perturb.launch_py_frames else None
        host_calls = cl.perturb.host_calls.get(r) if cl.perturb.host_calls else None
        step_calls = (
            cl.perturb.step_host_calls.get(si, {}).get(r) if cl.perturb.step_host_calls else None
        )
        pulls_at = (
            cl.perturb.step_d2h_pulls.get(si, {}).get(r) if cl.perturb.step_d2h_pulls else None
        )
        if py_at:
            # Python frames run inline before the step's first launch (Perturb.py_calls)
            ev.extend(_py_call_events(py_at, st_start, int(ka[0]), pid))
        graphs = bool(cl.perturb.model_ids)
        prev_mid: int | None = None  # graph model id of the previous kernel written (graph mode)
        prev_in_graph = False  # the previous kernel written had no launch of its own
        last_launch_end = st_start
        for j, k0 in enumerate(cl.kernels):
            if skip and j in skip:
                continue  # not run on this rank (Perturb.skip_kernels)
            k = cl.perturb.kernel_at(si, r, j, k0)
            mid = cl.perturb.model_id_at(si, j) if graphs else None
            # a later kernel of the same graph execution: launched with the graph (Perturb.model_ids)
            in_graph = mid is not None and mid == prev_mid
            kw = j
            if k is not k0:
                if id(k) not in swap_idx:
                    swap_idx[id(k)] = len(written)
                    written.append(k)
                kw = swap_idx[id(k)]
            s0 = ks[j]
            d = kd[j]
            if kp is not None and not kp[j]:
                # device record lost: the host launch is there, no device task, no flow
                a0 = ka[j]
                ev.append(
                    f'{{"name": "AscendCL@{k.api}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(a0)}", "dur": {us(int(kad[j]))}, '
                    f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_OP", "level": "acl", "id": "{k.api}", "item_id": "0", "connection_id": {conn}}}, "ph": "X"}}'
                )
                db["api"].append((a0, kad[j], conn, k.api, 20000))
                conn += 1
                continue
            syncs = cl.perturb.host_syncs.get(r)
            if syncs and j in syncs and j > 0:
                # tensor.item(): the host blocks in a stream synchronize from just after the
                # previous launch until the device has run everything queued
                y0 = int(ka[j - 1] + kad[j - 1]) + 2_000
                if prev_in_graph:  # the previous kernel came with its graph's launch
                    y0 = last_launch_end + 2_000
                y1 = int(ks[j - 1] + kd[j - 1]) + 5_000
                if y1 > y0:
                    ev.append(
                        f'{{"ph": "X", "name": "aten::item", "pid": {pid}, "tid": {pid}, "ts": "{ts_str(y0 - 1_000)}", '
                        f'"dur": {us(y1 - y0 + 2_000)}, "cat": "cpu_op", "args": {{"Sequence number": -1, "Fwd thread id": 0}}}}'
                    )
                    ev.append(
                        f'{{"name": "AscendCL@aclrtSynchronizeStream", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(y0)}", "dur": {us(y1 - y0)}, '
                        f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtSynchronizeStream", "item_id": "0"}}, "ph": "X"}}'
                    )
            if copies and j in copies:
                ev.extend(_h2d_copy_events(copies[j], j, ka, kad, ks, kd, pid, cann_pid, host_tid))
            if alloc_at and j in alloc_at and j > 0:
                # the caching allocator goes to the device (Perturb.alloc_calls)
                drain = int(ks[j - 1] + kd[j - 1])
                for op in st.ops:
                    if drain < int(op.end[r]) <= s0:
                        drain = int(op.end[r])
                ev.extend(_alloc_call_events(alloc_at[j], j, ka, kad, drain, cann_pid, host_tid))
            pulls = pulls_at.get(j) if pulls_at else None
            if pulls:
                # the host copies tensors to itself and works on them (Perturb.step_d2h_pulls)
                h0 = (int(ka[j - 1] + kad[j - 1]) if j > 0 else st_start) + HOST_CALL_LEAD_NS
                dev0 = st_start if prev_end is None else prev_end
                pev, task_id, conn, last = _d2h_pull_events(
                    pulls, h0, dev0, (pid, cann_pid, hw_pid, host_tid), task_id, conn
                )
                ev.extend(pev)
                prev_end = last
            hcalls = step_calls.get(j) if step_calls else None
            if hcalls is None and host_calls:
                hcalls = host_calls.get(j)
            calls_end = None
            if hcalls:
                # CANN runtime calls before this launch (Perturb.host_calls / step_host_calls)
                h0 = (int(ka[j - 1] + kad[j - 1]) if j > 0 else st_start) + HOST_CALL_LEAD_NS
                placed: list[tuple[int, int, HostCall]] = []
                hev, calls_end = _host_call_events(hcalls, h0, pid, cann_pid, host_tid, placed)
                ev.extend(hev)
                if placed:
                    # calls that queue in-stream copies, with their MEMCPY_ASYNC tasks
                    dev0 = st_start if prev_end is None else prev_end
                    cev, task_id, conn, last = _host_copy_events(
                        placed, dev0, (pid, cann_pid, hw_pid, host_tid), task_id, conn
                    )
                    ev.extend(cev)
                    prev_end = last
            dcop = dev_copies.get(j) if dev_copies else None
            if dcop:
                # in-stream memory copies right before the kernel (Perturb.dev_copies)
                gap0 = st_start if prev_end is None else prev_end
                host0 = int(ka[j - 1] + kad[j - 1]) if j > 0 else st_start
                if calls_end is not None:  # the copies follow the host's calls
                    gap0 = max(gap0, calls_end)
                    host0 = max(host0, calls_end)
                cev, task_id, conn, last = _dev_copy_events(
                    dcop,
                    gap0,
                    s0,
                    host0,
                    int(ka[j]),
                    pid,
                    cann_pid,
                    hw_pid,
                    host_tid,
                    task_id,
                    conn,
                )
                ev.extend(cev)
                prev_end = last
            hop = host_ops.get(j) if host_ops and j > 0 else None
            if hop is not None:
                # the host runs an operator itself before this launch (Perturb.host_ops)
                hev, task_id, conn, last = _host_op_events(
                    hop,
                    st_start if prev_end is None else prev_end,
                    s0,
                    int(ka[j - 1] + kad[j - 1]),
                    int(ka[j]),
                    (pid, cann_pid, hw_pid, host_tid),
                    task_id,
                    conn,
                )
                ev.extend(hev)
                prev_end = last
            wait = 0 if prev_end is None else us(s0 - prev_end)
            prev_end = s0 + d
            comp_iv.append((s0, s0 + d))
            du = us(d)
            name_col, shp = kstatic[j] if k is k0 else _kernel_static(k)
            model = 4294967295 if mid is None else mid
            rows.append(
                (
                    s0,
                    f"{sid},{model},{task_id},{COMPUTE_STREAM},{name_col},{ts_str(s0)}\t,{du},{wait},{shp},{_pmu(k, du)}",
                )
            )
            a0 = ka[j]
            pyf = launch_py.get(j) if launch_py and j > 0 else None
            if pyf is not None:
                # Python frames right before this launch (Perturb.launch_py_frames)
                ev.extend(_launch_py_events(pyf, int(ka[j - 1] + kad[j - 1]), int(a0), pid))
            if in_graph:
                # a task of the graph execution launched with the run's first kernel: no launch
                ev.append(
                    f'{{"name": "{k.name}", "pid": {hw_pid}, "tid": {COMPUTE_STREAM}, "ts": "{ts_str(s0)}", "dur": {du}, '
                    f'"args": {{"Model Id": {model}, "Task Type": "{k.core}", "Physic Stream Id": {COMPUTE_STREAM}, "Task Id": {task_id}, '
                    f'"Batch Id": 0, "Subtask Id": 4294967295}}, "ph": "X"}}'
                )
            else:
                api, mode = (k.api, "ACL_OP") if mid is None else (GRAPH_LAUNCH_API, "ACL_MODEL")
                ev.append(
                    f'{{"name": "AscendCL@{api}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(a0)}", "dur": {us(int(kad[j]))}, '
                    f'"args": {{"Thread Id": {host_tid}, "Mode": "{mode}", "level": "acl", "id": "{api}", "item_id": "0", "connection_id": {conn}}}, "ph": "X"}}'
                )
                ev.append(
                    f'{{"name": "HostToDevice{conn}", "ph": "s", "cat": "HostToDevice", "id": "{conn}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(a0)}"}}'
                )
                ev.append(
                    f'{{"name": "{k.name}", "pid": {hw_pid}, "tid": {COMPUTE_STREAM}, "ts": "{ts_str(s0)}", "dur": {du}, '
                    f'"args": {{"Model Id": {model}, "Task Type": "{k.core}", "Physic Stream Id": {COMPUTE_STREAM}, "Task Id": {task_id}, '
                    f'"Batch Id": 0, "Subtask Id": 4294967295, "connection_id": {conn}}}, "ph": "X"}}'
                )
                ev.append(
                    f'{{"name": "HostToDevice{conn}", "ph": "f", "id": "{conn}", "ts": "{ts_str(s0)}", "cat": "HostToDevice", "pid": {hw_pid}, "tid": {COMPUTE_STREAM}, "bp": "e"}}'
                )
                last_launch_end = int(a0 + kad[j])
            acc = op_stat.setdefault((k.op_type, k.core), [])
            acc.append(du)
            if mid is not None:
                db["kg"].append((len(db["k"]), mid, not in_graph))
            db["k"].append((s0, d, conn, task_id, kw, round(wait * 1000), a0, kad[j]))
            prev_mid, prev_in_graph = mid, in_graph
            task_id += 1
            conn += 1

        sections: dict[str, dict[str, Any]] = {}
        links_sec: dict[str, dict[tuple[str, str], dict[str, list[dict[str, Any]]]]] = {}
        prev_op_end = None
        waits = cl.perturb.event_waits
        wait_end = 0
        hidden = cl.perturb.hidden_groups.get(r) if cl.perturb.hidden_groups else None
        for ci, op in enumerate(st.ops):
            kind = op.kind
            if hidden and kind.kind in hidden:
                continue  # not an HCCL operation on this rank (Perturb.hidden_groups)
            g = int(kind.gidx[r])
            h = kind.hashes[g]
            op_type = op.item.op_type_of(int(kind.local[r]))
            name = f"{op_type}_{h[-3:]}_{op.index}_1"
            sec = "p2p" if op.item.peer_op else "collective"
            if sec not in sections:
                sections[sec] = {
                    "ops": {},
                    "tot": {
                        "Elapse Time(ms)": 0.0,
                        "Transit Time(ms)": 0.0,
                        "Wait Time(ms)": 0.0,
                        "Synchronization Time(ms)": 0.0,
                        "Idle Time(ms)": 0.0,
                    },
                    "bw": {
                        t: {"Transit Time(ms)": 0, "Transit Size(MB)": 0, "Size Distribution": {}}
                        for t in ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
                    },
                }
                links_sec[sec] = {}
            coll: dict[str, Any] = sections[sec]["ops"]
            tot: dict[str, float] = sections[sec]["tot"]
            tot_bw: dict[str, dict[str, Any]] = sections[sec]["bw"]
            links_by_key = links_sec[sec]
            api = "Hccl" + op_type[5:-1][:1].upper() + op_type[6:-1]
            if op.present is not None and not op.present[r]:
                # device record lost: only the host launch remains
                a0 = int(op.api_start[r])
                ev.append(
                    f'{{"name": "AscendCL@{api}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(a0)}", "dur": {us(int(kad[0]))}, '
                    f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_OP", "level": "acl", "id": "{api}", "item_id": "0", "connection_id": {conn}}}, "ph": "X"}}'
                )
                db["api"].append((a0, kad[0], conn, api, 5500))
                conn += 1
                continue
            s0 = int(op.start[r])
            e0 = int(op.end[r])
            comm_iv.append((s0, e0))
            dur = us(e0 - s0)
            if op_type.startswith("hcom_receive"):
                recv_ns += e0 - s0
            wait_k = 0 if prev_op_end is None else us(max(s0 - prev_op_end, 0))
            prev_op_end = e0
            rows.append(
                (
                    s0,
                    f"{sid},4294967295,N/A,N/A,{name},{op_type},N/A,HCCL,{ts_str(s0)}\t,{dur},{wait_k},0,{na_tail}",
                )
            )
            fid = FLOW_ID_BASE + conn
            a0 = int(op.api_start[r])
            ev.append(
                f'{{"name": "AscendCL@{api}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(a0)}", "dur": {us(int(kad[0]))}, '
                f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_OP", "level": "acl", "id": "{api}", "item_id": "0", "connection_id": {conn}}}, "ph": "X"}}'
            )
            ev.append(
                f'{{"name": "HostToDevice{fid}", "ph": "s", "cat": "HostToDevice", "id": "{fid}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(a0)}"}}'
            )
            count = op.item.count or int(op.item.size_mb * 1e6 / 2)
            ev.append(
                f'{{"name": "{name}", "pid": {hccl_pid}, "tid": 0, "ts": "{ts_str(s0)}", "dur": {dur}, '
                f'"args": {{"connection_id": {conn}, "model id": 4294967295, "data_type": "{op.item.dtype}", "alg_type": "{alg_type}", "count": {count}}}, "ph": "X"}}'
            )
            ev.append(
                f'{{"name": "HostToDevice{fid}", "ph": "f", "id": "{fid}", "ts": "{ts_str(s0)}", "cat": "HostToDevice", "pid": {hccl_pid}, "tid": 0, "bp": "e"}}'
            )
            db["op"].append(
                (
                    name,
                    s0,
                    e0,
                    conn,
                    kind.comm_names[g],
                    op_type,
                    op.item.dtype,
                    count,
                    a0,
                    kad[0],
                    round(wait_k * 1000),
                )
            )
            conn += 1
            if waits and ci in waits:
                # the compute stream waits on the event the communication stream records at the end
                # of the collective (Perturb.event_waits)
                w0 = max(
                    [wait_end, st_start]
                    + [ks[q] + kd[q] for q in range(len(ks)) if ks[q] + kd[q] <= s0 and kd[q] > 0]
                )
                wait_end = e0
                ev.extend(
                    _event_wait_events(
                        a0 + int(kad[0]), w0, e0, cann_pid, hw_pid, host_tid, task_id, conn
                    )
                )
                task_id += 1
                conn += 1
            # bandwidth per transport (master plane, one packet per link)
            mb = {"HCCS": 0.0, "RDMA": 0.0}
            ms = {"HCCS": 0.0, "RDMA": 0.0}
            pk: dict[str, dict[float, list[Any]]] = {"HCCS": {}, "RDMA": {}}
            lk = links_by_key.setdefault((name, h), {})
            loc = int(kind.local[r])
            for jj in range(kind.peer.shape[1]):
                tr = int(kind.transport[r, jj])
                if tr < 0:
                    continue
                lmb = float(op.link_mb[r, jj])
                lms = float(op.link_ms[r, jj])
                tname = TRANSPORTS[tr]
                peer_local = int(kind.local[int(kind.peer[r, jj])])
                lk.setdefault(f"{loc}-{peer_local}", []).append(
                    {
                        "Transport Type": tname,
                        "Transit Size(MB)": lmb,
                        "Transit Time(ms)": lms,
                        "Bandwidth(GB/s)": round(lmb / lms, 4),
                        "Op Name": name,
                    }
                )
                if tr == 2:
                    continue
                mb[tname] += lmb
                ms[tname] += lms
                n_pk = op.item.chunks  # one transfer per loop through the HCCL buffer
                key = round(lmb / n_pk, 6) if n_pk > 1 else round(lmb, 6)
                ent = pk[tname].setdefault(key, [0, 0.0])
                ent[0] += n_pk
                ent[1] += lms
            transit = ms["HCCS"] + ms["RDMA"]
            sync = int(op.sync_ns[r]) / 1e6
            wait = sync + float(op.wait_extra_ms[r])
            elapse = (e0 - s0) / 1e6
            idle = max(elapse - transit - wait, 0.0)  # (float rounding can leave -1e-7 ms)
            hccs = _block(mb["HCCS"], ms["HCCS"], pk["HCCS"], 32.0)
            rdma = _block(mb["RDMA"], ms["RDMA"], pk["RDMA"], 0.5)
            empty = _block(0, 0, {}, 0)
            sdma = dict(empty)
            if ms["HCCS"] > 0:
                sdma = {
                    "Transit Size(MB)": mb["HCCS"],
                    "Transit Time(ms)": ms["HCCS"],
                    "Bandwidth(GB/s)": round(mb["HCCS"] / ms["HCCS"], 4),
                    "Large Packet Ratio": 0,
                    "Size Distribution": {},
                }
            coll[f"{name}@{h}"] = {
                "Communication Time Info": {
                    "Start Timestamp(us)": s0 / 1000,
                    "Elapse Time(ms)": elapse,
                    "Transit Time(ms)": transit,
                    "Wait Time(ms)": wait,
                    "Synchronization Time(ms)": sync,
                    "Idle Time(ms)": idle,
                    "Wait Time Ratio": _ratio(wait, transit),
                    "Synchronization Time Ratio": _ratio(sync, transit),
                },
                "Communication Bandwidth Info": {
                    "RDMA": rdma,
                    "HCCS": hccs,
                    "PCIE": dict(empty),
                    "SDMA": sdma,
                    "SIO": dict(empty),
                },
            }
            for kk, vv in (
                ("Elapse Time(ms)", elapse),
                ("Transit Time(ms)", transit),
                ("Wait Time(ms)", wait),
                ("Synchronization Time(ms)", sync),
                ("Idle Time(ms)", idle),
            ):
                tot[kk] += vv
            for tname, blk in (("RDMA", rdma), ("HCCS", hccs), ("SDMA", sdma)):
                tb = tot_bw[tname]
                tb["Transit Time(ms)"] += blk["Transit Time(ms)"]
                tb["Transit Size(MB)"] += blk["Transit Size(MB)"]
                for pkey, (cnt, tms) in blk["Size Distribution"].items():
                    ent = tb["Size Distribution"].setdefault(pkey, [0, 0.0])
                    ent[0] += cnt
                    ent[1] += tms
        step_comm: dict[str, Any] = {"p2p": {}, "collective": {}}
        step_matrix: dict[str, Any] = {"p2p": {}, "collective": {}}
        for sec, part in sections.items():
            tot = part["tot"]
            tinfo: dict[str, Any] = dict(tot)
            tinfo["Wait Time Ratio"] = _ratio(tot["Wait Time(ms)"], tot["Transit Time(ms)"])
            tinfo["Synchronization Time Ratio"] = _ratio(
                tot["Synchronization Time(ms)"], tot["Transit Time(ms)"]
            )
            part["ops"]["Total Op Info"] = {
                "Communication Time Info": tinfo,
                "Communication Bandwidth Info": part["bw"],
            }
            step_comm[sec] = part["ops"]
            step_matrix[sec] = _matrix(links_sec[sec])
        comm_json[f"step{sid}"] = step_comm
        matrix_json[f"step{sid}"] = step_matrix

        # Overlap Analysis + step breakdown
        iv = overlap_intervals(comp_iv, comm_iv, st_start, st_end)
        sums = {n: sum(b - a for a, b in v) for n, v in iv.items()}
        tid_of = {"Computing": 0, "Communication": 1, "Communication(Not Overlapped)": 2, "Free": 3}
        ov = sorted((a, tid_of[n], n, b) for n, v in iv.items() for a, b in v)
        db["ov"].extend((a, b, tid) for a, tid, _n, b in ov)
        db["step"].append((sid, st_start, st_end))
        for a, tid, n, b in ov:
            ev.append(
                f'{{"name": "{n}", "pid": {ov_pid}, "tid": {tid}, "ts": "{ts_str(a)}", "dur": {us(b - a)}, "ph": "X"}}'
            )
        first_busy = min(
            iv["Computing"][0][0] if iv["Computing"] else st_end,
            iv["Communication"][0][0] if iv["Communication"] else st_end,
        )
        comp_us = us(sums["Computing"])
        notov_us = us(sums["Communication(Not Overlapped)"])
        comm_us = us(sums["Communication"])
        free_us = us(sums["Free"])
        overl = us(sums["Communication"] - sums["Communication(Not Overlapped)"])
        span = us(st_end - st_start)
        bubble = us(recv_ns)
        stage = span - bubble if recv_ns else span
        excl = max(notov_us - bubble, 0.0) if recv_ns else notov_us
        prep = us(first_busy - st_start)
        step_lines.append(
            f"{sid},{comp_us},{notov_us},{overl},{comm_us},{free_us},{stage},"
            f"{bubble if recv_ns else 0},{excl},{prep}"
        )
        breakdown.append(
            {
                "step": sid,
                "computing_us": comp_us,
                "comm_not_overlapped_us": notov_us,
                "overlapped_us": overl,
                "communication_us": comm_us,
                "free_us": free_us,
                "step_us": span,
                "preparing_us": prep,
                "bubble_us": bubble,
                "stage_us": stage,
                "comm_not_overlapped_excl_receive_us": excl,
            }
        )
        rows.sort(key=lambda x: x[0])
        k_lines.extend(line for _, line in rows)
        mem_plan = cl.perturb.mem_record.get(r)
        if mem_plan is not None:
            # the caching allocator's totals (PTA) and the process' reservation (APP) per sample
            for j, alloc, resv, act in mem_plan[si]:
                t = int(ks[j])
                app = round(resv + APP_EXTRA_MB, 3)
                mem_lines.append(
                    f"PTA,{ts_str(t)}\t,{alloc},{resv},{act},{PTA_STREAM_PTR},NPU:{dev}"
                )
                mem_lines.append(f"APP,{ts_str(t)}\t,,{app},,,NPU:{dev}")
                db["mem"].append((t, resv, "PTA", alloc, act))
                db["mem"].append((t, app))
        else:
            base_mb = 20000.0 + 37.5 * (r % 8)
            for q in range(4):
                t = st_start + (st_end - st_start) * q // 4
                mem_lines.append(f"APP,{ts_str(t)}\t,,{base_mb + q * 2.0},,,NPU:{dev}")
                db["mem"].append((t, base_mb + q * 2.0))

    # Python GC pauses (gc_detect_threshold): X events cat "GC" on the "Python GC" process, then its
    # metadata (torch_npu FwkFileParser.get_gc_record_trace_data, TraceEventManager.create_gc_m_event)
    gcs = [(a, b) for st in cl.steps for rr, a, b in st.gc if rr == r]
    if gcs and info.gc_detect_threshold_ms is not None:
        gc_pid = (pid << 10) | (1 << 5) | dev
        for a, b in gcs:
            ev.append(
                f'{{"ph": "X", "name": "GC", "pid": {gc_pid}, "tid": {pid}, "ts": "{ts_str(a)}", '
                f'"dur": {us(b - a)}, "cat": "GC", "args": {{}}}}'
            )
            db["gc"].append((a, b, (pid << 32) | pid))
        ev.append(
            f'{{"ph": "M", "name": "process_name", "pid": {gc_pid}, "tid": 0, "args": {{"name": "Python GC"}}}}'
        )
        ev.append(
            f'{{"ph": "M", "name": "process_labels", "pid": {gc_pid}, "tid": 0, "args": {{"labels": "CPU"}}}}'
        )
        ev.append(
            f'{{"ph": "M", "name": "process_sort_index", "pid": {gc_pid}, "tid": 0, "args": {{"sort_index": 1}}}}'
        )
        ev.append(
            f'{{"ph": "M", "name": "thread_name", "pid": {gc_pid}, "tid": {pid}, "args": {{"name": "Python GC"}}}}'
        )
        ev.append(
            f'{{"ph": "M", "name": "thread_sort_index", "pid": {gc_pid}, "tid": {pid}, "args": {{"sort_index": {pid}}}}}'
        )

    # the AI Core Freq counter track (torch_npu: process "AI Core Freq", C events with args MHz):
    # a sample at the start of the capture, one at each clock change (a step start), one at the end
    plan = dict(cl.perturb.aicore_mhz.get(r, []))
    cur = plan.get(0, AICORE_MHZ)
    samples = [(cl.steps[0].bounds(r)[0], cur)]
    for si in range(1, len(cl.steps)):
        if plan.get(si, cur) != cur:
            cur = plan[si]
            samples.append((cl.steps[si].bounds(r)[0], cur))
    samples.append((cl.steps[-1].bounds(r)[1], cur))
    freq_pid = (pid << 10) | (FREQ_SORT << 5) | dev
    for t, f in samples:
        mhz = int(f) if float(f).is_integer() else round(float(f), 1)
        ev.append(
            f'{{"name": "AI Core Freq", "ts": "{ts_str(t)}", "pid": {freq_pid}, "tid": 0, '
            f'"args": {{"MHz": {mhz}}}, "ph": "C"}}'
        )
        db["freq"].append((t, mhz))
    for name, args in (
        ("process_name", '{"name": "AI Core Freq"}'),
        ("process_labels", '{"labels": "NPU"}'),
        ("process_sort_index", f'{{"sort_index": {FREQ_SORT}}}'),
    ):
        ev.append(f'{{"name": "{name}", "pid": {freq_pid}, "tid": 0, "args": {args}, "ph": "M"}}')

    # op_statistic: sorted by total time desc, ratio over all compute kernels
    total_all = sum(sum(v) for v in op_stat.values())
    stat_rows = []
    for (ot, core), vals in op_stat.items():
        tt = sum(vals)
        stat_rows.append(
            (
                tt,
                [
                    ot,
                    core,
                    len(vals),
                    round(tt, 3),
                    round(min(vals), 3),
                    round(tt / len(vals), 3),
                    round(max(vals), 3),
                    round(tt / total_all * 100, 3),
                ],
            )
        )
    stat_rows.sort(key=lambda x: -x[0])

    if info.export == "db":
        from advisor_chat.synth.dbwriter import write_db

        md_text = _metadata_text(cl, r, info)
        write_db(
            po,
            r,
            dev,
            pid,
            host_tid,
            written,
            db,
            comm_json,
            matrix_json,
            breakdown,
            json.loads(md_text),
            host=(node_device(info, r)[0], host_name(info, node_device(info, r)[0])),
        )
        # msprof-analyze reads distributed_args / parallel_group_info from this file in DB mode too
        (folder / "profiler_metadata.json").write_text(md_text, encoding="utf-8")
        (folder / f"profiler_info_{r}.json").write_text(
            json.dumps(_profiler_info(cl, r, info), indent=4), encoding="utf-8"
        )
        _write_device_info(cl, r, folder, info)
        return {"rank": r, "folder": folder.name, "steps": breakdown}
    (po / "kernel_details.csv").write_bytes(("\r\n".join(k_lines) + "\r\n").encode())
    (po / "step_trace_time.csv").write_bytes(("\r\n".join(step_lines) + "\r\n").encode())
    (po / "op_statistic.csv").write_bytes(
        (OPSTAT_HEADER + "\r\n" + _csv_text([x[1] for x in stat_rows])).encode()
    )
    (po / "memory_record.csv").write_bytes(("\r\n".join(mem_lines) + "\r\n").encode())
    (po / "communication.json").write_text(json.dumps(comm_json), encoding="utf-8")
    (po / "communication_matrix.json").write_text(json.dumps(matrix_json), encoding="utf-8")
    (po / "trace_view.json").write_text("[" + ", ".join(ev) + "]", encoding="utf-8")
    (folder / f"profiler_info_{r}.json").write_text(
        json.dumps(_profiler_info(cl, r, info), indent=4), encoding="utf-8"
    )
    (folder / "profiler_metadata.json").write_text(_metadata_text(cl, r, info), encoding="utf-8")
    _write_device_info(cl, r, folder, info)
    return {"rank": r, "folder": folder.name, "steps": breakdown}


H2D_TAIL_NS = 30_000  # host time between the end of a blocking copy and the next launch
MEMCPY_API_NS = 29_000  # aclrtMemcpyAsync call (queues the copy, returns)


def _dev_copy_events(
    copies: list[tuple[str, int, float]],
    gap0: int,
    k0: int,
    host0: int,
    launch: int,
    pid: int,
    cann_pid: int,
    hw_pid: int,
    host_tid: int,
    task_id: int,
    conn: int,
) -> tuple[list[str], int, int, int]:
    """Trace events of in-stream memory copies run between ``gap0`` and the kernel starting at ``k0``.

    The device runs them back to back, centred in the idle gap (``MEMCPY_ASYNC`` tasks on the compute
    stream with ``size(B)``, ``bandwidth(GB/s)`` and ``operation``); the host queues each with an
    ``aclrtMemcpyAsync`` (inside an ``aten::copy_``), as far ahead of its copy as the kernel's launch
    at ``launch`` is ahead of the kernel, after the previous launch (ending at ``host0``) and before
    the kernel's, linked by a HostToDevice flow.

    Returns:
        The events, the next task id and connection id, and the end (ns) of the last copy.
    """
    durs = [round(c[2] * 1000) for c in copies]
    slack = max(k0 - gap0 - sum(durs) - (len(durs) - 1) * 1_000, 0)  # 1 µs between copies
    t = gap0 + slack // 2
    step_ns = MEMCPY_API_NS + 6_000
    lead = k0 - launch
    a = host0 + 3_000
    out: list[str] = []
    for i, ((operation, nbytes, _us), d) in enumerate(zip(copies, durs, strict=True)):
        a = min(max(a, t - lead), launch - (len(copies) - i) * step_ns)
        bw = round(nbytes / d, 4) if d else 0.0  # bytes per ns = GB/s
        out.append(
            f'{{"ph": "X", "name": "aten::copy_", "pid": {pid}, "tid": {pid}, "ts": "{ts_str(a - 2_000)}", '
            f'"dur": {us(MEMCPY_API_NS + 4_000)}, "cat": "cpu_op", "args": {{"Sequence number": -1, "Fwd thread id": 0}}}}'
        )
        out.append(
            f'{{"name": "AscendCL@aclrtMemcpyAsync", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(a)}", "dur": {us(MEMCPY_API_NS)}, '
            f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtMemcpyAsync", "item_id": "0", "connection_id": {conn}}}, "ph": "X"}}'
        )
        out.append(
            f'{{"name": "HostToDevice{conn}", "ph": "s", "cat": "HostToDevice", "id": "{conn}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(a)}"}}'
        )
        out.append(
            f'{{"name": "MEMCPY_ASYNC", "pid": {hw_pid}, "tid": {COMPUTE_STREAM}, "ts": "{ts_str(t)}", "dur": {us(d)}, '
            f'"args": {{"Model Id": 4294967295, "Task Type": "MEMCPY_ASYNC", "Physic Stream Id": {COMPUTE_STREAM}, "Task Id": {task_id}, '
            f'"Batch Id": 0, "Subtask Id": 4294967295, "connection_id": {conn}, "size(B)": {nbytes}, '
            f'"bandwidth(GB/s)": {bw}, "operation": "{operation}"}}, "ph": "X"}}'
        )
        out.append(
            f'{{"name": "HostToDevice{conn}", "ph": "f", "id": "{conn}", "ts": "{ts_str(t)}", "cat": "HostToDevice", "pid": {hw_pid}, "tid": {COMPUTE_STREAM}, "bp": "e"}}'
        )
        t += d + 1_000
        a += step_ns
        task_id += 1
        conn += 1
    return out, task_id, conn, t - 1_000


def _memcpy_task_events(
    operation: str,
    nbytes: int,
    call: int,
    t: int,
    d: int,
    ids: tuple[int, int, int, int],
    task_id: int,
    conn: int,
) -> list[str]:
    """An ``aclrtMemcpyAsync`` call at ``call`` and its ``MEMCPY_ASYNC`` task on the compute stream.

    The task runs [t, t + d) and is linked to the call by a HostToDevice flow.
    """
    _pid, cann_pid, hw_pid, host_tid = ids
    bw = round(nbytes / d, 4) if d else 0.0  # bytes per ns = GB/s
    return [
        f'{{"name": "AscendCL@aclrtMemcpyAsync", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(call)}", "dur": {us(MEMCPY_API_NS)}, '
        f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtMemcpyAsync", "item_id": "0", "connection_id": {conn}}}, "ph": "X"}}',
        f'{{"name": "HostToDevice{conn}", "ph": "s", "cat": "HostToDevice", "id": "{conn}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(call)}"}}',
        f'{{"name": "MEMCPY_ASYNC", "pid": {hw_pid}, "tid": {COMPUTE_STREAM}, "ts": "{ts_str(t)}", "dur": {us(d)}, '
        f'"args": {{"Model Id": 4294967295, "Task Type": "MEMCPY_ASYNC", "Physic Stream Id": {COMPUTE_STREAM}, "Task Id": {task_id}, '
        f'"Batch Id": 0, "Subtask Id": 4294967295, "connection_id": {conn}, "size(B)": {nbytes}, '
        f'"bandwidth(GB/s)": {bw}, "operation": "{operation}"}}, "ph": "X"}}',
        f'{{"name": "HostToDevice{conn}", "ph": "f", "id": "{conn}", "ts": "{ts_str(t)}", "cat": "HostToDevice", "pid": {hw_pid}, "tid": {COMPUTE_STREAM}, "bp": "e"}}',
    ]


def _cpu_op(name: str, a: int, b: int, pid: int, extra: str = "") -> str:
    return (
        f'{{"ph": "X", "name": {json.dumps(name)}, "pid": {pid}, "tid": {pid}, "ts": "{ts_str(a)}", '
        f'"dur": {us(b - a)}, "cat": "cpu_op", "args": {{"Sequence number": -1, "Fwd thread id": 0{extra}}}}}'
    )


def _host_op_events(
    hop: HostOp,
    gap0: int,
    k0: int,
    host0: int,
    launch: int,
    ids: tuple[int, int, int, int],
    task_id: int,
    conn: int,
) -> tuple[list[str], int, int, int]:
    """Trace events of an operator the host runs itself in the device idle ``[gap0, k0)``.

    Device: a device-to-host ``MEMCPY_ASYNC`` right after ``gap0`` and a host-to-device one ending
    just before the kernel at ``k0``. Host (after the previous launch ending at ``host0``, before
    the kernel's launch at ``launch``): the operator's outermost frame around an ``aten::to``
    (``aclrtMemcpyAsync`` + ``aclrtSynchronizeStream`` until the copy is done), the inner frames
    (the host's own work, no CANN call) and an ``aten::copy_`` (``aclrtMemcpyAsync`` of the result).

    Returns:
        The events, the next task id and connection id, and the end (ns) of the last copy.
    """
    pid, cann_pid, _hw_pid, host_tid = ids
    d1 = round(hop.d2h_us * 1000)
    d2 = round(hop.h2d_us * 1000)
    t1 = gap0 + 2_000
    t2 = k0 - 2_000 - d2
    a0 = host0 + 2_000
    c1 = min(a0 + 3_000, t1 - MEMCPY_API_NS - 1_000)
    y0 = c1 + MEMCPY_API_NS + 1_000
    y1 = max(t1 + d1 + 5_000, y0 + 1_000)
    c2e = min(t2 - 6_000, launch - 3_000)
    c2 = c2e - MEMCPY_API_NS
    outer_end = launch - 1_000
    extra = ""
    if hop.input_dims:
        dims = json.dumps(";\r\n".join(hop.input_dims.split(";")) + ";\r\n")
        types = json.dumps(";\r\n".join(hop.input_type.split(";")))
        extra = f', "Input Dims": {dims}, "Input type": {types}'
    out = [_cpu_op(hop.frames[0], min(a0, c1 - 3_000), outer_end, pid, extra)]
    out.append(_cpu_op("aten::to", c1 - 2_000, y1 + 2_000, pid))
    out.extend(_memcpy_task_events("device to host", hop.d2h_bytes, c1, t1, d1, ids, task_id, conn))
    out.append(
        f'{{"name": "AscendCL@aclrtSynchronizeStream", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(y0)}", "dur": {us(y1 - y0)}, '
        f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtSynchronizeStream", "item_id": "0"}}, "ph": "X"}}'
    )
    w0, w1 = y1 + 4_000, c2 - 4_000
    for name in hop.frames[1:]:
        if w1 <= w0:
            break
        out.append(_cpu_op(name, w0, w1, pid))
        w0 += 2_000
        w1 -= 2_000
    out.append(_cpu_op("aten::copy_", c2 - 2_000, c2e + 2_000, pid))
    out.extend(
        _memcpy_task_events("host to device", hop.h2d_bytes, c2, t2, d2, ids, task_id + 1, conn + 1)
    )
    return out, task_id + 2, conn + 2, t2 + d2


HOST_CALL_LEAD_NS = 20_000  # host time between the previous launch (or step start) and the calls


def _host_call_events(
    calls: list[HostCall],
    h0: int,
    pid: int,
    cann_pid: int,
    host_tid: int,
    placed: list[tuple[int, int, HostCall]] | None = None,
) -> tuple[list[str], int]:
    """Trace events of CANN runtime calls laid out back to back from ``h0`` (``Perturb.host_calls``).

    Each call sits inside its ``cpu_op`` frames (nested, 1 µs inset), ``tail_us`` of host work after
    it inside the frames; the next call starts 3 µs after the outermost frame ends. A call that
    queues a copy (``HostCall.copy_bytes``) is not written here: its (start, end, call) goes to
    ``placed`` for ``_host_copy_events`` (the call with its device task and flow).

    Returns:
        The events and the end (ns) of the last call's outermost frame.
    """
    out: list[str] = []
    t = h0
    end = h0
    for c in calls:
        d = len(c.frames)
        a = t + d * 1_000 + 1_000
        b = a + round(c.us * 1000)
        fe = b + round(c.tail_us * 1000) + 1_000
        for i, name in enumerate(c.frames):
            extra = ""
            if i == 0 and c.input_dims:
                dims = json.dumps(";\r\n".join(c.input_dims.split(";")) + ";\r\n")
                types = json.dumps(";\r\n".join(c.input_type.split(";")))
                extra = f', "Input Dims": {dims}, "Input type": {types}'
            out.append(_cpu_op(name, t + i * 1_000, fe + (d - 1 - i) * 1_000, pid, extra))
        if c.api and c.copy_bytes > 0 and placed is not None:
            placed.append((a, b, c))  # written with its device task (_host_copy_events)
        elif c.api:  # "" = host work inside the frames only (no CANN call)
            out.append(
                f'{{"name": "AscendCL@{c.api}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(a)}", "dur": {us(b - a)}, '
                f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "{c.api}", "item_id": "0"}}, "ph": "X"}}'
            )
        end = fe + max(d - 1, 0) * 1_000
        t = end + 3_000
    return out, end


def _host_copy_events(
    placed: list[tuple[int, int, HostCall]],
    dev0: int,
    ids: tuple[int, int, int, int],
    task_id: int,
    conn: int,
) -> tuple[list[str], int, int, int]:
    """The calls that queue in-stream copies (``HostCall.copy_bytes``) with their device tasks.

    Each call is an ``AscendCL@{api}`` event over its span with a HostToDevice flow to a
    ``MEMCPY_ASYNC`` task on the compute stream that starts 2 µs after the call returns (no earlier
    than ``dev0`` and the previous copy's end) and lasts ``copy_us``.

    Returns:
        The events, the next task id and connection id, and the end (ns) of the last copy.
    """
    _pid, cann_pid, hw_pid, host_tid = ids
    out: list[str] = []
    free = dev0
    for a, b, c in placed:
        t = max(b + 2_000, free)
        d = max(round(c.copy_us * 1000), 1_000)
        bw = round(c.copy_bytes / d, 4)  # bytes per ns = GB/s
        out += [
            f'{{"name": "AscendCL@{c.api}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(a)}", "dur": {us(b - a)}, '
            f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "{c.api}", "item_id": "0", "connection_id": {conn}}}, "ph": "X"}}',
            f'{{"name": "HostToDevice{conn}", "ph": "s", "cat": "HostToDevice", "id": "{conn}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(a)}"}}',
            f'{{"name": "MEMCPY_ASYNC", "pid": {hw_pid}, "tid": {COMPUTE_STREAM}, "ts": "{ts_str(t)}", "dur": {us(d)}, '
            f'"args": {{"Model Id": 4294967295, "Task Type": "MEMCPY_ASYNC", "Physic Stream Id": {COMPUTE_STREAM}, "Task Id": {task_id}, '
            f'"Batch Id": 0, "Subtask Id": 4294967295, "connection_id": {conn}, "size(B)": {c.copy_bytes}, '
            f'"bandwidth(GB/s)": {bw}, "operation": "host to device"}}, "ph": "X"}}',
            f'{{"name": "HostToDevice{conn}", "ph": "f", "id": "{conn}", "ts": "{ts_str(t)}", "cat": "HostToDevice", "pid": {hw_pid}, "tid": {COMPUTE_STREAM}, "bp": "e"}}',
        ]
        free = t + d
        task_id += 1
        conn += 1
    return out, task_id, conn, free


def host_calls_span_us(calls: list[HostCall]) -> float:
    """Host time (µs) from the previous launch to the end of ``calls`` as the writer lays them out."""
    _ev, end = _host_call_events(calls, 0, 0, 0, 0)
    return (end + HOST_CALL_LEAD_NS) / 1000


PULL_FRAMES = ("aten::to", "aten::_to_copy", "aten::copy_")


def _d2h_pull_events(
    pulls: list[D2HPull],
    h0: int,
    dev0: int,
    ids: tuple[int, int, int, int],
    task_id: int,
    conn: int,
) -> tuple[list[str], int, int, int]:
    """Trace events of tensors copied to the host one by one, each followed by host work on it.

    Per tensor: ``aten::to`` > ``aten::_to_copy`` > ``aten::copy_`` (with ``Input Dims`` / ``Input
    type``) around an ``aclrtMemcpyAsync`` and an ``aclrtSynchronizeStream`` until its device-to-host
    ``MEMCPY_ASYNC`` task (after ``dev0`` and the previous copy) is done, then the host work's
    ``cpu_op`` frames; the next tensor 3 µs later.

    Returns:
        The events, the next task id and connection id, and the end (ns) of the last copy.
    """
    pid, cann_pid, _hw_pid, host_tid = ids
    out: list[str] = []
    t = h0
    free = dev0
    last = dev0
    for p in pulls:
        call = t + 3_000
        task = max(call + MEMCPY_API_NS + 5_000, free + 1_000)
        d = round(p.copy_us * 1000)
        y0 = call + MEMCPY_API_NS + 1_000
        y1 = task + d + 5_000
        dims = json.dumps(f"{p.input_dims};\r\n;\r\n;\r\n")
        types = json.dumps(f"{p.dtype};\r\nScalarType;\r\nbool;\r\nbool")
        extra = f', "Input Dims": {dims}, "Input type": {types}'
        for i, name in enumerate(PULL_FRAMES):
            out.append(
                _cpu_op(name, t + i * 1_000, y1 + (3 - i) * 1_000, pid, extra if i == 0 else "")
            )
        out.extend(
            _memcpy_task_events("device to host", p.nbytes, call, task, d, ids, task_id, conn)
        )
        out.append(
            f'{{"name": "AscendCL@aclrtSynchronizeStream", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(y0)}", "dur": {us(y1 - y0)}, '
            f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtSynchronizeStream", "item_id": "0"}}, "ph": "X"}}'
        )
        task_id += 1
        conn += 1
        free = last = task + d
        w0 = y1 + 5_000
        w1 = w0 + round(p.host_us * 1000)
        for i, name in enumerate(p.frames):
            out.append(_cpu_op(name, w0 + i * 1_000, w1 - i * 1_000, pid))
        n0 = len(p.frames)
        for i, name in enumerate(p.py_frames):  # the work's Python frames (with_stack)
            a, b = w0 + (n0 + i) * 1_000, w1 - (n0 + i) * 1_000
            if b <= a:
                break
            out.append(
                f'{{"ph": "X", "name": {json.dumps(name)}, "pid": {pid}, "tid": {pid}, "ts": "{ts_str(a)}", '
                f'"dur": {us(b - a)}, "cat": "python_function", "args": {{"Python id": {i + 1}}}}}'
            )
        t = w1 + 3_000
    return out, task_id, conn, last


def d2h_pulls_span_us(pulls: list[D2HPull]) -> float:
    """Host time (µs) from the previous launch to the end of ``pulls`` (device idle at the start)."""
    t = HOST_CALL_LEAD_NS  # the layout of _d2h_pull_events with the device free at the start
    for p in pulls:
        t += 3_000 + MEMCPY_API_NS + 5_000 + round(p.copy_us * 1000) + 5_000 + 5_000
        t += round(p.host_us * 1000) + 3_000
    return t / 1000


PY_CALL_NS = (40_000, 15_000, 12_000)  # after the step start, before the launch, nesting inset


def _py_call_events(frames: list[str], st_start: int, launch: int, pid: int) -> list[str]:
    """``python_function`` events of nested Python frames between the step start and a launch.

    The outermost frame runs from ``PY_CALL_NS[0]`` after the step start to ``PY_CALL_NS[1]`` before
    the launch at ``launch``; each inner frame is inset by ``PY_CALL_NS[2]`` on both sides.
    """
    a = st_start + PY_CALL_NS[0]
    b = launch - PY_CALL_NS[1]
    out: list[str] = []
    for name in frames:
        if b <= a:
            break
        out.append(
            f'{{"ph": "X", "name": {json.dumps(name)}, "pid": {pid}, "tid": {pid}, "ts": "{ts_str(a)}", '
            f'"dur": {us(b - a)}, "cat": "python_function", "args": {{"Python id": {len(out) + 1}}}}}'
        )
        a += PY_CALL_NS[2]
        b -= PY_CALL_NS[2]
    return out


def _launch_py_events(
    frames_us: tuple[tuple[str, ...], float], host0: int, launch: int, pid: int
) -> list[str]:
    """``python_function`` events of nested frames ending just before the launch at ``launch``.

    The outermost frame lasts ``µs`` and starts no earlier than just after the previous launch
    (ending at ``host0``); each inner frame is inset by 1 µs on both sides.
    """
    frames, dur_us = frames_us
    b = launch - 2_000
    a = max(b - round(dur_us * 1000), host0 + 1_000)
    out: list[str] = []
    for name in frames:
        if b <= a:
            break
        out.append(
            f'{{"ph": "X", "name": {json.dumps(name)}, "pid": {pid}, "tid": {pid}, "ts": "{ts_str(a)}", '
            f'"dur": {us(b - a)}, "cat": "python_function", "args": {{"Python id": {len(out) + 1}}}}}'
        )
        a += 1_000
        b -= 1_000
    return out


EVENT_API_NS = (3_000, 4_000)  # aclrtRecordEvent, aclrtStreamWaitEvent (queue the task, return)


def _event_wait_events(
    launched: int,
    w0: int,
    w1: int,
    cann_pid: int,
    hw_pid: int,
    host_tid: int,
    task_id: int,
    conn: int,
) -> list[str]:
    """Trace events of the compute stream waiting on a collective's end event.

    On the CANN thread an ``aclrtRecordEvent`` (on the communication stream) and an
    ``aclrtStreamWaitEvent`` (on the compute stream) right after the collective's launch ending at
    ``launched``; on the compute stream an ``EVENT_WAIT`` task from ``w0`` to ``w1`` linked to the
    wait call by a HostToDevice flow.
    """
    r0 = launched + 2_000
    q0 = r0 + EVENT_API_NS[0] + 1_000
    return [
        f'{{"name": "AscendCL@aclrtRecordEvent", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(r0)}", "dur": {us(EVENT_API_NS[0])}, '
        f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtRecordEvent", "item_id": "0"}}, "ph": "X"}}',
        f'{{"name": "AscendCL@aclrtStreamWaitEvent", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(q0)}", "dur": {us(EVENT_API_NS[1])}, '
        f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtStreamWaitEvent", "item_id": "0", "connection_id": {conn}}}, "ph": "X"}}',
        f'{{"name": "HostToDevice{conn}", "ph": "s", "cat": "HostToDevice", "id": "{conn}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(q0)}"}}',
        f'{{"name": "EVENT_WAIT", "pid": {hw_pid}, "tid": {COMPUTE_STREAM}, "ts": "{ts_str(w0)}", "dur": {us(w1 - w0)}, '
        f'"args": {{"Model Id": 4294967295, "Task Type": "EVENT_WAIT", "Physic Stream Id": {COMPUTE_STREAM}, "Task Id": {task_id}, '
        f'"Batch Id": 0, "Subtask Id": 4294967295, "connection_id": {conn}}}, "ph": "X"}}',
        f'{{"name": "HostToDevice{conn}", "ph": "f", "id": "{conn}", "ts": "{ts_str(w0)}", "cat": "HostToDevice", "pid": {hw_pid}, "tid": {COMPUTE_STREAM}, "bp": "e"}}',
    ]


def _alloc_call_events(
    calls: list[tuple[str, float]],
    j: int,
    ka: list[int],
    kad: list[int],
    drain: int,
    cann_pid: int,
    host_tid: int,
) -> list[str]:
    """Trace events of the caching allocator going to the device before launching kernel ``j``.

    An ``aclrtSynchronizeDevice`` from just after the previous launch until the device has drained
    (``drain`` + 5 µs), then ``calls`` back to back (1 µs apart), the last ending 3 µs before the
    kernel's launch.
    """
    durs = [round(d * 1000) for _api, d in calls]
    t = int(ka[j]) - 3_000 - sum(durs) - 1_000 * (len(durs) - 1)
    y0 = int(ka[j - 1] + kad[j - 1]) + 2_000
    y1 = min(drain + 5_000, t - 1_000)
    out: list[str] = []
    if y1 > y0:
        out.append(
            f'{{"name": "AscendCL@aclrtSynchronizeDevice", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(y0)}", "dur": {us(y1 - y0)}, '
            f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtSynchronizeDevice", "item_id": "0"}}, "ph": "X"}}'
        )
    for (api, _d), d in zip(calls, durs, strict=True):
        out.append(
            f'{{"name": "AscendCL@{api}", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(t)}", "dur": {us(d)}, '
            f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "{api}", "item_id": "0"}}, "ph": "X"}}'
        )
        t += d + 1_000
    return out


def _h2d_copy_events(
    copy: tuple[str, str, float],
    j: int,
    ka: list[int],
    kad: list[int],
    ks: list[int],
    kd: list[int],
    pid: int,
    cann_pid: int,
    host_tid: int,
) -> list[str]:
    """Trace events of a blocking host-to-device copy from pageable memory before kernel ``j``.

    ``aten::to`` > ``aten::copy_`` on the Python thread; on the CANN thread an
    ``aclrtSynchronizeStream`` from just after the previous launch until the device has run everything
    queued (not before the first kernel), then an ``aclrtMemcpy`` of the copy's duration ending
    ``H2D_TAIL_NS`` before the kernel's launch.
    """
    dims, dtype, copy_us = copy
    m1 = int(ka[j]) - H2D_TAIL_NS
    m0 = m1 - round(copy_us * 1000)
    c0 = m0 - 3_000
    out: list[str] = []
    if j > 0:
        y0 = int(ka[j - 1] + kad[j - 1]) + 2_000
        y1 = min(int(ks[j - 1] + kd[j - 1]) + 5_000, m0 - 2_000)
        if y1 > y0:
            c0 = y0 - 1_000
            out.append(
                f'{{"name": "AscendCL@aclrtSynchronizeStream", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(y0)}", "dur": {us(y1 - y0)}, '
                f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtSynchronizeStream", "item_id": "0"}}, "ph": "X"}}'
            )
    c1 = m1 + 2_000
    in_dims = json.dumps(f"{dims};\r\n{dims};\r\n;\r\n")
    in_type = json.dumps(f"{dtype};\r\n{dtype};\r\nScalar")
    out.append(
        f'{{"ph": "X", "name": "aten::to", "pid": {pid}, "tid": {pid}, "ts": "{ts_str(c0 - 2_000)}", '
        f'"dur": {us(c1 - c0 + 4_000)}, "cat": "cpu_op", "args": {{"Sequence number": -1, "Fwd thread id": 0}}}}'
    )
    out.append(
        f'{{"ph": "X", "name": "aten::copy_", "pid": {pid}, "tid": {pid}, "ts": "{ts_str(c0)}", '
        f'"dur": {us(c1 - c0)}, "cat": "cpu_op", "args": {{"Sequence number": -1, "Fwd thread id": 0, '
        f'"Input Dims": {in_dims}, "Input type": {in_type}}}}}'
    )
    out.append(
        f'{{"name": "AscendCL@aclrtMemcpy", "pid": {cann_pid}, "tid": {host_tid}, "ts": "{ts_str(m0)}", "dur": {us(m1 - m0)}, '
        f'"args": {{"Thread Id": {host_tid}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtMemcpy", "item_id": "0"}}, "ph": "X"}}'
    )
    return out


def _matrix(links_by_key: dict[tuple[str, str], dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """top1/middle/bottom1/total/bottom2/bottom3 aggregation per (op type, group) and link."""
    grouped: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for (name, h), links in links_by_key.items():
        m = _MATRIX_TYPE.search(name.lower())
        typ = m.group(0) if m else "invalid"
        dst = grouped.setdefault((typ, h), {})
        for lk, recs in links.items():
            dst.setdefault(lk, []).extend(recs)
    out: dict[str, Any] = {}
    for (typ, h), links in grouped.items():
        parts: dict[str, dict[str, Any]] = {
            p: {} for p in ("top1", "middle", "bottom1", "total", "bottom2", "bottom3")
        }
        for lk, recs in links.items():
            srt = sorted(recs, key=lambda x: -x["Bandwidth(GB/s)"])
            parts["top1"][lk] = srt[0]
            parts["middle"][lk] = srt[len(srt) // 2]
            parts["bottom1"][lk] = srt[-1]
            if len(srt) >= 2:
                parts["bottom2"][lk] = srt[-2]
            if len(srt) >= 3:
                parts["bottom3"][lk] = srt[-3]
            size = sum(x["Transit Size(MB)"] for x in srt)
            tms = sum(x["Transit Time(ms)"] for x in srt)
            parts["total"][lk] = {
                "Transport Type": srt[0]["Transport Type"],
                "Transit Size(MB)": size,
                "Transit Time(ms)": tms,
                "Bandwidth(GB/s)": round(size / tms, 4) if tms else 0,
            }
        for p, v in parts.items():
            if v:
                out[f"{typ}-{p}@{h}"] = v
    return out


def _write_device_info(cl: Cluster, r: int, folder: Path, info: RunInfo) -> None:
    """``PROF_*/device_{id}/info.json.{id}`` with the rank's ``DeviceInfo`` (``RunInfo.device_info``)."""
    if not info.device_info or r not in info.device_info:
        return
    node, dev = node_device(info, r)
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(cl.t0_ns // 10**9)) + f"{(66 + r) % 1000:03d}"
    letters = "".join(chr(ord("A") + (r * 7 + i * 11) % 26) for i in range(16))
    d = folder / f"PROF_{1:06d}_{stamp}_{letters}" / f"device_{dev}"
    d.mkdir(parents=True, exist_ok=True)
    dev_info = {"id": dev, "env_type": 3, **info.device_info[r]}
    body = {
        "DeviceInfo": [dev_info],
        "rank_id": r,
        "hostUid": str(3538958389648580163 + node),
    }
    (d / f"info.json.{dev}").write_text(json.dumps(body), encoding="utf-8")


def _profiler_info(cl: Cluster, r: int, info: RunInfo) -> dict[str, Any]:
    end = cl.steps[-1].end + 300_000_000
    versions = (info.rank_versions or {}).get(r, (info.cann_version, info.torch_npu_version))
    return {
        "config": {
            "common_config": {
                "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                "schedule": {
                    "wait": 0,
                    "active": len(cl.steps),
                    "warmup": 1,
                    "repeat": 1,
                    "skip_first": cl.steps[0].step_id - 1,
                },
                "record_shapes": True,
                "profile_memory": True,
                "with_stack": info.with_stack,
                "with_flops": False,
                "with_modules": False,
            },
            "experimental_config": {
                "_profiler_level": info.profiler_level,
                "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION",
                "_l2_cache": False,
                "_msprof_tx": False,
                "_data_simplification": True,
                "record_op_args": False,
                "_export_type": info.export,
                "_op_attr": False,
                "_gc_detect_threshold": info.gc_detect_threshold_ms,
            },
        },
        "start_info": {
            "syscnt_enable": True,
            "freq": 100,
            "start_cnt": 17238197612056 + r * 1013,
            "start_monotonic": 172163581670080 + r * 977,
        },
        "end_info": {
            "collectionTimeEnd": end,
            "MonotonicTimeEnd": 172164265133640 + (end - cl.t0_ns),
        },
        "torch_npu_version": versions[1],
        "cann_version": versions[0],
        "rank_id": str(r),
    }


def _metadata_text(cl: Cluster, r: int, info: RunInfo) -> str:
    """``json.dumps(metadata, indent=4)``; long ``global_ranks`` lists are formatted once per group."""
    md = _metadata(cl, r, info)
    subst: dict[str, str] = {}
    hidden = cl.perturb.hidden_groups.get(r, set()) if cl.perturb.hidden_groups else set()
    for kind in cl.kinds.values():
        g = int(kind.gidx[r])
        if g < 0 or kind.kind in hidden:
            continue
        if g not in kind.ranks_text:
            kind.ranks_text[g] = (
                "[\n"
                + ",\n".join(" " * 16 + str(x) for x in kind.members[g])
                + "\n"
                + " " * 12
                + "]"
            )
        token = f"@@ranks:{kind.kind}:{g}@@"
        md["parallel_group_info"][kind.comm_names[g]]["global_ranks"] = token
        subst[f'"{token}"'] = kind.ranks_text[g]
    text = json.dumps(md, indent=4)
    for a, b in subst.items():
        text = text.replace(a, b)
    return text


def _metadata(cl: Cluster, r: int, info: RunInfo) -> dict[str, Any]:
    md: dict[str, Any] = {}
    if info.user_metadata:
        for k, v in info.user_metadata.items():
            md[k] = dict(v, rank=r) if k == "distributed_args" else v
    env = {k: "" for k in ENV_KEYS}
    env.update(info.env or {})
    env.update((info.rank_env or {}).get(r, {}))
    md["ENV_VARIABLES"] = env
    pgi: dict[str, Any] = {}
    hidden = cl.perturb.hidden_groups.get(r, set()) if cl.perturb.hidden_groups else set()
    for kind in cl.kinds.values():
        g = int(kind.gidx[r])
        if g < 0 or kind.kind in hidden:
            continue
        pgi[kind.comm_names[g]] = {
            "group_name": kind.pg_name,
            "group_rank": int(kind.local[r]),
            "global_ranks": list(kind.members[g]),
        }
    md["parallel_group_info"] = pgi
    return md


def ranks_of(cl: Cluster) -> np.ndarray:
    """All global ranks."""
    return np.arange(cl.ranks)
