"""Synthetic profiles: layout, determinism and cross-file consistency, read back with csv/json only."""

from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from _sampling import sweep_sample

from advisor_chat.errors import InputError
from advisor_chat.synth import SCENARIOS, generate

# the generator's file formats, scenario by scenario (~14 s on 2 cores): `bash tools/test.sh -m slow`
pytestmark = pytest.mark.slow

ALL = sorted(SCENARIOS)
#: The per-scenario format checks run on the core kinds and a fixed half of the others (the files
#: come from one writer; tests/_sampling.py, CI time, issue 23).
SAMPLE = sweep_sample(ALL, "synth-files")


def _dh(s: str) -> int:
    """Independent double_hash (ascend-formats.md §1.4): rolling 29/131 hashes mod 2**32."""
    a = b = 0
    for ch in s:
        a = (a * 29 + ord(ch)) % (1 << 32)
        b = (b * 131 + ord(ch)) % (1 << 32)
    return a * (1 << 32) + b


def test_double_hash_matches_real_values() -> None:
    from advisor_chat.synth import double_hash

    # values verified on real data (ascend-formats.md §1.4)
    assert double_hash("90.91.105.46%enp189s0f0_60000_0_1736410538306028") == 17148521525495523210
    assert double_hash("group_name_0") == 5862276093215481612
    assert _dh("group_name_0") == 5862276093215481612


def profiles(root: Path) -> list[Path]:
    subs = [root / "before", root / "after"] if (root / "before").is_dir() else [root]
    return subs


def rank_dirs(prof: Path) -> dict[int, Path]:
    out = {}
    for d in sorted(prof.glob("*_ascend_pt")):
        (info,) = d.glob("profiler_info_*.json")
        out[int(info.stem.rsplit("_", 1)[1])] = d
    return out


def read_csv(p: Path) -> list[dict[str, str]]:
    raw = p.read_bytes()
    return list(csv.DictReader(io.StringIO(raw.decode(), newline="")))


def steps_csv(d: Path) -> list[dict[str, str]]:
    return read_csv(d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")


def comm(d: Path) -> dict:
    return json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())


def trace(d: Path) -> list[dict]:
    return json.loads((d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())


def test_determinism_same_seed_same_bytes(tmp_path: Path) -> None:
    a = generate("seed-rank12", tmp_path / "a", ranks=4, steps=2, seed=3)
    b = generate("seed-rank12", tmp_path / "b", ranks=4, steps=2, seed=3)
    c = generate("seed-rank12", tmp_path / "c", ranks=4, steps=2, seed=4)
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert fa == fb and len(fa) == 4 * 9 + 1
    for rel in fa:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    da, dc = rank_dirs(a), rank_dirs(c)
    kd = "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    assert any((da[r] / kd).read_bytes() != (dc[r] / kd).read_bytes() for r in da), (
        "another seed must change the jitter"
    )


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown scenario") as err:
        generate("nope", tmp_path)
    # the visible scenarios are listed, the blind held-out kinds are not (their names say what
    # is planted)
    from advisor_chat.synth.blind import BLIND_KINDS

    assert "healthy" in str(err.value)
    assert not any(f" {k}," in str(err.value) or f" {k} " in str(err.value) for k in BLIND_KINDS)
    with pytest.raises(InputError, match="ranks"):
        generate("healthy", tmp_path, ranks=1)
    with pytest.raises(InputError, match="ranks"):
        generate("healthy", tmp_path, ranks=4097)
    with pytest.raises(InputError, match="export"):
        generate("healthy", tmp_path, export="parquet")  # type: ignore[arg-type]


