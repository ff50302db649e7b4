"""A group's claims, allocated member by member together with the members' nodes.

:func:`plan_group` reads the claims of every pod of a group (or says why the
group waits: a template's claim not made yet, a claim missing, out of scope,
malformed). The :class:`DevicePlan` it returns answers, for one member and one
node, whether all that member's claims can be allocated there given what the
cluster holds and what the members placed before it took (:meth:`fits`), and
records the devices when the member is placed (:meth:`take`). Nothing is
written until the group is committed: :meth:`writes` then gives one
:class:`ClaimWrite` per claim, and a miss simply drops the plan
(:meth:`reset`). A group may instead have its devices found in the match itself
(:meth:`ledger`, :mod:`fluence_core.dra.demands`): the plan then adopts exactly what
the match took (:meth:`adopt`).

A claim already allocated (shared by several pods, allocated by another
scheduler, or by Fluence before a restart) pins its pods to the nodes its
``nodeSelector`` selects and is only reserved for them. A claim shared by
several members is allocated by the first of them and pins the others.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fluence_core.dra.allocator import Picked, allocate
from fluence_core.dra.claims import (
    MAX_RESERVATIONS, Claim, DeviceClass, OutOfScope, owned_by, pod_claims,
)
from fluence_core.dra.demands import Demand, DemandLedger, demands_of, selects
from fluence_core.dra.devices import DeviceId
from fluence_core.dra.state import ClaimKey, DraState
from fluence_core.kube.api import KubeObject
from fluence_core.kube.meta import labels_of, metadata_of


@dataclass(frozen=True)
class ClaimWrite:
    """What committing a group writes to one claim."""

    claim: Claim
    allocation: Mapping[str, Any] | None
    """The allocation to write (None: the claim is allocated already, only reserved)."""
    consumers: tuple[Mapping[str, str], ...]
    """``reservedFor`` entries to add: the pods (resource, name, uid)."""


def pod_reference(pod: KubeObject) -> dict[str, str]:
    metadata = metadata_of(pod)
    return {"resource": "pods", "name": str(metadata.get("name")),
            "uid": str(metadata.get("uid") or "")}


class NotMadeYet(str):
    """Why a group waits when a claim it names does not exist yet: no attempt was made,
    as kube-scheduler's PreEnqueue keeps such a pod aside without a backoff until the
    claim (or the pod's note of its template's claim) arrives."""


def plan_group(state: DraState, pods: Sequence[KubeObject],
               nodes: Mapping[str, KubeObject]) -> DevicePlan | str | None:
    """The group's plan, why it must wait (a :class:`NotMadeYet` when a claim does not
    exist yet), or None when none of its pods uses a claim; ``nodes`` by name
    (network-attached devices select nodes by their labels)."""
    members: list[list[Claim]] = []
    for pod in pods:
        metadata = metadata_of(pod)
        where = f"pod {metadata.get('namespace')}/{metadata.get('name')}"
        try:
            entries = pod_claims(pod)
        except ValueError as error:
            return f"{where}: {error}"
        claims = []
        for entry in entries:
            if entry.claim is None:
                return NotMadeYet(f"{where}: waiting for the ResourceClaim of its template "
                                  f"claim {entry.name!r} to be created")
            found = state.claim(str(metadata.get("namespace") or "default"), entry.claim)
            if found is None:
                return NotMadeYet(f'{where}: ResourceClaim "{entry.claim}" not found')
            if isinstance(found, OutOfScope):
                return f"{where}: {found}"
            if isinstance(found, Exception):  # its message names the claim
                return f"{where}: {found}"
            if entry.template and not owned_by(found, str(metadata.get("uid") or "")):
                return f"{where}: ResourceClaim {entry.claim} was not created for this pod"
            if metadata_of(found.obj).get("deletionTimestamp"):
                return f"{where}: ResourceClaim {entry.claim} is being deleted"
            if (len(found.reserved_for) >= MAX_RESERVATIONS
                    and not found.reserved_for_uid(str(metadata.get("uid") or ""))):
                return f"{where}: ResourceClaim {entry.claim} is reserved for too many pods"
            claims.append(found)
        members.append(claims)
    if not any(members):
        return None
    return DevicePlan(state, list(pods), members, nodes)


@dataclass
class DevicePlan:
    """The claims of one group's members, allocated as the members are placed."""

    state: DraState
    pods: list[KubeObject]
    members: list[list[Claim]]
    nodes: Mapping[str, KubeObject]
    """The nodes by name (network-attached devices select nodes by their labels)."""
    tentative: dict[ClaimKey, dict[str, Any]] = field(default_factory=dict)
    used: set[DeviceId] = field(default_factory=set)
    placed: dict[int, str] = field(default_factory=dict)
    _why: dict[int, Counter[str]] = field(default_factory=dict)
    demands: list[Demand | None] = field(default_factory=list)
    """Each member's demand, once :meth:`ledger` made them."""
    _unnamed: dict[int, Counter[str]] = field(default_factory=dict)
    """Reasons known from a verdict, the claims' names still placeholders (:meth:`why`)."""
    _shapes: dict[tuple[ClaimKey, ...], int] = field(default_factory=dict)
    _quick: dict[int, int | None] = field(default_factory=dict)
    """Per member, the shape of its claims when all of them are still to allocate and the
    plan holds no devices (the verdicts answer for it), else None."""

    def reset(self) -> None:
        """Forget every member's devices (the group missed, or is tried again)."""
        self.tentative, self.used, self.placed, self._why = {}, set(), {}, {}
        self._unnamed, self._quick = {}, {}

    def uses_claims(self, index: int) -> bool:
        return bool(self.members[index])

    def fits(self, index: int, node: str) -> bool:
        """Whether member ``index``'s claims can all be allocated (or used) from ``node``."""
        shape = self._quick.get(index, -1)
        if shape == -1:
            shape = self._quick[index] = self._quick_shape(index)
        if shape is not None:
            known = self.state.verdict(node, shape)
            if known is None:
                return True
            if isinstance(known, str):
                _count(self._unnamed, index, known)
                return False
        found = self._check(index, node, picking=False)
        if isinstance(found, str):
            _count(self._why, index, found)
            return False
        return True

    def _quick_shape(self, index: int) -> int | None:
        claims = self.members[index]
        if self.used or not claims or any(
                self.tentative.get(c.key) or self.state.allocation_of(c) for c in claims):
            return None
        return self._shape(claims)

    def why(self, index: int, nodes: int) -> str:
        """kube-scheduler's style of summary for a member no node took for its claims."""
        reasons = Counter(self._why.get(index) or {})
        for reason, count in (self._unnamed.get(index) or {}).items():
            reasons[_renamed(reason, self.members[index])] += count
        reasons = reasons or Counter({"cannot allocate all claims": nodes})
        counted = ", ".join(f"{n} {why}" for why, n in reasons.most_common(3))
        return f"0/{nodes} nodes can allocate its claims: {counted}"

    def take(self, index: int, node: str) -> None:
        """Member ``index`` goes to ``node``: its claims' devices are held by the plan."""
        found = self._check(index, node)
        if isinstance(found, str):
            raise ValueError(f"member {index} cannot take its devices on {node}: {found}")
        picked, todo = found
        for number, claim in enumerate(todo):
            mine = [p for p in picked if p.claim == number]
            self.tentative[claim.key] = allocation_body(claim, mine, node, self.state.classes)
            self.used.update(p.device.id for p in mine)
        self.placed[index] = node
        self._quick = {}

    def ledger(self) -> DemandLedger | None:
        """A ledger for matching every member's devices with the group (and
        :attr:`demands`, each member's), or None when members share a claim not allocated
        yet: then they are placed member by member."""
        self.reset()
        demands = demands_of(self.state, self.members, self.tentative)
        if demands is None:
            return None
        self.demands = demands
        by_key: dict[str, Demand] = {}
        for demand in demands:
            if demand is not None:
                by_key.setdefault(demand.key, demand)
        return DemandLedger(self.state, self.nodes, by_key)

    def adopt(self, ledger: DemandLedger, nodes: Mapping[int, str]) -> None:
        """The match put member ``index`` on ``nodes[index]``: its claims get exactly the
        devices ``ledger`` holds for its demand there (one slot's pick per member)."""
        self.reset()
        picks = ledger.picks()
        for index, node in sorted(nodes.items()):
            demand = self.demands[index] if index < len(self.demands) else None
            self.placed[index] = node
            if demand is None:
                continue
            pile = picks.get((demand.key, node))
            if not pile:
                raise ValueError(f"member {index}: the match holds no devices for it on {node}")
            picked = pile.pop(0)
            for number, claim in enumerate(demand.todo):
                mine = [p for p in picked if p.claim == number]
                self.tentative[claim.key] = allocation_body(claim, mine, node,
                                                            self.state.classes)
                self.used.update(p.device.id for p in mine)

    def writes(self) -> list[ClaimWrite]:
        """One write per claim of the placed members (new allocations first)."""
        consumers: dict[ClaimKey, list[Mapping[str, str]]] = {}
        claims: dict[ClaimKey, Claim] = {}
        for index in sorted(self.placed):
            reference = pod_reference(self.pods[index])
            for claim in self.members[index]:
                claims[claim.key] = claim
                if not claim.reserved_for_uid(reference["uid"]):
                    consumers.setdefault(claim.key, []).append(reference)
        found = [ClaimWrite(claims[k], self.tentative.get(k), tuple(consumers.get(k, ())))
                 for k in claims]
        return [w for w in found if w.allocation is not None or w.consumers]

    def _check(self, index: int, node: str,
               picking: bool = True) -> tuple[list[Picked], list[Claim]] | str:
        """Member ``index``'s devices on ``node`` and the claims they are for, or why
        not; without ``picking`` only whether (the devices may be left out)."""
        labels = labels_of(self.nodes.get(node) or {})
        todo = []
        for claim in self.members[index]:
            allocation = self.tentative.get(claim.key) or self.state.allocation_of(claim)
            if allocation is None:
                todo.append(claim)
            elif not selects(allocation.get("nodeSelector"), node, labels):
                return f"ResourceClaim {claim.name} is allocated to devices out of reach"
        if not todo:
            return [], []
        return self._allocate(todo, node, labels, picking)

    def _allocate(self, todo: list[Claim], node: str, labels: Mapping[str, str],
                  picking: bool) -> tuple[list[Picked], list[Claim]] | str:
        """Devices for ``todo`` on ``node``, or why not. Whether claims of the same shape
        fit on a node whose devices nobody took or let go since it was last asked is
        known without a search (when the plan holds no devices of its own): a lone pod
        checks a hundred nodes or more, most of them unchanged since the last pod asked."""
        shape = self._shape(todo) if not self.used else None
        if shape is not None:
            known = self.state.verdict(node, shape)
            if isinstance(known, str):
                return _renamed(known, todo)
            if known is None and not picking:
                return [], todo
        taken = self.state.taken()
        used = self.used
        found = allocate(todo, self.state.near(node, labels), self.state.classes,
                         lambda d: (d.id not in taken and d.id not in used
                                    and not self.state.held_elsewhere(d)),
                         self.state.memos.setdefault(node, {}))
        if isinstance(found, str):
            if shape is not None:
                self.state.remember(node, shape, _named(found, todo))
            return found
        if shape is not None:
            self.state.remember(node, shape, None)
        return found, todo

    def _shape(self, todo: list[Claim]) -> int:
        keys = tuple(c.key for c in todo)
        found = self._shapes.get(keys)
        if found is None:
            found = self._shapes[keys] = self.state.shape(
                tuple((c.requests, c.constraints) for c in todo))
        return found


