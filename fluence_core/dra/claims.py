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


def _selectors(raw: Any, where: str) -> tuple[str, ...]:
    found = []
    for index, selector in enumerate(raw or []):
        cel = (selector or {}).get("cel") if isinstance(selector, Mapping) else None
        expression = (cel or {}).get("expression") if isinstance(cel, Mapping) else None
        if not isinstance(expression, str) or not expression.strip():
            raise ValueError(f"{where}.selectors[{index}]: only CEL selectors exist")
        found.append(expression)
    return tuple(found)


def read_class(obj: KubeObject) -> DeviceClass:
    name = str(metadata_of(obj).get("name"))
    spec = obj.get("spec") or {}
    return DeviceClass(name, _selectors(spec.get("selectors"), f"DeviceClass {name}: spec"),
                       tuple(spec.get("config") or ()))


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
    count = int(raw.get("count") or 1) if mode == EXACT_COUNT else 0
    if mode == EXACT_COUNT and count < 1:
        raise ValueError(f"{where}: count must be at least 1")
    return Choice(name, request, device_class, _selectors(raw.get("selectors"), where),
                  mode, count)


def read_claim(obj: KubeObject) -> Claim:
    """The claim; :class:`OutOfScope` or ValueError (malformed) name what and where."""
    metadata = metadata_of(obj)
    namespace, name = str(metadata.get("namespace") or "default"), str(metadata.get("name"))
    where = f"ResourceClaim {namespace}/{name}"
    devices = (obj.get("spec") or {}).get("devices") or {}
    requests = []
    for index, raw in enumerate(devices.get("requests") or []):
        request = str(raw.get("name") or "")
        here = f"{where}: spec.devices.requests[{index}] ({request})"
        if raw.get("exactly") is not None:
            requests.append(Request(request, (_choice(raw["exactly"], request, request, here),)))
        elif raw.get("firstAvailable"):
            choices = tuple(
                _choice(sub, f"{request}/{sub.get('name')}", request,
                        f"{here}.firstAvailable[{i}]")
                for i, sub in enumerate(raw["firstAvailable"]))
            requests.append(Request(request, choices))
        else:
            raise ValueError(f"{here}: neither exactly nor firstAvailable")
    constraints = []
    for index, raw in enumerate(devices.get("constraints") or []):
        here = f"{where}: spec.devices.constraints[{index}]"
        if raw.get("distinctAttribute"):
            raise OutOfScope(f"{here}: distinctAttribute is not supported by fluence yet")
        attribute = raw.get("matchAttribute")
        if not isinstance(attribute, str) or "/" not in attribute:
            raise ValueError(f"{here}: matchAttribute must be a fully qualified name")
        domain, _, short = attribute.rpartition("/")
        constraints.append(MatchAttribute((domain, short), frozenset(raw.get("requests") or ())))
    status = obj.get("status") or {}
    return Claim(namespace, name, str(metadata.get("uid") or ""), tuple(requests),
                 tuple(constraints), tuple(devices.get("config") or ()),
                 status.get("allocation"), tuple(status.get("reservedFor") or ()), obj)


@dataclass(frozen=True)
class PodClaim:
    """One entry of a pod's ``spec.resourceClaims`` and the claim it resolves to."""

    name: str
    claim: str | None
    """The ResourceClaim's name; None while a template's claim is not made yet."""
    template: bool


def pod_claims(pod: KubeObject) -> list[PodClaim]:
    """The pod's claims (empty: it uses none); ValueError when an entry is malformed."""
    spec = pod.get("spec") or {}
    entries = spec.get("resourceClaims") or []
    if not entries:
        return []
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get(
        "resourceClaimStatuses") or [] if isinstance(s, Mapping)}
    found = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise ValueError(f"spec.resourceClaims: {entry!r:.60} is not an entry")
        name = str(entry.get("name") or "")
        if entry.get("resourceClaimName"):
            found.append(PodClaim(name, str(entry["resourceClaimName"]), False))
        elif entry.get("resourceClaimTemplateName"):
            status = statuses.get(name)
            if status is not None and not status.get("resourceClaimName"):
                continue  # the controller decided this pod needs no claim for it
            claim = status.get("resourceClaimName") if status is not None else None
            found.append(PodClaim(name, claim, True))
        else:
            raise ValueError(f"spec.resourceClaims[{name}]: names neither a claim nor a template")
    return found


def owned_by(claim: Claim, pod_uid: str) -> bool:
    """Whether the pod is the claim's controlling owner (a template's claim must be)."""
    return any(ref.get("uid") == pod_uid and ref.get("controller")
               for ref in owner_references_of(claim.obj))
