"""Question slots (issue 12 item 3): targets, kinds, topics, context; EN and ZH at parity.

Includes the hijack cases of issue 12 ("(TP=8)", "vs", "ranks 8-15", "是不是网络的问题？",
"先修什么？") and the question-length cap (issue 14).
"""

from __future__ import annotations

import pytest

from advisor_chat.agent.parse import (
    MAX_QUESTION_CHARS,
    asks_bandwidth,
    find_kind,
    parse_question,
    too_long_message,
)

GROUPS = ["tp", "dp", "pp", "7723901842113496531"]


def _q(text: str, **kw):
    return parse_question(text, groups=GROUPS, op_types=["MatMulV2", "Add"], **kw)


@pytest.mark.parametrize(
    ("en", "zh", "kind", "intent"),
    [
        ("why is rank 12 slow?", "为什么12号卡慢？", "why", "explain_rank"),
        ("which rank holds the job back?", "哪张卡拖后腿？", "which", "which_slow_rank"),
        ("is the network the problem?", "是不是网络的问题？", "yes_no", "slow_link"),
        ("what should I fix first?", "先修什么？", "fix_first", "fix_first"),
        ("what should we change first?", "先怎么改？", "fix_first", "fix_first"),
        ("what do i change first?", "先怎么处理", "fix_first", "fix_first"),
        ("first action?", "先做什么？", "fix_first", "fix_first"),
        ("the first step is slower, why?", "第一步为什么慢？", "why", "step_events"),
        ("how much could I gain?", "能省多少时间？", "how_much", "how_much"),
        ("why are some steps slow?", "为什么有些 step 特别慢？", "why", "step_events"),
        ("is the profiling data complete?", "采集的数据完整吗？", "data", "data_quality"),
        ("is it a compute problem?", "是计算问题吗？", "yes_no", "bottleneck"),
        ("summarize the problems", "总结一下问题", "overview", "summarize"),
        ("why is stage 1 waiting?", "为什么流水线阶段1在等待？", "why", "pipeline_bubble"),
        # operators of the slow steps: the steps' cause, not an operator table over all steps,
        # and "what changed" in a step is not a profile-vs-profile diff
        (
            "in those two slow steps, did the operators change?",
            "慢的那两步里算子有变化吗？",
            "yes_no",
            "step_events",
        ),
        ("what changed after the CANN upgrade?", "CANN 升级后变了什么？", "", "compare_profiles"),
    ],
)
def test_same_slots_in_english_and_chinese(en: str, zh: str, kind: str, intent: str) -> None:
    a, b = _q(en), _q(zh)
    assert (a.kind, a.intent, a.language) == (kind, intent, "en"), a
    assert (b.kind, b.intent, b.language) == (kind, intent, "zh"), b
    assert a.ranks == b.ranks and a.stages == b.stages and a.topics[:1] == b.topics[:1]


def test_what_changed_in_a_step_is_not_a_baseline_comparison() -> None:
    q = _q("what changed in the operators during the two slow steps?")
    assert q.intent == "step_events" and "baseline" not in q.topics, q


def test_tp_size_in_passing_is_context_not_a_group_filter() -> None:
    for text in (
        "Which rank is holding the job back (TP=8)?",
        "Which rank is holding the job back? This is a 16-rank job with TP=8 and PP=2.",
        "TP=8 的 16 卡任务，哪张卡拖后腿？",
    ):
        q = _q(text)
        assert q.intent == "which_slow_rank", (text, q)
        assert q.groups == () and q.ranks == (), (text, q)
        assert q.context.get("TP") == 8
    # a group named as a group is still a filter
    assert _q("which rank is slow in group tp?").groups == ("tp",)
    assert _q("通信域 7723901842113496531 里哪张卡慢？").groups == ("7723901842113496531",)


