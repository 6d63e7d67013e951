"""The blind held-out fault kinds: the measure of generalization.

Each set was built by someone who had not read the diagnosis, the agent or the analyzers, and the
developer tuning the diagnosis reads only its aggregate score (``advisor-chat eval`` withholds
held-out details). So these kinds are generated like any other scenario, but they are not
described where tuners read (``generate --help``, docs/SCENARIOS.md) and no unit test asserts
their diagnosis (a failing assertion would print the answer key).

To add a set: write ``scenarios_heldoutN.py`` with ``HELDOUTN_SCENARIOS`` and ``HELDOUTN_KINDS``,
register the scenarios in :mod:`advisor_chat.synth`, and add the kinds here.
"""

from __future__ import annotations

from advisor_chat.synth.scenarios_heldout2 import HELDOUT2_KINDS
from advisor_chat.synth.scenarios_heldout3 import HELDOUT3_KINDS
from advisor_chat.synth.scenarios_heldout4 import HELDOUT4_KINDS
from advisor_chat.synth.scenarios_heldout5 import HELDOUT5_KINDS
from advisor_chat.synth.scenarios_heldout6 import HELDOUT6_KINDS

#: Every blind held-out scenario name.
BLIND_KINDS: frozenset[str] = (
    frozenset(HELDOUT2_KINDS)
    | frozenset(HELDOUT3_KINDS)
    | frozenset(HELDOUT4_KINDS)
    | frozenset(HELDOUT5_KINDS)
    | frozenset(HELDOUT6_KINDS)
)
