"""A generic question battery over every visible scenario, at another seed or size.

The development sets ask hand-written questions of a few kinds each; this asks the same handful of
plain questions ("why is it slow?", "what first?", "compute, scheduling or communication?", in
English and Chinese) of every visible generator scenario (the blind held-out kinds excluded),
generated at a seed / size the tests do not pin. Expected facts come from each scenario's answer
key (``@key:root_cause``): the culprit named as its kind requires, in the first sentence too, and
victims not blamed. It measures how the answers, not only the report's top cause
(``tools/robustness.py``), hold up on data nobody tuned on.

    python tools/battery.py --seed 5 --out /tmp/battery.yaml
    advisor-chat eval --dataset /tmp/battery.yaml --gate 0 --out /tmp/battery-report

Writes only the dataset file given with ``--out``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

# (id suffix, language, question): plain questions any user of any kind of fault asks
QUESTIONS: tuple[tuple[str, str, str], ...] = (
    ("why-en", "en", "why is this training job slow?"),
    ("first-en", "en", "what is the main bottleneck here, and what should we fix first?"),
    ("class-en", "en", "is this a compute, scheduling or communication problem?"),
    ("why-zh", "zh", "这个训练任务为什么慢？"),
    ("first-zh", "zh", "主要瓶颈在哪，应该先改什么？"),
    ("class-zh", "zh", "这是计算、调度还是通信的问题？"),
)


def items_for(name: str, gen: dict[str, int], key_profile: dict[str, str]) -> list[dict[str, Any]]:
    """The battery's items for one scenario.

    Args:
        name: Scenario name.
        gen: Keyword arguments of ``advisor_chat.synth.generate`` (seed, ranks, steps).
        key_profile: ``profile`` / ``baseline`` subfolders for a scenario with two profiles.
    """
    tag = "_".join(f"{k}{v}" for k, v in sorted(gen.items()))
    out = []
    for suffix, lang, q in QUESTIONS:
        expect: dict[str, Any] = {
            "culprit": "@key:root_cause",
            "victims": ["@key:root_cause.victim_ranks", "@key:root_cause.not_slow_ranks"],
            "first_sentence": "culprit",
        }
        item: dict[str, Any] = {
            "id": f"battery-{name}-{tag}-{suffix}",
            "lang": lang,
            "scenario": name,
            "gen": dict(gen),
            **key_profile,
            "question": q,
            "expect": expect,
        }
        out.append(item)
    return out


def main() -> None:
    from advisor_chat.synth import SCENARIOS
    from advisor_chat.synth.blind import BLIND_KINDS
    from advisor_chat.synth.heldout_dev import HELD_OUT_DEV_KINDS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--ranks", type=int, default=None)
    ap.add_argument("--scenario", action="append", default=[], help="only these (default: all)")
    ap.add_argument("--out", type=Path, required=True, help="dataset YAML to write")
    a = ap.parse_args()
    gen = {"seed": a.seed} | ({"ranks": a.ranks} if a.ranks else {})
    names = a.scenario or [
        s for s in SCENARIOS if s not in BLIND_KINDS and s not in HELD_OUT_DEV_KINDS
    ]
    items: list[dict[str, Any]] = []
    for n in names:
        two = {"profile": "after", "baseline": "before"} if n == "cann-upgrade-pair" else {}
        items += items_for(n, gen, two)
    doc = {"defaults": {"expect": {"consistent": True, "strict_language": True}}, "items": items}
    a.out.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    print(f"wrote {len(items)} items for {len(names)} scenarios to {a.out}")


if __name__ == "__main__":
    main()
