"""Durations in prose: ms, and µs below 0.1 ms (never '0.0 ms' for a measured time)."""

from __future__ import annotations

import math

import pytest

from advisor_chat.agent.grounding import extract_numbers
from advisor_chat.diagnosis.text import ms


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (45.2, "45 µs"),
        (0.5, "0.50 µs"),
        (99.9, "100 µs"),
        (100.0, "0.10 ms"),
        (120.6, "0.12 ms"),
        (12_345.0, "12.3 ms"),
        (250_000.0, "250 ms"),
        (0.0, "0.0 ms"),
        (math.nan, "n/a"),
    ],
)
def test_ms(us: float, text: str) -> None:
    assert ms(us) == text


@pytest.mark.parametrize("us", [45.2, 7.0, 12_345.0])
def test_the_text_reads_back_as_the_same_time(us: float) -> None:
    # grounding reads the number with its unit: the figure said is the figure measured
    (n,) = extract_numbers(ms(us))
    assert n.value * n.scale == pytest.approx(us, rel=0.01)
