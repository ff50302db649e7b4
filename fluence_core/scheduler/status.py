"""What ``fluence status`` shows: what nodes hold, held allocations, pending groups and why.

It rebuilds the scheduler's view from the cluster alone (the durable records on
PodGroups and pods, the pods other schedulers placed), read-only, so it works
from a laptop against any cluster Fluence runs in.

A node's use is what its bound pods request, Fluence's and everyone else's, each
sized by :func:`~fluence_core.pod_requests.pod_requests` (kube-scheduler's rule),
not what the graph managed to charge: a node holding more than it has is shown
so, and flagged, instead of hiding the excess.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from collections.abc import Mapping

from fluence_core import names
from fluence_core.dra.vertices import DeviceRow, device_rows
from fluence_core.kube.meta import annotations_of
from fluence_core.errors import TopologyError
from fluence_core.log import logger
from fluence_core.matcher.base import Allocation
from fluence_core.matcher.domains import DomainRow, ZoneRow, hierarchy, zone_rows
from fluence_core.matcher.jobspec import slice_span
from fluence_core.pod_requests import CPU, MEMORY, pod_requests
from fluence_core.quantity import MIB
from fluence_core.scheduler import groups as g
from fluence_core.scheduler import podset_groups
from fluence_core.scheduler.core import Scheduler
from fluence_core.stated_topology import read_constraint
from fluence_core.topology import Constraint, label_keys, level_index


@dataclass
class NodeUse:
    """One node: what it has and what its bound pods request (CPU in millicores)."""

    name: str
    millicores: int
    fluence_millicores: int
    other_millicores: int
    memory_mib: int
    used_memory_mib: int
    gpus: int
    used_gpus: int
    down: bool

    @property
    def free_millicores(self) -> int:
        """What is left; negative when the node is overcommitted."""
        return self.millicores - self.fluence_millicores - self.other_millicores

    @property
    def overcommitted(self) -> list[str]:
        """The resources its pods request more of than it has."""
        over = []
        if self.free_millicores < 0:
            over.append(CPU)
        if self.used_memory_mib > self.memory_mib:
            over.append(MEMORY)
        if self.used_gpus > self.gpus:
            over.append(names.GPU_RESOURCE)
        return over


@dataclass
class HeldSlice:
    """One slice of a sliced group: the nodes it holds, and the narrowest domain holding
    them all (``-``: none, the whole cluster)."""

    index: int
    nodes: list[str]
    domain: str
    last: int = -1
    """The last slice of a run held by one allocation (-1: this slice alone)."""

    @property
    def shown(self) -> str:
        """``3``, or ``0-15`` for a run of slices held by one allocation."""
        return f"{self.index}-{self.last}" if self.last > self.index else str(self.index)


@dataclass
class HeldGroup:
    owner: str
    pods: list[str]
    jobids: list[int]
    nodes: list[str]
    virtual: list[str]
    slices: list[HeldSlice] = field(default_factory=list)
    podset_group: str = ""
    """The group of PodSets it shares a domain with (:func:`podset_groups.describe`)."""
    domain: str = ""
    """The narrowest domain holding all its nodes ("" for none)."""


@dataclass
class OutsideKey:
    """A topology key a group names that is no configured level: a plain node label,
    honoured on its own, outside the hierarchy."""

    key: str
    groups: list[str]


@dataclass
class PendingInfo:
    group: str
    pods: int
    why: str
    podset_group: str = ""
    """The group of PodSets it is placed with (:func:`podset_groups.describe`), if any."""


@dataclass
class ReservationInfo:
    """Room the scheduler holds for a waiting group (``names.RESERVATION_ANNOTATION``)."""

    group: str
    nodes: dict[str, int]
    """Node -> cores reserved there."""
    start: str | None
    """When the room is whole, by its holders' walltimes (None: as they end)."""


