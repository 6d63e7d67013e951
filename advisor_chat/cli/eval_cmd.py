"""``advisor-chat eval``: score a backend on the eval datasets and gate on the pass rate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from advisor_chat.cli.common import console, err_console, handle_errors, print_json


def _default_out() -> Path:
    from advisor_chat.evals.dataset import default_dataset_dir

    d = default_dataset_dir()
    if d is not None:
        return d.parent / "reports"
    return Path.cwd() / "eval-reports"


def register(app: typer.Typer) -> None:
    """Add the ``eval`` command to ``app``."""

    @app.command("eval")
    @handle_errors
    def eval_command(
        model: Annotated[
            str | None,
            typer.Option(
                "--model", help="Backend: offline (default), openai:<name>, <name> with --base-url."
            ),
        ] = None,
        base_url: Annotated[
            str | None, typer.Option("--base-url", help="OpenAI-compatible endpoint.")
        ] = None,
        dataset: Annotated[
            list[Path] | None,
            typer.Option(
                "--dataset",
                help="YAML file, folder or dataset name such as 'paraphrase' or "
                "'generalization' (repeatable); default evals/datasets without the paraphrase "
                "and generalization sets.",
            ),
        ] = None,
        only: Annotated[
            list[str] | None,
            typer.Option("--only", help="Run only items whose id contains this text (repeatable)."),
        ] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
        out: Annotated[
            Path | None,
            typer.Option("--out", help="Folder for <backend>.json/.md (default evals/reports)."),
        ] = None,
        gate: Annotated[
            float, typer.Option("--gate", min=0.0, max=1.0, help="Minimum pass rate.")
        ] = 0.9,
        home: Annotated[
            Path | None, typer.Option("--home", help="User data folder (ADVISOR_HOME).")
        ] = None,
        guarded: Annotated[
            bool | None,
            typer.Option(
                "--guarded/--no-guarded",
                help="Guarded mode (default: on for smollm2/gguf:); names the report <model>-guarded/-free.",
            ),
        ] = None,
        limit: Annotated[
            int | None,
            typer.Option("--limit", min=1, help="Run only the first N items (after --only)."),
        ] = None,
        split: Annotated[
            str | None,
            typer.Option(
                "--split",
                metavar="<tune|heldout|all>",
                help="Paraphrase / generalization sets: tune, heldout or all (default all).",
            ),
        ] = None,
        scenario: Annotated[
            list[str] | None,
            typer.Option("--scenario", help="Run only items of this scenario / real sample."),
        ] = None,
        show_heldout: Annotated[
            bool,
            typer.Option(
                "--show-heldout",
                help="List held-out items' questions, answers and failed checks (default: rates "
                "only, so that whoever tunes the rules does not see them).",
            ),
        ] = False,
    ) -> None:
        """Run the eval questions on a backend; exit 1 when the pass rate is under --gate."""
        from advisor_chat.config import load_settings
        from advisor_chat.evals.dataset import load_dataset, select_items
        from advisor_chat.evals.runner import TurnResult, run_eval

        settings = load_settings(model=model, base_url=base_url, home=home, guarded=guarded)
        items = select_items(load_dataset(dataset or None), split=split, scenario=scenario)
        if only:
            items = [i for i in items if any(o in i.id for o in only)]
        if limit is not None:
            items = items[:limit]
        done = [0]
        total = sum(len(i.turns) for i in items)

        def progress(tr: TurnResult) -> None:
            done[0] += 1
            if not json_out:
                mark = "✓" if tr.passed else ("-" if tr.error_kind == "skipped" else "✗")
                hidden = tr.split == "heldout" and not show_heldout
                what = "held-out item" if hidden else f"{tr.item_id}#{tr.turn}"
                err_console.print(f"[{done[0]}/{total}] {mark} {what}", highlight=False)

        report = run_eval(items, settings=settings, progress=progress)
        report.gate = gate
        report.show_heldout = show_heldout
        # a named dataset gets its own report file (--dataset paraphrase -> paraphrase-offline.md)
        prefix = "".join(f"{d.stem}-" for d in dataset or [])
        jp, mp = report.write(out or _default_out(), prefix=prefix)
        if json_out:
            print_json(report.to_dict(answers=False))
        else:
            console.print(report.to_markdown(), markup=False, highlight=False)
            console.print(f"wrote {mp} and {jp}", highlight=False)
        if report.pass_rate < gate:
            err_console.print(
                f"pass rate {100 * report.pass_rate:.1f}% is under the gate {100 * gate:.0f}%",
                highlight=False,
            )
            raise typer.Exit(1)
