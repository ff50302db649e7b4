"""The chosen backend written onto each pod, as a built-in plugin.

A pod that receives a virtual resource learns which one through annotations its
downward-API environment reads (``FLUXION_BACKEND``, ``FLUXION_<ATTR>``).
Registered as entry point ``backend-annotations``, so it can be disabled alone.
"""

from __future__ import annotations

from typing import Mapping

from fluence_core import hookimpl, names
from fluence_core.kube.api import PODS
from fluence_core.models import Group
from fluence_core.matcher.readback import PodPlacement
from fluence_core.scheduler.context import SchedulingContext


@hookimpl
def fluence_reserve(group: Group, placements: Mapping[str, PodPlacement],
                    ctx: SchedulingContext) -> None:
    """Write the chosen backend and its attributes where the pods' downward-API env reads them."""
    cluster = ctx.cluster
    for pod in group.pods:
        placement = placements[pod.key]
        if placement.backend is None:
            continue
        annotations = {names.BACKEND_ANNOTATION: placement.backend}
        annotations.update({names.attr_annotation(k): v for k, v in placement.attributes.items()})
        cluster.patch(PODS, pod.name, {"metadata": {"annotations": annotations}}, pod.namespace)


@hookimpl
def fluence_unreserve(group: Group, placements: Mapping[str, PodPlacement],
                      ctx: SchedulingContext) -> None:
    """Take the backend annotations back off pods that were not bound."""
    cluster = ctx.cluster
    for pod in group.pods:
        placement = placements.get(pod.key)
        if placement is None or placement.backend is None:
            continue
        removal: dict[str, None] = {names.BACKEND_ANNOTATION: None}
        removal.update({names.attr_annotation(k): None for k in placement.attributes})
        try:
            cluster.patch(PODS, pod.name, {"metadata": {"annotations": removal}}, pod.namespace)
        except Exception:  # the pod may be gone; nothing else to undo
            pass
