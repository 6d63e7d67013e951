"""The DB export read lazily (issue 13): ``kernels`` / ``host_dispatch`` of
``ascend_pytorch_profiler_{rank}.db`` are read per rank on first use, like the text export's
kernel_details.csv / trace_view.json.

Expected numbers come from SQL run here on the same files (row counts and duration sums of the CANN
tables), not from the reader under test; lazy results are also compared with the eager read.
"""

from __future__ import annotations

import shutil
import sqlite3
import stat
from pathlib import Path

import pandas as pd
import pytest

from advisor_chat.ingest import db as dbr
from advisor_chat.ingest.rankdir import read_rank_dir

REAL_DB = "pt-db-level1-2rank"


def _db_files(root: Path) -> dict[int, Path]:
    out = {}
    for p in root.rglob("ascend_pytorch_profiler_*.db"):
        out[int(p.stem.rsplit("_", 1)[1])] = p
    return dict(sorted(out.items()))


def _sql(path: Path, query: str) -> tuple:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(query).fetchone()
    finally:
        con.close()


def _expected_kernels(path: Path) -> tuple[int, float]:
    """(rows, sum of durations in µs) of TASK ⨝ COMPUTE_TASK_INFO plus COMMUNICATION_OP."""
    n1, d1 = _sql(
        path,
        "SELECT COUNT(*), TOTAL(t.endNs - t.startNs) FROM TASK t "
        "JOIN COMPUTE_TASK_INFO c ON t.globalTaskId = c.globalTaskId",
    )
    n2, d2 = _sql(path, "SELECT COUNT(*), TOTAL(endNs - startNs) FROM COMMUNICATION_OP")
    return n1 + n2, (d1 + d2) / 1000.0


def _expected_dispatch(path: Path) -> int:
    """CANN_API rows joined to their TASK, HCCL-internal tasks left out, plus the host's
    blocking calls: synchronizes and aclrtMemcpy (which launch no task)."""
    launches = _sql(
        path,
        "SELECT COUNT(*) FROM CANN_API a JOIN TASK t ON a.connectionId = t.connectionId "
        "WHERE t.globalTaskId NOT IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)",
    )[0]
    syncs = _sql(
        path,
        "SELECT COUNT(*) FROM CANN_API a JOIN STRING_IDS s ON s.id = a.name "
        "WHERE (s.value LIKE '%Synchronize%' OR s.value = 'aclrtMemcpy') "
        "AND a.connectionId NOT IN (SELECT connectionId FROM TASK)",
    )[0]
    return launches + syncs


def _load(path: Path, home: Path, **kw):
    from advisor_chat.config import load_settings
    from advisor_chat.ingest import load_profile

    return load_profile(path, settings=load_settings(home=home), progress=False, **kw)


def _writable_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return dst


def test_light_read_lists_the_db_and_reads_no_kernel(real_samples: Path) -> None:
    folder = next((real_samples / REAL_DB).glob("rank0_*"))
    db = _db_files(folder)[0]
    light = read_rank_dir(folder, heavy=False)
    full = read_rank_dir(folder, heavy=True)
    assert "kernels" not in light.tables and "host_dispatch" not in light.tables
    assert light.meta["heavy_files"] == dict.fromkeys(
        ("kernels", "host_dispatch", "aicore_freq", "hccl_ops"), str(db)
    )
    assert "heavy_files" not in full.meta
    assert len(full.tables["kernels"]) == _expected_kernels(db)[0]
    # memory stays light (as memory_record.csv is): every MEMORY_RECORD row, same as the eager read
    assert len(light.tables["memory"]) == _sql(db, "SELECT COUNT(*) FROM MEMORY_RECORD")[0]
    pd.testing.assert_frame_equal(light.tables["memory"], full.tables["memory"])
    # the cheap meta equals the eager read's
    for key in ("schema_version", "db_rank_id", "device_id", "collection_end_ns", "device_type"):
        assert light.meta.get(key) == full.meta.get(key), key
    assert light.meta["device_id"] == _sql(db, "SELECT deviceId FROM RANK_DEVICE_MAP")[0]
    assert light.groups == full.groups


