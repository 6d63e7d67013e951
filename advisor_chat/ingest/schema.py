"""Canonical tables: names, columns, dtypes and units (DESIGN.md §3).

Every table produced by ingest is checked once against its :class:`TableSpec` by
:func:`validate_table`. Analyzers rely on these columns and nothing else.

:func:`validate_table` is also the one place where *values* are checked (every reader's tables go
through it): per column, a ``check`` rule (:data:`VALUE_RULES`) rejects infinite, negative and
absurdly large values (they become NaN) and, for the columns a table cannot do without
(:data:`CRITICAL`), drops the rows that are left without a number (empty, ``N/A``, non-numeric or
rejected). Each column with rejected values gives one ``invalid_values`` data-quality warning
naming the files, the rank(s) and the row counts. Rows that repeat the key of an earlier row
(:data:`UNIQUE_KEYS`: ``(rank, step)`` of ``step_trace``) are dropped, the first kept, with one
``duplicate_rows`` warning.

Units are in column names: ``_us`` microseconds, ``_ms`` milliseconds, ``_mb`` megabytes (decimal,
bytes / 1e6, as HCCL writes them), ``_gbps`` gigabytes per second (decimal, = MB/ms), ``_ratio``
a fraction in [0, 1]. Timestamps (``start_us`` etc.) are microseconds since the Unix epoch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from advisor_chat.errors import InputError

if TYPE_CHECKING:
    from advisor_chat.ingest.profile import DataWarning, TableSource


@dataclass(frozen=True)
class ColumnSpec:
    """One column of a canonical table.

    Attributes:
        name: snake_case name with a unit suffix where it has a unit.
        dtype: ``int``, ``float``, ``str``, ``bool`` or ``object`` (lists, dicts).
        unit: Human-readable unit (``us``, ``ms``, ``MB``, ``GB/s``, ``ratio``, ``count``) or ``""``.
        required: A required column must be present (it may hold NaN for missing values).
        doc: What the value means and where it comes from.
    """

    name: str
    dtype: str
    unit: str = ""
    required: bool = True
    doc: str = ""


@dataclass(frozen=True)
class TableSpec:
    """A canonical table: its name, meaning and columns."""

    name: str
    doc: str
    columns: tuple[ColumnSpec, ...]

    @property
    def required(self) -> list[str]:
        """Names of the required columns, in order."""
        return [c.name for c in self.columns if c.required]

    @property
    def names(self) -> list[str]:
        """Names of all columns, in order."""
        return [c.name for c in self.columns]

    def column(self, name: str) -> ColumnSpec:
        """Return the spec of column ``name``; raises ``KeyError`` if unknown."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


#: Per-kernel PMU ratios of the PipeUtilization metrics set kept in ``kernels`` (kernel_details.csv
#: columns / DB ``TASK_PMU_INFO`` names; reference §1.6): the share of a kernel's AI Core / AI
#: Vector time each pipeline is busy, and the instruction-cache miss rates.
PMU_RATIOS = (
    "aic_mac_ratio", "aic_scalar_ratio", "aic_mte2_ratio", "aic_fixpipe_ratio",
    "aic_icache_miss_rate", "aiv_vec_ratio", "aiv_scalar_ratio", "aiv_mte2_ratio",
    "aiv_mte3_ratio", "aiv_icache_miss_rate",
)  # fmt: skip


def _c(name: str, dtype: str, unit: str = "", required: bool = True, doc: str = "") -> ColumnSpec:
    return ColumnSpec(name, dtype, unit, required, doc)


STEP_TRACE = TableSpec(
    "step_trace",
    "Per rank and step: the device-time breakdown of step_trace_time.csv / StepTraceTime / "
    "cluster_step_trace_time.csv rank rows. computing + communication_not_overlapped + free ≈ step span.",
    (
        _c(
            "rank",
            "int",
            doc="Global rank (from profiler_info_{rank}.json, DB name or cluster Index)",
        ),
        _c("step", "int", doc="Step id (ProfilerStep#N); -1 when the file has no step"),
        _c("computing_us", "float", "us", doc="Union of compute-task time on the device"),
        _c(
            "communication_not_overlapped_us",
            "float",
            "us",
            doc="Communication not hidden by compute",
        ),
        _c("overlapped_us", "float", "us", doc="Communication hidden by compute"),
        _c("communication_us", "float", "us", doc="Union of communication-op time"),
        _c("free_us", "float", "us", doc="Device idle: neither compute nor communication"),
        _c("stage_us", "float", "us", doc="Step span minus bubble"),
        _c("bubble_us", "float", "us", doc="PP receive time (hcom_receive*)"),
        _c("communication_not_overlapped_exclude_receive_us", "float", "us", required=False),
        _c(
            "preparing_us",
            "float",
            "us",
            required=False,
            doc="Framework step start to first device task",
        ),
        _c(
            "step_us",
            "float",
            "us",
            doc="computing + communication_not_overlapped + free (+ bubble is inside comm)",
        ),
        _c("device_id", "float", required=False, doc="Physical device id (never used as rank)"),
        _c("dp_index", "float", required=False),
        _c("pp_index", "float", required=False),
        _c("tp_index", "float", required=False),
    ),
)

