"""The scheduler's built-in hook implementations, registered like any plugin."""

from __future__ import annotations

from typing import Any, Mapping

from fluence_core import hookimpl, names
from fluence_core.cluster_api import PODS
from fluence_core.models import Group, PodRequest
from fluence_core.placement import PodPlacement
from fluence_core.scheduler.context import SchedulingContext


@hookimpl
def fluence_filter(pod: PodRequest, node: str, ctx: SchedulingContext) -> str | None:
    """Refuse a node whose kubelet would turn the pod away: its allocatable ``pods`` is reached."""
    graph = ctx.graph
    if not graph.has_node(node):
        return None
    limit = graph.node(node).max_pods
    planned = ctx.planned.get(node, 1)
    there = ctx.pods_on(node)
    if limit and there + planned > limit:
        return f"node {node} admits {limit} pods and has {there} (+{planned} planned)"
    return None


@hookimpl(trylast=True)
def fluence_postfilter(group: Group, reason: str, ctx: SchedulingContext) -> list[str] | None:
    """After a filter veto, rematch once without the vetoed nodes (the core excludes them)."""
    return [] if ctx.vetoed else None


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


@hookimpl
def fluence_cli(app: Any) -> None:
    """``fluence up`` and ``fluence status``."""
    from fluence_core.scheduler.commands import register

    register(app)
