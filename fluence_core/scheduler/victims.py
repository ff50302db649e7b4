"""Who may be preempted, as whole placements or member by member, and which set hurts least.

A *holder* is one owner's held placements: a lone pod, or a gang's PodGroup with every
record it holds (a late member adds a record of its own, but the gang is still one gang).
Its priority is the PodGroup's own when it names a priority class
(:func:`group_priority`), else its highest member's; a protected member
(:data:`~fluence_core.names.PROTECTED_ANNOTATION`) shields the whole holder.

A gang's ``spec.disruptionMode`` says how it may be disrupted, as kube-scheduler reads it:
``Pod`` (the default) lets members go one by one, but never leaves fewer than its
``minCount`` running while some still run (then the whole gang goes); ``PodGroup`` lets it
go only whole.

Among candidate victim sets, :func:`disruption` orders them as kube-scheduler's
``pickOneNodeForPreemption`` does: the lowest highest-victim priority, then the smallest
sum of priorities, then the fewest victims, then the latest start of the most important
victims.

A member may leave a record that keeps other members: :func:`without` is the record's
allocation less what that member held on its node, so the room it frees is exactly its
own, on whichever matcher.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fluence_core import names
from fluence_core.graph import ResourceGraph
from fluence_core.kube.api import KubeObject
from fluence_core.kube.meta import annotations_of
from fluence_core.matcher.base import Allocation, NodeShare
from fluence_core.models import PodRequest
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.records import HeldPlacement

WHOLE_GROUP = "PodGroup"
"""``spec.disruptionMode`` of a PodGroup that may only be disrupted whole (its default,
``Pod``, lets members go one by one)."""

_PRIORITY_SHIFT = 2 ** 31
"""Added to each victim's priority before summing, as kube-scheduler does, so that
negative priorities never make a set of more victims look lighter."""

ClassValue = Callable[[str], "int | None"]
"""``value(priority_class_name)``: the PriorityClass's value, or None when it is unknown."""


@dataclass(frozen=True)
class Member:
    """One running pod of a holder, where it runs and what it holds there."""

    key: g.PodKey
    pod: KubeObject
    node: str
    record: HeldPlacement
    request: PodRequest | None
    """What it requests, read for a gang's members (None when unreadable, or for a lone pod:
    it can then only go with its whole record)."""
    since: float
    """When it started (``status.startTime``, else its creation), in seconds since the
    epoch; 0 when neither can be read."""


@dataclass(frozen=True)
class Holder:
    """A lone pod or a gang, held by the scheduler, that may lose pods to preemption."""

    owner: g.Owner
    members: tuple[Member, ...]
    priority: int
    min_count: int = 1
    whole: bool = False
    """Only the whole holder may go (a lone pod, or ``disruptionMode: PodGroup``)."""

    def closure(self, leaving: set[g.PodKey]) -> set[g.PodKey]:
        """``leaving`` (this holder's members that go) with every member that must go with
        them: all of them when fewer than ``min_count`` would stay running, or when it
        goes only whole."""
        mine = {m.key for m in self.members}
        gone = leaving & mine
        if not gone:
            return set()
        staying = len(mine - gone)
        if self.whole or 0 < staying < self.min_count:
            return mine
        return gone


def group_priority(pod_group: KubeObject | None, value: ClassValue) -> int | None:
    """The priority a PodGroup states for its members, or None when it states none.

    It states one by naming a ``spec.priorityClassName``: its ``spec.priority`` (the
    Priority admission writes the class's value there), else the class's value. The
    admission also writes ``priority: 0`` on a PodGroup that names no class, which states
    nothing: its members' own priorities count then. A non-zero ``spec.priority`` with no
    class (written where no admission runs) counts as stated.
    """
    spec = (pod_group or {}).get("spec") or {}
    stated = spec.get("priority")
    if isinstance(stated, bool) or not isinstance(stated, int):
        stated = None
    class_name = spec.get("priorityClassName")
    if isinstance(class_name, str) and class_name:
        return stated if stated is not None else value(class_name)
    return stated or None


def read_holders(held: Mapping[g.Owner, Sequence[HeldPlacement]],
                 pods: Mapping[g.PodKey, KubeObject],
                 pod_groups: Mapping[g.PodKey, KubeObject], value: ClassValue) -> list[Holder]:
    """Every owner holding running pods, none protected, as a :class:`Holder`."""
    holders = []
    for owner, records in held.items():
        namespace = owner[1]
        members = []
        for record in records:
            for name in record.pods:
                pod = pods.get((namespace, name))
                if pod is None or g.is_finished(pod) or not g.is_bound(pod):
                    continue
                started = (pod.get("status") or {}).get("startTime") or g.created(pod)
                # a lone pod only ever goes whole: its size is never needed
                request = _request_of(pod) if owner[0] == "podgroups" else None
                members.append(Member((namespace, name), pod, str(pod["spec"]["nodeName"]),
                                      record, request, _seconds(str(started))))
        if not members or any(annotations_of(m.pod).get(names.PROTECTED_ANNOTATION) == "true"
                              for m in members):
            continue
        holders.append(_holder(owner, members, pod_groups.get((namespace, owner[2])), value))
    return holders


