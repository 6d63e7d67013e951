"""Full diagnosis without questions: run every report analyzer, sort findings, render them.

:func:`run_report` runs the registered analyzers (``in_report``) in their ``order`` (data quality
and environment checks first), turns analyzers that cannot answer into notes, de-duplicates and
sorts the findings (severity, then estimated gain). :func:`render_markdown`,
:func:`render_html` (self-contained) and :func:`to_json` display the same report. Numbers are
rounded here, for display only; ``to_json`` keeps them unrounded.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from advisor_chat.analyzers.base import AnalyzerResult, Finding, Severity
from advisor_chat.analyzers.runner import AnalyzerRun, run_analyzers, sort_findings
from advisor_chat.i18n import say
from advisor_chat.ingest.common import gc_paused
from advisor_chat.ingest.profile import Profile, cite_zh
from advisor_chat.tools.render import metric_label, unit_of

if TYPE_CHECKING:
    from advisor_chat.diagnosis.types import Diagnosis


@dataclass(frozen=True)
class Report:
    """A full diagnosis of one profile (optionally against a baseline).

    Attributes:
        profile: Summary of the profile (root, layout, ranks, steps, tables, sources, warnings).
        findings: De-duplicated findings, most important first (severity, then estimated gain).
        notes: Caveats: analyzers that could not answer and analyzer notes, prefixed with the
            analyzer name (load-time warnings are in ``profile['warnings']`` and become
            ``data_quality`` findings).
        results: Each analyzer's full result, by name.
        runs: How each analyzer went, in run order.
        baseline: Summary of the baseline profile, when one was given.
        rank: The rank explained (``--rank``), if any.
        created: UTC timestamp (ISO 8601) of the report.
        diagnosis: The root causes built from these results (``advisor_chat.diagnosis``), or
            ``None`` when the report was run with ``diagnose=False``.
    """

    profile: dict[str, Any]
    findings: tuple[Finding, ...]
    notes: tuple[str, ...]
    results: dict[str, AnalyzerResult] = field(default_factory=dict)
    runs: tuple[AnalyzerRun, ...] = ()
    baseline: dict[str, Any] | None = None
    rank: int | None = None
    created: str = ""
    diagnosis: Diagnosis | None = None


def profile_summary(profile: Profile) -> dict[str, Any]:
    """JSON-ready summary of a profile: root, layout, ranks, steps, tables (rows), sources, warnings."""
    return {
        "root": str(profile.root),
        "layout": profile.layout,
        "profile_id": profile.profile_id,
        "ranks": [int(r) for r in profile.ranks],
        "steps": [int(s) for s in profile.steps],
        "tables": {name: len(df) for name, df in sorted(profile.tables.items()) if df is not None},
        "sources": {
            name: sorted({s.path for s in srcs}) for name, srcs in sorted(profile.sources.items())
        },
        "warnings": [
            {"code": w.code, "message": w.message, "path": w.path, "ranks": list(w.ranks)}
            for w in profile.warnings
        ],
    }


def run_report(
    profile: Profile,
    *,
    baseline: Profile | None = None,
    rank: int | None = None,
    strict: bool = False,
    diagnose: bool = True,
) -> Report:
    """Run every report analyzer on ``profile`` and collect their findings.

    Order: the registry's ``order`` (data_quality, env_check first). ``explain_rank`` runs only
    when ``rank`` is given (with that rank); analyzers with ``needs_baseline`` only with a
    ``baseline``. An analyzer raising :class:`NotAnswerableError` or :class:`ToolArgumentError`
    becomes a note; the report never stops because of one analyzer.

    Args:
        profile: The profile to diagnose.
        baseline: Optional baseline profile for ``compare_profiles``.
        rank: Optional global rank to explain (``explain_rank``).
        strict: Re-raise unexpected exceptions (programming bugs) instead of turning them into
            notes; tests use ``True``, the CLI ``False``.
        diagnose: Also build the :class:`~advisor_chat.diagnosis.types.Diagnosis` from the
            results (``advisor_chat.diagnosis.diagnose``, cached per profile).

    Returns:
        The :class:`Report`.
    """
    # the analyzers allocate many short-lived pandas objects: the cyclic collector's passes over
    # the loaded profile cost 5-10% of a 1024-rank report; it resumes afterwards
    with gc_paused():
        return _run_report(profile, baseline, rank, strict, diagnose)


def _run_report(
    profile: Profile,
    baseline: Profile | None,
    rank: int | None,
    strict: bool,
    diagnose: bool,
) -> Report:
    analysis = run_analyzers(profile, baseline=baseline, rank=rank, strict=strict)
    results = analysis.results
    findings = list(analysis.findings)
    notes = list(analysis.notes)
    runs = list(analysis.runs)
    diagnosis = None
    if diagnose:
        from advisor_chat.diagnosis import diagnose as _diagnose

        diagnosis = _diagnose(profile, results=results, baseline=baseline)
        if diagnosis.excluded_steps:  # findings without the data-artifact steps, as diagnosed
            findings = list(diagnosis.findings)
            steps = ", ".join(str(s) for s in diagnosis.excluded_steps)
            notes.append(
                f"[diagnosis] step(s) {steps} excluded (incomplete device records); the findings "
                "are computed without them"
            )
    return Report(
        profile=profile_summary(profile),
        findings=tuple(sort_findings(findings)),
        notes=tuple(dict.fromkeys(notes)),
        results=results,
        runs=tuple(runs),
        baseline=profile_summary(baseline) if baseline is not None else None,
        rank=rank,
        created=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        diagnosis=diagnosis,
    )


# ------------------------------------------------------------------------------ display helpers
def _metric_name(name: str) -> str:
    """A metric's name as shown beside :func:`fmt_number`.

    A time loses its unit suffix (``free_delta_us`` -> ``free_delta``: the value says ms or µs);
    other names stay as they are.
    """
    return metric_label(name) if unit_of(name) in ("us", "ms") else name


def fmt_number(name: str, value: Any) -> str:
    """Display form of a metric: ratios as percentages, µs with thousands separators."""
    if value is None:
        return "n/a"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if not isinstance(value, (int, float, np.integer, np.floating)):
        return str(value)
    v = float(value)
    if not math.isfinite(v):
        return "n/a"
    if name.endswith(("_ratio", "_share")) or name in ("cv", "residual_cv"):
        return f"{v:.1%}"
    # times and bandwidths carry their unit (µs metrics are shown in ms)
    tokens = name.split("_")
    if "us" in tokens:
        return _ms_text(v / 1000.0)
    if "ms" in tokens:
        return _ms_text(v)
    if "gbps" in tokens:
        return f"{v:.1f} GB/s"
    if v.is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def _ms_text(v: float) -> str:
    """A time in ms with its unit: ``'40.9 ms'``, ``'1,488.6 ms'``, ``'0.409 ms'``."""
    return f"{v:,.1f} ms" if abs(v) >= 1 else f"{v:.3g} ms"


def steps_text(steps: list[int]) -> str:
    """The header's steps: ``'3 step(s) [1, 2, 3]'``, or no step markers (step -1)."""
    if steps == [-1]:
        return "no step markers (the whole capture is analyzed as one step)"
    return f"{len(steps)} step(s) {steps[:12]}"


