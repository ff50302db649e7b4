"""Holding a running pod from what the cluster says of it, with no record to go by.

A bound pod uses its node whatever Fluence remembers: kube-scheduler rebuilds its
cache from what is bound, and so does Fluence when it has nothing better. What a
pod holds *conservatively* is what it requests on its node (whole cores, or
millicores from the node's pool, memory and GPUs, as a pod of another scheduler is
charged) plus every virtual resource it requests, on the backend its
``backend`` annotation names (any instance of that type when it names none).

:func:`hold_running` serves pods of other schedulers (a *pin*), Fluence's own lone
pods (their binding is their record), and the members of a record that cannot be
restored exactly (:mod:`~fluence_core.scheduler.restart.fallback`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fluence_core import names
from fluence_core.graph import ResourceGraph
from fluence_core.kube.api import KubeObject
from fluence_core.matcher.base import Allocation, Matcher
from fluence_core.matcher.jobspec import COMPUTE, compute_jobspec, virtual_jobspec
from fluence_core.models import PodRequest
from fluence_core.scheduler.leftover import hold_what_is_left
from fluence_core.kube.meta import annotations_of


@dataclass
class RunningHold:
    """What a running pod was held for, by jobspec kind, and what could not be held."""

    allocations: dict[str, Allocation] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """``compute on n0, qpu on cepheus``: what is held, for logs and Events."""
        parts = []
        for kind, allocation in self.allocations.items():
            where = [s.node for s in allocation.nodes] + [v.backend for v in allocation.virtual]
            parts.append(f"{kind} on {', '.join(where)}")
        return ", ".join(parts) or "nothing"


def hold_running(graph: ResourceGraph, matcher: Matcher, pod: KubeObject) -> RunningHold:
    """Hold what the bound ``pod`` takes on its node, and the virtual resources it requests.

    Each part is held alone (one job each), so a part that cannot be held (its node is
    not in the graph or has no room left, its virtual type is unknown or every vertex of
    its backend is taken) is named in :attr:`RunningHold.problems` and the rest is still
    held. A node with no room left for the pod is overcommitted: what it has left is held
    instead (:func:`~fluence_core.scheduler.leftover.hold_what_is_left`), so it is full.
    The caller cancels the jobs when it no longer needs them.
    """
    hold = RunningHold()
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    try:
        request = PodRequest.from_kube(pod)
    except ValueError as error:
        hold.problems.append(f"its requests cannot be read: {error}")
        return hold
    if not graph.has_node(node):
        hold.problems.append(f"node {node} is not in the graph")
    else:
        compute = matcher.match_allocate(compute_jobspec([request], {"hostlist": [node]}))
        if compute is None:
            # The node is overcommitted: hold what it has left, so it looks full
            left = hold_what_is_left(matcher, node, request)
            for index, part in enumerate(left):
                hold.allocations[f"{COMPUTE}-{index}" if index else COMPUTE] = part
            hold.problems.append(f"{node} has no room left for what it requests"
                                 + (", so what it has left is held" if left else ""))
        else:
            hold.allocations[COMPUTE] = compute
    annotations = annotations_of(pod)
    backend = annotations.get(names.BACKEND_ANNOTATION)
    known = graph.virtual_types
    for vtype, count in sorted(request.virtual.items()):
        if vtype not in known:
            hold.problems.append(f"the graph has no virtual type {vtype!r}")
            continue
        requires = dict(request.requires)
        if backend:
            requires["backend"] = str(backend)
        allocation = matcher.match_allocate(virtual_jobspec(vtype, count, requires))
        if allocation is None:
            on = f" on backend {backend}" if backend else ""
            hold.problems.append(f"no {count} free {vtype}{on} to hold")
            continue
        hold.allocations[vtype] = allocation
    return hold
