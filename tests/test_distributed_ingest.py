"""Per-rank ingest on a local Dask cluster gives the same tables as the single-process loader."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("dask.distributed")

from dask.distributed import Client, LocalCluster

from advisor_chat.config import load_settings
from advisor_chat.errors import InputError
from advisor_chat.ingest import load_profile
from advisor_chat.ingest.distributed import load_profile_distributed
from advisor_chat.synth import generate


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def _assert_same(a: pd.DataFrame, b: pd.DataFrame, name: str) -> None:
    pd.testing.assert_frame_equal(
        a.reset_index(drop=True), b.reset_index(drop=True), check_exact=True, obj=name
    )


@pytest.mark.slow
def test_distributed_matches_single_process(tmp_path: Path, client: Client) -> None:
    prof = generate("slow-link", tmp_path / "prof", ranks=16, steps=2, seed=3)
    settings = load_settings(home=tmp_path / "home")
    single = load_profile(prof, settings=settings, use_cache=False, workers=1)
    dist = load_profile_distributed(prof, client, settings=settings, use_cache=False, batch_size=3)
    assert dist.stats["tasks"] == 6  # 16 rank folders in batches of 3 ran as 6 tasks
    # the workers ran the light batch reader: heavy files are read later, on the client, on demand
    assert dist.tables.loaded("kernels") is None and dist.tables.loaded("host_dispatch") is None
    assert dist.has("kernels") and dist.available_ranks("host_dispatch") == list(range(16))
    assert set(dist.tables) == set(single.tables)
    assert len(single.tables) >= 6
    for name in single.tables:
        _assert_same(dist.tables[name], single.tables[name], name)
    assert dist.profile_id == single.profile_id
    assert dist.layout == single.layout
    assert dist.ranks == list(range(16))
    assert [w.code for w in dist.warnings] == [w.code for w in single.warnings]
    assert {k: [s.path for s in v] for k, v in dist.sources.items()} == {
        k: [s.path for s in v] for k, v in single.sources.items()
    }


@pytest.mark.slow
def test_distributed_writes_the_shared_cache(tmp_path: Path, client: Client) -> None:
    prof = generate("healthy", tmp_path / "prof", ranks=8, steps=2)
    settings = load_settings(home=tmp_path / "home")
    dist = load_profile_distributed(prof, client.scheduler.address, settings=settings)
    again = load_profile(
        prof, settings=settings
    )  # served from the cache the distributed load wrote
    assert again.stats["files_parsed"] == 0
    for name, df in dist.tables.items():
        # the cache keeps the communication tables' text columns as categoricals: same values
        pd.testing.assert_frame_equal(
            again.tables[name].reset_index(drop=True),
            df.reset_index(drop=True),
            check_exact=True,
            check_dtype=False,
            check_categorical=False,
            obj=name,
        )


def test_distributed_bad_input(tmp_path: Path, client: Client) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_profile_distributed(tmp_path / "missing", client)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="empty"):
        load_profile_distributed(tmp_path / "empty", client)
