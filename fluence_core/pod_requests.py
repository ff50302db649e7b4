"""A pod's size: what kube-scheduler charges a node for it, computed here and nowhere else.

Every part of Fluence that needs a pod's size (the graph's charge for its own and
for other schedulers' pods, the feasibility filters, the simulator's baseline,
admission control, ``fluence status``) calls :func:`pod_requests`. Why one place: two
copies of this rule drift apart, and a copy that charges sidecars or pod-level requests
0 overbooks nodes; ``tests/test_pod_requests.py`` fails if a module outside an explicit
list reads a pod's containers again. :func:`pod_requests` states the rule, which is
kube-scheduler's ``PodRequests`` (k8s.io/component-helpers/resource).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fluence_core.quantity import MAX_VALUE, QuantityError, cpu_cores

CPU = "cpu"
MEMORY = "memory"
HUGEPAGES_PREFIX = "hugepages-"
SIDECAR_RESTART_POLICY = "Always"

Amounts = dict[str, int]
"""Resource name -> amount, rounded up: millicores for ``cpu``, units (bytes) otherwise."""

_Exact = dict[str, int]
"""Exact amounts in nano-units: every quantity is a whole number of them (the API server
rounds finer precision up to a nano), and integer sums are several times cheaper than
``Fraction`` ones on a path every pod of every cycle takes."""

_NANO = 10**9
_MILLI = 10**6
"""Nano-units in a milli-unit."""
_MAX_NANOS = int(MAX_VALUE * _NANO)


def pod_requests(pod: Mapping[str, Any], where: str | None = None) -> Amounts:
    """What kube-scheduler charges a node for ``pod``.

    ``where`` names the pod in errors (default ``pod <namespace>/<name>``). A field of
    the wrong shape or a bad quantity raises :class:`ValueError` naming the pod and the
    field's path; totals beyond int64 milli-units raise :class:`QuantityError`.

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
    try:
        total = _size(pod)
    except _Bad as bad:
        raise ValueError(f"{where or _describe(pod)}: {bad.path}{bad.problem}") from None
    if any(nanos > _MAX_NANOS for nanos in total.values()):
        over = next(name for name, nanos in total.items() if nanos > _MAX_NANOS)
        raise QuantityError(f"{where or _describe(pod)}: {over} requests add up to more"
                            " than int64 milli-units")
    return {name: _ceil_div(nanos, _MILLI if name == CPU else _NANO)
            for name, nanos in total.items()}


def _ceil_div(amount: int, unit: int) -> int:
    """``amount / unit`` rounded up, as ``resource.Quantity`` rounds."""
    return -(-amount // unit)


def is_pod_level(resource: str) -> bool:
    """Whether ``resource`` may be requested at pod level (``spec.resources``)."""
    return resource in (CPU, MEMORY) or resource.startswith(HUGEPAGES_PREFIX)


class _Bad(Exception):
    """A field of the wrong shape or a bad quantity, at ``path`` (built only on failure:
    the loops over containers make no strings for a good pod)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(path, problem)
        self.path, self.problem = path, problem

    def under(self, parent: str) -> _Bad:
        return _Bad(parent + self.path, self.problem)


def _size(pod: Mapping[str, Any]) -> _Exact:
    spec = _mapping(pod.get("spec"), "spec")
    total: _Exact = {}
    for i, container in enumerate(_list(spec.get("containers"), "spec.containers")):
        try:
            _add(total, _container(container))
        except _Bad as bad:
            raise bad.under(f"spec.containers[{i}]") from None
    sidecars: _Exact = {}
    init_peak: _Exact = {}
    for i, container in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        try:
            own = _container(container)
        except _Bad as bad:
            raise bad.under(f"spec.initContainers[{i}]") from None
        if container.get("restartPolicy") == SIDECAR_RESTART_POLICY:
            _add(total, own)
            _add(sidecars, own)
            running = dict(sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
        _max(init_peak, running)
    _max(total, init_peak)
    resources = spec.get("resources")
    if resources is not None:
        _apply_pod_level(total, _mapping(resources, "spec.resources"))
    overhead = spec.get("overhead")
    if overhead is not None:
        _add(total, _amounts(overhead, "spec.overhead"))
    return total


def _apply_pod_level(total: _Exact, resources: Mapping[str, Any]) -> None:
    requests = _amounts(resources.get("requests"), "spec.resources.requests")
    limits = _amounts(resources.get("limits"), "spec.resources.limits")
    for name, value in limits.items():
        if is_pod_level(name) and name not in requests and name not in total:
            requests[name] = value
    for name, value in requests.items():
        if is_pod_level(name):
            total[name] = value


def _container(container: Any) -> _Exact:
    """One container's requests, its limits standing in for absent ones."""
    body = _mapping(container, "")
    resources = body.get("resources")
    if resources is None:
        return {}
    resources = _mapping(resources, ".resources")
    requests = _amounts(resources.get("limits"), ".resources.limits")
    requests.update(_amounts(resources.get("requests"), ".resources.requests"))
    return requests


def _amounts(raw: Any, path: str) -> _Exact:
    found: _Exact = {}
    for name, value in _mapping(raw, path).items():
        try:
            exact = cpu_cores(value)
        except ValueError as error:
            raise _Bad(f"{path}.{name}", f": {error}") from None
        found[str(name)] = _ceil_div(exact.numerator * _NANO, exact.denominator)
    return found


def _add(into: _Exact, more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _max(into: _Exact, other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if name not in into or value > into[name]:
            into[name] = value


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _Bad(path, " is not an object")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Bad(path, " is not a list")
    return value


def _describe(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name") or meta.get("generateName") or "?"
    return f"pod {meta.get('namespace') or 'default'}/{name}"


def is_guaranteed(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's QoS class is Guaranteed, as the kubelet decides it: every container
    and init container limits CPU and memory, and requests (where given) equal the limits.
    A pod that cannot be read is not (its size reading says why)."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return False
    containers = [c for key in ("initContainers", "containers")
                  for c in (spec.get(key) or []) if isinstance(spec.get(key), list)]
    if not containers:
        return False
    try:
        for container in containers:
            resources = _mapping(_mapping(container, "").get("resources"), ".resources")
            limits = _amounts(resources.get("limits"), ".resources.limits")
            requests = _amounts(resources.get("requests"), ".resources.requests")
            for name in (CPU, MEMORY):
                if not limits.get(name) or requests.get(name, limits[name]) != limits[name]:
                    return False
    except _Bad:
        return False
    return True