def test_read_profiler_db_reads_only_the_parts_asked(real_samples: Path) -> None:
    db = _db_files(real_samples / REAL_DB)[1]
    only_k = dbr.read_profiler_db(db, 1, tables=("kernels",))
    assert "kernels" in only_k and "host_dispatch" not in only_k and "memory" not in only_k
    assert "meta" not in only_k
    n, total_us = _expected_kernels(db)
    assert len(only_k["kernels"]) == n
    assert only_k["kernels"]["duration_us"].sum() == pytest.approx(total_us)
    assert only_k["schema_version"] == dbr.read_profiler_db(db, 1)["meta"]["schema_version"]
    only_h = dbr.read_profiler_db(db, 1, tables=("host_dispatch",))
    assert set(only_h) & {"kernels", "memory", "meta"} == set()
    assert len(only_h["host_dispatch"]) == _expected_dispatch(db)
    everything = dbr.read_profiler_db(db, 1)
    pd.testing.assert_frame_equal(only_k["kernels"], everything["kernels"])
    pd.testing.assert_frame_equal(only_h["host_dispatch"], everything["host_dispatch"])
    assert everything["heavy"] == ["kernels", "host_dispatch", "aicore_freq", "hccl_ops"]


def test_lazy_db_load_reads_only_the_ranks_asked(real_samples: Path, tmp_path: Path) -> None:
    root = real_samples / REAL_DB
    dbs = _db_files(root)
    p = _load(root, tmp_path / "home", use_cache=False)
    assert p.heavy is not None and p.heavy.pending("kernels") and p.heavy.pending("host_dispatch")
    assert sorted(p.heavy.available("kernels")) == sorted(dbs)
    assert {s.export for s in p.sources["kernels"]} == {"db"}
    k1 = p.kernels_for([1])
    assert p.stats["kernels_ranks_read"] == 1 and p.heavy.pending("kernels")
    n, total_us = _expected_kernels(dbs[1])
    assert len(k1) == n and set(k1["rank"]) == {1}
    assert k1["duration_us"].sum() == pytest.approx(total_us)
    h0 = p.host_dispatch_for([0])
    assert len(h0) == _expected_dispatch(dbs[0]) and set(h0["rank"]) == {0}
    # the whole tables equal the eager read (same rows, same order of ranks)
    eager = _load(root, tmp_path / "home", use_cache=False)
    for name in ("kernels", "host_dispatch"):
        got = p.get(name)
        want = pd.concat(
            [
                read_rank_dir(d.parent.parent, heavy=True).tables[name]
                for d in sorted(dbs.values(), key=lambda x: str(x))
            ],
            ignore_index=True,
        )
        assert len(got) == len(want) == len(eager.get(name))
        assert got["duration_us" if name == "kernels" else "device_duration_us"].sum() == (
            pytest.approx(want["duration_us" if name == "kernels" else "device_duration_us"].sum())
        )
    assert not p.heavy.pending("kernels")
    srcs = [s for s in p.sources["kernels"] if s.rows]
    assert sorted(s.rank for s in srcs) == sorted(dbs)
    assert all(s.export == "db" and s.path.endswith(".db") and s.version for s in srcs)


def test_lazy_db_parts_are_cached(real_samples: Path, tmp_path: Path) -> None:
    from advisor_chat.ingest.loader import PARSE_STATS, wait_cache_writes

    root = real_samples / REAL_DB
    home = tmp_path / "home"
    first = _load(root, home, cache_write="now")
    k0 = first.kernels_for([0])
    wait_cache_writes()
    before = PARSE_STATS.get("heavy_ranks_parsed", 0)
    again = _load(root, home)
    assert again.cache_hit
    k0b = again.kernels_for([0])
    assert PARSE_STATS.get("heavy_ranks_parsed", 0) == before  # from the Parquet part, not the DB
    assert len(k0b) == len(k0) == _expected_kernels(_db_files(root)[0])[0]
    assert k0b["duration_us"].sum() == pytest.approx(k0["duration_us"].sum())
    assert all(s.export == "db" for s in again.sources["kernels"])


