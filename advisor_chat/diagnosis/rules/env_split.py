"""Environment split: a setting that only the culprit's ranks have is evidence for any cause.

Whatever mechanism a rule found for some ranks (late arrivals, slower kernels, slow links, host
gaps), a recorded environment variable whose value is one thing on exactly those ranks and another
on every other rank distinguishes them from their peers in a way the timing alone cannot. This
pass runs after every blame rule, on every cause whose culprit is a strict subset of the ranks:
the split is added to the cause's summary (which rank set, which variable, both values) and
becomes a remedy: for a variable of the runtime, the framework or the threading libraries
(``PERF_VARIABLES``) an action placed first, "set it as the other ranks do"; for any other variable
a check after the cause's own actions. A variable the cause's text names already is left alone
(the rule that found it said it).

Source: ``meta.env`` (profiler_metadata.json ``ENV_VARIABLES`` per rank; per-rank variables such
as the rank, device or address left out by
:func:`~advisor_chat.analyzers.env_check.env_differences`); the ``env_check``
``differs_across_ranks`` finding is attached to the cause.
"""

from __future__ import annotations

import dataclasses
import re

from advisor_chat.diagnosis.context import Context, ranks_label
from advisor_chat.diagnosis.rules.common import env_split
from advisor_chat.diagnosis.types import Remedy, RootCause

#: Culprit kinds the split is looked for on (a set of ranks that is not the whole job).
RANK_KINDS = ("rank", "ranks", "group", "stage", "node")

#: Variables that change how the runtime, the framework, the collectives or the host threads run:
#: a split of one of them is acted on first.
PERF_VARIABLES = re.compile(
    r"^(?:HCCL_|ASCEND_|ACL_|GE_|TE_|HCCS|TASK_QUEUE_ENABLE|PYTORCH_|TORCH_|NPU_|CPU_AFFINITY|"
    r"OMP_|MKL_|OPENBLAS_|KMP_|GOMP_|MALLOC_|LD_PRELOAD|INF_NAN_MODE|MS_|MINDSPORE_|COMBINED_)"
)

#: At most this many variables are named per cause.
MAX_VARIABLES = 2


def _value(v: str, zh: bool) -> str:
    return v if v else ("未设置" if zh else "unset")


def rule_env_split(ctx: Context, causes: list[RootCause]) -> list[RootCause]:
    """Add the environment split of each rank-set culprit to its cause (see the module docstring).

    Args:
        ctx: The rules' context (``meta.env``, the findings).
        causes: The causes every blame rule produced.

    Returns:
        The same causes, those with a split carrying it in ``summary`` / ``summary_zh``, a
        remedy, ``metrics['env_variables_split']`` (count) and the ``env_check`` finding.
    """
    everyone = set(ctx.ranks)
    differs = ctx.finding("env_check.env.differs_across_ranks")
    out: list[RootCause] = []
    for c in causes:
        ranks = set(c.culprit.ranks)
        if c.culprit.kind not in RANK_KINDS or not ranks or not ranks < everyone:
            out.append(c)
            continue
        named = c.summary + " " + " ".join(r.text for r in c.remedies)
        split = [e for e in env_split(ctx, sorted(ranks)) if e[0] not in named][:MAX_VARIABLES]
        if not split:
            out.append(c)
            continue
        rl, rl_zh = ranks_label(ranks)
        en = "; ".join(
            f"{k} is {_value(v, False)} on {rl} and {_value(o, False)} on every other rank"
            for k, v, o in split
        )
        zh = "；".join(
            f"{k} 在{rl_zh}上为 {_value(v, True)}，其他各卡为 {_value(o, True)}"
            for k, v, o in split
        )
        src = "profiler_metadata.json ENV_VARIABLES"
        perf = any(PERF_VARIABLES.match(k) for k, _, _ in split)
        sets = ", ".join(f"{k}={o}" if o else f"unset {k}" for k, _, o in split)
        sets_zh = "，".join(f"{k}={o}" if o else f"取消 {k}" for k, _, o in split)
        if perf:
            remedy = Remedy(
                "action",
                f"Set the environment of {rl} as on the other ranks ({sets}): only the culprit "
                f"runs with {', '.join(f'{k}={_value(v, False)}' for k, v, _ in split)} ({src}).",
                f"把{rl_zh}的环境变量设成与其他卡一致（{sets_zh}）：只有它们设置了"
                f"{'，'.join(f'{k}={_value(v, True)}' for k, v, _ in split)}（{src}）。",
                gain_us=c.gain_us,
                bound=c.bound,
            )
            remedies = (remedy, *c.remedies)
        else:
            remedy = Remedy(
                "check",
                f"Check why {rl} run with another {', '.join(k for k, _, _ in split)} than the "
                f"other ranks ({src}).",
                f"检查为什么{rl_zh}的 {'、'.join(k for k, _, _ in split)} 与其他卡不同（{src}）。",
            )
            actions = tuple(r for r in c.remedies if r.kind == "action")
            remedies = (*actions, remedy, *(r for r in c.remedies if r.kind != "action"))
        ctx.claimed.update(f.id for f in differs)
        out.append(
            dataclasses.replace(
                c,
                summary=f"{c.summary.rstrip('.')}; {en} ({src})",
                summary_zh=f"{c.summary_zh.rstrip('。')}；{zh}（{src}）。",
                remedies=remedies,
                metrics={**c.metrics, "env_variables_split": float(len(split))},
                findings=(*c.findings, *(f for f in differs if f not in c.findings)),
            )
        )
    return out
