"""Layouts without a real sample (msprof PROF_*, MindSpore, cluster_analysis.db, mixes) and warnings.

Files are written in the formats of shared/reference/ascend-formats.md (§2.5, §3.1, §3.2).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from advisor_chat.ingest import inspect_profile, load_profile
from advisor_chat.ingest.common import double_hash

ST = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
    "Communication(Not Overlapped and Exclude Receive),Preparing\r\n"
)


def _rank(
    root: Path,
    rank: int,
    *,
    steps=(50,),
    info: dict | None = None,
    md: dict | None = None,
    suffix="pt",
) -> Path:
    d = root / f"node_{rank}_20250109093000000_ascend_{suffix}"
    out = d / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    rows = "".join(f"{s},100.0,50.0,10.0,60.0,{20.0 + rank},180.0,0,50.0,5.0\r\n" for s in steps)
    (out / "step_trace_time.csv").write_bytes((ST + rows).encode())
    (d / f"profiler_info_{rank}.json").write_text(json.dumps(info or {"rank_id": rank}))
    if md is not None:
        (d / "profiler_metadata.json").write_text(json.dumps(md))
    return d


def test_msprof_prof_folder(tmp_path: Path) -> None:
    prof = tmp_path / "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA"
    out = prof / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    (prof / "device_0").mkdir()
    (prof / "device_0" / "info.json.0").write_text(json.dumps({"rank_id": 2, "hostUid": "1"}))
    (out / "op_summary_20260605161708.csv").write_text(
        "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
        "Task Duration(us),Task Wait Time(us),Block Num,Mix Block Num,HF32 Eligible,Input Shapes\r\n"
        "0,4294967295,0,1756,main_kernel,main_kernel,dynamic,MIX_AIC,1780676244313289.000\t,87139.380,0,256,512,NO,N/A\r\n"
        '0,4294967295,1,1756,Conv2D1,Conv2D,static,AI_CORE,1780676244400429.000\t,10.5,2.0,16,0,NO,"""32,3,224,224"""\r\n'
    )
    (out / "op_statistic_20260605161708.csv").write_text(
        "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\r\n"
        "0,main_kernel,MIX_AIC,1,87139.38,87139.38,87139.38,87139.38,99.9\r\n"
    )
    (out / "communication_statistic_20260605161708.csv").write_text(
        "Device_id,OP Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\r\n"
        "0,hcom_allReduce_,4,1000.0,100.0,250.0,400.0,100.0\r\n"
    )
    p = load_profile(tmp_path, use_cache=False)
    assert p.layout == "msprof"
    assert p.ranks == [2]
    k = p.get("kernels")
    assert k["name"].tolist() == ["main_kernel", "Conv2D1"]
    assert k["block_dim"].tolist() == [256, 16]  # Block Num
    assert k["duration_us"].sum() == pytest.approx(87139.38 + 10.5)
    assert k["input_shapes"].iloc[1] == "32,3,224,224"
    ops = p.get("op_statistic")
    assert set(ops["core_type"]) == {"MIX_AIC", "COMMUNICATION"}
    assert ops["total_us"].sum() == pytest.approx(87139.38 + 1000.0)


def test_mindspore_folder(tmp_path: Path) -> None:
    _rank(tmp_path, 0, suffix="ms")
    _rank(tmp_path, 1, suffix="ms")
    p = load_profile(tmp_path, use_cache=False)
    assert p.layout == "ascend_ms"
    assert p.ranks == [0, 1]
    assert set(p.get("meta")["export_type"]) == {"mindspore"}
    assert p.get("step_trace")["free_us"].tolist() == [20.0, 21.0]


def _cluster_db(path: Path, step: str = "50") -> None:
    """A cluster_analysis.db of the 4 ranks of :func:`_rank` (step 50, Computing 100-103 µs: what
    msprof-analyze derives from them; Free 10*rank, unlike the rank files' 20+rank)."""
    con = sqlite3.connect(path)
    con.execute(
        'CREATE TABLE ClusterStepTraceTime (step TEXT, type TEXT, "index" TEXT, computing NUMERIC, '
        "communication_not_overlapped NUMERIC, overlapped NUMERIC, communication NUMERIC, free NUMERIC, "
        "stage NUMERIC, bubble NUMERIC, communication_not_overlapped_and_exclude_receive NUMERIC, "
        "preparing NUMERIC, dp_index NUMERIC, pp_index NUMERIC, tp_index NUMERIC)"
    )
    for r in range(4):
        con.execute(
            "INSERT INTO ClusterStepTraceTime VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                step,
                "rank",
                str(r),
                100.0 + r,
                50.0,
                5.0,
                55.0,
                10.0 * r,
                160.0,
                0,
                50.0,
                1.0,
                0,
                0,
                0,
            ),
        )
    for stage in ("(0,1)", "(2,3)"):
        con.execute(
            "INSERT INTO ClusterStepTraceTime VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (step, "stage", stage, 103.0, 50.0, 5.0, 55.0, 30.0, 160.0, 0, 50.0, 0, 0, 0, 0),
        )
    con.execute(
        "CREATE TABLE CommunicationGroupMapping (type TEXT, rank_set TEXT, group_name TEXT, group_id TEXT, pg_name TEXT)"
    )
    con.execute(
        "INSERT INTO CommunicationGroupMapping VALUES ('collective','(0,1,2,3)','123456','10.0.0.1%eth0_1','dp')"
    )
    con.commit()
    con.close()


