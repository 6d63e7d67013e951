"""Grounding check: number extraction (EN/ZH, units, identifiers) and matching at displayed precision."""

from __future__ import annotations

import pandas as pd
import pytest

from advisor_chat.agent.grounding import NumberPool, check_grounding, extract_numbers


def _texts(text: str) -> list[str]:
    return [n.text for n in extract_numbers(text)]


def test_extracts_numbers_with_units_and_skips_identifiers() -> None:
    text = (
        "Rank 12 idles 39.1 ms (27.1%) per step; p90 212 us, 1.5 s total, 18.06 GB/s, 120 MB. "
        "See `rank12-free-16card`, file step_trace_time.csv, CANN 8.0.RC2, Level1, o200k, "
        "rank12-free-16card, 12号卡，第3步 2.5秒"
    )
    assert _texts(text) == [
        "12",
        "39.1 ms",
        "27.1%",
        "212 us",
        "1.5 s",
        "18.06 GB/s",
        "120 MB",
        "12",
        "3",
        "2.5秒",
    ]


def test_decimals_and_dimensions() -> None:
    n = extract_numbers("4.20 ms")[0]
    assert (n.value, n.decimals, n.dim, n.scale) == (4.2, 2, "time", 1000.0)
    assert extract_numbers("-3.5%")[0].value == 3.5  # sign ignored: deltas are written both ways
    assert extract_numbers("12,345.6 us")[0].value == 12345.6


@pytest.fixture
def pool() -> NumberPool:
    p = NumberPool()
    p.add_named("free_us", 39082.793)
    p.add_named("free_share", 0.2807)
    p.add_named("bandwidth_gbps", 5.357)
    p.add(12)
    return p


@pytest.mark.parametrize(
    "text",
    [
        "39.1 ms",  # us -> ms at one decimal
        "39.08 ms",
        "39083 us",
        "39082.8 us",
        "0.039 s",
        "39 毫秒",
        "28.1%",  # ratio -> percent
        "28%",
        "5.36 GB/s",
        "rank 12",
    ],
)
def test_grounded_forms(pool: NumberPool, text: str) -> None:
    g = check_grounding(text, pool)
    assert g.numbers_total == 1 and g.ungrounded == [], text


@pytest.mark.parametrize(
    "text",
    [
        "39.2 ms",  # wrong at the displayed precision
        "40 ms",
        "28.2%",
        "39.1 GB/s",  # right digits, wrong dimension
        "5.36 ms",
        "rank 13",
    ],
)
def test_ungrounded_forms(pool: NumberPool, text: str) -> None:
    g = check_grounding(text, pool)
    assert g.ungrounded == [text.split()[-1] if text.startswith("rank") else text], text


def test_counts_and_chinese_text(pool: NumberPool) -> None:
    g = check_grounding("12号卡每步 Free 多 39.1 ms（占 28.1%），不是 7.7 ms。", pool)
    assert (g.numbers_total, g.numbers_grounded, g.ungrounded) == (4, 3, ["7.7 ms"])


def test_table_cells_and_text_feed_the_pool() -> None:
    p = NumberPool()
    p.add_table(pd.DataFrame({"launch_delay_us": [188.0, 1907.0], "name": ["a", "b"]}))
    p.add_text("threshold 5%, HCCL_CONNECT_TIMEOUT 120 s")
    g = check_grounding("p90 1.91 ms vs 188 us; threshold 5%; timeout 120 s = 2 min", p)
    assert g.ungrounded == ["2"]
