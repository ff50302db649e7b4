"""The scheduler's built-in hook implementations, registered like any plugin."""

from __future__ import annotations

from typing import Any, Mapping

from fluence_core import hookimpl, names
from fluence_core.cluster_api import PODS
from fluence_core.models import Group
from fluence_core.placement import PodPlacement


@hookimpl
def fluence_filter(pod: Any, node: str, ctx: Mapping[str, Any]) -> str | None:
    """Refuse a node whose kubelet would turn the pod away: its allocatable ``pods`` is reached."""
    scheduler = ctx.get("scheduler")
    graph = ctx["graph"]
    if scheduler is None or not graph.has_node(node):
        return None
    limit = graph.node(node).max_pods
    planned = ctx.get("planned", {}).get(node, 1)
    if limit and scheduler.pods_on(node) + planned > limit:
        return f"node {node} admits {limit} pods and has {scheduler.pods_on(node)} (+{planned} planned)"
    return None


@hookimpl(trylast=True)
def fluence_postfilter(group: Group, reason: str, ctx: Mapping[str, Any]) -> list[str] | None:
    """After a filter veto, rematch once without the vetoed nodes (the core excludes them)."""
    return [] if ctx.get("vetoed") else None


@hookimpl
def fluence_reserve(group: Group, placements: Mapping[str, PodPlacement], ctx: Mapping[str, Any]) -> None:
    """Write the chosen backend and its attributes where the pods' downward-API env reads them."""
    cluster = ctx["cluster"]
    for pod in group.pods:
        placement = placements[pod.key]
        if placement.backend is None:
            continue
        annotations = {names.BACKEND_ANNOTATION: placement.backend}
        annotations.update({names.attr_annotation(k): v for k, v in placement.attributes.items()})
        cluster.patch(PODS, pod.name, {"metadata": {"annotations": annotations}}, pod.namespace)


@hookimpl
def fluence_unreserve(group: Group, placements: Mapping[str, PodPlacement], ctx: Mapping[str, Any]) -> None:
    """Take the backend annotations back off pods that were not bound."""
    cluster = ctx["cluster"]
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
