"""Data-artifact rule: steps whose device records are incomplete are excluded."""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor_chat.analyzers.base import Category, Severity
from advisor_chat.diagnosis.context import ranks_label
from advisor_chat.diagnosis.text import integer, ms
from advisor_chat.diagnosis.types import (
    Culprit,
    Mechanism,
    Remedy,
    RootCause,
)
from advisor_chat.ranks import spread_sample


# --------------------------------------------------------------------------------- data quality
def detect_artifact_steps(profile: object) -> tuple[list[tuple[int, int]], dict[str, float]]:
    """Data-artifact rule: (step, rank) pairs whose device records are incomplete.

    Rule: with a ``kernels`` table and ≥ 2 steps, a (rank, step) with fewer than 0.8× the median
    kernel count of that rank's other steps; a step the rank ran (a step_trace row) with no
    kernel record at all counts 0 (its kernel_details.csv was cut before it). A large Preparing (``step_trace.preparing_us``) alone
    does not exclude a step (a data-loading stall also shows as Preparing); it is reported as
    evidence for the flagged steps. Never excludes every step.

    Up to 2x ``PEER_SAMPLE`` ranks with kernels, every rank is counted. Beyond, kernels are
    counted only where a light signal points (``_artifact_suspects``): the
    (rank, step) pairs whose step_trace Computing drops below 0.9x, or whose Preparing rises
    above 5x (and 1 ms), the rank's median of its other steps. When more than 2x
    ``PEER_SAMPLE`` ranks are suspect, kernels are counted for an evenly spaced sample of
    ``PEER_SAMPLE`` of them, a step is flagged on every suspect rank when at least half of
    the sampled ranks confirm it, and ``metrics['peer_sample_ranks']`` says so. Without a
    usable step trace, the ``PEER_SAMPLE`` peer sample is counted.

    Returns:
        The flagged (step, rank) pairs and metrics (kernel counts, preparing).
    """
    from advisor_chat.ingest.profile import PEER_SAMPLE, Profile

    assert isinstance(profile, Profile)
    flagged: list[tuple[int, int]] = []
    metrics: dict[str, float] = {}
    st = profile.get("step_trace")
    avail = profile.available_ranks("kernels")
    suspects: dict[int, set[int]] | None
    if len(avail) <= 2 * PEER_SAMPLE:  # small profile: count every rank
        suspects = {r: set() for r in avail}
    else:
        suspects = _artifact_suspects(st)
    if suspects is None:  # no light signal: count a peer sample
        ranks, _ = profile.peer_sample("kernels")
        suspects = {r: set() for r in ranks}
    sampled = len(suspects) > 2 * PEER_SAMPLE
    ranks = sorted(suspects)
    if sampled:
        ranks = spread_sample(ranks, PEER_SAMPLE)
    k = profile.kernels_for(ranks) if ranks else profile.kernels_for([])
    if not k.empty and k["step"].notna().any():
        counts = k.dropna(subset=["step"]).groupby(["rank", "step"]).size().unstack("step")
        mat = counts.to_numpy(dtype="float64", copy=True)  # rank x step counts (NaN: no records)
        # a step the rank ran (its step_trace row) without one kernel record, while it has
        # records in other steps, lost them all (a file cut before that step): count 0
        ran = None
        if not st.empty and {"rank", "step"} <= set(st.columns):
            ran = set(zip(st["rank"].astype(int), st["step"].astype(int), strict=True))
        for row, r in enumerate(counts.index):
            if np.isnan(mat[row]).all():
                continue
            for col, s in enumerate(counts.columns):
                if np.isnan(mat[row, col]) and (ran is None or (int(r), int(s)) in ran):
                    mat[row, col] = 0.0
        if mat.shape[1] >= 2:
            import warnings

            for j, s in enumerate(counts.columns):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows
                    ref = np.nanmedian(np.delete(mat, j, axis=1), axis=1)
                low = (ref > 0) & (mat[:, j] < 0.8 * ref)
                for i in np.flatnonzero(low):
                    flagged.append((integer(s), integer(counts.index[int(i)])))
                    n = float(mat[i, j])
                    metrics["kernel_count_flagged_min"] = min(
                        metrics.get("kernel_count_flagged_min", n), n
                    )
                    metrics["kernel_count_siblings_median"] = float(ref[i])
    if sampled:
        # a step confirmed on at least half of the sampled suspects is flagged on every suspect
        # rank of that step (the light signal), the sample is stated
        confirmed = {
            s
            for s in {s for s, _ in flagged}
            if 2 * sum(1 for s2, _ in flagged if s2 == s)
            >= sum(1 for r in ranks if s in suspects.get(r, set()))
        }
        flagged = [(s, r) for r, ss in suspects.items() for s in ss if s in confirmed]
        metrics["peer_sample_ranks"] = float(len(ranks))
        metrics["suspect_ranks"] = float(len(suspects))
    if flagged and not st.empty and st["preparing_us"].notna().any():
        bad = {s for s, _ in flagged}
        prep = st[st["step"].isin(list(bad))]["preparing_us"]
        if prep.notna().any():
            metrics["preparing_us"] = float(prep.max())
    steps = {s for s, _ in flagged}
    all_steps = set(int(s) for s in profile.steps)
    if steps and steps >= all_steps:
        return [], metrics
    return sorted(set(flagged)), metrics


