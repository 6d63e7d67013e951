"""Every real sample loads; values are checked against an independent reading of the files."""

from __future__ import annotations

import csv
import json
import math
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor_chat.cli.main import app
from advisor_chat.ingest import inspect_profile, load_profile

SAMPLES = [
    "pt-text-level1-2rank",
    "pt-db-level1-2rank",
    "cluster-16rank-pp2",
    "cluster-8rank",
    "kernel-details-variants",
]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        return list(csv.DictReader(fh))


def _f(text: str) -> float:
    return float(text.strip().strip('"').strip())


def test_every_real_folder_is_listed(real_samples: Path) -> None:
    found = sorted(p.name for p in real_samples.iterdir() if p.is_dir())
    assert found == sorted(SAMPLES)


@pytest.mark.parametrize("name", SAMPLES)
def test_real_sample_loads_and_inspects(real_samples: Path, name: str) -> None:
    profile = load_profile(real_samples / name, use_cache=False)
    assert profile.ranks, name
    info = inspect_profile(profile)
    assert info["layout"] == profile.layout
    assert info["ranks"] == profile.ranks
    for table, t in info["tables"].items():
        if "on_demand" in t:  # listed without being read: rows read so far, ranks available
            loaded = profile.tables.loaded(table)
            assert t["rows"] == (len(loaded) if loaded is not None else 0)
            assert t["on_demand"]["ranks"] == len(profile.available_ranks(table)) > 0
        else:
            assert t["rows"] == len(profile.tables[table])
    res = CliRunner().invoke(app, ["inspect", str(real_samples / name), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    for key in (
        "layout",
        "ranks",
        "steps",
        "groups",
        "versions",
        "profiler_level",
        "tables",
        "warnings",
    ):
        assert key in data
    assert data["ranks"] == profile.ranks
    text = CliRunner().invoke(app, ["inspect", str(real_samples / name)])
    assert text.exit_code == 0 and "Tables" in text.stdout


def test_text_export_values(real_samples: Path) -> None:
    root = real_samples / "pt-text-level1-2rank"
    p = load_profile(root, use_cache=False)
    assert p.layout == "ascend_pt_text"
    assert p.ranks == [0, 1]
    st = p.get("step_trace").set_index("rank")
    for rank in (0, 1):
        out = root / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        (row,) = _rows(out / "step_trace_time.csv")
        assert st.loc[rank, "step"] == int(row["Step"])
        assert st.loc[rank, "computing_us"] == pytest.approx(float(row["Computing"]))
        assert st.loc[rank, "free_us"] == pytest.approx(float(row["Free"]))
        assert st.loc[rank, "preparing_us"] == pytest.approx(float(row["Preparing"]))
        assert st.loc[rank, "step_us"] == pytest.approx(
            float(row["Computing"])
            + float(row["Communication(Not Overlapped)"])
            + float(row["Free"])
        )
        # kernels: count, total duration, first start (trailing TAB), shapes without quotes
        krows = _rows(out / "kernel_details.csv")
        k = p.get("kernels")
        k = k[k["rank"] == rank]
        assert len(k) == len(krows)
        assert k["duration_us"].sum() == pytest.approx(sum(float(r["Duration(us)"]) for r in krows))
        assert krows[0]["Start Time(us)"].endswith("\t")
        assert k["start_us"].iloc[0] == pytest.approx(float(krows[0]["Start Time(us)"]), abs=0.5)
        assert krows[0]["Input Shapes"].startswith('"')
        assert k["input_shapes"].iloc[0] == krows[0]["Input Shapes"].strip('"')
        assert int((k["accelerator_core"] == "HCCL").sum()) == sum(
            r["Accelerator Core"] == "HCCL" for r in krows
        )
        # input formats and the PipeUtilization PMU ratios, N/A read as missing
        assert k["input_formats"].fillna("N/A").tolist() == [
            r["Input Formats"].strip().strip('"') or "N/A" for r in krows
        ]
        for col in ("aic_mte2_ratio", "aiv_vec_ratio", "aiv_icache_miss_rate"):
            vals = [float(r[col]) for r in krows if r[col].strip() not in ("N/A", "")]
            assert vals and int(k[col].notna().sum()) == len(vals)
            assert k[col].sum() == pytest.approx(sum(vals))
        # communication: every op except Total Op Info, elapse summed
        comm = json.loads((out / "communication.json").read_text())
        ops = {
            key: v
            for step in comm.values()
            for kind in step.values()
            for key, v in kind.items()
            if not key.startswith("Total")
        }
        c = p.get("comm_ops")
        c = c[c["rank"] == rank]
        assert len(c) == len(ops)
        assert c["elapse_ms"].sum() == pytest.approx(
            sum(v["Communication Time Info"]["Elapse Time(ms)"] for v in ops.values())
        )
        assert set(c["op_type"]) == {"allreduce"}
        # memory rows
        assert (p.get("memory")["rank"] == rank).sum() == len(_rows(out / "memory_record.csv"))
    # host dispatch from trace_view.json: one row per HostToDevice flow with both ends
    tv = json.loads((root / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json").read_text())
    s_ids = {e["id"] for e in tv if e.get("cat") == "HostToDevice" and e["ph"] == "s"}
    f_ids = {e["id"] for e in tv if e.get("cat") == "HostToDevice" and e["ph"] == "f"}
    hd = p.get("host_dispatch")
    # plus the host's blocking calls (CANN events named *Synchronize* and aclrtMemcpy: no flow,
    # no device task)
    syncs = [
        e
        for e in tv
        if e.get("ph") == "X"
        and ("Synchronize" in str(e.get("name", "")) or e.get("name") == "AscendCL@aclrtMemcpy")
    ]
    assert len(syncs) == 8 + 5
    assert (hd["rank"] == 0).sum() == len(s_ids & f_ids) + len(syncs)
    launch = hd[hd["device_start_us"].notna()]
    assert (launch["launch_delay_us"] == launch["device_start_us"] - launch["host_start_us"]).all()
    sy = hd[(hd["rank"] == 0) & hd["device_start_us"].isna()]
    # (start and end are µs since the epoch as float64, spaced 0.25 µs apart at 1.7e15)
    assert sorted(sy["api_duration_us"]) == pytest.approx(
        sorted(float(e["dur"]) for e in syncs), abs=0.25
    )
    assert sy["launch_delay_us"].isna().all()
    assert p.source_files("host_dispatch", 0)[0].endswith("trace_view.json")
    # the matrix links of an 8-rank job but data for 2 ranks: missing ranks are reported
    codes = {w.code: w for w in p.warnings}
    assert "missing_ranks" in codes and codes["missing_ranks"].ranks == (2, 3, 4, 5, 6, 7)


def test_db_export_values(real_samples: Path) -> None:
    root = real_samples / "pt-db-level1-2rank"
    p = load_profile(root, use_cache=False)
    assert p.layout == "ascend_pt_db"
    assert p.ranks == [0, 1]
    for rank in (0, 1):
        out = root / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        con = sqlite3.connect(
            f"file:{out / f'ascend_pytorch_profiler_{rank}.db'}?mode=ro&immutable=1", uri=True
        )
        n_compute = con.execute(
            "SELECT count(*) FROM TASK t JOIN COMPUTE_TASK_INFO c ON t.globalTaskId=c.globalTaskId"
        ).fetchone()[0]
        n_comm, comm_ns = con.execute(
            "SELECT count(*), sum(endNs-startNs) FROM COMMUNICATION_OP"
        ).fetchone()
        step_id, s0, _s1 = con.execute("SELECT id, startNs, endNs FROM STEP_TIME").fetchone()
        pmu = dict(
            con.execute(
                "SELECT s.value, sum(p.value) FROM TASK_PMU_INFO p JOIN STRING_IDS s "
                "ON s.id = p.name GROUP BY s.value"
            ).fetchall()
        )
        fmts = con.execute(
            "SELECT s.value, count(*) FROM TASK t JOIN COMPUTE_TASK_INFO c "
            "ON t.globalTaskId = c.globalTaskId JOIN STRING_IDS s ON s.id = c.inputFormats "
            "WHERE s.value NOT IN ('N/A', '') GROUP BY s.value"
        ).fetchall()
        con.close()
        k = p.get("kernels")
        k = k[k["rank"] == rank]
        assert len(k) == n_compute + n_comm
        comm_k = k[k["accelerator_core"] == "COMMUNICATION"]
        assert comm_k["duration_us"].sum() == pytest.approx(comm_ns / 1000.0)  # ns -> us
        assert k["start_us"].min() >= s0 / 1000.0 - 1 and set(k["step"]) <= {step_id, -1}
        # TASK_PMU_INFO rows pivoted onto their kernels; input formats from STRING_IDS
        for col in ("aic_mte2_ratio", "aic_mac_ratio", "aiv_mte3_ratio"):
            assert k[col].sum() == pytest.approx(pmu[col])
        assert k["input_formats"].value_counts().to_dict() == dict(fmts)
        a = sqlite3.connect(f"file:{out / 'analysis.db'}?mode=ro&immutable=1", uri=True)
        step, computing, free = a.execute(
            "SELECT step, computing, free FROM StepTraceTime"
        ).fetchone()
        n_ops = a.execute("SELECT count(*) FROM CommAnalyzerTime").fetchone()[0]
        a.close()
        st = p.get("step_trace").set_index("rank")
        assert st.loc[rank, "step"] == int(step)
        assert st.loc[rank, "computing_us"] == pytest.approx(computing)
        assert st.loc[rank, "free_us"] == pytest.approx(free)
        assert (p.get("comm_ops")["rank"] == rank).sum() == n_ops
    # host dispatch comes from the DB, not from a trace_view.json
    assert all(f.endswith(".db") for f in p.source_files("host_dispatch"))
    hd = p.get("host_dispatch")
    # launches have their delay; the host's blocking calls launch nothing (no device columns)
    is_sync = hd["api_name"].str.contains(r"Synchronize|aclrtMemcpy$")
    assert hd.loc[~is_sync, "launch_delay_us"].notna().all()
    assert is_sync.any() and hd.loc[is_sync, "device_start_us"].isna().all()


def test_text_and_db_exports_agree(real_samples: Path) -> None:
    """Two exports of the same kind of run (the same job profiled twice, text and DB)."""
    t = load_profile(real_samples / "pt-text-level1-2rank", use_cache=False)
    d = load_profile(real_samples / "pt-db-level1-2rank", use_cache=False)
    assert t.ranks == d.ranks and t.steps == d.steps
    tk, dk = t.get("kernels"), d.get("kernels")
    # same kernels per rank, same op-type mix
    assert tk.groupby("rank").size().tolist() == dk.groupby("rank").size().tolist()
    assert (
        tk.groupby(["rank", "op_type"]).size().to_dict()
        == dk.groupby(["rank", "op_type"]).size().to_dict()
    )
    # the same operators read their inputs in the same formats in both exports
    assert (
        tk.groupby(["rank", "op_type", "input_formats"]).size().to_dict()
        == dk.groupby(["rank", "op_type", "input_formats"]).size().to_dict()
    )
    # same collectives (names differ only by the group hash), same types
    assert t.get("comm_ops")["op_type"].tolist() == d.get("comm_ops")["op_type"].tolist()
    # step breakdown of the two runs within 5 %
    ts, ds = t.get("step_trace").set_index("rank"), d.get("step_trace").set_index("rank")
    for col in ("computing_us", "communication_us", "free_us", "step_us"):
        for r in (0, 1):
            assert math.isclose(ts.loc[r, col], ds.loc[r, col], rel_tol=0.05), (col, r)


def test_cluster_16rank_pp2(real_samples: Path) -> None:
    root = real_samples / "cluster-16rank-pp2"
    p = load_profile(root, use_cache=False)
    csv_rows = _rows(root / "cluster_analysis_output" / "cluster_step_trace_time.csv")
    rank_rows = [r for r in csv_rows if r["Type"] == "rank"]
    stage_rows = [r for r in csv_rows if r["Type"] == "stage"]
    st = p.get("step_trace")
    assert len(st) == 16 == len(rank_rows)
    assert sorted(st["rank"].tolist()) == list(range(16))
    by_rank = st.set_index("rank")
    for r in rank_rows:
        assert by_rank.loc[int(r["Index"]), "free_us"] == pytest.approx(float(r["Free"]))
        assert by_rank.loc[int(r["Index"]), "bubble_us"] == pytest.approx(float(r["Bubble"]))
    stages = p.get("stage_trace")
    assert len(stages) == 2 == len(stage_rows)
    lists = [list(x) for x in stages.sort_values("stage_index")["stage_rank_list"]]
    assert lists == [list(range(8)), list(range(8, 16))]
    assert stages["bubble_us"].tolist() == pytest.approx([float(r["Bubble"]) for r in stage_rows])
    info = inspect_profile(p)
    assert [s["ranks"] for s in info["stages"]] == [list(range(8)), list(range(8, 16))]
    # groups: every rank list of communication_group.json is present
    cg = json.loads((root / "cluster_analysis_output/communication_group.json").read_text())
    want = {tuple(sorted(g)) for kind in ("collective", "p2p") for g in cg[kind]}
    have = {tuple(g["ranks"]) for g in info["groups"]}
    assert want <= have
    # comm ops: one row per (op, rank) of cluster_communication.json
    cc = json.loads((root / "cluster_analysis_output/cluster_communication.json").read_text())
    n = sum(
        len(per_rank)
        for steps in cc.values()
        for ops in steps.values()
        for key, per_rank in ops.items()
        if not key.startswith("Total")
    )
    assert len(p.get("comm_ops")) == n
    # matrix links are global ranks already
    cm = json.loads(
        (root / "cluster_analysis_output/cluster_communication_matrix.json").read_text()
    )
    links = {
        tuple(int(x) for x in link.split("-"))
        for steps in cm.values()
        for ops in steps.values()
        for key, ls in ops.items()
        if not key.startswith("Total")
        for link in ls
    }
    got = set(zip(p.get("comm_matrix")["src_rank"], p.get("comm_matrix")["dst_rank"], strict=False))
    assert got == links


def test_cluster_8rank_2023(real_samples: Path) -> None:
    root = real_samples / "cluster-8rank"
    p = load_profile(root, use_cache=False)
    assert p.layout == "cluster_output"
    assert p.ranks == list(range(8))
    assert p.steps == [-1]  # empty Step column
    rows = [
        r
        for r in _rows(root / "cluster_analysis_output/cluster_step_trace_time.csv")
        if r["Type"] == "rank"
    ]
    assert p.get("step_trace")["computing_us"].sum() == pytest.approx(
        sum(float(r["Computing"]) for r in rows)
    )
    assert len(p.get("stage_trace")) == 1


def test_kernel_details_2025_variant(real_samples: Path) -> None:
    f = real_samples / "kernel-details-variants" / "kernel_details_2025.csv"
    rows = _rows(f)
    p = load_profile(f.parent, use_cache=False)
    k = p.get("kernels")
    assert len(k) == len(rows)
    assert rows[0]["Start Time(us)"].endswith("\t")  # quoted with a tab inside
    assert k["start_us"].tolist() == pytest.approx([_f(r["Start Time(us)"]) for r in rows], abs=0.5)
    assert k["cube_utilization_pct"].sum() == pytest.approx(
        sum(
            float(r["cube_utilization(%)"])
            for r in rows
            if r["cube_utilization(%)"] not in ("", "N/A")
        )
    )
    assert k["input_shapes"].iloc[0] == rows[0]["Input Shapes"].strip('"')
    assert '"' not in "".join(k["input_shapes"].dropna())
    assert any(w.code == "rank_unknown" for w in p.warnings)
