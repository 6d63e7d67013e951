#!/usr/bin/env python
"""Benchmarks of advisor-chat on generated clusters, side by side with ``msprof-analyze cluster``.

Usage (from the repository root):

    .venv/bin/python tools/bench.py                 # text 256, 1024, 4096 ranks + DB 1024
    .venv/bin/python tools/bench.py --quick         # smoke run: 16 and 256 ranks, small traces
    .venv/bin/python tools/bench.py --sizes 256,1024 --exports text --out /tmp/BENCH.md

What is measured (every measurement in a fresh subprocess; wall time, CPU time, and peak memory as
the sampled sum of the PSS of the process tree: both tools fork worker processes, whose pages shared
with their parent RSS would count once per process; PSS splits them, RSS where PSS is unreadable):

- generation of the ``seed-rank12`` scenario at each size (not timed against anything);
- the parse floor of the folder in the same run: reading every byte, ``orjson.loads`` of every JSON
  file, and one Arrow parse of all ``kernel_details.csv`` joined;
- ``load_profile`` cold (empty cache) followed by ``run_report``, and ``msprof-analyze cluster -d COPY
  -m all``, each on a fresh copy of the folder made just before its run (the same page-cache state
  for both; msprof-analyze writes into its input), alternating in ABBA order
  ours / theirs ``--repeats`` times (default 2), so that each ratio compares neighbouring runs on a
  shared, noisy machine;
- the cached reload (in process) and answer latency after load (in process: the first
  ``Advisor(profile).ask(...)`` after the load, then further questions on fresh advisors);
- optionally (``--trace-mb``) ``trace_view.json`` streaming on a tiled real trace.

Results go to ``docs/BENCHMARKS.md`` (``--out``) with the machine, the exact command and PASS/FAIL per
target, and to a JSON file beside it (``--json``).
"""

from __future__ import annotations

# The measured worker processes run this file too: what only the parent needs (argument parsing,
# package versions, statistics) is imported where it is used, so that a worker's wall time is
# advisor-chat's (``importlib.metadata`` alone took 40-60 ms of every measured run).
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

REPO = Path(__file__).resolve().parents[1]
SCENARIO = "seed-rank12"
QUESTIONS = [
    "why is rank {slow} slow?",
    "which rank is slow?",
    "what is the bottleneck of this job?",
    "which link is slow?",
    "为什么{slow}号卡慢？",
    "step 时间有没有越来越慢？",
]
TARGET_SPEEDUP = 5.0
GOAL_SPEEDUP = 8.0
TARGET_PEAK_MB = {1024: 1536.0, 4096: 4096.0}
TARGET_CACHED_S = 1.0
TARGET_ANSWER_MS = 500.0
TARGET_TRACE_MBPS = 100.0
TARGET_FLAT_FACTOR = 1.25  # peak memory on the big trace at most 1.25x the small one's


# ------------------------------------------------------------------------------------------------
# measuring a subprocess


def _tree_mem(proc: Any) -> int:
    """Memory of ``proc`` and its descendants (bytes): the sum of their PSS (RSS as a fallback).

    Forked workers share their parent's pages copy-on-write; the sum of RSS counts every shared
    page once per process, PSS (``/proc/PID/smaps_rollup``) divides it among them.
    """
    import psutil

    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            try:
                total += p.memory_full_info().pss
            except (AttributeError, psutil.AccessDenied):
                total += p.memory_info().rss
    return total


def measure(
    cmd: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 3600.0,
    sample: bool = True,
) -> dict[str, Any]:
    """Run ``cmd``; return wall time, peak tree memory (PSS sum, sampled every 50 ms), exit code, output tails.

    Dirty pages are flushed first (``os.sync``): copying a folder for msprof-analyze and deleting
    it leaves hundreds of MB of writeback that would otherwise land in the next measured run.
    ``sample=False`` runs without the memory sampler (``peak_mb`` is ``None``): reading every
    process' PSS takes CPU that a one-second command, on two cores, feels in its wall time.
    """
    import psutil

    os.sync()
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err)
        ps = psutil.Process(p.pid)
        peak = 0
        stop = threading.Event()

        def sample_mem() -> None:
            nonlocal peak
            while not stop.is_set():
                peak = max(peak, _tree_mem(ps))
                stop.wait(0.05)

        th = threading.Thread(target=sample_mem, daemon=True)
        if sample:
            th.start()
        timed_out = False
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            for c in ps.children(recursive=True):
                c.kill()
            p.kill()
            rc = p.wait()
        stop.set()
        if sample:
            th.join()
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    result: dict[str, Any] = {
        "loadavg_1m_after": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "wall_s": wall,
        "peak_mb": peak / 2**20 if sample else None,
        "rc": rc,
        "timed_out": timed_out,
        "stderr_tail": stderr[-800:],
    }
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                result["inner"] = json.loads(line)
            break
    return result


# ------------------------------------------------------------------------------------------------
# worker modes (run inside the measured subprocess; print one JSON line)


def _settings(home: str) -> Any:
    from advisor_chat.config import load_settings

    return load_settings(home=Path(home))


def worker_generate(out: str, ranks: int, export: str) -> dict[str, Any]:
    from advisor_chat.synth import generate

    t0 = time.perf_counter()
    generate(SCENARIO, Path(out), ranks=ranks, export=export)  # type: ignore[arg-type]
    return {"seconds": time.perf_counter() - t0}


