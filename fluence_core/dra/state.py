"""What the scheduler knows of DRA: slices, classes, claims, and which devices are taken.

:class:`DraState` is fed by the scheduler's list and watch of ResourceSlices,
DeviceClasses and ResourceClaims. A device is *taken* when a claim's
``status.allocation`` names it, whoever wrote it (Fluence, kube-scheduler,
another scheduler), or when Fluence has allocated it in a commit whose claim
write the watch has not shown yet (:meth:`DraState.assume`). The claims' status
is the record: after a restart the same listing gives the same taken set, so
nothing is allocated twice, and there is no other record to restore.

Releasing is the resourceclaim controller's job (kube-controller-manager): it
removes a finished or deleted pod from ``reservedFor`` and, when a claim with
the ``resource.kubernetes.io/delete-protection`` finalizer is reserved for no
one, clears its allocation. The watch shows that, and the device is free again.

Preemption sees two overlays on the taken set (:meth:`DraState.taken`): the claims
its victims alone hold count as free while it tries a set of victims (:meth:`freeing`),
since the controller deallocates them once those pods are gone; and the devices a
nominated group was promised stay taken for everyone else until it binds (:meth:`hold`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fluence_core.dra.allocator import Memo
from fluence_core.dra.claims import Claim, DeviceClass, read_claim, read_class
from fluence_core.dra.devices import Device, DeviceId, Inventory
from fluence_core.kube.api import DELETED, KubeObject
from fluence_core.kube.meta import metadata_of
from fluence_core.log import logger

ClaimKey = tuple[str, str]

SLICES = "resourceslices"
CLASSES = "deviceclasses"
CLAIMS = "resourceclaims"
PLURALS = frozenset({SLICES, CLASSES, CLAIMS})


def allocated_devices(allocation: Mapping[str, object] | None) -> list[DeviceId]:
    """The devices an ``AllocationResult`` names."""
    if not isinstance(allocation, Mapping):
        return []
    devices = allocation.get("devices")
    results = devices.get("results") if isinstance(devices, Mapping) else None
    found = []
    for result in results or []:
        if isinstance(result, Mapping):
            found.append(DeviceId(str(result.get("driver")), str(result.get("pool")),
                                  str(result.get("device"))))
    return found


@dataclass
class DraState:
    """Slices, classes and claims as watched, and the taken devices (module docstring)."""

    inventory: Inventory = field(default_factory=Inventory)
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[ClaimKey, KubeObject] = field(default_factory=dict)
    assumed: dict[ClaimKey, Mapping[str, object]] = field(default_factory=dict)
    """Allocations Fluence committed whose claim write the watch has not shown yet."""
    _taken: dict[DeviceId, ClaimKey] | None = None
    """Built once from every claim, then kept up to date claim by claim (:meth:`_retake`)."""
    _held: dict[ClaimKey, list[DeviceId]] = field(default_factory=dict)
    """What each claim holds in ``_taken``."""
    _holders: dict[DeviceId, list[ClaimKey]] = field(default_factory=dict)
    """Every claim naming each device: more than one only when something else allocated a
    device twice, and then the device stays taken until the last of them lets it go."""
    _near: dict[str, list[Device]] = field(default_factory=dict)
    _local: dict[str, list[Device]] | None = None
    """Node-local devices by node, built in one pass over the inventory."""
    _network: list[Device] = field(default_factory=list)
    _node_of: dict[DeviceId, str | None] = field(default_factory=dict)
    memos: dict[str, Memo] = field(default_factory=dict)
    """Per node, which of its devices match each selector set (:data:`Memo`)."""
    verdicts: dict[tuple[str, int], tuple[tuple[int, int, int], str | None]] = field(
        default_factory=dict)
    """By node and :meth:`shape`, whether such claims could be allocated there (None) or
    why not, with the :meth:`stamp` it was found at (:meth:`verdict`)."""
    _shapes: dict[Hashable, int] = field(default_factory=dict)
    _epoch: int = 0
    _changes: dict[str | None, int] = field(default_factory=dict)
    """Per node (None: network-attached devices), how often one of its devices was taken
    or let go."""
    _parsed: dict[ClaimKey, tuple[str, Claim | Exception]] = field(default_factory=dict)
    elsewhere: Callable[[Device], bool] | None = None
    """Whether a device is held outside the claims, by another accounting of the same thing
    (the graph's backends, for the QPU driver's devices); None: nothing else holds any."""
    _freed: frozenset[ClaimKey] = frozenset()
    """Claims whose devices count as free (a preemption's trial: :meth:`freeing`)."""
    _holds: dict[str, frozenset[DeviceId]] = field(default_factory=dict)
    """Devices promised to each nominated group, taken for everyone else (:meth:`hold`)."""
    _seen: dict[DeviceId, ClaimKey] | None = None
    """:meth:`taken` with both overlays applied, built when first asked after a change."""
    _reserved_by: dict[str, set[ClaimKey]] | None = None
    """Pod uid -> the allocated claims reserved for it, built when first asked."""

    # -- feeding -----------------------------------------------------------------------

    def replace(self, plural: str, items: Iterable[KubeObject]) -> None:
        """A full listing of one kind."""
        if plural == SLICES:
            self.inventory.replace(items)
            self._devices_changed()
        elif plural == CLASSES:
            self.classes = {}
            self._selectors_changed()
            for obj in items:
                self._put_class(obj)
        elif plural == CLAIMS:
            self.claims = {_key(obj): obj for obj in items}
            self._parsed = {}
            self._taken, self._seen, self._reserved_by = None, None, None
            self._epoch += 1

    def handle(self, plural: str, event: str, obj: KubeObject) -> None:
        """One watch event."""
        name = str(metadata_of(obj).get("name"))
        if plural == SLICES:
            if event == DELETED:
                self.inventory.remove(name)
            else:
                self.inventory.put(obj)
            self._devices_changed()
        elif plural == CLASSES:
            if event == DELETED:
                self.classes.pop(name, None)
            else:
                self._put_class(obj)
            self._selectors_changed()
        elif plural == CLAIMS:
            key = _key(obj)
            if event == DELETED:
                self.claims.pop(key, None)
                self.assumed.pop(key, None)
            else:
                self.claims[key] = obj
                if _status_of(obj).get("allocation") is not None:
                    self.assumed.pop(key, None)  # the write is seen: the claim says it now
            self._reserved_by = None
            self._retake(key)

    def _devices_changed(self) -> None:
        self._near, self._local = {}, None
        self._selectors_changed()

    def _selectors_changed(self) -> None:
        self.memos, self.verdicts = {}, {}
        self._epoch += 1

    def _put_class(self, obj: KubeObject) -> None:
        """Read the class; one that cannot be read is kept as unusable, with why, so its
        claims' pods are told what is wrong with it rather than that it does not exist."""
        name = str(metadata_of(obj).get("name"))
        try:
            found = read_class(obj)
        except (ValueError, TypeError, AttributeError) as error:
            why = str(error).removeprefix(f"DeviceClass {name}: ")
            logger.error("DeviceClass %s is left out: %s", name, why)
            found = DeviceClass(name, (), (), unusable=why)
        self.classes[found.name] = found

    # -- reading -----------------------------------------------------------------------

    def claim(self, namespace: str, name: str) -> Claim | Exception | None:
        """The claim as read (an OutOfScope or ValueError when it cannot be), None if absent."""
        obj = self.claims.get((namespace, name))
        if obj is None:
            return None
        version = str(metadata_of(obj).get("resourceVersion") or "")
        cached = self._parsed.get((namespace, name))
        if cached is not None and cached[0] == version and version:
            return cached[1]
        try:
            found: Claim | Exception = read_claim(obj)
        except (ValueError, TypeError, AttributeError) as error:
            found = error if isinstance(error, ValueError) else ValueError(
                f"ResourceClaim {namespace}/{name}: {error}")
        self._parsed[(namespace, name)] = (version, found)
        return found

    def allocation_of(self, claim: Claim) -> Mapping[str, object] | None:
        """The claim's allocation: its status's, or one Fluence committed and has not seen."""
        if claim.allocation is not None:
            return claim.allocation
        return self.assumed.get(claim.key)

    def taken(self) -> Mapping[DeviceId, ClaimKey]:
        """Every device some claim holds, and which claim (a device held for a nominated
        group names no claim: an empty key), less the claims a trial frees."""
        claimed = self._claimed()
        if not self._freed and not self._holds:
            return claimed
        if self._seen is None:
            seen = {d: k for d, k in claimed.items() if k not in self._freed}
            for devices in self._holds.values():
                for device in devices:
                    seen.setdefault(device, ("", ""))
            self._seen = seen
        return self._seen

    def _claimed(self) -> dict[DeviceId, ClaimKey]:
        if self._taken is None:
            self._taken, self._held, self._holders = {}, {}, {}
            for key in {*self.claims, *self.assumed}:
                self._retake(key)
        assert self._taken is not None
        return self._taken

    def elsewhere_changed(self) -> None:
        """What :attr:`elsewhere` holds changed: no remembered verdict stands."""
        self._epoch += 1

    def held_elsewhere(self, device: Device) -> bool:
        """Whether :attr:`elsewhere` holds ``device``: never free for a claim then."""
        return self.elsewhere is not None and self.elsewhere(device)

    def still_claimed(self, devices: Iterable[DeviceId]) -> dict[DeviceId, ClaimKey]:
        """The ``devices`` some claim still holds (a victim's not deallocated yet), and
        which claim."""
        claimed = self._claimed()
        return {d: claimed[d] for d in devices if d in claimed}

    # -- preemption --------------------------------------------------------------------

    def freed_by(self, uids: Iterable[str]) -> frozenset[ClaimKey]:
        """The allocated claims reserved for pods of ``uids`` and for no one else: the
        resourceclaim controller deallocates them once those pods are gone."""
        if self._reserved_by is None:
            index: dict[str, set[ClaimKey]] = {}
            for key, obj in self.claims.items():
                status = _status_of(obj)
                if status.get("allocation") is None:
                    continue
                for consumer in _consumers(status):
                    if isinstance(consumer, Mapping) and consumer.get("uid"):
                        index.setdefault(str(consumer["uid"]), set()).add(key)
            self._reserved_by = index
        going = set(uids)
        found = set()
        for uid in going:
            for key in self._reserved_by.get(uid, ()):
                consumers = _consumers(_status_of(self.claims[key]))
                if all(isinstance(c, Mapping) and str(c.get("uid")) in going
                       for c in consumers):
                    found.add(key)
        return frozenset(found)

    def freeing(self, keys: frozenset[ClaimKey]) -> None:
        """Count the devices of ``keys`` as free until called again (empty: none)."""
        if keys != self._freed:
            self._freed, self._seen = keys, None
            self._epoch += 1  # what every node could allocate may differ now

    def hold(self, group: str, devices: frozenset[DeviceId]) -> None:
        """Keep ``devices`` taken for everyone but ``group`` until :meth:`unhold`."""
        self._holds[group], self._seen = devices, None
        self._epoch += 1

    def unhold(self, group: str) -> frozenset[DeviceId]:
        """Give back what :meth:`hold` kept for ``group`` (and say what it was)."""
        self._seen = None
        self._epoch += 1
        return self._holds.pop(group, frozenset())

    def _retake(self, key: ClaimKey) -> None:
        """Bring what ``key`` holds in the taken set up to date (its status and what
        Fluence assumed for it)."""
        self._seen = None
        if self._taken is None:
            return  # built in full when next asked
        before = self._held.pop(key, [])
        for device in before:
            holders = [k for k in self._holders.pop(device, []) if k != key]
            if holders:  # another claim names it too: still taken, by that one
                self._holders[device] = holders
                self._taken[device] = holders[0]
            else:
                self._taken.pop(device, None)
        obj = self.claims.get(key)
        held = allocated_devices(_status_of(obj).get("allocation")) if obj else []
        held += allocated_devices(self.assumed.get(key))
        for device in held:
            self._taken[device] = key
            holders = self._holders.setdefault(device, [])
            if key not in holders:
                holders.append(key)
        if held:
            self._held[key] = held
        if before != held:
            self._index()
            for device in {*before, *held}:
                if device in self._node_of:
                    where = self._node_of[device]
                    self._changes[where] = self._changes.get(where, 0) + 1

    def near(self, node: str, labels: Mapping[str, str]) -> list[Device]:
        """The devices a pod on ``node`` can reach: its own, then network-attached ones."""
        found = self._near.get(node)
        if found is None:
            local = self._index()
            found = list(local.get(node, ()))
            found += [d for d in self._network if d.reachable_from(node, labels)]
            self._near[node] = found
        return found

    def _index(self) -> dict[str, list[Device]]:
        """The node-local devices by node (and the network-attached ones, and every
        device's node), read from the inventory in one pass when it changed."""
        if self._local is None:
            self._local, self._network, self._node_of = {}, [], {}
            for device in self.inventory.devices():
                self._node_of[device.id] = device.node
                if device.node is None:
                    self._network.append(device)
                else:
                    self._local.setdefault(device.node, []).append(device)
        return self._local

    def stamp(self, node: str) -> tuple[int, int, int]:
        """Changes when anything that decides what ``node`` can allocate may have: the
        devices, classes or labels (every node), or a device it reaches taken or let go."""
        return self._epoch, self._changes.get(node, 0), self._changes.get(None, 0)

    def shape(self, requests: Hashable) -> int:
        """A number for claims asking for ``requests`` (what they ask, not who): claims
        alike share their :meth:`verdict`; hashing what they ask once per pod, not per node."""
        return self._shapes.setdefault(requests, len(self._shapes))

    def verdict(self, node: str, shape: int) -> str | None | bool:
        """What :meth:`remember` kept for claims of ``shape`` on ``node`` (None: they fit,
        or why not), False when nothing holds since the node's :meth:`stamp` moved."""
        found = self.verdicts.get((node, shape))
        if found is None:
            return False
        (epoch, here, network), why = found
        if (epoch != self._epoch or here != self._changes.get(node, 0)
                or network != self._changes.get(None, 0)):
            return False
        return why

    def remember(self, node: str, shape: int, why: str | None) -> None:
        self.verdicts[(node, shape)] = (self.stamp(node), why)

    def nodes_changed(self) -> None:
        """Node labels may have changed: which network devices a node reaches is read again."""
        self._near = {}
        self._selectors_changed()

    # -- commits -----------------------------------------------------------------------

    def assume(self, key: ClaimKey, allocation: Mapping[str, object]) -> None:
        self.assumed[key] = allocation
        self._retake(key)

    def forget(self, key: ClaimKey) -> None:
        if self.assumed.pop(key, None) is not None:
            self._retake(key)


def _key(obj: KubeObject) -> ClaimKey:
    metadata = metadata_of(obj)
    return str(metadata.get("namespace") or "default"), str(metadata.get("name"))


def _status_of(obj: KubeObject) -> Mapping[str, Any]:
    """A claim's status, or nothing when it is not an object: the taken set is built from
    every claim, and one garbled status must not stop it (:func:`read_claim` tells the pods
    that use such a claim what is wrong)."""
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _consumers(status: Mapping[str, Any]) -> list[Any]:
    """A status's ``reservedFor``, or nothing when it is not a list."""
    reserved = status.get("reservedFor")
    return reserved if isinstance(reserved, list) else []
