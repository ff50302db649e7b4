"""ResourceClaims and DeviceClasses as the allocator reads them, and which claims a pod uses.

A claim's ``spec.devices`` holds requests and constraints. A request asks for
``exactly`` one kind of device (a DeviceClass, CEL selectors, ``allocationMode``
``ExactCount`` with a ``count``, or ``All``), or for the ``firstAvailable`` of
several such sub-requests, tried in order. A ``matchAttribute`` constraint makes
the devices of the requests it names agree on one attribute.

What Fluence does not allocate yet is refused here with the reason the pod is
given (:class:`OutOfScope`), before any node is tried: admin access, capacity
requests (consumable capacity), tolerations of device taints,
``distinctAttribute``. A pod with such a claim waits with that reason and is
never placed; kube-scheduler may place it.

A pod names its claims in ``spec.resourceClaims``: a ``resourceClaimName``, or a
``resourceClaimTemplateName`` whose claim the resourceclaim controller creates
and names in the pod's ``status.resourceClaimStatuses``. Until it does, the pod
waits (:func:`pod_claims`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from fluence_core.kube.api import KubeObject
from fluence_core.dra.shape import list_at, object_at
from fluence_core.kube.meta import metadata_of, owner_references_of

EXACT_COUNT: Final = "ExactCount"
ALL: Final = "All"
MAX_RESERVATIONS: Final = 256
"""Consumers a claim's ``reservedFor`` may name (the API server's limit)."""


class OutOfScope(ValueError):
    """A claim asks for something Fluence does not allocate yet; the message is the reason."""


@dataclass(frozen=True)
class Choice:
    """One way to satisfy a request: a class, selectors, a mode and a count."""

    name: str
    """The request name an allocation result carries: ``request`` or ``request/sub``."""
    request: str
    """The top-level request it belongs to (what constraints name)."""
    device_class: str
    selectors: tuple[str, ...]
    mode: str
    count: int


@dataclass(frozen=True)
class Request:
    name: str
    choices: tuple[Choice, ...]
    """``exactly``: one; ``firstAvailable``: the sub-requests in order."""


@dataclass(frozen=True)
class MatchAttribute:
    attribute: tuple[str, str]
    """(domain, name): a constraint's attribute is always fully qualified."""
    requests: frozenset[str]
    """The requests it binds (empty: all of the claim's); a sub-request is named
    ``request/sub``, or covered by its request's name."""

    def covers(self, request: str) -> bool:
        return not self.requests or request in self.requests


@dataclass(frozen=True)
class Claim:
    """A ResourceClaim: what it asks for and what its status says."""

    namespace: str
    name: str
    uid: str
    requests: tuple[Request, ...]
    constraints: tuple[MatchAttribute, ...]
    config: tuple[Mapping[str, Any], ...]
    allocation: Mapping[str, Any] | None
    reserved_for: tuple[Mapping[str, Any], ...]
    obj: KubeObject

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    def reserved_for_uid(self, uid: str) -> bool:
        return any(r.get("uid") == uid for r in self.reserved_for)


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]
    config: tuple[Mapping[str, Any], ...]
    unusable: str | None = None
    """Why the class cannot be read (its claims are refused with this), or None."""


def _selectors(raw: Any, where: str) -> tuple[str, ...]:
    found = []
    for index, selector in enumerate(list_at(raw, f"{where}.selectors")):
        cel = (selector or {}).get("cel") if isinstance(selector, Mapping) else None
        expression = (cel or {}).get("expression") if isinstance(cel, Mapping) else None
        if not isinstance(expression, str) or not expression.strip():
            raise ValueError(f"{where}.selectors[{index}]: only CEL selectors exist")
        found.append(expression)
    return tuple(found)


