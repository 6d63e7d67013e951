"""The diagnosis of the real samples, with expected numbers read independently with ``csv``."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from advisor_chat.diagnosis import Mechanism, diagnose
from advisor_chat.diagnosis.engine import JOB_FIRST
from advisor_chat.ingest import load_profile


def _rank_rows(path: Path) -> dict[int, dict[str, float]]:
    out = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["Type"] == "rank":
                out[int(row["Index"])] = {
                    k: float(v) for k, v in row.items() if k not in ("Type", "Index", "Step")
                }
    return out


def test_pp2_sample_is_a_pipeline_imbalance_blamed_on_stage_0(real_samples: Path) -> None:
    root = real_samples / "cluster-16rank-pp2"
    rows = _rank_rows(root / "cluster_analysis_output" / "cluster_step_trace_time.csv")
    d = diagnose(load_profile(root))
    c = d.top()
    assert c is not None and c.mechanism is Mechanism.PIPELINE_IMBALANCE
    assert c.culprit.kind == "stage" and c.culprit.stage == 0
    assert c.culprit.ranks == tuple(range(8))
    assert c.category.value == "communication" and c.dominant.startswith("communication-bound")

    # stage 0 is communication-bound: its exposed communication (Not Overlapped and Exclude
    # Receive) is the largest component; share = mean over ranks 0-7 / mean step (Stage + Bubble)
    s0 = [rows[r] for r in range(8)]
    exposed = sum(r["Communication(Not Overlapped and Exclude Receive)"] for r in s0) / 8
    comp = sum(r["Computing"] for r in s0) / 8
    free = sum(r["Free"] for r in s0) / 8
    step0 = sum(r["Stage"] + r["Bubble"] for r in s0) / 8
    assert exposed > comp and exposed > free
    assert c.metrics["culprit_dominant_share"] == pytest.approx(exposed / step0, rel=1e-6)

    # stage 1 (ranks 8-15) waits: its victims lose their Bubble, read from the csv
    lost = {v.rank: v.lost_us for v in c.victims}
    assert set(lost) == set(range(8, 16))
    for r in range(8, 16):
        assert lost[r] == pytest.approx(rows[r]["Bubble"], rel=1e-9)
    assert all(v.how == "bubble" for v in c.victims)
    bubble_mean = sum(rows[r]["Bubble"] for r in range(8, 16)) / 8
    assert c.metrics["bubble_us_mean"] == pytest.approx(bubble_mean, rel=1e-9)

    # "why is rank 12 slow?": a victim of stage 0, never a culprit, never "not slow" alone
    roles = d.role_of(12)
    assert roles and roles[0][1] == "victim" and roles[0][0] is c
    assert roles[0][2] is not None and roles[0][2].lost_us == pytest.approx(rows[12]["Bubble"])
    assert not any(role == "culprit" for _, role, _ in roles)
    assert "stage 0" in d.headline and "阶段0" in d.headline_zh

    # every rank also idles 64-93 ms per step (Free): one job-level cause after the pipeline
    idle = d.causes[1]
    assert idle.mechanism is Mechanism.JOB_IDLE and idle.culprit.kind == "job"
    assert {v.rank: v.lost_us for v in idle.victims} == pytest.approx(
        {r: rows[r]["Free"] for r in range(16)}
    )
    assert idle.gain_us == pytest.approx(min(rows[r]["Free"] for r in range(16)))


@pytest.mark.parametrize(
    ("sample", "first"),
    [
        # every rank ~65 % Free: the job-wide idle dwarfs what any late rank costs
        ("cluster-8rank", {Mechanism.JOB_IDLE}),
        # wait-dominated communication with ranks 2-7 missing: a late/missing peer (trial item 2)
        ("pt-text-level1-2rank", {Mechanism.COMPUTE_STRAGGLER, Mechanism.NOT_ENOUGH_SIGNAL}),
        ("pt-db-level1-2rank", {Mechanism.COMPUTE_STRAGGLER, Mechanism.NOT_ENOUGH_SIGNAL}),
    ],
)
def test_other_real_samples_give_sensible_causes(
    real_samples: Path, sample: str, first: set[Mechanism]
) -> None:
    d = diagnose(load_profile(real_samples / sample))
    assert d.causes and d.causes[0].mechanism in first, d.headline
    if len(d.ranks) < 3:  # two ranks: a slow rank can never be named
        assert any(c.mechanism is Mechanism.NOT_ENOUGH_SIGNAL for c in d.causes)
        assert not any(c.culprit.kind == "rank" for c in d.causes)


def test_cluster_8rank_blames_the_last_arriver_first(real_samples: Path) -> None:
    # the last arriver is the rank with the least exposed communication (it waits least)
    rows = _rank_rows(
        real_samples / "cluster-8rank" / "cluster_analysis_output" / "cluster_step_trace_time.csv"
    )
    col = "Communication(Not Overlapped)"
    last = min(rows, key=lambda r: rows[r][col])
    d = diagnose(load_profile(real_samples / "cluster-8rank"))
    c = next((x for x in d.causes if x.culprit.kind == "rank"), None)
    assert c is not None and c.culprit.ranks == (last,)
    # everyone else waits for it until the next late rank arrives: the wait blamed on it is the
    # gap between its exposed communication and the next-least one
    second = sorted(rows[r][col] for r in rows)[1]
    assert c.gain_us == pytest.approx(second - rows[last][col], rel=1e-6)
    # ahead of it: the idle every rank shares (the least Free of any rank), many times larger
    idle = d.top()
    assert idle is not None and idle.mechanism is Mechanism.JOB_IDLE
    assert idle.gain_us == pytest.approx(min(rows[r]["Free"] for r in rows))
    # the host-bound finding it claims states the same figure (one figure per quantity)
    free = next(f for f in idle.findings if f.id == "cluster_breakdown.host_bound.free_share")
    assert free.estimated_gain_us == pytest.approx(idle.gain_us)
    late_gains = [x.gain_us or 0.0 for x in d.causes if x.culprit.kind == "rank"]
    assert idle.gain_us >= JOB_FIRST * max(late_gains)


@pytest.mark.parametrize(
    "sample", ["cluster-16rank-pp2", "cluster-8rank", "pt-text-level1-2rank", "pt-db-level1-2rank"]
)
def test_real_sample_causes_use_the_symptom_vocabulary(real_samples: Path, sample: str) -> None:
    from advisor_chat.symptoms import SYMPTOM_TAGS

    d = diagnose(load_profile(real_samples / sample))
    assert d.causes
    for c in d.causes:
        assert set(c.symptom_tags) <= set(SYMPTOM_TAGS), (c.id, c.symptom_tags)


def test_tag_literals_of_the_blame_rules_are_in_the_vocabulary() -> None:
    # every tag the rules can emit (also on paths no scenario reaches) is a vocabulary tag
    import re

    import advisor_chat.diagnosis.engine as engine
    import advisor_chat.diagnosis.rules as rules
    from advisor_chat.symptoms import SYMPTOM_TAGS

    src = "".join(f.read_text() for f in sorted(Path(rules.__file__).parent.glob("*.py")))
    src += Path(engine.__file__).read_text()
    found: set[str] = set()
    for m in re.finditer(
        r"symptom_tags=\(([^)]*)\)|\btags\s*[=+]\s*[\[(]([^\])]*)[\])]|tags\.append\(\s*\"([^\"]+)\"",
        src,
    ):
        body = " ".join(g for g in m.groups() if g)
        found |= set(re.findall(r"\"([a-z0-9_]+)\"", body))
    assert len(found) >= 10  # the pattern sees the rules' tags
    assert found <= set(SYMPTOM_TAGS), sorted(found - set(SYMPTOM_TAGS))


@pytest.mark.parametrize("sample", ["pt-text-level1-2rank", "pt-db-level1-2rank"])
def test_wait_dominated_communication_with_missing_ranks_is_a_late_peer(
    real_samples: Path, sample: str
) -> None:
    """Trial item 2: transit < 25% of Elapse and ranks missing -> no overlap claim, no gain."""
    from advisor_chat.analyzers._common import comm_time_split, missing_ranks

    prof = load_profile(real_samples / sample)
    split = comm_time_split(prof)
    transit_share = float(split["transit_ms"].sum() / split["elapse_ms"].sum())
    missing = missing_ranks(prof)
    assert transit_share < 0.25 and missing  # the premise, computed independently
    d = diagnose(prof)
    assert not any(c.mechanism is Mechanism.EXPOSED_COMMUNICATION for c in d.causes)
    peer = next(c for c in d.causes if c.id == "cause.peer_wait.missing_ranks")
    assert peer.culprit.ranks == tuple(missing)
    assert peer.gain_us is None and all(r.kind == "check" for r in peer.remedies)
    assert "collect all ranks" in peer.remedies[0].text.lower()
    assert "overlap tuning would not help" in peer.summary
    for text in (peer.summary, peer.summary_zh):
        assert "2-7" in text
    assert not any("overlap" in r.text.lower() and r.kind == "action" for r in peer.remedies)
    # each rank present loses its own exposed communication (step_trace, mean over steps)
    st = prof.get("step_trace")
    col = "communication_not_overlapped_exclude_receive_us"
    col = col if st[col].notna().all() else "communication_not_overlapped_us"
    own = st.groupby("rank")[col].mean()
    lost = {i.rank: i.lost_us for i in peer.victims}
    assert set(lost) == set(own.index.astype(int))
    for r, v in own.items():
        assert lost[int(r)] == pytest.approx(float(v), rel=1e-6), r


def test_free_alone_is_device_idle_not_a_host_stall(real_samples: Path) -> None:
    """Trial item 5: cluster-8rank has no host data (no launch delays): no host stall as fact."""
    prof = load_profile(real_samples / "cluster-8rank")
    assert not prof.has("host_dispatch")  # the premise: no trace_view.json in this sample
    d = diagnose(prof)
    rank_causes = [c for c in d.causes if c.mechanism is Mechanism.HOST_STALL]
    assert rank_causes
    for c in rank_causes:
        assert c.summary.startswith("Device idle (Free)") and "not measured" in c.summary
        assert "设备空闲（Free）" in c.summary_zh
        assert not any("trace_view.json" in r.text and "Open" in r.text for r in c.remedies)
        assert not any(".item()" in r.text for r in c.remedies)


def test_measured_launch_delays_keep_the_host_stall_wording(scenario) -> None:
    prof = load_profile(scenario("host-bound-last-arriver"))
    assert prof.has("host_dispatch")
    d = diagnose(prof)
    host = [c for c in d.causes if c.mechanism is Mechanism.HOST_STALL]
    assert host and host[0].summary.startswith("Host stall on")
    assert any("Open" in r.text and "trace_view.json" in r.text for r in host[0].remedies)


def test_pp2_gain_bound_is_honest_and_the_limited_evidence_is_said(real_samples: Path) -> None:
    """Trial item 4: no "capped by its Transit" unless the cap is measured and smaller."""
    prof = load_profile(real_samples / "cluster-16rank-pp2")
    n_comm = int(prof.get("comm_ops")["rank"].nunique())
    assert n_comm < 16  # the premise: cluster_communication.json covers only some ranks
    d = diagnose(prof)
    c = d.causes[0]
    assert c.mechanism is Mechanism.PIPELINE_IMBALANCE  # the diagnosis is kept
    assert f"communication detail (comm_ops) for {n_comm} of 16 ranks" in c.summary
    assert f"只覆盖 16 张卡中的 {n_comm} 张" in c.summary_zh
    for f in c.findings:
        gain = f.estimated_gain_us
        for ev in f.evidence:
            if "capped by" in ev.note and "NOT capped" not in ev.note:
                cap_ms = float(ev.note.split("Transit time per step (")[1].split(" ms")[0])
                assert gain is not None and gain <= cap_ms * 1000.0 + 1.0, (f.id, ev.note)


def test_late_arrival_is_said_only_where_a_collective_shows_it(real_samples: Path) -> None:
    """cluster-8rank: rank 1 waited least (arrived last) in both broadcasts of
    cluster_communication.json; ranks 3 and 6 are late too but arrive before it, and say so. Ranks
    with no entry in the file: their lateness and the others' wait are said to be inferred."""
    import json

    root = real_samples / "cluster-8rank"
    comm = json.loads((root / "cluster_analysis_output" / "cluster_communication.json").read_text())
    votes: dict[int, int] = {}
    present = {
        int(r)
        for steps in comm.values()
        for ops in steps.values()
        for by_rank in ops.values()
        for r in by_rank
        if r.isdigit()
    }
    for steps in comm.values():
        for ops in steps.values():
            for op, by_rank in ops.items():
                waits = {
                    int(r): v["Communication Time Info"]["Wait Time(ms)"]
                    for r, v in by_rank.items()
                    if r.isdigit()
                }
                if len(waits) >= 2 and not op.startswith("Total"):
                    last = min(waits, key=waits.__getitem__)
                    votes[last] = votes.get(last, 0) + 1
    d = diagnose(load_profile(root))
    late = {c.culprit.ranks[0]: c for c in d.causes if c.id.startswith("cause.host_stall.")}
    assert {1, 3, 6} <= set(late)
    for rank, c in late.items():
        if votes.get(rank, 0) > 0 and {v.rank for v in c.victims} <= present:
            assert "it arrives late at the collectives" in c.summary, (rank, c.summary)
            assert "它较晚到达集合通信，" in c.summary_zh
        elif votes.get(rank, 0) > 0:
            # the file records its collectives with some ranks only: the others' wait is inferred
            shared = sorted(present - {rank})
            label = f"rank {shared[0]}" if len(shared) == 1 else "ranks"
            assert (
                f"it arrives last at the recorded collectives it shares with {label}" in c.summary
            )
            assert "(inferred for the ranks with no recorded collective with it)" in c.summary
            assert "已记录集合通信中它最后到达" in c.summary_zh
        else:
            # never last because a later rank is: that rank (the one the collectives show last)
            # is named, and fixing this one alone is said to give nothing back
            last = max(votes, key=votes.__getitem__)
            m = re.search(r"though before ranks? ([\d, ]+)", c.summary)
            assert m is not None, (rank, c.summary)
            assert last in {int(x.strip()) for x in m.group(1).split(",") if x.strip()}
            if rank not in present:  # no collective of its own: inferred from the step times
                assert "no collective data shows its arrival" in c.summary
                assert "(inferred, not measured)" in c.summary and "推断值" in c.summary_zh
            assert "Fixing it alone saves nothing" in c.summary
            assert "但早于" in c.summary_zh and "单独修复它节省不了时间" in c.summary_zh
            assert c.metrics["gain_alone_us"] == 0.0
    assert votes.get(1, 0) > 0 and not votes.get(3) and not votes.get(6)


