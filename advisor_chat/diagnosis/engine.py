"""Diagnosis engine: run the analyzers once, apply the blame rules, rank the root causes.

:func:`diagnose` is the entry point (cached per profile object). Order of work:

1. Data-artifact steps (incomplete device records) are found and removed from the profile the
   other rules read (:func:`~advisor_chat.diagnosis.rules.detect_artifact_steps`).
2. The report analyzers run once on the kept steps (``advisor_chat.analyzers.runner``), unless
   ``results`` are given and no step was excluded.
3. Blame rules (:mod:`advisor_chat.diagnosis.rules`): pipeline, slow link, late arrivers and
   events (with slow groups), degradation, regression, then the job-level rules (job idle, exposed
   communication) on what the specific causes do not explain.
4. Ranking: causes with a specific culprit (rank, ranks, link, stage, group, steps) first, then
   job-level causes, each by per-step time explained; then the data-artifact cause; NO_CULPRIT
   only when nothing else was found; NOT_ENOUGH_SIGNAL first when the data cannot decide
   (fewer than 3 ranks, no step trace) unless a HIGH job-level cause exists.
5. Every remaining analyzer finding is hung under the cause it is a symptom of, else kept in
   ``other_findings``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import statistics
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor_chat.analyzers.base import AnalyzerResult, Category, Finding, FindingKind, Severity
from advisor_chat.diagnosis import rules as R
from advisor_chat.diagnosis.attribution import single_node
from advisor_chat.diagnosis.context import Context, build_context, ranks_label
from advisor_chat.diagnosis.text import ms, pct, share_of
from advisor_chat.diagnosis.types import (
    BoundKind,
    Culprit,
    Diagnosis,
    Mechanism,
    Remedy,
    RootCause,
)
from advisor_chat.diagnosis.validity import check_step_trace, empty_steps
from advisor_chat.ingest.profile import Profile

if TYPE_CHECKING:
    from advisor_chat.config import Settings
    from advisor_chat.ingest.loader import ProgressCallback

_CACHE: dict[tuple[int, int], tuple[Any, Any, Diagnosis]] = {}

#: Mechanisms of job-level causes (ranked after specific culprits).
JOB_LEVEL = (Mechanism.JOB_IDLE, Mechanism.EXPOSED_COMMUNICATION, Mechanism.JOB_HOTSPOT)


def is_job_level(c: RootCause) -> bool:
    """A cause of the whole job: a job-level mechanism, or any mechanism blamed on the job.

    (A job-wide host-dispatch bound, a network setting of every rank.)
    """
    return c.mechanism in JOB_LEVEL or c.culprit.kind == "job"


#: Mechanisms that are not actionable performance causes.
NON_CAUSES = (Mechanism.DATA_ARTIFACT, Mechanism.NOT_ENOUGH_SIGNAL, Mechanism.NO_CULPRIT)


def diagnose(
    profile: Profile,
    *,
    results: dict[str, AnalyzerResult] | None = None,
    baseline: Profile | None = None,
) -> Diagnosis:
    """Diagnose ``profile``: ranked root causes with culprit, victims, evidence and remedies.

    Cached per (profile object, baseline object): repeated calls return the same
    :class:`Diagnosis` without re-running the analyzers. Without a baseline, a profile loaded
    through the cache (``profile.cache_dir`` set) also has its diagnosis persisted next to it
    (``{cache_dir}/profiles/{profile_id}.diagnosis/{code_version}.pkl``), so a later ``report``
    or ``ask`` on the same files with the same code reuses it.

    Args:
        profile: The loaded profile.
        results: Analyzer results already computed on ``profile`` (e.g. by ``run_report``);
            reused unless a data-artifact step has to be excluded (then the analyzers re-run on
            the kept steps).
        baseline: Optional baseline profile (enables the regression rule).

    Returns:
        The :class:`Diagnosis` (never raises on incomplete data: missing tables give a
        NOT_ENOUGH_SIGNAL cause naming the data that would decide).
    """
    key = (id(profile), id(baseline) if baseline is not None else 0)
    hit = _CACHE.get(key)
    if (
        hit is not None
        and hit[0]() is profile
        and (baseline is None or (hit[1] is not None and hit[1]() is baseline))
    ):
        return hit[2]
    stored = _stored_path(profile) if baseline is None else None
    diag = _load_stored(stored) if stored is not None else None
    if diag is None:
        diag = _diagnose(profile, results, baseline)
        if stored is not None and not getattr(profile.heavy, "changed", None):
            _store(stored, diag)  # not when a file it read changed since the load
    _CACHE[key] = (
        weakref.ref(profile),
        weakref.ref(baseline) if baseline is not None else None,
        diag,
    )
    weakref.finalize(profile, _CACHE.pop, key, None)
    return diag


def open_profile(
    path: str | Path,
    *,
    settings: Settings | None = None,
    use_cache: bool = True,
    progress: bool | ProgressCallback | None = None,
    workers: int | None = None,
) -> Profile:
    """Load a profiling folder and diagnose it, so that the first question is answered at once.

    :func:`advisor_chat.ingest.load_profile` followed by :func:`diagnose`: the diagnosis (every
    analyzer, the heavy files of the ranks it examines, the ranked root causes) is computed once
    per profile and stored with the cached tables (``{cache_dir}/profiles/{profile_id}.diagnosis/``);
    a later load of the same files reads it back instead. Questions on the returned profile
    (``Advisor(profile).ask(...)``, the report) reuse it.

    Args:
        path: The profiling folder (see :func:`~advisor_chat.ingest.load_profile`).
        settings: Settings (cache folder, workers); loaded from env/config when ``None``.
        use_cache: Read/write the table cache and the stored diagnosis.
        progress: As for ``load_profile``.
        workers: As for ``load_profile``.

    Returns:
        The loaded profile, its diagnosis cached (``diagnose(profile)`` returns it without work).

    Raises:
        InputError: As :func:`~advisor_chat.ingest.load_profile` (the folder cannot be read).
            A diagnosis that fails is not raised here: the first question that needs it reports
            the error.
    """
    from advisor_chat.ingest.loader import load_profile

    profile = load_profile(
        path, settings=settings, use_cache=use_cache, progress=progress, workers=workers
    )
    with contextlib.suppress(Exception):  # reported by the question that needs the diagnosis
        diagnose(profile)
    return profile


_CODE_VERSION: list[str] = []


def code_version() -> str:
    """SHA-256 (16 hex digits) of the source the diagnosis depends on.

    Every file of ``analyzers``, ``diagnosis`` and ``ingest`` (tables, findings, rules) and the
    modules they import (``errors``, ``textsafe``, ``symptoms``, ``config``): a
    stored diagnosis is reused only by the code that made it (an agent / CLI / UI change does
    not invalidate it).
    """
    if not _CODE_VERSION:
        import hashlib
        from pathlib import Path

        h = hashlib.sha256()
        pkg = Path(__file__).resolve().parents[1]
        files = [f for d in ("analyzers", "diagnosis", "ingest") for f in (pkg / d).rglob("*.py")]
        files += [pkg / f"{m}.py" for m in ("errors", "textsafe", "symptoms", "config")]
        for f in sorted(f for f in files if f.is_file()):
            h.update(str(f.relative_to(pkg)).encode())
            h.update(f.read_bytes())
        _CODE_VERSION.append(h.hexdigest()[:16])
    return _CODE_VERSION[0]


def _stored_path(profile: Profile) -> Any:
    """Where the diagnosis of a cached profile is stored, or ``None`` (profile not cached).

    ``{cache_dir}/profiles/{profile_id}.diagnosis/{code_version}.pkl``: under ADVISOR_HOME,
    never inside the profiling folder.
    """
    cache_dir = getattr(profile, "cache_dir", None)
    if cache_dir is None or not profile.profile_id:
        return None
    return cache_dir / "profiles" / f"{profile.profile_id}.diagnosis" / f"{code_version()}.pkl"


def _load_stored(path: Any) -> Diagnosis | None:
    import pickle

    try:
        with open(path, "rb") as fh:
            diag = pickle.load(fh)  # our own cache under ADVISOR_HOME
    except Exception:  # missing or unreadable: recompute
        return None
    return diag if isinstance(diag, Diagnosis) else None


def _store(path: Any, diag: Diagnosis) -> None:
    """Write the diagnosis atomically; a failure only costs the reuse."""
    import contextlib
    import os
    import pickle
    import tempfile

    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(diag, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except Exception:  # read-only home, full disk, unpicklable: not stored
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def clear_cache() -> None:
    """Forget every cached diagnosis (tests)."""
    _CACHE.clear()


def keep_steps(profile: Profile, excluded: set[int]) -> Profile:
    """A copy of ``profile`` whose step-indexed tables lack the ``excluded`` steps."""
    tables = {}
    for name, df in profile.tables.items():
        if df is not None and "step" in df.columns and not df.empty:
            tables[name] = df[~df["step"].isin(list(excluded))].reset_index(drop=True)
        else:
            tables[name] = df
    return dataclasses.replace(profile, tables=tables)


def _run(profile: Profile, baseline: Profile | None) -> dict[str, AnalyzerResult]:
    from advisor_chat.analyzers.runner import run_analyzers
    from advisor_chat.ingest.common import gc_paused

    with gc_paused():
        return run_analyzers(profile, baseline=baseline).results


def _with_cost(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Each cause whose culprit the wait attribution names carries what it costs the job.

    ``metrics["job_cost_us"]``: µs per step the collectives lose to that culprit, measured as its
    victims' wait (:mod:`advisor_chat.diagnosis.attribution`); the causes' costs partition the
    waiting, so they sum without double counting. ``metrics["job_gain_first_us"]``: µs per step
    the collectives would gain if that culprit alone arrived on time now, the others still late
    (:meth:`~advisor_chat.diagnosis.attribution.WaitAttribution.fix_alone_us`): the ranking key,
    so independent culprits are ranked by what fixing each one gives, measured one way.
    """
    attr = ctx.attribution
    if attr is None:
        return causes
    out = []
    for c in causes:
        if is_job_level(c) or c.mechanism in NON_CAUSES:
            out.append(c)
            continue
        ranks = set(c.culprit.ranks) | {r for _, r in c.culprit.events}
        if c.culprit.link is not None:
            ranks = set(c.culprit.link)
        metrics = dict(c.metrics)
        if "job_cost_us" not in metrics:
            cost = sum(cc.cost_us_per_step for cc in attr.culprits if set(cc.unit.ranks) <= ranks)
            if ranks and cost > 0 and c.mechanism is not Mechanism.PIPELINE_IMBALANCE:
                metrics["job_cost_us"] = cost
        if "job_cost_us" in metrics and ranks:
            metrics["job_gain_first_us"] = attr.fix_alone_us(ranks)
        if metrics != c.metrics:
            c = dataclasses.replace(c, metrics=metrics)
        out.append(c)
    return out