def worker_load_report(path: str, home: str) -> dict[str, Any]:
    from advisor_chat.ingest import load_profile
    from advisor_chat.reporting import run_report

    settings = _settings(home)
    t0 = time.perf_counter()
    profile = load_profile(path, settings=settings, progress=False)
    t1 = time.perf_counter()
    report = run_report(profile)
    t2 = time.perf_counter()
    findings = getattr(report, "findings", [])
    stats = getattr(profile, "stats", {}) or {}
    return {
        "load_s": t1 - t0,
        "report_s": t2 - t1,
        "cache_hit": bool(getattr(profile, "cache_hit", False)),
        "ranks": len(profile.ranks),
        "findings": len(findings),
        "files_parsed": stats.get("files_parsed"),
        "kernels_ranks_read": stats.get("kernels_ranks_read"),
        "host_dispatch_ranks_read": stats.get("host_dispatch_ranks_read"),
        "cpu_s": _cpu_s(),
    }


def _cpu_s() -> float:
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


def worker_floor(path: str) -> dict[str, Any]:
    """Parse floor: read every byte; orjson every JSON file; one Arrow parse of all kernel CSVs."""
    import io

    import orjson
    import pyarrow.csv as pacsv

    files = sorted(p for p in Path(path).rglob("*") if p.is_file())
    t0, c0 = time.perf_counter(), time.process_time()
    total = sum(len(p.read_bytes()) for p in files)
    read_s, read_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    n_json = 0
    for p in files:
        if p.suffix == ".json":
            orjson.loads(p.read_bytes())
            n_json += 1
    json_s, json_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    parts: list[bytes] = []
    head = b""
    for p in files:
        if p.name == "kernel_details.csv":
            raw = p.read_bytes()
            nl = raw.find(b"\n")
            head = head or raw[: nl + 1]
            parts.append(raw[nl + 1 :])
    rows = pacsv.read_csv(io.BytesIO(head + b"".join(parts))).num_rows if parts else 0
    csv_s, csv_cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "files": len(files),
        "mb": total / 1e6,
        "read_s": read_s,
        "read_cpu_s": read_cpu,
        "json_files": n_json,
        "json_s": json_s,
        "json_cpu_s": json_cpu,
        "kernel_csvs": len(parts),
        "kernel_rows": rows,
        "arrow_s": csv_s,
        "arrow_cpu_s": csv_cpu,
    }


def worker_answer(path: str, home: str, slow: int) -> dict[str, Any]:
    """Load (cached), warm the case retrieval once, then time each question with a fresh advisor."""
    from advisor_chat.agent import Advisor
    from advisor_chat.ingest import load_profile
    from advisor_chat.kb import search_cases

    settings = _settings(home)
    t0 = time.perf_counter()
    profile = load_profile(path, settings=settings, progress=False)
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    search_cases("warm up", k=1, settings=settings)  # loads the embedding model and the index
    warm_ms = (time.perf_counter() - t1) * 1e3
    from advisor_chat.tools.render import count_tokens

    t1 = time.perf_counter()
    count_tokens("warm up")  # loads the tokenizer vocabulary (tiktoken), once per process
    tok_ms = (time.perf_counter() - t1) * 1e3
    lat = []
    for q in QUESTIONS:
        adv = Advisor(profile, settings=settings)
        t = time.perf_counter()
        adv.ask(q.format(slow=slow))
        lat.append((time.perf_counter() - t) * 1e3)
    return {
        "load_s": load_s,
        "cache_hit": bool(getattr(profile, "cache_hit", False)),
        "retrieval_warmup_ms": warm_ms,
        "tokenizer_warmup_ms": tok_ms,
        "latency_ms": lat,
    }


def worker_answer_cold(path: str, home: str, slow: int, opened: bool) -> dict[str, Any]:
    """Cold load (empty cache), then the first question, in one fresh process.

    ``opened``: load with ``advisor_chat.open_profile`` (the load computes and stores the
    diagnosis; its time is reported apart, ``diagnose_s``); else ``load_profile`` alone (the
    ingest layer: the first question then computes the diagnosis).
    """
    from advisor_chat.agent import Advisor
    from advisor_chat.diagnosis import diagnose
    from advisor_chat.ingest import load_profile

    settings = _settings(home)
    t0 = time.perf_counter()
    profile = load_profile(path, settings=settings, progress=False)
    load_s = time.perf_counter() - t0
    diagnose_s = None
    if opened:  # open_profile = load_profile + diagnose, timed apart
        t1 = time.perf_counter()
        diagnose(profile)
        diagnose_s = time.perf_counter() - t1
    adv = Advisor(profile, settings=settings)
    t1 = time.perf_counter()
    adv.ask(QUESTIONS[0].format(slow=slow))
    first_ms = (time.perf_counter() - t1) * 1e3
    return {
        "load_s": load_s,
        "cache_hit": bool(getattr(profile, "cache_hit", False)),
        "diagnose_s": diagnose_s,
        "first_ms": first_ms,
    }


def worker_index(home: str) -> dict[str, Any]:
    from advisor_chat.kb import build_index

    t0 = time.perf_counter()
    build_index(_settings(home))
    return {"seconds": time.perf_counter() - t0}


def worker_trace(path: str) -> dict[str, Any]:
    from advisor_chat.ingest.trace import read_host_dispatch

    t0 = time.perf_counter()
    df = read_host_dispatch(Path(path), 0)
    return {"seconds": time.perf_counter() - t0, "rows": len(df)}