def test_vs_in_passing_does_not_route_to_operator_compare() -> None:
    assert _q("rank 3 vs the others: why is it slow?").intent == "explain_rank"
    assert _q("which rank is slow, compute vs communication?").intent != "compare_ops"
    # with two targets it is a compare
    q = _q("rank 3 vs rank 5")  # each rank's role, with the operator comparison under it
    assert (q.kind, q.intent, q.ranks) == ("compare", "explain_rank", (3, 5))
    assert _q("compare the operators of rank 3 and rank 5").intent == "compare_ops"
    assert _q("3号卡和5号卡的算子对比一下").intent == "compare_ops"


@pytest.mark.parametrize(
    "text",
    [
        "why are ranks 8-15 slow?",
        "why are ranks 8 to 15 slow?",
        "8到15号卡为什么慢",
        "第8到15张卡为什么慢",
    ],
)
def test_rank_ranges(text: str) -> None:
    q = _q(text)
    assert q.ranks == tuple(range(8, 16)) and q.rank_range, q
    assert q.intent == "explain_rank"


def test_rank_lists_links_stages_steps() -> None:
    assert _q("why are ranks 3, 5 and 7 slow?").ranks == (3, 5, 7)
    for text in (
        "is the link 3→11 slow?",
        "is link 3-11 slow?",
        "3-11之间的链路慢吗？",
        "3->11 bandwidth?",
    ):
        q = _q(text)
        assert q.links == ((3, 11),) and q.intent == "slow_link", (text, q)
        assert q.ranks == (), (text, q)  # the link's endpoints are not rank targets
    q = _q("is rank 3 on a slow link?")
    assert (q.ranks, q.intent) == ((3,), "slow_link")
    assert _q("why is stage 0 slow?").stages == (0,)
    assert _q("阶段1为什么慢").stages == (1,)
    q = _q("第3步 rank 2 为什么慢")
    assert (q.steps, q.ranks) == ((3,), (2,))
    # the job's size is context, not a rank
    assert _q("这个16卡的任务哪张卡拖后腿？").ranks == ()


def test_kind_precedence_first_question_word_wins() -> None:
    assert find_kind("is rank 3 slow, and why?", 1) == "why"
    assert find_kind("which rank is slow and why?", 0) == "which"
    assert find_kind("is the network the problem?", 0) == "yes_no"
    assert find_kind("compare rank 1 and rank 2", 2) == "compare"
    assert find_kind("compare the ranks", 0) != "compare"  # nothing to compare
    assert find_kind("先修什么？", 0) == "fix_first"
    assert find_kind("what's the capital of france?", 0) == ""


def test_not_understood_and_help() -> None:
    assert _q("what's the capital of France?").intent == "unsupported"
    assert _q("今天天气怎么样？").intent == "unsupported"
    assert _q("help").intent == "help" and _q("你能做什么？").intent == "help"


def test_follow_ups() -> None:
    first = _q("why is rank 12 slow?")
    for text, rank in (("and rank 13?", 13), ("那13号卡呢？", 13), ("what about 7?", 7)):
        q = _q(text, previous=first)
        assert (q.intent, q.ranks, q.follow_up) == ("explain_rank", (rank,), True), text
    which = _q("which rank holds the job back?")
    assert _q("and rank 5?", previous=which).intent == "explain_rank"
    # a full new question is not a follow-up
    assert _q("is the network the problem?", previous=first).intent == "slow_link"