def _explained(c: RootCause, measured: bool = False) -> float:
    """Per-step time a cause explains (ranking key), µs.

    With ``measured``, what fixing it first gives the job as the wait attribution measures it
    (``job_gain_first_us``, else ``job_cost_us``); else the cause's own excess.
    """
    m = c.metrics
    if measured and "job_gain_first_us" in m:
        return float(m["job_gain_first_us"])
    if measured and "job_cost_us" in m:
        return float(m["job_cost_us"])
    for k in (
        "bubble_us_mean",
        "transit_excess_us",
        "excess_us",
        "explained_us_per_step",
    ):
        if k in m and math.isfinite(m[k]):
            return float(m[k])
    return float(c.gain_us or 0.0)


def _rank(causes: list[RootCause]) -> list[RootCause]:
    # job-level mechanisms (and a job-wide host-dispatch bound) are ranked apart; a network
    # fault of the whole job is ranked with the specific causes by what it costs
    # (a node late only by the job's placement, nodes of different sizes, is the job's layout)
    job = [
        c
        for c in causes
        if c.mechanism in JOB_LEVEL or _job_idle_like(c) or c.id.startswith("cause.node_placement.")
    ]
    specific = [c for c in causes if c not in job and c.mechanism not in NON_CAUSES]
    # one measure for all: the attributed cost when every specific cause has one
    measured = bool(specific) and all("job_cost_us" in c.metrics for c in specific)
    # else by each one's own excess, the one measure every cause has (cluster-8rank: rank 1's
    # cost is measured by the collectives, ranks 3 and 6's only inferred from the step times)
    specific.sort(key=lambda c: -_explained(c, measured))
    # among the job's own costs, what is broken (an idle every rank shares, a host-dispatch
    # bound, a down-clocked job) before what could be optimized (exposed communication, a
    # hotspot: upper bounds of what hiding or fusing could win) unless that wins far more,
    # as "what should I fix first?" orders them
    # (exposed communication whose evidence names the fault, e.g. an unbalanced router, is one)
    broken = max((_explained(c) for c in job if not is_optimization(c)), default=0.0)
    job.sort(
        key=lambda c: (
            is_optimization(c) and _explained(c) < OPTIMIZATION_LEAD * broken,
            -_explained(c),
        )
    )
    # a job-level cost far larger than what any late rank costs is the job's first problem
    # (cluster-8rank: every rank ~65 % Free, the latest rank costs 111 ms of it; 79 ms of exposed
    # communication on every rank against a straggler 41 µs behind its peers)
    top = max((c.gain_us or 0.0 for c in specific), default=0.0)
    first = [
        c
        for c in job
        if (c.gain_us or 0.0)
        >= (JOB_FIRST if c.mechanism is Mechanism.JOB_IDLE or _job_idle_like(c) else JOB_DWARFS)
        * top
    ]
    # (only against late ranks with a measured cost: a peer the data lacks has none)
    if first and specific and top > 0:
        return first + specific + [c for c in job if c not in first]
    gives_nothing = all(c.gain_us is not None and c.gain_us <= 0 for c in specific)
    if job and specific and gives_nothing and max((c.gain_us or 0.0) for c in job) > 0:
        return job + specific  # no late rank gives anything back: the job's own cost leads
    return specific + job


