"""Jupyter display of a diagnosed profile and of answers (``advisor_chat.open_profile``).

``open_profile(path)`` loads and diagnoses a profiling folder and returns a
:class:`NotebookProfile`: a :class:`~advisor_chat.ingest.Profile` (everything that takes a
profile takes it, ``Advisor(p)`` included) that also shows itself in a notebook. Its HTML is the
diagnosis (headline, root causes with culprit, evidence, gain and first action, what was left
out) and the per-rank breakdown plot; ``p.ask("...")`` answers with the offline advisor (or the
backend the settings name) and returns a :class:`NotebookAnswer` that shows the answer, the
findings and files behind its numbers, the cited cases, the suggestions, the tool calls and the
answer's plots. ``p.plots()`` returns the plotly figures themselves.

Offline: plotly.js is inlined once per kernel session, in the first output with a plot (no CDN);
later outputs use it, as plotly's own ``notebook`` renderer does (a saved notebook shows them
once that first output has run). Every string that comes from the profile is escaped
(:func:`advisor_chat.textsafe.html_text`): a name holding ``<script>`` shows as text.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor_chat.ingest.profile import Profile
from advisor_chat.textsafe import html_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from advisor_chat.agent.answer import Answer
    from advisor_chat.config import Settings
    from advisor_chat.diagnosis.types import Diagnosis

_CSS = (
    "<style>.adv{font-family:system-ui,sans-serif;max-width:980px}.adv h3{margin:.4em 0}"
    ".adv table{border-collapse:collapse}.adv td,.adv th{border:1px solid #ddd;padding:4px 6px;"
    "vertical-align:top;text-align:left}.adv .muted{color:#666}</style>"
)


#: Whether plotly.js was inlined in an output of this kernel session already.
_PLOTLY_JS_SENT = False


def _figures_html(figs: list[go.Figure]) -> str:
    """Figures as HTML: plotly.js inlined once per kernel session (offline, no CDN).

    It comes with the first figure shown; later outputs use it (as plotly's own ``notebook``
    renderer does), so a notebook of many answers is not 3.5 MB per output.
    """
    global _PLOTLY_JS_SENT
    parts = []
    for fig in figs:
        parts.append(fig.to_html(full_html=False, include_plotlyjs=not _PLOTLY_JS_SENT))
        _PLOTLY_JS_SENT = True
    return "".join(parts)


def _p(text: str) -> str:
    """Plain answer text → escaped HTML paragraphs (line breaks kept)."""
    paras = [x for x in text.split("\n\n") if x.strip()]
    return "".join(f"<p>{html.escape(x).replace(chr(10), '<br>')}</p>" for x in paras)


class NotebookAnswer:
    """An :class:`~advisor_chat.agent.answer.Answer` that displays as HTML in a notebook.

    Attributes:
        answer: The answer object (``.answer`` text, ``.findings``, ``.suggestions``, ...).
        figures: The plots the answer chose, with its culprit ranks highlighted.
    """

    def __init__(self, answer: Answer, figures: list[go.Figure]) -> None:
        self.answer = answer
        self.figures = figures

    def __str__(self) -> str:
        return self.answer.answer

    def __repr__(self) -> str:
        return f"NotebookAnswer({self.answer.answer[:80]!r}...)"

    def _repr_html_(self) -> str:
        from advisor_chat.i18n import t

        a = self.answer
        lang = "zh" if a.language == "zh" else "en"
        sep = "：" if lang == "zh" else ": "
        out = [_CSS, '<div class="adv">', _p(a.answer)]
        # the text lists its suggestions already: only the others get a list of their own
        extra = a.unlisted_suggestions()
        if extra:
            items = "".join(
                f"<li><b>{t(f'remedy.{s.kind}', lang)}</b>{sep}{html.escape(s.text)}</li>"
                if s.kind == "action"
                else f"<li>{t(f'remedy.{s.kind}', lang)}{sep}{html.escape(s.text)}</li>"
                for s in extra
            )
            out.append(f"<h3>{t('page.suggestions', lang)}</h3><ul>{items}</ul>")
        if a.findings:
            rows = "".join(
                f"<tr><td><code>{html_text(f.id)}</code></td><td>"
                f"{html_text(f.summary_zh if lang == 'zh' and f.summary_zh else f.summary, limit=400)}"
                f"</td><td>{'<br>'.join(html_text(s) for s in f.sources[:3])}</td></tr>"
                for f in a.findings
            )
            out.append(f"<h3>{t('notebook.evidence', lang)}</h3><table>{rows}</table>")
        if a.cases:
            items = "".join(
                f"<li><code>{html_text(c.id)}</code>{sep}"
                f"{html_text(c.title_zh if lang == 'zh' and c.title_zh else c.title)}</li>"
                for c in a.cases
            )
            out.append(f"<h3>{t('page.cases_inline', lang)}</h3><ul>{items}</ul>")
        if a.tool_calls:
            calls = ", ".join(f"<code>{html_text(tc.name)}</code>" for tc in a.tool_calls)
            g = a.grounding
            grounding = t("page.grounded", lang, g=g.numbers_grounded, t=g.numbers_total)
            tools = t("notebook.tools_called", lang, tools=calls, grounding=grounding)
            out.append(f'<p class="muted">{tools}</p>')
        out.append(_figures_html(self.figures))
        out.append("</div>")
        return "".join(out)


class NotebookProfile(Profile):
    """A diagnosed :class:`~advisor_chat.ingest.Profile` that shows itself in a notebook.

    Made by :func:`open_profile`; every attribute and method of ``Profile`` works unchanged.
    """

    _nb_settings: Settings | None = None
    _nb_advisor: Any = None

    def diagnosis(self) -> Diagnosis:
        """The diagnosis (computed once per profile, cached): :func:`advisor_chat.diagnosis.diagnose`."""
        from advisor_chat.diagnosis import diagnose

        return diagnose(self)

    def ask(self, question: str) -> NotebookAnswer:
        """Answer ``question`` (English or Chinese) with the advisor of these settings.

        Follow-up questions ("and rank 13?") continue the same conversation.

        Raises:
            AdvisorError: As :meth:`advisor_chat.agent.Advisor.ask` (a bad question argument, an
                unreachable model endpoint).
        """
        from advisor_chat.agent import Advisor
        from advisor_chat.config import load_settings

        if self._nb_advisor is None:
            self._nb_advisor = Advisor(self, settings=self._nb_settings or load_settings())
        ans = self._nb_advisor.ask(question)
        return NotebookAnswer(ans, self._figures(list(ans.plots), list(ans.plot_ranks)))

    def plots(self, ranks: list[int] | None = None) -> dict[str, go.Figure]:
        """Every plot the data allows (``{name: plotly figure}``), ``ranks`` highlighted.

        Default ranks: the top root cause's culprits. Names: ``rank_breakdown``,
        ``bandwidth_heatmap``, ``step_trend``, ``op_compare``, ``launch_delay``
        (:data:`advisor_chat.ui.plots.BUILDERS`); a plot the data lacks is left out.
        """
        from advisor_chat.ui.plots import BUILDERS, build_plots

        if ranks is None:
            top = self.diagnosis().top()
            ranks = list(top.culprit.ranks) if top is not None else []
        built = build_plots(self, list(BUILDERS), ranks)
        return {k: v for k, v in built.items() if v is not None}

    def _figures(self, names: list[str], ranks: list[int]) -> list[go.Figure]:
        from advisor_chat.ui.plots import build_plots

        return [f for f in build_plots(self, names, ranks).values() if f is not None]

    def _repr_html_(self) -> str:
        d = self.diagnosis()
        out = [_CSS, '<div class="adv">']
        out.append(
            f"<h3>{html_text(Path(self.root).name)}: {len(self.ranks)} ranks, "
            f"{len(self.steps)} steps ({html_text(self.layout)})</h3>"
        )
        out.append(_p(d.headline))
        rows = []
        for c in d.causes[:6]:
            act = next((r for r in c.remedies if r.kind == "action"), None)
            gain = f"{c.gain_us / 1000:.1f} ms/step" if c.gain_us else ""
            rows.append(
                f"<tr><td>{html_text(c.culprit.label)}</td><td>{html_text(c.mechanism.value)}</td>"
                f"<td>{html_text(c.summary, limit=600)}</td><td>{gain}</td>"
                f"<td>{html_text(act.text, limit=300) if act else ''}</td></tr>"
            )
        if rows:
            out.append(
                "<table><tr><th>culprit</th><th>mechanism</th><th>evidence</th>"
                "<th>gain</th><th>first action</th></tr>" + "".join(rows) + "</table>"
            )
        if d.left_out:
            out.append(f'<p class="muted">{html.escape(d.left_out)}</p>')
        top = d.top()
        figs = self._figures(["rank_breakdown"], list(top.culprit.ranks) if top else [])
        out.append(_figures_html(figs))
        out.append(
            '<p class="muted">Ask with <code>.ask("why is rank 12 slow?")</code>; all plots: '
            "<code>.plots()</code>.</p></div>"
        )
        return "".join(out)


def open_profile(
    path: str | Path,
    *,
    settings: Settings | None = None,
    use_cache: bool = True,
    progress: Any = False,
    workers: int | None = None,
) -> NotebookProfile:
    """Load and diagnose ``path`` (:func:`advisor_chat.diagnosis.open_profile`, same arguments).

    Returns:
        The profile as a :class:`NotebookProfile` (a ``Profile``; it displays its diagnosis).

    Raises:
        InputError: The folder cannot be read (the message names the file and what to do).
    """
    from advisor_chat.diagnosis import open_profile as _open

    profile = _open(
        path, settings=settings, use_cache=use_cache, progress=progress, workers=workers
    )
    profile.__class__ = NotebookProfile  # same fields; adds the display and ask()
    nb: NotebookProfile = profile  # type: ignore[assignment]
    nb._nb_settings = settings
    return nb
