"""Robustness of the diagnosis to the generator's seed and size, and accuracy of its gains.

Every visible generator scenario (the blind held-out kinds excluded) is generated again with
other seeds / world sizes / step counts; the top root cause is compared with the scenario's
answer key (mechanism, culprit kind, culprit ranks, link), and where the key carries a
re-simulated saving (``saving_us_per_step``: the step time with the fault minus without it) the
top cause's gain is compared with it. The answer keys are computed from the simulated timeline,
so nothing here is tuned by hand; the tests pin the default seed, this sweeps the others.

    python tools/robustness.py --variant seed1 --variant seed2 --variant seed3_ranks32 \
        --out robustness.md --workers 2

A variant is ``seedN``, optionally with ``_ranksN`` and/or ``_stepsN``. Scenarios whose size
range excludes a variant's world size are listed as not applicable.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

GAIN_BAND = (0.8, 1.25)  # a gain within this ratio of the re-simulated saving counts as right


def parse_variant(v: str) -> dict[str, int]:
    """``seed1_ranks32`` -> ``{"seed": 1, "ranks": 32}``."""
    out: dict[str, int] = {}
    for part in v.split("_"):
        m = re.fullmatch(r"(seed|ranks|steps)(\d+)", part)
        if m is None:
            raise SystemExit(f"bad variant {v!r}: use seedN[_ranksN][_stepsN]")
        out[m.group(1)] = int(m.group(2))
    return out


def check(args: tuple[str, str]) -> dict[str, Any]:
    """Generate one scenario in one variant, diagnose it, compare with its answer key."""
    from advisor_chat.diagnosis import diagnose
    from advisor_chat.errors import InputError
    from advisor_chat.ingest import load_profile
    from advisor_chat.synth import generate

    name, variant = args
    res: dict[str, Any] = {"name": name, "variant": variant}
    tmp = Path(tempfile.mkdtemp(prefix="robust-"))
    try:
        try:
            generate(name, tmp / name, workers=1, **parse_variant(variant))
        except InputError as e:  # e.g. a world size outside the scenario's range
            return {**res, "status": "n/a", "why": str(e)[:120]}
        out = tmp / name
        key = json.loads((out / "answer_key.json").read_text(encoding="utf-8"))
        rc = key["root_cause"]
        met = rc.get("metrics") or {}
        prof = out / met["profile"] if isinstance(met.get("profile"), str) else out
        base = (
            load_profile(out / met["baseline_profile"], use_cache=False, progress=False)
            if isinstance(met.get("baseline_profile"), str)
            else None
        )
        d = diagnose(load_profile(prof, use_cache=False, progress=False), baseline=base)
        top = d.top()
        bad = []
        if top is None:
            bad.append("no cause")
        else:
            if top.mechanism.value != rc["mechanism"]:
                bad.append(f"mechanism {top.mechanism.value} (key {rc['mechanism']})")
            if top.culprit.kind != rc["culprit_kind"]:
                bad.append(f"culprit kind {top.culprit.kind} (key {rc['culprit_kind']})")
            want = sorted(rc.get("culprit_ranks") or [])
            if want and rc["culprit_kind"] != "steps" and sorted(top.culprit.ranks) != want:
                bad.append(f"ranks {sorted(top.culprit.ranks)[:8]} (key {want[:8]})")
            link = rc.get("culprit_link")
            if link and sorted(top.culprit.link or ()) != sorted(link):
                bad.append(f"link {top.culprit.link} (key {tuple(link)})")
        saving = (key.get("expected_numbers") or {}).get("saving_us_per_step") or met.get(
            "saving_us_per_step"
        )
        return {
            **res,
            "status": "ok" if not bad else "differs",
            "why": "; ".join(bad),
            "top": top.id if top is not None else None,
            "gain_us": top.gain_us if top is not None else None,
            "bound": top.bound.value if top is not None else None,
            "saving_us": saving,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    from advisor_chat.synth import SCENARIOS
    from advisor_chat.synth.blind import BLIND_KINDS
    from advisor_chat.synth.heldout_dev import HELD_OUT_DEV_KINDS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", action="append", default=[], help="seedN[_ranksN][_stepsN]")
    ap.add_argument("--scenario", action="append", default=[], help="only these (default: all)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="Markdown report (default: stdout)")
    a = ap.parse_args()
    variants = a.variant or ["seed1"]
    for v in variants:
        parse_variant(v)
    names = a.scenario or [
        s for s in SCENARIOS if s not in BLIND_KINDS and s not in HELD_OUT_DEV_KINDS
    ]
    jobs = [(n, v) for v in variants for n in names]
    with ProcessPoolExecutor(a.workers) as pool:
        rows = list(pool.map(check, jobs))
    lines = ["# Diagnosis robustness to seed and size", ""]
    for v in variants:
        rs = [r for r in rows if r["variant"] == v]
        app = [r for r in rs if r["status"] != "n/a"]
        ok = sum(r["status"] == "ok" for r in app)
        lines += [f"## {v}: top cause as the key on {ok} of {len(app)} scenarios", ""]
        lines += [
            f"- {r['name']}: {r['why']} (top: {r['top']})" for r in app if r["status"] != "ok"
        ]
        na = [r["name"] for r in rs if r["status"] == "n/a"]
        if na:
            lines.append(f"- not applicable at this size: {', '.join(na)}")
        lines.append("")
    gains = [r for r in rows if r.get("saving_us") and r.get("gain_us") is not None]
    if gains:
        lo, hi = GAIN_BAND
        inside = sum(lo <= r["gain_us"] / r["saving_us"] <= hi for r in gains)
        lines += [
            f"## Gain against the re-simulated saving: {inside} of {len(gains)} within "
            f"{lo:g}-{hi:g}x",
            "",
            "| scenario | variant | top cause | bound | gain ms | saving ms | ratio |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in sorted(gains, key=lambda r: (r["name"], r["variant"])):
            ratio = r["gain_us"] / r["saving_us"]
            lines.append(
                f"| {r['name']} | {r['variant']} | {r['top']} | {r['bound']} | "
                f"{r['gain_us'] / 1000:.1f} | {r['saving_us'] / 1000:.1f} | {ratio:.2f} |"
            )
    text = "\n".join(lines) + "\n"
    if a.out is None:
        print(text)
    else:
        a.out.write_text(text, encoding="utf-8")
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
