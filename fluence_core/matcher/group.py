"""Matching a whole group, all or nothing, with a log of what was sent and read.

A group needs one compute jobspec per pod shape and one per virtual type. A
:class:`~fluence_core.matcher.base.GroupMatcher` (the embedded matcher) holds
them all in one joint match. Any other matcher (Fluxion) gets them one after
another, the first that does not fit cancelling the ones already held, so a
group never holds part of what it needs; when the group has several compute
jobspecs, they are sent most-constrained first, and on a miss in other orders,
up to :data:`MAX_ORDERS` of them.

**The bound for other matchers.** With at most 4 pod shapes every order is
tried (4! = 24), so a group is refused only when no order of whole shapes fits;
with more shapes only the first 24 orders (most-constrained first, then the
permutations that keep the most-constrained shapes in front longest) are.
Within one jobspec the matcher's own traversal decides where the pods of that
shape go; orders cannot change that, so a fit needing a shape split across
nodes differently from that traversal can still be missed.

**Topology.** With topology levels in the graph a group is matched level by level
(:func:`fluence_core.topology.attempts`): at a level, every compute jobspec is held to
one domain of it. A joint matcher gets the level in the jobspecs and chooses the domain
itself. Any other matcher (Fluxion), and shared pods (which the pooled layer places
apart), get the domains one by one, best fit first, each as a ``hostlist``: real Fluxion
(flux-sched's libreapi_cli) matches a jobspec's resources below its first matched vertex
against that vertex's children only, so ``rack count:1 -> slot -> core`` finds no core
under a rack whose children are nodes (it answers "busy" on an empty graph, "can never
fit" at a wider level, and fails with "traverser: Success" when the slot asks for memory
too); ``rack -> node -> slot`` would put every pod on one node. A required level is
never left: the group misses, and the miss names the best domain and what it lacks
(:func:`.domains.short_of`).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from itertools import islice, permutations
from typing import Iterator, Sequence, TypeGuard

from fluence_core.errors import TopologyError
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.domains import best_fit, fewest_children, rooms, short_of
from fluence_core.matcher.jobspec import (
    COMPUTE, GroupJobspec, compute_parts, group_jobspecs, is_compute,
)
from fluence_core.log import logger
from fluence_core.matcher.base import Allocation, GroupMatcher, GroupRefusal, Matcher, MatchOutcome
from fluence_core.models import Group, PodRequest
from fluence_core.matcher.readback import PodPlacement, read_placements
from fluence_core.topology import attempts

MAX_ORDERS = 24
"""Orders of a group's compute jobspecs tried on a matcher that cannot match them jointly."""


@dataclass
class GroupMatch:
    """A group that fits: its allocations by jobspec kind and a placement per pod."""

    group: Group
    allocations: dict[str, Allocation]
    placements: dict[str, PodPlacement]
    level: int | None = None
    """The topology level whose one domain holds the group (None: not held to one)."""

    @property
    def jobids(self) -> list[int]:
        return [a.jobid for a in self.allocations.values()]


@dataclass
class GroupMiss:
    """A group that does not fit, and which jobspec stopped it."""

    group: Group
    kind: str
    outcome: MatchOutcome
    jobspecs: list[GroupJobspec] = field(default_factory=list)
    detail: str | None = None
    """Why, when more is known than which jobspec missed (a member placed one by one)."""

    @property
    def reason(self) -> str:
        if self.detail:
            return self.detail
        return f"group {self.group.name}: the {self.kind} jobspec {self.outcome.value}"


def match_preferring(
    group: Group,
    graph: ResourceGraph,
    matcher: Matcher,
    *,
    exclude_nodes: Sequence[str] | None = None,
) -> GroupMatch | GroupMiss:
    """:func:`match_group` on the pods' preference tiers, best first, then on their whole
    feasible sets: the first that holds the whole group wins.

    At attempt ``k`` each pod with preferences is held to its ``k``-th tier (its whole
    ``allowed`` once it has no more tiers), so a gang widens all at once and never
    holds part of a tier. A group without preferences is matched once, as before.
    """
    depth = max((len(pod.preferred) for pod in group.pods), default=0)
    for level in range(depth):
        narrowed = dataclasses.replace(group, pods=tuple(
            dataclasses.replace(pod, allowed=pod.preferred[level], preferred=())
            if level < len(pod.preferred) else pod
            for pod in group.pods
        ))
        outcome = _match(narrowed, graph, matcher, exclude_nodes)
        if isinstance(outcome, GroupMatch):
            logger.debug("group %s placed on its preference tier %d", group.name, level + 1)
            return GroupMatch(group, outcome.allocations, outcome.placements, outcome.level)
    return match_group(group, graph, matcher, exclude_nodes=exclude_nodes)


