"""``advisor-chat inspect PATH [--json]``: what a profiling folder holds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from advisor_chat.cli.common import console, handle_errors, print_json


def _render(info: dict[str, Any]) -> None:
    from rich.table import Table

    from advisor_chat.textsafe import term_text as tt

    def span(rs: list[int]) -> str:
        if not rs:
            return "-"
        if rs == list(range(rs[0], rs[-1] + 1)) and len(rs) > 2:
            return f"{rs[0]}-{rs[-1]} ({len(rs)})"
        return ", ".join(str(r) for r in rs[:16]) + (" ..." if len(rs) > 16 else "")

    def count(rs: list[int], word: str) -> str:
        """``"16 ranks: 0-15"``, ``"1 step: 7"``."""
        if not rs:
            return f"no {word}s"
        ids = span(rs).split(" (")[0]
        return f"{len(rs)} {word}{'' if len(rs) == 1 else 's'}: {ids}"

    console.print(
        f"[bold]{tt(info['root'], limit=1000)}[/]  layout: [cyan]{tt(info['layout'])}[/]",
        highlight=False,
        soft_wrap=True,
    )
    summary = Table(show_header=False, box=None)
    summary.add_column(style="bold")
    summary.add_column(overflow="fold")
    summary.add_row("ranks", count(info["ranks"], "rank"))
    steps = [s for s in info["steps"] if s >= 0]
    if steps:
        summary.add_row("steps", count(steps, "step"))
    else:
        summary.add_row("steps", "no step markers: the whole capture is analyzed as one step")
    for label, versions in info["versions"].items():
        summary.add_row(
            tt(label), "; ".join(f"{tt(v)} (ranks {span(r)})" for v, r in versions.items())
        )
    if info["profiler_level"]:
        summary.add_row(
            "profiler level",
            "; ".join(f"{tt(lv)} (ranks {span(r)})" for lv, r in info["profiler_level"].items()),
        )
    for st in info["stages"]:
        summary.add_row(f"PP stage {st['index']}", span(st["ranks"]))
    summary.add_row("cache", "hit" if info["cache_hit"] else "parsed")
    console.print(summary)
    tables = Table(title="Tables")
    tables.add_column("table")
    tables.add_column("rows", justify="right")
    tables.add_column("source", overflow="fold")
    for name, t in info["tables"].items():
        od = t.get("on_demand")
        rows = (
            str(t["rows"])
            if not od
            else f"{t['rows']} (read for {od['ranks_read']} of {od['ranks']} ranks)"
        )
        tables.add_row(tt(name), rows, tt(t["source"], limit=1000))
    console.print(tables)
    if info["groups"]:
        groups = Table(title="Communication groups")
        for col in ("group", "name", "kind", "ranks"):
            groups.add_column(col, overflow="fold")
        for g in info["groups"][:40]:
            groups.add_row(
                tt(g["group"] or "-"),
                tt(g["group_name"] or "-"),
                tt(g["comm_kind"] or "-"),
                span(g["ranks"]),
            )
        if len(info["groups"]) > 40:
            groups.caption = f"{len(info['groups']) - 40} more (use --json)"
        console.print(groups)
    for s in info["extra_sources"]:
        console.print(f"[dim]also found:[/] {tt(s, limit=1000)}", highlight=False, soft_wrap=True)
    if info["warnings"]:
        w = Table(title="Data-quality warnings")
        w.add_column("code")
        w.add_column("message", overflow="fold")
        for item in info["warnings"]:
            w.add_row(tt(item["code"]), tt(item["message"], limit=2000))
        console.print(w)
    else:
        console.print(
            "[green]every file was read as expected[/] (no load warnings; `report` runs the "
            "data-quality checks on what the files contain)"
        )


def register(app: typer.Typer) -> None:
    """Add the ``inspect`` command to ``app``."""

    @app.command("inspect")
    @handle_errors
    def inspect(
        path: Annotated[
            Path, typer.Argument(help="Profiling folder (rank folders, cluster output, PROF_*).")
        ],
        as_json: Annotated[
            bool, typer.Option("--json", help="Print JSON instead of tables.")
        ] = False,
        no_cache: Annotated[
            bool, typer.Option("--no-cache", help="Parse again, ignore the cache.")
        ] = False,
        workers: Annotated[
            int | None, typer.Option("--workers", help="Parallel processes (0 = CPUs).")
        ] = None,
    ) -> None:
        """Show what a profiling folder holds: layout, ranks, steps, groups, versions, tables, warnings."""
        from advisor_chat.ingest import load_profile
        from advisor_chat.ingest.inspect import inspect_profile

        profile = load_profile(path, use_cache=not no_cache, workers=workers, progress=None)
        info = inspect_profile(profile)
        if as_json:
            print_json(info)
        else:
            _render(info)
