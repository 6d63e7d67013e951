"""Streaming reader of ``trace_view.json`` for host → device launch flows (``host_dispatch``).

The file is a Chrome trace: one JSON array of events on (usually) one line, often hundreds of MB.
It is never loaded whole. The fast path reads fixed-size chunks, cuts each chunk at the last
top-level event boundary (``}, {``) and parses the complete events with orjson; if a cut does not
parse (a boundary inside an ``args`` list) the reader falls back to ijson (yajl2_c backend when
available) on the whole file. Memory grows with the number of *kept* events (CANN API and device
events that carry a flow), not with the file size.

Facts extracted (reference §1.11):

- ``HostToDevice`` flows: ``s`` on the CANN API event (same pid/tid/ts), ``f`` on the device task
  (same pid/tid/ts); matched by ``id`` (a string).
- ``ProfilerStep#N`` ``cpu_op`` events give host step ranges; a launch belongs to step N when its
  host timestamp falls in that range, else -1.

Output columns: ``api_name, host_start_us, device_start_us, launch_delay_us, kernel_name,
device_duration_us, api_duration_us, step`` (µs; launch_delay_us = device_start_us −
host_start_us). Host calls that block without launching a device task (:data:`BLOCKING_CALL`:
``AscendCL@aclrtSynchronizeStream`` and the like, ``AscendCL@aclrtMemcpy``) are rows too, with the
device columns empty (NaN).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

CHUNK_BYTES = 8 << 20
#: A single trace event larger than this is refused (a bound on time and memory per event).
MAX_EVENT_BYTES = 256 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_STEP = re.compile(r"ProfilerStep#(\d+)")


_SEP = b"}, {"


_FW_STEP = b'"ph": "X", "name": "ProfilerStep#'
#: Python GC pauses torch_npu records with ``experimental_config`` ``gc_detect_threshold``: complete
#: events named ``GC`` (category ``GC``) on the ``Python GC`` process (reference §1.11).
_FW_GC = b'"ph": "X", "name": "GC"'
#: The ``api_name`` of a recorded GC pause in ``host_dispatch`` (a host row without device columns).
GC_CALL = "GC"
_FW_FLOW = (b'"ph": "s"', b'"ph": "f"')


def _keep(piece: bytes) -> bool:
    """Prefilter on raw bytes: flows, ProfilerStep events and CANN-side complete events.

    Fast path for torch_npu's key orders (framework events start with ``"ph"``, CANN-side events
    start with ``"name"`` and end with ``"ph"``); anything else goes through substring tests.
    """
    if piece.startswith(b'"ph": '):
        if piece.startswith((_FW_STEP, _FW_GC)):
            return True
        return piece.startswith(_FW_FLOW) and b"HostToDevice" in piece
    if piece.startswith(b'"name": '):
        if piece.endswith(b'"ph": "X"'):
            return True
        if piece.endswith((b'"ph": "C"', b'"ph": "M"')):
            return False
        if piece.startswith(b'"name": "HostToDevice'):
            return True
    if b'"cat"' not in piece:
        return b'"X"' in piece
    return b"HostToDevice" in piece or b"ProfilerStep#" in piece or b'"cat": "GC"' in piece


def _parse_filtered(body: bytes) -> list[Any]:
    """Parse ``{...}, {...}`` (a run of whole events) keeping only the events :func:`_keep` wants.

    The split on ``}, {`` (json.dumps default separators) can also cut inside an event whose args
    hold a list of dicts; then the joined text does not parse and the whole run is parsed as is.
    """
    pieces = body.split(_SEP)
    if len(pieces) < 2:
        return orjson.loads(b"[" + body + b"]")
    pieces[0] = pieces[0][1:] if pieces[0].startswith(b"{") else pieces[0]
    if pieces[-1].endswith(b"}"):
        pieces[-1] = pieces[-1][:-1]
    keep = [p for p in pieces if _keep(p)]
    if not keep:
        return []
    try:
        return orjson.loads(b"[{" + _SEP.join(keep) + b"}]")
    except orjson.JSONDecodeError:
        return orjson.loads(b"[" + body + b"]")


class TraceInvalid(Exception):
    """trace_view.json is truncated or not valid JSON."""


@dataclass
class _State:
    # flow id -> (pid, tid, ts) of the s / f end
    starts: dict[str, tuple[Any, Any, str]] = field(default_factory=dict)
    finishes: dict[str, tuple[Any, Any, str]] = field(default_factory=dict)
    # complete events without a "cat" (CANN side), as compact per-batch columns:
    # (pid, tid) code, start, end (µs, float64) and name id (an index into ``names``; names repeat a lot)
    x_batches: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = field(
        default_factory=list
    )
    key_codes: dict[tuple[Any, Any], int] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    name_ids: dict[str, int] = field(default_factory=dict)
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    gc: list[tuple[float, float]] = field(default_factory=list)  # GC pauses: (start, dur) µs
    events: int = 0
    _index: dict[tuple[Any, Any], tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

    def _build_index(self) -> dict[tuple[Any, Any], tuple[np.ndarray, np.ndarray, np.ndarray]]:
        index: dict[tuple[Any, Any], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        if self.x_batches:
            code, s0, s1, nm = (np.concatenate(c) for c in zip(*self.x_batches, strict=True))
            self.x_batches = []
            by_code = np.argsort(code, kind="stable")  # keeps file order within a thread
            bounds = np.searchsorted(code[by_code], np.arange(len(self.key_codes) + 1))
            for key, c in self.key_codes.items():
                sel = by_code[bounds[c] : bounds[c + 1]]
                a, b = s0[sel], s1[sel]
                order = np.lexsort((-b, a))  # by start, longest first for equal starts
                index[key] = (a[order], b[order], nm[sel][order])
        self._index = index
        return index

    def lookup(self, pid: Any, tid: Any, ts: float) -> tuple[str, float] | None:
        """Innermost complete event on (pid, tid) that contains ``ts`` → (name, dur)."""
        index = self._index if self._index is not None else self._build_index()
        found = index.get((pid, tid))
        if found is None:
            return None
        s0, s1, nm = found
        i = int(np.searchsorted(s0, ts, side="right")) - 1
        for j in range(i, max(i - 64, -1), -1):
            if s1[j] >= ts:
                return self.names[int(nm[j])], float(s1[j] - s0[j])
        return None

    def feed(self, events: list[Any]) -> None:
        """Collect the facts of a batch of parsed events (list comprehensions, columnar storage)."""
        self.events += len(events)
        evs = [e for e in events if isinstance(e, dict)]
        phs = [e.get("ph") for e in evs]
        xs = [e for e, ph in zip(evs, phs, strict=True) if ph == "X"]
        cats = [e.get("cat") for e in xs]
        cann = [e for e, cat in zip(xs, cats, strict=True) if cat is None]
        if cann:
            codes, ids = self.key_codes, self.name_ids
            n0 = len(ids)
            code = np.fromiter(
                (codes.setdefault((e.get("pid"), e.get("tid")), len(codes)) for e in cann),
                dtype="int64",
                count=len(cann),
            )
            nid = np.fromiter(
                (ids.setdefault(e.get("name", ""), len(ids)) for e in cann),
                dtype="int64",
                count=len(cann),
            )
            if len(ids) > n0:
                self.names.extend(list(ids)[n0:])
            ts = np.array([e.get("ts", 0) for e in cann], dtype="float64")
            dur = np.array([e.get("dur", 0.0) or 0.0 for e in cann], dtype="float64")
            self.x_batches.append((code, ts, ts + dur, nid))
            self._index = None
        for e in [e for e, cat in zip(xs, cats, strict=True) if cat == "cpu_op"]:
            name = e.get("name", "")
            if isinstance(name, str) and name.startswith("ProfilerStep#"):
                m = _STEP.match(name)
                if m:
                    t0 = float(e.get("ts", 0))
                    self.steps.append((int(m.group(1)), t0, t0 + float(e.get("dur", 0))))
        for e in [e for e, cat in zip(xs, cats, strict=True) if cat == "GC"]:
            self.gc.append((float(e.get("ts", 0)), float(e.get("dur", 0.0) or 0.0)))
        starts, finishes = self.starts, self.finishes
        for e, ph in [(e, ph) for e, ph in zip(evs, phs, strict=True) if ph == "s" or ph == "f"]:
            if e.get("cat") == "HostToDevice":
                key3 = (e.get("pid"), e.get("tid"), str(e.get("ts")))
                (starts if ph == "s" else finishes)[str(e.get("id"))] = key3


def _last_cuts(buf: bytes) -> list[int]:
    """Start offsets of the last (up to 4) ``}, {`` boundaries within the last MB of ``buf``."""
    for window in (1 << 16, 1 << 20):
        cuts = [m.start() for m in _BOUNDARY.finditer(buf, max(0, len(buf) - window))]
        if len(cuts) >= 4 or window >= len(buf):
            return cuts[-4:]
    return cuts[-4:]


def _iter_orjson(path: Path, state: _State, chunk_bytes: int) -> None:
    with path.open("rb") as fh:
        head = fh.read(1 << 16)
        stripped = head.lstrip()
        if not stripped.startswith(b"["):
            raise ValueError("not a bare JSON array")
        buf = stripped[1:]
        eof = False
        while not eof:
            more = fh.read(chunk_bytes)
            eof = not more
            buf += more
            if eof:
                tail = buf.rstrip()
                if not tail.endswith(b"]"):
                    raise TraceInvalid("file ends before the closing ']'")
                body = tail[:-1].strip()
                if body.endswith(b","):
                    body = body[:-1]
                if body:
                    try:
                        state.feed(_parse_filtered(body))
                    except orjson.JSONDecodeError as exc:
                        raise TraceInvalid(str(exc)) from exc
                return
            # cut at the last top-level boundary that parses
            cut_found = False
            cuts = _last_cuts(buf)
            for pos in reversed(cuts[-4:]):
                piece = buf[: pos + 1]
                try:
                    events = _parse_filtered(piece)
                except orjson.JSONDecodeError:
                    continue
                state.feed(events)
                nxt = buf.index(b"{", pos + 1)
                buf = buf[nxt:]
                cut_found = True
                break
            if not cut_found and len(buf) > MAX_EVENT_BYTES:
                # one event (or a run without boundaries) this long is not a trace event: refuse
                # it rather than spend minutes on it (ijson took 23-120 s on 70-150 MB)
                raise TraceInvalid(
                    f"no event boundary within {MAX_EVENT_BYTES >> 20} MB (one event that large "
                    "is not a profiler event)"
                )


def _iter_ijson(path: Path, state: _State) -> None:
    import ijson

    with path.open("rb") as fh:
        first = fh.read(4096).lstrip()[:1]
    prefix = "item" if first == b"[" else "traceEvents.item"
    batch: list[Any] = []
    try:
        with path.open("rb") as fh:
            for ev in ijson.items(fh, prefix, use_float=True):
                batch.append(ev)
                if len(batch) >= 10000:
                    state.feed(batch)
                    batch = []
    except (ijson.JSONError, ijson.IncompleteJSONError) as exc:
        raise TraceInvalid(str(exc)) from exc
    state.feed(batch)


def scan_trace(path: Path, *, chunk_bytes: int = CHUNK_BYTES) -> _State:
    """Stream ``path`` once and collect flows, CANN-side complete events and step ranges.

    Raises:
        TraceInvalid: The file is truncated or not valid JSON.
        PermissionError: The file cannot be read.
    """
    from advisor_chat.ingest.guard import check_file

    check_file(path)  # FIFO / device / symlink loop / size cap → InputError (issue 14)
    state = _State()
    try:
        _iter_orjson(path, state, chunk_bytes)
    except ValueError:
        state = _State()
        try:
            _iter_ijson(path, state)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # "ts": "abc" etc.
            raise TraceInvalid(f"an event has a value of the wrong type ({str(exc)[:80]})") from exc
    if state.events == 0:
        raise TraceInvalid("it holds no trace events (expected a JSON array of events)")
    return state


def read_host_dispatch(
    path: Path, rank: int | None, *, chunk_bytes: int = CHUNK_BYTES
) -> pd.DataFrame:
    """``trace_view.json`` → ``host_dispatch`` rows (one per HostToDevice flow with both ends).

    Raises:
        TraceInvalid: The file is truncated or not valid JSON (the caller warns and falls back).
    """
    return host_dispatch_frame(scan_trace(path, chunk_bytes=chunk_bytes), rank)


def _match_events(
    st: _State, pids: list[Any], tids: list[Any], ts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized :meth:`_State.lookup`: name id (-1 = none) and duration of the innermost event."""
    index = st._index if st._index is not None else st._build_index()
    name_id = np.full(len(ts), -1, dtype="int64")
    dur = np.full(len(ts), np.nan)
    by_key: dict[tuple[Any, Any], list[int]] = {}
    for i, key in enumerate(zip(pids, tids, strict=True)):
        by_key.setdefault(key, []).append(i)
    for key, rows in by_key.items():
        found = index.get(key)
        if found is None:
            continue
        s0, s1, nm = found
        idx = np.asarray(rows, dtype="int64")
        q = ts[idx]
        j = np.searchsorted(s0, q, side="right") - 1
        jc = np.clip(j, 0, None)
        hit = (j >= 0) & (s1[jc] >= q)
        name_id[idx[hit]] = nm[jc[hit]]
        dur[idx[hit]] = s1[jc[hit]] - s0[jc[hit]]
        for k in np.flatnonzero(~hit & (j > 0)):  # rare: an enclosing event that started earlier
            got = st.lookup(key[0], key[1], float(q[k]))
            if got is not None:
                name_id[idx[k]] = st.name_ids[got[0]]
                dur[idx[k]] = got[1]
    return name_id, dur


#: Host calls that block the host until the device (or a copy) is done and launch no task of
#: their own: stream / device / event synchronizes (``tensor.item()``, ``.cpu()``) and blocking
#: copies (``aclrtMemcpy``: ``.to(device)`` of pageable memory). ``aclrtMemcpyAsync`` launches a
#: task (a HostToDevice flow) and is a launch.
BLOCKING_CALL = re.compile(r"Synchronize|aclrtMemcpy(?:2d)?$")
#: Device and pinned host memory allocations and frees (``aclrtMalloc``, ``aclrtMallocHost``: the
#: caching allocator's misses, a pinned buffer made anew): host calls with no task either.
MEMORY_CALL = re.compile(r"aclrt(?:Malloc|Free)(?:Host)?$")
#: Every host call kept in ``host_dispatch`` besides the launches.
HOST_CALL = re.compile(f"{BLOCKING_CALL.pattern}|{MEMORY_CALL.pattern}")


def _sync_calls(st: _State) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Host-side calls that launch nothing (CANN complete events :data:`HOST_CALL` names).

    Returns start (µs), duration (µs) and name id arrays, in file order per thread.
    """
    ids = [i for i, n in enumerate(st.names) if HOST_CALL.search(n)]
    empty = (np.empty(0), np.empty(0), np.empty(0, dtype="int64"))
    if not ids:
        return empty
    index = st._index if st._index is not None else st._build_index()
    want = np.asarray(ids, dtype="int64")
    parts = []
    for s0, s1, nm in index.values():
        m = np.isin(nm, want)
        if m.any():
            parts.append((s0[m], s1[m] - s0[m], nm[m]))
    if not parts:
        return empty
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]).astype("int64"),
    )


def host_dispatch_frame(st: _State, rank: int | None) -> pd.DataFrame:
    """Match the flows collected by :func:`scan_trace` into ``host_dispatch`` rows (columns as above).

    Rows are sorted by ``host_start_us`` (stable); ``step`` is the first ``ProfilerStep#N`` (by start)
    whose host range holds the launch, else -1.
    """
    s_pid: list[Any] = []
    s_tid: list[Any] = []
    f_pid: list[Any] = []
    f_tid: list[Any] = []
    host_l: list[float] = []
    dev_l: list[float] = []
    finishes = st.finishes
    for fid, skey in st.starts.items():
        fkey = finishes.get(fid)
        if fkey is None:
            continue
        s_pid.append(skey[0])
        s_tid.append(skey[1])
        host_l.append(float(skey[2]))
        f_pid.append(fkey[0])
        f_tid.append(fkey[1])
        dev_l.append(float(fkey[2]))
    if not host_l:
        return pd.DataFrame()
    host = np.asarray(host_l, dtype="float64")
    dev = np.asarray(dev_l, dtype="float64")
    api_id, api_dur = _match_events(st, s_pid, s_tid, host)
    dev_id, dev_dur = _match_events(st, f_pid, f_tid, dev)
    # host calls that launch nothing but block the host until the device catches up
    # (aclrtSynchronizeStream / Device / Event: tensor.item(), .cpu(), an explicit synchronize)
    sy_host, sy_dur, sy_name = _sync_calls(st)
    if len(sy_host) and len(host):
        # a call that starts a HostToDevice flow is a launch (already a row)
        launch = ~np.isin(sy_host, host)
        sy_host, sy_dur, sy_name = sy_host[launch], sy_dur[launch], sy_name[launch]
    # recorded Python GC pauses: host rows of their own, like the blocking calls
    gc = np.asarray(st.gc, dtype="float64").reshape(-1, 2)
    gc_id = len(st.names)  # names[gc_id] is GC_CALL below
    sy_host = np.concatenate([sy_host, gc[:, 0]])
    sy_dur = np.concatenate([sy_dur, gc[:, 1]])
    sy_name = np.concatenate([sy_name, np.full(len(gc), gc_id, dtype="int64")])
    n_sync = len(sy_host)
    host_all = np.concatenate([host, sy_host])
    step = np.full(len(host_all), -1, dtype="int64")
    for sid, s0, s1 in sorted(st.steps, key=lambda s: s[1]):
        step[(step == -1) & (host_all >= s0) & (host_all <= s1)] = sid
    names = np.asarray([*st.names, GC_CALL, ""], dtype=object)  # index -1 → ""
    nan = np.full(n_sync, np.nan)
    df = pd.DataFrame(
        {
            "rank": [rank] * len(host_all),
            "step": step,
            "api_name": np.concatenate([names[api_id], names[sy_name]]),
            "host_start_us": host_all,
            "device_start_us": np.concatenate([dev, nan]),
            "launch_delay_us": np.concatenate([dev - host, nan]),
            "kernel_name": np.concatenate([names[dev_id], np.full(n_sync, "", dtype=object)]),
            "device_duration_us": np.concatenate([dev_dur, nan]),
            "api_duration_us": np.concatenate([api_dur, sy_dur]),
        }
    )
    order = np.argsort(host_all, kind="stable")
    return df.iloc[order].reset_index(drop=True)


#: One ``AI Core Freq`` counter event as torch_npu writes it (name first, args last but "ph").
_FREQ_EVENT = re.compile(rb'\{"name":\s*"AI Core Freq"[^{}]*\{[^{}]*\}[^{}]*\}')
_FREQ_NAME = b'"AI Core Freq"'
#: The counter's process metadata (``process_name`` args): the name, but not a sample.
_FREQ_META = b'{"name": "AI Core Freq"}'


def read_aicore_freq(path: Path, rank: int | None) -> pd.DataFrame:
    """``trace_view.json`` → ``aicore_freq`` rows: the ``AI Core Freq`` counter track.

    The counter events (``ph`` ``C``, args ``{"MHz": 1800}``) are found by a byte search over a
    memory map of the file, each parsed on its own; the rest of the trace is not parsed. When the
    search misses events (another key order), the file is streamed with ijson instead. ``ts`` is a
    string of epoch µs (3 decimals); a sample holds until the next one.

    Returns:
        Columns ``rank, start_us, freq_mhz`` in time order (empty: no counter track).

    Raises:
        TraceInvalid: The events could not be read (truncated or invalid JSON).
    """
    events = _search_events(
        path,
        _FREQ_EVENT,
        # occurrences of the name beyond the process metadata's {"name": "AI Core Freq"}
        lambda mm: _count(mm, _FREQ_NAME) - _count(mm, _FREQ_META),
        lambda ev: ev.get("name") == "AI Core Freq",
    )
    rows = []
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph", "C") != "C":
            continue
        args = ev.get("args") or {}
        try:
            rows.append((float(str(ev.get("ts")).strip()), float(args["MHz"])))
        except (TypeError, ValueError, KeyError):
            continue
    return _freq_frame(rows, rank)


def _count(mm: Any, needle: bytes) -> int:
    n, i = 0, mm.find(needle)
    while i >= 0:
        n += 1
        i = mm.find(needle, i + len(needle))
    return n


def _search_events(
    path: Path,
    pattern: re.Pattern[bytes],
    named: Callable[[Any], int],
    keep: Callable[[dict[str, Any]], bool],
) -> list[Any]:
    """The events ``pattern`` finds by a byte search over a memory map of ``path``.

    Each is parsed on its own (the rest of the trace is not parsed). ``named(mm)`` counts the events there should be; when the search finds fewer (another key
    order), the whole file is streamed with ijson and the events ``keep`` accepts are returned.

    Raises:
        TraceInvalid: The file could not be streamed (truncated or invalid JSON) on the ijson path.
    """
    import mmap

    with open(path, "rb") as fh:
        try:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            return []
        with mm:
            n = named(mm)
            events = []
            for m in pattern.finditer(mm) if n > 0 else ():
                try:
                    events.append(orjson.loads(m.group(0)))
                except orjson.JSONDecodeError:
                    continue
    if len(events) >= n:
        return events
    import ijson

    try:
        with open(path, "rb") as fh:
            prefix = "item" if fh.read(64).lstrip()[:1] == b"[" else "traceEvents.item"
            fh.seek(0)
            return [
                ev
                for ev in ijson.items(fh, prefix, use_float=True)
                if isinstance(ev, dict) and keep(ev)
            ]
    except ijson.JSONError as exc:
        raise TraceInvalid(str(exc)) from exc


def _freq_frame(rows: list[tuple[float, float]], rank: int | None) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["start_us", "freq_mhz"], dtype="float64")
    df = df.sort_values("start_us", kind="stable").reset_index(drop=True)
    df.insert(0, "rank", pd.Series([rank] * len(df), dtype="Int64"))
    return df


#: Python frames shorter than this are not kept (µs): a host stall worth naming lasts longer, and
#: a with_stack trace holds hundreds of thousands of short frames per step.
PY_FRAME_MIN_US = 1000.0
#: Shorter frames down to this (µs) are kept summed per thread, frame and step (``calls``): a
#: function run before every operator launch (a module hook) adds up to the host's time.
PY_SHORT_MIN_US = 50.0
_PY_CATS = (b'"cat": "python_function"', b'"cat": "cpu_op"')
#: Event categories read as frames: Python calls, and the framework's operators on the host
#: (``aten::isin``, ``gloo:all_reduce``): an operator that runs long with no launch inside it
#: computes on the host CPU.
FRAME_CATEGORIES = ("python_function", "cpu_op")
#: One ``python_function`` / ``cpu_op`` event as torch_npu writes it (``ph`` first, ``args``
#: last): name, tid, ts (a string, maybe with trailing whitespace), dur.
_PY_EVENT = re.compile(
    rb'\{"ph":\s*"X",\s*"name":\s*"((?:[^"\\]|\\.)*)",\s*"pid":\s*-?\d+,\s*"tid":\s*(-?\d+),'
    rb'\s*"ts":\s*"?([0-9.eE+-]+)\s*"?,\s*"dur":\s*([0-9.eE+-]+),\s*"cat":\s*"(?:python_function|cpu_op)"'
)


def read_python_frames(path: Path, rank: int | None) -> pd.DataFrame:
    """``trace_view.json`` → ``python_frames`` rows: the host's Python frames of at least 1 ms.

    torch_npu writes one complete event (category ``python_function``, name ``file.py(line):
    function``) per Python call when the profiler runs with ``with_stack=True`` (reference §1.11,
    process ``Python``), and one per framework operator on the host (category ``cpu_op``, name
    ``aten::isin``) with CPU activity; both are frames here (the ``ProfilerStep#N`` step markers
    are not). The events are found by a byte search over a memory map of the file and
    read from their text; when the search misses events (another key order), the file is streamed
    with ijson instead. Frames shorter than :data:`PY_FRAME_MIN_US` are summed per thread, frame
    and step (down to :data:`PY_SHORT_MIN_US`; shorter ones are dropped). A frame's callers are the
    frames of the same thread that contain it (``calls`` 1 rows only).

    Returns:
        Columns ``rank, tid, start_us, dur_us, frame, calls`` in time order (empty: no frame,
        e.g. a capture without ``with_stack``).

    Raises:
        TraceInvalid: The file could not be streamed (truncated or invalid JSON) on the ijson path.
    """
    import mmap

    rows: list[tuple[int, float, float, str]] = []
    steps: list[tuple[float, float]] = []
    with open(path, "rb") as fh:
        try:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            return _py_frame(rows, rank)
        with mm:
            n = sum(_count(mm, cat) for cat in _PY_CATS)
            found = 0
            for m in _PY_EVENT.finditer(mm) if n else ():
                found += 1
                try:
                    dur = float(m.group(4))
                    if dur < PY_SHORT_MIN_US:
                        continue
                    raw = m.group(1)
                    if raw.startswith(b"ProfilerStep#"):
                        # a step marker, not work: the window short frames are counted in
                        steps.append((float(m.group(3)), dur))
                        continue
                    name = orjson.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode()
                    rows.append((int(m.group(2)), float(m.group(3)), dur, name))
                except (ValueError, orjson.JSONDecodeError, UnicodeDecodeError):
                    continue
    if found < n:  # events in another key order: stream the whole file
        rows, steps = _py_frames_ijson(path)
    return _py_frame(rows, rank, steps)


def _py_frames_ijson(
    path: Path,
) -> tuple[list[tuple[int, float, float, str]], list[tuple[float, float]]]:
    import ijson

    rows = []
    steps = []
    try:
        with open(path, "rb") as fh:
            prefix = "item" if fh.read(64).lstrip()[:1] == b"[" else "traceEvents.item"
            fh.seek(0)
            for ev in ijson.items(fh, prefix, use_float=True):
                if not isinstance(ev, dict) or ev.get("cat") not in FRAME_CATEGORIES:
                    continue
                try:
                    dur = float(ev["dur"])
                    if ev.get("ph", "X") != "X" or dur < PY_SHORT_MIN_US:
                        continue
                    start = float(str(ev["ts"]).strip())
                    if str(ev.get("name", "")).startswith("ProfilerStep#"):
                        steps.append((start, dur))
                    else:
                        rows.append((int(ev["tid"]), start, dur, str(ev["name"])))
                except (TypeError, ValueError, KeyError):
                    continue
    except ijson.JSONError as exc:
        raise TraceInvalid(str(exc)) from exc
    return rows, steps


def _py_frame(
    rows: list[tuple[int, float, float, str]],
    rank: int | None,
    steps: list[tuple[float, float]] | None = None,
) -> pd.DataFrame:
    """The ``python_frames`` rows of one rank.

    Frames of ≥ :data:`PY_FRAME_MIN_US` one by one (``calls`` 1); shorter ones (≥
    :data:`PY_SHORT_MIN_US`) summed per (thread, frame, ``ProfilerStep#`` window from ``steps``,
    (start, duration) µs): ``start_us`` the first call's, ``dur_us`` their total, ``calls`` their
    count.
    """
    df = pd.DataFrame(rows, columns=["tid", "start_us", "dur_us", "frame"])
    df = df.astype({"tid": "int64", "start_us": "float64", "dur_us": "float64", "frame": object})
    short = df["dur_us"] < PY_FRAME_MIN_US
    if short.any():
        s = df[short]
        win = sorted(steps or [])
        starts = np.asarray([a for a, _ in win], dtype="float64")
        ends = np.asarray([a + d for a, d in win], dtype="float64")
        idx = np.searchsorted(starts, s["start_us"].to_numpy(), side="right") - 1
        inside = (idx >= 0) & (s["start_us"].to_numpy() <= ends[np.clip(idx, 0, None)])
        key = np.where(inside, idx, -1) if len(win) else np.full(len(s), -1)
        agg = (
            s.assign(_w=key)
            .groupby(["tid", "frame", "_w"], sort=False)
            .agg(start_us=("start_us", "min"), dur_us=("dur_us", "sum"), calls=("dur_us", "size"))
            .reset_index()
            .drop(columns="_w")
        )
        df = pd.concat([df[~short].assign(calls=1), agg], ignore_index=True)
    else:
        df = df.assign(calls=1)
    df = df.astype({"calls": "int64"})
    # outer frames first at one start time: a caller before its callees
    df = df.sort_values(["start_us", "dur_us"], ascending=[True, False], kind="stable")
    df = df.reset_index(drop=True)
    df.insert(0, "rank", pd.Series([rank] * len(df), dtype="Int64"))
    return df


#: One HCCL operator event as the CANN side writes it: name first, one level of args, "ph" last.
_HCOM_EVENT = re.compile(rb'\{"name":\s*"hcom_[^"{}]*"[^{}]*\{[^{}]*\}[^{}]*\}')
_HCOM_NAME = b'"name": "hcom_'
#: Bytes per element of the HCCL data types (ENUM_HCCL_DATA_TYPE, reference §1.15).
HCCL_DTYPE_BYTES = {
    "INT8": 1, "UINT8": 1, "INT16": 2, "UINT16": 2, "FP16": 2, "BFP16": 2, "BF16": 2,
    "INT32": 4, "UINT32": 4, "FP32": 4, "INT64": 8, "UINT64": 8, "FP64": 8, "INT128": 16,
}  # fmt: skip


def read_hccl_ops(path: Path, rank: int | None) -> pd.DataFrame:
    """``trace_view.json`` → ``hccl_ops`` rows: each HCCL operator with its data type and count.

    The CANN side writes one complete event per HCCL operator launch, named like
    ``hcom_allReduce__009_0_1`` with ``args`` ``{"data_type": "FP32", "alg_type": "MESH-RING",
    "count": 4097000, ...}`` (reference §1.11); the events are found by a byte search over a
    memory map of the file, each parsed on its own (the rest of the trace is not parsed). When the
    search misses events (another key order), the file is streamed with ijson instead. Events
    without a ``count`` (older CANN) are skipped.

    Returns:
        Columns ``rank, op_name, start_us, dur_us, data_type, count, alg_type, size_mb`` in time
        order (empty: no HCCL operator event).

    Raises:
        TraceInvalid: The file could not be streamed (truncated or invalid JSON) on the ijson path.
    """
    events = _search_events(
        path,
        _HCOM_EVENT,
        lambda mm: _count(mm, _HCOM_NAME),
        lambda ev: str(ev.get("name", "")).startswith("hcom_"),
    )
    rows = []
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph", "X") != "X":
            continue
        args = ev.get("args") or {}
        try:
            count = float(args["count"])
            dtype = str(args.get("data_type", "")).strip().upper()
            rows.append(
                (
                    str(ev.get("name", "")),
                    float(str(ev.get("ts")).strip()),
                    float(ev.get("dur") or 0.0),
                    dtype,
                    count,
                    str(args.get("alg_type", "") or ""),
                )
            )
        except (TypeError, ValueError, KeyError, AttributeError):
            continue
    return _hccl_frame(rows, rank)


def _hccl_frame(
    rows: list[tuple[str, float, float, str, float, str]], rank: int | None
) -> pd.DataFrame:
    df = pd.DataFrame(
        rows, columns=["op_name", "start_us", "dur_us", "data_type", "count", "alg_type"]
    )
    df = df.astype({"start_us": "float64", "dur_us": "float64", "count": "float64"})
    nbytes = df["data_type"].map(HCCL_DTYPE_BYTES).astype("float64")
    df["size_mb"] = df["count"] * nbytes / 1e6
    df = df.sort_values("start_us", kind="stable").reset_index(drop=True)
    df.insert(0, "rank", pd.Series([rank] * len(df), dtype="Int64"))
    return df
