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
    """advisor_chat.i18n reads locale/<lang>/LC_MESSAGES/advisor_chat.po from the package.

    Each LC_MESSAGES folder is a listed package with ``*.po`` as its data (setuptools warns about
    data folders that are importable but unlisted).
    """
    from fnmatch import fnmatch

    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    pos = sorted((REPO / "advisor_chat" / "locale").rglob("*.po"))
    assert {p.parent.parent.name for p in pos} == {"en", "zh"}
    for p in pos:
        pkg = ".".join(p.parent.relative_to(REPO).parts)
        assert pkg in cfg["packages"], pkg
        assert any(fnmatch(p.name, g) for g in cfg["package-data"].get(pkg, [])), p
