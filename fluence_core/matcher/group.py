"""Matching a whole group, all or nothing, with a log of what was sent and read.

A group needs one compute jobspec per pod shape and one per virtual type. A
:class:`~fluence_core.matcher.base.GroupMatcher` (the embedded matcher) holds them all in
one joint match. Any other matcher (Fluxion) gets them one after another, the first that
does not fit cancelling the ones already held, so a group never holds part of what it
needs; when the group has several compute jobspecs, they are sent most-constrained first,
and on a miss in other orders, up to :data:`MAX_ORDERS` of them. With topology levels a
group is matched level by level, and a required level is never left.
:func:`match_group` states the bound on orders, how each matcher is held to a domain and
why, and how label keys and slices are matched.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field
from itertools import islice, permutations
from typing import Any, Iterable, Iterator, Mapping, Sequence, TypeGuard

from fluence_core.errors import TopologyError
from fluence_core.graph import Domain, NodeVertex, ResourceGraph
from fluence_core.matcher.domains import (
    best_fit, fewest_children, held_by_node, need, partition, rooms, rooms_of, short_of,
    short_of_labels,
)
from fluence_core.matcher.jobspec import (
    COMPUTE, GroupJobspec, compute_parts, group_jobspecs, is_compute, slice_kind,
)
from fluence_core.log import logger
from fluence_core.matcher.base import Allocation, GroupMatcher, GroupRefusal, Matcher, MatchOutcome
from fluence_core.models import Group, PodRequest
from fluence_core.matcher.readback import PodPlacement, read_placements
from fluence_core.topology import LabelKeys, attempts, label_keys, slice_error

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
    slices: tuple[SlicePlacement, ...] = ()
    """Where each slice went, for a group cut into slices (:attr:`Constraint.slices`)."""

    @property
    def jobids(self) -> list[int]:
        return [a.jobid for a in self.allocations.values()]


@dataclass(frozen=True)
class SlicePlacement:
    """One slice of a sliced group (its narrowest layer's): its pods, and the domain that
    holds it at each slice layer, widest first (``example.com/rack=b1/r2``)."""

    index: int
    pods: tuple[str, ...]
    domains: tuple[str, ...]


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
            return dataclasses.replace(outcome, group=group)
    return match_group(group, graph, matcher, exclude_nodes=exclude_nodes)


def match_group(
    group: Group,
    graph: ResourceGraph,
    matcher: Matcher,
    *,
    exclude_nodes: Sequence[str] | None = None,
) -> GroupMatch | GroupMiss:
    """Hold every jobspec of ``group`` or none of them.

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

    **Keys that are no level, and slices.** A key the group names that is no configured level
    is a node label: the group is matched inside one set of nodes sharing its value, best fit
    first, and level by level inside it. A group cut into slices
    (:attr:`~fluence_core.topology.Constraint.slices`) is matched slice by slice inside the
    domain of each level tried (:class:`_Slicer`); its allocations are kept per slice
    (:func:`~fluence_core.matcher.jobspec.slice_kind`).
    """
    outcome = _match(group, graph, matcher, exclude_nodes)
    if isinstance(outcome, GroupMiss):
        logger.info(
            "group %s does not fit: %s jobspec %s", group.name, outcome.kind, outcome.outcome.value
        )
    return outcome


def _match(
    group: Group, graph: ResourceGraph, matcher: Matcher, exclude_nodes: Sequence[str] | None
) -> GroupMatch | GroupMiss:
    """The group at each topology level in turn (see :func:`match_group`), inside one set
    of nodes sharing the values of the node labels it names that are not levels."""
    try:
        tries = attempts(graph.levels, group.topology)
        labels = label_keys(graph.levels, group.topology)
    except TopologyError as error:
        return GroupMiss(group, COMPUTE, MatchOutcome.UNSATISFIABLE, detail=str(error))
    uncut = slice_error(group.topology, len(group.pods))
    if uncut is not None:
        return GroupMiss(group, COMPUTE, MatchOutcome.UNSATISFIABLE, detail=uncut)
    if labels:
        return _match_by_labels(group, graph, matcher, exclude_nodes, tries, labels)
    return _match_levels(group, graph, matcher, exclude_nodes, tries)


def _match_by_labels(
    group: Group, graph: ResourceGraph, matcher: Matcher, exclude_nodes: Sequence[str] | None,
    tries: list[int | None], labels: LabelKeys,
) -> GroupMatch | GroupMiss:
    """The group inside one set of nodes sharing the values of the node labels it names that
    are no configured level, best fit first, as kube-scheduler keeps a PodGroup inside one
    domain of any ``topology[].key``; inside it, the configured levels as always. Only
    preferred: the whole cluster after."""
    keys = labels.required or labels.preferred
    parts = partition(graph, graph.nodes, keys)
    found = rooms_of(parts, held_by_node(matcher))
    miss: GroupMiss | None = None
    for domain in best_fit(found, group):
        inside = _held_inside(group, parts[domain])
        outcome = _match_levels(inside, graph, matcher, exclude_nodes, tries)
        if isinstance(outcome, GroupMatch):
            logger.debug("group %s placed inside %s", group.name,
                         ",".join(f"{k}={v}" for k, v in zip(keys, domain)))
            return dataclasses.replace(outcome, group=group)
        miss = miss or dataclasses.replace(outcome, group=group)
    if not labels.required:
        return _match_levels(group, graph, matcher, exclude_nodes, tries)
    if miss is None or miss.detail is None:
        miss = miss or GroupMiss(group, COMPUTE, MatchOutcome.BUSY)
        miss.detail = short_of_labels(graph, matcher, group, keys)
    return miss


def _held_inside(group: Group, nodes: Sequence[NodeVertex]) -> Group:
    """``group`` with every pod's nodes narrowed to ``nodes`` (its ``nodeSelector`` and the
    cordons still apply where no filter said which nodes it may use)."""
    names_in = frozenset(node.name for node in nodes)
    seen: dict[tuple[frozenset[str] | None, tuple[tuple[str, str], ...]], frozenset[str]] = {}

    def allowed(pod: PodRequest) -> frozenset[str]:
        key = (pod.allowed, pod.node_selector)
        found = seen.get(key)
        if found is None:
            if pod.allowed is not None:
                found = pod.allowed & names_in
            else:
                selector = set(pod.node_selector)
                found = frozenset(n.name for n in nodes
                                  if n.schedulable and selector <= set(n.labels.items()))
            seen[key] = found
        return found

    return dataclasses.replace(group, pods=tuple(
        dataclasses.replace(pod, allowed=allowed(pod)) for pod in group.pods))


def _match_levels(
    group: Group, graph: ResourceGraph, matcher: Matcher, exclude_nodes: Sequence[str] | None,
    tries: list[int | None],
) -> GroupMatch | GroupMiss:
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
    if group.topology.slices:
        return _match_sliced(group, graph, matcher, exclude_nodes, level)
    if level is not None and _domain_by_domain(group, matcher):
        return _match_domain_by_domain(group, graph, matcher, exclude_nodes, level)
    return _match_specs(group, graph, matcher, group_jobspecs(
        group, graph, exclude_nodes=list(exclude_nodes or []), level=level), level)


def _domain_by_domain(group: Group, matcher: Matcher) -> bool:
    """Whether the domains of a level must be tried here, one by one: the matcher cannot
    hold the group's compute jobspecs to one domain itself (see :func:`match_group`)."""
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


