"""The order in which a policy considers nodes for a slot, kept current as cores change.

Two families, as Fluxion's policies behave:

* rank order (``first``, ``lonode``, ``hinode``): nodes by rank, packing each
  before the next; a max segment tree of free cores finds the next node with
  room in ``log2(n)`` steps;
* id order (``low``, ``high``): the node holding the lowest (highest) free core
  id comes first, ties by rank, so work spreads across equally-used nodes the
  way Fluxion's id scoring spreads it; nodes sit in buckets by that id.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Iterator, Protocol

from fluence_core.matcher.maxtree import MaxTree


class NodeOrder(Protocol):
    """Candidate node positions for a slot needing ``cores`` free cores."""

    def add(self, free_cores: int, usable: bool) -> None: ...

    def update(self, position: int, free_cores: int, usable: bool) -> None: ...

    def candidates(self, cores: int, cursor: int | None) -> Iterator[int]: ...


class RankOrder:
    """Nodes by rank (ascending or descending), skipping those without room."""

    def __init__(self, descending: bool) -> None:
        self._descending = descending
        self._tree = MaxTree([])

    def add(self, free_cores: int, usable: bool) -> None:
        self._tree.append(free_cores.bit_count() if usable else -1)

    def update(self, position: int, free_cores: int, usable: bool) -> None:
        self._tree.set(position, free_cores.bit_count() if usable else -1)

    def candidates(self, cores: int, cursor: int | None) -> Iterator[int]:
        """Nodes with at least ``cores`` free, from ``cursor`` on (a cursor is safe
        within one match: earlier nodes only lose room)."""
        tree = self._tree
        if self._descending:
            position = tree.last_at_least(cores, cursor)
            while position >= 0:
                yield position
                position = tree.last_at_least(cores, position - 1) if position else -1
        else:
            position = tree.first_at_least(cores, cursor or 0)
            while position >= 0:
                yield position
                position = tree.first_at_least(cores, position + 1)


class IdOrder:
    """Nodes by their lowest (or highest) free core id, then by rank."""

    def __init__(self, highest: bool) -> None:
        self._highest = highest
        self._buckets: dict[int, list[int]] = {}
        self._keys: list[int | None] = []
        self._free: list[int] = []

    def _key(self, free_cores: int, usable: bool) -> int | None:
        if not usable or not free_cores:
            return None
        if self._highest:
            return free_cores.bit_length() - 1
        return (free_cores & -free_cores).bit_length() - 1

    def add(self, free_cores: int, usable: bool) -> None:
        self._keys.append(None)
        self._free.append(0)
        self.update(len(self._keys) - 1, free_cores, usable)

    def update(self, position: int, free_cores: int, usable: bool) -> None:
        self._free[position] = free_cores.bit_count() if usable else 0
        old, new = self._keys[position], self._key(free_cores, usable)
        if old == new:
            return
        if old is not None:
            bucket = self._buckets[old]
            del bucket[bisect_left(bucket, position)]
            if not bucket:
                del self._buckets[old]
        if new is not None:
            insort(self._buckets.setdefault(new, []), position)
        self._keys[position] = new

    def candidates(self, cores: int, cursor: int | None) -> Iterator[int]:
        free = self._free
        for key in sorted(self._buckets, reverse=self._highest):
            for position in list(self._buckets.get(key, ())):
                if free[position] >= cores:
                    yield position