def test_question_length_cap() -> None:
    assert too_long_message("why is rank 3 slow?") is None
    long_en = "why " * (MAX_QUESTION_CHARS // 4 + 1)
    msg = too_long_message(long_en)
    assert msg is not None and str(MAX_QUESTION_CHARS) in msg and "too long" in msg
    msg_zh = too_long_message("为什么" * 2000)
    assert msg_zh is not None and msg_zh.startswith("问题太长")


@pytest.mark.parametrize(
    "text",
    [
        "16卡，TP=8，哪个 rank 拖慢了整体？",
        "8张卡里好像有一张不对劲，是哪张？",
        "扩容前先用2卡试跑了一下，有没有需要担心的慢卡？",
        "只采了2张卡、1个step，能看出哪张卡慢吗？",
        "两台机器16张卡做数据并行，瓶颈在哪？",
        "16 卡集群里哪张卡慢？",
        "We run 2 nodes x 8 NPUs (16 cards, DP only). What is holding the job back?",
        "2 nodes x 8 NPUs 16 cards: which one is slow?",
        "just 2 ranks and one step captured, which rank is slow?",
        "on a 16-rank job, which card is the straggler?",
        "单机8卡训练，哪张卡慢？",
        "16卡下哪个rank慢？",
        "2机16卡跑，哪张卡拖后腿？",
    ],
)
def test_card_counts_are_not_rank_targets(text: str) -> None:
    q = _q(text)
    assert q.ranks == (), (text, q)
    assert q.intent == "which_slow_rank", (text, q)


@pytest.mark.parametrize(
    ("text", "ranks"),
    [
        ("12号卡为什么慢？", (12,)),
        ("卡12为什么慢？", (12,)),
        ("第3张卡慢吗？", (3,)),
        ("12卡为什么慢？", (12,)),
        ("16 卡集群中 12 卡存在大段 Free，为什么？", (12,)),
        ("用8卡跑，3号卡为什么慢？", (3,)),
        ("第8到15张卡为什么慢", tuple(range(8, 16))),
        ("why is rank 12 slow?", (12,)),
        ("device 5 slow?", (5,)),
        ("2 nodes x 8 NPUs, why is rank 3 slow?", (3,)),
        ("rank 3 of 16 ranks is slow, why?", (3,)),
        ("9号和7号谁慢？", (9, 7)),
        ("12月3号的数据，12号卡为什么慢？", (12,)),
        ("3号机上的卡慢吗？", ()),
    ],
)
def test_named_ranks_next_to_counts(text: str, ranks: tuple[int, ...]) -> None:
    assert _q(text).ranks == ranks, text


def test_which_rank_beside_a_rank_in_passing_asks_which_rank() -> None:
    # the rank named is what was captured; the question asks which rank is slow
    for text in (
        "I only grabbed rank 0's profile. Which rank is the straggler?",
        "我只采了0号卡的数据，慢卡是哪张？",
    ):
        q = _q(text)
        assert (q.intent, q.ranks) == ("which_slow_rank", (0,)), (text, q)
    # "is there a slow rank?" is a slow-rank question with a verdict, in both languages
    for text in ("is there a slow rank?", "有没有快慢卡问题？", "有没有慢卡？"):
        q = _q(text)
        assert (q.kind, q.intent) == ("yes_no", "which_slow_rank"), (text, q)
    # "are they the slow ones?" about a range is a yes/no about those ranks, not a pipeline topic
    for text in (
        "ranks 8-15 have a big Bubble. Are they the slow ones?",
        "8~15号卡 Bubble 很大，它们是慢卡吗？",
    ):
        q = _q(text)
        assert (q.kind, q.intent, q.ranks) == ("yes_no", "explain_rank", tuple(range(8, 16)))


def test_two_ranks_which_slower_is_a_compare_and_rank_follow_ups_explain_the_rank() -> None:
    for text in (
        "rank 3 or rank 5, which is slower?",
        "3号卡和5号卡哪张更慢？",
        "9号卡和7号卡比，到底谁慢？",
    ):
        q = _q(text)
        assert (q.kind, q.intent, len(q.ranks)) == ("compare", "explain_rank", 2), (text, q)
    prev = _q("which link is slow?")
    for text in ("and what about rank 11, is it fine?", "那11号卡呢？它也慢吗"):
        q = _q(text, previous=prev)
        assert (q.intent, q.kind, q.ranks) == ("explain_rank", "yes_no", (11,)), (text, q)


def test_yes_no_question_with_a_which_word_in_it_stays_yes_no() -> None:
    assert (_q("is rank 10 a straggler?").kind, _q("is rank 10 a straggler?").ranks) == (
        "yes_no",
        (10,),
    )
    assert _q("is rank 3 holding the job back?").kind == "yes_no"
    assert _q("which rank is the straggler?").kind == "which"
    for text in ("is there a straggler?", "Are any of the ranks slow?"):
        q = _q(text)
        assert (q.kind, q.intent) == ("yes_no", "which_slow_rank"), (text, q)


@pytest.mark.parametrize(
    "text",
    [
        "Rank 6 is slow, right?",
        "so rank 6 is the slow one?",
        "rank 6 slow?",
        "6号卡慢，对吧？",
        "6号卡是慢卡吧？",
    ],
)
def test_tag_and_declarative_questions_are_yes_no(text: str) -> None:
    q = _q(text)
    assert (q.kind, q.intent, q.ranks) == ("yes_no", "explain_rank", (6,)), (text, q)


def test_question_words_still_win_over_a_yes_no_ending() -> None:
    assert _q("why is rank 6 slow?").kind == "why"
    assert _q("哪张卡慢？").kind == "which"
    assert _q("为什么6号卡慢？").kind == "why"


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("这些抖动会不会是网络导致的？", "yes_no"),
        ("是不是网络导致的？", "yes_no"),
        ("会不会是GC导致的？", "yes_no"),
        ("is the network the cause?", "yes_no"),
        ("what causes it, is it the network?", "why"),
        ("为什么会这样，是网络吗？", "why"),
    ],
)
def test_a_cause_word_inside_a_yes_no_question_asks_for_a_verdict(question: str, kind: str) -> None:
    """ "会不会是网络导致的？" names a cause inside a yes/no question: a verdict, not a why;
    a question word (为什么, 什么, why, what) keeps it a why question."""
    assert parse_question(question).kind == kind