def is_optimization(c: RootCause) -> bool:
    """A job-level cost that hiding or fusing could win, with no fault named by its evidence."""
    return c.mechanism in OPTIMIZATIONS and "first_change_us" not in c.metrics


def _job_idle_like(c: RootCause) -> bool:
    """Every rank idling for one reason of the job (a job-wide host-dispatch bound)."""
    return c.mechanism is Mechanism.HOST_STALL and c.culprit.kind == "job"


#: Job-level causes that are optimizations of a working job, not faults (upper-bound gains).
OPTIMIZATIONS = (Mechanism.EXPOSED_COMMUNICATION, Mechanism.JOB_HOTSPOT)
#: An optimization ranks before a job-level fault only when it explains this many times as much.
OPTIMIZATION_LEAD = 2.0
#: A job-level cause leads the ranking when it gains at least this many times what fixing any one
#: late rank saves (its gain is an upper bound against the rank's estimate; as for "fix first").
JOB_FIRST = 3.0
#: Any other job-level cause (exposed communication, a hotspot, the clock: upper bounds of what
#: could be won) leads only when the late ranks' costs are negligible beside it.
JOB_DWARFS = 10.0


def case_for(c: RootCause) -> str | None:
    """The knowledge case (``knowledge/cases/<id>.md``) consistent with a cause, if one fits.

    Chosen by the cause's mechanism and the evidence its decomposition tagged (AI CPU placement,
    a uniformly slower device, uneven work, a late arrival near the HCCL timeouts).
    """
    m, tags = c.mechanism, set(c.symptom_tags)
    op = c.culprit.operator.lower()
    if "hccl_timeout_risk" in tags:
        return "hccl-timeouts"
    if m in (Mechanism.HOST_STALL, Mechanism.JOB_IDLE) and "profiler_overhead" in tags:
        return "profiler-overhead-level"  # collect again first: the idle may be the profiler's
    if m in (Mechanism.HOST_STALL, Mechanism.JOB_IDLE) and "synchronize_stream" in tags:
        return "sync-stream-launch-blocking"
    if "aicpu_op" in tags:
        return "aicpu-operators"
    if m is Mechanism.SLOW_GROUP and "group_across_nodes" in tags:
        return "parallel-size-power-of-two"  # a group size that does not divide a node
    if c.id == "cause.job_hotspot.grad_accumulation":
        return "tiny-kernels-fusion"  # an element-wise pass per weight a fused kernel absorbs
    if "device_slow" in tags:
        return "heterogeneous-devices"
    if m in (Mechanism.COMPUTE_STRAGGLER, Mechanism.SLOW_GROUP, Mechanism.STEP_EVENTS) and (
        "load_imbalance" in tags or "op_count_imbalance" in tags
    ):
        return "load-imbalance-vs-slow-kernels"
    if m is Mechanism.HOST_STALL and "memory_fragmentation" in tags:
        return "expandable-segments-allocator"
    if m in (Mechanism.HOST_STALL, Mechanism.STEP_EVENTS) and "dataloader_stall" in tags:
        return "dataloader-stall"  # data preparation the host's Python frames show inline
    if m in (Mechanism.HOST_STALL, Mechanism.STEP_EVENTS) and "python_work" in tags:
        return None  # other Python work on the training thread: no case is about it
    if m is Mechanism.HOST_STALL and "device_copies" in tags:
        return None  # the device copies slowly (its PCIe link): no case is about that
    if m is Mechanism.HOST_STALL:
        return "python-gc-pause" if "gc_pause" in tags else "host-dispatch-bound"
    if m is Mechanism.COMPUTE_STRAGGLER:
        return "matmul-shape-regression" if "matmul" in op else "compute-straggler-hidden"
    if m is Mechanism.SKIPPED_UPDATE:
        return "overflow-skipped-steps"
    if "slow_steps" in tags:
        return "evaluation-in-training-loop" if "extra_forward_passes" in c.metrics else None
    if m is Mechanism.JOB_HOTSPOT and "dtype_mismatch" in tags:
        return "fp32-loss-full-vocab" if "loss" in c.culprit.label else None
    if m is Mechanism.SLOW_GROUP:
        if "env_differs" in tags:
            return "hccl-config-mismatch"
        if "host_bound" in tags:
            return "cpu-core-binding"
        if "slow_link" in tags:
            return "hccs-link-degraded" if "hccs_low_bandwidth" in tags else "slow-link-rdma"
        return "matmul-shape-regression" if "matmul" in op else "load-imbalance-vs-slow-kernels"
    if m is Mechanism.SLOW_LINK:
        return "slow-link-rdma" if c.culprit.transport.upper() == "RDMA" else "hccs-link-degraded"
    if m is Mechanism.PIPELINE_IMBALANCE:
        return "pipeline-bubbles"
    if m is Mechanism.EXPOSED_COMMUNICATION and "per_tensor_sync" in tags:
        return None  # a loop over tensors that syncs on each: no case is about it
    if m is Mechanism.EXPOSED_COMMUNICATION:
        return "small-packet-transfers" if "small_packets" in tags else "comm-not-overlapped"
    if m is Mechanism.JOB_IDLE:
        return "dataloader-stall" if "dataloader_stall" in tags else None
    if m is Mechanism.STEP_EVENTS:
        return "python-gc-pause" if "gc_pause" in tags else None
    if m is Mechanism.DEGRADATION:
        return "step-time-degradation"
    if m is Mechanism.REGRESSION:
        return "cann8-comm-operator-changes" if c.culprit.operator else None
    if m is Mechanism.DATA_ARTIFACT:
        return "profiling-collection-pitfalls"
    if m is Mechanism.JOB_HOTSPOT and "recompute" in tags:
        return "activation-recompute"
    return None