# ------------------------------------------------------------------------------------------------
# big trace_view.json


_NUM_RE = re.compile(rb'("ts": ")(\d+)(\.\d+")|("id": "?)(\d+)')


def _trace_source() -> tuple[Path, str]:
    env = os.environ.get("ADVISOR_SHARED")
    reals = [REPO / "tests" / "data" / "real"]  # shipped with the repository (issue 14)
    reals += (
        [Path(env) / "samples" / "real"] if env else [REPO.parent / "shared" / "samples" / "real"]
    )
    for real in reals:
        p = real / "pt-text-level1-2rank/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
        if p.is_file():
            return p, "real sample pt-text-level1-2rank rank 0 (torch_npu, Jan 2025)"
    raise SystemExit("no source trace: set ADVISOR_SHARED to the shared folder (samples/real)")


def build_trace(dest: Path, target_mb: float, source: Path) -> dict[str, Any]:
    """Tile ``source`` (a bare JSON array) into ``dest`` of at least ``target_mb`` MB.

    Copy k shifts every ``ts`` by k × (the source's time span + 1 s) and every flow ``id`` by
    k × (max id + 1), so no event or flow repeats and the reader keeps k times as many events.
    Separators stay torch_npu's (``", "``).
    """
    raw = source.read_bytes().strip()
    if not (raw.startswith(b"[") and raw.endswith(b"]")):
        raise SystemExit(f"{source} is not a bare JSON array")
    tile = raw[1:-1].strip()
    n_events = tile.count(b"}, {") + 1
    ts_vals = [int(m.group(2)) for m in _NUM_RE.finditer(tile) if m.group(2)]
    ids = [int(m.group(5)) for m in _NUM_RE.finditer(tile) if m.group(5)]
    span = (max(ts_vals) - min(ts_vals) + 1_000_000) if ts_vals else 1_000_000
    id_step = (max(ids) + 1) if ids else 1
    # split the tile once into literal parts and numeric slots
    parts: list[bytes] = []
    slots: list[tuple[str, int, bytes]] = []
    pos = 0
    for m in _NUM_RE.finditer(tile):
        if m.group(2):
            parts.append(tile[pos : m.start(2)])
            slots.append(("ts", int(m.group(2)), b""))
            pos = m.end(2)
        else:
            parts.append(tile[pos : m.start(5)])
            slots.append(("id", int(m.group(5)), b""))
            pos = m.end(5)
    tail = tile[pos:]
    target = int(target_mb * 1e6)
    written = 0
    copies = 0
    t0 = time.perf_counter()
    with dest.open("wb") as fh:
        fh.write(b"[")
        while written < target:
            dts = copies * span
            did = copies * id_step
            chunks = []
            for lit, (kind, val, _) in zip(parts, slots, strict=True):
                chunks.append(lit)
                chunks.append(str(val + (dts if kind == "ts" else did)).encode())
            chunks.append(tail)
            blob = (b", " if copies else b"") + b"".join(chunks)
            fh.write(blob)
            written += len(blob)
            copies += 1
        fh.write(b"]")
    return {
        "path": str(dest),
        "mb": dest.stat().st_size / 1e6,
        "copies": copies,
        "events": copies * n_events,
        "build_s": time.perf_counter() - t0,
    }


# ------------------------------------------------------------------------------------------------
# machine


def machine() -> dict[str, Any]:
    import platform
    from importlib import metadata

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gb = int(line.split()[1]) / 2**20
    except OSError:
        pass
    versions = {}
    for pkg in (
        "advisor-chat",
        "pandas",
        "pyarrow",
        "numpy",
        "orjson",
        "ijson",
        "msprof-analyze",
        "dask",
        "chromadb",
        "psutil",
    ):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gb": round(mem_gb, 1) if mem_gb else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions,
        "loadavg_at_start": [round(x, 2) for x in load] if load else None,
    }


# ------------------------------------------------------------------------------------------------
# the run


