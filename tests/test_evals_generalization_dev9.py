"""The seventh development set of fault kinds (scenarios_dev9.py) and the mechanisms it exposed.

- The planted fault is in the written files (read with csv / json, independently of ingest).
- The diagnosis' evidence on those profiles, checked against the files and the answer keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median
from typing import Any

from _dev_files import kernel_rows, rank_dirs, trace


def _key(root: Path) -> dict[str, Any]:
    return json.loads((root / "answer_key.json").read_text())


def _gaps_us(rows: list[dict[str, str]]) -> list[float]:
    """Device idle before each compute kernel of a step (start − previous end), µs."""
    out = []
    prev = None
    for x in sorted(rows, key=lambda x: (int(x["Step Id"]), float(x["Start Time(us)"]))):
        s = float(x["Start Time(us)"])
        if prev is not None and prev[0] == x["Step Id"]:
            out.append(s - prev[1])
        prev = (x["Step Id"], s + float(x["Duration(us)"]))
    return out


# ---------------------------------------------------------------- profiler-overhead
def test_profiler_overhead_is_in_the_files(scenario) -> None:
    root = scenario("profiler-overhead")
    key = _key(root)
    for r, d in rank_dirs(root).items():
        info = json.loads((d / f"profiler_info_{r}.json").read_text())
        assert info["config"]["common_config"]["with_stack"] is True
        assert info["config"]["experimental_config"]["_profiler_level"] == "Level2"
    rows = kernel_rows(next(iter(rank_dirs(root).values())))
    want = key["expected_numbers"]["device_gap_us_between_kernels_median"]
    assert abs(median(_gaps_us(rows)) - want) <= 0.15 * want


# ---------------------------------------------------------------- item-sync-every-step
def test_item_syncs_are_in_the_trace(scenario) -> None:
    root = scenario("item-sync-every-step")
    key = _key(root)
    n_steps = 4
    for d in list(rank_dirs(root).values())[:3]:
        ev = trace(d)
        syncs = [e for e in ev if e.get("name") == "AscendCL@aclrtSynchronizeStream"]
        items = [e for e in ev if e.get("name") == "aten::item"]
        assert len(syncs) == len(items) == key["expected_numbers"]["syncs_per_step"] * n_steps
        # the device idles after each of them: the kernel after the call starts late
        rows = sorted(kernel_rows(d), key=lambda x: float(x["Start Time(us)"]))
        starts = [float(x["Start Time(us)"]) for x in rows]
        ends = [s + float(x["Duration(us)"]) for s, x in zip(starts, rows, strict=True)]
        small = key["expected_numbers"]["idle_after_grad_norm_item_us_median"]
        for e in syncs:
            done = float(e["ts"]) + float(e["dur"])
            j = next(i for i, s in enumerate(starts) if s > done)
            assert starts[j] - ends[j - 1] >= 0.8 * small


# ---------------------------------------------------------------- the mechanisms they exposed
def _load(root: Path) -> Any:
    from advisor_chat.ingest import load_profile

    return load_profile(root, use_cache=False, progress=False)


def test_sync_stalls_placed_after_each_item_call(scenario) -> None:
    from advisor_chat.diagnosis import diagnose
    from advisor_chat.diagnosis.decompose import sync_stalls
    from advisor_chat.diagnosis.hypotheses import judge

    root = scenario("item-sync-every-step")
    key = _key(root)["expected_numbers"]
    prof = _load(root)
    ss = sync_stalls(prof, prof.ranks)
    assert ss is not None and ss.calls_per_step == key["syncs_per_step"]
    where = {x.position: x for x in ss.spots}
    assert set(where) == {"after_forward", "after_backward"}
    for pos, name in (
        ("after_forward", "idle_after_loss_item_us_median"),
        ("after_backward", "idle_after_grad_norm_item_us_median"),
    ):
        assert abs(where[pos].idle_us - key[name]) <= 0.1 * key[name]
    assert where["after_backward"].op_type == "ForeachMulScalar"
    d = diagnose(prof)
    top = d.causes[0]
    assert top.culprit.kind == "job" and "synchronize_stream" in top.symptom_tags
    assert "aclrtSynchronizeStream" in top.summary and "同步" in top.summary_zh
    assert ".item()" in top.remedies[0].text and top.remedies[0].case_id == (
        "sync-stream-launch-blocking"
    )
    assert judge(d, "host_sync").status == "supported"
    # one figure: the cause's gain is what its remedy gets back
    assert top.gain_us == top.remedies[0].gain_us == ss.idle_us
    # healthy links with communication data: the network is contradicted (not "no data")
    v = judge(d, "network")
    assert v.status == "contradicted" and "late rank" not in v.reason


def test_real_sync_calls_and_the_idle_after_them(real_samples: Path) -> None:
    """pt-text-level1-2rank: the idle after each synchronize call, computed here from the raw
    trace events and kernel_details.csv rows, is what sync_stalls reports."""
    import csv
    import io

    from advisor_chat.diagnosis.decompose import SYNC_IDLE_MIN_US, sync_stalls

    root = real_samples / "pt-text-level1-2rank"
    idles = []
    for d in sorted(root.glob("rank*_ascend_pt")):
        out = d / "ASCEND_PROFILER_OUTPUT"
        ev = json.loads((out / "trace_view.json").read_text())
        syncs = [e for e in ev if e.get("ph") == "X" and "Synchronize" in str(e.get("name"))]
        rows = list(csv.DictReader(io.StringIO((out / "kernel_details.csv").read_text())))
        tasks = sorted(
            (float(r["Start Time(us)"]), float(r["Duration(us)"]), r["Type"]) for r in rows
        )
        for e in syncs:
            done = float(e["ts"]) + float(e["dur"])
            nxt = [i for i, t in enumerate(tasks) if t[0] > done and not t[2].startswith("hcom")]
            if not nxt or nxt[0] == 0:
                continue
            j = nxt[0]
            prev_end = max(s + du for s, du, _ in tasks[:j])
            if tasks[j][0] - prev_end >= SYNC_IDLE_MIN_US:
                idles.append(tasks[j][0] - prev_end)
    assert idles
    ss = sync_stalls(_load(root), [0, 1])
    assert ss is not None
    assert abs(ss.idle_us - median(idles) * ss.calls_per_step) <= 0.05 * ss.idle_us + 1.0


def test_heavy_capture_is_said_and_light_one_is_not(scenario) -> None:
    from advisor_chat.diagnosis import diagnose
    from advisor_chat.diagnosis.hypotheses import judge

    heavy = diagnose(_load(scenario("profiler-overhead")))
    top = heavy.causes[0]
    assert top.summary.startswith(
        "This capture was taken with the profiler's Level2, with_stack=True"
    )
    assert top.remedies[0].text.startswith("Collect again at Level1")
    assert top.remedies[0].case_id == "profiler-overhead-level"
    assert heavy.capture.startswith("Level2") and judge(heavy, "profiler").status == "supported"
    # "tune the dispatch on this?": not before a light capture; and that comes first
    assert judge(heavy, "host_dispatch").status == "undecided"
    from advisor_chat.agent.project import fix_first

    first = fix_first(heavy, False).lines[0]
    assert first.startswith("Fix the whole job first: collect again at Level1"), first
    # a Level1 capture without stacks (the dev8 small-model profile is host-bound too): the
    # same host-side cause, no capture caveat, and the profiler suspicion contradicted
    light = diagnose(_load(scenario("small-batch-host-bound")))
    assert light.capture == "light"
    assert not light.causes[0].summary.startswith("This capture")
    assert judge(light, "profiler").status == "contradicted"


def test_either_or_questions_get_no_yes_or_no(scenario) -> None:
    from advisor_chat.agent import Advisor
    from advisor_chat.config import Settings

    adv = Advisor(
        _load(scenario("profiler-overhead")), settings=Settings(), case_search=lambda *a, **k: []
    )
    en = adv.ask("is the Free real or caused by profiling?").answer
    zh = adv.ask("Free是真实的还是采集造成的？").answer
    assert not en.startswith(("Yes", "No")) and "profiler" in en.split("\n")[0]
    assert not zh.startswith(("是的", "不是")) and "采集" in zh.split("\n")[0]