def test_layout_and_metadata(scenario, real_samples: Path) -> None:
    root = scenario("slow-link")
    dirs = rank_dirs(root)
    assert sorted(dirs) == list(range(16))
    real = real_samples / "pt-text-level1-2rank" / "rank0_ascend_pt"
    real_info = json.loads((real / "profiler_info_0.json").read_text())
    real_env = json.loads((real / "profiler_metadata.json").read_text())["ENV_VARIABLES"]
    real_kheader = (
        (real / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").read_bytes().split(b"\r\n")[0]
    )
    real_sheader = (
        (real / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").read_bytes().split(b"\r\n")[0]
    )
    for r, d in dirs.items():
        assert re.search(r"_\d{17}_ascend_pt$", d.name), d.name
        info = json.loads((d / f"profiler_info_{r}.json").read_text())
        assert info["rank_id"] == str(r)
        assert list(info["config"]) == list(real_info["config"])
        assert list(info["config"]["common_config"]) == list(real_info["config"]["common_config"])
        assert info["cann_version"].startswith("8.0")
        md = json.loads((d / "profiler_metadata.json").read_text())
        # the real fixed key list first, in order (newer torch_npu adds HCCL_ALGO at the end)
        assert list(md["ENV_VARIABLES"])[: len(real_env)] == list(real_env)
        (grp,) = md["parallel_group_info"].values()
        assert grp["global_ranks"] == list(range(16)) and grp["group_rank"] == r
        po = d / "ASCEND_PROFILER_OUTPUT"
        assert (po / "kernel_details.csv").read_bytes().split(b"\r\n")[0] == real_kheader
        assert (po / "step_trace_time.csv").read_bytes().split(b"\r\n")[0] == real_sheader
        assert not list(po.glob("*.db"))


@pytest.mark.parametrize("name", SAMPLE)
def test_csv_quirks(scenario, name: str) -> None:
    for prof in profiles(scenario(name)):
        d = next(iter(rank_dirs(prof).values()))
        raw = (d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").read_bytes()
        lines = raw.split(b"\r\n")
        assert lines[-1] == b"" and b"\n" not in b"".join(lines)  # CRLF only
        rows = list(csv.reader(io.StringIO(raw.decode(), newline="")))
        hdr = rows[0]
        assert all(len(r) == len(hdr) for r in rows[1:])
        i_ts, i_sh, i_core = (
            hdr.index("Start Time(us)"),
            hdr.index("Input Shapes"),
            hdr.index("Accelerator Core"),
        )
        for r in rows[1:]:
            assert re.fullmatch(r"\d{16}\.\d{3}\t", r[i_ts]), r[i_ts]
            if r[i_core] == "HCCL":
                assert r[i_sh] == "N/A"
            else:
                assert r[i_sh].startswith('"') and r[i_sh].endswith(
                    '"'
                )  # logical value keeps CANN quotes
        assert b'"""' in raw


@pytest.mark.parametrize("name", SAMPLE)
def test_step_breakdown_adds_up_and_matches_trace(scenario, name: str) -> None:
    for prof in profiles(scenario(name)):
        for _r, d in rank_dirs(prof).items():
            rows = steps_csv(d)
            ev = trace(d)
            steps = {
                int(e["name"].split("#")[1]): e
                for e in ev
                if e.get("name", "").startswith("ProfilerStep#")
            }
            assert sorted(steps) == [int(x["Step"]) for x in rows]
            ov_pid = next(
                e["pid"]
                for e in ev
                if e.get("ph") == "M"
                and e["name"] == "process_name"
                and e["args"]["name"] == "Overlap Analysis"
            )
            for x in rows:
                comp, nov, ovl, com, free, stage, bubble, excl = (
                    float(x[k])
                    for k in (
                        "Computing",
                        "Communication(Not Overlapped)",
                        "Overlapped",
                        "Communication",
                        "Free",
                        "Stage",
                        "Bubble",
                        "Communication(Not Overlapped and Exclude Receive)",
                    )
                )
                # ascend-formats.md §1.5: Stage = span - Bubble, Exclude Receive = NotOv - Bubble
                assert comp + nov + free == pytest.approx(stage + bubble, rel=1e-9)
                assert excl == pytest.approx(max(nov - bubble, 0.0), abs=1e-6)
                assert ovl == pytest.approx(com - nov, abs=1e-6)
                st = steps[int(x["Step"])]
                s0 = Decimal(st["ts"])
                s1 = s0 + Decimal(repr(st["dur"]))
                assert stage + bubble == pytest.approx(st["dur"], abs=1e-6)
                # Bubble = the hcom_receive* events of the step (the PP receive wait)
                recv = sum(
                    e["dur"]
                    for e in ev
                    if e.get("ph") == "X"
                    and e["name"].startswith("hcom_receive")
                    and s0 <= Decimal(e["ts"]) < s1
                )
                assert bubble == pytest.approx(recv, abs=1e-3)
                if not recv:
                    assert x["Bubble"] == "0"
                sums: dict[str, float] = {}
                for e in ev:
                    if e.get("pid") == ov_pid and e["ph"] == "X" and s0 <= Decimal(e["ts"]) < s1:
                        sums[e["name"]] = sums.get(e["name"], 0.0) + e["dur"]
                assert sums.get("Computing", 0) == pytest.approx(comp, abs=1e-3)
                assert sums.get("Communication", 0) == pytest.approx(com, abs=1e-3)
                assert sums.get("Communication(Not Overlapped)", 0) == pytest.approx(nov, abs=1e-3)
                assert sums.get("Free", 0) == pytest.approx(free, abs=1e-3)
            # same step ids in kernel_details and communication json
            kd = read_csv(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
            assert {int(k["Step Id"]) for k in kd} == set(steps)
            assert set(comm(d)) == {f"step{s}" for s in steps}


@pytest.mark.parametrize(
    "name", ["seed-rank12", "comm-bound-no-overlap", "slow-link", "cann-upgrade-pair"]
)
def test_hccl_names_hashes_and_groups(scenario, name: str) -> None:
    for prof in profiles(scenario(name)):
        dirs = rank_dirs(prof)
        by_group: dict[str, dict[int, list[str]]] = {}
        for r, d in dirs.items():
            md = json.loads((d / "profiler_metadata.json").read_text())
            hashes = {str(_dh(cn)): g for cn, g in md["parallel_group_info"].items()}
            cj = comm(d)
            names_json = []
            for sk, sv in cj.items():
                assert sv["p2p"] == {}
                for key in sv["collective"]:
                    if key == "Total Op Info":
                        continue
                    op, h = key.split("@")
                    assert h in hashes, (
                        f"{key}: hash is not double_hash of a communicator in parallel_group_info"
                    )
                    m = re.fullmatch(r"(hcom_[A-Za-z]+_)_(\d{3})_(\d+)_1", op)
                    assert m and m.group(2) == h[-3:], op
                    by_group.setdefault(h, {}).setdefault(r, []).append(op)
                    names_json.append(op)
                del sk
            kd = read_csv(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
            assert [k["Name"] for k in kd if k["Accelerator Core"] == "HCCL"] == sorted(
                names_json, key=[k["Name"] for k in kd if k["Accelerator Core"] == "HCCL"].index
            )
            assert sorted(k["Name"] for k in kd if k["Accelerator Core"] == "HCCL") == sorted(
                names_json
            )
            tv = [
                e["name"] for e in trace(d) if e.get("ph") == "X" and e["name"].startswith("hcom_")
            ]
            assert sorted(tv) == sorted(names_json)
        for h, per_rank in by_group.items():
            seqs = {tuple(v) for v in per_rank.values()}
            assert len(seqs) == 1, f"group {h}: ranks disagree on op names"
            members = None
            for r in per_rank:
                md = json.loads((dirs[r] / "profiler_metadata.json").read_text())
                g = next(g for cn, g in md["parallel_group_info"].items() if str(_dh(cn)) == h)
                assert members in (None, g["global_ranks"])
                members = g["global_ranks"]
            assert sorted(per_rank) == members


@pytest.mark.parametrize("name", ["seed-rank12", "slow-link", "comm-bound-no-overlap"])
def test_communication_time_and_bandwidth_rules(scenario, name: str) -> None:
    for d in rank_dirs(scenario(name)).values():
        md = json.loads((d / "profiler_metadata.json").read_text())
        sizes = {
            str(_dh(cn)): len(g["global_ranks"]) for cn, g in md["parallel_group_info"].items()
        }
        for sv in comm(d).values():
            tot = {"Elapse Time(ms)": 0.0, "Wait Time(ms)": 0.0}
            for key, op in sv["collective"].items():
                t = op["Communication Time Info"]
                bw = op["Communication Bandwidth Info"]
                assert list(bw) == ["RDMA", "HCCS", "PCIE", "SDMA", "SIO"]
                assert t["Wait Time(ms)"] >= t["Synchronization Time(ms)"] >= 0
                assert t["Idle Time(ms)"] >= -1e-9
                assert t["Elapse Time(ms)"] == pytest.approx(
                    t["Transit Time(ms)"] + t["Wait Time(ms)"] + t["Idle Time(ms)"], abs=1e-9
                )
                w, s, tr = t["Wait Time(ms)"], t["Synchronization Time(ms)"], t["Transit Time(ms)"]
                assert t["Wait Time Ratio"] == round(w / (w + tr), 4)
                assert t["Synchronization Time Ratio"] == round(s / (s + tr), 4)
                if key == "Total Op Info":
                    assert t["Elapse Time(ms)"] == pytest.approx(tot["Elapse Time(ms)"])
                    assert t["Wait Time(ms)"] == pytest.approx(tot["Wait Time(ms)"])
                    assert "Bandwidth(GB/s)" not in bw["HCCS"]
                    continue
                tot["Elapse Time(ms)"] += t["Elapse Time(ms)"]
                tot["Wait Time(ms)"] += t["Wait Time(ms)"]
                assert tr == pytest.approx(
                    bw["HCCS"]["Transit Time(ms)"]
                    + bw["PCIE"]["Transit Time(ms)"]
                    + bw["RDMA"]["Transit Time(ms)"],
                    abs=1e-9,
                )
                for k in ("Transit Size(MB)", "Transit Time(ms)"):
                    assert bw["SDMA"][k] == pytest.approx(
                        bw["HCCS"][k] + bw["PCIE"][k] + bw["SIO"][k]
                    )
                assert (
                    bw["SDMA"]["Size Distribution"] == {} and bw["SDMA"]["Large Packet Ratio"] == 0
                )
                for tname in ("HCCS", "RDMA", "SDMA"):
                    b = bw[tname]
                    if b["Transit Time(ms)"]:
                        assert b["Bandwidth(GB/s)"] == round(
                            b["Transit Size(MB)"] / b["Transit Time(ms)"], 4
                        )
                    if tname != "SDMA" and b["Size Distribution"]:
                        assert sum(v[1] for v in b["Size Distribution"].values()) == pytest.approx(
                            b["Transit Time(ms)"]
                        )
        mx = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").read_text())
        for sv in mx.values():
            for key, links in sv["collective"].items():
                typ, h = key.split("@")
                assert re.fullmatch(
                    r"(allreduce|allgather)-(top1|middle|bottom1|bottom2|bottom3|total)", typ
                )
                for lk, rec in links.items():
                    a, b = (int(x) for x in lk.split("-"))
                    assert 0 <= a < sizes[h] and 0 <= b < sizes[h]
                    assert (rec["Transport Type"] == "LOCAL") == (a == b)
                    assert rec["Bandwidth(GB/s)"] == round(
                        rec["Transit Size(MB)"] / rec["Transit Time(ms)"], 4
                    )
                    assert ("Op Name" in rec) == (not typ.endswith("-total"))


def test_host_to_device_flows(scenario) -> None:
    d = next(iter(rank_dirs(scenario("seed-rank12")).values()))
    ev = trace(d)
    pname = {
        e["pid"]: e["args"]["name"]
        for e in ev
        if e.get("ph") == "M" and e["name"] == "process_name"
    }
    s = {e["id"]: e for e in ev if e.get("ph") == "s" and e.get("cat") == "HostToDevice"}
    f = {e["id"]: e for e in ev if e.get("ph") == "f" and e.get("cat") == "HostToDevice"}
    assert s and set(s) == set(f)
    x_at = {(e["pid"], e["tid"], e["ts"]): e for e in ev if e.get("ph") == "X"}
    for i, e in s.items():
        assert isinstance(i, str) and e["name"] == f"HostToDevice{i}"
        api = x_at[(e["pid"], e["tid"], e["ts"])]
        assert pname[e["pid"]] == "CANN" and api["name"].startswith("AscendCL@")
        dev = x_at[(f[i]["pid"], f[i]["tid"], f[i]["ts"])]
        assert pname[f[i]["pid"]] in ("Ascend Hardware", "HCCL")
        assert float(f[i]["ts"]) >= float(e["ts"])
        if pname[f[i]["pid"]] == "Ascend Hardware":
            assert dev["args"]["connection_id"] == int(i)


def test_cli_and_tool(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from advisor_chat.cli.main import app

    res = CliRunner().invoke(
        app, ["generate", "healthy", "--out", str(tmp_path / "cli"), "--ranks", "2", "--steps", "1"]
    )
    assert res.exit_code == 0, res.output
    assert len(rank_dirs(tmp_path / "cli")) == 2
    res = CliRunner().invoke(app, ["generate", "nope", "--out", str(tmp_path / "bad")])
    assert res.exit_code == 2
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_profile", Path(__file__).resolve().parents[1] / "tools" / "make_profile.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (
        mod.main(
            [
                "degradation",
                "--out",
                str(tmp_path / "tool"),
                "--ranks",
                "3",
                "--steps",
                "2",
                "--seed",
                "1",
            ]
        )
        == 0
    )
    key = json.loads((tmp_path / "tool" / "answer_key.json").read_text())
    assert key["ranks"] == 3 and key["steps"] == 2 and key["seed"] == 1


def test_demo_profile_generated_once(tmp_path: Path) -> None:
    from advisor_chat.config import load_settings
    from advisor_chat.synth import demo_profile

    settings = load_settings(home=tmp_path / "home")
    p = demo_profile(settings)
    assert p == tmp_path / "home" / "demo" and len(rank_dirs(p)) == 16
    stamp = (p / "answer_key.json").stat().st_mtime_ns
    assert demo_profile(settings) == p and (p / "answer_key.json").stat().st_mtime_ns == stamp


def test_parallel_writer_gives_same_bytes(tmp_path: Path) -> None:
    a = generate("slow-link", tmp_path / "serial", ranks=40, steps=1, workers=1)
    b = generate("slow-link", tmp_path / "forked", ranks=40, steps=1, workers=2)
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert fa == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert len(rank_dirs(a)) == 40
    for rel in fa:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def _small_size(name: str) -> int:
    """The smallest odd world size the scenario accepts (3), or its smallest valid one."""
    spec = SCENARIOS[name]
    n = max(3, spec.min_ranks)
    while n % spec.rank_multiple:
        n += 1
    return min(n, spec.max_ranks or n)


@pytest.mark.parametrize("name", ALL)
def test_small_odd_sizes(tmp_path: Path, name: str) -> None:
    n = _small_size(name)
    root = generate(name, tmp_path / name, ranks=n, steps=2, seed=1)
    key = json.loads((root / "answer_key.json").read_text())
    assert key["ranks"] == n and key["steps"] == 2
    assert all(0 <= r < n for r in key["slow_ranks"])
    assert all(0 <= r < n for r in key["root_cause"]["culprit_ranks"])
    assert all(0 <= r < n for r in key["root_cause"]["victim_ranks"])
    for prof in profiles(root):
        dirs = rank_dirs(prof)
        assert sorted(dirs) == list(range(n))
        for d in dirs.values():
            for x in steps_csv(d):
                total = (
                    float(x["Computing"])
                    + float(x["Communication(Not Overlapped)"])
                    + float(x["Free"])
                )
                assert total == pytest.approx(float(x["Stage"]) + float(x["Bubble"]), rel=1e-9)
            for sv in comm(d).values():
                for op in [*sv["collective"].values(), *sv["p2p"].values()]:
                    t = op["Communication Time Info"]
                    assert t["Elapse Time(ms)"] > 0 and t["Idle Time(ms)"] >= -1e-9


def test_refuses_to_overwrite_foreign_profiling_data(tmp_path: Path) -> None:
    user = tmp_path / "user_run"
    (user / "node1_123_20250101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    with pytest.raises(InputError, match="did not write"):
        generate("healthy", user, ranks=2, steps=1)
    assert (user / "node1_123_20250101000000000_ascend_pt").is_dir()
    again = generate("healthy", tmp_path / "ours", ranks=2, steps=1)
    assert generate("healthy", again, ranks=3, steps=1) == again  # our own output is replaced
    assert len(rank_dirs(again)) == 3
