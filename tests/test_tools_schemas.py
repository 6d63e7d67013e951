"""Snapshot of every tool's JSON schema: what models see must change only on purpose.

Regenerate after an intended change (new analyzer, new parameter, edited description):

    ADVISOR_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_tools_schemas.py
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest

from advisor_chat.analyzers.base import load_all
from advisor_chat.tools import tool_schemas

SNAPSHOT = Path(__file__).parent / "snapshots" / "tool_schemas.json"
REGEN = "ADVISOR_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_tools_schemas.py"


def _current() -> str:
    return json.dumps(tool_schemas(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def test_tool_schemas_match_snapshot() -> None:
    now = _current()
    if os.environ.get("ADVISOR_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(now, encoding="utf-8")
    if not SNAPSHOT.exists():
        pytest.fail(f"no snapshot at {SNAPSHOT}; create it with: {REGEN}")
    old = SNAPSHOT.read_text(encoding="utf-8")
    if old != now:
        diff = "".join(
            difflib.unified_diff(
                old.splitlines(True), now.splitlines(True), "snapshot", "current", n=2
            )
        )
        pytest.fail(
            "tool schemas changed (what models see). If intended, regenerate with:\n"
            f"  {REGEN}\n\n{diff[:6000]}"
        )


def test_every_registered_analyzer_is_a_tool_with_a_clean_schema() -> None:
    schemas = {s["name"]: s for s in tool_schemas()}
    reg = load_all()
    assert set(reg) <= set(schemas)
    assert {"search_cases", "show_table"} <= set(schemas)
    for name, s in schemas.items():
        params = s["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False, name
        assert s["description"], name
        for pname, prop in params["properties"].items():
            assert prop.get("description"), f"{name}.{pname} has no description"
            assert "anyOf" not in prop and "$ref" not in json.dumps(prop), f"{name}.{pname}"