def read_class(obj: KubeObject) -> DeviceClass:
    """The class; ValueError names what is malformed (the class is then unusable)."""
    name = str(metadata_of(obj).get("name"))
    spec = object_at(obj.get("spec"), f"DeviceClass {name}: spec")
    return DeviceClass(name, _selectors(spec.get("selectors"), f"DeviceClass {name}: spec"),
                       tuple(list_at(spec.get("config"), f"DeviceClass {name}: spec.config")))


def _choice(raw: Mapping[str, Any], name: str, request: str, where: str) -> Choice:
    if raw.get("adminAccess"):
        raise OutOfScope(f"{where}: adminAccess is not supported by fluence yet")
    if raw.get("capacity"):
        raise OutOfScope(f"{where}: capacity requests (consumable capacity) are not "
                         "supported by fluence yet")
    if raw.get("tolerations"):
        raise OutOfScope(f"{where}: tolerations of device taints are not supported by "
                         "fluence yet")
    device_class = raw.get("deviceClassName")
    if not isinstance(device_class, str) or not device_class:
        raise ValueError(f"{where}: deviceClassName is required")
    mode = raw.get("allocationMode") or EXACT_COUNT
    if mode not in (EXACT_COUNT, ALL):
        raise ValueError(f"{where}: allocationMode {mode!r} is neither ExactCount nor All")
    count = raw.get("count", 1) if mode == EXACT_COUNT else 0
    if count is None:
        count = 1
    if not isinstance(count, int) or isinstance(count, bool):
        raise ValueError(f"{where}: count {count!r} is not an integer")
    if mode == EXACT_COUNT and count < 1:  # 0 is no default for 1: the API refuses it
        raise ValueError(f"{where}: count must be at least 1")
    return Choice(name, request, device_class, _selectors(raw.get("selectors"), where),
                  mode, count)


def read_claim(obj: KubeObject) -> Claim:
    """The claim; :class:`OutOfScope` or ValueError (malformed) name what and where.

    Every part is checked for its shape before it is read: a string where a list belongs
    is iterable too, and would be read character by character into a wrong claim."""
    metadata = metadata_of(obj)
    namespace, name = str(metadata.get("namespace") or "default"), str(metadata.get("name"))
    where = f"ResourceClaim {namespace}/{name}"
    spec = object_at(obj.get("spec"), f"{where}: spec")
    devices = object_at(spec.get("devices"), f"{where}: spec.devices")
    requests = []
    for index, raw in enumerate(list_at(devices.get("requests"),
                                        f"{where}: spec.devices.requests")):
        raw = object_at(raw, f"{where}: spec.devices.requests[{index}]")
        request = str(raw.get("name") or "")
        here = f"{where}: spec.devices.requests[{index}] ({request})"
        if raw.get("exactly") is not None:
            exactly = object_at(raw["exactly"], f"{here}.exactly")
            requests.append(Request(request, (_choice(exactly, request, request, here),)))
        elif raw.get("firstAvailable") is not None:
            subs = list_at(raw["firstAvailable"], f"{here}.firstAvailable")
            if not subs:
                raise ValueError(f"{here}: firstAvailable is empty")
            choices = []
            for i, sub in enumerate(subs):
                sub = object_at(sub, f"{here}.firstAvailable[{i}]")
                choices.append(_choice(sub, f"{request}/{sub.get('name')}", request,
                                       f"{here}.firstAvailable[{i}]"))
            requests.append(Request(request, tuple(choices)))
        else:
            raise ValueError(f"{here}: neither exactly nor firstAvailable")
    constraints = []
    for index, raw in enumerate(list_at(devices.get("constraints"),
                                        f"{where}: spec.devices.constraints")):
        here = f"{where}: spec.devices.constraints[{index}]"
        raw = object_at(raw, here)
        if raw.get("distinctAttribute"):
            raise OutOfScope(f"{here}: distinctAttribute is not supported by fluence yet")
        attribute = raw.get("matchAttribute")
        if not isinstance(attribute, str) or "/" not in attribute:
            raise ValueError(f"{here}: matchAttribute must be a fully qualified name")
        domain, _, short = attribute.rpartition("/")
        bound = list_at(raw.get("requests"), f"{here}.requests")
        constraints.append(MatchAttribute((domain, short), frozenset(map(str, bound))))
    config = list_at(devices.get("config"), f"{where}: spec.devices.config")
    status = object_at(obj.get("status"), f"{where}: status")
    allocation = _allocation(status.get("allocation"), f"{where}: status.allocation")
    reserved = list_at(status.get("reservedFor"), f"{where}: status.reservedFor")
    for index, consumer in enumerate(reserved):
        object_at(consumer, f"{where}: status.reservedFor[{index}]")
    return Claim(namespace, name, str(metadata.get("uid") or ""), tuple(requests),
                 tuple(constraints), tuple(config), allocation, tuple(reserved), obj)