def test_a_list_of_steps_is_every_step_never_a_rank() -> None:
    for text, steps, ranks in (
        ("why are steps 13 and 18 slow?", (13, 18), ()),
        ("why are steps 3, 5, 9 slow?", (3, 5, 9), ()),
        ("why is rank 3 slow in steps 4, 5?", (4, 5), (3,)),
        ("step 13 and step 18 take ~10x longer", (13, 18), ()),
    ):
        q = _q(text)
        assert (q.steps, q.ranks) == (steps, ranks), (text, q)


def test_what_the_user_ruled_out_is_neither_suspect_nor_topic() -> None:
    q = _q(
        "aicore util low everywhere. we ruled out the dataloader (prefetch on, workers idle) "
        "and the network (hccl_test is fine). what else could it be?"
    )
    assert (q.intent, q.hypotheses) == ("summarize", ()), q
    q = _q("RDMA链路我们用hccn_tool查过都正常，也没有慢卡，那问题出在哪？")
    assert "network" not in q.hypotheses and q.intent != "slow_link", q
    # a clause that is itself the question is still asked
    assert _q("网络没问题吧？").hypotheses == ("network",)


def test_a_pasted_report_is_read_from_its_question_line() -> None:
    report = (
        "Setup: 13B, TP=8 PP=2 on 2 nodes x 8 Ascend 910B.\n"
        "CANN 8.0, we upgraded the NPU driver last week.\n"
        "Profiled steps 10-12.\n"
        "Where is the time going?"
    )
    q = _q(report)
    assert q.steps == () and "baseline" not in q.topics and q.ranks == (), q
    assert q.context == {"TP": 8, "PP": 2}, q
    assert q.text == "Where is the time going?"
    marked = "背景：两台机器，每台8卡910B。\n显存也够。\n现象：通信占一半。\n问：问题在哪？"
    q = _q(marked)
    assert (q.ranks, q.intent) == ((), "summarize") and "memory" not in q.topics, q
    # a short message keeps its context: the steps named there are the ones asked about
    assert _q("steps 5 and 9 take 10x longer. why?").steps == (5, 9)


@pytest.mark.parametrize(
    "text", ["910B上跑，12号卡为什么慢？", "why is rank 12 slow on our 910B2 cluster?"]
)
def test_hardware_names_are_not_ranks(text: str) -> None:
    assert _q(text).ranks == (12,)