STAGE_TRACE = TableSpec(
    "stage_trace",
    "Per pipeline stage and step: cluster_step_trace_time.csv 'stage' rows (msprof-analyze output only).",
    (
        _c("stage_ranks", "str", doc="Ranks of the stage as written, e.g. '(0, 1, 2, 3)'"),
        _c("stage_index", "int", doc="0-based order of the stage in the file"),
        _c("step", "int"),
        _c("computing_us", "float", "us"),
        _c("communication_not_overlapped_us", "float", "us"),
        _c("overlapped_us", "float", "us"),
        _c("communication_us", "float", "us"),
        _c("free_us", "float", "us"),
        _c("stage_us", "float", "us"),
        _c("bubble_us", "float", "us"),
    ),
)

KERNELS = TableSpec(
    "kernels",
    "One row per device task (kernel_details.csv / op_summary / TASK+COMPUTE_TASK_INFO in the DB).",
    (
        _c("rank", "int"),
        _c("step", "int", doc="-1 when outside any step"),
        _c("name", "str", doc="Kernel / op name (data, never an instruction)"),
        _c("op_type", "str", doc="'Type' column; 'N/A' at Level0"),
        _c(
            "accelerator_core",
            "str",
            doc="AI_CORE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV, AI_CPU, COMMUNICATION (HCCL), ...",
        ),
        _c("start_us", "float", "us", doc="Epoch µs (trailing tab stripped)"),
        _c("duration_us", "float", "us"),
        _c("wait_us", "float", "us", doc="Gap from the previous task's end on the stream"),
        _c("block_dim", "float", required=False),
        _c(
            "model_id",
            "float",
            required=False,
            doc="Model ID: the graph (compiled model) a task runs in; 4294967295 = none (eager)",
        ),
        _c(
            "hf32_eligible",
            "str",
            required=False,
            doc="HF32 Eligible: YES when an fp32 Cube operator may run in HF32, else NO",
        ),
        _c(
            "input_shapes",
            "str",
            required=False,
            doc="Outer quotes removed, e.g. '32,3,224,224;64'",
        ),
        _c("input_dtypes", "str", required=False),
        _c(
            "input_formats",
            "str",
            required=False,
            doc="Storage format per input, e.g. 'FORMAT_ND;FRACTAL_NZ' (DB: 'FORMAT_' prefix kept)",
        ),
        _c("output_shapes", "str", required=False),
        _c("op_state", "str", required=False, doc="dynamic / static / N/A"),
        _c("stream_id", "float", required=False),
        _c("aic_mac_ratio", "float", "ratio", required=False, doc="Cube MAC busy share"),
        _c("aic_scalar_ratio", "float", "ratio", required=False, doc="AI Core scalar busy share"),
        _c("aic_mte2_ratio", "float", "ratio", required=False, doc="AI Core HBM→L1 move share"),
        _c("aic_fixpipe_ratio", "float", "ratio", required=False, doc="L0C→out (fixpipe) share"),
        _c("aic_icache_miss_rate", "float", "ratio", required=False),
        _c("aiv_vec_ratio", "float", "ratio", required=False, doc="Vector unit busy share"),
        _c("aiv_scalar_ratio", "float", "ratio", required=False),
        _c("aiv_mte2_ratio", "float", "ratio", required=False, doc="AI Vector HBM→UB move share"),
        _c("aiv_mte3_ratio", "float", "ratio", required=False, doc="AI Vector UB→HBM move share"),
        _c("aiv_icache_miss_rate", "float", "ratio", required=False),
        _c("cube_utilization_pct", "float", "%", required=False),
    ),
)

