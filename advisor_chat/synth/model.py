"""Workload model and cluster simulation for the synthetic profile generator.

All times are integer nanoseconds on one epoch clock, so that every derived number (step
breakdown, Overlap Analysis events, communication times) is an exact sum of the same intervals
and the files agree with each other to the last digit.

The simulation runs one *program* (a list of kernels and collectives, identical on every rank)
for every rank and step at once (numpy arrays over ranks). A collective starts on a rank when it
arrives (launches it) and ends on every rank of its communication group at the same time:
``max(arrival over the group) + transfer time``. Early ranks therefore spend the head start in
``Notify_Wait`` (Synchronization Time), the last rank to arrive waits the least (ascend-formats.md
§2.6).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

RANKS_PER_NODE = 8
HCCS_GBPS = 18.0  # Atlas A2 HCCS per-link reference bandwidth (ascend-formats.md §4.2)
RDMA_GBPS = 12.0  # RoCE per-link reference bandwidth
LOCAL_GBPS = 450.0  # on-chip copy
MIB = 1.048576  # payloads are given in MiB; files report decimal MB
TRANSIT_SHARE = 0.9  # transit / transfer-phase length of the slowest rank of a group
NOTIFY_SHARE = 0.03  # Notify_Wait inside the transfer phase, share of the transfer phase
GRAPH_LAUNCH_API = "aclmdlExecuteAsync"  # the host's launch of one graph execution (graph mode)


def double_hash(data: str) -> int:
    """Group hash used by msprof-analyze and CANN for HCCL communicator names.

    Two 32-bit polynomial rolling hashes (multipliers 29 and 131) over the code points, each
    reduced modulo 2**32 at every step; result ``(h29 << 32) | h131``
    (mstt ``cluster_analyse/common_func/utils.py:89-99``).
    """
    uint32_bits = 32
    uint32_max = 0xFFFFFFFF
    prime = [29, 131]
    hash_values = [0, 0]
    for d in data:
        hash_values[0] = (hash_values[0] * prime[0] + ord(d)) & uint32_max
        hash_values[1] = (hash_values[1] * prime[1] + ord(d)) & uint32_max
    return (hash_values[0] << uint32_bits) | hash_values[1]


@dataclass(frozen=True)
class Kernel:
    """A device kernel template (one row of kernel_details.csv per launch)."""

    name: str
    op_type: str
    core: str  # AI_CORE, AI_VECTOR_CORE, MIX_AIC, ...
    in_shapes: str  # logical value without the CANN quotes, ';' between inputs
    in_dtypes: str
    in_formats: str
    out_shapes: str
    out_dtypes: str
    out_formats: str
    dur_us: float
    block_dim: int
    api: str  # CANN API that launches it, e.g. aclnnMatmul
    tag: str = ""  # free label for scenario perturbations (e.g. "qkv")
    # kernel_details.csv columns beyond the duration; the defaults write what every scenario before
    # development set 30 writes (HF32 Eligible ``NO``, the writer's PipeUtilization ratios)
    hf32: bool = False  # HF32 Eligible ``YES``: an fp32 Conv / MatMul computed in HF32 mode
    # PipeUtilization columns that differ from the writer's defaults, by header name without the
    # unit, e.g. (("aic_mac_ratio", 0.21), ("aic_mte2_ratio", 0.93), ("cube_utilization", 24.6));
    # a ratio also sets its ``*_time(us)`` column (ratio x the kernel's aicore / aiv time)
    pmu: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Collective:
    """An HCCL collective on one kind of communication group."""

    op_type: str  # CANN op type ending in '_', e.g. 'hcom_allReduce_'
    group: str  # group kind: 'world', 'tp', 'dp'
    size_mb: float  # payload per rank (MB, decimal)
    overlap: int = 0  # number of following kernels that run on the compute stream meanwhile
    dtype: str = "BFP16"
    tag: str = ""
    latency_us: float = 0.0  # fixed per-op cost (notify handshakes, launch) on top of the transfer
    peer_op: str = (
        ""  # point-to-point: op type of the ranks with local index 1 (e.g. 'hcom_receive_')
    )
    # loops through the HCCL buffer (payload above HCCL_BUFFSIZE): every link moves the op's data in
    # this many transfers (packets), and every loop costs ``chunk_us`` of handshake on every link
    chunks: int = 1
    chunk_us: float = 0.0
    # bandwidth factor of every link of this op (an algorithm slower than the fabric allows, e.g. a
    # deterministic reduction); 1.0 = the links' bandwidth
    bw_factor: float = 1.0
    # bandwidth factor of this op's RDMA (RoCE) links only, its HCCS and local copies unchanged (a
    # traffic pattern the fabric handles worse than others, e.g. the many-to-one incast of an
    # all-to-all when the RoCE congestion control is off); 1.0 = the links' bandwidth
    rdma_factor: float = 1.0
    # elements per rank written as the op's ``count`` (trace_view HCCL event, DB COMMUNICATION_OP):
    # 0 = ``size_mb * 1e6 / 2`` (a 2-byte element, what every scenario before development set 35
    # writes whatever its ``dtype``); set it for a 4-byte ``dtype`` (e.g. ``"FP32"``) to write the
    # real element count
    count: int = 0

    def op_type_of(self, local: int) -> str:
        """Op type on a rank with this local index (sender/receiver of a point-to-point pair)."""
        return self.peer_op if self.peer_op and local == 1 else self.op_type


Item = Kernel | Collective


@dataclass
class GroupKind:
    """One kind of communication group, partitioning the ranks.

    Attributes:
        kind: key used by `Collective.group`.
        pg_name: process-group name written to ``parallel_group_info``.
        members: list of sorted global-rank lists, one per group.
        gidx: group index per global rank (shape [R]).
        local: local rank (index in its group) per global rank.
    """

    kind: str
    pg_name: str
    members: list[list[int]]
    gidx: np.ndarray
    local: np.ndarray
    comm_names: list[str] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    # link structure per rank (padded with -1): peer global rank, transport 0=HCCS 1=RDMA 2=LOCAL
    peer: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    transport: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int8))
    frac: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    ranks_text: dict[int, str] = field(default_factory=dict)  # writer cache: indented global_ranks


def node_ip(node: int) -> str:
    """IPv4 address of a synthetic node."""
    return f"90.91.{105 + node // 200}.{46 + node % 200}"


def make_group_kind(
    kind: str,
    pg_name: str,
    members: list[list[int]],
    ranks: int,
    base_us: int,
    serial: int,
    place: Sequence[tuple[int, int]] | None = None,
) -> GroupKind:
    """Build a group kind with communicator names, hashes and the link structure.

    ``place``: (node index, device id) of every global rank, for a job that is not laid out
    ``RANKS_PER_NODE`` ranks per node in rank order (e.g. 4 cards on each of 4 servers); None =
    ``(rank // RANKS_PER_NODE, rank % RANKS_PER_NODE)``, the layout of every other scenario.
    """

    def node(r: int) -> int:
        return place[r][0] if place is not None else r // RANKS_PER_NODE

    def device(r: int) -> int:
        return place[r][1] if place is not None else r % RANKS_PER_NODE

    gidx = np.full(ranks, -1, dtype=np.int64)
    local = np.full(ranks, -1, dtype=np.int64)
    comm_names: list[str] = []
    hashes: list[str] = []
    for g, mem in enumerate(members):
        for i, r in enumerate(mem):
            gidx[r] = g
            local[r] = i
        first = mem[0]
        name = (
            f"{node_ip(node(first))}%enp189s0f0_60000_{device(first)}_{base_us + serial * 1000 + g}"
        )
        comm_names.append(name)
        hashes.append(str(double_hash(name)))
    # links: HCCS mesh to same-node members (max 7), one RDMA ring link to the same device on the
    # next node of the group, LOCAL self copy.
    max_links = 9
    peer = np.full((ranks, max_links), -1, dtype=np.int64)
    transport = np.full((ranks, max_links), -1, dtype=np.int8)
    frac = np.zeros((ranks, max_links))
    for mem in members:
        by_node: dict[int, list[int]] = {}
        for r in mem:
            by_node.setdefault(node(r), []).append(r)
        nodes = sorted(by_node)
        for r in mem:
            nd = node(r)
            same = by_node[nd]
            n_loc = len(same)
            j = 0
            peer[r, j] = r
            transport[r, j] = 2
            frac[r, j] = 0.1 / n_loc
            j += 1
            for p in same:
                if p != r and j < 8:
                    peer[r, j] = p
                    transport[r, j] = 0
                    frac[r, j] = 1.0 / n_loc
                    j += 1
            if len(nodes) > 1:
                nxt = nodes[(nodes.index(nd) + 1) % len(nodes)]
                cand = by_node[nxt]
                pos = same.index(r)
                peer[r, j] = cand[pos % len(cand)]
                transport[r, j] = 1
                frac[r, j] = 2.0 * (len(nodes) - 1) / len(nodes) / n_loc
    return GroupKind(kind, pg_name, members, gidx, local, comm_names, hashes, peer, transport, frac)


@dataclass(frozen=True)
class HostOp:
    """An operator the host runs itself between two device tasks (``Perturb.host_ops``).

    Attributes:
        frames: nested host frames, outermost first (e.g. ``["aten::isin"]`` or
            ``["c10d::allreduce_", "gloo:all_reduce"]``); the inner ones cover the host's own work.
        input_dims: ``Input Dims`` of the outermost frame (``record_shapes``), "" for none.
        input_type: ``Input type`` of the outermost frame, "" for none.
        d2h_bytes / d2h_us: the copy of the inputs to the host (device task size and duration).
        h2d_bytes / h2d_us: the copy of the result back to the device.
    """

    frames: tuple[str, ...]
    input_dims: str
    input_type: str
    d2h_bytes: int
    d2h_us: float
    h2d_bytes: int
    h2d_us: float


@dataclass(frozen=True)
class HostCall:
    """A CANN runtime call the host makes before a launch (``Perturb.host_calls``).

    Attributes:
        api: the call, e.g. ``"aclrtMallocHost"`` (written as ``AscendCL@{api}``, mode ACL_RTS);
            ``""`` = no CANN call: the host works ``us`` inside the frames alone (an aten operator
            that runs on the CPU, e.g. ``aten::tril`` on a host tensor).
        us: its duration.
        frames: ``cpu_op`` frames around it on the Python thread (outermost first), e.g.
            ``("aten::pin_memory", "aten::_pin_memory")``; empty = none.
        tail_us: host time inside the frames after the call (e.g. filling the new buffer).
        input_dims / input_type: ``Input Dims`` / ``Input type`` of the outermost frame
            (``record_shapes``, ``;`` between inputs); ``""`` = none written.
        copy_bytes / copy_us: the call queues an in-stream host-to-device copy of that many bytes
            (``aclrtMemcpyAsync`` of a ``tensor.to(device, non_blocking=True)``): the writer
            records it as a ``MEMCPY_ASYNC`` task on the compute stream of ``copy_us``, starting
            just after the call returns, linked to the call by a HostToDevice flow. The device must
            be idle then (the scenario's ``kernel_stalls`` / ``step_host_gaps`` cover the calls).
            0 (the default) = the call's own event only, as for every scenario before development
            set 36.
    """

    api: str
    us: float
    frames: tuple[str, ...] = ()
    tail_us: float = 0.0
    input_dims: str = ""
    input_type: str = ""
    copy_bytes: int = 0
    copy_us: float = 0.0


@dataclass(frozen=True)
class D2HPull:
    """A tensor the host copies to itself and then works on (``Perturb.step_d2h_pulls``).

    Attributes:
        input_dims: ``Input Dims`` of the copy (the tensor's shape, e.g. ``"4096,12288"``).
        dtype: ``Input type`` of the copy (e.g. ``"c10::BFloat16"``).
        nbytes: bytes copied (the ``size(B)`` of the device-to-host task).
        copy_us: duration of the device-to-host copy task.
        frames: ``cpu_op`` frames of the host's work on the copy (outermost first), e.g.
            ``("aten::histc",)``.
        host_us: duration of that work.
        py_frames: ``python_function`` frames (``with_stack``) of that work, outermost first,
            written after (inside) ``frames`` over the same span, e.g. a debugging tool's
            ``dump_tensor`` > ``torch/serialization.py(…): save``; empty = none.
    """

    input_dims: str
    dtype: str
    nbytes: int
    copy_us: float
    frames: tuple[str, ...]
    host_us: float
    py_frames: tuple[str, ...] = ()


@dataclass
class Perturb:
    """Per-rank knobs a scenario sets (all arrays are over global ranks).

    Attributes:
        dur_scale: compute-duration factor per rank, shape [R].
        tag_scale: {(rank, kernel tag): factor} for single-shape regressions.
        gap_us: mean device gap between consecutive kernels (host dispatch) per rank.
        api_us: duration of the CANN launch API per rank.
        lead_us: how far the host runs ahead of the device (HostToDevice flow length) per rank;
            None means "host-bound" (flow length = api duration + a few us).
        step_stall_us: function (step_index) -> array [R] of Free at step start.
        coll_delay_us: function (step_index, collective_index) -> array [R] of extra delay
            before launching that collective (host stall), or None.
        link_factor: {(src_global, dst_global): bandwidth factor}.
        dispatch_stalls: {rank: (every_n_kernels, stall_us)} long host stalls between kernels.
        coll_scale: {collective tag: array [R]} payload factor per rank (the group's transfer is
            set by its slowest member).
        end_stall_us: array [R] of host time at the end of every step (after the last device
            task, before the next step's first launch), or None. When set, steps have per-rank
            boundaries (``StepRec.r_start`` / ``r_end``): the stalled rank starts every step late
            (the step before the capture had the stall too) and the others wait for it in the
            step's first collective.
        lost_kernels: {step index: array [R]} number of leading device tasks of that step whose
            device records are missing (capture artifact); collectives launched before the
            first surviving kernel are missing too. The simulated timeline is unchanged.
        gc_stalls: the ``coll_delay_us`` stalls are Python garbage-collection pauses of the host:
            each is also recorded as a host GC interval (``StepRec.gc``) ending where the
            delayed launch starts.
        kernel_swap: {(step index or -1 for every step, rank, kernel index): Kernel} a different
            kernel template for one rank (and step) at one position of the program: its name, op
            type, accelerator core, shapes and dtypes are written instead of the program's, and its
            ``dur_us`` replaces the base duration (jitter, ``dur_scale`` and ``tag_scale`` still
            apply). A step-specific entry wins over a -1 entry. Empty = the program on every rank.
        step_link_factor: {step index: {(src_global, dst_global): bandwidth factor}} on top of
            ``link_factor`` in that step only (a flapping link, congestion in some steps). Empty =
            the same bandwidth in every step.
        kernel_stalls: {rank: {kernel index: stall_us}} host time before launching that kernel in
            every step (the host queue drains, the device idles before it and the launch lands just
            before the kernel). Empty = none.
        step_kernel_stalls: {step index: {rank: {kernel index: stall_us}}} device idle before that
            kernel in that step only, spent by the host inside the kernel's launch call (online
            operator compilation): the launch event runs from just after the previous launch to just
            before the kernel, and the launches the host queued meanwhile follow right after it.
            Empty = none.
        coll_dst_scale: {collective tag: {destination global rank: factor}} payload factor of the
            links towards one rank (an AllToAll sending more tokens to one rank), on top of
            ``coll_scale``. Empty = none.
        host_syncs: {rank: kernel indices} the host synchronizes the stream right before
            launching those kernels (``tensor.item()``): the writer records a blocking
            ``aclrtSynchronizeStream`` call from the previous launch until the device has run
            everything queued, and an ``aten::item`` operator around it. The device idle after it
            is ``kernel_stalls``' (the host's work once the call returns). Empty = none.
        aicore_mhz: {rank: [(step index, MHz)]} the rank's AI Core clock from the start of that
            step on (the writer's AI Core Freq counter track; the durations are the scenario's to
            scale). Ranks not listed run at ``AICORE_MHZ`` throughout. Empty = every rank steady.
        step_group: {(step index, collective index): group kind key} the collective runs on
            another communicator (a group kind of the plan, e.g. one created anew in that step)
            instead of its program group. Empty = every collective on its program group.
        mem_record: {rank: per step index [(kernel index, allocated MB, reserved MB, active MB)]}
            the PyTorch caching allocator's totals of that rank, sampled at those kernels' starts:
            the writer writes them as memory_record.csv ``PTA`` rows, each with an ``APP`` row (the
            process' device memory: the PTA reservation plus ``APP_EXTRA_MB`` of runtime) instead
            of the default four APP samples per step. Ranks not listed keep the default. Empty =
            the default on every rank.
        skip_kernels: {rank: kernel indices} program positions the rank does not run (another code
            path on that rank, or fewer micro-batches): no launch, no device task, no time. Empty =
            every rank runs the whole program.
        h2d_copies: {rank: {kernel index: (input dims, dtype, copy µs)}} a blocking host-to-device
            copy from pageable memory right before launching that kernel: the writer records an
            ``aten::to`` / ``aten::copy_`` operator around an ``aclrtSynchronizeStream`` (until the
            device has run everything queued; not before the first kernel) and an ``aclrtMemcpy``
            of ``copy µs`` ending shortly before the launch. The device idle it causes is
            ``kernel_stalls``' (the scenario sets both). Empty = none.
        dev_copies: {rank: {kernel index: [(operation, bytes, copy µs), ...]}} memory copies the
            compute stream runs right before that kernel (in-stream, asynchronous for the host:
            ``aclrtMemcpyAsync``), ``operation`` ``"device to host"`` / ``"host to device"``: the
            device runs them back to back in the gap before the kernel (their time is added to it)
            and the writer records each as a ``MEMCPY_ASYNC`` task on the compute stream (not an
            operator: no kernel_details row, not Computing) with its launch. Empty = none.
        step_host_gaps: {step index: {rank: {kernel index: gap µs}}} device idle before that kernel
            in that step while the host thread is away (blocked outside any CANN call, e.g. waiting
            for the Python GIL): no host event covers the gap, the kernel's launch lands just before
            it and the launches the host would have issued meanwhile follow right after it. Empty =
            none.
        event_waits: collective indices (position among the program's collectives) after whose
            launch the compute stream waits on an event the communication stream records when the
            collective ends (``handle.wait()`` right after an ``async_op=True`` collective): the
            writer records an ``aclrtRecordEvent`` and an ``aclrtStreamWaitEvent`` right after the
            collective's launch and an ``EVENT_WAIT`` task on the compute stream from the end of the
            last kernel before the collective to the collective's end (not an operator, not
            Computing). The timeline is the program's (the scenario gives the collective
            ``overlap=0``). Empty = none.
        alloc_calls: {step index: {rank: {kernel index: [(CANN API, µs), ...]}}} the caching
            allocator goes to the device before launching that kernel in that step: the writer
            records an ``aclrtSynchronizeDevice`` from just after the previous launch until the
            device has run everything queued, then the calls (``aclrtFree`` / ``aclrtMalloc``) back
            to back, ending just before the kernel's launch. The device idle is the scenario's to set
            (``step_host_gaps``, whose launch placement it shares). Empty = none.
        py_calls: {step index: {rank: [Python frame, ...]}} the rank's Python thread runs these
            nested frames (outermost first, e.g. ``"data/raw_text.py(97): __getitem__"``) from just
            after the step starts until just before the step's first launch (work done inline in the
            training loop): the writer records them as ``python_function`` events on the Python
            thread (``with_stack`` style). The device idle is the scenario's to set
            (``step_host_gaps`` on kernel 0). Empty = none.
        host_ops: {rank: {kernel index: HostOp}} the rank's host runs an operator itself (an
            operator that falls back to the CPU, a collective of a CPU process group) right before
            launching that kernel, in every step: the writer records on the compute stream a
            ``MEMCPY_ASYNC`` device-to-host copy right after the previous device task and a
            host-to-device copy ending just before the kernel, and on the host the operator's frames
            (``cpu_op``) around an ``aten::to`` with ``aclrtMemcpyAsync`` + ``aclrtSynchronizeStream``
            (the device-to-host copy), no launch while it computes, then an ``aten::copy_`` with
            ``aclrtMemcpyAsync`` (the copy back). The device idle is the scenario's to set
            (``step_host_gaps`` on that kernel, in every step). Empty = none.
        hidden_groups: {rank: group kind keys} collectives of those group kinds are not HCCL
            operations on that rank (its group runs another backend): no device record, no
            communication.json / kernel_details row, no HCCL launch and no ``parallel_group_info``
            entry. The simulated timeline is unchanged (the scenario gives such a rank a group of
            its own, so the collective takes no time there). Empty = every collective written.
        launch_py_frames: {rank: {kernel index: (Python frames, µs)}} the rank's Python thread runs
            these nested frames (outermost first, e.g. a module hook) right before launching that
            kernel, in every step: the writer records them as ``python_function`` events ending just
            before the launch, lasting ``µs`` (no earlier than the end of the previous launch). The
            device idle it causes is the scenario's to set (``kernel_stalls``). Empty = none.
        host_calls: {rank: {kernel index: [HostCall, ...]}} CANN runtime calls the host makes right
            before launching that kernel, in every step (e.g. ``aclrtFreeHost`` / ``aclrtMallocHost``
            of a pinned buffer allocated anew): the writer lays them out back to back from just after
            the previous launch (the step start for kernel 0), each inside its ``cpu_op`` frames;
            in-stream copies of that kernel (``dev_copies``) follow them. The device idle is the
            scenario's to set (``kernel_stalls``; ``host_calls_span_us`` gives the calls' span).
            Empty = none.
        step_d2h_pulls: {step index: {rank: {kernel index: [D2HPull, ...]}}} in that step the host
            copies tensors to itself one by one right before launching that kernel (``.cpu()``: an
            ``aten::to`` > ``aten::_to_copy`` > ``aten::copy_`` around an ``aclrtMemcpyAsync`` and an
            ``aclrtSynchronizeStream`` until the copy is done, a device-to-host ``MEMCPY_ASYNC`` task
            on the compute stream), each followed by the host's work on it (``cpu_op`` frames). The
            device idle is the scenario's to set (``step_host_gaps``; ``d2h_pulls_span_us`` gives the
            span). Empty = none.
        gc_host_gaps: the ``step_host_gaps`` are Python garbage-collection pauses of the host (an
            explicit ``gc.collect()`` in the training loop): each is also recorded as a host GC
            interval (``StepRec.gc``) as long as the gap, ending just before the delayed launch (no
            earlier than the step start). False = the gaps leave no GC record.
        step_skip_colls: {step index: collective indices} collectives of the program (position
            among the program's collectives) that no rank runs in that step (a collective issued only
            in some steps, e.g. the gradient all-reduce of the last micro-batch of an accumulation
            when every profiled step is one micro-batch): no device record, no time, no launch.
            Empty = every collective in every step.
        model_ids: {(step index or -1 for every step, kernel index): graph model id} the kernel runs
            inside a compiled graph (graph mode: torchair / GE) with that ``Model ID`` (kernel_details
            column, trace ``Model Id``) on every rank: a run of consecutive kernels with the same id
            is one graph execution, launched once by the host (an ``aclmdlExecuteAsync`` call, mode
            ``ACL_MODEL``, with the HostToDevice flow to the run's first kernel); the other kernels
            of the run have no launch of their own. A step-specific entry wins over a -1 entry (a
            graph compiled anew in that step). Empty = every kernel eager (``4294967295``, its own
            launch). The simulated timeline is unchanged (see ``launch_api_us``).
        launch_api_us: {kernel index: µs} duration of the host's launch call of that kernel (e.g. a
            graph launch binding the graph's inputs), on every rank and step, instead of
            ``api_us`` (with the same jitter). Empty = ``api_us`` for every launch.
        step_host_calls: {step index: {rank: {kernel index: [HostCall, ...]}}} in that step the
            rank's host makes these calls before launching that kernel instead of its
            ``host_calls`` there (host work whose length changes from step to step, e.g. an
            allocation that sometimes stalls); laid out like ``host_calls``. The device idle is the
            scenario's to set (``step_host_gaps``, whose launch placement it shares;
            ``host_calls_span_us`` gives the calls' span). Empty = none.
    """

    dur_scale: np.ndarray
    gap_us: np.ndarray
    api_us: np.ndarray
    lead_us: np.ndarray
    host_bound: np.ndarray
    tag_scale: dict[tuple[int, str], float] = field(default_factory=dict)
    step_stall_us: Callable[[int], np.ndarray] | None = None
    coll_delay_us: Callable[[int, int], np.ndarray | None] | None = None
    link_factor: dict[tuple[int, int], float] = field(default_factory=dict)
    dispatch_stalls: dict[int, tuple[int, float]] = field(default_factory=dict)
    coll_scale: dict[str, np.ndarray] = field(default_factory=dict)
    end_stall_us: np.ndarray | None = None
    lost_kernels: dict[int, np.ndarray] = field(default_factory=dict)
    gc_stalls: bool = False
    kernel_swap: dict[tuple[int, int, int], Kernel] = field(default_factory=dict)
    step_link_factor: dict[int, dict[tuple[int, int], float]] = field(default_factory=dict)
    kernel_stalls: dict[int, dict[int, float]] = field(default_factory=dict)
    step_kernel_stalls: dict[int, dict[int, dict[int, float]]] = field(default_factory=dict)
    coll_dst_scale: dict[str, dict[int, float]] = field(default_factory=dict)
    host_syncs: dict[int, set[int]] = field(default_factory=dict)
    aicore_mhz: dict[int, list[tuple[int, float]]] = field(default_factory=dict)
    step_group: dict[tuple[int, int], str] = field(default_factory=dict)
    mem_record: dict[int, list[list[tuple[int, float, float, float]]]] = field(default_factory=dict)
    skip_kernels: dict[int, set[int]] = field(default_factory=dict)
    h2d_copies: dict[int, dict[int, tuple[str, str, float]]] = field(default_factory=dict)
    dev_copies: dict[int, dict[int, list[tuple[str, int, float]]]] = field(default_factory=dict)
    step_host_gaps: dict[int, dict[int, dict[int, float]]] = field(default_factory=dict)
    event_waits: set[int] = field(default_factory=set)
    alloc_calls: dict[int, dict[int, dict[int, list[tuple[str, float]]]]] = field(
        default_factory=dict
    )
    py_calls: dict[int, dict[int, list[str]]] = field(default_factory=dict)
    step_skip_kernels: dict[int, dict[int, set[int]]] = field(default_factory=dict)
    host_ops: dict[int, dict[int, HostOp]] = field(default_factory=dict)
    hidden_groups: dict[int, set[str]] = field(default_factory=dict)
    launch_py_frames: dict[int, dict[int, tuple[tuple[str, ...], float]]] = field(
        default_factory=dict
    )
    host_calls: dict[int, dict[int, list[HostCall]]] = field(default_factory=dict)
    step_d2h_pulls: dict[int, dict[int, dict[int, list[D2HPull]]]] = field(default_factory=dict)
    gc_host_gaps: bool = False
    step_skip_colls: dict[int, set[int]] = field(default_factory=dict)
    step_host_calls: dict[int, dict[int, dict[int, list[HostCall]]]] = field(default_factory=dict)
    model_ids: dict[tuple[int, int], int] = field(default_factory=dict)
    launch_api_us: dict[int, float] = field(default_factory=dict)

    def model_id_at(self, si: int, j: int) -> int | None:
        """The graph model id of program kernel ``j`` in step index ``si`` (None = eager)."""
        if not self.model_ids:
            return None
        mid = self.model_ids.get((si, j))
        return self.model_ids.get((-1, j)) if mid is None else mid

    def kernel_at(self, si: int, r: int, j: int, default: Kernel) -> Kernel:
        """The kernel template rank ``r`` runs at program position ``j`` in step index ``si``."""
        if not self.kernel_swap:
            return default
        k = self.kernel_swap.get((si, r, j)) or self.kernel_swap.get((-1, r, j))
        return k if k is not None else default


#: Nominal AI Core clock of the simulated device (Atlas 800T A2 / 910B), MHz.
AICORE_MHZ = 1800.0


def default_perturb(ranks: int) -> Perturb:
    """Balanced cluster: no rank differs except for jitter."""
    return Perturb(
        dur_scale=np.ones(ranks),
        gap_us=np.full(ranks, 14.0),
        api_us=np.full(ranks, 11.0),
        lead_us=np.full(ranks, 1800.0),
        host_bound=np.zeros(ranks, dtype=bool),
    )


@dataclass
class OpRec:
    """One collective launch in one step, arrays over ranks."""

    item: Collective
    kind: GroupKind
    index: int  # per (group kind, op type) counter -> op name index
    start: np.ndarray  # ns
    end: np.ndarray  # ns
    sync_ns: np.ndarray
    wait_extra_ms: np.ndarray  # Notify_Wait during the transfer phase
    link_mb: np.ndarray  # [R, L]
    link_ms: np.ndarray  # [R, L]
    api_start: np.ndarray  # ns
    present: np.ndarray | None = None  # [R] bool: device record written (None = all)


@dataclass
class StepRec:
    """One captured step for all ranks."""

    step_id: int
    start: int  # ns, identical on all ranks (wall-clock aligned steps)
    end: int
    k_start: np.ndarray  # [R, K] ns
    k_dur: np.ndarray  # [R, K] ns
    k_api_start: np.ndarray  # [R, K] ns
    k_api_dur: np.ndarray  # [R, K] ns
    ops: list[OpRec]
    r_start: np.ndarray | None = None  # [R] ns per-rank step start (None = ``start`` on all ranks)
    r_end: np.ndarray | None = None  # [R] ns per-rank step end
    k_present: np.ndarray | None = None  # [R, K] bool: device record written (None = all)
    gc: list[tuple[int, int, int]] = field(default_factory=list)  # host GC (rank, start, end) ns

    def bounds(self, r: int) -> tuple[int, int]:
        """(start, end) ns of this step on rank ``r``."""
        if self.r_start is None or self.r_end is None:
            return self.start, self.end
        return int(self.r_start[r]), int(self.r_end[r])


@dataclass
class Cluster:
    """A simulated cluster run: what the writer turns into files."""

    ranks: int
    program: list[Item]
    kernels: list[Kernel]
    kinds: dict[str, GroupKind]
    steps: list[StepRec]
    perturb: Perturb
    t0_ns: int
    seed: int = 0  # the jitter seed (a scenario's answer can re-simulate counterfactuals with it)


def _launch_holds_host(
    r: int,
    j: int,
    k_start: np.ndarray,
    k_api_start: np.ndarray,
    k_api_dur: np.ndarray,
    ops: list[OpRec],
    floor: int,
) -> None:
    """Rank ``r``'s launch of kernel ``j`` holds the host until just before the kernel starts.

    The call starts right after the previous launch, not before ``floor`` (the step start: the host
    works on this step); the launches (kernels and collectives) that the host would have issued
    meanwhile follow it back to back, each before its device task.
    """
    end = int(k_start[r, j]) - 8_000
    a0 = int(k_api_start[r, j - 1] + k_api_dur[r, j - 1]) + 2_000 if j > 0 else floor
    a0 = max(a0, floor + 1_000)
    if a0 >= end:
        a0 = end - int(k_api_dur[r, j])
    k_api_start[r, j] = a0
    k_api_dur[r, j] = end - a0
    nxt = end + 2_000
    for q in range(j + 1, k_start.shape[1]):
        if k_api_start[r, q] >= nxt:
            break
        k_api_start[r, q] = min(nxt, int(k_start[r, q] - k_api_dur[r, q]) - 1_000)
        nxt = int(k_api_start[r, q] + k_api_dur[r, q]) + 2_000
    for op in ops:
        if op.start[r] > end and a0 < op.api_start[r] < nxt:
            op.api_start[r] = min(nxt, int(op.start[r]) - 1_000)


def _launch_after_host_gap(
    r: int,
    j: int,
    k_start: np.ndarray,
    k_api_start: np.ndarray,
    k_api_dur: np.ndarray,
    ops: list[OpRec],
) -> None:
    """Rank ``r``'s host was away before launching kernel ``j``: it launches it just before it starts.

    The launches (kernels and collectives) the host would have issued meanwhile follow it back to
    back, each before its device task.
    """
    a0 = int(k_start[r, j] - k_api_dur[r, j]) - 8_000
    k_api_start[r, j] = a0
    nxt = a0 + int(k_api_dur[r, j]) + 2_000
    for q in range(j + 1, k_start.shape[1]):
        if k_api_start[r, q] >= nxt:
            break
        k_api_start[r, q] = min(nxt, int(k_start[r, q] - k_api_dur[r, q]) - 1_000)
        nxt = int(k_api_start[r, q] + k_api_dur[r, q]) + 2_000
    for op in ops:
        if op.start[r] > k_start[r, j] and op.api_start[r] < nxt:
            op.api_start[r] = min(nxt, int(op.start[r]) - 1_000)


def simulate(
    program: list[Item],
    kinds: dict[str, GroupKind],
    perturb: Perturb,
    ranks: int,
    steps: int,
    seed: int,
    first_step: int,
    t0_ns: int,
) -> Cluster:
    """Run the program on every rank for ``steps`` steps.

    Returns:
        Cluster with per-step arrays; times are integer ns.
    """
    rng = np.random.default_rng(seed)
    kernels = [it for it in program if isinstance(it, Kernel)]
    nk = len(kernels)
    base = np.array([k.dur_us for k in kernels])
    tag_mult = np.ones((ranks, nk))
    for (r, tag), f in perturb.tag_scale.items():
        for j, k in enumerate(kernels):
            if k.tag == tag:
                tag_mult[r, j] *= f
    # static per-link bandwidth (seeded, +-3%) and scenario factors
    link_bw: dict[str, np.ndarray] = {}
    for kind in kinds.values():
        ref = np.where(
            kind.transport == 0, HCCS_GBPS, np.where(kind.transport == 1, RDMA_GBPS, LOCAL_GBPS)
        )
        bw = ref * (1.0 + 0.03 * np.clip(rng.standard_normal(ref.shape), -2, 2))
        for (src, dst), f in perturb.link_factor.items():
            hit = kind.peer[src] == dst
            bw[src, hit] *= f
        link_bw[kind.kind] = bw
    counters: dict[tuple[str, str], int] = {}
    out_steps: list[StepRec] = []
    s_start = t0_ns
    per_rank = perturb.end_stall_us is not None
    end_stall = np.zeros(ranks, dtype=np.int64)
    if perturb.end_stall_us is not None:
        end_stall = (np.asarray(perturb.end_stall_us) * 1000).astype(np.int64)
    # the step before the capture ended with the stall too
    r_start = np.full(ranks, s_start, dtype=np.int64) + end_stall
    for si in range(steps):
        bw_step = link_bw
        if si in perturb.step_link_factor:
            bw_step = {name: v.copy() for name, v in link_bw.items()}
            for kind in kinds.values():
                for (src, dst), f in perturb.step_link_factor[si].items():
                    bw_step[kind.kind][src, kind.peer[src] == dst] *= f
        t = r_start.copy() if per_rank else np.full(ranks, s_start, dtype=np.int64)
        if perturb.step_stall_us is not None:
            t += (np.asarray(perturb.step_stall_us(si)) * 1000).astype(np.int64)
        jit = 1.0 + 0.01 * np.clip(rng.standard_normal((ranks, nk)), -3, 3)
        base_m = base[None, :]
        if perturb.kernel_swap:
            base_m = np.repeat(base[None, :], ranks, axis=0)
            for r_ in range(ranks):
                for j_ in range(nk):
                    kk = perturb.kernel_at(si, r_, j_, kernels[j_])
                    if kk is not kernels[j_]:
                        base_m[r_, j_] = kk.dur_us
        k_dur = np.maximum(
            (base_m * perturb.dur_scale[:, None] * tag_mult * jit * 1000).astype(np.int64),
            1000,
        )
        gj = 1.0 + 0.2 * np.clip(rng.standard_normal((ranks, nk)), -3, 3)
        k_gap = (perturb.gap_us[:, None] * gj * 1000).astype(np.int64)
        for r, (every, stall_us) in perturb.dispatch_stalls.items():
            idx = np.arange(nk)
            k_gap[r, (idx % every) == every - 1] += int(stall_us * 1000)
        for r, at in perturb.kernel_stalls.items():
            for j, stall_us in at.items():
                k_gap[r, j] += int(stall_us * 1000)
        step_stalls = perturb.step_kernel_stalls.get(si, {})
        for r, at in step_stalls.items():
            for j, stall_us in at.items():
                k_gap[r, j] += int(stall_us * 1000)
        for r, copies_at in perturb.dev_copies.items():
            for j, copies in copies_at.items():
                k_gap[r, j] += round(sum(c[2] for c in copies) * 1000)
        host_gaps = perturb.step_host_gaps.get(si, {})
        for r, gaps_at in host_gaps.items():
            for j, gap_us in gaps_at.items():
                k_gap[r, j] += int(gap_us * 1000)
        for r, skip in perturb.skip_kernels.items():
            js = sorted(skip)
            k_dur[r, js] = 0
            k_gap[r, js] = 0
        for r, skip in perturb.step_skip_kernels.get(si, {}).items():
            js = sorted(skip)
            k_dur[r, js] = 0
            k_gap[r, js] = 0
        aj = 1.0 + 0.1 * np.clip(rng.standard_normal((ranks, nk)), -3, 3)
        k_api_dur = (perturb.api_us[:, None] * aj * 1000).astype(np.int64)
        for j, launch_us in perturb.launch_api_us.items():
            k_api_dur[:, j] = (launch_us * aj[:, j] * 1000).astype(np.int64)
        k_start = np.zeros((ranks, nk), dtype=np.int64)
        ops: list[OpRec] = []
        gc: list[tuple[int, int, int]] = []
        pending_end = t.copy()
        overlap_left = 0
        ki = 0
        ci = 0
        for it in program:
            if isinstance(it, Kernel):
                start = t + k_gap[:, ki]
                k_start[:, ki] = start
                t = start + k_dur[:, ki]
                ki += 1
                if overlap_left > 0:
                    overlap_left -= 1
                    if overlap_left == 0:
                        t = np.maximum(t, pending_end)
                continue
            if perturb.step_skip_colls and ci in perturb.step_skip_colls.get(si, ()):
                ci += 1  # not issued in this step (Perturb.step_skip_colls)
                continue
            kind = kinds[perturb.step_group.get((si, ci), it.group)]
            arrival = np.maximum(t + (perturb.gap_us * 1000).astype(np.int64), pending_end)
            if perturb.coll_delay_us is not None:
                extra = perturb.coll_delay_us(si, ci)
                if extra is not None:
                    extra_ns = (np.asarray(extra) * 1000).astype(np.int64)
                    arrival = arrival + extra_ns
                    if perturb.gc_stalls:
                        lead_gc = np.where(
                            perturb.host_bound, perturb.api_us + 8.0, perturb.lead_us
                        )
                        launch = arrival - (lead_gc * 1000).astype(np.int64)
                        for gr in np.flatnonzero(extra_ns > 0).tolist():
                            gc.append((gr, int(launch[gr] - extra_ns[gr]), int(launch[gr])))
            ngroups = len(kind.members)
            amax = np.full(ngroups, np.iinfo(np.int64).min, dtype=np.int64)
            np.maximum.at(amax, kind.gidx, arrival)
            a_g = amax[kind.gidx]
            valid = kind.transport >= 0
            oj = 1.0 + 0.01 * np.clip(rng.standard_normal(kind.frac.shape), -3, 3)
            link_mb = np.where(valid, it.size_mb * MIB * kind.frac, 0.0)
            if it.tag and it.tag in perturb.coll_scale:
                link_mb = link_mb * np.asarray(perturb.coll_scale[it.tag])[:, None]
            if it.tag and it.tag in perturb.coll_dst_scale:
                for dst, f in perturb.coll_dst_scale[it.tag].items():
                    link_mb = np.where(valid & (kind.peer == dst), link_mb * f, link_mb)
            link_ms = np.where(valid, link_mb / (bw_step[kind.kind] * oj), 0.0)
            if it.bw_factor != 1.0:
                link_ms = link_ms / it.bw_factor
            if it.rdma_factor != 1.0:
                link_ms = np.where(kind.transport == 1, link_ms / it.rdma_factor, link_ms)
            if it.chunks > 1 and it.chunk_us > 0:
                wire = valid & (kind.transport != 2)
                link_ms = np.where(wire, link_ms + it.chunks * it.chunk_us / 1000, link_ms)
            # time info transit = SDMA (HCCS) + RDMA; LOCAL copies are on-chip and excluded
            transit = np.where(kind.transport == 2, 0.0, link_ms).sum(axis=1)
            tmax = np.zeros(ngroups)
            np.maximum.at(tmax, kind.gidx, transit)
            t_g_ms = tmax / TRANSIT_SHARE
            if it.latency_us > 0:
                t_g_ns = ((t_g_ms + it.latency_us / 1000) * 1e6).astype(np.int64)[kind.gidx]
            else:
                t_g_ns = (t_g_ms * 1e6).astype(np.int64)[kind.gidx]
            end = a_g + t_g_ns
            wait_extra = tmax[kind.gidx] - transit + NOTIFY_SHARE * t_g_ms[kind.gidx]
            key = (kind.kind, it.op_type)
            op_idx = counters.get(key, 0)
            counters[key] = op_idx + 1
            lead = np.where(perturb.host_bound, perturb.api_us + 8.0, perturb.lead_us)
            api_start = arrival - (lead * 1000).astype(np.int64)
            ops.append(
                OpRec(
                    it,
                    kind,
                    op_idx,
                    arrival,
                    end,
                    a_g - arrival,
                    wait_extra,
                    link_mb,
                    link_ms,
                    api_start,
                )
            )
            ci += 1
            if it.overlap > 0:
                pending_end = end
                overlap_left = it.overlap
                t = arrival
            else:
                t = end
                pending_end = end
        t = np.maximum(t, pending_end)
        s_end = int(t.max()) + 25_000
        r_end: np.ndarray | None = None
        rs: np.ndarray | None = None
        if per_rank:
            r_end = t + 25_000 + end_stall
            rs = r_start
            s_end = int(r_end.max())
        lead = np.where(perturb.host_bound, perturb.api_us + 8.0, perturb.lead_us)
        k_api_start = k_start - (
            lead[:, None] * 1000 * (1.0 + 0.05 * np.clip(rng.standard_normal((ranks, nk)), -3, 3))
        ).astype(np.int64)
        # host-bound ranks: the launch call ends just before the kernel starts (vertical flows)
        hb = perturb.host_bound
        if hb.any():
            k_api_start[hb] = k_start[hb] - k_api_dur[hb] - 8_000
        # a launch after a host stall longer than the lead lands just before its kernel
        for r, at in perturb.kernel_stalls.items():
            for j, stall_us in at.items():
                if stall_us > perturb.lead_us[r]:
                    k_api_start[r, j] = k_start[r, j] - k_api_dur[r, j] - 8_000
        for r, at in step_stalls.items():
            floor = int(rs[r]) if rs is not None else s_start
            for j in sorted(at):
                _launch_holds_host(r, j, k_start, k_api_start, k_api_dur, ops, floor)
        for r, gaps_at in host_gaps.items():
            for j in sorted(gaps_at):
                _launch_after_host_gap(r, j, k_start, k_api_start, k_api_dur, ops)
        if perturb.gc_host_gaps:
            # the host gaps are GC pauses: recorded as host GC intervals ending before the launch
            for r, gaps_at in host_gaps.items():
                floor = (int(rs[r]) if rs is not None else s_start) + 5_000
                for j in sorted(gaps_at):
                    gb = int(k_api_start[r, j]) - 2_000
                    ga = max(gb - int(gaps_at[j] * 1000), floor)
                    if gb > ga:
                        gc.append((r, ga, gb))
        # the host launches nothing while it collects garbage: launches the jitter put inside a
        # GC pause move to its end (each kernel still starts after its launch)
        for gr, ga, gb in gc:
            inside = (k_api_start[gr] > ga) & (k_api_start[gr] < gb)
            k_api_start[gr, inside] = gb + 1_000 * np.arange(1, int(inside.sum()) + 1)
        k_present: np.ndarray | None = None
        if si in perturb.lost_kernels:
            cut = np.asarray(perturb.lost_kernels[si], dtype=np.int64)
            k_present = np.arange(nk)[None, :] >= cut[:, None]
            first_kept = k_start[np.arange(ranks), np.minimum(cut, nk - 1)]
            for op in ops:
                op.present = op.start >= first_kept
        step_start = int(rs.min()) if rs is not None else s_start
        out_steps.append(
            StepRec(
                first_step + si,
                step_start,
                s_end,
                k_start,
                k_dur,
                k_api_start,
                k_api_dur,
                ops,
                rs,
                r_end,
                k_present,
                gc,
            )
        )
        s_start = s_end
        if r_end is not None:
            r_start = r_end
    return Cluster(ranks, program, kernels, kinds, out_steps, perturb, t0_ns, seed)
