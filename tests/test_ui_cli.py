"""`advisor-chat demo --no-serve` and `advisor-chat serve` argument handling."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor_chat.cli.main import app

REPO = Path(__file__).resolve().parents[1]
CASE_IDS = {p.stem for p in (REPO / "knowledge" / "cases").glob("*.md")}
runner = CliRunner()


@pytest.mark.slow
def test_demo_no_serve_prints_inspect_and_cited_answer():
    res = runner.invoke(app, ["demo", "--no-serve"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "16 ranks: 0-15" in out  # inspect summary of the 16-rank demo
    assert "why is rank 12 slow?" in out
    assert "🛠️ tool:" in out
    assert re.search(r"\brank\s*12\b", out, re.I)
    assert any(cid in out for cid in CASE_IDS)
    # the case index is built/checked before the question, with its time on stderr
    assert re.search(
        r"(building the case index \(first run only, ~\d+ s\)…|checking the case index…)", out
    )
    assert re.search(r"case index ready in \d+\.\d s", out)
    assert out.index("case index ready") < out.index("why is rank 12 slow?")


@pytest.mark.slow
def test_prepare_case_index_builds_once_then_only_checks(tmp_path, capsys):
    from advisor_chat.cli.serve_cmd import prepare_case_index
    from advisor_chat.config import load_settings

    settings = load_settings(home=tmp_path / "home")
    prepare_case_index(settings)
    first = capsys.readouterr().err
    assert "building the case index (first run only" in first
    assert f"{len(CASE_IDS)} cases embedded, 0 unchanged" in first
    prepare_case_index(settings)
    again = capsys.readouterr().err
    assert "checking the case index…" in again
    assert f"0 cases embedded, {len(CASE_IDS)} unchanged" in again


def test_serve_missing_folder_is_a_message_not_a_traceback(tmp_path):
    missing = tmp_path / "nope"
    res = runner.invoke(app, ["serve", str(missing), "--port", "1"])
    assert res.exit_code == 2
    assert "no such profiling folder" in res.output and "Traceback" not in res.output


def test_serve_binds_loopback_by_default():
    import inspect

    from advisor_chat.cli import serve_cmd

    assert serve_cmd._is_loopback("127.0.0.1") and serve_cmd._is_loopback("::1")
    assert not serve_cmd._is_loopback("0.0.0.0")
    cmd = next(c for c in app.registered_commands if c.name == "serve")
    sig = inspect.signature(cmd.callback)
    assert sig.parameters["host"].default == "127.0.0.1"
    assert sig.parameters["port"].default == 7860


@pytest.mark.slow
def test_readme_quick_start_commands_run_for_a_newcomer(tmp_path):
    """Every non-interactive command of the README's quick start runs as written, in a fresh folder."""
    import os
    import shlex
    import subprocess
    import sys

    readme = (REPO / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [
        line.split("  #")[0].strip()
        for block in re.findall(r"```bash\n(.*?)```", section, re.S)
        for line in block.splitlines()
        if line.startswith("advisor-chat ")
    ]
    assert any(c.startswith("advisor-chat generate") for c in commands), commands
    cli = Path(sys.executable).with_name("advisor-chat")
    env = {**os.environ, "COLUMNS": "120"}
    ran = 0
    for cmd in commands:
        argv = shlex.split(cmd)
        if argv[1] in ("chat", "serve", "mcp"):  # interactive / long-running: own tests
            continue
        proc = subprocess.run(
            [str(cli), *argv[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert proc.returncode == 0, (cmd, proc.stdout[-1500:], proc.stderr[-1500:])
        assert "Traceback" not in proc.stderr, cmd
        ran += 1
    assert ran >= 5
    assert (tmp_path / "report.html").is_file()


def test_serve_passes_api_key_env_and_guarded_to_the_settings(monkeypatch, tmp_path):
    import advisor_chat.cli.serve_cmd as serve_cmd
    import advisor_chat.ui.app as ui_app

    seen = {}

    def fake_launch(app, *, host, port, settings, block):
        seen["settings"] = settings

    monkeypatch.setattr(serve_cmd, "prepare_case_index", lambda settings: 0.0)
    monkeypatch.setattr(ui_app, "launch", fake_launch)
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    res = runner.invoke(app, ["serve", "--api-key-env", "MY_KEY", "--guarded", "--port", "1"])
    assert res.exit_code == 0, res.output
    assert seen["settings"].api_key_env == "MY_KEY"
    assert seen["settings"].guarded is True
    res = runner.invoke(app, ["serve", "--no-guarded", "--port", "1"])
    assert res.exit_code == 0 and seen["settings"].guarded is False


def _inspect_text(info) -> str:
    from rich.console import Console

    import advisor_chat.cli.inspect_cmd as inspect_cmd

    con = Console(record=True, width=80, color_system=None)
    old = inspect_cmd.console
    inspect_cmd.console = con
    try:
        inspect_cmd._render(info)
    finally:
        inspect_cmd.console = old
    return con.export_text()


def _info(**kw):
    info = {
        "root": "/data/prof",
        "layout": "ascend_pt_text",
        "ranks": [0, 1],
        "steps": [7, 8],
        "versions": {},
        "profiler_level": {},
        "stages": [],
        "cache_hit": False,
        "tables": {},
        "groups": [],
        "extra_sources": [],
        "warnings": [],
    }
    info.update(kw)
    return info


def test_inspect_reads_well_counts_no_step_markers_and_whole_file_names():
    out = _inspect_text(_info())
    assert "2 ranks: 0, 1" in out and "2 steps: 7, 8" in out
    out = _inspect_text(_info(steps=[-1]))
    assert "steps -1" not in " ".join(out.split()) and "no step markers" in out
    long_src = "devserver-0000_3096504_20250109074800419_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    out = _inspect_text(_info(tables={"kernels": {"rows": 3, "source": long_src}}))
    # folded over lines (read column by column), never cut with an ellipsis
    assert long_src in "".join(re.findall(r"│ [^│]*│[^│]*│ ([^│]*)│", out)).replace(" ", ""), out
    assert "…" not in out


def test_inspect_prints_markup_and_escapes_in_names_as_text():
    info = _info(
        root="/data/job[/x]",
        groups=[
            {
                "group": "1",
                "group_name": "tp[bold]x[/bold]\x1b]8;;http://10.255.255.1\x1b\\l\x1b]8;;\x1b\\",
                "comm_kind": "collective",
                "ranks": [0, 1],
            }
        ],
    )
    out = _inspect_text(info)
    assert "/data/job[/x]" in out and "tp[bold]x[/bold]" in "".join(out.split())
    assert "\x1b" not in out


def test_generate_help_names_every_scenario_and_list_describes_each():
    from advisor_chat.synth import SCENARIOS
    from advisor_chat.synth.blind import BLIND_KINDS

    shown = [name for name in SCENARIOS if name not in BLIND_KINDS]
    res = runner.invoke(app, ["generate", "--help"])
    assert res.exit_code == 0, res.output
    # names only (in columns), after the options: a short help
    words = re.sub(r"[│╭╮╰╯─]", " ", res.output).split()
    assert all(name in words for name in shown)
    assert words.index("--export") < min(words.index(name) for name in shown)
    assert len(res.output.splitlines()) < 2 * len(shown)
    # --list: each with its description and default size; table cells wrap over lines, so read
    # the panel with its borders and line breaks removed
    res = runner.invoke(app, ["generate", "--list"])
    assert res.exit_code == 0, res.output
    flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", res.output).split())
    for name in shown:
        spec = SCENARIOS[name]
        row = f"{name} {' '.join(spec.description.split())} (default: {spec.default_ranks} ranks, "
        assert row in flat, name
    # the blind held-out kinds are counted, not named (their names say what is planted)
    for out in (res.output, runner.invoke(app, ["generate", "--help"]).output):
        flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", out).split())
        assert f"and {len(BLIND_KINDS)} blind held-out scenarios" in flat
        assert not any(f"{name} " in flat for name in BLIND_KINDS)
    # the scenarios in SCENARIOS order
    flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", res.output).split())
    starts = [flat.index(f"{name} {SCENARIOS[name].description.split()[0]}") for name in shown]
    assert starts == sorted(starts)
    # without a scenario: a usage error naming --list, not a traceback
    res = runner.invoke(app, ["generate"])
    assert res.exit_code == 2 and "generate --list" in res.output


def test_cli_start_up_does_not_import_the_generator():
    import subprocess
    import sys

    code = "import sys, advisor_chat.cli.main; print('advisor_chat.synth' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