@pytest.mark.parametrize(
    ("text", "nodes", "ordinal"),
    [
        ("is it worse on node 1 than on node 0?", (1, 0), False),
        ("三台机器里，是不是第三台比另外两台更慢？", (3,), True),
        ("2号机慢吗？", (2,), False),
        ("is the second server slower?", (2,), True),
    ],
)
def test_nodes_named_by_number_or_place(text: str, nodes: tuple[int, ...], ordinal: bool) -> None:
    q = _q(text)
    assert (q.nodes, q.node_ordinal, q.ranks, q.intent) == (nodes, ordinal, (), "which_slow_rank")
    assert _q("两机16卡，为什么慢？").nodes == ()


def test_counts_and_stage_places_are_not_nodes() -> None:
    assert _q("2 nodes 16 cards, step time jumped. whos the straggler?").nodes == ()
    assert _q("瓶颈在第一个 stage 还是第二个？").nodes == ()


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("tp8 dp2 on 2 nodes, tp allreduce 好慢, rdma bw looks fine tho. wat's up?", "en"),
        ("zero3 + 2 nodes, allgather eats the whole step 啊. is that normal??", "en"),
        ("每个step forward里一堆free gap，backward反而没有，why？是host bound吗", "zh"),
        ("rank3 为啥 slow 了", "zh"),
        ("RuntimeError: HCCL timeout in allreduce at rank 3 after 1800 s\n怎么办？", "zh"),
    ],
)
def test_language_is_the_one_that_carries_the_text(text: str, lang: str) -> None:
    assert _q(text).language == lang


def test_questions_about_the_other_ranks_set_the_named_ones_aside() -> None:
    q = _q("除了0号卡，其他卡都正常吧？")
    assert (q.ranks, q.except_ranks, q.kind) == ((), (0,), "yes_no"), q
    assert _q("apart from rank 0, are the other ranks fine?").except_ranks == (0,)
    assert _q("why is rank 3 slow?").except_ranks == ()


def test_a_stack_defect_is_the_suspect_put_forward() -> None:
    q = _q(
        "ZeRO-3 is painfully slow for us on Ascend. is DeepSpeed / torch_npu just broken on NPU?"
    )
    assert q.hypothesis == "software_bug", q
    assert _q("每隔几步整个训练就卡住大半秒，是不是CANN的bug？").hypothesis == "software_bug"


def test_the_causes_ruled_out_are_kept_apart() -> None:
    q = _q("we ruled out the dataloader and the network, what else could it be?")
    assert (q.ruled_out, q.hypotheses) == (("dataloader", "network"), ())
    assert _q("数据加载和网络都排除了，还能是什么？").ruled_out == ("dataloader", "network")
    assert _q("网络没问题吧？").ruled_out == ()  # a question, not a ruling


