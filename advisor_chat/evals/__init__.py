"""Evals: question sets over generated scenarios and real samples, scored by deterministic evaluators.

- :mod:`advisor_chat.evals.dataset`: the YAML item schema and its loader.
- :mod:`advisor_chat.evals.evaluators`: pure checks of one :class:`~advisor_chat.agent.answer.Answer`
  against resolved expectations (ranks, category, link, op/shape, verdict, cases, numbers, tools, refusal,
  grounding, language).
- :mod:`advisor_chat.evals.runner`: generates the scenarios once under ``settings.home``, runs a backend on
  every item, aggregates the metrics and writes ``<backend>.json`` / ``<backend>.md``.
"""

from advisor_chat.evals.dataset import EvalItem, Expect, load_dataset
from advisor_chat.evals.evaluators import CheckResult, evaluate_turn

__all__ = [
    "CheckResult",
    "EvalItem",
    "Expect",
    "evaluate_turn",
    "load_dataset",
]
