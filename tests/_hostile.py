"""Hostile strings planted in a generated profile (tests of the escaping rule, advisor_chat.textsafe).

``plant(root)`` rewrites a generated ``*_ascend_pt`` profile in place: every
``profiler_metadata.json`` gets a ``group_name`` and an HCCL env value with a Markdown image,
HTML img/a/script, rich markup and terminal escape sequences; the fastest-to-find operator name
in ``kernel_details.csv`` gets the same. The outside host is 10.255.255.1 (never reachable).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

EVIL_HOST = "10.255.255.1"
GROUP_NAME = (
    f"g![x](http://{EVIL_HOST}/md.png)"
    f"<img src=http://{EVIL_HOST}/img.png>"
    f"<a href=http://{EVIL_HOST}/a>click</a>"
    "<script>window.__pwned=1</script>"
    "[/x][link=http://" + EVIL_HOST + "/rich]r[/link]"
    "\x1b]8;;http://" + EVIL_HOST + "/osc\x1b\\osc\x1b]8;;\x1b\\\x1b[2J"
)
OP_NAME = f"MatMul![o](http://{EVIL_HOST}/op.png)<img src=http://{EVIL_HOST}/op2.png>"
ENV_VALUE = f"<img src=http://{EVIL_HOST}/env.png>"


def plant(root: Path) -> None:
    """Plant the hostile strings into the profile under ``root`` (a generated text export)."""
    metas = sorted(root.rglob("profiler_metadata.json"))
    assert metas, f"no profiler_metadata.json under {root}"
    for meta in metas:
        data = json.loads(meta.read_text())
        for info in data.get("parallel_group_info", {}).values():
            info["group_name"] = GROUP_NAME
        data.setdefault("hccl_env", {})["HCCL_BUFFSIZE"] = ENV_VALUE
        meta.write_text(json.dumps(data))
    for kd in sorted(root.rglob("kernel_details.csv")):
        with kd.open(newline="") as fh:
            rows = list(csv.reader(fh))
        head = rows[0]
        col = head.index("Name") if "Name" in head else 0
        for row in rows[1:]:
            if "MatMul" in row[col]:
                row[col] = OP_NAME
        with kd.open("w", newline="") as fh:
            csv.writer(fh).writerows(rows)
