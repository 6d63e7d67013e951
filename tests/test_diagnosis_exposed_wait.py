"""Exposed communication is the job's own only net of the waits the collectives attribute.

A late rank makes its peers wait inside their collectives, and its own stall, when it falls while
its collectives run, counts as its Communication: the step trace's exposed communication then holds
that rank's cost on every rank. The same job without the fault (same seed) measures the job's own
exposed communication independently.
"""

from __future__ import annotations

import pytest

from advisor_chat.agent.advisor import Advisor
from advisor_chat.config import load_settings
from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.rules.common import EXPOSED_MIN_SHARE
from advisor_chat.ingest import load_profile

COL = "communication_not_overlapped_exclude_receive_us"


@pytest.mark.parametrize(
    ("name", "culprit"),
    [("rank0-grad-hook-sync", "0号卡"), ("nic-irq-on-train-core", "0、8号卡")],
)
def test_a_late_ranks_wait_is_not_the_jobs_exposed_communication(
    scenario, tmp_path, name, culprit
) -> None:
    healthy = load_profile(scenario("healthy", seed=5), use_cache=False, progress=False)
    st = healthy.get("step_trace")
    own = float(st.groupby("step")[COL].min().mean())
    step = float(st.groupby("step")["step_us"].median().median())
    assert own < EXPOSED_MIN_SHARE * step  # the job itself is not communication-bound

    prof = load_profile(scenario(name, seed=5), use_cache=False, progress=False)
    faulty = prof.get("step_trace")
    # the step trace alone says otherwise: every rank's exposed communication holds the wait
    assert float(faulty.groupby("step")[COL].min().mean()) >= EXPOSED_MIN_SHARE * step
    d = diagnose(prof)
    assert d.top() is not None and d.top().culprit.kind != "job"
    assert not [c.id for c in d.causes if c.mechanism.value == "exposed_communication"]
    adv = Advisor(prof, settings=load_settings(model="offline", home=tmp_path))
    first = adv.ask("主要瓶颈在哪，应该先改什么？").answer.split("。", 1)[0]
    assert culprit in first, first
