"""Test doubles for the agent layer: a scripted chat model and a tiny known-answer profile.

- :class:`ScriptedChatModel`: a LangChain fake chat model that replays scripted ``AIMessage`` s
  (tool calls, then a final answer) and supports ``bind_tools`` (LangChain's fakes do not).
- :func:`tiny_profile` / :func:`tiny_registry`: a 4-rank profile whose rank 3 has planted extra
  Free time, and three small analyzers over it, so agent tests do not depend on other layers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from pydantic import Field

from advisor_chat.analyzers.base import (
    AnalyzerResult,
    AnalyzerSpec,
    Category,
    Evidence,
    Finding,
    FindingKind,
    Params,
    Severity,
)
from advisor_chat.errors import ToolArgumentError
from advisor_chat.ingest.profile import Profile, TableSource
from advisor_chat.kb.types import CaseHit


class ScriptedChatModel(GenericFakeChatModel):
    """Replays ``messages`` in order; ``bind_tools`` returns the model itself.

    Attributes:
        seen: The message lists the model was called with (one entry per call).
    """

    seen: list[list[Any]] = Field(default_factory=list)

    def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        """Accept tools (the script already knows which to call)."""
        return self


def scripted(messages: Iterable[AIMessage]) -> ScriptedChatModel:
    """A :class:`ScriptedChatModel` over ``messages``."""
    return ScriptedChatModel(messages=iter(list(messages)))


def tool_call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    """An ``AIMessage`` that calls tool ``name`` with ``args``."""
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}]
    )


SLOW_RANK = 3
BASE_FREE_US = 800.0
EXTRA_FREE_US = 4200.0
COMPUTING_US = 20000.0
COMM_US = 3000.0


def tiny_profile(op_name: str = "MatMulV2", root: str = "/data/prof") -> Profile:
    """4 ranks × 3 steps; rank 3 has ``EXTRA_FREE_US`` more Free per step than the others.

    Tables: ``step_trace`` (computing/comm/free/step) and ``kernels`` (one op per rank and step
    named ``op_name``; its duration is ``COMPUTING_US``).
    """
    rows = []
    krows = []
    for r in range(4):
        for s in range(1, 4):
            free = BASE_FREE_US + (EXTRA_FREE_US if r == SLOW_RANK else 0.0)
            comm = COMM_US if r == SLOW_RANK else COMM_US + EXTRA_FREE_US
            rows.append(
                {
                    "rank": r,
                    "step": s,
                    "computing_us": COMPUTING_US,
                    "communication_not_overlapped_us": comm,
                    "free_us": free,
                    "stage_us": COMPUTING_US + comm + free,
                }
            )
            krows.append(
                {
                    "rank": r,
                    "step": s,
                    "name": op_name,
                    "op_type": "MatMulV2",
                    "duration_us": COMPUTING_US,
                }
            )
    st = pd.DataFrame(rows)
    return Profile(
        root=Path(root),
        layout="synthetic",
        tables={"step_trace": st, "kernels": pd.DataFrame(krows)},
        sources={
            "step_trace": [
                TableSource(
                    "step_trace", f"{root}/rank_{r}_ascend_pt/step_trace_time.csv", "text", r
                )
                for r in range(4)
            ]
        },
    )


class RankParams(Params):
    """Parameters of the tiny ``explain_rank``."""

    rank: int = Field(description="Rank to explain (global rank id)")
    step: int | None = Field(None, description="Step id; default all steps")


class GroupParams(Params):
    """Parameters of the tiny ``slow_rank``."""

    group: str | None = Field(None, description="Communication group; default all")
    step: int | None = Field(None, description="Step id; default all steps")


class NoParams(Params):
    """No parameters."""


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _explain_rank(profile: Profile, params: RankParams, **_: Any) -> AnalyzerResult:
    """Explain why one rank is slow: its Free, Computing and communication vs the median."""
    st = profile.get("step_trace")
    if params.rank not in profile.ranks:
        raise ToolArgumentError(f"rank {params.rank} does not exist")
    per = st.groupby("rank")[["free_us", "computing_us", "communication_not_overlapped_us"]].mean()
    med_free = _median(list(per["free_us"]))
    free = float(per["free_us"][params.rank])
    delta = free - med_free
    table = pd.DataFrame(
        [
            {
                "component": c,
                "rank_us": float(per[c][params.rank]),
                "median_us": _median(list(per[c])),
            }
            for c in per.columns
        ]
    )
    table["delta_us"] = table["rank_us"] - table["median_us"]
    findings = []
    names = sorted(profile.get("kernels")["name"].unique()) if profile.has("kernels") else []
    if delta > 0.05 * float(st["stage_us"].median()):
        findings.append(
            Finding(
                id=f"explain_rank.host_bound.r{params.rank}",
                kind=FindingKind.HOST_BOUND,
                severity=Severity.HIGH,
                summary=(
                    f"Rank {params.rank} has {delta / 1000:.2f} ms more Free per step than the median "
                    f"({free / 1000:.2f} ms vs {med_free / 1000:.2f} ms); top op {names[0] if names else '-'}"
                ),
                summary_zh=(
                    f"{params.rank}号卡 每步 Free 比中位数多 {delta / 1000:.2f} ms"
                    f"（{free / 1000:.2f} ms 对 {med_free / 1000:.2f} ms）"
                ),
                ranks=(params.rank,),
                metrics={"free_us": free, "median_free_us": med_free, "free_delta_us": delta},
                evidence=(Evidence("step_trace", profile.cite("step_trace", params.rank)),),
                symptom_tags=("host_bound", "high_free"),
                estimated_gain_us=delta,
                category=Category.SCHEDULING,
            )
        )
    return AnalyzerResult("explain_rank", table, {"free_delta_us": delta}, tuple(findings))


def _slow_rank(profile: Profile, params: GroupParams, **_: Any) -> AnalyzerResult:
    """Find the rank the others wait for (least non-overlapped communication = arrived last)."""
    st = profile.get("step_trace")
    per = st.groupby("rank")["communication_not_overlapped_us"].mean()
    slow = int(per.idxmin())  # type: ignore[call-overload]
    others = float(per.drop(slow).mean())
    table = per.rename("comm_not_overlapped_us").reset_index()
    f = Finding(
        id=f"slow_rank.slow_rank.r{slow}",
        kind=FindingKind.SLOW_RANK,
        severity=Severity.HIGH,
        summary=(
            f"Rank {slow} arrives last at collectives: the other ranks wait {(others - float(per[slow])) / 1000:.2f} ms "
            f"more per step in communication"
        ),
        summary_zh=f"{slow}号卡 最晚到达集合通信：其他卡每步多等待 {(others - float(per[slow])) / 1000:.2f} ms",
        ranks=(slow,),
        metrics={"wait_excess_us": others - float(per[slow])},
        evidence=(Evidence("step_trace", profile.cite("step_trace")),),
        symptom_tags=("slow_rank", "comm_wait_high"),
    )
    return AnalyzerResult("slow_rank", table, {}, (f,))


def _breakdown(profile: Profile, params: NoParams, **_: Any) -> AnalyzerResult:
    """Per-rank step breakdown (Computing, Communication (Not Overlapped), Free)."""
    st = profile.get("step_trace")
    per = st.groupby("rank")[["computing_us", "communication_not_overlapped_us", "free_us"]].mean()
    return AnalyzerResult("cluster_breakdown", per.reset_index(), {"ranks": float(len(per))}, ())


def tiny_registry() -> dict[str, AnalyzerSpec[Any]]:
    """A registry of three small analyzers over :func:`tiny_profile` (not the global one)."""
    return {
        "cluster_breakdown": AnalyzerSpec(
            "cluster_breakdown", _breakdown, NoParams, "Per-rank step breakdown.", order=10
        ),
        "slow_rank": AnalyzerSpec(
            "slow_rank", _slow_rank, GroupParams, "Find the rank the others wait for.", order=20
        ),
        "explain_rank": AnalyzerSpec(
            "explain_rank", _explain_rank, RankParams, "Explain why one rank is slow.", order=30
        ),
    }


def fake_case_search(
    query: str, symptom_tags: Sequence[str] | None = None, k: int = 5
) -> list[CaseHit]:
    """A deterministic case search: one host-dispatch case when the tags say host-bound."""
    tags = set(symptom_tags or ())
    hits = []
    if tags & {"host_bound", "high_free"} or "slow" in query.lower() or "慢" in query:
        hits.append(
            CaseHit(
                id="host-dispatch-bound",
                title="Device idle because the host dispatches too slowly",
                title_zh="主机下发慢导致设备空闲",
                score=1.0,
                section="",
                source="knowledge/cases/host-dispatch-bound.md",
                remedies=("Set TASK_QUEUE_ENABLE=2 to use the two-level dispatch pipeline",),
                expected_effect="Free drops to the level of the other ranks",
                symptom_tags=("host_bound", "high_free"),
                matched_tags=tuple(sorted(tags & {"host_bound", "high_free"})),
            )
        )
    return hits[:k]


def tiny_diagnosis(profile: Profile, *, baseline: Profile | None = None) -> Any:
    """The diagnosis of :func:`tiny_profile`, by construction (a ``diagnose`` stand-in).

    Rank 3 is the culprit of a host stall: ``EXTRA_FREE_US`` more Free per step than the
    others; ranks 0-2 are its victims, waiting ``EXTRA_FREE_US`` per step at the collectives
    (their communication time is planted that much higher). Gain: ``EXTRA_FREE_US`` (estimate).
    """
    from advisor_chat.diagnosis.types import (
        BoundKind,
        Culprit,
        Diagnosis,
        Impact,
        Mechanism,
        Remedy,
        RootCause,
    )

    del baseline
    step_us = COMPUTING_US + COMM_US + EXTRA_FREE_US + BASE_FREE_US
    victims = tuple(
        Impact(r, EXTRA_FREE_US, EXTRA_FREE_US / step_us, "collective_wait")
        for r in range(4)
        if r != SLOW_RANK
    )
    ms = EXTRA_FREE_US / 1000
    finding = _explain_rank(profile, RankParams(rank=SLOW_RANK, step=None)).findings[0]
    cause = RootCause(
        id=f"cause.host_stall.r{SLOW_RANK}",
        mechanism=Mechanism.HOST_STALL,
        category=Category.SCHEDULING,
        culprit=Culprit(
            "rank", (SLOW_RANK,), label=f"rank {SLOW_RANK}", label_zh=f"{SLOW_RANK}号卡"
        ),
        victims=victims,
        summary=f"rank {SLOW_RANK} idles {ms:.1f} ms more per step than its peers (Free), "
        "so the other ranks wait for it at the collectives",
        summary_zh=f"{SLOW_RANK}号卡每步比其他卡多空闲 {ms:.1f} ms（Free），其他卡在集合通信中等待它",
        metrics={"free_excess_us": EXTRA_FREE_US},
        findings=(finding,),
        gain_us=EXTRA_FREE_US,
        bound=BoundKind.ESTIMATE,
        remedies=(
            Remedy(
                "action",
                "Set TASK_QUEUE_ENABLE=2 on the host of the slow rank",
                "在慢卡所在的主机上设置 TASK_QUEUE_ENABLE=2",
                gain_us=EXTRA_FREE_US,
                bound=BoundKind.ESTIMATE,
            ),
            Remedy(
                "check",
                "See what the host does while the device idles",
                "排查设备空闲时主机在做什么",
            ),
        ),
        symptom_tags=("host_bound", "high_free"),
        dominant=f"host-bound ({ms:.1f} ms more Free per step)",
        dominant_zh=f"主机侧瓶颈（每步多 {ms:.1f} ms 空闲）",
        severity=Severity.HIGH,
        own=(Impact(SLOW_RANK, EXTRA_FREE_US, EXTRA_FREE_US / step_us, "own_time"),),
    )
    return Diagnosis(
        causes=(cause,),
        other_findings=(),
        excluded_steps=(),
        ranks=tuple(profile.ranks),
        steps=tuple(profile.steps),
        step_time_us=step_us,
        shares={
            "computing": COMPUTING_US / step_us,
            "communication_not_overlapped": (COMM_US + EXTRA_FREE_US) / step_us,
            "free": BASE_FREE_US / step_us,
        },
        headline=f"Rank {SLOW_RANK} holds the job back: its host stalls ({ms:.1f} ms more Free per step).",
        headline_zh=f"{SLOW_RANK}号卡拖慢了作业：主机侧停顿（每步多 {ms:.1f} ms 空闲）。",
    )
