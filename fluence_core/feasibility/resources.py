"""A pod's resource request and a node's allocatable, counted as kube-scheduler counts them.

Every amount is an integer in the resource's base unit, rounded up as
``resource.Quantity`` rounds: CPU in millicores, everything else (memory,
``ephemeral-storage``, ``hugepages-*``, extended resources) in units. A pod's
request is the sum of its app containers, or the largest init container if that
is bigger; restartable init containers (sidecars) run beside the app containers
and so add to both sides; pod-level requests override the containers' sums for
CPU and memory; ``spec.overhead`` is added last.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fluence_core.quantity import parse_quantity

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"

Amounts = dict[str, int]
"""Resource name -> integer amount (millicores for ``cpu``)."""

_POD_LEVEL = (CPU, MEMORY)


def amount(resource: str, raw: Any, where: str) -> int:
    """One quantity in the resource's base unit, rounded up (millicores for CPU)."""
    try:
        value = parse_quantity(raw)
    except ValueError as error:
        raise ValueError(f"{where}: {resource}: {error}") from None
    return math.ceil(value * 1000) if resource == CPU else math.ceil(value)


def read_amounts(raw: Any, where: str) -> Amounts:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a resource list, got {raw!r}")
    return {str(name): amount(str(name), value, where) for name, value in raw.items()}


def _add(into: Amounts, more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _max(into: Amounts, other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value


def _container_requests(container: Mapping[str, Any], where: str) -> Amounts:
    """Requests, with limits standing in for absent requests (the API server's defaulting)."""
    resources = container.get("resources") or {}
    requests = read_amounts(resources.get("limits"), f"{where}.limits")
    requests.update(read_amounts(resources.get("requests"), f"{where}.requests"))
    return requests


def pod_requests(pod: Mapping[str, Any], where: str) -> Amounts:
    """What kube-scheduler's NodeResourcesFit charges a node for this pod."""
    spec = pod.get("spec") or {}
    total: Amounts = {}
    for i, container in enumerate(spec.get("containers") or []):
        _add(total, _container_requests(container, f"{where}.containers[{i}]"))
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for i, container in enumerate(spec.get("initContainers") or []):
        own = _container_requests(container, f"{where}.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            running = dict(sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
        _max(init_peak, running)
    _max(total, init_peak)
    pod_level = _container_requests(spec, f"{where}.resources")
    for name in _POD_LEVEL:
        if name in pod_level:
            total[name] = pod_level[name]
    _add(total, read_amounts(spec.get("overhead"), f"{where}.overhead"))
    return total