COMM_OPS = TableSpec(
    "comm_ops",
    "One row per HCCL operator per rank (communication.json / analysis.db CommAnalyzerTime / "
    "cluster_communication.json). Times in ms as HCCL writes them; start in epoch µs.",
    (
        _c("rank", "int"),
        _c("group", "str", doc="Communication group (domain) hash, as in 'op@hash'"),
        _c("step", "int"),
        _c("op_name", "str", doc="e.g. hcom_allReduce__210_0_1"),
        _c(
            "op_type",
            "str",
            doc="allreduce, allgather, reducescatter, broadcast, send, receive, batchsendrecv, alltoall, ...",
        ),
        _c("comm_kind", "str", doc="'collective' or 'p2p'"),
        _c("start_us", "float", "us"),
        _c("elapse_ms", "float", "ms"),
        _c("transit_ms", "float", "ms"),
        _c("wait_ms", "float", "ms"),
        _c("synchronization_ms", "float", "ms"),
        _c("idle_ms", "float", "ms"),
        _c("wait_ratio", "float", "ratio"),
        _c("synchronization_ratio", "float", "ratio"),
    ),
)

COMM_BANDWIDTH = TableSpec(
    "comm_bandwidth",
    "Per rank, HCCL op and transport: 'Communication Bandwidth Info' of communication.json "
    "(CommAnalyzerBandwidth in analysis.db). SDMA = HCCS + PCIE + SIO.",
    (
        _c("rank", "int"),
        _c("group", "str"),
        _c("step", "int"),
        _c("op_name", "str"),
        _c("transport", "str", doc="HCCS, PCIE, RDMA, SDMA, SIO"),
        _c("transit_size_mb", "float", "MB"),
        _c("transit_time_ms", "float", "ms"),
        _c("bandwidth_gbps", "float", "GB/s"),
        _c("large_packet_ratio", "float", "ratio"),
        _c(
            "small_packet_count",
            "float",
            "count",
            required=False,
            doc="Packets below the transport's large-packet size",
        ),
        _c("packet_count", "float", "count", required=False),
    ),
)

COMM_MATRIX = TableSpec(
    "comm_matrix",
    "Per link (src → dst global rank) of an op or op-type aggregate: communication_matrix.json / "
    "cluster_communication_matrix.json / CommAnalyzerMatrix.",
    (
        _c("group", "str"),
        _c("step", "int"),
        _c("op_name", "str", doc="op name, or '{type}-total' style aggregate key"),
        _c("src_rank", "int", doc="Global rank"),
        _c("dst_rank", "int", doc="Global rank"),
        _c("transport", "str", doc="HCCS, PCIE, RDMA, SIO, LOCAL"),
        _c("transit_size_mb", "float", "MB"),
        _c("transit_time_ms", "float", "ms"),
        _c("bandwidth_gbps", "float", "GB/s"),
        _c(
            "rank",
            "float",
            required=False,
            doc="Rank whose file reported the link (NaN for cluster files)",
        ),
    ),
)

HOST_DISPATCH = TableSpec(
    "host_dispatch",
    "Host API → device task launches (HostToDevice flows of trace_view.json, or the DB's "
    "CANN_API/TASK connection ids), and the host's synchronize calls (no device task). "
    "launch_delay_us = device_start_us − host_start_us.",
    (
        _c("rank", "int"),
        _c("step", "int"),
        _c("api_name", "str"),
        _c("host_start_us", "float", "us"),
        _c("device_start_us", "float", "us"),
        _c("launch_delay_us", "float", "us"),
        _c("kernel_name", "str", required=False),
        _c("device_duration_us", "float", "us", required=False),
        _c(
            "api_duration_us",
            "float",
            "us",
            required=False,
            doc="Duration of the host API call; synchronize calls (no device task) have the "
            "device columns empty",
        ),
    ),
)

AICORE_FREQ = TableSpec(
    "aicore_freq",
    "Per rank AI Core frequency samples: the 'AI Core Freq' counter track of trace_view.json "
    "(C events, args MHz) or the DB's AICORE_FREQ table. A sample holds until the next one "
    "(a steady clock has a sample at the start and the end of the capture).",
    (
        _c("rank", "int"),
        _c("start_us", "float", "us", doc="Sample time (epoch µs)"),
        _c("freq_mhz", "float", "MHz", doc="AI Core clock from this sample on"),
    ),
)