def _steps_suffix(steps: list[int], zh: bool) -> str:
    """The step ids after the header's step count: ``' [1, 2, 3]'``, or that there are no markers."""
    if steps == [-1]:
        return say("report.no_step_markers_the_whole_capture", zh)
    return f" {steps[:12]}"


def fmt_us(us: float | None) -> str:
    """Human time from µs: ``'39.1 ms'``, ``'850 us'``, ``'1.20 s'``."""
    if us is None or not math.isfinite(us):
        return "n/a"
    a = abs(us)
    if a >= 1e6:
        return f"{us / 1e6:.2f} s"
    if a >= 1e3:
        return f"{us / 1e3:.1f} ms"
    return f"{us:.0f} us"


def _ranks_text(ranks: list[int] | tuple[int, ...]) -> str:
    from advisor_chat.analyzers._common import format_ranks

    return format_ranks(ranks) if ranks else "-"


def _rows_text(rows: dict[str, Any]) -> str:
    parts = []
    for k, v in rows.items():
        if isinstance(v, (list, tuple)):
            shown = ", ".join(str(x) for x in list(v)[:8]) + (" ..." if len(v) > 8 else "")
            parts.append(f"{k}=[{shown}]")
        else:
            parts.append(f"{k}={v}")
    return "; ".join(parts)


#: Row selectors of a finding's evidence (``Evidence.rows`` keys), as a Chinese report names them.
_ROW_KEYS_ZH = {
    "rank": "卡",
    "ranks": "卡",
    "step": "步",
    "steps": "步",
    "scope": "范围",
    "transport": "链路类型",
    "op_type": "算子类型",
    "op_types": "算子类型",
    "op_name": "算子",
    "ops": "算子",
    "names": "名称",
    "stalled_steps": "阻塞的步",
    "outlier_steps": "异常的步",
    "setting": "配置项",
    "group": "通信域",
    "fields": "字段",
    "components": "组成部分",
    "code": "代码",
    "accelerator_core": "加速核",
}


def _row_value_zh(v: Any) -> str:
    """A selector value in Chinese: the analyzers' fixed words translated, identifiers kept."""
    text = str(v)
    fixed = {
        "all": "全部",
        "all ranks": "所有卡",
        "all steps (mean per step)": "所有步（每步平均）",
    }
    if text in fixed:
        return fixed[text]
    m = re.fullmatch(r"step (\d+)", text)
    if m:
        return f"第 {m.group(1)} 步"
    m = re.fullmatch(r"stage (\d+) \(ranks (.+)\)", text)
    return f"阶段 {m.group(1)}（{m.group(2)}号卡）" if m else text


def _rows_text_zh(rows: dict[str, Any]) -> str:
    """:func:`_rows_text` for a Chinese report: ``范围：所有卡；卡：12, 14；步：所有步（每步平均）``."""
    parts = []
    for k, v in rows.items():
        key = _ROW_KEYS_ZH.get(k, k)
        if isinstance(v, (list, tuple)):
            shown = "、".join(str(x) for x in list(v)[:8]) + (" 等" if len(v) > 8 else "")
            parts.append(f"{key}：{shown}")
        else:
            parts.append(f"{key}：{_row_value_zh(v)}")
    return "；".join(parts)