def _artifact_suspects(st: pd.DataFrame) -> dict[int, set[int]] | None:
    """{rank: steps} whose step_trace hints at lost device records (``None``: no signal).

    A (rank, step) is a suspect when its ``computing_us`` is below 0.9x, or its
    ``preparing_us`` above 5x (and above 1 ms), the median of the rank's other steps.
    """
    if st.empty or st["step"].nunique() < 2:
        return None
    out: dict[int, set[int]] = {}
    usable = False
    for col, low in (("computing_us", True), ("preparing_us", False)):
        if col not in st.columns or not st[col].notna().any():
            continue
        usable = True
        piv = st.pivot_table(index="rank", columns="step", values=col, aggfunc="mean")
        mat = piv.to_numpy(dtype="float64")
        import warnings

        for j, s in enumerate(piv.columns):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows
                ref = np.nanmedian(np.delete(mat, j, axis=1), axis=1)
            v = mat[:, j]
            hit = (v < 0.9 * ref) if low else ((v > 5 * ref) & (v > 1000.0))
            for i in np.flatnonzero(hit & np.isfinite(v)):
                out.setdefault(integer(piv.index[int(i)]), set()).add(integer(s))
    return out if usable else None


def artifact_cause(pairs: list[tuple[int, int]], metrics: dict[str, float], cite: str) -> RootCause:
    """The DATA_ARTIFACT cause for the excluded (step, rank) pairs (no gain, checks only)."""
    steps = tuple(sorted({s for s, _ in pairs}))
    ranks = tuple(sorted({r for _, r in pairs}))
    st = ", ".join(str(s) for s in steps)
    rl, rl_zh = ranks_label(ranks)
    detail = ""
    if "kernel_count_flagged_min" in metrics:
        detail = (
            f" (as few as {metrics['kernel_count_flagged_min']:.0f} kernels vs a median of "
            f"{metrics['kernel_count_siblings_median']:.0f} in the sibling steps)"
        )
    if "preparing_us" in metrics:
        detail += f" (Preparing up to {ms(metrics['preparing_us'])})"
    detail_zh = ""
    if "kernel_count_flagged_min" in metrics:
        detail_zh = (
            f"（最少只有 {metrics['kernel_count_flagged_min']:.0f} 个算子，其他步中位数为 "
            f"{metrics['kernel_count_siblings_median']:.0f} 个）"
        )
    if "preparing_us" in metrics:
        detail_zh += f"（Preparing 最长 {ms(metrics['preparing_us'])}）"
    if "peer_sample_ranks" in metrics:
        n, m = int(metrics["peer_sample_ranks"]), int(metrics.get("suspect_ranks", 0))
        detail += f" (kernel counts checked on a peer sample of {n} of the {m} suspect ranks)"
        detail_zh += f"（算子数仅在 {m} 个可疑 rank 中抽样的 {n} 个上核对）"
    return RootCause(
        id="cause.data_artifact.steps_" + "_".join(str(s) for s in steps),
        mechanism=Mechanism.DATA_ARTIFACT,
        category=Category.UNKNOWN,
        culprit=Culprit(
            kind="steps",
            ranks=ranks,
            events=tuple(pairs),
            label=f"step {st}" if len(steps) == 1 else f"steps {st}",
            label_zh=f"第 {st} 步",
        ),
        victims=(),
        summary=(
            f"Step {st} has incomplete device records on {rl}{detail}: it is excluded from the "
            "diagnosis, not a slowdown."
        ),
        summary_zh=(
            f"第 {st} 步在{rl_zh}上的设备侧记录不完整{detail_zh}：已从诊断中排除，这不是性能变慢。"
        ),
        metrics={"excluded_steps_count": float(len(steps)), **metrics},
        findings=(),
        steps=steps,
        remedies=(
            Remedy(
                "check",
                "Capture more steps and skip the first ones (profiler schedule wait/warmup) so "
                "every captured step has complete device records.",
                "多采集几步并跳过最初几步（profiler `schedule` 的 `wait`/`warmup`），"
                "保证每个采集的步都有完整的设备侧记录。",
            ),
        ),
        symptom_tags=("missing_steps",),
        severity=Severity.INFO,
    )