def match_group(
    group: Group,
    graph: ResourceGraph,
    matcher: Matcher,
    *,
    exclude_nodes: Sequence[str] | None = None,
) -> GroupMatch | GroupMiss:
    """Hold every jobspec of ``group`` or none of them."""
    outcome = _match(group, graph, matcher, exclude_nodes)
    if isinstance(outcome, GroupMiss):
        logger.info(
            "group %s does not fit: %s jobspec %s", group.name, outcome.kind, outcome.outcome.value
        )
    return outcome


def _match(
    group: Group, graph: ResourceGraph, matcher: Matcher, exclude_nodes: Sequence[str] | None
) -> GroupMatch | GroupMiss:
    """The group at each topology level in turn (see the module docstring)."""
    try:
        tries = attempts(graph.levels, group.topology)
    except TopologyError as error:
        return GroupMiss(group, COMPUTE, MatchOutcome.UNSATISFIABLE, detail=str(error))
    if tries[-1] is None and len(group.pods) == 1 and group.pods[0].shared:
        # One pod is inside one domain wherever it goes; a shared one is placed by the
        # pool, which takes the tightest domain itself when it must lease a core (asking
        # it domain by domain cost 40 ms a pod on 5,000 nodes).
        tries = [None]
    miss: GroupMiss | None = None
    for level in tries:
        outcome = _match_at(group, graph, matcher, exclude_nodes, level)
        if isinstance(outcome, GroupMatch):
            if level is not None:
                logger.debug("group %s placed inside one %s", group.name, graph.levels[level].type)
            return outcome
        miss = outcome
    assert miss is not None
    required = tries[-1]
    if required is not None and miss.detail is None and is_compute(miss.kind):
        miss.detail = short_of(graph, matcher, group, required)
    return miss


def _match_at(
    group: Group, graph: ResourceGraph, matcher: Matcher, exclude_nodes: Sequence[str] | None,
    level: int | None,
) -> GroupMatch | GroupMiss:
    if level is not None and _domain_by_domain(group, matcher):
        return _match_domain_by_domain(group, graph, matcher, exclude_nodes, level)
    return _match_specs(group, graph, matcher, group_jobspecs(
        group, graph, exclude_nodes=list(exclude_nodes or []), level=level), level)


def _domain_by_domain(group: Group, matcher: Matcher) -> bool:
    """Whether the domains of a level must be tried here, one by one: the matcher cannot
    hold the group's compute jobspecs to one domain itself (see the module docstring)."""
    if any(pod.shared for pod in group.pods):
        return True
    return not _matches_jointly(matcher)


def _match_domain_by_domain(
    group: Group, graph: ResourceGraph, matcher: Matcher, exclude_nodes: Sequence[str] | None,
    level: int,
) -> GroupMatch | GroupMiss:
    found = rooms(graph, matcher, level)
    members = graph.domains(level)
    below = rooms(graph, matcher, level + 1) if level + 1 < len(graph.levels) else {}
    miss: GroupMiss | None = None
    for domain in best_fit(found, group):
        whole = [node.name for node in members[domain]]
        for within in (fewest_children(graph, below, domain, group), whole):
            if within is None:
                continue
            specs = group_jobspecs(group, graph, exclude_nodes=list(exclude_nodes or []),
                                   within=within)
            outcome = _match_specs(group, graph, matcher, specs, level)
            if isinstance(outcome, GroupMatch):
                return outcome
            if miss is None:
                miss = outcome
    return miss or GroupMiss(group, COMPUTE, MatchOutcome.BUSY)


def _match_specs(
    group: Group, graph: ResourceGraph, matcher: Matcher, specs: list[GroupJobspec],
    level: int | None,
) -> GroupMatch | GroupMiss:
    if logger.isEnabledFor(logging.DEBUG):  # a jobspec's JSON costs more than its match
        for spec in specs:
            logger.debug("match %s/%s jobspec %s", group.name, spec.kind, spec.to_json())
    if _matches_jointly(matcher):
        outcome = _match_jointly(group, specs, matcher)
    else:
        outcome = _match_in_orders(group, specs, graph, matcher)
    if isinstance(outcome, GroupMiss):
        return outcome
    placements = read_placements(group, outcome)
    if logger.isEnabledFor(logging.DEBUG):  # the binder logs each bound group at INFO
        for kind, allocation in outcome.items():
            logger.debug("group %s/%s allocated %s", group.name, kind, allocation.summary())
        logger.debug(
            "group %s placed: %s",
            group.name,
            ", ".join(
                f"{p.pod}->{p.node or '-'}{'@' + p.backend if p.backend else ''}"
                for p in placements.values()
            ),
        )
    return GroupMatch(group, outcome, placements, level)


