"""Groups of pods become jobspecs in the canonical form Fluxion accepts.

Each distinct pod shape of a group gets a compute jobspec holding a slot per pod
(Fluxion allows no sibling slots, so one jobspec per shape), each slot holding
that pod's cores, GPUs and memory (and, for a pod whose DRA claims are matched with it,
a ``device`` entry naming its demand), constrained to ``virtual=false``. Each virtual type asked for
gets its own jobspec constrained to ``virtual=true``, ``class=<type>`` and the
pods' ``require-*`` pins. Duration 0: held until cancelled. Memory is in MiB
in both the graph and the jobspec.

With a topology level (``level``), each whole-core compute jobspec puts its slots under
one vertex of that level's type, as Fluxion writes it (``rack count:1 -> slot ...``), so
the embedded matcher and Fluxion search the same way. Shared (millicore) jobspecs stay
flat: the pooled layer reads slots at the top, and :mod:`.group` holds them to a domain
with a ``hostlist`` instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fluence_core import names
from fluence_core.errors import UnknownResourceTypeError
from fluence_core.graph import DEVICE_TYPE, NUMA_TYPE, ResourceGraph
from fluence_core.models import Group, PodRequest

COMPUTE = "compute"
MILLICORES = "millicores"
"""The resource a shared pod's CPU is asked as (served by the pooled matcher)."""


@dataclass(frozen=True)
class GroupJobspec:
    """One jobspec of a group: the compute one, or one per virtual type."""

    kind: str
    """``compute`` or the virtual type's name."""
    jobspec: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps(self.jobspec, separators=(",", ":"))


DEVICE_DEMAND = "fluence-device-demand"
"""Key of a slot's ``device`` entry naming the member's device demand: what the devices
must satisfy is the demand's (:class:`~fluence_core.graph.DeviceDemands`, registered on
the graph for the match); ``count`` says how many devices it asks for by count. Only the
embedded matcher reads it."""

NUMA_ALIGNED = "fluence-numa-aligned"
"""A compute jobspec attribute (``attributes.system``): its pods are Guaranteed with whole
CPUs, so on a node whose kubelet enforces ``single-numa-node`` each goes inside one NUMA
zone (:attr:`~fluence_core.models.PodRequest.numa_aligned`)."""


def compute_parts(pods: list[PodRequest]) -> list[tuple[str, list[PodRequest]]]:
    """The group's pods split by shape (cores, memory, GPUs, the nodes they may use), each
    part with its jobspec kind.

    Fluxion refuses sibling resources of one type in a jobspec ("siblings in
    jobspec request same resource type"), so pods of different shapes cannot be
    sibling slots. Each shape gets its own compute jobspec (``compute``,
    ``compute-1``, ...) and the group matcher holds them all or none.
    """
    parts: dict[tuple[Any, ...], list[PodRequest]] = {}
    for pod in pods:
        shape = (pod.cores, pod.memory_mib, pod.gpus, pod.millicores if pod.shared else None,
                 pod.node_selector, pod.allowed, pod.single_numa and not pod.shared,
                 pod.numa_aligned and not pod.shared, pod.devices)
        parts.setdefault(shape, []).append(pod)
    return [
        (COMPUTE if i == 0 else f"{COMPUTE}-{i}", members)
        for i, members in enumerate(parts.values())
    ]


def is_compute(kind: str) -> bool:
    """Whether a jobspec kind names one of the group's compute jobspecs."""
    return kind == COMPUTE or kind.startswith(f"{COMPUTE}-")


_SLICE = "-slice"


def slice_kind(kind: str, index: int, last: int | None = None) -> str:
    """The kind of slice ``index``'s jobspec ``kind`` in a sliced group's allocations
    (``compute-slice3``; a compute kind stays one, as records and restarts read it), or of
    slices ``index`` to ``last`` held by one allocation (``compute-slice0-15``)."""
    span = f"-{last}" if last is not None and last != index else ""
    return f"{kind}{_SLICE}{index}{span}"


def slice_span(kind: str) -> tuple[int, int] | None:
    """The first and last slice a kind of a sliced group's allocations holds (None: not
    sliced)."""
    head, found, text = kind.rpartition(_SLICE)
    first, dash, last = text.partition("-")
    if not (found and head and first.isdigit() and (not dash or last.isdigit())):
        return None
    return int(first), int(last) if dash else int(first)


def slice_of(kind: str) -> int | None:
    """The (first) slice a kind of a sliced group's allocations belongs to (None: not
    sliced)."""
    span = slice_span(kind)
    return span[0] if span is not None else None


