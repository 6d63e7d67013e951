"""Questions checked against the profile before any diagnosis text (issue 24 item 4, issue 22).

A parsed :class:`~advisor_chat.agent.parse.Query` names ranks, rank ranges, links, steps, a job
size, and may ask about a baseline run. :func:`validate_question` compares each with what the
profile holds and returns either a **refusal** (the answer: what does not exist, and what does)
or **notes** (one clause each, written before the answer):

==============================  ============================================================
question                        result
==============================  ============================================================
"rank -1", "rank 7.5", "1e3"    refusal: rank X does not exist; ranks are 0-15
"rank 16" on ranks 0-15         refusal (same wording as before this module)
"ranks 8-20" on ranks 0-15      refusal: ranks 16-20 do not exist; ranks are 0-15
"ranks 15-8"                    note: read as ranks 8-15 (then the answer about 8-15)
"link 3-99"                     refusal: link 3→99 does not exist (rank 99 does not exist)
"step 999" / "step -2"          refusal: step X does not exist; steps are 10-12
"32卡训练…" on 16 ranks          note: this profile holds 16 ranks (0-15), not 32
"" / "  " / "??"                refusal: the question is empty (with an example)
"what changed?" + baseline of   refusal: not comparable (same folder / another world size)
the same folder or another
world size
any other question with such    note: the baseline was not used, and why
a baseline
==============================  ============================================================

A reversed range is read, not refused: the ranks it names are unambiguous, and refusing would
make the user retype the question. Steps are checked only when the profile has step ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from advisor_chat.agent.parse import Query
from advisor_chat.tools.core import fmt_ranks


@dataclass(frozen=True)
class BaselineProblem:
    """Why a baseline run cannot be compared with the profile.

    Attributes:
        kind: ``same_folder`` (the baseline is the profile itself) or ``world_size`` (the two
            runs hold different numbers of ranks).
        profile_ranks: The profile's ranks.
        baseline_ranks: The baseline's ranks.
        path: The profile's folder (for ``same_folder``).
    """

    kind: Literal["same_folder", "world_size"]
    profile_ranks: tuple[int, ...]
    baseline_ranks: tuple[int, ...]
    path: str = ""

    def reason(self, zh: bool) -> str:
        """Why the runs are not comparable, as a clause (no final stop)."""
        n_p, n_b = len(self.profile_ranks), len(self.baseline_ranks)
        if self.kind == "same_folder":
            return (
                "基线与这份数据是同一个目录"
                if zh
                else "the baseline is the same folder as this profile"
            )
        if zh:
            return (
                f"基线有 {n_b} 张卡（{fmt_ranks(self.baseline_ranks)}），这份数据有 {n_p} 张卡"
                f"（{fmt_ranks(self.profile_ranks)}）"
            )
        return (
            f"the baseline holds {n_b} ranks ({fmt_ranks(self.baseline_ranks)}) and this profile "
            f"{n_p} ({fmt_ranks(self.profile_ranks)})"
        )


def baseline_problem(profile: Any, baseline: Any) -> BaselineProblem | None:
    """Whether ``baseline`` can be compared with ``profile`` (``None``: it can, or there is none).

    Args:
        profile: The profile (``root``, ``ranks``, ``profile_id`` as on
            :class:`~advisor_chat.ingest.profile.Profile`).
        baseline: The baseline profile, or ``None``.

    Returns:
        ``same_folder`` when both resolve to the same folder or have the same ``profile_id``
        (the same input files); ``world_size`` when they hold different numbers of ranks.
    """
    if baseline is None:
        return None
    pr = tuple(sorted(set(int(r) for r in profile.ranks)))
    br = tuple(sorted(set(int(r) for r in baseline.ranks)))
    root_p, root_b = getattr(profile, "root", None), getattr(baseline, "root", None)
    same = baseline is profile
    if not same and root_p is not None and root_b is not None:
        same = Path(root_p).resolve() == Path(root_b).resolve()
    pid_p, pid_b = getattr(profile, "profile_id", None), getattr(baseline, "profile_id", None)
    if not same and pid_p and pid_b:
        same = pid_p == pid_b
    if same:
        return BaselineProblem("same_folder", pr, br, str(root_p or ""))
    if len(pr) != len(br):
        return BaselineProblem("world_size", pr, br)
    return None


@dataclass(frozen=True)
class Validation:
    """What the question names that the profile does not hold.

    Attributes:
        refusal: The whole answer when something named does not exist or is not comparable
            (``""`` when the question can be answered).
        notes: Clauses written before the answer (a reversed range read in order, a job size
            that differs from the profile's rank count, a baseline that was not used).
        record: The profile facts the check used (ranks, steps, baseline ranks): the text of
            the turn's ``validate_question`` record, so that every number of a refusal or a
            note comes from the turn's tool results.
    """

    refusal: str = ""
    notes: tuple[str, ...] = ()
    record: str = ""

    @property
    def says_something(self) -> bool:
        """Whether there is a refusal or a note."""
        return bool(self.refusal or self.notes)


def _missing_ranks(missing: Sequence[int], valid: str, zh: bool) -> str:
    if zh:
        if len(missing) == 1:
            r = missing[0]
            return f"{r}号卡（rank {r}）不存在；现有的卡为 {valid}"
        return f"{fmt_ranks(missing)} 号卡不存在；现有的卡为 {valid}"
    if len(missing) == 1:
        return f"rank {missing[0]} does not exist; ranks are {valid}"
    return f"ranks {fmt_ranks(missing)} do not exist; ranks are {valid}"


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def validate_question(
    q: Query,
    ranks: Sequence[int],
    steps: Sequence[int],
    *,
    baseline: BaselineProblem | None = None,
) -> Validation:
    """Check ``q``'s ranks, ranges, links, steps, job size and baseline against the profile.

    Args:
        q: The parsed question.
        ranks: The profile's ranks.
        steps: The profile's step ids (empty: steps are not checked).
        baseline: The baseline's problem (:func:`baseline_problem`), if any.

    Returns:
        A :class:`Validation` (see the module table for what each case answers).
    """
    zh = q.language == "zh"
    have = set(int(r) for r in ranks)
    valid = fmt_ranks(sorted(have))
    if not any(ch.isalnum() for ch in q.text):  # blank, or only punctuation / emoji
        return Validation(
            refusal=(
                "问题是空的：请提一个关于这份数据的问题，例如“哪张卡慢？”或“哪条链路慢？”。"
                if zh
                else 'The question is empty: ask one about this profile, e.g. "which rank is '
                'slow?" or "which link is slow?".'
            ),
            record="",
        )
    have_steps = set(int(s) for s in steps)
    valid_steps = fmt_ranks(sorted(have_steps)) if have_steps else ""
    problems: list[str] = []
    notes: list[str] = []

    for kind, text in q.bad_ids:
        if kind == "rank":
            problems.append(
                f"{text}号卡（rank {text}）不存在；现有的卡为 {valid}"
                if zh
                else f"rank {text} does not exist; ranks are {valid}"
            )
        elif have_steps:
            problems.append(
                f"step {text} 不存在；现有的 step 为 {valid_steps}"
                if zh
                else f"step {text} does not exist; steps are {valid_steps}"
            )
        else:
            problems.append(
                f"step {text} 不是有效的 step 编号" if zh else f"step {text} is not a step id"
            )

    in_ranges: set[int] = set()
    for a, b in q.rank_ranges:
        lo, hi = min(a, b), max(a, b)
        ends = [r for r in (lo, hi) if r not in have]
        if ends:  # a range reaching outside the profile (also one too wide to expand)
            missing = [r for r in q.ranks if lo <= r <= hi and r not in have] or ends
            in_ranges.update(missing)
            problems.append(
                (
                    f"{lo}-{hi} 号卡超出了这份数据，"
                    if zh
                    else f"ranks {lo}-{hi} reach outside this profile, "
                )
                + _missing_ranks(missing, valid, zh)
            )
        elif a > b:
            notes.append(
                f"按 {b}-{a} 号卡理解“{a}-{b}”。" if zh else f"Read ranks {a}-{b} as ranks {b}-{a}."
            )

    missing = [r for r in q.ranks if r not in have and r not in in_ranges]
    if missing:
        problems.append(_missing_ranks(missing, valid, zh))

    for src, dst in q.links:
        gone = [r for r in (src, dst) if r not in have]
        if gone:
            problems.append(
                (
                    f"链路 {src}→{dst} 不存在，因为"
                    if zh
                    else f"link {src}→{dst} does not exist, as "
                )
                + _missing_ranks(gone, valid, zh)
            )

    if have_steps:
        bad_steps = [s for s in q.steps if s not in have_steps]
        if bad_steps:
            s_txt = fmt_ranks(bad_steps)
            many = len(bad_steps) > 1
            problems.append(
                f"step {s_txt} 不存在；现有的 step 为 {valid_steps}"
                if zh
                else f"step{'s' if many else ''} {s_txt} do{'' if many else 'es'} not exist; "
                f"steps are {valid_steps}"
            )

    not_comparable = ""
    if baseline is not None:
        if q.intent == "compare_profiles":
            not_comparable = (
                f"无法对比两次运行：{baseline.reason(True)}。请用 `--baseline PATH` 传入同一作业"
                "（同样卡数）的另一次运行。"
                if zh
                else f"The two runs are not comparable: {baseline.reason(False)}. Pass another "
                "run of the same job (the same number of ranks) with `--baseline PATH`."
            )
        else:
            notes.append(
                f"未使用基线数据（{baseline.reason(True)}），以下回答只针对这份数据。"
                if zh
                else f"The baseline was not used ({baseline.reason(False)}); the answer is about "
                "this profile alone."
            )

    if q.world_sizes and have and len(have) not in q.world_sizes:
        said = (
            "、".join(str(n) for n in q.world_sizes)
            if zh
            else " or ".join(str(n) for n in q.world_sizes)
        )
        n = len(have)
        notes.append(
            f"注意：这份数据有 {n} 张卡（{valid}），不是 {said} 卡；以下回答针对这 {n} 张卡。"
            if zh
            else f"Note: this profile holds {n} rank{'s' if n != 1 else ''} ({valid}), not {said}; "
            f"the answer is about {'these' if n != 1 else 'this'} {n}."
        )

    record = f"profile ranks {valid} ({len(have)} ranks); steps {valid_steps or 'unknown'}" + (
        f" ({len(have_steps)} steps)" if have_steps else ""
    )
    named = [str(r) for r in q.ranks] + [str(x) for ln in q.links for x in ln]
    named += [str(x) for rr in q.rank_ranges for x in rr] + [str(x) for x in q.steps]
    named += [t for _, t in q.bad_ids] + [str(n) for n in q.world_sizes]
    if named:  # the ids the question named, as numbers the refusal may quote
        record += "; named in the question: " + ", ".join(dict.fromkeys(named))
    if baseline is not None:
        record += f"; baseline ranks {fmt_ranks(baseline.baseline_ranks)} ({len(baseline.baseline_ranks)} ranks)"
    if not_comparable and not problems:
        return Validation(refusal=not_comparable, record=record)
    if problems:
        seen: list[str] = []
        for p in problems:
            if p not in seen:
                seen.append(p)
        if zh:
            return Validation(refusal="无法回答：" + "；".join(seen) + "。", record=record)
        body = " ".join(_cap(p) + "." for p in seen[1:])
        text = f"I cannot answer that for this profile: {seen[0]}." + (f" {body}" if body else "")
        return Validation(refusal=text, record=record)
    return Validation(notes=tuple(notes), record=record)