def test_cluster_analysis_db(tmp_path: Path) -> None:
    out = tmp_path / "cluster_analysis_output"
    out.mkdir()
    _cluster_db(out / "cluster_analysis.db", step="7")
    p = load_profile(tmp_path, use_cache=False)
    assert p.layout == "cluster_output"
    assert p.ranks == [0, 1, 2, 3]
    assert p.steps == [7]
    assert p.get("step_trace").set_index("rank").loc[3, "free_us"] == 30.0
    stages = p.get("stage_trace")
    assert [list(x) for x in stages["stage_rank_list"]] == [[0, 1], [2, 3]]
    g = p.get("comm_groups").iloc[0]
    assert g["group_name"] == "dp" and list(g["ranks"]) == [0, 1, 2, 3]


def test_mixed_rank_folders_and_cluster_output(tmp_path: Path, real_samples: Path) -> None:
    for r in range(4):
        _rank(tmp_path, r)
    out = tmp_path / "cluster_analysis_output"
    out.mkdir()
    _cluster_db(out / "cluster_analysis.db")
    p = load_profile(tmp_path, use_cache=False)
    assert p.layout == "mixed"
    # per-rank data preferred: free = 20 + rank from step_trace_time.csv, not 10*rank from the DB
    assert p.get("step_trace").sort_values("rank")["free_us"].tolist() == [20.0, 21.0, 22.0, 23.0]
    assert all(s.path.endswith("step_trace_time.csv") for s in p.sources["step_trace"])
    # the cluster output is recorded and gives what rank folders cannot (stages)
    assert p.extra_sources and "cluster_analysis_output" in p.extra_sources[0]
    assert len(p.get("stage_trace")) == 2
    assert inspect_profile(p)["extra_sources"] == p.extra_sources
    assert not [w for w in p.warnings if w.code == "cluster_output_foreign"]


def test_cluster_output_of_another_run_is_left_out(tmp_path: Path) -> None:
    """The same rank folders beside a cluster output whose steps never meet theirs."""
    for r in range(4):
        _rank(tmp_path, r)
    out = tmp_path / "cluster_analysis_output"
    out.mkdir()
    _cluster_db(out / "cluster_analysis.db", step="7")
    p = load_profile(tmp_path, use_cache=False)
    w = [w for w in p.warnings if w.code == "cluster_output_foreign"]
    assert w and "cluster_analysis_output" in w[0].message and "[7]" in w[0].message
    assert p.get("stage_trace").empty  # its stages are not lent to these ranks
    assert p.get("step_trace").sort_values("rank")["free_us"].tolist() == [20.0, 21.0, 22.0, 23.0]


