"""A device-wide slowdown is checked against the AI Core Freq counter track.

``compute-straggler-hidden`` plants one rank whose every operator runs 1.25x longer. Copies of it
get an AI Core Freq track on every rank (the culprit at a chosen clock, the others at 1800 MHz):
the known clocks are the expected values, and the track either names the cause (down-clocked) or
rules it out (same clock).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import orjson
import pytest

from advisor_chat.diagnosis import Mechanism, diagnose
from advisor_chat.diagnosis.decompose import aicore_clock_mhz
from advisor_chat.ingest import load_profile


def _compute_span_us(folder: Path) -> tuple[float, float]:
    """First start and last end of a rank's compute kernels (collectives left out), epoch µs."""
    with open(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if not r["Name"].lower().startswith("hcom")]
    starts = [float(r["Start Time(us)"].strip()) for r in rows]
    ends = [s + float(r["Duration(us)"]) for s, r in zip(starts, rows, strict=True)]
    return min(starts), max(ends)


def _with_clock(src: Path, dst: Path, culprit_mhz: list[float]) -> int:
    """Copy ``src`` and replace every rank's AI Core Freq track; returns the culprit rank.

    The culprit's samples are ``culprit_mhz`` spread evenly over the span of its compute kernels,
    the others' 1800 MHz at the start and the end of theirs (as a steady clock is recorded).
    """
    shutil.copytree(src, dst)
    culprit = json.loads((dst / "answer_key.json").read_text())["root_cause"]["culprit_ranks"][0]
    for folder in dst.glob("*_ascend_pt"):
        rank = int(next(folder.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        tv = folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
        ev = [e for e in orjson.loads(tv.read_bytes()) if not _is_sample(e)]
        a, b = _compute_span_us(folder)
        vals = culprit_mhz if rank == culprit else [1800.0, 1800.0]
        at = [a + (b - a) * i / (len(vals) - 1) for i in range(len(vals))]
        ev += [
            {
                "name": "AI Core Freq",
                "ts": f"{t:.3f}",
                "pid": 7,
                "tid": 0,
                "args": {"MHz": f},
                "ph": "C",
            }
            for t, f in zip(at, vals, strict=True)
        ]
        tv.write_bytes(orjson.dumps(ev))
    return culprit


def _is_sample(e: dict) -> bool:
    return e.get("name") == "AI Core Freq" and e.get("ph") == "C"


def test_a_down_clocked_device_is_named_with_its_clock(scenario, tmp_path: Path) -> None:
    # 1800 MHz for the first half, 1200 for the second (the last sample closes the track)
    root = tmp_path / "p"
    culprit = _with_clock(scenario("compute-straggler-hidden"), root, [1800, 1200, 1200])
    p = load_profile(root, use_cache=False)
    assert aicore_clock_mhz(p, [culprit]) == pytest.approx(1500.0)  # (1800 + 1200) / 2
    c = diagnose(p).top()
    assert c is not None and c.mechanism is Mechanism.COMPUTE_STRAGGLER
    assert c.culprit.ranks == (culprit,)
    assert c.metrics["aicore_clock_mhz"] == pytest.approx(1500.0)
    assert c.metrics["peer_aicore_clock_mhz"] == pytest.approx(1800.0)
    assert "1500 MHz against 1800 MHz" in c.summary and "down-clocked" in c.summary
    assert "1500 MHz" in c.summary_zh and "降频" in c.summary_zh
    first = c.remedies[0]
    assert first.kind == "action" and first.text.startswith(
        f"Find why rank {culprit} is down-clocked"
    )


def test_the_same_clock_rules_throttling_out(scenario, tmp_path: Path) -> None:
    root = tmp_path / "p"
    culprit = _with_clock(scenario("compute-straggler-hidden"), root, [1800, 1800])
    c = diagnose(load_profile(root, use_cache=False)).top()
    assert c is not None and c.culprit.ranks == (culprit,)
    assert "not down-clocked" in c.summary and "并未降频" in c.summary_zh
    assert "down-clocked" not in c.remedies[0].text and "health" in c.remedies[0].text


def test_without_the_track_nothing_is_said_of_the_clock(scenario, tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(scenario("compute-straggler-hidden"), root)
    for tv in root.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"):
        tv.write_bytes(
            orjson.dumps([e for e in orjson.loads(tv.read_bytes()) if not _is_sample(e)])
        )
    c = diagnose(load_profile(root, use_cache=False)).top()
    assert c is not None and "clock" not in c.summary and "aicore_clock_mhz" not in c.metrics


@pytest.mark.parametrize("export", ["text", "db"])
def test_the_generator_records_a_throttled_clock(scenario, export: str) -> None:
    """throttle-onset lowers the culprit's clock by its slowdown factor from the onset step on
    (the generator's AI Core Freq track, text or DB): the cause gives that clock for its steps."""
    from advisor_chat.synth.model import AICORE_MHZ
    from advisor_chat.synth.scenarios_dev import THROTTLE_FACTOR

    root = scenario("throttle-onset", export=export)
    culprit = json.loads((root / "answer_key.json").read_text())["root_cause"]["culprit_ranks"][0]
    c = diagnose(load_profile(root, use_cache=False)).top()
    assert c is not None and c.culprit.ranks == (culprit,)
    assert c.metrics["aicore_clock_mhz"] == pytest.approx(AICORE_MHZ / THROTTLE_FACTOR, rel=1e-3)
    assert c.metrics["peer_aicore_clock_mhz"] == pytest.approx(AICORE_MHZ)
    assert c.remedies[0].text.startswith(f"Find why rank {culprit} is down-clocked")


def test_an_onset_states_what_each_slow_step_costs(scenario) -> None:
    """A rank slow from a step to the end of the capture: the gain says what fixing it saves per
    step from the onset on (its slow steps' median over the clean steps'), besides the capture's
    average; the steps are the answer key's."""
    from advisor_chat.agent.project import gain_phrase, how_much

    root = scenario("throttle-onset")
    key = json.loads((root / "answer_key.json").read_text())["root_cause"]
    d = diagnose(load_profile(root, use_cache=False))
    c = d.top()
    assert c is not None and c.gain_us is not None
    onset = c.metrics["onset_cost_per_step_us"]
    assert c.metrics["onset_step"] == key["steps"][0]
    assert onset == pytest.approx(c.metrics["hit_step_us"] - c.metrics["clean_step_us"])
    # averaged over every captured step, clean ones included, the gain is smaller
    assert c.gain_us < onset
    en, zh = gain_phrase(c, False), gain_phrase(c, True)
    assert f"from step {key['steps'][0]} on" in en and f"从第 {key['steps'][0]} 步起" in zh
    text = " ".join(how_much(d, False).lines)
    assert "would run at about the clean steps'" in text


def _every_rank_at(src: Path, dst: Path, mhz: float) -> None:
    """Copy ``src`` with every rank's AI Core Freq track at ``mhz`` over its compute kernels,
    dropping to the 800 MHz idle clock for the first tenth of the span (the idle state is not
    the busy clock)."""
    shutil.copytree(src, dst)
    for folder in dst.glob("*_ascend_pt"):
        tv = folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
        ev = [e for e in orjson.loads(tv.read_bytes()) if not _is_sample(e)]
        a, b = _compute_span_us(folder)
        pts = [(a, 800.0), (a + 0.1 * (b - a), mhz), (b, mhz)]
        ev += [
            {"name": "AI Core Freq", "ts": f"{t:.3f}", "pid": 7, "tid": 0, "args": {"MHz": f}, "ph": "C"}
            for t, f in pts
        ]  # fmt: skip
        tv.write_bytes(orjson.dumps(ev))


def _computing_us_by_rank(root: Path) -> dict[int, float]:
    """Mean Computing per step of each rank, µs, read from step_trace_time.csv with csv."""
    out = {}
    for folder in root.glob("*_ascend_pt"):
        rank = int(next(folder.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
        with open(folder / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="") as fh:
            vals = [float(r["Computing"]) for r in csv.DictReader(fh)]
        out[rank] = sum(vals) / len(vals)
    return out


def test_a_job_down_clocked_everywhere_is_one_job_level_cause(scenario, tmp_path: Path) -> None:
    """No rank is slower than its peers when every one runs at 1400 MHz: the rated 1800 MHz is
    the reference, and the cost is Computing × (1 − 1400/1800) (the compute at the rated clock)."""
    import statistics

    root = tmp_path / "p"
    _every_rank_at(scenario("healthy"), root, 1400.0)
    d = diagnose(load_profile(root, use_cache=False))
    c = d.top()
    assert c is not None and c.id == "cause.job_hotspot.clock", d.headline
    assert c.mechanism is Mechanism.JOB_HOTSPOT and c.culprit.kind == "job"
    assert c.metrics["aicore_clock_mhz_median"] == pytest.approx(1400.0)  # idle 800 left out
    comp = _computing_us_by_rank(root)
    want = statistics.median(v * (1 - 1400 / 1800) for v in comp.values())
    assert c.gain_us == pytest.approx(want, rel=1e-6)
    assert "1400 MHz" in c.summary and "rated 1800 MHz" in c.summary and "every rank" in c.summary
    assert "1400 MHz" in c.summary_zh and "额定" in c.summary_zh
    assert c.remedies[0].text.startswith("Find why every NPU runs at 1400 MHz")
    from advisor_chat.diagnosis.hypotheses import judge

    assert judge(d, "throttling").status == "supported"
    assert judge(d, "hardware").status == "supported"


def test_the_rated_clock_everywhere_is_no_cause(scenario, tmp_path: Path) -> None:
    root = tmp_path / "p"
    _every_rank_at(scenario("healthy"), root, 1800.0)
    d = diagnose(load_profile(root, use_cache=False))
    assert all("clock" not in c.id for c in d.causes)
    from advisor_chat.diagnosis.hypotheses import judge

    v = judge(d, "throttling")
    assert v.status == "contradicted" and "1800 MHz" in v.reason
