"""The host's Python frames (``python_frames``): torch_npu's with_stack events of trace_view.json.

Expected rows come from reading the same files with the json module (an independent parse).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from advisor_chat.ingest import load_profile
from advisor_chat.ingest.trace import PY_FRAME_MIN_US, PY_SHORT_MIN_US, read_python_frames


def _json_frames(path: Path) -> list[tuple[int, float, float, str]]:
    ev = json.loads(path.read_text())
    ev = ev if isinstance(ev, list) else ev["traceEvents"]
    return sorted(
        (int(e["tid"]), float(str(e["ts"]).strip()), float(e["dur"]), e["name"])
        for e in ev
        # Python calls and the framework's operators on the host (aten::*, ProfilerStep#N)
        if e.get("cat") in ("python_function", "cpu_op")
        and float(e["dur"]) >= PY_FRAME_MIN_US
        and not e["name"].startswith("ProfilerStep#")  # step markers, not work
    )


def _json_short(path: Path) -> list[tuple[int, str, float, float, int]]:
    """Short frames summed per (thread, frame, ProfilerStep window): (tid, frame, first, sum, n)."""
    ev = json.loads(path.read_text())
    ev = ev if isinstance(ev, list) else ev["traceEvents"]
    frames = [e for e in ev if e.get("cat") in ("python_function", "cpu_op")]
    steps = sorted(
        (float(str(e["ts"]).strip()), float(str(e["ts"]).strip()) + float(e["dur"]))
        for e in frames
        if e["name"].startswith("ProfilerStep#") and float(e["dur"]) >= PY_SHORT_MIN_US
    )
    out: dict[tuple[int, str, int], list[float]] = {}
    for e in frames:
        dur, ts = float(e["dur"]), float(str(e["ts"]).strip())
        if e["name"].startswith("ProfilerStep#") or not PY_SHORT_MIN_US <= dur < PY_FRAME_MIN_US:
            continue
        # the last window that starts at or before it, if it ends after it
        win = max((i for i, (a, _) in enumerate(steps) if a <= ts), default=-1)
        win = win if win >= 0 and ts <= steps[win][1] else -1
        got = out.setdefault((int(e["tid"]), e["name"], win), [ts, 0.0, 0])
        got[0], got[1], got[2] = min(got[0], ts), got[1] + dur, got[2] + 1
    return sorted((t, f, v[0], v[1], int(v[2])) for (t, f, _), v in out.items())


def _rows(df) -> list[tuple[int, float, float, str]]:
    one = df[df["dur_us"] >= PY_FRAME_MIN_US]
    return sorted(zip(one["tid"], one["start_us"], one["dur_us"], one["frame"], strict=True))


def _short_rows(df) -> list[tuple[int, str, float, float, int]]:
    s = df[(df["calls"] > 1) | (df["dur_us"] < PY_FRAME_MIN_US)]
    return sorted(
        (int(t), f, float(a), float(d), int(n))
        for t, f, a, d, n in zip(
            s["tid"], s["frame"], s["start_us"], s["dur_us"], s["calls"], strict=True
        )
    )


def test_real_sample_frames_match_a_json_parse(real_samples: Path) -> None:
    real = real_samples / "pt-text-level1-2rank"
    files = sorted(real.glob("*/ASCEND_PROFILER_OUTPUT/trace_view.json"))
    assert len(files) == 2
    for f in files:
        want = _json_frames(f)
        got = read_python_frames(f, 0)
        assert len(want) > 50  # the sample's long frames (main.py train loop, spawn ...)
        assert _rows(got[got["calls"] == 1]) == want

        # the short frames summed per thread, frame and step, as the json module sums them
        def rounded(rows: list) -> list:
            return [(t, n, round(a, 3), round(d, 3), c) for t, n, a, d, c in rows]

        short = _short_rows(got)
        assert rounded(short) == rounded(_json_short(f)) and len(short) > 0
        # callers first at one start time: a frame's parent precedes it
        assert got["start_us"].is_monotonic_increasing
    profile = load_profile(real, use_cache=False, progress=False)
    both = profile.python_frames_for(profile.ranks)
    assert sorted(both["rank"].unique()) == [0, 1]
    assert len(both[both["calls"] == 1].query("dur_us >= @PY_FRAME_MIN_US")) == sum(
        len(_json_frames(f)) for f in files
    )


def _write(path: Path, events: list[dict]) -> Path:
    path.write_text(json.dumps(events))
    return path


def test_other_key_order_and_escaped_names_are_read(tmp_path: Path) -> None:
    events = [
        # torch_npu's key order, a name with an escaped quote and a non-ASCII character
        {"ph": "X", "name": 'a.py(3): f "x" é', "pid": 1, "tid": 7, "ts": "100.500\t",
         "dur": 2500.0, "cat": "python_function", "args": {"Python id": 1}},
        # shorter than 1 ms: summed per step with its like (twice in step 1)
        {"ph": "X", "name": "a.py(9): g", "pid": 1, "tid": 7, "ts": "200.000", "dur": 999.0,
         "cat": "python_function", "args": {}},
        {"ph": "X", "name": "a.py(9): g", "pid": 1, "tid": 7, "ts": "1300.000", "dur": 60.0,
         "cat": "python_function", "args": {}},
        # too short to keep at all
        {"ph": "X", "name": "a.py(9): h", "pid": 1, "tid": 7, "ts": "1400.000", "dur": 49.0,
         "cat": "python_function", "args": {}},
        {"ph": "X", "name": "ProfilerStep#1", "pid": 1, "tid": 7, "ts": "50.000", "dur": 9000.0,
         "cat": "cpu_op", "args": {}},
        # the framework's operator on the host: a frame too (a step marker is not)
        {"ph": "X", "name": "aten::isin", "pid": 1, "tid": 7, "ts": "3000.000", "dur": 1500.0,
         "cat": "cpu_op", "args": {}},
        # another category: not a frame
        {"ph": "X", "name": "HcclAllReduce", "pid": 2, "tid": 9, "ts": "3000.000", "dur": 5000.0,
         "cat": "HostToDevice", "args": {}},
    ]  # fmt: skip
    got = read_python_frames(_write(tmp_path / "a.json", events), 3)
    assert list(got["frame"]) == ['a.py(3): f "x" é', "a.py(9): g", "aten::isin"]
    assert list(got["start_us"]) == [100.5, 200.0, 3000.0]
    assert list(got["dur_us"]) == [2500.0, 1059.0, 1500.0] and list(got["calls"]) == [1, 2, 1]
    assert list(got["rank"]) == [3, 3, 3] and list(got["tid"]) == [7, 7, 7]
    # the same events with keys in another order: found by the streaming fallback
    reordered = [dict(sorted(e.items())) for e in events]
    again = read_python_frames(_write(tmp_path / "b.json", reordered), 3)
    assert _rows(again) == _rows(got)


def test_a_trace_without_frames_gives_an_empty_table(tmp_path: Path) -> None:
    got = read_python_frames(_write(tmp_path / "a.json", []), 0)
    assert got.empty
    assert list(got.columns) == ["rank", "tid", "start_us", "dur_us", "frame", "calls"]
    (tmp_path / "empty.json").write_bytes(b"")
    assert read_python_frames(tmp_path / "empty.json", 0).empty


def test_generated_profile_frames_and_a_truncated_trace(scenario, tmp_path: Path) -> None:
    src = scenario("inline-tokenize-some-steps")
    key = json.loads((src / "answer_key.json").read_text())
    culprits = key["expected_numbers"]["culprit_ranks"]
    profile = load_profile(src, use_cache=False, progress=False)
    fr = profile.python_frames_for(profile.ranks)
    assert sorted(fr["rank"].unique()) == culprits  # only the ranks that tokenize inline
    # a copy whose culprit trace is cut mid-file: no traceback, a warning naming the file
    dst = tmp_path / "cut"
    shutil.copytree(src, dst)
    tv = next((dst).glob(f"*rank{culprits[0]}_*/ASCEND_PROFILER_OUTPUT/trace_view.json"), None)
    if tv is None:  # folder naming of the generator
        tv = sorted(dst.glob("*/ASCEND_PROFILER_OUTPUT/trace_view.json"))[culprits[0]]
    data = tv.read_bytes()
    tv.write_bytes(data[: len(data) // 2])
    cut = load_profile(dst, use_cache=False, progress=False)
    fr2 = cut.python_frames_for(cut.ranks)
    assert set(fr2["rank"].unique()) <= set(culprits)
    assert any("trace_view.json" in (w.path or "") for w in cut.warnings)