def test_parallel_groups_and_local_to_global_matrix(tmp_path: Path) -> None:
    comm_name = "10.174.216.241%enp189s0f1_55000_0_1738895506630464"
    h = double_hash(comm_name)
    md = {
        "distributed_args": {
            "tensor_model_parallel_size": 4,
            "pipeline_model_parallel_size": 1,
            "data_parallel_size": 2,
            "world_size": 8,
        },
        "parallel_group_info": {
            comm_name: {"group_name": "tp", "group_rank": 1, "global_ranks": [7, 5, 6, 4]},
        },
    }
    d = _rank(tmp_path, 5, md=md)
    link = {
        "Transport Type": "HCCS",
        "Transit Size(MB)": 10.0,
        "Transit Time(ms)": 0.5,
        "Bandwidth(GB/s)": 20.0,
        "Op Name": "hcom_allReduce__035_0_1",
    }
    matrix = {
        "step50": {
            "p2p": {},
            "collective": {
                f"allreduce-top1@{h}": {"1-2": link, "1-1": {**link, "Transport Type": "LOCAL"}}
            },
        }
    }
    (d / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").write_text(json.dumps(matrix))
    p = load_profile(tmp_path, use_cache=False)
    m = p.get("comm_matrix")
    # local ranks index the sorted global ranks [4, 5, 6, 7]
    assert sorted(zip(m["src_rank"], m["dst_rank"], strict=False)) == [(5, 5), (5, 6)]
    g = p.get("comm_groups").set_index("group").loc[h]
    assert g["group_name"] == "tp" and list(g["ranks"]) == [4, 5, 6, 7]
    meta = p.get("meta").iloc[0]
    assert meta["tp_size"] == 4 and meta["world_size"] == 8
    w = {w.code: w for w in p.warnings}
    assert w["missing_ranks"].ranks == (0, 1, 2, 3, 4, 6, 7)


def test_quality_warnings(tmp_path: Path) -> None:
    lvl = {"experimental_config": {"_profiler_level": "Level2"}}
    _rank(
        tmp_path,
        0,
        steps=(50, 51),
        info={"rank_id": 0, "cann_version": "8.0.RC2", "torch_npu_version": "2.1.0", "config": lvl},
    )
    _rank(
        tmp_path,
        1,
        steps=(50,),
        info={
            "rank_id": "1",
            "cann_version": "8.0.RC3",
            "torch_npu_version": "2.1.0",
            "config": lvl,
        },
    )
    _rank(
        tmp_path,
        3,
        steps=(50, 51),
        info={"rank_id": 3, "cann_version": "8.0.RC2", "torch_npu_version": "2.1.0", "config": lvl},
    )
    p = load_profile(tmp_path, use_cache=False)
    w = {w.code: w for w in p.warnings}
    assert w["missing_ranks"].ranks == (2,)
    assert w["missing_steps"].ranks == (1,)
    assert "8.0.RC2" in w["mixed_versions"].message and "8.0.RC3" in w["mixed_versions"].message
    assert w["profiler_level2"].ranks == (0, 1, 3)
    info = inspect_profile(p)
    assert info["versions"]["cann"] == {"8.0.RC2": [0, 3], "8.0.RC3": [1]}
    assert info["profiler_level"] == {"Level2": [0, 1, 3]}


def test_rank_from_db_file_name(tmp_path: Path, real_samples: Path) -> None:
    """A DB-export folder whose profiler_info was lost: rank comes from ascend_pytorch_profiler_{rank}.db."""
    src = real_samples / "pt-db-level1-2rank" / "rank1_ascend_pt"
    dst = tmp_path / "x_ascend_pt"
    shutil.copytree(src, dst)
    (dst / "profiler_info_1.json").unlink()
    p = load_profile(tmp_path, use_cache=False)
    assert p.ranks == [1]
    assert p.get("meta").iloc[0]["rank_origin"] == "DB file name"


def test_process_pool_and_progress_bar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for r in range(8):
        _rank(tmp_path, r)
    p = load_profile(tmp_path, use_cache=False, workers=2, progress=True)
    assert p.ranks == list(range(8))
    assert p.get("step_trace").sort_values("rank")["free_us"].tolist() == [
        20.0 + r for r in range(8)
    ]
    assert "reading ranks" in capsys.readouterr().err


def test_read_rank_dir_result_is_picklable(real_samples: Path) -> None:
    import pickle

    from advisor_chat.ingest import read_rank_dir

    rd = read_rank_dir(real_samples / "pt-db-level1-2rank" / "rank0_ascend_pt")
    back = pickle.loads(pickle.dumps(rd))
    assert back.rank == 0 and set(back.tables) == set(rd.tables)
    assert len(back.tables["kernels"]) == len(rd.tables["kernels"])


# ----------------------------------------------------------------------------- msprof DB export

#: CANN-schema tables of ``msprof_*.db`` as the reference (§1.15.1, schema 1.0.0) and the PyTorch DB
#: export write them; every name column holds a STRING_IDS id.
_MSPROF_DDL = {
    "STRING_IDS": "id INTEGER PRIMARY KEY, value TEXT",
    "TASK": "startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, "
    "globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER, "
    "streamId INTEGER, taskId INTEGER, modelId INTEGER",
    "COMPUTE_TASK_INFO": "name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockDim INTEGER, "
    "mixBlockDim INTEGER, taskType INTEGER, opType INTEGER, inputFormats INTEGER, "
    "inputDataTypes INTEGER, inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER, "
    "outputShapes INTEGER, attrInfo INTEGER, waitNs INTEGER",
    "COMMUNICATION_OP": "opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER, "
    "groupName INTEGER, opId INTEGER PRIMARY KEY, relay INTEGER, retry INTEGER, dataType INTEGER, "
    "algType INTEGER, count NUMERIC, opType INTEGER, waitNs INTEGER",
    "CANN_API": "startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER, "
    "connectionId INTEGER PRIMARY KEY, name INTEGER",
    "ENUM_API_TYPE": "id INTEGER PRIMARY KEY, name TEXT",
    "RANK_DEVICE_MAP": "rankId INTEGER, deviceId INTEGER",
    "NPU_INFO": "id INTEGER, name TEXT",
    "META_DATA": "name TEXT, value TEXT",
}

T0 = 1_736_410_576_000_000_000  # ns epoch


def _msprof_db(path: Path, *, db_rank: int = -1, tables: dict[str, str] | None = None) -> dict:
    """Write an msprof DB with known tasks; returns the expected canonical values (µs / ms)."""
    ddl = _MSPROF_DDL if tables is None else tables
    con = sqlite3.connect(path)
    for name, cols in ddl.items():
        con.execute(f"CREATE TABLE {name} ({cols})")
    strings: dict[str, int] = {}

    def sid(v: str) -> int:
        if v not in strings:
            strings[v] = len(strings) + 1
            con.execute("INSERT INTO STRING_IDS VALUES (?, ?)", (strings[v], v))
        return strings[v]

    us = 1000
    # compute tasks [0,10) and [5,20) µs; HCCL ops [15,30) allreduce and [40,50) receive
    compute = [
        ("MatMul_1", "MatMul", "AI_CORE", 0, 10, 7),
        ("Add_2", "Add", "AI_VECTOR_CORE", 5, 20, 0),
    ]
    group_raw = "90.91.105.46%enp189s0f0_60000_0_1736410538306028"
    comm = [("hcom_allReduce__306_0_1", 15, 30, 2), ("hcom_receive__306_1_1", 40, 50, 9)]
    if "TASK" in ddl:
        for gid, (name, op, core, s, e, wait) in enumerate(compute, start=1):
            con.execute(
                "INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (T0 + s * us, T0 + e * us, 0, 100 + gid, gid, 1, sid(core), 0, 2, gid, 0),
            )
            con.execute(
                "INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    sid(name),
                    gid,
                    8,
                    0,
                    sid(core),
                    sid(op),
                    sid("ND"),
                    sid("FLOAT"),
                    sid('"4,4"'),
                    sid("ND"),
                    sid("FLOAT"),
                    sid('"4,4"'),
                    sid(""),
                    wait * us,
                ),
            )
            con.execute(
                "INSERT INTO CANN_API VALUES (?,?,?,?,?,?)",
                (T0 + (s - 3) * us, T0 + (s - 2) * us, 5000, 7, 100 + gid, sid("launch")),
            )
        con.execute("INSERT INTO ENUM_API_TYPE VALUES (5000, 'runtime')")
    if "COMMUNICATION_OP" in ddl:
        for op_id, (name, s, e, wait) in enumerate(comm, start=1):
            con.execute(
                "INSERT INTO COMMUNICATION_OP VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    sid(name),
                    T0 + s * us,
                    T0 + e * us,
                    200 + op_id,
                    sid(group_raw),
                    op_id,
                    0,
                    0,
                    4,
                    sid("MESH-RING"),
                    1024,
                    sid(name.split("__")[0] + "_"),
                    wait * us,
                ),
            )
    if "RANK_DEVICE_MAP" in ddl:
        con.execute("INSERT INTO RANK_DEVICE_MAP VALUES (?, 0)", (db_rank,))
        con.execute("INSERT INTO NPU_INFO VALUES (0, 'Ascend910B')")
        con.execute("INSERT INTO META_DATA VALUES ('SCHEMA_VERSION', '1.0.0')")
    con.commit()
    con.close()
    return {
        "kernels": {"MatMul_1": (10.0, 7.0), "Add_2": (15.0, 0.0)},
        # union(compute)=20, union(comm)=25, union(all)=[0,30)+[40,50)=40, span 50
        "step": {
            "computing_us": 20.0,
            "communication_us": 25.0,
            "communication_not_overlapped_us": 20.0,
            "overlapped_us": 5.0,
            "free_us": 10.0,
            "bubble_us": 10.0,
            "step_us": 50.0,
            "stage_us": 40.0,
        },
        "comm": {
            "hcom_allReduce__306_0_1": (0.015, 0.002),
            "hcom_receive__306_1_1": (0.010, 0.009),
        },
        "group": double_hash(group_raw),
        "launch_delay_us": 3.0,
    }


