"""A hybrid group's QPU asked for by ResourceClaim: which claims those are, and what they got.

A pod may ask for its backend through a claim of the QPU driver's classes
(:data:`~fluence_core.names.QPU_CLASSES`) instead of the extended resource: by
``resourceClaimName`` or by ``resourceClaimTemplateName``. Only the claim or template
says the class, so :func:`qpu_claim_entries` reads them from the API server.

Once the claim is allocated, :func:`claimed_backend` reads the backend and its
attributes off the allocated device, as the driver published them in its
ResourceSlices: the same annotations the scheduler writes for the extended resource
(``backend`` and ``attr-<key>``), so a worker released by the scout learns its
backend the same way on both paths, whichever scheduler allocated the claim. The
attribute keys are the published ones (``device-arn`` is published
``device_arn``); :func:`published_key` gives that name for a file's key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fluence_core import names
from fluence_core.kube.api import RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, RESOURCE_SLICES
from fluence_core.kube.api import ClusterAPI
from fluence_core.kube.meta import metadata_of


class ClaimLookupError(ValueError):
    """A pod's claim or template that cannot be read; the message names it."""


def published_key(key: str) -> str:
    """The attribute name the QPU driver publishes a file's ``key`` under."""
    return key.replace("-", "_").replace(".", "_")


def asks_for_qpu(claim_spec: Mapping[str, Any]) -> bool:
    """Whether a ResourceClaim spec has a request (or a ``firstAvailable`` choice) of a QPU
    class."""
    for request in ((claim_spec.get("devices") or {}).get("requests") or []):
        exactly = request.get("exactly") or {}
        choices = [exactly] + list(request.get("firstAvailable") or [])
        if any(choice.get("deviceClassName") in names.QPU_CLASSES for choice in choices):
            return True
    return False


def qpu_claim_entries(pod: Mapping[str, Any], namespace: str,
                      cluster: ClusterAPI) -> list[str]:
    """The names of the pod's ``spec.resourceClaims`` entries whose claim (or template) asks
    for a QPU; :class:`ClaimLookupError` names an entry whose object is not there."""
    found = []
    for entry in ((pod.get("spec") or {}).get("resourceClaims") or []):
        name = entry.get("name")
        if entry.get("resourceClaimName"):
            resource, target, kind = (RESOURCE_CLAIMS, entry["resourceClaimName"],
                                      "ResourceClaim")
        elif entry.get("resourceClaimTemplateName"):
            resource, target, kind = (RESOURCE_CLAIM_TEMPLATES,
                                      entry["resourceClaimTemplateName"],
                                      "ResourceClaimTemplate")
        else:
            continue
        obj = cluster.get(resource, str(target), namespace)
        if obj is None:
            raise ClaimLookupError(
                f"spec.resourceClaims[{name!r}]: {kind} {namespace}/{target} not found; "
                "create it before the pods, so the split can see whether it asks for a QPU")
        spec = obj.get("spec") or {}
        if kind == "ResourceClaimTemplate":
            spec = spec.get("spec") or {}
        if asks_for_qpu(spec):
            found.append(str(name))
    return found


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The ResourceClaims the pod uses: named ones, and those made from its templates (as
    ``status.resourceClaimStatuses`` reports them)."""
    claims = [str(e["resourceClaimName"])
              for e in ((pod.get("spec") or {}).get("resourceClaims") or [])
              if e.get("resourceClaimName")]
    claims += [str(s["resourceClaimName"])
               for s in ((pod.get("status") or {}).get("resourceClaimStatuses") or [])
               if s.get("resourceClaimName")]
    return claims


def claimed_backend(cluster: ClusterAPI, pod: Mapping[str, Any]) -> dict[str, str]:
    """The backend annotations for the QPU the pod's allocated claims hold (empty when none
    holds one yet): the first QPU device found, its ``backend`` and the file's attributes."""
    namespace = metadata_of(pod).get("namespace")
    for claim_name in claim_names(pod):
        claim = cluster.get(RESOURCE_CLAIMS, claim_name, namespace)
        allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
        for result in ((allocation.get("devices") or {}).get("results") or []):
            if result.get("driver") != names.QPU_DRA_DRIVER:
                continue
            device = _published_device(cluster, str(result.get("pool")),
                                       str(result.get("device")))
            if device is not None:
                return _annotations(device)
    return {}


def _published_device(cluster: ClusterAPI, pool: str, device: str) -> dict[str, Any] | None:
    """The device as the newest generation of its pool publishes it, None if it is gone."""
    newest: tuple[int, dict[str, Any]] | None = None
    listed = cluster.list(RESOURCE_SLICES, label_selector=(
        f"{names.MANAGED_BY_LABEL}={names.QPU_DRIVER_MANAGER}"))
    for piece in listed.items:
        spec = piece.get("spec") or {}
        if spec.get("driver") != names.QPU_DRA_DRIVER or (spec.get("pool") or {}).get(
                "name") != pool:
            continue
        generation = int((spec.get("pool") or {}).get("generation") or 0)
        for published in spec.get("devices") or []:
            if published.get("name") == device and (newest is None or generation > newest[0]):
                newest = (generation, published)
    return newest[1] if newest is not None else None


def _annotations(device: Mapping[str, Any]) -> dict[str, str]:
    attributes = device.get("attributes") or {}
    found: dict[str, str] = {}
    for qualified, value in attributes.items():
        domain, _, key = str(qualified).rpartition("/")
        text = _value(value)
        if text is None:
            continue
        if domain in ("", names.QPU_DRA_DRIVER) and key == "backend":
            found[names.BACKEND_ANNOTATION] = text
        elif domain == names.RESOURCE_DOMAIN:
            found[names.attr_annotation(key)] = text
    return found


def _value(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return None
    for kind in ("string", "int", "version"):
        if kind in value:
            return str(value[kind])
    if "bool" in value:
        return "true" if value["bool"] else "false"
    return None