_WORD = re.compile(r"[a-z][a-z0-9_]{3,}")
#: Words too common in remedies to tell one from another.
_COMMON_WORDS = frozenset(
    [
        "with",
        "that",
        "from",
        "this",
        "than",
        "more",
        "each",
        "step",
        "steps",
        "rank",
        "ranks",
        "when",
        "then",
        "into",
        "them",
        "their",
        "they",
        "what",
        "which",
        "does",
        "only",
        "also",
        "time",
        "per",
    ]
)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - _COMMON_WORDS


def _case_remedy(c: RootCause, case: str) -> int:
    """Index of the remedy a case is about: the action sharing most words with its remedies.

    The case's title and front-matter remedies (``knowledge/cases/<id>.md``) against each action
    of ``c``; the first remedy when the case cannot be read or no action shares a word (trial: the
    small-packet case was tied to "overlap communication", its "fuse the small collectives"
    sibling being the fix it describes).
    """
    try:
        from advisor_chat.kb.cases import get_case

        k = get_case(case)
    except Exception:  # a bad or missing case file: the first remedy, as before
        return 0
    words = _words(" ".join((k.title, *k.remedies)))
    best, score = 0, 0
    for i, r in enumerate(c.remedies):
        n = len(words & _words(r.text)) if r.kind == "action" else 0
        if n > score:
            best, score = i, n
    return best


def _with_cases(c: RootCause) -> RootCause:
    """Tie the remedy a consistent knowledge case describes to it (MC2 actions to mc2-tp-fusion).

    The case is :func:`case_for`'s; the remedy is :func:`_case_remedy`'s (the first when none
    matches its words).
    """
    case = case_for(c)
    at = _case_remedy(c, case) if case is not None else -1
    rem = []
    for i, r in enumerate(c.remedies):
        if r.case_id is None and "MC2" in r.text:
            r = dataclasses.replace(r, case_id="mc2-tp-fusion")
        elif r.case_id is None and i == at and case is not None:
            r = dataclasses.replace(r, case_id=case)
        rem.append(r)
    return dataclasses.replace(c, remedies=tuple(rem))


def _attach(ctx: Context, causes: list[RootCause]) -> tuple[list[RootCause], list[Finding]]:
    """Hang each unclaimed finding under the cause it is a symptom of; the rest are 'other'."""
    extra: dict[str, list[Finding]] = {c.id: [] for c in causes}
    other: list[Finding] = []
    comm_generic = (
        "communication.",
        "slow_link.communication.",
        "cluster_breakdown.communication.",
        "cluster_breakdown.bottleneck.communication",
    )
    for f in ctx.findings:
        if f.id in ctx.claimed:
            continue
        target: RootCause | None = None
        if f.id.startswith(comm_generic):
            # waiting / exposed communication is a symptom of the first cause that makes ranks
            # wait in collectives or that is about communication
            for c in causes:
                if c.category is Category.COMMUNICATION or any(
                    v.how in ("collective_wait", "bubble") for v in c.victims
                ):
                    target = c
                    break
        elif f.ranks and f.kind is not FindingKind.ENV:
            for c in causes:
                cr = set(c.culprit.ranks) | {r for _, r in c.culprit.events}
                if cr and set(f.ranks) <= cr:
                    target = c
                    break
            if target is None and f.kind in (FindingKind.JITTER, FindingKind.HOST_BOUND):
                # step-to-step jitter is the symptom of the cause scoped to some steps
                for c in causes:
                    if c.steps or c.mechanism in (Mechanism.STEP_EVENTS, Mechanism.JOB_IDLE):
                        target = c
                        break
        if target is None:
            other.append(f)
        else:
            extra[target.id].append(f)
            ctx.claimed.add(f.id)
    out = [
        dataclasses.replace(c, findings=(*c.findings, *extra[c.id])) if extra[c.id] else c
        for c in causes
    ]
    return out, other


def _no_culprit(ctx: Context) -> RootCause:
    en, zh, shares = R.spreads_text(ctx)
    among = among_zh = ""
    missing = R.missing_ranks(ctx.profile)
    if missing:  # a missing rank could be the one that stands out
        sc = R.presence_scope(ctx, missing)
        among = f" among the ranks present ({len(ctx.ranks)} of {len(ctx.ranks) + len(missing)})"
        among_zh = f"在{sc.every_zh}中，"
    dom = max(
        ("computing_share", "communication_not_overlapped_share", "free_share"),
        key=lambda k: shares[k],
    )
    dom_en = dom_zh = ""
    top_item = None
    if dom == "computing_share":
        from advisor_chat.diagnosis.decompose import job_account

        ja = job_account(ctx.profile, ctx.per_rank["step_us"])
        top_item = next((i for i in ja.items if i.what == "op_type"), None) if ja else None
        if top_item is not None:
            dom_en = (
                f"; the largest item on every rank is {top_item.name} "
                f"({pct(top_item.share_mean)} of the step)"
            )
            dom_zh = f"；每张卡上耗时最多的是 {top_item.name}（占步长 {pct(top_item.share_mean)}）"
    check = {
        "computing_share": (
            "The job is compute-bound with no rank behind: speed it up where every rank spends its "
            "time"
            + (
                f" ({top_item.name}: a fused or faster implementation, better-aligned shapes)"
                if top_item
                else ""
            )
            + ", or scale it out.",
            "作业是计算受限且没有慢卡：从各卡共同的耗时处提速"
            + (f"（{top_item.name}：融合或更快的实现、更对齐的 shape）" if top_item else "")
            + "，或扩大规模。",
        ),
        "communication_not_overlapped_share": (
            "Open one step in the timeline (MindStudio Insight) and see which collectives run with "
            "no computation under them: those are the overlap opportunities.",
            "在时间线（MindStudio Insight）中打开一步，找出下面没有计算的集合通信：这些就是可以重叠的机会。",
        ),
        "free_share": (
            "Open the host timeline of one rank during the idle and see what the device waits for.",
            "打开某张卡在空闲期间的主机时间线，确认设备在等什么。",
        ),
    }[dom]
    clock = clock_note(ctx)
    metrics: dict[str, float] = dict(shares)
    remedies = [Remedy("check", check[0], check[1])]
    if clock is not None:  # (said last: what the user may have seen on the timeline)
        dom_en += clock[0]
        dom_zh += clock[1]
        metrics["clock_offset_us"] = clock[2]
        remedies.insert(0, clock[3])
    return RootCause(
        id="cause.no_culprit",
        mechanism=Mechanism.NO_CULPRIT,
        category=Category.NONE,
        culprit=Culprit(kind="none", label="no culprit", label_zh="没有罪魁"),
        victims=(),
        summary=(
            f"No culprit: no rank, link, stage or step stands out above the thresholds{among}; "
            + en
            + dom_en
            + "."
        ),
        summary_zh=f"没有发现罪魁：{among_zh}没有哪张卡、链路、流水线阶段或步超过阈值；"
        + zh
        + dom_zh
        + "。",
        metrics=metrics,
        findings=(),
        remedies=tuple(remedies),
        severity=Severity.INFO,
    )