PYTHON_FRAMES = TableSpec(
    "python_frames",
    "Per rank Python frames of the host (trace_view.json python_function events, written when the "
    "profiler runs with with_stack=True, and cpu_op events: the framework's operators on the host) "
    "lasting at least 1 ms, and shorter ones (≥ 50 µs) summed per thread, frame and step. A frame's "
    "callers are the frames of the same thread that contain it.",
    (
        _c("rank", "int"),
        _c("tid", "int", doc="Host thread id"),
        _c("start_us", "float", "us", doc="Frame start (epoch µs)"),
        _c("dur_us", "float", "us", doc="Frame duration, callees included"),
        _c("frame", "str", doc="'file.py(line): function'"),
        _c(
            "calls",
            "int",
            required=False,
            doc="1: one frame of ≥ 1 ms; more: frames of 50 µs - 1 ms of one thread and step, "
            "summed (start_us the first one's, dur_us their total)",
        ),
    ),
)

HCCL_OPS = TableSpec(
    "hccl_ops",
    "Per rank HCCL operators of trace_view.json: the CANN-side complete events named hcom_* with "
    "their args (data_type, count, alg_type), one per operator launch. size_mb = count x the data "
    "type's bytes / 1e6: the tensor the collective reduces or gathers, not the bytes on the links.",
    (
        _c("rank", "int"),
        _c("op_name", "str", doc="e.g. hcom_allReduce__009_0_1 (as comm_ops.op_name)"),
        _c("start_us", "float", "us", doc="Start (epoch µs)"),
        _c("dur_us", "float", "us"),
        _c("data_type", "str", doc="HCCL data type, e.g. FP32, BFP16, FP16, INT8"),
        _c("count", "float", "count", doc="Elements"),
        _c("alg_type", "str", required=False, doc="e.g. MESH-RING, RING, HD"),
        _c("size_mb", "float", "MB", doc="count x bytes of data_type / 1e6; NaN when unknown"),
    ),
)

MEMORY = TableSpec(
    "memory",
    "Per rank memory samples (memory_record.csv / MEMORY_RECORD in the DB).",
    (
        _c("rank", "int"),
        _c("timestamp_us", "float", "us"),
        _c("component", "str", doc="PTA, GE, APP, PTA+GE, ..."),
        _c("allocated_mb", "float", "MB"),
        _c("reserved_mb", "float", "MB"),
        _c("active_mb", "float", "MB", required=False),
    ),
)

COMM_GROUPS = TableSpec(
    "comm_groups",
    "Communication groups (domains): from parallel_group_info of profiler_metadata.json, "
    "communication_group.json, or derived from communication files.",
    (
        _c("group", "str", doc="Group hash as used in comm_ops.group (may be empty when unknown)"),
        _c(
            "group_name",
            "str",
            doc="Process-group name: tp, pp, dp, default_group, ... (or '' if unknown)",
        ),
        _c("comm_kind", "str", doc="'collective', 'p2p' or ''"),
        _c("ranks", "object", doc="Sorted list of global ranks"),
        _c("size", "int"),
    ),
)

META = TableSpec(
    "meta",
    "One row per rank: versions, profiler config, environment and parallel layout.",
    (
        _c("rank", "int"),
        _c("source_dir", "str", doc="Folder the rank was read from"),
        _c("export_type", "str", doc="text, db, cluster, msprof, mindspore, synthetic"),
        _c("cann_version", "str", required=False),
        _c("torch_npu_version", "str", required=False),
        _c("profiler_level", "str", required=False, doc="Level_none, Level0, Level1, Level2"),
        _c("device_id", "float", required=False),
        _c("device_type", "str", required=False),
        _c(
            "ai_core_num",
            "float",
            required=False,
            doc="AI Cores of the device (DeviceInfo of PROF_*/device_*/info.json.*)",
        ),
        _c("aiv_num", "float", required=False, doc="AI Vector cores (info.json DeviceInfo)"),
        _c(
            "aic_frequency_mhz",
            "float",
            required=False,
            doc="AI Core clock the device reports, MHz (info.json DeviceInfo aic_frequency)",
        ),
        _c("world_size", "float", required=False),
        _c("tp_size", "float", required=False),
        _c("pp_size", "float", required=False),
        _c("dp_size", "float", required=False),
        _c("env", "object", required=False, doc="dict of ENV_VARIABLES (str → str)"),
        _c("config", "object", required=False, doc="dict: profiler config"),
        _c(
            "distributed_args",
            "object",
            required=False,
            doc="dict: profiler_metadata.json distributed_args (the framework's parallel and MoE "
            "settings as recorded)",
        ),
    ),
)

