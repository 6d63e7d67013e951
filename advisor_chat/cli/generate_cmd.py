"""``advisor-chat generate SCENARIO --out DIR``: write a synthetic cluster profile."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from advisor_chat.cli.common import console, handle_errors


def register(app: typer.Typer) -> None:
    """Add the ``generate`` command to the CLI app."""

    @app.command("generate")
    @handle_errors
    def generate_cmd(
        scenario: Annotated[
            str, typer.Argument(help="Scenario name, e.g. seed-rank12, slow-link, healthy.")
        ],
        out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (created).")],
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
                help="text (csv/json) or db (ascend_pytorch_profiler_{rank}.db + analysis.db).",
            ),
        ] = "text",
    ) -> None:
        """Write per-rank *_ascend_pt folders with a planted fault, plus answer_key.json."""
        from advisor_chat.synth import generate

        path = generate(scenario, out, ranks=ranks, steps=steps, seed=seed, export=export)  # type: ignore[arg-type]
        console.print(f"wrote {scenario} to {path} (answer key: {path / 'answer_key.json'})")
