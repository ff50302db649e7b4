"""Bounded complete search for placing a group of pods of several shapes.

Placing pods one shape at a time, each on the first node with room, can take
the nodes a later shape needed and refuse a group that fits. This module finds
a placement when one exists, within a budget:

* it walks shapes most-constrained first, and for each pod tries the nodes the
  :class:`Placer` offers, backtracking on a dead end;
* pods of one shape are interchangeable, so they go to nodes in increasing
  position (each assignment is visited once, as a sorted multiset);
* two nodes with the same :meth:`Placer.signature` (the same free capacity and
  the same eligibility) lead to the same sub-searches, so at each step only the
  first of them is tried.

**The bound.** The search counts every tentative take of a node for a pod and
stops after ``budget`` of them (:data:`DEFAULT_BUDGET`). Under that bound it is
exact for every group of at most 6 pods on at most 5 nodes: the largest tree
there (three shapes of two pods) has 4,820 takes. Past the bound the search
gives up and says so (:attr:`SearchResult.exhausted`); the matcher then treats
the group as *not fitting now*, never as unsatisfiable, so it is retried in a
later cycle, when the cluster may have changed.

The search knows nothing of what a node holds: the :class:`Placer` checks and
deducts capacity, so the capacity model can change without touching it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Hashable, Iterator, Protocol, Sequence, TypeVar

DEFAULT_BUDGET = 10_000
"""Tentative takes before the search gives up (see the module docstring)."""

Taken = TypeVar("Taken")


class Placer(Protocol[Taken]):
    """The capacity model the search works over."""

    def candidates(self, shape: int, after: int | None) -> Iterator[int]:
        """Node positions that may take one pod of ``shape``, in the policy's order.

        ``after`` is the node of the previous pod of the same shape; only that
        node and those after it, in one fixed order of the placer's choosing,
        are wanted (``None``: all).
        """
        ...

    def take(self, shape: int, position: int) -> Taken | None:
        """Deduct one pod of ``shape`` from the node, or ``None`` when it does not fit."""
        ...

    def give_back(self, taken: Taken) -> None:
        """Undo one :meth:`take`."""
        ...

    def signature(self, shape: int, position: int) -> Hashable:
        """Equal for two nodes only when the rest of the search cannot tell them apart."""
        ...


@dataclass
class SearchResult(Generic[Taken]):
    """What the search found: one take per pod in the order asked, or nothing."""

    taken: list[tuple[int, Taken]] | None
    """(shape, what :meth:`Placer.take` returned) per pod, or ``None``."""
    exhausted: bool
    """Whether the budget ran out before the search could decide."""
    steps: int


def search(
    counts: Sequence[tuple[int, int]], placer: Placer[Taken], budget: int = DEFAULT_BUDGET
) -> SearchResult[Taken]:
    """Place ``count`` pods of each ``shape`` (in the order given), or prove it cannot be done.

    Iterative, so a gang of thousands of pods does not hit the recursion limit.
    On success the placer holds every take; on failure it holds none.
    """
    pods = [shape for shape, count in counts for _ in range(count)]
    if not pods:
        return SearchResult([], False, 0)
    taken: list[tuple[int, Taken]] = []
    positions: list[int] = []
    frames: list[tuple[Iterator[int], set[Hashable]]] = [
        (_options(pods, 0, positions, placer), set())
    ]
    steps = 0
    while frames:
        options, tried = frames[-1]
        depth = len(frames) - 1
        shape = pods[depth]
        advanced = False
        for position in options:
            signature = placer.signature(shape, position)
            if signature in tried:
                continue
            if steps >= budget:
                for _, held in reversed(taken):
                    placer.give_back(held)
                return SearchResult(None, True, steps)
            steps += 1
            held_now = placer.take(shape, position)
            if held_now is None:
                continue
            tried.add(signature)
            taken.append((shape, held_now))
            positions.append(position)
            advanced = True
            break
        if not advanced:
            frames.pop()
            if frames:  # the pod one level up tries its next node
                _, held = taken.pop()
                positions.pop()
                placer.give_back(held)
            continue
        if len(taken) == len(pods):
            return SearchResult(taken, False, steps)
        frames.append((_options(pods, len(taken), positions, placer), set()))
    return SearchResult(None, False, steps)


def _options(
    pods: Sequence[int], depth: int, positions: Sequence[int], placer: Placer[Taken]
) -> Iterator[int]:
    shape = pods[depth]
    after = positions[-1] if depth and pods[depth - 1] == shape else None
    return placer.candidates(shape, after)
