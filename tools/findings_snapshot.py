#!/usr/bin/env python
"""Snapshot what the ingest and the analyzers produce, to show a change kept them the same.

``snap`` generates every scenario of ``advisor_chat.synth`` (text and DB export, default sizes; kept
in ``--data`` and reused) and loads each folder plus the real samples of ``tests/data/real`` with no
cache; it records, per folder, every canonical table (row count, dtypes, a hash of its values), the
report's findings, the diagnosis and the data-quality warning codes. ``compare`` prints what differs
between two snapshots and exits 1 when anything does.

Run ``snap`` on the commit before a change (e.g. in a ``git worktree`` with ``PYTHONPATH`` pointing
at it) and after it::

    PYTHONPATH=/tmp/before .venv/bin/python tools/findings_snapshot.py snap /tmp/before.json
    .venv/bin/python tools/findings_snapshot.py snap /tmp/after.json
    .venv/bin/python tools/findings_snapshot.py compare /tmp/before.json /tmp/after.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def snap(out: Path, data: Path, real: Path) -> dict[str, Any]:
    import pandas as pd

    from advisor_chat.config import load_settings
    from advisor_chat.ingest import load_profile
    from advisor_chat.ingest.schema import TABLE_SPECS
    from advisor_chat.reporting import run_report
    from advisor_chat.synth import SCENARIOS, generate

    data.mkdir(parents=True, exist_ok=True)
    for name in SCENARIOS:
        for export in ("text", "db"):
            folder = data / f"{name}-{export}"
            if not folder.exists():
                generate(name, folder, export=export)  # type: ignore[arg-type]
    folders = sorted(data.iterdir()) + sorted(p for p in real.iterdir() if p.is_dir())
    # a before/after pair (cann-upgrade-pair) is two profiles; the second is reported against the first
    units: list[tuple[str, Path, Path | None]] = []
    for folder in folders:
        if (folder / "before").is_dir() and (folder / "after").is_dir():
            units.append((f"{folder.name}/before", folder / "before", None))
            units.append((f"{folder.name}/after", folder / "after", folder / "before"))
        else:
            units.append((folder.name, folder, None))
    result: dict[str, Any] = {}
    for name, folder, base_folder in units:
        settings = load_settings(home=Path(tempfile.mkdtemp(prefix="snap-")))
        try:
            prof = load_profile(folder, settings=settings, use_cache=False, progress=False)
            base = (
                load_profile(base_folder, settings=settings, use_cache=False, progress=False)
                if base_folder is not None
                else None
            )
        except Exception as exc:  # recorded: a change may also change which folders fail
            result[name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        report = run_report(prof, baseline=base)
        diag = getattr(report, "diagnosis", None)
        tables = {}
        for table in sorted(
            TABLE_SPECS
        ):  # every table in full (heavy ones read now, after the report)
            if not prof.has(table):
                continue
            d = prof.get(table).reset_index(drop=True)
            values = pd.util.hash_pandas_object(d.astype(str), index=False).to_numpy().tobytes()
            tables[table] = {
                "rows": len(d),
                "dtypes": {str(c): str(t) for c, t in d.dtypes.items()},
                "sha1": hashlib.sha1(values).hexdigest(),
            }
        result[name] = {
            "tables": tables,
            "findings": [f.to_dict() for f in report.findings],
            "diagnosis": diag.to_dict() if diag is not None else None,
            "warnings": sorted(w.code for w in prof.warnings),
        }
    text = json.dumps(result, indent=1, sort_keys=True, default=str)
    out.write_text(text, encoding="utf-8")
    return dict(json.loads(text))


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Lines describing what differs between snapshots ``a`` and ``b`` (empty: the same)."""
    lines = []
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x == y:
            continue
        if x is None or y is None or "error" in x or "error" in y:
            lines.append(
                f"{name}: {x and x.get('error', 'loaded')} -> {y and y.get('error', 'loaded')}"
            )
            continue
        for t in sorted(set(x["tables"]) | set(y["tables"])):
            if x["tables"].get(t) != y["tables"].get(t):
                lines.append(f"{name}: table {t}: {x['tables'].get(t)} -> {y['tables'].get(t)}")
        lines += [
            f"{name}: {k} differ" for k in ("findings", "diagnosis", "warnings") if x[k] != y[k]
        ]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snap", help="write a snapshot")
    s.add_argument("out", type=Path)
    s.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "findings-snapshot")
    s.add_argument("--real", type=Path, default=REPO / "tests" / "data" / "real")
    c = sub.add_parser("compare", help="compare two snapshots")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = ap.parse_args()
    if args.cmd == "snap":
        n = len(snap(args.out, args.data, args.real))
        print(f"wrote {args.out}: {n} folders")
        return 0
    diff = compare(*(json.loads(p.read_text(encoding="utf-8")) for p in (args.a, args.b)))
    print("\n".join(diff) if diff else f"same: {args.a} and {args.b}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
