"""A group's claims as device demands, taken inside the match that places its members.

Members whose claims ask alike (the same requests, classes, selectors, counts and
constraints, and the same claims already allocated) share one *demand*. Each slot of
the group's compute jobspec names its member's demand, and the embedded matcher asks
the :class:`DemandLedger` (the graph's :class:`~fluence_core.graph.DeviceDemands`
during the match) whether the demand fits on a node beside what the match holds so
far, takes it, and gives it back when its search backtracks. So the devices are found
in the same search as the members' cores and memory, inside the gang's topology
domain, all or none; what the ledger holds when the match is found is exactly what is
then written to the claims.

A demand's candidates on a node are what the allocator finds there
(:func:`~fluence_core.dra.allocator.allocate`): the devices the node reaches whose CEL
verdicts (kept on each device) accept them, grouped by ``matchAttribute``, free in the
cluster and not taken by this match. A claim already allocated pins its member to the
nodes its allocation's ``nodeSelector`` selects.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Hashable

from fluence_core.dra.allocator import Picked, allocate
from fluence_core.dra.claims import Claim
from fluence_core.dra.devices import Device, DeviceId
from fluence_core.dra.state import DraState
from fluence_core.feasibility.selectors import NodeSelector, SelectorError
from fluence_core.kube.api import KubeObject
from fluence_core.kube.meta import labels_of

_TOKENS = itertools.count(1)
"""Tokens are unique across ledgers: a matcher giving back a token of a match long
over (a job cancelled later) never touches the ledger of another."""


def selects(raw: Any, node: str, labels: Mapping[str, str]) -> bool:
    """Whether an allocation's ``nodeSelector`` (None: every node) selects ``node``."""
    if raw is None:
        return True
    try:
        return NodeSelector.parse(raw, "allocation.nodeSelector").matches(node, labels)
    except SelectorError:
        return False


def _spec(claim: Claim) -> tuple[Any, ...]:
    """What a claim asks for, without its name: equal for claims that ask alike."""
    requests = tuple((r.name, tuple((c.name, c.request, c.device_class, c.selectors, c.mode,
                                     c.count) for c in r.choices)) for r in claim.requests)
    constraints = tuple((m.attribute, tuple(sorted(m.requests))) for m in claim.constraints)
    return requests, constraints


@dataclass(frozen=True)
class Demand:
    """One member's claims: those to allocate (``todo``) and those already allocated."""

    todo: tuple[Claim, ...]
    pinned: tuple[Claim, ...]

    @property
    def key(self) -> str:
        """Equal for members whose claims ask alike (a jobspec names it)."""
        text = repr((tuple(_spec(c) for c in self.todo), tuple(sorted(c.key for c in self.pinned))))
        return "d" + hashlib.sha1(text.encode()).hexdigest()[:16]

    @property
    def devices(self) -> int:
        """The devices it asks for by count (an ``All`` request counts none)."""
        return sum(r.choices[0].count for c in self.todo for r in c.requests)


@dataclass
class _Taken:
    demand: str
    node: str
    picked: list[Picked]


