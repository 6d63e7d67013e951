"""CLI-level bad input, run as a user would: the real ``advisor-chat`` entry point in a subprocess.

Every case asserts: no traceback, the documented exit code, a message that names the file or
folder, nothing written into the input folder, and a bounded time (and peak memory). The
catalogue covers the CLI/UI-level kinds of issue 14 (``report -o`` a folder, rich markup in a
path, a non-UTF-8 folder name, NaN/inf cells reaching number formatting, hostile strings in
profile metadata, an over-long question); the ingest-level kinds live with the ingest tests.
It also checks that ``ask`` and ``report`` open no non-loopback connection (audit hook).
"""

from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from _hostile import EVIL_HOST, GROUP_NAME, plant

# the CLI half of the bad-input catalogue, in subprocesses (~40 s on 2 cores): `-m slow`
pytestmark = pytest.mark.slow

EXIT_OK, EXIT_INPUT, EXIT_CONFIG = 0, 2, 3
TIME_LIMIT_S = 90.0  # generous on a shared 2-core machine; a hang is minutes
MEMORY_LIMIT_MB = 1500


@dataclass
class Run:
    code: int
    out: str
    err: str
    seconds: float

    @property
    def text(self) -> str:
        return self.out + self.err


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ADVISOR_HOME"] = str(home)
    env["COLUMNS"] = "200"
    env.pop("FORCE_COLOR", None)
    return env


#: Peak RSS (MB) of each CLI run of this module, from its own rusage (``os.wait4``): the
#: worker's RUSAGE_CHILDREN would also count the children other test files started before.
PEAKS_MB: list[float] = []
#: The CLI runs as the child of this small launcher, which reports the child's own peak RSS: a
#: process forked straight from the (large) test worker keeps the worker's high-water RSS in its
#: rusage across exec (Linux carries ``maxrss`` over execve), so every run read as the worker's.
_LAUNCH = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:])\n"
    "_, st, ru = os.wait4(p.pid, 0)\n"
    "sys.stderr.write(f'\\n__peak_kb__={ru.ru_maxrss}\\n')\n"
    "sys.exit(os.waitstatus_to_exitcode(st))\n"
)


def cli(home: Path, *args: str | bytes | Path, timeout: float = TIME_LIMIT_S) -> Run:
    """Run ``advisor-chat ARGS`` in a subprocess (a fresh interpreter, like a user's shell)."""
    import tempfile

    cmd: list[str | bytes] = [
        sys.executable,
        "-c",
        _LAUNCH,
        sys.executable,
        "-m",
        "advisor_chat.cli.main",
        *map(_arg, args),
    ]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=err,
            env=_env(home),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = t0 + timeout
        while True:
            pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                os.killpg(proc.pid, 9)  # the launcher and the CLI under it
                os.wait4(proc.pid, 0)
                proc.returncode = -9
                raise subprocess.TimeoutExpired(cmd, timeout)
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
        # the launcher's last line: the CLI's own peak RSS (kB)
        head, sep, tail = stderr.rpartition(b"\n__peak_kb__=")
        if sep:
            PEAKS_MB.append(int(tail.strip()) / 1024)
            stderr = head
    dt = time.perf_counter() - t0
    return Run(
        proc.returncode,
        stdout.decode("utf-8", "replace"),
        stderr.decode("utf-8", "replace"),
        dt,
    )


def _arg(a: str | bytes | Path) -> str | bytes:
    return os.fsencode(a) if isinstance(a, Path) else a


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``root`` with its size and mtime (to prove nothing was written)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(os.fsencode(root)):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[os.fsdecode(p)] = (st.st_size, st.st_mtime_ns)
    return out


def check(run: Run, code: int | set[int], *, names: str | None = None) -> None:
    assert "Traceback" not in run.text, run.text[-3000:]
    assert run.code in (code if isinstance(code, set) else {code}), (run.code, run.text[-3000:])
    assert run.seconds < TIME_LIMIT_S
    if names is not None:
        flat = " ".join(run.text.split())
        assert names in flat, (names, run.text[-2000:])


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from advisor_chat.synth import generate

    return generate("healthy", tmp_path_factory.mktemp("healthy") / "prof", ranks=4, steps=2)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


# ----- the catalogue ----------------------------------------------------------------------------


