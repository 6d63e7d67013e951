"""The example notebook runs (nbclient, the venv's kernel) and shows the diagnosis and a plot.

``docs/notebook.ipynb`` is executed on a generated ``seed-rank12`` profile (rank 12 host-bound by
construction): the profile's HTML holds the planted culprit and a plotly figure with plotly.js
inlined (no CDN), the Chinese answer is in Chinese, and no output is an error.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


def test_example_notebook_executes_and_shows_the_diagnosis_and_a_plot(scenario, tmp_path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    prof = scenario("seed-rank12")
    culprit = json.loads((prof / "answer_key.json").read_text())["root_cause"]["culprit_ranks"][0]
    nb = nbformat.read(REPO / "docs" / "notebook.ipynb", as_version=4)
    env = {"ADVISOR_NOTEBOOK_PROFILE": str(prof), "ADVISOR_HOME": str(tmp_path / "home")}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outs if o.get("output_type") == "error"]
    html = [o["data"]["text/html"] for o in outs if "text/html" in o.get("data", {})]
    profile_html, en_html, zh_html = html[0], html[1], html[2]
    assert f"rank {culprit}" in profile_html and "host_stall" in profile_html
    assert "Plotly.newPlot" in profile_html and not re.search(
        r"<script[^>]+src=.https?://", profile_html
    )
    assert en_html.count(f"{culprit}") and "Suggestions" in en_html
    assert f"{culprit}号卡" in zh_html and "建议" in zh_html
    figure = [o for o in outs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert figure, "the plotly figure cell shows a plotly figure"
