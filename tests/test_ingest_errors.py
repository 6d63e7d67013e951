"""Bad input: a typed InputError naming the file and the remedy; never a traceback; no writes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor_chat.cli.main import app
from advisor_chat.errors import InputError
from advisor_chat.ingest import load_profile

ST = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
    "Communication(Not Overlapped and Exclude Receive),Preparing\r\n"
    "50,8873.7,101963.2,4028.6,105991.8,25744.0,136581.0,0,101963.2,17902.5\r\n"
)


def _rank(root: Path, rank: int, name: str | None = None) -> Path:
    d = root / (name or f"node_{rank}_20250109093000000_ascend_pt")
    (d / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").write_bytes(ST.encode())
    (d / f"profiler_info_{rank}.json").write_text(json.dumps({"rank_id": rank}))
    return d


def _cli_error(path: Path) -> str:
    res = CliRunner().invoke(app, ["inspect", str(path), "--json"])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    return res.output


def test_missing_path(tmp_path: Path) -> None:
    p = tmp_path / "no_such_dir"
    with pytest.raises(InputError) as ei:
        load_profile(p)
    assert str(p) in str(ei.value) and "does not exist" in str(ei.value)
    assert str(p) in _cli_error(p).replace("\n", "")


def test_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError) as ei:
        load_profile(tmp_path)
    assert str(tmp_path) in str(ei.value) and "empty" in str(ei.value)


def test_no_recognizable_data(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.txt").write_text("hello")
    with pytest.raises(InputError) as ei:
        load_profile(tmp_path)
    msg = str(ei.value)
    assert str(tmp_path) in msg and "no recognizable" in msg and "ascend_pt" in msg


def test_rank_folder_without_profiler_output(tmp_path: Path) -> None:
    d = tmp_path / "node_1_20250109093000000_ascend_pt"
    (d / "FRAMEWORK").mkdir(parents=True)
    (d / "profiler_info_0.json").write_text("{}")
    with pytest.raises(InputError) as ei:
        load_profile(tmp_path)
    msg = str(ei.value)
    assert str(d) in msg and "ASCEND_PROFILER_OUTPUT" in msg and "analyse(" in msg
    assert "ASCEND_PROFILER_OUTPUT" in _cli_error(tmp_path)


def test_rank_folder_without_output_next_to_good_ones_is_a_warning(tmp_path: Path) -> None:
    _rank(tmp_path, 0)
    bad = tmp_path / "node_1_20250109093000000_ascend_pt"
    bad.mkdir()
    (bad / "profiler_info_1.json").write_text("{}")
    p = load_profile(tmp_path, use_cache=False)
    w = [w for w in p.warnings if w.code == "no_profiler_output"]
    assert w and w[0].path == str(bad) and "analyse(" in w[0].message


def test_csv_missing_required_columns(tmp_path: Path) -> None:
    d = _rank(tmp_path, 0)
    kd = d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    kd.write_text("Step Id,Name,Type\n50,Conv2D1,Conv2D\n")
    p = load_profile(tmp_path, use_cache=False)  # the rank's kernels are left out, with a warning
    (w,) = [w for w in p.warnings if w.code == "file_skipped"]
    assert w.path == str(kd) and "Duration(us)" in w.message
    assert p.get("kernels").empty
    res = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 0 and "Traceback" not in res.output
    # (piped: the report is Markdown, its underscores escaped)
    assert "kernel_details.csv" in res.output.replace("\\_", "_")


def test_csv_cut_inside_its_header_says_cut_not_a_header_version(
    tmp_path: Path, real_samples: Path
) -> None:
    src = real_samples / "pt-text-level1-2rank"
    shutil.copytree(src, tmp_path / "p")
    st = tmp_path / "p" / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    st.write_bytes(st.read_bytes()[:60])  # inside the header line
    p = load_profile(tmp_path / "p", use_cache=False)
    (w,) = [w for w in p.warnings if w.code == "file_skipped" and w.path == str(st)]
    assert "ends inside its header line" in w.message and "cut short" in w.message
    assert "Copy the file again" in w.message and "header version" not in w.message
    # a complete header of another layout (its line ended) is still a header question
    st.write_text("Step,Computing,Something Else\n50,1.0,2.0\n")
    p = load_profile(tmp_path / "p", use_cache=False)
    (w,) = [w for w in p.warnings if w.code == "file_skipped" and w.path == str(st)]
    assert "header version is not supported" in w.message


def test_duplicate_rank_ids(tmp_path: Path) -> None:
    a = _rank(tmp_path, 3, "a_1_20250109093000000_ascend_pt")
    b = _rank(tmp_path, 3, "b_2_20250109093100000_ascend_pt")
    with pytest.raises(InputError) as ei:
        load_profile(tmp_path, use_cache=False)
    msg = str(ei.value)
    assert "rank 3" in msg and str(a) in msg and str(b) in msg


def test_two_runs_side_by_side_point_to_the_baseline(tmp_path: Path) -> None:
    _rank(tmp_path / "before", 0, "a_1_20250109093000000_ascend_pt")
    _rank(tmp_path / "after", 0, "a_1_20250109093100000_ascend_pt")
    with pytest.raises(InputError) as ei:
        load_profile(tmp_path, use_cache=False)
    msg = str(ei.value)
    assert "two runs" in msg and "--baseline" in msg
    # the earlier run is the baseline in the example
    assert f"ask {tmp_path / 'after'}" in msg and f"--baseline {tmp_path / 'before'}" in msg


def test_truncated_trace_view_falls_back(tmp_path: Path, real_samples: Path) -> None:
    src = real_samples / "pt-text-level1-2rank" / "rank0_ascend_pt"
    dst = tmp_path / "rank0_ascend_pt"
    shutil.copytree(src, dst)
    tv = dst / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    data = tv.read_bytes()
    tv.write_bytes(data[: len(data) // 2])
    p = load_profile(tmp_path, use_cache=False)
    assert p.get("host_dispatch").empty  # trace_view.json may be read lazily: ask for it
    w = [w for w in p.warnings if w.code == "trace_view_invalid"]
    assert w and str(tv) in w[0].message and "fell back to CSV/DB" in w[0].message
    assert not p.has("host_dispatch")
    assert p.has("kernels") and p.has("step_trace") and p.has("comm_ops")
    res = CliRunner().invoke(app, ["inspect", str(tmp_path), "--json", "--no-cache"])
    assert res.exit_code == 0
    assert any(x["code"] == "trace_view_invalid" for x in json.loads(res.stdout)["warnings"])


def test_invalid_json_names_file(tmp_path: Path) -> None:
    d = _rank(tmp_path, 0)
    cj = d / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    cj.write_text('{"step50": {"p2p": {}, "collective": {"hcom_allRed')
    p = load_profile(tmp_path, use_cache=False)  # left out with a warning naming the file
    (w,) = [w for w in p.warnings if w.code == "file_skipped"]
    assert w.path == str(cj) and str(cj) in w.message and "communication" in w.message
    assert not p.has("comm_ops") and p.has("step_trace")


def test_unreadable_file_simulated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _rank(tmp_path, 0)
    target = d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    real_open = Path.open

    def fake_open(self: Path, *a, **kw):  # type: ignore[no-untyped-def]
        if self.name == target.name:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *a, **kw)

    monkeypatch.setattr(Path, "open", fake_open)
    with pytest.raises(InputError) as ei:  # the rank's only data file: nothing is left to analyse
        load_profile(tmp_path, use_cache=False)
    msg = str(ei.value)
    assert str(target) in msg and "permission denied" in msg and "chmod" in msg


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read anything")
def test_unreadable_folder_chmod(tmp_path: Path) -> None:
    _rank(tmp_path, 0)
    locked = tmp_path / "locked"
    shutil.copytree(tmp_path / "node_0_20250109093000000_ascend_pt", locked / "x_ascend_pt")
    locked.chmod(0)
    try:
        with pytest.raises(InputError) as ei:
            load_profile(locked)
        assert str(locked) in str(ei.value)
    finally:
        locked.chmod(0o755)


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            st = p.stat()
            out[str(p)] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.mark.parametrize(
    "name", ["pt-text-level1-2rank", "pt-db-level1-2rank", "cluster-16rank-pp2"]
)
def test_nothing_written_inside_input(real_samples: Path, tmp_path: Path, name: str) -> None:
    root = tmp_path / name
    shutil.copytree(real_samples / name, root)
    before = _snapshot(root)
    load_profile(root)  # parse + write cache
    load_profile(root)  # cache hit
    CliRunner().invoke(app, ["inspect", str(root)])
    assert _snapshot(root) == before


def test_one_unreadable_rank_is_left_out_but_nothing_readable_is_an_error(tmp_path: Path) -> None:
    """A rank whose only data file is garbage is left out when another rank has data; alone it
    is bad input (exit 2) naming the file, not an empty analysis."""
    good = _rank(tmp_path / "two", 0)
    bad = _rank(tmp_path / "two", 1)
    garbage = bad / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    garbage.write_bytes(b"\x00\xff garbage \x00")
    p = load_profile(tmp_path / "two", use_cache=False)
    assert sorted(set(p.get("step_trace")["rank"])) == [0]
    (w,) = [w for w in p.warnings if w.code == "file_skipped"]
    assert w.path == str(garbage) and w.ranks == (1,)
    assert good.exists()

    alone = _rank(tmp_path / "one", 0)
    only = alone / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    only.write_bytes(b"\x00\xff garbage \x00")
    with pytest.raises(InputError) as ei:
        load_profile(tmp_path / "one", use_cache=False)
    msg = str(ei.value)
    assert "nothing in" in msg and str(only) in msg and "Left out" not in msg
    assert str(only) in _cli_error(tmp_path / "one").replace("\n", "")


def test_a_device_or_a_fifo_as_the_path_is_named_for_what_it_is(tmp_path) -> None:
    """Not "permission denied ... chmod -R a+rX /dev" (wrong cause, risky advice)."""
    import os

    from advisor_chat.errors import InputError
    from advisor_chat.ingest import load_profile

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, kind in ((Path("/dev/zero"), "is a device"), (fifo, "is a named pipe (FIFO)")):
        with pytest.raises(InputError) as ei:
            load_profile(path, progress=False)
        assert kind in str(ei.value) and "chmod" not in str(ei.value), str(ei.value)


def test_absurd_rank_ids_and_world_sizes_are_refused_before_anything_is_sized(
    scenario, tmp_path
) -> None:
    """A rank id of 10^9 and a world size of 10^12 (1.27 GB allocated, then a traceback, before):
    refused with warnings, in bounded memory (the load runs under a 3 GB address-space limit)."""
    import json
    import resource
    import shutil
    import subprocess
    import sys

    src = scenario("healthy", ranks=4)
    prof = tmp_path / "p"
    shutil.copytree(src, prof)
    first = sorted(prof.glob("*_ascend_pt"))[0]
    (first / "profiler_info_0.json").rename(first / "profiler_info_1000000000.json")
    for meta in prof.glob("*_ascend_pt/profiler_metadata.json"):
        d = json.loads(meta.read_text())
        d.setdefault("distributed_args", {})["world_size"] = 10**12
        meta.write_text(json.dumps(d))
    code = (
        "import json, sys; from advisor_chat.ingest import load_profile; "
        "p = load_profile(sys.argv[1], progress=False, use_cache=False); "
        "print(json.dumps([sorted(p.ranks), sorted(w.code for w in p.warnings)]))"
    )

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    out = subprocess.run(
        [sys.executable, "-c", code, str(prof)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )
    assert out.returncode == 0, out.stderr[-1500:]
    ranks, codes = json.loads(out.stdout.strip().splitlines()[-1])
    assert ranks == [0, 1, 2, 3]  # the folder got a rank by order, none was sized from 10^9
    assert "invalid_rank_id" in codes and "world_size_invalid" in codes


def test_a_truncated_file_of_one_rank_is_warned_about_once(
    tmp_path: Path, real_samples: Path
) -> None:
    """One rank's cut communication.json: the file_skipped warning names it and the fix; no second
    warning says that rank lacks the table (it would name the same file again)."""
    shutil.copytree(real_samples / "pt-text-level1-2rank", tmp_path / "job")
    cj = tmp_path / "job" / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    cj.write_bytes(cj.read_bytes()[:300])
    p = load_profile(tmp_path / "job", use_cache=False)
    about = [w for w in p.warnings if w.path == str(cj) or str(cj) in w.message]
    assert [w.code for w in about] == ["file_skipped"]
    assert p.has("comm_ops") and set(p.get("comm_ops")["rank"]) == {0}


def test_a_truncated_cluster_file_is_left_out_with_the_cluster_tool_as_the_fix(
    tmp_path: Path, real_samples: Path
) -> None:
    shutil.copytree(real_samples / "cluster-8rank", tmp_path / "job")
    cj = tmp_path / "job" / "cluster_analysis_output" / "cluster_communication.json"
    cj.write_bytes(cj.read_bytes()[:100])
    p = load_profile(tmp_path / "job", use_cache=False)
    (w,) = [w for w in p.warnings if w.code == "file_skipped"]
    assert w.path == str(cj) and "msprof-analyze cluster" in w.message
    assert "torch_npu" not in w.message  # the profiler did not write this file
    assert p.has("step_trace") and not p.has("comm_ops")
