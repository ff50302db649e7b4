"""The watched devices as vertices of the resource graph, and as rows for people.

The graph keeps no device table of its own: :class:`DeviceVertices` is its
:class:`~fluence_core.graph.DeviceSource`, and reads the vertices from the
scheduler's DRA state when asked, so a pool that moves to a new generation, a
slice that goes, or a claim that is released shows in the graph at once. The
matcher does not walk these vertices: a match asks the same state for the devices a
node reaches (:mod:`fluence_core.dra.demands`).

A node-local device is a vertex under its node; a network-attached one
(``allNodes``, a ``nodeSelector``) above the nodes it selects
(:meth:`~fluence_core.graph.ResourceGraph.device_parent`). ``fluence graph`` and
``fluence status`` list the vertices (:func:`device_rows`), each free or held by
its claim, and the pools not offered and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fluence_core.dra.devices import Device, DeviceId, Inventory, Version
from fluence_core.dra.state import ClaimKey, DraState
from fluence_core.graph import DeviceVertex, ResourceGraph


def vertex_of(device: Device, graph: ResourceGraph,
              taken: Mapping[DeviceId, ClaimKey]) -> DeviceVertex:
    """``device`` as a vertex of ``graph``: its attributes as text, where it hangs, and
    the claim holding it."""
    attributes = tuple((f"{domain}/{name}", _shown(value))
                       for domain, values in sorted(device.attributes.items())
                       for name, value in sorted(values.items()))
    reaches: tuple[str, ...] = ()
    if device.node is None:
        reaches = tuple(n.name for n in graph.nodes
                        if device.reachable_from(n.name, n.labels))
    holder = taken.get(device.id)
    return DeviceVertex(device.id.driver, device.id.pool, device.id.device, device.node,
                        reaches, attributes,
                        held_by=f"{holder[0]}/{holder[1]}" if holder is not None else None,
                        offered=device.unsupported is None)


class DeviceVertices:
    """The graph's device source over a :class:`DraState` (or a bare inventory, for
    ``fluence graph``, whose file holds no claims)."""

    def __init__(self, state: DraState | Inventory) -> None:
        self.state = state

    def device_vertices(self, graph: ResourceGraph) -> Sequence[DeviceVertex]:
        if isinstance(self.state, DraState):
            inventory, taken = self.state.inventory, self.state.taken()
        else:
            inventory, taken = self.state, {}
        return [vertex_of(d, graph, taken) for d in inventory.devices()]


@dataclass(frozen=True)
class DeviceRow:
    """One device for people (``fluence status``, ``fluence graph``)."""

    where: str
    """Its vertex's parent: its node's path, or the domain above the nodes it serves."""
    device: str
    """driver/pool/device."""
    attributes: str
    state: str
    """``free``, ``claim <namespace>/<name>``, or why it is not offered."""


def device_rows(graph: ResourceGraph, inventory: Inventory) -> list[DeviceRow]:
    """Every device vertex of ``graph``, free or held, then the pools of ``inventory``
    not offered and why."""
    reasons = {str(d.id): d.unsupported for d in inventory.devices() if d.unsupported}
    rows = []
    for vertex in graph.device_vertices():
        state = (f"claim {vertex.held_by}" if vertex.held_by is not None
                 else f"not offered: {reasons.get(vertex.name)}" if not vertex.offered
                 else "free")
        attributes = ", ".join(f"{key.rpartition('/')[2]}={value}"
                               for key, value in vertex.attributes)
        rows.append(DeviceRow(graph.device_parent(vertex), vertex.name, attributes, state))
    for pool in inventory.pools.values():
        if not pool.complete:
            rows.append(DeviceRow("", f"{pool.driver}/{pool.name}/*", "",
                                  f"not offered: pool generation {pool.generation} has "
                                  f"{pool.seen} of {pool.expected} slices"))
    return rows


def _shown(value: object) -> str:
    return value.text if isinstance(value, Version) else str(value)