def _counts(findings: tuple[Finding, ...], lang: str = "en") -> str:
    from advisor_chat.i18n import t

    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    sep = "，" if lang == "zh" else ", "
    return sep.join(
        t("report.count", lang, n=n, severity=t(f"severity.{s.value}", lang))
        for s, n in counts.items()
        if n
    )


def _victims_text(victims: tuple[Any, ...], limit: int = 8, lang: str = "en") -> str:
    """``'rank 13 62.3 ms (44.5%), ... (16 ranks, bubble)'`` from Impacts (ms, share of step)."""
    from advisor_chat.i18n import messages, t

    if not victims:
        return ""
    sep = "，" if lang == "zh" else ", "
    shown = sep.join(
        t("report.victim", lang, rank=v.rank, lost=fmt_ms(v.lost_us), share=f"{v.share:.1%}")
        for v in victims[:limit]
    )
    hows = sorted(
        {t(f"how.{v.how}", lang) if f"how.{v.how}" in messages("en") else v.how for v in victims}
    )
    more = t("report.victims_more", lang, n=len(victims)) if len(victims) > limit else ""
    return t("report.per_step", lang, text=f"{shown}{more}", how=sep.join(hows))


def fmt_ms(us: float | None) -> str:
    """µs → ``'12.3 ms'`` (report prose always in ms)."""
    if us is None or not math.isfinite(us):
        return "n/a"
    v = us / 1000.0
    if abs(v) < 0.05:
        v = 0.0  # never "-0.0 ms" for a rounding-size negative (e.g. Free = step - busy)
    return f"{v:,.0f} ms" if abs(v) >= 100 else f"{v:.1f} ms"


def _gain_text(gain: float | None, bound: Any, lang: str = "en") -> str:
    from advisor_chat.i18n import t

    if gain is None or not math.isfinite(gain) or (gain == 0 and bound.value == "none"):
        return ""  # (0 with no bound: an action on the measurement, no gain of its own)
    if bound.value in ("upper_bound", "estimate"):
        return t(
            "gain.per_step_bound", lang, ms=fmt_ms(gain), bound=t(f"bound.{bound.value}", lang)
        )
    return t("gain.per_step", lang, ms=fmt_ms(gain))


def _after_text(c: Any, lang: str) -> str:
    """``", once ranks 1, 6 are fixed"`` when a cause's gain shows only after other ranks'."""
    from advisor_chat.i18n import t
    from advisor_chat.ranks import format_ranks

    after = tuple(getattr(c, "gain_after", ()))
    if not after:
        return ""
    key = "gain.once_fixed_one" if len(after) == 1 else "gain.once_fixed"
    return t(key, lang, ranks=format_ranks(after, sep="、" if lang == "zh" else ", "))


def _cause_gain_text(c: Any, lang: str = "en") -> str:
    """A cause's expected gain: what its actions can save when that is less than what it costs.

    A cause costs its victims ``c.gain_us``; when every action with a gain saves less (e.g. they
    address the launch-wait part of an idle), the gain stated is the largest action's, with the
    cost next to it, so that the cause's figure and its actions' agree.
    """
    from advisor_chat.i18n import t

    acts = [
        r
        for r in c.remedies
        if r.kind == "action" and r.gain_us is not None and math.isfinite(r.gain_us)
    ]
    cost = c.gain_us
    after = _after_text(c, lang)
    best = max(acts, key=lambda r: float(r.gain_us or 0.0), default=None)
    if best is not None and cost is not None and math.isfinite(cost):
        if float(best.gain_us or 0.0) >= 0.95 * cost:
            g = _gain_text(c.gain_us, c.bound, lang)
            return g + after if g else ""
        g = _gain_text(best.gain_us, best.bound, lang)
        if g:
            return t("gain.of_cost", lang, gain=g, ms=fmt_ms(cost)) + after
    g = _gain_text(c.gain_us, c.bound, lang)
    return g + after if g else ""


def _finding_md(f: Finding, heading: str, nested: bool = False, lang: str = "en") -> list[str]:
    """One finding as Markdown (profile strings escaped with textsafe).

    ``nested``: the finding is evidence under a cause, whose expected gain is the one stated
    (the finding's own estimate, made by a different formula, is left out so that one
    quantity has one figure). ``lang`` ``zh``: Chinese labels and the finding's Chinese summary
    (its English one when it has none).
    """
    from advisor_chat.i18n import t
    from advisor_chat.textsafe import md_code, md_text

    zh = lang == "zh"
    out = []
    if zh:
        ranks = (
            f" - {t('report.finding_ranks', 'zh', ranks=_ranks_text(f.ranks))}" if f.ranks else ""
        )
        sev = t(f"severity.{f.severity.value}", "zh")
    else:
        word = "rank" if len(f.ranks) == 1 else "ranks"
        ranks = f" - {word} {_ranks_text(f.ranks)}" if f.ranks else ""
        sev = f.severity.value.upper()
    kind = t(f"kind.{f.kind.value}", "zh") if zh else f.kind.value
    out.append(f"{heading} [{sev}] {kind}{ranks}")
    out.append("")
    out.append(md_text(f.summary_zh if zh and f.summary_zh else f.summary, limit=None))
    out.append("")
    if not nested and f.estimated_gain_us is not None and math.isfinite(f.estimated_gain_us):
        if zh:
            out.append(
                f"- **{t('report.finding_gain', 'zh')}** "
                f"{t('gain.per_step', 'zh', ms=fmt_us(f.estimated_gain_us))}"
            )
        else:
            out.append(f"- **Estimated gain:** {fmt_us(f.estimated_gain_us)} per step")
    if f.metrics:
        # the name without its unit suffix: the value carries its unit (µs shown in ms)
        m = ", ".join(f"`{_metric_name(k)}` = {fmt_number(k, v)}" for k, v in f.metrics.items())
        out.append(f"- **{t('report.metrics', lang)}** {m}")
    for e in f.evidence:
        source = md_text(e.source, limit=None)
        if zh:  # "(16 files)", "(no source file)" of a cited source, said in Chinese
            name, note = cite_zh(e.source)
            source = md_text(name, limit=None) + note
        line = f"- **{t('report.evidence', lang)}** " + t(
            "report.evidence_from", lang, table=f"`{e.table}`", source=source
        )
        if e.rows:  # the rows read
            if zh:
                line += f"（{md_text(_rows_text_zh(e.rows), limit=None)}）"
            else:
                line += f" ({md_text(_rows_text(e.rows), limit=None)})"
        if e.note and not zh:  # how the figure is computed: the analyzers say it in English
            line += f"; {md_text(e.note, limit=None)}"
        out.append(line)
    if f.symptom_tags:
        out.append(f"- **{t('report.symptoms', lang)}** {', '.join(f.symptom_tags)}")
    out.append(f"- **{t('report.id', lang)}** {md_code(f.id, limit=None)}")
    out.append("")
    return out


