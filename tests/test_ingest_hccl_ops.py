"""hccl_ops: each HCCL operator's data type, element count and algorithm (trace_view.json / DB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.config import load_settings
from advisor_chat.ingest import load_profile

BYTES = {"FP32": 4, "FP16": 2, "BFP16": 2, "INT8": 1, "INT32": 4}


def _events(root: Path) -> dict[int, list[tuple[str, str, float]]]:
    """Per rank folder index: (name, data_type, count) of the trace's hcom_* events (json)."""
    out = {}
    for i, f in enumerate(sorted(root.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"))):
        doc = json.loads(f.read_text())
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        out[i] = sorted(
            (e["name"], e["args"]["data_type"], float(e["args"]["count"]))
            for e in events
            if str(e.get("name", "")).startswith("hcom_") and "count" in e.get("args", {})
        )
    return out


def test_text_export_rows_are_the_trace_events(real_samples: Path, tmp_path: Path) -> None:
    root = real_samples / "pt-text-level1-2rank"
    p = load_profile(root, settings=load_settings(home=tmp_path))
    assert p.has("hccl_ops")
    t = p.hccl_ops_for(p.ranks)
    expected = _events(root)
    assert expected[0]  # the sample has HCCL operator events
    for i, rank in enumerate(p.ranks):
        rows = t[t["rank"] == rank]
        got = sorted(zip(rows["op_name"], rows["data_type"], rows["count"], strict=True))
        assert got == expected[i]
        assert rows["size_mb"].tolist() == pytest.approx(
            [c * BYTES[d] / 1e6 for c, d in zip(rows["count"], rows["data_type"], strict=True)]
        )
    assert "trace_view.json" in p.cite("hccl_ops")


def test_db_export_gives_the_same_operators_as_the_text_export(
    real_samples: Path, tmp_path: Path
) -> None:
    # the two real samples are one job exported both ways: the same data types and counts per rank
    text = load_profile(
        real_samples / "pt-text-level1-2rank", settings=load_settings(home=tmp_path)
    )
    db = load_profile(real_samples / "pt-db-level1-2rank", settings=load_settings(home=tmp_path))
    assert db.has("hccl_ops") and ".db" in db.cite("hccl_ops")
    for rank in text.ranks:
        a, b = text.hccl_ops_for([rank]), db.hccl_ops_for([rank])
        assert len(a) == len(b) > 0
        assert list(zip(a["data_type"], a["count"], a["alg_type"], strict=True)) == list(
            zip(b["data_type"], b["count"], b["alg_type"], strict=True)
        )


def test_cached_second_load_reads_the_same_rows(real_samples: Path, tmp_path: Path) -> None:
    import pandas as pd

    root = real_samples / "pt-text-level1-2rank"
    first = load_profile(root, settings=load_settings(home=tmp_path)).hccl_ops_for([0, 1])
    from advisor_chat.ingest import loader

    loader.wait_cache_writes()
    second = load_profile(root, settings=load_settings(home=tmp_path))
    assert second.cache_hit
    pd.testing.assert_frame_equal(second.hccl_ops_for([0, 1]), first, check_dtype=False)


def test_communication_instances_carry_the_tensor(real_samples: Path, tmp_path: Path) -> None:
    import statistics

    from advisor_chat.analyzers.communication import CommunicationParams, communication

    root = real_samples / "pt-text-level1-2rank"
    p = load_profile(root, settings=load_settings(home=tmp_path))
    t = communication(p, CommunicationParams()).tables["instances"]
    row = t[t["op_type"] == "allreduce"].iloc[0]
    # independently: rank 0's (the group's first rank) hcom_allReduce_ events in its trace
    ev = [e for e in _events(root)[0] if e[0].startswith("hcom_allReduce")]
    ops = p.get("comm_ops")
    recorded = set(ops.loc[ops["rank"] == 0, "op_name"].astype(str))
    sizes = [c * BYTES[d] / 1e6 for n, d, c in ev if n in recorded]
    assert sizes and row["data_type"] == "FP32"
    assert row["tensor_mb_median"] == pytest.approx(statistics.median(sizes))


def test_instance_mb_counts_sdma_once(real_samples: Path, tmp_path: Path) -> None:
    """SDMA is the sum of HCCS, PCIE and SIO in communication.json: MB moved = SDMA + RDMA."""
    import statistics

    from advisor_chat.analyzers.communication import CommunicationParams, communication

    root = real_samples / "pt-text-level1-2rank"
    sizes = []
    for f in sorted(root.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json")):
        doc = json.loads(f.read_text())
        for step in doc.values():
            for name, op in step["collective"].items():
                if not name.startswith("hcom_allReduce"):
                    continue
                bw = op["Communication Bandwidth Info"]
                assert bw["SDMA"]["Transit Size(MB)"] == pytest.approx(
                    sum(bw[t]["Transit Size(MB)"] for t in ("HCCS", "PCIE", "SIO") if t in bw)
                )
                sizes.append(bw["SDMA"]["Transit Size(MB)"] + bw["RDMA"]["Transit Size(MB)"])
    p = load_profile(root, settings=load_settings(home=tmp_path))
    t = communication(p, CommunicationParams()).tables["instances"]
    row = t[t["op_type"] == "allreduce"].iloc[0]
    assert sizes and row["transit_size_mb_median"] == pytest.approx(statistics.median(sizes))