def _prof(root: Path, name: str, info_rank: int | None) -> Path:
    d = root / name
    (d / "device_0").mkdir(parents=True)
    if info_rank is not None:
        (d / "device_0" / "info.json.0").write_text(
            json.dumps({"rank_id": info_rank, "hostUid": "1"})
        )
    return d


def test_msprof_db_export(tmp_path: Path) -> None:
    root = tmp_path / "job"
    p5 = _prof(root, "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA", 5)  # rank from info.json
    exp = _msprof_db(p5 / "msprof_20260605161709.db")
    p3 = _prof(root, "PROF_000002_20260605161708479_ABCDEFGHIJKLMNOP", None)  # rank from the DB
    _msprof_db(p3 / "msprof_20260605161710.db", db_rank=3)
    before = sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*"))
    prof = load_profile(root, use_cache=False)
    assert sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*")) == before  # read-only
    assert prof.ranks == [3, 5]
    assert prof.layout == "msprof"
    k = prof.get("kernels")
    for rank in (3, 5):
        kr = k[k["rank"] == rank].set_index("name")
        for name, (dur, wait) in exp["kernels"].items():
            assert kr.loc[name, "duration_us"] == pytest.approx(dur)
            assert kr.loc[name, "wait_us"] == pytest.approx(wait)
        assert kr.loc["MatMul_1", "input_shapes"] == "4,4"
        assert (kr.loc[list(exp["comm"]), "accelerator_core"] == "COMMUNICATION").all()
    st = prof.get("step_trace")
    assert len(st) == 2 and set(st["step"]) == {-1}
    for col, val in exp["step"].items():
        assert st[col].tolist() == pytest.approx([val, val]), col
    ops = prof.get("comm_ops").set_index(["rank", "op_name"])
    for name, (elapse, wait) in exp["comm"].items():
        assert ops.loc[(5, name), "elapse_ms"] == pytest.approx(elapse)
        assert ops.loc[(5, name), "wait_ms"] == pytest.approx(wait)
        assert ops.loc[(5, name), "group"] == exp["group"]
    assert ops.loc[(5, "hcom_receive__306_1_1"), "comm_kind"] == "p2p"
    hd = prof.get("host_dispatch")
    assert hd["launch_delay_us"].tolist() == pytest.approx([exp["launch_delay_us"]] * 4)
    info = inspect_profile(prof)
    for table in ("kernels", "step_trace", "comm_ops", "host_dispatch"):
        assert info["tables"][table]["files"] == 2
        assert set(info["tables"][table]["file_types"]) == {
            "msprof_20260605161709.db",
            "msprof_20260605161710.db",
        }
    assert not [w for w in prof.warnings if w.code in ("db_schema_unknown", "rank_id_mismatch")]