def _py(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


def _du_mb(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(root, f))
    return total / 1e6


def _msprof_bin() -> str | None:
    cand = Path(sys.executable).parent / "msprof-analyze"
    if cand.exists():
        return str(cand)
    return shutil.which("msprof-analyze")


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    home = Path(args.home) if args.home else work / "home"
    env = {**os.environ, "ADVISOR_HOME": str(home), "PYTHONWARNINGS": "ignore"}
    # Python's default (what a user has): modules compiled once to __pycache__. A sandbox that sets
    # PYTHONDONTWRITEBYTECODE made every measured command compile the package again (~60 ms).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    results: dict[str, Any] = {
        "machine": machine(),
        "command": args.command,
        "rows": [],
        "trace": [],
        "repeats": args.repeats,
    }

    log("building the case index once (not part of any timing below)")
    idx = measure(_py("_worker", "index", str(home)), env=env, timeout=args.timeout)
    results["index_build_s"] = idx.get("inner", {}).get("seconds")

    msprof = None if args.no_msprof else _msprof_bin()
    combos = [(e, n) for e in args.exports for n in args.sizes]
    combos += [("db", n) for n in args.db_sizes if ("db", n) not in combos]
    combos.sort(key=lambda c: c[1])  # largest last: a run cut short still has the smaller sizes
    for export, n in combos:
        if args.partial:  # the results so far, in case a later size does not finish
            Path(args.partial).write_text(json.dumps(results, indent=1, default=str))
        row: dict[str, Any] = {"ranks": n, "export": export, "pairs": []}
        results["rows"].append(row)
        prof = work / f"{SCENARIO}-{n}-{export}"
        if not (prof / "answer_key.json").is_file() or args.regenerate:
            shutil.rmtree(prof, ignore_errors=True)
            log(f"generate {n} ranks ({export})")
            g = measure(
                _py("_worker", "generate", str(prof), str(n), export),
                env=env,
                timeout=args.timeout,
            )
            row["generate"] = g
            if g["rc"] != 0:
                row["error"] = f"generation failed: {g['stderr_tail']}"
                continue
        row["size_mb"] = _du_mb(prof)
        key = json.loads((prof / "answer_key.json").read_text())
        slow = (key.get("slow_ranks") or [0])[0]

        log(f"parse floor, {n} ranks ({export})")
        row["floor"] = measure(_py("_worker", "floor", str(prof)), env=env, timeout=args.timeout)
        ours_copy = work / f"ours-copy-{n}-{export}"
        for rep in range(args.repeats):
            pair: dict[str, Any] = {}
            row["pairs"].append(pair)
            # ABBA order (ours, theirs, theirs, ours, ...): a drift of the machine during the row
            # weighs on both tools alike, and the cached rows below follow the cold run that wrote
            # the cache, as a user's next command does (not the other tool's minute-long run)
            for tool in ("ours", "msprof") if rep % 2 == 0 else ("msprof", "ours"):
                if tool == "ours":
                    shutil.rmtree(home / "cache", ignore_errors=True)
                    log(
                        f"[{rep + 1}/{args.repeats}] advisor-chat load + report, cold, {n} ranks "
                        f"({export})"
                    )
                    # each tool reads a fresh copy made just before its run (msprof-analyze
                    # writes into its folder): both start from just-written files in the page cache
                    shutil.rmtree(ours_copy, ignore_errors=True)
                    shutil.copytree(
                        prof, ours_copy, ignore=shutil.ignore_patterns("answer_key.json")
                    )
                    pair["ours"] = measure(
                        _py("_worker", "load_report", str(ours_copy), str(home)),
                        env=env,
                        timeout=args.timeout,
                    )
                elif msprof:
                    copy = work / f"msprof-copy-{n}-{export}"
                    shutil.rmtree(copy, ignore_errors=True)
                    shutil.copytree(prof, copy, ignore=shutil.ignore_patterns("answer_key.json"))
                    log(
                        f"[{rep + 1}/{args.repeats}] msprof-analyze cluster -m all, {n} ranks "
                        f"({export})"
                    )
                    pair["msprof"] = measure(
                        [msprof, "cluster", "-d", str(copy), "-m", "all"],
                        env=env,
                        cwd=work,
                        timeout=args.msprof_timeout,
                    )
                    pair["msprof"]["output_written"] = (copy / "cluster_analysis_output").is_dir()
                    shutil.rmtree(copy, ignore_errors=True)
        # the cached runs read the folder the last cold run cached (its copy)
        if not ours_copy.is_dir():
            shutil.copytree(prof, ours_copy, ignore=shutil.ignore_patterns("answer_key.json"))
        log(f"load + report, cached, {n} ranks ({export})")
        row["cached"] = measure(
            _py("_worker", "load_report", str(ours_copy), str(home)), env=env, timeout=args.timeout
        )
        log(f"offline answers after load, {n} ranks ({export})")
        row["answers"] = measure(
            _py("_worker", "answer", str(ours_copy), str(home), str(slow)),
            env=env,
            timeout=args.timeout,
        )
        # what a user types: the CLI, cold (empty cache; the copy's files in the page cache, as
        # in the pairs) then cached, then one question on the cached profile
        cli = [sys.executable, "-c", "from advisor_chat.cli.main import main; main()"]
        shutil.rmtree(home / "cache", ignore_errors=True)
        for key, words in (
            ("cli_report_cold", ["report", str(ours_copy)]),
            ("cli_report_cached", ["report", str(ours_copy)]),
            ("cli_ask_cached", ["ask", str(ours_copy), QUESTIONS[0].format(slow=slow)]),
        ):
            log(f"CLI {words[0]} ({key}), {n} ranks ({export})")
            row[key] = measure(cli + words, env=env, timeout=args.timeout)
            if key != "cli_report_cold":  # the wall time as typed: no sampler, median of 3
                row[key]["walls_unsampled_s"] = [
                    measure(cli + words, env=env, timeout=args.timeout, sample=False)["wall_s"]
                    for _ in range(3)
                ]
        row["cli_help_walls_s"] = [
            measure([*cli, "--help"], env=env, sample=False)["wall_s"] for _ in range(3)
        ]
        for warm in ("0", "1"):
            how = "open_profile" if warm == "1" else "load_profile"
            log(f"first answer after a cold load ({how}), {n} ranks ({export})")
            shutil.rmtree(home / "cache", ignore_errors=True)
            row[f"answer_cold_{warm}"] = measure(
                _py("_worker", "answer_cold", str(ours_copy), str(home), str(slow), warm),
                env=env,
                timeout=args.timeout,
            )
        shutil.rmtree(ours_copy, ignore_errors=True)
        if args.cleanup:
            shutil.rmtree(prof, ignore_errors=True)

    if not args.trace_mb:
        return results
    source, source_desc = _trace_source()
    results["trace_source"] = source_desc
    for mb in args.trace_mb:
        dest = work / f"trace_view_{int(mb)}MB.json"
        if not dest.is_file() or dest.stat().st_size < mb * 1e6:
            log(f"building a {mb:.0f} MB trace_view.json")
            info = build_trace(dest, mb, source)
        else:
            info = {"path": str(dest), "mb": dest.stat().st_size / 1e6}
        log(f"streaming {info['mb']:.0f} MB")
        m = measure(_py("_worker", "trace", str(dest)), env=env, timeout=args.timeout)
        results["trace"].append({**info, **m})
        if args.cleanup:
            dest.unlink(missing_ok=True)
    return results


