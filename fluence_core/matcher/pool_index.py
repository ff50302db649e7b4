"""Which node's shared pool takes a fractional pod first, found in log time.

The pool (:mod:`.pooled`) places a fractional pod on the first node, in rank order,
whose pool has room as it is, else on the first that can lease the cores it lacks.
Walking every node for that cost each pod O(nodes): ten thousand pods of ``100m``
on five thousand nodes meant fifty million checks, the term that grew
fastest with the cluster. Two max segment trees over node positions answer both
questions in ``log2(n)`` steps instead:

* ``now``: the millicores a node's pool has free without leasing;
* ``leasable``: what it could have by leasing every core it has (an upper bound:
  another job may hold some; a node whose lease failed is capped to ``now`` until
  something is given back).

A node that is down, or has reached its pod limit, is ``-1`` in both. Positions
follow the graph's node order; a removed node keeps its position, unusable.
"""

from __future__ import annotations

from collections.abc import Iterable

from fluence_core.matcher.maxtree import MaxTree


class PoolIndex:
    """Node names at positions in rank order, and the two trees of millicores."""

    def __init__(self) -> None:
        self._position: dict[str, int] = {}
        self.names: list[str] = []
        self._now = MaxTree([])
        self._leasable = MaxTree([])

    def __contains__(self, name: object) -> bool:
        return name in self._position

    def position(self, name: str) -> int | None:
        return self._position.get(name)

    def positions(self, names: Iterable[str]) -> list[int]:
        """The positions of those of ``names`` indexed here, ascending (a lone pod's hostlist
        of hundreds of names is read so: no Python call per name)."""
        at = self._position
        return sorted(map(at.__getitem__, filter(at.__contains__, names)))

    def add(self, name: str) -> None:
        """A node at the end (unusable until :meth:`update` says otherwise)."""
        if name in self._position:
            return
        self._position[name] = len(self.names)
        self.names.append(name)
        self._now.append(-1)
        self._leasable.append(-1)

    def update(self, name: str, now: int, leasable: int) -> None:
        position = self._position[name]
        self._now.set(position, now)
        self._leasable.set(position, max(now, leasable) if now >= 0 else -1)

    def remove(self, name: str) -> None:
        position = self._position.pop(name, None)
        if position is not None:
            self._now.set(position, -1)
            self._leasable.set(position, -1)

    def room(self, position: int) -> tuple[int, int]:
        """(now, leasable) millicores of the node at ``position``, as the trees hold them."""
        return self._now.get(position), self._leasable.get(position)

    def with_room(self, millicores: int, start: int = 0) -> int:
        """The first position from ``start`` whose pool has ``millicores`` free now, or -1."""
        return self._now.first_at_least(millicores, start)

    def could_lease(self, millicores: int, start: int = 0) -> int:
        """The first position from ``start`` that could reach ``millicores`` by leasing, or
        -1."""
        return self._leasable.first_at_least(millicores, start)