def test_one_node_is_told_from_no_node_layout(real_samples) -> None:
    """pt-text-level1-2rank's matrix joins all 8 ranks by HCCS (one node); cluster-16rank-pp2's
    covers a few ranks only (no layout). Counted here from the communication.json link keys."""
    import json

    from advisor_chat.diagnosis import diagnose
    from advisor_chat.ingest import load_profile

    def hccs_ranks(root):
        out = set()
        for f in root.rglob("communication_matrix.json"):
            for text in [f.read_text()]:
                for _step, ops in json.loads(text).items():
                    for links in (ops.get("collective", {}) | ops.get("p2p", {})).values():
                        for link, v in links.items():
                            if v.get("Transport Type") == "HCCS":
                                out |= {int(x) for x in link.split("-")}
        return out

    pt = real_samples / "pt-text-level1-2rank"
    assert len(hccs_ranks(pt)) == 8
    d = diagnose(load_profile(pt, use_cache=False, progress=False))
    assert d.one_node and d.nodes == ()
    c = diagnose(load_profile(real_samples / "cluster-16rank-pp2", use_cache=False, progress=False))
    assert not c.one_node and c.nodes == ()


def test_cluster_8rank_idle_is_counted_once(real_samples: Path) -> None:
    # every rank loses the Free all ranks share (the minimum) to the job's idle; the late ranks'
    # Free above it belongs to their own causes, not to the job's as well
    root = real_samples / "cluster-8rank"
    rows = _rank_rows(root / "cluster_analysis_output" / "cluster_step_trace_time.csv")
    shared = min(r["Free"] for r in rows.values())
    d = diagnose(load_profile(root))
    idle = next(c for c in d.causes if c.mechanism is Mechanism.JOB_IDLE)
    assert {v.rank: v.lost_us for v in idle.victims} == pytest.approx(
        {r: shared for r in rows}, rel=1e-6
    )
    late = [c for c in d.causes if c.mechanism is Mechanism.HOST_STALL and c.culprit.kind == "rank"]
    assert late
    for c in late:
        # "would wait up to X" is the largest victim loss, the figure the victims list shows
        if "up to" in c.summary and c.victims:
            top = max(v.lost_us for v in c.victims)
            assert (
                f"up to {top / 1000:,.1f} ms" in c.summary
                or f"up to {top / 1000:,.0f} ms" in c.summary
            ), c.summary


