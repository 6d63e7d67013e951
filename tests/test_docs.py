"""The docs stay true: links resolve, the scenario list is the generator's, the README stays short."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _anchors(md: str) -> set[str]:
    """GitHub-style heading anchors of a Markdown page."""
    out = set()
    for line in md.splitlines():
        if line.startswith("#") and not line.startswith("#!"):
            title = line.lstrip("#").strip().lower()
            out.add("#" + re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target, anchor in LINK.findall(text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path = (page.parent / target).resolve()
            if not path.exists():
                broken.append(f"{page.name}: {target}")
            elif (
                anchor
                and path.suffix == ".md"
                and anchor not in _anchors(path.read_text(encoding="utf-8"))
            ):
                broken.append(f"{page.name}: {target}{anchor}")
    assert not broken, broken


def test_scenario_list_is_generated_from_the_registry() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "scenarios_doc.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    from advisor_chat.synth import SCENARIOS
    from advisor_chat.synth.blind import BLIND_KINDS

    doc = (REPO / "docs" / "SCENARIOS.md").read_text(encoding="utf-8")
    described = [name for name in SCENARIOS if name not in BLIND_KINDS]
    assert described and all(f"`{name}`" in doc for name in described)
    # blind held-out kinds are counted, never described where tuners read
    assert not any(f"`{name}`" in doc for name in BLIND_KINDS)
    assert f"Plus {len(BLIND_KINDS)} blind held-out scenarios" in doc


def test_readme_is_short_and_keeps_the_two_commands() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 120
    assert "bash tools/demo.sh" in readme and "bash tools/test.sh" in readme
    assert (REPO / ".ci" / "run").read_text().count("bash tools/test.sh") == 1
