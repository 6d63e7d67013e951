#!/usr/bin/env python3
"""Write a synthetic Ascend PyTorch Profiler cluster: tools/make_profile.py SCENARIO --out DIR."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor_chat.errors import InputError
from advisor_chat.synth import SCENARIOS, generate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("scenario", choices=sorted(SCENARIOS), help="scenario preset")
    ap.add_argument("--out", required=True, type=Path, help="output folder")
    ap.add_argument("--ranks", type=int, default=None, help="world size 2..4096")
    ap.add_argument("--steps", type=int, default=None, help="captured steps")
    ap.add_argument("--seed", type=int, default=0, help="jitter seed")
    ap.add_argument("--export", choices=["text", "db"], default="text")
    ap.add_argument("--workers", type=int, default=None, help="writer processes")
    a = ap.parse_args(argv)
    t = time.perf_counter()
    try:
        out = generate(
            a.scenario,
            a.out,
            ranks=a.ranks,
            steps=a.steps,
            seed=a.seed,
            export=a.export,
            workers=a.workers,
        )
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {a.scenario} to {out} in {time.perf_counter() - t:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