OP_STATISTIC = TableSpec(
    "op_statistic",
    "Per rank and op type: op_statistic.csv (CANN op_statistic_*.csv), plus communication_statistic "
    "rows of msprof output (core_type 'COMMUNICATION'). Added by ingest; optional for analyzers.",
    (
        _c("rank", "int"),
        _c("op_type", "str"),
        _c("core_type", "str", doc="AI_CORE, AI_VECTOR_CORE, MIX_AIC, AI_CPU, COMMUNICATION, ..."),
        _c("count", "float", "count"),
        _c("total_us", "float", "us"),
        _c("min_us", "float", "us", required=False),
        _c("avg_us", "float", "us", required=False),
        _c("max_us", "float", "us", required=False),
        _c("ratio_pct", "float", "%", required=False),
    ),
)

TABLE_SPECS: dict[str, TableSpec] = {
    t.name: t
    for t in (
        STEP_TRACE,
        STAGE_TRACE,
        KERNELS,
        COMM_OPS,
        COMM_BANDWIDTH,
        COMM_MATRIX,
        HOST_DISPATCH,
        AICORE_FREQ,
        PYTHON_FRAMES,
        HCCL_OPS,
        MEMORY,
        COMM_GROUPS,
        META,
        OP_STATISTIC,
    )
}

_DTYPES = {
    "int": "Int64",
    "float": "float64",
    "str": "string",
    "bool": "boolean",
    "object": "object",
}


def empty_table(name: str) -> pd.DataFrame:
    """Return an empty DataFrame with every column of table ``name`` and its dtype."""
    return _empty_template(name).copy()


@functools.cache
def _empty_template(name: str) -> pd.DataFrame:
    """The empty table of ``name``, built once (a copy costs 30 µs, building it 1-3 ms)."""
    spec = TABLE_SPECS[name]
    return pd.DataFrame({c.name: pd.Series(dtype=_DTYPES[c.dtype]) for c in spec.columns})


#: Upper bounds of plausible values per unit: one day for durations, a year 5000 epoch for
#: timestamps, 1 TB per HCCL op, 100 TB/s of bandwidth, 10^12 packets.
_DAY_US = 86_400e6
VALUE_RULES: dict[str, tuple[float, float]] = {
    "duration_us": (0.0, _DAY_US),
    "duration_ms": (0.0, _DAY_US / 1e3),
    "epoch_us": (0.0, 1e17),
    "ratio": (0.0, 1.0),
    "pct": (0.0, 100.0),
    "size_mb": (0.0, 1e6),
    "gbps": (0.0, 1e5),
    "count": (0.0, 1e12),
    "mhz": (0.0, 1e5),
}

#: Column → rule for the checked numeric columns of each table.
CHECKS: dict[str, dict[str, str]] = {
    "step_trace": {
        **{
            c: "duration_us"
            for c in (
                "computing_us",
                "communication_not_overlapped_us",
                "overlapped_us",
                "communication_us",
                "free_us",
                "stage_us",
                "bubble_us",
                "preparing_us",
                "step_us",
            )
        }
    },
    "stage_trace": {
        c: "duration_us"
        for c in ("computing_us", "communication_not_overlapped_us", "free_us", "bubble_us")
    },
    "kernels": {
        "start_us": "epoch_us",
        "duration_us": "duration_us",
        "wait_us": "duration_us",
        **dict.fromkeys(PMU_RATIOS, "ratio"),
        "cube_utilization_pct": "pct",
    },
    "comm_ops": {
        "start_us": "epoch_us",
        "elapse_ms": "duration_ms",
        "transit_ms": "duration_ms",
        "wait_ms": "duration_ms",
        "synchronization_ms": "duration_ms",
        "idle_ms": "duration_ms",
        "wait_ratio": "ratio",
        "synchronization_ratio": "ratio",
    },
    "comm_bandwidth": {
        "transit_size_mb": "size_mb",
        "transit_time_ms": "duration_ms",
        "bandwidth_gbps": "gbps",
        "large_packet_ratio": "ratio",
        "packet_count": "count",
    },
    "comm_matrix": {
        "transit_size_mb": "size_mb",
        "transit_time_ms": "duration_ms",
        "bandwidth_gbps": "gbps",
    },
    "host_dispatch": {"host_start_us": "epoch_us", "device_start_us": "epoch_us"},
    "aicore_freq": {"start_us": "epoch_us", "freq_mhz": "mhz"},
    "python_frames": {"start_us": "epoch_us", "dur_us": "duration_us"},
    "hccl_ops": {
        "start_us": "epoch_us",
        "dur_us": "duration_us",
        "count": "count",
        "size_mb": "size_mb",
    },
    "memory": {"allocated_mb": "size_mb", "reserved_mb": "size_mb"},
    "op_statistic": {"count": "count", "total_us": "duration_us"},
}