@pytest.mark.parametrize(
    ("question", "kind", "hypothesis"),
    [
        (
            "FlashAttentionScore runs twice as often as its gradient, profiler bug?",
            "yes_no",
            "software_bug",
        ),
        ("FA 的次数是反向的两倍，profiler 的 bug？", "yes_no", "software_bug"),
        ("is upgrading CANN the fix?", "yes_no", "software_bug"),
        ("rank 3 waits a lot, GC?", "yes_no", "gc"),
        ("Step 4 took 2 s. GC pause?", "yes_no", "gc"),
        ("v2.1 is slower than v2.0. Thoughts?", "", ""),
        ("Rank 3 is slow. Why?", "why", ""),
        ("每步都慢，网络问题？", "yes_no", "network"),
        # a question word or a request after the comma keeps its own kind
        ("rank 3 is slow, why?", "why", ""),
        ("rank 3 is slow, which operator?", "which", ""),
        ("rank 3 慢，为什么？", "why", ""),
        ("训练变慢了，帮我看看？", "", ""),
        # a narrower suspect named by the words of a broader one comes first
        ("is the slow card overheating?", "yes_no", "throttling"),
        ("是不是降频了", "yes_no", "throttling"),
        ("is it a hardware problem?", "yes_no", "hardware"),
        ("13号卡是不是显存带宽有问题", "yes_no", "memory_bandwidth"),
        ("显存不够吗", "yes_no", "memory"),
        ("is another process using that npu?", "yes_no", "device_shared"),
        ("是不是有别的进程占用了11号卡", "yes_no", "device_shared"),
        ("是不是有算子跑到AI CPU上去了？", "yes_no", "aicpu"),
        # the fault word is part of the suspect's own words: the card, not "broken" alone
        ("是某张卡坏了吗？", "yes_no", "card"),
        ("is one card bad?", "yes_no", "card"),
    ],
)
def test_a_suspect_tacked_on_after_the_facts_asks_for_a_verdict(
    question: str, kind: str, hypothesis: str
) -> None:
    q = parse_question(question)
    assert (q.kind, q.hypothesis) == (kind, hypothesis), q


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("How fast are the links?", True),
        ("What bandwidth does each link get?", True),
        ("what is the RDMA bandwidth?", True),
        ("各条链路的带宽是多少？", True),
        ("链路速度有多快？", True),
        ("Which link is slow?", False),
        ("Is the network the problem?", False),
        ("哪条链路慢？", False),
    ],
)
def test_asks_bandwidth(question: str, asks: bool) -> None:
    assert asks_bandwidth(question) is asks


def test_links_and_capacity_in_more_words() -> None:
    assert parse_question("0号卡到8号卡的链路有多快？").links == ((0, 8),)
    assert parse_question("从0号卡到8号卡的带宽是多少？").links == ((0, 8),)
    for text in ("is our compute insufficient?", "is the compute capacity too low?"):
        assert parse_question(text).hypothesis == "capacity", text


@pytest.mark.parametrize(
    "text",
    [
        "v2 is slower than v1. Thoughts?",
        "the new version is slower",
        "训练比之前慢了",
        "v2比v1慢，为什么？",
    ],
)
def test_two_versions_compared_need_a_baseline(text: str) -> None:
    assert parse_question(text).intent == "compare_profiles"


def test_ranks_and_steps_compared_are_not_versions() -> None:
    assert parse_question("why is rank 2 slower than rank 3?").intent == "explain_rank"
    assert parse_question("is step 12 slower than step 11?").intent != "compare_profiles"


@pytest.mark.parametrize(
    ("text", "hyp"),
    [
        ("is it a sync?", "host_sync"),
        ("感觉像是哪里在做同步？", "host_sync"),
        ("是不是采集本身的开销？", "profiler"),
        ("so is that free time actually real?", "profiler"),
        ("does how this was captured matter?", "profiler"),
        # a synchronous checkpoint save suspects the checkpoint; no_sync is not a sync
        ("我们每5个iteration在0号卡上同步存一次checkpoint，跟这个有关吗", "checkpoint"),
        ("are we using no_sync correctly?", ""),
        # a gradient synchronization is collectives, not the host waiting for the device
        ("梯度同步用的是我们自己写的工具函数，反向之后按bucket同步，这是怎么回事？", ""),
        ("是不是先reduce到0号卡、再broadcast回去的同步函数导致的？", ""),
        ("grad sync is done by our own helper, could that be it?", ""),
        ("每步都有 loss.item() 同步，是不是它？", "host_sync"),
    ],
)
def test_sync_and_capture_suspicions(text: str, hyp: str) -> None:
    assert parse_question(text).hypothesis == hyp


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ("why are steps 10-13 slow?", (10, 11, 12, 13)),
        ("why are steps 10 to 13 slow?", (10, 11, 12, 13)),
        ("第10到13步为什么慢？", (10, 11, 12, 13)),
        ("why is step 12 slow?", (12,)),
        # what was captured is context, not the steps asked about
        ("grabbed a profile of steps 10-13, why is rank 3 slow?", ()),
        # a step time, not a step id
        ("大部分step 77ms左右，但每隔两三步就跳到100ms，为什么？", ()),
        ("our step 1.5s now, was 1.1s: why?", ()),
    ],
)
def test_step_ranges(text: str, steps: tuple[int, ...]) -> None:
    assert parse_question(text).steps == steps


