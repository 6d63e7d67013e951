#!/usr/bin/env python
"""Throughput of the light batch reader per worker, and what the client does with its output.

What a Dask worker runs (``advisor_chat.ingest.loader.read_light_batch``) is timed here in one
process, in CPU seconds (robust on a shared machine), on a generated folder; also the pickled size
of the batches (what travels to the client), the client's assembly, and the CPU cost per rank of
the heavy files read later (kernel_details.csv with Arrow, trace_view.json streamed).

Usage::

    .venv/bin/python tools/light_throughput.py /tmp/advisor-bench/seed-rank12-1024-text

Prints one JSON line.
"""

from __future__ import annotations

import json
import pickle
import resource
import sys
import time

from advisor_chat.ingest.loader import assemble_profile, batch_paths, plan_ingest, read_light_batch


def main(root: str) -> dict[str, float]:
    plan = plan_ingest(root)
    paths = [str(d) for d in plan.rank_dirs]
    out: dict[str, float] = {"ranks": float(len(paths))}
    c0, t0 = time.process_time(), time.perf_counter()
    batches = [read_light_batch(b) for b in batch_paths(paths, 1, 128)]
    out["read_cpu_s"] = time.process_time() - c0
    out["read_wall_s"] = time.perf_counter() - t0
    out["read_cpu_ms_per_rank"] = out["read_cpu_s"] / len(paths) * 1e3
    out["pickled_kb_per_rank"] = (
        sum(len(pickle.dumps(b, protocol=5)) for b in batches) / len(paths) / 1e3
    )
    c0 = time.process_time()
    prof = assemble_profile(
        plan, [u for b in batches for u in b.units], batch_tables=[b.tables for b in batches]
    )
    out["assemble_cpu_s"] = time.process_time() - c0
    out["light_tables_kb_per_rank"] = (
        sum(int(df.memory_usage(deep=True).sum()) for df in prof.tables.values()) / len(paths) / 1e3
    )
    c0 = time.process_time()
    prof.kernels_for(prof.ranks[:64])
    out["kernels_cpu_ms_per_rank"] = (time.process_time() - c0) / 64 * 1e3
    c0 = time.process_time()
    prof.host_dispatch_for(prof.ranks[64:72])
    out["trace_cpu_ms_per_rank"] = (time.process_time() - c0) / 8 * 1e3
    out["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


if __name__ == "__main__":
    print(json.dumps({k: round(v, 3) for k, v in main(sys.argv[1]).items()}))