#: Columns a row is useless without: a row whose value is missing (empty, N/A, non-numeric) or
#: rejected is dropped — but only for ranks where the column has values at all (msprof's graph
#: step trace has no breakdown columns; that is not an error).
CRITICAL: dict[str, tuple[str, ...]] = {
    # step_us is derived from these three (checked for bad values, not required: msprof's graph
    # step trace has step_us and no breakdown)
    "step_trace": ("computing_us", "communication_not_overlapped_us", "free_us"),
    "stage_trace": ("computing_us", "free_us"),
    "kernels": ("start_us", "duration_us"),
    "comm_ops": ("elapse_ms",),
}


def _files_of(
    sources: list[TableSource] | None, ranks: list[int], source: str
) -> tuple[str, list[str]]:
    files = [s.path for s in sources or [] if s.rank in ranks or s.rank is None]
    if not files and sources:
        files = [s.path for s in sources]
    files = list(dict.fromkeys(files)) or ([source] if source else [])
    from advisor_chat.ingest.guard import show_path

    shown = ", ".join(show_path(f) for f in files[:3]) + (
        f" and {len(files) - 3} more" if len(files) > 3 else ""
    )
    return shown, files


def check_values(
    name: str,
    df: pd.DataFrame,
    *,
    source: str = "",
    sources: list[TableSource] | None = None,
) -> tuple[pd.DataFrame, list[DataWarning]]:
    """Reject implausible values of ``df`` (a table already coerced to canonical dtypes).

    Per checked column (:data:`CHECKS`, bounds :data:`VALUE_RULES`): infinite, negative and
    above-bound values become NaN. Then a row is dropped when one of its :data:`CRITICAL` columns
    was rejected, or is missing (empty, ``N/A``, non-numeric) while the row has another critical
    value or the same rank has this one in other rows (a table that never has the column, like
    msprof's graph step trace without a breakdown, is left alone). One warning per table naming
    the files, ranks, columns and row counts.

    Args:
        name: Table name.
        df: The table (canonical dtypes).
        source: File named when ``sources`` gives none.
        sources: Where the rows came from (to name the files of the ranks concerned).

    Returns:
        ``(clean table, warnings)``; the table is ``df`` itself when nothing was rejected.
    """
    from advisor_chat.ingest.profile import DataWarning

    rules = CHECKS.get(name, {})
    if df.empty or not rules:
        return df, []
    out = df
    n_rows = len(out)
    why: dict[str, list[str]] = {}
    bad_rows = np.zeros(n_rows, dtype=bool)
    rejected: dict[str, np.ndarray] = {}
    present: dict[str, np.ndarray] = {}
    rank = out["rank"] if "rank" in out.columns else None
    for col, rule in rules.items():
        if col not in out.columns:
            continue
        v = out[col].to_numpy(dtype="float64", na_value=np.nan)
        present[col] = ~np.isnan(v)
        lo, hi = VALUE_RULES[rule]
        with np.errstate(invalid="ignore"):
            inf = np.isinf(v)
            neg = v < lo
            big = (v > hi) & ~inf
        bad = inf | neg | big
        if bad.any():
            if out is df:
                out = df.copy()
            v = v.copy()
            v[bad] = np.nan
            out[col] = v
            rejected[col] = bad
            bad_rows |= bad
            why[col] = [
                f"{int(n)} {w}"
                for n, w in (
                    (inf.sum(), "infinite"),
                    (neg.sum(), "negative"),
                    (big.sum(), f"above {hi:g} {rule.split('_')[-1]}"),
                )
                if n
            ]
    crit = [c for c in CRITICAL.get(name, ()) if c in out.columns]
    drop = np.zeros(n_rows, dtype=bool)
    if "step" in out.columns:  # a Step cell that is not a step number (ingest.common.step_col)
        from advisor_chat.ingest.common import INVALID_STEP

        inv = (out["step"] == INVALID_STEP).fillna(False).to_numpy(dtype=bool)
        if inv.any():
            why["step"] = [f"{int(inv.sum())} not a step number"]
            bad_rows |= inv
            drop |= inv
    if crit:
        vals = {c: out[c].notna().to_numpy() for c in crit}
        any_in_row = np.logical_or.reduce([present.get(c, vals[c]) for c in crit])
        for c in crit:
            missing = ~vals[c]
            if not missing.any():
                continue
            orig = present.get(c, vals[c])
            if rank is not None:
                codes = pd.factorize(rank, use_na_sentinel=False)[0]
                in_rank = (np.bincount(codes, weights=orig.astype("float64")) > 0)[codes]
            else:
                in_rank = np.full(n_rows, bool(orig.any()))
            hit = missing & (any_in_row | in_rank)
            blank = hit & ~rejected.get(c, np.zeros(n_rows, dtype=bool))
            if blank.any():
                why.setdefault(c, []).append(f"{int(blank.sum())} empty, N/A or non-numeric")
                bad_rows |= blank
            drop |= hit
    if not why:
        return out, []
    ranks = sorted({int(r) for r in rank[bad_rows].dropna()}) if rank is not None else []
    shown, files = _files_of(sources, ranks, source)
    shown = shown or f"table {name}"
    n_drop = int(drop.sum())
    fate = (
        f"{n_drop} row(s) were left out"
        if n_drop
        else "those values were set aside (NaN), the rows kept"
    )
    cols = "; ".join(f"{c}: {', '.join(w)}" for c, w in why.items())
    warning = DataWarning(
        code="invalid_values",
        message=f"{shown}: {int(bad_rows.sum())} of {n_rows} row(s) of {name} have invalid values "
        f"({cols}){f' on rank(s) {ranks[:10]}' if ranks else ''}; {fate}. Check the export "
        "(re-run the offline parse) before trusting these numbers",
        path=files[0] if files else None,
        ranks=tuple(ranks),
    )
    if n_drop:
        out = out.loc[~drop].reset_index(drop=True)
    return out, [warning]


