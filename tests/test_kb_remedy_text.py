"""Remedies are shown as Markdown (CLI, UI): an `<placeholder>` would be eaten as an HTML tag."""

import re

from advisor_chat.kb import load_cases

_TAG = re.compile(r"<[A-Za-z_][A-Za-z _-]*>")


def test_no_remedy_uses_angle_bracket_placeholders() -> None:
    bad = [
        (case.id, remedy)
        for case in load_cases()
        for remedy in case.remedies
        if _TAG.search(remedy)
    ]
    assert not bad, f"use UPPER_CASE placeholders instead of <...> in remedies: {bad}"