@dataclass
class Status:
    nodes: list[NodeUse] = field(default_factory=list)
    virtual: list[tuple[str, str, str]] = field(default_factory=list)
    """(path, type, holder or "free") per top-level virtual resource."""
    held: list[HeldGroup] = field(default_factory=list)
    pending: list[PendingInfo] = field(default_factory=list)
    domains: list[DomainRow] = field(default_factory=list)
    """The topology hierarchy, with what is free of each domain (none without levels)."""
    zones: list[ZoneRow] = field(default_factory=list)
    """Each node's NUMA zones, with what is free of each (none where no node has zones)."""
    reservations: list[ReservationInfo] = field(default_factory=list)
    devices: list[DeviceRow] = field(default_factory=list)
    """Every DRA device, free or held by which claim (none without ResourceSlices)."""
    outside: list[OutsideKey] = field(default_factory=list)
    """Keys groups name that are not configured levels, with the groups naming each."""


def collect_status(scheduler: Scheduler) -> Status:
    """Summarise a started (read-only) scheduler's view."""
    dra = scheduler.view.dra
    status = Status(domains=hierarchy(scheduler.graph, scheduler.view.matcher),
                    zones=zone_rows(scheduler.graph, scheduler.view.matcher),
                    devices=device_rows(scheduler.graph, dra.inventory))
    held = _held_by_node(scheduler)
    for node in scheduler.graph.nodes:
        ours, theirs, memory, gpus = held.get(node.name, (0, 0, 0, 0))
        status.nodes.append(NodeUse(node.name, node.millicores or 1000 * node.cores, ours,
                                    theirs, node.memory_mib, math.ceil(memory / MIB),
                                    node.gpus, gpus, node.down))
    holders: dict[str, str] = {}
    outside: dict[str, list[str]] = {}
    for (resource, namespace, owner), records in scheduler.records.held.items():
        for record in records:
            nodes = sorted({s.node for a in record.allocations.values() for s in a.nodes})
            virtual = [
                f"{v.type}:{v.name}@{v.backend}"
                for a in record.allocations.values()
                for v in a.virtual
            ]
            for a in record.allocations.values():
                for v in a.virtual:
                    holders[v.path] = f"{namespace}/{owner}"
            entry = HeldGroup(
                f"{resource}/{namespace}/{owner}", record.pods, record.jobids, nodes, virtual,
                _slices(scheduler, record.allocations), domain=_domain(scheduler, nodes))
            status.held.append(entry)
            if resource == "podgroups":
                pods = [scheduler.view.pods[(namespace, pod)] for pod in record.pods
                        if (namespace, pod) in scheduler.view.pods]
                pod_group = scheduler.view.pod_groups.get((namespace, owner))
                _note_outside(outside, scheduler, f"{namespace}/{owner}",
                              read_constraint(pod_group, pods))
                entry.podset_group = _podset_group(g.PendingGroup(
                    f"{namespace}/{owner}", namespace, pods, pod_group=pod_group))
    held_jobs = scheduler.matcher.allocations()
    taken = scheduler.view.dra.taken()
    for device, jobid in scheduler.view.backends.holds.items():
        claim = taken.get(device)
        if claim is None or jobid not in held_jobs:
            continue
        for v in held_jobs[jobid].virtual:
            holders[v.path] = f"{claim[0]}/{claim[1]} (ResourceClaim)"
    for index in scheduler.graph.virtual_roots:
        vertex = scheduler.graph.virtual[index]
        holder = holders.get(vertex.path) or next(
            (
                f"{who} (part)"
                for path, who in holders.items()
                if path.startswith(vertex.path + "/")
            ),
            "free",
        )
        status.virtual.append((vertex.path, vertex.type, holder))
    for pending in g.pending_groups(scheduler.view.pods.values(), scheduler.view.pod_groups,
                                     workloads=scheduler.view.workloads):
        status.pending.append(
            PendingInfo(pending.key, len(pending.pods), pending.waiting or _last_reason(pending),
                        _podset_group(pending))
        )
        reservation = _reservation(pending)
        if reservation is not None:
            status.reservations.append(reservation)
        _note_outside(outside, scheduler, pending.key,
                      read_constraint(pending.pod_group, pending.pods, pending.template))
    status.outside = [OutsideKey(key, groups) for key, groups in sorted(outside.items())]
    return status


