"""The wheel must carry every subpackage and the case library (non-editable installs)."""

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def test_every_subpackage_and_the_case_library_are_packaged() -> None:
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    found = {
        ".".join(p.parent.relative_to(REPO).parts)
        for p in (REPO / "advisor_chat").rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert cfg["package-dir"]["advisor_chat._knowledge"] == "knowledge"
    assert {"advisor_chat._knowledge", "advisor_chat._knowledge.cases"} <= listed
    assert any((REPO / "knowledge" / "cases").glob("*.md"))


def test_the_message_catalogues_are_package_data() -> None:
    """advisor_chat.i18n reads locale/<lang>/LC_MESSAGES/advisor_chat.po from the package."""
    from fnmatch import fnmatch

    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = cfg["package-data"]["advisor_chat"]
    pos = sorted((REPO / "advisor_chat" / "locale").rglob("*.po"))
    assert {p.parent.parent.name for p in pos} == {"en", "zh"}
    for p in pos:
        rel = p.relative_to(REPO / "advisor_chat").as_posix()
        assert any(fnmatch(rel, g) for g in globs), rel
