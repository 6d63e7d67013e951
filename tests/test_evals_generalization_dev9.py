"""The seventh development set of fault kinds (scenarios_dev9.py) and the mechanisms it exposed.

- The planted fault is in the written files (read with csv / json, independently of ingest).
- The diagnosis' evidence on those profiles, checked against the files and the answer keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median
from typing import Any

from _dev_files import kernel_rows, rank_dirs, trace


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _gaps_us(rows: list[dict[str, str]]) -> list[float]:
    """Device idle before each compute kernel of a step (start − previous end), µs."""
    out = []
    prev = None
    for x in sorted(rows, key=lambda x: (int(x["Step Id"]), float(x["Start Time(us)"]))):
        s = float(x["Start Time(us)"])
        if prev is not None and prev[0] == x["Step Id"]:
            out.append(s - prev[1])
        prev = (x["Step Id"], s + float(x["Duration(us)"]))
    return out


# ---------------------------------------------------------------- profiler-overhead
def test_profiler_overhead_is_in_the_files(scenario) -> None:
    root = scenario("profiler-overhead")
    key = _key(root)
    for r, d in rank_dirs(root).items():
        info = json.loads((d / f"profiler_info_{r}.json").read_text())
        assert info["config"]["common_config"]["with_stack"] is True
        assert info["config"]["experimental_config"]["_profiler_level"] == "Level2"
    rows = kernel_rows(next(iter(rank_dirs(root).values())))
    want = key["expected_numbers"]["device_gap_us_between_kernels_median"]
    assert abs(median(_gaps_us(rows)) - want) <= 0.15 * want


# ---------------------------------------------------------------- item-sync-every-step
def test_item_syncs_are_in_the_trace(scenario) -> None:
    root = scenario("item-sync-every-step")
    key = _key(root)
    n_steps = 4
    for d in list(rank_dirs(root).values())[:3]:
        ev = trace(d)
        syncs = [e for e in ev if e.get("name") == "AscendCL@aclrtSynchronizeStream"]
        items = [e for e in ev if e.get("name") == "aten::item"]
        assert len(syncs) == len(items) == key["expected_numbers"]["syncs_per_step"] * n_steps
        # the device idles after each of them: the kernel after the call starts late
        rows = sorted(kernel_rows(d), key=lambda x: float(x["Start Time(us)"]))
        starts = [float(x["Start Time(us)"]) for x in rows]
        ends = [s + float(x["Duration(us)"]) for s, x in zip(starts, rows, strict=True)]
        small = key["expected_numbers"]["idle_after_grad_norm_item_us_median"]
        for e in syncs:
            done = float(e["ts"]) + float(e["dur"])
            j = next(i for i, s in enumerate(starts) if s > done)
            assert starts[j] - ends[j - 1] >= 0.8 * small
