"""run_report on tiny in-memory profiles: ordering, notes for failing analyzers, renderers, JSON shape."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from advisor_chat.analyzers import REGISTRY, AnalyzerResult, Finding, FindingKind, Params, Severity
from advisor_chat.analyzers.base import AnalyzerSpec, Evidence, load_all
from advisor_chat.errors import NotAnswerableError, ToolArgumentError
from advisor_chat.ingest.profile import Profile
from advisor_chat.ingest.schema import validate_table
from advisor_chat.reporting import (
    fmt_number,
    render_html,
    render_markdown,
    run_report,
    sort_findings,
    to_json,
)

S1 = "4096,4096;4096,11008"


def _profile() -> Profile:
    """4 ranks x 3 steps; rank 3's MatMul is 2x slower at S1 (equal counts) and it computes longer."""
    k, st = [], []
    for r in range(4):
        for s in range(3):
            t = 1e9 + s * 20_000.0
            for _i in range(10):
                dur = 200.0 if r == 3 else 100.0
                k.append(
                    dict(
                        rank=r,
                        step=s,
                        name="aclnnMatmul_MatMulCommon_MatMul",
                        op_type="MatMul",
                        accelerator_core="AI_CORE",
                        start_us=t,
                        duration_us=dur,
                        wait_us=0.0,
                        input_shapes=S1,
                    )
                )
                t += dur + 5.0
            comp = 10 * (200.0 if r == 3 else 100.0)
            step = 11_000.0
            st.append(
                dict(
                    rank=r,
                    step=s,
                    computing_us=comp,
                    communication_not_overlapped_us=step - comp - 50,
                    overlapped_us=0.0,
                    communication_us=step - comp - 50,
                    free_us=50.0,
                    stage_us=step,
                    bubble_us=0.0,
                    step_us=step,
                )
            )
    return Profile(
        root=Path("/data/prof"),
        layout="synthetic",
        tables={
            "kernels": validate_table("kernels", pd.DataFrame(k)),
            "step_trace": validate_table("step_trace", pd.DataFrame(st)),
        },
    )


def _f(id_: str, sev: Severity, gain: float | None) -> Finding:
    return Finding(
        id=id_, kind=FindingKind.BOTTLENECK, severity=sev, summary=id_, estimated_gain_us=gain
    )


def test_sort_and_dedup() -> None:
    fs = [
        _f("a", Severity.LOW, 900.0),
        _f("b", Severity.HIGH, None),
        _f("c", Severity.HIGH, 10.0),
        _f("d", Severity.HIGH, 500.0),
        _f("c", Severity.LOW, 1.0),
        _f("e", Severity.INFO, 1e6),
        _f("f", Severity.MEDIUM, 1.0),
    ]
    out = sort_findings(fs)
    assert [f.id for f in out] == ["d", "c", "b", "f", "a", "e"]
    assert out[1].severity is Severity.HIGH  # first "c" kept


def test_run_report_on_tiny_profile() -> None:
    rep = run_report(_profile(), strict=True)
    ids = [f.id for f in rep.findings]
    assert any(i.startswith("compare_ops.op_regression.r3.MatMul") for i in ids)
    ranks_sev = [f.severity.rank for f in rep.findings]
    assert ranks_sev == sorted(ranks_sev)
    assert len(ids) == len(set(ids))
    runs = {r.name: r for r in rep.runs}
    assert runs["explain_rank"].status == "skipped"
    assert runs["compare_profiles"].status == "skipped"
    order = [r.name for r in rep.runs]
    assert order[:2] == ["data_quality", "env_check"]
    assert rep.profile["ranks"] == [0, 1, 2, 3] and rep.profile["steps"] == [0, 1, 2]
    # host_dispatch table is missing -> the report says which data is missing
    assert any("host_dispatch" in n and "trace_view" in n for n in rep.notes)


