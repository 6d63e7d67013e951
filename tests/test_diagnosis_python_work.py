"""What the host's Python thread runs in host stalls, from with_stack frames, against answer keys.

``inline-tokenize-some-steps`` (development set 17): ranks 5 and 12 tokenize raw documents inline
in some steps; the generator writes the Python frames of that work. Expected durations come from
the answer key (the simulated timeline) and from the trace read with the json module.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.diagnosis.hypotheses import judge
from advisor_chat.diagnosis.python_work import frame_kind, python_work, short_frame
from advisor_chat.diagnosis.text import ms
from advisor_chat.ingest import load_profile


def _key(path: Path) -> dict:
    return json.loads((path / "answer_key.json").read_text())


def test_short_frame_names() -> None:
    assert short_frame("a/b/tokenization_utils_base.py(2858): __call__") == (
        "tokenization_utils_base.py: __call__"
    )
    assert short_frame("<string>(1): <module>") == "<string>: <module>"
    assert short_frame("no line here") == "no line here"


def test_the_tokenizer_frame_is_named_in_the_stalled_pairs(scenario) -> None:
    path = scenario("inline-tokenize-some-steps")
    nums = _key(path)["expected_numbers"]
    pairs = [tuple(p) for p in nums["events"]]
    profile = load_profile(path, use_cache=False, progress=False)
    pw = python_work(profile, pairs, profile.ranks)
    assert pw is not None
    assert "tokenization_utils" in pw.frame and frame_kind(pw) == "tokenize"
    assert pw.callers and "get_batch" in pw.callers[0]  # the outermost call-free caller
    assert set(pw.pairs) == set(pairs) and pw.of_pairs == len(pairs)
    assert pw.other_hits == 0 and pw.other_pairs > 0  # the clean steps run no such frame
    # the frame's time per stall: the key's tokenization time (the deepest frame is inset by a
    # few µs per level inside the simulated work)
    assert pw.us == pytest.approx(statistics.median(nums["tokenize_us_per_event"]), rel=0.02)
    # clean steps only: nothing stalls there, nothing is found
    clean = [(s, r) for s in nums["clean_steps"] for r in nums["culprit_ranks"]]
    assert python_work(profile, clean, profile.ranks) is None


def test_the_cause_names_the_work_and_gc_is_ruled_out(scenario) -> None:
    path = scenario("inline-tokenize-some-steps")
    nums = _key(path)["expected_numbers"]
    profile = load_profile(path, use_cache=False, progress=False)
    d = diagnose(profile)
    top = d.top()
    assert top is not None and set(top.culprit.ranks) == set(nums["culprit_ranks"])
    assert "tokenization_utils_base.py: __call__" in top.summary
    assert "tokenization_utils_base.py: __call__" in top.summary_zh
    assert top.metrics["python_frame_us"] == pytest.approx(
        statistics.median(nums["tokenize_us_per_event"]), rel=0.02
    )
    first = top.remedies[0]
    assert first.kind == "action" and "Tokenize ahead of time" in first.text
    assert "分词" in first.text_zh and first.gain_us == top.gain_us
    assert "dataloader_stall" in top.symptom_tags
    # the shortest and the longest stall, besides their mean (the key's tokenization times)
    span = f"({ms(nums['tokenize_us_min'])} to {ms(nums['tokenize_us_max'])})"
    assert span in top.summary, top.summary
    v = judge(d, "gc")
    assert v.status == "contradicted" and "running code" in v.reason


def test_no_frames_no_claim(scenario) -> None:
    # the same kind of stall without with_stack frames: the cause does not name any Python work
    path = scenario("rotating-stalls")
    profile = load_profile(path, use_cache=False, progress=False)
    assert profile.python_frames_for(profile.ranks).empty
    top = diagnose(profile).top()
    assert top is not None and "python_frame_us" not in top.metrics
    assert "Python thread is inside" not in top.summary


def test_a_rank_that_runs_python_work_every_step(tmp_path: Path) -> None:
    """A persistent host stall on one rank: its Python frames name the work, any kind of work.

    Built with the generator's knobs: rank 3's host idles 20 ms before every step's first launch
    while its Python thread is inside a metrics function (no host call in it).
    """
    import dataclasses

    from advisor_chat.synth import FIRST_STEP
    from advisor_chat.synth.model import default_perturb, simulate
    from advisor_chat.synth.scenarios import CANN8, T0_NS, _info, group_kinds, transformer
    from advisor_chat.synth.writer import write_rank

    ranks, steps, culprit = 8, 4, 3
    frames = ["train.py(212): train_step", "eval/metrics.py(41): compute_bleu"]
    p = default_perturb(ranks)
    for si in range(steps):
        p.step_host_gaps.setdefault(si, {})[culprit] = {0: 20_000.0}
        p.py_calls.setdefault(si, {})[culprit] = list(frames)
    info = dataclasses.replace(_info(CANN8, 1, ranks), with_stack=True)
    cl = simulate(
        transformer(layers=2), group_kinds(ranks, 1), p, ranks, steps, 0, FIRST_STEP, T0_NS
    )
    for r in range(ranks):
        write_rank(cl, r, tmp_path, info)
    profile = load_profile(tmp_path, use_cache=False, progress=False)
    top = diagnose(profile).top()
    assert top is not None and list(top.culprit.ranks) == [culprit]
    assert "metrics.py: compute_bleu" in top.summary and "python_work" in top.symptom_tags
    # the frame's time per step: the 20 ms stall less the generator's insets (a few µs per level)
    assert top.metrics["python_frame_us"] == pytest.approx(20_000.0, rel=0.05)
    assert "`metrics.py: compute_bleu`" in top.remedies[0].text


def test_what_the_host_does_names_its_python_frame(scenario) -> None:
    from advisor_chat.agent.advisor import Advisor

    path = scenario("inline-tokenize-some-steps")
    adv = Advisor(load_profile(path, use_cache=False, progress=False))
    first = adv.ask("what is the host doing while the device waits?").answer.split("\n")[0]
    assert first.startswith("What the host does while the device waits")
    assert "tokenization_utils_base.py: __call__" in first