def test_msprof_db_unknown_schema_and_rank_mismatch(tmp_path: Path) -> None:
    root = tmp_path / "job"
    good = _prof(root, "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA", 1)
    _msprof_db(good / "msprof_20260605161709.db", db_rank=4)  # disagrees with info.json
    odd = _prof(root, "PROF_000002_20260605161708479_ABCDEFGHIJKLMNOP", 0)
    ddl = {k: v for k, v in _MSPROF_DDL.items() if k not in ("TASK", "COMPUTE_TASK_INFO")}
    _msprof_db(odd / "msprof_20260605161710.db", tables=ddl)
    prof = load_profile(root, use_cache=False)
    unknown = [w for w in prof.warnings if w.code == "db_schema_unknown"]
    assert len(unknown) == 1
    assert "msprof_20260605161710.db" in unknown[0].message
    assert "TASK" in unknown[0].message and "COMPUTE_TASK_INFO" in unknown[0].message
    mism = [w for w in prof.warnings if w.code == "rank_id_mismatch"]
    assert len(mism) == 1 and "rank 4" in mism[0].message and "rank 1" in mism[0].message
    # the odd DB still gave its communication ops (COMMUNICATION_OP is there)
    assert set(prof.get("comm_ops")["rank"]) == {0, 1}
    assert set(prof.get("kernels")["rank"]) == {0, 1}  # rank 0: only the HCCL rows