@pytest.mark.parametrize(
    ("text", "ranks", "stages"),
    [
        ("are the first 8 cards just worse silicon?", tuple(range(8)), ()),
        ("前8张卡是不是硬件差一些", tuple(range(8)), ()),
        ("we train on 16 cards, the first stage is slow", (), (0,)),
        ("前面那个stage到底比后面多干了啥", (), (0,)),
        ("第一个阶段为什么慢", (), (0,)),
        ("16 cards, 2 nodes: why is it slow?", (), ()),  # a count, not ranks 0-15
    ],
)
def test_first_n_ranks_and_the_first_stage(text: str, ranks: tuple, stages: tuple) -> None:
    q = parse_question(text)
    assert q.ranks == ranks and q.stages == stages


@pytest.mark.parametrize(
    ("text", "hyp"),
    [
        ("are the first 8 cards just worse silicon?", "hardware"),
        ("should we just replace rank 12s NPU?", "card"),
        ("swap the slowest card and we're done?", "card"),
    ],
)
def test_hardware_and_card_words(text: str, hyp: str) -> None:
    assert parse_question(text).hypothesis == hyp


def test_saving_per_step_is_a_how_much_question() -> None:
    assert parse_question("if we rebalance it, what do we save per step, roughly?").kind == (
        "how_much"
    )


@pytest.mark.parametrize(
    ("text", "ranks"),
    [
        ("3、7、11、15号卡每步计算时间比别的卡长，为什么？", (3, 7, 11, 15)),
        ("3,7,11和15号卡为什么慢？", (3, 7, 11, 15)),
        ("0号、4号和8号卡慢吗", (0, 4, 8)),
        # a full-width comma separates clauses: the parallel size is not a rank
        ("16卡，CP=4，3、7、11、15号卡慢", (3, 7, 11, 15)),
    ],
)
def test_a_chinese_list_of_ranks(text: str, ranks: tuple) -> None:
    assert parse_question(text).ranks == ranks


@pytest.mark.parametrize(
    "text",
    [
        "what do we change first? we do need the memory savings tho",
        "after last week's memory-saving changes a step went from 75ms to 140ms, why?",
        "上周为了省显存改了点东西，之后每步变慢了，为什么？",
    ],
)
def test_a_change_made_to_save_memory_is_not_a_memory_question(text: str) -> None:
    q = parse_question(text)
    assert q.intent != "memory" and "memory" not in q.topics and "memory" not in q.hypotheses


def test_memory_questions_stay_memory_questions() -> None:
    assert parse_question("is memory fragmentation the problem?").intent == "memory"
    assert parse_question("显存碎片是原因吗").intent == "memory"


def test_what_is_it_doing_in_chinese_is_not_a_yes_no_question() -> None:
    assert parse_question("每步45%是Free，设备这段时间到底在干嘛？").kind != "yes_no"
    assert parse_question("12号卡慢吗？").kind == "yes_no"


def test_a_terse_suspicion_without_a_question_word_is_yes_no() -> None:
    q = parse_question("python GC kicking in after the save?")
    assert q.kind == "yes_no" and q.hypothesis == "gc"
    assert parse_question("step time per rank?").kind != "yes_no"


def test_facts_the_user_found_normal_do_not_set_the_question() -> None:
    q = parse_question(
        "exposed comm is ~64% on every rank. the TP collectives run at normal HCCS bandwidth "
        "and no rank is late. what is eating it?"
    )
    assert q.kind == "why" and q.intent not in ("slow_link", "which_slow_rank")


