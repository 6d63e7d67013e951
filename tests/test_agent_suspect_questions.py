"""Yes/no questions that suspect something, on profiles whose planted fault is known.

Each scenario plants one fault (``advisor_chat.synth``): a host-stalled rank 12 on node 1
(seed-rank12), a degraded RDMA link 3->11 with every AI Core at its rated clock (slow-link), a
slowest rank that changes with the input lengths (varlen-imbalance), rank 9 down-clocked from a
step on (throttle-onset), rank 13 computing MatMul in fp32 (fp32-rank). A suspect the question names
in words the rules do not list ("a power capping issue", "优化器那一步") is judged against the
diagnosis, and the first sentence never says "yes" to what the data does not show.
"""

from __future__ import annotations

import re

import pytest

from advisor_chat.agent.advisor import Advisor
from advisor_chat.config import load_settings
from advisor_chat.ingest import load_profile


@pytest.fixture(scope="module")
def ask(scenario, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    advisors: dict[str, Advisor] = {}

    def _ask(name: str, question: str) -> str:
        if name not in advisors:
            advisors[name] = Advisor(
                load_profile(scenario(name), progress=False),
                settings=load_settings(model="offline", home=home),
            )
        return " ".join(advisors[name].ask(question).answer.split())

    return _ask


@pytest.mark.parametrize(
    ("name", "question", "start"),
    [
        # one rank of node 1 is the culprit: not the node
        (
            "seed-rank12",
            "is one node slower than the others?",
            "No, not a whole node: only rank 12",
        ),
        ("seed-rank12", "是不是有慢节点？", "不是整台机器"),
        # replacing the card of a rank that waits for its host: no, in both languages
        ("seed-rank12", "换掉12号卡能解决吗？", "不建议：换卡并不能解决"),
        ("seed-rank12", "换掉这张卡能解决吗?", "不建议：换卡并不能解决"),
        ("seed-rank12", "should we replace rank 12?", "No: replacing the card would not help"),
        # late but not in its kernels (another process holds the device): not down-clocked,
        # even without the AI Core Freq track
        ("device-shared-rank", "是不是降频了？", "不是设备降频"),
        (
            "device-shared-rank",
            "is rank 11 throttled?",
            "No: the cause is rank 11, not a down-clocked device",
        ),
        # "the HBM" suspected is the memory itself (its bandwidth), not its capacity
        ("hbm-slow-rank", "is it the HBM?", "Yes: the data points to degraded device memory (HBM)"),
        ("hbm-slow-rank", "是不是HBM的问题？", "是的，数据指向显存（HBM）带宽变差"),
        # an on-board HCCS link is not a NIC or an optical module
        ("hccs-link-both-ways", "is it a hardware problem?", "Yes"),
        # the culprit is one whole node: yes, that node
        ("weight-format-node", "is there a slow node?", "Yes: node 1 (ranks 8-15) holds the top"),
        ("weight-format-node", "是不是有慢节点？", "是的：节点 1（8-15号卡）上的问题最大"),
        # a slow link between two nodes: neither node is slower as a whole
        ("slow-link", "is one node slower than the others?", "No, not a whole node: the top cause"),
        ("slow-link", "是不是有慢节点？", "不是整台机器：最主要的原因在"),
        # the clock is measured at 1800 MHz: no power cap, whatever the words
        (
            "slow-link",
            "are we power-limited?",
            "No: the cause is link 3→11 (RDMA), not a down-clocked",
        ),
        (
            "slow-link",
            "is this a power capping issue?",
            "No: the cause is link 3→11 (RDMA), not a down-clocked",
        ),
        ("slow-link", "是不是功耗墙？", "不是设备降频"),
        # a suspect no rule judges: its operators' measured share says no, the time goes to
        # the link
        ("slow-link", "是不是优化器那一步太慢？", "不是：优化器算子"),
        (
            "slow-link",
            "is it packet loss / retransmissions?",
            "Yes: the data points to the network",
        ),
        # the input lengths: judged as load imbalance, not "cannot tell"
        ("slow-link", "是不是序列长度不均导致的？", "不是负载不均衡"),
        ("varlen-imbalance", "是不是序列长度不均导致的？", "是的，数据指向负载不均衡"),
        # a hypothesis supported on another rank or link is a "no" for the one asked
        (
            "throttle-onset",
            "is rank 5 just overheating?",
            "No, not rank 5: the data points to a down-clocked",
        ),
        ("throttle-onset", "9号卡是不是降频了？", "是的，数据指向设备降频"),
        ("slow-link", "is the HCCS between 13 and 14 broken?", "No, not link 13↔14"),
        ("slow-link", "13和14之间的链路是不是坏了？", "不是：链路 13→14 不是慢链路"),
        # a part of the computation named: judged against what was measured, not "yes, compute"
        (
            "hbm-slow-rank",
            "is it the embedding / loss computation?",
            "No sign of the embedding / loss computation in this data",
        ),
        ("hbm-slow-rank", "is it the computation?", "Yes, the main bottleneck is computation"),
        # the link is what the question suspects, not "broken" hardware in general
        ("hbm-slow-rank", "是HCCS链路坏了吗？", "不是网络的问题"),
        ("hbm-slow-rank", "is the HCCS between 13 and 14 broken?", "No, not link 13↔14"),
        # a remedy's words are not a measurement: fp32-rank's remedies may name the optimizer
        (
            "fp32-rank",
            "is the optimizer step the problem?",
            "No sign of the optimizer in this data",
        ),
    ],
)
def test_the_first_sentence_judges_the_suspect(ask, name: str, question: str, start: str) -> None:
    answer = ask(name, question)
    assert answer.startswith(start), answer[:300]


@pytest.mark.parametrize(
    ("name", "question", "parts", "not_parts"),
    [
        ("hccs-link-both-ways", "is it a hardware problem?", "on-board link", "optical"),
        ("hccs-link-both-ways", "是不是某张卡坏了？", "板内链路", "光模块"),
        ("slow-link", "is it a hardware problem?", "optical module", "on-board"),
    ],
)
def test_link_hardware_verdicts_name_the_parts_of_that_link(
    ask, name: str, question: str, parts: str, not_parts: str
) -> None:
    """HCCS stays on the server board; only an RDMA path has NICs and optical modules."""
    answer = ask(name, question)
    assert parts in answer and not_parts not in answer, answer


def test_an_engine_slowdown_at_full_clock_is_not_called_throttling(ask) -> None:
    """hbm-slow-rank: only AI_VECTOR_CORE operators are slower and the clock is the peers'."""
    for q, bad in (("is it a hardware problem?", "throttled"), ("是不是硬件问题？", "降频或")):
        answer = ask("hbm-slow-rank", q)
        assert answer.startswith(("Yes", "是的")), answer[:120]
        assert bad not in answer, answer
        assert "HBM" in answer


@pytest.mark.parametrize(
    ("question", "start"),
    [
        (
            "how much would fixing rank 3 save?",
            "Fixing rank 3 itself saves nothing: it is not a cause",
        ),
        ("修好3号卡能省多少？", "单独修复3号卡省不了时间：它不是原因"),
    ],
)
def test_fixing_a_rank_that_only_waits_saves_nothing(ask, question: str, start: str) -> None:
    """weight-format-node: rank 3 only waits for ranks 8-15; the saving belongs to them."""
    answer = ask("weight-format-node", question)
    assert answer.startswith(start), answer[:160]
    assert "8-15" in answer


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "question", "start", "also"),
    [
        # rank 12's device waits for its host: a new NPU would wait the same
        ("seed-rank12", "should we just replace rank 12s NPU?", "No: replacing the card", ""),
        ("seed-rank12", "把12号卡换掉能解决吗？", "不建议：换卡", ""),
        # ... and the other cause is still named when the question asks "and we're done?"
        ("seed-rank12", "把最慢的卡换掉就好了吧？", "不会：换卡", "另外还有独立的原因"),
        # every rank idles alike: no card to swap
        ("dataloader-stall", "swap the slowest card and we're done?", "No: replacing the card", ""),
        # one unit of rank 13's device is slower on the same work: a new card would help
        ("hbm-slow-rank", "should we replace rank 13's card?", "Yes: replacing the card", ""),
    ],
)
def test_a_card_swap_is_judged_against_the_cause(ask, name, question, start, also) -> None:
    text = ask(name, question)
    assert text.startswith(start), text[:300]
    assert also in text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "question", "start"),
    [
        ("hbm-slow-rank", "if both were fixed, what would we save?", "This data shows one cause"),
        ("hbm-slow-rank", "两个问题都修好能快多少？", "这份数据中只有一个原因：13号卡"),
        ("two-faults", "两个问题都修好能快多少？", "全部修复后每步约节省"),
    ],
)
def test_both_fixed_on_one_cause_says_there_is_one(ask, name, question, start) -> None:
    text = ask(name, question)
    assert text.startswith(start), text[:300]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "question", "start", "also"),
    [
        # the links are at speed: the ranks wait in the all-reduces for rank 0's host
        (
            "rank0-grad-hook-sync",
            "plain DDP: every step the ranks sit in the grad allreduces for a few ms, even though "
            "the network bandwidth looks totally normal. what's going on?",
            "The ranks wait in the collectives for rank 0, not for the links",
            "aclrtSynchronizeStream",
        ),
        (
            "rank0-grad-hook-sync",
            "带宽正常，但各卡每步都在allreduce里等好几毫秒，咋回事",
            "各卡在集合通信里等的是0号卡",
            "0号卡",
        ),
        # the same shapes every step: not a recompile for new shapes
        (
            "jit-compile-mode",
            "is it recompiling kernels every step because of changing shapes?",
            "No: every captured step runs only the operator input shapes",
            "aclopCompileAndExecute",
        ),
        # gradient operators scaled with the forward ones: an uneven split, not a recompute
        ("pp-uneven-layers", "是不是第一个stage开了重计算导致的？", "不是。", "层切分不均"),
        # composed RMSNorm / RoPE: the vector operators the user names are not normal
        (
            "eager-rmsnorm-rope",
            "Pow、ReduceMean、Neg、ConcatD这么多，这正常吗",
            "不正常",
            "RMSNorm",
        ),
        # "softmax" starts the loss operator's type: the cause that names it answers, with the
        # all-gather of the logits it reads
        (
            "tp-logits-allgather",
            "算子里有个4096x64000的fp32 softmax交叉熵，每张卡都在算一遍，这正常吗",
            "不正常",
            "SoftmaxCrossEntropyWithLogits",
        ),
    ],
)
def test_hidden_causes_answer_the_question_asked(ask, name, question, start, also) -> None:
    text = ask(name, question)
    assert text.startswith(start), text[:300]
    assert also in text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "question", "start"),
    [
        ("jit-compile-mode", "is this normal?", "No, this run is not as it should be: every rank"),
        ("jit-compile-mode", "这正常吗？", "不正常：所有卡都在空闲"),
        ("healthy", "is this normal?", "Yes: nothing stands out"),
        ("healthy", "这正常吗？", "是的"),
    ],
)
def test_is_this_normal_gets_a_verdict_on_the_run(ask, name, question, start) -> None:
    assert ask(name, question).startswith(start)