def test_failing_analyzers_become_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    load_all()

    def not_answerable(profile, params, **kw):
        raise NotAnswerableError("needs the moon table")

    def bad_args(profile, params, **kw):
        raise ToolArgumentError("rank 99 does not exist; ranks are 0-3")

    def bug(profile, params, **kw):
        raise RuntimeError("boom")

    for name, fn in (("zz_na", not_answerable), ("zz_bad", bad_args), ("zz_bug", bug)):
        monkeypatch.setitem(REGISTRY, name, AnalyzerSpec(name, fn, Params, "test", order=99))
    rep = run_report(_profile(), strict=False)
    assert any("[zz_na] not enough signal: needs the moon table" in n for n in rep.notes)
    assert any("[zz_bad] bad arguments" in n and "0-3" in n for n in rep.notes)
    assert any("[zz_bug] internal error" in n and "boom" in n for n in rep.notes)
    status = {r.name: r.status for r in rep.runs}
    assert status["zz_na"] == "not_answerable" and status["zz_bug"] == "error"
    assert rep.findings  # the other analyzers still ran
    with pytest.raises(RuntimeError, match="boom"):
        run_report(_profile(), strict=True)


def test_explain_rank_runs_with_rank() -> None:
    rep = run_report(_profile(), rank=3, strict=True)
    runs = {r.name: r for r in rep.runs}
    assert runs["explain_rank"].status in ("ok", "not_answerable")
    assert rep.rank == 3


def test_renderers_and_json_shape() -> None:
    rep = run_report(_profile(), strict=True)
    md = render_markdown(rep)
    assert md.startswith("# advisor-chat report")
    for f in rep.findings:
        assert f.id in md
    reg = next(f for f in rep.findings if f.kind is FindingKind.OP_REGRESSION)
    assert rep.diagnosis is not None
    under = next((c for c in rep.diagnosis.causes if reg.id in {f.id for f in c.findings}), None)
    section = md.split(f"`{reg.id}`")[-2].rsplit("####", 1)[-1]  # its own section
    if under is None:  # a finding on its own states its estimate
        assert "Estimated gain:** 1.0 ms per step" in md  # 10 calls x +100 us, rounded
    else:  # under a cause, the cause's expected gain is the one figure stated
        assert "Estimated gain" not in section
        assert "Expected gain:**" in md
    assert reg.estimated_gain_us == pytest.approx(1000.0)  # 10 calls x +100 us
    page = render_html(rep)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<script" not in page and "<link" not in page and "src=" not in page
    assert "http://" not in page and "https://" not in page
    assert reg.id in page
    data = to_json(rep)
    text = json.dumps(data, allow_nan=False)  # strict JSON: no NaN
    assert json.loads(text)["profile"]["layout"] == "synthetic"
    assert set(data) >= {"findings", "profile", "notes"}
    need = {
        "id",
        "kind",
        "severity",
        "ranks",
        "summary",
        "metrics",
        "evidence",
        "symptom_tags",
        "estimated_gain_us",
    }
    for f in data["findings"]:
        assert need <= set(f)
        for e in f["evidence"]:
            assert set(e) == {"table", "source", "rows", "note"}
    j = next(f for f in data["findings"] if f["id"] == reg.id)
    assert j["metrics"]["delta_us_per_step"] == pytest.approx(1000.0)  # unrounded
    assert j["ranks"] == [3] and j["severity"] == "high"
    assert [f["id"] for f in data["findings"]] == [f.id for f in rep.findings]


def test_number_display() -> None:
    assert fmt_number("free_ratio", 0.2853) == "28.5%"
    assert fmt_number("free_us", 40921.4) == "40.9 ms"  # µs metrics shown in ms (trial 13)
    assert fmt_number("max_us", 1_488_610.0) == "1,488.6 ms"
    assert fmt_number("bandwidth_gbps", 4.04) == "4.0 GB/s"
    assert fmt_number("count", 12.0) == "12"
    assert fmt_number("avg_ratio", float("nan")) == "n/a"
    assert fmt_number("wait_ms", 0.40912) == "0.409 ms"


def test_empty_profile_report_does_not_crash() -> None:
    rep = run_report(Profile(root=Path("/nothing"), layout="synthetic"), strict=False)
    assert isinstance(render_markdown(rep), str)
    assert isinstance(render_html(rep), str)
    assert rep.notes and not rep.findings
    # my analyzers say which data is missing instead of failing
    for name in ("compare_ops", "host_dispatch", "step_trend"):
        assert any(n.startswith(f"[{name}] not enough signal") for n in rep.notes), name


