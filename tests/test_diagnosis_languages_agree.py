"""The English and Chinese text of every root cause state the same measured amounts.

Each cause is written twice (``summary`` / ``summary_zh``, each remedy's ``text`` / ``text_zh``);
a figure computed for one language and forgotten in the other is wrong in one of them while both
stay grounded (each number is in some tool result). Checked here on the real samples; the generator
scenarios are checked in ``test_report_root_cause``. The reference is the other language's text,
not a typed number.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from advisor_chat.diagnosis import diagnose
from advisor_chat.ingest import load_profile

#: A number with a unit of time, size, rate or share (counts and rank ids are written differently
#: in the two languages: "ranks 2-7" / "2-7号卡").
_AMOUNT = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|µs|us|%|GB/s|MB)(?![A-Za-z])")


def unit_numbers(text: str) -> Counter[str]:
    """The amounts with units in ``text`` (``'16.6ms'``, ``'19.5%'``; ``us`` read as ``µs``)."""
    return Counter(m.group(1) + m.group(2).replace("us", "µs") for m in _AMOUNT.finditer(text))


def test_unit_numbers_reads_amounts_not_counts() -> None:
    en = "Every rank present (2 of 8) idles: median Free 26.2 ms per step (19.5% of the step), 6 us"
    zh = "现有的 2 张卡（共 8 张）都在空闲：每步空闲时间中位数 26.2 ms（占步长 19.5%），6 µs"
    assert unit_numbers(en) == unit_numbers(zh) == Counter({"26.2ms": 1, "19.5%": 1, "6µs": 1})
    assert unit_numbers("16.6 ms of it") != unit_numbers("其中 62.6 ms")


@pytest.mark.parametrize(
    "sample", ["pt-text-level1-2rank", "pt-db-level1-2rank", "cluster-8rank", "cluster-16rank-pp2"]
)
def test_real_sample_causes_agree_across_languages(real_samples: Path, sample: str) -> None:
    d = diagnose(load_profile(real_samples / sample, use_cache=False))
    assert d.causes
    for c in d.causes:
        if c.summary_zh:
            assert unit_numbers(c.summary) == unit_numbers(c.summary_zh), (c.id, c.summary_zh)
        for r in c.remedies:
            if r.text_zh:
                assert unit_numbers(r.text) == unit_numbers(r.text_zh), (c.id, r.text_zh)