def test_a_word_names_an_operator_only_as_the_start_of_a_camelcase_type() -> None:
    from advisor_chat.agent.project import _starts_op, op_words

    assert op_words("一个 fp32 softmax 交叉熵 on every card, normal?") == ("softmax", "normal")
    text = "every rank repeats the loss (SoftmaxCrossEntropyWithLogits on 4096x64000); normal"
    assert _starts_op(text, "softmax")
    # an English word in the text, or a type it does not start, is not an operator named
    assert not _starts_op(text, "normal")
    assert not _starts_op("Normalization of the layer", "normal")
    assert not _starts_op(text, "crossentropy")


def _kernel_share(root, op_prefixes: tuple[str, ...]) -> tuple[int, float]:
    """(rank, share of its mean step) of the named operators, read with ``csv`` from one rank.

    The rank is the one compare_ops reports (rank_b); its kernel_details.csv summed over its
    steps, divided by the sum of its step_trace_time.csv Stage... (step) times.
    """
    import csv

    out = {}
    for d in sorted(root.glob("*_ascend_pt")):
        info = next(d.glob("profiler_info_*.json"))
        rank = int(info.stem.rsplit("_", 1)[1])
        kd = d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
        st = d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
        with open(kd, newline="") as fh:
            ops = sum(
                float(r["Duration(us)"])
                for r in csv.DictReader(fh)
                if r["Type"].startswith(op_prefixes)
            )
        with open(st, newline="") as fh:
            rows = list(csv.DictReader(fh))
        step = sum(
            float(r["Computing"]) + float(r["Communication(Not Overlapped)"]) + float(r["Free"])
            for r in rows
        )
        out[rank] = ops / step
    return out