def _holder(owner: g.Owner, members: list[Member], pod_group: KubeObject | None,
            value: ClassValue) -> Holder:
    top = max(g.priority(m.pod) for m in members)
    if owner[0] != "podgroups":
        return Holder(owner, tuple(members), top, whole=True)
    stated = group_priority(pod_group, value)
    spec = (pod_group or {}).get("spec") or {}
    policy = g.policy_of(pod_group) if pod_group is not None else g.GroupPolicy(False, 1)
    return Holder(owner, tuple(members), top if stated is None else stated,
                  min_count=policy.min_count if policy.gang else 1,
                  whole=spec.get("disruptionMode") == WHOLE_GROUP
                  or any(m.request is None for m in members))


def _request_of(pod: KubeObject) -> PodRequest | None:
    try:
        return PodRequest.from_kube(pod)
    except ValueError:
        return None


@dataclass(frozen=True)
class Disruption:
    """How much a set of victims hurts, comparable: the smaller, the better."""

    highest: int
    total: int
    count: int
    started: float
    """The earliest start among the highest-priority victims, in seconds since the epoch
    (the later, the better: they have run the shortest)."""

    def key(self) -> tuple[int, int, int, float]:
        """kube-scheduler's order, smallest first."""
        return (self.highest, self.total, self.count, -self.started)


def disruption(victims: Sequence[tuple[Member, int]]) -> Disruption:
    """What evicting ``victims`` (each with its holder's priority) costs."""
    if not victims:
        return Disruption(-_PRIORITY_SHIFT, 0, 0, float("inf"))
    highest = max(p for _, p in victims)
    starts = [m.since for m, p in victims if p == highest]
    return Disruption(highest, sum(p + _PRIORITY_SHIFT for _, p in victims), len(victims),
                      min(starts))


def least_disruption(lowest: int) -> tuple[int, int, int]:
    """The first three of :meth:`Disruption.key` for one victim of priority ``lowest``: no
    set of victims that low or lower can cost less, but for start times."""
    return (lowest, lowest + _PRIORITY_SHIFT, 1)


def _seconds(stamp: str) -> float:
    """An RFC 3339 time in seconds since the epoch (0 when unset or unreadable)."""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def without(allocation: Allocation, leaving: Sequence[Member],
            graph: ResourceGraph) -> Allocation | None:
    """``allocation`` less what ``leaving`` hold in it, or None when nothing is left.

    A compute allocation gives up, on each leaving member's node, that member's cores,
    GPUs and memory chunks (or its millicores and MiB from the shared pool) and its slot;
    which core numbers go does not matter to the matcher, only how many. A virtual
    allocation is kept whole while any member stays: which vertex served which member is
    not recorded.
    """
    if not allocation.nodes:
        return allocation
    shares = {share.node: share for share in allocation.nodes}
    for member in leaving:
        share = shares.get(member.node)
        if share is None or member.request is None:
            continue
        shares[member.node] = _less(share, member.request, graph)
    kept = tuple(s for s in shares.values() if s.cores or s.gpus or s.memory or s.millicores
                 or s.memory_mib)
    if not kept:
        return None
    return dataclasses.replace(allocation, nodes=kept)


def _less(share: NodeShare, request: PodRequest, graph: ResourceGraph) -> NodeShare:
    """``share`` less one pod of ``request``'s size."""
    pods = max(0, share.pods - 1)
    if request.shared:
        return dataclasses.replace(
            share, millicores=max(0, share.millicores - (request.millicores or 0)),
            memory_mib=max(0, share.memory_mib - request.memory_mib), pods=pods)
    chunk = graph.node(share.node).chunk_mib if graph.has_node(share.node) else 0
    chunks = -(-request.memory_mib // chunk) if chunk and request.memory_mib else 0
    memory = share.memory[:max(0, len(share.memory) - chunks)]
    return dataclasses.replace(
        share, cores=share.cores[:max(0, len(share.cores) - request.cores)],
        gpus=share.gpus[:max(0, len(share.gpus) - request.gpus)], memory=memory,
        memory_mib=len(memory) * chunk if chunk else share.memory_mib, pods=pods)
