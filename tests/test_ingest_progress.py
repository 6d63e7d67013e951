"""Progress of a large load on stderr when it is not a terminal (a log, CI, a pipe)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from advisor_chat.config import load_settings
from advisor_chat.ingest import load_profile
from advisor_chat.synth import generate


@pytest.fixture(scope="module")
def cluster_40(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate("seed-rank12", tmp_path_factory.mktemp("p40") / "prof", ranks=40, steps=3)


def test_plain_lines_per_quarter_then_none_when_cached(
    cluster_40: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = load_settings(home=tmp_path / "home")
    load_profile(cluster_40, settings=settings, cache_write="now")  # default: on for 40 folders
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("reading ranks:")]
    # 40 folders read in this process, one callback per folder: a line after the first folder,
    # then one as each quarter is reached (10, 20, 30, 40), never one per folder
    done = [int(re.match(r"reading ranks: (\d+)/40 ", ln).group(1)) for ln in lines]
    assert done == [1, 10, 20, 30, 40], err
    assert re.fullmatch(r"reading ranks: 40/40 \(100%\) \d+\.\d s", lines[-1]), lines
    assert "\x1b[" not in err  # no terminal escapes in a log

    again = load_profile(cluster_40, settings=settings)
    assert again.cache_hit
    assert "reading ranks" not in capsys.readouterr().err  # nothing to read


def test_progress_off_and_small_loads_print_nothing(
    cluster_40: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], real_samples: Path
) -> None:
    load_profile(cluster_40, settings=load_settings(home=tmp_path / "a"), progress=False)
    load_profile(real_samples / "pt-text-level1-2rank", settings=load_settings(home=tmp_path / "b"))
    assert capsys.readouterr().err == ""