# ------------------------------------------------------------------------------------------------
# report


def _f(x: Any, fmt: str = "{:.2f}") -> str:
    if x is None:
        return "n/a"
    return fmt.format(x)


def _ok(m: dict[str, Any] | None) -> bool:
    return bool(m) and m.get("rc") == 0 and not m.get("timed_out") and "inner" in m  # type: ignore[union-attr]


def _pct(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (same as the eval report's)."""
    v = sorted(values)
    pos = (len(v) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _median(xs: list[float]) -> float | None:
    import statistics

    return statistics.median(xs) if xs else None


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """Derived numbers per row and the target verdicts."""
    for row in results["rows"]:
        s: dict[str, Any] = {}
        ours = [p["ours"] for p in row.get("pairs", []) if _ok(p.get("ours"))]
        if ours:
            s["cold_load_s"] = [m["inner"]["load_s"] for m in ours]
            s["report_s"] = [m["inner"]["report_s"] for m in ours]
            s["cold_wall_s"] = [m["wall_s"] for m in ours]
            s["cold_cpu_s"] = [m["inner"].get("cpu_s") for m in ours]
            s["cold_peak_mb"] = [m["peak_mb"] for m in ours]
            s["findings"] = ours[0]["inner"].get("findings")
            s["heavy_ranks"] = (
                ours[0]["inner"].get("kernels_ranks_read"),
                ours[0]["inner"].get("host_dispatch_ranks_read"),
            )
        ms_all = [p["msprof"] for p in row.get("pairs", []) if p.get("msprof")]
        if ms_all:
            s["msprof_s"] = [m["wall_s"] for m in ms_all]
            s["msprof_peak_mb"] = [m["peak_mb"] for m in ms_all]
            s["msprof_ok"] = all(
                m.get("rc") == 0 and m.get("output_written") and not m.get("timed_out")
                for m in ms_all
            )
        ratios = []
        for p in row.get("pairs", []):
            o, m = p.get("ours"), p.get("msprof")
            if _ok(o) and m and m.get("rc") == 0 and not m.get("timed_out"):
                ratios.append(m["wall_s"] / o["wall_s"])
        if ratios:
            s["speedups"] = ratios
            s["speedup_median"] = _median(ratios)
            s["speedup_min"] = min(ratios)
        cached = row.get("cached")
        ans = row.get("answers")
        if _ok(cached):
            # two cached reloads, each the first load of a fresh process: the cached row's and the
            # answers row's (judged on the slower one)
            loads = [cached["inner"]["load_s"]]
            if _ok(ans) and ans["inner"].get("cache_hit"):
                loads.append(ans["inner"]["load_s"])
            s["cached_loads_s"] = loads
            s["cached_load_s"] = max(loads)
            s["cached_hit"] = cached["inner"]["cache_hit"]
            s["cached_peak_mb"] = cached["peak_mb"]
            s["cached_wall_s"] = cached["wall_s"]
        if _ok(ans):
            lat = ans["inner"]["latency_ms"]
            s["answer_first_ms"] = lat[0]
            s["answer_rest_p50_ms"] = _median(lat[1:])
            s["answer_p95_ms"] = _pct(lat, 0.95)
            s["answer_p50_ms"] = _median(lat)
            s["retrieval_warmup_ms"] = ans["inner"].get("retrieval_warmup_ms")
            s["tokenizer_warmup_ms"] = ans["inner"].get("tokenizer_warmup_ms")
        for warm in ("0", "1"):
            ac = row.get(f"answer_cold_{warm}")
            if _ok(ac):
                s[f"cold_first_ms_{warm}"] = ac["inner"]["first_ms"]
                s[f"cold_load_s_{warm}"] = ac["inner"]["load_s"]
                if warm == "1":
                    s["cold_diagnose_s"] = ac["inner"]["diagnose_s"]
        for key in ("cli_report_cold", "cli_report_cached", "cli_ask_cached"):
            m = row.get(key)
            if m and m.get("rc") == 0 and not m.get("timed_out"):
                s[f"{key}_s"] = _median(m.get("walls_unsampled_s") or [m["wall_s"]])
                s[f"{key}_sampled_s"] = m["wall_s"]
                s[f"{key}_peak_mb"] = m["peak_mb"]
        if row.get("cli_help_walls_s"):
            s["cli_help_s"] = _median(row["cli_help_walls_s"])
        fl = row.get("floor")
        if _ok(fl):
            s["floor"] = fl["inner"]
        if row.get("generate"):
            s["generate_s"] = row["generate"]["wall_s"]
        row["summary"] = s

    targets = []

    def target(name: str, value: str, ok: bool | None, why: str = "") -> None:
        targets.append(
            {
                "target": name,
                "measured": value,
                "verdict": "n/a" if ok is None else ("PASS" if ok else "FAIL"),
                "note": why,
            }
        )

    def row_of(n: int, export: str = "text") -> dict[str, Any]:
        rs = [r for r in results["rows"] if r["ranks"] == n and r["export"] == export]
        return rs[0]["summary"] if rs else {}

    s1024 = row_of(1024)
    sp = s1024.get("speedups")
    target(
        f"1024 ranks (text): cold load + report >= {TARGET_SPEEDUP:.0f}x faster than msprof-analyze "
        f"cluster -m all (goal {GOAL_SPEEDUP:.0f}x), every alternating pair",
        ", ".join(f"{x:.1f}x" for x in sp) if sp else "not measured",
        None if not sp else min(sp) >= TARGET_SPEEDUP,
        ""
        if not sp
        else (
            f"goal {GOAL_SPEEDUP:.0f}x "
            + ("met" if min(sp) >= GOAL_SPEEDUP else "not met")
            + " (msprof-analyze wall / ours, process start included on both sides)"
        ),
    )
    for n, limit in TARGET_PEAK_MB.items():
        pk = row_of(n).get("cold_peak_mb")
        target(
            f"{n} ranks (text): peak memory of load + report < {limit / 1024:.1f} GB",
            f"max {max(pk):.0f} MB" if pk else "not measured",
            None if not pk else max(pk) < limit,
        )
    cached = [
        (r["ranks"], r["export"], r["summary"].get("cached_load_s"))
        for r in results["rows"]
        if r["summary"].get("cached_load_s") is not None
    ]
    worst = max(cached, key=lambda x: x[2]) if cached else None
    target(
        f"cached reload < {TARGET_CACHED_S:.0f} s in process (every size, both reloads)",
        f"max {worst[2]:.2f} s ({worst[0]} ranks {worst[1]})" if worst else "not measured",
        None if worst is None else worst[2] < TARGET_CACHED_S,
    )
    fa = s1024.get("answer_first_ms")
    target(
        f"1024 ranks: first answer after load < {TARGET_ANSWER_MS:.0f} ms in process",
        f"{fa:.0f} ms" if fa is not None else "not measured",
        None if fa is None else fa < TARGET_ANSWER_MS,
        ""
        if fa is None
        else (
            f"'{QUESTIONS[0]}' on a fresh Advisor after a cached load (diagnosis stored by the "
            f"cold report); the once-per-process warm-ups are not counted: case retrieval "
            f"(embedding model, index) {_f(s1024.get('retrieval_warmup_ms'), '{:.0f}')} ms, "
            f"tokenizer vocabulary {_f(s1024.get('tokenizer_warmup_ms'), '{:.0f}')} ms; "
            f"later questions p50 "
            f"{_f(s1024.get('answer_rest_p50_ms'), '{:.0f}')} ms"
        ),
    )
    c0, c1 = s1024.get("cold_first_ms_0"), s1024.get("cold_first_ms_1")
    target(
        f"1024 ranks: first answer after a COLD load < {TARGET_ANSWER_MS:.0f} ms in process",
        "not measured"
        if c1 is None
        else f"{c1:.0f} ms after open_profile (load {_f(s1024.get('cold_load_s_1'), '{:.1f}')} s "
        f"+ diagnosis {_f(s1024.get('cold_diagnose_s'), '{:.1f}')} s); "
        + (f"{c0:.0f} ms after load_profile alone" if c0 is not None else ""),
        None if c1 is None else c1 < TARGET_ANSWER_MS,
        "fresh process, empty cache, no report before; open_profile (the documented load of the "
        "Python API, the chat and the UI) computes the diagnosis once and stores it with the "
        "cached tables; after load_profile alone (ingest only) the first question computes it",
    )
    tr = [t for t in results["trace"] if _ok(t)]
    if tr:
        big = max(tr, key=lambda t: t["mb"])
        for t in tr:
            t["mbps"] = t["mb"] / t["inner"]["seconds"]
        target(
            f"trace streaming ({big['mb']:.0f} MB file), informative",
            f"{big['mbps']:.0f} MB/s",
            None,
        )
    results["targets"] = targets
    return results


def to_markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        "# Benchmarks",
        "",
        "Produced by `tools/bench.py`; every number below comes from the run recorded here. Re-run with:",
        "",
        "```",
        results["command"],
        "```",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        f"| CPUs (nproc) | {m['nproc']} |",
        f"| CPU | {m['cpu']} |",
        f"| memory | {m['memory_gb']} GB |",
        f"| Python | {m['python']} ({m['platform']}) |",
        f"| load average at start | {m['loadavg_at_start']} |",
        "| packages | " + ", ".join(f"{k} {v}" for k, v in m["packages"].items()) + " |",
        "",
        f"Run at {results.get('started_at', '?')}, {results.get('duration_s', 0):.0f} s in total. "
        f"Scenario `{SCENARIO}`; each measurement is a fresh subprocess; memory is the peak of the sampled "
        "sum of PSS over the process tree (both tools fork worker processes; PSS counts a page shared by "
        "several of them once). The case index was built once "
        f"before the run ({_f(results.get('index_build_s'), '{:.0f}')} s) and is not part of any timing.",
        "",
        "## Targets",
        "",
        "| target | measured | verdict | note |",
        "|---|---|---|---|",
    ]
    for t in results.get("targets", []):
        lines.append(f"| {t['target']} | {t['measured']} | **{t['verdict']}** | {t['note']} |")

    def fl(xs: Any, fmt: str = "{:.1f}") -> str:
        if not xs:
            return "n/a"
        return " / ".join(fmt.format(x) for x in xs if x is not None)

    lines += [
        "",
        "## Cold load + report, side by side",
        "",
        f"Each size: advisor-chat (`load_profile` with an empty cache, then `run_report`, in a fresh "
        f"process) and msprof-analyze (`cluster -d COPY -m all`) run alternately (ABBA: ours, theirs, theirs, ours), each on a fresh "
        f"copy of the folder made just before its run (both start from just-written files in the "
        f"page cache; msprof-analyze writes into its folder), {results.get('repeats', 2)} pairs; values are listed per run (pair 1 / pair 2 ...). "
        "Wall = subprocess wall time, process start included; CPU = user + system of the process tree; "
        "ratio = msprof-analyze wall / advisor-chat wall of the same pair.",
        "",
        "| ranks | export | size MB | ours wall s | ours CPU s | ours load s / report s (in process) | ours peak MB | msprof-analyze wall s | msprof peak MB | ratio per pair | heavy ranks read (kernels, trace) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        s = row.get("summary", {})
        if row.get("error"):
            lines.append(f"| {row['ranks']} | {row['export']} | {row['error'][:120]} |" + " |" * 8)
            continue
        lr = " / ".join(
            f"{a:.1f}+{b:.1f}"
            for a, b in zip(s.get("cold_load_s", []), s.get("report_s", []), strict=True)
        )
        hr = s.get("heavy_ranks") or (None, None)
        lines.append(
            f"| {row['ranks']} | {row['export']} | {_f(row.get('size_mb'), '{:.0f}')} | "
            f"{fl(s.get('cold_wall_s'))} | {fl(s.get('cold_cpu_s'))} | {lr or 'n/a'} | "
            f"{fl(s.get('cold_peak_mb'), '{:.0f}')} | "
            f"{fl(s.get('msprof_s'))}{'' if s.get('msprof_ok', True) else ' (failed/timeout)'} | "
            f"{fl(s.get('msprof_peak_mb'), '{:.0f}')} | {fl(s.get('speedups'), '{:.1f}x')} | "
            f"{_f(hr[0], '{:.0f}')}, {_f(hr[1], '{:.0f}')} |"
        )
    lines += [
        "",
        "## Parse floor, cached reload and answers",
        "",
        "Parse floor (same run, one process; the page cache as the run left it, so a large folder may be "
        "read from disk: see 'read all bytes'): read every byte of the folder; "
        "`orjson.loads` of every JSON file (trace_view.json included); one Arrow parse of all "
        "kernel_details.csv joined (one header). Cached reload = `load_profile` of the same folder "
        "with the cache written by the cold run, in process, timed twice (the first load of two fresh "
        "processes: the cached row's, then the answers row's). Answers: the first "
        "`Advisor(profile).ask(...)` after the load, then further questions on fresh advisors.",
        "",
        "| ranks | export | files | read all bytes s | orjson all JSON s (CPU) | Arrow all kernel CSVs s (CPU) | kernel rows | cached reload s | cached peak MB | first answer ms | later answers p50 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        s = row.get("summary", {})
        f0 = s.get("floor") or {}
        lines.append(
            f"| {row['ranks']} | {row['export']} | {f0.get('files', 'n/a')} | {_f(f0.get('read_s'))} | "
            f"{_f(f0.get('json_s'))} ({_f(f0.get('json_cpu_s'))}) | {_f(f0.get('arrow_s'))} "
            f"({_f(f0.get('arrow_cpu_s'))}) | {f0.get('kernel_rows', 'n/a')} | "
            f"{fl(s.get('cached_loads_s'), '{:.2f}')} | {_f(s.get('cached_peak_mb'), '{:.0f}')} | "
            f"{_f(s.get('answer_first_ms'), '{:.0f}')} | {_f(s.get('answer_rest_p50_ms'), '{:.0f}')} |"
        )
    lines += [
        "",
        "## The CLI, as a user runs it",
        "",
        "`advisor-chat report PATH` with an empty cache (the folder's files in the page cache, as "
        "in the pairs above), then again (cached), then `advisor-chat ask PATH "
        f'"{QUESTIONS[0]}"` on the cached profile, and `advisor-chat --help`; wall time of the '
        "whole command (Python start, imports, rendering included; no TTY: progress as plain lines "
        "on stderr). The cold report is one run with the memory sampler; the cached report, `ask` "
        "and `--help` are the median of 3 runs without it (the sampler's own CPU, on two cores, "
        "lands in a one-second command), the sampled run's time in brackets.",
        "",
        "| ranks | export | report cold s | report cached s | ask (cached) s | --help s "
        "| report cold peak MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        s = row.get("summary", {})
        lines.append(
            f"| {row['ranks']} | {row['export']} | {_f(s.get('cli_report_cold_s'))} | "
            f"{_f(s.get('cli_report_cached_s'))} ({_f(s.get('cli_report_cached_sampled_s'))}) | "
            f"{_f(s.get('cli_ask_cached_s'))} ({_f(s.get('cli_ask_cached_sampled_s'))}) | "
            f"{_f(s.get('cli_help_s'))} | {_f(s.get('cli_report_cold_peak_mb'), '{:.0f}')} |"
        )
    for row in results["rows"]:
        ms = [
            ("floor", row.get("floor")),
            ("cached", row.get("cached")),
            ("answers", row.get("answers")),
            ("cli_report_cold", row.get("cli_report_cold")),
            ("cli_report_cached", row.get("cli_report_cached")),
            ("cli_ask_cached", row.get("cli_ask_cached")),
        ]
        for i, p in enumerate(row.get("pairs", [])):
            ms += [(f"pair {i + 1} ours", p.get("ours")), (f"pair {i + 1} msprof", p.get("msprof"))]
        for k, mm in ms:
            if mm and (mm.get("rc") != 0 or mm.get("timed_out")):
                lines.append(
                    f"\n- {row['ranks']} ranks {row['export']} `{k}` rc={mm.get('rc')} timed_out={mm.get('timed_out')}: "
                    f"`{mm.get('stderr_tail', '')[-300:].strip()}`"
                )
    if not results["trace"]:
        if results.get("notes"):
            lines += ["", "## Notes", ""] + [f"- {n}" for n in results["notes"]]
        return "\n".join(lines) + "\n"
    lines += [
        "",
        "## trace_view.json streaming",
        "",
        f"Source: {results.get('trace_source', '?')}, tiled with shifted timestamps and flow ids. Reader: "
        "`advisor_chat.ingest.trace.read_host_dispatch` (one process, one core).",
        "",
        "| file MB | events | seconds | MB/s | peak MB | host_dispatch rows |",
        "|---|---|---|---|---|---|",
    ]
    for t in results["trace"]:
        inner = t.get("inner", {})
        lines.append(
            f"| {t['mb']:.0f} | {t.get('events', 'n/a')} | {_f(inner.get('seconds'))} | {_f(t.get('mbps'), '{:.0f}')} | "
            f"{t['peak_mb']:.0f} | {inner.get('rows', 'n/a')} |"
        )
    if results.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in results["notes"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "_worker":
        mode, rest = argv[1], argv[2:]
        fn = {
            "generate": lambda: worker_generate(rest[0], int(rest[1]), rest[2]),
            "load_report": lambda: worker_load_report(rest[0], rest[1]),
            "answer": lambda: worker_answer(rest[0], rest[1], int(rest[2])),
            "answer_cold": lambda: worker_answer_cold(
                rest[0], rest[1], int(rest[2]), rest[3] == "1"
            ),
            "index": lambda: worker_index(rest[0]),
            "floor": lambda: worker_floor(rest[0]),
            "trace": lambda: worker_trace(rest[0]),
        }[mode]
        from advisor_chat.offline import ensure_offline_env

        ensure_offline_env()
        print(json.dumps(fn()))
        return 0

    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="16 and 256 ranks, 64 MB and 16 MB traces")
    ap.add_argument(
        "--sizes", default=None, help="comma-separated rank counts (default 256,1024,4096)"
    )
    ap.add_argument("--exports", default="text", help="text, db or both, for --sizes")
    ap.add_argument(
        "--db-sizes", default=None, help="rank counts of the DB export as well (default 1024)"
    )
    ap.add_argument("--repeats", type=int, default=2, help="alternating pairs per size")
    ap.add_argument("--trace-mb", default=None, help="trace sizes in MB (default none)")
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "advisor-bench"))
    ap.add_argument("--out", default=str(REPO / "docs" / "BENCHMARKS.md"))
    ap.add_argument(
        "--home",
        default=None,
        help="ADVISOR_HOME for the measured runs (default WORKDIR/home); its parse cache is emptied "
        "before each cold load, its case index is reused",
    )
    ap.add_argument("--json", default=None, help="raw results (default: WORKDIR/bench.json)")
    ap.add_argument(
        "--partial",
        default=None,
        help="write the results so far here before each size (render it with --render)",
    )
    ap.add_argument("--no-msprof", action="store_true", help="skip msprof-analyze")
    ap.add_argument("--timeout", type=float, default=3600.0, help="per measurement, seconds")
    ap.add_argument("--msprof-timeout", type=float, default=5400.0)
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument(
        "--note", action="append", default=[], help="a note for the report (repeatable)"
    )
    ap.add_argument("--render", default=None, help="only re-render --out from a saved bench.json")
    ap.add_argument(
        "--cleanup", action="store_true", help="delete generated folders and traces after use"
    )
    args = ap.parse_args(argv)
    args.command = "python tools/bench.py " + " ".join(argv) if argv else "python tools/bench.py"
    if args.sizes is None:
        args.sizes = "16,256" if args.quick else "256,1024,4096"
    if args.db_sizes is None:
        args.db_sizes = "" if args.quick else "1024"
    if args.trace_mb is None:
        args.trace_mb = "64,16" if args.quick else ""
    args.sizes = [int(x) for x in str(args.sizes).split(",") if x]
    args.db_sizes = [int(x) for x in str(args.db_sizes).split(",") if x]
    args.exports = [x for x in str(args.exports).split(",") if x]
    args.trace_mb = [float(x) for x in str(args.trace_mb).split(",") if x]

    if args.render:
        results = json.loads(Path(args.render).read_text(encoding="utf-8"))
        results["notes"] = list(args.note) or results.get("notes", [])
        summarize(results)
        Path(args.out).write_text(to_markdown(results), encoding="utf-8")
        log(f"wrote {args.out}")
        return 0
    t0 = time.time()
    results = run(args)
    results["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0))
    results["duration_s"] = time.time() - t0
    results["notes"] = list(args.note)
    summarize(results)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(to_markdown(results), encoding="utf-8")
    jpath = Path(args.json) if args.json else Path(args.workdir) / "bench.json"
    jpath.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    log(f"wrote {out} and {jpath}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
