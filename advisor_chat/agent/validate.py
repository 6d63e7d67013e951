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
from advisor_chat.i18n import t
from advisor_chat.tools.core import fmt_ranks


@dataclass(frozen=True)
class BaselineProblem:
    """Why a baseline run cannot be compared with the profile.

    Attributes:
        kind: ``same_folder`` (the baseline is the profile itself), ``world_size`` (the two
            runs hold different numbers of ranks) or ``operators`` (they run different models:
            little of either run's device time is in operator types the other runs) or
            ``layout`` (different numbers of pipeline stages).
        profile_ranks: The profile's ranks.
        baseline_ranks: The baseline's ranks.
        path: The profile's folder (for ``same_folder``).
        shared_pct: For ``operators``: the smaller of the two runs' shares of device time (%) in
            operator types both run.
        stages: For ``layout``: pipeline stages of (the profile, the baseline).
    """

    kind: Literal["same_folder", "world_size", "operators", "layout"]
    profile_ranks: tuple[int, ...]
    baseline_ranks: tuple[int, ...]
    path: str = ""
    shared_pct: float = 0.0
    stages: tuple[int, int] = (1, 1)

    def reason(self, zh: bool) -> str:
        """Why the runs are not comparable, as a clause (no final stop)."""
        lang = "zh" if zh else "en"
        if self.kind == "same_folder":
            return t("validate.baseline_same_folder", lang)
        if self.kind == "operators":
            return t("validate.baseline_operators", lang, shared=f"{self.shared_pct:.0f}%")
        if self.kind == "layout":
            return t(
                "validate.baseline_layout",
                lang,
                n_profile=self.stages[0],
                n_baseline=self.stages[1],
            )
        return t(
            "validate.baseline_world_size",
            lang,
            n_baseline=len(self.baseline_ranks),
            baseline_ranks=fmt_ranks(self.baseline_ranks),
            n_profile=len(self.profile_ranks),
            profile_ranks=fmt_ranks(self.profile_ranks),
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
    shared = _shared_operator_time(profile, baseline)
    if shared is not None and shared < SHARED_OPS_MIN:
        return BaselineProblem("operators", pr, br, shared_pct=100.0 * shared)
    stages = _stage_counts(profile, baseline)
    if stages is not None and stages[0] != stages[1]:
        return BaselineProblem("layout", pr, br, stages=stages)
    return None


def _stage_counts(profile: Any, baseline: Any) -> tuple[int, int] | None:
    """Pipeline stages of the two runs (1 without pipeline parallelism), ``None`` when unknown.

    Source: :func:`~advisor_chat.analyzers._common.pipeline_stages` (stage rows of the cluster
    step trace, ``PP Index``).
    """
    from advisor_chat.analyzers._common import pipeline_stages

    try:
        a, b = pipeline_stages(profile), pipeline_stages(baseline)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return max(len(a), 1), max(len(b), 1)


#: Two runs of one model (before and after an upgrade or a config change) spend most of their
#: device time in operator types both run; below this share, on either side, they are other models.
SHARED_OPS_MIN = 0.5


def _shared_operator_time(profile: Any, baseline: Any) -> float | None:
    """The smaller of the two runs' shares of device time in operator types both run (0..1).

    Source: ``op_statistic`` (op_statistic.csv / DB): ``op_type`` and ``total_us`` summed over
    ranks. ``None`` when either run lacks it.
    """
    try:
        a, b = profile.get("op_statistic"), baseline.get("op_statistic")
    except (AttributeError, KeyError):
        return None
    if a is None or b is None or a.empty or b.empty:
        return None
    ta = a.groupby(a["op_type"].astype(str))["total_us"].sum()
    tb = b.groupby(b["op_type"].astype(str))["total_us"].sum()
    if ta.sum() <= 0 or tb.sum() <= 0:
        return None
    common = ta.index.intersection(tb.index)
    return float(min(ta[common].sum() / ta.sum(), tb[common].sum() / tb.sum()))


@dataclass(frozen=True)
class Validation:
    """What the question names that the profile does not hold.

    Attributes:
        refusal: The whole answer when something named does not exist or is not comparable
            (``""`` when the question can be answered).
        notes: Clauses written before the answer (a reversed range read in order, a baseline
            that was not used).
        after: Clauses written after the answer's first line (a job size that differs from the
            profile's rank count: the answer comes first, the correction of the question next).
        record: The profile facts the check used (ranks, steps, baseline ranks): the text of
            the turn's ``validate_question`` record, so that every number of a refusal or a
            note comes from the turn's tool results.
    """

    refusal: str = ""
    notes: tuple[str, ...] = ()
    record: str = ""
    after: tuple[str, ...] = ()

    @property
    def says_something(self) -> bool:
        """Whether there is a refusal or a note."""
        return bool(self.refusal or self.notes or self.after)


def _missing_ranks(
    missing: Sequence[int], valid: str, zh: bool, uncaptured: Sequence[int] = ()
) -> str:
    """The clause for ranks the profile does not hold.

    "rank N does not exist", or, for ranks of the job whose data was not captured (the
    profile's ``missing_ranks`` warning), "rank N has no profiling data in this folder".
    """
    lang = "zh" if zh else "en"
    absent = [r for r in missing if r in set(uncaptured)]
    gone = [r for r in missing if r not in set(uncaptured)]
    out = []
    if absent:
        key = "validate.rank_not_captured" if len(absent) == 1 else "validate.ranks_not_captured"
        out.append(t(key, lang, ranks=fmt_ranks(absent), valid=valid))
    if len(gone) == 1:
        out.append(t("validate.rank_missing", lang, rank=gone[0], valid=valid))
    elif gone:
        out.append(t("validate.ranks_missing", lang, ranks=fmt_ranks(gone), valid=valid))
    return ("；" if zh else "; ").join(out)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def validate_question(
    q: Query,
    ranks: Sequence[int],
    steps: Sequence[int],
    *,
    baseline: BaselineProblem | None = None,
    uncaptured: Sequence[int] = (),
) -> Validation:
    """Check ``q``'s ranks, ranges, links, steps, job size and baseline against the profile.

    Args:
        q: The parsed question.
        ranks: The profile's ranks.
        steps: The profile's step ids (empty: steps are not checked).
        baseline: The baseline's problem (:func:`baseline_problem`), if any.
        uncaptured: Ranks of the job without data in the profile (its ``missing_ranks``
            warning): named as not captured rather than as not existing.

    Returns:
        A :class:`Validation` (see the module table for what each case answers).
    """
    zh = q.language == "zh"
    lang = "zh" if zh else "en"
    have = set(int(r) for r in ranks)
    valid = fmt_ranks(sorted(have))
    if not any(ch.isalnum() for ch in q.text):  # blank, or only punctuation / emoji
        return Validation(refusal=t("validate.empty_question", lang), record="")
    have_steps = set(int(s) for s in steps)
    valid_steps = fmt_ranks(sorted(have_steps)) if have_steps else ""
    problems: list[str] = []
    notes: list[str] = []
    after: list[str] = []

    for kind, text in q.bad_ids:
        if kind == "rank":
            problems.append(t("validate.rank_missing", lang, rank=text, valid=valid))
        elif have_steps:
            problems.append(t("validate.step_missing", lang, step=text, valid=valid_steps))
        else:
            problems.append(t("validate.not_a_step", lang, step=text))

    in_ranges: set[int] = set()
    for a, b in q.rank_ranges:
        lo, hi = min(a, b), max(a, b)
        ends = [r for r in (lo, hi) if r not in have]
        if ends:  # a range reaching outside the profile (also one too wide to expand)
            missing = [r for r in q.ranks if lo <= r <= hi and r not in have] or ends
            in_ranges.update(missing)
            problems.append(
                t(
                    "validate.range_outside",
                    lang,
                    lo=lo,
                    hi=hi,
                    missing=_missing_ranks(missing, valid, zh, uncaptured),
                )
            )
        elif a > b:
            notes.append(t("validate.range_reversed", lang, a=a, b=b))

    missing = [r for r in q.ranks if r not in have and r not in in_ranges]
    if missing:
        problems.append(_missing_ranks(missing, valid, zh, uncaptured))

    for src, dst in q.links:
        gone = [r for r in (src, dst) if r not in have]
        if src == dst:
            problems.append(t("validate.link_self", lang, rank=src))
        elif gone:
            problems.append(
                t(
                    "validate.link_missing",
                    lang,
                    src=src,
                    dst=dst,
                    missing=_missing_ranks(gone, valid, zh, uncaptured),
                )
            )

    if have_steps == {-1} and q.steps:
        # no step markers: the capture is one step (-1 inside), which no user calls a step id
        problems.append(t("validate.no_step_markers", lang, step=fmt_ranks(list(q.steps))))
    elif have_steps:
        bad_steps = [s for s in q.steps if s not in have_steps]
        if bad_steps:
            s_txt = fmt_ranks(bad_steps)
            problems.append(
                t("validate.steps_missing", lang, steps=s_txt, valid=valid_steps)
                if len(bad_steps) > 1
                else t("validate.step_missing", lang, step=s_txt, valid=valid_steps)
            )

    not_comparable = ""
    if baseline is not None:
        if q.intent == "compare_profiles":
            not_comparable = t("validate.not_comparable", lang, reason=baseline.reason(zh))
        else:
            notes.append(t("validate.baseline_unused", lang, reason=baseline.reason(zh)))

    if q.world_sizes and have and len(have) not in q.world_sizes:
        said = t("validate.said_join", lang).join(str(n) for n in q.world_sizes)
        n = len(have)
        key = "validate.world_size_one" if n == 1 else "validate.world_size"
        after.append(t(key, lang, n=n, valid=valid, said=said))

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
        if baseline.kind == "layout":
            record += (
                f"; pipeline stages: this profile {baseline.stages[0]}, baseline "
                f"{baseline.stages[1]}"
            )
        if baseline.kind == "operators":
            record += (
                f"; device time in operator types both runs use: {baseline.shared_pct:.0f}% "
                "(op_statistic)"
            )
    if not_comparable and not problems:
        return Validation(refusal=not_comparable, record=record)
    if problems:
        seen: list[str] = []
        for p in problems:
            if p not in seen:
                seen.append(p)
        if zh:
            return Validation(
                refusal=t("validate.refusal", lang, problems="；".join(seen)), record=record
            )
        body = " ".join(_cap(p) + "." for p in seen[1:])
        text = t("validate.refusal", lang, problems=f"{seen[0]}.") + (f" {body}" if body else "")
        return Validation(refusal=text, record=record)
    return Validation(notes=tuple(notes), record=record, after=tuple(after))