def compute_jobspec(
    pods: list[PodRequest], constraint: dict[str, Any] | None = None,
    level_type: str | None = None,
) -> dict[str, Any]:
    """The compute jobspec for pods of one shape: one slot entry, a slot per pod, under one
    vertex of ``level_type`` when given.

    Shared pods (:attr:`PodRequest.shared`) ask for ``millicores`` from the node's pool
    instead of cores (:mod:`fluence_core.matcher.pooled` serves those).
    """
    shapes = {(p.cores, p.memory_mib, p.gpus, p.millicores if p.shared else None,
               p.single_numa and not p.shared, p.numa_aligned and not p.shared, p.devices)
              for p in pods}
    if len(shapes) != 1:
        raise ValueError(
            f"a compute jobspec holds pods of one shape, got {sorted(shapes, key=str)}"
        )
    cores, memory, gpus, shared, single_numa, aligned, devices = shapes.pop()
    inner: list[dict[str, Any]] = [{"type": "core", "count": cores}]
    if shared is not None:
        inner = [{"type": MILLICORES, "count": shared}]
    if gpus:
        inner.append({"type": "gpu", "count": gpus})
    if memory:
        inner.append({"type": "memory", "count": memory, "unit": "MiB"})
    if single_numa:  # all of it inside one NUMA zone of the node
        inner = [{"type": NUMA_TYPE, "count": 1, "with": inner}]
    if devices is not None:
        if shared is not None:
            raise ValueError("a shared (millicore) jobspec cannot ask for devices")
        inner.append({"type": DEVICE_TYPE, "count": devices[1], DEVICE_DEMAND: devices[0]})
    resources = [{"type": "slot", "count": len(pods), "label": "task", "with": inner}]
    if level_type is not None:
        if shared is not None:
            raise ValueError("a shared (millicore) jobspec is held to a domain by a hostlist")
        resources = [{"type": level_type, "count": 1, "with": resources}]
    tasks = [{"command": ["fluence"], "slot": "task", "count": {"per_slot": 1}}]
    properties: dict[str, Any] = {"properties": [names.VIRTUAL_FALSE]}
    constraints = {"and": [properties, constraint]} if constraint else properties
    jobspec = _envelope(resources, tasks, constraints)
    if aligned and not single_numa:  # Fluxion ignores it: only the embedded matcher reads it
        jobspec["attributes"]["system"][NUMA_ALIGNED] = True
    return jobspec


def virtual_jobspec(vtype: str, count: int, requires: dict[str, str]) -> dict[str, Any]:
    """A jobspec for ``count`` whole virtual vertices of ``vtype`` honouring the pins."""
    properties = [names.VIRTUAL_TRUE, names.class_property(vtype)]
    properties += [names.attribute_property(k, v) for k, v in sorted(requires.items())]
    resources = [
        {"type": "slot", "count": count, "label": vtype, "with": [{"type": "node", "count": 1}]}
    ]
    tasks = [{"command": ["fluence"], "slot": vtype, "count": {"per_slot": 1}}]
    return _envelope(resources, tasks, {"properties": properties})


def _envelope(
    resources: list[dict[str, Any]], tasks: list[dict[str, Any]], constraints: dict[str, Any]
) -> dict[str, Any]:
    return {
        "version": 1,
        "resources": resources,
        "tasks": tasks,
        "attributes": {"system": {"duration": 0, "constraints": constraints}},
    }


def _allowed_nodes(pod: PodRequest, graph: ResourceGraph) -> dict[str, Any] | None:
    """The ``hostlist`` a pod of this shape is held to, ``None`` when every node will do.

    With Kubernetes' filters asked (``pod.allowed``), their answer is the list. Without
    them, the nodes whose labels match the pod's ``nodeSelector`` and are not cordoned
    or tainted.
    """
    if pod.allowed is not None:
        allowed, names = pod.allowed, graph.node_names
        if graph.covered_by(allowed):
            return None
        if 4 * len(allowed) < len(names):  # a few nodes: sort them, do not walk every node
            return {"hostlist": graph.in_rank_order(allowed)}
        return {"hostlist": [name for name in names if name in allowed]}
    selector = set(pod.node_selector)
    if not selector and all(n.schedulable for n in graph.nodes):
        return None
    return {"hostlist": [n.name for n in graph.nodes
                         if n.schedulable and selector <= set(n.labels.items())]}


def group_jobspecs(
    group: Group, graph: ResourceGraph, *, exclude_nodes: list[str] | None = None,
    level: int | None = None, within: list[str] | None = None,
) -> list[GroupJobspec]:
    """Every jobspec the group needs, compute first, then one per virtual type.

    ``exclude_nodes`` adds a ``hostlist`` exclusion (the postfilter's rematch); the
    nodes a pod may use become a ``hostlist`` (see :func:`_allowed_nodes`). ``level``
    puts each whole-core compute jobspec under one vertex of that topology level;
    ``within`` holds every compute jobspec to those nodes (one domain's).
    A request for a virtual type the graph lacks raises
    :class:`UnknownResourceTypeError` naming the pod and the type.
    """
    virtual = virtual_jobspecs(group, graph)
    exclusion = {"not": [{"hostlist": sorted(exclude_nodes)}]} if exclude_nodes else None
    level_type = graph.levels[level].type if level is not None else None
    specs = []
    for kind, members in compute_parts(list(group.pods)):
        parts = [c for c in (_allowed_nodes(members[0], graph), exclusion) if c is not None]
        if within is not None:
            parts.append({"hostlist": within})
        constraint = {"and": parts} if len(parts) > 1 else (parts[0] if parts else None)
        wrap = level_type if not members[0].shared else None
        specs.append(GroupJobspec(kind, compute_jobspec(members, constraint, wrap)))
    return specs + virtual


def virtual_jobspecs(group: Group, graph: ResourceGraph) -> list[GroupJobspec]:
    """One jobspec per virtual type the group asks for (raises
    :class:`UnknownResourceTypeError` naming the pod for a type the graph lacks)."""
    known = graph.virtual_types
    for pod in group.pods:
        for vtype in pod.virtual:
            if vtype not in known:
                raise UnknownResourceTypeError(
                    f"pod {pod.key} requests {names.extended_resource(vtype)}, but the resource "
                    f"graph has no virtual type {vtype!r} (known: {sorted(known) or 'none'})"
                )
    specs = []
    for vtype in group.virtual_types:
        members = [p for p in group.pods if vtype in p.virtual]
        count = sum(p.virtual[vtype] for p in members)
        requires: dict[str, str] = {}
        for pod in members:
            requires.update(pod.requires)
        specs.append(GroupJobspec(vtype, virtual_jobspec(vtype, count, requires)))
    return specs