def test_msprof_db_damaged(tmp_path: Path) -> None:
    from advisor_chat.errors import InputError

    p = _prof(tmp_path / "job", "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA", 0)
    db = p / "msprof_20260605161709.db"
    _msprof_db(db)
    data = db.read_bytes()
    db.write_bytes(data[:100] + b"\xff" * (len(data) - 100))  # valid header, garbage body
    with pytest.raises(InputError, match="damaged SQLite database") as ei:
        load_profile(tmp_path / "job", use_cache=False)
    assert "msprof_20260605161709.db" in str(ei.value)


def test_msprof_db_with_communication_analyzer_db(tmp_path: Path) -> None:
    """``analyze/communication_analyzer.db`` (msprof --analyze=on) gives comm_ops with transit/sync
    times; the msprof DB still gives kernels and the step breakdown."""
    root = tmp_path / "job"
    p = _prof(root, "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA", 2)
    exp = _msprof_db(p / "msprof_20260605161709.db")
    (p / "analyze").mkdir()
    con = sqlite3.connect(p / "analyze" / "communication_analyzer.db")
    con.execute(
        "CREATE TABLE CommAnalyzerTime (hccl_op_name TEXT, group_name TEXT, start_timestamp NUMERIC, "
        "elapse_time NUMERIC, transit_time NUMERIC, wait_time NUMERIC, synchronization_time NUMERIC, "
        "idle_time NUMERIC, step TEXT, type TEXT)"
    )
    # elapse 0.015 ms = transit 0.010 + wait 0.004 (+ idle 0.001); sync 0.003 inside wait
    con.execute(
        "INSERT INTO CommAnalyzerTime VALUES ('hcom_allReduce__306_0_1', ?, 1736410576000015.0, "
        "0.015, 0.010, 0.004, 0.003, 0.001, 'step', 'collective')",
        (exp["group"],),
    )
    con.commit()
    con.close()
    prof = load_profile(root, use_cache=False)
    ops = prof.get("comm_ops")
    assert len(ops) == 1 and ops["rank"].tolist() == [2]
    row = ops.iloc[0]
    assert (row["transit_ms"], row["wait_ms"], row["synchronization_ms"]) == pytest.approx(
        (0.010, 0.004, 0.003)
    )
    assert row["wait_ratio"] == pytest.approx(round(0.004 / (0.004 + 0.010), 4))
    assert {s.path.rsplit("/", 1)[-1] for s in prof.sources["comm_ops"]} == {
        "communication_analyzer.db"
    }
    st = prof.get("step_trace")
    assert st["computing_us"].tolist() == pytest.approx([exp["step"]["computing_us"]])
    assert set(prof.get("kernels")["name"]) >= set(exp["kernels"])
