"""A brute-force oracle for the matcher properties, and the set-up the properties share.

The properties of ``test_mixed_groups`` and ``test_topology`` draw small clusters and groups
of a few pod shapes, let the matcher place a background group first, then compare what the
matcher does with :func:`brute_force` over what each node has left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from hypothesis import strategies as st

from fluence_core.graph import ResourceGraph
from fluence_core.matcher.base import Matcher
from fluence_core.matcher.group import GroupMatch, match_group
from fluence_core.matcher.jobspec import is_compute
from fluence_core.models import Group, PodRequest

Shape = tuple[int, int, int]
"""(cores, memory MiB, GPUs) of a pod."""
Factory = Callable[[ResourceGraph, str], Matcher]
"""The ``matcher_factory`` fixture: a matcher over a graph with a policy."""
POLICIES = ["first", "lonode", "hinode", "low", "high"]
"""The match policies the properties draw from."""


@dataclass
class Free:
    """What a node has free, in the graph's units: cores, GPUs, memory chunks."""

    cores: int
    gpus: int
    chunks: int
    chunk_mib: int


def need(pod: PodRequest, free: Free) -> tuple[int, int, int] | None:
    """(cores, GPUs, chunks) the pod takes on this node; None when memory cannot be had at all."""
    if pod.memory_mib and not free.chunk_mib:
        return None
    chunks = -(-pod.memory_mib // free.chunk_mib) if pod.memory_mib else 0
    return pod.cores, pod.gpus, chunks


def brute_force(pods: list[PodRequest], nodes: list[Free]) -> bool:
    """Whether some assignment of every pod to a node fits (tries them all, with pruning on
    overflow only)."""
    left = [[n.cores, n.gpus, n.chunks] for n in nodes]

    def place(i: int) -> bool:
        if i == len(pods):
            return True
        for j, free in enumerate(nodes):
            wanted = need(pods[i], free)
            if wanted is None or any(w > room for w, room in zip(wanted, left[j])):
                continue
            for k in range(3):
                left[j][k] -= wanted[k]
            if place(i + 1):
                return True
            for k in range(3):
                left[j][k] += wanted[k]
        return False

    return place(0)


def pods_of_shapes(draw: st.DrawFn, shape: st.SearchStrategy[Shape],
                   most: int) -> tuple[list[PodRequest], list[PodRequest]]:
    """A group of one to three shapes, one to three pods each (at most ``most`` in all), and
    a background of one or two pods of another drawn shape, or none."""
    shapes = draw(st.lists(shape, min_size=1, max_size=3, unique=True))
    counts = draw(st.lists(st.integers(1, 3), min_size=len(shapes), max_size=len(shapes)))
    pods = [PodRequest(f"p{s}-{i}", cores=c, memory_mib=m, gpus=g)
            for s, ((c, m, g), count) in enumerate(zip(shapes, counts))
            for i in range(count)][:most]
    background_shape = draw(st.none() | shape)
    background: list[PodRequest] = []
    if background_shape is not None:
        c, m, g = background_shape
        background = [PodRequest(f"b{i}", cores=c, memory_mib=m, gpus=g)
                      for i in range(draw(st.integers(1, 2)))]
    return pods, background


def free_after_background(graph: ResourceGraph, matcher: Matcher,
                          background: list[PodRequest]) -> list[Free]:
    """Each node's free capacity once ``matcher`` holds ``background`` (when it places it)."""
    held = None
    if background:
        first = match_group(Group("background", tuple(background)), graph, matcher)
        held = first if isinstance(first, GroupMatch) else None
    return free_after(graph, held)


def free_after(graph: ResourceGraph, held: GroupMatch | None) -> list[Free]:
    """Each node's free capacity once the background group holds its share."""
    free = {n.name: Free(n.cores, n.gpus, n.memory_chunks, n.chunk_mib) for n in graph.nodes}
    for kind, allocation in (held.allocations.items() if held else ()):
        if not is_compute(kind):
            continue
        for share in allocation.nodes:
            entry = free[share.node]
            entry.cores -= len(share.cores)
            entry.gpus -= len(share.gpus)
            entry.chunks -= len(share.memory)
    return [free[n.name] for n in graph.nodes]


def check_capacity(
    graph: ResourceGraph, result: GroupMatch, free: list[Free], pods: list[PodRequest]
) -> None:
    """Every node holds no more than it had free, counted from the allocations and per pod."""
    by_name = dict(zip((n.name for n in graph.nodes), free))
    held: dict[str, list[int]] = {}
    for kind, allocation in result.allocations.items():
        if not is_compute(kind):
            continue
        for share in allocation.nodes:
            entry = held.setdefault(share.node, [0, 0, 0])
            entry[0] += len(share.cores)
            entry[1] += len(share.gpus)
            entry[2] += len(share.memory)
    for name, (cores, gpus, chunks) in held.items():
        room = by_name[name]
        assert cores <= room.cores and gpus <= room.gpus and chunks <= room.chunks, (
            f"{name} holds cores={cores} gpus={gpus} chunks={chunks}, only {room} was free"
        )
    per_node: dict[str, list[int]] = {}
    for pod in pods:
        placed = result.placements[pod.key].node
        assert placed is not None, f"{pod.key} has no node"
        wanted = need(pod, by_name[placed])
        assert wanted is not None, f"{pod.key} needs memory, {placed} has none"
        entry = per_node.setdefault(placed, [0, 0, 0])
        for k in range(3):
            entry[k] += wanted[k]
    for name, (cores, gpus, chunks) in per_node.items():
        room = by_name[name]
        assert cores <= room.cores and gpus <= room.gpus and chunks <= room.chunks, (
            f"pods on {name} need cores={cores} gpus={gpus} chunks={chunks}, only {room} was free"
        )
