"""The ``diagnose`` tool: first tool offered, short model-readable text of the causes."""

from __future__ import annotations

import re

from _analyzers_a_helpers import make_profile
from test_diagnosis_rules import MS, rows

from advisor_chat.config import Settings
from advisor_chat.tools import build_tools, tool_schemas
from advisor_chat.tools.render import DATA_CLOSE, DATA_OPEN


def _straggler_profile():
    delta = {(5, None): {"free": 30 * MS}}
    delta.update({(r, None): {"comm": 30 * MS} for r in range(8) if r != 5})
    return make_profile({"step_trace": rows(8, 3, delta=delta)})


def test_diagnose_is_the_first_tool_and_in_the_schemas() -> None:
    tools = build_tools(_straggler_profile(), settings=Settings())
    assert tools[0].name == "diagnose"
    schema = tools[0].schema
    assert "Valid ranks: 0-7" in schema["properties"]["rank"]["description"]
    assert schema["properties"]["language"]["enum"] == ["en", "zh"]
    assert tool_schemas()[0]["name"] == "diagnose"


def test_diagnose_text_names_culprit_victims_numbers_and_role() -> None:
    tool = build_tools(_straggler_profile(), settings=Settings())[0]
    out = tool.invoke({"rank": 3})
    assert out.error is None and out.diagnosis is not None
    text = out.text
    assert text.startswith("diagnose(rank=3):") and DATA_OPEN in text and DATA_CLOSE in text
    assert (
        "cause 1 cause.host_stall.r5 [high] host_stall (scheduling); culprit rank: rank 5" in text
    )
    # every victim loses 30.0 ms per step, 30/140 of its step, waiting in collectives
    assert "rank 0 30.0 ms/step (21.4%, collective_wait)" in text
    assert "expected gain: 30.0 ms per step (estimate)" in text
    # a host stall without GC-like pauses is the host-dispatch case
    assert re.search(
        r"^  action: .*\[gain 30\.0 ms/step, estimate\] \(case host-dispatch-bound\)$", text, re.M
    )
    assert re.search(r"^  check: ", text, re.M)
    assert "rank 3: victim of cause 1 (host_stall), 30.0 ms/step (21.4%, collective_wait)" in text
    assert out.findings and all(f.id for f in out.findings)


def test_diagnose_in_chinese_and_bad_rank() -> None:
    tool = build_tools(_straggler_profile(), settings=Settings())[0]
    zh = tool.invoke({"language": "zh"}).text
    # no launch delays in this profile: the cause is "device idle (Free)", not a measured host stall
    assert "5号卡设备空闲（Free）" in zh and "culprit rank: 5号卡" in zh
    assert "主机侧阻塞：" not in zh
    bad = tool.invoke({"rank": 99})
    assert bad.error is not None and "rank 99 does not exist; ranks are 0-7" in bad.text