def _match_sliced(
    group: Group, graph: ResourceGraph, matcher: Matcher, exclude_nodes: Sequence[str] | None,
    level: int | None,
) -> GroupMatch | GroupMiss:
    """The group cut into its slices inside one domain of ``level`` (anywhere when None),
    domains best fit first (see :class:`_Slicer`)."""
    held = held_by_node(matcher)
    if level is None:
        outer = [list(graph.nodes)]
    else:
        members = graph.domains(level)
        outer = [members[d] for d in best_fit(rooms_of(members, held), group)]
    slicer = _Slicer(group, graph, matcher, exclude_nodes, level, held)
    for nodes in outer:
        placed = slicer.place(nodes)
        if placed is not None:
            return placed
    if slicer.miss is not None:
        return slicer.miss
    return GroupMiss(group, COMPUTE, MatchOutcome.BUSY)


_DIGITS = re.compile(r"(\d+)")


def _index_order(name: str) -> tuple[tuple[int, str], ...]:
    """A pod's place among its group's pods when they are cut into slices: the numbers in
    its name compared as numbers (an Indexed Job names its pods ``<job>-<index>-<suffix>``,
    a JobSet ``<jobset>-<job>-<job index>-<index>-<suffix>``; ``g-10`` comes after
    ``g-9``), as Kueue cuts slices by pod index."""
    return tuple((int(part), "") if part.isdigit() else (-1, part)
                 for part in _DIGITS.split(name))