def test_gc_on_a_cluster_output_without_host_data(real_samples: Path) -> None:
    # the cluster output has no host data: the idle is the devices', not a measured host wait
    from advisor_chat.diagnosis.hypotheses import judge

    d = diagnose(load_profile(real_samples / "cluster-16rank-pp2"))
    v = judge(d, "gc")
    assert v.status == "undecided"
    assert "waiting for its host" not in v.reason and "does not show" in v.reason
    assert "等主机" not in v.reason_zh


def test_preparing_is_not_counted_as_free(real_samples: Path) -> None:
    """pt-text-level1-2rank: step_trace's Preparing (framework step start -> first device task)
    lies before the device span that Computing + Communication + Free cover: the job's idle does
    not claim it as 'of it at the start of the step'."""
    root = real_samples / "pt-text-level1-2rank"
    prep = []
    for r in (0, 1):
        path = root / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
        with open(path, newline="") as fh:
            prep += [float(row["Preparing"]) for row in csv.DictReader(fh)]
    d = diagnose(load_profile(root))
    idle = next(c for c in d.causes if c.mechanism in (Mechanism.JOB_IDLE, Mechanism.HOST_STALL))
    assert "of it at the start of the step" not in idle.summary
    assert "Preparing, outside this Free" in idle.summary
    mean_prep = sum(prep) / len(prep)
    assert f"starts {mean_prep / 1000:.1f} ms after" in idle.summary or (
        f"starts {sorted(prep)[len(prep) // 2] / 1000:.1f} ms after" in idle.summary
    )