@dataclass
class DemandLedger:
    """What one match of one group has taken of the devices (module docstring)."""

    state: DraState
    nodes: Mapping[str, KubeObject]
    demands: Mapping[str, Demand]
    """By key: the first member's of each (the others ask alike)."""
    used: set[DeviceId] = field(default_factory=set)
    held: dict[int, _Taken] = field(default_factory=dict)
    _tried: dict[tuple[str, str], list[Picked] | str] = field(default_factory=dict)
    """What :meth:`_find` answered since ``used`` last changed."""
    _seen: dict[DeviceId, str] = field(default_factory=dict)

    def _find(self, demand: str, node: str) -> list[Picked] | str:
        key = (demand, node)
        found = self._tried.get(key)
        if found is not None:
            return found
        wanted = self.demands.get(demand)
        if wanted is None:
            raise KeyError(f"no device demand {demand!r} is registered for this match")
        labels = labels_of(self.nodes.get(node) or {})
        found = []
        for claim in wanted.pinned:
            allocation = self.state.allocation_of(claim)
            if allocation is not None and not selects(allocation.get("nodeSelector"), node,
                                                      labels):
                found = f"ResourceClaim {claim.name} is allocated to devices out of reach"
                break
        if not isinstance(found, str) and wanted.todo:
            taken, used = self.state.taken(), self.used
            found = allocate(wanted.todo, self.state.near(node, labels), self.state.classes,
                             lambda d: d.id not in taken and d.id not in used,
                             self.state.memos.setdefault(node, {}))
        self._tried[key] = found
        return found

    def fits(self, demand: str, node: str) -> bool:
        return not isinstance(self._find(demand, node), str)

    def why(self, demand: str, node: str) -> str | None:
        """Why the demand does not fit on ``node`` now (None: it does)."""
        found = self._find(demand, node)
        return found if isinstance(found, str) else None

    def take(self, demand: str, node: str) -> int | None:
        found = self._find(demand, node)
        if isinstance(found, str):
            return None
        token = next(_TOKENS)
        self.held[token] = _Taken(demand, node, found)
        self.used.update(p.device.id for p in found)
        self._tried = {}
        return token

    def give_back(self, token: int) -> None:
        taken = self.held.pop(token, None)
        if taken is not None:
            self.used.difference_update(p.device.id for p in taken.picked)
            self._tried = {}

    def signature(self, node: str) -> Hashable:
        """What the demands can tell of ``node``: its own devices as selectors see them
        (driver, attributes, capacity; not their names), each free or not; which
        network-attached devices it reaches, each free or not; and whether each demand's
        claims already allocated may be used from it. Two nodes alike in all that lead
        the matcher's search to the same places, so it tries only one of them."""
        labels = labels_of(self.nodes.get(node) or {})
        taken, used = self.state.taken(), self.used
        local: list[tuple[str, bool]] = []
        network: list[tuple[DeviceId, bool]] = []
        for device in self.state.near(node, labels):
            free = device.id not in taken and device.id not in used
            if device.node is None:
                network.append((device.id, free))
            else:
                local.append((self._seen_as(device), free))
        pinned = tuple(all(selects((self.state.allocation_of(c) or {}).get("nodeSelector"),
                                   node, labels) for c in d.pinned)
                       for _, d in sorted(self.demands.items()))
        return tuple(sorted(local)), tuple(network), pinned

    def _seen_as(self, device: Device) -> str:
        """A device as a selector sees it (not its name), as text."""
        found = self._seen.get(device.id)
        if found is None:
            found = self._seen[device.id] = repr((
                device.id.driver, device.unsupported,
                sorted((d, sorted((k, repr(v)) for k, v in a.items()))
                       for d, a in device.attributes.items()),
                sorted((d, sorted(c.items())) for d, c in device.capacity.items())))
        return found

    def picks(self) -> dict[tuple[str, str], list[list[Picked]]]:
        """What the match holds, by (demand, node): one pick per slot taken there."""
        found: dict[tuple[str, str], list[list[Picked]]] = {}
        for token in sorted(self.held):
            taken = self.held[token]
            found.setdefault((taken.demand, taken.node), []).append(taken.picked)
        return found


def demands_of(state: DraState, members: Sequence[Sequence[Claim]],
               tentative: Mapping[tuple[str, str], object]) -> list[Demand | None] | None:
    """Each member's demand (None: it uses no claim), or None when two members share a
    claim not allocated yet (that one is allocated by the first and pins the others, which
    the member-by-member placement does)."""
    counts: dict[tuple[str, str], int] = {}
    for claims in members:
        for claim in {c.key: c for c in claims}.values():
            counts[claim.key] = counts.get(claim.key, 0) + 1
    found: list[Demand | None] = []
    for claims in members:
        if not claims:
            found.append(None)
            continue
        todo: list[Claim] = []
        pinned: list[Claim] = []
        for claim in claims:
            allocated = tentative.get(claim.key) or state.allocation_of(claim)
            if allocated is None and counts[claim.key] > 1:
                return None
            (todo if allocated is None else pinned).append(claim)
        found.append(Demand(tuple(todo), tuple(pinned)))
    return found