def _shape_of(pods: Sequence[PodRequest]) -> tuple[int, int, int] | None:
    """The (cores, GPUs, MiB) every whole-core pod of ``pods`` asks for, None when they
    differ (or some draw from the shared pool)."""
    shapes = {(p.cores, p.gpus, p.memory_mib) for p in pods}
    if len(shapes) != 1 or any(p.shared for p in pods):
        return None
    shape = shapes.pop()
    return shape if any(shape) else None


@dataclass
class _Slice:
    placement: SlicePlacement
    allocations: dict[str, Allocation]
    placements: dict[str, PodPlacement]
    covers: int = 1
    """How many slices, from this one on, its allocations hold (a run held by one match)."""


class _Slicer:
    """Cuts a group into its slices and holds each inside one domain of its layer, the
    whole inside one set of nodes (a domain of the level tried), or holds nothing.

    Layer by layer, widest first, the pods are taken in order, ``size`` at a time; each
    slice goes to the domain of its layer that holds it most tightly: for pods of one shape,
    the fewest pods of that shape its nodes could still take, node by node, then the least
    free GPUs or cores; for several shapes, the least free totals that cover the slice. So
    slices fill partly used racks before whole ones are opened, as whole groups do. The
    narrowest slices are matched one by one, each held to its domain's nodes by a
    ``hostlist``, by any matcher; a slice that no domain's nodes take gives back every slice
    before it. Slices are not moved once held: a cut that only another assignment of
    earlier slices would allow is missed.
    """

    def __init__(self, group: Group, graph: ResourceGraph, matcher: Matcher,
                 exclude_nodes: Sequence[str] | None, level: int | None,
                 held: Mapping[str, tuple[int, int, int]]) -> None:
        self.group, self.graph, self.matcher, self.level = group, graph, matcher, level
        self.exclude = list(exclude_nodes or [])
        self.layers = group.topology.slices
        none = (0, 0, 0)
        self.free: dict[str, list[int]] = {}
        """Free (cores, GPUs, MiB) of each usable node, kept as slices are held."""
        for node in graph.nodes:
            if not node.down:
                cores, gpus, mib = held.get(node.name, none)
                self.free[node.name] = [node.cores - cores, node.gpus - gpus,
                                        node.memory_chunks * node.chunk_mib - mib]
        self.held: list[_Slice] = []
        self.miss: GroupMiss | None = None

    def place(self, nodes: Sequence[NodeVertex]) -> GroupMatch | None:
        pods = sorted(self.group.pods, key=lambda pod: _index_order(pod.name))
        if not self._layer(pods, nodes, 0, ()):
            self._give_back(0)
            return None
        allocations: dict[str, Allocation] = {}
        placements: dict[str, PodPlacement] = {}
        for held in self.held:
            first = held.placement.index
            for kind, allocation in held.allocations.items():
                allocations[slice_kind(kind, first, first + held.covers - 1)] = allocation
            placements.update(held.placements)
        logger.debug("group %s placed in %d slices: %s", self.group.name, len(self.held),
                     "; ".join(" ".join(h.placement.domains) for h in self.held))
        return GroupMatch(self.group, allocations, placements, self.level,
                          tuple(h.placement for h in self.held))

    def _layer(self, pods: list[PodRequest], nodes: Sequence[NodeVertex], depth: int,
               where: tuple[str, ...]) -> bool:
        layer = self.layers[depth]
        parts = partition(self.graph, nodes, [layer.key])
        if not self._may_hold(pods, parts, layer.size):
            self._no_domain(pods[: layer.size], 1, len(pods) // layer.size, layer.key, where)
            return False
        if depth + 1 == len(self.layers) and self._hold_runs(pods, parts, layer.size, where):
            return True
        known: dict[tuple[Domain, Any], tuple[int, ...] | None] = {}
        for start in range(0, len(pods), layer.size):
            chunk = pods[start: start + layer.size]
            shape = _shape_of(chunk)
            for domain in parts:
                if (domain, shape) not in known:
                    known[domain, shape] = self._tightness(parts[domain], chunk, shape)
            fitting = sorted((d for d in parts if known[d, shape] is not None),
                             key=lambda d: (known[d, shape], d))
            for domain in fitting:
                mark = len(self.held)
                here = (*where, f"{layer.key}={'/'.join(domain)}")
                if depth + 1 < len(self.layers):
                    done = self._layer(chunk, parts[domain], depth + 1, here)
                else:
                    done = self._hold(chunk, parts[domain], here)
                if done:
                    for key in [k for k in known if k[0] == domain]:
                        del known[key]
                    break
                self._give_back(mark)
            else:
                self._no_domain(chunk, start // layer.size + 1, len(pods) // layer.size,
                                layer.key, where)
                return False
        return True

    def _hold_runs(self, pods: list[PodRequest], parts: Mapping[Domain, list[NodeVertex]],
                   size: int, where: tuple[str, ...]) -> bool:
        """Hold the narrowest slices of ``pods`` of one shape in runs, one match per domain:
        the domain of each slice is chosen as slice by slice (:meth:`_tightness`, tightest
        first), its room counted down by the slice's pods, cores and GPUs (exact for one
        shape: each pod takes one of a node's places for that shape, wherever it lands), so
        each domain takes one run of consecutive slices; then each run is matched at once,
        held to its domain's nodes. A matcher walks its graph once per domain, not once per
        slice. False, holding nothing, for several shapes or when a run's match misses:
        slice by slice decides then."""
        shape = _shape_of(pods)
        if shape is None or len(pods) <= size:
            return False
        cores, gpus, _ = need(dataclasses.replace(self.group, pods=tuple(pods[:size])))
        room: dict[Domain, list[int]] = {}
        for domain, nodes in parts.items():
            found = self._tightness(nodes, pods[:size], shape)
            if found is not None:
                room[domain] = ([found[0], found[2], found[1]] if gpus
                                else [found[0], found[1], found[2]])  # pods, cores, GPUs
        runs: list[tuple[Domain, int, int]] = []
        for start in range(0, len(pods), size):
            fitting = [d for d, (n, c, g) in room.items() if n >= size and c >= cores
                       and g >= gpus]
            if not fitting:
                return False
            chosen = min(fitting, key=lambda d: ((room[d][0], room[d][2], room[d][1]) if gpus
                                                 else tuple(room[d]), d))
            left = room[chosen]
            left[0], left[1], left[2] = left[0] - size, left[1] - cores, left[2] - gpus
            if runs and runs[-1][0] == chosen:
                runs[-1] = (chosen, runs[-1][1], start + size)
            else:
                runs.append((chosen, start, start + size))
        mark = len(self.held)
        for domain, start, stop in runs:
            here = (*where, f"{self.layers[-1].key}={'/'.join(domain)}")
            if not self._hold_run(pods[start:stop], parts[domain], here, size):
                self._give_back(mark)
                self.miss = None
                return False
        return True

    def _hold_run(self, run: list[PodRequest], nodes: Sequence[NodeVertex],
                  where: tuple[str, ...], size: int) -> bool:
        """Hold consecutive slices of ``size`` pods in one match inside ``nodes``."""
        part = _held_inside(dataclasses.replace(self.group, pods=tuple(run)), nodes)
        specs = group_jobspecs(part, self.graph, exclude_nodes=self.exclude)
        outcome = _match_specs(part, self.graph, self.matcher, specs, self.level)
        if isinstance(outcome, GroupMiss):
            return False
        self._count(outcome.allocations.values(), -1)
        count = len(run) // size
        for number in range(count):
            chunk = run[number * size: (number + 1) * size]
            placement = SlicePlacement(len(self.held), tuple(p.key for p in chunk), where)
            self.held.append(_Slice(
                placement, outcome.allocations if number == 0 else {},
                {p.key: outcome.placements[p.key] for p in chunk}, count if number == 0 else 1))
        return True

    def _may_hold(self, pods: Sequence[PodRequest], parts: Mapping[Domain, list[NodeVertex]],
                  size: int) -> bool:
        """Whether ``parts`` could hold every slice of ``size`` of ``pods`` of one shape, a
        part holding as many whole slices as the pods of that shape its nodes could take
        (always, for several shapes: slice by slice decides). Checked before any slice is
        held, so a domain whose free totals cover the group but whose nodes cannot take
        its slices costs no matches that are given back."""
        shape = _shape_of(pods)
        if shape is None:
            return True
        slices = 0
        for part in parts.values():
            pods_there = 0
            for node in part:
                free = self.free.get(node.name)
                if free is not None:
                    pods_there += min(free[0] // shape[0] if shape[0] else size,
                                      free[1] // shape[1] if shape[1] else size,
                                      free[2] // shape[2] if shape[2] else size)
            slices += pods_there // size
        return slices * size >= len(pods)

    def _tightness(self, nodes: Sequence[NodeVertex], chunk: Sequence[PodRequest],
                   shape: tuple[int, int, int] | None) -> tuple[int, ...] | None:
        """How tightly ``nodes`` hold ``chunk`` (smaller: tighter), None when they cannot:
        for one ``shape``, the pods of it the nodes could take, node by node; else the
        free totals."""
        cores, gpus, mib = need(dataclasses.replace(self.group, pods=tuple(chunk)))
        free_cores = free_gpus = pods = 0
        for node in nodes:
            free = self.free.get(node.name)
            if free is None:
                continue
            free_cores += max(0, free[0])
            free_gpus += max(0, free[1])
            if shape is not None:
                pods += min(free[0] // shape[0] if shape[0] else len(chunk),
                            free[1] // shape[1] if shape[1] else len(chunk),
                            free[2] // shape[2] if shape[2] else len(chunk))
        if free_cores < cores or free_gpus < gpus or (shape is not None and pods < len(chunk)):
            return None
        return (pods, free_gpus, free_cores) if gpus else (pods, free_cores, free_gpus)

    def _no_domain(self, chunk: Sequence[PodRequest], number: int, count: int, key: str,
                   where: tuple[str, ...]) -> None:
        if self.miss is not None and self.miss.detail is not None:
            return
        cores, gpus, _ = need(dataclasses.replace(self.group, pods=tuple(chunk)))
        self.miss = GroupMiss(self.group, COMPUTE, MatchOutcome.BUSY, detail=(
            f"group {self.group.name}: slice {number} of {count}"
            + (f" in {' '.join(where)}" if where else "")
            + f" ({len(chunk)} pods, {cores} cores" + (f", {gpus} GPUs" if gpus else "")
            + f") fits inside no one domain of {key} with the room left"))

    def _hold(self, chunk: list[PodRequest], nodes: Sequence[NodeVertex],
              where: tuple[str, ...]) -> bool:
        # each pod held to the slice's domain: its jobspec names those nodes, and no walk of
        # the whole graph is needed to say which nodes it may use
        part = _held_inside(dataclasses.replace(self.group, pods=tuple(chunk)), nodes)
        specs = group_jobspecs(part, self.graph, exclude_nodes=self.exclude)
        outcome = _match_specs(part, self.graph, self.matcher, specs, self.level)
        if isinstance(outcome, GroupMiss):
            if self.miss is None:
                self.miss = outcome
            return False
        self._count(outcome.allocations.values(), -1)
        placement = SlicePlacement(len(self.held), tuple(p.key for p in chunk), where)
        self.held.append(_Slice(placement, outcome.allocations, outcome.placements))
        return True

    def _give_back(self, mark: int) -> None:
        while len(self.held) > mark:
            held = self.held.pop()
            for allocation in held.allocations.values():
                self.matcher.cancel(allocation.jobid)
            self._count(held.allocations.values(), 1)

    def _count(self, allocations: Iterable[Allocation], sign: int) -> None:
        for allocation in allocations:
            for share in allocation.nodes:
                free = self.free.get(share.node)
                if free is not None:
                    free[0] += sign * len(share.cores)
                    free[1] += sign * len(share.gpus)
                    free[2] += sign * share.memory_mib


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
