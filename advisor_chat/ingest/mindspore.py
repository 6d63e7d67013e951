"""MindSpore Profiler (2.5+) ``*_ascend_ms`` folders (reference §3.2).

The layout equals the PyTorch one (``profiler_info_{rank}.json``, ``profiler_metadata.json``,
``ASCEND_PROFILER_OUTPUT/`` with ``step_trace_time.csv``, ``kernel_details.csv``,
``communication.json``, ``communication_matrix.json``, ``trace_view.json``), so
:func:`advisor_chat.ingest.rankdir.read_rank_dir` reads it with the same text readers. Differences
handled there: the DB is ``ascend_mindspore_profiler_{rank}.db`` (CANN schema, read like the PyTorch
DB) and the communication analysis DB is ``communication_analyzer.db`` (same ``CommAnalyzer*``
tables; some versions lack ``step``/``type`` columns, which the DB reader tolerates). The export
type recorded in ``meta`` is ``mindspore``.
"""

from __future__ import annotations

import os
from pathlib import Path


def is_mindspore_dir(folder: Path) -> bool:
    """Whether ``folder`` is a MindSpore profiler folder (name suffix or MindSpore DB files)."""
    if folder.name.endswith("ascend_ms"):
        return True
    out = folder / "ASCEND_PROFILER_OUTPUT"
    try:
        names = os.listdir(out)
    except OSError:
        return False
    return any(n.startswith("ascend_mindspore_profiler") for n in names) or (
        "communication_analyzer.db" in names and "analysis.db" not in names
    )
