"""tools/battery.py writes an eval dataset the loader accepts, over the visible scenarios only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from advisor_chat.evals.dataset import load_dataset
from advisor_chat.synth import SCENARIOS
from advisor_chat.synth.blind import BLIND_KINDS
from advisor_chat.synth.heldout_dev import HELD_OUT_DEV_KINDS

REPO = Path(__file__).resolve().parents[1]


def test_battery_dataset_loads_and_leaves_the_blind_kinds_out(tmp_path: Path) -> None:
    out = tmp_path / "battery.yaml"
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "battery.py"), "--seed", "7", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    items = load_dataset(out)
    # (the held-out development kinds are left out as the blind ones are)
    visible = [s for s in SCENARIOS if s not in BLIND_KINDS and s not in HELD_OUT_DEV_KINDS]
    assert len(items) == 6 * len(visible)
    assert {i.scenario for i in items} == set(visible)
    assert all(i.gen == {"seed": 7} for i in items)
    assert {i.lang for i in items} == {"en", "zh"}
    # every item checks the key's culprit, in the first sentence too
    exp = items[0].turns[0].expect
    assert exp.first_sentence == "culprit" and exp.culprit is not None
