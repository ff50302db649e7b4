"""A gang's claims allocated in the match that places it: devices with cores, jointly.

A gang whose members use DRA claims is matched as one group when the matcher can take
devices itself (``matches_devices``, the embedded matcher): each member's claims become
a device demand in its slot (:mod:`fluence_core.dra.demands`), so one search finds
every member's node, cores, memory and devices together, inside the gang's topology
domain, all or nothing. Members of different shapes are placed by that search, not
greedily one after another, so a fit the member-by-member order misses (the first
member taking the only node where a later one's devices are) is found.

:func:`joint_match` answers None when the gang cannot be matched so and must be
placed member by member (:mod:`fluence_core.scheduler.members`): a matcher that cannot
take devices (Fluxion: each member's nodes are narrowed to where its claims fit), a
member drawing from the shared CPU pool (the pool places pods one at a time), or two
members sharing a claim not allocated yet.
"""

from __future__ import annotations

import dataclasses

from fluence_core.dra.plan import DevicePlan
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.base import Matcher
from fluence_core.matcher.group import GroupMatch, GroupMiss, match_preferring
from fluence_core.models import Group


def joint_match(group: Group, devices: DevicePlan, graph: ResourceGraph, matcher: Matcher,
                exclude: list[str] | None = None) -> GroupMatch | GroupMiss | None:
    """``group`` matched with its members' devices (module docstring), its plan holding
    exactly the devices the match took; None when it must be placed member by member."""
    if not getattr(matcher, "matches_devices", False) or any(p.shared for p in group.pods):
        return None
    ledger = devices.ledger()
    if ledger is None:
        return None
    pods = tuple(
        dataclasses.replace(pod, devices=(demand.key, demand.devices))
        if demand is not None else pod
        for pod, demand in zip(group.pods, devices.demands, strict=True))
    graph.device_demands = ledger
    try:
        outcome = match_preferring(dataclasses.replace(group, pods=pods), graph, matcher,
                                   exclude_nodes=exclude)
    finally:
        graph.device_demands = None
    if isinstance(outcome, GroupMiss):
        detail = outcome.detail or _why(group, devices, graph, matcher, exclude)
        return GroupMiss(group, outcome.kind, outcome.outcome, detail=detail or None)
    nodes = {index: outcome.placements[pod.key].node for index, pod in enumerate(group.pods)}
    placed = {index: node for index, node in nodes.items() if node is not None}
    devices.adopt(ledger, placed)
    return GroupMatch(group, outcome.allocations, outcome.placements, outcome.level,
                      outcome.slices)


def _why(group: Group, devices: DevicePlan, graph: ResourceGraph, matcher: Matcher,
         exclude: list[str] | None) -> str:
    """Why a gang's joint match missed: the first member whose claims fit on none of its
    nodes, alone, in kube-scheduler's words ("0/N nodes can allocate its claims: ...");
    else, when the gang fits without its devices, that its claims do not fit together;
    else empty (its cores do not fit: the match's own reason says so)."""
    out = set(exclude or ())
    for index, pod in enumerate(group.pods):
        if not devices.uses_claims(index):
            continue
        nodes = [n.name for n in graph.nodes
                 if n.name not in out and (pod.allowed is None or n.name in pod.allowed)]
        if not any([devices.fits(index, node) for node in nodes]):
            why = devices.why(index, len(nodes))
            return f"member {pod.key}: {why}" if len(group.pods) > 1 else why
    without = match_preferring(group, graph, matcher, exclude_nodes=exclude)
    if isinstance(without, GroupMiss):
        return ""
    for allocation in without.allocations.values():
        matcher.cancel(allocation.jobid)
    return (f"0/{len(graph.nodes)} nodes can allocate its claims beside its fellow "
            "members': each member's claims fit alone, not all of them together "
            "where the gang's cores are")
