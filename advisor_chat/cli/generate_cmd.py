"""``advisor-chat generate SCENARIO --out DIR``: write a synthetic cluster profile."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from advisor_chat.cli.common import console, handle_errors


def scenario_table() -> Any:
    """A rich table of :data:`advisor_chat.synth.SCENARIOS`: name, one-line description, default size.

    Descriptions are shown as text (no rich markup is interpreted).
    """
    from rich import box
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from advisor_chat.synth import SCENARIOS
    from advisor_chat.synth.blind import BLIND_KINDS

    t = Table(box=None, show_header=False, padding=(0, 2, 0, 0), expand=False)
    t.add_column("scenario", no_wrap=True, style="bold cyan")
    t.add_column("description", overflow="fold")
    for name, spec in SCENARIOS.items():
        if name in BLIND_KINDS:  # generated on request, not described where tuners read
            continue
        desc = Text(" ".join(spec.description.split()))
        desc.append(
            f" (default: {spec.default_ranks} ranks, {spec.default_steps} steps)", style="dim"
        )
        t.add_row(Text(name), desc)
    t.add_row(
        Text("…", style="dim"),
        Text(f"and {len(BLIND_KINDS)} blind held-out scenarios (see docs/EVALS.md)", style="dim"),
    )
    return Panel(t, title="Scenarios", title_align="left", border_style="dim", box=box.ROUNDED)


def scenario_names() -> Any:
    """The scenario names in columns (the ``--help`` list; ``--list`` describes each)."""
    from rich import box
    from rich.columns import Columns
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    from advisor_chat.synth import SCENARIOS
    from advisor_chat.synth.blind import BLIND_KINDS

    names = [Text(n, style="cyan") for n in SCENARIOS if n not in BLIND_KINDS]
    tail = Text(
        f"and {len(BLIND_KINDS)} blind held-out scenarios (see docs/EVALS.md). "
        "`advisor-chat generate --list` says what each plants and its default size.",
        style="dim",
    )
    return Panel(
        Group(Columns(names, column_first=True, padding=(0, 2)), tail),
        title="Scenarios",
        title_align="left",
        border_style="dim",
        box=box.ROUNDED,
    )


class _GenerateCommand(TyperCommand):
    """The ``generate`` command; its help ends with the scenarios' names.

    The generator (numpy, ~0.2 s to import) is imported only when the help is shown, not at
    CLI start-up.
    """

    def format_help(self, ctx: Any, formatter: Any) -> None:
        super().format_help(ctx, formatter)  # rich mode prints straight to the terminal
        console.print(scenario_names())


def register(app: typer.Typer) -> None:
    """Add the ``generate`` command to the CLI app."""

    @app.command("generate", cls=_GenerateCommand)
    @handle_errors
    def generate_cmd(
        scenario: Annotated[
            str | None,
            typer.Argument(
                help="Scenario name (listed below), e.g. seed-rank12.", show_default=False
            ),
        ] = None,
        out: Annotated[
            Path | None,
            typer.Option("--out", "-o", help="Output folder (created); required with a scenario."),
        ] = None,
        ranks: Annotated[
            int | None, typer.Option("--ranks", help="World size 2..4096 (default per scenario).")
        ] = None,
        steps: Annotated[
            int | None, typer.Option("--steps", help="Captured steps (default per scenario).")
        ] = None,
        seed: Annotated[
            int, typer.Option("--seed", help="Jitter seed; the same seed gives identical bytes.")
        ] = 0,
        export: Annotated[
            str,
            typer.Option(
                "--export",
                metavar="<text|db>",
                help="text (csv/json) or db (ascend_pytorch_profiler_{rank}.db + analysis.db).",
            ),
        ] = "text",
        list_: Annotated[
            bool,
            typer.Option("--list", help="Describe every scenario (what it plants, default size)."),
        ] = False,
    ) -> None:
        """Write per-rank *_ascend_pt folders with a planted fault, plus answer_key.json."""
        from advisor_chat.errors import ToolArgumentError
        from advisor_chat.synth import generate

        if list_:
            console.print(scenario_table())
            return
        if scenario is None or out is None:
            raise ToolArgumentError(
                "generate needs a scenario and --out: advisor-chat generate seed-rank12 --out "
                "/tmp/seed12 (advisor-chat generate --list describes the scenarios)"
            )

        path = generate(scenario, out, ranks=ranks, steps=steps, seed=seed, export=export)  # type: ignore[arg-type]
        console.print(f"wrote {scenario} to {path} (answer key: {path / 'answer_key.json'})")
