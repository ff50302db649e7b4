"""Groups of pods become jobspecs in the canonical form Fluxion accepts.

One compute jobspec per group holds a slot per pod (pods with identical
requests share a slot entry with a count), each slot holding that pod's cores,
GPUs and memory, constrained to ``virtual=false``. Each virtual type asked for
gets its own jobspec constrained to ``virtual=true``, ``class=<type>`` and the
pods' ``require-*`` pins. Duration 0: held until cancelled. Memory is in MiB
in both the graph and the jobspec.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fluence_core import names
from fluence_core.errors import UnknownResourceTypeError
from fluence_core.graph import ResourceGraph
from fluence_core.models import Group, PodRequest

COMPUTE = "compute"


@dataclass(frozen=True)
class GroupJobspec:
    """One jobspec of a group: the compute one, or one per virtual type."""

    kind: str
    """``compute`` or the virtual type's name."""
    jobspec: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps(self.jobspec, separators=(",", ":"))


def compute_jobspec(pods: list[PodRequest], constraint: dict[str, Any] | None = None) -> dict[str, Any]:
    """The compute jobspec: a slot per distinct run of identical pod requests."""
    resources: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    runs: list[tuple[tuple[int, int, int], int]] = []
    for pod in pods:
        shape = (pod.cores, pod.memory_mib, pod.gpus)
        if runs and runs[-1][0] == shape:
            runs[-1] = (shape, runs[-1][1] + 1)
        else:
            runs.append((shape, 1))
    for i, ((cores, memory, gpus), count) in enumerate(runs):
        inner: list[dict[str, Any]] = [{"type": "core", "count": cores}]
        if gpus:
            inner.append({"type": "gpu", "count": gpus})
        if memory:
            inner.append({"type": "memory", "count": memory, "unit": "MiB"})
        label = f"s{i}"
        resources.append({"type": "slot", "count": count, "label": label, "with": inner})
        tasks.append({"command": ["fluence"], "slot": label, "count": {"per_slot": 1}})
    properties: dict[str, Any] = {"properties": [names.VIRTUAL_FALSE]}
    constraints = {"and": [properties, constraint]} if constraint else properties
    return _envelope(resources, tasks, constraints)


def virtual_jobspec(vtype: str, count: int, requires: dict[str, str]) -> dict[str, Any]:
    """A jobspec for ``count`` whole virtual vertices of ``vtype`` honouring the pins."""
    properties = [names.VIRTUAL_TRUE, names.class_property(vtype)]
    properties += [names.attribute_property(k, v) for k, v in sorted(requires.items())]
    resources = [
        {"type": "slot", "count": count, "label": vtype, "with": [{"type": "node", "count": 1}]}
    ]
    tasks = [{"command": ["fluence"], "slot": vtype, "count": {"per_slot": 1}}]
    return _envelope(resources, tasks, {"properties": properties})


def _envelope(resources: list[dict[str, Any]], tasks: list[dict[str, Any]], constraints: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": 1,
        "resources": resources,
        "tasks": tasks,
        "attributes": {"system": {"duration": 0, "constraints": constraints}},
    }


def group_jobspecs(
    group: Group, graph: ResourceGraph, *, exclude_nodes: list[str] | None = None
) -> list[GroupJobspec]:
    """Every jobspec the group needs, compute first, then one per virtual type.

    ``exclude_nodes`` adds a ``hostlist`` exclusion (the postfilter's rematch).
    A request for a virtual type the graph lacks raises
    :class:`UnknownResourceTypeError` naming the pod and the type.
    """
    known = graph.virtual_types
    for pod in group.pods:
        for vtype in pod.virtual:
            if vtype not in known:
                raise UnknownResourceTypeError(
                    f"pod {pod.key} requests {names.extended_resource(vtype)}, but the resource "
                    f"graph has no virtual type {vtype!r} (known: {sorted(known) or 'none'})"
                )
    exclusion = {"not": [{"hostlist": sorted(exclude_nodes)}]} if exclude_nodes else None
    specs = [GroupJobspec(COMPUTE, compute_jobspec(list(group.pods), exclusion))]
    for vtype in group.virtual_types:
        members = [p for p in group.pods if vtype in p.virtual]
        count = sum(p.virtual[vtype] for p in members)
        requires: dict[str, str] = {}
        for pod in members:
            requires.update(pod.requires)
        specs.append(GroupJobspec(vtype, virtual_jobspec(vtype, count, requires)))
    return specs
