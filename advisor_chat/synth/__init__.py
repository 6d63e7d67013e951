"""Synthetic Ascend PyTorch Profiler clusters with planted faults and answer keys.

``generate(scenario, out)`` writes one ``{host}_{pid}_{17-digit ts}_ascend_pt`` folder per rank
(text export: profiler_info_{rank}.json, profiler_metadata.json, ASCEND_PROFILER_OUTPUT/ with
step_trace_time.csv, kernel_details.csv, op_statistic.csv, memory_record.csv, communication.json,
communication_matrix.json, trace_view.json) and ``answer_key.json`` under ``out``. Formats and
cross-file rules: ``shared/reference/ascend-formats.md`` §1 and §6.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
import shutil
from pathlib import Path
from typing import Any, Literal

from advisor_chat.errors import InputError
from advisor_chat.synth.model import Cluster, double_hash, simulate
from advisor_chat.synth.scenarios import SCENARIOS, T0_NS, Plan, ScenarioSpec
from advisor_chat.synth.scenarios_dev import DEV_SCENARIOS
from advisor_chat.synth.scenarios_dev2 import DEV2_SCENARIOS
from advisor_chat.synth.scenarios_dev3 import DEV3_SCENARIOS
from advisor_chat.synth.scenarios_dev4 import DEV4_SCENARIOS
from advisor_chat.synth.scenarios_dev7 import DEV7_SCENARIOS
from advisor_chat.synth.scenarios_dev8 import DEV8_SCENARIOS
from advisor_chat.synth.scenarios_dev9 import DEV9_SCENARIOS
from advisor_chat.synth.scenarios_dev10 import DEV10_SCENARIOS
from advisor_chat.synth.scenarios_dev11 import DEV11_SCENARIOS
from advisor_chat.synth.scenarios_dev12 import DEV12_SCENARIOS
from advisor_chat.synth.scenarios_dev13 import DEV13_SCENARIOS
from advisor_chat.synth.scenarios_dev14 import DEV14_SCENARIOS
from advisor_chat.synth.scenarios_dev15 import DEV15_SCENARIOS
from advisor_chat.synth.scenarios_dev16 import DEV16_SCENARIOS
from advisor_chat.synth.scenarios_dev17 import DEV17_SCENARIOS
from advisor_chat.synth.scenarios_dev18 import DEV18_SCENARIOS
from advisor_chat.synth.scenarios_dev19 import DEV19_SCENARIOS
from advisor_chat.synth.scenarios_dev20 import DEV20_SCENARIOS
from advisor_chat.synth.scenarios_dev21 import DEV21_SCENARIOS
from advisor_chat.synth.scenarios_dev22 import DEV22_SCENARIOS
from advisor_chat.synth.scenarios_dev23 import DEV23_SCENARIOS
from advisor_chat.synth.scenarios_dev24 import DEV24_SCENARIOS
from advisor_chat.synth.scenarios_dev25 import DEV25_SCENARIOS
from advisor_chat.synth.scenarios_dev26 import DEV26_SCENARIOS
from advisor_chat.synth.scenarios_dev27 import DEV27_SCENARIOS
from advisor_chat.synth.scenarios_dev28 import DEV28_SCENARIOS
from advisor_chat.synth.scenarios_dev29 import DEV29_SCENARIOS
from advisor_chat.synth.scenarios_dev30 import DEV30_SCENARIOS
from advisor_chat.synth.scenarios_dev31 import DEV31_SCENARIOS
from advisor_chat.synth.scenarios_dev32 import DEV32_SCENARIOS
from advisor_chat.synth.scenarios_dev33 import DEV33_SCENARIOS
from advisor_chat.synth.scenarios_dev34 import DEV34_SCENARIOS
from advisor_chat.synth.scenarios_dev35 import DEV35_SCENARIOS
from advisor_chat.synth.scenarios_dev36 import DEV36_SCENARIOS
from advisor_chat.synth.scenarios_ext import register as _register_more
from advisor_chat.synth.scenarios_faults import register as _register_faults
from advisor_chat.synth.scenarios_heldout2 import HELDOUT2_SCENARIOS
from advisor_chat.synth.scenarios_heldout3 import HELDOUT3_SCENARIOS
from advisor_chat.synth.scenarios_heldout4 import HELDOUT4_SCENARIOS
from advisor_chat.synth.scenarios_heldout5 import HELDOUT5_SCENARIOS
from advisor_chat.synth.scenarios_heldout6 import HELDOUT6_SCENARIOS
from advisor_chat.synth.writer import RunInfo, write_rank

__all__ = ["SCENARIOS", "ScenarioSpec", "demo_profile", "double_hash", "generate"]

_register_more(SCENARIOS)
_register_faults(SCENARIOS)
# the development sets of fault kinds (written to be tuned on)
for _spec in (
    *DEV_SCENARIOS,
    *DEV2_SCENARIOS,
    *DEV3_SCENARIOS,
    *DEV4_SCENARIOS,
    *DEV7_SCENARIOS,
    *DEV8_SCENARIOS,
    *DEV9_SCENARIOS,
    *DEV10_SCENARIOS,
    *DEV11_SCENARIOS,
    *DEV12_SCENARIOS,
    *DEV13_SCENARIOS,
    *DEV14_SCENARIOS,
    *DEV15_SCENARIOS,
    *DEV16_SCENARIOS,
    *DEV17_SCENARIOS,
    *DEV18_SCENARIOS,
    *DEV19_SCENARIOS,
    *DEV20_SCENARIOS,
    *DEV21_SCENARIOS,
    *DEV22_SCENARIOS,
    *DEV23_SCENARIOS,
    *DEV24_SCENARIOS,
    *DEV25_SCENARIOS,
    *DEV26_SCENARIOS,
    *DEV27_SCENARIOS,
    *DEV28_SCENARIOS,
    *DEV29_SCENARIOS,
    *DEV30_SCENARIOS,
    *DEV31_SCENARIOS,
    *DEV32_SCENARIOS,
    *DEV33_SCENARIOS,
    *DEV34_SCENARIOS,
    *DEV35_SCENARIOS,
    *DEV36_SCENARIOS,
    *HELDOUT2_SCENARIOS,
    *HELDOUT3_SCENARIOS,
    *HELDOUT4_SCENARIOS,
    *HELDOUT5_SCENARIOS,
    *HELDOUT6_SCENARIOS,
):
    SCENARIOS.setdefault(_spec.name, _spec)

MIN_RANKS, MAX_RANKS = 2, 4096
FIRST_STEP = 10
DEMO_SCENARIO = "seed-rank12"

# set before forking workers (fork start method shares them without pickling)
_JOB: dict[str, Any] = {}


def _work(chunk: list[int]) -> list[dict[str, Any]]:
    cl: Cluster = _JOB["cluster"]
    return [write_rank(cl, r, _JOB["out"], _JOB["info"]) for r in chunk]


def _write_all(cl: Cluster, out: Path, info: RunInfo, workers: int) -> list[dict[str, Any]]:
    ranks = list(range(cl.ranks))
    if workers <= 1 or cl.ranks < 32 or "fork" not in mp.get_all_start_methods():
        return [write_rank(cl, r, out, info) for r in ranks]
    _JOB.update(cluster=cl, out=out, info=info)
    try:
        n = max(1, cl.ranks // (workers * 8))
        chunks = [ranks[i : i + n] for i in range(0, cl.ranks, n)]
        with mp.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_work, chunks)
    finally:
        _JOB.clear()
    return [x for p in parts for x in p]


def generate(
    scenario: str,
    out: Path | str,
    *,
    ranks: int | None = None,
    steps: int | None = None,
    seed: int = 0,
    export: Literal["text", "db"] = "text",
    workers: int | None = None,
) -> Path:
    """Write a synthetic cluster profile for a named scenario.

    Args:
        scenario: a key of `SCENARIOS`.
        out: output folder; created. Rank folders of an earlier generation there (recognised by
            ``answer_key.json``) are replaced; any other ``*_ascend_pt`` data makes it refuse.
        ranks: world size (2..4096); default per scenario.
        steps: captured steps (>= 1); default per scenario.
        seed: jitter seed; the same arguments give byte-identical files.
        export: ``"text"`` (csv/json files) or ``"db"`` (``ascend_pytorch_profiler_{rank}.db`` and
            ``analysis.db`` per rank, ascend-formats.md §1.15, plus profiler_info / profiler_metadata;
            the metadata keys are also in the META_DATA table).
        workers: processes writing rank folders (default: CPU count, capped at 4).

    Returns:
        ``out``. For ``cann-upgrade-pair`` the profiles are ``out/before`` and ``out/after``;
        ``out/answer_key.json`` always.

    Raises:
        InputError: unknown scenario, size or export type out of range, or ``out`` holds
            profiling folders the generator did not write.
    """
    if scenario not in SCENARIOS:
        from advisor_chat.synth.blind import BLIND_KINDS

        # the blind held-out kinds are not listed: their names say what is planted
        shown = [n for n in SCENARIOS if n not in BLIND_KINDS]
        raise InputError(
            f"unknown scenario {scenario!r}; choose one of: {', '.join(shown)} "
            "(`advisor-chat generate --help` describes them)"
        )
    if export not in ("text", "db"):
        raise InputError(f"export must be 'text' or 'db', got {export!r}")
    spec = SCENARIOS[scenario]
    n = spec.default_ranks if ranks is None else int(ranks)
    k = spec.default_steps if steps is None else int(steps)
    lo = max(MIN_RANKS, spec.min_ranks)
    hi = min(MAX_RANKS, spec.max_ranks or MAX_RANKS)
    if not (lo <= n <= hi):
        raise InputError(f"{scenario}: ranks must be between {lo} and {hi}, got {n}")
    if n % spec.rank_multiple:
        raise InputError(f"{scenario}: ranks must be a multiple of {spec.rank_multiple}, got {n}")
    if not 1 <= k <= 1000:
        raise InputError(f"steps must be between 1 and 1000, got {k}")
    out = Path(out)
    ours = (out / "answer_key.json").is_file()
    if not ours and (any(out.glob("*_ascend_pt")) or any(out.glob("*/*_ascend_pt"))):
        raise InputError(
            f"{out} already holds profiling folders that the generator did not write; "
            "choose an empty or new output folder (existing data is never overwritten)"
        )
    if ours:  # an earlier generation: clear all of it (single profile or before/after pair)
        for old in [*out.glob("*_ascend_pt"), out / "before", out / "after"]:
            if old.is_dir():
                shutil.rmtree(old)
    if out.exists() and not out.is_dir():
        raise InputError(
            f"{out} is a file, not a folder; give a new or empty folder for the generated profile"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"cannot create the output folder {out}: {exc.strerror or exc}",
            remedy="Choose a folder you can write to",
        ) from exc
    w = workers if workers is not None else min(4, os.cpu_count() or 1)
    plans: dict[str, Plan] = spec.plans(n, k, seed)
    measured: dict[str, Any] = {}
    for sub, plan in plans.items():
        dest = out / sub if sub else out
        dest.mkdir(parents=True, exist_ok=True)
        for old in dest.glob("*_ascend_pt"):
            shutil.rmtree(old)
        cl = simulate(plan.program, plan.kinds, plan.perturb, n, k, seed, FIRST_STEP, T0_NS)
        info = dataclasses.replace(plan.info, export=export)
        res = sorted(_write_all(cl, dest, info, w), key=lambda x: x["rank"])
        measured[sub] = {
            "cluster": cl,
            "ranks": [x["steps"] for x in res],
            "folders": [x["folder"] for x in res],
        }
    key: dict[str, Any] = {"scenario": scenario, "ranks": n, "steps": k}
    key.update(spec.answer(n, k, measured))
    if spec.root_cause is not None:
        key["root_cause"] = spec.root_cause(n, k, measured)
    key["seed"] = seed
    key["export"] = export
    key["step_ids"] = [s["step"] for s in measured[next(iter(measured))]["ranks"][0]]
    key["profiles"] = {sub or ".": {"folders": m["folders"]} for sub, m in measured.items()}
    (out / "answer_key.json").write_text(
        json.dumps(key, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return out


def demo_profile(settings: Any = None) -> Path:
    """The 16-rank ``seed-rank12`` demo under ``settings.home / "demo"``, generated once.

    Reused when ``answer_key.json`` and all 16 rank folders are already there.
    """
    if settings is None:
        from advisor_chat.config import load_settings

        settings = load_settings()
    dest = Path(settings.home) / "demo"
    key = dest / "answer_key.json"
    if key.is_file():
        try:
            meta = json.loads(key.read_text(encoding="utf-8"))
            folders = meta["profiles"]["."]["folders"]
            if meta.get("scenario") == DEMO_SCENARIO and all(
                (dest / f / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").is_file() for f in folders
            ):
                return dest
        except (KeyError, ValueError, TypeError):
            pass
    tmp = dest.with_name("demo.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    generate(DEMO_SCENARIO, tmp, ranks=16, steps=3, seed=0)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    return dest