def test_report_output_is_a_folder(home: Path, healthy: Path, tmp_path: Path):
    out_dir = tmp_path / "reports"
    out_dir.mkdir()
    before = snapshot(healthy)
    run = cli(home, "report", healthy, "-o", out_dir)
    check(run, EXIT_INPUT, names=f"{out_dir} is a folder")
    assert not any(out_dir.iterdir())
    assert snapshot(healthy) == before


def test_report_output_inside_the_profile_is_refused(home: Path, healthy: Path):
    before = snapshot(healthy)
    run = cli(home, "report", healthy, "-o", healthy / "report.md")
    check(run, EXIT_INPUT, names="inside the profiling folder")
    assert snapshot(healthy) == before


def test_report_output_unwritable(home: Path, healthy: Path, tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    run = cli(home, "report", healthy, "-o", blocker / "sub" / "r.md")
    check(run, EXIT_INPUT, names=str(blocker / "sub" / "r.md"))


@pytest.mark.parametrize("cmd", ["inspect", "report"])
def test_path_with_rich_markup(home: Path, healthy: Path, tmp_path: Path, cmd: str):
    root = _copy(healthy, tmp_path / "job[/x][bold]b[/bold]")
    before = snapshot(root)
    run = cli(home, cmd, root)
    check(run, EXIT_OK)
    if cmd == "inspect":
        assert "job[/x][bold]b[/bold]" in run.out
    assert snapshot(root) == before


def test_missing_path_with_rich_markup(home: Path, tmp_path: Path):
    missing = tmp_path / "nope[/x]"
    run = cli(home, "inspect", missing)
    check(run, EXIT_INPUT, names="nope[/x]")


def test_non_utf8_folder_name(home: Path, healthy: Path, tmp_path: Path):
    raw = os.path.join(os.fsencode(tmp_path), b"prof-\xff\xfe-run")
    shutil.copytree(os.fsdecode(healthy), os.fsdecode(raw))
    root = Path(os.fsdecode(raw))
    before = snapshot(root)
    for cmd in ("inspect", "report"):
        run = cli(home, cmd, raw)
        # a clear refusal that shows the name (bad bytes as \xNN) and how to fix it
        check(run, EXIT_INPUT, names="prof-\\xff\\xfe-run")
        assert "UTF-8" in run.err and "Rename" in run.err
    assert snapshot(root) == before


def test_missing_non_utf8_path(home: Path, tmp_path: Path):
    raw = os.path.join(os.fsencode(tmp_path), b"gone-\xff")
    run = cli(home, "report", raw)
    check(run, EXIT_INPUT, names="gone-")


def test_empty_folder_and_plain_file(home: Path, tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    check(cli(home, "inspect", empty), EXIT_INPUT, names=str(empty))
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    check(cli(home, "report", f), EXIT_INPUT, names=str(f))


def _poison_step_trace(root: Path, values: list[str]) -> None:
    """Write ``values`` into the Free column of every rank's step_trace_time.csv, in order."""
    for path in sorted(root.rglob("step_trace_time.csv")):
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh))
        col = rows[0].index("Free")
        for i, row in enumerate(rows[1:]):
            row[col] = values[i % len(values)]
        with path.open("w", newline="") as fh:
            csv.writer(fh).writerows(rows)


@pytest.mark.parametrize("values", [["nan", "inf"], ["inf", "-inf"], ["1e308", "1e308"]])
def test_nan_inf_cells_reach_no_number_formatting_crash(
    home: Path, healthy: Path, tmp_path: Path, values: list[str]
):
    root = _copy(healthy, tmp_path / "prof")
    _poison_step_trace(root, values)
    before = snapshot(root)
    for args in (
        ("report", root),
        ("report", root, "-f", "json"),
        ("ask", root, "which rank is slow?"),
    ):
        run = cli(home, *args)
        assert "OverflowError" not in run.text, run.text[-2000:]
        check(run, {EXIT_OK, EXIT_INPUT})
    assert snapshot(root) == before


def test_overlong_question_is_refused_quickly(home: Path, healthy: Path):
    question = "why is rank 1 slow? " * 3000  # 60k characters
    run = cli(home, "ask", healthy, question)
    check(run, EXIT_OK, names="too long")
    assert run.seconds < 30


