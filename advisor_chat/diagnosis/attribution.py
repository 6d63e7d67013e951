"""Wait attribution from the collectives: who waits for whom, for how long, and what it costs the job.

Every collective instance (one ``(group, op_name, step)`` of ``comm_ops``; send/receive pairs that
run together count as one instance, see :func:`p2p_waits`) has an arrival order over its ranks, read from their Wait Time: a rank that arrives ``d`` µs
before the last one waits ``d`` µs more than it, so the rank with the least wait arrived last
(ascend-formats.md §2.6). Per instance:

- the **late arriver** is the rank with the least wait;
- its **cost** is the wait of the second-least-waiting rank minus its own: had it arrived with
  the next-latest rank, the collective, and every member's step, would have finished that much
  earlier. That is also what each of its victims loses to it, so a culprit's cost and its
  victims' loss are one number measured one way;
- a **unit** of ranks (a rank, a node, a communication group, a pipeline stage) costs
  ``min(wait outside the unit) - min(wait)`` when its latest member arrives after every rank
  outside it.

Independent culprits are found greedily (:func:`attribute`): the unit that costs the job the
most is taken, the instances are re-timed as if it had arrived on time (every wait reduced by
its cost, floored at zero), and the next unit is looked for in what is left, so nothing is
counted twice and the causes come out ranked by what they cost. A rank-level culprit is preferred
over the node / group that contains it when it alone explains most of the unit's cost.

Nodes come from the data only: components of the ranks joined by on-node links (HCCS / SIO) in
``comm_matrix``; ranks are never grouped by a guessed ranks-per-node.

Source: ``comm_ops`` Wait Time (``communication.json`` / ``analysis.db`` CommAnalyzerTime /
``cluster_communication.json``), ms converted to µs; ``comm_matrix`` transports for nodes;
``comm_groups`` for groups.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from advisor_chat.analyzers._common import groups_table, is_p2p
from advisor_chat.ingest.profile import Profile

#: A culprit must cost at least this share of the median step per step to be listed (the rules
#: decide what is material; rotating late ranks are each small).
MIN_COST_SHARE = 0.005
#: A rank inside a larger unit is the culprit when it alone explains at least this share of the
#: unit's cost; otherwise the unit is.
RANK_EXPLAINS_UNIT = 0.7
#: One instance whose cost is at least this many times the median step (and at least
#: ``EVENT_MIN_US``) is a single large late arrival (an event).
EVENT_STEP_MULTIPLE = 2.0
EVENT_MIN_US = 500_000.0
#: At most this many independent culprits.
MAX_CULPRITS = 6
#: Ranks arrive late *together* at an instance when the jump in wait after them is at least this
#: share of the instance's wait span and their own spread at most ``CO_LATE_SPREAD`` of that jump
#: (a set the topology does not name: one device of every node, ranks sharing a host resource).
CO_LATE_JUMP = 0.5
CO_LATE_SPREAD = 1.0
#: ... in at least this share of the material instances (wait span at least
#: ``CO_LATE_MATERIAL`` of the largest instance's), for the set to be a unit: instances whose
#: ranks all arrive together (a tiny closing all-reduce) say nothing about who is late.
CO_LATE_INSTANCES = 0.5
CO_LATE_MATERIAL = 0.25
#: ... and none of them the latest of the set in this share of those instances (ranks late
#: together take turns; ranks late by their own different amounts arrive in a fixed order).
CO_LATE_ORDERED = 0.9
#: Transports of links inside one node (Atlas HCCS mesh, SIO between dies).
ON_NODE = ("HCCS", "SIO")


@dataclass(frozen=True)
class Unit:
    """A set of ranks the data reveals as one physical or logical thing.

    Attributes:
        kind: ``rank``, ``node``, ``group`` (communication group), ``stage`` or ``ranks``
            (ranks that arrive late together, see :func:`co_late_units`).
        name: ``rank 3``, ``node 1``, the group's name or hash, ``stage 0``.
        ranks: Sorted global ranks.
    """

    kind: str
    name: str
    ranks: tuple[int, ...]
    name_zh: str = ""


@dataclass(frozen=True)
class LateEvent:
    """One very large late arrival at one collective.

    Attributes:
        step: Step id.
        group: Communication group hash.
        op_name: The collective.
        culprit: The late rank.
        cost_us: What it cost that collective (µs).
        victims: Ranks that waited for it (wait above the culprit's by ≥ half the cost).
        max_wait_us: The longest wait of a victim (µs).
    """

    step: int
    group: str
    op_name: str
    culprit: int
    cost_us: float
    victims: tuple[int, ...]
    max_wait_us: float


@dataclass(frozen=True)
class CulpritCost:
    """One independent culprit and what it costs the job.

    Attributes:
        unit: The culprit unit.
        cost_us_per_step: Job time lost per captured step (µs): sum of its instance costs / steps.
        cost_us_by_step: ``{step: µs}`` of that cost.
        instances: Collective instances where it arrived last.
        victims: ``{rank: µs per step}`` each other rank lost waiting for it (≤ the cost).
        order: 1 for the most costly culprit, then 2, ...; costs of later culprits are measured
            after the earlier ones are re-timed as on time.
        members_cost_us: For node/group units: ``{rank: µs per step}`` of the members alone.
    """

    unit: Unit
    cost_us_per_step: float
    cost_us_by_step: dict[int, float]
    instances: int
    victims: dict[int, float]
    order: int
    members_cost_us: dict[int, float] = field(default_factory=dict)

    @property
    def steps_hit(self) -> tuple[int, ...]:
        """Steps where it cost at least a tenth of its largest step cost."""
        if not self.cost_us_by_step:
            return ()
        top = max(self.cost_us_by_step.values())
        return tuple(sorted(s for s, v in self.cost_us_by_step.items() if v >= 0.1 * top))


@dataclass(frozen=True)
class WaitAttribution:
    """The account of collective waiting for one profile.

    Attributes:
        instances: One row per collective instance: ``group, op_name, step, ranks_count,
            late_rank, cost_us, max_wait_us``.
        culprits: Independent culprits, most costly first.
        events: Single very large late arrivals, largest first.
        steps_count: Steps with collectives.
        total_wait_us_per_step: Mean over ranks of the wait per step (µs): what the ranks spend
            waiting in collectives in all.
        units: Every unit the data reveals (nodes, groups, stages) besides single ranks.
        waits: Per instance, its ranks and their Wait Time (µs) as measured (before any culprit
            is re-timed), for :meth:`fix_alone_us`.
    """

    instances: pd.DataFrame
    culprits: tuple[CulpritCost, ...]
    events: tuple[LateEvent, ...]
    steps_count: int
    total_wait_us_per_step: float
    units: tuple[Unit, ...]
    waits: tuple[tuple[np.ndarray, np.ndarray], ...] = ()

    def fix_alone_us(self, ranks: set[int] | frozenset[int]) -> float:
        """µs per step the job would gain if these ranks alone arrived on time now.

        Per instance ``min(wait outside) - min(wait)`` when one of them arrived last (as
        :func:`_cost`), on the measured waits, with every other culprit still late, summed per
        rank over the instances it is in; the largest rank's sum (:meth:`loss_by_rank`): the saving of
        fixing this culprit first. The culprits' ``cost_us_per_step`` instead partition the waiting
        (each measured after the earlier ones are re-timed) and sum without double counting; this
        is the measure to rank independent faults by what fixing each one gives.
        """
        lost = self.loss_by_rank(ranks)
        return max(lost.values(), default=0.0)

    def loss_by_rank(self, ranks: set[int] | frozenset[int]) -> dict[int, float]:
        """``{rank: µs per step}`` each rank's collectives lose to ``ranks`` arriving last.

        Per instance the cost of ``ranks`` (:func:`_cost`, on the measured waits) is what every
        member of that instance, the late ranks included, loses; a rank's loss is the sum over the
        instances it is in. Instances of parallel groups (the data-parallel group of each tensor
        rail) run at the same time, so the job loses the largest rank's loss, not their sum.
        Ranks that lose nothing are left out.
        """
        members = list(ranks)
        hit: list[np.ndarray] = []
        cost: list[np.ndarray] = []
        for rs, ws in self.waits:
            c = _cost(ws, np.isin(rs, members))
            if c > 0:
                hit.append(rs.astype(np.int64))
                cost.append(np.full(len(rs), c))
        if not hit:
            return {}
        rs_all = np.concatenate(hit)
        sums = np.bincount(rs_all, weights=np.concatenate(cost)) / max(self.steps_count, 1)
        return {int(r): float(sums[r]) for r in np.unique(rs_all)}

    def culprit_of(self, rank: int) -> CulpritCost | None:
        """The culprit entry whose unit holds ``rank``, if any."""
        return next((c for c in self.culprits if rank in c.unit.ranks), None)


def nodes(profile: Profile) -> list[tuple[int, ...]]:
    """Nodes (hosts) as components of ranks joined by on-node links in ``comm_matrix``.

    Returns the components (sorted tuples, by lowest rank) when there are at least two and every
    rank of the matrix is in one; ``[]`` when the matrix is missing or shows one node.
    """
    comps = _components(profile)
    if len(comps) < 2 or any(len(c) < 2 for c in comps):
        return []
    return comps


def single_node(profile: Profile) -> bool:
    """Whether on-node links (``comm_matrix``) join every rank of the profile into one node."""
    comps = _components(profile)
    return len(comps) == 1 and len(comps[0]) >= 2 and set(comps[0]) >= set(profile.ranks)


def host_names(profile: Profile) -> dict[int, str]:
    """``{rank: hostname}`` from the rank folders' names (``meta.source_dir``).

    torch_npu names a rank folder ``{hostname}_{pid}_{timestamp}_ascend_pt``
    (:func:`~advisor_chat.ingest.detect.host_of_folder`); ranks whose folder was renamed or that
    come from cluster output are left out.
    """
    from advisor_chat.ingest.detect import host_of_folder

    meta = profile.get("meta")
    if meta.empty or not {"rank", "source_dir"} <= set(meta.columns):
        return {}
    out: dict[int, str] = {}
    for r, d in zip(meta["rank"], meta["source_dir"], strict=True):
        h = host_of_folder(str(d).rstrip("/\\")) if isinstance(d, str) and d else None
        if h is not None and pd.notna(r):
            out[int(r)] = h
    return out


@dataclass(frozen=True)
class HostGroup:
    """Nodes whose hostnames share every varying part but the last (a rack, a pod).

    Attributes:
        name: The hostnames' shared beginning (``gz-r07`` for ``gz-r07-npu01`` and ``gz-r07-npu02``).
        ranks: Sorted global ranks of its nodes.
        hosts: Its hostnames, sorted.
    """

    name: str
    ranks: tuple[int, ...]
    hosts: tuple[str, ...]


def host_groups(
    profile: Profile, node_list: list[tuple[int, ...]] | None = None
) -> list[HostGroup]:
    """Groups of nodes whose hostnames differ only in their last varying part (racks, pods).

    Hostnames split at ``-``, ``_`` and ``.``; the parts that vary between the nodes' names are
    found, and nodes are grouped by every varying part but the last (``gz-r07-npu01`` and
    ``gz-r07-npu02`` against ``gz-r08-npu01``: ``r07`` / ``r08``; ``10-0-1-5`` / ``10-0-2-7``:
    the third octet). Whether a group is a rack, a leaf switch or a pod the names do not say.
    Source: :func:`host_names` (rank folder names) and the nodes (:func:`nodes`).

    Returns:
        The groups, by lowest rank; ``[]`` unless every node has one hostname of the same shape
        and there are at least two groups, one of them with two nodes or more.
    """
    node_list = nodes(profile) if node_list is None else node_list
    names = host_names(profile)
    if len(node_list) < 3 or not names:
        return []
    hosts: list[str] = []
    for n in node_list:
        hs = {names.get(r) for r in n}
        if len(hs) != 1 or None in hs:
            return []
        hosts.append(str(next(iter(hs))))
    if len(set(hosts)) != len(hosts):
        return []
    parts = [re.split(r"([-_.])", h) for h in hosts]
    if len({len(p) for p in parts}) != 1:
        return []
    varying = [i for i in range(len(parts[0])) if len({p[i] for p in parts}) > 1]
    if len(varying) < 2:
        return []
    by: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, p in enumerate(parts):
        by[tuple(p[j] for j in varying[:-1])].append(i)
    if len(by) < 2 or len(by) == len(hosts):
        return []
    out = [
        HostGroup(
            "".join(parts[idx[0]][: varying[-1]]).rstrip("-_.") or hosts[idx[0]],
            tuple(sorted(r for i in idx for r in node_list[i])),
            tuple(sorted(hosts[i] for i in idx)),
        )
        for idx in by.values()
    ]
    return sorted(out, key=lambda g: g.ranks[0])


def _components(profile: Profile) -> list[tuple[int, ...]]:
    """Ranks of ``comm_matrix`` grouped by on-node links (sorted tuples, by lowest rank)."""
    m = profile.get("comm_matrix")
    if m.empty or "transport" not in m.columns:
        return []
    # a handful of distinct transports over up to 10^6 rows: match the distinct values only
    on_values = [v for v in pd.unique(m["transport"].dropna()) if str(v).upper() in ON_NODE]
    on = m[m["transport"].isin(on_values) & (m["src_rank"] != m["dst_rank"])]
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for r in pd.concat([m["src_rank"], m["dst_rank"]]).dropna().astype(int).unique():
        find(int(r))
    # one row per operator and link in the matrix: the distinct links are enough
    ab = on[["src_rank", "dst_rank"]].dropna().to_numpy(dtype=np.int64)
    if len(ab):
        base = int(ab.max()) + 1
        keys = np.unique(ab[:, 0] * base + ab[:, 1])  # one int per link: a 1-D unique is fast
        for a, b in zip((keys // base).tolist(), (keys % base).tolist(), strict=True):
            parent[find(int(a))] = find(int(b))
    comps: dict[int, list[int]] = defaultdict(list)
    for r in list(parent):
        comps[find(r)].append(r)
    return sorted((tuple(sorted(c)) for c in comps.values()), key=lambda c: c[0])


def _units(
    profile: Profile,
    stages: list[tuple[int, ...]],
    ranks: set[int],
    node_list: list[tuple[int, ...]] | None = None,
) -> list[Unit]:
    out: list[Unit] = []
    for i, n in enumerate(nodes(profile) if node_list is None else node_list):
        out.append(
            Unit("node", f"node {i} (ranks {n[0]}-{n[-1]})", n, f"节点 {i}（{n[0]}-{n[-1]}号卡）")
        )
    g = groups_table(profile)
    for grp, name, members in zip(g["group"], g["group_name"], g["ranks"], strict=True):
        rs = tuple(int(r) for r in members)
        if 1 < len(rs) < len(ranks):
            gname = str(name or grp)
            out.append(
                Unit(
                    "group",
                    f"communication group {gname} (ranks {rs[0]}-{rs[-1]})",
                    rs,
                    f"通信组 {gname}（{rs[0]}-{rs[-1]}号卡）",
                )
            )
    for i, s in enumerate(stages):
        if 1 < len(s) < len(ranks):
            out.append(
                Unit(
                    "stage",
                    f"stage {i} (ranks {s[0]}-{s[-1]})",
                    tuple(s),
                    f"流水线阶段 {i}（{s[0]}-{s[-1]}号卡）",
                )
            )
    seen: set[tuple[int, ...]] = set()
    uniq = []
    for u in out:
        if u.ranks not in seen:
            seen.add(u.ranks)
            uniq.append(u)
    return uniq


def co_late_units(
    inst: list[tuple[Any, np.ndarray, np.ndarray]], node_list: list[tuple[int, ...]]
) -> list[Unit]:
    """Sets of ranks that arrive late together, as units the topology does not name.

    Per instance of ≥ 4 ranks, the waits sorted ascending: the latest ``k`` ≥ 2 ranks (at most
    half) form a late set when the jump in wait after them is the largest of that half, at least
    ``CO_LATE_JUMP`` of the instance's wait span, and their own spread at most
    ``CO_LATE_SPREAD`` of the jump. A set late in ≥ ``CO_LATE_INSTANCES`` of the material
    instances (wait span ≥ ``CO_LATE_MATERIAL`` of the largest), none of its ranks the latest
    of the set in ``CO_LATE_ORDERED`` of them, is a
    unit (kind ``ranks``), named by the device it is on every node when it is one rank of each
    node at the same position ("device 0 of every node").
    """
    counts: dict[frozenset[int], int] = defaultdict(int)
    latest: dict[frozenset[int], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    n = 0
    spans = [float(ws.max() - ws.min()) for _, _, ws in inst if len(ws) >= 4]
    floor = CO_LATE_MATERIAL * max(spans, default=0.0)
    for _, rs, ws in inst:
        if len(ws) < 4:
            continue
        order = np.argsort(ws, kind="stable")
        w = ws[order]
        span = float(w[-1] - w[0])
        if span <= 0 or span < floor:
            continue
        n += 1
        gaps = np.diff(w[: len(w) // 2 + 1])
        k = int(np.argmax(gaps)) + 1
        jump = float(gaps[k - 1])
        if k < 2 or jump < CO_LATE_JUMP * span or float(w[k - 1] - w[0]) > CO_LATE_SPREAD * jump:
            continue
        key = frozenset(int(r) for r in rs[order[:k]])
        counts[key] += 1
        latest[key][int(rs[order[0]])] += 1
    out = []
    for members, c in sorted(counts.items(), key=lambda kv: -kv[1]):
        if c < CO_LATE_INSTANCES * n:
            break
        if max(latest[members].values()) >= CO_LATE_ORDERED * c:
            # one of them is the latest nearly every time: ranks late by different amounts of
            # their own (independent culprits), not late together
            continue
        out.append(ranks_unit(members, node_list))
    return out


def ranks_unit(members: Iterable[int], node_list: list[tuple[int, ...]]) -> Unit:
    """A set of ranks as a unit (kind ``ranks``), named by its device when that is the same on every node.

    One rank of each node at the same position: "device 0 of every node (ranks 0, 8)".
    """
    rs_t = tuple(sorted(int(r) for r in members))
    listed = ", ".join(str(r) for r in rs_t)
    where = [
        next((i for i, x in enumerate(nd) if x == r), -1)
        for nd in node_list
        for r in rs_t
        if r in nd
    ]
    one_each = (
        bool(node_list)
        and len(rs_t) == len(node_list)
        and all(sum(r in nd for r in rs_t) == 1 for nd in node_list)
    )
    if one_each and len(set(where)) == 1:
        name = f"device {where[0]} of every node (ranks {listed})"
        name_zh = f"每个节点的第 {where[0]} 号设备（{listed.replace(', ', '、')}号卡）"
    else:
        name = f"ranks {listed}"
        name_zh = f"{listed.replace(', ', '、')}号卡"
    return Unit("ranks", name, rs_t, name_zh)


def instance_waits(profile: Profile, stages: list[tuple[int, ...]] | None = None) -> pd.DataFrame:
    """Wait per rank of every collective instance (µs), point-to-point transfers included.

    A collective instance is one ``(group, op_name, step)``. Point-to-point transfers
    (send/receive, :func:`p2p_waits`) are paired and the pairs that run together (same step,
    direction, pipeline boundary and sequence number) form one instance, so a stage that is late
    to receive is seen as late once, not once per pair.

    Returns:
        Columns ``group, op_name, step, rank, wait_us``; one row per (instance, rank). Wait Time
        (``wait_ms``), Elapse Time when it is missing. Empty without ``comm_ops``.
    """
    ops = profile.get("comm_ops")
    cols = ["group", "op_name", "step", "rank", "wait_us"]
    if ops.empty:
        return pd.DataFrame(columns=cols)
    p2p_mask = is_p2p(ops["op_type"]) | (ops["comm_kind"].fillna("collective") == "p2p")
    coll = ops[~p2p_mask]
    w = coll["wait_ms"].where(coll["wait_ms"].notna(), coll["elapse_ms"])
    out = pd.DataFrame(
        {
            "group": coll["group"].astype(str),
            "op_name": coll["op_name"].astype(str),
            "step": coll["step"].fillna(-1).astype(int),
            "rank": coll["rank"].astype(int),
            "wait_us": pd.to_numeric(w, errors="coerce") * 1000.0,
        }
    )
    out = out[np.isfinite(out["wait_us"])]
    out = out.drop_duplicates(["group", "op_name", "step", "rank"])
    p2p = p2p_waits(ops[p2p_mask], stages or [])
    if not p2p.empty:
        out = pd.concat([out, p2p], ignore_index=True)
    return out.reset_index(drop=True)


def p2p_waits(ops: pd.DataFrame, stages: list[tuple[int, ...]]) -> pd.DataFrame:
    """Point-to-point transfers as instances: who was late to a send/receive pair.

    In a 2-rank group, the k-th send of rank ``a`` in a step (by start time) pairs with the k-th
    receive of rank ``b``; a pair needs both sides captured. A send waits until its receiver is
    ready and a receive until its sender is, so the side with the least wait arrived last, as in a
    collective. The pairs of one step, direction (toward higher or lower ranks), pipeline boundary
    (the stages of sender and receiver, when ``stages`` are known) and sequence number ``k`` run at
    the same time across the pipeline's groups and form one instance, named
    ``p2p <up|down> #k`` in group ``p2p <boundary>``.

    Args:
        ops: ``comm_ops`` rows of send/receive operators.
        stages: Pipeline stages (rank tuples), ``[]`` when unknown (one boundary assumed).

    Returns:
        Columns ``group, op_name, step, rank, wait_us`` (empty without complete pairs).
    """
    cols = ["group", "op_name", "step", "rank", "wait_us"]
    if ops.empty or "start_us" not in ops.columns:
        return pd.DataFrame(columns=cols)
    t = ops["op_type"].fillna("").astype(str).str.lower()
    role = np.where(t.str.contains("send"), "send", np.where(t.str.contains("rec"), "recv", ""))
    w = ops["wait_ms"].where(ops["wait_ms"].notna(), ops["elapse_ms"])
    df = pd.DataFrame(
        {
            "group": ops["group"].astype(str).to_numpy(),
            "rank": ops["rank"].astype(int).to_numpy(),
            "step": ops["step"].fillna(-1).astype(int).to_numpy(),
            "role": role,
            "start": pd.to_numeric(ops["start_us"], errors="coerce").to_numpy(dtype=float),
            "wait_us": pd.to_numeric(w, errors="coerce").to_numpy(dtype=float) * 1000.0,
        }
    )
    df = df[(df["role"] != "") & np.isfinite(df["wait_us"])]
    members = df.groupby("group")["rank"].agg(lambda x: tuple(sorted(set(x))))
    two = members[members.map(len) == 2]
    df = df[df["group"].isin(two.index)]
    if df.empty:
        return pd.DataFrame(columns=cols)
    lo = df["group"].map(lambda g: two[g][0]).to_numpy()
    hi = df["group"].map(lambda g: two[g][1]).to_numpy()
    peer = np.where(df["rank"].to_numpy() == lo, hi, lo)
    is_send = df["role"].to_numpy() == "send"
    df = df.assign(
        sender=np.where(is_send, df["rank"].to_numpy(), peer),
        receiver=np.where(is_send, peer, df["rank"].to_numpy()),
    )
    df = df.sort_values(["group", "step", "rank", "role", "start"], kind="stable")
    df["k"] = df.groupby(["group", "step", "rank", "role"]).cumcount()
    key = ["group", "step", "sender", "receiver", "k"]
    sides = df.groupby(key)["role"].transform("nunique")
    df = df[sides == 2].drop_duplicates([*key, "role"])
    if df.empty:
        return pd.DataFrame(columns=cols)
    stage_of = {r: i for i, s in enumerate(stages) for r in s}
    up = df["receiver"].to_numpy() > df["sender"].to_numpy()
    bound = [
        f"{stage_of.get(int(a), '?')}-{stage_of.get(int(b), '?')}" if stage_of else "pipeline"
        for a, b in zip(
            np.where(up, df["sender"], df["receiver"]),
            np.where(up, df["receiver"], df["sender"]),
            strict=True,
        )
    ]
    out = pd.DataFrame(
        {
            "group": [f"p2p {b}" for b in bound],
            "op_name": [
                f"p2p {'up' if u else 'down'} #{k}" for u, k in zip(up, df["k"], strict=True)
            ],
            "step": df["step"].to_numpy(),
            "rank": df["rank"].to_numpy(),
            "wait_us": df["wait_us"].to_numpy(),
        }
    )
    # a rank in two pairs of one instance (it cannot be: one side per boundary and direction)
    return out.drop_duplicates(["group", "op_name", "step", "rank"]).reset_index(drop=True)


def _cost(waits: np.ndarray, member: np.ndarray) -> float:
    """What a unit costs one instance: min wait outside minus min wait (0 when it is not last)."""
    if member.all() or not member.any():
        return 0.0
    return max(float(waits[~member].min() - waits.min()), 0.0)


def _scan(
    cur: list[tuple[tuple[str, str, int], np.ndarray, np.ndarray]],
    of_rank: dict[int, list[Unit]],
    unit_sets: dict[tuple[int, ...], frozenset[int]],
    taken: set[int],
) -> tuple[dict[tuple[int, ...], float], dict[tuple[int, ...], float]]:
    """What each candidate costs over all instances (µs, summed), in one pass.

    A rank costs an instance only when it arrived last (next-least wait minus its wait); a unit
    only when its latest member arrived last (the least wait outside it minus that wait), found by
    walking the arrival order from the latest until a non-member. ``alone``: per unit, what its
    latest member alone costs in those instances (close to the unit's cost when single members
    carry it; much smaller when the members arrive late together). Ranks in ``taken`` and units
    touching them are not candidates.
    """
    costs: dict[tuple[int, ...], float] = defaultdict(float)
    alone: dict[tuple[int, ...], float] = defaultdict(float)
    for _, rs, ws in cur:
        if len(ws) < 2:
            continue
        order = np.argsort(ws, kind="stable")
        r0 = int(rs[order[0]])
        w0 = float(ws[order[0]])
        single = float(ws[order[1]]) - w0
        if r0 not in taken:
            costs[(r0,)] += single
        for u in of_rank.get(r0, ()):
            members = unit_sets[u.ranks]
            if members & taken:
                continue
            for j in order[1:]:
                if int(rs[j]) not in members:
                    costs[u.ranks] += float(ws[j]) - w0
                    alone[u.ranks] += single
                    break
    return costs, alone


def attribute(
    profile: Profile,
    stages: list[tuple[int, ...]],
    step_us: float,
    node_list: list[tuple[int, ...]] | None = None,
) -> WaitAttribution | None:
    """Attribute the collectives' waiting to independent culprits (see the module docstring).

    Args:
        profile: The profile (``comm_ops``; ``comm_matrix`` and ``comm_groups`` for units).
        stages: Pipeline stages (units), ``[]`` without pipeline parallelism.
        step_us: Median step time (µs), for the reporting threshold and events.
        node_list: The nodes when already computed (:func:`nodes`), else computed here.

    Returns:
        The :class:`WaitAttribution`, or ``None`` without collective instances of ≥ 2 ranks.
    """
    w = instance_waits(profile, stages)
    if w.empty:
        return None
    keys = ["group", "op_name", "step"]
    inst: list[tuple[tuple[str, str, int], np.ndarray, np.ndarray]] = []
    for key, sub in w.groupby(keys, sort=False):
        k: Any = key
        if len(sub) >= 2:
            inst.append(
                (
                    (str(k[0]), str(k[1]), int(k[2])),
                    sub["rank"].to_numpy(int),
                    sub["wait_us"].to_numpy(float),
                )
            )
    if not inst:
        return None
    steps = sorted({k[2] for k, _, _ in inst})
    n_steps = max(len(steps), 1)
    ranks_all = sorted({int(r) for _, rs, _ in inst for r in rs})
    rows = []
    for (g, op, s), rs, ws in inst:
        order = np.argsort(ws)
        cost = float(ws[order[1]] - ws[order[0]]) if len(ws) >= 2 else 0.0
        rows.append((g, op, s, len(rs), int(rs[order[0]]), cost, float(ws.max())))
    table = pd.DataFrame(
        rows,
        columns=[*keys, "ranks_count", "late_rank", "cost_us", "max_wait_us"],
    )
    per_rank_wait = w.groupby("rank")["wait_us"].sum() / n_steps
    total_wait = float(per_rank_wait.mean()) if len(per_rank_wait) else 0.0
    if node_list is None:
        node_list = nodes(profile)
    units = _units(profile, stages, set(ranks_all), node_list)
    known = {u.ranks for u in units}
    units += [u for u in co_late_units(inst, node_list) if u.ranks not in known]
    # events: one instance costing far more than a step
    events: list[LateEvent] = []
    ev_thr = max(EVENT_MIN_US, EVENT_STEP_MULTIPLE * step_us if math.isfinite(step_us) else 0.0)
    for (g, op, s), rs, ws in inst:
        order = np.argsort(ws)
        cost = float(ws[order[1]] - ws[order[0]])
        if cost >= ev_thr:
            base = float(ws[order[0]])
            vict = tuple(
                sorted(int(r) for r, x in zip(rs, ws, strict=True) if x - base >= cost / 2)
            )
            events.append(LateEvent(s, g, op, int(rs[order[0]]), cost, vict, float(ws.max())))
    events.sort(key=lambda e: -e.cost_us)
    # greedy independent culprits
    cur = [(k, rs, ws.copy()) for k, rs, ws in inst]
    thr = MIN_COST_SHARE * step_us if math.isfinite(step_us) and step_us > 0 else 0.0
    culprits: list[CulpritCost] = []
    taken: set[int] = set()
    unit_sets = {u.ranks: frozenset(u.ranks) for u in units}
    of_rank: dict[int, list[Unit]] = defaultdict(list)
    for u in units:
        for r in u.ranks:
            of_rank[r].append(u)
    for order_i in range(1, MAX_CULPRITS + 1):
        costs, alone = _scan(cur, of_rank, unit_sets, taken)
        costs = {k: v / n_steps for k, v in costs.items()}
        if not costs:
            break
        best_key = max(costs, key=lambda k: (costs[k], -len(k)))
        best_cost = costs[best_key]
        if best_cost <= thr or best_cost <= 0:
            break
        best = next((u for u in units if u.ranks == best_key), None) or Unit(
            "rank", f"rank {best_key[0]}", best_key
        )
        chosen = best
        if (
            len(best.ranks) > 1
            and alone.get(best.ranks, 0.0) / n_steps >= RANK_EXPLAINS_UNIT * best_cost
        ):
            # single members carry it (one rank, or one-rank events): blame the rank
            inner = [(r,) for r in best.ranks if (r,) in costs]
            if not inner:
                break
            top = max(inner, key=lambda k: costs[k])
            chosen = Unit("rank", f"rank {top[0]}", top)
            if costs[top] <= thr:
                break
        elif len(best.ranks) > 1:
            # the smallest unit inside it that costs about as much (a node inside a stage)
            inside = [
                u
                for u in units
                if len(u.ranks) < len(best.ranks)
                and unit_sets[u.ranks] <= unit_sets[best.ranks]
                and costs.get(u.ranks, 0.0) >= RANK_EXPLAINS_UNIT * best_cost
            ]
            if inside:
                chosen = min(inside, key=lambda u: len(u.ranks))
        members = np.asarray(chosen.ranks)
        chosen_set = set(chosen.ranks)
        by_step: dict[int, float] = defaultdict(float)
        victims: dict[int, float] = defaultdict(float)
        member_cost: dict[int, float] = defaultdict(float)
        n_inst = 0
        nxt = []
        for k, rs, ws in cur:
            if int(rs[int(np.argmin(ws))]) not in chosen_set:
                nxt.append((k, rs, ws))
                continue
            m = np.isin(rs, members)
            d = _cost(ws, m)
            if d > 0:
                n_inst += 1
                by_step[k[2]] += d
                late = int(rs[int(np.argmin(ws))])
                member_cost[late] += d
                for r, x in zip(rs[~m], ws[~m], strict=True):
                    victims[int(r)] += min(max(float(x) - float(ws.min()), 0.0), d)
                # re-timed as on time: the unit's members arrive as a typical other rank does
                ws = np.maximum(ws - d, 0.0)
                ws[m] = float(np.median(ws[~m]))
            nxt.append((k, rs, ws))
        cur = nxt
        culprits.append(
            CulpritCost(
                unit=chosen,
                cost_us_per_step=sum(by_step.values()) / n_steps,
                cost_us_by_step=dict(by_step),
                instances=n_inst,
                victims={r: v / n_steps for r, v in victims.items()},
                order=order_i,
                members_cost_us={r: v / n_steps for r, v in member_cost.items()}
                if len(chosen.ranks) > 1
                else {},
            )
        )
        taken |= set(chosen.ranks)
    return WaitAttribution(
        instances=table,
        culprits=tuple(culprits),
        events=tuple(events),
        steps_count=n_steps,
        total_wait_us_per_step=total_wait,
        units=tuple(units),
        waits=tuple((rs, ws) for _, rs, ws in inst),
    )