def clock_note(ctx: Context) -> tuple[str, str, float, Remedy] | None:
    """A node whose timestamps are offset (:func:`~advisor_chat.diagnosis.decompose.clock_offsets`).

    Returns (English clause, Chinese clause, the largest offset in µs, a check), or ``None``.
    Computed once per context.
    """
    from advisor_chat.diagnosis.decompose import clock_offsets

    if "clock" not in ctx.cache:
        ctx.cache["clock"] = clock_offsets(ctx.profile)
    offs = ctx.cache["clock"]
    if not offs:
        return None
    o = max(offs, key=lambda x: abs(x.offset_us))
    rl, rl_zh = ranks_label(list(o.ranks))
    ref, ref_zh = ranks_label(list(o.ref_ranks))
    way, way_zh = ("later", "晚") if o.offset_us > 0 else ("earlier", "早")
    en = (
        f"; {rl}'s timestamps read {ms(abs(o.offset_us))} {way} than {ref}'s in every collective, "
        f"its end too ({o.instances} collectives of communication.json), where all members "
        "finish together: the hosts' clocks differ, so on a merged timeline that node looks late "
        "at every collective, while the collectives' Wait Time shows no rank waiting on that node"
    )
    zh = (
        f"；在每个集合通信里，{rl_zh}的时间戳都比{ref_zh}{way_zh} {ms(abs(o.offset_us))}，连结束时间也是"
        f"（communication.json 中的 {o.instances} 个集合通信），而所有成员本应同时结束：两台主机的时钟不一致，"
        "所以合并的时间线上这台机器看起来每次都晚到，但集合通信的等待时间（Wait Time）表明没有哪张卡在等这台机器"
    )
    rem = Remedy(
        "check",
        "Synchronize the nodes' clocks (NTP / chrony on every host) before merging their "
        "timelines, or align the ranks on a collective's end; judge lateness by the collectives' "
        "Wait Time, which each rank measures on its own clock.",
        "合并时间线之前先同步各节点的时钟（每台主机上的 NTP / chrony），或以某个集合通信的结束时间对齐各卡；"
        "判断谁晚到要看集合通信的等待时间（Wait Time），它由每张卡用自己的时钟测量。",
    )
    return en, zh, abs(o.offset_us), rem


#: Why one captured step cannot name a slow rank (English, Chinese).
_ONE_STEP = (
    "with 1 step captured a rank that is slow in it cannot be told from a one-step event",
    "只采集了 1 步，无法区分持续的慢卡和单步事件",
)


def _pair_holdup(ctx: Context) -> tuple[str, str, dict[str, float]] | None:
    """What two ranks alone do show: one holds the other back (English, Chinese, metrics), or ``None``.

    With two ranks there is no peer median, so neither can be called slow for the job; but when
    one's own time (Computing + Free, per step) is longer by ≥ ``STRAGGLER_MIN_SHARE`` of the step
    and the other spends at least half of that difference more in communication not overlapped
    (waiting for it at the collectives), the first holds the second back by that much. Source:
    ``step_trace`` (mean per step over the kept steps).
    """
    per = ctx.per_rank
    if len(per) != 2 or not math.isfinite(ctx.step_us):
        return None
    late, other = (int(r) for r in per["own_us"].sort_values(ascending=False).index)

    def at(rank: int, col: str) -> float:
        return ctx.val(rank, col)

    d_own = at(late, "own_us") - at(other, "own_us")
    col = "communication_not_overlapped_us"
    d_wait = at(other, col) - at(late, col)
    if d_own < R.STRAGGLER_MIN_SHARE * ctx.step_us or d_wait < 0.5 * d_own:
        return None
    d_free = at(late, "free_us") - at(other, "free_us")
    d_comp = at(late, "computing_us") - at(other, "computing_us")
    missing = R.missing_ranks(ctx.profile)
    of = f" (2 of {2 + len(missing)})" if missing else ""
    of_zh = f"（共 {2 + len(missing)} 张）" if missing else ""
    en = (
        f"of the 2 ranks present{of}, rank {late} holds rank {other} back: its own time "
        f"(Computing + Free) is {ms(d_own)} per step longer (Free {ms(d_free)}, Computing "
        f"{ms(d_comp)}), and rank {other} has {ms(d_wait)} more communication not overlapped per "
        f"step, waiting for it; with 2 ranks there is no peer median to tell whether rank {late} "
        f"is slow for the job or rank {other} fast"
    )
    zh = (
        f"现有的 2 张卡{of_zh}中，{late}号卡拖慢了{other}号卡：它每步的自身耗时（计算 + 空闲）多 "
        f"{ms(d_own)}（空闲 {ms(d_free)}，计算 {ms(d_comp)}），{other}号卡每步未掩盖的通信多 "
        f"{ms(d_wait)}，是在等它；只有 2 张卡，没有其他卡的中位数，无法判断是{late}号卡对整个作业而言慢，"
        f"还是{other}号卡快"
    )
    metrics = {
        "late_rank": float(late),
        "own_diff_us": d_own,
        "free_diff_us": d_free,
        "computing_diff_us": d_comp,
        "wait_diff_us": d_wait,
    }
    return en, zh, metrics