@pytest.mark.parametrize("sample", ["cluster-8rank", "cluster-16rank-pp2"])
def test_links_that_cannot_be_judged_are_neither_blamed_nor_cleared(real_samples, sample) -> None:
    """cluster-8rank has no communication_matrix.json; cluster-16rank-pp2's covers too few links to
    compare: "is it the network?" cannot be told, and no answer says every link is healthy."""
    from advisor_chat.diagnosis.hypotheses import judge

    root = real_samples / sample
    d = diagnose(load_profile(root))
    assert not d.links_judged
    net = judge(d, "network")
    assert net.status == "undecided", net.reason
    assert "bandwidth of its peers" not in net.reason and "no link is degraded" not in net.reason
    hw = judge(d, "hardware")
    assert "no link is degraded" not in hw.reason
    if sample == "cluster-8rank":  # the job-wide idle is the largest cost, not a part
        assert hw.status == "contradicted" and d.causes[0].id in hw.causes
    else:  # a communication-bound stage with unjudged links: a link cannot be ruled out
        assert hw.status == "undecided"


def test_how_much_leads_with_the_largest_loss_even_without_a_gain(real_samples) -> None:
    """pt-text: the wait for the missing ranks 2-7 is the largest loss (no gain can be estimated);
    "how much are we losing?" says it first, with its victims' wait, then the host cause."""
    from advisor_chat.agent import project

    d = diagnose(load_profile(real_samples / "pt-text-level1-2rank"))
    first = d.causes[0]
    assert first.gain_us is None and first.victims
    p = project.how_much(d, False)
    worst = max(first.victims, key=lambda v: v.lost_us)
    assert p.causes[0].id == first.id
    assert p.lines[0].startswith(
        f"The largest loss is waiting at the collectives: up to {project.us(worst.lost_us)}"
    )
    assert "ranks 2-7" in p.lines[0]
    assert any(c.gain_us for c in p.causes[1:])