def _allocation(raw: Any, where: str) -> Mapping[str, Any] | None:
    """A claim's ``status.allocation``, checked for the shape the scheduler reads: a claim
    whose allocation names no readable device must not pass for one allocated (its pod
    would be placed with devices no one can tell)."""
    if raw is None:
        return None
    allocation = object_at(raw, where)
    devices = object_at(allocation.get("devices"), f"{where}.devices")
    for index, result in enumerate(list_at(devices.get("results"), f"{where}.devices.results")):
        object_at(result, f"{where}.devices.results[{index}]")
    object_at(allocation.get("nodeSelector"), f"{where}.nodeSelector")
    return allocation


@dataclass(frozen=True)
class PodClaim:
    """One entry of a pod's ``spec.resourceClaims`` and the claim it resolves to."""

    name: str
    claim: str | None
    """The ResourceClaim's name; None while a template's claim is not made yet."""
    template: bool


def pod_claims(pod: KubeObject) -> list[PodClaim]:
    """The pod's claims (empty: it uses none); ValueError names the malformed entry.

    Each entry has a name of its own and names exactly one of a claim and a template, as
    the API server requires: an entry read any other way could give the pod a claim that
    is not the one it asked for."""
    spec = pod.get("spec") or {}
    entries = list_at(spec.get("resourceClaims") or None, "spec.resourceClaims")
    if not entries:
        return []
    statuses: dict[str, Mapping[str, Any]] = {}
    raw_statuses = (pod.get("status") or {}).get("resourceClaimStatuses")
    for index, status in enumerate(list_at(raw_statuses, "status.resourceClaimStatuses")):
        here = f"status.resourceClaimStatuses[{index}]"
        status = object_at(status, here)
        named = status.get("resourceClaimName")
        if named is not None and not isinstance(named, str):
            raise ValueError(f"{here} ({status.get('name')}): resourceClaimName is not a string")
        statuses[str(status.get("name"))] = status
    found = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        entry = object_at(entry, f"spec.resourceClaims[{index}]")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"spec.resourceClaims[{index}] has no name")
        here = f"spec.resourceClaims[{index}] ({name})"
        if name in seen:
            raise ValueError(f"{here}: the name is used twice")
        seen.add(name)
        claim, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
        for field_name, value in (("resourceClaimName", claim),
                                  ("resourceClaimTemplateName", template)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{here}: {field_name} is not a string")
        if claim and template:
            raise ValueError(f"{here}: names both a claim and a template")
        if claim:
            found.append(PodClaim(name, claim, False))
        elif template:
            status = statuses.get(name)
            if status is not None and not status.get("resourceClaimName"):
                continue  # the controller decided this pod needs no claim for it
            made = status.get("resourceClaimName") if status is not None else None
            found.append(PodClaim(name, made, True))
        else:
            raise ValueError(f"{here}: names neither a claim nor a template")
    return found


def owned_by(claim: Claim, pod_uid: str) -> bool:
    """Whether the pod is the claim's controlling owner (a template's claim must be)."""
    return any(ref.get("uid") == pod_uid and ref.get("controller")
               for ref in owner_references_of(claim.obj))