def _not_enough_signal(
    ctx: Context, reason: str, reason_zh: str, need: str, need_zh: str
) -> RootCause:
    return RootCause(
        id="cause.not_enough_signal",
        mechanism=Mechanism.NOT_ENOUGH_SIGNAL,
        category=Category.UNKNOWN,
        culprit=Culprit(kind="none", label="not enough signal", label_zh="信号不足"),
        victims=(),
        summary=f"Not enough signal: {reason}; {need} would decide.",
        summary_zh=f"信号不足：{reason_zh}；需要{need_zh}才能判断。",
        metrics={"ranks_count": float(len(ctx.ranks))},
        findings=(),
        remedies=(Remedy("check", f"Collect {need}.", f"采集{need_zh}。"),),
        severity=Severity.INFO,
    )


#: Operator types named when only kernels are there (no step trace): the largest few.
KERNELS_SHOWN = 3


def _kernels_show(profile: Profile) -> tuple[str, str, dict[str, float]] | None:
    """What the kernels alone tell (no step trace): the operator types with the most device time.

    Returns (English sentence, Chinese sentence, metrics ``top_op_share``, ``kernel_ranks``) or
    ``None`` without compute kernels. Shares are of the compute kernels' summed Duration(us),
    communication tasks excluded. Source: ``kernels`` (kernel_details.csv).
    """
    from advisor_chat.analyzers._common import is_comm_kernel

    k = profile.get("kernels")
    if k.empty or not {"op_type", "duration_us"} <= set(k.columns):
        return None
    k = k[~is_comm_kernel(k)]
    total = float(k["duration_us"].sum())
    if k.empty or total <= 0:
        return None
    by = k.groupby(k["op_type"].astype(str))["duration_us"].sum().sort_values(ascending=False)
    top = [(str(t), float(v) / total) for t, v in by.head(KERNELS_SHOWN).items()]
    n = int(k["rank"].nunique()) if "rank" in k.columns else 1
    src = profile.cite("kernels").rsplit("/", 1)[-1]  # the file, not the user's folders
    where = f"{n} rank" + ("s" if n != 1 else "")
    first, rest = top[0], top[1:]
    en = (
        f"What the kernels alone show ({src}, {where}): {first[0]} holds {pct(first[1])} of the "
        "device time of the compute kernels"
        + (", then " + ", ".join(f"{t} {pct(v)}" for t, v in rest) if rest else "")
        + "; without the step trace, whether the device or the host and the collectives hold "
        "the step cannot be told."
    )
    zh = (
        f"仅从算子数据（{src}，{n} 张卡）能看出：{first[0]} 占计算算子设备时间的 {pct(first[1])}"
        + ("，其次是" + "、".join(f"{t} {pct(v)}" for t, v in rest) if rest else "")
        + "；没有步骤时间数据，无法判断一步的时间是耗在设备上，还是耗在主机和集合通信上。"
    )
    return en, zh, {"top_op_share": first[1], "kernel_ranks": float(n)}


#: Load-time warnings meaning that part of the input was not analysed: every answer says so.
_LEFT_OUT_CODES = (
    "file_skipped",
    "trace_view_invalid",
    "no_profiler_output",
    "file_changed",
    "invalid_rank_id",
    "row_cut",
    "missing_table",  # a rank's file with a header only: that rank is not in that table
)


def _left_out(profile: Profile) -> tuple[str, str]:
    """The sentence (English, Chinese) saying which input the diagnosis could not use, or ``("", "")``.

    From ``profile.warnings`` (codes :data:`_LEFT_OUT_CODES`): the first one's message (it names
    the file, relative to the profile folder, what is missing and what to do) and how many more
    there are; before it, the ``missing_ranks`` warning (ranks the job had that the folder lacks:
    job-wide statements cover only the ranks present).
    """
    from advisor_chat.analyzers._common import format_ranks
    from advisor_chat.analyzers.data_quality import warning_zh
    from advisor_chat.ingest.rankdir import skipped_zh

    inside = str(profile.root).rstrip("/") + "/"  # paths shown relative to the profile folder
    en_parts: list[str] = []
    zh_parts: list[str] = []
    # ranks from different runs: every comparison between them is meaningless, said first
    w = next((w for w in profile.warnings if w.code == "mixed_runs"), None)
    if w is not None:
        en_parts.append(f"Mixed runs: {w.message.replace(inside, '').rstrip('. ')}.")
        zh_parts.append(
            f"数据混杂：{warning_zh(w.code, w.ranks)}（{format_ranks(sorted(w.ranks))}号卡）。"
        )
    # ranks the job had but the folder lacks: every job-wide statement covers only the others
    w = next((w for w in profile.warnings if w.code == "missing_ranks"), None)
    if w is not None:
        en_parts.append(f"Not every rank is in this profile: {w.message.rstrip('. ')}.")
        zh_parts.append(
            f"并非所有卡都在数据中：缺少 {len(w.ranks)} 张卡（{format_ranks(sorted(w.ranks))}号卡）"
            "的数据，整体结论只覆盖现有的卡。"
        )
    ws = [w for w in profile.warnings if w.code in _LEFT_OUT_CODES]
    if ws:
        w, more = ws[0], len(ws) - 1
        en = f"Not all input was analysed: {w.message.replace(inside, '').rstrip('. ')}"
        zh = f"部分输入未被分析：{warning_zh(w.code, w.ranks)}"
        if w.path and w.code == "file_skipped":  # which file, what it held, what to do
            zh = f"部分输入未被分析：{skipped_zh(w.path.replace(inside, ''), w.ranks)}"
        elif w.path:
            zh += f"（{w.path.replace(inside, '')}）"
        if more:
            en += f" (and {more} more: `advisor-chat inspect` lists them)"
            zh += f"；另有 {more} 条（`advisor-chat inspect` 可列出）"
        en_parts.append(en + ".")
        zh_parts.append(zh + "。")
    return " ".join(en_parts), "".join(zh_parts)


def _blame(ctx: Context) -> list[RootCause]:
    """Every blame rule over ``ctx``, ranked by what each cause costs (before findings attach)."""
    causes: list[RootCause] = []
    causes += R.rule_pipeline(ctx)
    causes += R.rule_slow_link(ctx)
    causes = R.rule_node_send_links(ctx, causes)
    causes = R.rule_slow_node_links(ctx, causes)
    causes = R.rule_cross_host_group_links(ctx, causes)
    causes += R.rule_intra_node_off_hccs(ctx, causes)
    causes += R.rule_group_across_nodes(ctx, causes)
    causes += R.rule_transport_steps(ctx, causes)
    causes += R.rule_slow_transport(ctx, causes)
    if len(ctx.ranks) >= R.MIN_RANKS:
        causes += R.rule_stragglers_and_events(ctx)
    causes = R.rule_attributed(ctx, causes)
    causes = R.rule_groups_straddling_nodes(ctx, causes)
    causes = R.rule_degradation(ctx, causes)
    causes += R.rule_regression(ctx)
    causes += R.rule_job_idle(ctx, causes)
    causes += R.rule_exposed_communication(ctx, causes)
    causes += R.rule_job_hotspot(ctx, causes)
    causes += R.rule_job_clock(ctx, causes)
    causes += R.rule_recompute(ctx, causes)
    causes += R.rule_fp32_compute(ctx, causes)
    causes += R.rule_skipped_updates(ctx, causes)
    causes += R.rule_slow_steps(ctx, causes)
    causes += R.rule_low_rank_adapters(ctx, causes)
    causes += R.rule_unfused_accumulation(ctx, causes)
    causes = R.rule_env_split(ctx, causes)
    causes = R.rule_capture(ctx, causes)
    return _rank(_with_cost(ctx, [c for c in causes if not _negligible(ctx, c)]))