def _podset_group(pending: g.PendingGroup) -> str:
    """How the group of PodSets a gang belongs to is shown ("" for none)."""
    fellowship = podset_groups.fellowship_of(pending)
    return podset_groups.describe(fellowship) if fellowship is not None else ""


def _domain(scheduler: Scheduler, nodes: list[str]) -> str:
    """The narrowest domain holding all of ``nodes``, as ``zone/rack`` ("" for none)."""
    graph = scheduler.graph
    known = [node for node in nodes if graph.has_node(node)]
    return "/".join(graph.common_domain(known)) if known and graph.levels else ""


def _reservation(pending: g.PendingGroup) -> ReservationInfo | None:
    """The reservation the scheduler wrote on the group's record owner, if any."""
    owner = pending.pod_group if pending.pod_group is not None else (
        pending.pods[0] if len(pending.pods) == 1 else None)
    text = annotations_of(owner).get(names.RESERVATION_ANNOTATION) if owner else None
    if not text:
        return None
    try:
        record = json.loads(text)
        nodes = {str(node): int(room["cores"]) for node, room in record["nodes"].items()}
        start = record.get("start")
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        logger.warning("status: group %s: unreadable %s: %s", pending.key,
                       names.RESERVATION_ANNOTATION, error)
        return None
    return ReservationInfo(pending.key, nodes, None if start is None else str(start))


def _slices(scheduler: Scheduler, allocations: Mapping[str, Allocation]) -> list[HeldSlice]:
    """The slices of a sliced group's record, in order (none for a group not sliced)."""
    nodes: dict[tuple[int, int], set[str]] = {}
    for kind, allocation in allocations.items():
        span = slice_span(kind)
        if span is not None:
            nodes.setdefault(span, set()).update(share.node for share in allocation.nodes)
    graph = scheduler.graph
    rows = []
    for (index, last), held in sorted(nodes.items()):
        known = [node for node in held if graph.has_node(node)]
        common = graph.common_domain(known) if known else ()
        domain = "/".join(common) if common else (known[0] if len(held) == 1 and known
                                                   else "-")
        rows.append(HeldSlice(index, sorted(held), domain, last if last > index else -1))
    return rows


def _note_outside(outside: dict[str, list[str]], scheduler: Scheduler, group: str,
                  constraint: Constraint) -> None:
    """Add the keys ``constraint`` names that are no configured level (its slice layers'
    too) to ``outside``, under ``group``."""
    levels = scheduler.graph.levels
    try:
        keys = label_keys(levels, constraint)
    except TopologyError:
        return
    named = [*keys.required, *keys.preferred]
    named += [layer.key for layer in constraint.slices
              if level_index(levels, layer.key) is None and layer.key != names.HOSTNAME_LABEL]
    for key in dict.fromkeys(named):
        outside.setdefault(key, []).append(group)


def _held_by_node(scheduler: Scheduler) -> dict[str, tuple[int, int, int, int]]:
    """Per node: (Fluence's millicores, others' millicores, bytes of memory, GPUs) its
    bound, unfinished pods request."""
    held: dict[str, tuple[int, int, int, int]] = {}
    for key, pod in scheduler.view.pods.items():
        if not g.is_bound(pod) or g.is_finished(pod):
            continue
        try:
            requests = pod_requests(pod)
        except ValueError as error:
            logger.warning("status: pod %s/%s is not counted: %s", *key, error)
            continue
        node = str(pod["spec"]["nodeName"])
        ours, theirs, memory, gpus = held.get(node, (0, 0, 0, 0))
        cpu = requests.get(CPU, 0)
        held[node] = (ours + cpu if g.is_ours(pod) else ours,
                      theirs if g.is_ours(pod) else theirs + cpu,
                      memory + requests.get(MEMORY, 0),
                      gpus + requests.get(names.GPU_RESOURCE, 0))
    return held


def _last_reason(pending: g.PendingGroup) -> str:
    for pod in pending.pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return str(condition.get("message") or condition.get("reason") or "unschedulable")
    return "not tried yet"