_CLAIM = "\x00claim{}\x00"


def _count(counters: dict[int, Counter[str]], index: int, reason: str) -> None:
    counter = counters.get(index)
    if counter is None:
        counter = counters[index] = Counter()
    counter[reason] += 1


def _named(why: str, claims: Sequence[Claim]) -> str:
    """``why`` with the claims' names as placeholders, to be told of other claims alike."""
    for number, claim in enumerate(claims):
        why = why.replace(f"{claim.namespace}/{claim.name}", _CLAIM.format(number))
    return why


def _renamed(why: str, claims: Sequence[Claim]) -> str:
    for number, claim in enumerate(claims):
        why = why.replace(_CLAIM.format(number), f"{claim.namespace}/{claim.name}")
    return why


def allocation_body(claim: Claim, picked: Sequence[Picked], node: str,
                    classes: Mapping[str, DeviceClass]) -> dict[str, Any]:
    """``status.allocation`` as kube-scheduler writes it: the results, the classes' and the
    claim's configuration, and the nodes that can reach the devices."""
    results = [{"request": p.request, "driver": p.device.id.driver, "pool": p.device.id.pool,
                "device": p.device.id.device} for p in picked]
    config: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for p in picked:
        if (p.request, p.device_class) in seen:
            continue
        seen.add((p.request, p.device_class))
        device_class = classes.get(p.device_class)
        for entry in device_class.config if device_class is not None else ():
            config.append({"source": "FromClass", "requests": [p.request], **entry})
    for entry in claim.config:
        config.append({"source": "FromClaim", **entry})
    devices: dict[str, Any] = {"results": results}
    if config:
        devices["config"] = config
    body: dict[str, Any] = {"devices": devices}
    selector = _node_selector([p.device for p in picked], node)
    if selector is not None:
        body["nodeSelector"] = selector
    return body


def _node_selector(devices: Sequence[Any], node: str) -> dict[str, Any] | None:
    """Node-local devices: that node; all network-attached to every node: none; otherwise
    the one selector they share, or that node (narrower, never wrong)."""
    this_node = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    if any(d.node is not None for d in devices):
        return this_node
    selectors = [d.raw_selector for d in devices if not d.all_nodes]
    if not selectors:
        return None
    first = selectors[0]
    return dict(first) if all(s == first for s in selectors) else this_node
