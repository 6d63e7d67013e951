"""Header variants of the real files (strings copied from shared/reference/ascend-formats.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.ingest import load_profile

# --- step_trace_time.csv headers (reference §1.5)
ST_2023 = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
    "Communication(Not Overlapped and Exclude Receive)"
)
ST_2025 = ST_2023 + ",Preparing"
ST_NOV2025 = "Device_id," + ST_2025

# --- kernel_details.csv headers (reference §1.6)
KD_2023 = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),aic_total_cycles,"
    "aic_l0a_read_bw(GB/s),aic_l0a_write_bw(GB/s),aic_l0b_read_bw(GB/s),aic_l0b_write_bw(GB/s),"
    "aic_l0c_read_bw_cube(GB/s),aic_l0c_write_bw_cube(GB/s),aiv_time(us),aiv_total_cycles,"
    "aiv_l0c_read_bw(GB/s),aiv_l0c_write_bw(GB/s)"
)
KD_JAN2025_L0 = (
    "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim"
)
KD_JAN2025_L1 = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),aic_total_cycles,"
    "aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,"
    "aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,"
    "aiv_time(us),aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,"
    "aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,"
    "cube_utilization(%)"
)
KD_NOV2025 = KD_JAN2025_L1.replace("Step Id,", "Step Id,Device_id,", 1)


def _rank(
    root: Path, rank: int, files: dict[str, str], *, info: dict | None = None, crlf: bool = True
) -> Path:
    d = root / f"host_{1000 + rank}_20250109093000000_ascend_pt"
    out = d / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    nl = "\r\n" if crlf else "\n"
    for name, text in files.items():
        data = text if name.endswith(".json") else nl.join(text.strip("\n").split("\n")) + nl
        (out / name).write_bytes(data.encode())
    (d / f"profiler_info_{rank}.json").write_text(json.dumps(info or {"rank_id": rank}, indent=4))
    return d


def _row(header: str, **values: str) -> str:
    cols = header.split(",")
    return ",".join(values.get(c, "0") for c in cols)


def test_step_trace_2023_lf_without_preparing(tmp_path: Path) -> None:
    row = "2,75174.5,146614.0,6987.3,153601.3,69909.5,291698.0,0,146614.0"
    _rank(tmp_path, 0, {"step_trace_time.csv": f"{ST_2023}\n{row}"}, crlf=False)
    st = load_profile(tmp_path, use_cache=False).get("step_trace")
    assert st.loc[0, "step"] == 2
    assert st.loc[0, "computing_us"] == pytest.approx(75174.5)
    assert st["preparing_us"].isna().all()
    assert st.loc[0, "step_us"] == pytest.approx(75174.5 + 146614.0 + 69909.5)


def test_nov2025_device_id_is_not_the_rank(tmp_path: Path) -> None:
    """Real case: rank 2 ran on Device_id 4; rank_id is a string in profiler_info."""
    st = (
        f"{ST_NOV2025}\n4,13,231290.1,420174.26,0.0,420174.26,158558.0,810022.25,0,420174.26,206.25"
    )
    kd = "\n".join(
        [
            KD_NOV2025,
            _row(
                KD_NOV2025,
                **{
                    "Step Id": "13",
                    "Device_id": "4",
                    "Name": "aclnnEmbedding_GatherV2AiCore_GatherV2",
                    "Type": "GatherV2",
                    "OP State": "dynamic",
                    "Accelerator Core": "AI_VECTOR_CORE",
                    "Start Time(us)": "1764246877077343.740\t",
                    "Duration(us)": "48.680",
                    "Wait Time(us)": "1881.080000",
                    "Block Dim": "40",
                    "Input Shapes": '"""151936,1024;1,4096;1"""',
                    "Input Data Types": "DT_BF16;INT64;INT64",
                    "Output Shapes": '"""1,4096,1024"""',
                    "Context ID": "N/A",
                },
            ),
        ]
    )
    info = {"torch_npu_version": "2.7.1", "cann_version": "8.3.RC1", "rank_id": "2"}
    _rank(tmp_path, 2, {"step_trace_time.csv": st, "kernel_details.csv": kd}, info=info)
    p = load_profile(tmp_path, use_cache=False)
    assert p.ranks == [2]
    assert p.get("step_trace").loc[0, "device_id"] == 4
    k = p.get("kernels").iloc[0]
    assert k["rank"] == 2 and k["step"] == 13
    assert k["start_us"] == pytest.approx(1764246877077343.740, abs=0.5)
    assert k["input_shapes"] == "151936,1024;1,4096;1"
    assert k["output_shapes"] == "1,4096,1024"
    assert k["block_dim"] == 40
    meta = p.get("meta").iloc[0]
    assert meta["cann_version"] == "8.3.RC1" and meta["device_id"] == 4


def test_jan2025_level0_na_types_and_block_num(tmp_path: Path) -> None:
    header = KD_JAN2025_L0.replace("Block Dim", "Block Num").replace("Step Id", "Step ID")
    kd = "\n".join(
        [
            header,
            "50,trans_TransData_0,N/A,N/A,1736408883704643.212\t,53.741,0,32",
            ",hcom_allReduce__586_0_1,N/A,N/A,1736408883732241.563\t,79089.52,590.331,0",
        ]
    )
    _rank(
        tmp_path,
        0,
        {"kernel_details.csv": kd},
        info={"rank_id": 0, "config": {"experimental_config": {"_profiler_level": "Level0"}}},
    )
    _rank(
        tmp_path,
        1,
        {"kernel_details.csv": kd},
        info={"rank_id": 1, "config": {"experimental_config": {"_profiler_level": "Level0"}}},
    )
    p = load_profile(tmp_path, use_cache=False)
    k = p.get("kernels")
    assert k["op_type"].tolist()[:2] == ["N/A", "N/A"]
    assert k["step"].tolist()[:2] == [50, -1]  # empty Step Id -> -1
    assert k["block_dim"].tolist()[:2] == [32, 0]
    assert k["duration_us"].sum() == pytest.approx(2 * (53.741 + 79089.52))
    codes = {w.code for w in p.warnings}
    assert "no_communication_level0" in codes


def test_jan2025_level1_pipe_util_crlf_and_quoted_tab(tmp_path: Path) -> None:
    vals = {
        "Step Id": "19",
        "Model ID": "4294967295",
        "Task ID": "61653",
        "Stream ID": "2",
        "Name": "aclnnMatmul_MatMulCommon_MatMulV2",
        "Type": "MatMulV2",
        "OP State": "dynamic",
        "Accelerator Core": "AI_CORE",
        "Start Time(us)": '"1736413971558972.912\t"',  # quoted variant (re-saved file)
        "Duration(us)": "185.504",
        "Wait Time(us)": "1.087",
        "Block Dim": "16",
        "Input Shapes": '"""81920,4096;8192,512"""',
        "aic_mac_ratio": "0.824",
        "cube_utilization(%)": "79.295",
    }
    kd = KD_JAN2025_L1 + "\n" + _row(KD_JAN2025_L1, **vals)
    _rank(tmp_path, 0, {"kernel_details.csv": kd})
    raw = (
        next(tmp_path.glob("*_ascend_pt")) / "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    ).read_bytes()
    assert b"\r\n" in raw and b'"1736413971558972.912\t"' in raw
    k = load_profile(tmp_path, use_cache=False).get("kernels").iloc[0]
    assert k["start_us"] == pytest.approx(1736413971558972.912, abs=0.5)
    assert k["input_shapes"] == "81920,4096;8192,512"
    assert k["aic_mac_ratio"] == pytest.approx(0.824)
    assert k["cube_utilization_pct"] == pytest.approx(79.295)
    assert k["op_state"] == "dynamic"


def test_2023_kernel_header_no_tab_no_preparing(tmp_path: Path) -> None:
    vals = {
        "Step Id": "2",
        "Name": "Conv2D1",
        "Type": "Conv2D",
        "Accelerator Core": "AI_CORE",
        "Start Time(us)": "1695115378715400.2",
        "Duration(us)": "313.886",
        "Block Dim": "16",
        "Input Shapes": '"""32,1,224,224,8;121,4,16,8;64"""',
    }
    kd = KD_2023 + "\n" + _row(KD_2023, **vals)
    st = f"{ST_2023}\n2,80309.6,683731.2,5524.5,689255.8,990605.1,1754645.75,0.0,683731.2"
    _rank(tmp_path, 0, {"kernel_details.csv": kd, "step_trace_time.csv": st}, crlf=False)
    p = load_profile(tmp_path, use_cache=False)
    k = p.get("kernels").iloc[0]
    assert k["start_us"] == pytest.approx(1695115378715400.2, abs=0.5)
    assert k["input_shapes"] == "32,1,224,224,8;121,4,16,8;64"
    assert p.get("step_trace").loc[0, "free_us"] == pytest.approx(990605.1)


def _opinfo(start: float, elapse: float, transit: float, wait: float, sync: float) -> dict:
    return {
        "Communication Time Info": {
            "Start Timestamp(us)": start,
            "Elapse Time(ms)": elapse,
            "Transit Time(ms)": transit,
            "Wait Time(ms)": wait,
            "Synchronization Time(ms)": sync,
            "Idle Time(ms)": elapse - transit - wait,
            "Wait Time Ratio": round(wait / (wait + transit), 4),
            "Synchronization Time Ratio": round(sync / (sync + transit), 4),
        },
        "Communication Bandwidth Info": {
            "RDMA": {
                "Transit Size(MB)": 0,
                "Transit Time(ms)": 0,
                "Bandwidth(GB/s)": 0,
                "Large Packet Ratio": 0,
                "Size Distribution": {},
            },
            "HCCS": {
                "Transit Size(MB)": 440.466,
                "Transit Time(ms)": 23.5656,
                "Bandwidth(GB/s)": 18.6911,
                "Large Packet Ratio": 1.0,
                "Size Distribution": {"125.82912": [3, 20.19634], "0.06": [5, 3.36926]},
            },
        },
    }


def test_communication_step_key_without_number_and_2023_matrix(tmp_path: Path) -> None:
    comm = {
        "step": {
            "p2p": {
                "hcom_send__822_0@13337953553061386822": _opinfo(
                    1695115378810042.5, 0.9, 0.86, 0.01, 0.0
                )
            },
            "collective": {
                "hcom_broadcast__483_0@9350434047717501483": _opinfo(
                    1695115378715400.2, 4.97, 0.001, 4.9, 4.9
                ),
                "Total Op Info": {
                    "Communication Time Info": {"Elapse Time(ms)": 99.0},
                    "Communication Bandwidth Info": {},
                },
            },
        }
    }
    matrix = {
        "step": {
            "p2p": {
                "hcom_send__822_0@13337953553061386822": {
                    "0-0": {
                        "Transport Type": "LOCAL",
                        "Transit Size(MB)": 20.97,
                        "Transit Time(ms)": 0.0275,
                        "Bandwidth(GB/s)": 761.1,
                    },
                    "0-8": {
                        "Transport Type": "RDMA",
                        "Transit Size(MB)": 20.97,
                        "Transit Time(ms)": 0.86,
                        "Bandwidth(GB/s)": 24.27,
                    },
                },
                "Total Op Info": {
                    "0-8": {
                        "Transport Type": "RDMA",
                        "Transit Size(MB)": 1.0,
                        "Transit Time(ms)": 1.0,
                        "Bandwidth(GB/s)": 1.0,
                    }
                },
            },
            "collective": {},
        }
    }
    _rank(
        tmp_path,
        0,
        {"communication.json": json.dumps(comm), "communication_matrix.json": json.dumps(matrix)},
    )
    p = load_profile(tmp_path, use_cache=False)
    ops = p.get("comm_ops").set_index("op_name")
    assert len(ops) == 2  # Total Op Info skipped
    assert set(ops["step"]) == {-1}
    assert ops.loc["hcom_send__822_0", "op_type"] == "send"
    assert ops.loc["hcom_send__822_0", "comm_kind"] == "p2p"
    assert ops.loc["hcom_broadcast__483_0", "op_type"] == "broadcast"
    assert ops.loc["hcom_broadcast__483_0", "wait_ratio"] == pytest.approx(round(4.9 / 4.901, 4))
    bw = p.get("comm_bandwidth")
    hccs = bw[(bw["transport"] == "HCCS")].iloc[0]
    assert hccs["packet_count"] == 8 and hccs["small_packet_count"] == 5  # 0.06 MB <= 32 MB
    m = p.get("comm_matrix")
    assert len(m) == 2 and set(m["op_name"]) == {"hcom_send__822_0"}
    assert set(zip(m["src_rank"], m["dst_rank"], strict=False)) == {(0, 0), (0, 8)}


def test_memory_record_2023_variant(tmp_path: Path) -> None:
    mem = "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Device Type\nPTA,1695115378715400.2,954.37,1452.0,NPU:0"
    _rank(tmp_path, 0, {"memory_record.csv": mem}, crlf=False)
    m = load_profile(tmp_path, use_cache=False).get("memory").iloc[0]
    assert m["component"] == "PTA" and m["reserved_mb"] == pytest.approx(1452.0)
    assert m["active_mb"] != m["active_mb"]  # NaN: column absent in 2023


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("hcom_allReduce__586_0_1", "allreduce"),
        ("hcom_allGather__097_1_1", "allgather"),
        ("hcom_reduceScatter__097_5_1", "reducescatter"),
        ("hcom_broadcast__483_0", "broadcast"),
        ("hcom_send__822_0", "send"),
        ("hcom_receive__822_0", "receive"),
        ("hcom_batchSendRecv__128_3_1", "batchsendrecv"),
        ("hcom_alltoall__111_0_1", "alltoall"),
        ("hcom_alltoallv__111_0_1", "alltoallv"),
        ("hcom_reduce__111_0_1", "reduce"),
    ],
)
def test_op_type_normalization(name: str, expected: str) -> None:
    from advisor_chat.ingest.common import comm_op_type

    assert comm_op_type(name) == expected


def test_double_hash_matches_reference() -> None:
    from advisor_chat.ingest.common import double_hash

    assert double_hash("90.91.105.46%enp189s0f0_60000_0_1736410538306028") == "17148521525495523210"
    assert double_hash("group_name_0") == "5862276093215481612"