#: Columns that identify a row: a table holds one row per key (a file concatenated twice, or
#: ranks read twice, would count every step twice).
UNIQUE_KEYS: dict[str, tuple[str, ...]] = {"step_trace": ("rank", "step")}


def check_duplicates(
    name: str,
    df: pd.DataFrame,
    *,
    source: str = "",
    sources: list[TableSource] | None = None,
) -> tuple[pd.DataFrame, list[DataWarning]]:
    """Drop rows of ``df`` that repeat the key (:data:`UNIQUE_KEYS`) of an earlier row.

    The first row of each key is kept; rows with a missing key value are left alone. One
    ``duplicate_rows`` warning names the files of the ranks concerned and the count.

    Args:
        name: Table name.
        df: The table (canonical dtypes).
        source: File named when ``sources`` gives none.
        sources: Where the rows came from (to name the files of the ranks concerned).

    Returns:
        ``(table without the repeated rows, warnings)``; ``df`` itself when there are none.
    """
    from advisor_chat.ingest.profile import DataWarning

    key = [c for c in UNIQUE_KEYS.get(name, ()) if c in df.columns]
    if df.empty or not key or len(key) < len(UNIQUE_KEYS[name]):
        return df, []
    dup = (
        df.duplicated(subset=key, keep="first").to_numpy() & df[key].notna().all(axis=1).to_numpy()
    )
    n = int(dup.sum())
    if not n:
        return df, []
    ranks = sorted({int(r) for r in df.loc[dup, "rank"].dropna()}) if "rank" in key else []
    shown, files = _files_of(sources, ranks, source)
    shown = shown or f"table {name}"
    warning = DataWarning(
        code="duplicate_rows",
        message=f"{shown}: {n} of {len(df)} row(s) of {name} repeat the {'/'.join(key)} of an "
        f"earlier row{f' on rank(s) {ranks[:10]}' if ranks else ''} (a file concatenated twice "
        "or a rank read twice?); the first row of each was kept, the other "
        f"{n} left out. Check the export (re-run the offline parse) before trusting these numbers",
        path=files[0] if files else None,
        ranks=tuple(ranks),
    )
    return df.loc[~dup].reset_index(drop=True), [warning]


#: Columns that together identify one device task: a kernel row repeating all of them is the
#: same task written twice (rows appended again, a file concatenated to itself).
KERNEL_TASK_KEY = ("rank", "stream_id", "start_us", "name", "duration_us")
#: Share of a rank's kernel rows that must repeat an earlier task for them to be dropped.
REPEATED_SHARE = 0.25