def test_lazy_db_pool_equals_one_process(scenario, tmp_path: Path) -> None:
    root = scenario("seed-rank12", ranks=8, steps=2, export="db")
    one = _load(root, tmp_path / "h1", use_cache=False, workers=1).get("kernels")
    pooled = _load(root, tmp_path / "h2", use_cache=False, workers=2)
    got = pooled.get("kernels")  # 8 ranks at once with 2 workers: the pool path
    assert pooled.stats["kernels_ranks_read"] == 8
    expected = sum(_expected_kernels(p)[0] for p in _db_files(root).values())
    assert len(got) == len(one) == expected
    pd.testing.assert_frame_equal(got, one)


def test_truncated_db_is_left_out_at_load_naming_the_file(
    real_samples: Path, tmp_path: Path
) -> None:
    root = _writable_copy(real_samples / REAL_DB, tmp_path / "prof")
    db = _db_files(root)[1]
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    for heavy in (False, True):  # the DB is left out of that rank, with a warning naming it
        rd = read_rank_dir(db.parent.parent, heavy=heavy)
        (w,) = [w for w in rd.warnings if w.code == "file_skipped"]
        assert w.path == str(db) and "damaged SQLite database" in w.message
        assert "truncated" in w.message and "Left out" in w.message
    p = _load(root, tmp_path / "home", use_cache=False)
    assert any(w.code == "file_skipped" and w.path == str(db) for w in p.warnings)
    assert 0 in p.available_ranks("kernels") and 1 not in p.available_ranks("kernels")


def test_damaged_task_table_read_lazily_names_the_file(real_samples: Path, tmp_path: Path) -> None:
    """TASK damaged, the rest intact: the light read passes, the lazy read says what the eager says."""
    root = _writable_copy(real_samples / REAL_DB, tmp_path / "prof")
    db = _db_files(root)[1]
    page, task_root = _sql(
        db,
        "SELECT (SELECT page_size FROM pragma_page_size), rootpage "
        "FROM sqlite_master WHERE name = 'TASK'",
    )
    data = bytearray(db.read_bytes())
    data[(task_root - 1) * page : task_root * page] = b"\xa5" * page
    db.write_bytes(bytes(data))
    eager = [w for w in read_rank_dir(db.parent.parent, heavy=True).warnings if w.path == str(db)]
    assert len(eager) == 1 and eager[0].code == "file_skipped"
    p = _load(root, tmp_path / "home", use_cache=False)
    assert p.heavy is not None and p.heavy.pending("kernels")
    k = p.kernels_for([0, 1])  # the intact rank reads fine; rank 1's kernels are left out
    assert set(k["rank"]) == {0}
    (w,) = [w for w in p.warnings if w.code == "file_skipped"]
    assert w.ranks == (1,) and w.path == str(db)
    # the reader's message is the eager read's; then each says what is left out
    assert w.message.split(" Left out:")[0] == eager[0].message.split(" Left out:")[0]
    assert db.name in w.message and "damaged SQLite database" in w.message


