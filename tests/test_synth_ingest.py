"""Every scenario loads through ingest and the loaded tables agree with the answer key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.synth import SCENARIOS

pytestmark = pytest.mark.slow  # ingest of 10 profiles without cache


def _load(path: Path):
    from advisor_chat.ingest import load_profile

    return load_profile(path, use_cache=False)


def _profiles(root: Path) -> list[Path]:
    return [root / "before", root / "after"] if (root / "before").is_dir() else [root]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_loads_and_agrees(scenario, name: str) -> None:
    root = scenario(name)
    key = json.loads((root / "answer_key.json").read_text())
    n = key["expected_numbers"]
    loaded = {p.name: _load(p) for p in _profiles(root)}
    for prof in loaded.values():
        assert prof.ranks == list(range(key["ranks"]))
        assert prof.steps == key["step_ids"]
        st = prof.get("step_trace")
        assert len(st) == key["ranks"] * key["steps"]
        total = st["computing_us"] + st["communication_not_overlapped_us"] + st["free_us"]
        assert (total - st["step_us"]).abs().max() < 1e-3
    prof = next(iter(loaded.values()))
    st = prof.get("step_trace")
    per_rank = st.groupby("rank").mean(numeric_only=True)
    if name == "seed-rank12":
        assert per_rank["free_us"].idxmax() == 12
        assert per_rank.loc[12, "free_us"] == pytest.approx(
            n["slow_rank_free_us_per_step"], abs=0.01
        )
        ops = prof.get("comm_ops")
        sync = ops.groupby("rank")["synchronization_ms"].sum()
        assert sync.idxmin() == 12 and sync[12] == pytest.approx(
            n["slow_rank_sync_ms_total"], abs=0.01
        )
    elif name == "matmul-shape-regression":
        k = prof.get("kernels")
        op = key["op"]
        sel = k[
            (k["op_type"] == op["op_type"])
            & (k["input_shapes"].str.strip('"') == op["input_shapes"])
        ]
        avg = sel.groupby("rank")["duration_us"].mean()
        assert avg.idxmax() == key["slow_ranks"][0]
        assert avg.max() == pytest.approx(n["slow_rank_avg_us_at_shape"], abs=0.01)
        assert k.groupby("rank").size().nunique() == 1
    elif name == "slow-link":
        m = prof.get("comm_matrix")
        rd = m[m["transport"] == "RDMA"]
        bw = rd.groupby(["src_rank", "dst_rank"])["bandwidth_gbps"].median()
        sl = key["slow_link"]
        assert bw.idxmin() == (sl["src_rank"], sl["dst_rank"])
    elif name == "comm-bound-no-overlap":
        share = (
            st.groupby("rank")["communication_not_overlapped_us"].sum()
            / st.groupby("rank")["step_us"].sum()
        ).median()
        assert share == pytest.approx(n["median_comm_not_overlapped_share"], abs=1e-3)
    elif name == "cann-upgrade-pair":
        for sub in ("before", "after"):
            p = loaded[sub]
            k = p.get("kernels")
            per_step = (
                k[k["rank"] == 0]["accelerator_core"].isin(["HCCL", "COMMUNICATION"])
            ).sum() / key["steps"]
            assert per_step == n[f"{sub}_hccl_ops_per_step"]
            assert set(p.get("meta")["cann_version"]) == {n[f"{sub}_cann_version"]}
    elif name == "dataloader-stall":
        stall = st[st["step"].isin(n["stall_steps"])]
        assert stall["free_us"].median() == pytest.approx(n["median_free_us_stall_steps"], abs=0.01)
    elif name == "hccl-wait-skew":
        ops = prof.get("comm_ops")
        first = ops[ops["op_name"] == n["first_op_name"]].set_index("rank")["synchronization_ms"]
        late = key["slow_ranks"][0]
        assert first[late] == pytest.approx(0, abs=1e-6)
        assert first.drop(late).median() == pytest.approx(
            n["first_op_sync_ms_median_others"], abs=0.01
        )
    elif name == "degradation":
        s = st[st["rank"] == key["slow_ranks"][0]].sort_values("step")["step_us"].tolist()
        assert s[-1] == pytest.approx(n["step_us_last"], abs=0.01) and s[0] == pytest.approx(
            n["step_us_first"], abs=0.01
        )
    elif name == "compute-straggler-hidden":
        assert per_rank["computing_us"].idxmax() == key["slow_ranks"][0]
        assert per_rank["computing_us"].max() == pytest.approx(
            n["slow_rank_computing_us_per_step"], abs=0.01
        )
    elif name == "healthy":
        mean_total = (
            st["computing_us"] + st["communication_not_overlapped_us"] + st["free_us"]
        ).mean()
        for c in ("computing_us", "communication_not_overlapped_us", "free_us"):
            assert (st[c].max() - st[c].min()) / mean_total < 0.05
    elif name == "pipeline-stage-imbalance":
        half = key["ranks"] // 2
        bub = per_rank["bubble_us"]
        assert (bub.loc[: half - 1] == 0).all() and (bub.loc[half:] > 0).all()
        assert bub.loc[half:].median() == pytest.approx(n["stage1_bubble_us_per_step"], abs=0.01)
        ops = prof.get("comm_ops")
        assert set(ops[ops["rank"] >= half]["comm_kind"]) == {"collective", "p2p"}
    elif name == "rotating-stalls":
        free = st.set_index(["step", "rank"])["free_us"]
        assert sorted(free[free > 300_000].index) == sorted(map(tuple, n["events"]))
    elif name == "end-of-step-stall":
        assert per_rank["free_us"].idxmax() == key["slow_ranks"][0]
    elif name in ("slow-group-shape", "host-bound-last-arriver"):
        ops = prof.get("comm_ops")
        wait = ops.groupby("rank")["wait_ms"].sum()
        assert int(wait.idxmin()) in key["root_cause"]["culprit_ranks"]
    elif name == "two-ranks":
        assert per_rank["computing_us"].loc[1] / per_rank["computing_us"].loc[0] == pytest.approx(
            n["computing_ratio"], abs=1e-4
        )
    elif name == "job-idle":
        assert per_rank["free_us"].min() > 0.9 * n["idle_us_planted"]
    elif name == "small-collectives":
        k = prof.get("kernels")
        hccl = k[k["accelerator_core"].isin(["HCCL", "COMMUNICATION"])]
        assert (hccl.groupby(["rank", "step"]).size() == n["hccl_ops_per_step"]).all()
    elif name == "lost-first-step":
        k = prof.get("kernels")
        per = k.groupby(["rank", "step"]).size().unstack()
        first = n["artifact_step"]
        assert (per[first] < per.drop(columns=first).min(axis=1)).all()
