"""Reading allocations back into a placement per pod.

A matcher reports what a job holds per node, not which slot went where (Fluxion
does not label slots in its output). Each pod is assigned to a node whose held
cores, GPUs and memory still cover it, by a small backtracking search, so the
same reader serves every matcher.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from fluence_core.errors import MatcherError
from fluence_core.matcher.jobspec import compute_parts, is_compute
from fluence_core.log import logger
from fluence_core.matcher.base import Allocation, NodeShare
from fluence_core.models import Group, PodRequest


@dataclass
class PodPlacement:
    """Where one pod goes and what virtual resources it got."""

    pod: str
    node: str | None = None
    backend: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)
    virtual: dict[str, list[str]] = field(default_factory=dict)


def read_placements(group: Group, allocations: Mapping[str, Allocation]) -> dict[str, PodPlacement]:
    """Per-pod placements from the group's allocations, keyed by jobspec kind."""
    placements = {pod.key: PodPlacement(pod=pod.key) for pod in group.pods}
    for kind, members in compute_parts(list(group.pods)):
        compute = allocations.get(kind)
        if compute is not None:
            for pod_key, node in _assign_nodes(members, compute.nodes).items():
                placements[pod_key].node = node
    for kind, allocation in allocations.items():
        if is_compute(kind):
            continue
        shares = list(allocation.virtual)
        for pod in group.pods:
            wanted = pod.virtual.get(kind, 0)
            taken, shares = shares[:wanted], shares[wanted:]
            if len(taken) < wanted:
                raise MatcherError(
                    f"allocation {allocation.jobid} holds too few {kind} for {pod.key}"
                )
            placement = placements[pod.key]
            placement.virtual[kind] = [s.name for s in taken]
            if taken and placement.backend is None:
                placement.backend = taken[0].backend
                placement.attributes = dict(taken[0].attributes)
    for placement in placements.values():
        logger.debug(
            "placement %s -> node=%s backend=%s", placement.pod, placement.node, placement.backend
        )
    return placements


def _assign_nodes(pods: list[PodRequest], shares: tuple[NodeShare, ...]) -> dict[str, str]:
    if pods and all(p.shared for p in pods):
        # one shape drawing from the pool: each share names how many of them it holds
        slots = [s.node for s in shares for _ in range(s.pods)]
        if len(slots) != len(pods):
            raise MatcherError(f"the shared allocation holds {len(slots)} pods, not {len(pods)}")
        return {pod.key: node for pod, node in zip(pods, slots)}
    return assign_pods(pods, {s.node: (len(s.cores), len(s.gpus), s.memory_mib) for s in shares})


def assign_pods(
    pods: list[PodRequest], room: Mapping[str, tuple[int, int, int]]
) -> dict[str, str]:
    """Pod key -> node, each pod within the (cores, GPUs, MiB) left on its node and among
    the nodes it is ``allowed`` (when that is known); raises MatcherError when the room
    does not cover the pods."""
    capacity = {node: list(free) for node, free in room.items()}
    if len({(p.cores, p.gpus, p.memory_mib, p.allowed) for p in pods}) == 1:
        allowed = pods[0].allowed if pods else None
        return _assign_alike(pods, {n: free for n, free in capacity.items()
                                    if allowed is None or n in allowed})
    order = sorted(pods, key=lambda p: (p.cores, p.gpus, p.memory_mib), reverse=True)
    chosen: dict[str, str] = {}

    def place(i: int) -> bool:
        if i == len(order):
            return True
        pod = order[i]
        tried: set[tuple[int, int, int]] = set()
        for node, free in capacity.items():
            if pod.allowed is not None and node not in pod.allowed:
                continue
            signature = (free[0], free[1], free[2])
            if signature in tried:
                continue
            tried.add(signature)
            if free[0] >= pod.cores and free[1] >= pod.gpus and free[2] >= pod.memory_mib:
                free[0] -= pod.cores
                free[1] -= pod.gpus
                free[2] -= pod.memory_mib
                chosen[pod.key] = node
                if place(i + 1):
                    return True
                free[0] += pod.cores
                free[1] += pod.gpus
                free[2] += pod.memory_mib
        return False

    if not place(0):
        raise MatcherError(
            "the allocation does not cover the group's pods: "
            + ", ".join(f"{n}={c}" for n, c in capacity.items())
        )
    return chosen


def _assign_alike(pods: list[PodRequest], capacity: dict[str, list[int]]) -> dict[str, str]:
    """Pods of one shape: each node takes as many as it covers, in turn. For alike pods
    that is exact (no backtracking can do better), and it needs no recursion, whose depth
    would be the number of pods (a gang of 1,000 passed Python's limit)."""
    pod = pods[0]
    chosen: dict[str, str] = {}
    remaining = iter(pods)
    left = len(pods)
    for node, free in capacity.items():
        fits = min(free[0] // pod.cores if pod.cores else left,
                   free[1] // pod.gpus if pod.gpus else left,
                   free[2] // pod.memory_mib if pod.memory_mib else left, left)
        for _ in range(fits):
            chosen[next(remaining).key] = node
        free[0] -= fits * pod.cores
        free[1] -= fits * pod.gpus
        free[2] -= fits * pod.memory_mib
        left -= fits
        if not left:
            return chosen
    raise MatcherError(
        "the allocation does not cover the group's pods: "
        + ", ".join(f"{n}={c}" for n, c in capacity.items())
    )