@pytest.mark.parametrize(
    ("question", "prefixes", "start"),
    [
        ("is flash attention the problem here?", ("FlashAttention",), None),
        ("注意力算子是不是太慢了？", ("FlashAttention",), None),
        ("is the optimizer slow?", ("Foreach",), None),
    ],
)
def test_a_suspected_operator_gets_a_verdict_from_its_share(
    scenario, ask, question: str, prefixes: tuple[str, ...], start: str | None
) -> None:
    """Trial (dev20): "is FA just slow on 910B?" on a job where no rank stands out was answered
    about dynamic shapes, or "no clear problem", never with what FA takes."""
    root = scenario("healthy")
    shares = _kernel_share(root, prefixes)
    ans = ask("healthy", question)
    m = re.search(r"(\d+(?:\.\d+)?)% of its step|占其步长 (\d+(?:\.\d+)?)%", ans)
    assert m is not None, ans
    said = float(m.group(1) or m.group(2)) / 100
    r = re.search(r"on rank (\d+)|在(\d+)号卡上", ans)
    assert r is not None, ans
    rank = int(r.group(1) or r.group(2))
    assert said == pytest.approx(shares[rank], abs=0.002), (said, shares[rank])
    # the verdict follows the share (thresholds 10% / 20%)
    zh = "注意力" in question
    if shares[rank] >= 0.2:
        assert ans.startswith("不是某张卡的问题" if zh else "Not a fault of any rank"), ans
    elif shares[rank] < 0.1:
        assert ans.startswith("不是：" if zh else "No:"), ans
    else:
        assert ans.startswith("不是主要耗时" if zh else "Not the main cost"), ans
    assert "dynamic shapes" not in ans and "动态 shape" not in ans