def _is_cause(c: Any) -> bool:
    """Whether a diagnosis entry blames something (numbered "Cause N").

    "Not enough signal", "no culprit" and "data artifact" entries are statements about the data.
    """
    return str(c.mechanism.value) not in ("not_enough_signal", "no_culprit", "data_artifact")


def _cause_heading(c: Any, lang: str = "en") -> str:
    """``'<mechanism title>: <culprit>'``, the culprit left out when it only repeats the title."""
    from advisor_chat.i18n import messages, t

    key = f"mech.{c.mechanism.value}"
    if str(c.id).startswith("cause.peer_wait"):
        key = "mech.peer_wait"  # for whom is not in the data: not a compute straggler
    elif str(c.id).startswith("cause.slow_steps"):
        key = "mech.slow_steps"  # a job-level cost of some steps, not a hotspot of every step
    elif str(c.id).startswith("cause.pipeline_schedule"):
        key = "mech.pipeline_schedule"  # balanced stages: the schedule's bubble, no slow stage
    title = t(key, lang) if key in messages("en") else c.mechanism.value
    label = str(c.culprit.label_zh if lang == "zh" and c.culprit.label_zh else c.culprit.label)
    # the cause's own title when its sentence opens with one on that culprit ("Slow host-device
    # copies on rank 11: ...", "11号卡主机侧阻塞：..."): it names what the evidence found, the
    # mechanism title only the family ("Host stall")
    en_label = str(c.culprit.label)
    own = re.split(r":", str(c.summary), maxsplit=1)[0].strip()
    tail = f" on {en_label}"
    if own != str(c.summary).strip() and en_label and own.lower().endswith(tail.lower()):
        own = own[: -len(tail)].strip()
        mech_en = t(key, "en").lower() if key in messages("en") else ""
        if not mech_en.startswith(own.lower()) and "." not in own:
            if lang != "zh":
                title = own
            else:  # the Chinese sentence's title on the same culprit ("11号卡主机与设备间的拷贝变慢：")
                own_zh = re.split(r"：", str(c.summary_zh), maxsplit=1)[0].strip()
                short = 0 < len(own_zh) - len(label) <= 20 and "。" not in own_zh
                if own_zh.startswith(label) and short:
                    title = own_zh[len(label) :].strip()
    if label.strip().lower() == title.strip().lower():
        return title
    if c.culprit.kind == "job" and re.search(r"\(job\)$|（整个作业）$", title.strip()):
        return title  # "Exposed communication (job)", not "...(job): the whole job"
    return f"{title}：{label}" if lang == "zh" else f"{title}: {label}"


