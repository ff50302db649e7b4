"""Free capacity per topology domain, for any matcher, and why a group misses its level.

The embedded matcher keeps its own running counts (:mod:`.embedded`); this module reads
what any matcher holds (:meth:`Matcher.allocations`), so it serves Fluxion too: the order
in which :mod:`.group` tries domains one by one, the Event of a gang that must wait for
its domain, and what ``fluence status`` and ``fluence plan`` show.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from fluence_core import names
from fluence_core.graph import Domain, NodeVertex, ResourceGraph
from fluence_core.matcher.base import Allocation, Matcher
from fluence_core.models import Group
from fluence_core.topology import is_known, level_index


@runtime_checkable
class LeasesVertices(Protocol):
    """A matcher that holds vertices for itself beside the jobs it lists (the shared pool's
    core and memory leases): what is free of a domain must leave those out too."""

    def vertex_allocations(self) -> Mapping[int, Allocation]: ...


@dataclass
class Room:
    """Capacity of one domain: totals of its usable nodes, and what is free of them."""

    nodes: int = 0
    cores: int = 0
    gpus: int = 0
    memory_mib: int = 0
    free_cores: int = 0
    free_gpus: int = 0
    free_memory_mib: int = 0


def _holding_vertices(matcher: Matcher | None) -> Iterable[Allocation]:
    """What holds the matcher's vertices: its jobs, and the shared pool's leases."""
    if isinstance(matcher, LeasesVertices):
        return matcher.vertex_allocations().values()
    if matcher is not None:
        return matcher.allocations().values()
    return ()


def rooms(graph: ResourceGraph, matcher: Matcher | None, level: int, *,
          known_only: bool = True) -> dict[Domain, Room]:
    """Each domain of ``level`` with its capacity and what the matcher's allocations leave
    (all of it without a matcher): cores and memory chunks leased to the shared pool are
    not free (they are what the pool's fractional pods use)."""
    return rooms_of(graph.domains(level, known_only=known_only), held_by_node(matcher))


Held = dict[str, tuple[int, int, int]]
"""Node name -> (cores, GPUs, MiB) the matcher holds on it."""


def held_by_node(matcher: Matcher | None) -> Held:
    """What the matcher's allocations (and the shared pool's leases) hold on each node."""
    held: dict[str, tuple[int, int, int]] = {}
    for allocation in _holding_vertices(matcher):
        for share in allocation.nodes:
            cores, gpus, mib = held.get(share.node, (0, 0, 0))
            held[share.node] = (cores + len(share.cores), gpus + len(share.gpus),
                                mib + share.memory_mib)
    return held


def rooms_of(partition: Mapping[Domain, Iterable[NodeVertex]], held: Held) -> dict[Domain, Room]:
    """The room of each set of nodes (a domain's, a label value's), given what is held."""
    found: dict[Domain, Room] = {}
    for domain, nodes in partition.items():
        room = found[domain] = Room()
        for node in nodes:
            if node.down:
                continue
            cores, gpus, mib = held.get(node.name, (0, 0, 0))
            memory = node.memory_chunks * node.chunk_mib
            room.nodes += 1
            room.cores += node.cores
            room.gpus += node.gpus
            room.memory_mib += memory
            room.free_cores += max(0, node.cores - cores)
            room.free_gpus += max(0, node.gpus - gpus)
            room.free_memory_mib += max(0, memory - mib)
    return found


def partition(graph: ResourceGraph, nodes: Iterable[NodeVertex], keys: Sequence[str]
              ) -> dict[Domain, list[NodeVertex]]:
    """``nodes`` split by the domains of ``keys`` (each a configured level's label or type,
    or any node label): the nodes of one part share a domain of every key. A configured
    level's domain is named from the widest level down, as the graph names it; another
    label's by its value, ``kubernetes.io/hostname`` by the node's name. A node without one
    of the keys (or in a level's unknown domain) is in no part: it cannot promise to share
    a domain with anyone."""
    found: dict[Domain, list[NodeVertex]] = {}
    depths = [level_index(graph.levels, key) for key in keys]
    for node in nodes:
        name: list[str] = []
        for key, depth in zip(keys, depths):
            if depth is not None:
                domain = node.domains[: depth + 1]
                if not is_known(domain):
                    break
                name.extend(domain)
            elif key == names.HOSTNAME_LABEL:
                name.append(node.name)
            else:
                value = node.labels.get(key)
                if not value:
                    break
                name.append(value)
        else:
            found.setdefault(tuple(name), []).append(node)
    return found


def best_fit(found: dict[Domain, Room], group: Group) -> list[Domain]:
    """Domains that could hold ``group`` by their free totals, tightest first (free GPUs
    first when it asks for GPUs, then free cores), as the embedded matcher orders them."""
    cores, gpus, _ = need(group)
    fitting = [d for d, r in found.items() if r.free_cores >= cores and r.free_gpus >= gpus]
    if gpus:
        return sorted(fitting, key=lambda d: (found[d].free_gpus, found[d].free_cores))
    return sorted(fitting, key=lambda d: (found[d].free_cores, found[d].free_gpus))


def fewest_children(graph: ResourceGraph, below: dict[Domain, Room], domain: Domain,
                    group: Group) -> list[str] | None:
    """The nodes of the fewest domains one level below ``domain`` (``below``: that level's
    rooms) whose free totals could hold ``group`` (:func:`fewest_holding`); None when that
    takes all of them. A group bigger than one rack is tried there before the whole block,
    as the embedded matcher does (:meth:`EmbeddedMatcher._fewest_children`)."""
    cores, gpus, _ = need(group)
    chosen = fewest_holding([d for d in below if d[: len(domain)] == domain],
                            lambda d: (below[d].free_cores, below[d].free_gpus), cores, gpus)
    if chosen is None:
        return None
    depth = len(domain)
    wanted = set(chosen)
    return [n.name for n in graph.domains(depth - 1, known_only=False).get(domain, [])
            if n.domains[: depth + 1] in wanted]


Child = TypeVar("Child", int, Domain)
"""A domain as the embedded matcher numbers it, or as the graph names it."""


def fewest_holding(children: Iterable[Child], free: Callable[[Child], tuple[int, int]],
                   cores: int, gpus: int) -> list[Child] | None:
    """The fewest ``children`` (the domains one level below a group's domain) whose free
    ``(cores, GPUs)`` together reach ``cores`` and ``gpus``: taken emptiest first (most free
    GPUs first when the group asks for any, else most free cores; ties by the child itself,
    so the choice is repeatable). None when that takes every child, or all of them fall
    short: then nothing narrower than the whole domain is worth trying.

    One rule for both data shapes that hold free capacity: the embedded matcher's running
    counts and the rooms read from any matcher's allocations (:func:`fewest_children`)."""

    def emptiest(child: Child) -> tuple[int, int, Child]:
        free_cores, free_gpus = free(child)
        return (-free_gpus, -free_cores, child) if gpus else (-free_cores, -free_gpus, child)

    ordered = sorted(children, key=emptiest)
    chosen: list[Child] = []
    total_cores = total_gpus = 0
    for child in ordered:
        if total_cores >= cores and total_gpus >= gpus:
            break
        chosen.append(child)
        child_cores, child_gpus = free(child)
        total_cores += child_cores
        total_gpus += child_gpus
    if len(chosen) == len(ordered) or total_cores < cores or total_gpus < gpus:
        return None
    return chosen


def need(group: Group) -> tuple[int, int, int]:
    """(whole cores, GPUs, MiB) the group's pods ask for in all."""
    return (sum(p.cores for p in group.pods if not p.shared), sum(p.gpus for p in group.pods),
            sum(p.memory_mib for p in group.pods))


def short_of(graph: ResourceGraph, matcher: Matcher, group: Group, level: int) -> str:
    """Why ``group`` waits for one domain of ``level``: the best domain and what it lacks."""
    kind = graph.levels[level]
    return _short_of(group, rooms(graph, matcher, level), kind.type, kind.label)


def short_of_labels(graph: ResourceGraph, matcher: Matcher, group: Group,
                    keys: Sequence[str]) -> str:
    """Why ``group`` waits for one set of nodes sharing the values of node labels ``keys``
    (no configured level): the best such set and what it lacks."""
    found = rooms_of(partition(graph, graph.nodes, keys), held_by_node(matcher))
    label = ", ".join(keys)
    return _short_of(group, found, "domain of node label" + ("s" if len(keys) > 1 else ""),
                     label, named=lambda d: ",".join(f"{k}={v}" for k, v in zip(keys, d)))


def _short_of(group: Group, found: dict[Domain, Room], kind: str, label: str,
              named: Callable[[Domain], str] = "/".join) -> str:
    cores, gpus, mib = need(group)
    asks = f"{len(group.pods)} pods, {cores} cores" + (f", {gpus} GPUs" if gpus else "") + (
        f", {mib} MiB" if mib else "")
    head = f"group {group.name} must stay inside one {kind} ({label}); it needs {asks}"
    if not found:
        return f"{head}, but no node has the label {label}"

    def lack(room: Room) -> tuple[int, int, int]:
        return (max(0, gpus - room.free_gpus), max(0, cores - room.free_cores),
                max(0, mib - room.free_memory_mib))

    best = min(found, key=lambda d: (lack(found[d]), -found[d].free_cores, d))
    room = found[best]
    missing_gpus, missing_cores, missing_mib = lack(room)
    parts = [f"{n} {what}" for n, what in ((missing_cores, "cores"), (missing_gpus, "GPUs"),
                                           (missing_mib, "MiB")) if n]
    lacks = ("lacks " + ", ".join(parts)) if parts else (
        "has the free totals, but not on nodes (or nodes its pods may use) that fit each pod")
    return (f"{head}; the best {kind} is {named(best)} with {room.free_cores} cores"
            + (f", {room.free_gpus} GPUs" if gpus else "")
            + f" free on {room.nodes} nodes: it {lacks}")


@dataclass
class DomainRow:
    """One domain of the hierarchy, for display: where it is, its level's type, its room."""

    domain: Domain
    type: str
    room: Room

    @property
    def name(self) -> str:
        return self.domain[-1]


def hierarchy(graph: ResourceGraph, matcher: Matcher | None = None) -> list[DomainRow]:
    """Every domain, each followed by the domains inside it (unknown ones too), with its
    capacity and what is free of it."""
    found: dict[Domain, DomainRow] = {}
    for level, kind in enumerate(graph.levels):
        for domain, room in rooms(graph, matcher, level, known_only=False).items():
            found[domain] = DomainRow(domain, kind.type, room)
    return [found[domain] for domain in sorted(found)]


@dataclass
class ZoneRow:
    """One NUMA zone of a node, for display: its NodeResourceTopology name, whether the
    node's kubelet enforces ``single-numa-node``, and its room (``nodes`` is 1)."""

    node: str
    zone: str
    policy: bool
    room: Room


def zone_rows(graph: ResourceGraph, matcher: Matcher | None = None) -> list[ZoneRow]:
    """Every NUMA zone of every node that publishes zones, node by node, with its capacity
    and what the matcher's allocations leave of it (none for a graph without zones)."""
    zoned = {node.name: node for node in graph.nodes if node.zones}
    held: dict[tuple[str, int], list[int]] = {}  # (node, zone) -> [cores, gpus, chunks]
    for allocation in _holding_vertices(matcher):
        for share in allocation.nodes:
            vertex = zoned.get(share.node)
            if vertex is None:
                continue
            for column, (kind, ids) in enumerate((("core", share.cores), ("gpu", share.gpus),
                                                  ("memory", share.memory))):
                for index in ids:
                    zone = vertex.zone_of(kind, index)
                    if zone is not None:
                        held.setdefault((vertex.name, zone), [0, 0, 0])[column] += 1
    rows = []
    for node in zoned.values():
        for number, span in enumerate(node.zones):
            cores, gpus, chunks = (stop - start for start, stop in
                                   (span.cores, span.gpus, span.memory))
            used = held.get((node.name, number), [0, 0, 0])
            rows.append(ZoneRow(node.name, span.name, node.single_numa_policy, Room(
                nodes=1, cores=cores, gpus=gpus, memory_mib=chunks * node.chunk_mib,
                free_cores=max(0, cores - used[0]), free_gpus=max(0, gpus - used[1]),
                free_memory_mib=max(0, chunks - used[2]) * node.chunk_mib)))
    return rows