def test_hostile_metadata_in_the_terminal(home: Path, healthy: Path, tmp_path: Path):
    root = _copy(healthy, tmp_path / "prof")
    plant(root)
    before = snapshot(root)
    for args in (("inspect", root), ("ask", root, "which communication groups are there?")):
        run = cli(home, *args)
        check(run, EXIT_OK)
        assert "\x1b" not in run.text  # no escape sequence reaches the terminal
        assert "\x07" not in run.text
    run = cli(home, "inspect", root)
    # the group name is shown literally (markup escaped, not interpreted; escapes stripped)
    flat = "".join(run.out.split())
    assert "".join(["g![x](http://10.255.255.1/md.png)"]) in flat
    assert "[/x][link=" in flat
    assert snapshot(root) == before


def test_hostile_metadata_in_reports(home: Path, healthy: Path, tmp_path: Path):
    from markdown_it import MarkdownIt

    root = _copy(healthy, tmp_path / "prof")
    plant(root)
    out = tmp_path / "out"
    out.mkdir()
    for fmt in ("md", "html"):
        run = cli(home, "report", root, "-f", fmt, "-o", out / f"r.{fmt}")
        check(run, EXIT_OK)
    md = (out / "r.md").read_text()
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    page = (out / "r.html").read_text()
    for doc in (rendered, page):
        assert not re.search(rf"<(img|a|script)\b[^>]*{re.escape(EVIL_HOST)}", doc, re.I)
        assert "<script>window.__pwned" not in doc
        assert "\x1b" not in doc
    # if the report names the group, it shows it as text
    if "__pwned" in page:
        assert html.escape("<script>window.__pwned=1</script>") in page


# ----- egress: ask and report open no non-loopback connection ------------------------------------

_AUDIT = r"""
import json, socket, sys
log = open(sys.argv[1], "a")
def hook(event, args):
    if event == "socket.connect":
        sock, addr = args
        log.write(json.dumps([int(sock.family), repr(addr)]) + "\n"); log.flush()
sys.addaudithook(hook)
sys.argv = ["advisor-chat", *sys.argv[2:]]
from advisor_chat.cli.main import main
main()
"""


def _loopback(family: int, addr: str) -> bool:
    import socket

    if family == socket.AF_UNIX:
        return True
    host = re.match(r"\(?'([^']*)'", addr)
    return bool(host) and host.group(1) in ("127.0.0.1", "::1", "localhost", "0:0:0:0:0:0:0:1")