#: A cause of some ranks that nobody waits for and whose fix saves less than this share of the
#: step is not a cause (a straggler 1.00x slower, 13 µs a step).
NEGLIGIBLE_SHARE = 0.005


def _negligible(ctx: Context, c: RootCause) -> bool:
    """A cause blaming ranks with no victim and a gain under ``NEGLIGIBLE_SHARE`` of the step."""
    return (
        c.culprit.kind in ("rank", "ranks", "group", "stage")
        and not c.victims
        and c.gain_us is not None
        and math.isfinite(ctx.step_us)
        and c.gain_us < NEGLIGIBLE_SHARE * ctx.step_us
    )


def _diagnose(
    profile: Profile, results: dict[str, AnalyzerResult] | None, baseline: Profile | None
) -> Diagnosis:
    pairs, art_metrics = R.detect_artifact_steps(profile)
    excluded = sorted({s for s, _ in pairs})
    # steps the profiler did not measure (zero or negative step time): left out, and said so
    empty = [s for s in empty_steps(profile) if s not in excluded]
    kept = profile
    if excluded or empty:
        kept = keep_steps(profile, set(excluded) | set(empty))
        results = _run(kept, baseline)
    elif results is None:
        results = _run(profile, baseline)
    ctx = build_context(kept, results)
    # numbers that could not be read, or a rank in another unit: no comparison is sound
    invalid = check_step_trace(kept)
    causes = _blame(ctx) if invalid is None else []
    causes, other = _attach(ctx, causes)

    notes: list[str] = []
    notes_zh: list[str] = []
    clock = clock_note(ctx) if invalid is None else None
    if clock is not None and any(c.mechanism not in NON_CAUSES for c in causes):
        notes.append(clock[0].removeprefix("; "))
        notes_zh.append(clock[1].removeprefix("；"))
    nes: RootCause | None = None
    pair_metrics: dict[str, float] = {}
    n_steps = (
        int(ctx.frame["step"].nunique())
        if not ctx.frame.empty and "step" in ctx.frame.columns
        else 0
    )
    if invalid is not None:
        nes = dataclasses.replace(
            _not_enough_signal(
                ctx,
                invalid.reason,
                invalid.reason_zh,
                "every rank's step trace of the same steps"
                if invalid.code == "steps_disjoint"
                else "a step trace whose numbers are read, in one unit for every rank",
                "各卡相同步的步骤时间数据"
                if invalid.code == "steps_disjoint"
                else "数字可读、各卡单位一致的步骤时间数据",
            ),
            id=f"cause.not_enough_signal.{invalid.code}",
        )
    elif ctx.per_rank.empty:
        nes = _not_enough_signal(
            ctx,
            "there is no step trace (Computing / Communication / Free per rank and step)",
            "没有步骤时间拆分数据（每卡每步的计算、通信、空闲时间）",
            "step_trace_time.csv (or the DB STEP_TIME / cluster step trace)",
            "step_trace_time.csv（或数据库中的 STEP_TIME、集群 step trace）",
        )
        shown = _kernels_show(ctx.profile)
        if shown is not None:  # what the kernels alone do tell
            nes = dataclasses.replace(
                nes,
                summary=nes.summary + " " + shown[0],
                summary_zh=nes.summary_zh + shown[1],
                metrics={**nes.metrics, **shown[2]},
            )
    elif len(ctx.ranks) < R.MIN_RANKS:
        per = ctx.per_rank
        diff = float(per["own_us"].max() - per["own_us"].min())
        if len(ctx.ranks) == 1:
            why = "with 1 rank there are no peers to compare it with"
            why_zh = "只有 1 张卡，没有可以比较的其他卡"
        else:
            why = (
                f"with {len(ctx.ranks)} ranks there is no peer median to tell a slow rank from "
                f"its peers (their own time differs by {ms(diff)} per step, "
                f"{pct(share_of(diff, ctx.step_us))} of the step)"
            )
            why_zh = (
                f"只有 {len(ctx.ranks)} 张卡，无法用其他卡的中位数判断哪张卡慢（两者自身耗时每步相差 "
                f"{ms(diff)}，占步长 {pct(share_of(diff, ctx.step_us))}）"
            )
            pair = _pair_holdup(ctx)
            if pair is not None:
                why, why_zh, pair_metrics = pair
        need = "a profile of at least 3 ranks of the job, or a baseline run of the same job"
        need_zh = "至少 3 张卡的性能数据，或同一作业的基线数据"
        if n_steps == 1:
            why += f", and {_ONE_STEP[0]}"
            why_zh += f"，而且{_ONE_STEP[1]}"
            need = "a profile of at least 3 ranks of the job over more steps, or a baseline run of the same job"
            need_zh = "至少 3 张卡、更多步的性能数据，或同一作业的基线数据"
        nes = _not_enough_signal(ctx, why, why_zh, need, need_zh)
    elif n_steps == 1:
        # one step of >= 3 ranks still names the ranks late in it; said as a caveat
        notes.append(
            "only 1 step captured: a rank slow in it may be a one-step event; more steps "
            "would tell a persistent slow rank from an event"
        )
        notes_zh.append(
            "只采集了 1 步：这一步里的慢卡可能只是单步事件；采集更多步才能确认是否持续变慢"
        )
    if nes is not None:
        nes = dataclasses.replace(
            nes, metrics={**nes.metrics, **pair_metrics, "steps_count": float(n_steps)}
        )
    final: list[RootCause] = list(causes)
    if nes is not None and len(ctx.ranks) < R.MIN_RANKS:
        # the slow-rank / waiting findings of a too-small cluster hang under "not enough signal"
        late = {int(pair_metrics["late_rank"])} if pair_metrics else set()
        undecided = tuple(
            f
            for f in other
            if f.kind is FindingKind.SLOW_RANK
            or (f.kind is FindingKind.COMMUNICATION and "wait" in f.id)
            # two ranks, one holding the other back: its host/idle findings are the evidence
            or (
                late
                and f.kind is not FindingKind.ENV
                and f.severity is Severity.HIGH
                and (not f.ranks or late & set(f.ranks))
            )
        )
        other = [f for f in other if f not in undecided]
        nes = dataclasses.replace(nes, findings=undecided)
    if nes is not None:
        if not pair_metrics and (
            any(is_job_level(c) and c.severity is Severity.HIGH for c in final)
            or any(not is_job_level(c) for c in final)
        ):
            final.append(nes)
        else:
            final.insert(0, nes)
    if excluded:
        final.append(
            R.artifact_cause(
                pairs,
                art_metrics,
                profile.cite("kernels") if profile.has("kernels") else profile.cite("step_trace"),
            )
        )
        st = ", ".join(str(s) for s in excluded)
        notes.append(f"step(s) {st} excluded: incomplete device records (data artifact)")
        notes_zh.append(f"第 {st} 步已排除：设备侧记录不完整（数据问题）")
    if (
        not any(c.mechanism not in NON_CAUSES for c in final)
        and nes is None
        and not ctx.per_rank.empty
    ):
        final.append(_no_culprit(ctx))
    final = [_with_cases(c) for c in final]

    per = ctx.per_rank
    shares: dict[str, float] = {}
    if not per.empty:
        step = float(per["step_us"].sum())
        shares = {
            "computing": share_of(float(per["computing_us"].sum()), step),
            "communication_not_overlapped": share_of(
                float(per["communication_not_overlapped_exclude_receive_us"].sum()), step
            ),
            "free": share_of(float(per["free_us"].sum()), step),
            "bubble": share_of(float(per["bubble_us"].sum()), step),
        }
    high = [f for f in other if f.severity is Severity.HIGH]
    if high:  # high findings no blame rule explains: said, never hidden behind "no culprit"
        more = len(high) - 2
        notes.append(
            "Also found, not explained by the causes above: "
            + "; ".join(f.summary.rstrip(". ") for f in high[:2])
            + (f" (and {more} more finding(s))" if more > 0 else "")
            + "."
        )
        notes_zh.append(
            "另外发现（上面的原因没有解释）："
            + "；".join(f.summary_zh.rstrip("。 ") for f in high[:2])
            + (f"（另有 {more} 条）" if more > 0 else "")
            + "。"
        )
    left_out, left_out_zh = _left_out(profile)
    if empty:
        st = ", ".join(str(x) for x in empty)
        where = profile.cite("step_trace")
        left_out = (
            f"Step{'s' if len(empty) > 1 else ''} {st} left out: a step time of 0 (or less) on "
            f"some rank in {where}, a step the profiler did not measure. " + left_out
        ).strip()
        left_out_zh = (
            f"第 {st} 步未纳入分析：{where} 中有卡的该步耗时为 0（或负数），是未被采集到的步。"
            + left_out_zh
        )
        notes.append(f"step(s) {st} excluded: zero step time (not measured)")
        notes_zh.append(f"第 {st} 步已排除：步骤耗时为 0（未采集）")
    top = final[0] if final else None
    headline = top.summary if top is not None else "Nothing stands out."
    headline_zh = top.summary_zh if top is not None else "没有发现明显问题。"
    from advisor_chat.diagnosis.decompose import shapes_repeat

    kernel_data = bool(profile.available_ranks("kernels"))
    return Diagnosis(
        causes=tuple(final),
        other_findings=tuple(other),
        excluded_steps=tuple(excluded),
        ranks=tuple(int(r) for r in profile.ranks),
        steps=tuple(int(s) for s in profile.steps),
        step_time_us=ctx.step_us if math.isfinite(ctx.step_us) else 0.0,
        shares=shares,
        headline=headline,
        headline_zh=headline_zh,
        notes=tuple(notes),
        notes_zh=tuple(notes_zh),
        findings=tuple(ctx.findings),
        left_out=left_out,
        left_out_zh=left_out_zh,
        left_out_ranks=tuple(
            sorted({int(r) for w in profile.warnings if w.code in _LEFT_OUT_CODES for r in w.ranks})
        ),
        missing_ranks=tuple(R.missing_ranks(profile)),
        nodes=tuple(ctx.nodes),
        one_node=not ctx.nodes and single_node(profile),
        capture=_capture_text(profile),
        host_data=bool(profile.available_ranks("host_dispatch")),
        comm_data=any(not profile.get(t).empty for t in ("comm_matrix", "comm_bandwidth")),
        links_judged=_links_judged(ctx),
        kernel_data=kernel_data,
        clock_mhz=statistics.median(ctx.clocks.values()) if ctx.clocks else float("nan"),
        versions=_versions(profile),
        shapes_repeat=shapes_repeat(profile, profile.ranks) if kernel_data else None,
    )