def render_markdown(report: Report, lang: Literal["en", "zh"] = "en") -> str:
    """Render the report as Markdown.

    Order: the diagnosis first (headline, then each root cause: summary, evidence, victims,
    what to change, expected gain, and the symptom findings under it), then the findings no cause
    claims, notes and analyzer runs. Profile strings (paths, op and group names) are escaped with
    :mod:`advisor_chat.textsafe`; times in prose are in ms. ``lang`` ``zh``: labels from the
    message catalogue and the diagnosis' Chinese sentences (the analyzers' notes stay English,
    and their heading says so).
    """
    from advisor_chat.i18n import t
    from advisor_chat.textsafe import md_code, md_text

    zh = lang == "zh"

    def T(key: str, **values: object) -> str:
        return t(key, lang, **values)

    p = report.profile
    out = [f"# {T('report.title')}", ""]
    if zh:
        out.append(
            T(
                "report.profile",
                root=md_code(p["root"], limit=None),
                layout=p["layout"],
                n_ranks=len(p["ranks"]),
                ranks=_ranks_text(p["ranks"]),
                n_steps=len(p["steps"]),
                steps=_steps_suffix(list(p["steps"]), True),
            )
        )
    else:
        out.append(
            f"**Profile:** {md_code(p['root'], limit=None)} ({p['layout']}), {len(p['ranks'])} "
            f"rank(s) ({_ranks_text(p['ranks'])}), {steps_text(list(p['steps']))}"
        )
    if report.baseline:
        b = report.baseline
        out.append("")
        out.append(
            T("report.baseline", root=md_code(b["root"], limit=None)).lstrip("；; ")
            if zh
            else f"**Baseline:** {md_code(b['root'], limit=None)} ({b['layout']}), "
            f"{len(b['ranks'])} rank(s)"
        )
    if report.rank is not None:
        out += [
            "",
            T("report.rank_explained", rank=report.rank).lstrip("；; ")
            if zh
            else f"**Rank explained:** {report.rank}",
        ]
    d = report.diagnosis
    shown: set[str] = set()
    if d is not None:
        headline = d.headline_zh if zh and d.headline_zh else d.headline
        out += ["", f"## {T('report.diagnosis')}", "", f"**{md_text(headline, limit=None)}**", ""]
        left_out = d.left_out_zh if zh and d.left_out_zh else d.left_out
        if left_out:  # input the diagnosis could not use: said before any cause
            out += [f"> {md_text(left_out, limit=None)}", ""]
        if d.step_time_us:
            if zh:
                sh = "，".join(f"{t(f'share.{k}', 'zh')} {v:.1%}" for k, v in d.shares.items())
                out += [T("report.median_step", step=fmt_ms(d.step_time_us), shares=sh), ""]
            else:
                sh = ", ".join(f"{k.replace('_', ' ')} {v:.1%}" for k, v in d.shares.items())
                out += [
                    f"Average step {fmt_ms(d.step_time_us)} (mean over steps, median over ranks); "
                    f"cluster-wide shares: {sh}.",
                    "",
                ]
        notes = d.notes_zh if zh and d.notes_zh else d.notes
        for n in notes:
            out.append(f"- {md_text(n, limit=None)}")
        if notes:
            out.append("")
        for i, c in enumerate(d.causes, 1):
            title = _cause_heading(c, lang)
            num = f"{T('report.cause', n=i)} " if _is_cause(c) else ""
            sev = T(f"severity.{c.severity.value}") if zh else c.severity.value.upper()
            out.append(f"### {num}{md_text(title, limit=None)} [{sev}]")
            out.append("")
            out.append(md_text(c.summary_zh if zh and c.summary_zh else c.summary, limit=None))
            out.append("")
            dominant = c.dominant_zh if zh and c.dominant_zh else c.dominant
            if dominant:
                out.append(f"- **{T('report.culprit_is')}** {md_text(dominant, limit=None)}")
            ev = [f for f in c.findings]
            if ev:
                ids = ", ".join(md_code(f.id, limit=None) for f in ev)
                out.append(f"- **{T('report.evidence')}** {ids} {T('report.details_below')}")
            if c.steps:
                out.append(f"- **{T('report.steps')}** {', '.join(str(s) for s in c.steps)}")
            vt = _victims_text(c.victims, lang=lang)
            if vt:
                out.append(
                    f"- **{T('report.victims')}** {vt}"
                    if zh
                    else f"- **Victims** (time they lose because of it): {vt}"
                )
            if c.remedies:
                out.append(f"- **{T('report.what_to_change')}**")
                for rem_ in c.remedies:
                    g = _gain_text(rem_.gain_us, rem_.bound, lang) if rem_.kind == "action" else ""
                    g += _after_text(c, lang) if g else ""
                    tail = f" — {T('report.expected_gain_inline', gain=g)}" if g else ""
                    if rem_.case_id:
                        tail += " " + T("report.case", case=md_code(rem_.case_id, limit=None))
                    text = rem_.text_zh if zh and rem_.text_zh else rem_.text
                    kind = T(f"remedy.{rem_.kind}") if zh else rem_.kind
                    out.append(
                        f"  - *{kind}*{'：' if zh else ': '}{md_text(text, limit=None)}{tail}"
                    )
            g = _cause_gain_text(c, lang)
            if g:
                out.append(f"- **{T('report.expected_gain')}** {g}")
            out.append("")
            for j, f in enumerate(ev, 1):
                out += _finding_md(f, f"#### {i}.{j}", nested=True, lang=lang)
                shown.add(f.id)
    rest = [f for f in report.findings if f.id not in shown]
    key = "report.other_findings" if d is not None else "report.findings"
    counts = _counts(tuple(rest), lang) or T("report.none")
    out += ["", f"## {T(key, n=len(rest), counts=counts)}", ""]
    if not rest and not report.findings:
        out.append(T("report.no_finding"))
    for i, f in enumerate(rest, 1):
        out += _finding_md(f, f"### {i}.", lang=lang)
    if report.notes:
        notes_shown, all_zh = report_notes(report, lang == "zh")
        out += [f"## {T('report.notes_translated' if all_zh else 'report.notes')}", ""]
        out += [f"- {md_text(n, limit=None)}" for n in notes_shown]
        out.append("")
    heads = " | ".join(
        T(f"report.{h}") for h in ("th_analyzer", "th_status", "th_findings", "th_time")
    )
    out += [f"## {T('report.analyzers')}", "", f"| {heads} |", "|---|---|---|---|"]
    for r in report.runs:
        status = md_text(_status_text(r.status, r.message, T))
        out.append(f"| {r.name} | {status} | {r.findings} | {r.seconds:.2f} s |")
    out.append("")
    if report.created:
        out.append(f"_{T('report.generated', created=report.created)}_")
    return "\n".join(out) + "\n"