def test_per_card_counts_normal_links_and_where_from_in_chinese() -> None:
    """A per-card count is not a rank, 带宽也正常 is a ruled-out fact, 哪来的 asks why."""
    q = parse_question(
        "两台机器16张910B，每卡32张图，每步53ms左右。HCCS和RoCE带宽也正常。这么多通信是哪来的？"
    )
    assert q.ranks == () and q.kind == "why" and q.intent == "communication"
    assert "network" not in q.hypotheses
    assert parse_question("卡12为什么慢").ranks == (12,)
    assert parse_question("慢卡是哪张？").kind == "which"
    assert parse_question("带宽看着正常吗？").hypotheses == ("network",)  # asked, not ruled out


@pytest.mark.parametrize(
    ("text", "card"),
    [
        ("是不是某张卡算出了NaN，把它换掉就好？", True),
        ("是不是某张卡有问题？", True),
        ("is one card producing NaNs?", True),
        # "which card is the problem" asks which, it does not suspect a broken card
        ("是哪张卡或者哪条链路有问题", False),
        ("大部分卡都在等。哪张卡有问题？为什么？", False),
    ],
)
def test_a_suspected_card_is_the_card_hypothesis(text: str, card: bool) -> None:
    assert ("card" in parse_question(text).hypotheses) is card


def test_checks_the_user_found_normal_rule_causes_out() -> None:
    """A check reported normal is context, not the question; "这是什么原因" asks why."""
    q = parse_question(
        "0到7号卡每步在allreduce里等23ms左右，hccn_tool看链路正常，host CPU也基本空闲。这是什么原因？"
    )
    assert q.kind == "why" and "link" in q.ruled_out and "link" not in q.hypotheses
    # asked, not reported: still a question about it
    assert parse_question("网络正常？").hypotheses == ("network",)
    assert parse_question("链路不正常，怎么办？").ruled_out == ()
    assert parse_question("12号卡正常吗？").ruled_out == ()
    # "FA" names the attention operators, also glued to Chinese
    assert parse_question("FA前向加反向每步一共多少时间？").op_category == "attention"


def test_a_chinese_range_with_hao_before_another_range() -> None:
    # "0-5号和18-23号卡": the card word comes after the second range only
    q = parse_question("0-5号和18-23号卡每步在allreduce里等34ms左右，中间的卡为什么慢？")
    assert q.ranks == (0, 1, 2, 3, 4, 5, 18, 19, 20, 21, 22, 23)


def test_a_card_suspected_in_chinese_yes_no_questions() -> None:
    for text in ("会不会是某台机器的卡有问题，拖慢了大家？", "是不是有张卡在那两步掉链子了？"):
        assert parse_question(text).hypotheses == ("card",), text
    # asking which card is not suspecting one
    assert parse_question("哪张卡有问题？").hypotheses == ()


def test_an_english_range_joined_to_another_range() -> None:
    """Trial (dev32): "ranks 0-7 and 16-23 show big Wait Time" read as ranks 0-7 only."""
    q = parse_question("ranks 0-7 and 16-23 show big Wait Time in the dp allreduce. what's slow?")
    assert q.ranks == (*range(0, 8), *range(16, 24))
    assert q.rank_ranges == ((0, 7), (16, 23))
    assert parse_question("why are ranks 0-3, 8-11 slow?").ranks == (0, 1, 2, 3, 8, 9, 10, 11)
    # a number range after a rank range that is not ranks (a time) is left alone
    assert parse_question("rank 3 waits 10-20 ms").ranks == (3,)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("what's slow?", ""),  # asks what, not whether (was answered "No: ...")
        ("the step is 168 ms. what's slow?", ""),
        ("ranks 0-7 and 16-23 wait a lot in the allreduce, what's slow?", ""),
        ("is rank 3 slow?", "yes_no"),
        ("rank 6 looks slow?", "yes_no"),
        ("so the network is the problem?", "yes_no"),
    ],
)
def test_slow_at_the_end_is_yes_no_only_without_a_question_word(text: str, kind: str) -> None:
    assert parse_question(text).kind == kind
