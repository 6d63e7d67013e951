"""Issue 23 item 6: ``--help`` imports only the CLI, and flags are shown without ``<bool>``.

The wall time of ``advisor-chat --help`` depends on the machine's load, so the test checks its
cause instead: a fresh process that prints the help must not import pydantic (the settings), pandas,
numpy or any layer below the CLI (nor pydantic for the top-level help; a command's help needs it,
since typer builds its parameter coercion with pydantic).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_CHILD = """
import json, sys
sys.argv = ["advisor-chat", *sys.argv[1:]]
from advisor_chat.cli.main import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""

HEAVY = ("pandas", "numpy", "pyarrow", "plotly", "gradio", "chromadb", "mcp", "langchain_core")


def _help(*args: str) -> tuple[str, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    modules = json.loads(proc.stderr.rsplit("MODULES ", 1)[1])
    return proc.stdout, modules


@pytest.mark.parametrize("args", [("--help",), ("ask", "--help"), ("mcp", "--help")])
def test_help_imports_no_heavy_library(args: tuple[str, ...]) -> None:
    out, modules = _help(*args)
    assert "Usage" in out
    top = {m.split(".")[0] for m in modules}
    assert sorted(top & set(HEAVY)) == []
    if args == ("--help",):  # a command's own help loads pydantic: typer 0.29 coerces through it
        assert "pydantic" not in top
    # the CLI and its small helpers only: no settings, ingest, analyzers, tools, MCP server
    light = {
        "advisor_chat.errors",
        "advisor_chat.offline",
        "advisor_chat.paths",
        "advisor_chat.textsafe",
    }
    ours = {
        m for m in modules if m.startswith("advisor_chat.") and not m.startswith("advisor_chat.cli")
    }
    assert sorted(ours - light) == []


def test_flags_show_no_type_but_options_with_values_do() -> None:
    out, _ = _help("ask", "--help")
    assert "<bool>" not in out
    for flag in ("--json", "--tools", "--no-cache", "--guarded", "--help"):
        line = next(ln for ln in out.splitlines() if flag in ln)
        assert "<" not in line.split(flag, 1)[1].split("  ")[0]
    baseline = next(ln for ln in out.splitlines() if "--baseline" in ln)
    assert "<path>" in baseline  # an option that takes a value keeps its type
    out, _ = _help("mcp", "--help")
    assert "<bool>" not in out
    assert "<int>" in next(ln for ln in out.splitlines() if "--port" in ln)


def test_options_with_fixed_values_list_them() -> None:
    """An option that takes one of a few words shows them, not ``<str>``."""
    for args, flag, shown in (
        (("report", "--help"), "--lang", "<en|zh|both>"),
        (("report", "--help"), "--format", "<md|html|json>"),
        (("generate", "--help"), "--export", "<text|db>"),
        (("eval", "--help"), "--split", "<tune|heldout|all>"),
    ):
        out, _ = _help(*args)
        assert shown in next(ln for ln in out.splitlines() if flag in ln), (args, flag)