def check_repeated_kernels(
    df: pd.DataFrame, sources: list[TableSource] | None = None
) -> tuple[pd.DataFrame, list[DataWarning]]:
    """Drop ``kernels`` rows that repeat an earlier task (:data:`KERNEL_TASK_KEY`, first kept).

    Only on ranks where at least :data:`REPEATED_SHARE` of the rows repeat (rows appended again,
    a file concatenated to itself); a few identical rows are left as the export wrote them. Only rows whose start time occurs more than once are compared (one hash pass over
    ``start_us``), so the check costs little on tables of millions of rows. One
    ``duplicate_rows`` warning names the files of the ranks concerned and the count: counted
    twice, those tasks would read as extra launches of the rank.

    Returns:
        ``(table without the repeated rows, warnings)``; ``df`` itself when there are none.
    """
    from advisor_chat.ingest.profile import DataWarning

    if df.empty or "start_us" not in df.columns or "rank" not in df.columns:
        return df, []
    start = df["start_us"]
    cand = start.duplicated(keep=False).to_numpy() & start.notna().to_numpy()
    if not cand.any():
        return df, []
    key = [c for c in KERNEL_TASK_KEY if c in df.columns]
    sub = df.loc[cand, key]
    dup = np.zeros(len(df), dtype=bool)
    dup[np.flatnonzero(cand)[sub.duplicated(keep="first").to_numpy()]] = True
    # a few identical rows occur in real exports (4 of 29 in msprof-analyze's own test data);
    # a rank whose rows repeat by the quarter or more was written twice
    per_rank = pd.Series(dup).groupby(df["rank"].to_numpy()).mean()
    twice = per_rank[per_rank >= REPEATED_SHARE].index
    dup &= df["rank"].isin(twice).to_numpy()
    n = int(dup.sum())
    if not n:
        return df, []
    ranks = sorted({int(r) for r in df.loc[dup, "rank"].dropna()})
    shown, files = _files_of(sources, ranks, "")
    shown = shown or "kernel_details.csv"
    warning = DataWarning(
        code="duplicate_rows",
        message=f"{shown}: {n} kernel row(s) of rank(s) {ranks[:10]} repeat an earlier task (same "
        "stream, start time, name and duration: rows written twice, or a file appended to "
        "itself); each task was counted once. Re-export the profile (re-run the offline parse) "
        "before trusting its operator counts",
        path=files[0] if files else None,
        ranks=tuple(ranks),
    )
    return df.loc[~dup].reset_index(drop=True), [warning]


def validate_table(
    name: str,
    df: pd.DataFrame,
    *,
    source: str = "",
    sources: list[TableSource] | None = None,
    warnings: list[DataWarning] | None = None,
) -> pd.DataFrame:
    """Check ``df`` against the spec of ``name``, coerce dtypes and reject implausible values.

    Missing optional columns are added as NaN / <NA>; unknown extra columns are kept. Values are
    checked by :func:`check_values` (infinite/negative/absurd → NaN; rows without a critical
    value dropped), then rows repeating a key of :data:`UNIQUE_KEYS` are dropped by
    :func:`check_duplicates` (first kept); their warnings go to ``warnings`` (or, when ``None``, to
    ``result.attrs["warnings"]``).

    Args:
        name: A key of :data:`TABLE_SPECS`.
        df: The table as built by a reader.
        source: File the table came from, named in the error.
        sources: Files of the rows (per rank), named in value warnings.
        warnings: List the value warnings are appended to.

    Returns:
        The table with spec columns first, coerced to canonical dtypes (``Int64``, ``float64``,
        ``string``, ``boolean``, ``object``).

    Raises:
        InputError: A required column is missing.
    """
    spec = TABLE_SPECS[name]
    missing = [c for c in spec.required if c not in df.columns]
    if missing:
        raise InputError(
            f"table {name} read from {source or 'an input file'} lacks required column(s) {missing}",
            path=source or None,
            remedy="Re-export the profile with a supported torch_npu/CANN version, or report the header",
        )
    out = df.copy()
    for col in spec.columns:
        target = _DTYPES[col.dtype]
        if col.name not in out.columns:
            fill = float("nan") if target == "float64" else pd.NA
            out[col.name] = pd.Series([fill] * len(out), index=out.index, dtype=target)
            continue
        if col.dtype == "object":
            continue
        if col.dtype in ("int", "float"):
            series = pd.to_numeric(out[col.name], errors="coerce")
            out[col.name] = (
                series.round().astype("Int64") if col.dtype == "int" else series.astype("float64")
            )
        else:
            out[col.name] = out[col.name].astype(target)  # type: ignore[call-overload]
    extra = [c for c in out.columns if c not in spec.names]
    out = out[spec.names + extra].reset_index(drop=True)
    out, found = check_values(name, out, source=source, sources=sources)
    out, dups = check_duplicates(name, out, source=source, sources=sources)
    found = found + dups
    if warnings is not None:
        warnings.extend(found)
    elif found:
        out.attrs["warnings"] = found
    return out