def test_analysis_db_columns_match_sql(real_samples: Path, scenario) -> None:
    """analysis.db read as columns (no DataFrame per rank): sums equal SQL over the same file."""
    from advisor_chat.ingest.common import LARGE_PACKET_MB, step_from_key

    roots = [real_samples / REAL_DB, scenario("seed-rank12", ranks=4, steps=2, export="db")]
    small = " OR ".join(
        f"(transport_type = '{t}' AND package_size <= {mb})" for t, mb in LARGE_PACKET_MB.items()
    )
    checked = 0
    for path in (p for root in roots for p in sorted(root.rglob("analysis.db"))):
        got = dbr.read_analysis_db(path, 7)
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            bw = con.execute(
                "SELECT step, hccl_op_name, group_name, transport_type, SUM(count), "
                f"SUM(CASE WHEN {small} THEN count ELSE 0 END), MIN(bandwidth), COUNT(*) "
                "FROM CommAnalyzerBandwidth WHERE hccl_op_name NOT LIKE 'Total%' "
                "GROUP BY 1, 2, 3, 4"
            ).fetchall()
            st = con.execute(
                "SELECT step, computing + communication_not_overlapped + free FROM StepTraceTime"
            ).fetchall()
            n_ops = con.execute(
                "SELECT COUNT(*) FROM CommAnalyzerTime WHERE hccl_op_name NOT LIKE 'Total%'"
            ).fetchone()[0]
            n_mx = con.execute(
                "SELECT COUNT(*) FROM CommAnalyzerMatrix WHERE hccl_op_name NOT LIKE 'Total%'"
            ).fetchone()[0]
        finally:
            con.close()
        b = got["comm_bandwidth"].set_index(["step", "op_name", "group", "transport"])
        assert len(b) == len(bw) and set(got["comm_bandwidth"]["rank"]) == {7}
        for step, op, group, tr, count, n_small, bw_min, _ in bw:
            row = b.loc[(step_from_key(step), op, str(group), tr)]
            assert row["packet_count"] == count and row["small_packet_count"] == n_small
            if bw_min is not None:  # one bandwidth per (op, transport), repeated per package size
                assert row["bandwidth_gbps"] == pytest.approx(bw_min)
        s = got["step_trace"].set_index("step")["step_us"]
        assert len(s) == len(st)
        assert s.to_dict() == pytest.approx({step_from_key(k): v for k, v in st})
        assert len(got["comm_ops"]) == n_ops and len(got["comm_matrix"]) == n_mx
        assert got["comm_ops"]["wait_ratio"].between(0, 1).all()
        checked += 1
    assert checked >= 6


def test_db_without_analysis_db_lazy_equals_eager(real_samples: Path, tmp_path: Path) -> None:
    """No analysis.db: no step trace or communication at load; kernels still come lazily."""
    from advisor_chat.reporting import run_report

    root = _writable_copy(real_samples / REAL_DB, tmp_path / "prof")
    for p in root.rglob("analysis.db"):
        p.unlink()
    dbs = _db_files(root)
    lazy = _load(root, tmp_path / "home", use_cache=False)
    assert lazy.tables.loaded("step_trace") is None and lazy.tables.loaded("comm_ops") is None
    assert lazy.heavy is not None and lazy.heavy.pending("kernels")
    eager = _load(root, tmp_path / "home", use_cache=False)
    for name in ("kernels", "host_dispatch"):
        eager.get(name)
    assert eager.heavy is not None and not eager.heavy.pending("kernels")
    assert len(eager.get("kernels")) == sum(_expected_kernels(p)[0] for p in dbs.values())
    codes = sorted({w.code for w in eager.warnings})
    a = run_report(eager, strict=True)
    b = run_report(lazy, strict=True)
    assert a.findings and [(f.id, f.summary) for f in a.findings] == [
        (f.id, f.summary) for f in b.findings
    ]
    assert sorted({w.code for w in lazy.warnings}) == codes
    assert lazy.steps == eager.steps


def test_a_db_with_rows_in_its_wal_is_read_whole_without_writing_beside_it(tmp_path) -> None:
    """Rows still in the ``-wal`` file are read (``immutable=1`` alone would miss them); nothing
    is written into the folder that holds the DB."""
    import sqlite3

    from advisor_chat.ingest.db import connect

    db = tmp_path / "prof" / "x.db"
    db.parent.mkdir()
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE t (v INTEGER)")
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("INSERT INTO t VALUES (2)")  # stays in the WAL: the writer is still open
    con.commit()
    before = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in db.parent.iterdir())
    assert (db.parent / "x.db-wal").stat().st_size > 0
    ro = connect(db)
    assert [r[0] for r in ro.execute("SELECT v FROM t ORDER BY v")] == [1, 2]
    ro.close()
    after = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in db.parent.iterdir())
    assert after == before
    con.close()
