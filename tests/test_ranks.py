"""Rank sets as text and the peer sample every analysis reads the heavy files of."""

from __future__ import annotations

import itertools

import pytest

from advisor_chat.ranks import format_ranks, spread_sample


def test_format_ranks_runs_and_separator() -> None:
    assert format_ranks([5, 0, 1, 2]) == "0-2, 5"
    assert format_ranks([5, 0, 1, 2], sep="、") == "0-2、5"
    assert format_ranks([]) == "none"


@pytest.mark.parametrize("world", [64, 1000, 1024, 4096])
def test_the_sample_does_not_depend_on_which_focus_rank_is_left_out(world: int) -> None:
    everyone = spread_sample(range(world), 16)
    assert len(everyone) == 16 and everyone[0] == 0 and everyone[-1] == world - 1
    # evenly spread: the spacings differ by at most one rank (rounding)
    gaps = [b - a for a, b in itertools.pairwise(everyone)]
    assert max(gaps) - min(gaps) <= 1
    for focus in (1, 12, world // 2 + 1):
        if focus in everyone:
            continue
        peers = spread_sample([r for r in range(world) if r != focus], 16)
        assert peers == everyone, focus


def test_small_pools_are_taken_whole_and_picks_are_members() -> None:
    assert spread_sample([7, 3, 3, 9], 16) == [3, 7, 9]
    pool = [2, 3, 5, 40, 41, 42, 43, 90, 91, 300]
    picked = spread_sample(pool, 4)
    assert set(picked) <= set(pool) and picked == sorted(picked) and len(picked) <= 4
    assert picked[0] == 2 and picked[-1] == 300
