"""``advisor-chat report PATH [--format md|html|json] [--rank N] [--baseline PATH] [--output FILE]``."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from advisor_chat.cli.common import console, handle_errors, print_json
from advisor_chat.errors import InputError, ToolArgumentError


class ReportFormat(str, Enum):
    """Output formats of ``report``."""

    md = "md"
    html = "html"
    json = "json"


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
    except ValueError:
        return False
    return True


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to ``app``."""

    @app.command("report")
    @handle_errors
    def report(
        path: Annotated[
            Path,
            typer.Argument(
                help="Profiling folder (per-rank *_ascend_pt, cluster_analysis_output, PROF_*, ...)."
            ),
        ],
        fmt: Annotated[
            ReportFormat,
            typer.Option(
                "--format",
                "-f",
                help="md (terminal / Markdown), html (one self-contained page) or json.",
            ),
        ] = ReportFormat.md,
        rank: Annotated[
            int | None,
            typer.Option("--rank", "-r", help="Also explain this global rank (explain_rank)."),
        ] = None,
        baseline: Annotated[
            Path | None,
            typer.Option(
                "--baseline",
                "-b",
                help="Baseline profiling folder to compare with (compare_profiles).",
            ),
        ] = None,
        output: Annotated[
            Path | None,
            typer.Option(
                "--output",
                "-o",
                help="Write to this file instead of the terminal (not inside PATH).",
            ),
        ] = None,
        no_cache: Annotated[
            bool,
            typer.Option("--no-cache", help="Parse again; neither read nor write the cache."),
        ] = False,
        lang: Annotated[
            str,
            typer.Option(
                "--lang",
                metavar="<en|zh|both>",
                help="Language of the report: en or zh (markdown and html); html also takes "
                "both (each English sentence followed by its Chinese one, with plot titles and "
                "captions in English).",
            ),
        ] = "en",
    ) -> None:
        """Diagnose a profile: every finding with its numbers and source files, most important first."""
        from advisor_chat.analyzers._common import format_ranks
        from advisor_chat.ingest import load_profile
        from advisor_chat.reporting import render_html, render_markdown, run_report, to_json

        for folder in (path, baseline):
            if folder is not None and output is not None and _inside(output, folder):
                raise InputError(
                    f"--output {output} is inside the profiling folder {folder}",
                    remedy="Write the report elsewhere; advisor-chat never writes into profiling data",
                )
        if output is not None:
            from advisor_chat.ingest.detect import profiling_folder_of

            other = profiling_folder_of(output)
            if other is not None:
                raise InputError(
                    f"--output {output} is inside the profiling folder {other}",
                    remedy="Write the report elsewhere; advisor-chat never writes into profiling "
                    "data",
                )
        if output is not None and output.is_dir():
            raise InputError(
                f"--output {output} is a folder",
                remedy="Give a file name, e.g. --output report.md",
            )
        profile = load_profile(path, use_cache=not no_cache)
        if rank is not None and rank not in profile.ranks:
            raise ToolArgumentError(
                f"--rank {rank} does not exist in {path}; ranks are {format_ranks(profile.ranks)}",
                zh=f"--rank {rank} 在 {path} 中不存在；现有的卡为 {format_ranks(profile.ranks, sep='、')}",
            )
        base = load_profile(baseline, use_cache=not no_cache) if baseline is not None else None
        rep = run_report(profile, baseline=base, rank=rank)
        if fmt is ReportFormat.json:
            if output is None:
                print_json(to_json(rep))
                return
            import orjson

            text = orjson.dumps(
                to_json(rep), option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str
            ).decode()
        elif fmt is ReportFormat.html:
            if lang not in ("en", "zh", "both"):
                raise ToolArgumentError(f"--lang {lang!r}: use en, zh or both")
            text = render_html(rep, plots=_html_plots(profile, rep, lang), lang=lang)  # type: ignore[arg-type]
        else:
            if lang not in ("en", "zh"):
                raise ToolArgumentError(
                    f"--lang {lang!r}: the markdown report is in one language, en or zh "
                    "(both: -f html)"
                )
            text = render_markdown(rep, lang=lang)  # type: ignore[arg-type]
        if output is not None:
            try:
                output.parent.mkdir(parents=True, exist_ok=True)
                output.write_text(text, encoding="utf-8")
            except OSError as exc:
                raise InputError(
                    f"cannot write --output {output} ({exc.strerror or exc})",
                    remedy="Choose a writable file path",
                ) from None
            # (a "not enough signal" or "no culprit" block is not a root cause)
            n_causes = (
                sum(
                    1
                    for c in rep.diagnosis.causes
                    if c.mechanism.value not in ("not_enough_signal", "no_culprit")
                )
                if rep.diagnosis is not None
                else 0
            )
            console.print(
                f"wrote {output} ({n_causes} root cause(s), {len(rep.findings)} finding(s))",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        elif fmt is ReportFormat.md and console.is_terminal:
            from rich.markdown import Markdown

            console.print(Markdown(text))
        else:
            # json, html, and markdown piped or redirected (`report > r.md`): the text as written,
            # not rendered or wrapped for a terminal
            import sys

            sys.stdout.write(text if text.endswith("\n") else text + "\n")


#: Plots of the html report, in this order (each shown when the profile has its data).
HTML_PLOTS = ("rank_breakdown", "step_trend", "bandwidth_heatmap", "launch_delay")


def _html_plots(profile: Any, rep: Any, lang: str) -> list[tuple[str, str, str]]:
    """``(title, caption, figure HTML)`` of the report's plots, the top cause's culprits starred.

    plotly.js is inlined with the first figure only, so the page is self-contained (no CDN).
    """
    from advisor_chat.ui.plots import PLOT_CAPTIONS, PLOT_TITLES, PLOT_TITLES_ZH, build_plots

    top = rep.diagnosis.top() if rep.diagnosis is not None else None
    ranks = list(top.culprit.ranks) if top is not None else []
    zh = lang == "zh"
    out: list[tuple[str, str, str]] = []
    for name, fig in build_plots(profile, HTML_PLOTS, ranks, lang="zh" if zh else "en").items():
        if fig is None:
            continue
        title = PLOT_TITLES_ZH[name] if zh else PLOT_TITLES[name]
        caption = PLOT_CAPTIONS[name][1 if zh else 0]
        html = fig.to_html(full_html=False, include_plotlyjs=not out)
        out.append((title, caption, html))
    return out
