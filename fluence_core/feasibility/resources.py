"""A node's allocatable and a volume's quantities, counted as kube-scheduler counts them.

Every amount is an integer in the resource's base unit, rounded up as
``resource.Quantity`` rounds: CPU in millicores, everything else (memory,
``ephemeral-storage``, ``hugepages-*``, extended resources) in units. A pod's
request, in the same units, is :func:`fluence_core.pod_requests.pod_requests`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fluence_core.pod_requests import CPU, MEMORY, Amounts
from fluence_core.quantity import parse_quantity

PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"

__all__ = ["CPU", "MEMORY", "PODS", "EPHEMERAL_STORAGE", "Amounts", "amount", "read_amounts"]


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
