"""The eighteenth development set of fault kinds (scenarios_dev20.py): what each kind writes.

The planted fault is in the written files, read with csv / json independently of ingest, and the
answer keys agree with what is recomputed here from those files.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

from _dev_files import PO, kernel_rows, rank_dirs, read_csv, trace


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _steps(d: Path) -> list[dict[str, str]]:
    return read_csv(d, "step_trace_time.csv")


def _comm(d: Path) -> dict[str, dict[str, Any]]:
    """{step key: {op name: record}} of communication.json's collective section."""
    raw = json.loads((d / PO / "communication.json").read_text())
    return {s: v["collective"] for s, v in raw.items()}


def _wait_ms(d: Path) -> float:
    return sum(
        ops["Total Op Info"]["Communication Time Info"]["Wait Time(ms)"]
        for ops in _comm(d).values()
    )


def _transit_mb(v: dict[str, Any]) -> float:
    bw = v["Communication Bandwidth Info"]
    return bw["HCCS"]["Transit Size(MB)"] + bw["RDMA"]["Transit Size(MB)"]


# ---------------------------------------------------------------- tied-embedding-regather
def test_tied_embedding_is_gathered_twice_every_step(scenario) -> None:
    root = scenario("tied-embedding-regather")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    head_shape = f"4096,4096;{nums['vocab_size']},4096"
    for d in dirs.values():
        for ops in _comm(d).values():
            ag = {n: v for n, v in ops.items() if n.startswith(ev["collective"])}
            sizes = sorted(_transit_mb(v) for v in ag.values())
            # two whole-table gathers a step, far bigger than the optimizer's all-gather
            assert len(sizes) == 3
            assert sizes[1] > 50 * sizes[0] and abs(sizes[2] - sizes[1]) < 0.01 * sizes[2]
        # the device row right before each LM-head MatMul is an all-gather (HCCL)
        rows = read_csv(d, "kernel_details.csv")
        heads = [
            i
            for i, x in enumerate(rows)
            if x["Type"] == "MatMulV2" and x["Input Shapes"].strip('"') == head_shape
        ]
        assert len(heads) == key["steps"]
        assert all(rows[i - 1]["Type"] == ev["collective"] for i in heads)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["embedding_allgathers_per_step"] == 2
    assert abs(nums["saving_us_per_step"] - nums["extra_allgather_us_median"]) < (
        0.05 * nums["extra_allgather_us_median"]
    )
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]


# ---------------------------------------------------------------- padded-to-max-seqlen
def test_every_kernel_runs_at_the_padded_length(scenario) -> None:
    root = scenario("padded-to-max-seqlen")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    seq = ev["seq_length"]
    comp: dict[int, float] = {}
    for r, d in dirs.items():
        rows = kernel_rows(d)
        mm = [x for x in rows if x["Type"] == "MatMulV2"]
        assert mm and all(str(seq) in x["Input Shapes"] for x in mm)
        fa = [x for x in rows if x["Type"].startswith("FlashAttentionScore")]
        assert fa and all(ev["attention_mask_shape"] in x["Input Shapes"] for x in fa)
        assert all(x["Input Data Types"].endswith("DT_BOOL") for x in fa)
        # the same shapes in every step (padded, not variable)
        by_step = Counter((x["Step Id"], x["Input Shapes"]) for x in fa)
        assert len({s for s, _ in by_step}) == key["steps"]
        assert len({sh for _, sh in by_step}) == 2
        md = json.loads((d / "profiler_metadata.json").read_text())
        assert md["distributed_args"]["seq_length"] == seq
        assert md["distributed_args"]["variable_seq_lengths"] is False
        st = _steps(d)
        comp[r] = sum(float(x["Computing"]) for x in st) / len(st)
    assert max(comp.values()) < 1.03 * min(comp.values())  # every rank alike
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["culprit_ranks"] == []
    assert nums["padding_share_of_tokens"] == 1 - ev["real_tokens_per_sample"] / seq
    assert nums["flash_attention_us_per_step"] > 10 * nums["flash_attention_us_per_step_packed"]
    assert nums["saving_us_per_step"] > 0.5 * nums["median_step_us"]


# ---------------------------------------------------------------- inline-eval-steps
def test_eval_steps_run_extra_forward_passes_on_every_rank(scenario) -> None:
    root = scenario("inline-eval-steps")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    on = set(ev["eval_steps"])
    assert on and all(s % ev["eval_interval"] == 0 for s in on)
    step_on: dict[int, list[float]] = {s: [] for s in on}
    for d in dirs.values():
        st = {int(x["Step"]): float(x["Stage"]) for x in _steps(d)}
        off = [v for s, v in st.items() if s not in on]
        for s in on:
            assert st[s] > 1.5 * median(off)
            step_on[s].append(st[s])
        n = Counter((int(x["Step Id"]), x["Type"]) for x in kernel_rows(d))
        for s in st:
            fwd, bwd = n[(s, "FlashAttentionScore")], n[(s, "FlashAttentionScoreGrad")]
            assert bwd == nums["flash_attention_fwd_per_train_step"]
            want = nums["flash_attention_fwd_per_eval_step"] if s in on else bwd
            assert fwd == want
    for vals in step_on.values():  # every rank alike in the eval steps
        assert max(vals) < 1.05 * min(vals)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "job" and rc["steps"] == ev["eval_steps"]
    assert nums["extra_us_per_eval_step"] > 0.5 * nums["step_us_train_steps_median"]
    assert abs(nums["wait_us_eval_steps_median"] - nums["wait_us_train_steps_median"]) < 1000


# ---------------------------------------------------------------- power-capped-node
def test_one_node_runs_at_a_capped_clock(scenario) -> None:
    root = scenario("power-capped-node")
    key = _key(root)
    nums, ev = key["expected_numbers"], key["evidence"]
    dirs = rank_dirs(root)
    assert len(dirs) == key["ranks"]
    bad = set(ev["culprit_ranks"])
    mm: dict[int, float] = {}
    wait: dict[int, float] = {}
    for r, d in dirs.items():
        mhz = {e["args"]["MHz"] for e in trace(d) if e.get("name") == "AI Core Freq"}
        assert mhz == {ev["aicore_mhz"] if r in bad else ev["aicore_mhz_others"]}
        mm[r] = median(float(x["Duration(us)"]) for x in kernel_rows(d) if x["Type"] == "MatMulV2")
        wait[r] = _wait_ms(d)
    good = [r for r in dirs if r not in bad]
    assert min(mm[r] for r in bad) > 1.3 * max(mm[r] for r in good)
    assert min(wait[r] for r in good) > 3 * max(wait[r] for r in bad)
    rc = key["root_cause"]
    assert rc["culprit_kind"] == "group" and set(rc["culprit_ranks"]) == bad
    assert not set(rc["victim_ranks"]) & bad
    assert nums["saving_us_per_step"] > 0.1 * nums["median_step_us"]
