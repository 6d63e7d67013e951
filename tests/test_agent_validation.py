"""Questions checked against the profile before any diagnosis text (issue 24 item 4, issue 22).

Parsing: job sizes ("32卡训练", "2机16卡", "on 64 cards") are a ``world_sizes`` slot, never
ranks; ids no profile can hold ("rank -1", "rank 7.5", "rank 1e3", "step -2") are ``bad_ids``;
reversed ranges are read in order; suspected causes fill ``hypothesis``.

Answers: on generated profiles (``seed-rank12``) whose ranks and step ids come from the
generator's answer key, every id that does not exist is refused with what exists, in the
question's language, without running the diagnosis; a reversed range, a job size other than the
profile's and a baseline left out are one clause before the answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor_chat.agent import Advisor
from advisor_chat.agent.parse import HYPOTHESES, parse_question
from advisor_chat.agent.testing import fake_case_search
from advisor_chat.agent.validate import baseline_problem, validate_question
from advisor_chat.config import Settings

R16 = list(range(16))


# -- parsing ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "world"),
    [
        ("32卡训练，为什么慢？", (32,)),
        ("32卡大模型训练很慢，为什么？", (32,)),
        ("32卡llama训练变慢", (32,)),
        ("16卡 TP8 PP2，哪张卡慢", (16,)),
        ("16卡为什么慢", (16,)),  # 16 is not a rank of a 16-rank profile: the job size
        ("2机16卡，为什么慢", (16,)),
        ("两机16卡训练为什么慢", (16,)),
        ("4机每机8卡，哪张卡拖后腿", (32,)),
        ("单机8卡为什么慢", (8,)),
        ("在16张卡上训练，哪张卡慢", (16,)),
        ("32卡训练比16卡慢很多，为什么？", (32, 16)),
        ("8 NPUs, which one is slow?", (8,)),
        ("on 64 cards, why is it slow?", (64,)),
        ("2 nodes x 8 NPUs: which is slow", (16,)),
        ("a 32-card job: which rank is slow?", (32,)),
        ("world size 32, which rank is slow?", (32,)),
    ],
)
def test_job_sizes_are_a_world_size_slot_never_ranks(text: str, world: tuple[int, ...]) -> None:
    q = parse_question(text, profile_ranks=R16)
    assert q.world_sizes == world, (text, q)
    assert not set(world) & set(q.ranks), (text, q)


@pytest.mark.parametrize(
    ("text", "ranks", "world"),
    [
        ("12卡为什么慢？", (12,), ()),  # 12 is a rank of the profile: a rank
        ("16 卡集群中 12 卡存在大段 Free，为什么？", (12,), (16,)),
        ("32卡训练，3号卡为什么慢", (3,), (32,)),
        ("2 nodes x 8 NPUs, why is rank 3 slow?", (3,), (16,)),
        ("有3张卡慢，为什么？", (), ()),  # a count of slow cards, not the job size
        ("3 ranks are slow, why?", (), ()),
        ("are 2 cards slower than the others?", (), ()),
        ("这2张卡为什么慢？", (), ()),  # two cards of the previous turn, not the job size
        ("rank 3 of 16 ranks is slow, why?", (3,), (16,)),
    ],
)
def test_ranks_beside_job_sizes(text: str, ranks: tuple[int, ...], world: tuple[int, ...]) -> None:
    q = parse_question(text, profile_ranks=R16)
    assert (q.ranks, q.world_sizes) == (ranks, world), (text, q)


def test_bare_card_count_follows_the_profile_ranks() -> None:
    # "16卡为什么慢？" is rank 16 on a 32-rank profile, the job size on a 16-rank one
    assert parse_question("16卡为什么慢？", profile_ranks=range(32)).ranks == (16,)
    assert parse_question("16卡为什么慢？", profile_ranks=R16).ranks == ()


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("why is rank -1 slow?", ("rank", "-1")),
        ("why is rank 1e3 slow?", ("rank", "1e3")),
        ("why is rank 7.5 slow?", ("rank", "7.5")),
        ("rank −3 slow?", ("rank", "-3")),
        ("为什么-1号卡慢", ("rank", "-1")),
        ("第7.5张卡慢吗", ("rank", "7.5")),
        ("why is step -2 slow?", ("step", "-2")),
        ("第-2步为什么慢", ("step", "-2")),
    ],
)
def test_ids_no_profile_can_hold_are_kept_as_written(text: str, bad: tuple[str, str]) -> None:
    q = parse_question(text)
    assert q.bad_ids == (bad,), (text, q)
    # never truncated into a valid-looking id ("rank 7.5" is not rank 7, "-1" is not rank 1)
    assert q.ranks == () and q.steps == (), (text, q)


def test_reversed_range_is_read_in_order_and_kept_as_written() -> None:
    for text in ("why are ranks 15-8 slow?", "15到8号卡为什么慢"):
        q = parse_question(text)
        assert q.ranks == tuple(range(8, 16)) and q.rank_ranges == ((15, 8),), (text, q)
    wide = parse_question("are ranks 0-100000 slow?")
    assert wide.rank_ranges == ((0, 100000),) and 100000 not in wide.ranks


@pytest.mark.parametrize(
    ("text", "hyp"),
    [
        ("could it be GC?", "gc"),
        ("是不是垃圾回收导致的？", "gc"),
        ("is it the dataloader?", "dataloader"),
        ("是不是数据加载太慢", "dataloader"),
        ("is it the network?", "network"),
        ("网络问题吗？", "network"),
        ("is link 3-11 slow?", "link"),
        ("是不是某条链路有问题", "link"),
        ("is the hardware broken?", "hardware"),
        ("硬件故障", "hardware"),
        ("is one card bad?", "card"),
        ("should we swap the card?", "card"),
        ("是不是有张卡坏了？", "card"),
        ("要不要换卡", "card"),
        ("is there a compute straggler?", "compute_straggler"),
        ("是不是某张卡计算慢", "compute_straggler"),
        ("are the matmuls just slower on rank 10?", "kernel_slow"),
        ("10号卡的GroupedMatmul比别的卡慢很多，是算子性能有问题吗", "kernel_slow"),
        ("is it a load imbalance?", "load_imbalance"),
        ("负载不均衡", "load_imbalance"),
        ("是不是5号卡分到的数据多、序列长，所以慢？", "load_imbalance"),
        ("could saving checkpoints cause the spikes?", "checkpoint"),
        ("保存 checkpoint 导致的吗", "checkpoint"),
        ("是不是保存检查点导致的？", "checkpoint"),
        ("should we change TP?", "tp_size"),
        ("要不要调整 TP？", "tp_size"),
        ("should I switch ZeRO-3 to ZeRO-2?", "zero_stage"),
        ("要不要把 ZeRO3 换成 ZeRO2", "zero_stage"),
        ("should I enable mc2?", "mc2"),
        ("要不要开 mc2", "mc2"),
        ("is it an HCCL timeout?", "hccl_timeout"),
        ("会不会是 HCCL 超时", "hccl_timeout"),
        ("is memory the problem?", "memory"),
        ("显存不够", "memory"),
        ("is host dispatch the bottleneck?", "host_dispatch"),
        ("是不是下发慢", "host_dispatch"),
    ],
)
def test_hypothesis_slot_en_and_zh(text: str, hyp: str) -> None:
    q = parse_question(text)
    assert hyp in HYPOTHESES
    assert q.hypothesis == hyp and q.hypotheses[0] == hyp, (text, q)


def test_hypothesis_slot_only_when_a_cause_is_put_forward() -> None:
    for text in ("which rank has the most memory?", "which link is slow?", "why is rank 3 slow?"):
        q = parse_question(text)
        assert (q.hypothesis, q.hypotheses) == ("", ()), (text, q)
    both = parse_question("is GC or the dataloader to blame?")
    assert both.hypotheses == ("gc", "dataloader") and both.hypothesis == "gc"
    # the slot does not change the route (the verdict projection is written elsewhere)
    assert parse_question("is it the network?").intent == "slow_link"


@pytest.mark.parametrize(
    ("text", "suspect", "also"),
    [
        # the symptom comes first, the suspect after the words of suspicion
        ("the job hung for 40 s once, is it the network?", "network", "hccl_timeout"),
        ("训练卡死了几十秒，是不是网络问题？", "network", "hccl_timeout"),
        ("is it hung because of the network?", "network", "hccl_timeout"),
        ("is the hang caused by GC?", "gc", "hccl_timeout"),
        # X 导致 Y / X causes Y: the cause is before the verb
        ("显存不够导致卡死吗", "memory", "hccl_timeout"),
        ("does GC cause the hang?", "gc", "hccl_timeout"),
    ],
)
def test_the_suspect_is_the_cause_put_forward_not_the_symptom(text, suspect, also) -> None:
    q = parse_question(text)
    assert q.hypothesis == suspect and also in q.hypotheses, (text, q.hypotheses)


# -- validation on generated profiles --------------------------------------------------------
@pytest.fixture(scope="module")
def seed(scenario) -> tuple[Path, dict]:
    path = scenario("seed-rank12")
    return path, json.loads((path / "answer_key.json").read_text())


@pytest.fixture(scope="module")
def profile(seed):
    from advisor_chat.ingest import load_profile

    return load_profile(seed[0])


def _adv(profile, baseline=None) -> Advisor:
    return Advisor(profile, settings=Settings(), baseline=baseline, case_search=fake_case_search)


def _ids(key: dict) -> tuple[str, str, int, int]:
    n, steps = key["ranks"], key["step_ids"]
    assert steps == list(range(steps[0], steps[0] + len(steps)))  # contiguous by construction
    return f"0-{n - 1}", f"{steps[0]}-{steps[-1]}", n, steps[-1]


def _refused_before_diagnosis(ans) -> None:
    assert [c.name for c in ans.tool_calls] == ["validate_question"], ans.tool_calls
    g = ans.grounding
    assert g.ungrounded == [] and g.numbers_grounded == g.numbers_total, (ans.answer, g)


def test_ids_that_do_not_exist_are_refused_with_what_exists(profile, seed) -> None:
    ranks, steps, n, last_step = _ids(seed[1])
    cases = {
        "why is rank -1 slow?": f"rank -1 does not exist; ranks are {ranks}.",
        "why is rank 1e3 slow?": f"rank 1e3 does not exist; ranks are {ranks}.",
        "why is rank 7.5 slow?": f"rank 7.5 does not exist; ranks are {ranks}.",
        f"why is rank {n} slow?": f"rank {n} does not exist; ranks are {ranks}.",
        "why is step 999 slow?": f"step 999 does not exist; steps are {steps}.",
        "why is step -2 slow?": f"step -2 does not exist; steps are {steps}.",
        f"is link 3-{n + 83} slow?": f"link 3→{n + 83} does not exist, as rank {n + 83} "
        f"does not exist; ranks are {ranks}.",
        f"are ranks 8-{n + 4} slow?": f"ranks 8-{n + 4} reach outside this profile, ranks "
        f"{n}-{n + 4} do not exist; ranks are {ranks}.",
    }
    for question, reason in cases.items():
        ans = _adv(profile).ask(question)
        assert ans.answer == f"I cannot answer that for this profile: {reason}", question
        _refused_before_diagnosis(ans)
    assert str(last_step + 1) in _adv(profile).ask(f"step {last_step + 1}?").answer


def test_ids_that_do_not_exist_are_refused_in_chinese(profile, seed) -> None:
    ranks, steps, n, _ = _ids(seed[1])
    cases = {
        "为什么-1号卡慢？": f"-1号卡（rank -1）不存在；现有的卡为 {ranks}",
        "第999步为什么慢？": f"第 999 步不存在；现有的步为 {steps}",
        f"3-{n + 83}之间的链路慢吗？": f"链路 3→{n + 83} 不存在，因为{n + 83}号卡（rank {n + 83}）"
        f"不存在；现有的卡为 {ranks}",
    }
    for question, reason in cases.items():
        ans = _adv(profile).ask(question)
        assert ans.answer == f"无法回答：{reason}。", question
        _refused_before_diagnosis(ans)


def test_reversed_range_is_read_in_order_before_the_answer(profile) -> None:
    adv = _adv(profile)
    rev = adv.ask("why are ranks 15-8 slow?")
    assert rev.answer.startswith("Read ranks 15-8 as ranks 8-15.\n\n"), rev.answer
    plain = _adv(profile).ask("why are ranks 8-15 slow?")
    assert rev.answer.split("\n\n", 1)[1] == plain.answer  # then the same answer as 8-15
    zh = _adv(profile).ask("15到8号卡为什么慢")
    assert zh.answer.startswith("按 8-15 号卡理解“15-8”。\n\n"), zh.answer


def test_job_size_other_than_the_profile_is_one_clause(profile, seed) -> None:
    ranks, _, n, _ = _ids(seed[1])
    en = _adv(profile).ask(f"on {2 * n} cards, which rank is slow?")
    # the answer first (its first line names the slow rank), the correction right after it
    first, _, rest = en.answer.partition("\n\n")
    assert "rank 12" in first.lower() and not first.startswith("Note")
    assert rest.startswith(
        f"Note: this profile holds {n} ranks ({ranks}), not {2 * n}; the answer is about these {n}."
    ), en.answer
    assert "does not exist" not in en.answer and en.intent == "which_slow_rank"
    zh = _adv(profile).ask(f"{2 * n}卡训练，为什么慢？")
    first, _, rest = zh.answer.partition("\n\n")
    assert not first.startswith("注意")
    assert rest.startswith(
        f"注意：这份数据有 {n} 张卡（{ranks}），不是 {2 * n} 卡；本回答针对这 {n} 张卡。"
    ), zh.answer
    assert "不存在" not in zh.answer
    # the job size of the profile itself: no clause, no refusal
    same = _adv(profile).ask(f"{n}卡训练，为什么慢？")
    assert not same.answer.startswith("注意") and "不存在" not in same.answer
    assert "validate_question" not in [c.name for c in same.tool_calls]


def test_baselines_that_are_not_comparable(profile, seed, scenario) -> None:
    from advisor_chat.ingest import load_profile

    ranks, _, n, _ = _ids(seed[1])
    small_path = scenario("seed-rank12", ranks=n // 2)
    small = load_profile(small_path)
    small_ranks = f"0-{n // 2 - 1}"
    same = load_profile(seed[0])
    assert baseline_problem(profile, same).kind == "same_folder"
    assert baseline_problem(profile, small).kind == "world_size"
    assert baseline_problem(profile, None) is None

    ans = _adv(profile, same).ask("what changed?")
    assert ans.answer.startswith(
        "The two runs are not comparable: the baseline is the same folder as this profile."
    ), ans.answer
    _refused_before_diagnosis(ans)
    other = _adv(profile, small)
    ans = other.ask("what changed after the upgrade?")
    assert ans.answer.startswith(
        f"The two runs are not comparable: the baseline holds {n // 2} ranks ({small_ranks}) "
        f"and this profile {n} ({ranks})."
    ), ans.answer
    assert "Pin the previous" not in ans.answer and "Regression" not in ans.answer
    _refused_before_diagnosis(ans)
    zh = _adv(profile, small).ask("升级后有什么变化？")
    assert zh.answer.startswith(f"无法对比两次运行：基线有 {n // 2} 张卡（{small_ranks}）")
    # any other question: one clause, then the diagnosis of this profile without the baseline
    why = other.ask("why is rank 3 slow?")
    assert why.answer.startswith(f"The baseline was not used (the baseline holds {n // 2} ranks")
    assert "regression" not in why.answer.lower()
    # after the clause, the same answer as without a baseline
    alone = _adv(profile).ask("why is rank 3 slow?")
    assert why.answer.split("\n\n", 1)[1] == alone.answer


def test_baselines_of_another_model_or_layout(profile, seed, tmp_path: Path) -> None:
    """A baseline of the same size from another job is refused, with the measured reason."""
    import csv
    import io
    import shutil

    from advisor_chat.ingest import load_profile

    # another model: every operator type renamed in every rank's op_statistic.csv
    other = tmp_path / "other"
    shutil.copytree(seed[0], other)
    for f in other.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/op_statistic.csv"):
        rows = list(csv.reader(io.StringIO(f.read_text(encoding="utf-8-sig"))))
        col = rows[0].index("OP Type")
        for r in rows[1:]:
            r[col] = "Other" + r[col]
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        f.write_text(buf.getvalue(), encoding="utf-8")
    base = load_profile(other)
    prob = baseline_problem(profile, base)
    assert prob is not None and prob.kind == "operators" and prob.shared_pct == 0.0
    ans = _adv(profile, base).ask("what changed after the upgrade?")
    assert ans.answer.startswith(
        "The two runs are not comparable: the baseline runs another model: only 0% of"
    ), ans.answer
    _refused_before_diagnosis(ans)
    assert "0% (op_statistic)" in ans.tool_calls[0].summary

    # another layout: the real 16-rank job with 2 pipeline stages against a 16-rank job without
    real = load_profile(Path(__file__).parent / "data" / "real" / "cluster-16rank-pp2")
    if len(real.ranks) == len(profile.ranks):
        prob = baseline_problem(profile, real)
        assert prob is not None and prob.kind == "layout" and prob.stages == (1, 2)
        zh = _adv(profile, real).ask("升级后有什么变化？")
        assert zh.answer.startswith("无法对比两次运行：基线有 2 个流水线阶段，这份数据有 1 个")

    # the same job (its own copy, untouched): compared as before
    same_job = tmp_path / "same"
    shutil.copytree(seed[0], same_job)
    assert baseline_problem(profile, load_profile(same_job)) is None


def test_validation_alone_on_a_constructed_query() -> None:
    q = parse_question("why are rank 20 and rank 3 slow in step 7?")
    v = validate_question(q, range(16), [10, 11, 12])
    assert v.refusal == (
        "I cannot answer that for this profile: rank 20 does not exist; ranks are 0-15. "
        "Step 7 does not exist; steps are 10-12."
    )
    ok = validate_question(
        parse_question("why is rank 3 slow in step 11?"), range(16), [10, 11, 12]
    )
    assert not ok.says_something
    # no step ids in the profile: steps are not checked
    assert not validate_question(parse_question("step 7?"), range(16), []).says_something
    # no step markers (the capture is step -1): said so, never "steps are -1"
    v = validate_question(parse_question("Step 2 was slow. Checkpoint?"), range(8), [-1])
    assert "no step markers" in v.refusal and "-1" not in v.refusal
    v = validate_question(parse_question("第2步很慢，是保存检查点吗？"), range(8), [-1])
    assert "没有步标记" in v.refusal and "-1" not in v.refusal


def test_guarded_mode_does_not_rewrite_a_refusal() -> None:
    from langchain_core.messages import AIMessage

    from advisor_chat.agent.testing import scripted, tiny_diagnosis, tiny_profile, tiny_registry

    # a model that would answer about a rank that does not exist is never asked
    adv = Advisor(
        tiny_profile(),
        settings=Settings(guarded=True),
        registry=tiny_registry(),
        case_search=fake_case_search,
        chat_model=scripted([AIMessage(content="Rank 16 is fine.")]),
        diagnose=tiny_diagnosis,
    )
    ans = adv.ask("why is rank 16 slow?")
    assert ans.answer == (
        "I cannot answer that for this profile: rank 16 does not exist; ranks are 0-3."
    )
    assert ans.mode == "guarded-fallback" and ans.model_usage == {}


def test_a_network_suspicion_next_to_a_symptom_gets_a_network_verdict(profile, seed) -> None:
    """The hang is the context, the network the suspect: the answer judges the network first."""
    culprit = seed[1]["root_cause"]["culprit_ranks"][0]
    for question, verdict in (
        (
            "the job hung for 40 s once, is it the network?",
            f"No: the cause is rank {culprit}, not the network.",
        ),
        ("训练卡死了几十秒，是不是网络问题？", f"不是网络，问题在{culprit}号卡。"),
    ):
        ans = _adv(profile).ask(question)
        assert ans.answer.startswith(verdict), (question, ans.answer[:200])
        assert str(culprit) in ans.answer.split("\n")[0], ans.answer[:300]


def test_a_refused_question_is_no_context_for_the_next(profile, seed) -> None:
    """ "why is rank 99 slow?" is refused; "what about step N?" is then about the job."""
    _, _steps, n, last = _ids(seed[1])
    adv = _adv(profile)
    first = adv.ask(f"why is rank {n + 83} slow?")
    assert "does not exist" in first.answer
    follow = adv.ask(f"what about step {last}?")
    assert "does not exist" not in follow.answer and f"{n + 83}" not in follow.answer
    # while a valid rank carries over to the follow-up
    adv.ask("why is rank 3 slow?")
    assert "rank 3" in adv.ask(f"what about step {last}?").answer.lower()


def test_a_link_from_a_rank_to_itself_is_not_a_link() -> None:
    for text, lang in (("is link 12→12 slow?", "en"), ("链路12-12慢吗？", "zh")):
        q = parse_question(text)
        assert q.links == ((12, 12),)
        v = validate_question(q, range(16), [10, 11, 12])
        assert "12→12" in v.refusal
        assert ("is not a link" in v.refusal) if lang == "en" else ("不是一条链路" in v.refusal)
    # a real link of the profile is not refused
    assert validate_question(parse_question("is link 3→11 slow?"), range(16), [10]).refusal == ""


def test_ranks_of_the_job_without_data_are_not_called_nonexistent() -> None:
    """A 2-rank capture of an 8-rank job: rank 3 exists, its data was not captured."""
    q = parse_question("why is rank 3 slow?")
    v = validate_question(q, [0, 1], [50], uncaptured=range(2, 8))
    assert "rank 3 belongs to the job but has no profiling data" in v.refusal
    assert "does not exist" not in v.refusal
    # a rank beyond the job still does not exist
    v = validate_question(
        parse_question("why is rank 30 slow?"), [0, 1], [50], uncaptured=range(2, 8)
    )
    assert "rank 30 does not exist" in v.refusal
    zh = validate_question(parse_question("3号卡为什么慢？"), [0, 1], [50], uncaptured=range(2, 8))
    assert "3号卡属于这个作业" in zh.refusal and "不存在" not in zh.refusal


def test_real_partial_capture_names_the_missing_rank(real_samples) -> None:
    from advisor_chat.ingest import load_profile

    p = load_profile(real_samples / "pt-text-level1-2rank")
    absent = sorted({r for w in p.warnings if w.code == "missing_ranks" for r in w.ranks})
    assert absent and 3 in absent
    ans = _adv(p).ask("why is rank 3 slow?")
    assert "has no profiling data in this folder" in ans.answer