@pytest.mark.parametrize(
    "args",
    [
        ("ask", "{root}", "why is rank 1 slow?"),
        ("report", "{root}", "-f", "json"),
        ("inspect", "{root}"),
    ],
)
def test_no_non_loopback_connection(home: Path, healthy: Path, tmp_path: Path, args: tuple):
    root = _copy(healthy, tmp_path / "prof")
    plant(root)  # the metadata names an outside host: it must never be contacted
    log = tmp_path / "connect.log"
    log.touch()
    argv = [a.format(root=root) for a in args]
    proc = subprocess.run(
        [sys.executable, "-c", _AUDIT, str(log), *argv],
        capture_output=True,
        timeout=TIME_LIMIT_S,
        env=_env(home),
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    attempts = [json.loads(line) for line in log.read_text().splitlines()]
    outside = [a for a in attempts if not _loopback(*a)]
    assert outside == [], outside


def test_children_peak_memory_is_bounded():
    """Runs after the CLI runs above: the largest RSS any of them reached (each its own)."""
    assert PEAKS_MB, "no CLI run recorded its memory"
    assert max(PEAKS_MB) < MEMORY_LIMIT_MB, max(PEAKS_MB)


def test_hostile_strings_are_what_the_catalogue_plants():
    # guard against a helper change that would make the injection tests vacuous
    assert "![x](" in GROUP_NAME and "<img src=" in GROUP_NAME and "\x1b]8;;" in GROUP_NAME


@pytest.mark.slow
def test_serve_makes_no_non_loopback_connection(home: Path, healthy: Path, tmp_path: Path):
    """``serve`` under the audit hook: page load and a question, then SIGTERM; loopback only."""
    import signal
    import socket
    import urllib.request

    from gradio_client import Client

    root = _copy(healthy, tmp_path / "prof")
    plant(root)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "connect.log"
    log.touch()
    proc = subprocess.Popen(
        [sys.executable, "-c", _AUDIT, str(log), "serve", str(root), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(home),
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
            try:
                with urllib.request.urlopen(url, timeout=2) as r:  # the page itself
                    assert r.status == 200
                break
            except OSError:
                assert time.monotonic() < deadline, "serve did not come up"
                time.sleep(1)
        c = Client(url, verbose=False)
        out = c.predict(question="which communication groups are there?", api_name="/chat")
        assert out
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out_b, err_b = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out_b, err_b = proc.communicate()
    text = (out_b + err_b).decode("utf-8", "replace")
    assert "Traceback" not in text, text[-3000:]
    assert "share=True" not in text  # no Gradio share hint from a tool that never shares
    attempts = [json.loads(line) for line in log.read_text().splitlines()]
    assert attempts, "the audit hook saw no connection at all: nothing was checked"
    outside = [a for a in attempts if not _loopback(*a)]
    assert outside == [], outside


def test_unreachable_model_endpoint_is_not_a_config_error(home: Path, healthy: Path):
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    run = cli(home, "ask", healthy, "why is rank 1 slow?", "--model", "llama", "--base-url", url)
    check(run, 5, names=url)
    assert "model endpoint error" in run.err and "config error" not in run.err


@pytest.mark.parametrize("kind", ["file", "uncreatable"])
def test_unusable_advisor_home_is_a_config_error(healthy: Path, tmp_path: Path, kind: str) -> None:
    """ADVISOR_HOME that is a file or cannot be made: exit 3 naming it, not a traceback."""
    if kind == "file":
        bad = tmp_path / "home-file"
        bad.write_text("not a folder")
    else:
        blocker = tmp_path / "blocker"
        blocker.write_text("x")
        bad = blocker / "home"  # a folder under a file cannot be created
    before = snapshot(healthy)
    run = cli(bad, "report", healthy)
    check(run, 3, names=f"{bad} (ADVISOR_HOME)")
    assert snapshot(healthy) == before


def _read_only_mount_works(folder: Path) -> bool:
    """Whether ``unshare -m`` can bind-mount ``folder`` read-only here (root in a container)."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount --bind -o ro '{folder}' '{folder}' && ! touch '{folder}/x'",
        ],
        capture_output=True,
    )
    return probe.returncode == 0


@pytest.mark.parametrize("prepared", [False, True])
def test_read_only_advisor_home(healthy: Path, tmp_path: Path, prepared: bool) -> None:
    """A read-only ADVISOR_HOME: exit 3 naming it when it holds no case index; with a built index
    (a shared, prepared home) the question is answered, with a note that nothing is cached.

    Read-only for real (a read-only bind mount: root writes through a mode of 0o555).
    """
    home = tmp_path / "ro-home"
    home.mkdir()
    if not _read_only_mount_works(home):
        pytest.skip("no read-only bind mount here (needs root and unshare -m)")
    if prepared:
        check(cli(home, "kb", "build"), 0)
    before = snapshot(home)
    script = (
        f"mount --bind -o ro '{home}' '{home}' && exec '{sys.executable}' -m advisor_chat.cli.main "
        f"ask '{healthy}' 'which rank is slow?'"
    )
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        timeout=TIME_LIMIT_S,
        env=_env(home),
        stdin=subprocess.DEVNULL,
    )
    run = Run(
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
        time.perf_counter() - t0,
    )
    if prepared:
        check(run, 0, names="is read-only: nothing is cached")
        assert "Rank" in run.out or "rank" in run.out
    else:
        check(run, EXIT_CONFIG, names=f"{home} (ADVISOR_HOME) is read-only")
    assert snapshot(home) == before


def test_output_piped_into_a_reader_that_stops_early(healthy: Path, home: Path) -> None:
    """`advisor-chat ask … | head -1`: the reader goes away; the command stops quietly with
    141 (as a shell reports SIGPIPE), no traceback, never 1 (kept for bugs)."""
    import fcntl

    r, w = os.pipe()
    fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ: a one-page pipe, so the report cannot fit in it
    cmd = [
        sys.executable,
        "-m",
        "advisor_chat.cli.main",
        "ask",
        str(healthy),
        "which rank is slow?",
    ]
    cmd.append("--tools")  # answer + tool table: more than the pipe holds
    proc = subprocess.Popen(
        cmd, stdout=w, stderr=subprocess.PIPE, env=_env(home), stdin=subprocess.DEVNULL
    )
    os.close(w)
    os.read(r, 10)  # the reader takes a little, then goes away
    os.close(r)
    assert proc.stderr is not None
    err = proc.stderr.read().decode("utf-8", "replace")
    code = proc.wait(timeout=TIME_LIMIT_S)
    assert "Traceback" not in err, err[-2000:]
    assert code == 141, (code, err[-2000:])