def _links_judged(ctx: Any) -> bool:
    """:attr:`Diagnosis.links_judged`: the slow_link analyzer ran and compared some links."""
    res = ctx.result("slow_link")
    if res is None or ctx.profile.get("comm_matrix").empty:
        return False
    return float(res.metrics.get("compared_links_count", 1.0)) > 0


def _versions(profile: Profile) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
    """:attr:`Diagnosis.versions`: each recorded CANN / torch_npu version and its ranks."""
    meta = profile.get("meta")
    out: list[tuple[str, str, tuple[int, ...]]] = []
    if meta.empty:
        return ()
    for col, label in (("cann_version", "CANN"), ("torch_npu_version", "torch_npu")):
        if col not in meta.columns:
            continue
        vals = meta[["rank", col]].dropna()
        vals = vals[vals[col].astype(str).str.strip() != ""]
        for v, g in vals.groupby(vals[col].astype(str), sort=True):
            out.append((label, str(v), tuple(sorted(int(r) for r in g["rank"]))))
    return tuple(out)


def _capture_text(profile: Profile) -> str:
    """:attr:`Diagnosis.capture`: the heavy settings, ``'light'``, or ``''`` when not recorded."""
    from advisor_chat.diagnosis.rules.capture import capture

    cap = capture(profile)
    if cap is None:
        return ""
    return (cap.settings() or cap.level) if cap.heavy else "light"


__all__ = ["BoundKind", "clear_cache", "diagnose", "keep_steps"]
