"""The kubelet's pod limit as a built-in plugin: a filter and its rematch.

A node admits at most its allocatable ``pods``; the kubelet rejects a pod bound
beyond that. The filter vetoes such nodes, and the postfilter asks the core to
rematch once without them. Registered as entry point ``pod-limit``, so it can be
disabled alone.
"""

from __future__ import annotations

from fluence_core import hookimpl
from fluence_core.models import Group, PodRequest
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
