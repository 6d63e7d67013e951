from __future__ import annotations

import pytest
from _analyzers_a_helpers import make_profile, step_rows

from advisor_chat.analyzers import get_analyzer
from advisor_chat.ingest.profile import DataWarning


def run(p):
    return get_analyzer("data_quality").run(p)


def test_missing_ranks_steps_versions_level2_level0():
    st = [r for r in step_rows(8) if not (r["rank"] == 6 and r["step"] == 3)]
    st = [r for r in st if r["rank"] != 7]
    meta = [
        {
            "rank": r,
            "source_dir": "/x",
            "export_type": "text",
            "world_size": 8,
            "cann_version": "8.0.RC2" if r != 2 else "7.0.0",
            "profiler_level": "Level2" if r == 1 else "Level1",
        }
        for r in range(7)
    ]
    p = make_profile({"step_trace": st, "meta": meta})
    res = run(p)
    by_id = {f.id: f for f in res.findings}
    assert by_id["data_quality.data_quality.missing_ranks"].ranks == (7,)
    assert by_id["data_quality.data_quality.missing_steps"].ranks == (6,)
    assert by_id["data_quality.data_quality.mixed_versions"].ranks == (2,)
    assert by_id["data_quality.data_quality.profiler_level2"].ranks == (1,)
    # step trace has communication but no comm_ops
    assert "data_quality.data_quality.no_communication_level0" in by_id
    assert set(res.table["check"]) >= {
        "ranks",
        "steps",
        "cann_version",
        "profiler_level",
        "communication_data",
    }


def test_clean_profile_and_load_warnings():
    p = make_profile({"step_trace": step_rows(4)})
    p.warnings.append(
        DataWarning("file_skipped", "trace_view.json of rank 3 is truncated; re-export", "/x", (3,))
    )
    res = run(p)
    ids = [f.id for f in res.findings]
    assert "data_quality.data_quality.file_skipped" in ids
    assert "data_quality.data_quality.missing_ranks" not in ids
    assert res.metrics["warnings_count"] == 1
    # the Chinese summary says what the warning means, without the English message
    f = next(f for f in res.findings if f.id == "data_quality.data_quality.file_skipped")
    assert f.summary_zh == "数据质量提示（file_skipped）：有文件无法解析，已跳过（涉及 3号卡）。"
    assert "truncated" not in f.summary_zh


def test_empty_profile_does_not_fail():
    res = run(make_profile({}))
    assert (res.table["status"] == "n/a").any()


def test_real_two_rank_samples_run_cleanly(real_samples):
    from advisor_chat.analyzers import get_analyzer as ga
    from advisor_chat.ingest import load_profile

    for name in ("pt-text-level1-2rank", "pt-db-level1-2rank"):
        prof = load_profile(real_samples / name, use_cache=False)
        res = run(prof)
        # every load-time warning reaches the findings (once)
        codes = {w.code for w in prof.warnings}
        assert codes <= {f.id.rsplit(".", 1)[1] for f in res.findings}
        for an in ("env_check", "cluster_breakdown", "slow_rank", "slow_link", "communication"):
            ga(an).run(prof)
        spec = ga("explain_rank")
        out = spec.run(prof, spec.params(rank=1))
        assert out.findings[0].ranks == (1,)


@pytest.mark.parametrize(("sample", "n_all"), [("cluster-16rank-pp2", 16), ("cluster-8rank", 8)])
def test_real_partial_comm_coverage_and_single_step_are_said(real_samples, sample, n_all):
    """Trial item 3: comm_ops for 2 of N ranks and one step (or no markers) are data gaps."""
    from advisor_chat.ingest import load_profile

    prof = load_profile(real_samples / sample)
    c_ranks = sorted(int(r) for r in prof.get("comm_ops")["rank"].unique())
    steps = sorted(int(s) for s in prof.get("step_trace")["step"].unique())
    assert len(c_ranks) < n_all and len(steps) == 1  # the premise, read independently
    res = get_analyzer("data_quality").run(prof)
    by_id = {f.id.rsplit(".", 1)[-1]: f for f in res.findings}
    part = by_id["partial_comm_data"]
    assert f"covers only {len(c_ranks)} of {n_all} ranks" in part.summary
    assert part.metrics["comm_ranks_count"] == len(c_ranks)
    one = by_id["single_step"]
    if steps == [-1]:
        assert one.summary.startswith("No step markers")
    else:
        assert one.summary.startswith(f"Only 1 step captured (step {steps[0]})")


def test_unreadable_communication_json_is_blamed_not_the_profiler_level(real_samples, tmp_path):
    """Damaged communication.json files: the advice is to copy them again, not 'collect at Level1'."""
    import shutil

    from advisor_chat.ingest import load_profile
    from advisor_chat.reporting import run_report

    root = tmp_path / "p"
    shutil.copytree(real_samples / "pt-text-level1-2rank", root)
    damaged = sorted(root.rglob("communication.json"))
    assert len(damaged) == 2
    for f in damaged:
        f.write_bytes(f.read_bytes()[:100])  # truncated
    p = load_profile(root, use_cache=False)
    assert not p.has("comm_ops") and p.has("step_trace")
    rep = run_report(p, strict=True)
    by_id = {f.id: f for f in rep.findings}
    assert "data_quality.data_quality.no_communication_level0" not in by_id
    f = by_id["data_quality.data_quality.no_communication_unreadable"]
    assert "2 communication.json file(s) could not be read" in f.summary
    assert "Level1" not in f.summary and "Level0" not in " ".join(rep.notes)
    assert any("could not be read" in n for n in rep.notes if "no comm_ops" in n)
