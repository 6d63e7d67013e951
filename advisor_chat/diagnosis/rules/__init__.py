"""Blame rules: each turns analyzer tables and findings into root causes (issue 12, DESIGN.md §4b).

Every rule is one function ``rule_x(ctx) -> list[RootCause]`` whose docstring states the rule and
its thresholds. Times are µs per step; "own time" of a rank is Computing + Free (time it spends
on its own, not waiting for peers in collectives). A rank's "exposed communication" is
Communication (Not Overlapped and Exclude Receive) from ``step_trace``. Victims of a late rank lose
the difference between their exposed communication and the late rank's (collective wait), capped by
the late rank's excess: that is the time they spend waiting for it.

One module per mechanism: ``artifact``, ``pipeline``, ``slow_link``, ``stragglers`` (late ranks,
groups, one-step events), ``attributed`` (culprits from the wait attribution), ``degradation``,
``job`` (job idle, exposed communication, hotspot), ``group_layout`` (groups of one kind
straddling nodes), ``env_split`` (a setting only the culprit's ranks have, added to any
cause), ``clock`` (every rank below its rated
AI Core clock), ``network_steps`` (a transport slow on every
link in some steps), ``regression``; shared thresholds and helpers
in ``common``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisor_chat.analyzers._common import missing_ranks
    from advisor_chat.diagnosis.rules.accumulation import rule_unfused_accumulation
    from advisor_chat.diagnosis.rules.artifact import artifact_cause, detect_artifact_steps
    from advisor_chat.diagnosis.rules.attributed import covered_ranks, rule_attributed
    from advisor_chat.diagnosis.rules.capture import rule_capture
    from advisor_chat.diagnosis.rules.clock import rule_job_clock
    from advisor_chat.diagnosis.rules.common import (
        BUBBLE_MIN_MARGIN,
        BUBBLE_MIN_SHARE,
        BUBBLE_TARGET_SHARE,
        EVENT_MIN_SHARE,
        EVENT_MIN_STEPS,
        EXPOSED_MIN_SHARE,
        GROUP_GAP_VS_SPREAD,
        GROUP_MIN_GAP_SHARE,
        IDLE_MIN_SHARE,
        MANY_COLLECTIVES,
        MIN_RANKS,
        PERSISTENT_STEP_SHARE,
        SMALL_TIME_SHARE,
        STRAGGLER_MIN_SHARE,
        VICTIM_MIN_SHARE,
        Event,
        PresenceScope,
        arrival_measured,
        find_events,
        host_evidence,
        host_measured,
        host_timeline,
        layered_victims,
        op_delta,
        presence_scope,
        spreads_text,
        wait_victims,
    )
    from advisor_chat.diagnosis.rules.degradation import rule_degradation
    from advisor_chat.diagnosis.rules.env_split import rule_env_split
    from advisor_chat.diagnosis.rules.group_layout import rule_groups_straddling_nodes
    from advisor_chat.diagnosis.rules.job import (
        rule_exposed_communication,
        rule_job_hotspot,
        rule_job_idle,
    )
    from advisor_chat.diagnosis.rules.lowrank import rule_low_rank_adapters
    from advisor_chat.diagnosis.rules.network_steps import rule_slow_transport, rule_transport_steps
    from advisor_chat.diagnosis.rules.pipeline import rule_pipeline
    from advisor_chat.diagnosis.rules.precision import rule_fp32_compute
    from advisor_chat.diagnosis.rules.recompute import rule_recompute
    from advisor_chat.diagnosis.rules.regression import rule_regression
    from advisor_chat.diagnosis.rules.skipped import rule_skipped_updates
    from advisor_chat.diagnosis.rules.slow_link import (
        rule_cross_host_group_links,
        rule_group_across_nodes,
        rule_intra_node_off_hccs,
        rule_node_send_links,
        rule_slow_link,
        rule_slow_node_links,
    )
    from advisor_chat.diagnosis.rules.stepwork import rule_slow_steps
    from advisor_chat.diagnosis.rules.stragglers import hccl_timeouts_s, rule_stragglers_and_events

_WHERE: dict[str, str] = {
    "BUBBLE_MIN_MARGIN": "advisor_chat.diagnosis.rules.common",
    "BUBBLE_MIN_SHARE": "advisor_chat.diagnosis.rules.common",
    "BUBBLE_TARGET_SHARE": "advisor_chat.diagnosis.rules.common",
    "EVENT_MIN_SHARE": "advisor_chat.diagnosis.rules.common",
    "EVENT_MIN_STEPS": "advisor_chat.diagnosis.rules.common",
    "EXPOSED_MIN_SHARE": "advisor_chat.diagnosis.rules.common",
    "Event": "advisor_chat.diagnosis.rules.common",
    "GROUP_GAP_VS_SPREAD": "advisor_chat.diagnosis.rules.common",
    "GROUP_MIN_GAP_SHARE": "advisor_chat.diagnosis.rules.common",
    "IDLE_MIN_SHARE": "advisor_chat.diagnosis.rules.common",
    "MANY_COLLECTIVES": "advisor_chat.diagnosis.rules.common",
    "MIN_RANKS": "advisor_chat.diagnosis.rules.common",
    "PERSISTENT_STEP_SHARE": "advisor_chat.diagnosis.rules.common",
    "PresenceScope": "advisor_chat.diagnosis.rules.common",
    "SMALL_TIME_SHARE": "advisor_chat.diagnosis.rules.common",
    "STRAGGLER_MIN_SHARE": "advisor_chat.diagnosis.rules.common",
    "VICTIM_MIN_SHARE": "advisor_chat.diagnosis.rules.common",
    "arrival_measured": "advisor_chat.diagnosis.rules.common",
    "artifact_cause": "advisor_chat.diagnosis.rules.artifact",
    "covered_ranks": "advisor_chat.diagnosis.rules.attributed",
    "detect_artifact_steps": "advisor_chat.diagnosis.rules.artifact",
    "find_events": "advisor_chat.diagnosis.rules.common",
    "hccl_timeouts_s": "advisor_chat.diagnosis.rules.stragglers",
    "host_evidence": "advisor_chat.diagnosis.rules.common",
    "host_measured": "advisor_chat.diagnosis.rules.common",
    "host_timeline": "advisor_chat.diagnosis.rules.common",
    "layered_victims": "advisor_chat.diagnosis.rules.common",
    "missing_ranks": "advisor_chat.analyzers._common",
    "op_delta": "advisor_chat.diagnosis.rules.common",
    "presence_scope": "advisor_chat.diagnosis.rules.common",
    "rule_attributed": "advisor_chat.diagnosis.rules.attributed",
    "rule_capture": "advisor_chat.diagnosis.rules.capture",
    "rule_cross_host_group_links": "advisor_chat.diagnosis.rules.slow_link",
    "rule_degradation": "advisor_chat.diagnosis.rules.degradation",
    "rule_env_split": "advisor_chat.diagnosis.rules.env_split",
    "rule_exposed_communication": "advisor_chat.diagnosis.rules.job",
    "rule_fp32_compute": "advisor_chat.diagnosis.rules.precision",
    "rule_group_across_nodes": "advisor_chat.diagnosis.rules.slow_link",
    "rule_groups_straddling_nodes": "advisor_chat.diagnosis.rules.group_layout",
    "rule_intra_node_off_hccs": "advisor_chat.diagnosis.rules.slow_link",
    "rule_job_clock": "advisor_chat.diagnosis.rules.clock",
    "rule_job_hotspot": "advisor_chat.diagnosis.rules.job",
    "rule_job_idle": "advisor_chat.diagnosis.rules.job",
    "rule_low_rank_adapters": "advisor_chat.diagnosis.rules.lowrank",
    "rule_node_send_links": "advisor_chat.diagnosis.rules.slow_link",
    "rule_pipeline": "advisor_chat.diagnosis.rules.pipeline",
    "rule_recompute": "advisor_chat.diagnosis.rules.recompute",
    "rule_regression": "advisor_chat.diagnosis.rules.regression",
    "rule_skipped_updates": "advisor_chat.diagnosis.rules.skipped",
    "rule_slow_link": "advisor_chat.diagnosis.rules.slow_link",
    "rule_slow_node_links": "advisor_chat.diagnosis.rules.slow_link",
    "rule_slow_steps": "advisor_chat.diagnosis.rules.stepwork",
    "rule_slow_transport": "advisor_chat.diagnosis.rules.network_steps",
    "rule_stragglers_and_events": "advisor_chat.diagnosis.rules.stragglers",
    "rule_transport_steps": "advisor_chat.diagnosis.rules.network_steps",
    "rule_unfused_accumulation": "advisor_chat.diagnosis.rules.accumulation",
    "spreads_text": "advisor_chat.diagnosis.rules.common",
    "wait_victims": "advisor_chat.diagnosis.rules.common",
}
"""The module each exported name lives in (imported on first use: a cached ``ask`` that only
reads a stored diagnosis never loads the rules)."""

__all__ = [
    "BUBBLE_MIN_MARGIN",
    "BUBBLE_MIN_SHARE",
    "BUBBLE_TARGET_SHARE",
    "EVENT_MIN_SHARE",
    "EVENT_MIN_STEPS",
    "EXPOSED_MIN_SHARE",
    "GROUP_GAP_VS_SPREAD",
    "GROUP_MIN_GAP_SHARE",
    "IDLE_MIN_SHARE",
    "MANY_COLLECTIVES",
    "MIN_RANKS",
    "PERSISTENT_STEP_SHARE",
    "SMALL_TIME_SHARE",
    "STRAGGLER_MIN_SHARE",
    "VICTIM_MIN_SHARE",
    "Event",
    "PresenceScope",
    "arrival_measured",
    "artifact_cause",
    "covered_ranks",
    "detect_artifact_steps",
    "find_events",
    "hccl_timeouts_s",
    "host_evidence",
    "host_measured",
    "host_timeline",
    "layered_victims",
    "missing_ranks",
    "op_delta",
    "presence_scope",
    "rule_attributed",
    "rule_capture",
    "rule_cross_host_group_links",
    "rule_degradation",
    "rule_env_split",
    "rule_exposed_communication",
    "rule_fp32_compute",
    "rule_group_across_nodes",
    "rule_groups_straddling_nodes",
    "rule_intra_node_off_hccs",
    "rule_job_clock",
    "rule_job_hotspot",
    "rule_job_idle",
    "rule_low_rank_adapters",
    "rule_node_send_links",
    "rule_pipeline",
    "rule_recompute",
    "rule_regression",
    "rule_skipped_updates",
    "rule_slow_link",
    "rule_slow_node_links",
    "rule_slow_steps",
    "rule_slow_transport",
    "rule_stragglers_and_events",
    "rule_transport_steps",
    "rule_unfused_accumulation",
    "spreads_text",
    "wait_victims",
]


def __getattr__(name: str) -> Any:
    """Import the rule module that defines ``name`` on first use (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