def report_notes(report: Report, zh: bool) -> tuple[list[str], bool]:
    """The report's analyzer notes in the report's language, and whether all of them are in it.

    In Chinese, each ``[name] note`` is replaced by the analyzer's ``notes_zh`` twin, and a
    "not enough signal" note by its error's Chinese message (``AnalyzerRun.message_zh``); a note
    without one stays in English (the heading then says so).
    """
    if not zh:
        return list(report.notes), True
    twin: dict[str, str] = {}
    for name, res in report.results.items():
        for en, cn in zip(res.notes, res.notes_zh, strict=False):
            if cn:
                twin[f"[{name}] {en}"] = f"[{name}] {cn}"
    for run in report.runs:
        if run.status == "not_answerable" and run.message_zh:
            twin[f"[{run.name}] not enough signal: {run.message}"] = (
                f"[{run.name}] 信号不足：{run.message_zh}"
            )
    out: list[str] = []
    complete = True
    for n in report.notes:
        zh_note = twin.get(n)
        complete = complete and zh_note is not None
        out.append(zh_note if zh_note is not None else n)
    return out, complete


#: Skip reasons the runner gives, by catalogue key (anything else is shown as written).
_SKIP_KEYS = {
    "no --rank given": "report.skip_no_rank",
    "no baseline given": "report.skip_no_baseline",
}


