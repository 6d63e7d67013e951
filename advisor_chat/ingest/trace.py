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
device_duration_us, step`` (µs; launch_delay_us = device_start_us − host_start_us).
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

CHUNK_BYTES = 8 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_STEP = re.compile(r"ProfilerStep#(\d+)")


_SEP = b"}, {"


_FW_STEP = b'"ph": "X", "name": "ProfilerStep#'
_FW_FLOW = (b'"ph": "s"', b'"ph": "f"')


def _keep(piece: bytes) -> bool:
    """Prefilter on raw bytes: flows, ProfilerStep events and CANN-side complete events.

    Fast path for torch_npu's key orders (framework events start with ``"ph"``, CANN-side events
    start with ``"name"`` and end with ``"ph"``); anything else goes through substring tests.
    """
    if piece.startswith(b'"ph": '):
        if piece.startswith(_FW_STEP):
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
    return b"HostToDevice" in piece or b"ProfilerStep#" in piece


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
    # (pid, tid) -> compact columns of complete events without a "cat" (CANN side):
    # start/end as array('d'), name as an index into ``names`` (names repeat a lot)
    x_events: dict[tuple[Any, Any], tuple[array, array, array]] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    name_ids: dict[str, int] = field(default_factory=dict)
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    events: int = 0
    _index: dict[tuple[Any, Any], tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

    def lookup(self, pid: Any, tid: Any, ts: float) -> tuple[str, float] | None:
        """Innermost complete event on (pid, tid) that contains ``ts`` → (name, dur)."""
        if self._index is None:
            self._index = {}
            for k, (st, en, nm) in self.x_events.items():
                s0 = np.frombuffer(st, dtype="float64")
                s1 = np.frombuffer(en, dtype="float64")
                order = np.lexsort((-s1, s0))  # by start, longest first for equal starts
                self._index[k] = (s0[order], s1[order], np.frombuffer(nm, dtype="uint32")[order])
        found = self._index.get((pid, tid))
        if found is None:
            return None
        s0, s1, nm = found
        i = int(np.searchsorted(s0, ts, side="right")) - 1
        for j in range(i, max(i - 64, -1), -1):
            if s1[j] >= ts:
                return self.names[int(nm[j])], float(s1[j] - s0[j])
        return None

    def feed(self, events: list[Any]) -> None:
        starts, finishes, xs, ids = self.starts, self.finishes, self.x_events, self.name_ids
        for e in events:
            if not isinstance(e, dict):
                continue
            ph = e.get("ph")
            if ph == "X":
                cat = e.get("cat")
                if cat is None:
                    ts = float(e.get("ts", 0))
                    key = (e.get("pid"), e.get("tid"))
                    cols = xs.get(key)
                    if cols is None:
                        cols = xs[key] = (array("d"), array("d"), array("I"))
                    name = e.get("name", "")
                    nid = ids.get(name)
                    if nid is None:
                        nid = ids[name] = len(self.names)
                        self.names.append(name)
                    cols[0].append(ts)
                    cols[1].append(ts + float(e.get("dur", 0.0) or 0.0))
                    cols[2].append(nid)
                elif cat == "cpu_op":
                    name = e.get("name", "")
                    if name.startswith("ProfilerStep#"):
                        m = _STEP.match(name)
                        if m:
                            ts = float(e.get("ts", 0))
                            self.steps.append((int(m.group(1)), ts, ts + float(e.get("dur", 0))))
            elif ph == "s" or ph == "f":
                if e.get("cat") != "HostToDevice":
                    continue
                key3 = (e.get("pid"), e.get("tid"), str(e.get("ts")))
                (starts if ph == "s" else finishes)[str(e.get("id"))] = key3
        self.events += len(events)


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
            search_from = max(0, len(buf) - (1 << 20))
            cuts = [m.start() for m in _BOUNDARY.finditer(buf, search_from)]
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
            if not cut_found and len(buf) > 8 * chunk_bytes:
                raise ValueError("no parsable event boundary; use ijson")


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
    state = _State()
    try:
        _iter_orjson(path, state, chunk_bytes)
    except ValueError:
        state = _State()
        _iter_ijson(path, state)
    return state


def read_host_dispatch(
    path: Path, rank: int | None, *, chunk_bytes: int = CHUNK_BYTES
) -> pd.DataFrame:
    """``trace_view.json`` → ``host_dispatch`` rows (one per HostToDevice flow with both ends).

    Raises:
        TraceInvalid: The file is truncated or not valid JSON (the caller warns and falls back).
    """
    st = scan_trace(path, chunk_bytes=chunk_bytes)
    rows = []
    steps = sorted(st.steps, key=lambda s: s[1])
    for fid, skey in st.starts.items():
        fkey = st.finishes.get(fid)
        if fkey is None:
            continue
        host_ts = float(skey[2])
        dev_ts = float(fkey[2])
        api = st.lookup(skey[0], skey[1], host_ts)
        dev = st.lookup(fkey[0], fkey[1], dev_ts)
        step = -1
        for sid, s0, s1 in steps:
            if s0 <= host_ts <= s1:
                step = sid
                break
        rows.append(
            {
                "rank": rank,
                "step": step,
                "api_name": api[0] if api else "",
                "host_start_us": host_ts,
                "device_start_us": dev_ts,
                "launch_delay_us": dev_ts - host_ts,
                "kernel_name": dev[0] if dev else "",
                "device_duration_us": float(dev[1]) if dev else float("nan"),
            }
        )
    df = pd.DataFrame(rows)
    if not df.empty:
        df = df.sort_values("host_start_us", kind="stable").reset_index(drop=True)
    return df