def test_finding_evidence_roundtrip() -> None:
    f = Finding(
        id="x.y.z",
        kind=FindingKind.JITTER,
        severity=Severity.LOW,
        summary="s",
        metrics={"a_us": float("inf")},
        evidence=(Evidence("kernels", "k.csv", {"rank": 1}),),
    )
    res = AnalyzerResult(name="x", table=pd.DataFrame(), findings=(f,))
    assert res.findings[0].to_dict()["evidence"][0]["rows"] == {"rank": 1}


def test_chinese_report_gives_the_analyzers_notes_in_chinese(scenario) -> None:
    """slow-link's healthy-link and fixed notes have Chinese twins: a Chinese report shows those,
    under the plain heading; a note without a twin would keep the "originally English" heading."""
    import dataclasses

    from advisor_chat.ingest import load_profile
    from advisor_chat.reporting import render_html, render_markdown, report_notes, run_report

    report = run_report(load_profile(scenario("healthy"), progress=False))
    assert any("no slow link" in n for n in report.notes)
    zh_notes, complete = report_notes(report, True)
    assert complete and not any("no slow link" in n for n in zh_notes)
    assert any("没有慢链路" in n for n in zh_notes)
    md = render_markdown(report, lang="zh")
    assert "## 分析器的说明\n" in md and "no slow link" not in md
    assert "no slow link" not in render_html(report, lang="zh")
    # a note with no Chinese twin stays, and the heading says the notes are in English
    extra = dataclasses.replace(report, notes=(*report.notes, "[x] an untranslated note"))
    assert "an untranslated note" in render_markdown(extra, lang="zh")
    assert "（原文为英文）" in render_markdown(extra, lang="zh")


def test_chinese_report_names_the_rows_behind_a_finding_in_chinese(scenario) -> None:
    """The rows an evidence line cites (scope, ranks, steps) and its file counts are said in
    Chinese; the English selectors ("scope=all ranks", "mean per step", "(16 files)") are not
    left in, and the English report keeps them."""
    from advisor_chat.ingest import load_profile
    from advisor_chat.reporting import render_markdown, run_report

    report = run_report(load_profile(scenario("seed-rank12"), progress=False))
    rows = [e.rows for f in report.findings for e in f.evidence if e.rows]
    assert any(r.get("scope") == "all ranks" for r in rows)  # the selector exists ...
    en, zh = render_markdown(report), render_markdown(report, lang="zh")
    assert "scope=all ranks" in en and "files)" in en
    for english in ("scope=", "all ranks", "mean per step", "files)", "no source file", "ops="):
        assert english not in zh, english  # ... and a Chinese report says it in Chinese
    assert "范围：所有卡" in zh and "步：所有步（每步平均）" in zh


@pytest.mark.parametrize("sample", ["cluster-8rank", "kernel-details-variants"])
def test_chinese_report_of_a_real_sample_has_every_note_in_chinese(real_samples, sample) -> None:
    """cluster-8rank lacks kernels, host data and environment, kernel-details-variants lacks a
    step trace and communication: every analyzer says so, and each of those notes (the runner's
    "not enough signal" ones too) has its Chinese twin, with no English reason inside it."""
    import re

    from advisor_chat.ingest import load_profile
    from advisor_chat.reporting import render_markdown, report_notes, run_report

    report = run_report(load_profile(real_samples / sample, progress=False))
    assert any("not enough signal" in n for n in report.notes)  # the runner's notes are there
    zh_notes, complete = report_notes(report, True)
    assert complete, [n for n in zh_notes if not re.search(r"[\u4e00-\u9fff]", n)]
    assert len(zh_notes) == len(report.notes)
    assert all(re.search(r"[\u4e00-\u9fff]", n) for n in zh_notes)
    assert "（原文为英文）" not in render_markdown(report, lang="zh")
    assert not any("n/a" in n or "Level0 or" in n for n in zh_notes)


@pytest.mark.parametrize("us", [-40.0, -1e-9, 0.0, 20.0])
def test_times_that_round_to_zero_never_print_a_negative_zero(us: float) -> None:
    # Free = step - busy can come out a few µs below zero from float sums
    from advisor_chat.analyzers._common import ms
    from advisor_chat.reporting import fmt_ms
    from advisor_chat.tools.diagnose import _ms

    assert fmt_ms(us) == ms(us) == _ms(us) == "0.0 ms"


def test_negative_times_beyond_rounding_keep_their_sign() -> None:
    from advisor_chat.reporting import fmt_ms

    assert fmt_ms(-1200.0) == "-1.2 ms"