def test_where_the_time_goes_points_up_to_the_shares_it_moved(real_samples) -> None:
    """pt-text's category answer explains why it is communication "in the shares below"; asked
    where the time goes, the shares come second, and the pointer says above."""
    from advisor_chat.agent import project

    d = diagnose(load_profile(real_samples / "pt-text-level1-2rank"))
    plain = " ".join(project.category(d, ("category",), False, False).lines)
    moved = project.category(d, ("category",), False, False, breakdown_first=True)
    assert "cluster-wide shares below" in plain
    assert moved.lines[1] == project.shares_line(d, False)
    assert "shares below" not in " ".join(moved.lines)
    assert "cluster-wide shares above" in " ".join(moved.lines)


def test_job_idle_without_host_data_checks_before_it_acts(real_samples: Path) -> None:
    """Trial: cluster-8rank (no host data) led with "overlap input preparation ... for 893 ms"
    though the idle could be input, rollout, host work or synchronization."""
    prof = load_profile(real_samples / "cluster-8rank")
    assert not prof.has("host_dispatch")  # the premise: nothing places the idle
    idle = diagnose(prof).top()
    assert idle is not None and idle.mechanism is Mechanism.JOB_IDLE
    assert not [r for r in idle.remedies if r.kind == "action"]
    # the input pipeline is named as what to check, next to collecting host data
    (check,) = [r for r in idle.remedies if "dataloader" in r.text]
    assert check.kind == "check" and "host data" in check.text and "num_workers" in check.text_zh


