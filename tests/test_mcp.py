"""Issue 23 item 1: ``advisor-chat mcp`` serves the function-calling tools to an MCP client.

The server is spawned as a user's MCP host would (``python -m advisor_chat.cli.main mcp --root
DIR``) and driven with the official SDK's own client over stdio (and once over streamable HTTP).
Expected numbers come from the library's own :func:`advisor_chat.diagnosis.diagnose` on the same
folder and from the generator's answer key, not from the server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from advisor_chat.diagnosis import diagnose
from advisor_chat.ingest import load_profile
from advisor_chat.mcp_server import ProfileTools
from advisor_chat.tools import count_tokens, tool_schemas

CLI = [sys.executable, "-m", "advisor_chat.cli.main"]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An allowed root holding a profile made by ``advisor-chat generate``, and a folder outside it."""
    base = tmp_path_factory.mktemp("mcp")
    root = base / "profiles"
    root.mkdir()
    proc = subprocess.run(
        [*CLI, "generate", "seed-rank12", "--out", str(root / "run1"), "--ranks", "8"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    outside = base / "outside"
    outside.mkdir()
    (root / "escape").symlink_to(outside, target_is_directory=True)
    return root


async def _session(params: Any, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    async with Client(params, read_timeout_seconds=600) as client:
        listed = await client.list_tools()
        results = [await client.call_tool(name, args) for name, args in calls]
    return {"tools": listed.tools, "results": results}


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content)


CALLS = [
    ("diagnose", {"path": "run1"}),  # relative to the root
    ("diagnose", {"path": "/etc"}),
    ("diagnose", {"path": "escape"}),  # a symlink inside the root pointing outside
    ("slow_rank", {"path": "run1", "step": 999}),
    ("cluster_breakdown", {"path": "run1"}),
    ("show_table", {"ref": "t1", "limit": 3}),
]


@pytest.fixture(scope="module")
def served(root: Path) -> dict[str, Any]:
    params = StdioServerParameters(
        command=CLI[0], args=[*CLI[1:], "mcp", "--root", str(root)], env=dict(os.environ)
    )
    return anyio.run(_session, params, CALLS)


def test_lists_the_function_calling_tools_diagnose_first(served: dict[str, Any]) -> None:
    names = [t.name for t in served["tools"]]
    assert names == [s["name"] for s in tool_schemas()]
    assert names[0] == "diagnose"
    for wanted in ("cluster_breakdown", "slow_rank", "slow_link", "compare_ops", "host_dispatch"):
        assert wanted in names
    for wanted in ("step_trend", "compare_profiles", "search_cases"):
        assert wanted in names
    by_name = {t.name: t for t in served["tools"]}
    assert by_name["diagnose"].input_schema["required"] == ["path"]
    assert by_name["compare_profiles"].input_schema["required"][:2] == ["path", "baseline"]
    assert "path" not in by_name["search_cases"].input_schema["properties"]
    assert all(t.annotations.read_only_hint for t in served["tools"])


def test_diagnosis_matches_the_library(served: dict[str, Any], root: Path) -> None:
    res = served["results"][0]
    text = _text(res)
    assert res.is_error is not True, text
    d = diagnose(load_profile(root / "run1"))
    assert f"median step {d.step_time_us / 1000:.1f} ms" in text
    assert d.causes, "the planted fault must give a cause"
    top = d.causes[0]
    assert f"cause 1 {top.id} " in text
    # the culprit is the rank the generator planted the fault on (answer key, not the server)
    key = json.loads((root / "run1" / "answer_key.json").read_text(encoding="utf-8"))
    assert list(top.culprit.ranks) == key["slow_ranks"]
    assert f"culprit rank: {top.culprit.label}" in text
    assert f"expected gain: {top.gain_us / 1000:.1f} ms per step" in text


def test_paths_outside_the_roots_are_refused(served: dict[str, Any], root: Path) -> None:
    for res in served["results"][1:3]:
        text = _text(res)
        assert res.is_error is True
        assert "outside the allowed roots" in text
        assert str(root) in text  # names the roots
        assert "Traceback" not in text


def test_bad_arguments_are_tool_errors_naming_valid_values(served: dict[str, Any]) -> None:
    res = served["results"][3]
    assert res.is_error is True
    assert "step 999 does not exist" in _text(res)
    assert "Traceback" not in _text(res)


def test_show_table_pages_an_earlier_result(served: dict[str, Any]) -> None:
    # t1 is the per-(rank, step) breakdown: 8 ranks x 3 steps (the generator's default steps)
    breakdown = _text(served["results"][4])
    assert "table t1 (24 rows" in breakdown
    page = served["results"][5]
    assert page.is_error is not True
    assert "rows 0-2 of 24" in _text(page)


# -- in process: the cap, odd arguments ----------------------------------------------------------
def test_results_are_capped_with_a_note(root: Path) -> None:
    tools = ProfileTools([root], max_tokens=200)
    whole = ProfileTools([root], max_tokens=100_000).call("diagnose", {"path": "run1"})
    assert count_tokens(whole.text) > 200  # the cap has something to cut
    cut = tools.call("diagnose", {"path": str(root / "run1")})
    assert not cut.is_error
    assert count_tokens(cut.text) <= 200
    assert "truncated to the token budget" in cut.text
    assert cut.text.splitlines()[0] == whole.text.splitlines()[0]


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("diagnose", {}, "needs 'path'"),
        ("diagnose", {"path": 12}, "must be a folder path"),
        ("diagnose", {"path": "no-such-run"}, "not an existing folder"),
        ("diagnose", {"path": "../outside"}, "outside the allowed roots"),
        ("compare_profiles", {"path": "run1"}, "needs 'baseline'"),
        ("rm_rf", {"path": "run1"}, "no tool named 'rm_rf'; tools are: diagnose"),
        ("diagnose", {"path": "run1", "rank": 8}, "rank 8 does not exist; ranks are 0-7"),
    ],
)
def test_bad_calls_return_errors(root: Path, name: str, args: dict, message: str) -> None:
    reply = ProfileTools([root]).call(name, args)
    assert reply.is_error
    assert message in reply.text


def test_an_unreadable_folder_is_an_error_not_a_traceback(root: Path) -> None:
    (root / "empty").mkdir(exist_ok=True)
    reply = ProfileTools([root]).call("diagnose", {"path": "empty"})
    assert reply.is_error
    assert reply.text.startswith("error: ")
    assert "Traceback" not in reply.text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_streamable_http_on_localhost(root: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [*CLI, "mcp", "--root", str(root), "--http", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.3)
        out = anyio.run(_session, f"http://127.0.0.1:{port}/mcp", [("diagnose", {"path": "run1"})])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert out["tools"][0].name == "diagnose"
    d = diagnose(load_profile(root / "run1"))
    assert f"median step {d.step_time_us / 1000:.1f} ms" in _text(out["results"][0])


def test_usage_sdk_snippet_runs_as_written(root: Path, tmp_path: Path) -> None:
    """The SDK client block of docs/USAGE.md, run as a user would (the root and the CLI path are
    the only substitutions: the block names /data/profiles and `advisor-chat` on the PATH)."""
    import re

    usage = (Path(__file__).parents[1] / "docs" / "USAGE.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- mcp-sdk-snippet -->\n```python\n(.*?)```", usage, re.S)
    assert block is not None
    code = block.group(1).replace("/data/profiles", str(root))
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    script = tmp_path / "client.py"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, rest = proc.stdout.split("\n", 1)
    assert first.startswith("['diagnose'")
    d = diagnose(load_profile(root / "run1"))
    assert d.causes and d.causes[0].id in rest
