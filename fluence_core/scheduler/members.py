"""A gang whose members constrain each other, placed one member after another.

Kubernetes' filters read the pods already placed: a pod's anti-affinity keeps it off a
node holding a pod its term names, its affinity draws it to one, host ports collide,
spread counts, an extended resource (``example.com/fpga``) is used up. kube-scheduler
places pods one at a time, so each sees those before it. A gang matched jointly does
not: every member's feasible set was computed against the cluster without its fellow
members, and one jobspec may put them all on one node. So a gang whose members are
**entangled** (:func:`entangled`) is placed the way kube-scheduler would place its pods,
with the all-or-nothing of a gang on top (:class:`MemberPlacer`, which states how and
where greed can miss).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from fluence_core import names
from fluence_core.dra.plan import DevicePlan
from fluence_core.feasibility import PodFacts, feasible
from fluence_core.feasibility.inter_pod_affinity import term_matches
from fluence_core.feasibility.node_resources_fit import GRAPH_COUNTED
from fluence_core.feasibility.facts import AffinityTerm
from fluence_core.matcher.jobspec import COMPUTE, virtual_jobspecs
from fluence_core.log import logger
from fluence_core.matcher.group import GroupMatch, GroupMiss, match_preferring
from fluence_core.matcher.base import Allocation, MatchOutcome
from fluence_core.graph import ResourceGraph
from fluence_core.models import Group
from fluence_core.matcher.readback import read_placements
from fluence_core.scheduler.feasible import FeasibleNodes
from fluence_core.errors import TopologyError
from fluence_core.topology import attempts, is_known, label_keys

AFFINITY_TRIES = 8
"""Domains the first member of a gang with affinity between its members may try."""

NamespaceLabels = Callable[[str], Mapping[str, str]]


def _terms(pod: PodFacts) -> Iterable[AffinityTerm]:
    yield from pod.affinity
    yield from pod.anti_affinity
    yield from (w.term for w in pod.preferred_affinity)
    yield from (w.term for w in pod.preferred_anti_affinity)


def _counted_by_filters(pod: PodFacts) -> bool:
    """Whether the pod asks for a resource the filters count and the graph does not."""
    prefix = f"{names.RESOURCE_DOMAIN}/"
    return any(amount > 0 and resource not in GRAPH_COUNTED and not resource.startswith(prefix)
               for resource, amount in pod.requests.items())


def entangled(members: Sequence[PodFacts], namespace_labels: NamespaceLabels) -> str | None:
    """Why the members of one group constrain each other (``None`` when they do not):
    a term or spread constraint of one names another, host ports, or a resource only the
    filters count. Members are compared by kind (equal but for the name), so a gang of
    alike members costs one comparison."""
    if len(members) < 2 or not any(
            p.has_affinity_terms or p.spread or p.host_ports or _counted_by_filters(p)
            for p in members):
        return None  # the common gang: nothing one member could say about another
    kinds: Counter[str] = Counter()
    first: dict[str, PodFacts] = {}
    for member in members:
        kind = member.signature()
        kinds[kind] += 1
        first.setdefault(kind, member)
    for kind, pod in first.items():
        if pod.host_ports:
            return "its members ask for host ports"
        if _counted_by_filters(pod):
            return "its members ask for a resource counted per node (extended resources)"
        others = [other for k, other in first.items() if k != kind or kinds[kind] > 1]
        for other in others:
            labels = namespace_labels(other.namespace)
            if any(term_matches(t, other, labels) for t in _terms(pod)):
                return "a pod affinity term of a member names another member"
            if any(c.selector is not None and not c.selector.empty
                   and other.namespace == pod.namespace and c.selector.matches(other.labels)
                   for c in pod.spread):
                return "a topology spread constraint of a member counts another member"
    return None


def _affine_keys(members: Sequence[PodFacts], namespace_labels: NamespaceLabels) -> set[str]:
    """The topology keys of required affinity terms that name a fellow member."""
    keys = set()
    for pod in members:
        for term in pod.affinity:
            if any(other is not pod and term_matches(term, other, namespace_labels(
                    other.namespace)) for other in members):
                keys.add(term.topology_key)
    return keys


class MemberPlacer:
    """Places an entangled group member by member.

    * member after member, in the group's order, each runs the filters against the
      snapshot holding the members placed so far, gets its preference tiers from it,
      and is matched alone on its own hostlist, holding what it got;
    * a member no node takes gives back everything the members before it hold: the
      gang is placed whole or not at all, with the filters' summary for that member;
    * the group's virtual jobspecs are matched last, for the whole group.

    **The bound.** One member at a time is kube-scheduler's own greedy order. It is
    exact for the common gang of alike members, each needing a distinct node or
    domain (anti-affinity), or a share of a node's extended resource: any node with
    room for one more is as good as another. Required affinity between members is
    where greed can miss: the first member's domain may lack room for the rest. Then
    the placement starts over with the first member kept out of that domain, up to
    :data:`AFFINITY_TRIES` domains.

    A gang that requires a topology level (:mod:`fluence_core.topology`) is held to it the
    same way: every member after the first goes only to the first member's domain of that
    level, and a first member whose domain cannot hold the rest is kept out of it on the next
    try, as for affinity.
    """

    def __init__(self, feasible_nodes: FeasibleNodes) -> None:
        self.feasible = feasible_nodes

    def place(self, group: Group, facts: Sequence[PodFacts],
              exclude: Sequence[str] | None = None,
              devices: DevicePlan | None = None) -> GroupMatch | GroupMiss:
        """Place ``group`` (its pods read as ``facts``) member by member, never on ``exclude``;
        with ``devices``, each member only where its claims can be allocated beside the
        devices the members before it took."""
        snapshot = self.feasible.snapshot()
        keys = _affine_keys(facts, snapshot.namespace_labels)
        levels = self.feasible.view.graph.levels
        try:
            required = attempts(levels, group.topology)[-1]
            shared = label_keys(levels, group.topology).required
        except TopologyError as error:
            return GroupMiss(group, COMPUTE, MatchOutcome.UNSATISFIABLE, detail=str(error))
        if group.topology.slices:
            return GroupMiss(group, COMPUTE, MatchOutcome.UNSATISFIABLE, detail=(
                f"group {group.name}: its members constrain each other (affinity, host ports, "
                "...), so they are placed one by one, and slices are not kept that way; "
                "drop the slice annotations or the constraints between members"))
        if required is not None:
            keys |= {level.label for level in levels[: required + 1]}
        keys |= set(shared)
        kept_out: set[str] = set(exclude or ())
        outcome = self._place_in_turn(group, facts, set(kept_out), set(), required, devices,
                                      shared)
        tries = 1
        while isinstance(outcome, tuple) and keys and tries < AFFINITY_TRIES:
            first_node = outcome[1]
            if first_node is None:
                break
            labels = snapshot.node(first_node)
            domain = {n.name for n in snapshot.nodes if labels is not None and all(
                n.labels.get(k) == labels.labels.get(k) for k in keys)}
            kept_out |= domain
            logger.debug("group %s: the first member's domain on %s could not hold the rest; "
                         "trying another", group.name, first_node)
            outcome = self._place_in_turn(group, facts, set(exclude or ()), kept_out, required,
                                          devices, shared)
            tries += 1
        return outcome[0] if isinstance(outcome, tuple) else outcome

    def _place_in_turn(self, group: Group, facts: Sequence[PodFacts], exclude: set[str],
                       first_excluded: set[str], required: int | None = None,
                       devices: DevicePlan | None = None, shared: Sequence[str] = (),
                       ) -> GroupMatch | tuple[GroupMiss, str | None]:
        """The group placed, or its miss with the node its first member had taken; with a
        ``required`` topology level, every member inside the first member's domain of it;
        with ``shared`` node labels (no configured level), on nodes with the first member's
        values of them; with ``devices``, every member's claims allocated where it goes."""
        if devices is not None:
            devices.reset()
        view = self.feasible.view
        snapshot = self.feasible.snapshot()
        held: list[Allocation] = []
        nodes: dict[str, str] = {}
        added: list[PodFacts] = []
        first_node: str | None = None
        try:
            for index, (request, pod) in enumerate(zip(group.pods, facts, strict=True)):
                answer = feasible(pod, snapshot, self.feasible.filters)
                out = exclude | first_excluded if index == 0 else exclude
                fit = [n for n in answer.feasible_nodes if n.name not in out]
                if required is not None:
                    fit = [n for n in fit if _in_domain(view.graph, n.name, required, first_node)]
                if shared:
                    first = snapshot.node(first_node) if first_node else None
                    want = {k: first.labels.get(k) for k in shared} if first else {}
                    fit = [n for n in fit if all(
                        n.labels.get(k) and n.labels.get(k) == want.get(k, n.labels.get(k))
                        for k in shared)]
                if devices is not None and devices.uses_claims(index) and fit:
                    reachable = len(fit)
                    fit = [n for n in fit if devices.fits(index, n.name)]
                    if not fit:
                        detail = devices.why(index, reachable)
                        if len(group.pods) > 1:
                            detail = (f"member {request.key} (after {index} of its gang "
                                      f"placed): {detail}")
                        miss = GroupMiss(group, COMPUTE, MatchOutcome.BUSY, detail=detail)
                        return self._give_back(held, miss, first_node, devices)
                allowed = [n.name for n in fit]
                if not allowed:
                    detail = (f"member {request.key} (after {index} of its gang placed): "
                              f"{answer.summary()}")
                    miss = GroupMiss(group, COMPUTE, MatchOutcome.BUSY, detail=detail)
                    return self._give_back(held, miss, first_node, devices)
                alone = dataclasses.replace(
                    request, allowed=frozenset(allowed), virtual={}, requires={},
                    preferred=self.feasible.preferred(pod, fit))
                matched = match_preferring(Group(group.name, (alone,), group.namespace),
                                           view.graph, view.matcher)
                if isinstance(matched, GroupMiss):
                    detail = f"member {request.key} (after {index} of its gang placed): " + (
                        self.feasible.explain_facts(pod) or matched.reason)
                    miss = GroupMiss(group, matched.kind, matched.outcome, detail=detail)
                    return self._give_back(held, miss, first_node, devices)
                held.extend(matched.allocations.values())
                node = matched.placements[request.key].node
                assert node is not None
                if devices is not None and devices.uses_claims(index):
                    devices.take(index, node)
                nodes[request.key] = node
                first_node = first_node or node
                there = pod.on(node)
                snapshot.add(there)
                added.append(there)
            virtual: dict[str, Allocation] = {}
            for spec in virtual_jobspecs(group, view.graph):
                allocation = view.matcher.match_allocate(spec.jobspec)
                if allocation is None:
                    found = getattr(view.matcher, "last_outcome", None) or MatchOutcome.BUSY
                    held.extend(virtual.values())
                    return self._give_back(held, GroupMiss(group, spec.kind, found), first_node,
                                           devices)
                virtual[spec.kind] = allocation
        finally:
            for there in added:
                snapshot.remove(there)
        placements = read_placements(group, virtual)
        for key, node in nodes.items():
            placements[key].node = node
        allocations = {f"{COMPUTE}-{i}": a for i, a in enumerate(held)}
        allocations.update(virtual)
        return GroupMatch(group, allocations, placements)

    def _give_back(self, held: list[Allocation], miss: GroupMiss, first_node: str | None,
                   devices: DevicePlan | None = None) -> tuple[GroupMiss, str | None]:
        if devices is not None:
            devices.reset()
        for allocation in held:
            self.feasible.view.matcher.cancel(allocation.jobid)
        return miss, first_node



def _in_domain(graph: ResourceGraph, node: str, level: int, first: str | None) -> bool:
    """Whether ``node`` may take a member of a gang required inside one domain of ``level``:
    a real domain's node, and the first member's domain once it is placed."""
    if not graph.has_node(node):
        return False
    domain = graph.node(node).domain(level)
    if first is None:
        return is_known(domain)
    return domain == graph.node(first).domain(level)
