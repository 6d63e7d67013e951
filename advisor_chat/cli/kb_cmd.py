"""``advisor-chat kb``: build, search and list the knowledge-case library."""

from __future__ import annotations

import dataclasses

import typer

from advisor_chat.cli.common import console, handle_errors, print_json

kb_app = typer.Typer(
    name="kb",
    help="The knowledge-case library: build the index, search it, list the cases.",
    no_args_is_help=True,
)


@kb_app.command("build")
@handle_errors
def build_cmd(
    force: bool = typer.Option(False, "--force", help="Drop the index and embed every case again."),
    json_out: bool = typer.Option(False, "--json", help="Print the build report as JSON."),
) -> None:
    """Build or update the case index (only new or changed cases are embedded)."""
    from advisor_chat.kb import build_index

    report = build_index(force=force)
    if json_out:
        print_json(dataclasses.asdict(report))
        return
    console.print(
        f"case index: {report.embedded} embedded, {report.skipped} unchanged, "
        f"{report.deleted} deleted ({report.chunks_embedded} chunks) in {report.seconds:.1f} s",
        highlight=False,
    )
    console.print(f"model: {report.model}; index: {report.index_dir}", highlight=False)


@kb_app.command("search")
@handle_errors
def search_cmd(
    query: str = typer.Argument(
        "", help="Question in English or Chinese (may be empty with --tags)."
    ),
    tags: str = typer.Option(
        "", "--tags", help="Comma-separated symptom tags, e.g. host_bound,high_free."
    ),
    k: int = typer.Option(5, "-k", "--top", help="Number of cases to return."),
    json_out: bool = typer.Option(False, "--json", help="Print the hits as JSON."),
) -> None:
    """Find the cases matching a question and/or symptom tags."""
    from advisor_chat.kb import search_cases

    tag_list = [t.strip() for t in tags.split(",") if t.strip()]
    hits = search_cases(query, tag_list or None, k=k)
    if json_out:
        print_json([dataclasses.asdict(h) for h in hits])
        return
    from rich.table import Table

    table = Table(show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("case")
    table.add_column("score", justify="right")
    table.add_column("best section / remedies")
    for i, h in enumerate(hits, start=1):
        matched = f"\nmatched tags: {', '.join(h.matched_tags)}" if h.matched_tags else ""
        table.add_row(
            str(i),
            f"[bold]{h.id}[/]\n{h.title}\n{h.title_zh}{matched}",
            f"{h.score:.4f}",
            h.section + "\n\n" + "\n".join(f"- {r}" for r in h.remedies[:3]) + f"\n\n{h.source}",
        )
    console.print(table)


@kb_app.command("list")
@handle_errors
def list_cmd(
    json_out: bool = typer.Option(False, "--json", help="Print the cases as JSON."),
) -> None:
    """List the cases in the library with their tags."""
    from advisor_chat.kb import load_cases

    cases = load_cases()
    if json_out:
        print_json(
            [
                {
                    "id": c.id,
                    "title": c.title,
                    "title_zh": c.title_zh,
                    "symptom_tags": list(c.symptom_tags),
                    "source": c.rel_source,
                }
                for c in cases
            ]
        )
        return
    from rich.table import Table

    table = Table()
    table.add_column("id")
    table.add_column("title")
    table.add_column("tags")
    for c in cases:
        table.add_row(c.id, f"{c.title}\n{c.title_zh}", ", ".join(c.symptom_tags))
    console.print(table)
    console.print(f"{len(cases)} cases", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``kb`` sub-command group to the main app."""
    app.add_typer(kb_app, name="kb")