def test_a_late_rank_behind_others_says_why_its_saving_is_below_the_wait(
    real_samples: Path,
) -> None:
    """Trial: cluster-8rank rank 3 "would wait up to 256 ms" beside "saves up to 213 ms"."""
    d = diagnose(load_profile(real_samples / "cluster-8rank"))
    checked = 0
    for c in d.causes:
        if c.culprit.kind != "rank" or not c.gain_after or not c.victims:
            continue
        most = max(v.lost_us for v in c.victims)
        said = "the next late rank then holds the job" in c.summary
        assert said == (most > 1.05 * (c.gain_us or 0.0)), c.summary
        assert ("下一张晚到的卡随即拖住作业" in c.summary_zh) == said
        checked += said
    assert checked  # the premise: one such rank in this sample (rank 3)


def test_a_transit_split_says_which_ranks_it_was_measured_on(
    real_samples: Path, tmp_path: Path
) -> None:
    """Trial: with rank 1's communication.json truncated, rank 1's answer still quoted the
    collectives' transit/wait split (read from rank 0 alone) as if it were its own."""
    import shutil

    root = tmp_path / "pt"
    shutil.copytree(real_samples / "pt-text-level1-2rank", root)
    comm = next(root.glob("rank1_*/ASCEND_PROFILER_OUTPUT/communication.json"))
    comm.write_bytes(comm.read_bytes()[: comm.stat().st_size // 2])
    d = diagnose(load_profile(root))
    split = [c for c in d.causes if "transit is only" in c.summary]
    assert split  # the premise: the wait-dominated peer-wait cause states the split
    for c in split:
        assert "(measured on rank 0 only: rank 1 has no communication data)" in c.summary
        assert "仅为0号卡的实测值：1号卡没有通信数据" in c.summary_zh
    # the file left out is said in both languages with what it held and what to do
    assert "communication.json is not valid JSON" in d.left_out and "Left out:" in d.left_out
    assert "communication.json 无法解析" in d.left_out_zh
    assert "未分析1号卡的通信算子与带宽" in d.left_out_zh and "重新拷贝" in d.left_out_zh
    # with both files read, no such note
    whole = diagnose(load_profile(real_samples / "pt-text-level1-2rank"))
    assert not any("measured on" in c.summary for c in whole.causes)
