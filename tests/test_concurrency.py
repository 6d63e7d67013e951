"""Several processes on one fresh ``ADVISOR_HOME`` (issue 24): the CLI, the page, a notebook and CI
jobs share it. Three rounds, each of four ``advisor-chat ask`` started at once on a new home, must
all answer, with no traceback and no warning about the case index: one builds it (under
``kb.index.index_lock``) and the profile cache, the others wait and read them. Before the lock, 7
of 12 such processes died with ``chromadb.errors.NotFoundError``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PROCESSES = 4
ROUNDS = 3


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_concurrent_first_run_asks_on_one_fresh_home_all_answer(
    scenario, tmp_path: Path, round_: int
) -> None:
    prof = scenario("seed-rank12")
    home = tmp_path / f"home{round_}"
    cli = Path(sys.executable).with_name("advisor-chat")
    env = {**os.environ, "ADVISOR_HOME": str(home), "COLUMNS": "120"}
    procs = [
        subprocess.Popen(
            [str(cli), "ask", str(prof), "why is rank 12 slow?"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(PROCESSES)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    firsts = set()
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, (out[-800:], err[-1500:])
        assert "Traceback" not in err and "Error" not in err, err[-1500:]
        assert "case index" not in err or "ready" in err, err[-800:]  # no "not ready"/"unreadable"
        firsts.add(out.strip().splitlines()[0])
    assert len(firsts) == 1, firsts  # the same answer from every process
    assert (home / "index").is_dir()