_JOINT: dict[type, bool] = {}


def _matches_jointly(matcher: Matcher) -> TypeGuard[GroupMatcher]:
    """Whether ``matcher`` is a GroupMatcher, decided once per class (an isinstance check
    against a runtime-checkable protocol walks the protocol's members every time)."""
    kind = type(matcher)
    joint = _JOINT.get(kind)
    if joint is None:
        joint = _JOINT[kind] = isinstance(matcher, GroupMatcher)
    return joint


def _match_jointly(
    group: Group, specs: list[GroupJobspec], matcher: GroupMatcher
) -> dict[str, Allocation] | GroupMiss:
    placed = matcher.match_allocate_all([spec.jobspec for spec in specs])
    if isinstance(placed, GroupRefusal):
        return GroupMiss(group, specs[placed.index].kind, placed.outcome, specs)
    return {spec.kind: allocation for spec, allocation in zip(specs, placed)}


def _match_in_orders(
    group: Group, specs: list[GroupJobspec], graph: ResourceGraph, matcher: Matcher
) -> dict[str, Allocation] | GroupMiss:
    first_miss: GroupMiss | None = None
    for order in compute_orders(group, specs, graph):
        outcome = _match_in_turn(group, order, matcher)
        if not isinstance(outcome, GroupMiss):
            return outcome
        if first_miss is None:
            first_miss = outcome
        if outcome.outcome is MatchOutcome.UNSATISFIABLE and not is_compute(outcome.kind):
            break  # a virtual type that can never fit: no order of the rest helps
    assert first_miss is not None
    first_miss.jobspecs = specs
    return first_miss


def _match_in_turn(
    group: Group, specs: Sequence[GroupJobspec], matcher: Matcher
) -> dict[str, Allocation] | GroupMiss:
    """Match each jobspec in turn; on the first miss cancel what was taken."""
    held: dict[str, Allocation] = {}
    for spec in specs:
        allocation = matcher.match_allocate(spec.jobspec)
        if allocation is None:
            outcome = getattr(matcher, "last_outcome", None) or MatchOutcome.BUSY
            for taken in held.values():
                matcher.cancel(taken.jobid)
            return GroupMiss(group, spec.kind, outcome, list(specs))
        held[spec.kind] = allocation
    return held


def compute_orders(
    group: Group, specs: Sequence[GroupJobspec], graph: ResourceGraph
) -> Iterator[list[GroupJobspec]]:
    """The group's jobspecs in the orders to try: compute jobspecs most-constrained first, then
    other permutations of them (at most :data:`MAX_ORDERS` in all), virtual ones after.

    A group of one pod shape has one order: it is not ranked, since ranking counts the nodes
    each shape fits (a walk of every node, which was most of a lone pod's cost on a large
    cluster with a matcher that matches one jobspec at a time)."""
    compute = [spec for spec in specs if is_compute(spec.kind)]
    rest = [spec for spec in specs if not is_compute(spec.kind)]
    if len(compute) < 2:
        yield compute + rest
        return
    shapes = {kind: members[0] for kind, members in compute_parts(list(group.pods))}
    position = {spec.kind: i for i, spec in enumerate(compute)}

    def key(spec: GroupJobspec) -> tuple[int, int, int, int, int]:
        pod = shapes[spec.kind]
        return (_room(pod, graph), -pod.gpus, -pod.memory_mib, -pod.cores, position[spec.kind])

    ranked = sorted(compute, key=key)
    for order in islice(permutations(ranked), MAX_ORDERS):
        yield list(order) + rest


def _room(pod: PodRequest, graph: ResourceGraph) -> int:
    """How many nodes of the empty graph could hold one pod of this shape."""
    selector = set(pod.node_selector)
    return sum(
        1
        for node in graph.nodes
        if not node.down
        and (node.name in pod.allowed if pod.allowed is not None else node.schedulable)
        and node.cores >= pod.cores
        and node.gpus >= pod.gpus
        and node.memory_chunks * node.chunk_mib >= pod.memory_mib
        and selector <= set(node.labels.items())
    )