def _status_text(status: str, message: str, T: Any) -> str:
    """An analyzer run's status in the report's language (``T``: its message lookup)."""
    if status == "skipped":
        why = T(_SKIP_KEYS[message]) if message in _SKIP_KEYS else message
        return str(T("report.status_skipped", why=why))
    if status in ("ok", "error", "not_answerable"):
        return str(T(f"report.status_{status}"))
    return status


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;
color:#1f2328;line-height:1.45;padding:0 1rem}
h1{margin-bottom:.2rem}.meta{color:#57606a}
.f{border:1px solid #d0d7de;border-left-width:6px;border-radius:6px;padding:.6rem 1rem;margin:1rem 0}
.high{border-left-color:#cf222e}.medium{border-left-color:#bf8700}.low{border-left-color:#0969da}
.info{border-left-color:#8c959f}
.sev{font-weight:700;text-transform:uppercase;font-size:.8rem;padding:.1rem .4rem;border-radius:4px;color:#fff}
.sev.high{background:#cf222e}.sev.medium{background:#bf8700}.sev.low{background:#0969da}
.sev.info{background:#8c959f}
table{border-collapse:collapse;margin:.4rem 0;font-size:.9rem}
td,th{border:1px solid #d0d7de;padding:.2rem .5rem;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
code{background:#f6f8fa;padding:.05rem .3rem;border-radius:4px}
.tags span{background:#ddf4ff;border-radius:10px;padding:.05rem .5rem;margin-right:.3rem;font-size:.8rem}
.zh{color:#57606a}
.cause{border-left-width:8px;background:#fbfbfd}.headline{font-size:1.1rem}
"""


def _finding_html(f: Finding, num: str, lang: str = "both", nested: bool = False) -> list[str]:
    """One finding as an HTML section (profile strings escaped with textsafe).

    ``nested``: under a cause, without the finding's own gain estimate (see :func:`_finding_md`).

    ``lang`` ``zh``: the Chinese summary only (the English one when a finding has none) and no
    "how" notes (the analyzers write them in English only); ``en``: English only; ``both``: both.
    """
    from advisor_chat.i18n import t
    from advisor_chat.textsafe import html_text

    ui = "zh" if lang == "zh" else "en"

    def e(x: object) -> str:
        return html_text(x, limit=None)

    parts = []
    sev = f.severity.value
    parts.append(f'<section class="f {sev}" id="{e(f.id)}">')
    ranks = (
        f" &middot; {e(t('report.finding_rank' if len(f.ranks) == 1 else 'report.finding_ranks', ui, ranks=_ranks_text(f.ranks)))}"
        if f.ranks
        else ""
    )
    sev_text = t(f"severity.{sev}", ui)
    parts.append(
        f'<h3>{e(num)} <span class="sev {sev}">{e(sev_text)}</span> '
        f"{e(t(f'kind.{f.kind.value}', ui))}{ranks}</h3>"
    )
    if lang == "zh" and f.summary_zh:
        parts.append(f'<p lang="zh">{e(f.summary_zh)}</p>')
    else:
        parts.append(f"<p>{e(f.summary)}</p>")
        if f.summary_zh and lang == "both":
            parts.append(f'<p class="zh" lang="zh">{e(f.summary_zh)}</p>')
    if not nested and f.estimated_gain_us is not None and math.isfinite(f.estimated_gain_us):
        gain = t("gain.per_step", ui, ms=fmt_us(f.estimated_gain_us))
        parts.append(f"<p><b>{e(t('report.finding_gain', ui))}</b> {e(gain)}</p>")
    if f.metrics:
        parts.append(
            f"<table><tr><th>{e(t('report.th_metric', ui))}</th>"
            f"<th>{e(t('report.th_value', ui))}</th></tr>"
        )
        for k, v in f.metrics.items():
            parts.append(
                f'<tr><td><code>{e(_metric_name(k))}</code></td><td class="n">{e(fmt_number(k, v))}</td></tr>'
            )
        parts.append("</table>")
    if f.evidence:
        how = lang != "zh"  # the notes are English only
        heads = ["th_table", "th_source", "th_rows"] + (["th_how"] if how else [])
        parts.append(
            "<table><tr>" + "".join(f"<th>{e(t(f'report.{h}', ui))}</th>" for h in heads) + "</tr>"
        )
        for ev in f.evidence:
            note = f"<td>{e(ev.note)}</td>" if how else ""
            parts.append(
                f"<tr><td><code>{e(ev.table)}</code></td><td><code>{e(ev.source)}</code></td>"
                f"<td><code>{e(_rows_text(ev.rows))}</code></td>{note}</tr>"
            )
        parts.append("</table>")
    if f.symptom_tags:
        tags = "".join(f"<span>{e(t)}</span>" for t in f.symptom_tags)
        parts.append(f'<p class="tags">{tags}</p>')
    parts.append(f'<p class="meta">id <code>{e(f.id)}</code></p></section>')
    return parts


def render_html(
    report: Report,
    *,
    plots: Sequence[tuple[str, str, str]] = (),
    lang: Literal["en", "zh", "both"] = "both",
) -> str:
    """Render the report as one self-contained HTML page (inline CSS and scripts, no assets).

    Same order as :func:`render_markdown`: the diagnosis (root causes with evidence, victims,
    remedies, gain and their symptom findings) first, then the plots, then the other findings.

    Args:
        report: The report.
        plots: ``(title, caption, figure HTML)`` per plot, shown after the diagnosis; the figure
            HTML must be self-contained (plotly.js inlined, no CDN; the caller builds it).
        lang: ``en`` or ``zh``: the diagnosis' sentences in that language only; ``both``: each
            English sentence followed by its Chinese one.
    """
    from advisor_chat.i18n import t
    from advisor_chat.textsafe import html_text

    ui = "zh" if lang == "zh" else "en"  # the page's own labels ("both": English labels)

    def e(x: object) -> str:
        return html_text(x, limit=None)

    def T(key: str, **values: object) -> str:
        return e(t(key, ui, **values))

    def say(en: str, zh: str, tag: str = "p") -> str:
        """One sentence in the report's language(s)."""
        if lang == "zh" and zh:
            return f'<{tag} lang="zh">{e(zh)}</{tag}>'
        if lang == "both" and zh:
            return f"<{tag}>{e(en)}</{tag}>" + f'<p class="zh" lang="zh">{e(zh)}</p>'
        return f"<{tag}>{e(en)}</{tag}>"

    p = report.profile
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="{"zh" if lang == "zh" else "en"}"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{T('report.title')}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{T('report.title')}</h1>",
        '<p class="meta">'
        + T(
            "report.profile",
            root=f"`{p['root']}`",
            layout=p["layout"],
            n_ranks=len(p["ranks"]),
            ranks=_ranks_text(p["ranks"]),
            n_steps=len(p["steps"]),
            steps=_steps_suffix(list(p["steps"]), ui == "zh"),
        ).replace(f"`{e(p['root'])}`", f"<code>{e(p['root'])}</code>", 1)
        + (T("report.baseline", root=report.baseline["root"]) if report.baseline else "")
        + (T("report.rank_explained", rank=report.rank) if report.rank is not None else "")
        + "</p>",
    ]
    d = report.diagnosis
    shown: set[str] = set()
    if d is not None:
        parts.append(f"<h2>{T('report.diagnosis')}</h2>")
        parts.append('<div class="headline"><b>' + say(d.headline, d.headline_zh) + "</b></div>")
        if d.left_out:  # input the diagnosis could not use: said before any cause
            parts.append(
                '<div class="left-out"><b>'
                + say(d.left_out, d.left_out_zh if lang != "both" else "")
                + "</b></div>"
            )
        if d.step_time_us:
            sh = ("，" if ui == "zh" else ", ").join(
                f"{t(f'share.{k}', ui)} {v:.1%}" for k, v in d.shares.items()
            )
            parts.append(
                f'<p class="meta">{T("report.median_step", step=fmt_ms(d.step_time_us), shares=sh)}</p>'
            )
        notes = d.notes_zh if lang == "zh" and d.notes_zh else d.notes
        if notes:
            parts.append("<ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
        for i, c in enumerate(d.causes, 1):
            sev = c.severity.value
            parts.append(f'<section class="f cause {sev}" id="{e(c.id)}">')
            num = f"{T('report.cause', n=i)} " if _is_cause(c) else ""
            parts.append(
                f'<h3>{num}<span class="sev {sev}">'
                f"{T(f'severity.{sev}')}</span> {e(_cause_heading(c, ui))}</h3>"
            )
            parts.append(say(c.summary, c.summary_zh))
            items = []
            dominant = c.dominant_zh if ui == "zh" and c.dominant_zh else c.dominant
            if dominant:
                items.append(f"<b>{T('report.culprit_is')}</b> {e(dominant)}")
            if c.findings:
                ids = ", ".join(
                    f'<a href="#{e(f.id)}"><code>{e(f.id)}</code></a>' for f in c.findings
                )
                items.append(f"<b>{T('report.evidence')}</b> {ids}")
            if c.steps:
                items.append(f"<b>{T('report.steps')}</b> {e(', '.join(str(s) for s in c.steps))}")
            vt = _victims_text(c.victims, lang=ui)
            if vt:
                items.append(f"<b>{T('report.victims')}</b> {e(vt)}")
            if c.remedies:
                rem = []
                for rm in c.remedies:
                    g = _gain_text(rm.gain_us, rm.bound, ui) if rm.kind == "action" else ""
                    g += _after_text(c, ui) if g else ""
                    tail = f" &mdash; {T('report.expected_gain_inline', gain=g)}" if g else ""
                    if rm.case_id:
                        tail += " " + T("report.case", case=f"`{rm.case_id}`").replace(
                            f"`{e(rm.case_id)}`", f"<code>{e(rm.case_id)}</code>"
                        )
                    text = rm.text_zh if lang == "zh" and rm.text_zh else rm.text
                    zh_line = (
                        f'<br><span class="zh" lang="zh">{e(rm.text_zh)}</span>'
                        if lang == "both"
                        else ""
                    )
                    rem.append(
                        f"<li><i>{T(f'remedy.{rm.kind}')}</i>{'：' if ui == 'zh' else ': '}"
                        f"{e(text)}{tail}{zh_line}</li>"
                    )
                items.append(f"<b>{T('report.what_to_change')}</b><ul>" + "".join(rem) + "</ul>")
            g = _cause_gain_text(c, ui)
            if g:
                items.append(f"<b>{T('report.expected_gain')}</b> {e(g)}")
            parts.append("<ul>" + "".join(f"<li>{x}</li>" for x in items) + "</ul>")
            for j, f in enumerate(c.findings, 1):
                parts += _finding_html(f, f"{i}.{j}", lang, nested=True)
                shown.add(f.id)
            parts.append("</section>")
    if plots:
        parts.append(f"<h2>{T('report.plots')}</h2>")
        for title, caption, fig_html in plots:
            parts.append(f"<figure><figcaption><b>{e(title)}</b>: {e(caption)}</figcaption>")
            parts.append(fig_html)
            parts.append("</figure>")
    rest = [f for f in report.findings if f.id not in shown]
    key = "report.other_findings" if d is not None else "report.findings"
    counts = _counts(tuple(rest), ui) or t("report.none", ui)
    parts.append(f"<h2>{T(key, n=len(rest), counts=counts)}</h2>")
    if not report.findings:
        parts.append(f"<p>{T('report.no_finding')}</p>")
    for i, f in enumerate(rest, 1):
        parts += _finding_html(f, f"{i}.", lang)
    if report.notes:
        # notes an analyzer gives only in English: a Chinese page says so in their heading
        notes_shown, all_zh = report_notes(report, lang == "zh")
        head, nl = ("report.notes_translated", lang) if all_zh else ("report.notes", "en")
        parts.append(f'<h2>{T(head)}</h2><ul class="analyzer-notes" lang="{nl}">')
        parts += [f"<li>{e(n)}</li>" for n in notes_shown]
        parts.append("</ul>")
    heads = ("th_analyzer", "th_status", "th_findings", "th_time")
    parts.append(
        f"<h2>{T('report.analyzers')}</h2><table><tr>"
        + "".join(f"<th>{T(f'report.{h}')}</th>" for h in heads)
        + "</tr>"
    )
    for r in report.runs:
        parts.append(
            f"<tr><td><code>{e(r.name)}</code></td><td>{e(_status_text(r.status, r.message, T))}</td>"
            f"<td class='n'>{r.findings}</td>"
            f"<td class='n'>{r.seconds:.2f} s</td></tr>"
        )
    parts.append("</table>")
    if report.created:
        parts.append(f'<p class="meta">{T("report.generated", created=report.created)}</p>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _plain(v: Any) -> Any:
    """JSON-safe value: numpy scalars to Python, NaN/inf to None, containers recursively."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        return [_plain(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if v is pd.NA or v is pd.NaT:
        return None
    return v


def to_json(report: Report) -> dict[str, Any]:
    """The ``report --format json`` object (numbers unrounded; NaN becomes ``null``).

    Shape: ``{"findings": [{"id", "kind", "severity", "ranks", "summary", "summary_zh",
    "metrics", "evidence", "symptom_tags", "estimated_gain_us", "category"}], "profile": {root,
    layout, profile_id, ranks, steps, tables, sources, warnings}, "baseline": {...} | null,
    "rank": int | null, "notes": [str], "analyzers": [{name, status, seconds, findings,
    message}], "created": str, "diagnosis": Diagnosis.to_dict() | null}`` (the diagnosis's
    ``causes[].findings`` are finding ids of ``findings``).
    """
    return _plain(
        {
            "findings": [f.to_dict() for f in report.findings],
            "profile": report.profile,
            "baseline": report.baseline,
            "rank": report.rank,
            "notes": list(report.notes),
            "analyzers": [
                {
                    "name": r.name,
                    "status": r.status,
                    "seconds": r.seconds,
                    "findings": r.findings,
                    "message": r.message,
                }
                for r in report.runs
            ],
            "created": report.created,
            "diagnosis": report.diagnosis.to_dict() if report.diagnosis is not None else None,
        }
    )
