"""One accounting of the quantum backends, asked for by extended resource or by claim.

A backend can be asked for two ways: the extended resource, which the graph's
matcher allocates as a virtual vertex, and a ResourceClaim of the QPU driver, whose
devices are those same vertices published (their ``vertex`` attribute is the path
under the cluster or the node). :class:`BackendLedger` makes each see the other:

* **claims to graph**: for every QPU device a claim holds (its status says so, or
  Fluence allocated it and has not seen the write: :meth:`DraState.taken
  <fluence_core.dra.state.DraState.taken>`) the backend instance it is part of (the
  top vertex, which the extended resource allocates whole) is held in the graph by a
  job pinned to it, so the matcher never gives it for the extended resource; the job
  goes when no claim holds a device of that instance;
* **graph to claims**: a device whose vertex (or a vertex above or below it) the
  graph holds for anything else is not free for a claim
  (:meth:`~fluence_core.dra.state.DraState.held_elsewhere`).

Nothing is recorded of its own: the claims' status is the record of the claim side
and the placements' records (or the pods' backend annotations) of the graph side,
so a restarted scheduler that lists both holds the same. :meth:`sync` brings the
graph up to date with the claims; the cycle calls it before each attempt. A claimed
device whose vertex the graph already holds otherwise (given twice before both were
known) is logged, never held twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fluence_core import names
from fluence_core.dra.devices import Device, DeviceId
from fluence_core.dra.state import DraState
from fluence_core.graph import ROOT_PATH, ResourceGraph, VirtualVertex
from fluence_core.log import logger
from fluence_core.matcher.base import Matcher
from fluence_core.matcher.jobspec import virtual_jobspec
from fluence_core.resource_config import CLUSTER

CLUSTER_POOL = "cluster"
"""The QPU driver's pool of the vertices under the cluster (a node's own are its name's)."""


def vertex_jobspec(vertex: VirtualVertex) -> dict[str, Any]:
    """A jobspec for exactly ``vertex``: its type and backend, by its name."""
    jobspec = virtual_jobspec(vertex.type, 1, {"backend": vertex.backend})
    constraints = jobspec["attributes"]["system"]["constraints"]
    jobspec["attributes"]["system"]["constraints"] = {
        "and": [constraints, {"hostlist": [vertex.name]}]}
    return jobspec


def _overlaps(path: str, other: str) -> bool:
    """The same vertex, or one above the other."""
    return path == other or path.startswith(other + "/") or other.startswith(path + "/")


