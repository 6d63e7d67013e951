"""What the host's Python thread runs while a rank's device waits for it (with_stack frames).

A host stall (the device idles, Free, because the host issued nothing) is measured from the step
trace and the host's call record; *why* the host issued nothing is in the Python frames torch_npu
records with ``with_stack=True`` (``python_frames``: trace_view.json ``python_function`` events of
at least 1 ms). A frame that contains no host call (no launch, no synchronize, no copy) is time the
training thread spent in Python; the deepest such frame that still covers most of its caller names
the work (a tokenizer, an augmentation, a logger), its callers say where in the loop it runs.

:func:`python_work` finds that frame in the stalled (step, rank) pairs and measures the same frame
on the other pairs; :func:`frame_remedy` picks the fix from what the frame is.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from advisor_chat.ingest.profile import PEER_SAMPLE, Profile
from advisor_chat.ingest.trace import GC_CALL, PY_FRAME_MIN_US
from advisor_chat.ranks import spread_sample

#: Walking down from a call-free frame, a callee that covers at least this share of its caller's
#: time is the same work, named more precisely.
COVER_SHARE = 0.8


@dataclass(frozen=True)
class PythonWork:
    """The Python frame the host runs in the stalled (step, rank) pairs, with no host call inside.

    Attributes:
        frame: The deepest call-free frame that covers its callers' time (``'file.py(line):
            function'`` as torch_npu names it), the most frequent one over the pairs.
        callers: Its callers, outermost call-free frame first (same thread, containing it).
        us: Its duration per pair where it runs (median, µs).
        pairs: The stalled (step, rank) pairs in which it runs.
        of_pairs: Stalled pairs read (those whose rank has Python frames).
        other_pairs: Other (step, rank) pairs read (peers' and clean steps'), of a sample.
        other_hits: Of them, the pairs in which the frame runs for at least half of ``us``.
        also: Other operators computed on the host in the same pairs, counted in ``us`` with
            it (each at least :data:`HOST_OPS_PART` of the work asked for), largest first.
    """

    frame: str
    callers: tuple[str, ...]
    us: float
    pairs: tuple[tuple[int, int], ...]
    of_pairs: int
    other_pairs: int
    other_hits: int
    also: tuple[str, ...] = ()

    @property
    def function(self) -> str:
        """The frame's function with its file, without the line: ``tokenization_utils_base.__call__``."""
        return short_frame(self.frame)


def short_frame(frame: str) -> str:
    """``'a/b/tokenization_utils_base.py(2858): __call__'`` → ``'tokenization_utils_base.py: __call__'``."""
    b = re.match(r"^<built-in (?:function|method) (?P<fn>[\w.]+)", frame)
    if b is not None:  # "<built-in function fsync>": the C function's name
        return b["fn"]
    m = re.match(r"^(?P<file>.*?)\((?P<line>\d+)\):\s*(?P<fn>.*)$", frame)
    if m is None:
        return frame
    return f"{m['file'].rsplit('/', 1)[-1]}: {m['fn']}"


