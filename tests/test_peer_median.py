"""``peer_median`` (leave-one-out median, O(n log n)) against the direct definition."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from advisor_chat.analyzers._common import peer_median


def _direct(values: pd.Series, groups: pd.Series) -> pd.Series:
    out = pd.Series(np.nan, index=values.index, dtype="float64")
    for i in values.index:
        same = values[(groups == groups[i]) & (values.index != i)]
        same = same[np.isfinite(same.to_numpy(dtype=float))]
        out[i] = float(np.median(same)) if len(same) else np.nan
    return out


@pytest.mark.parametrize("seed", range(20))
def test_peer_median_equals_the_median_of_the_other_members(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    # ties (small integers) on even seeds, continuous values on odd ones; some NaN and inf
    v = rng.integers(0, 4, n).astype(float) if seed % 2 == 0 else rng.normal(100.0, 10.0, n)
    v[rng.random(n) < 0.15] = np.nan
    if seed % 5 == 0:
        v[0] = np.inf
    values = pd.Series(v, index=rng.permutation(n) + 1000)
    groups = pd.Series(rng.integers(0, 3, n), index=values.index)
    got = peer_median(values, groups)
    want = _direct(values, groups)
    assert np.array_equal(got.to_numpy(), want.to_numpy(), equal_nan=True)


def test_peer_median_of_a_group_of_one_is_nan() -> None:
    got = peer_median(pd.Series([5.0, 1.0, 3.0]), pd.Series(["a", "b", "b"]))
    assert np.isnan(got[0]) and got[1] == 3.0 and got[2] == 1.0
