"""``advisor-chat ask PATH "question"``, ``advisor-chat chat PATH``, ``advisor-chat tools list``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from advisor_chat.cli.common import console, err_console, handle_errors, print_json

PathArg = Annotated[
    Path,
    typer.Argument(
        help="Profiling folder (per-rank *_ascend_pt, cluster_analysis_output, PROF_*, ...)."
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Backend: offline (default, no model), openai:<name>, or a model name served at --base-url.",
    ),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."),
]
KeyEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--api-key-env", help="Environment variable holding the API key (default OPENAI_API_KEY)."
    ),
]
BaselineOpt = Annotated[
    Path | None,
    typer.Option("--baseline", "-b", help="Earlier run to compare with (what changed questions)."),
]
GuardedOpt = Annotated[
    bool | None,
    typer.Option(
        "--guarded/--no-guarded",
        help="Guarded mode: the planner fixes the facts, the model only writes prose.",
    ),
]

NoCacheOpt = Annotated[
    bool,
    typer.Option("--no-cache", help="Parse again; neither read nor write the cache."),
]


def _advisor(
    path: Path,
    model: str | None,
    base_url: str | None,
    api_key_env: str | None,
    baseline: Path | None,
    guarded: bool | None,
    no_cache: bool = False,
) -> Any:
    from advisor_chat.agent import Advisor
    from advisor_chat.config import load_settings
    from advisor_chat.ingest import load_profile

    settings = load_settings(
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        guarded=guarded,
        cache=False if no_cache else None,
    )
    profile = load_profile(path, settings=settings)
    base = load_profile(baseline, settings=settings) if baseline is not None else None
    if not settings.index_dir.exists():
        # first run on this ADVISOR_HOME: the first question would build it silently
        from advisor_chat.cli.serve_cmd import prepare_case_index

        prepare_case_index(settings)
    return Advisor(profile, settings=settings, baseline=base)


def answer_json(answer: Any, diagnosis: Any = None) -> dict[str, Any]:
    """The ``ask --json`` shape (issue 6 item 5) plus backend, mode, intent and plots.

    With the profile's ``diagnosis``, ``causes`` holds the root causes the answer rests on (the
    ones its text or suggestions cite), each as in ``report --format json``: culprit, victims,
    evidence metrics, findings, gain and remedies.
    """
    d = answer.model_dump(mode="json")
    d["tool_calls"] = [
        {"name": c["name"], "args": c["args"], "error": c["error"], "table_ref": c["table_ref"]}
        for c in d["tool_calls"]
    ]
    if diagnosis is not None:
        ids = {s["cause_id"] for s in d["suggestions"] if s.get("cause_id")}
        ids |= {c.id for c in diagnosis.causes if c.id in answer.answer}
        d["causes"] = [c.to_dict() for c in diagnosis.causes if c.id in ids]
    return d


def render_answer(
    answer: Any,
    *,
    question: str = "",
    seconds: float | None = None,
    show_tools: bool = False,
    show_evidence: bool = False,
) -> None:
    """Print an answer: text, then (``show_evidence``) the evidence and case tables, grounding line.

    Without ``show_evidence`` one line says how many findings back the answer and how to see
    them (the text already names its causes and cases). The footer is in the answer's language;
    its grounding part is left out when the answer states no measured number (see
    :func:`show_grounding_line`).
    """
    from rich.markdown import Markdown
    from rich.table import Table

    from advisor_chat.i18n import t as msg
    from advisor_chat.textsafe import md_defang
    from advisor_chat.textsafe import term_text as tt
    from advisor_chat.tools.render import fmt_num, metric_label, unit_of

    zh = answer.language == "zh"
    lang = "zh" if zh else "en"

    def table(title: str, *cols: str) -> Table:
        tab = Table(title=msg(f"cli.{title}", lang), show_lines=False, expand=False)
        for col in cols:
            tab.add_column(msg(f"cli.{col}", lang), overflow="fold")
        return tab

    # the text lists cases and suggestions; the tables below repeat them with sources.
    # Profile strings in it (or a model's injected link) are made text; no escape sequence passes.
    console.print(Markdown(md_defang(answer.answer), hyperlinks=False))
    if show_tools and answer.tool_calls:
        t = table("tool_calls", "tool", "args", "result")
        for c in answer.tool_calls:
            args = ", ".join(f"{k}={v}" for k, v in c.args.items())
            t.add_row(tt(c.name), tt(args), tt(c.error or (c.table_ref or "ok"), limit=1000))
        console.print(t)
    if answer.findings and not show_evidence:
        console.print(f"[dim]{tt(msg('cli.evidence_hint', lang, n=len(answer.findings)))}[/]")
    if answer.findings and show_evidence:
        t = table("evidence", "finding", "numbers", "source")
        for f in answer.findings:
            nums = "; ".join(
                f"{metric_label(k)}={fmt_num(v, unit_of(k))}"
                for k, v in list(f.metrics.items())[:4]
            )
            srcs = "; ".join(Path(s).name if len(s) > 60 else s for s in f.sources[:2])
            t.add_row(f"{tt(f.id)} {tt(f'[{f.severity}]')}", tt(nums), tt(srcs))
        console.print(t)
    if answer.cases and show_evidence:
        # a case's source (where it comes from) is written in English: English answers only
        t = table("cases", "id", "title") if zh else table("cases", "id", "title", "source")
        for c in answer.cases:
            title = c.title_zh if zh and c.title_zh else c.title
            row = [tt(c.id), tt(title)] + ([] if zh else [tt(c.source.split(" (", 1)[0])])
            t.add_row(*row)
        console.print(t)
    if show_grounding_line(answer, question):
        g = answer.grounding
        style = "green" if not g.ungrounded else "bold red"
        line = msg("cli.grounding", lang, grounded=g.numbers_grounded, total=g.numbers_total)
        if g.ungrounded:
            line += msg("cli.ungrounded", lang, numbers=("、" if zh else ", ").join(g.ungrounded))
        line = f"[{style}]{tt(line, limit=1000)}[/]" + ("" if zh else " ")
    else:
        line = ""
    word = _catalogued_word(lang)
    mode = (f"，{word(answer.mode)}" if zh else f", {word(answer.mode)}") if answer.mode else ""
    backend = word(answer.backend)
    if seconds is not None:
        meta = msg("cli.meta_seconds", lang, backend=backend, mode=mode, seconds=f"{seconds:.2f}")
    else:
        meta = msg("cli.meta", lang, backend=backend, mode=mode)
    meta = tt(meta)
    console.print(f"{line}[dim]{meta}[/]", highlight=False)


def _catalogued_word(lang: str) -> Any:
    """A function giving a backend or answer-mode label in ``lang``.

    Labels the catalogue has (``offline``, ``planner``, ...) are translated; a model name such as
    ``qwen2.5@http://...`` is shown as written.
    """
    from advisor_chat.i18n import messages

    known = messages("zh" if lang == "zh" else "en")

    def word(label: str) -> str:
        return known.get(f"cli.word.{label}", label)

    return word


def show_grounding_line(answer: Any, question: str = "") -> bool:
    """Whether the grounding footer says something: the answer states a measured number.

    Shown when a number of the answer is not in this turn's tool results (always), when the
    answer cites findings, or when its text has a measured number (with a unit or decimals:
    ``39.5 ms``, ``27.0%``, ``0.8``) that is not one the question already wrote. Not shown for a
    refusal or any answer whose only numbers are identifiers and counts (``rank 99 does not
    exist; ranks are 0-15``) or numbers echoed from the question: "2/2 numbers found" there
    vouches for nothing.
    """
    from advisor_chat.agent.grounding import extract_numbers

    g = answer.grounding
    if g.ungrounded:
        return True
    if answer.mode == "refused" or g.numbers_total == 0:
        return False
    if answer.findings:
        return True
    asked = {(n.dim, round(n.value * n.scale, 6)) for n in extract_numbers(question)}
    return any(
        (n.dim != "none" or n.decimals > 0) and (n.dim, round(n.value * n.scale, 6)) not in asked
        for n in extract_numbers(answer.answer)
    )


def register(app: typer.Typer) -> None:
    """Add ``ask``, ``chat`` and ``tools list`` to ``app``."""

    @app.command("ask")
    @handle_errors
    def ask(
        path: PathArg,
        question: Annotated[str, typer.Argument(help="The question, English or Chinese.")],
        model: ModelOpt = None,
        base_url: BaseUrlOpt = None,
        api_key_env: KeyEnvOpt = None,
        baseline: BaselineOpt = None,
        guarded: GuardedOpt = None,
        no_cache: NoCacheOpt = False,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print the answer object as JSON.")
        ] = False,
        show_tools: Annotated[
            bool, typer.Option("--tools", help="Also list the tool calls.")
        ] = False,
        show_evidence: Annotated[
            bool,
            typer.Option(
                "--evidence", help="Also show the findings behind the answer (numbers, files)."
            ),
        ] = False,
    ) -> None:
        """Ask one question about a profile (offline by default), e.g. "why is rank 12 slow?"."""
        adv = _advisor(path, model, base_url, api_key_env, baseline, guarded, no_cache)
        t0 = time.perf_counter()
        answer = adv.ask(question)
        dt = time.perf_counter() - t0
        if as_json:
            from advisor_chat.diagnosis import diagnose

            try:
                diag = diagnose(adv.profile, baseline=adv.baseline)
            except Exception:  # the answer already says why the diagnosis failed
                diag = None
            print_json(answer_json(answer, diag))
        else:
            render_answer(
                answer,
                question=question,
                seconds=dt,
                show_tools=show_tools,
                show_evidence=show_evidence,
            )

    @app.command("chat")
    @handle_errors
    def chat(
        path: PathArg,
        model: ModelOpt = None,
        base_url: BaseUrlOpt = None,
        api_key_env: KeyEnvOpt = None,
        baseline: BaselineOpt = None,
        guarded: GuardedOpt = None,
        no_cache: NoCacheOpt = False,
        show_evidence: Annotated[
            bool,
            typer.Option(
                "--evidence", help="Also show the findings behind each answer (numbers, files)."
            ),
        ] = False,
    ) -> None:
        """Multi-turn chat in the terminal (follow-ups like "and rank 13?"); 'exit' or Ctrl-D ends, '/reset' forgets."""
        from advisor_chat.textsafe import term_text as tt

        adv = _advisor(path, model, base_url, api_key_env, baseline, guarded, no_cache)
        ranks = adv.session.ranks
        adv.warm_up()
        console.print(
            f"[bold]advisor-chat[/] — {len(ranks)} ranks, backend {tt(adv.backend)}. "
            "Ask a question ('help' lists what I can answer; 'exit' quits).",
            highlight=False,
        )
        while True:
            try:
                q = input("> ")
            except (EOFError, KeyboardInterrupt):
                console.print()
                break
            q = q.strip()
            if not q:
                continue
            if q.lower() in ("exit", "quit", "/exit", "/quit", "退出"):
                break
            if q.lower() in ("/reset", "reset"):
                adv.reset()
                console.print("[dim]conversation reset[/]")
                continue
            t0 = time.perf_counter()
            answer = adv.ask(q)
            render_answer(
                answer, question=q, seconds=time.perf_counter() - t0, show_evidence=show_evidence
            )

    tools_app = typer.Typer(
        help="The function-calling tools (generated from the analyzers).", no_args_is_help=True
    )
    app.add_typer(tools_app, name="tools")

    @tools_app.command("list")
    @handle_errors
    def tools_list(
        path: Annotated[
            Path | None,
            typer.Argument(help="Optional profiling folder: show schemas with its valid values."),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the JSON schemas.")] = False,
    ) -> None:
        """List the tools a model can call, with their parameters."""
        from rich.table import Table

        from advisor_chat.tools import build_tools, tool_schemas

        if path is not None:
            from advisor_chat.ingest import load_profile

            specs = [t.spec() for t in build_tools(load_profile(path))]
        else:
            specs = tool_schemas()
        if as_json:
            print_json(specs)
            return
        t = Table(title=f"{len(specs)} tools", expand=False)
        t.add_column("tool")
        t.add_column("parameters", overflow="fold")
        t.add_column("description", overflow="fold")
        for s in specs:
            props = s["parameters"].get("properties", {})
            req = set(s["parameters"].get("required", []))
            params = []
            for name, p in props.items():
                typ = p.get("type", "")
                extra = ""
                if "enum" in p:
                    extra = "{" + ",".join(map(str, p["enum"]))[:40] + "}"
                elif "minimum" in p or "maximum" in p:
                    extra = f"[{p.get('minimum', '')}..{p.get('maximum', '')}]"
                params.append(f"{name}{'*' if name in req else ''}: {typ}{extra}")
            t.add_row(s["name"], "\n".join(params) or "—", s["description"])
        console.print(t)
        err_console.print("[dim]* = required[/]")
