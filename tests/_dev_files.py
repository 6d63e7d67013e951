"""Readers of the files a development scenario writes, independent of ingest (csv / json only).

Used by ``test_evals_generalization_dev2.py`` and ``_dev3.py`` to check that the planted fault is in
the written files, so that the tests do not trust the parser they test.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

PO = "ASCEND_PROFILER_OUTPUT"


def rank_dirs(root: Path) -> dict[int, Path]:
    """``{rank: *_ascend_pt folder}`` from each folder's ``profiler_info_{rank}.json``."""
    out = {}
    for info in root.glob("*_ascend_pt/profiler_info_*.json"):
        out[int(info.stem.rsplit("_", 1)[1])] = info.parent
    return out


def read_csv(d: Path, name: str) -> list[dict[str, str]]:
    """Rows of ``ASCEND_PROFILER_OUTPUT/<name>`` as dicts (header names as written)."""
    return list(csv.DictReader(io.StringIO((d / PO / name).read_bytes().decode(), newline="")))


def trace(d: Path) -> list[dict[str, Any]]:
    """The events of ``trace_view.json``."""
    return json.loads((d / PO / "trace_view.json").read_text())


def flows_us(d: Path) -> list[float]:
    """HostToDevice flow lengths (launch start → kernel start) of compute kernels, µs."""
    ev = trace(d)
    s = {
        e["id"]: float(e["ts"]) for e in ev if e.get("ph") == "s" and e.get("cat") == "HostToDevice"
    }
    f = {
        e["id"]: float(e["ts"]) for e in ev if e.get("ph") == "f" and e.get("cat") == "HostToDevice"
    }
    return [f[i] - s[i] for i in s if i in f and int(i) < 10**9]


def kernel_rows(d: Path) -> list[dict[str, str]]:
    """Compute kernels of ``kernel_details.csv`` (HCCL tasks left out)."""
    return [x for x in read_csv(d, "kernel_details.csv") if x["Accelerator Core"] != "HCCL"]
