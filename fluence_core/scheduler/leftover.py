"""Holding what an overcommitted node has left, for a running pod that no longer fits.

A node can hold more than it has: two schedulers placed pods on it at once, or a
pod was bound by name without any scheduler. kube-scheduler then sees the node
full (its free CPU is negative) and places nothing there that asks for CPU.
Fluence's graph must say the same; otherwise the pod that does not fit is held
for nothing and the node looks as free as if it were not there, so Fluence would
keep placing pods on it.

:func:`hold_what_is_left` holds the node's remaining room, up to what the pod
requests: its free whole cores one by one, then the largest shares its pool still
grants, of millicores and then of memory. Each piece is a job of its own, given back
with the pod. GPUs are not filled (a pod holding GPUs holds whole cores, and those are).
"""

from __future__ import annotations

from collections.abc import Callable

from fluence_core.matcher.base import Allocation, Matcher
from fluence_core.matcher.jobspec import compute_jobspec
from fluence_core.models import PodRequest

_NAME = "left-over"


def hold_what_is_left(matcher: Matcher, node: str, request: PodRequest) -> list[Allocation]:
    """The jobs that hold ``node``'s remaining room, up to ``request``'s CPU and memory."""
    on_node = {"hostlist": [node]}

    def take(cores: int = 0, millicores: int = 0, mib: int = 0) -> Allocation | None:
        shaped = PodRequest(_NAME, cores=cores, memory_mib=mib,
                            millicores=None if cores else millicores)
        return matcher.match_allocate(compute_jobspec([shaped], on_node))

    millicores = request.millicores if request.millicores is not None else 1000 * request.cores
    held: list[Allocation] = []
    for _ in range(millicores // 1000):
        core = take(cores=1)
        if core is None:
            break
        held.append(core)
    held += _largest(lambda m: take(millicores=m), millicores - 1000 * len(held))
    held += _largest(lambda mib: take(mib=mib), request.memory_mib)
    return held


def _largest(take: Callable[[int], Allocation | None], wanted: int) -> list[Allocation]:
    """Pieces summing to as much of ``wanted`` as ``take`` grants: the largest piece that
    fits, then the largest of the rest (at most about 2 x log2(wanted) tries)."""
    held: list[Allocation] = []
    piece = wanted
    while wanted > 0 and piece > 0:
        allocation = take(piece)
        if allocation is None:
            piece //= 2
            continue
        held.append(allocation)
        wanted -= piece
        piece = min(piece, wanted)
    return held
