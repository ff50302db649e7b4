"""A pod's size: what kube-scheduler charges a node for it, computed here and nowhere else.

Every part of Fluence that needs a pod's size (the graph's charge for its own and
for other schedulers' pods, the feasibility filters, the simulator's baseline,
admission control, ``fluence status``) calls :func:`pod_requests`. Two copies of
this rule drifted once (sidecars and pod-level requests were charged 0 by one of
them, so nodes were overbooked); ``tests/test_pod_requests.py`` fails if a
module outside an explicit list reads a pod's containers again.

The rule is kube-scheduler's ``PodRequests`` (k8s.io/component-helpers/resource),
as the API server has defaulted the pod:

1. the app containers (``spec.containers``) are summed;
2. init containers run in order. A *sidecar* (``restartPolicy: Always``) keeps
   running beside everything after it, so it adds to the sum in full. A classic
   init container runs alone with the sidecars started before it; the largest
   such moment, per resource, is a floor: the pod needs the larger of the sum and
   that peak;
3. pod-level requests (``spec.resources.requests``, PodLevelResources, on by
   default since 1.34) replace the result for the resources they name that may be
   set at pod level: ``cpu``, ``memory`` and ``hugepages-*``;
4. ``spec.overhead`` (set from the pod's RuntimeClass) is added.

Defaulting the API server does, and which this module repeats because a pod may
come from a file or the simulator instead: a container's limit stands in for an
absent request of the same resource, and a pod-level limit stands in for an
absent pod-level request when no container names that resource.

Amounts are exact until the end, then rounded up once as ``resource.Quantity``
rounds: CPU in millicores, everything else in units (memory in bytes).

Not modelled: in-place resize (kube-scheduler reads the larger of the spec and
the status's allocated resources while a resize is pending) and DRA-backed
extended resources.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from fluence_core.quantity import MAX_VALUE, QuantityError, cpu_cores

CPU = "cpu"
MEMORY = "memory"
HUGEPAGES_PREFIX = "hugepages-"
SIDECAR_RESTART_POLICY = "Always"

Amounts = dict[str, int]
"""Resource name -> amount, rounded up: millicores for ``cpu``, units (bytes) otherwise."""

_Exact = dict[str, Fraction]


def pod_requests(pod: Mapping[str, Any], where: str | None = None) -> Amounts:
    """What kube-scheduler charges a node for ``pod`` (see the module docstring).

    ``where`` names the pod in errors (default ``pod <namespace>/<name>``). A field of
    the wrong shape or a bad quantity raises :class:`ValueError` naming the pod and the
    field's path; totals beyond int64 milli-units raise :class:`QuantityError`.
    """
    where = where or _describe(pod)
    spec = _mapping(pod.get("spec"), where, "spec")
    total: _Exact = {}
    for i, container in enumerate(_list(spec.get("containers"), where, "spec.containers")):
        _add(total, _container(container, where, f"spec.containers[{i}]"))
    sidecars: _Exact = {}
    init_peak: _Exact = {}
    for i, container in enumerate(
            _list(spec.get("initContainers"), where, "spec.initContainers")):
        path = f"spec.initContainers[{i}]"
        own = _container(container, where, path)
        if container.get("restartPolicy") == SIDECAR_RESTART_POLICY:
            _add(total, own)
            _add(sidecars, own)
            running = dict(sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
        _max(init_peak, running)
    _max(total, init_peak)
    _apply_pod_level(total, _mapping(spec.get("resources"), where, "spec.resources"), where)
    _add(total, _amounts(spec.get("overhead"), where, "spec.overhead"))
    return {name: _round(name, value, where) for name, value in total.items()}


def is_pod_level(resource: str) -> bool:
    """Whether ``resource`` may be requested at pod level (``spec.resources``)."""
    return resource in (CPU, MEMORY) or resource.startswith(HUGEPAGES_PREFIX)


def _apply_pod_level(total: _Exact, resources: Mapping[str, Any], where: str) -> None:
    requests = _amounts(resources.get("requests"), where, "spec.resources.requests")
    limits = _amounts(resources.get("limits"), where, "spec.resources.limits")
    for name, value in limits.items():
        if is_pod_level(name) and name not in requests and name not in total:
            requests[name] = value
    for name, value in requests.items():
        if is_pod_level(name):
            total[name] = value


def _container(container: Any, where: str, path: str) -> _Exact:
    """One container's requests, its limits standing in for absent ones."""
    body = _mapping(container, where, path)
    resources = _mapping(body.get("resources"), where, f"{path}.resources")
    requests = _amounts(resources.get("limits"), where, f"{path}.resources.limits")
    requests.update(_amounts(resources.get("requests"), where, f"{path}.resources.requests"))
    return requests


def _amounts(raw: Any, where: str, path: str) -> _Exact:
    found: _Exact = {}
    for name, value in _mapping(raw, where, path).items():
        try:
            found[str(name)] = cpu_cores(value)
        except ValueError as error:
            raise ValueError(f"{where}: {path}.{name}: {error}") from None
    return found


def _round(name: str, value: Fraction, where: str) -> int:
    if value > MAX_VALUE:
        raise QuantityError(f"{where}: {name} requests add up to more than int64 milli-units")
    return math.ceil(value * 1000) if name == CPU else math.ceil(value)


def _add(into: _Exact, more: Mapping[str, Fraction]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, Fraction(0)) + value


def _max(into: _Exact, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        if name not in into or value > into[name]:
            into[name] = value


def _mapping(value: Any, where: str, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: {path} is not an object")
    return value


def _list(value: Any, where: str, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where}: {path} is not a list")
    return value


def _describe(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name") or meta.get("generateName") or "?"
    return f"pod {meta.get('namespace') or 'default'}/{name}"