class BackendLedger:
    """Holds the claimed QPU devices in the graph; says which devices the graph holds."""

    def __init__(self, dra: DraState) -> None:
        self.dra = dra
        self.holds: dict[DeviceId, int] = {}
        """The graph job holding each claimed QPU device's backend instance (devices of one
        instance share one job)."""
        self._graph: ResourceGraph | None = None
        self._matcher: Matcher | None = None
        self._paths: dict[tuple[str, str], VirtualVertex] = {}
        self._held_paths: frozenset[str] | None = frozenset()
        """The vertex paths the graph holds for anything but a claim (None: to be read); read
        at each :meth:`sync` only where the QPU driver publishes devices."""
        dra.elsewhere = self.held_in_graph

    # -- claims to graph ---------------------------------------------------------------

    def sync(self, graph: ResourceGraph, matcher: Matcher) -> None:
        """Hold the vertex of every claimed QPU device, give back those no claim holds now,
        and note what the graph holds otherwise."""
        if graph is not self._graph:
            self._graph = graph
            self._paths = _vertex_index(graph)
        if matcher is not self._matcher:  # a swapped matcher re-holds the same job ids
            self._matcher = matcher
            live = matcher.allocations()
            self.holds = {d: j for d, j in self.holds.items() if j in live}
        if not self.holds and (not self._paths or not any(
                d.id.driver == names.QPU_DRA_DRIVER for d in self.dra.inventory.devices())):
            self._held_paths = frozenset()  # no backends, or no QPU driver: nothing to do
            return
        claimed = {d: key for d, key in self.dra.taken().items()
                   if d.driver == names.QPU_DRA_DRIVER}
        for device in [d for d in self.holds if d not in claimed]:
            jobid = self.holds.pop(device)
            if jobid not in self.holds.values():  # no other device of its instance is claimed
                matcher.cancel(jobid)
        unheld = {d: key for d, key in claimed.items() if d not in self.holds}
        if unheld:
            published = {d.id: d for d in self.dra.inventory.devices() if d.id in unheld}
            for device, key in unheld.items():
                self._hold(device, published.get(device), f"{key[0]}/{key[1]}", matcher)
        before, self._held_paths = self._held_paths, None
        if self._graph_holds() != before:
            self.dra.elsewhere_changed()  # what a node could allocate before may differ now

    def _hold(self, device: DeviceId, published: Device | None, claim: str,
              matcher: Matcher) -> None:
        found = self._vertex(published) if published is not None else None
        if found is None or self._graph is None:
            logger.debug("QPU device %s (claim %s) is no vertex of the graph", device, claim)
            return
        vertex = _instance_of(self._graph, found)
        assert self._matcher is not None
        live = self._matcher.allocations()
        for jobid in set(self.holds.values()):
            if jobid in live and [v.path for v in live[jobid].virtual] == [vertex.path]:
                self.holds[device] = jobid  # its instance is held for another claimed device
                return
        allocation = matcher.match_allocate(vertex_jobspec(vertex))
        if allocation is None or [v.path for v in allocation.virtual] != [vertex.path]:
            if allocation is not None:
                matcher.cancel(allocation.jobid)
            logger.warning("backend %s (%s) is held by claim %s and in the graph for the "
                           "extended resource: given twice before both were seen", vertex.path,
                           device.device, claim)
            return
        self.holds[device] = allocation.jobid

    # -- graph to claims ---------------------------------------------------------------

    def held_in_graph(self, device: Device) -> bool:
        """Whether the graph holds ``device``'s vertex (or one above or below it) for
        anything but a claim."""
        if device.id.driver != names.QPU_DRA_DRIVER:
            return False
        held = self._graph_holds()
        vertex = self._vertex(device) if held else None
        return vertex is not None and any(_overlaps(vertex.path, path) for path in held)

    def _graph_holds(self) -> frozenset[str]:
        """The vertex paths the graph holds for anything but a claim, read once per sync."""
        if self._held_paths is None:
            assert self._matcher is not None
            ours = set(self.holds.values())
            self._held_paths = frozenset(
                vertex.path for jobid, allocation in self._matcher.allocations().items()
                if jobid not in ours for vertex in allocation.virtual)
        return self._held_paths

    def _vertex(self, device: Device) -> VirtualVertex | None:
        own: Mapping[str, Any] = device.attributes.get(names.QPU_DRA_DRIVER) or {}
        path = own.get("vertex")
        return self._paths.get((device.id.pool, str(path))) if path is not None else None


def _instance_of(graph: ResourceGraph, vertex: VirtualVertex) -> VirtualVertex:
    """The top vertex of the backend instance ``vertex`` is part of: what the extended
    resource allocates whole, so what a claim on any part of it holds in the graph."""
    while vertex.parent is not None:
        vertex = graph.virtual[vertex.parent]
    return vertex


def _vertex_index(graph: ResourceGraph) -> dict[tuple[str, str], VirtualVertex]:
    """(the driver's pool, the path under the cluster or node) -> the vertex."""
    index = {}
    for vertex in graph.virtual:
        if vertex.attach_to == CLUSTER:
            pool, base = CLUSTER_POOL, ROOT_PATH
        else:
            pool, base = vertex.attach_to, graph.node_path(vertex.attach_to)
        if vertex.path.startswith(base + "/"):
            index[(pool, vertex.path[len(base):])] = vertex
    return index