def _step_windows(hd: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, step): the host window ``[lo_us, hi_us)`` of the step.

    From the previous step's last call to this step's last call (a step's Python work runs before
    its first launch).
    """
    calls = hd[hd["step"] >= 0]
    if calls.empty:
        return pd.DataFrame(columns=["rank", "step", "lo_us", "hi_us"])
    end = calls["host_start_us"] + calls["api_duration_us"].fillna(0.0)
    g = calls.assign(end_us=end).groupby(["rank", "step"], sort=True)
    w = g.agg(first_us=("host_start_us", "min"), hi_us=("end_us", "max")).reset_index()
    w = w.sort_values(["rank", "first_us"], kind="stable")
    prev = w.groupby("rank")["hi_us"].shift(1)
    # the first step read: from a step's length before its first call
    w["lo_us"] = prev.fillna(w["first_us"] - (w["hi_us"] - w["first_us"]))
    return w[["rank", "step", "lo_us", "hi_us"]]


#: A framework operator on the host (trace_view.json ``cpu_op`` frames: ``aten::isin``).
HOST_OPERATOR = re.compile(r"^(?:aten|npu|torch_npu|c10d)::|^gloo:")
#: A collective run by the host (the gloo backend over TCP sockets), not by HCCL on the device.
HOST_COLLECTIVE = re.compile(r"^gloo:|^c10d::.*gloo", re.I)
#: Host calls that move data or wait, not launch work: a host operator that makes only these
#: (its input copied to the host, its result back) computes on the CPU.
_COPY_OR_WAIT = re.compile(r"memcpy|synchroni[sz]e", re.I)


#: Frames of a tensor dump for precision debugging (msprobe, PrecisionDebugger).
DUMP_FRAME = re.compile(r"msprobe|precision_?debugger|data_dump|dump_tensor", re.I)

#: Host operators that together make a pair's work each take at least this share of it.
HOST_OPS_PART = 0.2

#: A frame is call-free when its first host call comes after at least this share of it.
CALL_FREE_SHARE = 0.9


def _chains(
    frames: pd.DataFrame, calls: np.ndarray, launches: np.ndarray | None = None
) -> list[tuple[int, tuple[str, ...], float]]:
    """Call-free chains of one thread's frames.

    Returns ``(index of the outermost, names outer→inner, innermost duration µs)`` per chain;
    ``calls`` are the sorted host-call start times of the rank, ``launches`` those of its calls
    that launch work (not copies or synchronizes): a host operator (``aten::isin``) that makes
    only copies and synchronizes is call-free too (an operator computed on the CPU).
    """
    st = frames["start_us"].to_numpy("float64")
    full = frames["dur_us"].to_numpy("float64")
    en = st + full
    names = frames["frame"].astype(str).to_numpy()

    def none_in(t: np.ndarray) -> np.ndarray:
        return np.asarray(
            np.searchsorted(t, en, side="right") - np.searchsorted(t, st, side="left") == 0
        )

    # a frame whose first host call comes only at its very end (the next launch, recorded a
    # little inside it) is call-free for its time before that call
    nxt = np.searchsorted(calls, st, side="left")
    first = np.where(nxt < len(calls), calls[np.minimum(nxt, max(len(calls) - 1, 0))], np.inf)
    before = np.minimum(np.maximum(first - st, 0.0), full) if len(calls) else full
    free = none_in(calls) | (before >= CALL_FREE_SHARE * full)
    du = np.where(free, before, full)
    if launches is not None:
        is_op = np.array([bool(HOST_OPERATOR.match(n)) for n in names], dtype=bool)
        free |= is_op & none_in(launches)
    out: list[tuple[int, tuple[str, ...], float]] = []
    covered_until = -np.inf
    for i in (int(x) for x in np.flatnonzero(free)):  # start order, callers first (ingest sort)
        if st[i] < covered_until:
            continue  # inside a chain already taken
        chain, cur = [names[i]], i
        covered_until = en[i]
        while True:
            # the longest call-free callee of `cur` that covers most of it
            j = cur + 1
            best = -1
            while j < len(st) and st[j] < en[cur]:
                if (
                    free[j]
                    and en[j] <= en[cur]
                    and du[j] >= COVER_SHARE * du[cur]
                    and (best < 0 or du[j] > du[best])
                ):
                    best = j
                j += 1
            if best < 0:
                break
            chain.append(names[best])
            cur = best
        out.append((i, tuple(chain), float(du[cur])))
    return out


def python_work(
    profile: Profile,
    pairs: Sequence[tuple[int, int]],
    peers: Sequence[int] = (),
    min_us: float = 0.0,
) -> PythonWork | None:
    """The Python work in the stalled ``pairs`` ((step, rank)), from the host's with_stack frames.

    Per pair, the call-free frames that start in the rank's host window of that step (from the
    previous step's last host call to this step's last call), each walked down to its deepest
    callee that covers at least :data:`COVER_SHARE` of it; the chains are summed by their deepest
    frame (a function run again and again in the stall adds up), and the largest sum of the pair,
    if it lasts at least ``min_us``, is the pair's work. The frame found in most pairs is reported, with
    its median duration, and counted on the other pairs of the same ranks and of a sample of
    ``peers`` (at most ``PEER_SAMPLE``).

    Returns ``None`` when the ranks have no Python frames (no ``with_stack``; the DB export) or no
    pair has such work. Source: ``python_frames`` (trace_view.json ``python_function`` events) and
    ``host_dispatch`` (the host's calls: trace_view.json CANN API events).
    """
    hit_ranks = sorted({r for _s, r in pairs})
    others = [r for r in peers if r not in set(hit_ranks)]
    sample = hit_ranks + (spread_sample(sorted(others), PEER_SAMPLE) if others else [])
    fr = profile.python_frames_for(sample)
    if "calls" in fr.columns:  # the frames one by one (not the short ones summed per step)
        fr = fr[(fr["calls"] == 1) & (fr["dur_us"] >= PY_FRAME_MIN_US)]
    if fr.empty:
        return None
    hd = profile.host_dispatch_for(sample)
    if hd.empty or "api_duration_us" not in hd:
        return None
    hd = hd[hd["api_name"] != GC_CALL]  # a GC pause is Python's own time, not a host call
    win = _step_windows(hd)
    per_pair: dict[tuple[int, int], tuple[tuple[str, ...], float]] = {}
    summed: dict[tuple[int, int], dict[str, tuple[tuple[str, ...], float]]] = {}
    for r, g in fr.groupby("rank", sort=True):
        mine = hd[hd["rank"] == r]
        calls = np.sort(mine["host_start_us"].to_numpy("float64"))
        work = ~mine["api_name"].astype(str).str.contains(_COPY_OR_WAIT)
        launches = np.sort(mine.loc[work, "host_start_us"].to_numpy("float64"))
        w = win[win["rank"] == r]
        for _tid, t in g.groupby("tid", sort=False):
            t = t.reset_index(drop=True)
            starts = t["start_us"].to_numpy("float64")
            for i, chain, us in _chains(t, calls, launches):
                hit = w[(w["lo_us"] <= starts[i]) & (starts[i] < w["hi_us"])]
                if hit.empty:
                    continue
                key = (int(hit["step"].iloc[0]), int(cast(int, r)))
                # the same function run again in the pair adds up (a loop over parameters)
                got = summed.setdefault(key, {}).get(chain[-1])
                summed[key][chain[-1]] = (chain, us + (got[1] if got else 0.0))
    also: dict[tuple[int, int], tuple[str, ...]] = {}
    for key, by_frame in summed.items():
        chain, us = max(by_frame.values(), key=lambda v: v[1])
        if us < min_us and HOST_OPERATOR.match(chain[-1]):
            # several operators computed on the host one after another (aten::ones, then
            # aten::tril): together they are the pair's work
            ops = sorted(
                (
                    (u, f)
                    for f, (_c, u) in by_frame.items()
                    if HOST_OPERATOR.match(f) and u >= HOST_OPS_PART * min_us
                ),
                reverse=True,
            )
            if ops and ops[0][1] == chain[-1] and sum(u for u, _f in ops) >= min_us:
                us = sum(u for u, _f in ops)
                also[key] = tuple(f for _u, f in ops[1:])
        if us >= min_us:
            per_pair[key] = (chain, us)
    want = {(int(s), int(r)) for s, r in pairs}
    read = {(int(s), int(r)) for s, r in zip(win["step"], win["rank"], strict=True)}
    found = {p: v for p, v in per_pair.items() if p in want}
    if not found:
        return None
    frame, _n = Counter(chain[-1] for chain, _us in found.values()).most_common(1)[0]
    with_frame = {p: v for p, v in found.items() if v[0][-1] == frame}
    us = float(np.median([u for _c, u in with_frame.values()]))
    chain = max(with_frame.values(), key=lambda v: v[1])[0]
    other = read - want
    other_hits = sum(
        1
        for p in other
        if p in per_pair and per_pair[p][0][-1] == frame and per_pair[p][1] >= us / 2
    )
    extra = Counter(f for p in with_frame for f in also.get(p, ()))
    return PythonWork(
        frame=frame,
        callers=chain[:-1],
        us=us,
        also=tuple(f for f, n in extra.most_common() if 2 * n >= len(with_frame)),
        pairs=tuple(sorted(with_frame)),
        of_pairs=len(want & read),
        other_pairs=len(other),
        other_hits=other_hits,
    )


#: What a frame is, from its file and function (first match), and the fix it takes: (pattern,
#: kind). Kinds: ``tokenize``, ``data`` (a dataset / augmentation / collate), ``save``, ``log``.
FRAME_KINDS = (
    (re.compile(r"prepare_for_backward|find_unused", re.I), "ddp_unused"),
    (re.compile(r"tokeni[sz]|sentencepiece|tiktoken|\bencode\b", re.I), "tokenize"),
    (
        re.compile(
            r"__getitem__|collate|transforms?\b|augment|dataloader|dataset|PIL|cv2|decode|"
            r"get_batch|load_image|read_image",
            re.I,
        ),
        "data",
    ),
    (re.compile(r"torch/serialization|save|checkpoint|pickle", re.I), "save"),
    (re.compile(r"logging|log_|wandb|tensorboard|print|report_", re.I), "log"),
)


#: A copy between host and device as the deepest frame (``aten::copy_`` under ``aten::to``, a
#: tensor's ``.to()`` / ``.npu()``): the host waits in it, as it does for a copy from pageable
#: (not pinned) host memory.
COPY_FRAME = re.compile(r"aten::(?:copy_|_to_copy|to)\b|\.(?:to|npu|cuda)\(\)?$")


def frame_kind(work: PythonWork) -> str:
    """What the frame is: a kind of :data:`FRAME_KINDS`, ``host_collective`` or ``python``.

    Kinds: ``host_collective``, ``dump``, ``copy``, ``ddp_unused``, ``tokenize``, ``data``,
    ``save``, ``log``, ``python``. From the deepest frame (a gloo collective first), then its
    callers.
    """
    if HOST_COLLECTIVE.search(work.frame):
        return "host_collective"
    if any(DUMP_FRAME.search(x) for x in (work.frame, *work.callers)):
        return "dump"  # (its deepest frame is a save: the dump is what to turn off)
    if COPY_FRAME.search(work.frame):
        return "copy"
    for name in (work.frame, *reversed(work.callers)):
        for pat, kind in FRAME_KINDS:
            if pat.search(name):
                return kind
    return "python"


#: What the host does, by frame kind (:func:`frame_kind`): (English, Chinese).
FRAME_WHAT: dict[str, tuple[str, str]] = {
    "host_collective": (
        "a collective runs on the host over the gloo backend (each tensor copied "
        "device-to-host, then sent over TCP sockets), not as an HCCL collective on the device",
        "集合通信由主机经 gloo 后端执行（张量先从设备拷到主机，再经 TCP 套接字发送），没有走设备上的 HCCL",
    ),
    "copy": (
        "a copy between host and device blocks the host: a tensor moved with .to() from "
        "pageable (not pinned) host memory is copied synchronously, and nothing is launched "
        "meanwhile",
        "主机与设备之间的拷贝阻塞了主机：从可分页（非锁页）内存用 .to() 搬运的张量是同步拷贝的，"
        "期间不下发任何任务",
    ),
    "ddp_unused": (
        "DDP's find_unused_parameters=True walks the autograd graph after every forward",
        "DDP 的 find_unused_parameters=True 在每次前向之后遍历 autograd 计算图",
    ),
    "dump": (
        "a tensor dump for precision debugging (msprobe / PrecisionDebugger) copies tensors to "
        "the host and writes them to disk on the training thread",
        "用于精度调试的张量 dump（msprobe / PrecisionDebugger）在训练线程上把张量拷到主机并写盘",
    ),
    "tokenize": ("tokenization runs inline in the training loop", "分词在训练循环里内联执行"),
    "data": ("data preparation runs inline in the training loop", "数据准备在训练循环里内联执行"),
    "save": ("a save runs on the training thread", "保存在训练线程上执行"),
    "log": ("logging runs on the training thread", "日志在训练线程上执行"),
    "python": ("Python work runs on the training thread", "Python 计算在训练线程上执行"),
}


def frame_meaning(work: PythonWork) -> tuple[str, str]:
    """What a frame of a specific kind does, as a parenthesis (English, Chinese), or ``("", "")``.

    From :data:`FRAME_WHAT`, with its callers (``distributed.py: forward > _post_forward``);
    nothing for plain Python work.
    """
    kind = frame_kind(work)
    if kind == "python":
        return "", ""
    via = " > ".join(short_frame(c) for c in work.callers[-2:])
    en, zh = FRAME_WHAT[kind]
    return (
        f" ({en}" + (f"; called from {via})" if via else ")"),
        f"（{zh}" + (f"；由 {via} 调用）" if via else "）"),
    )


def frame_remedy(work: PythonWork, where: str, where_zh: str) -> tuple[str, str]:
    """The first change for Python work ``work`` done inline on ``where`` (English, Chinese)."""
    f = work.function
    kind = frame_kind(work)
    if kind == "host_collective":
        return (
            f"Run the collective `{f}` on {where} over HCCL: create that process group with the "
            "HCCL backend (torch.distributed.new_group(ranks, backend='hccl'), or leave the "
            "backend to the default) instead of gloo, which copies the tensors to the host and "
            "sends them over TCP sockets.",
            f"让{where_zh}上的集合通信 `{f}` 走 HCCL：创建该通信组时使用 HCCL 后端（`torch.distributed."
            "new_group(ranks, backend='hccl')`，或使用默认后端），而不是 gloo——gloo 会把张量拷到主机再经 "
            "TCP 套接字发送。",
        )
    if kind == "dump":
        return (
            f"Turn off the tensor dump on {where} (msprobe PrecisionDebugger / dump hooks, "
            f"`{f}` here): it copies tensors to the host and writes them to disk inside every "
            "step; dump only while debugging precision, for a few steps and the modules you need.",
            f"关闭{where_zh}上的张量 dump（msprobe PrecisionDebugger / dump 钩子，此处为 `{f}`）：它在每一步里"
            "都把张量拷到主机并写盘；只在调试精度时、针对少数几步和需要的模块开启。",
        )
    if kind == "copy":
        return (
            f"Make the copy on {where} (`{f}`) asynchronous or remove it: keep that host tensor "
            "in pinned memory (pin_memory=True; for DeepSpeed offload, offload_param / "
            "offload_optimizer pin_memory: true) and copy with non_blocking=True, or keep the "
            "tensor on the device (no offload) if its memory allows.",
            f"让{where_zh}上的拷贝（`{f}`）变成异步或去掉它：把该主机张量放在锁页内存中（pin_memory=True；"
            "DeepSpeed 卸载时设 offload_param / offload_optimizer 的 pin_memory: true），并用 "
            "non_blocking=True 拷贝；显存允许时也可以让张量留在设备上（不卸载）。",
        )
    if kind == "ddp_unused":
        return (
            f"Construct DistributedDataParallel with find_unused_parameters=False (the default) on "
            f"{where}: with it on, after every forward the host walks the autograd graph "
            f"(`{f}`) to find parameters that will get no gradient, while the device waits; if "
            "some parameters really are unused, freeze them (requires_grad=False) or pass "
            "static_graph=True.",
            f"在{where_zh}上构造 DistributedDataParallel 时设 find_unused_parameters=False（默认值）：开启时每次"
            f"前向之后主机都要遍历一遍 autograd 计算图（`{f}`）找出不会得到梯度的参数，设备在此期间干等；"
            "若确有不用的参数，把它们冻结（requires_grad=False）或设置 static_graph=True。",
        )
    if kind == "tokenize":
        return (
            f"Tokenize ahead of time instead of in the training loop (`{f}` runs inline on {where}): "
            "pre-tokenize the dataset offline (e.g. Megatron/MindSpeed preprocess_data into "
            "indexed .bin/.idx files), or tokenize inside DataLoader worker processes "
            "(num_workers > 0, prefetch_factor) so the training thread only receives token ids.",
            f"把分词移出训练循环（`{f}` 在{where_zh}上内联执行）：离线预先分词（例如用 Megatron/MindSpeed 的 "
            "preprocess_data 生成 .bin/.idx 索引数据），或在 DataLoader 的 worker 进程中分词（num_workers > 0、"
            "prefetch_factor），训练线程只接收 token id。",
        )
    if kind == "data":
        return (
            f"Move the data preparation that runs inline (`{f}` on {where}) into DataLoader worker "
            "processes (num_workers > 0, persistent_workers=True, prefetch_factor) or precompute "
            "it offline, so the training thread never waits for a sample.",
            f"把内联执行的数据准备（{where_zh}上的 `{f}`）放到 DataLoader 的 worker 进程中（num_workers > 0、"
            "persistent_workers=True、prefetch_factor），或离线预处理，让训练线程不再等待样本。",
        )
    if kind == "save":
        return (
            f"Take the save (`{f}` on {where}) off the training thread: copy the state to host "
            "memory and write it from a background process (asynchronous checkpointing), or save "
            "less often.",
            f"把保存（{where_zh}上的 `{f}`）移出训练线程：先把状态拷到主机内存，再由后台进程写盘（异步保存"
            "检查点），或降低保存频率。",
        )
    if kind == "log":
        return (
            f"Take the logging (`{f}` on {where}) off the training step: log less often, and send "
            "metrics from a background process.",
            f"把日志（{where_zh}上的 `{f}`）移出训练步：降低记录频率，并由后台进程上报指标。",
        )
    return (
        f"Take the Python work `{f}` out of the training step on {where} (it issues nothing to the "
        "device while it runs): precompute it, run it in a DataLoader worker or a background "
        "process, or make it cheaper.",
        f"把 Python 函数 `{f}` 移出{where_zh}的训练步（它运行时不向设备下发任何任务）：预先计算、放到 "
        "DataLoader worker 或后台进程中执行，或降低它的开销。",
    )


#: Frames of the framework itself (torch's module machinery, hook dispatch, the profiler): the
#: user code they call is what to name.
_FRAMEWORK_FRAME = re.compile(r"(?:^|/)(?:torch|torch_npu|site-packages)/|^<built-in|^\w+::")
#: At most this many frames are named for the host's per-launch Python work.
PER_LAUNCH_FRAMES = 3


@dataclass(frozen=True)
class LaunchFrame:
    """A Python function the host runs many times a step, summed (``python_frames`` ``calls`` > 1).

    Attributes:
        frame: ``'file.py(line): function'``.
        calls_per_step: Calls per (step, rank) (median).
        us_per_step: Its time per (step, rank) (median, µs, callees included).
        each_us: Time per call (µs).
    """

    frame: str
    calls_per_step: float
    us_per_step: float
    each_us: float


def per_launch_frames(profile: Profile, ranks: Sequence[int]) -> tuple[LaunchFrame, ...]:
    """The user functions the host runs over and over within each step, most time first.

    From ``python_frames`` rows that sum short frames (50 µs - 1 ms) per thread, frame and step
    (``calls`` > 1; trace_view.json with_stack), on a sample of ``ranks``: per frame, its calls
    and time per (step, rank), framework frames (torch's module machinery, ``aten::`` operators)
    left out. Empty without such rows.
    """
    sample = spread_sample(sorted(int(r) for r in ranks), PEER_SAMPLE)
    fr = profile.python_frames_for(sample)
    if fr.empty or "calls" not in fr.columns:
        return ()
    fr = fr[(fr["calls"] > 1) & ~fr["frame"].astype(str).str.contains(_FRAMEWORK_FRAME)]
    if fr.empty:
        return ()
    by = fr.groupby(["frame", "rank"]).agg(us=("dur_us", "median"), calls=("calls", "median"))
    per = by.groupby(level="frame").median().sort_values("us", ascending=False)
    return tuple(
        LaunchFrame(str(f), float(row.calls), float(row.us), float(row.us) / float(row.calls))
        for f, row in per.head(PER_LAUNCH_FRAMES).iterrows()
    )


#: A host frame is slower on some ranks when its median there is at least this many times its
#: median on the peers (the same frame: the same work).
SLOWER_FRAME_RATIO = 2.0
#: Host operators that move or build memory: slowed by the host's memory (page faults, huge page
#: compaction, NUMA), not by the work itself.
MEMORY_OPERATOR = re.compile(
    r"aten::(?:cat|stack|copy_|_to_copy|to|contiguous|clone|pin_memory|empty|zeros|ones|"
    r"index_select|index|pad|constant_pad_nd)\b"
)


@dataclass(frozen=True)
class SlowerFrame:
    """The same host frame taking much longer on some ranks than on their peers.

    Attributes:
        frame: The frame (``aten::cat``, ``file.py(12): f``), the one with the most time on the
            slow ranks among those the peers run too.
        us: Its median duration on the slow ranks (µs).
        us_min: Shortest there (µs).
        us_max: Longest there (µs).
        us_peer: Its median duration on the peers (µs).
        memory: The frame is a host operator that moves or builds memory (:data:`MEMORY_OPERATOR`).
    """

    frame: str
    us: float
    us_min: float
    us_max: float
    us_peer: float
    memory: bool

    @property
    def ratio(self) -> float:
        """Median on the slow ranks over the peers' median."""
        return self.us / self.us_peer if self.us_peer > 0 else float("nan")


def slower_frame(
    profile: Profile, ranks: Sequence[int], peers: Sequence[int]
) -> SlowerFrame | None:
    """The host frame that runs ``SLOWER_FRAME_RATIO`` times longer on ``ranks`` than on ``peers``.

    From ``python_frames`` (trace_view.json with_stack ``python_function`` / cpu_op events) of up
    to ``PEER_SAMPLE`` ranks of each side: per frame both sides run, the median duration per run;
    the frame with the most time on ``ranks`` whose median is at least ``SLOWER_FRAME_RATIO``
    times the peers'. ``None`` without frames on both sides or without such a frame.
    """
    rs, ps = spread_sample(list(ranks), PEER_SAMPLE), spread_sample(list(peers), PEER_SAMPLE)
    if not rs or not ps:
        return None
    fr = profile.python_frames_for([*rs, *ps])
    if fr.empty or not {"rank", "frame", "dur_us"} <= set(fr.columns):
        return None
    if "calls" in fr.columns:  # whole frames only (rows summing short frames are not one run)
        fr = fr[pd.to_numeric(fr["calls"], errors="coerce").fillna(1) <= 1]
    mine, theirs = fr[fr["rank"].isin(rs)], fr[fr["rank"].isin(ps)]
    if mine.empty or theirs.empty:
        return None
    common = set(mine["frame"]) & set(theirs["frame"])
    if not common:
        return None
    mine = mine[mine["frame"].isin(common)]
    total = mine.groupby("frame")["dur_us"].sum().sort_values(ascending=False)
    peer_med = theirs.groupby("frame")["dur_us"].median()
    for frame in total.index[:5]:
        d = mine.loc[mine["frame"] == frame, "dur_us"].astype(float)
        med, pm = float(d.median()), float(peer_med.get(frame, float("nan")))
        if not (pm > 0 and med >= SLOWER_FRAME_RATIO * pm):
            continue
        return SlowerFrame(
            frame=str(frame),
            us=med,
            us_min=float(d.min()),
            us_max=float(d.max()),
            us_peer=pm,
            memory=MEMORY_OPERATOR.match(str(frame)) is not None,
        )
    return None
